// uring_writer_test.cc: the io_uring writer (uring_writer.cc) while the
// kernel refuses its submits. This binary defines io_uring_submit() and
// io_uring_submit_and_wait() itself, so uring_writer.cc calls these: with
// the fault on they hand nothing to the kernel and return -EAGAIN, as
// io_uring_enter does when it has no memory for requests; otherwise they
// call liburing's.
#include <dlfcn.h>
#include <fcntl.h>
#include <liburing.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "backing_writers.h"
#include "testing/failing_new.h"
#include "testing/test_util.h"
#include "ztier/page.h"

namespace {

bool g_refuse_submits = false;

template <typename F>
F* Liburing(const char* name) {
  return reinterpret_cast<F*>(::dlsym(RTLD_NEXT, name));
}

}  // namespace

extern "C" int io_uring_submit(io_uring* ring) {
  if (g_refuse_submits) return -EAGAIN;
  static auto* const real = Liburing<int(io_uring*)>("io_uring_submit");
  return real(ring);
}

extern "C" int io_uring_submit_and_wait(io_uring* ring, unsigned wait_nr) {
  if (g_refuse_submits) return -EAGAIN;
  static auto* const real =
      Liburing<int(io_uring*, unsigned)>("io_uring_submit_and_wait");
  return real(ring, wait_nr);
}

namespace ztier::internal {
namespace {

constexpr std::size_t kIos = 4;

class UringWriterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fd_ = ::open(tmp_.File("f").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    ASSERT_GE(fd_, 0) << std::strerror(errno);
    auto w = NewUringWriter(fd_, tmp_.File("f"), kIos, kPageSize);
    ASSERT_TRUE(w.has_value()) << w.error().ToString();
    w_ = std::move(*w);
    for (std::size_t io = 0; io < kIos; ++io) {
      std::memset(w_->buffer(io), static_cast<int>(io + 1), kPageSize);
    }
  }
  void TearDown() override {
    g_refuse_submits = false;
    w_.reset();
    if (fd_ >= 0) ::close(fd_);
  }

  void Queue(std::size_t io) { w_->Queue(io, io * kPageSize, kPageSize); }

  // With submits accepted again: queues again each write that failed
  // (last[io], all reported), and reaps, queueing again what fails, until
  // every one is written; then page `io` of the file holds the byte io + 1.
  void WriteTheRest(std::vector<long>& last) {
    g_refuse_submits = false;
    for (std::size_t io = 0; io < kIos; ++io) {
      if (last[io] != static_cast<long>(kPageSize)) Queue(io);
    }
    const auto requeue = [&](std::size_t io, long result) {
      last[io] = result;
      if (result != static_cast<long>(kPageSize)) Queue(io);
    };
    for (int i = 0; i < 100; ++i) {
      bool all = true;
      for (long r : last) all = all && r == static_cast<long>(kPageSize);
      if (all) break;
      w_->Reap(/*wait=*/true, requeue);
    }
    for (std::size_t io = 0; io < kIos; ++io) {
      EXPECT_EQ(last[io], static_cast<long>(kPageSize)) << "io " << io;
      unsigned char c = 0;
      ASSERT_EQ(::pread(fd_, &c, 1, static_cast<off_t>(io * kPageSize)), 1);
      EXPECT_EQ(c, io + 1);
    }
  }

  testing::ScopedTempDir tmp_;
  int fd_ = -1;
  std::unique_ptr<BackingFileWriter> w_;
};

// A write failed by a refused submit and queued again from `done` finds
// the submission queue full of the refused ones (EBUSY): Queue records
// that failure without allocating (uring_writer.cc: a write it took is
// never left untracked by a std::bad_alloc).
TEST_F(UringWriterTest, QueueingAgainFromDoneDoesNotAllocate) {
  for (std::size_t io = 0; io < kIos; ++io) Queue(io);
  g_refuse_submits = true;
  std::vector<long> last(kIos, 0);
  bool allocated = false;
  const auto requeue_once = [&](std::size_t io, long result) {
    const bool first = last[io] == 0;
    last[io] = result;
    if (!first) return;
    testing::FailEveryAllocation(true);
    try {
      Queue(io);
    } catch (const std::bad_alloc&) {
      allocated = true;
    }
    testing::FailEveryAllocation(false);
  };
  std::size_t reported = 0;
  for (int i = 0; i < 10 && reported < 2 * kIos; ++i) {
    reported += w_->Reap(/*wait=*/false, requeue_once);
  }
  EXPECT_FALSE(allocated);
  EXPECT_EQ(reported, 2 * kIos);
  for (long r : last) EXPECT_EQ(r, -EBUSY);
  WriteTheRest(last);
}

// A `done` that queues every failed write again while every submit is
// refused: each Reap reports each write once and returns, rather than
// reporting the same writes again and again.
TEST_F(UringWriterTest, EachReapReportsEachRefusedWriteOnce) {
  for (std::size_t io = 0; io < kIos; ++io) Queue(io);
  g_refuse_submits = true;
  std::vector<long> last(kIos, 0);
  std::vector<int> reports(kIos, 0);
  const auto requeue = [&](std::size_t io, long result) {
    last[io] = result;
    // A bound, so that a writer that reports them for ever still returns.
    if (++reports[io] < 1000) Queue(io);
  };
  EXPECT_EQ(w_->Reap(/*wait=*/false, requeue), kIos);
  for (std::size_t io = 0; io < kIos; ++io) {
    EXPECT_EQ(reports[io], 1) << "io " << io;
    EXPECT_EQ(last[io], -EAGAIN) << "io " << io;
  }
  // The writes queued again failed at once (EBUSY): the next Reap says so.
  const auto record = [&](std::size_t io, long result) {
    last[io] = result;
    ++reports[io];
  };
  EXPECT_EQ(w_->Reap(/*wait=*/true, record), kIos);
  for (std::size_t io = 0; io < kIos; ++io) {
    EXPECT_EQ(reports[io], 2) << "io " << io;
    EXPECT_EQ(last[io], -EBUSY) << "io " << io;
  }
  WriteTheRest(last);
}

}  // namespace
}  // namespace ztier::internal
