// fuzz_writeback_tokens: ParseWritebackTokens (zram's `writeback` input).
//
// Input: byte 0 picks the device size in pages (kPages, modulo its size);
// the rest is the token text. On success every scan must lie within the
// device: lo <= hi <= num_pages (ztier/device.h), and there is at least one.
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include "fuzz_util.h"

using namespace ztier;
using namespace ztier::fuzz;

namespace {
constexpr std::uint64_t kPages[] = {
    0, 1, 2, 16, 1000, 1 << 20, std::numeric_limits<std::uint64_t>::max() - 1,
    std::numeric_limits<std::uint64_t>::max()};
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data,
                                      std::size_t size) {
  if (size < 1) return 0;
  const std::uint64_t num_pages = kPages[data[0] % std::size(kPages)];
  const std::string_view text(reinterpret_cast<const char*>(data) + 1,
                              size - 1);
  auto scans = ParseWritebackTokens(text, num_pages);
  if (!scans) {
    const StatusCode c = scans.error().code();
    if (c != StatusCode::kInvalidArgument && c != StatusCode::kOutOfRange) {
      Fail("unexpected error " + scans.error().ToString());
    }
    return 0;
  }
  if (scans->empty()) Fail("success with no scan");
  for (const WritebackScan& s : *scans) {
    if (s.lo > s.hi || s.hi > num_pages) {
      Fail("scan [" + std::to_string(s.lo) + ", " + std::to_string(s.hi) +
           ") outside " + std::to_string(num_pages) + " pages");
    }
  }
  return 0;
}
