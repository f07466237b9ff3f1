// status_report.h: the `status` control operation's report, and its table.
//
// The server answers `status` with JSON (EncodeStatusJson), one object per
// device, sizes in bytes:
//
//   {"version":1,"devices":[
//   {"name":"zram0","algorithm":"lz4","initstate":1,"disksize":1073741824,
//    "orig_data_size":0,"compr_data_size":0,"mem_used_total":0,
//    "mem_limit":0,"mem_used_max":0,"same_pages":0,"huge_pages":0,
//    "streams":8,"clients":0,"bd_count":0,"bd_reads":0,"bd_writes":0,
//    "failed_reads":0,"failed_writes":0,"invalid_io":0,"notify_free":0,
//    "pages_compacted":0,"huge_pages_since":0,"writeback_limit":0,
//    "writeback_limit_enable":0,"incompressible_pages":0,
//    "recompress_attempts":0,"recompressed_pages":0,
//    "dict_id":0,"dict_memory":0,"dict_pages":0,
//    "priorities":[{"priority":0,"algorithm":"lz4","pages":0},
//                  {"priority":1,"algorithm":"zstd","pages":0}],
//    "ublk":"/dev/ublkb0","ublk_queues":4,"ublk_queues_given_up":0,
//    "backing_dev":"none","notes":{"swap-priority":"100"}}
// "priorities" lists the configured priorities only (0, the primary, and
// each recomp_algorithm), with the pool objects stored with each now
// (PageStoreStats::priority_pages). "dict_id" is the trained dictionary
// new stores use (0: none; train_dict), "dict_memory" the bytes the
// dictionaries held take (part of mem_used_total), "dict_pages" the
// objects made with any of them. "ublk" is the device's disk under
// `ztier serve --ublk` ("" for none), "ublk_queues" its queues and
// "ublk_queues_given_up" those that have stopped serving (a ring error, a
// commit refused for good: the kernel fails their IO until the server is
// restarted; the server's log says why).
//   ]}
//
// `ztier status --json` prints it unchanged; `ztier status` decodes it
// (DecodeStatusJson, which ignores unknown keys so that fields can be added,
// and leaves missing ones at zero, for older servers) and prints zramctl's
// table (FormatStatusTable), then the notes (FormatStatusNotes).
//
// Thread safety: pure functions.
#ifndef ZTIER_CTL_STATUS_REPORT_H_
#define ZTIER_CTL_STATUS_REPORT_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "ztier/device.h"
#include "ztier/status.h"

