// Tests of the BackingFile implementations (ztier/backing_file.h): the real
// file (platform/posix_backing_file.h) with each of its writers, the
// in-memory file, and the fault-injecting wrapper, through the interface.
#include "ztier/backing_file.h"

#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <new>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "backing_writers.h"
#include "platform/posix_backing_file.h"
#include "testing/failing_new.h"
#include "testing/test_util.h"
#include "ztier/page.h"

namespace ztier {
namespace {

using testing::ScopedTempDir;

// Writes `ios` IOs of `blocks` pages (page k of the file holds the byte k)
// from offset 0 through a writer of that shape, and returns each IO's result.
std::vector<long> WriteAll(BackingFile& f, std::size_t ios,
                           std::size_t blocks) {
  auto w = f.NewWriter(ios, blocks * kPageSize);
  EXPECT_TRUE(w.has_value()) << w.error().ToString();
  if (!w.has_value()) return {};
  std::vector<long> results(ios, 1);
  for (std::size_t io = 0; io < ios; ++io) {
    for (std::size_t b = 0; b < blocks; ++b) {
      std::memset((*w)->buffer(io) + b * kPageSize,
                  static_cast<int>(io * blocks + b), kPageSize);
    }
    (*w)->Queue(io, io * blocks * kPageSize, blocks * kPageSize);
  }
  std::size_t got = 0;
  while (got < ios) {
    got += (*w)->Reap(/*wait=*/true, [&](std::size_t io, long result) {
      results[io] = result;
    });
  }
  return results;
}

// Page k holds the byte k, for k < pages.
void ExpectPages(BackingFile& f, std::size_t pages) {
  alignas(kPageSize) static std::byte buf[kPageSize];
  for (std::size_t k = 0; k < pages; ++k) {
    ASSERT_EQ(f.Read(k * kPageSize, buf), static_cast<long>(kPageSize));
    EXPECT_EQ(buf[0], static_cast<std::byte>(k));
    EXPECT_EQ(buf[kPageSize - 1], static_cast<std::byte>(k));
  }
}

struct Shape {
  std::size_t ios;
  std::size_t blocks;
};

class PosixFileTest : public ::testing::TestWithParam<Shape> {};

TEST_P(PosixFileTest, CreatesSizesWritesAndReads) {
  ScopedTempDir dir;
  const std::string path = dir.File("wb");
  bool created = false;
  auto f = internal::OpenPosixBackingFile(path, 64 * kPageSize,
                                          /*direct=*/true, &created);
  ASSERT_TRUE(f.has_value()) << f.error().ToString();
  EXPECT_TRUE(created);
  EXPECT_EQ((*f)->name(), path);
  EXPECT_EQ((*f)->size(), 64 * kPageSize);
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(static_cast<std::uint64_t>(st.st_size), 64 * kPageSize);
  const Shape s = GetParam();
  for (long r : WriteAll(**f, s.ios, s.blocks)) {
    EXPECT_EQ(r, static_cast<long>(s.blocks * kPageSize));
  }
  ExpectPages(**f, s.ios * s.blocks);
  (*f)->Keep();  // else the file it made goes with it
  f->reset();
  // Opened again: not created, the same size, the same data.
  f = internal::OpenPosixBackingFile(path, kPageSize, /*direct=*/false,
                                     &created);
  ASSERT_TRUE(f.has_value()) << f.error().ToString();
  EXPECT_FALSE(created);
  EXPECT_FALSE((*f)->direct());
  EXPECT_EQ((*f)->size(), 64 * kPageSize);
  ExpectPages(**f, s.ios * s.blocks);
}

// {1, 1}: the pwrite writer; the others io_uring where it is built in.
INSTANTIATE_TEST_SUITE_P(Writers, PosixFileTest,
                         ::testing::Values(Shape{1, 1}, Shape{4, 8},
                                           Shape{16, 1}),
                         [](const auto& p) {
                           return std::to_string(p.param.ios) + "x" +
                                  std::to_string(p.param.blocks);
                         });

// Where the kernel refuses io_uring (the kernel.io_uring_disabled sysctl,
// a seccomp filter, no locked memory left), a writer of many IOs writes
// with pwrite instead of failing every writeback. A child process installs
// a seccomp filter that refuses io_uring_setup with EPERM, then writes.
TEST(PosixFileOpenTest, WhereIoUringIsRefusedWritersUsePwrite) {
  ScopedTempDir dir;
  const std::string path = dir.File("wb");
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    sock_fprog prog{.len = 4, .filter = filter};
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
        ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
      ::_exit(2);
    }
    if (::syscall(__NR_io_uring_setup, 4, nullptr) == 0 || errno != EPERM) {
      ::_exit(3);  // the filter is not in force
    }
    bool created = false;
    auto f = internal::OpenPosixBackingFile(path, 64 * kPageSize,
                                            /*direct=*/true, &created);
    if (!f.has_value()) ::_exit(4);
    auto w = (*f)->NewWriter(4, 8 * kPageSize);
    if (!w.has_value()) ::_exit(5);
    for (std::size_t io = 0; io < 4; ++io) {
      std::memset((*w)->buffer(io), static_cast<int>(io + 1), 8 * kPageSize);
      (*w)->Queue(io, io * 8 * kPageSize, 8 * kPageSize);
    }
    std::size_t got = 0, good = 0;
    while (got < 4) {
      got += (*w)->Reap(true, [&](std::size_t, long result) {
        good += result == static_cast<long>(8 * kPageSize);
      });
    }
    alignas(kPageSize) static std::byte buf[kPageSize];
    for (std::size_t io = 0; io < 4; ++io) {
      if ((*f)->Read(io * 8 * kPageSize + 7 * kPageSize, buf) !=
              static_cast<long>(kPageSize) ||
          buf[0] != static_cast<std::byte>(io + 1)) {
        ::_exit(6);
      }
    }
    ::_exit(good == 4 ? 0 : 7);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  // 5: NewWriter failed, as it did before the fallback.
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST(PosixFileOpenTest, AFileIsClaimedWhileItIsOpen) {
  ScopedTempDir dir;
  const std::string path = dir.File("wb");
  bool created = false;
  auto first = internal::OpenPosixBackingFile(path, 16 * kPageSize,
                                              /*direct=*/false, &created);
  ASSERT_TRUE(first.has_value()) << first.error().ToString();
  auto second = internal::OpenPosixBackingFile(path, 16 * kPageSize,
                                               /*direct=*/false, &created);
  ASSERT_FALSE(second.has_value());
  EXPECT_EQ(second.error().code(), StatusCode::kBusy);
  EXPECT_FALSE(created);
  (*first)->Keep();  // else the file it made goes with it
  first->reset();
  second = internal::OpenPosixBackingFile(path, 16 * kPageSize,
                                          /*direct=*/false, &created);
  EXPECT_TRUE(second.has_value()) << second.error().ToString();
  EXPECT_FALSE(created) << "not the file the first one claimed";
}

TEST(PosixFileOpenTest, ErrorsNameThePath) {
  ScopedTempDir dir;
  bool created = true;
  auto missing = internal::OpenPosixBackingFile(dir.File("no/such"), 1 << 20,
                                                true, &created);
  ASSERT_FALSE(missing.has_value());
  EXPECT_EQ(missing.error().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.error().message().find("no/such"), std::string::npos);
  EXPECT_FALSE(created);
  auto not_file = internal::OpenPosixBackingFile(dir.path(), 1 << 20, true,
                                                 &created);
  ASSERT_FALSE(not_file.has_value());
  EXPECT_EQ(not_file.error().code(), StatusCode::kInvalidArgument);
  auto tiny = internal::OpenPosixBackingFile(dir.File("tiny"), 100, true,
                                             &created);
  ASSERT_FALSE(tiny.has_value());
  EXPECT_EQ(tiny.error().code(), StatusCode::kInvalidArgument);
  struct stat st;
  EXPECT_NE(::stat(dir.File("tiny").c_str(), &st), 0);  // not left behind
}

TEST(MemFileTest, ZeroedThenHoldsWhatIsWritten) {
  auto f = NewMemBackingFile(16 * kPageSize, "mem0");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->name(), "mem0");
  EXPECT_EQ(f->size(), 16 * kPageSize);
  EXPECT_FALSE(f->direct());
  alignas(kPageSize) std::byte buf[kPageSize];
  std::memset(buf, 0xAA, sizeof(buf));
  ASSERT_EQ(f->Read(3 * kPageSize, buf), static_cast<long>(kPageSize));
  EXPECT_EQ(buf[0], std::byte{0});
  for (long r : WriteAll(*f, 4, 4)) EXPECT_EQ(r, long{4 * kPageSize});
  ExpectPages(*f, 16);
}

TEST(MemFileTest, TransfersPastTheEndAreCutShort) {
  auto f = NewMemBackingFile(2 * kPageSize);
  ASSERT_NE(f, nullptr);
  alignas(kPageSize) std::byte buf[2 * kPageSize];
  EXPECT_EQ(f->Read(kPageSize, buf), static_cast<long>(kPageSize));
  EXPECT_EQ(f->Read(2 * kPageSize, buf), 0);
  auto w = f->NewWriter(2, 2 * kPageSize);
  ASSERT_TRUE(w.has_value());
  (*w)->Queue(0, kPageSize, 2 * kPageSize);  // half inside
  (*w)->Queue(1, 2 * kPageSize, kPageSize);  // all outside
  std::map<std::size_t, long> results;
  EXPECT_EQ((*w)->Reap(false, [&](std::size_t io, long r) { results[io] = r; }),
            2u);
  EXPECT_EQ(results[0], static_cast<long>(kPageSize));
  EXPECT_EQ(results[1], -ENOSPC);
}

TEST(FaultyFileTest, TheFaultSeesEveryTransferAndDecidesItsResult) {
  std::vector<FileIo> seen;
  long inject = 0;
  std::shared_ptr<BackingFile> mem = NewMemBackingFile(16 * kPageSize, "m");
  auto f = NewFaultyBackingFile(mem, [&](const FileIo& io, long result) {
    if (io.kind == FileIo::Kind::kNewWriter) return result;
    seen.push_back(io);
    return inject == 0 ? result : inject;
  });
  EXPECT_EQ(f->name(), "m");
  EXPECT_EQ(f->size(), 16 * kPageSize);
  for (long r : WriteAll(*f, 2, 4)) EXPECT_EQ(r, long{4 * kPageSize});
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].kind, FileIo::Kind::kWrite);
  EXPECT_EQ(seen[1].offset, 4 * kPageSize);
  EXPECT_EQ(seen[1].bytes, 4 * kPageSize);
  ExpectPages(*mem, 8);  // passed through: the data is there

  inject = -EIO;
  alignas(kPageSize) std::byte buf[kPageSize];
  EXPECT_EQ(f->Read(5 * kPageSize, buf), -EIO);
  EXPECT_EQ(seen.back().kind, FileIo::Kind::kRead);
  EXPECT_EQ(seen.back().offset, 5 * kPageSize);
  EXPECT_EQ(seen.back().bytes, kPageSize);
  for (long r : WriteAll(*f, 1, 1)) EXPECT_EQ(r, -EIO);
}

