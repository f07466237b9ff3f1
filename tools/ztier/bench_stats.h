// File: tools/ztier/bench_stats.h
//
// The result model of every `ztier bench` experiment: summary statistics of
// repeated samples, the one percentile rule, a plain-text table printer, and
// a small JSON writer with the one way a figure is written (WriteStatsJson).
//
//   SampleStats s = Summarize({512.1, 498.7, 505.0});
//   // s.median 505.0, s.min 498.7, s.max 512.1, s.stddev, s.cv_percent
//
// The standard deviation is the sample one (n - 1 in the denominator; 0 for a
// single sample); CV is stddev / mean in percent (0 when the mean is 0).
//
// Percentiles are nearest rank (PercentileIndex): the q-quantile of n samples
// is the smallest one with at least q of them at or below it, so p50 of
// {1, 2, 3, 4} is 2 and p99 of 100 samples is the 99th smallest.
//
// Thread safety: plain values and functions; no shared state.
#ifndef ZTIER_TOOLS_ZTIER_BENCH_STATS_H_
#define ZTIER_TOOLS_ZTIER_BENCH_STATS_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ztier/status.h"

namespace ztier::tool {

struct SampleStats {
  std::size_t n = 0;
  double median = 0;  // mean of the two middle values for an even n
  double min = 0;
  double max = 0;
  double mean = 0;
  double stddev = 0;
  double cv_percent = 0;
};

// An empty sample gives all zeros.
SampleStats Summarize(std::span<const double> samples);

// The index, in ascending order, of the q-quantile of `n` samples by nearest
// rank: ceil(q * n) - 1, clamped to [0, n - 1]. q = 1 gives the largest.
// REQUIRES: n > 0, 0 <= q <= 1.
std::size_t PercentileIndex(std::size_t n, double q);

// The q-quantile of `v` by PercentileIndex; reorders `v` (nth_element).
// REQUIRES: !v.empty().
template <typename T>
T Percentile(std::vector<T>& v, double q) {
  auto at =
      v.begin() + static_cast<std::ptrdiff_t>(PercentileIndex(v.size(), q));
  std::nth_element(v.begin(), at, v.end());
  return *at;
}

// printf("%.*f") into a std::string; "-" (a table's "no figure") for an
// infinity or a NaN, such as the ratio of pages that all compress to
// nothing (same-filled).
std::string FormatDouble(double v, int decimals);

// `bytes` in MiB with one decimal and the unit: "12.5 MiB".
std::string FormatMiB(std::uint64_t bytes);

// Samples of bytes as MiB.
std::vector<double> MiB(std::vector<double> bytes);

enum class Align { kLeft, kRight };

// A table of text cells with a header row, padded to the widest cell of each
// column, two spaces between columns.
class TextTable {
 public:
  TextTable(std::vector<std::string> header, std::vector<Align> align);
  // REQUIRES: cells.size() == header.size().
  void AddRow(std::vector<std::string> cells);
  std::string Render() const;

 private:
  std::vector<std::string> header_;
  std::vector<Align> align_;
  std::vector<std::vector<std::string>> rows_;
};

// Builds a JSON document by hand (ztier takes no JSON dependency). Values are
// written as they are added; the caller nests Begin/End calls properly. Keys
// are only passed inside objects; inside arrays the key argument is omitted.
//
//   JsonWriter w;
//   w.BeginObject();
//   w.IntField("runs", 5);
//   w.Key("codecs"); w.BeginArray(); w.String("lz4"); w.EndArray();
//   w.EndObject();
//   std::string text = w.Take();
class JsonWriter {
 public:
  void BeginObject() { Open('{'); }
  // An object written on one line ({ "a": 1, "b": 2 }), with everything
  // nested in it; closed with EndObject().
  void BeginInlineObject();
  void EndObject() { Close('}'); }
  void BeginArray() { Open('['); }
  void EndArray() { Close(']'); }
  JsonWriter& Key(std::string_view key);
  void String(std::string_view value);
  void Int(std::int64_t value) { Raw(std::to_string(value)); }
  void Uint(std::uint64_t value) { Raw(std::to_string(value)); }
  // Non-finite values are written as null (JSON has no NaN).
  void Double(double value, int decimals = 3);
  void Bool(bool value) { Raw(value ? "true" : "false"); }
  void Null() { Raw("null"); }

  // Key(k) and then the value v: one member of the open object.
  void StringField(std::string_view k, std::string_view v) { Key(k).String(v); }
  void IntField(std::string_view k, std::int64_t v) { Key(k).Int(v); }
  void UintField(std::string_view k, std::uint64_t v) { Key(k).Uint(v); }
  void DoubleField(std::string_view k, double v, int decimals = 3) {
    Key(k).Double(v, decimals);
  }
  void BoolField(std::string_view k, bool v) { Key(k).Bool(v); }

  // The document, newline-terminated.
  std::string Take();

 private:
  void BeforeValue();
  // BeforeValue() and then `text` as it is.
  void Raw(std::string_view text);
  void Newline();
  void Open(char bracket);
  void Close(char bracket);

  std::string out_;
  // One entry per open container: whether it has an element yet.
  std::vector<bool> has_element_;
  bool after_key_ = false;
  // The depth from which containers are written on one line; none when
  // SIZE_MAX.
  std::size_t inline_from_ = SIZE_MAX;
};

// NAME_median, NAME_min, NAME_max and NAME_stddev of `s` with `decimals`
// decimals, and NAME_cv (percent, 2 decimals), as keys of the open object;
// each null when s.n is 0. The one shape of a figure in every experiment's
// JSON, beside the fields that identify it; tools/bench/compare_runs.py
// reads exactly that shape.
void WriteStatsJson(JsonWriter& w, std::string_view name, const SampleStats& s,
                    int decimals);

// Writes `text` to `path`; PosixError "open PATH" or "write PATH" when the
// file cannot be opened or written.
Status WriteTextFile(const std::string& path, std::string_view text);

// Writes `w`'s document (Take()) to `path`, as WriteTextFile.
inline Status WriteJsonFile(const std::string& path, JsonWriter& w) {
  return WriteTextFile(path, w.Take());
}

}  // namespace ztier::tool

#endif  // ZTIER_TOOLS_ZTIER_BENCH_STATS_H_
