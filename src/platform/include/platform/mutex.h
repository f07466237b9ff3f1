// mutex.h: std::mutex as a capability the thread-safety analysis knows
// (platform/thread_annotations.h), and its scoped holder.
//
//   Mutex mu;
//   int n ZT_GUARDED_BY(mu);
//   { MutexLock lock(mu); ++n; }
//   if (mu.TryLock()) { ++n; mu.Unlock(); }
//
// Same cost as std::mutex and std::lock_guard / std::unique_lock (all
// inline). libstdc++'s own types carry no annotations, so the engine's
// locks use these.
//
// Thread safety: as std::mutex. A MutexLock belongs to the thread that
// made it.
#ifndef ZTIER_PLATFORM_MUTEX_H_
#define ZTIER_PLATFORM_MUTEX_H_

#include <mutex>

#include "platform/thread_annotations.h"

namespace ztier::internal {

class ZT_CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ZT_ACQUIRE() { mu_.lock(); }
  bool TryLock() ZT_TRY_ACQUIRE(true) { return mu_.try_lock(); }
  void Unlock() ZT_RELEASE() { mu_.unlock(); }
  // Tells the analysis that the caller holds this mutex (after a function
  // it cannot follow took it); checks nothing at run time.
  void AssertHeld() const ZT_ASSERT_CAPABILITY(this) {}

 private:
  std::mutex mu_;
};

// Holds mu from construction to destruction.
class ZT_SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) ZT_ACQUIRE(mu) : mu_(mu) { mu_.Lock(); }
  ~MutexLock() ZT_RELEASE() { mu_.Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex& mu_;
};

}  // namespace ztier::internal

#endif  // ZTIER_PLATFORM_MUTEX_H_
