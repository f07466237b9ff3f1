// File: pool/reserve.cc
//
// PageReserve: the preallocated part of a pool (PoolOptions::prealloc_bytes).
// One anonymous mapping, populated at creation (MADV_POPULATE_WRITE, Linux
// 5.14+; before that, one write per page), so that no page of it is ever
// faulted in later. Its pages are never given back to the OS: zspages freed
// or packed by compaction leave their pages here, resident, for the next
// zspage. That is the point of a reserve on a swap device: a store under
// memory pressure must not need a page from the kernel.
//
// Runs of 1..16 pages are cut from it with splitting and coalescing, so
// that zspages of every length share the reserve (the lazy arenas keep one
// stack of runs per length instead, which is fine only where address space
// is free):
//   - free runs sit in 17 bins: bins 1..16 hold runs of exactly that many
//     pages, bin 17 the longer ones; a bit mask says which bins are empty.
//   - Allocate(n) takes a run from bin n, else from the smallest non-empty
//     longer bin, and splits it: the front n pages go out, the rest goes
//     back to its bin.
//   - Release() merges the run with a free neighbour on either side
//     (boundary tags: the first and the last page of each free run hold its
//     length, every other page 0), so freed space becomes one run again.
// External fragmentation remains possible in principle (free pages in runs
// too short for a long zspage); see docs/swap.md.
//
// Bookkeeping: 3 x 4 bytes per page (tags and bin links) plus the zspage
// bitmaps of 2 x 8 bytes per page (Bitmap() below): 28 bytes per 4 KiB page,
// 0.7% of the reserve, made at creation. Not thread-safe: the Arena's mutex
// guards it.
#include <bit>
#include <cassert>
#include <cstring>
#include <new>
#include <string>

#include "pool_internal.h"

namespace ztier::internal_pool {
namespace {

constexpr std::uint32_t kNone = UINT32_MAX;

int BinFor(std::size_t len) {
  return len > kMaxPagesPerZspage ? PageReserve::kLongBin
                                  : static_cast<int>(len);
}

}  // namespace

Result<std::unique_ptr<PageReserve>> PageReserve::Create(std::size_t pages) {
  if (pages == 0 || pages >= kNone) {
    return Err(Status::InvalidArgument("pool: bad reserve size"));
  }
  std::unique_ptr<PageReserve> r(new PageReserve());
  const std::size_t bytes = pages * kPageSize;
  // Charged, not MAP_NORESERVE: the reserve is committed memory, so a host
  // that does not overcommit refuses it here, not at a page fault later.
  const std::string mib = std::to_string(bytes >> 20) + " MiB reserve";
  ZT_ASSIGN_OR_RETURN(r->mapping_, platform::Mapping::Anonymous(
                                       bytes, platform::Commit::kCharged,
                                       "pool: map " + mib));
  r->base_ = r->mapping_.data();
  r->pages_ = pages;
  // On kernels before 5.14, which do not know MADV_POPULATE_WRITE, Populate
  // touches each page; a page that cannot be had then kills the process
  // with SIGBUS or the OOM killer instead of failing here (overcommit
  // accounting has at least said yes, the mapping being charged).
  ZT_RETURN_IF_ERROR(r->mapping_.Populate("pool: populate " + mib));
  r->tag_.reset(new (std::nothrow) std::uint32_t[pages]());
  r->next_.reset(new (std::nothrow) std::uint32_t[pages]);
  r->prev_.reset(new (std::nothrow) std::uint32_t[pages]);
  r->bits_.reset(new (std::nothrow) std::uint64_t[2 * pages]());
  if (!r->tag_ || !r->next_ || !r->prev_ || !r->bits_) {
    return Err(Status::ResourceExhausted("pool: reserve bookkeeping"));
  }
  r->bins_.fill(kNone);
  r->Insert(0, static_cast<std::uint32_t>(pages));
  return r;
}

PageReserve::~PageReserve() = default;  // unmaps the reserve

void PageReserve::Insert(std::uint32_t first, std::uint32_t len) {
  tag_[first] = len;
  tag_[first + len - 1] = len;
  const int b = BinFor(len);
  next_[first] = bins_[b];
  prev_[first] = kNone;
  if (bins_[b] != kNone) prev_[bins_[b]] = first;
  bins_[b] = first;
  nonempty_ |= 1u << b;
  free_pages_ += len;
}

void PageReserve::Remove(std::uint32_t first, std::uint32_t len) {
  const int b = BinFor(len);
  if (prev_[first] != kNone) {
    next_[prev_[first]] = next_[first];
  } else {
    bins_[b] = next_[first];
    if (bins_[b] == kNone) nonempty_ &= ~(1u << b);
  }
  if (next_[first] != kNone) prev_[next_[first]] = prev_[first];
  tag_[first] = 0;
  tag_[first + len - 1] = 0;
  free_pages_ -= len;
}

std::byte* PageReserve::Allocate(std::size_t n) {
  assert(n >= 1 && n <= kMaxPagesPerZspage);
  // Bins n, n+1, ..., kLongBin.
  const std::uint32_t fits = nonempty_ & ~((1u << n) - 1);
  if (fits == 0) return nullptr;
  const int b = std::countr_zero(fits);
  const std::uint32_t first = bins_[b];
  const std::uint32_t len = tag_[first];
  assert(len >= n && BinFor(len) == b);
  Remove(first, len);
  const auto want = static_cast<std::uint32_t>(n);
  if (len > want) Insert(first + want, len - want);
  return base_ + std::size_t{first} * kPageSize;
}

void PageReserve::Release(std::byte* run, std::size_t n) {
  assert(Contains(run));
  auto first = static_cast<std::uint32_t>((run - base_) / kPageSize);
  auto len = static_cast<std::uint32_t>(n);
  assert(first + len <= pages_);
  if (first > 0 && tag_[first - 1] != 0) {  // a free run ends just before
    const std::uint32_t left_len = tag_[first - 1];
    first -= left_len;
    Remove(first, left_len);
    len += left_len;
  }
  const std::uint32_t after = first + len;
  if (after < pages_ && tag_[after] != 0) {  // a free run starts just after
    const std::uint32_t right_len = tag_[after];
    Remove(after, right_len);
    len += right_len;
  }
  Insert(first, len);
}

std::uint64_t* PageReserve::Bitmap(const std::byte* run) {
  assert(Contains(run));
  return bits_.get() + 2 * static_cast<std::size_t>((run - base_) / kPageSize);
}

}  // namespace ztier::internal_pool
