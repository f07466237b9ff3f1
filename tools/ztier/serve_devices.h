// File: tools/ztier/serve_devices.h
//
// The devices of `ztier serve --config`: made from a ServiceConfig at
// start-up, and changed by a re-read one on SIGHUP (service_config.h).
//
// Start-up (CreateConfiguredDevices) configures each [zramN] device on its
// own, in file order, as zram-generator does through sysfs: comp_algorithm,
// algorithm_params, recomp_algorithm and algorithm_params priority=N for
// each recompression algorithm, mem_limit (zram-resident-limit), backing_dev
// (writeback-device), the notes (swap-priority, fs-type, mount-point,
// options), then disksize. A device the file skips (zram-size 0,
// host-memory-limit) is not made, and the log says why.
//
// Reload (ApplyReloadedConfig) applies what can change while clients use
// the devices, and never drops a page:
//   - zram-resident-limit: mem_limit, at once (zram allows it any time);
//   - the notes;
//   - a device new in the file: made, as at start-up.
// What it cannot apply live it logs as a warning and leaves alone: a
// device gone from the file (remove it with `ztier ctl hot_remove`), and a
// changed zram-size, compression-algorithm or writeback-device of a device
// (they need a reset, which drops its pages, or a restart). It returns the
// number of changes applied and not applied, and makes *after the
// configuration in effect: each change not applied is set back to what is
// in effect (a device gone from the file but kept stays in it), so the
// next reload compares the file with the devices as they are, and warns
// again about what is still not applied.
//
// Thread safety: call from the serving process's main thread; the devices
// themselves may be in use by any number of clients meanwhile.
#ifndef ZTIER_TOOLS_ZTIER_SERVE_DEVICES_H_
#define ZTIER_TOOLS_ZTIER_SERVE_DEVICES_H_

#include <string>

#include "service_config.h"
#include "ztier/device.h"
#include "ztier/status.h"

namespace ztier::tool {

// `prealloc`: --prealloc or --mlock, which need a zram-resident-limit on
// each device. Errors name the file, the device's section line and the
// device: "FILE:LINE: [zram0]: EBUSY: ...", with ctl's errno names.
Status CreateConfiguredDevices(const ServiceConfig& config, bool prealloc,
                               DeviceRegistry* registry);

struct ReloadCounts {
  int applied = 0;
  int not_applied = 0;
};
ReloadCounts ApplyReloadedConfig(const ServiceConfig& before,
                                 ServiceConfig* after, bool prealloc,
                                 DeviceRegistry* registry);

// What the operator runs to use a device as its notes say, once an NBD
// client has attached it as `block_device`: "mkswap DEV && swapon -p 100
// --discard DEV", or "mkfs.ext4 DEV && mount -o discard DEV /mnt".
std::string UsageCommands(const DeviceConfig& device,
                          const std::string& block_device);

}  // namespace ztier::tool

#endif  // ZTIER_TOOLS_ZTIER_SERVE_DEVICES_H_
