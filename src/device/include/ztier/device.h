// File: ztier/device.h
//
// Device: one zram-like compressed RAM block device, with zram's lifecycle
// and attributes, over a PageStore. DeviceRegistry: the set of devices one
// `ztier serve` process holds (what /sys/class/zram-control manages).
//
// Lifecycle, as zram's (drivers/block/zram/zram_drv.c and
// Documentation/admin-guide/blockdev/zram.rst):
//   uninitialised --SetDisksize(n)--> initialised --Reset()--> uninitialised
// comp_algorithm, algorithm_params (and later backing_dev) are set before
// disksize; setting them after is kBusy. IO on an uninitialised device is
// kFailedPrecondition. Reset() is kBusy while a client is attached (an NBD
// connection that selected this device holds a ClientRef).
//
// IO is in bytes at any offset and length within disksize: whole pages go
// straight to the PageStore; a partial page is a read-modify-write under that
// page's slot lock. Trim and WriteZeroes free whole pages (zram's discard);
// the unaligned head and tail of a WriteZeroes range are zeroed in place, of
// a Trim left alone (as the kernel skips them). WriteZeroes with no_hole
// stores same-filled zero pages instead (allocated, but no pool memory).
//
// Attribute texts: Show*/Store* take and give exactly what zram's sysfs files
// do (a trailing newline on shows; sizes accept K/M/G suffixes as memparse).
//
// Thread safety: all methods may be called concurrently. IO holds a shared
// lock on the device's state; SetDisksize/Reset/attribute changes that
// rebuild the store take it exclusively, so they wait for IO in flight.
// A store that an initialised (or removed) device refuses is refused at
// once, without waiting for IO or a pass to end.
// SetDisksize makes the store (and opens the backing store, which for a
// remote can take its timeout) with the lock released: meanwhile shows
// see the device uninitialised, and the stores that would change what it
// is made of (comp_algorithm, algorithm_params, recomp_algorithm,
// backing_dev, compressed_writeback, mem_limit, disksize), Reset and
// removal are kBusy.
#ifndef ZTIER_DEVICE_H_
#define ZTIER_DEVICE_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ztier/page_store.h"
#include "ztier/status.h"

namespace ztier {

// Parses a size as the kernel's memparse: a number with an optional K, M, G,
// T, P, E (powers of 1024) suffix, case-insensitive. "1G", "4096", "512k".
// Unlike memparse, anything after the suffix is an error, not ignored. As
// zramctl's (util-linux strtosize), also a fraction before a suffix ("1.5G",
// rounded down to a byte) and the suffixes KiB, MiB, ... (1024) and KB, MB,
// ... (1000). As memparse, "0x..." is hex ("0x40000000", "0x10M"); a
// leading zero before a digit, which memparse reads as octal ("010M" is
// 8M there), is refused. kInvalidArgument for anything else or a size past
// 2^64 - 1.
Result<std::uint64_t> ParseSize(std::string_view text);

// Parses zram's `writeback` input (writeback_store() in zram_drv.c) for a
// device of `num_pages` pages, left to right:
//   - mode tokens: idle, huge, huge_idle, incompressible, or type=<mode>;
//   - page_index=N and page_indexes=LO-HI (inclusive) add one scan of that
//     range with the mode set so far (none: every allocated slot);
//   - a mode token with no index token before it scans the whole device;
//     a mode token ends parsing (what follows is ignored, as zram does).
// Tokens are separated by spaces or newlines. kInvalidArgument for an
// unknown or malformed token or empty input; kOutOfRange for an index at or
// past num_pages, or LO > HI.
Result<std::vector<WritebackScan>> ParseWritebackTokens(std::string_view text,
                                                         std::uint64_t num_pages);

class Device;

// DeviceWatcher: what a front end that keeps something per initialised
// device (the ublk front end's /dev/ublkbN, src/ublk/) is told by the
// registry, without the device layer depending on it. Set on a registry
// (DeviceRegistry::SetWatcher); every device of that registry calls it:
//   OnInitialized: after SetDisksize succeeded (from the caller's thread).
//     Until it returns, a Reset() or removal of the device is kBusy (as
//     while its store is made), so that it always finds the device
//     initialised; IO and Attach go on meanwhile.
//   BeforeRelease: before Reset() of an initialised device and before
//     DeviceRegistry::Remove(); an error (kBusy: the disk is mounted or
//     swapped on) refuses the reset or the removal with that error, as
//     zram refuses reset while its disk has openers. If the reset or
//     removal is refused after all (a client attached meanwhile: kBusy),
//     OnInitialized is called again, so that the watcher gives back what
//     it released. A Reset() that found the device uninitialised (no
//     BeforeRelease) is kBusy if a SetDisksize initialised it meanwhile.
//   Describe: what it keeps for the device, for the status report
//     (ctl/status_report.h); the default keeps nothing.
// All are called WITHOUT the device's lock or the registry's held, so the
// watcher may wait for IO on the device to finish (its own serving threads
// need the device's shared lock) and may call the device's methods.
// Thread safety: called concurrently for different devices and from any
// thread; the watcher must outlive every device of the registry, or be
// cleared (SetWatcher(nullptr)) first.
class DeviceWatcher {
 public:
  virtual ~DeviceWatcher() = default;
  virtual void OnInitialized(Device& device) = 0;
  virtual Status BeforeRelease(Device& device) = 0;

