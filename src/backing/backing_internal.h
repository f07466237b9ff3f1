// backing_internal.h: the state behind ztier/backing_store.h, shared by
//   backing_store.cc  Open, the accessors, allocation and ReadBlock;
//   block_writer.cc   BlockWriter and BackingStore::NewWriter.
// A BlockWriter points into this state, so the BackingStore must outlive
// every writer it made.
#ifndef ZTIER_BACKING_BACKING_INTERNAL_H_
#define ZTIER_BACKING_BACKING_INTERNAL_H_

#include <cstdint>
#include <memory>
#include <string>

#include "block_bitmap.h"
#include "block_cipher.h"
#include "ztier/backing_file.h"
#include "ztier/backing_store.h"

namespace ztier {

struct BackingStore::Impl {
  std::shared_ptr<BackingFile> file;
  std::uint64_t num_blocks = 0;
  std::unique_ptr<internal::BlockBitmap> bitmap;
  std::unique_ptr<internal::BlockCipher> cipher;  // null: not encrypted
};

}  // namespace ztier

#endif  // ZTIER_BACKING_BACKING_INTERNAL_H_
