// ublk.cc: the ublk control and queue rings, the user-copy reads and
// writes and the probes (contract in platform/ublk.h). Command encodings
// and the driver's checks cited are from Linux 6.12's
// drivers/block/ublk_drv.c (ublk_ctrl_uring_cmd(), ublk_ch_uring_cmd(),
// ublk_ch_mmap(), ublk_ch_read_iter()/write_iter()).
#include "platform/ublk.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#if ZTIER_URING
#include <liburing.h>
#endif

#ifndef PR_SET_IO_FLUSHER
#define PR_SET_IO_FLUSHER 57
#endif

namespace ztier::platform {

std::string UblkCharPath(std::uint32_t dev_id) {
  return "/dev/ublkc" + std::to_string(dev_id);
}
std::string UblkBlockPath(std::uint32_t dev_id) {
  return "/dev/ublkb" + std::to_string(dev_id);
}

namespace {
std::uint64_t RoundUpPage(std::uint64_t n) {
  const std::uint64_t page = UblkPageBytes();
  return (n + page - 1) & ~(page - 1);
}
std::string DevName(std::uint32_t dev_id) {
  return "ublk device " + std::to_string(dev_id);
}
}  // namespace

std::uint64_t UblkPageBytes() {
  static const long page = ::sysconf(_SC_PAGESIZE);
  return page > 0 ? static_cast<std::uint64_t>(page) : 4096;
}

std::uint64_t UblkMaxCmdBufBytes() {
  return RoundUpPage(ublk::kMaxQueueDepth * sizeof(ublk::IoDesc));
}
std::uint64_t UblkCmdBufOffset(std::uint16_t q_id) {
  return ublk::kCmdBufOffset + q_id * UblkMaxCmdBufBytes();
}
std::size_t UblkQueueCmdBufBytes(std::uint16_t depth) {
  return static_cast<std::size_t>(RoundUpPage(depth * sizeof(ublk::IoDesc)));
}

Result<int> OpenUblkChar(const std::string& path, int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(timeout_ms);
  for (;;) {
    const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (fd >= 0) return fd;
    const int err = errno;
    // EBUSY: another ztier starting up looks at whether the device is
    // held (UblkCharHeld), which holds it for a moment.
    if ((err != ENOENT && err != EBUSY) ||
        std::chrono::steady_clock::now() >= deadline) {
      return Err(PosixError("open " + path, err));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

void CloseFd(int fd) {
  if (fd >= 0) ::close(fd);
}

namespace {

// stat(2) of `path` from the attributes the kernel holds, without asking a
// remote file system (NFS, FUSE) that may not answer: false if it fails.
bool CachedStat(const std::string& path, struct statx* stx) {
  return ::statx(AT_FDCWD, path.c_str(), AT_STATX_DONT_SYNC | AT_NO_AUTOMOUNT,
                 STATX_TYPE, stx) == 0;
}

bool IsOneOf(const struct statx& stx, const std::vector<dev_t>& devs) {
  if (!S_ISBLK(stx.stx_mode)) return false;
  const dev_t rdev = makedev(stx.stx_rdev_major, stx.stx_rdev_minor);
  return std::find(devs.begin(), devs.end(), rdev) != devs.end();
}

// The first line of a small file, without its newline; "" if unreadable.
std::string FirstLine(const std::string& path) {
  std::string line;
  if (FILE* f = std::fopen(path.c_str(), "re")) {
    char buf[4096] = {};
    if (std::fgets(buf, sizeof(buf), f) != nullptr) line = buf;
    std::fclose(f);
  }
  if (!line.empty() && line.back() == '\n') line.pop_back();
  return line;
}

// The numbers of block device `name` (as under /sys/class/block) and of
// its partitions ("MAJ:MIN" in each one's dev file); empty if no such
// device.
std::vector<dev_t> DiskAndPartitions(const std::string& name) {
  std::vector<dev_t> devs;
  const auto add = [&](const std::string& dir) {
    unsigned major = 0, minor = 0;
    if (std::sscanf(FirstLine(dir + "/dev").c_str(), "%u:%u", &major, &minor) ==
        2) {
      devs.push_back(makedev(major, minor));
    }
  };
  const std::string disk = "/sys/class/block/" + name;
  add(disk);
  if (devs.empty()) return devs;
  if (DIR* d = ::opendir(disk.c_str())) {
    while (const dirent* e = ::readdir(d)) {
      if (std::string_view(e->d_name).starts_with(name)) {
        add(disk + "/" + e->d_name);
      }
    }
    ::closedir(d);
  }
  return devs;
}

// The first process other than this one with a descriptor open on one of
// `devs`: "process PID (COMM)", or "". Only a descriptor whose link names
// a path is looked at (not a socket, pipe or anon inode), by its cached
// attributes.
std::string ProcessWithBlockDeviceOpen(const std::vector<dev_t>& devs) {
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return "";
  const std::string self = std::to_string(::getpid());
  std::string found;
  while (found.empty()) {
    const dirent* e = ::readdir(proc);
    if (e == nullptr) break;
    const std::string pid = e->d_name;
    if (pid.empty() || !std::all_of(pid.begin(), pid.end(), ::isdigit) ||
        pid == self) {
      continue;
    }
    const std::string fds = "/proc/" + pid + "/fd";
    DIR* d = ::opendir(fds.c_str());
    if (d == nullptr) continue;  // gone, or not ours to read
    while (const dirent* f = ::readdir(d)) {
      if (f->d_name[0] == '.') continue;
      const std::string link = fds + "/" + f->d_name;
      char target[8];
      if (::readlink(link.c_str(), target, sizeof(target)) <= 0 ||
          target[0] != '/') {
        continue;
      }
      struct statx stx;
      if (CachedStat(link, &stx) && IsOneOf(stx, devs)) {
        const std::string comm = FirstLine("/proc/" + pid + "/comm");
        found = "process " + pid + (comm.empty() ? "" : " (" + comm + ")");
        break;
      }
    }
    ::closedir(d);
  }
  ::closedir(proc);
  return found;
}

// A loop device whose backing file is one of `devs`: "loopN", or ""
// (/sys/block/loopN/loop/backing_file names it).
std::string LoopBackedBy(const std::vector<dev_t>& devs) {
  DIR* d = ::opendir("/sys/block");
  if (d == nullptr) return "";
  std::string found;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (!name.starts_with("loop")) continue;
    const std::string backing =
        FirstLine("/sys/block/" + name + "/loop/backing_file");
    struct statx stx;
    if (backing.starts_with("/") && CachedStat(backing, &stx) &&
        IsOneOf(stx, devs)) {
      found = name;
      break;
    }
  }
  ::closedir(d);
  return found;
}

}  // namespace

namespace {
// The user of block device `path` other than an exclusive open this
// process holds on it: an opener in /proc or a loop device (see
// BlockDeviceUser), or "".
std::string OtherUser(const std::string& path) {
  const std::size_t slash = path.rfind('/');
  const std::vector<dev_t> devs = DiskAndPartitions(
      slash == std::string::npos ? path : path.substr(slash + 1));
  if (devs.empty()) return std::string();
  std::string user = ProcessWithBlockDeviceOpen(devs);
  if (user.empty()) user = LoopBackedBy(devs);
  return user;
}
}  // namespace

Result<BlockDeviceClaim> ClaimUnusedBlockDevice(const std::string& path) {
  BlockDeviceClaim claim;
  const int fd = ::open(path.c_str(), O_RDONLY | O_EXCL | O_CLOEXEC);
  if (fd >= 0) {
    claim.fd.Reset(fd);
  } else {
    const int err = errno;
    if (err == EBUSY) {
      claim.user = "mounted, swapped on or claimed";
      return claim;
    }
    // No node here (a container's /dev, say): the disk may still exist.
    if (err != ENOENT && err != ENXIO && err != ENODEV) {
      return Err(PosixError("open " + path + " O_EXCL", err));
    }
  }
  claim.user = OtherUser(path);
  if (!claim.user.empty()) claim.fd.Reset();
  return claim;
}

Result<std::string> BlockDeviceUser(const std::string& path) {
  ZT_ASSIGN_OR_RETURN(BlockDeviceClaim claim, ClaimUnusedBlockDevice(path));
  return std::move(claim.user);  // the claim, if any, is let go here
}

namespace {
// A file's text ("" if unreadable); /proc files have no size to go by.
std::string FileText(const char* path) {
  std::string text;
  if (FILE* f = std::fopen(path, "re")) {
    char buf[4096];
    std::size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, n);
    std::fclose(f);
  }
  return text;
}

// The whitespace-separated fields of one line.
std::vector<std::string_view> Fields(std::string_view line) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    const std::size_t start = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t') ++i;
    if (i > start) out.push_back(line.substr(start, i - start));
  }
  return out;
}

// Calls f(fields) for each line of `text`, until it returns true.
template <typename F>
bool AnyLine(const std::string& text, F f) {
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    if (f(Fields(std::string_view(text).substr(pos, end - pos)))) return true;
    pos = end + 1;
  }
  return false;
}
}  // namespace

