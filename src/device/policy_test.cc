// policy_test.cc: the post-processing policy (ztier/policy.h) on real
// Devices (lz4 primary, zstd secondary, a real backing file) and the
// anon-python corpus, driven by a fake clock that the devices' stores
// share.
#include "ztier/policy.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "testing/failing_new.h"
#include "testing/test_util.h"

namespace ztier {
namespace {

constexpr std::uint64_t kT0 = 1000 * kNsPerSecond;  // the fake clock's start
constexpr std::uint64_t kMinute = 60 * kNsPerSecond;
constexpr std::uint64_t kHour = 60 * kMinute;
constexpr std::uint64_t kDay = 24 * kHour;

// A fake monotonic clock: time moves only when the test or a sleep moves
// it. `on_sleep`, if set, runs on each sleep with its length (a client's
// IO during the pause).
struct FakeTime {
  std::atomic<std::uint64_t> ns{kT0};
  std::atomic<std::uint64_t> cpu_ns{0};
  std::uint64_t cpu_per_read = 0;  // thread_cpu_ns advances this per read
  std::uint64_t slept_ns = 0;
  std::function<void(std::uint64_t)> on_sleep;
  std::vector<std::string> log;

  void Advance(std::uint64_t d) { ns += d; }
  PolicyEnv Env() {
    return {.now_ns = [this] { return ns.load(); },
            .sleep_ns =
                [this](std::uint64_t d) {
                  ns += d;
                  slept_ns += d;
                  if (on_sleep) on_sleep(d);
                },
            .thread_cpu_ns = [this] { return cpu_ns += cpu_per_read; },
            .log = [this](const std::string& line) { log.push_back(line); }};
  }
  std::function<std::uint32_t()> StoreClock() {
    return [this] { return static_cast<std::uint32_t>(ns / kNsPerSecond); };
  }
};

// A device of `pages` pages, lz4 with zstd at priority 1, its store on
// `time`'s clock, with a backing file in `dir` when not null; written with
// the corpus's pages (kept in *expected).
std::unique_ptr<Device> MakeDevice(FakeTime& time, std::size_t pages,
                                   testing::ScopedTempDir* dir,
                                   std::vector<std::byte>* expected) {
  DeviceDefaults defaults;
  defaults.clock = time.StoreClock();
  auto d = std::make_unique<Device>("zram0", defaults);
  EXPECT_OK(d->SetRecompAlgorithm("algo=zstd priority=1"));
  if (dir != nullptr) EXPECT_OK(d->SetBackingDev(dir->File("zram0.wb")));
  EXPECT_OK(d->SetDisksize(pages * kPageSize));
  const corpus::PageSet& corpus = testing::TestCorpus("anon-python");
  expected->resize(pages * kPageSize);
  for (std::size_t i = 0; i < pages; ++i) {
    std::memcpy(expected->data() + i * kPageSize,
                corpus.page(i % corpus.size()).data(), kPageSize);
  }
  EXPECT_OK(d->Write(0, *expected));
  return d;
}

// Every page reads back as `expected`.
void ExpectReadsBack(Device& d, const std::vector<std::byte>& expected) {
  std::vector<std::byte> got(expected.size());
  ASSERT_OK(d.Read(0, got));
  std::size_t bad = 0;
  for (std::size_t i = 0; i < expected.size() / kPageSize; ++i) {
    bad += std::memcmp(got.data() + i * kPageSize,
                       expected.data() + i * kPageSize, kPageSize) != 0;
  }
  EXPECT_EQ(bad, 0u) << "pages that did not read back";
}

PolicyOptions Options(std::string_view tokens) {
  auto o = ParsePolicyOptions(tokens);
  EXPECT_TRUE(o.has_value()) << o.error().ToString();
  return o.value_or(PolicyOptions{});
}

TEST(PolicyTest, IdleRecompressWritebackOverDaysWithADailyBudget) {
  FakeTime time;
  testing::ScopedTempDir dir;
  std::vector<std::byte> expected;
  auto d = MakeDevice(time, 2048, &dir, &expected);
  constexpr std::uint64_t kBudget = 256;  // pages a day
  Policy policy(Options("period=60s idle_age=10m writeback_age=1h "
                        "recompress_rate=1000000 writeback_daily=1M"),
                time.Env());

  // Pass 1, a minute in: nothing is idle yet; the day's budget is armed.
  time.Advance(kMinute);
  const std::uint64_t compr0 = d->Stats().compr_data_size;
  PolicyPassResult r = policy.RunPass(*d);
  EXPECT_TRUE(r.ran);
  EXPECT_TRUE(r.budget_rearmed);
  EXPECT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.recompress.candidates, 0u);
  EXPECT_EQ(r.writeback.written, 0u);
  EXPECT_TRUE(d->writeback_limit_enable());
  EXPECT_EQ(d->writeback_limit(), kBudget);
  const std::uint64_t day_start = time.ns;

