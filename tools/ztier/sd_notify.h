// File: tools/ztier/sd_notify.h
//
// The service manager's readiness protocol, sd_notify(3): a datagram of
// newline-separated VAR=VALUE assignments ("READY=1", "STATUS=...",
// "STOPPING=1", "RELOADING=1") sent to the AF_UNIX socket named by
// $NOTIFY_SOCKET (a path, or an abstract name written with a leading '@').
// Written against the protocol as systemd documents it, with no libsystemd.
//
// Thread safety: Notify() may be called from any thread.
#ifndef ZTIER_TOOLS_ZTIER_SD_NOTIFY_H_
#define ZTIER_TOOLS_ZTIER_SD_NOTIFY_H_

#include <string>
#include <string_view>

#include "ztier/status.h"

namespace ztier::tool {

class ServiceNotifier {
 public:
  // Reads $NOTIFY_SOCKET now; without it (not run by a service manager
  // with Type=notify) every Notify() does nothing.
  ServiceNotifier();

  bool enabled() const { return !socket_.empty(); }

  // Sends `state` as one datagram. OK when there is no NOTIFY_SOCKET; else
  // the send's error (kInvalidArgument for a socket name that cannot be an
  // AF_UNIX address, and sendto's errno as PosixError maps it).
  Status Notify(std::string_view state) const;

 private:
  std::string socket_;
};

}  // namespace ztier::tool

#endif  // ZTIER_TOOLS_ZTIER_SD_NOTIFY_H_
