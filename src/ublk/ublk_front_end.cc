// ublk_front_end.cc: one ublk disk per initialised device, kept through
// the registry's DeviceWatcher (contract in ublk/ublk_front_end.h).
#include "ublk/ublk_front_end.h"

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <system_error>
#include <thread>
#include <utility>

namespace ztier::ublk {

namespace {
// How long Start waits for a stale disk's blocking DEL_DEV (before 6.9)
// before it goes on without it (DeleteStale).
constexpr int kStaleDeleteGraceMs = 2000;

// N of "zramN", or UINT32_MAX (any id) for another name.
std::uint32_t WantedId(const std::string& name) {
  if (name.size() <= 4 || name.compare(0, 4, "zram") != 0) return UINT32_MAX;
  std::uint32_t n = 0;
  for (std::size_t i = 4; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9' || n > 100000) return UINT32_MAX;
    n = n * 10 + static_cast<std::uint32_t>(name[i] - '0');
  }
  return n;
}

const char* StateName(std::uint16_t state) {
  switch (state) {
    case platform::ublk::kStateDead: return "dead";
    case platform::ublk::kStateLive: return "live";
    case platform::ublk::kStateQuiesced: return "quiesced";
    case platform::ublk::kStateFailIo: return "fail_io";
    default: return "unknown";
  }
}
}  // namespace

Result<std::unique_ptr<UblkFrontEnd>> UblkFrontEnd::Start(
    DeviceRegistry* registry, UblkFrontEndOptions options) {
  std::unique_ptr<UblkFrontEnd> fe(
      new UblkFrontEnd(registry, std::move(options)));
  ZT_ASSIGN_OR_RETURN(fe->control_,
                      platform::UblkControl::Open(fe->options_.control_path));
  if (!fe->options_.trace_path.empty()) {
    fe->trace_ = std::fopen(fe->options_.trace_path.c_str(), "w");
    if (fe->trace_ == nullptr) {
      return Err(PosixError("open --ublk-trace " + fe->options_.trace_path,
                            errno));
    }
    std::fprintf(fe->trace_,
                 "# ztier ublk descriptor trace: OP 0xFLAGS NR_SECTORS "
                 "START_SECTOR RESULT (src/ublk/include/ublk/request.h)\n");
  }
  fe->RecoverStale();
  // Watch first, then add the present devices' disks: a device initialised
  // in between gets its disk once (AddDiskLocked skips one that has it).
  registry->SetWatcher(fe.get());
  Status failed;
  {
    internal::MutexLock lock(fe->mu_);
    for (const std::shared_ptr<Device>& d : registry->List()) {
      if (!d->initialized()) continue;
      failed = fe->AddDiskLocked(d);
      if (!failed.ok()) break;
    }
  }
  if (!failed.ok()) {
    fe->Stop();
    return Err(std::move(failed));
  }
  return fe;
}

UblkFrontEnd::~UblkFrontEnd() {
  Stop();
  if (trace_ != nullptr) std::fclose(trace_);
}

void UblkFrontEnd::RecoverStale() {
  for (std::uint32_t id : control_->ListDevices()) {
    auto info = control_->GetInfo(id);
    if (!info.has_value()) continue;  // gone meanwhile, or not ours to see
    if (info->ublksrv_flags != kUblkServerMark) continue;  // not a ztier's
    // ztier gives its pid at ADD_DEV (ublk_disk.cc). A device with pid 0
    // may be another server's between its ADD_DEV and START_DEV (kublk and
    // ublksrv give theirs at START_DEV): it is left alone. -1 is a stopped
    // device (ublk_stop_dev() in drivers/block/ublk_drv.c sets it, also
    // when the driver stops the disk of a server that died).
    if (info->ublksrv_pid == 0) {
      Log("ublk: " + platform::UblkBlockPath(id) +
          " has no server pid yet (state " + StateName(info->state) +
          "): another server's, left alone");
      continue;
    }
    if (platform::ProcessAlive(info->ublksrv_pid)) continue;
    // A server in another PID namespace (a container that sees this
    // host's /dev) has a pid this one cannot see: its char device is
    // still held, by it. One that has added its device and is still
    // opening the char device (udev may take a moment) holds it soon: a
    // device never started (a pid, not the -1 of a stopped one) is looked
    // at again once that moment is over.
    bool held = platform::UblkCharHeld(id);
    if (!held && info->ublksrv_pid > 0) {
      std::this_thread::sleep_for(
          std::chrono::milliseconds(platform::kUblkCharOpenTimeoutMs));
      held = platform::UblkCharHeld(id);
    }
    if (held) {
      Log("ublk: " + platform::UblkBlockPath(id) + ": process " +
          std::to_string(info->ublksrv_pid) +
          " is not seen here, but a server holds its char device: left "
          "alone");
      continue;
    }
    const std::string who =
        info->ublksrv_pid > 0
            ? "process " + std::to_string(info->ublksrv_pid) + ", which is gone"
            : std::string("a server that is gone");
    Log("ublk: " + platform::UblkBlockPath(id) + " was left by " + who +
        " (state " + StateName(info->state) +
        "): stopping and deleting it");
    if (Status s = control_->Stop(id); !s.ok()) {
      Log("warning: ublk: " + s.ToString());
    }
    DeleteStale(id);
  }
}

void UblkFrontEnd::DeleteStale(std::uint32_t id) {
  Status s = control_->DeleteAsync(id);
  if (s.code() != StatusCode::kUnsupported) {
    if (!s.ok()) Log("warning: ublk: " + s.ToString());
    return;
  }
  // Before 6.9 only the blocking DEL_DEV is there, which waits until the
  // disk's last opener has gone (ublk_ctrl_del_dev() in
  // drivers/block/ublk_drv.c): swap left on the dead disk by the crash
  // would keep it, and this start-up, waiting for ever. It runs on a
  // thread of its own, with its own control ring. Start waits for it a
  // moment (kStaleDeleteGraceMs): with nothing holding the dead disk
  // (the usual crash) it is done at once, the id is free again before
  // the disks are added (zramN keeps /dev/ublkbN) and nothing is said of
  // a wait. Past that moment the server comes up meanwhile (a disk
  // wanting this id takes another), and says what the delete waits for.
  const std::string path = platform::UblkBlockPath(id);
  Status done = DeleteBlockingWithin(
      options_.control_path, id, kStaleDeleteGraceMs,
      [path, log = options_.log](const Status& late) {
        if (!log) return;
        log(late.ok() ? "ublk: " + path + " deleted at last"
                      : "warning: ublk: " + late.ToString());
      });
  if (!done.ok()) {
    Log("warning: ublk: " + done.ToString() +
        (done.code() == StatusCode::kBusy ? " (serving goes on meanwhile)"
                                          : ""));
  }
}

Status UblkFrontEnd::AddDiskLocked(const std::shared_ptr<Device>& device) {
  if (stopped_ || disks_.contains(device->name())) return Status::Ok();
  UblkDiskOptions o = options_.disk;
  o.dev_id = WantedId(device->name());
  o.trace = trace_;
  o.trace_mu = &trace_mu_;
  o.log = options_.log;
  o.control_path = options_.control_path;
  auto disk = UblkDisk::Start(control_.get(), device, o);
  if (!disk.has_value()) {
    return Status(disk.error().code(), device->name() + ": ublk disk: " +
                                           disk.error().message());
  }
  Log(device->name() + ": " + (*disk)->block_path() + " (" +
      std::to_string((*disk)->queues()) + " queue(s) of " +
      std::to_string(o.depth) + ", " + std::to_string(o.max_io_bytes >> 10) +
      " KiB IOs)");
  disks_.emplace(device->name(), std::move(*disk));
  return Status::Ok();
}

void UblkFrontEnd::OnInitialized(Device& device) {
  std::shared_ptr<Device> d = registry_->Find(device.name());
  if (d == nullptr || d.get() != &device) return;  // not this registry's
  internal::MutexLock lock(mu_);
  if (Status s = AddDiskLocked(d); !s.ok()) {
    Log("warning: " + s.message() + "; it is served over NBD only");
  }
}

Status UblkFrontEnd::BeforeRelease(Device& device) {
  std::string path;
  {
    internal::MutexLock lock(mu_);
    auto it = disks_.find(device.name());
    if (it == disks_.end()) return Status::Ok();
    path = it->second->block_path();
  }
  // Unlocked: the look through /proc may take a while, and every other
  // device's disk (OnInitialized) and the stop need mu_. The exclusive
  // open it leaves us with keeps a swapon or mount that comes meanwhile
  // out until STOP_DEV has removed the disk; it is closed before DEL_DEV,
  // which waits for the disk's last opener (UblkDisk::Stop).
  ZT_ASSIGN_OR_RETURN(platform::BlockDeviceClaim claim,
                      platform::ClaimUnusedBlockDevice(path));
  if (!claim.user.empty()) {
    return Status::Busy(path + " is in use (" + claim.user + ")");
  }
  internal::MutexLock lock(mu_);
  auto it = disks_.find(device.name());
  if (it == disks_.end()) return Status::Ok();  // stopped meanwhile
  if (it->second->block_path() != path) {
    return Status::Busy(device.name() +
                        ": its disk changed meanwhile; try "
                        "again");
  }
  // The disk's own client ref is one; another is an NBD client, which
  // would make the reset fail after the disk is gone.
  if (device.clients() > 1) {
    return Status::Busy("device '" + device.name() + "' has " +
                        std::to_string(device.clients() - 1) +
                        " other client(s) attached");
  }
  // Waits for its IO: the device's lock is free.
  it->second->Stop(std::move(claim.fd));
  disks_.erase(it);
  Log(device.name() + ": " + path + " stopped and deleted");
  return Status::Ok();
}

void UblkFrontEnd::Stop() {
  registry_->SetWatcher(nullptr);
  std::map<std::string, std::unique_ptr<UblkDisk>> disks;
  {
    internal::MutexLock lock(mu_);
    stopped_ = true;
    disks.swap(disks_);
  }
  for (auto& [name, disk] : disks) {
    disk->Stop();
    Log(name + ": " + disk->block_path() + " stopped and deleted");
  }
}

std::map<std::string, std::string> UblkFrontEnd::Disks() const {
  internal::MutexLock lock(mu_);
  std::map<std::string, std::string> out;
  for (const auto& [name, disk] : disks_) out[name] = disk->block_path();
  return out;
}

DeviceWatcher::Report UblkFrontEnd::Describe(const Device& device) const {
  internal::MutexLock lock(mu_);
  auto it = disks_.find(device.name());
  if (it == disks_.end()) return {};
  const UblkDisk& disk = *it->second;
  return {disk.block_path(), disk.queues(), disk.queues_given_up()};
}

void UblkFrontEnd::Log(const std::string& line) const {
  if (options_.log) options_.log(line);
}

}  // namespace ztier::ublk