// A writer the fault refuses is not made, with the fault's errno; one it
// lets through is the base file's.
TEST(FaultyFileTest, TheFaultCanRefuseToMakeAWriter) {
  std::vector<FileIo> seen;
  bool refuse = true;
  std::shared_ptr<BackingFile> mem = NewMemBackingFile(16 * kPageSize, "m");
  auto f = NewFaultyBackingFile(mem, [&](const FileIo& io, long result) {
    seen.push_back(io);
    return io.kind == FileIo::Kind::kNewWriter && refuse ? long{-ENOMEM}
                                                         : result;
  });
  auto w = f->NewWriter(2, 4 * kPageSize);
  ASSERT_FALSE(w.has_value());
  EXPECT_EQ(w.error().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(w.error().posix_errno(), ENOMEM);
  EXPECT_NE(w.error().message().find("writer for m"), std::string::npos)
      << w.error().ToString();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].kind, FileIo::Kind::kNewWriter);
  EXPECT_EQ(seen[0].bytes, 8 * kPageSize);

  refuse = false;
  for (long r : WriteAll(*f, 2, 4)) EXPECT_EQ(r, long{4 * kPageSize});
  ExpectPages(*mem, 8);
  ASSERT_EQ(seen.size(), 4u);  // the writer, then its two writes
  EXPECT_EQ(seen[1].kind, FileIo::Kind::kNewWriter);
  EXPECT_EQ(seen[2].kind, FileIo::Kind::kWrite);
}

