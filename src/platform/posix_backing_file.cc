// posix_backing_file.cc: the real BackingFile (contract in
// posix_backing_file.h): opening and sizing the file, pread, the pwrite
// writer.
#include "platform/posix_backing_file.h"

#include <fcntl.h>
#include <linux/fs.h>
#include <linux/magic.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include "backing_writers.h"
#include "platform/done_writes.h"
#include "platform/mapping.h"
#include "ztier/page.h"

namespace ztier::internal {
namespace {

Status OpenError(const char* call, const std::string& path, int err) {
  // The errno kept (ErrnoNameOf): a person reads ENOENT, not the ENODEV a
  // bare kNotFound stands for, and ENOSPC from fallocate is named so.
  return PosixError(
      std::string(call) + " " + path, err,
      err == ENOENT ? StatusCode::kNotFound : StatusCode::kIoError);
}

class PosixBackingFile final : public BackingFile {
 public:
  PosixBackingFile(std::string path, int fd, std::uint64_t size, bool direct)
      : path_(std::move(path)), fd_(fd), size_(size), direct_(direct) {}
  ~PosixBackingFile() override { ::close(fd_); }

  const std::string& name() const override { return path_; }
  std::uint64_t size() const override { return size_; }
  bool direct() const override { return direct_; }
  long Read(std::uint64_t offset, std::span<std::byte> out) override {
    ssize_t r;
    do {
      r = ::pread(fd_, out.data(), out.size(), static_cast<off_t>(offset));
    } while (r < 0 && errno == EINTR);
    return r < 0 ? -errno : static_cast<long>(r);
  }
  Result<std::unique_ptr<BackingFileWriter>> NewWriter(
      std::size_t ios, std::size_t io_bytes) override {
#if ZTIER_URING
    if (ios > 1 || io_bytes > kPageSize) {
      auto w = NewUringWriter(fd_, path_, ios, io_bytes);
      // A ring refused by the kernel (io_uring disabled, filtered, or out
      // of locked memory): one pwrite per IO still writes back.
      if (w.has_value() || w.error().code() != StatusCode::kIoError) return w;
    }
#endif
    return NewPwriteWriter(fd_, path_, ios, io_bytes);
  }

 private:
  const std::string path_;
  const int fd_;
  const std::uint64_t size_;
  const bool direct_;
};

// One pwrite() per IO, in Queue; Reap reports them.
class PwriteWriter final : public BackingFileWriter {
 public:
  PwriteWriter(int fd, std::size_t ios, std::size_t io_bytes)
      : fd_(fd), io_bytes_(io_bytes), done_(ios) {}

  platform::Mapping buffers;

  std::byte* buffer(std::size_t io) override {
    return buffers.data() + io * io_bytes_;
  }
  void Queue(std::size_t io, std::uint64_t offset, std::size_t len) override {
    ssize_t r;
    do {
      r = ::pwrite(fd_, buffer(io), len, static_cast<off_t>(offset));
    } while (r < 0 && errno == EINTR);
    done_.Add(io, r < 0 ? -errno : static_cast<long>(r));
  }
  std::size_t Reap(
      bool /*wait: all are done*/,
      const std::function<void(std::size_t, long)>& done) override {
    return done_.Report(done);
  }

