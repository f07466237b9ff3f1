// File: ztier/codec.h
//
// Codecs: the compression algorithms ztier stores pages with, behind one
// interface, found by name in a registry, configured with zram's
// `algorithm_params` tokens.
//
//   auto codec = ztier::MakeCodec("zstd", "level=3");   // Result<...>
//   auto c = (*codec)->NewCompressor();                 // one per stream
//   size_t n = (*c)->Compress(page, dst);               // 0: does not fit
//   Status s = ztier::LocalDecompressor(**codec).Decompress(obj, page);
//
// Names: "lz4" (LZ4_compress_fast_extState, acceleration 1; optional
// dictionary), "lz4hc" (LZ4_compress_HC, level 1..12, default 9), "zstd"
// (level -7..22, default 3; optional dictionary), "deflate" (libdeflate,
// level 1..12, default 6), "lzo" (lzo1x_1).
//
// Dictionaries: a zstd or lz4 codec may be made with a dictionary, from a
// file (`dict=PATH`, as zram's algorithm_params) or from bytes in memory
// (CodecParams::dict, what a store's trained dictionary uses;
// TrainDictionary() below makes one from sample pages). An object
// compressed with a dictionary decompresses only with the same one.
//
// A Codec is an immutable description (name, level, dictionary) shared by all
// threads. Work happens in a Compressor or a Decompressor, each holding that
// algorithm's context and scratch memory for one thread at a time:
// - Compressors are owned by compression streams (store/): one per stream,
//   created once and reused; the hot path does not allocate.
// - Decompression never waits for a compressor: each thread keeps its own
//   Decompressor per codec (LocalDecompressor()), so a load takes no lock and
//   shares nothing with stores (the zswap load contention series in
//   docs/references.md).
//
// Safety: Decompress() of corrupted or hostile input returns kCorruption and
// never reads outside `src` or writes outside `dst` (LZ4_decompress_safe,
// ZSTD_decompressDCtx with bounded sizes, libdeflate's bounded API,
// lzo1x_decompress_safe). An object decompresses only if it yields exactly
// dst.size() bytes.
#ifndef ZTIER_CODEC_H_
#define ZTIER_CODEC_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ztier/status.h"

namespace ztier {

// Parsed `algorithm_params`, as zram's sysfs attribute takes them:
// space-separated `key=value` tokens. Known keys: `level=N`, `dict=PATH`,
// `algo=NAME` and `priority=N` (which algorithm the other tokens apply to;
// kept for the store's recompression slots), `deflate.winbits=N`. A token
// without a value, an unknown key or a malformed number is kInvalidArgument.
struct CodecParams {
  static constexpr int kDefaultLevel = INT32_MIN;
  int level = kDefaultLevel;     // kDefaultLevel: the codec's own default
  std::string dict_path;         // zstd and lz4; empty: no dictionary
  // A dictionary in memory (zstd and lz4), not parsed from text; at most
  // one of dict and dict_path. The codec keeps a reference (lz4 and zstd
  // read it in place), so the bytes must not change.
  std::shared_ptr<const std::vector<std::byte>> dict;
  // zstd: the dictionary is plain content to match against
  // (ZSTD_dct_rawContent), not a ZDICT-format one with entropy tables.
  // (lz4 always takes plain content.)
  bool dict_content_only = false;
  int deflate_winbits = 0;       // 0: default (15); only -15..-8 / 8..15 valid
  std::string algo;              // empty: the primary algorithm
  int priority = -1;             // -1: not given
};

Result<CodecParams> ParseAlgorithmParams(std::string_view text);

// Compresses one input (normally one page) at a time. Not thread-safe: one
// thread uses a Compressor at a time.
class Compressor {
 public:
  virtual ~Compressor() = default;
  // Compresses `src` into `dst`. Returns the compressed size, or 0 when the
  // result would not fit in dst.size() bytes (the caller then stores the page
  // raw, as zram does). Never writes outside `dst`.
  virtual std::size_t Compress(std::span<const std::byte> src,
                               std::span<std::byte> dst) = 0;
};

// Decompresses one object at a time. Not thread-safe.
class Decompressor {
 public:
  virtual ~Decompressor() = default;
  // Decompresses `src` into `dst`, which must come out exactly dst.size()
  // bytes long. Returns OK, or kCorruption (damage the format finds: a
  // stream that does not decode, or decodes to another size). The formats
  // carry no checksum of the page (zstd frames are made without one, as
  // the kernel's zram makes them), so damage to a literal can decode to a
  // page of the right size with other bytes: what is kept outside RAM is
  // vouched for by the backing store (its encryption authenticates each
  // block; a remote one keeps a checksum of each), not here. Never reads
  // outside `src` nor writes outside `dst`, whatever `src` holds.
  virtual Status Decompress(std::span<const std::byte> src,
                            std::span<std::byte> dst) = 0;
};

// One algorithm with its parameters. Immutable and thread-safe.
class Codec {
 public:
  virtual ~Codec() = default;
  Codec(const Codec&) = delete;
  Codec& operator=(const Codec&) = delete;

