// nbd_tls_test.cc: NBD over TLS (NBD_OPT_STARTTLS) against real clients:
// libnbd's nbdinfo and nbdcopy over nbds+unix:// and nbds://, with
// certificates made by certtool, and the refusals of --tls=require.
#include <atomic>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nbd_test_util.h"
#include "nbd/protocol.h"
#include "nbd/tls.h"
#include "tls_test_certs.h"

namespace ztier::nbd {
namespace {

using testing::HaveProgram;
using testing::RandomBytes;
using testing::RawClient;
using testing::RunCommand;
using testing::ServerFixture;
using testing::TempDir;
using testing::MakeTestCertificates;

// Certificates for the whole test binary (certtool is slow-ish).
class Pki {
 public:
  static Pki& Get() {
    static Pki* pki = new Pki;
    return *pki;
  }
  bool ok() const { return ok_; }
  const std::string& dir() const { return dir_.path(); }
  const TlsContext* context() const { return context_.get(); }
  std::string error;

 private:
  Pki() {
    Status s = MakeTestCertificates(dir_.path());
    if (!s.ok()) {
      error = s.ToString();
      return;
    }
    auto c = TlsContext::Load(dir_.File("server-cert.pem"),
                              dir_.File("server-key.pem"));
    if (!c.has_value()) {
      error = c.error().ToString();
      return;
    }
    context_ = std::move(*c);
    ok_ = true;
  }
  TempDir dir_;
  std::unique_ptr<TlsContext> context_;
  bool ok_ = false;
};

class NbdTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!HaveProgram("certtool") || !HaveProgram("nbdinfo")) {
      GTEST_SKIP() << "certtool or nbdinfo missing";
    }
    ASSERT_TRUE(Pki::Get().ok()) << Pki::Get().error;
  }
  static NbdServerOptions Options(bool required, const std::string& listen = "") {
    NbdServerOptions o;
    o.tls = Pki::Get().context();
    o.tls_required = required;
    o.listen = listen;
    return o;
  }
  static std::string TlsUri(const ServerFixture& f) {
    return "nbds+unix:///zram0?socket=" + f.socket() +
           "&tls-certificates=" + Pki::Get().dir();
  }
};

TEST_F(NbdTlsTest, NbdinfoAndNbdcopyOverTlsUnix) {
  ServerFixture f(16 << 20, Options(true));
  auto info = RunCommand("nbdinfo --json '" + TlsUri(f) + "' 2>&1");
  ASSERT_EQ(info.exit_code, 0) << info.output;
  EXPECT_NE(info.output.find("\"TLS\": true"), std::string::npos)
      << info.output;
  EXPECT_NE(info.output.find("\"export-size\": 16777216"), std::string::npos);

  if (!HaveProgram("nbdcopy")) GTEST_SKIP() << "nbdcopy missing";
  TempDir tmp;
  const auto data = RandomBytes(8 << 20, 42);
  ASSERT_TRUE(testing::WriteFile(tmp.File("in"), data));
  auto in = RunCommand("nbdcopy '" + tmp.File("in") + "' '" + TlsUri(f) +
                       "' 2>&1");
  ASSERT_EQ(in.exit_code, 0) << in.output;
  auto out = RunCommand("nbdcopy '" + TlsUri(f) + "' '" + tmp.File("out") +
                        "' 2>&1");
  ASSERT_EQ(out.exit_code, 0) << out.output;
  auto back = testing::ReadFile(tmp.File("out"));
  ASSERT_EQ(back.size(), 16u << 20);
  EXPECT_TRUE(std::equal(data.begin(), data.end(), back.begin()));
  // And the device holds it: read on the server side.
  std::vector<std::byte> page(4096);
  ASSERT_TRUE(f.device().Read(4096, page).ok());
  EXPECT_TRUE(std::equal(page.begin(), page.end(), data.begin() + 4096));
}

TEST_F(NbdTlsTest, NbdsOverTcp) {
  ServerFixture f(4 << 20, Options(true, ":0"));
  const int port = f.server().tcp_port();
  ASSERT_GT(port, 0);
  const std::string uri = "nbds://localhost:" + std::to_string(port) +
                          "/zram0?tls-certificates=" + Pki::Get().dir();
  auto info = RunCommand("nbdinfo --json '" + uri + "' 2>&1");
  ASSERT_EQ(info.exit_code, 0) << info.output;
  EXPECT_NE(info.output.find("\"TLS\": true"), std::string::npos);
}

TEST_F(NbdTlsTest, RequireRefusesPlainClients) {
  ServerFixture f(4 << 20, Options(true));
  // A real client that skips TLS is told why.
  auto plain = RunCommand("nbdinfo '" + f.Uri() + "' 2>&1");
  EXPECT_NE(plain.exit_code, 0) << plain.output;
  EXPECT_NE(plain.output.find("TLS"), std::string::npos) << plain.output;
  // The raw protocol: GO without TLS is NBD_REP_ERR_TLS_REQD ...
  RawClient c(f.socket());
  std::uint32_t rep_error = 0;
  EXPECT_LT(c.Go("zram0", &rep_error), 0);
  EXPECT_EQ(rep_error, kRepErrTlsReqd);
  // ... and nothing was served: the device is untouched.
  EXPECT_EQ(f.device().Stats().stored_pages, 0u);
  // A client without fixed newstyle cannot negotiate TLS (proto.md: the
  // server stays in NOTLS mode with it): it is closed at once.
  RawClient old(f.socket());
  NewstyleGreeting g;
  ASSERT_TRUE(old.Recv(&g, sizeof(g)));
  const std::uint32_t no_flags = 0;
  ASSERT_TRUE(old.Send(&no_flags, 4));
  EXPECT_TRUE(old.WaitClosed());
}

