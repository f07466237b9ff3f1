// File: tools/ztier/machine_info.cc
//
// Gathers MachineInfo. The library versions come from the libraries
// themselves at run time (not the headers), except libdeflate, which only
// exports its version as a header macro.
#include "machine_info.h"

#include <libdeflate.h>
#include <lz4.h>
#include <lzo/lzoconf.h>
#include <pthread.h>
#include <sched.h>
#include <sys/utsname.h>
#include <unistd.h>
#include <zstd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "bench_stats.h"
#include "platform/mapping.h"

namespace ztier::tool {
namespace {

std::string CpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (!line.starts_with("model name")) continue;
    const std::size_t colon = line.find(':');
    const std::size_t start = colon == std::string::npos
                                  ? colon
                                  : line.find_first_not_of(" \t", colon + 1);
    return start == std::string::npos ? "unknown" : line.substr(start);
  }
  return "unknown";
}

// Pins the calling thread to `cpu`; false if it may not run there.
bool PinTo(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof(set), &set) == 0;
}

}  // namespace

double CrossCpuRoundTripNs() {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) return 0;
  int cpus[2];
  int found = 0;
  for (int c = 0; c < CPU_SETSIZE && found < 2; ++c) {
    if (CPU_ISSET(c, &allowed)) cpus[found++] = c;
  }
  if (found < 2) return 0;

  constexpr int kBursts = 5;
  constexpr int kPasses = 2000;
  // The counter is alone in its cache line.
  struct alignas(64) Line {
    std::atomic<int> turn{0};
  };
  Line line;
  // Each side on a thread of its own, so the caller's affinity is untouched.
  // Pass i: the pinger (side 0, timed) stores 2i+1 and waits for 2i+2; the
  // ponger (side 1) waits for 2i+1 and stores 2i+2.
  std::vector<double> ns;
  bool pinned[2] = {};
  auto play = [&](int side) {
    pinned[side] = PinTo(cpus[side]);
    for (int b = 0; b < kBursts; ++b) {
      const auto start = std::chrono::steady_clock::now();
      for (int i = b * kPasses; i < (b + 1) * kPasses; ++i) {
        if (side == 0) line.turn.store(2 * i + 1, std::memory_order_release);
        while (line.turn.load(std::memory_order_acquire) != 2 * i + 2 - side) {
        }
        if (side == 1) line.turn.store(2 * i + 2, std::memory_order_release);
      }
      const std::chrono::duration<double, std::nano> took =
          std::chrono::steady_clock::now() - start;
      if (side == 0) ns.push_back(took.count() / kPasses);
    }
  };
  std::thread ponger(play, 1);
  std::thread pinger(play, 0);
  pinger.join();
  ponger.join();
  if (!pinned[0] || !pinned[1]) return 0;
  std::sort(ns.begin(), ns.end());
  return ns[ns.size() / 2];
}

std::vector<double> FreshMemoryPopulateUs(std::size_t bytes) {
  constexpr std::size_t kChunk = std::size_t{2} << 20;
  const std::size_t len = (bytes + kChunk - 1) / kChunk * kChunk;
  std::vector<double> us;
  if (len == 0) return us;
  // One chunk more, to start on a 2 MiB boundary as huge pages need.
  Result<platform::Mapping> map = platform::Mapping::Anonymous(
      len + kChunk, platform::Commit::kOnTouch, "mmap");
  if (!map.has_value()) return us;
  auto* base = reinterpret_cast<std::byte*>(
      (reinterpret_cast<std::uintptr_t>(map->data()) + kChunk - 1) &
      ~(kChunk - 1));
  platform::Advise(base, len, platform::Advice::kHugePages).IgnoreError();
  for (std::size_t off = 0; off < len; off += kChunk) {
    const auto start = std::chrono::steady_clock::now();
    if (!platform::Advise(base + off, kChunk, platform::Advice::kPopulateWrite)
             .ok()) {
      us.clear();
      break;
    }
    const std::chrono::duration<double, std::micro> took =
        std::chrono::steady_clock::now() - start;
    us.push_back(took.count());
  }
  return us;
}

MachineInfo GetMachineInfo() {
  MachineInfo m;
  m.cpu_model = CpuModel();
  m.cores = static_cast<unsigned>(std::max(sysconf(_SC_NPROCESSORS_ONLN), 1L));
  struct utsname u;
  m.kernel = uname(&u) == 0
                 ? std::string(u.sysname) + " " + u.release + " " + u.machine
                 : "unknown";
#if defined(__clang__)
  m.compiler = std::string("clang ") + __clang_version__;
#elif defined(__GNUC__)
  m.compiler = std::string("gcc ") + __VERSION__;
#else
  m.compiler = __VERSION__;
#endif
  m.lz4 = LZ4_versionString();
  m.zstd = ZSTD_versionString();
  m.deflate = LIBDEFLATE_VERSION_STRING;
  m.lzo = lzo_version_string();
  m.cross_cpu_rtt_ns = CrossCpuRoundTripNs();
  return m;
}

std::string MachineLine(const MachineInfo& m) {
  return "machine: " + m.cpu_model + ", " + std::to_string(m.cores) +
         " cores, " + m.kernel + ", " + m.compiler + "; lz4 " + m.lz4 +
         ", zstd " + m.zstd + ", libdeflate " + m.deflate + ", lzo " + m.lzo +
         (m.cross_cpu_rtt_ns > 0 ? "; cross-CPU round trip " +
                                       std::to_string(static_cast<long>(
                                           m.cross_cpu_rtt_ns + 0.5)) +
                                       " ns"
                                 : "");
}

void WriteMachineJson(const MachineInfo& m, JsonWriter& w) {
  w.BeginObject();
  w.StringField("cpu_model", m.cpu_model);
  w.UintField("cores", m.cores);
  w.StringField("kernel", m.kernel);
  w.StringField("compiler", m.compiler);
  w.StringField("lz4", m.lz4);
  w.StringField("zstd", m.zstd);
  w.StringField("libdeflate", m.deflate);
  w.StringField("lzo", m.lzo);
  w.DoubleField("cross_cpu_rtt_ns", m.cross_cpu_rtt_ns, 1);
  w.EndObject();
}

}  // namespace ztier::tool
