// attributes.cc: zram's attributes over a DeviceRegistry (see attributes.h).
#include "ctl/attributes.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

#include "ctl/status_report.h"
#include "ztier/recompress_tokens.h"

namespace ztier::ctl {
namespace {

WireReply Ok(std::string text = {}) {
  WireReply r;
  r.ok = true;
  r.text = std::move(text);
  return r;
}

WireReply Error(std::string_view errno_name, std::string message) {
  WireReply r;
  r.errno_name = std::string(errno_name);
  r.message = std::move(message);
  return r;
}

// A store's reply: the errno of the system call that failed where `s`
// carries one (open()'s ENOENT, EACCES, EROFS for a backing file that a
// disksize store cannot open), as `ztier serve` names it when the same
// store fails at its start-up (ErrnoNameOf); else the errno zram gives
// the code (StatusCodeErrnoName: a removed device's kNotFound is ENODEV).
WireReply FromStatus(const Status& s) {
  if (s.ok()) return Ok();
  return Error(ErrnoNameOf(s), s.message());
}

// The kernel's kstrto*() accept one trailing newline.
std::string_view StripNewline(std::string_view v) {
  if (!v.empty() && v.back() == '\n') v.remove_suffix(1);
  return v;
}

// kstrtoull(buf, 10) limited to `max` (kstrtou16, kstrtouint are this
// with 0xffff, 0xffffffff): optional '+', decimal digits, one trailing
// newline. EINVAL for a malformed number, ERANGE above max.
WireReply ParseUnsigned(std::string_view v, std::uint64_t max,
                        std::uint64_t* out) {
  v = StripNewline(v);
  if (!v.empty() && v.front() == '+') v.remove_prefix(1);
  std::uint64_t n = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (v.empty() || p != v.data() + v.size()) {
    return Error("EINVAL", "not a number: '" + std::string(v) + "'");
  }
  if (ec == std::errc::result_out_of_range || n > max) {
    return Error("ERANGE", "number out of range: '" + std::string(v) + "'");
  }
  *out = n;
  return Ok();
}

// kstrtou16(buf, 10).
WireReply ParseU16(std::string_view v, std::uint16_t* out) {
  std::uint64_t n = 0;
  if (WireReply r = ParseUnsigned(v, 0xffff, &n); !r.ok) return r;
  *out = static_cast<std::uint16_t>(n);
  return Ok();
}

// The kernel's kstrtobool (lib/kstrtox.c), for every boolean attribute:
// only the first characters count: y/Y/t/T/1 true, n/N/f/F/0 false, o/O
// followed by n/N true or f/F false ("on", "off"); anything else (empty
// included) EINVAL.
WireReply ParseBool(std::string_view v, bool* out) {
  const auto lower = [&](std::size_t i) {
    return i < v.size() ? static_cast<char>(
                              std::tolower(static_cast<unsigned char>(v[i])))
                        : '\0';
  };
  switch (lower(0)) {
    case 'y':
    case 't':
    case '1':
      *out = true;
      return Ok();
    case 'n':
    case 'f':
    case '0':
      *out = false;
      return Ok();
    case 'o':
      if (lower(1) == 'n' || lower(1) == 'f') {
        *out = lower(1) == 'n';
        return Ok();
      }
      break;
    default:
      break;
  }
  return Error("EINVAL", "not a boolean (0/1, y/n, on/off): '" +
                             std::string(StripNewline(v)) + "'");
}

char* U64(char (&buf)[32], std::uint64_t v) {
  std::snprintf(buf, sizeof(buf), "%llu\n", static_cast<unsigned long long>(v));
  return buf;
}

// ---- device attributes ----

using ShowFn = WireReply (*)(Device& d);
using StoreFn = WireReply (*)(Device& d, std::string_view value);

WireReply ShowDisksize(Device& d) {
  char buf[32];
  return Ok(U64(buf, d.disksize()));
}
// A backing_dev that cannot be opened, created or sized names the errno of
// the call that failed (FromStatus), as backing_dev_store() names
// filp_open()'s. Anything else answers what zram's disksize_store() does,
// by its code: EINVAL (a dict= file that cannot be read, as
// comp_params_store() answers it), ENOMEM, EBUSY; never an errno from
// deep inside (mmap's EAGAIN under a locked-memory limit, a dict= file's
// ENOENT), which zram's disksize never answers.
WireReply StoreDisksize(Device& d, std::string_view v) {
  auto size = ParseSize(v);
  if (!size) return FromStatus(size.error());
  const Status s = d.SetDisksize(*size);
  if (s.ok() || s.message().starts_with("backing_dev: ")) return FromStatus(s);
  return Error(StatusCodeErrnoName(s.code()), s.message());
}
WireReply ShowInitstate(Device& d) { return Ok(d.initialized() ? "1\n" : "0\n"); }
WireReply StoreReset(Device& d, std::string_view v) {
  std::uint16_t n = 0;
  if (WireReply r = ParseU16(v, &n); !r.ok) return r;
  if (n == 0) return Error("EINVAL", "reset takes a nonzero number");
  return FromStatus(d.Reset());
}
WireReply ShowCompAlgorithm(Device& d) { return Ok(d.ShowCompAlgorithm()); }
WireReply StoreCompAlgorithm(Device& d, std::string_view v) {
  // zram copies the name into a 128-byte buffer with strscpy() first.
  if (v.size() >= 128) return Error("E2BIG", "algorithm name too long");
  return FromStatus(d.SetCompAlgorithm(v));
}
WireReply StoreAlgorithmParams(Device& d, std::string_view v) {
  const Status s = d.SetAlgorithmParams(v);
  // An errno here is a dict= file that could not be read
  // (platform/read_file.h): zram's comp_params_store() answers EINVAL for
  // any failure of kernel_read_file_from_path() (sz < 0), whatever its
  // errno.
  if (s.posix_errno() != 0) return Error("EINVAL", s.message());
  return FromStatus(s);
}
WireReply StoreMemLimit(Device& d, std::string_view v) {
  auto size = ParseSize(v);
  if (!size) return FromStatus(size.error());
  return FromStatus(d.SetMemLimit(*size));
}
WireReply StoreMemUsedMax(Device& d, std::string_view v) {
  const Status s = d.ResetMemUsedMax(v);
  // zram accepts "0" on an uninitialised device and does nothing; Device
  // checks the value first, so kFailedPrecondition means exactly that case.
  if (s.code() == StatusCode::kFailedPrecondition) return Ok();
  return FromStatus(s);
}
WireReply StoreIdle(Device& d, std::string_view v) {
  return FromStatus(d.MarkIdle(v));
}
WireReply StoreCompact(Device& d, std::string_view) {
  return FromStatus(d.Compact());
}
WireReply ShowBackingDev(Device& d) { return Ok(d.ShowBackingDev()); }
// A path that is not there, or cannot be opened: open()'s own errno, as
// filp_open()'s error is backing_dev_store()'s (ENOENT, EACCES, EROFS;
// FromStatus).
WireReply StoreBackingDev(Device& d, std::string_view v) {
  return FromStatus(d.SetBackingDev(v));
}
// zram's writeback_store(): uninitialised EINVAL, no backing_dev ENODEV, bad
// index ERANGE, malformed EINVAL; an IO error or writeback_limit reached EIO;
// the backing store (or its file system) full ENOSPC, as the pass reports
// it (WritebackResult::full); no memory for the pass (its writer's
// buffers, or an IO's sealing) ENOMEM, as zram's failed allocations.
WireReply StoreWriteback(Device& d, std::string_view v) {
  WritebackResult result;
  const Status s = d.Writeback(v, &result);
  if (s.ok()) return Ok();
  std::string_view errno_name = StatusCodeErrnoName(s.code());
  std::string message = s.message();
  switch (s.code()) {
    case StatusCode::kFailedPrecondition:
      errno_name = "EINVAL";
      break;
    case StatusCode::kNotFound:
      errno_name = "ENODEV";
      break;
    case StatusCode::kOutOfRange:
      errno_name = "ERANGE";
      break;
    case StatusCode::kIoError:
    case StatusCode::kCorruption:
      errno_name = "EIO";
      break;
    case StatusCode::kResourceExhausted:
      // Full when the pass that ran says so; a pass that could not start
      // (result untouched), or could not seal its IOs, had no memory.
      errno_name = result.full ? "ENOSPC" : "ENOMEM";
      break;
    default:
      break;
  }
  if (result.candidates != 0) {
    message += " (" + std::to_string(result.written) + " of " +
               std::to_string(result.candidates) + " pages written, " +
               std::to_string(result.failed) + " failed)";
  }
  return Error(errno_name, std::move(message));
}
WireReply ShowWritebackLimit(Device& d) {
  char buf[32];
  return Ok(U64(buf, d.writeback_limit()));
}
WireReply StoreWritebackLimit(Device& d, std::string_view v) {
  std::uint64_t n = 0;
  if (WireReply r = ParseUnsigned(v, UINT64_MAX, &n); !r.ok) return r;
  return FromStatus(d.SetWritebackLimit(n));
}
WireReply ShowWritebackLimitEnable(Device& d) {
  return Ok(d.writeback_limit_enable() ? "1\n" : "0\n");
}
WireReply StoreWritebackLimitEnable(Device& d, std::string_view v) {
  // As zram's writeback_limit_enable_store() (zram_drv.c): kstrtoull, any
  // nonzero number enables. The kernel's own attribute takes no "y"/"on",
  // and a script written for it must work unchanged here.
  std::uint64_t n = 0;
  if (WireReply r = ParseUnsigned(v, UINT64_MAX, &n); !r.ok) return r;
  return FromStatus(d.SetWritebackLimitEnable(n != 0));
}
WireReply ShowWritebackBatchSize(Device& d) {
  char buf[32];
  return Ok(U64(buf, d.writeback_batch_size()));
}
WireReply StoreWritebackBatchSize(Device& d, std::string_view v) {
  std::uint64_t n = 0;  // kstrtouint
  if (WireReply r = ParseUnsigned(v, 0xffffffff, &n); !r.ok) return r;
  return FromStatus(d.SetWritebackBatchSize(n));
}
WireReply ShowCompressedWriteback(Device& d) {
  return Ok(d.compressed_writeback() ? "1\n" : "0\n");
}
WireReply StoreCompressedWriteback(Device& d, std::string_view v) {
  bool on = false;
  if (WireReply r = ParseBool(v, &on); !r.ok) return r;
  return FromStatus(d.SetCompressedWriteback(on));
}
WireReply ShowRecompAlgorithm(Device& d) { return Ok(d.ShowRecompAlgorithm()); }
WireReply StoreRecompAlgorithm(Device& d, std::string_view v) {
  // As comp_algorithm: __comp_algorithm_store() refuses a name of 128
  // bytes or more with E2BIG, after recomp_algorithm_store()'s own checks
  // of the tokens (which SetRecompAlgorithm makes with their errors).
  if (auto t = ParseRecompAlgorithmTokens(v); t && t->algo.size() >= 128) {
    return Error("E2BIG", "algorithm name too long");
  }
  return FromStatus(d.SetRecompAlgorithm(v));
}
// zram's recompress_store(): every refusal is EINVAL (not initialised
// included), a number past its type ERANGE; a pass that ran out of pool
// memory ENOMEM, as recompress_slot()'s failed zs_malloc.
WireReply StoreRecompress(Device& d, std::string_view v) {
  RecompressResult result;
  const Status s = d.Recompress(v, &result);
  if (s.ok()) return Ok();
  std::string message = s.message();
  if (s.code() == StatusCode::kResourceExhausted) {  // ENOMEM
    message += " (" + std::to_string(result.recompressed) + " of " +
               std::to_string(result.candidates) + " pages recompressed)";
  }
  return Error(StatusCodeErrnoName(s.code()), std::move(message));
}
// zram's debugfs block_state, read here through the control protocol: a
// listing longer than its reply limit (kMaxReplyTextBytes, 16 MiB: 419,430
// slots of 40 bytes, PageStore::FormatBlockState's
// "%12llu %12u.%06d %c%c%c%c%c%c\n") is E2BIG, found without building it
// whole.
// Before disksize it is EINVAL, as read_block_state() in zram_drv.c.
WireReply ShowBlockState(Device& d) {
  if (!d.initialized()) {
    return Error("EINVAL", "block_state: device is not initialised");
  }
  constexpr std::uint64_t kChunk = 1 << 16;  // slots formatted at a time
  const std::uint64_t pages = d.disksize() / kPageSize;
  std::string out;
  for (std::uint64_t first = 0; first < pages; first += kChunk) {
    out += d.ShowBlockState(first, kChunk);
    if (out.size() > kMaxReplyTextBytes) {
      return Error("E2BIG",
                   "block_state lists more than the control protocol's " +
                       std::to_string(kMaxReplyTextBytes) +
                       "-byte reply limit (slot " + std::to_string(first) +
                       " of " + std::to_string(pages) + ")");
    }
  }
  return Ok(std::move(out));
}
// train_dict: replies with what it made, one line.
WireReply StoreTrainDict(Device& d, std::string_view v) {
  auto info = d.TrainDictionary(v);  // the device trims it
  if (!info) return FromStatus(info.error());
  return Ok("dictionary " + std::to_string(info->id) + ": " +
            std::to_string(info->bytes) + " bytes, trained on " +
            std::to_string(info->samples) + " pages (" +
            std::to_string(info->sample_bytes_without) + " bytes compressed, " +
            std::to_string(info->sample_bytes_with) + " with it), " +
            std::to_string(info->memory) + " bytes of memory\n");
}
WireReply ShowBdStat(Device& d) { return Ok(d.ShowBdStat()); }
WireReply ShowMmStat(Device& d) { return Ok(d.ShowMmStat()); }
WireReply ShowIoStat(Device& d) { return Ok(d.ShowIoStat()); }
WireReply ShowDebugStat(Device& d) { return Ok(d.ShowDebugStat()); }

struct DeviceAttribute {
  std::string_view name;
  ShowFn show;
  StoreFn store;
  std::string_view help;
};

constexpr DeviceAttribute kDeviceAttributes[] = {
    {"disksize", ShowDisksize, StoreDisksize,
     "device size in bytes; store a size (K/M/G suffixes) once to initialise"},
    {"initstate", ShowInitstate, nullptr, "1 once disksize is set, else 0"},
    {"reset", nullptr, StoreReset,
     "store a nonzero number to free everything (EBUSY with clients)"},
    {"comp_algorithm", ShowCompAlgorithm, StoreCompAlgorithm,
     "algorithms with [current]; store a name before disksize"},
    {"algorithm_params", nullptr, StoreAlgorithmParams,
     "store level=N, dict=PATH [priority=N|algo=NAME] before disksize"},
    {"recomp_algorithm", ShowRecompAlgorithm, StoreRecompAlgorithm,
     "secondary algorithms; store 'algo=NAME [priority=1..3]' before "
     "disksize"},
    {"recompress", nullptr, StoreRecompress,
     "[type=idle|huge|huge_idle] [max_pages=N] [threshold=BYTES] "
     "[algo=NAME|priority=N]"},
    {"train_dict", nullptr, StoreTrainDict,
     "store a size (default 16K; K/M suffixes) to train a dictionary on "
     "the stored pages (zstd, lz4) and use it for new stores"},
    {"mem_limit", nullptr, StoreMemLimit,
     "store the pool memory limit (K/M/G suffixes; 0 = none)"},
    {"mem_used_max", nullptr, StoreMemUsedMax,
     "store 0 to reset the peak pool memory to the current use"},
    {"idle", nullptr, StoreIdle,
     "store 'all' or an age in seconds to mark pages idle"},
    {"compact", nullptr, StoreCompact, "store anything to compact the pool"},
    {"backing_dev", ShowBackingDev, StoreBackingDev,
     "file or block device for writeback, or none; store before disksize"},
    {"writeback", nullptr, StoreWriteback,
     "store idle, huge, huge_idle, incompressible, page_index=N or "
     "page_indexes=LO-HI"},
    {"writeback_limit", ShowWritebackLimit, StoreWritebackLimit,
     "pages (4 KiB) writeback may still write when the limit is enabled"},
    {"writeback_limit_enable", ShowWritebackLimitEnable,
     StoreWritebackLimitEnable, "1: writeback stops when writeback_limit is 0"},
    {"writeback_batch_size", ShowWritebackBatchSize, StoreWritebackBatchSize,
     "writeback IOs in flight at once (default 32, at most 1024)"},
    {"compressed_writeback", ShowCompressedWriteback, StoreCompressedWriteback,
     "1: write pages back compressed; store before disksize"},
    {"mm_stat", ShowMmStat, nullptr, "memory statistics (9 columns)"},
    {"io_stat", ShowIoStat, nullptr, "failed reads/writes, notify_free"},
    {"debug_stat", ShowDebugStat, nullptr, "version and miss_free"},
    {"bd_stat", ShowBdStat, nullptr,
     "backing store pages in use, read and written (4 KiB units)"},
    {"block_state", ShowBlockState, nullptr,
     "one line per stored page: index, access time, flags swhirn"},
};

// ---- zram-control ----

WireReply HotAdd(DeviceRegistry& registry) {
  auto d = registry.HotAdd();
  if (!d) return FromStatus(d.error());
  std::string_view name = (*d)->name();
  if (name.starts_with("zram")) name.remove_prefix(4);
  return Ok(std::string(name) + "\n");
}

WireReply HotRemove(DeviceRegistry& registry, std::string_view value) {
  std::string_view v = StripNewline(value);
  // kstrtoint(buf, 10): an optional sign, then decimal digits.
  std::string_view digits = v;
  const bool negative = !digits.empty() && digits.front() == '-';
  if (!digits.empty() && (digits.front() == '+' || negative)) {
    digits.remove_prefix(1);
  }
  const bool numeric = !digits.empty() &&
                       std::all_of(digits.begin(), digits.end(),
                                   [](char c) { return c >= '0' && c <= '9'; });
  std::string name(v);
  if (numeric) {
    // "007" names zram7, as kstrtoint reads it; past INT_MAX (INT_MIN's
    // magnitude when negative) it is ERANGE; a negative id is EINVAL, as
    // hot_remove_store()'s dev_id < 0.
    std::uint64_t n = 0;
    const std::uint64_t max = negative ? std::uint64_t{INT_MAX} + 1 : INT_MAX;
    if (WireReply r = ParseUnsigned(digits, max, &n); !r.ok) return r;
    if (negative && n != 0) {
      return Error("EINVAL", "device number must not be negative");
    }
    name = "zram" + std::to_string(n);
  }
  return FromStatus(registry.Remove(name));
}

// hot_add has no cap, as zram's (zram_add() takes any free id), so the
// report of enough devices is past the reply limit: E2BIG, saying how to
// read them, rather than a reply every client refuses.
WireReply ShowStatus(DeviceRegistry& registry) {
  const std::vector<DeviceStatus> devices = CollectStatus(registry);
  std::string json = EncodeStatusJson(devices);
  if (json.size() > kMaxReplyTextBytes) {
    return Error("E2BIG",
                 "the status of " + std::to_string(devices.size()) +
                     " devices is " + std::to_string(json.size()) +
                     " bytes, past the control protocol's " +
                     std::to_string(kMaxReplyTextBytes) +
                     "-byte reply limit; `ztier ctl zramN ATTRIBUTE` reads "
                     "one device's, and hot_remove takes unused devices "
                     "away");
  }
  return Ok(std::move(json));
}

WireReply WrongDirection(std::string_view name, bool has_value) {
  return Error("EACCES", "attribute '" + std::string(name) + "' is " +
                            (has_value ? "read-only (show it without a value)"
                                       : "write-only (store a value)"));
}

WireReply HandleControl(DeviceRegistry& registry, const WireRequest& req) {
  const bool store = req.value.has_value();
  const std::string& a = req.attribute;
  if (a == "hot_add" || a == "status") {
    if (store) return WrongDirection(a, true);
    return a == "hot_add" ? HotAdd(registry) : ShowStatus(registry);
  }
  if (a == "hot_remove") {
    if (!store) return WrongDirection(a, false);
    return HotRemove(registry, *req.value);
  }
  return Error("ENOENT", "no control operation '" + a +
                             "' (hot_add, hot_remove, status)");
}

WireReply Dispatch(DeviceRegistry& registry, const WireRequest& req) {
  if (req.device.empty()) return HandleControl(registry, req);
  const std::shared_ptr<Device> device = registry.Find(req.device);
  if (device == nullptr) {
    // Say what there is, and how to make one (`ztier ctl zram1 disksize
    // 1G` before a hot_add lands here); a long list is cut by EncodeError.
    std::string names;
    for (const std::shared_ptr<Device>& d : registry.List()) {
      names += names.empty() ? "" : " ";
      names += d->name();
    }
    return Error("ENODEV", "no device '" + req.device + "' (devices: " +
                               (names.empty() ? "none" : names) +
                               "; `ztier ctl hot_add` adds the next zramN)");
  }
  for (const DeviceAttribute& a : kDeviceAttributes) {
    if (a.name != req.attribute) continue;
    if (req.value.has_value()) {
      if (a.store == nullptr) return WrongDirection(a.name, true);
      return a.store(*device, *req.value);
    }
    if (a.show == nullptr) return WrongDirection(a.name, false);
    return a.show(*device);
  }
  return Error("ENOENT", "device '" + req.device + "' has no attribute '" +
                             req.attribute +
                             "' (`ztier ctl --help` lists them)");
}

}  // namespace

WireReply HandleRequest(DeviceRegistry& registry, const WireRequest& req) {
  WireReply r = Dispatch(registry, req);
  // A reply past the limit is one no client takes (ParseReply): E2BIG
  // instead (block_state and status say more, before this).
  if (r.ok && r.text.size() > kMaxReplyTextBytes) {
    return Error("E2BIG", "the reply to '" + req.attribute + "' is " +
                              std::to_string(r.text.size()) +
                              " bytes, past the control protocol's " +
                              std::to_string(kMaxReplyTextBytes) +
                              "-byte reply limit");
  }
  return r;
}

const std::vector<AttributeInfo>& Attributes() {
  static const std::vector<AttributeInfo> list = [] {
    std::vector<AttributeInfo> out;
    for (const DeviceAttribute& a : kDeviceAttributes) {
      out.push_back({a.name, a.show != nullptr, a.store != nullptr, false,
                     a.help});
    }
    out.push_back({"hot_add", true, false, true,
                   "add the lowest free zramN; prints N"});
    out.push_back({"hot_remove", false, true, true,
                   "store N (or a name) to remove zramN (EBUSY with clients)"});
    out.push_back({"status", true, false, true,
                   "JSON report of every device (see `ztier status`)"});
    return out;
  }();
  return list;
}

}  // namespace ztier::ctl
