// uffd.h: one userfaultfd, set up the way a Region uses it (missing and
// write-protect faults on private anonymous memory), and its resolving
// ioctls as Status-returning calls. Internal to src/uffd/.
//
// Opening: syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK), else
// /dev/userfaultfd's USERFAULTFD_IOC_NEW (root without CAP_SYS_PTRACE, or a
// group given the device). Never UFFD_USER_MODE_ONLY: faults taken by the
// kernel in a system call (write(fd, region_page, n)) must reach us too,
// and with that flag such a write fails with EFAULT (seen on the 2-vCPU
// development machine; Documentation/admin-guide/mm/userfaultfd.rst). The
// handshake asks for PAGEFAULT_FLAG_WP (required) and POISON (optional,
// 6.6+).
//
// The fill ioctls (ZeroPage, Copy) work through partial results: the kernel
// may do part of a range and answer -EAGAIN with the bytes done, or -EEXIST
// when the next page is already mapped. Such a page is taken as done (some
// other path mapped it) and woken, since the failed ioctl woke nobody; the
// loop goes on after it. -EAGAIN with nothing done (the mm is changing) is
// retried. `*done` is the bytes from the start handled before an error.
//
// The kernel UAPI headers here are 6.1: newer names are defined locally.
//
// Thread safety: every method may be called from any thread (they are
// ioctls on one fd).
#ifndef ZTIER_UFFD_UFFD_H_
#define ZTIER_UFFD_UFFD_H_

#include <linux/userfaultfd.h>

#include <cstddef>
#include <cstdint>

#include "ztier/status.h"

// 6.6+ (linux/userfaultfd.h of later kernels).
#ifndef UFFD_FEATURE_POISON
#define UFFD_FEATURE_POISON (1 << 14)
#endif
#ifndef _UFFDIO_POISON
#define _UFFDIO_POISON (0x08)
struct uffdio_poison {
  struct uffdio_range range;
#define UFFDIO_POISON_MODE_DONTWAKE ((__u64)1 << 0)
  __u64 mode;
  __s64 updated;  // bytes poisoned, or -errno
};
#define UFFDIO_POISON _IOWR(UFFDIO, _UFFDIO_POISON, struct uffdio_poison)
#endif

namespace ztier::internal {

class Uffd {
 public:
  Uffd() = default;
  ~Uffd();
  Uffd(const Uffd&) = delete;
  Uffd& operator=(const Uffd&) = delete;

  // Creates the fd and does the UFFDIO_API handshake. kUnsupported, saying
  // what is missing, when userfaultfd is unavailable or lacks WP.
  Status Open();
  // Registers [start, start + len) for MISSING | WP faults and checks that
  // the ioctls the region needs are offered there. kUnsupported otherwise.
  Status Register(void* start, std::size_t len);
  Status Unregister(void* start, std::size_t len);
  void Close();

  int fd() const { return fd_; }
  // UFFDIO_POISON is available on the registered range.
  bool can_poison() const { return can_poison_; }

  // Maps the zero page over the range (UFFDIO_ZEROPAGE), waking faulters.
  Status ZeroPage(std::uintptr_t start, std::size_t len, std::size_t* done);
  // Copies len bytes from src into the range (UFFDIO_COPY), writable, or
  // write-protected with `wp`; wakes faulters.
  Status Copy(std::uintptr_t dst, const std::byte* src, std::size_t len,
              bool wp, std::size_t* done);
  // Write-protects the range (`wp`), or removes the protection and wakes
  // writers blocked on it.
  Status WriteProtect(std::uintptr_t start, std::size_t len, bool wp);
  // Wakes threads blocked in faults on the range (UFFDIO_WAKE).
  Status Wake(std::uintptr_t start, std::size_t len);
  // Installs poison markers (UFFDIO_POISON): a touch raises SIGBUS. Wakes.
  Status Poison(std::uintptr_t start, std::size_t len);

 private:
  int fd_ = -1;
  bool can_poison_ = false;
};

}  // namespace ztier::internal

#endif  // ZTIER_UFFD_UFFD_H_
