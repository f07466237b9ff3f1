// File: tools/ztier/corpus_cmd_test.cc
//
// `ztier corpus capture` end to end: the built binary (ZTIER_BIN) against
// real child processes, as root and as `nobody` (setpriv).
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include "corpus/corpus.h"
#include "testing/sleeping_child.h"
#include "testing/test_util.h"

namespace {

namespace fs = std::filesystem;
using ztier::testing::Sh;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

using ztier::testing::SleepingChild;

class CorpusCaptureCliTest : public ::testing::Test {
 protected:
  std::string Ztier(const std::string& args) {
    return std::string("'" ZTIER_BIN "' ") + args;
  }
  ztier::testing::ScopedTempDir dir_;
};

TEST_F(CorpusCaptureCliTest, PidWritesCorpusAndSidecar) {
  SleepingChild child;
  const std::string out = dir_.File("sleep.pages.zst");
  auto r = Sh(Ztier("corpus capture --pid " + std::to_string(child.pid()) +
                    " --level 3 -o " + out));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("pages of process " + std::to_string(child.pid()) +
                       " (sleep)"),
            std::string::npos)
      << r.out;
  auto set = ztier::corpus::LoadPageSet(out);
  ASSERT_TRUE(set.has_value()) << set.error().ToString();
  EXPECT_GT(set->size(), 0u);
  EXPECT_LE(set->size(), 4096u);
  const std::string json = ReadFile(out + ".json");
  EXPECT_NE(json.find("\"comm\": \"sleep\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"pages\": " + std::to_string(set->size())),
            std::string::npos);
  EXPECT_NE(json.find("\"mappings_set\": \"anon\""), std::string::npos);
  EXPECT_NE(json.find("\"untouched\": "), std::string::npos);
  // --max-pages caps it.
  r = Sh(Ztier("corpus capture --pid " + std::to_string(child.pid()) +
               " --max-pages 3 --level 1 -o " + out));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  set = ztier::corpus::LoadPageSet(out);
  ASSERT_TRUE(set.has_value());
  EXPECT_EQ(set->size(), 3u);
}

TEST_F(CorpusCaptureCliTest, CommandFormCapturesAndStopsIt) {
  const std::string out = dir_.File("cmd.pages.zst");
  auto r = Sh(Ztier("corpus capture --after 0.3 --level 1 -o " + out +
                    " -- sleep 301"));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  std::smatch m;
  ASSERT_TRUE(
      std::regex_search(r.out, m, std::regex("process (\\d+) \\(sleep\\)")))
      << r.out;
  EXPECT_TRUE(fs::exists(out));
  // The command was stopped and reaped: its pid is gone (or another's).
  EXPECT_NE(ztier::testing::CommOf(std::stoi(m[1])), "sleep\n");
}

TEST_F(CorpusCaptureCliTest, CommandThatExitsFirstLeavesNoFile) {
  const std::string out = dir_.File("gone.pages.zst");
  auto r = Sh(Ztier("corpus capture --after 0.5 -o " + out + " -- true"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("ESRCH: true exited (exit status 0) before the "
                       "capture; no corpus written"),
            std::string::npos)
      << r.out;
  EXPECT_FALSE(fs::exists(out));
  EXPECT_FALSE(fs::exists(out + ".json"));
}

// What the command starts is stopped with it: a shell's background job
// does not outlive the capture.
TEST_F(CorpusCaptureCliTest, CommandsChildrenAreStoppedToo) {
  const std::string out = dir_.File("kids.pages.zst");
  const std::string pidfile = dir_.File("kid.pid");
  auto r = Sh(Ztier("corpus capture --after 0.5 --level 1 -o " + out +
                    " -- sh -c 'sleep 301.25 >/dev/null 2>&1 & echo $! > " +
                    pidfile + "; wait'"));
  EXPECT_EQ(r.exit_code, 0) << r.out;
  const std::string kid = ReadFile(pidfile);
  ASSERT_FALSE(kid.empty()) << "the shell did not start its job in 0.5 s";
  const pid_t pid = std::stoi(kid);
  // Gone, or a zombie of its new parent's (no cmdline).
  const std::string cmdline =
      ReadFile("/proc/" + std::to_string(pid) + "/cmdline");
  const bool alive = cmdline.find("301.25") != std::string::npos;
  if (alive) ::kill(pid, SIGKILL);
  EXPECT_FALSE(alive) << "sleep " << pid << " outlived the capture";
}

// A command that is stopped (here by itself; by SIGTTIN when it reads the
// terminal from its background group) is continued after the SIGTERM, so
// that it acts on it, as its handler shows; the old code left it pending
// until the SIGKILL 5 s later.
TEST_F(CorpusCaptureCliTest, AStoppedCommandGetsItsSigterm) {
  const std::string out = dir_.File("stopped.pages.zst");
  const std::string mark = dir_.File("term");
  auto r = Sh(Ztier("corpus capture --after 0.3 --level 1 -o " + out +
                    " -- sh -c 'trap \"echo term > " + mark +
                    "; exit 0\" TERM; kill -STOP $$; while :; do sleep "
                    "0.1; done'"));
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(ReadFile(mark), "term\n");
}

// A command that exits at once fails the capture at once, not after the
// whole of --after.
TEST_F(CorpusCaptureCliTest, CommandThatExitsFirstFailsWithoutWaiting) {
  const std::string out = dir_.File("quick.pages.zst");
  const auto start = std::chrono::steady_clock::now();
  auto r = Sh(Ztier("corpus capture --after 90 -o " + out + " -- false"));
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("ESRCH: false exited (exit status 1) before the "
                       "capture; no corpus written"),
            std::string::npos)
      << r.out;
  EXPECT_LT(took, std::chrono::seconds(45));
  EXPECT_FALSE(fs::exists(out));
}

