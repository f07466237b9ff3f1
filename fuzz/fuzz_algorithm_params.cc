// fuzz_algorithm_params: ParseAlgorithmParams (`level=N dict=PATH ...`) and
// MakeCodec with what it parsed.
//
// The input is the token text. On success, with no dict= (which would read
// a file), MakeCodec is tried with every codec name; each codec it makes
// must round-trip a page (when it compresses it). Checks the documented bounds: deflate_winbits is
// 0 or |w| in 8..15, priority is -1 or >= 0.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_util.h"

using namespace ztier;
using namespace ztier::fuzz;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data,
                                      std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto params = ParseAlgorithmParams(text);
  if (!params) {
    if (params.error().code() != StatusCode::kInvalidArgument) {
      Fail("unexpected error " + params.error().ToString());
    }
    return 0;
  }
  const int w = params->deflate_winbits;
  if (w != 0 && !((w >= 8 && w <= 15) || (w >= -15 && w <= -8))) {
    Fail("deflate_winbits " + std::to_string(w));
  }
  if (params->priority < -1) Fail("priority " + std::to_string(params->priority));
  if (!params->dict_path.empty()) return 0;

  static const std::vector<std::byte> page = [] {
    std::vector<std::byte> p(kPage);
    for (std::size_t i = 0; i < p.size(); ++i) {
      p[i] = static_cast<std::byte>((i * 7) % 13 + 'a');
    }
    return p;
  }();
  for (std::string_view name : CodecNames()) {
    auto codec = MakeCodec(name, *params);
    if (!codec) continue;
    auto c = (*codec)->NewCompressor();
    auto d = (*codec)->NewDecompressor();
    if (!c || !d) Fail(std::string(name) + ": cannot create contexts");
    std::vector<std::byte> obj(kPage);
    const std::size_t len = (*c)->Compress(page, obj);
    if (len > obj.size()) Fail(std::string(name) + ": Compress past dst");
    if (len == 0) continue;  // lz4 at a high acceleration may not compress
    obj.resize(len);
    std::vector<std::byte> out(kPage);
    if (!(*d)->Decompress(obj, out).ok() || out != page) {
      Fail(std::string(name) + " level " + std::to_string((*codec)->level()) +
           ": round trip failed");
    }
  }
  return 0;
}