  // 11 minutes in: every page is idle and recompressed with zstd; none is
  // old enough to write back.
  time.Advance(10 * kMinute);
  r = policy.RunPass(*d);
  EXPECT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_GT(r.recompress.candidates, 1000u);
  EXPECT_GT(r.recompress.recompressed, 0u);
  EXPECT_FALSE(r.recompress_ended_early);
  EXPECT_FALSE(r.budget_rearmed);
  EXPECT_EQ(r.writeback.written, 0u);
  PageStoreStats st = d->Stats();
  EXPECT_EQ(st.priority_pages[1], r.recompress.recompressed);
  EXPECT_LT(st.compr_data_size, compr0);
  EXPECT_GT(r.recompress.bytes_before, r.recompress.bytes_after);
  ASSERT_FALSE(time.log.empty());
  EXPECT_NE(time.log.back().find(
                "zram0: policy pass: " +
                std::to_string(r.recompress.candidates) +
                " idle pages examined, " +
                std::to_string(r.recompress.recompressed) + " recompressed, " +
                std::to_string(r.recompress.bytes_before -
                               r.recompress.bytes_after) +
                " bytes saved, 0 written back"),
            std::string::npos)
      << time.log.back();

  // 2 hours in: the day's budget is written back, and then no more.
  time.Advance(2 * kHour);
  r = policy.RunPass(*d);
  EXPECT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.recompress.recompressed, 0u);  // all tried already
  EXPECT_EQ(r.writeback.written, kBudget);
  EXPECT_EQ(r.budget_left, 0u);
  EXPECT_EQ(d->Stats().bd_count, kBudget);
  for (int i = 0; i < 3; ++i) {
    time.Advance(kHour);
    r = policy.RunPass(*d);
    EXPECT_EQ(r.writeback.written, 0u);
    EXPECT_FALSE(r.budget_rearmed);
  }
  EXPECT_EQ(d->Stats().bd_count, kBudget);

  // A client rewrites page 7 (now not idle) on day 1; if it was written
  // back, its block is freed.
  const corpus::PageSet& corpus = testing::TestCorpus("anon-python");
  std::memcpy(expected.data() + 7 * kPageSize, corpus.page(4000).data(),
              kPageSize);
  const bool was_wb = d->ShowBlockState(7, 1).find('w') != std::string::npos;
  ASSERT_OK(d->Write(7 * kPageSize,
                     std::span(expected.data() + 7 * kPageSize, kPageSize)));
  const std::uint64_t freed = was_wb ? 1 : 0;
  EXPECT_EQ(d->Stats().bd_count, kBudget - freed);

  // Days 2 and 3: the budget re-arms 24 h after the first day began, on
  // its own, and each day writes its budget back.
  for (int day = 1; day <= 2; ++day) {
    time.ns = day_start + day * kDay - kMinute;
    r = policy.RunPass(*d);
    EXPECT_FALSE(r.budget_rearmed) << "day " << day;
    EXPECT_EQ(r.writeback.written, 0u) << "day " << day;
    time.ns = day_start + day * kDay + 30 * kNsPerSecond;
    r = policy.RunPass(*d);
    EXPECT_TRUE(r.budget_rearmed) << "day " << day;
    EXPECT_EQ(r.writeback.written, kBudget) << "day " << day;
    EXPECT_EQ(d->Stats().bd_writes, (day + 1) * kBudget) << "day " << day;
    EXPECT_EQ(d->Stats().bd_count, (day + 1) * kBudget - freed)
        << "day " << day;
  }
  st = d->Stats();
  EXPECT_EQ(st.bd_writes, 3 * kBudget);
  ExpectReadsBack(*d, expected);
}

// A 4096-page device, its pages idle, and a policy pacing recompression
// at 100 pages/s for at most one 10 s period: 1000 pages a pass.
struct RatePaced {
  FakeTime time;
  std::vector<std::byte> expected;
  std::unique_ptr<Device> d = MakeDevice(time, 4096, nullptr, &expected);
  Policy policy{Options("period=10s idle_age=1m recompress_rate=100"),
                time.Env()};
  RatePaced() { time.Advance(2 * kMinute); }
};

