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
    starts_.push_back(job->cookie);
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
  // The jobs that started before the one with `cookie`.
  std::size_t StartedBefore(std::uint64_t cookie) {
    std::lock_guard l(mu_);
    std::size_t n = 0;
    while (n < starts_.size() && starts_[n] != cookie) ++n;
    return n;
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
  std::vector<std::uint64_t> starts_;
};

// Jobs of one client: their cookies from `first`, in `lane`.
std::vector<Job> MakeJobs(std::size_t n, std::uint64_t first,
                          WorkQueue::Lane* lane) {
  std::vector<Job> jobs(n);
  for (std::size_t i = 0; i < n; ++i) {
    jobs[i].cookie = first + i;
    jobs[i].lane = lane;
  }
  return jobs;
}

// Lets every blocked job go when a test ends, also one an ASSERT ends
// early. Each test declares its jobs and lanes, then the queue, then this:
// so the queue, which runs what is still queued before its threads end, is
// gone before what they use.
class OpenAtExit {
 public:
  explicit OpenAtExit(Jobs& jobs) : jobs_(jobs) {}
  ~OpenAtExit() { jobs_.Open(); }

 private:
  Jobs& jobs_;
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
  WorkQueue::Lane a, b;
  std::vector<Job> blocked = MakeJobs(1, 1, &a);
  std::vector<Job> next = MakeJobs(1, 2, &b);
  WorkQueue q(
      1, [&](Job* j) { jobs.Run(j); },
      [&](const std::string& line) { lines.push_back(line); },
      /*extra_idle_ms=*/1000);
  OpenAtExit open(jobs);
  EXPECT_EQ(q.threads(), 1u);
  q.Push(&blocked[0]);
  ASSERT_TRUE(jobs.WaitStarted(1));
  const auto t0 = steady_clock::now();
  q.Push(&next[0]);
  ASSERT_TRUE(jobs.WaitDone(2)) << "the job waited for the blocked one";
  EXPECT_GE(steady_clock::now() - t0, milliseconds(WorkQueue::kStarvedMs));
  EXPECT_EQ(q.threads(), 2u);
  EXPECT_TRUE(WaitThreads(q, 1)) << "the extra thread did not end";
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("every worker busy"), std::string::npos) << lines[0];
  jobs.Open();
  ASSERT_TRUE(jobs.WaitDone(1));
}

// Lanes take turns: one client's backlog of blocked jobs delays another
// client's job by one of its own, not by all of them.
TEST(WorkQueueTest, ClientsTakeTurns) {
  Jobs jobs;
  WorkQueue::Lane a, b;
  std::vector<Job> backlog(10);
  for (Job& j : backlog) {
    j.cookie = 1;  // each blocks
    j.lane = &a;
  }
  std::vector<Job> other = MakeJobs(1, 2, &b);
  WorkQueue q(1, [&](Job* j) { jobs.Run(j); });
  OpenAtExit open(jobs);
  q.Push(&backlog[0]);
  ASSERT_TRUE(jobs.WaitStarted(1));
  for (std::size_t i = 1; i < backlog.size(); ++i) q.Push(&backlog[i]);
  q.Push(&other[0]);
  // The first extra thread takes a's next job, the second b's (with one
  // queue for all, b's would have started after a's nine).
  ASSERT_TRUE(jobs.WaitDone(2));
  EXPECT_EQ(jobs.StartedBefore(2), 2u);
  jobs.Open();
  ASSERT_TRUE(jobs.WaitAllDone(backlog.size() + 1));
}

// Jobs go to an idle worker before an idle extra thread: once the worker
// is free again, an extra thread ends after its idle time even while jobs
// keep coming.
TEST(WorkQueueTest, ExtraThreadsEndWhileTheWorkersKeepUp) {
  Jobs jobs;
  WorkQueue::Lane a;
  std::vector<Job> blocked = MakeJobs(1, 1, &a);
  std::vector<Job> next = MakeJobs(1, 2, &a);
  std::vector<Job> trickle = MakeJobs(40, 100, &a);
  WorkQueue q(
      1, [&](Job* j) { jobs.Run(j); }, nullptr,
      /*extra_idle_ms=*/300);
  OpenAtExit open(jobs);
  q.Push(&blocked[0]);
  ASSERT_TRUE(jobs.WaitStarted(1));
  q.Push(&next[0]);
  ASSERT_TRUE(jobs.WaitDone(2));
  jobs.Open();
  ASSERT_TRUE(jobs.WaitDone(1));
  // Seen at some point of the trickle, not at its end: a job pushed just
  // as the worker finishes the one before may wake the extra thread, which
  // then waits its idle time again.
  bool extra_ended = false;
  for (std::size_t i = 0; i < trickle.size(); ++i) {
    q.Push(&trickle[i]);
    ASSERT_TRUE(jobs.WaitDone(100 + i));
    std::this_thread::sleep_for(milliseconds(50));
    if (q.threads() == 1) extra_ended = true;
  }
  EXPECT_TRUE(extra_ended);
}

// Workers that keep up: no extra thread, whatever the number of jobs.
TEST(WorkQueueTest, WorkersThatKeepUpGetNoExtraThread) {
  Jobs jobs;
  WorkQueue::Lane a;
  std::vector<Job> all = MakeJobs(1000, 100, &a);
  WorkQueue q(2, [&](Job* j) { jobs.Run(j); });
  for (Job& j : all) q.Push(&j);
  // Every job, not the last one: the other worker may still be in one
  // taken before it.
  ASSERT_TRUE(jobs.WaitAllDone(all.size()));
  EXPECT_EQ(q.threads(), 2u);
}

// Every thread blocked, and more jobs behind them: extra threads start,
// one a period of kStarvedMs, each taking one job, up to kMaxExtraWorkers; the
// jobs left wait.
TEST(WorkQueueTest, ExtraThreadsAreBounded) {
  Jobs jobs;
  constexpr int kMost = 1 + static_cast<int>(WorkQueue::kMaxExtraWorkers);
  WorkQueue::Lane a;
  std::vector<Job> all(kMost + 3);
  WorkQueue q(1, [&](Job* j) { jobs.Run(j); });
  OpenAtExit open(jobs);
  for (Job& j : all) {
    j.cookie = 1;
    j.lane = &a;
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
