// File: tools/ztier/bench_nbd_test.cc
//
// `ztier bench nbd`: unit tests of the fio JSON parser, the subprocess
// helpers and the report, and an end-to-end smoke test of the built binary
// (ZTIER_BIN): one one-second run of ztier alone on a small generated corpus,
// with --json. The smoke test skips when fio or nbdcopy is not on PATH.
#include "bench_nbd.h"

#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <random>
#include <sstream>
#include <string>

#include "bench_fio.h"
#include "bench_proc.h"
#include "testing/deaf_listener.h"
#include "testing/test_util.h"

namespace {

namespace fs = std::filesystem;
using namespace ztier::tool::bench;  // NOLINT

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Trimmed from fio-3.33 --output-format=json, with a notice line before it.
constexpr const char kFioOutput[] = R"(fio: some notice on stdout
{
  "fio version" : "fio-3.33",
  "jobs" : [
    {
      "jobname" : "randread-4k-qd32",
      "error" : 0,
      "job options" : {
        "uri" : "nbd+unix:///zram0?socket=/tmp/x/f0.sock",
        "rw" : "randread"
      },
      "read" : {
        "io_bytes" : 2358247424,
        "bw_bytes" : 786082474,
        "iops" : 191914.666667,
        "clat_ns" : { "min" : 1, "percentile" : { "1.000000" : 2 } }
      },
      "write" : {
        "io_bytes" : 0,
        "bw_bytes" : 0,
        "iops" : 0.000000
      },
      "usr_cpu" : 28.431138,
      "sys_cpu" : 69.225092,
      "latency_ms" : { ">=2000" : 0.000000 },
      "flags" : [true, false, null, -1.5e3, "a\"b\\c\u00e9"]
    }
  ]
}
)";

TEST(FioJsonTest, ReadsIopsAndBandwidthOfJobZero) {
  auto fig = ParseFioJson(kFioOutput);
  ASSERT_TRUE(fig.has_value()) << fig.error().ToString();
  EXPECT_DOUBLE_EQ(fig->read.iops, 191914.666667);
  EXPECT_DOUBLE_EQ(fig->read.bw_bytes, 786082474);
  EXPECT_EQ(fig->read.io_bytes, 2358247424u);
  EXPECT_EQ(fig->write.iops, 0);
  EXPECT_EQ(fig->error, 0);
  EXPECT_DOUBLE_EQ(fig->cpu_percent, 28.431138 + 69.225092);
}

TEST(FioJsonTest, RejectsWhatIsNotAFioDocument) {
  EXPECT_FALSE(ParseFioJson("").has_value());
  EXPECT_FALSE(ParseFioJson("fio: nbd_connect_uri: failed\n").has_value());
  EXPECT_FALSE(ParseFioJson("{\"jobs\": []}").has_value());
  EXPECT_FALSE(ParseFioJson("{\"jobs\": [{\"read\": {\"iops\": 1}}]}")
                   .has_value());  // no bw_bytes, no write
  EXPECT_FALSE(
      ParseFioJson("{\"jobs\": [{\"read\": {\"iops\": 1,").has_value());
  const std::string ok =
      "{\"jobs\":[{\"error\":5,\"read\":{\"iops\":1,\"bw_bytes\":2},"
      "\"write\":{\"iops\":3,\"bw_bytes\":4}}]}";
  auto fig = ParseFioJson(ok);
  ASSERT_TRUE(fig.has_value()) << fig.error().ToString();
  EXPECT_EQ(fig->error, 5);
  EXPECT_EQ(fig->write.bw_bytes, 4);
  EXPECT_EQ(fig->cpu_percent, -1);  // fio did not say
}

TEST(FioJobsTest, SixJobsOnTheSameArea) {
  const auto jobs = StandardJobs();
  ASSERT_EQ(jobs.size(), 6u);
  EXPECT_EQ(JobTitle(jobs[3]), "randread 4k QD32");
  const auto argv =
      FioJobArgs("/usr/bin/fio", jobs[3], "nbd+unix:///?socket=/s", 1 << 20, 2);
  const std::string line = CommandLine(argv);
  for (const char* want :
       {"--ioengine=nbd", "--rw=randread", "--bs=4096", "--iodepth=32",
        "--size=1048576", "--time_based", "--runtime=2",
        "--buffer_compress_percentage=50", "--refill_buffers",
        "--output-format=json", "'--uri=nbd+unix:///?socket=/s'"}) {
    EXPECT_NE(line.find(want), std::string::npos) << want << " in " << line;
  }
}

