// status_report.cc: the status report's JSON and zramctl-style table.
#include "ctl/status_report.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <variant>

#include "ctl/json_string.h"

namespace ztier::ctl {
namespace {

// ,"priorities":[{"priority":0,"algorithm":"lz4","pages":N},...]
void AppendPriorities(std::string& out,
                      const std::vector<PriorityStatus>& priorities) {
  out += ",\"priorities\":[";
  for (std::size_t i = 0; i < priorities.size(); ++i) {
    const PriorityStatus& p = priorities[i];
    if (i != 0) out += ',';
    out += "{\"priority\":" + std::to_string(p.priority) + ",\"algorithm\":";
    AppendJsonString(out, p.algorithm);
    out += ",\"pages\":" + std::to_string(p.pages) + "}";
  }
  out += ']';
}

// ---- a small JSON reader: enough for the report, strict on syntax ----

struct JsonValue;
using JsonObject = std::map<std::string, JsonValue, std::less<>>;
using JsonArray = std::vector<JsonValue>;
struct JsonValue {
  // monostate: null; bool; number (kept as its text); string; array; object.
  struct Number {
    std::string text;
  };
  std::variant<std::monostate, bool, Number, std::string,
               std::shared_ptr<JsonArray>, std::shared_ptr<JsonObject>>
      v;
};

class JsonReader {
 public:
  explicit JsonReader(std::string_view s) : s_(s) {}

  std::optional<JsonValue> ReadDocument() {
    auto v = ReadValue(0);
    SkipSpace();
    if (!v || pos_ != s_.size()) return std::nullopt;
    return v;
  }

 private:
  static constexpr int kMaxDepth = 16;

  void SkipSpace() {
    while (pos_ < s_.size() &&
           (s_[pos_] == ' ' || s_[pos_] == '\n' || s_[pos_] == '\t' ||
            s_[pos_] == '\r')) {
      ++pos_;
    }
  }
  bool Eat(char c) {
    SkipSpace();
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool EatWord(std::string_view w) {
    if (s_.substr(pos_, w.size()) != w) return false;
    pos_ += w.size();
    return true;
  }

  std::optional<std::string> ReadString() {
    if (!Eat('"')) return std::nullopt;
    std::string out;
    while (pos_ < s_.size()) {
      const char c = s_[pos_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) return std::nullopt;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= s_.size()) return std::nullopt;
      const char e = s_[pos_++];
      switch (e) {
        case '"': case '\\': case '/': out += e; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          unsigned code = 0;
          if (pos_ + 4 > s_.size()) return std::nullopt;
          auto [p, ec] =
              std::from_chars(s_.data() + pos_, s_.data() + pos_ + 4, code, 16);
          if (ec != std::errc() || p != s_.data() + pos_ + 4) {
            return std::nullopt;
          }
          pos_ += 4;
          // Names are ASCII; anything else is kept as '?'.
          out += code < 0x80 ? static_cast<char>(code) : '?';
          break;
        }
        default: return std::nullopt;
      }
    }
    return std::nullopt;
  }

  std::optional<JsonValue> ReadValue(int depth) {
    if (depth > kMaxDepth) return std::nullopt;
    SkipSpace();
    if (pos_ >= s_.size()) return std::nullopt;
    const char c = s_[pos_];
    JsonValue out;
    if (c == '{') {
      ++pos_;
      auto obj = std::make_shared<JsonObject>();
      if (!Eat('}')) {
        do {
          auto key = ReadString();
          if (!key || !Eat(':')) return std::nullopt;
          auto val = ReadValue(depth + 1);
          if (!val) return std::nullopt;
          (*obj)[*key] = std::move(*val);
        } while (Eat(','));
        if (!Eat('}')) return std::nullopt;
      }
      out.v = std::move(obj);
    } else if (c == '[') {
      ++pos_;
      auto arr = std::make_shared<JsonArray>();
      if (!Eat(']')) {
        do {
          auto val = ReadValue(depth + 1);
          if (!val) return std::nullopt;
          arr->push_back(std::move(*val));
        } while (Eat(','));
        if (!Eat(']')) return std::nullopt;
      }
      out.v = std::move(arr);
    } else if (c == '"') {
      auto str = ReadString();
      if (!str) return std::nullopt;
      out.v = std::move(*str);
    } else if (EatWord("true")) {
      out.v = true;
    } else if (EatWord("false")) {
      out.v = false;
    } else if (EatWord("null")) {
      out.v = std::monostate();
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      const std::size_t start = pos_;
      while (pos_ < s_.size() &&
             std::string_view("+-.eE0123456789").find(s_[pos_]) !=
                 std::string_view::npos) {
        ++pos_;
      }
      out.v = JsonValue::Number{std::string(s_.substr(start, pos_ - start))};
    } else {
      return std::nullopt;
    }
    return out;
  }

