// control_server.cc: the control socket server (contract in
// control_server.h; wire format in protocol.h and docs/control_protocol.md).
//
// Threads: one accept thread, one thread per connection. Every blocking wait
// is a poll() on the connection (or listening) fd plus stop_fd_, an eventfd
// that Stop() makes readable once and forever, so Stop() wakes everything
// without signals. Connection threads are joined by the accept thread once
// they finish (Reap) and by Stop() at the end.
#include "ctl/control_server.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cassert>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <list>
#include <mutex>
#include <thread>

#include "ctl/attributes.h"

namespace ztier::ctl {
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

// Whether a server answers on `path`: true (live), false (stale socket,
// ECONNREFUSED), or an error.
Result<bool> ProbeLive(const std::string& path) {
  sockaddr_un addr;
  ZT_RETURN_IF_ERROR(MakeAddress(path, &addr));
  const int s = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) return Err(PosixError("socket", errno));
  const int rc = ::connect(s, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  const int err = errno;
  ::close(s);
  if (rc == 0) return true;
  if (err == ECONNREFUSED) return false;
  return Err(PosixError("connect " + path, err));
}

// poll() one fd for `events` and stop_fd for input. 1: ready, 0: timed out,
// -1: stopping or the fd failed.
int Wait(int fd, short events, int stop_fd, int timeout_ms) {
  pollfd fds[2] = {{fd, events, 0}, {stop_fd, POLLIN, 0}};
  for (;;) {
    const int n = ::poll(fds, 2, timeout_ms);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return -1;
    if (n == 0) return 0;
    if (fds[1].revents != 0) return -1;
    // POLLHUP/POLLERR: let the following recv/send see it.
    return 1;
  }
}

class Server final : public ControlServer {
 public:
  Server(std::string path, DeviceRegistry* registry,
         const ControlServerOptions& options)
      : path_(std::move(path)), registry_(registry), options_(options) {}
  ~Server() override { Stop(); }

  Status Init();
  void Stop() override;
  const std::string& path() const override { return path_; }
  std::size_t connections() const override { return active_.load(); }

 private:
  struct Conn {
    int fd = -1;
    std::thread thread;
    std::atomic<bool> done{false};
  };

  Status Bind();
  void AcceptLoop();
  void Serve(Conn* conn);
  bool SendAll(int fd, std::string_view data);
  void Reap();

  const std::string path_;
  DeviceRegistry* const registry_;
  const ControlServerOptions options_;
  int listen_fd_ = -1;
  int stop_fd_ = -1;
  dev_t sock_dev_ = 0;
  ino_t sock_ino_ = 0;
  bool stopped_ = false;
  std::thread accept_thread_;
  std::atomic<std::size_t> active_{0};
  std::mutex mu_;                               // guards conns_
  std::list<std::unique_ptr<Conn>> conns_;
};

Status Server::Init() {
  sockaddr_un addr;
  ZT_RETURN_IF_ERROR(MakeAddress(path_, &addr));
  struct stat st;
  if (::lstat(path_.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      return Status::Busy(path_ + " exists and is not a socket");
    }
    ZT_ASSIGN_OR_RETURN(const bool live, ProbeLive(path_));
    if (live) {
      return Status::Busy("a server is already listening on " + path_);
    }
    if (::unlink(path_.c_str()) != 0 && errno != ENOENT) {
      return PosixError("unlink stale socket " + path_, errno);
    }
  } else if (errno != ENOENT) {
    return PosixError("stat " + path_, errno);
  }
  stop_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (stop_fd_ < 0) return PosixError("eventfd", errno);
  ZT_RETURN_IF_ERROR(Bind());
  if (::lstat(path_.c_str(), &st) != 0) return PosixError("stat " + path_, errno);
  sock_dev_ = st.st_dev;
  sock_ino_ = st.st_ino;
  accept_thread_ = std::thread([this] { AcceptLoop(); });
  return Status::Ok();
}

// Binds and listens. Bound first as <dir>/.ztier-ctl.XXXXXX/s (the
// directory is 0700, so nobody else can connect before the chmod), then
// linked to path_. When that temporary path would not fit in sun_path, binds
// path_ directly and chmods at once (a short window at the umask's mode).
Status Server::Bind() {
  listen_fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (listen_fd_ < 0) return PosixError("socket", errno);
  const std::size_t slash = path_.rfind('/');
  const std::string dir =
      slash == std::string::npos ? "." : path_.substr(0, std::max<std::size_t>(slash, 1));
  std::string tmp_dir = dir + "/.ztier-ctl.XXXXXX";
  const std::string tmp_sock = tmp_dir + "/s";  // same length after mkdtemp
  sockaddr_un addr;
  const bool staged = MakeAddress(tmp_sock, &addr).ok() &&
                      ::mkdtemp(tmp_dir.data()) != nullptr;
  if (staged) {
    ZT_RETURN_IF_ERROR(MakeAddress(tmp_dir + "/s", &addr));
  } else {
    ZT_RETURN_IF_ERROR(MakeAddress(path_, &addr));
  }
  const std::string bound = staged ? tmp_dir + "/s" : path_;
  Status s;
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    s = PosixError("bind " + bound, errno);
  } else if (::chmod(bound.c_str(), 0600) != 0) {
    s = PosixError("chmod " + bound, errno);
  } else if (::listen(listen_fd_, 64) != 0) {
    s = PosixError("listen " + bound, errno);
  } else if (staged && ::link(bound.c_str(), path_.c_str()) != 0) {
    if (errno == EEXIST) {
      s = Status::Busy(path_ + " appeared while starting");
    } else if (::rename(bound.c_str(), path_.c_str()) != 0) {
      // No hard links here (EPERM on some filesystems): rename instead.
      s = PosixError("rename " + bound + " to " + path_, errno);
    }
  }
  if (staged) {
    ::unlink(bound.c_str());
    ::rmdir(tmp_dir.c_str());
  } else if (!s.ok()) {
    ::unlink(path_.c_str());
  }
  return s;
}

