// File: tools/ztier/engine_measure.cc
//
// The timed loops of engine_measure.h. Everything a loop needs (compressed
// objects, output pages, batch item arrays, compressors, the PageStore) is
// built before the clock starts; the loops only compress, decompress, copy,
// store and load. Outputs are checked against the corpus after the clock
// stops.
#include "engine_measure.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <utility>

#include "ztier/page.h"
#include "ztier/page_store.h"

namespace ztier::tool {
namespace {

using Clock = std::chrono::steady_clock;

// Filler for output pages before a timed decompress or load, so a page the
// code under test never wrote cannot pass the check (the corpus has zero
// pages, and never-written slots read as zeros).
constexpr int kPoison = 0xA5;

// Seed for choosing the slots discarded before compaction.
constexpr std::uint64_t kDiscardSeed = 301;

struct Range {
  std::size_t begin;
  std::size_t end;
};

// The share of `n` items that thread `t` of `threads` takes: contiguous, a
// multiple of `align` items long (but the last), so a batch never straddles
// two threads.
Range Share(std::size_t n, std::size_t t, std::size_t threads,
            std::size_t align) {
  std::size_t per = (n + threads - 1) / threads;
  per = (per + align - 1) / align * align;
  const std::size_t begin = std::min(n, t * per);
  return {begin, std::min(n, begin + per)};
}

// Runs setup(t) and then work(t) on `n` threads (t = 0 on the caller);
// returns the seconds from when every setup had finished until the last work
// returned. Thread start-up and setup are not timed.
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

// The first error of a team, or OK.
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
         (v.path == BenchPath::kStore ? std::string("store+load")
                                      : std::string(BenchOpName(v.op))) +
         " threads=" + std::to_string(v.threads) +
         " batch=" + std::to_string(v.batch) + " " +
         std::string(BatchBackendName(v.backend));
}

std::vector<EngineVariant> StandardVariants(
    const std::vector<std::size_t>& thread_counts) {
  using B = BatchBackend;
  const BenchPath kC = BenchPath::kCodec;
  const BenchPath kS = BenchPath::kStore;
  const BenchOp kComp = BenchOp::kCompress;
  const BenchOp kDec = BenchOp::kDecompress;
  const BenchOp kSt = BenchOp::kStore;
  const std::size_t kB = kMaxBatchSize;
  // Each store variant sits next to the codec variants it is compared with,
  // so the figures of one comparison are measured close together in time.
  std::vector<EngineVariant> v = {
      {kC, kComp, 1, 1, B::kSerial},    {kC, kDec, 1, 1, B::kSerial},
      {kS, kSt, 1, 1, B::kSerial},      {kC, kComp, 1, kB, B::kSerial},
      {kC, kComp, 1, kB, B::kParallel}, {kC, kDec, 1, kB, B::kSerial},
      {kC, kDec, 1, kB, B::kParallel},  {kS, kSt, 1, kB, B::kSerial},
      {kS, kSt, 1, kB, B::kParallel},
  };
  std::vector<std::size_t> counts = thread_counts;
  std::sort(counts.begin(), counts.end());
  counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
  for (std::size_t t : counts) {
    if (t <= 1) continue;
    v.push_back({kC, kComp, t, 1, B::kSerial});
    v.push_back({kC, kDec, t, 1, B::kSerial});
    v.push_back({kS, kSt, t, 1, B::kSerial});
    v.push_back({kS, kSt, t, kB, B::kSerial});
  }
  return v;
}

struct EngineMeasurer::Impl {
  // Pages of a decompress batch: items for the compressed ones, and the
  // pages kept raw (which are copied instead).
  struct DecompressGroup {
    std::vector<BatchItem> items;
    std::vector<std::size_t> item_pages;
    std::vector<std::size_t> raw_pages;
  };

  std::shared_ptr<const Codec> codec;
  const corpus::PageSet* corpus = nullptr;
  MeasureOptions options;
  std::size_t n = 0;  // pages

