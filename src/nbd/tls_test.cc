// tls_test.cc: the TLS transport against a real GnuTLS client, over a
// socketpair, with certificates made by certtool (tls_test_certs.h).
#include "nbd/tls.h"

#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tls_test_certs.h"

namespace ztier::nbd {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::vector<std::uint8_t> Pattern(std::size_t n, std::uint32_t seed) {
  std::vector<std::uint8_t> v(n);
  std::mt19937 rng(seed);
  for (auto& b : v) b = static_cast<std::uint8_t>(rng());
  return v;
}

// Receives exactly `n` bytes from the server-side transport.
Status RecvAll(Transport* t, void* buf, std::size_t n, int timeout_ms) {
  auto* p = static_cast<std::uint8_t*>(buf);
  while (n > 0) {
    auto r = t->Recv(p, n, timeout_ms);
    if (!r.has_value()) return r.error();
    if (*r == 0) return Status::IoError("connection closed");
    EXPECT_LE(*r, n);
    p += *r;
    n -= *r;
  }
  return Status::Ok();
}

// A GnuTLS client session on a blocking socket, as an NBD client would run
// one after NBD_OPT_STARTTLS.
class TestClient {
 public:
  explicit TestClient(int fd) : fd_(fd) {}
  ~TestClient() {
    if (session_ != nullptr) gnutls_deinit(session_);
    if (creds_ != nullptr) gnutls_certificate_free_credentials(creds_);
  }
  TestClient(const TestClient&) = delete;
  TestClient& operator=(const TestClient&) = delete;

  // Handshakes, trusting only `ca_file` and checking that the server is
  // "localhost". Returns "" or GnuTLS's error.
  std::string Handshake(const std::string& ca_file,
                        const char* priority = nullptr) {
    if (gnutls_certificate_allocate_credentials(&creds_) < 0) return "creds";
    if (gnutls_certificate_set_x509_trust_file(creds_, ca_file.c_str(),
                                               GNUTLS_X509_FMT_PEM) != 1) {
      return "trust file";
    }
    if (gnutls_init(&session_, GNUTLS_CLIENT | GNUTLS_NO_SIGNAL) < 0) {
      return "init";
    }
    const int p = priority == nullptr
                      ? gnutls_set_default_priority(session_)
                      : gnutls_priority_set_direct(session_, priority, nullptr);
    if (p < 0) return std::string("priority: ") + gnutls_strerror(p);
    gnutls_credentials_set(session_, GNUTLS_CRD_CERTIFICATE, creds_);
    gnutls_server_name_set(session_, GNUTLS_NAME_DNS, "localhost", 9);
    gnutls_session_set_verify_cert(session_, "localhost", 0);
    gnutls_transport_set_int(session_, fd_);
    int r;
    do {
      r = gnutls_handshake(session_);
    } while (r < 0 && gnutls_error_is_fatal(r) == 0);
    return r < 0 ? gnutls_strerror(r) : "";
  }

  bool SendAll(const void* buf, std::size_t n) {
    const auto* p = static_cast<const std::uint8_t*>(buf);
    while (n > 0) {
      const ssize_t r = gnutls_record_send(session_, p, n);
      if (r == GNUTLS_E_AGAIN || r == GNUTLS_E_INTERRUPTED) continue;
      if (r < 0) return false;
      p += r;
      n -= static_cast<std::size_t>(r);
    }
    return true;
  }

  // One gnutls_record_recv: the data of (part of) one record, 0 at EOF.
  ssize_t RecvRecord(void* buf, std::size_t n) {
    ssize_t r;
    do {
      r = gnutls_record_recv(session_, buf, n);
    } while (r == GNUTLS_E_AGAIN || r == GNUTLS_E_INTERRUPTED);
    return r;
  }

  bool RecvExact(void* buf, std::size_t n) {
    auto* p = static_cast<std::uint8_t*>(buf);
    while (n > 0) {
      const ssize_t r = RecvRecord(p, n);
      if (r <= 0) return false;
      p += r;
      n -= static_cast<std::size_t>(r);
    }
    return true;
  }

