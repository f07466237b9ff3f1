// deflate.cc: the "deflate" codec (raw DEFLATE via libdeflate).
//
// level=1..12, default 6 (libdeflate's scale; 10..12 are its slow optimal
// parsers). deflate.winbits is accepted for zram compatibility but has no
// effect: libdeflate has no window setting. Its raw DEFLATE output for a page
// uses distances below the page size, so a zlib reader needs windowBits >=
// 12 (the kernel's default of 11 would not do for a 4 KiB page anyway).
//
// Each Compressor owns a libdeflate_compressor (allocated at creation, sized
// for its level), each Decompressor a libdeflate_decompressor. Decompression
// is bounded by both buffers and accepted only with actual_out == dst.size().
#include <libdeflate.h>

#include <memory>

#include "codec_internal.h"

namespace ztier::internal {
namespace {

constexpr int kDefaultLevel = 6;

class DeflateCompressor final : public Compressor {
 public:
  explicit DeflateCompressor(libdeflate_compressor* c) : c_(c) {}
  ~DeflateCompressor() override { libdeflate_free_compressor(c_); }
  std::size_t Compress(std::span<const std::byte> src,
                       std::span<std::byte> dst) override {
    return libdeflate_deflate_compress(c_, src.data(), src.size(), dst.data(),
                                       dst.size());  // 0: does not fit
  }

 private:
  libdeflate_compressor* const c_;
};

class DeflateDecompressor final : public Decompressor {
 public:
  explicit DeflateDecompressor(libdeflate_decompressor* d) : d_(d) {}
  ~DeflateDecompressor() override { libdeflate_free_decompressor(d_); }
  Status Decompress(std::span<const std::byte> src,
                    std::span<std::byte> dst) override {
    std::size_t actual = 0;
    const libdeflate_result r = libdeflate_deflate_decompress(
        d_, src.data(), src.size(), dst.data(), dst.size(), &actual);
    if (r != LIBDEFLATE_SUCCESS) {
      return Status::Corruption(r == LIBDEFLATE_INSUFFICIENT_SPACE
                                    ? "deflate: output larger than page"
                                    : "deflate: malformed stream");
    }
    if (actual != dst.size()) {
      return Status::Corruption("deflate: decompressed size differs from page");
    }
    return Status::Ok();
  }

 private:
  libdeflate_decompressor* const d_;
};

class DeflateCodec final : public Codec {
 public:
  explicit DeflateCodec(int level) : level_(level) {}
  std::string_view name() const override { return "deflate"; }
  int level() const override { return level_; }
  Result<std::unique_ptr<Compressor>> NewCompressor() const override {
    libdeflate_compressor* c = libdeflate_alloc_compressor(level_);
    if (c == nullptr) {
      return Err(Status::ResourceExhausted("deflate: cannot allocate"));
    }
    try {  // the object owns c once made
      return std::make_unique<DeflateCompressor>(c);
    } catch (...) {
      libdeflate_free_compressor(c);
      throw;
    }
  }
  Result<std::unique_ptr<Decompressor>> NewDecompressor() const override {
    libdeflate_decompressor* d = libdeflate_alloc_decompressor();
    if (d == nullptr) {
      return Err(Status::ResourceExhausted("deflate: cannot allocate"));
    }
    try {  // the object owns d once made
      return std::make_unique<DeflateDecompressor>(d);
    } catch (...) {
      libdeflate_free_decompressor(d);
      throw;
    }
  }

 private:
  const int level_;
};

}  // namespace

CodecResult NewDeflateCodec(const CodecParams& params) {
  ZT_RETURN_IF_ERROR(RejectDict("deflate", params));
  ZT_ASSIGN_OR_RETURN(int level,
                      ResolveLevel("deflate", params, 1, 12, kDefaultLevel));
  return std::make_shared<const DeflateCodec>(level);
}

}  // namespace ztier::internal
