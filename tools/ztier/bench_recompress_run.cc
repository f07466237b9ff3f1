// File: tools/ztier/bench_recompress_run.cc
//
// MeasureRecompress and MeasureDirect (bench_recompress_run.h): fill, idle
// marking, the timed pass, and the check of every slot read back.
#include "bench_recompress_run.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <vector>

#include "ztier/page.h"

namespace ztier::tool {
namespace {

// A store with `options`, slot i holding page i % corpus.size(), stored
// through StoreBatch a corpus' worth at a time.
Result<std::unique_ptr<PageStore>> FilledStore(const PageStoreOptions& options,
                                               const corpus::PageSet& corpus) {
  ZT_ASSIGN_OR_RETURN(auto store, PageStore::Create(options));
  const std::size_t n = options.num_pages;
  for (std::size_t first = 0; first < n; first += corpus.size()) {
    const std::size_t count = std::min(corpus.size(), n - first);
    if (Status s =
            store->StoreBatch(first, corpus.bytes().first(count * kPageSize));
        !s.ok()) {
      return Err(Status(s.code(), "fill with " + options.codec + ", slots " +
                                      std::to_string(first) + "+" +
                                      std::to_string(count) + ": " +
                                      s.message()));
    }
  }
  return store;
}

// Loads every slot and compares it with the page it was filled with.
Status CheckPages(PageStore& store, const corpus::PageSet& corpus) {
  std::vector<std::byte> page(kPageSize);
  for (std::size_t i = 0; i < store.num_pages(); ++i) {
    if (Status s = store.Load(i, MutablePage(page.data(), kPageSize));
        !s.ok()) {
      return Status(s.code(),
                    "load of slot " + std::to_string(i) +
                        " after recompression and compaction: " + s.message());
    }
    const ConstPage want = corpus.page(i % corpus.size());
    if (std::memcmp(page.data(), want.data(), kPageSize) != 0) {
      return Status::Corruption("slot " + std::to_string(i) +
                                " read back wrong after recompression and "
                                "compaction");
    }
  }
  return Status::Ok();
}

}  // namespace

Result<RecompressSample> MeasureRecompress(const RecompressRunConfig& config,
                                           const corpus::PageSet& corpus) {
  PageStoreOptions options{.num_pages = config.pages,
                           .codec = config.primary,
                           .batch_backend = config.backend};
  options.recomp[0] = RecompCodec{.codec = config.secondary};
  ZT_ASSIGN_OR_RETURN(auto store, FilledStore(options, corpus));
  store->MarkIdleAll();
  RecompressSample s;
  s.before = store->Stats();
  const auto t0 = std::chrono::steady_clock::now();
  auto result = store->Recompress({.filter = kRecompressIdle});
  s.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  if (!result.has_value()) {
    return Err(Status(result.error().code(),
                      "recompress: " + result.error().message()));
  }
  if (!result->status.ok()) {
    return Err(Status(result->status.code(),
                      "recompress: " + result->status.message()));
  }
  s.result = std::move(*result);
  s.after = store->Stats();
  store->Compact();
  s.compacted = store->Stats();
  ZT_RETURN_IF_ERROR(CheckPages(*store, corpus));
  return s;
}

Result<PageStoreStats> MeasureDirect(const std::string& codec,
                                     std::size_t pages,
                                     const corpus::PageSet& corpus) {
  ZT_ASSIGN_OR_RETURN(
      auto store, FilledStore({.num_pages = pages, .codec = codec}, corpus));
  return store->Stats();
}

}  // namespace ztier::tool
