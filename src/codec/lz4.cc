// lz4.cc: the "lz4" codec (LZ4 block format, LZ4_compress_fast_extState).
//
// level=N is LZ4's acceleration (1..65537, default 1: the kernel's
// LZ4_compress_default). Each Compressor owns one LZ4 state
// (LZ4_sizeofState(), about 16 KiB) allocated at creation, so Compress()
// does not allocate. Decompression uses LZ4_decompress_safe, which never
// reads or writes out of bounds whatever the input; it needs no state, and
// lz4hc shares it.
#include <lz4.h>

#include <climits>
#include <memory>

#include "codec_internal.h"

namespace ztier::internal {
namespace {

constexpr int kMaxAcceleration = 65537;  // LZ4_ACCELERATION_MAX

class Lz4Compressor final : public Compressor {
 public:
  explicit Lz4Compressor(int acceleration)
      : acceleration_(acceleration),
        state_(std::make_unique<std::max_align_t[]>(
            (LZ4_sizeofState() + sizeof(std::max_align_t) - 1) /
            sizeof(std::max_align_t))) {}

  std::size_t Compress(std::span<const std::byte> src,
                       std::span<std::byte> dst) override {
    if (src.size() > INT_MAX) return 0;
    const int cap =
        dst.size() > INT_MAX ? INT_MAX : static_cast<int>(dst.size());
    const int n = LZ4_compress_fast_extState(
        state_.get(), reinterpret_cast<const char*>(src.data()),
        reinterpret_cast<char*>(dst.data()), static_cast<int>(src.size()), cap,
        acceleration_);
    return n > 0 ? static_cast<std::size_t>(n) : 0;
  }

 private:
  const int acceleration_;
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

class Lz4Codec final : public Codec {
 public:
  explicit Lz4Codec(int acceleration) : acceleration_(acceleration) {}
  std::string_view name() const override { return "lz4"; }
  int level() const override { return acceleration_; }
  Result<std::unique_ptr<Compressor>> NewCompressor() const override {
    return std::make_unique<Lz4Compressor>(acceleration_);
  }
  Result<std::unique_ptr<Decompressor>> NewDecompressor() const override {
    return NewLz4Decompressor();
  }

 private:
  const int acceleration_;
};

}  // namespace

std::unique_ptr<Decompressor> NewLz4Decompressor() {
  return std::make_unique<Lz4Decompressor>();
}

CodecResult NewLz4Codec(const CodecParams& params) {
  ZT_RETURN_IF_ERROR(RejectDict("lz4", params));
  ZT_ASSIGN_OR_RETURN(int accel,
                      ResolveLevel("lz4", params, 1, kMaxAcceleration, 1));
  return std::make_shared<const Lz4Codec>(accel);
}

}  // namespace ztier::internal
