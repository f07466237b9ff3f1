// File: pool/handle_table.cc
//
// The pool's handle table. Chunks grow 64 x4, 128 x4, ... 2048 x4 entries
// (8 bytes each), then double from 16384: a pool with few objects costs
// 512 bytes, not a page. Past that the newest chunk is as large as all
// the others, so the table may reach twice the entries in use; but chunks
// of kMappedChunkEntries and up are mappings whose pages come as entries
// are first handed out, so what is resident follows what is in use (the
// metadata bill counts each chunk whole, from its first entry handed
// out). Chunks are published with a release store and never move or free
// until the pool is destroyed.
//
// Free entries form LIFO lists threaded through the entries themselves (no
// side array to pay for): one list per class (HandleCache, under the class
// lock) and one shared list (under mu_). A class whose cache is empty takes
// kBatch indexes from the shared list, or kFreshBatch fresh ones (few, so
// that a growing pool's table stays close to its objects); a class whose
// cache grows past kCacheHigh hands kBatch back. So the table holds at most
// the live handles plus kCacheHigh per class (and one fresh batch), whatever
// the mix of classes over time, and Reserve() can size it once for a known
// number of objects: then Malloc never allocates.
#include <algorithm>
#include <cassert>
#include <new>

#include "pool_internal.h"

namespace ztier::internal_pool {

HandleTable::~HandleTable() ZT_NO_THREAD_SAFETY_ANALYSIS {
  for (int k = 0; k < kMaxChunks; ++k) {
    // A mapped chunk goes with its Mapping.
    if (mapped_[k].data() == nullptr) {
      delete[] chunks_[k].load(std::memory_order_relaxed);
    }
  }
}

// An entry at or above size() is never read before Allocate writes it, so
// a new chunk needs no initial value.
bool HandleTable::MakeChunk(int k, bool populate) {
  if (chunks_[k].load(std::memory_order_relaxed) != nullptr) return true;
  const std::size_t n = Chunks::ChunkSize(k);
  std::atomic<std::uint64_t>* chunk = nullptr;
  if (n >= kMappedChunkEntries) {
    // Runs under a class lock that Malloc releases by hand: a failure must
    // be a false, never an exception (the mapping's error message is made
    // with the heap). kUnlocked unless populated: under the process's
    // mlockall(MCL_FUTURE) a locked chunk would be faulted in whole here.
    try {
      Result<platform::Mapping> m = platform::Mapping::Anonymous(
          n * sizeof(std::uint64_t),
          populate ? platform::Commit::kOnTouch : platform::Commit::kUnlocked,
          "mmap handle table");
      if (!m.has_value()) return false;
      if (populate && !m->Populate("populate handle table").ok()) {
        return false;
      }
      chunk = m->as<std::atomic<std::uint64_t>>();
      mapped_[k] = std::move(*m);
    } catch (const std::bad_alloc&) {
      return false;
    }
  } else {
    chunk = new (std::nothrow) std::atomic<std::uint64_t>[n];
    if (chunk == nullptr) return false;
  }
  chunks_[k].store(chunk, std::memory_order_release);
  return true;
}

bool HandleTable::Reserve(std::uint64_t n) {
  internal::MutexLock lock(mu_);
  if (n == 0) return true;
  std::uint64_t off;
  const int last = Chunks::Locate(std::min(n, kMaxHandles) - 1, &off);
  for (int k = 0; k <= last; ++k) {
    if (!MakeChunk(k, /*populate=*/true)) return false;
  }
  return true;
}

std::uint64_t HandleTable::Allocate(HandleCache* c) {
  if (c->head == kNoIndex) {
    internal::MutexLock lock(mu_);
    // Refill from the shared list, else with fresh indexes.
    for (std::uint32_t k = 0; k < kBatch && free_head_ != kNoIndex; ++k) {
      const std::uint64_t index = free_head_;
      std::atomic<std::uint64_t>& e = Entry(index);
      free_head_ = e.load(std::memory_order_relaxed) & kHandleIndexMask;
      e.store(kEntryFree | c->head, std::memory_order_relaxed);
      c->head = index;
      ++c->count;
    }
    if (c->head == kNoIndex) {  // the shared list was empty
      std::uint64_t size = size_.load(std::memory_order_relaxed);
      for (std::uint32_t k = 0; k < kFreshBatch && size < kMaxHandles; ++k) {
        std::uint64_t off;
        const int chunk = Chunks::Locate(size, &off);
        if (!MakeChunk(chunk, /*populate=*/false)) break;
        if (chunk >= counted_chunks_) {  // indexes reach chunks in order
          metadata_bytes_->fetch_add(
              Chunks::ChunkSize(chunk) * sizeof(std::uint64_t),
              std::memory_order_relaxed);
          counted_chunks_ = chunk + 1;
        }
        Entry(size).store(kEntryFree | c->head, std::memory_order_relaxed);
        c->head = size++;
        ++c->count;
      }
      size_.store(size, std::memory_order_release);
    }
    if (c->head == kNoIndex) return kNoIndex;
  }
  const std::uint64_t index = c->head;
  const std::uint64_t e = Entry(index).load(std::memory_order_relaxed);
  assert(e & kEntryFree);
  c->head = e & kHandleIndexMask;
  --c->count;
  return index;
}

void HandleTable::Free(HandleCache* c, std::uint64_t index) {
  Entry(index).store(kEntryFree | c->head, std::memory_order_relaxed);
  c->head = index;
  if (++c->count <= kCacheHigh) return;
  internal::MutexLock lock(mu_);
  for (std::uint32_t k = 0; k < kBatch; ++k) {
    const std::uint64_t i = c->head;
    std::atomic<std::uint64_t>& e = Entry(i);
    c->head = e.load(std::memory_order_relaxed) & kHandleIndexMask;
    e.store(kEntryFree | free_head_, std::memory_order_relaxed);
    free_head_ = i;
  }
  c->count -= kBatch;
}

}  // namespace ztier::internal_pool
