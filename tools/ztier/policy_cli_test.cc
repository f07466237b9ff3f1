// File: tools/ztier/policy_cli_test.cc
//
// The post-processing policy end to end on the built binary (ZTIER_BIN):
// `ztier serve --policy` with a real NBD client (nbdcopy) and the control
// socket, a bad --policy; `ztier bench policy`, a small run whose policy
// has work to do and its JSON.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "testing/serve_process.h"
#include "testing/test_util.h"

namespace ztier {
namespace {

TEST(BenchPolicyTest, SmallRunReportsTheRatioAndThePolicysWork) {
  testing::ScopedTempDir dir;
  const std::string json = dir.File("policy.json");
  // idle_age=0 and writeback_age=0: the cold pages are idle from the
  // second pass on, so a 3 s run recompresses and writes back.
  const testing::Shell sh = testing::Sh(
      std::string(ZTIER_BIN) +
      " bench policy --size 4M --hot-pages 64 --seconds 3 --runs 1 "
      "--policy 'period=1s idle_age=0 writeback_age=0 "
      "writeback_daily=none' --json " + json);
  ASSERT_EQ(sh.exit_code, 0) << sh.out;
  EXPECT_NE(sh.out.find("median read latency, policy / none (target <= "
                           "1.2): "),
            std::string::npos)
      << sh.out;
  std::ifstream in(json);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string doc = ss.str();
  EXPECT_NE(doc.find("\"benchmark\": \"ztier bench policy\""), std::string::npos)
      << doc;
  // The policy row's recompressed and written back pages are not 0; the
  // none row's are.
  const std::size_t row = doc.find("\"variant\": \"policy\"");
  ASSERT_NE(row, std::string::npos) << doc;
  EXPECT_EQ(doc.find("\"recompressed_median\": 0,", row), std::string::npos)
      << doc;
  EXPECT_EQ(doc.find("\"written_back_median\": 0,", row), std::string::npos)
      << doc;
  EXPECT_NE(doc.find("\"recompressed_median\": 0,"), std::string::npos) << doc;
}

TEST(BenchPolicyTest, BadPolicyIsAUsageErrorNamingTheToken) {
  const testing::Shell sh = testing::Sh(
      std::string(ZTIER_BIN) + " bench policy --policy 'idle_age=10min'");
  EXPECT_EQ(sh.exit_code, 2) << sh.out;
  EXPECT_NE(sh.out.find("'idle_age=10min'"), std::string::npos) << sh.out;
}

TEST(ServePolicyTest, PassesRecompressAndWriteBackWithinTheBudget) {
  if (!testing::Have("nbdcopy")) GTEST_SKIP() << "nbdcopy not on PATH";
  testing::ScopedTempDir dir;
  const std::string sock = dir.File("s.sock"), ctl = dir.File("c.ctl");
  const std::string data = dir.File("data.img"), back = dir.File("back.img");
  ASSERT_EQ(testing::Sh("zstd -dcq '" + testing::CorpusDir() +
                        "/anon-python.pages.zst' > " + data).exit_code, 0);
  testing::ServeProcess serve(
      ZTIER_BIN,
      {"--device", "zram0", "--unix", sock, "--ctl", ctl, "--policy",
       "period=1s idle_age=0 writeback_age=0 writeback_daily=4M"},
      dir.File("serve.log"));
  ASSERT_TRUE(serve.WaitForSockets({sock, ctl})) << serve.Log();
  const std::string c = std::string(ZTIER_BIN) + " ctl --ctl " + ctl + " ";
  for (const std::string& cmd : std::vector<std::string>{
           "recomp_algorithm 'algo=zstd priority=1'",
        "backing_dev " + dir.File("zram0.wb"), "disksize 32M"}) {
    const testing::Shell sh = testing::Sh(c + cmd);
    ASSERT_EQ(sh.exit_code, 0) << cmd << ": " << sh.out;
  }
  const std::string uri = "'nbd+unix:///zram0?socket=" + sock + "'";
  ASSERT_EQ(testing::Sh("nbdcopy " + data + " " + uri).exit_code, 0);
  // 4M a day: 1024 pages written back, then the budget stops it. A pass
  // may begin while nbdcopy is still writing (slow under sanitizers), so the
  // 1024 can be spread over several passes; bd_stat counts them all.
  EXPECT_TRUE(serve.WaitForLog("written back (0 pages of today's "
                               "budget left)"))
      << serve.Log();
  EXPECT_NE(serve.Log().find("daily writeback budget re-armed: 1024 pages"),
            std::string::npos);
  EXPECT_NE(testing::Sh(c + "bd_stat").out.find("    1024"), std::string::npos);
  EXPECT_EQ(testing::Sh(c + "writeback_limit").out, "0\n");
  // Every page reads back as written.
  ASSERT_EQ(testing::Sh("nbdcopy " + uri + " " + back).exit_code, 0);
  EXPECT_EQ(testing::Sh("cmp -n $(stat -c %s " + data + ") " + data + " " +
                        back).exit_code,
            0);
  // A pass recompressed pages with zstd and said so. Not necessarily the
  // pass that spent the budget: one that began while nbdcopy was still
  // writing, or whose recompression was paused under its CPU share, can
  // write back with nothing recompressed; the pages left in RAM stay idle
  // for the next passes (one a second), so wait for one (at most 30 s).
  const std::regex recompressed(
      "zram0: policy pass: [0-9]+ idle pages examined, [1-9][0-9]* "
      "recompressed, [1-9][0-9]* bytes saved");
  EXPECT_TRUE(serve.WaitForLog(
      [&](const std::string& log) {
        return std::regex_search(log, recompressed);
      },
      std::chrono::seconds(30)))
      << serve.Log();
  EXPECT_EQ(serve.Stop(), 0) << serve.Log();  // SIGTERM stops the policy
}

// `ztier ctl recompress` and `ztier ctl compact` without a value run, as
// zram's `echo > recompress` (every page) and `echo > compact` do.
TEST(ServePolicyTest, RecompressAndCompactNeedNoValue) {
  testing::ScopedTempDir dir;
  const std::string sock = dir.File("s.sock"), ctl = dir.File("c.ctl");
  testing::ServeProcess serve(
      ZTIER_BIN,
      {"--device", "zram0:16M", "--recomp-algorithm", "zstd", "--unix", sock,
       "--ctl", ctl},
      dir.File("serve.log"));
  ASSERT_TRUE(serve.WaitForSockets({sock, ctl})) << serve.Log();
  const std::string c = std::string(ZTIER_BIN) + " ctl --ctl " + ctl + " ";
  for (const char* attr : {"recompress", "compact"}) {
    const testing::Shell sh = testing::Sh(c + attr);
    EXPECT_EQ(sh.exit_code, 0) << attr << ": " << sh.out;
  }
  // A show-only attribute given a value is still refused.
  const testing::Shell bad = testing::Sh(c + "mm_stat 1");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.out.find("EACCES"), std::string::npos) << bad.out;
}

TEST(ServePolicyTest, BadPolicyIsAUsageErrorNamingTheToken) {
  const testing::Shell sh = testing::Sh(std::string(ZTIER_BIN) +
                                        " serve --policy 'writeback_dayly=1G'");
  EXPECT_EQ(sh.exit_code, 2) << sh.out;
  EXPECT_NE(sh.out.find("'writeback_dayly=1G': unknown key"), std::string::npos)
      << sh.out;
}

}  // namespace
}  // namespace ztier
