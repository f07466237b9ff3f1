// File: tools/ztier/bench_zram_compare_test.cc
//
// `ztier bench zram-compare`: the kernel zram control (KernelZram) on a fake
// sysfs folder; the IO drivers on a real file (io_uring and pread/pwrite,
// O_DIRECT) and a real Device; and the built binary (ZTIER_BIN) with tiny
// settings, once with a kernel device that does not exist (it must say so
// and measure ztier alone) and once on the real /dev/zram0 when it is free,
// this runs as root and fio and nbdcopy are on PATH (it must be reset
// afterwards).
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "bench_proc.h"
#include "bench_zram_compare_io.h"
#include "bench_zram_compare_kernel.h"
#include "corpus/corpus.h"
#include "testing/test_util.h"
#include "ztier/device.h"

namespace ztier::tool {
namespace {

namespace fs = std::filesystem;
using ztier::testing::ScopedTempDir;

std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteText(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

// A device node stand-in and a sysfs folder with zram's files.
class FakeZram {
 public:
  explicit FakeZram(const std::string& disksize = "0\n") {
    fs::create_directory(sys());
    WriteText(dev(), "");
    WriteText(sys() + "/disksize", disksize);
    WriteText(sys() + "/comp_algorithm", "lzo-rle lzo [lz4] \n");
    WriteText(sys() + "/mm_stat",
              "16777216  6005333  6909952        0  6909952       37        "
              "0       91       91\n");
    WriteText(sys() + "/reset", "");
    WriteText(sys() + "/algorithm_params", "");
  }
  std::string dev() const { return dir_.File("zram7"); }
  std::string sys() const { return dir_.File("sys"); }

 private:
  ScopedTempDir dir_;
};

TEST(KernelZramTest, ParsesMmStat) {
  auto m = ParseMmStat("16777216  6005333  6909952        0  6909952       "
                       "37        0       91       91\n");
  ASSERT_TRUE(m.has_value()) << m.error().ToString();
  EXPECT_EQ(m->orig_data_size, 16777216u);
  EXPECT_EQ(m->compr_data_size, 6005333u);
  EXPECT_EQ(m->mem_used_total, 6909952u);
  EXPECT_EQ(m->same_pages, 37u);
  EXPECT_EQ(m->huge_pages, 91u);
  EXPECT_FALSE(ParseMmStat("1 2 3\n").has_value());
  EXPECT_FALSE(ParseMmStat("").has_value());
}

TEST(KernelZramTest, InitWritesSysfsAndResetsWhenDestroyed) {
  FakeZram fake;
  {
    auto zram = KernelZram::Open(fake.dev(), fake.sys());
    ASSERT_TRUE(zram.has_value()) << zram.error().ToString();
    EXPECT_EQ(zram->algorithms(),
              (std::vector<std::string>{"lzo-rle", "lzo", "lz4"}));
    EXPECT_EQ(zram->Init("zstd", 1 << 20).code(), StatusCode::kUnsupported);
    EXPECT_EQ(ReadText(fake.sys() + "/reset"), "");  // nothing touched
    ASSERT_OK(zram->Init("lzo-rle", 1 << 20));
    EXPECT_EQ(ReadText(fake.sys() + "/reset"), "1");
    EXPECT_TRUE(ReadText(fake.sys() + "/comp_algorithm").starts_with("lzo-rle"));
    EXPECT_TRUE(ReadText(fake.sys() + "/disksize").starts_with("1048576"));
    EXPECT_EQ(ReadText(fake.sys() + "/algorithm_params"), "");  // none given
    auto mm = zram->ReadMmStat();
    ASSERT_TRUE(mm.has_value()) << mm.error().ToString();
    EXPECT_EQ(mm->mem_used_total, 6909952u);
    WriteText(fake.sys() + "/reset", "");
  }
  // Destroyed while initialised: reset.
  EXPECT_EQ(ReadText(fake.sys() + "/reset"), "1");
  WriteText(fake.sys() + "/disksize", "0\n");  // what the reset did
  {
    auto zram = KernelZram::Open(fake.dev(), fake.sys());
    ASSERT_TRUE(zram.has_value());
    ASSERT_OK(zram->Init("lz4", 1 << 20, "level=2"));
    EXPECT_EQ(ReadText(fake.sys() + "/algorithm_params"), "algo=lz4 level=2");
    ASSERT_OK(zram->Reset());
    WriteText(fake.sys() + "/reset", "");
  }
  // Reset already: not reset again.
  EXPECT_EQ(ReadText(fake.sys() + "/reset"), "");
}

TEST(KernelZramTest, MissingOrBusyDevicesAreRefusedUntouched) {
  FakeZram busy("4096\n");
  auto z = KernelZram::Open(busy.dev(), busy.sys());
  ASSERT_FALSE(z.has_value());
  EXPECT_EQ(z.error().code(), StatusCode::kBusy) << z.error().ToString();
  EXPECT_NE(z.error().message().find("initialised"), std::string::npos);
  EXPECT_EQ(ReadText(busy.sys() + "/reset"), "");

  FakeZram fake;
  auto missing = KernelZram::Open(fake.dev() + "-missing", fake.sys());
  ASSERT_FALSE(missing.has_value());
  EXPECT_EQ(missing.error().code(), StatusCode::kNotFound);
  fs::remove(fake.sys() + "/mm_stat");
  auto no_mm_stat = KernelZram::Open(fake.dev(), fake.sys());
  ASSERT_FALSE(no_mm_stat.has_value());
  EXPECT_EQ(no_mm_stat.error().code(), StatusCode::kNotFound);
  EXPECT_NE(no_mm_stat.error().message().find("not a zram device"),
            std::string::npos);
}

// The corpus pages the drivers write: the first 64 pages of one corpus.
class DriverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto files = corpus::FindCorpusFiles(ztier::testing::CorpusDir());
    ASSERT_TRUE(files.has_value() && !files->empty());
    auto set = corpus::LoadPageSet(files->front());
    ASSERT_TRUE(set.has_value()) << set.error().ToString();
    set_ = std::move(*set);
    const corpus::PageSet* one[] = {&set_};
    auto data = DataPages::From(one, 64);
    ASSERT_TRUE(data.has_value()) << data.error().ToString();
    data_.emplace(std::move(*data));
  }

