// nbd_backing_file_test.cc: writeback to a real nbdkit (memory plugin) on a
// Unix socket through OpenNbdBackingFile: the seed-002 flow (fill, idle,
// writeback, read back), and the remote's failures: killed, stopped, and
// back empty.
#include "nbd/nbd_backing_file.h"

#include <gtest/gtest.h>
#include <malloc.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <functional>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <vector>

#include "testing/failing_new.h"
#include "testing/nbd_server.h"
#include "testing/test_util.h"
#include "tls_test_certs.h"
#include "ztier/backing_store.h"
#include "ztier/page_store.h"

namespace ztier::nbd {
namespace {

using ::ztier::testing::ScopedTempDir;
using ::ztier::testing::Sh;

constexpr std::size_t kPages = 512;

// An nbdkit export on a Unix socket in `dir`, a child of the test: the
// memory plugin, or `plugin` (its name and arguments: "file", PATH keeps
// its data when killed and started again); with `tls`, it requires TLS
// with the certificates MakeTestCertificates wrote in `dir`. `params`
// follow the plugin's (a filter's).
class Remote {
 public:
  explicit Remote(const ScopedTempDir& dir, std::string flag = "",
                  bool tls = false, std::vector<std::string> params = {},
                  std::vector<std::string> plugin = {"memory", "8M"})
      : dir_(dir.path()),
        sock_(dir.File("remote.sock")),
        flag_(std::move(flag)),
        params_(std::move(params)),
        plugin_(std::move(plugin)),
        tls_(tls) {
    Start();
  }
  ~Remote() { Kill(); }

  void Start() {
    Sh("rm -f '" + sock_ + "'");
    std::vector<std::string> args = {"nbdkit", "-f"};
    std::istringstream flags(flag_);  // flags apart by spaces
    for (std::string f; flags >> f;) args.push_back(f);
    if (tls_) {
      args.push_back("--tls=require");
      args.push_back("--tls-certificates=" + dir_);
    }
    args.insert(args.end(), {"-U", sock_});
    args.insert(args.end(), plugin_.begin(), plugin_.end());
    args.insert(args.end(), params_.begin(), params_.end());
    std::string error;
    pid_ = ::ztier::testing::SpawnNbdServer(args, Uri(), dir_ + "/remote.log",
                                            &error);
    ASSERT_GT(pid_, 0) << error;
  }
  // SIGSTOP, and back once every thread of it has stopped.
  void Stop() {
    ::kill(pid_, SIGSTOP);
    Sh("p=" + std::to_string(pid_) + "; for i in $(seq 200); do "
       "grep -qv ') T ' /proc/$p/task/*/stat 2>/dev/null || exit 0; "
       "sleep 0.01; done");
  }
  void Continue() { ::kill(pid_, SIGCONT); }
  void Kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = 0;
  }
  std::string Uri() const {
    return tls_ ? "nbds+unix:///?socket=" + sock_ + "&tls-certificates=" + dir_
                : "nbd+unix:///?socket=" + sock_;
  }
  std::string PlainUri() const { return "nbd+unix:///?socket=" + sock_; }

 private:
  std::string dir_, sock_, flag_;
  std::vector<std::string> params_, plugin_;
  bool tls_ = false;
  pid_t pid_ = 0;
};

std::vector<std::byte> Page(std::size_t i) {
  std::vector<std::byte> p(kPageSize);
  const std::string line = "page " + std::to_string(i) + " of the remote test ";
  for (std::size_t k = 0; k < kPageSize; ++k) {
    p[k] = static_cast<std::byte>(line[k % line.size()] + (k / 512));
  }
  return p;
}

// A store that writes back to `file`, with the rest of `bo`.
std::unique_ptr<PageStore> StoreOn(std::shared_ptr<BackingFile> file,
                                   BackingOptions bo = {}) {
  bo.file = std::move(file);
  auto bs = BackingStore::Open(bo);
  EXPECT_TRUE(bs.has_value()) << bs.error().ToString();
  PageStoreOptions o;
  o.num_pages = kPages;
  o.backing = std::move(*bs);
  auto s = PageStore::Create(o);
  EXPECT_TRUE(s.has_value()) << s.error().ToString();
  return std::move(*s);
}

// `remote` over one connection, each command timed out after `timeout_ms`.
auto OpenOneConnection(const Remote& remote, std::uint32_t timeout_ms) {
  return OpenNbdBackingFile(remote.Uri(),
                            {.connections = 1, .timeout_ms = timeout_ms});
}

// A sparse file `size` long (truncate(1)'s sizes) in `dir`, for nbdkit's
// file plugin.
std::string SparseImage(const ScopedTempDir& dir,
                        const std::string& size = "8M") {
  const std::string image = dir.File("remote.img");
  EXPECT_EQ(Sh("truncate -s " + size + " '" + image + "'").exit_code, 0);
  return image;
}

void Fill(PageStore& s, std::size_t first, std::size_t last) {
  for (std::size_t i = first; i < last; ++i) {
    ASSERT_OK(s.Store(i, ConstPage(Page(i).data(), kPageSize)));
  }
}

WritebackResult WriteBackIdle(PageStore& s, bool compressed = false) {
  s.MarkIdleAll();
  auto r = s.Writeback(
      {.scans = {{kWritebackIdle, 0, kPages}}, .compressed = compressed});
  EXPECT_TRUE(r.has_value()) << r.error().ToString();
  return *r;
}

// Stores pages [0, n) and writes them back: the pages written.
std::uint64_t FillAndWriteBack(PageStore& s, std::size_t n) {
  Fill(s, 0, n);
  return WriteBackIdle(s).written;
}

// Every page of [first, last) reads as written, or (want_error) fails.
void Expect(PageStore& s, std::size_t first, std::size_t last,
            bool want_error = false) {
  std::vector<std::byte> out(kPageSize);
  for (std::size_t i = first; i < last; ++i) {
    const Status st = s.Load(i, MutablePage(out.data(), kPageSize));
    if (want_error) {
      ASSERT_EQ(st.code(), StatusCode::kIoError) << "page " << i;
      continue;
    }
    ASSERT_OK(st);
    ASSERT_EQ(std::memcmp(out.data(), Page(i).data(), kPageSize), 0)
        << "page " << i;
  }
}

// Whether page `i` of `s` reads, tried until it does (a reconnect waits
// out the backoff since the last failed attempt) or 20 s have passed.
bool ReadsAgain(PageStore& s, std::size_t i = 0) {
  std::vector<std::byte> out(kPageSize);
  const auto until =
      std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!s.Load(i, MutablePage(out.data(), kPageSize)).ok()) {
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return true;
}

TEST(NbdBackingFileTest, RejectsWhatItCannotUse) {
  EXPECT_TRUE(IsNbdUri("nbd://host/x"));
  EXPECT_TRUE(IsNbdUri("nbd+unix:///?socket=/s"));
  EXPECT_FALSE(IsNbdUri("/var/tmp/wb.img"));
  EXPECT_EQ(OpenNbdBackingFile("/tmp/x", {}).error().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(OpenNbdBackingFile("nbd://x", {.connections = 0}).error().code(),
            StatusCode::kInvalidArgument);
  // TLS over TCP must authenticate the server (a folder without
  // ca-cert.pem would not); TLS settings on a plain scheme would be
  // ignored. Refused before any connection is tried.
  {
    ScopedTempDir empty;
    const std::string no_ca = "?tls-certificates=" + empty.path();
    for (const auto& [uri, why] :
         std::initializer_list<std::pair<std::string, std::string>>{
             {"nbds://localhost:1/x" + no_ca, "cannot read " + empty.path()},
             {"nbds://localhost:1/x" + no_ca + "&tls-username=me",
              "needs the server's CA"},
             {"nbd://localhost:1/x?tls-certificates=/etc/pki",
              "TLS parameters on a plain-text URI"},
             {"nbd+unix:///x?socket=/s&tls-psk-file=/k",
              "TLS parameters on a plain-text URI"}}) {
      auto r = OpenNbdBackingFile(uri, {.timeout_ms = 100});
      ASSERT_FALSE(r.has_value()) << uri;
      EXPECT_EQ(r.error().code(), StatusCode::kInvalidArgument) << uri;
      EXPECT_NE(r.error().message().find(why), std::string::npos)
          << r.error().message();
    }
    // With a CA it goes on to connect (and finds nobody there).
    ASSERT_EQ(Sh("touch '" + empty.File("ca-cert.pem") + "'").exit_code, 0);
    auto r =
        OpenNbdBackingFile("nbds://localhost:1/x" + no_ca, {.timeout_ms = 100});
    ASSERT_FALSE(r.has_value());
    EXPECT_EQ(r.error().code(), StatusCode::kIoError) << r.error().ToString();
  }
  ScopedTempDir dir;
  auto none = OpenNbdBackingFile(
      "nbd+unix:///?socket=" + dir.File("none.sock"), {.timeout_ms = 500});
  ASSERT_FALSE(none.has_value());
  EXPECT_EQ(none.error().code(), StatusCode::kIoError);
  EXPECT_NE(none.error().message().find("none.sock"), std::string::npos)
      << none.error().message();
  Remote ro(dir, "-r");
  auto r = OpenNbdBackingFile(ro.Uri(), {});
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message().find("read-only"), std::string::npos)
      << r.error().message();
}

// A Unix socket at `path` that is bound and, with `listening`, listens,
// but never accepts: closed on scope exit.
class SilentSocket {
 public:
  SilentSocket(const std::string& path, bool listening) {
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    EXPECT_EQ(
        ::bind(fd_, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)), 0)
        << std::strerror(errno);
    if (listening) {
      EXPECT_EQ(::listen(fd_, 8), 0) << std::strerror(errno);
    }
  }
  ~SilentSocket() { ::close(fd_); }
  SilentSocket(const SilentSocket&) = delete;
  SilentSocket& operator=(const SilentSocket&) = delete;

