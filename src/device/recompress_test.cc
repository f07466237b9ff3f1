// recompress_test.cc: recomp_algorithm, recompress, algorithm_params with
// priority=/algo=, block_state, and recompression's effect on mm_stat, on a
// known sequence of operations through Device over a real PageStore
// (zram's semantics: drivers/block/zram/zram_drv.c, Linux 6.12). Neither
// this machine's kernel nor the test VM's has CONFIG_ZRAM_MULTI_COMP, so
// these expectations come from the kernel's sources, not a kernel run.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "testing/test_util.h"
#include "ztier/device.h"

namespace ztier {
namespace {

using Page = std::vector<std::byte>;

// Pages lz4 cannot bring under the huge class size but zstd halves: bytes
// drawn uniformly from 16 values (4 bits of entropy, few repeats to match).
Page NibblePage(std::uint32_t seed) {
  Page p(kPageSize);
  std::mt19937 rng(seed);
  for (auto& b : p) b = static_cast<std::byte>('a' + rng() % 16);
  return p;
}

// Pages no codec compresses.
Page RandomPage(std::uint32_t seed) {
  Page p(kPageSize);
  std::mt19937_64 rng(seed);
  for (auto& b : p) b = static_cast<std::byte>(rng());
  return p;
}

// Text-like pages: words from a small vocabulary, which zstd's levels
// compress to clearly different sizes.
Page WordPage(std::uint32_t seed) {
  static const char* const kWords[] = {
      "page ",  "zram ",   "store ",   "idle ",  "huge ",  "slot ",
      "codec ", "memory ", "kernel ",  "swap ",  "pool ",  "class ",
      "write ", "read ",   "priority ", "level ", "recompress ", "object "};
  std::mt19937 rng(seed);
  std::string text;
  while (text.size() < kPageSize) {
    text += kWords[rng() % std::size(kWords)];
    if (rng() % 7 == 0) text += std::to_string(rng() % 100000) + "\n";
  }
  Page p(kPageSize);
  std::memcpy(p.data(), text.data(), kPageSize);
  return p;
}

void WritePage(Device& d, std::uint64_t index, const Page& p) {
  ASSERT_OK(d.Write(index * kPageSize, p));
}

Page ReadPage(Device& d, std::uint64_t index) {
  Page p(kPageSize);
  EXPECT_OK(d.Read(index * kPageSize, p));
  return p;
}

// mm_stat's nine columns.
std::vector<std::uint64_t> MmStat(const Device& d) {
  std::istringstream in(d.ShowMmStat());
  std::vector<std::uint64_t> v;
  for (std::uint64_t x; in >> x;) v.push_back(x);
  EXPECT_EQ(v.size(), 9u);
  v.resize(9);
  return v;
}
enum MmCol { kOrig, kCompr, kMemUsed, kLimit, kMax, kSame, kCompacted, kHuge,
             kHugeSince };

// The flags column of block_state's line for `index`, or "" if not listed.
std::string FlagsOf(const std::string& block_state, std::uint64_t index) {
  std::istringstream in(block_state);
  for (std::string line; std::getline(in, line);) {
    unsigned long long i = 0;
    char flags[8] = {};
    if (std::sscanf(line.c_str(), "%llu %*u.%*u %6s", &i, flags) == 2 &&
        i == index) {
      return flags;
    }
  }
  return "";
}

// An attribute's input and the status it must give.
struct TokenCase {
  const char* tokens;
  StatusCode code;
};

template <std::size_t N, typename Store>
void ExpectCodes(const TokenCase (&cases)[N], Store store) {
  for (const TokenCase& c : cases) {
    EXPECT_EQ(store(c.tokens).code(), c.code) << c.tokens;
  }
}

TEST(RecompAlgorithmTest, TokensAndErrorsAsZram) {
  Device d("zram0", {});
  EXPECT_EQ(d.ShowRecompAlgorithm(), "");
  const TokenCase kCases[] = {
      {"algo=zstd", StatusCode::kOk},
      {"algo=deflate priority=3\n", StatusCode::kOk},
      {"algo=lzo-rle priority=2 unknown=1", StatusCode::kOk},
      {"", StatusCode::kInvalidArgument},
      {"priority=1", StatusCode::kInvalidArgument},
      {"algo", StatusCode::kInvalidArgument},
      {"algo=zstd priority=", StatusCode::kInvalidArgument},
      {"algo=nosuch", StatusCode::kInvalidArgument},
      {"algo=zstd priority=0", StatusCode::kInvalidArgument},
      {"algo=zstd priority=4", StatusCode::kInvalidArgument},
      {"algo=zstd priority=one", StatusCode::kInvalidArgument},
  };
  ExpectCodes(kCases, [&](const char* t) { return d.SetRecompAlgorithm(t); });
  EXPECT_EQ(d.ShowRecompAlgorithm(),
            "#1: lzo lz4 lz4hc [zstd] deflate\n"
            "#2: [lzo] lz4 lz4hc zstd deflate\n"
            "#3: lzo lz4 lz4hc zstd [deflate]\n");
  EXPECT_EQ(d.recomp_algorithm(2), "lzo");
  ASSERT_OK(d.SetDisksize(1 << 20));
  EXPECT_EQ(d.SetRecompAlgorithm("algo=lz4hc").code(), StatusCode::kBusy);
  ASSERT_OK(d.Reset());
  EXPECT_EQ(d.ShowRecompAlgorithm(), "");
}

TEST(RecompAlgorithmTest, ResetRestoresTheServerDefaults) {
  DeviceDefaults defaults;
  defaults.recomp[1] = {"zstd", "level=7"};
  Device d("zram0", defaults);
  EXPECT_EQ(d.ShowRecompAlgorithm(), "#2: lzo lz4 lz4hc [zstd] deflate\n");
  ASSERT_OK(d.SetRecompAlgorithm("algo=deflate priority=1"));
  EXPECT_EQ(d.SetAlgorithmParams("priority=2 level=99").code(),
            StatusCode::kInvalidArgument);
  ASSERT_OK(d.Reset());
  EXPECT_EQ(d.ShowRecompAlgorithm(), "#2: lzo lz4 lz4hc [zstd] deflate\n");
  ASSERT_OK(d.SetDisksize(1 << 20));  // level=7 again, valid
}

TEST(AlgorithmParamsTest, PriorityAndAlgoSelectTheAlgorithm) {
  Device d("zram0", {});
  // Before its algorithm is known, a priority's params are kept and checked
  // at disksize, whose error names the priority.
  ASSERT_OK(d.SetAlgorithmParams("priority=2 level=99"));
  ASSERT_OK(d.SetRecompAlgorithm("algo=zstd priority=2"));
  const Status s = d.SetDisksize(1 << 20);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("priority 2 (zstd)"), std::string::npos)
      << s.message();
  EXPECT_FALSE(d.initialized());
  // Known now: checked at once. algo= finds the priority by name.
  EXPECT_EQ(d.SetAlgorithmParams("algo=zstd level=99").code(),
            StatusCode::kInvalidArgument);
  ASSERT_OK(d.SetAlgorithmParams("algo=zstd level=19"));
  ASSERT_OK(d.SetAlgorithmParams("algo=lz4 level=1"));  // the primary
  const TokenCase kCases[] = {
      {"priority=3 level=1", StatusCode::kOk},  // no algorithm there yet
      {"priority=0 level=1", StatusCode::kOk},
      {"algo=deflate level=1", StatusCode::kInvalidArgument},  // not set
      {"algo=nosuch level=1", StatusCode::kInvalidArgument},
      {"priority=4 level=1", StatusCode::kInvalidArgument},
      {"priority=-1 level=1", StatusCode::kInvalidArgument},
      {"priority=1", StatusCode::kOk},  // clears priority 1's params
      {"priority", StatusCode::kInvalidArgument},
      {"priority=2 level", StatusCode::kInvalidArgument},
  };
  ExpectCodes(kCases, [&](const char* t) { return d.SetAlgorithmParams(t); });
  ASSERT_OK(d.SetDisksize(1 << 20));
  EXPECT_EQ(d.SetAlgorithmParams("priority=2 level=3").code(),
            StatusCode::kBusy);
  // Reset clears every priority's params: level=99 set before the
  // algorithm no longer lingers.
  ASSERT_OK(d.Reset());
  ASSERT_OK(d.SetRecompAlgorithm("algo=zstd priority=3"));
  ASSERT_OK(d.SetDisksize(1 << 20));
}

TEST(RecompressTest, TokenErrorsAsZram) {
  Device d("zram0", {});
  EXPECT_EQ(d.Recompress("").code(), StatusCode::kInvalidArgument);  // uninit
  ASSERT_OK(d.SetRecompAlgorithm("algo=zstd"));
  ASSERT_OK(d.SetRecompAlgorithm("algo=deflate priority=2"));
  ASSERT_OK(d.SetDisksize(1 << 20));
  WritePage(d, 0, NibblePage(1));
  const TokenCase kCases[] = {
      {"type=idle", StatusCode::kOk},
      {"type=huge max_pages=1", StatusCode::kOk},
      {"type=huge_idle threshold=100", StatusCode::kOk},
      {"algo=deflate", StatusCode::kOk},
      {"priority=2", StatusCode::kOk},
      {"priority=0 foo=bar", StatusCode::kOk},  // 0 is 1; unknown ignored
      {"", StatusCode::kOk},
      {"idle", StatusCode::kInvalidArgument},
      {"type=", StatusCode::kInvalidArgument},
      {"type=incompressible", StatusCode::kInvalidArgument},
      {"max_pages=x", StatusCode::kInvalidArgument},
      {"max_pages=18446744073709551616", StatusCode::kOutOfRange},
      {"threshold=4096", StatusCode::kInvalidArgument},  // >= huge class
      {"threshold=4294967296", StatusCode::kOutOfRange},
      {"priority=3", StatusCode::kInvalidArgument},  // 2 secondaries
      {"algo=lz4hc", StatusCode::kInvalidArgument},
      {"algo=zstd priority=2", StatusCode::kInvalidArgument},
      {"algo", StatusCode::kInvalidArgument},
  };
  ExpectCodes(kCases, [&](const char* t) { return d.Recompress(t); });
  EXPECT_EQ(ReadPage(d, 0), NibblePage(1));
  Device plain("zram1", {});
  ASSERT_OK(plain.SetDisksize(1 << 20));
  EXPECT_EQ(plain.Recompress("").code(), StatusCode::kInvalidArgument);
}

// A device with lz4 and zstd at priority 1: 64 pages lz4 keeps huge that
// zstd halves (1..64), one random page (65), a zero page (0).
class RecompressedDeviceTest : public ::testing::Test {
 protected:
  static constexpr int kNibblePages = 64;
  static constexpr std::uint64_t kRandom = kNibblePages + 1;

