// File: tools/ztier/bench_zram_compare.h
//
// `ztier bench zram-compare`: the kernel's own zram on this machine
// (/dev/zram0) against ztier, on the same data and the same access
// patterns, in one run.
//
//   ztier bench zram-compare [--runs N] [--seconds S] [--size SIZE]
//       [--codec NAME]... [--jobs NAME]... [--paths NAME]... [--threads N]
//       [--corpus-dir DIR] [--corpus-pages N] [--zram-dev PATH]
//       [--json FILE]
//
// Codec pairs (--codec names the kernel's; default all three): lz4/lz4,
// lzo-rle/lzo, lzo/lzo (ztier's lzo is the kernel's LZO1X-1; ztier has no
// run-length variant).
//
// Part (a), memory: each corpus of --corpus-dir (its first --corpus-pages
// pages) on a fresh kernel device of its size and in a fresh ztier
// PageStore, per pair: mm_stat's compr, mem_used_total, same and huge
// pages, both read back and checked.
//
// Part (b), throughput: fio-style jobs (4 KiB random read and write at QD1
// and QD32, 128 KiB sequential at QD8; reads first) on one thread and on
// --threads, each thread on its own share of a --size area, on five paths
// alternating in this order for every job: kernel-io_uring and
// kernel-psync (this tool's drivers on the kernel device, O_DIRECT,
// io_uring or pread/pwrite), ztier-lib (the same driver calling a ztier
// Device: the same blocks and corpus data), kernel-fio (fio io_uring on the
// kernel device) and ztier-nbd (fio's nbd engine on `ztier serve`; fio
// writes its own buffers on both sides). Devices are fresh per pair and run,
// filled with the corpus pages (untimed, checked).
//
// Through RunVariants (bench_harness.h): variant "mm_stat" is part (a),
// one variant per codec pair part (b), after one warm-up run. The output is
// one Report (bench_report.h): the configuration, the mm_stat table, the
// IO tables (ztier-lib against kernel-io_uring and kernel-psync, ztier-nbd
// against kernel-fio; ratios within each run) and the io_uring driver
// against fio; --json FILE writes it.
//
// A missing or busy kernel device (initialised, or held open) is left
// alone, said on stderr and in the output, and ztier measured alone; one it
// uses is reset before and after every use. Missing fio skips kernel-fio
// and ztier-nbd; missing nbdcopy, ztier-nbd.
//
// Exit status: 0 done (also with the kernel side or a path skipped); 1 a
// runtime failure (no corpus, a failing IO, a page that reads back wrong, a
// server that does not start); 2 bad usage.
#ifndef ZTIER_TOOLS_ZTIER_BENCH_ZRAM_COMPARE_H_
#define ZTIER_TOOLS_ZTIER_BENCH_ZRAM_COMPARE_H_

#include <span>
#include <string_view>

namespace ztier::tool {

// Runs the command; `args` are the words after `zram-compare`. Returns the
// exit status.
int RunBenchZramCompare(std::span<const std::string_view> args);

}  // namespace ztier::tool

#endif  // ZTIER_TOOLS_ZTIER_BENCH_ZRAM_COMPARE_H_
