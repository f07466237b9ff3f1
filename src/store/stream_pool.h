// stream_pool.h: the compression streams a PageStore's stores use.
//
// A stream is what one store needs to compress: a BatchCompressor (with its
// codec contexts) and batch_size() output buffers of one page each. Streams
// are created once and reused; a store takes one, compresses, copies the
// results into the pool, and gives it back. Loads never take a stream.
//
// Policy (who gets which stream, and what happens when they are all busy):
//   1. A store first tries the stream of the CPU it runs on (sched_getcpu()
//      modulo the count), as zram's per-CPU streams, then every other
//      stream, each with a try-lock: it never sleeps on a held stream, so a
//      store does not wait behind a store that was preempted while holding
//      one (the case the zswap load contention series leaves open).
//   2. If every regular stream is held, it takes a reserve stream (also by
//      try-lock). Reserve streams are created with the pool, not on first
//      need: creating a codec context allocates, and a store that did so
//      under a lock could keep another store waiting for milliseconds.
//   3. Only if the reserve is exhausted too does it sleep until any stream
//      is released.
// The PageStore allows twice as many reserve streams as regular ones, so
// that on each CPU a preempted store, a second low-priority store and a
// high-priority one can all hold a stream at once.
// Memory: (streams + reserve streams created) x (codec context + batch_size
// pages). For lz4 with the default batch of 8 that is about 16 KiB + 32 KiB
// per stream; zstd's context is larger (about 1 MiB at level 3).
//
// (The design before the zswap load contention series, one mutex-guarded
// stream per CPU shared by stores and loads, is not here: the latency
// benchmark reproduces it around the store, tools/ztier/shared_stream.h.)
//
// Lock order: a stream is taken before any slot lock (docs/architecture.md,
// "Lock order"), held while its holder takes slot and class locks, never
// taken under one. For Clang's analysis the StreamPool is a capability and
// a Lease a scoped one: Acquire() acquires it, the Lease's destructor
// releases it, so `make check-locks` rejects a second Acquire() while a
// Lease is held, or a call to a function marked ZT_EXCLUDES(the pool) (one
// that takes a stream itself). A Lease that is moved (rather than returned
// from Acquire()) is not followed: the code moves none.
//
// Thread safety: Acquire and the Lease's release may be called from any
// thread.
#ifndef ZTIER_STORE_STREAM_POOL_H_
#define ZTIER_STORE_STREAM_POOL_H_

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "platform/thread_annotations.h"
#include "ztier/batch_codec.h"
#include "ztier/codec.h"
#include "ztier/page.h"
#include "ztier/status.h"

namespace ztier::internal {

struct Stream {
  std::unique_ptr<BatchCompressor> batch;
  std::unique_ptr<std::byte[]> buffers;  // batch->batch_size() pages
  std::atomic<bool> busy{false};
  // The store's dictionary `batch` compresses with (page_store_impl.h,
  // "dictionaries"): its id, the store's dictionary generation when the
  // compressor was made, and the entry, held so that the id is not given
  // to another dictionary while this stream may still use it. Changed only
  // by the stream's holder.
  int dict_id = 0;
  std::uint64_t dict_generation = 0;
  std::shared_ptr<const void> dict_entry;

  std::span<std::byte> buffer(std::size_t i) {
    return {buffers.get() + i * kPageSize, kPageSize};
  }
};

// A capability ("stream"): holding a Lease from it is holding the pool's
// stream capability, which the analysis then tracks like a lock.
class ZT_CAPABILITY("stream") StreamPool {
 public:
  // Creates `count` regular streams (count >= 1) and `reserve` reserve ones.
  static Result<std::unique_ptr<StreamPool>> Create(
      std::shared_ptr<const Codec> codec, const BatchOptions& options,
      std::size_t count, std::size_t reserve);

  class ZT_SCOPED_CAPABILITY Lease {
   public:
    Lease(StreamPool* pool, Stream* s) ZT_ACQUIRE(pool) : pool_(pool), s_(s) {}
    Lease(Lease&& o) noexcept : pool_(o.pool_), s_(o.s_) { o.s_ = nullptr; }
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    ~Lease() ZT_RELEASE() {
      if (s_ != nullptr) pool_->Release(s_);
    }
    Stream* operator->() const { return s_; }
    Stream& operator*() const { return *s_; }

   private:
    StreamPool* pool_;
    Stream* s_;
  };

  // Takes a stream by the policy above. Never fails: if a reserve stream
  // cannot be created, it waits for a release instead.
  Lease Acquire() ZT_ACQUIRE();

  // Calls fn with each stream that is free now, taken for the call (so no
  // store uses it meanwhile); streams in use are skipped. The store uses
  // it to move idle streams to a new dictionary. `fn` must not Acquire().
  // A stream is given back when fn returns or throws.
  void VisitIdle(const std::function<void(Stream&)>& fn);

  std::size_t count() const { return regular_.size(); }
  std::size_t reserve_count() const { return reserve_.size(); }
  std::size_t batch_size() const { return batch_size_; }
  // Threads asleep in Acquire() (announced, not yet woken with a stream).
  int waiting() const { return waiters_.load(std::memory_order_seq_cst); }

 private:
  StreamPool() = default;
  Result<std::unique_ptr<Stream>> NewStream() const;
  void Release(Stream* s);
  // seq_cst throughout: see Acquire(). (On x86 a seq_cst load is a
  // plain load.)
  static bool TryTake(Stream& s) {
    return !s.busy.load(std::memory_order_seq_cst) &&
           !s.busy.exchange(true, std::memory_order_seq_cst);
  }

  std::shared_ptr<const Codec> codec_;
  BatchOptions options_;
  std::size_t batch_size_ = 0;
  std::vector<std::unique_ptr<Stream>> regular_;

  // Finding a free stream, regular or reserve, takes no lock, so a store
  // never waits behind a mutex held by a preempted store. mu_ guards only
  // the waiting when every stream is held.
  std::vector<std::unique_ptr<Stream>> reserve_;
  mutable std::mutex mu_;
  std::condition_variable released_;
  std::atomic<int> waiters_{0};

  Stream* TryTakeAny();
};

}  // namespace ztier::internal

#endif  // ZTIER_STORE_STREAM_POOL_H_