  corpus::PageSet set_;
  std::optional<DataPages> data_;
};

constexpr std::uint64_t kArea = 2 << 20;  // 512 pages: the data 8 times

TEST_F(DriverTest, DataPagesTileTheArea) {
  EXPECT_EQ(data_->count(), 64u);
  EXPECT_EQ(std::memcmp(data_->ForAreaPage(70), set_.page(6).data(), 4096), 0);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(data_->ForAreaPage(1)) % 4096, 0u);
  const corpus::PageSet* one[] = {&set_};
  EXPECT_FALSE(DataPages::From(one, 31).has_value());
}

TEST_F(DriverTest, LibraryDriverFillsWritesAndReadsADevice) {
  Device device("zram0", DeviceDefaults{.comp_algorithm = "lz4"});
  ASSERT_OK(device.SetDisksize(kArea));
  const IoTarget read{.device = &device};
  auto fill = RunIo(read, {.random = false, .writes = true,
                                    .block_bytes = 128 << 10, .depth = 8,
                                    .threads = 2, .area_bytes = kArea,
                                    .seconds = 0},
                           *data_);
  ASSERT_TRUE(fill.has_value()) << fill.error().ToString();
  EXPECT_EQ(fill->ops, 16u);  // one pass: 2 MiB in 128 KiB blocks
  EXPECT_EQ(fill->bytes, kArea);
  ASSERT_OK(VerifyArea(read, kArea, *data_, 1));
  EXPECT_EQ(device.Stats().orig_data_size, kArea);

  auto writes = RunIo(read, {.random = true, .writes = true,
                                      .block_bytes = 4096, .depth = 32,
                                      .threads = 2, .area_bytes = kArea,
                                      .seconds = 0.1},
                             *data_);
  ASSERT_TRUE(writes.has_value()) << writes.error().ToString();
  EXPECT_GE(writes->ops, 2u);  // at least one IO on each thread
  EXPECT_GT(writes->iops(), 0);
  ASSERT_OK(VerifyArea(read, kArea, *data_, 1));  // what the fill wrote
  auto reads = RunIo(read, {.random = true, .block_bytes = 4096,
                                     .threads = 1, .area_bytes = kArea,
                                     .seconds = 0.1},
                            *data_);
  ASSERT_TRUE(reads.has_value()) << reads.error().ToString();
  EXPECT_GE(reads->ops, 1u);
  EXPECT_GE(device.Stats().loads, reads->ops);
}

