// metrics.h: ztier's state as Prometheus metrics, in the text exposition
// format version 0.0.4 (prometheus.io/docs/instrumenting/exposition_formats).
//
// Per device (label device="zramN"): every column of zram's mm_stat, io_stat,
// bd_stat and debug_stat as ztier_zram_<column>[_<unit>][_total], taken from
// the very texts Device::ShowMmStat() etc. give (so each value equals what
// `ztier ctl mm_stat` prints), plus disksize, initstate, clients and the
// compression algorithm. An uninitialised device exports what its Show*()
// texts say: zeros (and mm_stat's mem_limit, which may be set before init).
// Server-wide, when an NBD server is given: connections open, accepted and
// refused, requests by command, error replies by errno, and READ/WRITE
// latency histograms (nbd/nbd_counters.h). docs/metrics.md lists every
// metric, its type, and its zram source column.
//
// Every family has its HELP and TYPE lines, and its samples together, in a
// fixed order (families as listed in docs/metrics.md, devices by name);
// `promtool check metrics` accepts the output with no lint complaints.
//
// Thread safety: RenderMetrics may run concurrently with IO and attribute
// changes; it takes each device's shared lock once per Show*() text, so the
// columns of one file are consistent with each other but files are not
// (nor is a device with the NBD counters). It waits while a Reset drops a
// device's store; not for a SetDisksize making one, nor for a reset's trim
// of a remote backing store (both run with the device's lock released).
#ifndef ZTIER_CTL_METRICS_H_
#define ZTIER_CTL_METRICS_H_

#include <string>
#include <string_view>

#include "ztier/device.h"

namespace ztier::nbd {
class NbdServer;
}

namespace ztier::ctl {

// The Content-Type of RenderMetrics' output over HTTP.
inline constexpr std::string_view kMetricsContentType =
    "text/plain; version=0.0.4; charset=utf-8";

// The whole exposition: every device of `registry`, and the NBD server's
// metrics when `nbd` is not null. Ends with a newline.
std::string RenderMetrics(const DeviceRegistry& registry,
                          const nbd::NbdServer* nbd);

}  // namespace ztier::ctl

#endif  // ZTIER_CTL_METRICS_H_
