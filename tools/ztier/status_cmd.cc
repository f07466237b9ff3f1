// File: tools/ztier/status_cmd.cc
//
// `ztier status` (see status_cmd.h): one `status` request, printed as JSON
// or as zramctl's table (with zramctl's -b, -n, -o LIST, --output-all and
// --raw), followed by one line of notes per device that has any (only in the
// default table: not with --raw, -n, -o, --output-all or --json, whose
// output scripts read).
#include "status_cmd.h"

#include <unistd.h>

#include <cstdio>
#include <string>

#include "ctl/control_server.h"
#include "ctl/status_report.h"
#include "ctl_cmd.h"
#include "flags.h"
#include "tool_common.h"

namespace ztier::tool {

int RunStatus(std::span<const std::string_view> args) {
  constexpr const char* kCommand = "ztier status";
  constexpr const char* kAbout =
      "the devices of a running `ztier serve`, as zramctl shows them\n"
      "(CLIENTS: attached NBD clients, in place of MOUNTPOINT).";
  std::string ctl_path;
  bool json = false;
  bool output_all = false;
  std::string output;
  ctl::TableOptions table;
  FlagSet flags(kCommand,
                "[--ctl PATH] [--json | [-b] [-n] [--raw] "
                "[-o LIST | --output-all]]");
  flags.AddString("ctl", &ctl_path, "PATH", kCtlFlagHelp);
  flags.NotEmpty("ctl");
  flags.AddBool("json", &json, "print the raw report as JSON (sizes in bytes)");
  flags.AddBool("bytes", &table.bytes, "print sizes in bytes");
  flags.AddBool("noheadings", &table.no_headings, "print no header line");
  std::string columns_help = "columns to print (comma list; +LIST adds to "
                             "the default):";
  for (std::string_view c : ctl::kStatusColumns) {
    columns_help += " ";
    columns_help += c;
  }
  flags.AddString("output", &output, "LIST", columns_help);
  flags.AddBool("output-all", &output_all, "print all columns");
  flags.AddBool("raw", &table.raw, "raw format: no alignment");
  flags.Short("bytes", 'b');
  flags.Short("noheadings", 'n');
  flags.Short("output", 'o');
  if (auto rc = flags.ParseCommandLine(args, kAbout)) return *rc;
  if (flags.WasSet("output") && output_all) {
    return ReportUsageError(kCommand, "-o and --output-all exclude each other");
  }
  if (json) {
    for (const char* table_flag :
         {"bytes", "noheadings", "output", "output-all", "raw"}) {
      if (flags.WasSet(table_flag)) {
        return ReportUsageError(kCommand, std::string("--json and --") +
                                              table_flag +
                                              " exclude each other");
      }
    }
  }
  if (flags.WasSet("output")) {
    auto columns = ctl::ParseStatusColumns(output);
    if (!columns.has_value()) {
      return ReportUsageError(kCommand, columns.error().message());
    }
    table.columns = std::move(*columns);
  }
  if (output_all) {
    table.columns.assign(std::begin(ctl::kStatusColumns),
                         std::end(ctl::kStatusColumns));
  }
  int fd = -1;
  if (int rc = ConnectCtl(kCommand, ctl_path, &fd); rc != 0) return rc;
  auto reply = ctl::Exchange(fd, {"", "status", std::nullopt});
  ::close(fd);
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
    std::fputs(ctl::FormatStatusTable(*devices, table).c_str(), stdout);
    const bool plain = !table.raw && !table.no_headings &&
                       !flags.WasSet("output") && !output_all;
    if (plain) {
      std::fputs(ctl::FormatStatusUblk(*devices).c_str(), stdout);
      std::fputs(ctl::FormatStatusRecompression(*devices).c_str(), stdout);
      std::fputs(ctl::FormatStatusNotes(*devices).c_str(), stdout);
    }
  }
  return 0;
}

}  // namespace ztier::tool
