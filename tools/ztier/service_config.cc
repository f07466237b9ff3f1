// File: tools/ztier/service_config.cc
//
// The parser of service_config.h. Key meanings follow zram-generator.conf(5)
// (systemd/zram-generator, man/zram-generator.conf.md).
#include "service_config.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <set>

#include "nbd/nbd_backing_file.h"
#include "platform/read_file.h"
#include "size_expr.h"
#include "tool_common.h"
#include "ztier/codec.h"
#include "ztier/page_store.h"
#include "ztier/recompress_tokens.h"

namespace ztier::tool {
namespace {

constexpr const char* kDefaultSize = "min(ram / 2, 4096)";

std::string Trim(std::string_view s) {
  std::size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// zram and a number, as zram-generator takes a section for a device
// (src/config.rs, read_devices: sname.starts_with("zram") &&
// sname[4..].parse::<u64>().is_ok()): [zram0], [zram12], [zram007]. (Rust
// also parses "+1" as a u64; a device named zram+1 is not one the kernel
// makes, so it is not taken here.)
bool ValidDeviceName(std::string_view n) {
  if (!n.starts_with("zram")) return false;
  const std::string_view digits = n.substr(4);
  if (digits.empty() || digits.size() > 20) return false;
  std::uint64_t value = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return false;
    const std::uint64_t d = static_cast<std::uint64_t>(c - '0');
    if (value > (UINT64_MAX - d) / 10) return false;  // past u64, as Rust's
    value = value * 10 + d;
  }
  return true;
}

// The [ztier] keys: `ztier serve` flags that make sense in a file.
const std::set<std::string, std::less<>>& ZtierKeys() {
  static const std::set<std::string, std::less<>> keys = {
      "unix",           "ctl",          "listen",
      "max-connections", "workers",     "max-request-size",
      "max-in-flight",  "max-in-flight-bytes", "handshake-timeout",
      "io-timeout",     "tls",          "tls-cert",
      "tls-key",        "backing-encrypt", "mlock",
      "prealloc",       "metrics-listen", "metrics-unix",
      "log-level",      "policy",       "ublk",
      "ublk-queues",    "ublk-depth",   "ublk-max-io",
      "unit-pages",     "backing-connections", "backing-timeout"};
  return keys;
}

const std::set<std::string, std::less<>>& DeviceKeys() {
  static const std::set<std::string, std::less<>> keys = {
      "zram-size",      "zram-fraction", "max-zram-size",
      "zram-resident-limit", "compression-algorithm",
      "writeback-device", "host-memory-limit", "memory-limit", "swap-priority",
      "fs-type",        "mount-point",   "options"};
  return keys;
}

std::string Join(const std::set<std::string, std::less<>>& keys) {
  std::string out;
  for (const std::string& k : keys) out += (out.empty() ? "" : ", ") + k;
  return out;
}

class ConfigParser {
 public:
  // A section's keys: each one's value and line.
  using Keys = std::map<std::string, std::pair<std::string, int>>;

  ConfigParser(std::string_view path, double ram) : path_(path), ram_(ram) {}

