// shared_stream.cc: the shared-stream baseline (see shared_stream.h).
#include "shared_stream.h"

#include <sched.h>

namespace ztier::tool {

SharedStreamStore::SharedStreamStore(PageStore& store, bool shared,
                                     std::size_t cpus)
    : store_(store),
      shared_(shared),
      cpus_(cpus == 0 ? 1 : cpus),
      streams_(shared ? std::make_unique<std::mutex[]>(cpus_) : nullptr) {}

std::unique_lock<std::mutex> SharedStreamStore::HoldThisCpu() {
  const int cpu = sched_getcpu();
  return std::unique_lock<std::mutex>(
      streams_[cpu < 0 ? 0 : static_cast<std::size_t>(cpu) % cpus_]);
}

Status SharedStreamStore::Store(std::uint64_t index, ConstPage page) {
  if (!shared_) return store_.Store(index, page);
  auto held = HoldThisCpu();
  return store_.Store(index, page);
}

Status SharedStreamStore::Load(std::uint64_t index, MutablePage out) {
  if (!shared_) return store_.Load(index, out);
  auto held = HoldThisCpu();
  return store_.Load(index, out);
}

}  // namespace ztier::tool
