// futex.cc: FutexWait and FutexWake (platform/futex.h) over the futex(2)
// system call, which glibc does not wrap.
#include "platform/futex.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cassert>
#include <cerrno>

namespace ztier::platform {
namespace {

long Futex(std::atomic<std::uint32_t>* word, int op, std::uint32_t val) {
  return ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(word),
                   op | FUTEX_PRIVATE_FLAG, val, nullptr, nullptr, 0);
}

}  // namespace

void FutexWait(std::atomic<std::uint32_t>* word, std::uint32_t expected) {
  const long r = Futex(word, FUTEX_WAIT, expected);
  assert(r == 0 || errno == EAGAIN || errno == EINTR);
  (void)r;
}

int FutexWake(std::atomic<std::uint32_t>* word, int n) {
  const long r = Futex(word, FUTEX_WAKE, static_cast<std::uint32_t>(n));
  assert(r >= 0);
  return static_cast<int>(r);
}

}  // namespace ztier::platform
