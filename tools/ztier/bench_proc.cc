// File: tools/ztier/bench_proc.cc
//
// Subprocess helpers of `ztier bench nbd` (bench_proc.h). Waiting uses a
// pidfd where the kernel has one (no polling delay in timed runs), else
// waitpid(WNOHANG) every millisecond.
#include "bench_proc.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "platform/socket.h"

namespace ztier::tool::bench {
namespace {

using Clock = std::chrono::steady_clock;

bool IsExecutableFile(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
         ::access(path.c_str(), X_OK) == 0;
}

int PidfdOpen(pid_t pid) {
#ifdef SYS_pidfd_open
  return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
#else
  (void)pid;
  errno = ENOSYS;
  return -1;
#endif
}

}  // namespace

std::string FindExecutable(std::string_view name) {
  if (name.empty()) return "";
  if (name.find('/') != std::string_view::npos) {
    return IsExecutableFile(std::string(name)) ? std::string(name) : "";
  }
  const char* path_env = std::getenv("PATH");
  const std::string path = path_env != nullptr ? path_env : "/usr/bin:/bin";
  std::size_t start = 0;
  while (start <= path.size()) {
    std::size_t end = path.find(':', start);
    if (end == std::string::npos) end = path.size();
    std::string dir = path.substr(start, end - start);
    if (dir.empty()) dir = ".";
    const std::string candidate = dir + "/" + std::string(name);
    if (IsExecutableFile(candidate)) return candidate;
    start = end + 1;
  }
  return "";
}

std::string SelfExecutable() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return "";
  return std::string(buf, static_cast<std::size_t>(n));
}

std::string ExitInfo::Describe() const {
  if (exited) return "exit status " + std::to_string(code);
  return "killed by signal " + std::to_string(signal) + " (" +
         ::strsignal(signal) + ")";
}

Result<Process> Process::Spawn(const std::vector<std::string>& argv,
                               const SpawnOptions& options) {
  if (argv.empty()) return Err(Status::InvalidArgument("spawn: empty argv"));
  // Everything the child needs is prepared before fork: after it, only
  // async-signal-safe calls.
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const std::string out = options.stdout_path.empty() ? "/dev/null"
                                                      : options.stdout_path;
  const std::string err = options.stderr_path.empty() ? "/dev/null"
                                                      : options.stderr_path;
  const bool same = out == err;
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) return Err(PosixError("fork for " + argv[0], errno));
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(127);
    // Children start with default signal dispositions and an empty mask.
    ::signal(SIGPIPE, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    if (!options.cwd.empty() && ::chdir(options.cwd.c_str()) != 0) ::_exit(126);
    const int in_fd = ::open("/dev/null", O_RDONLY);
    const int out_fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int err_fd =
        same ? out_fd : ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (in_fd < 0 || out_fd < 0 || err_fd < 0) ::_exit(126);
    ::dup2(in_fd, STDIN_FILENO);
    ::dup2(out_fd, STDOUT_FILENO);
    ::dup2(err_fd, STDERR_FILENO);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  return Process(pid);
}

Process::Process(Process&& other) noexcept
    : pid_(other.pid_), exit_(other.exit_) {
  other.pid_ = -1;
}

Process& Process::operator=(Process&& other) noexcept {
  if (this != &other) {
    if (pid_ > 0) Terminate(std::chrono::milliseconds(0));
    pid_ = other.pid_;
    exit_ = other.exit_;
    other.pid_ = -1;
  }
  return *this;
}

Process::~Process() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    int st = 0;
    while (::waitpid(pid_, &st, 0) < 0 && errno == EINTR) {
    }
  }
}

void Process::Reaped(int wait_status) {
  pid_ = -1;
  if (WIFEXITED(wait_status)) {
    exit_ = {.exited = true, .code = WEXITSTATUS(wait_status), .signal = 0};
  } else {
    exit_ = {.exited = false,
             .code = 0,
             .signal = WIFSIGNALED(wait_status) ? WTERMSIG(wait_status) : 0};
  }
}

bool Process::Running() {
  if (pid_ <= 0) return false;
  int st = 0;
  const pid_t r = ::waitpid(pid_, &st, WNOHANG);
  if (r == pid_) {
    Reaped(st);
    return false;
  }
  return true;
}

