// File: tools/ztier/bench_report.cc
//
// The result model's text, JSON and charts (bench_report.h).
#include "bench_report.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <utility>

#include "bench_harness.h"
#include "bench_stats.h"
#include "tool_common.h"

namespace ztier::tool {
namespace {

bool IsText(const Cell& c) {
  return std::holds_alternative<std::string>(c.value) ||
         std::holds_alternative<bool>(c.value);
}

// The text columns one cell takes: heading and content, one or two.
void CellColumns(const Cell& c, std::vector<std::string>* heads,
                 std::vector<std::string>* texts) {
  if (const auto* f = std::get_if<Cell::FigureValue>(&c.value)) {
    const SampleStats s = Summarize(f->samples);
    const bool any = !f->samples.empty();
    if (f->show & kRange) {
      heads->push_back(c.column + " median (min-max)");
      texts->push_back(any ? FormatSpread(f->samples, f->decimals) : "-");
    } else {
      heads->push_back(c.column);
      texts->push_back(any ? FormatDouble(s.median, f->decimals) : "-");
    }
    if (f->show & (kCv | kOwnCv)) {
      heads->push_back(f->show & kOwnCv ? c.column + " cv%" : "cv%");
      texts->push_back(any ? FormatDouble(s.cv_percent, 1) : "-");
    }
    return;
  }
  heads->push_back(c.column);
  if (const auto* t = std::get_if<std::string>(&c.value)) {
    texts->push_back(*t);
  } else if (const auto* i = std::get_if<std::int64_t>(&c.value)) {
    texts->push_back(std::to_string(*i));
  } else if (const auto* n = std::get_if<Cell::NumberValue>(&c.value)) {
    texts->push_back(FormatDouble(n->value, n->decimals));
  } else {
    texts->push_back(std::get<bool>(c.value) ? "yes" : "no");
  }
}

std::string TableText(const Table& t) {
  // The columns, in the order rows first name them.
  std::vector<std::string> heads;
  std::vector<Align> align;
  for (const Row& r : t.rows) {
    for (const Cell& c : r.cells()) {
      std::vector<std::string> h, x;
      CellColumns(c, &h, &x);
      for (const std::string& name : h) {
        if (std::find(heads.begin(), heads.end(), name) != heads.end()) {
          continue;
        }
        heads.push_back(name);
        align.push_back(IsText(c) ? Align::kLeft : Align::kRight);
      }
    }
  }
  TextTable table(heads, align);
  for (const Row& r : t.rows) {
    std::vector<std::string> cells(heads.size());
    for (const Cell& c : r.cells()) {
      std::vector<std::string> h, x;
      CellColumns(c, &h, &x);
      for (std::size_t i = 0; i < h.size(); ++i) {
        cells[std::find(heads.begin(), heads.end(), h[i]) - heads.begin()] =
            x[i];
      }
    }
    table.AddRow(std::move(cells));
  }
  std::string out;
  if (!t.title.empty()) out += "== " + t.title + " ==\n";
  return out + table.Render() + "\n";
}

void CellJson(JsonWriter& w, const Cell& c) {
  const std::string key = JsonKey(c.column);
  if (const auto* f = std::get_if<Cell::FigureValue>(&c.value)) {
    WriteStatsJson(w, key, Summarize(f->samples), f->decimals);
  } else if (const auto* t = std::get_if<std::string>(&c.value)) {
    w.StringField(key, *t);
  } else if (const auto* i = std::get_if<std::int64_t>(&c.value)) {
    w.IntField(key, *i);
  } else if (const auto* n = std::get_if<Cell::NumberValue>(&c.value)) {
    w.DoubleField(key, n->value, n->decimals);
  } else {
    w.BoolField(key, std::get<bool>(c.value));
  }
}

}  // namespace

std::string JsonKey(std::string_view column) {
  std::string out;
  bool gap = false;
  for (char ch : column) {
    const unsigned char u = static_cast<unsigned char>(ch);
    if (std::isalnum(u)) {
      if (gap && !out.empty()) out += '_';
      out += static_cast<char>(std::tolower(u));
      gap = false;
    } else {
      gap = true;
    }
  }
  return out;
}

Row& Row::Text(std::string_view column, std::string value) {
  cells_.push_back({std::string(column), std::move(value)});
  return *this;
}

Row& Row::Int(std::string_view column, std::int64_t value) {
  cells_.push_back({std::string(column), value});
  return *this;
}

Row& Row::Number(std::string_view column, double value, int decimals) {
  cells_.push_back({std::string(column), Cell::NumberValue{value, decimals}});
  return *this;
}

Row& Row::Bool(std::string_view column, bool value) {
  cells_.push_back({std::string(column), value});
  return *this;
}

Row& Row::Figure(std::string_view column, std::span<const double> samples,
                 int decimals, unsigned show) {
  cells_.push_back(
      {std::string(column),
       Cell::FigureValue{{samples.begin(), samples.end()}, decimals, show}});
  return *this;
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
       ", " + FormatDouble(s.min, 2) + "-" + FormatDouble(s.max, 2) + ")");
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
  BuildJson(w);
  return w.Take();
}

void Report::BuildJson(JsonWriter& w) const {
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
}

int Report::Finish(std::string_view command, const BenchFlags& flags) const {
  ChartWriter charts(std::string(command), flags.plot);
  std::fputs(Text().c_str(), stdout);
  std::fflush(stdout);
  int status = 0;
  if (!flags.json.empty()) {
    JsonWriter w;
    BuildJson(w);
    if (Status s = WriteJsonFile(flags.json, w); !s.ok()) {
      status = ReportFailure(command, s.ToString());
    } else {
      std::printf("\nwrote %s\n", flags.json.c_str());
    }
  }
  if (!charts.Write(charts_)) status = 1;
  return status;
}

PlotPoint SpreadPoint(double x, std::span<const double> samples) {
  const SampleStats s = Summarize(samples);
  return {x, s.median, s.min, s.max};
}

}  // namespace ztier::tool
