// File: ztier/page.h
//
// The unit ztier stores: one 4096-byte page. zram and zswap work in pages of
// the host's PAGE_SIZE; ztier fixes it at 4096 so that stored data, corpora
// and backing-store blocks mean the same on every host.
#ifndef ZTIER_PAGE_H_
#define ZTIER_PAGE_H_

#include <cstddef>
#include <span>

namespace ztier {

inline constexpr std::size_t kPageSize = 4096;
inline constexpr std::size_t kPageShift = 12;
static_assert(std::size_t{1} << kPageShift == kPageSize);

using ConstPage = std::span<const std::byte, kPageSize>;
using MutablePage = std::span<std::byte, kPageSize>;

}  // namespace ztier

#endif  // ZTIER_PAGE_H_