  std::string_view s_;
  std::size_t pos_ = 0;
};

Status BadReport(std::string_view what) {
  return Status::InvalidArgument("bad status report: " + std::string(what));
}

// Reads key `name` of `obj` as an unsigned number into *out; a missing key
// leaves *out alone (older servers), a key of another type is an error.
Status ReadU64(const JsonObject& obj, std::string_view name,
               std::uint64_t* out) {
  auto it = obj.find(name);
  if (it == obj.end()) return Status::Ok();
  const auto* num = std::get_if<JsonValue::Number>(&it->second.v);
  if (num == nullptr) return BadReport(std::string(name) + " is not a number");
  const std::string& t = num->text;
  auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), *out);
  if (ec != std::errc() || p != t.data() + t.size()) {
    return BadReport(std::string(name) + " is not an unsigned integer");
  }
  return Status::Ok();
}

Status ReadString(const JsonObject& obj, std::string_view name,
                  std::string* out) {
  auto it = obj.find(name);
  if (it == obj.end()) return Status::Ok();
  const auto* s = std::get_if<std::string>(&it->second.v);
  if (s == nullptr) return BadReport(std::string(name) + " is not a string");
  *out = *s;
  return Status::Ok();
}

// "priorities": an array of {"priority","algorithm","pages"} objects; a
// missing key leaves the list empty (older servers).
Status ReadPriorities(const JsonObject& obj, std::vector<PriorityStatus>* out) {
  auto it = obj.find("priorities");
  if (it == obj.end()) return Status::Ok();
  const auto* arr = std::get_if<std::shared_ptr<JsonArray>>(&it->second.v);
  if (arr == nullptr) return BadReport("priorities is not an array");
  for (const JsonValue& v : **arr) {
    const auto* o = std::get_if<std::shared_ptr<JsonObject>>(&v.v);
    if (o == nullptr) return BadReport("a priority is not an object");
    PriorityStatus p;
    ZT_RETURN_IF_ERROR(ReadU64(**o, "priority", &p.priority));
    ZT_RETURN_IF_ERROR(ReadString(**o, "algorithm", &p.algorithm));
    ZT_RETURN_IF_ERROR(ReadU64(**o, "pages", &p.pages));
    out->push_back(std::move(p));
  }
  return Status::Ok();
}

constexpr std::string_view kDefaultColumns[] = {
    "NAME", "ALGORITHM", "DISKSIZE", "DATA", "COMPR", "TOTAL", "STREAMS",
    "CLIENTS"};

bool TextColumn(std::string_view c) {
  return c == "NAME" || c == "ALGORITHM" || c == "MOUNTPOINT";
}

