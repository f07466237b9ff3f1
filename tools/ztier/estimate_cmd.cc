// File: tools/ztier/estimate_cmd.cc
//
// `ztier estimate` (see estimate_cmd.h): the corpora (captured or loaded),
// one EngineMeasurer per codec and corpus, the table and the advice.
#include "estimate_cmd.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "bench_stats.h"
#include "corpus/capture.h"
#include "corpus/corpus.h"
#include "engine_measure.h"
#include "flags.h"
#include "progress.h"
#include "tool_common.h"
#include "ztier/codec.h"

namespace ztier::tool {
namespace {

constexpr const char kCommand[] = "ztier estimate";
// Under this share of memory saved, compressed memory is not worth it.
constexpr double kHelpsSaved = 0.10;
// A codec is "fast" at half the speed of the fastest, both ways.
constexpr double kFastShare = 0.5;

const char* const kDefaultCodecs[] = {"lzo",    "lz4",    "lz4hc",  "zstd:1",
                                      "zstd",   "zstd:9", "deflate"};

int Fail(const std::string& message) { return ReportFailure(kCommand, message); }

int UsageError(const std::string& message) {
  return ReportUsageError(kCommand, message);
}

// A --codec value: "zstd:9" is zstd at level 9, "lz4" lz4 at its default.
struct CodecSpec {
  std::string label;   // as given
  std::string params;  // algorithm_params tokens: "" or "level=N"
  std::shared_ptr<const Codec> codec;
};

Result<CodecSpec> ParseCodecSpec(const std::string& spec) {
  const auto colon = spec.find(':');
  const std::string name = spec.substr(0, colon);
  ZT_RETURN_IF_ERROR(CheckCodecName(name));
  CodecSpec c{spec, "", nullptr};
  if (colon != std::string::npos) {
    const std::string level = spec.substr(colon + 1);
    int v = 0;
    const auto r = std::from_chars(level.data(), level.data() + level.size(), v);
    if (level.empty() || r.ec != std::errc() ||
        r.ptr != level.data() + level.size()) {
      return Err(Status::InvalidArgument("codec '" + spec +
                                         "': the level after ':' is a number"));
    }
    c.params = "level=" + level;
  }
  // The level must be one the codec takes.
  auto made = MakeCodec(name, c.params);
  if (!made.has_value()) {
    return Err(Status::InvalidArgument("codec '" + spec +
                                       "': " + made.error().message()));
  }
  c.codec = std::move(*made);
  return c;
}

double Saved(const EstimateRow& r) {
  return 1.0 - static_cast<double>(r.mem_used_total) /
                   static_cast<double>(r.orig_bytes);
}

std::string Percent(double share) { return FormatDouble(share * 100, 1) + "%"; }

Result<EstimateRow> Measure(const CodecSpec& cs, const corpus::PageSet& set,
                            std::size_t runs) {
  const std::shared_ptr<const Codec>& codec = cs.codec;
  ZT_ASSIGN_OR_RETURN(
      std::unique_ptr<EngineMeasurer> m,
      EngineMeasurer::Create(codec, set, {.all_threads = 1,
                                          .algorithm_params = cs.params}));
  ZT_ASSIGN_OR_RETURN(SizeFigures f, m->MeasureSizes());
  EstimateRow row;
  row.codec = cs.label;
  row.level = codec->level();
  row.ratio = f.ratio;
  row.orig_bytes = f.orig_bytes;
  row.compressed_bytes = f.compressed_bytes;
  row.mem_used_total = f.mem_used_total;
  row.same_pages = f.same_pages;
  row.huge_pages = f.huge_pages;
  row.pages = set.size();
  std::vector<double> compress, decompress;
  std::vector<OpSample> samples;
  for (std::size_t run = 0; run <= runs; ++run) {  // run 0 warms up
    samples.clear();
    ZT_RETURN_IF_ERROR(m->Measure({BenchPath::kCodec, BenchOp::kCompress},
                                  &samples));
    ZT_RETURN_IF_ERROR(m->Measure({BenchPath::kCodec, BenchOp::kDecompress},
                                  &samples));
    if (run == 0) continue;
    for (const OpSample& s : samples) {
      (s.op == BenchOp::kCompress ? compress : decompress).push_back(s.mb_s);
    }
  }
  row.compress_mb_s = Summarize(compress).median;
  row.decompress_mb_s = Summarize(decompress).median;
  return row;
}

std::string Table(const std::vector<EstimateRow>& rows) {
  TextTable t({"codec", "level", "ratio", "mem_used", "saved", "same", "huge",
               "compress_MB/s", "decompress_MB/s"},
              {Align::kLeft, Align::kRight, Align::kRight, Align::kRight,
               Align::kRight, Align::kRight, Align::kRight, Align::kRight,
               Align::kRight});
  for (const EstimateRow& r : rows) {
    const double pages = static_cast<double>(r.pages);
    t.AddRow({r.codec, std::to_string(r.level), FormatDouble(r.ratio, 3),
              FormatMiB(r.mem_used_total), Percent(Saved(r)),
              Percent(static_cast<double>(r.same_pages) / pages),
              Percent(static_cast<double>(r.huge_pages) / pages),
              FormatDouble(r.compress_mb_s, 0),
              FormatDouble(r.decompress_mb_s, 0)});
  }
  return t.Render();
}

void WriteRowJson(JsonWriter& w, const EstimateRow& r) {
  const double pages = static_cast<double>(r.pages);
  w.BeginObject();
  w.Key("codec");
  w.String(r.codec);
  w.Key("level");
  w.Int(r.level);
  w.Key("ratio");
  w.Double(r.ratio, 4);
  w.Key("orig_bytes");
  w.Uint(r.orig_bytes);
  w.Key("compressed_bytes");
  w.Uint(r.compressed_bytes);
  w.Key("mem_used_total");
  w.Uint(r.mem_used_total);
  w.Key("saved");
  w.Double(Saved(r), 4);
  w.Key("same_pages");
  w.Uint(r.same_pages);
  w.Key("same_share");
  w.Double(static_cast<double>(r.same_pages) / pages, 4);
  w.Key("huge_pages");
  w.Uint(r.huge_pages);
  w.Key("huge_share");
  w.Double(static_cast<double>(r.huge_pages) / pages, 4);
  w.Key("compress_mb_s");
  w.Double(r.compress_mb_s, 1);
  w.Key("decompress_mb_s");
  w.Double(r.decompress_mb_s, 1);
  w.EndObject();
}

constexpr const char kSynopsis[] =
    "(--pid PID | --corpus FILE...) [--codec NAME[:LEVEL]]... [--runs N] "
    "[--json FILE] [--mappings anon|file|all] [--max-pages N]";
constexpr const char kAbout[] =
    "would compressed memory (zram, zswap, ztier) help this workload, and "
    "with which codec?\nStores the pages of a process (--pid) or of page "
    "corpora (--corpus) into a real PageStore\nwith each codec and reports "
    "the memory it would take, the shares of same-filled and\nincompressible "
    "pages, and the codec's speed on this machine; then recommends one.";

}  // namespace

Recommendation Recommend(const std::vector<EstimateRow>& rows) {
  Recommendation rec;
  double fastest_c = 0, fastest_d = 0;
  rec.smallest = 0;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    fastest_c = std::max(fastest_c, rows[i].compress_mb_s);
    fastest_d = std::max(fastest_d, rows[i].decompress_mb_s);
    if (rows[i].mem_used_total < rows[rec.smallest].mem_used_total) {
      rec.smallest = i;
    }
  }
  bool found = false;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const EstimateRow& r = rows[i];
    if (r.compress_mb_s < kFastShare * fastest_c ||
        r.decompress_mb_s < kFastShare * fastest_d) {
      continue;
    }
    if (!found || r.mem_used_total < rows[rec.recommended].mem_used_total) {
      rec.recommended = i;
      found = true;
    }
  }
  if (!found) rec.recommended = rec.smallest;  // only when speeds are 0
  const EstimateRow& best = rows[rec.smallest];
  const EstimateRow& pick = rows[rec.recommended];
  rec.helps = Saved(best) >= kHelpsSaved;
  if (!rec.helps) {
    rec.reason = "compressed memory would not help: even " + best.codec +
                 " saves only " + Percent(Saved(best)) + " (" +
                 Percent(static_cast<double>(best.huge_pages) /
                         static_cast<double>(best.pages)) +
                 " of the pages do not compress)";
    return rec;
  }
  rec.reason =
      pick.codec + ": it saves " + Percent(Saved(pick)) + " of the memory (" +
      (std::isfinite(pick.ratio) ? "ratio " + FormatDouble(pick.ratio, 2)
                                 : std::string("every page same-filled")) +
      ") and is among the fast codecs here (compress " +
      FormatDouble(pick.compress_mb_s, 0) + " MB/s, decompress " +
      FormatDouble(pick.decompress_mb_s, 0) +
      " MB/s; fast = at least half the fastest both ways)";
  if (rec.smallest != rec.recommended) {
    rec.reason += ". For the most saving, " + best.codec + " saves " +
                  Percent(Saved(best)) + " at " +
                  FormatDouble(best.compress_mb_s, 0) +
                  " MB/s compress: worth it where pages are stored rarely "
                  "and kept long (a second codec for idle pages, as zram's "
                  "recomp_algorithm)";
  }
  return rec;
}

