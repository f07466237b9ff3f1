// File: tools/ztier/remote_netns_test.cc
//
// Writeback to another machine, with the machines made of network
// namespaces: the test creates two (`ip netns add`) joined by a veth pair
// with addresses in 10.231.0.0/24, present only inside them. The "remote
// host" runs nbdkit's file plugin on its address; the test itself moves
// into the other namespace, so the built `ztier serve` (ZTIER_BIN) it
// starts, and the NBD clients it runs, live there. Through TCP across the
// link:
//   - the seed-002 flow (fill, `idle all`, `writeback idle`, read
//     everything back, sha256 equal), with a capture of the link (tcpdump
//     into a file): plaintext markers cross it without --backing-encrypt,
//     and none with it;
//   - faults: the remote killed mid-writeback and started again; stopped
//     (SIGSTOP) past --backing-timeout, then resumed; the link cut
//     (`ip link set down`), then restored. After each, every page reads
//     back as written, bd_stat agrees with the pages written back, and a
//     new writeback pass succeeds.
// Namespaces need root (CAP_SYS_ADMIN and CAP_NET_ADMIN): without them the
// tests fail, saying so.
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "testing/marked_pages.h"
#include "testing/serve_process.h"
#include "testing/nbd_server.h"
#include "testing/test_util.h"

namespace {

using ztier::testing::Numbers;
using ztier::testing::ScopedTempDir;
using ztier::testing::Sha256;
using ztier::testing::WriteMarkedPages;
using ztier::testing::Sh;
using ztier::testing::Shell;

constexpr int kPages = 8192;  // 32 MiB
constexpr int kPort = 10809;

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// Two namespaces, "remote" and "local", joined by a veth pair; this
// process's thread in "local" for the object's life (children started
// meanwhile are there too).
class NetPair {
 public:
  NetPair() {
    const std::string id = std::to_string(::getpid());
    remote_ = "ztier-r" + id;
    local_ = "ztier-l" + id;
    remote_if_ = "ztr" + id;
    local_if_ = "ztl" + id;
    const Shell made = Sh(
        "set -e; ip netns add " + remote_ + "; ip netns add " + local_ +
        "; ip link add " + local_if_ + " netns " + local_ + " type veth peer " +
        "name " + remote_if_ + " netns " + remote_ +
        "; ip -n " + remote_ + " addr add " + RemoteAddr() + "/24 dev " +
        remote_if_ + "; ip -n " + local_ + " addr add " + LocalAddr() +
        "/24 dev " + local_if_ + "; for n in " + remote_ + " " + local_ +
        "; do ip -n $n link set lo up; done; ip -n " + remote_ + " link set " +
        remote_if_ + " up; ip -n " + local_ + " link set " + local_if_ + " up");
    if (made.exit_code != 0) {
      error_ = "cannot make network namespaces (these tests need root: "
               "ip netns add, veth): " + made.out;
      return;
    }
    home_ = ::open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    const int fd = ::open(("/run/netns/" + local_).c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0 || ::setns(fd, CLONE_NEWNET) != 0) {
      error_ = "cannot enter namespace " + local_ + ": " + std::strerror(errno);
    }
    if (fd >= 0) ::close(fd);
  }
  ~NetPair() {
    if (home_ >= 0) {
      ::setns(home_, CLONE_NEWNET);
      ::close(home_);
    }
    Sh("ip netns del " + remote_ + " 2>/dev/null; ip netns del " + local_ +
       " 2>/dev/null");
  }
  NetPair(const NetPair&) = delete;
  NetPair& operator=(const NetPair&) = delete;

  const std::string& error() const { return error_; }
  std::string RemoteAddr() const { return "10.231.0.1"; }
  std::string LocalAddr() const { return "10.231.0.2"; }
  const std::string& remote() const { return remote_; }
  const std::string& local_if() const { return local_if_; }
  // Cuts (false) or restores (true) the link, from the remote's side.
  void Link(bool up) {
    ASSERT_EQ(Sh("ip -n " + remote_ + " link set " + remote_if_ +
                 (up ? " up" : " down"))
                  .exit_code,
              0);
  }

 private:
  std::string remote_, local_, remote_if_, local_if_, error_;
  int home_ = -1;
};

// nbdkit's file plugin on the remote namespace's address, over `file`
// (kept across a restart, as a disk is), with optional filters.
class Remote {
 public:
  // `filter`: a filter and its parameter ("delay", "wdelay=200ms").
  Remote(const NetPair& net, std::string file, std::string log,
         std::vector<std::string> filter = {})
      : net_(net), file_(std::move(file)), log_(std::move(log)),
        filter_(std::move(filter)) {
    Start();
  }
  ~Remote() { Kill(); }

