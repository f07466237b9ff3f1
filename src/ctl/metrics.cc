// metrics.cc: the Prometheus text exposition (contract in metrics.h).
//
// The zram columns are parsed back from Device::Show*() rather than read
// from Device::Stats(): the texts are what `ztier ctl` and the kernel show,
// so the metrics cannot drift from them (metrics_test checks every column
// of each text against its sample; a column added without a name here is
// left out).
#include "metrics.h"

#include <array>
#include <charconv>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "nbd/nbd_counters.h"
#include "nbd/nbd_server.h"

namespace ztier::ctl {
namespace {

constexpr std::string_view kGauge = "gauge";
constexpr std::string_view kCounter = "counter";

// One column of a zram stat file: its metric name (after "ztier_zram_"),
// type, and help. Names follow zram.rst's column names, with a unit suffix
// and _total for counters, as promtool's lint wants.
struct Column {
  std::string_view name;
  std::string_view type;
  std::string_view help;
};

// Documentation/admin-guide/blockdev/zram.rst, "mm_stat", in file order.
constexpr Column kMmStat[] = {
    {"orig_data_size_bytes", kGauge,
     "mm_stat orig_data_size: uncompressed size of the data stored "
     "(same-filled and written-back pages included)."},
    {"compr_data_size_bytes", kGauge,
     "mm_stat compr_data_size: compressed size of the data stored (huge pages "
     "count whole)."},
    {"mem_used_total_bytes", kGauge,
     "mm_stat mem_used_total: memory the pool holds for the data, "
     "fragmentation and metadata included."},
    {"mem_limit_bytes", kGauge,
     "mm_stat mem_limit: the most memory the pool may use (0: no limit)."},
    {"mem_used_max_bytes", kGauge,
     "mm_stat mem_used_max: the most memory the pool has used (reset by "
     "writing 0 to mem_used_max)."},
    {"same_pages", kGauge,
     "mm_stat same_pages: pages filled with one repeated word, stored without "
     "pool memory."},
    {"pages_compacted_total", kCounter,
     "mm_stat pages_compacted: pool pages freed by compaction."},
    {"huge_pages", kGauge,
     "mm_stat huge_pages: pages stored uncompressed (incompressible)."},
    {"huge_pages_since_total", kCounter,
     "mm_stat huge_pages_since: pages stored uncompressed since the device was "
     "initialised."},
};

// zram.rst, "io_stat".
constexpr Column kIoStat[] = {
    {"failed_reads_total", kCounter,
     "io_stat failed_reads: reads that failed."},
    {"failed_writes_total", kCounter,
     "io_stat failed_writes: writes that failed."},
    {"invalid_io_total", kCounter,
     "io_stat invalid_io: always 0 (the kernel no longer counts it; kept for "
     "the column)."},
    {"notify_free_total", kCounter,
     "io_stat notify_free: pages freed by discard or a swap slot free "
     "notification."},
};

// zram.rst, "bd_stat": 4 KiB units, as the kernel's FOUR_K().
constexpr Column kBdStat[] = {
    {"bd_count_pages", kGauge,
     "bd_stat bd_count: 4 KiB pages now stored on the backing device."},
    {"bd_reads_pages_total", kCounter,
     "bd_stat bd_reads: 4 KiB pages read from the backing device."},
    {"bd_writes_pages_total", kCounter,
     "bd_stat bd_writes: 4 KiB pages written to the backing device."},
};

// debug_stat: "version: 1" then writestall (always 0 since Linux 6.12) and
// miss_free.
constexpr Column kDebugStat[] = {
    {"debug_stat_version", kGauge,
     "debug_stat version: the format version of debug_stat."},
    {"writestall_total", kCounter,
     "debug_stat writestall: always 0 (the kernel no longer counts it; kept "
     "for the column)."},
    {"miss_free_total", kCounter,
     "debug_stat miss_free: slot free notifications that found the slot busy "
     "(the slot is freed on its next write)."},
};

// A file's columns: the numbers of `text` in order, skipping a "name:" token
// (debug_stat's "version:"). Missing or malformed columns read 0, and
// columns past N are dropped: a scrape never stops the server, whatever a
// Show*() text holds (metrics_test checks each against its file).
// Unsigned, as the files print them: mem_limit may be any 64-bit value.
template <std::size_t N>
std::array<std::uint64_t, N> ParseColumns(std::string_view text) {
  std::array<std::uint64_t, N> out{};
  std::size_t n = 0;
  std::size_t i = 0;
  while (i < text.size() && n < N) {
    while (i < text.size() &&
           (text[i] == ' ' || text[i] == '\n' || text[i] == '\t'))
      ++i;
    std::size_t j = i;
    while (j < text.size() && text[j] != ' ' && text[j] != '\n' &&
           text[j] != '\t')
      ++j;
    const std::string_view token = text.substr(i, j - i);
    i = j;
    if (token.empty() || token.back() == ':') continue;
    std::uint64_t v = 0;
    const auto [end, ec] =
        std::from_chars(token.data(), token.data() + token.size(), v);
    if (ec == std::errc() && end == token.data() + token.size()) out[n] = v;
    ++n;
  }
  return out;
}

struct DeviceSample {
  std::string labels;  // device="zram0"
  std::string algorithm;
  std::array<std::uint64_t, std::size(kMmStat)> mm;
  std::array<std::uint64_t, std::size(kIoStat)> io;
  std::array<std::uint64_t, std::size(kBdStat)> bd;
  std::array<std::uint64_t, std::size(kDebugStat)> debug;
  std::uint64_t disksize = 0;
  bool initialized = false;
  int clients = 0;
  // Recompression (PageStoreStats), and the pages at each configured
  // priority as (priority, algorithm, pages).
  std::uint64_t incompressible_pages = 0;
  std::uint64_t recompress_attempts = 0;
  std::uint64_t recompressed_pages = 0;
  std::uint64_t dict_memory = 0;  // trained dictionaries (train_dict)
  std::uint64_t dict_pages = 0;
  std::uint64_t units = 0;       // multi-page objects (unit_pages)
  std::uint64_t unit_pages = 0;
  std::uint64_t units_reclaimed = 0;        // survivors, cumulative
  std::uint64_t units_reclaim_refused = 0;  // tries, cumulative
  std::uint64_t bd_lost = 0;     // backing blocks lost with a remote
  std::vector<std::tuple<int, std::string, std::uint64_t>> priorities;
};

// A label value with \, " and newline escaped, as the format requires.
std::string EscapeLabelValue(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\' || c == '"') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string FormatDouble(double v) {
  char buf[64];
  // Shortest round-trip text, %g style ("0.0001", "1e-05", "2.5"), as
  // Prometheus client libraries write bucket bounds.
  const auto r =
      std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::general);
  return std::string(buf, r.ptr);
}

class Writer {
 public:
  void Family(std::string_view name, std::string_view type,
              std::string_view help) {
    out_ += "# HELP ";
    out_ += name;
    out_ += ' ';
    out_ += help;  // our own texts: no backslash or newline to escape
    out_ += "\n# TYPE ";
    out_ += name;
    out_ += ' ';
    out_ += type;
    out_ += '\n';
  }
  void Sample(std::string_view name, std::string_view labels,
              std::string_view value) {
    out_ += name;
    if (!labels.empty()) {
      out_ += '{';
      out_ += labels;
      out_ += '}';
    }
    out_ += ' ';
    out_ += value;
    out_ += '\n';
  }
  void Sample(std::string_view name, std::string_view labels,
              std::uint64_t value) {
    Sample(name, labels, std::to_string(value));
  }
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
};

template <std::size_t N, std::size_t M>
void WriteColumns(Writer& w, const Column (&columns)[N],
                  const std::vector<DeviceSample>& devices,
                  std::array<std::uint64_t, M> DeviceSample::*field) {
  static_assert(N == M);
  for (std::size_t c = 0; c < N; ++c) {
    const std::string name = "ztier_zram_" + std::string(columns[c].name);
    w.Family(name, columns[c].type, columns[c].help);
    for (const DeviceSample& d : devices) {
      w.Sample(name, d.labels, std::to_string((d.*field)[c]));
    }
  }
}

// Recompression's counters (zram's recompress attribute; ztier's names,
// the kernel exports no such counters).
void WriteRecompression(Writer& w, const std::vector<DeviceSample>& devices) {
  const struct {
    const char* name;
    std::string_view type;
    const char* help;
    std::uint64_t DeviceSample::*field;
  } kFamilies[] = {
      {"ztier_zram_recompress_attempts_total", kCounter,
       "recompress: slots a pass read and compressed again, won or not.",
       &DeviceSample::recompress_attempts},
      {"ztier_zram_recompressed_pages_total", kCounter,
       "recompress: slots a pass stored smaller with a secondary algorithm.",
       &DeviceSample::recompressed_pages},
      {"ztier_zram_incompressible_pages", kGauge,
       "Slots marked INCOMPRESSIBLE: no recompression algorithm made them "
       "smaller.",
       &DeviceSample::incompressible_pages},
      {"ztier_zram_dictionary_bytes", kGauge,
       "Memory of the trained dictionaries held (train_dict); part of "
       "mem_used_total.",
       &DeviceSample::dict_memory},
      {"ztier_zram_dictionary_pages", kGauge,
       "Pool objects and compressed written-back blocks made with a trained "
       "dictionary.",
       &DeviceSample::dict_pages},
      {"ztier_zram_units", kGauge,
       "Multi-page objects live (unit_pages).",
       &DeviceSample::units},
      {"ztier_zram_unit_pages", kGauge,
       "Pages held in multi-page objects.",
       &DeviceSample::unit_pages},
      {"ztier_zram_unit_reclaimed_pages_total", kCounter,
       "Pages of multi-page objects that fell below half their pages, "
       "stored again one object each.",
       &DeviceSample::units_reclaimed},
      {"ztier_zram_unit_reclaims_refused_total", kCounter,
       "Reclaims of a multi-page object the pool had no room for (the "
       "object stays whole and is tried again).",
       &DeviceSample::units_reclaim_refused},
      {"ztier_zram_backing_lost_blocks_total", kCounter,
       "Written-back blocks lost with a remote backing device that came "
       "back without them; their pages read as IO errors.",
       &DeviceSample::bd_lost},
  };
  for (const auto& f : kFamilies) {
    w.Family(f.name, f.type, f.help);
    for (const DeviceSample& d : devices) w.Sample(f.name, d.labels, d.*f.field);
  }
  w.Family("ztier_zram_priority_pages", kGauge,
           "Pool objects stored with each configured priority's algorithm "
           "(0: comp_algorithm; 1..3: recomp_algorithm).");
  for (const DeviceSample& d : devices) {
    for (const auto& [prio, algo, pages] : d.priorities) {
      w.Sample("ztier_zram_priority_pages",
               d.labels + ",priority=\"" + std::to_string(prio) +
                   "\",algorithm=\"" + EscapeLabelValue(algo) + "\"",
               pages);
    }
  }
}

void WriteDevices(Writer& w, const DeviceRegistry& registry) {
  std::vector<DeviceSample> devices;
  for (const std::shared_ptr<Device>& dev : registry.List()) {
    DeviceSample s;
    s.labels = "device=\"" + EscapeLabelValue(dev->name()) + "\"";
    s.algorithm = dev->algorithm();
    s.mm = ParseColumns<std::size(kMmStat)>(dev->ShowMmStat());
    s.io = ParseColumns<std::size(kIoStat)>(dev->ShowIoStat());
    s.bd = ParseColumns<std::size(kBdStat)>(dev->ShowBdStat());
    s.debug = ParseColumns<std::size(kDebugStat)>(dev->ShowDebugStat());
    s.disksize = dev->disksize();
    s.initialized = dev->initialized();
    s.clients = dev->clients();
    const PageStoreStats st = dev->Stats();
    s.incompressible_pages = st.incompressible_pages;
    s.recompress_attempts = st.recompress_attempts;
    s.recompressed_pages = st.recompressed_pages;
    s.dict_memory = st.dict_memory;
    for (const std::uint64_t n : st.dict_pages) s.dict_pages += n;
    s.units = st.units;
    s.unit_pages = st.unit_pages;
    s.units_reclaimed = st.units_reclaimed;
    s.units_reclaim_refused = st.units_reclaim_refused;
    s.bd_lost = st.bd_lost;
    for (int p = 0; p < kMaxCodecPriorities; ++p) {
      std::string algo = p == 0 ? s.algorithm : dev->recomp_algorithm(p);
      if (!algo.empty()) s.priorities.emplace_back(p, algo, st.priority_pages[p]);
    }
    devices.push_back(std::move(s));
  }

  w.Family("ztier_zram_disksize_bytes", kGauge,
           "disksize: the device's size (0 while uninitialised).");
  for (const DeviceSample& d : devices) {
    w.Sample("ztier_zram_disksize_bytes", d.labels, d.disksize);
  }
  w.Family("ztier_zram_initstate", kGauge,
           "initstate: 1 once disksize is set, 0 before and after reset.");
  for (const DeviceSample& d : devices) {
    w.Sample("ztier_zram_initstate", d.labels, d.initialized ? 1 : 0);
  }
  w.Family("ztier_zram_clients", kGauge,
           "NBD connections attached to the device.");
  for (const DeviceSample& d : devices) {
    w.Sample("ztier_zram_clients", d.labels,
             static_cast<std::uint64_t>(d.clients < 0 ? 0 : d.clients));
  }
  w.Family(
      "ztier_zram_comp_algorithm_info", kGauge,
      "comp_algorithm: 1, labelled with the device's compression algorithm.");
  for (const DeviceSample& d : devices) {
    w.Sample("ztier_zram_comp_algorithm_info",
             d.labels + ",algorithm=\"" + EscapeLabelValue(d.algorithm) + "\"",
             1);
  }
  WriteRecompression(w, devices);
  WriteColumns(w, kMmStat, devices, &DeviceSample::mm);
  WriteColumns(w, kIoStat, devices, &DeviceSample::io);
  WriteColumns(w, kBdStat, devices, &DeviceSample::bd);
  WriteColumns(w, kDebugStat, devices, &DeviceSample::debug);
}

// Label values of NbdServerCounters::requests, by slot.
constexpr std::array<std::string_view, nbd::NbdServerCounters::kCommandSlots>
    kCommandLabels = {"read",  "write",        "disc",         "flush", "trim",
                      "cache", "write_zeroes", "block_status", "other"};

void WriteHistogram(Writer& w, std::string_view name, std::string_view labels,
                    const nbd::LatencyHistogram& h) {
  const std::string bucket = std::string(name) + "_bucket";
  const std::string prefix = std::string(labels) + ",le=\"";
  std::uint64_t cumulative = 0;
  for (std::size_t i = 0; i < h.kBuckets; ++i) {
    cumulative += h.buckets[i].load(std::memory_order_relaxed);
    const std::string le =
        i < h.kBoundsNs.size()
            ? FormatDouble(static_cast<double>(h.kBoundsNs[i]) / 1e9)
            : std::string("+Inf");
    w.Sample(bucket, prefix + le + "\"", cumulative);
  }
  const double sum =
      static_cast<double>(h.sum_ns.load(std::memory_order_relaxed)) / 1e9;
  w.Sample(std::string(name) + "_sum", labels, FormatDouble(sum));
  w.Sample(std::string(name) + "_count", labels, cumulative);
}

void WriteNbd(Writer& w, const nbd::NbdServer& server) {
  const nbd::NbdServerCounters& c = server.counters();
  constexpr auto kRelaxed = std::memory_order_relaxed;
  w.Family("ztier_nbd_connections_open", kGauge,
           "NBD connections open now (in the handshake or transmission).");
  w.Sample("ztier_nbd_connections_open", "", server.connections());
  w.Family("ztier_nbd_connections_accepted_total", kCounter,
           "NBD connections accepted, refused ones included.");
  w.Sample("ztier_nbd_connections_accepted_total", "",
           c.connections_accepted.load(kRelaxed));
  w.Family("ztier_nbd_connections_refused_total", kCounter,
           "NBD connections refused because max_connections were open.");
  w.Sample("ztier_nbd_connections_refused_total", "",
           c.connections_refused.load(kRelaxed));
  w.Family("ztier_nbd_request_buffers_mapped_total", kCounter,
           "NBD request buffers mapped as requests came (not at set-up).");
  w.Sample("ztier_nbd_request_buffers_mapped_total", "",
           c.request_buffers_mapped.load(kRelaxed));

  w.Family("ztier_nbd_requests_total", kCounter,
           "NBD requests received, by command (invalid ones included).");
  for (std::size_t i = 0; i < c.requests.size(); ++i) {
    w.Sample("ztier_nbd_requests_total",
             "type=\"" + std::string(kCommandLabels[i]) + "\"",
             c.requests[i].load(kRelaxed));
  }
  w.Family("ztier_nbd_error_replies_total", kCounter,
           "NBD replies that carried an error, by the error's errno name.");
  for (std::size_t i = 0; i < c.error_replies.size(); ++i) {
    const std::string_view label =
        i < c.kErrors.size() ? nbd::NbdErrorName(c.kErrors[i]) : "other";
    w.Sample("ztier_nbd_error_replies_total",
             "errno=\"" + std::string(label) + "\"",
             c.error_replies[i].load(kRelaxed));
  }
  w.Family("ztier_nbd_request_duration_seconds", "histogram",
           "Time from reading a valid NBD READ or WRITE request's header to "
           "sending its reply (or queueing it to be sent); a WRITE's includes "
           "receiving its payload, and a reply the client is slow to take "
           "adds its wait.");
  WriteHistogram(w, "ztier_nbd_request_duration_seconds", "type=\"read\"",
                 c.read_latency);
  WriteHistogram(w, "ztier_nbd_request_duration_seconds", "type=\"write\"",
                 c.write_latency);
}

}  // namespace

std::string RenderMetrics(const DeviceRegistry& registry,
                          const nbd::NbdServer* nbd) {
  Writer w;
  WriteDevices(w, registry);
  if (nbd != nullptr) WriteNbd(w, *nbd);
  return w.Take();
}

}  // namespace ztier::ctl
