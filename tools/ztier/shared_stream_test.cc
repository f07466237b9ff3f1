// shared_stream_test.cc: the shared-stream baseline's defining behaviour,
// against the engine's (page_store_test's
// LoadCompletesWhileAnotherThreadHoldsEveryStream): a load waits while
// another thread holds its CPU's stream, and completes once it lets go.
#include "shared_stream.h"

#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cstring>
#include <future>

#include "testing/test_util.h"

namespace ztier::tool {
namespace {

TEST(SharedStreamStoreTest, LoadWaitsWhileItsCpusStreamIsHeld) {
  auto created = PageStore::Create({.num_pages = 4, .streams = 1});
  ASSERT_TRUE(created.has_value()) << created.error().ToString();
  SharedStreamStore shared(**created, /*shared=*/true, /*cpus=*/1);
  std::array<std::byte, kPageSize> page;
  for (std::size_t i = 0; i < kPageSize; ++i) {
    page[i] = static_cast<std::byte>(i % 7 + 'a');
  }
  ASSERT_OK(shared.Store(0, ConstPage(page.data(), kPageSize)));
  std::array<std::byte, kPageSize> out{};
  std::future<Status> load;
  {
    auto held = shared.HoldThisCpu();  // the only stream (cpus = 1)
    load = std::async(std::launch::async, [&] {
      return shared.Load(0, MutablePage(out.data(), kPageSize));
    });
    // Waits behind the holder (a load that took no stream would be done
    // in microseconds)...
    EXPECT_EQ(load.wait_for(std::chrono::milliseconds(200)),
              std::future_status::timeout);
  }  // ...until it lets go.
  ASSERT_EQ(load.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  ASSERT_OK(load.get());
  EXPECT_EQ(std::memcmp(out.data(), page.data(), kPageSize), 0);
}

// Not shared: Store and Load go straight to the store, and a held stream
// of the baseline's is not waited for (there is none).
TEST(SharedStreamStoreTest, SeparatePathsGoStraightToTheStore) {
  auto created = PageStore::Create({.num_pages = 4, .streams = 1});
  ASSERT_TRUE(created.has_value()) << created.error().ToString();
  SharedStreamStore direct(**created, /*shared=*/false, /*cpus=*/1);
  std::array<std::byte, kPageSize> page;
  page.fill(std::byte{0x42});
  ASSERT_OK(direct.Store(1, ConstPage(page.data(), kPageSize)));
  std::array<std::byte, kPageSize> out{};
  ASSERT_OK((*created)->Load(1, MutablePage(out.data(), kPageSize)));
  EXPECT_EQ(out, page);
}

}  // namespace
}  // namespace ztier::tool