std::string StoppedBlockDeviceHolder(const std::string& path,
                                     const std::string& swaps,
                                     const std::string& mounts) {
  // /proc/swaps escapes the space of "PATH (deleted)" as \040 (seq_file's
  // mangle_path(), in mm/swapfile.c's swap_show()).
  const bool swap = AnyLine(swaps, [&](const auto& f) {
    return !f.empty() &&
           (f[0] == path || f[0] == path + "\\040(deleted)");
  });
  if (swap) return "swap";
  std::string dir;
  AnyLine(mounts, [&](const auto& f) {
    if (f.size() < 2 || f[0] != path) return false;
    dir = f[1];
    return true;
  });
  if (!dir.empty()) return "the file system mounted on " + dir;
  return "its last opener";
}

std::string StoppedBlockDeviceHolder(const std::string& path) {
  return StoppedBlockDeviceHolder(path, FileText("/proc/swaps"),
                                  FileText("/proc/self/mounts"));
}

bool UblkCharHeld(std::uint32_t dev_id) {
  const int fd = ::open(UblkCharPath(dev_id).c_str(), O_RDWR | O_CLOEXEC);
  if (fd >= 0) {
    ::close(fd);
    return false;
  }
  return errno == EBUSY;
}

bool ProcessAlive(pid_t pid) {
  if (pid <= 0) return false;
  return ::kill(pid, 0) == 0 || errno == EPERM;
}

