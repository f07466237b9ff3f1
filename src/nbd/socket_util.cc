// socket_util.cc: see socket_util.h.
#include "nbd/socket_util.h"

#include <fcntl.h>
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>

namespace ztier::nbd {

Status ReadExact(int fd, void* buf, std::size_t n) {
  auto* p = static_cast<char*>(buf);
  while (n > 0) {
    const ssize_t r = ::recv(fd, p, n, 0);
    if (r == 0) return Status::IoError("connection closed");
    if (r < 0) {
      if (errno == EINTR) continue;
      return PosixError("recv", errno);
    }
    p += r;
    n -= static_cast<std::size_t>(r);
  }
  return Status::Ok();
}

Status Discard(int fd, std::size_t n) {
  char scratch[16384];
  while (n > 0) {
    const std::size_t chunk = n < sizeof(scratch) ? n : sizeof(scratch);
    ZT_RETURN_IF_ERROR(ReadExact(fd, scratch, chunk));
    n -= chunk;
  }
  return Status::Ok();
}

Status WriteAll(int fd, const void* buf, std::size_t n) {
  struct iovec iov = {const_cast<void*>(buf), n};
  return SendAll(fd, &iov, 1);
}

Status SendAll(int fd, struct iovec* iov, int iovcnt) {
  while (iovcnt > 0) {
    struct msghdr msg = {};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<std::size_t>(iovcnt);
    const ssize_t w = ::sendmsg(fd, &msg, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EINTR) continue;
      return PosixError("sendmsg", errno);
    }
    auto left = static_cast<std::size_t>(w);
    while (iovcnt > 0 && left >= iov->iov_len) {
      left -= iov->iov_len;
      ++iov;
      --iovcnt;
    }
    if (iovcnt > 0) {
      iov->iov_base = static_cast<char*>(iov->iov_base) + left;
      iov->iov_len -= left;
    }
  }
  return Status::Ok();
}

namespace {

bool FillSockaddr(const std::string& path, struct sockaddr_un* addr) {
  std::memset(addr, 0, sizeof(*addr));
  addr->sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(addr->sun_path)) return false;
  std::memcpy(addr->sun_path, path.data(), path.size());
  return true;
}

// kOk when nothing (or a stale socket, now removed) is at `path`.
Status ClearStaleSocket(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return Status::Ok();
    return PosixError("stat " + path, errno);
  }
  if (!S_ISSOCK(st.st_mode)) {
    return Status::InvalidArgument(path + " exists and is not a socket");
  }
  struct sockaddr_un addr;
  if (!FillSockaddr(path, &addr)) {
    return Status::InvalidArgument("socket path too long: " + path);
  }
  const int probe = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (probe < 0) return PosixError("socket", errno);
  const int rc = ::connect(probe, reinterpret_cast<sockaddr*>(&addr),
                           sizeof(addr));
  const int err = errno;
  ::close(probe);
  if (rc == 0) {
    return Status::Busy(path + " is in use by a running server");
  }
  if (err != ECONNREFUSED) return PosixError("connect " + path, err);
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    return PosixError("unlink stale socket " + path, errno);
  }
  return Status::Ok();
}

}  // namespace

