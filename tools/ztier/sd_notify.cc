// File: tools/ztier/sd_notify.cc
#include "sd_notify.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>

namespace ztier::tool {

ServiceNotifier::ServiceNotifier() {
  const char* env = std::getenv("NOTIFY_SOCKET");
  if (env != nullptr) socket_ = env;
}

Status ServiceNotifier::Notify(std::string_view state) const {
  if (socket_.empty()) return Status::Ok();
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if ((socket_[0] != '/' && socket_[0] != '@') ||
      socket_.size() >= sizeof(addr.sun_path)) {
    return Status::InvalidArgument("NOTIFY_SOCKET '" + socket_ +
                                   "' is not an AF_UNIX socket name");
  }
  std::memcpy(addr.sun_path, socket_.data(), socket_.size());
  socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) +
                                         socket_.size());
  if (socket_[0] == '@') {
    addr.sun_path[0] = '\0';  // abstract namespace: no terminating NUL
  } else {
    ++len;
  }
  const int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return PosixError("socket", errno);
  const ssize_t n = ::sendto(fd, state.data(), state.size(), MSG_NOSIGNAL,
                             reinterpret_cast<const sockaddr*>(&addr), len);
  const int e = errno;
  ::close(fd);
  if (n == static_cast<ssize_t>(state.size())) return Status::Ok();
  return PosixError("NOTIFY_SOCKET " + socket_, e);
}

}  // namespace ztier::tool
