// File: tools/ztier/shared_stream.h
//
// The shared-stream baseline of `ztier bench latency` (bench_latency.cc):
// the design before the zswap load contention series (docs/references.md),
// injected around a PageStore so that the engine's hot path carries none
// of it. One mutex per CPU stream, chosen by the caller's CPU, held around
// the whole Store AND Load, so a load sleeps behind whatever store holds
// its CPU's stream, even a preempted one. With `shared` false, Store and
// Load go straight to the store (the engine's policy, stream_pool.h).
//
// Thread safety: any thread; the PageStore must outlive this object.
#ifndef ZTIER_TOOLS_ZTIER_SHARED_STREAM_H_
#define ZTIER_TOOLS_ZTIER_SHARED_STREAM_H_

#include <sched.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

#include "ztier/page_store.h"

namespace ztier::tool {

class SharedStreamStore {
 public:
  // `cpus`: how many per-CPU streams (a CPU past them shares one).
  SharedStreamStore(PageStore& store, bool shared, std::size_t cpus)
      : store_(store), streams_(shared ? std::max<std::size_t>(cpus, 1) : 0) {}

  Status Store(std::uint64_t index, ConstPage page) {
    auto held = HoldThisCpu();
    return store_.Store(index, page);
  }
  Status Load(std::uint64_t index, MutablePage out) {
    auto held = HoldThisCpu();
    return store_.Load(index, out);
  }
  // Takes this CPU's stream (sleeping while it is held), as a Store or
  // Load does, until the lock goes away; not shared: no lock.
  std::unique_lock<std::mutex> HoldThisCpu() {
    if (streams_.empty()) return {};
    const int cpu = sched_getcpu();
    return std::unique_lock(streams_[std::max(cpu, 0) % streams_.size()]);
  }

 private:
  PageStore& store_;
  std::vector<std::mutex> streams_;  // none when not shared
};

}  // namespace ztier::tool

#endif  // ZTIER_TOOLS_ZTIER_SHARED_STREAM_H_