TEST_F(DriverTest, KernelDriverDoesTheSameOnAFileThroughIoUring) {
  ScopedTempDir dir;
  const std::string file = dir.File("area");
  {
    const int fd = ::open(file.c_str(), O_CREAT | O_RDWR, 0600);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::ftruncate(fd, kArea), 0);
    ::close(fd);
  }
  if (const int fd = ::open(file.c_str(), O_RDONLY | O_DIRECT); fd < 0) {
    GTEST_SKIP() << "no O_DIRECT on the temporary folder's file system";
  } else {
    ::close(fd);
  }
  const IoTarget read{.path = file};
  auto fill = RunIo(read, {.random = false, .writes = true,
                                 .block_bytes = 128 << 10, .depth = 8,
                                 .threads = 2, .area_bytes = kArea,
                                 .seconds = 0},
                          *data_);
  ASSERT_TRUE(fill.has_value()) << fill.error().ToString();
  EXPECT_EQ(fill->ops, 16u);
  ASSERT_OK(VerifyArea(read, kArea, *data_, 1));
  auto writes = RunIo(read, {.random = true, .writes = true,
                                   .block_bytes = 4096, .depth = 32,
                                   .threads = 2, .area_bytes = kArea,
                                   .seconds = 0.1},
                            *data_);
  ASSERT_TRUE(writes.has_value()) << writes.error().ToString();
  EXPECT_GE(writes->ops, 64u);  // each thread's first `depth` IOs
  ASSERT_OK(VerifyArea(read, kArea, *data_, 1));
  // The same with pread/pwrite.
  auto sync_writes = RunIo(read, {.random = true, .writes = true,
                                        .block_bytes = 4096, .threads = 2,
                                        .area_bytes = kArea, .seconds = 0.1,
                                        .sync = true},
                                 *data_);
  ASSERT_TRUE(sync_writes.has_value()) << sync_writes.error().ToString();
  EXPECT_GE(sync_writes->ops, 2u);
  auto sync_reads = RunIo(read, {.random = false, .block_bytes = 4096,
                                       .threads = 1, .area_bytes = kArea,
                                       .seconds = 0, .sync = true},
                                *data_);
  ASSERT_TRUE(sync_reads.has_value()) << sync_reads.error().ToString();
  EXPECT_EQ(sync_reads->ops, kArea / 4096);
  ASSERT_OK(VerifyArea(read, kArea, *data_, 1));
  // A read past the end of the file is short: an error, not a figure.
  auto past = RunIo(read, {.random = false, .block_bytes = 4096,
                                 .threads = 1, .area_bytes = 2 * kArea,
                                 .seconds = 0},
                          *data_);
  EXPECT_FALSE(past.has_value());
}

