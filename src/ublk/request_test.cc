// request_test.cc: the request logic of the ublk front end without the
// driver: descriptors parsed (a table), errors mapped, requests served on
// a real Device (round trip, FUA, discard, write zeroes, mem_limit,
// a failing backing read), the trace line format, and a replay of
// testdata/ublk_descriptors.txt.
#include "ublk/request.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "testing/faulty_file.h"
#include "testing/test_util.h"

namespace ztier::ublk {
namespace {

namespace abi = platform::ublk;

abi::IoDesc Desc(std::uint32_t op, std::uint32_t flags, std::uint32_t nr,
                 std::uint64_t start) {
  abi::IoDesc d{};
  d.op_flags = op | flags;
  d.nr_sectors = nr;
  d.start_sector = start;
  return d;
}

constexpr Limits kLimits{1 << 20, 512 << 10};  // 1 MiB disk, 512 KiB IOs

TEST(ParseDescriptorTest, Table) {
  struct Case {
    abi::IoDesc desc;
    int error;  // 0: parses
    Op op;
    std::uint64_t offset;
    std::uint32_t length;
  };
  const Case cases[] = {
      {Desc(abi::kOpRead, 0, 8, 0), 0, Op::kRead, 0, 4096},
      {Desc(abi::kOpWrite, 0, 8, 16), 0, Op::kWrite, 8192, 4096},
      {Desc(abi::kOpWrite, 0, 1024, 0), 0, Op::kWrite, 0, 512 << 10},
      {Desc(abi::kOpWrite, 0, 1032, 0), -EINVAL, Op::kWrite, 0, 0},  // > max
      {Desc(abi::kOpRead, 0, 8, 2048), -EINVAL, Op::kRead, 0, 0},  // past end
      {Desc(abi::kOpRead, 0, 8, 2040), 0, Op::kRead, 2040 * 512, 4096},
      {Desc(abi::kOpRead, 0, 0, 0), -EINVAL, Op::kRead, 0, 0},  // empty
      {Desc(abi::kOpFlush, 0, 0, 0), 0, Op::kFlush, 0, 0},
      // Discard and write zeroes are not bound by the IO buffer size.
      {Desc(abi::kOpDiscard, 0, 2048, 0), 0, Op::kDiscard, 0, 1 << 20},
      {Desc(abi::kOpWriteZeroes, 0, 2048, 0), 0, Op::kWriteZeroes, 0, 1 << 20},
      {Desc(abi::kOpDiscard, 0, 2056, 0), -EINVAL, Op::kDiscard, 0, 0},
      {Desc(abi::kOpWriteSame, 0, 8, 0), -EOPNOTSUPP, Op::kRead, 0, 0},
      {Desc(13 /* ZONE_APPEND */, 0, 8, 0), -EOPNOTSUPP, Op::kRead, 0, 0},
      {Desc(0xff, 0, 8, 0), -EOPNOTSUPP, Op::kRead, 0, 0},
      {Desc(abi::kOpRead, 0, 8, UINT64_MAX >> 8), -EINVAL, Op::kRead, 0, 0},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << "op_flags " << c.desc.op_flags << " nr "
                                    << c.desc.nr_sectors << " start "
                                    << c.desc.start_sector);
    auto r = ParseDescriptor(c.desc, kLimits);
    if (c.error != 0) {
      ASSERT_FALSE(r.has_value());
      EXPECT_EQ(r.error(), c.error);
      continue;
    }
    ASSERT_TRUE(r.has_value()) << r.error();
    EXPECT_EQ(r->op, c.op);
    EXPECT_EQ(r->offset, c.offset);
    EXPECT_EQ(r->length, c.length);
  }
}

TEST(ParseDescriptorTest, Flags) {
  auto w = ParseDescriptor(
      Desc(abi::kOpWrite, abi::kIoFFua | abi::kIoFSwap, 8, 0), kLimits);
  ASSERT_TRUE(w.has_value());
  EXPECT_TRUE(w->fua);
  EXPECT_TRUE(w->swap);
  EXPECT_FALSE(w->no_unmap);
  auto z = ParseDescriptor(Desc(abi::kOpWriteZeroes, abi::kIoFNoUnmap, 8, 0),
                           kLimits);
  ASSERT_TRUE(z.has_value());
  EXPECT_TRUE(z->no_unmap);
  EXPECT_FALSE(z->fua);
}

TEST(KernelErrnoTest, Mapping) {
  EXPECT_EQ(KernelErrno(Status::Ok()), 0);
  EXPECT_EQ(KernelErrno(Status::ResourceExhausted("over mem_limit")), -ENOSPC);
  EXPECT_EQ(KernelErrno(Status::IoError("backing read")), -EIO);
  EXPECT_EQ(KernelErrno(Status::Corruption("lz4")), -EIO);
  EXPECT_EQ(KernelErrno(Status::OutOfRange("past end")), -EINVAL);
  EXPECT_EQ(KernelErrno(Status::InvalidArgument("x")), -EINVAL);
  EXPECT_EQ(KernelErrno(Status::Unsupported("x")), -EOPNOTSUPP);
  EXPECT_EQ(KernelErrno(Status::FailedPrecondition("not initialised")), -EIO);
  EXPECT_EQ(KernelErrno(Status::Busy("x")), -EIO);
}

std::vector<std::byte> Random(std::size_t n, std::uint64_t seed) {
  std::vector<std::byte> v(n);
  std::mt19937_64 rng(seed);
  for (auto& b : v) b = static_cast<std::byte>(rng());
  return v;
}

std::vector<std::byte> Text(std::size_t n, std::uint32_t seed) {
  std::vector<std::byte> v(n);
  std::mt19937 rng(seed);
  for (auto& b : v) b = static_cast<std::byte>("ztier"[rng() % 5]);
  return v;
}

Request Parse(const abi::IoDesc& d, const Limits& limits = kLimits) {
  auto r = ParseDescriptor(d, limits);
  EXPECT_TRUE(r.has_value());
  return r.value_or(Request{});
}

TEST(ServeRequestTest, WriteReadRoundTripAndFua) {
  Device d("zram0", DeviceDefaults{});
  ASSERT_OK(d.SetDisksize(1 << 20));
  auto data = Text(64 << 10, 1);
  EXPECT_EQ(ServeRequest(d, Parse(Desc(abi::kOpWrite, 0, 128, 64)), data),
            64 << 10);
  std::vector<std::byte> back(512 << 10);
  EXPECT_EQ(ServeRequest(d, Parse(Desc(abi::kOpRead, 0, 128, 64)), back),
            64 << 10);
  EXPECT_EQ(0, std::memcmp(back.data(), data.data(), data.size()));
  // FUA: written, then flushed.
  auto more = Text(4096, 2);
  EXPECT_EQ(ServeRequest(d, Parse(Desc(abi::kOpWrite, abi::kIoFFua, 8, 0)),
                         more),
            4096);
  EXPECT_EQ(ServeRequest(d, Parse(Desc(abi::kOpRead, 0, 8, 0)), back), 4096);
  EXPECT_EQ(0, std::memcmp(back.data(), more.data(), 4096));
  EXPECT_EQ(ServeRequest(d, Parse(Desc(abi::kOpFlush, 0, 0, 0)), back), 0);
}

TEST(ServeRequestTest, DiscardFreesPagesAndWriteZeroesKeepsThemWithNoUnmap) {
  Device d("zram0", DeviceDefaults{});
  ASSERT_OK(d.SetDisksize(1 << 20));
  auto data = Text(64 << 10, 3);
  ASSERT_EQ(ServeRequest(d, Parse(Desc(abi::kOpWrite, 0, 128, 0)), data),
            64 << 10);
  EXPECT_EQ(d.Stats().stored_pages, 16u);
  std::vector<std::byte> scratch(4096);
  EXPECT_EQ(ServeRequest(d, Parse(Desc(abi::kOpDiscard, 0, 32, 0)), scratch),
            0);
  EXPECT_EQ(d.Stats().stored_pages, 12u);
  // WRITE_ZEROES without NOUNMAP frees the pages too ...
  EXPECT_EQ(
      ServeRequest(d, Parse(Desc(abi::kOpWriteZeroes, 0, 32, 32)), scratch), 0);
  EXPECT_EQ(d.Stats().stored_pages, 8u);
  // ... with it, they stay allocated as zero-filled pages.
  EXPECT_EQ(ServeRequest(
                d, Parse(Desc(abi::kOpWriteZeroes, abi::kIoFNoUnmap, 32, 64)),
                scratch),
            0);
  EXPECT_EQ(d.Stats().stored_pages, 8u);
  EXPECT_EQ(d.Stats().same_pages, 4u);
  std::vector<std::byte> back(64 << 10);
  ASSERT_EQ(ServeRequest(d, Parse(Desc(abi::kOpRead, 0, 128, 0)), back),
            64 << 10);
  for (std::size_t i = 0; i < 48 << 10; ++i) {
    ASSERT_EQ(back[i], std::byte{0}) << i;
  }
  EXPECT_EQ(0, std::memcmp(back.data() + (48 << 10), data.data() + (48 << 10),
                           16 << 10));
}

TEST(ServeRequestTest, MemLimitIsEnospc) {
  Device d("zram0", DeviceDefaults{});
  ASSERT_OK(d.SetMemLimit(256 << 10));
  ASSERT_OK(d.SetDisksize(16 << 20));
  const Limits limits{16 << 20, 512 << 10};
  auto data = Random(512 << 10, 4);  // incompressible: more than the limit
  EXPECT_EQ(ServeRequest(d, Parse(Desc(abi::kOpWrite, 0, 1024, 0), limits),
                         data),
            -ENOSPC);
}

TEST(ServeRequestTest, FailingBackingReadIsEio) {
  testing::ScopedTempDir dir;
  std::atomic<bool> fail_reads{false};
  DeviceDefaults defaults;
  defaults.backing_file_wrap =
      testing::FaultyFile([&](const FileIo& io, long result) {
        if (io.kind == FileIo::Kind::kRead && fail_reads.load()) return long{-EIO};
        return result;
      });
  Device d("zram0", defaults);
  ASSERT_OK(d.SetBackingDev(dir.File("wb")));
  ASSERT_OK(d.SetDisksize(1 << 20));
  auto data = Text(16 << 10, 5);
  ASSERT_EQ(ServeRequest(d, Parse(Desc(abi::kOpWrite, 0, 32, 0)), data),
            16 << 10);
  ASSERT_OK(d.Writeback("page_indexes=0-3"));
  ASSERT_EQ(d.Stats().bd_count, 4u);
  fail_reads = true;
  std::vector<std::byte> back(16 << 10);
  EXPECT_EQ(ServeRequest(d, Parse(Desc(abi::kOpRead, 0, 32, 0)), back), -EIO);
  fail_reads = false;
  EXPECT_EQ(ServeRequest(d, Parse(Desc(abi::kOpRead, 0, 32, 0)), back),
            16 << 10);
  EXPECT_EQ(back, data);
}

// A READ that fails for lack of memory (the backing store's read got
// ENOMEM: kResourceExhausted) is an IO error, as zram's failed read is:
// -ENOSPC would have the block layer report "critical space allocation
// error" for a read, and the disk would not log it (ENOSPC is the
// mem_limit refusal of a write, which it leaves unlogged).
TEST(ServeRequestTest, ReadFailingForMemoryIsEioNotEnospc) {
  testing::ScopedTempDir dir;
  std::atomic<long> read_error{0};
  DeviceDefaults defaults;
  defaults.backing_file_wrap =
      testing::FaultyFile([&](const FileIo& io, long result) {
        const long e = read_error.load();
        if (io.kind == FileIo::Kind::kRead && e != 0) return e;
        return result;
      });
  Device d("zram0", defaults);
  ASSERT_OK(d.SetBackingDev(dir.File("wb")));
  ASSERT_OK(d.SetDisksize(1 << 20));
  auto data = Text(16 << 10, 6);
  ASSERT_EQ(ServeRequest(d, Parse(Desc(abi::kOpWrite, 0, 32, 0)), data),
            16 << 10);
  ASSERT_OK(d.Writeback("page_indexes=0-3"));
  ASSERT_EQ(d.Stats().bd_count, 4u);
  std::vector<std::byte> back(16 << 10);
  for (long err : {-ENOMEM, -ENOBUFS}) {
    SCOPED_TRACE(err);
    read_error = err;
    EXPECT_EQ(ServeRequest(d, Parse(Desc(abi::kOpRead, 0, 32, 0)), back),
              -EIO);
  }
  read_error = 0;
  EXPECT_EQ(ServeRequest(d, Parse(Desc(abi::kOpRead, 0, 32, 0)), back),
            16 << 10);
  EXPECT_EQ(back, data);
}

TEST(ServeRequestTest, ResetDeviceIsEio) {
  Device d("zram0", DeviceDefaults{});
  std::vector<std::byte> buf(4096);
  EXPECT_EQ(ServeRequest(d, Request{Op::kRead, 0, 4096}, buf), -EIO);
}

TEST(TraceLineTest, FormatsAndParsesBack) {
  char line[kTraceLineMax];
  const auto d = Desc(abi::kOpWriteZeroes, abi::kIoFNoUnmap, 2048, 123456789);
  const std::size_t n = FormatTraceLine(d, -28, line);
  EXPECT_EQ(std::string(line, n), "5 0x8000 2048 123456789 -28\n");
  abi::IoDesc back{};
  std::int32_t result = 1;
  ASSERT_TRUE(ParseTraceLine(std::string(line, n), &back, &result));
  EXPECT_EQ(back.op_flags, d.op_flags);
  EXPECT_EQ(back.nr_sectors, d.nr_sectors);
  EXPECT_EQ(back.start_sector, d.start_sector);
  EXPECT_EQ(result, -28);
  EXPECT_FALSE(ParseTraceLine("# a comment", &back, &result));
  EXPECT_FALSE(ParseTraceLine("   ", &back, &result));
}

// Replays testdata/ublk_descriptors.txt: every descriptor parses and is
// served on a device of the trace's size (a "# disksize=BYTES" line), with
// the result the trace recorded where it has one (writes carry made-up
// data, so only success or the errno class is compared).
// A failed request's log line names its errno, as the server's other
// lines do (ErrnoName).
TEST(TraceLineTest, FailedRequestLineNamesTheErrno) {
  EXPECT_EQ(FailedRequestLine("/dev/ublkb0", Desc(abi::kOpWrite, 0, 8, 16),
                              -EIO),
            "/dev/ublkb0: write of 8 sectors at sector 16 failed: EIO "
            "(Input/output error)");
  EXPECT_EQ(ErrnoText(-EINVAL), "EINVAL (Invalid argument)");
}

TEST(ReplayTest, RecordedDescriptors) {
  std::ifstream in(ZTIER_UBLK_DESCRIPTORS);
  if (!in) GTEST_SKIP() << "no " << ZTIER_UBLK_DESCRIPTORS;
  std::uint64_t disksize = 64 << 20;
  std::uint32_t max_io = 512 << 10;
  std::vector<std::pair<abi::IoDesc, std::int32_t>> reqs;
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("# disksize=", 0) == 0) disksize = std::stoull(line.substr(11));
    if (line.rfind("# max_io=", 0) == 0) max_io = static_cast<std::uint32_t>(std::stoul(line.substr(9)));
    abi::IoDesc d{};
    std::int32_t result = INT32_MIN;
    if (ParseTraceLine(line, &d, &result)) reqs.emplace_back(d, result);
  }
  ASSERT_FALSE(reqs.empty());
  Device dev("zram0", DeviceDefaults{});
  ASSERT_OK(dev.SetDisksize(disksize));
  const Limits limits{disksize, max_io};
  std::vector<std::byte> buf = Text(max_io, 9);
  for (const auto& [d, recorded] : reqs) {
    char text[kTraceLineMax];
    SCOPED_TRACE(std::string(text, FormatTraceLine(d, recorded, text)));
    auto req = ParseDescriptor(d, limits);
    const std::int32_t got =
        req.has_value() ? ServeRequest(dev, *req, buf) : req.error();
    if (recorded == INT32_MIN) {
      EXPECT_GE(got, 0);
    } else {
      EXPECT_EQ(got, recorded);
    }
  }
}