TEST(PolicyTest, RecompressRateLimitsPagesPerPass) {
  RatePaced p;
  FakeTime& time = p.time;
  Device* d = p.d.get();
  Policy& policy = p.policy;
  const std::vector<std::byte>& expected = p.expected;
  for (int pass = 1; pass <= 2; ++pass) {
    const std::uint64_t t0 = time.ns;
    const PolicyPassResult r = policy.RunPass(*d);
    EXPECT_TRUE(r.status.ok()) << r.status.ToString();
    EXPECT_TRUE(r.recompress_ended_early) << "pass " << pass;
    // Within two of the pass's batches of rate x period.
    EXPECT_GE(r.recompress.attempted, 1000u - 2 * kMaxPassBatchSize)
        << "pass " << pass;
    EXPECT_LE(r.recompress.attempted, 1000u + 2 * kMaxPassBatchSize)
        << "pass " << pass;
    EXPECT_GE(time.ns - t0, 10 * kNsPerSecond);
    EXPECT_LT(time.ns - t0, 11 * kNsPerSecond);
    EXPECT_NE(time.log.back().find("recompression paused"), std::string::npos);
    time.Advance(kMinute);
  }
  // The second pass went on where the first stopped.
  EXPECT_GE(d->Stats().recompress_attempts, 2000u - 4 * kMaxPassBatchSize);
  EXPECT_NE(time.log.front().find("no backing_dev, writeback skipped"),
            std::string::npos);
  ExpectReadsBack(*d, expected);
}

// An operator's recompress (or writeback, train_dict, reset, removal)
// waiting for the policy's paced pass does not wait out the policy's
// period: the pass ends at its next pause, and the operator's runs.
TEST(PolicyTest, APacedPassGivesWayToAnOperatorsPass) {
  // Unhindered, 1000 pages a pass (RecompressRateLimitsPagesPerPass).
  RatePaced p;
  FakeTime& time = p.time;
  Device* d = p.d.get();
  std::thread operator_pass;
  Status operator_status = Status::IoError("not run");
  time.on_sleep = [&](std::uint64_t) {
    if (operator_pass.joinable()) return;
    operator_pass = std::thread([&] {
      operator_status = d->Recompress("type=idle");
    });
    while (!d->PassesWaiting()) std::this_thread::yield();
  };
  const PolicyPassResult r = p.policy.RunPass(*d);
  ASSERT_TRUE(operator_pass.joinable());
  operator_pass.join();
  EXPECT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_TRUE(r.recompress_ended_early);
  EXPECT_LE(r.recompress.attempted, 2 * kMaxPassBatchSize);
  EXPECT_OK(operator_status);
  EXPECT_FALSE(d->PassesWaiting());
  ExpectReadsBack(*d, p.expected);
}

TEST(PolicyTest, RecompressCpuShareKeepsTheDutyCycle) {
  FakeTime time;
  time.cpu_per_read = 4 * kNsPerSecond / 1000;  // 4 ms of CPU a batch
  std::vector<std::byte> expected;
  auto d = MakeDevice(time, 4096, nullptr, &expected);
  // 25% of a core: 16 ms of elapsed time a batch, 62.5 batches a 1 s
  // period.
  Policy policy(Options("period=1s idle_age=1m recompress_cpu=25%"),
                time.Env());
  time.Advance(2 * kMinute);
  const PolicyPassResult r = policy.RunPass(*d);
  EXPECT_TRUE(r.recompress_ended_early);
  EXPECT_GE(r.recompress.attempted, 62 * kMaxPassBatchSize - 2 * kMaxPassBatchSize);
  EXPECT_LE(r.recompress.attempted, 63 * kMaxPassBatchSize + 2 * kMaxPassBatchSize);
  EXPECT_GE(time.slept_ns, 990 * kNsPerSecond / 1000);
  ExpectReadsBack(*d, expected);
}

TEST(PolicyTest, YieldsToBusyClientsAndRunsWhenTheyCalmDown) {
  FakeTime time;
  testing::ScopedTempDir dir;
  std::vector<std::byte> expected;
  auto d = MakeDevice(time, 4096, &dir, &expected);
  Policy policy(Options("period=60s idle_age=1m writeback_age=1m "
                        "recompress_rate=1000 busy_pages=2000 "
                        "busy_pause=100ms busy_give_up=1s"),
                time.Env());
  // A client reading pages 4000.. at `rate` pages/s of the fake clock,
  // during the policy's sleeps.
  std::uint64_t rate = 5000, owed_ns = 0, next = 0;
  std::vector<std::byte> page(kPageSize);
  time.on_sleep = [&](std::uint64_t ns) {
    owed_ns += ns;
    for (; owed_ns * rate >= kNsPerSecond; owed_ns -= kNsPerSecond / rate) {
      ASSERT_OK(d->Read((4000 + next++ % 96) * kPageSize, page));
    }
  };
  time.Advance(2 * kMinute);
  PolicyPassResult r = policy.RunPass(*d);
  EXPECT_TRUE(r.recompress_ended_early);
  // A few batches, then it yields.
  EXPECT_LE(r.recompress.attempted, 3 * kMaxPassBatchSize);
  EXPECT_TRUE(r.writeback_skipped_busy);
  EXPECT_EQ(r.writeback.written, 0u);
  EXPECT_NE(time.log.back().find("writeback skipped, clients busy"),
            std::string::npos);

  // Clients at 500 pages/s: the pass runs to the end, and writes back.
  rate = 500;
  time.Advance(kMinute);
  r = policy.RunPass(*d);
  EXPECT_FALSE(r.recompress_ended_early);
  EXPECT_GT(r.recompress.attempted, 3000u);
  EXPECT_FALSE(r.writeback_skipped_busy);
  EXPECT_GT(r.writeback.written, 0u);
  time.on_sleep = nullptr;
  ExpectReadsBack(*d, expected);
}

