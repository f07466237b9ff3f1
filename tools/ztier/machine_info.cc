// File: tools/ztier/machine_info.cc
//
// Gathers MachineInfo. The library versions come from the libraries
// themselves at run time (not the headers), except libdeflate, which only
// exports its version as a header macro.
#include "machine_info.h"

#include "bench_stats.h"

#include <libdeflate.h>
#include <lz4.h>
#include <lzo/lzoconf.h>
#include <sys/utsname.h>
#include <unistd.h>
#include <zstd.h>

#include <fstream>
#include <string>

namespace ztier::tool {
namespace {

std::string CpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (!line.starts_with("model name")) continue;
    const std::size_t colon = line.find(':');
    if (colon == std::string::npos) break;
    std::size_t start = line.find_first_not_of(" \t", colon + 1);
    if (start == std::string::npos) break;
    return line.substr(start);
  }
  return "unknown";
}

}  // namespace

MachineInfo GetMachineInfo() {
  MachineInfo m;
  m.cpu_model = CpuModel();
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  m.cores = cores > 0 ? static_cast<unsigned>(cores) : 1;
  struct utsname u;
  if (uname(&u) == 0) {
    m.kernel = std::string(u.sysname) + " " + u.release + " " + u.machine;
  } else {
    m.kernel = "unknown";
  }
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
  return m;
}

std::string MachineLine(const MachineInfo& m) {
  return "machine: " + m.cpu_model + ", " + std::to_string(m.cores) +
         " cores, " + m.kernel + ", " + m.compiler + "; lz4 " + m.lz4 +
         ", zstd " + m.zstd + ", libdeflate " + m.deflate + ", lzo " + m.lzo;
}

void WriteMachineJson(const MachineInfo& m, JsonWriter& w) {
  w.BeginObject();
  w.Key("cpu_model");
  w.String(m.cpu_model);
  w.Key("cores");
  w.Uint(m.cores);
  w.Key("kernel");
  w.String(m.kernel);
  w.Key("compiler");
  w.String(m.compiler);
  w.Key("lz4");
  w.String(m.lz4);
  w.Key("zstd");
  w.String(m.zstd);
  w.Key("libdeflate");
  w.String(m.deflate);
  w.Key("lzo");
  w.String(m.lzo);
  w.EndObject();
}

}  // namespace ztier::tool
