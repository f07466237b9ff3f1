// request.h: what one ublk request means and how it is served, as pure
// functions (no driver needed; the queue threads of ublk_disk.h call
// them): a descriptor (struct ublksrv_io_desc, platform/ublk_abi.h)
// parsed and checked into a Request, the Request served on a Device, and a
// Status turned into the errno the driver hands to the block layer.
//
// Results follow ublk_drv.c's ublk_complete_rq() (Linux 6.12): a READ or
// WRITE commits the bytes done (fewer completes that many and requeues
// the rest, which comes back as a new descriptor: blk_update_request(),
// then blk_mq_requeue_request(); 0 for a READ is EIO), other ops commit
// 0, and a negative errno fails the request with errno_to_blk_status() of
// it: -EOPNOTSUPP is BLK_STS_NOTSUPP, -ENOSPC BLK_STS_NOSPC, -EINVAL
// BLK_STS_INVAL, -EIO (and anything unknown) BLK_STS_IOERR.
//
// Thread safety: pure functions; ServeRequest as thread-safe as the Device.
#ifndef ZTIER_UBLK_REQUEST_H_
#define ZTIER_UBLK_REQUEST_H_

#include <cstdint>
#include <expected>
#include <span>
#include <string>
#include <vector>

#include "platform/ublk_abi.h"
#include "ztier/device.h"
#include "ztier/status.h"

namespace ztier::ublk {

enum class Op { kRead, kWrite, kFlush, kDiscard, kWriteZeroes };

struct Request {
  Op op = Op::kRead;
  std::uint64_t offset = 0;  // bytes (start_sector * 512)
  std::uint32_t length = 0;  // bytes (nr_sectors * 512); 0 for FLUSH
  bool fua = false;          // UBLK_IO_F_FUA: flush after the write
  bool no_unmap = false;     // UBLK_IO_F_NOUNMAP: write zeroes, keep pages
  bool swap = false;         // UBLK_IO_F_SWAP: the IO is swap's
};

struct Limits {
  std::uint64_t disksize = 0;      // bytes
  std::uint32_t max_io_bytes = 0;  // the per-tag buffer of READ and WRITE
};

// Parses a descriptor. The error is the negative errno to commit:
// -EOPNOTSUPP for an op ztier does not serve (WRITE_SAME, the zone ops,
// anything unknown); -EINVAL for a READ or WRITE of 0 bytes or longer than
// max_io_bytes, or a range past disksize (the block layer never sends one;
// a confused driver or a resized disk would).
std::expected<Request, int> ParseDescriptor(
    const platform::ublk::IoDesc& desc, const Limits& limits);

// Serves `req` on `device`: READ fills buffer[0, length), WRITE stores it
// (Device::WritePages, then Flush if FUA), FLUSH, DISCARD (Trim) and
// WRITE_ZEROES (no_hole = NOUNMAP) as the NBD server does. Returns the
// result to commit: the byte count for READ and WRITE, 0 for the others,
// or KernelErrno of the Device's error (but -EIO for a READ refused for
// memory, kResourceExhausted: a backing read's ENOMEM, not a full disk).
// REQUIRES: buffer.size() >= req.length for READ and WRITE.
std::int32_t ServeRequest(Device& device, const Request& req,
                          std::span<std::byte> buffer);

// The errno (negative) a Status becomes for the block layer: 0 for OK;
// kResourceExhausted (mem_limit reached, the pool full) -ENOSPC;
// kIoError and kCorruption (a failed backing read, a damaged object) -EIO;
// kInvalidArgument and kOutOfRange -EINVAL; kUnsupported -EOPNOTSUPP;
// anything else (an uninitialised or removed device) -EIO.
std::int32_t KernelErrno(const Status& status);

// "EINVAL (Invalid argument)" for a command's or request's result -EINVAL
// (ErrnoName, ztier/status.h, and strerror); the text alone for an errno
// without a name.
std::string ErrnoText(std::int32_t res);

// The log line of a request that failed with `result` (a negative errno):
// "PATH: write of 8 sectors at sector 16 failed: EIO (Input/output error)".
std::string FailedRequestLine(const std::string& path,
                              const platform::ublk::IoDesc& desc,
                              std::int32_t result);

// One line of the descriptor trace (`ztier serve --ublk-trace FILE`,
// testdata/ublk_descriptors.txt): "OP 0xFLAGS NR_SECTORS START_SECTOR
// RESULT", op_flags split into the op (decimal) and the flags (hex,
// op_flags >> 8 << 8), RESULT the committed result. Writes into `out`
// (at least kTraceLineMax bytes), returns the length; no allocation.
inline constexpr std::size_t kTraceLineMax = 96;
std::size_t FormatTraceLine(const platform::ublk::IoDesc& desc,
                            std::int32_t result, char* out);
// Parses such a line (comments, starting with '#', and blank lines are
// not lines: false). *result is set when the line has one.
bool ParseTraceLine(const std::string& line, platform::ublk::IoDesc* desc,
                    std::int32_t* result);

// The commits of one queue's tags, for the case where one is refused: a
// COMMIT_AND_FETCH_REQ whose completion is a negative errno other than
// UBLK_IO_RES_ABORT has not completed the request it carried: the driver
// still waits for it, and so does its IO. What is done then follows who
// refused it and why (Linux 6.12):
//  - io_uring, for want of memory for the command (-ENOMEM, as
//    io_uring_cmd_prep_setup() in io_uring/uring_cmd.c gives when it
//    cannot allocate), or another "try again" (-EAGAIN, -EINTR): refused
//    for a while (RefusedForAWhile). The queue commits the same result
//    again, after a pause that doubles from 1 ms to kCommitRetryMaxMs, up
//    to kCommitRetries times (about 12 s in all); after that it gives the
//    queue up (its ring closed, as on a ring error) rather than leave the
//    IO waiting for ever.
//  - anything else: refused for good, and the queue gives up at once. The
//    driver's refusals (__ublk_ch_uring_cmd() in drivers/block/ublk_drv.c:
//    -EINVAL for a command out of step with its tag, -EBUSY for a tag that
//    has a command already, -EOPNOTSUPP for an op it does not know) and
//    io_uring's others (-EBADF, -ECANCELED for a ring going away, -EFAULT,
//    -ENOBUFS for a buffer group, which these commands do not use) come
//    back the same on every retry: waiting 12 s would only hold the IO
//    and a STOP_DEV that long.
// The pause is the queue thread's, which serves nothing meanwhile: a
// kernel short of memory for one command is so for the next. It is taken
// once per round of completions, before all of that round's retries
// (QueueRetry, RetryPauseMs, TakeRetries), not once per refused commit: a
// kernel that refuses every commit would otherwise hold the queue (and a
// STOP_DEV waiting for its IO) about 12 s per tag, some 13 minutes at
// depth 64. A refused FETCH_REQ (no request was there) is the end of its
// tag, whatever the errno.
//
// Thread safety: the queue thread's; allocates only in the constructor.
class CommitRetries {
 public:
  static constexpr int kCommitRetries = 200;
  static constexpr std::uint32_t kCommitRetryMaxMs = 64;

