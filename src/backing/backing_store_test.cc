// backing_store_test.cc: the BackingStore contract on a real file with real
// io_uring: opening, writing and reading back, faults, encryption.
#include "ztier/backing_store.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <new>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "testing/discarding_file.h"
#include "testing/failing_new.h"
#include "testing/faulty_file.h"
#include "testing/test_util.h"

namespace ztier {
namespace {

using Page = std::array<std::byte, kPageSize>;
using Done = BlockWriter::Done;
constexpr char kMarker[] = "ZTIER-PLAINTEXT!";  // 16 bytes

// A fresh directory under $TMPDIR (or /tmp), removed with what it holds.
class TempDir {
 public:
  TempDir() {
    const char* t = std::getenv("TMPDIR");
    std::string tmpl = std::string(t != nullptr ? t : "/tmp") + "/ztbsXXXXXX";
    path_ = mkdtemp(tmpl.data());
    EXPECT_FALSE(path_.empty());
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string File(const std::string& name) const { return path_ + "/" + name; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Block b's content: the marker, then b, repeated over the page.
Page Pattern(std::uint64_t b) {
  Page p;
  for (std::size_t i = 0; i < kPageSize; i += 32) {
    std::memcpy(&p[i], kMarker, 16);
    std::memcpy(&p[i + 16], &b, 8);
    std::memcpy(&p[i + 24], &i, 8);
  }
  return p;
}

std::unique_ptr<BackingStore> OpenStore(BackingOptions o) {
  auto bs = BackingStore::Open(o);
  EXPECT_TRUE(bs.has_value()) << bs.error().ToString();
  return bs.has_value() ? std::move(*bs) : nullptr;
}

std::unique_ptr<BlockWriter> MakeWriter(BackingStore& bs, std::size_t in_flight,
                                        std::size_t max_io_blocks) {
  auto w =
      bs.NewWriter({.in_flight = in_flight, .max_io_blocks = max_io_blocks});
  EXPECT_TRUE(w.has_value()) << w.error().ToString();
  return w.has_value() ? std::move(*w) : nullptr;
}

// Writes Pattern(b) to blocks first..first+count-1, tag b + 1000, in IOs of
// up to max_io_blocks; reaps into `dones` whenever the writer is full.
void WriteRun(BlockWriter& w, std::uint64_t first, std::size_t count,
              std::vector<Done>* dones) {
  auto collect = [dones](const Done& d) { dones->push_back(d); };
  for (std::uint64_t b = first; b < first + count;) {
    while (!w.HasRoom()) w.Reap(/*wait=*/true, collect);
    BlockWriter::Io* io = w.Begin(b);
    while (b < first + count && w.BlocksIn(io) < w.max_io_blocks()) {
      const Page p = Pattern(b);
      std::memcpy(w.Add(io, b + 1000).data(), p.data(), kPageSize);
      ++b;
    }
    w.Submit(io);
  }
}

void Drain(BlockWriter& w, std::vector<Done>* dones) {
  while (w.in_flight() > 0) {
    w.Reap(/*wait=*/true, [dones](const Done& d) { dones->push_back(d); });
  }
}

std::vector<std::byte> ReadFile(const std::string& path) {
  std::vector<std::byte> all;
  const int fd = open(path.c_str(), O_RDONLY);
  EXPECT_GE(fd, 0);
  std::byte buf[65536];
  ssize_t r;
  while ((r = read(fd, buf, sizeof(buf))) > 0)
    all.insert(all.end(), buf, buf + r);
  close(fd);
  return all;
}

bool Contains(const std::vector<std::byte>& hay, const char* needle) {
  const auto* n = reinterpret_cast<const std::byte*>(needle);
  return std::search(hay.begin(), hay.end(), n, n + std::strlen(needle)) !=
         hay.end();
}

TEST(BackingStoreOpenTest, CreatesAMissingFileWithMode0600) {
  TempDir dir;
  auto bs = OpenStore({.path = dir.File("wb"), .size_bytes = 1 << 20});
  ASSERT_NE(bs, nullptr);
  struct stat st;
  ASSERT_EQ(stat(dir.File("wb").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(st.st_size, 1 << 20);
  EXPECT_EQ(bs->num_blocks(), 256u);
  EXPECT_EQ(bs->blocks_used(), 0u);
  EXPECT_FALSE(bs->encrypted());
  EXPECT_EQ(bs->path(), dir.File("wb"));
  EXPECT_TRUE(bs->created());
  bs->KeepFile();  // else the file it made goes with it
  bs.reset();
  EXPECT_FALSE(OpenStore({.path = dir.File("wb"), .size_bytes = 1 << 20})
                   ->created());  // there already
  bs = OpenStore({.path = dir.File("wb2"), .size_bytes = 1 << 20});
  RecordProperty("direct", bs->direct());  // O_DIRECT where the fs allows it
}

// The file Open made is the store's until KeepFile(): given up unused, the
// store takes it away; kept, it stays. Wrapped, it is the file Open opened
// that is kept, and one that wrap_file drops goes at once.
TEST(BackingStoreOpenTest, AFileItMadeGoesWithTheStoreUnlessKept) {
  TempDir dir;
  const std::string path = dir.File("wb");
  for (const bool keep : {false, true}) {
    auto bs = OpenStore({.path = path,
                         .size_bytes = 1 << 20,
                         .wrap_file = [](std::shared_ptr<BackingFile> f) {
                           return NewFaultyBackingFile(f, nullptr);
                         }});
    ASSERT_NE(bs, nullptr);
    if (keep) bs->KeepFile();
    bs.reset();
    EXPECT_EQ(std::filesystem::exists(path), keep) << "kept: " << keep;
  }
  std::filesystem::remove(path);
  auto bs =
      OpenStore({.path = path, .size_bytes = 1 << 20, .wrap_file = [](auto) {
                   return std::shared_ptr<BackingFile>(
                       NewMemBackingFile(16 * kPageSize, "mem"));
                 }});
  ASSERT_NE(bs, nullptr);
  EXPECT_TRUE(bs->created());
  EXPECT_FALSE(std::filesystem::exists(path));  // dropped by wrap_file
  // Nothing left to keep.
  bs->KeepFile();
}

TEST(BackingStoreOpenTest, ExtendsAShortFileAndUsesALongOneWhole) {
  TempDir dir;
  const std::string path = dir.File("wb");
  const int fd = open(path.c_str(), O_CREAT | O_WRONLY, 0644);
  ASSERT_EQ(ftruncate(fd, 10000), 0);  // 2 whole blocks and a tail
  close(fd);
  EXPECT_EQ(OpenStore({.path = path, .size_bytes = 4096})->num_blocks(), 2u);
  EXPECT_EQ(OpenStore({.path = path, .size_bytes = 65536})->num_blocks(), 16u);
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 65536);
}

// Out of memory anywhere in Open (std::bad_alloc, or a failure it
// returns) leaves no file it made, and no descriptor open. Each
// allocation fails in turn (testing/failing_new.h).
TEST(BackingStoreOpenTest, OutOfMemoryLeavesNoFileItMade) {
  testing::ScopedTempDir dir;
  const std::string path = dir.File("wb");
  const auto open_fds = [] {
    return std::distance(std::filesystem::directory_iterator("/proc/self/fd"),
                         std::filesystem::directory_iterator());
  };
  const auto fds = open_fds();
  for (const bool encrypt : {false, true}) {
    for (long n = 1;; ++n) {
      SCOPED_TRACE("allocation " + std::to_string(n) + " fails" +
                   (encrypt ? ", encrypted" : ""));
      std::filesystem::remove(path);
      testing::FailNthAllocation(n);
      bool threw = false, opened = false;
      try {
        opened = BackingStore::Open(
                     {.path = path, .size_bytes = 1 << 20, .encrypt = encrypt})
                     .has_value();
      } catch (const std::bad_alloc&) {
        threw = true;
      }
      const bool failed = testing::AllocationFailed();
      testing::FailNthAllocation(0);
      EXPECT_EQ(open_fds(), fds);
      if (!opened) {
        EXPECT_FALSE(std::filesystem::exists(path))
            << (threw ? "thrown" : "failed") << ", the file left behind";
      }
      if (!failed) break;
    }
  }
}

TEST(BackingStoreOpenTest, RejectsWhatItCannotUse) {
  TempDir dir;
  auto r = BackingStore::Open(
      {.path = dir.File("no/such/wb"), .size_bytes = 1 << 20});
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kNotFound);
  EXPECT_EQ(ErrnoNameOf(r.error()), "ENOENT");  // not kNotFound's ENODEV
  EXPECT_NE(r.error().message().find(dir.File("no/such/wb")),
            std::string::npos);
  r = BackingStore::Open({.path = dir.path(), .size_bytes = 1 << 20});
  EXPECT_EQ(r.error().code(), StatusCode::kInvalidArgument);
  r = BackingStore::Open({.path = dir.File("small"), .size_bytes = 4095});
  EXPECT_EQ(r.error().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(std::filesystem::exists(dir.File("small")));
  r = BackingStore::Open({.path = "", .size_bytes = 1 << 20});
  EXPECT_EQ(r.error().code(), StatusCode::kInvalidArgument);
  // A file of procfs holds no data (its size stays 0 whatever ftruncate
  // says): the kernel's own file systems are refused. Only root may open
  // /proc/version read-write; others are refused that open.
  r = BackingStore::Open({.path = "/proc/version", .size_bytes = 1 << 20});
  ASSERT_FALSE(r.has_value());
  if (geteuid() == 0) {
    EXPECT_EQ(r.error().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.error().message().find("/proc/version is on proc"),
              std::string::npos)
        << r.error().ToString();
  }
  auto bs = OpenStore({.path = dir.File("wb"), .size_bytes = 1 << 20});
  for (BackingStore::WriterOptions o :
       {BackingStore::WriterOptions{.in_flight = 0},
        BackingStore::WriterOptions{.max_io_blocks = 0},
        BackingStore::WriterOptions{.max_io_blocks = 257}}) {
    EXPECT_EQ(bs->NewWriter(o).error().code(), StatusCode::kInvalidArgument);
  }
}

struct WriterCase {
  std::size_t in_flight;
  std::size_t max_io_blocks;
  bool encrypt;
  bool direct = true;
};

class BackingWriteTest : public ::testing::TestWithParam<WriterCase> {};

TEST_P(BackingWriteTest, WritesRunsAndReadsEachBlockBack) {
  const WriterCase c = GetParam();
  TempDir dir;
  auto bs = OpenStore({.path = dir.File("wb"),
                       .size_bytes = 1 << 20,
                       .direct = c.direct,
                       .encrypt = c.encrypt});
  ASSERT_NE(bs, nullptr);
  EXPECT_EQ(bs->encrypted(), c.encrypt);
  EXPECT_TRUE(c.direct || !bs->direct());
  auto w = MakeWriter(*bs, c.in_flight, c.max_io_blocks);
  ASSERT_NE(w, nullptr);
  std::vector<Done> dones;
  std::vector<bool> written(bs->num_blocks());
  std::size_t total = 0;
  while (total < 100) {
    std::size_t got = 0;
    const std::uint64_t first =
        bs->AllocRange(std::min<std::size_t>(8, 100 - total), &got);
    ASSERT_GT(got, 0u);
    WriteRun(*w, first, got, &dones);
    total += got;
  }
  Drain(*w, &dones);
  EXPECT_EQ(bs->blocks_used(), 100u);
  ASSERT_EQ(dones.size(), 100u);
  for (const Done& d : dones) {
    EXPECT_OK(d.status);
    EXPECT_EQ(d.tag, d.block + 1000);
    EXPECT_FALSE(written[d.block]) << "block reported twice: " << d.block;
    written[d.block] = true;
  }
  std::vector<std::byte> unaligned(kPageSize + 1);
  MutablePage out(unaligned.data() + 1, kPageSize);
  for (std::uint64_t b = 0; b < bs->num_blocks(); ++b) {
    if (!written[b]) continue;
    ASSERT_OK(bs->ReadBlock(b, out));
    const Page want = Pattern(b);
    ASSERT_EQ(std::memcmp(out.data(), want.data(), kPageSize), 0) << b;
    bs->Free(b);
  }
  EXPECT_EQ(bs->blocks_used(), 0u);
}

INSTANTIATE_TEST_SUITE_P(
    Modes, BackingWriteTest,
    ::testing::Values(WriterCase{4, 8, false}, WriterCase{4, 8, true},
                      WriterCase{1, 1, false}, WriterCase{1, 1, true},
                      WriterCase{32, 256, false},
                      WriterCase{4, 8, true, /*direct=*/false}),
    [](const auto& p) {
      return std::string(p.param.in_flight == 1 ? "Sync" : "Uring") +
             std::to_string(p.param.max_io_blocks) +
             (p.param.encrypt ? "Encrypted" : "Plain") +
             (p.param.direct ? "" : "Buffered");
    });

// The writer fails every block of an IO whose result the hook rewrites.
class BackingFaultTest : public ::testing::TestWithParam<bool /*sync*/> {};

TEST_P(BackingFaultTest, FailedWritesFailEveryBlockOfTheIo) {
  TempDir dir;
  long inject = 0;  // 0: as is; < 0: that error; > 0: bytes - 4096
  FileIo seen;
  auto bs = OpenStore({.path = dir.File("wb"),
                       .size_bytes = 1 << 20,
                       .wrap_file = testing::FaultyFile(
                           [&](const FileIo& io, long result) {
                             seen = io;
                             if (io.kind != FileIo::Kind::kWrite || inject == 0)
                               return result;
                             return inject < 0 ? inject : result - 4096;
                           })});
  const bool sync = GetParam();
  const std::size_t per_io = sync ? 1 : 8;
  auto w = MakeWriter(*bs, sync ? 1 : 4, per_io);
  // A failed write's errno is kept (ErrnoNameOf): a full file system is
  // ENOSPC or EDQUOT, not the ENOMEM of kResourceExhausted, and an EINVAL
  // (an O_DIRECT write the file system refuses) is named, though kIoError.
  const struct {
    long inject;
    StatusCode code;
    std::string_view errno_name;
  } cases[] = {{0, StatusCode::kOk, "0"},
               {-EIO, StatusCode::kIoError, "EIO"},
               {-ENOSPC, StatusCode::kResourceExhausted, "ENOSPC"},
               {-EDQUOT, StatusCode::kResourceExhausted, "EDQUOT"},
               {-EINVAL, StatusCode::kIoError, "EINVAL"},
               {1, StatusCode::kIoError, "EIO"}};
  std::uint64_t first = 0;
  for (const auto& k : cases) {
    inject = k.inject;
    std::vector<Done> dones;
    WriteRun(*w, first, per_io, &dones);
    Drain(*w, &dones);
    ASSERT_EQ(dones.size(), per_io);
    EXPECT_EQ(seen.offset, first * kPageSize);
    EXPECT_EQ(seen.bytes, per_io * kPageSize);
    for (const Done& d : dones) {
      EXPECT_EQ(d.status.code(), k.code)
          << k.inject << " " << d.status.ToString();
      EXPECT_EQ(ErrnoNameOf(d.status), k.errno_name)
          << k.inject << " " << d.status.ToString();
      if (!d.status.ok()) {
        EXPECT_NE(d.status.message().find(bs->path()), std::string::npos);
      }
    }
    first += per_io;
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, BackingFaultTest, ::testing::Bool(),
                         [](const auto& p) {
                           return p.param ? "Sync" : "Uring";
                         });

TEST(BackingStoreTest, ReadFaultsAndShortReadsYieldNoData) {
  TempDir dir;
  long inject = 0;
  auto bs = OpenStore({.path = dir.File("wb"),
                       .size_bytes = 1 << 20,
                       .wrap_file = testing::FaultyFile(
                           [&](const FileIo& io, long result) {
                             EXPECT_EQ(io.kind, FileIo::Kind::kRead);
                             EXPECT_EQ(io.bytes, kPageSize);
                             return inject == 0 ? result : inject;
                           })});
  Page out;
  out.fill(std::byte{0xAA});
  ASSERT_OK(bs->ReadBlock(3, out));  // never written: zeros, unencrypted
  EXPECT_EQ(out[0], std::byte{0});
  out.fill(std::byte{0xAA});
  // The errno is kept (ErrnoNameOf) though the code is kIoError: a remote
  // file's ETIMEDOUT or EACCES is named as such, not as EIO.
  const struct {
    long inject;
    std::string_view errno_name;
  } cases[] = {{-EIO, "EIO"},
               {-ETIMEDOUT, "ETIMEDOUT"},
               {-EACCES, "EACCES"},
               {100, "EIO"}};
  for (const auto& [bad, errno_name] : cases) {
    inject = bad;
    const Status s = bs->ReadBlock(3, out);
    EXPECT_EQ(s.code(), StatusCode::kIoError) << s.ToString();
    EXPECT_EQ(ErrnoNameOf(s), errno_name) << s.ToString();
    EXPECT_NE(s.message().find(bs->path()), std::string::npos);
    EXPECT_NE(s.message().find("block 3"), std::string::npos);
    EXPECT_EQ(out[0], std::byte{0xAA});
  }
  EXPECT_EQ(bs->ReadBlock(256, out).code(), StatusCode::kOutOfRange);
}

TEST(BackingStoreTest, EncryptedFileHoldsNoPlaintextAndDetectsTampering) {
  TempDir dir;
  for (bool encrypt : {false, true}) {
    const std::string path = dir.File(encrypt ? "enc" : "plain");
    auto bs =
        OpenStore({.path = path, .size_bytes = 1 << 20, .encrypt = encrypt});
    auto w = MakeWriter(*bs, 4, 8);
    std::vector<Done> dones;
    WriteRun(*w, 0, 16, &dones);
    Drain(*w, &dones);
    for (const Done& d : dones) ASSERT_OK(d.status);
    // The control shows the scan would find the plaintext if it were there.
    EXPECT_EQ(Contains(ReadFile(path), kMarker), !encrypt);
    if (!encrypt) continue;

    Page out;
    ASSERT_OK(bs->ReadBlock(5, out));
    EXPECT_EQ(out, Pattern(5));
    EXPECT_EQ(bs->ReadBlock(20, out).code(), StatusCode::kCorruption);

    // Rewriting a block with the same plaintext gives another ciphertext.
    const int fd = open(path.c_str(), O_RDWR);
    ASSERT_GE(fd, 0);
    Page before, after;
    ASSERT_EQ(pread(fd, before.data(), kPageSize, 6 * kPageSize), 4096);
    WriteRun(*w, 6, 1, &dones);
    Drain(*w, &dones);
    ASSERT_EQ(pread(fd, after.data(), kPageSize, 6 * kPageSize), 4096);
    EXPECT_NE(before, after);
    ASSERT_OK(bs->ReadBlock(6, out));
    EXPECT_EQ(out, Pattern(6));

    // One flipped byte: the block no longer authenticates, and yields nothing.
    unsigned char c;
    ASSERT_EQ(pread(fd, &c, 1, 5 * kPageSize + 1234), 1);
    c ^= 0x01;
    ASSERT_EQ(pwrite(fd, &c, 1, 5 * kPageSize + 1234), 1);
    ASSERT_EQ(fsync(fd), 0);
    close(fd);
    out.fill(std::byte{0xAA});
    const Status s = bs->ReadBlock(5, out);
    EXPECT_EQ(s.code(), StatusCode::kCorruption) << s.ToString();
    EXPECT_EQ(out[0], std::byte{0xAA});
    ASSERT_OK(bs->ReadBlock(4, out));  // its neighbours are intact
  }
}

// A store over a file it is given (here in memory): the file's size is used
// whole, path() is the file's name, and blocks written, sealed or not, read
// back.
class GivenFileTest : public ::testing::TestWithParam<bool /*encrypt*/> {};

TEST_P(GivenFileTest, WritesAndReadsThroughTheGivenFile) {
  std::shared_ptr<BackingFile> file =
      NewMemBackingFile(64 * kPageSize + 100, "mem:test");
  auto bs = OpenStore({.encrypt = GetParam(), .file = file});
  ASSERT_NE(bs, nullptr);
  EXPECT_EQ(bs->path(), "mem:test");
  EXPECT_EQ(bs->num_blocks(), 64u);
  EXPECT_FALSE(bs->direct());
  auto w = MakeWriter(*bs, 4, 8);
  ASSERT_NE(w, nullptr);
  std::vector<Done> dones;
  WriteRun(*w, 0, 40, &dones);
  Drain(*w, &dones);
  ASSERT_EQ(dones.size(), 40u);
  for (const Done& d : dones) EXPECT_OK(d.status);
  Page out;
  for (std::uint64_t b = 0; b < 40; ++b) {
    ASSERT_OK(bs->ReadBlock(b, out));
    const Page want = Pattern(b);
    ASSERT_EQ(std::memcmp(out.data(), want.data(), kPageSize), 0) << b;
    // What the file holds is the plaintext exactly when not encrypted.
    Page raw;
    ASSERT_EQ(file->Read(b * kPageSize, raw), static_cast<long>(kPageSize));
    EXPECT_EQ(std::memcmp(raw.data(), want.data(), kPageSize) == 0,
              !GetParam())
        << b;
  }
  // A file that holds no whole block is refused.
  auto tiny = BackingStore::Open({.file = NewMemBackingFile(100)});
  ASSERT_FALSE(tiny.has_value());
  EXPECT_EQ(tiny.error().code(), StatusCode::kInvalidArgument);
}

using testing::DiscardingFile;

// A freed block leaves blocks_used() at once but is handed out again only
// once its discard is answered; runs of blocks go as one range.
TEST(BackingStoreTest, FreedBlocksAreDiscardedBeforeTheyAreReused) {
  auto file = std::make_shared<DiscardingFile>(4 * kPageSize);
  auto bs = OpenStore({.file = file});
  ASSERT_NE(bs, nullptr);
  std::size_t got = 0;
  ASSERT_EQ(bs->AllocRange(4, &got), 0u);
  ASSERT_EQ(got, 4u);
  bs->Free(3);
  bs->Free(0);
  bs->Free(1);
  EXPECT_EQ(bs->blocks_used(), 1u);
  EXPECT_EQ(bs->AllocRange(1, &got), BackingStore::kNoBlock);
  EXPECT_EQ(got, 0u);
  // Unanswered: the blocks stay out of reach, and are asked for again.
  file->answer = false;
  EXPECT_EQ(bs->DiscardFreed(), 0u);
  EXPECT_EQ(bs->blocks_used(), 1u);
  EXPECT_EQ(bs->AllocRange(1, &got), BackingStore::kNoBlock);
  using Call = std::pair<std::uint64_t, std::uint64_t>;
  EXPECT_EQ(file->calls, (std::vector<Call>{{0, 2 * kPageSize},
                                            {3 * kPageSize, kPageSize}}));
  file->calls.clear();
  file->answer = true;
  EXPECT_EQ(bs->DiscardFreed(), 3u);
  EXPECT_EQ(file->calls, (std::vector<Call>{{0, 2 * kPageSize},
                                            {3 * kPageSize, kPageSize}}));
  EXPECT_EQ(bs->blocks_used(), 1u);
  EXPECT_EQ(bs->AllocRange(2, &got), 0u);
  EXPECT_EQ(got, 2u);
  EXPECT_EQ(bs->DiscardFreed(), 0u);  // nothing left
  // A local file frees at once and is never asked.
  auto local = OpenStore({.file = NewMemBackingFile(2 * kPageSize)});
  ASSERT_NE(local, nullptr);
  ASSERT_EQ(local->AllocRange(2, &got), 0u);
  local->Free(0);
  EXPECT_EQ(local->AllocRange(1, &got), 0u);
  EXPECT_EQ(local->DiscardFreed(), 0u);
}

// Out of memory partway through a discard pass (its list of ranges, its
// answers, the file's Discard) loses no block: the ones it took are asked
// for again by the next pass, and handed out once answered.
TEST(BackingStoreTest, ADiscardPassOutOfMemoryLosesNoBlock) {
  constexpr std::size_t kBlocks = 64;
  for (long n = 1;; ++n) {
    SCOPED_TRACE("allocation " + std::to_string(n) + " fails");
    auto file = std::make_shared<DiscardingFile>(kBlocks * kPageSize);
    auto bs = OpenStore({.file = file});
    ASSERT_NE(bs, nullptr);
    std::size_t got = 0;
    ASSERT_EQ(bs->AllocRange(kBlocks, &got), 0u);
    ASSERT_EQ(got, kBlocks);
    for (std::size_t k = 0; k < kBlocks; ++k) bs->Free(k);
    testing::FailNthAllocation(n);
    bool threw = false;
    try {
      (void)bs->DiscardFreed();
    } catch (const std::bad_alloc&) {
      threw = true;
    }
    const bool failed = testing::AllocationFailed();
    testing::FailNthAllocation(0);
    EXPECT_EQ(threw, failed);
    (void)bs->DiscardFreed();
    EXPECT_EQ(bs->blocks_used(), 0u);
    EXPECT_EQ(bs->AllocRange(kBlocks, &got), 0u);
    EXPECT_EQ(got, kBlocks) << "blocks freed but never handed out again";
    if (!failed) break;
  }
}

// A file that answers only a Discard's first ranges (the NBD file starts
// none after about timeout_ms: nbd/nbd_backing_file.h) still answers every
// freed range within a few passes, however fast frees keep coming at the
// low blocks: each pass starts where the one before stopped. Here 8 freed
// blocks low and one high, 2 answered a pass, and each low block answered
// is handed out and freed again before the next pass.
TEST(BackingStoreTest, DiscardPassesGoRoundTheFreedRanges) {
  constexpr std::uint64_t kBlocks = 256, kHigh = 200;
  auto file = std::make_shared<DiscardingFile>(kBlocks * kPageSize);
  file->answer_first = 2;
  auto bs = OpenStore({.file = file});
  ASSERT_NE(bs, nullptr);
  std::size_t got = 0;
  ASSERT_EQ(bs->AllocRange(kBlocks, &got), 0u);
  ASSERT_EQ(got, kBlocks);
  for (std::uint64_t b = 0; b < 16; b += 2) bs->Free(b);  // apart: 8 ranges
  bs->Free(kHigh);
  int answered_at = 0;
  for (int pass = 1; pass <= 20 && answered_at == 0; ++pass) {
    EXPECT_EQ(bs->DiscardFreed(), 2u) << "pass " << pass;
    // What was answered is free again: hand it out, and free the low
    // blocks again at once (new frees, arriving as fast as they are
    // trimmed).
    for (std::uint64_t b;
         (b = bs->AllocRange(1, &got)) != BackingStore::kNoBlock;) {
      if (b == kHigh) {
        answered_at = pass;
      } else {
        bs->Free(b);
      }
    }
  }
  // 9 ranges, 2 a pass: the high one is answered by the fifth.
  EXPECT_NE(answered_at, 0) << "block " << kHigh << " never answered";
  EXPECT_LE(answered_at, 5);
}

// An NBD request's length is 32 bits: a run of freed blocks longer than
// 1 GiB goes as several discards, none longer.
TEST(BackingStoreTest, LongRunsOfFreedBlocksAreDiscardedAGibibyteAtATime) {
  constexpr std::uint64_t kGiB = std::uint64_t{1} << 30;
  auto file = std::make_shared<DiscardingFile>(2 * kGiB + 8 * kPageSize,
                                               /*storage=*/false);
  auto bs = OpenStore({.file = file});
  ASSERT_NE(bs, nullptr);
  const std::uint64_t blocks = bs->num_blocks();
  std::size_t got = 0;
  ASSERT_EQ(bs->AllocRange(blocks, &got), 0u);
  ASSERT_EQ(got, blocks);
  for (std::uint64_t b = 0; b < blocks; ++b) bs->Free(b);
  EXPECT_EQ(bs->blocks_used(), 0u);
  EXPECT_EQ(bs->DiscardFreed(), blocks);
  using Call = std::pair<std::uint64_t, std::uint64_t>;
  EXPECT_EQ(file->calls, (std::vector<Call>{{0, kGiB},
                                            {kGiB, kGiB},
                                            {2 * kGiB, 8 * kPageSize}}));
}

INSTANTIATE_TEST_SUITE_P(Sealing, GivenFileTest, ::testing::Bool(),
                         [](const auto& p) {
                           return p.param ? "Encrypted" : "Plain";
                         });

TEST(BackingStoreTest, ReadersRunAlongsideTheWriter) {
  TempDir dir;
  auto bs = OpenStore(
      {.path = dir.File("wb"), .size_bytes = 1 << 20, .encrypt = true});
  auto w = MakeWriter(*bs, 4, 8);
  std::vector<Done> dones;
  WriteRun(*w, 0, 64, &dones);
  Drain(*w, &dones);
  std::atomic<int> bad{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 4; ++t) {
    readers.emplace_back([&] {
      Page out;
      for (int round = 0; round < 4; ++round) {
        for (std::uint64_t b = 0; b < 64; ++b) {
          if (!bs->ReadBlock(b, out).ok() || out != Pattern(b)) ++bad;
        }
      }
    });
  }
  WriteRun(*w, 64, 192, &dones);  // sealing while the readers open
  Drain(*w, &dones);
  for (auto& r : readers) r.join();
  EXPECT_EQ(bad.load(), 0);
  for (const Done& d : dones) EXPECT_OK(d.status);
}

TEST(BackingStoreTest, WriterDestroyedWithIosInFlight) {
  TempDir dir;
  auto bs = OpenStore({.path = dir.File("wb"), .size_bytes = 4 << 20});
  auto w = MakeWriter(*bs, 8, 32);
  std::vector<Done> dones;
  WriteRun(*w, 0, 8 * 32, &dones);  // fills the writer; nothing reaped yet
  EXPECT_TRUE(dones.empty());
  EXPECT_EQ(w->in_flight(), 8u);
  EXPECT_FALSE(w->HasRoom());
  w.reset();  // waits for the kernel, reports nothing
  EXPECT_TRUE(dones.empty());
  Page out;
  ASSERT_OK(bs->ReadBlock(200, out));
  EXPECT_EQ(out, Pattern(200));
}

}  // namespace
}  // namespace ztier
