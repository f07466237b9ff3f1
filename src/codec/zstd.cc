// zstd.cc: the "zstd" codec (one zstd frame per page).
//
// level=-7..22, default 3 (0 also means 3, as in zstd). dict=PATH loads a
// dictionary (a ZDICT-trained one or raw content) once, when the Codec is
// made: one ZSTD_CDict (at the codec's level) and one ZSTD_DDict, shared
// read-only by every Compressor and Decompressor of the codec (zstd
// documents both as usable from several threads at once). Compressors and
// Decompressors hold them by shared_ptr, so they outlive the Codec if need
// be.
//
// Each Compressor owns one ZSTD_CCtx, warmed at creation with one page so
// that its workspace is sized and Compress() on pages does not allocate.
// Each Decompressor owns one ZSTD_DCtx; ZSTD_decompressDCtx /
// ZSTD_decompress_usingDDict are bounded by both buffers, and a page is
// accepted only if the frame yields exactly dst.size() bytes.
#include <fcntl.h>
#include <unistd.h>
#include <zstd.h>

#include <cerrno>
#include <memory>
#include <string>
#include <vector>

#include "codec_internal.h"

namespace ztier::internal {
namespace {

constexpr int kMinLevel = -7;
constexpr int kDefaultLevel = 3;

struct ZstdDict {
  ZSTD_CDict* cdict = nullptr;
  ZSTD_DDict* ddict = nullptr;
  ~ZstdDict() {
    ZSTD_freeCDict(cdict);
    ZSTD_freeDDict(ddict);
  }
};

Result<std::vector<char>> ReadWholeFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Err(PosixError("zstd: open dict " + path, errno));
  std::vector<char> data;
  char buf[1 << 16];
  for (;;) {
    const ssize_t r = ::read(fd, buf, sizeof(buf));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      const int err = errno;
      ::close(fd);
      return Err(PosixError("zstd: read dict " + path, err));
    }
    if (r == 0) break;
    data.insert(data.end(), buf, buf + r);
  }
  ::close(fd);
  return data;
}

class ZstdCompressor final : public Compressor {
 public:
  ZstdCompressor(ZSTD_CCtx* cctx, int level, std::shared_ptr<ZstdDict> dict)
      : cctx_(cctx), level_(level), dict_(std::move(dict)) {}
  ~ZstdCompressor() override { ZSTD_freeCCtx(cctx_); }

  std::size_t Compress(std::span<const std::byte> src,
                       std::span<std::byte> dst) override {
    const std::size_t n =
        dict_ ? ZSTD_compress_usingCDict(cctx_, dst.data(), dst.size(),
                                         src.data(), src.size(), dict_->cdict)
              : ZSTD_compressCCtx(cctx_, dst.data(), dst.size(), src.data(),
                                  src.size(), level_);
    return ZSTD_isError(n) ? 0 : n;  // dstSize_tooSmall: does not fit
  }

 private:
  ZSTD_CCtx* const cctx_;
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
    auto c = std::make_unique<ZstdCompressor>(cctx, level_, dict_);
    // Size the workspace now, off the hot path.
    std::vector<std::byte> page(4096), out(ZSTD_compressBound(4096));
    (void)c->Compress(page, out);
    return c;
  }

  Result<std::unique_ptr<Decompressor>> NewDecompressor() const override {
    ZSTD_DCtx* dctx = ZSTD_createDCtx();
    if (dctx == nullptr) {
      return Err(Status::ResourceExhausted("zstd: cannot create a DCtx"));
    }
    return std::make_unique<ZstdDecompressor>(dctx, dict_);
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
  std::shared_ptr<ZstdDict> dict;
  if (!params.dict_path.empty()) {
    ZT_ASSIGN_OR_RETURN(std::vector<char> bytes,
                        ReadWholeFile(params.dict_path));
    if (bytes.empty()) {
      return Err(Status::InvalidArgument("zstd: empty dictionary " +
                                         params.dict_path));
    }
    dict = std::make_shared<ZstdDict>();
    dict->cdict = ZSTD_createCDict(bytes.data(), bytes.size(), level);
    dict->ddict = ZSTD_createDDict(bytes.data(), bytes.size());
    if (dict->cdict == nullptr || dict->ddict == nullptr) {
      return Err(Status::InvalidArgument("zstd: unusable dictionary " +
                                         params.dict_path));
    }
  }
  return std::make_shared<const ZstdCodec>(level, std::move(dict));
}

}  // namespace ztier::internal