  void Bye() { gnutls_bye(session_, GNUTLS_SHUT_WR); }
  gnutls_session_t session() { return session_; }

 private:
  int fd_;
  gnutls_certificate_credentials_t creds_ = nullptr;
  gnutls_session_t session_ = nullptr;
};

class TlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl =
        std::string(base != nullptr ? base : "/tmp") + "/ztier-tls-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) {
      setup_error_ = "mkdtemp failed";
      return;
    }
    dir_ = tmpl;
    const Status s = testing::MakeTestCertificates(dir_);
    if (!s.ok()) {
      setup_error_ = s.ToString();
      return;
    }
    auto ctx = TlsContext::Load(File("server-cert.pem"), File("server-key.pem"));
    if (!ctx.has_value()) {
      setup_error_ = ctx.error().ToString();
      return;
    }
    ctx_ = ctx->release();
  }

  static void TearDownTestSuite() {
    delete ctx_;
    ctx_ = nullptr;
    std::error_code ec;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
  }

  static std::string File(const std::string& name) { return dir_ + "/" + name; }

  void SetUp() override {
    ASSERT_NE(ctx_, nullptr) << setup_error_;
    int fds[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
    server_fd_ = fds[0];
    client_fd_ = fds[1];
  }

  void TearDown() override {
    Release();
    {
      // Clients finish on their own when the server did its part; one still
      // blocked after that is woken by shutting the sockets down.
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_for(lock, std::chrono::seconds(30),
                   [this] { return clients_done_ == threads_.size(); });
    }
    if (server_fd_ >= 0) ::shutdown(server_fd_, SHUT_RDWR);
    if (client_fd_ >= 0) ::shutdown(client_fd_, SHUT_RDWR);
    for (auto& t : threads_) t.join();
    if (server_fd_ >= 0) ::close(server_fd_);
    if (client_fd_ >= 0) ::close(client_fd_);
  }

  // Runs `fn(client fd)` in a thread, joined in TearDown.
  void RunClient(std::function<void(int)> fn) {
    threads_.emplace_back([this, fn = std::move(fn)](int fd) {
      fn(fd);
      std::lock_guard<std::mutex> lock(mu_);
      ++clients_done_;
      cv_.notify_all();
    }, client_fd_);
  }

  // A client that handshakes and then runs `fn` on its session.
  void RunTlsClient(std::function<void(TestClient&)> fn,
                    const char* priority = nullptr) {
    RunClient([fn = std::move(fn), priority](int fd) {
      TestClient c(fd);
      const std::string err = c.Handshake(File("ca-cert.pem"), priority);
      ASSERT_EQ(err, "") << "client handshake";
      fn(c);
    });
  }

  std::unique_ptr<Transport> Accept(int timeout_ms = 10000) {
    auto t = StartTls(server_fd_, *ctx_, timeout_ms);
    EXPECT_TRUE(t.has_value()) << t.error().ToString();
    return t.has_value() ? std::move(*t) : nullptr;
  }

  // Lets clients blocked in WaitRelease() go on.
  void Release() {
    std::lock_guard<std::mutex> lock(mu_);
    released_ = true;
    cv_.notify_all();
  }
  void WaitRelease() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return released_; });
  }

  static inline std::string dir_;
  static inline std::string setup_error_;
  static inline TlsContext* ctx_ = nullptr;

  int server_fd_ = -1;
  int client_fd_ = -1;
  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool released_ = false;
  std::size_t clients_done_ = 0;
};