TEST(PolicyTest, ADevicesOwnRecompressTokensReplaceThePolicys) {
  FakeTime time;
  std::vector<std::byte> expected;
  auto d = MakeDevice(time, 1024, nullptr, &expected);
  PolicyOptions o = Options("period=60s idle_age=1m recompress_rate=1000000 "
                            "recompress_max=500");
  o.device_recompress_params["zram0"] = "max_pages=40";
  o.device_recompress_params["zram9"] = "max_pages=1";  // another device's
  Policy policy(o, time.Env());
  time.Advance(2 * kMinute);
  PolicyPassResult r = policy.RunPass(*d);
  EXPECT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.recompress.attempted, 40u);
  // type= among them replaces type=idle: only the huge pages, though
  // every page is idle.
  o.device_recompress_params["zram0"] = "type=huge";
  Policy huge(o, time.Env());
  const std::uint64_t huge_before = d->Stats().huge_pages;
  r = huge.RunPass(*d);
  EXPECT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_GT(r.recompress.candidates, 0u);
  EXPECT_LE(r.recompress.candidates, huge_before);
  EXPECT_LT(huge_before, 500u);  // so that type=idle would have picked more
  ExpectReadsBack(*d, expected);
}

// train_dict_pages: the first pass with enough pages trains, later passes
// do not, and new stores use the dictionary.
TEST(PolicyTest, TrainsADictionaryOnceADeviceHoldsEnoughPages) {
  FakeTime time;
  std::vector<std::byte> expected;
  auto d = MakeDevice(time, 1024, nullptr, &expected);
  Policy too_soon(Options("train_dict_pages=100000 recompress=off "
                          "writeback=off"),
                  time.Env());
  EXPECT_FALSE(too_soon.RunPass(*d).dict_trained);
  Policy policy(Options("train_dict_pages=512 train_dict_size=8K "
                        "recompress=off writeback=off"),
                time.Env());
  const PolicyPassResult first = policy.RunPass(*d);
  ASSERT_TRUE(first.ran);
  ASSERT_TRUE(first.dict_trained) << first.status.ToString();
  EXPECT_EQ(first.dict.id, 1);
  EXPECT_LE(first.dict.bytes, 8192u);
  time.Advance(2 * kMinute);
  EXPECT_FALSE(policy.RunPass(*d).dict_trained);
  EXPECT_EQ(d->Stats().dict_id, 1);
  ASSERT_OK(d->Write(0, expected));
  EXPECT_GT(d->Stats().dict_pages[1], 900u);
  ExpectReadsBack(*d, expected);
}