Status SetIoFlusher() {
  if (::prctl(PR_SET_IO_FLUSHER, 1, 0, 0, 0) != 0) {
    return PosixError("prctl(PR_SET_IO_FLUSHER)", errno);
  }
  return Status::Ok();
}

// The rings (io_uring's, with ZTIER_URING).
#if ZTIER_URING
struct UblkControl::Ring {
  io_uring ring;
};
struct UblkQueueRing::Ring {
  io_uring ring;
};
#else
struct UblkControl::Ring {};
struct UblkQueueRing::Ring {};
#endif

UblkControl::UblkControl() = default;
UblkQueueRing::UblkQueueRing(int char_fd, std::uint16_t q_id,
                             std::uint16_t depth)
    : char_fd_(char_fd), q_id_(q_id), depth_(depth) {}

std::vector<std::uint32_t> UblkControl::ListDevices() {
  std::vector<std::uint32_t> ids;
  DIR* dir = ::opendir("/dev");
  if (dir == nullptr) return ids;
  while (dirent* e = ::readdir(dir)) {
    const std::string_view name = e->d_name;
    if (!name.starts_with("ublkc") || name.size() == 5) continue;
    std::uint32_t id = 0;
    bool digits = true;
    for (char c : name.substr(5)) {
      if (c < '0' || c > '9') digits = false;
      id = id * 10 + static_cast<std::uint32_t>(c - '0');
    }
    if (digits) ids.push_back(id);
  }
  ::closedir(dir);
  std::sort(ids.begin(), ids.end());
  return ids;
}

