// batch_codec.cc: the serial and parallel BatchCompressor, DecompressBatch.
//
// Parallel: Compress() runs min(items, lanes) lanes on the WorkerPool; lane
// i uses compressors_[i] (a lane index is unique within one Run, and the
// BatchCompressor is used by one thread at a time), and each lane takes
// items from its own share of the batch first, then from the others' (see
// ItemCursor), so a worker that wakes late simply gets fewer (or no) items. The
// closure handed to WorkerPool::Run captures one pointer, so std::function
// stores it inline: the hot path does not allocate.
//
// DecompressBatch uses each thread's LocalDecompressor, so it takes no lock
// and may run on any thread.
#include "ztier/batch_codec.h"

#include <algorithm>
#include <atomic>
#include <cassert>
#include <functional>
#include <vector>

namespace ztier {
namespace {

// Hands out a batch's items to its lanes. Each lane starts on its own
// contiguous share (lane l of L gets items [l*n/L, (l+1)*n/L)), so an item,
// its output buffer and whatever the sink touches for it (the page's slot)
// are written by the same CPU from one batch to the next: with one shared
// cursor, neighbouring items went to alternate lanes and their cache lines
// moved between CPUs every batch (a few hundred ns each where the two CPUs
// share no cache). A lane done with its share takes the next unstarted
// items of the others, so a late or slow lane still gets fewer items.
class ItemCursor {
 public:
  // Lanes beyond this many add too little to a batch to be worth a share.
  static constexpr std::size_t kMaxLanes = 32;

  ItemCursor(std::size_t items, std::size_t lanes)
      : items_(items), lanes_(lanes) {
    assert(lanes >= 1 && lanes <= kMaxLanes);
    for (std::size_t l = 0; l < lanes; ++l) {
      shares_[l].next.store(l * items / lanes, std::memory_order_relaxed);
      shares_[l].end = (l + 1) * items / lanes;
    }
  }

  // The next item for `lane` to do, or the item count when none is left.
  std::size_t Next(std::size_t lane) {
    for (std::size_t k = 0; k < lanes_; ++k) {
      Share& s = shares_[(lane + k) % lanes_];
      while (s.next.load(std::memory_order_relaxed) < s.end) {
        const std::size_t i = s.next.fetch_add(1, std::memory_order_relaxed);
        if (i < s.end) return i;
      }
    }
    return items_;
  }

 private:
  struct alignas(64) Share {
    std::atomic<std::size_t> next{0};
    std::size_t end = 0;
  };
  Share shares_[kMaxLanes];
  static_assert(kMaxPassBatchSize <= kMaxLanes);
  const std::size_t items_;
  const std::size_t lanes_;
};

// What one batch call shares between its lanes (lives on the caller's stack).
struct BatchJob {
  BatchJob(std::span<BatchItem> it, std::size_t lanes)
      : items(it), cursor(it.size(), lanes) {}
  std::span<BatchItem> items;
  ItemCursor cursor;
  std::unique_ptr<Compressor>* compressors;         // compression only
  const BatchCompressor::ItemSink* sink = nullptr;  // compression only
  const BatchCompressor::ItemSink* prepare = nullptr;  // compression only
  const Codec* codec;                               // decompression only
};

// Item i of `items`: prepare, compress, sink.
void CompressItem(Compressor& c, std::span<BatchItem> items, std::size_t i,
                  const BatchCompressor::ItemSink* sink,
                  const BatchCompressor::ItemSink* prepare) {
  BatchItem& item = items[i];
  if (prepare != nullptr) (*prepare)(i);
  item.length = item.src.empty() ? 0 : c.Compress(item.src, item.dst);
  item.status = Status::Ok();
  if (sink != nullptr) (*sink)(i);
}

void CompressLane(BatchJob* job, std::size_t lane) {
  Compressor& c = *job->compressors[lane];
  for (;;) {
    const std::size_t i = job->cursor.Next(lane);
    if (i >= job->items.size()) return;
    CompressItem(c, job->items, i, job->sink, job->prepare);
  }
}

void DecompressLane(BatchJob* job, std::size_t lane) {
  Decompressor& d = LocalDecompressor(*job->codec);
  for (;;) {
    const std::size_t i = job->cursor.Next(lane);
    if (i >= job->items.size()) return;
    BatchItem& item = job->items[i];
    item.status = d.Decompress(item.src, item.dst);
    item.length = item.status.ok() ? item.dst.size() : 0;
  }
}

class SerialBatchCompressor final : public BatchCompressor {
 public:
  SerialBatchCompressor(std::unique_ptr<Compressor> c, std::size_t max_batch)
      : compressor_(std::move(c)), max_batch_(max_batch) {}
  std::size_t batch_size() const override { return max_batch_; }
  BatchBackend backend() const override { return BatchBackend::kSerial; }
  void Compress(std::span<BatchItem> items, const ItemSink* sink,
                const ItemSink* prepare) override {
    assert(items.size() <= max_batch_);
    for (std::size_t i = 0; i < items.size(); ++i) {
      CompressItem(*compressor_, items, i, sink, prepare);
    }
  }