// A refused commit (its CQE a negative errno, say io_uring's -ENOMEM) has
// not completed the request it carried: the same result is committed
// again after a doubling pause, and only a commit refused kCommitRetries
// times gives the queue up. A refused fetch carried no request: the tag
// ends.
TEST(CommitRetriesTest, ARefusedCommitIsCommittedAgain) {
  CommitRetries c(4);
  EXPECT_EQ(c.Refused(0, -ENOMEM).kind,
            CommitRetries::Action::kEndOfTag);  // fetch

  c.Fetched(2);
  c.Committed(2, 4096);
  std::vector<std::uint32_t> delays;
  std::uint64_t total_ms = 0;
  for (int i = 0; i < CommitRetries::kCommitRetries; ++i) {
    const CommitRetries::Action a = c.Refused(2, -ENOMEM);
    ASSERT_EQ(a.kind, CommitRetries::Action::kRetry) << "try " << i;
    EXPECT_EQ(a.result, 4096);
    if (delays.size() < 8) delays.push_back(a.delay_ms);
    total_ms += a.delay_ms;
  }
  EXPECT_EQ(delays, (std::vector<std::uint32_t>{1, 2, 4, 8, 16, 32, 64, 64}));
  EXPECT_GT(total_ms, 10000u);  // "about 12 s" (request.h)
  EXPECT_LT(total_ms, 15000u);
  const CommitRetries::Action last = c.Refused(2, -ENOMEM);
  EXPECT_EQ(last.kind, CommitRetries::Action::kGiveUp);
  EXPECT_EQ(last.result, 4096);

  // A commit that went through (a request came for the tag) starts over.
  c.Fetched(2);
  c.Committed(2, -EIO);
  const CommitRetries::Action again = c.Refused(2, -ENOMEM);
  EXPECT_EQ(again.kind, CommitRetries::Action::kRetry);
  EXPECT_EQ(again.result, -EIO);
  EXPECT_EQ(again.delay_ms, 1u);
  // Other tags are their own.
  c.Committed(1, 0);
  EXPECT_EQ(c.Refused(1, -ENOMEM).delay_ms, 1u);
  EXPECT_EQ(c.Refused(3, -ENOMEM).kind, CommitRetries::Action::kEndOfTag);
}

