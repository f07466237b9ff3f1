// capture_test.cc: capturing the pages of a real child process.
#include "corpus/capture.h"

#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <set>
#include <string>

#include "testing/test_util.h"

namespace ztier::corpus {
namespace {

constexpr std::uint64_t kMagic = 0x7a74696500000000ull;  // "ztie"

// Page i of the pattern: word w holds kMagic | i << 12 | w, so every page
// differs from every other and from anything else in the process.
void FillPatternPage(std::byte* page, std::uint64_t i) {
  for (std::uint64_t w = 0; w < kPageSize / 8; ++w) {
    const std::uint64_t v = kMagic | i << 12 | w;
    std::memcpy(page + w * 8, &v, 8);
  }
}

// The pattern index of a captured page, or -1 when it is not one.
std::int64_t PatternIndex(const std::byte* page) {
  std::uint64_t first;
  std::memcpy(&first, page, 8);
  if ((first & 0xffffffff00000000ull) != kMagic) return -1;
  const std::uint64_t i = (first >> 12) & 0xfffff;
  std::vector<std::byte> want(kPageSize);
  FillPatternPage(want.data(), i);
  return std::memcmp(page, want.data(), kPageSize) == 0
             ? static_cast<std::int64_t>(i)
             : -1;
}

// A forked copy of a sanitizer-built test keeps the sanitizer's shadow
// mappings: terabytes of private anonymous address space, mostly never
// touched, which CaptureProcess walks through /proc/PID/pagemap 8 bytes a
// page (minutes under ASan, more under TSan). The tests that capture such a
// child run in the plain build only; the ones on exec'd children run in all.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SKIP_UNDER_SANITIZERS() \
  GTEST_SKIP() << "a sanitizer's shadow mappings make this capture take minutes"
#else
#define SKIP_UNDER_SANITIZERS() (void)0
#endif

// A child that writes the pattern into `pattern_pages` pages of a fresh
// anonymous mapping, maps `untouched_pages` more that it never touches (past
// a PROT_NONE page, so that the kernel keeps them a mapping of their own),
// tells the parent both addresses and then waits until it is killed.
class PatternChild {
 public:
  PatternChild(std::size_t pattern_pages, std::size_t untouched_pages) {
    int ready[2];
    if (::pipe(ready) != 0) std::abort();
    pid_ = ::fork();
    if (pid_ == 0) {
      ::close(ready[0]);
      void* p = ::mmap(nullptr, (pattern_pages + 1 + untouched_pages) * kPageSize,
                       PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                       -1, 0);
      if (p == MAP_FAILED) ::_exit(1);
      char* guard = static_cast<char*>(p) + pattern_pages * kPageSize;
      if (::mprotect(guard, kPageSize, PROT_NONE) != 0) ::_exit(1);
      void* q = guard + kPageSize;
      // Huge pages would make the untouched neighbours of a touched page
      // present too.
      ::madvise(p, pattern_pages * kPageSize, MADV_NOHUGEPAGE);
      ::madvise(q, untouched_pages * kPageSize, MADV_NOHUGEPAGE);
      for (std::size_t i = 0; i < pattern_pages; ++i) {
        FillPatternPage(static_cast<std::byte*>(p) + i * kPageSize, i);
      }
      const std::uint64_t addrs[2] = {reinterpret_cast<std::uint64_t>(p),
                                      reinterpret_cast<std::uint64_t>(q)};
      if (::write(ready[1], addrs, sizeof(addrs)) != sizeof(addrs)) ::_exit(1);
      for (;;) ::pause();
    }
    ::close(ready[1]);
    std::uint64_t addrs[2] = {0, 0};
    std::size_t got = 0;
    while (got < sizeof(addrs)) {
      const ssize_t r = ::read(ready[0], reinterpret_cast<char*>(addrs) + got,
                               sizeof(addrs) - got);
      if (r <= 0) break;
      got += static_cast<std::size_t>(r);
    }
    ::close(ready[0]);
    pattern_ = addrs[0];
    untouched_ = addrs[1];
  }
  ~PatternChild() { Kill(); }

  void Kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  pid_t pid() const { return pid_; }
  std::uint64_t pattern() const { return pattern_; }
  std::uint64_t untouched() const { return untouched_; }