// Step 4: the holes that discards leave in the pool hold their pages until
// a pass finds at least compact_min to free; it compacts then, and every
// page reads back.
TEST(PolicyTest, CompactsOnceTheHolesReachCompactMin) {
  FakeTime time;
  std::vector<std::byte> expected;
  auto d = MakeDevice(time, 2048, nullptr, &expected);
  // Every other page discarded: most zspages keep half their objects.
  for (std::size_t i = 0; i < 2048; i += 2) {
    ASSERT_OK(d->Trim(i * kPageSize, kPageSize));
    std::memset(expected.data() + i * kPageSize, 0, kPageSize);
  }
  const std::uint64_t holes = d->CompactablePages();
  ASSERT_GT(holes, 100u);
  const std::uint64_t before = d->Stats().mem_used_total;
  // Busy clients: 100 reads during the policy's 10 ms look at them.
  std::vector<std::byte> page(kPageSize);
  time.on_sleep = [&](std::uint64_t) {
    for (int i = 0; i < 100; ++i) ASSERT_OK(d->Read(kPageSize, page));
  };
  for (const char* tokens : {"compact_min=none", "compact_min=64M",
                             "compact_min=64K busy_pages=1000"}) {
    Policy policy(
        Options(std::string("recompress=off writeback=off ") + tokens),
        time.Env());
    const PolicyPassResult r = policy.RunPass(*d);
    EXPECT_TRUE(r.ran && r.status.ok()) << tokens;
    EXPECT_EQ(r.pages_compacted, 0u) << tokens;
    EXPECT_EQ(d->CompactablePages(), holes) << tokens;
  }
  time.on_sleep = nullptr;
  Policy policy(Options("recompress=off writeback=off compact_min=64K"),
                time.Env());
  const PolicyPassResult r = policy.RunPass(*d);
  EXPECT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_GE(r.pages_compacted, holes / 2);
  // The pages compacted leave mem_used_total (less a few the moves touch).
  EXPECT_LE(d->Stats().mem_used_total + r.pages_compacted * kPageSize * 9 / 10,
            before);
  EXPECT_LT(d->CompactablePages(), holes / 8);
  ASSERT_FALSE(time.log.empty());
  EXPECT_NE(time.log.back().find(std::to_string(r.pages_compacted) +
                                 " pages compacted"),
            std::string::npos)
      << time.log.back();
  ExpectReadsBack(*d, expected);

  // A device with a reserve keeps the pages a compaction frees: no step 4.
  DeviceDefaults defaults;
  defaults.clock = time.StoreClock();
  defaults.prealloc = true;
  Device reserved("zram1", defaults);
  ASSERT_OK(reserved.SetMemLimit(16 << 20));
  ASSERT_OK(reserved.SetDisksize(expected.size()));
  ASSERT_OK(reserved.Write(0, expected));
  for (std::size_t i = 1; i < 2048; i += 2) {
    ASSERT_OK(reserved.Trim(i * kPageSize, kPageSize));
  }
  ASSERT_GT(reserved.CompactablePages(), 100u);
  EXPECT_EQ(policy.RunPass(reserved).pages_compacted, 0u);
}

// A recompression that runs for its whole period and changes nothing
// (nothing compacted in step 2) still leaves step 4 its turn.
TEST(PolicyTest, CompactsAfterARecompressionThatRanOutItsPeriod) {
  FakeTime time;
  DeviceDefaults defaults;
  defaults.clock = time.StoreClock();
  Device d("zram0", defaults);
  ASSERT_OK(d.SetRecompAlgorithm("algo=zstd priority=1"));
  ASSERT_OK(d.SetDisksize(4096 * kPageSize));
  // Pages 0..2047: random, stored whole, idle by the pass (no codec makes
  // them smaller); 2048..: the corpus, fresh, every other one discarded.
  std::vector<std::byte> expected(4096 * kPageSize);
  std::mt19937_64 random(7);
  for (std::size_t i = 0; i < 2048 * kPageSize; i += 8) {
    const std::uint64_t v = random();
    std::memcpy(expected.data() + i, &v, 8);
  }
  ASSERT_OK(d.Write(0, std::span(expected).first(2048 * kPageSize)));
  time.Advance(2 * kMinute);
  const corpus::PageSet& corpus = testing::TestCorpus("anon-python");
  for (std::size_t i = 2048; i < 4096; ++i) {
    std::memcpy(expected.data() + i * kPageSize,
                corpus.page(i % corpus.size()).data(), kPageSize);
  }
  ASSERT_OK(
      d.Write(2048 * kPageSize, std::span(expected).last(2048 * kPageSize)));
  for (std::size_t i = 2048; i < 4096; i += 2) {
    ASSERT_OK(d.Trim(i * kPageSize, kPageSize));
    std::memset(expected.data() + i * kPageSize, 0, kPageSize);
  }
  const std::uint64_t holes = d.CompactablePages();
  ASSERT_GT(holes, 100u);
  Policy policy(Options("period=1s idle_age=1m recompress_rate=100 "
                        "writeback=off compact_min=64K"),
                time.Env());
  const PolicyPassResult r = policy.RunPass(d);
  EXPECT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_TRUE(r.recompress_ended_early);
  EXPECT_FALSE(r.recompress_yielded);
  EXPECT_GT(r.recompress.attempted, 0u);
  EXPECT_EQ(r.recompress.recompressed, 0u);
  EXPECT_GE(r.pages_compacted, holes / 2);
  ExpectReadsBack(d, expected);
}

TEST(PolicyTest, SkipsWhatADeviceLacksAndSaysSoOnce) {
  FakeTime time;
  Policy policy(Options("period=60s idle_age=1m"), time.Env());
  Device plain("zram1", DeviceDefaults{.clock = time.StoreClock()});
  EXPECT_FALSE(policy.RunPass(plain).ran);  // not initialised
  ASSERT_OK(plain.SetDisksize(64 * kPageSize));
  for (int i = 0; i < 3; ++i) {
    time.Advance(2 * kMinute);
    const PolicyPassResult r = policy.RunPass(plain);
    EXPECT_TRUE(r.ran);
    EXPECT_TRUE(r.status.ok()) << r.status.ToString();
  }
  int no_recomp = 0, no_backing = 0, passes = 0;
  for (const std::string& line : time.log) {
    no_recomp += line.find("no recomp_algorithm") != std::string::npos;
    no_backing += line.find("no backing_dev") != std::string::npos;
    passes += line.find("zram1: policy pass: ") == 0;
    EXPECT_EQ(line.find("budget"), std::string::npos) << line;  // no backing
  }
  EXPECT_EQ(no_recomp, 1);
  EXPECT_EQ(no_backing, 1);
  EXPECT_EQ(passes, 3);
  policy.Stop();
  EXPECT_FALSE(policy.RunPass(plain).ran);
}

