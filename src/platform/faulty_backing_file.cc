// faulty_backing_file.cc: NewFaultyBackingFile (contract in
// ztier/backing_file.h). The writer remembers each queued write's offset
// and length, so that the fault function sees them with the result.
#include <string>
#include <utility>
#include <vector>

#include "ztier/backing_file.h"

namespace ztier {
namespace {

class FaultyWriter final : public BackingFileWriter {
 public:
  FaultyWriter(std::unique_ptr<BackingFileWriter> base, const FileFault* fault,
               std::size_t ios)
      : base_(std::move(base)), fault_(fault), queued_(ios) {}

  std::byte* buffer(std::size_t io) override { return base_->buffer(io); }
  void Queue(std::size_t io, std::uint64_t offset, std::size_t len) override {
    queued_[io] =
        FileIo{.kind = FileIo::Kind::kWrite, .offset = offset, .bytes = len};
    base_->Queue(io, offset, len);
  }
  std::size_t Reap(
      bool wait, const std::function<void(std::size_t, long)>& done) override {
    return base_->Reap(wait, [&](std::size_t io, long result) {
      done(io, *fault_ ? (*fault_)(queued_[io], result) : result);
    });
  }

 private:
  std::unique_ptr<BackingFileWriter> base_;
  const FileFault* fault_;  // the file's, which outlives the writer
  std::vector<FileIo> queued_;
};

class FaultyBackingFile final : public BackingFile {
 public:
  FaultyBackingFile(std::shared_ptr<BackingFile> base, FileFault fault)
      : base_(std::move(base)), fault_(std::move(fault)) {}

  const std::string& name() const override { return base_->name(); }
  std::uint64_t size() const override { return base_->size(); }
  bool direct() const override { return base_->direct(); }
  std::size_t max_write_bytes() const override {
    return base_->max_write_bytes();
  }
  std::uint64_t lost_blocks() const override { return base_->lost_blocks(); }
  bool can_discard() const override { return base_->can_discard(); }
  void Discard(std::span<const Range> ranges, std::span<bool> sent) override {
    base_->Discard(ranges, sent);
  }
  void Forget(const Range& range) override { base_->Forget(range); }
  long Read(std::uint64_t offset, std::span<std::byte> out) override {
    const long result = base_->Read(offset, out);
    if (!fault_) return result;
    return fault_(
        FileIo{
            .kind = FileIo::Kind::kRead, .offset = offset, .bytes = out.size()},
        result);
  }
  Result<std::unique_ptr<BackingFileWriter>> NewWriter(
      std::size_t ios, std::size_t io_bytes) override {
    ZT_ASSIGN_OR_RETURN(std::unique_ptr<BackingFileWriter> w,
                        base_->NewWriter(ios, io_bytes));
    if (fault_) {
      const long r = fault_(FileIo{.kind = FileIo::Kind::kNewWriter,
                                   .offset = 0,
                                   .bytes = ios * io_bytes},
                            0);
      if (r < 0) {
        return Err(PosixError("make a writer for " + name(),
                              static_cast<int>(-r)));
      }
    }
    return std::unique_ptr<BackingFileWriter>(
        std::make_unique<FaultyWriter>(std::move(w), &fault_, ios));
  }

 private:
  std::shared_ptr<BackingFile> base_;
  const FileFault fault_;
};

}  // namespace

std::unique_ptr<BackingFile> NewFaultyBackingFile(
    std::shared_ptr<BackingFile> base, FileFault fault) {
  return std::make_unique<FaultyBackingFile>(std::move(base), std::move(fault));
}

}  // namespace ztier