  // The block device that serves `device` ("" for none), its queues, and
  // how many of them have given up serving: their IO fails until the
  // server is restarted (UblkDisk::queues_given_up).
  struct Report {
    std::string disk;
    std::uint32_t queues = 0;
    std::uint32_t queues_given_up = 0;
  };
  virtual Report Describe(const Device& device) const {
    (void)device;
    return {};
  }
};

struct DeviceDefaults {
  std::string comp_algorithm = "lz4";
  std::string algorithm_params;
  // recomp_algorithm and its algorithm_params at priorities 1..3 (recomp[0]
  // is priority 1); empty names: none (`ztier serve --recomp-algorithm`).
  std::array<RecompCodec, kMaxCodecPriorities - 1> recomp;
  // Bytes, page-aligned up as a write of the mem_limit attribute is; 0:
  // none.
  std::uint64_t mem_limit = 0;
  BatchBackend batch_backend = BatchBackend::kSerial;
  std::size_t streams = 0;  // 0: one per core
  // Multi-page objects of every device's store (PageStoreOptions::
  // unit_pages: 0 off, or 4, 8, 16; `ztier serve --unit-pages`).
  std::size_t unit_pages = 0;
  // Preallocate every device's memory at disksize time (PageStoreOptions::
  // prealloc): its pool reserves and faults in mem_limit bytes, its slot
  // table is faulted in, and IO then takes no new memory (`ztier serve
  // --prealloc`, implied by --mlock). SetDisksize then requires a mem_limit
  // (kInvalidArgument without one). The reserve is fixed at disksize time.
  bool prealloc = false;
  // Backing stores this process opens: encrypted (--backing-encrypt),
  // O_DIRECT where allowed.
  bool backing_encrypt = false;
  bool backing_direct = true;
  // Tests only: BackingOptions::wrap_file of every BackingStore the device
  // opens (e.g. a NewFaultyBackingFile around the real file).
  BackingFileWrap backing_file_wrap;
  // Remote backing devices: which backing_dev values are not paths (a URI
  // such as nbd://host/export), and how to open one as the BackingStore's
  // file (BackingOptions::file), given the device's disksize (the most of
  // it the device uses). Null: every backing_dev is a path, and one with
  // "://" in it is refused. `ztier serve` sets them to nbd::IsNbdUri and
  // nbd::OpenNbdBackingFile (nbd/nbd_backing_file.h).
  std::function<bool(std::string_view)> is_remote_backing;
  std::function<Result<std::shared_ptr<BackingFile>>(const std::string&,
                                                     std::uint64_t disksize)>
      open_remote_backing;
  // Seconds for the store's slot access times and age-based idle marking
  // (PageStoreOptions::clock); null: CLOCK_BOOTTIME's, as the kernel's.
  // Tests of the post-processing policy (ztier/policy.h) give the store
  // the same fake clock as the policy.
  std::function<std::uint32_t()> clock;
  // Event lines (null: none), "zram0: ..." without a newline, from the
  // calling thread: each writeback pass and compaction with its counts,
  // and mem_limit reached (once, until the pool is back under 90% of it).
  // Never one line per IO. A warning (mem_limit reached, a pass that
  // stopped on an error or whose writes failed) starts with "warning: ".
  // The mem_limit lines are made without allocating (they come from the IO
  // path, where memory may have run out); a log that does not allocate
  // either keeps that path free of allocation.
  std::function<void(std::string_view)> log;
};

class Device {
 public:
  Device(std::string name, DeviceDefaults defaults);
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  const std::string& name() const;
  // A number no other Device of this process has had: a device removed and
  // added again under its name is another device (the policy's per-device
  // state).
  std::uint64_t serial() const;
  // The same for the device's store: a number no other store of this
  // process has had, 0 while uninitialised. A Reset and a new disksize
  // give another (what the policy learnt of a store's pages).
  std::uint64_t store_serial() const;