 private:
  int fd_ = -1;
};

// A remote that cannot be reached fails the open with kIoError (the
// header's contract) and the errno of why (ErrnoNameOf, which `ztier
// serve` prints), not the EIO of the code: no socket at the path ENOENT,
// a socket nobody listens on ECONNREFUSED (unix_stream_connect(),
// net/unix/af_unix.c), a listener that never answers the handshake
// ETIMEDOUT. The message says libnbd's why, after the URI.
TEST(NbdBackingFileTest, AnOpenThatCannotConnectNamesItsErrno) {
  ScopedTempDir dir;
  const SilentSocket bound(dir.File("bound.sock"), false);
  const SilentSocket listening(dir.File("listening.sock"), true);
  for (const auto& [sock, errno_name, why] :
       std::initializer_list<std::tuple<std::string, std::string, std::string>>{
           {"none.sock", "ENOENT", "No such file or directory"},
           {"bound.sock", "ECONNREFUSED", "Connection refused"},
           {"listening.sock", "ETIMEDOUT", "connection timed out"}}) {
    const std::string uri = "nbd+unix:///?socket=" + dir.File(sock);
    auto r = OpenNbdBackingFile(uri, {.connections = 1, .timeout_ms = 200});
    ASSERT_FALSE(r.has_value()) << sock;
    EXPECT_EQ(r.error().code(), StatusCode::kIoError) << r.error().ToString();
    EXPECT_EQ(ErrnoNameOf(r.error()), errno_name) << r.error().ToString();
    EXPECT_EQ(r.error().message().rfind(uri + ": ", 0), 0u)
        << r.error().message();
    EXPECT_NE(r.error().message().find(why), std::string::npos)
        << r.error().message();
  }
}

TEST(NbdBackingFileTest, WritebackAndReadBackOverSeveralConnections) {
  ScopedTempDir dir;
  Remote remote(dir);
  auto file = OpenNbdBackingFile(remote.Uri(), {.connections = 4});
  ASSERT_TRUE(file.has_value()) << file.error().ToString();
  EXPECT_EQ((*file)->size(), (8u << 20) - kPageSize);
  auto store = StoreOn(*file);
  Fill(*store, 0, kPages);
  const WritebackResult r = WriteBackIdle(*store);
  ASSERT_OK(r.status);
  EXPECT_EQ(r.written, kPages);
  EXPECT_EQ(store->Stats().bd_count, kPages);
  Expect(*store, 0, kPages);
  EXPECT_EQ(store->Stats().bd_reads, kPages);
}

// An export that takes requests of at most 16 KiB (NBD_INFO_BLOCK_SIZE,
// and EINVAL for a larger one) gets writes of at most 4 blocks; one whose
// minimum is above 4096 bytes cannot hold 4 KiB blocks and is refused.
TEST(NbdBackingFileTest, WritesStayWithinTheExportsMaximumRequest) {
  ScopedTempDir dir;
  Remote remote(dir, "--filter=blocksize-policy", false,
                {"blocksize-maximum=16384", "blocksize-error-policy=error"});
  auto file = OpenNbdBackingFile(remote.Uri(), {.connections = 2});
  ASSERT_TRUE(file.has_value()) << file.error().ToString();
  EXPECT_EQ((*file)->max_write_bytes(), 16384u);
  auto store = StoreOn(*file);
  Fill(*store, 0, kPages);
  const WritebackResult r = WriteBackIdle(*store);
  ASSERT_OK(r.status);
  EXPECT_EQ(r.written, kPages);
  EXPECT_EQ(r.failed, 0u);
  Expect(*store, 0, kPages);

  ScopedTempDir dir2;
  Remote coarse(dir2, "--filter=blocksize-policy", false,
                {"blocksize-minimum=8192", "blocksize-preferred=8192"});
  auto refused = OpenNbdBackingFile(coarse.Uri(), {.timeout_ms = 5000});
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.error().message().find("block size limits"),
            std::string::npos)
      << refused.error().message();
}

// An export that comes back larger, with the label (its volume resized
// while its server restarted), is the same export: nothing written is
// lost. (So is one smaller that still holds the part this file uses:
// AShrunkExportHoldingTheUsedPartLosesNothing. One without the label
// loses what was written: AKilledRemoteKeepsPagesAndComesBackEmptyAsLost.)
TEST(NbdBackingFileTest, AnExportThatComesBackLargerLosesNothing) {
  ScopedTempDir dir;
  const std::string image = SparseImage(dir);
  Remote remote(dir, "", false, {}, {"file", image});
  auto file = OpenOneConnection(remote, 10000);
  ASSERT_TRUE(file.has_value()) << file.error().ToString();
  auto store = StoreOn(*file);
  ASSERT_EQ(FillAndWriteBack(*store, 64), 64u);
  remote.Kill();
  ASSERT_EQ(Sh("truncate -s +1M '" + image + "'").exit_code, 0);
  remote.Start();
  Expect(*store, 0, 64);
  EXPECT_EQ((*file)->lost_blocks(), 0u);
}

// A remote that comes back offering less than it did at open (each
// restart below) is refused, saying why in the log: its written-back pages
// read as errors meanwhile, none counted lost, and a writeback pass fails
// keeping its pages. Back as it was, it serves them all again.
TEST(NbdBackingFileTest, ARemoteThatComesBackOfferingLessIsRefused) {
  ScopedTempDir dir;
  const std::string image = SparseImage(dir);
  std::optional<Remote> remote;
  auto restart = [&](std::string flag, std::vector<std::string> params) {
    remote.reset();
    remote.emplace(dir, std::move(flag), false, std::move(params),
                   std::vector<std::string>{"file", image});
  };
  restart("", {});
  std::mutex log_mu;
  std::string log;
  auto file = OpenNbdBackingFile(
      remote->Uri(), {.connections = 2,
                      .timeout_ms = 1000,
                      .log = [&](const std::string& l) {
                        std::lock_guard g(log_mu);
                        log += l + "\n";
                      }});
  ASSERT_TRUE(file.has_value()) << file.error().ToString();
  auto store = StoreOn(*file);
  ASSERT_EQ(FillAndWriteBack(*store, 64), 64u);
  // A writer alive throughout (a pass under way, say) with 128 KiB
  // writes: a remote whose maximum request is below them offers less.
  auto live = (*file)->NewWriter(1, 128 << 10);
  ASSERT_TRUE(live.has_value()) << live.error().ToString();
  struct Less {
    std::string flag;
    std::vector<std::string> params;
    std::string said;
  };
  for (const Less& less : std::vector<Less>{
           {"-r", {}, "came back read-only"},
           {"--filter=multi-conn", {"multi-conn-mode=disable"},
            "came back without multi-conn (writes go over 2 connections)"},
           {"--filter=fua", {}, "came back without FUA"},
           {"--filter=blocksize-policy",
            {"blocksize-minimum=8192", "blocksize-preferred=8192"},
            "came back with block size limits (minimum 8192"},
           {"--filter=blocksize-policy", {"blocksize-maximum=16384"},
            "maximum 16384 bytes) that do not allow"},
           {"smaller", {}, "came back smaller (1048576 bytes)"}}) {
    SCOPED_TRACE(less.said);
    if (less.flag == "smaller") {
      remote.reset();
      ASSERT_EQ(Sh("truncate -s 1M '" + image + "'").exit_code, 0);
      restart("", {});
    } else {
      restart(less.flag, less.params);
    }
    Expect(*store, 0, 1, /*want_error=*/true);
    Fill(*store, 64, 65);
    const WritebackResult r = WriteBackIdle(*store);
    EXPECT_EQ(r.status.code(), StatusCode::kIoError);
    EXPECT_EQ(r.written, 0u);
    Expect(*store, 64, 65);
    EXPECT_EQ((*file)->lost_blocks(), 0u);
    {
      std::lock_guard g(log_mu);
      EXPECT_NE(log.find(less.said), std::string::npos) << log;
    }
    // As it was (a file that only shrank is whole again: the part this
    // file uses kept its data up to 1 MiB).
    remote.reset();
    ASSERT_EQ(Sh("truncate -s 8M '" + image + "'").exit_code, 0);
    restart("", {});
    ASSERT_TRUE(ReadsAgain(*store));
    Expect(*store, 0, 64);
    EXPECT_EQ((*file)->lost_blocks(), 0u);
    ASSERT_OK(WriteBackIdle(*store).status);
    Expect(*store, 64, 65);
  }
}

// A remote that stated no maximum request at open (so 32 MiB, proto.md's
// default) and comes back stating 256 KiB still takes every write this
// file sends (128 KiB: the store's IOs): it is used as before, and the
// writers made after it stay within it (here a pass asking for 1 MiB
// IOs, which the remote would refuse). With no writer alive, a maximum
// below the writes made before is used too; one below a live writer's
// writes is refused.
TEST(NbdBackingFileTest, ARemoteThatComesBackWithAMaximumItsWritesFitIsUsed) {
  ScopedTempDir dir;
  const std::string image = SparseImage(dir);
  std::optional<Remote> remote;
  auto restart = [&](std::vector<std::string> params) {
    remote.reset();
    remote.emplace(dir, params.empty() ? "" : "--filter=blocksize-policy",
                   false, std::move(params),
                   std::vector<std::string>{"file", image});
  };
  restart({});
  auto file =
      OpenNbdBackingFile(remote->Uri(), {.connections = 1, .timeout_ms = 2000});
  ASSERT_TRUE(file.has_value()) << file.error().ToString();
  EXPECT_EQ((*file)->max_write_bytes(), 0u);
  auto store = StoreOn(*file);
  ASSERT_EQ(FillAndWriteBack(*store, 64), 64u);
  restart({"blocksize-maximum=262144", "blocksize-error-policy=error"});
  Expect(*store, 0, 64);
  EXPECT_EQ((*file)->max_write_bytes(), 262144u);
  Fill(*store, 64, 192);
  store->MarkIdleAll();
  auto r = store->Writeback(
      {.scans = {{kWritebackIdle, 0, kPages}}, .max_io_pages = 256});
  ASSERT_TRUE(r.has_value()) << r.error().ToString();
  ASSERT_OK(r->status);
  EXPECT_EQ(r->written, 128u);
  Expect(*store, 0, 192);
  restart({"blocksize-maximum=65536"});
  Expect(*store, 0, 192);
  EXPECT_EQ((*file)->max_write_bytes(), 65536u);
  {
    auto writer = (*file)->NewWriter(1, 65536);
    ASSERT_TRUE(writer.has_value()) << writer.error().ToString();
    restart({"blocksize-maximum=16384"});
    Expect(*store, 0, 1, /*want_error=*/true);
  }
  EXPECT_EQ((*file)->lost_blocks(), 0u);
}

