// nbd_server.h: the NBD server that exports a DeviceRegistry's devices.
//
// Each device is an export, selected by its name. The server listens on a
// Unix socket and/or TCP, speaks the fixed newstyle handshake and the
// transmission phase of the NBD protocol (docs/nbd_subset.md lists exactly
// what), and serves many connections at once, with each connection's
// requests served concurrently (replies may come out of order).
//
// Threads: one accept thread, one reader thread per connection, and a pool
// of `workers` request threads shared by all connections (connection.h).
// Over max_connections, a new connection is refused politely: a refusal
// thread greets it and answers its options with NBD_REP_ERR_POLICY and a
// message saying why (at most kMaxRefusing such connections wait for it,
// each for at most a second; beyond that they are closed at once).
//
// Thread safety: Start() returns a running server. Stop() (or the destructor)
// stops accepting and removes the Unix socket file, then stops its
// connections as proto.md asks of a server being shut down (connection.h,
// "Stopping"): a client in the handshake gets NBD_REP_ERR_SHUTDOWN for its
// options, one in transmission gets the replies to its requests in flight
// (ESHUTDOWN to those not begun) and is then disconnected. A connection
// still open after kStopGrace (a client that takes no replies, or says
// nothing) is closed at once; Stop() returns once every connection is.
#ifndef ZTIER_NBD_NBD_SERVER_H_
#define ZTIER_NBD_NBD_SERVER_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "nbd/nbd_counters.h"
#include "platform/socket.h"
#include "ztier/device.h"
#include "ztier/status.h"

namespace ztier::nbd {

class TlsContext;  // tls.h

struct NbdServerOptions {
  std::string unix_path;  // empty: no Unix socket. Created with mode 0600.
  // "HOST:PORT", ":PORT" (loopback), or empty; served on every address
  // HOST resolves to, on one port (platform::Listener::TcpAll).
  std::string listen;
  // listen's addresses as platform::ResolveTcpAddress(listen) gave them
  // (a caller that looked the host up to check it): bound as they are, with
  // no second lookup. None: listen is looked up at Start.
  std::optional<platform::ResolvedTcpAddress> listen_addresses;
  std::size_t max_connections = 64;
  std::uint32_t max_request_bytes = 32 << 20;  // NBD_INFO_BLOCK_SIZE maximum
  std::size_t workers = 0;  // request worker threads; 0: number of cores
  // READ/WRITE requests up to this size run on the connection's reader
  // thread (cheaper than a hand-off); larger ones go to the workers, and so
  // does a READ (or a WRITE of part of a page) of a written-back page, which
  // may wait for the backing store (Device::ReadMayWait). 0: every
  // READ/WRITE/TRIM/WRITE_ZEROES goes to the workers. At most 64 KiB.
  std::uint32_t inline_max_bytes = 16 << 10;
  // Requests of one connection queued or running on workers at once, and
  // the bytes of their buffers (one larger request may run alone).
  std::size_t max_in_flight = 64;
  std::uint64_t max_in_flight_bytes = 64 << 20;
  // The whole handshake of a connection (ms; -1: none).
  int handshake_timeout_ms = 10000;
  // A request that stops arriving halfway, or a reply the client does not
  // take, for this long closes the connection (ms; -1: none). Idle clients
  // are never timed out.
  int io_timeout_ms = 30000;
  // TLS: credentials for NBD_OPT_STARTTLS (null: TLS off), and whether
  // clients must use it. Not owned; must outlive the server.
  const TlsContext* tls = nullptr;
  bool tls_required = false;
  // Preallocate each connection's request buffers (64 KiB per job) and
  // start its writer thread at once, so that serving allocates nothing
  // (for a swap device; see ConnectionLimits::prealloc_job_bytes).
  bool preallocate = false;
  // Log lines (null: none): each connection's opening (with the peer's
  // address) and everything connection.h lists, one line a call, from any
  // of the server's threads. A warning (a refused or dropped connection,
  // and connection.h's) starts with "warning: ".
  std::function<void(const std::string&)> log;
};

inline constexpr std::size_t kMaxRefusing = 16;

// How long Stop() lets its connections finish before it closes them.
inline constexpr std::chrono::milliseconds kStopGrace{1000};

class NbdServer {
 public:
  // Binds the sockets and starts serving. `registry` must outlive the
  // server. Errors: a socket path in use by a live server is kBusy; a bad
  // listen address or an existing non-socket file is kInvalidArgument.
  static Result<std::unique_ptr<NbdServer>> Start(
      const NbdServerOptions& options, DeviceRegistry* registry);
  virtual ~NbdServer() = default;
  virtual void Stop() = 0;
  // The TCP port actually bound (useful with port 0), or 0.
  virtual int tcp_port() const = 0;
  virtual std::size_t connections() const = 0;
  // What the server has counted since Start() (nbd_counters.h); lives as
  // long as the server, and may be read from any thread at any time.
  virtual const NbdServerCounters& counters() const = 0;
};

}  // namespace ztier::nbd

#endif  // ZTIER_NBD_NBD_SERVER_H_
