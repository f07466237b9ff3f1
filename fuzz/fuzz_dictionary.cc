// fuzz_dictionary: lz4 and zstd codecs made with a hostile dictionary (the
// bytes of a `dict=PATH` file, or of CodecParams::dict), then used.
//
// Input: byte 0 picks the codec (bit 0: lz4 or zstd) and, for zstd,
// whether the dictionary is plain content (bit 1: dict_content_only);
// bytes 1 and 2 the dictionary's length (capped at what is left); then
// the dictionary; the rest is a compressed object. Checks:
//  - DictionaryContent() is a part of the dictionary;
//  - MakeCodec takes the dictionary or refuses it with kInvalidArgument or
//    kCorruption, nothing else;
//  - a codec it makes reports its dictionary's memory, round-trips a page
//    (when it compresses it), and decompresses the rest of the input into
//    one page with OK or kCorruption, never outside the page.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fuzz_util.h"

using namespace ztier;
using namespace ztier::fuzz;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data,
                                      std::size_t size) {
  if (size < 3) return 0;
  const bool zstd = (data[0] & 1) != 0;
  const std::size_t want = data[1] | (data[2] << 8);
  const std::size_t len = std::min(want, size - 3);
  const auto* bytes = reinterpret_cast<const std::byte*>(data) + 3;
  auto dict = std::make_shared<std::vector<std::byte>>(bytes, bytes + len);
  const std::span<const std::byte> content = DictionaryContent(*dict);
  if (!content.empty() &&
      (content.data() < dict->data() ||
       content.data() + content.size() > dict->data() + dict->size())) {
    Fail("DictionaryContent is not a part of the dictionary");
  }
  CodecParams params;
  params.dict = dict;
  params.dict_content_only = zstd && (data[0] & 2) != 0;
  auto codec = MakeCodec(zstd ? "zstd" : "lz4", params);
  if (!codec) {
    const StatusCode c = codec.error().code();
    if (c != StatusCode::kInvalidArgument && c != StatusCode::kCorruption) {
      Fail("MakeCodec: " + codec.error().ToString());
    }
    return 0;
  }
  if (!dict->empty() && (*codec)->dictionary_bytes() == 0) {
    Fail("a codec with a dictionary reports no dictionary memory");
  }
  auto c = (*codec)->NewCompressor();
  auto d = (*codec)->NewDecompressor();
  if (!c || !d) return 0;  // contexts refused: an error, not a crash
  static const std::vector<std::byte> page = [] {
    std::vector<std::byte> p(kPage);
    for (std::size_t i = 0; i < p.size(); ++i) {
      p[i] = static_cast<std::byte>("the quick brown fox "[i % 20]);
    }
    return p;
  }();
  std::vector<std::byte> obj(kPage);
  const std::size_t n = (*c)->Compress(page, obj);
  if (n > obj.size()) Fail("Compress past dst");
  if (n != 0) {
    obj.resize(n);
    std::vector<std::byte> back(kPage);
    if (!(*d)->Decompress(obj, back).ok() || back != page) {
      Fail("a page does not round-trip with this dictionary");
    }
  }
  const std::size_t rest = size - 3 - len;
  std::vector<std::byte> src(bytes + len, bytes + len + rest);
  std::vector<std::byte> out(kPage);
  const Status s = (*d)->Decompress(src, out);
  if (!s.ok() && s.code() != StatusCode::kCorruption) {
    Fail("Decompress returned " + s.ToString());
  }
  return 0;
}
