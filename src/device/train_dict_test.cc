// train_dict_test.cc: Device::TrainDictionary (the train_dict attribute):
// sizes, errors, the log line, mm_stat's mem_used_total with the
// dictionary's memory in it, and every page read back.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "testing/test_util.h"
#include "ztier/device.h"

namespace ztier {
namespace {

std::vector<std::byte> CorpusPage(std::size_t i) {
  const corpus::PageSet& set = testing::TestCorpus("anon-cc1plus");
  const ConstPage p = set.page(i % set.size());
  return {p.begin(), p.end()};
}

std::uint64_t MemUsedTotal(const Device& d) {
  std::istringstream in(d.ShowMmStat());
  std::uint64_t orig = 0, compr = 0, used = 0;
  in >> orig >> compr >> used;
  return used;
}

TEST(TrainDictTest, TrainsUsesAndLogs) {
  DeviceDefaults defaults;
  std::vector<std::string> log;
  defaults.log = [&](std::string_view line) { log.emplace_back(line); };
  Device d("zram0", defaults);
  EXPECT_EQ(d.TrainDictionary("").error().code(),
            StatusCode::kInvalidArgument);  // not initialised
  ASSERT_OK(d.SetCompAlgorithm("zstd"));
  ASSERT_OK(d.SetDisksize(8 << 20));
  EXPECT_EQ(d.TrainDictionary("").error().code(),  // nothing stored
            StatusCode::kInvalidArgument);
  for (std::size_t i = 0; i < 1024; ++i) {
    ASSERT_OK(d.Write(i * kPageSize, CorpusPage(i)));
  }
  EXPECT_EQ(d.TrainDictionary("lots").error().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(d.TrainDictionary("100").error().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(d.TrainDictionary("2M").error().code(),
            StatusCode::kInvalidArgument);
  auto info = d.TrainDictionary("8K\n");
  ASSERT_TRUE(info.has_value()) << info.error().ToString();
  EXPECT_EQ(info->id, 1);
  EXPECT_LE(info->bytes, 8192u);
  ASSERT_FALSE(log.empty());
  EXPECT_NE(log.back().find("zram0: train_dict: dictionary 1 of "),
            std::string::npos)
      << log.back();
  EXPECT_EQ(MemUsedTotal(d), d.Stats().mem_used_total);
  EXPECT_EQ(d.Stats().dict_memory, info->memory);
  for (std::size_t i = 1024; i < 2048; ++i) {
    ASSERT_OK(d.Write(i * kPageSize, CorpusPage(i)));
  }
  EXPECT_GT(d.Stats().dict_pages[1], 900u);
  auto second = d.TrainDictionary("");  // 16K
  ASSERT_TRUE(second.has_value()) << second.error().ToString();
  EXPECT_EQ(second->id, 2);
  std::vector<std::byte> out(kPageSize);
  for (std::size_t i = 0; i < 2048; ++i) {
    ASSERT_OK(d.Read(i * kPageSize, out));
    ASSERT_EQ(out, CorpusPage(i)) << "page " << i;
  }
  // A reset drops the dictionaries with the store.
  ASSERT_OK(d.Reset());
  ASSERT_OK(d.SetDisksize(8 << 20));
  EXPECT_EQ(d.Stats().dict_id, 0);
  EXPECT_EQ(d.Stats().dict_memory, 0u);
}

TEST(TrainDictTest, AlgorithmsWithoutDictionaries) {
  Device d("zram0", {});
  ASSERT_OK(d.SetCompAlgorithm("lzo-rle"));
  ASSERT_OK(d.SetDisksize(1 << 20));
  ASSERT_OK(d.Write(0, CorpusPage(1)));
  auto r = d.TrainDictionary("");
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.error().message().find("takes no dictionary"), std::string::npos);
}

}  // namespace
}  // namespace ztier
