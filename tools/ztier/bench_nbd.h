// File: tools/ztier/bench_nbd.h
//
// `ztier bench nbd`: `ztier serve` against nbdkit's memory plugin, measured
// from the outside with fio (libnbd engine) and nbdcopy over NBD on Unix
// sockets. A variant per server (bench_harness.h), one at a time, the order
// reversed every other run, no warm-up run (each run starts every server
// afresh, in a private temporary folder): ztier-CODEC per --codec (`ztier
// serve --device zram0:SIZE --comp-algorithm CODEC`), nbdkit (`nbdkit
// memory SIZE`) and nbdkit-zstd (`... allocator=zstd`).
//
// fio (bench_fio.h): an untimed 128 KiB sequential write fills the first
// min(SIZE, 256 MiB), the area; then each job runs S seconds on it (4k
// randwrite and randread at QD1 and QD32, 128k write and read at QD8), so
// writes overwrite and reads read written data. nbdcopy: each corpus
// (*.pages.zst in --corpus-dir) is copied in and out of an export of its
// size and compared (a mismatch is fatal); the memory holding it is ztier's
// mem_used_total (mm_stat column 3, over the control socket) and nbdkit's
// VmRSS growth over the copy-in. MB/s is over nbdcopy's wall time.
//
// Output: bench_nbd_report.h. A missing tool skips its part with a note:
// fio, the fio part; nbdcopy, the copies; nbdkit (or --no-nbdkit), the
// peers and ratios. Exit status: 0 done (also when a part was skipped); 1 a
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
