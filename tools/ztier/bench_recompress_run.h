// File: tools/ztier/bench_recompress_run.h
//
// One run of `ztier bench recompress` on one corpus: a PageStore filled
// with the corpus' pages through the primary codec, every slot marked idle
// (MarkIdleAll) and recompressed with the secondary codec
// (RecompressRequest{.filter = kRecompressIdle}), timed around the
// Recompress() call alone; and, to compare with, a store of the same pages
// filled through the secondary codec directly.
//
//   auto s = MeasureRecompress({.primary = "lz4", .secondary = "zstd",
//                               .pages = 16384}, corpus);
//   s->before.mem_used_total, s->after.mem_used_total, s->result.recompressed
//   auto direct = MeasureDirect("zstd", 16384, corpus);
//
// Slot i holds page i % corpus.size(). After the pass the pool is
// compacted (Compact(), as zram's `compact` after recompression: the pass
// frees the old objects and leaves holes in the pool's pages), and every
// slot is loaded and compared with its page (neither timed): a page read
// back wrong is kCorruption naming the slot. Store, load and recompression
// errors are returned as they are, with what was being done in front.
//
// Thread safety: plain functions; each builds and destroys its own stores
// (the parallel backend's workers with them).
#ifndef ZTIER_TOOLS_ZTIER_BENCH_RECOMPRESS_RUN_H_
#define ZTIER_TOOLS_ZTIER_BENCH_RECOMPRESS_RUN_H_

#include <cstddef>
#include <string>

#include "corpus/corpus.h"
#include "ztier/batch_codec.h"
#include "ztier/page_store.h"
#include "ztier/status.h"

namespace ztier::tool {

struct RecompressRunConfig {
  std::string primary = "lz4";     // PageStoreOptions::codec
  std::string secondary = "zstd";  // PageStoreOptions::recomp[0], priority 1
  std::size_t pages = 0;           // slots filled; REQUIRES > 0
  BatchBackend backend = BatchBackend::kSerial;
};

struct RecompressSample {
  PageStoreStats before;     // after MarkIdleAll, before the pass
  PageStoreStats after;      // after the pass
  PageStoreStats compacted;  // after the pass and Compact()
  RecompressResult result;
  double seconds = 0;  // the Recompress() call
};

// The run described above; REQUIRES: !corpus.empty(), config.pages > 0.
Result<RecompressSample> MeasureRecompress(const RecompressRunConfig& config,
                                           const corpus::PageSet& corpus);

// The stats of a store of `pages` slots filled the same way with `codec`
// as its primary codec.
Result<PageStoreStats> MeasureDirect(const std::string& codec,
                                     std::size_t pages,
                                     const corpus::PageSet& corpus);

}  // namespace ztier::tool

#endif  // ZTIER_TOOLS_ZTIER_BENCH_RECOMPRESS_RUN_H_
