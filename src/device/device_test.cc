// device_test.cc: zram's lifecycle, attribute semantics and byte-level IO.
#include "ztier/device.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <new>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "testing/discarding_file.h"
#include "testing/failing_new.h"
#include "testing/faulty_file.h"
#include "testing/test_util.h"

namespace ztier {
namespace {

std::vector<std::byte> Bytes(std::size_t n, std::uint32_t seed) {
  std::vector<std::byte> v(n);
  std::mt19937 rng(seed);
  for (auto& b : v) b = static_cast<std::byte>("ztier"[rng() % 5] + rng() % 3);
  return v;
}

TEST(DeviceTest, DisksizeThatWrapsOrExceedsMemoryIsRefused) {
  Device d("zram0", {});
  const Status wrap = d.SetDisksize(UINT64_MAX);
  EXPECT_EQ(wrap.code(), StatusCode::kInvalidArgument) << wrap.ToString();
  // 2^62 bytes is 2^50 pages: a 16 PiB slot table, more than any machine.
  const Status huge = d.SetDisksize(1ull << 62);
  EXPECT_EQ(huge.code(), StatusCode::kResourceExhausted) << huge.ToString();
  EXPECT_FALSE(d.initialized());
  EXPECT_OK(d.SetDisksize(12345));
  EXPECT_EQ(d.disksize(), 16384u);  // page-aligned up, as zram
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
  EXPECT_EQ(*ParseSize("2P"), 2ull << 50);
  EXPECT_EQ(*ParseSize("1e"), 1ull << 60);
  EXPECT_FALSE(ParseSize("16E").has_value());  // past 2^64
  // zramctl's forms (util-linux strtosize).
  EXPECT_EQ(*ParseSize("4KiB"), 4096u);
  EXPECT_EQ(*ParseSize("2mib"), 2u << 20);
  EXPECT_EQ(*ParseSize("1.5G"), 3ull << 29);
  EXPECT_EQ(*ParseSize("0.5k"), 512u);
  EXPECT_EQ(*ParseSize("1KB"), 1000u);
  EXPECT_EQ(*ParseSize("1.5MB"), 1500000u);
  EXPECT_EQ(*ParseSize("15.9999E"), 18446628781559090931ull);
  EXPECT_FALSE(ParseSize("1.5").has_value());  // not whole bytes
  EXPECT_EQ(*ParseSize("1.0"), 1u);
  for (const char* bad : {"1.G", ".5G", "1KiBB", "1Ki", "1iB", "1 G", "G",
                          "1.5.5G", "16.0E", "18446744073709551616"}) {
    EXPECT_FALSE(ParseSize(bad).has_value()) << bad;
  }
  EXPECT_EQ(ParseSize("nonsense").error().message().find("not a size: "), 0u);
  // memparse's bases: hex as there; a leading zero (octal there) refused.
  EXPECT_EQ(*ParseSize("0x40000000"), 1ull << 30);
  EXPECT_EQ(*ParseSize("0X10m"), 16u << 20);
  EXPECT_EQ(*ParseSize("0"), 0u);
  EXPECT_EQ(*ParseSize("0.5K"), 512u);
  for (const char* bad : {"010M", "00", "0x", "0x1.5G", "0xZ"}) {
    EXPECT_FALSE(ParseSize(bad).has_value()) << bad;
  }
  EXPECT_NE(ParseSize("010M").error().message().find("octal"),
            std::string::npos);
}

// ReadMayWait holds for a written-back page with any backing store;
// ReadMayStall only with a remote one.
TEST(DeviceTest, ReadMayStallOnlyWithARemoteBackingStore) {
  testing::ScopedTempDir tmp;
  DeviceDefaults d;
  d.is_remote_backing = [](std::string_view v) {
    return v.starts_with("mem:");
  };
  d.open_remote_backing =
      [](const std::string&,
         std::uint64_t) -> Result<std::shared_ptr<BackingFile>> {
    return std::make_shared<testing::DiscardingFile>(std::uint64_t{1} << 20);
  };
  for (const std::string& backing : {tmp.File("wb"), std::string("mem:wb")}) {
    SCOPED_TRACE(backing);
    const bool remote = backing.starts_with("mem:");
    Device dev("zram0", d);
    EXPECT_FALSE(dev.ReadMayStall(0, 4096));  // uninitialised
    ASSERT_OK(dev.SetBackingDev(backing));
    ASSERT_OK(dev.SetDisksize(8 * 4096));
    std::vector<std::byte> data(8 * 4096);
    std::mt19937_64 rng(5);
    for (auto& b : data) b = static_cast<std::byte>(rng());
    ASSERT_OK(dev.Write(0, data));
    EXPECT_FALSE(dev.ReadMayStall(0, 8 * 4096));
    WritebackResult r;
    ASSERT_OK(dev.Writeback("page_index=1", &r));
    ASSERT_EQ(r.written, 1u);
    EXPECT_TRUE(dev.ReadMayWait(4096, 4096));
    EXPECT_EQ(dev.ReadMayStall(4096, 4096), remote);
    EXPECT_EQ(dev.ReadMayStall(4000, 200), remote);  // ends in page 1
    EXPECT_FALSE(dev.ReadMayStall(2 * 4096, 6 * 4096));
    ASSERT_OK(dev.Reset());
    EXPECT_FALSE(dev.ReadMayStall(4096, 4096));
  }
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
  // The kernel's default name is taken, as what it maps to.
  ASSERT_OK(d.SetCompAlgorithm("lzo-rle\n"));
  EXPECT_EQ(d.ShowCompAlgorithm(), "[lzo] lz4 lz4hc zstd deflate\n");
  ASSERT_OK(d.SetCompAlgorithm("lz4"));
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

TEST(DeviceTest, PageStatesTellEmptyZeroAndData) {
  Device d("zram0", DeviceDefaults{});
  std::vector<SlotState> st(8);
  EXPECT_EQ(d.PageStates(0, st).code(), StatusCode::kFailedPrecondition);
  ASSERT_OK(d.SetDisksize(8 * kPageSize));
  ASSERT_OK(d.PageStates(0, st));
  for (SlotState s : st) EXPECT_EQ(s, SlotState::kEmpty);
  ASSERT_OK(d.Write(1 * kPageSize, Bytes(kPageSize, 7)));      // data
  ASSERT_OK(d.WriteZeroes(2 * kPageSize, kPageSize, true));    // SAME 0
  std::vector<std::byte> fill(kPageSize, std::byte{0x5a});
  ASSERT_OK(d.Write(3 * kPageSize, fill));                     // SAME 0x5a..
  ASSERT_OK(d.Write(4 * kPageSize, std::vector<std::byte>(kPageSize)));
  ASSERT_OK(d.Write(5 * kPageSize, Bytes(2 * kPageSize, 8)));
  ASSERT_OK(d.Trim(6 * kPageSize, kPageSize));                 // back to empty
  ASSERT_OK(d.Write(7 * kPageSize + 100, Bytes(10, 9)));       // partial page
  ASSERT_OK(d.PageStates(0, st));
  const std::vector<SlotState> want = {
      SlotState::kEmpty, SlotState::kData, SlotState::kZero, SlotState::kData,
      SlotState::kZero,  SlotState::kData, SlotState::kEmpty, SlotState::kData};
  EXPECT_EQ(st, want);
  std::vector<SlotState> one(1);
  ASSERT_OK(d.PageStates(7, one));
  EXPECT_EQ(one[0], SlotState::kData);
  EXPECT_EQ(d.PageStates(7, std::span<SlotState>(st.data(), 2)).code(),
            StatusCode::kOutOfRange);
  EXPECT_EQ(d.PageStates(9, std::span<SlotState>()).code(),
            StatusCode::kOutOfRange);
}

// idle takes an age as zram's idle_store() does, kstrtoull(buf, 0): hex
// and octal too. A page written 100 s ago is idle for ages below 100.
TEST(DeviceTest, IdleAgesParseAsTheKernelParsesThem) {
  testing::ScopedTempDir dir;
  std::atomic<std::uint32_t> now{1000};
  DeviceDefaults defaults;
  defaults.clock = [&now] { return now.load(); };
  Device d("zram0", defaults);
  ASSERT_OK(d.SetBackingDev(dir.File("wb")));
  ASSERT_OK(d.SetDisksize(16 * kPageSize));
  std::vector<std::byte> page(kPageSize);
  for (std::size_t k = 0; k < kPageSize; ++k) {
    page[k] = static_cast<std::byte>(k * 31 % 251);
  }
  // Whether `age` marks the page idle: a writeback of idle pages takes it.
  const auto idle_at = [&](std::string_view age) {
    EXPECT_OK(d.Write(0, page));  // written (accessed) at 1000
    now = 1100;
    const Status marked = d.MarkIdle(age);
    WritebackResult r;
    if (marked.ok()) EXPECT_OK(d.Writeback("idle", &r));
    now = 1000;
    return marked.ok() ? Result<bool>(r.written == 1) : Err(marked);
  };
  EXPECT_EQ(idle_at("60"), Result<bool>(true));
  EXPECT_EQ(idle_at("0x3c"), Result<bool>(true));    // 60
  EXPECT_EQ(idle_at("+99"), Result<bool>(true));
  EXPECT_EQ(idle_at("0200"), Result<bool>(false));   // octal: 128
  EXPECT_EQ(idle_at("0144\n"), Result<bool>(false));  // 100, not older
  EXPECT_EQ(idle_at("99999999999"), Result<bool>(false));
  // idle_store()'s cutoff is boottime minus the age in nanoseconds, and a
  // slot is idle when accessed before it: age 0 marks every slot, as
  // "all", even one written in the same (whole) second.
  {
    EXPECT_OK(d.Write(0, page));  // at 1000
    ASSERT_OK(d.MarkIdle("0"));   // still 1000
    WritebackResult r;
    EXPECT_OK(d.Writeback("idle", &r));
    EXPECT_EQ(r.written, 1u);
  }
  for (const char* bad : {"60s", "0x", "-5", "089", ""}) {
    const auto r = idle_at(bad);
    ASSERT_FALSE(r.has_value()) << bad;
    EXPECT_EQ(r.error().code(), StatusCode::kInvalidArgument) << bad;
  }
}

// mem_used_max_store() parses with kstrtoul(buf, 10, &val) and takes any
// spelling of zero it accepts: a leading '+' and leading zeros included.
TEST(DeviceTest, MemUsedMaxTakesEveryZeroKstrtoulTakes) {
  Device d("zram0", DeviceDefaults{});
  ASSERT_OK(d.SetDisksize(1 << 20));
  for (const char* zero : {"0", "0\n", "+0", "00", "000\n"}) {
    const Status s = d.ResetMemUsedMax(zero);
    EXPECT_TRUE(s.ok()) << zero << ": " << s.ToString();
  }
  for (const char* bad : {"1", "", "-0", "0x0", "0 0", "+", "01x"}) {
    EXPECT_EQ(d.ResetMemUsedMax(bad).code(), StatusCode::kInvalidArgument)
        << bad;
  }
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
  EXPECT_EQ(d.ShowDebugStat(), "version: 1\n       0        0\n");
}

// ---- backing_dev and writeback ----

TEST(DeviceBackingTest, BackingDevIsSetBeforeDisksizeAndClearedByReset) {
  testing::ScopedTempDir dir;
  Device d("zram0", DeviceDefaults{});
  EXPECT_EQ(d.ShowBackingDev(), "none\n");
  EXPECT_EQ(d.SetBackingDev(dir.File("no-dir/wb")).code(),
            StatusCode::kNotFound);
  EXPECT_EQ(d.SetBackingDev(dir.path()).code(),
            StatusCode::kInvalidArgument);  // a directory
  EXPECT_EQ(d.SetBackingDev("/dev/null").code(),
            StatusCode::kInvalidArgument);  // a character device
  EXPECT_EQ(d.ShowBackingDev(), "none\n");
  const std::string path = dir.File("zram0.wb");
  ASSERT_OK(d.SetBackingDev(path + "\n"));  // as `echo PATH >` writes it
  EXPECT_EQ(d.ShowBackingDev(), path + "\n");
  ASSERT_OK(d.SetBackingDev("none"));
  EXPECT_EQ(d.ShowBackingDev(), "none\n");
  ASSERT_OK(d.SetBackingDev(path));
  ASSERT_OK(d.SetBackingDev(""));
  EXPECT_EQ(d.ShowBackingDev(), "none\n");
  ASSERT_OK(d.SetBackingDev(path));

  ASSERT_OK(d.SetDisksize(64 * kPageSize));
  EXPECT_TRUE(std::filesystem::exists(path));  // created at disksize
  EXPECT_EQ(d.SetBackingDev(dir.File("other")).code(), StatusCode::kBusy);
  EXPECT_EQ(d.SetBackingDev("none").code(), StatusCode::kBusy);
  EXPECT_EQ(d.ShowBackingDev(), path + "\n");
  ASSERT_OK(d.Reset());
  EXPECT_EQ(d.ShowBackingDev(), "none\n");  // as the kernel's reset_bdev
  // An existing file is accepted too.
  ASSERT_OK(d.SetBackingDev(path));
}

// A backing file disksize made is the device's once its store is
// installed: a reset or a removal closes it and leaves it, as a file that
// was there before (docs/control_protocol.md, backing_dev).
TEST(DeviceBackingTest, AResetOrRemovalKeepsTheBackingFileDisksizeMade) {
  testing::ScopedTempDir dir;
  const std::string path = dir.File("wb");
  DeviceRegistry r(DeviceDefaults{});
  std::shared_ptr<Device> d = *r.Add("zram0");
  ASSERT_OK(d->SetBackingDev(path));
  ASSERT_OK(d->SetDisksize(16 * kPageSize));
  ASSERT_OK(d->Reset());
  EXPECT_TRUE(std::filesystem::exists(path)) << "removed by the reset";
  std::filesystem::remove(path);
  ASSERT_OK(d->SetBackingDev(path));
  ASSERT_OK(d->SetDisksize(16 * kPageSize));
  ASSERT_OK(r.Remove("zram0"));
  EXPECT_TRUE(std::filesystem::exists(path)) << "removed with the device";
}

// Two devices writing back to one file would overwrite each other's
// blocks: the kernel's zram claims its backing_dev (BLK_OPEN_EXCL); here
// the second device's disksize is EBUSY until the first lets go.
TEST(DeviceBackingTest, ABackingFileServesOneDeviceAtATime) {
  testing::ScopedTempDir dir;
  const std::string path = dir.File("shared.wb");
  Device a("zram0", DeviceDefaults{});
  Device b("zram1", DeviceDefaults{});
  ASSERT_OK(a.SetBackingDev(path));
  ASSERT_OK(b.SetBackingDev(path));
  ASSERT_OK(a.SetDisksize(16 * kPageSize));
  const Status s = b.SetDisksize(16 * kPageSize);
  EXPECT_EQ(s.code(), StatusCode::kBusy) << s.ToString();
  EXPECT_NE(s.message().find(path), std::string::npos) << s.ToString();
  EXPECT_FALSE(b.initialized());
  EXPECT_TRUE(std::filesystem::exists(path));  // a's file, left alone
  ASSERT_OK(a.Reset());
  ASSERT_OK(b.SetBackingDev(path));
  ASSERT_OK(b.SetDisksize(16 * kPageSize));
}

TEST(DeviceBackingTest, OpenFailureLeavesTheDeviceUninitialised) {
  testing::ScopedTempDir dir;
  const std::string sub = dir.File("sub");
  ASSERT_TRUE(std::filesystem::create_directory(sub));
  Device d("zram0", DeviceDefaults{});
  ASSERT_OK(d.SetBackingDev(sub + "/wb"));
  std::filesystem::remove(sub);  // gone before disksize
  const Status s = d.SetDisksize(16 * kPageSize);
  EXPECT_EQ(s.code(), StatusCode::kNotFound) << s.ToString();
  EXPECT_FALSE(d.initialized());
  EXPECT_EQ(d.disksize(), 0u);
  ASSERT_OK(d.SetBackingDev("none"));
  ASSERT_OK(d.SetDisksize(16 * kPageSize));
}

// procfs, sysfs and their kind hold no data: their files are the kernel's
// controls, and a writeback into one (as root, who may open them
// read-write) would write pages into them. Refused at the store, as a
// character device is, and so is a file to be made in such a folder.
// (Others than root are refused the read-write open, or the folder.)
TEST(DeviceBackingTest, AFileOfTheKernelsOwnFileSystemsIsRefused) {
  if (geteuid() != 0) GTEST_SKIP() << "procfs is writable by root only";
  Device d("zram0", DeviceDefaults{});
  for (const char* path : {"/proc/version", "/proc/ztier.wb"}) {
    const Status s = d.SetBackingDev(path);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
    EXPECT_NE(s.message().find(path), std::string::npos) << s.ToString();
    EXPECT_NE(s.message().find("is on proc, a file system of the kernel's"),
              std::string::npos)
        << s.ToString();
  }
  EXPECT_EQ(d.ShowBackingDev(), "none\n");
}

// Sets `d` up to write back to `backing` with an lz4 dictionary (written
// to `dict`) that is gone by disksize, so that the store fails after its
// backing file is opened, and stores disksize: its status in *out.
void DisksizeWithItsDictionaryGone(Device& d, const std::string& dict,
                                   const std::string& backing, Status* out) {
  std::ofstream(dict) << std::string(4096, 'z');
  ASSERT_OK(d.SetCompAlgorithm("lz4"));
  ASSERT_OK(d.SetAlgorithmParams("dict=" + dict));
  ASSERT_OK(d.SetBackingDev(backing));
  std::filesystem::remove(dict);
  *out = d.SetDisksize(16 * kPageSize);
}

// A backing file that SetDisksize made goes again when the store cannot
// be made after it (here its dictionary gone since algorithm_params took
// it), as one BackingStore::Open fails on itself does; a file that was
// there before is left.
TEST(DeviceBackingTest, AFailedStoreTakesItsNewBackingFileAway) {
  testing::ScopedTempDir dir;
  const std::string dict = dir.File("lz4.dict");
  const std::string made = dir.File("made.wb");
  const std::string kept = dir.File("kept.wb");
  std::ofstream(kept) << "x";
  for (const std::string& path : {made, kept}) {
    Device d("zram0", DeviceDefaults{});
    Status s;
    ASSERT_NO_FATAL_FAILURE(DisksizeWithItsDictionaryGone(d, dict, path, &s));
    EXPECT_EQ(s.code(), StatusCode::kNotFound) << s.ToString();
    EXPECT_NE(s.message().find(dict), std::string::npos) << s.ToString();
    EXPECT_FALSE(d.initialized());
    EXPECT_EQ(std::filesystem::exists(path), path == kept)
        << path << (path == kept ? " removed" : " left behind");
  }
}

// What a store that cannot be made failed on names its errno to
// SetDisksize's caller (ErrnoNameOf, which `ztier serve` prints): a
// recompression dictionary gone by disksize is ENOENT, not kNotFound's
// ENODEV; params that cannot be set up, kInvalidArgument (the control
// server's EINVAL, as zram's disksize_store()).
TEST(DeviceBackingTest, ARecompressionDictionaryGoneByDisksizeIsEnoent) {
  testing::ScopedTempDir dir;
  const std::string dict = dir.File("zstd.dict");
  std::ofstream(dict) << std::string(4096, 'z');
  Device d("zram0", DeviceDefaults{});
  ASSERT_OK(d.SetRecompAlgorithm("algo=zstd priority=1"));
  ASSERT_OK(d.SetAlgorithmParams("priority=1 dict=" + dict));
  std::filesystem::remove(dict);
  const Status s = d.SetDisksize(16 * kPageSize);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_EQ(ErrnoNameOf(s), "ENOENT") << s.ToString();
  EXPECT_EQ(s.message().rfind("algorithm_params of priority 1 (zstd): ", 0), 0u)
      << s.ToString();
}

// As the errno of a remote backing store that cannot be opened.
TEST(DeviceBackingTest, ARemoteBackingStoreOpenKeepsItsErrno) {
  DeviceDefaults defaults;
  defaults.is_remote_backing = [](std::string_view v) {
    return v.starts_with("mem:");
  };
  defaults.open_remote_backing =
      [](const std::string&,
         std::uint64_t) -> Result<std::shared_ptr<BackingFile>> {
    return Err(PosixError("connect mem:wb", ECONNREFUSED));
  };
  Device d("zram0", defaults);
  ASSERT_OK(d.SetBackingDev("mem:wb"));
  const Status s = d.SetDisksize(16 * kPageSize);
  EXPECT_EQ(s.code(), StatusCode::kIoError) << s.ToString();
  EXPECT_EQ(ErrnoNameOf(s), "ECONNREFUSED") << s.ToString();
  EXPECT_EQ(s.message().rfind("backing_dev: connect mem:wb: ", 0), 0u)
      << s.ToString();
}

// The backing file a failed disksize made is removed only while it is
// still the file at its path and still held: one put in its place since
// (here renamed over it once the file is open) is another's and is left,
// and no one can claim the file between its close and its removal (here a
// claim, open and flock as another device's, taken the moment the store
// lets the file go).
TEST(DeviceBackingTest, AFailedStoreRemovesOnlyTheFileItMadeAndHeld) {
  testing::ScopedTempDir dir;
  const std::string dict = dir.File("lz4.dict");
  const std::string path = dir.File("wb");
  const std::string other = dir.File("other");
  for (const bool replace : {true, false}) {
    SCOPED_TRACE(replace ? "replaced" : "claimed");
    std::ofstream(other) << "another's";
    int claim = -1;
    DeviceDefaults defaults;
    defaults.backing_file_wrap = [&](std::shared_ptr<BackingFile> file) {
      if (replace) {
        EXPECT_EQ(::rename(other.c_str(), path.c_str()), 0);
        return file;
      }
      BackingFile* raw = file.get();
      return std::shared_ptr<BackingFile>(
          raw, [&, held = std::move(file)](BackingFile*) mutable {
            held.reset();  // closed: its flock gone
            const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
            if (fd >= 0 && ::flock(fd, LOCK_EX | LOCK_NB) == 0) {
              claim = fd;
            } else if (fd >= 0) {
              ::close(fd);
            }
          });
    };
    Device d("zram0", defaults);
    Status s;
    ASSERT_NO_FATAL_FAILURE(DisksizeWithItsDictionaryGone(d, dict, path, &s));
    EXPECT_EQ(s.code(), StatusCode::kNotFound) << s.ToString();
    EXPECT_FALSE(d.initialized());
    if (replace) {
      std::ifstream in(path);
      std::string text;
      std::getline(in, text);
      EXPECT_EQ(text, "another's") << "a file put in its place was removed";
    } else {
      EXPECT_TRUE(claim < 0 || std::filesystem::exists(path))
          << "removed while another held it";
      EXPECT_LT(claim, 0) << "claimed before its removal";
      if (claim >= 0) ::close(claim);
    }
    std::filesystem::remove(path);
  }
}

// A disksize store that throws (std::bad_alloc: no memory for the store
// being made, answered ENOMEM by the control server) after its backing
// file was made removes it, as a failed one does. Each allocation of the
// store fails in turn (testing/failing_new.h).
TEST(DeviceBackingTest, AThrowingStoreTakesItsNewBackingFileAway) {
  testing::ScopedTempDir dir;
  const std::string path = dir.File("wb");
  for (long n = 1;; ++n) {
    SCOPED_TRACE("allocation " + std::to_string(n) + " fails");
    std::filesystem::remove(path);
    Device d("zram0", DeviceDefaults{});
    ASSERT_OK(d.SetBackingDev(path));
    testing::FailNthAllocation(n);
    bool threw = false;
    try {
      (void)d.SetDisksize(16 * kPageSize);
    } catch (const std::bad_alloc&) {
      threw = true;
    }
    const bool failed = testing::AllocationFailed();
    testing::FailNthAllocation(0);
    if (!failed) {
      ASSERT_TRUE(d.initialized());
      break;
    }
    if (!d.initialized()) {
      EXPECT_FALSE(std::filesystem::exists(path))
          << (threw ? "thrown" : "failed") << ", the file left behind";
    }
    std::filesystem::remove(path);
  }
}

TEST(DeviceBackingTest, WritebackErrors) {
  testing::ScopedTempDir dir;
  Device d("zram0", DeviceDefaults{});
  EXPECT_EQ(d.Writeback("idle").code(), StatusCode::kFailedPrecondition);
  ASSERT_OK(d.SetDisksize(16 * kPageSize));
  EXPECT_EQ(d.Writeback("idle").code(), StatusCode::kNotFound);
  ASSERT_OK(d.Reset());
  ASSERT_OK(d.SetBackingDev(dir.File("wb")));
  EXPECT_EQ(d.Writeback("idle").code(), StatusCode::kFailedPrecondition);
  ASSERT_OK(d.SetDisksize(16 * kPageSize));
  EXPECT_EQ(d.Writeback("bogus").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(d.Writeback("").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(d.Writeback("page_index=16").code(), StatusCode::kOutOfRange);
  EXPECT_EQ(d.Writeback("page_indexes=3-2").code(), StatusCode::kOutOfRange);
  WritebackResult r;
  ASSERT_OK(d.Writeback("idle\n", &r));  // nothing stored: nothing to do
  EXPECT_EQ(r.written, 0u);
}

TEST(DeviceBackingTest, WritebackLimitBatchSizeAndCompressedRoundTrip) {
  Device d("zram0", DeviceDefaults{});
  EXPECT_FALSE(d.writeback_limit_enable());
  EXPECT_EQ(d.writeback_limit(), 0u);
  EXPECT_EQ(d.writeback_batch_size(), 32u);
  EXPECT_FALSE(d.compressed_writeback());
  ASSERT_OK(d.SetWritebackLimitEnable(true));
  ASSERT_OK(d.SetWritebackLimit(1000));
  EXPECT_EQ(d.SetWritebackBatchSize(0).code(), StatusCode::kInvalidArgument);
  ASSERT_OK(d.SetWritebackBatchSize(4));
  ASSERT_OK(d.SetCompressedWriteback(true));
  EXPECT_TRUE(d.writeback_limit_enable());
  EXPECT_EQ(d.writeback_limit(), 1000u);
  EXPECT_EQ(d.writeback_batch_size(), 4u);
  EXPECT_TRUE(d.compressed_writeback());

  ASSERT_OK(d.SetDisksize(16 * kPageSize));
  EXPECT_EQ(d.SetCompressedWriteback(false).code(), StatusCode::kBusy);
  // Limit, enable and batch size change any time.
  ASSERT_OK(d.SetWritebackLimit(7));
  ASSERT_OK(d.SetWritebackLimitEnable(false));
  ASSERT_OK(d.SetWritebackBatchSize(64));
  ASSERT_OK(d.Reset());
  // zram's reset keeps them (and compressed_writeback).
  EXPECT_EQ(d.writeback_limit(), 7u);
  EXPECT_FALSE(d.writeback_limit_enable());
  EXPECT_EQ(d.writeback_batch_size(), 64u);
  EXPECT_TRUE(d.compressed_writeback());
  ASSERT_OK(d.SetCompressedWriteback(false));
}

TEST(DeviceBackingTest, BdStatBeforeInitAndWithoutBacking) {
  Device d("zram0", DeviceDefaults{});
  EXPECT_EQ(d.ShowBdStat(), "       0        0        0\n");
  ASSERT_OK(d.SetDisksize(16 * kPageSize));
  EXPECT_EQ(d.ShowBdStat(), "       0        0        0\n");
}

TEST(DeviceBackingTest, WritebackMovesPagesAndReadsThemBack) {
  testing::ScopedTempDir dir;
  for (bool compressed : {false, true}) {
    SCOPED_TRACE(compressed ? "compressed" : "decompressed");
    Device d("zram0", DeviceDefaults{});
    ASSERT_OK(d.SetBackingDev(dir.File("wb")));
    ASSERT_OK(d.SetCompressedWriteback(compressed));
    // One IO at a time, or as many as the ring holds.
    ASSERT_OK(d.SetWritebackBatchSize(compressed ? 1 : 1024));
    ASSERT_OK(d.SetDisksize(16 * kPageSize));
    const auto data = Bytes(8 * kPageSize, 5);
    ASSERT_OK(d.Write(0, data));
    WritebackResult r;
    ASSERT_OK(d.Writeback("page_indexes=0-3", &r));
    EXPECT_EQ(r.candidates, 4u);
    EXPECT_EQ(r.written, 4u);
    EXPECT_EQ(d.Stats().bd_count, 4u);
    EXPECT_EQ(d.ShowBdStat(), "       4        0        4\n");
    std::vector<std::byte> back(data.size());
    ASSERT_OK(d.Read(0, back));
    EXPECT_EQ(back, data);
    EXPECT_EQ(d.Stats().bd_reads, 4u);
    // Overwriting a written-back page releases its block.
    ASSERT_OK(d.Write(0, Bytes(kPageSize, 6)));
    EXPECT_EQ(d.Stats().bd_count, 3u);
    ASSERT_OK(d.Reset());
  }
}

TEST(DeviceBackingTest, WritebackLimitStopsWithIoError) {
  testing::ScopedTempDir dir;
  Device d("zram0", DeviceDefaults{});
  ASSERT_OK(d.SetBackingDev(dir.File("wb")));
  ASSERT_OK(d.SetDisksize(16 * kPageSize));
  ASSERT_OK(d.Write(0, Bytes(8 * kPageSize, 7)));
  ASSERT_OK(d.SetWritebackLimitEnable(true));
  ASSERT_OK(d.SetWritebackLimit(0));
  WritebackResult r;
  EXPECT_EQ(d.Writeback("page_indexes=0-7", &r).code(), StatusCode::kIoError);
  EXPECT_EQ(r.written, 0u);
  ASSERT_OK(d.SetWritebackLimit(3));
  EXPECT_EQ(d.Writeback("page_indexes=0-7", &r).code(), StatusCode::kIoError);
  EXPECT_EQ(r.written, 3u);
  EXPECT_EQ(d.writeback_limit(), 0u);
  ASSERT_OK(d.SetWritebackLimitEnable(false));
  ASSERT_OK(d.Writeback("page_indexes=0-7", &r));
  EXPECT_EQ(r.written, 5u);
  EXPECT_EQ(d.Stats().bd_count, 8u);
}

// writeback_limit and writeback_limit_enable may be written while a pass
// runs (zram's writes wait for the pass instead). A value written then is
// the budget from then on: the pass's pages that fail (or change) give
// their charge back only to the setting they were charged against, never
// into the new value, so "writeback_limit 0" stays 0.
TEST(DeviceBackingTest, AWritebackLimitSetDuringAPassIsNotRaisedByItsRefunds) {
  testing::ScopedTempDir dir;
  struct Case {
    bool enabled_before;  // writeback_limit_enable when the pass starts
    std::uint64_t set;    // writeback_limit written during the pass
  };
  for (const Case c : {Case{true, 0}, Case{false, 5}}) {
    SCOPED_TRACE(c.enabled_before ? "re-armed" : "enabled");
    std::function<void()> during;  // run at the pass's first write
    DeviceDefaults defaults;
    defaults.backing_file_wrap = testing::FaultyFile([&](const FileIo& io,
                                                         long result) -> long {
      if (io.kind != FileIo::Kind::kWrite) return result;
      if (during) {
        // From another thread, as an operator's write would come.
        std::async(std::launch::async, std::exchange(during, nullptr)).get();
      }
      return -EIO;
    });
    Device d("zram0", defaults);
    ASSERT_OK(d.SetBackingDev(dir.File("wb")));
    ASSERT_OK(d.SetDisksize(16 * kPageSize));
    ASSERT_OK(d.Write(0, Bytes(8 * kPageSize, 9)));
    ASSERT_OK(d.SetWritebackLimitEnable(c.enabled_before));
    ASSERT_OK(d.SetWritebackLimit(100));
    during = [&] {
      ASSERT_OK(d.SetWritebackLimitEnable(true));
      ASSERT_OK(d.SetWritebackLimit(c.set));
    };
    WritebackResult r;
    EXPECT_EQ(d.Writeback("page_indexes=0-7", &r).code(), StatusCode::kIoError);
    EXPECT_EQ(r.failed, 8u);
    EXPECT_EQ(d.writeback_limit(), c.set);
    ASSERT_OK(d.Reset());
  }
}

// writeback_store() in 6.12 checks the limit before each slot it scans, so
// a spent limit fails the pass with EIO even when no slot would be written
// (no idle page, an empty slot, a same-filled one).
TEST(DeviceBackingTest, ASpentWritebackLimitFailsEvenWithNothingToWrite) {
  testing::ScopedTempDir dir;
  Device d("zram0", DeviceDefaults{});
  ASSERT_OK(d.SetBackingDev(dir.File("wb")));
  ASSERT_OK(d.SetDisksize(16 * kPageSize));
  ASSERT_OK(d.Write(0, Bytes(kPageSize, 8)));                        // not idle
  ASSERT_OK(d.WriteZeroes(kPageSize, kPageSize, /*no_hole=*/true));  // same
  ASSERT_OK(d.SetWritebackLimitEnable(true));
  ASSERT_OK(d.SetWritebackLimit(0));
  for (const char* tokens : {"idle", "huge", "page_index=1", "page_index=9"}) {
    WritebackResult r;
    EXPECT_EQ(d.Writeback(tokens, &r).code(), StatusCode::kIoError) << tokens;
    EXPECT_TRUE(r.limit_reached) << tokens;
    EXPECT_EQ(r.written, 0u) << tokens;
  }
  ASSERT_OK(d.SetWritebackLimitEnable(false));
  WritebackResult r;
  ASSERT_OK(d.Writeback("idle", &r));
  EXPECT_EQ(r.written, 0u);
}

TEST(DeviceBackingTest, BackingIoErrorsReachTheCaller) {
  testing::ScopedTempDir dir;
  std::atomic<long> fault{0};  // 0: none; else the -errno every write gets
  DeviceDefaults defaults;
  defaults.backing_file_wrap =
      testing::FaultyFile([&](const FileIo& io, long result) {
        if (io.kind == FileIo::Kind::kWrite && fault.load() != 0) {
          return fault.load();
        }
        return result;
      });
  Device d("zram0", defaults);
  ASSERT_OK(d.SetBackingDev(dir.File("wb")));
  ASSERT_OK(d.SetDisksize(16 * kPageSize));
  const auto data = Bytes(4 * kPageSize, 8);
  ASSERT_OK(d.Write(0, data));
  WritebackResult r;
  fault = -EIO;
  EXPECT_EQ(d.Writeback("page_indexes=0-3", &r).code(), StatusCode::kIoError);
  EXPECT_EQ(r.written, 0u);
  EXPECT_EQ(r.failed, 4u);
  fault = -ENOSPC;
  EXPECT_EQ(d.Writeback("page_indexes=0-3", &r).code(),
            StatusCode::kResourceExhausted);
  EXPECT_EQ(d.Stats().bd_count, 0u);
  std::vector<std::byte> back(data.size());
  ASSERT_OK(d.Read(0, back));  // still in RAM
  EXPECT_EQ(back, data);
  fault = 0;
  ASSERT_OK(d.Writeback("page_indexes=0-3", &r));
  EXPECT_EQ(r.written, 4u);
}

// A backing file that cannot be made at disksize fails the store with the
// errno the kernel gave (ErrnoNameOf, which `ztier serve` prints), not the
// errno name of its code. RLIMIT_FSIZE below the size makes fallocate()
// fail with EFBIG (inode_newsize_ok(), fs/attr.c), as a full file system
// fails it with ENOSPC.
TEST(DeviceBackingTest, ABackingFileThatCannotBeMadeNamesItsErrno) {
  testing::ScopedTempDir dir;
  Device d("zram0", DeviceDefaults{});
  ASSERT_OK(d.SetBackingDev(dir.File("wb")));
  struct sigaction ignore = {}, old_action = {};
  ignore.sa_handler = SIG_IGN;  // else SIGXFSZ ends the process
  ASSERT_EQ(::sigaction(SIGXFSZ, &ignore, &old_action), 0);
  rlimit old_limit = {};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old_limit), 0);
  const rlimit low = {.rlim_cur = 16 * kPageSize,
                      .rlim_max = old_limit.rlim_max};
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &low), 0);
  const Status s = d.SetDisksize(64 * kPageSize);
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &old_limit), 0);
  ASSERT_EQ(::sigaction(SIGXFSZ, &old_action, nullptr), 0);
  EXPECT_EQ(s.code(), StatusCode::kIoError) << s.ToString();
  EXPECT_EQ(ErrnoNameOf(s), "EFBIG") << s.ToString();
  EXPECT_EQ(s.message().rfind("backing_dev: ", 0), 0u) << s.message();
  EXPECT_FALSE(d.initialized());
  EXPECT_FALSE(std::filesystem::exists(dir.File("wb")));  // made, then removed
}