// A file that answers every optional question of the interface as a remote
// would, and records what it is told.
class RemoteLikeFile final : public BackingFile {
 public:
  const std::string& name() const override { return name_; }
  std::uint64_t size() const override { return 64 * kPageSize; }
  bool direct() const override { return false; }
  long Read(std::uint64_t, std::span<std::byte> out) override {
    return static_cast<long>(out.size());
  }
  Result<std::unique_ptr<BackingFileWriter>> NewWriter(std::size_t,
                                                       std::size_t) override {
    return Err(Status::Unsupported("no writer"));
  }
  std::size_t max_write_bytes() const override { return 8 * kPageSize; }
  std::uint64_t lost_blocks() const override { return 3; }
  bool can_discard() const override { return true; }
  void Forget(const Range& range) override { forgotten.push_back(range); }

  std::vector<Range> forgotten;

 private:
  const std::string name_ = "remote";
};

// A writer the file itself cannot make is refused as the file refuses it;
// the fault is not asked.
TEST(FaultyFileTest, AWriterTheFileCannotMakeIsTheFilesError) {
  int asked = 0;
  auto f = NewFaultyBackingFile(std::make_shared<RemoteLikeFile>(),
                                [&](const FileIo&, long) {
                                  ++asked;
                                  return long{-ENOMEM};
                                });
  auto w = f->NewWriter(1, kPageSize);
  ASSERT_FALSE(w.has_value());
  EXPECT_EQ(w.error().code(), StatusCode::kUnsupported);
  EXPECT_EQ(asked, 0);
}

