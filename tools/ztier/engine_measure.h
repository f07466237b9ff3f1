// File: tools/ztier/engine_measure.h
//
// The measurements behind `ztier bench engine` and `ztier estimate`: one
// codec on one corpus, through the codec alone (path "codec": the floor) and
// through a PageStore (path "store": what the engine costs on top of it).
//
//   auto m = EngineMeasurer::Create(codec, corpus, {.all_threads = 2,
//                                                   .pool = &workers});
//   for (const EngineVariant& v : StandardVariants({1, 2}))
//     ZT_RETURN_IF_ERROR((*m)->Measure(v, &samples));   // one run
//   auto sizes = (*m)->MeasureSizes();
//
// Every figure is MB/s (10^6 bytes per second) of uncompressed page bytes,
// timed from when every thread is set up until the last one finishes. A
// codec variant compresses each page (batch 8: BatchCompressor) or
// decompresses each object, compressed before any run, plus one 4096-byte
// copy (batch 8: DecompressBatch); a store variant Store()s (StoreBatch())
// each page into a fresh PageStore, Load()s (LoadBatch()) them, and stores
// them again ("overwrite"). Outputs are checked after the clock stops; a
// mismatch is kCorruption naming the page.
// Thread safety: one thread at a time; Measure() starts and joins its own.
#ifndef ZTIER_TOOLS_ZTIER_ENGINE_MEASURE_H_
#define ZTIER_TOOLS_ZTIER_ENGINE_MEASURE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "corpus/corpus.h"
#include "ztier/batch_codec.h"
#include "ztier/codec.h"
#include "ztier/page_store.h"
#include "ztier/worker_pool.h"

namespace ztier::tool {

enum class BenchPath { kCodec, kStore };
enum class BenchOp { kCompress, kDecompress, kStore, kLoad, kOverwrite };

std::string_view BenchPathName(BenchPath p);  // "codec" / "store"
std::string_view BenchOpName(BenchOp op);     // "compress" ... "overwrite"

// A codec variant measures `op` (kCompress or kDecompress); a store variant
// (op kStore) kStore, kLoad and kOverwrite. Batch 1 or kMaxBatchSize.
struct EngineVariant {
  BenchPath path = BenchPath::kCodec;
  BenchOp op = BenchOp::kCompress;
  std::size_t threads = 1;
  std::size_t batch = 1;
  BatchBackend backend = BatchBackend::kSerial;
};

// "store store+load threads=1 batch=8 serial", "codec compress threads=2
// batch=1 serial".
std::string VariantName(const EngineVariant& v);

// The variants of one run for `thread_counts` (ascending, unique, 1 first),
// in the order they alternate: per count the batch-1 ones, then with one
// thread the batch-8 ones, with more store batch 8 serial.
std::vector<EngineVariant> StandardVariants(
    const std::vector<std::size_t>& thread_counts);

struct OpSample {
  BenchOp op;
  double mb_s;
};

// Memory figures of a threads=1 batch=1 store of the corpus.
struct SizeFigures {
  std::uint64_t orig_bytes = 0;        // pages * 4096
  std::uint64_t compressed_bytes = 0;  // Stats().compr_data_size
  std::uint64_t mem_used_total = 0;
  std::uint64_t same_pages = 0;
  std::uint64_t huge_pages = 0;
  double ratio = 0;                    // orig_bytes / compressed_bytes
  double metadata_bytes_per_page = 0;  // MetadataBytes() / pages
  // After discarding a random half of the slots (fixed seed) and Compact().
  std::uint64_t mem_used_total_after_compact = 0;
  std::uint64_t compressed_bytes_after_compact = 0;
  std::uint64_t pages_compacted = 0;
};

struct MeasureOptions {
  std::size_t all_threads = 1;       // the most threads a variant may use
  WorkerPool* pool = nullptr;        // for codec batch=8 parallel; not owned
  std::size_t parallel_workers = 1;  // PageStore's parallel backend
  std::string algorithm_params;      // of `codec` ("level=9"), for stores
};

class EngineMeasurer {
 public:
  // Compresses the corpus once and allocates every buffer. `corpus` must
  // outlive the measurer.
  static Result<std::unique_ptr<EngineMeasurer>> Create(
      std::shared_ptr<const Codec> codec, const corpus::PageSet& corpus,
      const MeasureOptions& options);

  // Runs `v` once and appends its figures (store variants: store, load,
  // overwrite). A store/load error or a page read back wrong is returned;
  // kInvalidArgument for a variant StandardVariants does not make (more
  // threads than all_threads, a batch other than 1 or 8, a parallel batch
  // on more than one thread).
  Status Measure(const EngineVariant& v, std::vector<OpSample>* out);

  Result<SizeFigures> MeasureSizes();  // not timed

 private:
  EngineMeasurer() = default;
  double MbPerSecond(double seconds) const;
  std::span<const std::byte> Object(std::size_t i) const;
  Status CheckOutput(std::string_view what) const;
  Status MeasureCompress(const EngineVariant& v, double* seconds);
  Status MeasureDecompress(const EngineVariant& v, double* seconds);
  Status MeasureStore(const EngineVariant& v, std::vector<OpSample>* out);
  Result<std::unique_ptr<PageStore>> NewStore(const EngineVariant& v) const;

  // A decompress batch: items for the compressed pages; raw ones copied.
  struct DecompressGroup {
    std::vector<BatchItem> items;
    std::vector<std::size_t> item_pages;
    std::vector<std::size_t> raw_pages;
  };
  std::shared_ptr<const Codec> codec_;
  const corpus::PageSet* corpus_ = nullptr;
  MeasureOptions options_;
  std::size_t n_ = 0;  // pages
  // Object i is objects_[offset_[i], +size_[i]); a copy of the page where
  // the codec could not fit it in a page (raw_[i]).
  std::vector<std::byte> objects_;
  std::vector<std::size_t> offset_, size_;
  std::vector<std::uint8_t> raw_;
  std::vector<std::byte> out_;  // n pages: decompress and load outputs
  std::vector<std::vector<std::byte>> scratch_;  // a page per thread
  std::vector<std::byte> batch_scratch_;         // kMaxBatchSize pages
  std::vector<BatchItem> compress_items_;        // one per page
  std::vector<DecompressGroup> groups_;          // kMaxBatchSize pages each
  std::atomic<std::uint64_t> sink_{0};           // keeps results observable
};

}  // namespace ztier::tool

#endif  // ZTIER_TOOLS_ZTIER_ENGINE_MEASURE_H_
