// device_stress_test.cc: a randomized stress of one Device, as the NBD and
// ublk front ends and `ztier serve`'s control socket drive it at once.
//
// Writer threads own disjoint page ranges and keep a shadow of them: every
// read must give the last data written (zeros after a discard), whatever the
// control thread's writeback, idle marking, recompression, compaction,
// dictionary training and mem_limit changes do underneath. A write refused
// for memory (mem_limit) leaves its range undefined until it is written
// again, as the contract says. At the end the counters (mm_stat, bd_stat,
// block_state, Stats) must agree with the shadow.
//
// The run is seeded (the seed is printed; ZTIER_STRESS_SEED replays one) and
// bounded: about 5 s in all by default, ZTIER_STRESS_SECONDS for a longer
// hunt (per configuration).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <functional>
#include <mutex>
#include <optional>
#include <random>
#include <shared_mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "testing/nothing_stored.h"
#include "testing/test_util.h"
#include "testing/watchdog.h"
#include "ztier/device.h"

namespace ztier {
namespace {

using Page = std::vector<std::byte>;
using Clock = std::chrono::steady_clock;

constexpr std::uint64_t kPageMask = kPageSize - 1;
constexpr int kWriters = 3;
constexpr std::uint64_t kPagesPerWriter = 64;  // a multiple of 16 (units)

double StressSeconds(double default_seconds) {
  const char* env = std::getenv("ZTIER_STRESS_SECONDS");
  return env != nullptr ? std::atof(env) : default_seconds;
}

std::uint64_t StressSeed() {
  const char* env = std::getenv("ZTIER_STRESS_SEED");
  if (env != nullptr) return std::strtoull(env, nullptr, 0);
  return std::random_device{}() ^
         static_cast<std::uint64_t>(Clock::now().time_since_epoch().count());
}

// Page contents of several kinds: corpus pages (compress well), text,
// random bytes (incompressible), same-filled (zero or a pattern).
class PageMaker {
 public:
  PageMaker() : corpus_(testing::TestCorpus("anon-python")) {}

  void Fill(std::mt19937_64& rng, std::byte* out, std::size_t n) const {
    switch (rng() % 8) {
      case 0:
      case 1:
      case 2: {  // corpus
        const std::size_t p = rng() % corpus_.size();
        const std::size_t off = rng() % kPageSize;
        for (std::size_t i = 0; i < n; ++i) {
          out[i] = corpus_.page((p + (off + i) / kPageSize) % corpus_.size())
                       [(off + i) % kPageSize];
        }
        return;
      }
      case 3: {  // text
        static const char* const kWords[] = {
            "page ", "zram ", "store ", "idle ", "huge ", "slot ",
            "codec ", "memory ", "swap ", "pool ", "write ", "read "};
        std::size_t i = 0;
        while (i < n) {
          const char* w = kWords[rng() % std::size(kWords)];
          for (; *w != 0 && i < n; ++w, ++i) out[i] = static_cast<std::byte>(*w);
        }
        return;
      }
      case 4:
      case 5: {  // random
        for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<std::byte>(rng());
        return;
      }
      case 6:  // zeros
        std::memset(out, 0, n);
        return;
      default: {  // a repeated 8-byte word
        const std::uint64_t w = rng();
        for (std::size_t i = 0; i < n; ++i) {
          out[i] = static_cast<std::byte>(w >> (8 * (i % 8)));
        }
        return;
      }
    }
  }

