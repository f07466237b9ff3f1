// zstd.cc: the "zstd" codec (one zstd frame per page).
//
// level=-7..22, default 3 (0 also means 3, as in zstd). A dictionary (dict=
// PATH, or CodecParams::dict; a ZDICT-trained one, or plain content) is
// digested once, when the Codec is made: one ZSTD_CDict (at the codec's
// level, with the parameters zstd picks for a 4 KiB input and that
// dictionary, ZSTD_getCParams, its match tables capped at 2^12 entries:
// a page matched against tens of KiB of dictionary loses under 0.1% of
// its ratio with them, and the CDict of a 16 KiB dictionary at level 3
// takes 48 KiB instead of 400) and one ZSTD_DDict, both referring to the
// dictionary's bytes in place, and shared read-only by every Compressor
// and Decompressor of the codec (zstd documents both as usable from several
// threads at once). Compressors and Decompressors hold them by shared_ptr,
// so they outlive the Codec if need be.
//
// Each Compressor owns one ZSTD_CCtx, warmed at creation with one page so
// that its workspace is sized and Compress() on pages does not allocate,
// and a second, static one for inputs of 2 to 16 pages (multi-page units),
// made at the first such input.
// Each Decompressor owns one ZSTD_DCtx; ZSTD_decompressDCtx /
// ZSTD_decompress_usingDDict are bounded by both buffers, and a page is
// accepted only if the frame yields exactly dst.size() bytes.
#define ZSTD_STATIC_LINKING_ONLY  // ZSTD_createCDict_advanced
#include <zstd.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "codec_internal.h"

namespace ztier::internal {
namespace {

constexpr int kMinLevel = -7;
constexpr int kDefaultLevel = 3;
constexpr unsigned kDictTableLog = 12;  // see above

struct ZstdDict {
  std::shared_ptr<const std::vector<std::byte>> bytes;  // both refer to it
  ZSTD_CDict* cdict = nullptr;
  ZSTD_DDict* ddict = nullptr;
  ~ZstdDict() {
    ZSTD_freeCDict(cdict);
    ZSTD_freeDDict(ddict);
  }
};

class ZstdCompressor final : public Compressor {
 public:
  // With a dictionary, the CCtx refers to its CDict for every frame
  // (ZSTD_compress2 keeps it), and frames leave out the dictionary's
  // 4-byte id: a store knows which dictionary each object was made with.
  ZstdCompressor(ZSTD_CCtx* cctx, int level, std::shared_ptr<ZstdDict> dict)
      : cctx_(cctx), level_(level), dict_(std::move(dict)) {
    Configure(cctx_);
  }
  ~ZstdCompressor() override {
    ZSTD_freeCCtx(cctx_);
    std::free(large_space_);  // large_ lives in it (ZSTD_initStaticCCtx)
  }

  // Pages go to cctx_; larger inputs (multi-page units, up to kLargeMax)
  // to large_, made at the first one. One context for both would be
  // resized back and forth: zstd shrinks a workspace used far below its
  // size for 128 frames in a row (ZSTD_WORKSPACETOOLARGE_MAXDURATION) and
  // grows it again at the next large input, an allocation on the store
  // path each time. For the same reason large_ is a static context, its
  // workspace sized once for kLargeMax: units of 2 to 16 pages would
  // resize a dynamic one too.
  std::size_t Compress(std::span<const std::byte> src,
                       std::span<std::byte> dst) override {
    ZSTD_CCtx* cctx = cctx_;
    if (src.size() > 4096 && src.size() <= kLargeMax) {
      if (large_ == nullptr && !MakeLarge()) return 0;  // as if no fit
      cctx = large_;
    }
    const std::size_t n = Run(cctx, src, dst);
    return ZSTD_isError(n) ? 0 : n;  // dstSize_tooSmall: does not fit
  }

 private:
  static constexpr std::size_t kLargeMax = 64 * 1024;  // 16 pages

  void Configure(ZSTD_CCtx* cctx) const {
    if (dict_ != nullptr) {
      ZSTD_CCtx_refCDict(cctx, dict_->cdict);
      ZSTD_CCtx_setParameter(cctx, ZSTD_c_dictIDFlag, 0);
    }
  }

