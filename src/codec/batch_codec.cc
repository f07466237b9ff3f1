// batch_codec.cc: the serial and parallel BatchCompressor, DecompressBatch.
//
// Parallel: Compress() runs min(items, lanes) lanes on the WorkerPool; lane
// i uses compressors_[i] (a lane index is unique within one Run, and the
// BatchCompressor is used by one thread at a time), and lanes take items from
// a shared atomic cursor, so a worker that wakes late simply gets fewer (or
// no) items. The closure handed to WorkerPool::Run captures one pointer, so
// std::function stores it inline: the hot path does not allocate.
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

// What one batch call shares between its lanes (lives on the caller's stack).
struct BatchJob {
  std::span<BatchItem> items;
  std::atomic<std::size_t> cursor{0};
  std::unique_ptr<Compressor>* compressors;  // compression only
  const BatchCompressor::ItemSink* sink = nullptr;  // compression only
  const Codec* codec;                        // decompression only
};

void CompressLane(BatchJob* job, std::size_t lane) {
  Compressor& c = *job->compressors[lane];
  for (;;) {
    const std::size_t i = job->cursor.fetch_add(1, std::memory_order_relaxed);
    if (i >= job->items.size()) return;
    BatchItem& item = job->items[i];
    item.length = c.Compress(item.src, item.dst);
    item.status = Status::Ok();
    if (job->sink != nullptr) (*job->sink)(i);
  }
}

void DecompressLane(BatchJob* job) {
  Decompressor& d = LocalDecompressor(*job->codec);
  for (;;) {
    const std::size_t i = job->cursor.fetch_add(1, std::memory_order_relaxed);
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
  void Compress(std::span<BatchItem> items, const ItemSink* sink) override {
    assert(items.size() <= max_batch_);
    for (std::size_t i = 0; i < items.size(); ++i) {
      BatchItem& item = items[i];
      item.length = compressor_->Compress(item.src, item.dst);
      item.status = Status::Ok();
      if (sink != nullptr) (*sink)(i);
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
  void Compress(std::span<BatchItem> items, const ItemSink* sink) override {
    assert(items.size() <= max_batch_);
    BatchJob job;
    job.items = items;
    job.compressors = compressors_.data();
    job.sink = sink;
    job.codec = nullptr;
    const std::size_t lanes = std::min(items.size(), compressors_.size());
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
  if (options.max_batch < 1 || options.max_batch > kMaxBatchSize) {
    return Err(Status::InvalidArgument("batch codec: max_batch must be 1..8"));
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
  BatchJob job;
  job.items = items;
  job.compressors = nullptr;
  job.codec = &codec;
  const std::size_t lanes =
      pool == nullptr ? 1 : std::min(items.size(), pool->lanes());
  if (lanes <= 1) {
    DecompressLane(&job);
    return;
  }
  BatchJob* p = &job;
  pool->Run(lanes, [p](std::size_t) { DecompressLane(p); });
}

}  // namespace ztier
