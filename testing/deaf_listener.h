// DeafListener: a Unix stream socket listening at a path that accepts
// nothing, its backlog full, as a stopped or wedged server's is: a
// blocking connect(2) there waits for room (unix_stream_connect() in
// net/unix/af_unix.c), a non-blocking one fails with EAGAIN. Close() (or
// the destructor) closes the listener, which wakes a connect still waiting
// (ECONNREFUSED), and the connections queued on it.
#ifndef ZTIER_TESTING_DEAF_LISTENER_H_
#define ZTIER_TESTING_DEAF_LISTENER_H_

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

namespace ztier::testing {

class DeafListener {
 public:
  // Listens at `path` with a backlog of 0 and fills it: non-blocking
  // connects until one says EAGAIN. error() says what failed, if anything.
  explicit DeafListener(const std::string& path) {
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
    const auto* a = reinterpret_cast<const sockaddr*>(&addr);
    listener_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (listener_ < 0 || ::bind(listener_, a, sizeof(addr)) != 0 ||
        ::listen(listener_, 0) != 0) {
      error_ = std::string("listen ") + path + ": " + std::strerror(errno);
      return;
    }
    for (int i = 0; i < 64; ++i) {
      const int c =
          ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
      if (c < 0) break;
      if (::connect(c, a, sizeof(addr)) == 0) {
        queued_.push_back(c);
        continue;
      }
      if (errno == EAGAIN)
        full_ = true;
      else
        error_ = std::string("connect: ") + std::strerror(errno);
      ::close(c);
      break;
    }
    if (!full_ && error_.empty()) error_ = "the backlog never filled";
  }
  ~DeafListener() { Close(); }
  DeafListener(const DeafListener&) = delete;
  DeafListener& operator=(const DeafListener&) = delete;

  // "" once the listener's backlog is full, else what went wrong.
  const std::string& error() const { return error_; }

  void Close() {
    if (listener_ >= 0) ::close(listener_);
    listener_ = -1;
    for (int c : queued_) ::close(c);
    queued_.clear();
  }

 private:
  int listener_ = -1;
  std::vector<int> queued_;
  bool full_ = false;
  std::string error_;
};

}  // namespace ztier::testing

#endif  // ZTIER_TESTING_DEAF_LISTENER_H_
