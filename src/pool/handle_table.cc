// File: pool/handle_table.cc
//
// Per-class handle tables. Chunks grow 16 x4, 32 x4, ... 512 x4 entries (8
// bytes each), then double from 4096: a class with n < 4032 handles holds
// at most ~1.2 n entries (+16), and a class with few objects costs 128
// bytes, not a page. Chunks are published with a
// release store and never move or free until the pool is destroyed. Free
// entries form a LIFO list threaded through the entries themselves (no side
// array to pay for).
#include <cassert>
#include <new>

#include "pool/pool_internal.h"

namespace ztier::internal_pool {

HandleTable::~HandleTable() {
  for (auto& c : chunks_) delete[] c.load(std::memory_order_relaxed);
}

std::uint64_t HandleTable::Allocate(std::atomic<std::size_t>* metadata) {
  if (free_head_ != kNoIndex) {
    const std::uint64_t index = free_head_;
    const std::uint64_t e = Entry(index).load(std::memory_order_relaxed);
    assert(e & kEntryFree);
    free_head_ = e & kHandleIndexMask;
    return index;
  }
  if (size_ >= kMaxHandles) return kNoIndex;
  std::uint64_t off;
  const int k = Chunks::Locate(size_, &off);
  if (chunks_[k].load(std::memory_order_relaxed) == nullptr) {
    const std::size_t n = Chunks::ChunkSize(k);
    auto* chunk = new (std::nothrow) std::atomic<std::uint64_t>[n];
    if (chunk == nullptr) return kNoIndex;
    for (std::size_t i = 0; i < n; ++i) {
      chunk[i].store(kEntryFree | kNoIndex, std::memory_order_relaxed);
    }
    chunks_[k].store(chunk, std::memory_order_release);
    metadata->fetch_add(n * sizeof(std::uint64_t), std::memory_order_relaxed);
  }
  return size_++;
}

void HandleTable::Free(std::uint64_t index) {
  Entry(index).store(kEntryFree | free_head_, std::memory_order_relaxed);
  free_head_ = index;
}

}  // namespace ztier::internal_pool