  void SetUp() override {
    defaults_.log = [this](std::string_view line) { log_.emplace_back(line); };
    d_ = std::make_unique<Device>("zram0", defaults_);
    ASSERT_OK(d_->SetRecompAlgorithm("algo=zstd"));
    ASSERT_OK(d_->SetDisksize(4 << 20));
    WritePage(*d_, 0, Page(kPageSize));
    for (int i = 1; i <= kNibblePages; ++i) WritePage(*d_, i, NibblePage(i));
    WritePage(*d_, kRandom, RandomPage(7));
  }

  DeviceDefaults defaults_;
  std::vector<std::string> log_;
  std::unique_ptr<Device> d_;
};

TEST_F(RecompressedDeviceTest, BlockStateListsEverySlotInZramsFormat) {
  EXPECT_EQ(Device("zram9", {}).ShowBlockState(), "");
  ASSERT_OK(d_->MarkIdle("all"));
  const std::string before = d_->ShowBlockState();
  // "%12zd %12u.%06d %c%c%c%c%c%c\n", one line per allocated slot.
  const std::regex line_re(R"( {0,11}\d{1,12} {0,11}\d{1,12}\.000000 [s.][w.][h.][i.][r.][n.])");
  std::istringstream in(before);
  int lines = 0;
  for (std::string line; std::getline(in, line); ++lines) {
    EXPECT_TRUE(std::regex_match(line, line_re)) << "'" << line << "'";
    EXPECT_EQ(line.size(), 12u + 1 + 12 + 7 + 1 + 6) << line;
  }
  EXPECT_EQ(lines, kNibblePages + 2);
  EXPECT_EQ(FlagsOf(before, 0).substr(0, 1), "s");
  EXPECT_EQ(FlagsOf(before, 1), "..hi..");
  EXPECT_EQ(FlagsOf(before, kRandom), "..hi..");
  EXPECT_EQ(FlagsOf(before, kRandom + 1), "");  // never written

  RecompressResult r;
  ASSERT_OK(d_->Recompress("type=idle", &r));
  const std::string after = d_->ShowBlockState();
  // Won: at priority 1, no longer huge, no longer idle.
  for (int i = 1; i <= kNibblePages; ++i) {
    EXPECT_EQ(FlagsOf(after, i), "....r.") << i;
  }
  // zstd was the top priority and lost: INCOMPRESSIBLE, still huge.
  EXPECT_EQ(FlagsOf(after, kRandom), "..h..n");
  EXPECT_EQ(FlagsOf(after, 0).substr(0, 1), "s");  // SAME: skipped
  EXPECT_EQ(r.recompressed, static_cast<std::uint64_t>(kNibblePages));
  EXPECT_EQ(r.incompressible, 1u);
}

TEST_F(RecompressedDeviceTest, MmStatAndStatsFollowTheKernel) {
  const std::vector<std::uint64_t> before = MmStat(*d_);
  const std::string debug_before = d_->ShowDebugStat();
  EXPECT_EQ(before[kHuge], static_cast<std::uint64_t>(kNibblePages + 1));
  RecompressResult r;
  ASSERT_OK(d_->Recompress("type=huge", &r));
  const std::vector<std::uint64_t> after = MmStat(*d_);
  EXPECT_EQ(after[kOrig], before[kOrig]);  // pages_stored unchanged
  EXPECT_LT(after[kCompr], before[kCompr]);
  EXPECT_LT(after[kMemUsed], before[kMemUsed]);
  EXPECT_EQ(after[kHuge], 1u);  // only the random page is still huge
  EXPECT_EQ(after[kHugeSince], before[kHugeSince]);
  EXPECT_EQ(after[kSame], before[kSame]);
  EXPECT_EQ(d_->ShowDebugStat(), debug_before);  // as 6.12's
  EXPECT_EQ(before[kCompr] - after[kCompr], r.bytes_before - r.bytes_after);

  const PageStoreStats st = d_->Stats();
  EXPECT_EQ(st.priority_pages[1], static_cast<std::uint64_t>(kNibblePages));
  EXPECT_EQ(st.priority_pages[0], 1u);  // the random page
  EXPECT_EQ(st.incompressible_pages, 1u);
  EXPECT_EQ(st.recompressed_pages, static_cast<std::uint64_t>(kNibblePages));
  EXPECT_EQ(st.recompress_attempts, r.attempted);
  // Every page reads back bit-exactly, through the codec of its priority.
  EXPECT_EQ(ReadPage(*d_, 0), Page(kPageSize));
  for (int i = 1; i <= kNibblePages; ++i) EXPECT_EQ(ReadPage(*d_, i), NibblePage(i));
  EXPECT_EQ(ReadPage(*d_, kRandom), RandomPage(7));

  // A second pass finds nothing left below priority 1's end.
  RecompressResult again;
  ASSERT_OK(d_->Recompress("", &again));
  EXPECT_EQ(again.recompressed, 0u);
  EXPECT_EQ(MmStat(*d_)[kCompr], after[kCompr]);
}

TEST_F(RecompressedDeviceTest, MaxPagesAndThresholdLimitThePass) {
  RecompressResult r;
  ASSERT_OK(d_->Recompress("max_pages=10", &r));
  EXPECT_EQ(r.attempted, 10u);
  EXPECT_EQ(r.recompressed, 10u);  // the largest objects first: all huge
  // Objects under the threshold are not picked: none is below 3000 bytes
  // except the 10 recompressed, which are at priority 1 already.
  ASSERT_OK(d_->Recompress("threshold=100 type=idle", &r));
  EXPECT_EQ(r.candidates, 0u);  // nothing idle
}

TEST_F(RecompressedDeviceTest, LogsOneLinePerPass) {
  ASSERT_OK(d_->Recompress("type=huge\n"));
  ASSERT_EQ(log_.size(), 1u);
  const std::regex re(
      "zram0: recompress 'type=huge': 64 of 65 pages recompressed, [1-9][0-9]* "
      "bytes saved, 1 marked incompressible, 0 changed meanwhile");
  EXPECT_TRUE(std::regex_match(log_[0], re)) << log_[0];
}

TEST(RecompressLevelTest, TheLevelReachesTheSecondaryCodec) {
  std::uint64_t compr[2] = {};
  const char* const kParams[2] = {"priority=1 level=-7", "algo=zstd level=19"};
  for (int k = 0; k < 2; ++k) {
    Device d("zram0", {});
    ASSERT_OK(d.SetRecompAlgorithm("algo=zstd"));
    ASSERT_OK(d.SetAlgorithmParams(kParams[k]));
    ASSERT_OK(d.SetDisksize(4 << 20));
    for (int i = 0; i < 128; ++i) WritePage(d, i, WordPage(i));
    ASSERT_OK(d.Recompress(""));
    compr[k] = MmStat(d)[kCompr];
    for (int i = 0; i < 128; ++i) ASSERT_EQ(ReadPage(d, i), WordPage(i));
  }
  EXPECT_LT(compr[1], compr[0]) << "level=19 " << compr[1] << " level=-7 "
                                << compr[0];
}

}  // namespace
}  // namespace ztier
