// File: tools/ztier/estimate_cmd_test.cc
//
// `ztier estimate`: its figures equal `ztier bench engine`'s on every
// testdata/ corpus (the built binary, ZTIER_BIN, both ways, compared through
// their JSON), --pid on a real child, the usage errors, and Recommend().
#include "estimate_cmd.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <map>
#include <sstream>
#include <string>
#include <utility>

#include "testing/sleeping_child.h"
#include "testing/test_util.h"

namespace ztier::tool {
namespace {

using ztier::testing::Sh;

std::string Ztier(const std::string& args) {
  return std::string("'" ZTIER_BIN "' ") + args;
}

// "codec corpus ratio mem_used_total" lines from a JSON file, by python3's
// json module: `expr` turns the document `d` into those tuples.
std::map<std::pair<std::string, std::string>, std::pair<double, double>>
ReadFigures(const std::string& path, const std::string& expr) {
  const auto r = Sh("/usr/bin/python3 -c 'import json,sys\n"
                    "d = json.load(open(sys.argv[1]))\n"
                    "for c, n, ratio, mem in " + expr + ":\n"
                    "    print(c, n, ratio, mem)' " + path);
  EXPECT_EQ(r.exit_code, 0) << r.out;
  std::map<std::pair<std::string, std::string>, std::pair<double, double>> m;
  std::istringstream in(r.out);
  std::string codec, corpus;
  double ratio, mem;
  while (in >> codec >> corpus >> ratio >> mem) {
    m[{codec, corpus}] = {ratio, mem};
  }
  return m;
}

TEST(EstimateCliTest, SameRatioAndMemUsedAsBenchEngine) {
  ASSERT_TRUE(ztier::testing::Have("/usr/bin/python3"));
  ztier::testing::ScopedTempDir dir;
  const std::string corpora = ztier::testing::CorpusDir();
  auto files = corpus::FindCorpusFiles(corpora);
  ASSERT_TRUE(files.has_value()) << files.error().ToString();
  ASSERT_EQ(files->size(), 3u);
  std::string corpus_flags;
  for (const std::string& f : *files) corpus_flags += " --corpus " + f;

  const std::string bench_json = dir.File("bench.json");
  auto b = Sh(Ztier("bench engine --corpus-dir " + corpora +
                    " --codec lz4,zstd,lzo --runs 1 --threads 1 --json " +
                    bench_json));
  ASSERT_EQ(b.exit_code, 0) << b.out;
  const std::string est_json = dir.File("estimate.json");
  auto e = Sh(Ztier("estimate" + corpus_flags +
                    " --codec lz4 --codec zstd --codec lzo --runs 1 --json " +
                    est_json));
  ASSERT_EQ(e.exit_code, 0) << e.out;
  EXPECT_NE(e.out.find("recommended: "), std::string::npos) << e.out;

  const auto bench = ReadFigures(
      bench_json,
      "[(s[\"codec\"], s[\"corpus\"], s[\"ratio\"], "
      "s[\"mem_used_mib\"] * 1048576) for s in d[\"tables\"][\"sizes\"]]");
  const auto est = ReadFigures(
      est_json,
      "[(r[\"codec\"], c[\"name\"], r[\"ratio\"], r[\"mem_used_total\"]) "
      "for c in d[\"corpora\"] for r in c[\"results\"]]");
  ASSERT_EQ(bench.size(), 9u);
  ASSERT_EQ(est.size(), 9u);
  for (const auto& [key, want] : bench) {
    const auto it = est.find(key);
    ASSERT_NE(it, est.end()) << key.first << " " << key.second;
    const auto [ratio, mem] = it->second;
    EXPECT_LE(std::abs(ratio - want.first), 0.001 * want.first)
        << key.first << " " << key.second << ": ratio " << ratio << " vs "
        << want.first;
    // bench engine gives mem_used in MiB to 2 decimals.
    EXPECT_LE(std::abs(mem - want.second), 0.001 * want.second + 5243)
        << key.first << " " << key.second << ": mem_used_total " << mem
        << " vs " << want.second;
  }
}

TEST(EstimateCliTest, PidOfARealProcess) {
  testing::Shell r;
  pid_t pid = -1;
  {
    testing::SleepingChild child;
    pid = child.pid();
    r = Sh(Ztier("estimate --pid " + std::to_string(pid) +
                 " --codec lz4 --runs 1"));
  }
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("process " + std::to_string(pid) + " (sleep)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("lz4"), std::string::npos);
}

TEST(EstimateCliTest, UsageErrors) {
  const std::string corpus =
      ztier::testing::CorpusDir() + "/anon-python.pages.zst";
  for (const std::string& args :
       {std::string("estimate"), "estimate --pid 1 --corpus " + corpus,
        "estimate --corpus " + corpus + " --codec zstd:99",
        "estimate --corpus " + corpus + " --codec lz5",
        "estimate --corpus " + corpus + " --codec zstd:x",
        "estimate --corpus " + corpus + " --max-pages 5"}) {
    auto r = Sh(Ztier(args));
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.out;
    EXPECT_NE(r.out.find("--help"), std::string::npos) << r.out;
  }
  auto missing = Sh(Ztier("estimate --corpus /nonexistent.pages.zst"));
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.out.find("is missing"), std::string::npos) << missing.out;
}

EstimateRow Row(std::string codec, std::uint64_t mem, double c, double d) {
  EstimateRow r;
  r.codec = std::move(codec);
  r.orig_bytes = 1000;
  r.compressed_bytes = mem;
  r.mem_used_total = mem;
  r.ratio = 1000.0 / static_cast<double>(mem);
  r.pages = 10;
  r.compress_mb_s = c;
  r.decompress_mb_s = d;
  return r;
}

TEST(RecommendTest, SmallestOfTheFastAndTheSmallestOverall) {
  const std::vector<EstimateRow> rows = {
      Row("lz4", 400, 800, 2000), Row("lzo", 380, 700, 900),
      Row("zstd", 250, 200, 600), Row("lz4hc", 350, 40, 2200)};
  const Recommendation rec = Recommend(rows);
  EXPECT_TRUE(rec.helps);
  EXPECT_EQ(rows[rec.recommended].codec, "lz4");  // lzo decompresses < half
  EXPECT_EQ(rows[rec.smallest].codec, "zstd");
  EXPECT_NE(rec.reason.find("lz4: it saves 60.0%"), std::string::npos)
      << rec.reason;
  EXPECT_NE(rec.reason.find("zstd saves 75.0%"), std::string::npos);
}

// Memory that is all same-filled pages takes nothing: the reason says so
// rather than "ratio inf".
TEST(RecommendTest, AllSameFilledSaysSoNotAnInfiniteRatio) {
  const std::vector<EstimateRow> rows = {Row("lz4", 0, 800, 2000)};
  const Recommendation rec = Recommend(rows);
  EXPECT_TRUE(rec.helps);
  EXPECT_NE(rec.reason.find("(every page same-filled)"), std::string::npos)
      << rec.reason;
  EXPECT_EQ(rec.reason.find("inf"), std::string::npos) << rec.reason;
}

TEST(RecommendTest, IncompressibleDataIsNotWorthIt) {
  const std::vector<EstimateRow> rows = {Row("lz4", 980, 800, 2000),
                                         Row("zstd", 950, 200, 600)};
  const Recommendation rec = Recommend(rows);
  EXPECT_FALSE(rec.helps);
  EXPECT_NE(rec.reason.find("would not help"), std::string::npos) << rec.reason;
}

}  // namespace
}  // namespace ztier::tool
