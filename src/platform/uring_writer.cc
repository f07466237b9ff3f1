// uring_writer.cc: the real file's batched writer through io_uring (built
// with ZTIER_URING; contract in posix_backing_file.h and
// ztier/backing_file.h). One IORING_OP_WRITE per IO.
//
// Queue() only fills an SQE; Reap() hands every queued SQE to the kernel in
// one io_uring_enter (submitting and waiting together), so a writeback that
// refills several IOs pays one system call for them. The buffers are
// registered with the ring once (IORING_OP_WRITE_FIXED), so the kernel does
// not pin and unpin their pages on every IO; if registration is refused
// (RLIMIT_MEMLOCK), plain writes are used.
//
// If io_uring_submit leaves queued SQEs unconsumed, they cannot be taken
// back: they are turned into no-ops (user data null, completions ignored)
// that the next submit carries, and their writes fail with the submit's
// error (EAGAIN when it gave none). A queue with no free SQE fails the write
// with EBUSY. A write that `done` queues again and that fails at once is
// reported by the next Reap, not by the one calling `done`: a Reap ends
// even while the kernel refuses every submit and `done` queues every
// failed write again.
#include <liburing.h>
#include <limits.h>
#include <sys/uio.h>

#include <algorithm>
#include <cassert>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "backing_writers.h"
#include "platform/mapping.h"

namespace ztier::internal {
namespace {

class UringWriter final : public BackingFileWriter {
 public:
  UringWriter(int fd, std::size_t io_bytes) : fd_(fd), io_bytes_(io_bytes) {}
  ~UringWriter() override;

  // NewUringWriter's work: the ring, the buffers, their registration.
  Status Init(const std::string& path, std::size_t ios);

  std::byte* buffer(std::size_t io) override {
    return buffers_.data() + io * io_bytes_;
  }
  void Queue(std::size_t io, std::uint64_t offset, std::size_t len) override;
  std::size_t Reap(bool wait,
                   const std::function<void(std::size_t, long)>& done) override;

 private:
  // Hands the queued SQEs to the kernel, waiting for one completion too
  // when `wait`. Writes the kernel did not take fail (see the file comment).
  void SubmitQueued(bool wait);
  // Adds a write that never reached the kernel to failed_.
  void Fail(std::size_t io, long result);

