// ublk_front_end.h: every initialised device of a DeviceRegistry as a
// ublk block device, /dev/ublkbN (`ztier serve --ublk`).
//
// Lifecycle, kept by being the registry's DeviceWatcher (ztier/device.h):
//   - at Start, each initialised device gets its disk; later, a device
//     gets one when its disksize is set (hot_add, then disksize);
//   - reset and hot_remove of a device with a disk are refused with kBusy
//     while the disk is in use (platform::ClaimUnusedBlockDevice: mounted,
//     swapped on or claimed; held open by a process; backing a loop
//     device; or an NBD client is attached to the device), else the disk
//     is stopped and deleted first and the reset or removal goes on. The
//     look leaves the disk opened exclusively until STOP_DEV has removed
//     it, so a swapon or mount that comes after the look fails (EBUSY)
//     instead of landing on a disk about to go, as zram's reset claims
//     its disk (reset_store() in drivers/block/zram/zram_drv.c);
//   - Stop() (SIGTERM/SIGINT) stops and deletes every disk.
// The disk of zramN is /dev/ublkbN when that id is free, else the lowest
// free one; each disk made is logged with its path.
//
// Crash recovery: a server killed with SIGKILL leaves its ublk devices
// behind (dead or quiesced, their /dev/ublkcN still there). At Start, each
// /dev/ublkcN that a ztier made (ublksrv_flags of UBLK_U_CMD_GET_DEV_INFO
// holds kUblkServerMark) and whose server (ublksrv_pid) is no longer a
// live process is stopped and deleted, and logged. Devices of other ublk
// servers are left alone, dead or not: one may be waiting for its server
// to come back (UBLK_F_USER_RECOVERY), with IO queued. The data of a
// ztier's device is gone with the killed process: recovery frees the ids,
// it does not restore pages. Where the kernel has no asynchronous delete
// (before 6.9), the blocking DEL_DEV of such a device, which waits for
// whatever still holds the dead disk (swap left on it, a mount), runs on
// a detached thread: Start waits for it 2 s at most (long enough for the
// usual case, nothing holding the dead disk, so that the id is free again
// for the new disk), then goes on and logs what it waits for.
//
// Errors: Start fails when the control device cannot be opened (kNotFound:
// "no /dev/ublk-control: this kernel has no ublk (modprobe ublk_drv)";
// kUnsupported without io_uring in this build) or a present device's disk
// cannot be made. A disk that cannot be made for a device initialised
// later is logged, and the device is served over NBD only.
//
// Thread safety: the watcher calls come from any thread (the control
// socket's, the main one); mu_ serialises them with Stop and Disks.
// Lock order: mu_, then the registry's lock (Find); mu_ is never taken
// under a device's lock (the watcher is called without it).
#ifndef ZTIER_UBLK_UBLK_FRONT_END_H_
#define ZTIER_UBLK_UBLK_FRONT_END_H_

#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "platform/mutex.h"
#include "platform/thread_annotations.h"
#include "platform/ublk.h"
#include "ublk/ublk_disk.h"
#include "ztier/device.h"

namespace ztier::ublk {

struct UblkFrontEndOptions {
  std::string control_path = platform::kUblkControlPath;
  UblkDiskOptions disk;  // dev_id, trace and log are set per disk
  std::string trace_path;  // empty: no descriptor trace
  // May be null; a line that starts with "warning: " is one. It may be
  // called after the front end is gone, up to the process's exit
  // (UblkDiskOptions::log says how it must be made).
  std::function<void(const std::string&)> log;
};

class UblkFrontEnd final : public DeviceWatcher {
 public:
  static Result<std::unique_ptr<UblkFrontEnd>> Start(
      DeviceRegistry* registry, UblkFrontEndOptions options);
  ~UblkFrontEnd() override;  // Stop()

  // Stops and deletes every disk and stops watching. Idempotent.
  void Stop();

  // Device name -> /dev/ublkbN, for those that have a disk.
  std::map<std::string, std::string> Disks() const;

  void OnInitialized(Device& device) override;
  Status BeforeRelease(Device& device) override;
  // The device's disk, its queues and those given up
  // (UblkDisk::queues_given_up), for the status report.
  Report Describe(const Device& device) const override;

 private:
  UblkFrontEnd(DeviceRegistry* registry, UblkFrontEndOptions options)
      : registry_(registry), options_(std::move(options)) {}
  // Deletes the devices of servers that are gone (see the file comment).
  void RecoverStale();
  // DEL_DEV of stale device `id`: asynchronous where the kernel has it
  // (6.9+), else the blocking one on a detached thread (see the .cc).
  void DeleteStale(std::uint32_t id);
  Status AddDiskLocked(const std::shared_ptr<Device>& device)
      ZT_REQUIRES(mu_);
  void Log(const std::string& line) const;

  DeviceRegistry* const registry_;
  const UblkFrontEndOptions options_;
  std::unique_ptr<platform::UblkControl> control_;
  std::FILE* trace_ = nullptr;
  internal::Mutex trace_mu_;
  mutable internal::Mutex mu_;
  bool stopped_ ZT_GUARDED_BY(mu_) = false;
  std::map<std::string, std::unique_ptr<UblkDisk>> disks_ ZT_GUARDED_BY(mu_);
};

}  // namespace ztier::ublk

#endif  // ZTIER_UBLK_UBLK_FRONT_END_H_
