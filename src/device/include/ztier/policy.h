// File: ztier/policy.h
//
// The post-processing policy: what the kernel leaves to userspace around
// zram's `idle`, `recompress` and `writeback` attributes
// (Documentation/admin-guide/blockdev/zram.rst), done by ztier itself. Each
// pass over one Device:
//   0. With train_dict_pages=N: once a device whose algorithm takes a
//      dictionary (zstd, lz4) holds N compressed pages and has none yet,
//      TrainDictionary(train_dict_size) (the train_dict attribute). A
//      failure is logged, and tried again once the device holds twice the
//      pages it had then.
//   1. MarkIdle(idle_age): pages not accessed for idle_age are IDLE.
//   2. Recompress("type=idle" + recompress_params) with the device's
//      secondary algorithms (recomp_algorithm), paced through the pass's
//      callback between batches (see "Budget and yielding").
//   3. MarkIdle(writeback_age), then Writeback("idle"), within the daily
//      writeback budget (see "Daily writeback budget"). A device without a
//      backing_dev skips this step (logged once).
//   4. Compact() when a compaction could free at least compact_min
//      (Device::CompactablePages; 0: any page): the holes that frees,
//      overwrites and writeback leave in the pool's zspages hold their
//      pages until then, as zsmalloc's do until its shrinker or zram's
//      `compact` attribute compacts (mm/zsmalloc.c, zs_shrinker_scan). A
//      recompression that changed anything has compacted already (step
//      2), except on a device with a reserve. Skipped, as writeback is,
//      while clients are busy, when step 2 or 3 gave way to them, or to
//      an operator's pass or a reset (not when step 2 ran for its whole
//      period: that is no reason), and on a device with a reserve
//      (DeviceDefaults::prealloc), which keeps the pages freed. Once begun
//      it runs to its end (Pool::Compact holds each class lock for a
//      bounded number of moves).
// A device with no recomp_algorithm skips step 2 (logged once). Each pass
// logs one line: pages examined (the recompression candidates), pages
// recompressed, bytes saved, pages written back, and pages compacted when
// step 4 ran.
//
//   auto options = ztier::ParsePolicyOptions("period=60s idle_age=10m "
//       "recompress_cpu=25% writeback_age=1h writeback_daily=400M");
//   ztier::Policy policy(*options, {});
//   ztier::PolicyPassResult r = policy.RunPass(device);
//
// Budget and yielding. The recompression pass calls the policy between
// batches (RecompressRequest::pace); the policy then, in this order:
//   - ends the pass if Stop() was called, the pass has run for a period,
//     or an operator's pass, a Reset or a removal waits for it
//     (Device::PassesWaiting; looked at again after each pause);
//   - yields to clients: from the store's stores + loads counters (read
//     through the reader Device::Recompress hands it, without taking the
//     device's lock again) it takes
//     the clients' page rate since the previous call; while that is above
//     busy_pages (pages/s) it sleeps busy_pause and looks again, and ends
//     the pass when clients stay busy for busy_give_up;
//   - recompress_rate=N: sleeps until the pages the pass has tried (the
//     store's recompress_attempts, counted batch by batch) are within N
//     per second of the pass's elapsed time;
//   - recompress_cpu=P%: sleeps until the pass thread's CPU time is within
//     P% of the pass's elapsed time (a duty cycle of one core). With the
//     parallel batch backend its workers' CPU time is not counted.
//   For both, the elapsed time counts from the pass's first batch: time it
//   waited for another pass (an operator's writeback) is not budget.
// So a pass never holds a slot lock across a pause (the engine holds each
// only to swap one slot), and client IO waits for at most one batch.
// Writeback is not paced: it is skipped in a pass whose clients are busy
// at its start, and bounded by the daily budget.
//
// Daily writeback budget. As zram.rst's example of a daily 400 MB
// writeback_limit re-armed by a userspace job, the policy sets
// writeback_limit_enable=1 and writeback_limit=writeback_daily/4096 on a
// device's first pass and every 24 h after (on the policy's clock,
// CLOCK_BOOTTIME by default). While
// the policy runs it owns writeback_limit: a value set by hand lasts until
// the next re-arm. writeback_daily=none leaves both attributes alone.
//
// Time comes from PolicyEnv: a test drives passes with a fake clock and
// sleeper (and gives the devices' stores the same clock through
// DeviceDefaults::clock).
//
// Thread safety: one Policy runs passes on one thread at a time; Stop()
// may be called from any thread. The devices may serve IO meanwhile.
#ifndef ZTIER_POLICY_H_
#define ZTIER_POLICY_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "ztier/device.h"
#include "ztier/status.h"