TEST_F(NbdTlsTest, OnAllowsBothPlainAndTls) {
  ServerFixture f(4 << 20, Options(false));
  auto plain = RunCommand("nbdinfo --json '" + f.Uri() + "' 2>&1");
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  EXPECT_NE(plain.output.find("\"TLS\": false"), std::string::npos);
  auto secure = RunCommand("nbdinfo --json '" + TlsUri(f) + "' 2>&1");
  ASSERT_EQ(secure.exit_code, 0) << secure.output;
  EXPECT_NE(secure.output.find("\"TLS\": true"), std::string::npos);
}

TEST_F(NbdTlsTest, UntrustedServerIsRejectedByTheClient) {
  // Over TCP libnbd checks the server's certificate against its CA and the
  // host name (over a Unix socket it has no host name to check).
  ServerFixture f(4 << 20, Options(true, ":0"));
  const std::string base = "nbds://localhost:" +
                           std::to_string(f.server().tcp_port()) +
                           "/zram0?tls-certificates=";
  TempDir other;
  ASSERT_TRUE(MakeTestCertificates(other.path()).ok());
  auto r = RunCommand("nbdinfo --size '" + base + other.path() + "' 2>&1");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("verif"), std::string::npos) << r.output;
  // The server survives the failed handshake.
  auto ok = RunCommand("nbdinfo --size '" + base + Pki::Get().dir() + "' 2>&1");
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
}

TEST_F(NbdTlsTest, GarbageAfterStartTlsClosesOnlyThatConnection) {
  NbdServerOptions o = Options(true);
  o.handshake_timeout_ms = 2000;
  ServerFixture f(4 << 20, o);
  RawClient c(f.socket());
  NewstyleGreeting g;
  ASSERT_TRUE(c.Recv(&g, sizeof(g)));
  const std::uint32_t cflags = ToBig(kClientFlagFixedNewstyle);
  ASSERT_TRUE(c.Send(&cflags, 4));
  OptionHeader h = {ToBig(kIHaveOpt), ToBig(kOptStartTls), 0};
  ASSERT_TRUE(c.Send(&h, sizeof(h)));
  OptionReplyHeader rh;
  ASSERT_TRUE(c.Recv(&rh, sizeof(rh)));
  EXPECT_EQ(FromBig(rh.reply_type), kRepAck);
  const auto junk = RandomBytes(2000, 5);
  ASSERT_TRUE(c.Send(junk.data(), junk.size()));
  EXPECT_TRUE(c.WaitClosed());
  auto ok = RunCommand("nbdinfo '" + TlsUri(f) + "' 2>&1");
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
}

// A STARTTLS the server refuses (it carries data) leaves the session in the
// clear, and a server that requires TLS still refuses everything else.
TEST_F(NbdTlsTest, ARefusedStartTlsDoesNotCountAsTls) {
  ServerFixture f(4 << 20, Options(true));
  RawClient c(f.socket());
  NewstyleGreeting g;
  ASSERT_TRUE(c.Recv(&g, sizeof(g)));
  const std::uint32_t cflags = ToBig(kClientFlagFixedNewstyle);
  ASSERT_TRUE(c.Send(&cflags, 4));
  OptionHeader h = {ToBig(kIHaveOpt), ToBig(kOptStartTls), ToBig(1u)};
  ASSERT_TRUE(c.Send(&h, sizeof(h)));
  const std::byte one{1};
  ASSERT_TRUE(c.Send(&one, 1));
  OptionReplyHeader rh;
  ASSERT_TRUE(c.Recv(&rh, sizeof(rh)));
  EXPECT_EQ(FromBig(rh.reply_type), kRepErrInvalid);
  std::vector<std::byte> message(FromBig(rh.length));
  ASSERT_TRUE(c.Recv(message.data(), message.size()));
  // NBD_OPT_GO for zram0, in the clear: name length, name, no info requests.
  const std::string name = "zram0";
  std::vector<std::byte> go(4 + name.size() + 2);
  const std::uint32_t len = ToBig(static_cast<std::uint32_t>(name.size()));
  std::memcpy(go.data(), &len, 4);
  std::memcpy(go.data() + 4, name.data(), name.size());
  OptionHeader gh = {ToBig(kIHaveOpt), ToBig(kOptGo),
                     ToBig(static_cast<std::uint32_t>(go.size()))};
  ASSERT_TRUE(c.Send(&gh, sizeof(gh)));
  ASSERT_TRUE(c.Send(go.data(), go.size()));
  ASSERT_TRUE(c.Recv(&rh, sizeof(rh)));
  EXPECT_EQ(FromBig(rh.reply_type), kRepErrTlsReqd);
}

}  // namespace
}  // namespace ztier::nbd
