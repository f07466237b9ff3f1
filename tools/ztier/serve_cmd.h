// File: tools/ztier/serve_cmd.h
//
// `ztier serve`: zram devices in this process, exported over NBD (a Unix
// socket, optionally TCP) with a control socket for their attributes. Runs
// until SIGINT or SIGTERM, then stops cleanly (socket files removed) and
// returns 0; 1 when it cannot start (socket path in use, bad device spec),
// 2 for bad usage.
//
// Log, on stderr (unless --quiet), one line each, "ztier serve: nbd #N
// (PEER): ...": a connection's opening, its export or why its handshake
// ended, every error reply (the request and the reason; the first 32 of a
// connection), and its close with the reason (DISC, EOF, a timeout, a
// protocol error, the server stopping) and its counts of requests and error
// replies (src/nbd/connection.h).
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
