// transport.cc: the plain socket transport and the helpers over any
// transport (contract in transport.h).
//
// The socket stays blocking. A call first tries without waiting
// (MSG_DONTWAIT); only when that would block does it poll() with the
// timeout, so the common case costs one system call, as before timeouts
// existed. A timeout of -1 is a plain blocking call.
#include "nbd/transport.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <string>

namespace ztier::nbd {
namespace {

// Waits for `events` on fd. kIoError on timeout ("timed out WHAT").
Status WaitFor(int fd, short events, int timeout_ms, const char* what) {
  for (;;) {
    struct pollfd p = {fd, events, 0};
    const int r = ::poll(&p, 1, timeout_ms);
    if (r > 0) return Status::Ok();  // ready, or an error the call will see
    if (r == 0) {
      return Status::IoError(std::string("timed out ") + what + " after " +
                             std::to_string(timeout_ms) + " ms");
    }
    if (errno != EINTR) return PosixError("poll", errno);
  }
}

class PlainTransport final : public Transport {
 public:
  static constexpr int kMaxIov = 16;

  explicit PlainTransport(int fd) : fd_(fd) {}

  Result<std::size_t> Recv(void* buf, std::size_t n,
                           int timeout_ms) override {
    const int flags = timeout_ms < 0 ? 0 : MSG_DONTWAIT;
    for (;;) {
      const ssize_t r = ::recv(fd_, buf, n, flags);
      if (r >= 0) return static_cast<std::size_t>(r);
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        return Err(PosixError("recv", errno));
      }
      ZT_RETURN_IF_ERROR(WaitFor(fd_, POLLIN, timeout_ms, "receiving"));
    }
  }

  Status Send(const struct iovec* iov, int iovcnt, int timeout_ms) override {
    // A copy to advance through, on the stack: sending allocates nothing.
    if (iovcnt > kMaxIov) return Status::InvalidArgument("too many iovecs");
    struct iovec rest[kMaxIov];
    std::copy(iov, iov + iovcnt, rest);
    struct iovec* v = rest;
    int left = iovcnt;
    const int flags = MSG_NOSIGNAL | (timeout_ms < 0 ? 0 : MSG_DONTWAIT);
    while (left > 0) {
      struct msghdr m = {};
      m.msg_iov = v;
      m.msg_iovlen = static_cast<std::size_t>(left);
      const ssize_t r = ::sendmsg(fd_, &m, flags);
      if (r < 0) {
        if (errno == EINTR) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) {
          return PosixError("send", errno);
        }
        ZT_RETURN_IF_ERROR(WaitFor(fd_, POLLOUT, timeout_ms, "sending"));
        continue;
      }
      Advance(&v, &left, static_cast<std::size_t>(r));
    }
    return Status::Ok();
  }

  Result<std::size_t> TrySend(const struct iovec* iov, int iovcnt) override {
    struct msghdr m = {};
    m.msg_iov = const_cast<struct iovec*>(iov);
    m.msg_iovlen = static_cast<std::size_t>(iovcnt);
    for (;;) {
      const ssize_t r = ::sendmsg(fd_, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (r >= 0) return static_cast<std::size_t>(r);
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return std::size_t{0};
      return Err(PosixError("send", errno));
    }
  }

  void Shutdown() override {
    if (!shut_.exchange(true)) ::shutdown(fd_, SHUT_RDWR);
  }

  const char* name() const override { return "plain"; }

 private:
  // Drops the first `n` bytes of v[0..*left).
  static void Advance(struct iovec** v, int* left, std::size_t n) {
    while (*left > 0 && n >= (*v)->iov_len) {
      n -= (*v)->iov_len;
      ++*v;
      --*left;
    }
    if (*left > 0) {
      (*v)->iov_base = static_cast<char*>((*v)->iov_base) + n;
      (*v)->iov_len -= n;
    }
  }

  const int fd_;
  std::atomic<bool> shut_{false};
};

}  // namespace

std::unique_ptr<Transport> NewPlainTransport(int fd) {
  return std::make_unique<PlainTransport>(fd);
}

Status RecvExact(Transport* t, void* buf, std::size_t n, int timeout_ms) {
  auto* p = static_cast<char*>(buf);
  while (n > 0) {
    ZT_ASSIGN_OR_RETURN(std::size_t got, t->Recv(p, n, timeout_ms));
    if (got == 0) return Status::IoError("connection closed");
    p += got;
    n -= got;
  }
  return Status::Ok();
}

Status RecvDiscard(Transport* t, std::size_t n, int timeout_ms) {
  char sink[16 << 10];
  while (n > 0) {
    const std::size_t want = std::min(n, sizeof(sink));
    ZT_RETURN_IF_ERROR(RecvExact(t, sink, want, timeout_ms));
    n -= want;
  }
  return Status::Ok();
}

Status SendBytes(Transport* t, const void* buf, std::size_t n,
                 int timeout_ms) {
  const struct iovec iov = {const_cast<void*>(buf), n};
  return t->Send(&iov, 1, timeout_ms);
}

}  // namespace ztier::nbd
