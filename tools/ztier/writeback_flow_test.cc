// File: tools/ztier/writeback_flow_test.cc
//
// The two test flows of the zram writeback batching series
// (docs/references.md), end to end: the built `ztier serve` (ZTIER_BIN)
// with a backing file, real NBD clients (nbdcopy, fio's nbd engine) and
// `ztier ctl` for zram's attributes, exactly as a user would run them.
//   1. End to end: write a file's worth of data, take its sha256, mark idle,
//      `writeback idle`, read everything back: same sha256; bd_stat shows
//      the blocks and mm_stat the RAM freed.
//   2. Limit: writeback_limit_enable 1, writeback_limit 1002, write 10 MiB,
//      idle all, writeback idle: bd_stat writes = 1002, budget 0.
// Then the same flow encrypted, to a local file and to a remote NBD export
// (nbdkit on a Unix socket).
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "testing/marked_pages.h"
#include "testing/serve_process.h"
#include "testing/nbd_server.h"
#include "testing/test_util.h"

namespace {

using ztier::testing::Numbers;
using ztier::testing::ScopedTempDir;
using ztier::testing::Sha256;
using ztier::testing::WriteMarkedPages;

using ztier::testing::Have;
using ztier::testing::Sh;
using ztier::testing::Shell;

// `ztier serve` in the background, in a temporary folder.
class Server : public ztier::testing::ServeOnSockets {
 public:
  explicit Server(const std::vector<std::string>& flags)
      : ServeOnSockets(ZTIER_BIN, flags) {}
};

TEST(WritebackFlowTest, EndToEndDataSurvivesWritebackAndReadsBack) {
  if (!Have("nbdcopy")) GTEST_SKIP() << "nbdcopy is not installed";
  constexpr std::uint64_t kSize = 24 << 20;
  ScopedTempDir data;
  // A file's worth of real data: the corpus's files and binaries when it is
  // there, else this system's documentation; then padded to the size.
  const std::string in = data.File("in.bin");
  const std::string corpus =
      ztier::testing::CorpusDir() + "/files-mixed.pages.zst";
  if (::access(corpus.c_str(), R_OK) == 0) {
    ASSERT_EQ(Sh("zstd -dc '" + corpus + "' | head -c " +
                 std::to_string(kSize) + " > '" + in + "'")
                  .exit_code,
              0);
  } else {
    Sh("tar cf - /usr/share/doc 2>/dev/null | head -c " +
       std::to_string(kSize) + " > '" + in + "'");
  }
  ASSERT_EQ(
      Sh("truncate -s " + std::to_string(kSize) + " '" + in + "'").exit_code,
      0);

  Server s({"--device", "zram0:24M", "--backing-dev", data.File("wb.img")});
  ASSERT_TRUE(s.running()) << s.Log();
  EXPECT_EQ(s.Ctl("backing_dev").out, data.File("wb.img") + "\n");
  const Shell put = Sh("nbdcopy '" + in + "' " + s.Uri());
  ASSERT_EQ(put.exit_code, 0) << put.out;
  const std::string sha = Sha256(in);

  const auto mm_before = Numbers(s.Ctl("mm_stat").out);
  ASSERT_EQ(mm_before.size(), 9u);
  ASSERT_EQ(s.Ctl("idle", "all").exit_code, 0);
  const Shell wb = s.Ctl("writeback", "idle");
  ASSERT_EQ(wb.exit_code, 0) << wb.out;

  const auto bd = Numbers(s.Ctl("bd_stat").out);
  ASSERT_EQ(bd.size(), 3u);
  // Every stored page but the same-filled ones (nbdcopy skips runs of
  // zeros, so those pages may not be stored at all).
  const std::uint64_t stored = mm_before[0] / 4096, same = mm_before[5];
  ASSERT_GT(stored - same, kSize / 4096 / 2);
  EXPECT_EQ(bd[0], stored - same);
  EXPECT_EQ(bd[1], 0u);
  EXPECT_EQ(bd[2], bd[0]);
  const auto mm_after = Numbers(s.Ctl("mm_stat").out);
  ASSERT_EQ(mm_after.size(), 9u);
  EXPECT_EQ(mm_after[0], mm_before[0]);       // orig_data_size unchanged
  EXPECT_EQ(mm_after[1], 0u);                 // compr_data_size
  EXPECT_LT(mm_after[2], mm_before[2] / 10);  // mem_used_total freed

  const std::string out = data.File("out.bin");
  const Shell get = Sh("nbdcopy " + s.Uri() + " '" + out + "'");
  ASSERT_EQ(get.exit_code, 0) << get.out;
  EXPECT_EQ(Sha256(out), sha);
  EXPECT_EQ(Numbers(s.Ctl("bd_stat").out)[1], bd[0]);  // every block read
  // No plaintext check here: without --backing-encrypt the file holds the
  // pages as they are, as zram's backing device does.
}

TEST(WritebackFlowTest, LimitWritesBackExactlyTheBudget) {
  if (!Have("fio")) GTEST_SKIP() << "fio is not installed";
  Server s({"--device", "zram0:64M"});
  ASSERT_TRUE(s.running()) << s.Log();
  // As in the series: a device configured through its attributes.
  const Shell add =
      Sh(std::string("'") + ZTIER_BIN + "' ctl --ctl " + s.Ctl() + " hot_add");
  ASSERT_EQ(add.exit_code, 0) << add.out;
  const std::string dev = "zram1";
  ASSERT_EQ(add.out, "1\n");
  ASSERT_EQ(s.Ctl("backing_dev", s.File("wb1.img"), dev).exit_code, 0);
  ASSERT_EQ(s.Ctl("disksize", "64M", dev).exit_code, 0);
  EXPECT_NE(s.Ctl("backing_dev", s.File("other.img"), dev).exit_code, 0);
  ASSERT_EQ(s.Ctl("writeback_limit_enable", "1", dev).exit_code, 0);
  ASSERT_EQ(s.Ctl("writeback_limit", "1002", dev).exit_code, 0);
  const Shell fio =
      Sh("fio --name=limit --ioengine=nbd --uri=" + s.Uri(dev) +
         " --rw=write --bs=4k --iodepth=16 --size=10M --refill_buffers"
         " --buffer_compress_percentage=50");
  ASSERT_EQ(fio.exit_code, 0) << fio.out;
  ASSERT_EQ(s.Ctl("idle", "all", dev).exit_code, 0);
  const Shell wb = s.Ctl("writeback", "idle", dev);
  EXPECT_NE(wb.exit_code, 0);  // zram's EIO once the budget is spent
  EXPECT_NE(wb.out.find("EIO"), std::string::npos) << wb.out;
  EXPECT_EQ(s.Ctl("bd_stat", "", dev).out, "    1002        0     1002\n");
  EXPECT_EQ(s.Ctl("writeback_limit", "", dev).out, "0\n");
  // zram0 has no backing device: ENODEV.
  const Shell none = s.Ctl("writeback", "idle");
  EXPECT_NE(none.out.find("ENODEV"), std::string::npos) << none.out;
}

// --backing-dev on a device started without a size (`--device zram0`) is
// kept until `ctl disksize` sizes it, as zram takes backing_dev before
// disksize; writeback then goes to that file.
TEST(WritebackFlowTest, BackingDevOfAnUnsizedDeviceAppliesAtDisksize) {
  if (!Have("nbdcopy")) GTEST_SKIP() << "nbdcopy is not installed";
  ScopedTempDir data;
  const std::string wb_file = data.File("wb.img");
  Server s({"--device", "zram0", "--backing-dev", wb_file});
  ASSERT_TRUE(s.running()) << s.Log();
  EXPECT_EQ(s.Ctl("backing_dev").out, wb_file + "\n");
  ASSERT_EQ(s.Ctl("disksize", "8M").exit_code, 0);
  const std::string in = data.File("in.txt");
  WriteMarkedPages(in, "ztier-unsized", 256);
  const Shell put = Sh("nbdcopy '" + in + "' " + s.Uri());
  ASSERT_EQ(put.exit_code, 0) << put.out;
  ASSERT_EQ(s.Ctl("idle", "all").exit_code, 0);
  const Shell wb = s.Ctl("writeback", "idle");
  ASSERT_EQ(wb.exit_code, 0) << wb.out;
  EXPECT_EQ(Numbers(s.Ctl("bd_stat").out)[0], 256u);
  struct stat st {};
  ASSERT_EQ(::stat(wb_file.c_str(), &st), 0);
  EXPECT_GE(static_cast<std::uint64_t>(st.st_size), 8u << 20);
}

// --backing-encrypt: no plaintext of a written-back page is in the file, and
// a flipped byte makes the read an IO error, never other data.
TEST(WritebackFlowTest, EncryptedBackingFileHoldsNoPlaintext) {
  if (!Have("nbdcopy")) GTEST_SKIP() << "nbdcopy is not installed";
  constexpr int kPages = 1024;
  ScopedTempDir data;
  const std::string in = data.File("in.bin");
  WriteMarkedPages(in, "ztier-secret", kPages);
  const std::string img = data.File("wb.img");
  Server s({"--device", "zram0:4M", "--backing-dev", img, "--backing-encrypt"});
  ASSERT_TRUE(s.running()) << s.Log();
  ASSERT_EQ(Sh("nbdcopy '" + in + "' " + s.Uri()).exit_code, 0);
  ASSERT_EQ(s.Ctl("writeback", "huge").exit_code, 0);  // nothing is huge
  EXPECT_EQ(Numbers(s.Ctl("bd_stat").out)[0], 0u);
  ASSERT_EQ(s.Ctl("idle", "all").exit_code, 0);
  ASSERT_EQ(s.Ctl("writeback", "idle").exit_code, 0);
  EXPECT_EQ(Numbers(s.Ctl("bd_stat").out)[0],
            static_cast<std::uint64_t>(kPages));
  EXPECT_EQ(Sh("grep -c ztier-secret '" + img + "'").out, "0\n");
  // Everything reads back while the file is intact.
  const std::string out = data.File("out.bin");
  ASSERT_EQ(Sh("nbdcopy " + s.Uri() + " '" + out + "'").exit_code, 0);
  EXPECT_EQ(Sha256(out), Sha256(in));
  // One flipped byte in block 7: that page's read fails. (Flipped, not
  // set: a byte written as 0xFF over ciphertext that held 0xFF, one run in
  // 256, would change nothing.)
  {
    const int fd = ::open(img.c_str(), O_RDWR);
    ASSERT_GE(fd, 0);
    unsigned char c = 0;
    ASSERT_EQ(::pread(fd, &c, 1, 7 * 4096 + 123), 1);
    c ^= 0xFF;
    ASSERT_EQ(::pwrite(fd, &c, 1, 7 * 4096 + 123), 1);
    ::close(fd);
  }
  const Shell bad = Sh("nbdcopy " + s.Uri() + " '" + out + "'");
  EXPECT_NE(bad.exit_code, 0) << bad.out;
  EXPECT_NE(bad.out.find("Input/output error"), std::string::npos) << bad.out;
  const auto io = Numbers(s.Ctl("io_stat").out);
  ASSERT_GE(io.size(), 1u);
  EXPECT_GE(io[0], 1u);  // failed_reads
}

// A remote backing_dev: nbdkit's file plugin on a Unix socket (another
// machine's export, as far as ztier knows). Encrypted writeback, read back
// whole; the remote's file holds no plaintext; the remote killed: reads of
// written-back pages fail, never other data.
TEST(WritebackFlowTest, RemoteNbdExportAsTheBackingDevice) {
  if (!Have("nbdcopy") || !Have("nbdkit")) GTEST_SKIP() << "nbdkit/nbdcopy";
  constexpr int kPages = 1024;
  ScopedTempDir data;
  const std::string in = data.File("in.bin");
  WriteMarkedPages(in, "ztier-remote", kPages);
  const std::string export_file = data.File("remote.img");
  const std::string sock = data.File("remote.sock");
  ASSERT_EQ(Sh("truncate -s 8M '" + export_file + "'").exit_code, 0);
  const std::string uri = "nbd+unix:///?socket=" + sock;
  std::string error;
  const pid_t remote = ztier::testing::SpawnNbdServer(
      {"nbdkit", "-f", "-U", sock, "file", export_file}, uri,
      data.File("remote.log"), &error);
  ASSERT_GT(remote, 0) << error;
  Server s({"--device", "zram0:4M", "--device", "zram1", "--backing-dev",
            uri, "--backing-encrypt", "--backing-connections", "2",
            "--backing-timeout", "2"});
  ASSERT_TRUE(s.running()) << s.Log();
  EXPECT_EQ(s.Ctl("backing_dev").out, uri + "\n");
  // `ztier ctl backing_dev URI` stores the URI as it is (a relative path
  // is made absolute where the caller is; a URI is no path).
  const Shell set = s.Ctl("backing_dev", uri, "zram1");
  EXPECT_EQ(set.exit_code, 0) << set.out << s.Log();
  EXPECT_EQ(s.Ctl("backing_dev", "", "zram1").out, uri + "\n");
  ASSERT_EQ(Sh("nbdcopy '" + in + "' " + s.Uri()).exit_code, 0);
  ASSERT_EQ(s.Ctl("idle", "all").exit_code, 0);
  const Shell wb = s.Ctl("writeback", "idle");
  ASSERT_EQ(wb.exit_code, 0) << wb.out << s.Log();
  EXPECT_EQ(Numbers(s.Ctl("bd_stat").out)[0],
            static_cast<std::uint64_t>(kPages));
  EXPECT_EQ(Sh("grep -c ztier-remote '" + export_file + "'").out, "0\n");
  const std::string out = data.File("out.bin");
  ASSERT_EQ(Sh("nbdcopy " + s.Uri() + " '" + out + "'").exit_code, 0);
  EXPECT_EQ(Sha256(out), Sha256(in));
  // The remote gone: an IO error, within the timeout, not data.
  ::kill(remote, SIGKILL);
  ::waitpid(remote, nullptr, 0);
  const Shell bad = Sh("timeout 60 nbdcopy " + s.Uri() + " '" + out + "'");
  EXPECT_NE(bad.exit_code, 0) << bad.out;
  EXPECT_NE(bad.out.find("Input/output error"), std::string::npos) << bad.out;
  EXPECT_EQ(s.Stop(), 0) << s.Log();
}

}  // namespace