 private:
  pid_t pid_ = -1;
  std::uint64_t pattern_ = 0;
  std::uint64_t untouched_ = 0;
};

TEST(CaptureTest, EveryPatternPageIsFoundAndUntouchedPagesAreNot) {
  SKIP_UNDER_SANITIZERS();
  constexpr std::size_t kPatternPages = 8 << 20 >> 12;  // 8 MiB
  constexpr std::size_t kUntouchedPages = 4 << 20 >> 12;
  PatternChild child(kPatternPages, kUntouchedPages);
  ASSERT_NE(child.pattern(), 0u);
  auto c = CaptureProcess(child.pid(), {.max_pages = 1 << 20});
  ASSERT_TRUE(c.has_value()) << c.error().ToString();

  std::set<std::int64_t> found;
  for (std::size_t i = 0; i < c->pages.size(); ++i) {
    const std::int64_t k = PatternIndex(c->pages.page(i).data());
    if (k >= 0) found.insert(k);
  }
  EXPECT_EQ(found.size(), kPatternPages);
  EXPECT_EQ(c->pages.size(), c->eligible - c->vanished);
  bool saw_untouched = false;
  bool saw_pattern = false;
  for (const CapturedMapping& m : c->considered) {
    if (m.start <= child.untouched() && child.untouched() < m.end) {
      saw_untouched = true;
      EXPECT_EQ(m.taken, 0u) << "a never-touched page was captured";
      EXPECT_EQ(m.present + m.swapped, 0u);
    }
    if (m.start <= child.pattern() && child.pattern() < m.end) {
      saw_pattern = true;
      EXPECT_GE(m.taken, kPatternPages);
    }
  }
  EXPECT_TRUE(saw_untouched);
  EXPECT_TRUE(saw_pattern);
  EXPECT_GE(c->untouched, kUntouchedPages);
  EXPECT_EQ(c->pid, child.pid());
  EXPECT_FALSE(c->comm.empty());
}

TEST(CaptureTest, MaxPagesTakesAnEvenSample) {
  SKIP_UNDER_SANITIZERS();
  constexpr std::size_t kPatternPages = 4096;
  PatternChild child(kPatternPages, 16);
  auto c = CaptureProcess(child.pid(), {.max_pages = 512});
  ASSERT_TRUE(c.has_value()) << c.error().ToString();
  EXPECT_EQ(c->pages.size(), 512u);
  EXPECT_GT(c->eligible, 4096u);
  // The pattern is most of the process, so most of the sample, and spread
  // over it: its pages are about eligible/512 apart.
  std::set<std::int64_t> found;
  for (std::size_t i = 0; i < c->pages.size(); ++i) {
    const std::int64_t k = PatternIndex(c->pages.page(i).data());
    if (k >= 0) found.insert(k);
  }
  EXPECT_GT(found.size(), 256u);
  ASSERT_FALSE(found.empty());
  EXPECT_LT(*found.begin(), 64);
  EXPECT_GT(*found.rbegin(), static_cast<std::int64_t>(kPatternPages) - 64);
}

TEST(CaptureTest, ProcessExitingMidCaptureIsACleanError) {
  SKIP_UNDER_SANITIZERS();
  PatternChild child(1024, 16);
  bool killed = false;
  CaptureOptions options;
  options.on_progress = [&](std::string_view stage, std::size_t, std::size_t) {
    if (stage == "pagemap" && !killed) {
      child.Kill();  // SIGKILL and reap: the process is gone before the reads
      killed = true;
    }
  };
  auto c = CaptureProcess(child.pid() > 0 ? child.pid() : 1, options);
  ASSERT_TRUE(killed);
  ASSERT_FALSE(c.has_value());
  EXPECT_EQ(c.error().code(), StatusCode::kNotFound);
  EXPECT_NE(c.error().message().find("exited during capture"),
            std::string::npos)
      << c.error().message();
}

TEST(CaptureTest, NoSuchProcess) {
  pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  ASSERT_GT(pid, 0);
  ::waitpid(pid, nullptr, 0);  // reaped: the pid names no process now
  auto c = CaptureProcess(pid, {});
  ASSERT_FALSE(c.has_value());
  EXPECT_EQ(c.error().code(), StatusCode::kNotFound);
  EXPECT_NE(c.error().message().find("ESRCH"), std::string::npos);
}

TEST(CaptureTest, FileMappingsAreTheirOwnSet) {
  SKIP_UNDER_SANITIZERS();
  PatternChild child(64, 16);
  auto anon = CaptureProcess(child.pid(), {.mappings = MappingSet::kAnon,
                                           .max_pages = 1 << 20});
  auto file = CaptureProcess(child.pid(), {.mappings = MappingSet::kFile,
                                           .max_pages = 1 << 20});
  ASSERT_TRUE(anon.has_value()) << anon.error().ToString();
  ASSERT_TRUE(file.has_value()) << file.error().ToString();
  for (const CapturedMapping& m : file->considered) {
    EXPECT_FALSE(m.name.empty());
    EXPECT_FALSE(m.name.starts_with("["));
  }
  for (const CapturedMapping& m : anon->considered) {
    EXPECT_EQ(m.perms[3], 'p');
    EXPECT_TRUE(m.name.empty() || m.name.starts_with("[")) << m.name;
  }
  // The test binary's own code is a file mapping; no pattern page is in it.
  for (std::size_t i = 0; i < file->pages.size(); ++i) {
    EXPECT_LT(PatternIndex(file->pages.page(i).data()), 0);
  }
}

TEST(CaptureTest, MapsLines) {
  CapturedMapping m;
  ASSERT_TRUE(ParseMapsLine(
      "7f0000000000-7f0000003000 rw-p 00000000 00:00 0 ", &m));
  EXPECT_EQ(m.start, 0x7f0000000000u);
  EXPECT_EQ(m.end, 0x7f0000003000u);
  EXPECT_EQ(m.perms, "rw-p");
  EXPECT_EQ(m.name, "");
  EXPECT_TRUE(InMappingSet(m, MappingSet::kAnon));
  EXPECT_FALSE(InMappingSet(m, MappingSet::kFile));
  ASSERT_TRUE(ParseMapsLine("55d0a000-55d0b000 r-xp 00001000 fe:01 123   "
                            "/usr/bin/my prog",
                            &m));
  EXPECT_EQ(m.name, "/usr/bin/my prog");
  EXPECT_TRUE(InMappingSet(m, MappingSet::kFile));
  EXPECT_FALSE(InMappingSet(m, MappingSet::kAnon));
  EXPECT_TRUE(InMappingSet(m, MappingSet::kAll));
  ASSERT_TRUE(ParseMapsLine("1000-2000 rw-p 0 00:00 0 [heap]", &m));
  EXPECT_TRUE(InMappingSet(m, MappingSet::kAnon));
  ASSERT_TRUE(ParseMapsLine("1000-2000 r--p 0 00:00 0 [vvar]", &m));
  EXPECT_FALSE(InMappingSet(m, MappingSet::kAll));
  ASSERT_TRUE(ParseMapsLine("1000-2000 ---p 0 00:00 0", &m));
  EXPECT_FALSE(InMappingSet(m, MappingSet::kAll));  // a guard page
  EXPECT_FALSE(ParseMapsLine("1000-0800 rw-p 0 00:00 0", &m));
  EXPECT_FALSE(ParseMapsLine("garbage", &m));
  EXPECT_FALSE(ParseMapsLine("1000-2000 rw-p", &m));
}

TEST(CaptureTest, WrittenCorpusLoadsBackAndFailsWhole) {
  testing::ScopedTempDir dir;
  std::vector<std::byte> pages(3 * kPageSize);
  for (std::size_t i = 0; i < 3; ++i) FillPatternPage(&pages[i * kPageSize], i);
  const std::string path = dir.File("p.pages.zst");
  ASSERT_OK(WritePageSet(path, pages, 3));
  auto back = LoadPageSet(path);
  ASSERT_TRUE(back.has_value()) << back.error().ToString();
  ASSERT_EQ(back->size(), 3u);
  EXPECT_EQ(std::memcmp(back->bytes().data(), pages.data(), pages.size()), 0);
  // `zstd -d` reads it as well (the format is plain zstd).
  ASSERT_TRUE(testing::Have("zstd"));
  const std::string raw = dir.File("raw");
  ASSERT_OK(WriteFileAtomically(raw, pages));
  auto r = testing::Sh("zstd -q -d -c " + path + " | cmp - " + raw);
  EXPECT_EQ(r.exit_code, 0) << r.out;
  // A folder that does not exist: an error, and nothing is left anywhere.
  const Status s = WritePageSet(dir.File("no/such/dir/x.pages.zst"), pages);
  EXPECT_FALSE(s.ok());
  EXPECT_FALSE(WritePageSet(path, {}).ok());
  std::size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
    (void)e;
    ++files;
  }
  EXPECT_EQ(files, 2u);  // p.pages.zst and raw: no temporary file left
}

}  // namespace
}  // namespace ztier::corpus
