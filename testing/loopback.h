// loopback.h: ConnectTcpLoopback(port), a plain client socket for tests of
// servers that listen on 127.0.0.1.
#ifndef ZTIER_TESTING_LOOPBACK_H_
#define ZTIER_TESTING_LOOPBACK_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>

namespace ztier::testing {

// A blocking, close-on-exec TCP socket connected to 127.0.0.1:port; -1
// when the connection is refused (or no socket can be had).
inline int ConnectTcpLoopback(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

}  // namespace ztier::testing

#endif  // ZTIER_TESTING_LOOPBACK_H_
