// File: tools/ztier/shared_stream.h
//
// The shared-stream baseline of `ztier bench latency` (latency_run.h): the
// design before the zswap load contention series (docs/references.md),
// injected around a PageStore so that the engine's hot path carries
// nothing of it. One stream per CPU, each guarded by one mutex that stores
// AND loads take, chosen by the CPU the caller runs on; a caller that finds
// it held sleeps on it, so a load waits for whatever store holds its CPU's
// stream, even a preempted one. The mutex is held around the whole Store or
// Load. With `shared` false, Store and Load go straight to the store: the
// engine's own policy (stream_pool.h), where a load takes no stream.
//
// Thread safety: every method may be called from any thread; the PageStore
// must outlive this object.
#ifndef ZTIER_TOOLS_ZTIER_SHARED_STREAM_H_
#define ZTIER_TOOLS_ZTIER_SHARED_STREAM_H_

#include <sched.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>

#include "ztier/page_store.h"

namespace ztier::tool {

class SharedStreamStore {
 public:
  // `cpus`: how many per-CPU streams (>= 1; a CPU past them shares one).
  SharedStreamStore(PageStore& store, bool shared, std::size_t cpus)
      : store_(store),
        shared_(shared),
        cpus_(cpus == 0 ? 1 : cpus),
        streams_(shared ? std::make_unique<std::mutex[]>(cpus_) : nullptr) {}

  Status Store(std::uint64_t index, ConstPage page) {
    if (!shared_) return store_.Store(index, page);
    auto held = HoldThisCpu();
    return store_.Store(index, page);
  }
  Status Load(std::uint64_t index, MutablePage out) {
    if (!shared_) return store_.Load(index, out);
    auto held = HoldThisCpu();
    return store_.Load(index, out);
  }
  // Takes this CPU's stream (sleeping while it is held), as a Store or
  // Load does, until the lock goes away. REQUIRES: shared.
  std::unique_lock<std::mutex> HoldThisCpu() {
    const int cpu = sched_getcpu();
    return std::unique_lock<std::mutex>(
        streams_[cpu < 0 ? 0 : static_cast<std::size_t>(cpu) % cpus_]);
  }

 private:
  PageStore& store_;
  bool shared_;
  std::size_t cpus_;
  std::unique_ptr<std::mutex[]> streams_;
};

}  // namespace ztier::tool

#endif  // ZTIER_TOOLS_ZTIER_SHARED_STREAM_H_
