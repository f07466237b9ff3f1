// device_test.cc: zram's lifecycle, attribute semantics and byte-level IO.
#include "ztier/device.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "testing/test_util.h"

namespace ztier {
namespace {

std::vector<std::byte> Bytes(std::size_t n, std::uint32_t seed) {
  std::vector<std::byte> v(n);
  std::mt19937 rng(seed);
  for (auto& b : v) b = static_cast<std::byte>("ztier"[rng() % 5] + rng() % 3);
  return v;
}

TEST(ParseSizeTest, Memparse) {
  EXPECT_EQ(*ParseSize("4096"), 4096u);
  EXPECT_EQ(*ParseSize("1G\n"), 1ull << 30);
  EXPECT_EQ(*ParseSize("512k"), 512u << 10);
  EXPECT_EQ(*ParseSize("3M"), 3u << 20);
  EXPECT_FALSE(ParseSize("").has_value());
  EXPECT_FALSE(ParseSize("12Q").has_value());
  EXPECT_FALSE(ParseSize("-1").has_value());
  EXPECT_FALSE(ParseSize("99999999999999999999").has_value());
}

TEST(DeviceTest, LifecycleFollowsZram) {
  Device d("zram0", DeviceDefaults{});
  EXPECT_FALSE(d.initialized());
  EXPECT_EQ(d.Read(0, {}).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(d.SetDisksize(0).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(d.SetCompAlgorithm("nosuch").code(), StatusCode::kInvalidArgument);
  ASSERT_OK(d.SetCompAlgorithm("zstd\n"));
  EXPECT_EQ(d.ShowCompAlgorithm(), "lzo lz4 lz4hc [zstd] deflate\n");
  EXPECT_EQ(d.SetAlgorithmParams("level").code(), StatusCode::kInvalidArgument);
  ASSERT_OK(d.SetAlgorithmParams("level=5"));
  EXPECT_EQ(d.MarkIdle("all").code(), StatusCode::kFailedPrecondition);
  ASSERT_OK(d.SetDisksize(10000));  // rounded up to pages
  EXPECT_EQ(d.disksize(), 12288u);
  EXPECT_TRUE(d.initialized());
  EXPECT_EQ(d.SetDisksize(8192).code(), StatusCode::kBusy);
  EXPECT_EQ(d.SetCompAlgorithm("lz4").code(), StatusCode::kBusy);
  EXPECT_EQ(d.SetAlgorithmParams("level=1").code(), StatusCode::kBusy);
  EXPECT_EQ(d.algorithm(), "zstd");
  {
    auto client = d.Attach();
    ASSERT_TRUE(client.has_value());
    EXPECT_EQ(d.clients(), 1);
    EXPECT_EQ(d.Reset().code(), StatusCode::kBusy);
  }
  EXPECT_EQ(d.clients(), 0);
  ASSERT_OK(d.Reset());
  EXPECT_FALSE(d.initialized());
  EXPECT_EQ(d.disksize(), 0u);
  EXPECT_EQ(d.ShowCompAlgorithm(), "lzo [lz4] lz4hc zstd deflate\n");
  EXPECT_EQ(d.SetDisksize(0).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(d.ShowMmStat(),
            "       0        0        0        0        0        0        0 "
            "       0        0\n");
}

TEST(DeviceTest, ByteGranularIoAcrossPages) {
  Device d("zram0", DeviceDefaults{});
  ASSERT_OK(d.SetDisksize(64 * 1024));
  const auto data = Bytes(3 * kPageSize + 123, 1);
  ASSERT_OK(d.Write(kPageSize - 7, data));  // odd offset, crosses 4 pages
  std::vector<std::byte> back(data.size());
  ASSERT_OK(d.Read(kPageSize - 7, back));
  EXPECT_EQ(back, data);
  std::vector<std::byte> head(kPageSize - 7);
  ASSERT_OK(d.Read(0, head));
  for (auto b : head) ASSERT_EQ(b, std::byte{0});
  // The last byte of the device.
  const std::byte last{0x5a};
  ASSERT_OK(d.Write(64 * 1024 - 1, std::span(&last, 1)));
  std::byte got{};
  ASSERT_OK(d.Read(64 * 1024 - 1, std::span(&got, 1)));
  EXPECT_EQ(got, last);
  EXPECT_EQ(d.Write(64 * 1024, std::span(&last, 1)).code(),
            StatusCode::kOutOfRange);
  EXPECT_EQ(d.Read(64 * 1024 - 1, head).code(), StatusCode::kOutOfRange);
}

TEST(DeviceTest, TrimFreesWholePagesOnly) {
  Device d("zram0", DeviceDefaults{});
  ASSERT_OK(d.SetDisksize(16 * kPageSize));
  const auto data = Bytes(8 * kPageSize, 2);
  ASSERT_OK(d.Write(0, data));
  EXPECT_EQ(d.Stats().orig_data_size, 8 * kPageSize);
  // [100, 3*4096+5): pages 1 and 2 are whole; 0 and 3 are partial, kept.
  ASSERT_OK(d.Trim(100, 3 * kPageSize - 95));
  EXPECT_EQ(d.Stats().orig_data_size, 6 * kPageSize);
  std::vector<std::byte> back(8 * kPageSize);
  ASSERT_OK(d.Read(0, back));
  EXPECT_EQ(0, std::memcmp(back.data(), data.data(), kPageSize));
  for (std::size_t i = kPageSize; i < 3 * kPageSize; ++i) {
    ASSERT_EQ(back[i], std::byte{0});
  }
  EXPECT_EQ(0, std::memcmp(&back[3 * kPageSize], &data[3 * kPageSize],
                           5 * kPageSize));
}

TEST(DeviceTest, WriteZeroesReadsZeroAndUsesNoPoolMemory) {
  Device d("zram0", DeviceDefaults{});
  ASSERT_OK(d.SetDisksize(16 * kPageSize));
  ASSERT_OK(d.Write(0, Bytes(8 * kPageSize, 3)));
  ASSERT_OK(d.WriteZeroes(0, 8 * kPageSize, /*no_hole=*/false));
  EXPECT_EQ(d.Stats().orig_data_size, 0u);
  EXPECT_EQ(d.Stats().compr_data_size, 0u);
  ASSERT_OK(d.WriteZeroes(0, 4 * kPageSize, /*no_hole=*/true));
  EXPECT_EQ(d.Stats().orig_data_size, 4 * kPageSize);
  EXPECT_EQ(d.Stats().same_pages, 4u);
  EXPECT_EQ(d.Stats().compr_data_size, 0u);
  ASSERT_OK(d.Write(8 * kPageSize, Bytes(kPageSize, 4)));
  ASSERT_OK(d.WriteZeroes(8 * kPageSize + 10, 20, false));  // partial
  std::vector<std::byte> back(kPageSize);
  ASSERT_OK(d.Read(8 * kPageSize, back));
  for (std::size_t i = 10; i < 30; ++i) ASSERT_EQ(back[i], std::byte{0});
  EXPECT_NE(back[9], std::byte{0});
}

TEST(DeviceTest, MemLimitAndAttributes) {
  Device d("zram0", DeviceDefaults{});
  ASSERT_OK(d.SetDisksize(1 << 20));
  ASSERT_OK(d.SetMemLimit(8192));
  EXPECT_EQ(d.Stats().mem_limit, 8192u);
  EXPECT_EQ(d.ResetMemUsedMax("1").code(), StatusCode::kInvalidArgument);
  ASSERT_OK(d.ResetMemUsedMax("0\n"));
  ASSERT_OK(d.MarkIdle("all"));
  ASSERT_OK(d.MarkIdle("3600"));
  EXPECT_EQ(d.MarkIdle("soon").code(), StatusCode::kInvalidArgument);
  ASSERT_OK(d.Compact());
  EXPECT_EQ(d.ShowIoStat(), "       0        0 0        0\n");
  EXPECT_EQ(d.ShowDebugStat(), "version: 1\n0        0\n");
}

TEST(DeviceRegistryTest, AddHotAddRemove) {
  DeviceRegistry r(DeviceDefaults{});
  ASSERT_TRUE(r.Add("zram0").has_value());
  EXPECT_EQ(r.Add("zram0").error().code(), StatusCode::kBusy);
  EXPECT_EQ(r.Add("bad name").error().code(), StatusCode::kInvalidArgument);
  auto d = r.HotAdd();
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ((*d)->name(), "zram1");
  ASSERT_OK((*d)->SetDisksize(4096));
  {
    auto c = (*d)->Attach();
    EXPECT_EQ(r.Remove("zram1").code(), StatusCode::kBusy);
  }
  auto removed = r.Find("zram1");
  ASSERT_OK(r.Remove("zram1"));
  EXPECT_EQ(r.Remove("zram1").code(), StatusCode::kNotFound);
  // A client that found the device before it was removed cannot attach.
  EXPECT_EQ(removed->Attach().error().code(), StatusCode::kNotFound);
  EXPECT_EQ(r.List().size(), 1u);
  EXPECT_NE(r.Find("zram0"), nullptr);
  EXPECT_EQ(r.Find("zram9"), nullptr);
}

}  // namespace
}  // namespace ztier