  // ---- lifecycle and attributes (zram's names) ----
  // disksize: page-aligned up; 0 is kInvalidArgument; kBusy once set. With
  // DeviceDefaults::prealloc, kInvalidArgument while mem_limit is 0, and the
  // reserve's error (kResourceExhausted) when mem_limit bytes cannot be had.
  // A failure to open the backing store keeps its errno (ErrnoNameOf), its
  // message starting "backing_dev: "; a recompression algorithm's dict=
  // file that cannot be read is kInvalidArgument, its errno kept too.
  Status SetDisksize(std::uint64_t bytes);
  // The disksize SetDisksize(bytes) makes: bytes rounded up to a page
  // (bytes itself when that would pass UINT64_MAX, which it refuses).
  static std::uint64_t AlignedDisksize(std::uint64_t bytes);
  std::uint64_t disksize() const;
  bool initialized() const;
  // kBusy while clients are attached; else frees everything: disksize 0,
  // and comp_algorithm, recomp_algorithm, every priority's
  // algorithm_params and mem_limit back to the defaults
  // the device was created with (the serve flags; zram's are lzo-rle, none
  // and 0).
  Status Reset();
  // kInvalidArgument for an unknown name; kBusy after init.
  Status SetCompAlgorithm(std::string_view name);
  std::string ShowCompAlgorithm() const;  // "lzo [lz4] lz4hc zstd deflate\n"
  // algorithm_params: tokens for the primary algorithm, or with
  // priority=N / algo=NAME for a secondary one (zram's
  // algorithm_params_store()). kBusy after init.
  Status SetAlgorithmParams(std::string_view params);
  // Any time; with DeviceDefaults::prealloc, once initialised, at most the
  // mem_limit preallocated at disksize (kInvalidArgument above it or for
  // none: the reserve cannot grow).
  Status SetMemLimit(std::uint64_t bytes);
  Status ResetMemUsedMax(std::string_view value);      // only "0"
  Status MarkIdle(std::string_view value);  // "all" or seconds; uninit: EINVAL
  // backing_dev: a file or block device path; "none" (or empty) removes it.
  // kBusy after init. The path must exist or its directory must (a file is
  // created and sized to disksize, at SetDisksize, which fails with the
  // open's error if it cannot; a file it created goes again if it fails,
  // and stays once it succeeds, through Reset and removal: the
  // BackingStore's KeepFile). Show gives the path or "none\n".
  Status SetBackingDev(std::string_view path);
  std::string ShowBackingDev() const;
  // writeback: ParseWritebackTokens, then PageStore::Writeback with this
  // device's writeback_batch_size, compressed_writeback and budget.
  // Uninitialised: kFailedPrecondition; no backing_dev: kNotFound. The
  // result's error (IO error, limit reached, backing store full) is the
  // returned status; the counts go to *result when not null.
  Status Writeback(std::string_view tokens, WritebackResult* result = nullptr);
  // writeback_limit_enable (0/1) and writeback_limit (4 KiB units left), as
  // zram: any time, initialised or not; the limit is the remaining budget.
  Status SetWritebackLimitEnable(bool enable);
  bool writeback_limit_enable() const;
  Status SetWritebackLimit(std::uint64_t pages);
  std::uint64_t writeback_limit() const;
  // writeback_batch_size: IOs in flight during writeback (default 32),
  // 1..1024 (the io_uring ring's bound); else kInvalidArgument.
  Status SetWritebackBatchSize(std::uint64_t n);
  std::uint64_t writeback_batch_size() const;
  // compressed_writeback (0/1): kBusy after init, as zram.
  Status SetCompressedWriteback(bool on);
  bool compressed_writeback() const;
  std::string ShowBdStat() const;  // zeros before init
  // recomp_algorithm (zram's CONFIG_ZRAM_MULTI_COMP): "algo=NAME
  // [priority=N]", N 1..3 (default 1), before init (kBusy after); no algo=,
  // an unknown name or N out of range is kInvalidArgument. Show: one line
  // per configured priority, "#N: " and comp_algorithm's list with that
  // priority's algorithm selected; nothing when none is set. Reset()
  // clears them.
  Status SetRecompAlgorithm(std::string_view tokens);
  std::string ShowRecompAlgorithm() const;
  // recompress: zram's tokens (type=idle|huge|huge_idle, max_pages=N,
  // threshold=BYTES, algo=NAME, priority=N), then PageStore::Recompress.
  // Errors as zram's recompress_store(): a token without a value, a bad
  // number or type, a threshold at or above the huge class size, an
  // uninitialised device, no secondary algorithm in range, or an algo= that
  // is not configured: kInvalidArgument. The counts go to *result when not
  // null; the pass's error (an allocation failed) is returned. `pace`, if
  // set, is called between batches as RecompressRequest::pace (the
  // post-processing policy's budget), with a function that reads the
  // store's counters: it runs under the device's shared lock, so it must
  // not call back into the device (Stats() would take the lock again).
  using StatsReader = std::function<PageStoreStats()>;
  using RecompressPace = std::function<bool(const StatsReader& stats)>;
  // Whether anything waits for this device's passes to end: a writeback,
  // an unpaced recompress or a train_dict (an operator's), a Reset or a
  // removal, or a store that takes the device's lock exclusively
  // (disksize, comp_algorithm, algorithm_params, recomp_algorithm,
  // backing_dev, compressed_writeback, on a device that is not yet
  // initialised: they are refused at once after), from its call until it
  // returns. A
  // paced pass gives way (the policy's pace ends its pass at the next
  // batch): an operator's command waits one batch and one pause, not the
  // rest of the policy's period.
  bool PassesWaiting() const;
  Status Recompress(std::string_view tokens,
                    RecompressResult* result = nullptr,
                    RecompressPace pace = nullptr);
  // train_dict [SIZE]: trains a dictionary of at most SIZE bytes (K/M
  // suffixes; empty: 16K) on the device's stored pages and uses it from
  // then on (PageStore::TrainDictionary, whose errors it returns; before
  // init kInvalidArgument). Logs what it made.
  Result<DictionaryInfo> TrainDictionary(std::string_view size);
  // zram's debugfs block_state (PageStore::FormatBlockState); empty before
  // init. Slots [first, first + count), clamped to the device.
  std::string ShowBlockState(std::uint64_t first = 0,
                             std::uint64_t count = UINT64_MAX) const;
  // The recomp_algorithm at `priority` (1..3), or "" where none is set.
  std::string recomp_algorithm(int priority) const;
  // Compacts the pool; the OS pages it freed go in *pages when given.
  Status Compact(
      std::uint64_t* pages = nullptr);  // uninit: kFailedPrecondition
  // PageStore::CompactablePages(); 0 before init.
  std::uint64_t CompactablePages() const;
  // Whether the device has a reserve (DeviceDefaults::prealloc), which
  // keeps the pages a compaction frees.
  bool preallocated() const;
  std::string ShowMmStat() const;     // zeros before init (kernel format)
  std::string ShowIoStat() const;
  std::string ShowDebugStat() const;

