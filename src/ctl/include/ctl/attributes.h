// attributes.h: zram's sysfs attributes and zram-control operations, served
// from a DeviceRegistry (the control server's request handler, without IO).
//
// Device attributes (request device = "zramN"):
//   show+store  disksize, comp_algorithm, recomp_algorithm, backing_dev,
//               writeback_limit, writeback_limit_enable,
//               writeback_batch_size, compressed_writeback
//   show only   initstate, mm_stat, io_stat, debug_stat, bd_stat,
//               block_state (zram's debugfs file)
//   store only  reset, algorithm_params, mem_limit, mem_used_max, idle,
//               compact, writeback, recompress, train_dict
// zram-control operations (request device = ""):
//   show only   hot_add (creates the lowest free zramN, replies "N\n"),
//               status (the JSON report of status_report.h)
//   store only  hot_remove (value "N" for zramN, or a device name)
//
// Errors carry the errno name zram's sysfs write would fail with:
//   ENODEV  no such device (also hot_remove of an unknown device)
//   ENOENT  no such attribute; algorithm_params dict= file missing;
//           backing_dev path (and its directory) missing
//   EACCES  show of a store-only attribute, or store to a show-only one
//           (as sysfs refuses such an open())
//   backing_dev, as zram's backing_dev_store(): a path that cannot be
//           opened read-write gets open()'s errno name (EACCES, EROFS...)
//   E2BIG   comp_algorithm name of 128 bytes or more
//   writeback, as zram's: not initialised EINVAL, no backing_dev ENODEV,
//           page index past the end ERANGE, an IO error or writeback_limit
//           reached EIO, backing store full ENOSPC
//   recomp_algorithm, recompress, algorithm_params priority=/algo=, as
//           zram's: malformed or unknown EINVAL (recompress of an
//           uninitialised device too), a number past its type ERANGE,
//           after init EBUSY; a recompress pass out of pool memory ENOMEM
//   E2BIG   block_state, status, or any reply longer than the reply limit
//           (kMaxReplyTextBytes); hot_add has no cap, as zram's
//   others  from the device (StatusCodeErrnoName): EINVAL, EBUSY, ENOMEM...
//
// Thread safety: HandleRequest may be called concurrently; the devices lock
// themselves.
#ifndef ZTIER_CTL_ATTRIBUTES_H_
#define ZTIER_CTL_ATTRIBUTES_H_

#include <string_view>
#include <vector>

#include "ctl/protocol.h"
#include "ztier/device.h"

namespace ztier::ctl {

WireReply HandleRequest(DeviceRegistry& registry, const WireRequest& request);

struct AttributeInfo {
  std::string_view name;
  bool show;
  bool store;
  bool control;  // a zram-control operation (no device)
  std::string_view help;
};

// Every attribute and operation, for usage texts.
const std::vector<AttributeInfo>& Attributes();

}  // namespace ztier::ctl

#endif  // ZTIER_CTL_ATTRIBUTES_H_
