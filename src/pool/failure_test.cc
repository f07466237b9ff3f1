// File: pool/failure_test.cc
//
// The pool when things fail around it: a Read callback that throws. Every
// call either fails as its contract says or lets the exception through, and
// leaves the pool usable: no class lock held, no zspage left pinned.
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>
#include <vector>

#include "testing/test_util.h"
#include "ztier/pool.h"

namespace ztier {
namespace {

// Objects in sparse zspages of one class, each read by a callback that
// throws, then compacted (moved out of those zspages) and read back. Ends
// the process: 0 when all went as it should.
[[noreturn]] void ReadThrowingThenCompact() {
  alarm(10);  // a zspage left pinned keeps Compact waiting: SIGALRM
  auto created = Pool::Create({});
  if (!created.has_value()) std::_Exit(2);
  Pool& pool = **created;
  std::vector<Handle> all;
  for (int i = 0; i < 2000; ++i) {
    all.push_back(pool.Malloc(200));
    if (all.back() == kInvalidHandle) std::_Exit(3);
    pool.Write(all.back(), std::vector<std::byte>(200, std::byte(i)));
  }
  std::vector<Handle> kept;  // a third of each zspage
  for (std::size_t i = 0; i < all.size(); ++i) {
    if (i % 3 == 0) {
      kept.push_back(all[i]);
    } else {
      pool.Free(all[i]);
    }
  }
  for (Handle h : kept) {
    try {
      pool.Read(h, [](std::span<const std::byte>) {
        throw std::runtime_error("decoder failed");
      });
      std::_Exit(4);  // the exception did not come through
    } catch (const std::runtime_error&) {
    }
  }
  if (pool.Compact() == 0) std::_Exit(5);
  std::vector<std::byte> got(200);
  for (std::size_t k = 0; k < kept.size(); ++k) {
    if (pool.ReadInto(kept[k], got) != 200 ||
        got != std::vector<std::byte>(200, std::byte(3 * k))) {
      std::_Exit(6);
    }
  }
  std::_Exit(0);
}

// A Read whose callback throws lets the exception through and unpins the
// object's zspage: a compaction that then moves the object out of it
// finishes (a zspage left pinned would keep it waiting forever, holding the
// class lock). Run in a child that an alarm ends if it hangs.
TEST(PoolFailureTest, ReadWhoseCallbackThrowsUnpins) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(ReadThrowingThenCompact(), ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace ztier
