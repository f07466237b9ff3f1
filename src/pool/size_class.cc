// File: pool/size_class.cc
//
// The class table: 255 classes every 16 bytes from 32 to 4096. Each class
// gets the zspage length (1..max_pages OS pages) that wastes the smallest
// fraction of the zspage's tail, ties going to fewer pages; classes with the
// same (pages, objects) merge into the largest of them, and the (1 page, 1
// object) classes at the top merge into the 4096-byte huge class.
//
// Unlike zsmalloc (which compares integer percentages, so near-ties round to
// fewer pages: 123 merged classes at chain 8) we compare the exact waste
// fractions: 119 merged classes at chain 8, slightly less waste. The huge
// watermark is the same: 3632 bytes at chain 8.
#include <cassert>

#include "pool_internal.h"

namespace ztier::internal_pool {

int ClassTable::MergedClassFor(std::size_t size) const {
  assert(size >= 1 && size <= kPageSize);
  if (size >= huge_size) return kHugeClass;
  const std::size_t i =
      size <= kMinAllocSize ? 0 : (size - kMinAllocSize + kClassDelta - 1) / kClassDelta;
  return merged[i];
}

ClassTable BuildClassTable(std::size_t max_pages) {
  assert(max_pages >= 1 && max_pages <= kMaxPagesPerZspage);
  ClassTable t;
  for (int i = 0; i < kNumClasses; ++i) {
    std::size_t size = kMinAllocSize + static_cast<std::size_t>(i) * kClassDelta;
    if (size > kPageSize) size = kPageSize;
    std::size_t best_pages = 1;
    std::size_t best_waste = kPageSize % size;
    for (std::size_t k = 2; k <= max_pages; ++k) {
      const std::size_t waste = (k * kPageSize) % size;
      // waste / k < best_waste / best_pages, exactly.
      if (waste * best_pages < best_waste * k) {
        best_pages = k;
        best_waste = waste;
      }
    }
    t.geometry[i] = {static_cast<std::uint32_t>(size),
                     static_cast<std::uint32_t>(best_pages),
                     static_cast<std::uint32_t>(best_pages * kPageSize / size)};
  }
  t.merged[kHugeClass] = kHugeClass;
  for (int i = kHugeClass - 1; i >= 0; --i) {
    const ClassGeometry& up = t.geometry[t.merged[i + 1]];
    const ClassGeometry& g = t.geometry[i];
    t.merged[i] = (g.pages == up.pages && g.objs == up.objs)
                      ? t.merged[i + 1]
                      : static_cast<std::uint16_t>(i);
  }
  // The largest class packing more than one object per zspage.
  t.huge_size = kPageSize;
  for (int i = kHugeClass; i >= 0; --i) {
    if (t.geometry[t.merged[i]].objs > 1) {
      t.huge_size = t.geometry[t.merged[i]].size;
      break;
    }
  }
  return t;
}

}  // namespace ztier::internal_pool
