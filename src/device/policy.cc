// policy.cc: the post-processing policy's passes (contract in
// include/ztier/policy.h): the three steps, the pacer that the
// recompression pass calls between batches, and the daily writeback
// budget.
#include "ztier/policy.h"

#include <time.h>

#include <algorithm>
#include <thread>

#include "platform/clock.h"

namespace ztier {
namespace {

constexpr std::uint64_t kNsPerMs = 1'000'000;
constexpr std::uint64_t kDayNs = 86'400 * kNsPerSecond;
// Client rates are measured over windows at least this long: a batch of 32
// pages takes ~200-400 us, over which one client read would look like
// thousands of pages/s.
constexpr std::uint64_t kBusyWindowNs = 10 * kNsPerMs;
// The pacer sleeps only once the pass is this far ahead of its budget, so
// that it does not make a system call per batch.
constexpr std::uint64_t kMinSleepNs = kNsPerMs;
// The longest sleep between looks at Stop() and waiting passes.
constexpr std::uint64_t kPauseSliceNs = 100 * kNsPerMs;

std::uint64_t ThreadCpuNs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * kNsPerSecond +
         static_cast<std::uint64_t>(ts.tv_nsec);
}

std::uint64_t ClientPages(const PageStoreStats& st) {
  return st.stores + st.loads;
}

// The `recompress` tokens of a pass: type=idle unless `params` names a
// type (a configuration file's recompress_params may say type=huge_idle).
std::string RecompressTokens(const std::string& params) {
  const bool has_type = params.starts_with("type=") ||
                        params.find(" type=") != std::string::npos;
  if (has_type) return params;
  return params.empty() ? "type=idle" : "type=idle " + params;
}

// Whether counter `ops`, `before` it dt_ns ago, grew faster than
// `per_second` (clients' pages against busy_pages).
bool AboveRate(std::uint64_t ops, std::uint64_t before, std::uint64_t dt_ns,
               std::uint64_t per_second) {
  const std::uint64_t delta = ops >= before ? ops - before : 0;
  return dt_ns > 0 && static_cast<double>(delta) * 1e9 /
                              static_cast<double>(dt_ns) >
                          static_cast<double>(per_second);
}

// Records a step's error as the pass's first, unless the device was reset
// or removed meanwhile (an operator's reset while the pass ran): its step
// failed for that, and the rest of the pass is skipped, not failed.
void NoteError(const Device& device, PolicyPassResult& r, const Status& s) {
  if (!s.ok() && r.status.ok() && device.initialized()) r.status = s;
}

}  // namespace

// The pace callback of one pass: the rules of "Budget and yielding" in
// ztier/policy.h. It runs under the device's shared lock, so it reads the
// counters the device hands it, never Device::Stats().
class Policy::Pacer {
 public:
  Pacer(Policy& policy, Device& device) : p_(policy), d_(device) {
    start_ns_ = budget_ns_ = window_ns_ = p_.env_.now_ns();
    const PageStoreStats st = d_.Stats();  // before the pass: no lock held
    window_ops_ = ClientPages(st);
    attempts0_ = st.recompress_attempts;
    cpu0_ = p_.env_.thread_cpu_ns();
  }

  bool Pace(const Device::StatsReader& stats) {
    stats_ = &stats;
    if (first_pace_) {
      // The pass may have waited for another one (an operator's recompress
      // or a writeback) before its first batch: their attempts are not
      // this pass's. The pass has done one batch at most by now.
      first_pace_ = false;
      const std::uint64_t now = stats().recompress_attempts;
      if (now - attempts0_ > kMaxPassBatchSize) {
        attempts0_ = now - kMaxPassBatchSize;
      }
      // Nor is the time it waited budget for this one: the rate and CPU
      // budgets count from its first batch (charged as if it took no
      // time), so that a pass that waited W s does not try rate x W pages
      // at once. The period still counts from the pass's call.
      budget_ns_ = p_.env_.now_ns();
    }
    if (!Continue()) {
      ended_early_ = true;
      return false;
    }
    return true;
  }
  bool ended_early() const { return ended_early_; }
  // Ended early for clients, Stop() or a waiting pass, not at the
  // period's end.
  bool yielded() const { return ended_early_ && !period_over_; }

