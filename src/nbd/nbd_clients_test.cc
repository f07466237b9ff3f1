// nbd_clients_test.cc: the NBD server (started in-process on a Unix socket)
// driven by real clients run as subprocesses: nbdinfo, nbdcopy, qemu-io, fio
// and libnbd's Python bindings. A test is skipped only when its client is
// missing.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <regex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "corpus/corpus.h"
#include "nbd/nbd_server.h"
#include "nbd_test_util.h"
#include "testing/test_util.h"

namespace ztier::nbd {
namespace {

using testing::HaveProgram;
using testing::RandomBytes;
using testing::RunCommand;
using testing::ServerFixture;

#define REQUIRE_PROGRAM(name)                              \
  if (!HaveProgram(name)) GTEST_SKIP() << name " is not installed"

std::string Quote(const std::string& s) { return "'" + s + "'"; }

TEST(NbdClientsTest, NbdinfoShowsSizeBlockSizeAndCapabilities) {
  REQUIRE_PROGRAM("nbdinfo");
  ServerFixture f(64 << 20);
  const auto r = RunCommand("nbdinfo --json " + Quote(f.Uri()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* want :
       {"\"export-size\": 67108864", "\"block_size_minimum\": 1",
        "\"block_size_preferred\": 4096", "\"block_size_maximum\": 33554432",
        "\"can_trim\": true", "\"can_zero\": true", "\"can_flush\": true",
        "\"can_multi_conn\": true", "\"can_fua\": true", "\"can_cache\": true",
        "\"can_fast_zero\": true", "\"is_read_only\": false"}) {
    EXPECT_NE(r.output.find(want), std::string::npos) << want << "\n"
                                                       << r.output;
  }
  const auto list = RunCommand("nbdinfo --list " + Quote(f.Uri()));
  EXPECT_EQ(list.exit_code, 0) << list.output;
  EXPECT_NE(list.output.find("zram0"), std::string::npos) << list.output;
}

// libnbd in option mode (its Python bindings, python3-libnbd, which the
// distribution installs for /usr/bin/python3), as its user sees a server
// that stops during the handshake: NBD_OPT_GO fails with ESHUTDOWN
// (NBD_REP_ERR_SHUTDOWN), and the stop ends with the client's
// NBD_OPT_ABORT, well within the grace.
TEST(NbdClientsTest, LibnbdSeesErrShutdownWhenTheServerStopsInItsHandshake) {
  const std::string python = "/usr/bin/python3";
  if (RunCommand(python + " -c 'import nbd'").exit_code != 0) {
    GTEST_SKIP() << "libnbd's Python bindings are not installed";
  }
  ServerFixture f(4 << 20);
  const std::string ready = f.tmp().File("ready");
  const std::string go = f.tmp().File("go");
  const std::string py = f.tmp().File("client.py");
  const std::string script =
      "import nbd, os, sys, time\n"
      "h = nbd.NBD()\n"
      "h.set_opt_mode(True)\n"
      "h.connect_uri(sys.argv[1])\n"
      "open(sys.argv[2], 'w').close()\n"
      "while not os.path.exists(sys.argv[3]): time.sleep(0.01)\n"
      "try:\n"
      "    h.opt_go()\n"
      "    print('go: connected')\n"
      "except nbd.Error as e:\n"
      "    print('go: errno', e.errno, e.string)\n"
      "h.opt_abort()\n";
  ASSERT_TRUE(testing::WriteFile(
      py, std::span(reinterpret_cast<const std::byte*>(script.data()),
                    script.size())));
  testing::CommandResult r;
  std::jthread client([&] {
    r = RunCommand(python + " " + Quote(py) + " " + Quote(f.Uri()) + " " +
                   Quote(ready) + " " + Quote(go));
  });
  const auto exists = [](const std::string& path) {
    return ::access(path.c_str(), F_OK) == 0;
  };
  for (int i = 0; i < 1000 && !exists(ready) && !exists(go); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const bool connected = exists(ready);
  const auto start = std::chrono::steady_clock::now();
  std::chrono::steady_clock::duration took{};
  std::jthread stop([&] {
    if (!connected) return;
    f.server().Stop();
    took = std::chrono::steady_clock::now() - start;
  });
  // The socket file goes once the stop has begun.
  for (int i = 0; connected && i < 500 && exists(f.socket()); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_FALSE(connected && exists(f.socket()));
  ASSERT_TRUE(testing::WriteFile(go, {}));  // the client goes on in any case
  client.join();
  stop.join();
  ASSERT_TRUE(connected) << r.output;
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("go: errno ESHUTDOWN"), std::string::npos) << r.output;
  EXPECT_LT(took, kStopGrace);
}

// Copies `file` into a fresh export of its size and back out with nbdcopy.
void CopyRoundTrip(ServerFixture& f, const std::string& name,
                   const std::string& file, std::uint64_t size) {
  auto dev = f.registry().Add(name);
  ASSERT_TRUE(dev.has_value());
  ASSERT_OK((*dev)->SetDisksize(size));
  const std::string uri = f.Uri(name);
  const auto in = RunCommand("nbdcopy " + Quote(file) + " " + Quote(uri));
  ASSERT_EQ(in.exit_code, 0) << in.output;
  const std::string out = file + ".out";
  const auto back = RunCommand("nbdcopy " + Quote(uri) + " " + Quote(out));
  ASSERT_EQ(back.exit_code, 0) << back.output;
  EXPECT_TRUE(testing::ReadFile(file) == testing::ReadFile(out))
      << name << ": data differs";
  std::remove(out.c_str());
}

TEST(NbdClientsTest, NbdcopyCorpusAndRandomDataRoundTrip) {
  REQUIRE_PROGRAM("nbdcopy");
  ServerFixture f(4 << 20);
  auto files = corpus::FindCorpusFiles(ztier::testing::CorpusDir());
  ASSERT_TRUE(files.has_value()) << files.error().ToString();
  int n = 0;
  for (const std::string& path : *files) {
    auto set = corpus::LoadPageSet(path);
    ASSERT_TRUE(set.has_value()) << set.error().ToString();
    const std::string tmp = f.tmp().File(set->name());
    ASSERT_TRUE(testing::WriteFile(tmp, set->bytes()));
    CopyRoundTrip(f, "corpus" + std::to_string(n++), tmp, set->bytes().size());
    std::remove(tmp.c_str());
  }
  const std::size_t random_size =
      testing::UnderSanitizer() ? (16 << 20) : (64 << 20);
  const std::string rnd = f.tmp().File("random.bin");
  ASSERT_TRUE(testing::WriteFile(rnd, RandomBytes(random_size, 42)));
  CopyRoundTrip(f, "random", rnd, random_size);
}

// Runs qemu-io with `commands` on the export; fails the test on a failed
// command or pattern check.
testing::CommandResult QemuIo(ServerFixture& f,
                              const std::vector<std::string>& commands) {
  std::string cmd = "qemu-io -f raw " + Quote(f.Uri());
  for (const std::string& c : commands) cmd += " -c " + Quote(c);
  auto r = RunCommand(cmd);
  EXPECT_EQ(r.exit_code, 0) << cmd << "\n" << r.output;
  EXPECT_EQ(r.output.find("Pattern verification failed"), std::string::npos)
      << cmd << "\n" << r.output;
  EXPECT_EQ(r.output.find("failed"), std::string::npos) << cmd << "\n"
                                                        << r.output;
  return r;
}

TEST(NbdClientsTest, QemuIoPatternsAtEdgesAndOddOffsets) {
  REQUIRE_PROGRAM("qemu-io");
  const std::uint64_t size = 16 << 20;
  ServerFixture f(size);
  struct Case {
    std::uint64_t offset, length;
  };
  const Case cases[] = {
      {0, 4096},          {0, 1},       {4095, 2},        {4090, 20},
      {12345, 6789},      {8191, 4097}, {65535, 131073},  // worker path
      {1048573, 300001},  {size - 1, 1}, {size - 4096, 4096},
      {size - 12345, 12345}};
  int pattern = 0x20;
  for (const Case& c : cases) {
    const std::string p = std::to_string(++pattern);
    const std::string o = std::to_string(c.offset);
    const std::string l = std::to_string(c.length);
    std::vector<std::string> cmds;
    // Background, then the window, then check the window and its neighbours.
    const std::uint64_t lo = c.offset >= 4096 ? c.offset - 4096 : 0;
    const std::uint64_t hi = std::min(size, c.offset + c.length + 4096);
    cmds.push_back("write -P 0x11 " + std::to_string(lo) + " " +
                   std::to_string(hi - lo));
    cmds.push_back("write -P " + p + " " + o + " " + l);
    cmds.push_back("read -P " + p + " " + o + " " + l);
    if (c.offset > 0) {
      cmds.push_back("read -P 0x11 " + std::to_string(lo) + " " +
                     std::to_string(c.offset - lo));
    }
    if (c.offset + c.length < size) {
      cmds.push_back("read -P 0x11 " + std::to_string(c.offset + c.length) +
                     " " + std::to_string(hi - c.offset - c.length));
    }
    QemuIo(f, cmds);
  }
  // Past the end fails cleanly.
  const auto r = RunCommand("qemu-io -f raw " + Quote(f.Uri()) + " -c " +
                     Quote("read " + std::to_string(size - 1) + " 2"));
  EXPECT_NE(r.output.find("failed"), std::string::npos) << r.output;
}

TEST(NbdClientsTest, FioRandomWriteVerify) {
  REQUIRE_PROGRAM("fio");
  const bool small = testing::UnderSanitizer();
  const std::uint64_t per_job = small ? (2 << 20) : (16 << 20);
  ServerFixture f(4 * per_job);
  const std::string cmd =
      "fio --name=ztier --ioengine=nbd --uri=" + Quote(f.Uri()) +
      " --rw=randwrite --bs=4k --iodepth=32 --numjobs=4 --verify=crc32c"
      " --size=" + std::to_string(per_job) +
      " --offset_increment=" + std::to_string(per_job) +
      " --group_reporting --verify_state_save=0";
  const auto r = RunCommand(cmd);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  for (const char* bad : {"verify:", "verify failed", "mismatch", "bad magic"}) {
    EXPECT_EQ(r.output.find(bad), std::string::npos) << r.output;
  }
  EXPECT_NE(r.output.find("err= 0"), std::string::npos) << r.output;
}

TEST(NbdClientsTest, TrimFreesPagesAndWriteZeroesStoresNoPoolMemory) {
  REQUIRE_PROGRAM("qemu-io");
  ServerFixture f(16 << 20);
  const std::string rnd = f.tmp().File("rnd");
  ASSERT_TRUE(testing::WriteFile(rnd, RandomBytes(1 << 20, 5)));
  QemuIo(f, {"write -s " + rnd + " 0 1M"});
  const auto s0 = f.device().Stats();
  EXPECT_EQ(s0.orig_data_size, 1u << 20);
  // An aligned discard of 64 pages.
  QemuIo(f, {"discard 64k 256k"});
  const auto s1 = f.device().Stats();
  EXPECT_EQ(s0.orig_data_size - s1.orig_data_size, 64u * 4096);
  EXPECT_LT(s1.compr_data_size, s0.compr_data_size);
  // An unaligned one frees only the whole pages inside: [1M-..] 512k+100,
  // 40960 bytes covers pages 129..137 (9 pages).
  QemuIo(f, {"discard 528484 40960"});
  const auto s2 = f.device().Stats();
  EXPECT_EQ(s1.orig_data_size - s2.orig_data_size, 9u * 4096);
  QemuIo(f, {"read -P 0 64k 256k"});

  // WRITE_ZEROES (NO_HOLE) over never-written space: zero pages are
  // recorded as same-filled, with no pool memory.
  QemuIo(f, {"write -z 4M 1M", "read -P 0 4M 1M"});
  const auto s3 = f.device().Stats();
  EXPECT_EQ(s3.compr_data_size, s2.compr_data_size);
  EXPECT_EQ(s3.orig_data_size - s2.orig_data_size, 1u << 20);
  // Over random data: the pool memory of those pages goes away.
  QemuIo(f, {"write -s " + rnd + " 8M 1M"});
  const auto s4 = f.device().Stats();
  EXPECT_GT(s4.compr_data_size, s3.compr_data_size);
  QemuIo(f, {"write -z 8M 1M", "read -P 0 8M 1M"});
  const auto s5 = f.device().Stats();
  EXPECT_EQ(s5.compr_data_size, s3.compr_data_size);
  // With unmap allowed (no NO_HOLE), the pages are discarded instead.
  QemuIo(f, {"write -z -u 8M 1M", "read -P 0 8M 1M"});
  const auto s6 = f.device().Stats();
  EXPECT_EQ(s5.orig_data_size - s6.orig_data_size, 1u << 20);
  // Unaligned zeroing of a partial page keeps its neighbours.
  QemuIo(f, {"write -P 0x33 12M 8k", "write -z 12583012 5000",
             "read -P 0x33 12M 100", "read -P 0 12583012 5000",
             "read -P 0x33 12588012 3092"});
}

TEST(NbdClientsTest, MemLimitGivesEnospcAndTrimRecovers) {
  REQUIRE_PROGRAM("qemu-io");
  ServerFixture f(16 << 20);
  ASSERT_OK(f.device().SetMemLimit(2 << 20));
  const std::size_t chunk = 256 << 10;
  std::vector<std::byte> all = RandomBytes(16 << 20, 9);
  const std::string rnd = f.tmp().File("rnd");
  ASSERT_TRUE(testing::WriteFile(rnd, all));
  // Incompressible chunks until one fails: one qemu-io per chunk, so that
  // each file offset matches the export offset (-s reads from offset 0).
  std::vector<std::uint64_t> written;
  bool enospc = false;
  for (std::uint64_t off = 0; off < (16u << 20) && !enospc; off += chunk) {
    const std::string piece = f.tmp().File("piece");
    ASSERT_TRUE(testing::WriteFile(
        piece, std::span<const std::byte>(all).subspan(off, chunk)));
    const auto r = RunCommand("qemu-io -f raw " + Quote(f.Uri()) + " -c " +
                       Quote("write -s " + piece + " " + std::to_string(off) +
                             " " + std::to_string(chunk)));
    if (r.output.find("No space left on device") != std::string::npos) {
      enospc = true;
    } else {
      ASSERT_EQ(r.exit_code, 0) << r.output;
      written.push_back(off);
    }
  }
  ASSERT_TRUE(enospc) << "no write failed with ENOSPC";
  ASSERT_FALSE(written.empty());
  // What was written before reads back intact.
  testing::RawClient c(f.socket());
  ASSERT_GT(c.Go("zram0"), 0);
  for (std::uint64_t off : written) {
    std::vector<std::byte> back;
    std::uint32_t err = 1;
    ASSERT_TRUE(c.Read(off, chunk, &back, &err));
    ASSERT_EQ(err, 0u);
    EXPECT_TRUE(std::equal(back.begin(), back.end(), all.begin() + off))
        << "chunk at " << off;
  }
  c.Close();
  // After a discard, writes succeed again.
  QemuIo(f, {"discard 0 16M"});
  QemuIo(f, {"write -s " + rnd + " 0 256k"});
}

}  // namespace
}  // namespace ztier::nbd