// Defaults whose backing stores are all `remote`, a file that takes
// discards (as a remote export does).
DeviceDefaults OnRemote(std::shared_ptr<testing::DiscardingFile> remote) {
  DeviceDefaults defaults;
  defaults.backing_file_wrap = [remote](std::shared_ptr<BackingFile>) {
    return std::shared_ptr<BackingFile>(remote);
  };
  return defaults;
}

// Initialises `d` (16 pages, backing_dev `path`) and writes pages 0-3
// back.
void WriteBackFourPages(Device& d, const std::string& path) {
  ASSERT_OK(d.SetBackingDev(path));
  ASSERT_OK(d.SetDisksize(16 * kPageSize));
  ASSERT_OK(d.Write(0, Bytes(4 * kPageSize, 8)));
  WritebackResult r;
  ASSERT_OK(d.Writeback("page_indexes=0-3", &r));
  ASSERT_EQ(r.written, 4u);
}

// On a backing file that takes discards (a remote export), a reset trims
// every block the device had written back, rather than leave their bytes
// and space on the remote with no later pass to trim them.
TEST(DeviceBackingTest, AResetTrimsTheBlocksOfARemoteBacking) {
  testing::ScopedTempDir dir;
  auto remote = std::make_shared<testing::DiscardingFile>(16 * kPageSize);
  Device d("zram0", OnRemote(remote));
  ASSERT_NO_FATAL_FAILURE(WriteBackFourPages(d, dir.File("wb")));
  EXPECT_TRUE(remote->calls.empty());
  ASSERT_OK(d.Reset());
  std::uint64_t trimmed = 0;
  for (const auto& [offset, len] : remote->calls) trimmed += len;
  EXPECT_EQ(trimmed, 4 * kPageSize);
}

