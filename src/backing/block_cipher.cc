// block_cipher.cc: AES-256-GCM Seal/Open of 4096-byte blocks with OpenSSL.
#include "block_cipher.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <sys/random.h>

#include <cassert>
#include <cerrno>
#include <cstring>
#include <string>

namespace ztier::internal {
namespace {

// This thread's context; null while OpenSSL has no memory for one (the
// next call tries again). Every call resets it before returning
// (CtxReset), which frees the key schedule with it.
EVP_CIPHER_CTX* ThreadCtx() {
  struct Holder {
    EVP_CIPHER_CTX* ctx = nullptr;
    ~Holder() { EVP_CIPHER_CTX_free(ctx); }
  };
  thread_local Holder holder;
  if (holder.ctx == nullptr) holder.ctx = EVP_CIPHER_CTX_new();
  return holder.ctx;
}

struct CtxReset {
  EVP_CIPHER_CTX* ctx;
  ~CtxReset() { EVP_CIPHER_CTX_reset(ctx); }
};

void PutLe64(std::uint64_t v, unsigned char* out) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<unsigned char>(v >> (8 * i));
}

std::string BlockName(std::uint64_t block) {
  return "block " + std::to_string(block);
}

}  // namespace

Result<std::unique_ptr<BlockCipher>> BlockCipher::Create(
    std::uint64_t num_blocks) {
  if (num_blocks == 0 || num_blocks > SIZE_MAX / sizeof(Meta)) {
    return Err(Status::InvalidArgument("cipher table of " +
                                       std::to_string(num_blocks) + " blocks"));
  }
  std::unique_ptr<BlockCipher> c(new BlockCipher());
  for (std::size_t got = 0; got < sizeof(c->key_);) {
    const ssize_t r = getrandom(c->key_ + got, sizeof(c->key_) - got, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return Err(PosixError("getrandom for the backing key", errno));
    got += static_cast<std::size_t>(r);
  }
  c->aead_ = EVP_CIPHER_fetch(nullptr, "AES-256-GCM", nullptr);
  if (c->aead_ == nullptr) {
    return Err(Status::Unsupported("OpenSSL has no AES-256-GCM"));
  }
  const std::size_t bytes = num_blocks * sizeof(Meta);
  ZT_ASSIGN_OR_RETURN(c->table_,
                      platform::Mapping::Anonymous(
                          bytes, platform::Commit::kOnTouch, "mmap cipher table"));
  c->meta_ = c->table_.as<Meta>();  // zero pages: nothing sealed yet
  c->num_blocks_ = num_blocks;
  return c;
}

BlockCipher::~BlockCipher() {
  OPENSSL_cleanse(key_, sizeof(key_));
  EVP_CIPHER_free(aead_);
}

Status BlockCipher::Seal(std::uint64_t block, MutablePage page) {
  assert(block < num_blocks_);
  EVP_CIPHER_CTX* ctx = ThreadCtx();
  if (ctx == nullptr) return Status::ResourceExhausted("EVP_CIPHER_CTX_new");
  CtxReset reset{ctx};
  const std::uint64_t counter =
      next_counter_.fetch_add(1, std::memory_order_relaxed);
  unsigned char iv[12] = {};
  PutLe64(counter, iv + 4);
  unsigned char aad[8];
  PutLe64(block, aad);
  unsigned char tag[16];
  auto* data = reinterpret_cast<unsigned char*>(page.data());
  int len = 0;
  int tail = 0;
  const bool ok =
      EVP_EncryptInit_ex(ctx, aead_, nullptr, key_, iv) == 1 &&
      EVP_EncryptUpdate(ctx, nullptr, &len, aad, sizeof(aad)) == 1 &&
      EVP_EncryptUpdate(ctx, data, &len, data, kPageSize) == 1 &&
      EVP_EncryptFinal_ex(ctx, data + len, &tail) == 1 &&
      len + tail == static_cast<int>(kPageSize) &&
      EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, sizeof(tag), tag) == 1;
  if (!ok) return Status::IoError("AES-GCM sealing of " + BlockName(block));
  Meta& m = meta_[block];
  std::uint64_t t[2];
  std::memcpy(t, tag, sizeof(tag));
  m.tag[0].store(t[0], std::memory_order_relaxed);
  m.tag[1].store(t[1], std::memory_order_relaxed);
  m.counter.store(counter, std::memory_order_release);
  return Status::Ok();
}

Status BlockCipher::Open(std::uint64_t block, MutablePage page) const {
  assert(block < num_blocks_);
  const Meta& m = meta_[block];
  const std::uint64_t counter = m.counter.load(std::memory_order_acquire);
  if (counter == 0) {
    std::memset(page.data(), 0, kPageSize);
    return Status::Corruption(BlockName(block) + " was never sealed");
  }
  std::uint64_t t[2] = {m.tag[0].load(std::memory_order_relaxed),
                        m.tag[1].load(std::memory_order_relaxed)};
  unsigned char tag[16];
  std::memcpy(tag, t, sizeof(tag));
  EVP_CIPHER_CTX* ctx = ThreadCtx();
  if (ctx == nullptr) return Status::ResourceExhausted("EVP_CIPHER_CTX_new");
  CtxReset reset{ctx};
  unsigned char iv[12] = {};
  PutLe64(counter, iv + 4);
  unsigned char aad[8];
  PutLe64(block, aad);
  auto* data = reinterpret_cast<unsigned char*>(page.data());
  int len = 0;
  int tail = 0;
  // Only the final check speaks of the data. A step before it fails when
  // OpenSSL cannot allocate (its init allocates the key schedule): the
  // block is intact, and the caller may read it again
  // (kResourceExhausted), as after a failed read buffer.
  const bool set_up =
      EVP_DecryptInit_ex(ctx, aead_, nullptr, key_, iv) == 1 &&
      EVP_DecryptUpdate(ctx, nullptr, &len, aad, sizeof(aad)) == 1 &&
      EVP_DecryptUpdate(ctx, data, &len, data, kPageSize) == 1 &&
      EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, sizeof(tag), tag) == 1;
  if (set_up && EVP_DecryptFinal_ex(ctx, data + len, &tail) == 1) {
    return Status::Ok();
  }
  OPENSSL_cleanse(page.data(), kPageSize);  // unauthenticated: never yield
  if (!set_up) {
    return Status::ResourceExhausted("AES-GCM could not be set up to open " +
                                     BlockName(block) +
                                     " (OpenSSL out of memory?)");
  }
  return Status::Corruption(BlockName(block) +
                            " does not authenticate (AES-GCM tag mismatch)");
}

}  // namespace ztier::internal
