// File: tools/ztier/bench_engine.h
//
// `ztier bench engine`: how fast the engine stores and loads pages compared
// with the codec alone, and how much memory it uses, on page corpora.
//
//   ztier bench engine [--corpus FILE]... [--corpus-dir DIR] [--codec NAME]...
//                      [--runs N] [--threads N,N,...] [--json FILE]
//                      [--plot DIR]
//
// For each codec and corpus it runs the variants of engine_measure.h through
// RunVariants (bench_harness.h): one warm-up run and then N measured runs,
// every variant once in each, alternating their order, with the machine's
// conditions (machine_info.h) probed once in every measured run. Each
// figure is the median (min-max) and cv% over the N runs. It then prints
// the size figures and derived ratios of medians with their targets:
//   store/compress          store t=1 b=1 / codec compress t=1 b=1 (lz4:
//                           >= 0.85); overwrite/compress likewise
//   load/(decompress+copy)  store load t=1 b=1 / codec decompress t=1 b=1
//                           (>= 0.80)
//   batch8 store par/ser    store t=1 b=8 parallel / serial (lz4 on
//                           anon-cc1plus: >= 1.6 with 2 cores)
//
// --threads lists the thread counts (default 1, 2, 4, ... up to the online
// cores, and the online cores: the same command fits a 2-core and a 16-core
// machine); the batch-1 variants and the batch-8 serial store run on each.
//
// Output: one Report (bench_report.h) with the tables and charts of
// bench_engine_report.h: the machine line and configuration, then per codec
// and corpus its tables, then the sizes and derived ratios, on stdout; a
// progress line on stderr when it is a terminal; `--json FILE` writes the
// Report's JSON; `--plot DIR` draws the charts with gnuplot (plot.h).
//
// Exit status: 0 done; 1 a runtime failure (no corpus, unreadable corpus, a
// store or load error, a page that reads back wrong; --plot given and a
// chart not drawn, e.g. no gnuplot: after the tables); 2 bad usage.
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