// A remote file may answer only a Discard's first ranges (the NBD file
// starts none after about timeout_ms): a reset still trims every block,
// in as many passes as that takes, while the remote answers.
TEST(DeviceBackingTest, AResetTrimsEveryRangeOfARemoteThatAnswersAFew) {
  testing::ScopedTempDir dir;
  auto remote = std::make_shared<testing::DiscardingFile>(16 * kPageSize);
  Device d("zram0", OnRemote(remote));
  ASSERT_OK(d.SetBackingDev(dir.File("wb")));
  ASSERT_OK(d.SetDisksize(16 * kPageSize));
  ASSERT_OK(d.Write(0, Bytes(8 * kPageSize, 8)));
  WritebackResult r;
  ASSERT_OK(d.Writeback("page_indexes=0-7", &r));
  ASSERT_EQ(r.written, 8u);
  // Pages 1, 3, 5 and 7 written again: their blocks are freed (and
  // trimmed by the next pass), leaving 4 runs of one block.
  for (std::uint64_t p : {1, 3, 5, 7}) {
    ASSERT_OK(d.Write(p * kPageSize, Bytes(kPageSize, 9)));
  }
  ASSERT_OK(d.Writeback("page_index=1", &r));
  remote->calls.clear();
  remote->answer_first = 1;
  std::vector<std::size_t> firsts;  // each Discard's first range, answered
  remote->on_discard = [&] { firsts.push_back(remote->calls.size()); };
  ASSERT_OK(d.Reset());
  // Blocks 0, 2, 4, 6 and page 1's new one: at least 3 runs.
  std::set<std::uint64_t> trimmed;
  for (std::size_t i : firsts) {
    const auto& [offset, len] = remote->calls[i];
    for (std::uint64_t b = offset; b < offset + len; b += kPageSize) {
      trimmed.insert(b / kPageSize);
    }
  }
  EXPECT_EQ(trimmed.size(), 5u) << firsts.size() << " Discard call(s)";
}

