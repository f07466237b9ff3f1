// ublk_platform_test.cc: what of platform/ublk.h runs without the driver:
// the user-copy and descriptor offsets (checked against the driver's
// arithmetic, ublk_pos_to_hwq() etc. in drivers/block/ublk_drv.c), the
// probes, and the error when /dev/ublk-control is missing.
#include "platform/ublk.h"

#include <unistd.h>

#include <gtest/gtest.h>

namespace ztier::platform {
namespace {

TEST(UblkAbi, UserCopyOffsetsDecodeAsTheDriverDoes) {
  const std::uint64_t pos = UblkUserCopyOffset(3, 17, 8192);
  const std::uint64_t rel = pos - ublk::kIoBufOffset;
  EXPECT_EQ((rel >> ublk::kQidOff) & ((1u << ublk::kQidBits) - 1), 3u);
  EXPECT_EQ((rel >> ublk::kTagOff) & ((1u << ublk::kTagBits) - 1), 17u);
  EXPECT_EQ(rel & ((1u << ublk::kIoBufBits) - 1), 8192u);
  EXPECT_EQ(UblkUserCopyOffset(0, 0, 0), 0x80000000ull);
}

TEST(UblkAbi, DescriptorArraysArePageRounded) {
  EXPECT_EQ(UblkMaxCmdBufBytes(), 4096u * 24u);  // already page-aligned
  EXPECT_EQ(UblkCmdBufOffset(2), 2 * 4096u * 24u);
  EXPECT_EQ(UblkQueueCmdBufBytes(64), 4096u);  // 64 * 24 = 1536
  EXPECT_EQ(UblkQueueCmdBufBytes(200), 8192u);
}

TEST(UblkAbi, Paths) {
  EXPECT_EQ(UblkCharPath(4), "/dev/ublkc4");
  EXPECT_EQ(UblkBlockPath(0), "/dev/ublkb0");
}

TEST(UblkProbe, MissingDeviceIsNotBusy) {
  auto busy = BlockDeviceBusy("/nonexistent/ublkb99");
  ASSERT_TRUE(busy.has_value()) << busy.error().ToString();
  EXPECT_FALSE(*busy);
}

TEST(UblkProbe, ProcessAlive) {
  EXPECT_TRUE(ProcessAlive(::getpid()));
  EXPECT_FALSE(ProcessAlive(-1));
  EXPECT_FALSE(ProcessAlive(0));
}

TEST(UblkControlTest, MissingControlDeviceSaysSo) {
  auto c = UblkControl::Open("/nonexistent/ublk-control");
  ASSERT_FALSE(c.has_value());
  if (UblkBuilt()) {
    EXPECT_EQ(c.error().code(), StatusCode::kNotFound);
    EXPECT_NE(c.error().message().find("this kernel has no ublk (modprobe "
                                       "ublk_drv)"),
              std::string::npos)
        << c.error().message();
  } else {
    EXPECT_EQ(c.error().code(), StatusCode::kUnsupported);
  }
}

TEST(UblkControlTest, OpenUblkCharGivesUpOnAMissingPath) {
  auto fd = OpenUblkChar("/nonexistent/ublkc0", 20);
  ASSERT_FALSE(fd.has_value());
  EXPECT_EQ(fd.error().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace ztier::platform