  // ---- clients ----
  // A ClientRef counts one client in until it dies. Its holder must keep the
  // Device alive (hold the registry's shared_ptr) for as long as the ref.
  class ClientRef {
   public:
    explicit ClientRef(Device* d) : d_(d) {}
    ClientRef(ClientRef&& o) noexcept : d_(o.d_) { o.d_ = nullptr; }
    ClientRef(const ClientRef&) = delete;
    ClientRef& operator=(const ClientRef&) = delete;
    ~ClientRef();

   private:
    Device* d_;
  };
  // Counts a client in until the ref dies. kFailedPrecondition when the
  // device is not initialised (an NBD client cannot use it yet), kBusy
  // while its disksize is being set or it is being reset, kNotFound once
  // it has been removed from its registry.
  Result<ClientRef> Attach();
  int clients() const;

  // ---- IO (byte granular; kOutOfRange past disksize) ----
  Status Read(std::uint64_t offset, std::span<std::byte> out);
  // Page by page, as zram (a page that fails keeps its old content). With
  // units (DeviceDefaults::unit_pages), each whole aligned run the write
  // covers is stored as one object (PageStore::StoreBatch); if mem_limit
  // refuses it, that run is stored again page by page, and its pages from
  // the one refused on read as zeros (the runs after it are not touched).
  Status Write(std::uint64_t offset, std::span<const std::byte> data);
  // As Write, but each run of whole aligned pages is stored through
  // PageStore::StoreBatch (batched compression; the ublk front end's
  // multi-page writes); partial pages at either end go through
  // StorePartial. StoreBatch is all-or-nothing: when it fails with
  // kResourceExhausted (mem_limit) the run is stored again page by page,
  // so that, as with Write and the kernel, the pages before the one that
  // failed are written; the pages of the failed run from there on read as
  // zeros instead of their old content (a failed write's range is
  // undefined to the block layer).
  Status WritePages(std::uint64_t offset, std::span<const std::byte> data);
  Status Trim(std::uint64_t offset, std::uint64_t length);
  Status WriteZeroes(std::uint64_t offset, std::uint64_t length, bool no_hole);
  Status Flush();  // memory is the medium: nothing to flush
  // The states of pages [first_page, first_page + out.size()) (PageStore::
  // SlotStates; the NBD server's block status). Uninitialised:
  // kFailedPrecondition; kOutOfRange past disksize.
  Status PageStates(std::uint64_t first_page, std::span<SlotState> out) const;
  // Whether Read(offset, length) may wait for the backing store (PageStore::
  // MayReadBacking of its pages): the NBD server hands such a read to its
  // workers rather than run it on the connection's own thread. A hint;
  // false when uninitialised.
  bool ReadMayWait(std::uint64_t offset, std::uint64_t length) const;
  // ReadMayWait, with a remote backing store only (DeviceDefaults::
  // is_remote_backing), which can stall for up to its timeout, where a
  // local file's read takes a disk's time: the ublk disk hands only such
  // reads to its waiter threads, since the hand-off costs more than a
  // read from a fast local file. A hint; false when uninitialised.
  bool ReadMayStall(std::uint64_t offset, std::uint64_t length) const;
  // What the watcher keeps for this device (DeviceWatcher::Describe), for
  // the status report; nothing without a watcher. Takes no device lock.
  DeviceWatcher::Report DescribeByWatcher() const;