TEST_F(TlsTest, HandshakeAndRoundTripBothWays) {
  const auto request = Pattern(100000, 1);
  const auto payload = Pattern(100000, 2);
  const std::string header = "0123456789abcdef";
  RunTlsClient([request, payload, header](TestClient& c) {
    ASSERT_TRUE(c.SendAll(request.data(), request.size()));
    std::vector<std::uint8_t> got(header.size() + payload.size());
    ASSERT_TRUE(c.RecvExact(got.data(), got.size()));
    EXPECT_EQ(std::string(got.begin(), got.begin() + 16), header);
    EXPECT_TRUE(std::equal(payload.begin(), payload.end(), got.begin() + 16));
  });
  auto t = Accept();
  ASSERT_NE(t, nullptr);
  EXPECT_STREQ(t->name(), "TLS1.3");
  std::vector<std::uint8_t> got(request.size());
  ASSERT_TRUE(RecvAll(t.get(), got.data(), got.size(), 5000).ok());
  EXPECT_EQ(got, request);
  const struct iovec iov[2] = {
      {const_cast<char*>(header.data()), header.size()},
      {const_cast<std::uint8_t*>(payload.data()), payload.size()}};
  ASSERT_TRUE(t->Send(iov, 2, 5000).ok());
  // TLS never sends part of a record: TrySend leaves everything to Send.
  auto tried = t->TrySend(iov, 2);
  ASSERT_TRUE(tried.has_value());
  EXPECT_EQ(*tried, 0u);
}

TEST_F(TlsTest, Tls12ClientIsServed) {
  RunTlsClient(
      [](TestClient& c) {
        ASSERT_TRUE(c.SendAll("hello", 5));
        char buf[5];
        ASSERT_TRUE(c.RecvExact(buf, 5));
        EXPECT_EQ(std::string(buf, 5), "world");
      },
      "NORMAL:-VERS-TLS-ALL:+VERS-TLS1.2");
  auto t = Accept();
  ASSERT_NE(t, nullptr);
  EXPECT_STREQ(t->name(), "TLS1.2");
  char buf[5];
  ASSERT_TRUE(RecvAll(t.get(), buf, 5, 5000).ok());
  EXPECT_EQ(std::string(buf, 5), "hello");
  const struct iovec iov = {const_cast<char*>("world"), 5};
  ASSERT_TRUE(t->Send(&iov, 1, 5000).ok());
}

TEST_F(TlsTest, Tls11ClientIsRefused) {
  RunClient([](int fd) {
    TestClient c(fd);
    EXPECT_NE(c.Handshake(File("ca-cert.pem"),
                          "NORMAL:-VERS-TLS-ALL:+VERS-TLS1.1:+VERS-TLS1.0"),
              "");
  });
  auto t = StartTls(server_fd_, *ctx_, 5000);
  ASSERT_FALSE(t.has_value());
  EXPECT_EQ(t.error().code(), StatusCode::kIoError);
  EXPECT_NE(t.error().message().find("version"), std::string::npos)
      << t.error().ToString();
}

// The client really checks the chain: a CA of another PKI is refused.
TEST_F(TlsTest, ClientRefusesAServerOfAnotherCa) {
  const std::string other = File("other-pki");
  ASSERT_EQ(::mkdir(other.c_str(), 0700), 0);
  const Status made = testing::MakeTestCertificates(other);
  ASSERT_TRUE(made.ok()) << made.ToString();
  RunClient([other](int fd) {
    TestClient c(fd);
    EXPECT_NE(c.Handshake(other + "/ca-cert.pem"), "");
    ::shutdown(fd, SHUT_RDWR);  // as a client that gives up hangs up
  });
  auto t = StartTls(server_fd_, *ctx_, 5000);
  ASSERT_FALSE(t.has_value());
  EXPECT_EQ(t.error().message().find("timed out"), std::string::npos)
      << t.error().ToString();
  std::error_code ec;
  std::filesystem::remove_all(other, ec);
}

