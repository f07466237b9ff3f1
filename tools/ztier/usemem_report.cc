// File: tools/ztier/usemem_report.cc
//
// Text and JSON reports of `ztier usemem` (usemem_report.h).
#include "usemem_report.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <optional>

#include "bench_stats.h"
#include "ztier/page.h"

namespace ztier::tool {
namespace {

// One variant's figures over its runs.
struct Series {
  std::vector<double> avg_kb_s;
  std::vector<double> total_kb_s;
  std::vector<double> free_usecs;
  const UsememRunResult* last = nullptr;  // the variant's last run
};

Series Collect(const std::vector<UsememRun>& runs, bool batched) {
  Series s;
  for (const UsememRun& r : runs) {
    if (r.result.batched != batched) continue;
    s.avg_kb_s.push_back(r.result.avg_kb_s);
    s.total_kb_s.push_back(r.result.total_kb_s);
    s.free_usecs.push_back(r.result.free_usecs);
    s.last = &r.result;
  }
  return s;
}

// Total throughput, batched over one-at-a-time, within each run pair.
std::vector<double> Ratios(const std::vector<UsememRun>& runs) {
  std::vector<double> out;
  for (const UsememRun& b : runs) {
    if (!b.result.batched) continue;
    for (const UsememRun& o : runs) {
      if (o.run == b.run && !o.result.batched && o.result.total_kb_s > 0) {
        out.push_back(b.result.total_kb_s / o.result.total_kb_s);
      }
    }
  }
  return out;
}

// 1234567 -> "1,234,567", as the zswap store batching series' table.
std::string Thousands(double v) {
  const bool negative = v < 0;
  std::string digits =
      std::to_string(static_cast<std::uint64_t>((negative ? -v : v) + 0.5));
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return negative ? "-" + out : out;
}

// "17,810 (17,002-18,313)"; the median alone for one run.
std::string Spread(const std::vector<double>& v) {
  const SampleStats s = Summarize(v);
  if (s.n <= 1) return Thousands(s.median);
  return Thousands(s.median) + " (" + Thousands(s.min) + "-" +
         Thousands(s.max) + ")";
}

std::string Change(double base, double now) {
  if (base == 0) return now == 0 ? "0.00%" : "-";
  const double pct = 100.0 * (now - base) / base;
  return (pct >= 0 ? "+" : "") + FormatDouble(pct, 2) + "%";
}

struct Counter {
  const char* name;
  std::uint64_t RegionStats::*field;
};

constexpr Counter kCounters[] = {
    {"zswpout", &RegionStats::zswpout},
    {"zswpin", &RegionStats::zswpin},
    {"pool_limit_hit", &RegionStats::pool_limit_hit},
    {"reject_compress_poor", &RegionStats::reject_compress_poor},
    {"resident pages", &RegionStats::resident_pages},
    {"faults", &RegionStats::faults},
    {"wp_faults", &RegionStats::wp_faults},
};

void WriteRunJson(JsonWriter& j, const UsememRun& r) {
  const UsememRunResult& x = r.result;
  j.BeginObject();
  j.UintField("run", r.run);
  j.StringField("variant", UsememVariantName(x.batched));
  j.UintField("order", r.order);
  j.DoubleField("avg_kb_s", x.avg_kb_s, 1);
  j.DoubleField("total_kb_s", x.total_kb_s, 1);
  j.DoubleField("time_to_free_usecs", x.free_usecs, 1);
  j.DoubleField("wall_seconds", x.wall_seconds, 3);
  j.UintField("pages_verified", x.pages_verified);
  j.UintField("mismatches", x.mismatches);
  j.Key("workers");
  j.BeginArray();
  for (const UsememWorkerResult& w : x.workers) {
    j.BeginObject();
    j.DoubleField("fill_seconds", w.fill_seconds, 6);
    j.DoubleField("write_seconds", w.write_seconds, 6);
    j.DoubleField("read_seconds", w.read_seconds, 6);
    j.DoubleField("kb_s", w.kb_s, 1);
    j.EndObject();
  }
  j.EndArray();
  j.Key("stats");
  WriteRegionStatsJson(j, x.stats);
  j.EndObject();
}

void WriteSummaryJson(JsonWriter& j, const Series& s) {
  if (s.total_kb_s.empty()) {
    j.Null();
    return;
  }
  j.BeginObject();
  j.UintField("runs", s.total_kb_s.size());
  WriteStatsJson(j, "avg_kb_s", Summarize(s.avg_kb_s), 1);
  WriteStatsJson(j, "total_kb_s", Summarize(s.total_kb_s), 1);
  WriteStatsJson(j, "time_to_free_usecs", Summarize(s.free_usecs), 1);
  j.EndObject();
}

void WriteVariantJson(JsonWriter& j, const UsememConfig& cfg, bool batched) {
  UsememRunConfig rc = cfg.run;
  rc.batched = batched;
  const RegionOptions o = UsememRegionOptions(rc);
  j.BeginObject();
  j.StringField("name", UsememVariantName(batched));
  j.BoolField("batch_stores", o.batch_stores);
  j.StringField("batch_backend", BatchBackendName(o.batch_backend));
  j.UintField("batch_size", o.batch_size);
  j.EndObject();
}

void WriteConfigJson(JsonWriter& j, const UsememConfig& cfg) {
  const UsememRunConfig& r = cfg.run;
  j.BeginObject();
  j.UintField("workers", r.workers);
  j.UintField("size_per_worker_bytes", r.worker_bytes);
  j.UintField("region_bytes", r.workers * r.worker_bytes);
  j.StringField("budget", cfg.budget_text);
  j.UintField("budget_bytes", r.budget_bytes);
  j.StringField("codec", r.codec);
  j.UintField("page_cluster", r.page_cluster);
  j.UintField("max_pool_percent", r.max_pool_percent);
  j.DoubleField("sleep_seconds", r.sleep_seconds, 3);
  j.StringField("corpus", cfg.corpus_path);
  j.StringField("corpus_name", cfg.corpus_name);
  j.UintField("corpus_pages", cfg.corpus_pages);
  j.UintField("runs", cfg.runs);
  j.BoolField("compare_batching", cfg.compare);
  j.Key("variants");
  j.BeginArray();
  if (cfg.compare) WriteVariantJson(j, cfg, false);
  WriteVariantJson(j, cfg, true);
  j.EndArray();
  j.EndObject();
}

}  // namespace

const char* UsememVariantName(bool batched) {
  return batched ? "batched" : "one-at-a-time";
}

std::vector<bool> UsememRunOrder(std::size_t run, bool compare) {
  if (!compare) return {true};
  if (run % 2 == 0) return {false, true};
  return {true, false};
}

Chart UsememChart(const UsememConfig& cfg, const std::vector<UsememRun>& runs) {
  const UsememRunConfig& r = cfg.run;
  Chart c{.name = "usemem",
          .title = "usemem: " + std::to_string(r.workers) + " workers x " +
                   FormatMiB(r.worker_bytes) + ", budget " + cfg.budget_text +
                   ", " + r.codec + " (" + MedianOfRuns(cfg.runs) + ")",
          .x_label = "throughput measured",
          .y_label = "throughput (MiB/s = usemem's KB/s / 1024)",
          .style = PlotStyle::kBars,
          .x_tics = {{0, "average per worker"}, {1, "total (all workers)"}}};
  for (bool batched : {false, true}) {
    const Series s = Collect(runs, batched);
    PlotSeries bars{.title = UsememVariantName(batched)};
    int x = 0;
    for (const std::vector<double>* kb_s : {&s.avg_kb_s, &s.total_kb_s}) {
      if (!kb_s->empty()) {
        const SampleStats st = Summarize(*kb_s);
        bars.points.push_back({static_cast<double>(x), st.median / 1024,
                               st.min / 1024, st.max / 1024});
      }
      ++x;
    }
    c.series.push_back(std::move(bars));
  }
  return c;
}

void WriteRegionStatsJson(JsonWriter& j, const RegionStats& s) {
  j.BeginObject();
  const std::pair<const char*, std::uint64_t> fields[] = {
      {"pool_limit_hit", s.pool_limit_hit},
      {"reject_reclaim_fail", s.reject_reclaim_fail},
      {"reject_alloc_fail", s.reject_alloc_fail},
      {"reject_compress_fail", s.reject_compress_fail},
      {"reject_compress_poor", s.reject_compress_poor},
      {"written_back_pages", s.written_back_pages},
      {"pool_total_size", s.pool_total_size},
      {"stored_pages", s.stored_pages},
      {"stored_incompressible_pages", s.stored_incompressible_pages},
      {"zswpin", s.zswpin},
      {"zswpout", s.zswpout},
      {"zswpwb", s.zswpwb},
      {"swap_ra", s.swap_ra},
      {"swap_ra_hit", s.swap_ra_hit},
      {"resident_pages", s.resident_pages},
      {"written_back_now", s.written_back_now},
      {"faults", s.faults},
      {"wp_faults", s.wp_faults},
      {"evictions", s.evictions},
  };
  for (const auto& [name, value] : fields) {
    j.UintField(name, value);
  }
  j.EndObject();
}

std::string UsememConfigText(const UsememConfig& cfg) {
  const UsememRunConfig& r = cfg.run;
  const std::uint64_t region = r.workers * r.worker_bytes;
  std::string t = "config: workers=" + std::to_string(r.workers) +
                  " size=" + FormatMiB(r.worker_bytes) + " each (region " +
                  FormatMiB(region) + ", " +
                  std::to_string(region / kPageSize) +
                  " pages) budget=" + cfg.budget_text + " (" +
                  FormatMiB(r.budget_bytes) + ", " +
                  FormatDouble(100.0 * static_cast<double>(r.budget_bytes) /
                                   static_cast<double>(region),
                               1) +
                  "% of the region) codec=" + r.codec +
                  " page_cluster=" + std::to_string(r.page_cluster) +
                  " max_pool_percent=" + std::to_string(r.max_pool_percent) +
                  " sleep=" + FormatDouble(r.sleep_seconds, 1) + "s\n";
  t += "  corpus=" + cfg.corpus_path + " (" + cfg.corpus_name + ", " +
       std::to_string(cfg.corpus_pages) +
       " pages, copied cyclically into each worker's slice)\n";
  t += "  runs=" + std::to_string(cfg.runs) +
       (cfg.compare ? " per variant, alternating (fresh region each run)\n"
                    : " (fresh region each run)\n");
  if (cfg.compare) {
    t += "  one-at-a-time  batch_stores=false, serial backend: every page "
         "stored by itself (the zswap store batching series' baseline)\n";
  }
  t += "  batched        batch_stores=true, parallel backend, batch " +
       std::to_string(kMaxBatchSize) +
       ": runs of 16 victims in 64 KiB units (the zswap store batching "
       "series)\n";
  t += "  timed per worker: fill from the corpus + write every 8-byte word "
       "+ read back and check every page (the sleep is not); time to free: "
       "the region's destruction\n";
  return t;
}

std::string UsememResultText(const UsememConfig& cfg,
                             const std::vector<UsememRun>& runs) {
  const Series base = Collect(runs, false);
  const Series batched = Collect(runs, true);
  const bool compare = cfg.compare && !base.total_kb_s.empty();
  const std::size_t n = batched.total_kb_s.size();
  std::string t =
      "usemem: " + std::to_string(cfg.run.workers) + " workers x " +
      FormatMiB(cfg.run.worker_bytes) + ", budget " + cfg.budget_text + ", " +
      cfg.run.codec +
      (n > 1 ? "; median (min-max) over " + std::to_string(n) + " runs" : "") +
      "\n";

  std::vector<std::string> header = {""};
  std::vector<Align> align = {Align::kLeft};
  if (compare) {
    header.push_back("one-at-a-time");
    align.push_back(Align::kRight);
  }
  header.push_back("batched");
  align.push_back(Align::kRight);
  if (compare) {
    header.push_back("change");
    align.push_back(Align::kRight);
  }
  auto row = [&](const std::string& name, const std::vector<double>& b,
                 const std::vector<double>& x) {
    std::vector<std::string> cells = {name};
    if (compare) cells.push_back(Spread(b));
    cells.push_back(Spread(x));
    if (compare) {
      cells.push_back(Change(Summarize(b).median, Summarize(x).median));
    }
    return cells;
  };
  TextTable table(header, align);
  table.AddRow(
      row("Average Throughput (KB/s)", base.avg_kb_s, batched.avg_kb_s));
  table.AddRow(
      row("Total Throughput (KB/s)", base.total_kb_s, batched.total_kb_s));
  table.AddRow(
      row("Time to Free (usecs)", base.free_usecs, batched.free_usecs));
  if (n > 1) {  // the spread of the runs: stddev / mean of total throughput
    std::vector<std::string> cells = {"Total Throughput cv%"};
    if (compare) {
      cells.push_back(FormatDouble(Summarize(base.total_kb_s).cv_percent, 1));
    }
    cells.push_back(FormatDouble(Summarize(batched.total_kb_s).cv_percent, 1));
    if (compare) cells.push_back("");
    table.AddRow(std::move(cells));
  }
  t += table.Render();

  t += "counters at the end of the last run of each variant (every run in "
       "--json):\n";
  TextTable counters(header, align);
  const std::uint64_t budget_pages = cfg.run.budget_bytes / kPageSize;
  for (const Counter& c : kCounters) {
    std::vector<std::string> cells = {c.name};
    if (c.field == &RegionStats::resident_pages) {
      cells[0] +=
          " (budget " + Thousands(static_cast<double>(budget_pages)) + ")";
    }
    const std::uint64_t b =
        base.last != nullptr ? base.last->stats.*c.field : 0;
    const std::uint64_t x =
        batched.last != nullptr ? batched.last->stats.*c.field : 0;
    if (compare) cells.push_back(Thousands(static_cast<double>(b)));
    cells.push_back(Thousands(static_cast<double>(x)));
    if (compare) {
      cells.push_back(Change(static_cast<double>(b), static_cast<double>(x)));
    }
    counters.AddRow(cells);
  }
  t += counters.Render();

  std::uint64_t verified = 0;
  std::uint64_t mismatches = 0;
  std::uint64_t limit_runs = 0;
  for (const UsememRun& r : runs) {
    verified += r.result.pages_verified;
    mismatches += r.result.mismatches;
    if (r.result.stats.pool_limit_hit > 0) ++limit_runs;
  }
  if (limit_runs > 0) {
    t += "NOTE: the pool limit was hit in " + std::to_string(limit_runs) +
         " of " + std::to_string(runs.size()) +
         " runs: refused pages stayed resident over the budget, so those "
         "runs stored less than the budget asks; raise "
         "--max-pool-percent.\n";
  }
  const std::uint64_t pages =
      cfg.run.workers * cfg.run.worker_bytes / kPageSize;
  t += "verified: " + std::to_string(verified) + " pages read back and " +
       "checked (every page of every run: " + std::to_string(pages) + " x " +
       std::to_string(runs.size()) + " runs), " + std::to_string(mismatches) +
       " mismatches\n";
  if (compare) {
    const SampleStats s = Summarize(Ratios(runs));
    t += "batched / one-at-a-time: " + FormatDouble(s.median, 2) +
         "x (total throughput; median of per-run ratios, " +
         FormatDouble(s.min, 2) + "-" + FormatDouble(s.max, 2) + ")\n";
  }
  return t;
}

std::string UsememMismatchText(const UsememRun& run) {
  std::string t;
  for (const UsememMismatch& m : run.result.first_mismatches) {
    char line[256];
    std::snprintf(
        line, sizeof(line),
        "  run %zu %s: worker %zu page %zu word %zu: got 0x%016" PRIx64
        " want 0x%016" PRIx64 "\n",
        run.run, UsememVariantName(run.result.batched), m.worker, m.page,
        m.word, m.got, m.want);
    t += line;
  }
  if (run.result.mismatches > run.result.first_mismatches.size()) {
    t += "  ... " +
         std::to_string(run.result.mismatches -
                        run.result.first_mismatches.size()) +
         " more\n";
  }
  return t;
}

Status WriteUsememJson(const std::string& path, const MachineInfo& machine,
                       const UsememConfig& cfg,
                       const std::vector<UsememRun>& runs) {
  JsonWriter j;
  BeginResultJson(j, "ztier usemem", machine);
  j.Key("config");
  WriteConfigJson(j, cfg);
  j.Key("runs");
  j.BeginArray();
  for (const UsememRun& r : runs) WriteRunJson(j, r);
  j.EndArray();
  j.Key("summary");
  j.BeginObject();
  j.Key("one-at-a-time");
  WriteSummaryJson(j, Collect(runs, false));
  j.Key("batched");
  WriteSummaryJson(j, Collect(runs, true));
  WriteRatiosJson(j, "batched_over_one_at_a_time", Ratios(runs));
  std::uint64_t verified = 0;
  std::uint64_t mismatches = 0;
  for (const UsememRun& r : runs) {
    verified += r.result.pages_verified;
    mismatches += r.result.mismatches;
  }
  j.UintField("pages_verified", verified);
  j.UintField("mismatches", mismatches);
  j.EndObject();
  j.EndObject();
  return WriteJsonFile(path, j);
}

}  // namespace ztier::tool
