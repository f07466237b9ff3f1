// backing_store.cc: BackingStore::Open (creating or sizing the file, probing
// O_DIRECT), the accessors, block allocation and ReadBlock. The writer and
// NewWriter are in block_writer.cc.
#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cassert>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include "backing_internal.h"

namespace ztier {
namespace {

static_assert(BackingStore::kNoBlock == internal::BlockBitmap::kNoBlock);

// Open's errors name the call and the path: kNotFound for ENOENT (a missing
// directory), kIoError for anything else.
Status OpenError(const char* call, const std::string& path, int err) {
  std::string msg = std::string(call) + " " + path + ": " + std::strerror(err);
  return err == ENOENT ? Status::NotFound(msg) : Status::IoError(msg);
}

// This thread's 4096-aligned read buffer (O_DIRECT needs the alignment; the
// caller's page need not have it).
std::byte* ThreadReadBuffer() {
  struct Holder {
    void* p = std::aligned_alloc(kPageSize, kPageSize);
    ~Holder() { std::free(p); }
  };
  thread_local Holder holder;
  return static_cast<std::byte*>(holder.p);
}

}  // namespace

BackingStore::Impl::~Impl() {
  if (fd >= 0) close(fd);
}

BackingStore::BackingStore() : impl_(std::make_unique<Impl>()) {}
BackingStore::~BackingStore() = default;

Result<std::unique_ptr<BackingStore>> BackingStore::Open(
    const BackingOptions& options) {
  const std::string& path = options.path;
  if (path.empty()) {
    return Err(Status::InvalidArgument("backing store: path is empty"));
  }
  struct stat st;
  const bool exists = stat(path.c_str(), &st) == 0;
  if (!exists && errno != ENOENT) return Err(OpenError("stat", path, errno));
  if (exists && !S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode)) {
    return Err(Status::InvalidArgument(
        path + " is not a regular file or a block device"));
  }
  if (!exists && options.size_bytes < kPageSize) {
    return Err(Status::InvalidArgument("backing file " + path + " of " +
                                       std::to_string(options.size_bytes) +
                                       " bytes holds no 4096-byte block"));
  }
  // A file this call created is removed again if Open fails after all.
  auto fail = [&](Status s) {
    if (!exists) unlink(path.c_str());
    return Err(std::move(s));
  };

  std::unique_ptr<BackingStore> bs(new BackingStore());
  Impl& m = *bs->impl_;
  m.path = path;
  m.direct = options.direct;
  const int flags = O_RDWR | O_CLOEXEC | (exists ? 0 : O_CREAT);
  m.fd = open(path.c_str(), flags | (m.direct ? O_DIRECT : 0), 0600);
  if (m.fd < 0 && errno == EINVAL && m.direct) {  // no O_DIRECT here
    m.direct = false;
    m.fd = open(path.c_str(), flags, 0600);
  }
  if (m.fd < 0) return fail(OpenError("open", path, errno));
  if (fstat(m.fd, &st) != 0) return fail(OpenError("fstat", path, errno));

  std::uint64_t size = 0;
  if (S_ISBLK(st.st_mode)) {  // used whole; size_bytes does not apply
    if (ioctl(m.fd, BLKGETSIZE64, &size) != 0) {
      return fail(OpenError("ioctl BLKGETSIZE64", path, errno));
    }
  } else if (S_ISREG(st.st_mode)) {
    size = static_cast<std::uint64_t>(st.st_size);
    if (size < options.size_bytes) {
      const auto want = static_cast<off_t>(options.size_bytes);
      if (fallocate(m.fd, 0, 0, want) != 0) {
        if (errno != EOPNOTSUPP) {
          return fail(OpenError("fallocate", path, errno));
        }
        if (ftruncate(m.fd, want) != 0) {
          return fail(OpenError("ftruncate", path, errno));
        }
      }
      size = options.size_bytes;
    }
  } else {
    return fail(Status::InvalidArgument(
        path + " is not a regular file or a block device"));
  }
  m.num_blocks = size / kPageSize;
  if (m.num_blocks == 0) {
    return fail(Status::InvalidArgument(path + " of " + std::to_string(size) +
                                        " bytes holds no 4096-byte block"));
  }
  m.bitmap = std::make_unique<internal::BlockBitmap>(m.num_blocks);
  if (options.encrypt) {
    auto cipher = internal::BlockCipher::Create(m.num_blocks);
    if (!cipher.has_value()) return fail(std::move(cipher.error()));
    m.cipher = std::move(*cipher);
  }
  m.fault_hook = options.fault_hook;
  return bs;
}

const std::string& BackingStore::path() const { return impl_->path; }
std::uint64_t BackingStore::num_blocks() const { return impl_->num_blocks; }
bool BackingStore::direct() const { return impl_->direct; }
bool BackingStore::encrypted() const { return impl_->cipher != nullptr; }
std::uint64_t BackingStore::blocks_used() const {
  return impl_->bitmap->Used();
}

std::uint64_t BackingStore::AllocRange(std::size_t want, std::size_t* got) {
  return impl_->bitmap->AllocRange(want, got);
}

void BackingStore::Free(std::uint64_t block) {
  assert(block < impl_->num_blocks);
  impl_->bitmap->Free(block);
}

Status BackingStore::ReadBlock(std::uint64_t block, MutablePage out) {
  const Impl& m = *impl_;
  auto where = [&] { return m.path + " block " + std::to_string(block); };
  if (block >= m.num_blocks) {
    return Status::OutOfRange(where() + ": beyond the last block " +
                              std::to_string(m.num_blocks - 1));
  }
  std::byte* buf = ThreadReadBuffer();
  if (buf == nullptr)
    return Status::ResourceExhausted("read buffer: " + where());
  ssize_t r;
  do {
    r = pread(m.fd, buf, kPageSize, static_cast<off_t>(block * kPageSize));
  } while (r < 0 && errno == EINTR);
  long result = r < 0 ? -errno : static_cast<long>(r);
  if (m.fault_hook) {
    result = m.fault_hook(
        BackingIo{
            .kind = BackingIo::Kind::kRead, .first_block = block, .blocks = 1},
        result);
  }
  if (result < 0) {
    return Status::IoError("read " + where() + ": " + std::strerror(-result));
  }
  if (result != static_cast<long>(kPageSize)) {
    return Status::IoError("short read of " + where() + ": " +
                           std::to_string(result) + " of 4096 bytes");
  }
  if (m.cipher != nullptr) {
    const Status s = m.cipher->Open(block, MutablePage(buf, kPageSize));
    if (!s.ok()) return Status(s.code(), m.path + ": " + s.message());
  }
  std::memcpy(out.data(), buf, kPageSize);
  return Status::Ok();
}

}  // namespace ztier