TEST_F(TlsTest, LargeTransfersBothWays) {
  constexpr std::size_t kSize = 4 << 20;
  const auto up = Pattern(kSize, 3);
  const auto down = Pattern(kSize, 4);
  const std::string header = "HEADER-16-BYTES!";
  const std::string tail[3] = {"a", "", "tail-entry"};
  RunTlsClient([up, down, header](TestClient& c) {
    ASSERT_TRUE(c.SendAll(up.data(), up.size()));
    std::vector<std::uint8_t> got(16 + kSize + 11);
    ASSERT_TRUE(c.RecvExact(got.data(), got.size()));
    EXPECT_EQ(std::string(got.begin(), got.begin() + 16), header);
    EXPECT_TRUE(std::equal(down.begin(), down.end(), got.begin() + 16));
    EXPECT_EQ(std::string(got.end() - 11, got.end()), "atail-entry");
  });
  auto t = Accept();
  ASSERT_NE(t, nullptr);
  // Reads of odd sizes: Recv may return less than asked, never more.
  std::vector<std::uint8_t> got(kSize);
  const std::size_t steps[] = {1, 7, 4096, 16383, 65536, 1 << 20};
  std::size_t off = 0;
  for (int i = 0; off < kSize; ++i) {
    const std::size_t want = std::min(steps[i % 6], kSize - off);
    ASSERT_TRUE(RecvAll(t.get(), got.data() + off, want, 5000).ok());
    off += want;
  }
  EXPECT_EQ(got, up);
  std::vector<struct iovec> iov = {
      {const_cast<char*>(header.data()), 16},
      {const_cast<std::uint8_t*>(down.data()), down.size()}};
  for (const auto& s : tail) iov.push_back({const_cast<char*>(s.data()), s.size()});
  ASSERT_TRUE(t->Send(iov.data(), static_cast<int>(iov.size()), 5000).ok());
}

// Corking: an NBD reply's header and the start of its data travel in one
// record, and many small entries in one record too. The client sees record
// boundaries: one gnutls_record_recv returns at most one record's data.
TEST_F(TlsTest, SmallEntriesShareRecords) {
  const auto data = Pattern(1 << 20, 5);
  std::vector<std::string> smalls;
  std::size_t small_total = 0;
  for (int i = 0; i < 300; ++i) {
    smalls.push_back(std::string(1 + i % 40, static_cast<char>('a' + i % 26)));
    small_total += smalls.back().size();
  }
  ASSERT_LT(small_total, 16384u);
  RunTlsClient([data, smalls, small_total](TestClient& c) {
    std::vector<std::uint8_t> buf(1 << 16);
    // Reply 1: 16-byte header + 4096 bytes: one record.
    EXPECT_EQ(c.RecvRecord(buf.data(), buf.size()), 16 + 4096);
    EXPECT_TRUE(std::equal(data.begin(), data.begin() + 4096, buf.begin() + 16));
    // Reply 2: header + 1 MiB: full records, the first holding the header.
    std::vector<std::uint8_t> got(16 + data.size());
    const ssize_t first = c.RecvRecord(got.data(), got.size());
    EXPECT_EQ(first, 16384);
    ASSERT_GT(first, 0);
    ASSERT_TRUE(c.RecvExact(got.data() + first, got.size() - first));
    EXPECT_TRUE(std::equal(data.begin(), data.end(), got.begin() + 16));
    // Reply 3: 300 small entries: one record.
    EXPECT_EQ(c.RecvRecord(buf.data(), buf.size()),
              static_cast<ssize_t>(small_total));
    std::string joined;
    for (const auto& s : smalls) joined += s;
    EXPECT_TRUE(std::equal(joined.begin(), joined.end(), buf.begin()));
  });
  auto t = Accept();
  ASSERT_NE(t, nullptr);
  char header[16] = "header";
  struct iovec r1[2] = {{header, 16},
                        {const_cast<std::uint8_t*>(data.data()), 4096}};
  ASSERT_TRUE(t->Send(r1, 2, 5000).ok());
  struct iovec r2[2] = {{header, 16},
                        {const_cast<std::uint8_t*>(data.data()), data.size()}};
  ASSERT_TRUE(t->Send(r2, 2, 5000).ok());
  std::vector<struct iovec> r3;
  for (auto& s : smalls) r3.push_back({s.data(), s.size()});
  ASSERT_TRUE(t->Send(r3.data(), static_cast<int>(r3.size()), 5000).ok());
}

