// socket.cc: Listener and the socket calls (platform/socket.h).
#include "platform/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>  // renameat2
#include <cstring>
#include <cstddef>
#include <mutex>
#include <utility>

namespace ztier::platform {
namespace {

Status MakeAddress(const std::string& path, sockaddr_un* addr) {
  std::memset(addr, 0, sizeof(*addr));
  addr->sun_family = AF_UNIX;
  if (path.empty()) return Status::InvalidArgument("empty socket path");
  if (path.size() >= sizeof(addr->sun_path)) {
    return Status::InvalidArgument("socket path longer than " +
                                   std::to_string(sizeof(addr->sun_path) - 1) +
                                   " bytes: " + path);
  }
  std::memcpy(addr->sun_path, path.data(), path.size());
  return Status::Ok();
}

// What is at a path that is no socket, in the words both ends use: a
// server that will not bind over it (lstat's `mode`: bind(2) follows no
// link) and a client that cannot connect to it (stat's: connect(2) does).
Status NotASocket(const std::string& path, mode_t mode) {
  const char* kind = S_ISREG(mode)    ? "a regular file"
                     : S_ISDIR(mode)  ? "a directory"
                     : S_ISLNK(mode)  ? "a symbolic link"
                     : S_ISFIFO(mode) ? "a FIFO"
                     : S_ISCHR(mode)  ? "a character device"
                     : S_ISBLK(mode)  ? "a block device"
                                      : "a file";
  return Status::InvalidArgument(path + " is " + kind + ", not a socket");
}

// Connects a new stream socket to `path` (a valid address): 0 and the
// socket in *fd, or the errno. A non-blocking connect does not wait for a
// live server that does not accept (stopped, or its backlog full): EAGAIN.
// (A Unix connect never returns EINPROGRESS.) A blocking one waits for
// room in the backlog, at most `timeout_ms` when that is positive (the
// socket's SO_SNDTIMEO bounds that wait, unix_stream_connect() in
// net/unix/af_unix.c; EAGAIN after it); the timeout is cleared after.
int Connect(const std::string& path, int* fd, bool nonblocking,
            int timeout_ms = -1) {
  sockaddr_un addr;
  MakeAddress(path, &addr).IgnoreError();
  *fd = ::socket(AF_UNIX,
                 SOCK_STREAM | SOCK_CLOEXEC | (nonblocking ? SOCK_NONBLOCK : 0),
                 0);
  if (*fd < 0) return errno;
  const auto send_timeout = [fd](int ms) {
    const timeval tv = {ms / 1000, (ms % 1000) * 1000};
    return ::setsockopt(*fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  };
  const bool bounded = !nonblocking && timeout_ms > 0;
  using Clock = std::chrono::steady_clock;
  const Clock::time_point deadline =
      Clock::now() + std::chrono::milliseconds(timeout_ms);
  int r = 0;
  while (true) {
    if (bounded) {
      // SO_SNDTIMEO bounds one connect(2); one a signal cut short (EINTR)
      // is tried again with what is left of timeout_ms, not all of it.
      const auto left =
          std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) {  // 0 would mean no bound at all
        errno = EAGAIN;         // what a connect(2) that timed out says
        r = -1;
        break;
      }
      r = send_timeout(static_cast<int>(left.count()));
      if (r != 0) break;
    }
    r = ::connect(*fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    if (r == 0 || errno != EINTR) break;
  }
  if (r == 0 && bounded) r = send_timeout(0);
  if (r != 0) {
    const int err = errno;
    ::close(*fd);
    *fd = -1;
    return err;
  }
  return 0;
}

// kOk when nothing (or a stale socket, now removed) is at `path`.
Status ClearStaleSocket(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return Status::Ok();
    return PosixError("stat " + path, errno);
  }
  if (!S_ISSOCK(st.st_mode)) return NotASocket(path, st.st_mode);
  int probe = -1;
  const int err = Connect(path, &probe, /*nonblocking=*/true);
  if (err == 0 || err == EAGAIN) {  // EAGAIN: live, its backlog full
    if (probe >= 0) ::close(probe);
    return Status::Busy(path + " is in use by a running server");
  }
  // ECONNREFUSED: a socket file nobody accepts on.
  if (err != ECONNREFUSED) return PosixError("connect " + path, err);
  // Still the file probed? Another server starting may have replaced it
  // meanwhile (its own socket listens before it appears there).
  struct stat again;
  if (::lstat(path.c_str(), &again) == 0 &&
      (again.st_dev != st.st_dev || again.st_ino != st.st_ino)) {
    return Status::Busy(path + " was replaced while starting");
  }
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    return PosixError("unlink stale socket " + path, errno);
  }
  return Status::Ok();
}

// Renames `from` to `to` unless something is at `to` (EEXIST): 0 or the
// errno. Where the file system has no RENAME_NOREPLACE (some FUSE and 9p
// file systems: EINVAL), a plain rename, where nothing is at `to` a moment
// before; something there is EEXIST all the same.
int RenameNoReplace(const std::string& from, const std::string& to) {
  if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(),
                  RENAME_NOREPLACE) == 0) {
    return 0;
  }
  const int err = errno;
  if (err != EINVAL && err != ENOSYS) return err;
  struct stat there;
  if (::lstat(to.c_str(), &there) == 0) return EEXIST;
  if (errno != ENOENT) return errno;
  return ::rename(from.c_str(), to.c_str()) == 0 ? 0 : errno;
}

