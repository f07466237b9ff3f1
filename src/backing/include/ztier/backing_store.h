// File: ztier/backing_store.h
//
// BackingStore: where written-back pages go when they leave RAM (zram's
// backing_dev). A file (created and sized if missing) or a block device,
// split into 4096-byte blocks, with a bitmap of the blocks in use.
//
//   auto bs = ztier::BackingStore::Open({.path = "/var/tmp/zram0.wb",
//                                        .size_bytes = 1 << 30});
//   auto w = (*bs)->NewWriter({.in_flight = 32});
//   std::size_t got;
//   std::uint64_t b = (*bs)->AllocRange(32, &got);   // alloc_block_bdev_range
//                                                    // (docs/references.md)
//   BlockWriter::Io* io = (*w)->Begin(b);
//   std::memcpy((*w)->Add(io, /*tag=*/7).data(), page, 4096);  // tag 7
//   (*w)->Submit(io);
//   (*w)->Reap(/*wait=*/true, [](const BlockWriter::Done& d) { ... });
//
// Opening (Open):
//   - The file is BackingOptions::file when set (an in-memory one, or one
//     an embedder implements; ztier/backing_file.h), else the file or block
//     device at `path`, opened as below. `wrap_file`, when set, is given
//     that file and returns the one used (tests: NewFaultyBackingFile).
//   - A missing file is created (mode 0600), and removed again with the
//     store unless KeepFile() is called (see created()). A regular file
//     shorter than size_bytes is extended to it (fallocate, else
//     ftruncate); a longer one is used whole. A block device is used whole;
//     size_bytes is ignored. The usable size is rounded down to whole
//     blocks; 0 blocks is kInvalidArgument.
//   - O_DIRECT is used when `direct` is set and the file system accepts it
//     (an O_DIRECT open that fails with EINVAL falls back to buffered IO;
//     direct() tells which one is in use). Buffers handed out by the writer
//     and used by ReadBlock are 4096-byte aligned either way.
//   - With `encrypt`, every block written is sealed with AES-256-GCM under a
//     key generated at Open from the OS's random source and held only in this
//     object's memory. The nonce is unique per write (a 64-bit write counter
//     that never repeats under one key); the block number is authenticated
//     too, so a block copied elsewhere in the file does not open. The 16-byte
//     tag and the nonce counter live in memory (24 bytes per block ever
//     written; the table is mapped lazily), so the file holds exactly one
//     4096-byte ciphertext per block and nothing else. Nothing written can be
//     read after the BackingStore is destroyed: the key is gone.
//
// Block allocation:
//   - AllocRange(want, &got) reserves up to `want` consecutive free blocks:
//     the first run of `want` free blocks from a rotating cursor when there
//     is one, else the longest run it finds that is shorter (a fragmented
//     store still makes progress). Returns the first block, and sets got > 0;
//     got == 0 (and kNoBlock) when every block is in use.
//   - Free(block) releases one block. Freeing a block that is not in use
//     is a bug (asserted).
//   - blocks_used() is zram's bd_count: reserved plus written blocks.
//   - Discards: when the file wants them (BackingFile::can_discard(): a
//     remote NBD export), Free only queues the block, a bit in a second
//     bitmap (so Free takes no memory; two more bits per block are kept
//     for such files): it no longer counts in blocks_used(), but
//     AllocRange cannot hand it out until DiscardFreed() has sent its
//     discard (TRIM) and had an answer. So an answered discard never
//     overtakes a later write to the same block, on any connection. Blocks
//     whose discard could not be sent or was not answered (the remote
//     away, or its time for the call up) stay queued for the next call,
//     which starts with them: each call's runs go in block order from
//     where the one before stopped, round to the block before it, so
//     every freed block is reached within a few calls even while frees keep
//     coming faster than the remote answers. An unanswered one may still be
//     carried out late by a stalled remote (nbd/nbd_backing_file.h says
//     what the file then does). The page store calls it at the start
//     of each writeback pass. With a local file, Free frees at once and
//     DiscardFreed does nothing.
//
// Writing (BlockWriter): batched asynchronous writes (the file's writer:
// through io_uring for a real file when built with it), up to
// `in_flight` IOs at once, each IO one run of consecutive blocks of at most
// `max_io_blocks` (default 32: 128 KiB). With in_flight == 1 and
// max_io_blocks == 1 the writer does one synchronous pwrite() per block
// instead (zram's writeback before the zram writeback batching series in
// docs/references.md; the baseline of `ztier bench writeback`). Each block
// carries the caller's tag back in its completion. An IO that fails, or
// writes fewer bytes than asked (a short write), fails every block in it:
// Done::status is kIoError (EIO, or a short write), or kResourceExhausted:
// with Done::full the file system is full (ENOSPC, EDQUOT), without it an
// encrypted IO could not be sealed for want of memory (OpenSSL had none
// for its cipher context). A failed write's Done::status keeps its errno
// (ErrnoNameOf names ENOSPC, EDQUOT, EINVAL, not the code's errno name).
// The writer never frees blocks; the caller decides.
//
// Reading (ReadBlock): one synchronous read of one block (the file's Read:
// pread for a real file), then, when encrypted, authentication and
// decryption. A read error is kIoError, but ENOMEM (kResourceExhausted) and
// EAGAIN (kBusy), which a caller may try again, as it may after
// kResourceExhausted for no memory for the read buffer or the cipher's
// set-up; a failed read's status keeps its errno (ErrnoNameOf); a block
// that fails authentication is kCorruption; none ever yields data. Without encryption
// a local file's blocks are taken as the file system returns them (as the
// kernel's zram takes its backing device's): a block damaged on the disk
// unnoticed by it is not detected here.
//
// Fault injection (for tests): wrap the file with NewFaultyBackingFile
// (`wrap_file`); its fault function sees each read and write and its result
// and may return another, which the store acts on as above. This is how
// tests make EIO, ENOSPC and short transfers happen on a real file.
//
// Thread safety: AllocRange, Free, ReadBlock, blocks_used and the const
// accessors may be called from any thread at any time. A BlockWriter is
// used by one thread at a time; several writers may exist at once. The
// BackingStore must outlive every writer it made. The file's own rules are
// in ztier/backing_file.h.
#ifndef ZTIER_BACKING_STORE_H_
#define ZTIER_BACKING_STORE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "ztier/backing_file.h"
#include "ztier/page.h"
#include "ztier/status.h"

