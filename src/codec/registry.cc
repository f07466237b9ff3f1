// registry.cc: codec names, MakeCodec, codec ids and LocalDecompressor.
//
// LocalDecompressor keeps, per thread, a small array of (codec id,
// Decompressor) pairs searched linearly with the most recent first: a thread
// normally uses one or two codecs, so the lookup is one compare and takes no
// lock. Ids are never reused, so an entry can never answer for a different
// codec. A Decompressor holds what it needs of its Codec (a zstd dictionary)
// by shared_ptr, so an entry stays valid after its Codec is gone. To bound
// the memory of threads that see many short-lived codecs (tests, the
// recompression pass), a thread keeps at most kMaxLocal entries and evicts
// the least recently used one: a reference from LocalDecompressor() stays
// valid until this thread has asked for kMaxLocal - 1 other codecs since.
#include <algorithm>
#include <atomic>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "codec_internal.h"
#include "ztier/codec.h"

namespace ztier {
namespace {

std::atomic<std::uint64_t> next_codec_id{1};

// What LocalDecompressor hands out when no Decompressor can be made.
struct UnavailableDecompressor final : Decompressor {
  Status status;
  Status Decompress(std::span<const std::byte>,
                    std::span<std::byte>) override {
    return status;
  }
};

struct Entry {
  std::string_view name;
  internal::CodecResult (*make)(const CodecParams&);
};

// zram's listing order.
constexpr Entry kCodecs[] = {
    {"lzo", internal::NewLzoCodec},         {"lz4", internal::NewLz4Codec},
    {"lz4hc", internal::NewLz4HcCodec},     {"zstd", internal::NewZstdCodec},
    {"deflate", internal::NewDeflateCodec},
};

constexpr std::size_t kMaxLocal = 16;

struct LocalEntry {
  std::uint64_t id;
  std::unique_ptr<Decompressor> decompressor;
};

}  // namespace

Codec::Codec() : id_(next_codec_id.fetch_add(1, std::memory_order_relaxed)) {}

std::vector<std::string_view> CodecNames() {
  std::vector<std::string_view> names;
  for (const Entry& e : kCodecs) names.push_back(e.name);
  return names;
}

std::string_view CanonicalCodecName(std::string_view name) {
  return name == "lzo-rle" ? std::string_view("lzo") : name;
}

bool IsCodecName(std::string_view name) {
  const std::string_view canonical = CanonicalCodecName(name);
  for (const Entry& e : kCodecs) {
    if (e.name == canonical) return true;
  }
  return false;
}

Result<std::shared_ptr<const Codec>> MakeCodec(std::string_view name,
                                               const CodecParams& params) {
  name = CanonicalCodecName(name);
  if (!params.algo.empty() && CanonicalCodecName(params.algo) != name) {
    return Err(
        Status::InvalidArgument("algorithm_params are for algo=" + params.algo +
                                ", not " + std::string(name)));
  }
  for (const Entry& e : kCodecs) {
    if (e.name == name) return e.make(params);
  }
  return Err(Status::InvalidArgument("unknown compression algorithm '" +
                                     std::string(name) + "'"));
}

Result<std::shared_ptr<const Codec>> MakeCodec(std::string_view name,
                                               std::string_view params) {
  ZT_ASSIGN_OR_RETURN(CodecParams p, ParseAlgorithmParams(params));
  return MakeCodec(name, p);
}

Decompressor& LocalDecompressor(const Codec& codec) {
  // Most recently used first.
  thread_local std::vector<LocalEntry> local;
  const std::uint64_t id = codec.id();
  if (!local.empty() && local.front().id == id) {
    return *local.front().decompressor;
  }
  for (std::size_t i = 1; i < local.size(); ++i) {
    if (local[i].id == id) {
      // Move to front, keeping the order of the rest (LRU at the back).
      std::rotate(local.begin(), local.begin() + i, local.begin() + i + 1);
      return *local.front().decompressor;
    }
  }
  // Out of memory (the codec's context, or std::bad_alloc from making the
  // object or the entry): this load fails, the next call tries again. Where
  // even the message cannot be had, a short one that fits std::string's
  // inline buffer.
  thread_local UnavailableDecompressor unavailable;
  try {
    auto d = codec.NewDecompressor();
    if (!d.has_value()) {
      unavailable.status = Status::ResourceExhausted(
          "cannot create a " + std::string(codec.name()) +
          " decompressor: " + d.error().message());
      return unavailable;
    }
    if (local.size() >= kMaxLocal) local.pop_back();
    local.insert(local.begin(), LocalEntry{id, std::move(*d)});
  } catch (const std::bad_alloc&) {
    unavailable.status = Status::ResourceExhausted("no decompressor");
    return unavailable;
  }
  return *local.front().decompressor;
}

namespace internal {

Result<int> ResolveLevel(std::string_view codec, const CodecParams& params,
                         int lo, int hi, int dflt) {
  if (params.level == CodecParams::kDefaultLevel) return dflt;
  if (params.level < lo || params.level > hi) {
    return Err(Status::InvalidArgument(
        std::string(codec) + ": level " + std::to_string(params.level) +
        " out of range " + std::to_string(lo) + ".." + std::to_string(hi)));
  }
  return params.level;
}

}  // namespace internal
}  // namespace ztier