  // The corpus compressed once: object i is objects[offset[i], +size[i]),
  // raw (a copy of the page) where the codec could not fit it in a page.
  std::vector<std::byte> objects;
  std::vector<std::size_t> offset;
  std::vector<std::size_t> size;
  std::vector<std::uint8_t> raw;

  std::vector<std::byte> out;  // n pages: decompress and load outputs
  std::vector<std::vector<std::byte>> scratch;  // one page per thread
  std::vector<std::byte> batch_scratch;         // kMaxBatchSize pages
  std::vector<BatchItem> compress_items;        // one per page
  std::vector<DecompressGroup> groups;          // kMaxBatchSize pages each

  std::atomic<std::uint64_t> sink{0};  // keeps results observable

  double MbPerSecond(double seconds) const {
    return static_cast<double>(n * kPageSize) / seconds / 1e6;
  }
  MutablePage OutPage(std::size_t i) {
    return MutablePage(out.data() + i * kPageSize, kPageSize);
  }
  std::span<const std::byte> Object(std::size_t i) const {
    return std::span<const std::byte>(objects.data() + offset[i], size[i]);
  }

  Status Prepare();
  Status CheckOutput(std::string_view what) const;
  Status MeasureCompress(const EngineVariant& v, double* seconds);
  Status MeasureDecompress(const EngineVariant& v, double* seconds);
  Status MeasureStore(const EngineVariant& v, std::vector<OpSample>* samples);
  Result<std::unique_ptr<PageStore>> NewStore(const EngineVariant& v) const;
};

Status EngineMeasurer::Impl::Prepare() {
  n = corpus->size();
  if (n == 0) return Status::InvalidArgument(corpus->name() + ": no pages");
  ZT_ASSIGN_OR_RETURN(std::unique_ptr<Compressor> c, codec->NewCompressor());
  objects.resize(n * kPageSize);
  offset.resize(n);
  size.resize(n);
  raw.resize(n);
  std::size_t used = 0;
  for (std::size_t i = 0; i < n; ++i) {
    std::span<std::byte> dst(objects.data() + used, kPageSize);
    std::size_t len = c->Compress(corpus->page(i), dst);
    if (len == 0) {
      std::memcpy(dst.data(), corpus->page(i).data(), kPageSize);
      len = kPageSize;
      raw[i] = 1;
    }
    offset[i] = used;
    size[i] = len;
    used += len;
  }
  objects.resize(used);
  objects.shrink_to_fit();

  out.assign(n * kPageSize, std::byte{0});
  scratch.assign(options.all_threads, std::vector<std::byte>(kPageSize));
  batch_scratch.assign(kMaxBatchSize * kPageSize, std::byte{0});
  compress_items.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    compress_items[i].src = corpus->page(i);
    compress_items[i].dst = std::span<std::byte>(
        batch_scratch.data() + (i % kMaxBatchSize) * kPageSize, kPageSize);
  }
  for (std::size_t g = 0; g < n; g += kMaxBatchSize) {
    DecompressGroup group;
    for (std::size_t i = g; i < std::min(n, g + kMaxBatchSize); ++i) {
      if (raw[i]) {
        group.raw_pages.push_back(i);
        continue;
      }
      BatchItem item;
      item.src = Object(i);
      item.dst = std::span<std::byte>(
          batch_scratch.data() + (i - g) * kPageSize, kPageSize);
      group.items.push_back(item);
      group.item_pages.push_back(i);
    }
    groups.push_back(std::move(group));
  }
  return Status::Ok();
}

Status EngineMeasurer::Impl::CheckOutput(std::string_view what) const {
  for (std::size_t i = 0; i < n; ++i) {
    if (std::memcmp(out.data() + i * kPageSize, corpus->page(i).data(),
                    kPageSize) != 0) {
      return Status::Corruption(std::string(what) + ": page " +
                                std::to_string(i) + " of " + corpus->name() +
                                " read back different from what was written");
    }
  }
  return Status::Ok();
}

