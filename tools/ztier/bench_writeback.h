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
//                         [--compressed] [--backing URI]
//                         [--backing-connections N] [--json FILE]
//                         [--plot DIR]
//
// Variants (bench_harness.h's RunVariants: one warm-up run, then --runs
// runs, the order reversed in every other run):
//   sync     PageStore::Writeback with in_flight 1, max_io_pages 1
//   batched  in_flight --batch-size (default 32), max_io_pages 32 (128 KiB)
//   fio      fio --rw=write --bs=128k --ioengine=io_uring --direct=1
//            --iodepth=32 of --size bytes (skipped when fio is not on PATH)
// With --backing URI (an NBD export, nbd/nbd_backing_file.h), two more:
//   remote-sync     sync's request, written back to the export: one 4 KiB
//                   NBD write in flight at a time
//   remote-batched  batched's request to the export: up to --batch-size
//                   writes of up to 128 KiB in flight, round-robin over
//                   --backing-connections connections (multi-conn)
// The export must hold SIZE + 4096 bytes; what it held there is
// overwritten. The ratios add remote batched / remote one-at-a-time and
// remote batched / local batched.
// A store measurement opens DIR/ztier-bench-writeback.img (BackingStore,
// O_DIRECT where the file system allows it), fills a store of --size with
// the corpus and marks every slot idle (untimed), times one Writeback() of
// every slot (an error unless it writes every candidate), then reads back
// and checks every 64th slot. fio writes DIR/ztier-bench-fio.img. Each file
// is removed after its measurement, on error and on SIGINT/SIGTERM/SIGHUP.
//
// Output (bench_report.h): the configuration, the table "variants" (pages,
// seconds, MB/s), the last run's mem_used_total and bd_stat, the ratios
// batched / one-at-a-time and batched / fio sequential write (medians of
// per-run ratios); --plot DIR: writeback.png, MB/s of each variant.
//
// Exit status: 0 done (also without fio); 1 a runtime failure (no corpus,
// a writeback that fails or does not write every candidate, data that
// reads back wrong, fio failing, --plot given and no chart); 2 bad usage.
#ifndef ZTIER_TOOLS_ZTIER_BENCH_WRITEBACK_H_
#define ZTIER_TOOLS_ZTIER_BENCH_WRITEBACK_H_

#include <span>
#include <string_view>

namespace ztier::tool {

// args: the words after `writeback`. Returns the exit status.
int RunBenchWriteback(std::span<const std::string_view> args);

}  // namespace ztier::tool

#endif  // ZTIER_TOOLS_ZTIER_BENCH_WRITEBACK_H_
