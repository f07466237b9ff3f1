// File: ztier/backing_file.h
//
// BackingFile: the file under a BackingStore, as an interface (the seam
// leveldb's Env gives): its size, reads at an offset, and batched writes.
// A BackingStore opens the real one itself from BackingOptions::path; a
// test or an embedder may hand it any other implementation instead
// (BackingOptions::file), and may wrap whichever file is used
// (BackingOptions::wrap_file).
//
// Implementations here:
//   - the real file or block device (what BackingStore::Open uses for a
//     path): pread for reads; writes through io_uring (one IORING_OP_WRITE
//     per IO, submitted together) when ztier is built with io_uring
//     (ZTIER_URING) and the kernel allows it, else one pwrite per IO (where
//     io_uring is refused: disabled by the kernel.io_uring_disabled sysctl,
//     blocked by a seccomp filter, or out of locked memory); always one
//     pwrite per IO for a writer of one IO of one 4096-byte block (the
//     synchronous baseline).
//   - NewMemBackingFile: zeroed memory of a fixed size, for tests and for
//     running without a disk. direct() is false.
//   - NewFaultyBackingFile: wraps another file; after each real read or
//     write completes, a fault function sees it and its result (bytes, or
//     -errno) and may return another. This is how tests make EIO, ENOSPC
//     and short transfers happen on a real file.
//
// Results: Read and the writes report what pread/pwrite would: bytes
// transferred (possibly short), or -errno. Turning that into a Status is the
// caller's (BackingStore's) business.
//
// Thread safety: Read, name, size and direct may be called from any thread
// at any time, also while writers run. A BackingFileWriter is used by one
// thread at a time; several may exist at once. The file must outlive its
// writers. A fault function is called on reader threads too, so it must be
// thread-safe.
#ifndef ZTIER_BACKING_FILE_H_
#define ZTIER_BACKING_FILE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "ztier/status.h"

namespace ztier {

// Batched writes from buffers the writer owns: buffer(i) for i < ios, each
// io_bytes long and 4096-byte aligned (fit for O_DIRECT).
class BackingFileWriter {
 public:
  BackingFileWriter() = default;
  // Waits for every write handed to the file; their results are dropped.
  virtual ~BackingFileWriter() = default;
  BackingFileWriter(const BackingFileWriter&) = delete;
  BackingFileWriter& operator=(const BackingFileWriter&) = delete;

  virtual std::byte* buffer(std::size_t io) = 0;
  // Queues a write of buffer(io)[0, len) at byte `offset`. A writer may
  // write at once (the synchronous ones do). REQUIRES: io's previous write,
  // if any, was reported by Reap; len <= io_bytes.
  virtual void Queue(std::size_t io, std::uint64_t offset, std::size_t len) = 0;
  // Hands every queued write to the file (one system call for io_uring),
  // then calls done(io, result) once per write that has completed; with
  // `wait`, first waits until at least one has, if any is outstanding.
  // result: the bytes written, or -errno. -ETIMEDOUT and -ENOTCONN mean the
  // write was sent but its end is unknown (a remote given up on, or whose
  // connection dropped): it may still land on the file later. Returns the
  // number of writes reported.
  //
  // `done` may Queue again: its own IO, or any other whose write was
  // reported. Each write is reported exactly once, and a Reap calls `done`
  // at most once per IO, so it ends whatever `done` queues. A write queued
  // from inside `done` is reported by a later Reap, not by the one calling
  // `done`: by the next where the write is made in Queue (pwrite, the
  // in-memory file), or fails there (the NBD writer,
  // nbd/nbd_backing_file.cc): platform/done_writes.h; io_uring submits it
  // with the next Reap (uring_writer.cc).
  virtual std::size_t Reap(
      bool wait,
      const std::function<void(std::size_t io, long result)>& done) = 0;
};

class BackingFile {
 public:
  BackingFile() = default;
  virtual ~BackingFile() = default;
  BackingFile(const BackingFile&) = delete;
  BackingFile& operator=(const BackingFile&) = delete;

