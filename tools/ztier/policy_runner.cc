// policy_runner.cc: the post-processing policy's thread (contract in
// policy_runner.h).
#include "policy_runner.h"

#include <chrono>
#include <new>
#include <vector>

namespace ztier::tool {

PolicyRunner::PolicyRunner(DeviceRegistry* registry, PolicyOptions options,
                           std::function<void(const std::string&)> log)
    : registry_(registry) {
  PolicyEnv env;
  env.sleep_ns = [this](std::uint64_t ns) { Wait(ns); };
  env.log = std::move(log);
  policy_ = std::make_unique<Policy>(std::move(options), std::move(env));
  thread_ = std::thread(&PolicyRunner::Loop, this);
}

PolicyRunner::~PolicyRunner() { Stop(); }

void PolicyRunner::Stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  policy_->Stop();
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::uint64_t PolicyRunner::passes() const {
  std::lock_guard lock(mu_);
  return passes_;
}

bool PolicyRunner::Wait(std::uint64_t ns) {
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, std::chrono::nanoseconds(ns), [this] { return stop_; });
  return !stop_;
}

void PolicyRunner::Loop() {
  const std::uint64_t period = policy_->options().period_s * kNsPerSecond;
  while (Wait(period)) {
    std::vector<std::shared_ptr<Device>> devices;
    try {
      devices = registry_->List();
    } catch (const std::bad_alloc&) {
      continue;  // out of memory: the next period tries again
    }
    policy_->KeepOnly(devices);  // those removed since the last round
    for (const std::shared_ptr<Device>& d : devices) {
      if (policy_->stopped()) return;
      if (!policy_->RunPass(*d).ran) continue;
      std::lock_guard lock(mu_);
      ++passes_;
    }
  }
}

}  // namespace ztier::tool
