// device.cc: the zram device model (contract in ztier/device.h), in
// Device::Impl (device_impl.h); Device's methods forward to it.
#include "ztier/device.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cassert>
#include <cctype>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <optional>
#include <system_error>
#include <thread>

#include "device_impl.h"
#include "id_set.h"
#include "kernel_args.h"
#include "platform/clock.h"
#include "platform/posix_backing_file.h"

namespace ztier {

namespace {

constexpr std::uint64_t kPageMask = kPageSize - 1;

// `bytes` rounded up to a page, or `bytes` itself when that would pass
// UINT64_MAX.
std::uint64_t PageAlignUp(std::uint64_t bytes) {
  return bytes > UINT64_MAX - kPageMask ? bytes
                                        : (bytes + kPageMask) & ~kPageMask;
}
// The store's slot table: 16 bytes a page (src/store/slot_table.h).
constexpr std::uint64_t kSlotTableBytesPerPage = 16;

// writeback_batch_size is 1..this: a pass's io_uring ring has one entry per
// IO in flight and registers one buffer per entry, and io_uring registers at
// most UIO_MAXIOV (1024) buffers (src/backing/block_writer.cc). More would
// only fail to set up the ring, or reserve GiBs of buffers.
constexpr std::uint64_t kMaxWritebackInFlight = 1024;

Status NotInitialized() {
  return Status::FailedPrecondition("device is not initialised (set disksize)");
}

Status Removed(const std::string& name) {
  return Status::NotFound("device '" + name + "' was removed");
}

// Device::Impl::busy_'s reasons.
constexpr char kMakingStore[] =
    "disksize is being set (the store is being made)";
constexpr char kReleasingBacking[] =
    "the device is being reset (its backing store is being trimmed and "
    "closed)";

bool ValidName(std::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' ||
           c == '.' || c == '-';
  });
}

std::string TrimSpace(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) {
    s.remove_suffix(1);
  }
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) {
    s.remove_prefix(1);
  }
  return std::string(s);
}

// backing_dev's check at store time: the path exists (and is not a
// directory), or its directory does (the file is created at SetDisksize).
Status CheckBackingPath(const std::string& path) {
  if (path.size() >= 4096) {
    return Status::InvalidArgument("backing_dev path too long");
  }
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (fs::exists(st)) {
    if (fs::is_directory(st)) {
      return Status::InvalidArgument("backing_dev " + path + " is a directory");
    }
    // zram takes only a block device (ENOTBLK otherwise); ztier also takes
    // a file, but not a character device (/dev/null), a FIFO or a socket.
    if (!fs::is_regular_file(st) && !fs::is_block_file(st)) {
      return Status::InvalidArgument("backing_dev " + path +
                                     " is neither a file nor a block device");
    }
    // zram's backing_dev_store() opens the path read-write at once, a
    // block device with its exclusive claim, and fails with that open's
    // error (EACCES, EROFS, EBUSY for a mounted or claimed device): so
    // does this, rather than take the path and fail the disksize store
    // later (the claim is taken again there, posix_backing_file.cc).
    const int excl = fs::is_block_file(st) ? O_EXCL : 0;
    const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOCTTY | excl);
    if (fd < 0) return PosixError("backing_dev open " + path, errno);
    // procfs, sysfs and their kind: controls, not storage (opened anyway
    // at disksize, posix_backing_file.h, and refused there too).
    Status on = fs::is_regular_file(st) ? internal::CheckBackingFileSystem(
                                              fd, "backing_dev " + path)
                                        : Status::Ok();
    ::close(fd);
    return on;
  }
  fs::path dir = fs::path(path).parent_path();
  if (dir.empty()) dir = ".";
  if (!fs::is_directory(dir, ec)) {
    // ENOENT, as filp_open() gives zram's backing_dev_store() for it.
    return PosixError("backing_dev " + path +
                          ": no such file, and no directory " + dir.string() +
                          " to create it in",
                      ENOENT);
  }
  // The file is created at disksize: the directory must let it be, and
  // must not be one of the kernel's own (where a file cannot be made, or
  // one made is not storage).
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    return PosixError("backing_dev " + path + ": cannot create it in " +
                          dir.string(),
                      errno);
  }
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) {
    return PosixError("backing_dev " + path + ": open " + dir.string(), errno);
  }
  Status on = internal::CheckBackingFileSystem(
      dfd, "backing_dev " + path + ": its folder " + dir.string());
  ::close(dfd);
  return on;
}

// Opens backing_dev for a device of `disksize` bytes; errors name the path.
Result<std::shared_ptr<BackingStore>> OpenBacking(
    const std::string& path, std::uint64_t disksize,
    const DeviceDefaults& defaults) {
  std::shared_ptr<BackingFile> remote;
  if (defaults.is_remote_backing && defaults.is_remote_backing(path)) {
    auto file = defaults.open_remote_backing(path, disksize);
    if (!file.has_value()) {
      return Err(Annotate("backing_dev", file.error()));
    }
    remote = std::move(*file);
  }
  auto opened = BackingStore::Open({.path = path,
                                    .size_bytes = disksize,
                                    .direct = defaults.backing_direct,
                                    .encrypt = defaults.backing_encrypt,
                                    .file = std::move(remote),
                                    .wrap_file = defaults.backing_file_wrap});
  // Annotate keeps the errno (ENOENT, not kNotFound's ENODEV; ENOSPC).
  if (!opened.has_value()) return Err(Annotate("backing_dev", opened.error()));
  // Making it shared allocates: a throw there leaves the store to
  // `opened`, which takes a file it made away with it.
  return std::shared_ptr<BackingStore>(std::move(*opened));
}

// comp_algorithm's listing (zcomp_available_show()): every name, the
// selected one in brackets, and a newline.
std::string AlgorithmList(std::string_view selected) {
  std::string out;
  for (std::string_view n : CodecNames()) {
    if (!out.empty()) out += ' ';
    if (n == selected) {
      out += '[';
      out += n;
      out += ']';
    } else {
      out += n;
    }
  }
  return out + "\n";
}

}  // namespace

