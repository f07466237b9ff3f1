// File: tools/ztier/bench_stats_test.cc
//
// The benchmarks' result model (bench_stats.h): Summarize and the one
// percentile rule on known data, the one JSON shape of a figure, and that
// shape read back by tools/bench/compare_runs.py (ZTIER_COMPARE_RUNS, run by
// /usr/bin/python3) from two documents written with it.
#include "bench_stats.h"

#include <cstdint>
#include <string>
#include <vector>

#include "testing/test_util.h"

namespace ztier::tool {
namespace {

TEST(BenchStatsTest, SummarizeKnownSamples) {
  const std::vector<double> v = {4, 1, 3, 2};
  const SampleStats s = Summarize(v);
  EXPECT_EQ(s.n, 4u);
  EXPECT_DOUBLE_EQ(s.median, 2.5);
  EXPECT_DOUBLE_EQ(s.min, 1);
  EXPECT_DOUBLE_EQ(s.max, 4);
  EXPECT_DOUBLE_EQ(s.mean, 2.5);
  EXPECT_NEAR(s.stddev, 1.2910, 1e-4);  // sqrt(5 / 3)
  EXPECT_NEAR(s.cv_percent, 51.64, 1e-2);
  EXPECT_EQ(Summarize({}).n, 0u);
}

TEST(BenchStatsTest, PercentileIsNearestRank) {
  // 1..100: the q-quantile is the ceil(100 q)-th smallest.
  std::vector<std::uint32_t> v;
  for (std::uint32_t i = 100; i >= 1; --i) v.push_back(i);
  EXPECT_EQ(Percentile(v, 0.5), 50u);
  EXPECT_EQ(Percentile(v, 0.9), 90u);
  EXPECT_EQ(Percentile(v, 0.99), 99u);
  EXPECT_EQ(Percentile(v, 0.999), 100u);
  EXPECT_EQ(Percentile(v, 1.0), 100u);
  EXPECT_EQ(Percentile(v, 0.0), 1u);
  // Four samples: p50 is the second (not the mean of two), p90 the fourth.
  std::vector<double> four = {40, 10, 30, 20};
  EXPECT_DOUBLE_EQ(Percentile(four, 0.5), 20);
  EXPECT_DOUBLE_EQ(Percentile(four, 0.75), 30);
  EXPECT_DOUBLE_EQ(Percentile(four, 0.9), 40);
  EXPECT_EQ(PercentileIndex(1, 0.99), 0u);
  EXPECT_EQ(PercentileIndex(1000, 0.999), 998u);
}

TEST(BenchStatsTest, FigureJsonShape) {
  JsonWriter w;
  w.BeginObject();
  WriteFigureJson(w, "mb_s", std::vector<double>{3, 1, 2}, 1);
  WriteRatiosJson(w, "ratio", {});
  w.EndObject();
  const std::string text = w.Take();
  for (const char* key :
       {"\"mb_s_median\": 2.0", "\"mb_s_min\": 1.0", "\"mb_s_max\": 3.0",
        "\"mb_s_stddev\": 1.0", "\"mb_s_cv\": 50.00", "\"ratio_median\": null",
        "\"ratio_cv\": null"}) {
    EXPECT_NE(text.find(key), std::string::npos) << key << " in\n" << text;
  }
}

// One experiment's document: two figures of one item, `a` and `b`, and one
// with no samples.
void WriteRun(const std::string& path, std::vector<double> a,
              std::vector<double> b) {
  JsonWriter w;
  w.BeginObject();
  w.Key("measurements");
  w.BeginArray();
  w.BeginObject();
  w.Key("codec");
  w.String("lz4");
  w.Key("threads");
  w.Int(1);
  WriteFigureJson(w, "a", a, 2);
  WriteFigureJson(w, "b", b, 2);
  WriteFigureJson(w, "none", {}, 2);
  w.EndObject();
  w.EndArray();
  w.EndObject();
  ASSERT_TRUE(WriteJsonFile(path, w).ok()) << path;
}

TEST(BenchStatsTest, CompareRunsReadsTheSchema) {
  ASSERT_TRUE(ztier::testing::Have("/usr/bin/python3"));
  ztier::testing::ScopedTempDir dir;
  ASSERT_EQ(ztier::testing::Sh("mkdir '" + dir.File("one") + "' '" +
                               dir.File("two") + "'")
                .exit_code,
            0);
  // a agrees (10.5 lies in 9-11); b does not (20 vs 30-32).
  WriteRun(dir.File("one/x.json"), {10, 9, 11}, {20, 19, 21});
  WriteRun(dir.File("two/x.json"), {10.5, 10, 11}, {31, 30, 32});
  const auto r =
      ztier::testing::Sh("/usr/bin/python3 '" ZTIER_COMPARE_RUNS "' '" +
                         dir.File("one") + "' '" + dir.File("two") + "'");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("x: 1 of 2 medians agree"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("measurements / lz4 1 / b: 20 (19-21) vs 31 (30-32)"),
            std::string::npos)
      << r.out;
}

TEST(BenchStatsTest, WriteJsonFileNamesAnUnwritablePath) {
  JsonWriter w;
  w.BeginObject();
  w.EndObject();
  const Status s = WriteJsonFile("/nonexistent-dir/x.json", w);
  EXPECT_EQ(s.code(), StatusCode::kNotFound) << s.ToString();
  EXPECT_NE(s.ToString().find("open /nonexistent-dir/x.json"),
            std::string::npos)
      << s.ToString();
}

}  // namespace
}  // namespace ztier::tool