// SetDisksize opens the backing store (a remote's connect can take its
// timeout) and makes the store without holding the device's lock: shows
// (a status report, a metrics scrape) answer meanwhile, and what would
// change the store being made is kBusy.
TEST(DeviceBackingTest, ShowsAnswerWhileDisksizeMakesTheStore) {
  testing::ScopedTempDir dir;
  std::promise<void> opening, release;
  std::shared_future<void> released = release.get_future().share();
  DeviceDefaults defaults;
  defaults.backing_file_wrap = [&](std::shared_ptr<BackingFile> f) {
    opening.set_value();
    released.wait();  // a slow remote
    return f;
  };
  Device d("zram0", defaults);
  ASSERT_OK(d.SetBackingDev(dir.File("wb")));
  auto set = std::async(std::launch::async,
                        [&] { return d.SetDisksize(16 * kPageSize); });
  opening.get_future().wait();
  // Each on its own thread, so that a call that waits fails the test
  // rather than hang it.
  auto shown = std::async(std::launch::async, [&] {
    return std::make_pair(d.initialized(), d.ShowMmStat());
  });
  auto refused = std::async(std::launch::async, [&] {
    return std::vector<Status>{d.SetCompAlgorithm("zstd"),
                               d.SetDisksize(32 * kPageSize), d.Reset(),
                               d.SetMemLimit(1 << 20)};
  });
  const bool answered =
      shown.wait_for(std::chrono::seconds(10)) == std::future_status::ready &&
      refused.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
  release.set_value();
  ASSERT_OK(set.get());
  EXPECT_TRUE(answered) << "a call waited for the backing store to open";
  EXPECT_FALSE(shown.get().first);
  for (const Status& s : refused.get()) {
    EXPECT_EQ(s.code(), StatusCode::kBusy) << s.ToString();
    EXPECT_NE(s.message().find("disksize is being set"), std::string::npos);
  }
  EXPECT_TRUE(d.initialized());
  EXPECT_EQ(d.disksize(), 16 * kPageSize);
  EXPECT_NE(d.ShowCompAlgorithm().find("[lz4]"), std::string::npos);
  const auto data = Bytes(kPageSize, 3);
  ASSERT_OK(d.Write(0, data));
  std::vector<std::byte> back(kPageSize);
  ASSERT_OK(d.Read(0, back));
  EXPECT_EQ(back, data);
}