  void Start() {
    std::vector<std::string> args = {
        "ip", "netns", "exec", net_.remote(), "nbdkit",
        "-f", "--ipaddr", net_.RemoteAddr(), "--port", std::to_string(kPort)};
    if (!filter_.empty()) args.push_back("--filter=" + filter_[0]);
    args.push_back("file");
    args.push_back(file_);
    if (!filter_.empty()) args.push_back(filter_[1]);
    std::string error;
    pid_ = ztier::testing::SpawnNbdServer(args, Uri(), log_, &error);
    ASSERT_GT(pid_, 0) << error;
  }
  void Kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = 0;
  }
  // Starts it again if it has exited. nbdkit 1.32 can abort on its own
  // after a fault ("raw_send_socket: Assertion `sock >= 0' failed", when a
  // reply meets a connection the client has closed); a supervisor would
  // restart it, on the same disk, and so does this.
  void RestartIfExited() {
    if (pid_ <= 0 || ::waitpid(pid_, nullptr, WNOHANG) != pid_) return;
    std::printf("the remote exited; restarting it. Its log ends:\n%s\n",
                Sh("tail -3 '" + log_ + "'").out.c_str());
    pid_ = 0;
    Start();
  }
  void Stop() { ::kill(pid_, SIGSTOP); }
  void Continue() { ::kill(pid_, SIGCONT); }
  std::string Uri() const {
    return "nbd://" + net_.RemoteAddr() + ":" + std::to_string(kPort) + "/";
  }

 private:
  const NetPair& net_;
  std::string file_, log_;
  std::vector<std::string> filter_;
  pid_t pid_ = 0;
};

class RemoteNetnsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(net_.error().empty()) << net_.error();
    export_ = dir_.File("remote.img");
    ASSERT_EQ(Sh("truncate -s 256M '" + export_ + "'").exit_code, 0);
    in_ = dir_.File("in.bin");
    WriteMarkedPages(in_, "ztier-netns-marker", kPages);
  }

  std::unique_ptr<ztier::testing::ServeOnSockets> Serve(
      const std::string& uri, bool encrypt) {
    std::vector<std::string> flags = {
        "--device", "zram0:" + std::to_string(kPages * 4096 / (1 << 20)) + "M",
        "--backing-dev", uri, "--backing-connections", "4",
        "--backing-timeout", "2"};
    if (encrypt) flags.push_back("--backing-encrypt");
    auto s = std::make_unique<ztier::testing::ServeOnSockets>(ZTIER_BIN, flags);
    EXPECT_TRUE(s->running()) << s->Log();
    return s;
  }
  // nbdcopy of the input onto the device, then `idle all`.
  void Fill(ztier::testing::ServeOnSockets& s) {
    const Shell put = Sh("nbdcopy '" + in_ + "' " + s.Uri());
    ASSERT_EQ(put.exit_code, 0) << put.out;
    ASSERT_EQ(s.Ctl("idle", "all").exit_code, 0);
  }
  // The device read whole equals the input; bd_stat's count is the pages
  // now written back (every page is marked: none same-filled).
  void ExpectWhole(ztier::testing::ServeOnSockets& s) {
    const Shell get = Sh("timeout 120 nbdcopy " + s.Uri() + " '" +
                         dir_.File("out.bin") + "'");
    ASSERT_EQ(get.exit_code, 0) << get.out << s.Log();
    ExpectRead(s);
  }
  // What ExpectWhole checks, of the device as last read into out.bin.
  void ExpectRead(ztier::testing::ServeOnSockets& s) {
    EXPECT_EQ(Sha256(dir_.File("out.bin")), Sha256(in_));
    const auto bd = Numbers(s.Ctl("bd_stat").out);
    const auto mm = Numbers(s.Ctl("mm_stat").out);
    ASSERT_EQ(bd.size(), 3u);
    ASSERT_EQ(mm.size(), 9u);
    EXPECT_EQ(mm[0], static_cast<std::uint64_t>(kPages) * 4096);
    EXPECT_LE(bd[0], static_cast<std::uint64_t>(kPages));
  }
  // After a fault: reads work again within the reconnect backoff (at most
  // 5 s) and the hold-off of a stalled remote (--backing-timeout).
  // `between` runs before each try (the remote's restart, if it exited).
  void WaitUntilReadable(ztier::testing::ServeOnSockets& s,
                         const std::function<void()>& between) {
    Shell get;
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(90);
    while (std::chrono::steady_clock::now() < end) {
      between();
      get = Sh("timeout 30 nbdcopy " + s.Uri() + " '" + dir_.File("out.bin") +
               "'");
      if (get.exit_code == 0) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
    FAIL() << "reads still fail: " << get.out << s.Log();
  }
  // A writeback pass that works, after a fault: every page is on the
  // remote.
  void ExpectWritebackResumes(ztier::testing::ServeOnSockets& s,
                              const std::function<void()>& between) {
    ASSERT_EQ(s.Ctl("idle", "all").exit_code, 0);
    Shell wb;
    // The reconnect backoff (at most 5 s) and a stalled remote's hold-off.
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < end) {
      between();
      wb = s.Ctl("writeback", "idle");
      if (wb.exit_code == 0) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
    ASSERT_EQ(wb.exit_code, 0) << wb.out << s.Log();
    EXPECT_EQ(Numbers(s.Ctl("bd_stat").out)[0],
              static_cast<std::uint64_t>(kPages));
    ExpectWhole(s);
  }

  NetPair net_;
  ScopedTempDir dir_;
  std::string export_, in_;
};

