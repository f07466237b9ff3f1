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
// N worker threads share one region of N * --size bytes with a budget of
// --budget (a percent of the region, "60%", or bytes with K/M/G suffixes)
// and a pool limit of --max-pool-percent of the budget (default 50, not
// zswap's 20: in the series the pool limit never binds, and 20% of a 60%
// budget is less than the 40% overflow compresses to; a full pool leaves
// pages resident over the budget, and a NOTE says so). Each worker fills
// its slice from the corpus, adds a constant to every word, sleeps --sleep
// seconds (default 1; the series' 10 s), reads everything back and checks
// every page (usemem_run.h). As the series reports: Average Throughput
// (KB/s, the mean of the workers' bytes / busy time), Total Throughput
// (their sum), Time to Free (usecs, the region's destruction), then zswap's
// counters of each variant's last run.
//
// Variants (a fresh region every run; bench_harness.h's RunVariants, no
// warm-up): batched (batch_stores, parallel backend, batch 8: the series'
// patch) and, with --compare-batching, one-at-a-time (batch_stores false,
// serial backend: the series' baseline). --runs runs of each (default 1,
// 3 with --compare-batching), alternating; then the table gives median
// (min-max) per variant and the change, and the text ends with `batched /
// one-at-a-time: X.XXx (...)`, the median of the per-run ratios of total
// throughput.
//
// Output: bench_report.h's text and JSON (the JSON also has every worker's
// phases, table "workers"); `--plot DIR` draws usemem.png (average and
// total throughput of each variant, MiB/s).
//
// Exit status: 0 done, every page of every run read back right; 1 a page
// read back wrong (the first few printed), no region (no userfaultfd: the
// message says why), no corpus, --plot given and no chart; 2 bad usage.
#ifndef ZTIER_TOOLS_ZTIER_USEMEM_H_
#define ZTIER_TOOLS_ZTIER_USEMEM_H_

#include <span>
#include <string_view>

namespace ztier::tool {

// args: the words after `usemem`. Returns the exit status.
int RunUsemem(std::span<const std::string_view> args);

}  // namespace ztier::tool

#endif  // ZTIER_TOOLS_ZTIER_USEMEM_H_