// Only a refusal that may pass a moment later is retried. From the
// kernel's sources (Linux 6.12): io_uring refuses a command for want of
// memory (-ENOMEM, io_uring_cmd_prep_setup() in io_uring/uring_cmd.c;
// -EAGAIN and -EINTR are its other "try again"), while the driver's own
// refusals (__ublk_ch_uring_cmd() in drivers/block/ublk_drv.c: -EINVAL
// for a command out of step with the tag, -EBUSY for a tag with a command
// already there, -EOPNOTSUPP for an unknown op) and io_uring's others
// (-EBADF, -ECANCELED for a ring going away, -EFAULT) are the same on
// every retry: the queue gives up at once, not after about 12 s.
TEST(CommitRetriesTest, OnlyACommitRefusedForAWhileIsCommittedAgain) {
  for (const int err :
       {EINVAL, EBUSY, EOPNOTSUPP, EBADF, ECANCELED, EFAULT, ENOBUFS, EPERM}) {
    CommitRetries c(2);
    c.Fetched(1);
    c.Committed(1, 4096);
    const CommitRetries::Action a = c.Refused(1, -err);
    EXPECT_EQ(a.kind, CommitRetries::Action::kGiveUp) << strerrorname_np(err);
    EXPECT_EQ(a.result, 4096) << strerrorname_np(err);
    EXPECT_FALSE(CommitRetries::RefusedForAWhile(-err)) << strerrorname_np(err);
  }
  for (const int err : {ENOMEM, EAGAIN, EINTR}) {
    CommitRetries c(2);
    c.Fetched(1);
    c.Committed(1, -EIO);
    const CommitRetries::Action a = c.Refused(1, -err);
    EXPECT_EQ(a.kind, CommitRetries::Action::kRetry) << strerrorname_np(err);
    EXPECT_EQ(a.result, -EIO) << strerrorname_np(err);
    EXPECT_EQ(a.delay_ms, 1u) << strerrorname_np(err);
    EXPECT_TRUE(CommitRetries::RefusedForAWhile(-err)) << strerrorname_np(err);
  }
  // Retried for a while, then refused for good: given up at once.
  CommitRetries c(2);
  c.Fetched(0);
  c.Committed(0, 0);
  EXPECT_EQ(c.Refused(0, -ENOMEM).kind, CommitRetries::Action::kRetry);
  EXPECT_EQ(c.Refused(0, -EINVAL).kind, CommitRetries::Action::kGiveUp);
  // A refused fetch is the end of its tag, whatever the errno.
  EXPECT_EQ(c.Refused(1, -EINVAL).kind, CommitRetries::Action::kEndOfTag);
  EXPECT_EQ(c.Refused(1, -ENOMEM).kind, CommitRetries::Action::kEndOfTag);
}

