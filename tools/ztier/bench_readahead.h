// File: tools/ztier/bench_readahead.h
//
// `ztier bench readahead`: fault-in on a ztier region, in two sections
// (bench_readahead.cc says what each measures): readahead, page_cluster 0
// and --page-cluster alternating over --runs runs (bench_harness.h's
// RunVariants, no warm-up); then the latency of one fault-in. One Report
// (bench_report.h); `--plot DIR` draws readahead.png and
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
