// Helpers shared by ztier's tests.
#ifndef ZTIER_TESTING_TEST_UTIL_H_
#define ZTIER_TESTING_TEST_UTIL_H_

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>  // environ (_GNU_SOURCE)

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "corpus/corpus.h"
#include "ztier/status.h"

// Keep tests strong even in builds without assertions: assert() follows
// NDEBUG as it is where <cassert> is included, and <cassert> may be included
// again (C11 7.2, [assertions]), so undefining NDEBUG takes effect only with
// the include after it; gtest and the headers above have included it.
#undef NDEBUG
#include <cassert>

#define ASSERT_OK(expr)                                        \
  do {                                                         \
    const ::ztier::Status zt_s_ = (expr);                      \
    ASSERT_TRUE(zt_s_.ok()) << #expr << ": " << zt_s_.ToString(); \
  } while (0)
#define EXPECT_OK(expr)                                        \
  do {                                                         \
    const ::ztier::Status zt_s_ = (expr);                      \
    EXPECT_TRUE(zt_s_.ok()) << #expr << ": " << zt_s_.ToString(); \
  } while (0)

namespace ztier::testing {

// The corpus folder: the checkout's testdata/, or the value of
// $ZTIER_CORPUS_DIR when set.
inline std::string CorpusDir() {
  const char* env = std::getenv("ZTIER_CORPUS_DIR");
  return env != nullptr ? env : ZTIER_CORPUS_DIR;
}

// Prints why the test data is unusable and ends the test binary with status
// 1: a test without its data fails with this message, never on garbage.
[[noreturn]] inline void CorpusMissing(const std::string& why) {
  std::fprintf(stderr,
               "test data missing: %s\n(the corpora are the checkout's "
               "testdata/*.pages.zst; $ZTIER_CORPUS_DIR overrides the "
               "folder)\n",
               why.c_str());
  std::exit(1);
}

// Every corpus of CorpusDir(), sorted by name, loaded once per process.
inline const std::vector<corpus::PageSet>& TestCorpora() {
  static const std::vector<corpus::PageSet>* sets = [] {
    auto files = corpus::FindCorpusFiles(CorpusDir());
    if (!files.has_value()) CorpusMissing(files.error().ToString());
    auto* v = new std::vector<corpus::PageSet>;
    for (const std::string& f : *files) {
      auto set = corpus::LoadPageSet(f);
      if (!set.has_value()) CorpusMissing(set.error().ToString());
      v->push_back(std::move(*set));
    }
    return v;
  }();
  return *sets;
}

// The corpus `name` ("anon-python") of TestCorpora().
inline const corpus::PageSet& TestCorpus(const std::string& name) {
  for (const corpus::PageSet& set : TestCorpora()) {
    if (set.name() == name + ".pages") return set;
  }
  CorpusMissing("no " + name + ".pages.zst in " + CorpusDir());
}

// A fresh directory under $TMPDIR (or /tmp), removed with everything in it
// when the object dies.
class ScopedTempDir {
 public:
  ScopedTempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base != nullptr ? base : "/tmp") +
                       "/ztier-test-XXXXXX";
    if (mkdtemp(tmpl.data()) == nullptr) std::abort();
    path_ = tmpl;
  }
  ~ScopedTempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScopedTempDir(const ScopedTempDir&) = delete;
  ScopedTempDir& operator=(const ScopedTempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// The exit status and output (stdout and stderr together) of a shell
// command; exit_code is -1 when it did not exit normally.
struct Shell {
  int exit_code = -1;
  std::string out;
};

inline Shell Sh(const std::string& cmd) {
  Shell r;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  std::size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) r.out.append(buf, n);
  const int st = pclose(p);
  if (st != -1 && WIFEXITED(st)) r.exit_code = WEXITSTATUS(st);
  return r;
}

// Starts args[0] with `args` in the background, its stdout and stderr going
// to `log_path` (created, mode 0600); returns its pid, or -1.
inline pid_t SpawnWithLog(std::vector<std::string> args,
                          const std::string& log_path) {
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  pid_t pid = -1;
  if (posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ) != 0) {
    pid = -1;
  }
  posix_spawn_file_actions_destroy(&fa);
  return pid;
}

// True when `prog` is found on $PATH. Under CI=true (.ci/run), where `make
// deps` has installed every program the tests use, a missing one also fails
// the test, so that a test skipped for want of it does not pass unseen;
// `optional` programs (not in `make deps`) are exempt.
inline bool Have(const std::string& prog, bool optional = false) {
  const bool have = Sh("command -v " + prog + " >/dev/null").exit_code == 0;
  const char* ci = std::getenv("CI");
  if (!have && !optional && ci != nullptr && std::string(ci) == "true") {
    ADD_FAILURE() << prog << " is not installed; `make deps` installs it";
  }
  return have;
}

}  // namespace ztier::testing

#endif  // ZTIER_TESTING_TEST_UTIL_H_
