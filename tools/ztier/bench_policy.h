// File: tools/ztier/bench_policy.h
//
// `ztier bench policy`: client read latency on a Device with the
// post-processing policy (ztier/policy.h, run by policy_runner.h) running
// passes continuously against the same device without it, alternating in
// each run (bench_harness.h's RunVariants), one Report (bench_report.h).
// Each run makes a fresh device (lz4, zstd at priority 1, a backing file in
// a temporary folder), fills it from the corpus, and times one client
// thread reading random pages of its hot set on a fixed schedule while the
// cold rest goes idle and (with the policy) is recompressed and written
// back. The target: the median read latency with the policy within 1.2x of
// the median without it, same run. Flags: --help.
#ifndef ZTIER_TOOLS_ZTIER_BENCH_POLICY_H_
#define ZTIER_TOOLS_ZTIER_BENCH_POLICY_H_

#include <span>
#include <string_view>

namespace ztier::tool {

// args: the words after `policy`. Exit status: 0, 1 (a run failed, a read
// returned wrong data, or the JSON not written), 2 (usage).
int RunBenchPolicy(std::span<const std::string_view> args);

}  // namespace ztier::tool

#endif  // ZTIER_TOOLS_ZTIER_BENCH_POLICY_H_
