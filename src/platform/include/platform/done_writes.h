// platform/done_writes.h: DoneWrites, the results of writes a
// BackingFileWriter has seen end (in Queue, or in Reap before it reports),
// kept for Reap to report in order. Used by the pwrite writer
// (posix_backing_file.cc), the in-memory file and the NBD writer
// (nbd/nbd_backing_file.cc). One thread at a time, as the writer.
//
// A `done` may queue a write again (ztier/backing_file.h): Report hands
// out only the results it held when called, each taken out before its
// `done` runs, so what `done` adds waits for the next Report. That keeps
// one slot per IO enough (Add never allocates) and ends every Report, as
// the io_uring writer does with the writes it failed (uring_writer.cc).
#ifndef ZTIER_PLATFORM_DONE_WRITES_H_
#define ZTIER_PLATFORM_DONE_WRITES_H_

#include <cassert>
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
  explicit DoneWrites(std::size_t ios) : done_(ios) {}
  // REQUIRES: io's previous result, if any, was reported (an IO is held at
  // most once, so the ring never overflows).
  void Add(std::size_t io, long result) {
    assert(count_ < done_.size());
    done_[(head_ + count_) % done_.size()] = {io, result};
    ++count_;
  }
  // Calls done(io, result) for each result held when called, in the order
  // added, and forgets each before its `done` runs. Those added by `done`
  // are the next Report's; so are those left when `done` throws. Returns
  // how many it reported.
  std::size_t Report(const std::function<void(std::size_t, long)>& done) {
    const std::size_t n = count_;
    for (std::size_t k = n; k > 0; --k) {
      const auto [io, result] = done_[head_];
      head_ = (head_ + 1) % done_.size();
      --count_;
      done(io, result);
    }
    return n;
  }

 private:
  // A ring of one slot per IO: count_ results from head_.
  std::vector<std::pair<std::size_t, long>> done_;
  std::size_t head_ = 0;
  std::size_t count_ = 0;
};

}  // namespace ztier::internal

#endif  // ZTIER_PLATFORM_DONE_WRITES_H_