// The pages to estimate: process `pid`'s (a capture) or the corpus files.
Result<std::vector<corpus::PageSet>> LoadSets(
    std::int64_t pid, corpus::MappingSet mappings, std::int64_t max_pages,
    const std::vector<std::string>& corpus_files, Progress& progress) {
  std::vector<corpus::PageSet> sets;
  if (pid == 0) {
    for (const std::string& path : corpus_files) {
      ZT_ASSIGN_OR_RETURN(corpus::PageSet set, LoadCorpus(path));
      sets.push_back(std::move(set));
    }
    return sets;
  }
  progress.Update("capturing process " + std::to_string(pid));
  auto c = corpus::CaptureProcess(
      static_cast<pid_t>(pid),
      {.mappings = mappings, .max_pages = static_cast<std::size_t>(max_pages)});
  progress.Clear();
  if (!c.has_value()) return Err(c.error());
  std::printf("process %d (%s): %zu pages of %llu eligible (%s mappings)\n",
              c->pid, c->comm.c_str(), c->pages.size(),
              static_cast<unsigned long long>(c->eligible),
              std::string(corpus::MappingSetName(c->mappings)).c_str());
  sets.push_back(std::move(c->pages));
  return sets;
}

// Measures every codec on `set`, prints its table and recommendation, and
// adds its object to `w`'s "corpora" array.
Status EstimateSet(const corpus::PageSet& set,
                   const std::vector<std::string>& codecs,
                   const std::vector<CodecSpec>& specs, std::size_t runs,
                   Progress& progress, JsonWriter& w) {
  std::vector<EstimateRow> rows;
  for (std::size_t i = 0; i < codecs.size(); ++i) {
    progress.Update(set.name() + ": " + codecs[i] + " (" +
                    std::to_string(i + 1) + "/" +
                    std::to_string(codecs.size()) + ")");
    auto row = Measure(specs[i], set, runs);
    if (!row.has_value()) {
      progress.Clear();
      return Status(row.error().code(), set.name() + ", " + codecs[i] + ": " +
                                            row.error().ToString());
    }
    rows.push_back(std::move(*row));
  }
  progress.Clear();
  const Recommendation rec = Recommend(rows);
  std::printf("\n== %s: %zu pages (%s)\n%s\n%s: %s\n", set.name().c_str(),
              set.size(), FormatMiB(set.size() * kPageSize).c_str(),
              Table(rows).c_str(), rec.helps ? "recommended" : "advice",
              rec.reason.c_str());
  std::fflush(stdout);
  w.BeginObject();
  w.StringField("name", set.name());
  w.UintField("pages", set.size());
  w.Key("results");
  w.BeginArray();
  for (const EstimateRow& r : rows) WriteRowJson(w, r);
  w.EndArray();
  w.BoolField("helps", rec.helps);
  w.StringField("recommended", rows[rec.recommended].codec);
  w.StringField("smallest", rows[rec.smallest].codec);
  w.StringField("reason", rec.reason);
  w.EndObject();
  return Status::Ok();
}

