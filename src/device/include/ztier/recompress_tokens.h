// File: ztier/recompress_tokens.h
//
// The token syntax of zram's CONFIG_ZRAM_MULTI_COMP attributes
// (drivers/block/zram/zram_drv.c of Linux 6.12), as pure functions that
// Device (device.cc) and the configuration file's reader
// (tools/ztier/service_config.cc) call:
//   - recomp_algorithm_store(): "algo=NAME [priority=N]";
//   - recompress_store(): "type=... max_pages=N threshold=BYTES algo=NAME
//     priority=N", and the kernel's resolution of algo=/priority= against
//     the configured algorithms;
//   - algorithm_params_store()'s selection of a priority (priority=N or
//     algo=NAME) and the tokens left for that priority's codec.
// Tokens are split at whitespace as the kernel's next_arg(); a token with no
// value ("type", "type=") is kInvalidArgument (EINVAL); unknown keys are
// ignored, as the kernel ignores them. A number kstrto*() rejects as
// malformed is kInvalidArgument, one it rejects as too big kOutOfRange
// (ERANGE).
#ifndef ZTIER_DEVICE_RECOMPRESS_TOKENS_H_
#define ZTIER_DEVICE_RECOMPRESS_TOKENS_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "ztier/page_store.h"
#include "ztier/status.h"

namespace ztier {

// The algorithm configured at each priority (0: the primary); empty where
// none is.
using PriorityAlgorithms = std::array<std::string, kMaxCodecPriorities>;

struct RecompAlgorithmTokens {
  std::string algo;  // as given (CanonicalCodecName not applied)
  int priority = 1;  // checked to be 1..3
};

// recomp_algorithm: no algo= or a priority outside 1..3 is
// kInvalidArgument. The name is not looked up here.
Result<RecompAlgorithmTokens> ParseRecompAlgorithmTokens(std::string_view text);

struct RecompressTokens {
  unsigned filter = 0;  // RecompressFilter bits; 0: every slot
  std::uint64_t max_pages = UINT64_MAX;
  std::uint32_t threshold = 0;
  std::string algo;  // empty: none given
  // zram's prio and prio_max: priority=0 reads as 1, and priority=N sets
  // prio_max to min(N + 1, kMaxCodecPriorities).
  std::uint32_t priority = 1;
  std::uint32_t priority_end = kMaxCodecPriorities;
};

// recompress: the kernel's parse. A later bad type= after a good one keeps
// the good one, as the kernel's `if (!mode)` check does.
Result<RecompressTokens> ParseRecompressTokens(std::string_view text);

// The kernel's resolution after parsing: algo= searches the priorities from
// `priority` up for that name (CanonicalCodecName applied) and uses only it,
// kInvalidArgument when none has it; prio_max is then clamped to the number
// of configured algorithms (the primary counts, as zram's num_active_comps),
// and priority >= prio_max is kInvalidArgument. Fills request's priority and
// priority_end and copies filter, max_pages and threshold.
Result<RecompressRequest> ResolveRecompress(const RecompressTokens& tokens,
                                            const PriorityAlgorithms& algs);

// algorithm_params: the priority its tokens are for (priority=N, default 0;
// algo=NAME overrides it with the first priority configured with that name,
// kInvalidArgument when none is; outside 0..3 kInvalidArgument), and the
// tokens without priority= and algo=, for that priority's codec.
struct AlgorithmParamsTarget {
  int priority = 0;
  std::string params;
};
Result<AlgorithmParamsTarget> SelectAlgorithmParams(
    std::string_view text, const PriorityAlgorithms& algs);

}  // namespace ztier

#endif  // ZTIER_DEVICE_RECOMPRESS_TOKENS_H_
