// userfaultfd.cc: the kernel's userfaultfd behind Userfaultfd (contract in
// userfaultfd.h), and OpenUserfaultfd.
#include "platform/userfaultfd.h"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "ztier/page.h"

namespace ztier::internal {
namespace {

// An -EAGAIN with nothing done means the address space is changing under
// us (mmap_changing); it passes quickly, so a few retries suffice.
constexpr int kMaxRetries = 1000;

std::string Hex(std::uintptr_t v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "0x%jx", static_cast<std::uintmax_t>(v));
  return buf;
}

std::string Where(const char* what, std::uintptr_t start, std::size_t len) {
  return std::string(what) + " " + Hex(start) + "+" + std::to_string(len);
}

class KernelUserfaultfd final : public Userfaultfd {
 public:
  explicit KernelUserfaultfd(int fd) : fd_(fd) {}
  ~KernelUserfaultfd() override { ::close(fd_); }

  Status Register(void* start, std::size_t len) override;
  Status Unregister(void* start, std::size_t len) override;
  bool can_poison() const override { return can_poison_; }
  Status ZeroPage(std::uintptr_t start, std::size_t len,
                  std::size_t* done) override;
  Status Copy(std::uintptr_t dst, const std::byte* src, std::size_t len,
              bool wp, std::size_t* done) override;
  Status WriteProtect(std::uintptr_t start, std::size_t len, bool wp) override;
  Status Wake(std::uintptr_t start, std::size_t len) override;
  Status Poison(std::uintptr_t start, std::size_t len) override;
  Result<std::size_t> ReadEvents(uffd_msg* msgs, std::size_t max) override;
  int poll_fd() const override { return fd_; }

 private:
  const int fd_;
  bool can_poison_ = false;
};

// One fill ioctl over [start + *done, start + len): issue(offset, &result)
// runs the ioctl for the rest of the range and returns its return value,
// setting result to the kernel's result field (bytes done, or -errno).
template <typename Issue>
Status FillLoop(Userfaultfd& u, const char* what, std::uintptr_t start,
                std::size_t len, std::size_t* done, Issue issue) {
  // *done follows the progress as it is made, before any message (a wake's
  // or the error's) is: making one may throw (std::bad_alloc), and the
  // caller must still know what was done.
  std::size_t off = 0;
  const auto advance = [&](std::size_t to) {
    off = to;
    if (done != nullptr) *done = off;
  };
  advance(0);
  int retries = 0;
  while (off < len) {
    std::int64_t result = 0;
    if (issue(off, &result) == 0) {
      advance(len);
      break;
    }
    const int err = errno;
    if (result > 0) {  // partial: the kernel woke what it did
      advance(off + static_cast<std::size_t>(result));
      continue;
    }
    if (err == EEXIST) {  // already mapped: done, but nobody was woken
      advance(off + kPageSize);
      Status w = u.Wake(start + off - kPageSize, kPageSize);
      w.IgnoreError();  // nothing waits there, or it re-faults
      continue;
    }
    if (err == EAGAIN && ++retries < kMaxRetries) continue;
    return PosixError(Where(what, start + off, len - off), err);
  }
  return Status::Ok();
}

Status KernelUserfaultfd::Register(void* start, std::size_t len) {
  uffdio_register reg{};
  reg.range.start = reinterpret_cast<std::uintptr_t>(start);
  reg.range.len = len;
  reg.mode = UFFDIO_REGISTER_MODE_MISSING | UFFDIO_REGISTER_MODE_WP;
  if (::ioctl(fd_, UFFDIO_REGISTER, &reg) != 0) {
    const int err = errno;
    Status st = PosixError(
        Where("UFFDIO_REGISTER (MISSING|WP)", reg.range.start, len), err);
    if (err == EINVAL) return Status::Unsupported(st.message());
    return st;
  }
  const std::uint64_t need = (std::uint64_t{1} << _UFFDIO_WAKE) |
                             (std::uint64_t{1} << _UFFDIO_COPY) |
                             (std::uint64_t{1} << _UFFDIO_ZEROPAGE) |
                             (std::uint64_t{1} << _UFFDIO_WRITEPROTECT);
  if ((reg.ioctls & need) != need) {
    Status u = Unregister(start, len);
    u.IgnoreError();
    return Status::Unsupported(
        "userfaultfd: registered range lacks WAKE/COPY/ZEROPAGE/WRITEPROTECT "
        "(ioctls " +
        Hex(reg.ioctls) + ")");
  }
  can_poison_ = (reg.ioctls & (std::uint64_t{1} << _UFFDIO_POISON)) != 0;
  return Status::Ok();
}

Status KernelUserfaultfd::Unregister(void* start, std::size_t len) {
  uffdio_range r{};
  r.start = reinterpret_cast<std::uintptr_t>(start);
  r.len = len;
  if (::ioctl(fd_, UFFDIO_UNREGISTER, &r) != 0) {
    return PosixError(Where("UFFDIO_UNREGISTER", r.start, len), errno);
  }
  return Status::Ok();
}

Status KernelUserfaultfd::ZeroPage(std::uintptr_t start, std::size_t len,
                                   std::size_t* done) {
  return FillLoop(*this, "UFFDIO_ZEROPAGE", start, len, done,
                  [&](std::size_t off, std::int64_t* result) {
                    uffdio_zeropage z{};
                    z.range.start = start + off;
                    z.range.len = len - off;
                    const int rc = ::ioctl(fd_, UFFDIO_ZEROPAGE, &z);
                    *result = z.zeropage;
                    return rc;
                  });
}

Status KernelUserfaultfd::Copy(std::uintptr_t dst, const std::byte* src,
                               std::size_t len, bool wp, std::size_t* done) {
  return FillLoop(*this, wp ? "UFFDIO_COPY (WP)" : "UFFDIO_COPY", dst, len,
                  done, [&](std::size_t off, std::int64_t* result) {
                    uffdio_copy c{};
                    c.dst = dst + off;
                    c.src = reinterpret_cast<std::uintptr_t>(src + off);
                    c.len = len - off;
                    c.mode = wp ? UFFDIO_COPY_MODE_WP : 0;
                    const int rc = ::ioctl(fd_, UFFDIO_COPY, &c);
                    *result = c.copy;
                    return rc;
                  });
}

Status KernelUserfaultfd::WriteProtect(std::uintptr_t start, std::size_t len,
                                       bool wp) {
  uffdio_writeprotect w{};
  w.range.start = start;
  w.range.len = len;
  w.mode = wp ? UFFDIO_WRITEPROTECT_MODE_WP : 0;
  for (int retries = 0;; ++retries) {
    if (::ioctl(fd_, UFFDIO_WRITEPROTECT, &w) == 0) return Status::Ok();
    if (errno != EAGAIN || retries >= kMaxRetries) break;
  }
  return PosixError(Where(wp ? "UFFDIO_WRITEPROTECT"
                             : "UFFDIO_WRITEPROTECT "
                               "(un-protect)",
                          start, len),
                    errno);
}

Status KernelUserfaultfd::Wake(std::uintptr_t start, std::size_t len) {
  uffdio_range r{};
  r.start = start;
  r.len = len;
  if (::ioctl(fd_, UFFDIO_WAKE, &r) != 0) {
    return PosixError(Where("UFFDIO_WAKE", start, len), errno);
  }
  return Status::Ok();
}

Status KernelUserfaultfd::Poison(std::uintptr_t start, std::size_t len) {
  std::size_t done = 0;
  return FillLoop(*this, "UFFDIO_POISON", start, len, &done,
                  [&](std::size_t off, std::int64_t* result) {
                    uffdio_poison p{};
                    p.range.start = start + off;
                    p.range.len = len - off;
                    const int rc = ::ioctl(fd_, UFFDIO_POISON, &p);
                    *result = p.updated;
                    return rc;
                  });
}

Result<std::size_t> KernelUserfaultfd::ReadEvents(uffd_msg* msgs,
                                                  std::size_t max) {
  const ssize_t n = ::read(fd_, msgs, max * sizeof(uffd_msg));
  if (n >= 0) return static_cast<std::size_t>(n) / sizeof(uffd_msg);
  if (errno == EAGAIN || errno == EINTR) return std::size_t{0};
  return Err(PosixError("read userfaultfd", errno));
}

}  // namespace