  // For messages: the path, or what the file is.
  virtual const std::string& name() const = 0;
  virtual std::uint64_t size() const = 0;  // bytes
  virtual bool direct() const = 0;         // O_DIRECT in use
  // Reads out.size() bytes at `offset` into `out` (4096-byte aligned when
  // direct()). Bytes read, or -errno.
  virtual long Read(std::uint64_t offset, std::span<std::byte> out) = 0;
  // A writer with `ios` buffers of `io_bytes` (a multiple of 4096), ios >= 1.
  // kIoError when the writer cannot be set up (saying why),
  // kResourceExhausted when its buffers cannot be allocated.
  virtual Result<std::unique_ptr<BackingFileWriter>> NewWriter(
      std::size_t ios, std::size_t io_bytes) = 0;
  // The most bytes one write may carry (a multiple of 4096: a remote's
  // NBD_INFO_BLOCK_SIZE maximum, rounded down); 0: no limit of its own.
  // BackingStore::NewWriter makes its IOs no larger.
  virtual std::size_t max_write_bytes() const { return 0; }
  // Blocks found lost (written, then gone with a remote that came back
  // without them: nbd/nbd_backing_file.h); 0 for a local file.
  virtual std::uint64_t lost_blocks() const { return 0; }

  // Discards: whether the file wants to be told of bytes that no longer
  // hold data (a remote NBD export: TRIM). False by default: a local file
  // keeps freed blocks as they are, as zram's backing_dev does.
  virtual bool can_discard() const { return false; }
  struct Range {
    std::uint64_t offset = 0;  // bytes, 4096-aligned
    std::uint64_t len = 0;     // bytes, a multiple of 4096
  };
  // Discards `ranges` (sent without waiting for each in turn; a file may
  // bound how many are in flight at once) and sets, per
  // range, sent[i]: true once the file has answered, done or refused by
  // the file (either way nothing more is to be done), false when it could
  // not be sent or answered in time (a remote away): the caller asks
  // again later. Ranges are started in the order given, and a file that
  // bounds a Discard's time (the NBD file: nbd/nbd_backing_file.h) leaves
  // the last ones unstarted, never skips one to reach a later one; the
  // caller starts its next call with the first range left (as
  // BackingStore::DiscardFreed does, going round the store's blocks), so
  // every range is answered within a few calls however many new ones
  // keep coming. The files here that take no discards (the real file,
  // the in-memory one) answer every range at once, and are not asked.
  // REQUIRES: sent.size() == ranges.size().
  virtual void Discard(std::span<const Range> ranges, std::span<bool> sent) {
    (void)ranges;
    for (bool& s : sent) s = true;
  }
  // Bytes the store freed without a discard (can_discard() false): they
  // hold nothing the store will read. A remote uses it to keep its count
  // of lost blocks to what was still in use; nothing by default. Takes no
  // memory and does not block.
  virtual void Forget(const Range& range) { (void)range; }
};

// `size_bytes` of zeroed memory, named `name` in messages.
std::unique_ptr<BackingFile> NewMemBackingFile(std::uint64_t size_bytes,
                                               std::string name = "memory");

// What a fault function is shown: a read, a write, or the making of a
// writer (NewWriter), whose result is 0 and whose `bytes` are its buffers'
// (ios * io_bytes), at offset 0.
struct FileIo {
  enum class Kind { kRead, kWrite, kNewWriter } kind = Kind::kWrite;
  std::uint64_t offset = 0;  // bytes
  std::size_t bytes = 0;     // asked for
};
// Given the IO and its real result (bytes transferred, or -errno), returns
// the result the caller should see. For kNewWriter a -errno refuses the
// writer (NewWriter returns PosixError's Status for it, as when mmap finds
// no memory for its buffers: platform/backing_writers.h); anything else
// hands it out.
using FileFault = std::function<long(const FileIo& io, long result)>;

// `base` with every result passed through `fault` (see above). A writer
// `base` cannot make is refused as `base` refuses it, without asking
// `fault`.
std::unique_ptr<BackingFile> NewFaultyBackingFile(
    std::shared_ptr<BackingFile> base, FileFault fault);

// Given the file a BackingStore is about to use, returns the one it uses.
using BackingFileWrap =
    std::function<std::shared_ptr<BackingFile>(std::shared_ptr<BackingFile>)>;

}  // namespace ztier

#endif  // ZTIER_BACKING_FILE_H_
