// File: tools/ztier/bench_zram_compare_kernel.h
//
// KernelZram: the kernel's own zram device (/dev/zramN) driven through its
// sysfs folder (/sys/block/zramN) the way zramctl does, for `ztier bench
// zram-compare`.
//
//   auto zram = KernelZram::Open("/dev/zram0");  // missing or busy: error
//   ZT_RETURN_IF_ERROR(zram->Init("lz4", 256 << 20));
//   ... O_DIRECT IO on zram->dev_path() ...
//   auto mm = zram->ReadMmStat();
//   ZT_RETURN_IF_ERROR(zram->Reset());
//
// Open() never changes the device, and refuses it with kNotFound (no node,
// or its sysfs folder lacks disksize, comp_algorithm, mm_stat or reset),
// kBusy (someone else's: a nonzero disksize, which a device in use as swap
// or mounted has, or held open: O_EXCL fails) or kIoError. Init() resets,
// sets comp_algorithm, then disksize; Reset() writes 1 to reset; both run
// only on a device Open() found free. A KernelZram that initialised the
// device resets it when destroyed.
//
// Thread safety: one thread uses a KernelZram; others may do IO on the
// device node between Init() and Reset().
#ifndef ZTIER_TOOLS_ZTIER_BENCH_ZRAM_COMPARE_KERNEL_H_
#define ZTIER_TOOLS_ZTIER_BENCH_ZRAM_COMPARE_KERNEL_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ztier/status.h"

namespace ztier::tool {

// The first columns of zram's mm_stat (the kernel's zram.rst), in bytes or
// pages as the kernel prints them.
struct MmStat {
  std::uint64_t orig_data_size = 0;
  std::uint64_t compr_data_size = 0;
  std::uint64_t mem_used_total = 0;
  std::uint64_t mem_limit = 0;
  std::uint64_t mem_used_max = 0;
  std::uint64_t same_pages = 0;
  std::uint64_t pages_compacted = 0;
  std::uint64_t huge_pages = 0;
};

// Parses mm_stat's text (ztier's PageStore::FormatMmStat prints the same).
// kCorruption when fewer than eight numbers lead it.
Result<MmStat> ParseMmStat(std::string_view text);

// The names in a comp_algorithm text ("lzo-rle lzo [lz4]\n" ->
// {"lzo-rle", "lzo", "lz4"}), the selected one without its brackets.
std::vector<std::string> ParseCompAlgorithms(std::string_view text);

class KernelZram {
 public:
  // `sysfs_dir` defaults to /sys/block/<basename of dev_path>.
  static Result<KernelZram> Open(const std::string& dev_path,
                                 std::optional<std::string> sysfs_dir = {});

  KernelZram(KernelZram&& other) noexcept;
  KernelZram& operator=(KernelZram&&) = delete;
  KernelZram(const KernelZram&) = delete;
  KernelZram& operator=(const KernelZram&) = delete;
  ~KernelZram();  // Reset() when this object initialised the device

  const std::string& dev_path() const { return dev_path_; }
  const std::string& sysfs_dir() const { return sysfs_dir_; }

  // comp_algorithm's names, read at Open().
  const std::vector<std::string>& algorithms() const { return algorithms_; }

  // kUnsupported when the kernel does not offer `codec`; kIoError when a
  // sysfs write fails.
  Status Init(std::string_view codec, std::uint64_t bytes);

  // kIoError when it fails (EBUSY while someone holds the device open).
  Status Reset();

  Result<MmStat> ReadMmStat() const;

  // The text of sysfs attribute `name`.
  Result<std::string> ReadAttr(std::string_view name) const;

 private:
  KernelZram(std::string dev_path, std::string sysfs_dir)
      : dev_path_(std::move(dev_path)), sysfs_dir_(std::move(sysfs_dir)) {}
  Status WriteAttr(std::string_view name, std::string_view value);

  std::string dev_path_;
  std::string sysfs_dir_;
  std::vector<std::string> algorithms_;
  bool initialised_ = false;  // by Init(), until Reset()
};

}  // namespace ztier::tool

#endif  // ZTIER_TOOLS_ZTIER_BENCH_ZRAM_COMPARE_KERNEL_H_
