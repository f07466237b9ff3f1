// work_queue_test.cc: the shared workers of work_queue.h, with jobs that
// block as a read of a stalled backing store does.
#include "work_queue.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "connection.h"

namespace ztier::nbd {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

// Jobs whose cookie is 1 block until Open(); every job is recorded done.
class Jobs {
 public:
  void Run(Job* job) {
    std::unique_lock l(mu_);
    ++started_;
    cv_.notify_all();
    if (job->cookie == 1) cv_.wait(l, [&] { return open_; });
    done_.push_back(job->cookie);
    cv_.notify_all();
  }
  void Open() {
    std::lock_guard l(mu_);
    open_ = true;
    cv_.notify_all();
  }
  bool WaitDone(std::uint64_t cookie) {
    std::unique_lock l(mu_);
    return cv_.wait_for(l, std::chrono::seconds(10), [&] {
      for (auto c : done_) {
        if (c == cookie) return true;
      }
      return false;
    });
  }
  bool WaitStarted(int n, milliseconds within = milliseconds(20000)) {
    std::unique_lock l(mu_);
    return cv_.wait_for(l, within, [&] { return started_ >= n; });
  }
  bool WaitAllDone(std::size_t n) {
    std::unique_lock l(mu_);
    return cv_.wait_for(l, std::chrono::seconds(10),
                        [&] { return done_.size() == n; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int started_ = 0;
  bool open_ = false;
  std::vector<std::uint64_t> done_;
};

bool WaitThreads(const WorkQueue& q, std::size_t n) {
  const auto end = steady_clock::now() + std::chrono::seconds(10);
  while (q.threads() != n) {
    if (steady_clock::now() > end) return false;
    std::this_thread::sleep_for(milliseconds(5));
  }
  return true;
}

// The one worker blocked: the next job waits kStarvedMs, then an extra
// thread runs it; that thread ends once it has been idle.
TEST(WorkQueueTest, AJobBehindABlockedWorkerGetsAnExtraThread) {
  Jobs jobs;
  std::vector<std::string> lines;  // written by the watcher, read after
  WorkQueue q(
      1, [&](Job* j) { jobs.Run(j); },
      [&](const std::string& line) { lines.push_back(line); },
      /*extra_idle_ms=*/1000);
  EXPECT_EQ(q.threads(), 1u);
  Job blocked, next;
  blocked.cookie = 1;
  next.cookie = 2;
  q.Push(&blocked);
  ASSERT_TRUE(jobs.WaitStarted(1));
  const auto t0 = steady_clock::now();
  q.Push(&next);
  ASSERT_TRUE(jobs.WaitDone(2)) << "the job waited for the blocked one";
  EXPECT_GE(steady_clock::now() - t0, milliseconds(WorkQueue::kStarvedMs));
  EXPECT_EQ(q.threads(), 2u);
  EXPECT_TRUE(WaitThreads(q, 1)) << "the extra thread did not end";
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("every worker busy"), std::string::npos) << lines[0];
  jobs.Open();
  ASSERT_TRUE(jobs.WaitDone(1));
}

// Workers that keep up: no extra thread, whatever the number of jobs.
TEST(WorkQueueTest, WorkersThatKeepUpGetNoExtraThread) {
  Jobs jobs;
  WorkQueue q(2, [&](Job* j) { jobs.Run(j); });
  std::vector<Job> all(1000);
  for (std::size_t i = 0; i < all.size(); ++i) {
    all[i].cookie = 100 + i;
    q.Push(&all[i]);
  }
  ASSERT_TRUE(jobs.WaitDone(100 + all.size() - 1));
  EXPECT_EQ(q.threads(), 2u);
}

// Every thread blocked, and more jobs behind them: extra threads start,
// one per kStarvedMs, each taking one job, up to kMaxExtraWorkers; the
// jobs left wait.
TEST(WorkQueueTest, ExtraThreadsAreBounded) {
  Jobs jobs;
  WorkQueue q(1, [&](Job* j) { jobs.Run(j); });
  constexpr int kMost = 1 + static_cast<int>(WorkQueue::kMaxExtraWorkers);
  std::vector<Job> all(kMost + 3);
  for (Job& j : all) {
    j.cookie = 1;
    q.Push(&j);
  }
  ASSERT_TRUE(jobs.WaitStarted(kMost));
  std::this_thread::sleep_for(milliseconds(3 * WorkQueue::kStarvedMs));
  EXPECT_FALSE(jobs.WaitStarted(kMost + 1, milliseconds(0)));
  EXPECT_EQ(q.threads(), static_cast<std::size_t>(kMost));
  jobs.Open();
  ASSERT_TRUE(jobs.WaitStarted(kMost + 3));
  ASSERT_TRUE(jobs.WaitAllDone(kMost + 3));
}

}  // namespace
}  // namespace ztier::nbd
