// event_fd.h: EventFd, a file descriptor that one thread makes readable to
// wake another out of poll(2) (eventfd(2), non-blocking, close-on-exec).
//
//   ZT_ASSIGN_OR_RETURN(platform::EventFd wake, platform::EventFd::Create());
//   // waiter: poll({wake.fd(), POLLIN}, ...); then wake.Drain();
//   // waker:  wake.Signal();
//
// Signals add up until drained: a Signal() before the waiter polls is not
// lost. A server that stops for good signals once and never drains, so the
// fd stays readable for every thread that polls it.
//
// Errors: Create() returns PosixError("eventfd", errno).
//
// Thread safety: Signal(), Drain() and fd() may be called from any thread;
// moving or destroying the EventFd needs the others done with it.
#ifndef ZTIER_PLATFORM_EVENT_FD_H_
#define ZTIER_PLATFORM_EVENT_FD_H_

#include "platform/unique_fd.h"
#include "ztier/status.h"

namespace ztier::platform {

class EventFd {
 public:
  static Result<EventFd> Create();

  EventFd() = default;  // empty: fd() is -1

  int fd() const { return fd_.get(); }  // -1 for an empty EventFd
  // Makes fd() readable.
  void Signal() const;
  // Makes fd() unreadable again, until the next Signal().
  void Drain() const;

 private:
  explicit EventFd(int fd) : fd_(fd) {}
  UniqueFd fd_;
};

}  // namespace ztier::platform

#endif  // ZTIER_PLATFORM_EVENT_FD_H_
