// File: tools/ztier/policy_runner.h
//
// The post-processing policy's thread of `ztier serve --policy TOKENS`
// (ztier/policy.h): a period after the previous round of passes ended, it
// runs one pass over each initialised device of the registry, in name
// order, and logs each pass's line. Stop()
// (SIGINT/SIGTERM, the destructor) wakes it from any wait, including a
// pause inside a recompression pass, which then ends at its next batch;
// Stop() returns once the thread has exited.
//
// The first passes run one period after Start(): a device is filled by its
// clients first. A device reset or hot-added meanwhile is picked up at the
// next period; one removed is no longer listed, and the policy forgets
// it then (Policy::KeepOnly).
//
// Thread safety: Start() and Stop() from one thread (serve's main thread);
// the devices serve IO meanwhile.
#ifndef ZTIER_TOOLS_ZTIER_POLICY_RUNNER_H_
#define ZTIER_TOOLS_ZTIER_POLICY_RUNNER_H_

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "ztier/device.h"
#include "ztier/policy.h"

namespace ztier::tool {

class PolicyRunner {
 public:
  // `log`: each pass's line and notice; `registry` must outlive the runner.
  PolicyRunner(DeviceRegistry* registry, PolicyOptions options,
               std::function<void(const std::string&)> log);
  ~PolicyRunner();  // Stop()
  PolicyRunner(const PolicyRunner&) = delete;
  PolicyRunner& operator=(const PolicyRunner&) = delete;

  void Stop();
  // Passes run so far over all devices (each device's pass counts one).
  std::uint64_t passes() const;

 private:
  void Loop();
  // Sleeps `ns` on the real clock, or until Stop(); false once stopped.
  bool Wait(std::uint64_t ns);

  DeviceRegistry* const registry_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;  // guarded by mu_
  std::uint64_t passes_ = 0;  // guarded by mu_
  std::unique_ptr<Policy> policy_;
  std::thread thread_;
};

}  // namespace ztier::tool

#endif  // ZTIER_TOOLS_ZTIER_POLICY_RUNNER_H_
