// block_bitmap.h: which blocks of a BackingStore are in use, one bit each.
//
// AllocRange hands out runs of consecutive free blocks, searching from a
// rotating cursor (the block after the last run handed out) to the end and
// then from the start, so allocation spreads over the store instead of
// reusing the first blocks again and again. A run never wraps from the last
// block to block 0. When no run of the size asked for exists, the longest
// shorter run found is handed out instead (as alloc_block_bdev_range() of
// the zram writeback batching series, docs/references.md: a fragmented
// store still makes progress).
//
// The search steps over whole 64-bit words at a time where they are all used
// or all free, so even a 1 GiB store (262144 blocks, 4096 words) is scanned
// in a few microseconds.
//
// Thread safety: every method may be called from any thread. One mutex
// guards the bits; Used() reads an atomic count that is exact whenever no
// AllocRange or Free is in progress.
#ifndef ZTIER_BACKING_BLOCK_BITMAP_H_
#define ZTIER_BACKING_BLOCK_BITMAP_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

namespace ztier::internal {

class BlockBitmap {
 public:
  static constexpr std::uint64_t kNoBlock = ~std::uint64_t{0};

  explicit BlockBitmap(std::uint64_t num_blocks);
  BlockBitmap(const BlockBitmap&) = delete;
  BlockBitmap& operator=(const BlockBitmap&) = delete;

  // Marks up to `want` consecutive free blocks used and returns the first;
  // *got is how many (see above). *got == 0 and kNoBlock when every block is
  // in use (or want == 0).
  std::uint64_t AllocRange(std::size_t want, std::size_t* got);
  // REQUIRES: `block` is in use.
  void Free(std::uint64_t block);

  std::uint64_t Used() const { return used_.load(std::memory_order_relaxed); }
  std::uint64_t size() const { return num_blocks_; }

 private:
  // Searches [lo, hi) for `want` free blocks in a row: true and *start when
  // found; else false, with the longest run seen kept in *best/*best_len if
  // longer than what they hold.
  bool Scan(std::uint64_t lo, std::uint64_t hi, std::size_t want,
            std::uint64_t* start, std::uint64_t* best,
            std::size_t* best_len) const;
  void MarkUsed(std::uint64_t first, std::size_t count);

  const std::uint64_t num_blocks_;
  std::mutex mu_;
  std::vector<std::uint64_t> words_;  // bit set: in use. Guarded by mu_.
  std::uint64_t cursor_ = 0;          // guarded by mu_
  std::atomic<std::uint64_t> used_{0};
};

}  // namespace ztier::internal

#endif  // ZTIER_BACKING_BLOCK_BITMAP_H_