Result<std::uint64_t> ParseSize(std::string_view text) {
  const std::string t = TrimSpace(text);
  const auto bad = [&]() {
    return Err(Status::InvalidArgument(
        "not a size: '" + t +
        "' (a number with an optional K, M, G, T, P or E suffix: 4096, 512K, "
        "1.5G, 4KiB; KB, MB, ... are powers of 1000)"));
  };
  const char* p = t.data();
  const char* end = t.data() + t.size();
  // The kernel's memparse() reads a number in C's bases: "0x40000000" is
  // hex, as there; "010M" would be octal (8M) there, so a leading zero
  // before a digit is refused rather than read another way.
  int radix = 10;
  if (end - p > 2 && p[0] == '0' && (p[1] == 'x' || p[1] == 'X') &&
      std::isxdigit(static_cast<unsigned char>(p[2]))) {
    radix = 16;
    p += 2;
  } else if (end - p > 1 && p[0] == '0' &&
             std::isdigit(static_cast<unsigned char>(p[1]))) {
    return Err(Status::InvalidArgument(
        "not a size: '" + t +
        "' (a leading zero: the kernel would read it as octal)"));
  }
  std::uint64_t whole = 0;
  auto [after_whole, ec] = std::from_chars(p, end, whole, radix);
  if (ec == std::errc::result_out_of_range) {
    return Err(Status::InvalidArgument("size too large: '" + t + "'"));
  }
  if (ec != std::errc() || after_whole == p) return bad();
  p = after_whole;
  // A fraction ("1.5G", as zramctl's strtosize takes): at most 18 digits.
  std::uint64_t frac = 0, frac_scale = 1;
  if (p != end && *p == '.' && radix == 10) {
    ++p;
    const char* digits = p;
    while (p != end && std::isdigit(static_cast<unsigned char>(*p))) {
      if (frac_scale < 1000000000000000000ull) {
        frac = frac * 10 + static_cast<std::uint64_t>(*p - '0');
        frac_scale *= 10;
      }
      ++p;
    }
    if (p == digits) return bad();
  }
  int power = 0;  // of the unit
  if (p != end) {
    const char* units = "kmgtpe";
    const char* u = std::strchr(units, std::tolower(static_cast<unsigned char>(*p)));
    if (u == nullptr || *u == '\0') return bad();
    power = static_cast<int>(u - units) + 1;
    ++p;
  }
  // K is 1024 (memparse); KiB too; KB is 1000 (util-linux's strtosize).
  std::uint64_t base = 1024;
  if (power != 0 && p != end) {
    const auto is = [&](std::size_t i, char c) {
      return std::tolower(static_cast<unsigned char>(p[i])) == c;
    };
    if (end - p == 2 && is(0, 'i') && is(1, 'b')) {
      p += 2;
    } else if (end - p == 1 && is(0, 'b')) {
      base = 1000;
      p += 1;
    } else {
      return bad();
    }
  }
  if (p != end) return bad();
  __extension__ typedef unsigned __int128 U128;
  U128 unit = 1;
  for (int i = 0; i < power; ++i) unit *= base;
  const U128 bytes = static_cast<U128>(whole) * unit +
                     static_cast<U128>(frac) * unit / frac_scale;
  if (bytes > UINT64_MAX) {
    return Err(Status::InvalidArgument("size too large: '" + t + "'"));
  }
  if (power == 0 && frac != 0) {
    return Err(Status::InvalidArgument("not a whole number of bytes: '" + t +
                                       "'"));
  }
  return static_cast<std::uint64_t>(bytes);
}

namespace {
std::atomic<std::uint64_t> g_device_serial{0};

// mem_limit page-aligned up, as SetMemLimit stores it (and as the store
// rounds it): the preallocated reserve, mm_stat and a later write of the
// same value then agree.
DeviceDefaults WithAlignedLimit(DeviceDefaults d) {
  d.mem_limit = PageAlignUp(d.mem_limit);
  return d;
}

}  // namespace

Device::Impl::Impl(std::string name, DeviceDefaults defaults)
    : name_(std::move(name)),
      serial_(g_device_serial.fetch_add(1, std::memory_order_relaxed) + 1),
      defaults_(WithAlignedLimit(std::move(defaults))),
      comp_algorithm_(defaults_.comp_algorithm),
      mem_limit_(defaults_.mem_limit) {
  ResetPriorities();
}

void Device::Impl::ResetPriorities() {
  algorithm_params_[0] = defaults_.algorithm_params;
  for (int p = 1; p < kMaxCodecPriorities; ++p) {
    recomp_algorithm_[p] = defaults_.recomp[p - 1].codec;
    algorithm_params_[p] = defaults_.recomp[p - 1].algorithm_params;
  }
}

PriorityAlgorithms Device::Impl::Algorithms() const {
  PriorityAlgorithms algs = recomp_algorithm_;
  algs[0] = comp_algorithm_;
  return algs;
}

Status Device::Impl::RecompOptions(PageStoreOptions* o) const {
  for (int p = 1; p < kMaxCodecPriorities; ++p) {
    if (recomp_algorithm_[p].empty()) continue;
    auto codec = MakeCodec(recomp_algorithm_[p], algorithm_params_[p]);
    if (!codec.has_value()) {
      const Status s =
          Annotate("algorithm_params of priority " + std::to_string(p) + " (" +
                       recomp_algorithm_[p] + ")",
                   codec.error());
      // A dict= file that cannot be read (gone since algorithm_params read
      // it) is params that cannot be set up: kInvalidArgument, as zram's
      // disksize_store() answers zcomp_create()'s EINVAL for them
      // (zstd_setup_params() in backend_zstd.c). Its errno is kept
      // (ENOENT, not kNotFound's ENODEV, where `ztier serve` names it).
      if (s.posix_errno() == 0) return s;
      return StatusWithErrno(StatusCode::kInvalidArgument, s.message(),
                             s.posix_errno());
    }
    o->recomp[p - 1] = {recomp_algorithm_[p], algorithm_params_[p]};
  }
  return Status::Ok();
}

Status Device::Impl::SetDisksize(std::uint64_t bytes) {
  if (bytes == 0) return Status::InvalidArgument("disksize must not be 0");
  {
    // Refused at once when set already, rather than once the IO and
    // passes in flight let the exclusive lock in (checked again there).
    std::shared_lock lock(mu_);
    if (retired_) return Removed(name_);
    if (store_ != nullptr) return Status::Busy("disksize is already set");
    if (busy_ != nullptr) return Busy();
  }
  // busy_ is cleared with the store's install below, or, on a failure or
  // a throw, when this returns, once what was made for the store (`o`'s
  // backing store, and a file it made) is gone; until then no other
  // transition can start.
  ClearBusy clear_busy{nullptr};
  PageStoreOptions o;
  std::string backing_dev;
  std::uint64_t aligned = 0;
  {
    const Waiting waiting(pass_waiters_);  // a paced pass gives way
    std::unique_lock lock(mu_);
    if (retired_) return Removed(name_);
    if (store_ != nullptr) return Status::Busy("disksize is already set");
    if (busy_ != nullptr) return Busy();
    if (defaults_.prealloc && mem_limit_ == 0) {
      return Status::InvalidArgument(
          "memory is preallocated on this server: set mem_limit before "
          "disksize");
    }
    if (bytes > UINT64_MAX - kPageMask) {
      return Status::InvalidArgument("disksize " + std::to_string(bytes) +
                                     " is too large");
    }
    aligned = Device::AlignedDisksize(bytes);
    // As zram's disksize_store(), which fails with ENOMEM when its slot
    // table cannot be allocated: a table larger than this machine's memory
    // is refused before anything is made.
    const std::uint64_t table = aligned / kPageSize * kSlotTableBytesPerPage;
    const std::uint64_t ram =
        static_cast<std::uint64_t>(::sysconf(_SC_PHYS_PAGES)) *
        static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
    if (ram != 0 && table > ram) {
      return Status::ResourceExhausted("disksize " + std::to_string(aligned) +
                                       " needs " + std::to_string(table) +
                                       " bytes of slot table, more than this "
                                       "machine's " +
                                       std::to_string(ram) +
                                       " bytes of memory");
    }
    o.num_pages = aligned / kPageSize;
    o.codec = comp_algorithm_;
    o.algorithm_params = algorithm_params_[0];
    ZT_RETURN_IF_ERROR(RecompOptions(&o));
    o.mem_limit = mem_limit_;
    o.batch_backend = defaults_.batch_backend;
    o.streams = defaults_.streams;
    o.unit_pages = defaults_.unit_pages;
    o.prealloc = defaults_.prealloc;
    o.clock = defaults_.clock;
    backing_dev = backing_dev_;
    // What the store is made of is fixed from here (every store that
    // would change it is kBusy), and the slow part runs unlocked: opening
    // a remote backing store can take --backing-timeout, preallocation
    // seconds, and shows (status, a metrics scrape) must not wait for it.
    busy_ = kMakingStore;
    clear_busy.impl = this;
  }
  Status made = Status::Ok();
  // A file this attempt made goes with the store if it fails or throws
  // (BackingStore::created; the device stays uninitialised), and stays
  // once the store is installed, for good (a reset keeps it).
  std::shared_ptr<BackingStore> backing;
  std::unique_ptr<PageStore> store;
  if (!backing_dev.empty()) {
    Result<std::shared_ptr<BackingStore>> b =
        OpenBacking(backing_dev, aligned, defaults_);
    if (b.has_value()) {
      backing = std::move(*b);
      o.backing = backing;
    } else {
      made = b.error();
    }
  }
  if (made.ok()) {
    Result<std::unique_ptr<PageStore>> s = PageStore::Create(o);
    if (s.has_value()) {
      store = std::move(*s);
    } else {
      made = s.error();
    }
  }
  std::unique_lock lock(mu_);
  if (!made.ok()) return made;
  if (backing != nullptr) backing->KeepFile();  // the device's now
  busy_ = nullptr;
  clear_busy.impl = nullptr;  // done here, with the install
  store_ = std::move(store);
  store_serial_.store(
      g_device_serial.fetch_add(1, std::memory_order_relaxed) + 1,
      std::memory_order_relaxed);
  backing_ = std::move(backing);
  has_backing_.store(backing_ != nullptr, std::memory_order_relaxed);
  remote_backing_.store(backing_ != nullptr && defaults_.is_remote_backing &&
                            defaults_.is_remote_backing(backing_dev_),
                        std::memory_order_relaxed);
  disksize_ = aligned;
  preallocated_ = defaults_.prealloc ? mem_limit_.load() : 0;
  // Until Device::SetDisksize has told the watcher.
  announcing_.store(true, std::memory_order_relaxed);
  return Status::Ok();
}