// One server thread sends replies while another receives requests, and the
// client does the same, so both directions are busy at once.
TEST_F(TlsTest, ConcurrentSendAndRecv) {
  constexpr int kReplies = 64;
  constexpr std::size_t kReply = 128 << 10;
  constexpr std::size_t kUp = 8 << 20;
  const auto up = Pattern(kUp, 6);
  RunTlsClient([up](TestClient& c) {
    std::thread reader([&] {
      std::vector<std::uint8_t> got(16 + kReply);
      for (int i = 0; i < kReplies; ++i) {
        ASSERT_TRUE(c.RecvExact(got.data(), got.size())) << i;
        std::uint32_t seq;
        std::memcpy(&seq, got.data(), 4);
        ASSERT_EQ(seq, static_cast<std::uint32_t>(i));
        const auto want = Pattern(kReply, 100 + i);
        ASSERT_TRUE(std::equal(want.begin(), want.end(), got.begin() + 16))
            << i;
      }
    });
    EXPECT_TRUE(c.SendAll(up.data(), up.size()));
    reader.join();
  });
  auto t = Accept();
  ASSERT_NE(t, nullptr);
  Status send_status;
  std::thread sender([&] {
    char header[16] = {};
    for (int i = 0; i < kReplies && send_status.ok(); ++i) {
      const std::uint32_t seq = static_cast<std::uint32_t>(i);
      std::memcpy(header, &seq, 4);
      auto body = Pattern(kReply, 100 + i);
      struct iovec iov[2] = {{header, 16}, {body.data(), body.size()}};
      send_status = t->Send(iov, 2, 10000);
    }
  });
  std::vector<std::uint8_t> got(kUp);
  const Status recv_status = RecvAll(t.get(), got.data(), got.size(), 10000);
  sender.join();
  EXPECT_TRUE(recv_status.ok()) << recv_status.ToString();
  EXPECT_TRUE(send_status.ok()) << send_status.ToString();
  EXPECT_EQ(got, up);
}

// A TLS 1.3 client may update its keys and ask the server to update its own
// (RFC 8446 4.6.3): the server answers with a KeyUpdate before its next data,
// so the client reads that data with a new key.
TEST_F(TlsTest, ClientKeyUpdate) {
  RunTlsClient([](TestClient& c) {
    auto read_key = [&c] {
      gnutls_datum_t key = {};
      EXPECT_EQ(gnutls_record_get_state(c.session(), 1, nullptr, nullptr,
                                        &key, nullptr),
                0);
      return std::string(reinterpret_cast<char*>(key.data), key.size);
    };
    const std::string before = read_key();
    ASSERT_FALSE(before.empty());
    ASSERT_EQ(gnutls_session_key_update(c.session(), GNUTLS_KU_PEER), 0);
    ASSERT_TRUE(c.SendAll("after-update", 12));
    char buf[5];
    ASSERT_TRUE(c.RecvExact(buf, 5));
    EXPECT_EQ(std::string(buf, 5), "reply");
    EXPECT_NE(read_key(), before) << "the server did not update its key";
  });
  auto t = Accept();
  ASSERT_NE(t, nullptr);
  char buf[12];
  ASSERT_TRUE(RecvAll(t.get(), buf, 12, 5000).ok());
  EXPECT_EQ(std::string(buf, 12), "after-update");
  const struct iovec iov = {const_cast<char*>("reply"), 5};
  ASSERT_TRUE(t->Send(&iov, 1, 5000).ok());
}

TEST_F(TlsTest, CloseNotifyIsEndOfStream) {
  RunTlsClient([](TestClient& c) {
    ASSERT_TRUE(c.SendAll("abc", 3));
    c.Bye();
  });
  auto t = Accept();
  ASSERT_NE(t, nullptr);
  char buf[8];
  ASSERT_TRUE(RecvAll(t.get(), buf, 3, 5000).ok());
  auto r = t->Recv(buf, sizeof(buf), 5000);
  ASSERT_TRUE(r.has_value()) << r.error().ToString();
  EXPECT_EQ(*r, 0u);
}

TEST_F(TlsTest, HangUpWithoutCloseNotifyIsEndOfStream) {
  RunTlsClient([](TestClient& c) {
    ASSERT_TRUE(c.SendAll("abc", 3));
    ::shutdown(gnutls_transport_get_int(c.session()), SHUT_WR);
  });
  auto t = Accept();
  ASSERT_NE(t, nullptr);
  char buf[8];
  ASSERT_TRUE(RecvAll(t.get(), buf, 3, 5000).ok());
  auto r = t->Recv(buf, sizeof(buf), 5000);
  ASSERT_TRUE(r.has_value()) << r.error().ToString();
  EXPECT_EQ(*r, 0u);
}

