// File: tools/ztier/writeback_run.h
//
// One measurement of `ztier bench writeback` (bench_writeback.h): a
// PageStore's writeback of every slot to a fresh backing file, one page at a
// time or batched, or fio's sequential write on the same file system.
//
//   auto s = RunStoreWriteback({.image_path = "/var/tmp/x.img",
//                               .size_bytes = 1 << 30, .codec = "lz4",
//                               .in_flight = 32, .max_io_pages = 32},
//                              corpus, [](std::string_view phase) {});
//   double mb_s = s->mb_s;
//
// RunStoreWriteback, in order:
//   1. deletes image_path, opens it with BackingStore::Open (created,
//      preallocated to size_bytes; O_DIRECT when the file system allows it)
//      and creates a PageStore of size_bytes / 4096 slots with `codec`;
//   2. fills slot i with corpus page i % corpus.size() (StoreBatch; untimed)
//      and marks every slot idle (MarkIdleAll);
//   3. times one Writeback() of the idle scan over every slot, with
//      in_flight and max_io_pages (1 and 1: one synchronous pwrite per page,
//      zram before its writeback batching series); an error unless it
//      returns OK and wrote every candidate;
//   4. untimed: loads every verify_stride-th slot and compares it with the
//      corpus page it was filled with; a mismatch is kCorruption;
//   5. drops the store and deletes image_path.
// RunFioSeqWrite deletes the fio file, runs fio (FioSeqWriteArgs) with its
// output in scratch_dir, and returns the write bandwidth.
//
// Thread safety: plain functions; RunFioSeqWrite forks, so call it while the
// process has no other threads (the benchmark is single-threaded between
// measurements).
#ifndef ZTIER_TOOLS_ZTIER_WRITEBACK_RUN_H_
#define ZTIER_TOOLS_ZTIER_WRITEBACK_RUN_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "corpus/corpus.h"
#include "ztier/status.h"

namespace ztier::tool {

struct WritebackRunConfig {
  std::string image_path;        // the backing file (deleted before and after)
  std::uint64_t size_bytes = 0;  // a multiple of 4096: store and file size
  std::string codec = "lz4";
  std::size_t in_flight = 32;      // IOs at once (1: synchronous)
  std::size_t max_io_pages = 32;   // pages per IO
  bool compressed = false;         // compressed writeback
  std::size_t verify_stride = 64;  // every Nth slot is read back and checked
};

// bd_stat, in pages.
struct BdStat {
  std::uint64_t count = 0;
  std::uint64_t reads = 0;
  std::uint64_t writes = 0;
};

struct WritebackSample {
  std::uint64_t slots = 0;       // slots filled
  std::uint64_t candidates = 0;  // slots the idle scan picked (not SAME)
  std::uint64_t written = 0;
  double seconds = 0;  // the Writeback() call alone
  double mb_s = 0;     // written * 4096 / seconds / 1e6
  BdStat bd_before;
  BdStat bd_after;                    // before the verification reads
  std::uint64_t mem_used_before = 0;  // mem_used_total, bytes
  std::uint64_t mem_used_after = 0;
  std::uint64_t verified = 0;            // slots read back and compared
  std::uint64_t verified_from_disk = 0;  // of them, written-back slots
  bool direct = false;                   // the backing file was opened O_DIRECT
};

// Called with the phase about to start ("fill", "writeback", "verify").
using PhaseFn = std::function<void(std::string_view phase)>;

Result<WritebackSample> RunStoreWriteback(const WritebackRunConfig& config,
                                          const corpus::PageSet& corpus,
                                          const PhaseFn& phase);

struct FioRunConfig {
  std::string fio_path;
  std::string file_path;  // the file fio writes (deleted before/after)
  std::uint64_t size_bytes = 0;
  std::string scratch_dir;  // fio's stdout and stderr go here
};

struct FioSample {
  double bw_bytes = 0;  // bytes per second, fio's jobs[0].write.bw_bytes
  double mb_s = 0;      // bw_bytes / 1e6
  std::uint64_t io_bytes = 0;
  double seconds = 0;  // io_bytes / bw_bytes
};

// fio --name=seqwrite --filename=FILE --size=SIZE --rw=write --bs=128k
// --ioengine=io_uring --direct=1 --iodepth=32 --output-format=json
std::vector<std::string> FioSeqWriteArgs(const FioRunConfig& config);

// Errors name the command line and carry fio's stderr.
Result<FioSample> RunFioSeqWrite(const FioRunConfig& config);

}  // namespace ztier::tool

#endif  // ZTIER_TOOLS_ZTIER_WRITEBACK_RUN_H_
