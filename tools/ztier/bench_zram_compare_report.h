// File: tools/ztier/bench_zram_compare_report.h
//
// What `ztier bench zram-compare` measures (ZramCompareConfig,
// ZramCompareResults) and how it reports it: the configuration text, the
// mm_stat table (part a), the IO tables (part b: the library path against
// the kernel through io_uring and through pread/pwrite, the NBD path against
// the kernel through fio, and the io_uring driver against fio on the kernel
// device as a check of the driver), and the JSON document.
//
// Samples are kept per run, in run order, so that a ratio ztier/kernel is
// taken within each run (the two measured moments apart) before the median
// over the runs.
//
// Thread safety: plain values and functions.
#ifndef ZTIER_TOOLS_ZTIER_BENCH_ZRAM_COMPARE_REPORT_H_
#define ZTIER_TOOLS_ZTIER_BENCH_ZRAM_COMPARE_REPORT_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "bench_fio.h"
#include "bench_nbd_report.h"
#include "bench_zram_compare_kernel.h"
#include "machine_info.h"
#include "ztier/status.h"

namespace ztier::tool::zramcmp {

// A kernel codec and the ztier codec compared with it (lzo-rle: lzo, as
// ztier has no run-length variant).
struct CodecPair {
  std::string kernel;
  std::string ztier;
  bool kernel_offered = true;  // the kernel's comp_algorithm lists it
};

// How an IO reaches a device.
enum class IoPath {
  kKernelUring,  // this tool's io_uring driver on /dev/zramN, corpus data
  kKernelSync,   // this tool's pread/pwrite driver on /dev/zramN, corpus data
  kKernelFio,    // fio --ioengine=io_uring --direct=1 on /dev/zramN
  kZtierLib,     // this tool's driver calling a ztier Device, corpus data
  kZtierNbd,     // fio's nbd engine on `ztier serve`
};
// The order in which the paths alternate.
inline constexpr IoPath kIoPaths[] = {IoPath::kKernelUring, IoPath::kZtierLib,
                                      IoPath::kKernelSync, IoPath::kKernelFio,
                                      IoPath::kZtierNbd};

// "kernel-io_uring", "kernel-psync", "kernel-fio", "ztier-lib",
// "ztier-nbd": --paths names and JSON values.
std::string_view IoPathName(IoPath p);
bool IsKernelPath(IoPath p);

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
  std::size_t runs = 5;  // measured, after one warm-up run
  std::int64_t seconds = 1;
  std::uint64_t area_bytes = 0;
  std::vector<CodecPair> pairs;
  std::vector<IoCase> cases;  // in the order they run
  std::vector<IoPath> paths;  // those measured (--paths)
  std::string corpus_dir;
  std::size_t corpus_pages = 0;  // per corpus; 0: all
  std::vector<Corpus> corpora;
  std::size_t data_pages = 0;  // the part (b) data: every corpus, in order
  // The kernel device: state "used", "missing", "busy" or "unusable" (with
  // the reason in kernel_message).
  std::string zram_dev;
  std::string kernel_state;
  std::string kernel_message;
  std::vector<std::string> kernel_algorithms;
  bench::ToolInfo ztier, fio, nbdcopy;
  std::vector<std::string> notes;  // what was skipped, and why
  std::string json_path;

  bool kernel_used() const { return kernel_state == "used"; }
  bool Measures(IoPath p) const;  // in `paths`, and possible here
};

// Part (a): one corpus and codec pair, one sample per run.
struct MmCase {
  std::vector<MmStat> kernel;
  std::vector<MmStat> ztier;
  std::vector<double> ztier_pool_metadata;  // bytes inside mem_used_total
};

// Part (b): one case on one path with one codec, one sample per run.
struct IoSeries {
  std::size_t io_case = 0;
  IoPath path = IoPath::kKernelUring;
  std::string codec;  // the side's own codec
  std::vector<double> iops;
  std::vector<double> mb_s;
};

struct ZramCompareResults {
  // [corpus][pair]
  std::vector<std::vector<MmCase>> mm;
  std::vector<IoSeries> io;

  // Sized for `cfg`, all empty.
  static ZramCompareResults For(const ZramCompareConfig& cfg);
  // The series, added empty if new.
  IoSeries& Series(std::size_t io_case, IoPath path, const std::string& codec);
  // Null when not measured.
  const IoSeries* Find(std::size_t io_case, IoPath path,
                       const std::string& codec) const;
};

// Multi-line configuration block (ends with a newline).
std::string ConfigText(const ZramCompareConfig& cfg);

// Part (a): mm_stat per corpus and codec pair, kernel against ztier.
std::string MmTable(const ZramCompareConfig& cfg,
                    const ZramCompareResults& results);

// Part (b): `ztier` against `kernel` for every case and codec pair (IOPS
// for 4 KiB jobs, MB/s for 128 KiB ones; ratios within each run).
std::string IoTable(const ZramCompareConfig& cfg,
                    const ZramCompareResults& results, IoPath kernel,
                    IoPath ztier, std::string_view title);

// The kernel io_uring driver against fio on the same kernel device.
std::string DriverCheckTable(const ZramCompareConfig& cfg,
                             const ZramCompareResults& results);

Status WriteZramCompareJson(const std::string& path,
                            const MachineInfo& machine,
                            const ZramCompareConfig& cfg,
                            const ZramCompareResults& results);

}  // namespace ztier::tool::zramcmp

#endif  // ZTIER_TOOLS_ZTIER_BENCH_ZRAM_COMPARE_REPORT_H_