 private:
  const corpus::PageSet& corpus_;
};

struct Config {
  const char* name;
  DeviceDefaults defaults;
  bool recompress = false;
  bool compressed_writeback = false;
  double share = 1.0;  // of the default run time
};

// What one writer knows of its pages.
struct Shadow {
  std::vector<Page> data;
  std::vector<bool> known;      // false: a refused write left it undefined
  std::vector<bool> allocated;  // a slot is in use (written, not discarded)
};

bool SameFilled(const Page& p) {
  std::uint64_t w0;
  std::memcpy(&w0, p.data(), 8);
  for (std::size_t i = 8; i < kPageSize; i += 8) {
    std::uint64_t w;
    std::memcpy(&w, p.data() + i, 8);
    if (w != w0) return false;
  }
  return true;
}

std::string Hex(const std::byte* p, std::size_t n) {
  std::string s;
  char buf[4];
  for (std::size_t i = 0; i < n; ++i) {
    std::snprintf(buf, sizeof(buf), "%02x", static_cast<unsigned>(p[i]));
    s += buf;
  }
  return s;
}

struct Failures {
  std::mutex mu;
  std::vector<std::string> lines;
  std::atomic<bool> any{false};
  void Add(std::string s) {
    std::lock_guard l(mu);
    if (lines.size() < 20) lines.push_back(std::move(s));
    any = true;
  }
};

// Set while the control thread waits to reset the device.
std::atomic<bool> resetting{false};

class Writer {
 public:
  Writer(Device& dev, const PageMaker& maker, int id, std::uint64_t seed,
         Failures& failures)
      : dev_(dev),
        maker_(maker),
        id_(id),
        first_(id * kPagesPerWriter),
        rng_(seed),
        failures_(failures) {
    shadow_.data.assign(kPagesPerWriter, Page(kPageSize));
    shadow_.known.assign(kPagesPerWriter, true);
    shadow_.allocated.assign(kPagesPerWriter, false);
  }

  std::uint64_t ops() const { return ops_; }
  std::uint64_t refused() const { return refused_; }
  Shadow& shadow() { return shadow_; }

  // Each step (its IO and its shadow's update) holds `reset_mu` shared;
  // the control thread's Reset() takes it exclusively and clears the
  // shadows.
  void Run(const std::atomic<bool>& stop, std::shared_mutex& reset_mu) {
    while (!stop.load(std::memory_order_relaxed) && !failures_.any) {
      // (rwlocks may prefer readers: let a waiting reset in.)
      while (resetting.load(std::memory_order_relaxed)) std::this_thread::yield();
      std::shared_lock l(reset_mu);
      Step();
    }
  }

  // The device was reset: everything reads as zeros, nothing is allocated.
  void Cleared() {
    for (std::uint64_t p = 0; p < kPagesPerWriter; ++p) {
      Discarded(p);
      shadow_.known[p] = true;
    }
  }

  // Verifies every page of the range (after the run).
  void VerifyAll(const char* when) {
    final_ = true;
    for (std::uint64_t i = 0; i < kPagesPerWriter; ++i) VerifyPages(i, 1, when);
  }

  // Rewrites every undefined page whole (after the run, with no limit).
  void SettleUnknown() {
    for (std::uint64_t i = 0; i < kPagesPerWriter; ++i) {
      if (shadow_.known[i]) continue;
      Page p(kPageSize);
      maker_.Fill(rng_, p.data(), kPageSize);
      const Status s = dev_.Write((first_ + i) * kPageSize, p);
      if (!s.ok()) {
        failures_.Add("settle write of page " + std::to_string(first_ + i) +
                      ": " + s.ToString());
        continue;
      }
      shadow_.data[i] = p;
      shadow_.known[i] = true;
      shadow_.allocated[i] = true;
    }
  }

 private:
  // A byte range [lo, hi) of this writer's pages (relative bytes).
  void PickRange(std::uint64_t* lo, std::uint64_t* hi, bool pages_only) {
    const std::uint64_t total = kPagesPerWriter * kPageSize;
    const std::uint64_t n_pages = 1 + rng_() % (rng_() % 4 == 0 ? 17 : 3);
    if (pages_only) {
      const std::uint64_t p = rng_() % kPagesPerWriter;
      *lo = p * kPageSize;
      *hi = std::min(total, (p + n_pages) * kPageSize);
      // Sometimes align to a unit (16 pages), so that units form.
      if (rng_() % 3 == 0) {
        const std::uint64_t u = (rng_() % (kPagesPerWriter / 16)) * 16;
        *lo = u * kPageSize;
        *hi = *lo + (rng_() % 2 == 0 ? 16 : 4 + rng_() % 13) * kPageSize;
      }
      return;
    }
    *lo = rng_() % total;
    const std::uint64_t len =
        rng_() % 2 == 0 ? 1 + rng_() % kPageSize : 1 + rng_() % (n_pages * kPageSize);
    *hi = std::min(total, *lo + len);
  }