// Binds `fd` at `path` with mode 0600 and makes it listen (see socket.h);
// the socket file's device and inode in *st. It listens before it appears
// at `path`: a server starting meanwhile finds it live (kBusy), never
// refused and so stale. The link into place (or the rename where the file
// system has no hard links) never replaces what appeared at `path` since
// ClearStaleSocket: that is kBusy.
Status BindPrivate(int fd, const std::string& path, struct stat* st) {
  const std::size_t slash = path.rfind('/');
  const std::string dir =
      slash == std::string::npos ? "." : path.substr(0, std::max<std::size_t>(slash, 1));
  std::string tmp_dir = dir + "/.ztier-XXXXXX";
  const std::string tmp_sock = tmp_dir + "/s";  // same length after mkdtemp
  sockaddr_un addr;
  const bool staged = MakeAddress(tmp_sock, &addr).ok() &&
                      ::mkdtemp(tmp_dir.data()) != nullptr;
  ZT_RETURN_IF_ERROR(MakeAddress(staged ? tmp_dir + "/s" : path, &addr));
  const std::string bound = staged ? tmp_dir + "/s" : path;
  Status s;
  // Without the private folder (its path would not fit in sun_path) the
  // socket is bound at `path` itself: a umask of 0077 makes it 0600 from
  // the start, with no window before the chmod. The umask is the process's;
  // a file another thread creates meanwhile only comes out more private.
  // Two such binds at once are serialised: interleaved, the second would
  // save the first's 0077 as the mask to give back and leave it set for
  // good (and the first's restore would let it bind under the old mask).
  static std::mutex umask_mu;
  std::unique_lock<std::mutex> umask_lock(umask_mu, std::defer_lock);
  if (!staged) umask_lock.lock();
  const mode_t old_mask = staged ? 0 : ::umask(0077);
  const int bound_at = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  const int bind_errno = errno;
  if (!staged) {
    ::umask(old_mask);
    umask_lock.unlock();
  }
  if (bound_at != 0) {
    s = PosixError("bind " + bound, bind_errno);
  } else if (::chmod(bound.c_str(), 0600) != 0) {
    s = PosixError("chmod " + bound, errno);
  } else if (::lstat(bound.c_str(), st) != 0) {
    s = PosixError("stat " + bound, errno);
  } else if (::listen(fd, SOMAXCONN) != 0) {
    s = PosixError("listen " + bound, errno);
  } else if (staged && ::link(bound.c_str(), path.c_str()) != 0) {
    // No hard links here (EPERM on some file systems): a rename instead.
    const int err = errno == EEXIST ? EEXIST : RenameNoReplace(bound, path);
    if (err == EEXIST) {
      s = Status::Busy(path + " appeared while starting");
    } else if (err != 0) {
      s = PosixError("link or rename " + bound + " to " + path, err);
    }
  }
  if (staged) {
    ::unlink(bound.c_str());
    ::rmdir(tmp_dir.c_str());
  } else if (!s.ok() && bound_at == 0) {
    ::unlink(path.c_str());  // ours: a failed bind leaves another's alone
  }
  return s;
}

}  // namespace

