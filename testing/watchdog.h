// watchdog.h: ends the process, saying what was stuck, when a scope of a
// test does not end in time. For code whose failure is a hang (a lock left
// held, a fault that loops): CTest's timeout would end it too, but with no
// word of where.
//
//   {
//     const ztier::testing::Watchdog w("reading every page", 60s);
//     ... what must not hang ...
//   }  // in time: the watchdog goes quietly
//
// Thread safety: one thread makes and destroys a Watchdog; its own thread
// waits meanwhile.
#ifndef ZTIER_TESTING_WATCHDOG_H_
#define ZTIER_TESTING_WATCHDOG_H_

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>

namespace ztier::testing {

class Watchdog {
 public:
  // Aborts, printing "WHAT: stuck" on stderr, unless destroyed within
  // `limit`.
  Watchdog(const char* what, std::chrono::seconds limit)
      : thread_([this, what, limit] {
          std::unique_lock l(mu_);
          if (!cv_.wait_for(l, limit, [this] { return done_; })) {
            std::fprintf(stderr, "%s: stuck\n", what);
            std::abort();
          }
        }) {}
  ~Watchdog() {
    {
      std::lock_guard l(mu_);
      done_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

}  // namespace ztier::testing

#endif  // ZTIER_TESTING_WATCHDOG_H_