void Device::Impl::Announced() {
  // No lock: taking mu_ would wait for every pass and reader holding it
  // shared, and the reply to the disksize store with it. A Reset that
  // reads false after this store finds the watcher told already.
  announcing_.store(false, std::memory_order_release);
}

std::uint64_t Device::Impl::disksize() const {
  std::shared_lock lock(mu_);
  return disksize_;
}

Status Device::Impl::Busy() const { return Status::Busy(busy_); }

Status Device::Impl::CheckConfigurable(std::string_view attribute) const {
  if (retired_) return Removed(name_);
  if (busy_ != nullptr) return Busy();
  if (store_ != nullptr) {
    return Status::Busy(std::string(attribute) +
                        " cannot change after disksize is set");
  }
  return Status::Ok();
}

Status Device::Impl::CheckConfigurableNow(std::string_view attribute) const {
  std::shared_lock lock(mu_);
  return CheckConfigurable(attribute);
}

Device::Impl::ClearBusy::~ClearBusy() {
  if (impl == nullptr) return;  // cleared by its owner already
  std::unique_lock lock(impl->mu_);
  impl->busy_ = nullptr;
}

Status Device::Impl::Uninitialized() const {
  return retired_ ? Removed(name_) : NotInitialized();
}

bool Device::Impl::initialized() const {
  std::shared_lock lock(mu_);
  return store_ != nullptr;
}

Status Device::Impl::Reset(bool released) {
  const auto busy = [&] {
    return Status::Busy("device has " + std::to_string(clients_.load()) +
                        " client(s) attached");
  };
  // Busy at once, as the kernel's reset_store(), rather than once the
  // passes that hold mu_ shared end; checked again under the lock.
  if (clients_.load() > 0) return busy();
  const Waiting waiting(pass_waiters_);
  std::unique_lock lock(mu_);
  if (retired_) return Removed(name_);
  if (clients_.load() > 0) return busy();
  if (busy_ != nullptr) return Busy();
  if (announcing_.load(std::memory_order_acquire) ||
      (!released && store_ != nullptr)) {
    return Status::Busy(kMakingStore);
  }
  ReleaseBacking(ResetLocked(), lock);
  return Status::Ok();
}

void Device::Impl::ReleaseBacking(std::shared_ptr<BackingStore> backing,
                                  std::unique_lock<std::shared_mutex>& lock) {
  if (backing == nullptr) {
    lock.unlock();
    return;
  }
  busy_ = kReleasingBacking;
  lock.unlock();
  const ClearBusy clear_busy{this};
  // The blocks the store freed: trimmed on a remote that takes discards,
  // so that it does not keep their bytes (or their space) after the reset.
  // Unlocked, as DiscardFreed asks: it may wait on the network. Until it
  // is done the device is kBusy for a new disksize, whose new connection
  // to the same remote a late trim could otherwise overtake. A pass may
  // answer only its first ranges (the NBD file starts none after about
  // timeout_ms), so passes are made while one answers any: no later pass
  // would send the rest. One that answers none (the remote away) ends it.
  while (backing->DiscardFreed() != 0) {
  }
  backing.reset();
}

std::shared_ptr<BackingStore> Device::Impl::ResetLocked() {
  // The store frees its blocks into the backing store: drop it first. As
  // the kernel's reset_bdev(), the backing device is closed and forgotten;
  // writeback_limit(_enable), writeback_batch_size and compressed_writeback
  // stay (zram's reset does not clear them either).
  store_.reset();
  store_serial_.store(0, std::memory_order_relaxed);
  std::shared_ptr<BackingStore> backing = std::move(backing_);
  has_backing_.store(false, std::memory_order_relaxed);
  remote_backing_.store(false, std::memory_order_relaxed);
  backing_dev_.clear();
  disksize_ = 0;
  preallocated_ = 0;
  mem_limit_ = defaults_.mem_limit;
  at_mem_limit_.store(false, std::memory_order_relaxed);
  comp_algorithm_ = defaults_.comp_algorithm;
  ResetPriorities();
  return backing;
}

Status Device::Impl::SetCompAlgorithm(std::string_view name) {
  const std::string n(CanonicalCodecName(TrimSpace(name)));
  if (n.size() >= 128)
    return Status::InvalidArgument("algorithm name too long");
  if (!IsCodecName(n)) {
    return Status::InvalidArgument("unknown algorithm '" + n + "'");
  }
  ZT_RETURN_IF_ERROR(CheckConfigurableNow("comp_algorithm"));
  const Waiting waiting(pass_waiters_);  // a paced pass gives way
  std::unique_lock lock(mu_);
  ZT_RETURN_IF_ERROR(CheckConfigurable("comp_algorithm"));
  comp_algorithm_ = n;
  return Status::Ok();
}

std::string Device::Impl::ShowCompAlgorithm() const {
  std::shared_lock lock(mu_);
  return AlgorithmList(comp_algorithm_);
}

Status Device::Impl::SetAlgorithmParams(std::string_view params) {
  ZT_RETURN_IF_ERROR(CheckConfigurableNow("algorithm_params"));
  const Waiting waiting(pass_waiters_);  // a paced pass gives way
  std::unique_lock lock(mu_);
  ZT_RETURN_IF_ERROR(CheckConfigurable("algorithm_params"));
  // As zram's algorithm_params_store(): priority=N or algo=NAME picks the
  // algorithm; the tokens replace that priority's. Checked against its
  // codec now when it is known, else at disksize (RecompOptions).
  ZT_ASSIGN_OR_RETURN(AlgorithmParamsTarget t,
                      SelectAlgorithmParams(TrimSpace(params), Algorithms()));
  const std::string& algo =
      t.priority == 0 ? comp_algorithm_ : recomp_algorithm_[t.priority];
  if (!algo.empty()) {
    auto codec = MakeCodec(algo, t.params);
    if (!codec.has_value()) return codec.error();
  }
  algorithm_params_[t.priority] = std::move(t.params);
  return Status::Ok();
}