Result<Listener> Listener::Unix(const std::string& path) {
  sockaddr_un addr;
  ZT_RETURN_IF_ERROR(MakeAddress(path, &addr));
  ZT_RETURN_IF_ERROR(ClearStaleSocket(path));
  Listener l;
  l.fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (l.fd_ < 0) return Err(PosixError("socket", errno));
  struct stat st;
  ZT_RETURN_IF_ERROR(BindPrivate(l.fd_, path, &st));
  // From here Close() removes the file, while it is still this socket.
  l.path_ = path;
  l.dev_ = st.st_dev;
  l.ino_ = st.st_ino;
  return l;
}

Result<TcpAddress> ParseTcpAddress(const std::string& spec) {
  const std::size_t colon = spec.rfind(':');
  if (colon == std::string::npos) {
    return Err(Status::InvalidArgument("listen address '" + spec +
                                       "' is not HOST:PORT or :PORT"));
  }
  TcpAddress a{spec.substr(0, colon), spec.substr(colon + 1)};
  int port_value = -1;
  auto [p, ec] =
      std::from_chars(a.port.data(), a.port.data() + a.port.size(), port_value);
  if (ec != std::errc() || p != a.port.data() + a.port.size() ||
      port_value < 0 || port_value > 65535) {
    return Err(Status::InvalidArgument("bad port in '" + spec + "'"));
  }
  if (a.host.empty()) a.host = "127.0.0.1";
  if (a.host.size() >= 2 && a.host.front() == '[' && a.host.back() == ']') {
    a.host = a.host.substr(1, a.host.size() - 2);
  }
  return a;
}

