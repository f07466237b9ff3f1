// File: tools/ztier/bench_ratio.h
//
// `ztier bench ratio`: the memory the same pages take (mem_used_total) with
// per-page objects, with units of 4, 8 and 16 pages (PageStoreOptions::
// unit_pages), with a dictionary trained from the store's own pages
// (PageStore::TrainDictionary), with units of 16 and a dictionary, and in
// the kernel's zram where /dev/zram0 offers the codec; with, from the same
// runs, the store's MB/s and the MB/s of random 4 KiB and of sequential
// reads. Flags: ztier(8), `ztier bench ratio`, and --help.
//
// For each corpus and codec (default lz4 and zstd), RunVariants
// (bench_harness.h) alternates the variants:
//   per-page, units-4, units-8, units-16
//             a fresh PageStore (with that unit_pages), every page stored
//             once, 16 pages per StoreBatch (timed), read back
//             sequentially (LoadBatch of 32 pages, timed, checked) and at
//             random (one Load per page, timed);
//   dict, units-16+dict
//             the same store, then train_dict (--dict-size), every page
//             stored again (timed: the stores with the dictionary), the
//             pool compacted (the rewrite freed the old objects), and the
//             same reads;
//   kernel    /dev/zram0 reset, set to the codec, written with the pages
//             (O_DIRECT), mm_stat read; only where the device is free and
//             offers the codec (this machine's kernel has no zstd).
// One Report (bench_report.h) holds a table and a chart per codec and the
// ratios of mem_used_total (dict and units-16+dict against per-page and
// kernel) and of read MB/s (units-16 against per-page).
//
// Exit status: 0 done; 1 a runtime failure (no corpus, a store or load
// error, a page read back wrong, a dictionary refused); 2 bad usage.
#ifndef ZTIER_TOOLS_ZTIER_BENCH_RATIO_H_
#define ZTIER_TOOLS_ZTIER_BENCH_RATIO_H_

#include <span>
#include <string_view>

namespace ztier::tool {

// Runs the command; `args` are the words after `ratio`. Returns the exit
// status.
int RunBenchRatio(std::span<const std::string_view> args);

}  // namespace ztier::tool

#endif  // ZTIER_TOOLS_ZTIER_BENCH_RATIO_H_
