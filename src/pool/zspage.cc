// File: pool/zspage.cc
//
// Zspage descriptors: one per zspage (32 bytes), in a global table of
// chunks that never move or free, so an id read from a
// location entry can be dereferenced at any time, even after the zspage was
// freed (the pin protocol in pool.cc then notices the entry moved). Ids are
// recycled through a free list threaded through `next`.
//
// Each descriptor carries the object bitmap: inline for <= 64 objects per
// zspage, else a heap array, or with a reserve the words the reserve keeps
// for the zspage's run (counted as metadata either way, so that the bill
// does not depend on preallocation). Reserve() makes the chunks up front.
//
// Pin lock (ZspageDesc::pin): readers add 1 while the word is >= 0 and has
// no kPinPending; a mover (compaction, under the class lock, so one at a
// time) sets kPinPending, waits for the readers to drain and swaps in
// kPinWriter. Pending keeps a stream of readers from starving the mover.
#include <algorithm>
#include <cassert>
#include <new>
#include <thread>

#include "pool_internal.h"

namespace ztier::internal_pool {

int GroupFor(std::uint32_t inuse, std::uint32_t objs) {
  if (inuse == 0) return 0;
  if (inuse == objs) return kGroupFull;
  return static_cast<int>(100 * inuse / objs / 10 + 1);
}

std::uint32_t ZspageDesc::LowestFree(std::uint32_t objs) const {
  const std::uint32_t words = (objs + 63) / 64;
  for (std::uint32_t w = 0; w < words; ++w) {
    const std::uint64_t word = Words(objs)[w];
    if (word != ~std::uint64_t{0}) {
      const std::uint32_t idx = w * 64 + std::countr_one(word);
      assert(idx < objs);
      return idx;
    }
  }
  assert(false && "LowestFree on a full zspage");
  return objs;
}

std::uint32_t ZspageDesc::HighestUsed(std::uint32_t objs) const {
  for (std::uint32_t w = (objs + 63) / 64; w-- > 0;) {
    const std::uint64_t word = Words(objs)[w];
    if (word != 0) return w * 64 + 63 - std::countl_zero(word);
  }
  assert(false && "HighestUsed on an empty zspage");
  return 0;
}

void WriterLock(ZspageDesc* d) {
  const std::int32_t before =
      d->pin.fetch_or(kPinPending, std::memory_order_relaxed);
  assert(before >= 0 && (before & kPinPending) == 0);
  (void)before;
  std::int32_t expected = kPinPending;
  while (!d->pin.compare_exchange_weak(expected, kPinWriter,
                                       std::memory_order_acquire,
                                       std::memory_order_relaxed)) {
    expected = kPinPending;
    std::this_thread::yield();
  }
}

void WriterUnlock(ZspageDesc* d) {
  d->pin.store(0, std::memory_order_release);
}

DescTable::~DescTable() {
  // Live zspages' heap bitmaps belong to the classes (freed by the pool).
  for (auto& c : chunks_) delete[] c.load(std::memory_order_relaxed);
}

bool DescTable::Reserve(std::uint64_t n) {
  internal::MutexLock lock(mu_);
  if (n == 0) return true;
  std::uint64_t off;
  const int last = Chunks::Locate(std::min<std::uint64_t>(n, kNoId) - 1, &off);
  for (int k = 0; k <= last && k < kMaxChunks; ++k) {
    if (chunks_[k].load(std::memory_order_relaxed) != nullptr) continue;
    ZspageDesc* chunk = new (std::nothrow) ZspageDesc[Chunks::ChunkSize(k)];
    if (chunk == nullptr) return false;
    chunks_[k].store(chunk, std::memory_order_release);
  }
  return true;
}

ZspageDesc* DescTable::Allocate(std::uint32_t objs, std::uint32_t* id,
                                std::uint64_t* bits) {
  std::uint64_t* heap_bits = nullptr;
  const std::uint32_t words = (objs + 63) / 64;
  if (words > 1 && bits == nullptr) {
    heap_bits = new (std::nothrow) std::uint64_t[words]();
    if (heap_bits == nullptr) return nullptr;
    bits = heap_bits;
  }
  internal::MutexLock lock(mu_);
  std::uint32_t new_id = free_head_;
  if (new_id != kNoId) {
    free_head_ = Get(new_id)->next;
  } else {
    if (next_id_ == kNoId) {
      delete[] heap_bits;
      return nullptr;
    }
    new_id = next_id_;
    std::uint64_t off;
    const int k = Chunks::Locate(new_id, &off);
    if (k >= kMaxChunks) {
      delete[] heap_bits;
      return nullptr;
    }
    if (chunks_[k].load(std::memory_order_relaxed) == nullptr) {
      ZspageDesc* chunk = new (std::nothrow) ZspageDesc[Chunks::ChunkSize(k)];
      if (chunk == nullptr) {
        delete[] heap_bits;
        return nullptr;
      }
      chunks_[k].store(chunk, std::memory_order_release);
    }
    if (k >= counted_chunks_) {  // ids reach chunks in order
      metadata_bytes_->fetch_add(Chunks::ChunkSize(k) * sizeof(ZspageDesc),
                                 std::memory_order_relaxed);
      counted_chunks_ = k + 1;
    }
    ++next_id_;
  }
  ZspageDesc* d = Get(new_id);
  if (words > 1) {
    d->heap_bits = bits;
    metadata_bytes_->fetch_add(words * sizeof(std::uint64_t),
                               std::memory_order_relaxed);
  } else {
    d->inline_bits = 0;
  }
  d->inuse = 0;
  d->touched_pages = 0;
  d->group = 0;
  d->prev = d->next = kNoId;
  *id = new_id;
  return d;
}

void DescTable::Free(std::uint32_t id, std::uint32_t objs, bool owned_bits) {
  ZspageDesc* d = Get(id);
  const std::uint32_t words = (objs + 63) / 64;
  if (words > 1) {
    if (owned_bits) delete[] d->heap_bits;
    metadata_bytes_->fetch_sub(words * sizeof(std::uint64_t),
                               std::memory_order_relaxed);
  }
  d->inline_bits = 0;
  d->base = nullptr;
  internal::MutexLock lock(mu_);
  d->next = free_head_;
  free_head_ = id;
}

}  // namespace ztier::internal_pool