TEST_F(CorpusCaptureCliTest, NoSuchProcess) {
  pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  ::waitpid(pid, nullptr, 0);
  const std::string out = dir_.File("none.pages.zst");
  auto r =
      Sh(Ztier("corpus capture --pid " + std::to_string(pid) + " -o " + out));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("ESRCH: no process " + std::to_string(pid)),
            std::string::npos)
      << r.out;
  EXPECT_FALSE(fs::exists(out));
}

// A process that has exited but is not yet reaped is there, without memory.
TEST_F(CorpusCaptureCliTest, ZombieIsNotAMissingProcess) {
  pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  ASSERT_GT(pid, 0);
  siginfo_t info{};  // wait for its exit, leaving it a zombie
  ASSERT_EQ(::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOWAIT),
            0);
  const std::string out = dir_.File("zombie.pages.zst");
  auto r =
      Sh(Ztier("corpus capture --pid " + std::to_string(pid) + " -o " + out));
  ::waitpid(pid, nullptr, 0);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("ESRCH: process " + std::to_string(pid) +
                       " has exited (a zombie)"),
            std::string::npos)
      << r.out;
  EXPECT_FALSE(fs::exists(out));
}

// As `nobody`, root's process may not be read: EPERM, and no file.
TEST_F(CorpusCaptureCliTest, WithoutPermissionIsEperm) {
  ASSERT_EQ(::geteuid(), 0u) << "this test needs root (to drop to nobody)";
  ASSERT_TRUE(ztier::testing::Have("setpriv"));
  // nobody must reach the binary and a folder it may write to.
  ASSERT_EQ(::chmod(dir_.path().c_str(), 0777), 0);
  const std::string bin = dir_.File("ztier");
  fs::copy_file(ZTIER_BIN, bin);
  ASSERT_EQ(::chmod(bin.c_str(), 0755), 0);
  SleepingChild child;
  const std::string out = dir_.File("denied.pages.zst");
  auto r = Sh("setpriv --reuid=nobody --regid=nogroup --clear-groups '" + bin +
              "' corpus capture --pid " + std::to_string(child.pid()) + " -o " +
              out);
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("EPERM: not permitted to read the memory of process " +
                       std::to_string(child.pid()) + " (owned by uid 0)"),
            std::string::npos)
      << r.out;
  EXPECT_FALSE(fs::exists(out));
  EXPECT_FALSE(fs::exists(out + ".json"));
}

TEST_F(CorpusCaptureCliTest, UnwritableOutputLeavesNothing) {
  SleepingChild child;
  // A missing folder is a usage error, found before the capture.
  const std::string out = dir_.File("no/such/dir/x.pages.zst");
  // (-oFILE, getopt's form, is -o FILE.)
  auto r = Sh(Ztier("corpus capture --pid " + std::to_string(child.pid()) +
                    " -o" + out));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.out.find("no folder " + dir_.File("no/such/dir")),
            std::string::npos)
      << r.out;
  EXPECT_TRUE(fs::is_empty(dir_.path()));
  // A FILE that cannot be written (a folder is there) leaves no sidecar.
  const std::string taken = dir_.File("taken.pages.zst");
  fs::create_directory(taken);
  r = Sh(Ztier("corpus capture --pid " + std::to_string(child.pid()) + " -o " +
               taken));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("cannot write " + taken + ":"), std::string::npos)
      << r.out;
  EXPECT_FALSE(fs::exists(taken + ".json"));
}

// A corpus named otherwise than *.zst would be loaded (estimate, the
// benchmarks) as plain pages: its compressed bytes.
TEST_F(CorpusCaptureCliTest, OutputMustBeNamedZst) {
  SleepingChild child;
  const std::string out = dir_.File("sleep.corpus");
  auto r = Sh(Ztier("corpus capture --pid " + std::to_string(child.pid()) +
                    " --level 1 -o " + out));
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("FILE.pages.zst"), std::string::npos) << r.out;
  EXPECT_TRUE(fs::is_empty(dir_.path()));
}

TEST_F(CorpusCaptureCliTest, UsageErrors) {
  for (const char* args :
       {"corpus capture -o x.pages.zst", "corpus capture --pid 1",
        "corpus capture --pid 1 -o x.pages.zst -- sleep 1",
        "corpus capture --after 1 --pid 1 -o x.pages.zst",
        "corpus capture --pid 1 -o x.pages.zst --mappings heap",
        "corpus capture --after -1 -o x.pages.zst -- sleep 1",
        "corpus frobnicate"}) {
    auto r = Sh(Ztier(args));
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.out;
    EXPECT_NE(r.out.find("--help"), std::string::npos) << args << "\n" << r.out;
  }
  auto help = Sh(Ztier("corpus capture --help"));
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("--mappings anon|file|all"), std::string::npos);
}

}  // namespace
