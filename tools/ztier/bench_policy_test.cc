// File: tools/ztier/bench_policy_test.cc
//
// `ztier bench policy` end to end on the built binary (ZTIER_BIN): a small
// run whose policy has work to do, its JSON, and a bad --policy.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

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

}  // namespace
}  // namespace ztier
