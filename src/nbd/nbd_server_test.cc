// nbd_server_test.cc: the NBD server driven by a raw protocol client:
// handshake replies, request validation, bad input, concurrency, limits,
// reset while attached, shutdown.
#include "nbd/nbd_server.h"

#include <malloc.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "nbd/protocol.h"
#include "nbd_test_util.h"
#include "testing/faulty_file.h"
#include "testing/loopback.h"
#include "testing/test_util.h"

namespace ztier::nbd {
namespace {

using testing::GatedReads;
using testing::RandomBytes;
using testing::RawClient;
using testing::ServerFixture;
using testing::WriteBackPageZero;

// The log lines a server writes, kept for a test to read.
class LogLines {
 public:
  std::function<void(const std::string&)> Sink() {
    return [this](const std::string& line) {
      std::lock_guard l(mu_);
      lines_.push_back(line);
    };
  }
  // Waits (up to 5 s) for a line that holds `part`; all lines when there is
  // none, for the failure message.
  bool WaitFor(const std::string& part, std::string* all) {
    for (int i = 0; i < 500; ++i) {
      {
        std::lock_guard l(mu_);
        all->clear();
        for (const std::string& line : lines_) {
          if (line.find(part) != std::string::npos) return true;
          *all += line + "\n";
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }

 private:
  std::mutex mu_;
  std::vector<std::string> lines_;
};

TEST(NbdServerTest, LogSaysWhoConnectedEveryErrorAndWhyItClosed) {
  LogLines log;
  NbdServerOptions options;
  options.log = log.Sink();
  ServerFixture f(1 << 20, options);
  std::string all;
  {
    RawClient c(f.socket());
    ASSERT_EQ(c.Go("zram0"), 1 << 20);
    ASSERT_TRUE(c.SendRequest(kCmdRead, 0, 7, 1 << 20, 4096));  // past the end
    std::uint32_t err = 0;
    std::uint64_t cookie = 0;
    ASSERT_TRUE(c.ReadReply(&err, &cookie));
    EXPECT_EQ(err, kErrInval);
    ASSERT_TRUE(c.SendRequest(kCmdTrim, 0, 8, 0, 1 << 20));
    ASSERT_TRUE(c.ReadReply(&err, &cookie));
    EXPECT_EQ(err, 0u);
    ASSERT_TRUE(c.SendRequest(kCmdDisc, 0, 9, 0, 0));
    EXPECT_TRUE(c.WaitClosed());
  }
  EXPECT_TRUE(log.WaitFor("nbd #1 (unix): connected", &all)) << all;
  EXPECT_TRUE(log.WaitFor("nbd #1 (unix): export zram0 (1048576 bytes)", &all))
      << all;
  EXPECT_TRUE(log.WaitFor("nbd #1 (unix): NBD_CMD_READ offset 1048576 length "
                          "4096: error EINVAL: beyond the end of the export",
                          &all))
      << all;
  EXPECT_TRUE(
      log.WaitFor("nbd #1 (unix): closed: the client sent "
                  "NBD_CMD_DISC (requests: 3, error replies: 1)",
                  &all))
      << all;
  // A client that just goes away, and one that breaks the protocol.
  {
    RawClient c(f.socket());
    ASSERT_EQ(c.Go("zram0"), 1 << 20);
    c.Close();
  }
  EXPECT_TRUE(
      log.WaitFor("nbd #2 (unix): closed: the client closed the "
                  "connection (requests: 0, error replies: 0)",
                  &all))
      << all;
  {
    RawClient c(f.socket());
    ASSERT_EQ(c.Go("zram0"), 1 << 20);
    const char junk[28] = "not an NBD request at all!";
    ASSERT_TRUE(c.Send(junk, sizeof(junk)));
    EXPECT_TRUE(c.WaitClosed());
  }
  EXPECT_TRUE(log.WaitFor("nbd #3 (unix): closed: bad request magic", &all))
      << all;
  // A handshake that ends without an export says why.
  {
    RawClient c(f.socket());
    std::uint32_t rep = 0;
    EXPECT_EQ(c.Go("nope", &rep), -1);
  }
  EXPECT_TRUE(log.WaitFor("nbd #4 (unix): closed during the handshake", &all))
      << all;
  // An export name is the client's: it cannot forge a log line.
  {
    RawClient c(f.socket());
    NewstyleGreeting g;
    ASSERT_TRUE(c.Recv(&g, sizeof(g)));
    const std::uint32_t flags = ToBig(kClientFlagFixedNewstyle);
    ASSERT_TRUE(c.Send(&flags, 4));
    const std::string name = "x\nztier serve: forged";
    const OptionHeader h = {ToBig(kIHaveOpt), ToBig(kOptExportName),
                            ToBig(static_cast<std::uint32_t>(name.size()))};
    ASSERT_TRUE(c.Send(&h, sizeof(h)));
    ASSERT_TRUE(c.Send(name.data(), name.size()));
    EXPECT_TRUE(c.WaitClosed());
  }
  EXPECT_TRUE(
      log.WaitFor("nbd #5 (unix): closed during the handshake: no "
                  "export named 'x\\x0aztier serve: forged'",
                  &all))
      << all;
  EXPECT_EQ(all.find("\nztier serve: forged"), std::string::npos) << all;
}

// A client that takes none of its replies is dropped once a send has
// waited io_timeout_ms, and its close says so: the server shut the socket,
// not the client.
TEST(NbdServerTest, LogSaysWhenASendTimedOut) {
  LogLines log;
  NbdServerOptions options;
  options.io_timeout_ms = 300;
  options.log = log.Sink();
  ServerFixture f(16 << 20, options);
  RawClient c(f.socket());
  ASSERT_EQ(c.Go("zram0"), 16 << 20);
  // 1 MiB reads (on the workers), far more than the socket holds.
  for (std::uint64_t i = 0; i < 16; ++i) {
    ASSERT_TRUE(c.SendRequest(kCmdRead, 0, i, i << 20, 1 << 20));
  }
  std::string all;
  EXPECT_TRUE(log.WaitFor("nbd #1 (unix): closed: sending replies: timed "
                          "out sending after 300 ms (requests: 16",
                          &all))
      << all;
}

TEST(NbdServerTest, GoReportsSizeAndServesReadWrite) {
  ServerFixture f(8 << 20);
  RawClient c(f.socket());
  ASSERT_EQ(c.Go("zram0"), 8 << 20);
  const auto data = RandomBytes(10000, 1);
  std::uint32_t err = 1;
  ASSERT_TRUE(c.Write(4095, data, &err));
  EXPECT_EQ(err, 0u);
  std::vector<std::byte> back;
  ASSERT_TRUE(c.Read(4095, 10000, &back, &err));
  EXPECT_EQ(err, 0u);
  EXPECT_EQ(back, data);
  // The last byte of the export.
  ASSERT_TRUE(c.Write((8 << 20) - 1, std::vector<std::byte>(1, std::byte{7}),
                      &err));
  EXPECT_EQ(err, 0u);
  ASSERT_TRUE(c.Read((8 << 20) - 1, 1, &back, &err));
  EXPECT_EQ(back[0], std::byte{7});
}

TEST(NbdServerTest, EmptyNameSelectsZram0) {
  ServerFixture f(4 << 20);
  ASSERT_TRUE(f.registry().Add("aaa").has_value());  // sorts before zram0
  RawClient c(f.socket());
  EXPECT_EQ(c.Go(""), 4 << 20);
}

TEST(NbdServerTest, UnknownAndUninitialisedExportsAreRefused) {
  ServerFixture f(4 << 20);
  ASSERT_TRUE(f.registry().Add("zram1").has_value());  // no disksize
  {
    RawClient c(f.socket());
    std::uint32_t rep = 0;
    EXPECT_EQ(c.Go("nope", &rep), -1);
    EXPECT_EQ(rep, kRepErrUnknown);
  }
  {
    RawClient c(f.socket());
    std::uint32_t rep = 0;
    EXPECT_EQ(c.Go("zram1", &rep), -1);
    EXPECT_EQ(rep, kRepErrUnknown);
  }
}

// Sends one option and returns the reply types until ACK or an error.
std::vector<std::uint32_t> Option(RawClient& c, std::uint32_t option,
                                  const std::vector<std::byte>& data,
                                  std::vector<std::string>* bodies = nullptr) {
  OptionHeader h = {ToBig(kIHaveOpt), ToBig(option),
                    ToBig(static_cast<std::uint32_t>(data.size()))};
  std::vector<std::uint32_t> types;
  if (!c.Send(&h, sizeof(h)) || (!data.empty() && !c.Send(data.data(), data.size()))) {
    return types;
  }
  for (;;) {
    OptionReplyHeader r;
    if (!c.Recv(&r, sizeof(r))) return types;
    EXPECT_EQ(FromBig(r.magic), kOptReplyMagic);
    EXPECT_EQ(FromBig(r.option), option);
    std::string body(FromBig(r.length), '\0');
    if (!body.empty() && !c.Recv(body.data(), body.size())) return types;
    if (bodies != nullptr) bodies->push_back(body);
    const std::uint32_t t = FromBig(r.reply_type);
    types.push_back(t);
    if (t == kRepAck || (t & kRepFlagError) != 0) return types;
  }
}

void Greet(RawClient& c) {
  NewstyleGreeting g;
  ASSERT_TRUE(c.Recv(&g, sizeof(g)));
  EXPECT_EQ(FromBig(g.nbd_magic), kNbdMagic);
  EXPECT_EQ(FromBig(g.ihaveopt), kIHaveOpt);
  EXPECT_EQ(FromBig(g.flags), kFlagFixedNewstyle | kFlagNoZeroes);
  const std::uint32_t flags = ToBig(kClientFlagFixedNewstyle);
  ASSERT_TRUE(c.Send(&flags, 4));
}

TEST(NbdServerTest, OptionsListInfoUnsupportedAbort) {
  ServerFixture f(4 << 20);
  ASSERT_TRUE(f.registry().Add("zram1").has_value());
  RawClient c(f.socket());
  Greet(c);
  std::vector<std::string> bodies;
  auto types = Option(c, kOptList, {}, &bodies);
  ASSERT_EQ(types.size(), 3u);
  EXPECT_EQ(types[0], kRepServer);
  EXPECT_EQ(bodies[0].substr(4, 5), "zram0");
  EXPECT_EQ(types[2], kRepAck);
  // Meta contexts need STRUCTURED_REPLY first; it takes no data.
  EXPECT_EQ(Option(c, kOptListMetaContext, std::vector<std::byte>(8)),
            std::vector<std::uint32_t>{kRepErrInvalid});
  EXPECT_EQ(Option(c, kOptStructuredReply, std::vector<std::byte>(1)),
            std::vector<std::uint32_t>{kRepErrInvalid});
  EXPECT_EQ(Option(c, kOptStructuredReply, {}),
            std::vector<std::uint32_t>{kRepAck});
  // Unknown options: unsupported, negotiation goes on.
  EXPECT_EQ(Option(c, 4242, std::vector<std::byte>(100)),
            std::vector<std::uint32_t>{kRepErrUnsup});
  // LIST with data is invalid.
  EXPECT_EQ(Option(c, kOptList, std::vector<std::byte>(3)),
            std::vector<std::uint32_t>{kRepErrInvalid});
  // INFO with NAME and BLOCK_SIZE requested.
  std::vector<std::byte> info(4 + 0 + 2 + 4);
  const std::uint16_t n = ToBig<std::uint16_t>(2);
  const std::uint16_t t1 = ToBig(kInfoName), t2 = ToBig(kInfoBlockSize);
  std::memcpy(info.data() + 4, &n, 2);
  std::memcpy(info.data() + 6, &t1, 2);
  std::memcpy(info.data() + 8, &t2, 2);
  bodies.clear();
  types = Option(c, kOptInfo, info, &bodies);
  ASSERT_EQ(types.back(), kRepAck);
  bool saw_name = false, saw_block = false, saw_export = false;
  for (const std::string& b : bodies) {
    if (b.size() < 2) continue;
    const auto t = static_cast<std::uint16_t>(
        (static_cast<unsigned char>(b[0]) << 8) | static_cast<unsigned char>(b[1]));
    if (t == kInfoName) {
      saw_name = true;
      EXPECT_EQ(b.substr(2), "zram0");
    }
    if (t == kInfoExport) {
      saw_export = true;
      InfoExport ie;
      std::memcpy(&ie, b.data(), sizeof(ie));
      EXPECT_EQ(FromBig(ie.export_size), 4u << 20);
      // With structured replies, DF is advertised too.
      EXPECT_EQ(FromBig(ie.transmission_flags),
                kTransmissionFlags | kTFlagSendDf);
    }
    if (t == kInfoBlockSize) {
      saw_block = true;
      InfoBlockSize bs;
      std::memcpy(&bs, b.data(), sizeof(bs));
      EXPECT_EQ(FromBig(bs.minimum), 1u);
      EXPECT_EQ(FromBig(bs.preferred), 4096u);
      EXPECT_EQ(FromBig(bs.maximum), 32u << 20);
    }
  }
  EXPECT_TRUE(saw_name && saw_block && saw_export);
  // A truncated INFO is invalid.
  EXPECT_EQ(Option(c, kOptInfo, std::vector<std::byte>(3)),
            std::vector<std::uint32_t>{kRepErrInvalid});
  // INFO does not attach: reset still works... (device stays usable).
  EXPECT_EQ(f.device().clients(), 0);
  EXPECT_EQ(Option(c, kOptAbort, {}), std::vector<std::uint32_t>{kRepAck});
  EXPECT_TRUE(c.WaitClosed());
}

// proto.md, "Client flags": servers MAY honour fixed newstyle from a client
// that did not set NBD_FLAG_C_FIXED_NEWSTYLE. ztier does: such a client's
// options are answered as any other's (an unknown one NBD_REP_ERR_UNSUP),
// and NBD_OPT_EXPORT_NAME, the one option of plain newstyle, still works.
TEST(NbdServerTest, AClientWithoutFixedNewstyleIsAnsweredAsOne) {
  ServerFixture f(4 << 20);
  RawClient c(f.socket());
  NewstyleGreeting g;
  ASSERT_TRUE(c.Recv(&g, sizeof(g)));
  const std::uint32_t flags = 0;
  ASSERT_TRUE(c.Send(&flags, 4));
  EXPECT_EQ(Option(c, 4242, std::vector<std::byte>(10)),
            std::vector<std::uint32_t>{kRepErrUnsup});
  EXPECT_EQ(Option(c, kOptList, {}),
            (std::vector<std::uint32_t>{kRepServer, kRepAck}));
  OptionHeader h = {ToBig(kIHaveOpt), ToBig(kOptExportName), ToBig(5u)};
  ASSERT_TRUE(c.Send(&h, sizeof(h)));
  ASSERT_TRUE(c.Send("zram0", 5));
  std::vector<std::byte> reply(134);  // with the zeroes: no NO_ZEROES
  ASSERT_TRUE(c.Recv(reply.data(), reply.size()));
  ExportNameReply r;
  std::memcpy(&r, reply.data(), sizeof(r));
  EXPECT_EQ(FromBig(r.export_size), 4u << 20);
  std::uint32_t err = 1;
  ASSERT_TRUE(c.Write(0, RandomBytes(512, 4), &err));
  EXPECT_EQ(err, 0u);
}

// An option longer than the server reads (kMaxOptionLength) is answered
// NBD_REP_ERR_TOO_BIG, its data skipped, and negotiation goes on (proto.md,
// "Termination of the session during option haggling": the server "MUST
// ... simply error inbound options"). Only NBD_OPT_EXPORT_NAME, which has
// no error reply, closes.
TEST(NbdServerTest, AnOverlongOptionIsTooBigAndTheHandshakeGoesOn) {
  ServerFixture f(4 << 20);
  RawClient c(f.socket());
  Greet(c);
  for (const std::uint32_t option :
       {std::uint32_t{kOptGo}, std::uint32_t{kOptList}, 4242u}) {
    EXPECT_EQ(Option(c, option, std::vector<std::byte>(kMaxOptionLength + 1)),
              std::vector<std::uint32_t>{kRepErrTooBig})
        << option;
  }
  EXPECT_EQ(Option(c, kOptInfo, std::vector<std::byte>(4 << 20)),
            std::vector<std::uint32_t>{kRepErrTooBig});
  EXPECT_EQ(Option(c, kOptStructuredReply, {}),
            std::vector<std::uint32_t>{kRepAck});
  RawClient export_name(f.socket());
  Greet(export_name);
  OptionHeader h = {ToBig(kIHaveOpt), ToBig(kOptExportName),
                    ToBig(kMaxOptionLength + 1)};
  ASSERT_TRUE(export_name.Send(&h, sizeof(h)));
  EXPECT_TRUE(export_name.WaitClosed());
}

// An export that exists but cannot be used now (its disksize is being set:
// here its remote backing store is still opening) is NBD_REP_ERR_UNKNOWN,
// "the requested export is not available" (proto.md, "Option reply
// types"), with a message that says why; NBD_REP_ERR_SHUTDOWN is only for
// a server shutting down. The handshake goes on, and once the device is
// ready GO succeeds on the same connection.
TEST(NbdServerTest, ABusyExportIsUnavailableWithAMessageAndTheHandshakeGoesOn) {
  std::mutex mu;
  std::condition_variable cv;
  bool opening = false, release = false;
  DeviceDefaults defaults;
  defaults.is_remote_backing = [](std::string_view p) {
    return p.starts_with("test://");
  };
  defaults.open_remote_backing =
      [&](const std::string&,
          std::uint64_t) -> Result<std::shared_ptr<BackingFile>> {
    std::unique_lock l(mu);
    opening = true;
    cv.notify_all();
    cv.wait(l, [&] { return release; });
    // Copied from a named Status: GCC 12's -Warray-bounds misreads the move
    // of a temporary one into the expected here (TSan build).
    static const Status kNeverOpened = Status::IoError("test: never opened");
    return Err(kNeverOpened);
  };
  ServerFixture f(4 << 20, {}, std::move(defaults));
  std::shared_ptr<Device> d = *f.registry().Add("zram1");
  ASSERT_TRUE(d->SetBackingDev("test://x").ok());
  std::thread set([&] { EXPECT_FALSE(d->SetDisksize(1 << 20).ok()); });
  {
    std::unique_lock l(mu);
    cv.wait(l, [&] { return opening; });
  }
  RawClient c(f.socket());
  Greet(c);
  std::vector<std::byte> go(4 + 5 + 2);
  const std::uint32_t len = ToBig(5u);
  std::memcpy(go.data(), &len, 4);
  std::memcpy(go.data() + 4, "zram1", 5);
  std::vector<std::string> bodies;
  EXPECT_EQ(Option(c, kOptGo, go, &bodies),
            std::vector<std::uint32_t>{kRepErrUnknown});
  ASSERT_EQ(bodies.size(), 1u);
  EXPECT_NE(bodies[0].find("is busy"), std::string::npos) << bodies[0];
  {
    std::lock_guard l(mu);
    release = true;
  }
  cv.notify_all();
  set.join();
  ASSERT_TRUE(d->SetBackingDev("none").ok());
  ASSERT_TRUE(d->SetDisksize(1 << 20).ok());
  bodies.clear();
  const auto types = Option(c, kOptGo, go, &bodies);
  ASSERT_FALSE(types.empty());
  EXPECT_EQ(types.back(), kRepAck);
}

TEST(NbdServerTest, ExportNameWithAndWithoutZeroes) {
  ServerFixture f(4 << 20);
  for (bool no_zeroes : {false, true}) {
    RawClient c(f.socket());
    NewstyleGreeting g;
    ASSERT_TRUE(c.Recv(&g, sizeof(g)));
    const std::uint32_t flags = ToBig(
        kClientFlagFixedNewstyle | (no_zeroes ? kClientFlagNoZeroes : 0u));
    ASSERT_TRUE(c.Send(&flags, 4));
    OptionHeader h = {ToBig(kIHaveOpt), ToBig(kOptExportName), 0};
    ASSERT_TRUE(c.Send(&h, sizeof(h)));
    std::vector<std::byte> reply(no_zeroes ? 10 : 134);
    ASSERT_TRUE(c.Recv(reply.data(), reply.size()));
    ExportNameReply r;
    std::memcpy(&r, reply.data(), sizeof(r));
    EXPECT_EQ(FromBig(r.export_size), 4u << 20);
    std::uint32_t err = 1;
    ASSERT_TRUE(c.Write(0, RandomBytes(512, 3), &err));
    EXPECT_EQ(err, 0u);
  }
  // An unknown name closes the connection (EXPORT_NAME has no error reply).
  RawClient c(f.socket());
  NewstyleGreeting g;
  ASSERT_TRUE(c.Recv(&g, sizeof(g)));
  const std::uint32_t flags = ToBig(kClientFlagFixedNewstyle);
  ASSERT_TRUE(c.Send(&flags, 4));
  OptionHeader h = {ToBig(kIHaveOpt), ToBig(kOptExportName), ToBig(3u)};
  ASSERT_TRUE(c.Send(&h, sizeof(h)));
  ASSERT_TRUE(c.Send("bad", 3));
  EXPECT_TRUE(c.WaitClosed());
}

TEST(NbdServerTest, InvalidRequestsGetEinvalAndConnectionGoesOn) {
  NbdServerOptions o;
  o.max_request_bytes = 1 << 20;
  ServerFixture f(4 << 20, o);
  RawClient c(f.socket());
  ASSERT_EQ(c.Go("zram0"), 4 << 20);
  std::uint32_t err = 0;
  std::uint64_t cookie = 0;
  // Read past the end, and straddling it.
  ASSERT_TRUE(c.SendRequest(kCmdRead, 0, 11, 4 << 20, 1));
  ASSERT_TRUE(c.ReadReply(&err, &cookie));
  EXPECT_EQ(err, kErrInval);
  EXPECT_EQ(cookie, 11u);
  ASSERT_TRUE(c.SendRequest(kCmdRead, 0, 12, (4 << 20) - 100, 4096));
  ASSERT_TRUE(c.ReadReply(&err, &cookie));
  EXPECT_EQ(err, kErrInval);
  // Offset near 2^64: no overflow.
  ASSERT_TRUE(c.SendRequest(kCmdTrim, 0, 13, ~0ull - 10, 4096));
  ASSERT_TRUE(c.ReadReply(&err, &cookie));
  EXPECT_EQ(err, kErrInval);
  // Read over the limit.
  ASSERT_TRUE(c.SendRequest(kCmdRead, 0, 14, 0, (1 << 20) + 1));
  ASSERT_TRUE(c.ReadReply(&err, &cookie));
  EXPECT_EQ(err, kErrInval);
  // A write over the limit, up to 2^25 bytes: its payload is read and
  // dropped, the answer is EINVAL, and the connection goes on (proto.md:
  // such a payload SHOULD NOT be taken for an attack).
  const auto big = RandomBytes((1 << 20) + 4096, 6);
  ASSERT_TRUE(c.SendRequest(kCmdWrite, 0, 20, 0, big.size(), big));
  ASSERT_TRUE(c.ReadReply(&err, &cookie));
  EXPECT_EQ(err, kErrInval);
  EXPECT_EQ(cookie, 20u);
  std::vector<std::byte> zeros;
  ASSERT_TRUE(c.Read(0, 4096, &zeros, &err));
  EXPECT_EQ(err, 0u);
  EXPECT_EQ(zeros, std::vector<std::byte>(4096));  // nothing was written
  // Write past the end: its payload is consumed, the stream stays in sync.
  const auto junk = RandomBytes(8192, 5);
  // The NBD spec asks for ENOSPC here (proto.md, "Error values").
  ASSERT_TRUE(c.SendRequest(kCmdWrite, 0, 15, (4 << 20) - 4096, 8192, junk));
  ASSERT_TRUE(c.ReadReply(&err, &cookie));
  EXPECT_EQ(err, kErrNoSpc);
  EXPECT_EQ(cookie, 15u);
  ASSERT_TRUE(c.SendRequest(kCmdWriteZeroes, 0, 19, 4 << 20, 4096));
  ASSERT_TRUE(c.ReadReply(&err, &cookie));
  EXPECT_EQ(err, kErrNoSpc);
  // Unknown command, BLOCK_STATUS, bad flags.
  ASSERT_TRUE(c.SendRequest(99, 0, 16, 0, 0));
  ASSERT_TRUE(c.ReadReply(&err, &cookie));
  EXPECT_EQ(err, kErrInval);
  ASSERT_TRUE(c.SendRequest(kCmdBlockStatus, 0, 17, 0, 4096));
  ASSERT_TRUE(c.ReadReply(&err, &cookie));
  EXPECT_EQ(err, kErrInval);
  ASSERT_TRUE(c.SendRequest(kCmdRead, kCmdFlagDf, 18, 0, 4096));
  ASSERT_TRUE(c.ReadReply(&err, &cookie));
  EXPECT_EQ(err, kErrInval);
  // Still in sync: a good request works.
  const auto data = RandomBytes(4096, 6);
  ASSERT_TRUE(c.Write(8192, data, &err));
  EXPECT_EQ(err, 0u);
  std::vector<std::byte> back;
  ASSERT_TRUE(c.Read(8192, 4096, &back, &err));
  EXPECT_EQ(back, data);
  // FLUSH, CACHE, TRIM, WRITE_ZEROES with every flag.
  for (auto [type, flags] : {std::pair{kCmdFlush, 0}, std::pair{kCmdCache, 0},
                             std::pair{kCmdTrim, int{kCmdFlagFua}},
                             std::pair{kCmdWriteZeroes,
                                       kCmdFlagNoHole | kCmdFlagFastZero |
                                           kCmdFlagFua}}) {
    ASSERT_TRUE(c.SendRequest(type, static_cast<std::uint16_t>(flags), 20,
                              type == kCmdFlush ? 0 : 8192,
                              type == kCmdFlush ? 0 : 4096));
    ASSERT_TRUE(c.ReadReply(&err, &cookie));
    EXPECT_EQ(err, 0u) << CommandName(type);
  }
  ASSERT_TRUE(c.Read(8192, 4096, &back, &err));
  EXPECT_EQ(back, std::vector<std::byte>(4096));
  // DISC: the server closes.
  ASSERT_TRUE(c.SendRequest(kCmdDisc, 0, 21, 0, 0));
  EXPECT_TRUE(c.WaitClosed());
}

// Opens a second client, writes known data, and checks it at the end.
class Witness {
 public:
  explicit Witness(ServerFixture& f) : c_(f.socket()), data_(RandomBytes(65536, 77)) {
    EXPECT_GT(c_.Go("zram0"), 0);
    std::uint32_t err = 1;
    EXPECT_TRUE(c_.Write(1 << 20, data_, &err));
    EXPECT_EQ(err, 0u);
  }
  void Check() {
    std::vector<std::byte> back;
    std::uint32_t err = 1;
    ASSERT_TRUE(c_.Read(1 << 20, 65536, &back, &err));
    EXPECT_EQ(err, 0u);
    EXPECT_TRUE(back == data_);
  }

 private:
  RawClient c_;
  std::vector<std::byte> data_;
};

TEST(NbdServerTest, BadInputClosesOnlyThatConnection) {
  NbdServerOptions o;
  o.max_request_bytes = 1 << 20;
  ServerFixture f(4 << 20, o);
  Witness w(f);
  {  // Garbage instead of the client flags.
    RawClient c(f.socket());
    NewstyleGreeting g;
    ASSERT_TRUE(c.Recv(&g, sizeof(g)));
    const auto junk = RandomBytes(1000, 8);
    c.Send(junk.data(), junk.size());
    EXPECT_TRUE(c.WaitClosed());
  }
  {  // Garbage during transmission.
    RawClient c(f.socket());
    ASSERT_GT(c.Go("zram0"), 0);
    const auto junk = RandomBytes(1000, 9);
    c.Send(junk.data(), junk.size());
    EXPECT_TRUE(c.WaitClosed());
  }
  {  // A wrong request magic.
    RawClient c(f.socket());
    ASSERT_GT(c.Go("zram0"), 0);
    Request r = {ToBig(0x12345678u), 0, ToBig(kCmdRead), 1, 0, ToBig(4096u)};
    c.Send(&r, sizeof(r));
    EXPECT_TRUE(c.WaitClosed());
  }
  {  // A write payload over 2^25 bytes, which is not drained.
    RawClient c(f.socket());
    ASSERT_GT(c.Go("zram0"), 0);
    c.SendRequest(kCmdWrite, 0, 1, 0, (32u << 20) + 1);
    EXPECT_TRUE(c.WaitClosed());
  }
  for (std::uint32_t len : {4096u, 200000u}) {  // inline and worker writes
    // Disconnect in the middle of a write payload.
    RawClient c(f.socket());
    ASSERT_GT(c.Go("zram0"), 0);
    const auto part = RandomBytes(len / 2, 10);
    c.SendRequest(kCmdWrite, 0, 1, 0, len, part);
    c.Close();
  }
  {  // Disconnect with many reads in flight, never reading the replies.
    RawClient c(f.socket());
    ASSERT_GT(c.Go("zram0"), 0);
    for (int i = 0; i < 200; ++i) c.SendRequest(kCmdRead, 0, i, 0, 65536 * 4);
    c.Close();
  }
  {  // A raw option magic error.
    RawClient c(f.socket());
    NewstyleGreeting g;
    ASSERT_TRUE(c.Recv(&g, sizeof(g)));
    const std::uint32_t flags = ToBig(kClientFlagFixedNewstyle);
    c.Send(&flags, 4);
    OptionHeader h = {ToBig(0x1122334455667788ull), ToBig(kOptGo), 0};
    c.Send(&h, sizeof(h));
    EXPECT_TRUE(c.WaitClosed());
  }
  w.Check();
  EXPECT_TRUE(f.WaitConnections(1));
}

TEST(NbdServerTest, ResetIsRefusedWhileAClientIsAttached) {
  ServerFixture f(4 << 20);
  {
    RawClient c(f.socket());
    ASSERT_GT(c.Go("zram0"), 0);
    const Status s = f.device().Reset();
    EXPECT_EQ(s.code(), StatusCode::kBusy) << s.ToString();
    EXPECT_EQ(f.registry().Remove("zram0").code(), StatusCode::kBusy);
  }
  ASSERT_TRUE(f.WaitConnections(0));
  EXPECT_OK(f.device().Reset());
  // Not initialised now: GO is refused.
  RawClient c(f.socket());
  std::uint32_t rep = 0;
  EXPECT_EQ(c.Go("zram0", &rep), -1);
  EXPECT_EQ(rep, kRepErrUnknown);
}

// Request buffers are the connection's own mappings, not the C library's
// heap: clients that send large requests and leave leave no freed buffers
// in malloc's arenas (glibc keeps a freed 4 MiB block there once its mmap
// threshold has grown past it, connection.h). The heap stays within 1 MiB
// of where it was across five clients of 4 MiB writes and reads.
TEST(NbdServerTest, LargeRequestBuffersAreNotTheHeaps) {
  // The state glibc reaches by itself once a large block is freed (its
  // mmap threshold raised to that block's size, its trim threshold to
  // twice that), set at once so that the test does not depend on which
  // blocks this process freed before. A sanitizer's allocator takes no
  // such setting and reports no heap.
  if (::mallopt(M_MMAP_THRESHOLD, 32 << 20) != 1 ||
      ::mallopt(M_TRIM_THRESHOLD, 64 << 20) != 1 || ::mallinfo2().arena == 0) {
    GTEST_SKIP() << "not glibc's allocator (a sanitizer's)";
  }
  ServerFixture f;
  const auto data = RandomBytes(4 << 20, 13);
  std::vector<std::byte> back(4 << 20);
  // Five clients, one after the other, each writing and reading the whole
  // device in requests of `bytes`.
  auto clients = [&](std::uint32_t bytes) {
    for (int client = 0; client < 5; ++client) {
      RawClient c(f.socket());
      ASSERT_EQ(c.Go("zram0"), 64 << 20);
      for (std::uint64_t offset = 0; offset < (64u << 20); offset += bytes) {
        std::uint32_t err = 0;
        const std::span<const std::byte> part(data.data(), bytes);
        ASSERT_TRUE(c.Write(offset, part, &err));
        ASSERT_EQ(err, 0u);
        ASSERT_TRUE(c.Read(offset, bytes, &back, &err));
        ASSERT_EQ(err, 0u);
        ASSERT_TRUE(std::equal(part.begin(), part.end(), back.begin()));
      }
      c.Close();
      ASSERT_TRUE(f.WaitConnections(0));
    }
  };
  // Small requests first: the arenas of the threads that serve them (each
  // thread's first malloc makes or takes one), and the pool's tables for
  // the whole device, are counted before.
  clients(64 << 10);
  const std::size_t before = ::mallinfo2().arena;
  clients(4 << 20);
  const std::size_t after = ::mallinfo2().arena;
  EXPECT_LT(after, before + (1 << 20)) << before << " -> " << after;
}

// A client whose large requests change size: its spares of 3 MiB (as many
// as max_in_flight_bytes, 6 MiB, lets it keep) make room for 4 MiB ones,
// and every reply is right. The connection's accounting is checked when
// it ends (WaitIdle's asserts).
TEST(NbdServerTest, SparesFollowAChangeOfRequestSize) {
  NbdServerOptions o;
  o.max_in_flight_bytes = 6 << 20;
  ServerFixture f(64 << 20, o);
  RawClient c(f.socket());
  ASSERT_EQ(c.Go("zram0"), 64 << 20);
  const auto data = RandomBytes(4 << 20, 14);
  std::uint32_t err = 0;
  ASSERT_TRUE(c.Write(8 << 20, data, &err));
  ASSERT_EQ(err, 0u);
  std::vector<std::byte> back;
  for (std::uint32_t bytes : {3u << 20, 4u << 20, 3u << 20}) {
    for (std::uint64_t cookie = 1; cookie <= 40; ++cookie) {
      ASSERT_TRUE(c.SendRequest(kCmdRead, 0, cookie, 8 << 20, bytes));
    }
    for (int i = 0; i < 40; ++i) {
      std::uint64_t cookie = 0;
      ASSERT_TRUE(c.ReadReply(&err, &cookie, &back, bytes));
      ASSERT_EQ(err, 0u);
      ASSERT_TRUE(std::equal(back.begin(), back.end(), data.begin()));
    }
  }
  c.Close();
  ASSERT_TRUE(f.WaitConnections(0));
}

// --prealloc: requests within a slot's 64 KiB buffer map nothing, also
// after a larger request took that slot (its buffer then becomes a spare,
// and the slot keeps its preallocated one). One slot, so that every
// request takes it.
TEST(NbdServerTest, PreallocatedSlotBuffersOutliveALargerRequest) {
  NbdServerOptions o;
  o.preallocate = true;
  o.max_in_flight = 1;
  ServerFixture f(64 << 20, o);
  RawClient c(f.socket());
  ASSERT_EQ(c.Go("zram0"), 64 << 20);
  const auto data = RandomBytes(4 << 20, 15);
  std::uint32_t err = 0;
  std::vector<std::byte> back;
  const auto& mapped = f.server().counters().request_buffers_mapped;
  ASSERT_TRUE(c.Read(0, 32 << 10, &back, &err));  // a worker's, in 64 KiB
  EXPECT_EQ(mapped.load(), 0u);
  ASSERT_TRUE(c.Write(0, data, &err));  // larger: one buffer mapped
  ASSERT_EQ(err, 0u);
  EXPECT_EQ(mapped.load(), 1u);
  for (std::uint32_t offset = 0; offset < (1u << 20); offset += 32u << 10) {
    ASSERT_TRUE(c.Read(offset, 32 << 10, &back, &err));
    ASSERT_EQ(err, 0u);
    ASSERT_TRUE(std::equal(back.begin(), back.end(), data.begin() + offset));
  }
  EXPECT_EQ(mapped.load(), 1u);
  c.Close();
  ASSERT_TRUE(f.WaitConnections(0));  // WaitIdle's asserts have run
}

TEST(NbdServerTest, MemLimitIsEnospc) {
  ServerFixture f(16 << 20);
  ASSERT_OK(f.device().SetMemLimit(1 << 20));
  RawClient c(f.socket());
  ASSERT_GT(c.Go("zram0"), 0);
  std::uint32_t err = 0;
  std::uint64_t off = 0;
  for (; off < (16u << 20); off += 65536) {
    ASSERT_TRUE(c.Write(off, RandomBytes(65536, off), &err));
    if (err != 0) break;
  }
  EXPECT_EQ(err, kErrNoSpc);
  EXPECT_LT(off, 16u << 20);
}

// TRIM and WRITE_ZEROES on a worker run in 16 MiB steps (connection.h):
// across the steps' seams and the request's unaligned ends, WRITE_ZEROES
// zeroes exactly its range and TRIM drops the whole pages in it, with one
// reply each.
TEST(NbdServerTest, LongTrimAndWriteZeroesRunInStepsAndReplyOnce) {
  constexpr std::uint64_t kSize = 96 << 20;
  constexpr std::uint64_t kFirst = 5000, kEnd = (80 << 20) + 3000;
  ServerFixture f(kSize);
  RawClient c(f.socket());
  ASSERT_EQ(c.Go("zram0"), static_cast<std::int64_t>(kSize));
  // 64 KiB of data around each place that matters.
  const std::uint64_t around[] = {0,        kFirst,   16 << 20, 32 << 20,
                                  48 << 20, 64 << 20, kEnd,     (88 << 20)};
  for (const std::uint16_t cmd : {kCmdWriteZeroes, kCmdTrim}) {
    SCOPED_TRACE(cmd == kCmdTrim ? "TRIM" : "WRITE_ZEROES");
    std::uint32_t err = 0;
    for (std::uint64_t a : around) {
      const std::uint64_t at = a < 32768 ? 0 : a - 32768;
      ASSERT_TRUE(c.Write(at, RandomBytes(65536, at), &err));
      ASSERT_EQ(err, 0u);
    }
    std::uint64_t cookie = 0;
    ASSERT_TRUE(c.SendRequest(cmd, 0, 77, kFirst, kEnd - kFirst));
    ASSERT_TRUE(c.SendRequest(kCmdFlush, 0, 78, 0, 0));
    ASSERT_TRUE(c.ReadReply(&err, &cookie));
    EXPECT_EQ(err, 0u);
    std::uint64_t cookie2 = 0;
    ASSERT_TRUE(c.ReadReply(&err, &cookie2));
    EXPECT_EQ(cookie + cookie2, 77u + 78u);  // one reply each, either order
    // Zeroed: the exact range (WRITE_ZEROES), or its whole pages (TRIM).
    const std::uint64_t lo = cmd == kCmdTrim ? (kFirst + 4095) / 4096 * 4096
                                              : kFirst;
    const std::uint64_t hi = cmd == kCmdTrim ? kEnd / 4096 * 4096 : kEnd;
    for (std::uint64_t a : around) {
      const std::uint64_t at = a < 32768 ? 0 : a - 32768;
      const auto want = RandomBytes(65536, at);
      std::vector<std::byte> back;
      ASSERT_TRUE(c.Read(at, 65536, &back, &err));
      ASSERT_EQ(err, 0u);
      for (std::uint64_t i = 0; i < 65536; ++i) {
        const std::uint64_t byte = at + i;
        if (byte >= lo && byte < hi) {
          ASSERT_EQ(back[i], std::byte{0}) << "byte " << byte;
        } else if (byte < kFirst || byte >= kEnd) {
          ASSERT_EQ(back[i], want[i]) << "byte " << byte;
        }
      }
    }
  }
}

// One worker, and one client's WRITE_ZEROES of 2 GiB on it, many: another
// client's READ (too large to run inline) is answered after a step of
// each, not after the whole (before the steps it waited for them all).
TEST(NbdServerTest, ALongWriteZeroesLeavesOtherClientsTheirTurn) {
  constexpr std::uint64_t kSize = 4ull << 30;
  NbdServerOptions o;
  o.workers = 1;
  ServerFixture f(kSize, o);
  RawClient a(f.socket()), b(f.socket());
  ASSERT_EQ(a.Go("zram0"), static_cast<std::int64_t>(kSize));
  ASSERT_EQ(b.Go("zram0"), static_cast<std::int64_t>(kSize));
  std::uint32_t err = 0;
  ASSERT_TRUE(b.Write(0, RandomBytes(65536, 9), &err));
  ASSERT_EQ(err, 0u);
  // As many as take about 0.5 s in all, timed from one alone: long enough
  // for the test to look before they end on a loaded machine (4 take 30 ms
  // natively), short of RawClient's 10 s wait under a sanitizer (which
  // zeroes 25 times slower).
  std::uint64_t cookie = 0;
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(a.SendRequest(kCmdWriteZeroes, 0, 1, 1 << 20, 0x80000000u));
  ASSERT_TRUE(a.ReadReply(&err, &cookie));
  const auto one = std::chrono::steady_clock::now() - start;
  const std::uint64_t kLong = std::clamp<std::uint64_t>(
      std::chrono::milliseconds(500) / std::max(one, decltype(one){1}), 4, 60);
  // A FLUSH behind them: its reply (made on A's reader, which waits for
  // no job) says the long requests are queued, so B's READ comes after.
  for (std::uint64_t c = 10; c < 10 + kLong; ++c) {
    ASSERT_TRUE(a.SendRequest(kCmdWriteZeroes, 0, c, 1 << 20, 0x80000000u));
  }
  ASSERT_TRUE(a.SendRequest(kCmdFlush, 0, 3, 0, 0));
  ASSERT_TRUE(a.ReadReply(&err, &cookie));
  ASSERT_EQ(cookie, 3u);
  ASSERT_TRUE(b.SendRequest(kCmdRead, 0, 2, 0, 65536));
  std::vector<std::byte> data;
  ASSERT_TRUE(b.ReadReply(&err, &cookie, &data, 65536));
  EXPECT_EQ(err, 0u);
  EXPECT_EQ(data, RandomBytes(65536, 9));
  // The long requests are still running: no reply for them yet.
  struct pollfd p = {a.fd(), POLLIN, 0};
  EXPECT_EQ(::poll(&p, 1, 0), 0) << "the READ waited for a whole request";
  std::uint64_t cookies = 0;
  for (std::uint64_t i = 0; i < kLong; ++i) {
    ASSERT_TRUE(a.ReadReply(&err, &cookie));
    EXPECT_EQ(err, 0u);
    cookies += cookie;
  }
  EXPECT_EQ(cookies, kLong * 10 + kLong * (kLong - 1) / 2);
}

// A server that stops does not finish its clients' long requests first:
// their replies could not go, so the steps left are dropped. 32 WRITE_ZEROES
// of 4 GiB take turns step by step, so the last 16 MiB of each range would
// be zeroed last (after about 0.5 s natively: room for a loaded machine);
// after Stop() the device's last page keeps its data.
TEST(NbdServerTest, StoppingDropsTheStepsLeftOfLongRequests) {
  constexpr std::uint64_t kSize = 4ull << 30;
  NbdServerOptions o;
  o.workers = 1;
  ServerFixture f(kSize, o);
  const auto last = RandomBytes(4096, 12);
  ASSERT_OK(f.device().Write(kSize - 4096, last));
  RawClient a(f.socket());
  ASSERT_EQ(a.Go("zram0"), static_cast<std::int64_t>(kSize));
  for (std::uint64_t cookie = 1; cookie <= 32; ++cookie) {
    ASSERT_TRUE(
        a.SendRequest(kCmdWriteZeroes, 0, cookie, 1 << 20, 0xfff00000u));
  }
  std::uint32_t err = 0;
  std::uint64_t cookie = 0;
  ASSERT_TRUE(a.SendRequest(kCmdFlush, 0, 33, 0, 0));
  ASSERT_TRUE(a.ReadReply(&err, &cookie));  // all 32 are queued
  ASSERT_EQ(cookie, 33u);
  f.server().Stop();
  std::vector<std::byte> back(4096);
  ASSERT_OK(f.device().Read(kSize - 4096, back));
  EXPECT_EQ(back, last);
}

// A client that leaves with reads queued for the workers: those whose
// replies cannot go are not done. Each one here reaches a written-back page
// whose backing read is slow (the first waits until the client has left, the
// others take 50 ms), as a remote's is during an outage; done, they would hold
// the only worker one after another, and another client's requests would
// wait behind them. 50 ms is well under WorkQueue::kStarvedMs: no extra
// thread takes one of them while the worker finds out that the client left.
TEST(NbdServerTest, AGoneClientsQueuedReadsAreNotDone) {
  constexpr int kReads = 16;
  GatedReads gate(std::chrono::milliseconds(50));
  DeviceDefaults defaults;
  defaults.backing_file_wrap = gate.Wrap();
  NbdServerOptions o;
  o.workers = 1;
  o.inline_max_bytes = 0;  // every read through the worker queue
  ServerFixture f(kReads * 4096, o, std::move(defaults));
  ASSERT_OK(f.device().Reset());
  ASSERT_OK(f.device().SetBackingDev(f.tmp().File("wb")));
  ASSERT_OK(f.device().SetDisksize(kReads * 4096));
  ASSERT_OK(f.device().Write(0, RandomBytes(kReads * 4096, 3)));
  WritebackResult r;
  ASSERT_OK(
      f.device().Writeback("page_indexes=0-" + std::to_string(kReads - 1), &r));
  ASSERT_EQ(r.written, static_cast<std::uint64_t>(kReads));
  {
    RawClient a(f.socket());
    ASSERT_EQ(a.Go("zram0"), kReads * 4096);
    for (int i = 0; i < kReads; ++i) {
      ASSERT_TRUE(a.SendRequest(kCmdRead, 0, i + 1, i * 4096ull, 4096));
    }
    ASSERT_TRUE(gate.WaitReads(1));
  }  // the client leaves while the worker is in its first read
  gate.Open();
  ASSERT_TRUE(f.WaitConnections(0));
  // The first, and those the worker took before its reply failed.
  EXPECT_LE(gate.reads(), 3) << "reads done for a client that had gone";
  // The device still serves a new client.
  RawClient b(f.socket());
  ASSERT_EQ(b.Go("zram0"), kReads * 4096);
  std::uint32_t err = 0;
  std::uint64_t cookie = 0;
  std::vector<std::byte> data;
  ASSERT_TRUE(b.SendRequest(kCmdRead, 0, 7, 4096, 4096));
  ASSERT_TRUE(b.ReadReply(&err, &cookie, &data, 4096));
  EXPECT_EQ(err, 0u);
  const auto all = RandomBytes(kReads * 4096, 3);
  EXPECT_EQ(data,
            std::vector<std::byte>(all.begin() + 4096, all.begin() + 8192));
}

// A read that blocks in the backing store (a remote's outage, say) holds
// the only worker; the next client's read, of a page in RAM, is served by
// an extra worker once it has waited WorkQueue::kStarvedMs, not after the
// blocked read.
TEST(NbdServerTest, AReadBlockedInTheBackingStoreStallsNoOtherClient) {
  GatedReads gate;
  DeviceDefaults defaults;
  defaults.backing_file_wrap = gate.Wrap();
  NbdServerOptions o;
  o.workers = 1;
  o.inline_max_bytes = 0;  // every read through the worker queue
  ServerFixture f(8 * 4096, o, std::move(defaults));
  const auto data = RandomBytes(8 * 4096, 4);
  ASSERT_NO_FATAL_FAILURE(WriteBackPageZero(f, data));
  RawClient a(f.socket());
  ASSERT_EQ(a.Go("zram0"), 8 * 4096);
  ASSERT_TRUE(a.SendRequest(kCmdRead, 0, 1, 0, 4096));  // written back
  ASSERT_TRUE(gate.WaitReads(1));
  RawClient b(f.socket());
  ASSERT_EQ(b.Go("zram0"), 8 * 4096);
  std::uint32_t err = 0;
  std::uint64_t cookie = 0;
  std::vector<std::byte> got;
  ASSERT_TRUE(b.SendRequest(kCmdRead, 0, 2, 4096, 4096));  // in RAM
  ASSERT_TRUE(b.ReadReply(&err, &cookie, &got, 4096))
      << "the second client waited for the first's blocked read";
  EXPECT_EQ(err, 0u);
  EXPECT_EQ(got,
            std::vector<std::byte>(data.begin() + 4096, data.begin() + 8192));
  EXPECT_EQ(gate.reads(), 1);  // the first read is still blocked
  gate.Open();
  ASSERT_TRUE(a.ReadReply(&err, &cookie, &got, 4096));
  EXPECT_EQ(err, 0u);
  EXPECT_EQ(got, std::vector<std::byte>(data.begin(), data.begin() + 4096));
}

// A small request runs on the connection's own thread, unless it may wait
// for the backing store: a READ of a written-back page, or a WRITE or
// WRITE_ZEROES of part of one (which reads it). That one goes to a worker,
// so that the requests behind it on the same connection (here a read from
// RAM) are answered meanwhile. `type` and [offset, offset + length) make
// the request, within page 0, the one written back.
void ExpectNotHeldBehind(std::uint16_t type, std::uint64_t offset,
                         std::uint32_t length) {
  GatedReads gate;
  DeviceDefaults defaults;
  defaults.backing_file_wrap = gate.Wrap();
  NbdServerOptions o;  // small requests inline, by default
  ASSERT_GE(o.inline_max_bytes, 4096u);
  ServerFixture f(8 * 4096, o, std::move(defaults));
  const auto data = RandomBytes(8 * 4096, 5);
  ASSERT_NO_FATAL_FAILURE(WriteBackPageZero(f, data));
  RawClient a(f.socket());
  ASSERT_EQ(a.Go("zram0"), 8 * 4096);
  const std::vector<std::byte> payload(type == kCmdWrite ? length : 0,
                                       std::byte{0x5a});
  ASSERT_TRUE(a.SendRequest(type, 0, 1, offset, length, payload));
  ASSERT_TRUE(gate.WaitReads(1));  // it reads page 0 from the backing store
  ASSERT_TRUE(a.SendRequest(kCmdRead, 0, 2, 4096, 4096));  // in RAM
  std::uint32_t err = 0;
  std::uint64_t cookie = 0;
  std::vector<std::byte> got;
  ASSERT_TRUE(a.ReadReply(&err, &cookie, &got, 4096))
      << "the read from RAM waited for the blocked request";
  EXPECT_EQ(cookie, 2u);
  EXPECT_EQ(err, 0u);
  EXPECT_EQ(got,
            std::vector<std::byte>(data.begin() + 4096, data.begin() + 8192));
  EXPECT_EQ(gate.reads(), 1);  // the first request is still blocked
  gate.Open();
  ASSERT_TRUE(a.ReadReply(&err, &cookie, &got, type == kCmdRead ? length : 0));
  EXPECT_EQ(cookie, 1u);
  EXPECT_EQ(err, 0u);
  std::vector<std::byte> want(data.begin(), data.begin() + 4096);
  if (type == kCmdRead) {
    EXPECT_EQ(got, std::vector<std::byte>(want.begin() + offset,
                                          want.begin() + offset + length));
  } else {
    std::fill_n(want.begin() + offset, length,
                type == kCmdWrite ? std::byte{0x5a} : std::byte{0});
    std::vector<std::byte> page(4096);
    ASSERT_OK(f.device().Read(0, page));
    EXPECT_EQ(page, want);
  }
}

TEST(NbdServerTest, ASmallReadOfAWrittenBackPageHoldsNoRequestBehindIt) {
  ExpectNotHeldBehind(kCmdRead, 0, 4096);
}

TEST(NbdServerTest, APartialWriteOfAWrittenBackPageHoldsNoRequestBehindIt) {
  ExpectNotHeldBehind(kCmdWrite, 100, 200);
  ExpectNotHeldBehind(kCmdWriteZeroes, 4000, 96);
}

// A READ of a written-back page holds the page's slot lock while it waits
// for the backing store. A whole-page TRIM, WRITE or WRITE_ZEROES of that
// page reads nothing, but waits for the lock: it goes to a worker too, so
// that the requests behind it on the same connection (a read from RAM) are
// answered meanwhile. `type` covers page 0, the one written back.
void ExpectWholePageNotHeldBehindARead(std::uint16_t type) {
  GatedReads gate;
  DeviceDefaults defaults;
  defaults.backing_file_wrap = gate.Wrap();
  ServerFixture f(8 * 4096, {}, std::move(defaults));
  const auto data = RandomBytes(8 * 4096, 6);
  ASSERT_NO_FATAL_FAILURE(WriteBackPageZero(f, data));
  RawClient a(f.socket());
  ASSERT_EQ(a.Go("zram0"), 8 * 4096);
  ASSERT_TRUE(a.SendRequest(kCmdRead, 0, 1, 0, 4096));  // written back
  ASSERT_TRUE(gate.WaitReads(1));  // blocked, holding page 0's slot lock
  const std::vector<std::byte> payload(type == kCmdWrite ? 4096 : 0,
                                       std::byte{0x5a});
  ASSERT_TRUE(a.SendRequest(type, 0, 2, 0, 4096, payload));
  ASSERT_TRUE(a.SendRequest(kCmdRead, 0, 3, 4096, 4096));  // in RAM
  SimpleReply reply;
  const bool replied = a.Recv(&reply, sizeof(reply));
  gate.Open();  // else the server's stop waits for the backing read
  ASSERT_TRUE(replied) << CommandName(type)
                       << ": the read from RAM waited for the blocked request";
  EXPECT_EQ(reply.cookie, 3u) << CommandName(type);
  EXPECT_EQ(FromBig(reply.error), 0u);
  std::vector<std::byte> got(4096);
  ASSERT_TRUE(a.Recv(got.data(), got.size()));
  EXPECT_EQ(got,
            std::vector<std::byte>(data.begin() + 4096, data.begin() + 8192));
  // Then the other two, in either order.
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(a.Recv(&reply, sizeof(reply)));
    EXPECT_EQ(FromBig(reply.error), 0u);
    if (reply.cookie == 1) {
      ASSERT_TRUE(a.Recv(got.data(), got.size()));
    }
  }
  ASSERT_OK(f.device().Read(0, got));
  EXPECT_EQ(got, std::vector<std::byte>(
                     4096, type == kCmdWrite ? std::byte{0x5a} : std::byte{0}))
      << CommandName(type);
}

TEST(NbdServerTest, AWholePageRequestHoldsNoRequestBehindAReadOfItsPage) {
  ExpectWholePageNotHeldBehindARead(kCmdTrim);
  ExpectWholePageNotHeldBehindARead(kCmdWrite);
  ExpectWholePageNotHeldBehindARead(kCmdWriteZeroes);
}

// proto.md, NBD_CMD_WRITE_ZEROES: with NBD_CMD_FLAG_FAST_ZERO the server
// MUST fail quickly with ENOTSUP unless it can zero faster than it writes.
// Zeroing part of a written-back page reads it from the backing store (as a
// WRITE would), which may take the backing store's whole timeout: refused
// at once, the page untouched. Whole pages, and pages in RAM, are zeroed.
TEST(NbdServerTest, AFastZeroThatWouldReadTheBackingStoreFailsAtOnce) {
  GatedReads gate;
  DeviceDefaults defaults;
  defaults.backing_file_wrap = gate.Wrap();
  ServerFixture f(8 * 4096, {}, std::move(defaults));
  const auto data = RandomBytes(8 * 4096, 7);
  ASSERT_NO_FATAL_FAILURE(WriteBackPageZero(f, data));
  RawClient a(f.socket());
  ASSERT_EQ(a.Go("zram0"), 8 * 4096);
  std::uint32_t err = 0;
  std::uint64_t cookie = 0;
  ASSERT_TRUE(a.SendRequest(kCmdWriteZeroes, kCmdFlagFastZero, 1, 4000, 96));
  const bool replied = a.ReadReply(&err, &cookie);
  gate.Open();  // the old behaviour: the reply waited for the backing read
  ASSERT_TRUE(replied) << "the fast zero waited for the backing store";
  EXPECT_EQ(cookie, 1u);
  EXPECT_EQ(err, kErrNotSup);
  EXPECT_EQ(gate.reads(), 0);
  std::vector<std::byte> page(4096);
  ASSERT_OK(f.device().Read(0, page));
  EXPECT_EQ(page, std::vector<std::byte>(data.begin(), data.begin() + 4096));
  // Whole pages (the written-back one too) and a part of a page in RAM.
  ASSERT_TRUE(a.SendRequest(kCmdWriteZeroes, kCmdFlagFastZero, 2, 0, 4096));
  ASSERT_TRUE(a.ReadReply(&err, &cookie));
  EXPECT_EQ(err, 0u);
  ASSERT_TRUE(
      a.SendRequest(kCmdWriteZeroes, kCmdFlagFastZero, 3, 4096 + 10, 20));
  ASSERT_TRUE(a.ReadReply(&err, &cookie));
  EXPECT_EQ(err, 0u);
  std::vector<std::byte> want(data.begin(), data.begin() + 2 * 4096);
  std::fill_n(want.begin(), 4096, std::byte{0});
  std::fill_n(want.begin() + 4096 + 10, 20, std::byte{0});
  std::vector<std::byte> got(2 * 4096);
  ASSERT_OK(f.device().Read(0, got));
  EXPECT_EQ(got, want);
}

TEST(NbdServerTest, TheReadMayWaitHintFollowsWrittenBackPages) {
  ServerFixture f(8 * 4096);
  EXPECT_FALSE(f.device().ReadMayWait(0, 4096));  // no backing store
  ASSERT_OK(f.device().Reset());
  ASSERT_OK(f.device().SetBackingDev(f.tmp().File("wb")));
  ASSERT_OK(f.device().SetDisksize(8 * 4096));
  ASSERT_OK(f.device().Write(0, RandomBytes(8 * 4096, 6)));
  EXPECT_FALSE(f.device().ReadMayWait(0, 8 * 4096));
  WritebackResult r;
  ASSERT_OK(f.device().Writeback("page_index=1", &r));
  ASSERT_EQ(r.written, 1u);
  EXPECT_TRUE(f.device().ReadMayWait(4096, 4096));
  EXPECT_TRUE(f.device().ReadMayWait(4000, 200));  // ends in page 1
  EXPECT_FALSE(f.device().ReadMayWait(0, 4096));
  EXPECT_FALSE(f.device().ReadMayWait(2 * 4096, 6 * 4096));
  EXPECT_FALSE(f.device().ReadMayWait(4096, 0));
}

TEST(NbdServerTest, MaxConnectionsRefusesTheExtraOne) {
  NbdServerOptions o;
  o.max_connections = 2;
  ServerFixture f(4 << 20, o);
  RawClient a(f.socket()), b(f.socket());
  ASSERT_GT(a.Go("zram0"), 0);
  ASSERT_GT(b.Go("zram0"), 0);
  RawClient c(f.socket());
  std::uint32_t rep_error = 0;
  EXPECT_LT(c.Go("zram0", &rep_error), 0);
  EXPECT_EQ(rep_error, kRepErrPolicy);
  RawClient silent(f.socket());  // says nothing: closed after a second
  EXPECT_TRUE(silent.WaitClosed());
  a.Close();
  ASSERT_TRUE(f.WaitConnections(1));
  RawClient d(f.socket());
  EXPECT_GT(d.Go("zram0"), 0);
}

// Many clients, each with many requests in flight, checking their own data;
// both the inline path and the worker path.
void HammerTest(std::uint32_t inline_max) {
  NbdServerOptions o;
  o.inline_max_bytes = inline_max;
  o.max_in_flight = 8;
  ServerFixture f(16 << 20, o);
  const int kClients = 4;
  const int kRounds = testing::UnderSanitizer() ? 20 : 100;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kClients; ++t) {
    threads.emplace_back([&, t] {
      RawClient c(f.socket());
      if (c.Go("zram0") <= 0) {
        ++failures;
        return;
      }
      const std::uint64_t base = static_cast<std::uint64_t>(t) * (4 << 20);
      for (int round = 0; round < kRounds; ++round) {
        // 16 pipelined writes of odd sizes, then 16 pipelined reads.
        std::vector<std::vector<std::byte>> bufs;
        for (int i = 0; i < 16; ++i) {
          bufs.push_back(RandomBytes(1000 + 7919 * i % 30000, round * 100 + i + t));
          c.SendRequest(kCmdWrite, 0, i, base + i * 65536,
                        static_cast<std::uint32_t>(bufs[i].size()), bufs[i]);
        }
        for (int i = 0; i < 16; ++i) {
          std::uint32_t err;
          std::uint64_t cookie;
          if (!c.ReadReply(&err, &cookie) || err != 0) ++failures;
        }
        for (int i = 0; i < 16; ++i) {
          c.SendRequest(kCmdRead, 0, i, base + i * 65536,
                        static_cast<std::uint32_t>(bufs[i].size()));
        }
        for (int i = 0; i < 16; ++i) {
          // Replies may come in any order; each carries its cookie.
          SimpleReply r;
          if (!c.Recv(&r, sizeof(r)) || r.error != 0 || r.cookie >= 16) {
            ++failures;
            return;
          }
          std::vector<std::byte> data(bufs[r.cookie].size());
          if (!c.Recv(data.data(), data.size()) || data != bufs[r.cookie]) {
            ++failures;
          }
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST(NbdServerTest, ConcurrentClientsInline) { HammerTest(16 << 10); }
TEST(NbdServerTest, ConcurrentClientsWorkers) { HammerTest(0); }

TEST(NbdServerTest, StopWithClientsConnected) {
  auto f = std::make_unique<ServerFixture>(4 << 20);
  RawClient a(f->socket());
  ASSERT_GT(a.Go("zram0"), 0);
  RawClient b(f->socket());  // still in the handshake
  const std::string path = f->socket();
  f->server().Stop();
  EXPECT_TRUE(a.WaitClosed());
  EXPECT_TRUE(b.WaitClosed());
  struct stat st;
  EXPECT_NE(::lstat(path.c_str(), &st), 0);  // socket file removed
  EXPECT_EQ(f->device().clients(), 0);
}

// Waits (up to 5 s) until `path` is gone: a stopping server removes its
// socket file before it asks its connections to finish.
bool WaitGone(const std::string& path) {
  struct stat st;
  for (int i = 0; i < 500 && ::lstat(path.c_str(), &st) == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return ::lstat(path.c_str(), &st) != 0;
}

// proto.md, "Termination of the session during option haggling": a server
// in the process of being shut down SHOULD answer every option but
// NBD_OPT_ABORT with NBD_REP_ERR_SHUTDOWN, and the client MUST then
// disconnect softly (NBD_OPT_ABORT). A client in the handshake when the
// server stops is answered so, its ABORT gets its ACK, and the stop ends
// with that, not with the grace given to the clients.
TEST(NbdServerTest, AStoppingServerAnswersOptionsWithErrShutdown) {
  ServerFixture f(4 << 20);
  RawClient c(f.socket());
  Greet(c);
  EXPECT_EQ(Option(c, kOptStructuredReply, {}),
            std::vector<std::uint32_t>{kRepAck});
  const auto start = std::chrono::steady_clock::now();
  std::jthread stop([&] { f.server().Stop(); });
  ASSERT_TRUE(WaitGone(f.socket()));
  EXPECT_EQ(Option(c, kOptList, {}),
            std::vector<std::uint32_t>{kRepErrShutdown});
  std::vector<std::byte> go(4 + 5 + 2);
  const std::uint32_t name_length = ToBig<std::uint32_t>(5);
  std::memcpy(go.data(), &name_length, 4);
  std::memcpy(go.data() + 4, "zram0", 5);
  EXPECT_EQ(Option(c, kOptGo, go), std::vector<std::uint32_t>{kRepErrShutdown});
  EXPECT_EQ(Option(c, kOptAbort, {}), std::vector<std::uint32_t>{kRepAck});
  EXPECT_TRUE(c.WaitClosed());
  stop.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, kStopGrace);
  EXPECT_EQ(f.device().clients(), 0);
}

// proto.md, "Terminating the transmission phase": on a shutdown the server
// SHOULD serve the requests in flight before it disconnects, and answer
// the others NBD_ESHUTDOWN. Here a READ waits in the backing store when the
// server stops, holding the connection's one job (max_in_flight 1), and a
// WRITE waits for that job: the READ is served, the WRITE is answered
// ESHUTDOWN and not done, and the connection closes once both replies are
// out.
TEST(NbdServerTest, AStoppingServerServesRequestsInFlightAndRefusesTheRest) {
  GatedReads gate;
  DeviceDefaults defaults;
  defaults.backing_file_wrap = gate.Wrap();
  LogLines log;
  NbdServerOptions o;
  o.workers = 1;
  o.inline_max_bytes = 0;  // the READ and the WRITE go to the workers
  o.max_in_flight = 1;
  o.log = log.Sink();
  ServerFixture f(1 << 20, o, std::move(defaults));
  const auto data = RandomBytes(1 << 20, 21);
  WriteBackPageZero(f, data);
  RawClient a(f.socket());
  ASSERT_EQ(a.Go("zram0"), 1 << 20);
  ASSERT_TRUE(a.SendRequest(kCmdRead, 0, 1, 0, 4096));
  ASSERT_TRUE(gate.WaitReads(1));
  ASSERT_TRUE(
      a.SendRequest(kCmdWrite, 0, 2, 8192, 4096, RandomBytes(4096, 22)));
  std::jthread stop([&] { f.server().Stop(); });
  std::string all;
  EXPECT_TRUE(log.WaitFor("stopping:", &all)) << all;
  gate.Open();
  // Two replies, in either order.
  for (int i = 0; i < 2; ++i) {
    std::uint32_t err = 0;
    std::uint64_t cookie = 0;
    std::vector<std::byte> back;
    ASSERT_TRUE(a.ReadReply(&err, &cookie, &back, 4096)) << "reply " << i;
    if (cookie == 1) {
      EXPECT_EQ(err, 0u);
      EXPECT_EQ(back,
                std::vector<std::byte>(data.begin(), data.begin() + 4096));
    } else {
      EXPECT_EQ(cookie, 2u);
      EXPECT_EQ(err, kErrShutdown);
    }
  }
  EXPECT_TRUE(a.WaitClosed());
  stop.join();
  std::vector<std::byte> back(4096);
  ASSERT_OK(f.device().Read(8192, back));
  EXPECT_EQ(back, std::vector<std::byte>(data.begin() + 8192,
                                         data.begin() + 8192 + 4096));
  EXPECT_TRUE(log.WaitFor("closed: server stopping", &all)) << all;
}

// The start of the two tests below: a server whose one worker holds a READ
// (cookie 1, the first 4 KiB: a written-back page) in the backing store
// until gate.Open(), its client `a` connected, and Stop() begun on `stop`
// (`took`: how long it took, once joined).
struct ReadHeldAtStop {
  static NbdServerOptions Options(LogLines& log) {
    NbdServerOptions o;
    o.workers = 1;
    o.inline_max_bytes = 0;  // the READ goes to the workers
    o.log = log.Sink();
    return o;
  }
  static DeviceDefaults Defaults(GatedReads& gate) {
    DeviceDefaults d;
    d.backing_file_wrap = gate.Wrap();
    return d;
  }
  // ASSERTs: the caller checks HasFatalFailure().
  void Begin(unsigned seed) {
    data = RandomBytes(1 << 20, seed);
    WriteBackPageZero(f, data);
    ASSERT_EQ(a.Go("zram0"), 1 << 20);
    ASSERT_TRUE(a.SendRequest(kCmdRead, 0, 1, 0, 4096));
    ASSERT_TRUE(gate.WaitReads(1));
    const auto start = std::chrono::steady_clock::now();
    stop = std::jthread([this, start] {
      f.server().Stop();
      took = std::chrono::steady_clock::now() - start;
    });
    std::string all;
    ASSERT_TRUE(log.WaitFor("stopping:", &all)) << all;
  }
  // Reads the READ's reply: the page's data.
  void ExpectReadReply() {
    std::uint32_t err = 0;
    std::uint64_t cookie = 0;
    std::vector<std::byte> back;
    ASSERT_TRUE(a.ReadReply(&err, &cookie, &back, 4096));
    EXPECT_EQ(cookie, 1u);
    EXPECT_EQ(err, 0u);
    EXPECT_EQ(back, std::vector<std::byte>(data.begin(), data.begin() + 4096));
  }
  // Sends a FLUSH (cookie 2); true if it could be sent.
  bool SendFlush() { return a.SendRequest(kCmdFlush, 0, 2, 0, 0); }
  void ExpectFlushShutdown() {
    std::uint32_t err = 0;
    std::uint64_t cookie = 0;
    EXPECT_TRUE(a.ReadReply(&err, &cookie));
    EXPECT_EQ(cookie, 2u);
    EXPECT_EQ(err, kErrShutdown);
  }

  GatedReads gate;
  LogLines log;
  ServerFixture f{1 << 20, Options(log), Defaults(gate)};
  std::vector<std::byte> data;
  RawClient a{f.socket()};
  std::jthread stop;
  std::chrono::steady_clock::duration took{};
};

// While a request is in flight, a stopping server still takes what its
// client sends (proto.md: "any subsequently received requests SHOULD be"
// answered NBD_ESHUTDOWN). Stopping receiving at once would make the
// client's next send fail (EPIPE on a Unix socket), and a client such as
// libnbd or the kernel's nbd.ko then drops the connection and fails every
// request it has in flight, a WRITE the server stored included, before
// their replies come.
TEST(NbdServerTest, AStoppingServerTakesRequestsWhileOthersAreInFlight) {
  ReadHeldAtStop h;
  h.Begin(23);
  if (HasFatalFailure()) return;
  const bool sent = h.SendFlush();
  EXPECT_TRUE(sent);
  if (sent) h.ExpectFlushShutdown();
  h.gate.Open();
  h.ExpectReadReply();
  EXPECT_TRUE(h.a.WaitClosed());
  h.stop.join();
}

// A reply that is out is not yet read: a client such as libnbd sends its
// next request without first reading the replies that came meanwhile, and
// once its send fails (EPIPE, if the server stopped receiving on a Unix
// socket) it drops the connection, failing the request whose reply it had
// not read. So a stopping server takes requests until its client has read
// every reply.
TEST(NbdServerTest, AStoppingServerTakesRequestsUntilItsRepliesAreRead) {
  ReadHeldAtStop h;
  h.Begin(24);
  if (HasFatalFailure()) return;
  h.gate.Open();
  // The READ's reply arrives; the client reads none of it yet, and the
  // server has time to do what it does once the reply is out.
  struct pollfd p = {h.a.fd(), POLLIN, 0};
  ASSERT_EQ(::poll(&p, 1, 10'000), 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const bool sent = h.SendFlush();
  EXPECT_TRUE(sent);
  h.ExpectReadReply();
  if (sent) h.ExpectFlushShutdown();
  // Then it closes, not waiting for the grace.
  EXPECT_TRUE(h.a.WaitClosed());
  h.stop.join();
  EXPECT_LT(h.took, kStopGrace);
}

// The grace is a bound: a client that takes none of its replies (no
// io_timeout_ms to end it), and one that says nothing in the handshake,
// hold the stop no longer.
TEST(NbdServerTest, ClientsThatDoNothingHoldTheStopOnlyForTheGrace) {
  NbdServerOptions o;
  o.io_timeout_ms = -1;
  o.handshake_timeout_ms = -1;
  ServerFixture f(16 << 20, o);
  RawClient a(f.socket());
  ASSERT_EQ(a.Go("zram0"), 16 << 20);
  for (std::uint64_t i = 0; i < 16; ++i) {
    ASSERT_TRUE(a.SendRequest(kCmdRead, 0, i + 1, i << 20, 1 << 20));
  }
  RawClient b(f.socket());
  Greet(b);
  ASSERT_TRUE(f.WaitConnections(2));
  const auto start = std::chrono::steady_clock::now();
  f.server().Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - start,
            kStopGrace + std::chrono::seconds(4));
  EXPECT_TRUE(a.WaitClosed());
  EXPECT_TRUE(b.WaitClosed());
}

TEST(NbdServerTest, UnixSocketModeAndLiveOrStalePath) {
  ServerFixture f(4 << 20);
  struct stat st;
  ASSERT_EQ(::lstat(f.socket().c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  // The path of a live server is refused.
  NbdServerOptions o;
  o.unix_path = f.socket();
  auto again = NbdServer::Start(o, &f.registry());
  ASSERT_FALSE(again.has_value());
  EXPECT_EQ(again.error().code(), StatusCode::kBusy);
  // A regular file is never replaced.
  const std::string file = f.tmp().File("plain");
  ASSERT_TRUE(testing::WriteFile(file, RandomBytes(10, 1)));
  o.unix_path = file;
  EXPECT_FALSE(NbdServer::Start(o, &f.registry()).has_value());
  // A stale socket (nobody listening) is replaced.
  const std::string stale = f.tmp().File("stale.sock");
  {
    NbdServerOptions s;
    s.unix_path = stale;
    auto first = NbdServer::Start(s, &f.registry());
    ASSERT_TRUE(first.has_value());
    // Leave the file behind as a crashed server would.
    ASSERT_EQ(::link(stale.c_str(), (stale + ".keep").c_str()), 0);
  }
  ASSERT_EQ(::rename((stale + ".keep").c_str(), stale.c_str()), 0);
  o.unix_path = stale;
  auto second = NbdServer::Start(o, &f.registry());
  EXPECT_TRUE(second.has_value());
}

TEST(NbdServerTest, TcpOnLoopback) {
  DeviceRegistry registry{DeviceDefaults{}};
  auto d = *registry.Add("zram0");
  ASSERT_OK(d->SetDisksize(1 << 20));
  NbdServerOptions o;
  o.listen = ":0";
  auto s = NbdServer::Start(o, &registry);
  ASSERT_TRUE(s.has_value()) << s.error().ToString();
  EXPECT_GT((*s)->tcp_port(), 0);
  const auto r = testing::RunCommand("nbdinfo --size nbd://127.0.0.1:" +
                              std::to_string((*s)->tcp_port()) + "/zram0");
  if (testing::HaveProgram("nbdinfo")) {
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(r.output, "1048576\n");
  }
  // Refused without a DNS lookup: a bad port, no port.
  o.listen = "127.0.0.1:65536";
  EXPECT_FALSE(NbdServer::Start(o, &registry).has_value());
  o.listen = "127.0.0.1";
  EXPECT_FALSE(NbdServer::Start(o, &registry).has_value());
}

// A name that resolves to ::1 and 127.0.0.1 (localhost) is served on both,
// on one port, as nbd-server and nbdkit serve it: a client of either family
// connects.
TEST(NbdServerTest, TcpOnEveryAddressOfTheName) {
  DeviceRegistry registry{DeviceDefaults{}};
  auto d = *registry.Add("zram0");
  ASSERT_OK(d->SetDisksize(1 << 20));
  NbdServerOptions o;
  o.listen = "localhost:0";
  o.listen_addresses = ztier::testing::BothLoopbacks();
  ASSERT_EQ(o.listen_addresses->endpoints.size(), 2u);
  auto s = NbdServer::Start(o, &registry);
  ASSERT_TRUE(s.has_value()) << s.error().ToString();
  const int port = (*s)->tcp_port();
  for (const bool v6 : {true, false}) {
    SCOPED_TRACE(v6);
    const int fd = v6 ? ztier::testing::ConnectTcpLoopback6(port)
                      : ztier::testing::ConnectTcpLoopback(port);
    ASSERT_GE(fd, 0) << std::strerror(errno);
    char magic[8];
    EXPECT_EQ(::recv(fd, magic, sizeof magic, MSG_WAITALL), 8);
    EXPECT_EQ(std::string(magic, 8), "NBDMAGIC");
    ::close(fd);
  }
}

TEST(NbdServerTest, ErrorMapping) {
  EXPECT_EQ(ToNbdError(Status::Ok()), 0u);
  EXPECT_EQ(ToNbdError(Status::ResourceExhausted("x")), kErrNoSpc);
  EXPECT_EQ(ToNbdError(Status::OutOfRange("x")), kErrInval);
  EXPECT_EQ(ToNbdError(Status::InvalidArgument("x")), kErrInval);
  EXPECT_EQ(ToNbdError(Status::Corruption("x")), kErrIo);
  EXPECT_EQ(ToNbdError(Status::IoError("x")), kErrIo);
  EXPECT_EQ(ToNbdError(Status::Unsupported("x")), kErrNotSup);
}

}  // namespace
}  // namespace ztier::nbd