 private:
  bool Continue() {
    const PolicyOptions& o = p_.options_;
    if (GiveWay()) return false;
    if (p_.env_.now_ns() - start_ns_ >= o.period_s * kNsPerSecond) {
      period_over_ = true;
      return false;
    }
    if (!YieldToClients()) return false;
    const std::uint64_t now = p_.env_.now_ns();
    std::uint64_t due = 0;  // when the budget allows what is done so far,
                            // from budget_ns_
    if (o.recompress_rate != 0) {
      // The pages tried so far (the store counts them batch by batch).
      const std::uint64_t done = (*stats_)().recompress_attempts - attempts0_;
      due = done * kNsPerSecond / o.recompress_rate;
    } else if (o.recompress_cpu != 0) {
      const std::uint64_t cpu = p_.env_.thread_cpu_ns() - cpu0_;
      due = cpu * 100 / o.recompress_cpu;
    }
    // Never past the end of the period, where the pass ends anyway.
    const std::uint64_t period_end = start_ns_ + o.period_s * kNsPerSecond;
    const std::uint64_t due_at = std::min(budget_ns_ + due, period_end);
    if (due_at > now + kMinSleepNs) return Pause(due_at - now);
    return !GiveWay();
  }

  // Stop() was called, or an operator's pass, a Reset or a removal waits
  // for this pass (Device::PassesWaiting): the pass ends.
  bool GiveWay() const { return p_.stopped() || d_.PassesWaiting(); }

  // Sleeps `ns` in slices of at most kPauseSliceNs, so that a Stop() or a
  // waiting pass (PassesWaiting) ends the pass within a slice, not after a
  // pause as long as a period (recompress_rate=1 paces a batch of 32 pages
  // over 32 s). False when one did.
  bool Pause(std::uint64_t ns) {
    while (ns > 0) {
      const std::uint64_t slice = std::min(ns, kPauseSliceNs);
      p_.env_.sleep_ns(slice);
      ns -= slice;
      if (GiveWay()) return false;
    }
    return true;
  }

  // False when clients have been busy for busy_give_up: the pass ends.
  bool YieldToClients() {
    const PolicyOptions& o = p_.options_;
    if (o.busy_pages == 0) return true;
    std::uint64_t waited_ms = 0;
    while (Busy()) {
      if (waited_ms >= o.busy_give_up_ms || GiveWay()) return false;
      if (!Pause(o.busy_pause_ms * kNsPerMs)) return false;
      waited_ms += o.busy_pause_ms;
    }
    return true;
  }

  // Whether the clients' page rate over the window that just closed is
  // above busy_pages; the last verdict while the window is open.
  bool Busy() {
    const std::uint64_t now = p_.env_.now_ns();
    if (now - window_ns_ < kBusyWindowNs) return busy_;
    const std::uint64_t ops = ClientPages((*stats_)());
    busy_ = AboveRate(ops, window_ops_, now - window_ns_,
                      p_.options_.busy_pages);
    window_ns_ = now;
    window_ops_ = ops;
    return busy_;
  }

  Policy& p_;
  Device& d_;
  std::uint64_t start_ns_ = 0;
  std::uint64_t budget_ns_ = 0;  // where the rate and CPU budgets start
  const Device::StatsReader* stats_ = nullptr;  // the current Pace()'s
  std::uint64_t attempts0_ = 0;  // recompress_attempts before the pass
  bool first_pace_ = true;
  std::uint64_t cpu0_ = 0;
  std::uint64_t window_ns_ = 0;
  std::uint64_t window_ops_ = 0;
  bool busy_ = false;
  bool ended_early_ = false;
  bool period_over_ = false;
};

Policy::Policy(PolicyOptions options, PolicyEnv env)
    : options_(std::move(options)), env_(std::move(env)) {
  // CLOCK_BOOTTIME: a day of the writeback budget is a day of the
  // calendar, suspend included (CLOCK_MONOTONIC stops while suspended).
  if (!env_.now_ns) env_.now_ns = platform::BootTimeNs;
  if (!env_.sleep_ns) {
    env_.sleep_ns = [](std::uint64_t ns) {
      std::this_thread::sleep_for(std::chrono::nanoseconds(ns));
    };
  }
  if (!env_.thread_cpu_ns) env_.thread_cpu_ns = ThreadCpuNs;
}

void Policy::Log(const std::string& line) const noexcept {
  if (!env_.log) return;
  try {
    env_.log(line);
  } catch (...) {
  }
}