Status EngineMeasurer::Impl::MeasureCompress(const EngineVariant& v,
                                             double* seconds) {
  if (v.batch == 1) {
    std::vector<std::unique_ptr<Compressor>> comps(v.threads);
    std::vector<Status> errors(v.threads);
    *seconds = TimeTeam(
        v.threads,
        [&](std::size_t t) {
          auto c = codec->NewCompressor();
          if (c.has_value()) {
            comps[t] = std::move(*c);
          } else {
            errors[t] = std::move(c.error());
          }
        },
        [&](std::size_t t) {
          if (comps[t] == nullptr) return;
          const Range r = Share(n, t, v.threads, 1);
          const std::span<std::byte> dst(scratch[t]);
          std::uint64_t total = 0;
          for (std::size_t i = r.begin; i < r.end; ++i) {
            total += comps[t]->Compress(corpus->page(i), dst);
          }
          sink.fetch_add(total, std::memory_order_relaxed);
        });
    return FirstError(errors);
  }
  BatchOptions bo;
  bo.backend = v.backend;
  bo.max_batch = v.batch;
  bo.pool = v.backend == BatchBackend::kParallel ? options.pool : nullptr;
  ZT_ASSIGN_OR_RETURN(std::unique_ptr<BatchCompressor> bc,
                      NewBatchCompressor(codec, bo));
  const std::size_t step = std::min(v.batch, bc->batch_size());
  const std::span<BatchItem> items(compress_items);
  *seconds = TimeTeam(
      1, [](std::size_t) {},
      [&](std::size_t) {
        for (std::size_t g = 0; g < n; g += step) {
          bc->Compress(items.subspan(g, std::min(step, n - g)));
        }
      });
  std::uint64_t total = 0;
  for (const BatchItem& item : compress_items) total += item.length;
  sink.fetch_add(total, std::memory_order_relaxed);
  return Status::Ok();
}

Status EngineMeasurer::Impl::MeasureDecompress(const EngineVariant& v,
                                               double* seconds) {
  std::memset(out.data(), kPoison, out.size());
  const Codec& c = *codec;
  if (v.batch == 1) {
    std::vector<Status> errors(v.threads);
    *seconds = TimeTeam(
        v.threads, [&](std::size_t) { (void)LocalDecompressor(c); },
        [&](std::size_t t) {
          const Range r = Share(n, t, v.threads, 1);
          std::byte* s = scratch[t].data();
          for (std::size_t i = r.begin; i < r.end; ++i) {
            if (raw[i]) {
              std::memcpy(s, objects.data() + offset[i], kPageSize);
            } else {
              Status st = LocalDecompressor(c).Decompress(
                  Object(i), std::span<std::byte>(s, kPageSize));
              if (!st.ok()) {
                errors[t] = std::move(st);
                return;
              }
            }
            std::memcpy(out.data() + i * kPageSize, s, kPageSize);
          }
        });
    ZT_RETURN_IF_ERROR(FirstError(errors));
  } else {
    WorkerPool* pool =
        v.backend == BatchBackend::kParallel ? options.pool : nullptr;
    Status error;
    *seconds = TimeTeam(
        1, [&](std::size_t) { (void)LocalDecompressor(c); },
        [&](std::size_t) {
          for (DecompressGroup& g : groups) {
            if (!g.items.empty()) DecompressBatch(c, g.items, pool);
            for (std::size_t k = 0; k < g.items.size(); ++k) {
              if (!g.items[k].status.ok()) {
                error = g.items[k].status;
                return;
              }
              std::memcpy(out.data() + g.item_pages[k] * kPageSize,
                          g.items[k].dst.data(), kPageSize);
            }
            for (std::size_t p : g.raw_pages) {
              std::memcpy(batch_scratch.data(), objects.data() + offset[p],
                          kPageSize);
              std::memcpy(out.data() + p * kPageSize, batch_scratch.data(),
                          kPageSize);
            }
          }
        });
    ZT_RETURN_IF_ERROR(error);
  }
  return CheckOutput(VariantName(v));
}

