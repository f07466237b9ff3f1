// worker_pool.cc: WorkerPool (include/ztier/worker_pool.h).
//
// A job lives on its caller's stack:
//
//   Run(n, fn):  Job{fn, n, next=1, remaining=n}
//     1. push &job on queue (under mu), wake a sleeping worker if any
//     2. run fn(0), then claim lanes from job.next until they run out
//     3. take job off queue if it is still there (under mu)
//     4. wait until job.remaining == 0 (spin, then sleep on done_cv)
//
// A lane is claimed exactly once, by whoever gets it first from
// job.next.fetch_add(1): the caller without the lock, a worker under mu (so
// that the job it looks at is still queued, hence still alive). The worker
// that claims the last lane, or none, takes the job off the queue.
//
// Lifetime rule: a worker touches a job only (a) under mu while it is queued
// and (b) between claiming a lane and its final remaining.fetch_sub(), which
// is its last access. So when the caller sees remaining == 0 and the job off
// the queue, no worker holds a pointer to it.
//
// An exception from fn, on a worker or the caller, is kept in the job (the
// first one) and rethrown by Run once every lane has finished: the job and
// what fn refers to live on the caller's stack, and must not be unwound
// while a worker still runs a lane of it.
//
// Idle workers spin for spin_us watching queued (one relaxed load per
// iteration, no lock) before sleeping on work_cv, yielding the CPU every
// few microseconds (see the header). Waking one costs a futex call only when
// it sleeps.
#include "ztier/worker_pool.h"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cassert>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "platform/clock.h"
#include "platform/cpu_relax.h"

namespace ztier {
namespace {

struct Job {
  const std::function<void(std::size_t)>* fn;
  std::size_t n;
  std::atomic<std::size_t> next{1};       // lane 0 belongs to the caller
  std::atomic<std::size_t> remaining{0};  // lanes not yet finished
  std::atomic<bool> failed{false};
  std::exception_ptr error;  // the first lane's exception (set by failed)

  // Runs lane `lane`, keeping an exception for the caller.
  void RunLane(std::size_t lane) noexcept {
    try {
      (*fn)(lane);
    } catch (...) {
      if (!failed.exchange(true, std::memory_order_acq_rel)) {
        error = std::current_exception();
      }
    }
  }
};

}  // namespace

struct WorkerPool::Impl {
  explicit Impl(unsigned spin) : spin_us(spin) {}

  void WorkerLoop();
  // Under mu: claims a lane of the oldest queued job. False if none.
  bool ClaimLocked(Job** job, std::size_t* lane);
  void RemoveLocked(Job* job);
  void Finish(Job* job);
  // Run's end: takes the job off the queue and waits until every lane of
  // it has finished (spinning briefly, then on done_cv).
  void WaitForLanes(Job& job);
  bool SpinForWork();

  const unsigned spin_us;
  std::vector<std::thread> threads;

  std::mutex mu;
  std::condition_variable work_cv;     // workers sleep here
  std::condition_variable done_cv;     // callers waiting for their lanes
  std::vector<Job*> queue;             // guarded by mu; oldest first
  std::size_t sleepers = 0;            // guarded by mu
  bool stop = false;                   // guarded by mu
  std::atomic<std::size_t> queued{0};  // queue.size(), readable without mu
  // Callers asleep on done_cv (see Finish).
  std::atomic<std::size_t> done_waiters{0};
};

bool WorkerPool::Impl::ClaimLocked(Job** job, std::size_t* lane) {
  while (!queue.empty()) {
    Job* j = queue.front();
    const std::size_t n = j->n;
    const std::size_t l = j->next.fetch_add(1, std::memory_order_relaxed);
    // Once off the queue, j may be gone unless we hold a lane of it.
    if (l + 1 >= n) RemoveLocked(j);  // last lane (or none) claimed
    if (l < n) {
      *job = j;
      *lane = l;
      return true;
    }
  }
  return false;
}

void WorkerPool::Impl::RemoveLocked(Job* job) {
  auto it = std::find(queue.begin(), queue.end(), job);
  if (it == queue.end()) return;
  queue.erase(it);
  queued.store(queue.size(), std::memory_order_release);
}

// Takes no lock unless a caller sleeps: the caller registers in
// done_waiters before it reads `remaining` for the last time, and a worker
// reads done_waiters after its decrement, all sequentially consistent, so
// one of them sees the other (a sleeping caller is woken, or it did not
// sleep); taking mu before notifying keeps the wake-up from falling between
// the caller's last look and its wait.
void WorkerPool::Impl::Finish(Job* job) {
  // Last access to *job: after this the caller may return.
  job->remaining.fetch_sub(1, std::memory_order_seq_cst);
  if (done_waiters.load(std::memory_order_seq_cst) != 0) {
    std::lock_guard<std::mutex> lock(mu);
    done_cv.notify_all();
  }
}

// Spins up to spin_us for queued work. True if some appeared.
bool WorkerPool::Impl::SpinForWork() {
  if (spin_us == 0) return false;
  const auto deadline =
      platform::MonotonicClock::now() + std::chrono::microseconds(spin_us);
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (queued.load(std::memory_order_relaxed) != 0) return true;
      platform::CpuRelax();
    }
    if (platform::MonotonicClock::now() >= deadline) return false;
    sched_yield();
  }
}

