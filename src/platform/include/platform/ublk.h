// ublk.h: the operating-system side of a ublk server (the driver is in
// Linux 6.0+, user copy in 6.5+; drivers/block/ublk_drv.c; ABI in
// platform/ublk_abi.h): the control ring
// on /dev/ublk-control, one queue's ring on /dev/ublkcN with its mmapped
// request descriptors and user-copy reads and writes, and the probes a
// server needs around them (is a disk in use, is a process alive, mark a
// thread an IO flusher). What the requests mean is the ublk layer's
// (src/ublk/); this file only moves bytes and commands.
//
// The flow (kublk.c of tools/testing/selftests/ublk, and the driver):
//   UblkControl::Open -> AddDevice -> SetParams -> per queue, on its own
//   thread: UblkQueueRing::Create (ring, descriptors) -> FetchAll ->
//   (another thread) Start, which returns once every tag is fetched ->
//   queue threads: Wait / handle / Commit ... until every tag is aborted
//   -> Stop -> queue rings and the char device closed -> Delete.
//
// Built with ZTIER_URING only (io_uring's URING_CMD carries every ublk
// command): otherwise UblkControl::Open and UblkQueueRing::Create return
// kUnsupported saying the build lacks io_uring.
//
// Errors: PosixError (ztier/status.h) of the failing call or of the
// command's negative CQE result, naming the command and the device id. A
// missing /dev/ublk-control is kNotFound with a message saying the kernel
// has no ublk.
//
// Thread safety: UblkControl's methods may be called from any thread; they
// are serialised on its one ring (so Start, which blocks until the queues
// have fetched, holds it meanwhile). A UblkQueueRing belongs to the thread
// that created it (its ring is single-issuer); its descriptor array may be
// read by that thread only while it owns the request (between a completion
// and the Commit). The free functions are thread-safe.
#ifndef ZTIER_PLATFORM_UBLK_H_
#define ZTIER_PLATFORM_UBLK_H_

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "platform/mapping.h"
#include "platform/mutex.h"
#include "platform/ublk_abi.h"
#include "platform/unique_fd.h"
#include "ztier/status.h"

struct io_uring_sqe;  // liburing's, in builds with io_uring

namespace ztier::platform {

inline constexpr const char* kUblkControlPath = "/dev/ublk-control";

// True when this build can serve ublk (built with ZTIER_URING).
bool UblkBuilt();

// "/dev/ublkcN", "/dev/ublkbN".
std::string UblkCharPath(std::uint32_t dev_id);
std::string UblkBlockPath(std::uint32_t dev_id);

// The byte offset on /dev/ublkcN of request (q_id, tag)'s data at `offset`
// (UBLK_F_USER_COPY; ublk_pos_to_hwq() and friends in the driver).
constexpr std::uint64_t UblkUserCopyOffset(std::uint16_t q_id,
                                           std::uint16_t tag,
                                           std::uint32_t offset) {
  return ublk::kIoBufOffset +
         (static_cast<std::uint64_t>(q_id) << ublk::kQidOff) +
         (static_cast<std::uint64_t>(tag) << ublk::kTagOff) + offset;
}

// The descriptor array of one queue: where it is in /dev/ublkcN and how
// long (ublk_max_cmd_buf_size() and ublk_queue_cmd_buf_size()), in this
// kernel's pages (UblkPageBytes(): 4 KiB, 16 KiB or 64 KiB).
std::uint64_t UblkPageBytes();
std::uint64_t UblkMaxCmdBufBytes();
std::uint64_t UblkCmdBufOffset(std::uint16_t q_id);
std::size_t UblkQueueCmdBufBytes(std::uint16_t depth);

class UblkControl {
 public:
  // Opens the control device and its ring (128-byte SQEs, which the driver
  // requires). kNotFound naming modprobe ublk_drv when `path` is missing;
  // kUnsupported without io_uring in this build.
  static Result<std::unique_ptr<UblkControl>> Open(
      const std::string& path = kUblkControlPath);
  ~UblkControl();
  UblkControl(const UblkControl&) = delete;
  UblkControl& operator=(const UblkControl&) = delete;