PolicyPassResult Policy::RunPass(Device& device) noexcept {
  PolicyPassResult r;
  if (stopped() || !device.initialized()) return r;
  r.ran = true;
  // The engine's passes leave their state consistent when they throw
  // (store/page_store.h); the policy thread must not end with one.
  const auto failed = [&](StatusCode code, const char* what) {
    try {
      if (r.status.ok()) r.status = Status(code, what);
      Log(device.name() + ": policy pass: error: " + r.status.ToString());
    } catch (...) {  // no memory for the message either
    }
  };
  try {
    RunSteps(device, r);
  } catch (const std::bad_alloc&) {
    failed(StatusCode::kResourceExhausted, "out of memory");
  } catch (const std::exception& e) {
    failed(StatusCode::kIoError, e.what());
  } catch (...) {
    failed(StatusCode::kIoError, "unknown exception");
  }
  return r;
}

void Policy::KeepOnly(std::span<const std::shared_ptr<Device>> present) {
  std::erase_if(devices_, [present](const auto& entry) {
    return std::none_of(present.begin(), present.end(), [&](const auto& d) {
      return d->name() == entry.first && d->serial() == entry.second.serial;
    });
  });
}

void Policy::RunSteps(Device& device, PolicyPassResult& r) {
  DeviceState& state = devices_[device.name()];
  if (state.serial != device.serial()) state = DeviceState{device.serial()};
  // A device removed meanwhile is uninitialised: its later steps are
  // skipped rather than failed.
  TrainDictStep(device, state, r);
  if (device.initialized()) RecompressStep(device, state, r);
  if (device.initialized()) WritebackStep(device, state, r);
  if (device.initialized()) CompactStep(device, r);
  r.budget_left = device.writeback_limit();
  const RecompressResult& rc = r.recompress;
  std::string line = device.name() + ": policy pass: " +
                     std::to_string(rc.candidates) + " idle pages examined, " +
                     std::to_string(rc.recompressed) + " recompressed, " +
                     std::to_string(rc.bytes_saved()) + " bytes saved, " +
                     std::to_string(r.writeback.written) + " written back";
  if (options_.writeback_daily != UINT64_MAX && options_.writeback &&
      device.ShowBackingDev() != "none\n") {
    line += " (" + std::to_string(r.budget_left) + " pages of today's budget left)";
  }
  if (r.recompress_ended_early) line += "; recompression paused";
  if (r.writeback_skipped_busy) line += "; writeback skipped, clients busy";
  if (r.pages_compacted != 0) {
    line += "; " + std::to_string(r.pages_compacted) + " pages compacted";
  }
  if (!r.status.ok()) line += "; error: " + r.status.ToString();
  Log(line);
}

void Policy::TrainDictStep(Device& device, DeviceState& state,
                           PolicyPassResult& r) {
  if (options_.train_dict_pages == 0 ||
      !SupportsDictionary(device.algorithm())) {
    return;
  }
  // Read before the stats: a Reset and a new disksize after the stats
  // leave the failure below recorded for the store they were read from.
  const std::uint64_t serial = device.store_serial();
  const PageStoreStats st = device.Stats();
  if (st.dict_id != 0) return;
  // A failure on the store a Reset took away says nothing of this one.
  if (state.dict_failed_store != serial) state.dict_failed_at = 0;
  // Compressed pages in RAM: the primary's objects, less those kept raw.
  const std::uint64_t pages = st.priority_pages[0] > st.huge_pages
                                  ? st.priority_pages[0] - st.huge_pages
                                  : 0;
  if (pages < options_.train_dict_pages ||
      (state.dict_failed_at != 0 && pages < 2 * state.dict_failed_at)) {
    return;
  }
  auto info = device.TrainDictionary(std::to_string(options_.train_dict_size));
  if (!info.has_value()) {
    state.dict_failed_at = pages;
    state.dict_failed_store = serial;
    Log(device.name() + ": policy: train_dict at " + std::to_string(pages) +
        " pages failed (tried again at twice as many): " +
        info.error().ToString());
    return;
  }
  r.dict_trained = true;
  r.dict = *info;
}