namespace ztier::ctl {

// One configured priority's algorithm and the pages stored with it.
struct PriorityStatus {
  std::uint64_t priority = 0;
  std::string algorithm;
  std::uint64_t pages = 0;
};

struct DeviceStatus {
  std::string name;
  std::string algorithm;
  std::uint64_t initstate = 0;
  std::uint64_t disksize = 0;
  std::uint64_t orig_data_size = 0;   // zramctl DATA
  std::uint64_t compr_data_size = 0;  // zramctl COMPR
  std::uint64_t mem_used_total = 0;   // zramctl TOTAL
  std::uint64_t mem_limit = 0;
  std::uint64_t mem_used_max = 0;
  std::uint64_t same_pages = 0;
  std::uint64_t huge_pages = 0;
  std::uint64_t streams = 0;
  std::uint64_t clients = 0;
  std::string backing_dev = "none";  // as the attribute shows it, no newline
  std::uint64_t bd_count = 0;        // bd_stat, in 4 KiB pages
  std::uint64_t bd_reads = 0;
  std::uint64_t bd_writes = 0;
  // io_stat (ztier has no invalid IO counter: always 0, as its io_stat).
  std::uint64_t failed_reads = 0;
  std::uint64_t failed_writes = 0;
  std::uint64_t invalid_io = 0;
  std::uint64_t notify_free = 0;
  std::uint64_t pages_compacted = 0;   // mm_stat; zramctl MIGRATED
  std::uint64_t huge_pages_since = 0;  // mm_stat
  std::uint64_t writeback_limit = 0;   // 4 KiB pages left
  std::uint64_t writeback_limit_enable = 0;  // 0 or 1
  // From PageStoreStats; attempts, reclaims and refusals are cumulative.
  std::uint64_t incompressible_pages = 0;  // slots marked INCOMPRESSIBLE
  std::uint64_t recompress_attempts = 0;   // slots passes tried
  std::uint64_t recompressed_pages = 0;    // ... and made smaller
  std::uint64_t dict_id = 0;          // the trained dictionary in use; 0: none
  std::uint64_t dict_memory = 0;      // what the dictionaries held take
  std::uint64_t dict_pages = 0;       // objects made with any of them
  std::uint64_t units = 0;            // multi-page objects live (unit_pages)
  std::uint64_t unit_pages = 0;       // pages attached to them
  std::uint64_t units_reclaimed = 0;  // survivors moved out one by one
  std::uint64_t units_reclaim_refused = 0;  // reclaims the pool refused
  std::uint64_t bd_lost = 0;                // backing blocks lost with a remote
  std::string ublk;  // /dev/ublkbN serving it; "": none
  std::uint64_t ublk_queues = 0;
  std::uint64_t ublk_queues_given_up = 0;  // serving nothing any more
  std::vector<PriorityStatus> priorities;
  // Device::notes(): settings a configuration file recorded, by key.
  std::map<std::string, std::string> notes;
};

// A snapshot of every device of `registry`, sorted by name (with what its
// watcher describes: DeviceWatcher::Describe).
std::vector<DeviceStatus> CollectStatus(const DeviceRegistry& registry);

std::string EncodeStatusJson(const std::vector<DeviceStatus>& devices);
// kInvalidArgument when `json` is not a status report.
Result<std::vector<DeviceStatus>> DecodeStatusJson(std::string_view json);

// A size as zramctl prints it (util-linux size_to_human_string with a
// one-letter suffix): "0B", "512B", "4K", "4.5M", "1G", "7.7G".
std::string FormatHumanSize(std::uint64_t bytes);

// The table's columns: zramctl's (util-linux sys-utils/zramctl.c, whose
// --help lists them) plus ztier's CLIENTS:
//   NAME        device name
//   DISKSIZE    limit on the uncompressed amount of data
//   DATA        uncompressed size of stored data (orig_data_size)
//   COMPR       compressed size of stored data (compr_data_size)
//   ALGORITHM   the selected compression algorithm
//   STREAMS     number of concurrent compress operations
//   ZERO-PAGES  empty pages with no allocated memory (same_pages)
//   TOTAL       all memory including allocator fragmentation and metadata
//               overhead (mem_used_total)
//   MEM-LIMIT   memory limit used to store compressed data
//   MEM-USED    peak memory usage to store compressed data (mem_used_max)
//   MIGRATED    number of objects migrated by compaction (pages_compacted)
//   COMP-RATIO  compression ratio: DATA/TOTAL ("%.2f"; 0.00 when TOTAL is 0)
//   MOUNTPOINT  where the device is mounted: the note "mount-point" if any
//   CLIENTS     NBD clients attached (ztier's)
// The default set is zramctl's with CLIENTS in place of MOUNTPOINT:
//   NAME ALGORITHM DISKSIZE DATA COMPR TOTAL STREAMS CLIENTS
inline constexpr std::string_view kStatusColumns[] = {
    "NAME",      "DISKSIZE", "DATA",     "COMPR",      "ALGORITHM",
    "STREAMS",   "ZERO-PAGES", "TOTAL",  "MEM-LIMIT",  "MEM-USED",
    "MIGRATED",  "COMP-RATIO", "MOUNTPOINT", "CLIENTS"};

struct TableOptions {
  std::vector<std::string> columns;  // names from kStatusColumns; empty: default
  bool bytes = false;        // sizes in bytes, not "4.5M" (zramctl -b)
  bool no_headings = false;  // no header line (zramctl -n)
  // zramctl --raw: no alignment, one space between cells; a space, '\' or
  // control character in a cell is written as \xHH (libsmartcols' raw).
  bool raw = false;
};

// Parses zramctl's -o LIST: comma-separated column names, any case; a
// leading '+' adds them to the default set. kInvalidArgument naming an
// unknown column, or for an empty list.
Result<std::vector<std::string>> ParseStatusColumns(std::string_view list);

// The table: text columns left-aligned, numbers right-aligned, one space
// between columns, trailing spaces trimmed. Empty string when there are no
// devices (as zramctl prints nothing).
std::string FormatStatusTable(const std::vector<DeviceStatus>& devices,
                              const TableOptions& options = {});

// One line per device that has notes: "zram0: fs-type=ext4
// swap-priority=100\n" (keys sorted). Empty when no device has any.
std::string FormatStatusNotes(const std::vector<DeviceStatus>& devices);

// One line per device with a recompression algorithm: "zram0:
// recomp_algorithm #1 zstd (120 pages), #3 deflate (0 pages); 7
// recompressed, 2 incompressible\n", and one per device with a trained
// dictionary: "zram0: dictionary 2 in use; 311296 bytes; 5120 pages made
// with dictionaries\n". Empty when no device has either.
std::string FormatStatusRecompression(const std::vector<DeviceStatus>& devices);

// One line per device with a ublk disk: "zram0: /dev/ublkb0, 4 queues\n";
// when queues have given up, "zram0: /dev/ublkb0: 1 of 4 queues given up,
// their IO fails (the server's log says why); restart the server to serve
// them again\n". Empty when no device has a disk.
std::string FormatStatusUblk(const std::vector<DeviceStatus>& devices);

}  // namespace ztier::ctl

#endif  // ZTIER_CTL_STATUS_REPORT_H_