  // systemd.syntax(5)'s rules, as zram-generator reads its files: a
  // section given again continues the first, a key given again replaces
  // its earlier value, and an empty value resets the key to its default.
  Result<ServiceConfig> Parse(std::string_view text) {
    ServiceConfig config;
    config.path = path_;
    enum { kNone, kZtier, kDevice, kIgnored } in = kNone;
    // A UTF-8 byte order mark, as some editors write, is not text.
    if (text.starts_with("\xEF\xBB\xBF")) text.remove_prefix(3);
    // Each device's section (first header's line) and keys, in file order.
    std::vector<std::pair<DeviceConfig, Keys>> devices;
    Keys ztier_keys;
    Keys* keys = nullptr;  // the current section's
    std::string section;
    int line_no = 0;
    int run_on_lines = 0;  // a quoted value's lines after its first
    std::size_t pos = 0;
    while (pos <= text.size()) {
      const std::size_t line_start = pos;
      std::size_t end = text.find('\n', pos);
      if (end == std::string_view::npos) end = text.size();
      const std::string line = Trim(text.substr(pos, end - pos));
      pos = end + 1;
      line_no += 1 + run_on_lines;
      run_on_lines = 0;
      if (line.empty() || line[0] == '#' || line[0] == ';') continue;
      if (line[0] == '[') {
        if (line.back() != ']') {
          return Error(line_no, "a section header must end with ']': " + line);
        }
        section = Trim(line.substr(1, line.size() - 2));
        if (section == "ztier") {
          in = kZtier;
          keys = &ztier_keys;
        } else if (ValidDeviceName(section)) {
          in = kDevice;
          auto it = std::find_if(devices.begin(), devices.end(), [&](auto& d) {
            return d.first.name == section;
          });
          if (it == devices.end()) {
            DeviceConfig d;
            d.name = section;
            d.line = line_no;
            devices.emplace_back(std::move(d), Keys{});
            it = devices.end() - 1;
          }
          keys = &it->second;
        } else {
          // zram-generator ignores every section but [zramN], with a
          // warning; so does ztier, so that its files work unchanged.
          in = kIgnored;
          keys = nullptr;
          Warn(line_no,
               "section [" + section + "] ignored: " +
                   (section.starts_with("zram")
                        ? "a device's section is zram and a number, [zram0], "
                          "[zram1], ..., as zram-generator takes it"
                        : "want [ztier] or a device's, [zram0], [zram1], "
                          "... (zram and a number, as zram-generator takes "
                          "it)"));
        }
        continue;
      }
      // A setting, read as rust-ini, zram-generator's ini parser, reads it
      // (0.17's Parser::parse; zram-generator 1.1.2 takes rust-ini >=0.15,
      // <0.18), escapes and all (ReadEscaped). The key ends at its first
      // '=' or ':' ("zram-size: 64" is a setting), on its line (there it
      // may run on to a later one's).
      const std::size_t key_start =
          line_start + text.substr(line_start).find_first_not_of(" \t\r\f\v");
      ZT_ASSIGN_OR_RETURN(auto key_read, ReadEscaped(text, key_start, "=:\n",
                                                     line_start, line_no));
      const std::size_t sep = key_read.second;
      if (sep == text.size() || text[sep] == '\n') {
        return Error(line_no, "want 'key = value', '[section]' or a comment, "
                              "not '" + line + "'");
      }
      const std::string key = Trim(key_read.first);
      if (key.empty()) return Error(line_no, "a value with no key: " + line);
      // The value starts at its first character that is not a space
      // (Parser::parse_whitespace_except_line_break). One that starts with
      // a quote, " or ', loses that quote and the next one of its kind,
      // and the text after that one to the end of its line is kept
      // (Parser::parse_val, with rust-ini's default ParseOption:
      // enabled_quote): "zstd" is zstd, and "a" b is a b. The quoted text
      // runs on across lines to its closing quote; with none the file is
      // refused.
      std::size_t at = sep + 1;
      while (at < text.size() && text[at] != '\n' && text[at] != '\r' &&
             std::isspace(static_cast<unsigned char>(text[at]))) {
        ++at;
      }
      std::string value;
      if (at < text.size() && (text[at] == '"' || text[at] == '\'')) {
        const char quote = text[at];
        ZT_ASSIGN_OR_RETURN(auto quoted, ReadEscaped(text, at + 1, {&quote, 1},
                                                     line_start, line_no));
        if (quoted.second == text.size()) {
          return Error(line_no, std::string("no closing ") + quote +
                                    " in the value of '" + key +
                                    "' (its quote runs on to the end of the "
                                    "file)");
        }
        if (quoted.second > end) {
          Warn(line_no,
               "the quoted value of '" + key + "' runs on to line " +
                   std::to_string(LineOf(text, quoted.second, end, line_no)) +
                   " (its closing " + quote +
                   " is there), as zram-generator reads it");
        }
        value = std::move(quoted.first);
        at = quoted.second + 1;
      }
      ZT_ASSIGN_OR_RETURN(auto rest,
                          ReadEscaped(text, at, "\n", line_start, line_no));
      value = Trim(value + rest.first);
      // A value that runs on (a quote, or a backslash before a line's end)
      // takes the lines up to where it ends.
      if (rest.second > end) {
        run_on_lines = LineOf(text, rest.second, end, line_no) - line_no;
        pos = rest.second + 1;
      }
      // zram-generator warns about settings before the first section and
      // ignores them (1.1.2's src/config.rs, read_devices), as ztier does.
      if (in == kNone) {
        Warn(line_no, "'" + key + "' is outside a section: ignored" +
                          (key.starts_with("set!")
                               ? " (zram-generator 1.2's set! variables, a "
                                 "program's output, are not supported: an "
                                 "expression that names one fails)"
                               : ", as zram-generator does (put it under "
                                 "[zram0] or [ztier])"));
        continue;
      }
      if (in == kIgnored) continue;
      const auto& known = in == kZtier ? ZtierKeys() : DeviceKeys();
      if (!known.contains(key)) {
        const std::string what = "unknown key '" + key + "' in [" + section +
                                 "]; known: " + Join(known);
        // ztier's own section is checked; a device's unknown key is
        // ignored with a warning, as zram-generator does (a newer
        // generator's key must not stop the service).
        if (in == kZtier) return Error(line_no, what);
        Warn(line_no, what + " (ignored, as zram-generator does)");
        continue;
      }
      if (auto it = keys->find(key); it != keys->end()) {
        Warn(line_no,
             "'" + key + "' of [" + section + "] is given again " +
                 (value.empty()
                      ? "empty: it is reset to its default"
                      : "(after line " + std::to_string(it->second.second) +
                            "): this value is used"));
      }
      if (value.empty()) {
        keys->erase(key);
      } else {
        (*keys)[key] = {value, line_no};
      }
    }
    // The [ztier] keys in file order, each where it was last set.
    for (const auto& [key, v] : ztier_keys) {
      config.ztier.push_back({key, v.first, v.second});
    }
    std::sort(config.ztier.begin(), config.ztier.end(),
              [](const ConfigEntry& a, const ConfigEntry& b) {
                return a.line < b.line;
              });
    for (auto& [device, device_keys] : devices) {
      auto done = FinishDevice(std::move(device), device_keys);
      if (!done.has_value()) return Err(done.error());
      config.devices.push_back(std::move(*done));
    }
    config.warnings = std::move(warnings_);
    return config;
  }