  explicit CommitRetries(std::uint16_t depth);

  // `tag`'s request was committed with `result` (Commit queued).
  void Committed(std::uint16_t tag, std::int32_t result);
  // A request came for `tag`: its last commit, if any, went through.
  void Fetched(std::uint16_t tag);

  struct Action {
    enum Kind { kEndOfTag, kRetry, kGiveUp } kind = kEndOfTag;
    std::int32_t result = 0;     // kRetry: the result to commit again
    std::uint32_t delay_ms = 0;  // kRetry: the pause before it
  };
  // `tag`'s last command came back refused with `res` (a negative errno,
  // not an abort): kEndOfTag for a fetch; for a commit refused for a
  // while, kRetry while retries are left, then kGiveUp; for one refused
  // for good, kGiveUp at once.
  Action Refused(std::uint16_t tag, std::int32_t res);
  // Whether a command refused with `res` may go through when sent again
  // (-ENOMEM, -EAGAIN, -EINTR; see above).
  static bool RefusedForAWhile(std::int32_t res);

  // A kRetry of `tag`: queued for the end of the round, whose pause is
  // the longest delay_ms of its retries.
  void QueueRetry(std::uint16_t tag, const Action& retry);
  bool HasRetries() const { return !retries_.empty(); }
  std::uint32_t RetryPauseMs() const { return pause_ms_; }
  // Calls commit(tag, result) for each queued retry, then clears them.
  template <typename F>
  void TakeRetries(F commit) {
    for (const Retry& r : retries_) commit(r.tag, r.result);
    retries_.clear();
    pause_ms_ = 0;
  }

 private:
  struct Tag {
    bool committing = false;  // the last command is a commit
    std::int32_t result = 0;
    int tries = 0;  // refusals of this commit so far
  };
  std::vector<Tag> tags_;
  struct Retry {
    std::uint16_t tag;
    std::int32_t result;
  };
  std::vector<Retry> retries_;  // room for every tag, made at construction
  std::uint32_t pause_ms_ = 0;
};

}  // namespace ztier::ublk

#endif  // ZTIER_UBLK_REQUEST_H_