int RunEstimate(std::span<const std::string_view> args) {
  std::int64_t pid = 0;
  std::vector<std::string> corpus_files;
  std::vector<std::string> codecs;
  std::int64_t runs = 3;
  std::string json_path;
  std::string mappings_text = "anon";
  std::int64_t max_pages = 4096;
  FlagSet flags(kCommand, kSynopsis);
  flags.AddInt("pid", &pid, "PID", "capture this process's pages", 1,
               INT32_MAX);
  flags.AddList("corpus", &corpus_files, "FILE",
                "a page corpus (.pages.zst or plain pages); repeatable");
  flags.AddList("codec", &codecs, "NAME[:LEVEL]",
                "codec to try, repeatable (default: lzo, lz4, lz4hc, zstd:1, "
                "zstd, zstd:9, deflate)");
  flags.AddInt("runs", &runs, "N",
               "timed runs of each codec, after a warm-up (default 3)", 1, 100);
  flags.AddOutputFile("json", &json_path, "FILE",
                      "also write the figures as JSON");
  flags.AddString("mappings", &mappings_text, "anon|file|all",
                  "with --pid: which mappings (default anon)");
  flags.AddInt("max-pages", &max_pages, "N",
               "with --pid: the most pages to take (default 4096)", 1,
               std::int64_t{1} << 24);
  if (auto rc = flags.ParseCommandLine(args, kAbout)) return *rc;
  if ((pid != 0) == !corpus_files.empty()) {
    return UsageError("give either --pid PID or --corpus FILE");
  }
  if (pid == 0 && (flags.WasSet("mappings") || flags.WasSet("max-pages"))) {
    return UsageError("--mappings and --max-pages go with --pid");
  }
  if (codecs.empty()) codecs.assign(std::begin(kDefaultCodecs), std::end(kDefaultCodecs));
  std::vector<CodecSpec> specs;
  for (const std::string& spec : codecs) {
    auto c = ParseCodecSpec(spec);
    if (!c.has_value()) return UsageError(c.error().message());
    specs.push_back(std::move(*c));
  }

  auto mappings = corpus::ParseMappingSet(mappings_text);
  if (!mappings.has_value()) {
    return UsageError("--mappings: " + mappings.error().message());
  }
  Progress progress;
  auto sets = LoadSets(pid, *mappings, max_pages, corpus_files, progress);
  if (!sets.has_value()) return Fail(sets.error().message());

  JsonWriter w;
  w.BeginObject();
  w.Key("corpora");
  w.BeginArray();
  for (const corpus::PageSet& set : *sets) {
    if (Status st = EstimateSet(set, codecs, specs,
                                static_cast<std::size_t>(runs), progress, w);
        !st.ok()) {
      return Fail(st.message());
    }
  }
  w.EndArray();
  w.EndObject();
  if (!json_path.empty()) {
    if (Status s = WriteJsonFile(json_path, w); !s.ok()) {
      return Fail(s.message());
    }
  }
  return 0;
}

}  // namespace ztier::tool