 private:
  Result<DeviceConfig> FinishDevice(DeviceConfig d, const Keys& keys) {
    for (const auto& [key, v] : keys) d.key_lines[key] = v.second;
    const auto get = [&](const char* key) -> const std::pair<std::string, int>* {
      auto it = keys.find(key);
      return it == keys.end() ? nullptr : &it->second;
    };
    // zram-size
    d.size_expression = kDefaultSize;
    int size_line = d.line;
    if (auto* v = get("zram-size")) {
      d.size_expression = v->first;
      size_line = v->second;
    }
    const auto* fraction = get("zram-fraction");
    const auto* max_size = get("max-zram-size");
    if (fraction != nullptr || max_size != nullptr) {
      const int line = (fraction != nullptr ? fraction : max_size)->second;
      // They override zram-size, as in zram-generator (its config.rs,
      // set_disksize_if_enabled).
      if (get("zram-size") != nullptr) {
        Warn(line, "zram-fraction and max-zram-size override zram-size (as "
                   "zram-generator reads them)");
        size_line = line;
      }
      // zram-generator's deprecated pair: min(ram * fraction, max), the
      // product rounded down to whole MiB first (its config.rs,
      // set_disksize_if_enabled, casts it to u64).
      std::string f = "0.5";
      // Rust's f64 parse, which zram-generator's is, takes "inf" and
      // "infinity" (any case, either sign); ram * inf cast to u64 is the
      // largest, so max-zram-size is the size.
      std::string unsigned_f =
          fraction != nullptr ? Lower(fraction->first) : "";
      if (unsigned_f.starts_with('+')) unsigned_f.erase(0, 1);
      const bool infinite = unsigned_f == "inf" || unsigned_f == "infinity";
      if (infinite && (max_size == nullptr || max_size->first == "none")) {
        return Error(fraction->second,
                     "zram-fraction: inf wants a max-zram-size (ram * inf "
                     "is no size)");
      }
      if (fraction != nullptr && !infinite) {
        auto v = EvalSizeExpression(fraction->first, ram_);
        if (!v.has_value() || *v < 0 || fraction->first.find("ram") !=
                                            std::string::npos) {
          return Error(fraction->second,
                       "zram-fraction: want a non-negative number, not '" +
                           fraction->first + "'");
        }
        f = fraction->first;
        // An expression is one factor of ram * f, however low its
        // operators bind ("0.5 - 0.25" is a quarter, not ram / 2 - 0.25).
        if (f.find_first_not_of("0123456789.") != std::string::npos) {
          f = "(" + f + ")";
        }
      }
      d.size_expression = "floor(ram * " + f + ")";
      // With no max-zram-size there is no cap: zram-generator.conf(5) says
      // 4096, but its code since 1.1.0 (Debian 12 ships 1.1.2) takes
      // max_mb = u64::MAX then (src/config.rs, set_disksize_if_enabled);
      // 1.0's default of 4096 went with zram-size's arrival.
      if (max_size != nullptr && max_size->first != "none") {
        const std::string& m = max_size->first;
        auto v = EvalSizeExpression(m, ram_);
        if (!v.has_value() || *v < 0 || m.find("ram") != std::string::npos) {
          return Error(max_size->second,
                       "max-zram-size: want MiB or none, not '" + m + "'");
        }
        d.size_expression =
            infinite ? m : "min(" + d.size_expression + ", " + m + ")";
      }
      Warn(line, "zram-fraction and max-zram-size are deprecated; this is "
                 "zram-size = " + d.size_expression);
    }
    ZT_ASSIGN_OR_RETURN(d.disksize,
                        MiBExpression("zram-size", d.size_expression, size_line));
    if (d.disksize == 0) d.skipped = "zram-size is 0";
    if (auto* v = get("zram-resident-limit")) {
      ZT_ASSIGN_OR_RETURN(d.mem_limit,
                          MiBExpression("zram-resident-limit", v->first, v->second));
    }
    // compression-algorithm
    d.comp_algorithm = "lzo";  // the kernel's default, lzo-rle
    if (auto* v = get("compression-algorithm")) {
      if (Status s = ParseAlgorithms(v->first, v->second, &d); !s.ok()) {
        return Err(s);
      }
    }
    if (auto* v = get("writeback-device")) {
      if (v->first != "none") {
        if (v->first[0] != '/' && !nbd::IsNbdUri(v->first)) {
          return Error(v->second, "writeback-device must be an absolute path, "
                                  "an NBD URI or none, not '" + v->first + "'");
        }
        d.backing_dev = v->first;
      }
    }
    const auto* host_limit = get("host-memory-limit");
    if (host_limit == nullptr && get("memory-limit") != nullptr) {
      host_limit = get("memory-limit");  // zram-generator's older name
      Warn(host_limit->second,
           "memory-limit is deprecated; it is host-memory-limit");
    }
    if (auto* v = host_limit) {
      if (v->first != "none") {
        ZT_ASSIGN_OR_RETURN(std::uint64_t limit,
                            Unsigned("host-memory-limit", v->first, v->second,
                                     " (MiB) or none"));
        if (ram_ > static_cast<double>(limit) && d.skipped.empty()) {
          d.skipped = "host-memory-limit is " + std::to_string(limit) +
                      " MiB and this host has " +
                      std::to_string(static_cast<long long>(ram_)) + " MiB";
        }
      }
    }
    for (const char* key : {"fs-type", "mount-point", "options"}) {
      if (auto* v = get(key)) d.notes[key] = v->first;
    }
    if (auto* v = get("mount-point"); v != nullptr && v->first[0] != '/') {
      return Error(v->second, "mount-point must be an absolute path, not '" +
                                  v->first + "'");
    }
    if (auto* v = get("swap-priority")) {
      ZT_ASSIGN_OR_RETURN(std::int64_t prio,
                          Integer("swap-priority", v->first, v->second, -1,
                                  32767, " from -1 to 32767"));
      d.notes["swap-priority"] = std::to_string(prio);
    }
    if (d.is_swap()) {
      d.notes.try_emplace("swap-priority", "100");
    } else {
      d.notes.try_emplace("fs-type", "ext2");
    }
    d.notes.try_emplace("options", "discard");
    return d;
  }

