// metrics_server.cc: the HTTP server of metrics_server.h: one thread, one
// poll() over the listening sockets and the clients' non-blocking sockets.
//
// A client moves through three states:
//   reading  -- bytes gather until the blank line ending the headers
//               (RFC 9112 section 2.2; a bare LF ends a line too), capped at
//               max_request_bytes;
//   writing  -- the whole reply, built at once, is sent as the socket takes
//               it;
//   draining -- after the reply, our side is shut down and what the client
//               still sends is read and dropped until it closes, so that
//               closing does not turn into a reset that could destroy the
//               reply before the client read it (RFC 9112 section 9.6).
// Each state has a deadline; past it the connection is closed.
#include "ctl/metrics_server.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <list>
#include <new>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "metrics.h"
#include "platform/clock.h"
#include "platform/event_fd.h"
#include "platform/socket.h"

namespace ztier::ctl {
namespace {

using Clock = platform::MonotonicClock;

constexpr int kDrainTimeoutMs = 1000;
// A client being answered whose socket has taken none of its reply for this
// long has stopped reading it (one reading it, however slowly, frees room
// within moments: a full socket alone says nothing).
constexpr auto kStalledAfter = std::chrono::milliseconds(1000);

struct Client {
  enum class State { kReading, kWriting, kDraining };
  int fd = -1;
  State state = State::kReading;
  Clock::time_point deadline;
  std::string in;
  std::string out;
  std::size_t sent = 0;
  // kWriting: when the socket last took some of the reply (or it was made).
  Clock::time_point progress;
};

struct HttpReply {
  int code = 200;
  std::string_view reason = "OK";
  std::string body;
  bool head = false;   // HEAD: headers only
  bool allow = false;  // 405: add "Allow"
};

HttpReply Error(int code, std::string_view reason, std::string_view message) {
  HttpReply r;
  r.code = code;
  r.reason = reason;
  r.body = std::string(message) + "\n";
  return r;
}

std::string Serialize(const HttpReply& r) {
  std::string out = "HTTP/1.1 " + std::to_string(r.code) + " " +
                    std::string(r.reason) + "\r\n";
  out += "Content-Type: ";
  out += r.code == 200 ? kMetricsContentType : "text/plain; charset=utf-8";
  out += "\r\nContent-Length: " + std::to_string(r.body.size()) + "\r\n";
  if (r.allow) out += "Allow: GET, HEAD\r\n";
  out += "Connection: close\r\n\r\n";
  if (!r.head) out += r.body;
  return out;
}

// RFC 9110 section 5.6.2: token characters.
bool IsTchar(char c) {
  if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
      (c >= 'A' && c <= 'Z')) {
    return true;
  }
  return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

bool IsToken(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), IsTchar);
}

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const auto lower = [](char c) {
      return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
    };
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

// Where the headers of `in` end (just past the blank line), or npos.
std::size_t HeadEnd(std::string_view in) {
  for (std::size_t i = in.find('\n'); i != std::string_view::npos;
       i = in.find('\n', i + 1)) {
    if (i + 1 < in.size() && in[i + 1] == '\n') return i + 2;
    if (i + 2 < in.size() && in[i + 1] == '\r' && in[i + 2] == '\n') {
      return i + 3;
    }
  }
  return std::string_view::npos;
}