// Each allocation of a pass that trains a dictionary, recompresses and
// writes back fails in turn (the policy thread's first, its second, ...).
// The pass returns (a std::bad_alloc used to leave the policy thread and
// end the server), no page is lost, and the next pass runs clean.
TEST(PolicyTest, APassOutOfMemoryLosesNothingAndTheNextRuns) {
  long failed = 0;
  long errors = 0;
  for (long n = 1;; ++n) {
    SCOPED_TRACE("allocation " + std::to_string(n) + " of the pass failing");
    FakeTime time;
    testing::ScopedTempDir dir;
    std::vector<std::byte> expected;
    auto d = MakeDevice(time, 64, &dir, &expected);
    Policy policy(Options("idle_age=10m writeback_age=1h "
                          "recompress_rate=1000000 writeback_daily=512K "
                          "busy_pages=0 train_dict_pages=32"),
                  time.Env());
    time.Advance(2 * kHour);
    testing::FailNthAllocation(n);
    const PolicyPassResult r = policy.RunPass(*d);
    const bool fired = testing::AllocationFailed();
    testing::FailNthAllocation(0);
    failed += fired;
    errors += !r.status.ok();
    ExpectReadsBack(*d, expected);
    time.Advance(kDay + kHour);
    const PolicyPassResult next = policy.RunPass(*d);
    EXPECT_TRUE(next.status.ok()) << next.status.ToString();
    if (!fired || ::testing::Test::HasFailure()) break;
    ASSERT_LT(n, 100000) << "a pass that never ends allocating";
  }
  EXPECT_GT(failed, 10);
  EXPECT_GT(errors, 0);
  std::printf(
      "policy pass: each of %ld allocations failed in turn, %ld "
      "passes ended with an error\n",
      failed, errors);
}

// A device removed and added again under its name is a new device to the
// policy: its budget is armed on its first pass, as the first device's was
// (the policy kept the first device's day, and wrote nothing back on the
// second until that day ended).
TEST(PolicyTest, ADeviceAddedAgainUnderItsNameStartsAfresh) {
  FakeTime time;
  testing::ScopedTempDir dir;
  Policy policy(Options("idle_age=10m writeback_age=1h busy_pages=0 "
                        "recompress=off writeback_daily=1M"),
                time.Env());
  std::uint64_t first_written = 0;
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE(round == 0 ? "first device" : "added again");
    std::vector<std::byte> expected;
    auto d = MakeDevice(time, 64, &dir, &expected);
    time.Advance(2 * kHour);
    const PolicyPassResult r = policy.RunPass(*d);
    EXPECT_TRUE(r.status.ok()) << r.status.ToString();
    EXPECT_TRUE(r.budget_rearmed);
    // Every page but the same-filled ones.
    EXPECT_GT(r.writeback.written, 60u);
    if (round == 0) first_written = r.writeback.written;
    EXPECT_EQ(r.writeback.written, first_written);
    ExpectReadsBack(*d, expected);
  }
}

// A device removed from the registry leaves nothing in the policy: the
// runner's KeepOnly(List()) forgets it, and the others keep their day.
TEST(PolicyTest, KeepOnlyForgetsRemovedDevices) {
  FakeTime time;
  testing::ScopedTempDir dir;
  Policy policy(Options("recompress=off busy_pages=0 writeback_daily=1M"),
                time.Env());
  std::vector<std::shared_ptr<Device>> devices;
  for (const char* name : {"a", "b", "c"}) {
    DeviceDefaults defaults;
    defaults.clock = time.StoreClock();
    auto d = std::make_shared<Device>(name, defaults);
    ASSERT_OK(d->SetBackingDev(dir.File(std::string(name) + ".wb")));
    ASSERT_OK(d->SetDisksize(16 * kPageSize));
    EXPECT_TRUE(policy.RunPass(*d).budget_rearmed) << name;
    devices.push_back(std::move(d));
  }
  EXPECT_EQ(policy.devices_known(), 3u);
  devices.erase(devices.begin());  // "a" removed
  policy.KeepOnly(devices);
  EXPECT_EQ(policy.devices_known(), 2u);
  time.Advance(kHour);
  for (const auto& d : devices) {
    EXPECT_FALSE(policy.RunPass(*d).budget_rearmed) << d->name();
  }
  EXPECT_EQ(policy.devices_known(), 2u);
}