void Server::Stop() {
  if (stopped_) return;
  stopped_ = true;
  if (stop_fd_ >= 0) {
    const std::uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(stop_fd_, &one, sizeof(one));
  }
  if (accept_thread_.joinable()) accept_thread_.join();
  std::list<std::unique_ptr<Conn>> conns;
  {
    std::lock_guard lock(mu_);
    conns.swap(conns_);
  }
  for (auto& c : conns) c->thread.join();
  if (listen_fd_ >= 0) {
    // Remove the socket file only if it is still ours.
    struct stat st;
    if (::lstat(path_.c_str(), &st) == 0 && st.st_dev == sock_dev_ &&
        st.st_ino == sock_ino_ && sock_ino_ != 0) {
      ::unlink(path_.c_str());
    }
    ::close(listen_fd_);
    listen_fd_ = -1;
  }
  if (stop_fd_ >= 0) {
    ::close(stop_fd_);
    stop_fd_ = -1;
  }
}

void Server::Reap() {
  std::list<std::unique_ptr<Conn>> finished;
  {
    std::lock_guard lock(mu_);
    for (auto it = conns_.begin(); it != conns_.end();) {
      if ((*it)->done.load()) {
        finished.push_back(std::move(*it));
        it = conns_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& c : finished) c->thread.join();
}

void Server::AcceptLoop() {
  for (;;) {
    if (Wait(listen_fd_, POLLIN, stop_fd_, -1) < 0) return;
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      // EAGAIN (the client left), EINTR, ECONNABORTED; EMFILE: back off.
      if (errno == EMFILE || errno == ENFILE) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      continue;
    }
    Reap();
    if (active_.load() >= options_.max_connections) {
      const std::string busy =
          EncodeError("EBUSY", "too many control connections (" +
                                   std::to_string(options_.max_connections) +
                                   ")");
      [[maybe_unused]] ssize_t n =
          ::send(fd, busy.data(), busy.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      ::close(fd);
      continue;
    }
    auto conn = std::make_unique<Conn>();
    conn->fd = fd;
    Conn* c = conn.get();
    active_.fetch_add(1);
    std::lock_guard lock(mu_);
    conns_.push_back(std::move(conn));
    c->thread = std::thread([this, c] { Serve(c); });
  }
}

bool Server::SendAll(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n =
        ::send(fd, data.data(), data.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      data.remove_prefix(static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (Wait(fd, POLLOUT, stop_fd_, options_.idle_timeout_ms) <= 0) {
        return false;
      }
      continue;
    }
    return false;
  }
  return true;
}

void Server::Serve(Conn* conn) {
  const int fd = conn->fd;
  std::string in;
  char buf[4096];
  for (;;) {
    RequestParse p = ParseRequest(in, options_.max_request_bytes);
    if (p.state == ParseState::kDone) {
      in.erase(0, p.consumed);
      const WireReply r = HandleRequest(*registry_, p.request);
      if (!SendAll(fd, r.ok ? EncodeOk(r.text)
                            : EncodeError(r.errno_name, r.message))) {
        break;
      }
      continue;
    }
    if (p.state == ParseState::kMalformed) {
      // The framing is lost: answer, then hang up.
      SendAll(fd, EncodeError(p.errno_name, p.message));
      break;
    }
    const int w = Wait(fd, POLLIN, stop_fd_, options_.idle_timeout_ms);
    if (w == 0 && !in.empty()) {
      SendAll(fd, EncodeError("ETIMEDOUT", "request incomplete after " +
                                               std::to_string(options_.idle_timeout_ms) +
                                               " ms"));
    }
    if (w <= 0) break;
    const ssize_t n = ::recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
    if (n == 0) break;  // the client is done
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
      break;
    }
    in.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  active_.fetch_sub(1);
  conn->done.store(true);
}

// ---- client ----

constexpr int kClientTimeoutMs = 120'000;

}  // namespace

Result<std::unique_ptr<ControlServer>> ControlServer::Start(
    const std::string& path, DeviceRegistry* registry) {
  return Start(path, registry, ControlServerOptions());
}

Result<std::unique_ptr<ControlServer>> ControlServer::Start(
    const std::string& path, DeviceRegistry* registry,
    const ControlServerOptions& options) {
  assert(registry != nullptr);
  auto server = std::make_unique<Server>(path, registry, options);
  ZT_RETURN_IF_ERROR(server->Init());
  return std::unique_ptr<ControlServer>(std::move(server));
}

Result<int> Connect(const std::string& socket_path) {
  sockaddr_un addr;
  ZT_RETURN_IF_ERROR(MakeAddress(socket_path, &addr));
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Err(PosixError("socket", errno));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    const int err = errno;
    ::close(fd);
    return Err(PosixError("connect " + socket_path, err));
  }
  return fd;
}