Status Device::Impl::SetMemLimit(std::uint64_t bytes) {
  // Shared: the store's limit is atomic, and a SIGHUP reload setting it must
  // not wait for a writeback pass.
  std::shared_lock lock(mu_);
  if (retired_) return Removed(name_);
  if (busy_ != nullptr) return Busy();
  std::lock_guard one_at_a_time(mem_limit_mu_);
  const std::uint64_t aligned = (bytes + kPageMask) & ~kPageMask;
  // A preallocated store never takes more than its reserve: a limit above
  // it (or none) would only turn writes past the reserve into ENOMEM.
  if (store_ != nullptr && preallocated_ != 0 &&
      (aligned == 0 || aligned > preallocated_)) {
    return Status::InvalidArgument(
        "mem_limit can be at most the " + std::to_string(preallocated_) +
        " bytes preallocated at disksize (memory is preallocated on this "
        "server); reset the device to raise it");
  }
  mem_limit_ = aligned;
  if (store_ != nullptr) store_->SetMemLimit(mem_limit_);
  at_mem_limit_.store(false, std::memory_order_relaxed);  // a new limit
  return Status::Ok();
}

Status Device::Impl::ResetMemUsedMax(std::string_view value) {
  // As mem_used_max_store(): kstrtoul(buf, 10) must give 0 ("+0" and "00"
  // are 0 too); anything else, overflow included, is EINVAL.
  std::uint64_t n = 0;
  if (kernel_args::ParseDecimal(TrimSpace(value), &n) !=
          kernel_args::NumberError::kNone ||
      n != 0) {
    return Status::InvalidArgument("mem_used_max accepts only 0");
  }
  std::shared_lock lock(mu_);
  if (store_ == nullptr) return Uninitialized();
  store_->ResetMemUsedMax();
  return Status::Ok();
}

Status Device::Impl::MarkIdle(std::string_view value) {
  const std::string v = TrimSpace(value);
  std::shared_lock lock(mu_);
  if (store_ == nullptr) return Uninitialized();
  if (v == "all") {
    store_->MarkIdleAll();
    return Status::Ok();
  }
  // As zram's idle_store(): kstrtoull(buf, 0), so 0x3c and 074 are 60 s
  // too; an age past what the slots' 32-bit times span marks no page, as
  // the kernel's cutoff before boot does.
  std::uint64_t age = 0;
  if (kernel_args::ParseAnyBase(v, &age) != kernel_args::NumberError::kNone) {
    return Status::InvalidArgument("idle takes 'all' or an age in seconds");
  }
  store_->MarkIdleOlderThan(
      static_cast<std::uint32_t>(std::min<std::uint64_t>(age, UINT32_MAX)));
  return Status::Ok();
}

Status Device::Impl::SetBackingDev(std::string_view path) {
  const std::string p = TrimSpace(path);
  ZT_RETURN_IF_ERROR(CheckConfigurableNow("backing_dev"));
  const Waiting waiting(pass_waiters_);  // a paced pass gives way
  std::unique_lock lock(mu_);
  ZT_RETURN_IF_ERROR(CheckConfigurable("backing_dev"));
  if (p.empty() || p == "none") {
    backing_dev_.clear();
    return Status::Ok();
  }
  // A remote one is reached at SetDisksize.
  if (defaults_.is_remote_backing && defaults_.is_remote_backing(p)) {
    backing_dev_ = p;
    return Status::Ok();
  }
  if (p.find("://") != std::string::npos) {
    return Status::InvalidArgument("backing_dev " + p +
                                   ": a URI, and this process opens only "
                                   "paths (ztier serve opens nbd:// URIs)");
  }
  ZT_RETURN_IF_ERROR(CheckBackingPath(p));
  backing_dev_ = p;
  return Status::Ok();
}

std::string Device::Impl::ShowBackingDev() const {
  std::shared_lock lock(mu_);
  return (backing_dev_.empty() ? std::string("none") : backing_dev_) + "\n";
}

Status Device::Impl::Writeback(std::string_view tokens,
                               WritebackResult* result) {
  const Waiting waiting(pass_waiters_);  // a paced pass gives way
  // Shared, as IO: the pass runs alongside reads and writes, and Reset()
  // waits for it.
  std::shared_lock lock(mu_);
  if (store_ == nullptr) return Uninitialized();
  if (backing_ == nullptr) {
    return Status::NotFound("device '" + name_ + "' has no backing_dev");
  }
  WritebackRequest request;
  ZT_ASSIGN_OR_RETURN(request.scans,
                      ParseWritebackTokens(tokens, disksize_ / kPageSize));
  // zram 6.12's writeback_store() checks writeback_limit before each slot
  // it scans, a candidate or not: with the limit enabled and spent, a pass
  // is EIO even where it would find nothing to write.
  if (budget_.enabled.load() && budget_.pages.load() == 0) {
    WritebackResult r;
    r.limit_reached = true;
    r.status = Status::IoError("writeback_limit reached");
    if (result != nullptr) *result = r;
    return r.status;
  }
  request.in_flight = static_cast<std::size_t>(
      std::min(writeback_batch_size_.load(), kMaxWritebackInFlight));
  request.compressed = compressed_writeback_;
  request.budget = &budget_;
  ZT_ASSIGN_OR_RETURN(WritebackResult r, store_->Writeback(request));
  if (result != nullptr) *result = r;
  if (defaults_.log) {
    std::string line = name_ + ": writeback '" + TrimSpace(tokens) + "': " +
                       std::to_string(r.written) + " of " +
                       std::to_string(r.candidates) + " pages written, " +
                       std::to_string(r.changed) + " changed meanwhile, " +
                       std::to_string(r.failed) + " failed";
    if (!r.status.ok()) line += "; stopped: " + r.status.message();
    defaults_.log(r.status.ok() && r.failed == 0 ? line : "warning: " + line);
  }
  return r.status;
}

Status Device::Impl::SetWritebackLimitEnable(bool enable) {
  std::shared_lock lock(mu_);  // so that a removal cannot come between
  if (retired_) return Removed(name_);
  budget_.SetEnabled(enable);  // a pass's refunds do not raise it
  return Status::Ok();
}

bool Device::Impl::writeback_limit_enable() const {
  return budget_.enabled.load();
}

Status Device::Impl::SetWritebackLimit(std::uint64_t pages) {
  std::shared_lock lock(mu_);  // so that a removal cannot come between
  if (retired_) return Removed(name_);
  // zram rounds down to whole pages of PAGE_SIZE / 4096 units: 1 here.
  budget_.Set(pages);  // a pass's refunds do not raise it
  return Status::Ok();
}

std::uint64_t Device::Impl::writeback_limit() const {
  return budget_.pages.load();
}

Status Device::Impl::SetWritebackBatchSize(std::uint64_t n) {
  if (n == 0 || n > kMaxWritebackInFlight) {
    return Status::InvalidArgument(
        "writeback_batch_size must be 1.." +
        std::to_string(kMaxWritebackInFlight) +
        " (the writeback io_uring ring holds at most that many IOs)");
  }
  std::shared_lock lock(mu_);  // so that a removal cannot come between
  if (retired_) return Removed(name_);
  writeback_batch_size_.store(n);
  return Status::Ok();
}

std::uint64_t Device::Impl::writeback_batch_size() const {
  return writeback_batch_size_.load();
}

Status Device::Impl::SetCompressedWriteback(bool on) {
  ZT_RETURN_IF_ERROR(CheckConfigurableNow("compressed_writeback"));
  const Waiting waiting(pass_waiters_);  // a paced pass gives way
  std::unique_lock lock(mu_);
  ZT_RETURN_IF_ERROR(CheckConfigurable("compressed_writeback"));
  compressed_writeback_ = on;
  return Status::Ok();
}

bool Device::Impl::compressed_writeback() const {
  std::shared_lock lock(mu_);
  return compressed_writeback_;
}

std::string Device::Impl::ShowBdStat() const {
  std::shared_lock lock(mu_);
  if (store_ == nullptr) return "       0        0        0\n";
  return store_->FormatBdStat();
}

