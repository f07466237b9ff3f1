// kernel_args.cc: next_arg() splitting and kstrtoull(s, 10) (contract in
// kernel_args.h).
#include "kernel_args.h"

#include <cctype>
#include <charconv>

namespace ztier::kernel_args {
namespace {

bool IsSpace(char c) { return std::isspace(static_cast<unsigned char>(c)); }

}  // namespace

bool NextToken(std::string_view* rest, Token* out) {
  std::string_view& s = *rest;
  while (!s.empty() && IsSpace(s.front())) s.remove_prefix(1);
  if (s.empty()) return false;
  std::size_t n = 0;
  while (n < s.size() && !IsSpace(s[n])) ++n;
  out->text = s.substr(0, n);
  s.remove_prefix(n);
  const std::size_t eq = out->text.find('=');
  out->param = out->text.substr(0, eq);
  out->value = eq == std::string_view::npos ? std::string_view()
                                            : out->text.substr(eq + 1);
  return true;
}

namespace {
NumberError ParseBase(std::string_view text, int base, std::uint64_t* out) {
  const char* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, *out, base);
  if (text.empty() || p != end ||
      (ec != std::errc() && ec != std::errc::result_out_of_range)) {
    return NumberError::kMalformed;
  }
  if (ec == std::errc::result_out_of_range) return NumberError::kOverflow;
  return NumberError::kNone;
}
}  // namespace

NumberError ParseDecimal(std::string_view text, std::uint64_t* out) {
  if (!text.empty() && text.front() == '+') text.remove_prefix(1);
  return ParseBase(text, 10, out);
}

NumberError ParseAnyBase(std::string_view text, std::uint64_t* out) {
  if (!text.empty() && text.front() == '+') text.remove_prefix(1);
  // _parse_integer_fixup_radix(): "0x" counts only before a hex digit.
  if (text.size() > 2 && text[0] == '0' && (text[1] | 0x20) == 'x' &&
      std::isxdigit(static_cast<unsigned char>(text[2]))) {
    return ParseBase(text.substr(2), 16, out);
  }
  if (text.size() > 1 && text[0] == '0') return ParseBase(text.substr(1), 8, out);
  return ParseBase(text, 10, out);
}

}  // namespace ztier::kernel_args
