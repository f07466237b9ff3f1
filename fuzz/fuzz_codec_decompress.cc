// fuzz_codec_decompress: every codec's Decompress() on hostile bytes.
//
// Input: byte 0 picks the codec (an index into CodecVariants(), modulo its
// size); the rest is the compressed object, decompressed into one 4096-byte
// page. Decompress() must never read outside the input nor write outside the
// page (both are exactly sized heap buffers, so ASan sees a byte too far),
// and must return OK or kCorruption, nothing else (ztier/codec.h).
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
  std::vector<std::byte> page(kPage);
  const Status s = d->Decompress(src, page);
  if (!s.ok() && s.code() != StatusCode::kCorruption) {
    Fail(v.name + " Decompress returned " + s.ToString());
  }
  // The thread-local decompressor the store uses must agree.
  std::vector<std::byte> again(kPage);
  const Status s2 = LocalDecompressor(*v.codec).Decompress(src, again);
  if (s.ok() != s2.ok() || (s.ok() && page != again)) {
    Fail(v.name + ": LocalDecompressor disagrees");
  }
  return 0;
}
