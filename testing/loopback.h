// loopback.h: ConnectTcpLoopback(port), a plain client socket for tests of
// servers that listen on 127.0.0.1 (ConnectTcpLoopback6: on ::1), and
// BothLoopbacks(), what a name of both (localhost) resolves to.
#ifndef ZTIER_TESTING_LOOPBACK_H_
#define ZTIER_TESTING_LOOPBACK_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>

#include "platform/socket.h"

namespace ztier::testing {

// A blocking, close-on-exec TCP socket connected to 127.0.0.1:port (::1
// for AF_INET6); -1 when the connection is refused (or no socket can be
// had).
inline int ConnectTcpLoopback(int port, int family = AF_INET) {
  const int fd = ::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_storage a{};
  socklen_t len = sizeof(sockaddr_in);
  if (family == AF_INET6) {
    auto* v6 = reinterpret_cast<sockaddr_in6*>(&a);
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(static_cast<std::uint16_t>(port));
    v6->sin6_addr = in6addr_loopback;
    len = sizeof(sockaddr_in6);
  } else {
    auto* v4 = reinterpret_cast<sockaddr_in*>(&a);
    v4->sin_family = AF_INET;
    v4->sin_port = htons(static_cast<std::uint16_t>(port));
    v4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  }
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), len) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// The same on ::1.
inline int ConnectTcpLoopback6(int port) {
  return ConnectTcpLoopback(port, AF_INET6);
}

// "localhost:0" as getaddrinfo gives it where /etc/hosts names both
// loopback addresses (most distributions' do: "::1 localhost"): ::1, then
// 127.0.0.1, port 0. Empty endpoints when either cannot be had.
inline platform::ResolvedTcpAddress BothLoopbacks() {
  platform::ResolvedTcpAddress both{.spec = "localhost:0", .endpoints = {}};
  for (const char* spec : {"[::1]:0", "127.0.0.1:0"}) {
    auto a = platform::ResolveTcpAddress(spec);
    if (!a.has_value() || a->endpoints.empty()) return {};
    both.endpoints.push_back(a->endpoints.front());
  }
  return both;
}

}  // namespace ztier::testing

#endif  // ZTIER_TESTING_LOOPBACK_H_
