// userfaultfd.h: one userfaultfd, set up the way a Region uses it (missing
// and write-protect faults on private anonymous memory), behind an abstract
// interface: the resolving ioctls as Status-returning calls, and the reading
// of fault messages. OpenUserfaultfd() gives the real one (userfaultfd.cc);
// faulty_userfaultfd.h wraps any implementation to make calls fail.
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
// The fill ioctls (ZeroPage, Copy, Poison) work through partial results: the
// kernel may do part of a range and answer -EAGAIN with the bytes done, or
// -EEXIST when the next page is already mapped. Such a page is taken as done
// (some other path mapped it) and woken, since the failed ioctl woke nobody;
// the loop goes on after it. -EAGAIN with nothing done (the mm is changing)
// is retried. `*done` is the bytes from the start handled before an error.
// Errors are PosixError(what and range, errno): the ioctl's errno.
//
// The kernel UAPI headers here are 6.1: newer names are defined locally.
//
// Thread safety: every method may be called from any thread (they are
// ioctls on one fd). The object must outlive every caller.
#ifndef ZTIER_PLATFORM_USERFAULTFD_H_
#define ZTIER_PLATFORM_USERFAULTFD_H_

#include <linux/userfaultfd.h>

#include <cstddef>
#include <cstdint>
#include <memory>

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

class Userfaultfd {
 public:
  Userfaultfd() = default;
  virtual ~Userfaultfd() = default;  // closes the fd
  Userfaultfd(const Userfaultfd&) = delete;
  Userfaultfd& operator=(const Userfaultfd&) = delete;

  // Registers [start, start + len) for MISSING | WP faults and checks that
  // the ioctls the region needs are offered there. kUnsupported otherwise.
  virtual Status Register(void* start, std::size_t len) = 0;
  virtual Status Unregister(void* start, std::size_t len) = 0;
  // UFFDIO_POISON is available on the registered range.
  virtual bool can_poison() const = 0;

  // Maps the zero page over the range (UFFDIO_ZEROPAGE), waking faulters.
  virtual Status ZeroPage(std::uintptr_t start, std::size_t len,
                          std::size_t* done) = 0;
  // Copies len bytes from src into the range (UFFDIO_COPY), writable, or
  // write-protected with `wp`; wakes faulters.
  virtual Status Copy(std::uintptr_t dst, const std::byte* src,
                      std::size_t len, bool wp, std::size_t* done) = 0;
  // Write-protects the range (`wp`), or removes the protection and wakes
  // writers blocked on it.
  virtual Status WriteProtect(std::uintptr_t start, std::size_t len,
                              bool wp) = 0;
  // Wakes threads blocked in faults on the range (UFFDIO_WAKE).
  virtual Status Wake(std::uintptr_t start, std::size_t len) = 0;
  // Installs poison markers (UFFDIO_POISON): a touch raises SIGBUS. Wakes.
  virtual Status Poison(std::uintptr_t start, std::size_t len) = 0;

  // Reads up to `max` fault messages without blocking. Returns how many it
  // read: 0 when none is pending (or a signal interrupted the read); an
  // error when the fd cannot be read.
  virtual Result<std::size_t> ReadEvents(uffd_msg* msgs, std::size_t max) = 0;
  // The fd to poll(POLLIN) for messages.
  virtual int poll_fd() const = 0;
};

// Creates the real userfaultfd and does the UFFDIO_API handshake.
// kUnsupported, saying what is missing, when userfaultfd is unavailable or
// lacks WP; kResourceExhausted when the process is out of file descriptors
// or memory (EMFILE, ENFILE, ENOMEM).
Result<std::unique_ptr<Userfaultfd>> OpenUserfaultfd();

}  // namespace ztier::internal

#endif  // ZTIER_PLATFORM_USERFAULTFD_H_
