// File: tools/ztier/bench_recompress_kernel.h
//
// Whether `ztier bench recompress` can compare with the kernel's zram
// recompression on this machine. The kernel recompresses only when built
// with CONFIG_ZRAM_MULTI_COMP, and then a zram device's sysfs folder has
// the recomp_algorithm and recompress files
// (Documentation/admin-guide/blockdev/zram.rst, "recompression"). The probe
// looks for recomp_algorithm in the device's folder at run time and words
// what it found as one line of the report.
//
//   KernelRecompProbe k = ProbeKernelRecomp("/sys/block/zram0");
//   report.Line(k.line);   // "kernel: not compared: ..."
//
// The kernel path itself is not implemented: where the file exists the
// line says so, and no kernel figure is reported.
//
// Thread safety: a plain function; reads the file system only.
#ifndef ZTIER_TOOLS_ZTIER_BENCH_RECOMPRESS_KERNEL_H_
#define ZTIER_TOOLS_ZTIER_BENCH_RECOMPRESS_KERNEL_H_

#include <string>

namespace ztier::tool {

struct KernelRecompProbe {
  bool has_multi_comp = false;  // SYS/recomp_algorithm exists
  std::string line;             // "kernel: ...", without a trailing newline
};

// Probes the zram device whose sysfs folder is `sys_dir` (e.g.
// /sys/block/zram0). The line is one of:
//   "kernel: not compared: SYS does not exist (no zram device here)"
//   "kernel: not compared: SYS/recomp_algorithm does not exist: the
//    running kernel (RELEASE) was built without CONFIG_ZRAM_MULTI_COMP,
//    so its zram cannot recompress"
//   "kernel: SYS/recomp_algorithm exists (CONFIG_ZRAM_MULTI_COMP), but
//    this experiment's kernel path is not implemented: no kernel figures"
KernelRecompProbe ProbeKernelRecomp(const std::string& sys_dir);

}  // namespace ztier::tool

#endif  // ZTIER_TOOLS_ZTIER_BENCH_RECOMPRESS_KERNEL_H_
