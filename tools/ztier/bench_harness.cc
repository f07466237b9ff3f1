// File: tools/ztier/bench_harness.cc
//
// The flags, corpus folder, run labels and JSON ending shared by the
// `ztier bench` experiments (bench_harness.h).
#include "bench_harness.h"

#include <cstdio>
#include <filesystem>

#include "corpus/corpus.h"
#include "plot.h"
#include "tool_common.h"

namespace ztier::tool {

void AddJsonFlag(FlagSet& flags, std::string* path) {
  flags.AddString("json", path, "FILE",
                  "also write every figure as JSON to FILE");
}

void AddPlotFlag(FlagSet& flags, std::string* dir) {
  flags.AddString("plot", dir, "DIR", kPlotFlagHelp);
}

void AddCorpusFileFlag(FlagSet& flags, std::string* file,
                       std::string_view purpose) {
  flags.AddString("corpus", file, "FILE",
                  std::string(purpose) +
                      " (a .pages.zst file or any plain file read as pages; "
                      "default " +
                      kDefaultCorpusFile + ")");
}

void AddCorpusDirFlag(FlagSet& flags, std::string* dir, std::string_view when) {
  flags.AddString("corpus-dir", dir, "DIR",
                  "every *.pages.zst in DIR (default " +
                      std::string(kDefaultCorpusDir) + std::string(when) + ")");
}

Result<std::vector<std::string>> FindCorpusDir(const std::string& dir,
                                               std::string_view hint) {
  const std::string shown = "'" + dir + "'" + AbsoluteNote(dir);
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    return Err(Status::NotFound("no corpus: the corpus folder " + shown +
                                " is missing (or not a folder).\n" +
                                std::string(hint)));
  }
  auto found = corpus::FindCorpusFiles(dir);
  if (!found.has_value() || found->empty()) {
    return Err(Status::NotFound("no corpus: the corpus folder " + shown +
                                " holds no *.pages.zst files.\n" +
                                std::string(hint)));
  }
  return std::move(*found);
}

std::string RunLabel(std::size_t run, std::size_t runs) {
  return run == 0 ? std::string("warm-up")
                  : "run " + std::to_string(run) + "/" + std::to_string(runs);
}

int FinishJson(std::string_view command, const std::string& path,
               const std::function<Status(const std::string&)>& write) {
  if (path.empty()) return 0;
  if (Status s = write(path); !s.ok()) {
    return ReportFailure(command, s.ToString());
  }
  std::printf("\nwrote %s\n", path.c_str());
  return 0;
}

}  // namespace ztier::tool
