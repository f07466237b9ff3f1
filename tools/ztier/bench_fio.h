// File: tools/ztier/bench_fio.h
//
// fio for the benchmarks that drive NBD exports (bench nbd, zram-compare,
// writeback): the six measured jobs, the untimed fill, their command lines,
// a small reader of fio's JSON output (ztier takes no JSON dependency), and
// RunFio, which runs a job and reads what it printed. Every job uses
// --ioengine=nbd on `uri`, --buffer_compress_percentage=50 --refill_buffers
// (data half compressible, new for every write) and --size=AREA, so that the
// jobs and the fill cover the same bytes: reads read what the fill wrote.
//
// Thread safety: plain values and functions; RunFio forks (bench_proc.h).
#ifndef ZTIER_TOOLS_ZTIER_BENCH_FIO_H_
#define ZTIER_TOOLS_ZTIER_BENCH_FIO_H_

#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ztier/status.h"

namespace ztier::tool::bench {

struct NbdJob {
  std::string_view name;     // "randread-4k-qd32"
  std::string_view rw;       // fio --rw
  std::uint32_t block_size;  // bytes
  std::uint32_t iodepth;
  bool writes;  // whose figures count: write (else read)
};

std::span<const NbdJob> StandardJobs();   // the measured jobs, in order
std::string JobTitle(const NbdJob& job);  // "randread 4k QD32"

// The flags every job has (also printed in a configuration).
std::vector<std::string> FioCommonFlags();

// fio argv for a timed job (time_based, `seconds`) over the first
// `area_bytes` of the export at `uri`.
std::vector<std::string> FioJobArgs(const std::string& fio_path,
                                    const NbdJob& job, const std::string& uri,
                                    std::uint64_t area_bytes,
                                    std::int64_t seconds);

// fio argv for the untimed fill: one 128 KiB sequential write pass, iodepth
// 8, over the first `area_bytes`.
std::vector<std::string> FioFillArgs(const std::string& fio_path,
                                     const std::string& uri,
                                     std::uint64_t area_bytes);

struct FioDirection {
  double iops = 0, bw_bytes = 0;  // per second
  std::uint64_t io_bytes = 0;
};

struct FioFigures {
  FioDirection read, write;
  std::int64_t error = 0;  // jobs[0].error
  // fio's own CPU use, jobs[0].usr_cpu + sys_cpu, in percent of one CPU
  // (-1: not reported). Near 100 at depth 32, the client is the limit.
  double cpu_percent = -1;
};

// Reads fio's --output-format=json output from the first '{' that begins a
// line (fio prints notices on stdout before it); text after the document
// is ignored. kCorruption: no document, malformed JSON, no jobs[0], or no
// numeric iops and bw_bytes under its read or write.
Result<FioFigures> ParseFioJson(std::string_view text);

// Runs fio `argv` in `dir` (at most `timeout`), its output in DIR/fio.json
// and DIR/fio.err, and parses it. Errors name the command line and carry
// fio's stderr: fio failing or killed, no document, or a job error.
Result<FioFigures> RunFio(const std::vector<std::string>& argv,
                          const std::string& dir,
                          std::chrono::milliseconds timeout);

}  // namespace ztier::tool::bench

#endif  // ZTIER_TOOLS_ZTIER_BENCH_FIO_H_
