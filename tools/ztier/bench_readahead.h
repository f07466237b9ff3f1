// File: tools/ztier/bench_readahead.h
//
// `ztier bench readahead`: two sections, one command.
//
//   ztier bench readahead [--corpus FILE] [--size SIZE] [--codec NAME]
//                         [--runs N] [--page-cluster N] [--fault-pages N]
//                         [--json FILE] [--plot DIR]
//
// 1. Readahead (batched decompression of readahead, as in the zswap
//    decompress batching series of docs/references.md): a region of
//    --size (default 256M) with no budget, filled with corpus pages and
//    paged out whole, then read in order (one 8-byte load per page and a
//    memcmp with the expected corpus page), timed. Variants page_cluster 0
//    and page_cluster --page-cluster (default 3), alternating within each of
//    --runs runs (default 5; 0 skips the section). Reports pages/s and MB/s
//    (median (min-max), cv%) per variant, swap_ra and swap_ra_hit, and
//    `page_cluster 3 / page_cluster 0: X.XXx`, the median (min-max) of the
//    per-run ratios of pages/s.
// 2. Fault-in latency: a region of --fault-pages pages (default 16384; 0
//    skips the section), page_cluster 0, filled with the corpus and paged
//    out, then every page touched once (one read) in a random order, each
//    touch timed; the same for a fresh, untouched region (first-touch
//    faults). Reports median, p90, p99 and max in microseconds for the
//    touches that faulted (and, for first touch, all touches: the handler
//    maps whole runs of untouched neighbours per fault), beside a bare
//    UFFDIO_COPY 4 KiB fault measured in the same run (plain memory, a
//    handler that only copies; the ratio of the medians is printed) and
//    the one measured earlier on the 2-vCPU development machine
//    (cross-vCPU wakeups dominate both, and vary from run to run on a VM:
//    compare with the one measured now).
// bench_readahead_run.h has what each measurement does.
//
// Output (stdout): the machine line, the configuration, both sections.
// `--json FILE` writes the configuration, every run, the summaries and the
// latency percentiles. `--plot DIR` draws readahead.png (MB/s of each
// variant, median with min-max bars) and fault-latency.png (the
// percentiles of each kind of touch; one run, so no bars) with plot.h. A
// progress line goes to stderr when it is a terminal.
//
// Exit status: 0 done, every page read back right; 1 a page read back
// wrong, a region that cannot be created (no userfaultfd), a corpus that
// cannot be loaded, --plot given and a chart not drawn (after the
// tables); 2 bad usage.
#ifndef ZTIER_TOOLS_ZTIER_BENCH_READAHEAD_H_
#define ZTIER_TOOLS_ZTIER_BENCH_READAHEAD_H_

#include <span>
#include <string_view>

namespace ztier::tool {

// args: the words after `readahead`. Returns the exit status.
int RunBenchReadahead(std::span<const std::string_view> args);

}  // namespace ztier::tool

#endif  // ZTIER_TOOLS_ZTIER_BENCH_READAHEAD_H_
