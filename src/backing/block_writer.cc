// block_writer.cc: BlockWriter, batched writes of runs of blocks through
// io_uring (one IORING_OP_WRITE per run), or one pwrite() per block in
// synchronous mode; and BackingStore::NewWriter, which makes one.
//
// Every IO owns one slice of a single mapping of in_flight x max_io_blocks
// 4096-aligned pages. An IO is free, being filled (at most one), in the
// kernel, or completed and waiting for Reap (`completed`: synchronous
// writes, and IOs that failed before reaching the kernel).
//
// Submit() only queues an IO's SQE; Reap() hands every queued SQE to the
// kernel in one io_uring_enter (submitting and waiting together), so a
// writeback that refills several IOs pays one system call for them. The
// buffers are registered with the ring once (IORING_OP_WRITE_FIXED), so the
// kernel does not pin and unpin their pages on every IO; if registration is
// refused (RLIMIT_MEMLOCK), plain writes are used.
//
// If io_uring_submit leaves queued SQEs unconsumed, they cannot be taken
// back: they are turned into no-ops (user data null, completions ignored)
// that the next submit carries, and their IOs fail with kIoError.
#include <liburing.h>
#include <limits.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cassert>
#include <cerrno>
#include <climits>
#include <cstring>
#include <deque>
#include <string>
#include <vector>

#include "backing_internal.h"

namespace ztier {

struct BlockWriter::Io {
  unsigned index = 0;  // its buffer's index among the registered ones
  std::uint64_t first_block = 0;
  std::size_t blocks = 0;
  std::byte* buf = nullptr;       // max_io_blocks pages
  std::uint64_t* tags = nullptr;  // max_io_blocks tags
  Status status;                  // the outcome, once completed
  bool open = false;              // begun, not yet submitted
};

struct BlockWriter::Impl {
  // From the BackingStore, which outlives the writer.
  int fd = -1;
  const std::string* path = nullptr;
  const BackingFaultHook* hook = nullptr;
  internal::BlockCipher* cipher = nullptr;
  std::uint64_t num_blocks = 0;

  std::size_t max_in_flight = 0;
  std::size_t max_io_blocks = 0;
  bool sync = false;  // pwrite per block, no ring
  std::byte* buffers = nullptr;
  std::size_t buffer_bytes = 0;
  std::vector<std::uint64_t> tags;
  std::vector<Io> ios;
  std::vector<Io*> free_ios;
  std::deque<Io*> completed;
  std::size_t submitted = 0;     // submitted and not yet reported
  std::size_t ring_pending = 0;  // in the kernel
  std::vector<std::pair<Io*, io_uring_sqe*>> queued;  // not yet submitted
  bool has_ring = false;
  bool registered = false;  // buffers registered with the ring
  io_uring ring;