#if ZTIER_URING

bool UblkBuilt() { return true; }

namespace {
// Whether io_uring_enter's result `r` is the kernel refusing for a while:
// EAGAIN or ENOMEM when it has no memory for the commands (under the
// memory pressure a swap device is for), EBUSY while completions wait to
// be reaped. Asked again a moment later, it takes them.
bool RefusedForAWhile(int r) {
  return r == -EAGAIN || r == -ENOMEM || r == -EBUSY;
}
// The pause before asking a kernel that refused for a while again.
void BackOff() { std::this_thread::sleep_for(std::chrono::milliseconds(1)); }
}  // namespace

Result<std::unique_ptr<UblkControl>> UblkControl::Open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) {
      return Err(Status::NotFound("no " + path +
                                  ": this kernel has no ublk (modprobe "
                                  "ublk_drv)"));
    }
    return Err(PosixError("open " + path, err));
  }
  std::unique_ptr<UblkControl> c(new UblkControl());
  c->fd_ = fd;
  auto ring = std::make_unique<Ring>();
  // The driver refuses control commands in 64-byte SQEs (they carry a
  // 32-byte ublksrv_ctrl_cmd in the SQE's cmd area).
  const int r = io_uring_queue_init(4, &ring->ring, IORING_SETUP_SQE128);
  if (r < 0) {
    ::close(fd);
    c->fd_ = -1;
    return Err(PosixError("io_uring_queue_init (ublk control, SQE128)", -r));
  }
  c->ring_ = std::move(ring);
  return c;
}

UblkControl::~UblkControl() {
  if (ring_ != nullptr) io_uring_queue_exit(&ring_->ring);
  CloseFd(fd_);
}

Result<int> UblkControl::Command(std::uint32_t op, const ublk::CtrlCmd& cmd) {
  internal::MutexLock lock(mu_);
  if (broken_) {
    return Err(Status::IoError(
        "ublk control ring unusable since an earlier command failed"));
  }
  io_uring* ring = &ring_->ring;
  io_uring_sqe* sqe = io_uring_get_sqe(ring);
  if (sqe == nullptr) return Err(Status::Busy("ublk control ring full"));
  std::memset(sqe, 0, 128);
  sqe->opcode = IORING_OP_URING_CMD;
  sqe->fd = fd_;
  sqe->cmd_op = op;
  sqe->user_data = ++seq_;
  std::memcpy(sqe->cmd, &cmd, sizeof cmd);
  // An SQE once in the ring stays there: the kernel would take it with the
  // next submit, after this call's caller had dropped the buffers its
  // command points to (the CtrlDevInfo or Params on its stack). So a
  // refused submit is retried, and the command is waited for to the end;
  // where either cannot be, the ring is not used again.
  int r = 0;
  for (int tries = 0;; ++tries) {
    r = io_uring_submit(ring);
    if (r > 0) break;
    const bool transient = r == 0 || r == -EINTR || RefusedForAWhile(r);
    if (!transient || tries == 1000) {
      broken_ = true;
      return Err(PosixError("io_uring_submit (ublk control)", r ? -r : EAGAIN));
    }
    BackOff();
  }
  // Only this command is in flight: a CQE of another would be one of a
  // command abandoned above, which cannot happen; the check keeps each
  // answer with its command all the same.
  for (;;) {
    io_uring_cqe* cqe = nullptr;
    r = io_uring_wait_cqe(ring, &cqe);
    if (r == -EINTR || r == -EAGAIN) continue;
    if (r < 0) {
      broken_ = true;
      return Err(PosixError("io_uring_wait_cqe (ublk control)", -r));
    }
    const bool mine = cqe->user_data == seq_;
    const int res = cqe->res;
    io_uring_cqe_seen(ring, cqe);
    if (mine) return res;
  }
}