  // Registry name: "lz4", "zstd", ...
  virtual std::string_view name() const = 0;
  // The level in effect (the default when none was given; 0 where the
  // algorithm has no levels).
  virtual int level() const = 0;

  virtual Result<std::unique_ptr<Compressor>> NewCompressor() const = 0;
  virtual Result<std::unique_ptr<Decompressor>> NewDecompressor() const = 0;

  // Memory this codec holds for its dictionary, shared by all its
  // compressors and decompressors: the dictionary's bytes and the forms the
  // library digests it into (zstd's CDict and DDict, lz4's loaded stream).
  // 0 without a dictionary.
  virtual std::size_t dictionary_bytes() const { return 0; }

  // A process-unique id, never reused; keys the thread-local decompressors.
  std::uint64_t id() const { return id_; }

 protected:
  Codec();

 private:
  const std::uint64_t id_;
};

// Creates a codec by registry name with `algorithm_params` tokens (may be
// empty). Unknown name, bad tokens, an unreadable dictionary or a level out of
// range: an error saying which.
Result<std::shared_ptr<const Codec>> MakeCodec(std::string_view name,
                                               std::string_view params = {});
Result<std::shared_ptr<const Codec>> MakeCodec(std::string_view name,
                                               const CodecParams& params);

// Whether codec `name` takes a dictionary (zstd, lz4).
bool SupportsDictionary(std::string_view name);

// Trains a dictionary of at most `max_bytes` on `samples` (one entry per
// sample, normally whole pages) with libzstd's ZDICT_trainFromBuffer. The
// result suits zstd, and lz4, which uses its last 64 KiB as history.
// kInvalidArgument when the samples are too few or too alike to train on
// (ZDICT's error, named), or max_bytes is below 1 KiB.
Result<std::vector<std::byte>> TrainDictionary(
    std::span<const std::span<const std::byte>> samples,
    std::size_t max_bytes);

// The content part of a ZDICT-format dictionary (what follows its header
// and entropy tables, ZDICT_getDictHeaderSize), for use as plain content;
// all of `dict` when it is not one.
std::span<const std::byte> DictionaryContent(std::span<const std::byte> dict);

// Every codec's name, in a fixed order (zram's listing order).
std::vector<std::string_view> CodecNames();

// The codec a name selects: the name itself, or for "lzo-rle" (the kernel's
// default zram algorithm, which scripts set) "lzo". lzo-rle is LZO1X with a
// run-length extension of its bitstream (the kernel's lib/lzo/); its pages
// decompress to the same bytes, and ztier's compressed pages are never read
// by a kernel, so ztier stores them with lzo1x_1 and shows "lzo". MakeCodec()
// and every place that takes an algorithm name accept both.
std::string_view CanonicalCodecName(std::string_view name);

// Whether `name` selects a codec: one of CodecNames(), or lzo-rle.
bool IsCodecName(std::string_view name);

// This thread's Decompressor for `codec`, created on first use and kept until
// the thread exits. Lock-free after the first call. Where the codec cannot
// create one (it can only fail by running out of memory, std::bad_alloc
// included: this function does not throw), a Decompressor whose Decompress
// returns kResourceExhausted, not kept: the next call tries again.
Decompressor& LocalDecompressor(const Codec& codec);

}  // namespace ztier

#endif  // ZTIER_CODEC_H_