// The capture of the link while pages cross it: how many packets hold
// the marker.
class Capture {
 public:
  Capture(const std::string& iface, std::string file) : file_(std::move(file)) {
    pid_ = ztier::testing::SpawnWithLog(
        {Trim(Sh("command -v tcpdump").out), "-i", iface, "-U", "-w", file_,
         "tcp"},
        file_ + ".log");
    // Listening once tcpdump says so.
    Sh("for i in $(seq 100); do grep -q listening '" + file_ +
       ".log' && exit 0; sleep 0.05; done");
  }
  ~Capture() { Stop(); }
  void Stop() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGINT);
    ::waitpid(pid_, nullptr, 0);
    pid_ = 0;
  }
  std::uint64_t Bytes() { return Numbers(Sh("stat -c %s '" + file_ + "'").out)[0]; }
  std::uint64_t Count(const std::string& marker) {
    return Numbers(Sh("grep -c -a '" + marker + "' '" + file_ + "'").out)[0];
  }

 private:
  std::string file_;
  pid_t pid_ = 0;
};

TEST_F(RemoteNetnsTest, WritebackAcrossTheLinkAndOnlyCiphertextCrossesIt) {
  ASSERT_TRUE(ztier::testing::Have("tcpdump")) << "tcpdump is not installed";
  Remote remote(net_, export_, dir_.File("remote.log"));
  for (const bool encrypt : {false, true}) {
    SCOPED_TRACE(encrypt ? "encrypted" : "plain");
    auto s = Serve(remote.Uri(), encrypt);
    ASSERT_TRUE(s->running());
    Fill(*s);
    const std::string pcap = dir_.File(encrypt ? "enc.pcap" : "plain.pcap");
    Capture capture(net_.local_if(), pcap);
    const Shell wb = s->Ctl("writeback", "idle");
    ASSERT_EQ(wb.exit_code, 0) << wb.out << s->Log();
    EXPECT_EQ(Numbers(s->Ctl("bd_stat").out)[0],
              static_cast<std::uint64_t>(kPages));
    ExpectWhole(*s);
    capture.Stop();
    // The pages crossed the link (more bytes than they compress to), in
    // plaintext exactly when not encrypted.
    EXPECT_GT(capture.Bytes(), static_cast<std::uint64_t>(kPages) * 4096 / 8);
    if (encrypt) {
      EXPECT_EQ(capture.Count("ztier-netns-marker"), 0u);
    } else {
      EXPECT_GT(capture.Count("ztier-netns-marker"), 0u);
    }
    EXPECT_EQ(s->Stop(), 0) << s->Log();
  }
}