 private:
  const int fd_;
  const std::size_t io_bytes_;
  DoneWrites done_;
};

}  // namespace

Status CheckBackingFileSystem(int fd, const std::string& what) {
  // The kernel's interface file systems (f_type values from linux/magic.h):
  // their regular files are controls, and a root process may open most of
  // them read-write.
  static constexpr struct {
    unsigned long magic;
    const char* name;
  } kKernelFileSystems[] = {
      {PROC_SUPER_MAGIC, "proc"},       {SYSFS_MAGIC, "sysfs"},
      {DEBUGFS_MAGIC, "debugfs"},       {TRACEFS_MAGIC, "tracefs"},
      {SECURITYFS_MAGIC, "securityfs"}, {SELINUX_MAGIC, "selinuxfs"},
      {SMACK_MAGIC, "smackfs"},         {CGROUP_SUPER_MAGIC, "cgroup"},
      {CGROUP2_SUPER_MAGIC, "cgroup2"}, {BPF_FS_MAGIC, "bpf"},
      {PSTOREFS_MAGIC, "pstore"},       {EFIVARFS_MAGIC, "efivarfs"},
      {BINFMTFS_MAGIC, "binfmt_misc"},  {RDTGROUP_SUPER_MAGIC, "resctrl"},
      {0x65735543, "fusectl"},   // FUSE_CTL_SUPER_MAGIC, fs/fuse/control.c
      {0x62656570, "configfs"},  // CONFIGFS_MAGIC, fs/configfs/mount.c
  };
  struct statfs fs;
  if (::fstatfs(fd, &fs) != 0) return OpenError("fstatfs", what, errno);
  const auto type = static_cast<unsigned long>(fs.f_type);
  for (const auto& k : kKernelFileSystems) {
    if (type != k.magic) continue;
    return Status::InvalidArgument(
        what + " is on " + k.name +
        ", a file system of the kernel's own: its files are controls that "
        "hold no data, not storage");
  }
  return Status::Ok();
}

Result<std::unique_ptr<BackingFileWriter>> NewPwriteWriter(
    int fd, const std::string& path, std::size_t ios, std::size_t io_bytes) {
  auto w = std::make_unique<PwriteWriter>(fd, ios, io_bytes);
  ZT_ASSIGN_OR_RETURN(
      w->buffers,
      platform::Mapping::Anonymous(ios * io_bytes, platform::Commit::kCharged,
                                   "mmap writer buffers for " + path));
  return std::unique_ptr<BackingFileWriter>(std::move(w));
}

void RemoveMadeFile(const std::string& path, const FileId& made) noexcept {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return;
  if (static_cast<std::uint64_t>(st.st_dev) != made.dev ||
      static_cast<std::uint64_t>(st.st_ino) != made.ino) {
    return;
  }
  ::unlink(path.c_str());
}

namespace {

// The descriptor OpenPosixBackingFile opened, closed when it fails or
// throws; the file it made, if any, removed first (RemoveMadeFile), while
// this descriptor still claims it. A made file that another device or
// process claimed (an O_DIRECT open refused after it made the file, and
// the file taken before the buffered open: see there) is not removed.
struct Opening {
  const std::string& path;
  int fd = -1;
  bool made = false;
  ~Opening() {
    if (fd < 0) return;
    struct stat st;
    if (made && ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
        ::flock(fd, LOCK_EX | LOCK_NB) == 0) {
      RemoveMadeFile(path, {static_cast<std::uint64_t>(st.st_dev),
                            static_cast<std::uint64_t>(st.st_ino)});
    }
    ::close(fd);
  }
};

}  // namespace

Result<std::unique_ptr<BackingFile>> OpenPosixBackingFile(
    const std::string& path, std::uint64_t size_bytes, bool direct,
    bool* created, FileId* made_id) {
  *created = false;
  struct stat st;
  const bool exists = ::stat(path.c_str(), &st) == 0;
  if (!exists && errno != ENOENT) return Err(OpenError("stat", path, errno));
  if (exists && !S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode)) {
    return Err(Status::InvalidArgument(
        path + " is not a regular file or a block device"));
  }
  if (!exists && size_bytes < kPageSize) {
    return Err(Status::InvalidArgument("backing file " + path + " of " +
                                       std::to_string(size_bytes) +
                                       " bytes holds no 4096-byte block"));
  }
  // A file this call created is removed again if it fails after all.
  Opening opening{path};
  int& fd = opening.fd;
  bool& made = opening.made;  // this call created the file
  auto fail = [](Status s) { return Err(std::move(s)); };
  // O_EXCL: a file another process made since the stat is not taken for
  // this call's own (and so not removed on a failure below).
  // O_EXCL on a block device claims it, as the kernel's zram does
  // (BLK_OPEN_EXCL): EBUSY when it is mounted, swapped on or claimed.
  const bool blk = exists && S_ISBLK(st.st_mode);
  const int flags =
      O_RDWR | O_CLOEXEC | (exists ? (blk ? O_EXCL : 0) : O_CREAT | O_EXCL);
  // Buffered (not `direct`), O_DSYNC: a write must be on the device when it
  // completes, as an O_DIRECT one is, since the caller then frees the
  // page's RAM copy. Left to the page cache, a later failed flush would go
  // unreported and a read would return the block's old bytes.
  fd = ::open(path.c_str(), flags | (direct ? O_DIRECT : O_DSYNC), 0600);
  made = !exists && fd >= 0;
  if (fd < 0 && errno == EINVAL && direct) {  // no O_DIRECT here
    // The refused open may have made the file already: open it without
    // O_EXCL (it is this call's, as far as the race above allows). A block
    // device keeps O_EXCL: its claim. Buffered: O_DSYNC, as above.
    direct = false;
    made = !exists;
    fd = ::open(path.c_str(), (blk ? flags : flags & ~O_EXCL) | O_DSYNC, 0600);
  }
  if (fd < 0 && errno == EBUSY && blk) {
    return fail(Status::Busy("backing device " + path +
                             " is in use (mounted, swapped on, or claimed "
                             "by another device)"));
  }
  if (fd < 0) return fail(OpenError("open", path, errno));
  if (::fstat(fd, &st) != 0) return fail(OpenError("fstat", path, errno));
  // A block device is a node on devtmpfs; a regular file must be storage.
  if (S_ISREG(st.st_mode)) {
    if (Status s = CheckBackingFileSystem(fd, path); !s.ok()) {
      return fail(std::move(s));
    }
  }
  // A regular file is claimed with an exclusive flock for as long as it is
  // open: two devices writing back to one file would overwrite each
  // other's blocks.
  if (S_ISREG(st.st_mode) && ::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK) {
      return fail(Status::Busy("backing file " + path +
                               " is in use (another device or process "
                               "holds its lock)"));
    }
    return fail(OpenError("flock", path, errno));
  }

  std::uint64_t size = 0;
  if (S_ISBLK(st.st_mode)) {  // used whole; size_bytes does not apply
    if (::ioctl(fd, BLKGETSIZE64, &size) != 0) {
      return fail(OpenError("ioctl BLKGETSIZE64", path, errno));
    }
  } else if (S_ISREG(st.st_mode)) {
    size = static_cast<std::uint64_t>(st.st_size);
    if (size < size_bytes) {
      const auto want = static_cast<off_t>(size_bytes);
      if (::fallocate(fd, 0, 0, want) != 0) {
        if (errno != EOPNOTSUPP) {
          return fail(OpenError("fallocate", path, errno));
        }
        if (::ftruncate(fd, want) != 0) {
          return fail(OpenError("ftruncate", path, errno));
        }
      }
      size = size_bytes;
    }
  } else {
    return fail(Status::InvalidArgument(
        path + " is not a regular file or a block device"));
  }
  auto file = std::make_unique<PosixBackingFile>(path, fd, size, direct);
  fd = -1;  // the file's now
  *created = !exists;
  if (made_id != nullptr) {
    *made_id = {static_cast<std::uint64_t>(st.st_dev),
                static_cast<std::uint64_t>(st.st_ino)};
  }
  return std::unique_ptr<BackingFile>(std::move(file));
}

}  // namespace ztier::internal
