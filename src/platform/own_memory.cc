// own_memory.cc: OwnMemory (platform/own_memory.h).
#include "platform/own_memory.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "ztier/page.h"

namespace ztier::platform {

// An address is a file offset of /proc/self/mem.
static_assert(sizeof(off_t) >= sizeof(std::uintptr_t));

Result<OwnMemory> OwnMemory::Open() {
  const int fd = ::open("/proc/self/mem", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Err(PosixError("open /proc/self/mem", errno));
  return OwnMemory(fd);
}

std::size_t OwnMemory::ReadPages(std::uintptr_t addr, std::size_t pages,
                                 std::byte* out) const {
  if (fd_.get() < 0) return 0;
  // The kernel copies page by page and stops at the first it cannot get
  // (mem_rw() in fs/proc/base.c): a short count, or EIO for the first.
  std::size_t done = 0;  // bytes
  const std::size_t want = pages * kPageSize;
  while (done < want) {
    const ssize_t n = ::pread(fd_.get(), out + done, want - done,
                              static_cast<off_t>(addr + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<std::size_t>(n);
  }
  return done / kPageSize;
}

}  // namespace ztier::platform