// Killed while the pass runs (each write slowed down by nbdkit's delay
// filter, so the pass lasts seconds), then started again on its disk.
TEST_F(RemoteNetnsTest, RemoteKilledMidWritebackLosesNoPage) {
  Remote remote(net_, export_, dir_.File("remote.log"),
                {"delay", "wdelay=200ms"});
  auto s = Serve(remote.Uri(), /*encrypt=*/true);
  ASSERT_TRUE(s->running());
  Fill(*s);
  const std::string ctl = "'" + std::string(ZTIER_BIN) + "' ctl --ctl " +
                          s->Ctl() + " --device zram0 writeback idle";
  const pid_t pass = ztier::testing::SpawnWithLog(
      {"/bin/sh", "-c", ctl}, dir_.File("pass.log"));
  // Kill it once the pass has written something (each write takes 200 ms).
  std::uint64_t during = 0;
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (during == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    during = Numbers(s->Ctl("bd_stat").out)[0];
  }
  remote.Kill();
  EXPECT_GT(during, 0u) << "the pass wrote nothing in 30 s";
  int status = 0;
  ::waitpid(pass, &status, 0);
  // Mid-pass: it had not finished, and it fails.
  EXPECT_LT(during, static_cast<std::uint64_t>(kPages));
  EXPECT_NE(WEXITSTATUS(status), 0) << Sh("cat '" + dir_.File("pass.log") + "'").out;
  remote.Start();
  WaitUntilReadable(*s, [] {});
  ExpectWhole(*s);
  ExpectWritebackResumes(*s, [&] { remote.RestartIfExited(); });
  EXPECT_EQ(s->Stop(), 0) << s->Log();
}

TEST_F(RemoteNetnsTest, RemoteStoppedPastTheTimeoutThenResumed) {
  Remote remote(net_, export_, dir_.File("remote.log"));
  auto s = Serve(remote.Uri(), /*encrypt=*/true);
  ASSERT_TRUE(s->running());
  Fill(*s);
  remote.Stop();
  const auto t0 = std::chrono::steady_clock::now();
  const Shell wb = s->Ctl("writeback", "idle");
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  EXPECT_NE(wb.exit_code, 0) << wb.out;
  EXPECT_NE(wb.out.find("Input/output error"), std::string::npos) << wb.out;
  EXPECT_LT(seconds, 20);  // --backing-timeout 2, not hung
  EXPECT_EQ(Numbers(s->Ctl("bd_stat").out)[0], 0u);
  ExpectWhole(*s);  // every page still in RAM
  remote.Continue();
  ExpectWritebackResumes(*s, [&] { remote.RestartIfExited(); });
  EXPECT_EQ(s->Stop(), 0) << s->Log();
}

TEST_F(RemoteNetnsTest, LinkCutThenRestored) {
  Remote remote(net_, export_, dir_.File("remote.log"));
  auto s = Serve(remote.Uri(), /*encrypt=*/true);
  ASSERT_TRUE(s->running());
  Fill(*s);
  // Half the pages written back over the link, then the link cut.
  ASSERT_EQ(s->Ctl("writeback_limit_enable", "1").exit_code, 0);
  ASSERT_EQ(s->Ctl("writeback_limit", std::to_string(kPages / 2)).exit_code, 0);
  s->Ctl("writeback", "idle");  // stops at the limit
  ASSERT_EQ(Numbers(s->Ctl("bd_stat").out)[0],
            static_cast<std::uint64_t>(kPages / 2));
  ASSERT_EQ(s->Ctl("writeback_limit_enable", "0").exit_code, 0);
  net_.Link(false);
  ASSERT_EQ(s->Ctl("idle", "all").exit_code, 0);
  const Shell wb = s->Ctl("writeback", "idle");
  EXPECT_NE(wb.exit_code, 0) << wb.out;
  EXPECT_EQ(Numbers(s->Ctl("bd_stat").out)[0],
            static_cast<std::uint64_t>(kPages / 2));
  // A written-back page cannot be read: an error, not data.
  const Shell bad = Sh("timeout 60 nbdcopy " + s->Uri() + " '" +
                       dir_.File("bad.bin") + "'");
  EXPECT_NE(bad.exit_code, 0) << bad.out;
  net_.Link(true);
  // The device as WaitUntilReadable read it whole, not read again: nbdkit
  // (1.32) may still abort on a reply to a write of the old connections
  // (raw_send_socket's assertion, after "write reply: Broken pipe"), and a
  // read it was serving then fails, rightly, with EIO.
  WaitUntilReadable(*s, [&] { remote.RestartIfExited(); });
  ExpectRead(*s);
  ExpectWritebackResumes(*s, [&] { remote.RestartIfExited(); });
  EXPECT_EQ(s->Stop(), 0) << s->Log();
}

}  // namespace
