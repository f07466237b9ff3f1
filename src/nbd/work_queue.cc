// work_queue.cc: the shared worker threads of work_queue.h.
#include "work_queue.h"

#include <cassert>
#include <chrono>
#include <exception>
#include <string>
#include <utility>

#include "connection.h"  // Job

namespace ztier::nbd {

WorkQueue::WorkQueue(std::size_t workers, std::function<void(Job*)> run,
                     std::function<void(const std::string&)> log,
                     int extra_idle_ms)
    : run_(std::move(run)),
      log_(std::move(log)),
      extra_idle_ms_(extra_idle_ms) {
  try {
    threads_.reserve(workers);
    for (std::size_t i = 0; i < workers; ++i) {
      threads_.emplace_back([this] { Loop(nullptr); });
    }
    watcher_ = std::thread([this] { Watch(); });
  } catch (...) {
    {
      std::lock_guard l(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
    throw;
  }
}

WorkQueue::~WorkQueue() {
  {
    std::lock_guard l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  extra_cv_.notify_all();
  watch_cv_.notify_all();
  watcher_.join();
  for (auto& t : threads_) t.join();
  for (Extra& e : extra_) {
    if (e.thread.joinable()) e.thread.join();
  }
  assert(ring_head_ == nullptr);
}

void WorkQueue::Push(Job* job) {
  std::condition_variable* wake;
  {
    std::lock_guard l(mu_);
    wake = Append(job);
  }
  if (wake != nullptr) wake->notify_one();
}

void WorkQueue::PushBack(Job* job) {
  std::lock_guard l(mu_);
  Append(job);  // the worker calling takes the next job itself
}

std::size_t WorkQueue::threads() const {
  std::lock_guard l(mu_);
  return threads_.size() + extras_;
}

void WorkQueue::LinkLast(Lane* lane) {
  lane->next = nullptr;
  lane->in_ring = true;
  if (ring_tail_ == nullptr) {
    ring_head_ = lane;
  } else {
    ring_tail_->next = lane;
  }
  ring_tail_ = lane;
}

std::condition_variable* WorkQueue::Append(Job* job) {
  Lane* const lane = job->lane;
  assert(lane != nullptr);
  job->next = nullptr;
  if (lane->tail == nullptr) {
    lane->head = job;
  } else {
    lane->tail->next = job;
  }
  lane->tail = job;
  if (!lane->in_ring) LinkLast(lane);
  ++queued_;
  // idle_ counts a thread woken for an earlier job until it takes one, so
  // each queued job is matched with a waiting thread: a worker while there
  // are enough, then an extra thread.
  std::condition_variable* wake = nullptr;
  if (idle_ >= queued_) {
    wake = &cv_;
  } else if (idle_ + idle_extra_ >= queued_) {
    wake = &extra_cv_;
  } else if (!watching_) {
    watching_ = true;
    watch_cv_.notify_one();
  }
  return wake;
}

void WorkQueue::Loop(Extra* extra) {
  std::unique_lock l(mu_);
  for (;;) {
    if (ring_head_ == nullptr) {
      if (stop_) break;
      if (extra == nullptr) {
        ++idle_;
        cv_.wait(l, [this] { return stop_ || ring_head_ != nullptr; });
        --idle_;
      } else {
        ++idle_extra_;
        const bool woken = extra_cv_.wait_for(
            l, std::chrono::milliseconds(extra_idle_ms_),
            [this] { return stop_ || ring_head_ != nullptr; });
        --idle_extra_;
        if (!woken) break;  // no job for extra_idle_ms: not needed now
      }
      continue;
    }
    Job* job = Take();
    l.unlock();
    run_(job);
    l.lock();
  }
  if (extra != nullptr) {
    --extras_;
    extra->done = true;
    reap_ = true;
    watch_cv_.notify_one();
  }
}

Job* WorkQueue::Take() {
  Lane* const lane = ring_head_;
  ring_head_ = lane->next;
  if (ring_head_ == nullptr) ring_tail_ = nullptr;
  Job* const job = lane->head;
  lane->head = job->next;
  if (lane->head == nullptr) {
    lane->tail = nullptr;
    lane->in_ring = false;
  } else {
    LinkLast(lane);
  }
  ++taken_;
  --queued_;
  return job;
}

bool WorkQueue::StartExtra() {
  for (Extra& e : extra_) {
    if (e.thread.joinable()) continue;
    try {
      e.thread = std::thread([this, &e] { Loop(&e); });
    } catch (const std::exception&) {
      return false;  // no thread to be had (a task limit, no memory)
    }
    ++extras_;
    return true;
  }
  return false;
}

void WorkQueue::JoinDone(std::unique_lock<std::mutex>& l) {
  std::array<std::thread, kMaxExtraWorkers> done;
  std::size_t n = 0;
  for (Extra& e : extra_) {
    if (!e.done) continue;
    done[n++] = std::move(e.thread);  // the slot is free again
    e.done = false;
  }
  reap_ = false;
  l.unlock();  // a thread's exit (its thread_local state) takes a while
  for (std::size_t i = 0; i < n; ++i) done[i].join();
  l.lock();
}

void WorkQueue::Log(std::unique_lock<std::mutex>& l, const std::string& line) {
  if (!log_) return;
  l.unlock();
  try {
    log_(line);
  } catch (...) {
  }
  l.lock();
}

void WorkQueue::Watch() {
  std::unique_lock l(mu_);
  // Jobs that the threads the last decision woke or started may take in
  // the next period without that counting as progress.
  std::uint64_t credit = 0;
  for (;;) {
    watch_cv_.wait(l, [this] { return stop_ || watching_ || reap_; });
    if (stop_) return;
    if (reap_) {
      JoinDone(l);
      continue;
    }
    // One period, and whether jobs left the queue meanwhile.
    const bool was_empty = ring_head_ == nullptr;
    const std::uint64_t seen = taken_;
    watch_cv_.wait_for(l, std::chrono::milliseconds(kStarvedMs),
                       [this] { return stop_; });
    if (stop_) return;
    const std::uint64_t rescued = std::exchange(credit, 0);
    if (ring_head_ == nullptr) {
      if (was_empty) {  // empty at both ends: asleep until a job waits
        watching_ = false;
        start_failed_ = false;
      }
      continue;
    }
    if (was_empty || taken_ - seen > rescued) continue;  // being taken
    // A job waited the whole period, and no thread took one of its own.
    if (idle_ + idle_extra_ > 0) {  // wake-ups that went to threads woken
      credit = idle_ + idle_extra_;
      cv_.notify_all();
      extra_cv_.notify_all();
    } else if (extras_ < kMaxExtraWorkers) {
      const bool first = extras_ == 0;
      if (StartExtra()) {
        credit = 1;
        if (first) {
          Log(l, "warning: nbd: requests waited " + std::to_string(kStarvedMs) +
                     " ms with every worker busy (blocked in a slow backing "
                     "store?): starting more workers, up to " +
                     std::to_string(kMaxExtraWorkers) + " beyond --workers");
        }
      } else if (!start_failed_) {
        start_failed_ = true;
        Log(l,
            "warning: nbd: every worker is busy and no thread can be "
            "started for another; requests wait");
      }
    }
  }
}

}  // namespace ztier::nbd
