// block_writer.cc: BlockWriter, batched writes of runs of blocks through the
// backing file's writer (ztier/backing_file.h: io_uring for a real file when
// built with it, one pwrite() per IO otherwise and in synchronous mode), and
// BackingStore::NewWriter, which makes one.
//
// Every IO owns one of the file writer's buffers (max_io_blocks pages) and
// is free, being filled, handed to the file, or completed and waiting for
// Reap (`completed`: IOs that failed before reaching the file, such as a
// sealing error). The file's result (bytes, or -errno) becomes the IO's
// Status here: a short write is kIoError, ENOSPC and EDQUOT are
// kResourceExhausted (and `full`), any other error kIoError. An IO that
// cannot be sealed keeps the cipher's code: kResourceExhausted, not
// `full`, when OpenSSL had no memory.
#include <algorithm>
#include <cassert>
#include <cerrno>
#include <climits>
#include <cstring>
#include <deque>
#include <exception>
#include <new>
#include <string>
#include <vector>

#include "backing_internal.h"

namespace ztier {

struct BlockWriter::Io {
  unsigned index = 0;  // its buffer's index in the file writer
  std::uint64_t first_block = 0;
  std::size_t blocks = 0;
  std::byte* buf = nullptr;       // max_io_blocks pages
  std::uint64_t* tags = nullptr;  // max_io_blocks tags
  Status status;                  // the outcome, once completed
  bool may_land = false;          // Done::may_land
  bool full = false;              // Done::full
  bool open = false;              // begun, not yet submitted
};

struct BlockWriter::Impl {
  // From the BackingStore, which outlives the writer.
  const std::string* path = nullptr;
  internal::BlockCipher* cipher = nullptr;
  std::uint64_t num_blocks = 0;

  std::size_t max_io_blocks = 0;
  std::vector<std::uint64_t> tags;
  std::vector<Io> ios;
  std::vector<Io*> free_ios;
  std::deque<Io*> completed;
  std::size_t submitted = 0;  // submitted and not yet reported
  // Last: destroyed first, it waits for the writes still in the kernel.
  std::unique_ptr<BackingFileWriter> file;

