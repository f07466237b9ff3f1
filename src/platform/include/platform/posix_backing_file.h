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
//     Buffered IO is O_DSYNC, so that a completed write is on the device,
//     as with O_DIRECT.
//   - Claimed for as long as it is open: a block device is opened O_EXCL
//     (the kernel's zram claims its backing_dev the same way), a regular
//     file holds an exclusive flock. One that is mounted, swapped on, or
//     another device's or process's is kBusy.
//   - A regular file on one of the kernel's own file systems (procfs,
//     sysfs, ...: CheckBackingFileSystem) is kInvalidArgument: a writeback
//     would write pages into the kernel's controls.
//   - Errors name the call and the path: kNotFound for ENOENT (a missing
//     directory; its posix_errno() ENOENT), kInvalidArgument for something
//     that is not a regular file or a block device, kIoError otherwise. A file
//     this call created is removed again when it fails or throws (as
//     RemoveMadeFile does); `*created` says whether it created one that now
//     exists, and `*made` (when not null) is then that file, for the caller
//     to remove with RemoveMadeFile if it gives the file up unused.
//
// Its writers (backing_writers.h, private to platform/): one pwrite() per
// IO, or io_uring when built with ZTIER_URING.
//
// Thread safety: as ztier/backing_file.h.
#ifndef ZTIER_PLATFORM_POSIX_BACKING_FILE_H_
#define ZTIER_PLATFORM_POSIX_BACKING_FILE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "ztier/backing_file.h"
#include "ztier/status.h"

namespace ztier::internal {

// OK unless `fd` (a backing file, or the folder one is to be made in) is
// on one of the kernel's own file systems (procfs, sysfs, debugfs, cgroup,
// ...; f_type from fstatfs(2), linux/magic.h), whose files are controls
// that hold no data: then kInvalidArgument, "<what> is on NAME, a file
// system of the kernel's own: ...". `what` starts the message.
Status CheckBackingFileSystem(int fd, const std::string& what);

// A file by its device and inode (stat(2)'s st_dev and st_ino).
struct FileId {
  std::uint64_t dev = 0;
  std::uint64_t ino = 0;
};

// Removes `path` if it still names `made` (a file renamed or made in its
// place since is another's, and is left). Called while the file is still
// open and claimed (its flock held), so that no other device or process
// can have claimed it before it goes. Never throws; a failure is ignored
// (the file stays).
void RemoveMadeFile(const std::string& path, const FileId& made) noexcept;

Result<std::unique_ptr<BackingFile>> OpenPosixBackingFile(
    const std::string& path, std::uint64_t size_bytes, bool direct,
    bool* created, FileId* made = nullptr);

}  // namespace ztier::internal

#endif  // ZTIER_PLATFORM_POSIX_BACKING_FILE_H_
