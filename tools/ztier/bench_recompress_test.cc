// File: tools/ztier/bench_recompress_test.cc
//
// `ztier bench recompress`: the kernel probe (bench_recompress_kernel.h) on
// fake sysfs folders, with and without recomp_algorithm.
#include <fstream>
#include <string>

#include "bench_recompress_kernel.h"
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
  ExpectIn(k.line, dir.File("recomp_algorithm") +
                       " exists (CONFIG_ZRAM_MULTI_COMP)");
  ExpectIn(k.line, "kernel path is not implemented");
}

}  // namespace
}  // namespace ztier::tool
