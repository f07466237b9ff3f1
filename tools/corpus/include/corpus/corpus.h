// corpus.h: page corpora for tests and benchmarks.
//
// A corpus is a run of 4096-byte pages: either a `*.pages.zst` file (one zstd
// frame holding the concatenated pages, as in testdata/; `zstd -d` gives the
// raw pages back) or any plain file, read as pages with the last one
// zero-padded, as a page cache holds it. `ztier corpus capture` writes them
// (WritePageSet, capture.h).
//
// Thread safety: a loaded PageSet is immutable; share it freely.
#ifndef ZTIER_CORPUS_CORPUS_H_
#define ZTIER_CORPUS_CORPUS_H_

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ztier/page.h"
#include "ztier/status.h"

namespace ztier::corpus {

class PageSet {
 public:
  PageSet() = default;
  PageSet(std::string name, std::vector<std::byte> bytes);

  // "anon-python.pages" for ".../anon-python.pages.zst".
  const std::string& name() const { return name_; }
  std::size_t size() const { return bytes_.size() / kPageSize; }
  ConstPage page(std::size_t i) const {
    return ConstPage(bytes_.data() + i * kPageSize, kPageSize);
  }
  std::span<const std::byte> bytes() const { return bytes_; }

 private:
  std::string name_;
  std::vector<std::byte> bytes_;  // size() * kPageSize bytes
};

// Loads a corpus file (see above). A missing or unreadable file, a damaged
// zstd frame or an empty file: an error naming the path.
Result<PageSet> LoadPageSet(const std::string& path);

// The `*.pages.zst` files directly in `dir`, sorted by name. kNotFound when
// the folder is missing or holds none.
Result<std::vector<std::string>> FindCorpusFiles(const std::string& dir);

// The corpus name for a path: the file name without a trailing ".zst".
std::string CorpusName(std::string_view path);

// Writes `pages` as a `*.pages.zst` corpus file: one zstd frame at `level`
// (1..22) with long-distance matching, its content size recorded, a window
// no larger than LoadPageSet accepts. The file appears whole or not at all:
// the frame goes to a temporary file beside `path`, which is synced and
// renamed over it; on any error the temporary file is removed and `path` is
// left as it was.
Status WritePageSet(const std::string& path, std::span<const std::byte> pages,
                    int level = 19);

// Writes `data` to `path` the same all-or-nothing way.
Status WriteFileAtomically(const std::string& path,
                           std::span<const std::byte> data);

}  // namespace ztier::corpus

#endif  // ZTIER_CORPUS_CORPUS_H_
