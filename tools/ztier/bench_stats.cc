// File: tools/ztier/bench_stats.cc
//
// Statistics, table rendering and JSON writing for bench_stats.h.
#include "bench_stats.h"

#include <algorithm>
#include <cassert>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <utility>

#include "ctl/json_string.h"

namespace ztier::tool {

SampleStats Summarize(std::span<const double> samples) {
  SampleStats s;
  s.n = samples.size();
  if (s.n == 0) return s;
  std::vector<double> sorted(samples.begin(), samples.end());
  std::sort(sorted.begin(), sorted.end());
  s.min = sorted.front();
  s.max = sorted.back();
  s.median = (s.n % 2 == 1) ? sorted[s.n / 2]
                            : (sorted[s.n / 2 - 1] + sorted[s.n / 2]) / 2.0;
  s.mean = std::accumulate(sorted.begin(), sorted.end(), 0.0) /
           static_cast<double>(s.n);
  if (s.n > 1) {
    double sq = 0;
    for (double v : sorted) sq += (v - s.mean) * (v - s.mean);
    s.stddev = std::sqrt(sq / static_cast<double>(s.n - 1));
  }
  s.cv_percent = s.mean != 0 ? 100.0 * s.stddev / s.mean : 0.0;
  return s;
}

std::size_t PercentileIndex(std::size_t n, double q) {
  assert(n > 0 && q >= 0 && q <= 1);
  // The epsilon keeps q * n that is an integer in exact arithmetic (0.99 *
  // 100) from rounding up past it.
  const double rank = std::ceil(q * static_cast<double>(n) - 1e-9);
  return std::min(static_cast<std::size_t>(std::max(rank, 1.0)), n) - 1;
}

std::string FormatDouble(double v, int decimals) {
  if (!std::isfinite(v)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", decimals, v);
  return buf;
}

std::string FormatMiB(std::uint64_t bytes) {
  return FormatDouble(static_cast<double>(bytes) / (1 << 20), 1) + " MiB";
}

std::vector<double> MiB(std::vector<double> bytes) {
  for (double& b : bytes) b /= 1048576.0;
  return bytes;
}

TextTable::TextTable(std::vector<std::string> header, std::vector<Align> align)
    : header_(std::move(header)), align_(std::move(align)) {
  assert(header_.size() == align_.size());
}

void TextTable::AddRow(std::vector<std::string> cells) {
  assert(cells.size() == header_.size());
  rows_.push_back(std::move(cells));
}

std::string TextTable::Render() const {
  std::vector<std::size_t> width(header_.size());
  for (std::size_t c = 0; c < header_.size(); ++c) {
    width[c] = header_[c].size();
    for (const auto& row : rows_) width[c] = std::max(width[c], row[c].size());
  }
  std::string out;
  auto emit = [&](const std::vector<std::string>& cells) {
    std::string line;
    for (std::size_t c = 0; c < cells.size(); ++c) {
      if (c > 0) line += "  ";
      const std::string pad(width[c] - cells[c].size(), ' ');
      line += align_[c] == Align::kLeft ? cells[c] + pad : pad + cells[c];
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  };
  emit(header_);
  for (const auto& row : rows_) emit(row);
  return out;
}

void JsonWriter::Newline() {
  if (has_element_.size() >= inline_from_) {
    out_ += ' ';
    return;
  }
  out_ += '\n';
  out_.append(2 * has_element_.size(), ' ');
}

void JsonWriter::BeforeValue() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (!has_element_.empty()) {
    if (has_element_.back()) out_ += ',';
    has_element_.back() = true;
    Newline();
  }
}

void JsonWriter::Raw(std::string_view text) {
  BeforeValue();
  out_ += text;
}

void JsonWriter::Open(char bracket) {
  Raw(std::string_view(&bracket, 1));
  has_element_.push_back(false);
}

void JsonWriter::BeginInlineObject() {
  BeginObject();
  inline_from_ = std::min(inline_from_, has_element_.size());
}

void JsonWriter::Close(char bracket) {
  assert(!has_element_.empty() && !after_key_);
  const bool had = has_element_.back();
  const bool one_line = has_element_.size() >= inline_from_;
  has_element_.pop_back();
  if (had && one_line) {
    out_ += ' ';
  } else if (had) {
    Newline();
  }
  out_ += bracket;
  if (has_element_.size() < inline_from_) inline_from_ = SIZE_MAX;
}

JsonWriter& JsonWriter::Key(std::string_view key) {
  String(key);
  out_ += ": ";
  after_key_ = true;
  return *this;
}

void JsonWriter::String(std::string_view value) {
  BeforeValue();
  ctl::AppendJsonString(out_, value);
}

void JsonWriter::Double(double value, int decimals) {
  Raw(std::isfinite(value) ? FormatDouble(value, decimals) : "null");
}

std::string JsonWriter::Take() {
  assert(has_element_.empty());
  out_ += '\n';
  return std::move(out_);
}

void WriteStatsJson(JsonWriter& w, std::string_view name, const SampleStats& s,
                    int decimals) {
  const std::pair<std::string_view, double> keys[] = {{"_median", s.median},
                                                      {"_min", s.min},
                                                      {"_max", s.max},
                                                      {"_stddev", s.stddev},
                                                      {"_cv", s.cv_percent}};
  for (const auto& [suffix, value] : keys) {
    // NaN is written as null: no samples.
    w.DoubleField(std::string(name).append(suffix), s.n == 0 ? NAN : value,
                  suffix == "_cv" ? 2 : decimals);
  }
}

Status WriteTextFile(const std::string& path, std::string_view text) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) return PosixError("open " + path, errno);
  const bool wrote = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  const int write_errno = errno;
  if (std::fclose(f) != 0 || !wrote) {
    return PosixError("write " + path, wrote ? errno : write_errno);
  }
  return Status::Ok();
}

}  // namespace ztier::tool
