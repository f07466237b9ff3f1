// socket.h: the stream sockets ztier serves and calls on (Unix and TCP), and
// the Unix datagram it sends to systemd, behind calls that return Status.
//
//   ZT_ASSIGN_OR_RETURN(platform::Listener l,
//                       platform::Listener::Unix("/run/ztier/ztier.sock"));
//   // poll(l.fd(), POLLIN) ...
//   ZT_ASSIGN_OR_RETURN(const int conn, l.Accept(/*nonblocking=*/false));
//
// A Listener's socket is close-on-exec and non-blocking (poll it, then
// Accept; a client that left in between is kBusy, not a hang). A Unix
// listener's file is created with mode 0600: bound in a fresh 0700
// directory beside the path, then linked into place (renamed where the
// filesystem has no hard links), so it is never reachable with wider
// permissions; where that directory cannot be made, it is bound in place
// and narrowed at once. It listens before it appears at the path (bound
// in place, it appears as it is bound and listens a moment later), and
// never replaces what appeared there meanwhile (kBusy). At the path:
//   - nothing, or a stale socket (nobody accepts on it): it is (re)created;
//   - a socket a live server accepts on: kBusy, and that server keeps it;
//   - anything else (a file, a directory, a symbolic link):
//     kInvalidArgument ("PATH is a directory, not a socket", as ConnectUnix
//     says it), left alone. It is the caller's path that is wrong, and
//     retrying cannot help.
// Closing or destroying the Listener removes the file, only if it is still
// the socket this Listener bound (same device and inode): a newer server
// that replaced it keeps its own.
//
// Every send uses MSG_NOSIGNAL: a peer that went away is an error value,
// never SIGPIPE. errno becomes a Status only through PosixError; a call
// that would block is kBusy (EAGAIN).
//
// Thread safety: a Listener is a value owned by one thread at a time (its
// fd() may be polled from another while neither closes it). The functions
// are plain calls over file descriptors the caller owns.
#ifndef ZTIER_PLATFORM_SOCKET_H_
#define ZTIER_PLATFORM_SOCKET_H_

#include <sys/socket.h>
#include <sys/types.h>

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "ztier/status.h"

namespace ztier::platform {

// A TCP listen address's host and port: "HOST:PORT", "[V6HOST]:PORT"
// (brackets removed) or ":PORT" (host 127.0.0.1), PORT 0..65535. Only the
// form is checked, nothing is resolved: kInvalidArgument naming `spec`
// when it is none of these.
struct TcpAddress {
  std::string host;
  std::string port;
};
Result<TcpAddress> ParseTcpAddress(const std::string& spec);

// A TCP listen address with its host looked up: what Listener::TcpAll
// binds.
struct ResolvedTcpAddress {
  struct Endpoint {
    int family = 0;
    int socktype = 0;
    int protocol = 0;
    sockaddr_storage addr{};
    socklen_t len = 0;
  };
  std::string spec;                 // as given, for messages
  std::vector<Endpoint> endpoints;  // in getaddrinfo's order
};

// Looks `spec`'s host up (getaddrinfo, AI_PASSIVE), binding nothing, so
// that a name that does not resolve is found before the work that precedes
// the bind, and the bind (Listener::TcpAll) needs no second lookup, which with
// nameservers that do not answer waits out their timeouts again: its form
// as ParseTcpAddress, a HOST that does not resolve kInvalidArgument
// ("cannot resolve 'HOST': ..."), a resolver that cannot answer now
// (EAI_AGAIN: no network yet) kIoError.
Result<ResolvedTcpAddress> ResolveTcpAddress(const std::string& spec);

class Listener {
 public:
  // A Unix stream socket listening at `path`; see the file comment.
  static Result<Listener> Unix(const std::string& path);
  // A TCP socket (SO_REUSEADDR) listening on each of `address`'s
  // endpoints, in their order, all on one port (PORT 0: one free on every
  // endpoint, the first bind's pick, picked again while it is in use on
  // another), as nbd-server and nbdkit listen on every address a name
  // resolves to: "localhost" is ::1 and 127.0.0.1 where /etc/hosts says
  // both, and a client of either family connects. With more than one
  // endpoint an IPv6 socket is IPV6_V6ONLY, so that "::" leaves 0.0.0.0 to
  // its own socket (ipv6(7)). An endpoint this host cannot have is
  // skipped: a family the kernel lacks (EAFNOSUPPORT), an address it does
  // not have (EADDRNOTAVAIL: ::1 with IPv6 off), a repeated one. Any other
  // failure (a port in use on one of them: kBusy) fails the whole, as does an
  // address none of whose endpoints binds (the last error; none at all:
  // kInvalidArgument).
  static Result<std::vector<Listener>> TcpAll(
      const ResolvedTcpAddress& address);
  // The same on "HOST:PORT", "[V6HOST]:PORT" or ":PORT" (127.0.0.1)
  // looked up first (ResolveTcpAddress's errors: a HOST that does not
  // resolve kInvalidArgument, a resolver that cannot answer now kIoError).
  static Result<std::vector<Listener>> TcpAll(const std::string& spec);

