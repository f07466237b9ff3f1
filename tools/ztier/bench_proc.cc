// File: tools/ztier/bench_proc.cc
//
// Subprocess helpers of the benchmarks (bench_proc.h). Waiting polls a
// pidfd where the kernel has one (no delay in timed runs), else waitpid
// every millisecond.
#include "bench_proc.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>
#include <utility>

#include "platform/socket.h"

namespace ztier::tool::bench {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

bool IsExecutableFile(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
         ::access(path.c_str(), X_OK) == 0;
}

// SIGKILL, and the wait status once reaped.
int KillAndReap(pid_t pid) {
  int wait_status = 0;
  ::kill(pid, SIGKILL);
  while (::waitpid(pid, &wait_status, 0) < 0 && errno == EINTR) {
  }
  return wait_status;
}

// Connects to the Unix socket `path` until a connect succeeds (closing it
// at once), at most `timeout`. An error when `process` ends first, or on
// the deadline.
Status WaitForUnixSocket(const std::string& path, Process* process,
                         milliseconds timeout) {
  const Clock::time_point deadline = Clock::now() + timeout;
  while (true) {
    // A server that accepts nothing with its backlog full is waited for
    // no longer than the deadline.
    const auto left = std::chrono::ceil<milliseconds>(deadline - Clock::now());
    const Result<int> fd = platform::ConnectUnix(
        path, static_cast<int>(std::max<milliseconds::rep>(1, left.count())));
    if (fd.has_value()) {
      ::close(*fd);
      return Status::Ok();
    }
    // An empty or too long path, or one that is no socket, never connects.
    if (fd.error().code() == StatusCode::kInvalidArgument) return fd.error();
    if (!process->Running()) {
      auto ended = process->Wait(milliseconds(0));
      return Status::IoError(
          "the server ended (" +
          (ended.has_value() ? ended->Describe() : std::string("?")) +
          ") before its socket " + path + " accepted");
    }
    if (Clock::now() >= deadline) {
      return Status::IoError("socket " + path + " did not accept within " +
                             std::to_string(timeout.count()) + " ms");
    }
    std::this_thread::sleep_for(milliseconds(5));
  }
}

}  // namespace

std::string FindExecutable(std::string_view name) {
  if (name.find('/') != std::string_view::npos) {
    return IsExecutableFile(std::string(name)) ? std::string(name) : "";
  }
  const char* env = std::getenv("PATH");
  std::istringstream dirs(env != nullptr ? env : "/usr/bin:/bin");
  for (std::string dir; !name.empty() && std::getline(dirs, dir, ':');) {
    const std::string path =
        (dir.empty() ? "." : dir) + "/" + std::string(name);
    if (IsExecutableFile(path)) return path;
  }
  return "";
}

std::string SelfExecutable() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : "";
}

ToolInfo FindTool(std::string_view name, const std::string& scratch_dir) {
  ToolInfo t{.path = FindExecutable(name), .version = ""};
  if (!t.path.empty()) t.version = ToolVersion(t.path, scratch_dir);
  return t;
}

std::string ExitInfo::Describe() const {
  if (exited) return "exit status " + std::to_string(code);
  return "killed by signal " + std::to_string(signal) + " (" +
         ::strsignal(signal) + ")";
}

Result<Process> Process::Spawn(const std::vector<std::string>& argv,
                               const SpawnOptions& options) {
  if (argv.empty()) return Err(Status::InvalidArgument("spawn: empty argv"));
  // All the child needs is made before fork: after it, only
  // async-signal-safe calls.
  std::vector<char*> args;
  for (const std::string& a : argv)
    args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const std::string out =
      options.stdout_path.empty() ? "/dev/null" : options.stdout_path;
  const std::string err =
      options.stderr_path.empty() ? "/dev/null" : options.stderr_path;
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) return Err(PosixError("fork for " + argv[0], errno));
  if (pid > 0) return Process(pid);
  ::prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (::getppid() != parent) ::_exit(127);
  // Default signal dispositions and an empty mask, as any child.
  ::signal(SIGPIPE, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  if (!options.cwd.empty() && ::chdir(options.cwd.c_str()) != 0) ::_exit(126);
  const int in_fd = ::open("/dev/null", O_RDONLY);
  const int out_fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  const int err_fd =
      out == err ? out_fd
                 : ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (in_fd < 0 || out_fd < 0 || err_fd < 0) ::_exit(126);
  ::dup2(in_fd, STDIN_FILENO);
  ::dup2(out_fd, STDOUT_FILENO);
  ::dup2(err_fd, STDERR_FILENO);
  ::execv(args[0], args.data());
  ::_exit(127);
}