  void MarkUnknown(std::uint64_t lo, std::uint64_t hi) {
    for (std::uint64_t p = lo / kPageSize; p < (hi + kPageMask) / kPageSize; ++p) {
      shadow_.known[p] = false;
    }
  }

  // The shadow after bytes [lo, hi) became `data` (null: zeros).
  void Apply(std::uint64_t lo, std::uint64_t hi, const std::byte* data) {
    for (std::uint64_t pos = lo; pos < hi;) {
      const std::uint64_t p = pos / kPageSize;
      const std::uint64_t in = pos % kPageSize;
      const std::uint64_t n = std::min(kPageSize - in, hi - pos);
      if (data != nullptr) {
        std::memcpy(shadow_.data[p].data() + in, data + (pos - lo), n);
      } else {
        std::memset(shadow_.data[p].data() + in, 0, n);
      }
      shadow_.allocated[p] = true;
      pos += n;
    }
  }

  void Discarded(std::uint64_t p) {
    std::fill(shadow_.data[p].begin(), shadow_.data[p].end(), std::byte{0});
    shadow_.allocated[p] = false;
  }

  void Failed(const char* what, std::uint64_t lo, std::uint64_t hi,
              const Status& s) {
    // Between a reset and its new disksize: refused, nothing changed.
    if (s.code() == StatusCode::kFailedPrecondition) return;
    if (s.code() == StatusCode::kResourceExhausted) {
      ++refused_;
      MarkUnknown(lo, hi);
      return;
    }
    failures_.Add(std::string("writer ") + std::to_string(id_) + ": " + what +
                  " [" + std::to_string(first_ * kPageSize + lo) + ", " +
                  std::to_string(first_ * kPageSize + hi) +
                  "): " + s.ToString());
    MarkUnknown(lo, hi);
  }

  void VerifyPages(std::uint64_t p, std::uint64_t n, const char* when) {
    Page got(n * kPageSize);
    const Status s = dev_.Read((first_ + p) * kPageSize, got);
    if (s.code() == StatusCode::kFailedPrecondition && !final_) return;
    if (!s.ok()) {
      failures_.Add(std::string(when) + ": read of pages " +
                    std::to_string(first_ + p) + "+" + std::to_string(n) +
                    ": " + s.ToString());
      return;
    }
    for (std::uint64_t i = 0; i < n; ++i) {
      if (!shadow_.known[p + i]) continue;
      const std::byte* g = got.data() + i * kPageSize;
      const std::byte* w = shadow_.data[p + i].data();
      if (std::memcmp(g, w, kPageSize) != 0) {
        std::size_t at = 0;
        while (g[at] == w[at]) ++at;
        failures_.Add(std::string(when) + ": page " +
                      std::to_string(first_ + p + i) + " differs at byte " +
                      std::to_string(at) + ": got " + Hex(g + at, std::min<std::size_t>(16, kPageSize - at)) +
                      " want " + Hex(w + at, std::min<std::size_t>(16, kPageSize - at)) +
                      "; block_state: " +
                      dev_.ShowBlockState(first_ + p + i, 1));
      }
    }
  }

