// File: tools/ztier/serve_service_test.cc
//
// `ztier serve` as a service, end to end (the built binary, ZTIER_BIN):
// a zram-generator.conf with two devices; bad files fail start-up with the
// file and line; a real NOTIFY_SOCKET receives READY=1 only once the NBD
// socket accepts, RELOADING=1/READY=1 around SIGHUP and STOPPING=1 at the
// end; SIGHUP applies a changed mem_limit and keeps every page; the shipped
// unit passes `systemd-analyze verify`; /metrics passes `promtool check
// metrics` and its mm_stat equals `ztier ctl mm_stat`; ztier ctl finds the
// server through ZTIER_CTL.
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "testing/deaf_listener.h"
#include "testing/nbd_server.h"
#include "testing/serve_process.h"
#include "testing/test_util.h"

namespace {

using ztier::testing::Have;
using ztier::testing::ScopedTempDir;
using ztier::testing::Sh;
using ztier::testing::Shell;

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::trunc) << text;
}

std::string Quote(const std::string& s) { return "'" + s + "'"; }

std::string ReadFile(const std::string& path) {
  std::ostringstream text;
  text << std::ifstream(path).rdbuf();
  return text.str();
}

// A datagram socket standing in for the service manager's.
class NotifySocket {
 public:
  explicit NotifySocket(const std::string& path) : path_(path) {
    fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
    bound_ = ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  }
  ~NotifySocket() { ::close(fd_); }
  bool bound() const { return bound_; }
  const std::string& path() const { return path_; }

  // The next datagram, or "" after `timeout_ms`.
  std::string Receive(int timeout_ms) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, timeout_ms) != 1) return "";
    char buf[4096];
    const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : "";
  }

 private:
  std::string path_;
  int fd_ = -1;
  bool bound_ = false;
};

// `ztier serve FLAGS` in the background, its log in `dir`.
class Server : public ztier::testing::ServeProcess {
 public:
  Server(const ScopedTempDir& dir, const std::vector<std::string>& flags)
      : ServeProcess(ZTIER_BIN, flags, dir.File("serve.log")) {}
  bool WaitFor(const std::string& socket) { return WaitForSockets({socket}); }
};

std::string Ztier(const std::string& args) {
  return Quote(ZTIER_BIN) + " " + args;
}

// A zram-generator.conf for two devices, with the sockets in `dir`.
std::string TwoDeviceConfig(const ScopedTempDir& dir, const std::string& limit) {
  return "# as zram-generator reads it\n"
         "[zram0]\n"
         "zram-size = 64\n"
         "compression-algorithm = zstd(level=3) deflate(level=9) "
         "(type=idle)\n"
         "writeback-device = " + dir.File("zram0.img") + "\n"
         "zram-resident-limit = " + limit + "\n"
         "swap-priority = 50\n"
         "\n"
         "[zram1]\n"
         "zram-size = min(ram / 2, 32)\n"
         "compression-algorithm = lzo-rle\n"
         "fs-type = ext4\n"
         "mount-point = /var/scratch\n"
         "\n"
         "[ztier]\n"
         "unix = " + dir.File("nbd.sock") + "\n"
         "ctl = " + dir.File("ctl.sock") + "\n";
}

