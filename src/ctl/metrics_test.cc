// metrics_test.cc: the Prometheus exporter end to end: RenderMetrics over a
// real registry, served by MetricsServer over real TCP and Unix sockets,
// checked by the real `promtool check metrics` and curl, values compared with
// Device::Show*(); then the NBD counters moved by a raw NBD client.
#include "metrics.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "../nbd/nbd_test_util.h"  // nbd's test helper (src/nbd)
#include "ctl/metrics_server.h"
#include "nbd/protocol.h"
#include "testing/loopback.h"
#include "testing/test_util.h"

namespace ztier::ctl {
namespace {

namespace fs = std::filesystem;
using nbd::testing::CommandResult;
using nbd::testing::HaveProgram;
using nbd::testing::RunCommand;
using nbd::testing::TempDir;
using ztier::testing::ConnectTcpLoopback;

// ---- raw HTTP clients ----

int ConnectUnix(const std::string& path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::memcpy(a.sun_path, path.data(), path.size());
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Everything the peer sends until it closes, waiting at most `ms` in all;
// nullopt on timeout.
std::optional<std::string> ReadToEof(int fd, int ms = 10000) {
  std::string out;
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    if (left <= 0) return std::nullopt;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left)) <= 0) continue;
    char buf[8192];
    const ssize_t r = ::recv(fd, buf, sizeof(buf), 0);
    if (r <= 0) return out;  // EOF (or a reset: what came is what we have)
    out.append(buf, static_cast<std::size_t>(r));
  }
}

struct HttpResponse {
  int status = 0;
  std::string head;  // status line and headers
  std::string body;
};

HttpResponse Parse(const std::string& raw) {
  HttpResponse r;
  const std::size_t end = raw.find("\r\n\r\n");
  if (end == std::string::npos || raw.rfind("HTTP/1.1 ", 0) != 0) return r;
  r.head = raw.substr(0, end + 2);
  r.body = raw.substr(end + 4);
  r.status = std::atoi(raw.c_str() + 9);
  return r;
}

// Sends `request` raw on a fresh connection and reads the reply to EOF.
HttpResponse Exchange(int fd, const std::string& request) {
  if (fd < 0) return {};
  if (!request.empty()) {
    EXPECT_EQ(::send(fd, request.data(), request.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(request.size()));
  }
  std::optional<std::string> raw = ReadToEof(fd);
  ::close(fd);
  EXPECT_TRUE(raw.has_value()) << "no reply within 10 s to: " << request;
  return Parse(raw.value_or(""));
}

HttpResponse TcpRequest(int port, const std::string& request) {
  return Exchange(ConnectTcpLoopback(port), request);
}

std::string Get(const std::string& path) {
  return "GET " + path + " HTTP/1.1\r\nHost: localhost\r\n\r\n";
}

// ---- promtool ----

// Runs the real `promtool check metrics` on `text`; "" when it is happy,
// else what it said. No promtool is a failure, not a skip.
std::string PromtoolProblems(const TempDir& tmp, const std::string& text) {
  if (!HaveProgram("promtool")) {
    return "promtool is not installed: it comes with Debian's prometheus "
           "package (`make deps`, or apt-get install prometheus)";
  }
  const std::string file = tmp.File("scrape.txt");
  std::ofstream(file) << text;
  const CommandResult r = RunCommand("promtool check metrics < " + file);
  if (r.exit_code == 0 && r.output.empty()) return "";
  return "promtool exit " + std::to_string(r.exit_code) + ": " + r.output;
}

// ---- reading the exposition ----

// The value of the sample `name{labels}`, as text; nullopt if absent.
std::optional<std::string> SampleValue(const std::string& text,
                                       const std::string& series) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(series + " ", 0) == 0) return line.substr(series.size() + 1);
  }
  return std::nullopt;
}

