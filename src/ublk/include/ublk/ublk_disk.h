// ublk_disk.h: one /dev/ublkbN serving one Device (ztier/device.h)
// through the ublk driver (Linux 6.5+, for UBLK_F_USER_COPY; platform/ublk.h
// has the driver's side): ADD_DEV with UBLK_F_USER_COPY |
// UBLK_F_CMD_IOCTL_ENCODE, the parameters (4096-byte logical and physical
// blocks, discard and write zeroes), one thread per queue with its own
// io_uring, START_DEV; Stop() undoes it all.
//
// The request path allocates nothing: each queue maps depth buffers of
// max_io_bytes up front (populated, so locked by --mlock's mlockall, when
// `populate`), copies a WRITE's data from the driver into its tag's buffer
// (pread on /dev/ublkcN) and a READ's out of it (pwrite), and formats an
// error line only on the error path. Each queue thread marks itself
// PR_SET_IO_FLUSHER, which a swap device's server needs (reclaim that its
// allocations trigger must not wait on the disk it serves); without
// CAP_SYS_RESOURCE it warns once and goes on. Queue threads are not
// pinned to CPUs (pinning queue i to CPU i collapsed throughput).
//
// A READ that may wait for a remote backing store (Device::ReadMayStall:
// it covers a written-back page, and the backing store is a remote one)
// is served by one of the disk's waiter threads (one per queue, at least
// two), not by the queue thread: a stalled remote then holds that read
// (up to --backing-timeout) and the waiters, while the queue goes on
// serving the requests behind it from RAM (but a write to a page being
// read that way, which waits for that page's lock; and ReadMayStall is a
// hint: a page written back just after it looked is read on the queue
// thread). A read from a local backing file stays on the queue thread:
// the hand-off costs more than such a read (random 4 KiB reads of
// written-back pages from a file on the guest's tmpfs: 12,500 IOPS handed
// off, 52,000 on the queue thread). A waiter copies the data to the
// driver itself
// (user copy works from any thread) and hands the result back through the
// queue's eventfd, read by the queue's ring (UblkQueueRing::ArmWake); the
// queue thread commits it, as it commits every request.
//
// The disk holds a Device::ClientRef while it exists, so the device cannot
// be reset or removed under it; the ublk front end (ublk_front_end.h)
// stops the disk first.
//
// Errors: Start() returns the first failing step's Status (ADD_DEV's
// EEXIST for a taken id is kBusy), having undone the steps before it.
// Stop() logs what fails and goes on to the next step.
//
// Thread safety: Start, Stop and the destructor from one thread at a time;
// the accessors from any.
#ifndef ZTIER_UBLK_UBLK_DISK_H_
#define ZTIER_UBLK_UBLK_DISK_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "platform/mutex.h"
#include "platform/ublk.h"
#include "platform/unique_fd.h"
#include "ublk/request.h"
#include "ztier/device.h"
#include "ztier/status.h"

namespace ztier::ublk {

// What a ztier puts in a device's ublksrv_flags at ADD_DEV (the field is
// the server's own; the driver keeps it and GET_DEV_INFO gives it back):
// "ztier" in ASCII, in memory order. Crash recovery touches only devices
// that carry it.
inline constexpr std::uint64_t kUblkServerMark = 0x726569747a;

struct UblkDiskOptions {
  std::uint16_t queues = 0;  // 0: one per online CPU
  std::uint16_t depth = 64;  // tags per queue, 1..4096
  // A page (4 KiB on x86-64) to 32 MiB, a multiple of the page size.
  std::uint32_t max_io_bytes = 512 << 10;
  // UINT32_MAX: any free id; else that id, or any if it is taken.
  std::uint32_t dev_id = UINT32_MAX;
  bool populate = false;  // fault the buffers in at start (--mlock)
  // Descriptor trace (`--ublk-trace`): one line per request, written under
  // trace_mu; null: none. Owned by the caller, outliving the disk.
  std::FILE* trace = nullptr;
  internal::Mutex* trace_mu = nullptr;
  // Event lines; may be null. A line that starts with "warning: " is one
  // (a queue that stopped, a failed stop or delete, an IO error). Called
  // from the disk's threads, and (a copy of it) from the thread of a
  // blocking DEL_DEV that outlived Stop (DeleteBlockingWithin): that may
  // be after the disk is gone, up to and during the process's exit, after
  // main has returned. So it must stay callable until then: a free
  // function, or a callable owning what it uses (shared ownership), using
  // nothing a static destructor tears down (`ztier serve`'s tool::Log).
  std::function<void(const std::string&)> log;
  // For the blocking DEL_DEV (kernels before 6.9), which runs on a control
  // ring of its own (DeleteBlockingWithin).
  std::string control_path = platform::kUblkControlPath;
};

// The blocking UBLK_U_CMD_DEL_DEV of `dev_id`, all that a kernel before
// 6.9 has: it removes the device (its /dev/ublkcN) at once, then waits
// until the stopped disk's last opener (swap or a mount left on it, an
// open) lets go, which may be never (ublk_ctrl_del_dev() in
// drivers/block/ublk_drv.c). It runs on a thread of its own, with its own
// control ring opened from `control_path`, and is waited for `wait_ms` at
// most: the result when it ended in time, else kBusy saying what holds
// the disk, and the thread goes on; `late`, if set, gets its result if it
// ends while the process lives, on that thread: maybe after the caller
// and what it owned are gone, or while the process exits (static
// destructors running), so `late` must own what it uses, as
// UblkDiskOptions::log must. Killed with the process, the command is
// interrupted: the device is removed all the same, its id freed when the
// opener lets go.
Status DeleteBlockingWithin(const std::string& control_path,
                            std::uint32_t dev_id, int wait_ms,
                            std::function<void(const Status&)> late);

// Whether `options` are ones Start accepts: max_io_bytes a multiple of
// the page size (platform::UblkPageBytes(): 4, 16 or 64 KiB) from one page
// to 32 MiB (the driver's per-request user-copy window, UBLK_IO_BUF_BITS),
// depth 1..4096; else kInvalidArgument saying which. `ztier serve`
// checks its flags with it before any disk starts.
Status CheckDiskOptions(const UblkDiskOptions& options);

class UblkDisk {
 public:
  // Makes and starts the disk for `device` (initialised) on `control`,
  // which must outlive the disk.
  static Result<std::unique_ptr<UblkDisk>> Start(
      platform::UblkControl* control, std::shared_ptr<Device> device,
      const UblkDiskOptions& options);
  ~UblkDisk();  // Stop()
  UblkDisk(const UblkDisk&) = delete;
  UblkDisk& operator=(const UblkDisk&) = delete;

