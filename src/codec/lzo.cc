// lzo.cc: the "lzo" codec (LZO1X-1, the kernel's "lzo").
//
// LZO1X-1 has no levels: level=N is ignored, as zram's lzo backend ignores
// it, and level() is 0. lzo_init() runs once per process (call_once).
//
// lzo1x_1_compress takes no output bound: it may write up to
// n + n/16 + 64 + 3 bytes. A Compressor therefore compresses straight into
// dst when dst is that large, else into its own scratch buffer (allocated at
// creation for one page; grown only for larger inputs) and copies the result
// if it fits. Its 64 KiB work memory is allocated at creation too.
// Decompression is lzo1x_decompress_safe, bounded by both buffers, accepted
// only when it yields exactly dst.size() bytes.
#include <lzo/lzo1x.h>

#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "codec_internal.h"

namespace ztier::internal {
namespace {

std::size_t WorstCase(std::size_t n) { return n + n / 16 + 64 + 3; }

class LzoCompressor final : public Compressor {
 public:
  LzoCompressor()
      : wrkmem_(std::make_unique<std::max_align_t[]>(
            (LZO1X_1_MEM_COMPRESS + sizeof(std::max_align_t) - 1) /
            sizeof(std::max_align_t))),
        scratch_(WorstCase(4096)) {}

  std::size_t Compress(std::span<const std::byte> src,
                       std::span<std::byte> dst) override {
    const std::size_t worst = WorstCase(src.size());
    const bool direct = dst.size() >= worst;
    if (!direct && scratch_.size() < worst) scratch_.resize(worst);
    auto* out =
        reinterpret_cast<lzo_bytep>(direct ? dst.data() : scratch_.data());
    lzo_uint out_len = 0;
    const int r =
        lzo1x_1_compress(reinterpret_cast<const lzo_bytep>(src.data()),
                         src.size(), out, &out_len, wrkmem_.get());
    if (r != LZO_E_OK || out_len > dst.size()) return 0;
    if (!direct) std::memcpy(dst.data(), scratch_.data(), out_len);
    return out_len;
  }

 private:
  std::unique_ptr<std::max_align_t[]> wrkmem_;
  std::vector<std::byte> scratch_;
};

class LzoDecompressor final : public Decompressor {
 public:
  Status Decompress(std::span<const std::byte> src,
                    std::span<std::byte> dst) override {
    lzo_uint out_len = dst.size();
    const int r = lzo1x_decompress_safe(
        reinterpret_cast<const lzo_bytep>(src.data()), src.size(),
        reinterpret_cast<lzo_bytep>(dst.data()), &out_len, nullptr);
    if (r != LZO_E_OK) return Status::Corruption("lzo: malformed stream");
    if (out_len != dst.size()) {
      return Status::Corruption("lzo: decompressed size differs from page");
    }
    return Status::Ok();
  }
};

class LzoCodec final : public Codec {
 public:
  std::string_view name() const override { return "lzo"; }
  int level() const override { return 0; }
  Result<std::unique_ptr<Compressor>> NewCompressor() const override {
    return std::make_unique<LzoCompressor>();
  }
  Result<std::unique_ptr<Decompressor>> NewDecompressor() const override {
    return std::make_unique<LzoDecompressor>();
  }
};

}  // namespace

CodecResult NewLzoCodec(const CodecParams& params) {
  ZT_RETURN_IF_ERROR(RejectDict("lzo", params));
  static std::once_flag once;
  static int init_result = LZO_E_OK;
  std::call_once(once, [] { init_result = lzo_init(); });
  if (init_result != LZO_E_OK) {
    return Err(Status::Unsupported("lzo: lzo_init() failed"));
  }
  return std::make_shared<const LzoCodec>();
}

}  // namespace ztier::internal
