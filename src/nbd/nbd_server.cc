// nbd_server.cc: listening sockets, the accept loop, and the set of live
// connections (contract in nbd_server.h).
#include "nbd/nbd_server.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <list>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "connection.h"
#include "handshake.h"
#include "nbd/transport.h"
#include "platform/event_fd.h"
#include "platform/socket.h"
#include "work_queue.h"

namespace ztier::nbd {
namespace {

// How often a stopping server asks its connections again whether their
// clients have read their replies (Connection::BeginStop).
constexpr std::chrono::milliseconds kStopPoll{5};

constexpr int kRefuseTimeoutMs = 1000;

class NbdServerImpl final : public NbdServer {
 public:
  NbdServerImpl(const NbdServerOptions& options, DeviceRegistry* registry)
      : options_(options), registry_(registry) {}
  ~NbdServerImpl() override { Stop(); }

  Status Init() {
    ZT_ASSIGN_OR_RETURN(wake_, platform::EventFd::Create());
    if (options_.unix_path.empty() && options_.listen.empty()) {
      return Status::InvalidArgument("no Unix socket path and no TCP address");
    }
    if (!options_.unix_path.empty()) {
      ZT_ASSIGN_OR_RETURN(unix_, platform::Listener::Unix(options_.unix_path));
    }
    if (!options_.listen.empty()) {
      ZT_ASSIGN_OR_RETURN(
          tcp_, options_.listen_addresses.has_value()
                    ? platform::Listener::TcpAll(*options_.listen_addresses)
                    : platform::Listener::TcpAll(options_.listen));
    }
    limits_.max_request_bytes = options_.max_request_bytes;
    limits_.inline_max_bytes = options_.inline_max_bytes;
    limits_.max_in_flight = std::max<std::size_t>(1, options_.max_in_flight);
    limits_.max_in_flight_bytes = options_.max_in_flight_bytes;
    limits_.handshake_timeout_ms = options_.handshake_timeout_ms;
    limits_.io_timeout_ms = options_.io_timeout_ms;
    limits_.tls = options_.tls;
    limits_.tls_required = options_.tls_required;
    if (options_.preallocate) limits_.prealloc_job_bytes = 64 << 10;
    limits_.log = options_.log;
    limits_.counters = &counters_;
    limits_.server_stopping = &stopped_;
    std::size_t workers = options_.workers;
    if (workers == 0) workers = std::max(1u, std::thread::hardware_concurrency());
    queue_ =
        std::make_unique<WorkQueue>(workers, Connection::Run, options_.log);
    accept_thread_ = std::thread([this] { AcceptLoop(); });
    refuse_thread_ = std::thread([this] { RefuseLoop(); });
    return Status::Ok();
  }

  void Stop() override {
    if (stopped_.exchange(true)) return;
    if (accept_thread_.joinable()) {
      Wake();
      accept_thread_.join();
    }
    if (refuse_thread_.joinable()) {
      {
        std::lock_guard l(refuse_mu_);
        refuse_stop_ = true;
        for (int fd : refusing_) ::shutdown(fd, SHUT_RDWR);
      }
      refuse_cv_.notify_all();
      refuse_thread_.join();
    }
    unix_.Close();  // and removes the socket file, if still ours
    tcp_.clear();
    // No accept thread: the list only shrinks here. The soft stop first
    // (Connection::BeginStop: replies to the requests in flight, options
    // answered NBD_REP_ERR_SHUTDOWN), for at most kStopGrace; then the
    // hard one for the connections left (a client that takes no replies, or
    // says nothing in its handshake).
    {
      std::unique_lock l(mu_);
      for (auto& c : conns_) c->BeginStop();
      if (active_.load() > 0) {
        if (options_.log) {
          options_.log("nbd: stopping: " + std::to_string(active_.load()) +
                       " connection(s) get up to " +
                       std::to_string(kStopGrace.count()) + " ms to finish");
        }
        // Meanwhile each connection is asked again, every kStopPoll, whether
        // its client has read its replies (Connection::BeginStop).
        const auto deadline = std::chrono::steady_clock::now() + kStopGrace;
        while (!exit_cv_.wait_until(
            l, std::min(deadline, std::chrono::steady_clock::now() + kStopPoll),
            [this] { return active_.load() == 0; })) {
          if (std::chrono::steady_clock::now() >= deadline) break;
          for (auto& c : conns_) c->BeginStop();
        }
      }
    }
    std::list<std::unique_ptr<Connection>> conns;
    {
      std::lock_guard l(mu_);
      conns.swap(conns_);
      done_.clear();
    }
    for (auto& c : conns) c->Shutdown();
    for (auto& c : conns) c->Join();
    conns.clear();
    queue_.reset();
    wake_ = platform::EventFd();
  }

  int tcp_port() const override {
    return tcp_.empty() ? 0 : tcp_.front().port();
  }
  std::size_t connections() const override { return active_.load(); }
  const NbdServerCounters& counters() const override { return counters_; }

 private:
  void Wake() { wake_.Signal(); }

  void AcceptLoop() {
    // The listeners stay as they are while this thread runs (Stop joins it
    // before closing them): the poll set is made once, and each poll
    // rewrites its revents.
    std::vector<struct pollfd> fds;
    std::vector<const platform::Listener*> listeners = {nullptr};
    fds.push_back({wake_.fd(), POLLIN, 0});
    const auto listen = [&](const platform::Listener& l) {
      if (l.fd() < 0) return;
      listeners.push_back(&l);
      fds.push_back({l.fd(), POLLIN, 0});
    };
    listen(unix_);
    for (const platform::Listener& l : tcp_) listen(l);
    for (;;) {
      if (::poll(fds.data(), fds.size(), -1) < 0) {
        if (errno == EINTR) continue;
        std::perror("ztier nbd: poll");
        return;
      }
      if (fds[0].revents != 0) {
        wake_.Drain();
        if (stopped_.load()) return;
        Reap();
      }
      for (std::size_t i = 1; i < fds.size(); ++i) {
        if ((fds[i].revents & POLLIN) != 0) Accept(*listeners[i]);
      }
    }
  }