// What a failed train_dict says about a store's pages holds for that
// store only: after a reset and a new disksize the device trains once it
// holds train_dict_pages again, not twice the pages of the store it had.
TEST(PolicyTest, AResetDeviceTrainsItsNewStoreAfresh) {
  FakeTime time;
  std::vector<std::byte> expected;
  auto d = MakeDevice(time, 1024, nullptr, &expected);
  // No room for a dictionary: training fails.
  ASSERT_OK(d->SetMemLimit(d->Stats().mem_used_total + 1024));
  Policy policy(Options("train_dict_pages=512 train_dict_size=8K "
                        "recompress=off writeback=off"),
                time.Env());
  const PolicyPassResult failed = policy.RunPass(*d);
  ASSERT_TRUE(failed.ran);
  ASSERT_FALSE(failed.dict_trained);
  ASSERT_OK(d->Reset());
  ASSERT_OK(d->SetDisksize(1024 * kPageSize));
  ASSERT_OK(d->Write(0, expected));
  time.Advance(2 * kMinute);
  const PolicyPassResult again = policy.RunPass(*d);
  EXPECT_TRUE(again.dict_trained) << again.status.ToString();
  ExpectReadsBack(*d, expected);
}

// A day's budget too small for the next unit (DeviceDefaults::unit_pages:
// a unit is written whole, a block per 4 KiB of its object) ends the
// writeback with zram's "writeback_limit reached" while a block or two of
// the budget is left: the day's work is done, not an error.
TEST(PolicyTest, ABudgetTooSmallForAUnitIsSpentNotAnError) {
  FakeTime time;
  testing::ScopedTempDir dir;
  DeviceDefaults defaults;
  defaults.clock = time.StoreClock();
  defaults.unit_pages = 16;
  Device d("zram0", defaults);
  ASSERT_OK(d.SetBackingDev(dir.File("zram0.wb")));
  ASSERT_OK(d.SetDisksize(256 * kPageSize));
  const corpus::PageSet& corpus = testing::TestCorpus("anon-python");
  std::vector<std::byte> data(256 * kPageSize);
  for (std::size_t i = 0; i < 256; ++i) {
    std::memcpy(data.data() + i * kPageSize,
                corpus.page(i % corpus.size()).data(), kPageSize);
  }
  ASSERT_OK(d.Write(0, data));  // whole aligned runs: every page in a unit
  Policy policy(Options("recompress=off busy_pages=0 writeback_age=1h "
                        "writeback_daily=4K"),
                time.Env());
  time.Advance(2 * kHour);
  const PolicyPassResult r = policy.RunPass(d);
  EXPECT_TRUE(r.budget_rearmed);
  EXPECT_EQ(r.writeback.written, 0u);
  EXPECT_TRUE(r.status.ok()) << r.status.ToString();
  ExpectReadsBack(d, data);
}

// An operator's store of an attribute an initialised device refuses
// (comp_algorithm, algorithm_params, recomp_algorithm, backing_dev,
// compressed_writeback, disksize: kBusy) is refused at once: it neither
// waits for the policy's pass nor makes the pass give way to it.
TEST(PolicyTest, AStoreRefusedAfterInitNeitherWaitsForNorEndsAPass) {
  RatePaced p;
  FakeTime& time = p.time;
  Device* d = p.d.get();
  std::thread store;
  std::atomic<bool> stored{false};
  bool stored_in_pause = false;
  Status store_status = Status::IoError("not run");
  time.on_sleep = [&](std::uint64_t) {
    if (store.joinable()) return;
    store = std::thread([&] {
      store_status = d->SetCompAlgorithm("zstd");
      stored = true;
    });
    // Bounded, so that the test fails rather than hangs where the store
    // waits for the pass.
    const auto give_up =
        std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!stored && std::chrono::steady_clock::now() < give_up) {
      std::this_thread::yield();
    }
    stored_in_pause = stored;
  };
  const PolicyPassResult r = p.policy.RunPass(*d);
  ASSERT_TRUE(store.joinable());
  store.join();
  EXPECT_TRUE(stored_in_pause) << "the store waited for the pass";
  EXPECT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_FALSE(r.recompress_yielded);
  EXPECT_EQ(store_status.code(), StatusCode::kBusy) << store_status.ToString();
  ExpectReadsBack(*d, p.expected);
}