 private:
  std::unique_ptr<Compressor> compressor_;
  const std::size_t max_batch_;
};

class ParallelBatchCompressor final : public BatchCompressor {
 public:
  ParallelBatchCompressor(std::vector<std::unique_ptr<Compressor>> cs,
                          std::size_t max_batch, WorkerPool* pool)
      : compressors_(std::move(cs)), max_batch_(max_batch), pool_(pool) {}
  std::size_t batch_size() const override { return max_batch_; }
  BatchBackend backend() const override { return BatchBackend::kParallel; }
  void Compress(std::span<BatchItem> items, const ItemSink* sink,
                const ItemSink* prepare) override {
    assert(items.size() <= max_batch_);
    // compressors_ holds at most kMaxPassBatchSize (<= kMaxLanes) lanes.
    const std::size_t lanes =
        std::max<std::size_t>(1, std::min(items.size(), compressors_.size()));
    BatchJob job(items, lanes);
    job.compressors = compressors_.data();
    job.sink = sink;
    job.prepare = prepare;
    job.codec = nullptr;
    if (lanes <= 1) {
      CompressLane(&job, 0);
      return;
    }
    BatchJob* p = &job;
    pool_->Run(lanes, [p](std::size_t lane) { CompressLane(p, lane); });
  }

 private:
  std::vector<std::unique_ptr<Compressor>> compressors_;  // one per lane
  const std::size_t max_batch_;
  WorkerPool* const pool_;
};

}  // namespace

std::string_view BatchBackendName(BatchBackend b) {
  switch (b) {
    case BatchBackend::kSerial:
      return "serial";
    case BatchBackend::kParallel:
      return "parallel";
  }
  return "unknown";
}

Result<std::unique_ptr<BatchCompressor>> NewBatchCompressor(
    std::shared_ptr<const Codec> codec, const BatchOptions& options) {
  if (codec == nullptr) {
    return Err(Status::InvalidArgument("batch codec: no codec"));
  }
  if (options.max_batch < 1 || options.max_batch > kMaxPassBatchSize) {
    return Err(Status::InvalidArgument("batch codec: max_batch must be 1.." +
                                       std::to_string(kMaxPassBatchSize)));
  }
  if (options.backend == BatchBackend::kSerial) {
    ZT_ASSIGN_OR_RETURN(auto c, codec->NewCompressor());
    return std::make_unique<SerialBatchCompressor>(std::move(c),
                                                   options.max_batch);
  }
  if (options.pool == nullptr) {
    return Err(Status::InvalidArgument("batch codec: parallel needs a pool"));
  }
  const std::size_t lanes = std::min(options.max_batch, options.pool->lanes());
  std::vector<std::unique_ptr<Compressor>> cs;
  for (std::size_t i = 0; i < lanes; ++i) {
    ZT_ASSIGN_OR_RETURN(auto c, codec->NewCompressor());
    cs.push_back(std::move(c));
  }
  return std::make_unique<ParallelBatchCompressor>(
      std::move(cs), options.max_batch, options.pool);
}

void DecompressBatch(const Codec& codec, std::span<BatchItem> items,
                     WorkerPool* pool) {
  const std::size_t lanes = std::clamp<std::size_t>(
      pool == nullptr ? 1 : std::min(items.size(), pool->lanes()), 1,
      ItemCursor::kMaxLanes);
  BatchJob job(items, lanes);
  job.compressors = nullptr;
  job.codec = &codec;
  if (lanes <= 1) {
    DecompressLane(&job, 0);
    return;
  }
  BatchJob* p = &job;
  pool->Run(lanes, [p](std::size_t lane) { DecompressLane(p, lane); });
}

}  // namespace ztier
