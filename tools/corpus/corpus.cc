// corpus.cc: loading page corpora (corpus.h).
//
// A `.zst` file is decompressed with ZSTD_decompressStream: the corpora are
// one 16 MiB frame with a 16 MiB window, and streaming decompression lets us
// bound the window (ZSTD_d_windowLogMax = 27, 128 MiB) instead of trusting
// the header. The frame's content size, when present, only presizes the
// output (up to 64 MiB: a 13-byte header may claim anything). Any other
// file is read as is. Either way the result is padded with zeros to a
// whole number of pages.
#include "corpus/corpus.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <memory>
#include <utility>

namespace ztier::corpus {
namespace {

constexpr int kWindowLogMax = 27;
// The most output a frame's content size presizes (64 MiB).
constexpr unsigned long long kReserveMax = 1ull << 26;

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         s.substr(s.size() - suffix.size()) == suffix;
}

Result<std::vector<std::byte>> ReadFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Err(PosixError("open " + path, errno));
  std::vector<std::byte> data;
  std::size_t used = 0;
  for (;;) {
    if (data.size() - used < (1 << 16)) data.resize(used + (1 << 20));
    const ssize_t r = ::read(fd, data.data() + used, data.size() - used);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      const int err = errno;
      ::close(fd);
      return Err(PosixError("read " + path, err));
    }
    if (r == 0) break;
    used += static_cast<std::size_t>(r);
  }
  ::close(fd);
  data.resize(used);
  return data;
}

Result<std::vector<std::byte>> DecompressZstd(const std::string& path,
                                              std::span<const std::byte> in) {
  std::unique_ptr<ZSTD_DStream, decltype(&ZSTD_freeDStream)> ds(
      ZSTD_createDStream(), ZSTD_freeDStream);
  if (ds == nullptr)
    return Err(Status::ResourceExhausted("ZSTD_createDStream"));
  const std::size_t set =
      ZSTD_DCtx_setParameter(ds.get(), ZSTD_d_windowLogMax, kWindowLogMax);
  if (ZSTD_isError(set)) return Err(Status::Unsupported("ZSTD_d_windowLogMax"));
  std::vector<std::byte> out;
  // The header's content size is the file's word, not a fact: it only
  // presizes, up to kReserveMax, and the output grows as it is decoded.
  const unsigned long long content =
      ZSTD_getFrameContentSize(in.data(), in.size());
  if (content != ZSTD_CONTENTSIZE_UNKNOWN &&
      content != ZSTD_CONTENTSIZE_ERROR) {
    out.reserve(std::min<unsigned long long>(content, kReserveMax));
  }
  ZSTD_inBuffer ib{in.data(), in.size(), 0};
  std::size_t used = 0;
  for (;;) {
    if (out.size() - used < ZSTD_DStreamOutSize()) {
      out.resize(used + ZSTD_DStreamOutSize());
    }
    ZSTD_outBuffer ob{out.data() + used, out.size() - used, 0};
    const std::size_t hint = ZSTD_decompressStream(ds.get(), &ob, &ib);
    if (ZSTD_isError(hint)) {
      return Err(Status::Corruption(path + ": " + ZSTD_getErrorName(hint)));
    }
    used += ob.pos;
    if (ib.pos == ib.size) {
      if (hint == 0) break;  // the last frame is complete
      // No input left and the output was not filled: nothing more to flush.
      if (ob.pos < ob.size) {
        return Err(Status::Corruption(path + ": truncated zstd frame"));
      }
    }
  }
  out.resize(used);
  return out;
}

}  // namespace

PageSet::PageSet(std::string name, std::vector<std::byte> bytes)
    : name_(std::move(name)), bytes_(std::move(bytes)) {
  bytes_.resize((bytes_.size() + kPageSize - 1) / kPageSize * kPageSize);
}

std::string CorpusName(std::string_view path) {
  const auto slash = path.rfind('/');
  if (slash != std::string_view::npos) path.remove_prefix(slash + 1);
  if (EndsWith(path, ".zst")) path.remove_suffix(4);
  return std::string(path);
}

