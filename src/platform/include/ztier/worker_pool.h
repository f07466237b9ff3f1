// File: ztier/worker_pool.h
//
// A small pool of worker threads that runs one job's tasks in parallel with
// the calling thread: the software analogue of a compression accelerator's
// parallel engines, used by the parallel batch codec.
//
//   ztier::WorkerPool pool(1);              // 1 worker + the caller = 2 lanes
//   pool.Run(lanes, [&](size_t lane) { ... });  // returns when all are done
//
// Run(n, fn) calls fn(0) on the calling thread and fn(1..n-1) on workers
// (n <= lanes()), and returns once every call has returned. Several threads
// may call Run() at once; their jobs queue for the workers, and a caller whose
// helpers are all busy runs the remaining lanes itself, so Run() never waits
// for another job's work to finish before making progress on its own.
//
// Waking a sleeping thread on another CPU costs tens of microseconds on a VM
// (a 19.8 us round trip across vCPUs, measured on the 2-vCPU development
// machine), as long as compressing a batch of 8 pages with lz4. So an idle
// worker spins for `spin_us` before it sleeps: back-to-back batches find it
// awake. The cost is that CPU time while it spins; set spin_us to 0 where
// that matters more.
// A spinning thread calls sched_yield() every few microseconds, so that
// other work for its CPU (a kworker that a page fault on the other CPU may
// wait for) runs at once rather than at the next scheduler tick. Fresh
// fills of a store with the parallel backend, which fault memory in, ran
// 4 or 8 ms (one or two ticks) slower than the rest now and then. Over 60
// runs of 4,096 pages each way, alternating: 17 ran below 1,000 MB/s and
// the slowest at 591 without yielding; 10 and 970 with it (the median was
// about 1,050 both ways, the host being noisy then).
//
// An exception from fn, on any lane, is rethrown by Run() once every lane
// has returned (the first one, if several threw): what fn refers to on the
// caller's stack outlives the lanes that use it. (Where the caller runs
// every lane itself, with no workers or n == 1, the first exception ends
// Run at once: no lane is left running.)
//
// Thread safety: all methods may be called from any thread. fn must not call
// Run() on the same pool.
#ifndef ZTIER_WORKER_POOL_H_
#define ZTIER_WORKER_POOL_H_

#include <cstddef>
#include <functional>
#include <memory>

namespace ztier {

class WorkerPool {
 public:
  // Starts `workers` threads (0 is allowed: Run() then runs everything on the
  // caller).
  explicit WorkerPool(std::size_t workers, unsigned spin_us = 200);
  ~WorkerPool();  // joins the workers
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // Worker threads + 1 (the caller).
  std::size_t lanes() const;

  // Runs fn(0..n-1) across the caller and the workers; see the file comment.
  // REQUIRES: 1 <= n.
  void Run(std::size_t n, const std::function<void(std::size_t)>& fn);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ztier

#endif  // ZTIER_WORKER_POOL_H_
