// lz4hc.cc: the "lz4hc" codec (LZ4 block format, high-compression matcher).
//
// level=1..12, default 9 (LZ4HC_CLEVEL_DEFAULT). Each Compressor owns one
// LZ4HC state (LZ4_sizeofStateHC(), about 256 KiB) allocated at creation;
// LZ4_compress_HC_extStateHC reinitialises it per call and does not
// allocate. Output is a plain LZ4 block, so the codec is lz4.cc's
// (NewLz4BlockCodec) with this matcher.
#include <lz4hc.h>

#include <cstddef>

#include "codec_internal.h"

namespace ztier::internal {

CodecResult NewLz4HcCodec(const CodecParams& params) {
  ZT_RETURN_IF_ERROR(RejectDict("lz4hc", params));
  ZT_ASSIGN_OR_RETURN(
      int level,
      ResolveLevel("lz4hc", params, 1, LZ4HC_CLEVEL_MAX, LZ4HC_CLEVEL_DEFAULT));
  return NewLz4BlockCodec("lz4hc", level,
                          static_cast<std::size_t>(LZ4_sizeofStateHC()),
                          LZ4_compress_HC_extStateHC);
}

}  // namespace ztier::internal
