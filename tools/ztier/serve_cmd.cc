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
#include "mem_lock.h"
#include "nbd/nbd_server.h"
#include "nbd/tls.h"
#include "tool_common.h"
#include "ztier/device.h"

namespace ztier::tool {
namespace {

// "EBUSY: why", as ztier ctl words an error.
std::string ErrnoText(const Status& s) {
  return std::string(StatusCodeErrnoName(s.code())) + ": " + s.message();
}

constexpr const char* kCommand = "ztier serve";
constexpr const char* kSynopsis =
    "[--device NAME:SIZE]... [--comp-algorithm NAME] "
    "[--algorithm-params TOKENS] [--mem-limit SIZE] [--unix PATH] "
    "[--listen HOST:PORT] [--ctl PATH] [--max-connections N] [--workers N] "
    "[--backing-dev PATH] [--backing-encrypt] [--max-request-size SIZE] "
    "[--max-in-flight N] [--max-in-flight-bytes SIZE] "
    "[--handshake-timeout SECONDS] [--io-timeout SECONDS] "
    "[--tls off|on|require] [--tls-cert PATH] [--tls-key PATH] "
    "[--mlock] [--prealloc]";
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
  std::string max_request_text = "32M";
  std::int64_t max_in_flight = 64;
  std::string max_in_flight_bytes_text = "64M";
  std::int64_t handshake_timeout = 10;
  std::int64_t io_timeout = 30;
  std::string tls_mode;
  std::string tls_cert;
  std::string tls_key;
  bool mlock = false;
  bool prealloc = false;
  bool quiet = false;
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
  flags.AddString("max-request-size", &max_request_text, "SIZE",
                  "largest NBD request (NBD_INFO_BLOCK_SIZE maximum; default "
                  "32M, at most 256M); a longer WRITE closes its connection");
  flags.AddInt("max-in-flight", &max_in_flight, "N",
               "requests of one connection on the workers at once (default "
               "64)", 1, 4096);
  flags.AddString("max-in-flight-bytes", &max_in_flight_bytes_text, "SIZE",
                  "buffer bytes of those requests (default 64M); with the "
                  "512 KiB of socket buffers, a connection's memory bound");
  flags.AddInt("handshake-timeout", &handshake_timeout, "SECONDS",
               "a client must finish the handshake within this (default 10; "
               "0: no limit)", 0, 86400);
  flags.AddInt("io-timeout", &io_timeout, "SECONDS",
               "a request that stops arriving halfway, or replies the client "
               "does not read, for this long close the connection (default "
               "30; 0: no limit); idle clients are never timed out", 0, 86400);
  flags.AddString("tls", &tls_mode, "off|on|require",
                  "NBD_OPT_STARTTLS: off, on (clients may use TLS), require "
                  "(clients must); default on with --tls-cert, else off");
  flags.AddString("tls-cert", &tls_cert, "PATH",
                  "TLS certificate chain (PEM) of the server");
  flags.AddString("tls-key", &tls_key, "PATH",
                  "TLS private key (PEM) of the server");
  flags.AddBool("mlock", &mlock,
                "for a swap device: lock all memory (mlockall, pages locked "
                "as touched) once the devices are made; implies --prealloc; "
                "needs root, CAP_IPC_LOCK or a large `ulimit -l` "
                "(docs/swap.md)");
  flags.AddBool("prealloc", &prealloc,
                "preallocate and fault in each device's memory up to "
                "--mem-limit (required) at start, and never take more: IO "
                "then needs no new memory");
  flags.AddBool("quiet", &quiet,
                "do not log each NBD connection's opening, close (with its "
                "reason) and error replies on stderr");
  if (auto rc = flags.ParseCommandLine(args, kAbout)) return *rc;
  auto max_request = ParseSize(max_request_text);
  if (!max_request.has_value() || *max_request < 4096 ||
      *max_request > (256u << 20)) {
    std::fprintf(stderr, "%s: --max-request-size: want 4K to 256M, not '%s'\n",
                 kCommand, max_request_text.c_str());
    return 2;
  }
  auto max_in_flight_bytes = ParseSize(max_in_flight_bytes_text);
  if (!max_in_flight_bytes.has_value() || *max_in_flight_bytes == 0) {
    std::fprintf(stderr, "%s: --max-in-flight-bytes: want a size, not '%s'\n",
                 kCommand, max_in_flight_bytes_text.c_str());
    return 2;
  }
  if (tls_mode.empty()) tls_mode = tls_cert.empty() ? "off" : "on";
  if (tls_mode != "off" && tls_mode != "on" && tls_mode != "require") {
    std::fprintf(stderr, "%s: --tls takes off, on or require, not '%s'\n",
                 kCommand, tls_mode.c_str());
    return 2;
  }
  if (tls_mode != "off" && (tls_cert.empty() || tls_key.empty())) {
    std::fprintf(stderr, "%s: --tls=%s needs --tls-cert and --tls-key\n",
                 kCommand, tls_mode.c_str());
    return 2;
  }
  std::unique_ptr<nbd::TlsContext> tls;
  if (tls_mode != "off") {
    auto loaded = nbd::TlsContext::Load(tls_cert, tls_key);
    if (!loaded.has_value()) {
      std::fprintf(stderr, "%s: TLS: %s\n", kCommand,
                   loaded.error().message().c_str());
      return 2;
    }
    tls = std::move(*loaded);
  }
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
  // Locked memory must be bounded: an unlimited device could lock the
  // host's RAM away. The reserve is that bound.
  prealloc = prealloc || mlock;
  if (prealloc && *mem_limit == 0) {
    std::fprintf(stderr,
                 "%s: %s needs --mem-limit SIZE: every device preallocates "
                 "(and with --mlock locks) that much, and unbounded locked "
                 "memory could take the host down\n",
                 kCommand, mlock ? "--mlock" : "--prealloc");
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
  defaults.prealloc = prealloc;
  DeviceRegistry registry(defaults);
  for (const DeviceSpec& spec : specs) {
    auto device = registry.Add(spec.name);
    if (!device.has_value()) {
      return Fail("device " + spec.name + ": " + device.error().message());
    }
    // backing_dev is set before disksize, as zram requires.
    if (&spec == &specs.front() && !backing_dev.empty()) {
      if (Status s = (*device)->SetBackingDev(backing_dev); !s.ok()) {
        return Fail("--backing-dev: " + ErrnoText(s));
      }
    }
    if (Status s = (*device)->SetDisksize(spec.size); !s.ok()) {
      return Fail("device " + spec.name + ": " + ErrnoText(s));
    }
  }
  // The devices' memory is made (preallocated); lock it and all else
  // before any thread serves.
  MemoryLockReport locked;
  if (mlock) {
    auto r = LockProcessMemory();
    if (!r.has_value()) return Fail("--mlock: " + r.error().message());
    locked = *r;
  }

  // Every thread started from here on inherits this mask, so the signals
  // reach only sigwait() below. A vanished client must not kill us.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGHUP);  // never fatal: see the loop at the end
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  nbd::NbdServerOptions options;
  options.unix_path = unix_path;
  options.listen = listen;
  options.max_connections = static_cast<std::size_t>(max_connections);
  options.workers = static_cast<std::size_t>(workers);
  options.max_request_bytes = static_cast<std::uint32_t>(*max_request);
  options.max_in_flight = static_cast<std::size_t>(max_in_flight);
  options.max_in_flight_bytes = *max_in_flight_bytes;
  options.handshake_timeout_ms =
      handshake_timeout == 0 ? -1 : static_cast<int>(handshake_timeout * 1000);
  options.io_timeout_ms =
      io_timeout == 0 ? -1 : static_cast<int>(io_timeout * 1000);
  options.tls = tls.get();
  options.tls_required = tls_mode == "require";
  options.preallocate = prealloc;
  if (!quiet) {
    options.log = [](const std::string& line) {
      std::fprintf(stderr, "ztier serve: %s\n", line.c_str());
    };
  }
  auto nbd_server = nbd::NbdServer::Start(options, &registry);
  if (!nbd_server.has_value()) {
    return Fail("cannot serve NBD: " + ErrnoText(nbd_server.error()));
  }
  auto ctl_server = ctl::ControlServer::Start(ctl_path, &registry);
  if (!ctl_server.has_value()) {
    (*nbd_server)->Stop();
    return Fail("cannot open the control socket: " +
                ErrnoText(ctl_server.error()));
  }

  const std::string first = specs.front().name;
  // With TLS the URIs say so (nbds+unix://, nbds://).
  const auto shown = [&](std::string u) {
    if (tls != nullptr) u.insert(3, "s");
    return u;
  };
  const std::string uri = shown(NbdUnixUri(first, unix_path));
  std::printf("ztier serve: %zu device(s), %s\n", specs.size(),
              comp_algorithm.c_str());
  for (const DeviceSpec& spec : specs) {
    std::printf("  %-8s %llu bytes  %s\n", spec.name.c_str(),
                static_cast<unsigned long long>(registry.Find(spec.name)->disksize()),
                shown(NbdUnixUri(spec.name, unix_path)).c_str());
  }
  if (!listen.empty()) {
    // The host as a URI writes it: an IPv6 address in brackets.
    std::string host = listen.rfind(':') == 0
                           ? "127.0.0.1"
                           : listen.substr(0, listen.rfind(':'));
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
      host = host.substr(1, host.size() - 2);
    }
    if (host.find(':') != std::string::npos) host = "[" + host + "]";
    std::printf("  TCP: %s://%s:%d/%s\n", tls != nullptr ? "nbds" : "nbd",
                host.c_str(), (*nbd_server)->tcp_port(), first.c_str());
  }
  if (!backing_dev.empty()) {
    std::printf("  backing_dev of %s: %s%s\n", first.c_str(),
                backing_dev.c_str(), backing_encrypt ? " (encrypted)" : "");
  }
  if (tls != nullptr) {
    std::printf("  TLS: %s, certificate %s (clients add "
                "&tls-certificates=DIR holding ca-cert.pem)\n",
                tls_mode == "require" ? "required" : "offered",
                Absolute(tls_cert).c_str());
  }
  if (mlock) {
    std::printf("  memory: locked (mlockall, on fault), %.1f MiB resident, "
                "%.0f MiB preallocated a device\n",
                static_cast<double>(locked.resident_bytes) / (1 << 20),
                static_cast<double>(*mem_limit) / (1 << 20));
    if (!locked.warning.empty()) {
      std::fprintf(stderr, "%s: warning: %s\n", kCommand,
                   locked.warning.c_str());
    }
  } else if (prealloc) {
    std::printf("  memory: %.0f MiB preallocated a device (not locked)\n",
                static_cast<double>(*mem_limit) / (1 << 20));
  }
  std::printf("  control socket: %s\n\n", Absolute(ctl_path).c_str());
  std::printf(
      "Connect with:\n"
      "  nbdinfo '%s'\n"
      "  nbdcopy disk.img '%s'\n"
      "  qemu-io -r -f raw '%s' -c 'read 0 4k'\n"
      "  fio --name=t --ioengine=nbd --uri='%s' --rw=randread --bs=4k "
      "--iodepth=32 --size=256m\n"
      "  nbd-client -unix %s -N %s -b 4096 /dev/nbd0    (as root)\n"
      "Stop with Ctrl-C or SIGTERM (SIGHUP keeps it running).\n",
      uri.c_str(), uri.c_str(), uri.c_str(), uri.c_str(),
      Absolute(unix_path).c_str(), first.c_str());
  std::fflush(stdout);

  // SIGHUP (a closed terminal, or `systemctl reload`) must never stop a
  // server that may hold a kernel's swap: it is logged, and the devices and
  // their pages stay as they are. There is no configuration file to read
  // again yet.
  int sig = 0;
  for (;;) {
    if (sigwait(&stop_signals, &sig) != 0) continue;
    if (sig != SIGHUP) break;
    std::fprintf(stderr,
                 "%s: SIGHUP: nothing to reload (no configuration file); "
                 "serving on, every device and page kept\n",
                 kCommand);
  }
  std::printf("ztier serve: %s, stopping\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
  std::fflush(stdout);
  (*ctl_server)->Stop();
  (*nbd_server)->Stop();
  return 0;
}

}  // namespace ztier::tool