namespace ztier {

inline constexpr std::uint64_t kNsPerSecond = 1'000'000'000;

struct PolicyOptions {
  std::uint64_t period_s = 60;       // period=: seconds between passes
  std::uint32_t idle_age_s = 600;    // idle_age=: A
  bool recompress = true;            // recompress=on|off
  // recompress_rate=: pages tried per second, 0: no rate limit.
  std::uint64_t recompress_rate = 0;
  // recompress_cpu=: percent of one core, 1..100; 0: no CPU limit. With
  // neither limit set, the default is 25% of a core.
  unsigned recompress_cpu = 0;
  // Further `recompress` tokens (algo=, priority=, threshold=, max_pages=),
  // from recompress_algo= / recompress_threshold= / recompress_max= or a
  // configuration file's recompress_params. Never a type= (the policy's is
  // type=idle).
  std::string recompress_params;
  // A device's own `recompress` tokens, by device name, in place of
  // recompress_params (a configuration file's per-device
  // recompress_params); a type= among them replaces type=idle.
  std::map<std::string, std::string> device_recompress_params;
  bool writeback = true;             // writeback=on|off
  std::uint32_t writeback_age_s = 3600;  // writeback_age=: B
  // writeback_daily=: bytes a day; UINT64_MAX ("none"): no budget.
  std::uint64_t writeback_daily = 400ull << 20;
  // busy_pages=: client pages/s (stores + loads) above which the policy
  // yields; 0: never yields.
  std::uint64_t busy_pages = 20000;
  std::uint64_t busy_pause_ms = 100;     // busy_pause=
  std::uint64_t busy_give_up_ms = 2000;  // busy_give_up=
  // train_dict_pages=: compressed pages a device holds before the policy
  // trains its dictionary (step 0); 0: never.
  std::uint64_t train_dict_pages = 0;
  std::uint64_t train_dict_size = 16 << 10;  // train_dict_size=: bytes
  // compact_min=: bytes a compaction could free before step 4 compacts;
  // UINT64_MAX ("none"): never.
  std::uint64_t compact_min = 1 << 20;
};

// Parses the policy's tokens, separated by spaces: period=, idle_age=,
// writeback_age=, busy_pause=, busy_give_up= take a duration (a number
// with an optional s, m, h or d suffix; plain: seconds; busy_pause and
// busy_give_up also ms); recompress= and writeback= on|off (yes/no, 1/0);
// recompress_rate= and busy_pages= a count; recompress_cpu= a percentage
// 1..100 with an optional '%'; recompress_algo=NAME and
// recompress_priority=N (1..3) pass on as algo= and priority=;
// recompress_threshold= and writeback_daily= a size (ParseSize; "none":
// no budget); recompress_max= a count (max_pages); train_dict_pages= a
// count and train_dict_size= a size (1K..1M); compact_min= a size or
// none. Tokens not given keep
// PolicyOptions' defaults. kInvalidArgument naming the token for an
// unknown key, a token without '=' or a value, a bad value, period=0,
// writeback_daily= below 4K but not 0, recompress_rate with
// recompress_cpu, busy_pause= outside 1ms..60s, busy_give_up= over 1h,
// recompress_algo= naming no codec, and recompress_threshold= of 4096 or
// more (each would fail every pass).
Result<PolicyOptions> ParsePolicyOptions(std::string_view tokens);

// The policy's time. Null members: the real ones (CLOCK_BOOTTIME, so that
// a day of the budget counts suspend too; a plain sleep;
// CLOCK_THREAD_CPUTIME_ID).
struct PolicyEnv {
  std::function<std::uint64_t()> now_ns;
  std::function<void(std::uint64_t ns)> sleep_ns;
  std::function<std::uint64_t()> thread_cpu_ns;
  // One line per pass and per notice ("zram0: policy: ..."); null: none.
  std::function<void(const std::string&)> log;
};

// What one pass did.
struct PolicyPassResult {
  bool ran = false;          // the device was initialised
  bool dict_trained = false;  // step 0 trained a dictionary (dict)
  DictionaryInfo dict;
  RecompressResult recompress;
  bool recompress_ended_early = false;  // pace ended it (stop, busy, period)
  bool recompress_yielded =
      false;  // ...for stop, busy clients or a waiting pass
  WritebackResult writeback;
  bool writeback_skipped_busy = false;
  std::uint64_t pages_compacted = 0;  // by step 4
  bool budget_rearmed = false;
  std::uint64_t budget_left = 0;  // writeback_limit after the pass
  Status status;  // the first unexpected error of a step (the rest ran)
};

class Policy {
 public:
  Policy(PolicyOptions options, PolicyEnv env);
  Policy(const Policy&) = delete;
  Policy& operator=(const Policy&) = delete;