  // STOP_DEV (the kernel waits for IO in flight, which the queues serve,
  // and removes /dev/ublkbN), joins the queue threads, closes /dev/ublkcN
  // and unmaps, DEL_DEV (asynchronous where the kernel has it; before 6.9
  // the blocking one, waited for 2 s at most: DeleteBlockingWithin).
  // Idempotent.
  void Stop() { Stop(platform::UniqueFd()); }
  // Stop(), closing `claim` (an open of /dev/ublkbN, say an exclusive one
  // that keeps new claims out while the disk goes) once STOP_DEV has
  // returned and before DEL_DEV, which would wait for it.
  void Stop(platform::UniqueFd claim);

  std::uint32_t dev_id() const { return dev_id_; }
  std::string block_path() const { return platform::UblkBlockPath(dev_id_); }
  std::uint16_t queues() const { return static_cast<std::uint16_t>(queues_.size()); }
  // Requests served (all queues), failed ones included.
  std::uint64_t requests() const { return requests_.load(std::memory_order_relaxed); }
  // Queues whose thread has left before Stop() (a ring error, a commit
  // refused for good or for too long, requests aborted from outside): the
  // kernel fails their IO from then on, until the server is restarted.
  // Each is logged as it goes; this count is for the status report.
  std::uint32_t queues_given_up() const {
    return queues_given_up_.load(std::memory_order_relaxed);
  }

 private:
  struct Queue;
  // A READ handed to a waiter: its queue, tag and request.
  struct Waiting {
    Queue* q = nullptr;
    std::uint16_t tag = 0;
    Request req;
  };
  UblkDisk(platform::UblkControl* control, std::shared_ptr<Device> device,
           Device::ClientRef ref, const UblkDiskOptions& options);
  Status Run();  // Start's steps after ADD_DEV
  void QueueMain(Queue* q);
  void WaiterMain();
  // Logs (once) a failed request, writes its trace line, counts it and
  // commits its result. On q's thread.
  void Finish(Queue& q, platform::UblkQueueRing& ring, std::uint16_t tag,
              std::int32_t result);
  void StopWaiters();
  void Log(const std::string& line) const;
  // Whether this disk's one IO error line has been logged: check it before
  // formatting a line for LogIoErrorOnce.
  bool IoErrorLogged() const;
  void LogIoErrorOnce(const std::string& line);

  platform::UblkControl* const control_;
  const std::shared_ptr<Device> device_;
  std::optional<Device::ClientRef> ref_;  // released by Stop()
  const UblkDiskOptions options_;
  std::uint32_t dev_id_ = UINT32_MAX;
  std::uint64_t disksize_ = 0;
  int char_fd_ = -1;
  bool added_ = false;
  bool started_ = false;
  bool stopped_ = false;
  std::vector<std::unique_ptr<Queue>> queues_;
  // The waiters' queue: a ring of queues * depth entries (every tag at most
  // once), made at start, so that handing a read over allocates nothing.
  std::mutex wait_mu_;
  std::condition_variable wait_cv_;
  std::vector<Waiting> waiting_;  // guarded by wait_mu_
  std::size_t wait_head_ = 0;     // guarded by wait_mu_
  std::size_t wait_count_ = 0;    // guarded by wait_mu_
  bool waiters_stop_ = false;     // guarded by wait_mu_
  std::vector<std::thread> waiters_;
  std::atomic<bool> stopping_{false};   // STOP_DEV sent (or no disk): leave
  std::atomic<bool> stop_asked_{false};  // Stop() has begun
  std::atomic<bool> io_error_logged_{false};
  std::atomic<bool> flusher_warned_{false};
  std::atomic<std::uint64_t> requests_{0};
  std::atomic<std::uint32_t> queues_given_up_{0};
};

}  // namespace ztier::ublk

#endif  // ZTIER_UBLK_UBLK_DISK_H_
