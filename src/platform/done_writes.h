// done_writes.h: DoneWrites, the results of writes a BackingFileWriter made
// at once (in Queue), kept for its next Reap to report in order. Used by
// the pwrite writer (posix_backing_file.cc) and the in-memory file. One
// thread at a time, as the writer.
#ifndef ZTIER_PLATFORM_DONE_WRITES_H_
#define ZTIER_PLATFORM_DONE_WRITES_H_

#include <cstddef>
#include <functional>
#include <utility>
#include <vector>

namespace ztier::internal {

class DoneWrites {
 public:
  // Room for `ios` results, one per IO of the writer: Add never allocates,
  // so a write made is never left unreported (BlockWriter counts it in
  // flight before Queue). May throw std::bad_alloc.
  explicit DoneWrites(std::size_t ios) { done_.reserve(ios); }
  void Add(std::size_t io, long result) { done_.emplace_back(io, result); }
  // Calls done(io, result) for each, in the order added, and forgets them.
  // Returns how many.
  std::size_t Report(const std::function<void(std::size_t, long)>& done) {
    const std::size_t n = done_.size();
    for (const auto& [io, result] : done_) done(io, result);
    done_.clear();
    return n;
  }

 private:
  std::vector<std::pair<std::size_t, long>> done_;
};

}  // namespace ztier::internal

#endif  // ZTIER_PLATFORM_DONE_WRITES_H_