  const PolicyOptions& options() const { return options_; }

  // One pass over `device` (the steps above). An uninitialised device is
  // left alone (ran false). Does not throw: a step that runs out of memory
  // (std::bad_alloc) ends the pass with kResourceExhausted in status, as
  // any other exception does with kIoError; the device is left as the
  // engine's own passes leave it then (consistent), and the next pass tries
  // again.
  PolicyPassResult RunPass(Device& device) noexcept;

  // Ends a pass in progress at its next batch, and every later pass at
  // once. Any thread.
  void Stop() { stop_.store(true); }
  bool stopped() const { return stop_.load(); }

  // Forgets what it keeps for the devices not in `present` (the registry's
  // List()), so that devices removed leave nothing behind. Same thread as
  // RunPass.
  void KeepOnly(std::span<const std::shared_ptr<Device>> present);
  // Devices it keeps state for: each it ran a pass on and did not forget.
  std::size_t devices_known() const { return devices_.size(); }

 private:
  // Per device, by name: when its budget day began, what was logged once.
  // Started afresh for a device of another serial() (removed and added
  // again under the name). The budget's day outlives a Reset, as
  // writeback_limit does.
  struct DeviceState {
    std::uint64_t serial = 0;
    bool day_started = false;
    std::uint64_t day_start_ns = 0;
    bool said_no_recomp = false;
    bool said_no_backing = false;
    // Pages when training last failed, on the store of store_serial()
    // dict_failed_store: another store (a Reset) starts afresh.
    std::uint64_t dict_failed_at = 0;
    std::uint64_t dict_failed_store = 0;
  };
  class Pacer;  // policy.cc

  void TrainDictStep(Device& device, DeviceState& state, PolicyPassResult& r);
  void RecompressStep(Device& device, DeviceState& state,
                      PolicyPassResult& r);
  void WritebackStep(Device& device, DeviceState& state, PolicyPassResult& r);
  void CompactStep(Device& device, PolicyPassResult& r);
  bool ClientsBusy(Device& device, std::uint64_t since_ns,
                   std::uint64_t ops_before);
  // Whether clients are busy over one window from now (sleeps it).
  bool BusyNow(Device& device);
  void RunSteps(Device& device, PolicyPassResult& r);
  // Never throws: a line that cannot be made or written is dropped.
  void Log(const std::string& line) const noexcept;

  const PolicyOptions options_;
  PolicyEnv env_;
  std::atomic<bool> stop_{false};
  std::map<std::string, DeviceState> devices_;
};

}  // namespace ztier

#endif  // ZTIER_POLICY_H_
