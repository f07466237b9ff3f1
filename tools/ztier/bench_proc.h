// File: tools/ztier/bench_proc.h
//
// Subprocesses for the benchmarks that run tools: finding a tool and its
// version, starting a server (`ztier serve`, nbdkit) until its sockets
// accept and stopping it, running a client (fio, nbdcopy, gnuplot) with its
// output in files and a deadline, and a process's VmRSS. A child gets
// SIGTERM when this process dies (PR_SET_PDEATHSIG); a Process destroyed
// while its child runs kills (SIGKILL) and reaps it.
//
// Thread safety: a Process is used by one thread. Spawn() forks: call it
// while no other threads run.
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

// The full path of executable `name` on $PATH (or `name` itself if it holds
// a '/' and is executable); empty when there is none.
std::string FindExecutable(std::string_view name);
// The path of the running binary (/proc/self/exe); empty if unreadable.
std::string SelfExecutable();

struct ToolInfo {
  std::string path;     // empty: not found
  std::string version;  // ToolVersion(); empty when not found
};

// FindExecutable(name) and, when found, its ToolVersion.
ToolInfo FindTool(std::string_view name, const std::string& scratch_dir);

struct ExitInfo {
  bool exited = false;  // exited normally; `code` is its status
  int code = 0;
  int signal = 0;  // !exited: the signal that killed it
  bool ok() const { return exited && code == 0; }
  std::string Describe() const;  // "exit status 1", "killed by signal 9 (..)"
};

struct SpawnOptions {
  std::string cwd;          // empty: this process's
  std::string stdout_path;  // empty: /dev/null; created or truncated
  std::string stderr_path;  // empty: /dev/null; may equal stdout_path
};

class Process {
 public:
  // Starts argv[0] (a path) with argv; stdin is /dev/null.
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
  // Waits at most `timeout` for the child to end; kBusy (the child left
  // running) when the deadline passes.
  Result<ExitInfo> Wait(std::chrono::milliseconds timeout);
  // SIGTERM, waits up to `grace`, then SIGKILL. Returns how it ended (a
  // child that had already ended reports that).
  ExitInfo Terminate(std::chrono::milliseconds grace);

 private:
  explicit Process(pid_t pid) : pid_(pid) {}
  void Reaped(int wait_status);

  pid_t pid_ = -1;  // -1: none, or reaped
  ExitInfo exit_;
};

// Runs argv to its end, at most `timeout` (then killed: kBusy); *seconds
// (if not null) gets the wall time from spawn to reap.
Result<ExitInfo> RunToCompletion(const std::vector<std::string>& argv,
                                 const SpawnOptions& options,
                                 std::chrono::milliseconds timeout,
                                 double* seconds = nullptr);

struct ServerProcess {  // a server child on a Unix socket
  std::string label;    // names it in messages: "ztier-lz4", "nbdkit"
  Process process;
  std::string sock;  // its NBD socket
  std::string ctl;   // its control socket; empty when it has none
  std::string log;   // its stdout and stderr
};

// Starts argv in `cwd`, its output in `log`, and waits until `sock` (and
// `ctl` when not empty) accepts, at most `timeout` each. On failure the
// child is stopped; the error names `label`, the command line and output.
Result<ServerProcess> StartServerProcess(const std::vector<std::string>& argv,
                                         std::string label, std::string sock,
                                         std::string ctl, std::string log,
                                         const std::string& cwd,
                                         std::chrono::milliseconds timeout);

// SIGTERM (SIGKILL after `grace`), and removes the socket (nbdkit leaves
// it). A server that does not exit cleanly is a "COMMAND: warning: ..." on
// stderr with its output.
void StopServerProcess(ServerProcess* server, std::chrono::milliseconds grace,
                       std::string_view command);

// `ztier serve --device zram0:SIZE --comp-algorithm CODEC --unix SOCK
// --ctl CTL` with `ztier_path` as the binary.
std::vector<std::string> ZtierServeArgs(const std::string& ztier_path,
                                        std::uint64_t size,
                                        const std::string& codec,
                                        const std::string& sock,
                                        const std::string& ctl);

// `nbdcopy SRC DST` in `dir` (output in DIR/nbdcopy.log, at most
// `timeout`): the process's wall time in seconds. Errors carry the command
// line and its output.
Result<double> RunNbdcopy(const std::string& nbdcopy_path,
                          const std::string& src, const std::string& dst,
                          const std::string& dir,
                          std::chrono::milliseconds timeout);

// VmRSS of `pid` in bytes, from /proc/PID/status.
Result<std::uint64_t> ProcessRssBytes(pid_t pid);
// The file's contents, at most `max_bytes`; empty when it cannot be read.
std::string ReadFileText(const std::string& path,
                         std::size_t max_bytes = 64 << 20);

// The non-empty lines of `TOOL --version` joined with ", " ("nbdcopy
// 1.14.2, libnbd 1.14.2"); "unknown" when it fails. Its output goes to a
// file in `scratch_dir`.
std::string ToolVersion(const std::string& tool_path,
                        const std::string& scratch_dir);

// argv as one shell line, words with special characters single-quoted.
std::string CommandLine(const std::vector<std::string>& argv);

}  // namespace ztier::tool::bench

#endif  // ZTIER_TOOLS_ZTIER_BENCH_PROC_H_
