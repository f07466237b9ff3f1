// File: tools/ztier/bench_writeback.h
//
// `ztier bench writeback`: zram-style writeback of a filled store to a
// backing file, one page at a time (one synchronous 4 KiB pwrite per page,
// zram before "zram: batch IOs during writeback", patch 4/5 of the zram
// writeback batching series in docs/references.md) against batched
// io_uring writeback (as in that series), with fio's sequential-write
// bandwidth on the same file system as the limit, in one run.
//
//   ztier bench writeback [--corpus FILE] [--size SIZE] [--dir DIR]
//                         [--runs N] [--codec NAME] [--batch-size N]
//                         [--compressed] [--json FILE] [--plot DIR]
//
// Variants, measured in every run in an order that alternates between runs
// (sync, batched, fio; then fio, batched, sync; ...), after one warm-up run
// that is not counted:
//   sync     PageStore::Writeback with in_flight 1, max_io_pages 1
//   batched  in_flight --batch-size (default 32), max_io_pages 32 (128 KiB)
//   fio      fio --rw=write --bs=128k --ioengine=io_uring --direct=1
//            --iodepth=32 over a file of --size bytes (skipped, with a note,
//            when fio is not on PATH)
// writeback_run.h has what one sync or batched measurement does: a fresh
// store and backing file (DIR/ztier-bench-writeback.img) filled with the
// corpus, every slot marked idle, then only the Writeback() call timed, and
// every 64th slot read back and checked afterwards. fio writes
// DIR/ztier-bench-fio.img. Both files are removed at the end, on error and
// on SIGINT/SIGTERM/SIGHUP.
//
// Output (stdout): the machine line, the configuration, a table per variant
// of pages, seconds and MB/s (median (min-max) over the runs, cv%), and the
// ratios batched / one-at-a-time and batched / fio, each the median of the
// ratios taken within one run. A progress line goes to stderr when it is a
// terminal. `--json FILE` writes the configuration, every run's figures
// and the summaries. `--plot DIR` draws writeback.png (plot.h): MB/s of
// each variant, median with min-max bars.
//
// Exit status: 0 done (also when fio is missing); 1 a runtime failure (no
// corpus, a writeback that fails or does not write every candidate, data
// that reads back wrong, fio failing; --plot given and the chart not
// drawn, after the tables); 2 bad usage.
#ifndef ZTIER_TOOLS_ZTIER_BENCH_WRITEBACK_H_
#define ZTIER_TOOLS_ZTIER_BENCH_WRITEBACK_H_

#include <span>
#include <string_view>

namespace ztier::tool {

// args: the words after `writeback`. Returns the exit status.
int RunBenchWriteback(std::span<const std::string_view> args);

}  // namespace ztier::tool

#endif  // ZTIER_TOOLS_ZTIER_BENCH_WRITEBACK_H_
