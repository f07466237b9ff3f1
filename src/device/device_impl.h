// device_impl.h: Device's state and the methods that implement it
// (device.cc); Device (ztier/device.h) forwards each public method to its
// Impl. Not part of the public API.
//
// Thread safety: as Device's; mu_ guards the fields after it except the
// atomics.
#ifndef ZTIER_DEVICE_DEVICE_IMPL_H_
#define ZTIER_DEVICE_DEVICE_IMPL_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <shared_mutex>
#include <span>
#include <string>
#include <string_view>

#include "ztier/recompress_tokens.h"
#include "ztier/device.h"

namespace ztier {

struct Device::Impl {
  Impl(std::string name, DeviceDefaults defaults);

  Status SetDisksize(std::uint64_t bytes);
  std::uint64_t disksize() const;
  bool initialized() const;
  // For a store_ found null, mu_ held: kNotFound for a removed device (the
  // control socket's ENODEV), else "not initialised".
  Status Uninitialized() const;
  bool PassesWaiting() const { return pass_waiters_.load() > 0; }
  // `released`: the watcher (if any) has released the device
  // (DeviceWatcher::BeforeRelease); if not, a device found initialised is
  // kBusy rather than reset behind the watcher's back.
  Status Reset(bool released);
  // Ends the announcement of a new store (announcing_), once the watcher
  // has been told of it.
  void Announced();
  // Reset's work, the lock held exclusively. Returns the backing store it
  // let go of, for ReleaseBacking.
  std::shared_ptr<BackingStore> ResetLocked();
  // Trims the blocks `backing` freed and closes it, with `lock` (mu_,
  // held) released and busy_ set meanwhile; returns with `lock` released.
  void ReleaseBacking(std::shared_ptr<BackingStore> backing,
                      std::unique_lock<std::shared_mutex>& lock);
  // kBusy with busy_'s reason. REQUIRES: mu_ held, busy_ set.
  Status Busy() const;
  // Whether `attribute`, one of what the store will be made of, may still
  // change: kNotFound for a removed device; kBusy while a transition runs
  // (busy_), or once the store is made ("ATTRIBUTE cannot change after
  // disksize is set"). REQUIRES: mu_ held.
  Status CheckConfigurable(std::string_view attribute) const;
  // CheckConfigurable under a shared lock, before a store takes mu_
  // exclusively: a device that refuses it already says so at once, not
  // once the IO and passes in flight have ended (readers may keep a
  // waiting exclusive lock out). REQUIRES: mu_ not held.
  Status CheckConfigurableNow(std::string_view attribute) const;
  // Clears busy_ under mu_ when it goes out of scope, unless its owner
  // cleared it already (and set impl to null).
  struct ClearBusy {
    Impl* impl;
    ~ClearBusy();
  };
  Status SetCompAlgorithm(std::string_view name);
  std::string ShowCompAlgorithm() const;
  Status SetAlgorithmParams(std::string_view params);
  Status SetMemLimit(std::uint64_t bytes);
  Status ResetMemUsedMax(std::string_view value);
  Status MarkIdle(std::string_view value);
  Status SetBackingDev(std::string_view path);
  std::string ShowBackingDev() const;
  Status Writeback(std::string_view tokens, WritebackResult* result);
  Status SetWritebackLimitEnable(bool enable);
  bool writeback_limit_enable() const;
  Status SetWritebackLimit(std::uint64_t pages);
  std::uint64_t writeback_limit() const;
  Status SetWritebackBatchSize(std::uint64_t n);
  std::uint64_t writeback_batch_size() const;
  Status SetCompressedWriteback(bool on);
  bool compressed_writeback() const;
  std::string ShowBdStat() const;
  Status SetRecompAlgorithm(std::string_view tokens);
  std::string ShowRecompAlgorithm() const;
  Status Recompress(std::string_view tokens, RecompressResult* result,
                    RecompressPace pace);
  std::string ShowBlockState(std::uint64_t first, std::uint64_t count) const;
  Result<DictionaryInfo> TrainDictionary(std::string_view size);
  std::string recomp_algorithm(int priority) const;
  Status Compact(std::uint64_t* pages);
  std::uint64_t CompactablePages() const;
  bool preallocated() const { return defaults_.prealloc; }
  std::string ShowMmStat() const;
  std::string ShowIoStat() const;
  std::string ShowDebugStat() const;
  Status Read(std::uint64_t offset, std::span<std::byte> out);
  Status Write(std::uint64_t offset, std::span<const std::byte> data);
  Status WritePages(std::uint64_t offset, std::span<const std::byte> data);
  // WritePages' and Write's page by page work. REQUIRES: mu_ held
  // (shared), the store made and the range checked.
  Status WritePagesLocked(std::uint64_t offset,
                          std::span<const std::byte> data);
  Status WritePageByPageLocked(std::uint64_t offset,
                               std::span<const std::byte> data);
  // Stores whole pages from page `first` with one StoreBatch; if the memory
  // limit refuses the batch, page by page up to the page it stops.
  // REQUIRES: as above.
  Status StoreRunLocked(std::uint64_t first, std::span<const std::byte> pages);
  Status Trim(std::uint64_t offset, std::uint64_t length);
  Status WriteZeroes(std::uint64_t offset, std::uint64_t length, bool no_hole);
  Status Flush();
  Status PageStates(std::uint64_t first_page, std::span<SlotState> out) const;
  bool ReadMayWait(std::uint64_t offset, std::uint64_t length) const;
  bool ReadMayStall(std::uint64_t offset, std::uint64_t length) const;
  PageStoreStats Stats() const;
  std::string algorithm() const;
  std::size_t streams() const;
  void SetNote(std::string key, std::string value);
  void SetNotes(std::map<std::string, std::string> notes);
  std::map<std::string, std::string> notes() const;
  // Counts a client in (Device::Attach makes the ClientRef): kNotFound
  // once retired, kFailedPrecondition before init.
  Status Attach();
  Status Retire();

