// recompress_tokens_test.cc: zram's recomp_algorithm, recompress and
// algorithm_params token syntax (recompress_tokens.h), every token and
// error, against drivers/block/zram/zram_drv.c's parse (Linux 6.12).
#include "ztier/recompress_tokens.h"

#include <gtest/gtest.h>

#include <string>
#include <tuple>

namespace ztier {
namespace {

template <typename T>
StatusCode CodeOf(const Result<T>& r) {
  return r.has_value() ? StatusCode::kOk : r.error().code();
}

TEST(RecompAlgorithmTokensTest, AlgoAndPriority) {
  auto r = ParseRecompAlgorithmTokens("algo=zstd\n");
  ASSERT_TRUE(r.has_value()) << r.error().ToString();
  EXPECT_EQ(r->algo, "zstd");
  EXPECT_EQ(r->priority, 1);  // the default
  r = ParseRecompAlgorithmTokens("priority=3 algo=deflate");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(std::tie(r->algo, r->priority), std::make_tuple("deflate", 3));
  // Unknown keys are ignored; the last of a repeated key wins.
  r = ParseRecompAlgorithmTokens("algo=lz4 level=9 priority=1 priority=+2");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(std::tie(r->algo, r->priority), std::make_tuple("lz4", 2));
}

TEST(RecompAlgorithmTokensTest, Errors) {
  const struct {
    const char* text;
    StatusCode code;
  } kCases[] = {
      {"", StatusCode::kInvalidArgument},             // no algo
      {"priority=1", StatusCode::kInvalidArgument},   // no algo
      {"zstd", StatusCode::kInvalidArgument},         // no value
      {"algo=", StatusCode::kInvalidArgument},        // empty value
      {"algo=zstd priority", StatusCode::kInvalidArgument},
      {"algo=zstd priority=0", StatusCode::kInvalidArgument},
      {"algo=zstd priority=4", StatusCode::kInvalidArgument},
      {"algo=zstd priority=-1", StatusCode::kInvalidArgument},
      {"algo=zstd priority=x", StatusCode::kInvalidArgument},
      {"algo=zstd priority=99999999999", StatusCode::kOutOfRange},
  };
  for (const auto& c : kCases) {
    EXPECT_EQ(CodeOf(ParseRecompAlgorithmTokens(c.text)), c.code) << c.text;
  }
}

TEST(RecompressTokensTest, EveryToken) {
  auto r = ParseRecompressTokens("");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->filter, 0u);
  EXPECT_EQ(r->max_pages, UINT64_MAX);
  EXPECT_EQ(r->threshold, 0u);
  EXPECT_EQ(r->algo, "");
  EXPECT_EQ(r->priority, 1u);
  EXPECT_EQ(r->priority_end, 4u);
  r = ParseRecompressTokens(
      "type=huge_idle max_pages=+10 threshold=3000 algo=zstd priority=2\n");
  ASSERT_TRUE(r.has_value()) << r.error().ToString();
  EXPECT_EQ(r->filter, unsigned{kRecompressIdle | kRecompressHuge});
  EXPECT_EQ(r->max_pages, 10u);
  EXPECT_EQ(r->threshold, 3000u);
  EXPECT_EQ(r->algo, "zstd");
  EXPECT_EQ(std::tie(r->priority, r->priority_end), std::make_tuple(2u, 3u));
  EXPECT_EQ(ParseRecompressTokens("type=idle")->filter, kRecompressIdle);
  EXPECT_EQ(ParseRecompressTokens("type=huge")->filter, kRecompressHuge);
  EXPECT_EQ(ParseRecompressTokens("max_pages=18446744073709551615")->max_pages,
            UINT64_MAX);
  EXPECT_EQ(ParseRecompressTokens("threshold=4294967295")->threshold,
            UINT32_MAX);
  // priority=0 reads as 1; priority=3 ends at 4; a larger one too.
  r = ParseRecompressTokens("priority=0");
  EXPECT_EQ(std::tie(r->priority, r->priority_end), std::make_tuple(1u, 2u));
  r = ParseRecompressTokens("priority=3");
  EXPECT_EQ(std::tie(r->priority, r->priority_end), std::make_tuple(3u, 4u));
  r = ParseRecompressTokens("priority=7");
  EXPECT_EQ(std::tie(r->priority, r->priority_end), std::make_tuple(7u, 4u));
  // Unknown keys are ignored, as the kernel's.
  EXPECT_TRUE(ParseRecompressTokens("mode=idle foo=bar").has_value());
  // A bad type after a good one keeps the good one (the kernel's !mode).
  EXPECT_EQ(ParseRecompressTokens("type=huge type=nosuch")->filter,
            kRecompressHuge);
}

TEST(RecompressTokensTest, Errors) {
  // "idle": no value (the legacy form); "type=idle bogus": a key without.
  for (const char* text :
       {"idle", "type", "type=", "type=incompressible", "type=IDLE",
        "max_pages=", "max_pages=-1", "max_pages=1k", "max_pages=0x10",
        "threshold=abc", "priority=-1", "algo=", "type=idle bogus"}) {
    EXPECT_EQ(CodeOf(ParseRecompressTokens(text)), StatusCode::kInvalidArgument)
        << text;
  }
  for (const char* text : {"max_pages=18446744073709551616",
                           "threshold=4294967296", "priority=4294967296"}) {
    EXPECT_EQ(CodeOf(ParseRecompressTokens(text)), StatusCode::kOutOfRange)
        << text;
  }
}

// lz4 primary; zstd at 1, deflate at 3 (none at 2).
const PriorityAlgorithms kAlgs = {"lz4", "zstd", "", "deflate"};

std::tuple<int, int> Range(std::string_view text,
                           const PriorityAlgorithms& algs = kAlgs) {
  auto tokens = ParseRecompressTokens(text);
  EXPECT_TRUE(tokens.has_value()) << text;
  if (!tokens) return {-1, -1};
  auto r = ResolveRecompress(*tokens, algs);
  EXPECT_TRUE(r.has_value()) << text << ": " << r.error().ToString();
  if (!r) return {-1, -1};
  return {r->priority, r->priority_end};
}

StatusCode ResolveError(std::string_view text,
                        const PriorityAlgorithms& algs = kAlgs) {
  auto tokens = ParseRecompressTokens(text);
  if (!tokens) return tokens.error().code();
  return CodeOf(ResolveRecompress(*tokens, algs));
}

TEST(ResolveRecompressTest, AsTheKernel) {
  // The highest configured priority is 3: prio_max 4 (the kernel's would
  // be 3, its count of algorithms; see recompress_tokens.h).
  EXPECT_EQ(Range(""), std::make_tuple(1, 4));
  EXPECT_EQ(Range("priority=1"), std::make_tuple(1, 2));
  EXPECT_EQ(Range("priority=0"), std::make_tuple(1, 2));
  EXPECT_EQ(Range("priority=2"), std::make_tuple(2, 3));
  EXPECT_EQ(Range("priority=3"), std::make_tuple(3, 4));
  // algo= picks exactly its priority, searching from `priority` up.
  EXPECT_EQ(Range("algo=zstd"), std::make_tuple(1, 2));
  EXPECT_EQ(Range("algo=deflate priority=2", {"lz4", "zstd", "lzo", "deflate"}),
            std::make_tuple(3, 4));
  // With a gap, deflate at priority 3 is still reached.
  EXPECT_EQ(Range("algo=deflate"), std::make_tuple(3, 4));
  EXPECT_EQ(ResolveError("algo=zstd priority=2"),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(ResolveError("priority=4"), StatusCode::kInvalidArgument);
  EXPECT_EQ(ResolveError("", {"lz4", "", "", ""}),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(ResolveError("algo=lz4hc"), StatusCode::kInvalidArgument);
  EXPECT_EQ(ResolveError("algo=lz4"), StatusCode::kInvalidArgument);  // prio 0
  // The request carries the rest.
  auto tokens = ParseRecompressTokens("type=idle max_pages=5 threshold=100");
  auto r = ResolveRecompress(*tokens, {"lz4", "zstd", "", ""});
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->filter, kRecompressIdle);
  EXPECT_EQ(r->max_pages, 5u);
  EXPECT_EQ(r->threshold, 100u);
  EXPECT_EQ(std::tie(r->priority, r->priority_end), std::make_tuple(1, 2));
  // No secondary algorithm: nothing in range.
  EXPECT_EQ(ResolveError("", {"lz4", "", "", ""}),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(ResolveError("priority=4294967295"), StatusCode::kInvalidArgument);
}

TEST(AlgorithmParamsTargetTest, PriorityAndAlgoSelect) {
  auto t = SelectAlgorithmParams("level=9", kAlgs);
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(std::tie(t->priority, t->params), std::make_tuple(0, "level=9"));
  t = SelectAlgorithmParams("priority=1 level=19 dict=/d", kAlgs);
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(std::tie(t->priority, t->params),
            std::make_tuple(1, "level=19 dict=/d"));
  // algo= wins over priority=; lzo-rle names lzo.
  t = SelectAlgorithmParams("priority=1 algo=deflate level=3", kAlgs);
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(std::tie(t->priority, t->params), std::make_tuple(3, "level=3"));
  t = SelectAlgorithmParams("algo=lzo-rle level=1",
                            {"lz4", "", "lzo", ""});
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->priority, 2);
  // A priority with no algorithm yet is accepted (checked at disksize).
  t = SelectAlgorithmParams("priority=2 level=1", kAlgs);
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->priority, 2);
  EXPECT_EQ(CodeOf(SelectAlgorithmParams("algo=lz4hc level=1", kAlgs)),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(CodeOf(SelectAlgorithmParams("priority=4 level=1", kAlgs)),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(CodeOf(SelectAlgorithmParams("priority=-1", kAlgs)),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(CodeOf(SelectAlgorithmParams("priority=", kAlgs)),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ztier
