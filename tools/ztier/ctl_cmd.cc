// File: tools/ztier/ctl_cmd.cc
//
// `ztier ctl` (see ctl_cmd.h). Positional words are split from the flags
// here, since FlagSet takes none: --ctl and --device take a value (as the
// next word or after '='), and `--` ends the flags.
#include "ctl_cmd.h"

#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "ctl/attributes.h"
#include "ctl/control_server.h"
#include "flags.h"
#include "paths.h"
#include "tool_common.h"

namespace ztier::tool {
namespace {

constexpr const char* kCommand = "ztier ctl";

std::string AttributeHelp() {
  std::string text = "\ndevice attributes (zram's sysfs names):\n";
  std::string control = "\ncontrol operations (no device):\n";
  for (const ctl::AttributeInfo& a : ctl::Attributes()) {
    const char* mode = a.show && a.store ? "rw" : a.show ? "ro" : "wo";
    char line[160];
    std::snprintf(line, sizeof(line), "  %-22s %s  %s\n",
                  std::string(a.name).c_str(), mode,
                  std::string(a.help).c_str());
    (a.control ? control : text) += line;
  }
  return text + control +
         "\nWithout VALUE the attribute is shown (ro/rw), with VALUE it is "
         "stored (wo/rw);\nquote a VALUE that holds spaces: "
         "ztier ctl algorithm_params 'level=3 dict=/x'\n"
         "The device may lead instead of --device, as under /sys/block: "
         "DEVICE/ATTRIBUTE\n(ztier ctl zram1/mm_stat), or for a zramN device "
         "DEVICE ATTRIBUTE (ztier ctl zram1 disksize 1G)\n";
}

bool IsControl(std::string_view attribute) {
  for (const ctl::AttributeInfo& a : ctl::Attributes()) {
    if (a.control && a.name == attribute) return true;
  }
  return false;
}

}  // namespace

std::string CtlConnectHint(std::string_view command, std::string_view path,
                           const Status& error) {
  std::string hint = std::string(command) +
                     ": cannot reach the control socket " + std::string(path) +
                     " (" + error.message() + ")\n";
  // A path that is no socket is a wrong path, not a stopped server.
  if (error.code() == StatusCode::kInvalidArgument) {
    return hint +
           "Give the socket of `ztier serve` with --ctl PATH or "
           "ZTIER_CTL.\n";
  }
  return hint +
         "Is `ztier serve` running? Give its socket with --ctl PATH or "
         "ZTIER_CTL.\n";
}

Result<std::string> ResolveCtlPath(const std::string& flag) {
  if (!flag.empty()) return flag;
  return DefaultCtlPath();
}

int ConnectCtl(std::string_view command, const std::string& flag, int* fd) {
  auto path = ResolveCtlPath(flag);
  if (!path.has_value()) {
    // No default: the caller must pass --ctl, a usage error.
    return ReportUsageError(command, path.error().message());
  }
  auto connected = ctl::Connect(*path);
  if (!connected.has_value()) {
    std::fputs(CtlConnectHint(command, *path, connected.error()).c_str(),
               stderr);
    return 1;
  }
  *fd = *connected;
  return 0;
}

int RunCtl(std::span<const std::string_view> args) {
  std::string ctl_path;
  std::string device = "zram0";
  FlagSet flags(kCommand,
                "[--ctl PATH] [--device NAME] [DEVICE[/]]ATTRIBUTE [VALUE]");
  flags.AddString("ctl", &ctl_path, "PATH", kCtlFlagHelp);
  flags.AddString("device", &device, "NAME", "device (default zram0)");
  flags.NotEmpty("ctl");
  flags.NotEmpty("device");

  std::vector<std::string_view> flag_words;
  std::vector<std::string_view> positional;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string_view a = args[i];
    if (a == "--") {
      positional.insert(positional.end(), args.begin() + i + 1, args.end());
      break;
    }
    if (a == "--help" || a == "-h") {
      std::printf("%s: show or store an attribute of a running `ztier serve`."
                  "\n\n%s%s",
                  kCommand, flags.Usage().c_str(), AttributeHelp().c_str());
      return 0;
    }
    // After the attribute, "-5" is a value (the server says EINVAL), not
    // a flag.
    const bool negative_number =
        !positional.empty() && a.size() > 1 && a[0] == '-' && a[1] >= '0' &&
        a[1] <= '9';
    if (a.size() > 1 && a.front() == '-' && !negative_number) {
      flag_words.push_back(a);
      if ((a == "--ctl" || a == "--device") && i + 1 < args.size()) {
        flag_words.push_back(args[++i]);
      }
      continue;
    }
    positional.push_back(a);
  }
  if (auto rc = flags.ParseOrUsageError(flag_words)) return *rc;
  // The device may lead, as in /sys/block: DEVICE/ATTRIBUTE for any
  // device (no attribute's name holds a '/'), or zramN ATTRIBUTE (no
  // attribute's name starts with "zram").
  if (!positional.empty()) {
    std::string_view named = positional[0];
    const std::size_t slash = named.find('/');
    if (slash != std::string_view::npos || named.starts_with("zram")) {
      if (slash != std::string_view::npos) {
        // "/mm_stat" would reach the control operations (no device) and
        // be refused as one of them; "zram0/" would ask for attribute ''.
        if (slash == 0 || slash + 1 == named.size()) {
          return ReportUsageError(
              kCommand, "'" + std::string(named) + "': want DEVICE/ATTRIBUTE");
        }
        positional[0] = named.substr(slash + 1);
        named = named.substr(0, slash);
      } else {
        positional.erase(positional.begin());
      }
      if (flags.WasSet("device") && device != named) {
        return ReportUsageError(kCommand, "two devices: --device " + device +
                                              " and " + std::string(named));
      }
      device = std::string(named);
    }
  }
  if (positional.empty())
    return ReportUsageError(kCommand, "missing ATTRIBUTE");
  if (positional.size() > 2) {
    return ReportUsageError(
        kCommand, "too many arguments (quote a VALUE that holds spaces)");
  }

  ctl::WireRequest req;
  req.attribute = std::string(positional[0]);
  req.device = IsControl(req.attribute) ? "" : device;
  if (positional.size() == 2) req.value = std::string(positional[1]);
  // Store-only attributes whose empty value means something are stored
  // with it when no VALUE is given: train_dict at the default size,
  // recompress of every page, compact (as `echo > .../compact`).
  if ((req.attribute == "train_dict" || req.attribute == "recompress" ||
       req.attribute == "compact") &&
      !req.value.has_value()) {
    req.value = "";
  }
  // A relative backing_dev names a file where the caller is, not where the
  // server happens to run. (A URI, nbd://..., is no file.)
  if (req.attribute == "backing_dev" && req.value.has_value()) {
    req.value = BackingDevValue(*req.value);
  }

  int fd = -1;
  if (int rc = ConnectCtl(kCommand, ctl_path, &fd); rc != 0) return rc;
  auto reply = ctl::Exchange(fd, req);
  ::close(fd);
  if (!reply.has_value()) {
    std::fprintf(stderr, "%s: %s\n", kCommand,
                 reply.error().message().c_str());
    return 1;
  }
  if (!reply->ok) {
    std::fprintf(stderr, "%s: %s: %s\n", kCommand, reply->errno_name.c_str(),
                 reply->message.c_str());
    return 1;
  }
  std::fwrite(reply->text.data(), 1, reply->text.size(), stdout);
  return 0;
}

}  // namespace ztier::tool