// Two servers, three runs of every job, the second without the first job:
// the report's charts, fio table and ratios.
TEST(NbdReportTest, ChartsTablesAndRatiosFromTheSamples) {
  NbdBenchConfig cfg;
  cfg.common.runs = 3;
  cfg.seconds = 2;
  cfg.fio.path = "/usr/bin/fio";
  cfg.nbdkit.path = "/usr/bin/nbdkit";
  cfg.servers = {{ServerKind::kZtier, "lz4", "ztier-lz4"},
                 {ServerKind::kNbdkit, "sparse", "nbdkit"}};
  ztier::tool::Measurements m;
  const auto jobs = StandardJobs();
  for (std::size_t run = 1; run <= 3; ++run) {
    const double delta = run == 1 ? 0 : run == 2 ? 20 : -20;
    for (std::size_t s = 0; s < 2; ++s) {
      ztier::tool::Samples samples;
      for (std::size_t j = 0; j < jobs.size(); ++j) {
        if (s == 1 && j == 0) continue;        // no bar
        const double base = 1000.0 * (j + 1);  // nbdkit: half, steady
        samples.Add(SampleName(jobs[j].name, "iops"),
                    s == 1 ? base / 2 : base + delta);
        samples.Add(SampleName(jobs[j].name, "mb_s"),
                    s == 1 ? base / 100 + 0.01 : base / 100 + delta);
      }
      m.Record(cfg.servers[s].label, run, samples);
    }
  }
  const ztier::tool::Report report =
      NbdReport(cfg, m, ztier::tool::MachineInfo{});
  const std::vector<ztier::tool::Chart>& charts = report.charts();
  ASSERT_EQ(charts.size(), 2u);
  const ztier::tool::Chart& small = charts[0];
  EXPECT_EQ(small.name, "nbd-4k");
  ASSERT_EQ(small.x_tics.size(), 4u);
  EXPECT_EQ(small.x_tics[3].second, "randread 4k QD32");
  ASSERT_EQ(small.series.size(), 2u);
  EXPECT_EQ(small.series[1].title, "nbdkit");
  ASSERT_EQ(small.series[0].points.size(), 4u);
  EXPECT_EQ(small.series[1].points.size(), 3u);
  const ztier::tool::PlotPoint& p = small.series[0].points[3];
  EXPECT_EQ(p.x, 3);
  EXPECT_DOUBLE_EQ(p.y, 4.0);  // thousands
  EXPECT_DOUBLE_EQ(*p.y_min, 3.98);
  EXPECT_DOUBLE_EQ(*p.y_max, 4.02);
  const ztier::tool::Chart& large = charts[1];
  EXPECT_EQ(large.name, "nbd-128k");
  ASSERT_EQ(large.x_tics.size(), 2u);
  EXPECT_EQ(large.x_tics[0].second, "write 128k QD8");
  ASSERT_EQ(large.series[1].points.size(), 2u);
  EXPECT_DOUBLE_EQ(large.series[1].points[0].y, 50.01);  // MB/s of job 5
  for (const auto& c : charts) EXPECT_TRUE(ztier::tool::ValidateChart(c).ok());

  const std::string text = report.Text();
  for (const char* want :
       {"== fio over NBD (2 s per job, 3 runs;", "IOPS median (min-max)", "cv%",
        "MB/s median (min-max)", "fio CPU%", "4000 (3980-4020)",
        "== derived ratios", "ztier-lz4/nbdkit randread 4k QD32 IOPS",
        "target >="}) {
    EXPECT_NE(text.find(want), std::string::npos) << want << " in\n" << text;
  }
  // ztier-lz4/nbdkit randread 4k QD32, per run (4000 + d) / 2000.
  EXPECT_NE(text.find("2.000 (1.990-2.010)"), std::string::npos) << text;
  const std::string json = report.Json();
  for (const char* key :
       {"\"tables\"", "\"fio\"", "\"ratios\"", "\"iops_median\"", "\"iops_cv\"",
        "\"mb_s_median\"", "\"iops_ratio_median\"", "\"target\"",
        "\"met\": \"yes\"", "\"server\": \"nbdkit\""}) {
    EXPECT_NE(json.find(key), std::string::npos) << key << " in\n" << json;
  }
}

