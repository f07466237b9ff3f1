// fuzz_codec_decompress: every codec's Decompress() on hostile bytes.
//
// Input: byte 0 picks the codec (an index into CodecVariants(), modulo its
// size) and, above that, the output's size: 1, 4, 8 or 16 pages (a page,
// or a store's multi-page unit, src/store/units.cc); the rest is the
// compressed object, decompressed into that many 4096-byte pages.
// Decompress() must never read outside the input nor write outside the
// output (both are exactly sized heap buffers, so ASan sees a byte too
// far), and must return OK or kCorruption, nothing else (ztier/codec.h).
#include <cstddef>
#include <cstdint>
#include <vector>

#include "fuzz_util.h"

using namespace ztier;
using namespace ztier::fuzz;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data,
                                      std::size_t size) {
  if (size < 1) return 0;
  const auto& variants = CodecVariants();
  const CodecVariant& v = variants[data[0] % variants.size()];
  static constexpr std::size_t kPages[] = {1, 4, 8, 16};
  const std::size_t out_bytes =
      kPage * kPages[data[0] / variants.size() % std::size(kPages)];
  static std::vector<std::unique_ptr<Decompressor>> decompressors(
      variants.size());
  auto& d = decompressors[data[0] % variants.size()];
  if (d == nullptr) {
    auto made = v.codec->NewDecompressor();
    if (!made) Fail("NewDecompressor: " + made.error().ToString());
    d = std::move(*made);
  }
  // An exactly sized copy: the input without its selector byte.
  std::vector<std::byte> src(reinterpret_cast<const std::byte*>(data) + 1,
                             reinterpret_cast<const std::byte*>(data) + size);
  std::vector<std::byte> page(out_bytes);
  const Status s = d->Decompress(src, page);
  if (!s.ok() && s.code() != StatusCode::kCorruption) {
    Fail(v.name + " Decompress returned " + s.ToString());
  }
  // The thread-local decompressor the store uses must agree.
  std::vector<std::byte> again(out_bytes);
  const Status s2 = LocalDecompressor(*v.codec).Decompress(src, again);
  if (s.ok() != s2.ok() || (s.ok() && page != again)) {
    Fail(v.name + ": LocalDecompressor disagrees");
  }
  return 0;
}