namespace ztier {

struct BackingOptions {
  std::string path;              // a file or a block device; unless `file`
  std::uint64_t size_bytes = 0;  // for a file: the least size (see above)
  bool direct = true;            // O_DIRECT when the file system allows it
  bool encrypt = false;          // AES-256-GCM with an in-memory key
  // The file to use instead of opening `path` (path, size_bytes and direct
  // are then not used). Its size is used whole.
  std::shared_ptr<BackingFile> file;
  BackingFileWrap wrap_file;  // null: the file as it is
};

class BlockWriter;

class BackingStore {
 public:
  static constexpr std::uint64_t kNoBlock = ~std::uint64_t{0};

  // Opens (creating or extending a file as above) and claims a path for as
  // long as the store lives (platform/posix_backing_file.h). Errors name
  // the path and the system call: kNotFound (no such directory),
  // kInvalidArgument (not a regular file or block device; size 0; neither
  // path nor file), kBusy (mounted, swapped on, or another's), kIoError
  // (anything else).
  static Result<std::unique_ptr<BackingStore>> Open(
      const BackingOptions& options);
  ~BackingStore();
  BackingStore(const BackingStore&) = delete;
  BackingStore& operator=(const BackingStore&) = delete;

  const std::string& path() const;
  std::uint64_t num_blocks() const;
  // Open made the file at path() (it was missing). Such a file is the
  // store's until KeepFile(): Open failing or throwing, or a store
  // destroyed before then (a caller giving it up unused, as device.cc's
  // SetDisksize does when the device's store cannot be made), removes it
  // as the file is let go (with the store, or with the last holder of the
  // file wrap_file returned): while it is still open and claimed, so that
  // no other device or process can have taken it first, and only if the
  // path still names it (one renamed or made in its place since is left;
  // platform/posix_backing_file.h). A file that was there before, or a
  // given one (BackingOptions::file), is never removed.
  bool created() const;
  // The file Open made stays when the store is destroyed: call it once the
  // store is put to use. Nothing for any other file. Never throws.
  void KeepFile() noexcept;
  bool direct() const;  // O_DIRECT in use
  bool encrypted() const;
  std::uint64_t blocks_used() const;
  std::uint64_t lost_blocks() const;  // the file's (BackingFile::lost_blocks)

