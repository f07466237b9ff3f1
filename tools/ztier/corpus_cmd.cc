// File: tools/ztier/corpus_cmd.cc
//
// `ztier corpus capture` (see corpus_cmd.h): flags, the child process of the
// `-- COMMAND` form, and the corpus and sidecar files.
#include "corpus_cmd.h"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "bench_stats.h"
#include "corpus/capture.h"
#include "flags.h"
#include "progress.h"
#include "tool_common.h"

extern char** environ;

namespace ztier::tool {
namespace {

constexpr const char kCommand[] = "ztier corpus capture";

int Fail(const std::string& message) { return ReportFailure(kCommand, message); }

int UsageError(const std::string& message) {
  return ReportUsageError(kCommand, message);
}

// The process group of the started COMMAND, for the signal handler.
volatile sig_atomic_t g_child_group = 0;

// SIGINT, SIGTERM or SIGHUP to ztier while COMMAND runs in its own group
// (where the terminal's ^C does not reach): the group is stopped with
// SIGTERM, as after a capture but without waiting, and ztier dies of it.
void ForwardSignal(int sig) {
  if (g_child_group > 0) {
    ::kill(-g_child_group, SIGTERM);
    ::kill(-g_child_group, SIGCONT);  // see Child::Stop()
  }
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

constexpr int kForwarded[] = {SIGINT, SIGTERM, SIGHUP};

// A started COMMAND, in a process group of its own with what it starts,
// stopped (SIGTERM to the group, then SIGKILL after 5 s to what is left
// of it) and reaped when the object dies.
class Child {
 public:
  static Result<Child> Start(std::span<const std::string_view> argv) {
    std::vector<std::string> words(argv.begin(), argv.end());
    std::vector<char*> ptrs;
    for (std::string& w : words) ptrs.push_back(w.data());
    ptrs.push_back(nullptr);
    posix_spawnattr_t attr;
    ::posix_spawnattr_init(&attr);
    ::posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
    ::posix_spawnattr_setpgroup(&attr, 0);
    for (int sig : kForwarded) ::signal(sig, ForwardSignal);
    pid_t pid = -1;
    const int err =
        ::posix_spawnp(&pid, ptrs[0], nullptr, &attr, ptrs.data(), environ);
    ::posix_spawnattr_destroy(&attr);
    if (err != 0) {
      for (int sig : kForwarded) ::signal(sig, SIG_DFL);
      return Err(PosixError("start " + words[0], err));
    }
    g_child_group = pid;
    return Child(pid);
  }
  Child(Child&& o) noexcept : pid_(o.pid_), group_(o.group_) {
    o.pid_ = -1;
    o.group_ = -1;
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  ~Child() { Stop(); }

  pid_t pid() const { return pid_; }

  // Whether it has exited already (it is then reaped; *status says how).
  bool Exited(int* status) {
    if (pid_ < 0) return true;
    if (::waitpid(pid_, status, WNOHANG) == pid_) {
      pid_ = -1;  // what it started may live on: Stop() stops its group
      return true;
    }
    return false;
  }

  // Waits `seconds`, or less if it exits first: whether it has exited (it
  // is then reaped; *status says how).
  bool ExitsWithin(double seconds, int* status) {
    using Clock = std::chrono::steady_clock;
    const auto deadline =
        Clock::now() + std::chrono::duration_cast<Clock::duration>(
                           std::chrono::duration<double>(seconds));
    for (;;) {
      if (Exited(status)) return true;
      const auto now = Clock::now();
      if (now >= deadline) return false;
      std::this_thread::sleep_for(std::min<Clock::duration>(
          deadline - now, std::chrono::milliseconds(10)));
    }
  }

  // Stops the group: done when the command is reaped and no process is
  // left in its group (which outlives it while any is).
  void Stop() {
    if (group_ < 0) return;
    // A stopped process (a background job that read the terminal: SIGTTIN)
    // keeps SIGTERM pending until it runs again, as a shell's `kill` of a
    // stopped job knows: SIGCONT lets it act on it now, not at the SIGKILL.
    ::kill(-group_, SIGTERM);
    ::kill(-group_, SIGCONT);
    for (int i = 0; i < 500; ++i) {
      if (pid_ >= 0 && ::waitpid(pid_, nullptr, WNOHANG) == pid_) pid_ = -1;
      if (pid_ < 0 && ::kill(-group_, 0) != 0) {
        Stopped();
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ::kill(-group_, SIGKILL);
    if (pid_ >= 0) ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
    Stopped();
  }

 private:
  explicit Child(pid_t pid) : pid_(pid), group_(pid) {}
  void Stopped() {
    pid_ = -1;
    group_ = -1;
    g_child_group = 0;
    for (int sig : kForwarded) ::signal(sig, SIG_DFL);
  }
  pid_t pid_;
  pid_t group_;  // -1 once stopped
};

std::string ExitText(int status) {
  if (WIFEXITED(status)) return "exit status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "signal " + std::to_string(WTERMSIG(status));
  return "status " + std::to_string(status);
}

std::string Hex(std::uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string SidecarJson(const corpus::Capture& c, const std::string& output,
                        std::size_t max_pages) {
  JsonWriter w;
  w.BeginObject();
  w.Key("corpus");
  w.String(output);
  w.Key("pages");
  w.Uint(c.pages.size());
  w.Key("process");
  w.BeginObject();
  w.Key("pid");
  w.Int(c.pid);
  w.Key("comm");
  w.String(c.comm);
  w.Key("cmdline");
  w.String(c.cmdline);
  w.EndObject();
  w.Key("mappings_set");
  w.String(corpus::MappingSetName(c.mappings));
  w.Key("max_pages");
  w.Uint(max_pages);
  w.Key("eligible_pages");
  w.Uint(c.eligible);
  w.Key("skipped");
  w.BeginObject();
  w.Key("untouched");
  w.Uint(c.untouched);
  w.Key("shared_zero_page");
  if (c.zero_page_known) {
    w.Uint(c.zero_page);
  } else {
    w.Null();  // the page frames were not visible: not told apart
  }
  w.Key("not_sampled");
  w.Uint(c.eligible - c.pages.size() - c.vanished);
  w.Key("vanished");
  w.Uint(c.vanished);
  w.EndObject();
  w.Key("taken");
  w.BeginObject();
  w.Key("zero_filled");
  w.Uint(c.zero_filled);
  w.Key("same_filled");
  w.Uint(c.same_filled);
  w.EndObject();
  // Every mapping of the set is counted in the totals above; those the
  // corpus took pages from are listed, one a line.
  w.Key("mappings_considered");
  w.Uint(c.considered.size());
  w.Key("mappings");
  w.BeginArray();
  for (const corpus::CapturedMapping& m : c.considered) {
    if (m.taken == 0) continue;
    w.BeginInlineObject();
    w.Key("start");
    w.String(Hex(m.start));
    w.Key("end");
    w.String(Hex(m.end));
    w.Key("perms");
    w.String(m.perms);
    w.Key("name");
    w.String(m.name);
    w.Key("present");
    w.Uint(m.present);
    w.Key("swapped");
    w.Uint(m.swapped);
    w.Key("shared_zero_page");
    w.Uint(m.zero_page);
    w.Key("taken");
    w.Uint(m.taken);
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  return w.Take();
}

Result<double> ParseSeconds(std::string_view text) {
  double v = 0;
  const auto r = std::from_chars(text.data(), text.data() + text.size(), v);
  if (r.ec != std::errc() || r.ptr != text.data() + text.size() ||
      !std::isfinite(v) || v < 0 || v > 86400) {
    return Err(Status::InvalidArgument(
        "--after " + std::string(text) +
        ": a number of seconds from 0 to 86400 (fractions allowed)"));
  }
  return v;
}

constexpr const char kSynopsis[] =
    "(--pid PID | [--after SECONDS] -- COMMAND ARGS...) -o FILE.pages.zst "
    "[--mappings anon|file|all] [--max-pages N] [--level N]";
constexpr const char kAbout[] =
    "capture the memory pages of a running process as a page corpus\n"
    "(FILE, one zstd frame of 4096-byte pages, and FILE.json describing "
    "it).\nRead-only: the process is not stopped or changed. Needs the "
    "right to read its memory\n(the same user under Yama ptrace_scope 0, "
    "or root).";

// What `ztier corpus capture` was asked to do.
struct CaptureArgs {
  std::int64_t pid = 0;
  std::string output;
  std::span<const std::string_view> command;  // after `--`
  double after = 1;
  corpus::MappingSet mappings = corpus::MappingSet::kAnon;
  std::int64_t max_pages = 4096;
  std::int64_t level = 9;
};

// Parses the words; nullopt: carry on; else the exit status (usage, --help).
std::optional<int> ParseCaptureArgs(std::span<const std::string_view> all_args,
                                    CaptureArgs* a) {
  // Words after `--` are the command to start.
  std::vector<std::string_view> args;
  for (std::size_t i = 0; i < all_args.size(); ++i) {
    if (all_args[i] == "--") {
      a->command = all_args.subspan(i + 1);
      break;
    }
    args.push_back(all_args[i]);
  }
  std::string after_text;
  std::string mappings_text = "anon";
  FlagSet flags(kCommand, kSynopsis);
  flags.AddInt("pid", &a->pid, "PID", "the process to capture", 1, INT32_MAX);
  flags.AddOutputFile("output", &a->output, "FILE",
                      "the corpus to write; FILE.json is written beside it");
  flags.AddString("after", &after_text, "SECONDS",
                  "with -- COMMAND: how long the command runs before the "
                  "capture (default 1)");
  flags.AddString("mappings", &mappings_text, "anon|file|all",
                  "which mappings: private anonymous (default), files, or "
                  "both");
  flags.AddInt("max-pages", &a->max_pages, "N",
               "the most pages to take, spread evenly (default 4096)", 1,
               std::int64_t{1} << 24);
  flags.AddInt("level", &a->level, "N", "zstd level of FILE, 1-22 (default 9; 19 makes the smallest files, slowly)", 1, 22);
  flags.Short("output", 'o');
  if (auto rc = flags.ParseCommandLine(args, kAbout)) return *rc;
  if (a->output.empty()) return UsageError("-o FILE is required");
  // The loaders (estimate, the benchmarks) decompress by the name: a corpus
  // named otherwise would be read as its compressed bytes.
  if (!a->output.ends_with(".zst")) {
    return UsageError("-o " + a->output +
                      ": a corpus is a zstd frame, named FILE.pages.zst (the "
                      "corpus loaders read other names as plain pages)");
  }
  if ((a->pid != 0) == !a->command.empty()) {
    return UsageError("give either --pid PID or -- COMMAND ARGS...");
  }
  if (!after_text.empty() && a->command.empty()) {
    return UsageError("--after goes with -- COMMAND");
  }
  auto mappings = corpus::ParseMappingSet(mappings_text);
  if (!mappings.has_value()) {
    return UsageError("--mappings: " + mappings.error().message());
  }
  a->mappings = *mappings;
  if (!after_text.empty()) {
    auto s = ParseSeconds(after_text);
    if (!s.has_value()) return UsageError(s.error().message());
    a->after = *s;
  }
  return std::nullopt;
}

// Writes FILE.json and then FILE; prints the summary line. The exit status.
int WriteCapture(const corpus::Capture& c, const CaptureArgs& a) {
  // The sidecar first: if it cannot be written, neither file appears.
  const std::string sidecar = a.output + ".json";
  const std::string json =
      SidecarJson(c, a.output, static_cast<std::size_t>(a.max_pages));
  if (Status s = corpus::WriteFileAtomically(
          sidecar, std::as_bytes(std::span(json.data(), json.size())));
      !s.ok()) {
    return Fail("cannot write " + sidecar + ": " + s.message());
  }
  if (Status s = corpus::WritePageSet(a.output, c.pages.bytes(),
                                      static_cast<int>(a.level));
      !s.ok()) {
    ::unlink(sidecar.c_str());
    return Fail("cannot write " + a.output + ": " + s.message());
  }
  std::printf(
      "%s: %zu pages of process %d (%s), %s mappings: %llu eligible "
      "(present or swapped), %llu never touched, %s on the shared zero "
      "page; %llu zero-filled and %llu same-filled among those taken\n",
      a.output.c_str(), c.pages.size(), c.pid, c.comm.c_str(),
      std::string(corpus::MappingSetName(c.mappings)).c_str(),
      static_cast<unsigned long long>(c.eligible),
      static_cast<unsigned long long>(c.untouched),
      c.zero_page_known ? std::to_string(c.zero_page).c_str() : "unknown",
      static_cast<unsigned long long>(c.zero_filled),
      static_cast<unsigned long long>(c.same_filled));
  return 0;
}

int RunCapture(std::span<const std::string_view> all_args) {
  CaptureArgs a;
  if (auto rc = ParseCaptureArgs(all_args, &a)) return *rc;
  std::optional<Child> child;
  if (!a.command.empty()) {
    auto started = Child::Start(a.command);
    if (!started.has_value()) return Fail(started.error().message());
    child.emplace(std::move(*started));
    a.pid = child->pid();
    int status = 0;
    if (child->ExitsWithin(a.after, &status)) {
      return Fail("ESRCH: " + std::string(a.command[0]) + " exited (" +
                  ExitText(status) + ") before the capture; no corpus written");
    }
  }
  Progress progress;
  corpus::CaptureOptions options;
  options.mappings = a.mappings;
  options.max_pages = static_cast<std::size_t>(a.max_pages);
  options.on_progress = [&](std::string_view stage, std::size_t done,
                            std::size_t total) {
    progress.Update("capture " + std::to_string(a.pid) + ": " +
                    std::string(stage) + " " + std::to_string(done) + "/" +
                    std::to_string(total) + " pages");
  };
  auto c = corpus::CaptureProcess(static_cast<pid_t>(a.pid), options);
  progress.Clear();
  if (child.has_value()) child->Stop();
  if (!c.has_value()) return Fail(c.error().message());
  return WriteCapture(*c, a);
}

}  // namespace

int RunCorpusCapture(std::span<const std::string_view> args) {
  return RunCapture(args);
}

}  // namespace ztier::tool
