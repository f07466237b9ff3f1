// control_server.cc: the control socket server (contract in
// control_server.h; wire format in protocol.h and docs/control_protocol.md).
//
// Threads: one accept thread, one thread per connection. Every blocking wait
// is a poll() on the connection (or listening) fd plus stop_, an eventfd
// that Stop() makes readable once and forever, so Stop() wakes everything
// without signals. Connection threads are joined by the accept thread once
// they finish (Reap) and by Stop() at the end.
#include "ctl/control_server.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cassert>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <list>
#include <mutex>
#include <new>
#include <system_error>
#include <thread>

#include "ctl/attributes.h"
#include "platform/event_fd.h"
#include "platform/socket.h"

namespace ztier::ctl {
namespace {

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
  // A connection waits for a request or for its client to take a reply
  // (kWaiting), is working on a request (kBusy), was shut down by the
  // accept thread to make room (kEvicted), or is closing its fd (kClosing:
  // Evict must not touch the number then).
  enum class State { kWaiting, kBusy, kEvicted, kClosing };
  struct Conn {
    int fd = -1;
    std::thread thread;
    std::atomic<bool> done{false};
    std::atomic<State> state{State::kWaiting};
    // kWaiting for the client to take a reply (SendAll), not for a request.
    std::atomic<bool> sending{false};
    std::atomic<bool> released{false};  // its slot given back to active_
  };

  void AcceptLoop();
  void Serve(Conn* conn);
  void ServeRequests(Conn* conn);
  bool Evict();
  void Release(Conn* conn);
  bool SendAll(Conn* conn, std::string_view data);
  void Reap();

  const std::string path_;
  DeviceRegistry* const registry_;
  const ControlServerOptions options_;
  platform::Listener listener_;
  platform::EventFd stop_;  // signalled once, never drained: Stop()
  bool stopped_ = false;
  std::thread accept_thread_;
  std::atomic<std::size_t> active_{0};
  std::mutex mu_;                               // guards conns_
  std::list<std::unique_ptr<Conn>> conns_;
};

Status Server::Init() {
  ZT_ASSIGN_OR_RETURN(stop_, platform::EventFd::Create());
  ZT_ASSIGN_OR_RETURN(listener_, platform::Listener::Unix(path_));
  accept_thread_ = std::thread([this] { AcceptLoop(); });
  return Status::Ok();
}

void Server::Stop() {
  if (stopped_) return;
  stopped_ = true;
  if (stop_.fd() >= 0) stop_.Signal();
  if (accept_thread_.joinable()) accept_thread_.join();
  std::list<std::unique_ptr<Conn>> conns;
  {
    std::lock_guard lock(mu_);
    conns.swap(conns_);
  }
  for (auto& c : conns) c->thread.join();
  listener_.Close();  // and removes the socket file, if still ours
  stop_ = platform::EventFd();
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
    if (Wait(listener_.fd(), POLLIN, stop_.fd(), -1) < 0) return;
    // Non-blocking: every wait on a connection is Wait()'s poll.
    Result<int> accepted = listener_.Accept(/*nonblocking=*/true);
    if (!accepted.has_value()) {
      // kBusy (the client left), ECONNABORTED; out of fds: back off.
      if (accepted.error().code() == StatusCode::kResourceExhausted) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      continue;
    }
    const int fd = *accepted;
    Reap();
    // Best effort: the client may already be gone.
    const auto refuse = [fd](const char* code, const std::string& why) {
      const std::string reply = EncodeError(code, why);
      [[maybe_unused]] const Result<std::size_t> sent =
          platform::Send(fd, reply.data(), reply.size(), /*dontwait=*/true);
      ::close(fd);
    };
    if (active_.load() >= options_.max_connections && !Evict()) {
      refuse("EBUSY", "too many control connections (" +
                          std::to_string(options_.max_connections) + ")");
      continue;
    }
    auto conn = std::make_unique<Conn>();
    conn->fd = fd;
    Conn* c = conn.get();
    active_.fetch_add(1);
    std::lock_guard lock(mu_);
    conns_.push_back(std::move(conn));
    try {
      c->thread = std::thread([this, c] { Serve(c); });
    } catch (const std::system_error&) {
      // No thread to be had (pthread_create's EAGAIN: a task or memory
      // limit): refuse this client rather than end the process, and every
      // device with it.
      conns_.pop_back();
      active_.fetch_sub(1);
      refuse("ENOMEM", "the server cannot start a thread for this "
                       "connection now; try again");
    }
  }
}