Status Device::Impl::SetRecompAlgorithm(std::string_view tokens) {
  ZT_ASSIGN_OR_RETURN(const RecompAlgorithmTokens t,
                      ParseRecompAlgorithmTokens(tokens));
  const std::string n(CanonicalCodecName(t.algo));
  if (!IsCodecName(n)) {
    return Status::InvalidArgument("recomp_algorithm: unknown algorithm '" +
                                   n + "'");
  }
  ZT_RETURN_IF_ERROR(CheckConfigurableNow("recomp_algorithm"));
  const Waiting waiting(pass_waiters_);  // a paced pass gives way
  std::unique_lock lock(mu_);
  ZT_RETURN_IF_ERROR(CheckConfigurable("recomp_algorithm"));
  recomp_algorithm_[t.priority] = n;
  return Status::Ok();
}

std::string Device::Impl::ShowRecompAlgorithm() const {
  std::shared_lock lock(mu_);
  std::string out;
  for (int p = 1; p < kMaxCodecPriorities; ++p) {
    if (recomp_algorithm_[p].empty()) continue;
    out += "#" + std::to_string(p) + ": " + AlgorithmList(recomp_algorithm_[p]);
  }
  return out;
}

std::string Device::Impl::recomp_algorithm(int priority) const {
  if (priority < 1 || priority >= kMaxCodecPriorities) return {};
  std::shared_lock lock(mu_);
  return recomp_algorithm_[priority];
}

Status Device::Impl::Recompress(std::string_view tokens,
                                RecompressResult* result,
                                RecompressPace pace) {
  ZT_ASSIGN_OR_RETURN(const RecompressTokens t, ParseRecompressTokens(tokens));
  std::optional<Waiting> waiting;  // an operator's pass: a paced one gives way
  if (!pace) waiting.emplace(pass_waiters_);
  // Shared, as Writeback: IO goes on during the pass; Reset() waits for it.
  std::shared_lock lock(mu_);
  if (retired_) return Removed(name_);
  if (store_ == nullptr) {
    return Status::InvalidArgument("recompress: device is not initialised");
  }
  ZT_ASSIGN_OR_RETURN(RecompressRequest request,
                      ResolveRecompress(t, Algorithms()));
  if (pace) {
    request.pace = [&pace, store = store_.get()] {
      return pace([store] { return store->Stats(); });
    };
  }
  ZT_ASSIGN_OR_RETURN(const RecompressResult r, store_->Recompress(request));
  if (result != nullptr) *result = r;
  if (defaults_.log) {
    std::string line =
        name_ + ": recompress '" + TrimSpace(tokens) + "': " +
        std::to_string(r.recompressed) + " of " +
        std::to_string(r.candidates) + " pages recompressed, " +
        std::to_string(r.bytes_saved()) + " bytes saved, " +
        std::to_string(r.incompressible) + " marked incompressible, " +
        std::to_string(r.changed) + " changed meanwhile";
    if (r.damaged != 0) {
      line += ", " + std::to_string(r.damaged) + " did not decompress";
    }
    if (!r.status.ok()) line += "; stopped: " + r.status.message();
    defaults_.log(r.status.ok() ? line : "warning: " + line);
  }
  return r.status;
}

Result<DictionaryInfo> Device::Impl::TrainDictionary(std::string_view size) {
  TrainDictRequest request;
  const std::string v = TrimSpace(size);
  if (!v.empty()) {
    ZT_ASSIGN_OR_RETURN(const std::uint64_t bytes, ParseSize(v));
    request.dict_bytes = bytes;
  }
  const Waiting waiting(pass_waiters_);  // a paced pass gives way
  // Shared, as Recompress: IO goes on while it trains.
  std::shared_lock lock(mu_);
  if (retired_) return Err(Removed(name_));
  if (store_ == nullptr) {
    return Err(
        Status::InvalidArgument("train_dict: device is not initialised"));
  }
  ZT_ASSIGN_OR_RETURN(const DictionaryInfo info,
                      store_->TrainDictionary(request));
  if (defaults_.log) {
    defaults_.log(
        name_ + ": train_dict: dictionary " + std::to_string(info.id) +
        " of " + std::to_string(info.bytes) + " bytes" +
        (info.content_only ? " (content only)" : "") + " trained on " +
        std::to_string(info.samples) + " pages, which it compresses to " +
        std::to_string(info.sample_bytes_with) + " bytes instead of " +
        std::to_string(info.sample_bytes_without) + "; " +
        std::to_string(info.memory) + " bytes of memory; new stores use it");
  }
  return info;
}

std::string Device::Impl::ShowBlockState(std::uint64_t first,
                                         std::uint64_t count) const {
  std::shared_lock lock(mu_);
  if (store_ == nullptr) return {};
  return store_->FormatBlockState(first, count);
}

Status Device::Impl::Compact(std::uint64_t* pages) {
  std::shared_lock lock(mu_);
  if (store_ == nullptr) return Uninitialized();
  const std::size_t moved = store_->Compact();
  if (pages != nullptr) *pages = moved;
  if (defaults_.log) {
    defaults_.log(name_ + ": compaction: " + std::to_string(moved) +
                  " pages compacted");
  }
  return Status::Ok();
}

std::uint64_t Device::Impl::CompactablePages() const {
  std::shared_lock lock(mu_);
  return store_ == nullptr ? 0 : store_->CompactablePages();
}

std::string Device::Impl::ShowMmStat() const {
  std::shared_lock lock(mu_);
  if (store_ == nullptr) {
    char buf[128];
    std::snprintf(buf, sizeof(buf),
                  "%8llu %8llu %8llu %8lu %8ld %8llu %8lu %8llu %8llu\n", 0ull,
                  0ull, 0ull, static_cast<unsigned long>(mem_limit_), 0l, 0ull,
                  0ul, 0ull, 0ull);
    return buf;
  }
  return store_->FormatMmStat();
}

std::string Device::Impl::ShowIoStat() const {
  std::shared_lock lock(mu_);
  if (store_ == nullptr) return "       0        0 0        0\n";
  return store_->FormatIoStat();
}

std::string Device::Impl::ShowDebugStat() const {
  std::shared_lock lock(mu_);
  if (store_ == nullptr) return "version: 1\n       0        0\n";
  return store_->FormatDebugStat();
}

Status Device::Impl::Retire() {
  const auto busy = [&] {
    return Status::Busy("device '" + name_ + "' has clients");
  };
  if (clients_.load() > 0) return busy();  // at once; again under the lock
  const Waiting waiting(pass_waiters_);
  std::unique_lock lock(mu_);
  if (clients_.load() > 0) return busy();
  if (retired_) return Removed(name_);  // another removal is at it
  if (busy_ != nullptr) return Busy();
  if (announcing_.load(std::memory_order_acquire)) {
    return Status::Busy(kMakingStore);
  }
  retired_ = true;
  // As the kernel's zram_remove() resets the device: its memory and its
  // backing file go now, not when the last holder of the Device lets go
  // (a policy pass in its round, a metrics scrape), and no pass can start
  // on it (each finds it uninitialised).
  ReleaseBacking(ResetLocked(), lock);
  return Status::Ok();
}

Status Device::Impl::Attach() {
  // Under the shared lock: Reset() and Retire() hold it exclusively while
  // they check the client count, so neither can miss a client.
  std::shared_lock lock(mu_);
  if (retired_) return Removed(name_);
  if (busy_ != nullptr) return Busy();
  if (store_ == nullptr) return Uninitialized();
  clients_.fetch_add(1);
  return Status::Ok();
}

