// ublk_platform_test.cc: what of platform/ublk.h runs without the driver:
// the user-copy and descriptor offsets (checked against the driver's
// arithmetic, ublk_pos_to_hwq() etc. in drivers/block/ublk_drv.c), the
// probes, and the error when /dev/ublk-control is missing.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "platform/ublk.h"

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

TEST(UblkProbe, MissingDeviceIsNotUsed) {
  auto user = BlockDeviceUser("/nonexistent/ublkb99");
  ASSERT_TRUE(user.has_value()) << user.error().ToString();
  EXPECT_EQ(*user, "");
  EXPECT_FALSE(UblkCharHeld(4094));  // no such device
}

// A process that holds a block device open without claiming it (dd, qemu)
// is a user, as zram's reset sees it (disk_openers); so is a claim. On a
// loop device, which any Linux has and the tests leave alone.
TEST(UblkProbe, AProcessWithTheDeviceOpenIsAUser) {
  const char* path = "/dev/loop7";
  auto before = BlockDeviceUser(path);
  if (!before.has_value() || ::access(path, R_OK) != 0) {
    GTEST_SKIP() << path << " cannot be opened here";
  }
  if (!before->empty()) GTEST_SKIP() << path << " is in use: " << *before;
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const int fd = ::open(path, O_RDONLY);
    const char c = fd >= 0 ? '1' : '0';
    if (::write(ready[1], &c, 1) != 1) _exit(1);
    ::pause();
    _exit(0);
  }
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  auto user = BlockDeviceUser(path);
  // Found by name in /sys/class/block, not by this node: a /dev without
  // it (a container's) sees the opener too.
  auto by_name = BlockDeviceUser("/nonexistent/loop7");
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  ::close(ready[0]);
  ::close(ready[1]);
  ASSERT_EQ(c, '1') << "the child could not open " << path;
  ASSERT_TRUE(user.has_value()) << user.error().ToString();
  EXPECT_EQ(*user, "process " + std::to_string(child) + " (ublk_platform_t)")
      << *user;
  ASSERT_TRUE(by_name.has_value()) << by_name.error().ToString();
  EXPECT_EQ(*by_name, *user);
  auto after = BlockDeviceUser(path);
  ASSERT_TRUE(after.has_value());
  EXPECT_EQ(*after, "");
}

// A device found unused stays so until the claim goes: another exclusive
// open (what swapon and mount make) is refused meanwhile, so a reset
// cannot delete a disk that a swapon took after the look.
TEST(UblkProbe, AClaimOfAnUnusedDeviceKeepsOtherClaimsOut) {
  const char* path = "/dev/loop7";
  auto before = BlockDeviceUser(path);
  if (!before.has_value() || ::access(path, R_OK) != 0) {
    GTEST_SKIP() << path << " cannot be opened here";
  }
  if (!before->empty()) GTEST_SKIP() << path << " is in use: " << *before;
  auto claim = ClaimUnusedBlockDevice(path);
  ASSERT_TRUE(claim.has_value()) << claim.error().ToString();
  EXPECT_EQ(claim->user, "");
  ASSERT_GE(claim->fd.get(), 0);
  const int other = ::open(path, O_RDONLY | O_EXCL | O_CLOEXEC);
  const int err = errno;
  if (other >= 0) ::close(other);
  EXPECT_LT(other, 0);
  EXPECT_EQ(err, EBUSY);
  // Others see the claim as a user.
  auto user = BlockDeviceUser(path);
  ASSERT_TRUE(user.has_value());
  EXPECT_EQ(*user, "mounted, swapped on or claimed");
  claim->fd.Reset();
  auto after = BlockDeviceUser(path);
  ASSERT_TRUE(after.has_value());
  EXPECT_EQ(*after, "");
}

// Why a stopped disk's blocking DEL_DEV (kernels before 6.9) waits, for
// the log line: swap still on it, a mount of it, or some other opener.
TEST(UblkProbe, StoppedBlockDeviceHolder) {
  const std::string swaps =
      "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n"
      "/dev/vda2                               partition\t1000\t0\t-2\n"
      "/dev/ublkb0\\040(deleted)                partition\t65532\t12\t-3\n";
  const std::string mounts =
      "/dev/vda1 / ext4 rw,relatime 0 0\n"
      "/dev/ublkb1 /mnt/z ext4 rw,relatime 0 0\n";
  EXPECT_EQ(StoppedBlockDeviceHolder("/dev/ublkb0", swaps, mounts), "swap");
  EXPECT_EQ(StoppedBlockDeviceHolder("/dev/ublkb1", swaps, mounts),
            "the file system mounted on /mnt/z");
  EXPECT_EQ(StoppedBlockDeviceHolder("/dev/ublkb2", swaps, mounts),
            "its last opener");
  // ublkb1 is no prefix match of ublkb10.
  EXPECT_EQ(StoppedBlockDeviceHolder("/dev/ublkb10", swaps, mounts),
            "its last opener");
  EXPECT_EQ(StoppedBlockDeviceHolder("/dev/ublkb0", "", ""), "its last opener");
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

// A queue's FETCH_REQs that the kernel refuses for a while (io_uring short
// of memory for them) are submitted again, so that a disk does not fail to
// start for a moment's shortage; another refusal is the answer at once.
// On a real ring over a memfd in place of /dev/ublkcN: there, every fetch
// is refused for good (EOPNOTSUPP: a memfd takes no URING_CMD), which
// shows which submission reached the kernel.
TEST(UblkQueueRingTest, FetchAllRetriesASubmissionRefusedForAWhile) {
  if (!UblkBuilt()) GTEST_SKIP() << "built without io_uring";
  UniqueFd fd(::memfd_create("ublkc", MFD_CLOEXEC));
  ASSERT_GE(fd.get(), 0);
  ASSERT_EQ(::ftruncate(fd.get(), 1 << 20), 0);
  auto ring = UblkQueueRing::Create(fd.get(), 0, 4);
  if (!ring.has_value()) GTEST_SKIP() << ring.error().ToString();
  int refusals = 3;
  int calls = 0;
  (*ring)->InjectSubmitFaultsForTest([&] {
    ++calls;
    return refusals-- > 0 ? -ENOMEM : 0;
  });
  const Status s = (*ring)->FetchAll();
  EXPECT_EQ(calls, 4);
  EXPECT_NE(s.message().find("UBLK_U_IO_FETCH_REQ (queue 0"),
            std::string::npos)
      << s.ToString();
  EXPECT_EQ(s.posix_errno(), EOPNOTSUPP) << s.ToString();

  auto other = UblkQueueRing::Create(fd.get(), 1, 4);
  ASSERT_TRUE(other.has_value()) << other.error().ToString();
  calls = 0;
  (*other)->InjectSubmitFaultsForTest([&] {
    ++calls;
    return -EBADF;
  });
  const Status bad = (*other)->FetchAll();
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(bad.posix_errno(), EBADF) << bad.ToString();
}

}  // namespace
}  // namespace ztier::platform
