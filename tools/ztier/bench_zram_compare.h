// File: tools/ztier/bench_zram_compare.h
//
// `ztier bench zram-compare`: the kernel's own zram on this machine
// (/dev/zram0) against ztier, on the same data and the same access
// patterns, in one run: (a) mm_stat after writing each corpus, (b)
// fio-style jobs on the paths kernel-io_uring, ztier-lib, kernel-psync,
// kernel-fio and ztier-nbd. ztier(8) `ztier bench zram-compare` lists the
// flags; docs/benchmarks.md describes the runs and the tables.
//
// A missing or busy kernel device is left alone, said on stderr and in the
// output, and ztier measured alone; one it uses is reset after every use.
// Missing fio skips kernel-fio and ztier-nbd; missing nbdcopy, ztier-nbd.
//
// Exit status: 0 done (also with a side or a path skipped); 1 a runtime
// failure; 2 bad usage.
#ifndef ZTIER_TOOLS_ZTIER_BENCH_ZRAM_COMPARE_H_
#define ZTIER_TOOLS_ZTIER_BENCH_ZRAM_COMPARE_H_

#include <span>
#include <string_view>

namespace ztier::tool {

// `args`: the words after `zram-compare`.
int RunBenchZramCompare(std::span<const std::string_view> args);

}  // namespace ztier::tool

#endif  // ZTIER_TOOLS_ZTIER_BENCH_ZRAM_COMPARE_H_
