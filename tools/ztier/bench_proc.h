// File: tools/ztier/bench_proc.h
//
// Subprocesses for `ztier bench nbd` (and `ztier bench zram-compare`):
// finding a tool on PATH and its version, starting a server (waiting until
// its sockets accept) or a client (fio, nbdcopy) with its output in files,
// waiting for it with a deadline, stopping it with SIGTERM, waiting for a
// Unix socket to accept, and reading a process's VmRSS.
//
//   auto p = Process::Spawn({"/usr/bin/nbdkit", "--foreground", ...},
//                           {.cwd = dir, .stdout_path = dir + "/nbdkit.log"});
//   ZT_RETURN_IF_ERROR(WaitForUnixSocket(sock, &*p, std::chrono::seconds(10)));
//   ...
//   ZT_RETURN_IF_ERROR(p->Terminate(std::chrono::seconds(10)));
//
// A child gets SIGTERM when this process dies (PR_SET_PDEATHSIG), so an
// interrupted benchmark leaves no server behind. A Process destroyed while
// its child still runs kills it (SIGKILL) and reaps it.
//
// Thread safety: a Process is used by one thread. Spawn() forks; call it
// from a process without other threads running (the tool is single-threaded
// while it benchmarks).
#ifndef ZTIER_TOOLS_ZTIER_BENCH_PROC_H_
#define ZTIER_TOOLS_ZTIER_BENCH_PROC_H_

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ztier/status.h"

namespace ztier::tool::bench {

// The full path of executable `name` found on $PATH (or `name` itself if it
// holds a '/' and is executable); empty when there is none.
std::string FindExecutable(std::string_view name);

// The path of the running binary (/proc/self/exe); empty if unreadable.
std::string SelfExecutable();

// How a child ended.
struct ExitInfo {
  bool exited = false;  // exited normally; `code` is its status
  int code = 0;
  int signal = 0;       // !exited: the signal that killed it
  bool ok() const { return exited && code == 0; }
  // "exit status 1", "killed by signal 9".
  std::string Describe() const;
};

struct SpawnOptions {
  std::string cwd;          // empty: this process's
  std::string stdout_path;  // empty: /dev/null; created or truncated
  std::string stderr_path;  // empty: /dev/null; may equal stdout_path
};

class Process {
 public:
  // Starts argv[0] (a path) with argv. stdin is /dev/null.
  static Result<Process> Spawn(const std::vector<std::string>& argv,
                               const SpawnOptions& options);

  Process(Process&& other) noexcept;
  Process& operator=(Process&& other) noexcept;
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;
  ~Process();

  pid_t pid() const { return pid_; }

  // True while the child has not ended (reaps it if it has).
  bool Running();

  // Waits for the child to end, at most `timeout`. kBusy (and the child left
  // running) when the deadline passes.
  Result<ExitInfo> Wait(std::chrono::milliseconds timeout);

  // SIGTERM, then waits up to `grace`, then SIGKILL. Returns how it ended
  // (a child that had already ended reports that).
  ExitInfo Terminate(std::chrono::milliseconds grace);

 private:
  explicit Process(pid_t pid) : pid_(pid) {}
  void Reaped(int wait_status);

  pid_t pid_ = -1;  // -1: none, or reaped
  ExitInfo exit_;
};

// Runs argv to completion (at most `timeout`; killed after it, an error).
// Returns how it ended; *seconds (if not null) gets the wall time from
// spawn to reap.
Result<ExitInfo> RunToCompletion(const std::vector<std::string>& argv,
                                 const SpawnOptions& options,
                                 std::chrono::milliseconds timeout,
                                 double* seconds = nullptr);

// Connects to the Unix socket `path` until a connect succeeds (and closes
// the connection at once), at most `timeout`. An error when `process` (if
// not null) ends first, or on the deadline.
Status WaitForUnixSocket(const std::string& path, Process* process,
                         std::chrono::milliseconds timeout);

// A server child listening on a Unix socket (StartServerProcess).
struct ServerProcess {
  std::string label;  // names it in messages: "ztier-lz4", "nbdkit"
  Process process;
  std::string sock;  // its NBD socket
  std::string ctl;   // its control socket; empty when it has none
  std::string log;   // its stdout and stderr
};

// Starts argv in `cwd` with its output in `log`, then waits until `sock`,
// and then `ctl` when not empty, accepts (at most `timeout` each). On
// failure the child is stopped and the error names `label`, the command
// line and the start of its output.
Result<ServerProcess> StartServerProcess(const std::vector<std::string>& argv,
                                         std::string label, std::string sock,
                                         std::string ctl, std::string log,
                                         const std::string& cwd,
                                         std::chrono::milliseconds timeout);

// Stops a server with SIGTERM (SIGKILL after `grace`) and removes its socket
// (nbdkit leaves it behind). One that does not exit cleanly is reported on
// stderr as "<command>: warning: ..." with its output; figures taken before
// stand.
void StopServerProcess(ServerProcess* server, std::chrono::milliseconds grace,
                       std::string_view command);

// `ztier serve --device zram0:SIZE --comp-algorithm CODEC --unix SOCK
// --ctl CTL` with `ztier_path` as the binary.
std::vector<std::string> ZtierServeArgs(const std::string& ztier_path,
                                        std::uint64_t size,
                                        const std::string& codec,
                                        const std::string& sock,
                                        const std::string& ctl);

// Runs `nbdcopy SRC DST` in `dir` (its output in DIR/nbdcopy.log; at most
// `timeout`); returns the wall time of the process in seconds. Errors carry
// the command line and its output.
Result<double> RunNbdcopy(const std::string& nbdcopy_path,
                          const std::string& src, const std::string& dst,
                          const std::string& dir,
                          std::chrono::milliseconds timeout);

// VmRSS of `pid` in bytes, from /proc/PID/status.
Result<std::uint64_t> ProcessRssBytes(pid_t pid);

// The file's contents; empty when it cannot be read. At most `max_bytes`.
std::string ReadFileText(const std::string& path,
                         std::size_t max_bytes = 64 << 20);

// The non-empty lines of `tool --version` joined with ", " ("fio-3.33",
// "nbdcopy 1.14.2, libnbd 1.14.2"); "unknown" when it fails. `scratch_dir`
// holds its output file.
std::string ToolVersion(const std::string& tool_path,
                        const std::string& scratch_dir);

// argv as one shell-like line, words with special characters single-quoted:
// for messages and the printed configuration.
std::string CommandLine(const std::vector<std::string>& argv);

}  // namespace ztier::tool::bench

#endif  // ZTIER_TOOLS_ZTIER_BENCH_PROC_H_
