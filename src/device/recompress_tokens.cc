// recompress_tokens.cc: zram's recomp_algorithm, recompress and
// algorithm_params token syntax (contract in recompress_tokens.h), as
// recomp_algorithm_store(), recompress_store() and algorithm_params_store()
// in drivers/block/zram/zram_drv.c (Linux 6.12) parse them.
#include "ztier/recompress_tokens.h"

#include <algorithm>
#include <charconv>
#include <string>

#include "kernel_args.h"
#include "ztier/codec.h"

namespace ztier {
namespace {

using kernel_args::Token;

Status Invalid(std::string_view attr, std::string_view why,
               std::string_view token) {
  return Status::InvalidArgument(std::string(attr) + ": " + std::string(why) +
                                 " '" + std::string(token) + "'");
}

// kstrtoull / kstrtouint(text, 10) up to `max`: an optional '+', decimal
// digits. Malformed: kInvalidArgument; above max: kOutOfRange.
Result<std::uint64_t> ParseUnsigned(std::string_view attr, const Token& t,
                                    std::uint64_t max) {
  std::uint64_t n = 0;
  const kernel_args::NumberError e = kernel_args::ParseDecimal(t.value, &n);
  if (e == kernel_args::NumberError::kMalformed) {
    return Err(Invalid(attr, "not a number in", t.text));
  }
  if (e == kernel_args::NumberError::kOverflow || n > max) {
    return Err(Status::OutOfRange(std::string(attr) + ": number out of range '" +
                                  std::string(t.text) + "'"));
  }
  return n;
}

// kstrtoint(text, 10): an optional sign, decimal digits.
Result<int> ParseSigned(std::string_view attr, const Token& t) {
  std::string_view v = t.value;
  if (!v.empty() && v.front() == '+') v.remove_prefix(1);
  int n = 0;
  const char* end = v.data() + v.size();
  auto [p, ec] = std::from_chars(v.data(), end, n);
  if (v.empty() || p != end ||
      (ec != std::errc() && ec != std::errc::result_out_of_range)) {
    return Err(Invalid(attr, "not a number in", t.text));
  }
  if (ec == std::errc::result_out_of_range) {
    return Err(Status::OutOfRange(std::string(attr) + ": number out of range '" +
                                  std::string(t.text) + "'"));
  }
  return n;
}

unsigned ModeOf(std::string_view v) {
  if (v == "idle") return kRecompressIdle;
  if (v == "huge") return kRecompressHuge;
  if (v == "huge_idle") return kRecompressIdle | kRecompressHuge;
  return 0;
}

// Applies one recompress token to *out.
Status ApplyRecompressToken(const Token& t, RecompressTokens* out) {
  constexpr std::string_view kAttr = "recompress";
  if (t.param == "type") {
    // The kernel sets mode only on a known value and fails only while none
    // has been set.
    if (const unsigned m = ModeOf(t.value); m != 0) out->filter = m;
    if (out->filter == 0) {
      return Invalid(kAttr, "type must be idle, huge or huge_idle:", t.text);
    }
  } else if (t.param == "max_pages") {
    ZT_ASSIGN_OR_RETURN(out->max_pages, ParseUnsigned(kAttr, t, UINT64_MAX));
  } else if (t.param == "threshold") {
    ZT_ASSIGN_OR_RETURN(const std::uint64_t n,
                        ParseUnsigned(kAttr, t, UINT32_MAX));
    out->threshold = static_cast<std::uint32_t>(n);
  } else if (t.param == "algo") {
    out->algo = std::string(t.value);
  } else if (t.param == "priority") {
    ZT_ASSIGN_OR_RETURN(const std::uint64_t n,
                        ParseUnsigned(kAttr, t, UINT32_MAX));
    out->priority = n == 0 ? 1 : static_cast<std::uint32_t>(n);
    // Unsigned, as the kernel's: priority=4294967295 wraps prio_max to 0.
    out->priority_end = std::min<std::uint32_t>(
        out->priority + 1u, static_cast<std::uint32_t>(kMaxCodecPriorities));
  }
  return Status::Ok();  // unknown keys are ignored, as the kernel's
}

bool SameAlgorithm(std::string_view configured, std::string_view name) {
  return !configured.empty() && configured == CanonicalCodecName(name);
}

}  // namespace

Result<RecompAlgorithmTokens> ParseRecompAlgorithmTokens(
    std::string_view text) {
  constexpr std::string_view kAttr = "recomp_algorithm";
  RecompAlgorithmTokens out;
  bool have_algo = false;
  Token t;
  while (kernel_args::NextToken(&text, &t)) {
    if (t.value.empty()) return Err(Invalid(kAttr, "no value in", t.text));
    if (t.param == "algo") {
      out.algo = std::string(t.value);
      have_algo = true;
    } else if (t.param == "priority") {
      ZT_ASSIGN_OR_RETURN(out.priority, ParseSigned(kAttr, t));
    }
  }
  if (!have_algo) {
    return Err(Status::InvalidArgument(
        "recomp_algorithm: no algo=NAME (give algo=NAME [priority=1..3])"));
  }
  if (out.priority < 1 || out.priority >= kMaxCodecPriorities) {
    return Err(Status::InvalidArgument(
        "recomp_algorithm: priority " + std::to_string(out.priority) +
        " is not 1.." + std::to_string(kMaxCodecPriorities - 1)));
  }
  return out;
}

Result<RecompressTokens> ParseRecompressTokens(std::string_view text) {
  RecompressTokens out;
  Token t;
  while (kernel_args::NextToken(&text, &t)) {
    if (t.value.empty()) {
      return Err(Invalid("recompress", "no value in", t.text));
    }
    ZT_RETURN_IF_ERROR(ApplyRecompressToken(t, &out));
  }
  return out;
}

Result<RecompressRequest> ResolveRecompress(const RecompressTokens& tokens,
                                            const PriorityAlgorithms& algs) {
  std::uint32_t prio = tokens.priority;
  std::uint32_t prio_max = tokens.priority_end;
  if (!tokens.algo.empty()) {
    bool found = false;
    for (; prio < static_cast<std::uint32_t>(kMaxCodecPriorities); ++prio) {
      if (SameAlgorithm(algs[prio], tokens.algo)) {
        prio_max = prio + 1;
        found = true;
        break;
      }
    }
    if (!found) {
      return Err(Status::InvalidArgument(
          "recompress: algo=" + tokens.algo +
          " is not a recompression algorithm of this device (recomp_algorithm "
          "at priority " + std::to_string(tokens.priority) + " or above)"));
    }
  }
  const auto active = static_cast<std::uint32_t>(
      std::count_if(algs.begin(), algs.end(),
                    [](const std::string& a) { return !a.empty(); }));
  prio_max = std::min(prio_max, active);
  if (prio >= prio_max) {
    return Err(Status::InvalidArgument(
        "recompress: no recompression algorithm at priority " +
        std::to_string(prio) + " (" + std::to_string(active - 1) +
        " configured; set recomp_algorithm before disksize)"));
  }
  RecompressRequest r;
  r.filter = tokens.filter;
  r.priority = static_cast<int>(prio);
  r.priority_end = static_cast<int>(prio_max);
  r.max_pages = tokens.max_pages;
  r.threshold = tokens.threshold;
  return r;
}

Result<AlgorithmParamsTarget> SelectAlgorithmParams(
    std::string_view text, const PriorityAlgorithms& algs) {
  ZT_ASSIGN_OR_RETURN(const CodecParams parsed, ParseAlgorithmParams(text));
  AlgorithmParamsTarget out;
  out.priority = parsed.priority < 0 ? 0 : parsed.priority;
  if (!parsed.algo.empty()) {
    const auto it = std::find_if(algs.begin(), algs.end(), [&](const auto& a) {
      return SameAlgorithm(a, parsed.algo);
    });
    if (it == algs.end()) {
      return Err(Status::InvalidArgument(
          "algorithm_params: algo=" + parsed.algo +
          " is neither comp_algorithm nor a recomp_algorithm of this device"));
    }
    out.priority = static_cast<int>(it - algs.begin());
  }
  if (out.priority >= kMaxCodecPriorities) {
    return Err(Status::InvalidArgument(
        "algorithm_params: priority " + std::to_string(out.priority) +
        " is not 0.." + std::to_string(kMaxCodecPriorities - 1)));
  }
  Token t;
  while (kernel_args::NextToken(&text, &t)) {
    if (t.param == "algo" || t.param == "priority") continue;
    if (!out.params.empty()) out.params += ' ';
    out.params += t.text;
  }
  return out;
}

}  // namespace ztier