// Full: the oldest connection waiting for (the rest of) a request, or for
// its client to take a reply, gives its place to the new one, so that idle,
// trickling or slow-reading clients cannot keep every other client out;
// one working on a request keeps its place. One waiting for a request goes
// before one waiting to send a reply, whose client may be reading a long
// one (ztier status) as fast as it comes. False when every connection is
// working on one.
bool Server::Evict() {
  std::lock_guard lock(mu_);
  for (const bool sending : {false, true}) {
    for (const auto& c : conns_) {
      if (c->done.load() || c->sending.load() != sending) continue;
      State waiting = State::kWaiting;
      if (!c->state.compare_exchange_strong(waiting, State::kEvicted)) {
        continue;
      }
      // Wakes its poll; its recv then sees the end (the fd stays open
      // until its own thread closes it).
      ::shutdown(c->fd, SHUT_RDWR);
      Release(c.get());
      return true;
    }
  }
  return false;
}

void Server::Release(Conn* conn) {
  if (!conn->released.exchange(true)) active_.fetch_sub(1);
}

bool Server::SendAll(Conn* conn, std::string_view data) {
  const int fd = conn->fd;
  while (!data.empty()) {
    const Result<std::size_t> n =
        platform::Send(fd, data.data(), data.size(), /*dontwait=*/true);
    if (n.has_value() && *n > 0) {
      data.remove_prefix(*n);
      continue;
    }
    if (!n.has_value() && n.error().code() == StatusCode::kBusy) {
      // Waiting for the client to take its reply is waiting on the client,
      // not working for it: meanwhile a new connection over the cap may
      // take this one's place (Evict), as it may a trickling request's.
      // Else a client that pipelines requests and reads their replies just
      // fast enough to beat the timeout would hold its place for good.
      conn->sending.store(true);
      State busy = State::kBusy;
      const bool was_busy =
          conn->state.compare_exchange_strong(busy, State::kWaiting);
      const int w = Wait(fd, POLLOUT, stop_.fd(), options_.idle_timeout_ms);
      if (was_busy) {
        State waiting = State::kWaiting;
        if (!conn->state.compare_exchange_strong(waiting, State::kBusy)) {
          return false;  // evicted
        }
      }
      conn->sending.store(false);
      if (w <= 0) return false;
      continue;
    }
    return false;
  }
  return true;
}

void Server::Serve(Conn* conn) {
  const int fd = conn->fd;
  try {
    ServeRequests(conn);
  } catch (const std::bad_alloc&) {
    // Out of memory for a request or its reply: answer if that still can
    // be done and hang up; the server, and every device, goes on.
    try {
      SendAll(conn, EncodeError("ENOMEM",
                              "the server is out of memory now; "
                              "try again"));
    } catch (const std::bad_alloc&) {
    }
  }
  {
    std::lock_guard lock(mu_);  // after any Evict() that shuts fd down
    conn->state.store(State::kClosing);
  }
  ::close(fd);
  Release(conn);
  conn->done.store(true);
}

