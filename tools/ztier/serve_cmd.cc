// File: tools/ztier/serve_cmd.cc
//
// `ztier serve` (contract in serve_cmd.h): parse flags and the
// configuration file, build the device registry, start the ublk disks
// (--ublk) and the NBD, control and metrics servers, print how to
// connect, tell the service manager, and wait for signals with
// sigtimedwait(): SIGHUP reloads, SIGINT/SIGTERM stop.
#include "serve_cmd.h"

#include <signal.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <tuple>
#include <vector>

#include "ctl/control_server.h"
#include "ctl/metrics_server.h"
#include "flags.h"
#include "log.h"
#include "mem_lock.h"
#include "nbd/nbd_backing_file.h"
#include "nbd/nbd_server.h"
#include "nbd/tls.h"
#include "paths.h"
#include "platform/clock.h"
#include "platform/socket.h"
#include "platform/ublk.h"
#include "policy_runner.h"
#include "sd_notify.h"
#include "serve_devices.h"
#include "service_config.h"
#include "tool_common.h"
#include "ublk/ublk_disk.h"
#include "ublk/ublk_front_end.h"
#include "ztier/device.h"

namespace ztier::tool {
namespace {

constexpr const char* kCommand = "ztier serve";
constexpr const char* kSynopsis =
    "[--config FILE] [--device NAME[:SIZE]]... [--comp-algorithm NAME] "
    "[--algorithm-params TOKENS] [--recomp-algorithm NAME[(K=V,...)]]... "
    "[--mem-limit SIZE] [--unit-pages N] [--unix PATH] "
    "[--listen HOST:PORT] [--ctl PATH] [--max-connections N] [--workers N] "
    "[--backing-dev PATH|URI] [--backing-encrypt] "
    "[--backing-connections N] [--backing-timeout SECONDS] "
    "[--max-request-size SIZE] "
    "[--max-in-flight N] [--max-in-flight-bytes SIZE] "
    "[--handshake-timeout SECONDS] [--io-timeout SECONDS] "
    "[--tls off|on|require] [--tls-cert PATH] [--tls-key PATH] "
    "[--mlock] [--prealloc] [--metrics-listen HOST:PORT] "
    "[--metrics-unix PATH] [--policy TOKENS] [--ublk] [--ublk-queues N] "
    "[--ublk-depth N] [--ublk-max-io SIZE] [--ublk-trace FILE] "
    "[-v|-q|--log-level LEVEL]";
constexpr const char* kAbout =
    "serve compressed RAM block devices (userspace zram) over NBD, and with "
    "--ublk as /dev/ublkbN.";

// Everything the flags (and the [ztier] section) set.
struct ServeSettings {
  std::string config;
  std::vector<std::string> devices;
  std::string comp_algorithm = "lz4";
  std::string algorithm_params;
  std::vector<std::string> recomp_algorithms;  // priorities 1, 2, 3
  std::string mem_limit = "0";
  std::int64_t unit_pages = 0;
  std::string unix_path;  // empty: the default directory's ztier.sock
  std::string listen;
  std::string ctl_path;   // empty: the default directory's ztier.ctl
  std::int64_t max_connections = 64;
  std::int64_t workers = 0;
  std::string backing_dev;
  bool backing_encrypt = false;
  std::int64_t backing_connections = 4;
  std::int64_t backing_timeout = 30;
  std::string max_request = "32M";
  std::int64_t max_in_flight = 64;
  std::string max_in_flight_bytes = "64M";
  std::int64_t handshake_timeout = 10;
  std::int64_t io_timeout = 30;
  std::string tls;
  std::string tls_cert;
  std::string tls_key;
  bool mlock = false;
  bool prealloc = false;
  std::string metrics_listen;
  std::string metrics_unix;
  std::string policy;  // empty: no post-processing policy
  bool ublk = false;
  std::int64_t ublk_queues = 0;  // 0: one per online CPU
  std::int64_t ublk_depth = 64;
  std::string ublk_max_io = "512K";
  std::string ublk_trace;  // hidden: descriptor trace file
  std::string log_level;
  bool quiet = false;
  bool verbose = false;
};

// The flags that are booleans, which the file writes yes/no.
bool IsBoolKey(std::string_view key) {
  return key == "backing-encrypt" || key == "mlock" || key == "prealloc" ||
         key == "ublk";
}

void DefineFlags(FlagSet& flags, ServeSettings* s) {
  flags.Section("devices");
  flags.AddString("config", &s->config, "FILE",
                  "read the devices ([zramN] sections, zram-generator.conf's "
                  "keys) and these settings ([ztier]) from FILE; see "
                  "ztier.conf(5)");
  flags.AddList("device", &s->devices, "NAME[:SIZE]",
                "a device and its disksize (K/M/G/T suffixes); without SIZE "
                "it starts uninitialised; repeatable (default zram0:1G)");
  flags.AddString("comp-algorithm", &s->comp_algorithm, "NAME",
                  "compression algorithm of the --device devices (default "
                  "lz4; lzo-rle is lzo)");
  flags.AddString("algorithm-params", &s->algorithm_params, "TOKENS",
                  "algorithm_params, as zram's (\"level=3\")");
  flags.AddList("recomp-algorithm", &s->recomp_algorithms, "NAME[(K=V,...)]",
                "a recompression algorithm of the --device devices, with its "
                "algorithm_params (\"zstd(level=9)\"); repeatable: "
                "priorities 1, 2, 3");
  flags.AddString("mem-limit", &s->mem_limit, "SIZE",
                  "mem_limit of each --device device (default 0: none)");
  flags.AddInt("unit-pages", &s->unit_pages, "N",
               "store each aligned run of N pages written at once as one "
               "compressed object: 4, 8 or 16 (default 0: page by page); "
               "pays for cold or sequential data, costs random 4 KiB reads",
               0, 16);
  flags.Section("NBD and control sockets");
  flags.AddString("unix", &s->unix_path, "PATH",
                  "NBD Unix socket, mode 0600 (default /run/ztier/ztier.sock "
                  "as root, else $XDG_RUNTIME_DIR/ztier/ztier.sock)");
  flags.AddString("listen", &s->listen, "HOST:PORT",
                  "also serve NBD over TCP (\":PORT\" is 127.0.0.1)");
  flags.AddString("ctl", &s->ctl_path, "PATH",
                  "control socket, mode 0600 (default ztier.ctl beside the "
                  "default NBD socket)");
  flags.AddInt("max-connections", &s->max_connections, "N",
               "NBD connections at once (default 64)", 1, 100000);
  flags.AddInt("workers", &s->workers, "N",
               "NBD request worker threads (default: online cores)", 0, 1024);
  flags.Section("writeback");
  flags.AddString("backing-dev", &s->backing_dev, "PATH|URI",
                  "backing_dev of the first --device device, for writeback: "
                  "a file (created, sized to disksize), a block device, or "
                  "a remote NBD export (nbd://HOST[:PORT]/EXPORT, nbds://, "
                  "nbd+unix:///EXPORT?socket=PATH)");
  flags.AddInt("backing-connections", &s->backing_connections, "N",
               "connections to a remote NBD backing_dev, writes in flight "
               "over all of them where the server offers multi-conn "
               "(default 4)",
               1, 64);
  flags.AddInt("backing-timeout", &s->backing_timeout, "SECONDS",
               "a remote backing_dev's command not answered in this long "
               "fails (EIO) and its connection is made again; also the "
               "longest a read of a written-back page waits, but for a "
               "reconnect's label check, timed on its own (default 30)",
               1, 3600);
  flags.AddBool("backing-encrypt", &s->backing_encrypt,
                "encrypt written-back pages (AES-256-GCM, key kept only in "
                "memory)");
  flags.Section("NBD requests and TLS");
  flags.AddString("max-request-size", &s->max_request, "SIZE",
                  "largest NBD request (NBD_INFO_BLOCK_SIZE maximum; default "
                  "32M, 64K to 256M); a longer READ or WRITE is refused "
                  "(EINVAL), a WRITE over 32M closes its connection");
  flags.AddInt("max-in-flight", &s->max_in_flight, "N",
               "requests of one connection on the workers at once (default "
               "64)", 1, 4096);
  flags.AddString("max-in-flight-bytes", &s->max_in_flight_bytes, "SIZE",
                  "buffer bytes of those requests (default 64M); with the "
                  "512 KiB of socket buffers, a connection's memory bound");
  flags.AddInt("handshake-timeout", &s->handshake_timeout, "SECONDS",
               "a client must finish the handshake within this (default 10; "
               "0: no limit)", 0, 86400);
  flags.AddInt("io-timeout", &s->io_timeout, "SECONDS",
               "a request that stops arriving halfway, or replies the client "
               "does not read, for this long close the connection (default "
               "30; 0: no limit); idle clients are never timed out", 0, 86400);
  flags.AddString("tls", &s->tls, "off|on|require",
                  "NBD_OPT_STARTTLS: off, on (clients may use TLS), require "
                  "(clients must); default on with --tls-cert, else off");
  flags.AddString("tls-cert", &s->tls_cert, "PATH",
                  "TLS certificate chain (PEM) of the server");
  flags.AddString("tls-key", &s->tls_key, "PATH",
                  "TLS private key (PEM) of the server");
  flags.Section("memory");
  flags.AddBool("mlock", &s->mlock,
                "for a swap device: lock all memory (mlockall, pages locked "
                "as touched) once the devices are made; implies --prealloc; "
                "needs root, CAP_IPC_LOCK or a large `ulimit -l` "
                "(docs/swap.md)");
  flags.AddBool("prealloc", &s->prealloc,
                "preallocate and fault in each device's memory up to its "
                "mem_limit (required) at start, and never take more: IO "
                "then needs no new memory");
  flags.Section("metrics and policy");
  flags.AddString("metrics-listen", &s->metrics_listen, "HOST:PORT",
                  "serve Prometheus metrics at /metrics over TCP (\":PORT\" "
                  "is 127.0.0.1; docs/metrics.md)");
  flags.AddString("metrics-unix", &s->metrics_unix, "PATH",
                  "serve /metrics on a Unix socket (mode 0600)");
  flags.AddString("policy", &s->policy, "TOKENS",
                  "run the post-processing policy on every device: mark "
                  "idle, recompress idle pages, write back old ones within "
                  "a daily budget (\"period=60s idle_age=10m "
                  "recompress_cpu=25% writeback_age=1h "
                  "writeback_daily=400M\"; README, \"Post-processing "
                  "policy\")");
  flags.Section("ublk");
  flags.AddBool("ublk", &s->ublk,
                "also expose each initialised device as a block device, "
                "/dev/ublkbN (zramN gets N when free), through the kernel's "
                "ublk driver (Linux 6.5+, ublk_drv; root); README, \"ztier "
                "as a block device on kernels with ublk\"");
  flags.AddInt("ublk-queues", &s->ublk_queues, "N",
               "ublk queues (threads) per disk (default 0: one per online "
               "CPU)", 0, 4096);
  flags.AddInt("ublk-depth", &s->ublk_depth, "N",
               "requests in flight per ublk queue (default 64)", 1, 4096);
  flags.AddString(
      "ublk-max-io", &s->ublk_max_io, "SIZE",
      "largest ublk request (default 512K; 4K to 32M, a "
      "multiple of the page size, 4K on x86-64); each queue keeps depth "
      "buffers of it");
  flags.AddString("ublk-trace", &s->ublk_trace, "FILE",
                  "debugging: write each ublk request's descriptor to FILE "
                  "(the format of testdata/ublk_descriptors.txt)");
  flags.Section("logging");
  flags.AddString("log-level", &s->log_level, "LEVEL",
                  "error, warning, info (default) or debug");
  flags.AddBool("quiet", &s->quiet,
                "log warnings and errors only (no connection lines)");
  flags.AddBool("verbose", &s->verbose, "log debug lines too");
}

struct DeviceSpec {
  std::string name;
  std::uint64_t size = 0;  // 0: uninitialised
};

Result<DeviceSpec> ParseDeviceSpec(const std::string& text) {
  const std::size_t colon = text.rfind(':');
  DeviceSpec spec;
  if (colon == std::string::npos) {
    spec.name = text;
    return spec;
  }
  if (colon == 0 || colon + 1 == text.size()) {
    return Err(Status::InvalidArgument("--device takes NAME or NAME:SIZE, "
                                       "not '" + text + "'"));
  }
  spec.name = text.substr(0, colon);
  auto size = ParseSize(text.substr(colon + 1));
  if (!size.has_value()) {
    return Err(Status::InvalidArgument("--device " + text + ": " +
                                       size.error().message()));
  }
  if (*size == 0) {
    return Err(Status::InvalidArgument("--device " + text + ": size is 0"));
  }
  spec.size = *size;
  return spec;
}

// The host of a HOST:PORT listen address as a URI writes it: ":PORT" is
// 127.0.0.1, and an IPv6 address goes in brackets.
std::string UriHost(const std::string& listen) {
  std::string host = listen.rfind(':') == 0
                         ? "127.0.0.1"
                         : listen.substr(0, listen.rfind(':'));
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (host.find(':') != std::string::npos) host = "[" + host + "]";
  return host;
}

std::string Absolute(const std::string& path) {
  std::error_code ec;
  auto p = std::filesystem::absolute(path, ec);
  return ec ? path : p.lexically_normal().string();
}

int Fail(const std::string& message) {
  Log(LogLevel::kError, message);
  return 1;
}

int UsageFail(const std::string& message) {
  Log(LogLevel::kError, message);
  return 2;
}

// Fail or UsageFail by what `st` says: kInvalidArgument is a setting that
// cannot work (a bad address, a device the file sets up wrongly, a level
// the codec refuses), which a restart would meet again (exit 2, which the
// unit does not restart).
int FailFor(const Status& st, const std::string& message) {
  return st.code() == StatusCode::kInvalidArgument ? UsageFail(message)
                                                    : Fail(message);
}

// Sets from the [ztier] section every flag the command line did not set.
// The debug lines that name a setting the command line overrides go to
// *notes, for the caller to log once the log level is known.
Status ApplyZtierSection(const ServiceConfig& config, const FlagSet& given,
                         ServeSettings* s, std::vector<std::string>* notes) {
  for (const ConfigEntry& e : config.ztier) {
    const std::string where = config.path + ":" + std::to_string(e.line) + ": ";
    if (given.WasSet(e.key) ||
        (e.key == "log-level" &&
         (given.WasSet("verbose") || given.WasSet("quiet")))) {
      notes->push_back(where + e.key + ": the command line's value wins");
      continue;
    }
    std::string value = e.value;
    if (IsBoolKey(e.key)) {
      const std::optional<bool> b = ParseConfigBool(value);
      if (!b.has_value()) {
        return Status::InvalidArgument(where + e.key +
                                       ": want yes or no (true/false, on/off, "
                                       "1/0), not '" + value + "'");
      }
      value = *b ? "true" : "false";
    }
    FlagSet file_flags(kCommand);
    ServeSettings scratch = *s;
    DefineFlags(file_flags, &scratch);
    const std::string arg = "--" + e.key + "=" + value;
    const std::string_view args[] = {arg};
    if (Status st = file_flags.Parse(args); !st.ok()) {
      // The flag parser names a flag ("ztier serve: --workers: ..."); the
      // file's line names its key, as every other [ztier] error does.
      std::string m = st.message();
      const std::string flag = std::string(kCommand) + ": --";
      if (m.starts_with(flag)) m = "[ztier] " + m.substr(flag.size());
      return Status::InvalidArgument(where + m);
    }
    *s = scratch;
  }
  return Status::Ok();
}

// The log level --log-level, -q and -v ask for.
Result<LogLevel> WantedLogLevel(const ServeSettings& s) {
  if (!s.log_level.empty()) {
    auto parsed = ParseLogLevel(s.log_level);
    if (!parsed.has_value()) {
      return Err(Status::InvalidArgument(
          "--log-level takes error, warning, info or debug, not '" +
          s.log_level + "'"));
    }
    return *parsed;
  }
  if (s.verbose) return LogLevel::kDebug;
  if (s.quiet) return LogLevel::kWarning;
  return LogLevel::kInfo;
}

// Settles the log level from --log-level, -q and -v.
Status SetUpLog(const ServeSettings& s) {
  ZT_ASSIGN_OR_RETURN(const LogLevel level, WantedLogLevel(s));
  SetLogLevel(level);
  return Status::Ok();
}

// The one-line STATUS= of the service manager.
std::string Summary(const DeviceRegistry& registry, const nbd::NbdServer& nbd) {
  std::uint64_t stored = 0, used = 0;
  const auto devices = registry.List();
  for (const auto& d : devices) {
    const PageStoreStats st = d->Stats();
    stored += st.orig_data_size;
    used += st.mem_used_total;
  }
  char line[160];
  std::snprintf(line, sizeof line,
                "%zu device(s), %.1f MiB stored in %.1f MiB, %zu NBD "
                "connection(s)",
                devices.size(), static_cast<double>(stored) / (1 << 20),
                static_cast<double>(used) / (1 << 20), nbd.connections());
  return line;
}

// A line of the engine's log callbacks (device, NBD server, ublk): a
// warning when it starts with "warning: " (which the log's level then
// replaces), else information.
void LogEngineLine(std::string_view line) {
  constexpr std::string_view kWarning = "warning: ";
  if (line.starts_with(kWarning)) {
    Log(LogLevel::kWarning, line.substr(kWarning.size()));
  } else {
    Log(LogLevel::kInfo, line);
  }
}

// A failure is logged once, not every 10 s (the STATUS= line) while the
// socket stays bad; a later success says so.
void Notify(const ServiceNotifier& notifier, const std::string& state) {
  static std::atomic<bool> failing{false};
  if (Status s = notifier.Notify(state); !s.ok()) {
    if (!failing.exchange(true)) {
      Log(LogLevel::kWarning,
          "sd_notify: " + s.message() +
              " (further failures are not logged until one succeeds)");
    }
  } else if (failing.exchange(false)) {
    Log(LogLevel::kInfo, "sd_notify: the service manager is reached again");
  }
}

}  // namespace

std::string NbdUnixUri(const std::string& device,
                       const std::string& socket_path) {
  return "nbd+unix:///" + device + "?socket=" + Absolute(socket_path);
}

namespace {

// The checked settings: what the flags' texts mean.
struct Checked {
  std::uint64_t max_request = 0;
  std::uint64_t max_in_flight_bytes = 0;
  std::uint64_t mem_limit = 0;
  bool prealloc = false;
  std::unique_ptr<nbd::TlsContext> tls;
  std::vector<DeviceSpec> specs;  // without --config
  std::array<RecompCodec, kMaxCodecPriorities - 1> recomp;  // --recomp-algorithm
  std::uint32_t ublk_max_io = 512 << 10;
  std::optional<PolicyOptions> policy;  // --policy, when given
  // --listen's and --metrics-listen's addresses, looked up once, at start.
  std::optional<platform::ResolvedTcpAddress> listen;
  std::optional<platform::ResolvedTcpAddress> metrics_listen;
};

std::optional<Status> InFile(const Status& st, const ServiceConfig& config,
                             const FlagSet& given);

// The command line (-v and -q are --verbose and --quiet) and the
// --config file into *s and *config, the command line's alone into
// *from_command_line; the exit status when it is bad or asked for --help.
std::optional<int> ParseArgs(std::span<const std::string_view> raw_args,
                             FlagSet& flags, ServeSettings* s,
                             ServeSettings* from_command_line,
                             std::optional<ServiceConfig>* config) {
  DefineFlags(flags, s);
  // On the command line an empty value (an unset variable in a unit's
  // ExecStart) is not a default: it would serve something other than what
  // was meant (a [ztier] key left empty in the file keeps its default).
  for (const char* name : {"config", "unix", "ctl", "listen", "backing-dev",
                           "tls-cert", "tls-key", "metrics-listen",
                           "metrics-unix", "ublk-trace"}) {
    flags.NotEmpty(name);
  }
  flags.Short("verbose", 'v');
  flags.Short("quiet", 'q');
  if (auto rc = flags.ParseCommandLine(raw_args, kAbout)) return *rc;
  *from_command_line = *s;  // what each reload's next start begins from
  std::vector<std::string> notes;  // debug lines, logged once -v applies
  if (!s->config.empty()) {
    for (const char* per_device : {"device", "comp-algorithm",
                                   "algorithm-params", "recomp-algorithm",
                                   "mem-limit", "backing-dev"}) {
      if (flags.WasSet(per_device)) {
        return ReportUsageError(
            kCommand, std::string("--") + per_device +
                          " cannot be combined with --config: the file's "
                          "[zramN] sections set each device");
      }
    }
    auto loaded = LoadServiceConfig(s->config);
    if (!loaded.has_value()) return UsageFail(loaded.error().message());
    *config = std::move(*loaded);
  }
  // The file's warnings at the level it or the command line sets, not
  // before it is known; when start-up refuses the file before that, at the
  // command line's level, ahead of the error, so that all that is wrong in
  // the file is said at once.
  const auto say_warnings = [&] {
    for (const std::string& n : notes) Log(LogLevel::kDebug, n);
    if (!config->has_value()) return;
    for (const std::string& w : (*config)->warnings) {
      Log(LogLevel::kWarning, w);
    }
  };
  const auto refuse = [&](auto fail) {
    // A bad level there leaves the default.
    static_cast<void>(SetUpLog(*from_command_line));
    say_warnings();
    return fail();
  };
  if (config->has_value()) {
    if (Status st = ApplyZtierSection(**config, flags, s, &notes); !st.ok()) {
      return refuse([&] { return UsageFail(st.message()); });
    }
  }
  if (Status st = SetUpLog(*s); !st.ok()) {
    // The file's log-level, said where the file sets it.
    if (config->has_value()) {
      if (auto where = InFile(st, **config, flags)) {
        return refuse([&] { return UsageFail(where->message()); });
      }
    }
    return refuse([&] { return ReportUsageError(kCommand, st.message()); });
  }
  say_warnings();
  return std::nullopt;
}

// --tls, --tls-cert and --tls-key into c->tls.
Status CheckTls(ServeSettings& s, Checked* c) {
  if (s.tls.empty()) s.tls = s.tls_cert.empty() ? "off" : "on";
  if (s.tls != "off" && s.tls != "on" && s.tls != "require") {
    return Status::InvalidArgument("--tls takes off, on or require, not '" +
                                   s.tls + "'");
  }
  // Each message leads with a setting that was given, so that a file's
  // error names its line (InFile).
  if (s.tls != "off" && s.tls_cert.empty() != s.tls_key.empty()) {
    return Status::InvalidArgument(s.tls_cert.empty()
                                       ? "--tls-key: needs --tls-cert as well"
                                       : "--tls-cert: needs --tls-key as well");
  }
  if (s.tls != "off" && s.tls_cert.empty()) {
    return Status::InvalidArgument("--tls=" + s.tls +
                                   " needs --tls-cert and --tls-key");
  }
  if (s.tls != "off") {
    auto loaded = nbd::TlsContext::Load(s.tls_cert, s.tls_key);
    if (!loaded.has_value()) {
      // Led by the setting whose file failed, so that a file's error names
      // its line (InFile); a pair gnutls refuses is the certificate's.
      const std::string& m = loaded.error().message();
      return Status::FailedPrecondition(
          (m.starts_with("TLS key ") ? "--tls-key: " : "--tls-cert: ") + m);
    }
    c->tls = std::move(*loaded);
  }
  return Status::Ok();
}

// The settings' values into *c (the policy's tokens parsed), filling in
// s's defaults (--tls, --device) and reading the TLS files, nothing else;
// kInvalidArgument naming the
// first that cannot work (a TLS file that cannot be loaded:
// kFailedPrecondition).
// What a start checks, and what a reload checks of the next start's
// settings; of the addresses only their form (a start looks their names
// up in CheckSettings).
Status CheckValues(ServeSettings& s, bool have_config, Checked* c) {
  auto max_request = ParseSize(s.max_request);
  // proto.md: a server MUST serve unfragmented reads of 64 KiB.
  if (!max_request.has_value() || *max_request < (64u << 10) ||
      *max_request > (256u << 20)) {
    return Status::InvalidArgument(
        "--max-request-size: want 64K to 256M, not '" + s.max_request + "'");
  }
  c->max_request = *max_request;
  auto max_in_flight_bytes = ParseSize(s.max_in_flight_bytes);
  if (!max_in_flight_bytes.has_value() || *max_in_flight_bytes == 0) {
    return Status::InvalidArgument("--max-in-flight-bytes: want a size, not '" +
                                   s.max_in_flight_bytes + "'");
  }
  c->max_in_flight_bytes = *max_in_flight_bytes;
  auto ublk_max_io = ParseSize(s.ublk_max_io);
  ublk::UblkDiskOptions ublk_disk;  // the disks' own bounds (ublk_disk.h)
  ublk_disk.max_io_bytes = ublk_max_io.has_value() && *ublk_max_io <= UINT32_MAX
                               ? static_cast<std::uint32_t>(*ublk_max_io)
                               : 0;  // refused below
  if (!ublk::CheckDiskOptions(ublk_disk).ok()) {
    return Status::InvalidArgument(
        "--ublk-max-io: want a multiple of " +
        std::to_string(platform::UblkPageBytes() >> 10) +
        "K (the page size) up to 32M, not '" + s.ublk_max_io + "'");
  }
  c->ublk_max_io = ublk_disk.max_io_bytes;
  // The addresses' form now, before any device is made; their names are
  // looked up by CheckSettings, at start only.
  for (const auto& [flag, spec] :
       {std::pair{"listen", &s.listen},
        std::pair{"metrics-listen", &s.metrics_listen}}) {
    if (spec->empty()) continue;
    if (auto a = platform::ParseTcpAddress(*spec); !a.has_value()) {
      return Status::InvalidArgument(std::string("--") + flag + ": " +
                                     a.error().message());
    }
  }
  if (!s.policy.empty()) {
    auto p = ParsePolicyOptions(s.policy);  // "policy: ..." on an error
    if (!p.has_value()) {
      return Status(p.error().code(), "--" + p.error().message());
    }
    c->policy = std::move(*p);
  }
  ZT_RETURN_IF_ERROR(CheckTls(s, c));
  ZT_RETURN_IF_ERROR(
      CheckCodecName(CanonicalCodecName(s.comp_algorithm), "--comp-algorithm"));
  if (s.recomp_algorithms.size() >= kMaxCodecPriorities) {
    return Status::InvalidArgument(
        "--recomp-algorithm: at most 3 (zram's priorities 1 to 3)");
  }
  for (std::size_t i = 0; i < s.recomp_algorithms.size(); ++i) {
    auto r = ParseAlgorithmItem(s.recomp_algorithms[i], "--recomp-algorithm");
    if (!r.has_value()) return r.error();
    c->recomp[i] = {r->name, r->params};
  }
  if (s.unit_pages != 0 && s.unit_pages != 4 && s.unit_pages != 8 &&
      s.unit_pages != 16) {
    return Status::InvalidArgument(
        "--unit-pages: want 4, 8 or 16 (or 0: off), not " +
        std::to_string(s.unit_pages));
  }
  auto mem_limit = ParseSize(s.mem_limit);
  if (!mem_limit.has_value()) {
    return Status::InvalidArgument("--mem-limit: " +
                                   mem_limit.error().message());
  }
  c->mem_limit = *mem_limit;
  // Locked memory must be bounded: an unlimited device could lock the
  // host's RAM away. The reserve is that bound.
  c->prealloc = s.prealloc || s.mlock;
  if (c->prealloc && c->mem_limit == 0 && !have_config) {
    return Status::InvalidArgument(
        std::string(s.mlock ? "--mlock" : "--prealloc") +
        " needs --mem-limit SIZE: every device preallocates "
        "(and with --mlock locks) that much, and unbounded "
        "locked memory could take the host down");
  }
  if (!have_config) {
    if (s.devices.empty()) s.devices.push_back("zram0:1G");
    for (const std::string& text : s.devices) {
      auto spec = ParseDeviceSpec(text);
      if (!spec.has_value()) {
        return spec.error();
      }
      for (const DeviceSpec& before : c->specs) {
        if (before.name == spec->name) {
          return Status::InvalidArgument("--device " + spec->name +
                                         " is given twice");
        }
      }
      c->specs.push_back(*spec);
    }
  }
  return Status::Ok();
}

// A CheckValues error about a value the [ztier] section set (its message
// starts "--KEY"), said where the file set it: "FILE:LINE: [ztier] KEY...".
// Null when the value is the command line's, or not one setting's.
std::optional<Status> InFile(const Status& st, const ServiceConfig& config,
                             const FlagSet& given) {
  const std::string& m = st.message();
  if (!m.starts_with("--")) return std::nullopt;
  const std::string key = m.substr(2, m.find_first_of(":= ", 2) - 2);
  if (given.WasSet(key)) return std::nullopt;
  for (auto e = config.ztier.rbegin(); e != config.ztier.rend(); ++e) {
    if (e->key == key) {
      return Status(st.code(), config.path + ":" + std::to_string(e->line) +
                                   ": [ztier] " + m.substr(2));
    }
  }
  return std::nullopt;
}

// CheckValues, and the socket paths' defaults; the exit status when one is
// bad.
std::optional<int> CheckSettings(ServeSettings& s, const FlagSet& given,
                                 const std::optional<ServiceConfig>& config,
                                 Checked* c) {
  if (Status st = CheckValues(s, config.has_value(), c); !st.ok()) {
    if (config.has_value()) {
      if (auto where = InFile(st, *config, given)) {
        return UsageFail(where->message());
      }
    }
    // A flag's value is a usage error; a TLS file that cannot be loaded is
    // not, though a restart would meet it again (exit 2 all the same).
    return st.code() == StatusCode::kInvalidArgument
               ? ReportUsageError(kCommand, st.message())
               : UsageFail(st.message());
  }
  // The TCP addresses' names, looked up now, before any device is made (and
  // with --prealloc filled), so that one that does not resolve names its
  // line or flag; the servers bind what this lookup found (a second one
  // would wait out unanswering nameservers again). Only at start: a reload
  // checks their form (CheckValues). A resolver that cannot answer yet is
  // kIoError, exit 1, which the unit restarts.
  for (const auto& [flag, spec, resolved] :
       {std::tuple{"listen", &s.listen, &c->listen},
        std::tuple{"metrics-listen", &s.metrics_listen, &c->metrics_listen}}) {
    if (spec->empty()) continue;
    auto address = platform::ResolveTcpAddress(*spec);
    if (address.has_value()) {
      *resolved = std::move(*address);
      continue;
    }
    const Status& st = address.error();
    Status named(st.code(), std::string("--") + flag + ": " + st.message());
    if (config.has_value()) {
      if (auto where = InFile(named, *config, given)) named = *where;
    }
    return FailFor(named, named.message());
  }
  // The sockets: the default directory unless both are given.
  if (s.unix_path.empty() || s.ctl_path.empty()) {
    auto dir = DefaultRuntimeDir();
    if (!dir.has_value()) return UsageFail(dir.error().message());
    if (Status st = MakeRuntimeDir(*dir); !st.ok()) {
      return Fail(ErrnoText(st) + " (pass --unix and --ctl to put the "
                                  "sockets elsewhere)");
    }
    if (s.unix_path.empty()) s.unix_path = *dir + "/ztier.sock";
    if (s.ctl_path.empty()) s.ctl_path = *dir + "/ztier.ctl";
  }
  // One path for two of the sockets cannot work (the second finds the
  // first live, and would blame "a running server"): a restart would meet
  // it again.
  const std::pair<const char*, const std::string*> sockets[] = {
      {"unix", &s.unix_path},
      {"ctl", &s.ctl_path},
      {"metrics-unix", &s.metrics_unix}};
  for (std::size_t i = 0; i < std::size(sockets); ++i) {
    for (std::size_t j = i + 1; j < std::size(sockets); ++j) {
      if (sockets[i].second->empty() || sockets[j].second->empty() ||
          Absolute(*sockets[i].second) != Absolute(*sockets[j].second)) {
        continue;
      }
      return UsageFail(std::string(sockets[i].first) + " and " +
                       sockets[j].first + " are the same socket, " +
                       Absolute(*sockets[i].second) +
                       ": give each its own path");
    }
  }
  return std::nullopt;
}

// The devices of the --config file or of --device, in *registry.
std::optional<int> CreateDevices(const ServeSettings& s,
                                 const std::optional<ServiceConfig>& config,
                                 const Checked& c, DeviceRegistry* registry) {
  if (config.has_value()) {
    if (Status st = CreateConfiguredDevices(*config, c.prealloc, registry);
        !st.ok()) {
      return FailFor(st, st.message());
    }
    Log(LogLevel::kInfo, "configuration applied from " + Absolute(config->path));
    // A kernel swapping on a device must never be cut off by a server
    // limit (docs/swap.md): say so where the settings would.
    for (const DeviceConfig& d : config->devices) {
      if (!d.is_swap() || d.disksize == 0) continue;
      if (s.io_timeout != 0) {
        Log(LogLevel::kWarning,
            d.name + " is a swap device, and io-timeout is " +
                std::to_string(s.io_timeout) +
                " s: a kernel stalled that long inside a request (under "
                "memory pressure) is cut off and its swap-ins fail; set "
                "io-timeout = 0 in [ztier] (docs/swap.md)");
      }
      if (!s.mlock) {
        Log(LogLevel::kWarning,
            d.name + " is a swap device, and mlock is off: the server's own "
                     "memory can be swapped out, onto its own device; set "
                     "mlock = yes and zram-resident-limit (docs/swap.md)");
      }
    }
  }
  for (const DeviceSpec& spec : c.specs) {
    auto device = registry->Add(spec.name);
    if (!device.has_value()) {
      return FailFor(device.error(),
                     "device " + spec.name + ": " + device.error().message());
    }
    // backing_dev is set before disksize, as zram requires; a device
    // without a size keeps it until `ctl disksize` sets one.
    if (&spec == &c.specs.front() && !s.backing_dev.empty()) {
      // A relative path is made absolute here, as `ztier ctl backing_dev`
      // does, not left to the working directory ("/" under systemd).
      if (Status st = (*device)->SetBackingDev(BackingDevValue(s.backing_dev));
          !st.ok()) {
        return FailFor(st, "--backing-dev: " + ErrnoText(st));
      }
    }
    if (spec.size == 0) continue;  // uninitialised, as zram's hot_add
    if (Status st = (*device)->SetDisksize(spec.size); !st.ok()) {
      return FailFor(st, "device " + spec.name + ": " + ErrnoText(st));
    }
  }
  return std::nullopt;
}

// The NBD, control and metrics servers, each serving once started.
struct Servers {
  std::unique_ptr<nbd::NbdServer> nbd;
  std::unique_ptr<ctl::ControlServer> ctl;
  std::unique_ptr<ctl::MetricsServer> metrics;