std::string Cell(const DeviceStatus& d, std::string_view c, bool bytes) {
  auto size = [&](std::uint64_t v) {
    return bytes ? std::to_string(v) : FormatHumanSize(v);
  };
  if (c == "NAME") return d.name;
  if (c == "DISKSIZE") return size(d.disksize);
  if (c == "DATA") return size(d.orig_data_size);
  if (c == "COMPR") return size(d.compr_data_size);
  if (c == "ALGORITHM") return d.algorithm;
  if (c == "STREAMS") return std::to_string(d.streams);
  if (c == "ZERO-PAGES") return std::to_string(d.same_pages);
  if (c == "TOTAL") return size(d.mem_used_total);
  if (c == "MEM-LIMIT") return size(d.mem_limit);
  if (c == "MEM-USED") return size(d.mem_used_max);
  if (c == "MIGRATED") return std::to_string(d.pages_compacted);
  if (c == "COMP-RATIO") {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.2f",
                  d.mem_used_total == 0
                      ? 0.0
                      : static_cast<double>(d.orig_data_size) /
                            static_cast<double>(d.mem_used_total));
    return buf;
  }
  if (c == "MOUNTPOINT") {
    auto it = d.notes.find("mount-point");
    return it == d.notes.end() ? "" : it->second;
  }
  if (c == "CLIENTS") return std::to_string(d.clients);
  return "";
}

// libsmartcols' raw output: a cell's spaces, backslashes and control
// characters as \xHH.
std::string RawEscape(std::string_view s) {
  std::string out;
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c <= 0x20 || c == '\\' || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    } else {
      out += ch;
    }
  }
  return out;
}

// The numbers of a device's JSON object, in the order they are written.
constexpr std::pair<const char*, std::uint64_t DeviceStatus::*> kNumbers[] = {
    {"initstate", &DeviceStatus::initstate},
    {"disksize", &DeviceStatus::disksize},
    {"orig_data_size", &DeviceStatus::orig_data_size},
    {"compr_data_size", &DeviceStatus::compr_data_size},
    {"mem_used_total", &DeviceStatus::mem_used_total},
    {"mem_limit", &DeviceStatus::mem_limit},
    {"mem_used_max", &DeviceStatus::mem_used_max},
    {"same_pages", &DeviceStatus::same_pages},
    {"huge_pages", &DeviceStatus::huge_pages},
    {"streams", &DeviceStatus::streams},
    {"clients", &DeviceStatus::clients},
    {"bd_count", &DeviceStatus::bd_count},
    {"bd_reads", &DeviceStatus::bd_reads},
    {"bd_writes", &DeviceStatus::bd_writes},
    {"failed_reads", &DeviceStatus::failed_reads},
    {"failed_writes", &DeviceStatus::failed_writes},
    {"invalid_io", &DeviceStatus::invalid_io},
    {"notify_free", &DeviceStatus::notify_free},
    {"pages_compacted", &DeviceStatus::pages_compacted},
    {"huge_pages_since", &DeviceStatus::huge_pages_since},
    {"writeback_limit", &DeviceStatus::writeback_limit},
    {"writeback_limit_enable", &DeviceStatus::writeback_limit_enable},
    {"incompressible_pages", &DeviceStatus::incompressible_pages},
    {"recompress_attempts", &DeviceStatus::recompress_attempts},
    {"recompressed_pages", &DeviceStatus::recompressed_pages},
    {"dict_id", &DeviceStatus::dict_id},
    {"dict_memory", &DeviceStatus::dict_memory},
    {"dict_pages", &DeviceStatus::dict_pages},
    {"units", &DeviceStatus::units},
    {"unit_pages", &DeviceStatus::unit_pages},
    {"units_reclaimed", &DeviceStatus::units_reclaimed},
    {"units_reclaim_refused", &DeviceStatus::units_reclaim_refused},
    {"bd_lost", &DeviceStatus::bd_lost},
    {"ublk_queues", &DeviceStatus::ublk_queues},
    {"ublk_queues_given_up", &DeviceStatus::ublk_queues_given_up},
};

}  // namespace