// Over TCP, each connection has keepalive on (it may sit idle for hours
// between reads of written-back pages): `ss` shows its keepalive timer.
TEST(NbdBackingFileTest, TcpConnectionsKeepAlive) {
  ScopedTempDir dir;
  // A free port: bound and released, then nbdkit binds it (tried again
  // with another should something take it meanwhile).
  std::string p, uri, error;
  pid_t server = -1;
  for (int attempt = 0; attempt < 3 && server <= 0; ++attempt) {
    p = Sh("python3 -c 'import socket; s=socket.socket(); "
           "s.bind((\"127.0.0.1\", 0)); print(s.getsockname()[1])'")
            .out;
    while (!p.empty() && p.back() == '\n') p.pop_back();
    ASSERT_FALSE(p.empty());
    uri = "nbd://127.0.0.1:" + p + "/";
    server = ::ztier::testing::SpawnNbdServer(
        {"nbdkit", "-f", "-i", "127.0.0.1", "-p", p, "memory", "8M"}, uri,
        dir.File("remote.log"), &error);
  }
  ASSERT_GT(server, 0) << error;
  auto file = OpenNbdBackingFile(uri, {.connections = 1});
  ASSERT_TRUE(file.has_value()) << file.error().ToString();
  const auto ss = Sh("ss -tnoH state established '( dport = :" + p + " )'");
  EXPECT_NE(ss.out.find("keepalive"), std::string::npos) << ss.out;
  ::kill(server, SIGKILL);
  ::waitpid(server, nullptr, 0);
}

// nbdkit's sh plugin serving `image`, for what the memory and file
// plugins and their filters do not do: `cases` go first in the script's
// `case "$1"` (the method; $2 the handle, $3 the count, $4 the offset; $d
// is `dir`, $f the image), before reads, writes and size from the file,
// FUA (native) and multi-conn, and no TRIM, zero or flush. Returns the
// script's path.
std::string ShExport(const ScopedTempDir& dir, const std::string& image,
                     const std::string& cases) {
  const std::string script = dir.File("remote.sh");
  std::ofstream(script) << "#!/bin/sh\n"
                        << "d='" << dir.path() << "'\n"
                        << "f='" << image << "'\n"
                        << "case \"$1\" in\n"
                        << cases
                        << "  get_size) stat -c %s \"$f\" ;;\n"
                           "  pread) dd if=\"$f\" skip=\"$4\" count=\"$3\" "
                           "iflag=skip_bytes,count_bytes status=none ;;\n"
                           "  pwrite) dd of=\"$f\" seek=\"$4\" conv=notrunc "
                           "oflag=seek_bytes status=none ;;\n"
                           "  can_write|can_multi_conn) exit 0 ;;\n"
                           "  can_fua) echo native ;;\n"
                           "  can_trim|can_zero|can_flush) exit 3 ;;\n"
                           "  *) exit 2 ;;\n"
                           "esac\n";
  EXPECT_EQ(Sh("chmod +x '" + script + "'").exit_code, 0);
  return script;
}

// An export without TRIM: a block the store frees is forgotten at once
// (nothing tells the remote), and is not counted lost when the remote
// comes back empty; the blocks still in use are. (nbdkit's sh plugin over
// a file, with can_trim false.)
TEST(NbdBackingFileTest, BlocksFreedWithoutTrimAreNotCountedLost) {
  ScopedTempDir dir;
  const std::string image = dir.File("plain.img");
  const std::string script = ShExport(dir, image, "  can_fua) echo none ;;\n");
  ASSERT_EQ(Sh("truncate -s 2M '" + image + "'").exit_code, 0);
  Remote remote(dir, "", false, {}, {"sh", script});
  auto file = OpenOneConnection(remote, 10000);
  ASSERT_TRUE(file.has_value()) << file.error().ToString();
  ASSERT_FALSE((*file)->can_discard());
  auto store = StoreOn(*file);
  ASSERT_EQ(FillAndWriteBack(*store, 64), 64u);
  for (std::uint64_t i = 0; i < 20; ++i) ASSERT_OK(store->Discard(i));
  remote.Kill();
  // Back empty: no label.
  ASSERT_EQ(
      Sh("truncate -s 0 '" + image + "' && truncate -s 2M '" + image + "'")
          .exit_code,
      0);
  remote.Start();
  Expect(*store, 20, 64, /*want_error=*/true);
  EXPECT_EQ((*file)->lost_blocks(), 44u);
}

// A remote that does not answer the label write in time: the open says
// so, rather than libnbd's last error, which the deadline does not set.
TEST(NbdBackingFileTest, ALabelWriteOutOfTimeSaysSo) {
  ScopedTempDir dir;
  Remote remote(dir, "--filter=delay", false, {"delay-write=5"});
  auto file = OpenOneConnection(remote, 1000);
  ASSERT_FALSE(file.has_value());
  EXPECT_NE(file.error().ToString().find(
                "writing the label: no answer within the timeout (1000 ms)"),
            std::string::npos)
      << file.error().ToString();
}

// A server that answers ESHUTDOWN is going away, and the client must then
// disconnect (proto.md, "Terminating the transmission phase"). The file
// leaves the connection and its read goes on on a new one, as for a
// dropped connection: here nbdkit's error filter answers every read
// ESHUTDOWN while a file exists, for 300 ms; the read waits it out.
TEST(NbdBackingFileTest, ReadsGoOnPastAServerShuttingDown) {
  ScopedTempDir dir;
  const std::string trigger = dir.File("shutting-down");
  Remote remote(dir, "--filter=error", false,
                {"error=ESHUTDOWN", "error-pread-rate=100%",
                 "error-pread-file=" + trigger});
  auto file = OpenOneConnection(remote, 10000);
  ASSERT_TRUE(file.has_value()) << file.error().ToString();
  auto store = StoreOn(*file);
  ASSERT_EQ(FillAndWriteBack(*store, 16), 16u);
  ASSERT_EQ(Sh("touch '" + trigger + "'").exit_code, 0);
  std::thread lift([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    Sh("rm -f '" + trigger + "'");
  });
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::byte> out(kPageSize);
  const Status st = store->Load(3, MutablePage(out.data(), kPageSize));
  const auto took = std::chrono::steady_clock::now() - start;
  lift.join();
  ASSERT_OK(st);
  EXPECT_EQ(std::memcmp(out.data(), Page(3).data(), kPageSize), 0);
  EXPECT_GE(took, std::chrono::milliseconds(250));  // it did meet ESHUTDOWN
  Expect(*store, 0, 16);
}

// Each connection has the whole timeout to be made, as has the label's
// write: a remote whose every connection takes 800 ms (here nbdkit's
// delay filter) opens with 4 connections and a 2 s timeout (each
// connection has 2.5 times what it needs, for a loaded test machine).
TEST(NbdBackingFileTest, EachConnectionHasItsOwnTimeoutAtOpen) {
  ScopedTempDir dir;
  Remote remote(dir, "--filter=delay", false, {"delay-open=800ms"});
  auto file =
      OpenNbdBackingFile(remote.Uri(), {.connections = 4, .timeout_ms = 2000});
  ASSERT_TRUE(file.has_value()) << file.error().ToString();
  auto store = StoreOn(*file);
  ASSERT_EQ(FillAndWriteBack(*store, 64), 64u);
  Expect(*store, 0, 64);
}

// A reconnect that takes most of a read's timeout, or more (every
// handshake takes 1 s and every read 1.2 s, the label's on reconnect
// included), fails that read, within its time, and leaves the connection
// up, so that the reads after it are served:
//   - with a 3 s timeout the reconnect's 2.2 s leave a loaded machine
//     0.8 s, and the read's own 1.2 s cannot fit: the read runs out of its
//     own time, not the connection's (closing it made every read
//     reconnect, and fail, for ever);
//   - with 2 s the handshake and the label read each fit, with 0.8 s to
//     spare, but not together: the check has a timeout of its own, as at
//     open (within what the handshake left of the read's deadline, every
//     attempt failed).
TEST(NbdBackingFileTest, AReadCutShortByItsReconnectKeepsTheConnection) {
  for (const int timeout_ms : {3000, 2000}) {
    SCOPED_TRACE(timeout_ms);
    ScopedTempDir dir;
    const std::string image = SparseImage(dir);
    Remote remote(dir, "--filter=delay", false,
                  {"delay-open=1000ms", "delay-read=1200ms"}, {"file", image});
    auto file = OpenNbdBackingFile(
        remote.Uri(),
        {.connections = 1, .timeout_ms = static_cast<std::uint32_t>(timeout_ms)});
    ASSERT_TRUE(file.has_value()) << file.error().ToString();
    auto store = StoreOn(*file);
    ASSERT_EQ(FillAndWriteBack(*store, 4), 4u);
    remote.Kill();
    remote.Start();
    const auto t0 = std::chrono::steady_clock::now();
    Expect(*store, 0, 1, /*want_error=*/true);
    EXPECT_LT(std::chrono::steady_clock::now() - t0,
              std::chrono::milliseconds(timeout_ms + 1500));
    Expect(*store, 0, 4);
    EXPECT_EQ((*file)->lost_blocks(), 0u);
  }
}

