// nbd_abuse_test.cc: abusive clients against a real server on a Unix socket
// (too many connections, garbage, stalls mid-request, clients that never
// read their replies, the largest requests back to back), each while a
// well-behaved client runs a verified workload on the same server.
//
// The well-behaved client's bound: its workload must finish, every byte
// verified, while the abuse goes on; a server whose workers block on one
// client never lets it finish. Its throughput alone and under abuse is
// printed, not checked: timing is the benchmarks' (`ztier bench nbd`).
#include <poll.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "nbd_test_util.h"
#include "nbd/protocol.h"

namespace ztier::nbd {
namespace {

using testing::HaveProgram;
using testing::RandomBytes;
using testing::RawClient;
using testing::RunCommand;
using testing::ServerFixture;

constexpr std::uint64_t kDisk = 96 << 20;
constexpr std::uint64_t kGoodBase = 64 << 20;  // the good client's area
constexpr std::uint32_t kGoodIo = 128 << 10;  // over inline_max: workers

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

double Failed(const std::string& why) {
  ADD_FAILURE() << "the good client: " << why;
  return -1;
}

// The well-behaved client, on its connection `c`: `rounds` of 8 pipelined
// 128 KiB writes then 8 pipelined reads, each checked. Returns the seconds
// taken, or -1 on any failure (a reply missing, an error, a byte wrong).
double GoodWorkload(RawClient& c, int rounds, std::uint64_t seed) {
  const auto start = Clock::now();
  for (int r = 0; r < rounds; ++r) {
    std::vector<std::vector<std::byte>> bufs;
    for (int i = 0; i < 8; ++i) {
      bufs.push_back(RandomBytes(kGoodIo, seed * 1000 + r * 8 + i));
      if (!c.SendRequest(kCmdWrite, 0, i, kGoodBase + i * kGoodIo, kGoodIo,
                         bufs[i])) {
        return Failed("sending a WRITE");
      }
    }
    for (int i = 0; i < 8; ++i) {
      std::uint32_t err;
      std::uint64_t cookie;
      if (!c.ReadReply(&err, &cookie)) return Failed("no WRITE reply");
      if (err != 0) return Failed("WRITE error " + std::to_string(err));
    }
    for (int i = 0; i < 8; ++i) {
      if (!c.SendRequest(kCmdRead, 0, i, kGoodBase + i * kGoodIo, kGoodIo)) {
        return Failed("sending a READ");
      }
    }
    for (int i = 0; i < 8; ++i) {
      SimpleReply reply;
      if (!c.Recv(&reply, sizeof(reply))) return Failed("no READ reply");
      if (reply.error != 0 || reply.cookie >= 8) {
        return Failed("READ error " + std::to_string(FromBig(reply.error)));
      }
      std::vector<std::byte> data(kGoodIo);
      if (!c.Recv(data.data(), data.size())) return Failed("no READ data");
      if (data != bufs[reply.cookie]) {
        std::size_t at = 0;
        while (data[at] == bufs[reply.cookie][at]) ++at;
        return Failed("READ data differ at byte " + std::to_string(at) +
                      " of the READ of cookie " +
                      std::to_string(reply.cookie) + ", round " +
                      std::to_string(r));
      }
    }
  }
  return Seconds(start);
}

// Waits (up to 10 s) until the server closes `fd`, reading nothing.
bool WaitHangUp(int fd) {
  struct pollfd p = {fd, POLLRDHUP, 0};
  return ::poll(&p, 1, 10000) == 1 && (p.revents & (POLLHUP | POLLRDHUP)) != 0;
}

int Rounds() { return testing::UnderSanitizer() ? 10 : 60; }

// What an abuse loop is given: `stop`, set once the measurement is done,
// and UnderWay(), which it calls each time its abuse has begun (the
// measurement waits for the first).
struct Abuse {
  std::atomic<bool> stop{false};
  std::atomic<bool> under_way{false};
  void UnderWay() {
    under_way.store(true);
    under_way.notify_all();
  }
};

// Runs the good workload alone, then again while `abuse` runs on another
// thread (from when it says it is under way until it is stopped), and
// checks that it finished, verified.
template <typename AbuseLoop>
void WithAbuse(ServerFixture& f, AbuseLoop abuse) {
  RawClient good(f.socket());
  ASSERT_GT(good.Go("zram0"), 0);
  const double alone = GoodWorkload(good, Rounds(), 1);
  ASSERT_GT(alone, 0) << "the good client failed alone";
  Abuse a;
  std::thread abuser([&] {
    abuse(a);
    a.UnderWay();  // one that failed before it began does not hang the wait
  });
  a.under_way.wait(false);
  const double abused = GoodWorkload(good, Rounds(), 2);
  a.stop = true;
  abuser.join();
  ASSERT_GT(abused, 0) << "the good client failed under abuse";
  const double share = alone / abused;
  std::printf("good client: alone %.3f s, under abuse %.3f s: %.2f of its "
              "throughput\n", alone, abused, share);
  // And afterwards, on a new connection: the server is healthy.
  // (Its slot frees once the server has seen the close: retry a while.)
  good.Close();
  std::unique_ptr<RawClient> again;
  for (int i = 0; i < 100; ++i) {
    again = std::make_unique<RawClient>(f.socket());
    if (again->Go("zram0") > 0) break;
    again.reset();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_NE(again, nullptr);
  EXPECT_GT(GoodWorkload(*again, 2, 3), 0);
}

NbdServerOptions Options() {
  NbdServerOptions o;
  o.workers = 2;
  o.max_connections = 16;
  o.io_timeout_ms = 1500;
  o.handshake_timeout_ms = 1500;
  return o;
}

TEST(NbdAbuseTest, OverTheConnectionLimitIsRefusedPolitely) {
  NbdServerOptions o = Options();
  o.max_connections = 4;
  ServerFixture f(kDisk, o);
  std::vector<std::unique_ptr<RawClient>> held;
  for (int i = 0; i < 3; ++i) {
    held.push_back(std::make_unique<RawClient>(f.socket()));
    ASSERT_GT(held.back()->Go("zram0"), 0);
  }
  ASSERT_TRUE(f.WaitConnections(3));
  // The fourth is the good client (WithAbuse connects it before the abuse
  // starts); every other is refused with a reason.
  std::atomic<int> refused{0}, other{0};
  WithAbuse(f, [&](Abuse& a) {
    while (!a.stop) {
      RawClient extra(f.socket());
      std::uint32_t rep_error = 0;
      if (extra.Go("zram0", &rep_error) < 0 && rep_error == kRepErrPolicy) {
        ++refused;
      } else {
        ++other;
      }
      a.UnderWay();
    }
  });
  EXPECT_GT(refused.load(), 0);
  EXPECT_EQ(other.load(), 0);
  // A real client says it was refused by policy.
  if (HaveProgram("nbdinfo")) {
    // WithAbuse's last connection closes as it returns: until the server
    // has seen that, a fourth client would be refused too.
    ASSERT_TRUE(f.WaitConnections(3));
    RawClient fourth(f.socket());
    ASSERT_GT(fourth.Go("zram0"), 0);
    ASSERT_TRUE(f.WaitConnections(4));
    const auto r = RunCommand("nbdinfo --size '" + f.Uri() + "' 2>&1");
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.output.find("policy"), std::string::npos) << r.output;
  }
}

TEST(NbdAbuseTest, GarbageAtEveryStage) {
  ServerFixture f(kDisk, Options());
  WithAbuse(f, [&](Abuse& a) {
    std::uint64_t seed = 100;
    while (!a.stop) {
      const auto junk = RandomBytes(4096, ++seed);
      {  // before the handshake
        RawClient c(f.socket());
        c.Send(junk.data(), junk.size());
        c.WaitClosed();
      }
      {  // in the transmission phase: a bad magic after a good request
        RawClient c(f.socket());
        if (c.Go("zram0") > 0) {
          std::uint32_t err;
          std::vector<std::byte> out;
          c.Read(0, 4096, &out, &err);
          c.Send(junk.data(), junk.size());
          c.WaitClosed();
        }
      }
      a.UnderWay();
    }
  });
}

TEST(NbdAbuseTest, StalledClientsAreTimedOutIdleOnesAreNot) {
  ServerFixture f(kDisk, Options());
  RawClient idle(f.socket());
  ASSERT_GT(idle.Go("zram0"), 0);
  WithAbuse(f, [&](Abuse& a) {
    while (!a.stop) {
      // Mid-handshake: greeting read, nothing sent.
      RawClient quiet(f.socket());
      // Mid-request: a WRITE header and half its payload.
      RawClient half(f.socket());
      if (half.Go("zram0") > 0) {
        const auto payload = RandomBytes(32 << 10, 7);
        Request r = {};
        r.magic = ToBig(kRequestMagic);
        r.type = ToBig(kCmdWrite);
        r.length = ToBig<std::uint32_t>(64 << 10);
        half.Send(&r, sizeof(r));
        half.Send(payload.data(), payload.size());
      }
      a.UnderWay();
      const auto start = Clock::now();
      EXPECT_TRUE(quiet.WaitClosed());
      EXPECT_TRUE(half.WaitClosed());
      EXPECT_LT(Seconds(start), 8.0);
    }
  });
  // Idle far longer than the timeouts: still served.
  std::uint32_t err = 1;
  ASSERT_TRUE(idle.Write(4096, RandomBytes(4096, 9), &err));
  EXPECT_EQ(err, 0u);
}

// The handshake's time limit bounds the whole handshake: a client sending
// an option's data a byte at a time, each within the limit of one wait,
// is still cut off once the handshake's time is up.
TEST(NbdAbuseTest, AHandshakeSentSlowlyEndsAtItsDeadline) {
  ServerFixture f(kDisk, Options());  // handshake_timeout_ms 1500
  RawClient c(f.socket());
  NewstyleGreeting g;
  ASSERT_TRUE(c.Recv(&g, sizeof(g)));
  const std::uint32_t cflags = ToBig(kClientFlagFixedNewstyle);
  ASSERT_TRUE(c.Send(&cflags, sizeof(cflags)));
  const OptionHeader h = {ToBig(kIHaveOpt), ToBig(kOptGo), ToBig(1000u)};
  ASSERT_TRUE(c.Send(&h, sizeof(h)));
  const auto start = Clock::now();
  bool closed = false;
  for (int i = 0; i < 1000 && !closed && Seconds(start) < 20; ++i) {
    const char byte = 0;
    if (!c.Send(&byte, 1)) break;  // the server closed
    struct pollfd p = {c.fd(), POLLIN, 0};
    closed = ::poll(&p, 1, 400) > 0;  // EOF (or a reply) ends the drip
  }
  EXPECT_TRUE(c.WaitClosed());
  EXPECT_LT(Seconds(start), 6.0);
}

TEST(NbdAbuseTest, ClientsThatNeverReadTheirReplies) {
  ServerFixture f(kDisk, Options());
  WithAbuse(f, [&](Abuse& a) {
    while (!a.stop) {
      // Pipelines 1 MiB reads (worker path) and reads nothing back, until
      // the server stops reading from it; then it is dropped after
      // io_timeout. Two at once: as many as there are workers.
      std::vector<std::thread> bad;
      for (int b = 0; b < 2; ++b) {
        bad.emplace_back([&, b] {
          RawClient c(f.socket());
          int small = 4096;
          ::setsockopt(c.fd(), SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
          if (c.Go("zram0") <= 0) return;
          for (int i = 0; i < 200 && !a.stop; ++i) {
            if (!c.SendRequest(kCmdRead, 0, i, (b * 8 + i % 8) << 20,
                               1 << 20)) {
              break;
            }
          }
          a.UnderWay();
          EXPECT_TRUE(WaitHangUp(c.fd()));
        });
      }
      for (auto& t : bad) t.join();
    }
  });
}

TEST(NbdAbuseTest, LargestRequestsBackToBack) {
  NbdServerOptions o = Options();
  o.max_request_bytes = 8 << 20;
  ServerFixture f(kDisk, o);
  WithAbuse(f, [&](Abuse& a) {
    RawClient c(f.socket());
    ASSERT_GT(c.Go("zram0"), 0);
    const auto big = RandomBytes(8 << 20, 11);
    std::uint64_t cookie = 0;
    while (!a.stop) {
      // Four writes pipelined, then four reads, all of the maximum size.
      for (int i = 0; i < 4; ++i) {
        ASSERT_TRUE(c.SendRequest(kCmdWrite, 0, ++cookie,
                                  static_cast<std::uint64_t>(i) * (8 << 20),
                                  8 << 20, big));
      }
      for (int i = 0; i < 4; ++i) {
        std::uint32_t err;
        std::uint64_t k;
        ASSERT_TRUE(c.ReadReply(&err, &k));
        ASSERT_EQ(err, 0u);
      }
      std::vector<std::byte> back;
      std::uint32_t err = 1;
      ASSERT_TRUE(c.Read(8 << 20, 8 << 20, &back, &err));
      ASSERT_EQ(err, 0u);
      ASSERT_TRUE(back == big);
      a.UnderWay();
    }
    // One over the maximum: the connection is closed, not served (the
    // payload may not all go out before it is).
    Request r = {};
    r.magic = ToBig(kRequestMagic);
    r.type = ToBig(kCmdWrite);
    r.length = ToBig<std::uint32_t>((8 << 20) + 1);
    ASSERT_TRUE(c.Send(&r, sizeof(r)));
    EXPECT_TRUE(c.WaitClosed());
  });
}

}  // namespace
}  // namespace ztier::nbd
