// File: tools/ztier/serve_cmd.cc
//
// `ztier serve` (contract in serve_cmd.h): parse flags, build the device
// registry, start the NBD server and the control server, print how to
// connect, wait for SIGINT/SIGTERM with sigwait(), stop.
#include "serve_cmd.h"

#include <signal.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <vector>

#include "ctl/control_server.h"
#include "flags.h"
#include "nbd/nbd_server.h"
#include "tool_common.h"
#include "ztier/device.h"

namespace ztier::tool {
namespace {

constexpr const char* kCommand = "ztier serve";
constexpr const char* kSynopsis =
    "[--device NAME:SIZE]... [--comp-algorithm NAME] "
    "[--algorithm-params TOKENS] [--mem-limit SIZE] [--unix PATH] "
    "[--listen HOST:PORT] [--ctl PATH] [--max-connections N] [--workers N] "
    "[--backing-dev PATH] [--backing-encrypt]";
constexpr const char* kAbout =
    "serve compressed RAM block devices (userspace zram) over NBD.";

struct DeviceSpec {
  std::string name;
  std::uint64_t size = 0;
};

Result<DeviceSpec> ParseDeviceSpec(const std::string& text) {
  const std::size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    return Err(Status::InvalidArgument("--device takes NAME:SIZE, not '" +
                                       text + "'"));
  }
  DeviceSpec spec;
  spec.name = text.substr(0, colon);
  ZT_ASSIGN_OR_RETURN(spec.size, ParseSize(text.substr(colon + 1)));
  if (spec.size == 0) {
    return Err(Status::InvalidArgument("--device " + text + ": size is 0"));
  }
  return spec;
}

std::string Absolute(const std::string& path) {
  std::error_code ec;
  auto p = std::filesystem::absolute(path, ec);
  return ec ? path : p.lexically_normal().string();
}

int Fail(const std::string& message) {
  std::fprintf(stderr, "%s: %s\n", kCommand, message.c_str());
  return 1;
}

}  // namespace

std::string NbdUnixUri(const std::string& device,
                       const std::string& socket_path) {
  return "nbd+unix:///" + device + "?socket=" + Absolute(socket_path);
}

