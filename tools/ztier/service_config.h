// File: tools/ztier/service_config.h
//
// The configuration file of `ztier serve --config FILE` (ztier.conf(5),
// docs/man/ztier.conf.5): INI in the vocabulary of systemd's
// zram-generator.conf(5), so that an existing zram-generator.conf works
// unchanged, plus a [ztier] section for ztier's own settings.
//
//   [zram0]
//   zram-size = min(ram / 2, 4096)        # MiB; ram: MemTotal in MiB
//   compression-algorithm = zstd(level=3)
//   writeback-device = /var/lib/ztier/zram0.img
//
//   [ztier]
//   listen = 127.0.0.1:10809
//
// Lines: `[section]`, `key = value` or `key: value` (spaces around either
// optional; the key ends at its first '=' or ':', as rust-ini, the ini
// parser of zram-generator, reads it), blank, or a comment starting with
// '#' or ';'. A value that starts with a quote, " or ', loses it and the
// next one of its kind, which may be on a later line (the lines between are
// part of the value, with a warning), as rust-ini reads it; the text after
// that quote to the end of its line is kept. A backslash in a key or a
// value is rust-ini's escape: at a line's end it continues the line, \\ \n
// \t \r \a \b and \xHHHH are characters, and \C any other C is C (\" a
// quote that closes none); a NUL (\0, \x0000), a bad \x and a backslash
// ending the file are errors, each on the line it is on. As
// systemd.syntax(5) says (and zram-generator reads): a section given
// again continues the first, a key given again replaces its earlier value
// (with a warning), and an empty value resets the key to its default.
// Each [zramN] section (a name that
// starts with "zram", as zram-generator requires) is one device, in file
// order; its keys (zram-generator's) are:
//   zram-size            size expression (size_expr.h), MiB; default
//                        min(ram / 2, 4096); 0: the device is not created
//   zram-fraction, max-zram-size
//                        zram-generator's deprecated form of zram-size:
//                        min(floor(ram * fraction), max); the fraction
//                        defaults to 0.5, and with no max-zram-size (or
//                        "none") there is no cap, as zram-generator 1.1.2's
//                        code has it (its manual says 4096). Each is a
//                        number, as there (a fraction of inf makes
//                        max-zram-size the size), or an expression
//                        without ram.
//                        They win over zram-size, as there, with a warning
//   zram-resident-limit  mem_limit, a size expression in MiB; default 0
//   compression-algorithm  NAME or NAME(k=v,...); the parameters become
//                        algorithm_params ("k=v k=v"). Up to three more
//                        algorithms, each with its own (k=v,...), are the
//                        recomp_algorithm at priorities 1, 2, 3; a final
//                        bare "(k=v,...)" list is recompress tokens
//                        (recompress_params), the recompress tokens
//                        of the post-processing policy's passes on that
//                        device (serve --policy or policy = in [ztier]):
//                        "lz4 zstd(level=9) (type=idle)"
//   writeback-device     backing_dev: an absolute path, an NBD URI
//                        (nbd://, nbds://, nbd+unix://: a remote export,
//                        nbd/nbd_backing_file.h), or "none"
//   host-memory-limit    MiB or "none": above it (MemTotal) the device is
//                        not created
//   swap-priority        -1..32767 (default 100, for a swap device)
//   fs-type, mount-point, options
//                        how the operator uses the device; recorded as
//                        notes (Device::SetNote), not applied by ztier
// The [ztier] section's keys are `ztier serve` flag names; the caller
// checks them (ServiceConfig::ztier keeps each with its line). Among them
// `policy = TOKENS`, the post-processing policy (ztier/policy.h) of every
// device.
//
// A setting before the first section (zram-generator 1.2's `set!`
// variables among them) is ignored with a warning, as zram-generator does.
//
// Errors (kInvalidArgument), each "FILE:LINE: reason": a line that is none
// of the above, a quote with no closing one, an unknown [ztier] key, and a
// bad value or expression (with the reason). A file that cannot be read
// is its errno's status, "FILE: reason".
//
// Thread safety: pure functions, except that LoadServiceConfig reads files.
#ifndef ZTIER_TOOLS_ZTIER_SERVICE_CONFIG_H_
#define ZTIER_TOOLS_ZTIER_SERVICE_CONFIG_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ztier/status.h"

