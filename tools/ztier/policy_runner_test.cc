// policy_runner_test.cc: the policy's thread of `ztier serve --policy`
// (policy_runner.h) on a real registry and the real clock.
#include "policy_runner.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "testing/test_util.h"

namespace ztier::tool {
namespace {

using std::chrono::steady_clock;

struct Lines {
  std::mutex mu;
  std::vector<std::string> lines;
  std::function<void(const std::string&)> Sink() {
    return [this](const std::string& l) {
      std::lock_guard lock(mu);
      lines.push_back(l);
    };
  }
  int Count(const std::string& what) {
    std::lock_guard lock(mu);
    int n = 0;
    for (const auto& l : lines) n += l.find(what) != std::string::npos;
    return n;
  }
};

// zram0 (lz4, zstd at priority 1) with `pages` corpus pages, and an
// uninitialised zram1.
void AddDevices(DeviceRegistry& registry, std::size_t pages) {
  auto d = registry.Add("zram0");
  ASSERT_TRUE(d.has_value());
  ASSERT_OK((*d)->SetRecompAlgorithm("algo=zstd"));
  ASSERT_OK((*d)->SetDisksize(pages * kPageSize));
  const corpus::PageSet& corpus = testing::TestCorpus("anon-python");
  for (std::size_t i = 0; i < pages; ++i) {
    ASSERT_OK((*d)->Write(i * kPageSize, corpus.page(i % corpus.size())));
  }
  ASSERT_TRUE(registry.Add("zram1").has_value());
}

PolicyOptions Options(std::string_view tokens) {
  auto o = ParsePolicyOptions(tokens);
  EXPECT_TRUE(o.has_value()) << o.error().ToString();
  return o.value_or(PolicyOptions{});
}

TEST(PolicyRunnerTest, PassesEveryPeriodOverInitialisedDevices) {
  DeviceRegistry registry{DeviceDefaults{}};
  AddDevices(registry, 512);
  Lines log;
  PolicyRunner runner(&registry, Options("period=1s idle_age=0"), log.Sink());
  const auto deadline = steady_clock::now() + std::chrono::seconds(30);
  while (runner.passes() < 2 && steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  runner.Stop();
  EXPECT_GE(runner.passes(), 2u);
  EXPECT_GE(log.Count("zram0: policy pass: "), 2);
  EXPECT_EQ(log.Count("zram1"), 0);  // never initialised: left alone
  EXPECT_GT(registry.Find("zram0")->Stats().recompress_attempts, 0u);
}

TEST(PolicyRunnerTest, StopEndsAPassWaitingOnItsBudget) {
  DeviceRegistry registry{DeviceDefaults{}};
  AddDevices(registry, 512);
  Lines log;
  // One page a second: the pass's first pause is 8 s (a batch of 8 pages).
  PolicyRunner runner(&registry,
                      Options("period=1s idle_age=0 recompress_rate=1"),
                      log.Sink());
  // The first batch done, the pass waits on its budget.
  const auto deadline = steady_clock::now() + std::chrono::seconds(30);
  while (registry.Find("zram0")->Stats().recompress_attempts < 8 &&
         steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_GE(registry.Find("zram0")->Stats().recompress_attempts, 8u);
  const auto t0 = steady_clock::now();
  runner.Stop();
  EXPECT_LT(steady_clock::now() - t0, std::chrono::seconds(3));
  EXPECT_EQ(log.Count("recompression paused"), 1);
  EXPECT_EQ(runner.passes(), 1u);
  // The store's pass ended at that batch: its slots are back to normal.
  std::vector<std::byte> page(kPageSize);
  ASSERT_OK(registry.Find("zram0")->Read(0, page));
  EXPECT_EQ(std::memcmp(page.data(),
                        testing::TestCorpus("anon-python").page(0).data(),
                        kPageSize),
            0);
}

}  // namespace
}  // namespace ztier::tool
