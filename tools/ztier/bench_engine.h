// File: tools/ztier/bench_engine.h
//
// `ztier bench engine`: how fast the engine stores and loads pages compared
// with the codec alone, and how much memory it uses, on page corpora.
//
//   ztier bench engine [--corpus FILE]... [--corpus-dir DIR] [--codec NAME]...
//                      [--runs N] [--threads N,N,...] [--json FILE]
//                      [--plot DIR]
//
// For each codec and corpus it runs one warm-up run and then N measured runs;
// within a run every variant is measured once, in turn (engine_measure.h
// lists them), so that slow drift of the machine hits all variants alike.
// Each figure is reported as the median, min, max, stddev and CV over the N
// runs. It then prints the size figures and three derived ratios with their
// acceptance targets:
//   store/compress          store t=1 b=1 / codec compress t=1 b=1 (lz4:
//                           >= 0.85)
//   load/(decompress+copy)  store load t=1 b=1 / codec decompress t=1 b=1
//                           (>= 0.80)
//   batch8 store par/ser    store t=1 b=8 parallel / serial (lz4 on
//                           anon-cc1plus: >= 1.6 with 2 cores)
//
// --threads lists the thread counts (default 1, 2, 4, ... up to the online
// cores, and the online cores: the same command fits a 2-core and a 16-core
// machine); the batch-1 variants and the batch-8 serial store run on each.
// After each codec and corpus table comes its thread scaling: MB/s against
// threads with the ideal (threads x the 1-thread median) beside it.
//
// Output: the machine line and configuration, then per codec and corpus its
// table and thread scaling, on stdout; a progress line on stderr when it is
// a terminal; `--json FILE` writes every figure as JSON as well; `--plot
// DIR` draws the charts of bench_engine_charts.h with gnuplot (plot.h).
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
