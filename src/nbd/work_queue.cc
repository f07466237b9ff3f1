// work_queue.cc: the shared worker threads of work_queue.h.
#include "work_queue.h"

#include <cassert>
#include <chrono>
#include <exception>
#include <string>
#include <system_error>
#include <utility>

#include "connection.h"  // Job
#include "platform/clock.h"

namespace ztier::nbd {

using platform::MonotonicNs;

WorkQueue::WorkQueue(std::size_t workers, std::function<void(Job*)> run,
                     std::function<void(const std::string&)> log,
                     int extra_idle_ms)
    : run_(std::move(run)),
      log_(std::move(log)),
      extra_idle_ms_(extra_idle_ms) {
  threads_.reserve(workers);
  for (std::size_t i = 0; i < workers; ++i) {
    threads_.emplace_back([this] { Loop(nullptr); });
  }
  watcher_ = std::thread([this] { Watch(); });
}

WorkQueue::~WorkQueue() {
  {
    std::lock_guard l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  watch_cv_.notify_all();
  watcher_.join();
  for (auto& t : threads_) t.join();
  for (Extra& e : extra_) {
    if (e.thread.joinable()) e.thread.join();
  }
  assert(head_ == nullptr);
}

void WorkQueue::Push(Job* job) {
  {
    std::lock_guard l(mu_);
    Append(job);
  }
  cv_.notify_one();
}

void WorkQueue::PushBack(Job* job) {
  std::lock_guard l(mu_);
  Append(job);
}

std::size_t WorkQueue::threads() const {
  std::lock_guard l(mu_);
  return threads_.size() + extras_;
}

void WorkQueue::Append(Job* job) {
  job->next = nullptr;
  const bool behind = head_ != nullptr;
  if (tail_ == nullptr) {
    head_ = tail_ = job;
    head_since_ns_ = MonotonicNs();
  } else {
    tail_->next = job;
    tail_ = job;
  }
  if ((behind || idle_ == 0) && !watching_) {
    watching_ = true;
    watch_cv_.notify_one();
  }
}

void WorkQueue::Loop(Extra* extra) {
  std::unique_lock l(mu_);
  for (;;) {
    ++idle_;
    if (extra == nullptr) {
      cv_.wait(l, [this] { return stop_ || head_ != nullptr; });
    } else {
      cv_.wait_for(l, std::chrono::milliseconds(extra_idle_ms_),
                   [this] { return stop_ || head_ != nullptr; });
    }
    --idle_;
    if (head_ == nullptr) {
      if (stop_ || extra != nullptr) break;  // stopping, or idle too long
      continue;
    }
    Job* job = head_;
    head_ = job->next;
    if (head_ == nullptr) tail_ = nullptr;
    head_since_ns_ = MonotonicNs();
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

void WorkQueue::StartExtra() {
  for (Extra& e : extra_) {
    if (e.thread.joinable()) continue;
    try {
      e.thread = std::thread([this, &e] { Loop(&e); });
      ++extras_;
    } catch (const std::system_error&) {
      // No thread to be had (a task limit): the jobs wait for the workers
      // there are.
    }
    return;
  }
}

void WorkQueue::JoinDone() {
  for (Extra& e : extra_) {
    if (!e.done) continue;
    e.thread.join();  // it has returned, or is about to (it set done last)
    e.done = false;
  }
  reap_ = false;
}

void WorkQueue::Watch() {
  std::unique_lock l(mu_);
  for (;;) {
    watch_cv_.wait(l, [this] { return stop_ || watching_ || reap_; });
    if (stop_) return;
    if (reap_) JoinDone();
    if (!watching_) continue;
    if (head_ == nullptr) {
      watching_ = false;  // drained: until a job waits again
      continue;
    }
    const std::uint64_t waited_ms = (MonotonicNs() - head_since_ns_) / 1000000;
    if (waited_ms >= static_cast<std::uint64_t>(kStarvedMs) && idle_ == 0 &&
        extras_ < kMaxExtraWorkers) {
      const bool first = extras_ == 0;
      StartExtra();
      head_since_ns_ = MonotonicNs();  // the next one after another wait
      if (first && extras_ > 0 && log_) {
        l.unlock();
        try {
          log_("warning: nbd: a request waited " + std::to_string(kStarvedMs) +
               " ms with every worker busy (blocked in a slow backing "
               "store?): starting more workers, up to " +
               std::to_string(kMaxExtraWorkers));
        } catch (const std::exception&) {
        }
        l.lock();
        continue;
      }
    }
    const std::uint64_t left_ms =
        waited_ms >= static_cast<std::uint64_t>(kStarvedMs)
            ? kStarvedMs
            : kStarvedMs - waited_ms;
    watch_cv_.wait_for(l, std::chrono::milliseconds(left_ms),
                       [this] { return stop_ || reap_; });
    if (stop_) return;
  }
}

}  // namespace ztier::nbd
