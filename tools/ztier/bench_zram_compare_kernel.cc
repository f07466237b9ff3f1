// File: tools/ztier/bench_zram_compare_kernel.cc
//
// The kernel zram device's sysfs control for `ztier bench zram-compare`
// (bench_zram_compare_kernel.h).
#include "bench_zram_compare_kernel.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace ztier::tool {

Result<MmStat> ParseMmStat(std::string_view text) {
  std::istringstream in{std::string(text)};
  MmStat m;
  if (!(in >> m.orig_data_size >> m.compr_data_size >> m.mem_used_total >>
        m.mem_limit >> m.mem_used_max >> m.same_pages >> m.pages_compacted >>
        m.huge_pages)) {
    return Err(Status::Corruption("mm_stat: expected at least eight numbers, "
                                  "got '" + std::string(text) + "'"));
  }
  return m;
}

Result<KernelZram> KernelZram::Open(const std::string& dev_path,
                                    std::optional<std::string> sysfs_dir) {
  namespace fs = std::filesystem;
  const std::string dir = sysfs_dir.value_or(
      "/sys/block/" + fs::path(dev_path).filename().string());
  std::error_code ec;
  if (!fs::exists(dev_path, ec)) {
    return Err(Status::NotFound(dev_path + " does not exist"));
  }
  for (const char* attr : {"disksize", "comp_algorithm", "mm_stat", "reset"}) {
    if (!fs::exists(dir + "/" + attr, ec)) {
      return Err(Status::NotFound(dev_path + " is not a zram device: " + dir +
                                  "/" + attr + " does not exist"));
    }
  }
  KernelZram zram(dev_path, dir);
  ZT_ASSIGN_OR_RETURN(std::string disksize, zram.ReadAttr("disksize"));
  if (std::strtoull(disksize.c_str(), nullptr, 10) != 0) {
    return Err(Status::Busy(
        dev_path + " is initialised (disksize " +
        disksize.substr(0, disksize.find('\n')) +
        "): someone else's device, left untouched (if an interrupted run of "
        "this command left it so, `echo 1 > " + dir + "/reset` frees it)"));
  }
  const int fd = ::open(dev_path.c_str(), O_RDONLY | O_EXCL | O_CLOEXEC);
  if (fd < 0 && errno == EBUSY) {
    return Err(Status::Busy(dev_path + " is held open by another user"));
  }
  if (fd < 0) return Err(PosixError("open " + dev_path, errno));
  ::close(fd);
  if (::access((dir + "/reset").c_str(), W_OK) != 0) {
    return Err(PosixError("cannot control " + dev_path + " (write access to " +
                              dir + "/reset; run as root)",
                          errno));
  }
  ZT_ASSIGN_OR_RETURN(std::string algorithms, zram.ReadAttr("comp_algorithm"));
  std::istringstream in(algorithms);
  for (std::string word; in >> word;) {
    if (word.size() > 2 && word.front() == '[' && word.back() == ']') {
      word = word.substr(1, word.size() - 2);
    }
    zram.algorithms_.push_back(word);
  }
  return zram;
}

KernelZram::~KernelZram() {
  if (!initialised_) return;
  if (Status s = Reset(); !s.ok()) {
    std::fprintf(stderr, "warning: could not reset %s: %s\n",
                 dev_path_.c_str(), s.ToString().c_str());
  }
}

Status KernelZram::Init(std::string_view codec, std::uint64_t bytes,
                        std::string_view params) {
  if (std::find(algorithms_.begin(), algorithms_.end(), codec) ==
      algorithms_.end()) {
    return Status::Unsupported("the kernel's zram does not offer " +
                               std::string(codec));
  }
  ZT_RETURN_IF_ERROR(Reset());
  initialised_ = true;  // from here on, even a half-done Init is reset
  ZT_RETURN_IF_ERROR(WriteAttr("comp_algorithm", codec));
  if (!params.empty()) {
    ZT_RETURN_IF_ERROR(
        WriteAttr("algorithm_params",
                  "algo=" + std::string(codec) + " " + std::string(params)));
  }
  return WriteAttr("disksize", std::to_string(bytes));
}

Status KernelZram::Reset() {
  // zram refuses a reset (EBUSY) while the disk has an opener. A closed
  // io_uring drops its file references in the kernel's deferred ring exit
  // work (io_uring/io_uring.c, io_ring_exit_work), so just after this
  // process's IO the device can still look open for a moment: retry for
  // up to 2 s before calling it busy.
  Status s = WriteAttr("reset", "1");
  for (int i = 0; i < 200 && s.code() == StatusCode::kBusy; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    s = WriteAttr("reset", "1");
  }
  ZT_RETURN_IF_ERROR(s);
  initialised_ = false;
  return Status::Ok();
}

Result<MmStat> KernelZram::ReadMmStat() const {
  ZT_ASSIGN_OR_RETURN(std::string text, ReadAttr("mm_stat"));
  return ParseMmStat(text);
}

Result<std::string> KernelZram::ReadAttr(std::string_view name) const {
  const std::string path = sysfs_dir_ + "/" + std::string(name);
  std::ifstream in(path);
  if (!in) return Err(Status::IoError("cannot read " + path));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

Status KernelZram::WriteAttr(std::string_view name, std::string_view value) {
  const std::string path = sysfs_dir_ + "/" + std::string(name);
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return PosixError("open " + path, errno);
  const ssize_t n = ::write(fd, value.data(), value.size());
  const int err = n < 0 ? errno : EIO;
  ::close(fd);
  return n == static_cast<ssize_t>(value.size())
             ? Status::Ok()
             : PosixError("write '" + std::string(value) + "' to " + path, err);
}

}  // namespace ztier::tool