  // Whether large_ loads the dictionary per frame (ConfigureLarge): only one
  // of at most kLargeMax bytes. Loading costs time in proportion to the
  // dictionary at every unit, and LargeParams() grow with it (a 1 MiB
  // dictionary at level 19: 34 MiB of workspace, 60 ms per 2-page unit); a
  // larger dictionary is attached, as for pages.
  bool LoadsDict() const {
    return dict_ != nullptr && dict_->bytes->size() <= kLargeMax;
  }

  // The parameters of large_: zstd's for kLargeMax at this level, with the
  // dictionary's size when it loads it.
  ZSTD_compressionParameters LargeParams() const {
    return ZSTD_getCParams(level_, kLargeMax,
                           LoadsDict() ? dict_->bytes->size() : 0);
  }

  // With a dictionary of at most kLargeMax bytes (LoadsDict()), large_
  // loads the dictionary's content into its own tables for every frame
  // (ZSTD_dictForceLoad) and compresses with LargeParams(). Attached, a
  // unit would be matched through the CDict's tables, sized for one page
  // (2^12 entries): on anon-python at level 9 that made units of 16 pages
  // with a dictionary larger than without one. Loading a 16 KiB
  // dictionary per unit of up to 64 KiB costs store time, and no memory
  // past a context sized for the unit; the frames read back with the same
  // DDict.
  void ConfigureLarge(ZSTD_CCtx* cctx) const {
    Configure(cctx);
    if (!LoadsDict()) return;
    ZSTD_CCtx_setParameter(cctx, ZSTD_c_forceAttachDict, ZSTD_dictForceLoad);
    const ZSTD_compressionParameters cp = LargeParams();
    ZSTD_CCtx_setParameter(cctx, ZSTD_c_windowLog, cp.windowLog);
    ZSTD_CCtx_setParameter(cctx, ZSTD_c_chainLog, cp.chainLog);
    ZSTD_CCtx_setParameter(cctx, ZSTD_c_hashLog, cp.hashLog);
    ZSTD_CCtx_setParameter(cctx, ZSTD_c_searchLog, cp.searchLog);
    ZSTD_CCtx_setParameter(cctx, ZSTD_c_minMatch, cp.minMatch);
    ZSTD_CCtx_setParameter(cctx, ZSTD_c_targetLength, cp.targetLength);
    ZSTD_CCtx_setParameter(cctx, ZSTD_c_strategy, cp.strategy);
  }

  // One frame of src in dst with cctx: its size, or a zstd error code.
  std::size_t Run(ZSTD_CCtx* cctx, std::span<const std::byte> src,
                  std::span<std::byte> dst) const {
    return dict_ ? ZSTD_compress2(cctx, dst.data(), dst.size(), src.data(),
                                  src.size())
                 : ZSTD_compressCCtx(cctx, dst.data(), dst.size(), src.data(),
                                     src.size(), level_);
  }

  // large_, in a workspace sized for kLargeMax at this level (zstd's own
  // estimate; RoundTripTest.RunsOfPagesAsUnits compresses up to that
  // much through it). False (and no large_) when it cannot be had.
  bool MakeLarge() {
    const std::size_t bytes = ZSTD_estimateCCtxSize_usingCParams(LargeParams());
    void* space = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (space == nullptr) return false;
    ZSTD_CCtx* cctx = ZSTD_initStaticCCtx(space, bytes);
    if (cctx == nullptr) {
      std::free(space);
      return false;
    }
    ConfigureLarge(cctx);
    large_ = cctx;
    large_space_ = space;
    return true;
  }

  ZSTD_CCtx* const cctx_;
  ZSTD_CCtx* large_ = nullptr;
  void* large_space_ = nullptr;
  const int level_;
  const std::shared_ptr<ZstdDict> dict_;
};

class ZstdDecompressor final : public Decompressor {
 public:
  ZstdDecompressor(ZSTD_DCtx* dctx, std::shared_ptr<ZstdDict> dict)
      : dctx_(dctx), dict_(std::move(dict)) {}
  ~ZstdDecompressor() override { ZSTD_freeDCtx(dctx_); }

