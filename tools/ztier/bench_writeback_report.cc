// File: tools/ztier/bench_writeback_report.cc
//
// Text and JSON reports of `ztier bench writeback`
// (bench_writeback_report.h).
#include "bench_writeback_report.h"

#include <algorithm>
#include <iterator>
#include <utility>

#include "bench_proc.h"
#include "bench_stats.h"
#include "ztier/page.h"

namespace ztier::tool {
namespace {

// One variant's figures over the runs that measured it.
struct VariantSeries {
  std::vector<double> pages;
  std::vector<double> seconds;
  std::vector<double> mb_s;
};

const WritebackSample& StoreSample(const WritebackRunFigures& r, WbVariant v) {
  return v == WbVariant::kSync ? r.sync : r.batched;
}

VariantSeries Collect(const std::vector<WritebackRunFigures>& runs,
                      WbVariant v) {
  VariantSeries s;
  for (const WritebackRunFigures& r : runs) {
    if (v == WbVariant::kFio) {
      if (!r.fio.has_value()) continue;
      s.pages.push_back(static_cast<double>(r.fio->io_bytes / kPageSize));
      s.seconds.push_back(r.fio->seconds);
      s.mb_s.push_back(r.fio->mb_s);
      continue;
    }
    const WritebackSample& w = StoreSample(r, v);
    s.pages.push_back(static_cast<double>(w.written));
    s.seconds.push_back(w.seconds);
    s.mb_s.push_back(w.mb_s);
  }
  return s;
}

// batched MB/s over the other variant's, within each run that has both.
std::vector<double> Ratios(const std::vector<WritebackRunFigures>& runs,
                           WbVariant denominator) {
  std::vector<double> out;
  for (const WritebackRunFigures& r : runs) {
    double d = 0;
    if (denominator == WbVariant::kFio) {
      if (r.fio.has_value()) d = r.fio->mb_s;
    } else {
      d = StoreSample(r, denominator).mb_s;
    }
    if (d > 0) out.push_back(r.batched.mb_s / d);
  }
  return out;
}

std::optional<double> RunRatio(const WritebackRunFigures& r,
                               WbVariant denominator) {
  const std::vector<double> v = Ratios({r}, denominator);
  if (v.empty()) return std::nullopt;
  return v[0];
}

std::string RatioLine(const char* what, const std::vector<double>& ratios,
                      const char* missing) {
  if (ratios.empty())
    return std::string(what) + ": not measured (" + missing + ")\n";
  const SampleStats s = Summarize(ratios);
  return std::string(what) + ": " + FormatDouble(s.median, 2) +
         "x (median of per-run ratios, " + FormatDouble(s.min, 2) + "-" +
         FormatDouble(s.max, 2) + ")\n";
}

std::string BdText(const BdStat& b) {
  return std::to_string(b.count) + " " + std::to_string(b.reads) + " " +
         std::to_string(b.writes);
}

void WriteBd(JsonWriter& j, std::string_view key, const BdStat& b) {
  j.Key(key);
  j.BeginObject();
  j.UintField("bd_count", b.count);
  j.UintField("bd_reads", b.reads);
  j.UintField("bd_writes", b.writes);
  j.EndObject();
}

void WriteSample(JsonWriter& j, const WritebackSample& s) {
  j.BeginObject();
  j.UintField("slots", s.slots);
  j.UintField("candidates", s.candidates);
  j.UintField("pages", s.written);
  j.DoubleField("seconds", s.seconds, 6);
  j.DoubleField("mb_s", s.mb_s, 2);
  WriteBd(j, "bd_stat_before", s.bd_before);
  WriteBd(j, "bd_stat_after", s.bd_after);
  j.UintField("mem_used_total_before", s.mem_used_before);
  j.UintField("mem_used_total_after", s.mem_used_after);
  j.UintField("verified_slots", s.verified);
  j.UintField("verified_written_back", s.verified_from_disk);
  j.BoolField("backing_direct", s.direct);
  j.EndObject();
}

void WriteFio(JsonWriter& j, const std::optional<FioSample>& f) {
  if (!f.has_value()) {
    j.Null();
    return;
  }
  j.BeginObject();
  j.UintField("pages", f->io_bytes / kPageSize);
  j.UintField("io_bytes", f->io_bytes);
  j.DoubleField("bw_bytes", f->bw_bytes, 0);
  j.DoubleField("seconds", f->seconds, 6);
  j.DoubleField("mb_s", f->mb_s, 2);
  j.EndObject();
}

void WriteOptionalDouble(JsonWriter& j, std::optional<double> v) {
  if (v.has_value()) {
    j.Double(*v, 4);
  } else {
    j.Null();
  }
}

void WriteSeriesSummary(JsonWriter& j, const VariantSeries& s) {
  if (s.mb_s.empty()) {
    j.Null();
    return;
  }
  j.BeginObject();
  j.UintField("runs", s.mb_s.size());
  j.DoubleField("pages", Summarize(s.pages).median, 0);
  WriteStatsJson(j, "seconds", Summarize(s.seconds), 6);
  WriteStatsJson(j, "mb_s", Summarize(s.mb_s), 2);
  j.EndObject();
}

void WriteConfig(JsonWriter& j, const WritebackBenchConfig& cfg) {
  j.BeginObject();
  j.StringField("corpus", cfg.corpus_path);
  j.StringField("corpus_name", cfg.corpus_name);
  j.UintField("corpus_pages", cfg.corpus_pages);
  j.UintField("size_bytes", cfg.size_bytes);
  j.UintField("slots", cfg.size_bytes / kPageSize);
  j.StringField("dir", cfg.dir);
  j.UintField("runs", cfg.runs);
  j.UintField("warmup_runs", 1);
  j.StringField("codec", cfg.codec);
  j.UintField("batch_size", cfg.batch_size);
  j.UintField("max_io_pages", cfg.max_io_pages);
  j.BoolField("compressed", cfg.compressed);
  j.UintField("verify_stride", WritebackRunConfig{}.verify_stride);
  j.Key("fio");
  if (cfg.fio_path.empty()) {
    j.Null();
  } else {
    j.BeginObject();
    j.StringField("path", cfg.fio_path);
    j.StringField("version", cfg.fio_version);
    j.StringField("command", bench::CommandLine(cfg.fio_args));
    j.EndObject();
  }
  j.EndObject();
}

}  // namespace

std::string_view WbVariantName(WbVariant v) {
  switch (v) {
    case WbVariant::kSync:
      return "sync";
    case WbVariant::kBatched:
      return "batched";
    case WbVariant::kFio:
      return "fio";
  }
  return "?";
}

std::vector<WbVariant> RunOrder(std::size_t run, bool with_fio) {
  std::vector<WbVariant> order = {WbVariant::kSync, WbVariant::kBatched};
  if (with_fio) order.push_back(WbVariant::kFio);
  if (run % 2 == 1) std::reverse(order.begin(), order.end());
  return order;
}

std::string WritebackConfigText(const WritebackBenchConfig& cfg) {
  const std::string qd = std::to_string(cfg.batch_size);
  const std::string io_kib =
      std::to_string(cfg.max_io_pages * kPageSize / 1024);
  std::string t =
      "config: corpus=" + cfg.corpus_path + " (" + cfg.corpus_name + ", " +
      std::to_string(cfg.corpus_pages) +
      " pages, repeated to fill) size=" + std::to_string(cfg.size_bytes) +
      " (" + std::to_string(cfg.size_bytes / kPageSize) +
      " slots) codec=" + cfg.codec +
      " compressed=" + (cfg.compressed ? "yes" : "no") +
      " runs=" + std::to_string(cfg.runs) + " (+1 warm-up, not counted)\n";
  t += "  files: " + cfg.image_path + " (backing), " + cfg.fio_file_path +
       " (fio)\n";
  t += "  sync     PageStore::Writeback in_flight=1 max_io_pages=1: one "
       "synchronous 4 KiB pwrite per page (zram before its writeback "
       "batching series)\n";
  t += "  batched  PageStore::Writeback in_flight=" + qd +
       " max_io_pages=" + std::to_string(cfg.max_io_pages) +
       ": io_uring, up to " + qd + " IOs of up to " + io_kib + " KiB\n";
  if (cfg.fio_path.empty()) {
    t += "  fio      not measured: fio not found on PATH\n";
  } else {
    t += "  fio      " + cfg.fio_version + ": " +
         bench::CommandLine(cfg.fio_args) + "\n";
  }
  t += "  timed: the Writeback() call alone (fill, idle marking and the "
       "check of every " +
       std::to_string(WritebackRunConfig{}.verify_stride) +
       "th slot are not); variants alternate: sync, batched, fio / fio, "
       "batched, sync\n";
  return t;
}

std::string WritebackResultText(const WritebackBenchConfig& cfg,
                                const std::vector<WritebackRunFigures>& runs) {
  TextTable table({"variant", "pages", "seconds median (min-max)",
                   "MB/s median (min-max)", "cv%"},
                  {Align::kLeft, Align::kRight, Align::kRight, Align::kRight,
                   Align::kRight});
  for (WbVariant v : {WbVariant::kSync, WbVariant::kBatched, WbVariant::kFio}) {
    const VariantSeries s = Collect(runs, v);
    if (s.mb_s.empty()) {
      table.AddRow({std::string(WbVariantName(v)), "-", "not measured",
                    "not measured", "-"});
      continue;
    }
    table.AddRow({std::string(WbVariantName(v)),
                  FormatDouble(Summarize(s.pages).median, 0),
                  FormatSpread(s.seconds, 3), FormatSpread(s.mb_s, 1),
                  FormatDouble(Summarize(s.mb_s).cv_percent, 1)});
  }
  std::string t = table.Render();
  bool direct = true;
  if (!runs.empty()) {
    t += "\nlast run: mem_used_total before -> after writeback; bd_stat "
         "(count reads writes) after\n";
    for (WbVariant v : {WbVariant::kSync, WbVariant::kBatched}) {
      const WritebackSample& w = StoreSample(runs.back(), v);
      t += "  " + std::string(WbVariantName(v)) +
           std::string(8 - WbVariantName(v).size(), ' ') +
           FormatMiB(w.mem_used_before) + " -> " + FormatMiB(w.mem_used_after) +
           "; bd_stat " + BdText(w.bd_after) + "; " +
           std::to_string(w.verified) + " slots checked (" +
           std::to_string(w.verified_from_disk) + " read from the file)\n";
    }
  }
  for (const WritebackRunFigures& r : runs) {
    direct = direct && r.sync.direct && r.batched.direct;
  }
  if (!direct) {
    t += "\nNOTE: the file system refused O_DIRECT for " + cfg.image_path +
         ": writeback went through the page cache, while fio uses "
         "--direct=1.\n";
  }
  t += "\n" + RatioLine("batched / one-at-a-time",
                        Ratios(runs, WbVariant::kSync), "no runs");
  t += RatioLine("batched / fio sequential write",
                 Ratios(runs, WbVariant::kFio), "fio not found on PATH");
  return t;
}

Chart WritebackChart(const WritebackBenchConfig& cfg,
                     const std::vector<WritebackRunFigures>& runs) {
  Chart c{.name = "writeback",
          .title = "Writeback of " + FormatMiB(cfg.size_bytes) + " (" +
                   cfg.codec + ", " + cfg.corpus_name +
                   "): one page at a time vs batched vs fio (" +
                   MedianOfRuns(runs.size()) + ")",
          .x_label = "variant",
          .y_label = "throughput (MB/s written, log scale)",
          .style = PlotStyle::kBars,
          .log_y = true};
  const std::pair<WbVariant, const char*> kColumns[] = {
      {WbVariant::kSync, "sync (a 4 KiB pwrite per page)"},
      {WbVariant::kBatched, "batched (io_uring)"},
      {WbVariant::kFio, "fio (the disk's limit)"}};
  PlotSeries bars{.title = "MB/s"};
  for (std::size_t i = 0; i < std::size(kColumns); ++i) {
    c.x_tics.push_back({static_cast<double>(i), kColumns[i].second});
    const VariantSeries s = Collect(runs, kColumns[i].first);
    // A log axis has no 0: a variant that wrote nothing is left out.
    if (s.mb_s.empty() || Summarize(s.mb_s).min <= 0) continue;
    const SampleStats st = Summarize(s.mb_s);
    bars.points.push_back({static_cast<double>(i), st.median, st.min, st.max});
  }
  c.series.push_back(std::move(bars));
  return c;
}

Status WriteWritebackJson(const std::string& path, const MachineInfo& machine,
                          const WritebackBenchConfig& cfg,
                          const std::vector<WritebackRunFigures>& runs) {
  JsonWriter j;
  BeginResultJson(j, "ztier bench writeback", machine);
  j.Key("config");
  WriteConfig(j, cfg);
  j.Key("runs");
  j.BeginArray();
  for (const WritebackRunFigures& r : runs) {
    j.BeginObject();
    j.UintField("run", r.run);
    j.Key("order");
    j.BeginArray();
    for (WbVariant v : r.order) j.String(WbVariantName(v));
    j.EndArray();
    j.Key("sync");
    WriteSample(j, r.sync);
    j.Key("batched");
    WriteSample(j, r.batched);
    j.Key("fio");
    WriteFio(j, r.fio);
    j.Key("batched_over_sync");
    WriteOptionalDouble(j, RunRatio(r, WbVariant::kSync));
    j.Key("batched_over_fio");
    WriteOptionalDouble(j, RunRatio(r, WbVariant::kFio));
    j.EndObject();
  }
  j.EndArray();
  j.Key("summary");
  j.BeginObject();
  for (WbVariant v : {WbVariant::kSync, WbVariant::kBatched, WbVariant::kFio}) {
    j.Key(WbVariantName(v));
    WriteSeriesSummary(j, Collect(runs, v));
  }
  WriteRatiosJson(j, "batched_over_sync", Ratios(runs, WbVariant::kSync));
  WriteRatiosJson(j, "batched_over_fio", Ratios(runs, WbVariant::kFio));
  j.EndObject();
  j.EndObject();
  return WriteJsonFile(path, j);
}

}  // namespace ztier::tool