namespace {
// Splits [offset, offset + length) into its pieces within one page each and
// calls fn(page index, offset in page, piece length, bytes before the
// piece) for them in order, stopping at the first error.
template <typename Fn>
Status ForEachPagePiece(std::uint64_t offset, std::uint64_t length, Fn fn) {
  std::uint64_t done = 0;
  while (done < length) {
    const std::uint64_t pos = offset + done;
    const std::size_t in_page = pos % kPageSize;
    const std::size_t n = static_cast<std::size_t>(
        std::min<std::uint64_t>(kPageSize - in_page, length - done));
    ZT_RETURN_IF_ERROR(fn(pos / kPageSize, in_page, n, done));
    done += n;
  }
  return Status::Ok();
}

Status CheckRange(std::uint64_t offset, std::uint64_t length,
                  std::uint64_t size) {
  if (offset > size || length > size - offset) {
    return Status::OutOfRange("offset " + std::to_string(offset) + " length " +
                              std::to_string(length) + " past the end (" +
                              std::to_string(size) + " bytes)");
  }
  return Status::Ok();
}
}  // namespace

Status Device::Impl::Read(std::uint64_t offset, std::span<std::byte> out) {
  std::shared_lock lock(mu_);
  if (store_ == nullptr) return Uninitialized();
  ZT_RETURN_IF_ERROR(CheckRange(offset, out.size(), disksize_));
  return ForEachPagePiece(
      offset, out.size(),
      [&](std::uint64_t index, std::size_t in_page, std::size_t n,
          std::uint64_t done) -> Status {
        if (n == kPageSize) {
          return store_->Load(index, MutablePage(out.data() + done, kPageSize));
        }
        alignas(8) std::byte page[kPageSize];
        ZT_RETURN_IF_ERROR(store_->Load(index, MutablePage(page, kPageSize)));
        std::memcpy(out.data() + done, page + in_page, n);
        return Status::Ok();
      });
}

Status Device::Impl::Write(std::uint64_t offset,
                           std::span<const std::byte> data) {
  std::shared_lock lock(mu_);
  if (store_ == nullptr) return Uninitialized();
  ZT_RETURN_IF_ERROR(CheckRange(offset, data.size(), disksize_));
  // With units (unit_pages), each whole aligned run the write covers is
  // stored as one object; the pages around them page by page.
  const std::uint64_t unit = store_->unit_pages() * kPageSize;
  const std::uint64_t end = offset + data.size();
  const std::uint64_t a = unit == 0 ? 0 : (offset + unit - 1) / unit * unit;
  const std::uint64_t b = unit == 0 ? 0 : end / unit * unit;
  if (unit == 0 || a >= b) return WritePageByPageLocked(offset, data);
  ZT_RETURN_IF_ERROR(WritePageByPageLocked(offset, data.first(a - offset)));
  for (std::uint64_t r = a; r < b; r += unit) {
    // If the limit stops a page, the pages of this run from there on read
    // as zeros (all-or-nothing emptied it); the runs after it keep their
    // content.
    ZT_RETURN_IF_ERROR(
        StoreRunLocked(r / kPageSize, data.subspan(r - offset, unit)));
  }
  return WritePageByPageLocked(b, data.subspan(b - offset));
}

Status Device::Impl::StoreRunLocked(std::uint64_t first,
                                    std::span<const std::byte> pages) {
  // Refused for memory, the run is stored page by page, so that the pages
  // before the one the limit stops are written.
  Status s = store_->StoreBatch(first, pages, BatchRefusal::kKeepPrefix);
  NoteMemLimit(s);
  return s;
}

Status Device::Impl::WritePageByPageLocked(std::uint64_t offset,
                                           std::span<const std::byte> data) {
  return ForEachPagePiece(
      offset, data.size(),
      [&](std::uint64_t index, std::size_t in_page, std::size_t n,
          std::uint64_t done) -> Status {
        // Page by page, as zram: a page that fails keeps its old content
        // (StoreBatch's all-or-nothing would empty the whole unit instead).
        Status s =
            n == kPageSize
                ? store_->Store(index, ConstPage(data.data() + done, kPageSize))
                : store_->StorePartial(index, in_page, data.subspan(done, n));
        NoteMemLimit(s);
        return s;
      });
}

Status Device::Impl::WritePages(std::uint64_t offset,
                                std::span<const std::byte> data) {
  std::shared_lock lock(mu_);
  if (store_ == nullptr) return Uninitialized();
  ZT_RETURN_IF_ERROR(CheckRange(offset, data.size(), disksize_));
  return WritePagesLocked(offset, data);
}

Status Device::Impl::WritePagesLocked(std::uint64_t offset,
                                      std::span<const std::byte> data) {
  std::uint64_t done = 0;
  while (done < data.size()) {
    const std::uint64_t pos = offset + done;
    const std::size_t in_page = pos % kPageSize;
    const std::uint64_t left = data.size() - done;
    if (in_page != 0 || left < kPageSize) {
      // A partial page: the head or the tail of the range.
      const std::size_t n = static_cast<std::size_t>(
          std::min<std::uint64_t>(kPageSize - in_page, left));
      Status s = store_->StorePartial(pos / kPageSize, in_page,
                                      data.subspan(done, n));
      NoteMemLimit(s);
      ZT_RETURN_IF_ERROR(s);
      done += n;
      continue;
    }
    // The run of whole pages from here.
    const std::uint64_t run = left & ~kPageMask;
    ZT_RETURN_IF_ERROR(
        StoreRunLocked(pos / kPageSize, data.subspan(done, run)));
    done += run;
  }
  return Status::Ok();
}

Status Device::Impl::Trim(std::uint64_t offset, std::uint64_t length) {
  std::shared_lock lock(mu_);
  if (store_ == nullptr) return Uninitialized();
  ZT_RETURN_IF_ERROR(CheckRange(offset, length, disksize_));
  // Whole pages only: the unaligned head and tail are left as they are.
  const std::uint64_t first = (offset + kPageMask) / kPageSize;
  const std::uint64_t end = (offset + length) / kPageSize;
  for (std::uint64_t i = first; i < end; ++i) {
    ZT_RETURN_IF_ERROR(store_->Discard(i));
  }
  return Status::Ok();
}

Status Device::Impl::WriteZeroes(std::uint64_t offset, std::uint64_t length,
                           bool no_hole) {
  std::shared_lock lock(mu_);
  if (store_ == nullptr) return Uninitialized();
  ZT_RETURN_IF_ERROR(CheckRange(offset, length, disksize_));
  static const std::byte kZeros[kPageSize] = {};
  return ForEachPagePiece(
      offset, length,
      [&](std::uint64_t index, std::size_t in_page, std::size_t n,
          std::uint64_t) -> Status {
        if (n < kPageSize) {
          return store_->StorePartial(index, in_page,
                                      std::span<const std::byte>(kZeros, n));
        }
        if (no_hole) return store_->Store(index, ConstPage(kZeros, kPageSize));
        return store_->Discard(index);
      });
}

Status Device::Impl::Flush() {
  std::shared_lock lock(mu_);
  if (store_ == nullptr) return Uninitialized();
  return Status::Ok();
}

Status Device::Impl::PageStates(std::uint64_t first_page,
                          std::span<SlotState> out) const {
  std::shared_lock lock(mu_);
  if (store_ == nullptr) return Uninitialized();
  return store_->SlotStates(first_page, out);
}

bool Device::Impl::ReadMayWait(std::uint64_t offset,
                               std::uint64_t length) const {
  if (!has_backing_.load(std::memory_order_relaxed) || length == 0) {
    return false;
  }
  std::shared_lock lock(mu_);
  if (store_ == nullptr) return false;
  const std::uint64_t first = offset / kPageSize;
  const std::uint64_t last = (offset + length - 1) / kPageSize;
  return store_->MayReadBacking(first, last - first + 1);
}

bool Device::Impl::ReadMayStall(std::uint64_t offset,
                                std::uint64_t length) const {
  return remote_backing_.load(std::memory_order_relaxed) &&
         ReadMayWait(offset, length);
}

