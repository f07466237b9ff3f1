// posix_backing_file.h: the real BackingFile (ztier/backing_file.h), a file
// or a block device opened by path, and the writers behind it. Internal.
//
// Opening (OpenPosixBackingFile), as BackingStore::Open documents it:
//   - A missing file is created (mode 0600). A regular file shorter than
//     size_bytes is extended to it (fallocate, else ftruncate); a longer one
//     is used whole. A block device is used whole (its size from the
//     BLKGETSIZE64 ioctl); size_bytes is ignored.
//   - O_DIRECT when `direct` is set and the file system accepts it (an
//     O_DIRECT open that fails with EINVAL falls back to buffered IO).
//   - Errors name the call and the path: kNotFound for ENOENT (a missing
//     directory), kInvalidArgument for something that is not a regular file
//     or a block device, kIoError otherwise. A file this call created is
//     removed again when it fails; `*created` says whether it created one
//     that now exists (the caller removes it if it fails later).
//
// Writers: NewPwriteWriter writes each IO with one pwrite() in Queue;
// NewUringWriter (uring_writer.cc, only with ZTIER_URING) queues SQEs and
// submits them together in Reap. Both own their buffers (one mapping).
//
// Thread safety: as ztier/backing_file.h.
#ifndef ZTIER_PLATFORM_POSIX_BACKING_FILE_H_
#define ZTIER_PLATFORM_POSIX_BACKING_FILE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "ztier/backing_file.h"
#include "ztier/status.h"

namespace ztier::internal {

Result<std::unique_ptr<BackingFile>> OpenPosixBackingFile(
    const std::string& path, std::uint64_t size_bytes, bool direct,
    bool* created);

// Writers on `fd` (not owned), `path` for messages.
Result<std::unique_ptr<BackingFileWriter>> NewPwriteWriter(
    int fd, const std::string& path, std::size_t ios, std::size_t io_bytes);
#if ZTIER_URING
Result<std::unique_ptr<BackingFileWriter>> NewUringWriter(
    int fd, const std::string& path, std::size_t ios, std::size_t io_bytes);
#endif

// `bytes` of page-aligned anonymous memory, unmapped on destruction.
class WriterBuffers {
 public:
  WriterBuffers() = default;
  ~WriterBuffers();
  WriterBuffers(const WriterBuffers&) = delete;
  WriterBuffers& operator=(const WriterBuffers&) = delete;
  // kResourceExhausted naming `what` when the mapping fails.
  Status Map(std::size_t bytes, const std::string& what);
  std::byte* data() const { return data_; }
  // Forgets the mapping without unmapping it (the kernel may still write
  // from it).
  void Leak() { data_ = nullptr; }

 private:
  std::byte* data_ = nullptr;
  std::size_t bytes_ = 0;
};

}  // namespace ztier::internal

#endif  // ZTIER_PLATFORM_POSIX_BACKING_FILE_H_
