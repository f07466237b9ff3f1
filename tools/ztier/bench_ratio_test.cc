// File: tools/ztier/bench_ratio_test.cc
//
// `ztier bench ratio`: the built binary (ZTIER_BIN) on the checkout's
// corpora with one run: its tables, its JSON, units and the dictionary
// making lz4's pages smaller, a missing kernel device said so, and bad
// usage.
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "testing/test_util.h"

namespace ztier::tool {
namespace {

using ztier::testing::ScopedTempDir;

void ExpectIn(const std::string& text, const std::string& want) {
  EXPECT_NE(text.find(want), std::string::npos) << want << " in\n" << text;
}

// The number after `label` in `text` ("... dict / per-page: 0.96x"); -1
// when the label is missing.
double After(const std::string& text, const std::string& label) {
  const std::size_t at = text.find(label);
  if (at == std::string::npos) return -1;
  return std::strtod(text.c_str() + at + label.size(), nullptr);
}

TEST(BenchRatioTest, DictionaryAgainstPerPageOnEveryCorpus) {
  ScopedTempDir dir;
  const ztier::testing::Shell r = ztier::testing::Sh(
      "cd '" + dir.path() + "' && '" ZTIER_BIN "' bench ratio --corpus-dir '" +
      ztier::testing::CorpusDir() +
      "' --runs 1 --codec lz4 --dict-size 8K --zram-dev " + dir.File("zram9") +
      " --json out.json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  for (const char* want :
       {"machine: ", "config: codecs lz4, dictionary 8192 bytes, runs=1",
        "kernel: ", "not used", "== lz4", "per-page", "dict",
        "rand read MB/s", "seq read MB/s", "store MB/s",
        "anon-python.pages lz4 mem_used_total, dict / kernel zram: not "
        "measured"}) {
    ExpectIn(r.out, want);
  }
  for (const char* corpus : {"anon-cc1plus", "anon-python", "files-mixed"}) {
    const double ratio = After(
        r.out, std::string(corpus) + ".pages lz4 mem_used_total, dict / "
                                     "per-page: ");
    EXPECT_GT(ratio, 0.5) << corpus << "\n" << r.out;
    EXPECT_LT(ratio, 1.0) << corpus << "\n" << r.out;
    // Units of 16 with a dictionary take less than single pages.
    const double units = After(
        r.out, std::string(corpus) + ".pages lz4 mem_used_total, "
                                     "units-16+dict / per-page: ");
    EXPECT_GT(units, 0.5) << corpus << "\n" << r.out;
    EXPECT_LT(units, 1.0) << corpus << "\n" << r.out;
    EXPECT_GT(After(r.out, std::string(corpus) +
                               ".pages lz4 units-16 / per-page, sequential "
                               "read MB/s: "),
              0)
        << corpus;
  }
  std::ifstream in(dir.File("out.json"));
  std::stringstream json;
  json << in.rdbuf();
  for (const char* want :
       {"\"benchmark\": \"ztier bench ratio\"", "\"ratio_lz4\": [",
        "\"variant\": \"per-page\"", "\"variant\": \"dict\"",
        "\"variant\": \"units-4\"", "\"variant\": \"units-8\"",
        "\"variant\": \"units-16\"", "\"variant\": \"units-16+dict\"",
        "\"mem_used_total_mib_median\"", "\"rand_read_mb_s_median\""}) {
    ExpectIn(json.str(), want);
  }
}

// The median MiB of `variant`'s row for `corpus` ("anon-python.pages
// per-page    6.111 (...)"); -1 when the row is missing.
double MiB(const std::string& text, const std::string& corpus,
           const std::string& variant) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::string c, v;
    double mib = -1;
    if (words >> c >> v >> mib && c == corpus && v == variant) return mib;
  }
  return -1;
}

// --algorithm-params reaches every store: lz4 at acceleration 64 takes
// more memory for the same pages than at its default, and the config
// line says which tokens ran.
TEST(BenchRatioTest, AlgorithmParamsReachTheStores) {
  ScopedTempDir dir;
  ASSERT_EQ(
      ztier::testing::Sh("mkdir '" + dir.File("c") + "' && ln -s '" +
                         ztier::testing::CorpusDir() +
                         "/anon-python.pages.zst' '" + dir.File("c") + "/'")
          .exit_code,
      0);
  const std::string run = "'" ZTIER_BIN "' bench ratio --corpus-dir '" +
                          dir.File("c") + "' --runs 1 --codec lz4 --zram-dev " +
                          dir.File("zram9");
  const ztier::testing::Shell plain = ztier::testing::Sh(run);
  ASSERT_EQ(plain.exit_code, 0) << plain.out;
  const ztier::testing::Shell fast =
      ztier::testing::Sh(run + " --algorithm-params level=64");
  ASSERT_EQ(fast.exit_code, 0) << fast.out;
  ExpectIn(fast.out, "config: codecs lz4 with algorithm_params \"level=64\"");
  for (const char* variant : {"per-page", "units-16", "units-16+dict"}) {
    const double a = MiB(plain.out, "anon-python.pages", variant);
    const double b = MiB(fast.out, "anon-python.pages", variant);
    EXPECT_GT(a, 1) << variant << "\n" << plain.out;
    EXPECT_GT(b, a * 1.05) << variant << "\n" << fast.out;
  }
}

TEST(BenchRatioTest, BadUsage) {
  EXPECT_EQ(ztier::testing::Sh("'" ZTIER_BIN "' bench ratio --codec lz5")
                .exit_code,
            2);
  // --dict-size out of train_dict's 1K..1M is bad usage that names the
  // flag, found before any corpus is loaded.
  for (const char* size : {"1", "2M", "12Q"}) {
    const ztier::testing::Shell r = ztier::testing::Sh(
        std::string("'" ZTIER_BIN "' bench ratio --corpus-dir /nonexistent "
                    "--dict-size ") +
        size);
    EXPECT_EQ(r.exit_code, 2) << size << "\n" << r.out;
    ExpectIn(r.out, std::string("--dict-size ") + size);
  }
  const ztier::testing::Shell level = ztier::testing::Sh(
      "'" ZTIER_BIN "' bench ratio --codec zstd --algorithm-params level=99");
  EXPECT_EQ(level.exit_code, 2) << level.out;
  ExpectIn(level.out, "level");
}

}  // namespace
}  // namespace ztier::tool
