// block_cipher.h: AES-256-GCM sealing of backing-store blocks, key in memory.
//
// The key is 32 bytes from getrandom(), generated at Create and wiped by the
// destructor; it is never written anywhere. Each Seal takes a fresh value
// from a 64-bit write counter (starting at 1, never repeating under one key)
// as the nonce: IV = 4 zero bytes + the counter (little-endian). The block
// number (8 bytes, little-endian) is the additional authenticated data, so
// a ciphertext moved to another block does not open there.
//
// Per-block metadata, 24 bytes: the counter value of the block's last Seal
// (0: never sealed) and the 16-byte tag. The table is one anonymous
// MAP_NORESERVE mapping sized for every block; only the parts touched cost
// memory. The file holds the ciphertext alone.
//
// Each call uses this thread's EVP_CIPHER_CTX and resets it before
// returning, so no key schedule outlives the call.
//
// Thread safety: Seal and Open may be called from any thread. The metadata
// words are atomics: a block read while it is being resealed opens as
// kCorruption, never as a mix of data (callers do not do that anyway).
#ifndef ZTIER_BACKING_BLOCK_CIPHER_H_
#define ZTIER_BACKING_BLOCK_CIPHER_H_

#include <openssl/types.h>

#include <atomic>
#include <cstdint>
#include <memory>

#include "platform/mapping.h"
#include "ztier/page.h"
#include "ztier/status.h"

namespace ztier::internal {

class BlockCipher {
 public:
  static Result<std::unique_ptr<BlockCipher>> Create(std::uint64_t num_blocks);
  ~BlockCipher();
  BlockCipher(const BlockCipher&) = delete;
  BlockCipher& operator=(const BlockCipher&) = delete;

  // Encrypts `page` in place as block `block` and records its nonce and tag.
  Status Seal(std::uint64_t block, MutablePage page);
  // Decrypts `page` in place as block `block`. kCorruption (and `page`
  // zeroed) if it does not authenticate or the block was never sealed;
  // kResourceExhausted (and `page` zeroed) if OpenSSL could not be set up
  // for it (no memory): the block is intact, read it again.
  Status Open(std::uint64_t block, MutablePage page) const;

 private:
  struct Meta {
    std::atomic<std::uint64_t> counter;  // 0: never sealed
    std::atomic<std::uint64_t> tag[2];
  };
  static_assert(sizeof(Meta) == 24);

  BlockCipher() = default;

  unsigned char key_[32];
  EVP_CIPHER* aead_ = nullptr;  // AES-256-GCM, fetched once
  platform::Mapping table_;  // num_blocks_ Metas, zero-filled when mapped
  Meta* meta_ = nullptr;     // table_'s
  std::uint64_t num_blocks_ = 0;
  std::atomic<std::uint64_t> next_counter_{1};
};

}  // namespace ztier::internal

#endif  // ZTIER_BACKING_BLOCK_CIPHER_H_