namespace ztier::tool {

// One `key = value` of the [ztier] section.
struct ConfigEntry {
  std::string key;
  std::string value;
  int line = 0;
};

// A recompression algorithm of compression-algorithm.
struct RecompAlgorithmConfig {
  std::string name;    // canonical
  std::string params;  // algorithm_params ("level=9"); empty: none
  bool operator==(const RecompAlgorithmConfig&) const = default;
};

struct DeviceConfig {
  std::string name;  // the section's name: zram0
  int line = 0;      // of its [section] header
  // Each key the file gives: the line where its value was set (for
  // messages about it).
  std::map<std::string, int> key_lines;
  std::string size_expression;  // as written (or the default)
  std::uint64_t disksize = 0;   // bytes; 0: not created
  std::uint64_t mem_limit = 0;  // bytes; 0: none
  std::string comp_algorithm;   // canonical ("lzo-rle" is "lzo")
  std::string algorithm_params; // "level=3"; empty: none
  // compression-algorithm's algorithms after the first: recomp_algorithm
  // at priority 1, 2, 3 in order.
  std::vector<RecompAlgorithmConfig> recomp_algorithms;
  // compression-algorithm's final bare "(...)": tokens of zram's
  // `recompress` ("type=idle max_pages=100"), space-separated; empty: none.
  // Checked (ParseRecompressTokens) but not applied by device setup; the
  // post-processing policy runs its passes with them.
  std::string recompress_params;
  std::string backing_dev;      // empty: none
  // Why the device is not created (zram-size 0, host-memory-limit); empty
  // when it is.
  std::string skipped;
  // swap-priority, fs-type, mount-point and options; for a swap device
  // (neither fs-type nor mount-point) swap-priority defaults to 100, and
  // options to "discard" either way, as zram-generator's.
  std::map<std::string, std::string> notes;

  bool is_swap() const { return !notes.contains("mount-point") &&
                                (!notes.contains("fs-type") ||
                                 notes.at("fs-type") == "swap"); }
};

// "NAME" or "NAME(k=v,...)", an item of compression-algorithm (and `ztier
// serve --recomp-algorithm`): the canonical name and its algorithm_params
// ("k=v k=v"), checked with MakeCodec. kInvalidArgument naming `what`;
// also for algo= or priority= among the parameters (the item names its
// algorithm, and its place the priority).
Result<RecompAlgorithmConfig> ParseAlgorithmItem(std::string_view item,
                                                 std::string_view what);

struct ServiceConfig {
  std::string path;
  std::vector<DeviceConfig> devices;  // in file order
  std::vector<ConfigEntry> ztier;     // the [ztier] section, in file order
  // "FILE:LINE: ..." for what is accepted but deprecated; the caller logs it.
  std::vector<std::string> warnings;
};

// Parses `text`, read from `path` (used in messages), on a host whose
// MemTotal is `memtotal_mib` MiB (the expressions' `ram`).
Result<ServiceConfig> ParseServiceConfig(std::string_view text,
                                         std::string_view path,
                                         double memtotal_mib);

// The largest configuration file LoadServiceConfig reads.
inline constexpr std::size_t kMaxConfigFileBytes = 1 << 20;

// Reads `path` and parses it with this host's MemTotal. Only a regular file
// of at most kMaxConfigFileBytes is read (kInvalidArgument otherwise), and
// nothing blocks: a FIFO there is an error, not a wait.
Result<ServiceConfig> LoadServiceConfig(const std::string& path);

// MemTotal of /proc/meminfo, in whole MiB (rounded down, as zram-generator's
// `ram`).
Result<double> HostMemTotalMib();

// Parses a boolean as the configuration file writes it: yes/no, true/false,
// on/off, 1/0 (case-insensitive); nullopt for anything else.
std::optional<bool> ParseConfigBool(std::string_view text);

}  // namespace ztier::tool

#endif  // ZTIER_TOOLS_ZTIER_SERVICE_CONFIG_H_
