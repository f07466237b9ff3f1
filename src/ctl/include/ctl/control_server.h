// control_server.h: the control socket of `ztier serve`, zram's sysfs
// attributes over a Unix socket.
//
// A request names a device (or none, for the zram-control operations
// hot_add / hot_remove / status), an attribute, and optionally a value to
// store; the reply carries the attribute's text exactly as zram's sysfs file
// shows it, or an error as the kernel's errno name plus a message. The wire
// format is documented in docs/control_protocol.md (framing in protocol.h,
// the attributes and their errors in attributes.h).
//
// The server runs one accept thread and one thread per connection, up to
// options.max_connections (a connection over the cap takes the place of the
// oldest one waiting for a request, failing that of the oldest waiting for
// its client to take a reply, which is closed; if every one is working on a request, the new one gets
// "ERR EBUSY" and is closed). Each
// connection serves its requests in order; a connection that stalls holds
// only its own thread. An idle connection is dropped after
// options.idle_timeout_ms; a request must be whole within
// options.idle_timeout_ms of its first byte (or, for one whose first bytes
// came while the request before it was worked on, of that one's reply),
// else it gets "ERR ETIMEDOUT" and the connection is closed. A malformed
// or oversized request gets an error reply (EINVAL / E2BIG), as does one
// the client's end of the connection cuts short (EINVAL), and the
// connection is closed. Out of
// memory for a request or its reply: "ERR ENOMEM" and the connection is
// closed; the server goes on.
//
// The socket file is created with mode 0600 without a window in which it is
// reachable with a wider mode (platform/socket.h Listener::Unix: bound in a
// fresh mode-0700 directory beside `path`, then hard-linked into place,
// which fails rather than replace a file that appeared meanwhile).
//
// Thread safety: Start() returns a running server; its thread serves one
// request at a time per connection, any number of connections. Stop() (or
// the destructor) closes the socket, removes the socket file (if it is still
// this server's), and joins every thread. Stop() may be called more than
// once, from one thread at a time.
#ifndef ZTIER_CTL_CONTROL_SERVER_H_
#define ZTIER_CTL_CONTROL_SERVER_H_

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ctl/protocol.h"
#include "ztier/device.h"
#include "ztier/status.h"

namespace ztier::ctl {

struct ControlServerOptions {
  std::size_t max_connections = 64;
  std::size_t max_request_bytes = kMaxRequestBytes;
  int idle_timeout_ms = 30'000;  // idle wait, and a request's whole arrival
};

class ControlServer {
 public:
  // Listens on the Unix socket `path` (created with mode 0600; an existing
  // stale socket file, one nobody listens on, is replaced). Errors: kBusy if
  // a server answers on `path`; kInvalidArgument if a file that is not a
  // socket is there (it is left alone), or for an empty or too long path
  // (sun_path holds 107 bytes); others from the socket calls. `registry` must outlive the server.
  static Result<std::unique_ptr<ControlServer>> Start(const std::string& path,
                                                      DeviceRegistry* registry);
  static Result<std::unique_ptr<ControlServer>> Start(
      const std::string& path, DeviceRegistry* registry,
      const ControlServerOptions& options);
  virtual ~ControlServer() = default;
  virtual void Stop() = 0;
  virtual const std::string& path() const = 0;
  // Connections being served now.
  virtual std::size_t connections() const = 0;
};

// ---- client side ----

// Connects to the control socket; returns the fd (the caller owns it).
// Errors name the path: kNotFound when no file is there, kInvalidArgument
// ("PATH is a regular file, not a socket") when what is there is no socket,
// kIoError when nobody listens (ECONNREFUSED), an ETIMEDOUT error ("the
// server accepts no connection") when a server that accepts nothing
// (stopped, wedged) leaves no room in its backlog for `timeout_ms`, others
// via PosixError.
Result<int> Connect(const std::string& socket_path, int timeout_ms = 120'000);

// Sends one request on a connected fd and reads its reply. The Result is an
// error only when the exchange itself failed (closed early, garbled reply,
// or, for a show, 120 s without a byte of the reply; a failed recv() keeps
// its errno, ErrnoNameOf); a server-side error is a WireReply with
// ok == false. A store waits for its reply however long
// the work takes (a writeback of many gigabytes, a recompression), as a
// write to a kernel sysfs attribute does.
Result<WireReply> Exchange(int fd, const WireRequest& request);

// Connect + Exchange + close.
Result<WireReply> Call(const std::string& socket_path,
                       const WireRequest& request);

// The StatusCode an errno name of a reply stands for: StatusCodeForErrno's
// for the errno it names (the inverse of StatusCodeErrnoName; ENOENT and
// ENODEV are kNotFound, E2BIG is kInvalidArgument, EACCES and EPERM are
// kPermissionDenied, EMFILE kResourceExhausted; an unknown name kIoError).
StatusCode StatusCodeFromErrnoName(std::string_view errno_name);

// One request from a client (what `ztier ctl` sends): device may be empty
// for hot_add, hot_remove and status; `value` null for a show. Returns the
// attribute's text, or the server's error: its code from the errno name
// (StatusCodeFromErrnoName), its message "<ERRNO_NAME>: <server message>",
// its posix_errno() the named errno (ErrnoNameOf gives the reply's ENOSPC,
// not kResourceExhausted's ENOMEM; 0 for a name of no errno, which
// ErrnoNameOf then gives as its code's, EIO).
// Transport errors come back as Connect/Exchange give them.
Result<std::string> Request(const std::string& socket_path,
                            const std::string& device,
                            const std::string& attribute,
                            const std::string* value);

}  // namespace ztier::ctl

#endif  // ZTIER_CTL_CONTROL_SERVER_H_