// A SetDisksize that throws (no memory for the store's tables, say)
// leaves the device uninitialised, and a later one works.
TEST(DeviceBackingTest, ADisksizeThatThrowsLeavesTheDeviceUsable) {
  testing::ScopedTempDir dir;
  bool fail = true;
  DeviceDefaults defaults;
  defaults.backing_file_wrap = [&](std::shared_ptr<BackingFile> f) {
    if (fail) throw std::bad_alloc();
    return f;
  };
  Device d("zram0", defaults);
  ASSERT_OK(d.SetBackingDev(dir.File("wb")));
  EXPECT_THROW(static_cast<void>(d.SetDisksize(16 * kPageSize)),
               std::bad_alloc);
  EXPECT_FALSE(d.initialized());
  fail = false;
  ASSERT_OK(d.SetDisksize(16 * kPageSize));
  EXPECT_TRUE(d.initialized());
}

// A reset trims a remote's freed blocks with the device's lock released:
// shows answer meanwhile, and a new disksize (whose connection to the same
// remote a late trim could overtake) waits for the trim to end (kBusy).
TEST(DeviceBackingTest, ShowsAnswerWhileAResetTrimsTheRemote) {
  testing::ScopedTempDir dir;
  auto remote = std::make_shared<testing::DiscardingFile>(16 * kPageSize);
  std::promise<void> trimming, release;
  std::shared_future<void> released = release.get_future().share();
  remote->on_discard = [&] {
    trimming.set_value();
    released.wait();
  };
  Device d("zram0", OnRemote(remote));
  ASSERT_NO_FATAL_FAILURE(WriteBackFourPages(d, dir.File("wb")));
  auto reset = std::async(std::launch::async, [&] { return d.Reset(); });
  trimming.get_future().wait();
  auto during = std::async(std::launch::async, [&] {
    return std::make_tuple(d.initialized(), d.SetDisksize(16 * kPageSize),
                           d.SetBackingDev(dir.File("wb")));
  });
  const bool answered =
      during.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
  release.set_value();
  ASSERT_OK(reset.get());
  EXPECT_TRUE(answered) << "a call waited for the trim";
  const auto [initialized, disksize, backing] = during.get();
  EXPECT_FALSE(initialized);
  EXPECT_EQ(disksize.code(), StatusCode::kBusy) << disksize.ToString();
  EXPECT_NE(disksize.message().find("being reset"), std::string::npos);
  EXPECT_EQ(backing.code(), StatusCode::kBusy) << backing.ToString();
  remote->on_discard = nullptr;
  ASSERT_OK(d.SetBackingDev(dir.File("wb")));
  ASSERT_OK(d.SetDisksize(16 * kPageSize));
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
  // A client that found the device before it was removed cannot attach,
  // reset it, nor initialise it again.
  EXPECT_EQ(removed->Attach().error().code(), StatusCode::kNotFound);
  EXPECT_EQ(removed->Reset().code(), StatusCode::kNotFound);
  EXPECT_EQ(removed->SetDisksize(4096).code(), StatusCode::kNotFound);
  EXPECT_EQ(r.List().size(), 1u);
  EXPECT_NE(r.Find("zram0"), nullptr);
  EXPECT_EQ(r.Find("zram9"), nullptr);
}

