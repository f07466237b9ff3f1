// File: tools/ztier/serve_devices.cc
#include "serve_devices.h"

#include <map>
#include <set>

#include "log.h"
#include "tool_common.h"

namespace ztier::tool {
namespace {

std::string Where(const ServiceConfig& config, const DeviceConfig& d) {
  return config.path + ":" + std::to_string(d.line) + ": [" + d.name + "]: ";
}

std::string MiB(std::uint64_t bytes) {
  return std::to_string(bytes >> 20) + " MiB";
}

// ", recompression zstd(level=9) deflate", or "" with none.
std::string RecompText(const DeviceConfig& d) {
  std::string out;
  for (const RecompAlgorithmConfig& r : d.recomp_algorithms) {
    out += (out.empty() ? ", recompression " : " ") + r.name +
           (r.params.empty() ? "" : "(" + r.params + ")");
  }
  return out;
}

// The file's settings for d onto `device`, which is uninitialised;
// errors name the key and the line where the file sets it (its section's
// line for a default).
Status ApplyDeviceConfig(const ServiceConfig& config, const DeviceConfig& d,
                         Device& device) {
  const auto step = [&](const char* key, Status s) -> Status {
    if (s.ok()) return s;
    // The backing device is opened with the store, at disksize.
    if (std::string_view(key) == "zram-size" &&
        s.message().starts_with("backing_dev")) {
      key = "writeback-device";
    }
    const auto line = d.key_lines.find(key);
    return Status(
        s.code(),
        config.path + ":" +
            std::to_string(line != d.key_lines.end() ? line->second : d.line) +
            ": [" + d.name + "]: " + key + ": " + ErrnoText(s));
  };
  ZT_RETURN_IF_ERROR(step("compression-algorithm",
                          device.SetCompAlgorithm(d.comp_algorithm)));
  if (!d.algorithm_params.empty()) {
    ZT_RETURN_IF_ERROR(step("compression-algorithm",
                            device.SetAlgorithmParams(d.algorithm_params)));
  }
  for (std::size_t i = 0; i < d.recomp_algorithms.size(); ++i) {
    const RecompAlgorithmConfig& r = d.recomp_algorithms[i];
    const std::string prio = "priority=" + std::to_string(i + 1);
    ZT_RETURN_IF_ERROR(step("compression-algorithm",
                            device.SetRecompAlgorithm("algo=" + r.name + " " +
                                                      prio)));
    if (r.params.empty()) continue;
    ZT_RETURN_IF_ERROR(step("compression-algorithm",
                            device.SetAlgorithmParams(prio + " " + r.params)));
  }
  ZT_RETURN_IF_ERROR(step("zram-resident-limit", device.SetMemLimit(d.mem_limit)));
  if (!d.backing_dev.empty()) {
    ZT_RETURN_IF_ERROR(step("writeback-device", device.SetBackingDev(d.backing_dev)));
  }
  device.SetNotes(d.notes);
  ZT_RETURN_IF_ERROR(step("zram-size", device.SetDisksize(d.disksize)));
  Log(LogLevel::kInfo,
      d.name + ": configured: " + MiB(device.disksize()) + ", " +
          d.comp_algorithm +
          (d.algorithm_params.empty() ? "" : "(" + d.algorithm_params + ")") +
          RecompText(d) + ", mem_limit " + (d.mem_limit == 0 ? "none" : MiB(d.mem_limit)) +
          ", backing_dev " + (d.backing_dev.empty() ? "none" : d.backing_dev) +
          (d.is_swap() ? ", for swap" : ", for " + d.notes.at("fs-type")));
  return Status::Ok();
}

Status CheckResidentLimit(const ServiceConfig& config, const DeviceConfig& d,
                          bool prealloc) {
  if (!prealloc || d.mem_limit != 0) return Status::Ok();
  return Status::InvalidArgument(
      Where(config, d) +
      "--mlock and --prealloc need a zram-resident-limit on every "
      "device: each preallocates (and with --mlock locks) that much");
}

Status Configure(const ServiceConfig& config, const DeviceConfig& d,
                 bool prealloc, DeviceRegistry* registry) {
  const std::string where = Where(config, d);
  ZT_RETURN_IF_ERROR(CheckResidentLimit(config, d, prealloc));
  auto made = registry->Add(d.name);
  if (!made.has_value()) return Status(made.error().code(), where + ErrnoText(made.error()));
  // A step that fails takes the half-made device away again, so that a
  // later reload can make it afresh.
  if (Status s = ApplyDeviceConfig(config, d, **made); !s.ok()) {
    registry->Remove(d.name).IgnoreError();
    return s;
  }
  return Status::Ok();
}

}  // namespace

Status CreateConfiguredDevices(const ServiceConfig& config, bool prealloc,
                               DeviceRegistry* registry) {
  // Every device before any is made: a device made first would take (and
  // lock) its whole limit, seconds for gigabytes, only for the start to fail.
  for (const DeviceConfig& d : config.devices) {
    if (d.skipped.empty()) {
      ZT_RETURN_IF_ERROR(CheckResidentLimit(config, d, prealloc));
    }
  }
  for (const DeviceConfig& d : config.devices) {
    if (!d.skipped.empty()) {
      Log(LogLevel::kInfo, d.name + ": not created: " + d.skipped);
      continue;
    }
    ZT_RETURN_IF_ERROR(Configure(config, d, prealloc, registry));
  }
  return Status::Ok();
}

ReloadCounts ApplyReloadedConfig(const ServiceConfig& before,
                                 ServiceConfig* effective, bool prealloc,
                                 DeviceRegistry* registry) {
  const ServiceConfig& after = *effective;
  ReloadCounts counts;
  std::map<std::string, const DeviceConfig*> old;
  for (const DeviceConfig& d : before.devices) {
    if (d.skipped.empty()) old[d.name] = &d;
  }
  const auto not_applied = [&](const std::string& what) {
    Log(LogLevel::kWarning, what);
    ++counts.not_applied;
  };
  std::set<std::string> not_ours;  // entries of the file no device follows
  for (DeviceConfig& d : effective->devices) {
    if (!d.skipped.empty()) {
      auto kept = old.find(d.name);
      if (kept == old.end()) continue;
      if (registry->Find(d.name) != nullptr) {
        not_applied(d.name + ": now skipped (" + d.skipped +
                    "), but kept: it may hold data; remove it with "
                    "`ztier ctl hot_remove`");
        d = *kept->second;  // in effect as it was
      }
      old.erase(kept);
      continue;
    }
    auto it = old.find(d.name);
    std::shared_ptr<Device> device = registry->Find(d.name);
    if (it == old.end() || device == nullptr) {
      // New in the file, or in it before but not made then (its making
      // failed, or it was hot_removed): made now.
      if (it != old.end()) old.erase(it);
      if (device != nullptr) {
        not_applied(d.name + ": new in the file, but a device of that name "
                             "exists already (made with hot_add); left as it is");
        not_ours.insert(d.name);  // not in effect: said again next time
        continue;
      }
      if (Status s = Configure(after, d, prealloc, registry); !s.ok()) {
        not_applied("SIGHUP: " + s.message());
        continue;
      }
      Log(LogLevel::kInfo, d.name + ": added");
      ++counts.applied;
      if (!d.recompress_params.empty()) {
        // The policy's per-device tokens are set at start.
        not_applied(d.name + ": the recompression parameters " +
                    d.recompress_params +
                    " of compression-algorithm take effect at a restart; "
                    "until then the policy's own tokens apply to it");
        d.recompress_params.clear();  // not in effect: said again next time
      }
      continue;
    }
    const DeviceConfig& was = *it->second;
    old.erase(it);
    if (device->disksize() == 0 && d.disksize != 0 &&
        (!prealloc || d.mem_limit != 0)) {
      // Reset since it was configured (`ztier ctl reset`): the file
      // applies to it as at a start. One that fails stays uninitialised,
      // to be tried again at the next reload.
      if (Status s = ApplyDeviceConfig(after, d, *device); !s.ok()) {
        not_applied("SIGHUP: " + s.message());
        // No half-configured device; but one an operator initialised
        // meanwhile (the EBUSY of disksize) is theirs, left as it is, and
        // one hot_removed meanwhile is gone.
        if (s.code() != StatusCode::kBusy && device->disksize() == 0 &&
            registry->Find(d.name) == device) {
          if (Status r = device->Reset(); !r.ok()) {
            Log(LogLevel::kWarning, d.name + ": left half-configured: reset: " +
                                        ErrnoText(r));
          }
        }
      } else {
        ++counts.applied;
      }
      continue;
    }
    if (d.mem_limit != was.mem_limit) {
      if (Status s = device->SetMemLimit(d.mem_limit); s.ok()) {
        Log(LogLevel::kInfo,
            d.name + ": mem_limit " +
                (was.mem_limit == 0 ? "none" : MiB(was.mem_limit)) + " -> " +
                (d.mem_limit == 0 ? "none" : MiB(d.mem_limit)));
        ++counts.applied;
      } else {
        not_applied(d.name + ": mem_limit: " + ErrnoText(s));
        d.mem_limit = was.mem_limit;
      }
    }
    if (d.notes != was.notes) {
      device->SetNotes(d.notes);
      Log(LogLevel::kInfo, d.name + ": swap-priority, fs-type, mount-point "
                                    "and options updated");
      ++counts.applied;
    }
    const auto needs_restart = [&](const char* key) {
      not_applied(d.name + ": " + key +
                  " changed, not applied: it needs the device reset (its "
                  "pages dropped) or a restart");
    };
    // Against the device as it is: a reset and a `ctl disksize` by hand
    // may have applied the file's size meanwhile. The device holds whole
    // pages; a size such as ram / 3 is not.
    if (Device::AlignedDisksize(d.disksize) != device->disksize()) {
      needs_restart("zram-size");
      d.disksize = was.disksize;
      d.size_expression = was.size_expression;
    }
    // The recompression group too: the policy took it at start.
    if (d.comp_algorithm != was.comp_algorithm ||
        d.algorithm_params != was.algorithm_params ||
        d.recomp_algorithms != was.recomp_algorithms ||
        d.recompress_params != was.recompress_params) {
      needs_restart("compression-algorithm");
      d.comp_algorithm = was.comp_algorithm;
      d.algorithm_params = was.algorithm_params;
      d.recomp_algorithms = was.recomp_algorithms;
      d.recompress_params = was.recompress_params;
    }
    if (d.backing_dev != was.backing_dev) {
      needs_restart("writeback-device");
      d.backing_dev = was.backing_dev;
    }
  }
  std::erase_if(effective->devices, [&](const DeviceConfig& d) {
    return not_ours.contains(d.name);
  });
  for (const auto& [name, d] : old) {
    if (registry->Find(name) == nullptr) continue;  // hot_removed since
    not_applied(name + ": gone from the file, but kept: it may hold data; "
                       "remove it with `ztier ctl hot_remove`");
    effective->devices.push_back(*d);  // still in effect
  }
  return counts;
}

std::string UsageCommands(const DeviceConfig& d, const std::string& dev) {
  const auto note = [&](const char* key) {
    auto it = d.notes.find(key);
    return it == d.notes.end() ? std::string() : it->second;
  };
  const std::string options = note("options");
  if (d.is_swap()) {
    std::string cmd = "mkswap " + dev + " && swapon";
    const std::string prio = note("swap-priority");
    if (!prio.empty()) cmd += " -p " + prio;
    if (!options.empty()) cmd += " -o " + options;
    return cmd + " " + dev;
  }
  std::string cmd = "mkfs." + note("fs-type") + " " + dev;
  const std::string mount_point = note("mount-point");
  if (!mount_point.empty()) {
    cmd += " && mount";
    if (!options.empty()) cmd += " -o " + options;
    cmd += " " + dev + " " + mount_point;
  }
  return cmd;
}

}  // namespace ztier::tool