// An operator's reset while a pass runs (here at the writeback step's look
// at the clients, where the policy holds no lock) leaves the rest of the
// pass skipped, not failed: the device is uninitialised, as a removed one.
TEST(PolicyTest, AResetDuringAPassSkipsItsLaterStepsWithoutAnError) {
  FakeTime time;
  testing::ScopedTempDir dir;
  std::vector<std::byte> expected;
  auto d = MakeDevice(time, 64, &dir, &expected);
  Policy policy(Options("recompress=off writeback_age=1h"), time.Env());
  time.Advance(2 * kHour);
  bool reset = false;
  time.on_sleep = [&](std::uint64_t) {
    if (reset) return;
    reset = true;
    ASSERT_OK(d->Reset());
  };
  const PolicyPassResult r = policy.RunPass(*d);
  ASSERT_TRUE(reset);
  EXPECT_TRUE(r.ran);
  EXPECT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.writeback.written, 0u);
  ASSERT_FALSE(time.log.empty());
  EXPECT_EQ(time.log.back().find("error"), std::string::npos)
      << time.log.back();
}

// A device with a reserve is never compacted by the policy (policy.h, step
// 4; docs/swap.md: "the policy does not compact a device with a reserve"),
// its recompression step included.
TEST(PolicyTest, ARecompressionPassDoesNotCompactADeviceWithAReserve) {
  FakeTime time;
  std::vector<std::byte> expected;
  {
    auto plain = MakeDevice(time, 2048, nullptr, &expected);  // the pages
  }
  DeviceDefaults defaults;
  defaults.clock = time.StoreClock();
  defaults.prealloc = true;
  Device reserved("zram1", defaults);
  ASSERT_OK(reserved.SetMemLimit(16 << 20));
  ASSERT_OK(reserved.SetRecompAlgorithm("algo=zstd priority=1"));
  ASSERT_OK(reserved.SetDisksize(expected.size()));
  ASSERT_OK(reserved.Write(0, expected));
  Policy policy(Options("idle_age=1m recompress_rate=1000000 writeback=off "
                        "busy_pages=0 compact_min=4K"),
                time.Env());
  time.Advance(2 * kMinute);
  const std::uint64_t compacted0 = reserved.Stats().pages_compacted;
  const PolicyPassResult r = policy.RunPass(reserved);
  EXPECT_TRUE(r.status.ok()) << r.status.ToString();
  ASSERT_GT(r.recompress.recompressed, 100u);
  EXPECT_EQ(r.pages_compacted, 0u);
  EXPECT_EQ(reserved.Stats().pages_compacted, compacted0);
  ExpectReadsBack(reserved, expected);
}

// A pass that waits for another (here a paced recompress by another caller,
// as it would for an operator's writeback or recompress) before its first
// batch does not take the time it waited as budget: at recompress_rate=100
// it tries about 100 pages a second from its first batch on, not the
// 3000 pages of a 30 s wait at once.
TEST(PolicyTest, TimeWaitedForAnotherPassIsNotRecompressionBudget) {
  FakeTime time;
  std::vector<std::byte> expected;
  auto d = MakeDevice(time, 4096, nullptr, &expected);
  time.Advance(2 * kMinute);
  // The policy's first look at its clock is its recompression pass's
  // start: the other pass holds the store's pass lock by then.
  std::atomic<int> now_calls{0};
  PolicyEnv env = time.Env();
  env.now_ns = [&] {
    now_calls.fetch_add(1);
    now_calls.notify_all();
    return time.ns.load();
  };
  std::uint64_t attempts_at_first_sleep = 0;
  bool slept = false;
  time.on_sleep = [&](std::uint64_t) {
    if (slept) return;
    slept = true;
    attempts_at_first_sleep = d->Stats().recompress_attempts;
  };
  Policy policy(Options("period=60s idle_age=1m recompress_rate=100 "
                        "busy_pages=0 writeback=off compact_min=none"),
                env);
  // The other pass: one batch, then it holds the pass lock in its pace
  // until released.
  std::atomic<bool> holding{false}, release{false};
  ASSERT_OK(d->MarkIdle("60"));
  std::thread other([&] {
    EXPECT_OK(
        d->Recompress("type=idle", nullptr, [&](const Device::StatsReader&) {
          holding = true;
          holding.notify_all();
          release.wait(false);
          return false;
        }));
  });
  holding.wait(false);
  const std::uint64_t other_attempts = d->Stats().recompress_attempts;
  std::thread pass([&] {
    const PolicyPassResult r = policy.RunPass(*d);
    EXPECT_TRUE(r.status.ok()) << r.status.ToString();
  });
  now_calls.wait(0);
  time.Advance(30 * kNsPerSecond);  // the wait for the other pass
  release = true;
  release.notify_all();
  other.join();
  pass.join();
  ASSERT_TRUE(slept);
  EXPECT_LE(attempts_at_first_sleep - other_attempts, 2 * kMaxPassBatchSize)
      << "pages tried at once after the wait";
  ExpectReadsBack(*d, expected);
}

}  // namespace
}  // namespace ztier