namespace {

// getaddrinfo for a listening socket at `address`; *res to be freed with
// freeaddrinfo.
Status ResolvePassive(const TcpAddress& address, struct addrinfo** res) {
  struct addrinfo hints = {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  *res = nullptr;
  const int gai = ::getaddrinfo(address.host.c_str(), address.port.c_str(),
                                &hints, res);
  if (gai == 0) return Status::Ok();
  // A resolver that cannot answer now (no network yet, early at boot) is
  // not a bad name: kIoError, which a service manager may try again.
  const std::string why =
      "cannot resolve '" + address.host + "': " + ::gai_strerror(gai);
  if (gai == EAI_AGAIN || gai == EAI_SYSTEM || gai == EAI_MEMORY) {
    return Status::IoError(why);
  }
  return Status::InvalidArgument(why);
}

}  // namespace

Result<ResolvedTcpAddress> ResolveTcpAddress(const std::string& spec) {
  ZT_ASSIGN_OR_RETURN(const TcpAddress address, ParseTcpAddress(spec));
  struct addrinfo* res = nullptr;
  if (Status st = ResolvePassive(address, &res); !st.ok()) return Err(st);
  ResolvedTcpAddress resolved{.spec = spec, .endpoints = {}};
  for (struct addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    if (ai->ai_addrlen > sizeof(sockaddr_storage)) continue;
    ResolvedTcpAddress::Endpoint& e = resolved.endpoints.emplace_back();
    e.family = ai->ai_family;
    e.socktype = ai->ai_socktype;
    e.protocol = ai->ai_protocol;
    std::memcpy(&e.addr, ai->ai_addr, ai->ai_addrlen);
    e.len = ai->ai_addrlen;
  }
  ::freeaddrinfo(res);
  return resolved;
}

namespace {

// The port of a TCP socket address (network order), read or set.
std::uint16_t* PortOf(sockaddr_storage* addr) {
  return addr->ss_family == AF_INET6
             ? &reinterpret_cast<sockaddr_in6*>(addr)->sin6_port
             : &reinterpret_cast<sockaddr_in*>(addr)->sin_port;
}

}  // namespace

Result<std::vector<Listener>> Listener::TcpAll(
    const ResolvedTcpAddress& address) {
  const std::string& spec = address.spec;
  const auto& all = address.endpoints;
  // One try: binds each endpoint; *picked_in_use when a port the first bind
  // picked (PORT 0) is in use on a later endpoint. The kernel picks it free
  // for the first address alone (inet_csk_find_open_port() in
  // net/ipv4/inet_connection_sock.c); another pick may be free on all.
  const auto bind_all =
      [&](bool* picked_in_use) -> Result<std::vector<Listener>> {
    Status skipped = Status::InvalidArgument("no address for '" + spec + "'");
    std::vector<Listener> bound;
    for (auto e = all.begin(); e != all.end(); ++e) {
      const bool repeated = std::any_of(all.begin(), e, [&](const auto& o) {
        return o.len == e->len && std::memcmp(&o.addr, &e->addr, e->len) == 0;
      });
      if (repeated) continue;
      sockaddr_storage addr = e->addr;
      // Port 0 asks for one free port: the first bind's, for all.
      const bool picked = !bound.empty() && *PortOf(&addr) == 0;
      if (picked) {
        *PortOf(&addr) = htons(static_cast<std::uint16_t>(bound.front().port_));
      }
      Listener l;
      l.tcp_ = true;
      l.fd_ = ::socket(e->family, e->socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
                       e->protocol);
      if (l.fd_ < 0) {
        if (errno != EAFNOSUPPORT) return Err(PosixError("socket", errno));
        skipped = PosixError("socket " + spec, errno);
        continue;
      }
      const int one = 1;
      ::setsockopt(l.fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
      if (e->family == AF_INET6 && all.size() > 1) {
        ::setsockopt(l.fd_, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
      }
      if (::bind(l.fd_, reinterpret_cast<const sockaddr*>(&addr), e->len) !=
          0) {
        const int err = errno;
        *picked_in_use = picked && err == EADDRINUSE;
        if (err != EADDRNOTAVAIL) return Err(PosixError("bind " + spec, err));
        skipped = PosixError("bind " + spec, err);
        continue;
      }
      if (::listen(l.fd_, SOMAXCONN) != 0) {
        return Err(PosixError("listen " + spec, errno));
      }
      socklen_t len = sizeof(addr);
      if (::getsockname(l.fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
        return Err(PosixError("getsockname " + spec, errno));
      }
      l.port_ = ntohs(*PortOf(&addr));
      bound.push_back(std::move(l));
    }
    if (bound.empty()) return Err(skipped);
    return bound;
  };
  // A few picks in a row in use elsewhere are most unlikely but for a port
  // range nearly full; then the last try's EADDRINUSE is the answer.
  constexpr int kTries = 16;
  for (int i = 1;; ++i) {
    bool picked_in_use = false;
    Result<std::vector<Listener>> l = bind_all(&picked_in_use);
    if (l.has_value() || !picked_in_use || i == kTries) return l;
  }
}

Result<std::vector<Listener>> Listener::TcpAll(const std::string& spec) {
  ZT_ASSIGN_OR_RETURN(const ResolvedTcpAddress address,
                      ResolveTcpAddress(spec));
  return TcpAll(address);
}

Listener::Listener(Listener&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      tcp_(other.tcp_),
      port_(other.port_),
      path_(std::exchange(other.path_, std::string())),
      dev_(other.dev_),
      ino_(other.ino_) {}

Listener& Listener::operator=(Listener&& other) noexcept {
  if (this != &other) {
    Close();
    fd_ = std::exchange(other.fd_, -1);
    tcp_ = other.tcp_;
    port_ = other.port_;
    path_ = std::exchange(other.path_, std::string());
    dev_ = other.dev_;
    ino_ = other.ino_;
  }
  return *this;
}

void Listener::Close() {
  if (!path_.empty()) {
    struct stat st;
    if (::lstat(path_.c_str(), &st) == 0 && st.st_dev == dev_ &&
        st.st_ino == ino_) {
      ::unlink(path_.c_str());
    }
    path_.clear();
  }
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

Result<int> Listener::Accept(bool nonblocking) const {
  const int flags = SOCK_CLOEXEC | (nonblocking ? SOCK_NONBLOCK : 0);
  for (;;) {
    const int fd = ::accept4(fd_, nullptr, nullptr, flags);
    if (fd >= 0) return fd;
    if (errno == EINTR) continue;
    return Err(PosixError("accept", errno));
  }
}

Result<int> ConnectUnix(const std::string& path, int timeout_ms) {
  sockaddr_un addr;
  ZT_RETURN_IF_ERROR(MakeAddress(path, &addr));
  int fd = -1;
  const int err = Connect(path, &fd, /*nonblocking=*/false, timeout_ms);
  if (err == EAGAIN && timeout_ms > 0) {
    return Err(PosixError(
        "connect " + path + ": the server accepts no connection (stopped, " +
            "or its backlog full) after " + std::to_string(timeout_ms) + " ms",
        ETIMEDOUT));
  }
  if (err == ECONNREFUSED) {
    // connect(2) says ECONNREFUSED for a path that is no socket as for a
    // socket nobody listens on (unix_find_bsd() in net/unix/af_unix.c);
    // the first is a wrong path, not a stopped server.
    struct stat st;
    if (::stat(path.c_str(), &st) == 0 && !S_ISSOCK(st.st_mode)) {
      return Err(NotASocket(path, st.st_mode));
    }
    // The stale socket that a server starting at `path` would replace
    // (ClearStaleSocket).
    return Err(PosixError(
        "connect " + path + ": no server listens on it (a stale socket)",
        ECONNREFUSED));
  }
  if (err != 0) return Err(PosixError("connect " + path, err));
  return fd;
}

Status SendUnixDatagram(const std::string& name, std::string_view data) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if ((name.empty() || (name[0] != '/' && name[0] != '@')) ||
      name.size() >= sizeof(addr.sun_path)) {
    return Status::InvalidArgument("'" + name +
                                   "' is not an AF_UNIX socket name");
  }
  std::memcpy(addr.sun_path, name.data(), name.size());
  auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) +
                                    name.size());
  if (name[0] == '@') {
    addr.sun_path[0] = '\0';  // abstract namespace: no terminating NUL
  } else {
    ++len;
  }
  const int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return PosixError("socket", errno);
  const ssize_t n = ::sendto(fd, data.data(), data.size(), MSG_NOSIGNAL,
                             reinterpret_cast<const sockaddr*>(&addr), len);
  const int err = errno;
  ::close(fd);
  if (n == static_cast<ssize_t>(data.size())) return Status::Ok();
  return PosixError(name, n < 0 ? err : EMSGSIZE);
}

Result<std::size_t> Receive(int fd, void* buf, std::size_t n) {
  for (;;) {
    const ssize_t r = ::recv(fd, buf, n, 0);
    if (r >= 0) return static_cast<std::size_t>(r);
    if (errno == EINTR) continue;
    return Err(PosixError("recv", errno));
  }
}

Result<std::size_t> Send(int fd, const void* buf, std::size_t n,
                         bool dontwait) {
  const int flags = MSG_NOSIGNAL | (dontwait ? MSG_DONTWAIT : 0);
  for (;;) {
    const ssize_t w = ::send(fd, buf, n, flags);
    if (w >= 0) return static_cast<std::size_t>(w);
    if (errno == EINTR) continue;
    return Err(PosixError("send", errno));
  }
}

void SetNoDelay(int fd) {
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

void SetResetOnClose(int fd) {
  const linger now{.l_onoff = 1, .l_linger = 0};
  ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &now, sizeof(now));
}

void SetKeepAlive(int fd) {
  const int one = 1;
  const int idle = kKeepAliveIdleSeconds;
  const int interval = kKeepAliveIntervalSeconds;
  const int count = kKeepAliveProbes;
  ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof(interval));
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof(count));
}

std::string PeerName(int fd, bool tcp) {
  if (!tcp) return "unix";
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) {
    return "tcp ?";
  }
  char host[INET6_ADDRSTRLEN] = "?";
  if (ss.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&ss);
    ::inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
    return "tcp " + std::string(host) + ":" + std::to_string(ntohs(a->sin_port));
  }
  if (ss.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&ss);
    ::inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
    return "tcp [" + std::string(host) + "]:" +
           std::to_string(ntohs(a->sin6_port));
  }
  return "tcp ?";
}

}  // namespace ztier::platform
