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
//     that is not a regular file or a block device, kIoError otherwise.
//     `*created` says whether it created a file that now exists.
//   - A file it created is the returned object's until Keep(): destroyed
//     before then (the call failing or throwing, or a caller giving the
//     file up unused), the object removes it, first, while its descriptor
//     still claims it, so that no other device or process can have taken
//     it, and only if the path still names it (st_dev, st_ino): one
//     renamed or made in its place since is another's, and is left. A file
//     that was there before is never removed. A failure to remove is
//     ignored (the file stays).
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

// The file OpenPosixBackingFile opened.
class PosixBackingFile : public BackingFile {
 public:
  // The file it created stays when this is destroyed (see above); nothing
  // for one that was there before.
  virtual void Keep() = 0;
};

Result<std::unique_ptr<PosixBackingFile>> OpenPosixBackingFile(
    const std::string& path, std::uint64_t size_bytes, bool direct,
    bool* created);

}  // namespace ztier::internal

#endif  // ZTIER_PLATFORM_POSIX_BACKING_FILE_H_
