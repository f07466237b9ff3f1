// File: tools/ztier/paths.cc
#include "paths.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

namespace ztier::tool {

Result<std::string> DefaultRuntimeDir() {
  if (::geteuid() == 0) return std::string("/run/ztier");
  const char* xdg = std::getenv("XDG_RUNTIME_DIR");
  if (xdg == nullptr || xdg[0] != '/') {
    return Err(Status::FailedPrecondition(
        "XDG_RUNTIME_DIR is not set (or not an absolute path), so there is "
        "no default place for the sockets: pass --unix PATH and --ctl PATH, "
        "or set XDG_RUNTIME_DIR"));
  }
  return std::string(xdg) + "/ztier";
}

Status MakeRuntimeDir(const std::string& dir) {
  if (::mkdir(dir.c_str(), 0700) == 0) return Status::Ok();
  const int e = errno;
  struct stat st;
  if (e == EEXIST && ::stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    return Status::Ok();
  }
  return PosixError("cannot create " + dir, e);
}

Result<std::string> DefaultCtlPath() {
  const char* env = std::getenv("ZTIER_CTL");
  if (env != nullptr && env[0] != '\0') return std::string(env);
  auto dir = DefaultRuntimeDir();
  if (!dir.has_value()) {
    // `ztier ctl` and `ztier status` take only the control socket.
    return Err(Status::FailedPrecondition(
        "XDG_RUNTIME_DIR is not set (or not an absolute path), so there is "
        "no default control socket: pass --ctl PATH (or set ZTIER_CTL or "
        "XDG_RUNTIME_DIR)"));
  }
  return *dir + "/ztier.ctl";
}

}  // namespace ztier::tool
