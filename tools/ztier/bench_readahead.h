// File: tools/ztier/bench_readahead.h
//
// `ztier bench readahead`: fault-in on a ztier region, two sections:
// 1. Readahead (the zswap decompress batching series, docs/references.md):
//    a paged-out region of --size read in order, page_cluster 0 and
//    --page-cluster alternating (bench_harness.h's RunVariants, no warm-up)
//    over --runs runs (0 skips it): pages/s, MB/s, the region's counters
//    and the per-run ratio of pages/s.
// 2. Fault-in latency of --fault-pages pages (0 skips it), one run: the
//    percentiles of the stored, first-touch and bare UFFDIO_COPY touches.
// One Report (bench_report.h); `--plot DIR` draws readahead.png and
// fault-latency.png. Flags: --help.
#ifndef ZTIER_TOOLS_ZTIER_BENCH_READAHEAD_H_
#define ZTIER_TOOLS_ZTIER_BENCH_READAHEAD_H_

#include <span>
#include <string_view>

namespace ztier::tool {

// args: the words after `readahead`. Exit status: 0 done, every page read
// back right; 1 a page read back wrong, a region not created (no
// userfaultfd), no corpus, or the JSON or a chart not written; 2 usage.
int RunBenchReadahead(std::span<const std::string_view> args);

}  // namespace ztier::tool

#endif  // ZTIER_TOOLS_ZTIER_BENCH_READAHEAD_H_