  ~Impl();
  // Runs the real result through the fault hook and sets io->status.
  void Complete(Io* io, long result) const;
  // Hands the queued SQEs to the kernel, waiting for one completion too
  // when `wait`. IOs the kernel did not take fail (see the file comment).
  void SubmitQueued(bool wait);
  // Reports io's blocks to `done` and frees it. Returns the block count.
  std::size_t Report(Io* io, const std::function<void(const Done&)>& done);
};

BlockWriter::Impl::~Impl() {
  // What was submitted is written: hand the queued IOs over, then wait out
  // every IO the kernel holds (it writes from our buffers).
  if (!queued.empty()) SubmitQueued(/*wait=*/false);
  bool drained = true;
  while (has_ring && ring_pending > 0) {
    io_uring_cqe* cqe;
    const int r = io_uring_wait_cqe(&ring, &cqe);
    if (r == -EINTR) continue;
    if (r < 0) {
      drained = false;  // cannot tell when the kernel is done: leak
      break;
    }
    if (io_uring_cqe_get_data(cqe) != nullptr) --ring_pending;
    io_uring_cqe_seen(&ring, cqe);
  }
  if (!drained) return;
  if (has_ring) io_uring_queue_exit(&ring);
  if (buffers != nullptr) munmap(buffers, buffer_bytes);
}

void BlockWriter::Impl::Complete(Io* io, long result) const {
  if (*hook) {
    result = (*hook)(BackingIo{.kind = BackingIo::Kind::kWrite,
                               .first_block = io->first_block,
                               .blocks = io->blocks},
                     result);
  }
  const long bytes = static_cast<long>(io->blocks * kPageSize);
  if (result == bytes) {
    io->status = Status::Ok();
    return;
  }
  std::string where = "write " + *path + " blocks " +
                      std::to_string(io->first_block) + ".." +
                      std::to_string(io->first_block + io->blocks - 1);
  if (result < 0) {
    where += ": ";
    where += std::strerror(static_cast<int>(-result));
    io->status = (result == -ENOSPC || result == -EDQUOT)
                     ? Status::ResourceExhausted(where)
                     : Status::IoError(where);
  } else {
    io->status = Status::IoError("short write: " + where + ": " +
                                 std::to_string(result) + " of " +
                                 std::to_string(bytes) + " bytes");
  }
}

std::size_t BlockWriter::Impl::Report(
    Io* io, const std::function<void(const Done&)>& done) {
  const std::size_t blocks = io->blocks;
  if (done) {
    for (std::size_t i = 0; i < blocks; ++i) {
      done(Done{.block = io->first_block + i,
                .tag = io->tags[i],
                .status = io->status});
    }
  }
  --submitted;
  free_ios.push_back(io);
  return blocks;
}

BlockWriter::BlockWriter() : impl_(std::make_unique<Impl>()) {}
BlockWriter::~BlockWriter() = default;

bool BlockWriter::HasRoom() const { return !impl_->free_ios.empty(); }
std::size_t BlockWriter::in_flight() const { return impl_->submitted; }
std::size_t BlockWriter::max_io_blocks() const { return impl_->max_io_blocks; }

BlockWriter::Io* BlockWriter::Begin(std::uint64_t first_block) {
  Impl& m = *impl_;
  assert(HasRoom());
  Io* io = m.free_ios.back();
  m.free_ios.pop_back();
  io->first_block = first_block;
  io->blocks = 0;
  io->status = Status::Ok();
  io->open = true;
  return io;
}

std::span<std::byte> BlockWriter::Add(Io* io, std::uint64_t tag) {
  assert(io->open && io->blocks < impl_->max_io_blocks);
  io->tags[io->blocks] = tag;
  return {io->buf + io->blocks++ * kPageSize, kPageSize};
}

std::size_t BlockWriter::BlocksIn(const Io* io) const { return io->blocks; }

void BlockWriter::Submit(Io* io) {
  Impl& m = *impl_;
  assert(io->open);
  io->open = false;
  if (io->blocks == 0) {
    m.free_ios.push_back(io);
    return;
  }
  assert(io->first_block + io->blocks <= m.num_blocks);
  ++m.submitted;
  auto fail = [&](Status s) {
    io->status = std::move(s);
    m.completed.push_back(io);
  };
  for (std::size_t i = 0; m.cipher != nullptr && i < io->blocks; ++i) {
    const Status s = m.cipher->Seal(
        io->first_block + i, MutablePage(io->buf + i * kPageSize, kPageSize));
    if (!s.ok()) return fail(Status(s.code(), *m.path + ": " + s.message()));
  }
  const std::size_t bytes = io->blocks * kPageSize;
  const auto offset = static_cast<off_t>(io->first_block * kPageSize);
  if (m.sync) {
    ssize_t r;
    do {
      r = pwrite(m.fd, io->buf, bytes, offset);
    } while (r < 0 && errno == EINTR);
    m.Complete(io, r < 0 ? -errno : static_cast<long>(r));
    m.completed.push_back(io);
    return;
  }
  io_uring_sqe* sqe = io_uring_get_sqe(&m.ring);
  if (sqe == nullptr) {  // full of no-ops from failed submits: push them
    m.SubmitQueued(/*wait=*/false);
    sqe = io_uring_get_sqe(&m.ring);
  }
  if (sqe == nullptr) {
    return fail(Status::IoError("write " + *m.path +
                                ": io_uring submission queue full"));
  }
  if (m.registered) {
    io_uring_prep_write_fixed(sqe, m.fd, io->buf, static_cast<unsigned>(bytes),
                              static_cast<__u64>(offset),
                              static_cast<int>(io->index));
  } else {
    io_uring_prep_write(sqe, m.fd, io->buf, static_cast<unsigned>(bytes),
                        static_cast<__u64>(offset));
  }
  io_uring_sqe_set_data(sqe, io);
  m.queued.emplace_back(io, sqe);
}

void BlockWriter::Impl::SubmitQueued(bool wait) {
  if (!has_ring) return;
  int r;
  do {
    r = wait ? io_uring_submit_and_wait(&ring, 1) : io_uring_submit(&ring);
  } while (r == -EINTR);
  // The kernel consumes SQEs in order: the unconsumed ones are the last.
  const std::size_t left = io_uring_sq_ready(&ring);
  const std::size_t taken = queued.size() - std::min(left, queued.size());
  ring_pending += taken;
  for (std::size_t i = taken; i < queued.size(); ++i) {
    auto [io, sqe] = queued[i];
    io_uring_prep_nop(sqe);
    io_uring_sqe_set_data(sqe, nullptr);
    io->status = Status::IoError(
        "write " + *path + ": io_uring_submit: " +
        (r < 0 ? std::strerror(-r) : "submission not accepted"));
    completed.push_back(io);
  }
  queued.clear();
}

std::size_t BlockWriter::Reap(bool wait,
                              const std::function<void(const Done&)>& done) {
  Impl& m = *impl_;
  std::size_t n = 0;
  if (!m.queued.empty()) m.SubmitQueued(wait && m.completed.empty());
  for (;;) {
    while (!m.completed.empty()) {
      Io* io = m.completed.front();
      m.completed.pop_front();
      n += m.Report(io, done);
    }
    io_uring_cqe* cqe;
    while (m.has_ring && io_uring_peek_cqe(&m.ring, &cqe) == 0) {
      auto* io = static_cast<Io*>(io_uring_cqe_get_data(cqe));
      const long result = cqe->res;
      io_uring_cqe_seen(&m.ring, cqe);
      if (io == nullptr) continue;  // a no-op from a failed submit
      --m.ring_pending;
      m.Complete(io, result);
      n += m.Report(io, done);
    }
    if (!wait || n > 0 || m.ring_pending == 0) return n;
    const int r = io_uring_wait_cqe(&m.ring, &cqe);
    if (r < 0 && r != -EINTR) return n;
  }
}

Result<std::unique_ptr<BlockWriter>> BackingStore::NewWriter(
    const WriterOptions& options) {
  const Impl& s = *impl_;
  if (options.in_flight < 1 || options.max_io_blocks < 1 ||
      options.max_io_blocks > 256 ||
      options.in_flight > SIZE_MAX / (256 * kPageSize)) {
    return Err(Status::InvalidArgument(
        "writer for " + s.path + ": in_flight " +
        std::to_string(options.in_flight) + " (>= 1), max_io_blocks " +
        std::to_string(options.max_io_blocks) + " (1..256)"));
  }
  std::unique_ptr<BlockWriter> w(new BlockWriter());
  BlockWriter::Impl& m = *w->impl_;
  m.fd = s.fd;
  m.path = &s.path;
  m.hook = &s.fault_hook;
  m.cipher = s.cipher.get();
  m.num_blocks = s.num_blocks;
  m.max_in_flight = options.in_flight;
  m.max_io_blocks = options.max_io_blocks;
  m.sync = options.in_flight == 1 && options.max_io_blocks == 1;
  if (!m.sync) {
    const auto entries = static_cast<unsigned>(
        std::min<std::size_t>(options.in_flight, UINT_MAX));
    const int r = io_uring_queue_init(entries, &m.ring, 0);
    if (r < 0) {
      return Err(Status::IoError("io_uring_queue_init(" +
                                 std::to_string(entries) + ") for " + s.path +
                                 ": " + std::strerror(-r)));
    }
    m.has_ring = true;
  }
  const std::size_t pages = options.in_flight * options.max_io_blocks;
  m.buffer_bytes = pages * kPageSize;
  void* p = mmap(nullptr, m.buffer_bytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    return Err(PosixError("mmap writer buffers for " + s.path, errno));
  }
  m.buffers = static_cast<std::byte*>(p);
  m.tags.resize(pages);
  m.ios.resize(options.in_flight);
  std::vector<iovec> iovecs(options.in_flight);
  for (std::size_t i = options.in_flight; i-- > 0;) {
    BlockWriter::Io& io = m.ios[i];
    io.index = static_cast<unsigned>(i);
    io.buf = m.buffers + i * options.max_io_blocks * kPageSize;
    io.tags = &m.tags[i * options.max_io_blocks];
    iovecs[i] = iovec{io.buf, options.max_io_blocks * kPageSize};
    m.free_ios.push_back(&io);
  }
  if (m.has_ring && options.in_flight <= UIO_MAXIOV) {
    m.registered =
        io_uring_register_buffers(&m.ring, iovecs.data(),
                                  static_cast<unsigned>(iovecs.size())) == 0;
  }
  return w;
}

}  // namespace ztier
