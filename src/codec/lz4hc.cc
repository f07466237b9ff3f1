// lz4hc.cc: the "lz4hc" codec (LZ4 block format, high-compression matcher).
//
// level=1..12, default 9 (LZ4HC_CLEVEL_DEFAULT). Each Compressor owns one
// LZ4HC state (LZ4_sizeofStateHC(), about 256 KiB) allocated at creation;
// LZ4_compress_HC_extStateHC reinitialises it per call and does not
// allocate. Output is a plain LZ4 block, so decompression is lz4's.
#include <lz4hc.h>

#include <climits>
#include <memory>

#include "codec_internal.h"

namespace ztier::internal {
namespace {

class Lz4HcCompressor final : public Compressor {
 public:
  explicit Lz4HcCompressor(int level)
      : level_(level),
        state_(std::make_unique<std::max_align_t[]>(
            (LZ4_sizeofStateHC() + sizeof(std::max_align_t) - 1) /
            sizeof(std::max_align_t))) {}

  std::size_t Compress(std::span<const std::byte> src,
                       std::span<std::byte> dst) override {
    if (src.size() > INT_MAX) return 0;
    const int cap =
        dst.size() > INT_MAX ? INT_MAX : static_cast<int>(dst.size());
    const int n = LZ4_compress_HC_extStateHC(
        state_.get(), reinterpret_cast<const char*>(src.data()),
        reinterpret_cast<char*>(dst.data()), static_cast<int>(src.size()), cap,
        level_);
    return n > 0 ? static_cast<std::size_t>(n) : 0;
  }

 private:
  const int level_;
  std::unique_ptr<std::max_align_t[]> state_;
};

class Lz4HcCodec final : public Codec {
 public:
  explicit Lz4HcCodec(int level) : level_(level) {}
  std::string_view name() const override { return "lz4hc"; }
  int level() const override { return level_; }
  Result<std::unique_ptr<Compressor>> NewCompressor() const override {
    return std::make_unique<Lz4HcCompressor>(level_);
  }
  Result<std::unique_ptr<Decompressor>> NewDecompressor() const override {
    return NewLz4Decompressor();
  }

 private:
  const int level_;
};

}  // namespace

CodecResult NewLz4HcCodec(const CodecParams& params) {
  ZT_RETURN_IF_ERROR(RejectDict("lz4hc", params));
  ZT_ASSIGN_OR_RETURN(
      int level,
      ResolveLevel("lz4hc", params, 1, LZ4HC_CLEVEL_MAX, LZ4HC_CLEVEL_DEFAULT));
  return std::make_shared<const Lz4HcCodec>(level);
}

}  // namespace ztier::internal
