// SleepingChild: a `sleep 300` child process that a test owns. The
// constructor returns once the child runs sleep (its comm reads "sleep"),
// not the forked copy of the test; the destructor kills and reaps it.
#ifndef ZTIER_TESTING_SLEEPING_CHILD_H_
#define ZTIER_TESTING_SLEEPING_CHILD_H_

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

namespace ztier::testing {

// The comm of process `pid` ("sleep\n"), or "" when there is none.
inline std::string CommOf(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/comm");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class SleepingChild {
 public:
  SleepingChild() {
    pid_ = ::fork();
    if (pid_ == 0) {
      ::execlp("sleep", "sleep", "300", static_cast<char*>(nullptr));
      ::_exit(127);
    }
    if (pid_ < 0) {
      ADD_FAILURE() << "fork: errno " << errno;
      return;
    }
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (CommOf(pid_) != "sleep\n" &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    EXPECT_EQ(CommOf(pid_), "sleep\n") << "child " << pid_ << " never slept";
  }
  SleepingChild(const SleepingChild&) = delete;
  SleepingChild& operator=(const SleepingChild&) = delete;
  ~SleepingChild() {
    if (pid_ <= 0) return;  // never kill(-1): every process
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }

  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
};

}  // namespace ztier::testing

#endif  // ZTIER_TESTING_SLEEPING_CHILD_H_
