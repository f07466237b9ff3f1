// id_set.h: IdSet, the ids 0..max that are in use and the lowest free one,
// for DeviceRegistry's zramN names (device.cc). Internal to ztier_device.
#ifndef ZTIER_DEVICE_ID_SET_H_
#define ZTIER_DEVICE_ID_SET_H_

#include <climits>
#include <optional>
#include <set>

namespace ztier {

// Finds the lowest free id in O(log n) rather than by trying 0, 1, ... in
// turn: every id below `next_` is in use except those in `free_`; an id at
// or above it is in use when in `above_` (one taken by Take).
//
// Thread safety: none; the owner locks.
class IdSet {
 public:
  explicit IdSet(int max = INT_MAX) : max_(max) {}

  // Marks `id` in use. REQUIRES: 0 <= id <= max, and it is free.
  void Take(int id) {
    if (id < next_) {
      free_.erase(id);
    } else {
      above_.insert(id);
    }
  }
  // Marks `id` free. REQUIRES: it is in use.
  void GiveBack(int id) {
    if (id < next_) {
      free_.insert(id);
    } else {
      above_.erase(id);
    }
  }
  // The lowest free id, taken; none once every id to max is in use.
  std::optional<int> TakeLowest() {
    if (!free_.empty()) return free_.extract(free_.begin()).value();
    // Each id skipped here was put in above_ by one Take: amortised
    // O(log n).
    while (!above_.empty() && *above_.begin() == next_) {
      above_.erase(above_.begin());
      ++next_;
    }
    if (next_ > max_) return std::nullopt;
    return static_cast<int>(next_++);
  }

 private:
  const int max_;
  long long next_ = 0;  // max_ + 1 once every id is below it
  std::set<int> free_;
  std::set<int> above_;
};

}  // namespace ztier

#endif  // ZTIER_DEVICE_ID_SET_H_
