// File: tools/ztier/bench_recompress.h
//
// `ztier bench recompress`: what idle recompression with a secondary codec
// saves, and how fast it runs, on page corpora (zram's recompression,
// Documentation/admin-guide/blockdev/zram.rst, "recompression"). Flags:
// ztier(8), `ztier bench recompress`, and --help.
//
// For each corpus, RunVariants (bench_harness.h) alternates three variants
// per run: "serial" and "parallel" (a --codec store with that batch
// backend, every slot marked idle and recompressed with --secondary) and
// "direct" (the same pages stored with --secondary directly). One Report
// (bench_report.h) holds the tables "memory" (mem_used_total before and
// after the pass, after Compact() and direct, after/direct against its
// target 1.03), "slots" (candidates, recompressed, incompressible, huge
// pages, per backend), "throughput" (MB/s of original pages examined and
// pages/s per backend) and "targets" (after/direct and compacted/direct
// <= 1.03, parallel/serial MB/s >= 1.6); and the chart recompress-memory
// (bars per corpus: before, after, compacted, direct). A line says whether
// the kernel's zram could be compared (ProbeKernelRecomp below); the
// kernel path is not implemented.
//
// Exit status: 0 done; 1 a runtime failure (no or unreadable corpus, a
// store, recompression or load error, a page read back wrong, a chart not
// drawn); 2 bad usage.
#ifndef ZTIER_TOOLS_ZTIER_BENCH_RECOMPRESS_H_
#define ZTIER_TOOLS_ZTIER_BENCH_RECOMPRESS_H_

#include <span>
#include <string>
#include <string_view>

namespace ztier::tool {

// Runs the command; `args` are the words after `recompress`. Returns the
// exit status.
int RunBenchRecompress(std::span<const std::string_view> args);

// Whether the kernel's zram could be compared: it recompresses only when
// built with CONFIG_ZRAM_MULTI_COMP, and then a zram device's sysfs folder
// has the recomp_algorithm file.
struct KernelRecompProbe {
  bool has_multi_comp = false;  // SYS/recomp_algorithm exists
  std::string line;             // "kernel: ...", without a trailing newline
};

// Probes the zram device whose sysfs folder is `sys_dir` (e.g.
// /sys/block/zram0); reads the file system only. The line is one of:
//   "kernel: not compared: SYS does not exist (no zram device here)"
//   "kernel: not compared: SYS/recomp_algorithm does not exist: the
//    running kernel (RELEASE) was built without CONFIG_ZRAM_MULTI_COMP,
//    so its zram cannot recompress"
//   "kernel: SYS/recomp_algorithm exists (CONFIG_ZRAM_MULTI_COMP), but
//    this experiment's kernel path is not implemented: no kernel figures"
KernelRecompProbe ProbeKernelRecomp(const std::string& sys_dir);

}  // namespace ztier::tool

#endif  // ZTIER_TOOLS_ZTIER_BENCH_RECOMPRESS_H_