  const int fd_;
  const std::size_t io_bytes_;
  platform::Mapping buffers_;
  bool has_ring_ = false;
  bool registered_ = false;  // buffers registered with the ring
  io_uring ring_;
  std::size_t ring_pending_ = 0;  // in the kernel
  // Both hold at most one entry per IO (an IO is queued again only once
  // its write was reported), and have room for every IO (Init): Queue never
  // allocates, so a write it prepared is never left untracked.
  std::vector<std::pair<std::size_t, io_uring_sqe*>> queued_;
  // Writes that never reached the kernel, to report: a ring of one slot
  // per IO, failed_count_ of them from failed_head_. Each leaves it before
  // its `done` runs, so a `done` that queues it again finds its slot free.
  std::vector<std::pair<std::size_t, long>> failed_;
  std::size_t failed_head_ = 0;
  std::size_t failed_count_ = 0;
};

// User data of an SQE: io + 1, so that null marks a no-op.
void* Tag(std::size_t io) { return reinterpret_cast<void*>(io + 1); }

UringWriter::~UringWriter() {
  // What was queued is written: hand it over, then wait out every write the
  // kernel holds (it writes from our buffers).
  if (!queued_.empty()) SubmitQueued(/*wait=*/false);
  while (has_ring_ && ring_pending_ > 0) {
    io_uring_cqe* cqe;
    const int r = io_uring_wait_cqe(&ring_, &cqe);
    if (r == -EINTR) continue;
    if (r < 0) {
      buffers_.Leak();  // cannot tell when the kernel is done
      return;
    }
    if (io_uring_cqe_get_data(cqe) != nullptr) --ring_pending_;
    io_uring_cqe_seen(&ring_, cqe);
  }
  if (has_ring_) io_uring_queue_exit(&ring_);
}

Status UringWriter::Init(const std::string& path, std::size_t ios) {
  const auto entries =
      static_cast<unsigned>(std::min<std::size_t>(ios, UINT_MAX));
  const int r = io_uring_queue_init(entries, &ring_, 0);
  if (r < 0) {
    return Status::IoError("io_uring_queue_init(" + std::to_string(entries) +
                           ") for " + path + ": " + std::strerror(-r));
  }
  has_ring_ = true;
  queued_.reserve(ios);
  failed_.resize(ios);
  ZT_ASSIGN_OR_RETURN(
      buffers_,
      platform::Mapping::Anonymous(ios * io_bytes_, platform::Commit::kCharged,
                                   "mmap writer buffers for " + path));
  if (ios <= UIO_MAXIOV) {
    std::vector<iovec> iovecs(ios);
    for (std::size_t i = 0; i < ios; ++i) iovecs[i] = {buffer(i), io_bytes_};
    registered_ =
        io_uring_register_buffers(&ring_, iovecs.data(),
                                  static_cast<unsigned>(iovecs.size())) == 0;
  }
  return Status::Ok();
}

void UringWriter::Queue(std::size_t io, std::uint64_t offset, std::size_t len) {
  io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
  if (sqe == nullptr) {  // full of no-ops from failed submits: push them
    SubmitQueued(/*wait=*/false);
    sqe = io_uring_get_sqe(&ring_);
  }
  if (sqe == nullptr) {
    Fail(io, -EBUSY);
    return;
  }
  if (registered_) {
    io_uring_prep_write_fixed(sqe, fd_, buffer(io), static_cast<unsigned>(len),
                              offset, static_cast<int>(io));
  } else {
    io_uring_prep_write(sqe, fd_, buffer(io), static_cast<unsigned>(len),
                        offset);
  }
  io_uring_sqe_set_data(sqe, Tag(io));
  queued_.emplace_back(io, sqe);
}

void UringWriter::SubmitQueued(bool wait) {
  int r;
  do {
    r = wait ? io_uring_submit_and_wait(&ring_, 1) : io_uring_submit(&ring_);
  } while (r == -EINTR);
  // The kernel consumes SQEs in order: the unconsumed ones are the last.
  const std::size_t left = io_uring_sq_ready(&ring_);
  const std::size_t taken = queued_.size() - std::min(left, queued_.size());
  ring_pending_ += taken;
  for (std::size_t i = taken; i < queued_.size(); ++i) {
    auto [io, sqe] = queued_[i];
    io_uring_prep_nop(sqe);
    io_uring_sqe_set_data(sqe, nullptr);
    Fail(io, r < 0 ? r : -EAGAIN);
  }
  queued_.clear();
}

void UringWriter::Fail(std::size_t io, long result) {
  assert(failed_count_ < failed_.size());
  failed_[(failed_head_ + failed_count_) % failed_.size()] = {io, result};
  ++failed_count_;
}

std::size_t UringWriter::Reap(
    bool wait, const std::function<void(std::size_t, long)>& done) {
  std::size_t n = 0;
  if (!queued_.empty()) SubmitQueued(wait && failed_count_ == 0);
  for (;;) {
    // Those failed so far only (see the file comment).
    for (std::size_t k = failed_count_; k > 0; --k) {
      const auto [io, result] = failed_[failed_head_];
      failed_head_ = (failed_head_ + 1) % failed_.size();
      --failed_count_;
      done(io, result);
      ++n;
    }
    io_uring_cqe* cqe;
    while (io_uring_peek_cqe(&ring_, &cqe) == 0) {
      void* data = io_uring_cqe_get_data(cqe);
      const long result = cqe->res;
      io_uring_cqe_seen(&ring_, cqe);
      if (data == nullptr) continue;  // a no-op from a failed submit
      --ring_pending_;
      done(reinterpret_cast<std::uintptr_t>(data) - 1, result);
      ++n;
    }
    if (!wait || n > 0 || ring_pending_ == 0) return n;
    const int r = io_uring_wait_cqe(&ring_, &cqe);
    if (r < 0 && r != -EINTR) {
      // Refused for now (EAGAIN, ENOMEM): the writes in flight still end
      // and the caller reaps again; a pause keeps that from spinning.
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      return n;
    }
  }
}

}  // namespace

Result<std::unique_ptr<BackingFileWriter>> NewUringWriter(
    int fd, const std::string& path, std::size_t ios, std::size_t io_bytes) {
  auto w = std::make_unique<UringWriter>(fd, io_bytes);
  ZT_RETURN_IF_ERROR(w->Init(path, ios));
  return std::unique_ptr<BackingFileWriter>(std::move(w));
}

}  // namespace ztier::internal