Process::Process(Process&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)), exit_(other.exit_) {}

Process& Process::operator=(Process&& other) noexcept {
  if (this != &other) {
    if (pid_ > 0) Terminate(milliseconds(0));
    pid_ = std::exchange(other.pid_, -1);
    exit_ = other.exit_;
  }
  return *this;
}

Process::~Process() {
  if (pid_ > 0) KillAndReap(pid_);
}

void Process::Reaped(int wait_status) {
  pid_ = -1;
  exit_ = {.exited = WIFEXITED(wait_status),
           .code = WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : 0,
           .signal = WIFSIGNALED(wait_status) ? WTERMSIG(wait_status) : 0};
}

bool Process::Running() {
  int st = 0;
  if (pid_ > 0 && ::waitpid(pid_, &st, WNOHANG) == pid_) Reaped(st);
  return pid_ > 0;
}

Result<ExitInfo> Process::Wait(milliseconds timeout) {
  const Clock::time_point deadline = Clock::now() + timeout;
  const int pidfd =
      pid_ > 0 ? static_cast<int>(::syscall(SYS_pidfd_open, pid_, 0)) : -1;
  int st = 0, error = 0;
  pid_t r = 0;
  while (pid_ > 0 && (r = ::waitpid(pid_, &st, WNOHANG)) != pid_) {
    const auto left =
        std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
    if (r < 0 && errno != EINTR) error = errno;
    if (error != 0 || left.count() <= 0) break;
    // Without a pidfd, poll() only sleeps for a millisecond.
    pollfd p{.fd = pidfd, .events = POLLIN, .revents = 0};
    ::poll(&p, 1,
           pidfd < 0 ? 1 : static_cast<int>(std::min(left.count(), 1000L)));
  }
  if (pidfd >= 0) ::close(pidfd);
  if (pid_ > 0 && r == pid_) Reaped(st);
  if (pid_ <= 0) return exit_;
  if (error != 0) {
    return Err(PosixError("waitpid " + std::to_string(pid_), error));
  }
  return Err(Status::Busy("process " + std::to_string(pid_) +
                          " still running after " +
                          std::to_string(timeout.count()) + " ms"));
}

ExitInfo Process::Terminate(milliseconds grace) {
  if (pid_ <= 0) return exit_;
  ::kill(pid_, SIGTERM);
  if (auto r = Wait(grace); r.has_value()) return *r;
  Reaped(KillAndReap(pid_));
  return exit_;
}

Result<ExitInfo> RunToCompletion(const std::vector<std::string>& argv,
                                 const SpawnOptions& options,
                                 milliseconds timeout, double* seconds) {
  const Clock::time_point start = Clock::now();
  ZT_ASSIGN_OR_RETURN(Process p, Process::Spawn(argv, options));
  auto r = p.Wait(timeout);
  if (seconds != nullptr) {
    *seconds = std::chrono::duration<double>(Clock::now() - start).count();
  }
  if (r.has_value()) return *r;
  p.Terminate(milliseconds(2000));
  return Err(Status::Busy(CommandLine(argv) + ": did not finish within " +
                          std::to_string(timeout.count() / 1000) +
                          " s; killed"));
}

