// File: tools/ztier/bench_recompress_kernel.cc
//
// ProbeKernelRecomp (bench_recompress_kernel.h): one stat of the device's
// sysfs folder and of its recomp_algorithm file, and uname(2) for the
// kernel's release in the message.
#include "bench_recompress_kernel.h"

#include <sys/utsname.h>

#include <filesystem>
#include <system_error>

namespace ztier::tool {

KernelRecompProbe ProbeKernelRecomp(const std::string& sys_dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(sys_dir, ec)) {
    return {.line = "kernel: not compared: " + sys_dir +
                    " does not exist (no zram device here)"};
  }
  const std::string file = sys_dir + "/recomp_algorithm";
  if (!fs::exists(file, ec)) {
    struct utsname u {};
    const std::string release = ::uname(&u) == 0 ? u.release : "unknown";
    return {.line = "kernel: not compared: " + file +
                    " does not exist: the running kernel (" + release +
                    ") was built without CONFIG_ZRAM_MULTI_COMP, so its zram "
                    "cannot recompress"};
  }
  return {.has_multi_comp = true,
          .line = "kernel: " + file +
                  " exists (CONFIG_ZRAM_MULTI_COMP), but this experiment's "
                  "kernel path is not implemented: no kernel figures"};
}

}  // namespace ztier::tool
