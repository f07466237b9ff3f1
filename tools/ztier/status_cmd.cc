// File: tools/ztier/status_cmd.cc
//
// `ztier status` (see status_cmd.h): one `status` request, printed as JSON
// or as zramctl's table.
#include "status_cmd.h"

#include <unistd.h>

#include <cstdio>
#include <string>

#include "ctl/control_server.h"
#include "ctl/status_report.h"
#include "ctl_cmd.h"
#include "flags.h"

namespace ztier::tool {

int RunStatus(std::span<const std::string_view> args) {
  constexpr const char* kCommand = "ztier status";
  constexpr const char* kAbout =
      "the devices of a running `ztier serve`, as zramctl shows them\n"
      "(CLIENTS: attached NBD clients, in place of MOUNTPOINT).";
  std::string ctl_path(kDefaultCtlPath);
  bool json = false;
  FlagSet flags(kCommand, "[--ctl PATH] [--json]");
  flags.AddString("ctl", &ctl_path, "PATH",
                  "control socket of `ztier serve` (default ./ztier.ctl)");
  flags.AddBool("json", &json, "print the raw report as JSON (sizes in bytes)");
  if (auto rc = flags.ParseCommandLine(args, kAbout)) return *rc;
  auto fd = ctl::Connect(ctl_path);
  if (!fd.has_value()) {
    std::fputs(CtlConnectHint(kCommand, ctl_path, fd.error().message()).c_str(),
               stderr);
    return 1;
  }
  auto reply = ctl::Exchange(*fd, {"", "status", std::nullopt});
  ::close(*fd);
  if (!reply.has_value()) {
    std::fprintf(stderr, "%s: %s\n", kCommand, reply.error().message().c_str());
    return 1;
  }
  if (!reply->ok) {
    std::fprintf(stderr, "%s: %s: %s\n", kCommand, reply->errno_name.c_str(),
                 reply->message.c_str());
    return 1;
  }
  auto devices = ctl::DecodeStatusJson(reply->text);
  if (!devices.has_value()) {
    std::fprintf(stderr, "%s: %s\n", kCommand,
                 devices.error().message().c_str());
    return 1;
  }
  if (json) {
    std::fwrite(reply->text.data(), 1, reply->text.size(), stdout);
  } else {
    std::fputs(ctl::FormatStatusTable(*devices).c_str(), stdout);
  }
  return 0;
}

}  // namespace ztier::tool