class ZramCompareCliTest : public ::testing::Test {
 protected:
  int Run(const std::string& args) {
    const std::string cmd = "cd '" + dir_.path() + "' && '" ZTIER_BIN
                            "' bench zram-compare --corpus-dir '" +
                            ztier::testing::CorpusDir() + "' " + args +
                            " >out.txt 2>err.txt";
    const int status = std::system(cmd.c_str());
    out_ = ReadText(dir_.File("out.txt"));
    err_ = ReadText(dir_.File("err.txt"));
    json_ = ReadText(dir_.File("out.json"));
    return status != -1 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  void ExpectIn(const std::string& text, const std::vector<std::string>& want) {
    for (const std::string& w : want) {
      EXPECT_NE(text.find(w), std::string::npos) << w << " in\n" << text;
    }
  }

  ScopedTempDir dir_;
  std::string out_, err_, json_;
};

TEST_F(ZramCompareCliTest, MissingKernelDeviceIsSkippedWithAMessage) {
  ASSERT_EQ(Run("--zram-dev /nonexistent/zram9 --runs 1 --seconds 1 "
                "--size 4M --corpus-pages 64 --jobs randread-4k-qd32 "
                "--threads 1 --paths ztier-lib,kernel-io_uring --codec lz4 "
                "--json out.json"),
            0)
      << out_ << err_;
  ExpectIn(err_, {"/nonexistent/zram9 missing", "does not exist",
                  "the kernel side is skipped"});
  ExpectIn(out_, {"machine: ", "kernel device: /nonexistent/zram9: missing",
                  "== (a) mm_stat", "anon-python.pages", "lz4/lz4",
                  "== (b) library path", "randread 4k QD32 x1",
                  "kernel-io_uring (skipped)"});
  ExpectIn(json_, {"\"benchmark\": \"ztier bench zram-compare\"",
                   "\"machine\"", "\"conditions\"",
                   "\"kernel_device\": \"/nonexistent/zram9: missing\"",
                   "kernel-io_uring (skipped)", "\"mm_stat\": [",
                   "\"library_psync\": [", "\"compr_z_median\"",
                   "\"mem_used_z_median\"", "\"z_pool_meta_kib_median\"",
                   "\"ztier_median\"", "\"ztier_cv\"",
                   "\"compr_k_median\": null", "\"kernel_median\": null"});
  // The kernel side is empty, ztier's is not.
  EXPECT_EQ(json_.find("\"ztier_median\": null"), std::string::npos) << json_;
  EXPECT_EQ(json_.find("\"compr_z_median\": null"), std::string::npos);
  EXPECT_EQ(json_.find("\"library_io_uring\""), std::string::npos);
  EXPECT_EQ(json_.find("nan"), std::string::npos) << json_;
}

TEST_F(ZramCompareCliTest, BadUsageIsExitStatus2) {
  EXPECT_EQ(Run("--jobs no-such-job"), 2);
  ExpectIn(err_, {"unknown job 'no-such-job'"});
  EXPECT_EQ(Run("--codec zstd"), 2);
  ExpectIn(err_, {"unknown kernel codec 'zstd'"});
  EXPECT_EQ(Run("--paths nowhere"), 2);
}

// The real kernel device, when it is free and usable here.
TEST_F(ZramCompareCliTest, RealKernelDeviceIsComparedAndResetAfter) {
  const std::string disksize = "/sys/block/zram0/disksize";
  if (::geteuid() != 0 || !fs::exists("/dev/zram0") || !fs::exists(disksize)) {
    GTEST_SKIP() << "needs root and /dev/zram0";
  }
  if (std::strtoull(ReadText(disksize).c_str(), nullptr, 10) != 0) {
    GTEST_SKIP() << "/dev/zram0 is in use";
  }
  if (bench::FindExecutable("fio").empty() ||
      bench::FindExecutable("nbdcopy").empty()) {
    GTEST_SKIP() << "fio or nbdcopy is not on PATH";
  }
  ASSERT_EQ(Run("--runs 1 --seconds 1 --size 8M --corpus-pages 64 "
                "--jobs randread-4k-qd32 --threads 1 --codec lz4 "
                "--json out.json"),
            0)
      << out_ << err_;
  ExpectIn(out_, {"kernel device: /dev/zram0: used",
                  "kernel comp_algorithm offers:", "== (a) mm_stat",
                  "== (b) library path", "synchronous calls on both sides",
                  "== (b) NBD path",
                  "io_uring driver / fio"});
  ExpectIn(json_, {"\"kernel_device\": \"/dev/zram0: used\"",
                   "\"library_io_uring\": [", "\"library_psync\": [",
                   "\"nbd\": [", "\"driver_check\": [",
                   "\"ztier_kernel_median\"", "\"mem_used_z_k_median\"",
                   "\"io_uring_driver_fio_median\""});
  // Every figure of both sides was measured.
  EXPECT_EQ(json_.find("null"), std::string::npos) << json_;
  EXPECT_EQ(json_.find("nan"), std::string::npos) << json_;
  EXPECT_EQ(std::strtoull(ReadText(disksize).c_str(), nullptr, 10), 0u)
      << "/dev/zram0 was not reset";
}

}  // namespace
}  // namespace ztier::tool
