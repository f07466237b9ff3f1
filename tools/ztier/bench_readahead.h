// File: tools/ztier/bench_readahead.h
//
// `ztier bench readahead`: fault-in on a ztier region, two sections in one
// command (bench_readahead_run.h has what each measurement does):
// 1. Readahead (batched decompression of readahead, the zswap decompress
//    batching series of docs/references.md): a paged-out region of --size
//    read in order with page_cluster 0 and --page-cluster alternating
//    (bench_harness.h's RunVariants, no warm-up) over --runs runs (0 skips
//    it): pages/s and MB/s, the region's counters, and the per-run ratio
//    of pages/s (`page_cluster 3 / page_cluster 0: X.XXx`).
// 2. Fault-in latency of --fault-pages pages (0 skips it), one run: median,
//    p90, p99 and max of the stored, first-touch and bare UFFDIO_COPY
//    touches, beside the bare fault measured earlier on the 2-vCPU
//    development machine.
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