// A TRIM has its whole timeout from when it is sent, as a write has: one
// sent after a slow reconnect (here every handshake takes 1 s and every
// read 1 s, the label's on reconnect included, of a 3 s timeout: the
// reconnect's 2 s leave a loaded machine 1 s) is answered in its 1.2 s,
// and the connection stays up: the read after it needs no handshake.
// (Timed from before the reconnect, the TRIM ran out, unanswered, and
// closed a connection that had not stalled.)
TEST(NbdBackingFileTest, ATrimAfterASlowReconnectHasItsWholeTimeout) {
  ScopedTempDir dir;
  const std::string image = SparseImage(dir);
  Remote remote(dir, "--filter=delay", false,
                {"delay-open=1000ms", "delay-read=1000ms", "delay-trim=1200ms"},
                {"file", image});
  auto file = OpenOneConnection(remote, 3000);
  ASSERT_TRUE(file.has_value()) << file.error().ToString();
  ASSERT_TRUE((*file)->can_discard());
  remote.Kill();
  remote.Start();
  const std::vector<BackingFile::Range> ranges = {{0, 4 * kPageSize},
                                                  {8 * kPageSize, kPageSize}};
  bool sent[2] = {};
  // The first finds the connection dropped; the second makes it again.
  (*file)->Discard(ranges, sent);
  (*file)->Discard(ranges, sent);
  EXPECT_TRUE(sent[0]);
  EXPECT_TRUE(sent[1]);
  std::vector<std::byte> out(kPageSize);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ((*file)->Read(16 * kPageSize, out), static_cast<long>(kPageSize));
  // Its 1 s read alone (a reconnect's handshake and label read add 2 s).
  EXPECT_LT(std::chrono::steady_clock::now() - t0,
            std::chrono::milliseconds(1800));
}

// TRIMs the remote answers one at a time (one nbdkit thread), each in
// 0.4 s: the sixth is answered 2.4 s after the batch went out, past the
// 2 s timeout, but each within its timeout of the one before. The remote
// has not stalled: every TRIM is answered, the connection stays up, and
// no hold-off follows, so a read right after is served. (Timed from the
// send alone, the last ones ran out and held every command off.)
TEST(NbdBackingFileTest, SlowTrimsAnsweredInTurnAreNoStall) {
  ScopedTempDir dir;
  Remote remote(dir, "--threads=1 --filter=delay", false, {"delay-trim=400ms"});
  auto file = OpenOneConnection(remote, 2000);
  ASSERT_TRUE(file.has_value()) << file.error().ToString();
  ASSERT_TRUE((*file)->can_discard());
  std::vector<BackingFile::Range> ranges;
  for (std::uint64_t i = 0; i < 6; ++i) {
    ranges.push_back({2 * i * kPageSize, kPageSize});
  }
  bool sent[6] = {};
  (*file)->Discard(ranges, sent);
  for (int i = 0; i < 6; ++i) EXPECT_TRUE(sent[i]) << "TRIM " << i;
  std::vector<std::byte> out(kPageSize);
  EXPECT_EQ((*file)->Read(16 * kPageSize, out), static_cast<long>(kPageSize));
}

// An export that comes back smaller than at open but still holding the
// part this file uses (max_bytes), with the label, is the same export:
// nothing is lost, at that reconnect or at later ones. (Every written
// block was counted lost, again at each later reconnect.)
TEST(NbdBackingFileTest, AShrunkExportHoldingTheUsedPartLosesNothing) {
  ScopedTempDir dir;
  const std::string image = SparseImage(dir);
  std::optional<Remote> remote;
  auto restart = [&] {
    remote.reset();
    remote.emplace(dir, "", false, std::vector<std::string>{},
                   std::vector<std::string>{"file", image});
  };
  restart();
  auto file = OpenNbdBackingFile(
      remote->Uri(),
      {.connections = 1, .timeout_ms = 10000, .max_bytes = 2 << 20});
  ASSERT_TRUE(file.has_value()) << file.error().ToString();
  auto store = StoreOn(*file);
  ASSERT_EQ(FillAndWriteBack(*store, 64), 64u);
  remote.reset();
  ASSERT_EQ(Sh("truncate -s 4M '" + image + "'").exit_code, 0);
  restart();
  Expect(*store, 0, 64);
  EXPECT_EQ((*file)->lost_blocks(), 0u);
  // A later reconnect to the same export loses nothing either.
  Fill(*store, 64, 128);
  ASSERT_EQ(WriteBackIdle(*store).written, 64u);
  const std::uint64_t before = (*file)->lost_blocks();
  restart();
  Expect(*store, 64, 128);
  EXPECT_EQ((*file)->lost_blocks(), before);
}

// Every write is durable on the remote before the store frees its RAM
// copy (FUA, the label's too), and a file given max_bytes uses no more of
// the export.
TEST(NbdBackingFileTest, WritesCarryFuaAndStayWithinMaxBytes) {
  ScopedTempDir dir;
  Remote remote(dir, "--filter=log", false, {"logfile=" + dir.File("cmds.log")});
  auto file = OpenNbdBackingFile(remote.Uri(),
                                 {.connections = 2, .max_bytes = 1 << 20});
  ASSERT_TRUE(file.has_value()) << file.error().ToString();
  EXPECT_EQ((*file)->size(), 1u << 20);
  auto store = StoreOn(*file);
  Fill(*store, 0, 200);
  const WritebackResult r = WriteBackIdle(*store);
  ASSERT_OK(r.status);
  EXPECT_EQ(r.written, 200u);
  Expect(*store, 0, 200);
  store.reset();
  file->reset();
  const std::string log = Sh("cat '" + dir.File("cmds.log") + "'").out;
  int writes = 0;
  std::istringstream lines(log);
  for (std::string line; std::getline(lines, line);) {
    if (line.find(" Write ") == std::string::npos) continue;
    ++writes;
    EXPECT_NE(line.find("fua=1"), std::string::npos) << line;
  }
  EXPECT_GT(writes, 1) << log;  // the label and the pages
}

// Compressed writeback (zram's compressed_writeback) and an encrypted
// store, over the remote as over a file: the objects go out sealed and
// come back whole.
TEST(NbdBackingFileTest, CompressedAndEncryptedWriteback) {
  ScopedTempDir dir;
  Remote remote(dir);
  auto file = OpenNbdBackingFile(remote.Uri(), {.connections = 2});
  ASSERT_TRUE(file.has_value()) << file.error().ToString();
  auto store = StoreOn(*file, {.encrypt = true});
  Fill(*store, 0, kPages);
  const WritebackResult r = WriteBackIdle(*store, /*compressed=*/true);
  ASSERT_OK(r.status);
  EXPECT_EQ(r.written, kPages);
  EXPECT_EQ(store->Stats().bd_count, kPages);
  Expect(*store, 0, kPages);
  // The remote holds none of the pages' text.
  const auto raw = Sh("nbdcopy '" + remote.Uri() + "' - | grep -c -a "
                      "'of the remote test'");
  EXPECT_EQ(raw.out, "0\n");
}

// Blocks changed on the remote behind the store's back (another client
// writes over them): their pages read as IO errors, never as the other
// bytes; every other page reads as written.
TEST(NbdBackingFileTest, BlocksChangedOnTheRemoteReadAsErrors) {
  ScopedTempDir dir;
  Remote remote(dir);
  auto file = OpenNbdBackingFile(remote.Uri(), {.connections = 1});
  ASSERT_TRUE(file.has_value()) << file.error().ToString();
  auto store = StoreOn(*file);
  Fill(*store, 0, kPages);
  ASSERT_EQ(WriteBackIdle(*store).written, kPages);
  // Blocks 0..15 (after the 4096-byte label), overwritten with a pattern.
  const auto w = Sh("qemu-io -f raw '" + remote.Uri() +
                    "' -c 'write -P 0x55 4096 65536' 2>&1");
  ASSERT_EQ(w.exit_code, 0) << w.out;
  std::vector<std::byte> out(kPageSize);
  std::size_t errors = 0;
  for (std::size_t i = 0; i < kPages; ++i) {
    const Status st = store->Load(i, MutablePage(out.data(), kPageSize));
    if (!st.ok()) {
      EXPECT_EQ(st.code(), StatusCode::kIoError) << "page " << i;
      ++errors;
      continue;
    }
    ASSERT_EQ(std::memcmp(out.data(), Page(i).data(), kPageSize), 0)
        << "page " << i;
  }
  EXPECT_EQ(errors, 16u);
}

// `page` with its first 8 bytes changed and the next 8 fixed up so that
// its std::hash (libstdc++'s MurmurHash64A: every 8-byte step is
// invertible) stays the same: what a hostile remote can do to an unkeyed
// checksum.
std::vector<std::byte> ForgedPage(const std::vector<std::byte>& page) {
  constexpr std::uint64_t kMul = (std::uint64_t{0xc6a4a793} << 32) + 0x5bd1e995;
  std::uint64_t inv = kMul;  // kMul's inverse mod 2^64 (Newton)
  for (int i = 0; i < 6; ++i) inv *= 2 - kMul * inv;
  auto mix = [](std::uint64_t v) { return v ^ (v >> 47); };  // an involution
  auto step = [&](std::uint64_t k) { return mix(k * kMul) * kMul; };
  auto unstep = [&](std::uint64_t y) { return mix(y * inv) * inv; };
  std::uint64_t k0, k1;
  std::memcpy(&k0, page.data(), 8);
  std::memcpy(&k1, page.data() + 8, 8);
  const std::uint64_t h0 = std::uint64_t{0xc70f6907} ^ (page.size() * kMul);
  const std::uint64_t forged0 = 0x2144454752524f46;  // "FORRGED!"
  const std::uint64_t h1 = (h0 ^ step(k0)) * kMul;
  const std::uint64_t f1 = (h0 ^ step(forged0)) * kMul;
  const std::uint64_t forged1 = unstep(h1 ^ f1 ^ step(k1));
  std::vector<std::byte> out = page;
  std::memcpy(out.data(), &forged0, 8);
  std::memcpy(out.data() + 8, &forged1, 8);
  return out;
}

