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
//    "backing_dev":"none"}
//   ]}
//
// `ztier status --json` prints it unchanged; `ztier status` decodes it
// (DecodeStatusJson, which ignores unknown keys so that fields can be added)
// and prints zramctl's table (FormatStatusTable).
//
// Thread safety: pure functions.
#ifndef ZTIER_CTL_STATUS_REPORT_H_
#define ZTIER_CTL_STATUS_REPORT_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ztier/device.h"
#include "ztier/status.h"

namespace ztier::ctl {

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
};

// A snapshot of every device of `registry`, sorted by name.
std::vector<DeviceStatus> CollectStatus(const DeviceRegistry& registry);

std::string EncodeStatusJson(const std::vector<DeviceStatus>& devices);
// kInvalidArgument when `json` is not a status report.
Result<std::vector<DeviceStatus>> DecodeStatusJson(std::string_view json);

// A size as zramctl prints it (util-linux size_to_human_string with a
// one-letter suffix): "0B", "512B", "4K", "4.5M", "1G", "7.7G".
std::string FormatHumanSize(std::uint64_t bytes);

// zramctl's table with CLIENTS in place of MOUNTPOINT:
//   NAME  ALGORITHM DISKSIZE DATA COMPR TOTAL STREAMS CLIENTS
// Text columns left-aligned, numbers right-aligned, one space between
// columns. Empty string when there are no devices (as zramctl prints
// nothing).
std::string FormatStatusTable(const std::vector<DeviceStatus>& devices);

}  // namespace ztier::ctl

#endif  // ZTIER_CTL_STATUS_REPORT_H_
