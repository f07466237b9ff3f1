// block_bitmap.cc: run allocation over the bitmap of blocks in use.
#include "block_bitmap.h"

#include <algorithm>
#include <bit>
#include <cassert>

namespace ztier::internal {

BlockBitmap::BlockBitmap(std::uint64_t num_blocks)
    : num_blocks_(num_blocks), words_((num_blocks + 63) / 64, 0) {}

bool BlockBitmap::Scan(std::uint64_t lo, std::uint64_t hi, std::size_t want,
                       std::uint64_t* start, std::uint64_t* best,
                       std::size_t* best_len) const {
  std::uint64_t run_start = lo;
  std::uint64_t run = 0;
  std::uint64_t b = lo;
  while (b < hi) {
    const unsigned bit = b & 63;
    // The bits from b up; zeros are shifted in above bit 63 - bit.
    const std::uint64_t w = words_[b >> 6] >> bit;
    const std::uint64_t avail = std::min<std::uint64_t>(64 - bit, hi - b);
    if (w & 1) {  // in use: any run ends here; skip every used bit at once
      if (run > *best_len) *best = run_start, *best_len = run;
      run = 0;
      b += std::min<std::uint64_t>(std::countr_one(w), avail);
    } else {  // free: extend the run by every free bit at once
      const std::uint64_t n =
          std::min<std::uint64_t>(std::countr_zero(w), avail);
      if (run == 0) run_start = b;
      run += n;
      b += n;
      if (run >= want) {
        *start = run_start;
        return true;
      }
    }
  }
  if (run > *best_len) *best = run_start, *best_len = run;
  return false;
}

void BlockBitmap::MarkUsed(std::uint64_t first, std::size_t count) {
  for (std::uint64_t b = first; b < first + count;) {
    const unsigned bit = b & 63;
    const std::uint64_t n =
        std::min<std::uint64_t>(64 - bit, first + count - b);
    const std::uint64_t mask =
        (n == 64 ? ~std::uint64_t{0} : ((std::uint64_t{1} << n) - 1)) << bit;
    assert((words_[b >> 6] & mask) == 0);
    words_[b >> 6] |= mask;
    b += n;
  }
}

std::uint64_t BlockBitmap::AllocRange(std::size_t want, std::size_t* got) {
  *got = 0;
  if (want == 0) return kNoBlock;
  std::lock_guard<std::mutex> lock(mu_);
  std::uint64_t start = kNoBlock;
  std::uint64_t best = kNoBlock;
  std::size_t best_len = 0;
  // From the cursor to the end, then from block 0 to the cursor, letting the
  // second pass run want - 1 blocks past the cursor to catch a run that the
  // cursor cuts in two.
  const std::uint64_t wrap_end =
      want - 1 >= num_blocks_ - cursor_ ? num_blocks_ : cursor_ + want - 1;
  const bool found =
      Scan(cursor_, num_blocks_, want, &start, &best, &best_len) ||
      (cursor_ > 0 && Scan(0, wrap_end, want, &start, &best, &best_len));
  const std::size_t len = found ? want : best_len;
  if (!found) start = best;
  if (len == 0) return kNoBlock;
  MarkUsed(start, len);
  used_.fetch_add(len, std::memory_order_relaxed);
  cursor_ = start + len == num_blocks_ ? 0 : start + len;
  *got = len;
  return start;
}

void BlockBitmap::Free(std::uint64_t block) {
  assert(block < num_blocks_);
  const std::uint64_t mask = std::uint64_t{1} << (block & 63);
  std::lock_guard<std::mutex> lock(mu_);
  assert((words_[block >> 6] & mask) != 0 && "freeing a block not in use");
  words_[block >> 6] &= ~mask;
  used_.fetch_sub(1, std::memory_order_relaxed);
}

}  // namespace ztier::internal
