// mem_backing_file.cc: NewMemBackingFile (contract in ztier/backing_file.h),
// a BackingFile held in zeroed memory. Reads and writes copy under one
// mutex, so a read racing a write of the same bytes sees either; a write
// happens in Queue, and Reap reports it. Transfers past the end are cut
// short there, as pread and pwrite on a block device.
#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <utility>

#include "platform/done_writes.h"
#include "ztier/backing_file.h"
#include "ztier/page.h"

namespace ztier {
namespace {

class MemBackingFile final : public BackingFile {
 public:
  MemBackingFile(std::uint64_t size, std::string name)
      : name_(std::move(name)),
        size_(size),
        data_(static_cast<std::byte*>(std::calloc(size, 1))) {}
  ~MemBackingFile() override { std::free(data_); }

  bool ok() const { return data_ != nullptr || size_ == 0; }
  const std::string& name() const override { return name_; }
  std::uint64_t size() const override { return size_; }
  bool direct() const override { return false; }

  long Read(std::uint64_t offset, std::span<std::byte> out) override {
    const std::size_t n = Clip(offset, out.size());
    std::lock_guard<std::mutex> lock(mu_);
    if (n > 0) std::memcpy(out.data(), data_ + offset, n);
    return static_cast<long>(n);
  }
  // Bytes `len` at `offset` that lie inside the file; -ENOSPC past its end.
  long Write(std::uint64_t offset, const std::byte* src, std::size_t len) {
    const std::size_t n = Clip(offset, len);
    if (n == 0 && len > 0) return -ENOSPC;
    std::lock_guard<std::mutex> lock(mu_);
    std::memcpy(data_ + offset, src, n);
    return static_cast<long>(n);
  }
  Result<std::unique_ptr<BackingFileWriter>> NewWriter(
      std::size_t ios, std::size_t io_bytes) override;

 private:
  std::size_t Clip(std::uint64_t offset, std::size_t len) const {
    if (offset >= size_) return 0;
    return static_cast<std::size_t>(
        std::min<std::uint64_t>(len, size_ - offset));
  }

  const std::string name_;
  const std::uint64_t size_;
  std::byte* const data_;
  std::mutex mu_;
};

class MemWriter final : public BackingFileWriter {
 public:
  MemWriter(MemBackingFile* file, std::byte* buffers, std::size_t ios,
            std::size_t io_bytes)
      : file_(file), buffers_(buffers), io_bytes_(io_bytes), done_(ios) {}
  ~MemWriter() override { std::free(buffers_); }

  std::byte* buffer(std::size_t io) override {
    return buffers_ + io * io_bytes_;
  }
  void Queue(std::size_t io, std::uint64_t offset, std::size_t len) override {
    done_.Add(io, file_->Write(offset, buffer(io), len));
  }
  std::size_t Reap(
      bool /*wait: all are done*/,
      const std::function<void(std::size_t, long)>& done) override {
    return done_.Report(done);
  }

 private:
  MemBackingFile* const file_;
  std::byte* const buffers_;
  const std::size_t io_bytes_;
  internal::DoneWrites done_;
};

Result<std::unique_ptr<BackingFileWriter>> MemBackingFile::NewWriter(
    std::size_t ios, std::size_t io_bytes) {
  void* p = std::aligned_alloc(kPageSize, ios * io_bytes);
  if (p == nullptr) {
    return Err(Status::ResourceExhausted("writer buffers for " + name_));
  }
  try {
    return std::unique_ptr<BackingFileWriter>(std::make_unique<MemWriter>(
        this, static_cast<std::byte*>(p), ios, io_bytes));
  } catch (...) {  // std::bad_alloc: the writer never owned them
    std::free(p);
    throw;
  }
}

}  // namespace

std::unique_ptr<BackingFile> NewMemBackingFile(std::uint64_t size_bytes,
                                               std::string name) {
  auto f = std::make_unique<MemBackingFile>(size_bytes, std::move(name));
  if (!f->ok()) return nullptr;
  return f;
}

}  // namespace ztier
