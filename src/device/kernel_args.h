// kernel_args.h: the kernel's argument splitting and decimal parsing for
// zram's token attributes (writeback_tokens.cc, recompress_tokens.cc):
// next_arg() (lib/cmdline.c) without its quoting, and kstrtoull(s, 10) and
// kstrtoull(s, 0) (lib/kstrtox.c). Internal to ztier_device.
#ifndef ZTIER_DEVICE_KERNEL_ARGS_H_
#define ZTIER_DEVICE_KERNEL_ARGS_H_

#include <cstdint>
#include <string_view>

namespace ztier::kernel_args {

// One whitespace-separated token split at its first '='.
struct Token {
  std::string_view text;   // the whole token, for messages
  std::string_view param;  // before '=' (the whole token when valueless)
  std::string_view value;  // after '='; empty when valueless or "key="
};

// Takes the next token from *rest; false when only whitespace is left.
bool NextToken(std::string_view* rest, Token* out);

enum class NumberError { kNone, kMalformed, kOverflow };

// kstrtoull(text, 10): an optional '+', then decimal digits only, into
// *out. kMalformed for anything else (kernel EINVAL), kOverflow past
// 2^64 - 1 (ERANGE).
NumberError ParseDecimal(std::string_view text, std::uint64_t* out);

// kstrtoull(text, 0), as zram's idle_store() parses an age: an optional
// '+', then "0x" or "0X" and hex digits, or "0" and octal digits, or
// decimal digits. Errors as ParseDecimal's.
NumberError ParseAnyBase(std::string_view text, std::uint64_t* out);

}  // namespace ztier::kernel_args

#endif  // ZTIER_DEVICE_KERNEL_ARGS_H_