  // Turns the file's result into io->status; without memory for the
  // message, the status has none.
  void Complete(Io* io, long result) const noexcept;
  // Frees io and reports its blocks to `done`. An exception from `done`
  // (std::bad_alloc) goes in *failed, the first one only, and the other
  // blocks are still reported: else an IO taken from the file would stay
  // counted in flight, or its blocks unreported, for ever. Returns the block
  // count.
  std::size_t Report(Io* io, const std::function<void(const Done&)>& done,
                     std::exception_ptr* failed) noexcept;
};

void BlockWriter::Impl::Complete(Io* io, long result) const noexcept {
  const long bytes = static_cast<long>(io->blocks * kPageSize);
  io->may_land = result == -ETIMEDOUT || result == -ENOTCONN;
  io->full = result == -ENOSPC || result == -EDQUOT;
  if (result == bytes) {
    io->status = Status::Ok();
    return;
  }
  const StatusCode code =
      io->full ? StatusCode::kResourceExhausted : StatusCode::kIoError;
  try {
    std::string where = "write " + *path + " blocks " +
                        std::to_string(io->first_block) + ".." +
                        std::to_string(io->first_block + io->blocks - 1);
    // The errno kept (ErrnoNameOf): a full file system is ENOSPC or
    // EDQUOT to whoever names it, not kResourceExhausted's ENOMEM.
    io->status = result < 0
                     ? PosixError(where, static_cast<int>(-result), code)
                     : Status(code, "short write: " + where + ": " +
                                        std::to_string(result) + " of " +
                                        std::to_string(bytes) + " bytes");
  } catch (const std::bad_alloc&) {
    io->status = Status(code, {});  // no memory for the message
  }
}

std::size_t BlockWriter::Impl::Report(
    Io* io, const std::function<void(const Done&)>& done,
    std::exception_ptr* failed) noexcept {
  const std::size_t blocks = io->blocks;
  --submitted;
  free_ios.push_back(io);  // reserved for every IO: does not allocate
  if (!done) return blocks;
  Done d{.may_land = io->may_land, .full = io->full};
  try {
    d.status = io->status;
  } catch (const std::bad_alloc&) {  // its code, without its message
    d.status = Status(io->status.code(), {});
  }
  for (std::size_t i = 0; i < blocks; ++i) {
    d.block = io->first_block + i;
    d.tag = io->tags[i];
    try {
      done(d);
    } catch (...) {
      if (!*failed) *failed = std::current_exception();
    }
  }
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
  // An earlier use's outcome says nothing of this one.
  io->may_land = false;
  io->full = false;
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
  for (std::size_t i = 0; m.cipher != nullptr && i < io->blocks; ++i) {
    const Status s = m.cipher->Seal(
        io->first_block + i, MutablePage(io->buf + i * kPageSize, kPageSize));
    if (!s.ok()) {
      // Counted in flight only once queued: a std::bad_alloc here leaves
      // the IO out of in_flight(), so a caller that reaps until none is
      // in flight does not wait for it for ever.
      io->status = Status(s.code(), *m.path + ": " + s.message());
      m.completed.push_back(io);
      ++m.submitted;
      return;
    }
  }
  ++m.submitted;
  m.file->Queue(io->index, io->first_block * kPageSize,
                io->blocks * kPageSize);
}

std::size_t BlockWriter::Reap(bool wait,
                              const std::function<void(const Done&)>& done) {
  Impl& m = *impl_;
  struct Reaping {
    const std::function<void(const Done&)>& done;
    std::size_t n = 0;
    std::exception_ptr failed;
  } r{done};
  while (!m.completed.empty()) {
    Io* io = m.completed.front();
    m.completed.pop_front();
    r.n += m.Report(io, done, &r.failed);
  }
  // Two references: the function is held in place, not allocated.
  m.file->Reap(wait && r.n == 0, [&m, &r](std::size_t index, long result) {
    Io* io = &m.ios[index];
    m.Complete(io, result);
    r.n += m.Report(io, r.done, &r.failed);
  });
  // After the file's reap has taken every completion it saw.
  if (r.failed) std::rethrow_exception(r.failed);
  return r.n;
}

Result<std::unique_ptr<BlockWriter>> BackingStore::NewWriter(
    const WriterOptions& options) {
  const Impl& s = *impl_;
  const std::string& path = s.file->name();
  if (options.in_flight < 1 || options.max_io_blocks < 1 ||
      options.max_io_blocks > 256 ||
      options.in_flight > SIZE_MAX / (256 * kPageSize)) {
    return Err(Status::InvalidArgument(
        "writer for " + path + ": in_flight " +
        std::to_string(options.in_flight) + " (>= 1), max_io_blocks " +
        std::to_string(options.max_io_blocks) + " (1..256)"));
  }
  // A file that takes no larger writes (a remote's maximum request size)
  // gets IOs of at most that many blocks.
  std::size_t blocks = options.max_io_blocks;
  if (const std::size_t limit = s.file->max_write_bytes(); limit != 0) {
    blocks = std::clamp<std::size_t>(limit / kPageSize, 1, blocks);
  }
  std::unique_ptr<BlockWriter> w(new BlockWriter());
  BlockWriter::Impl& m = *w->impl_;
  ZT_ASSIGN_OR_RETURN(m.file,
                      s.file->NewWriter(options.in_flight, blocks * kPageSize));
  m.path = &path;
  m.cipher = s.cipher.get();
  m.num_blocks = s.num_blocks;
  m.max_io_blocks = blocks;
  m.tags.resize(options.in_flight * blocks);
  m.ios.resize(options.in_flight);
  m.free_ios.reserve(options.in_flight);
  for (std::size_t i = options.in_flight; i-- > 0;) {
    BlockWriter::Io& io = m.ios[i];
    io.index = static_cast<unsigned>(i);
    io.buf = m.file->buffer(i);
    io.tags = &m.tags[i * blocks];
    m.free_ios.push_back(&io);
  }
  return w;
}

}  // namespace ztier
