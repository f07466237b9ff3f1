// metrics_server.h: a tiny HTTP/1.1 server for Prometheus to scrape
// (`ztier serve --metrics-listen ADDR:PORT` / `--metrics-unix PATH`).
//
// What it serves: `GET /metrics` (and HEAD) answers 200 with RenderMetrics()
// (metrics.h) of the registry and, when given, the NBD server, as
// `Content-Type: text/plain; version=0.0.4; charset=utf-8`, rendered afresh
// for each request. A query string is ignored. Any other path is 404; any
// other method 405 (with `Allow: GET, HEAD`); a malformed request (bad
// request line, version other than HTTP/1.0 or 1.1, a header line without a
// colon, HTTP/1.1 without Host) is 400; a request whose headers exceed
// max_request_bytes is 431. Each connection carries one request: every reply
// says `Connection: close`, and the server closes after sending it. A
// request body is never read (nothing here takes one).
//
// Threads: one thread polls the listening sockets and up to max_clients
// connections, all non-blocking, so a slow client delays no other. A
// connection that has not sent its whole request within read_timeout_ms, or
// not taken its reply within write_timeout_ms, is closed. Memory per
// connection is bounded by max_request_bytes plus one rendered reply. Over
// max_clients, a new connection takes the place of the oldest one that has
// not sent its whole request yet (closed with no reply), so idle or
// trickling connections cannot keep a scraper out; failing that, of the
// oldest that has had its whole reply but not closed (its pending input read
// first, so the close resets nothing); failing that, of the oldest whose
// client has stopped taking its reply (its socket took none of it for 1 s,
// nor when offered once more; the reply is cut short); when every reply is
// flowing, new ones wait in the listen backlog. Rendering runs on that thread;
// it waits for a device whose store a reset is dropping (metrics.h).
//
// Errors (from Start): neither listen nor unix_path set, or a bad listen
// address: kInvalidArgument; a Unix socket path where another server
// answers, or a TCP address in use (EADDRINUSE): kBusy; a file there that is
// not a socket: kInvalidArgument; other socket failures: kIoError. Each
// message names the address. After Start, nothing the clients do stops the
// server: a bad request gets its error reply (or the connection is closed)
// and the next client is served.
//
// Thread safety: Start() returns a running server. Stop() (or the
// destructor) closes every socket, joins the thread and removes the Unix
// socket file if it is still this server's; it may be called more than once,
// from one thread at a time. tcp_port() and unix_path() may be called from
// any thread.
#ifndef ZTIER_CTL_METRICS_SERVER_H_
#define ZTIER_CTL_METRICS_SERVER_H_

#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include "platform/socket.h"
#include "ztier/device.h"
#include "ztier/status.h"

namespace ztier::nbd {
class NbdServer;
}

namespace ztier::ctl {

struct MetricsServerOptions {
  // "HOST:PORT", "[V6HOST]:PORT" or ":PORT" (127.0.0.1); port 0 picks a
  // free one (see tcp_port()); served on every address HOST resolves to,
  // on one port (platform::Listener::TcpAll). Empty: no TCP.
  std::string listen;
  // listen's addresses as platform::ResolveTcpAddress(listen) gave them
  // (a caller that looked the host up to check it): bound as they are, with
  // no second lookup. None: listen is looked up at Start.
  std::optional<platform::ResolvedTcpAddress> listen_addresses;
  // A Unix socket, created with mode 0600 (platform/socket.h Listener::Unix).
  // Empty: none. At least one of listen and unix_path must be set.
  std::string unix_path;
  std::size_t max_request_bytes = 8192;  // request line and headers
  int read_timeout_ms = 5000;            // for the whole request, from accept
  int write_timeout_ms = 10000;          // for the whole reply
  std::size_t max_clients = 16;          // connections served at once
};

class MetricsServer {
 public:
  // Binds and starts serving. `registry` must outlive the server; so must
  // `nbd` unless it is null (no NBD metrics then).
  static Result<std::unique_ptr<MetricsServer>> Start(
      const MetricsServerOptions& options, const DeviceRegistry* registry,
      const nbd::NbdServer* nbd);
  virtual ~MetricsServer() = default;
  virtual void Stop() = 0;
  // The TCP port bound (useful with port 0), or 0 without TCP.
  virtual int tcp_port() const = 0;
  virtual const std::string& unix_path() const = 0;
  // Requests answered so far (any status), for tests and logs.
  virtual std::size_t requests_served() const = 0;
};

}  // namespace ztier::ctl

#endif  // ZTIER_CTL_METRICS_SERVER_H_
