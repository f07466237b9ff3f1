// lz4.cc: the "lz4" codec (LZ4 block format, LZ4_compress_fast_extState).
//
// level=N is LZ4's acceleration (1..65537, default 1: the kernel's
// LZ4_compress_default). Each Compressor owns one LZ4 state
// (LZ4_sizeofState(), about 16 KiB) allocated at creation, so Compress()
// does not allocate. Decompression uses LZ4_decompress_safe, which never
// reads or writes out of bounds whatever the input; it needs no state, and
// lz4hc shares it, with the compressor's shape (NewLz4BlockCodec).
#include <lz4.h>

#include <climits>
#include <memory>

#include "codec_internal.h"

namespace ztier::internal {
namespace {

constexpr int kMaxAcceleration = 65537;  // LZ4_ACCELERATION_MAX

// One Compressor of an LZ4-block codec (NewLz4BlockCodec).
class Lz4BlockCompressor final : public Compressor {
 public:
  Lz4BlockCompressor(int level, std::size_t state_bytes,
                     Lz4CompressFn compress)
      : level_(level),
        compress_(compress),
        state_(std::make_unique<std::max_align_t[]>(
            (state_bytes + sizeof(std::max_align_t) - 1) /
            sizeof(std::max_align_t))) {}

  std::size_t Compress(std::span<const std::byte> src,
                       std::span<std::byte> dst) override {
    if (src.size() > INT_MAX) return 0;
    const int cap =
        dst.size() > INT_MAX ? INT_MAX : static_cast<int>(dst.size());
    const int n = compress_(
        state_.get(), reinterpret_cast<const char*>(src.data()),
        reinterpret_cast<char*>(dst.data()), static_cast<int>(src.size()), cap,
        level_);
    return n > 0 ? static_cast<std::size_t>(n) : 0;
  }

 private:
  const int level_;
  const Lz4CompressFn compress_;
  std::unique_ptr<std::max_align_t[]> state_;
};

class Lz4Decompressor final : public Decompressor {
 public:
  Status Decompress(std::span<const std::byte> src,
                    std::span<std::byte> dst) override {
    if (src.size() > INT_MAX || dst.size() > INT_MAX) {
      return Status::Corruption("lz4: object too large");
    }
    const int n = LZ4_decompress_safe(reinterpret_cast<const char*>(src.data()),
                                      reinterpret_cast<char*>(dst.data()),
                                      static_cast<int>(src.size()),
                                      static_cast<int>(dst.size()));
    if (n < 0) return Status::Corruption("lz4: malformed compressed block");
    if (static_cast<std::size_t>(n) != dst.size()) {
      return Status::Corruption("lz4: decompressed size differs from page");
    }
    return Status::Ok();
  }
};

class Lz4BlockCodec final : public Codec {
 public:
  Lz4BlockCodec(std::string_view name, int level, std::size_t state_bytes,
                Lz4CompressFn compress)
      : name_(name),
        level_(level),
        state_bytes_(state_bytes),
        compress_(compress) {}
  std::string_view name() const override { return name_; }
  int level() const override { return level_; }
  Result<std::unique_ptr<Compressor>> NewCompressor() const override {
    return std::make_unique<Lz4BlockCompressor>(level_, state_bytes_,
                                                compress_);
  }
  Result<std::unique_ptr<Decompressor>> NewDecompressor() const override {
    return std::make_unique<Lz4Decompressor>();
  }

 private:
  const std::string_view name_;
  const int level_;
  const std::size_t state_bytes_;
  const Lz4CompressFn compress_;
};

}  // namespace

CodecResult NewLz4BlockCodec(std::string_view name, int level,
                             std::size_t state_bytes, Lz4CompressFn compress) {
  return std::make_shared<const Lz4BlockCodec>(name, level, state_bytes,
                                               compress);
}

CodecResult NewLz4Codec(const CodecParams& params) {
  ZT_RETURN_IF_ERROR(RejectDict("lz4", params));
  ZT_ASSIGN_OR_RETURN(int accel,
                      ResolveLevel("lz4", params, 1, kMaxAcceleration, 1));
  return NewLz4BlockCodec("lz4", accel,
                          static_cast<std::size_t>(LZ4_sizeofState()),
                          LZ4_compress_fast_extState);
}

}  // namespace ztier::internal
