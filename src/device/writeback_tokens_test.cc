// writeback_tokens_test.cc: zram's `writeback` input (ParseWritebackTokens).
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "ztier/device.h"

namespace ztier {
namespace {

constexpr std::uint64_t kPages = 1000;

// A scan as (filter, lo, hi), which gtest compares and prints.
using Scan = std::tuple<unsigned, std::uint64_t, std::uint64_t>;
using Scans = std::vector<Scan>;

Scans Parse(std::string_view text) {
  auto r = ParseWritebackTokens(text, kPages);
  EXPECT_TRUE(r.has_value()) << text << ": " << r.error().ToString();
  Scans out;
  for (const WritebackScan& s : r.value_or(std::vector<WritebackScan>{})) {
    out.emplace_back(s.filter, s.lo, s.hi);
  }
  return out;
}

StatusCode ErrorOf(std::string_view text, std::uint64_t pages = kPages) {
  auto r = ParseWritebackTokens(text, pages);
  return r.has_value() ? StatusCode::kOk : r.error().code();
}

TEST(WritebackTokensTest, ModesScanTheWholeDevice) {
  const unsigned kHugeIdle = kWritebackIdle | kWritebackHuge;
  EXPECT_EQ(Parse("idle"), (Scans{{kWritebackIdle, 0, kPages}}));
  EXPECT_EQ(Parse("huge"), (Scans{{kWritebackHuge, 0, kPages}}));
  EXPECT_EQ(Parse("huge_idle"), (Scans{{kHugeIdle, 0, kPages}}));
  EXPECT_EQ(Parse("incompressible"),
            (Scans{{kWritebackIncompressible, 0, kPages}}));
  // Trailing newline, as `echo idle >` writes it; surrounding spaces.
  EXPECT_EQ(Parse("idle\n"), (Scans{{kWritebackIdle, 0, kPages}}));
  EXPECT_EQ(Parse("  huge \n"), (Scans{{kWritebackHuge, 0, kPages}}));
}

TEST(WritebackTokensTest, TypeEqualsMode) {
  EXPECT_EQ(Parse("type=idle"), (Scans{{kWritebackIdle, 0, kPages}}));
  EXPECT_EQ(Parse("type=huge"), (Scans{{kWritebackHuge, 0, kPages}}));
  EXPECT_EQ(Parse("type=huge_idle"),
            (Scans{{kWritebackIdle | kWritebackHuge, 0, kPages}}));
  EXPECT_EQ(Parse("type=incompressible\n"),
            (Scans{{kWritebackIncompressible, 0, kPages}}));
  EXPECT_EQ(ErrorOf("type=nosuch"), StatusCode::kInvalidArgument);
  EXPECT_EQ(ErrorOf("type="), StatusCode::kInvalidArgument);
  EXPECT_EQ(ErrorOf("type"), StatusCode::kInvalidArgument);
}

TEST(WritebackTokensTest, PageIndexScansOnePage) {
  EXPECT_EQ(Parse("page_index=0"), (Scans{{0, 0, 1}}));
  EXPECT_EQ(Parse("page_index=999\n"), (Scans{{0, 999, 1000}}));
  EXPECT_EQ(Parse("page_index=+7"), (Scans{{0, 7, 8}}));  // as kstrtoul
}

TEST(WritebackTokensTest, PageIndexesAreInclusive) {
  EXPECT_EQ(Parse("page_indexes=1-100"), (Scans{{0, 1, 101}}));
  EXPECT_EQ(Parse("page_indexes=5-5"), (Scans{{0, 5, 6}}));
  EXPECT_EQ(Parse("page_indexes=0-999"), (Scans{{0, 0, 1000}}));
}

TEST(WritebackTokensTest, IndexTokensMixAndAccumulate) {
  EXPECT_EQ(Parse("page_indexes=1-100 page_indexes=200-300"),
            (Scans{{0, 1, 101}, {0, 200, 301}}));
  EXPECT_EQ(Parse("page_index=3\npage_indexes=10-12  page_index=500"),
            (Scans{{0, 3, 4}, {0, 10, 13}, {0, 500, 501}}));
}

TEST(WritebackTokensTest, AModeEndsParsing) {
  // Whatever follows a mode is ignored, even garbage, as zram does.
  EXPECT_EQ(Parse("idle page_index=5"), (Scans{{kWritebackIdle, 0, kPages}}));
  EXPECT_EQ(Parse("type=huge nonsense page_index=abc"),
            (Scans{{kWritebackHuge, 0, kPages}}));
  // A mode after index tokens rescans the last range, whose allocated slots
  // the index scan already picked: nothing to add.
  EXPECT_EQ(Parse("page_index=5 idle"), (Scans{{0, 5, 6}}));
  EXPECT_EQ(Parse("page_indexes=1-3 type=huge page_index=9"),
            (Scans{{0, 1, 4}}));
}

TEST(WritebackTokensTest, MalformedIsInvalidArgument) {
  EXPECT_EQ(ErrorOf(""), StatusCode::kInvalidArgument);
  EXPECT_EQ(ErrorOf(" \n"), StatusCode::kInvalidArgument);
  EXPECT_EQ(ErrorOf("bogus"), StatusCode::kInvalidArgument);
  EXPECT_EQ(ErrorOf("idel"), StatusCode::kInvalidArgument);
  EXPECT_EQ(ErrorOf("mode=idle"), StatusCode::kInvalidArgument);
  EXPECT_EQ(ErrorOf("page_index=abc"), StatusCode::kInvalidArgument);
  EXPECT_EQ(ErrorOf("page_index=5x"), StatusCode::kInvalidArgument);
  EXPECT_EQ(ErrorOf("page_index=-1"), StatusCode::kInvalidArgument);
  EXPECT_EQ(ErrorOf("page_index="), StatusCode::kInvalidArgument);
  EXPECT_EQ(ErrorOf("page_index"), StatusCode::kInvalidArgument);
  EXPECT_EQ(ErrorOf("page_indexes=5"), StatusCode::kInvalidArgument);
  EXPECT_EQ(ErrorOf("page_indexes=-5"), StatusCode::kInvalidArgument);
  EXPECT_EQ(ErrorOf("page_indexes=1-x"), StatusCode::kInvalidArgument);
  EXPECT_EQ(ErrorOf("page_indexes=1-2-3"), StatusCode::kInvalidArgument);
  // An error anywhere before the mode fails the whole input.
  EXPECT_EQ(ErrorOf("page_index=1 bogus idle"), StatusCode::kInvalidArgument);
}

TEST(WritebackTokensTest, BadIndexIsOutOfRange) {
  EXPECT_EQ(ErrorOf("page_index=1000"), StatusCode::kOutOfRange);
  EXPECT_EQ(ErrorOf("page_index=99999999999999999999999"),
            StatusCode::kOutOfRange);
  EXPECT_EQ(ErrorOf("page_indexes=1000-1001"), StatusCode::kOutOfRange);
  EXPECT_EQ(ErrorOf("page_indexes=0-1000"), StatusCode::kOutOfRange);
  EXPECT_EQ(ErrorOf("page_indexes=9-3"), StatusCode::kOutOfRange);
  EXPECT_EQ(ErrorOf("page_index=0", /*pages=*/0), StatusCode::kOutOfRange);
  EXPECT_EQ(ErrorOf("page_index=2 page_index=1000"), StatusCode::kOutOfRange);
}

TEST(WritebackTokensTest, ErrorsNameTheToken) {
  auto r = ParseWritebackTokens("page_index=1 page_index=abc", kPages);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message().find("page_index=abc"), std::string::npos)
      << r.error().message();
  r = ParseWritebackTokens("page_indexes=2-1000", kPages);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message().find("1000"), std::string::npos)
      << r.error().message();
}

}  // namespace
}  // namespace ztier