void WorkerPool::Impl::WorkerLoop() {
  for (;;) {
    Job* job = nullptr;
    std::size_t lane = 0;
    {
      std::unique_lock<std::mutex> lock(mu);
      if (!ClaimLocked(&job, &lane)) {
        if (stop) return;
        lock.unlock();
        if (SpinForWork()) continue;
        lock.lock();
        ++sleepers;
        work_cv.wait(lock, [&] { return stop || !queue.empty(); });
        --sleepers;
        continue;
      }
    }
    job->RunLane(lane);
    Finish(job);
  }
}

WorkerPool::WorkerPool(std::size_t workers, unsigned spin_us)
    : impl_(std::make_unique<Impl>(spin_us)) {
  impl_->queue.reserve(16);
  impl_->threads.reserve(workers);
  for (std::size_t i = 0; i < workers; ++i) {
    impl_->threads.emplace_back([impl = impl_.get()] { impl->WorkerLoop(); });
  }
}

WorkerPool::~WorkerPool() {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->stop = true;
  }
  impl_->work_cv.notify_all();
  for (auto& t : impl_->threads) t.join();
}

std::size_t WorkerPool::lanes() const { return impl_->threads.size() + 1; }

void WorkerPool::Run(std::size_t n,
                     const std::function<void(std::size_t)>& fn) {
  assert(n >= 1);
  Impl& im = *impl_;
  if (n == 1 || im.threads.empty()) {
    for (std::size_t lane = 0; lane < n; ++lane) fn(lane);
    return;
  }
  Job job;
  job.fn = &fn;
  job.n = n;
  job.remaining.store(n, std::memory_order_relaxed);
  bool wake;
  {
    std::lock_guard<std::mutex> lock(im.mu);
    im.queue.push_back(&job);
    im.queued.store(im.queue.size(), std::memory_order_release);
    wake = im.sleepers > 0;
  }
  if (wake) {
    if (n == 2) {
      im.work_cv.notify_one();
    } else {
      im.work_cv.notify_all();
    }
  }

  // Lane 0, then whatever no worker has taken yet.
  std::size_t lane = 0;
  do {
    job.RunLane(lane);
    job.remaining.fetch_sub(1, std::memory_order_acq_rel);
    lane = job.next.fetch_add(1, std::memory_order_relaxed);
  } while (lane < n);
  im.WaitForLanes(job);
  // Every lane has finished: the job may go, and with it an exception.
  if (job.failed.load(std::memory_order_acquire)) {
    std::rethrow_exception(job.error);
  }
}

void WorkerPool::Impl::WaitForLanes(Job& job) {
  Impl& im = *this;

  // Every lane is claimed; no worker may find the job any more.
  std::unique_lock<std::mutex> lock(im.mu, std::defer_lock);
  if (im.queued.load(std::memory_order_acquire) != 0) {
    lock.lock();
    im.RemoveLocked(&job);
    lock.unlock();
  }
  // (A worker that claimed job.next beyond n under mu already removed it, and
  // one that still sees it queued must first take mu, which we held.)

  // Lanes still running on workers: each is short, so spin briefly first.
  for (int i = 0; i < 4096; ++i) {
    if (job.remaining.load(std::memory_order_acquire) == 0) return;
    platform::CpuRelax();
    if (i % 64 == 63) sched_yield();  // see SpinForWork
  }
  lock.lock();
  im.done_waiters.fetch_add(1, std::memory_order_seq_cst);
  im.done_cv.wait(
      lock, [&] { return job.remaining.load(std::memory_order_seq_cst) == 0; });
  im.done_waiters.fetch_sub(1, std::memory_order_relaxed);
}

}  // namespace ztier
