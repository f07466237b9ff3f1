// event_fd.cc: EventFd (platform/event_fd.h).
#include "platform/event_fd.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

namespace ztier::platform {

Result<EventFd> EventFd::Create() {
  const int fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (fd < 0) return Err(PosixError("eventfd", errno));
  return EventFd(fd);
}

void EventFd::Signal() const {
  const std::uint64_t one = 1;
  // Fails only when the counter would pass 2^64 - 2 (EAGAIN): it is
  // readable then anyway.
  [[maybe_unused]] const ssize_t w = ::write(fd_.get(), &one, sizeof(one));
}

void EventFd::Drain() const {
  std::uint64_t v;
  // EAGAIN when nothing was signalled: nothing to drain.
  [[maybe_unused]] const ssize_t r = ::read(fd_.get(), &v, sizeof(v));
}

}  // namespace ztier::platform
