// fuzz_codec_roundtrip: compress a page with every codec, decompress it back.
//
// Input: byte 0 picks the codec variant (CodecVariants(), modulo its size);
// the rest, truncated or zero-padded to 4096 bytes, is the page. Checks:
//  - Compress() into a page-sized buffer returns 0 (does not fit) or a size
//    within it; the object decompresses to exactly the page;
//  - Compress() into a buffer one byte smaller than that object returns 0 or
//    a size within it, and never writes past it (ASan: exact heap buffers);
//  - the object cut short by one byte does not decompress past the page.
#include <algorithm>
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
  const std::size_t index = data[0] % variants.size();
  const CodecVariant& v = variants[index];
  struct Pair {
    std::unique_ptr<Compressor> c;
    std::unique_ptr<Decompressor> d;
  };
  static std::vector<Pair> pairs(variants.size());
  Pair& p = pairs[index];
  if (p.c == nullptr) {
    auto c = v.codec->NewCompressor();
    auto d = v.codec->NewDecompressor();
    if (!c || !d) Fail("cannot create " + v.name + " contexts");
    p.c = std::move(*c);
    p.d = std::move(*d);
  }
  const std::string what = v.name + " " + v.params;

  std::vector<std::byte> page(kPage);
  const std::size_t n = std::min(size - 1, kPage);
  std::copy_n(reinterpret_cast<const std::byte*>(data) + 1, n, page.begin());

  std::vector<std::byte> obj(kPage);
  const std::size_t len = p.c->Compress(page, obj);
  if (len > obj.size()) Fail(what + ": Compress returned past dst");
  if (len == 0) return 0;  // incompressible: the store keeps it raw
  obj.resize(len);
  obj.shrink_to_fit();

  std::vector<std::byte> out(kPage);
  const Status s = p.d->Decompress(obj, out);
  if (!s.ok()) Fail(what + ": own output does not decompress: " + s.ToString());
  if (out != page) Fail(what + ": round trip changed the page");

  // One byte less room than needed.
  if (len > 1) {
    std::vector<std::byte> small(len - 1);
    const std::size_t len2 = p.c->Compress(page, small);
    if (len2 > small.size()) Fail(what + ": Compress returned past a small dst");
  }
  // A truncated object: any status, but no overrun (ASan) and no other code.
  std::vector<std::byte> cut(obj.begin(), obj.end() - 1);
  const Status s3 = p.d->Decompress(cut, out);
  if (!s3.ok() && s3.code() != StatusCode::kCorruption) {
    Fail(what + ": truncated object gave " + s3.ToString());
  }
  return 0;
}