// A hostile remote that changes a block so that an unkeyed checksum still
// matches (the forgery above): the page reads as an IO error, never as
// the forged bytes.
TEST(NbdBackingFileTest, BlocksForgedOnTheRemoteReadAsErrors) {
  ScopedTempDir dir;
  Remote remote(dir);
  auto file = OpenNbdBackingFile(remote.Uri(), {.connections = 1});
  ASSERT_TRUE(file.has_value()) << file.error().ToString();
  auto store = StoreOn(*file);
  ASSERT_EQ(FillAndWriteBack(*store, 1), 1u);
  const std::vector<std::byte> forged = ForgedPage(Page(0));
  auto view = [](const std::vector<std::byte>& p) {
    return std::string_view(reinterpret_cast<const char*>(p.data()), p.size());
  };
  ASSERT_NE(view(forged), view(Page(0)));
  ASSERT_EQ(std::hash<std::string_view>{}(view(forged)),
            std::hash<std::string_view>{}(view(Page(0))));
  {
    std::ofstream f(dir.File("forged"), std::ios::binary);
    f.write(view(forged).data(), static_cast<std::streamsize>(forged.size()));
  }
  // Block 0 (after the 4096-byte label).
  const auto w = Sh("qemu-io -f raw '" + remote.Uri() + "' -c 'write -s " +
                    dir.File("forged") + " 4096 4096' 2>&1");
  ASSERT_EQ(w.exit_code, 0) << w.out;
  std::vector<std::byte> out(kPageSize);
  const Status st = store->Load(0, MutablePage(out.data(), kPageSize));
  EXPECT_EQ(st.code(), StatusCode::kIoError) << st.ToString();
  EXPECT_NE(std::memcmp(out.data(), forged.data(), kPageSize), 0);
}

TEST(NbdBackingFileTest, AKilledRemoteKeepsPagesAndComesBackEmptyAsLost) {
  ScopedTempDir dir;
  Remote remote(dir);
  std::vector<std::string> log;
  auto file = OpenNbdBackingFile(
      remote.Uri(), {.connections = 2,
                     .timeout_ms = 2000,
                     .log = [&](const std::string& l) { log.push_back(l); }});
  ASSERT_TRUE(file.has_value()) << file.error().ToString();
  auto store = StoreOn(*file);
  ASSERT_EQ(FillAndWriteBack(*store, 256), 256u);
  remote.Kill();
  // Away: written-back pages are errors, never data; a writeback pass
  // keeps its pages in RAM and fails with EIO.
  Expect(*store, 0, 3, /*want_error=*/true);
  // The failed attempts of those three reads have grown the backoff to its
  // 5 s, past a read's timeout (2 s): the next read fails at once, not at
  // its deadline.
  const auto t0 = std::chrono::steady_clock::now();
  Expect(*store, 3, 4, /*want_error=*/true);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(1));
  Fill(*store, 256, kPages);
  const WritebackResult away = WriteBackIdle(*store);
  EXPECT_EQ(away.status.code(), StatusCode::kIoError);
  EXPECT_EQ(away.written, 0u);
  Expect(*store, 256, kPages);
  // Back, but empty (a restarted memory export): the old blocks are lost,
  // said once, and their pages stay errors; new writeback works.
  remote.Start();
  // Reads fail at once until the backoff (at most 5 s since the last failed
  // attempt) allows the next one, which finds the remote back.
  const auto until =
      std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while ((*file)->lost_blocks() == 0 &&
         std::chrono::steady_clock::now() < until) {
    Expect(*store, 0, 1, /*want_error=*/true);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  Expect(*store, 0, 256, /*want_error=*/true);
  EXPECT_EQ((*file)->lost_blocks(), 256u);
  EXPECT_EQ(store->Stats().bd_lost, 256u);
  ASSERT_EQ(log.size(), 1u);
  EXPECT_NE(log[0].find("256 written-back blocks are lost"), std::string::npos)
      << log[0];
  const WritebackResult back = WriteBackIdle(*store);
  ASSERT_OK(back.status);
  EXPECT_EQ(back.written, kPages - 256);
  Expect(*store, 256, kPages);
  // Overwriting a lost page makes it whole again.
  Fill(*store, 0, 1);
  Expect(*store, 0, 1);
}

// Reads and writes go on a connection that is up when another is down:
// a remote back after a restart that takes one connection only (nbdkit's
// limit filter) serves every read and write, with none failing on the
// connection that cannot be made, whichever of the two has the remote.
TEST(NbdBackingFileTest, ReadsAndWritesGoOnAConnectionThatIsUp) {
  ScopedTempDir dir;
  const std::string image = SparseImage(dir);
  std::optional<Remote> remote;
  auto restart = [&](bool one_connection) {
    remote.reset();
    remote.emplace(dir, one_connection ? "--filter=limit" : "", false,
                   one_connection ? std::vector<std::string>{"limit=1"}
                                  : std::vector<std::string>{},
                   std::vector<std::string>{"file", image});
  };
  restart(false);
  auto file =
      OpenNbdBackingFile(remote->Uri(), {.connections = 2, .timeout_ms = 2000});
  ASSERT_TRUE(file.has_value()) << file.error().ToString();
  auto store = StoreOn(*file);
  ASSERT_EQ(FillAndWriteBack(*store, 64), 64u);
  // The first connection takes the remote (a read, made again on it);
  // a pass's write on the second, cut by the restart, fails.
  restart(true);
  Expect(*store, 0, 64);
  Fill(*store, 64, 128);
  WriteBackIdle(*store);
  Fill(*store, 128, 192);
  ASSERT_OK(WriteBackIdle(*store).status);
  EXPECT_EQ(store->Stats().bd_count, 192u);
  // The second connection takes it (past its backoff, while the first
  // still holds its cut connection), and serves the reads.
  restart(true);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  Fill(*store, 192, 256);
  WriteBackIdle(*store);
  Fill(*store, 256, 320);
  ASSERT_OK(WriteBackIdle(*store).status);
  EXPECT_EQ(store->Stats().bd_count, 320u);
  Expect(*store, 0, 320);
  EXPECT_EQ((*file)->lost_blocks(), 0u);
}

TEST(NbdBackingFileTest, AStoppedRemoteTimesOutAndThenServesAgain) {
  ScopedTempDir dir;
  Remote remote(dir);
  // 2 s: a loaded machine's reconnect after the Continue fits in it.
  auto file = OpenOneConnection(remote, 2000);
  ASSERT_TRUE(file.has_value()) << file.error().ToString();
  auto store = StoreOn(*file);
  ASSERT_EQ(FillAndWriteBack(*store, 128), 128u);
  remote.Stop();
  const auto t0 = std::chrono::steady_clock::now();
  Expect(*store, 0, 1, /*want_error=*/true);
  Fill(*store, 128, 256);
  const WritebackResult stalled = WriteBackIdle(*store);
  const double seconds = std::chrono::duration<double>(
                             std::chrono::steady_clock::now() - t0)
                             .count();
  EXPECT_EQ(stalled.status.code(), StatusCode::kIoError);
  EXPECT_EQ(stalled.written, 0u);
  EXPECT_LT(seconds, 30);  // bounded by the timeout, not hung
  Expect(*store, 128, 256);
  remote.Continue();
  // Same remote: nothing lost; after the backoff it serves again. (The
  // read below waits for the hold-off the stall set, which ends about
  // 2 s after it: the sleep leaves its reconnect 1.5 s of its 2 s.)
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  Expect(*store, 0, 128);
  EXPECT_EQ((*file)->lost_blocks(), 0u);
  const WritebackResult again = WriteBackIdle(*store);
  ASSERT_OK(again.status);
  EXPECT_EQ(again.written, 128u);
  Expect(*store, 0, 256);
}

// A remote that stalls while the connection is down (restarted, then
// stopped: a new connection's handshake gets no answer): the reconnect
// that runs out of time holds off the next attempts for a timeout, so a
// writeback pass then fails at once rather than wait a timeout of its own
// (a read waits for the hold-off to end and tries once more: Read's
// contract). Once the remote goes on, reads and writes work again.
TEST(NbdBackingFileTest, AStalledReconnectHoldsOffTheCommandsBehindIt) {
  ScopedTempDir dir;
  const std::string image = SparseImage(dir);
  Remote remote(dir, "", false, {}, {"file", image});
  auto file = OpenOneConnection(remote, 2000);
  ASSERT_TRUE(file.has_value()) << file.error().ToString();
  auto store = StoreOn(*file);
  ASSERT_EQ(FillAndWriteBack(*store, 64), 64u);
  remote.Kill();
  remote.Start();
  remote.Stop();
  Expect(*store, 0, 1, /*want_error=*/true);  // a whole timeout (2 s)
  // Past the backoff (100 ms), inside the hold-off (2 s).
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  Fill(*store, 64, 128);
  const auto t0 = std::chrono::steady_clock::now();
  const WritebackResult stalled = WriteBackIdle(*store);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  EXPECT_EQ(stalled.status.code(), StatusCode::kIoError);
  EXPECT_LT(seconds, 1.0);  // at once; an attempt of its own takes 2 s
  remote.Continue();
  std::this_thread::sleep_for(std::chrono::milliseconds(2000));
  Expect(*store, 0, 128);
  const WritebackResult again = WriteBackIdle(*store);
  ASSERT_OK(again.status);
  EXPECT_EQ(again.written, 64u);
  Expect(*store, 0, 128);
  EXPECT_EQ((*file)->lost_blocks(), 0u);
}

