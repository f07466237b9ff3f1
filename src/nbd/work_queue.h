// work_queue.h: the worker threads that the connections of one NBD server
// share (connection.h), and their queue of jobs, first in, first out.
//
// `workers` threads run jobs for as long as the queue lives. A job can
// block in the device for long: a READ of a written-back page waits for
// the backing store, up to its timeout (a remote's outage, say). A few
// such jobs can hold every worker, and the requests of every other
// connection, served from RAM, would wait behind them. So once the job at
// the head of the queue has waited kStarvedMs with no worker free, one more
// thread starts, up to kMaxExtraWorkers beyond `workers`; an extra thread
// ends after kExtraIdleMs without a job. A watcher thread starts them. It
// waits without a deadline until a job is queued while no worker is free
// (or behind another queued job), and then looks again every kStarvedMs at
// most, until the queue is empty: a server whose workers keep up never
// wakes it, and a saturated one a few times a second.
//
// Thread safety: Push and PushBack may be called from any thread.
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
  static constexpr int kStarvedMs = 200;
  static constexpr std::size_t kMaxExtraWorkers = 32;
  static constexpr int kExtraIdleMs = 5000;

  // `run` runs a job (the server's: job->conn->RunJob(job)); an extra
  // thread ends after `extra_idle_ms` without a job. `log`, if set, gets a
  // warning line when extra threads start where none ran.
  WorkQueue(std::size_t workers, std::function<void(Job*)> run,
            std::function<void(const std::string&)> log = nullptr,
            int extra_idle_ms = kExtraIdleMs);
  ~WorkQueue();  // REQUIRES: no job queued or running (connections joined)
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  // Queues `job`, last; a worker runs it.
  void Push(Job* job);
  // From a worker's RunJob: queues `job` again, last, waking nobody (the
  // worker takes the next job itself when RunJob returns).
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
  // Under mu_: links `job` last, and wakes the watcher where it must look.
  void Append(Job* job);
  // Under mu_: starts an extra thread in a free slot, if one can be had.
  void StartExtra();
  // Under mu_: joins the extra threads that have returned.
  void JoinDone();

  const std::function<void(Job*)> run_;
  const std::function<void(const std::string&)> log_;
  const int extra_idle_ms_;
  mutable std::mutex mu_;
  std::condition_variable cv_;        // the workers: a job, or stop_
  std::condition_variable watch_cv_;  // the watcher
  Job* head_ = nullptr;
  Job* tail_ = nullptr;
  std::uint64_t head_since_ns_ = 0;  // when head_ became the head
  bool stop_ = false;
  std::size_t idle_ = 0;    // workers waiting for a job
  bool watching_ = false;   // the watcher looks every kStarvedMs
  bool reap_ = false;       // an extra thread returned
  std::size_t extras_ = 0;  // extra threads running
  std::vector<std::thread> threads_;
  std::array<Extra, kMaxExtraWorkers> extra_;
  std::thread watcher_;
};

}  // namespace ztier::nbd

#endif  // ZTIER_NBD_WORK_QUEUE_H_
