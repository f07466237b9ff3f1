// File: tools/ztier/machine_info.h
//
// What a benchmark ran on: CPU model, online cores, kernel, compiler and the
// versions of the compression libraries linked in. Printed first by every
// `ztier bench` experiment and written into its JSON, so that a figure is
// never separated from the machine that produced it.
//
// Thread safety: GetMachineInfo() reads /proc and uname; call it from any
// thread.
#ifndef ZTIER_TOOLS_ZTIER_MACHINE_INFO_H_
#define ZTIER_TOOLS_ZTIER_MACHINE_INFO_H_

#include <string>

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
};

MachineInfo GetMachineInfo();

// One line: "machine: AMD EPYC, 2 cores, Linux 6.1.0 x86_64, gcc 12.2.0;
// lz4 1.9.4, zstd 1.5.4, libdeflate 1.14, lzo 2.10".
std::string MachineLine(const MachineInfo& m);

// Writes m as one JSON object (cpu_model, cores, kernel, compiler and the
// codec library versions) where `w` expects a value.
void WriteMachineJson(const MachineInfo& m, JsonWriter& w);

}  // namespace ztier::tool

#endif  // ZTIER_TOOLS_ZTIER_MACHINE_INFO_H_