PageStoreStats Device::Impl::Stats() const {
  std::shared_lock lock(mu_);
  if (store_ != nullptr) return store_->Stats();
  PageStoreStats st;
  st.mem_limit = mem_limit_;
  return st;
}

std::string Device::Impl::algorithm() const {
  std::shared_lock lock(mu_);
  return comp_algorithm_;
}

std::size_t Device::Impl::streams() const {
  std::shared_lock lock(mu_);
  if (defaults_.streams != 0) return defaults_.streams;
  return std::max(1u, std::thread::hardware_concurrency());
}

void Device::Impl::NoteMemLimit(const Status& s) {
  if (!defaults_.log || mem_limit_ == 0) return;
  // Made in place and logged under a catch: this runs on the IO path, and
  // neither may throw into a client's request.
  char line[256];
  const auto log = [&](const char* format) noexcept {
    const int n = std::snprintf(line, sizeof line, format, name_.c_str(),
                                static_cast<unsigned long long>(mem_limit_));
    try {
      defaults_.log(std::string_view(
          line, std::min<std::size_t>(n < 0 ? 0 : n, sizeof line - 1)));
    } catch (...) {  // no memory: the line is dropped
    }
  };
  // Only the store's refusals for the limit (page_store_impl.h: over
  // mem_limit, or the preallocated reserve of mem_limit bytes full), not an
  // incompressible page it declines.
  if (s.code() == StatusCode::kResourceExhausted &&
      (s.message() == "over mem_limit" || s.message() == "pool is full")) {
    if (!at_mem_limit_.exchange(true, std::memory_order_relaxed)) {
      mem_limit_checked_ns_.store(platform::MonotonicNs(), std::memory_order_relaxed);
      log("warning: %s: mem_limit reached (%llu bytes): writes fail with "
          "ENOSPC until pages are freed or the limit is raised");
    }
    return;
  }
  if (!s.ok() || !at_mem_limit_.load(std::memory_order_relaxed)) return;
  // Left the limit: once the pool is under 90% of it, checked at most once
  // a second, so that a device at its limit logs one line, not one an IO.
  const std::uint64_t now = platform::MonotonicNs();
  std::uint64_t last = mem_limit_checked_ns_.load(std::memory_order_relaxed);
  if (now - last < 1000000000ull ||
      !mem_limit_checked_ns_.compare_exchange_strong(last, now,
                                                     std::memory_order_relaxed)) {
    return;
  }
  if (store_->Stats().mem_used_total * 10 >= mem_limit_ * 9) return;
  if (at_mem_limit_.exchange(false, std::memory_order_relaxed)) {
    log("%s: below mem_limit again; writes succeed");
  }
}

void Device::Impl::SetNote(std::string key, std::string value) {
  std::lock_guard lock(notes_mu_);
  notes_[std::move(key)] = std::move(value);
}

void Device::Impl::SetNotes(std::map<std::string, std::string> notes) {
  std::lock_guard lock(notes_mu_);
  notes_ = std::move(notes);
}

std::map<std::string, std::string> Device::Impl::notes() const {
  std::lock_guard lock(notes_mu_);
  return notes_;
}

// ---- Device: each public method forwards to its Impl ----

Device::Device(std::string name, DeviceDefaults defaults)
    : impl_(std::make_unique<Impl>(std::move(name), std::move(defaults))) {}

Device::~Device() = default;

Device::ClientRef::~ClientRef() {
  if (d_ != nullptr) d_->impl_->clients_.fetch_sub(1);
}

const std::string& Device::name() const { return impl_->name_; }
std::uint64_t Device::serial() const { return impl_->serial_; }
std::uint64_t Device::store_serial() const {
  return impl_->store_serial_.load(std::memory_order_relaxed);
}
int Device::clients() const { return impl_->clients_.load(); }

Result<Device::ClientRef> Device::Attach() {
  ZT_RETURN_IF_ERROR(impl_->Attach());
  return ClientRef(this);
}

Status Device::Retire() { return impl_->Retire(); }

void Device::SetWatcher(DeviceWatcher* watcher) {
  impl_->watcher_.store(watcher);
}
DeviceWatcher* Device::watcher() const { return impl_->watcher_.load(); }
DeviceWatcher::Report Device::DescribeByWatcher() const {
  const DeviceWatcher* w = watcher();
  return w != nullptr ? w->Describe(*this) : DeviceWatcher::Report{};
}

// The watcher is called with no lock held (ztier/device.h, DeviceWatcher).
Status Device::SetDisksize(std::uint64_t bytes) {
  ZT_RETURN_IF_ERROR(impl_->SetDisksize(bytes));
  // Until the watcher has heard of the store, a Reset or removal is kBusy
  // (Impl::announcing_); ended however OnInitialized returns.
  struct EndAnnouncement {
    Impl* impl;
    ~EndAnnouncement() { impl->Announced(); }
  } end_announcement{impl_.get()};
  if (DeviceWatcher* w = watcher()) w->OnInitialized(*this);
  return Status::Ok();
}
std::uint64_t Device::AlignedDisksize(std::uint64_t bytes) {
  return PageAlignUp(bytes);
}
std::uint64_t Device::disksize() const { return impl_->disksize(); }
bool Device::initialized() const { return impl_->initialized(); }
bool Device::PassesWaiting() const { return impl_->PassesWaiting(); }
Status Device::Reset() {
  DeviceWatcher* w = watcher();
  if (w == nullptr) return impl_->Reset(/*released=*/true);
  // Found uninitialised, nothing is released; one initialised meanwhile is
  // then kBusy rather than reset without the watcher's BeforeRelease.
  if (!initialized()) return impl_->Reset(/*released=*/false);
  ZT_RETURN_IF_ERROR(w->BeforeRelease(*this));
  Status s = impl_->Reset(/*released=*/true);
  if (!s.ok() && initialized()) w->OnInitialized(*this);  // refused after all
  return s;
}
Status Device::SetCompAlgorithm(std::string_view name) {
  return impl_->SetCompAlgorithm(name);
}
std::string Device::ShowCompAlgorithm() const {
  return impl_->ShowCompAlgorithm();
}
Status Device::SetAlgorithmParams(std::string_view params) {
  return impl_->SetAlgorithmParams(params);
}
Status Device::SetMemLimit(std::uint64_t bytes) {
  return impl_->SetMemLimit(bytes);
}
Status Device::ResetMemUsedMax(std::string_view value) {
  return impl_->ResetMemUsedMax(value);
}
Status Device::MarkIdle(std::string_view value) {
  return impl_->MarkIdle(value);
}
Status Device::SetBackingDev(std::string_view path) {
  return impl_->SetBackingDev(path);
}
std::string Device::ShowBackingDev() const { return impl_->ShowBackingDev(); }
Status Device::Writeback(std::string_view tokens, WritebackResult* result) {
  return impl_->Writeback(tokens, result);
}
Status Device::SetWritebackLimitEnable(bool enable) {
  return impl_->SetWritebackLimitEnable(enable);
}
bool Device::writeback_limit_enable() const {
  return impl_->writeback_limit_enable();
}
Status Device::SetWritebackLimit(std::uint64_t pages) {
  return impl_->SetWritebackLimit(pages);
}
std::uint64_t Device::writeback_limit() const {
  return impl_->writeback_limit();
}
Status Device::SetWritebackBatchSize(std::uint64_t n) {
  return impl_->SetWritebackBatchSize(n);
}
std::uint64_t Device::writeback_batch_size() const {
  return impl_->writeback_batch_size();
}
Status Device::SetCompressedWriteback(bool on) {
  return impl_->SetCompressedWriteback(on);
}
bool Device::compressed_writeback() const {
  return impl_->compressed_writeback();
}
std::string Device::ShowBdStat() const { return impl_->ShowBdStat(); }
Status Device::SetRecompAlgorithm(std::string_view tokens) {
  return impl_->SetRecompAlgorithm(tokens);
}
std::string Device::ShowRecompAlgorithm() const {
  return impl_->ShowRecompAlgorithm();
}
Status Device::Recompress(std::string_view tokens, RecompressResult* result,
                          RecompressPace pace) {
  return impl_->Recompress(tokens, result, std::move(pace));
}
Result<DictionaryInfo> Device::TrainDictionary(std::string_view size) {
  return impl_->TrainDictionary(size);
}
std::string Device::ShowBlockState(std::uint64_t first,
                                   std::uint64_t count) const {
  return impl_->ShowBlockState(first, count);
}
std::string Device::recomp_algorithm(int priority) const {
  return impl_->recomp_algorithm(priority);
}
Status Device::Compact(std::uint64_t* pages) { return impl_->Compact(pages); }
bool Device::preallocated() const { return impl_->preallocated(); }
std::uint64_t Device::CompactablePages() const {
  return impl_->CompactablePages();
}
std::string Device::ShowMmStat() const { return impl_->ShowMmStat(); }
std::string Device::ShowIoStat() const { return impl_->ShowIoStat(); }
std::string Device::ShowDebugStat() const { return impl_->ShowDebugStat(); }
Status Device::Read(std::uint64_t offset, std::span<std::byte> out) {
  return impl_->Read(offset, out);
}
Status Device::Write(std::uint64_t offset, std::span<const std::byte> data) {
  return impl_->Write(offset, data);
}
Status Device::WritePages(std::uint64_t offset,
                          std::span<const std::byte> data) {
  return impl_->WritePages(offset, data);
}
Status Device::Trim(std::uint64_t offset, std::uint64_t length) {
  return impl_->Trim(offset, length);
}
Status Device::WriteZeroes(std::uint64_t offset, std::uint64_t length,
                           bool no_hole) {
  return impl_->WriteZeroes(offset, length, no_hole);
}
Status Device::Flush() { return impl_->Flush(); }
Status Device::PageStates(std::uint64_t first_page,
                          std::span<SlotState> out) const {
  return impl_->PageStates(first_page, out);
}
bool Device::ReadMayWait(std::uint64_t offset, std::uint64_t length) const {
  return impl_->ReadMayWait(offset, length);
}
bool Device::ReadMayStall(std::uint64_t offset, std::uint64_t length) const {
  return impl_->ReadMayStall(offset, length);
}
PageStoreStats Device::Stats() const { return impl_->Stats(); }
std::string Device::algorithm() const { return impl_->algorithm(); }
std::size_t Device::streams() const { return impl_->streams(); }
void Device::SetNote(std::string key, std::string value) {
  impl_->SetNote(std::move(key), std::move(value));
}
void Device::SetNotes(std::map<std::string, std::string> notes) {
  impl_->SetNotes(std::move(notes));
}
std::map<std::string, std::string> Device::notes() const {
  return impl_->notes();
}

