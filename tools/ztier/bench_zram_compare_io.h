// File: tools/ztier/bench_zram_compare_io.h
//
// The IO driver of `ztier bench zram-compare`: one access pattern, with the
// same corpus data, on a block device (O_DIRECT; io_uring keeping `depth`
// IOs in flight per thread as fio's io_uring engine does, or pread/pwrite)
// or on a ztier Device (Write/Read, what `ztier serve` calls per request).
//
//   IoPattern p{.random = true, .block_bytes = 4096, .depth = 32,
//               .threads = 2, .area_bytes = 256 << 20, .seconds = 1};
//   auto k = RunIo({.path = "/dev/zram0"}, p, data);  // k->iops() vs
//   auto z = RunIo({.device = &device}, p, data);     // z->iops()
//
// Thread t works on its own share [t * S, (t + 1) * S), S = ShareBytes(p),
// in blocks: random (splitmix64 seeded with t + 1, the same on both sides)
// or sequential (wrapping); seconds == 0 is one sequential pass (a fill).
// The time runs from a common start, once every thread is set up, until
// the last thread ends. After a fill area page p holds data page
// p % count(), and a write writes that page again. Synchronous calls
// (pread/pwrite, a Device) make one call after another at any depth.
// However short `seconds`, each thread completes at least one IO (io_uring:
// its first `depth`).
//
// Thread safety: RunIo starts and joins its own threads; one at a time.
#ifndef ZTIER_TOOLS_ZTIER_BENCH_ZRAM_COMPARE_IO_H_
#define ZTIER_TOOLS_ZTIER_BENCH_ZRAM_COMPARE_IO_H_

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "bench_fio.h"
#include "corpus/corpus.h"
#include "ztier/device.h"
#include "ztier/status.h"

namespace ztier::tool {

// The largest block (128 KiB), in pages: areas, shares and data come in
// whole blocks of it.
inline constexpr std::size_t kMaxBlockPages = 32;

struct AlignedFree {  // a unique_ptr deleter for std::aligned_alloc memory
  void operator()(std::byte* p) const { std::free(p); }
};

// The corpus pages one after another in one 4096-aligned buffer (O_DIRECT
// writes point into it), cut to whole 128 KiB blocks.
class DataPages {
 public:
  // The first `max_pages_each` pages of each set (0: all). kInvalidArgument
  // when fewer than kMaxBlockPages pages result.
  static Result<DataPages> From(std::span<const corpus::PageSet* const> sets,
                                std::size_t max_pages_each);

  std::size_t count() const { return count_; }
  // Area page `p` after a fill; the rest of its 128 KiB block follows.
  const std::byte* ForAreaPage(std::uint64_t p) const {
    return bytes_.get() + (p % count_) * kPageSize;
  }

 private:
  std::unique_ptr<std::byte, AlignedFree> bytes_;
  std::size_t count_ = 0;
};

struct IoPattern {
  bool random = true;
  bool writes = false;
  std::uint32_t block_bytes = 4096;  // a multiple of 4096, at most 128 KiB
  std::uint32_t depth = 1;
  std::size_t threads = 1;
  std::uint64_t area_bytes = 0;  // a multiple of 128 KiB
  double seconds = 1;            // 0: one sequential pass (a fill)
  bool sync = false;             // pread/pwrite instead of io_uring
};

// Each thread's share: area_bytes / threads, rounded down to 128 KiB.
std::uint64_t ShareBytes(const IoPattern& p);

// The pattern of fio job `job` on `threads` threads for `seconds`.
IoPattern PatternFor(const bench::NbdJob& job, std::size_t threads,
                     std::uint64_t area_bytes, std::int64_t seconds);

struct IoResult {
  std::uint64_t ops = 0;
  std::uint64_t bytes = 0;
  double seconds = 0;
  double iops() const { return seconds > 0 ? ops / seconds : 0; }
  double mb_s() const { return seconds > 0 ? bytes / seconds / 1e6 : 0; }
};

// Where the IO goes: `device` when set, else the block device `path`.
struct IoTarget {
  std::string path;
  Device* device = nullptr;
};

// Errors: a bad pattern, the open, io_uring setup, the first failing or
// short IO.
Result<IoResult> RunIo(const IoTarget& t, const IoPattern& p,
                       const DataPages& data);

// Reads every `stride`-th page of the area and compares it with what a fill
// wrote there; kCorruption naming the first that differs.
Status VerifyArea(const IoTarget& t, std::uint64_t area_bytes,
                  const DataPages& data, std::uint64_t stride);

// fio's line for the same pattern: bench nbd's line for `job`
// (bench::FioJobArgs on `uri`) with --numjobs=THREADS, each on its own
// share; with `dev`, --ioengine=io_uring --direct=1 --filename=DEV instead
// of the nbd engine.
std::vector<std::string> FioArgs(const std::string& fio_path,
                                 const bench::NbdJob& job, std::size_t threads,
                                 std::uint64_t area_bytes, std::int64_t seconds,
                                 const std::string& uri,
                                 const std::string& dev = "");

}  // namespace ztier::tool

#endif  // ZTIER_TOOLS_ZTIER_BENCH_ZRAM_COMPARE_IO_H_