int RunServe(std::span<const std::string_view> args) {
  std::vector<std::string> device_flags;
  std::string comp_algorithm = "lz4";
  std::string algorithm_params;
  std::string mem_limit_text = "0";
  std::string unix_path = "./ztier.sock";
  std::string listen;
  std::string ctl_path = "./ztier.ctl";
  std::int64_t max_connections = 64;
  std::int64_t workers = 0;
  std::string backing_dev;
  bool backing_encrypt = false;
  FlagSet flags(kCommand, kSynopsis);
  flags.AddList("device", &device_flags, "NAME:SIZE",
                "a device and its disksize (K/M/G suffixes); repeatable "
                "(default zram0:1G)");
  flags.AddString("comp-algorithm", &comp_algorithm, "NAME",
                  "compression algorithm of every device (default lz4)");
  flags.AddString("algorithm-params", &algorithm_params, "TOKENS",
                  "algorithm_params, as zram's (\"level=3\")");
  flags.AddString("mem-limit", &mem_limit_text, "SIZE",
                  "mem_limit of every device (default 0: none)");
  flags.AddString("unix", &unix_path, "PATH",
                  "NBD Unix socket (default ./ztier.sock; mode 0600)");
  flags.AddString("listen", &listen, "HOST:PORT",
                  "also serve NBD over TCP (\":PORT\" is 127.0.0.1)");
  flags.AddString("ctl", &ctl_path, "PATH",
                  "control socket (default ./ztier.ctl)");
  flags.AddInt("max-connections", &max_connections, "N",
               "NBD connections at once (default 64)", 1, 100000);
  flags.AddInt("workers", &workers, "N",
               "NBD request worker threads (default: online cores)", 0, 1024);
  flags.AddString("backing-dev", &backing_dev, "PATH",
                  "backing_dev of the first device, for writeback: a file "
                  "(created, sized to disksize) or a block device");
  flags.AddBool("backing-encrypt", &backing_encrypt,
                "encrypt written-back pages (AES-256-GCM, key kept only in "
                "memory)");
  if (auto rc = flags.ParseCommandLine(args, kAbout)) return *rc;
  if (Status s = CheckCodecName(comp_algorithm, "--comp-algorithm"); !s.ok()) {
    std::fprintf(stderr, "%s: %s\n", kCommand, s.message().c_str());
    return 2;
  }
  auto mem_limit = ParseSize(mem_limit_text);
  if (!mem_limit.has_value()) {
    std::fprintf(stderr, "%s: --mem-limit: %s\n", kCommand,
                 mem_limit.error().message().c_str());
    return 2;
  }
  std::vector<DeviceSpec> specs;
  if (device_flags.empty()) device_flags.push_back("zram0:1G");
  for (const std::string& text : device_flags) {
    auto spec = ParseDeviceSpec(text);
    if (!spec.has_value()) {
      std::fprintf(stderr, "%s: %s\n", kCommand,
                   spec.error().message().c_str());
      return 2;
    }
    specs.push_back(*spec);
  }

  DeviceDefaults defaults;
  defaults.comp_algorithm = comp_algorithm;
  defaults.algorithm_params = algorithm_params;
  defaults.mem_limit = *mem_limit;
  defaults.backing_encrypt = backing_encrypt;
  DeviceRegistry registry(defaults);
  for (const DeviceSpec& spec : specs) {
    auto device = registry.Add(spec.name);
    if (!device.has_value()) {
      return Fail("device " + spec.name + ": " + device.error().message());
    }
    // backing_dev is set before disksize, as zram requires.
    if (&spec == &specs.front() && !backing_dev.empty()) {
      if (Status s = (*device)->SetBackingDev(backing_dev); !s.ok()) {
        return Fail("--backing-dev: " + s.ToString());
      }
    }
    if (Status s = (*device)->SetDisksize(spec.size); !s.ok()) {
      return Fail("device " + spec.name + ": " + s.ToString());
    }
  }

  // Every thread started from here on inherits this mask, so the signals
  // reach only sigwait() below. A vanished client must not kill us.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  nbd::NbdServerOptions options;
  options.unix_path = unix_path;
  options.listen = listen;
  options.max_connections = static_cast<std::size_t>(max_connections);
  options.workers = static_cast<std::size_t>(workers);
  auto nbd_server = nbd::NbdServer::Start(options, &registry);
  if (!nbd_server.has_value()) {
    return Fail("cannot serve NBD: " + nbd_server.error().ToString());
  }
  auto ctl_server = ctl::ControlServer::Start(ctl_path, &registry);
  if (!ctl_server.has_value()) {
    (*nbd_server)->Stop();
    return Fail("cannot open the control socket: " +
                ctl_server.error().ToString());
  }

  const std::string first = specs.front().name;
  const std::string uri = NbdUnixUri(first, unix_path);
  std::printf("ztier serve: %zu device(s), %s\n", specs.size(),
              comp_algorithm.c_str());
  for (const DeviceSpec& spec : specs) {
    std::printf("  %-8s %llu bytes  %s\n", spec.name.c_str(),
                static_cast<unsigned long long>(spec.size),
                NbdUnixUri(spec.name, unix_path).c_str());
  }
  if (!listen.empty()) {
    std::printf("  TCP: nbd://%s:%d/%s\n",
                listen.rfind(':') == 0
                    ? "127.0.0.1"
                    : listen.substr(0, listen.rfind(':')).c_str(),
                (*nbd_server)->tcp_port(), first.c_str());
  }
  if (!backing_dev.empty()) {
    std::printf("  backing_dev of %s: %s%s\n", first.c_str(),
                backing_dev.c_str(), backing_encrypt ? " (encrypted)" : "");
  }
  std::printf("  control socket: %s\n\n", Absolute(ctl_path).c_str());
  std::printf(
      "Connect with:\n"
      "  nbdinfo '%s'\n"
      "  nbdcopy disk.img '%s'\n"
      "  qemu-io -f raw '%s' -c 'write -P 0xab 0 4k' -c 'read -P 0xab 0 4k'\n"
      "  fio --name=t --ioengine=nbd --uri='%s' --rw=randread --bs=4k "
      "--iodepth=32 --size=256m\n"
      "  nbd-client -unix %s -N %s /dev/nbd0    (as root)\n"
      "Stop with Ctrl-C or SIGTERM.\n",
      uri.c_str(), uri.c_str(), uri.c_str(), uri.c_str(),
      Absolute(unix_path).c_str(), first.c_str());
  std::fflush(stdout);

  int sig = 0;
  while (sigwait(&stop_signals, &sig) != 0) {
  }
  std::printf("ztier serve: %s, stopping\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
  std::fflush(stdout);
  (*ctl_server)->Stop();
  (*nbd_server)->Stop();
  return 0;
}

}  // namespace ztier::tool