TEST(ProcessTest, RunsWaitsAndTerminates) {
  const std::string sh = FindExecutable("sh");
  ASSERT_FALSE(sh.empty());
  auto e = RunToCompletion({sh, "-c", "exit 3"}, {},
                           std::chrono::milliseconds(10'000));
  ASSERT_TRUE(e.has_value()) << e.error().ToString();
  EXPECT_TRUE(e->exited);
  EXPECT_EQ(e->code, 3);
  auto p = Process::Spawn({sh, "-c", "sleep 30"}, {});
  ASSERT_TRUE(p.has_value()) << p.error().ToString();
  EXPECT_TRUE(p->Running());
  EXPECT_GT(ProcessRssBytes(p->pid()).value_or(0), 0u);
  EXPECT_FALSE(p->Wait(std::chrono::milliseconds(10)).has_value());
  const ExitInfo end = p->Terminate(std::chrono::milliseconds(5000));
  EXPECT_FALSE(end.exited);
  EXPECT_EQ(end.signal, SIGTERM);
  EXPECT_TRUE(FindExecutable("no-such-tool-anywhere").empty());
}

TEST(ProcessTest, AServerWhoseSocketNeverAcceptsFailsOnTheDeadline) {
  const ztier::testing::ScopedTempDir tmp;
  const std::string sock = tmp.File("deaf.sock");
  ztier::testing::DeafListener deaf(sock);
  ASSERT_EQ(deaf.error(), "");
  const std::string sh = FindExecutable("sh");
  ASSERT_FALSE(sh.empty());
  // On its own thread, so that a wait past the deadline fails the test
  // instead of hanging it; Close() below then wakes a connect still waiting.
  auto started = std::async(std::launch::async, [&] {
    return StartServerProcess({sh, "-c", "sleep 30"}, "deaf server", sock,
                              /*ctl=*/"", tmp.File("log"), tmp.path(),
                              std::chrono::milliseconds(300));
  });
  const bool in_time =
      started.wait_for(std::chrono::seconds(5)) == std::future_status::ready;
  deaf.Close();
  EXPECT_TRUE(in_time) << "waited on the full backlog past the deadline";
  const ztier::Result<ServerProcess> server = started.get();
  ASSERT_FALSE(server.has_value());
  EXPECT_NE(server.error().message().find("did not accept within 300 ms"),
            std::string::npos)
      << server.error().ToString();
}

TEST(BenchNbdSmokeTest, OneShortRunOfZtierAlone) {
  const ztier::testing::ScopedTempDir tmp;
  const fs::path dir_ = tmp.path();
  if (FindExecutable("fio").empty() || FindExecutable("nbdcopy").empty()) {
    GTEST_SKIP() << "fio or nbdcopy is not on PATH";
  }
  // A corpus of 64 pages (zero, text-like and random pages), compressed
  // with the zstd tool: --corpus-dir takes *.pages.zst files.
  std::mt19937 rng(7);
  std::string data;
  for (int p = 0; p < 64; ++p) {
    std::string page;
    if (p % 3 == 0) {
      page.assign(4096, '\0');
    } else if (p % 3 == 1) {
      while (page.size() < 4096) page += "ztier nbd page " + std::to_string(p);
    } else {
      for (int i = 0; i < 4096; ++i) page += static_cast<char>(rng());
    }
    page.resize(4096);
    data += page;
  }
  fs::create_directory(dir_ / "corpus");
  std::ofstream(dir_ / "corpus" / "small.pages", std::ios::binary) << data;
  const std::string zstd = FindExecutable("zstd");
  if (zstd.empty()) GTEST_SKIP() << "zstd is not on PATH";
  ASSERT_EQ(std::system(("'" + zstd + "' -q --rm '" +
                         (dir_ / "corpus" / "small.pages").string() + "'")
                            .c_str()),
            0);

  const auto [rc, out_] =
      ztier::testing::Sh("cd '" + tmp.path() +
                         "' && '" ZTIER_BIN
                         "' bench "
                         "nbd --runs 1 --seconds 1 --size 64M --no-nbdkit "
                         "--corpus-dir corpus --json out.json 2>err.txt");
  ASSERT_EQ(rc, 0) << "stdout:\n"
                   << out_ << "\nstderr:\n"
                   << ReadFile(dir_ / "err.txt");
  EXPECT_NE(out_.find("machine: "), std::string::npos) << out_;
  EXPECT_NE(out_.find("fio-"), std::string::npos) << out_;
  EXPECT_NE(out_.find("== fio over NBD"), std::string::npos) << out_;
  EXPECT_NE(out_.find("randread 4k QD32"), std::string::npos) << out_;
  EXPECT_NE(out_.find("ztier-lz4"), std::string::npos) << out_;
  EXPECT_NE(out_.find("== nbdcopy"), std::string::npos) << out_;
  EXPECT_NE(out_.find("small.pages"), std::string::npos) << out_;
  EXPECT_EQ(out_.find("nbdkit-zstd"), std::string::npos) << out_;

  const std::string json = ReadFile(dir_ / "out.json");
  for (const char* key :
       {"\"machine\"", "\"conditions\"", "\"tables\"", "\"fio\"", "\"copies\"",
        "\"server\": \"ztier-lz4\"", "\"runs\": \"1\"",
        "\"job\": \"randread 4k QD32\"", "\"job\": \"write 128k QD8\"",
        "\"iops_median\"", "\"iops_min\"", "\"iops_max\"", "\"mb_s_median\"",
        "\"corpus\": \"small.pages\"", "\"measured_as\": \"mem_used_total\"",
        "\"stored_mib_median\"", "\"orig_stored_median\""}) {
    EXPECT_NE(json.find(key), std::string::npos) << key << " in\n" << json;
  }
  EXPECT_EQ(json.find("nan"), std::string::npos) << json;
  // fio and nbdcopy ran in the private folder: nothing left in the cwd.
  EXPECT_FALSE(fs::exists(dir_ / "fio.json"));
  EXPECT_FALSE(fs::exists(dir_ / "randread-4k-qd32.0.0"));
}

}  // namespace
