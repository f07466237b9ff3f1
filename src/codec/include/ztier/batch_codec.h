// File: ztier/batch_codec.h
//
// Batched compression and decompression: up to batch_size() pages in one
// call, each item with its own result (the SG-list batching of the zswap
// store batching series, docs/references.md; zswap's ZSWAP_MAX_BATCH_SIZE
// caps a batch at 8).
//
//   auto bc = ztier::NewBatchCompressor(codec, {.backend = kParallel,
//                                                .pool = &workers});
//   size_t n = (*bc)->batch_size();     // the caller discovers the size,
//                                       // as crypto_acomp_batch_size()
//   (*bc)->Compress(items);             // items[i].length, per item
//
// Two backends:
//   kSerial    one Compressor, page after page: "a compressor without
//              batching". batch_size() is the cap (default 8) so that callers
//              still chunk large units by 8 for cache locality, as zswap does.
//   kParallel  fans the batch out over a WorkerPool: min(batch, lanes) lanes,
//              each with its own Compressor, take items in turn. batch_size()
//              is the cap.
//
// Results per item: for compression, `length` is the compressed size or 0 when
// the output did not fit in the item's dst (the page is then stored raw); for
// decompression, `status` is OK or kCorruption, and `length` the bytes
// written. One item's failure never affects another's.
//
// Thread safety: a BatchCompressor is used by one thread at a time (it lives
// in a compression stream). DecompressBatch() may be called from any thread
// at any time: it uses thread-local decompressors and takes no lock.
#ifndef ZTIER_BATCH_CODEC_H_
#define ZTIER_BATCH_CODEC_H_

#include <cstddef>
#include <functional>
#include <memory>
#include <span>
#include <string_view>

#include "ztier/codec.h"
#include "ztier/status.h"
#include "ztier/worker_pool.h"

namespace ztier {

inline constexpr std::size_t kMaxBatchSize = 8;  // ZSWAP_MAX_BATCH_SIZE
// A background pass that no client waits for (recompression) may hand a
// batch codec up to this many items per call: fewer hand-offs between
// lanes, and a shorter idle tail per page when the items' costs differ.
inline constexpr std::size_t kMaxPassBatchSize = 32;

struct BatchItem {
  std::span<const std::byte> src;
  std::span<std::byte> dst;
  std::size_t length = 0;  // out
  Status status;           // out (decompression)
};

enum class BatchBackend { kSerial, kParallel };

std::string_view BatchBackendName(BatchBackend b);  // "serial" / "parallel"

struct BatchOptions {
  BatchBackend backend = BatchBackend::kSerial;
  std::size_t max_batch = kMaxBatchSize;  // 1..kMaxPassBatchSize
  WorkerPool* pool = nullptr;  // required for kParallel; not owned, outlives
};

class BatchCompressor {
 public:
  virtual ~BatchCompressor() = default;
  // How many items one Compress() call takes at most.
  virtual std::size_t batch_size() const = 0;
  virtual BatchBackend backend() const = 0;
  // Called with an item's index right after that item is compressed, on
  // the thread (lane) that compressed it: the store uses it to allocate and
  // copy the object in parallel too. It must be thread-safe for the
  // parallel backend, and must not call back into this BatchCompressor.
  using ItemSink = std::function<void(std::size_t index)>;

  // Compresses every item, then (if `sink` is not null) hands each to it.
  // `prepare`, if not null, is called with an item's index on the lane
  // that compresses it, just before: it may fill the item's source there
  // (the recompression pass decompresses the old object into it, so that
  // this fans out too). An item whose src is empty after it is not
  // compressed (length 0). The same rules as for `sink`.
  // REQUIRES: items.size() <= batch_size().
  virtual void Compress(std::span<BatchItem> items,
                        const ItemSink* sink = nullptr,
                        const ItemSink* prepare = nullptr) = 0;
};

// kInvalidArgument for a bad max_batch or kParallel without a pool.
Result<std::unique_ptr<BatchCompressor>> NewBatchCompressor(
    std::shared_ptr<const Codec> codec, const BatchOptions& options);

// Decompresses every item with `codec`: on the caller alone when `pool` is
// null, else fanned out over it. Per-item status and length.
void DecompressBatch(const Codec& codec, std::span<BatchItem> items,
                     WorkerPool* pool);

}  // namespace ztier

#endif  // ZTIER_BATCH_CODEC_H_
