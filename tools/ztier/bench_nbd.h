// File: tools/ztier/bench_nbd.h
//
// `ztier bench nbd`: `ztier serve` against nbdkit's memory plugin, measured
// from the outside with fio (libnbd engine) and nbdcopy, over NBD on Unix
// sockets.
//
//   ztier bench nbd [--runs N] [--seconds S] [--size SIZE] [--codec NAME]...
//                   [--corpus-dir DIR] [--no-nbdkit] [--json FILE] [--plot DIR]
//
// Servers (one variant per --codec for ztier), each started fresh in every
// run, in a private temporary folder, on a Unix socket, and stopped with
// SIGTERM:
//   ztier-CODEC  `ztier serve --device zram0:SIZE --comp-algorithm CODEC
//                 --unix S --ctl C` (this binary, /proc/self/exe)
//   nbdkit       `nbdkit --foreground --unix S memory SIZE` (sparse)
//   nbdkit-zstd  `nbdkit --foreground --unix S memory SIZE allocator=zstd`
//
// Part 1, fio (bench_fio.h has the command lines). In each run all
// servers are started, each area is filled (one untimed 128 KiB sequential
// write pass over the first min(SIZE, 256 MiB), the "area"), then each job
// runs for S seconds on every server in turn (job 1 on ztier, nbdkit,
// nbdkit-zstd; job 2 on ...): 4k randwrite QD1 and QD32, 4k randread QD1 and
// QD32, 128k sequential write QD8 and read QD8, all within the area. So
// every job works on a fully written area, writes overwrite, and reads read
// written data.
//
// Part 2, nbdcopy. Each corpus (*.pages.zst in --corpus-dir) is decompressed
// into the temporary folder; for each corpus and server in turn a server
// with an export of exactly the corpus's size is started, the file is copied
// in (nbdcopy FILE URI) and out (nbdcopy URI FILE2), the copy is compared
// with the original (a mismatch is fatal), and the memory the stored corpus
// takes is read: ztier's mem_used_total (mm_stat column 3, over the control
// socket), and for nbdkit the growth of its VmRSS over the copy-in (ztier's
// VmRSS growth is shown too). Copy MB/s is the file size over the wall time
// of the nbdcopy process (its start and connection included).
//
// Output (stdout): the machine line, the configuration with the versions of
// fio, nbdkit and nbdcopy; a table of IOPS and MB/s per job and server
// (median, min, max, CV over the runs); a table per corpus and server of
// copy MB/s and memory; and the derived ratios (each computed within a run,
// then the median over runs) with their targets: ztier randread QD32 IOPS /
// nbdkit >= 1.0, randwrite QD32 / nbdkit >= 0.75, randread QD32 /
// nbdkit-zstd >= 5, randwrite QD32 / nbdkit-zstd >= 5. A progress line goes
// to stderr when it is a terminal. `--json FILE` writes it all as JSON;
// `--plot DIR` draws the fio part as two bar charts (NbdCharts()).
//
// Missing tools are skipped, with a note: no fio, no part 1; no nbdcopy, no
// part 2; no nbdkit (or --no-nbdkit), ztier alone and no ratios.
//
// Defaults (5 runs x 6 jobs x 3 servers x 3 s = 270 s of fio, plus fills,
// copies and starts) take about 5-6 minutes on a 2-core machine.
//
// Exit status: 0 done (also when a missing tool made it skip a part); 1 a
// runtime failure (no corpus, a server that does not start, fio or nbdcopy
// failing, a copy that reads back wrong); 2 bad usage.
#ifndef ZTIER_TOOLS_ZTIER_BENCH_NBD_H_
#define ZTIER_TOOLS_ZTIER_BENCH_NBD_H_

#include <span>
#include <string_view>

namespace ztier::tool {

// Runs the command; `args` are the words after `nbd`. Returns the exit
// status.
int RunBenchNbd(std::span<const std::string_view> args);

}  // namespace ztier::tool

#endif  // ZTIER_TOOLS_ZTIER_BENCH_NBD_H_