  // UBLK_U_CMD_ADD_DEV: info.dev_id is the id wanted, or UINT32_MAX for
  // any. Returns the driver's copy (the id given, its own flags added).
  // kBusy (EEXIST) when the id is taken.
  Result<ublk::CtrlDevInfo> AddDevice(const ublk::CtrlDevInfo& info);
  Status SetParams(std::uint32_t dev_id, const ublk::Params& params);
  // UBLK_U_CMD_START_DEV: blocks until every queue has fetched every tag.
  Status Start(std::uint32_t dev_id, pid_t server_pid);
  // UBLK_U_CMD_STOP_DEV: removes /dev/ublkbN (waiting for IO in flight,
  // which the queues must still serve) and aborts the fetched tags.
  Status Stop(std::uint32_t dev_id);
  // UBLK_U_CMD_DEL_DEV_ASYNC (6.9+), else UBLK_U_CMD_DEL_DEV, which waits
  // until the last opener of the device has gone.
  Status Delete(std::uint32_t dev_id);
  // UBLK_U_CMD_DEL_DEV_ASYNC only, which does not wait for the openers:
  // kUnsupported (and nothing done) where the kernel does not know it
  // (before 6.9).
  Status DeleteAsync(std::uint32_t dev_id);
  Result<ublk::CtrlDevInfo> GetInfo(std::uint32_t dev_id);
  // The ids of /dev/ublkcN in /dev (the driver's devices, live or not).
  std::vector<std::uint32_t> ListDevices();

 private:
  UblkControl();
  // One command, waited for: the CQE's result, or the submit's error. A
  // submit refused for a moment is retried; one refused for good, or a
  // failed wait, leaves the ring unused from then on (every later command
  // is kIoError). A wait fails (but for EINTR and EAGAIN, retried) only on
  // a ring broken for good, whose command may then never complete; that
  // the kernel still writes the caller's buffer after such a failure is
  // not excluded.
  Result<int> Command(std::uint32_t op, const ublk::CtrlCmd& cmd);

  struct Ring;
  internal::Mutex mu_;  // one command at a time on the ring
  int fd_ = -1;
  std::unique_ptr<Ring> ring_;
  std::uint64_t seq_ = 0;  // the user_data of the last command
  bool broken_ = false;
};

// One queue of a started-or-starting device: its io_uring (created on the
// calling thread, single-issuer with deferred task work where the kernel
// has them) and its descriptor array.
class UblkQueueRing {
 public:
  // A completion: a tag's FETCH or COMMIT_AND_FETCH came back with `res`
  // (ublk::kIoResOk: a request is there; kIoResAbort: the device stopped;
  // another negative errno: the command was refused).
  struct Completion {
    std::uint16_t tag;
    std::int32_t res;
  };
  // The tag of the wake read's completion (ArmWake); no request's tag.
  static constexpr std::uint16_t kWakeTag = 0xffff;

  // `char_fd` is /dev/ublkcN (kept open by the caller for this ring's life).
  static Result<std::unique_ptr<UblkQueueRing>> Create(int char_fd,
                                                       std::uint16_t q_id,
                                                       std::uint16_t depth);
  ~UblkQueueRing();
  UblkQueueRing(const UblkQueueRing&) = delete;
  UblkQueueRing& operator=(const UblkQueueRing&) = delete;

  std::uint16_t q_id() const { return q_id_; }
  std::uint16_t depth() const { return depth_; }
  // Tag `tag`'s descriptor (copy it before Commit).
  const ublk::IoDesc& desc(std::uint16_t tag) const {
    return descs_.as<const ublk::IoDesc>()[tag];
  }

  // Queues and submits UBLK_U_IO_FETCH_REQ for every tag. A kernel that
  // refuses for a while (io_uring_enter's EAGAIN, ENOMEM, EBUSY or EINTR;
  // a fetch completed at once with -ENOMEM, -EAGAIN or -EINTR, the set
  // that ublk::CommitRetries commits again) is asked again after a pause,
  // kFetchRetries times (pauses doubling from 1 ms to 64 ms: about 12 s),
  // so that a device does not fail to start for a moment's shortage.
  // Returned: any other error of the submission, or a fetch refused at
  // once for good (the first), or the refusal that outlasted the retries.
  Status FetchAll();
  static constexpr int kFetchRetries = 200;
  // Tests: `fault`, when set, is called before each submission of
  // FetchAll; a negative errno it returns stands for io_uring_enter's
  // result, and nothing is submitted that time (a fault-injecting
  // wrapper of the kernel's refusal).
  void InjectSubmitFaultsForTest(std::function<int()> fault) {
    submit_fault_ = std::move(fault);
  }
  // Queues UBLK_U_IO_COMMIT_AND_FETCH_REQ for `tag` with `result`; Wait
  // submits it.
  void Commit(std::uint16_t tag, std::int32_t result);
  // Queues a read of 8 bytes from `event_fd` (an eventfd the caller keeps
  // open for this ring's life) into *value, which completes, as a
  // Completion with tag kWakeTag, once another thread writes to it: a way
  // for other threads to wake Wait. Arm it again after each such
  // completion; one at a time. *value must outlive the ring, and stay
  // valid until no thread writes event_fd any more (the kernel cancels
  // an armed read after the ring closes, not at once).
  void ArmWake(int event_fd, std::uint64_t* value);
  // Submits what is queued and waits up to timeout_ms (-1: no limit) for
  // completions; fills `out` and returns how many (0 on timeout).
  Result<std::size_t> Wait(std::span<Completion> out, int timeout_ms);