// hot_add takes the lowest free zramN, whatever names Add gave and Remove
// took back ("zram007" and "zram01" are other names, not zram7 and zram1).
TEST(DeviceRegistryTest, HotAddTakesTheLowestFreeId) {
  DeviceRegistry r(DeviceDefaults{});
  const auto hot_add = [&r] {
    auto d = r.HotAdd();
    return d.has_value() ? (*d)->name() : d.error().ToString();
  };
  for (const char* name :
       {"zram1", "zram3", "zram4", "zram007", "zram01", "disk2", "zram"}) {
    ASSERT_TRUE(r.Add(name).has_value()) << name;
  }
  EXPECT_EQ(hot_add(), "zram0");
  EXPECT_EQ(hot_add(), "zram2");
  EXPECT_EQ(hot_add(), "zram5");  // past zram3 and zram4
  ASSERT_OK(r.Remove("zram3"));
  ASSERT_OK(r.Remove("zram1"));
  ASSERT_OK(r.Remove("zram007"));
  EXPECT_EQ(hot_add(), "zram1");
  EXPECT_EQ(hot_add(), "zram3");
  ASSERT_TRUE(r.Add("zram6").has_value());
  ASSERT_TRUE(r.Add("zram8").has_value());
  EXPECT_EQ(hot_add(), "zram7");
  ASSERT_OK(r.Remove("zram8"));
  EXPECT_EQ(hot_add(), "zram8");
  EXPECT_EQ(hot_add(), "zram9");
  ASSERT_OK(r.Remove("zram9"));
  ASSERT_OK(r.Remove("zram0"));
  ASSERT_TRUE(r.Add("zram0").has_value());  // taken again by name
  EXPECT_EQ(hot_add(), "zram9");
  EXPECT_EQ(r.List().size(), 13u);
}

// A name with a sign after "zram" is no zramN ("zram-0" is not zram0,
// "zram-1" is none): hot_add does not skip zram0 for it, and once it is
// removed, hands out neither a name that exists nor a negative one.
TEST(DeviceRegistryTest, HotAddIgnoresSignedNames) {
  const auto hot_add = [](DeviceRegistry& r) {
    auto d = r.HotAdd();
    return d.has_value() ? (*d)->name() : d.error().ToString();
  };
  {
    DeviceRegistry r(DeviceDefaults{});
    ASSERT_TRUE(r.Add("zram-0").has_value());
    EXPECT_EQ(hot_add(r), "zram0");
  }
  {
    DeviceRegistry r(DeviceDefaults{});
    EXPECT_EQ(hot_add(r), "zram0");
    ASSERT_TRUE(r.Add("zram-0").has_value());
    ASSERT_OK(r.Remove("zram-0"));
    EXPECT_EQ(hot_add(r), "zram1");  // zram0 is still there
    EXPECT_NE(r.Find("zram1"), nullptr);
  }
  {
    DeviceRegistry r(DeviceDefaults{});
    ASSERT_TRUE(r.Add("zram-1").has_value());
    ASSERT_OK(r.Remove("zram-1"));
    EXPECT_EQ(hot_add(r), "zram0");
  }
}

// A removed device's memory and backing file go at the removal, as the
// kernel's hot_remove resets the device, not when the last holder of the
// Device (a policy round, a metrics scrape) lets go; passes on it find it
// uninitialised.
TEST(DeviceRegistryTest, ARemovedDeviceLetsGoOfItsStoreAndBackingFile) {
  testing::ScopedTempDir dir;
  const std::string path = dir.File("wb");
  DeviceRegistry r(DeviceDefaults{});
  ASSERT_TRUE(r.Add("zram0").has_value());
  std::shared_ptr<Device> held = r.Find("zram0");
  ASSERT_OK(held->SetBackingDev(path));
  ASSERT_OK(held->SetDisksize(64 * kPageSize));
  ASSERT_OK(r.Remove("zram0"));
  EXPECT_FALSE(held->initialized());
  EXPECT_EQ(held->disksize(), 0u);  // reset, as zram_remove() resets
  EXPECT_EQ(held->ShowBackingDev(), "none\n");
  // Every store and pass on it says it was removed (the control socket's
  // ENODEV), rather than "not initialised", or OK for a store that a
  // device of the same name added meanwhile would never see.
  EXPECT_EQ(held->MarkIdle("all").code(), StatusCode::kNotFound);
  EXPECT_EQ(held->Writeback("idle").code(), StatusCode::kNotFound);
  for (const Status& s :
       {held->SetCompAlgorithm("zstd"), held->SetAlgorithmParams("level=3"),
        held->SetRecompAlgorithm("algo=zstd"), held->SetBackingDev(path),
        held->SetCompressedWriteback(true), held->SetMemLimit(1 << 20),
        held->SetWritebackLimit(8), held->SetWritebackLimitEnable(true),
        held->SetWritebackBatchSize(8), held->SetDisksize(kPageSize)}) {
    EXPECT_EQ(s.code(), StatusCode::kNotFound) << s.ToString();
    EXPECT_NE(s.message().find("'zram0' was removed"), std::string::npos);
  }
  EXPECT_EQ(held->Recompress("").code(), StatusCode::kNotFound);
  EXPECT_EQ(held->TrainDictionary("").error().code(), StatusCode::kNotFound);
  // The backing file is free for a new device at once.
  auto again = r.Add("zram0");
  ASSERT_TRUE(again.has_value());
  ASSERT_OK((*again)->SetBackingDev(path));
  ASSERT_OK((*again)->SetDisksize(64 * kPageSize));
}

