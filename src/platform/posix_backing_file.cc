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

// The file as OpenPosixBackingFile opens it (Open), and, when it made it,
// the owner of that file until Keep() (posix_backing_file.h).
class PosixFile final : public PosixBackingFile {
 public:
  explicit PosixFile(const std::string& path) : path_(path) {}
  ~PosixFile() override;

  // Opens and claims path_, making and sizing the file as the header says.
  // On an error the file stays this object's, to be let go (and one it
  // made removed) when it is destroyed.
  Status Open(std::uint64_t size_bytes, bool direct);
  bool made() const { return made_; }
  void Keep() override { made_ = false; }

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
  int fd_ = -1;
  std::uint64_t size_ = 0;
  bool direct_ = false;
  bool made_ = false;  // Open created the file, and Keep() was not called
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

namespace {

// The file this made goes first, while fd_ still claims it, and only if
// path_ still names it (st_dev, st_ino): one renamed or made in its place
// since is another's. A made file that another device or process claimed
// (an O_DIRECT open refused after it made the file, and the file taken
// before the buffered open: see Open) is not removed either.
PosixFile::~PosixFile() {
  if (fd_ < 0) return;
  struct stat held, named;
  if (made_ && ::fstat(fd_, &held) == 0 && S_ISREG(held.st_mode) &&
      ::flock(fd_, LOCK_EX | LOCK_NB) == 0 &&
      ::lstat(path_.c_str(), &named) == 0 && named.st_dev == held.st_dev &&
      named.st_ino == held.st_ino) {
    ::unlink(path_.c_str());
  }
  ::close(fd_);
}

Status PosixFile::Open(std::uint64_t size_bytes, bool direct) {
  const std::string& path = path_;
  struct stat st;
  const bool exists = ::stat(path.c_str(), &st) == 0;
  if (!exists && errno != ENOENT) return OpenError("stat", path, errno);
  if (exists && !S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode)) {
    return Status::InvalidArgument(path +
                                   " is not a regular file or a block device");
  }
  if (!exists && size_bytes < kPageSize) {
    return Status::InvalidArgument("backing file " + path + " of " +
                                   std::to_string(size_bytes) +
                                   " bytes holds no 4096-byte block");
  }
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
  fd_ = ::open(path.c_str(), flags | (direct ? O_DIRECT : O_DSYNC), 0600);
  made_ = !exists && fd_ >= 0;
  if (fd_ < 0 && errno == EINVAL && direct) {  // no O_DIRECT here
    // The refused open may have made the file already: open it without
    // O_EXCL (it is this call's, as far as the race above allows). A block
    // device keeps O_EXCL: its claim. Buffered: O_DSYNC, as above.
    direct = false;
    made_ = !exists;
    fd_ = ::open(path.c_str(), (blk ? flags : flags & ~O_EXCL) | O_DSYNC, 0600);
  }
  if (fd_ < 0 && errno == EBUSY && blk) {
    return Status::Busy("backing device " + path +
                        " is in use (mounted, swapped on, or claimed "
                        "by another device)");
  }
  if (fd_ < 0) return OpenError("open", path, errno);
  if (::fstat(fd_, &st) != 0) return OpenError("fstat", path, errno);
  // A block device is a node on devtmpfs; a regular file must be storage.
  if (S_ISREG(st.st_mode)) {
    if (Status s = CheckBackingFileSystem(fd_, path); !s.ok()) {
      return s;
    }
  }
  // A regular file is claimed with an exclusive flock for as long as it is
  // open: two devices writing back to one file would overwrite each
  // other's blocks.
  if (S_ISREG(st.st_mode) && ::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK) {
      return Status::Busy("backing file " + path +
                          " is in use (another device or process "
                          "holds its lock)");
    }
    return OpenError("flock", path, errno);
  }

  if (S_ISBLK(st.st_mode)) {  // used whole; size_bytes does not apply
    if (::ioctl(fd_, BLKGETSIZE64, &size_) != 0) {
      return OpenError("ioctl BLKGETSIZE64", path, errno);
    }
  } else if (S_ISREG(st.st_mode)) {
    size_ = static_cast<std::uint64_t>(st.st_size);
    if (size_ < size_bytes) {
      const auto want = static_cast<off_t>(size_bytes);
      if (::fallocate(fd_, 0, 0, want) != 0) {
        if (errno != EOPNOTSUPP) {
          return OpenError("fallocate", path, errno);
        }
        if (::ftruncate(fd_, want) != 0) {
          return OpenError("ftruncate", path, errno);
        }
      }
      size_ = size_bytes;
    }
  } else {
    return Status::InvalidArgument(path +
                                   " is not a regular file or a block device");
  }
  direct_ = direct;
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<PosixBackingFile>> OpenPosixBackingFile(
    const std::string& path, std::uint64_t size_bytes, bool direct,
    bool* created) {
  *created = false;
  // Made before the file is (it allocates): from the open on, a file this
  // call makes is this object's, removed if the call fails or throws.
  auto file = std::make_unique<PosixFile>(path);
  ZT_RETURN_IF_ERROR(file->Open(size_bytes, direct));
  *created = file->made();
  return std::unique_ptr<PosixBackingFile>(std::move(file));
}

}  // namespace ztier::internal
