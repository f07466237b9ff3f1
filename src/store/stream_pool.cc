// stream_pool.cc: see stream_pool.h for the policy.
#include "stream_pool.h"

#include <sched.h>

namespace ztier::internal {

Result<std::unique_ptr<StreamPool>> StreamPool::Create(
    std::shared_ptr<const Codec> codec, const BatchOptions& options,
    std::size_t count, std::size_t reserve) {
  if (count == 0) return Err(Status::InvalidArgument("0 compression streams"));
  std::unique_ptr<StreamPool> pool(new StreamPool());
  pool->codec_ = std::move(codec);
  pool->options_ = options;
  for (std::size_t i = 0; i < count; ++i) {
    ZT_ASSIGN_OR_RETURN(auto s, pool->NewStream());
    pool->regular_.push_back(std::move(s));
  }
  for (std::size_t i = 0; i < reserve; ++i) {
    ZT_ASSIGN_OR_RETURN(auto s, pool->NewStream());
    pool->reserve_.push_back(std::move(s));
  }
  pool->batch_size_ = pool->regular_[0]->batch->batch_size();
  return pool;
}

Result<std::unique_ptr<Stream>> StreamPool::NewStream() const {
  auto s = std::make_unique<Stream>();
  ZT_ASSIGN_OR_RETURN(s->batch, NewBatchCompressor(codec_, options_));
  s->buffers.reset(new (std::nothrow) std::byte[s->batch->batch_size() * kPageSize]);
  if (!s->buffers) return Err(Status::ResourceExhausted("stream buffers"));
  return s;
}

Stream* StreamPool::TryTakeAny() {
  const std::size_t n = regular_.size();
  const int cpu = sched_getcpu();
  const std::size_t first = cpu < 0 ? 0 : static_cast<std::size_t>(cpu) % n;
  for (std::size_t k = 0; k < n; ++k) {
    Stream& s = *regular_[(first + k) % n];
    if (TryTake(s)) return &s;
  }
  for (auto& s : reserve_) {
    if (TryTake(*s)) return s.get();
  }
  return nullptr;
}

StreamPool::Lease StreamPool::Acquire() {
  if (Stream* s = TryTakeAny()) return Lease(this, s);
  std::unique_lock<std::mutex> lock(mu_);
  // Announce the wait before looking, so that a Release() either sees the
  // announcement (and wakes us) or frees a stream the look below finds.
  // Both sides are seq_cst (Dekker's pattern): TryTake's first load of
  // `busy` too, or a weakly ordered CPU (aarch64) may read a stale `busy`
  // while Release reads no waiter, and this thread sleeps with every
  // stream free. (A fence would do as well, but TSan cannot check one.)
  waiters_.fetch_add(1, std::memory_order_seq_cst);
  for (;;) {
    if (Stream* got = TryTakeAny()) {
      waiters_.fetch_sub(1, std::memory_order_relaxed);
      return Lease(this, got);
    }
    released_.wait(lock);
  }
}

void StreamPool::VisitIdle(const std::function<void(Stream&)>& fn) {
  for (auto* streams : {&regular_, &reserve_}) {
    for (auto& s : *streams) {
      if (!TryTake(*s)) continue;
      // Given back on every way out: a stream fn throws from would stay
      // taken for good, and with every stream taken each store waits.
      struct GiveBack {
        StreamPool& pool;
        Stream* s;
        ~GiveBack() { pool.Release(s); }
      } give_back{*this, s.get()};
      fn(*s);
    }
  }
}

void StreamPool::Release(Stream* s) {
  s->busy.store(false, std::memory_order_seq_cst);
  if (waiters_.load(std::memory_order_seq_cst) > 0) {
    std::lock_guard<std::mutex> lock(mu_);
    released_.notify_all();
  }
}

}  // namespace ztier::internal
