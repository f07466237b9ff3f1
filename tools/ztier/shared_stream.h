// File: tools/ztier/shared_stream.h
//
// The shared-stream baseline of the latency experiment (latency_run.h): the
// design before the zswap load contention series (docs/references.md),
// which `ztier bench latency --mode shared` measures against the engine's.
// It is injected around a PageStore by the benchmark, so the engine's hot
// path carries nothing of it.
//
// The baseline has one stream per CPU, each guarded by one mutex that
// stores AND loads take, the stream chosen by the CPU the caller runs on; a
// caller that finds it held sleeps on the mutex. A load then waits for
// whatever store holds its CPU's stream, even one that was preempted
// holding it. Here each CPU's mutex is held around the whole Store or Load
// (the engine's own stream is free whenever its CPU's mutex is held, with
// one engine stream per CPU).
//
// With `shared` false, Store and Load go straight to the store: the
// engine's own policy (stream_pool.h), where a load takes no stream.
//
// Thread safety: Store, Load and HoldThisCpu may be called from any
// thread; the PageStore must outlive this object.
#ifndef ZTIER_TOOLS_ZTIER_SHARED_STREAM_H_
#define ZTIER_TOOLS_ZTIER_SHARED_STREAM_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>

#include "ztier/page.h"
#include "ztier/page_store.h"
#include "ztier/status.h"

namespace ztier::tool {

class SharedStreamStore {
 public:
  // `cpus`: how many per-CPU streams (>= 1; a CPU past them shares one).
  SharedStreamStore(PageStore& store, bool shared, std::size_t cpus);

  Status Store(std::uint64_t index, ConstPage page);
  Status Load(std::uint64_t index, MutablePage out);

  // Takes the stream of the CPU this thread runs on (sleeping while it is
  // held), as a Store or Load here does, until the lock goes away.
  // REQUIRES: shared.
  std::unique_lock<std::mutex> HoldThisCpu();

 private:
  PageStore& store_;
  bool shared_;
  std::size_t cpus_;
  std::unique_ptr<std::mutex[]> streams_;
};

}  // namespace ztier::tool

#endif  // ZTIER_TOOLS_ZTIER_SHARED_STREAM_H_
