// File: tools/ztier/bench_recompress.h
//
// `ztier bench recompress`: what idle recompression with a secondary codec
// saves, and how fast it runs, on page corpora (zram's recompression,
// Documentation/admin-guide/blockdev/zram.rst, "recompression").
//
//   ztier bench recompress [--corpus FILE]... [--corpus-dir DIR]
//                          [--codec NAME] [--secondary NAME] [--size SIZE]
//                          [--runs N] [--zram-sys DIR] [--json FILE]
//                          [--plot DIR]
//
// For each corpus, RunVariants (bench_harness.h) alternates three variants
// per run: "serial" and "parallel" (bench_recompress_run.h's
// MeasureRecompress with that batch backend: a --codec store, every slot
// idle, recompressed with --secondary) and "direct" (the same pages stored
// with --secondary directly). One Report (bench_report.h; stdout, --json
// FILE, --plot DIR) holds the tables "memory" (mem_used_total before and
// after the pass, after Compact() and direct, the ratio after/direct and
// its target 1.03),
// "slots" (candidates, recompressed, incompressible, huge pages, per
// backend), "throughput" (MB/s of original pages examined and pages/s per
// backend) and "targets" (after/direct and compacted/direct <= 1.03,
// parallel/serial MB/s >= 1.6); and the chart recompress-memory (bars per
// corpus: before, after, compacted, direct). A line says whether the kernel's
// zram could be compared (bench_recompress_kernel.h): it cannot without
// CONFIG_ZRAM_MULTI_COMP, and the kernel path is not implemented.
//
// Exit status: 0 done; 1 a runtime failure (no or unreadable corpus, a
// store, recompression or load error, a page read back wrong, a chart not
// drawn); 2 bad usage.
#ifndef ZTIER_TOOLS_ZTIER_BENCH_RECOMPRESS_H_
#define ZTIER_TOOLS_ZTIER_BENCH_RECOMPRESS_H_

#include <span>
#include <string_view>

namespace ztier::tool {

// Runs the command; `args` are the words after `recompress`. Returns the
// exit status.
int RunBenchRecompress(std::span<const std::string_view> args);

}  // namespace ztier::tool

#endif  // ZTIER_TOOLS_ZTIER_BENCH_RECOMPRESS_H_