std::vector<DeviceStatus> CollectStatus(const DeviceRegistry& registry) {
  std::vector<DeviceStatus> out;
  for (const auto& d : registry.List()) {
    const PageStoreStats st = d->Stats();
    DeviceStatus s;
    s.name = d->name();
    s.algorithm = d->algorithm();
    s.initstate = d->initialized() ? 1 : 0;
    s.disksize = d->disksize();
    s.orig_data_size = st.orig_data_size;
    s.compr_data_size = st.compr_data_size;
    s.mem_used_total = st.mem_used_total;
    s.mem_limit = st.mem_limit;
    s.mem_used_max = st.mem_used_max;
    s.same_pages = st.same_pages;
    s.huge_pages = st.huge_pages;
    s.streams = d->streams();
    s.clients = static_cast<std::uint64_t>(std::max(0, d->clients()));
    s.backing_dev = d->ShowBackingDev();
    if (!s.backing_dev.empty() && s.backing_dev.back() == '\n') {
      s.backing_dev.pop_back();
    }
    s.bd_count = st.bd_count;
    s.bd_reads = st.bd_reads;
    s.bd_writes = st.bd_writes;
    s.failed_reads = st.failed_reads;
    s.failed_writes = st.failed_writes;
    s.notify_free = st.notify_free;
    s.pages_compacted = st.pages_compacted;
    s.huge_pages_since = st.huge_pages_since;
    s.writeback_limit = d->writeback_limit();
    s.writeback_limit_enable = d->writeback_limit_enable() ? 1 : 0;
    s.incompressible_pages = st.incompressible_pages;
    s.recompress_attempts = st.recompress_attempts;
    s.recompressed_pages = st.recompressed_pages;
    s.dict_id = static_cast<std::uint64_t>(st.dict_id);
    s.dict_memory = st.dict_memory;
    for (const std::uint64_t n : st.dict_pages) s.dict_pages += n;
    s.units = st.units;
    s.unit_pages = st.unit_pages;
    s.units_reclaimed = st.units_reclaimed;
    s.units_reclaim_refused = st.units_reclaim_refused;
    s.bd_lost = st.bd_lost;
    for (int p = 0; p < kMaxCodecPriorities; ++p) {
      std::string algo = p == 0 ? s.algorithm : d->recomp_algorithm(p);
      if (algo.empty()) continue;
      s.priorities.push_back({static_cast<std::uint64_t>(p), std::move(algo),
                              st.priority_pages[p]});
    }
    s.notes = d->notes();
    DeviceWatcher::Report r = d->DescribeByWatcher();
    s.ublk = std::move(r.disk);
    s.ublk_queues = r.queues;
    s.ublk_queues_given_up = r.queues_given_up;
    out.push_back(std::move(s));
  }
  return out;
}

std::string EncodeStatusJson(const std::vector<DeviceStatus>& devices) {
  std::string out = "{\"version\":1,\"devices\":[";
  bool first = true;
  for (const DeviceStatus& d : devices) {
    out += first ? "\n{" : ",\n{";
    first = false;
    out += "\"name\":";
    AppendJsonString(out, d.name);
    out += ",\"algorithm\":";
    AppendJsonString(out, d.algorithm);
    for (const auto& [key, member] : kNumbers) {
      out += ",\"";
      out += key;
      out += "\":";
      out += std::to_string(d.*member);
    }
    AppendPriorities(out, d.priorities);
    out += ",\"ublk\":";
    AppendJsonString(out, d.ublk);
    out += ",\"backing_dev\":";
    AppendJsonString(out, d.backing_dev);
    out += ",\"notes\":{";
    bool first_note = true;
    for (const auto& [key, value] : d.notes) {
      if (!first_note) out += ',';
      first_note = false;
      AppendJsonString(out, key);
      out += ':';
      AppendJsonString(out, value);
    }
    out += "}}";
  }
  out += devices.empty() ? "]}\n" : "\n]}\n";
  return out;
}

