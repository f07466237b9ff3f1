// nbd_backing_file_none.cc: the build without libnbd (ZTIER_LIBNBD=OFF):
// NBD URIs are recognised, and opening one says this build cannot.
#include "nbd/nbd_backing_file.h"

namespace ztier::nbd {

bool IsNbdUri(std::string_view path) {
  for (std::string_view scheme : {"nbd:", "nbds:", "nbd+unix:", "nbds+unix:"}) {
    if (path.substr(0, scheme.size()) == scheme) return true;
  }
  return false;
}

Result<std::shared_ptr<BackingFile>> OpenNbdBackingFile(
    const std::string& uri, const NbdBackingOptions&) {
  return Err(Status::Unsupported(
      uri + ": this build has no NBD client (libnbd; install libnbd-dev and "
            "build again)"));
}

}  // namespace ztier::nbd
