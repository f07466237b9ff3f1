// File: tools/ztier/estimate_cmd.h
//
// `ztier estimate`: would zram or zswap help this workload, and with which
// codec?
//
//   ztier estimate --pid PID [--mappings anon|file|all] [--max-pages N]
//   ztier estimate --corpus FILE [--corpus FILE]...
//   flags for both: [--codec NAME[:LEVEL]]... [--runs N] [--json FILE]
//
// --pid captures the process's pages in memory (tools/corpus/include/corpus/capture.h: its
// private anonymous memory by default, at most 4096 pages spread over it);
// --corpus reads page corpora (`ztier corpus capture`, testdata/).
//
// For each corpus and codec (default: lzo, lz4, lz4hc, zstd:1, zstd (level
// 3), zstd:9, deflate) the pages are stored into a real PageStore, one page
// at a time, exactly as `ztier bench engine` measures its size figures
// (EngineMeasurer::MeasureSizes, tools/ztier/engine_measure.h), so that the
// two report the same ratio and mem_used_total. Reported per codec:
//   ratio        original bytes / compressed bytes (compr_data_size)
//   mem_used     mem_used_total: what the pool really holds, its overhead
//                included; `saved` is 1 - mem_used / original
//   same, huge   the shares of same-filled pages (stored without
//                compressing) and of pages that do not compress (stored raw)
//   compress, decompress
//                MB/s of original bytes on this machine, one thread, the
//                median of --runs runs (default 3)
// and a recommendation with its reason: the codec that saves the most
// memory among the fast ones (compress and decompress at least half as fast
// as the fastest codec's), the one that saves the most overall if it is
// another, or that compressed memory would not help (under 10% saved).
//
// A terminal gets a progress line on stderr; otherwise nothing but the
// report is printed. Exit status: 0; 1 when the capture, a corpus or a
// codec fails; 2 for bad usage.
//
// JSON (--json): {"corpora": [{"name", "pages", "results": [{"codec",
// "level", "ratio", "orig_bytes", "compressed_bytes", "mem_used_total",
// "saved", "same_pages", "same_share", "huge_pages", "huge_share",
// "compress_mb_s", "decompress_mb_s"}, ...], "recommended", "smallest",
// "helps", "reason"}, ...]}
//
// Thread safety: runs on the calling thread only.
#ifndef ZTIER_TOOLS_ZTIER_ESTIMATE_CMD_H_
#define ZTIER_TOOLS_ZTIER_ESTIMATE_CMD_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ztier::tool {

// One codec's figures on one corpus.
struct EstimateRow {
  std::string codec;  // as given: "zstd:1", "lz4"
  int level = 0;      // the level in effect
  double ratio = 0;
  std::uint64_t orig_bytes = 0;
  std::uint64_t compressed_bytes = 0;
  std::uint64_t mem_used_total = 0;
  std::uint64_t same_pages = 0;
  std::uint64_t huge_pages = 0;
  std::uint64_t pages = 0;
  double compress_mb_s = 0;
  double decompress_mb_s = 0;
};

struct Recommendation {
  bool helps = false;       // the best codec saves at least 10%
  std::size_t recommended;  // index into the rows
  std::size_t smallest;     // index of the least mem_used_total
  std::string reason;
};

// The recommendation for `rows` (not empty), as described above.
Recommendation Recommend(const std::vector<EstimateRow>& rows);

// args: the words after `estimate`.
int RunEstimate(std::span<const std::string_view> args);

}  // namespace ztier::tool

#endif  // ZTIER_TOOLS_ZTIER_ESTIMATE_CMD_H_
