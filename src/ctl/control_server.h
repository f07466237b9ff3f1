// control_server.h: the control socket of `ztier serve`, zram's sysfs
// attributes over a Unix socket.
//
// A request names a device (or none, for the zram-control operations
// hot_add / hot_remove / status), an attribute, and optionally a value to
// store; the reply carries the attribute's text exactly as zram's sysfs file
// shows it, or an error as the kernel's errno name plus a message. The wire
// format is documented in docs/control_protocol.md (written with the
// implementation).
//
// Thread safety: Start() returns a running server; its thread serves one
// request at a time per connection, any number of connections. Stop() (or
// the destructor) closes the socket, removes the socket file, and joins.
#ifndef ZTIER_CTL_CONTROL_SERVER_H_
#define ZTIER_CTL_CONTROL_SERVER_H_

#include <memory>
#include <string>
#include <vector>

#include "ztier/device.h"
#include "ztier/status.h"

namespace ztier::ctl {

class ControlServer {
 public:
  // Listens on the Unix socket `path` (created with mode 0600; an existing
  // stale socket file is replaced, any other existing file is an error).
  // `registry` must outlive the server.
  static Result<std::unique_ptr<ControlServer>> Start(const std::string& path,
                                                      DeviceRegistry* registry);
  virtual ~ControlServer() = default;
  virtual void Stop() = 0;
  virtual const std::string& path() const = 0;
};

// One request from a client (what `ztier ctl` sends): device may be empty
// for hot_add, hot_remove and status. Returns the attribute's text, or the
// server's error (its code from the errno name, its message).
Result<std::string> Request(const std::string& socket_path,
                            const std::string& device,
                            const std::string& attribute,
                            const std::string* value);

}  // namespace ztier::ctl

#endif  // ZTIER_CTL_CONTROL_SERVER_H_