void Server::ServeRequests(Conn* conn) {
  const int fd = conn->fd;
  using Clock = std::chrono::steady_clock;
  std::string in;
  Clock::time_point started;  // when the request in `in` had its first byte
  char buf[4096];
  for (;;) {
    RequestParse p = ParseRequest(in, options_.max_request_bytes);
    if (p.state == ParseState::kDone) {
      // Answering: no longer a connection a new one may take the place of.
      State waiting = State::kWaiting;
      if (!conn->state.compare_exchange_strong(waiting, State::kBusy)) {
        return;  // evicted
      }
      in.erase(0, p.consumed);
      const WireReply r = HandleRequest(*registry_, p.request);
      if (!SendAll(conn, r.ok ? EncodeOk(r.text)
                            : EncodeError(r.errno_name, r.message))) {
        return;
      }
      // What follows in `in` (the start of the next request, sent while
      // this one was worked on or answered) has its idle_timeout_ms from
      // now, when the server is first ready to read it: a long store (a
      // writeback) must not time out the request queued behind it.
      started = Clock::now();
      conn->state.store(State::kWaiting);
      continue;
    }
    if (p.state == ParseState::kMalformed) {
      // The framing is lost: answer, then hang up.
      SendAll(conn, EncodeError(p.errno_name, p.message));
      return;
    }
    // An idle connection may wait idle_timeout_ms for its next request; a
    // request begun must be whole within idle_timeout_ms of its first byte.
    int timeout = options_.idle_timeout_ms;
    if (!in.empty()) {
      const auto spent = std::chrono::duration_cast<std::chrono::milliseconds>(
                             Clock::now() - started)
                             .count();
      timeout = static_cast<int>(
          std::clamp<std::int64_t>(timeout - spent, 0, timeout));
    }
    const int w = Wait(fd, POLLIN, stop_.fd(), timeout);
    if (w == 0 && !in.empty()) {
      SendAll(conn, EncodeError("ETIMEDOUT",
                              "request incomplete after " +
                                  std::to_string(options_.idle_timeout_ms) +
                                  " ms"));
    }
    if (w <= 0) return;
    const Result<std::size_t> n = platform::Receive(fd, buf, sizeof(buf));
    if (!n.has_value() && n.error().code() == StatusCode::kBusy) continue;
    if (!n.has_value()) return;
    if (*n == 0) {
      // The client is done; one that stopped inside a request may still
      // read why it is not answered.
      if (!in.empty()) {
        SendAll(conn,
                EncodeError("EINVAL",
                            "request truncated: the connection ended "
                            "after " +
                                std::to_string(in.size()) + " bytes of it"));
      }
      return;
    }
    if (in.empty()) started = Clock::now();
    in.append(buf, *n);
  }
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

Result<int> Connect(const std::string& socket_path, int timeout_ms) {
  return platform::ConnectUnix(socket_path, timeout_ms);
}

Result<WireReply> Exchange(int fd, const WireRequest& request) {
  const std::string out = EncodeRequest(request);
  std::string_view rest = out;
  while (!rest.empty()) {
    const Result<std::size_t> n =
        platform::Send(fd, rest.data(), rest.size(), /*dontwait=*/false);
    if (n.has_value() && *n > 0) {
      rest.remove_prefix(*n);
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
      return Err(Status::Corruption(
          "control reply: " + p.message +
          " (is it a ztier control socket, not the NBD one?)"));
    }
    pollfd pfd = {fd, POLLIN, 0};
    const int w =
        ::poll(&pfd, 1, request.value.has_value() ? -1 : kClientTimeoutMs);
    if (w < 0 && errno == EINTR) continue;
    if (w == 0) return Err(Status::IoError("control reply: timed out"));
    const Result<std::size_t> n = platform::Receive(fd, buf, sizeof(buf));
    if (!n.has_value()) {
      return Err(Annotate("control reply", n.error()));
    }
    if (*n == 0) {
      return Err(Status::IoError("control reply: server closed the connection"));
    }
    in.append(buf, *n);
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
  // Any errno a server names (ErrnoNameOf: a backing file's EROFS or
  // EMFILE, too), read back through the one errno map.
  return StatusCodeForErrno(ErrnoByName(name));
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
    // The errno kept (ErrnoNameOf): ENOSPC, not kResourceExhausted's ENOMEM.
    return Err(StatusWithErrno(StatusCodeFromErrnoName(reply.errno_name),
                               reply.errno_name + ": " + reply.message,
                               ErrnoByName(reply.errno_name)));
  }
  return std::move(reply.text);
}

}  // namespace ztier::ctl
