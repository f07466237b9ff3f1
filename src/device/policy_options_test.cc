// policy_options_test.cc: the post-processing policy's tokens
// (ParsePolicyOptions in ztier/policy.h).
#include <gtest/gtest.h>

#include <string>

#include "ztier/policy.h"

namespace ztier {
namespace {

PolicyOptions Parse(std::string_view text) {
  auto r = ParsePolicyOptions(text);
  EXPECT_TRUE(r.has_value()) << text << ": " << r.error().ToString();
  return r.value_or(PolicyOptions{});
}

TEST(PolicyOptionsTest, EmptyKeepsTheDefaults) {
  const PolicyOptions o = Parse("");
  EXPECT_EQ(o.period_s, 60u);
  EXPECT_EQ(o.idle_age_s, 600u);
  EXPECT_TRUE(o.recompress);
  EXPECT_EQ(o.recompress_rate, 0u);
  EXPECT_EQ(o.recompress_cpu, 25u);  // the default budget
  EXPECT_EQ(o.recompress_params, "");
  EXPECT_TRUE(o.writeback);
  EXPECT_EQ(o.writeback_age_s, 3600u);
  EXPECT_EQ(o.writeback_daily, 400ull << 20);
  EXPECT_EQ(o.train_dict_pages, 0u);  // never
  EXPECT_EQ(o.train_dict_size, 16u << 10);
  EXPECT_EQ(o.compact_min, 1u << 20);
}

TEST(PolicyOptionsTest, EveryKey) {
  const PolicyOptions o = Parse(
      "  period=30s idle_age=10m writeback_age=2h recompress=off\n"
      "writeback=no recompress_rate=2000 writeback_daily=1G busy_pages=500 "
      "busy_pause=50ms busy_give_up=3s recompress_algo=zstd "
      "recompress_priority=2 recompress_threshold=2K recompress_max=100 "
      "train_dict_pages=4096 train_dict_size=32K compact_min=4M");
  EXPECT_EQ(o.period_s, 30u);
  EXPECT_EQ(o.idle_age_s, 600u);
  EXPECT_EQ(o.writeback_age_s, 7200u);
  EXPECT_FALSE(o.recompress);
  EXPECT_FALSE(o.writeback);
  EXPECT_EQ(o.recompress_rate, 2000u);
  EXPECT_EQ(o.recompress_cpu, 0u);  // a rate replaces the default budget
  EXPECT_EQ(o.writeback_daily, 1ull << 30);
  EXPECT_EQ(o.busy_pages, 500u);
  EXPECT_EQ(o.busy_pause_ms, 50u);
  EXPECT_EQ(o.busy_give_up_ms, 3000u);
  EXPECT_EQ(o.recompress_params,
            "algo=zstd priority=2 threshold=2048 max_pages=100");
  EXPECT_EQ(o.train_dict_pages, 4096u);
  EXPECT_EQ(o.train_dict_size, 32u << 10);
  EXPECT_EQ(o.compact_min, 4u << 20);
}

TEST(PolicyOptionsTest, DurationsAndShares) {
  struct Case {
    const char* text;
    std::uint64_t period_s;
  } cases[] = {{"period=90", 90}, {"period=90s", 90}, {"period=2m", 120},
               {"period=1h", 3600}, {"period=1d", 86400}};
  for (const Case& c : cases) EXPECT_EQ(Parse(c.text).period_s, c.period_s);
  EXPECT_EQ(Parse("recompress_cpu=40%").recompress_cpu, 40u);
  EXPECT_EQ(Parse("recompress_cpu=100").recompress_cpu, 100u);
  EXPECT_EQ(Parse("writeback_daily=none").writeback_daily, UINT64_MAX);
  EXPECT_EQ(Parse("writeback_daily=400M").writeback_daily, 400ull << 20);
  EXPECT_EQ(Parse("writeback_daily=0").writeback_daily, 0u);
  EXPECT_EQ(Parse("writeback_daily=4K").writeback_daily, 4096u);
  EXPECT_EQ(Parse("idle_age=0").idle_age_s, 0u);
  EXPECT_EQ(Parse("busy_pages=0").busy_pages, 0u);  // never yields
  EXPECT_EQ(Parse("compact_min=none").compact_min, UINT64_MAX);
  EXPECT_EQ(Parse("compact_min=0").compact_min, 0u);  // any page
}

TEST(PolicyOptionsTest, EveryBadTokenIsNamed) {
  const char* bad[] = {
      "period",                     // no '='
      "period=",                    // no value
      "=5",                         // no key
      "period=0",                   // no passes
      "period=10min",               // unknown suffix
      "period=5ms",                 // ms only for busy_pause / busy_give_up
      "period=-5",                  // not a number
      "idle_age=1e3",               // not digits
      "idle_age=50000d",            // past the store's 32-bit seconds
      "recompress=maybe",           // not on/off
      "writeback=2",                // not on/off
      "recompress_rate=0",          // no pages
      "recompress_rate=fast",       // not a count
      "recompress_cpu=0%",          // below 1%
      "recompress_cpu=101%",        // above one core
      "recompress_cpu=25%%",        // malformed
      "recompress_priority=0",      // 1..3
      "recompress_priority=4",      // 1..3
      "recompress_threshold=2Q",    // not a size
      "recompress_max=-1",          // not a count
      "writeback_daily=lots",       // not a size
      "writeback_daily=100",        // below one page: 0 pages a day
      "busy_pause=0ms",             // a pause that never waits
      "busy_pause=10m",             // a pass asleep, holding its device
      "busy_give_up=2h",            // over an hour
      "recompress_algo=zsdt",       // no such codec: every pass would fail
      "recompress_threshold=8G",    // not an object's size
      "recompress_threshold=4096",  // a whole page
      "busy_pages=many",            // not a count
      "train_dict_pages=some",      // not a count
      "train_dict_size=512",        // below 1K
      "train_dict_size=2M",         // above 1M
      "compact_min=lots",           // not a size
      "writeback_dayly=400M",       // unknown key
  };
  for (const char* text : bad) {
    auto r = ParsePolicyOptions(std::string("period=60s ") + text);
    ASSERT_FALSE(r.has_value()) << text;
    EXPECT_EQ(r.error().code(), StatusCode::kInvalidArgument) << text;
    const std::string token = std::string(text);
    EXPECT_NE(r.error().message().find("'" + token + "'"), std::string::npos)
        << text << ": " << r.error().message();
  }
}

TEST(PolicyOptionsTest, RateAndCpuAreOneOrTheOther) {
  auto r = ParsePolicyOptions("recompress_rate=100 recompress_cpu=20%");
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.error().message().find("not both"), std::string::npos);
}

}  // namespace
}  // namespace ztier