  // "lz4", "zstd(level=3)", "lzo-rle zstd(level=9) (type=idle)", as
  // zram-generator.conf(5): the first algorithm is comp_algorithm, the next
  // ones recomp_algorithm at priorities 1, 2, 3, and a final "(...)" with no
  // algorithm the parameters of a recompress pass.
  Status ParseAlgorithms(const std::string& text, int line, DeviceConfig* d) {
    ZT_ASSIGN_OR_RETURN(std::vector<std::string> items,
                        SplitAlgorithms(text, line));
    if (items.back()[0] == '(') {
      ZT_ASSIGN_OR_RETURN(d->recompress_params,
                          ParseRecompressGroup(items.back(), line));
      items.pop_back();
    }
    if (items.empty()) {
      return Error(line, "compression-algorithm '" + text +
                             "': no algorithm before the recompression "
                             "parameters").error();
    }
    if (items.size() > kMaxCodecPriorities) {
      return Error(line, "compression-algorithm '" + text + "': at most " +
                             std::to_string(kMaxCodecPriorities - 1) +
                             " recompression algorithms after the first "
                             "(zram's priorities 1 to 3)").error();
    }
    ZT_RETURN_IF_ERROR(ParseAlgorithm(items[0], line, &d->comp_algorithm,
                                      &d->algorithm_params));
    for (std::size_t i = 1; i < items.size(); ++i) {
      RecompAlgorithmConfig r;
      ZT_RETURN_IF_ERROR(ParseAlgorithm(items[i], line, &r.name, &r.params));
      d->recomp_algorithms.push_back(std::move(r));
    }
    return Status::Ok();
  }