std::vector<std::string> Words(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

// Column metric names of each zram file, in file order (docs/metrics.md).
const std::vector<std::string> kMmColumns = {
    "orig_data_size_bytes",  "compr_data_size_bytes",
    "mem_used_total_bytes",  "mem_limit_bytes",
    "mem_used_max_bytes",    "same_pages",
    "pages_compacted_total", "huge_pages",
    "huge_pages_since_total"};
const std::vector<std::string> kIoColumns = {
    "failed_reads_total", "failed_writes_total", "invalid_io_total",
    "notify_free_total"};
const std::vector<std::string> kBdColumns = {
    "bd_count_pages", "bd_reads_pages_total", "bd_writes_pages_total"};

// Every column of `show` (a Show*() text, "version:" dropped) equals the
// sample ztier_zram_<column>{device="name"} of `text`.
void ExpectColumns(const std::string& text, const std::string& device,
                   const std::vector<std::string>& columns,
                   const std::string& show) {
  std::vector<std::string> words = Words(show);
  if (!words.empty() && words[0] == "version:") words.erase(words.begin());
  ASSERT_EQ(words.size(), columns.size()) << show;
  for (std::size_t i = 0; i < columns.size(); ++i) {
    const std::string series =
        "ztier_zram_" + columns[i] + "{device=\"" + device + "\"}";
    EXPECT_EQ(SampleValue(text, series), std::optional<std::string>(words[i]))
        << series << " vs " << show;
  }
}

// ---- fixture: two devices, one written, one not ----

class MetricsTest : public ::testing::Test {
 protected:
  MetricsTest() : registry_(DeviceDefaults{}) {}

  void SetUp() override {
    auto a = registry_.Add("zram0");
    ASSERT_TRUE(a.has_value());
    zram0_ = *a;
    ASSERT_OK(zram0_->SetRecompAlgorithm("algo=zstd priority=1"));
    ASSERT_OK(zram0_->SetDisksize(8 << 20));
    // Compressible text, a same-filled page and an incompressible page: the
    // columns get distinct non-zero values.
    std::vector<std::byte> text(64 * kPageSize);
    for (std::size_t i = 0; i < text.size(); ++i) {
      text[i] = static_cast<std::byte>("metrics of ztier "[i % 17]);
    }
    ASSERT_OK(zram0_->Write(0, text));
    std::vector<std::byte> same(kPageSize, std::byte{0x5a});
    ASSERT_OK(zram0_->Write(100 * kPageSize, same));
    ASSERT_OK(zram0_->Write(101 * kPageSize,
                            nbd::testing::RandomBytes(kPageSize, 7)));
    std::vector<std::byte> out(kPageSize);
    ASSERT_OK(zram0_->Read(0, out));
    ASSERT_OK(zram0_->Trim(10 * kPageSize, kPageSize));

    auto b = registry_.Add("zram1");
    ASSERT_TRUE(b.has_value());
    zram1_ = *b;
    ASSERT_OK(zram1_->SetMemLimit(4 << 20));  // shown by mm_stat before init
  }

  Result<std::unique_ptr<MetricsServer>> StartServer(
      MetricsServerOptions options) {
    return MetricsServer::Start(options, &registry_, nullptr);
  }

  // 400 devices more, for a /metrics reply of several hundred KiB (more
  // than a socket takes at once), and a server on a Unix socket in `o`
  // with max_clients clients and a write timeout longer than any test.
  Result<std::unique_ptr<MetricsServer>> StartWithALargeReply(
      MetricsServerOptions* o, std::size_t max_clients) {
    for (int i = 0; i < 400; ++i) {
      if (!registry_.Add("many" + std::to_string(i)).has_value()) {
        ADD_FAILURE() << "device many" << i;
      }
    }
    EXPECT_GT(RenderMetrics(registry_, nullptr).size(), 512u << 10);
    o->unix_path = tmp_.File("m.sock");
    o->max_clients = max_clients;
    o->write_timeout_ms = 60'000;
    return StartServer(*o);
  }

  TempDir tmp_;
  DeviceRegistry registry_;
  std::shared_ptr<Device> zram0_;
  std::shared_ptr<Device> zram1_;
};

// Every family in `text` (its "# TYPE NAME" line) is in docs/metrics.md's
// tables, as `NAME`: the reference lists every metric.
void ExpectFamiliesDocumented(const std::string& text) {
  std::ifstream f(std::string(ZTIER_SOURCE_DIR) + "/docs/metrics.md");
  ASSERT_TRUE(f) << "docs/metrics.md";
  const std::string doc((std::istreambuf_iterator<char>(f)),
                        std::istreambuf_iterator<char>());
  std::istringstream in(text);
  std::string line;
  int families = 0;
  while (std::getline(in, line)) {
    if (line.rfind("# TYPE ", 0) != 0) continue;
    ++families;
    const std::string name = Words(line)[2];
    EXPECT_NE(doc.find("| `" + name + "`"), std::string::npos)
        << name << " is not in docs/metrics.md";
  }
  EXPECT_GT(families, 0);
}

TEST_F(MetricsTest, RenderedValuesEqualTheShowTextsAndPassPromtool) {
  const std::string text = RenderMetrics(registry_, nullptr);
  EXPECT_EQ(PromtoolProblems(tmp_, text), "") << text;
  for (const auto& dev : {zram0_, zram1_}) {
    SCOPED_TRACE(dev->name());
    ExpectColumns(text, dev->name(), kMmColumns, dev->ShowMmStat());
    ExpectColumns(text, dev->name(), kIoColumns, dev->ShowIoStat());
    ExpectColumns(text, dev->name(), kBdColumns, dev->ShowBdStat());
    ExpectColumns(text, dev->name(),
                  {"debug_stat_version", "writestall_total", "miss_free_total"},
                  dev->ShowDebugStat());
  }
  // Not all zeros: the written device shows its data.
  EXPECT_NE(
      SampleValue(text, "ztier_zram_orig_data_size_bytes{device=\"zram0\"}"),
      std::optional<std::string>("0"));
  EXPECT_EQ(SampleValue(text, "ztier_zram_same_pages{device=\"zram0\"}"),
            std::optional<std::string>("1"));
  EXPECT_EQ(SampleValue(text, "ztier_zram_huge_pages{device=\"zram0\"}"),
            std::optional<std::string>("1"));
  EXPECT_EQ(SampleValue(text, "ztier_zram_notify_free_total{device=\"zram0\"}"),
            std::optional<std::string>("1"));
  EXPECT_EQ(SampleValue(text, "ztier_zram_disksize_bytes{device=\"zram0\"}"),
            std::optional<std::string>(std::to_string(8 << 20)));
  EXPECT_EQ(SampleValue(text, "ztier_zram_initstate{device=\"zram0\"}"),
            std::optional<std::string>("1"));
  EXPECT_EQ(SampleValue(text,
                        "ztier_zram_comp_algorithm_info{device=\"zram0\","
                        "algorithm=\"lz4\"}"),
            std::optional<std::string>("1"));
  // The uninitialised device: zeros, but for the mem_limit it was given.
  EXPECT_EQ(SampleValue(text, "ztier_zram_initstate{device=\"zram1\"}"),
            std::optional<std::string>("0"));
  EXPECT_EQ(SampleValue(text, "ztier_zram_disksize_bytes{device=\"zram1\"}"),
            std::optional<std::string>("0"));
  EXPECT_EQ(
      SampleValue(text, "ztier_zram_orig_data_size_bytes{device=\"zram1\"}"),
      std::optional<std::string>("0"));
  EXPECT_EQ(SampleValue(text, "ztier_zram_mem_limit_bytes{device=\"zram1\"}"),
            std::optional<std::string>(std::to_string(4 << 20)));
  // No NBD server given: no NBD families.
  EXPECT_EQ(text.find("ztier_nbd_"), std::string::npos);
  // Each family has HELP and TYPE once, before its samples.
  std::istringstream in(text);
  std::string line;
  std::string family;
  int families = 0;
  while (std::getline(in, line)) {
    if (line.rfind("# HELP ", 0) == 0) {
      family = Words(line)[2];
      ++families;
      ASSERT_TRUE(std::getline(in, line));
      EXPECT_EQ(line.rfind("# TYPE " + family + " ", 0), 0u) << line;
      continue;
    }
    EXPECT_EQ(line.rfind(family, 0), 0u) << line << " outside its family";
  }
  // 10: recompression, dictionaries, units (and their reclaims), lost
  // backing blocks
  EXPECT_EQ(families, 4 + 4 + 9 + 4 + 10 + 3);
  ExpectFamiliesDocumented(text);
}

// A column past INT64_MAX (a mem_limit as large as a config may give) is
// rendered as it is shown, never the end of the scrape or of the server.
TEST_F(MetricsTest, ColumnsPastInt64AreRendered) {
  const std::uint64_t huge = std::uint64_t{1} << 63 | 4096;
  ASSERT_OK(zram1_->SetMemLimit(huge));
  const std::string text = RenderMetrics(registry_, nullptr);
  EXPECT_EQ(SampleValue(text, "ztier_zram_mem_limit_bytes{device=\"zram1\"}"),
            std::optional<std::string>(std::to_string(huge)));
  ExpectColumns(text, "zram1", kMmColumns, zram1_->ShowMmStat());
}

TEST_F(MetricsTest, RecompressionCountersAndPagesPerPriority) {
  RecompressResult r;
  ASSERT_OK(zram0_->Recompress("", &r));
  // lz4's small objects and the random page: zstd wins no smaller class.
  ASSERT_GT(r.incompressible, 0u);
  const std::string text = RenderMetrics(registry_, nullptr);
  EXPECT_EQ(PromtoolProblems(tmp_, text), "") << text;
  const PageStoreStats st = zram0_->Stats();
  const auto value = [&](const std::string& series) {
    return SampleValue(text, series).value_or("missing");
  };
  const std::string dev = "{device=\"zram0\"}";
  EXPECT_EQ(value("ztier_zram_recompress_attempts_total" + dev),
            std::to_string(r.attempted));
  EXPECT_EQ(value("ztier_zram_recompressed_pages_total" + dev),
            std::to_string(r.recompressed));
  EXPECT_EQ(value("ztier_zram_incompressible_pages" + dev),
            std::to_string(r.incompressible));
  EXPECT_EQ(st.incompressible_pages, r.incompressible);
  EXPECT_EQ(value("ztier_zram_priority_pages{device=\"zram0\",priority=\"0\","
                  "algorithm=\"lz4\"}"),
            std::to_string(st.priority_pages[0]));
  EXPECT_EQ(value("ztier_zram_priority_pages{device=\"zram0\",priority=\"1\","
                  "algorithm=\"zstd\"}"),
            std::to_string(st.priority_pages[1]));
  EXPECT_EQ(st.priority_pages[1], r.recompressed);
  // Only configured priorities are listed.
  EXPECT_EQ(text.find("priority=\"2\""), std::string::npos);
  EXPECT_EQ(value("ztier_zram_incompressible_pages{device=\"zram1\"}"), "0");
}

TEST_F(MetricsTest, DictionaryGauges) {
  const corpus::PageSet& set = testing::TestCorpus("anon-python");
  const auto write_all = [&] {
    for (std::size_t i = 0; i < 1024; ++i) {
      ASSERT_OK(zram0_->Write((i + 1024) * kPageSize, set.page(i)));
    }
  };
  write_all();
  auto info = zram0_->TrainDictionary("4K");
  ASSERT_TRUE(info.has_value()) << info.error().ToString();
  write_all();
  const std::string text = RenderMetrics(registry_, nullptr);
  EXPECT_EQ(PromtoolProblems(tmp_, text), "") << text;
  const PageStoreStats st = zram0_->Stats();
  const std::string dev = "{device=\"zram0\"}";
  EXPECT_EQ(SampleValue(text, "ztier_zram_dictionary_bytes" + dev),
            std::optional<std::string>(std::to_string(info->memory)));
  EXPECT_GT(st.dict_pages[1], 900u);
  EXPECT_EQ(SampleValue(text, "ztier_zram_dictionary_pages" + dev),
            std::optional<std::string>(std::to_string(st.dict_pages[1])));
  EXPECT_EQ(SampleValue(text, "ztier_zram_dictionary_bytes{device=\"zram1\"}"),
            std::optional<std::string>("0"));
}

// A name that resolves to ::1 and 127.0.0.1 (localhost) is served on both,
// on one port.
TEST_F(MetricsTest, ServesOnEveryAddressOfTheName) {
  MetricsServerOptions o;
  o.listen = "localhost:0";
  o.listen_addresses = ztier::testing::BothLoopbacks();
  ASSERT_EQ(o.listen_addresses->endpoints.size(), 2u);
  auto server = StartServer(o);
  ASSERT_TRUE(server.has_value()) << server.error().ToString();
  const int port = (*server)->tcp_port();
  EXPECT_EQ(Exchange(ztier::testing::ConnectTcpLoopback6(port), Get("/metrics"))
                .status,
            200);
  EXPECT_EQ(TcpRequest(port, Get("/metrics")).status, 200);
}

TEST_F(MetricsTest, ServesOverTcpAndUnixSocket) {
  MetricsServerOptions o;
  o.listen = ":0";
  o.unix_path = tmp_.File("metrics.sock");
  auto server = StartServer(o);
  ASSERT_TRUE(server.has_value()) << server.error().ToString();
  const int port = (*server)->tcp_port();
  ASSERT_GT(port, 0);
  struct stat st;
  ASSERT_EQ(::lstat(o.unix_path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);

  const std::string want = RenderMetrics(registry_, nullptr);
  const HttpResponse tcp = TcpRequest(port, Get("/metrics"));
  EXPECT_EQ(tcp.status, 200) << tcp.head;
  EXPECT_NE(tcp.head.find("\r\nContent-Type: text/plain; version=0.0.4; "
                          "charset=utf-8\r\n"),
            std::string::npos)
      << tcp.head;
  EXPECT_NE(tcp.head.find("\r\nContent-Length: " + std::to_string(want.size()) +
                          "\r\n"),
            std::string::npos)
      << tcp.head;
  EXPECT_EQ(tcp.body, want);
  EXPECT_EQ(PromtoolProblems(tmp_, tcp.body), "");
  ExpectColumns(tcp.body, "zram0", kMmColumns, zram0_->ShowMmStat());
  ExpectColumns(tcp.body, "zram1", kMmColumns, zram1_->ShowMmStat());

  const HttpResponse unix_reply =
      Exchange(ConnectUnix(o.unix_path), Get("/metrics?x=1"));
  EXPECT_EQ(unix_reply.status, 200) << unix_reply.head;
  EXPECT_EQ(unix_reply.body, want);

  // HTTP/1.0 needs no Host; HEAD gives the headers only.
  const HttpResponse old = TcpRequest(port, "GET /metrics HTTP/1.0\r\n\r\n");
  EXPECT_EQ(old.status, 200);
  EXPECT_EQ(old.body, want);
  const HttpResponse head =
      TcpRequest(port, "HEAD /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(head.status, 200);
  EXPECT_NE(head.head.find("Content-Length: " + std::to_string(want.size())),
            std::string::npos);
  EXPECT_EQ(head.body, "");

  // A real client: curl over both sockets.
  ASSERT_TRUE(HaveProgram("curl")) << "curl is not installed (make deps)";
  const CommandResult c = RunCommand(
      "curl -sS --fail --max-time 10 http://127.0.0.1:" + std::to_string(port) +
      "/metrics");
  EXPECT_EQ(c.exit_code, 0) << c.output;
  EXPECT_EQ(c.output, want);
  const CommandResult cu = RunCommand(
      "curl -sS --fail --max-time 10 "
      "--unix-socket " +
      o.unix_path + " http://localhost/metrics");
  EXPECT_EQ(cu.exit_code, 0) << cu.output;
  EXPECT_EQ(cu.output, want);

  (*server)->Stop();
  EXPECT_FALSE(fs::exists(o.unix_path));
  EXPECT_LT(ConnectTcpLoopback(port), 0);
}

TEST_F(MetricsTest, ErrorStatuses) {
  MetricsServerOptions o;
  o.listen = "127.0.0.1:0";
  o.max_request_bytes = 1024;
  auto server = StartServer(o);
  ASSERT_TRUE(server.has_value()) << server.error().ToString();
  const int port = (*server)->tcp_port();

  EXPECT_EQ(TcpRequest(port, Get("/")).status, 404);
  EXPECT_EQ(TcpRequest(port, Get("/metricsx")).status, 404);
  const HttpResponse post = TcpRequest(port,
                                       "POST /metrics HTTP/1.1\r\nHost: x\r\n"
                                       "Content-Length: 3\r\n\r\nabc");
  EXPECT_EQ(post.status, 405);
  EXPECT_NE(post.head.find("\r\nAllow: GET, HEAD\r\n"), std::string::npos);
  EXPECT_EQ(
      TcpRequest(port, "DELETE /metrics HTTP/1.1\r\nHost: x\r\n\r\n").status,
      405);
  for (const std::string& bad : {
           std::string("GARBAGE\r\n\r\n"),
           std::string("GET /metrics\r\n\r\n"),
           std::string("GET  /metrics HTTP/1.1\r\nHost: x\r\n\r\n"),
           std::string("GET /metrics HTTP/2.0\r\nHost: x\r\n\r\n"),
           std::string("GET /metrics HTTP/1.1\r\n\r\n"),  // no Host
           std::string("GET /metrics HTTP/1.1\r\nHost x\r\n\r\n"),
           std::string("GET /metrics HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n"),
           std::string("G(T /metrics HTTP/1.1\r\nHost: x\r\n\r\n"),
           std::string("\x01\x02\x03\n\n"),
       }) {
    EXPECT_EQ(TcpRequest(port, bad).status, 400) << bad;
  }
  // HEAD never gets a body, whatever the status.
  const HttpResponse head404 =
      TcpRequest(port, "HEAD /nope HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(head404.status, 404);
  EXPECT_EQ(head404.body, "");
  // Over the size cap, with or without an end.
  EXPECT_EQ(TcpRequest(port, "GET /metrics HTTP/1.1\r\nHost: x\r\nX: " +
                                 std::string(2000, 'a') + "\r\n\r\n")
                .status,
            431);
  EXPECT_EQ(TcpRequest(port, std::string(5000, 'G')).status, 431);
  // Bare LFs end lines too.
  EXPECT_EQ(TcpRequest(port, "GET /metrics HTTP/1.1\nHost: x\n\n").status, 200);
  // Still serving.
  EXPECT_EQ(TcpRequest(port, Get("/metrics")).status, 200);
  EXPECT_GE((*server)->requests_served(), 17u);
}

TEST_F(MetricsTest, SilentAndGarbageClientsDoNotBlockOthers) {
  MetricsServerOptions o;
  o.listen = ":0";
  o.unix_path = tmp_.File("m.sock");
  o.read_timeout_ms = 5000;  // far longer than the others' requests take
  auto server = StartServer(o);
  ASSERT_TRUE(server.has_value()) << server.error().ToString();
  const int port = (*server)->tcp_port();

  // One says nothing; one sends half a request and stalls; one sends
  // garbage with no end; one connects and leaves at once.
  const int silent = ConnectTcpLoopback(port);
  const int half = ConnectUnix(o.unix_path);
  const int garbage = ConnectTcpLoopback(port);
  ASSERT_GE(silent, 0);
  ASSERT_GE(half, 0);
  ASSERT_GE(garbage, 0);
  ASSERT_GT(::send(half, "GET /metr", 9, MSG_NOSIGNAL), 0);
  ASSERT_GT(::send(garbage, "\xff\xfe\x00zz", 5, MSG_NOSIGNAL), 0);
  ::close(ConnectTcpLoopback(port));

  // Others are answered while those are still open: not after them.
  EXPECT_EQ(TcpRequest(port, Get("/metrics")).status, 200);
  EXPECT_EQ(Exchange(ConnectUnix(o.unix_path), Get("/metrics")).status, 200);
  for (int fd : {silent, half, garbage}) {
    struct pollfd p = {fd, POLLIN | POLLRDHUP, 0};
    EXPECT_EQ(::poll(&p, 1, 0), 0) << "closed or answered: fd " << fd;
  }

  // The stalled ones are closed after read_timeout_ms, with no reply.
  for (int fd : {silent, half, garbage}) {
    const std::optional<std::string> got = ReadToEof(fd, 30000);
    EXPECT_EQ(got, std::optional<std::string>(""));
    ::close(fd);
  }
  // A client that sends garbage and closes its side gets nothing but EOF,
  // and the next one is served.
  const int g2 = ConnectTcpLoopback(port);
  ASSERT_GT(::send(g2, "zzzz", 4, MSG_NOSIGNAL), 0);
  ::shutdown(g2, SHUT_WR);
  EXPECT_EQ(ReadToEof(g2), std::optional<std::string>(""));
  ::close(g2);
  EXPECT_EQ(TcpRequest(port, Get("/metrics")).status, 200);
}

// Idle or trickling connections cannot keep a scraper out: over
// max_clients, a new one takes the place of the oldest that has not sent
// its whole request, which is closed unanswered long before its
// read_timeout_ms.
TEST_F(MetricsTest, OverMaxClientsTheOldestUnfinishedRequestMakesRoom) {
  MetricsServerOptions o;
  o.listen = ":0";
  o.max_clients = 2;
  o.read_timeout_ms = 120'000;
  auto server = StartServer(o);
  ASSERT_TRUE(server.has_value()) << server.error().ToString();
  const int port = (*server)->tcp_port();
  // Silent ones, and ones that have begun a request and stall.
  std::vector<int> silent;
  for (int i = 0; i < 20; ++i) {
    silent.push_back(ConnectTcpLoopback(port));
    ASSERT_GE(silent.back(), 0);
    if (i % 2 == 1) {
      ASSERT_EQ(::send(silent.back(), "G", 1, MSG_NOSIGNAL), 1);
    }
  }
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(TcpRequest(port, Get("/metrics")).status, 200);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(60));
  // The first ones were closed with no reply (the last may still be open:
  // they were the newest).
  for (int i = 0; i < 18; ++i) {
    EXPECT_EQ(ReadToEof(silent[i], 10'000), std::optional<std::string>(""))
        << "client " << i;
  }
  for (int fd : silent) ::close(fd);
  EXPECT_EQ(TcpRequest(port, Get("/metrics")).status, 200);
  // Clients that have sent their request keep their place: five at once,
  // over a limit of two, are all answered.
  std::vector<int> scrapers;
  const std::string get = Get("/metrics");
  for (int i = 0; i < 5; ++i) {
    scrapers.push_back(ConnectTcpLoopback(port));
    ASSERT_GE(scrapers.back(), 0);
    ASSERT_EQ(::send(scrapers.back(), get.data(), get.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(get.size()));
  }
  for (int fd : scrapers) {
    const std::optional<std::string> reply = ReadToEof(fd);
    ASSERT_TRUE(reply.has_value());
    EXPECT_TRUE(reply->starts_with("HTTP/1.1 200")) << reply->substr(0, 80);
    ::close(fd);
  }
}

// Clients that have had their whole reply but never close cannot keep a
// scraper out either: over max_clients, a new one takes the place of the
// oldest of them, rather than wait out each one's drain time in turn
// (a second per max_clients of them), and every reply still arrives whole.
TEST_F(MetricsTest, OverMaxClientsTheOldestAnsweredClientMakesRoom) {
  MetricsServerOptions o;
  o.listen = ":0";
  o.max_clients = 2;
  auto server = StartServer(o);
  ASSERT_TRUE(server.has_value()) << server.error().ToString();
  const int port = (*server)->tcp_port();
  const std::string get = Get("/metrics");
  std::vector<int> lingering;  // send a request, then neither read nor close
  for (int i = 0; i < 40; ++i) {
    lingering.push_back(ConnectTcpLoopback(port));
    ASSERT_GE(lingering.back(), 0);
    ASSERT_EQ(::send(lingering.back(), get.data(), get.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(get.size()));
  }
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(TcpRequest(port, get).status, 200);
  // 40 drain times in pairs would be 20 s.
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
  for (int i = 0; i < 40; ++i) {
    const std::optional<std::string> reply = ReadToEof(lingering[i]);
    ASSERT_TRUE(reply.has_value()) << "client " << i;
    EXPECT_TRUE(reply->starts_with("HTTP/1.1 200")) << "client " << i;
    EXPECT_NE(reply->find("ztier_zram_disksize_bytes"), std::string::npos)
        << "client " << i;
    ::close(lingering[i]);
  }
}

// Clients that send a request and never read the reply (one larger than
// the socket takes at once) are waiting on nothing the server does: over
// max_clients, a new one takes the place of the oldest of them rather
// than wait in the backlog for their write_timeout_ms.
TEST_F(MetricsTest, OverMaxClientsAClientThatNeverReadsMakesRoom) {
  MetricsServerOptions o;
  auto server = StartWithALargeReply(&o, 2);
  ASSERT_TRUE(server.has_value()) << server.error().ToString();
  const std::string get = Get("/metrics");
  std::vector<int> deaf;  // send a request, then never read
  for (int i = 0; i < 2; ++i) {
    deaf.push_back(ConnectUnix(o.unix_path));
    ASSERT_GE(deaf.back(), 0);
    ASSERT_EQ(::send(deaf.back(), get.data(), get.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(get.size()));
  }
  // Both are being answered (their requests read) before the scraper comes.
  for (int i = 0; i < 2000 && (*server)->requests_served() < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_EQ((*server)->requests_served(), 2u);
  const int scraper = ConnectUnix(o.unix_path);
  ASSERT_GE(scraper, 0);
  ASSERT_EQ(::send(scraper, get.data(), get.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(get.size()));
  const std::optional<std::string> reply = ReadToEof(scraper, 5000);
  ::close(scraper);
  ASSERT_TRUE(reply.has_value()) << "no reply within 5 s";
  EXPECT_TRUE(reply->starts_with("HTTP/1.1 200")) << reply->substr(0, 80);
  for (int fd : deaf) ::close(fd);
}

// A client reading its reply as fast as it comes keeps its place over
// max_clients even though its socket is full between reads: only one that
// has stopped taking its reply makes room.
TEST_F(MetricsTest, OverMaxClientsAClientReadingItsReplyKeepsItsPlace) {
  MetricsServerOptions o;
  auto server = StartWithALargeReply(&o, 1);
  ASSERT_TRUE(server.has_value()) << server.error().ToString();
  const std::string get = Get("/metrics");
  const int reader = ConnectUnix(o.unix_path);
  ASSERT_GE(reader, 0);
  ASSERT_EQ(::send(reader, get.data(), get.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(get.size()));
  for (int i = 0; i < 2000 && (*server)->requests_served() < 1; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_EQ((*server)->requests_served(), 1u);
  // Reads steadily: 8 KiB every 5 ms, so the reply takes a while.
  std::string raw;
  std::thread slow([&] {
    char buf[8192];
    for (;;) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      const ssize_t r = ::recv(reader, buf, sizeof(buf), 0);
      if (r <= 0) return;
      raw.append(buf, static_cast<std::size_t>(r));
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const int scraper = ConnectUnix(o.unix_path);
  ASSERT_GE(scraper, 0);
  ASSERT_EQ(::send(scraper, get.data(), get.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(get.size()));
  slow.join();
  ::close(reader);
  const HttpResponse first = Parse(raw);
  EXPECT_EQ(first.status, 200);
  EXPECT_NE(first.head.find("Content-Length: " +
                            std::to_string(first.body.size()) + "\r\n"),
            std::string::npos)
      << "the reply was cut short at " << raw.size() << " bytes";
  const std::optional<std::string> second = ReadToEof(scraper, 10000);
  ::close(scraper);
  ASSERT_TRUE(second.has_value());
  EXPECT_TRUE(second->starts_with("HTTP/1.1 200")) << second->substr(0, 80);
}

TEST_F(MetricsTest, ClearStartErrors) {
  auto none = StartServer({});
  ASSERT_FALSE(none.has_value());
  EXPECT_EQ(none.error().code(), StatusCode::kInvalidArgument);

  MetricsServerOptions bad;
  bad.listen = "no-port-here";
  auto b = StartServer(bad);
  ASSERT_FALSE(b.has_value());
  EXPECT_EQ(b.error().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(b.error().message().find("'no-port-here'"), std::string::npos)
      << b.error().ToString();
  bad.listen = ":70000";
  EXPECT_EQ(StartServer(bad).error().code(), StatusCode::kInvalidArgument);

  MetricsServerOptions o;
  o.listen = ":0";
  o.unix_path = tmp_.File("busy.sock");
  auto first = StartServer(o);
  ASSERT_TRUE(first.has_value()) << first.error().ToString();
  // The same TCP port: in use.
  MetricsServerOptions same_port;
  same_port.listen = ":" + std::to_string((*first)->tcp_port());
  auto p = StartServer(same_port);
  ASSERT_FALSE(p.has_value());
  EXPECT_EQ(p.error().code(), StatusCode::kBusy);
  EXPECT_NE(p.error().message().find(same_port.listen), std::string::npos)
      << p.error().ToString();
  EXPECT_NE(p.error().message().find("in use"), std::string::npos)
      << p.error().ToString();
  // The errno a person reads is the bind's, not the code's (EBUSY).
  EXPECT_EQ(ErrnoNameOf(p.error()), "EADDRINUSE") << p.error().ToString();
  // An address this host does not have (TEST-NET-1, RFC 5737).
  MetricsServerOptions absent;
  absent.listen = "192.0.2.1:0";
  auto a = StartServer(absent);
  ASSERT_FALSE(a.has_value());
  EXPECT_EQ(ErrnoNameOf(a.error()), "EADDRNOTAVAIL") << a.error().ToString();
  EXPECT_NE(a.error().message().find("'192.0.2.1:0'"), std::string::npos)
      << a.error().ToString();
  // The same Unix socket: kBusy, and the first server's socket survives.
  MetricsServerOptions same_sock;
  same_sock.unix_path = o.unix_path;
  auto s = StartServer(same_sock);
  ASSERT_FALSE(s.has_value());
  EXPECT_EQ(s.error().code(), StatusCode::kBusy) << s.error().ToString();
  EXPECT_EQ(ErrnoNameOf(s.error()), "EBUSY") << s.error().ToString();
  EXPECT_EQ(Exchange(ConnectUnix(o.unix_path), Get("/metrics")).status, 200);
  // A file that is not a socket.
  std::ofstream(tmp_.File("plain")) << "x";
  same_sock.unix_path = tmp_.File("plain");
  EXPECT_EQ(StartServer(same_sock).error().code(),
            StatusCode::kInvalidArgument);
}

// ---- NBD counters ----

std::uint64_t Number(const std::string& text, const std::string& series) {
  const std::optional<std::string> v = SampleValue(text, series);
  EXPECT_TRUE(v.has_value()) << series << " missing";
  return v.has_value() ? std::stoull(*v) : 0;
}

TEST(MetricsNbdTest, RequestCountersMove) {
  nbd::testing::ServerFixture f(16 << 20);
  MetricsServerOptions o;
  o.listen = ":0";
  auto server = MetricsServer::Start(o, &f.registry(), &f.server());
  ASSERT_TRUE(server.has_value()) << server.error().ToString();
  const int port = (*server)->tcp_port();

  const std::string before = TcpRequest(port, Get("/metrics")).body;
  EXPECT_EQ(Number(before, "ztier_nbd_connections_open"), 0u);
  EXPECT_EQ(Number(before, "ztier_nbd_requests_total{type=\"read\"}"), 0u);
  EXPECT_EQ(Number(before, "ztier_nbd_request_buffers_mapped_total"), 0u);

  nbd::testing::RawClient c(f.socket());
  ASSERT_TRUE(c.connected());
  ASSERT_EQ(c.Go("zram0"), 16 << 20);
  std::uint32_t error = 1;
  const auto data = nbd::testing::RandomBytes(4096, 3);
  ASSERT_TRUE(c.Write(0, data, &error));
  EXPECT_EQ(error, 0u);
  std::vector<std::byte> back;
  ASSERT_TRUE(c.Read(0, 4096, &back, &error));  // inline on the reader
  EXPECT_EQ(error, 0u);
  ASSERT_TRUE(c.Read(0, 256 << 10, &back, &error));  // on a worker
  EXPECT_EQ(error, 0u);
  ASSERT_TRUE(c.Read(16 << 20, 4096, &back, &error));  // past the end
  EXPECT_EQ(error, nbd::kErrInval);
  ASSERT_TRUE(c.SendRequest(nbd::kCmdFlush, 0, 99, 0, 0));
  std::uint64_t cookie = 0;
  ASSERT_TRUE(c.ReadReply(&error, &cookie));
  EXPECT_EQ(error, 0u);

  // A worker counts its request's latency after sending the reply: wait.
  std::string text;
  for (int i = 0; i < 500; ++i) {
    text = TcpRequest(port, Get("/metrics")).body;
    if (Number(text,
               "ztier_nbd_request_duration_seconds_count{type=\"read\"}") ==
        2) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(PromtoolProblems(f.tmp(), text), "") << text;
  ExpectFamiliesDocumented(text);
  EXPECT_EQ(Number(text, "ztier_nbd_connections_open"), 1u);
  EXPECT_EQ(Number(text, "ztier_nbd_connections_accepted_total"), 1u);
  EXPECT_EQ(Number(text, "ztier_nbd_connections_refused_total"), 0u);
  // The worker's 256 KiB READ mapped its slot's buffer.
  EXPECT_EQ(Number(text, "ztier_nbd_request_buffers_mapped_total"), 1u);
  EXPECT_EQ(Number(text, "ztier_nbd_requests_total{type=\"write\"}"), 1u);
  EXPECT_EQ(Number(text, "ztier_nbd_requests_total{type=\"read\"}"), 3u);
  EXPECT_EQ(Number(text, "ztier_nbd_requests_total{type=\"flush\"}"), 1u);
  EXPECT_EQ(Number(text, "ztier_nbd_requests_total{type=\"trim\"}"), 0u);
  EXPECT_EQ(Number(text, "ztier_nbd_error_replies_total{errno=\"EINVAL\"}"),
            1u);
  EXPECT_EQ(Number(text, "ztier_nbd_error_replies_total{errno=\"EIO\"}"), 0u);
  EXPECT_EQ(Number(text, "ztier_zram_clients{device=\"zram0\"}"), 1u);
  // The histograms: the valid READs and the WRITE, each in some bucket, and
  // all within +Inf and the count.
  EXPECT_EQ(
      Number(text, "ztier_nbd_request_duration_seconds_count{type=\"read\"}"),
      2u);
  EXPECT_EQ(Number(text,
                   "ztier_nbd_request_duration_seconds_bucket{type=\"read\",le="
                   "\"+Inf\"}"),
            2u);
  EXPECT_EQ(
      Number(text, "ztier_nbd_request_duration_seconds_count{type=\"write\"}"),
      1u);
  EXPECT_EQ(
      Number(
          text,
          "ztier_nbd_request_duration_seconds_bucket{type=\"write\",le=\"1\"}"),
      1u);
  const std::optional<std::string> sum = SampleValue(
      text, "ztier_nbd_request_duration_seconds_sum{type=\"read\"}");
  ASSERT_TRUE(sum.has_value());
  EXPECT_GT(std::stod(*sum), 0.0);
  // The device's own counters equal its texts here too.
  ExpectColumns(text, "zram0", kMmColumns, f.device().ShowMmStat());

  c.Close();
  ASSERT_TRUE(f.WaitConnections(0));
  text = RenderMetrics(f.registry(), &f.server());
  EXPECT_EQ(Number(text, "ztier_nbd_connections_open"), 0u);
  EXPECT_EQ(Number(text, "ztier_zram_clients{device=\"zram0\"}"), 0u);
}

}  // namespace
}  // namespace ztier::ctl
