// reclaim.cc: the Region's reclaimer. After each batch of faults, if more
// pages are resident than the budget allows, a CLOCK over the page map picks
// victims down to the budget minus 1/32 of it, and they are evicted.
//
// The hand walks page indices. A resident page with its reference bit set
// (faulted in since the hand last passed) has the bit cleared and is
// skipped: its second chance. A page whose last eviction was refused is
// skipped once more (the refused bit, cleared as it is passed), so that
// pages not tried yet go first; a pass that evicts little backs off (see
// Reclaim). Any other resident page is a victim. The walk
// stops when enough are found or after two full turns (every reference bit
// is clear after one); a page met on both turns is taken once. Victims are
// evicted in ascending order so that neighbours form runs: one write-protect,
// one StoreBatch per 16 pages, one MADV_DONTNEED per run. A walk reads one byte
// per page: 256 Ki pages (1 GiB) take about 0.1 ms, against some 30 evictions'
// worth of compression per walk (budget/32 pages).
#include <algorithm>
#include <vector>

#include "region_impl.h"

namespace ztier {

using internal::PageMap;
using internal::PageState;

void Region::Impl::Reclaim() {
  if (budget_pages == 0) return;
  const std::size_t resident = Read(c.resident);
  if (resident <= budget_pages) {
    reclaim_retry_at = 0;
    return;
  }
  // Pages that were refused stay resident (incompressible without a
  // backing store, say), and every later pass would take them again: a
  // pass per fault batch, each compressing everything over the budget.
  // After a pass that evicted under half its victims, the next waits for
  // `gap` more resident pages and takes at most `gap` victims (the CLOCK
  // goes on from where it stopped: pages not tried yet); one that evicts
  // well ends the back-off. The wait counts from what is resident now, so
  // that pages dropped meanwhile (Discard) bring the next pass closer.
  const std::size_t gap = std::max(budget_pages / 32, kEvictChunk);
  if (reclaim_retry_at != 0) {
    reclaim_retry_at = std::min(reclaim_retry_at, resident + gap);
    if (resident < reclaim_retry_at) return;
  }
  // A full pool refuses the eviction anyway (or, with a backing store,
  // makes room first): no walk while it would be wasted.
  if (!PoolAccepts()) return;
  const std::size_t target = budget_pages - budget_pages / 32;
  const std::size_t want = reclaim_retry_at != 0
                               ? std::min(resident - target, gap)
                               : resident - target;
  std::vector<std::uint32_t> victims;
  victims.reserve(want);
  for (std::size_t scanned = 0;
       victims.size() < want && scanned < 2 * num_pages; ++scanned) {
    const std::size_t p = clock_hand;
    clock_hand = p + 1 == num_pages ? 0 : p + 1;
    if (!pages.is(p, PageState::kResident)) continue;
    if (pages.test(p, PageMap::kRef)) {
      pages.clear(p, PageMap::kRef);
      continue;
    }
    if (pages.test(p, PageMap::kRefused)) {
      pages.clear(p, PageMap::kRefused);
      continue;
    }
    victims.push_back(static_cast<std::uint32_t>(p));
  }
  if (victims.empty()) {
    // Every resident page had its chances left (refused ones have two):
    // in a back-off, wait for the next gap before walking again.
    if (reclaim_retry_at != 0) reclaim_retry_at = resident + gap;
    return;
  }
  // The second turn can meet a page the first one took: each page must be
  // a victim once (Evict requires strictly ascending indices).
  std::sort(victims.begin(), victims.end());
  victims.erase(std::unique(victims.begin(), victims.end()), victims.end());
  Bump(c.evictions);
  Evict(victims);
  const std::size_t left = Read(c.resident);
  const std::size_t evicted = resident > left ? resident - left : 0;
  reclaim_retry_at = evicted * 2 >= victims.size() ? 0 : left + gap;
}

}  // namespace ztier