namespace {
ublk::CtrlCmd Header(std::uint32_t dev_id) {
  ublk::CtrlCmd c{};
  c.dev_id = dev_id;
  c.queue_id = 0xffff;  // not a queue's command
  return c;
}
Status CheckRes(Result<int> r, std::string_view what, std::uint32_t dev_id) {
  if (!r.has_value()) return r.error();
  if (*r < 0) {
    return PosixError(std::string(what) + " of " + DevName(dev_id), -*r);
  }
  return Status::Ok();
}
}  // namespace

Result<ublk::CtrlDevInfo> UblkControl::AddDevice(const ublk::CtrlDevInfo& info) {
  ublk::CtrlDevInfo out = info;
  ublk::CtrlCmd c = Header(info.dev_id);  // the driver wants both to match
  c.addr = reinterpret_cast<std::uint64_t>(&out);
  c.len = sizeof out;
  auto r = Command(ublk::kCmdAddDev, c);
  if (r.has_value() && *r == -EEXIST) {
    return Err(Status::Busy(DevName(info.dev_id) + " exists"));
  }
  // Before 6.3 the driver knows no ioctl-encoded command (its switch's
  // default: EOPNOTSUPP).
  if (r.has_value() && *r == -EOPNOTSUPP) {
    return Err(Status::Unsupported(
        "UBLK_U_CMD_ADD_DEV: this kernel's ublk driver is older than ztier "
        "needs (Linux 6.5 or later: ioctl-encoded commands, "
        "UBLK_F_USER_COPY)"));
  }
  ZT_RETURN_IF_ERROR(CheckRes(std::move(r), "UBLK_U_CMD_ADD_DEV", info.dev_id));
  return out;
}

Status UblkControl::SetParams(std::uint32_t dev_id, const ublk::Params& params) {
  ublk::Params p = params;
  p.len = sizeof p;
  ublk::CtrlCmd c = Header(dev_id);
  c.addr = reinterpret_cast<std::uint64_t>(&p);
  c.len = sizeof p;
  return CheckRes(Command(ublk::kCmdSetParams, c), "UBLK_U_CMD_SET_PARAMS",
                  dev_id);
}

Status UblkControl::Start(std::uint32_t dev_id, pid_t server_pid) {
  ublk::CtrlCmd c = Header(dev_id);
  c.data[0] = static_cast<std::uint64_t>(server_pid);
  return CheckRes(Command(ublk::kCmdStartDev, c), "UBLK_U_CMD_START_DEV",
                  dev_id);
}

Status UblkControl::Stop(std::uint32_t dev_id) {
  return CheckRes(Command(ublk::kCmdStopDev, Header(dev_id)),
                  "UBLK_U_CMD_STOP_DEV", dev_id);
}

Status UblkControl::DeleteAsync(std::uint32_t dev_id) {
  auto r = Command(ublk::kCmdDelDevAsync, Header(dev_id));
  // Before 6.9 the driver does not know the asynchronous delete
  // (ublk_check_cmd_op() / the switch's default: EOPNOTSUPP or EINVAL).
  if (r.has_value() && (*r == -EOPNOTSUPP || *r == -EINVAL)) {
    return Status::Unsupported(
        "UBLK_U_CMD_DEL_DEV_ASYNC of " + DevName(dev_id) +
        ": this kernel has no asynchronous delete (Linux 6.9 or later)");
  }
  return CheckRes(std::move(r), "UBLK_U_CMD_DEL_DEV_ASYNC", dev_id);
}

Status UblkControl::Delete(std::uint32_t dev_id) {
  Status s = DeleteAsync(dev_id);
  if (s.code() != StatusCode::kUnsupported) return s;
  return CheckRes(Command(ublk::kCmdDelDev, Header(dev_id)),
                  "UBLK_U_CMD_DEL_DEV", dev_id);
}

Result<ublk::CtrlDevInfo> UblkControl::GetInfo(std::uint32_t dev_id) {
  ublk::CtrlDevInfo info{};
  ublk::CtrlCmd c = Header(dev_id);
  c.addr = reinterpret_cast<std::uint64_t>(&info);
  c.len = sizeof info;
  ZT_RETURN_IF_ERROR(CheckRes(Command(ublk::kCmdGetDevInfo, c),
                              "UBLK_U_CMD_GET_DEV_INFO", dev_id));
  return info;
}