Result<std::unique_ptr<PageStore>> EngineMeasurer::Impl::NewStore(
    const EngineVariant& v) const {
  PageStoreOptions o;
  o.num_pages = n;
  o.codec = std::string(codec->name());
  o.algorithm_params = options.algorithm_params;
  o.batch_backend = v.backend;
  o.batch_size = v.batch;
  o.parallel_workers = options.parallel_workers;
  auto store = PageStore::Create(o);
  if (!store.has_value()) {
    return Err(Status(store.error().code(),
                      "PageStore::Create(codec=" + o.codec + ", num_pages=" +
                          std::to_string(n) + "): " + store.error().message()));
  }
  return store;
}

Status EngineMeasurer::Impl::MeasureStore(const EngineVariant& v,
                                          std::vector<OpSample>* samples) {
  ZT_ASSIGN_OR_RETURN(std::unique_ptr<PageStore> store, NewStore(v));
  const std::span<const std::byte> pages = corpus->bytes();
  std::vector<Status> errors(v.threads);
  // Runs op(i, count) over every page (batch 1 or v.batch), split among
  // the threads after setup(t); returns the seconds taken.
  auto pass = [&](const char* what,
                  const std::function<void(std::size_t)>& setup, auto op) {
    return TimeTeam(v.threads, setup, [&](std::size_t t) {
      const Range r = Share(n, t, v.threads, v.batch);
      for (std::size_t i = r.begin; i < r.end; i += v.batch) {
        Status s = op(i, std::min(v.batch, r.end - i));
        if (!s.ok()) {
          errors[t] =
              Status(s.code(), std::string(what) + " of page " +
                                   std::to_string(i) + ": " + s.message());
          return;
        }
      }
    });
  };
  const auto store_op = [&](std::size_t i, std::size_t count) {
    return v.batch == 1
               ? store->Store(i, corpus->page(i))
               : store->StoreBatch(
                     i, pages.subspan(i * kPageSize, count * kPageSize));
  };
  const double store_s = pass(
      "store", [](std::size_t) {}, store_op);
  ZT_RETURN_IF_ERROR(FirstError(errors));

  std::memset(out.data(), kPoison, out.size());
  const std::span<std::byte> out_bytes(out);
  const double load_s = pass(
      "load", [&](std::size_t) { (void)LocalDecompressor(store->codec()); },
      [&](std::size_t i, std::size_t count) {
        return v.batch == 1
                   ? store->Load(i, OutPage(i))
                   : store->LoadBatch(i, out_bytes.subspan(i * kPageSize,
                                                           count * kPageSize));
      });
  ZT_RETURN_IF_ERROR(FirstError(errors));
  ZT_RETURN_IF_ERROR(CheckOutput("load of " + VariantName(v)));
  // The same pages again, into the filled store (steady state).
  const double overwrite_s = pass(
      "overwrite", [](std::size_t) {}, store_op);
  ZT_RETURN_IF_ERROR(FirstError(errors));
  std::memset(out.data(), kPoison, out.size());
  for (std::size_t i = 0; i < n; ++i) {
    ZT_RETURN_IF_ERROR(store->Load(i, OutPage(i)));
  }
  ZT_RETURN_IF_ERROR(CheckOutput("overwrite of " + VariantName(v)));
  samples->push_back({BenchOp::kStore, MbPerSecond(store_s)});
  samples->push_back({BenchOp::kLoad, MbPerSecond(load_s)});
  samples->push_back({BenchOp::kOverwrite, MbPerSecond(overwrite_s)});
  return Status::Ok();
}

EngineMeasurer::EngineMeasurer(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)) {}
EngineMeasurer::~EngineMeasurer() = default;

