// File: tools/ztier/paths.h
//
// Where `ztier serve` puts its sockets by default, and where `ztier ctl` and
// `ztier status` look for them: /run/ztier as root, else
// $XDG_RUNTIME_DIR/ztier (the user's runtime directory, as systemd's
// RuntimeDirectory= and pam_systemd make them). Never the current
// directory, which a service does not have and a user does not expect.
//
// Thread safety: reads the environment; call from one thread at start-up.
#ifndef ZTIER_TOOLS_ZTIER_PATHS_H_
#define ZTIER_TOOLS_ZTIER_PATHS_H_

#include <string>

#include "ztier/status.h"

namespace ztier::tool {

// "/run/ztier" for uid 0, else "$XDG_RUNTIME_DIR/ztier".
// kFailedPrecondition when not root and XDG_RUNTIME_DIR is unset or not
// absolute (the message says to pass --unix and --ctl, or set it).
Result<std::string> DefaultRuntimeDir();

// Creates `dir` (mode 0700) if it is missing; its parent must exist. An
// existing directory is used as it is. Errors carry the errno's status.
Status MakeRuntimeDir(const std::string& dir);

// The control socket `ztier ctl` and `ztier status` use without --ctl:
// $ZTIER_CTL when set and not empty, else DefaultRuntimeDir()/ztier.ctl.
Result<std::string> DefaultCtlPath();

}  // namespace ztier::tool

#endif  // ZTIER_TOOLS_ZTIER_PATHS_H_
