// writeback_tokens.cc: zram's `writeback` input (ParseWritebackTokens in
// include/ztier/device.h), as drivers/block/zram/zram_drv.c parses it.
//
// The kernel's writeback_store() walks the tokens left to right with the
// last index range [lo, hi) (at first the whole device) and a mode (at first
// none):
//   - page_index=N / page_indexes=LO-HI set [lo, hi) and scan it with the
//     mode so far;
//   - a mode (idle, huge, huge_idle, incompressible, valueless or as
//     type=<mode>) scans [lo, hi) with that mode and ends parsing.
// Since a mode ends parsing, every index scan runs with no mode, and a mode
// that follows index tokens rescans the last range, whose slots the index
// scan has already picked (every allocated slot): it adds nothing, so no
// scan is emitted for it. A mode with no index token before it gives one
// whole-device scan.
//
// Where ztier is stricter than the kernel (which skips unknown key=value
// tokens and accepts empty input as a no-op): both are kInvalidArgument, so
// a typo is reported rather than silently writing nothing.
#include <string>

#include "kernel_args.h"
#include "ztier/device.h"

namespace ztier {
namespace {

using kernel_args::Token;

Result<unsigned> ParseMode(std::string_view mode, std::string_view token) {
  if (mode == "idle") return kWritebackIdle;
  if (mode == "huge") return kWritebackHuge;
  if (mode == "huge_idle") return kWritebackIdle | kWritebackHuge;
  if (mode == "incompressible") return kWritebackIncompressible;
  return Err(Status::InvalidArgument(
      "writeback: unknown token '" + std::string(token) +
      "' (modes: idle, huge, huge_idle, incompressible; page_index=N, "
      "page_indexes=LO-HI)"));
}

// kstrtoul(text, 10): an optional '+', then decimal digits only.
// kInvalidArgument when malformed, kOutOfRange on overflow.
Result<std::uint64_t> ParseIndex(std::string_view text,
                                 std::string_view token) {
  std::uint64_t v = 0;
  switch (kernel_args::ParseDecimal(text, &v)) {
    case kernel_args::NumberError::kMalformed:
      return Err(Status::InvalidArgument("writeback: '" + std::string(token) +
                                         "': '" + std::string(text) +
                                         "' is not a page index"));
    case kernel_args::NumberError::kOverflow:
      return Err(Status::OutOfRange("writeback: '" + std::string(token) +
                                    "': index out of range"));
    case kernel_args::NumberError::kNone:
      break;
  }
  return v;
}

Status PastEnd(std::uint64_t index, std::uint64_t num_pages,
               std::string_view token) {
  return Status::OutOfRange("writeback: '" + std::string(token) + "': page " +
                            std::to_string(index) + " is past the device's " +
                            std::to_string(num_pages) + " pages");
}

// page_index=N: the range [N, N+1).
Result<WritebackScan> ParsePageIndex(const Token& t, std::uint64_t num_pages) {
  ZT_ASSIGN_OR_RETURN(const std::uint64_t n, ParseIndex(t.value, t.text));
  if (n >= num_pages) return Err(PastEnd(n, num_pages, t.text));
  return WritebackScan{.filter = 0, .lo = n, .hi = n + 1};
}

// page_indexes=LO-HI (inclusive): the range [LO, HI+1).
Result<WritebackScan> ParsePageIndexes(const Token& t,
                                       std::uint64_t num_pages) {
  const std::size_t dash = t.value.find('-');
  if (dash == std::string_view::npos) {
    return Err(Status::InvalidArgument("writeback: '" + std::string(t.text) +
                                       "': page_indexes takes LO-HI"));
  }
  ZT_ASSIGN_OR_RETURN(const std::uint64_t lo,
                      ParseIndex(t.value.substr(0, dash), t.text));
  if (lo >= num_pages) return Err(PastEnd(lo, num_pages, t.text));
  ZT_ASSIGN_OR_RETURN(const std::uint64_t hi,
                      ParseIndex(t.value.substr(dash + 1), t.text));
  if (hi >= num_pages) return Err(PastEnd(hi, num_pages, t.text));
  if (lo > hi) {
    return Err(Status::OutOfRange("writeback: '" + std::string(t.text) +
                                  "': " + std::to_string(lo) + " > " +
                                  std::to_string(hi)));
  }
  return WritebackScan{.filter = 0, .lo = lo, .hi = hi + 1};
}

}  // namespace

Result<std::vector<WritebackScan>> ParseWritebackTokens(
    std::string_view text, std::uint64_t num_pages) {
  std::vector<WritebackScan> scans;
  std::string_view rest = text;
  Token t;
  bool any = false;
  while (kernel_args::NextToken(&rest, &t)) {
    any = true;
    if (t.value.empty() || t.param == "type") {
      // A mode, valueless (legacy) or type=<mode>; "key=" is valueless too,
      // as the kernel's next_arg() gives it, and so fails as a mode.
      const std::string_view mode = t.value.empty() ? t.param : t.value;
      ZT_ASSIGN_OR_RETURN(const unsigned filter, ParseMode(mode, t.text));
      if (scans.empty()) {
        scans.push_back({.filter = filter, .lo = 0, .hi = num_pages});
      }
      break;  // a mode ends parsing, as zram's
    }
    if (t.param == "page_index") {
      ZT_ASSIGN_OR_RETURN(WritebackScan s, ParsePageIndex(t, num_pages));
      scans.push_back(s);
    } else if (t.param == "page_indexes") {
      ZT_ASSIGN_OR_RETURN(WritebackScan s, ParsePageIndexes(t, num_pages));
      scans.push_back(s);
    } else {
      return Err(Status::InvalidArgument(
          "writeback: unknown token '" + std::string(t.text) +
          "' (modes: idle, huge, huge_idle, incompressible, type=MODE; "
          "page_index=N, page_indexes=LO-HI)"));
    }
  }
  if (!any) {
    return Err(Status::InvalidArgument(
        "writeback: empty input (give a mode or page_index=N)"));
  }
  return scans;
}

}  // namespace ztier
