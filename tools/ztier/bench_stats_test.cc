// File: tools/ztier/bench_stats_test.cc
//
// The benchmarks' statistics (bench_stats.h): Summarize and the one
// percentile rule on known data, and the one JSON shape of a figure
// (compare_runs.py reads it back in bench_report_test.cc).
#include "bench_stats.h"

#include <cmath>
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
  EXPECT_EQ(Summarize(std::vector<double>{7}).stddev, 0);
  const SampleStats odd = Summarize(std::vector<double>{3, 1, 2});
  EXPECT_EQ(odd.median, 2);
  EXPECT_DOUBLE_EQ(odd.stddev, 1.0);
  EXPECT_DOUBLE_EQ(odd.cv_percent, 50.0);
}

// A ratio of nothing to nothing (every page same-filled) is no figure:
// the tables print "-", never "inf" or "-nan".
TEST(BenchStatsTest, FormatDoubleShowsNoFigureForInfinityAndNan) {
  EXPECT_EQ(FormatDouble(2.0 / 3.0, 2), "0.67");
  EXPECT_EQ(FormatDouble(1.0 / 0.0, 3), "-");
  EXPECT_EQ(FormatDouble(-1.0 / 0.0, 1), "-");
  EXPECT_EQ(FormatDouble(std::nan(""), 2), "-");
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
  WriteStatsJson(w, "mb_s", Summarize(std::vector<double>{3, 1, 2}), 1);
  WriteStatsJson(w, "ratio", Summarize({}), 4);
  w.EndObject();
  const std::string text = w.Take();
  for (const char* key :
       {"\"mb_s_median\": 2.0", "\"mb_s_min\": 1.0", "\"mb_s_max\": 3.0",
        "\"mb_s_stddev\": 1.0", "\"mb_s_cv\": 50.00", "\"ratio_median\": null",
        "\"ratio_cv\": null"}) {
    EXPECT_NE(text.find(key), std::string::npos) << key << " in\n" << text;
  }
}

// JSON is UTF-8: well-formed sequences pass through, any other byte (a
// command line or file name may hold any) is U+FFFD.
TEST(BenchStatsTest, JsonStringsAreUtf8) {
  JsonWriter w;
  w.BeginArray();
  w.String("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
  w.String("a\xff\xfe" "b\xc3" "c\xed\xa0\x80" "d\xc0\xaf");
  w.EndArray();
  const std::string text = w.Take();
  EXPECT_NE(text.find("\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\""),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("\"a\\ufffd\\ufffdb\\ufffdc\\ufffd\\ufffd\\ufffdd"
                      "\\ufffd\\ufffd\""),
            std::string::npos)
      << text;
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
