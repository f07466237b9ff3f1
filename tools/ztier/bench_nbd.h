// File: tools/ztier/bench_nbd.h
//
// `ztier bench nbd`: `ztier serve` against nbdkit's memory plugin, measured
// from the outside with fio (libnbd engine) and nbdcopy, over NBD on Unix
// sockets. One variant per server (bench_harness.h), run one at a time in
// an order reversed every other run, no warm-up run (each run starts every
// server afresh): ztier-CODEC per --codec (`ztier serve --device
// zram0:SIZE --comp-algorithm CODEC`, this binary), nbdkit (`nbdkit memory
// SIZE`, sparse) and nbdkit-zstd (`... allocator=zstd`), each in a private
// temporary folder, stopped with SIGTERM.
//
// fio (bench_fio.h): a fresh server with a SIZE export; an untimed 128 KiB
// sequential write fills its first min(SIZE, 256 MiB), the area; then each
// job runs S seconds on the area: 4k randwrite and randread at QD1 and
// QD32, 128k sequential write and read at QD8. So writes overwrite and
// reads read written data.
//
// nbdcopy: for each corpus (*.pages.zst in --corpus-dir, decompressed), a
// fresh server with an export of its size; the file is copied in and out,
// compared (a mismatch is fatal), and the memory holding it read: ztier's
// mem_used_total (mm_stat column 3, over the control socket), nbdkit's
// VmRSS growth over the copy-in (ztier's shown too). MB/s is the size over
// the wall time of the nbdcopy process.
//
// Output: bench_nbd_report.h (text on stdout, --json, --plot). Missing
// tools are skipped with a note: no fio, no fio part; no nbdcopy, no
// copies; no nbdkit (or --no-nbdkit), ztier alone and no ratios.
//
// Exit status: 0 done (also when a missing tool skipped a part); 1 a
// runtime failure (no corpus, a server that does not start, fio or nbdcopy
// failing, a copy that reads back wrong); 2 bad usage.
#ifndef ZTIER_TOOLS_ZTIER_BENCH_NBD_H_
#define ZTIER_TOOLS_ZTIER_BENCH_NBD_H_

#include <span>
#include <string_view>

namespace ztier::tool {

// Runs the command on the words after `nbd`; returns the exit status.
int RunBenchNbd(std::span<const std::string_view> args);

}  // namespace ztier::tool

#endif  // ZTIER_TOOLS_ZTIER_BENCH_NBD_H_
