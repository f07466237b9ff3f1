// testing/discarding_file.h: DiscardingFile, a memory backing file that
// takes discards (BackingFile::can_discard()), as a remote NBD export does
// (nbd/nbd_backing_file.h). It records each discard and answers it, or,
// with answer == false, leaves it unsent, as a remote that is away; with
// answer_first, answers only that many of a Discard's first ranges and
// leaves the rest unsent, as the NBD file does once its time is up.
//
//   auto file = std::make_shared<testing::DiscardingFile>(64 * kPageSize);
//   auto bs = BackingStore::Open({.file = file});
//   ...
//   EXPECT_EQ(file->calls.size(), 1u);
//
// Thread safety: `calls` and `answer` are the test's; Discard is called by
// one thread at a time (BackingStore::DiscardFreed).
#ifndef ZTIER_TESTING_DISCARDING_FILE_H_
#define ZTIER_TESTING_DISCARDING_FILE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "ztier/backing_file.h"

namespace ztier::testing {

class DiscardingFile final : public BackingFile {
 public:
  // With `storage` false the file has its size but holds only its first
  // page (for tests of block allocation and discards alone, at sizes
  // memory could not hold): IO past that page fails.
  explicit DiscardingFile(std::uint64_t bytes, bool storage = true)
      : size_(bytes),
        base_(NewMemBackingFile(storage ? bytes : 4096, "mem:discard")) {}
  const std::string& name() const override { return base_->name(); }
  std::uint64_t size() const override { return size_; }
  bool direct() const override { return false; }
  long Read(std::uint64_t offset, std::span<std::byte> out) override {
    return base_->Read(offset, out);
  }
  Result<std::unique_ptr<BackingFileWriter>> NewWriter(
      std::size_t ios, std::size_t io_bytes) override {
    return base_->NewWriter(ios, io_bytes);
  }
  bool can_discard() const override { return true; }
  void Discard(std::span<const Range> ranges, std::span<bool> sent) override {
    if (on_discard) on_discard();
    for (std::size_t i = 0; i < ranges.size(); ++i) {
      calls.push_back({ranges[i].offset, ranges[i].len});
      sent[i] = answer && i < answer_first;
    }
  }

  bool answer = true;
  std::size_t answer_first = SIZE_MAX;
  // Called at the start of each Discard (a slow remote, say); may be null.
  std::function<void()> on_discard;
  // Each discard asked for: (offset, length) in bytes.
  std::vector<std::pair<std::uint64_t, std::uint64_t>> calls;

 private:
  const std::uint64_t size_;
  std::unique_ptr<BackingFile> base_;
};

}  // namespace ztier::testing

#endif  // ZTIER_TESTING_DISCARDING_FILE_H_
