// File: tools/ztier/bench_zram_compare_report.h
//
// What `ztier bench zram-compare` measures (ZramCompareConfig) and its
// report (bench_report.h): the configuration lines, the mm_stat table, the
// IO tables and the io_uring driver against fio. Samples: variant
// "mm_stat" holds part (a) under MmFigure names, one variant per codec pair
// (PairName) part (b) under IoFigure names; ratios are taken per run.
#ifndef ZTIER_TOOLS_ZTIER_BENCH_ZRAM_COMPARE_REPORT_H_
#define ZTIER_TOOLS_ZTIER_BENCH_ZRAM_COMPARE_REPORT_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "bench_fio.h"
#include "bench_harness.h"
#include "bench_report.h"

namespace ztier::tool::zramcmp {

// A kernel codec and the ztier codec compared with it.
struct CodecPair {
  std::string kernel;
  std::string ztier;
  bool kernel_offered = true;  // the kernel's comp_algorithm lists it
};

// How an IO reaches a device (bench_zram_compare.h), in the order the
// paths alternate.
enum class IoPath {
  kKernelUring, kZtierLib, kKernelSync, kKernelFio, kZtierNbd };
inline constexpr IoPath kIoPaths[] = {IoPath::kKernelUring, IoPath::kZtierLib,
                                      IoPath::kKernelSync, IoPath::kKernelFio,
                                      IoPath::kZtierNbd};

inline std::string_view IoPathName(IoPath p) {  // the --paths name
  constexpr std::string_view kNames[] = {"kernel-io_uring", "ztier-lib",
                                         "kernel-psync", "kernel-fio",
                                         "ztier-nbd"};
  return kNames[static_cast<int>(p)];
}
inline bool IsKernelPath(IoPath p) {
  return p != IoPath::kZtierLib && p != IoPath::kZtierNbd;
}

// One fio-style job at one thread count.
struct IoCase {
  bench::NbdJob job;
  std::size_t threads = 1;
};

struct ZramCompareConfig {
  struct Corpus {
    std::string name;  // "anon-python.pages"
    std::string path;
    std::size_t pages = 0;  // used (after --corpus-pages)
  };
  BenchFlags bench{.runs = 5};  // measured runs, after one warm-up run
  std::int64_t seconds = 1;
  std::uint64_t area_bytes = 0;
  std::vector<CodecPair> pairs;
  std::vector<IoCase> cases;  // in the order they run
  std::vector<IoPath> paths;  // those asked for (--paths)
  std::string corpus_dir;
  std::size_t corpus_pages = 0;  // per corpus; 0: all
  std::vector<Corpus> corpora;
  std::size_t data_pages = 0;  // the part (b) data: every corpus, in order
  std::string zram_dev;
  std::string kernel_state;    // "used", "missing", "busy" or "unusable"
  std::string kernel_message;  // why not used
  std::vector<std::string> kernel_algorithms;
  struct Tool {
    std::string path;  // empty: not found
    std::string version;
  };
  Tool ztier, fio, nbdcopy;
  std::vector<std::string> notes;  // what was skipped, and why

  bool Measures(IoPath p) const;  // in `paths`, and possible here
  // The first pair with its ztier codec measures ztier (lzo once).
  bool MeasuresZtier(std::size_t p) const;
};

inline std::string CaseTitle(const IoCase& c) {  // "randread 4k QD32 x2"
  return bench::JobTitle(c.job) + " x" + std::to_string(c.threads);
}
// "lz4/lz4": the variant of a codec pair.
inline std::string PairName(const CodecPair& p) {
  return p.kernel + "/" + p.ztier;
}
// The samples of corpus `c`, pair `p`, side 'k' or 'z', field `field`
// (compr, used, huge, same, meta) in variant "mm_stat".
std::string MmFigure(std::size_t c, std::size_t p, char side,
                     std::string_view field);
// The samples of case `c` on `path` ("iops" or "mb_s") in a pair's variant.
std::string IoFigure(std::size_t c, IoPath path, std::string_view unit);

// The whole report: configuration lines, the tables.
void AddZramCompareReport(Report& report, const ZramCompareConfig& cfg,
                          const Measurements& m);

}  // namespace ztier::tool::zramcmp

#endif  // ZTIER_TOOLS_ZTIER_BENCH_ZRAM_COMPARE_REPORT_H_
