// page_store_test_peer.h: what tests may reach inside a PageStore.
#ifndef ZTIER_STORE_PAGE_STORE_TEST_PEER_H_
#define ZTIER_STORE_PAGE_STORE_TEST_PEER_H_

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "stream_pool.h"
#include "ztier/page_store.h"

namespace ztier {

class PageStoreTestPeer {
 public:
  // The store's compression streams, so a test can hold every one of them.
  static internal::StreamPool& Streams(PageStore& store);
  // Overwrites the first bytes of the object of the unit slot `index`
  // belongs to (a unit in RAM) with garbage; false if it is not one.
  static bool CorruptUnit(PageStore& store, std::uint64_t index);
  // The same for the compressed object of slot `index`, a page of its own
  // in RAM (not SAME, HUGE, written back or a unit's); false if it is not.
  static bool CorruptSlot(PageStore& store, std::uint64_t index);
  // Puts (unit, gen) on the reclaim queue as a unit's free does
  // (QueueReclaimLocked), and the queue's entries and capacity, in order.
  static void QueueReclaim(PageStore& store, std::uint64_t unit,
                           std::uint64_t gen);
  static std::vector<std::pair<std::uint64_t, std::uint64_t>> ReclaimQueue(
      PageStore& store, std::size_t* capacity);
  // Runs fn() while holding the lock of slot `index`.
  static void WithSlotLocked(PageStore& store, std::uint64_t index,
                             const std::function<void()>& fn);
  // Whether a thread sleeps waiting for the lock of slot `index`.
  static bool SlotHasWaiters(PageStore& store, std::uint64_t index);
};

}  // namespace ztier

#endif  // ZTIER_STORE_PAGE_STORE_TEST_PEER_H_