  // The whitespace-separated items of compression-algorithm, a "(...)"
  // kept whole.
  Result<std::vector<std::string>> SplitAlgorithms(const std::string& text,
                                                   int line) {
    std::vector<std::string> items;
    std::string cur;
    int depth = 0;
    for (char c : text) {
      if (c == '(') ++depth;
      if (c == ')' && --depth < 0) {
        return Error(line, "compression-algorithm: unbalanced ')' in '" +
                               text + "'");
      }
      if (depth == 0 && std::isspace(static_cast<unsigned char>(c))) {
        if (!cur.empty()) items.push_back(std::move(cur));
        cur.clear();
      } else {
        cur += c;
      }
    }
    if (depth != 0) {
      return Error(line, "compression-algorithm: missing ')' in '" + text + "'");
    }
    if (!cur.empty()) items.push_back(std::move(cur));
    for (std::size_t i = 0; i + 1 < items.size(); ++i) {
      if (items[i][0] == '(') {
        return Error(line, "compression-algorithm '" + text +
                               "': a parameter list without an algorithm "
                               "must come last (recompression parameters)");
      }
    }
    return items;
  }

  // "(type=idle,max_pages=100)": recompress tokens, checked as the kernel
  // parses them; returned space-separated.
  Result<std::string> ParseRecompressGroup(const std::string& item, int line) {
    if (item.back() != ')') {
      return Error(line, "compression-algorithm: text after ')' in '" + item +
                             "'");
    }
    std::string tokens = item.substr(1, item.size() - 2);
    for (char& c : tokens) {
      if (c == ',') c = ' ';
    }
    tokens = Trim(tokens);
    if (auto parsed = ParseRecompressTokens(tokens); !parsed.has_value()) {
      return Error(line, "compression-algorithm: recompression parameters '" +
                             item + "': " + parsed.error().message());
    }
    return tokens;
  }

  Status ParseAlgorithm(const std::string& item, int line, std::string* name,
                        std::string* params) {
    auto parsed = ParseAlgorithmItem(item, "compression-algorithm");
    if (!parsed.has_value()) return Error(line, parsed.error().message()).error();
    *name = std::move(parsed->name);
    *params = std::move(parsed->params);
    return Status::Ok();
  }

  Result<std::uint64_t> MiBExpression(const char* key, const std::string& text,
                                      int line) {
    auto v = EvalSizeExpression(text, ram_);
    if (!v.has_value()) {
      return Error(line, std::string(key) + ": " + v.error().message());
    }
    if (*v < 0) {
      return Error(line, std::string(key) + " '" + text + "' is negative (" +
                             std::to_string(*v) + " MiB)");
    }
    const double bytes = std::floor(*v * 1048576.0);
    if (bytes >= 18446744073709551615.0) {
      return Error(line, std::string(key) + " '" + text + "' is too large");
    }
    return static_cast<std::uint64_t>(bytes);
  }

  Result<std::int64_t> Integer(const char* key, const std::string& text,
                               int line, std::int64_t lo, std::int64_t hi,
                               const char* want) {
    errno = 0;
    char* end = nullptr;
    const long long v = std::strtoll(text.c_str(), &end, 10);
    if (errno != 0 || end == text.c_str() || *end != '\0' || v < lo || v > hi) {
      return Error(line, std::string(key) + ": want an integer" + want +
                             ", not '" + text + "'");
    }
    return static_cast<std::int64_t>(v);
  }