TEST(ServeConfigTest, TwoDevicesFromAZramGeneratorConf) {
  ScopedTempDir dir;
  WriteFile(dir.File("ztier.conf"), TwoDeviceConfig(dir, "16"));
  Server s(dir, {"--config", dir.File("ztier.conf")});
  ASSERT_TRUE(s.WaitFor(dir.File("ctl.sock"))) << s.Log();
  // zram0 is swap, with the default io-timeout and no mlock: said at start
  // (zram1, a file system, is not named).
  EXPECT_NE(s.Log().find("zram0 is a swap device, and io-timeout is 30 s"),
            std::string::npos) << s.Log();
  EXPECT_NE(s.Log().find("zram0 is a swap device, and mlock is off"),
            std::string::npos) << s.Log();
  EXPECT_EQ(s.Log().find("zram1 is a swap device"), std::string::npos);
  const std::string ctl = Ztier("ctl --ctl " + dir.File("ctl.sock"));
  const Shell status = Sh(Ztier("status --json --ctl " + dir.File("ctl.sock")));
  ASSERT_EQ(status.exit_code, 0) << status.out;
  for (const char* want :
       {"\"name\":\"zram0\"", "\"algorithm\":\"zstd\"", "\"disksize\":67108864",
        "\"mem_limit\":16777216", "\"name\":\"zram1\"", "\"algorithm\":\"lzo\"",
        "\"disksize\":33554432",
        "\"notes\":{\"options\":\"discard\",\"swap-priority\":\"50\"}",
        "\"notes\":{\"fs-type\":\"ext4\",\"mount-point\":\"/var/scratch\","
        "\"options\":\"discard\"}"}) {
    EXPECT_NE(status.out.find(want), std::string::npos) << want << status.out;
  }
  // Both initialised; zram0 with its backing file (its parameters are in
  // the log: algorithm_params is write-only, as zram's).
  EXPECT_EQ(Sh(ctl + " --device zram0 initstate").out, "1\n");
  EXPECT_EQ(Sh(ctl + " --device zram1 initstate").out, "1\n");
  EXPECT_EQ(Sh(ctl + " --device zram0 backing_dev").out,
            dir.File("zram0.img") + "\n");
  EXPECT_NE(Sh(ctl + " --device zram0 comp_algorithm").out.find("[zstd]"),
            std::string::npos);
  // The second algorithm is recomp_algorithm priority 1, with its level.
  EXPECT_EQ(Sh(ctl + " --device zram0 recomp_algorithm").out,
            "#1: lzo lz4 lz4hc zstd [deflate]\n");
  EXPECT_EQ(Sh(ctl + " --device zram1 recomp_algorithm").out, "");
  const Shell recompress = Sh(ctl + " --device zram0 recompress type=idle");
  EXPECT_EQ(recompress.exit_code, 0) << recompress.out;
  // The table names both; the banner says what the notes mean.
  const Shell table = Sh(Ztier("status --ctl " + dir.File("ctl.sock")));
  EXPECT_NE(table.out.find("zram0"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("zram1"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("zram0: options=discard swap-priority=50"),
            std::string::npos) << table.out;
  const std::string log = s.Log();
  EXPECT_NE(log.find("zram0: configured: 64 MiB, zstd(level=3), "
                     "recompression deflate(level=9), mem_limit "
                     "16 MiB, backing_dev " + dir.File("zram0.img") +
                     ", for swap"),
            std::string::npos) << log;
  EXPECT_NE(log.find("swapon -p 50 -o discard /dev/nbd0"), std::string::npos)
      << log;
  EXPECT_NE(log.find("mkfs.ext4 /dev/nbd1 && mount -o discard /dev/nbd1 "
                     "/var/scratch"),
            std::string::npos) << log;
  // ZTIER_CTL finds the server without --ctl.
  const Shell env = Sh("ZTIER_CTL=" + dir.File("ctl.sock") + " " +
                       Ztier("ctl --device zram1 comp_algorithm"));
  EXPECT_EQ(env.exit_code, 0) << env.out;
  EXPECT_NE(env.out.find("[lzo]"), std::string::npos) << env.out;
  EXPECT_EQ(s.Stop(), 0) << s.Log();
}

// A second server on a running one's sockets fails before it makes its
// devices: with --prealloc it would fill them first (256 MiB here), only
// to find the sockets taken.
TEST(ServeServiceTest, ASecondServerOnTheSameSocketsFailsBeforeItsDevices) {
  ScopedTempDir dir, dir2;
  const std::vector<std::string> sockets = {"--unix", dir.File("nbd.sock"),
                                            "--ctl", dir.File("ctl.sock")};
  std::vector<std::string> first_flags = sockets;
  first_flags.insert(first_flags.end(), {"--device", "zram0:16M"});
  Server first(dir, first_flags);
  ASSERT_TRUE(first.WaitFor(dir.File("ctl.sock"))) << first.Log();
  std::vector<std::string> second_flags = sockets;
  second_flags.insert(
      second_flags.end(),
      {"--device", "zram0:256M", "--prealloc", "--mem-limit", "256M"});
  Server second(dir2, second_flags);
  EXPECT_EQ(second.Wait(), 1) << second.Log();
  EXPECT_NE(second.Log().find(dir.File("ctl.sock") +
                              " is in use by a running server"),
            std::string::npos)
      << second.Log();
  // Its peak resident memory: far below the 256 MiB it would have
  // preallocated.
  EXPECT_LT(second.max_rss_kib(), 128 * 1024) << "KiB";
  EXPECT_EQ(first.Stop(), 0) << first.Log();
}

// A server that accepts nothing (stopped, or wedged) with its backlog full
// still holds its socket: a blocking connect(2) there waits for room for
// ever (unix_stream_connect() in net/unix/af_unix.c), and start-up must
// not, but fail as on any running server's socket.
TEST(ServeServiceTest, AServerThatAcceptsNothingStillHoldsItsSocket) {
  ScopedTempDir dir;
  const std::string ctl = dir.File("ctl.sock");
  ztier::testing::DeafListener deaf(ctl);
  ASSERT_EQ(deaf.error(), "");
  Server second(dir, {"--unix", dir.File("nbd.sock"), "--ctl", ctl, "--device",
                      "zram0:16M"});
  for (int i = 0; i < 2000 && second.running(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const bool ended = !second.running();
  if (!ended) ::kill(second.pid(), SIGKILL);  // its SIGTERM may be blocked
  deaf.Close();
  ASSERT_TRUE(ended) << "start-up still waiting after 20 s: " << second.Log();
  EXPECT_EQ(second.Wait(), 1) << second.Log();
  EXPECT_NE(second.Log().find(ctl + " is in use by a running server"),
            std::string::npos)
      << second.Log();
}

TEST(ServeConfigTest, ABadFileFailsStartUpWithItsLine) {
  ScopedTempDir dir;
  struct Case {
    std::string text;
    std::string message;
    int rc = 0;  // the exit status wanted; 0: any failure
  };
  const Case cases[] = {
      {"[zram0]\nzram-size = ram //\n", ":2: zram-size: bad expression"},
      {"[zram0]\ncompression-algorithm = lz4 zstd lz4hc deflate lzo\n",
       ":2: compression-algorithm"},
      {"[zram0]\ncompression-algorithm = lz4 zstd(level=99)\n",
       ":2: compression-algorithm: zstd(level=99)"},
      {"[ztier]\nmlock = maybe\n", ":2: mlock: want yes or no"},
      // A value the flag parser refuses names the key, not a flag nobody
      // gave.
      {"[ztier]\nmax-connections = 0\n",
       ":2: [ztier] max-connections: 0 is out of range", 2},
      {"[ztier]\nworkers = abc\n",
       ":2: [ztier] workers: 'abc' is not a whole number", 2},
      {"[ztier]\nlog-level = loud\n", ":2: [ztier] log-level takes error", 2},
      // The key's own line, also when the device opens it at disksize (a
      // remote export).
      {"[ztier]\nunix = /a\nctl = /b\n[zram0]\nzram-size=8\n"
       "writeback-device=/nonexistent/dir/x.img\n",
       ":6: [zram0]: writeback-device: "},
      {"[ztier]\nunix = /a\nctl = /b\n[zram0]\nwriteback-device = "
       "nbd+unix:///?socket=/nonexistent/remote.sock\nzram-size=8\n",
       ":5: [zram0]: writeback-device: "},
      // Settings a restart would meet again: exit 2, which the unit does
      // not restart.
      {"[ztier]\nmlock = yes\n[zram0]\nzram-size = 8\n",
       "need a zram-resident-limit on every device", 2},
      {"[ztier]\nmetrics-listen = nowhere\n[zram0]\nzram-size = 8\n",
       ":2: [ztier] metrics-listen: listen address 'nowhere' is not "
       "HOST:PORT",
       2},
      {"[ztier]\nlisten = nohost:99999\n[zram0]\nzram-size = 8\n",
       ":2: [ztier] listen: bad port in 'nohost:99999'", 2},
      {"[ztier]\npolicy = bogus=1\n[zram0]\nzram-size = 8\n",
       ":2: [ztier] policy: 'bogus=1': unknown key", 2},
      // A TLS file that cannot be read: the line of the key naming it.
      {"[ztier]\ntls-cert = /nonexistent/c.pem\ntls-key = /nonexistent/k.pem"
       "\n[zram0]\nzram-size = 8\n",
       ":2: [ztier] tls-cert: TLS certificate /nonexistent/c.pem", 2},
      {"[ztier]\ntls-cert = " + dir.File("bad.conf") +
           "\ntls-key = /nonexistent/k.pem\n[zram0]\nzram-size = 8\n",
       ":3: [ztier] tls-key: TLS key /nonexistent/k.pem", 2},
  };
  for (const Case& c : cases) {
    WriteFile(dir.File("bad.conf"), c.text);
    Server s(dir, {"--config", dir.File("bad.conf")});
    const int rc = s.Wait();
    EXPECT_NE(rc, 0) << c.text;
    if (c.rc != 0) {
      EXPECT_EQ(rc, c.rc) << c.text << s.Log();
    }
    EXPECT_NE(s.Log().find(c.message), std::string::npos)
        << "want '" << c.message << "' in: " << s.Log();
  }
  Server missing(dir, {"--config", dir.File("none.conf")});
  EXPECT_EQ(missing.Wait(), 2);
  EXPECT_NE(missing.Log().find("none.conf: No such file"), std::string::npos);
  Server both(dir, {"--config", dir.File("bad.conf"), "--device", "zram0:1M"});
  EXPECT_EQ(both.Wait(), 2);
  EXPECT_NE(both.Log().find("--device cannot be combined with --config"),
            std::string::npos) << both.Log();
}

// A listen host that does not resolve fails start-up naming the file's
// line, before any device is made (the writeback file is never created);
// on the command line, naming the flag. A resolver that cannot answer
// (no network) is exit status 1, a name that is not there 2: the message
// is the same.
TEST(ServeConfigTest, AListenHostThatDoesNotResolveFailsBeforeAnyDevice) {
  ScopedTempDir dir;
  for (const char* key : {"listen", "metrics-listen"}) {
    ::unlink(dir.File("zram0.img").c_str());
    WriteFile(dir.File("l.conf"),
              "[ztier]\nunix = " + dir.File("n.sock") + "\nctl = " +
                  dir.File("c.sock") + "\n" + key +
                  " = nohost.invalid:10809\n[zram0]\nzram-size = 8\n"
                  "writeback-device = " + dir.File("zram0.img") + "\n");
    Server s(dir, {"--config", dir.File("l.conf")});
    const int rc = s.Wait();
    EXPECT_TRUE(rc == 1 || rc == 2) << rc << s.Log();
    EXPECT_NE(s.Log().find(dir.File("l.conf") + ":4: [ztier] " + key +
                           ": cannot resolve 'nohost.invalid'"),
              std::string::npos) << s.Log();
    EXPECT_NE(::access(dir.File("zram0.img").c_str(), F_OK), 0)
        << key << ": a device was made before the address was looked up";
  }
  Server flag(dir, {"--unix", dir.File("n.sock"), "--ctl", dir.File("c.sock"),
                    "--device", "zram0:8M", "--listen", "nohost.invalid:1"});
  const int rc = flag.Wait();
  EXPECT_TRUE(rc == 1 || rc == 2) << rc << flag.Log();
  EXPECT_NE(flag.Log().find("--listen: cannot resolve 'nohost.invalid'"),
            std::string::npos) << flag.Log();
}

// A DNS query's question name ("host.test"), or "" when `q` is no query.
std::string QueryName(const unsigned char* q, std::size_t n, std::size_t* end) {
  std::string name;
  std::size_t i = 12;
  while (i < n && q[i] != 0 && q[i] < 64) {
    if (!name.empty()) name += '.';
    name.append(reinterpret_cast<const char*>(q + i + 1),
                std::min<std::size_t>(q[i], n - i - 1));
    i += 1 + q[i];
  }
  *end = i + 5;  // the root label, QTYPE, QCLASS
  return *end <= n ? name : "";
}

// Starts `ztier serve FLAGS` (its log `log`) in a network and mount
// namespace of its own, where /etc/resolv.conf names the DNS server this
// function runs on 127.0.0.1:53 (RFC 1035 4.1: an A query is answered
// 127.0.0.1, any other with no data), and stops it (SIGTERM) once the Unix
// socket `ready` accepts. Returns the A queries for `host` the server
// sent meanwhile; -1 when the namespaces could not be made (root needed),
// -2 when the server never became ready.
int ALookupsAtStart(const ScopedTempDir& dir, const std::string& host,
                    const std::vector<std::string>& flags,
                    const std::string& ready, const std::string& log) {
  WriteFile(dir.File("resolv.conf"), "nameserver 127.0.0.1\n");
  WriteFile(dir.File("nsswitch.conf"), "hosts: files dns\n");
  const pid_t child = ::fork();
  if (child == 0) {
    // One thread here: unshare(CLONE_NEWNS) can be done.
    if (::unshare(CLONE_NEWNS | CLONE_NEWNET) != 0 ||
        ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
        ::mount(dir.File("resolv.conf").c_str(), "/etc/resolv.conf", nullptr,
                MS_BIND, nullptr) != 0 ||
        ::mount(dir.File("nsswitch.conf").c_str(), "/etc/nsswitch.conf",
                nullptr, MS_BIND, nullptr) != 0) {
      ::_exit(255);
    }
    const int udp = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    ifreq lo{};
    std::strcpy(lo.ifr_name, "lo");
    ::ioctl(udp, SIOCGIFFLAGS, &lo);
    lo.ifr_flags |= IFF_UP;
    sockaddr_in at{};
    at.sin_family = AF_INET;
    at.sin_port = htons(53);
    at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::ioctl(udp, SIOCSIFFLAGS, &lo) != 0 ||
        ::bind(udp, reinterpret_cast<sockaddr*>(&at), sizeof at) != 0) {
      ::_exit(255);
    }
    const pid_t serve = ::fork();
    if (serve == 0) {
      const int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      ::dup2(out, 1);
      ::dup2(out, 2);
      std::vector<char*> argv = {const_cast<char*>(ZTIER_BIN),
                                 const_cast<char*>("serve")};
      for (const std::string& f : flags)
        argv.push_back(const_cast<char*>(f.c_str()));
      argv.push_back(nullptr);
      ::execv(ZTIER_BIN, argv.data());
      ::_exit(127);
    }
    int queries = 0;
    bool stopped = false;
    for (int i = 0; i < 3000; ++i) {  // 30 s at most
      pollfd p{udp, POLLIN, 0};
      if (::poll(&p, 1, 10) == 1) {
        unsigned char q[512];
        sockaddr_storage from;
        socklen_t from_len = sizeof from;
        const ssize_t n = ::recvfrom(
            udp, q, sizeof q, 0, reinterpret_cast<sockaddr*>(&from), &from_len);
        std::size_t end = 0;
        if (n < 12 || QueryName(q, n, &end) == "") continue;
        const bool a = q[end - 4] == 0 && q[end - 3] == 1;  // QTYPE A
        if (a && QueryName(q, n, &end) == host) ++queries;
        std::string reply(reinterpret_cast<char*>(q), end);
        reply[2] = static_cast<char>(0x80 | (q[2] & 0x01));  // QR, RD
        reply[3] = static_cast<char>(0x80);                  // RA, NOERROR
        reply.replace(6, 6, std::string("\0\0\0\0\0\0", 6));
        if (a) {
          reply[7] = 1;  // ANCOUNT
          reply += std::string(
              "\xc0\x0c\0\x01\0\x01\0\0\0\x3c\0\x04\x7f\0\0\x01", 16);
        }
        ::sendto(udp, reply.data(), reply.size(), 0,
                 reinterpret_cast<sockaddr*>(&from), from_len);
      }
      if (!stopped && ztier::testing::UnixSocketAccepts(ready)) {
        ::kill(serve, SIGTERM);
        stopped = true;
      }
      if (::waitpid(serve, nullptr, WNOHANG) == serve) {
        ::_exit(stopped ? std::min(queries, 100) : 254);
      }
    }
    ::kill(serve, SIGKILL);
    ::waitpid(serve, nullptr, 0);
    ::_exit(254);
  }
  int status = 0;
  if (child < 0 || ::waitpid(child, &status, 0) != child ||
      !WIFEXITED(status)) {
    return -1;
  }
  const int code = WEXITSTATUS(status);
  return code == 255 ? -1 : code == 254 ? -2 : code;
}

// A listen host is looked up once at start (the check that names its line
// and the bind share the lookup): with nameservers that do not answer,
// each lookup waits out its timeouts, so a second one doubled the start.
TEST(ServeConfigTest, AListenHostIsLookedUpOnceAtStart) {
  ScopedTempDir dir;
  for (const char* flag : {"--listen", "--metrics-listen"}) {
    const std::vector<std::string> flags = {
        "--unix",   dir.File("n.sock"), "--ctl", dir.File("c.sock"),
        "--device", "zram0:8M",         flag,    "ztier-listen.test:0"};
    const int queries =
        ALookupsAtStart(dir, "ztier-listen.test", flags, dir.File("c.sock"),
                        dir.File("serve.log"));
    ASSERT_NE(queries, -1) << "cannot make namespaces (this test needs root: "
                              "unshare(CLONE_NEWNS | CLONE_NEWNET), mount)";
    ASSERT_NE(queries, -2) << ReadFile(dir.File("serve.log"));
    EXPECT_EQ(queries, 1) << flag << ": " << ReadFile(dir.File("serve.log"));
  }
}

// `ram` is MemTotal in whole MiB, as zram-generator has it (its
// memtotal_mb is an integer): a host-memory-limit of exactly that many MiB
// (the "total" of `free -m`) keeps the device, as zram-generator does, and
// `ram - N` is a whole number of MiB.
TEST(ServeConfigTest, RamIsMemTotalInWholeMiBAsInZramGenerator) {
  ScopedTempDir dir;
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  unsigned long long kib = 0;
  while (meminfo >> key && key != "MemTotal:") meminfo.ignore(1 << 20, '\n');
  ASSERT_TRUE(meminfo >> kib);
  const std::string mib = std::to_string(kib / 1024);
  if (kib % 1024 == 0) {
    GTEST_LOG_(INFO) << "MemTotal is whole MiB here: the rounding is not seen";
  }
  WriteFile(dir.File("r.conf"),
            "[ztier]\nunix = " + dir.File("n.sock") + "\nctl = " +
                dir.File("c.sock") + "\n[zram0]\nzram-size = 8\n"
                "host-memory-limit = " + mib + "\n[zram1]\nzram-size = ram - " +
                mib + " + 4\n");
  Server s(dir, {"--config", dir.File("r.conf")});
  ASSERT_TRUE(s.WaitFor(dir.File("c.sock"))) << s.Log();
  const std::string ctl = Ztier("ctl --ctl " + dir.File("c.sock"));
  EXPECT_EQ(Sh(ctl + " --device zram0 disksize").out, "8388608\n") << s.Log();
  EXPECT_EQ(s.Log().find("zram0: not created"), std::string::npos) << s.Log();
  EXPECT_EQ(Sh(ctl + " --device zram1 disksize").out, "4194304\n") << s.Log();
  EXPECT_EQ(s.Stop(), 0) << s.Log();
}

// fasteval (zram-generator's evaluator) spells its constants e() and pi():
// a zram-generator.conf that uses them starts.
TEST(ServeConfigTest, FastevalConstantsEAndPi) {
  ScopedTempDir dir;
  WriteFile(dir.File("e.conf"),
            "[ztier]\nunix = " + dir.File("n.sock") + "\nctl = " +
                dir.File("c.sock") +
                "\n[zram0]\nzram-size = round(e() * pi())\n"
                "[zram1]\nzram-size = ceil(e ( ) + pi)\n");
  Server s(dir, {"--config", dir.File("e.conf")});
  ASSERT_TRUE(s.WaitFor(dir.File("c.sock"))) << s.Log();
  const std::string ctl = Ztier("ctl --ctl " + dir.File("c.sock"));
  EXPECT_EQ(Sh(ctl + " --device zram0 disksize").out,
            std::to_string(9 << 20) + "\n");
  EXPECT_EQ(Sh(ctl + " --device zram1 disksize").out,
            std::to_string(6 << 20) + "\n");
  EXPECT_EQ(s.Stop(), 0) << s.Log();
}

// A [ztier] log-level the next start would refuse: the error names the
// file, the line and the key, at start and on SIGHUP alike, and never a
// --log-level flag nobody gave.
TEST(ServeConfigTest, ABadLogLevelNamesItsLineAtStartAndOnReload) {
  ScopedTempDir dir;
  const std::string good = "[ztier]\nunix = " + dir.File("n.sock") +
                           "\nctl = " + dir.File("c.sock") +
                           "\n[zram0]\nzram-size = 8\n";
  WriteFile(dir.File("l.conf"), good);
  Server s(dir, {"--config", dir.File("l.conf")});
  ASSERT_TRUE(s.WaitFor(dir.File("c.sock"))) << s.Log();
  WriteFile(dir.File("l.conf"), good + "[ztier]\nlog-level = loud\n");
  ASSERT_TRUE(s.Reload());
  ASSERT_TRUE(s.WaitForLog("change(s) applied")) << s.Log();
  EXPECT_NE(s.Log().find("l.conf:7: [ztier] log-level takes error"),
            std::string::npos)
      << s.Log();
  EXPECT_EQ(s.Log().find("--log-level"), std::string::npos) << s.Log();
  EXPECT_EQ(s.Stop(), 0) << s.Log();
}

// The file's warnings are logged at the level the file or the command line
// sets: "log-level = error" or --log-level=error leaves them out.
TEST(ServeConfigTest, TheFilesWarningsFollowItsLogLevel) {
  ScopedTempDir dir;
  const std::string sockets = "[ztier]\nunix = " + dir.File("n.sock") +
                              "\nctl = " + dir.File("c.sock") + "\n";
  const std::string devices = "[zram0]\nzram-size = 8\n[other]\nx = 1\n";
  for (const bool from_flag : {false, true}) {
    SCOPED_TRACE(from_flag);
    const std::string level = from_flag ? "" : "log-level = error\n";
    WriteFile(dir.File("w.conf"), sockets + level + devices);
    std::vector<std::string> flags = {"--config", dir.File("w.conf")};
    if (from_flag) flags.push_back("--log-level=error");
    Server s(dir, flags);
    ASSERT_TRUE(s.WaitFor(dir.File("c.sock"))) << s.Log();
    EXPECT_EQ(s.Log().find("section [other] ignored"), std::string::npos)
        << s.Log();
    EXPECT_EQ(s.Stop(), 0) << s.Log();
  }
  // At the default level they are there; a reload to log-level = error
  // leaves them out.
  WriteFile(dir.File("w.conf"), sockets + devices);
  NotifySocket notify(dir.File("notify.sock"));
  ASSERT_TRUE(notify.bound());
  ::setenv("NOTIFY_SOCKET", notify.path().c_str(), 1);
  Server s(dir, {"--config", dir.File("w.conf")});
  ::unsetenv("NOTIFY_SOCKET");
  ASSERT_EQ(notify.Receive(20000).rfind("READY=1\n", 0), 0u) << s.Log();
  EXPECT_NE(s.Log().find("w.conf:6: section [other] ignored"),
            std::string::npos)
      << s.Log();
  WriteFile(dir.File("w.conf"), sockets + "log-level = error\n" + devices);
  const std::size_t before = s.Log().size();
  ASSERT_TRUE(s.Reload());
  EXPECT_EQ(notify.Receive(10000).rfind("RELOADING=1\n", 0), 0u);
  EXPECT_EQ(notify.Receive(10000).rfind("READY=1\n", 0), 0u);
  EXPECT_EQ(s.Log().find("ignored", before), std::string::npos) << s.Log();
  EXPECT_EQ(s.Stop(), 0) << s.Log();
}

// A file that start-up refuses before the log level is settled (a bad
// [ztier] value, a bad log-level) still has its warnings said, ahead of the
// error: what is wrong in it is told at once, not one start at a time.
TEST(ServeConfigTest, AFileRefusedAtStartStillHasItsWarningsSaid) {
  ScopedTempDir dir;
  for (const std::string bad : {"mlock = maybe\n", "log-level = loud\n"}) {
    SCOPED_TRACE(bad);
    WriteFile(dir.File("r.conf"),
              "[ztier]\n" + bad + "[zram0]\nzram-size = 8\n[other]\nx = 1\n");
    Server s(dir, {"--config", dir.File("r.conf")});
    EXPECT_EQ(s.Wait(), 2) << s.Log();
    const std::size_t warning =
        s.Log().find("r.conf:5: section [other] ignored");
    const std::size_t error = s.Log().find("r.conf:2: ");
    EXPECT_NE(warning, std::string::npos) << s.Log();
    EXPECT_LT(warning, error) << s.Log();
  }
  // At the command line's level, where it sets one.
  WriteFile(dir.File("r.conf"),
            "[ztier]\nmlock = maybe\n[zram0]\nzram-size = 8\n[other]\nx = 1\n");
  Server s(dir, {"--config", dir.File("r.conf"), "--log-level=error"});
  EXPECT_EQ(s.Wait(), 2) << s.Log();
  EXPECT_NE(s.Log().find("r.conf:2: "), std::string::npos) << s.Log();
  EXPECT_EQ(s.Log().find("ignored"), std::string::npos) << s.Log();
}

// A [ztier] setting the command line overrides is said at the debug level
// the command line sets (-v), though the file is read before the log is
// set up.
TEST(ServeConfigTest, ASettingTheCommandLineOverridesIsADebugLine) {
  ScopedTempDir dir;
  WriteFile(dir.File("o.conf"), "[ztier]\nunix = " + dir.File("n.sock") +
                                    "\nctl = " + dir.File("c.sock") +
                                    "\nworkers = 2\n[zram0]\nzram-size = 8\n");
  for (const bool verbose : {false, true}) {
    SCOPED_TRACE(verbose);
    std::vector<std::string> flags = {"--config", dir.File("o.conf"),
                                      "--workers", "3"};
    if (verbose) flags.push_back("-v");
    Server s(dir, flags);
    ASSERT_TRUE(s.WaitFor(dir.File("c.sock"))) << s.Log();
    EXPECT_EQ(s.Stop(), 0) << s.Log();
    EXPECT_EQ(s.Log().find("o.conf:4: workers: the command line's value "
                           "wins") != std::string::npos,
              verbose)
        << s.Log();
  }
}

// The start-up banner and the line that says the server stops are
// information: --log-level warning (-q) leaves them out of the journal.
TEST(ServeConfigTest, TheBannerFollowsTheLogLevel) {
  for (const std::string level : {"info", "warning"}) {
    SCOPED_TRACE(level);
    ScopedTempDir dir;
    Server s(dir, {"--unix", dir.File("n.sock"), "--ctl", dir.File("c.sock"),
                   "--device", "zram0:8M", "--log-level=" + level});
    ASSERT_TRUE(s.WaitFor(dir.File("c.sock"))) << s.Log();
    ASSERT_TRUE(s.WaitFor(dir.File("n.sock"))) << s.Log();
    EXPECT_EQ(s.Stop(), 0) << s.Log();
    const std::string log = s.Log();
    const bool info = level == "info";
    for (const char* line :
         {"1 device(s)", "Connect with:", "Stop with Ctrl-C or SIGTERM",
          "SIGTERM, stopping"}) {
      EXPECT_EQ(log.find(line) != std::string::npos, info) << line << "\n"
                                                           << log;
    }
  }
}

// Two sockets at one path: a usage error (exit 2, which the unit does not
// restart) naming both, not EBUSY blaming "a running server" (exit 1).
TEST(ServeConfigTest, TwoSocketsAtOnePathAreAUsageError) {
  ScopedTempDir dir;
  const std::string same = dir.File("same.sock");
  for (const std::vector<std::string>& flags :
       {std::vector<std::string>{"--unix", same, "--ctl", same},
        std::vector<std::string>{"--unix", same, "--ctl", dir.File("c.sock"),
                                 "--metrics-unix", same}}) {
    Server s(dir, flags);
    EXPECT_EQ(s.Wait(), 2) << s.Log();
    EXPECT_NE(s.Log().find("are the same socket"), std::string::npos)
        << s.Log();
    EXPECT_EQ(s.Log().find("running server"), std::string::npos) << s.Log();
  }
}

// Every device's resident limit is checked before any device is made: the
// first would otherwise preallocate (and lock) its whole limit in vain.
TEST(ServeConfigTest, AMissingResidentLimitFailsBeforeAnyDeviceIsMade) {
  ScopedTempDir dir;
  WriteFile(dir.File("m.conf"),
            "[ztier]\nunix = " + dir.File("n.sock") +
                "\nctl = " + dir.File("c.sock") +
                "\nmlock = yes\n[zram0]\nzram-size = 8\n"
                "zram-resident-limit = 8\n[zram1]\nzram-size = 8\n");
  Server s(dir, {"--config", dir.File("m.conf")});
  EXPECT_EQ(s.Wait(), 2) << s.Log();
  EXPECT_NE(s.Log().find(":8: [zram1]: --mlock and --prealloc need a "
                         "zram-resident-limit on every device"),
            std::string::npos)
      << s.Log();
  EXPECT_EQ(s.Log().find("zram0: configured"), std::string::npos) << s.Log();
}

// --recomp-algorithm sets every --device device's recomp_algorithm at
// priorities 1, 2 in order, with its parameters; reset restores them.
TEST(ServeConfigTest, RecompAlgorithmFlagsAreTheDevicesDefaults) {
  ScopedTempDir dir;
  Server s(dir, {"--device", "zram0:4M", "--recomp-algorithm", "zstd(level=9)",
                 "--recomp-algorithm", "deflate", "--unix", dir.File("n.sock"),
                 "--ctl", dir.File("c.sock")});
  ASSERT_TRUE(s.WaitFor(dir.File("c.sock"))) << s.Log();
  const std::string ctl = Ztier("ctl --ctl " + dir.File("c.sock")) + " ";
  const std::string both =
      "#1: lzo lz4 lz4hc [zstd] deflate\n#2: lzo lz4 lz4hc zstd [deflate]\n";
  EXPECT_EQ(Sh(ctl + "recomp_algorithm").out, both);
  EXPECT_EQ(Sh(ctl + "reset 1").exit_code, 0);
  EXPECT_EQ(Sh(ctl + "recomp_algorithm 'algo=lz4hc priority=3'").exit_code, 0);
  EXPECT_EQ(Sh(ctl + "reset 1").exit_code, 0);
  EXPECT_EQ(Sh(ctl + "recomp_algorithm").out, both);
  EXPECT_EQ(s.Stop(), 0) << s.Log();
}

TEST(ServeConfigTest, FlagErrorsAreWordedOneWay) {
  ScopedTempDir dir;
  const std::string sockets =
      " --unix " + dir.File("n.sock") + " --ctl " + dir.File("c.sock");
  for (const char* flags :
       {"--bogus", "--max-request-size 1", "--device :4", "--mem-limit x",
        "--tls maybe", "--workers -1", "--log-level loud",
        "--comp-algorithm lz5", "--max-in-flight-bytes 0", "--mlock",
        "--recomp-algorithm zsdt", "--recomp-algorithm 'zstd(level=99)'",
        "--recomp-algorithm lz4 --recomp-algorithm lzo "
        "--recomp-algorithm zstd --recomp-algorithm deflate"}) {
    const Shell r = Sh(Ztier("serve ") + flags + sockets);
    EXPECT_EQ(r.exit_code, 2) << flags << ": " << r.out;
    EXPECT_EQ(r.out.rfind("ztier serve: ", 0), 0u) << flags << ": " << r.out;
    EXPECT_NE(r.out.find("\nRun 'ztier serve --help' for usage.\n"),
              std::string::npos) << flags << ": " << r.out;
  }
}

TEST(ServeServiceTest, NotifySocketReadyReloadingStopping) {
  ScopedTempDir dir;
  WriteFile(dir.File("ztier.conf"), TwoDeviceConfig(dir, "16"));
  NotifySocket notify(dir.File("notify.sock"));
  ASSERT_TRUE(notify.bound());
  ::setenv("NOTIFY_SOCKET", notify.path().c_str(), 1);
  Server s(dir, {"--config", dir.File("ztier.conf")});
  ::unsetenv("NOTIFY_SOCKET");
  const std::string ready = notify.Receive(20000);
  // The first message is READY=1, and by then the sockets accept.
  ASSERT_EQ(ready.rfind("READY=1\n", 0), 0u) << ready << s.Log();
  EXPECT_TRUE(ztier::testing::UnixSocketAccepts(dir.File("nbd.sock")));
  EXPECT_TRUE(ztier::testing::UnixSocketAccepts(dir.File("ctl.sock")));
  EXPECT_NE(ready.find("STATUS=2 device(s), 0.0 MiB stored"), std::string::npos)
      << ready;
  ASSERT_TRUE(s.Reload());
  const std::string reloading = notify.Receive(10000);
  EXPECT_EQ(reloading.rfind("RELOADING=1\nMONOTONIC_USEC=", 0), 0u)
      << reloading;
  EXPECT_GT(std::stoull(reloading.substr(reloading.find('=', 12) + 1)), 0u)
      << reloading;
  EXPECT_EQ(notify.Receive(10000).rfind("READY=1\nSTATUS=", 0), 0u);
  ::kill(s.pid(), SIGTERM);
  EXPECT_EQ(notify.Receive(10000), "STOPPING=1\nSTATUS=stopping");
  EXPECT_EQ(s.Wait(), 0) << s.Log();
}

// Log lines carry the journal's "<N>" priority prefixes only when stderr
// is the stream JOURNAL_STREAM names (sd-daemon(3)), not merely when the
// variable is set.
TEST(ServeServiceTest, JournalPrefixesOnlyOnTheJournalStream) {
  for (const bool journal : {true, false}) {
    SCOPED_TRACE(journal ? "stderr is JOURNAL_STREAM" : "stderr is elsewhere");
    ScopedTempDir dir;
    WriteFile(dir.File("serve.log"), "");  // the file stderr will be
    struct stat st {};
    ASSERT_EQ(::stat(dir.File("serve.log").c_str(), &st), 0);
    const std::string stream =
        std::to_string(st.st_dev) + ":" +
        std::to_string(journal ? st.st_ino : st.st_ino + 1);
    ::setenv("JOURNAL_STREAM", stream.c_str(), 1);
    WriteFile(dir.File("ztier.conf"), TwoDeviceConfig(dir, "16"));
    Server s(dir, {"--config", dir.File("ztier.conf")});
    ::unsetenv("JOURNAL_STREAM");
    ASSERT_TRUE(s.WaitFor(dir.File("ctl.sock"))) << s.Log();
    ::kill(s.pid(), SIGTERM);
    EXPECT_EQ(s.Wait(), 0) << s.Log();
    const std::string log = s.Log();
    const std::string as_journal = "<6>zram0: configured: ";
    const std::string as_text = "ztier serve: zram0: configured: ";
    EXPECT_NE(log.find(journal ? as_journal : as_text), std::string::npos)
        << log;
    EXPECT_EQ(log.find(journal ? as_text : as_journal), std::string::npos)
        << log;
  }
}

// mm_stat's mem_limit column (the fourth).
std::string MemLimit(const std::string& ctl) {
  std::istringstream in(Sh(ctl + " --device zram0 mm_stat").out);
  std::string v;
  for (int i = 0; i < 4; ++i) in >> v;
  return v;
}

TEST(ServeServiceTest, SighupAppliesMemLimitAndKeepsEveryPage) {
  ASSERT_TRUE(Have("qemu-io"));
  ScopedTempDir dir;
  // zram1 at a size of no whole pages: the device rounds it up, and a
  // reload does not take that for a change.
  const auto config = [&](const std::string& limit) {
    std::string t = TwoDeviceConfig(dir, limit);
    t.replace(t.find("min(ram / 2, 32)"), 16, "32.001");
    return t;
  };
  WriteFile(dir.File("ztier.conf"), config("16"));
  Server s(dir, {"--config", dir.File("ztier.conf")});
  ASSERT_TRUE(s.WaitFor(dir.File("ctl.sock"))) << s.Log();
  const std::string ctl = Ztier("ctl --ctl " + dir.File("ctl.sock"));
  const std::string uri =
      Quote("nbd+unix:///zram0?socket=" + dir.File("nbd.sock"));
  const Shell w = Sh("qemu-io -f raw " + uri +
                     " -c 'write -P 0x5a 0 4M' -c 'write -P 0xc3 8M 1M'");
  ASSERT_EQ(w.exit_code, 0) << w.out;
  EXPECT_EQ(MemLimit(ctl), "16777216");

  // The limit raised, and a size change that cannot apply live.
  std::string text = config("48");
  text.replace(text.find("zram-size = 64"), 14, "zram-size = 128");
  WriteFile(dir.File("ztier.conf"), text);
  ASSERT_TRUE(s.Reload());
  ASSERT_TRUE(s.WaitForLog("change(s) applied")) << s.Log();
  EXPECT_EQ(MemLimit(ctl), "50331648");
  EXPECT_NE(s.Log().find("zram0: mem_limit 16 MiB -> 48 MiB"), std::string::npos)
      << s.Log();
  EXPECT_NE(s.Log().find("zram0: zram-size changed, not applied"),
            std::string::npos) << s.Log();
  EXPECT_NE(s.Log().find("1 change(s) applied, 1 not"), std::string::npos)
      << s.Log();
  // The same file again: the size change is still not applied, and says so.
  ASSERT_TRUE(s.Reload());
  ASSERT_TRUE(s.WaitForLog("0 change(s) applied, 1 not")) << s.Log();
  // Another recompression group: the policy took it at start.
  {
    std::string group = text;
    group.replace(group.find("(type=idle)"), 11, "(type=huge)");
    WriteFile(dir.File("ztier.conf"), group);
    ASSERT_TRUE(s.Reload());
    ASSERT_TRUE(s.WaitForLog("0 change(s) applied, 2 not")) << s.Log();
    EXPECT_NE(s.Log().find("zram0: compression-algorithm changed, not applied"),
              std::string::npos) << s.Log();
    WriteFile(dir.File("ztier.conf"), text);
  }
  // [ztier] log-level applies at once, and so does its removal.
  WriteFile(dir.File("ztier.conf"), text + "log-level = debug\n");
  ASSERT_TRUE(s.Reload());
  ASSERT_TRUE(s.WaitForLog("log-level is now debug")) << s.Log();
  WriteFile(dir.File("ztier.conf"), text);
  ASSERT_TRUE(s.Reload());
  ASSERT_TRUE(s.WaitForLog("log-level is now info (the default)")) << s.Log();

  // A file that no longer parses changes nothing.
  WriteFile(dir.File("ztier.conf"), "[zram0]\nzram-resident-limit = what\n");
  ASSERT_TRUE(s.Reload());
  ASSERT_TRUE(s.WaitForLog("nothing changed, serving on")) << s.Log();
  EXPECT_EQ(MemLimit(ctl), "50331648");

  const Shell r = Sh("qemu-io -r -f raw " + uri +
                     " -c 'read -P 0x5a 0 4M' -c 'read -P 0xc3 8M 1M'"
                     " -c 'read -P 0 4M 4M'");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(r.out.find("Pattern verification failed"), std::string::npos)
      << r.out;
  EXPECT_EQ(s.Stop(), 0) << s.Log();
}

// writeback-device = an NBD URI in the configuration file: the device
// writes back to that export (nbdkit memory on a Unix socket here).
TEST(ServeServiceTest, RemoteWritebackDeviceFromTheConfigurationFile) {
  ASSERT_TRUE(Have("nbdcopy") && Have("nbdkit"));
  ScopedTempDir dir;
  const std::string remote_sock = dir.File("remote.sock");
  const std::string remote_uri = "nbd+unix:///?socket=" + remote_sock;
  std::string error;
  const pid_t remote = ztier::testing::SpawnNbdServer(
      {"nbdkit", "-f", "-U", remote_sock, "memory", "64M"}, remote_uri,
      dir.File("remote.log"), &error);
  ASSERT_GT(remote, 0) << error;
  WriteFile(dir.File("ztier.conf"),
            "[zram0]\nzram-size = 16\nwriteback-device = " + remote_uri +
                "\n[ztier]\nunix = " + dir.File("nbd.sock") + "\nctl = " +
                dir.File("ctl.sock") + "\n");
  ASSERT_EQ(Sh("seq 1 300000 | head -c 1048576 > " + dir.File("in")).exit_code,
            0);
  {
    Server s(dir, {"--config", dir.File("ztier.conf")});
    ASSERT_TRUE(s.WaitFor(dir.File("ctl.sock"))) << s.Log();
    const std::string ctl =
        "ctl --ctl " + dir.File("ctl.sock") + " --device zram0 ";
    EXPECT_EQ(Sh(Ztier(ctl + "backing_dev")).out, remote_uri + "\n");
    const std::string uri =
        Quote("nbd+unix:///zram0?socket=" + dir.File("nbd.sock"));
    ASSERT_EQ(Sh("nbdcopy " + dir.File("in") + " " + uri).exit_code, 0);
    ASSERT_EQ(Sh(Ztier(ctl + "idle all")).exit_code, 0);
    const Shell wb = Sh(Ztier(ctl + "writeback idle"));
    ASSERT_EQ(wb.exit_code, 0) << wb.out << s.Log();
    EXPECT_EQ(Sh(Ztier(ctl + "bd_stat") + " | awk '{print $1}'").out,
              "256\n");
    const Shell r = Sh("nbdcopy " + uri + " - | head -c 1048576 | cmp - " +
                       dir.File("in"));
    EXPECT_EQ(r.exit_code, 0) << r.out;
    EXPECT_EQ(s.Stop(), 0) << s.Log();
  }
  ::kill(remote, SIGKILL);
  ::waitpid(remote, nullptr, 0);
}

// unit-pages in [ztier]: whole aligned 64 KiB runs written over NBD become
// units, which status --json counts, and which read back as written.
TEST(ServeServiceTest, UnitPagesFromTheConfigurationFile) {
  ASSERT_TRUE(Have("nbdcopy"));
  ScopedTempDir dir;
  WriteFile(dir.File("ztier.conf"),
            "[zram0]\nzram-size = 16\n[ztier]\nunit-pages = 16\n"
            "unix = " + dir.File("nbd.sock") + "\nctl = " +
                dir.File("ctl.sock") + "\n");
  // 1 MiB of text: 16 runs of 16 pages, none same-filled.
  ASSERT_EQ(Sh("seq 1 300000 | head -c 1048576 > " + dir.File("in")).exit_code,
            0);
  Server s(dir, {"--config", dir.File("ztier.conf")});
  ASSERT_TRUE(s.WaitFor(dir.File("ctl.sock"))) << s.Log();
  const std::string uri =
      Quote("nbd+unix:///zram0?socket=" + dir.File("nbd.sock"));
  const Shell w = Sh("nbdcopy --request-size=1048576 " + dir.File("in") + " " + uri);
  ASSERT_EQ(w.exit_code, 0) << w.out;
  const Shell status =
      Sh(Ztier("status --json --ctl " + dir.File("ctl.sock")));
  EXPECT_NE(status.out.find("\"units\":16,\"unit_pages\":256"),
            std::string::npos)
      << status.out;
  const Shell r = Sh("nbdcopy " + uri + " - | head -c 1048576 | cmp - " +
                     dir.File("in"));
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(s.Stop(), 0) << s.Log();
  // A size that is not one is refused before anything starts.
  const Shell bad = Sh(Ztier("serve --unit-pages 5 2>&1"));
  EXPECT_EQ(bad.exit_code, 2) << bad.out;
  EXPECT_NE(bad.out.find("--unit-pages: want 4, 8 or 16"), std::string::npos)
      << bad.out;
}

TEST(ServeServiceTest, ReloadAddsDevicesRetriesFailuresAndReplacesNotes) {
  ScopedTempDir dir;
  const std::string base = TwoDeviceConfig(dir, "16");
  WriteFile(dir.File("ztier.conf"), base);
  Server s(dir, {"--config", dir.File("ztier.conf")});
  ASSERT_TRUE(s.WaitFor(dir.File("ctl.sock"))) << s.Log();
  const std::string status = Ztier("status --json --ctl " + dir.File("ctl.sock"));
  // A new device whose writeback device cannot be made: not added.
  WriteFile(dir.File("ztier.conf"),
            base + "[zram2]\nzram-size = 8\nwriteback-device = " +
                dir.File("missing/x.img") + "\n");
  ASSERT_TRUE(s.Reload());
  ASSERT_TRUE(s.WaitForLog("0 change(s) applied, 1 not")) << s.Log();
  EXPECT_EQ(Sh(status).out.find("\"name\":\"zram2\""), std::string::npos);
  // Fixed, and zram1 turned from a file system into swap: zram2 is made,
  // zram1's notes are the new ones only.
  std::string text = base + "[zram2]\nzram-size = 8\nwriteback-device = " +
                     dir.File("x.img") + "\n";
  text.replace(text.find("fs-type = ext4\nmount-point = /var/scratch\n"), 42,
               "swap-priority = 7\n");
  WriteFile(dir.File("ztier.conf"), text);
  ASSERT_TRUE(s.Reload());
  ASSERT_TRUE(s.WaitForLog("2 change(s) applied, 0 not")) << s.Log();
  const std::string after = Sh(status).out;
  EXPECT_NE(after.find("\"name\":\"zram2\""), std::string::npos) << after;
  EXPECT_NE(s.Log().find("zram2: added"), std::string::npos) << s.Log();
  EXPECT_NE(after.find("\"notes\":{\"options\":\"discard\",\"swap-priority\":\"7\"}"),
            std::string::npos) << after;
  // zram2 now skipped by the file: kept, and said so; once hot_removed,
  // nothing is left to say.
  const std::string size8 = "[zram2]\nzram-size = 8\n";
  text.replace(text.find(size8), size8.size(), "[zram2]\nzram-size = 0\n");
  WriteFile(dir.File("ztier.conf"), text);
  ASSERT_TRUE(s.Reload());
  ASSERT_TRUE(s.WaitForLog("zram2: now skipped")) << s.Log();
  ASSERT_TRUE(s.WaitForLog("0 change(s) applied, 1 not")) << s.Log();
  const Shell removed =
      Sh(Ztier("ctl --ctl " + dir.File("ctl.sock") + " hot_remove zram2"));
  ASSERT_EQ(removed.exit_code, 0) << removed.out;
  ASSERT_TRUE(s.Reload());
  ASSERT_TRUE(s.WaitForLog("0 change(s) applied, 0 not")) << s.Log();
  // A [ztier] value the next start would refuse is said at the reload.
  text.replace(text.find("[ztier]\n"), 8, "[ztier]\nmax-connections = abc\n");
  WriteFile(dir.File("ztier.conf"), text);
  ASSERT_TRUE(s.Reload());
  ASSERT_TRUE(s.WaitForLog("the next start would refuse this file"))
      << s.Log();
  EXPECT_NE(s.Log().find(dir.File("ztier.conf") + ":"), std::string::npos);
  // So is one that parses but a start's checks refuse, one at a time.
  const std::string good = text;
  for (const auto& [line, why] :
       {std::pair<std::string, std::string>{
            "unit-pages = 3", "[ztier] unit-pages: want 4, 8 or 16"},
        {"tls = on", "[ztier] tls=on needs --tls-cert and --tls-key"},
        {"tls-cert = /nonexistent/cert.pem",
         "[ztier] tls-cert: needs --tls-key as well"},
        {"policy = period=never", "period"}}) {
    text = good;
    text.replace(text.find("max-connections = abc\n"), 22, line + "\n");
    WriteFile(dir.File("ztier.conf"), text);
    ASSERT_TRUE(s.Reload());
    ASSERT_TRUE(s.WaitForLog(why)) << line << "\n" << s.Log();
    EXPECT_TRUE(s.WaitForLog("the next start would refuse this file"))
        << line << "\n" << s.Log();
  }
  EXPECT_EQ(s.Stop(), 0) << s.Log();
}

// A device reset by hand (`ztier ctl reset`) is configured from the file
// again at the next reload, as at a start.
TEST(ServeServiceTest, AReloadConfiguresAResetDeviceAgain) {
  ScopedTempDir dir;
  WriteFile(dir.File("ztier.conf"), TwoDeviceConfig(dir, "16"));
  Server s(dir, {"--config", dir.File("ztier.conf")});
  ASSERT_TRUE(s.WaitFor(dir.File("ctl.sock"))) << s.Log();
  const std::string ctl =
      Ztier("ctl --ctl " + dir.File("ctl.sock") + " --device zram0 ");
  ASSERT_EQ(Sh(ctl + "reset 1").exit_code, 0);
  ASSERT_EQ(Sh(ctl + "disksize").out, "0\n");
  ASSERT_TRUE(s.Reload());
  ASSERT_TRUE(s.WaitForLog("1 change(s) applied, 0 not")) << s.Log();
  EXPECT_EQ(Sh(ctl + "disksize").out, std::to_string(64 << 20) + "\n");
  EXPECT_NE(Sh(ctl + "comp_algorithm").out.find("[zstd]"), std::string::npos);
  EXPECT_EQ(Sh(ctl + "backing_dev").out, dir.File("zram0.img") + "\n");
  EXPECT_EQ(MemLimit(Ztier("ctl --ctl " + dir.File("ctl.sock"))), "16777216");
  EXPECT_EQ(s.Stop(), 0) << s.Log();
}

// A ztier device starts empty at every boot (no swap signature: swapon
// says "read swap header failed"), so the /etc/fstab line docs/swap.md
// gives must have systemd format it (x-systemd.makefs: systemd-mkswap@,
// which skips a device that already has a signature), as zram-generator's
// setup runs mkswap each boot.
TEST(ServeServiceTest, TheDocumentedFstabSwapLineFormatsTheFreshDevice) {
  if (Have("nbdcopy") && Have("blkid")) {
    ScopedTempDir dir;
    Server s(dir, {"--device", "zram0:1M", "--unix", dir.File("n.sock"),
                   "--ctl", dir.File("c.sock")});
    ASSERT_TRUE(s.WaitFor(dir.File("c.sock"))) << s.Log();
    ASSERT_EQ(Sh("nbdcopy 'nbd+unix:///zram0?socket=" + dir.File("n.sock") +
                 "' - > " + dir.File("fresh.img"))
                  .exit_code,
              0);
    // blkid: 2 is "nothing found".
    EXPECT_EQ(Sh("blkid -p " + dir.File("fresh.img")).exit_code, 2);
    EXPECT_EQ(s.Stop(), 0) << s.Log();
  }
  std::ifstream in(std::string(ZTIER_SOURCE_DIR) + "/docs/swap.md");
  std::string line;
  int swap_lines = 0;
  const std::regex fstab_swap(R"(^/dev/(ublkb|nbd)[0-9]+\s+\S+\s+swap\s+(\S+))");
  while (std::getline(in, line)) {
    std::smatch m;
    if (!std::regex_search(line, m, fstab_swap)) continue;
    ++swap_lines;
    const std::string options = "," + m[2].str() + ",";
    EXPECT_NE(options.find(",x-systemd.makefs,"), std::string::npos) << line;
    EXPECT_NE(options.find(",x-systemd.requires="), std::string::npos) << line;
  }
  EXPECT_GT(swap_lines, 0) << "docs/swap.md has no /etc/fstab swap line";
}

TEST(ServeServiceTest, TheShippedUnitVerifies) {
  ASSERT_TRUE(Have("systemd-analyze")) << "install systemd (make deps)";
  ScopedTempDir dir;
  std::ifstream in(std::string(ZTIER_SOURCE_DIR) + "/dist/ztier.service");
  std::stringstream unit;
  unit << in.rdbuf();
  std::string text = unit.str();
  ASSERT_NE(text.find("Type=notify"), std::string::npos);
  // No device allow-list, explicit or implied: the service opens block
  // devices (writeback-device) and, with ublk = yes, /dev/ublk-control and
  // /dev/ublkcN. ProtectClock=yes implies DeviceAllow=char-rtc r, which on
  // older systemd (245 to 251) blocks every other device.
  for (const char* key : {"ProtectClock=yes", "PrivateDevices=yes",
                          "DeviceAllow=", "DevicePolicy="}) {
    EXPECT_EQ(std::regex_search(text, std::regex(std::string("(^|\\n)") + key)),
              false)
        << "dist/ztier.service sets " << key;
  }
  const std::string bin = std::string(ZTIER_BIN);
  text = std::regex_replace(text, std::regex("@ZTIER_BINDIR@"),
                            bin.substr(0, bin.rfind('/')));
  text = std::regex_replace(text, std::regex("@ZTIER_SYSCONFDIR@"), dir.path());
  WriteFile(dir.File("ztier.service"), text);
  // The man pages it names, from the checkout, where man finds them.
  const std::string man = dir.File("man");
  ASSERT_EQ(Sh("mkdir -p " + man + "/man8 " + man + "/man5 && cp " +
               ZTIER_SOURCE_DIR + "/docs/man/ztier.8 " + man + "/man8/ && cp " +
               ZTIER_SOURCE_DIR + "/docs/man/ztier.conf.5 " + man + "/man5/")
                .exit_code,
            0);
  const bool have_man = Have("man", /*optional=*/true);
  const Shell v = Sh("MANPATH=" + man + " systemd-analyze verify " +
                     (have_man ? "" : "--man=no ") + dir.File("ztier.service"));
  EXPECT_EQ(v.exit_code, 0) << v.out;
  EXPECT_EQ(v.out, "") << v.out;
}

TEST(ServeServiceTest, MetricsPassPromtoolAndEqualMmStat) {
  ASSERT_TRUE(Have("promtool")) << "install prometheus (make deps)";
  ASSERT_TRUE(Have("curl")) << "install curl (make deps)";
  ASSERT_TRUE(Have("qemu-io"));
  ScopedTempDir dir;
  Server s(dir, {"--device", "zram0:32M", "--unix", dir.File("nbd.sock"),
                 "--ctl", dir.File("ctl.sock"), "--metrics-listen", ":0",
                 "--metrics-unix", dir.File("metrics.sock")});
  ASSERT_TRUE(s.WaitFor(dir.File("metrics.sock"))) << s.Log();
  const Shell w = Sh("qemu-io -f raw " +
                     Quote("nbd+unix:///zram0?socket=" + dir.File("nbd.sock")) +
                     " -c 'write -P 0x11 0 1M' -c 'write -z 2M 1M'");
  ASSERT_EQ(w.exit_code, 0) << w.out;
  std::smatch m;
  const std::string log = s.Log();
  ASSERT_TRUE(std::regex_search(log, m,
                                std::regex("metrics: http://127.0.0.1:([0-9]+)/metrics")))
      << log;
  const std::string url = "http://127.0.0.1:" + m[1].str() + "/metrics";
  const Shell tcp = Sh("curl -sf " + url + " > " + dir.File("m.txt") +
                       " && promtool check metrics < " + dir.File("m.txt"));
  EXPECT_EQ(tcp.exit_code, 0) << tcp.out;
  const Shell unix_sock = Sh("curl -sf --unix-socket " + dir.File("metrics.sock") +
                        " http://localhost/metrics | promtool check metrics");
  EXPECT_EQ(unix_sock.exit_code, 0) << unix_sock.out;
  // mm_stat's columns, as ztier ctl prints them, in the scrape.
  std::istringstream mm(Sh(Ztier("ctl --ctl " + dir.File("ctl.sock") +
                                 " mm_stat")).out);
  const Shell text = Sh("cat " + dir.File("m.txt"));
  const char* columns[] = {"orig_data_size", "compr_data_size", "mem_used_total",
                           "mem_limit", "mem_used_max", "same_pages",
                           "pages_compacted", "huge_pages", "huge_pages_since"};
  for (const char* column : columns) {
    std::string value;
    mm >> value;
    std::smatch v;
    const std::regex line(std::string("\nztier_zram_") + column +
                          "[a-z_]*\\{device=\"zram0\"\\} ([0-9]+)\n");
    ASSERT_TRUE(std::regex_search(text.out, v, line)) << column << text.out;
    EXPECT_EQ(v[1].str(), value) << column;
  }
  EXPECT_EQ(s.Stop(), 0) << s.Log();
}

}  // namespace
