// File: tools/ztier/mem_lock.cc
//
// LockProcessMemory() (see mem_lock.h): two mlockall() calls, then the
// numbers from /proc/self/status for the report.
#include "mem_lock.h"

#include <sys/mman.h>
#include <sys/resource.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

namespace ztier::tool {
namespace {

constexpr int kCapIpcLock = 14;  // linux/capability.h

// A "Key:   value" line of /proc/self/status, or "".
std::string StatusField(const std::string& key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.compare(0, key.size() + 1, key + ":") == 0) {
      std::size_t i = key.size() + 1;
      while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
      return line.substr(i);
    }
  }
  return "";
}

// "1234 kB" -> bytes.
std::uint64_t KbField(const std::string& key) {
  return std::strtoull(StatusField(key).c_str(), nullptr, 10) * 1024;
}

bool HasCapIpcLock() {
  const std::uint64_t eff =
      std::strtoull(StatusField("CapEff").c_str(), nullptr, 16);
  return (eff >> kCapIpcLock) & 1;
}

std::string Mib(std::uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f MiB",
                static_cast<double>(bytes) / (1 << 20));
  return buf;
}

std::string LimitText(const rlimit& rl) {
  if (rl.rlim_cur == RLIM_INFINITY) return "unlimited";
  return std::to_string(rl.rlim_cur / 1024) + " KiB";
}

}  // namespace

Result<MemoryLockReport> LockProcessMemory() {
  MemoryLockReport r;
  rlimit rl{};
  getrlimit(RLIMIT_MEMLOCK, &rl);
  r.cap_ipc_lock = HasCapIpcLock();
  r.limit_unlimited = rl.rlim_cur == RLIM_INFINITY;
  r.limit_bytes = r.limit_unlimited ? 0 : rl.rlim_cur;
  const std::uint64_t mapped = KbField("VmSize");

  if (mlockall(MCL_CURRENT) != 0) {
    const int err = errno;
    const std::string what = "mlockall: " + std::string(std::strerror(err)) +
                             ": locking " + Mib(mapped) + " of mappings";
    if (err == EPERM) {
      return Err(Status::Unsupported(
          what + " is not permitted (RLIMIT_MEMLOCK " + LimitText(rl) +
          ", no CAP_IPC_LOCK): run as root or with CAP_IPC_LOCK, or raise "
          "`ulimit -l` (LimitMEMLOCK= in a systemd unit)"));
    }
    if (err == ENOMEM || err == EAGAIN) {
      return Err(Status::ResourceExhausted(
          what + " exceeds RLIMIT_MEMLOCK (" + LimitText(rl) +
          ") or memory: raise `ulimit -l` (e.g. `ulimit -l unlimited`; "
          "LimitMEMLOCK=infinity in a systemd unit) or run with "
          "CAP_IPC_LOCK, or lower --mem-limit"));
    }
    return Err(PosixError("mlockall(MCL_CURRENT)", err));
  }
  if (mlockall(MCL_CURRENT | MCL_FUTURE | MCL_ONFAULT) != 0) {
    const int err = errno;
    munlockall();
    if (err == EINVAL) {
      return Err(Status::Unsupported(
          "mlockall(MCL_ONFAULT) is not supported: --mlock needs Linux 4.4 "
          "or later"));
    }
    return Err(PosixError("mlockall(MCL_FUTURE | MCL_ONFAULT)", err));
  }
  r.locked_bytes = KbField("VmLck");
  r.resident_bytes = KbField("VmRSS");
  if (!r.cap_ipc_lock && !r.limit_unlimited) {
    r.warning =
        "RLIMIT_MEMLOCK is " + LimitText(rl) + " (" + Mib(r.locked_bytes) +
        " used) and there is no CAP_IPC_LOCK: each new mapping counts in "
        "full against it (a thread's stack: 8 MiB), and once it is used up "
        "new connections fail. Use `ulimit -l unlimited` or CAP_IPC_LOCK.";
  }
  return r;
}

}  // namespace ztier::tool