  // The text from `from` to the first of `stops` that is not escaped (or
  // to the end), and where that stop is (text.size() at the end), with
  // rust-ini's escapes (Parser::parse_str_until, with its default
  // ParseOption: enabled_escape, which zram-generator's Ini::load_from_file
  // takes) replaced: a backslash before a newline continues the line, \a
  // \b \t \r \n are those characters, \xHHHH is that code point, and any
  // other escaped character is itself (\\, \", \=, ...). As there, a
  // backslash at the end of the file and a bad \x are errors; unlike there,
  // so is \0, a NUL, which no value can hold. Errors name the line of the
  // escape, counted from `first_line`, the one text[line_start] is on (at
  // or before `from`): in a value that runs on, that is a later line.
  Result<std::pair<std::string, std::size_t>> ReadEscaped(
      std::string_view text, std::size_t from, std::string_view stops,
      std::size_t line_start, int first_line) {
    std::string out;
    std::size_t i = from;
    const auto line = [&] { return LineOf(text, i, line_start, first_line); };
    for (; i < text.size() && stops.find(text[i]) == std::string_view::npos;
         ++i) {
      if (text[i] != '\\') {
        out += text[i];
        continue;
      }
      if (++i == text.size()) return Error(line(), "a backslash ends the file");
      switch (text[i]) {
        case '\n':
          break;
        case 'a':
          out += '\a';
          break;
        case 'b':
          out += '\b';
          break;
        case 't':
          out += '\t';
          break;
        case 'r':
          out += '\r';
          break;
        case 'n':
          out += '\n';
          break;
        case '0':
          return Error(line(), "\\0 (a NUL) is not taken");
        case 'x': {
          // The four characters after the x, read as there by Rust's
          // u32::from_str_radix, which takes a leading '+' (\x+041 is A).
          const std::string_view hex = text.substr(i + 1, 4);
          const std::string_view digits =
              hex.starts_with('+') ? hex.substr(1) : hex;
          unsigned code = 0;
          const auto [end, ec] = std::from_chars(
              digits.data(), digits.data() + digits.size(), code, 16);
          if (hex.size() != 4 || ec != std::errc() ||
              end != digits.data() + digits.size()) {
            // Named as far as its line goes: a short one is followed by
            // the line's end and the next line's text.
            const std::string_view shown =
                hex.substr(0, hex.find_first_of("\r\n"));
            return Error(line(), "\\x" + std::string(shown) +
                                     " is not \\x and four hex digits");
          }
          if (code >= 0xD800 && code <= 0xDFFF) {
            return Error(line(),
                         "\\x" + std::string(hex) + " is not a character");
          }
          if (code == 0) return Error(line(), "\\x0000 (a NUL) is not taken");
          AppendUtf8(code, &out);
          i += 4;
          break;
        }
        default:
          out += text[i];
      }
    }
    return std::make_pair(std::move(out), i);
  }

  // The line of text[at]: `line`, the one text[from] is on (from <= at),
  // and one more for each newline in between.
  static int LineOf(std::string_view text, std::size_t at, std::size_t from,
                    int line) {
    return line + static_cast<int>(
                      std::count(text.begin() + from, text.begin() + at, '\n'));
  }

  static void AppendUtf8(unsigned code, std::string* out) {
    if (code < 0x80) {
      *out += static_cast<char>(code);
    } else if (code < 0x800) {
      *out += static_cast<char>(0xC0 | (code >> 6));
      *out += static_cast<char>(0x80 | (code & 0x3F));
    } else {
      *out += static_cast<char>(0xE0 | (code >> 12));
      *out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
      *out += static_cast<char>(0x80 | (code & 0x3F));
    }
  }

  // A u64 as zram-generator parses one (Rust's u64 from_str): an optional
  // '+', then decimal digits.
  Result<std::uint64_t> Unsigned(const char* key, const std::string& text,
                                 int line, const char* want) {
    std::string_view t = text;
    if (t.starts_with('+')) t.remove_prefix(1);
    std::uint64_t v = 0;
    const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
    if (t.empty() || ec != std::errc() || end != t.data() + t.size()) {
      return Error(line, std::string(key) + ": want an integer" + want +
                             ", not '" + text + "'");
    }
    return v;
  }