// ---- UblkQueueRing ----

namespace {
// User data of a queue SQE: the tag (a CQE names the tag it answers).
std::uint64_t TagData(std::uint16_t tag) { return tag; }
// The wake read's user data: above every tag's (tags are < 4096).
constexpr std::uint64_t kWakeData = std::uint64_t{1} << 32;
}  // namespace

Result<std::unique_ptr<UblkQueueRing>> UblkQueueRing::Create(
    int char_fd, std::uint16_t q_id, std::uint16_t depth) {
  if (depth == 0 || depth > ublk::kMaxQueueDepth) {
    return Err(Status::InvalidArgument("ublk queue depth " +
                                       std::to_string(depth) +
                                       " out of 1..4096"));
  }
  std::unique_ptr<UblkQueueRing> q(new UblkQueueRing(char_fd, q_id, depth));
  ZT_ASSIGN_OR_RETURN(
      q->descs_,
      Mapping::SharedReadOnly(char_fd, UblkCmdBufOffset(q_id),
                              UblkQueueCmdBufBytes(depth),
                              "mmap ublk queue " + std::to_string(q_id) +
                                  " descriptors"));
  auto ring = std::make_unique<Ring>();
  // Every request arrives as task work on this thread (the driver forces
  // UBLK_F_URING_CMD_COMP_IN_TASK): run it only when we ask for events
  // (DEFER_TASKRUN, 6.1+, which needs SINGLE_ISSUER), else without
  // interrupting us (COOP_TASKRUN, 5.19+), else plainly.
  const unsigned tries[] = {
      IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN |
          IORING_SETUP_COOP_TASKRUN,
      IORING_SETUP_COOP_TASKRUN, 0};
  int r = -EINVAL;
  for (unsigned flags : tries) {
    io_uring_params p{};
    p.flags = flags;
    // A command per tag and the wake read (ArmWake).
    r = io_uring_queue_init_params(depth + 1u, &ring->ring, &p);
    if (r != -EINVAL) break;
  }
  if (r < 0) {
    return Err(PosixError("io_uring_queue_init (ublk queue " +
                              std::to_string(q_id) + ")",
                          -r));
  }
  q->ring_ = std::move(ring);
  return q;
}

UblkQueueRing::~UblkQueueRing() {
  if (ring_ != nullptr) io_uring_queue_exit(&ring_->ring);
}

void UblkQueueRing::QueueCmd(std::uint32_t op, std::uint16_t tag,
                             std::int32_t result) {
  io_uring_sqe* sqe = FreeSqe();
  std::memset(sqe, 0, sizeof *sqe);
  sqe->opcode = IORING_OP_URING_CMD;
  sqe->fd = char_fd_;
  sqe->cmd_op = op;
  ublk::IoCmd cmd{};
  cmd.q_id = q_id_;
  cmd.tag = tag;
  cmd.result = result;
  cmd.addr = 0;  // user copy: the driver refuses an address
  std::memcpy(sqe->cmd, &cmd, sizeof cmd);
  io_uring_sqe_set_data64(sqe, TagData(tag));
}