Result<std::vector<DeviceStatus>> DecodeStatusJson(std::string_view json) {
  auto doc = JsonReader(json).ReadDocument();
  if (!doc) return Err(BadReport("not JSON"));
  const auto* top = std::get_if<std::shared_ptr<JsonObject>>(&doc->v);
  if (top == nullptr) return Err(BadReport("not an object"));
  auto it = (*top)->find("devices");
  if (it == (*top)->end()) return Err(BadReport("no devices"));
  const auto* arr = std::get_if<std::shared_ptr<JsonArray>>(&it->second.v);
  if (arr == nullptr) return Err(BadReport("devices is not an array"));
  std::vector<DeviceStatus> out;
  for (const JsonValue& v : **arr) {
    const auto* obj = std::get_if<std::shared_ptr<JsonObject>>(&v.v);
    if (obj == nullptr) return Err(BadReport("a device is not an object"));
    const JsonObject& o = **obj;
    DeviceStatus d;
    ZT_RETURN_IF_ERROR(ReadString(o, "name", &d.name));
    ZT_RETURN_IF_ERROR(ReadString(o, "algorithm", &d.algorithm));
    for (const auto& [key, member] : kNumbers) {
      ZT_RETURN_IF_ERROR(ReadU64(o, key, &(d.*member)));
    }
    ZT_RETURN_IF_ERROR(ReadString(o, "ublk", &d.ublk));
    ZT_RETURN_IF_ERROR(ReadString(o, "backing_dev", &d.backing_dev));
    ZT_RETURN_IF_ERROR(ReadPriorities(o, &d.priorities));
    if (auto n = o.find("notes"); n != o.end()) {
      const auto* notes = std::get_if<std::shared_ptr<JsonObject>>(&n->second.v);
      if (notes == nullptr) return Err(BadReport("notes is not an object"));
      for (const auto& [key, value] : **notes) {
        const auto* text = std::get_if<std::string>(&value.v);
        if (text == nullptr) return Err(BadReport("a note is not a string"));
        d.notes[key] = *text;
      }
    }
    if (d.name.empty()) return Err(BadReport("a device has no name"));
    out.push_back(std::move(d));
  }
  return out;
}

// util-linux lib/strutils.c size_to_human_string(SIZE_SUFFIX_1LETTER, ...):
// the largest power of 1024 not above the value, one decimal rounded half
// up, a trailing ".0" dropped.
std::string FormatHumanSize(std::uint64_t bytes) {
  int exp = 0;  // get_exp(): 0, 10, 20, ... 60
  for (int shift = 10; shift <= 60; shift += 10) {
    if (bytes < (1ULL << shift)) break;
    exp = shift;
  }
  const char letter = "BKMGTPE"[exp / 10];
  std::uint64_t dec = exp != 0 ? bytes >> exp : bytes;
  std::uint64_t frac = exp != 0 ? bytes & ((1ULL << exp) - 1) : 0;
  if (frac != 0) {
    // Three digits after the point, then round to one.
    if (frac >= UINT64_MAX / 1000) {
      frac = ((frac / 1024) * 1000) / (1ULL << (exp - 10));
    } else {
      frac = (frac * 1000) / (1ULL << exp);
    }
    frac = ((frac + 50) / 100) * 10;
    if (frac == 100) {
      ++dec;
      frac = 0;
    }
  }
  char buf[40];
  if (frac != 0) {
    // "%d.%02d" with the trailing zero removed: frac is a multiple of 10.
    std::snprintf(buf, sizeof(buf), "%llu.%llu%c",
                  static_cast<unsigned long long>(dec),
                  static_cast<unsigned long long>(frac / 10), letter);
  } else {
    std::snprintf(buf, sizeof(buf), "%llu%c",
                  static_cast<unsigned long long>(dec), letter);
  }
  return buf;
}

