// event_fd.cc: EventFd (platform/event_fd.h).
#include "platform/event_fd.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <utility>

namespace ztier::platform {

Result<EventFd> EventFd::Create() {
  const int fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (fd < 0) return Err(PosixError("eventfd", errno));
  return EventFd(fd);
}

EventFd::EventFd(EventFd&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)) {}

EventFd& EventFd::operator=(EventFd&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

EventFd::~EventFd() {
  if (fd_ >= 0) ::close(fd_);
}

void EventFd::Signal() const {
  const std::uint64_t one = 1;
  // Fails only when the counter would pass 2^64 - 2 (EAGAIN): it is
  // readable then anyway.
  [[maybe_unused]] const ssize_t w = ::write(fd_, &one, sizeof(one));
}

void EventFd::Drain() const {
  std::uint64_t v;
  // EAGAIN when nothing was signalled: nothing to drain.
  [[maybe_unused]] const ssize_t r = ::read(fd_, &v, sizeof(v));
}

}  // namespace ztier::platform
