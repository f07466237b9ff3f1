// params.cc: ParseAlgorithmParams, zram's `algorithm_params` syntax.
//
// Tokens are separated by spaces, tabs or newlines; each is `key=value`.
// Keys: level=N (may be negative: zstd's fast levels), dict=PATH, algo=NAME,
// priority=N (>= 0), deflate.winbits=N (|N| in 8..15). A repeated key keeps
// its last value. Errors (kInvalidArgument) quote the offending token.
#include <charconv>
#include <string>
#include <string_view>

#include "ztier/codec.h"

namespace ztier {
namespace {

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// Whole-string decimal int, optional leading '-' or '+'.
bool ParseInt(std::string_view s, int* out) {
  if (!s.empty() && s[0] == '+') {
    s.remove_prefix(1);
    if (!s.empty() && s[0] == '-') return false;
  }
  if (s.empty()) return false;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && ptr == s.data() + s.size();
}

Status Bad(std::string_view what, std::string_view token) {
  std::string m(what);
  m += ": '";
  m += token;
  m += "'";
  return Status::InvalidArgument(m);
}

Status ApplyToken(std::string_view token, CodecParams* p) {
  const auto eq = token.find('=');
  if (eq == std::string_view::npos || eq + 1 == token.size()) {
    return Bad("algorithm_params token without a value", token);
  }
  const std::string_view key = token.substr(0, eq);
  const std::string_view value = token.substr(eq + 1);
  if (key == "level") {
    // INT32_MIN is kDefaultLevel, "none given": out of every range.
    if (!ParseInt(value, &p->level) || p->level == CodecParams::kDefaultLevel) {
      return Bad("malformed level", token);
    }
  } else if (key == "dict") {
    p->dict_path.assign(value);
  } else if (key == "algo") {
    p->algo.assign(value);
  } else if (key == "priority") {
    if (!ParseInt(value, &p->priority) || p->priority < 0) {
      return Bad("malformed priority", token);
    }
  } else if (key == "deflate.winbits") {
    int w = 0;
    if (!ParseInt(value, &w)) return Bad("malformed deflate.winbits", token);
    // Not -w: it overflows for INT_MIN, which from_chars accepts.
    if (w < -15 || w > 15 || (w > -8 && w < 8)) {
      return Bad("deflate.winbits out of range (8..15 or -15..-8)", token);
    }
    p->deflate_winbits = w;
  } else {
    return Bad("unknown algorithm_params key", token);
  }
  return Status::Ok();
}

}  // namespace

Result<CodecParams> ParseAlgorithmParams(std::string_view text) {
  CodecParams params;
  std::size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && IsSpace(text[i])) ++i;
    std::size_t j = i;
    while (j < text.size() && !IsSpace(text[j])) ++j;
    if (j > i) ZT_RETURN_IF_ERROR(ApplyToken(text.substr(i, j - i), &params));
    i = j;
  }
  return params;
}

}  // namespace ztier