  Status Decompress(std::span<const std::byte> src,
                    std::span<std::byte> dst) override {
    const std::size_t n =
        dict_ ? ZSTD_decompress_usingDDict(dctx_, dst.data(), dst.size(),
                                           src.data(), src.size(), dict_->ddict)
              : ZSTD_decompressDCtx(dctx_, dst.data(), dst.size(), src.data(),
                                    src.size());
    if (ZSTD_isError(n)) {
      return Status::Corruption(std::string("zstd: ") + ZSTD_getErrorName(n));
    }
    if (n != dst.size()) {
      return Status::Corruption("zstd: decompressed size differs from page");
    }
    return Status::Ok();
  }

 private:
  ZSTD_DCtx* const dctx_;
  const std::shared_ptr<ZstdDict> dict_;
};

class ZstdCodec final : public Codec {
 public:
  ZstdCodec(int level, std::shared_ptr<ZstdDict> dict)
      : level_(level), dict_(std::move(dict)) {}
  std::string_view name() const override { return "zstd"; }
  int level() const override { return level_; }

  Result<std::unique_ptr<Compressor>> NewCompressor() const override {
    ZSTD_CCtx* cctx = ZSTD_createCCtx();
    if (cctx == nullptr) {
      return Err(Status::ResourceExhausted("zstd: cannot create a CCtx"));
    }
    std::unique_ptr<ZstdCompressor> c;
    try {  // the object owns cctx once made
      c = std::make_unique<ZstdCompressor>(cctx, level_, dict_);
    } catch (...) {
      ZSTD_freeCCtx(cctx);
      throw;
    }
    // Size the workspace now, off the hot path.
    std::vector<std::byte> page(4096), out(ZSTD_compressBound(4096));
    (void)c->Compress(page, out);
    return c;
  }

  std::size_t dictionary_bytes() const override {
    if (dict_ == nullptr) return 0;
    return dict_->bytes->size() + ZSTD_sizeof_CDict(dict_->cdict) +
           ZSTD_sizeof_DDict(dict_->ddict);
  }

  Result<std::unique_ptr<Decompressor>> NewDecompressor() const override {
    ZSTD_DCtx* dctx = ZSTD_createDCtx();
    if (dctx == nullptr) {
      return Err(Status::ResourceExhausted("zstd: cannot create a DCtx"));
    }
    try {  // the object owns dctx once made
      return std::make_unique<ZstdDecompressor>(dctx, dict_);
    } catch (...) {
      ZSTD_freeDCtx(dctx);
      throw;
    }
  }

 private:
  const int level_;
  const std::shared_ptr<ZstdDict> dict_;  // null: no dictionary
};

}  // namespace

CodecResult NewZstdCodec(const CodecParams& params) {
  ZT_ASSIGN_OR_RETURN(int level, ResolveLevel("zstd", params, kMinLevel,
                                              ZSTD_maxCLevel(), kDefaultLevel));
  if (level == 0) level = kDefaultLevel;
  ZT_ASSIGN_OR_RETURN(auto bytes, LoadDictionary("zstd", params));
  std::shared_ptr<ZstdDict> dict;
  if (bytes != nullptr) {
    dict = std::make_shared<ZstdDict>();
    dict->bytes = std::move(bytes);
    const void* data = dict->bytes->data();
    const std::size_t size = dict->bytes->size();
    const ZSTD_dictContentType_e type =
        params.dict_content_only ? ZSTD_dct_rawContent : ZSTD_dct_auto;
    ZSTD_compressionParameters cp = ZSTD_getCParams(level, 4096, size);
    cp.hashLog = std::min(cp.hashLog, kDictTableLog);
    cp.chainLog = std::min(cp.chainLog, kDictTableLog);
    dict->cdict = ZSTD_createCDict_advanced(data, size, ZSTD_dlm_byRef, type,
                                            cp, ZSTD_defaultCMem);
    dict->ddict = ZSTD_createDDict_advanced(data, size, ZSTD_dlm_byRef, type,
                                            ZSTD_defaultCMem);
    if (dict->cdict == nullptr || dict->ddict == nullptr) {
      return Err(Status::InvalidArgument(
          "zstd: unusable dictionary" +
          (params.dict_path.empty() ? "" : " " + params.dict_path)));
    }
  }
  return std::make_shared<const ZstdCodec>(level, std::move(dict));
}

}  // namespace ztier::internal