Result<ExitInfo> Process::Wait(std::chrono::milliseconds timeout) {
  if (pid_ <= 0) return exit_;
  const Clock::time_point deadline = Clock::now() + timeout;
  const int pidfd = PidfdOpen(pid_);
  while (true) {
    int st = 0;
    const pid_t r = ::waitpid(pid_, &st, WNOHANG);
    if (r == pid_) {
      if (pidfd >= 0) ::close(pidfd);
      Reaped(st);
      return exit_;
    }
    if (r < 0 && errno != EINTR) {
      const int e = errno;
      if (pidfd >= 0) ::close(pidfd);
      return Err(PosixError("waitpid " + std::to_string(pid_), e));
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - Clock::now());
    if (left.count() <= 0) {
      if (pidfd >= 0) ::close(pidfd);
      return Err(Status::Busy("process " + std::to_string(pid_) +
                              " still running after " +
                              std::to_string(timeout.count()) + " ms"));
    }
    if (pidfd >= 0) {
      pollfd p{.fd = pidfd, .events = POLLIN, .revents = 0};
      ::poll(&p, 1, static_cast<int>(std::min<long long>(left.count(), 1000)));
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
}

ExitInfo Process::Terminate(std::chrono::milliseconds grace) {
  if (pid_ <= 0) return exit_;
  ::kill(pid_, SIGTERM);
  if (auto r = Wait(grace); r.has_value()) return *r;
  ::kill(pid_, SIGKILL);
  int st = 0;
  while (::waitpid(pid_, &st, 0) < 0 && errno == EINTR) {
  }
  Reaped(st);
  return exit_;
}

Result<ExitInfo> RunToCompletion(const std::vector<std::string>& argv,
                                 const SpawnOptions& options,
                                 std::chrono::milliseconds timeout,
                                 double* seconds) {
  const Clock::time_point start = Clock::now();
  ZT_ASSIGN_OR_RETURN(Process p, Process::Spawn(argv, options));
  auto r = p.Wait(timeout);
  if (seconds != nullptr) {
    *seconds = std::chrono::duration<double>(Clock::now() - start).count();
  }
  if (!r.has_value()) {
    p.Terminate(std::chrono::milliseconds(2000));
    return Err(Status::Busy(CommandLine(argv) + ": did not finish within " +
                            std::to_string(timeout.count() / 1000) +
                            " s; killed"));
  }
  return *r;
}

Status WaitForUnixSocket(const std::string& path, Process* process,
                         std::chrono::milliseconds timeout) {
  const Clock::time_point deadline = Clock::now() + timeout;
  while (true) {
    const Result<int> fd = platform::ConnectUnix(path);
    if (fd.has_value()) {
      ::close(*fd);
      return Status::Ok();
    }
    // An empty or too long path never connects.
    if (fd.error().code() == StatusCode::kInvalidArgument) return fd.error();
    if (process != nullptr && !process->Running()) {
      auto ended = process->Wait(std::chrono::milliseconds(0));
      return Status::IoError("the server ended (" +
                             (ended.has_value() ? ended->Describe()
                                                : std::string("?")) +
                             ") before its socket " + path + " accepted");
    }
    if (Clock::now() >= deadline) {
      return Status::IoError("socket " + path + " did not accept within " +
                             std::to_string(timeout.count()) + " ms");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

Result<ServerProcess> StartServerProcess(const std::vector<std::string>& argv,
                                         std::string label, std::string sock,
                                         std::string ctl, std::string log,
                                         const std::string& cwd,
                                         std::chrono::milliseconds timeout) {
  ZT_ASSIGN_OR_RETURN(Process process,
                      Process::Spawn(argv, {.cwd = cwd, .stdout_path = log,
                                            .stderr_path = log}));
  ServerProcess server{.label = std::move(label),
                       .process = std::move(process),
                       .sock = std::move(sock),
                       .ctl = std::move(ctl),
                       .log = std::move(log)};
  Status s = WaitForUnixSocket(server.sock, &server.process, timeout);
  if (s.ok() && !server.ctl.empty()) {
    s = WaitForUnixSocket(server.ctl, &server.process, timeout);
  }
  if (!s.ok()) {
    server.process.Terminate(std::chrono::milliseconds(2000));
    return Err(Status::IoError(server.label + " (" + CommandLine(argv) +
                               "): " + s.message() + "; its output:\n" +
                               ReadFileText(server.log, 4096)));
  }
  return server;
}

void StopServerProcess(ServerProcess* server, std::chrono::milliseconds grace,
                       std::string_view command) {
  const ExitInfo e = server->process.Terminate(grace);
  if (!e.ok()) {
    std::fprintf(stderr, "%s: warning: %s ended with %s on SIGTERM; its "
                 "output:\n%s\n",
                 std::string(command).c_str(), server->label.c_str(),
                 e.Describe().c_str(), ReadFileText(server->log, 4096).c_str());
  }
  ::unlink(server->sock.c_str());
}

std::vector<std::string> ZtierServeArgs(const std::string& ztier_path,
                                        std::uint64_t size,
                                        const std::string& codec,
                                        const std::string& sock,
                                        const std::string& ctl) {
  return {ztier_path,
          "serve",
          "--device",
          "zram0:" + std::to_string(size),
          "--comp-algorithm",
          codec,
          "--unix",
          sock,
          "--ctl",
          ctl};
}

Result<double> RunNbdcopy(const std::string& nbdcopy_path,
                          const std::string& src, const std::string& dst,
                          const std::string& dir,
                          std::chrono::milliseconds timeout) {
  const std::string log = dir + "/nbdcopy.log";
  const std::vector<std::string> argv = {nbdcopy_path, src, dst};
  double seconds = 0;
  ZT_ASSIGN_OR_RETURN(ExitInfo e,
                      RunToCompletion(argv, {.cwd = dir, .stdout_path = log,
                                             .stderr_path = log},
                                      timeout, &seconds));
  if (!e.ok()) {
    return Err(Status::IoError(CommandLine(argv) + ": " + e.Describe() +
                               "; output:\n" + ReadFileText(log, 4096)));
  }
  return seconds;
}

Result<std::uint64_t> ProcessRssBytes(pid_t pid) {
  const std::string path = "/proc/" + std::to_string(pid) + "/status";
  std::ifstream in(path);
  if (!in) return Err(Status::NotFound("cannot read " + path));
  std::string line;
  while (std::getline(in, line)) {
    if (!line.starts_with("VmRSS:")) continue;
    std::istringstream fields(line.substr(6));
    std::uint64_t kib = 0;
    std::string unit;
    if (!(fields >> kib >> unit) || unit != "kB") break;
    return kib * 1024;
  }
  return Err(Status::NotFound("no VmRSS line in " + path));
}

std::string ReadFileText(const std::string& path, std::size_t max_bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  std::string text;
  char buf[65536];
  while (text.size() < max_bytes && in.read(buf, sizeof(buf)).gcount() > 0) {
    text.append(buf, static_cast<std::size_t>(in.gcount()));
  }
  if (text.size() > max_bytes) text.resize(max_bytes);
  return text;
}

std::string ToolVersion(const std::string& tool_path,
                        const std::string& scratch_dir) {
  const std::string out = scratch_dir + "/version.txt";
  auto r = RunToCompletion({tool_path, "--version"},
                           {.cwd = scratch_dir, .stdout_path = out,
                            .stderr_path = out},
                           std::chrono::milliseconds(10'000));
  const std::string text = ReadFileText(out, 4096);
  ::unlink(out.c_str());
  if (!r.has_value() || !r->ok()) return "unknown";
  std::string joined;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) {
      line.pop_back();
    }
    if (line.empty()) continue;
    joined += (joined.empty() ? "" : ", ") + line;
  }
  return joined.empty() ? "unknown" : joined;
}

std::string CommandLine(const std::vector<std::string>& argv) {
  std::string line;
  for (const std::string& a : argv) {
    if (!line.empty()) line += ' ';
    const bool plain =
        !a.empty() && a.find_first_not_of(
                          "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                          "0123456789-_=./:,+%@") == std::string::npos;
    if (plain) {
      line += a;
    } else {
      line += '\'';
      for (char c : a) {
        if (c == '\'') {
          line += "'\\''";
        } else {
          line += c;
        }
      }
      line += '\'';
    }
  }
  return line;
}

}  // namespace ztier::tool::bench
