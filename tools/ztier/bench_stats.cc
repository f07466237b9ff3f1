// File: tools/ztier/bench_stats.cc
//
// Statistics, table rendering and JSON writing for bench_stats.h.
#include "bench_stats.h"

#include <algorithm>
#include <cassert>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <utility>

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
  double sum = 0;
  for (double v : sorted) sum += v;
  s.mean = sum / static_cast<double>(s.n);
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
  return std::clamp<std::size_t>(static_cast<std::size_t>(std::max(rank, 1.0)),
                                 1, n) -
         1;
}

std::string FormatDouble(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", decimals, v);
  return buf;
}

std::string FormatSpread(std::span<const double> samples, int decimals) {
  const SampleStats s = Summarize(samples);
  return FormatDouble(s.median, decimals) + " (" +
         FormatDouble(s.min, decimals) + "-" + FormatDouble(s.max, decimals) +
         ")";
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

namespace {

// The length of the well-formed UTF-8 sequence at the start of `s`, or 0
// (a stray byte: not UTF-8, as a command line or file name may hold).
std::size_t Utf8Length(std::string_view s) {
  const auto b = [&](std::size_t i) {
    return i < s.size() ? static_cast<unsigned char>(s[i]) : 0u;
  };
  const unsigned c = b(0);
  const auto cont = [&](std::size_t i, unsigned lo = 0x80, unsigned hi = 0xbf) {
    return b(i) >= lo && b(i) <= hi;
  };
  if (c < 0x80) return 1;
  if (c >= 0xc2 && c <= 0xdf) return cont(1) ? 2 : 0;
  if (c >= 0xe0 && c <= 0xef) {
    const unsigned lo = c == 0xe0 ? 0xa0 : 0x80;  // no overlong forms
    const unsigned hi = c == 0xed ? 0x9f : 0xbf;  // no surrogates
    return cont(1, lo, hi) && cont(2) ? 3 : 0;
  }
  if (c >= 0xf0 && c <= 0xf4) {
    const unsigned lo = c == 0xf0 ? 0x90 : 0x80;
    const unsigned hi = c == 0xf4 ? 0x8f : 0xbf;  // to U+10FFFF
    return cont(1, lo, hi) && cont(2) && cont(3) ? 4 : 0;
  }
  return 0;
}

// `s` as a JSON string literal, quotes included. JSON text is UTF-8: a byte
// that is not part of a UTF-8 sequence becomes U+FFFD.
std::string JsonQuote(std::string_view s) {
  std::string out = "\"";
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char ch = s[i];
    const auto c = static_cast<unsigned char>(ch);
    if (c >= 0x80) {
      const std::size_t n = Utf8Length(s.substr(i));
      if (n == 0) {
        out += "\\ufffd";
      } else {
        out.append(s.substr(i, n));
        i += n - 1;
      }
      continue;
    }
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += ch;
        }
    }
  }
  return out + "\"";
}

}  // namespace

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

void JsonWriter::BeginObject() {
  BeforeValue();
  out_ += '{';
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
  if (had) {
    if (one_line) {
      out_ += ' ';
    } else {
      Newline();
    }
  }
  out_ += bracket;
  if (has_element_.size() < inline_from_) inline_from_ = SIZE_MAX;
}

void JsonWriter::EndObject() { Close('}'); }

void JsonWriter::BeginArray() {
  BeforeValue();
  out_ += '[';
  has_element_.push_back(false);
}

void JsonWriter::EndArray() { Close(']'); }

void JsonWriter::Key(std::string_view key) {
  BeforeValue();
  out_ += JsonQuote(key);
  out_ += ": ";
  after_key_ = true;
}

void JsonWriter::String(std::string_view value) {
  BeforeValue();
  out_ += JsonQuote(value);
}

void JsonWriter::Int(std::int64_t value) {
  BeforeValue();
  out_ += std::to_string(value);
}

void JsonWriter::Uint(std::uint64_t value) {
  BeforeValue();
  out_ += std::to_string(value);
}

void JsonWriter::Double(double value, int decimals) {
  BeforeValue();
  out_ += std::isfinite(value) ? FormatDouble(value, decimals) : "null";
}

void JsonWriter::Bool(bool value) {
  BeforeValue();
  out_ += value ? "true" : "false";
}

void JsonWriter::Null() {
  BeforeValue();
  out_ += "null";
}

void JsonWriter::StringField(std::string_view key, std::string_view value) {
  Key(key);
  String(value);
}

void JsonWriter::IntField(std::string_view key, std::int64_t value) {
  Key(key);
  Int(value);
}

void JsonWriter::UintField(std::string_view key, std::uint64_t value) {
  Key(key);
  Uint(value);
}

void JsonWriter::DoubleField(std::string_view key, double value, int decimals) {
  Key(key);
  Double(value, decimals);
}

void JsonWriter::BoolField(std::string_view key, bool value) {
  Key(key);
  Bool(value);
}

std::string JsonWriter::Take() {
  assert(has_element_.empty());
  out_ += '\n';
  return std::move(out_);
}

void WriteStatsJson(JsonWriter& w, std::string_view name, const SampleStats& s,
                    int decimals) {
  const std::string n(name);
  const struct {
    const char* suffix;
    double value;
    int decimals;
  } keys[] = {{"_median", s.median, decimals},
              {"_min", s.min, decimals},
              {"_max", s.max, decimals},
              {"_stddev", s.stddev, decimals},
              {"_cv", s.cv_percent, 2}};
  for (const auto& k : keys) {
    w.Key(n + k.suffix);
    if (s.n == 0) {
      w.Null();
    } else {
      w.Double(k.value, k.decimals);
    }
  }
}

Status WriteJsonFile(const std::string& path, JsonWriter& w) {
  return WriteTextFile(path, w.Take());
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