  // The store, or null before init. Holds a shared lock for the caller's use.
  PageStoreStats Stats() const;           // zeros before init
  std::string algorithm() const;
  std::size_t streams() const;

  // ---- settings recorded for the operator ----
  // What a configuration file says of this device that ztier does not apply
  // itself (zram-generator's swap-priority, fs-type, mount-point, options):
  // kept as given, by key, and shown by `ztier status`. Reset() keeps them.
  void SetNote(std::string key, std::string value);
  // Replaces every note (a re-read configuration's set).
  void SetNotes(std::map<std::string, std::string> notes);
  std::map<std::string, std::string> notes() const;

 private:
  friend class DeviceRegistry;
  // Marks the device removed and drops its store and backing file (its
  // passes end; a holder of the Device finds it uninitialised, and every
  // store, IO and pass on it is kNotFound "device 'NAME' was removed"),
  // unless a client is attached (then kBusy).
  Status Retire();
  void SetWatcher(DeviceWatcher* watcher);
  DeviceWatcher* watcher() const;

  struct Impl;  // device_impl.h
  std::unique_ptr<Impl> impl_;
};

// The devices of one process, by name (zram0, zram1, ...). hot_add picks the
// lowest free zramN name.
class DeviceRegistry {
 public:
  explicit DeviceRegistry(DeviceDefaults defaults);
  ~DeviceRegistry();
  DeviceRegistry(const DeviceRegistry&) = delete;
  DeviceRegistry& operator=(const DeviceRegistry&) = delete;

  // Adds a device (uninitialised). kInvalidArgument for a bad name (empty,
  // longer than 64, or not [A-Za-z0-9_.-]); kBusy if it exists.
  Result<std::shared_ptr<Device>> Add(std::string_view name);
  // Adds "zramN" with the lowest free N (O(log n) in the devices); returns
  // it. kResourceExhausted only once every N to INT_MAX is taken.
  Result<std::shared_ptr<Device>> HotAdd();
  // kNotFound if unknown; kBusy while clients are attached.
  Status Remove(std::string_view name);
  std::shared_ptr<Device> Find(std::string_view name) const;
  std::vector<std::shared_ptr<Device>> List() const;  // sorted by name

  // Sets the watcher of every device, present and later (null: none).
  // See DeviceWatcher for when it is called.
  void SetWatcher(DeviceWatcher* watcher);

 private:
  struct Impl;  // device.cc
  std::unique_ptr<Impl> impl_;
};

}  // namespace ztier

#endif  // ZTIER_DEVICE_H_
