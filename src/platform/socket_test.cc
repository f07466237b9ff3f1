// socket_test.cc: Listener and the socket calls against real sockets: Unix
// sockets in a temporary directory and TCP on the loopback.
#include "platform/socket.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "platform/event_fd.h"
#include "testing/deaf_listener.h"
#include "testing/loopback.h"
#include "testing/test_util.h"

namespace ztier::platform {
namespace {

namespace fs = std::filesystem;
using ztier::testing::BothLoopbacks;
using ztier::testing::ConnectTcpLoopback;
using ztier::testing::ConnectTcpLoopback6;

// A socket file with nobody accepting on it, as a crashed server leaves.
void LeaveStaleSocket(const std::string& path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ::close(fd);
}

// A TCP listener on a spec of one address ("127.0.0.1:0").
Result<Listener> TcpListener(const std::string& spec) {
  ZT_ASSIGN_OR_RETURN(std::vector<Listener> all, Listener::TcpAll(spec));
  return std::move(all.front());
}

// Bytes flow both ways between an accepted socket and its client.
void ExpectConnected(const Listener& l, int client) {
  pollfd p = {l.fd(), POLLIN, 0};
  ASSERT_EQ(::poll(&p, 1, 10000), 1);
  Result<int> server = l.Accept(/*nonblocking=*/false);
  ASSERT_TRUE(server.has_value()) << server.error().ToString();
  Result<std::size_t> sent = Send(client, "ping", 4, /*dontwait=*/false);
  ASSERT_TRUE(sent.has_value());
  EXPECT_EQ(*sent, 4u);
  char buf[8] = {};
  Result<std::size_t> got = Receive(*server, buf, sizeof(buf));
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(std::string(buf, *got), "ping");
  ASSERT_TRUE(Send(*server, "pong", 4, false).has_value());
  got = Receive(client, buf, sizeof(buf));
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(std::string(buf, *got), "pong");
  ::close(*server);
  got = Receive(client, buf, sizeof(buf));  // the server closed: EOF
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(*got, 0u);
  ::close(client);
}

TEST(SocketTest, UnixListenerIs0600AndConnects) {
  testing::ScopedTempDir tmp;
  const std::string path = tmp.File("a.sock");
  ::umask(0);  // the mode must not depend on the umask
  Result<Listener> l = Listener::Unix(path);
  ::umask(022);
  ASSERT_TRUE(l.has_value()) << l.error().ToString();
  struct stat st;
  ASSERT_EQ(::lstat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  EXPECT_FALSE(l->tcp());
  EXPECT_EQ(l->path(), path);
  // No staging directory is left beside it.
  std::size_t entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(tmp.path())) {
    ++entries;
  }
  EXPECT_EQ(entries, 1u);
  Result<int> c = ConnectUnix(path);
  ASSERT_TRUE(c.has_value()) << c.error().ToString();
  ExpectConnected(*l, *c);
}

// A path that fits sun_path but whose private staging folder would not is
// bound where it is: 0600 all the same, and the umask is given back.
TEST(SocketTest, APathTooLongToStageIs0600Too) {
  testing::ScopedTempDir tmp;
  std::string dir = tmp.path() + "/";
  dir += std::string(100 - 8 - dir.size(), 'd');  // 8: "/ab.sock"
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  const std::string path = dir + "/ab.sock";
  ASSERT_EQ(path.size(), 100u);  // < 108; + ".ztier-XXXXXX/s" would not be
  ::umask(0);
  Result<Listener> l = Listener::Unix(path);
  EXPECT_EQ(::umask(022), 0u);
  ASSERT_TRUE(l.has_value()) << l.error().ToString();
  struct stat st;
  ASSERT_EQ(::lstat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  Result<int> c = ConnectUnix(path);
  ASSERT_TRUE(c.has_value()) << c.error().ToString();
  ExpectConnected(*l, *c);
}

// The umask is the process's: two listeners bound in place at once must
// still give back the one they found, not leave 0077 behind for good.
TEST(SocketTest, ListenersBoundInPlaceAtOnceGiveTheUmaskBack) {
  testing::ScopedTempDir tmp;
  std::vector<std::string> paths;
  for (const char* name : {"/ab.sock", "/cd.sock"}) {
    std::string dir = tmp.path() + "/" + name[1];
    dir += std::string(100 - 8 - dir.size(), 'd');
    ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
    paths.push_back(dir + name);
    ASSERT_EQ(paths.back().size(), 100u);  // too long to stage: bound in place
  }
  ::umask(022);
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(2);
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (const std::string& path : paths) {
    threads.emplace_back([&, path] {
      while (std::chrono::steady_clock::now() < deadline) {
        Result<Listener> l = Listener::Unix(path);
        if (!l.has_value()) failures.fetch_add(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(::umask(022), 022u);
}

TEST(SocketTest, AcceptWithNobodyWaitingIsBusy) {
  testing::ScopedTempDir tmp;
  Result<Listener> l = Listener::Unix(tmp.File("b.sock"));
  ASSERT_TRUE(l.has_value());
  Result<int> none = l->Accept(false);  // the listener never blocks
  ASSERT_FALSE(none.has_value());
  EXPECT_EQ(none.error().code(), StatusCode::kBusy) << none.error().ToString();
}

TEST(SocketTest, PathThatIsNotASocketIsInvalidAndKept) {
  testing::ScopedTempDir tmp;
  const std::string file = tmp.File("plain");
  std::ofstream(file) << "keep me";
  Result<Listener> l = Listener::Unix(file);
  ASSERT_FALSE(l.has_value());
  EXPECT_EQ(l.error().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(l.error().message().find("not a socket"), std::string::npos)
      << l.error().message();
  EXPECT_EQ(fs::file_size(file), 7u);  // "keep me", untouched
  EXPECT_TRUE(fs::is_regular_file(file));
  // A directory is no socket either.
  Result<Listener> d = Listener::Unix(tmp.path());
  ASSERT_FALSE(d.has_value());
  EXPECT_EQ(d.error().code(), StatusCode::kInvalidArgument);
}

// connect(2) answers a path that is no socket with ECONNREFUSED, as it does
// a socket nobody listens on; ConnectUnix tells the two apart, in the words
// of a server that will not bind over that path.
TEST(SocketTest, ConnectToAPathThatIsNotASocketSaysWhatIsThere) {
  testing::ScopedTempDir tmp;
  const std::string file = tmp.File("plain");
  std::ofstream(file) << "keep me";
  for (const auto& [path, says] :
       {std::pair{file, file + " is a regular file, not a socket"},
        {tmp.path(), tmp.path() + " is a directory, not a socket"}}) {
    Result<int> fd = ConnectUnix(path);
    ASSERT_FALSE(fd.has_value()) << path;
    EXPECT_EQ(fd.error().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(fd.error().message(), says);
    Result<Listener> l = Listener::Unix(path);
    ASSERT_FALSE(l.has_value()) << path;
    EXPECT_EQ(l.error().message(), says);
  }
  // A socket file nobody listens on is still ECONNREFUSED, and says so in
  // words: the stale socket a server starting there would replace.
  const std::string sock = tmp.File("s.sock");
  LeaveStaleSocket(sock);
  ASSERT_TRUE(fs::is_socket(sock));
  Result<int> fd = ConnectUnix(sock);
  ASSERT_FALSE(fd.has_value());
  EXPECT_EQ(fd.error().posix_errno(), ECONNREFUSED) << fd.error().ToString();
  EXPECT_EQ(fd.error().message().rfind("connect " + sock +
                                           ": no server listens on it (a "
                                           "stale socket): ",
                                       0),
            0u)
      << fd.error().message();
}

// A symbolic link at a server's path is named as one (lstat's view), even
// one to a live socket: bind(2) would not follow it.
TEST(SocketTest, ListenerNamesASymbolicLinkAtItsPath) {
  testing::ScopedTempDir tmp;
  Result<Listener> live = Listener::Unix(tmp.File("live.sock"));
  ASSERT_TRUE(live.has_value()) << live.error().ToString();
  const std::string link = tmp.File("link.sock");
  fs::create_symlink(tmp.File("live.sock"), link);
  Result<Listener> l = Listener::Unix(link);
  ASSERT_FALSE(l.has_value());
  EXPECT_EQ(l.error().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(l.error().message(), link + " is a symbolic link, not a socket");
}

TEST(SocketTest, LiveSocketIsBusyAndStaleOneIsReplaced) {
  testing::ScopedTempDir tmp;
  const std::string path = tmp.File("c.sock");
  Result<Listener> first = Listener::Unix(path);
  ASSERT_TRUE(first.has_value());
  Result<Listener> second = Listener::Unix(path);
  ASSERT_FALSE(second.has_value());
  EXPECT_EQ(second.error().code(), StatusCode::kBusy);
  // Its probe was a connection, closed at once.
  Result<int> probe = first->Accept(false);
  ASSERT_TRUE(probe.has_value()) << probe.error().ToString();
  char byte;
  Result<std::size_t> eof = Receive(*probe, &byte, 1);
  ASSERT_TRUE(eof.has_value());
  EXPECT_EQ(*eof, 0u);
  ::close(*probe);
  Result<int> c = ConnectUnix(path);  // the first still serves
  ASSERT_TRUE(c.has_value());
  ExpectConnected(*first, *c);
  first->Close();
  EXPECT_FALSE(fs::exists(path));

  LeaveStaleSocket(path);
  ASSERT_TRUE(fs::is_socket(path));
  Result<int> refused = ConnectUnix(path);
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().code(), StatusCode::kIoError);
  Result<Listener> replaced = Listener::Unix(path);
  ASSERT_TRUE(replaced.has_value()) << replaced.error().ToString();
  c = ConnectUnix(path);
  ASSERT_TRUE(c.has_value());
  ExpectConnected(*replaced, *c);
}

// A live server that does not accept (stopped, or its backlog full) makes
// a new server's probe wait for good if the probe blocks; it must be kBusy
// at once, and the socket left to that server.
TEST(SocketTest, ALiveSocketWithAFullBacklogIsBusyWithoutWaiting) {
  testing::ScopedTempDir tmp;
  const std::string path = tmp.File("full.sock");
  const int server = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(server, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.data(), path.size());
  ASSERT_EQ(::bind(server, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)),
            0);
  ASSERT_EQ(::listen(server, 0), 0);
  std::vector<int> clients;  // fill the backlog: connects until EAGAIN
  for (int i = 0; i < 64; ++i) {
    const int c = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
    ASSERT_GE(c, 0);
    clients.push_back(c);
    if (::connect(c, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      ASSERT_EQ(errno, EAGAIN);
      break;
    }
  }
  ASSERT_LT(clients.size(), 64u) << "the backlog never filled";
  // The probe runs on its own thread so that a hang fails the test instead
  // of stopping it; a thread still blocked at the end is left behind.
  auto result = std::make_shared<std::promise<Status>>();
  std::future<Status> done = result->get_future();
  std::thread([path, result] {
    Result<Listener> l = Listener::Unix(path);
    result->set_value(l.has_value() ? Status::Ok() : l.error());
  }).detach();
  ASSERT_EQ(done.wait_for(std::chrono::seconds(10)), std::future_status::ready)
      << "Listener::Unix waited on a live server's full backlog";
  EXPECT_EQ(done.get().code(), StatusCode::kBusy);
  EXPECT_TRUE(fs::is_socket(path));
  for (int c : clients) ::close(c);
  ::close(server);
}

TEST(SocketTest, ConnectTimeoutCountsFromTheFirstTryThroughSignals) {
  testing::ScopedTempDir tmp;
  const std::string path = tmp.File("deaf.sock");
  ztier::testing::DeafListener deaf(path);
  ASSERT_EQ(deaf.error(), "");
  // A bounded connect(2) (SO_SNDTIMEO set) fails with EINTR on a signal
  // that has a handler, SA_RESTART or not (sock_intr_errno() in
  // include/net/sock.h restarts only an unbounded wait); ConnectUnix
  // tries again.
  struct sigaction act {};
  act.sa_handler = [](int) {};
  struct sigaction old {};
  ASSERT_EQ(::sigaction(SIGUSR1, &act, &old), 0);
  auto result = std::make_shared<std::promise<Result<int>>>();
  std::future<Result<int>> done = result->get_future();
  const auto start = std::chrono::steady_clock::now();
  std::thread connecting([path, result] {
    result->set_value(ConnectUnix(path, /*timeout_ms=*/300));
  });
  // A signal every 50 ms for 1.5 s: each try's own 300 ms would never end.
  bool ready = false;
  for (int i = 0; i < 30 && !ready; ++i) {
    ::pthread_kill(connecting.native_handle(), SIGUSR1);
    ready = done.wait_for(std::chrono::milliseconds(50)) ==
            std::future_status::ready;
  }
  const auto waited = std::chrono::steady_clock::now() - start;
  deaf.Close();  // wakes a connect still waiting
  connecting.join();
  ::sigaction(SIGUSR1, &old, nullptr);
  EXPECT_TRUE(ready) << "still connecting after 1.5 s of a 300 ms timeout";
  EXPECT_LT(waited, std::chrono::milliseconds(1000));
  Result<int> fd = done.get();
  ASSERT_FALSE(fd.has_value());
  EXPECT_EQ(fd.error().posix_errno(), ETIMEDOUT) << fd.error().ToString();
}

TEST(SocketTest, CloseRemovesOnlyItsOwnSocketFile) {
  testing::ScopedTempDir tmp;
  const std::string path = tmp.File("d.sock");
  Result<Listener> old = Listener::Unix(path);
  ASSERT_TRUE(old.has_value());
  // Someone replaces the file (a newer server after ours was deemed gone).
  ASSERT_EQ(::unlink(path.c_str()), 0);
  Result<Listener> newer = Listener::Unix(path);
  ASSERT_TRUE(newer.has_value());
  old->Close();
  EXPECT_TRUE(fs::is_socket(path));
  Listener moved = std::move(*newer);  // the file goes with the move
  newer->Close();
  EXPECT_TRUE(fs::is_socket(path));
  moved.Close();
  EXPECT_FALSE(fs::exists(path));
}

TEST(SocketTest, BadUnixPaths) {
  Result<Listener> empty = Listener::Unix("");
  ASSERT_FALSE(empty.has_value());
  EXPECT_EQ(empty.error().code(), StatusCode::kInvalidArgument);
  Result<Listener> too_long = Listener::Unix("/tmp/" + std::string(200, 'x'));
  ASSERT_FALSE(too_long.has_value());
  EXPECT_EQ(too_long.error().code(), StatusCode::kInvalidArgument);
  testing::ScopedTempDir tmp;
  Result<int> nobody = ConnectUnix(tmp.File("absent.sock"));
  ASSERT_FALSE(nobody.has_value());
  EXPECT_EQ(nobody.error().code(), StatusCode::kNotFound);
}

TEST(SocketTest, TcpLoopback) {
  Result<Listener> l = TcpListener("127.0.0.1:0");
  ASSERT_TRUE(l.has_value()) << l.error().ToString();
  EXPECT_TRUE(l->tcp());
  ASSERT_GT(l->port(), 0);
  const int c = ConnectTcpLoopback(l->port());
  ASSERT_GE(c, 0);
  SetNoDelay(c);
  int nodelay = 0;
  socklen_t len = sizeof(nodelay);
  ASSERT_EQ(::getsockopt(c, IPPROTO_TCP, TCP_NODELAY, &nodelay, &len), 0);
  EXPECT_NE(nodelay, 0);
  SetKeepAlive(c);
  for (auto [level, option, want] :
       {std::tuple<int, int, int>{SOL_SOCKET, SO_KEEPALIVE, 1},
        std::tuple<int, int, int>{IPPROTO_TCP, TCP_KEEPIDLE,
                                  kKeepAliveIdleSeconds},
        std::tuple<int, int, int>{IPPROTO_TCP, TCP_KEEPINTVL,
                                  kKeepAliveIntervalSeconds},
        std::tuple<int, int, int>{IPPROTO_TCP, TCP_KEEPCNT,
                                  kKeepAliveProbes}}) {
    int got = 0;
    len = sizeof(got);
    ASSERT_EQ(::getsockopt(c, level, option, &got, &len), 0);
    EXPECT_EQ(got, want) << "option " << option;
  }
  EXPECT_EQ(PeerName(c, true), "tcp 127.0.0.1:" + std::to_string(l->port()));
  ExpectConnected(*l, c);
  // The same port again: in use.
  Result<Listener> again =
      TcpListener("127.0.0.1:" + std::to_string(l->port()));
  ASSERT_FALSE(again.has_value());
  EXPECT_EQ(again.error().code(), StatusCode::kBusy) << again.error().ToString();
}

// Closed after SetResetOnClose, a connection is reset: what its socket had
// not sent yet is dropped, and the peer's read ends in ECONNRESET. Closed
// the usual way, the peer reads every byte, then the end of the stream.
TEST(SocketTest, ResetOnCloseDropsWhatIsUnsent) {
  for (const bool reset : {false, true}) {
    SCOPED_TRACE(reset);
    Result<Listener> l = TcpListener("127.0.0.1:0");
    ASSERT_TRUE(l.has_value()) << l.error().ToString();
    const int c = ConnectTcpLoopback(l->port());
    ASSERT_GE(c, 0);
    pollfd p{l->fd(), POLLIN, 0};
    ASSERT_EQ(::poll(&p, 1, 5000), 1);
    Result<int> s = l->Accept(/*nonblocking=*/false);
    ASSERT_TRUE(s.has_value()) << s.error().ToString();
    // Both buffers full: the peer reads nothing yet.
    const std::string chunk(65536, 'x');
    std::size_t sent = 0;
    for (Result<std::size_t> r; (r = Send(c, chunk.data(), chunk.size(),
                                          /*dontwait=*/true))
                                    .has_value();) {
      sent += *r;
    }
    if (reset) SetResetOnClose(c);
    ::close(c);
    std::size_t got = 0;
    ssize_t n;
    std::vector<char> buf(1 << 20);
    while ((n = ::recv(*s, buf.data(), buf.size(), 0)) > 0) got += n;
    const int err = errno;
    if (reset) {
      EXPECT_LT(got, sent);
      EXPECT_EQ(n, -1);
      EXPECT_EQ(err, ECONNRESET);
    } else {
      EXPECT_EQ(got, sent);
      EXPECT_EQ(n, 0);
    }
    ::close(*s);
  }
}

TEST(SocketTest, BadTcpAddresses) {
  for (const char* spec : {"no-port-here", "127.0.0.1:70000", "1.2.3.4:x"}) {
    Result<Listener> l = TcpListener(spec);
    ASSERT_FALSE(l.has_value()) << spec;
    EXPECT_EQ(l.error().code(), StatusCode::kInvalidArgument) << spec;
  }
}

// An address looked up once is bound as it is, on every endpoint, on one
// port: a name of ::1 and 127.0.0.1 (localhost) takes clients of both.
TEST(SocketTest, AResolvedAddressBindsEveryEndpoint) {
  Result<std::vector<Listener>> both = Listener::TcpAll(BothLoopbacks());
  ASSERT_TRUE(both.has_value()) << both.error().ToString();
  ASSERT_EQ(both->size(), 2u);
  const int port = (*both)[0].port();
  ASSERT_GT(port, 0);
  EXPECT_EQ((*both)[1].port(), port);
  const int v6 = ConnectTcpLoopback6(port);
  ASSERT_GE(v6, 0) << std::strerror(errno);
  ExpectConnected((*both)[0], v6);
  const int v4 = ConnectTcpLoopback(port);
  ASSERT_GE(v4, 0) << std::strerror(errno);
  ExpectConnected((*both)[1], v4);
  // A repeated endpoint is one socket; an address the host does not have
  // (192.0.2.0/24, RFC 5737) is skipped beside one it has, and alone is
  // the bind's error.
  Result<ResolvedTcpAddress> loopback = ResolveTcpAddress("127.0.0.1:0");
  Result<ResolvedTcpAddress> elsewhere = ResolveTcpAddress("192.0.2.1:0");
  ASSERT_TRUE(loopback.has_value() && elsewhere.has_value());
  ResolvedTcpAddress some = *elsewhere;
  some.endpoints.push_back(loopback->endpoints.front());
  some.endpoints.push_back(loopback->endpoints.front());
  Result<std::vector<Listener>> one = Listener::TcpAll(some);
  ASSERT_TRUE(one.has_value()) << one.error().ToString();
  EXPECT_EQ(one->size(), 1u);
  Result<std::vector<Listener>> none = Listener::TcpAll(*elsewhere);
  ASSERT_FALSE(none.has_value());
  EXPECT_NE(none.error().message().find("bind 192.0.2.1:0"), std::string::npos)
      << none.error().ToString();
  EXPECT_EQ(Listener::TcpAll(ResolvedTcpAddress{.spec = "x:1", .endpoints = {}})
                .error()
                .code(),
            StatusCode::kInvalidArgument);
  Result<ResolvedTcpAddress> bad = ResolveTcpAddress("no-port-here");
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().code(), StatusCode::kInvalidArgument);
}

// PORT 0 asks for a port free on every endpoint. The kernel picks the first
// bind's free for that address alone (inet_csk_find_open_port() in
// net/ipv4/inet_connection_sock.c), so that it may be in use on another:
// then another is picked, rather than the whole failing as busy. Many
// ports held on 127.0.0.1 alone make ::1's picks meet one often.
TEST(SocketTest, PortZeroIsAPortFreeOnEveryEndpoint) {
  rlimit nofile;
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &nofile), 0);
  const rlimit saved = nofile;
  nofile.rlim_cur = std::min<rlim_t>(nofile.rlim_max, 4096);
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &nofile), 0);
  std::vector<Listener> held;
  while (held.size() + 256 < nofile.rlim_cur && held.size() < 3000) {
    Result<Listener> l = TcpListener("127.0.0.1:0");
    ASSERT_TRUE(l.has_value()) << l.error().ToString();
    held.push_back(std::move(*l));
  }
  ASSERT_GE(held.size(), 700u) << "too few descriptors to hold ports with";
  for (int i = 0; i < 200; ++i) {
    Result<std::vector<Listener>> both = Listener::TcpAll(BothLoopbacks());
    ASSERT_TRUE(both.has_value())
        << "try " << i << ": " << both.error().ToString();
    ASSERT_EQ(both->size(), 2u);
    EXPECT_EQ((*both)[0].port(), (*both)[1].port());
  }
  held.clear();
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &saved), 0);
}

// One endpoint's port in use fails the whole, and what was bound is closed:
// a server never serves on part of its name's addresses unsaid.
TEST(SocketTest, AnEndpointInUseFailsTheWholeAddress) {
  Result<Listener> taken = TcpListener("127.0.0.1:0");
  ASSERT_TRUE(taken.has_value()) << taken.error().ToString();
  const std::string port = std::to_string(taken->port());
  Result<ResolvedTcpAddress> v6 = ResolveTcpAddress("[::1]:" + port);
  Result<ResolvedTcpAddress> v4 = ResolveTcpAddress("127.0.0.1:" + port);
  ASSERT_TRUE(v6.has_value() && v4.has_value());
  ResolvedTcpAddress both{.spec = "localhost:" + port, .endpoints = {}};
  both.endpoints = {v6->endpoints.front(), v4->endpoints.front()};
  Result<std::vector<Listener>> l = Listener::TcpAll(both);
  ASSERT_FALSE(l.has_value());
  EXPECT_EQ(l.error().code(), StatusCode::kBusy) << l.error().ToString();
  EXPECT_NE(l.error().message().find("bind localhost:" + port),
            std::string::npos)
      << l.error().ToString();
  EXPECT_EQ(ConnectTcpLoopback6(taken->port()), -1);
}

TEST(SocketTest, SendWouldBlockIsBusy) {
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  const std::string chunk(65536, 'x');
  Result<std::size_t> r;
  do {
    r = Send(sv[0], chunk.data(), chunk.size(), /*dontwait=*/true);
  } while (r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kBusy) << r.error().ToString();
  ::close(sv[1]);
  r = Send(sv[0], "x", 1, false);  // the peer is gone: an error, no SIGPIPE
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kIoError);
  ::close(sv[0]);
}

TEST(SocketTest, DatagramToPathAndAbstractName) {
  testing::ScopedTempDir tmp;
  const std::string path = tmp.File("notify");
  const int rx = ::socket(AF_UNIX, SOCK_DGRAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  ASSERT_EQ(::bind(rx, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_TRUE(SendUnixDatagram(path, "READY=1").ok());
  char buf[32] = {};
  EXPECT_EQ(::recv(rx, buf, sizeof(buf), 0), 7);
  EXPECT_STREQ(buf, "READY=1");
  ::close(rx);

  const std::string name = "ztier-socket-test-" + std::to_string(::getpid());
  const int abs_rx = ::socket(AF_UNIX, SOCK_DGRAM, 0);
  sockaddr_un abs{};
  abs.sun_family = AF_UNIX;
  std::memcpy(abs.sun_path + 1, name.data(), name.size());
  const auto len =
      static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  ASSERT_EQ(::bind(abs_rx, reinterpret_cast<sockaddr*>(&abs), len), 0);
  ASSERT_TRUE(SendUnixDatagram("@" + name, "STOPPING=1").ok());
  std::memset(buf, 0, sizeof(buf));
  EXPECT_EQ(::recv(abs_rx, buf, sizeof(buf), 0), 10);
  EXPECT_STREQ(buf, "STOPPING=1");
  ::close(abs_rx);

  EXPECT_EQ(SendUnixDatagram("relative", "x").code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(SendUnixDatagram(tmp.File("nobody"), "x").code(),
            StatusCode::kNotFound);
}

TEST(EventFdTest, SignalWakesPollUntilDrained) {
  Result<EventFd> e = EventFd::Create();
  ASSERT_TRUE(e.has_value()) << e.error().ToString();
  pollfd p = {e->fd(), POLLIN, 0};
  EXPECT_EQ(::poll(&p, 1, 0), 0);
  e->Signal();
  e->Signal();
  EXPECT_EQ(::poll(&p, 1, 0), 1);
  e->Drain();  // both signals at once
  EXPECT_EQ(::poll(&p, 1, 0), 0);
  e->Drain();  // nothing to drain: harmless
  EventFd moved = std::move(*e);
  EXPECT_EQ(e->fd(), -1);
  moved.Signal();
  p.fd = moved.fd();
  EXPECT_EQ(::poll(&p, 1, 0), 1);
}

}  // namespace
}  // namespace ztier::platform