void Policy::RecompressStep(Device& device, DeviceState& state,
                            PolicyPassResult& r) {
  if (!options_.recompress) return;
  if (Status s = device.MarkIdle(std::to_string(options_.idle_age_s));
      !s.ok()) {
    NoteError(device, r, s);
    return;
  }
  if (device.ShowRecompAlgorithm().empty()) {
    if (!state.said_no_recomp) {
      Log(device.name() + ": policy: no recomp_algorithm, recompression "
                          "skipped");
      state.said_no_recomp = true;
    }
    return;
  }
  const auto own = options_.device_recompress_params.find(device.name());
  const std::string& params = own != options_.device_recompress_params.end()
                                  ? own->second
                                  : options_.recompress_params;
  Pacer pacer(*this, device);
  const Status s =
      device.Recompress(RecompressTokens(params),
                        &r.recompress, [&pacer](const Device::StatsReader& stats) {
                          return pacer.Pace(stats);
                        });
  r.recompress_ended_early = pacer.ended_early();
  r.recompress_yielded = pacer.yielded();
  NoteError(device, r, s);
}

bool Policy::ClientsBusy(Device& device, std::uint64_t since_ns,
                         std::uint64_t ops_before) {
  return AboveRate(ClientPages(device.Stats()), ops_before,
                   env_.now_ns() - since_ns, options_.busy_pages);
}

void Policy::CompactStep(Device& device, PolicyPassResult& r) {
  if (options_.compact_min == UINT64_MAX || stopped()) return;
  // Clients, an operator's pass and a reset come first, as for the steps
  // before; and a reserve keeps the pages a compaction frees (nothing goes
  // back to the system), where the map compaction builds takes memory a
  // swap device may lack (docs/swap.md): `compact` by hand there.
  if (r.recompress_yielded || r.writeback_skipped_busy ||
      device.PassesWaiting() || device.preallocated()) {
    return;
  }
  const std::uint64_t pages = device.CompactablePages();
  // At least a page, whatever compact_min says: nothing to free, no pass.
  if (pages == 0 || pages * kPageSize < options_.compact_min) return;
  if (options_.busy_pages != 0) {
    const bool busy = BusyNow(device);
    if (stopped() || busy) return;
  }
  std::uint64_t freed = 0;
  if (Status s = device.Compact(&freed); !s.ok()) {
    NoteError(device, r, s);
    return;
  }
  r.pages_compacted = freed;
}

bool Policy::BusyNow(Device& device) {
  const std::uint64_t t0 = env_.now_ns();
  const std::uint64_t ops0 = ClientPages(device.Stats());
  env_.sleep_ns(kBusyWindowNs);
  return ClientsBusy(device, t0, ops0);
}

void Policy::WritebackStep(Device& device, DeviceState& state,
                           PolicyPassResult& r) {
  if (!options_.writeback || stopped()) return;
  if (device.ShowBackingDev() == "none\n") {
    if (!state.said_no_backing) {
      Log(device.name() + ": policy: no backing_dev, writeback skipped");
      state.said_no_backing = true;
    }
    return;
  }
  if (options_.writeback_daily != UINT64_MAX) {
    const std::uint64_t now = env_.now_ns();
    if (!state.day_started || now - state.day_start_ns >= kDayNs) {
      // Days stay 24 h apart from the first, however late a pass runs.
      state.day_start_ns =
          state.day_started
              ? state.day_start_ns + (now - state.day_start_ns) / kDayNs * kDayNs
              : now;
      state.day_started = true;
      const std::uint64_t pages = options_.writeback_daily / kPageSize;
      Status s = device.SetWritebackLimitEnable(true);
      if (s.ok()) s = device.SetWritebackLimit(pages);
      if (!s.ok()) {
        NoteError(device, r, s);
        return;
      }
      r.budget_rearmed = true;
      Log(device.name() + ": policy: daily writeback budget re-armed: " +
          std::to_string(pages) + " pages");
    }
    if (device.writeback_limit() == 0) return;  // spent for today
  }
  if (options_.busy_pages != 0) {
    const bool busy = BusyNow(device);
    if (stopped()) return;
    if (busy) {
      r.writeback_skipped_busy = true;
      return;
    }
  }
  if (Status s = device.MarkIdle(std::to_string(options_.writeback_age_s));
      !s.ok()) {
    NoteError(device, r, s);
    return;
  }
  const Status s = device.Writeback("idle", &r.writeback);
  // The budget running out mid-pass is zram's EIO "limit reached": the
  // day's work is done, not an error.
  // A unit is charged whole: the budget may stop the pass with a few
  // blocks left. An IO error that failed a page is an error all the same.
  const bool spent = r.writeback.limit_reached && r.writeback.failed == 0 &&
                     s.code() == StatusCode::kIoError;
  if (!spent) NoteError(device, r, s);
}

}  // namespace ztier