  // User copy: the data of request `tag` at `offset`, whole or an error.
  // ReadRequest (the request is a WRITE: what to store); WriteRequest (a
  // READ: what the reader gets). Any thread may call them (UblkWriteRequest
  // needs no ring at all).
  Status ReadRequest(std::uint16_t tag, std::uint32_t offset,
                     std::span<std::byte> out) const;
  Status WriteRequest(std::uint16_t tag, std::uint32_t offset,
                      std::span<const std::byte> data) const;

 private:
  UblkQueueRing(int char_fd, std::uint16_t q_id, std::uint16_t depth);
  void QueueCmd(std::uint32_t op, std::uint16_t tag, std::int32_t result);
  ::io_uring_sqe* FreeSqe();  // a free submission entry (io_uring builds)

  struct Ring;
  const int char_fd_;
  const std::uint16_t q_id_;
  const std::uint16_t depth_;
  std::unique_ptr<Ring> ring_;
  Mapping descs_;
  std::function<int()> submit_fault_;  // InjectSubmitFaultsForTest
};

// UblkQueueRing::WriteRequest without the ring: the READ data of request
// `tag` of queue `q_id` on /dev/ublkcN `char_fd`, at `offset` (user copy,
// from any thread, while the request is the server's).
Status UblkWriteRequest(int char_fd, std::uint16_t q_id, std::uint16_t tag,
                        std::uint32_t offset, std::span<const std::byte> data);

// Opens `path` (as /dev/ublkcN, which udev may still be making: retries
// ENOENT, and EBUSY, for up to timeout_ms) read-write; the fd, or the
// open's error. A server gives it kUblkCharOpenTimeoutMs after ADD_DEV.
inline constexpr int kUblkCharOpenTimeoutMs = 5000;
Result<int> OpenUblkChar(const std::string& path, int timeout_ms);
void CloseFd(int fd);

// Who uses a block device, as zram asks before a reset (its disk_openers
// and claim), or "" for nobody: "mounted, swapped on or claimed" when an
// exclusive open (O_EXCL) fails with EBUSY; else "process PID (COMM)" for
// a process with it or one of its partitions open (any /proc/PID/fd this
// process may read: all of them as root, in its PID namespace), or
// "loopN" for a loop device backed by one of them. The device and its
// partitions are found by name in /sys/class/block (so a missing node in
// this /dev is no reason to call it unused); a device not there is
// unused. Descriptors are looked at by their cached attributes, so an
// unanswering NFS or FUSE mount cannot hang it. Openers in other PID
// namespaces are not seen. The answer holds for the moment it was taken.
Result<std::string> BlockDeviceUser(const std::string& path);

// BlockDeviceUser, keeping the exclusive open it makes: when `user` is
// "", `fd` is `path` opened O_EXCL (or -1 where this /dev has no node for
// it), so that no swapon, mount or other claim can take the device until
// it is closed, as zram's reset claims its disk before it looks at the
// openers (reset_store() in drivers/block/zram/zram_drv.c). A plain open
// (O_EXCL-less) by another process is not kept out. When `user` is not
// "", `fd` is -1.
struct BlockDeviceClaim {
  UniqueFd fd;
  std::string user;
};
Result<BlockDeviceClaim> ClaimUnusedBlockDevice(const std::string& path);

// What keeps block device `path`, stopped (its node and /sys entry gone),
// from being freed: "swap" when /proc/swaps lists it ("PATH (deleted)"),
// "the file system mounted on DIR" when /proc/self/mounts has it as a
// source, else "its last opener" (a process or the kernel). For a log
// line saying why a blocking DEL_DEV waits. The second form reads the
// given texts of /proc/swaps and /proc/self/mounts.
std::string StoppedBlockDeviceHolder(const std::string& path);
std::string StoppedBlockDeviceHolder(const std::string& path,
                                     const std::string& swaps,
                                     const std::string& mounts);

// Whether a ublk device's char device is held by a server, in any PID
// namespace: the driver lets one opener have it at a time
// (ublk_ch_open() in drivers/block/ublk_drv.c is EBUSY for another). A
// missing char device is not held.
bool UblkCharHeld(std::uint32_t dev_id);

// Whether process `pid` exists (kill(pid, 0); EPERM counts as alive).
bool ProcessAlive(pid_t pid);

// prctl(PR_SET_IO_FLUSHER, 1) for the calling thread: memory reclaim that
// this thread's allocations trigger does not wait on IO (a swap device's
// server must not block on its own disk). Needs CAP_SYS_RESOURCE.
Status SetIoFlusher();

}  // namespace ztier::platform

#endif  // ZTIER_PLATFORM_UBLK_H_
