// testing/serve_process.h: `ztier serve` as a child process, for the tests
// that drive the built binary end to end.
//
//   ztier::testing::ServeProcess s(ZTIER_BIN, {"--unix", sock, "--ctl", ctl},
//                                  dir.File("serve.log"));
//   ASSERT_TRUE(s.WaitForSockets({sock, ctl})) << s.Log();
//   ...
//   EXPECT_EQ(s.Stop(), 0) << s.Log();   // SIGTERM, then its exit status
//
// Its stdout and stderr go to the log file. Thread safety: one thread.
#ifndef ZTIER_TESTING_SERVE_PROCESS_H_
#define ZTIER_TESTING_SERVE_PROCESS_H_

#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstring>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "testing/test_util.h"

namespace ztier::testing {

// Whether a Unix stream socket at `path` accepts a connection now.
inline bool UnixSocketAccepts(const std::string& path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  const bool ok =
      ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return ok;
}

class ServeProcess {
 public:
  // Starts `bin serve FLAGS...`.
  ServeProcess(const std::string& bin, const std::vector<std::string>& flags,
               std::string log_path)
      : log_(std::move(log_path)) {
    std::vector<std::string> args = {bin, "serve"};
    args.insert(args.end(), flags.begin(), flags.end());
    pid_ = SpawnWithLog(args, log_);
  }
  ~ServeProcess() { Stop(); }
  ServeProcess(const ServeProcess&) = delete;
  ServeProcess& operator=(const ServeProcess&) = delete;

  // Until every socket of `paths` accepts (true), or the server exits or
  // 20 s pass (false).
  bool WaitForSockets(const std::vector<std::string>& paths) {
    for (int i = 0; i < 2000 && pid_ > 0; ++i) {
      bool all = true;
      for (const std::string& p : paths) all = all && UnixSocketAccepts(p);
      if (all) return true;
      Reap(WNOHANG);
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }
  // Until the log holds `text` (true), or 10 s pass; after a Reload(),
  // only what the log gained since then counts.
  bool WaitForLog(const std::string& text) const {
    return WaitForLog(
        [&](const std::string& log) {
          return log.find(text, log_from_) != std::string::npos;
        },
        std::chrono::seconds(10));
  }
  // SIGHUP (false if it could not be sent); marks the log's end for
  // WaitForLog(text), so that a line an earlier reload wrote does not count.
  bool Reload() {
    log_from_ = Log().size();
    return pid_ > 0 && ::kill(pid_, SIGHUP) == 0;
  }
  // Until `holds(log)` is true (true), or `timeout` passes; the log is
  // read every 10 ms.
  template <typename Pred>
  bool WaitForLog(Pred holds, std::chrono::milliseconds timeout) const {
    for (auto waited = std::chrono::milliseconds(0);;
         waited += std::chrono::milliseconds(10)) {
      if (holds(Log())) return true;
      if (waited >= timeout) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  // SIGTERM (if it still runs), then its exit status.
  int Stop() {
    if (pid_ > 0) ::kill(pid_, SIGTERM);
    return Wait();
  }
  // Its exit status once it exits by itself (128 after a signal).
  int Wait() {
    Reap(0);
    return exit_code_;
  }
  bool running() { return Reap(WNOHANG), pid_ > 0; }
  pid_t pid() const { return pid_; }
  int exit_code() const { return exit_code_; }
  // Its peak resident memory (KiB), once Wait() or Stop() has reaped it.
  long max_rss_kib() const { return max_rss_kib_; }
  std::string Log() const { return Sh("cat '" + log_ + "'").out; }

 private:
  void Reap(int options) {
    if (pid_ <= 0) return;
    int status;
    rusage usage{};
    if (::wait4(pid_, &status, options, &usage) == pid_) {
      exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128;
      max_rss_kib_ = usage.ru_maxrss;
      pid_ = -1;
    }
  }

  std::string log_;
  pid_t pid_ = -1;
  std::size_t log_from_ = 0;  // WaitForLog(text) looks from here
  int exit_code_ = -1;
  long max_rss_kib_ = 0;
};

// `ztier serve` on a Unix NBD socket and a control socket in a temporary
// folder of its own, with its log there: what the tests that drive the
// binary over both sockets share. The constructor returns once both
// sockets accept and the banner is out, or the server has exited (an
// error: pid() < 0, the reason in Log()), for up to 20 s.
class ServeOnSockets {
 public:
  ServeOnSockets(std::string bin, const std::vector<std::string>& flags)
      : bin_(std::move(bin)),
        proc_(bin_, WithSockets(flags), dir_.File("serve.log")) {
    // The banner is printed once the sockets accept.
    if (proc_.WaitForSockets({Ctl(), Sock()})) {
      proc_.WaitForLog("Stop with Ctrl-C");
    }
  }

  // SIGTERM, then its exit code.
  int Stop() { return proc_.Stop(); }
  pid_t pid() const { return proc_.pid(); }
  int exit_code() const { return proc_.exit_code(); }
  bool running() { return proc_.running(); }
  std::string Sock() const { return dir_.File("nbd.sock"); }
  std::string Ctl() const { return dir_.File("ctl.sock"); }
  std::string Uri(const std::string& dev = "zram0") const {
    return "'nbd+unix:///" + dev + "?socket=" + Sock() + "'";
  }
  std::string File(const std::string& name) const { return dir_.File(name); }
  std::string Log() const { return proc_.Log(); }

  // `ztier ctl --device DEV ATTR [VALUE]`.
  Shell Ctl(const std::string& attr, const std::string& value = "",
            const std::string& dev = "zram0") const {
    std::string cmd = "'" + bin_ + "' ctl --ctl " + Ctl() + " --device " +
                      dev + " " + attr;
    if (!value.empty()) cmd += " '" + value + "'";
    return Sh(cmd);
  }

 private:
  std::vector<std::string> WithSockets(
      const std::vector<std::string>& flags) const {
    std::vector<std::string> args = {"--unix", Sock(), "--ctl", Ctl()};
    args.insert(args.end(), flags.begin(), flags.end());
    return args;
  }

  const std::string bin_;
  ScopedTempDir dir_;  // before proc_: the sockets and the log are in it
  ServeProcess proc_;
};

}  // namespace ztier::testing

#endif  // ZTIER_TESTING_SERVE_PROCESS_H_
