// dictionary.cc: where a codec's dictionary comes from (a file or bytes in
// memory, codec_internal.h's LoadDictionary) and how one is trained
// (TrainDictionary, ztier/codec.h).
#include <zdict.h>

#include <cerrno>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "codec_internal.h"
#include "platform/read_file.h"

namespace ztier {
namespace {

// The largest dictionary file read: zstd's dictionaries are tens to
// hundreds of KiB, lz4 uses the last 64 KiB of one.
constexpr std::size_t kMaxDictFileBytes = std::size_t{16} << 20;

}  // namespace

bool SupportsDictionary(std::string_view name) {
  name = CanonicalCodecName(name);
  return name == "zstd" || name == "lz4";
}

Result<std::vector<std::byte>> TrainDictionary(
    std::span<const std::span<const std::byte>> samples,
    std::size_t max_bytes) {
  if (max_bytes < 1024) {
    return Err(Status::InvalidArgument(
        "dictionary size " + std::to_string(max_bytes) +
        " is below the smallest, 1024 bytes"));
  }
  std::vector<std::byte> joined;
  std::vector<std::size_t> sizes;
  sizes.reserve(samples.size());
  for (const auto& s : samples) {
    joined.insert(joined.end(), s.begin(), s.end());
    sizes.push_back(s.size());
  }
  std::vector<std::byte> dict(max_bytes);
  const std::size_t n = ZDICT_trainFromBuffer(
      dict.data(), dict.size(), joined.data(), sizes.data(),
      static_cast<unsigned>(sizes.size()));
  if (ZDICT_isError(n)) {
    return Err(Status::InvalidArgument(
        "cannot train a dictionary on " + std::to_string(samples.size()) +
        " samples (" + std::to_string(joined.size()) +
        " bytes): " + ZDICT_getErrorName(n)));
  }
  dict.resize(n);
  return dict;
}

std::span<const std::byte> DictionaryContent(std::span<const std::byte> dict) {
  const std::size_t header = ZDICT_getDictHeaderSize(dict.data(), dict.size());
  if (ZDICT_isError(header) || header >= dict.size()) return dict;
  return dict.subspan(header);
}

namespace internal {

Result<std::shared_ptr<const std::vector<std::byte>>> LoadDictionary(
    std::string_view codec, const CodecParams& params) {
  if (params.dict != nullptr && !params.dict_path.empty()) {
    return Err(Status::InvalidArgument(
        std::string(codec) + ": a dictionary from a file and one in memory"));
  }
  std::shared_ptr<const std::vector<std::byte>> dict = params.dict;
  if (!params.dict_path.empty()) {
    ZT_ASSIGN_OR_RETURN(
        std::vector<std::byte> bytes,
        platform::ReadRegularFileBytes(params.dict_path, kMaxDictFileBytes,
                                       std::string(codec) + ": dict"));
    dict = std::make_shared<const std::vector<std::byte>>(std::move(bytes));
  }
  if (dict != nullptr && dict->empty()) {
    return Err(Status::InvalidArgument(
        std::string(codec) + ": empty dictionary" +
        (params.dict_path.empty() ? "" : " " + params.dict_path)));
  }
  return dict;
}

Status RejectDict(std::string_view codec, const CodecParams& params) {
  if (params.dict_path.empty() && params.dict == nullptr) return Status::Ok();
  return Status::InvalidArgument(
      std::string(codec) + ": dictionaries are supported by zstd and lz4 only");
}

}  // namespace internal
}  // namespace ztier