Status UblkQueueRing::FetchAll() {
  for (std::uint16_t tag = 0; tag < depth_; ++tag) {
    QueueCmd(ublk::kIoFetchReq, tag, 0);
  }
  io_uring* ring = &ring_->ring;
  // A fetch refused for a while, as a commit is (ublk::CommitRetries::
  // RefusedForAWhile): io_uring short of memory for the command, or
  // interrupted.
  const auto fetch_refused_for_a_while = [](int res) {
    return res == -ENOMEM || res == -EAGAIN || res == -EINTR;
  };
  std::uint32_t pause_ms = 1;
  for (int tries = 0;; ++tries) {
    int r = submit_fault_ ? submit_fault_() : 0;
    if (r >= 0) r = io_uring_submit(ring);
    Status refused;
    if (r < 0) {
      refused = PosixError("io_uring_submit (ublk queue " +
                               std::to_string(q_id_) + " fetch)",
                           -r);
      if (!RefusedForAWhile(r) && r != -EINTR) return refused;
    } else {
      // A fetch the driver takes stays pending (-EIOCBQUEUED); one it
      // refuses completes at once: those refused for a while are queued
      // again, and the first refused for good is the answer.
      unsigned head;
      unsigned seen = 0;
      io_uring_cqe* cqe = nullptr;
      Status for_good;
      io_uring_for_each_cqe(ring, head, cqe) {
        ++seen;
        const int res = cqe->res;
        const auto tag = static_cast<std::uint16_t>(cqe->user_data);
        const Status s =
            PosixError("UBLK_U_IO_FETCH_REQ (queue " + std::to_string(q_id_) +
                           " tag " + std::to_string(tag) + ")",
                       res < 0 ? -res : EIO);
        if (fetch_refused_for_a_while(res)) {
          QueueCmd(ublk::kIoFetchReq, tag, 0);
          refused = s;
        } else if (for_good.ok()) {
          for_good = s;
        }
      }
      io_uring_cq_advance(ring, seen);
      if (!for_good.ok()) return for_good;
      if (refused.ok() && io_uring_sq_ready(ring) == 0) return Status::Ok();
    }
    if (tries == kFetchRetries) {
      return Status(refused.ok() ? StatusCode::kBusy : refused.code(),
                    (refused.ok() ? std::string("ublk queue fetch not taken")
                                  : refused.message()) +
                        " (still refused after " +
                        std::to_string(kFetchRetries) + " tries in about 12 s)");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms));
    pause_ms = std::min<std::uint32_t>(pause_ms * 2, 64);
  }
}

void UblkQueueRing::Commit(std::uint16_t tag, std::int32_t result) {
  QueueCmd(ublk::kIoCommitAndFetchReq, tag, result);
}

void UblkQueueRing::ArmWake(int event_fd, std::uint64_t* value) {
  io_uring_sqe* sqe = FreeSqe();
  io_uring_prep_read(sqe, event_fd, value, sizeof *value, 0);
  io_uring_sqe_set_data64(sqe, kWakeData);
}

io_uring_sqe* UblkQueueRing::FreeSqe() {
  io_uring* ring = &ring_->ring;
  io_uring_sqe* sqe;
  // At most one command per tag and one wake read are ever queued, and the
  // ring has that many entries, so the ring is full only after a failed
  // submit: hand the queued ones over until one is free (see Wait on the
  // kernel refusing for a while).
  while ((sqe = io_uring_get_sqe(ring)) == nullptr) {
    if (io_uring_submit(ring) < 0) BackOff();
  }
  return sqe;
}

Result<std::size_t> UblkQueueRing::Wait(std::span<Completion> out,
                                        int timeout_ms) {
  io_uring* ring = &ring_->ring;
  io_uring_cqe* cqe = nullptr;
  int r;
  if (timeout_ms < 0) {
    r = io_uring_submit_and_wait(ring, 1);
  } else {
    __kernel_timespec ts{};
    ts.tv_sec = timeout_ms / 1000;
    ts.tv_nsec = static_cast<long long>(timeout_ms % 1000) * 1000000;
    r = io_uring_submit_and_wait_timeout(ring, &cqe, 1, &ts, nullptr);
  }
  // Refused for a while: giving up would close the ring, and the driver
  // would then fail every request and delete the disk (ublk_drv.c,
  // ublk_uring_cmd_cancel_fn). So wait a little, reap what has completed,
  // and let the caller come again.
  if (RefusedForAWhile(r)) {
    BackOff();
  } else if (r < 0 && r != -ETIME && r != -EINTR) {
    return Err(PosixError("io_uring_enter (ublk queue " +
                              std::to_string(q_id_) + ")",
                          -r));
  }
  std::size_t n = 0;
  unsigned head;
  io_uring_for_each_cqe(ring, head, cqe) {
    if (n == out.size()) break;
    const std::uint64_t data = io_uring_cqe_get_data64(cqe);
    out[n].tag =
        data == kWakeData ? kWakeTag : static_cast<std::uint16_t>(data);
    out[n].res = cqe->res;
    ++n;
  }
  io_uring_cq_advance(ring, static_cast<unsigned>(n));
  return n;
}

