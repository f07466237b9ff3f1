// File: tools/ztier/ctl_cmd.h
//
// `ztier ctl`: read or write one of zram's attributes of a running
// `ztier serve`, through its control socket
// (src/ctl/include/ctl/control_server.h).
//
//   ztier ctl [--ctl PATH] [--device NAME] [DEVICE[/]]ATTRIBUTE [VALUE]
//   ztier ctl disksize 1G          # store (like echo 1G > .../disksize)
//   ztier ctl zram1/mm_stat        # zram1's (also: ztier ctl zram1 mm_stat;
//                                  # DEVICE/ATTRIBUTE for any device name)
//   ztier ctl mm_stat              # show  (like cat .../mm_stat)
//   ztier ctl hot_add              # prints the new device's number
//   ztier ctl hot_remove 1
//
// A show prints the attribute's text as-is on stdout; a store prints
// nothing. Exit status: 0 success; 1 when the server refuses ("ztier ctl:
// EBUSY: <message>" on stderr) or cannot be reached; 2 for bad usage.
// Waits (ctl::Connect, ctl::Exchange) at most 120 s for the server to
// accept and, for a show, to reply; a store's reply however long it takes.
//
// Thread safety: runs on the calling thread only.
#ifndef ZTIER_TOOLS_ZTIER_CTL_CMD_H_
#define ZTIER_TOOLS_ZTIER_CTL_CMD_H_

#include <span>
#include <string>
#include <string_view>

#include "ztier/status.h"

namespace ztier::tool {

// The control socket `ztier ctl` and `ztier status` use: `flag` (--ctl)
// when not empty, else $ZTIER_CTL, else the default beside `ztier serve`'s
// (paths.h: /run/ztier/ztier.ctl as root, else
// $XDG_RUNTIME_DIR/ztier/ztier.ctl). kFailedPrecondition with what to do
// when there is no default.
Result<std::string> ResolveCtlPath(const std::string& flag);

// Connects to the server's control socket (ResolveCtlPath(flag)) for
// `command`. On failure prints why on stderr (with the hint of
// CtlConnectHint when the socket cannot be reached) and returns the exit
// status to end with: 2 when there is no default path (a usage error, with
// its "Run '<command> --help' for usage." line), else 1. On success
// sets *fd (the caller closes it) and returns 0.
int ConnectCtl(std::string_view command, const std::string& flag, int* fd);

// The help text of --ctl.
inline constexpr const char* kCtlFlagHelp =
    "control socket of `ztier serve` (default $ZTIER_CTL, else "
    "/run/ztier/ztier.ctl as root, else $XDG_RUNTIME_DIR/ztier/ztier.ctl)";

// args: the words after `ctl`.
int RunCtl(std::span<const std::string_view> args);

// The message for a control socket that cannot be reached, naming the path
// and the error, and asking whether `ztier serve` runs (but for a path that
// is no socket, kInvalidArgument: then only where to give the socket).
std::string CtlConnectHint(std::string_view command, std::string_view path,
                           const Status& error);

}  // namespace ztier::tool

#endif  // ZTIER_TOOLS_ZTIER_CTL_CMD_H_