Result<ServerProcess> StartServerProcess(const std::vector<std::string>& argv,
                                         std::string label, std::string sock,
                                         std::string ctl, std::string log,
                                         const std::string& cwd,
                                         milliseconds timeout) {
  ZT_ASSIGN_OR_RETURN(
      Process process,
      Process::Spawn(argv,
                     {.cwd = cwd, .stdout_path = log, .stderr_path = log}));
  ServerProcess server{.label = std::move(label),
                       .process = std::move(process),
                       .sock = std::move(sock),
                       .ctl = std::move(ctl),
                       .log = std::move(log)};
  Status s = WaitForUnixSocket(server.sock, &server.process, timeout);
  if (s.ok() && !server.ctl.empty()) {
    s = WaitForUnixSocket(server.ctl, &server.process, timeout);
  }
  if (s.ok()) return server;
  server.process.Terminate(milliseconds(2000));
  return Err(Status::IoError(server.label + " (" + CommandLine(argv) +
                             "): " + s.message() + "; its output:\n" +
                             ReadFileText(server.log, 4096)));
}

void StopServerProcess(ServerProcess* server, milliseconds grace,
                       std::string_view command) {
  const ExitInfo e = server->process.Terminate(grace);
  if (!e.ok()) {
    std::fprintf(stderr,
                 "%s: warning: %s ended with %s on SIGTERM; its output:\n%s\n",
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
  const std::string device = "zram0:" + std::to_string(size);
  return {ztier_path, "serve",  "--device", device,  "--comp-algorithm",
          codec,      "--unix", sock,       "--ctl", ctl};
}

Result<double> RunNbdcopy(const std::string& nbdcopy_path,
                          const std::string& src, const std::string& dst,
                          const std::string& dir, milliseconds timeout) {
  const std::string log = dir + "/nbdcopy.log";
  const std::vector<std::string> argv = {nbdcopy_path, src, dst};
  double seconds = 0;
  ZT_ASSIGN_OR_RETURN(
      ExitInfo e,
      RunToCompletion(argv,
                      {.cwd = dir, .stdout_path = log, .stderr_path = log},
                      timeout, &seconds));
  if (e.ok()) return seconds;
  return Err(Status::IoError(CommandLine(argv) + ": " + e.Describe() +
                             "; output:\n" + ReadFileText(log, 4096)));
}

Result<std::uint64_t> ProcessRssBytes(pid_t pid) {
  const std::string path = "/proc/" + std::to_string(pid) + "/status";
  std::istringstream in(ReadFileText(path, 1 << 16));
  std::string key, unit;
  std::uint64_t kib = 0;
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    if (fields >> key >> kib >> unit && key == "VmRSS:" && unit == "kB") {
      return kib * 1024;
    }
  }
  return Err(Status::NotFound("no VmRSS line in " + path));
}

std::string ReadFileText(const std::string& path, std::size_t max_bytes) {
  std::ifstream in(path, std::ios::binary);
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
  auto r = RunToCompletion(
      {tool_path, "--version"},
      {.cwd = scratch_dir, .stdout_path = out, .stderr_path = out},
      milliseconds(10'000));
  std::istringstream lines(ReadFileText(out, 4096));
  ::unlink(out.c_str());
  std::string joined;
  for (std::string line; std::getline(lines, line);) {
    line.erase(line.find_last_not_of(" \r") + 1);
    if (!line.empty()) joined += (joined.empty() ? "" : ", ") + line;
  }
  return r.has_value() && r->ok() && !joined.empty() ? joined : "unknown";
}

std::string CommandLine(const std::vector<std::string>& argv) {
  constexpr std::string_view kPlain =
      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_=./"
      ":,+%@";
  std::string line;
  for (const std::string& a : argv) {
    if (!line.empty()) line += ' ';
    if (!a.empty() && a.find_first_not_of(kPlain) == std::string::npos) {
      line += a;
      continue;
    }
    line += '\'';
    for (char c : a)
      line += c == '\'' ? std::string("'\\''") : std::string(1, c);
    line += '\'';
  }
  return line;
}

}  // namespace ztier::tool::bench