Result<std::unique_ptr<Userfaultfd>> OpenUserfaultfd() {
  int fd = static_cast<int>(::syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK));
  if (fd < 0) {
    const int sys_err = errno;
    int dev_err = 0;
    const int dev = ::open("/dev/userfaultfd", O_RDWR | O_CLOEXEC);
    if (dev < 0) {
      dev_err = errno;
    } else {
      fd = ::ioctl(dev, USERFAULTFD_IOC_NEW, O_CLOEXEC | O_NONBLOCK);
      if (fd < 0) dev_err = errno;
      ::close(dev);
    }
    if (fd < 0) {
      std::string why =
          std::string("userfaultfd unavailable: syscall: ") +
          std::strerror(sys_err) +
          (sys_err == EPERM ? " (needs root or vm.unprivileged_userfaultfd=1)"
                            : "") +
          "; /dev/userfaultfd: " + std::strerror(dev_err);
      // Out of descriptors or memory is not "unsupported": the caller may
      // try again once some are free.
      const auto short_of = [](int e) {
        return e == EMFILE || e == ENFILE || e == ENOMEM;
      };
      if (short_of(sys_err) || short_of(dev_err)) {
        return Err(Status::ResourceExhausted(std::move(why)));
      }
      return Err(Status::Unsupported(std::move(why)));
    }
  }
  auto uffd = std::make_unique<KernelUserfaultfd>(fd);
  // A refused handshake leaves the fd uninitialised, so it can be retried
  // without POISON (kernels before 6.6).
  uffdio_api api{};
  api.api = UFFD_API;
  api.features = UFFD_FEATURE_PAGEFAULT_FLAG_WP | UFFD_FEATURE_POISON;
  if (::ioctl(fd, UFFDIO_API, &api) != 0) {
    api = {};
    api.api = UFFD_API;
    api.features = UFFD_FEATURE_PAGEFAULT_FLAG_WP;
    if (::ioctl(fd, UFFDIO_API, &api) != 0) {
      const int err = errno;
      return Err(Status::Unsupported(
          std::string("userfaultfd: UFFDIO_API with "
                      "UFFD_FEATURE_PAGEFAULT_FLAG_WP refused (needs Linux "
                      "5.7+ with write-protect on anonymous memory): ") +
          std::strerror(err)));
    }
  }
  if (!(api.features & UFFD_FEATURE_PAGEFAULT_FLAG_WP)) {
    return Err(Status::Unsupported(
        "userfaultfd: UFFD_FEATURE_PAGEFAULT_FLAG_WP not granted"));
  }
  return std::unique_ptr<Userfaultfd>(std::move(uffd));
}

}  // namespace ztier::internal