Result<std::vector<std::string>> ParseStatusColumns(std::string_view list) {
  std::vector<std::string> out;
  if (list.starts_with('+')) {
    list.remove_prefix(1);
    out.assign(std::begin(kDefaultColumns), std::end(kDefaultColumns));
  }
  bool any = false;
  while (true) {
    const std::size_t comma = list.find(',');
    std::string name(list.substr(0, comma));
    for (char& c : name) c = static_cast<char>(std::toupper(
                                 static_cast<unsigned char>(c)));
    const auto* known = std::find(std::begin(kStatusColumns),
                                  std::end(kStatusColumns), name);
    if (known == std::end(kStatusColumns)) {
      return Err(Status::InvalidArgument(
          name.empty() ? "empty column name in the list"
                       : "unknown column: " + std::string(list.substr(0, comma))));
    }
    out.push_back(std::move(name));
    any = true;
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  if (!any) return Err(Status::InvalidArgument("no columns"));
  return out;
}

std::string FormatStatusTable(const std::vector<DeviceStatus>& devices,
                              const TableOptions& options) {
  if (devices.empty()) return "";
  std::vector<std::string> columns = options.columns;
  if (columns.empty()) {
    columns.assign(std::begin(kDefaultColumns), std::end(kDefaultColumns));
  }
  const std::size_t n_cols = columns.size();
  std::vector<std::vector<std::string>> rows;
  if (!options.no_headings) rows.push_back(columns);
  for (const DeviceStatus& d : devices) {
    std::vector<std::string> row;
    for (const std::string& c : columns) {
      row.push_back(Cell(d, c, options.bytes));
    }
    rows.push_back(std::move(row));
  }
  std::string out;
  if (options.raw) {
    for (const auto& row : rows) {
      std::string line;
      for (std::size_t c = 0; c < n_cols; ++c) {
        if (c != 0) line += ' ';
        line += RawEscape(row[c]);
      }
      out += line;
      out += '\n';
    }
    return out;
  }
  std::vector<std::size_t> width(n_cols, 0);
  for (const auto& row : rows) {
    for (std::size_t c = 0; c < n_cols; ++c) {
      width[c] = std::max(width[c], row[c].size());
    }
  }
  for (const auto& row : rows) {
    std::string line;
    for (std::size_t c = 0; c < n_cols; ++c) {
      if (c != 0) line += ' ';
      const std::string pad(width[c] - row[c].size(), ' ');
      line += TextColumn(columns[c]) ? row[c] + pad : pad + row[c];
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line;
    out += '\n';
  }
  return out;
}

std::string FormatStatusNotes(const std::vector<DeviceStatus>& devices) {
  std::string out;
  for (const DeviceStatus& d : devices) {
    if (d.notes.empty()) continue;
    out += d.name + ":";
    for (const auto& [key, value] : d.notes) out += " " + key + "=" + value;
    out += '\n';
  }
  return out;
}

std::string FormatStatusRecompression(
    const std::vector<DeviceStatus>& devices) {
  std::string out;
  for (const DeviceStatus& d : devices) {
    std::string line;
    for (const PriorityStatus& p : d.priorities) {
      if (p.priority == 0) continue;
      line += line.empty() ? " recomp_algorithm" : ",";
      line += " #" + std::to_string(p.priority) + " " + p.algorithm + " (" +
              std::to_string(p.pages) + " pages)";
    }
    if (!line.empty()) {
      out += d.name + ":" + line + "; " +
             std::to_string(d.recompressed_pages) + " recompressed, " +
             std::to_string(d.incompressible_pages) + " incompressible\n";
    }
    if (d.dict_id != 0) {
      out += d.name + ": dictionary " + std::to_string(d.dict_id) +
             " in use; " + std::to_string(d.dict_memory) + " bytes; " +
             std::to_string(d.dict_pages) + " pages made with dictionaries\n";
    }
    if (d.units != 0) {
      out += d.name + ": " + std::to_string(d.units) + " units holding " +
             std::to_string(d.unit_pages) + " live pages\n";
    }
  }
  return out;
}

std::string FormatStatusUblk(const std::vector<DeviceStatus>& devices) {
  std::string out;
  for (const DeviceStatus& d : devices) {
    if (d.ublk.empty()) continue;
    if (d.ublk_queues_given_up == 0) {
      out += d.name + ": " + d.ublk + ", " + std::to_string(d.ublk_queues) +
             " queues\n";
      continue;
    }
    out += d.name + ": " + d.ublk + ": " +
           std::to_string(d.ublk_queues_given_up) + " of " +
           std::to_string(d.ublk_queues) +
           " queues given up, their IO fails (the server's log says why); "
           "restart the server to serve them again\n";
  }
  return out;
}

}  // namespace ztier::ctl