Result<int> ListenUnix(const std::string& path, dev_t* dev, ino_t* ino) {
  struct sockaddr_un addr;
  if (!FillSockaddr(path, &addr)) {
    return Err(Status::InvalidArgument("socket path empty or too long: '" +
                                       path + "'"));
  }
  ZT_RETURN_IF_ERROR(ClearStaleSocket(path));
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Err(PosixError("socket", errno));

  // Bind inside a private 0700 directory, chmod, then rename into place.
  const std::size_t slash = path.rfind('/');
  const std::string dir =
      slash == std::string::npos ? std::string(".") : path.substr(0, slash);
  std::string tmpdir = (dir.empty() ? std::string("") : dir) + "/.ztier-XXXXXX";
  struct sockaddr_un tmp_addr;
  bool use_tmp = tmpdir.size() + 2 < sizeof(tmp_addr.sun_path) &&
                 ::mkdtemp(tmpdir.data()) != nullptr;
  const std::string tmp_path = tmpdir + "/s";
  Status status;
  if (use_tmp) {
    FillSockaddr(tmp_path, &tmp_addr);
    if (::bind(fd, reinterpret_cast<sockaddr*>(&tmp_addr), sizeof(tmp_addr)) !=
            0 ||
        ::chmod(tmp_path.c_str(), 0600) != 0 ||
        ::rename(tmp_path.c_str(), path.c_str()) != 0) {
      status = PosixError("bind " + path, errno);
      ::unlink(tmp_path.c_str());
    }
    ::rmdir(tmpdir.c_str());
  } else {
    // The folder is not writable or the path is too long for the detour:
    // bind in place and narrow the mode at once.
    if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      status = PosixError("bind " + path, errno);
    } else if (::chmod(path.c_str(), 0600) != 0) {
      status = PosixError("chmod " + path, errno);
      ::unlink(path.c_str());
    }
  }
  if (status.ok() && ::listen(fd, SOMAXCONN) != 0) {
    status = PosixError("listen " + path, errno);
    ::unlink(path.c_str());
  }
  struct stat st;
  if (status.ok() && ::stat(path.c_str(), &st) != 0) {
    status = PosixError("stat " + path, errno);
  }
  if (!status.ok()) {
    ::close(fd);
    return Err(status);
  }
  *dev = st.st_dev;
  *ino = st.st_ino;
  return fd;
}

void UnlinkUnixSocket(const std::string& path, dev_t dev, ino_t ino) {
  struct stat st;
  if (::lstat(path.c_str(), &st) == 0 && st.st_dev == dev &&
      st.st_ino == ino) {
    ::unlink(path.c_str());
  }
}

Result<int> ListenTcp(const std::string& spec, int* port) {
  const std::size_t colon = spec.rfind(':');
  if (colon == std::string::npos) {
    return Err(Status::InvalidArgument("listen address '" + spec +
                                       "' is not HOST:PORT or :PORT"));
  }
  std::string host = spec.substr(0, colon);
  const std::string port_text = spec.substr(colon + 1);
  int port_value = -1;
  auto [p, ec] = std::from_chars(port_text.data(),
                                 port_text.data() + port_text.size(),
                                 port_value);
  if (ec != std::errc() || p != port_text.data() + port_text.size() ||
      port_value < 0 || port_value > 65535) {
    return Err(Status::InvalidArgument("bad port in '" + spec + "'"));
  }
  if (host.empty()) host = "127.0.0.1";
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  struct addrinfo hints = {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  struct addrinfo* res = nullptr;
  const int gai = ::getaddrinfo(host.c_str(), port_text.c_str(), &hints, &res);
  if (gai != 0) {
    return Err(Status::InvalidArgument("cannot resolve '" + host +
                                       "': " + ::gai_strerror(gai)));
  }
  Status status = Status::InvalidArgument("no address for '" + spec + "'");
  int fd = -1;
  for (struct addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC,
                  ai->ai_protocol);
    if (fd < 0) {
      status = PosixError("socket", errno);
      continue;
    }
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
        ::listen(fd, SOMAXCONN) == 0) {
      status = Status::Ok();
      break;
    }
    status = PosixError("bind " + spec, errno);
    ::close(fd);
    fd = -1;
  }
  ::freeaddrinfo(res);
  if (!status.ok()) return Err(status);
  struct sockaddr_storage bound;
  socklen_t len = sizeof(bound);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
  *port = bound.ss_family == AF_INET6
              ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
              : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  return fd;
}

void SetNoDelay(int fd) {
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

std::string PeerName(int fd, bool tcp) {
  if (!tcp) return "unix";
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) {
    return "tcp ?";
  }
  char host[INET6_ADDRSTRLEN] = "?";
  int port = 0;
  if (ss.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&ss);
    ::inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
    port = ntohs(a->sin_port);
    return "tcp " + std::string(host) + ":" + std::to_string(port);
  }
  if (ss.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&ss);
    ::inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
    port = ntohs(a->sin6_port);
    return "tcp [" + std::string(host) + "]:" + std::to_string(port);
  }
  return "tcp ?";
}

}  // namespace ztier::nbd
