// File: tools/ztier/engine_measure.cc
//
// The timed loops of engine_measure.h. Everything a loop needs (compressed
// objects, output pages, batch items, compressors, the PageStore) is built
// before the clock starts; outputs are checked after it stops.
#include "engine_measure.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>
#include <thread>

#include "ztier/page.h"

namespace ztier::tool {
namespace {

using Clock = std::chrono::steady_clock;

// Filler for output pages before a timed decompress or load, so a page the
// code under test never wrote cannot pass the check.
constexpr int kPoison = 0xA5;
constexpr std::uint64_t kDiscardSeed = 301;  // the slots MeasureSizes drops

struct Range {
  std::size_t begin;
  std::size_t end;
};

// Thread t's share of n items: contiguous, a multiple of `align` long (but
// the last), so a batch never straddles two threads.
Range Share(std::size_t n, std::size_t t, std::size_t threads,
            std::size_t align) {
  std::size_t per = (n + threads - 1) / threads;
  per = (per + align - 1) / align * align;
  const std::size_t begin = std::min(n, t * per);
  return {begin, std::min(n, begin + per)};
}

// Runs setup(t) and then work(t) on `n` threads (t = 0 on the caller);
// returns the seconds from when every setup had finished until the last work
// returned.
double TimeTeam(std::size_t n, const std::function<void(std::size_t)>& setup,
                const std::function<void(std::size_t)>& work) {
  std::atomic<std::size_t> ready{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  threads.reserve(n - 1);
  for (std::size_t t = 1; t < n; ++t) {
    threads.emplace_back([&, t] {
      setup(t);
      ready.fetch_add(1, std::memory_order_release);
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      work(t);
    });
  }
  setup(0);
  while (ready.load(std::memory_order_acquire) != n - 1) {
    std::this_thread::yield();
  }
  const Clock::time_point start = Clock::now();
  go.store(true, std::memory_order_release);
  work(0);
  for (std::thread& th : threads) th.join();
  const Clock::time_point stop = Clock::now();
  return std::chrono::duration<double>(stop - start).count();
}

Status FirstError(std::vector<Status>& errors) {
  for (Status& s : errors) {
    if (!s.ok()) return std::move(s);
  }
  return Status::Ok();
}

}  // namespace

std::string_view BenchPathName(BenchPath p) {
  return p == BenchPath::kCodec ? "codec" : "store";
}

std::string_view BenchOpName(BenchOp op) {
  constexpr std::string_view kNames[] = {"compress", "decompress", "store",
                                         "load", "overwrite"};
  return kNames[static_cast<int>(op)];
}

std::string VariantName(const EngineVariant& v) {
  return std::string(BenchPathName(v.path)) + " " +
         std::string(v.path == BenchPath::kStore ? "store+load"
                                                 : BenchOpName(v.op)) +
         " threads=" + std::to_string(v.threads) +
         " batch=" + std::to_string(v.batch) + " " +
         std::string(BatchBackendName(v.backend));
}

std::vector<EngineVariant> StandardVariants(
    const std::vector<std::size_t>& thread_counts) {
  constexpr std::pair<BenchPath, BenchOp> kOps[] = {
      {BenchPath::kCodec, BenchOp::kCompress},
      {BenchPath::kCodec, BenchOp::kDecompress},
      {BenchPath::kStore, BenchOp::kStore}};
  std::vector<EngineVariant> v;
  for (std::size_t t : thread_counts) {
    for (const auto& [path, op] : kOps) v.push_back({path, op, t});
    for (const auto& [path, op] : kOps) {
      for (BatchBackend b : {BatchBackend::kSerial, BatchBackend::kParallel}) {
        if (t == 1 || (path == BenchPath::kStore && b == BatchBackend::kSerial))
          v.push_back({path, op, t, kMaxBatchSize, b});
      }
    }
  }
  return v;
}

Result<std::unique_ptr<EngineMeasurer>> EngineMeasurer::Create(
    std::shared_ptr<const Codec> codec, const corpus::PageSet& corpus,
    const MeasureOptions& options) {
  std::unique_ptr<EngineMeasurer> p(new EngineMeasurer());
  EngineMeasurer& m = *p;
  const std::size_t n = m.n_ = corpus.size();
  if (n == 0) return Err(Status::InvalidArgument(corpus.name() + ": no pages"));
  m.codec_ = std::move(codec);
  m.corpus_ = &corpus;
  m.options_ = options;
  m.options_.all_threads = std::max<std::size_t>(1, options.all_threads);
  ZT_ASSIGN_OR_RETURN(std::unique_ptr<Compressor> c, m.codec_->NewCompressor());
  m.objects_.resize(n * kPageSize);
  std::size_t used = 0;
  for (std::size_t i = 0; i < n; ++i) {
    std::span<std::byte> dst(m.objects_.data() + used, kPageSize);
    const std::size_t len = c->Compress(corpus.page(i), dst);
    if (len == 0) std::memcpy(dst.data(), corpus.page(i).data(), kPageSize);
    m.raw_.push_back(len == 0);
    m.offset_.push_back(used);
    m.size_.push_back(len == 0 ? kPageSize : len);
    used += m.size_.back();
  }
  m.objects_.resize(used);
  m.objects_.shrink_to_fit();
  m.out_.assign(n * kPageSize, std::byte{0});
  m.scratch_.assign(m.options_.all_threads, std::vector<std::byte>(kPageSize));
  m.batch_scratch_.assign(kMaxBatchSize * kPageSize, std::byte{0});
  m.compress_items_.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::span<std::byte> dst(
        m.batch_scratch_.data() + (i % kMaxBatchSize) * kPageSize, kPageSize);
    m.compress_items_[i].src = corpus.page(i);
    m.compress_items_[i].dst = dst;
    if (i % kMaxBatchSize == 0) m.groups_.emplace_back();
    DecompressGroup& group = m.groups_.back();
    if (m.raw_[i]) {
      group.raw_pages.push_back(i);
      continue;
    }
    BatchItem& item = group.items.emplace_back();
    item.src = m.Object(i);
    item.dst = dst;
    group.item_pages.push_back(i);
  }
  return p;
}

double EngineMeasurer::MbPerSecond(double seconds) const {
  return static_cast<double>(n_ * kPageSize) / seconds / 1e6;
}

std::span<const std::byte> EngineMeasurer::Object(std::size_t i) const {
  return std::span<const std::byte>(objects_.data() + offset_[i], size_[i]);
}

Status EngineMeasurer::CheckOutput(std::string_view what) const {
  for (std::size_t i = 0; i < n_; ++i) {
    if (std::memcmp(out_.data() + i * kPageSize, corpus_->page(i).data(),
                    kPageSize) != 0) {
      return Status::Corruption(std::string(what) + ": page " +
                                std::to_string(i) + " of " + corpus_->name() +
                                " read back different from what was written");
    }
  }
  return Status::Ok();
}

Status EngineMeasurer::MeasureCompress(const EngineVariant& v,
                                       double* seconds) {
  const std::size_t n = n_;
  if (v.batch == 1) {
    std::vector<std::unique_ptr<Compressor>> comps(v.threads);
    std::vector<Status> errors(v.threads);
    *seconds = TimeTeam(
        v.threads,
        [&](std::size_t t) {
          auto c = codec_->NewCompressor();
          if (c.has_value()) {
            comps[t] = std::move(*c);
          } else {
            errors[t] = std::move(c.error());
          }
        },
        [&](std::size_t t) {
          if (comps[t] == nullptr) return;
          const Range r = Share(n, t, v.threads, 1);
          const std::span<std::byte> dst(scratch_[t]);
          std::uint64_t total = 0;
          for (std::size_t i = r.begin; i < r.end; ++i) {
            total += comps[t]->Compress(corpus_->page(i), dst);
          }
          sink_.fetch_add(total, std::memory_order_relaxed);
        });
    return FirstError(errors);
  }
  WorkerPool* pool =
      v.backend == BatchBackend::kParallel ? options_.pool : nullptr;
  ZT_ASSIGN_OR_RETURN(std::unique_ptr<BatchCompressor> bc,
                      NewBatchCompressor(codec_, {v.backend, v.batch, pool}));
  const std::size_t step = std::min(v.batch, bc->batch_size());
  const std::span<BatchItem> items(compress_items_);
  *seconds = TimeTeam(
      1, [](std::size_t) {},
      [&](std::size_t) {
        for (std::size_t g = 0; g < n; g += step) {
          bc->Compress(items.subspan(g, std::min(step, n - g)));
        }
      });
  std::uint64_t total = 0;
  for (const BatchItem& item : compress_items_) total += item.length;
  sink_.fetch_add(total, std::memory_order_relaxed);
  return Status::Ok();
}

Status EngineMeasurer::MeasureDecompress(const EngineVariant& v,
                                         double* seconds) {
  const std::size_t n = n_;
  std::memset(out_.data(), kPoison, out_.size());
  const Codec& c = *codec_;
  std::vector<Status> errors(v.threads);
  if (v.batch == 1) {
    *seconds = TimeTeam(
        v.threads, [&](std::size_t) { (void)LocalDecompressor(c); },
        [&](std::size_t t) {
          const Range r = Share(n, t, v.threads, 1);
          std::byte* s = scratch_[t].data();
          for (std::size_t i = r.begin; i < r.end; ++i) {
            if (raw_[i]) {
              std::memcpy(s, objects_.data() + offset_[i], kPageSize);
            } else {
              Status st = LocalDecompressor(c).Decompress(
                  Object(i), std::span<std::byte>(s, kPageSize));
              if (!st.ok()) {
                errors[t] = std::move(st);
                return;
              }
            }
            std::memcpy(out_.data() + i * kPageSize, s, kPageSize);
          }
        });
  } else {
    WorkerPool* pool =
        v.backend == BatchBackend::kParallel ? options_.pool : nullptr;
    Status& error = errors[0];
    *seconds = TimeTeam(
        1, [&](std::size_t) { (void)LocalDecompressor(c); },
        [&](std::size_t) {
          for (DecompressGroup& g : groups_) {
            if (!g.items.empty()) DecompressBatch(c, g.items, pool);
            for (std::size_t k = 0; k < g.items.size(); ++k) {
              if (!g.items[k].status.ok()) {
                error = g.items[k].status;
                return;
              }
              std::memcpy(out_.data() + g.item_pages[k] * kPageSize,
                          g.items[k].dst.data(), kPageSize);
            }
            for (std::size_t p : g.raw_pages) {
              std::memcpy(batch_scratch_.data(), objects_.data() + offset_[p],
                          kPageSize);
              std::memcpy(out_.data() + p * kPageSize, batch_scratch_.data(),
                          kPageSize);
            }
          }
        });
  }
  ZT_RETURN_IF_ERROR(FirstError(errors));
  return CheckOutput(VariantName(v));
}

Result<std::unique_ptr<PageStore>> EngineMeasurer::NewStore(
    const EngineVariant& v) const {
  return PageStore::Create({.num_pages = n_,
                            .codec = std::string(codec_->name()),
                            .algorithm_params = options_.algorithm_params,
                            .batch_backend = v.backend,
                            .batch_size = v.batch,
                            .parallel_workers = options_.parallel_workers});
}

Status EngineMeasurer::MeasureStore(const EngineVariant& v,
                                    std::vector<OpSample>* samples) {
  const std::size_t n = n_;
  ZT_ASSIGN_OR_RETURN(std::unique_ptr<PageStore> store, NewStore(v));
  const std::span<const std::byte> pages = corpus_->bytes();
  const std::span<std::byte> out_bytes(out_);
  std::vector<Status> errors(v.threads);
  // Times op(i, count) over every page (batch 1 or v.batch), split among
  // the threads after setup(t), then checks for errors; appends the figure.
  auto pass = [&](BenchOp what, const std::function<void(std::size_t)>& setup,
                  auto op) -> Status {
    const double seconds = TimeTeam(v.threads, setup, [&](std::size_t t) {
      const Range r = Share(n, t, v.threads, v.batch);
      for (std::size_t i = r.begin; i < r.end; i += v.batch) {
        Status s = op(i, std::min(v.batch, r.end - i));
        if (!s.ok()) {
          errors[t] = Status(s.code(), std::string(BenchOpName(what)) +
                                           " of page " + std::to_string(i) +
                                           ": " + s.message());
          return;
        }
      }
    });
    samples->push_back({what, MbPerSecond(seconds)});
    return FirstError(errors);
  };
  const auto store_op = [&](std::size_t i, std::size_t count) {
    return v.batch == 1
               ? store->Store(i, corpus_->page(i))
               : store->StoreBatch(
                     i, pages.subspan(i * kPageSize, count * kPageSize));
  };
  const auto out_page = [&](std::size_t i) {
    return MutablePage(out_.data() + i * kPageSize, kPageSize);
  };
  const auto load_op = [&](std::size_t i, std::size_t count) {
    return v.batch == 1
               ? store->Load(i, out_page(i))
               : store->LoadBatch(
                     i, out_bytes.subspan(i * kPageSize, count * kPageSize));
  };
  ZT_RETURN_IF_ERROR(pass(BenchOp::kStore, [](std::size_t) {}, store_op));
  std::memset(out_.data(), kPoison, out_.size());
  ZT_RETURN_IF_ERROR(pass(
      BenchOp::kLoad,
      [&](std::size_t) { (void)LocalDecompressor(store->codec()); }, load_op));
  ZT_RETURN_IF_ERROR(CheckOutput("load of " + VariantName(v)));
  ZT_RETURN_IF_ERROR(pass(BenchOp::kOverwrite, [](std::size_t) {}, store_op));
  std::memset(out_.data(), kPoison, out_.size());
  for (std::size_t i = 0; i < n; ++i) {
    ZT_RETURN_IF_ERROR(store->Load(i, out_page(i)));
  }
  return CheckOutput("overwrite of " + VariantName(v));
}

Status EngineMeasurer::Measure(const EngineVariant& v,
                               std::vector<OpSample>* out) {
  if (v.threads == 0 || v.threads > options_.all_threads ||
      (v.batch != 1 && v.batch != kMaxBatchSize) ||
      (v.batch == kMaxBatchSize && v.backend == BatchBackend::kParallel &&
       v.threads != 1)) {
    return Status::InvalidArgument("unsupported variant: " + VariantName(v));
  }
  if (v.path == BenchPath::kStore) return MeasureStore(v, out);
  double seconds = 0;
  ZT_RETURN_IF_ERROR(v.op == BenchOp::kCompress
                         ? MeasureCompress(v, &seconds)
                         : MeasureDecompress(v, &seconds));
  out->push_back({v.op, MbPerSecond(seconds)});
  return Status::Ok();
}

Result<SizeFigures> EngineMeasurer::MeasureSizes() {
  ZT_ASSIGN_OR_RETURN(std::unique_ptr<PageStore> store,
                      NewStore({BenchPath::kStore, BenchOp::kStore}));
  for (std::size_t i = 0; i < n_; ++i) {
    ZT_RETURN_IF_ERROR(store->Store(i, corpus_->page(i)));
  }
  const PageStoreStats s = store->Stats();
  SizeFigures f{.orig_bytes = n_ * kPageSize,
                .compressed_bytes = s.compr_data_size,
                .mem_used_total = s.mem_used_total,
                .same_pages = s.same_pages,
                .huge_pages = s.huge_pages};
  f.ratio = static_cast<double>(f.orig_bytes) /
            static_cast<double>(f.compressed_bytes);
  f.metadata_bytes_per_page =
      static_cast<double>(store->MetadataBytes()) / static_cast<double>(n_);
  // Discard a random half, then compact.
  std::vector<std::size_t> order(n_);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::mt19937_64 rng(kDiscardSeed);
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<std::uint8_t> discarded(n_);
  for (std::size_t k = 0; k < n_ / 2; ++k) {
    ZT_RETURN_IF_ERROR(store->Discard(order[k]));
    discarded[order[k]] = 1;
  }
  f.pages_compacted = store->Compact();
  f.mem_used_total_after_compact = store->Stats().mem_used_total;
  f.compressed_bytes_after_compact = store->Stats().compr_data_size;
  // What survived compaction must still read back; discarded slots read as
  // zeros.
  std::vector<std::byte> page(kPageSize);
  const std::vector<std::byte> zeros(kPageSize);
  for (std::size_t i = 0; i < n_; ++i) {
    ZT_RETURN_IF_ERROR(store->Load(i, MutablePage(page.data(), kPageSize)));
    const std::byte* want =
        discarded[i] ? zeros.data() : corpus_->page(i).data();
    if (std::memcmp(page.data(), want, kPageSize) != 0) {
      return Err(Status::Corruption("after discard + Compact(): page " +
                                    std::to_string(i) + " of " +
                                    corpus_->name() + " reads back wrong"));
    }
  }
  return f;
}

}  // namespace ztier::tool
