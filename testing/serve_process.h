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
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
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
  // Until the log holds `text` (true), or 10 s pass.
  bool WaitForLog(const std::string& text) const {
    for (int i = 0; i < 1000; ++i) {
      if (Log().find(text) != std::string::npos) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
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
  std::string Log() const { return Sh("cat '" + log_ + "'").out; }

 private:
  void Reap(int options) {
    if (pid_ <= 0) return;
    int status;
    if (::waitpid(pid_, &status, options) == pid_) {
      exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128;
      pid_ = -1;
    }
  }

  std::string log_;
  pid_t pid_ = -1;
  int exit_code_ = -1;
};

}  // namespace ztier::testing

#endif  // ZTIER_TESTING_SERVE_PROCESS_H_
