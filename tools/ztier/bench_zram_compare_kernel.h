// File: tools/ztier/bench_zram_compare_kernel.h
//
// KernelZram: the kernel's own zram device (/dev/zramN) driven through its
// sysfs folder (/sys/block/zramN) as zramctl does, for `ztier bench
// zram-compare`.
//
//   auto zram = KernelZram::Open("/dev/zram0");  // missing or busy: error
//   ZT_RETURN_IF_ERROR(zram->Init("lz4", 256 << 20));
//   ... O_DIRECT IO on zram->dev_path(), zram->ReadMmStat() ...
//   ZT_RETURN_IF_ERROR(zram->Reset());
//
// Open() never changes the device; it refuses it with kNotFound (no node,
// or not zram's sysfs files), kBusy (a nonzero disksize, as swap or a mount
// has, or held open: O_EXCL fails) or another error. A KernelZram that
// initialised the device resets it when destroyed.
//
// Thread safety: one thread uses a KernelZram; others may do IO on the
// device node between Init() and Reset().
#ifndef ZTIER_TOOLS_ZTIER_BENCH_ZRAM_COMPARE_KERNEL_H_
#define ZTIER_TOOLS_ZTIER_BENCH_ZRAM_COMPARE_KERNEL_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ztier/status.h"

namespace ztier::tool {

// The first columns of zram's mm_stat (the kernel's zram.rst; ztier's
// PageStore::FormatMmStat prints the same), in bytes or pages.
struct MmStat {
  std::uint64_t orig_data_size, compr_data_size, mem_used_total, mem_limit,
      mem_used_max, same_pages, pages_compacted, huge_pages;
};

// kCorruption when fewer than eight numbers lead `text`.
Result<MmStat> ParseMmStat(std::string_view text);

class KernelZram {
 public:
  // `sysfs_dir` defaults to /sys/block/<basename of dev_path>.
  static Result<KernelZram> Open(const std::string& dev_path,
                                 std::optional<std::string> sysfs_dir = {});

  KernelZram(KernelZram&& o) noexcept
      : dev_path_(std::move(o.dev_path_)), sysfs_dir_(std::move(o.sysfs_dir_)),
        algorithms_(std::move(o.algorithms_)),
        initialised_(std::exchange(o.initialised_, false)) {}
  KernelZram& operator=(KernelZram&&) = delete;
  ~KernelZram();

  const std::string& dev_path() const { return dev_path_; }
  // comp_algorithm's names, read at Open(), the selected one unbracketed.
  const std::vector<std::string>& algorithms() const { return algorithms_; }

  // Resets, then sets comp_algorithm, algorithm_params (as "algo=CODEC
  // PARAMS", when `params` is not empty; Documentation/admin-guide/
  // blockdev/zram.rst) and disksize. kUnsupported when the kernel does
  // not offer `codec`; kIoError when a sysfs write fails, as one the
  // kernel's params refuse.
  Status Init(std::string_view codec, std::uint64_t bytes,
              std::string_view params = {});
  Status Reset();  // kIoError (EBUSY while someone holds the device open)
  Result<MmStat> ReadMmStat() const;

 private:
  KernelZram(std::string dev_path, std::string sysfs_dir)
      : dev_path_(std::move(dev_path)), sysfs_dir_(std::move(sysfs_dir)) {}
  Result<std::string> ReadAttr(std::string_view name) const;
  Status WriteAttr(std::string_view name, std::string_view value);

  std::string dev_path_;
  std::string sysfs_dir_;
  std::vector<std::string> algorithms_;
  bool initialised_ = false;  // by Init(), until Reset()
};

}  // namespace ztier::tool

#endif  // ZTIER_TOOLS_ZTIER_BENCH_ZRAM_COMPARE_KERNEL_H_
