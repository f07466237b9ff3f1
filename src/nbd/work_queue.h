// work_queue.h: the worker threads that the connections of one NBD server
// share (connection.h), and their queue of jobs.
//
// Each connection queues its jobs in its own Lane, first in, first out;
// the workers take from the lanes in turn (round robin), so that a client
// with many requests queued delays another client's by at most one of its
// own, not by all of them.
//
// `workers` threads run jobs for as long as the queue lives. A job can
// hold its worker for long: a READ of a written-back page waits for the
// backing store, up to its timeout (a remote's outage, say). A few such
// jobs can hold every worker, and the requests of every other connection,
// served from RAM, would wait behind them. So when no job has left the
// queue for a period of kStarvedMs while one waited and no thread was
// free, one more thread starts, up to kMaxExtraWorkers beyond `workers`.
// Any job that holds a worker that long counts (a write compressed with a
// slow codec too), not only a blocked read. A job goes to an idle worker
// first and to an idle extra thread only when none is idle, so that an
// extra thread that the load no longer needs finds no job for
// `extra_idle_ms`, and ends.
//
// A watcher thread starts them. It sleeps until a job is queued with no
// thread free to take it; then it looks every kStarvedMs, until it has
// found the queue empty at both ends of one period. So a server whose
// workers are free when requests come never wakes it, and a busy one a
// few times a second. The first extra thread starts 200 to 400 ms after
// jobs began to wait, the next ones one a period while they still do.
// Extra threads take what any thread takes on its first request: a stack,
// and the per-thread state of the engine (a decompression context, unit
// buffers): on a preallocated server (--prealloc) they are new memory,
// only while a request would otherwise wait, beside the buffers of
// requests larger than its slots' (connection.h).
//
// Thread safety: Push may be called from any thread; PushBack, only from
// a job being run (see there).
#ifndef ZTIER_NBD_WORK_QUEUE_H_
#define ZTIER_NBD_WORK_QUEUE_H_

#include <array>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace ztier::nbd {

struct Job;

class WorkQueue {
 public:
  // One connection's queued jobs (Job::lane); its owner keeps it until
  // none of its jobs is queued or running.
  struct Lane {
    Job* head = nullptr;
    Job* tail = nullptr;
    Lane* next = nullptr;  // in the ring of lanes with jobs
    bool in_ring = false;
  };

  static constexpr int kStarvedMs = 200;
  static constexpr std::size_t kMaxExtraWorkers = 32;
  static constexpr int kExtraIdleMs = 5000;

  // `run` runs a job (the server's: job->conn->RunJob(job)); an extra
  // thread ends after `extra_idle_ms` without a job. `log`, if set, gets a
  // warning line when extra threads start where none ran, and when one
  // cannot be started. Throws what starting a thread throws
  // (std::system_error: none to be had; std::bad_alloc), with no thread
  // left running.
  WorkQueue(std::size_t workers, std::function<void(Job*)> run,
            std::function<void(const std::string&)> log = nullptr,
            int extra_idle_ms = kExtraIdleMs);
  ~WorkQueue();  // REQUIRES: no job queued or running (connections joined)
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  // Queues `job` last in its lane (REQUIRES: job->lane); a worker runs it.
  void Push(Job* job);
  // Only from within `run`, which then returns: queues `job` again, last
  // in its lane, waking nobody (the thread takes the next job itself).
  void PushBack(Job* job);

  // The threads running jobs now, extra ones included.
  std::size_t threads() const;

 private:
  struct Extra {
    std::thread thread;  // joinable: the slot is taken
    bool done = false;   // its thread has returned, to be joined
  };
  void Loop(Extra* extra);
  void Watch();
  // Under mu_: puts `lane` at the end of the ring.
  void LinkLast(Lane* lane);
  // Under mu_: the next job, from the lane at the head of the ring, which
  // then goes to the ring's end if it has more. REQUIRES: ring_head_.
  Job* Take();
  // Under mu_: links `job` last; returns the condition variable to notify
  // (an idle worker's, else an idle extra thread's), or null. Wakes the
  // watcher where it must look.
  std::condition_variable* Append(Job* job);
  // Under mu_: starts an extra thread in a free slot; false when none can
  // be had.
  bool StartExtra();
  // Joins the extra threads that have returned, with mu_ (held by l)
  // dropped meanwhile.
  void JoinDone(std::unique_lock<std::mutex>& l);
  // log_(line), with mu_ (held by l) dropped meanwhile.
  void Log(std::unique_lock<std::mutex>& l, const std::string& line);

  const std::function<void(Job*)> run_;
  const std::function<void(const std::string&)> log_;
  const int extra_idle_ms_;
  mutable std::mutex mu_;
  std::condition_variable cv_;        // the workers: a job, or stop_
  std::condition_variable extra_cv_;  // the extra threads: the same
  std::condition_variable watch_cv_;  // the watcher
  Lane* ring_head_ = nullptr;         // the lanes with jobs, in turn
  Lane* ring_tail_ = nullptr;
  std::uint64_t taken_ = 0;  // jobs taken off the queue, ever
  std::size_t queued_ = 0;   // jobs in the queue now
  bool stop_ = false;
  std::size_t idle_ = 0;        // workers waiting for a job
  std::size_t idle_extra_ = 0;  // extra threads waiting for a job
  bool watching_ = false;       // the watcher looks every kStarvedMs
  bool reap_ = false;           // an extra thread returned
  bool start_failed_ = false;   // logged once an extra could not start
  std::size_t extras_ = 0;      // extra threads running
  std::vector<std::thread> threads_;
  std::array<Extra, kMaxExtraWorkers> extra_;
  std::thread watcher_;
};

}  // namespace ztier::nbd

#endif  // ZTIER_NBD_WORK_QUEUE_H_
