// File: tools/ztier/serve_cmd.h
//
// `ztier serve`: zram devices in this process, exported over NBD (a Unix
// socket, optionally TCP) with a control socket for their attributes, and
// optionally Prometheus metrics (src/ctl/include/ctl/metrics_server.h). Runs until
// SIGINT or SIGTERM, then stops cleanly (socket files removed) and returns
// 0; 1 when it cannot start (socket path in use, a device that cannot be
// made); 2 for bad usage, a bad configuration file, or settings that cannot
// work (kInvalidArgument: a bad listen address, a device the file sets up
// wrongly), which a restart would meet again.
//
// Devices come from --device flags, or from a configuration file
// (--config, service_config.h), one [zramN] section each. With --config,
// the [ztier] section sets the other flags; a flag given on the command
// line wins over the file.
//
// Sockets default to /run/ztier/ztier.{sock,ctl} as root, else
// $XDG_RUNTIME_DIR/ztier/ (paths.h); the directory is made (0700).
//
// Under a service manager (NOTIFY_SOCKET, sd_notify.h): READY=1 once the
// NBD, control and metrics sockets accept connections, STATUS= with a
// one-line summary (every 10 s), RELOADING=1 and READY=1 around a SIGHUP
// reload, STOPPING=1 on the way out.
//
// SIGHUP re-reads the configuration file and applies what can change live
// (serve_devices.h: mem_limit, notes, new devices); it never stops the
// server nor drops a page. Without --config it is logged and ignored.
//
// Log (log.h), on stderr, one line per event, never one per IO:
// configuration applied, each NBD connection's opening, its export or why
// its handshake ended, every error reply (the first 32 of a connection),
// its close with the reason and counts (src/nbd/connection.h), refusals
// over --max-connections, writeback and compaction passes with their
// counts, mem_limit reached. -q shows warnings and errors only; -v adds
// debug lines; --log-level LEVEL sets it (error, warning, info, debug).
#ifndef ZTIER_TOOLS_ZTIER_SERVE_CMD_H_
#define ZTIER_TOOLS_ZTIER_SERVE_CMD_H_

#include <span>
#include <string>
#include <string_view>

namespace ztier::tool {

// args: the words after `serve`.
int RunServe(std::span<const std::string_view> args);

// The URI an NBD client uses for `device` on the Unix socket `socket_path`
// (made absolute): "nbd+unix:///zram0?socket=/abs/ztier.sock".
std::string NbdUnixUri(const std::string& device,
                       const std::string& socket_path);

}  // namespace ztier::tool

#endif  // ZTIER_TOOLS_ZTIER_SERVE_CMD_H_