  std::uint64_t AllocRange(std::size_t want, std::size_t* got);
  void Free(std::uint64_t block);
  // Frees a block that holds nothing of the caller's (never written, or
  // its write failed and cannot land later: not Done::may_land) at once,
  // without a discard: a pass that fails while the remote is away gives
  // its blocks back instead of queueing them.
  void FreeUnwritten(std::uint64_t block);
  // Sends the discards of the blocks freed so far (see above), waiting for
  // their answers, then makes those blocks free. Returns how many. Blocks
  // the file may be waiting on the network; call it holding no lock of
  // the caller's that a reader or writer needs.
  std::uint64_t DiscardFreed();

  // Reads block `block` into `out`. See the contract above.
  Status ReadBlock(std::uint64_t block, MutablePage out);

  struct WriterOptions {
    std::size_t in_flight = 32;      // IOs submitted and not yet reaped, >= 1
    // Blocks per IO, 1..256; fewer when the file takes no larger writes
    // (BackingFile::max_write_bytes; BlockWriter::max_io_blocks says).
    std::size_t max_io_blocks = 32;
  };
  // kInvalidArgument for a bad option; the file's NewWriter errors (kIoError
  // if io_uring cannot be set up, saying why).
  Result<std::unique_ptr<BlockWriter>> NewWriter(const WriterOptions& options);

 private:
  friend class BlockWriter;
  BackingStore();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Batched writes of consecutive blocks. One thread at a time.
class BlockWriter {
 public:
  // One IO being filled: a run of consecutive blocks from first_block.
  struct Io;
  // One block's outcome.
  struct Done {
    std::uint64_t block = 0;
    std::uint64_t tag = 0;
    Status status;
    // Failed, but the write was sent and may still land (the file's
    // -ETIMEDOUT or -ENOTCONN: a remote given up on). Give such a block
    // back with Free, which holds it until its discard is answered, not
    // FreeUnwritten, which hands it out at once. (NBD orders nothing
    // between an abandoned connection and a new one, so a late write can
    // still land after the discard; the remote file's checksums then fail
    // the block's read: nbd/nbd_backing_file.h.)
    bool may_land = false;
    // Failed for want of room: the file's -ENOSPC or -EDQUOT (status
    // kResourceExhausted). A kResourceExhausted status without it is want
    // of memory, not of room.
    bool full = false;
    // Written, or may be: its block goes back with Free, not FreeUnwritten.
    bool may_hold_data() const { return status.ok() || may_land; }
  };

  ~BlockWriter();
  BlockWriter(const BlockWriter&) = delete;
  BlockWriter& operator=(const BlockWriter&) = delete;

  // True when another IO may begin: fewer than in_flight IOs are begun and
  // not yet reaped. Several IOs may be filled at once.
  bool HasRoom() const;
  std::size_t in_flight() const;  // submitted, not yet reaped
  std::size_t max_io_blocks() const;

  // Starts an IO whose first block is `first_block`. REQUIRES: HasRoom().
  Io* Begin(std::uint64_t first_block);
  // Adds the next block of `io` (first_block + blocks so far) and returns its
  // 4096-byte, 4096-aligned buffer to fill before Submit. `tag` comes back in
  // that block's Done. REQUIRES: fewer than max_io_blocks blocks in `io`.
  std::span<std::byte> Add(Io* io, std::uint64_t tag);
  std::size_t BlocksIn(const Io* io) const;
  // Seals `io` (when encrypted) and queues it; the next Reap() hands every
  // queued IO to the kernel in one system call. An IO with no blocks is
  // simply dropped. In synchronous mode the write happens here.
  void Submit(Io* io);
  // Submits what is queued, then calls `done` once per block of every IO
  // that has completed; with `wait`, first waits until at least one has (if
  // any is in flight). Returns the number of blocks reported. An exception
  // from `done` (std::bad_alloc) is rethrown once every block the call took
  // has been reported: in_flight() then counts only IOs still to reap.
  std::size_t Reap(bool wait, const std::function<void(const Done&)>& done);

 private:
  friend class BackingStore;
  BlockWriter();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ztier

#endif  // ZTIER_BACKING_STORE_H_
