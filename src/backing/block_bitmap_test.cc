// block_bitmap_test.cc: run allocation, fallback, wraparound, exact counts.
#include "block_bitmap.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "testing/test_util.h"

namespace ztier::internal {
namespace {

constexpr std::uint64_t kNoBlock = BlockBitmap::kNoBlock;

void FillAll(BlockBitmap& bm) {
  std::size_t got = 0;
  ASSERT_NE(bm.AllocRange(bm.size() - bm.Used(), &got), kNoBlock);
  ASSERT_EQ(bm.Used(), bm.size());
}

TEST(BlockBitmapTest, AllocatesConsecutiveRunsFromTheCursor) {
  BlockBitmap bm(1000);
  std::size_t got = 0;
  EXPECT_EQ(bm.AllocRange(32, &got), 0u);
  EXPECT_EQ(got, 32u);
  EXPECT_EQ(bm.AllocRange(100, &got), 32u);  // crosses word boundaries
  EXPECT_EQ(got, 100u);
  EXPECT_EQ(bm.Used(), 132u);
  bm.Free(3);  // behind the cursor: not reused while blocks lie ahead
  EXPECT_EQ(bm.AllocRange(1, &got), 132u);
  EXPECT_EQ(got, 1u);
  EXPECT_EQ(bm.Used(), 132u);
}

TEST(BlockBitmapTest, FragmentedFallsBackToTheLongestShorterRun) {
  BlockBitmap bm(256);
  FillAll(bm);
  for (std::uint64_t b = 0; b < 256; b += 2) bm.Free(b);
  std::size_t got = 0;
  std::uint64_t first = bm.AllocRange(8, &got);
  EXPECT_EQ(got, 1u);
  EXPECT_EQ(first % 2, 0u);
  // A run of 5 among the holes is the longest: it is the one handed out.
  bm.Free(101);
  bm.Free(103);  // 100..104 free now
  first = bm.AllocRange(8, &got);
  EXPECT_EQ(first, 100u);
  EXPECT_EQ(got, 5u);
  EXPECT_EQ(bm.Used(), 256u - 128u + 1u - 2u + 5u);
}

TEST(BlockBitmapTest, FullGivesNoBlock) {
  BlockBitmap bm(70);
  FillAll(bm);
  std::size_t got = 99;
  EXPECT_EQ(bm.AllocRange(1, &got), kNoBlock);
  EXPECT_EQ(got, 0u);
  EXPECT_EQ(bm.AllocRange(0, &got), kNoBlock);
  EXPECT_EQ(got, 0u);
  bm.Free(69);
  EXPECT_EQ(bm.AllocRange(4, &got), 69u);
  EXPECT_EQ(got, 1u);
}

TEST(BlockBitmapTest, WrapsAroundButRunsDoNotCrossTheEnd) {
  BlockBitmap bm(16);
  std::size_t got = 0;
  ASSERT_EQ(bm.AllocRange(12, &got), 0u);
  for (std::uint64_t b = 0; b < 8; ++b) bm.Free(b);
  // 12..15 (4 free) is too short; the search wraps and finds 0..5.
  EXPECT_EQ(bm.AllocRange(6, &got), 0u);
  EXPECT_EQ(got, 6u);
  EXPECT_EQ(bm.AllocRange(4, &got), 12u);  // cursor at 6: 6,7 too short
  EXPECT_EQ(got, 4u);
  // 14, 15, 0, 1 free: not consecutive blocks, so at most 2.
  BlockBitmap bm2(16);
  FillAll(bm2);
  for (std::uint64_t b : {14, 15, 0, 1}) bm2.Free(b);
  EXPECT_EQ(bm2.AllocRange(4, &got), 0u);  // the first of the longest runs
  EXPECT_EQ(got, 2u);
  EXPECT_EQ(bm2.AllocRange(4, &got), 14u);
  EXPECT_EQ(got, 2u);
}

TEST(BlockBitmapTest, FindsARunThatTheCursorCutsInTwo) {
  BlockBitmap bm(128);
  std::size_t got = 0;
  ASSERT_EQ(bm.AllocRange(64, &got), 0u);   // cursor 64
  ASSERT_EQ(bm.AllocRange(64, &got), 64u);  // cursor wraps to 0
  ASSERT_EQ(bm.AllocRange(10, &got), kNoBlock);
  for (std::uint64_t b = 60; b < 64; ++b) bm.Free(b);
  ASSERT_EQ(bm.AllocRange(1, &got), 60u);  // cursor 61; 61..63 free
  for (std::uint64_t b = 64; b < 70; ++b) bm.Free(b);
  bm.Free(60);
  // Cursor 61: from there only 61..69 (9) is free, but 60..69 is 10.
  EXPECT_EQ(bm.AllocRange(10, &got), 60u);
  EXPECT_EQ(got, 10u);
  EXPECT_EQ(bm.Used(), 128u);
}

TEST(BlockBitmapTest, LargeBitmapFillsExactly) {
  constexpr std::uint64_t kBlocks = 262144 + 37;
  BlockBitmap bm(kBlocks);
  std::uint64_t total = 0;
  std::size_t got = 0;
  while (bm.AllocRange(32, &got) != kNoBlock) total += got;
  EXPECT_EQ(total, kBlocks);
  EXPECT_EQ(bm.Used(), kBlocks);
  for (std::uint64_t b = 0; b < kBlocks; b += 1000) bm.Free(b);
  EXPECT_EQ(bm.Used(), kBlocks - (kBlocks + 999) / 1000);
}

TEST(BlockBitmapTest, ConcurrentFreeKeepsAnExactCount) {
  constexpr std::uint64_t kBlocks = 64 * 1024;
  BlockBitmap bm(kBlocks);
  FillAll(bm);
  std::vector<std::thread> threads;
  for (std::uint64_t t = 0; t < 4; ++t) {
    threads.emplace_back([&bm, t] {
      for (std::uint64_t b = t; b < kBlocks; b += 4) bm.Free(b);
    });
  }
  // The allocator runs alongside, taking whatever is freed.
  std::uint64_t taken = 0;
  std::size_t got = 0;
  for (int i = 0; i < 2000; ++i) {
    if (bm.AllocRange(3, &got) != kNoBlock) taken += got;
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bm.Used(), taken);
  while (bm.AllocRange(64, &got) != kNoBlock) taken += got;
  EXPECT_EQ(taken, kBlocks);
  EXPECT_EQ(bm.Used(), kBlocks);
}

}  // namespace
}  // namespace ztier::internal