// Bytes of the export that hold data, from `nbdinfo --map --totals`
// (nbdkit's memory plugin reports trimmed ranges as holes).
std::uint64_t DataBytes(const std::string& uri) {
  const auto r = Sh("nbdinfo --map --totals '" + uri +
                    "' | awk '$4 == \"data\" {print $1}'");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  return std::strtoull(r.out.c_str(), nullptr, 10);
}

// Pages dropped from the store free their blocks; the next writeback pass
// TRIMs them on the remote, whose memory holds them no more.
TEST(NbdBackingFileTest, FreedBlocksAreTrimmedOnTheRemote) {
  ScopedTempDir dir;
  Remote remote(dir);
  auto file = OpenNbdBackingFile(remote.Uri(), {.connections = 2});
  ASSERT_TRUE(file.has_value()) << file.error().ToString();
  EXPECT_TRUE((*file)->can_discard());
  auto store = StoreOn(*file);
  Fill(*store, 0, kPages);
  ASSERT_EQ(WriteBackIdle(*store).written, kPages);
  const std::uint64_t before = DataBytes(remote.Uri());
  EXPECT_GE(before, (kPages + 1) * kPageSize);
  for (std::size_t i = 0; i < kPages / 2; ++i) ASSERT_OK(store->Discard(i));
  EXPECT_EQ(store->Stats().bd_count, kPages / 2);
  const WritebackResult r = WriteBackIdle(*store);
  ASSERT_OK(r.status);
  EXPECT_EQ(r.written, 0u);
  EXPECT_EQ(store->Stats().bd_count, kPages / 2);
  const std::uint64_t after = DataBytes(remote.Uri());
  // The memory plugin keeps data in 32 KiB pages: allow one at each end.
  EXPECT_LE(after + (kPages / 2) * kPageSize, before + 64 * 1024)
      << "before " << before << ", after " << after;
  Expect(*store, kPages / 2, kPages);
  // The blocks are free again: a refill writes back into them.
  Fill(*store, 0, kPages / 2);
  ASSERT_EQ(WriteBackIdle(*store).written, kPages / 2);
  EXPECT_EQ(store->Stats().bd_count, kPages);
  Expect(*store, 0, kPages);
}

// A TRIM the remote refuses (an error reply) has been answered all the
// same: its blocks are free again, not asked for at every pass; their
// space stays in use on the remote, which the log says once.
TEST(NbdBackingFileTest, BlocksWhoseTrimIsRefusedAreFreedAnyway) {
  ScopedTempDir dir;
  Remote remote(dir, "--filter=error", false,
                {"error-trim=EIO", "error-trim-rate=1"});
  std::vector<std::string> log;
  auto file = OpenNbdBackingFile(
      remote.Uri(), {.connections = 1,
                     .log = [&](const std::string& l) { log.push_back(l); }});
  ASSERT_TRUE(file.has_value()) << file.error().ToString();
  auto bs = BackingStore::Open({.file = *file});
  ASSERT_TRUE(bs.has_value()) << bs.error().ToString();
  const std::uint64_t blocks = (*bs)->num_blocks();
  std::size_t got = 0;
  ASSERT_EQ((*bs)->AllocRange(blocks, &got), 0u);
  ASSERT_EQ(got, blocks);
  for (std::uint64_t b = 0; b < 16; ++b) (*bs)->Free(b);
  EXPECT_EQ((*bs)->DiscardFreed(), 16u);
  EXPECT_EQ((*bs)->DiscardFreed(), 0u);
  EXPECT_EQ((*bs)->blocks_used(), blocks - 16);
  EXPECT_EQ((*bs)->AllocRange(16, &got), 0u);
  EXPECT_EQ(got, 16u);
  for (std::uint64_t b = 0; b < 16; b += 2) (*bs)->Free(b);
  EXPECT_EQ((*bs)->DiscardFreed(), 8u);
  ASSERT_EQ(log.size(), 1u);
  EXPECT_NE(log[0].find("refused"), std::string::npos) << log[0];
  // Where on the export, as the server's own log has it: the file's
  // block 0 lies after the label, at 4096.
  EXPECT_NE(log[0].find("at export offset 4096"), std::string::npos) << log[0];
}

// Blocks freed on the remote (here with every TRIM refused) hold nothing
// a page needs: a remote that comes back empty loses only the blocks pages
// still use.
TEST(NbdBackingFileTest, FreedBlocksAreNotCountedLost) {
  ScopedTempDir dir;
  Remote remote(dir, "--filter=error", false,
                {"error-trim=EIO", "error-trim-rate=1"});
  auto file = OpenNbdBackingFile(remote.Uri(),
                                 {.connections = 1, .timeout_ms = 2000});
  ASSERT_TRUE(file.has_value()) << file.error().ToString();
  auto store = StoreOn(*file);
  ASSERT_EQ(FillAndWriteBack(*store, 256), 256u);
  for (std::uint64_t i = 0; i < 100; ++i) ASSERT_OK(store->Discard(i));
  // The next pass frees their blocks first (a refused TRIM).
  Fill(*store, 256, 257);
  ASSERT_EQ(WriteBackIdle(*store).written, 1u);
  remote.Kill();
  remote.Start();
  Expect(*store, 100, 257, /*want_error=*/true);
  EXPECT_EQ((*file)->lost_blocks(), 157u);
  EXPECT_EQ(store->Stats().bd_lost, 157u);
}

// nbds://: the remote requires TLS; the store writes back and reads over
// it, and a client without TLS is refused.
TEST(NbdBackingFileTest, WritebackOverTls) {
  ScopedTempDir dir;
  ASSERT_OK(testing::MakeTestCertificates(dir.path()));
  Remote remote(dir, "", /*tls=*/true);
  auto plain = OpenNbdBackingFile(remote.PlainUri(), {.timeout_ms = 2000});
  ASSERT_FALSE(plain.has_value());
  EXPECT_EQ(plain.error().code(), StatusCode::kIoError);
  auto file = OpenNbdBackingFile(remote.Uri(), {.connections = 2});
  ASSERT_TRUE(file.has_value()) << file.error().ToString();
  auto store = StoreOn(*file);
  Fill(*store, 0, kPages);
  const WritebackResult r = WriteBackIdle(*store);
  ASSERT_OK(r.status);
  EXPECT_EQ(r.written, kPages);
  Expect(*store, 0, kPages);
  EXPECT_EQ(store->Stats().bd_reads, kPages);
}

// An export whose maximum request is 64 KiB and that refuses longer TRIMs
// (EINVAL, which proto.md's "Block size constraints" allows a server for a
// command without payload longer than the maximum): a freed run of 64
// blocks is trimmed in pieces that fit, every one carried out. (Sent
// whole, the TRIM was refused, counted as answered, and its space never
// given back, with nothing in the log.)
TEST(NbdBackingFileTest, TrimsStayWithinTheExportsMaximumRequest) {
  ScopedTempDir dir;
  const std::string image = dir.File("remote.img");
  const std::string trims = dir.File("trims");
  ASSERT_EQ(Sh("truncate -s 8M '" + image + "'").exit_code, 0);
  const std::string script = ShExport(
      dir, image,
      "  block_size) echo 512 4096 64K ;;\n"
      "  can_trim) exit 0 ;;\n"
      "  trim) if [ \"$3\" -gt 65536 ]; then echo EINVAL >&2; exit 1; fi;"
      "    echo \"$4 $3\" >> \"$d/trims\" ;;\n");
  Remote remote(dir, "", false, {}, {"sh", script});
  std::vector<std::string> log;
  auto file = OpenNbdBackingFile(
      remote.Uri(), {.connections = 1,
                     .timeout_ms = 10000,
                     .log = [&](const std::string& l) { log.push_back(l); }});
  ASSERT_TRUE(file.has_value()) << file.error().ToString();
  ASSERT_TRUE((*file)->can_discard());
  auto bs = BackingStore::Open({.file = *file});
  ASSERT_TRUE(bs.has_value()) << bs.error().ToString();
  std::size_t got = 0;
  ASSERT_EQ((*bs)->AllocRange(64, &got), 0u);
  ASSERT_EQ(got, 64u);
  for (std::uint64_t b = 0; b < 64; ++b) (*bs)->Free(b);
  EXPECT_EQ((*bs)->DiscardFreed(), 64u);
  // 4 TRIMs of 64 KiB, after the label.
  EXPECT_EQ(Sh("sort -n '" + trims + "'").out,
            "4096 65536\n69632 65536\n135168 65536\n200704 65536\n");
  EXPECT_TRUE(log.empty()) << log[0];
}

