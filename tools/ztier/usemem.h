// File: tools/ztier/usemem.h
//
// `ztier usemem`: the vm-scalability usemem experiment of the zswap store
// batching series (docs/references.md: "usemem with 60% over-commit") on a
// ztier Region instead of a cgroup and zswap.
//
//   ztier usemem --workers N --size BYTES --budget PERCENT|BYTES
//                --corpus FILE [--codec NAME] [--compare-batching]
//                [--runs N] [--json FILE] [--page-cluster N]
//                [--sleep SECONDS] [--max-pool-percent N] [--plot DIR]
//
// N worker threads share one region of N * --size bytes whose budget is
// --budget (a percent of the region, "60%", or bytes with K/M/G suffixes)
// and whose pool limit is --max-pool-percent of the budget (default 50, not
// zswap's 20: in the series the pool limit never binds, and 20% of a 60%
// budget is less than the 40% overflow compresses to; a full pool leaves
// pages resident over the budget, and a NOTE says so).
// Each worker fills its slice from the pre-loaded corpus, adds a constant to
// every 8-byte word, sleeps --sleep seconds (default 1; the series' 10 s),
// reads everything back and checks every page; the region is then
// destroyed (usemem_run.h has the details). As the series reports:
//   Average Throughput (KB/s)   mean of the workers' bytes / busy time
//   Total Throughput (KB/s)     their sum
//   Time to Free (usecs)        the region's destruction
// then the counters zswpout, zswpin, pool_limit_hit, reject_compress_poor,
// resident pages, faults and wp_faults.
//
// Variants (a fresh region every run):
//   batched        batch_stores, parallel backend, batch 8 (runs of 16
//                  victims stored in 64 KiB units): the series' patch
//   one-at-a-time  batch_stores false, serial backend: every page stored by
//                  itself, the series' baseline
// Without --compare-batching, --runs (default 1) runs of the batched
// variant. With it, --runs (default 3) runs of each, alternating
// (one-at-a-time first in odd runs, batched first in even ones); the table
// gives median (min-max) per variant and the change, and the last line is
// `batched / one-at-a-time: X.XXx (...)`, the median (min-max) of the
// per-run ratios of total throughput.
//
// Output (stdout): the machine line, the configuration, the table, a
// "verified:" line. `--json FILE` writes the machine, the configuration,
// every run (with every worker's phases and every counter) and the
// summaries. `--plot DIR` draws usemem.png (usemem_report.h's UsememChart).
// A progress line goes to stderr when it is a terminal.
//
// Exit status: 0 done, every page of every run read back right; 1 a page
// read back wrong (the first few printed), a region that cannot be created
// (no userfaultfd: the message says why), a corpus that cannot be loaded,
// --plot given and the chart not drawn (after the tables); 2 bad usage.
#ifndef ZTIER_TOOLS_ZTIER_USEMEM_H_
#define ZTIER_TOOLS_ZTIER_USEMEM_H_

#include <span>
#include <string_view>

namespace ztier::tool {

// args: the words after `usemem`. Returns the exit status.
int RunUsemem(std::span<const std::string_view> args);

}  // namespace ztier::tool

#endif  // ZTIER_TOOLS_ZTIER_USEMEM_H_
