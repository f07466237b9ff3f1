// File: tools/ztier/ztier_cli_test.cc
//
// End-to-end smoke test of the `ztier` binary (its path comes from the build
// as ZTIER_BIN): one-run engine and writeback benchmarks on a small
// generated corpus with --json, and the usage errors a user or `make run`
// relies on.
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "testing/test_util.h"

namespace {

namespace fs = std::filesystem;

struct RunResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class ZtierCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl =
        (fs::temp_directory_path() / "ztier_cli_test.XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  // Runs `ztier <args>` in dir_, capturing stdout and stderr; `env`
  // ("NAME=VALUE ...") is set for it alone. A `timeout_s` other than 0
  // ends a run that outlasts it (timeout(1): exit 124), for a command that
  // would otherwise serve for good.
  RunResult Run(const std::string& args, const std::string& env = "",
                int timeout_s = 0) {
    const std::string cmd =
        "cd '" + dir_.string() + "' && " +
        (env.empty() ? "" : "env " + env + " ") +
        (timeout_s == 0 ? ""
                        : "timeout -k 5 " + std::to_string(timeout_s) + " ") +
        "'" ZTIER_BIN "' " + args + " >out.txt 2>err.txt";
    const int status = std::system(cmd.c_str());
    RunResult r;
    if (status != -1 && WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
    r.out = ReadFile(dir_ / "out.txt");
    r.err = ReadFile(dir_ / "err.txt");
    return r;
  }

  // A plain corpus file of `pages` pages: zero pages, text-like pages,
  // small-integer arrays and random bytes; the last page is partial, so the
  // loader pads it. Not a multiple of 8 pages, so batches end short.
  fs::path MakeCorpus(int pages) {
    std::mt19937 rng(301);
    std::string data;
    const std::string words[] = {"page ", "store ", "zram ", "load ", "lz4 "};
    for (int p = 0; p < pages; ++p) {
      std::string page;
      switch (p % 4) {
        case 0:
          page.assign(4096, '\0');
          break;
        case 1:
          while (page.size() < 4096) page += words[rng() % 5];
          break;
        case 2:
          for (int i = 0; i < 1024; ++i) {
            const std::uint32_t v = rng() % 100;
            page.append(reinterpret_cast<const char*>(&v), 4);
          }
          break;
        default:
          for (int i = 0; i < 4096; ++i) page += static_cast<char>(rng());
      }
      page.resize(4096);
      data += page;
    }
    data.resize(data.size() - 1000);
    const fs::path path = dir_ / "small.pages";
    std::ofstream(path, std::ios::binary) << data;
    return path;
  }

  fs::path dir_;
};

// Every one of `keys` is in `text` (a JSON document); each missing one is
// a failure of its own.
void ExpectHasAll(const std::string& text,
                  std::initializer_list<const char*> keys) {
  for (const char* key : keys) {
    EXPECT_NE(text.find(key), std::string::npos) << key << " in\n" << text;
  }
}

TEST_F(ZtierCliTest, BenchEngineWritesTablesAndJson) {
  MakeCorpus(37);
  const RunResult r =
      Run("bench engine --corpus small.pages --codec lz4 --runs 1 --json "
          "out.json");
  ASSERT_EQ(r.exit_code, 0) << "stdout:\n" << r.out << "\nstderr:\n" << r.err;
  EXPECT_NE(r.out.find("machine: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("== lz4 / small.pages"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("store/compress"), std::string::npos) << r.out;
  EXPECT_TRUE(r.err.empty()) << r.err;  // not a terminal: no progress line

  const std::string json = ReadFile(dir_ / "out.json");
  ASSERT_FALSE(json.empty());
  ExpectHasAll(json, {"\"benchmark\": \"ztier bench engine\"",
                      "\"machine\"",
                      "\"conditions\"",
                      "\"tables\"",
                      "\"lz4 small.pages\": [",
                      "\"lz4 small.pages conditions\": [",
                      "\"sizes\": [",
                      "\"derived\": [",
                      "\"codec\": \"lz4\"",
                      "\"corpus\": \"small.pages\"",
                      "\"path\": \"codec\"",
                      "\"path\": \"store\"",
                      "\"op\": \"compress\"",
                      "\"op\": \"decompress\"",
                      "\"op\": \"store\"",
                      "\"op\": \"load\"",
                      "\"op\": \"overwrite\"",
                      "\"threads\": 1",
                      "\"batch\": 8",
                      "\"backend\": \"serial\"",
                      "\"backend\": \"parallel\"",
                      "\"mb_s_median\"",
                      "\"mb_s_min\"",
                      "\"mb_s_max\"",
                      "\"mb_s_stddev\"",
                      "\"mb_s_cv\"",
                      "\"cross_cpu_rtt_ns_median\"",
                      "\"fresh_p90\"",
                      "\"ratio\"",
                      "\"mem_used_mib\"",
                      "\"compr_mib\"",
                      "\"meta_b_page\"",
                      "\"mem_compr\"",
                      "\"after_compact_mib\"",
                      "\"after_compr\"",
                      "\"ratio\": \"store/compress\"",
                      "\"target\": 0.85",
                      "\"met\""});
  EXPECT_EQ(json.find("nan"), std::string::npos) << json;
}

bool IsPng(const fs::path& path) {
  return ReadFile(path).starts_with(std::string("\x89PNG\r\n\x1a\n", 8));
}

TEST_F(ZtierCliTest, BenchEngineScalesThreadsAndPlotsCharts) {
  MakeCorpus(37);
  const RunResult r = Run(
      "bench engine --corpus small.pages --codec lz4 --runs 1 --threads 2,1 "
      "--plot charts");
  ASSERT_EQ(r.exit_code, 0) << "stdout:\n" << r.out << "\nstderr:\n" << r.err;
  EXPECT_NE(r.out.find("threads=1,2,"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("== lz4 / small.pages: throughput against threads"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("ideal  of ideal"), std::string::npos) << r.out;
  // The 1-thread rows are their own ideal.
  EXPECT_NE(r.out.find("100%"), std::string::npos) << r.out;
  for (const char* chart : {"engine-threads-lz4", "engine-batch-lz4"}) {
    const fs::path png = dir_ / "charts" / (std::string(chart) + ".png");
    EXPECT_TRUE(IsPng(png)) << png;
    EXPECT_TRUE(fs::exists(dir_ / "charts" / (std::string(chart) + ".gp")));
    EXPECT_TRUE(fs::exists(dir_ / "charts" / (std::string(chart) + ".dat")));
    EXPECT_NE(r.err.find("wrote charts/" + std::string(chart) + ".png"),
              std::string::npos)
        << r.err;
  }
  // Charts are announced on stderr; stdout keeps only the tables.
  EXPECT_EQ(r.out.find(".png"), std::string::npos) << r.out;
}

TEST_F(ZtierCliTest, BenchPlotWithoutGnuplotStillPrintsItsTables) {
  MakeCorpus(37);
  fs::create_directory(dir_ / "nobin");
  const RunResult r =
      Run("bench engine --corpus small.pages --codec lz4 --runs 1 --threads 1 "
          "--plot charts",
          "PATH=" + (dir_ / "nobin").string());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("== lz4 / small.pages"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("store/compress"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("gnuplot not found on PATH"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("draws no charts"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir_ / "charts" / "engine-batch-lz4.png"));
}

// The warning comes before the run, not with the tables at its end: a
// run that then fails at once (its corpus missing) has given it.
TEST_F(ZtierCliTest, BenchPlotWithoutGnuplotWarnsBeforeTheRun) {
  fs::create_directory(dir_ / "nobin");
  const RunResult r =
      Run("bench engine --corpus missing.pages --codec lz4 --runs 1 "
          "--threads 1 --plot charts",
          "PATH=" + (dir_ / "nobin").string());
  EXPECT_EQ(r.exit_code, 1);
  const std::size_t warning = r.err.find("draws no charts");
  const std::size_t failure = r.err.find("missing.pages");
  ASSERT_NE(warning, std::string::npos) << r.err;
  ASSERT_NE(failure, std::string::npos) << r.err;
  EXPECT_LT(warning, failure) << r.err;
}

TEST_F(ZtierCliTest, BadThreadCountIsAUsageError) {
  MakeCorpus(37);
  const RunResult r =
      Run("bench engine --corpus small.pages --codec lz4 --threads 1,0");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--threads 0"), std::string::npos) << r.err;
}

// Outside strings, every bracket closes the one it should and the text is
// one object: enough to catch a writer that emits broken JSON.
bool LooksLikeOneJsonObject(const std::string& text) {
  std::string open;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    if (c == '{' || c == '[') open.push_back(c == '{' ? '}' : ']');
    if (c == '}' || c == ']') {
      if (open.empty() || open.back() != c) return false;
      open.pop_back();
      if (open.empty() &&
          text.find_first_not_of(" \n", i + 1) != std::string::npos) {
        return false;
      }
    }
  }
  return open.empty() && !in_string && text.starts_with("{");
}

TEST_F(ZtierCliTest, BenchWritebackReportsBothVariantsAndTheRatio) {
  MakeCorpus(37);
  const RunResult r =
      Run("bench writeback --size 8M --runs 1 --corpus small.pages --dir . "
          "--json out.json");
  ASSERT_EQ(r.exit_code, 0) << "stdout:\n" << r.out << "\nstderr:\n" << r.err;
  EXPECT_NE(r.out.find("machine: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\nsync "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\nbatched "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("batched / one-at-a-time: "), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("x (median of per-run ratios"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("batched / fio sequential write: "), std::string::npos)
      << r.out;
  // Both files in --dir are gone.
  EXPECT_FALSE(fs::exists(dir_ / "ztier-bench-writeback.img"));
  EXPECT_FALSE(fs::exists(dir_ / "ztier-bench-fio.img"));

  EXPECT_NE(r.out.find("\n== last run: "), std::string::npos) << r.out;

  // bench_report.h's schema: every figure of the text, the ratios too.
  const std::string json = ReadFile(dir_ / "out.json");
  EXPECT_TRUE(LooksLikeOneJsonObject(json)) << json;
  ExpectHasAll(json, {"\"benchmark\": \"ztier bench writeback\"",
                      "\"machine\"",
                      "\"conditions\"",
                      "\"size_bytes\": \"8388608\"",
                      "\"codec\": \"lz4\"",
                      "\"batch_size\": \"32\"",
                      "\"runs\": \"1\"",
                      "\"variants\": [",
                      "\"variant\": \"sync\"",
                      "\"variant\": \"batched\"",
                      "\"pages\": ",
                      "\"seconds_median\"",
                      "\"mb_s_median\"",
                      "\"mb_s_cv\"",
                      "\"last_run\": [",
                      "\"bd_writes\": ",
                      "\"checked\": 32",
                      "\"ratios\": [",
                      "\"ratio\": \"batched / one-at-a-time\"",
                      "\"x_median\""});
  // Every figure in the one shape (bench_stats.h): no {"median": ...}.
  EXPECT_EQ(json.find("\"median\""), std::string::npos) << json;
  EXPECT_EQ(json.find("nan"), std::string::npos) << json;
}

// A region needs userfaultfd; without it the command fails saying so, and
// these tests skip.
bool RegionUnavailable(const RunResult& r) {
  return r.exit_code == 1 && r.err.find("Unsupported") != std::string::npos;
}

std::string LastLine(const std::string& out) {
  std::string text = out;
  while (!text.empty() && text.back() == '\n') text.pop_back();
  const std::size_t nl = text.rfind('\n');
  return nl == std::string::npos ? text : text.substr(nl + 1);
}

TEST_F(ZtierCliTest, UsememComparesBatchingAndEndsWithTheRatio) {
  MakeCorpus(37);
  const RunResult r =
      Run("usemem --workers 2 --size 4M --budget 50% --runs 1 "
          "--compare-batching --sleep 0 --corpus small.pages --json "
          "out.json");
  if (RegionUnavailable(r))
    GTEST_SKIP() << "userfaultfd unavailable: " << r.err;
  ASSERT_EQ(r.exit_code, 0) << "stdout:\n" << r.out << "\nstderr:\n" << r.err;
  EXPECT_NE(r.out.find("machine: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Average Throughput (KB/s)"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("Total Throughput (KB/s)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Time to Free (usecs)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("zswpout"), std::string::npos) << r.out;
  // 2 workers x 1024 pages, two runs (one per variant), every page checked.
  EXPECT_NE(r.out.find("verified: 4096 pages"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" 0 mismatches"), std::string::npos) << r.out;
  // The ratio line ends the text; only "wrote out.json" follows it.
  const std::size_t wrote = r.out.rfind("\n\nwrote out.json");
  ASSERT_NE(wrote, std::string::npos) << r.out;
  const std::string last = LastLine(r.out.substr(0, wrote));
  EXPECT_EQ(last.rfind("batched / one-at-a-time: ", 0), 0u) << r.out;
  EXPECT_NE(last.find("x (total throughput; median of per-run ratios"),
            std::string::npos)
      << last;

  // bench_report.h's schema, with every worker of every run.
  const std::string json = ReadFile(dir_ / "out.json");
  EXPECT_TRUE(LooksLikeOneJsonObject(json)) << json;
  ExpectHasAll(
      json,
      {"\"benchmark\": \"ztier usemem\"", "\"machine\"", "\"workers\": \"2\"",
       "\"region_bytes\": \"8388608\"", "\"budget_bytes\": \"4194304\"",
       "\"compare_batching\": \"yes\"",
       "\"figure\": \"Total Throughput (KB/s)\"", "\"batched_median\"",
       "\"one_at_a_time_median\"", "\"counter\": \"zswpout\"",
       "\"ratio\": \"batched / one-at-a-time\"", "\"x_median\"",
       "\"workers\": [", "\"variant\": \"one-at-a-time\"", "\"worker\": 1",
       "\"kb_s\"", "\"pages_verified\": 4096", "\"mismatches\": 0"});
  EXPECT_EQ(json.find("nan"), std::string::npos) << json;
}

TEST_F(ZtierCliTest, BenchReadaheadReportsTheRatioAndTheLatency) {
  MakeCorpus(37);
  const RunResult r =
      Run("bench readahead --size 1M --runs 1 --fault-pages 256 --corpus "
          "small.pages --json out.json");
  if (RegionUnavailable(r))
    GTEST_SKIP() << "userfaultfd unavailable: " << r.err;
  ASSERT_EQ(r.exit_code, 0) << "stdout:\n" << r.out << "\nstderr:\n" << r.err;
  EXPECT_NE(r.out.find("page_cluster 3 / page_cluster 0: "), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("swap_ra_hit"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("stored, faulted"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("first touch, faulted"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("bare UFFDIO_COPY 4K fault"), std::string::npos)
      << r.out;
  const std::string json = ReadFile(dir_ / "out.json");
  EXPECT_TRUE(LooksLikeOneJsonObject(json)) << json;
  ExpectHasAll(json,
               {"\"readahead\": [", "\"variant\": \"page_cluster 0\"",
                "\"variant\": \"page_cluster 3\"", "\"ratio_pages_s_median\"",
                "\"mb_s_cv\"", "\"swap_ra\"", "\"fault_latency\": [",
                "\"touches\": \"first touch, faulted\"", "\"p99\"",
                "\"touches\": \"bare UFFDIO_COPY, faulted (measured now)\""});
}

TEST_F(ZtierCliTest, BenchLatencyComparesTheModesRunByRun) {
  MakeCorpus(37);
  const RunResult r =
      Run("bench latency --runs 1 --seconds 1 --codec lz4 --corpus small.pages "
          "--json out.json");
  ASSERT_EQ(r.exit_code, 0) << "stdout:\n" << r.out << "\nstderr:\n" << r.err;
  for (const char* text :
       {"== high-priority latency (us) ==", "slowest median (min-max)",
        "== workers: stores + loads ==", "== separate against shared",
        "slowest read", "reads over 10 ms, any run"}) {
    EXPECT_NE(r.out.find(text), std::string::npos) << text << " in\n" << r.out;
  }
  const std::string json = ReadFile(dir_ / "out.json");
  EXPECT_TRUE(LooksLikeOneJsonObject(json)) << json;
  ExpectHasAll(json,
               {"\"benchmark\": \"ztier bench latency\"", "\"latency\": [",
                "\"mode\": \"shared\"", "\"mode\": \"separate\"",
                "\"series\": \"stores\"", "\"p99_9_median\"", "\"slowest_cv\"",
                "\"per_cpu_second_median\"", "\"separate_vs_shared\": [",
                "\"ratio_median\"", "\"met\""});
  EXPECT_EQ(json.find("nan"), std::string::npos) << json;
}

TEST_F(ZtierCliTest, BenchLatencyRejectsMoreCpusThanOnline) {
  MakeCorpus(37);
  const RunResult r = Run(
      "bench latency --runs 1 --seconds 1 --cpus 1024 --corpus small.pages");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--cpus must be 1.."), std::string::npos) << r.err;
}

// serve --ublk on a kernel without ublk (this host's) stops at once,
// saying why; a bad --ublk-max-io is a usage error.
TEST_F(ZtierCliTest, ServeUblkWithoutTheDriverSaysSo) {
  if (fs::exists("/dev/ublk-control")) {
    GTEST_SKIP() << "this kernel has ublk: serve --ublk would serve";
  }
  RunResult r = Run("serve --ublk --device zram0:16M --unix s.sock --ctl c.ctl");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("--ublk: no /dev/ublk-control: this kernel has no ublk "
                       "(modprobe ublk_drv)"),
            std::string::npos)
      << r.err;
  r = Run("serve --ublk --ublk-max-io 6K --unix s.sock --ctl c.ctl");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--ublk-max-io: want a multiple of 4K"),
            std::string::npos)
      << r.err;
}

// Settings that cannot work exit 2 (the unit does not restart on it), and
// an empty path is refused rather than read as the default.
TEST_F(ZtierCliTest, ServeSettingsThatCannotWorkExit2) {
  const struct {
    const char* flags;
    const char* message;
  } kCases[] = {
      {"--device bad/name:16M", "bad device name 'bad/name'"},
      {"--device zram0:16M --device zram0:32M", "--device zram0 is given twice"},
      {"--comp-algorithm zstd --algorithm-params level=99 --device zram0:16M",
       "level 99 out of range"},
      {"--config=", "--config: empty FILE"},
      {"--unix= --device zram0:16M", "--unix: empty PATH"},
      {"--device zram0:16M --tls-cert=", "--tls-cert: empty PATH"},
      {"--device zram0:16M --backing-dev ''", "--backing-dev: empty PATH|URI"},
      {"--device zram0:16M --metrics-unix=", "--metrics-unix: empty PATH"},
  };
  for (const auto& c : kCases) {
    const RunResult r =
        Run(std::string("serve ") + c.flags + " --ctl c.ctl" +
            (std::string(c.flags).find("--unix") == std::string::npos
                 ? " --unix s.sock"
                 : ""));
    EXPECT_EQ(r.exit_code, 2) << c.flags << "\n" << r.err;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << c.flags << "\n"
                                                         << r.err;
  }
}

// A --backing-dev that cannot hold written-back pages is refused at start,
// naming the path and why: a file of the kernel's own file systems (a
// writeback there would write pages into the kernel's controls), and a
// path whose folder is missing, with open()'s ENOENT as `ztier ctl
// backing_dev` says it (docs/control_protocol.md).
TEST_F(ZtierCliTest, ServeRefusesAnUnusableBackingDevAtOnce) {
  const std::string serve =
      "serve --device zram0:16M --unix s.sock --ctl c.ctl --backing-dev ";
  RunResult r = Run(serve + "no-dir/wb", "", 20);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("--backing-dev: ENOENT: backing_dev " +
                       (dir_ / "no-dir/wb").string() +
                       ": no such file, and no directory " +
                       (dir_ / "no-dir").string() + " to create it in"),
            std::string::npos)
      << r.err;
  // procfs is writable by root only; others are refused the open.
  if (geteuid() != 0) GTEST_SKIP() << "procfs: as root only";
  r = Run(serve + "/proc/version", "", 20);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--backing-dev: EINVAL: backing_dev /proc/version is "
                       "on proc, a file system of the kernel's"),
            std::string::npos)
      << r.err;
  r = Run(serve + "/proc/ztier.wb", "", 20);  // to be made there
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("backing_dev /proc/ztier.wb: its folder /proc is on "
                       "proc, a file system of the kernel's"),
            std::string::npos)
      << r.err;
}

// A bad value from the [ztier] section is said at its line, not as a flag
// of the command line; the command line's own value is said as a flag.
TEST_F(ZtierCliTest, ABadZtierValueIsSaidWhereTheFileSetsIt) {
  std::ofstream(dir_ / "z.conf") << "[zram0]\nzram-size = 16\n\n"
                                    "[ztier]\nunit-pages = 3\n";
  RunResult r = Run("serve --config z.conf --unix s.sock --ctl c.ctl");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("z.conf:5: [ztier] unit-pages: want 4, 8 or 16"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("--help"), std::string::npos) << r.err;
  r = Run("serve --config z.conf --unit-pages 5 --unix s.sock --ctl c.ctl");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--unit-pages: want 4, 8 or 16 (or 0: off), not 5"),
            std::string::npos)
      << r.err;
}

// Options that exclude each other, and an output folder that does not
// exist, are usage errors found before any work.
TEST_F(ZtierCliTest, ExclusiveOptionsAndMissingFoldersAreUsageErrors) {
  for (const char* args : {"status --json -b", "status --json -o NAME",
                           "status --json --raw", "status -o NAME --output-all"}) {
    const RunResult r = Run(args);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.err;
    EXPECT_NE(r.err.find("exclude each other"), std::string::npos) << r.err;
  }
  MakeCorpus(37);
  // estimate, and a benchmark whose runs would take minutes: refused at
  // once.
  for (const char* args :
       {"estimate --corpus small.pages --json no/such/dir/x.json",
        "bench engine --corpus small.pages --json no/such/dir/x.json"}) {
    const RunResult r = Run(args);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.err;
    EXPECT_NE(r.err.find("--json no/such/dir/x.json: no folder no/such/dir"),
              std::string::npos)
        << r.err;
    EXPECT_EQ(r.out, "") << args;
  }
}

TEST_F(ZtierCliTest, UnknownCommandIsAUsageError) {
  const RunResult r = Run("nosuch");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("unknown command 'nosuch'"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--help"), std::string::npos) << r.err;
}

// With no control socket to default to (not root, no XDG_RUNTIME_DIR nor
// ZTIER_CTL), `ztier ctl` and `ztier status` exit 2, a usage error: so the
// message ends with the line every usage error has.
TEST_F(ZtierCliTest, NoDefaultControlSocketIsAUsageError) {
  std::string env = "-u XDG_RUNTIME_DIR -u ZTIER_CTL";
  if (::geteuid() == 0) {  // root has /run/ztier: run the command as nobody
    if (std::system("command -v setpriv >/dev/null 2>&1") != 0) {
      GTEST_SKIP() << "root, and no setpriv to run as another user";
    }
    env += " setpriv --reuid 65534 --regid 65534 --clear-groups";
  }
  for (const std::string command : {"ctl", "status"}) {
    const RunResult r =
        Run(command + (command == "ctl" ? " disksize" : ""), env);
    EXPECT_EQ(r.exit_code, 2) << command << ": " << r.err;
    EXPECT_NE(r.err.find("no default control socket"), std::string::npos)
        << command << ": " << r.err;
    EXPECT_NE(r.err.find("\nRun 'ztier " + command + " --help' for usage.\n"),
              std::string::npos)
        << command << ": " << r.err;
  }
}

// An empty --ctl (`--ctl "$SOCK"` with SOCK unset) is refused, not read
// as "the default socket": that would send the request, a reset say, to
// whatever server runs there. An empty --device names no device (it went
// to the server as a control operation: "no control operation
// 'disksize'"). Both are refused before any connection, as is an empty
// path or folder given to a benchmark, which would run on its default.
TEST_F(ZtierCliTest, AnEmptyPathOrNameIsAUsageError) {
  const std::string env = "ZTIER_CTL=" + (dir_ / "default.ctl").string();
  for (const char* args :
       {"ctl --ctl= disksize", "ctl --ctl '' disksize", "status --ctl=",
        "status --ctl ''", "ctl --device= disksize",
        "ctl --device '' disksize", "bench engine --corpus-dir=",
        "bench engine --plot ''", "bench ratio --zram-dev=",
        "bench writeback --dir="}) {
    const RunResult r = Run(args, env);
    EXPECT_EQ(r.exit_code, 2) << args << ": " << r.err;
    EXPECT_NE(r.err.find(": empty"), std::string::npos) << args << ": " << r.err;
    EXPECT_EQ(r.err.find("default.ctl"), std::string::npos)
        << args << ": " << r.err;
    EXPECT_NE(r.err.find("--help' for usage."), std::string::npos)
        << args << ": " << r.err;
  }
}

// A control socket that is not there, a stale one (nobody listens), or a
// path that is not a socket (a plain file, a folder: --ctl given the wrong
// path), is exit 1 with a message that names the path and says which:
// connect(2) answers a file that is not a socket with ECONNREFUSED, as it
// does a socket nobody listens on, which would send the user looking for
// a stopped server. The words are those `ztier serve` uses for the path.
TEST_F(ZtierCliTest, CtlAndStatusSayWhyTheSocketCannotBeReached) {
  std::ofstream(dir_ / "plain") << "not a socket";
  fs::create_directory(dir_ / "folder");
  {
    // Bound, never listened on: the file a server killed leaves behind.
    const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    ASSERT_GE(fd, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    const std::string stale = (dir_ / "stale.ctl").string();
    ASSERT_LT(stale.size(), sizeof(addr.sun_path));
    std::memcpy(addr.sun_path, stale.data(), stale.size());
    ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    ::close(fd);
  }
  const struct {
    const char* path;
    const char* says;
    bool asks_if_running;  // a wrong path is no stopped server
  } kCases[] = {{"missing.ctl", "No such file", true},
                {"stale.ctl", "no server listens on it (a stale socket)", true},
                {"plain", "is a regular file, not a socket", false},
                {"folder", "is a directory, not a socket", false}};
  for (const auto& c : kCases) {
    for (const char* command : {"ctl mm_stat", "status"}) {
      const std::string args =
          std::string(command) + " --ctl " + (dir_ / c.path).string();
      const RunResult r = Run(args);
      EXPECT_EQ(r.exit_code, 1) << args << ": " << r.err;
      EXPECT_NE(r.err.find("cannot reach the control socket " +
                           (dir_ / c.path).string()),
                std::string::npos)
          << args << ": " << r.err;
      EXPECT_NE(r.err.find(c.says), std::string::npos) << args << ": " << r.err;
      if (!c.asks_if_running) {  // not connect(2)'s word for a wrong path
        EXPECT_EQ(r.err.find("refused"), std::string::npos)
            << args << ": " << r.err;
      }
      EXPECT_EQ(r.err.find("Is `ztier serve` running?") != std::string::npos,
                c.asks_if_running)
          << args << ": " << r.err;
    }
    if (c.asks_if_running) continue;  // a server takes those paths
    // `ztier serve` refuses a wrong path in the same words (and keeps
    // what is there).
    const std::string args = "serve --device zram0:1M --unix " +
                             (dir_ / "nbd.sock").string() + " --ctl " +
                             (dir_ / c.path).string();
    const RunResult r = Run(args, "", /*timeout_s=*/60);
    EXPECT_EQ(r.exit_code, 2) << args << ": " << r.err;
    EXPECT_NE(r.err.find("cannot open the control socket: EINVAL: " +
                         (dir_ / c.path).string() + " " + c.says),
              std::string::npos)
        << args << ": " << r.err;
  }
}

// Output that cannot be written (a full disk: /dev/full) is a failure,
// not a success with a truncated report: exit 1 and a message.
TEST_F(ZtierCliTest, AnOutputWriteErrorIsAFailure) {
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  for (const char* args : {"--version", "--help", "help bench",
                           "status --help"}) {
    const std::string cmd = "cd '" + dir_.string() + "' && '" ZTIER_BIN "' " +
                            args + " >/dev/full 2>err.txt";
    const int status = std::system(cmd.c_str());
    ASSERT_TRUE(status != -1 && WIFEXITED(status)) << args;
    EXPECT_EQ(WEXITSTATUS(status), 1) << args;
    const std::string err = ReadFile(dir_ / "err.txt");
    EXPECT_NE(err.find("ztier: write error"), std::string::npos)
        << args << ": " << err;
  }
}

TEST_F(ZtierCliTest, UnknownFlagIsAUsageError) {
  const RunResult r = Run("bench engine --nosuch 1");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("unknown flag --nosuch"), std::string::npos) << r.err;
}

// A bad flag value is a usage error like an unknown flag: exit 2, and the
// line that says where the usage is.
TEST_F(ZtierCliTest, UsememBadBudgetIsAUsageError) {
  const RunResult r = Run("usemem --budget 0%");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--budget"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("ztier usemem --help"), std::string::npos) << r.err;
}

// A --backing that is no NBD URI is refused before anything is checked or
// made: even with no corpus, it is the usage error.
TEST_F(ZtierCliTest, WritebackBadBackingIsAUsageErrorFirst) {
  const RunResult r =
      Run("bench writeback --corpus nosuch.pages --backing /tmp/x.img");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--backing: not an NBD URI"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("ztier bench writeback --help"), std::string::npos)
      << r.err;
}

TEST_F(ZtierCliTest, UnknownCodecIsAUsageError) {
  const RunResult r = Run("bench engine --codec nosuch");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("unknown codec 'nosuch'"), std::string::npos) << r.err;
}

TEST_F(ZtierCliTest, MissingCorpusDirSaysHowToPassACorpus) {
  const RunResult r = Run("bench engine --corpus-dir nope --codec lz4");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("'nope'"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("is missing"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--corpus FILE"), std::string::npos) << r.err;
}

TEST_F(ZtierCliTest, EmptyCorpusDirSaysHowToPassACorpus) {
  fs::create_directory(dir_ / "empty");
  const RunResult r = Run("bench engine --corpus-dir empty --codec lz4");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("holds no *.pages.zst"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--corpus FILE"), std::string::npos) << r.err;
}

TEST_F(ZtierCliTest, HelpAndVersion) {
  RunResult r = Run("--help");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("bench"), std::string::npos) << r.out;
  r = Run("help");
  EXPECT_EQ(r.exit_code, 0);
  r = Run("bench engine --help");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("--corpus-dir"), std::string::npos) << r.out;
  r = Run("--version");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out.rfind("ztier ", 0), 0u) << r.out;
  r = Run("");
  EXPECT_EQ(r.exit_code, 2);
}

// `ztier bench ublk` checks its flags itself before it runs the guest's
// script (testing/guest/bench_ublk.py), so these boot no guest.
TEST_F(ZtierCliTest, BenchUblkHelpAndUsageErrors) {
  RunResult r = Run("bench --help");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("  ublk "), std::string::npos) << r.out;
  r = Run("bench ublk --help");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("--targets LIST"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--quick"), std::string::npos) << r.out;
  r = Run("bench ublk --nosuch");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("unknown flag --nosuch"), std::string::npos) << r.err;
  r = Run("bench ublk --runs 0");
  EXPECT_EQ(r.exit_code, 2);
}

// `ztier status` against a running `ztier serve`: zramctl's -b, -n, -o,
// --raw, --output-all, and the JSON report's counters and notes.
// Starts `ztier serve` in dir_ with `devices` (--device each), on
// dir_/nbd.sock and dir_/ctl.sock, and waits for its control socket; the
// caller stops it with StopServe.
pid_t StartServe(const fs::path& dir, std::vector<std::string> devices) {
  const std::string ctl = (dir / "ctl.sock").string();
  std::vector<std::string> argv = {
      ZTIER_BIN, "serve", "--unix", (dir / "nbd.sock").string(),
      "--ctl",   ctl,     "--quiet"};
  for (std::string& d : devices) {
    argv.insert(argv.end(), {"--device", std::move(d)});
  }
  const pid_t pid =
      ztier::testing::SpawnWithLog(argv, (dir / "serve.log").string());
  for (int i = 0; pid > 0 && i < 2000 && !fs::exists(ctl); ++i) usleep(10000);
  return fs::exists(ctl) ? pid : -1;
}

void StopServe(pid_t pid) {
  kill(pid, SIGTERM);
  int status = 0;
  waitpid(pid, &status, 0);
}

TEST_F(ZtierCliTest, StatusTakesZramctlFlagsAndReportsCounters) {
  const pid_t pid = StartServe(dir_, {"zram0:16M"});
  ASSERT_GT(pid, 0) << ReadFile(dir_ / "serve.log");
  const std::string c = "status --ctl '" + (dir_ / "ctl.sock").string() + "' ";

  RunResult r = Run(c + "-b -n -o NAME,DISKSIZE,zero-pages");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "zram0 16777216 0\n");  // no header: no header widths
  r = Run(c + "--raw --bytes");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(
      r.out.rfind("NAME ALGORITHM DISKSIZE DATA COMPR TOTAL STREAMS CLIENTS\n"
                  "zram0 lz4 16777216 0 0 ",
                  0),
      0u)
      << r.out;
  r = Run(c + "--output-all --raw -n");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("zram0 16M 0B 0B lz4 ", 0), 0u) << r.out;
  EXPECT_NE(r.out.find(" 0.00  0\n"), std::string::npos) << r.out;
  r = Run(c);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("NAME  ALGORITHM DISKSIZE", 0), 0u) << r.out;
  r = Run(c + "--json");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  for (const char* want :
       {"\"failed_reads\":0", "\"failed_writes\":0", "\"invalid_io\":0",
        "\"notify_free\":0", "\"pages_compacted\":0", "\"huge_pages_since\":0",
        "\"writeback_limit\":0", "\"writeback_limit_enable\":0",
        "\"notes\":{}"}) {
    EXPECT_NE(r.out.find(want), std::string::npos) << want << "\n" << r.out;
  }
  // Usage errors: an unknown column, -o with --output-all, a bad short flag.
  r = Run(c + "-o NAME,NOPE");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("NOPE"), std::string::npos) << r.err;
  EXPECT_EQ(Run(c + "-o NAME --output-all").exit_code, 2);
  EXPECT_EQ(Run(c + "-q").exit_code, 2);
  r = Run("status --help");
  EXPECT_NE(r.out.find("-b, --bytes"), std::string::npos) << r.out;
  StopServe(pid);
}

TEST_F(ZtierCliTest, CtlTakesTheDeviceFirstAsSysfsPathsDo) {
  const pid_t pid = StartServe(dir_, {"zram0:16M", "zram1", "swap0:4M"});
  ASSERT_GT(pid, 0) << ReadFile(dir_ / "serve.log");
  const std::string c = "ctl --ctl '" + (dir_ / "ctl.sock").string() + "' ";
  RunResult r = Run(c + "zram1 disksize 8M");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  r = Run(c + "zram1/disksize");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "8388608\n");
  r = Run(c + "--device zram1 disksize");
  EXPECT_EQ(r.out, "8388608\n") << r.err;
  r = Run(c + "disksize");  // --device's default, zram0
  EXPECT_EQ(r.out, "16777216\n") << r.err;
  r = Run(c + "--device zram1 zram1 initstate");  // the same device twice
  EXPECT_EQ(r.out, "1\n") << r.err;
  // Any device name with a slash; without, only zramN names lead.
  r = Run(c + "swap0/disksize");
  EXPECT_EQ(r.out, "4194304\n") << r.err;
  r = Run(c + "swap0 disksize");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("ENOENT"), std::string::npos) << r.err;
  // Two different devices, or none but an attribute missing: usage errors.
  r = Run(c + "--device zram0 zram1/disksize");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("two devices: --device zram0 and zram1"),
            std::string::npos)
      << r.err;
  r = Run(c + "--device=zram0 zram1 reset 1");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("two devices"), std::string::npos) << r.err;
  r = Run(c + "zram1");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("missing ATTRIBUTE"), std::string::npos) << r.err;
  // A slash with nothing before or after it: usage errors, not a control
  // operation "mm_stat" nor an attribute ''.
  for (const char* word : {"/mm_stat", "zram1/"}) {
    r = Run(c + word);
    EXPECT_EQ(r.exit_code, 2) << word << ": " << r.err;
    EXPECT_NE(r.err.find("want DEVICE/ATTRIBUTE"), std::string::npos)
        << word << ": " << r.err;
  }
  // A device the server does not have is the server's ENODEV.
  r = Run(c + "zram7/disksize");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("ENODEV: no device 'zram7'"), std::string::npos)
      << r.err;
  StopServe(pid);
}

}  // namespace
