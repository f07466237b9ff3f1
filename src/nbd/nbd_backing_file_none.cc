// nbd_backing_file_none.cc: the build without libnbd (ZTIER_LIBNBD=OFF):
// NBD URIs are recognised, and opening one says this build cannot.
#include "nbd/nbd_backing_file.h"

namespace ztier::nbd {

Result<std::shared_ptr<BackingFile>> OpenNbdBackingFile(
    const std::string& uri, const NbdBackingOptions&) {
  return Err(Status::Unsupported(
      uri + ": this build has no NBD client (libnbd; install libnbd-dev and "
            "build again)"));
}

}  // namespace ztier::nbd
