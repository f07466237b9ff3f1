// File: tools/ztier/machine_info.h
//
// What a benchmark ran on: CPU model, online cores, kernel, compiler, the
// versions of the compression libraries linked in, and how far apart two of
// its CPUs are (the round trip of a cache line between them). Printed first
// by every
// `ztier bench` experiment and written into its JSON, so that a figure is
// never separated from the machine that produced it.
//
// Thread safety: GetMachineInfo() reads /proc and uname; call it from any
// thread.
#ifndef ZTIER_TOOLS_ZTIER_MACHINE_INFO_H_
#define ZTIER_TOOLS_ZTIER_MACHINE_INFO_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace ztier::tool {

class JsonWriter;

struct MachineInfo {
  std::string cpu_model;  // /proc/cpuinfo "model name"; "unknown" if absent
  unsigned cores = 0;     // online CPUs (sysconf)
  std::string kernel;     // uname: sysname release machine
  std::string compiler;   // __VERSION__
  std::string lz4;        // LZ4_versionString()
  std::string zstd;       // ZSTD_versionString()
  std::string deflate;    // LIBDEFLATE_VERSION_STRING
  std::string lzo;        // lzo_version_string()
  double cross_cpu_rtt_ns = 0;  // CrossCpuRoundTripNs() when gathered
};

MachineInfo GetMachineInfo();

// The round trip of one cache line between the first two CPUs this process
// may run on, in ns: two threads pinned there pass a counter back and forth
// (the median of 5 bursts of 2,000 passes, a few ms in all). 0 with fewer
// than two CPUs. On a VM this moves with the host's placement of the vCPUs:
// here about 55 ns when they share a cache and 300-500 ns when they do not,
// and every figure that needs two CPUs to cooperate (a parallel batch, a
// fault handled on another CPU) moves with it; so experiments that depend
// on it measure it again during their runs.
double CrossCpuRoundTripNs();

// What fresh memory costs: maps `bytes` (rounded up to 2 MiB) of anonymous
// memory as the pool's arenas are (huge pages advised), faults it in 2 MiB
// at a time with MADV_POPULATE_WRITE as the pool does, unmaps it, and
// returns the microseconds each 2 MiB took. Empty where the kernel refuses
// (before 5.14). On this VM most take 100-250 us, but memory the guest
// has handed back to the host (free page reporting) must first be faulted
// in by the host: those take about 5 ms, and a fresh fill that meets one
// loses that much.
std::vector<double> FreshMemoryPopulateUs(std::size_t bytes);

// One line: "machine: AMD EPYC, 2 cores, Linux 6.1.0 x86_64, gcc 12.2.0;
// lz4 1.9.4, zstd 1.5.4, libdeflate 1.14, lzo 2.10; cross-CPU round trip
// 55 ns" (the last part only with two CPUs or more).
std::string MachineLine(const MachineInfo& m);

// Writes m as one JSON object (cpu_model, cores, kernel, compiler, the
// codec library versions and cross_cpu_rtt_ns) where `w` expects a value.
void WriteMachineJson(const MachineInfo& m, JsonWriter& w);

}  // namespace ztier::tool

#endif  // ZTIER_TOOLS_ZTIER_MACHINE_INFO_H_