TEST_F(TlsTest, RecvTimesOut) {
  RunTlsClient([this](TestClient&) { WaitRelease(); });
  auto t = Accept();
  ASSERT_NE(t, nullptr);
  char buf[8];
  const auto start = Clock::now();
  auto r = t->Recv(buf, sizeof(buf), 200);
  const double took = SecondsSince(start);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kIoError);
  EXPECT_NE(r.error().message().find("timed out"), std::string::npos)
      << r.error().ToString();
  EXPECT_GE(took, 0.15);
  EXPECT_LT(took, 5.0);
}

TEST_F(TlsTest, SendTimesOutWhenClientDoesNotRead) {
  RunTlsClient([this](TestClient&) { WaitRelease(); });
  auto t = Accept();
  ASSERT_NE(t, nullptr);
  const auto big = Pattern(16 << 20, 7);
  const struct iovec iov = {const_cast<std::uint8_t*>(big.data()), big.size()};
  const auto start = Clock::now();
  const Status s = t->Send(&iov, 1, 300);
  const double took = SecondsSince(start);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("timed out"), std::string::npos) << s.ToString();
  EXPECT_LT(took, 10.0);
}

// The id of the calling thread, published to `tid` for a waiting test.
void PublishTid(std::atomic<pid_t>& tid) {
  tid.store(::gettid());
  tid.notify_all();
}