Result<PageSet> LoadPageSet(const std::string& path) {
  ZT_ASSIGN_OR_RETURN(std::vector<std::byte> raw, ReadFile(path));
  if (raw.empty()) return Err(Status::InvalidArgument(path + ": empty file"));
  if (EndsWith(path, ".zst")) {
    ZT_ASSIGN_OR_RETURN(raw, DecompressZstd(path, raw));
    if (raw.empty()) {
      return Err(Status::Corruption(path + ": no pages in zstd frame"));
    }
  }
  return PageSet(CorpusName(path), std::move(raw));
}

Status WriteFileAtomically(const std::string& path,
                           std::span<const std::byte> data) {
  std::string tmp = path + ".tmp.XXXXXX";
  const int fd = ::mkostemp(tmp.data(), O_CLOEXEC);
  if (fd < 0) return PosixError("create a temporary file beside " + path, errno);
  auto fail = [&](const std::string& what, int err) {
    ::close(fd);
    ::unlink(tmp.c_str());
    return PosixError(what + " " + tmp, err);
  };
  for (std::size_t done = 0; done < data.size();) {
    const ssize_t w = ::write(fd, data.data() + done, data.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return fail("write", errno);
    done += static_cast<std::size_t>(w);
  }
  if (::fchmod(fd, 0644) != 0) return fail("fchmod", errno);
  if (::fsync(fd) != 0) return fail("fsync", errno);
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return PosixError("close " + tmp, err);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return PosixError("rename " + tmp + " to " + path, err);
  }
  return Status::Ok();
}

Status WritePageSet(const std::string& path, std::span<const std::byte> pages,
                    int level) {
  if (pages.empty() || pages.size() % kPageSize != 0) {
    return Status::InvalidArgument("a corpus holds whole pages, at least one");
  }
  if (level < 1 || level > ZSTD_maxCLevel()) {
    return Status::InvalidArgument("zstd level " + std::to_string(level) +
                                   " out of range 1.." +
                                   std::to_string(ZSTD_maxCLevel()));
  }
  std::unique_ptr<ZSTD_CCtx, decltype(&ZSTD_freeCCtx)> cctx(ZSTD_createCCtx(),
                                                            ZSTD_freeCCtx);
  if (cctx == nullptr) return Status::ResourceExhausted("ZSTD_createCCtx");
  // The smallest window that holds every page, within what LoadPageSet
  // accepts: a long match may reach back to any earlier page.
  int window_log = 10;
  while (window_log < kWindowLogMax &&
         (std::size_t{1} << window_log) < pages.size()) {
    ++window_log;
  }
  for (auto [param, value] :
       {std::pair{ZSTD_c_compressionLevel, level},
        std::pair{ZSTD_c_enableLongDistanceMatching, 1},
        std::pair{ZSTD_c_windowLog, window_log},
        std::pair{ZSTD_c_contentSizeFlag, 1},
        std::pair{ZSTD_c_checksumFlag, 1}}) {
    const std::size_t r = ZSTD_CCtx_setParameter(cctx.get(), param, value);
    if (ZSTD_isError(r)) {
      return Status::Unsupported(std::string("zstd parameter: ") +
                                 ZSTD_getErrorName(r));
    }
  }
  std::vector<std::byte> out(ZSTD_compressBound(pages.size()));
  const std::size_t n = ZSTD_compress2(cctx.get(), out.data(), out.size(),
                                       pages.data(), pages.size());
  if (ZSTD_isError(n)) {
    return Status::IoError(std::string("zstd: ") + ZSTD_getErrorName(n));
  }
  out.resize(n);
  return WriteFileAtomically(path, out);
}

Result<std::vector<std::string>> FindCorpusFiles(const std::string& dir) {
  std::error_code ec;
  std::filesystem::directory_iterator it(dir, ec);
  if (ec) return Err(Status::NotFound(dir + ": " + ec.message()));
  std::vector<std::string> files;
  for (; it != std::filesystem::directory_iterator(); it.increment(ec)) {
    if (ec) return Err(Status::IoError(dir + ": " + ec.message()));
    const std::string name = it->path().filename().string();
    if (EndsWith(name, ".pages.zst") && it->is_regular_file(ec)) {
      files.push_back(it->path().string());
    }
  }
  if (ec) return Err(Status::IoError(dir + ": " + ec.message()));
  if (files.empty()) {
    return Err(Status::NotFound(dir + ": no *.pages.zst corpus files"));
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace ztier::corpus