// ---- DeviceRegistry ----

namespace {

// N of a name "zramN" as HotAdd spells it (decimal digits only, no
// leading zero, at most INT_MAX); none for any other name ("zram007" is not
// zram7, nor "zram-0" zram0: std::from_chars takes a minus sign, and a
// device name may have one).
std::optional<int> ZramId(std::string_view name) {
  if (!name.starts_with("zram")) return std::nullopt;
  name.remove_prefix(4);
  if (name.empty() || name.front() < '0' || name.front() > '9' ||
      (name.size() > 1 && name.front() == '0')) {
    return std::nullopt;
  }
  int n = 0;
  auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), n);
  if (ec != std::errc() || end != name.data() + name.size()) {
    return std::nullopt;
  }
  return n;
}

}  // namespace

struct DeviceRegistry::Impl {
  explicit Impl(DeviceDefaults d) : defaults(std::move(d)) {}
  const DeviceDefaults defaults;
  mutable std::mutex mu;  // guards the members below
  std::map<std::string, std::shared_ptr<Device>, std::less<>> devices;
  DeviceWatcher* watcher = nullptr;  // set on every device added
  // The N of the zramN names in use, so that HotAdd finds the lowest free
  // one in O(log n).
  IdSet zram_ids;
};

DeviceRegistry::DeviceRegistry(DeviceDefaults defaults)
    : impl_(std::make_unique<Impl>(std::move(defaults))) {}

DeviceRegistry::~DeviceRegistry() = default;

Result<std::shared_ptr<Device>> DeviceRegistry::Add(std::string_view name) {
  if (!ValidName(name)) {
    return Err(
        Status::InvalidArgument("bad device name '" + std::string(name) + "'"));
  }
  Impl& m = *impl_;
  std::lock_guard lock(m.mu);
  if (m.devices.contains(name)) {
    return Err(Status::Busy("device '" + std::string(name) + "' exists"));
  }
  auto d = std::make_shared<Device>(std::string(name), m.defaults);
  d->SetWatcher(m.watcher);
  m.devices.emplace(std::string(name), d);
  if (const std::optional<int> id = ZramId(name)) m.zram_ids.Take(*id);
  return d;
}

Result<std::shared_ptr<Device>> DeviceRegistry::HotAdd() {
  Impl& m = *impl_;
  std::lock_guard lock(m.mu);
  const std::optional<int> id = m.zram_ids.TakeLowest();
  if (!id.has_value()) {
    return Err(Status::ResourceExhausted("every zramN name is in use"));
  }
  std::string name = "zram" + std::to_string(*id);
  auto d = std::make_shared<Device>(name, m.defaults);
  d->SetWatcher(m.watcher);
  [[maybe_unused]] const bool added =
      m.devices.emplace(std::move(name), d).second;
  assert(added && "TakeLowest handed out the id of a device there");
  return d;
}

Status DeviceRegistry::Remove(std::string_view name) {
  Impl& m = *impl_;
  const std::shared_ptr<Device> d = Find(name);
  if (d == nullptr) {
    return Status::NotFound("no device '" + std::string(name) + "'");
  }
  // The watcher first, with no lock held (DeviceWatcher). Retire waits for
  // the device's passes (writeback, recompress) to end: not with m.mu
  // held, which every control request, NBD handshake and metrics scrape
  // takes to find its device.
  DeviceWatcher* w = d->watcher();
  if (w != nullptr) ZT_RETURN_IF_ERROR(w->BeforeRelease(*d));
  if (Status s = d->Retire(); !s.ok()) {
    // Refused after all (a client attached meanwhile).
    if (w != nullptr && d->initialized()) w->OnInitialized(*d);
    return s;
  }
  std::lock_guard lock(m.mu);
  auto it = m.devices.find(name);
  if (it == m.devices.end() || it->second != d) {
    // Another removal took it meanwhile.
    return Status::NotFound("no device '" + std::string(name) + "'");
  }
  m.devices.erase(it);
  if (const std::optional<int> id = ZramId(name)) m.zram_ids.GiveBack(*id);
  return Status::Ok();
}

void DeviceRegistry::SetWatcher(DeviceWatcher* watcher) {
  Impl& m = *impl_;
  std::lock_guard lock(m.mu);
  m.watcher = watcher;
  for (const auto& [name, d] : m.devices) d->SetWatcher(watcher);
}

std::shared_ptr<Device> DeviceRegistry::Find(std::string_view name) const {
  Impl& m = *impl_;
  std::lock_guard lock(m.mu);
  auto it = m.devices.find(name);
  return it == m.devices.end() ? nullptr : it->second;
}

std::vector<std::shared_ptr<Device>> DeviceRegistry::List() const {
  Impl& m = *impl_;
  std::lock_guard lock(m.mu);
  std::vector<std::shared_ptr<Device>> out;
  for (const auto& [name, d] : m.devices) out.push_back(d);
  return out;
}

}  // namespace ztier