  void Accept(const platform::Listener& listener) {
    Result<int> accepted = listener.Accept(/*nonblocking=*/false);
    // The client left (kBusy), ECONNABORTED: try again. Out of file
    // descriptors (EMFILE, ENFILE): the connection waits in the backlog and
    // the listener stays readable, so back off a little rather than spin
    // (as the control server does).
    if (!accepted.has_value()) {
      if (accepted.error().code() == StatusCode::kResourceExhausted) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      return;
    }
    const int fd = *accepted;
    const bool tcp = listener.tcp();
    counters_.connections_accepted.fetch_add(1, std::memory_order_relaxed);
    const std::string name = "#" + std::to_string(++accepted_) + " (" +
                             platform::PeerName(fd, tcp) + ")";
    if (active_.load() >= options_.max_connections) {
      if (options_.log) {
        options_.log("warning: nbd " + name +
                     ": refused: " + std::to_string(options_.max_connections) +
                     " connections already (--max-connections)");
      }
      counters_.connections_refused.fetch_add(1, std::memory_order_relaxed);
      Refuse(fd);
      return;
    }
    if (tcp) {
      platform::SetNoDelay(fd);
      platform::SetKeepAlive(fd);
    }
    ++active_;
    if (options_.log) options_.log("nbd " + name + ": connected");
    auto conn = std::make_unique<Connection>(
        fd, registry_, queue_.get(), limits_,
        [this](Connection* c) { OnExit(c); }, name);
    Connection* raw = conn.get();
    {
      std::lock_guard l(mu_);
      conns_.push_back(std::move(conn));
    }
    if (!raw->Start()) {
      if (options_.log) {
        options_.log("warning: nbd " + name +
                     ": dropped: no thread could be started "
                     "for it");
      }
      std::lock_guard l(mu_);
      std::erase_if(conns_, [raw](const auto& c) { return c.get() == raw; });
      --active_;
    }
  }

  // Hands `fd` to the refusal thread, or closes it if too many wait.
  void Refuse(int fd) {
    {
      std::lock_guard l(refuse_mu_);
      if (refusing_.size() < kMaxRefusing) {
        refusing_.push_back(fd);
        refuse_cv_.notify_one();
        return;
      }
    }
    ::close(fd);
  }

  void RefuseLoop() {
    const std::string message =
        "ztier: too many connections (the limit is " +
        std::to_string(options_.max_connections) + "); try again later";
    std::unique_lock l(refuse_mu_);
    for (;;) {
      refuse_cv_.wait(l, [this] { return refuse_stop_ || !refusing_.empty(); });
      if (refusing_.empty()) return;
      const int fd = refusing_.front();
      const bool stopping = refuse_stop_;
      l.unlock();
      if (!stopping) {
        std::unique_ptr<Transport> t = NewPlainTransport(fd);
        RefuseHandshake(t.get(), message, kRefuseTimeoutMs);
      }
      l.lock();
      refusing_.pop_front();
      ::close(fd);
    }
  }

  // Called on a connection's own thread as it ends.
  void OnExit(Connection* c) {
    {
      std::lock_guard l(mu_);
      done_.push_back(c);
      --active_;
    }
    exit_cv_.notify_all();  // a Stop() waiting for the connections
    Wake();
  }

  // Joins and deletes the connections that have ended.
  void Reap() {
    std::vector<Connection*> done;
    {
      std::lock_guard l(mu_);
      done.swap(done_);
    }
    for (Connection* c : done) c->Join();
    std::lock_guard l(mu_);
    for (Connection* c : done) {
      conns_.remove_if([c](const auto& p) { return p.get() == c; });
    }
  }

  const NbdServerOptions options_;
  DeviceRegistry* const registry_;
  ConnectionLimits limits_;
  platform::EventFd wake_;
  platform::Listener unix_;
  std::vector<platform::Listener> tcp_;  // each address of listen
  std::unique_ptr<WorkQueue> queue_;
  std::thread accept_thread_;
  std::thread refuse_thread_;
  std::mutex refuse_mu_;
  std::condition_variable refuse_cv_;
  std::deque<int> refusing_;  // guarded by refuse_mu_; front is in progress
  bool refuse_stop_ = false;  // guarded by refuse_mu_
  std::atomic<bool> stopped_{false};
  std::atomic<std::size_t> active_{0};
  std::uint64_t accepted_ = 0;  // accept thread only: connections numbered
  NbdServerCounters counters_;  // updated by the connections, lock-free
  std::mutex mu_;
  std::list<std::unique_ptr<Connection>> conns_;  // guarded by mu_
  std::condition_variable exit_cv_;               // a connection ended (OnExit)
  std::vector<Connection*> done_;                 // guarded by mu_
};

}  // namespace

Result<std::unique_ptr<NbdServer>> NbdServer::Start(
    const NbdServerOptions& options, DeviceRegistry* registry) {
  auto server = std::make_unique<NbdServerImpl>(options, registry);
  ZT_RETURN_IF_ERROR(server->Init());
  return std::unique_ptr<NbdServer>(std::move(server));
}

}  // namespace ztier::nbd