// Every connection made at open is checked as a reconnect is: one that
// offers less than the first (here nbdkit's sh plugin over a file, whose
// connections after the first offer what the file `less` says) fails the
// open, saying how; one with a smaller maximum request that still takes
// 4096-byte requests caps the writes. (Only the first was checked: the
// others were used as they came.)
TEST(NbdBackingFileTest, EveryConnectionIsCheckedAtOpen) {
  ScopedTempDir dir;
  const std::string image = dir.File("remote.img");
  const std::string opens = dir.File("opens");
  const std::string less = dir.File("less");
  // Connection n (from 0, counted in $d/opens): all but the first offer
  // less in the method $d/less names.
  const std::string script = ShExport(
      dir, image,
      "  open) n=$(cat \"$d/opens\"); echo $((n + 1)) > \"$d/opens\";"
      " echo \"$n\" ;;\n"
      "  get_size|can_write|can_multi_conn|can_fua|block_size)\n"
      "    if [ \"$2\" != 0 ] && [ \"$(cat \"$d/less\")\" = \"$1\" ]; then\n"
      "      case \"$1\" in\n"
      "        get_size) echo 1M ;;\n"
      "        can_fua) echo none ;;\n"
      "        block_size) echo 512 4096 64K ;;\n"
      "        *) exit 3 ;;\n"
      "      esac\n"
      "    else\n"
      "      case \"$1\" in\n"
      "        get_size) stat -c %s \"$f\" ;;\n"
      "        can_fua) echo native ;;\n"
      "        block_size) echo 512 4096 1M ;;\n"
      "      esac\n"
      "    fi ;;\n");
  ASSERT_EQ(Sh("truncate -s 8M '" + image + "' && echo none > '" + less + "'")
                .exit_code,
            0);
  Remote remote(dir, "", false, {}, {"sh", script});
  auto open = [&](std::string what) {
    EXPECT_EQ(
        Sh("echo 0 > '" + opens + "' && echo " + what + " > '" + less + "'")
            .exit_code,
        0);
    return OpenNbdBackingFile(remote.Uri(),
                              {.connections = 2, .timeout_ms = 10000});
  };
  for (const auto& [what, said] :
       std::initializer_list<std::pair<std::string, std::string>>{
           {"can_write", "read-only"},
           {"get_size", "smaller (1048576 bytes)"},
           {"can_multi_conn", "without multi-conn"},
           {"can_fua", "without FUA"}}) {
    SCOPED_TRACE(what);
    auto r = open(what);
    ASSERT_FALSE(r.has_value());
    EXPECT_NE(r.error().message().find("connection 2 "), std::string::npos)
        << r.error().message();
    EXPECT_NE(r.error().message().find(said), std::string::npos)
        << r.error().message();
  }
  auto capped = open("block_size");
  ASSERT_TRUE(capped.has_value()) << capped.error().ToString();
  EXPECT_EQ((*capped)->max_write_bytes(), 65536u);
  capped->reset();
  auto whole = open("none");
  ASSERT_TRUE(whole.has_value()) << whole.error().ToString();
  EXPECT_EQ((*whole)->max_write_bytes(), 1u << 20);
  auto store = StoreOn(*whole);
  ASSERT_EQ(FillAndWriteBack(*store, 64), 64u);
  Expect(*store, 0, 64);
}

// A remote that comes back with a smaller maximum request, but whose
// label cannot be read (here nbdkit's error filter fails every read while
// a file exists), is not used, and its maximum caps nothing; once its
// label is read, it does. (The maximum was recorded before the check.)
TEST(NbdBackingFileTest, AMaximumIsRecordedOnlyOnceTheReconnectIsAccepted) {
  ScopedTempDir dir;
  const std::string image = SparseImage(dir);
  const std::string failing = dir.File("reads-fail");
  std::optional<Remote> remote;
  remote.emplace(dir, "", false, std::vector<std::string>{},
                 std::vector<std::string>{"file", image});
  auto file =
      OpenNbdBackingFile(remote->Uri(), {.connections = 1, .timeout_ms = 1000});
  ASSERT_TRUE(file.has_value()) << file.error().ToString();
  EXPECT_EQ((*file)->max_write_bytes(), 0u);
  auto store = StoreOn(*file);
  ASSERT_EQ(FillAndWriteBack(*store, 4), 4u);
  remote.reset();
  remote.emplace(dir, "--filter=error --filter=blocksize-policy", false,
                 std::vector<std::string>{"blocksize-maximum=65536",
                                          "error=EIO", "error-pread-rate=1",
                                          "error-pread-file=" + failing},
                 std::vector<std::string>{"file", image});
  ASSERT_EQ(Sh("touch '" + failing + "'").exit_code, 0);
  Expect(*store, 0, 1, /*want_error=*/true);
  EXPECT_EQ((*file)->max_write_bytes(), 0u);
  ASSERT_EQ(Sh("rm '" + failing + "'").exit_code, 0);
  ASSERT_TRUE(ReadsAgain(*store));
  Expect(*store, 0, 4);
  EXPECT_EQ((*file)->max_write_bytes(), 65536u);
}

// A write queued from inside Reap's `done` is reported by a later Reap,
// never by the one calling `done`, as with every other writer
// (ztier/backing_file.h). Here both fail at once in Queue (the remote is
// gone, and its connection backing off): io 1, queued by io 0's `done`,
// was reported by the same Reap.
TEST(NbdBackingFileTest, AWriteQueuedFromDoneIsReportedByTheNextReap) {
  ScopedTempDir dir;
  Remote remote(dir);
  auto file = OpenOneConnection(remote, 500);
  ASSERT_TRUE(file.has_value()) << file.error().ToString();
  remote.Kill();
  std::vector<std::byte> out(kPageSize);
  ASSERT_LT((*file)->Read(0, out), 0);  // the connection is closed
  auto writer = (*file)->NewWriter(2, kPageSize);
  ASSERT_TRUE(writer.has_value()) << writer.error().ToString();
  BackingFileWriter& w = **writer;
  w.Queue(0, 0, kPageSize);
  std::vector<std::size_t> reported;
  auto done = [&](std::size_t io, long result) {
    EXPECT_LT(result, 0) << "io " << io;
    reported.push_back(io);
    if (io == 0) w.Queue(1, kPageSize, kPageSize);
  };
  EXPECT_EQ(w.Reap(true, done), 1u);
  EXPECT_EQ(reported, std::vector<std::size_t>{0});
  EXPECT_EQ(w.Reap(true, done), 1u);
  EXPECT_EQ(reported, (std::vector<std::size_t>{0, 1}));
  EXPECT_EQ(w.Reap(false, done), 0u);
}


// A long run freed on an export with a small maximum request goes as many
// TRIMs (here 65536 of 4 KiB, each taking the remote 1 ms, 16 at a time):
// a few are in flight at once, not all, so a read on the same connection
// waits behind a few TRIMs, not the whole batch. (All went into libnbd's
// queue at once: the read waited its whole timeout behind them and, found
// stalled, closed the connection, failing the TRIMs too.)
TEST(NbdBackingFileTest, AReadIsNotQueuedBehindAWholeBatchOfTrims) {
  ScopedTempDir dir;
  Remote remote(dir, "--filter=blocksize-policy --filter=delay", false,
                {"blocksize-maximum=4096", "delay-trim=1ms"},
                {"memory", "1G"});
  auto file = OpenNbdBackingFile(remote.Uri(),
                                 {.connections = 1, .timeout_ms = 2000});
  ASSERT_TRUE(file.has_value()) << file.error().ToString();
  ASSERT_EQ((*file)->max_write_bytes(), 4096u);
  const BackingFile::Range ranges[1] = {{0, std::uint64_t{256} << 20}};
  bool sent[1] = {false};
  std::thread discard([&] { (*file)->Discard(ranges, sent); });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  std::vector<std::byte> out(kPageSize);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ((*file)->Read(0, out), static_cast<long>(kPageSize));
  EXPECT_LT(std::chrono::steady_clock::now() - start,
            std::chrono::milliseconds(1000));
  discard.join();
  EXPECT_TRUE(sent[0]);
}

// A remote that refuses some TRIMs and carries out others (here half, at
// random) gets one log line for the first Discard it refuses some of,
// with how many, not one each time a refusal follows a success: three
// passes of 128 TRIMs (which logged about 32 lines each).
TEST(NbdBackingFileTest, TrimsRefusedNowAndThenAreLoggedOnce) {
  ScopedTempDir dir;
  Remote remote(dir, "--filter=error", false,
                {"error-trim=EIO", "error-trim-rate=0.5"});
  std::vector<std::string> log;
  auto file = OpenNbdBackingFile(
      remote.Uri(), {.connections = 1,
                     .log = [&](const std::string& l) { log.push_back(l); }});
  ASSERT_TRUE(file.has_value()) << file.error().ToString();
  std::vector<BackingFile::Range> ranges;
  for (std::uint64_t i = 0; i < 128; ++i) {
    ranges.push_back({2 * i * kPageSize, kPageSize});
  }
  for (int pass = 0; pass < 3; ++pass) {
    bool sent[128] = {};
    (*file)->Discard(ranges, sent);
    for (bool s : sent) ASSERT_TRUE(s);
  }
  ASSERT_EQ(log.size(), 1u);
  EXPECT_NE(log[0].find(" of 128 TRIMs"), std::string::npos) << log[0];
}

// A remote refused at a reconnect (here back read-only) is logged once,
// though a reconnect between found it offering what it did and then
// failed to read its label: that is no check passed. (The reason was
// forgotten before the label read, and the same refusal logged again.)
TEST(NbdBackingFileTest, ARefusalIsNotLoggedAgainAfterAFailedLabelRead) {
  ScopedTempDir dir;
  std::vector<std::string> log;
  std::optional<Remote> remote(std::in_place, dir);
  auto file = OpenNbdBackingFile(
      remote->Uri(), {.connections = 1,
                      .timeout_ms = 2000,
                      .log = [&](const std::string& l) { log.push_back(l); }});
  ASSERT_TRUE(file.has_value()) << file.error().ToString();
  const std::vector<BackingFile::Range> ranges = {{0, kPageSize}};
  bool sent[1] = {};
  auto restart = [&](std::string flag, std::vector<std::string> params) {
    remote.reset();
    // Past the backoff of the attempt before (at most 400 ms here).
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    remote.emplace(dir, std::move(flag), false, std::move(params));
  };
  restart("-r", {});
  (*file)->Discard(ranges, sent);  // finds the connection dropped
  (*file)->Discard(ranges, sent);  // refused: read-only
  EXPECT_FALSE(sent[0]);
  restart("--filter=error", {"error-pread=EIO", "error-pread-rate=1"});
  (*file)->Discard(ranges, sent);  // offers what it did; its label read fails
  EXPECT_FALSE(sent[0]);
  restart("-r", {});
  (*file)->Discard(ranges, sent);  // refused again, for the same reason
  EXPECT_FALSE(sent[0]);
  std::size_t said = 0;
  for (const std::string& l : log) {
    if (l.find("read-only") != std::string::npos) ++said;
  }
  EXPECT_EQ(said, 1u);
}