  void Step() {
    ++ops_;
    const std::uint64_t base = first_ * kPageSize;
    const unsigned op = rng_() % 100;
    std::uint64_t lo, hi;
    if (op < 30) {  // Write, whole pages
      PickRange(&lo, &hi, true);
      Page buf(hi - lo);
      for (std::uint64_t o = 0; o < buf.size(); o += kPageSize) {
        maker_.Fill(rng_, buf.data() + o, kPageSize);
      }
      const bool batched = rng_() % 2 == 0;
      const Status s = batched ? dev_.WritePages(base + lo, buf)
                               : dev_.Write(base + lo, buf);
      if (s.ok()) {
        Apply(lo, hi, buf.data());
        for (std::uint64_t p = lo / kPageSize; p < hi / kPageSize; ++p) {
          shadow_.known[p] = true;
        }
      } else {
        Failed(batched ? "WritePages" : "Write", lo, hi, s);
      }
    } else if (op < 45) {  // Write, any bytes
      PickRange(&lo, &hi, false);
      Page buf(hi - lo);
      for (std::uint64_t o = 0; o < buf.size(); o += kPageSize) {
        maker_.Fill(rng_, buf.data() + o,
                    std::min<std::uint64_t>(kPageSize, buf.size() - o));
      }
      const bool batched = rng_() % 2 == 0;
      const Status s = batched ? dev_.WritePages(base + lo, buf)
                               : dev_.Write(base + lo, buf);
      if (s.ok()) {
        Apply(lo, hi, buf.data());
        for (std::uint64_t p = (lo + kPageMask) / kPageSize;
             p < hi / kPageSize; ++p) {
          shadow_.known[p] = true;
        }
      } else {
        Failed(batched ? "WritePages (bytes)" : "Write (bytes)", lo, hi, s);
      }
    } else if (op < 75) {  // Read and verify
      const std::uint64_t p = rng_() % kPagesPerWriter;
      const std::uint64_t n =
          std::min<std::uint64_t>(kPagesPerWriter - p, 1 + rng_() % 8);
      if (rng_() % 4 == 0) {  // a sub-page read
        const std::uint64_t in = rng_() % kPageSize;
        const std::uint64_t len = 1 + rng_() % (kPageSize - in);
        Page got(len);
        const Status s = dev_.Read(base + p * kPageSize + in, got);
        if (s.code() == StatusCode::kFailedPrecondition) return;
        if (!s.ok()) {
          failures_.Add("sub-page read: " + s.ToString());
        } else if (shadow_.known[p] &&
                   std::memcmp(got.data(), shadow_.data[p].data() + in, len) !=
                       0) {
          failures_.Add("sub-page read of page " + std::to_string(first_ + p) +
                        " differs; block_state: " +
                        dev_.ShowBlockState(first_ + p, 1));
        }
      } else {
        VerifyPages(p, n, "read");
      }
    } else if (op < 85) {  // Trim (any bytes: whole pages inside go)
      PickRange(&lo, &hi, rng_() % 2 == 0);
      const Status s = dev_.Trim(base + lo, hi - lo);
      if (s.ok()) {
        for (std::uint64_t p = (lo + kPageMask) / kPageSize;
             p < hi / kPageSize; ++p) {
          Discarded(p);
          shadow_.known[p] = true;
        }
      } else {
        Failed("Trim", lo, hi, s);
      }
    } else if (op < 95) {  // WriteZeroes
      PickRange(&lo, &hi, rng_() % 2 == 0);
      const bool no_hole = rng_() % 2 == 0;
      const Status s = dev_.WriteZeroes(base + lo, hi - lo, no_hole);
      if (s.ok()) {
        Apply(lo, hi, nullptr);
        for (std::uint64_t p = (lo + kPageMask) / kPageSize;
             p < hi / kPageSize; ++p) {
          if (!no_hole) Discarded(p);
          shadow_.known[p] = true;
        }
      } else {
        Failed("WriteZeroes", lo, hi, s);
      }
    } else {  // state queries of its own pages
      std::vector<SlotState> st(kPagesPerWriter);
      const Status s = dev_.PageStates(first_, st);
      if (s.code() == StatusCode::kFailedPrecondition) return;
      if (!s.ok()) {
        failures_.Add("PageStates: " + s.ToString());
        return;
      }
      for (std::uint64_t p = 0; p < kPagesPerWriter; ++p) {
        if (!shadow_.known[p]) continue;
        const bool zero = !shadow_.allocated[p] ||
                          std::all_of(shadow_.data[p].begin(),
                                      shadow_.data[p].end(),
                                      [](std::byte b) { return b == std::byte{0}; });
        // kZero may stand for any zero page; kData only for an allocated one.
        if (st[p] == SlotState::kData && !shadow_.allocated[p]) {
          failures_.Add("PageStates: page " + std::to_string(first_ + p) +
                        " is data but was discarded");
        }
        if (st[p] != SlotState::kData && !zero) {
          failures_.Add("PageStates: page " + std::to_string(first_ + p) +
                        " holds data but is not kData");
        }
      }
      (void)dev_.ReadMayWait(base, kPagesPerWriter * kPageSize);
      (void)dev_.Flush();
    }
  }

