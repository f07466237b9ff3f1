// File: tools/ztier/engine_measure.h
//
// The measurements behind `ztier bench engine`: one codec on one corpus,
// through the codec alone ("path=codec": the floor) and through a PageStore
// ("path=store": what the engine costs on top of it).
//
//   auto m = EngineMeasurer::Create(codec, corpus, {.all_threads = 2,
//                                                   .pool = &workers});
//   for (const EngineVariant& v : StandardVariants({1, 2}))
//     ZT_RETURN_IF_ERROR((*m)->Measure(v, &samples));   // one run
//   auto sizes = (*m)->MeasureSizes();
//
// Every figure is MB/s (10^6 bytes per second) of *uncompressed* page bytes,
// timed with std::chrono::steady_clock from the moment every thread is set
// up (compressors made, thread-local decompressors warmed) until the last
// one finishes. Buffers are allocated and touched before timing starts.
//
// What each variant does, for n pages:
//   codec/compress    Compressor::Compress of each page into a 4096-byte
//                     scratch page (one Compressor and scratch per thread;
//                     pages split into contiguous shares), or, for batch 8,
//                     BatchCompressor::Compress of 8 consecutive pages.
//   codec/decompress  LocalDecompressor(codec).Decompress of each object
//                     (compressed once, before any run) into a scratch page,
//                     then one 4096-byte memcpy into the output page: the
//                     "limit" the store's load path is compared with. Pages
//                     the codec could not fit in 4096 bytes are kept raw and
//                     cost two copies. Batch 8: DecompressBatch over the
//                     worker pool (parallel) or on the caller (serial).
//   store/store       a fresh PageStore (num_pages = n, same codec), then
//                     Store() of each page, or StoreBatch() of 8 pages;
//   store/load        then Load() of each slot, or LoadBatch() of 8.
//                     Threads store and load contiguous shares of slots.
// Outputs are compared with the corpus after timing; a mismatch is returned
// as kCorruption naming the page (the caller treats it as fatal).
//
// Thread safety: an EngineMeasurer is used by one thread at a time; it starts
// and joins its own threads inside Measure().
#ifndef ZTIER_TOOLS_ZTIER_ENGINE_MEASURE_H_
#define ZTIER_TOOLS_ZTIER_ENGINE_MEASURE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "corpus/corpus.h"
#include "ztier/batch_codec.h"
#include "ztier/codec.h"
#include "ztier/status.h"
#include "ztier/worker_pool.h"

namespace ztier::tool {

enum class BenchPath { kCodec, kStore };
enum class BenchOp { kCompress, kDecompress, kStore, kLoad, kOverwrite };

std::string_view BenchPathName(BenchPath p);  // "codec" / "store"
std::string_view BenchOpName(BenchOp op);     // "compress" ... "overwrite"

// One way of running the corpus through the codec or the store. A codec
// variant measures `op` (kCompress or kDecompress); a store variant always
// measures kStore (a fill of a fresh store: every pool page is new memory
// the OS must fault in), kLoad (reads what the store wrote) and kOverwrite
// (a second store of the same pages into the filled store: the steady state
// of a device in use, where freed objects' pages are reused).
struct EngineVariant {
  BenchPath path = BenchPath::kCodec;
  BenchOp op = BenchOp::kCompress;  // kStore for store variants
  std::size_t threads = 1;
  std::size_t batch = 1;
  BatchBackend backend = BatchBackend::kSerial;
};

// "store store+load threads=1 batch=8 serial", "codec compress threads=2
// batch=1 serial": the name of `v` (bench engine's variant names).
std::string VariantName(const EngineVariant& v);

// The variants of one run, in the order they alternate: the threads=1
// ones first (batch 1, batch 8 serial and parallel); then, for each count of
// `thread_counts` above 1 (ascending, each once), codec compress and
// decompress, store batch 1 and store batch 8 (serial) on that many threads.
std::vector<EngineVariant> StandardVariants(
    const std::vector<std::size_t>& thread_counts);

// One figure from one Measure() call.
struct OpSample {
  BenchOp op;
  double mb_s;
};

// Memory figures of one codec on one corpus (a threads=1, batch=1 store).
struct SizeFigures {
  std::uint64_t orig_bytes = 0;        // pages * 4096
  std::uint64_t compressed_bytes = 0;  // Stats().compr_data_size
  std::uint64_t mem_used_total = 0;
  std::uint64_t same_pages = 0;
  std::uint64_t huge_pages = 0;
  double ratio = 0;  // orig_bytes / compressed_bytes
  double mem_used_total_over_compressed = 0;
  double metadata_bytes_per_page = 0;  // MetadataBytes() / num_pages
  // After discarding a random half of the slots (fixed seed) and Compact().
  std::uint64_t mem_used_total_after_compact = 0;
  std::uint64_t pages_compacted = 0;
  double mem_used_total_after_compact_over_compressed = 0;
};

struct MeasureOptions {
  std::size_t all_threads = 1;       // the most threads a variant may use
  WorkerPool* pool = nullptr;        // for codec batch=8 parallel; not owned
  std::size_t parallel_workers = 1;  // PageStore's parallel backend
  // The algorithm_params tokens `codec` was made with ("level=9"), for the
  // stores of the store variants and MeasureSizes(); empty: its defaults.
  std::string algorithm_params;
};

class EngineMeasurer {
 public:
  // Compresses the corpus once (for the decompress variants) and allocates
  // every buffer. `corpus` must outlive the measurer.
  static Result<std::unique_ptr<EngineMeasurer>> Create(
      std::shared_ptr<const Codec> codec, const corpus::PageSet& corpus,
      const MeasureOptions& options);
  ~EngineMeasurer();
  EngineMeasurer(const EngineMeasurer&) = delete;
  EngineMeasurer& operator=(const EngineMeasurer&) = delete;

  // Runs `v` once and appends its figures (one for codec variants, store
  // then load for store variants). Any store/load error or a page that does
  // not read back equal is returned.
  Status Measure(const EngineVariant& v, std::vector<OpSample>* out);

  // The size figures (not timed).
  Result<SizeFigures> MeasureSizes();

 private:
  struct Impl;
  explicit EngineMeasurer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ztier::tool

#endif  // ZTIER_TOOLS_ZTIER_ENGINE_MEASURE_H_
