// corpus_test.cc: loading the testdata/ corpora and plain files as pages.
#include "corpus/corpus.h"

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <new>
#include <string>

#include "testing/test_util.h"

namespace ztier::corpus {
namespace {

std::string TempPath(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          (name + "." + std::to_string(::getpid())))
      .string();
}

void WriteFile(const std::string& path, const std::string& data) {
  std::ofstream f(path, std::ios::binary);
  f.write(data.data(), static_cast<std::streamsize>(data.size()));
}

TEST(CorpusTest, NameDropsFolderAndZst) {
  EXPECT_EQ(CorpusName("/a/b/anon-python.pages.zst"), "anon-python.pages");
  EXPECT_EQ(CorpusName("plain.bin"), "plain.bin");
}

TEST(CorpusTest, FindsTheTestdataCorpora) {
  auto files = FindCorpusFiles(testing::CorpusDir());
  ASSERT_TRUE(files.has_value()) << files.error().ToString();
  ASSERT_EQ(files->size(), 3u);
  EXPECT_EQ(CorpusName((*files)[0]), "anon-cc1plus.pages");
  EXPECT_EQ(CorpusName((*files)[1]), "anon-python.pages");
  EXPECT_EQ(CorpusName((*files)[2]), "files-mixed.pages");
}

TEST(CorpusTest, MissingFolderIsNotFound) {
  auto files = FindCorpusFiles("/nonexistent/ztier-corpus");
  ASSERT_FALSE(files.has_value());
  EXPECT_EQ(files.error().code(), StatusCode::kNotFound);
}

TEST(CorpusTest, LoadsEveryCorpusAs4096Pages) {
  auto files = FindCorpusFiles(testing::CorpusDir());
  ASSERT_TRUE(files.has_value());
  for (const std::string& path : *files) {
    auto set = LoadPageSet(path);
    ASSERT_TRUE(set.has_value()) << set.error().ToString();
    EXPECT_EQ(set->size(), 4096u) << path;
    EXPECT_EQ(set->bytes().size(), 4096u * kPageSize);
    EXPECT_EQ(set->name(), CorpusName(path));
  }
}

TEST(CorpusTest, PlainFileIsZeroPadded) {
  const std::string path = TempPath("ztier_corpus_plain");
  WriteFile(path, std::string(kPageSize + 10, 'x'));
  auto set = LoadPageSet(path);
  std::remove(path.c_str());
  ASSERT_TRUE(set.has_value()) << set.error().ToString();
  ASSERT_EQ(set->size(), 2u);
  EXPECT_EQ(set->page(1)[9], std::byte{'x'});
  EXPECT_EQ(set->page(1)[10], std::byte{0});
  EXPECT_EQ(set->page(1)[kPageSize - 1], std::byte{0});
}

TEST(CorpusTest, ErrorsNameThePath) {
  auto missing = LoadPageSet("/nonexistent/x.pages.zst");
  ASSERT_FALSE(missing.has_value());
  EXPECT_EQ(missing.error().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.error().message().find("/nonexistent/x"),
            std::string::npos);

  const std::string empty = TempPath("ztier_corpus_empty");
  WriteFile(empty, "");
  auto e = LoadPageSet(empty);
  std::remove(empty.c_str());
  EXPECT_FALSE(e.has_value());

  const std::string bad = TempPath("ztier_corpus_bad") + ".zst";
  WriteFile(bad, "this is not a zstd frame");
  auto b = LoadPageSet(bad);
  std::remove(bad.c_str());
  ASSERT_FALSE(b.has_value());
  EXPECT_EQ(b.error().code(), StatusCode::kCorruption);
}

TEST(CorpusTest, TruncatedFrameIsCorruption) {
  auto files = FindCorpusFiles(testing::CorpusDir());
  ASSERT_TRUE(files.has_value());
  std::ifstream in((*files)[0], std::ios::binary);
  std::string head(100000, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  const std::string path = TempPath("ztier_corpus_trunc") + ".zst";
  WriteFile(path, head);
  auto set = LoadPageSet(path);
  std::remove(path.c_str());
  ASSERT_FALSE(set.has_value());
  EXPECT_EQ(set.error().code(), StatusCode::kCorruption);
}

// A frame header is the file's word: one that claims 4 GiB of content, with
// no blocks behind it, is a corrupt file, not a 4 GiB allocation. Loaded in
// a child whose address space has 1 GiB to spare: presizing the output to
// the claim fails there (std::bad_alloc, an abort), reading it does not.
TEST(CorpusTest, ContentSizeClaimIsNotAllocated) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "RLIMIT_AS and a sanitizer's shadow do not mix";
#endif
  const std::string path = TempPath("ztier_corpus_claim") + ".zst";
  // Magic, then a descriptor of one segment and an 8-byte content size.
  std::string frame = "\x28\xb5\x2f\xfd\xe0";
  const std::uint64_t claim = std::uint64_t{1} << 32;
  for (int i = 0; i < 8; ++i) frame += static_cast<char>(claim >> (8 * i));
  WriteFile(path, frame);
  // The address space in use now, in pages (/proc/self/statm's first word).
  std::uint64_t vm_pages = 0;
  std::ifstream("/proc/self/statm") >> vm_pages;
  ASSERT_GT(vm_pages, 0u);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const rlim_t spare = rlim_t{1} << 30;
    const rlim_t limit = vm_pages * ::sysconf(_SC_PAGESIZE) + spare;
    const rlimit rl{limit, limit};
    if (::setrlimit(RLIMIT_AS, &rl) != 0) ::_exit(3);
    try {
      auto set = LoadPageSet(path);
      ::_exit(!set.has_value() && set.error().code() == StatusCode::kCorruption
                  ? 0
                  : 1);
    } catch (const std::bad_alloc&) {
      ::_exit(2);
    }
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  std::remove(path.c_str());
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "child status " << status << " (exit status 2: std::bad_alloc)";
}

}  // namespace
}  // namespace ztier::corpus