// A preallocated device's reserve is made at disksize for its mem_limit
// then: a larger limit (or none) could only turn writes past the reserve
// into ENOMEM, so it is refused until a reset.
TEST(DeviceTest, APreallocatedDevicesMemLimitCannotOutgrowItsReserve) {
  DeviceDefaults defaults;
  defaults.prealloc = true;
  Device d("zram0", defaults);
  ASSERT_OK(d.SetMemLimit(1 << 20));
  ASSERT_OK(d.SetDisksize(4 << 20));
  EXPECT_OK(d.SetMemLimit(512 << 10));
  EXPECT_EQ(d.SetMemLimit(2 << 20).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(d.SetMemLimit(0).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(d.Stats().mem_limit, 512u << 10);
  EXPECT_OK(d.SetMemLimit(1 << 20));
  ASSERT_OK(d.Reset());
  EXPECT_OK(d.SetMemLimit(2 << 20));
}

// A device of 1 MiB with recomp_algorithm zstd and 64 pages written, and
// a recompress pass on it held in its pace callback (under the device's
// shared lock) until Release() or the end of the scope.
class HeldPass {
 public:
  HeldPass() : d_("zram0", DeviceDefaults{}) {}
  ~HeldPass() { Release(); }
  Device& device() { return d_; }
  // Fills the device and starts the pass; false when either failed or the
  // pass never reached its callback.
  bool Start() {
    if (!d_.SetRecompAlgorithm("algo=zstd").ok() ||
        !d_.SetDisksize(1 << 20).ok()) {
      return false;
    }
    std::vector<std::byte> page(kPageSize);
    for (std::size_t i = 0; i < 64; ++i) {
      for (std::size_t k = 0; k < kPageSize; ++k) {
        page[k] = static_cast<std::byte>((k * 7 + i) % 13);
      }
      if (!d_.Write(i * kPageSize, page).ok()) return false;
    }
    pass_ = std::thread([this] {
      (void)d_.Recompress("", nullptr, [this](const Device::StatsReader&) {
        in_pass_.set_value();
        released_.wait();
        return false;
      });
    });
    return in_pass_.get_future().wait_for(std::chrono::seconds(60)) ==
           std::future_status::ready;
  }
  void Release() {
    if (!pass_.joinable()) return;
    release_.set_value();
    pass_.join();
  }

 private:
  Device d_;
  std::promise<void> in_pass_, release_;
  std::shared_future<void> released_ = release_.get_future().share();
  std::thread pass_;
};

// mem_limit and the notes (what a SIGHUP reload sets) do not wait for a
// writeback or recompress pass to end.
TEST(DeviceTest, SettingsDoNotWaitForAPass) {
  HeldPass held;
  ASSERT_TRUE(held.Start()) << "the recompress pass never reached its pace "
                               "callback";
  Device& d = held.device();
  auto set = std::async(std::launch::async, [&] {
    d.SetNotes({{"swap-priority", "100"}});
    return d.SetMemLimit(1 << 19);
  });
  const bool waited =
      set.wait_for(std::chrono::seconds(20)) != std::future_status::ready;
  held.Release();
  EXPECT_FALSE(waited) << "a setting waited for the pass";
  EXPECT_OK(set.get());
  EXPECT_EQ(d.Stats().mem_limit, 1u << 19);
  EXPECT_EQ(d.notes().at("swap-priority"), "100");
}

// The stores an initialised device refuses (kBusy, as zram's EBUSY) say so
// at once: they do not wait for a pass (or for IO, which a waiting
// exclusive lock may never get past) to end first.
TEST(DeviceTest, StoresRefusedAfterInitDoNotWaitForAPass) {
  testing::ScopedTempDir dir;
  HeldPass held;
  ASSERT_TRUE(held.Start()) << "the recompress pass never reached its pace "
                               "callback";
  Device& d = held.device();
  auto refused = std::async(std::launch::async, [&] {
    return std::vector<Status>{
        d.SetDisksize(2 << 20),          d.SetCompAlgorithm("lz4hc"),
        d.SetAlgorithmParams("level=3"), d.SetRecompAlgorithm("algo=lz4hc"),
        d.SetBackingDev(dir.File("wb")), d.SetCompressedWriteback(true)};
  });
  const bool waited =
      refused.wait_for(std::chrono::seconds(20)) != std::future_status::ready;
  held.Release();
  EXPECT_FALSE(waited) << "a store refused after init waited for the pass";
  for (const Status& s : refused.get()) {
    EXPECT_EQ(s.code(), StatusCode::kBusy) << s.ToString();
  }
  EXPECT_EQ(d.disksize(), 1u << 20);
  EXPECT_NE(d.ShowCompAlgorithm().find("[lz4]"), std::string::npos);
  EXPECT_EQ(d.ShowBackingDev(), "none\n");
}

// A removal waits for the device's passes to end, but not with the
// registry locked: other devices are found meanwhile (every control
// request, NBD handshake and metrics scrape finds its device first).
TEST(DeviceRegistryTest, ARemovalWaitingForAPassLeavesTheRegistryFree) {
  DeviceRegistry r(DeviceDefaults{});
  auto d = r.Add("zram0");
  ASSERT_TRUE(d.has_value());
  ASSERT_TRUE(r.Add("zram1").has_value());
  ASSERT_OK((*d)->SetRecompAlgorithm("algo=zstd"));
  ASSERT_OK((*d)->SetDisksize(1 << 20));
  std::vector<std::byte> page(kPageSize);
  for (std::size_t i = 0; i < 64; ++i) {
    for (std::size_t k = 0; k < kPageSize; ++k) {
      page[k] = static_cast<std::byte>((k * 7 + i) % 13);
    }
    ASSERT_OK((*d)->Write(i * kPageSize, page));
  }
  std::promise<void> in_pass, release;
  std::shared_future<void> released = release.get_future().share();
  std::thread pass([&] {
    // The pace callback runs under the device's shared lock.
    (void)(*d)->Recompress("", nullptr, [&](const Device::StatsReader&) {
      in_pass.set_value();
      released.wait();
      return false;
    });
  });
  if (in_pass.get_future().wait_for(std::chrono::seconds(60)) !=
      std::future_status::ready) {
    release.set_value();
    pass.join();
    FAIL() << "the recompress pass never reached its pace callback";
  }
  auto removed = std::async(std::launch::async, [&] { return r.Remove("zram0"); });
  bool stuck = false;
  std::future<bool> found;
  for (int i = 0; i < 50 && !stuck; ++i) {
    found = std::async(std::launch::async, [&] { return r.Find("zram1") != nullptr; });
    stuck = found.wait_for(std::chrono::seconds(20)) != std::future_status::ready;
    if (!stuck) {
      EXPECT_TRUE(found.get());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_FALSE(stuck) << "Find waited behind a removal";
  EXPECT_EQ(removed.wait_for(std::chrono::seconds(0)),
            std::future_status::timeout);  // still waiting for the pass
  release.set_value();
  EXPECT_OK(removed.get());
  pass.join();
  EXPECT_EQ(r.Find("zram0"), nullptr);
  EXPECT_NE(r.Find("zram1"), nullptr);
}

TEST(DeviceTest, NotesAreKeptAsGivenAndSurviveReset) {
  Device d("zram0", DeviceDefaults{});
  EXPECT_TRUE(d.notes().empty());
  d.SetNote("swap-priority", "100");
  d.SetNote("fs-type", "ext4");
  d.SetNote("swap-priority", "50");  // the last one given wins
  ASSERT_TRUE(d.SetDisksize(1 << 20).ok());
  ASSERT_TRUE(d.Reset().ok());
  const auto notes = d.notes();
  ASSERT_EQ(notes.size(), 2u);
  EXPECT_EQ(notes.at("swap-priority"), "50");
  EXPECT_EQ(notes.at("fs-type"), "ext4");
  d.SetNotes({{"swap-priority", "7"}});
  EXPECT_EQ(d.notes(), (std::map<std::string, std::string>{{"swap-priority", "7"}}));
}

// With units, an NBD-style write stores each whole aligned run as one
// object; when mem_limit refuses one, the runs after it keep their old
// content (and the write fails with the limit).
TEST(DeviceTest, WritesOfWholeRunsMakeUnitsAndAFailureSparesLaterRuns) {
  DeviceDefaults defaults;
  defaults.unit_pages = 16;
  Device d("zram0", defaults);
  ASSERT_OK(d.SetDisksize(4 << 20));
  // 1 MiB of text at 4 KiB past a unit boundary: a head page, 15 units
  // and a tail of 15 pages.
  std::string text;
  for (int i = 0; text.size() < (1u << 20); ++i) text += std::to_string(i) + "\n";
  const std::span<const std::byte> old(
      reinterpret_cast<const std::byte*>(text.data()), 1u << 20);
  ASSERT_OK(d.Write(4096, old));
  EXPECT_EQ(d.Stats().units, 15u);
  std::vector<std::byte> back(1u << 20);
  ASSERT_OK(d.Read(4096, back));
  EXPECT_EQ(std::memcmp(back.data(), old.data(), back.size()), 0);
  // Random data over it, with room for about one run more.
  ASSERT_OK(d.SetMemLimit(d.Stats().mem_used_total + (64 << 10)));
  std::vector<std::byte> fresh(1u << 20);
  std::mt19937_64 rng(3);
  for (auto& b : fresh) b = static_cast<std::byte>(rng());
  EXPECT_EQ(d.Write(4096, fresh).code(), StatusCode::kResourceExhausted);
  ASSERT_OK(d.Read(4096, back));
  // Page by page: new content, then (in the run refused) zeros, then the
  // old content to the end.
  const std::vector<std::byte> zero(4096);
  std::size_t k = 0;
  auto same = [&](std::span<const std::byte> want) {
    return std::memcmp(back.data() + k * 4096, want.data() + k * 4096, 4096) ==
           0;
  };
  while (k < 256 && same(fresh)) ++k;
  EXPECT_GT(k, 16u);
  while (k < 256 && std::memcmp(back.data() + k * 4096, zero.data(), 4096) == 0) {
    ++k;
  }
  const std::size_t old_from = k;
  while (k < 256 && same(old)) ++k;
  EXPECT_EQ(k, 256u) << "page " << k << " is neither new, zero nor old";
  EXPECT_LT(old_from, 256u - 16);  // later runs kept their content
}

TEST(DeviceTest, LogsMemLimitOnceAndCompactionWithCounts) {
  std::vector<std::string> lines;
  std::mutex mu;
  DeviceDefaults defaults;
  defaults.log = [&](std::string_view line) {
    std::lock_guard lock(mu);
    lines.emplace_back(line);
  };
  Device d("zram0", defaults);
  ASSERT_TRUE(d.SetMemLimit(256 << 10).ok());
  ASSERT_TRUE(d.SetDisksize(16 << 20).ok());
  std::mt19937_64 rng(7);
  std::vector<std::byte> page(4096);
  int failed = 0;
  for (int i = 0; i < 512; ++i) {
    for (auto& b : page) b = static_cast<std::byte>(rng());
    if (!d.Write(static_cast<std::uint64_t>(i) * 4096, page).ok()) ++failed;
  }
  ASSERT_GT(failed, 100);  // random pages: 256 KiB holds about 60
  // At the limit, zero pages (no pool memory) still succeed between the
  // refused ones: still one line, not one an IO.
  const std::vector<std::byte> zeros(4096);
  for (int i = 0; i < 64; ++i) {
    ASSERT_TRUE(d.Write(static_cast<std::uint64_t>(600 + i) * 4096, zeros).ok());
    for (auto& b : page) b = static_cast<std::byte>(rng());
    EXPECT_FALSE(d.Write(static_cast<std::uint64_t>(700 + i) * 4096, page).ok());
  }
  ASSERT_EQ(lines.size(), 1u) << lines.back();
  EXPECT_NE(lines[0].find("zram0: mem_limit reached (262144 bytes)"),
            std::string::npos) << lines[0];
  // Freed: the next write that succeeds, a second after the last look,
  // says so.
  ASSERT_TRUE(d.Trim(0, 16 << 20).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  ASSERT_TRUE(d.Write(0, page).ok());
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[1], "zram0: below mem_limit again; writes succeed");
  ASSERT_TRUE(d.Compact().ok());
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_NE(lines[2].find("zram0: compaction: "), std::string::npos);
  EXPECT_NE(lines[2].find(" pages compacted"), std::string::npos);
}

// A default mem_limit that is not a whole number of pages is rounded up as
// a written one is: mm_stat shows one value before, during and after
// initialisation, and with preallocation the same value can be written
// back (it used to be refused as above the 1000000 bytes preallocated).
TEST(DeviceTest, AnUnalignedDefaultMemLimitIsAlignedAsAWrittenOne) {
  DeviceDefaults defaults;
  defaults.mem_limit = 1000000;
  defaults.prealloc = true;
  Device d("zram0", defaults);
  const auto mem_limit = [&] {
    std::istringstream in(d.ShowMmStat());
    std::uint64_t v[4] = {};
    in >> v[0] >> v[1] >> v[2] >> v[3];
    return v[3];
  };
  EXPECT_EQ(mem_limit(), 1003520u);
  ASSERT_OK(d.SetDisksize(16 << 20));
  EXPECT_EQ(mem_limit(), 1003520u);
  EXPECT_OK(d.SetMemLimit(1000000));
  EXPECT_EQ(mem_limit(), 1003520u);
  ASSERT_OK(d.Reset());
  EXPECT_EQ(mem_limit(), 1003520u);
}

TEST(DeviceTest, WritePagesStoresRunsAndPartialEnds) {
  Device d("zram0", DeviceDefaults{});
  ASSERT_OK(d.SetDisksize(64 * kPageSize));
  // Unaligned head and tail around 9 whole pages.
  const auto data = Bytes(10 * kPageSize, 11);
  ASSERT_OK(d.WritePages(1000, data));
  std::vector<std::byte> back(data.size());
  ASSERT_OK(d.Read(1000, back));
  EXPECT_EQ(back, data);
  // Aligned: one run through StoreBatch.
  const auto aligned = Bytes(16 * kPageSize, 12);
  ASSERT_OK(d.WritePages(32 * kPageSize, aligned));
  back.resize(aligned.size());
  ASSERT_OK(d.Read(32 * kPageSize, back));
  EXPECT_EQ(back, aligned);
  EXPECT_EQ(d.WritePages(63 * kPageSize, aligned).code(),
            StatusCode::kOutOfRange);
}

TEST(DeviceTest, WritePagesAtMemLimitWritesThePagesBeforeTheLimit) {
  Device d("zram0", DeviceDefaults{});
  ASSERT_OK(d.SetMemLimit(256 << 10));
  ASSERT_OK(d.SetDisksize(16 << 20));
  std::mt19937_64 rng(5);
  std::vector<std::byte> pages(128 * kPageSize);  // random: incompressible
  for (auto& b : pages) b = static_cast<std::byte>(rng());
  const Status s = d.WritePages(0, pages);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted) << s.ToString();
  // Page by page after the batch was refused: the first pages are there.
  std::vector<std::byte> back(kPageSize);
  ASSERT_OK(d.Read(0, back));
  EXPECT_EQ(0, std::memcmp(back.data(), pages.data(), kPageSize));
  const PageStoreStats st = d.Stats();
  EXPECT_GT(st.stored_pages, 10u);
  // One failed request, as zram counts a bio; every stored page HUGE, and
  // none of the refused batch's counted as well.
  EXPECT_EQ(st.failed_writes, 1u);
  EXPECT_EQ(st.huge_pages_since, st.stored_pages);
}

// A watcher that records its calls, whether the device's lock was free
// then, and refuses release while `busy`.
class RecordingWatcher : public DeviceWatcher {
 public:
  void OnInitialized(Device& d) override {
    // The device's lock is not held: IO (a shared lock) goes through, and
    // so would an exclusive one; a stats read must not deadlock.
    const auto data = Bytes(kPageSize, 3);
    unlocked = unlocked && d.Write(0, data).ok();
    ++initialized;
  }
  Status BeforeRelease(Device& d) override {
    std::vector<std::byte> page(kPageSize);
    unlocked = unlocked && d.Read(0, page).ok();
    ++released;
    if (busy) return Status::Busy("mounted");
    return Status::Ok();
  }
  int initialized = 0;
  int released = 0;
  bool busy = false;
  bool unlocked = true;
};

TEST(DeviceRegistryTest, WatcherSeesInitAndVetoesResetAndRemove) {
  DeviceRegistry r(DeviceDefaults{});
  RecordingWatcher w;
  ASSERT_TRUE(r.Add("zram0").has_value());
  r.SetWatcher(&w);  // on the devices there and those added later
  auto d1 = r.HotAdd();
  ASSERT_TRUE(d1.has_value());
  ASSERT_OK(r.Find("zram0")->SetDisksize(1 << 20));
  ASSERT_OK((*d1)->SetDisksize(1 << 20));
  EXPECT_EQ(w.initialized, 2);
  w.busy = true;
  EXPECT_EQ(r.Find("zram0")->Reset().code(), StatusCode::kBusy);
  EXPECT_TRUE(r.Find("zram0")->initialized());
  EXPECT_EQ(r.Remove("zram1").code(), StatusCode::kBusy);
  EXPECT_NE(r.Find("zram1"), nullptr);
  w.busy = false;
  {
    // Released, but refused after all (a client attached): the watcher
    // is told the device is initialised again, to give back its disk.
    auto c0 = r.Find("zram0")->Attach();
    auto c1 = (*d1)->Attach();
    ASSERT_TRUE(c0.has_value() && c1.has_value());
    const int released = w.released;
    EXPECT_EQ(r.Find("zram0")->Reset().code(), StatusCode::kBusy);
    EXPECT_EQ(r.Remove("zram1").code(), StatusCode::kBusy);
    EXPECT_EQ(w.released, released + 2);
    EXPECT_EQ(w.initialized, 4);
  }
  ASSERT_OK(r.Find("zram0")->Reset());
  EXPECT_FALSE(r.Find("zram0")->initialized());
  // An uninitialised device's reset has nothing to release.
  const int before = w.released;
  ASSERT_OK(r.Find("zram0")->Reset());
  EXPECT_EQ(w.released, before);
  ASSERT_OK(r.Remove("zram1"));
  EXPECT_TRUE(w.unlocked);
  r.SetWatcher(nullptr);
  ASSERT_OK(r.Find("zram0")->SetDisksize(1 << 20));
  EXPECT_EQ(w.initialized, 4);
}

// A watcher whose first OnInitialized waits to be let go, and that records
// whether the device was still initialised when it went on.
class SlowAnnouncingWatcher : public DeviceWatcher {
 public:
  void OnInitialized(Device& d) override {
    if (calls++ == 0) {
      announcing.set_value();
      go_on.get_future().wait();
      initialized_after_wait = d.initialized();
    }
  }
  Status BeforeRelease(Device&) override { return Status::Ok(); }
  std::atomic<int> calls{0};
  std::promise<void> announcing, go_on;
  bool initialized_after_wait = false;
};

// The watcher is told of a new disksize before a Reset or a removal can
// take it away: meanwhile they are kBusy, as while the store is made, and
// OnInitialized never finds the device it announces uninitialised.
TEST(DeviceRegistryTest, AResetOrRemovalWaitsForTheWatcherToHearOfTheInit) {
  DeviceRegistry r(DeviceDefaults{});
  SlowAnnouncingWatcher w;
  r.SetWatcher(&w);
  auto d = r.HotAdd();
  ASSERT_TRUE(d.has_value());
  auto set = std::async(std::launch::async,
                        [&] { return (*d)->SetDisksize(16 * kPageSize); });
  w.announcing.get_future().wait();
  auto during = std::async(std::launch::async, [&] {
    Status reset = (*d)->Reset();
    return std::make_pair(reset, r.Remove("zram0"));
  });
  const bool answered =
      during.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
  w.go_on.set_value();
  ASSERT_OK(set.get());
  EXPECT_TRUE(answered) << "a reset or removal waited for the watcher";
  const auto [reset, removed] = during.get();
  EXPECT_EQ(reset.code(), StatusCode::kBusy) << reset.ToString();
  EXPECT_EQ(removed.code(), StatusCode::kBusy) << removed.ToString();
  EXPECT_TRUE(w.initialized_after_wait);
  EXPECT_TRUE((*d)->initialized());
  ASSERT_OK((*d)->Reset());
  ASSERT_OK(r.Remove("zram0"));
  r.SetWatcher(nullptr);
}

}  // namespace
}  // namespace ztier