// The reply to the request whose head (request line and headers, through
// the blank line) is `head`.
HttpReply Answer(std::string_view head, const DeviceRegistry& registry,
                 const nbd::NbdServer* nbd) {
  std::vector<std::string_view> lines;
  while (!head.empty()) {
    std::size_t nl = head.find('\n');
    std::string_view line = head.substr(0, nl);
    head.remove_prefix(nl + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) break;  // the blank line
    lines.push_back(line);
  }
  if (lines.empty()) return Error(400, "Bad Request", "no request line");

  // request-line = method SP request-target SP HTTP-version
  const std::string_view request_line = lines[0];
  const std::size_t sp1 = request_line.find(' ');
  const std::size_t sp2 =
      sp1 == std::string_view::npos ? sp1 : request_line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos ||
      request_line.find(' ', sp2 + 1) != std::string_view::npos) {
    return Error(400, "Bad Request", "malformed request line");
  }
  const std::string_view method = request_line.substr(0, sp1);
  std::string_view target = request_line.substr(sp1 + 1, sp2 - sp1 - 1);
  const std::string_view version = request_line.substr(sp2 + 1);
  if (!IsToken(method)) return Error(400, "Bad Request", "malformed method");
  if (version != "HTTP/1.1" && version != "HTTP/1.0") {
    return Error(400, "Bad Request", "unsupported HTTP version");
  }
  for (char c : target) {
    if (static_cast<unsigned char>(c) <= ' ' || c == 0x7f) {
      return Error(400, "Bad Request", "malformed request target");
    }
  }
  bool host = false;
  for (std::size_t i = 1; i < lines.size(); ++i) {
    const std::size_t colon = lines[i].find(':');
    // No name, whitespace before the colon, or obs-fold: all rejected.
    if (colon == std::string_view::npos ||
        !IsToken(lines[i].substr(0, colon))) {
      return Error(400, "Bad Request", "malformed header line");
    }
    if (EqualsIgnoreCase(lines[i].substr(0, colon), "host")) host = true;
  }
  if (version == "HTTP/1.1" && !host) {
    return Error(400, "Bad Request", "HTTP/1.1 request without Host");
  }

  // absolute-form (RFC 9112 section 3.2.2): drop scheme and authority.
  for (std::string_view scheme : {"http://", "https://"}) {
    if (target.size() > scheme.size() &&
        EqualsIgnoreCase(target.substr(0, scheme.size()), scheme)) {
      const std::size_t slash = target.find('/', scheme.size());
      target = slash == std::string_view::npos ? std::string_view("/")
                                               : target.substr(slash);
    }
  }
  if (target.empty() || target.front() != '/') {
    return Error(400, "Bad Request", "malformed request target");
  }
  const std::string_view path = target.substr(0, target.find('?'));
  if (path != "/metrics") {
    return Error(404, "Not Found", "not found; the metrics are at /metrics");
  }
  const bool head_only = method == "HEAD";
  if (method != "GET" && !head_only) {
    HttpReply r = Error(405, "Method Not Allowed", "only GET and HEAD");
    r.allow = true;
    return r;
  }
  HttpReply r;
  r.body = RenderMetrics(registry, nbd);
  r.head = head_only;
  return r;
}

Status WithContext(const Status& s, const std::string& what) {
  return Annotate("metrics " + what, s);
}

class MetricsServerImpl final : public MetricsServer {
 public:
  MetricsServerImpl(const MetricsServerOptions& options,
                    const DeviceRegistry* registry, const nbd::NbdServer* nbd)
      : options_(options),
        registry_(registry),
        nbd_(nbd),
        max_clients_(std::max<std::size_t>(1, options.max_clients)) {}
  ~MetricsServerImpl() override { Stop(); }

  Status Init() {
    if (options_.listen.empty() && options_.unix_path.empty()) {
      return Status::InvalidArgument(
          "metrics: neither a TCP address nor a Unix socket path");
    }
    Result<platform::EventFd> wake = platform::EventFd::Create();
    if (!wake.has_value()) {
      return Annotate("metrics", wake.error());
    }
    wake_ = std::move(*wake);
    if (!options_.unix_path.empty()) {
      Result<platform::Listener> l = platform::Listener::Unix(options_.unix_path);
      if (!l.has_value()) {
        return WithContext(l.error(), "socket " + options_.unix_path);
      }
      unix_ = std::move(*l);
    }
    if (!options_.listen.empty()) {
      Result<std::vector<platform::Listener>> l =
          options_.listen_addresses.has_value()
              ? platform::Listener::TcpAll(*options_.listen_addresses)
              : platform::Listener::TcpAll(options_.listen);
      if (!l.has_value()) {
        return WithContext(l.error(),
                           "listen address '" + options_.listen + "'");
      }
      tcp_ = std::move(*l);
    }
    thread_ = std::thread([this] { Loop(); });
    return Status::Ok();
  }

