// File: tools/ztier/bench_harness.cc
//
// The flags, corpus folder and run loop shared by the `ztier bench`
// experiments (bench_harness.h).
#include "bench_harness.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "corpus/corpus.h"
#include "plot.h"
#include "tool_common.h"

namespace ztier::tool {

void AddBenchFlags(FlagSet& flags, BenchFlags* f) {
  flags.AddInt("runs", &f->runs, "N", "measured runs, after one warm-up run", 1,
               1000);
  AddJsonFlag(flags, &f->json);
  AddPlotFlag(flags, &f->plot);
}

void Samples::Add(std::string_view figure, double value) {
  for (auto& [name, v] : values_) {
    if (name == figure) {
      v = value;
      return;
    }
  }
  values_.emplace_back(std::string(figure), value);
}

const Measurements::ByRun* Measurements::Find(std::string_view variant,
                                              std::string_view figure) const {
  auto it = by_run_.find({std::string(variant), std::string(figure)});
  return it != by_run_.end() ? &it->second : nullptr;
}

void Measurements::Record(std::string_view variant, std::size_t run,
                          const Samples& s) {
  for (const auto& [figure, value] : s.values()) {
    ByRun& v = by_run_[{std::string(variant), figure}];
    if (v.size() < run) v.resize(run);
    v[run - 1] = value;
  }
}

std::vector<double> Measurements::Of(std::string_view variant,
                                     std::string_view figure) const {
  std::vector<double> out;
  if (const ByRun* v = Find(variant, figure)) {
    for (const std::optional<double>& x : *v) {
      if (x.has_value()) out.push_back(*x);
    }
  }
  return out;
}

std::optional<double> Measurements::At(std::string_view variant,
                                       std::string_view figure,
                                       std::size_t run) const {
  const ByRun* v = Find(variant, figure);
  if (v == nullptr || run == 0 || run > v->size()) return std::nullopt;
  return (*v)[run - 1];
}

std::vector<double> Measurements::Ratios(std::string_view num_variant,
                                         std::string_view num_figure,
                                         std::string_view den_variant,
                                         std::string_view den_figure) const {
  std::vector<double> out;
  const ByRun* num = Find(num_variant, num_figure);
  const ByRun* den = Find(den_variant, den_figure);
  if (num == nullptr || den == nullptr) return out;
  for (std::size_t i = 0; i < std::min(num->size(), den->size()); ++i) {
    if ((*num)[i].has_value() && (*den)[i].has_value() && *(*den)[i] != 0) {
      out.push_back(*(*num)[i] / *(*den)[i]);
    }
  }
  return out;
}

Result<Measurements> RunVariants(const RunPlan& plan,
                                 std::span<const Variant> variants,
                                 Progress& progress) {
  Measurements m;
  const std::string prefix = plan.label.empty() ? "" : plan.label + ": ";
  const std::size_t total = plan.warmups + plan.runs;
  for (std::size_t i = 0; i < total; ++i) {
    const bool warmup = i < plan.warmups;
    const std::size_t run = warmup ? 0 : i - plan.warmups + 1;
    const std::string label = RunLabel(run, plan.runs);
    std::vector<const Variant*> order;
    for (const Variant& v : variants) order.push_back(&v);
    if (plan.alternate && i % 2 == 1) {
      const std::size_t fixed = std::min(plan.fixed_last, order.size());
      std::reverse(order.begin(), order.end() - static_cast<long>(fixed));
    }
    for (const Variant* v : order) {
      progress.Update(prefix + label + ": " + v->name);
      Samples s;
      if (Status st = v->run(run, s); !st.ok()) {
        progress.Clear();
        return Err(
            Status(st.code(), v->name + ", " + label + ": " + st.message()));
      }
      if (!warmup) m.Record(v->name, run, s);
    }
  }
  progress.Clear();
  return m;
}

void AddJsonFlag(FlagSet& flags, std::string* path) {
  flags.AddOutputFile("json", path, "FILE",
                      "also write every figure as JSON to FILE");
}

void AddPlotFlag(FlagSet& flags, std::string* dir) {
  flags.AddString("plot", dir, "DIR",
                  "also draw PNG charts with gnuplot into DIR (NAME.png, with "
                  "the NAME.gp script and NAME.dat data beside it to "
                  "re-render)");
  flags.NotEmpty("plot");
  // Said once the flags are parsed, before the command loads its corpora
  // and runs, so that the user learns it before waiting for the runs;
  // Report::Finish says it again at the end.
  flags.AfterParse([command = flags.command(), dir] {
    if (dir->empty()) return;
    const Result<Plotter> plotter = Plotter::Create(*dir);
    if (plotter.has_value()) return;
    std::fprintf(stderr,
                 "%s: --plot %s: %s; the benchmark runs, but draws no charts\n",
                 command.c_str(), dir->c_str(),
                 plotter.error().message().c_str());
  });
}

void AddCorpusFileFlag(FlagSet& flags, std::string* file,
                       std::string_view purpose) {
  flags.AddString("corpus", file, "FILE",
                  std::string(purpose) +
                      " (a .pages.zst file or any plain file read as pages; "
                      "default " +
                      kDefaultCorpusFile + ")");
  flags.NotEmpty("corpus");
}

void AddCorpusDirFlag(FlagSet& flags, std::string* dir, std::string_view when) {
  flags.AddString("corpus-dir", dir, "DIR",
                  "every *.pages.zst in DIR (default " +
                      std::string(kDefaultCorpusDir) + std::string(when) + ")");
  flags.NotEmpty("corpus-dir");
}

Result<std::vector<std::string>> FindCorpusDir(const std::string& dir,
                                               std::string_view hint) {
  std::error_code ec;
  const char* problem = "is missing (or not a folder)";
  if (std::filesystem::is_directory(dir, ec)) {
    auto found = corpus::FindCorpusFiles(dir);
    if (found.has_value() && !found->empty()) return std::move(*found);
    problem = "holds no *.pages.zst files";
  }
  return Err(Status::NotFound("no corpus: the corpus folder '" + dir + "'" +
                              AbsoluteNote(dir) + " " + problem + ".\n" +
                              std::string(hint)));
}

std::string RunLabel(std::size_t run, std::size_t runs) {
  return run == 0 ? std::string("warm-up")
                  : "run " + std::to_string(run) + "/" + std::to_string(runs);
}

}  // namespace ztier::tool