TEST(FaultyFileTest, PassesEveryOtherQuestionToTheFileItWraps) {
  auto remote = std::make_shared<RemoteLikeFile>();
  auto f = NewFaultyBackingFile(remote, nullptr);
  // A store sizes its IOs by max_write_bytes(): a wrapper that hid the
  // remote's limit would have it send writes the remote refuses.
  EXPECT_EQ(f->max_write_bytes(), 8 * kPageSize);
  EXPECT_EQ(f->lost_blocks(), 3u);
  EXPECT_TRUE(f->can_discard());
  f->Forget({.offset = 2 * kPageSize, .len = kPageSize});
  ASSERT_EQ(remote->forgotten.size(), 1u);
  EXPECT_EQ(remote->forgotten[0].offset, 2 * kPageSize);
  EXPECT_EQ(remote->forgotten[0].len, kPageSize);
}

// A `done` that queues a write again, as BlockWriter's user may (its IO is
// free before its `done` runs): every writer alike (ztier/backing_file.h).
enum class WriterKind {
  kPwrite,     // internal::NewPwriteWriter, whatever the shape
  kRealFile,   // the real file's own choice: io_uring where built in
  kMem,        // NewMemBackingFile
  kFaultyMem,  // NewFaultyBackingFile over NewMemBackingFile
};

struct RequeueCase {
  const char* name;
  WriterKind kind;
  std::size_t ios;
};
void PrintTo(const RequeueCase& c, std::ostream* os) { *os << c.name; }

class RequeueFromDoneTest : public ::testing::TestWithParam<RequeueCase> {
 protected:
  static constexpr std::size_t kPages = 64;

  void SetUp() override {
    const RequeueCase c = GetParam();
    std::shared_ptr<BackingFile> mem;
    switch (c.kind) {
      case WriterKind::kPwrite: {
        fd_ = ::open(dir_.File("f").c_str(), O_RDWR | O_CREAT | O_CLOEXEC,
                     0600);
        ASSERT_GE(fd_, 0) << std::strerror(errno);
        ASSERT_EQ(::ftruncate(fd_, kPages * kPageSize), 0);
        auto w = internal::NewPwriteWriter(fd_, dir_.File("f"), c.ios,
                                           kPageSize);
        ASSERT_TRUE(w.has_value()) << w.error().ToString();
        w_ = std::move(*w);
        return;
      }
      case WriterKind::kRealFile: {
        bool created = false;
        auto f = internal::OpenPosixBackingFile(
            dir_.File("f"), kPages * kPageSize, /*direct=*/false, &created);
        ASSERT_TRUE(f.has_value()) << f.error().ToString();
        file_ = std::move(*f);
        break;
      }
      case WriterKind::kMem:
        file_ = NewMemBackingFile(kPages * kPageSize);
        break;
      case WriterKind::kFaultyMem:
        mem = NewMemBackingFile(kPages * kPageSize);
        file_ = NewFaultyBackingFile(mem, nullptr);
        break;
    }
    auto w = file_->NewWriter(c.ios, kPageSize);
    ASSERT_TRUE(w.has_value()) << w.error().ToString();
    w_ = std::move(*w);
  }
  void TearDown() override {
    w_.reset();
    file_.reset();
    if (fd_ >= 0) ::close(fd_);
  }

