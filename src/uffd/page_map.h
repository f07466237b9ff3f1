// page_map.h: a Region's per-page bookkeeping, one byte per 4 KiB page.
// Internal to src/uffd/.
//
//   bit  7         6       5        4     3    2    1..0
//       [refused][in_lru][lru_ref][wb][ra][ref][ state ]
//
//   state    untouched, resident, stored (in the PageStore: pool or
//            written back), poisoned (its slot failed to load; a touch
//            raises SIGBUS; the slot is freed)
//   ref      the CLOCK's reference bit: set at fault-in, cleared when the
//            hand passes
//   ra       read ahead and installed write-protected, not yet written
//   wb       stored and written back to the backing store
//   lru_ref  the shrinker's second-chance bit, set when stored
//   in_lru   the page has an entry in the shrinker's FIFO
//   refused  resident because its last eviction was refused: the CLOCK
//            passes it once more than a page faulted in (cleared when the
//            hand passes, or when the page's state changes)
//
// Thread safety: none; the Region's mutex guards it.
#ifndef ZTIER_UFFD_PAGE_MAP_H_
#define ZTIER_UFFD_PAGE_MAP_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ztier::internal {

enum class PageState : std::uint8_t {
  kUntouched = 0,
  kResident = 1,
  kStored = 2,
  kPoisoned = 3,
};

class PageMap {
 public:
  static constexpr std::uint8_t kStateMask = 0x3;
  static constexpr std::uint8_t kRef = 1u << 2;
  static constexpr std::uint8_t kReadAhead = 1u << 3;
  static constexpr std::uint8_t kWrittenBack = 1u << 4;
  static constexpr std::uint8_t kLruRef = 1u << 5;
  static constexpr std::uint8_t kInLru = 1u << 6;
  static constexpr std::uint8_t kRefused = 1u << 7;

  explicit PageMap(std::size_t pages) : bytes_(pages, 0) {}

  std::size_t size() const { return bytes_.size(); }

  PageState state(std::size_t i) const {
    return static_cast<PageState>(bytes_[i] & kStateMask);
  }
  void set_state(std::size_t i, PageState s) {
    bytes_[i] = static_cast<std::uint8_t>((bytes_[i] & ~kStateMask) |
                                          static_cast<std::uint8_t>(s));
  }
  bool is(std::size_t i, PageState s) const { return state(i) == s; }

  bool test(std::size_t i, std::uint8_t bits) const {
    return (bytes_[i] & bits) != 0;
  }
  void set(std::size_t i, std::uint8_t bits) { bytes_[i] |= bits; }
  void clear(std::size_t i, std::uint8_t bits) {
    bytes_[i] = static_cast<std::uint8_t>(bytes_[i] & ~bits);
  }

 private:
  std::vector<std::uint8_t> bytes_;
};

}  // namespace ztier::internal

#endif  // ZTIER_UFFD_PAGE_MAP_H_
