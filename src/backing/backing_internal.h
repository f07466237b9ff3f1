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
#include "ztier/backing_store.h"

namespace ztier {

struct BackingStore::Impl {
  std::string path;
  int fd = -1;
  std::uint64_t num_blocks = 0;
  bool direct = false;
  BackingFaultHook fault_hook;  // null: results as they are
  std::unique_ptr<internal::BlockBitmap> bitmap;
  std::unique_ptr<internal::BlockCipher> cipher;  // null: not encrypted

  ~Impl();
};

}  // namespace ztier

#endif  // ZTIER_BACKING_BACKING_INTERNAL_H_