  Listener() = default;
  Listener(Listener&& other) noexcept;
  Listener& operator=(Listener&& other) noexcept;
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;
  ~Listener() { Close(); }

  int fd() const { return fd_; }  // -1 once closed
  bool tcp() const { return tcp_; }
  int port() const { return port_; }  // the bound TCP port; 0 for Unix
  const std::string& path() const { return path_; }  // Unix only

  // One waiting connection: a close-on-exec socket, non-blocking if asked.
  // kBusy when none is waiting; kResourceExhausted when out of file
  // descriptors or memory (EMFILE, ENFILE, ENOBUFS, ENOMEM).
  Result<int> Accept(bool nonblocking) const;

  // Closes the socket and removes the Unix socket file if it is still ours.
  void Close();

 private:
  int fd_ = -1;
  bool tcp_ = false;
  int port_ = 0;
  std::string path_;
  dev_t dev_ = 0;
  ino_t ino_ = 0;
};

// A blocking, close-on-exec stream socket connected to the Unix socket at
// `path`. kNotFound when nothing is there; kInvalidArgument ("PATH is a
// regular file, not a socket") when what is there is no socket; kIoError
// (ECONNREFUSED, "connect PATH: no server listens on it (a stale socket)")
// when a socket is there and nobody accepts. A listener that
// accepts nothing (stopped, or wedged) with its backlog full is waited for, at
// most `timeout_ms` when that is positive, counted from the call through any
// signal that interrupts the wait (then the ETIMEDOUT error "the server
// accepts no connection"), else for as long as it takes.
Result<int> ConnectUnix(const std::string& path, int timeout_ms = -1);

// Sends `data` as one datagram to the Unix datagram socket `name`: a path,
// or "@name" in the abstract namespace (as systemd's NOTIFY_SOCKET gives).
Status SendUnixDatagram(const std::string& name, std::string_view data);

// recv(2) of up to `n` bytes, retried on EINTR: the count, 0 when the peer
// has closed, kBusy when a non-blocking socket has nothing yet.
Result<std::size_t> Receive(int fd, void* buf, std::size_t n);
// send(2) of up to `n` bytes with MSG_NOSIGNAL (and MSG_DONTWAIT if asked),
// retried on EINTR: the count sent, kBusy when it would block.
Result<std::size_t> Send(int fd, const void* buf, std::size_t n,
                         bool dontwait);

// Sets TCP_NODELAY (no-op on a non-TCP socket).
void SetNoDelay(int fd);

// Makes close(2) of the socket abortive (SO_LINGER with a zero timeout):
// what is not yet sent is dropped and the peer gets a reset. For a
// connection given up with commands maybe still in the socket: closed the
// usual way, the kernel would go on sending them, after a link cut even
// minutes later once the link returns.
void SetResetOnClose(int fd);

// TCP keepalive (no-op on a non-TCP socket): after kKeepAliveIdleSeconds
// without a byte from the peer, a probe every kKeepAliveIntervalSeconds;
// kKeepAliveProbes unanswered ones end the connection (about 20 minutes in
// all). A peer whose host died or was cut off then frees its connection,
// and the device its client held, where nothing else would notice: an
// idle NBD client sends nothing. Long enough that a network that comes
// back within minutes does not cut off a client (a kernel swapping, say).
inline constexpr int kKeepAliveIdleSeconds = 600;
inline constexpr int kKeepAliveIntervalSeconds = 60;
inline constexpr int kKeepAliveProbes = 10;
void SetKeepAlive(int fd);

// The peer of a connected socket, for logs: "tcp 127.0.0.1:40112",
// "tcp [::1]:40112", or "unix" (Unix peers have no name).
std::string PeerName(int fd, bool tcp);

}  // namespace ztier::platform

#endif  // ZTIER_PLATFORM_SOCKET_H_
