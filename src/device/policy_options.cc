// policy_options.cc: the post-processing policy's tokens
// (ParsePolicyOptions in include/ztier/policy.h).
//
// Stricter than zram's attribute parsers, which skip unknown keys: a
// policy runs unattended for days, so a typo ("idle_age=10min",
// "writeback_dayly=400M") is an error that names the token rather than a
// default silently kept.
#include <cctype>
#include <charconv>
#include <string>

#include "kernel_args.h"
#include "ztier/codec.h"
#include "ztier/page.h"
#include "ztier/page_store.h"
#include "ztier/policy.h"

namespace ztier {
namespace {

Status Bad(std::string_view token, std::string_view why) {
  return Status::InvalidArgument("policy: '" + std::string(token) + "': " +
                                 std::string(why));
}

// A decimal count (digits only).
Result<std::uint64_t> ParseCount(std::string_view value,
                                 std::string_view token) {
  std::uint64_t v = 0;
  const char* end = value.data() + value.size();
  auto [p, ec] = std::from_chars(value.data(), end, v);
  if (value.empty() || ec != std::errc() || p != end) {
    return Err(Bad(token, "want a whole number"));
  }
  return v;
}

// A duration in milliseconds: digits and an optional suffix s, m, h, d
// (or ms where `allow_ms`); plain digits are seconds.
Result<std::uint64_t> ParseDurationMs(std::string_view value,
                                      std::string_view token, bool allow_ms) {
  std::size_t n = 0;
  while (n < value.size() && std::isdigit(static_cast<unsigned char>(value[n]))) {
    ++n;
  }
  const std::string_view suffix = value.substr(n);
  std::uint64_t unit_ms = 0;
  if (suffix.empty() || suffix == "s") unit_ms = 1000;
  if (suffix == "m") unit_ms = 60'000;
  if (suffix == "h") unit_ms = 3'600'000;
  if (suffix == "d") unit_ms = 86'400'000;
  if (suffix == "ms" && allow_ms) unit_ms = 1;
  if (n == 0 || unit_ms == 0) {
    return Err(Bad(token, allow_ms ? "want a duration: N, Nms, Ns, Nm, Nh or Nd"
                                   : "want a duration: N (seconds), Ns, Nm, "
                                     "Nh or Nd"));
  }
  ZT_ASSIGN_OR_RETURN(std::uint64_t v, ParseCount(value.substr(0, n), token));
  if (v > UINT64_MAX / unit_ms / 1000) return Err(Bad(token, "too long"));
  return v * unit_ms;
}

// A duration in whole seconds that fits the store's 32-bit clock.
Result<std::uint32_t> ParseSeconds(std::string_view value,
                                   std::string_view token) {
  ZT_ASSIGN_OR_RETURN(std::uint64_t ms, ParseDurationMs(value, token, false));
  if (ms / 1000 > UINT32_MAX) return Err(Bad(token, "too long"));
  return static_cast<std::uint32_t>(ms / 1000);
}

// A size, or "none": UINT64_MAX.
Result<std::uint64_t> ParseSizeOrNone(std::string_view value,
                                      std::string_view token) {
  if (value == "none") return UINT64_MAX;
  auto v = ParseSize(value);
  if (!v.has_value()) return Err(Bad(token, v.error().message() + " or none"));
  return *v;
}

Result<bool> ParseOnOff(std::string_view value, std::string_view token) {
  if (value == "on" || value == "yes" || value == "1") return true;
  if (value == "off" || value == "no" || value == "0") return false;
  return Err(Bad(token, "want on or off"));
}

Result<unsigned> ParsePercent(std::string_view value, std::string_view token) {
  if (!value.empty() && value.back() == '%') value.remove_suffix(1);
  auto v = ParseCount(value, token);
  if (!v.has_value() || *v < 1 || *v > 100) {
    return Err(Bad(token, "want a share of one core, 1% to 100%"));
  }
  return static_cast<unsigned>(*v);
}

void AddParam(PolicyOptions* o, std::string_view key, std::string_view value) {
  if (!o->recompress_params.empty()) o->recompress_params += ' ';
  o->recompress_params += std::string(key) + "=" + std::string(value);
}

// Applies one key=value to *o.
Status ApplyToken(std::string_view key, std::string_view value,
                  std::string_view token, PolicyOptions* o) {
  if (key == "period") {
    ZT_ASSIGN_OR_RETURN(o->period_s, ParseSeconds(value, token));
    if (o->period_s == 0) return Bad(token, "the period must be at least 1s");
  } else if (key == "idle_age") {
    ZT_ASSIGN_OR_RETURN(o->idle_age_s, ParseSeconds(value, token));
  } else if (key == "writeback_age") {
    ZT_ASSIGN_OR_RETURN(o->writeback_age_s, ParseSeconds(value, token));
  } else if (key == "busy_pause") {
    ZT_ASSIGN_OR_RETURN(o->busy_pause_ms, ParseDurationMs(value, token, true));
    if (o->busy_pause_ms == 0 || o->busy_pause_ms > 60'000) {
      return Bad(token, "want 1ms to 60s");
    }
  } else if (key == "busy_give_up") {
    ZT_ASSIGN_OR_RETURN(o->busy_give_up_ms, ParseDurationMs(value, token, true));
    if (o->busy_give_up_ms > 3'600'000) return Bad(token, "want at most 1h");
  } else if (key == "recompress") {
    ZT_ASSIGN_OR_RETURN(o->recompress, ParseOnOff(value, token));
  } else if (key == "writeback") {
    ZT_ASSIGN_OR_RETURN(o->writeback, ParseOnOff(value, token));
  } else if (key == "recompress_rate") {
    ZT_ASSIGN_OR_RETURN(o->recompress_rate, ParseCount(value, token));
    if (o->recompress_rate == 0) return Bad(token, "must be at least 1");
  } else if (key == "recompress_cpu") {
    ZT_ASSIGN_OR_RETURN(o->recompress_cpu, ParsePercent(value, token));
  } else if (key == "busy_pages") {
    ZT_ASSIGN_OR_RETURN(o->busy_pages, ParseCount(value, token));
  } else if (key == "recompress_algo") {
    // Whether a device has it as a recomp_algorithm, each pass finds out.
    if (!IsCodecName(value)) return Bad(token, "no such algorithm");
    AddParam(o, "algo", value);
  } else if (key == "recompress_priority") {
    auto v = ParseCount(value, token);
    if (!v.has_value() || *v < 1 || *v > 3) return Bad(token, "want 1, 2 or 3");
    AddParam(o, "priority", value);
  } else if (key == "recompress_threshold") {
    auto v = ParseSize(value);
    if (!v.has_value()) return Bad(token, v.error().message());
    // An object's size: below a page (zram's threshold, below its huge
    // class size, which each device checks).
    if (*v >= kPageSize) return Bad(token, "want a size below 4096");
    AddParam(o, "threshold", std::to_string(*v));
  } else if (key == "recompress_max") {
    ZT_ASSIGN_OR_RETURN(std::uint64_t v, ParseCount(value, token));
    AddParam(o, "max_pages", std::to_string(v));
  } else if (key == "train_dict_pages") {
    ZT_ASSIGN_OR_RETURN(o->train_dict_pages, ParseCount(value, token));
  } else if (key == "train_dict_size") {
    auto v = ParseSize(value);
    if (!v.has_value()) return Bad(token, v.error().message());
    if (*v < kMinDictBytes || *v > kMaxDictBytes) {
      return Bad(token, "want 1K..1M");
    }
    o->train_dict_size = *v;
  } else if (key == "compact_min") {
    ZT_ASSIGN_OR_RETURN(o->compact_min, ParseSizeOrNone(value, token));
  } else if (key == "writeback_daily") {
    ZT_ASSIGN_OR_RETURN(const std::uint64_t v, ParseSizeOrNone(value, token));
    // A budget below one page would be 0 pages: no writeback ever, with
    // no sign of why. 0 says that on purpose.
    if (v != 0 && v < kPageSize) {
      return Bad(token, "less than one page (4K); 0 writes back nothing, "
                        "none sets no budget");
    }
    o->writeback_daily = v;
  } else {
    return Bad(token,
               "unknown key (period, idle_age, recompress, recompress_rate, "
               "recompress_cpu, recompress_algo, recompress_priority, "
               "recompress_threshold, recompress_max, writeback, "
               "writeback_age, writeback_daily, busy_pages, busy_pause, "
               "busy_give_up, train_dict_pages, train_dict_size, "
               "compact_min)");
  }
  return Status::Ok();
}

}  // namespace

Result<PolicyOptions> ParsePolicyOptions(std::string_view tokens) {
  PolicyOptions o;
  bool rate = false, cpu = false;
  std::string_view rest = tokens;
  kernel_args::Token t;
  while (kernel_args::NextToken(&rest, &t)) {
    const std::string_view token = t.text, key = t.param;
    if (t.value.empty() || key.empty()) return Err(Bad(token, "want key=value"));
    ZT_RETURN_IF_ERROR(ApplyToken(key, t.value, token, &o));
    rate = rate || key == "recompress_rate";
    cpu = cpu || key == "recompress_cpu";
  }
  if (rate && cpu) {
    return Err(Status::InvalidArgument(
        "policy: give recompress_rate (pages/s) or recompress_cpu (share of "
        "a core), not both"));
  }
  if (!rate && !cpu) o.recompress_cpu = 25;
  return o;
}

}  // namespace ztier