  void Stop() override {
    if (thread_.joinable()) {
      stopping_.store(true);
      wake_.Signal();
      thread_.join();
    }
    for (Client& c : clients_) ::close(c.fd);
    clients_.clear();
    unix_.Close();  // and removes the socket file, if still ours
    tcp_.clear();
    wake_ = platform::EventFd();
  }

  int tcp_port() const override {
    return tcp_.empty() ? 0 : tcp_.front().port();
  }
  const std::string& unix_path() const override { return options_.unix_path; }
  std::size_t requests_served() const override { return served_.load(); }

 private:
  void Loop() {
    std::vector<struct pollfd> fds;
    for (;;) {
      fds.clear();
      fds.push_back({wake_.fd(), POLLIN, 0});
      // Full, a new client can still take the place of one that has not
      // sent its whole request yet, has had its whole reply, or has stopped
      // taking it (see Accept); not of one whose reply is flowing.
      const bool full = clients_.size() >= max_clients_ && !HasReplaceable();
      const bool paused = Clock::now() < accept_pause_until_;
      const bool room = !full && !paused;
      const std::size_t first_listen = fds.size();
      std::vector<const platform::Listener*> listening;
      const auto listen = [&](const platform::Listener& l) {
        if (!room || l.fd() < 0) return;
        listening.push_back(&l);
        fds.push_back({l.fd(), POLLIN, 0});
      };
      listen(unix_);
      for (const platform::Listener& l : tcp_) listen(l);
      const std::size_t first_client = fds.size();
      // Wake for the first deadline, or the end of an accept pause.
      Clock::time_point next =
          !full && paused ? accept_pause_until_ : Clock::time_point::max();
      for (const Client& c : clients_) {
        const short events =
            c.state == Client::State::kWriting ? POLLOUT : POLLIN;
        fds.push_back({c.fd, events, 0});
        next = std::min(next, c.deadline);
        // Full, a reply that stops flowing makes room then.
        if (full && c.state == Client::State::kWriting) {
          next = std::min(next, c.progress + kStalledAfter);
        }
      }
      int timeout = -1;
      if (next != Clock::time_point::max()) {
        const auto ms =
            std::chrono::ceil<std::chrono::milliseconds>(next - Clock::now())
                .count();
        timeout = static_cast<int>(std::clamp<std::int64_t>(ms, 0, 60'000));
      }
      if (::poll(fds.data(), fds.size(), timeout) < 0) {
        // EINTR, or ENOMEM (poll's only failure that a correct caller can
        // meet): try again, after a pause for the latter, rather than leave
        // the listening sockets open with nobody answering them.
        if (errno != EINTR) {
          std::perror("ztier metrics: poll (retrying)");
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
        continue;
      }
      if (stopping_.load()) return;
      // Clients first: the list grows only below, so fds[] still matches.
      auto it = clients_.begin();
      for (std::size_t i = first_client; i < fds.size(); ++i, ++it) {
        Client& c = *it;
        if (fds[i].revents != 0) Step(c);
        if (c.fd >= 0 && Clock::now() >= c.deadline) {
          ::close(c.fd);
          c.fd = -1;
        }
      }
      clients_.remove_if([](const Client& c) { return c.fd < 0; });
      for (std::size_t i = first_listen; i < first_client; ++i) {
        if ((fds[i].revents & POLLIN) != 0) Accept(*listening[i - first_listen]);
      }
      if (fds[0].revents != 0) {
        wake_.Drain();
      }
    }
  }

  static bool Reading(const Client& c) {
    return c.state == Client::State::kReading;
  }
  static bool Draining(const Client& c) {
    return c.state == Client::State::kDraining;
  }
  // A client being answered that has stopped taking its reply is waiting
  // on nothing the server does, as one that has not sent its request: else
  // max_clients that send a request and never read would keep every
  // scraper in the backlog for their write_timeout_ms.
  static bool Stalled(const Client& c) {
    return c.state == Client::State::kWriting &&
           Clock::now() - c.progress >= kStalledAfter;
  }
  static bool Replaceable(const Client& c) {
    return c.state != Client::State::kWriting || Stalled(c);
  }
  bool HasReplaceable() const {
    return std::any_of(clients_.begin(), clients_.end(), Replaceable);
  }
  // The oldest client still short of its whole request, after taking in
  // what the reading ones have sent by now (a scraper sends its request as
  // soon as it connects, and is then being answered); clients_.end() when
  // there is none.
  std::list<Client>::iterator OldestReading() {
    for (Client& c : clients_) {
      if (c.state == Client::State::kReading) Step(c);
    }
    clients_.remove_if([](const Client& c) { return c.fd < 0; });
    return std::find_if(clients_.begin(), clients_.end(), Reading);
  }
  // Else the oldest that has had its whole reply and is only waiting for
  // the client to close (after what it sent meanwhile is read, so that our
  // close does not reset the connection under the reply); else the oldest
  // whose client has stopped taking its reply (after the socket is offered
  // the rest once more).
  std::list<Client>::iterator OldestReplaceable() {
    auto victim = OldestReading();
    if (victim != clients_.end()) return victim;
    for (Client& c : clients_) {
      if (c.state == Client::State::kDraining) Drain(c);
    }
    clients_.remove_if([](const Client& c) { return c.fd < 0; });
    victim = std::find_if(clients_.begin(), clients_.end(), Draining);
    if (victim != clients_.end()) return victim;
    for (Client& c : clients_) {
      if (Stalled(c)) Write(c);
    }
    clients_.remove_if([](const Client& c) { return c.fd < 0; });
    return std::find_if(clients_.begin(), clients_.end(), Replaceable);
  }

  // Accepts every waiting connection. Over max_clients, each new one takes
  // the place of the oldest client that has not sent its whole request,
  // which is closed with no reply: idle or trickling connections cannot keep
  // a scraper out for their read_timeout_ms; failing that, of the oldest
  // that has had its whole reply but not closed: clients that never close
  // cannot keep it out for the drain timeout; failing that, of the oldest
  // that has stopped taking its reply (closed with the reply cut short):
  // clients that never read cannot keep it out for the write timeout.
  // Clients whose replies are flowing keep their place; when all do, new
  // ones wait in the listen backlog.
  void Accept(const platform::Listener& listener) {
    for (;;) {
      auto victim = clients_.end();
      if (clients_.size() >= max_clients_) {
        victim = OldestReplaceable();
        if (clients_.size() >= max_clients_ && victim == clients_.end()) {
          return;
        }
      }
      Result<int> fd = listener.Accept(/*nonblocking=*/true);
      if (!fd.has_value()) {
        // Out of fds or memory: wait a little rather than spin on a
        // listening socket that stays readable. Anything else (none
        // waiting: kBusy): poll again.
        if (fd.error().code() == StatusCode::kResourceExhausted) {
          accept_pause_until_ = Clock::now() + std::chrono::milliseconds(100);
        }
        return;
      }
      if (clients_.size() >= max_clients_) {
        ::close(victim->fd);
        clients_.erase(victim);
      }
      Client c;
      c.fd = *fd;
      c.deadline =
          Clock::now() + std::chrono::milliseconds(options_.read_timeout_ms);
      clients_.push_back(std::move(c));
    }
  }

  // Advances `c` as far as its socket allows; closes it (fd -1) when done.
  void Step(Client& c) {
    switch (c.state) {
      case Client::State::kReading:
        return Read(c);
      case Client::State::kWriting:
        return Write(c);
      case Client::State::kDraining:
        return Drain(c);
    }
  }

  void Read(Client& c) {
    const std::size_t cap = options_.max_request_bytes;
    char buf[4096];
    for (;;) {
      const std::size_t want = std::min(sizeof(buf), cap + 1 - c.in.size());
      const Result<std::size_t> r = platform::Receive(c.fd, buf, want);
      if (!r.has_value() && r.error().code() == StatusCode::kBusy) return;
      if (!r.has_value() || *r == 0) {
        // The client closed (or failed) before its request was complete:
        // nobody may be left to read a reply.
        ::close(c.fd);
        c.fd = -1;
        return;
      }
      const std::size_t old = c.in.size();
      c.in.append(buf, *r);
      // Only the new bytes (and the two before them) can complete the head.
      const std::size_t from = old < 2 ? 0 : old - 2;
      const std::size_t end = HeadEnd(std::string_view(c.in).substr(from));
      if (end != std::string_view::npos) {
        HttpReply reply;
        try {
          reply = Answer(std::string_view(c.in).substr(0, from + end),
                         *registry_, nbd_);
        } catch (const std::bad_alloc&) {
          // Out of memory for the page: the server, and every device,
          // goes on.
          reply = Error(503, "Service Unavailable",
                        "the server is out of memory now; try again");
        }
        // No body in any reply to HEAD (RFC 9110 section 9.3.2).
        if (c.in.starts_with("HEAD ")) reply.head = true;
        return Reply(c, reply);
      }
      if (c.in.size() > cap) {
        return Reply(
            c, Error(431, "Request Header Fields Too Large",
                     "request headers over " + std::to_string(cap) + " bytes"));
      }
    }
  }

  void Reply(Client& c, const HttpReply& reply) {
    c.out = Serialize(reply);
    c.in.clear();
    c.in.shrink_to_fit();
    c.sent = 0;
    c.progress = Clock::now();
    c.state = Client::State::kWriting;
    c.deadline =
        Clock::now() + std::chrono::milliseconds(options_.write_timeout_ms);
    served_.fetch_add(1);
    Write(c);
  }

  void Write(Client& c) {
    while (c.sent < c.out.size()) {
      const Result<std::size_t> w =
          platform::Send(c.fd, c.out.data() + c.sent, c.out.size() - c.sent,
                         /*dontwait=*/false);
      if (!w.has_value() && w.error().code() == StatusCode::kBusy) return;
      if (!w.has_value()) {
        ::close(c.fd);
        c.fd = -1;
        return;
      }
      if (*w > 0) c.progress = Clock::now();
      c.sent += *w;
    }
    std::string().swap(c.out);
    ::shutdown(c.fd, SHUT_WR);
    c.state = Client::State::kDraining;
    c.deadline = Clock::now() + std::chrono::milliseconds(kDrainTimeoutMs);
  }

  void Drain(Client& c) {
    char buf[4096];
    for (;;) {
      const Result<std::size_t> r = platform::Receive(c.fd, buf, sizeof(buf));
      if (!r.has_value() && r.error().code() == StatusCode::kBusy) return;
      if (!r.has_value() || *r == 0) {
        ::close(c.fd);
        c.fd = -1;
        return;
      }
    }
  }

  const MetricsServerOptions options_;
  const DeviceRegistry* const registry_;
  const nbd::NbdServer* const nbd_;
  const std::size_t max_clients_;
  platform::EventFd wake_;
  platform::Listener unix_;
  std::vector<platform::Listener> tcp_;  // each address of listen
  std::atomic<bool> stopping_{false};
  std::atomic<std::size_t> served_{0};
  std::list<Client> clients_;  // the server thread's, until it is joined
  Clock::time_point accept_pause_until_;  // the server thread's
  std::thread thread_;
};

}  // namespace

Result<std::unique_ptr<MetricsServer>> MetricsServer::Start(
    const MetricsServerOptions& options, const DeviceRegistry* registry,
    const nbd::NbdServer* nbd) {
  auto server = std::make_unique<MetricsServerImpl>(options, registry, nbd);
  ZT_RETURN_IF_ERROR(server->Init());
  return std::unique_ptr<MetricsServer>(std::move(server));
}

}  // namespace ztier::ctl