// A writer whose construction runs out of memory after its buffers were
// allocated frees them: 64 MiB of them (above glibc's largest mmap
// threshold, so counted in hblkhd), no allocation failed keeping them.
TEST(NbdBackingFileTest, AWriterThatCannotBeMadeFreesItsBuffers) {
  ScopedTempDir dir;
  Remote remote(dir);
  auto file = OpenNbdBackingFile(remote.Uri(), {.connections = 1});
  ASSERT_TRUE(file.has_value()) << file.error().ToString();
  const std::size_t before = mallinfo2().hblkhd;
  int failed = 0;
  for (long n = 1; n < 20; ++n) {
    ::ztier::testing::FailNthAllocation(n);
    try {
      auto w = (*file)->NewWriter(64, std::size_t{1} << 20);
      ::ztier::testing::FailNthAllocation(0);
      if (!::ztier::testing::AllocationFailed()) break;  // none left to fail
    } catch (const std::bad_alloc&) {
      ::ztier::testing::FailNthAllocation(0);
      ++failed;
    }
    EXPECT_EQ(mallinfo2().hblkhd, before) << "allocation " << n << " failed";
  }
  EXPECT_GE(failed, 2);
}

// A Discard starts no range after about timeout_ms, leaving the rest
// unanswered for the next pass (ztier/backing_file.h): a writeback pass
// behind it waits that long, not the whole batch (here 64 runs of 4 MiB,
// 65536 TRIMs of 4 KiB, each taking the remote 1 ms, 16 at a time: about
// 4 s, against a 1 s timeout). Each pass answers some; the next sends
// those left.
TEST(NbdBackingFileTest, ADiscardStartsNoRangeAfterItsTimeout) {
  ScopedTempDir dir;
  Remote remote(dir, "--filter=blocksize-policy --filter=delay", false,
                {"blocksize-maximum=4096", "delay-trim=1ms"},
                {"memory", "1G"});
  auto file = OpenNbdBackingFile(remote.Uri(),
                                 {.connections = 1, .timeout_ms = 1000});
  ASSERT_TRUE(file.has_value()) << file.error().ToString();
  ASSERT_EQ((*file)->max_write_bytes(), 4096u);
  std::vector<BackingFile::Range> ranges;
  for (std::uint64_t i = 0; i < 64; ++i) {
    ranges.push_back({i * (std::uint64_t{8} << 20), std::uint64_t{4} << 20});
  }
  int passes = 0;
  while (!ranges.empty() && passes < 20) {
    ++passes;
    std::unique_ptr<bool[]> sent(new bool[ranges.size()]());
    const auto start = std::chrono::steady_clock::now();
    (*file)->Discard(ranges, std::span<bool>(sent.get(), ranges.size()));
    EXPECT_LT(std::chrono::steady_clock::now() - start,
              std::chrono::milliseconds(2000));
    ASSERT_TRUE(sent[0]) << "pass " << passes;  // each pass answers one
    std::vector<BackingFile::Range> left;
    for (std::size_t i = 0; i < ranges.size(); ++i) {
      if (!sent[i]) left.push_back(ranges[i]);
    }
    ranges = std::move(left);
  }
  EXPECT_TRUE(ranges.empty());
  EXPECT_GT(passes, 1);
}

// Under a BackingStore, whose passes hand the ranges left by one pass's
// timeout to the next: frees that keep coming at low blocks faster than
// the remote trims them do not keep a run at a high block waiting. 40 runs
// of 4 MiB low and one high (1024 TRIMs of 4 KiB each, taking the remote
// 1 ms apiece: about 3 s in all) against a 500 ms timeout; each low run
// answered is handed out and freed again before the next pass. The high
// run is answered once the passes have answered as many runs as were
// ahead of it (41, itself included), not left for ever.
TEST(NbdBackingFileTest, DiscardPassesReachHighBlocksWhileLowOnesAreFreed) {
  ScopedTempDir dir;
  Remote remote(dir, "--filter=blocksize-policy --filter=delay", false,
                {"blocksize-maximum=4096", "delay-trim=1ms"},
                {"memory", "1G"});
  auto file = OpenNbdBackingFile(remote.Uri(),
                                 {.connections = 1, .timeout_ms = 500});
  ASSERT_TRUE(file.has_value()) << file.error().ToString();
  auto bs = BackingStore::Open({.file = *file});
  ASSERT_TRUE(bs.has_value()) << bs.error().ToString();
  constexpr std::uint64_t kRun = 1024, kLowRuns = 40, kHigh = 200000;
  const std::uint64_t blocks = (*bs)->num_blocks();
  ASSERT_GT(blocks, kHigh + kRun);
  std::size_t got = 0;
  ASSERT_EQ((*bs)->AllocRange(blocks, &got), 0u);
  ASSERT_EQ(got, blocks);
  for (std::uint64_t k = 0; k < kLowRuns; ++k) {
    for (std::uint64_t b = 2 * k * kRun; b < (2 * k + 1) * kRun; ++b) {
      (*bs)->Free(b);
    }
  }
  for (std::uint64_t b = kHigh; b < kHigh + kRun; ++b) (*bs)->Free(b);
  std::uint64_t answered = 0;  // runs, before the pass that answered kHigh
  int pass = 0, high_at = 0;
  while (high_at == 0 && answered < 2 * (kLowRuns + 1)) {
    ++pass;
    const std::uint64_t freed = (*bs)->DiscardFreed();
    ASSERT_GT(freed, 0u) << "pass " << pass;
    ASSERT_LT(freed, (kLowRuns + 1) * kRun)
        << "pass " << pass << " was not cut short";
    for (std::uint64_t b;
         (b = (*bs)->AllocRange(kRun, &got)) != BackingStore::kNoBlock;) {
      if (b == kHigh) {
        high_at = pass;
      } else {
        for (std::uint64_t i = b; i < b + got; ++i) (*bs)->Free(i);
      }
    }
    if (high_at == 0) answered += freed / kRun;
  }
  ASSERT_NE(high_at, 0) << "the high run was never answered in " << pass
                        << " passes that answered " << answered << " runs";
  EXPECT_LE(answered, kLowRuns + 1) << "answered at pass " << high_at;
}

// Every piece of a Discard goes out once, through the window of TRIMs in
// flight (ring slots reused many times over: 1533 pieces), each at its
// export offset, no longer than the export's maximum, none twice, none
// left out: what nbdkit's log filter saw is exactly the pieces.
TEST(NbdBackingFileTest, EveryPieceOfADiscardIsSentOnce) {
  ScopedTempDir dir;
  const std::string trims = dir.File("trims.log");
  Remote remote(dir, "--filter=blocksize-policy --filter=log", false,
                {"blocksize-maximum=16384", "logfile=" + trims},
                {"memory", "64M"});
  auto file = OpenNbdBackingFile(remote.Uri(), {.connections = 1});
  ASSERT_TRUE(file.has_value()) << file.error().ToString();
  ASSERT_EQ((*file)->max_write_bytes(), 16384u);
  std::vector<BackingFile::Range> ranges;
  std::multiset<std::pair<std::uint64_t, std::uint64_t>> want;
  std::uint64_t at = 0;
  for (std::uint64_t i = 0; i < 300; ++i) {
    const std::uint64_t len = (1 + (i * 7) % 37) * kPageSize;
    ranges.push_back({at, len});
    for (std::uint64_t d = 0; d < len; d += 16384) {
      want.insert(
          {kPageSize + at + d, std::min<std::uint64_t>(16384, len - d)});
    }
    at += len + kPageSize;
  }
  std::unique_ptr<bool[]> sent(new bool[ranges.size()]());
  (*file)->Discard(ranges, std::span<bool>(sent.get(), ranges.size()));
  for (std::size_t i = 0; i < ranges.size(); ++i) EXPECT_TRUE(sent[i]) << i;
  file->reset();  // the log is complete once the connection is closed
  std::ifstream in(trims);
  std::multiset<std::pair<std::uint64_t, std::uint64_t>> got;
  for (std::string line; std::getline(in, line);) {
    const auto t = line.find("Trim id=");
    if (t == std::string::npos) continue;
    const auto o = line.find("offset=", t);
    const auto c = line.find("count=", t);
    if (o == std::string::npos || c == std::string::npos) continue;
    got.insert({std::stoull(line.substr(o + 7), nullptr, 0),
                std::stoull(line.substr(c + 6), nullptr, 0)});
  }
  EXPECT_EQ(got.size(), want.size());
  EXPECT_TRUE(got == want);
}

// A connection made again while a Discard is under way ends it: the TRIMs
// in flight are not known to be done and the pieces not sent stay unsent
// (the new connection may take less), so no range is counted answered;
// the next Discard sends it again.
TEST(NbdBackingFileTest, ARangeCutShortByAReconnectIsNotCountedAnswered) {
  ScopedTempDir dir;
  auto start = [&](std::optional<Remote>& remote) {
    remote.emplace(dir, "--filter=blocksize-policy --filter=delay", false,
                   std::vector<std::string>{"blocksize-maximum=4096",
                                            "delay-trim=1ms"},
                   std::vector<std::string>{"memory", "1G"});
  };
  std::optional<Remote> remote;
  start(remote);
  auto file = OpenNbdBackingFile(remote->Uri(),
                                 {.connections = 1, .timeout_ms = 2000});
  ASSERT_TRUE(file.has_value()) << file.error().ToString();
  // 32768 TRIMs, about 2 s.
  const BackingFile::Range ranges[1] = {{0, std::uint64_t{128} << 20}};
  bool sent[1] = {true};
  std::thread discard([&] { (*file)->Discard(ranges, sent); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  remote.reset();
  start(remote);
  std::vector<std::byte> out(kPageSize);
  (*file)->Read(0, out);  // makes the connection again
  discard.join();
  EXPECT_FALSE(sent[0]);
  (*file)->Discard(ranges, sent);
  EXPECT_TRUE(sent[0]);
}

}  // namespace
}  // namespace ztier::nbd