#else  // !ZTIER_URING

bool UblkBuilt() { return false; }

namespace {
Status NoUring() {
  return Status::Unsupported(
      "this build has no io_uring (ZTIER_URING=OFF): ublk needs it");
}
}  // namespace

Result<std::unique_ptr<UblkControl>> UblkControl::Open(const std::string&) {
  return Err(NoUring());
}
UblkControl::~UblkControl() { CloseFd(fd_); }
Result<int> UblkControl::Command(std::uint32_t, const ublk::CtrlCmd&) {
  return Err(NoUring());
}
Result<ublk::CtrlDevInfo> UblkControl::AddDevice(const ublk::CtrlDevInfo&) {
  return Err(NoUring());
}
Status UblkControl::SetParams(std::uint32_t, const ublk::Params&) {
  return NoUring();
}
Status UblkControl::Start(std::uint32_t, pid_t) { return NoUring(); }
Status UblkControl::Stop(std::uint32_t) { return NoUring(); }
Status UblkControl::Delete(std::uint32_t) { return NoUring(); }
Status UblkControl::DeleteAsync(std::uint32_t) { return NoUring(); }
Result<ublk::CtrlDevInfo> UblkControl::GetInfo(std::uint32_t) {
  return Err(NoUring());
}
Result<std::unique_ptr<UblkQueueRing>> UblkQueueRing::Create(int,
                                                             std::uint16_t,
                                                             std::uint16_t) {
  return Err(NoUring());
}
UblkQueueRing::~UblkQueueRing() = default;
Status UblkQueueRing::FetchAll() { return NoUring(); }
void UblkQueueRing::Commit(std::uint16_t, std::int32_t) {}
void UblkQueueRing::ArmWake(int, std::uint64_t*) {}
void UblkQueueRing::QueueCmd(std::uint32_t, std::uint16_t, std::int32_t) {}
Result<std::size_t> UblkQueueRing::Wait(std::span<Completion>, int) {
  return Err(NoUring());
}

#endif  // ZTIER_URING

namespace {
// Runs io(done) (a pread or pwrite of the bytes from `done` on) until all
// `len` bytes are moved, retrying on EINTR and after a short count.
template <typename Io>
Status MoveAll(std::size_t len, const char* what, Io io) {
  std::size_t done = 0;
  while (done < len) {
    const ssize_t n = io(done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return PosixError(what, errno);
    if (n == 0) return Status::IoError(std::string(what) + ": short");
    done += static_cast<std::size_t>(n);
  }
  return Status::Ok();
}
}  // namespace

Status UblkQueueRing::ReadRequest(std::uint16_t tag, std::uint32_t offset,
                                  std::span<std::byte> out) const {
  return MoveAll(out.size(), "pread ublk request data", [&](std::size_t done) {
    return ::pread(char_fd_, out.data() + done, out.size() - done,
                   static_cast<off_t>(UblkUserCopyOffset(
                       q_id_, tag, offset + static_cast<std::uint32_t>(done))));
  });
}

Status UblkQueueRing::WriteRequest(std::uint16_t tag, std::uint32_t offset,
                                   std::span<const std::byte> data) const {
  return UblkWriteRequest(char_fd_, q_id_, tag, offset, data);
}

Status UblkWriteRequest(int char_fd, std::uint16_t q_id, std::uint16_t tag,
                        std::uint32_t offset, std::span<const std::byte> data) {
  return MoveAll(
      data.size(), "pwrite ublk request data", [&](std::size_t done) {
        return ::pwrite(
            char_fd, data.data() + done, data.size() - done,
            static_cast<off_t>(UblkUserCopyOffset(
                q_id, tag, offset + static_cast<std::uint32_t>(done))));
      });
}

}  // namespace ztier::platform
