// File: tools/ztier/bench_engine.h
//
// `ztier bench engine`: how fast the engine stores and loads pages compared
// with the codec alone, and how much memory it uses, on page corpora.
//
//   ztier bench engine [--corpus FILE]... [--corpus-dir DIR] [--codec NAME]...
//                      [--runs N] [--threads N,N,...] [--json FILE]
//                      [--plot DIR]
//
// Each codec on each corpus runs the variants of engine_measure.h through
// RunVariants (bench_harness.h), probing the machine (machine_info.h) after
// every measured run; --threads gives the thread counts (default 1, 2, 4,
// ... up to the online cores, and the online cores). One Report
// (bench_report.h; stdout, --json FILE, --plot DIR) holds per codec and
// corpus the tables "CODEC CORPUS", "CODEC CORPUS scaling" (with more than
// one thread count) and "CODEC CORPUS conditions"; then "sizes" and
// "derived" (ratios of medians and their targets); per codec, of its first
// corpus, the charts engine-threads-CODEC and engine-batch-CODEC.
//
// Exit status: 0 done; 1 a runtime failure (no or unreadable corpus, a store
// or load error, a page read back wrong, a chart not drawn); 2 bad usage.
#ifndef ZTIER_TOOLS_ZTIER_BENCH_ENGINE_H_
#define ZTIER_TOOLS_ZTIER_BENCH_ENGINE_H_

#include <span>
#include <string_view>

namespace ztier::tool {

// Runs the command; `args` are the words after `engine`. Returns the exit
// status.
int RunBenchEngine(std::span<const std::string_view> args);

}  // namespace ztier::tool

#endif  // ZTIER_TOOLS_ZTIER_BENCH_ENGINE_H_
