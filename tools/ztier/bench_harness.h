// File: tools/ztier/bench_harness.h
//
// What every `ztier bench` experiment shares around its own measurements:
// the common flags, spelled one way (--json FILE, --plot DIR, --corpus FILE,
// --corpus-dir DIR), finding a folder's corpora, the label of each
// repetition (one warm-up run, then --runs measured runs, every variant in
// each, so that variants alternate), and writing the JSON at the end. The
// result model the experiments report with is bench_stats.h; the machine
// line is machine_info.h; the progress line is progress.h.
//
//   AddCorpusFileFlag(flags, &corpus, "pages to store");
//   AddJsonFlag(flags, &json_path);
//   ...
//   for (std::size_t run = 0; run <= runs; ++run) {
//     progress.Update(RunLabel(run, runs) + ": " + variant);
//     ...
//   }
//   return FinishJson(kCommand, json_path, [&](const std::string& path) {
//     return WriteMyJson(path, ...);
//   });
//
// Thread safety: plain functions; no shared state.
#ifndef ZTIER_TOOLS_ZTIER_BENCH_HARNESS_H_
#define ZTIER_TOOLS_ZTIER_BENCH_HARNESS_H_

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "flags.h"
#include "ztier/status.h"

namespace ztier::tool {

// --json FILE: "also write every figure as JSON to FILE".
void AddJsonFlag(FlagSet& flags, std::string* path);

// --plot DIR (plot.h's kPlotFlagHelp).
void AddPlotFlag(FlagSet& flags, std::string* dir);

// --corpus FILE, one file: "PURPOSE (a .pages.zst file or any plain file
// read as pages; default the checkout's anon-python corpus)". *file should
// hold kDefaultCorpusFile (tool_common.h) before parsing.
void AddCorpusFileFlag(FlagSet& flags, std::string* file,
                       std::string_view purpose);

// --corpus-dir DIR: every *.pages.zst in DIR. *dir should hold
// kDefaultCorpusDir (tool_common.h) before parsing.
void AddCorpusDirFlag(FlagSet& flags, std::string* dir,
                      std::string_view when = "");

// The *.pages.zst files in `dir`, sorted. kNotFound "no corpus: the corpus
// folder 'DIR' (ABS) is missing (or not a folder)." or "... holds no
// *.pages.zst files.", each followed by `hint` on its own line.
Result<std::vector<std::string>> FindCorpusDir(const std::string& dir,
                                               std::string_view hint);

// The hint of FindCorpusDir for commands that take only --corpus-dir.
inline constexpr char kCorpusDirHint[] =
    "Pass a folder of *.pages.zst files with --corpus-dir DIR.";

// "warm-up" for run 0, else "run R/RUNS".
std::string RunLabel(std::size_t run, std::size_t runs);

// With a `path`: write(path), then prints "\nwrote PATH" on stdout. Returns
// the command's exit status: 0, or 1 with "COMMAND: error" printed on
// stderr when write fails. 0 without a path.
int FinishJson(std::string_view command, const std::string& path,
               const std::function<Status(const std::string&)>& write);

}  // namespace ztier::tool

#endif  // ZTIER_TOOLS_ZTIER_BENCH_HARNESS_H_
