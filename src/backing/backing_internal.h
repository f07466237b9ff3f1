// backing_internal.h: the state behind ztier/backing_store.h, shared by
//   backing_store.cc  Open, the accessors, allocation and ReadBlock;
//   block_writer.cc   BlockWriter and BackingStore::NewWriter.
// A BlockWriter points into this state, so the BackingStore must outlive
// every writer it made.
#ifndef ZTIER_BACKING_BACKING_INTERNAL_H_
#define ZTIER_BACKING_BACKING_INTERNAL_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "block_bitmap.h"
#include "block_cipher.h"
#include "platform/posix_backing_file.h"
#include "ztier/backing_file.h"
#include "ztier/backing_store.h"

namespace ztier {

struct BackingStore::Impl {
  std::shared_ptr<BackingFile> file;
  std::uint64_t num_blocks = 0;
  bool created = false;  // Open made the file at `path` (BackingStore::created)
  // The file Open opened at the path (before wrap_file), while `file`
  // holds it: the one KeepFile tells.
  std::weak_ptr<internal::PosixBackingFile> opened;
  std::unique_ptr<internal::BlockBitmap> bitmap;
  std::unique_ptr<internal::BlockCipher> cipher;  // null: not encrypted
  // Blocks freed and not yet discarded (file->can_discard() only), one bit
  // per block: still set in `bitmap`, so AllocRange cannot hand one out
  // before its discard is answered. Free only sets a bit, so it needs no
  // memory (the IO path of a preallocated device allocates nothing:
  // device/no_alloc_test.cc). DiscardFreed swaps `pending` with `taking`
  // (clear between passes) and works from `taking` without discard_mu.
  // Both are empty for a file that takes no discards. `discarding` counts
  // the blocks of both for blocks_used().
  bool discards = false;  // file->can_discard(), fixed at Open
  std::mutex discard_mu;
  std::vector<std::uint64_t> pending;  // guarded by discard_mu
  std::vector<std::uint64_t> taking;   // guarded by discard_pass_mu
  std::atomic<std::uint64_t> discarding{0};
  std::mutex discard_pass_mu;  // one DiscardFreed at a time
  // The block a DiscardFreed's ranges start from (those below it come
  // last): where the one before stopped. Guarded by discard_pass_mu.
  std::uint64_t discard_from = 0;
};

}  // namespace ztier

#endif  // ZTIER_BACKING_BACKING_INTERNAL_H_