  const std::string name_;
  const std::uint64_t serial_;
  const DeviceDefaults defaults_;
  mutable std::shared_mutex mu_;  // guards everything below
  std::string comp_algorithm_;
  // recomp_algorithm by priority, [0] unused (the primary is
  // comp_algorithm_); empty: none at that priority.
  std::array<std::string, kMaxCodecPriorities> recomp_algorithm_;
  // algorithm_params of each priority (0: the primary), without priority=
  // and algo=.
  std::array<std::string, kMaxCodecPriorities> algorithm_params_;
  // Set under mu_ held shared too (SetMemLimit, one at a time under
  // mem_limit_mu_): atomic.
  std::mutex mem_limit_mu_;
  std::atomic<std::uint64_t> mem_limit_{0};
  // With DeviceDefaults::prealloc, the mem_limit the store's reserve was
  // made for (at disksize); 0 otherwise. Under mu_.
  std::uint64_t preallocated_ = 0;
  std::uint64_t disksize_ = 0;
  std::string backing_dev_;  // empty: none
  std::shared_ptr<BackingStore> backing_;
  // backing_ != nullptr, read without mu_ (ReadMayWait's first test, so
  // that a device without one takes no lock for it); written under mu_.
  std::atomic<bool> has_backing_{false};
  // ... and it is a remote one (ReadMayStall); the same rules.
  std::atomic<bool> remote_backing_{false};
  bool compressed_writeback_ = false;
  std::atomic<std::uint64_t> writeback_batch_size_{32};
  WritebackBudget budget_;
  std::unique_ptr<PageStore> store_;
  // Device::store_serial; written under mu_ held exclusively, with store_.
  std::atomic<std::uint64_t> store_serial_{0};
  bool retired_ = false;  // removed from the registry: no new clients
  // Non-null (the reason) while SetDisksize makes the store, or a Reset or
  // removal trims and closes the old backing store, with mu_ released:
  // every store that would change what a store is made of, disksize, a
  // Reset and a removal are then kBusy (Busy()).
  const char* busy_ = nullptr;
  // Set with the store SetDisksize makes, until Device::SetDisksize has told
  // the watcher (DeviceWatcher::OnInitialized): a Reset or removal
  // meanwhile is kBusy, so that the watcher never hears of a store that is
  // gone already. Unlike busy_, IO and Attach go on (the watcher's own).
  // Set under mu_ held exclusively; cleared without it (Announced).
  std::atomic<bool> announcing_{false};
  // Under notes_mu_, not mu_: setting them never waits for a pass.
  mutable std::mutex notes_mu_;
  std::map<std::string, std::string> notes_;
  std::atomic<bool> at_mem_limit_{false};  // logged; see NoteMemLimit
  std::atomic<std::uint64_t> mem_limit_checked_ns_{0};
  std::atomic<int> clients_{0};
  // Calls waiting for (or running) a pass, Reset or removal: see
  // Device::PassesWaiting. Counted by Waiting.
  std::atomic<int> pass_waiters_{0};
  struct Waiting {
    explicit Waiting(std::atomic<int>& n) : n_(n) { n_.fetch_add(1); }
    ~Waiting() { n_.fetch_sub(1); }
    std::atomic<int>& n_;
  };
  std::atomic<DeviceWatcher*> watcher_{nullptr};  // DeviceRegistry's

  // Logs reaching mem_limit (the store refusing a page for it) and leaving
  // it (a store that succeeds once the pool is under 90% of the limit,
  // looked at most once a second), once each. Under mu_ (shared).
  void NoteMemLimit(const Status& s);
  // Every priority's algorithm, [0] the primary. Under mu_.
  PriorityAlgorithms Algorithms() const;
  // The options' secondary codecs, each checked with MakeCodec (an error
  // names the priority; a dict= file that cannot be read is
  // kInvalidArgument, its errno kept). Under mu_.
  Status RecompOptions(PageStoreOptions* o) const;
  // Sets the per-priority state back to defaults_. Under mu_ (exclusive).
  void ResetPriorities();
};

}  // namespace ztier

#endif  // ZTIER_DEVICE_DEVICE_IMPL_H_