  Device& dev_;
  const PageMaker& maker_;
  const int id_;
  const std::uint64_t first_;
  std::mt19937_64 rng_;
  Failures& failures_;
  Shadow shadow_;
  std::uint64_t ops_ = 0;
  std::uint64_t refused_ = 0;
  bool final_ = false;  // the device must be initialised
};

// The control thread: what an operator and the policy do meanwhile.
void Control(Device& dev, const Config& cfg, std::uint64_t seed,
             const std::atomic<bool>& stop, Failures& failures,
             std::map<std::string, int>& counts, std::shared_mutex& reset_mu,
             const std::function<void()>& cleared,
             const std::string& backing) {
  std::mt19937_64 rng(seed);
  Clock::time_point t0;
  auto note = [&](const std::string& what, const Status& s) {
    ++counts[what + (s.ok() ? "" : " -> " + std::string(StatusCodeName(s.code())))];
    const int ms = static_cast<int>(
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0)
            .count());
    int& slowest = counts["slowest ms: " + what];
    slowest = std::max(slowest, ms);
  };
  while (!stop.load(std::memory_order_relaxed) && !failures.any) {
    const unsigned op = rng() % 100;
    t0 = Clock::now();
    if (op < 10) {
      note("idle all", dev.MarkIdle("all"));
    } else if (op < 14) {
      note("idle age", dev.MarkIdle(std::to_string(rng() % 3)));
    } else if (op < 30) {
      static const char* const kModes[] = {
          "idle", "huge", "huge_idle", "incompressible", "type=idle"};
      std::string tokens;
      const std::uint64_t n = kWriters * kPagesPerWriter;
      switch (rng() % 4) {
        case 0: tokens = kModes[rng() % std::size(kModes)]; break;
        case 1: {
          const std::uint64_t a = rng() % n, b = a + rng() % (n - a);
          tokens = "page_indexes=" + std::to_string(a) + "-" + std::to_string(b);
          break;
        }
        case 2: tokens = "page_index=" + std::to_string(rng() % n); break;
        default: {
          const std::uint64_t a = rng() % n, b = a + rng() % (n - a);
          tokens = std::string(kModes[rng() % std::size(kModes)]) +
                   " page_indexes=" + std::to_string(a) + "-" +
                   std::to_string(b);
          break;
        }
      }
      WritebackResult r;
      const Status s = dev.Writeback(tokens, &r);
      note("writeback", s);
      if (!s.ok() && s.code() != StatusCode::kIoError &&
          s.code() != StatusCode::kResourceExhausted) {
        failures.Add("writeback '" + tokens + "': " + s.ToString());
      }
      if (s.code() == StatusCode::kIoError && !r.limit_reached) {
        failures.Add("writeback '" + tokens + "': " + s.ToString());
      }
    } else if (op < 42 && cfg.recompress) {
      static const char* const kTokens[] = {
          "", "type=idle", "type=huge", "type=huge_idle", "max_pages=7",
          "threshold=1000", "algo=zstd", "priority=1", "type=idle priority=2"};
      const char* t = kTokens[rng() % std::size(kTokens)];
      RecompressResult r;
      const Status s = dev.Recompress(t, &r);
      note("recompress", s);
      if (!s.ok() && s.code() != StatusCode::kResourceExhausted) {
        failures.Add(std::string("recompress '") + t + "': " + s.ToString());
      }
    } else if (op < 55) {
      std::uint64_t pages = 0;
      note("compact", dev.Compact(&pages));
    } else if (op < 68) {
      // mem_limit: none, generous, or tight enough to refuse stores.
      std::uint64_t limit = 0;
      const PageStoreStats st = dev.Stats();
      switch (rng() % 4) {
        case 0: limit = 0; break;
        case 1: limit = 64u << 20; break;
        default:
          limit = st.mem_used_total * (60 + rng() % 60) / 100;
          break;
      }
      note("mem_limit", dev.SetMemLimit(limit));
    } else if (op < 71) {
      note("mem_used_max", dev.ResetMemUsedMax("0"));
    } else if (op < 76) {
      switch (rng() % 3) {
        case 0: note("wb_limit_enable", dev.SetWritebackLimitEnable(rng() % 2 == 0)); break;
        case 1: note("wb_limit", dev.SetWritebackLimit(rng() % 64)); break;
        default: note("wb_batch", dev.SetWritebackBatchSize(1 + rng() % 64)); break;
      }
    } else if (op < 78) {
      const auto info = dev.TrainDictionary(rng() % 2 == 0 ? "" : "4K");
      note("train_dict", info.has_value() ? Status::Ok() : info.error());
    } else if (op < 80) {
      // Reset (refused while the foreign reader is attached), then
      // initialised again while IO goes on.
      Status s;
      {
        resetting = true;
        std::unique_lock l(reset_mu);
        resetting = false;
        s = dev.Reset();
        if (s.ok()) cleared();
      }
      note("reset", s);
      if (s.ok()) {
        Status b = dev.SetBackingDev(backing);
        if (b.ok()) b = dev.SetDisksize(kWriters * kPagesPerWriter * kPageSize);
        note("re-init", b);
        if (!b.ok()) failures.Add("re-init after reset: " + b.ToString());
      } else if (s.code() != StatusCode::kBusy) {
        failures.Add("reset: " + s.ToString());
      }
    } else if (op < 81) {
      // Not allowed after init: must be refused, and change nothing.
      const Status s = rng() % 2 == 0 ? dev.SetCompAlgorithm("zstd")
                                      : dev.SetCompressedWriteback(true);
      if (s.code() != StatusCode::kBusy) {
        failures.Add("a store refused after init gave " + s.ToString());
      }
    } else {
      // Shows, as the metrics scrape and `ztier status` read them.
      (void)dev.ShowMmStat();
      (void)dev.ShowIoStat();
      (void)dev.ShowDebugStat();
      (void)dev.ShowBdStat();
      (void)dev.ShowBlockState();
      (void)dev.CompactablePages();
      (void)dev.Stats();
      (void)dev.PassesWaiting();
      (void)dev.ShowCompAlgorithm();
      (void)dev.ShowRecompAlgorithm();
      (void)dev.ShowBackingDev();
      ++counts["shows"];
    }
    if (rng() % 4 == 0) std::this_thread::sleep_for(std::chrono::microseconds(rng() % 500));
  }
}

// A thread reading across every writer's pages (unverified: they change
// under it), to race loads against everything else.
void ForeignReader(Device& dev, std::uint64_t seed,
                   const std::atomic<bool>& stop, Failures& failures) {
  std::mt19937_64 rng(seed);
  Page buf(8 * kPageSize);
  const std::uint64_t total = kWriters * kPagesPerWriter * kPageSize;
  std::optional<Device::ClientRef> client;
  while (!stop.load(std::memory_order_relaxed) && !failures.any) {
    if (rng() % 64 == 0) {  // a client attaches or goes
      if (client.has_value()) {
        client.reset();
      } else {
        auto ref = dev.Attach();
        if (ref.has_value()) client.emplace(std::move(*ref));
      }
    }
    const std::uint64_t off = rng() % total;
    const std::uint64_t len = std::min<std::uint64_t>(total - off, 1 + rng() % buf.size());
    const Status s = dev.Read(off, std::span<std::byte>(buf.data(), len));
    if (!s.ok() && s.code() != StatusCode::kFailedPrecondition) failures.Add("foreign read: " + s.ToString());
  }
}

std::map<char, std::uint64_t> FlagCounts(const std::string& block_state,
                                         std::uint64_t* lines,
                                         std::uint64_t* ram_objects,
                                         std::uint64_t* ram_recompressed) {
  std::map<char, std::uint64_t> m;
  *lines = *ram_objects = *ram_recompressed = 0;
  std::istringstream in(block_state);
  for (std::string line; std::getline(in, line);) {
    ++*lines;
    const std::string flags = line.substr(line.rfind(' ') + 1);
    for (char c : flags) {
      if (c != '.') ++m[c];
    }
    if (flags.find('s') == std::string::npos &&
        flags.find('w') == std::string::npos) {
      ++*ram_objects;
      if (flags.find('r') != std::string::npos) ++*ram_recompressed;
    }
  }
  return m;
}

void RunStress(const Config& cfg) {
  const std::uint64_t seed = StressSeed();
  const double seconds = StressSeconds(5.0 * cfg.share);
  std::printf("[ stress ] %s: seed %llu (ZTIER_STRESS_SEED=%llu to replay), "
              "%.1f s\n",
              cfg.name, static_cast<unsigned long long>(seed),
              static_cast<unsigned long long>(seed), seconds);
  std::fflush(stdout);
  SCOPED_TRACE("ZTIER_STRESS_SEED=" + std::to_string(seed));

  testing::ScopedTempDir tmp;
  const PageMaker maker;
  Device dev("zram0", cfg.defaults);
  ASSERT_OK(dev.SetBackingDev(tmp.File("backing")));
  if (cfg.compressed_writeback) ASSERT_OK(dev.SetCompressedWriteback(true));
  ASSERT_OK(dev.SetDisksize(kWriters * kPagesPerWriter * kPageSize));

  Failures failures;
  std::vector<std::unique_ptr<Writer>> writers;
  for (int i = 0; i < kWriters; ++i) {
    writers.push_back(std::make_unique<Writer>(dev, maker, i,
                                               seed * 131 + i, failures));
  }
  std::map<std::string, int> counts;
  {
    const testing::Watchdog watchdog("device stress run", std::chrono::seconds(
        static_cast<long>(seconds) + 120));
    std::atomic<bool> stop{false};
    std::shared_mutex reset_mu;
    const auto cleared = [&] {
      for (auto& w : writers) w->Cleared();
    };
    std::vector<std::thread> threads;
    for (auto& w : writers) {
      threads.emplace_back([&w, &stop, &reset_mu] { w->Run(stop, reset_mu); });
    }
    threads.emplace_back([&] {
      Control(dev, cfg, seed * 131 + 100, stop, failures, counts, reset_mu,
              cleared, tmp.File("backing"));
    });
    threads.emplace_back(
        [&] { ForeignReader(dev, seed * 131 + 200, stop, failures); });
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
    stop = true;
    for (auto& t : threads) t.join();
  }
  std::uint64_t ops = 0, refused = 0;
  for (auto& w : writers) {
    ops += w->ops();
    refused += w->refused();
  }
  std::printf("[ stress ] %s: %llu writer ops (%llu refused for memory); "
              "control:",
              cfg.name, static_cast<unsigned long long>(ops),
              static_cast<unsigned long long>(refused));
  for (const auto& [k, v] : counts) std::printf(" %s %d;", k.c_str(), v);
  std::printf("\n");
  std::fflush(stdout);
  for (const std::string& f : failures.lines) ADD_FAILURE() << f;
  if (failures.any) return;

  // Quiesced: no limit, undefined pages rewritten, every page checked.
  ASSERT_OK(dev.SetMemLimit(0));
  for (auto& w : writers) w->SettleUnknown();
  for (auto& w : writers) w->VerifyAll("final read");
  // Once more after the passes have had the settled pages too.
  ASSERT_OK(dev.MarkIdle("all"));
  ASSERT_OK(dev.SetWritebackLimitEnable(false));
  (void)dev.Writeback("idle");
  if (cfg.recompress) (void)dev.Recompress("");
  ASSERT_OK(dev.Compact());
  for (auto& w : writers) w->VerifyAll("read after a final writeback");
  for (const std::string& f : failures.lines) ADD_FAILURE() << f;
  if (failures.any) return;

  // Counters against the shadow and block_state.
  std::uint64_t allocated = 0, same = 0;
  for (auto& w : writers) {
    for (std::uint64_t p = 0; p < kPagesPerWriter; ++p) {
      if (!w->shadow().allocated[p]) continue;
      ++allocated;
      if (SameFilled(w->shadow().data[p])) ++same;
    }
  }
  std::uint64_t lines = 0, ram_objects = 0, ram_recompressed = 0;
  const std::string block_state = dev.ShowBlockState();
  auto flags = FlagCounts(block_state, &lines, &ram_objects, &ram_recompressed);
  const PageStoreStats st = dev.Stats();
  EXPECT_EQ(lines, allocated);
  EXPECT_EQ(st.stored_pages, allocated);
  EXPECT_EQ(st.orig_data_size, allocated * kPageSize);
  EXPECT_EQ(st.same_pages, same);
  EXPECT_EQ(flags['s'], same);
  EXPECT_EQ(st.same_filled_pages, st.same_pages);
  EXPECT_EQ(st.huge_pages, flags['h']);
  // A unit written back takes one block per 4096 bytes of its object...
  if (cfg.defaults.unit_pages == 0) {
    EXPECT_EQ(st.bd_count, flags['w']);
  } else {
    // ... and keeps them until its last page goes, written back or not.
    EXPECT_EQ(st.bd_count == 0, flags['w'] == 0);
  }
  EXPECT_EQ(st.failed_reads, 0u);
  EXPECT_EQ(st.decompress_fail, 0u);
  EXPECT_EQ(st.incompressible_pages, flags['n']);
  EXPECT_EQ(st.pool_total_size, st.mem_used_total);
  EXPECT_GE(st.mem_used_max, st.mem_used_total);
  if (cfg.defaults.unit_pages == 0) {
    std::uint64_t objects = 0, recompressed = 0;
    for (std::size_t i = 0; i < st.priority_pages.size(); ++i) {
      objects += st.priority_pages[i];
      if (i > 0) recompressed += st.priority_pages[i];
    }
    EXPECT_EQ(objects, ram_objects);
    EXPECT_EQ(recompressed, ram_recompressed);
    EXPECT_EQ(recompressed, flags['r']);
  }
  EXPECT_LE(st.compr_data_size, (allocated - same) * kPageSize);
  {
    std::istringstream bd(dev.ShowBdStat());
    std::uint64_t count = 0, reads = 0, writes = 0;
    bd >> count >> reads >> writes;
    EXPECT_EQ(count, st.bd_count);
    EXPECT_EQ(reads, st.bd_reads);
    EXPECT_EQ(writes, st.bd_writes);
  }
  {
    std::istringstream mm(dev.ShowMmStat());
    std::vector<std::uint64_t> v;
    for (std::uint64_t x; mm >> x;) v.push_back(x);
    ASSERT_EQ(v.size(), 9u);
    EXPECT_EQ(v[0], st.orig_data_size);
    EXPECT_EQ(v[1], st.compr_data_size);
    EXPECT_EQ(v[5], st.same_pages);
    EXPECT_EQ(v[7], st.huge_pages);
  }

  // Everything discarded: every count back to zero.
  ASSERT_OK(dev.Trim(0, dev.disksize()));
  ASSERT_OK(dev.Compact());
  const PageStoreStats z = dev.Stats();
  EXPECT_EQ(dev.ShowBlockState(), "");
  ztier::testing::ExpectNothingStored(z);
  std::printf("[ stress ] %s: after discarding everything: mem_used_total "
              "%llu, dict_memory %llu\n",
              cfg.name, static_cast<unsigned long long>(z.mem_used_total),
              static_cast<unsigned long long>(z.dict_memory));
  for (const std::string& f : failures.lines) ADD_FAILURE() << f;
  EXPECT_OK(dev.Reset());
}

DeviceDefaults Recomp(DeviceDefaults d) {
  d.recomp[0] = {"zstd", ""};
  d.recomp[1] = {"deflate", ""};
  return d;
}

TEST(DeviceStressTest, PagesWithRecompression) {
  Config c{"pages+recompress", Recomp({}), true, false, 0.4};
  c.defaults.streams = 2;
  RunStress(c);
}

TEST(DeviceStressTest, UnitsWithCompressedWriteback) {
  DeviceDefaults d;
  d.comp_algorithm = "zstd";
  d.unit_pages = 4;
  d.streams = 2;
  Config c{"units+compressed-writeback", d, false, true, 0.3};
  RunStress(c);
}

TEST(DeviceStressTest, ParallelBatchesUnitsAndRecompression) {
  DeviceDefaults d = Recomp({});
  d.comp_algorithm = "lzo";
  d.unit_pages = 16;
  d.batch_backend = BatchBackend::kParallel;
  d.streams = 1;
  Config c{"units16+parallel+recompress", d, true, false, 0.3};
  RunStress(c);
}

}  // namespace
}  // namespace ztier