  std::size_t ios() const { return GetParam().ios; }
  // Queues a write of IO `io` to page `page`, which then holds `page`.
  void Queue(std::size_t io, std::size_t page) {
    std::memset(w_->buffer(io), static_cast<int>(page), kPageSize);
    w_->Queue(io, page * kPageSize, kPageSize);
    ++queued_[io];
  }
  // One Reap(wait) with `done`, checking that it reports each IO at most
  // once (a write queued by its `done` is a later Reap's).
  std::size_t ReapOnce(const std::function<void(std::size_t, long)>& done) {
    std::vector<int> seen(ios(), 0);
    const std::size_t n =
        w_->Reap(/*wait=*/true, [&](std::size_t io, long result) {
          EXPECT_LT(io, ios());
          if (io >= ios()) return;
          EXPECT_EQ(++seen[io], 1) << "io " << io << " twice in one Reap";
          EXPECT_EQ(result, static_cast<long>(kPageSize)) << "io " << io;
          ++reported_[io];
          done(io, result);
        });
    std::size_t sum = 0;
    for (int s : seen) sum += static_cast<std::size_t>(s);
    EXPECT_EQ(n, sum);
    return n;
  }
  // Reaps until every queued write is reported (each exactly once), at most
  // `tries` times.
  void ReapTheRest(int tries = 100) {
    for (int i = 0; i < tries && reported_ != queued_; ++i) {
      ReapOnce([](std::size_t, long) {});
    }
    EXPECT_EQ(reported_, queued_);
  }
  // Page `page` of the file holds the byte `page`.
  void ExpectPage(std::size_t page) {
    alignas(kPageSize) static std::byte buf[kPageSize];
    if (file_ == nullptr) {
      ASSERT_EQ(::pread(fd_, buf, kPageSize,
                        static_cast<off_t>(page * kPageSize)),
                static_cast<ssize_t>(kPageSize));
    } else {
      ASSERT_EQ(file_->Read(page * kPageSize, buf),
                static_cast<long>(kPageSize));
    }
    EXPECT_EQ(buf[0], static_cast<std::byte>(page)) << "page " << page;
  }

  ScopedTempDir dir_;
  int fd_ = -1;
  std::unique_ptr<BackingFile> file_;
  std::unique_ptr<BackingFileWriter> w_;
  std::map<std::size_t, int> queued_;
  std::map<std::size_t, int> reported_;
};

// IO 0 written, and from its `done` written again elsewhere: the second
// write is reported too, by a later Reap, and queueing it allocated
// nothing (a write made and not recorded would never be reported). With
// one IO, every IO is in flight; with two, one is idle.
TEST_P(RequeueFromDoneTest, AWriteQueuedFromDoneIsReportedByALaterReap) {
  Queue(0, 1);
  bool allocated = false;
  bool again = true;
  const auto requeue_once = [&](std::size_t io, long) {
    if (!std::exchange(again, false)) return;
    testing::FailEveryAllocation(true);
    try {
      Queue(io, 2);
    } catch (const std::bad_alloc&) {
      allocated = true;
    }
    testing::FailEveryAllocation(false);
  };
  for (int i = 0; i < 100 && reported_[0] == 0; ++i) ReapOnce(requeue_once);
  EXPECT_FALSE(again);
  EXPECT_FALSE(allocated);
  ReapTheRest();
  EXPECT_EQ(reported_[0], 2);
  ExpectPage(1);
  ExpectPage(2);
}

// Every IO in flight, and each `done` queues its IO again: a Reap reports
// each write once and returns, whatever `done` queues; the writes it
// queued are all reported later, each once.
TEST_P(RequeueFromDoneTest, EveryWriteQueuedAgainFromDoneIsReportedOnce) {
  for (std::size_t io = 0; io < ios(); ++io) Queue(io, io);
  const auto requeue = [&](std::size_t io, long) {
    Queue(io, reported_[io] * ios() + io);
  };
  // A bound, so that a writer that reported them for ever still returns.
  for (int i = 0; i < 10; ++i) ReapOnce(requeue);
  ReapTheRest();
  for (std::size_t io = 0; io < ios(); ++io) {
    EXPECT_EQ(reported_[io], queued_[io]) << "io " << io;
    for (int k = 0; k < queued_[io]; ++k) ExpectPage(k * ios() + io);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Writers, RequeueFromDoneTest,
    ::testing::Values(RequeueCase{"Pwrite1", WriterKind::kPwrite, 1},
                      RequeueCase{"Pwrite2", WriterKind::kPwrite, 2},
                      RequeueCase{"RealFile4", WriterKind::kRealFile, 4},
                      RequeueCase{"Mem1", WriterKind::kMem, 1},
                      RequeueCase{"Mem2", WriterKind::kMem, 2},
                      RequeueCase{"FaultyMem2", WriterKind::kFaultyMem, 2}),
    [](const auto& p) { return std::string(p.param.name); });

}  // namespace
}  // namespace ztier
