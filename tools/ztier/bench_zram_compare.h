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
// Codecs come in pairs, a kernel codec and the ztier codec it is compared
// with: lz4/lz4, lzo-rle/lzo, lzo/lzo (ztier's lzo is LZO1X-1, the
// kernel's lzo; lzo-rle adds run-length coding of zero runs, which ztier
// does not have). --codec names the kernel codecs (default all three).
//
// Part (a), memory: each corpus (*.pages.zst in --corpus-dir, the first
// --corpus-pages pages of each) is written to a fresh kernel device of its
// size and to a fresh ztier PageStore, per codec pair; mm_stat's orig,
// compr and mem_used_total (and same and huge pages) are compared, and both
// are read back and checked.
//
// Part (b), throughput: six fio-style jobs (4 KiB random read and write at
// QD1 and QD32, 128 KiB sequential read and write at QD8; reads first), each
// on one thread and on --threads threads (default: all cores), each thread
// on its own share of a --size area, on five paths, alternating in this
// order for every job:
//   kernel-io_uring  this tool's io_uring driver on the kernel device
//                    (O_DIRECT), writing corpus pages
//   ztier-lib        this tool's driver calling a ztier Device (the
//                    library path): the same blocks, the same data
//   kernel-psync     this tool's driver on the kernel device with pread and
//                    pwrite (O_DIRECT) instead of io_uring: the same blocks
//                    and data, each IO done in the calling thread as a
//                    library call is (io_uring hands zram's IOs to its
//                    io-wq worker threads, as zram cannot take them
//                    without blocking)
//   kernel-fio       fio --ioengine=io_uring --direct=1 on the kernel device
//   ztier-nbd        fio's nbd engine on `ztier serve` (the NBD path)
// Every device is fresh per codec pair and run and filled with the corpus
// pages first (untimed; read back in part and checked). fio writes its own
// half-compressible buffers (it cannot write corpus data), so fio's write
// rows compare fio's data on both sides; the driver rows compare corpus
// data. bench_zram_compare_io.h has how queue depth maps to a library call.
//
// Through RunVariants (bench_harness.h): variant "mm_stat" is part (a),
// one variant per codec pair is part (b); one warm-up run comes first and
// is not counted, and the variants alternate their order run by run.
// Figures: median, min, max and CV over the runs, and ratios ztier/kernel
// taken within each run. The output is one Report (bench_report.h): the
// machine line, the exact configuration, the mm_stat table, the three IO
// tables (ztier-lib against kernel-io_uring and against kernel-psync,
// ztier-nbd against kernel-fio) and a check of the io_uring driver against
// fio; --json FILE writes it in the Report schema.
//
// The kernel device: if it is missing, or busy (initialised by someone
// else, mounted, swapped on, or held open), the command says so on stderr
// and in its output, and measures ztier alone; it never touches a device in
// use. A device it uses is reset before and after every use, and at the end.
// Missing fio skips kernel-fio and ztier-nbd; missing nbdcopy, ztier-nbd.
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