  void Stop() {
    if (metrics != nullptr) metrics->Stop();
    if (ctl != nullptr) ctl->Stop();
    if (nbd != nullptr) nbd->Stop();
  }
};

// A second server on the same sockets fails before it makes (and with
// --prealloc, fills) its devices, which can take a while and much memory:
// each Unix socket path a live server accepts on is refused now, as
// StartServers would refuse it later. (A TCP port in use is found there.)
std::optional<int> CheckSocketsFree(const ServeSettings& s) {
  // The control socket first: a probe there is not logged or counted by
  // the running server, where one of its NBD socket would be (a
  // connection closed in its handshake); that one is probed only when the
  // others are free.
  const std::pair<const std::string*, const char*> sockets[] = {
      {&s.ctl_path, "cannot open the control socket"},
      {&s.metrics_unix, "cannot serve metrics"},
      {&s.unix_path, "cannot serve NBD"}};
  for (const auto& [path, what] : sockets) {
    if (path->empty()) continue;
    // A server that accepts nothing (stopped, wedged) with its backlog
    // full holds the socket too; a connect would wait for room for ever
    // (unix_stream_connect() in net/unix/af_unix.c): 100 ms, then busy.
    auto fd = platform::ConnectUnix(*path, /*timeout_ms=*/100);
    if (fd.has_value()) {
      ::close(*fd);
    } else if (fd.error().posix_errno() != ETIMEDOUT) {
      continue;  // nothing there, or nobody accepting
    }
    return Fail(std::string(what) + ": EBUSY: " + *path +
                " is in use by a running server");
  }
  return std::nullopt;
}

std::optional<int> StartServers(const ServeSettings& s, const Checked& c,
                                DeviceRegistry* registry, Servers* servers) {
  nbd::NbdServerOptions options;
  options.unix_path = s.unix_path;
  options.listen = s.listen;
  options.listen_addresses = c.listen;
  options.max_connections = static_cast<std::size_t>(s.max_connections);
  options.workers = static_cast<std::size_t>(s.workers);
  options.max_request_bytes = static_cast<std::uint32_t>(c.max_request);
  options.max_in_flight = static_cast<std::size_t>(s.max_in_flight);
  options.max_in_flight_bytes = c.max_in_flight_bytes;
  options.handshake_timeout_ms =
      s.handshake_timeout == 0 ? -1 : static_cast<int>(s.handshake_timeout * 1000);
  options.io_timeout_ms =
      s.io_timeout == 0 ? -1 : static_cast<int>(s.io_timeout * 1000);
  options.tls = c.tls.get();
  options.tls_required = s.tls == "require";
  options.preallocate = c.prealloc;
  options.log = LogEngineLine;
  auto nbd_server = nbd::NbdServer::Start(options, registry);
  if (!nbd_server.has_value()) {
    return FailFor(nbd_server.error(),
                   "cannot serve NBD: " + ErrnoText(nbd_server.error()));
  }
  servers->nbd = std::move(*nbd_server);
  auto ctl_server = ctl::ControlServer::Start(s.ctl_path, registry);
  if (!ctl_server.has_value()) {
    servers->Stop();
    const bool busy = ctl_server.error().code() == StatusCode::kBusy;
    return FailFor(ctl_server.error(),
                   "cannot open the control socket: " +
                       ErrnoText(ctl_server.error()) +
                       (busy ? " (give this server its own with --ctl PATH)"
                             : ""));
  }
  servers->ctl = std::move(*ctl_server);
  if (!s.metrics_listen.empty() || !s.metrics_unix.empty()) {
    ctl::MetricsServerOptions mo;
    mo.listen = s.metrics_listen;
    mo.listen_addresses = c.metrics_listen;
    mo.unix_path = s.metrics_unix;
    auto started = ctl::MetricsServer::Start(mo, registry, servers->nbd.get());
    if (!started.has_value()) {
      servers->Stop();
      return FailFor(started.error(),
                     "cannot serve metrics: " + ErrnoText(started.error()));
    }
    servers->metrics = std::move(*started);
  }
  return std::nullopt;
}

// nbd+unix:// for `device`, nbds+unix:// with TLS.
std::string ShownUri(const std::string& device, const ServeSettings& s,
                     const Checked& c) {
  std::string uri = NbdUnixUri(device, s.unix_path);
  if (c.tls != nullptr) uri.insert(3, "s");
  return uri;
}

// Lines of the start-up banner (printf's `format`, one line a '\n'):
// information, logged as such, so that --log-level warning (-q) leaves
// them out.
[[gnu::format(printf, 1, 2)]] void Banner(const char* format, ...) {
  if (!LogEnabled(LogLevel::kInfo)) return;
  std::va_list args;
  va_start(args, format);
  std::va_list again;
  va_copy(again, args);
  const int n = std::vsnprintf(nullptr, 0, format, args);
  va_end(args);
  std::string text(n > 0 ? static_cast<std::size_t>(n) : 0, '\0');
  if (n > 0) std::vsnprintf(text.data(), text.size() + 1, format, again);
  va_end(again);
  std::string_view rest = text;
  while (!rest.empty()) {
    const std::size_t end = rest.find('\n');
    Log(LogLevel::kInfo, rest.substr(0, end));
    if (end == std::string_view::npos) break;
    rest.remove_prefix(end + 1);
  }
}

// The devices, their URIs, TLS and memory: the first part of the banner.
void PrintDevices(const ServeSettings& s,
                  const std::optional<ServiceConfig>& config, const Checked& c,
                  const DeviceRegistry& registry, const Servers& servers,
                  const MemoryLockReport& locked) {
  const std::vector<std::shared_ptr<Device>> devices = registry.List();
  const std::string first = devices.empty() ? "zram0" : devices.front()->name();
  Banner("%zu device(s)%s%s", devices.size(),
         config.has_value() ? ", from " : ", ",
         config.has_value()
             ? Absolute(config->path).c_str()
             : std::string(CanonicalCodecName(s.comp_algorithm)).c_str());
  for (const auto& d : devices) {
    Banner("  %-8s %llu bytes  %-5s %s\n", d->name().c_str(),
           static_cast<unsigned long long>(d->disksize()),
           d->algorithm().c_str(), ShownUri(d->name(), s, c).c_str());
  }
  if (!s.listen.empty()) {
    Banner("  TCP: %s://%s:%d/%s\n", c.tls != nullptr ? "nbds" : "nbd",
           UriHost(s.listen).c_str(), servers.nbd->tcp_port(), first.c_str());
  }
  for (const auto& d : devices) {
    const std::string bd = d->ShowBackingDev();
    if (bd != "none\n") {
      Banner("  backing_dev of %s: %s%s\n", d->name().c_str(),
             bd.substr(0, bd.size() - 1).c_str(),
             s.backing_encrypt ? " (encrypted)" : "");
    }
  }
  if (c.tls != nullptr) {
    Banner(
        "  TLS: %s, certificate %s (clients add "
        "&tls-certificates=DIR holding ca-cert.pem)\n",
        s.tls == "require" ? "required" : "offered",
        Absolute(s.tls_cert).c_str());
  }
  // What each device preallocated: --mem-limit, or each zram-resident-limit.
  const std::string each =
      config.has_value() ? std::string("each device's zram-resident-limit")
                         : std::to_string(c.mem_limit >> 20) + " MiB";
  if (s.mlock) {
    Banner(
        "  memory: locked (mlockall, on fault), %.1f MiB resident, "
        "%s preallocated%s\n",
        static_cast<double>(locked.resident_bytes) / (1 << 20), each.c_str(),
        config.has_value() ? "" : " a device");
    if (!locked.warning.empty()) Log(LogLevel::kWarning, locked.warning);
  } else if (c.prealloc) {
    Banner("  memory: %s preallocated%s (not locked)\n", each.c_str(),
           config.has_value() ? "" : " a device");
  }
}

// The control and metrics sockets and how to connect: the banner's end.
void PrintConnect(const ServeSettings& s,
                  const std::optional<ServiceConfig>& config, const Checked& c,
                  const DeviceRegistry& registry, const Servers& servers) {
  const std::vector<std::shared_ptr<Device>> devices = registry.List();
  const std::string first = devices.empty() ? "zram0" : devices.front()->name();
  const std::string uri = ShownUri(first, s, c);
  Banner("  control socket: %s\n", Absolute(s.ctl_path).c_str());
  if (servers.metrics != nullptr) {
    if (servers.metrics->tcp_port() != 0) {
      Banner("  metrics: http://%s:%d/metrics\n",
             UriHost(s.metrics_listen).c_str(), servers.metrics->tcp_port());
    }
    if (!s.metrics_unix.empty()) {
      Banner(
          "  metrics: unix socket %s (curl --unix-socket %s "
          "http://localhost/metrics)\n",
          Absolute(s.metrics_unix).c_str(), Absolute(s.metrics_unix).c_str());
    }
  }
  Banner("Connect with:");
  Banner(
      "  nbdinfo '%s'\n"
      "  nbdcopy disk.img '%s'\n"
      "  qemu-io -r -f raw '%s' -c 'read 0 4k'\n"
      "  fio --name=t --ioengine=nbd --uri='%s' --rw=randread --bs=4k "
      "--iodepth=32 --size=256m\n"
      "  nbd-client -unix %s -N %s -b 4096 /dev/nbd0    (as root)\n",
      uri.c_str(), uri.c_str(), uri.c_str(), uri.c_str(),
      Absolute(s.unix_path).c_str(), first.c_str());
  if (config.has_value()) {
    int n = 0;
    for (const DeviceConfig& d : config->devices) {
      if (!d.skipped.empty() || registry.Find(d.name) == nullptr) continue;
      const std::string dev = "/dev/nbd" + std::to_string(n++);
      // -swap: the nbd driver's connection must not wait on memory
      // (docs/swap.md).
      Banner(
          "  %s, as the file says: nbd-client -unix %s -N %s -b 4096 "
          "%s%s && %s\n",
          d.name.c_str(), Absolute(s.unix_path).c_str(), d.name.c_str(),
          dev.c_str(), d.is_swap() ? " -swap" : "",
          UsageCommands(d, dev).c_str());
    }
  }
  Banner(
      "Stop with Ctrl-C or SIGTERM; SIGHUP %s.\n",
      config.has_value() ? "re-reads the configuration" : "keeps it running");
}

// SIGHUP with a --config file: re-reads it and applies what can change
// while serving; *config becomes the file read, unless it is unreadable.
void Reload(const FlagSet& flags, const ServeSettings& from_command_line,
            bool prealloc, DeviceRegistry* registry,
            std::optional<ServiceConfig>* config) {
  auto reread = LoadServiceConfig((*config)->path);
  if (!reread.has_value()) {
    Log(LogLevel::kError, "SIGHUP: " + reread.error().message() +
                              "; nothing changed, serving on");
    return;
  }
  // [ztier] values apply at the next start: one that start would refuse
  // (exit 2, and systemd does not restart) is said now, not at a reboot.
  ServeSettings next_start = from_command_line;
  std::vector<std::string> notes;
  Status next = ApplyZtierSection(*reread, flags, &next_start, &notes);
  for (const std::string& n : notes) Log(LogLevel::kDebug, n);
  if (auto level = WantedLogLevel(next_start); next.ok() && !level) {
    next = level.error();
  }
  Checked scratch;
  if (next.ok()) {
    next = CheckValues(next_start, /*have_config=*/true, &scratch);
  }
  if (auto where = InFile(next, *reread, flags)) next = *where;
  if (!next.ok() && !next.message().starts_with(reread->path + ":")) {
    next = Status::InvalidArgument(reread->path + ": [ztier]: " +
                                   next.message());
  }
  if (!next.ok()) {
    Log(LogLevel::kError, "SIGHUP: " + next.message() +
                              "; the next start would refuse this file");
  }
  ReloadCounts counts =
      ApplyReloadedConfig(**config, &*reread, prealloc, registry);
  // [ztier] settings apply at the next start, but for the log level. What
  // is not applied stays in effect as it was (*config keeps the old entry),
  // so that the next reload warns about it again.
  const auto find = [](const std::vector<ConfigEntry>& in,
                       const std::string& key) -> const ConfigEntry* {
    for (const ConfigEntry& e : in) {
      if (e.key == key) return &e;
    }
    return nullptr;
  };
  const bool level_from_flags = flags.WasSet("log-level") ||
                                flags.WasSet("verbose") || flags.WasSet("quiet");
  std::vector<ConfigEntry> effective;
  for (const ConfigEntry& e : reread->ztier) {
    const ConfigEntry* o = find((*config)->ztier, e.key);
    if ((o != nullptr && o->value == e.value) || flags.WasSet(e.key) ||
        (e.key == "log-level" && level_from_flags)) {
      effective.push_back(e);  // unchanged, or the command line's stands
      continue;
    }
    if (e.key == "log-level" && ParseLogLevel(e.value).has_value()) {
      SetLogLevel(*ParseLogLevel(e.value));
      Log(LogLevel::kInfo, "log-level is now " + e.value);
      ++counts.applied;
      effective.push_back(e);
      continue;
    }
    Log(LogLevel::kWarning, "[ztier] " + e.key +
                                " changed, not applied: it takes effect "
                                "at the next start");
    ++counts.not_applied;
    if (o != nullptr) effective.push_back(*o);
  }
  for (const ConfigEntry& o : (*config)->ztier) {
    if (find(reread->ztier, o.key) != nullptr || flags.WasSet(o.key)) continue;
    if (o.key == "log-level") {
      if (!level_from_flags) {
        SetLogLevel(LogLevel::kInfo);
        Log(LogLevel::kInfo, "log-level is now info (the default)");
        ++counts.applied;
      }
      continue;
    }
    Log(LogLevel::kWarning, "[ztier] " + o.key +
                                " removed, not applied: it takes effect "
                                "at the next start");
    ++counts.not_applied;
    effective.push_back(o);
  }
  reread->ztier = std::move(effective);
  // The file's warnings at the log level it has just set.
  for (const std::string& w : reread->warnings) Log(LogLevel::kWarning, w);
  Log(LogLevel::kInfo,
      "SIGHUP: configuration re-read from " + Absolute((*config)->path) + ": " +
          std::to_string(counts.applied) + " change(s) applied, " +
          std::to_string(counts.not_applied) + " not");
  *config = std::move(*reread);
}

// The ublk front end (--ublk) on every initialised device; errors say
// what is missing (no /dev/ublk-control: the kernel has no ublk).
Result<std::unique_ptr<ublk::UblkFrontEnd>> StartUblk(
    const ServeSettings& s, const Checked& c, DeviceRegistry* registry) {
  ublk::UblkFrontEndOptions o;
  o.disk.queues = static_cast<std::uint16_t>(s.ublk_queues);
  o.disk.depth = static_cast<std::uint16_t>(s.ublk_depth);
  o.disk.max_io_bytes = c.ublk_max_io;
  o.disk.populate = s.mlock;  // locked as touched: touch them now
  o.trace_path = s.ublk_trace;
  o.log = LogEngineLine;
  auto fe = ublk::UblkFrontEnd::Start(registry, std::move(o));
  if (!fe.has_value()) {
    std::string why = "--ublk: " + fe.error().message();
    if (fe.error().code() == StatusCode::kPermissionDenied) {
      // ublk's ADD_DEV needs CAP_SYS_ADMIN (drivers/block/ublk_drv.c),
      // which the shipped unit's CapabilityBoundingSet leaves out.
      why += " (adding a ublk device needs CAP_SYS_ADMIN; under systemd, "
             "add it to the unit's CapabilityBoundingSet)";
    }
    return Err(Status(fe.error().code(), why));
  }
  return fe;
}

// Tells the service manager the server is ready, then waits for SIGINT or
// SIGTERM (returned), updating the status every 10 s. SIGHUP (`systemctl
// reload`, or a closed terminal) must never stop a server that may hold a
// kernel's swap: it re-reads the file, or without one is logged, and the
// devices and their pages stay.
int WaitForStop(const sigset_t& signals, const FlagSet& flags,
                const ServeSettings& from_command_line, bool prealloc,
                DeviceRegistry* registry, const nbd::NbdServer& nbd,
                std::optional<ServiceConfig>* config) {
  const ServiceNotifier notifier;
  Notify(notifier, "READY=1\nSTATUS=" + Summary(*registry, nbd));
  for (;;) {
    const timespec status_every{10, 0};
    const int sig = sigtimedwait(&signals, nullptr, &status_every);
    if (sig < 0) {
      if (notifier.enabled()) {
        Notify(notifier, "STATUS=" + Summary(*registry, nbd));
      }
      continue;
    }
    if (sig != SIGHUP) {
      Notify(notifier, "STOPPING=1\nSTATUS=stopping");
      return sig;
    }
    if (!config->has_value()) {
      Log(LogLevel::kInfo, "SIGHUP: nothing to reload (no --config file); "
                           "serving on, every device and page kept");
      continue;
    }
    // MONOTONIC_USEC (CLOCK_MONOTONIC): systemd (253+,
    // Type=notify-reload) matches the reload to this message by it
    // (sd_notify(3)); older ones ignore it.
    Notify(notifier, "RELOADING=1\nMONOTONIC_USEC=" +
                         std::to_string(platform::MonotonicNs() / 1000));
    Reload(flags, from_command_line, prealloc, registry, config);
    Notify(notifier, "READY=1\nSTATUS=" + Summary(*registry, nbd));
  }
}

}  // namespace

int RunServe(std::span<const std::string_view> raw_args) {
  ServeSettings s, from_command_line;
  FlagSet flags(kCommand, kSynopsis);
  std::optional<ServiceConfig> config;
  if (auto rc = ParseArgs(raw_args, flags, &s, &from_command_line, &config)) {
    return *rc;
  }
  Checked c;
  if (auto rc = CheckSettings(s, flags, config, &c)) return *rc;
  std::optional<PolicyOptions> policy = std::move(c.policy);
  if (policy.has_value()) {
    // A device's bare "(k=v,...)" of compression-algorithm: its own
    // recompress tokens for the policy's passes.
    for (const DeviceConfig& d : config ? config->devices
                                        : std::vector<DeviceConfig>{}) {
      if (!d.recompress_params.empty()) {
        policy->device_recompress_params[d.name] = d.recompress_params;
      }
    }
  }

  // Blocked before the devices are made (preallocating and locking them
  // can take seconds), and every thread started from here on inherits the
  // mask, so the signals reach only sigtimedwait() in WaitForStop: a
  // SIGHUP while starting is a reload once it serves, never the end of
  // the process, and a SIGTERM stops it then. A vanished client must not
  // kill us.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGHUP);  // never fatal: see WaitForStop
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  DeviceDefaults defaults;
  defaults.comp_algorithm = std::string(CanonicalCodecName(s.comp_algorithm));
  defaults.algorithm_params = s.algorithm_params;
  defaults.recomp = c.recomp;
  defaults.mem_limit = c.mem_limit;
  defaults.unit_pages = static_cast<std::size_t>(s.unit_pages);
  defaults.backing_encrypt = s.backing_encrypt;
  defaults.is_remote_backing = nbd::IsNbdUri;
  const nbd::NbdBackingOptions remote{
      .connections = static_cast<std::size_t>(s.backing_connections),
      .timeout_ms = static_cast<std::uint32_t>(s.backing_timeout * 1000),
      .log = [](const std::string& line) { Log(LogLevel::kWarning, line); }};
  defaults.open_remote_backing = [remote](const std::string& uri,
                                          std::uint64_t disksize) {
    nbd::NbdBackingOptions o = remote;
    o.max_bytes = disksize;
    return nbd::OpenNbdBackingFile(uri, o);
  };
  defaults.prealloc = c.prealloc;
  defaults.log = LogEngineLine;
  DeviceRegistry registry(defaults);
  if (auto rc = CheckSocketsFree(s)) return *rc;
  if (auto rc = CreateDevices(s, config, c, &registry)) return *rc;
  // The devices' memory is made (preallocated); lock it and all else
  // before any thread serves.
  MemoryLockReport locked;
  if (s.mlock) {
    auto r = LockProcessMemory();
    if (!r.has_value()) return Fail("--mlock: " + r.error().message());
    locked = *r;
  }

  // The ublk disks, after the signal mask (their queue threads inherit
  // it) and before the servers (a failure leaves nothing to stop).
  std::unique_ptr<ublk::UblkFrontEnd> ublk_disks;
  if (s.ublk) {
    auto started = StartUblk(s, c, &registry);
    if (!started.has_value()) return Fail(started.error().message());
    ublk_disks = std::move(*started);
  }

  Servers servers;
  if (auto rc = StartServers(s, c, &registry, &servers)) return *rc;
  PrintDevices(s, config, c, registry, servers, locked);
  if (ublk_disks != nullptr) {
    const auto disks = ublk_disks->Disks();
    for (const auto& [name, path] : disks) {
      Banner("  %s as a block device: %s\n", name.c_str(), path.c_str());
    }
  }
  PrintConnect(s, config, c, registry, servers);
  std::unique_ptr<PolicyRunner> runner;
  if (policy.has_value()) {
    runner = std::make_unique<PolicyRunner>(
        &registry, std::move(*policy),
        [](const std::string& line) { Log(LogLevel::kInfo, line); });
    Log(LogLevel::kInfo, "policy: " + s.policy);
  }
  const int sig =
      WaitForStop(signals, flags, from_command_line, c.prealloc, &registry,
                  *servers.nbd, &config);
  Log(LogLevel::kInfo,
      std::string(sig == SIGINT ? "SIGINT" : "SIGTERM") + ", stopping");
  // The pages of a device a client still uses (a kernel swapping to it)
  // go with the server: said at the warning level, by device. A device's
  // ublk disk is one of its clients for as long as it exists, used or
  // not: it counts only while its /dev/ublkbN is in use (mounted, swapped
  // on, held open), as zram's reset sees a disk.
  const std::map<std::string, std::string> ublk_paths =
      ublk_disks != nullptr ? ublk_disks->Disks()
                            : std::map<std::string, std::string>{};
  for (const auto& d : registry.List()) {
    int n = d->clients();
    std::string disk_user;
    if (auto it = ublk_paths.find(d->name()); it != ublk_paths.end()) {
      --n;  // the disk's own
      auto user = platform::BlockDeviceUser(it->second);
      disk_user = user.has_value() ? *user : user.error().message();
      if (!disk_user.empty()) {
        ++n;
        disk_user = " (" + it->second + ": " + disk_user + ")";
      }
    }
    const std::uint64_t held = d->Stats().orig_data_size;
    if (n > 0 && held > 0) {
      Log(LogLevel::kWarning,
          d->name() + ": stopping with " + std::to_string(n) +
              " client(s) attached" + disk_user + "; the " +
              std::to_string(held >> 10) +
              " KiB it holds are gone (swapoff and disconnect first: "
              "docs/swap.md)");
    }
  }
  // A second SIGINT or SIGTERM ends the process at once (their default
  // action; the other threads keep them blocked), should the stop hang.
  ::signal(SIGINT, SIG_DFL);
  ::signal(SIGTERM, SIG_DFL);
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_UNBLOCK, &stop_signals, nullptr);
  if (runner != nullptr) runner->Stop();  // before the devices go
  if (ublk_disks != nullptr) ublk_disks->Stop();  // every /dev/ublkbN gone
  servers.Stop();
  return 0;
}

}  // namespace ztier::tool