Result<std::unique_ptr<EngineMeasurer>> EngineMeasurer::Create(
    std::shared_ptr<const Codec> codec, const corpus::PageSet& corpus,
    const MeasureOptions& options) {
  auto impl = std::make_unique<Impl>();
  impl->codec = std::move(codec);
  impl->corpus = &corpus;
  impl->options = options;
  impl->options.all_threads = std::max<std::size_t>(1, options.all_threads);
  ZT_RETURN_IF_ERROR(impl->Prepare());
  return std::unique_ptr<EngineMeasurer>(new EngineMeasurer(std::move(impl)));
}

Status EngineMeasurer::Measure(const EngineVariant& v,
                               std::vector<OpSample>* out) {
  Impl& m = *impl_;
  if (v.threads == 0 || v.threads > m.options.all_threads ||
      (v.batch != 1 && v.batch != kMaxBatchSize) ||
      (v.batch == kMaxBatchSize && v.backend == BatchBackend::kParallel &&
       v.threads != 1)) {
    return Status::InvalidArgument("unsupported variant: " + VariantName(v));
  }
  if (v.path == BenchPath::kStore) return m.MeasureStore(v, out);
  double seconds = 0;
  if (v.op == BenchOp::kCompress) {
    ZT_RETURN_IF_ERROR(m.MeasureCompress(v, &seconds));
  } else {
    ZT_RETURN_IF_ERROR(m.MeasureDecompress(v, &seconds));
  }
  out->push_back({v.op, m.MbPerSecond(seconds)});
  return Status::Ok();
}

Result<SizeFigures> EngineMeasurer::MeasureSizes() {
  Impl& m = *impl_;
  ZT_ASSIGN_OR_RETURN(std::unique_ptr<PageStore> store,
                      m.NewStore({BenchPath::kStore, BenchOp::kStore, 1, 1,
                                  BatchBackend::kSerial}));
  for (std::size_t i = 0; i < m.n; ++i) {
    ZT_RETURN_IF_ERROR(store->Store(i, m.corpus->page(i)));
  }
  SizeFigures f;
  const PageStoreStats s = store->Stats();
  f.orig_bytes = m.n * kPageSize;
  f.compressed_bytes = s.compr_data_size;
  f.mem_used_total = s.mem_used_total;
  f.same_pages = s.same_pages;
  f.huge_pages = s.huge_pages;
  f.ratio = static_cast<double>(f.orig_bytes) /
            static_cast<double>(f.compressed_bytes);
  f.mem_used_total_over_compressed = static_cast<double>(f.mem_used_total) /
                                     static_cast<double>(f.compressed_bytes);
  f.metadata_bytes_per_page =
      static_cast<double>(store->MetadataBytes()) / static_cast<double>(m.n);

  // Discard a random half, then compact: how much of the freed memory the
  // pool gives back.
  std::vector<std::size_t> order(m.n);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::mt19937_64 rng(kDiscardSeed);
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<std::uint8_t> discarded(m.n);
  for (std::size_t k = 0; k < m.n / 2; ++k) {
    ZT_RETURN_IF_ERROR(store->Discard(order[k]));
    discarded[order[k]] = 1;
  }
  f.pages_compacted = store->Compact();
  const PageStoreStats c = store->Stats();
  f.mem_used_total_after_compact = c.mem_used_total;
  f.mem_used_total_after_compact_over_compressed =
      static_cast<double>(c.mem_used_total) /
      static_cast<double>(c.compr_data_size);

  // What survived compaction must still read back; discarded slots read as
  // zeros.
  std::vector<std::byte> page(kPageSize);
  const std::vector<std::byte> zeros(kPageSize);
  for (std::size_t i = 0; i < m.n; ++i) {
    ZT_RETURN_IF_ERROR(store->Load(i, MutablePage(page.data(), kPageSize)));
    const std::byte* want =
        discarded[i] ? zeros.data() : m.corpus->page(i).data();
    if (std::memcmp(page.data(), want, kPageSize) != 0) {
      return Err(Status::Corruption("after discard + Compact(): page " +
                                    std::to_string(i) + " of " +
                                    m.corpus->name() + " reads back wrong"));
    }
  }
  return f;
}

}  // namespace ztier::tool
