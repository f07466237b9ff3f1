// File: tools/ztier/bench_report.cc
//
// The result model's text, JSON and charts (bench_report.h).
#include "bench_report.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <utility>

#include "bench_harness.h"
#include "tool_common.h"

namespace ztier::tool {
namespace {

using Cell = Row::Cell;

// "MIN-MAX" of `s`, each with `decimals` decimals.
std::string MinMax(const SampleStats& s, int decimals) {
  return FormatDouble(s.min, decimals) + "-" + FormatDouble(s.max, decimals);
}

// The text columns one cell takes, one or two: heading and content.
std::vector<std::pair<std::string, std::string>> CellColumns(const Cell& c) {
  std::vector<std::pair<std::string, std::string>> out;
  if (const auto* f = std::get_if<Row::FigureValue>(&c.value)) {
    const SampleStats& s = f->stats;
    const auto shown = [&](std::string text) {
      return s.n > 0 ? text : std::string("-");
    };
    const std::string median = FormatDouble(s.median, f->decimals);
    if (f->show & kRange) {
      out.emplace_back(c.column + " median (min-max)",
                       shown(median + " (" + MinMax(s, f->decimals) + ")"));
    } else {
      out.emplace_back(c.column, shown(median));
    }
    if (f->show & (kCv | kOwnCv)) {
      out.emplace_back(f->show & kOwnCv ? c.column + " cv%" : "cv%",
                       shown(FormatDouble(s.cv_percent, 1)));
    }
  } else if (const auto* t = std::get_if<std::string>(&c.value)) {
    out.emplace_back(c.column, *t);
  } else if (const auto* i = std::get_if<std::int64_t>(&c.value)) {
    out.emplace_back(c.column, std::to_string(*i));
  } else if (const auto* n = std::get_if<Row::NumberValue>(&c.value)) {
    out.emplace_back(c.column, FormatDouble(n->value, n->decimals));
  } else {
    out.emplace_back(c.column, std::get<bool>(c.value) ? "yes" : "no");
  }
  return out;
}

std::string TableText(const Table& t) {
  // The columns, in the order rows first name them, and each row's cells.
  std::vector<std::string> heads;
  std::vector<Align> align;
  std::vector<std::vector<std::pair<std::string, std::string>>> rows;
  for (const Row& r : t.rows) {
    auto& row = rows.emplace_back();
    for (const Cell& c : r.cells()) {
      const bool text = std::holds_alternative<std::string>(c.value) ||
                        std::holds_alternative<bool>(c.value);
      for (auto& column : CellColumns(c)) {
        if (std::find(heads.begin(), heads.end(), column.first) ==
            heads.end()) {
          heads.push_back(column.first);
          align.push_back(text ? Align::kLeft : Align::kRight);
        }
        row.push_back(std::move(column));
      }
    }
  }
  TextTable table(heads, align);
  for (const auto& row : rows) {
    std::vector<std::string> cells(heads.size());
    for (const auto& [head, text] : row) {
      cells[std::find(heads.begin(), heads.end(), head) - heads.begin()] = text;
    }
    table.AddRow(std::move(cells));
  }
  return (t.title.empty() ? "" : "== " + t.title + " ==\n") + table.Render() +
         "\n";
}

void CellJson(JsonWriter& w, const Cell& c) {
  const std::string key = JsonKey(c.column);
  if (const auto* f = std::get_if<Row::FigureValue>(&c.value)) {
    WriteStatsJson(w, key, f->stats, f->decimals);
  } else if (const auto* t = std::get_if<std::string>(&c.value)) {
    w.StringField(key, *t);
  } else if (const auto* i = std::get_if<std::int64_t>(&c.value)) {
    w.IntField(key, *i);
  } else if (const auto* n = std::get_if<Row::NumberValue>(&c.value)) {
    w.DoubleField(key, n->value, n->decimals);
  } else {
    w.BoolField(key, std::get<bool>(c.value));
  }
}

}  // namespace

std::string JsonKey(std::string_view column) {
  std::string out;
  bool gap = false;
  for (const unsigned char u : column) {
    if (!std::isalnum(u)) {
      gap = true;
      continue;
    }
    if (gap && !out.empty()) out += '_';
    out += static_cast<char>(std::tolower(u));
    gap = false;
  }
  return out;
}

Report::Report(std::string benchmark, MachineInfo machine)
    : benchmark_(std::move(benchmark)), machine_(std::move(machine)) {}

void Report::Condition(std::string_view key, std::string value) {
  conditions_.emplace_back(std::string(key), std::move(value));
}

void Report::Line(std::string text) { blocks_.emplace_back(std::move(text)); }

void Report::Ratio(std::string what, std::span<const double> ratios,
                   std::string_view missing, std::string_view note) {
  auto it = std::find_if(tables_.begin(), tables_.end(),
                         [](const Table& t) { return t.name == "ratios"; });
  Table& t = it != tables_.end() ? *it : AddTable("ratios", "");
  t.text = false;
  t.AddRow().Text("ratio", what).Figure("x", ratios, 4);
  if (ratios.empty()) {
    Line(what + ": not measured (" + std::string(missing) + ")");
    return;
  }
  const SampleStats s = Summarize(ratios);
  Line(what + ": " + FormatDouble(s.median, 2) + "x (" + std::string(note) +
       ", " + MinMax(s, 2) + ")");
}

Table& Report::AddTable(std::string name, std::string title) {
  blocks_.emplace_back(tables_.size());
  return tables_.emplace_back(Table{std::move(name), std::move(title), {}});
}

void Report::AddChart(Chart chart) { charts_.push_back(std::move(chart)); }

std::string Report::Text() const {
  std::string out = MachineLine(machine_) + "\n";
  for (const auto& b : blocks_) {
    if (const auto* line = std::get_if<std::string>(&b)) {
      out += *line + "\n";
    } else if (const Table& t = tables_[std::get<std::size_t>(b)]; t.text) {
      out += TableText(t);
    }
  }
  return out;
}

std::string Report::Json() const {
  JsonWriter w;
  w.BeginObject();
  w.StringField("benchmark", benchmark_);
  w.Key("machine");
  WriteMachineJson(machine_, w);
  w.Key("conditions");
  w.BeginObject();
  for (const auto& [k, v] : conditions_) w.StringField(k, v);
  w.EndObject();
  w.Key("tables");
  w.BeginObject();
  for (const Table& t : tables_) {
    w.Key(t.name);
    w.BeginArray();
    for (const Row& r : t.rows) {
      w.BeginObject();
      for (const Cell& c : r.cells()) CellJson(w, c);
      w.EndObject();
    }
    w.EndArray();
  }
  w.EndObject();
  w.EndObject();
  return w.Take();
}

int Report::Finish(std::string_view command, const BenchFlags& flags) const {
  const std::string cmd(command);
  std::fputs(Text().c_str(), stdout);
  std::fflush(stdout);
  int status = 0;
  if (!flags.json.empty()) {
    if (Status s = WriteTextFile(flags.json, Json()); !s.ok()) {
      status = ReportFailure(command, s.ToString());
    } else {
      std::printf("\nwrote %s\n", flags.json.c_str());
    }
  }
  if (flags.plot.empty()) return status;
  const Result<Plotter> plotter = Plotter::Create(flags.plot);
  if (!plotter.has_value()) {
    std::fprintf(stderr, "%s: --plot %s: no charts drawn: %s\n", cmd.c_str(),
                 flags.plot.c_str(), plotter.error().message().c_str());
    return 1;
  }
  for (const Chart& c : charts_) {
    auto png = plotter->Render(c);
    if (png.has_value()) {
      std::fprintf(stderr, "wrote %s\n", png->c_str());
    } else {
      std::fprintf(stderr, "%s: --plot: %s\n", cmd.c_str(),
                   png.error().message().c_str());
      status = 1;
    }
  }
  return status;
}

PlotPoint SpreadPoint(double x, std::span<const double> samples) {
  const SampleStats s = Summarize(samples);
  return {x, s.median, s.min, s.max};
}

}  // namespace ztier::tool
