// codec_internal.h: what the codec files share, not part of the public API.
//
// Each algorithm lives in its own file (lz4.cc, lz4hc.cc, zstd.cc,
// deflate.cc, lzo.cc) and exposes one factory here; registry.cc maps names
// to factories. A factory validates the parameters that concern it (level
// range, dictionary) and returns kInvalidArgument naming the bad value.
#ifndef ZTIER_CODEC_CODEC_INTERNAL_H_
#define ZTIER_CODEC_CODEC_INTERNAL_H_

#include <cstddef>
#include <memory>
#include <string_view>
#include <vector>

#include "ztier/codec.h"
#include "ztier/status.h"

namespace ztier::internal {

using CodecResult = Result<std::shared_ptr<const Codec>>;

CodecResult NewLzoCodec(const CodecParams& params);
CodecResult NewLz4Codec(const CodecParams& params);
CodecResult NewLz4HcCodec(const CodecParams& params);
CodecResult NewZstdCodec(const CodecParams& params);
CodecResult NewDeflateCodec(const CodecParams& params);

// lz4 and lz4hc share the block format, hence the decompressor, and the
// shape of their compressors: `compress` is LZ4_compress_fast_extState
// (level: the acceleration) or LZ4_compress_HC_extStateHC (level: the
// compression level), called as (state, src, dst, src_size, dst_capacity,
// level); each Compressor owns one state of `state_bytes`, allocated at its
// creation, so that Compress() does not allocate. `name` must outlive the
// codec (a literal).
using Lz4CompressFn = int (*)(void* state, const char* src, char* dst,
                              int src_size, int dst_capacity, int level);
CodecResult NewLz4BlockCodec(std::string_view name, int level,
                             std::size_t state_bytes, Lz4CompressFn compress);

// `params.level` resolved against [lo, hi] and the default; an error naming
// the codec and the range when out of it.
Result<int> ResolveLevel(std::string_view codec, const CodecParams& params,
                         int lo, int hi, int dflt);

// kInvalidArgument when a dictionary was given to a codec without support.
Status RejectDict(std::string_view codec, const CodecParams& params);

// The dictionary `params` give (dict_path read now, or dict), or null for
// none; errors name `codec` and the file (dictionary.cc).
Result<std::shared_ptr<const std::vector<std::byte>>> LoadDictionary(
    std::string_view codec, const CodecParams& params);

}  // namespace ztier::internal

#endif  // ZTIER_CODEC_CODEC_INTERNAL_H_