Result<WireReply> Exchange(int fd, const WireRequest& request) {
  const std::string out = EncodeRequest(request);
  std::string_view rest = out;
  while (!rest.empty()) {
    const ssize_t n = ::send(fd, rest.data(), rest.size(), MSG_NOSIGNAL);
    if (n > 0) {
      rest.remove_prefix(static_cast<std::size_t>(n));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      // The server hung up early (e.g. an oversized request): its reply
      // may still be waiting to be read.
      break;
    }
  }
  std::string in;
  char buf[4096];
  for (;;) {
    ReplyParse p = ParseReply(in);
    if (p.state == ParseState::kDone) return std::move(p.reply);
    if (p.state == ParseState::kMalformed) {
      return Err(Status::Corruption("control reply: " + p.message));
    }
    pollfd pfd = {fd, POLLIN, 0};
    const int w = ::poll(&pfd, 1, kClientTimeoutMs);
    if (w < 0 && errno == EINTR) continue;
    if (w == 0) return Err(Status::IoError("control reply: timed out"));
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Err(PosixError("control reply: recv", errno));
    if (n == 0) {
      return Err(Status::IoError("control reply: server closed the connection"));
    }
    in.append(buf, static_cast<std::size_t>(n));
  }
}

Result<WireReply> Call(const std::string& socket_path,
                       const WireRequest& request) {
  ZT_ASSIGN_OR_RETURN(const int fd, Connect(socket_path));
  auto reply = Exchange(fd, request);
  ::close(fd);
  return reply;
}

StatusCode StatusCodeFromErrnoName(std::string_view name) {
  if (name == "EINVAL" || name == "E2BIG") return StatusCode::kInvalidArgument;
  if (name == "ENOENT" || name == "ENODEV") return StatusCode::kNotFound;
  if (name == "ENOMEM" || name == "ENOSPC") {
    return StatusCode::kResourceExhausted;
  }
  if (name == "EBUSY") return StatusCode::kBusy;
  if (name == "ERANGE") return StatusCode::kOutOfRange;
  if (name == "EOPNOTSUPP") return StatusCode::kUnsupported;
  if (name == "EACCES" || name == "EPERM") return StatusCode::kPermissionDenied;
  return StatusCode::kIoError;
}

Result<std::string> Request(const std::string& socket_path,
                            const std::string& device,
                            const std::string& attribute,
                            const std::string* value) {
  WireRequest req;
  req.device = device;
  req.attribute = attribute;
  if (value != nullptr) req.value = *value;
  ZT_ASSIGN_OR_RETURN(WireReply reply, Call(socket_path, req));
  if (!reply.ok) {
    return Err(Status(StatusCodeFromErrnoName(reply.errno_name),
                      reply.errno_name + ": " + reply.message));
  }
  return std::move(reply.text);
}

}  // namespace ztier::ctl