// Commits refused together (a kernel short of memory refuses them all)
// share one pause per round: with every tag of a queue of 64 refused in
// every round, the queue gives up after about 12 s in all, not 12 s per
// tag (some 13 minutes, with the IO and a STOP_DEV waiting meanwhile).
TEST(CommitRetriesTest, CommitsRefusedTogetherShareOnePause) {
  constexpr std::uint16_t kDepth = 64;
  CommitRetries c(kDepth);
  for (std::uint16_t tag = 0; tag < kDepth; ++tag) {
    c.Fetched(tag);
    c.Committed(tag, 4096);
  }
  std::uint64_t total_ms = 0;
  int rounds = 0;
  bool gave_up = false;
  while (!gave_up) {
    ASSERT_LT(rounds, 1000);
    for (std::uint16_t tag = 0; tag < kDepth; ++tag) {
      const CommitRetries::Action a = c.Refused(tag, -ENOMEM);
      if (a.kind == CommitRetries::Action::kGiveUp) {
        gave_up = true;
        break;
      }
      ASSERT_EQ(a.kind, CommitRetries::Action::kRetry);
      c.QueueRetry(tag, a);
    }
    if (gave_up) break;
    ASSERT_TRUE(c.HasRetries());
    total_ms += c.RetryPauseMs();
    std::vector<std::uint16_t> committed;
    c.TakeRetries([&](std::uint16_t tag, std::int32_t result) {
      EXPECT_EQ(result, 4096);
      committed.push_back(tag);
    });
    EXPECT_EQ(committed.size(), kDepth);
    EXPECT_FALSE(c.HasRetries());
    EXPECT_EQ(c.RetryPauseMs(), 0u);
    ++rounds;
  }
  EXPECT_EQ(rounds, CommitRetries::kCommitRetries);
  EXPECT_GT(total_ms, 10000u);
  EXPECT_LT(total_ms, 15000u);
}

}  // namespace
}  // namespace ztier::ublk
