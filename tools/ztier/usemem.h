// File: tools/ztier/usemem.h
//
// `ztier usemem`: the vm-scalability usemem experiment of the zswap store
// batching series (docs/references.md: "usemem with 60% over-commit") on a
// ztier Region instead of a cgroup and zswap; flags in ztier(8) `ztier
// usemem`. The pool limit defaults to 50% of the budget, not zswap's 20%:
// in the series the pool limit never binds, and 20% of a 60% budget is less
// than the 40% overflow compresses to (a full pool leaves pages resident
// over the budget, and a NOTE says so).
//
// Variants (a fresh region every run; bench_harness.h's RunVariants, no
// warm-up): batched (batch_stores, parallel backend, batch 8: the series'
// patch) and, with --compare-batching, one-at-a-time (batch_stores false,
// serial backend: the series' baseline), alternating. The table gives the
// series' Average Throughput (KB/s, the mean of the workers' bytes / busy
// time), Total Throughput (their sum) and Time to Free (usecs, the region's
// destruction), median (min-max) per variant and the change, then zswap's
// counters of each variant's last run; the text ends with `batched /
// one-at-a-time: X.XXx (...)`, the median of the per-run ratios of total
// throughput. The JSON also has every worker's phases (table "workers");
// `--plot DIR` draws usemem.png (average and total throughput, MiB/s).
#ifndef ZTIER_TOOLS_ZTIER_USEMEM_H_
#define ZTIER_TOOLS_ZTIER_USEMEM_H_

#include <span>
#include <string_view>

namespace ztier::tool {

// args: the words after `usemem`. Exit status: 0 done, every page of every
// run read back right; 1 a page read back wrong (the first few printed), no
// region (no userfaultfd: the message says why), no corpus, --plot given and
// no chart; 2 bad usage.
int RunUsemem(std::span<const std::string_view> args);

}  // namespace ztier::tool

#endif  // ZTIER_TOOLS_ZTIER_USEMEM_H_