  std::unexpected<Status> Error(int line, const std::string& what) const {
    return Err(Status::InvalidArgument(path_ + ":" + std::to_string(line) +
                                       ": " + what));
  }
  // "FILE:LINE: what", for the caller to log; the file is still read.
  void Warn(int line, const std::string& what) {
    warnings_.push_back(path_ + ":" + std::to_string(line) + ": " + what);
  }

  std::string path_;
  double ram_;
  std::vector<std::string> warnings_;
};

}  // namespace

std::optional<bool> ParseConfigBool(std::string_view text) {
  const std::string t = Lower(Trim(text));
  if (t == "yes" || t == "true" || t == "on" || t == "1") return true;
  if (t == "no" || t == "false" || t == "off" || t == "0") return false;
  return std::nullopt;
}

Result<RecompAlgorithmConfig> ParseAlgorithmItem(std::string_view item,
                                                 std::string_view what) {
  const std::string w(what);
  const std::size_t paren = item.find('(');
  RecompAlgorithmConfig out;
  if (paren != std::string_view::npos) {
    if (item.find(')', paren) == std::string_view::npos) {
      return Err(Status::InvalidArgument(w + ": no ')' closes the '(' in '" +
                                         std::string(item) + "'"));
    }
    if (item.back() != ')') {
      return Err(Status::InvalidArgument(w + ": text after ')' in '" +
                                         std::string(item) + "'"));
    }
    std::string p(item.substr(paren + 1, item.size() - paren - 2));
    for (char& c : p) {
      if (c == ',') c = ' ';
    }
    out.params = Trim(p);
  }
  out.name = std::string(CanonicalCodecName(item.substr(0, paren)));
  if (Status s = CheckCodecName(out.name, w); !s.ok()) {
    return Err(Status::InvalidArgument(s.message() + " (lzo-rle is lzo)"));
  }
  if (out.params.empty()) return out;
  auto parsed = ParseAlgorithmParams(out.params);
  if (!parsed.has_value()) {
    return Err(Status::InvalidArgument(w + ": parameters '" + out.params +
                                       "': " + parsed.error().message()));
  }
  // The item names its algorithm, and its place the priority: parameters
  // aimed at another (algo=, priority=) would be applied to that one.
  if (!parsed->algo.empty() || parsed->priority != -1) {
    return Err(Status::InvalidArgument(
        w + ": " + std::string(item) +
        ": algo= and priority= have no place here (the name says the "
        "algorithm, its place in the list the priority)"));
  }
  auto codec = MakeCodec(out.name, *parsed);
  if (!codec.has_value()) {
    return Err(Status::InvalidArgument(w + ": " + std::string(item) + ": " +
                                       codec.error().message()));
  }
  return out;
}

Result<ServiceConfig> ParseServiceConfig(std::string_view text,
                                         std::string_view path,
                                         double memtotal_mib) {
  return ConfigParser(path, memtotal_mib).Parse(text);
}

Result<double> HostMemTotalMib() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  while (in >> key) {
    if (key == "MemTotal:") {
      // Whole MiB, rounded down, as zram-generator has `ram` (its
      // memtotal_mb is an integer): a host-memory-limit copied from
      // `free -m` then keeps this host's device, and a size expression
      // comes out as there.
      double kib = 0;
      if (in >> kib) return std::floor(kib / 1024.0);
      break;
    }
    std::string rest;
    std::getline(in, rest);
  }
  return Err(Status::IoError("/proc/meminfo has no MemTotal"));
}

Result<ServiceConfig> LoadServiceConfig(const std::string& path) {
  // Read at start and on every SIGHUP by the thread that also waits for
  // SIGTERM: a FIFO must not block it, nor a device such as /dev/zero, or
  // a huge file, take the memory of a server that may hold a kernel's swap
  // (ReadRegularFile reads only a regular file, up to a bound).
  ZT_ASSIGN_OR_RETURN(const std::string body,
                      platform::ReadRegularFile(path, kMaxConfigFileBytes,
                                                "configuration file"));
  if (body.find('\0') != std::string::npos) {
    return Err(Status::InvalidArgument(path + ": not a text file (it holds a "
                                              "NUL byte)"));
  }
  ZT_ASSIGN_OR_RETURN(double ram, HostMemTotalMib());
  return ParseServiceConfig(body, path, ram);
}

}  // namespace ztier::tool
