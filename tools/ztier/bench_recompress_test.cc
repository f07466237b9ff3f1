// File: tools/ztier/bench_recompress_test.cc
//
// `ztier bench recompress`: the kernel probe (ProbeKernelRecomp,
// bench_recompress.h) on fake sysfs folders, with and without
// recomp_algorithm; and the built binary (ZTIER_BIN) on the checkout's
// corpora with tiny settings: its tables and JSON, the pass making the
// store smaller, and bad usage.
#include "bench_recompress.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "testing/test_util.h"

namespace ztier::tool {
namespace {

using ztier::testing::ScopedTempDir;

void ExpectIn(const std::string& text, const std::string& want) {
  EXPECT_NE(text.find(want), std::string::npos) << want << " in\n" << text;
}

TEST(KernelRecompProbeTest, MissingDeviceFolderIsNotCompared) {
  ScopedTempDir dir;
  const KernelRecompProbe k = ProbeKernelRecomp(dir.File("zram9"));
  EXPECT_FALSE(k.has_multi_comp);
  ExpectIn(k.line, "kernel: not compared: " + dir.File("zram9") +
                       " does not exist (no zram device here)");
}

TEST(KernelRecompProbeTest, NoRecompAlgorithmMeansNoMultiComp) {
  ScopedTempDir dir;
  std::ofstream(dir.File("comp_algorithm")) << "lzo-rle lzo [lz4]\n";
  const KernelRecompProbe k = ProbeKernelRecomp(dir.path());
  EXPECT_FALSE(k.has_multi_comp);
  ExpectIn(k.line, "kernel: not compared: " + dir.File("recomp_algorithm") +
                       " does not exist: the running kernel (");
  ExpectIn(k.line, "built without CONFIG_ZRAM_MULTI_COMP");
}

TEST(KernelRecompProbeTest, RecompAlgorithmPresentSaysNotImplemented) {
  ScopedTempDir dir;
  std::ofstream(dir.File("recomp_algorithm")) << "";
  const KernelRecompProbe k = ProbeKernelRecomp(dir.path());
  EXPECT_TRUE(k.has_multi_comp);
  ExpectIn(k.line,
           dir.File("recomp_algorithm") + " exists (CONFIG_ZRAM_MULTI_COMP)");
  ExpectIn(k.line, "kernel path is not implemented");
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The numbers of every "KEY": NUMBER member of `json`, in order.
std::vector<double> Members(const std::string& json, const std::string& key) {
  std::vector<double> out;
  const std::string want = "\"" + key + "\": ";
  for (std::size_t at = json.find(want); at != std::string::npos;
       at = json.find(want, at + 1)) {
    const char* begin = json.c_str() + at + want.size();
    char* end = nullptr;
    const double v = std::strtod(begin, &end);
    if (end != begin) out.push_back(v);
  }
  return out;
}

// Runs the binary in a fresh folder: its exit status, its stdout and
// stderr together, and the JSON it wrote to out.json (if asked to).
class RecompressCliTest : public ::testing::Test {
 protected:
  int Run(const std::string& args) {
    const ztier::testing::Shell r = ztier::testing::Sh(
        "cd '" + dir_.path() + "' && '" ZTIER_BIN "' bench recompress " + args);
    out_ = r.out;
    json_ = ReadText(dir_.File("out.json"));
    return r.exit_code;
  }

  ScopedTempDir dir_;
  std::string out_, json_;
};

TEST_F(RecompressCliTest, EveryCorpusGetsItsFiguresAndTheStoreShrinks) {
  std::filesystem::create_directory(dir_.File("zram9"));
  ASSERT_EQ(Run("--corpus-dir '" + ztier::testing::CorpusDir() +
                "' --size 256K --runs 1 --zram-sys zram9 --json out.json"),
            0)
      << out_;
  for (const char* want :
       {"machine: ", "config: codec=lz4 secondary=zstd", "slots=64",
        "kernel: not compared: zram9/recomp_algorithm does not exist",
        "CONFIG_ZRAM_MULTI_COMP", "== mem_used_total, MiB: lz4 store",
        "== slots of the first measured run", "== recompression throughput",
        "== targets", "anon-cc1plus.pages", "anon-python.pages",
        "files-mixed.pages", "mem_used_total after / direct",
        "parallel / serial MB/s", "<= 1.03", ">= 1.6"}) {
    ExpectIn(out_, want);
  }
  for (const char* want :
       {"\"benchmark\": \"ztier bench recompress\"", "\"machine\"",
        "\"conditions\"", "\"secondary\": \"zstd\"", "\"memory\": [",
        "\"slots\": [", "\"throughput\": [", "\"targets\": [",
        "\"backend\": \"serial\"", "\"backend\": \"parallel\"",
        "\"store\": \"direct\"", "\"mb_s_median\"", "\"mb_s_cv\"",
        "\"pages_s_median\"", "\"value_median\""}) {
    ExpectIn(json_, want);
  }
  EXPECT_EQ(json_.find("null"), std::string::npos) << json_;
  EXPECT_EQ(json_.find("nan"), std::string::npos) << json_;
  // The memory table has a row per corpus, the slots table one per corpus
  // and pass (serial, parallel; the direct rows have none of these keys).
  std::map<std::string, std::vector<double>> f;
  for (const char* key :
       {"before_mib_median", "after_mib_median", "compacted_mib_median",
        "direct_mib_median", "after_direct_median"}) {
    f[key] = Members(json_, key);
    ASSERT_EQ(f[key].size(), 3u) << key << " in\n" << json_;
  }
  for (const char* key : {"candidates", "attempted", "recompressed",
                          "incompressible", "at_priority_1"}) {
    f[key] = Members(json_, key);
    ASSERT_EQ(f[key].size(), 6u) << key << " in\n" << json_;
  }
  for (std::size_t i = 0; i < 3; ++i) {
    // Recompressed and compacted, the store is smaller; compaction only
    // gives back pool pages; zstd directly is smaller than lz4 too.
    EXPECT_LT(f["compacted_mib_median"][i], f["before_mib_median"][i]) << out_;
    EXPECT_LE(f["compacted_mib_median"][i], f["after_mib_median"][i]) << out_;
    EXPECT_LT(f["direct_mib_median"][i], f["before_mib_median"][i]) << out_;
    EXPECT_GT(f["after_direct_median"][i], 0) << out_;
  }
  // anon-python (the second corpus by name) is smaller even before the
  // compaction; files-mixed, on so few slots, is not: the new objects take
  // fresh pool pages while the old ones leave theirs partly used.
  EXPECT_LT(f["after_mib_median"][1], f["before_mib_median"][1]) << out_;
  for (std::size_t i = 0; i < 6; ++i) {
    // Every idle slot was picked and tried; the winners are at priority 1.
    EXPECT_GT(f["candidates"][i], 0) << out_;
    EXPECT_EQ(f["attempted"][i], f["candidates"][i]) << out_;
    EXPECT_GT(f["recompressed"][i], 0) << out_;
    EXPECT_EQ(f["at_priority_1"][i], f["recompressed"][i]) << out_;
    EXPECT_LE(f["recompressed"][i] + f["incompressible"][i], f["attempted"][i])
        << out_;
    // Both backends leave the same store (rows serial, parallel).
    const std::size_t serial = i & ~std::size_t{1};
    EXPECT_EQ(f["recompressed"][i], f["recompressed"][serial]) << out_;
    EXPECT_EQ(f["incompressible"][i], f["incompressible"][serial]) << out_;
  }
}

TEST_F(RecompressCliTest, DrawsTheMemoryChart) {
  if (!ztier::testing::Have("gnuplot")) GTEST_SKIP() << "no gnuplot";
  ASSERT_EQ(Run("--corpus '" + ztier::testing::CorpusDir() +
                "/anon-python.pages.zst' --size 64K --runs 1 --plot charts"),
            0)
      << out_;
  EXPECT_TRUE(
      std::filesystem::exists(dir_.File("charts/recompress-memory.png")));
  ExpectIn(out_, "wrote charts/recompress-memory.png");
}

TEST_F(RecompressCliTest, BadUsageIsExitStatus2) {
  EXPECT_EQ(Run("--secondary nope"), 2);
  ExpectIn(out_, "unknown secondary codec 'nope'");
  EXPECT_EQ(Run("--codec nope"), 2);
  ExpectIn(out_, "unknown codec 'nope'");
  EXPECT_EQ(Run("--size 4K"), 2);
  ExpectIn(out_, "--size 4K");
  EXPECT_EQ(Run("--runs 0"), 2);
  EXPECT_EQ(Run("--corpus missing.pages.zst"), 1);
  ExpectIn(out_, "missing.pages.zst");
}

}  // namespace
}  // namespace ztier::tool
