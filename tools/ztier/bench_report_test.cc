// File: tools/ztier/bench_report_test.cc
//
// The benchmark harness: the run loop (bench_harness.h) and the result
// model's text and JSON (bench_report.h), read back by compare_runs.py.
#include "bench_report.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "bench_harness.h"
#include "testing/test_util.h"

namespace ztier::tool {
namespace {

TEST(BenchReportTest, JsonKeyFoldsPunctuationAndCase) {
  EXPECT_EQ(JsonKey("MB/s"), "mb_s");
  EXPECT_EQ(JsonKey(" compr_MiB "), "compr_mib");
  EXPECT_EQ(JsonKey("load/(decompress+copy)"), "load_decompress_copy");
}

TEST(BenchReportTest, RunVariantsAlternatesAndDropsTheWarmUp) {
  std::vector<std::string> order;
  int calls = 0;
  auto variant = [&](std::string name, double value) {
    return Variant{name, [&order, &calls, name, value](std::size_t run,
                                                       Samples& s) {
                     order.push_back(name + std::to_string(run));
                     s.Add("x", value * (run + 1));
                     ++calls;
                     return Status::Ok();
                   }};
  };
  const std::vector<Variant> variants = {variant("a", 1), variant("b", 10)};
  Progress progress;
  auto m = RunVariants({.runs = 3, .label = "t"}, variants, progress);
  ASSERT_TRUE(m.has_value()) << m.error().ToString();
  EXPECT_EQ(order, (std::vector<std::string>{"a0", "b0", "b1", "a1", "a2",
                                             "b2", "b3", "a3"}));
  EXPECT_EQ(m->Of("a", "x"), (std::vector<double>{2, 3, 4}));
  EXPECT_EQ(m->Ratios("b", "x", "a", "x"), (std::vector<double>{10, 10, 10}));
  EXPECT_TRUE(m->Of("a", "y").empty());
  EXPECT_EQ(m->At("b", "x", 2), 30);
}

TEST(BenchReportTest, RunVariantsKeepsFixedLastVariantsAtTheEnd) {
  std::vector<std::string> order;
  auto variant = [&](std::string name) {
    return Variant{name, [&order, name](std::size_t run, Samples&) {
                     order.push_back(name + std::to_string(run));
                     return Status::Ok();
                   }};
  };
  const std::vector<Variant> variants = {variant("a"), variant("b"),
                                         variant("probe")};
  Progress progress;
  ASSERT_TRUE(RunVariants({.runs = 2, .warmups = 0, .fixed_last = 1},
                          variants, progress)
                  .has_value());
  EXPECT_EQ(order, (std::vector<std::string>{"a1", "b1", "probe1", "b2", "a2",
                                             "probe2"}));
}

TEST(BenchReportTest, RunVariantsNamesTheFailingVariantAndRun) {
  const std::vector<Variant> variants = {
      {"ok", [](std::size_t, Samples&) { return Status::Ok(); }},
      {"bad", [](std::size_t run, Samples&) {
         return run == 2 ? Status::IoError("disk") : Status::Ok();
       }}};
  Progress progress;
  auto m = RunVariants({.runs = 3}, variants, progress);
  ASSERT_FALSE(m.has_value());
  EXPECT_EQ(m.error().code(), StatusCode::kIoError);
  EXPECT_EQ(m.error().message(), "bad, run 2/3: disk");
}

Report SampleReport(std::vector<double> mb_s) {
  Report r("bench test", MachineInfo{.cpu_model = "cpu", .cores = 2});
  r.Condition("codec", "lz4");
  r.Line("config: one line");
  Table& t = r.AddTable("variants", "variants (MB/s)");
  t.AddRow().Text("variant", "sync").Int("pages", 7).Figure(
      "MB/s", mb_s, 1, kRange | kCv);
  t.AddRow().Text("variant", "batched").Number("ratio", 1.5, 2).Bool("met",
                                                                     true);
  return r;
}

// On time, the next round is due one period after the last; a late one
// skips the periods it missed: the next is due a period from now, not at
// once (which would run it back to back with the late one).
TEST(BenchReportTest, SleepUntilNextRoundSkipsMissedPeriods) {
  using std::chrono::steady_clock;
  const std::chrono::milliseconds period(2);
  steady_clock::time_point next = steady_clock::now();
  const steady_clock::time_point first = next;
  SleepUntilNextRound(&next, period);
  EXPECT_EQ(next, first + period);
  EXPECT_GE(steady_clock::now(), next);
  next -= 10 * period;  // the round ran ten periods late
  const steady_clock::time_point late = steady_clock::now();
  SleepUntilNextRound(&next, period);
  EXPECT_GE(next, late + period);
  EXPECT_GE(steady_clock::now(), next);
}

TEST(BenchReportTest, TextPadsColumnsUnderTheTitle) {
  const std::string text = SampleReport({10, 9, 11}).Text();
  EXPECT_NE(text.find("machine: cpu, 2 cores"), std::string::npos) << text;
  EXPECT_NE(text.find("config: one line\n== variants (MB/s) ==\n"
                      "variant  pages  MB/s median (min-max)   cv%  ratio  "
                      "met\n"
                      "sync         7        10.0 (9.0-11.0)  10.0\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("batched                                       1.50  "
                      "yes\n"),
            std::string::npos)
      << text;
}

TEST(BenchReportTest, AJsonOnlyTableIsLeftOutOfTheText) {
  Report report("bench t", MachineInfo{});
  report.Line("batched / sync: 2.00x");
  Table& t = report.AddTable("ratios", "ratios");
  t.text = false;
  t.AddRow().Text("ratio", "batched / sync").Figure("x", {{2.0, 2.5}}, 2);
  const std::string text = report.Text();
  EXPECT_NE(text.find("batched / sync: 2.00x\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("== ratios"), std::string::npos) << text;
  const std::string json = report.Json();
  EXPECT_NE(json.find("\"ratios\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"x_max\": 2.50"), std::string::npos) << json;
}

TEST(BenchReportTest, RatioPrintsALineAndKeepsTheSamplesInTheJson) {
  Report report("bench t", MachineInfo{});
  const std::vector<double> ratios = {4.0, 3.0, 5.0};
  report.Ratio("batched / sync", ratios, "no runs");
  report.Ratio("batched / fio", {}, "fio not found on PATH", "");
  const std::string text = report.Text();
  EXPECT_NE(text.find("batched / sync: 4.00x (median of per-run ratios, "
                      "3.00-5.00)\nbatched / fio: not measured (fio not "
                      "found on PATH)\n"),
            std::string::npos)
      << text;
  const std::string json = report.Json();
  EXPECT_NE(json.find("\"ratio\": \"batched / sync\""), std::string::npos)
      << json;
  EXPECT_NE(json.find("\"x_median\": 4.0000"), std::string::npos) << json;
  EXPECT_NE(json.find("\"x_median\": null"), std::string::npos) << json;
}

TEST(BenchReportTest, OwnCvGivesEachFigureItsCvColumn) {
  Report r("bench test", MachineInfo{.cpu_model = "cpu", .cores = 2});
  r.AddTable("t", "").AddRow().Figure("k", {{10, 9, 11}}, 1, kOwnCv).Figure(
      "z", {{20, 20, 20}}, 1, kRange | kOwnCv);
  const std::string text = r.Text();
  EXPECT_NE(text.find("   k  k cv%  z median (min-max)  z cv%\n"
                      "10.0   10.0    20.0 (20.0-20.0)    0.0\n"),
            std::string::npos)
      << text;
  EXPECT_NE(r.Json().find("\"z_cv\": 0.00"), std::string::npos) << r.Json();
}

// compare_runs.py's output for the JSON of `one` against that of `two`,
// each written by Finish.
std::string CompareRuns(const Report& one, const Report& two) {
  ztier::testing::ScopedTempDir dir;
  EXPECT_EQ(ztier::testing::Sh("mkdir '" + dir.File("one") + "' '" +
                               dir.File("two") + "'")
                .exit_code,
            0);
  EXPECT_EQ(one.Finish("bench test", {.json = dir.File("one/x.json")}), 0);
  EXPECT_EQ(two.Finish("bench test", {.json = dir.File("two/x.json")}), 0);
  const auto r =
      ztier::testing::Sh("/usr/bin/python3 '" ZTIER_COMPARE_RUNS "' '" +
                         dir.File("one") + "' '" + dir.File("two") + "'");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  return r.out;
}

TEST(BenchReportTest, JsonHasOneShapeAndCompareRunsReadsIt) {
  const std::string json = SampleReport({10, 9, 11}).Json();
  for (const char* key :
       {"\"benchmark\": \"bench test\"", "\"conditions\"",
        "\"codec\": \"lz4\"", "\"tables\"", "\"variants\": [",
        "\"mb_s_median\": 10.0", "\"mb_s_min\": 9.0", "\"mb_s_cv\": 10.00",
        "\"pages\": 7", "\"ratio\": 1.50", "\"met\": true"}) {
    EXPECT_NE(json.find(key), std::string::npos) << key << " in\n" << json;
  }
  const std::string out =
      CompareRuns(SampleReport({10, 9, 11}), SampleReport({30, 29, 31}));
  EXPECT_NE(out.find("x: 0 of 1 medians agree"), std::string::npos) << out;
  EXPECT_NE(out.find("tables / variants / 7 sync / mb_s: 10 (9-11) vs 30 "
                     "(29-31)"),
            std::string::npos)
      << out;
}

// A ratio row whose target is met in one run and missed in the other is
// still the same row to compare_runs.py: "met" states a result.
TEST(BenchReportTest, CompareRunsMatchesARowWhoseVerdictFlipped) {
  auto report = [](bool met) {
    Report r("bench test", MachineInfo{});
    r.AddTable("derived", "").AddRow().Text("ratio", "a/b").Figure(
        "value", {{met ? 1.2 : 0.8}}, 2).Bool("met", met);
    return r;
  };
  const std::string out = CompareRuns(report(true), report(false));
  EXPECT_NE(out.find("x: 0 of 1 medians agree"), std::string::npos) << out;
  EXPECT_NE(out.find("a/b / value: 1.2 (1.2-1.2) vs 0.8 (0.8-0.8)"),
            std::string::npos)
      << out;
}

TEST(BenchReportTest, FinishFailsWhenTheJsonCannotBeWritten) {
  BenchFlags f{.json = "/nonexistent-dir/x.json"};
  EXPECT_EQ(SampleReport({1}).Finish("bench test", f), 1);
}

}  // namespace
}  // namespace ztier::tool
