// lz4.cc: the "lz4" codec (LZ4 block format, LZ4_compress_fast_extState).
//
// level=N is LZ4's acceleration (1..65537, default 1: the kernel's
// LZ4_compress_default). Each Compressor owns one LZ4 state
// (LZ4_sizeofState(), about 16 KiB) allocated at creation, so Compress()
// does not allocate. Decompression uses LZ4_decompress_safe, which never
// reads or writes out of bounds whatever the input; it needs no state, and
// lz4hc shares it, with the compressor's shape (NewLz4BlockCodec).
//
// With a dictionary (dict=PATH or CodecParams::dict; LZ4 uses at most its
// last 64 KiB), the codec loads it once into an LZ4_stream_t
// (LZ4_loadDict), shared read-only. Each Compressor copies that loaded
// stream into its own before every page and compresses with
// LZ4_compress_fast_continue: the copy of a pre-loaded stream that lz4.h
// offers as the alternative to LZ4_attach_dictionary (which the shared
// library does not export), 16 KiB per page, the size of the state that
// LZ4_compress_fast_extState clears per page anyway. Decompression is
// LZ4_decompress_safe_usingDict, as bounded as LZ4_decompress_safe.
#include <lz4.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <memory>
#include <vector>

#include "codec_internal.h"

namespace ztier::internal {
namespace {

constexpr int kMaxAcceleration = 65537;  // LZ4_ACCELERATION_MAX

int ToInt(std::size_t n) {
  return n > INT_MAX ? INT_MAX : static_cast<int>(n);
}

// A dictionary's bytes and the stream LZ4_loadDict made of them, which
// refers to the bytes in place.
struct Lz4Dict {
  std::shared_ptr<const std::vector<std::byte>> bytes;
  const char* start = nullptr;  // the part LZ4 uses: the last 64 KiB
  int size = 0;
  LZ4_stream_t loaded;
};

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
    const int n = compress_(
        state_.get(), reinterpret_cast<const char*>(src.data()),
        reinterpret_cast<char*>(dst.data()), static_cast<int>(src.size()),
        ToInt(dst.size()), level_);
    return n > 0 ? static_cast<std::size_t>(n) : 0;
  }

 private:
  const int level_;
  const Lz4CompressFn compress_;
  std::unique_ptr<std::max_align_t[]> state_;
};

// The decompressor of every LZ4-block codec, and of lz4 with a dictionary
// (`dict`; null: none).
class Lz4Decompressor final : public Decompressor {
 public:
  explicit Lz4Decompressor(std::shared_ptr<const Lz4Dict> dict = nullptr)
      : dict_(std::move(dict)) {}

  Status Decompress(std::span<const std::byte> src,
                    std::span<std::byte> dst) override {
    if (src.size() > INT_MAX || dst.size() > INT_MAX) {
      return Status::Corruption("lz4: object too large");
    }
    const char* in = reinterpret_cast<const char*>(src.data());
    char* out = reinterpret_cast<char*>(dst.data());
    const int in_size = static_cast<int>(src.size());
    const int out_size = static_cast<int>(dst.size());
    const int n = dict_ != nullptr
                      ? LZ4_decompress_safe_usingDict(in, out, in_size,
                                                      out_size, dict_->start,
                                                      dict_->size)
                      : LZ4_decompress_safe(in, out, in_size, out_size);
    if (n < 0) return Status::Corruption("lz4: malformed compressed block");
    if (static_cast<std::size_t>(n) != dst.size()) {
      return Status::Corruption("lz4: decompressed size differs from page");
    }
    return Status::Ok();
  }

 private:
  const std::shared_ptr<const Lz4Dict> dict_;
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

class Lz4DictCompressor final : public Compressor {
 public:
  Lz4DictCompressor(int acceleration, std::shared_ptr<const Lz4Dict> dict)
      : acceleration_(acceleration),
        dict_(std::move(dict)),
        work_(std::make_unique<LZ4_stream_t>()) {}

  std::size_t Compress(std::span<const std::byte> src,
                       std::span<std::byte> dst) override {
    if (src.size() > INT_MAX) return 0;
    std::memcpy(work_.get(), &dict_->loaded, sizeof(LZ4_stream_t));
    const int n = LZ4_compress_fast_continue(
        work_.get(), reinterpret_cast<const char*>(src.data()),
        reinterpret_cast<char*>(dst.data()), static_cast<int>(src.size()),
        ToInt(dst.size()), acceleration_);
    return n > 0 ? static_cast<std::size_t>(n) : 0;
  }

 private:
  const int acceleration_;
  const std::shared_ptr<const Lz4Dict> dict_;
  std::unique_ptr<LZ4_stream_t> work_;
};

class Lz4DictCodec final : public Codec {
 public:
  Lz4DictCodec(int acceleration, std::shared_ptr<const Lz4Dict> dict)
      : acceleration_(acceleration), dict_(std::move(dict)) {}
  std::string_view name() const override { return "lz4"; }
  int level() const override { return acceleration_; }
  Result<std::unique_ptr<Compressor>> NewCompressor() const override {
    return std::make_unique<Lz4DictCompressor>(acceleration_, dict_);
  }
  Result<std::unique_ptr<Decompressor>> NewDecompressor() const override {
    return std::make_unique<Lz4Decompressor>(dict_);
  }
  std::size_t dictionary_bytes() const override {
    return dict_->bytes->size() + sizeof(LZ4_stream_t);
  }

 private:
  const int acceleration_;
  const std::shared_ptr<const Lz4Dict> dict_;
};

}  // namespace

CodecResult NewLz4BlockCodec(std::string_view name, int level,
                             std::size_t state_bytes, Lz4CompressFn compress) {
  return std::make_shared<const Lz4BlockCodec>(name, level, state_bytes,
                                               compress);
}

CodecResult NewLz4Codec(const CodecParams& params) {
  ZT_ASSIGN_OR_RETURN(int accel,
                      ResolveLevel("lz4", params, 1, kMaxAcceleration, 1));
  ZT_ASSIGN_OR_RETURN(auto bytes, LoadDictionary("lz4", params));
  if (bytes != nullptr) {
    auto dict = std::make_shared<Lz4Dict>();
    dict->bytes = std::move(bytes);
    const std::size_t used = std::min<std::size_t>(dict->bytes->size(), 65536);
    dict->start =
        reinterpret_cast<const char*>(dict->bytes->data()) +
        (dict->bytes->size() - used);
    dict->size = static_cast<int>(used);
    LZ4_initStream(&dict->loaded, sizeof(dict->loaded));
    LZ4_loadDict(&dict->loaded, dict->start, dict->size);
    return std::make_shared<const Lz4DictCodec>(accel, std::move(dict));
  }
  return NewLz4BlockCodec("lz4", accel,
                          static_cast<std::size_t>(LZ4_sizeofState()),
                          LZ4_compress_fast_extState);
}

}  // namespace ztier::internal