// Waits until thread `tid` (once published) sleeps in poll() or ppoll(),
// where the transport waits for its socket, as /proc/self/task/TID/syscall
// shows (proc(5): the number of the system call it is blocked in). At most
// 10 s; false then.
bool WaitInPoll(std::atomic<pid_t>& tid) {
  tid.wait(0);
  const std::string path =
      "/proc/self/task/" + std::to_string(tid.load()) + "/syscall";
  for (int i = 0; i < 10000; ++i) {
    std::ifstream f(path);
    long nr = -1;
    if (f >> nr) {
#ifdef SYS_poll
      if (nr == SYS_poll) return true;
#endif
      if (nr == SYS_ppoll) return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

TEST_F(TlsTest, ShutdownUnblocksRecv) {
  RunTlsClient([this](TestClient&) { WaitRelease(); });
  auto t = Accept();
  ASSERT_NE(t, nullptr);
  Result<std::size_t> r = 0;
  Clock::time_point returned;
  std::atomic<pid_t> tid{0};
  std::thread reader([&] {
    PublishTid(tid);
    char buf[8];
    r = t->Recv(buf, sizeof(buf), -1);
    returned = Clock::now();
  });
  EXPECT_TRUE(WaitInPoll(tid)) << "the reader never blocked in poll()";
  const auto start = Clock::now();
  t->Shutdown();
  reader.join();
  EXPECT_FALSE(r.has_value());
  EXPECT_LT(std::chrono::duration<double>(returned - start).count(), 5.0);
  // Every later call fails too.
  const struct iovec iov = {const_cast<char*>("x"), 1};
  EXPECT_FALSE(t->Send(&iov, 1, 1000).ok());
  char buf[1];
  EXPECT_FALSE(t->Recv(buf, 1, 1000).has_value());
  t->Shutdown();  // idempotent
}

TEST_F(TlsTest, ShutdownUnblocksSend) {
  RunTlsClient([this](TestClient&) { WaitRelease(); });
  auto t = Accept();
  ASSERT_NE(t, nullptr);
  const auto big = Pattern(16 << 20, 8);
  Status s;
  std::atomic<pid_t> tid{0};
  std::thread sender([&] {
    PublishTid(tid);
    const struct iovec iov = {const_cast<std::uint8_t*>(big.data()),
                              big.size()};
    s = t->Send(&iov, 1, -1);
  });
  // Blocked once the socket's buffers are full (the client reads nothing).
  EXPECT_TRUE(WaitInPoll(tid)) << "the sender never blocked in poll()";
  t->Shutdown();
  sender.join();
  EXPECT_FALSE(s.ok());
}

TEST_F(TlsTest, HandshakeTimesOutWhenClientSendsNothing) {
  const auto start = Clock::now();
  auto t = StartTls(server_fd_, *ctx_, 300);
  const double took = SecondsSince(start);
  ASSERT_FALSE(t.has_value());
  EXPECT_EQ(t.error().code(), StatusCode::kIoError);
  EXPECT_NE(t.error().message().find("timed out"), std::string::npos)
      << t.error().ToString();
  EXPECT_GE(took, 0.25);
  EXPECT_LT(took, 5.0);
}

TEST_F(TlsTest, HandshakeFailsOnGarbage) {
  RunClient([this](int fd) {
    const char kHttp[] = "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n";
    ASSERT_EQ(::send(fd, kHttp, sizeof(kHttp) - 1, MSG_NOSIGNAL),
              static_cast<ssize_t>(sizeof(kHttp) - 1));
    WaitRelease();  // keeps the socket open: the server must not wait
  });
  const auto start = Clock::now();
  auto t = StartTls(server_fd_, *ctx_, 5000);
  const double took = SecondsSince(start);
  ASSERT_FALSE(t.has_value());
  EXPECT_EQ(t.error().code(), StatusCode::kIoError);
  EXPECT_EQ(t.error().message().find("timed out"), std::string::npos)
      << t.error().ToString();
  EXPECT_LT(took, 4.0);
}

TEST_F(TlsTest, HandshakeFailsOnRandomBytes) {
  const auto junk = Pattern(4096, 9);
  RunClient([this, junk](int fd) {
    ::send(fd, junk.data(), junk.size(), MSG_NOSIGNAL);
    WaitRelease();
  });
  const auto start = Clock::now();
  auto t = StartTls(server_fd_, *ctx_, 1000);
  ASSERT_FALSE(t.has_value());
  EXPECT_LT(SecondsSince(start), 5.0);
}

// A record header that promises more than is ever sent: the server waits for
// the rest only until the deadline.
TEST_F(TlsTest, HandshakeTimesOutOnTruncatedRecord) {
  RunClient([this](int fd) {
    const unsigned char kPartial[] = {0x16, 0x03, 0x01, 0x02, 0x00,  // 512
                                      0x01, 0x00, 0x01, 0xfc, 0x03, 0x03};
    ::send(fd, kPartial, sizeof(kPartial), MSG_NOSIGNAL);
    WaitRelease();
  });
  const auto start = Clock::now();
  auto t = StartTls(server_fd_, *ctx_, 300);
  const double took = SecondsSince(start);
  ASSERT_FALSE(t.has_value());
  EXPECT_NE(t.error().message().find("timed out"), std::string::npos)
      << t.error().ToString();
  EXPECT_LT(took, 5.0);
}

TEST_F(TlsTest, HandshakeFailsWhenClientHangsUp) {
  ::shutdown(client_fd_, SHUT_RDWR);
  auto t = StartTls(server_fd_, *ctx_, 5000);
  ASSERT_FALSE(t.has_value());
  EXPECT_EQ(t.error().message().find("timed out"), std::string::npos)
      << t.error().ToString();
}

TEST_F(TlsTest, LoadFailsForMissingFiles) {
  const std::string missing = File("no-such-cert.pem");
  auto a = TlsContext::Load(missing, File("server-key.pem"));
  ASSERT_FALSE(a.has_value());
  EXPECT_EQ(a.error().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(a.error().message().find(missing), std::string::npos);
  EXPECT_NE(a.error().message().find("No such file"), std::string::npos)
      << a.error().ToString();

  const std::string missing_key = File("no-such-key.pem");
  auto b = TlsContext::Load(File("server-cert.pem"), missing_key);
  ASSERT_FALSE(b.has_value());
  EXPECT_EQ(b.error().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(b.error().message().find(missing_key), std::string::npos)
      << b.error().ToString();
}

// A FIFO named as the key (no writer) is refused at once: a blocking
// open would hold `ztier serve`'s start for good.
TEST_F(TlsTest, LoadRefusesAFifoAtOnce) {
  const std::string fifo = File("key-fifo.pem");
  ::unlink(fifo.c_str());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto loading = std::async(std::launch::async, [&] {
    return TlsContext::Load(File("server-cert.pem"), fifo);
  });
  const bool returned =
      loading.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
  if (!returned) {  // end the open that waits for a writer
    const int w = ::open(fifo.c_str(), O_WRONLY | O_CLOEXEC);
    if (w >= 0) ::close(w);
  }
  auto r = loading.get();
  ::unlink(fifo.c_str());
  EXPECT_TRUE(returned) << "Load waited for a writer of the FIFO";
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.error().message().find("not a regular file"), std::string::npos)
      << r.error().ToString();
}

TEST_F(TlsTest, LoadFailsForKeyOfAnotherCertificate) {
  auto r = TlsContext::Load(File("server-cert.pem"), File("client-key.pem"));
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.error().message().find("server-cert.pem"), std::string::npos);
  EXPECT_NE(r.error().message().find("do not match"), std::string::npos)
      << r.error().ToString();
}

TEST_F(TlsTest, LoadFailsForNonPemFile) {
  const std::string junk = File("junk.pem");
  {
    std::FILE* f = std::fopen(junk.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs("not a certificate\n", f);
    std::fclose(f);
  }
  auto r = TlsContext::Load(junk, File("server-key.pem"));
  std::remove(junk.c_str());
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.error().message().find(junk), std::string::npos)
      << r.error().ToString();
}

// The files follow libnbd's tls-certificates=DIR layout: both leaf
// certificates chain to ca-cert.pem and carry the right purpose.
TEST_F(TlsTest, TestCertificatesChainToTheCa) {
  auto load = [](const std::string& path, gnutls_x509_crt_t* crt) {
    gnutls_datum_t d;
    ASSERT_EQ(gnutls_load_file(path.c_str(), &d), 0) << path;
    ASSERT_EQ(gnutls_x509_crt_init(crt), 0);
    ASSERT_EQ(gnutls_x509_crt_import(*crt, &d, GNUTLS_X509_FMT_PEM), 0)
        << path;
    gnutls_free(d.data);
  };
  auto has_purpose = [](gnutls_x509_crt_t crt, const char* oid) {
    for (unsigned i = 0;; ++i) {
      char buf[128];
      size_t size = sizeof(buf);
      if (gnutls_x509_crt_get_key_purpose_oid(crt, i, buf, &size, nullptr) < 0)
        return false;
      if (std::strcmp(buf, oid) == 0) return true;
    }
  };
  gnutls_x509_crt_t ca = nullptr, server = nullptr, client = nullptr;
  load(File("ca-cert.pem"), &ca);
  load(File("server-cert.pem"), &server);
  load(File("client-cert.pem"), &client);
  ASSERT_NE(client, nullptr);
  unsigned status = 1;
  ASSERT_EQ(gnutls_x509_crt_verify(server, &ca, 1, 0, &status), 0);
  EXPECT_EQ(status, 0u);
  status = 1;
  ASSERT_EQ(gnutls_x509_crt_verify(client, &ca, 1, 0, &status), 0);
  EXPECT_EQ(status, 0u);
  EXPECT_NE(gnutls_x509_crt_check_hostname(server, "localhost"), 0u);
  EXPECT_NE(gnutls_x509_crt_check_ip(server,
                                     reinterpret_cast<const unsigned char*>(
                                         "\x7f\x00\x00\x01"),
                                     4, 0),
            0u);
  EXPECT_TRUE(has_purpose(server, GNUTLS_KP_TLS_WWW_SERVER));
  EXPECT_TRUE(has_purpose(client, GNUTLS_KP_TLS_WWW_CLIENT));
  gnutls_x509_crt_deinit(ca);
  gnutls_x509_crt_deinit(server);
  gnutls_x509_crt_deinit(client);
  for (const char* key : {"ca-key.pem", "server-key.pem", "client-key.pem"}) {
    struct stat st;
    ASSERT_EQ(::stat(File(key).c_str(), &st), 0) << key;
    EXPECT_EQ(st.st_mode & 0777, 0600u) << key;
  }
}

}  // namespace
}  // namespace ztier::nbd
