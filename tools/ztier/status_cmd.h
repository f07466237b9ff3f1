// File: tools/ztier/status_cmd.h
//
// `ztier status [--ctl PATH] [--json]`: every device of a running
// `ztier serve`, as zramctl prints them, with CLIENTS (attached NBD clients)
// in place of zramctl's MOUNTPOINT:
//
//   NAME  ALGORITHM DISKSIZE DATA COMPR TOTAL STREAMS CLIENTS
//   zram0 lz4             1G 4.5M  1.2M  1.5M       8       1
//
// Sizes as zramctl ("0B", "4K", "4.5M", "1G"); uninitialised devices are
// listed too (DISKSIZE 0B), unlike zramctl; nothing is printed when there
// are no devices. --json prints the server's report unchanged (raw numbers
// in bytes; format in src/ctl/include/ctl/status_report.h). Exit status: 0; 1 when the
// server cannot be reached or answers garbage; 2 for bad usage.
//
// Thread safety: runs on the calling thread only.
#ifndef ZTIER_TOOLS_ZTIER_STATUS_CMD_H_
#define ZTIER_TOOLS_ZTIER_STATUS_CMD_H_

#include <span>
#include <string_view>

namespace ztier::tool {

// args: the words after `status`.
int RunStatus(std::span<const std::string_view> args);

}  // namespace ztier::tool

#endif  // ZTIER_TOOLS_ZTIER_STATUS_CMD_H_
