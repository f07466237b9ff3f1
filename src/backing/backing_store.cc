// backing_store.cc: BackingStore::Open (the given file, or the real one at
// the path: platform/posix_backing_file.h), the accessors, block
// allocation and ReadBlock. The writer and NewWriter are in
// block_writer.cc.
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cassert>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backing_internal.h"
#include "platform/posix_backing_file.h"

namespace ztier {
namespace {

static_assert(BackingStore::kNoBlock == internal::BlockBitmap::kNoBlock);

// This thread's 4096-aligned read buffer (O_DIRECT needs the alignment; the
// caller's page need not have it); null while there is no memory for it
// (the next call tries again).
std::byte* ThreadReadBuffer() {
  struct Holder {
    void* p = nullptr;
    ~Holder() { std::free(p); }
  };
  thread_local Holder holder;
  if (holder.p == nullptr) holder.p = std::aligned_alloc(kPageSize, kPageSize);
  return static_cast<std::byte*>(holder.p);
}

constexpr std::uint64_t kMaxDiscardBytes = std::uint64_t{1} << 30;

}  // namespace

BackingStore::BackingStore() : impl_(std::make_unique<Impl>()) {}
BackingStore::~BackingStore() = default;

Result<std::unique_ptr<BackingStore>> BackingStore::Open(
    const BackingOptions& options) {
  std::shared_ptr<BackingFile> file = options.file;
  // The file opened at the path, before wrap_file: KeepFile's. A file it
  // made goes with it on any failure or throw from here on (making it
  // shared allocates: then the Result still holds it).
  std::shared_ptr<internal::PosixBackingFile> opened;
  bool created = false;
  if (file == nullptr) {
    if (options.path.empty()) {
      return Err(Status::InvalidArgument("backing store: path is empty"));
    }
    ZT_ASSIGN_OR_RETURN(
        opened, internal::OpenPosixBackingFile(options.path, options.size_bytes,
                                               options.direct, &created));
    file = opened;
  }
  if (options.wrap_file) file = options.wrap_file(file);
  const std::string path = file->name();
  std::unique_ptr<BackingStore> bs(new BackingStore());
  Impl& m = *bs->impl_;
  m.num_blocks = file->size() / kPageSize;
  if (m.num_blocks == 0) {
    return Err(Status::InvalidArgument(path + " of " +
                                       std::to_string(file->size()) +
                                       " bytes holds no 4096-byte block"));
  }
  m.bitmap = std::make_unique<internal::BlockBitmap>(m.num_blocks);
  m.discards = file->can_discard();
  if (m.discards) {
    m.pending.assign((m.num_blocks + 63) / 64, 0);
    m.taking.assign(m.pending.size(), 0);
  }
  if (options.encrypt) {
    auto cipher = internal::BlockCipher::Create(m.num_blocks);
    if (!cipher.has_value()) return Err(std::move(cipher.error()));
    m.cipher = std::move(*cipher);
  }
  m.file = std::move(file);
  m.created = created;
  m.opened = opened;
  return bs;
}

const std::string& BackingStore::path() const { return impl_->file->name(); }
std::uint64_t BackingStore::num_blocks() const { return impl_->num_blocks; }
bool BackingStore::created() const { return impl_->created; }
void BackingStore::KeepFile() noexcept {
  if (auto opened = impl_->opened.lock()) opened->Keep();
}
bool BackingStore::direct() const { return impl_->file->direct(); }
bool BackingStore::encrypted() const { return impl_->cipher != nullptr; }
std::uint64_t BackingStore::blocks_used() const {
  const std::uint64_t used = impl_->bitmap->Used();
  const std::uint64_t discarding = impl_->discarding.load();
  return used > discarding ? used - discarding : 0;
}

std::uint64_t BackingStore::lost_blocks() const {
  return impl_->file->lost_blocks();
}

std::uint64_t BackingStore::AllocRange(std::size_t want, std::size_t* got) {
  return impl_->bitmap->AllocRange(want, got);
}

void BackingStore::Free(std::uint64_t block) {
  assert(block < impl_->num_blocks);
  Impl& m = *impl_;
  if (!m.discards) {
    m.file->Forget({block * kPageSize, kPageSize});
    m.bitmap->Free(block);
    return;
  }
  const std::uint64_t bit = std::uint64_t{1} << (block & 63);
  std::lock_guard l(m.discard_mu);
  assert((m.pending[block >> 6] & bit) == 0 && "freeing a block twice");
  m.pending[block >> 6] |= bit;
  m.discarding.fetch_add(1);
}

void BackingStore::FreeUnwritten(std::uint64_t block) {
  assert(block < impl_->num_blocks);
  impl_->bitmap->Free(block);
}

std::uint64_t BackingStore::DiscardFreed() {
  Impl& m = *impl_;
  if (!m.discards || m.discarding.load() == 0) return 0;
  std::lock_guard pass(m.discard_pass_mu);
  {
    std::lock_guard l(m.discard_mu);
    m.pending.swap(m.taking);
  }
  // Until the discards are answered, the taken blocks go back to `pending`
  // on any way out (std::bad_alloc from the ranges, the flags or the
  // file's Discard): a block dropped here would be neither free nor asked
  // for again, lost to the store for good.
  struct PutBack {
    Impl& m;
    bool armed = true;
    ~PutBack() {
      if (!armed) return;
      std::lock_guard l(m.discard_mu);
      for (std::size_t w = 0; w < m.taking.size(); ++w) {
        m.pending[w] |= std::exchange(m.taking[w], 0);
      }
    }
  } put_back{m};
  // Runs of consecutive blocks, one discard each, of at most
  // kMaxDiscardBytes (an NBD request's length is 32 bits: proto.md,
  // "Request message"), in block order from discard_from round to the
  // block before it. A file may answer only the first ranges of a Discard
  // (the NBD file starts none after about timeout_ms:
  // nbd/nbd_backing_file.h); starting each pass where the one before
  // stopped, every range is reached within a few passes, where always
  // starting at block 0 would leave the high blocks waiting for as long as
  // frees keep coming at low ones faster than the remote answers.
  std::vector<BackingFile::Range> ranges;
  const std::uint64_t from = m.discard_from < m.num_blocks ? m.discard_from : 0;
  auto add_runs = [&](std::uint64_t lo, std::uint64_t hi) {  // [lo, hi)
    for (std::size_t w = lo / 64; w < (hi + 63) / 64; ++w) {
      std::uint64_t bits = m.taking[w];
      if (w == lo / 64) bits &= ~std::uint64_t{0} << (lo % 64);
      if (w == hi / 64) bits &= (std::uint64_t{1} << (hi % 64)) - 1;
      for (; bits != 0; bits &= bits - 1) {
        const std::uint64_t offset =
            (w * 64 + std::countr_zero(bits)) * kPageSize;
        if (!ranges.empty() &&
            ranges.back().offset + ranges.back().len == offset &&
            ranges.back().len < kMaxDiscardBytes) {
          ranges.back().len += kPageSize;
        } else {
          ranges.push_back({offset, kPageSize});
        }
      }
    }
  };
  add_runs(from, m.num_blocks);
  add_runs(0, from);
  if (ranges.empty()) return 0;
  std::unique_ptr<bool[]> sent(new bool[ranges.size()]());
  m.file->Discard(ranges, std::span<bool>(sent.get(), ranges.size()));
  put_back.armed = false;  // each block is freed or asked for again below
  // The next pass starts at the first range left unanswered, or, with
  // every range answered, after the last.
  std::size_t first_left = 0;
  while (first_left < ranges.size() && sent[first_left]) ++first_left;
  const BackingFile::Range& stop =
      ranges[first_left < ranges.size() ? first_left : ranges.size() - 1];
  m.discard_from = first_left < ranges.size()
                       ? stop.offset / kPageSize
                       : (stop.offset + stop.len) / kPageSize;
  std::fill(m.taking.begin(), m.taking.end(), 0);
  // `discarding` drops before the bitmap's count does, so blocks_used()
  // is never too low meanwhile.
  std::uint64_t freed = 0;
  for (std::size_t r = 0; r < ranges.size(); ++r) {
    if (sent[r]) freed += ranges[r].len / kPageSize;
  }
  m.discarding.fetch_sub(freed);
  std::lock_guard l(m.discard_mu);
  for (std::size_t r = 0; r < ranges.size(); ++r) {
    const std::uint64_t first = ranges[r].offset / kPageSize;
    for (std::uint64_t b = first; b < first + ranges[r].len / kPageSize; ++b) {
      if (sent[r]) {
        m.bitmap->Free(b);
      } else {  // asked for again by the next call
        m.pending[b >> 6] |= std::uint64_t{1} << (b & 63);
      }
    }
  }
  return freed;
}

Status BackingStore::ReadBlock(std::uint64_t block, MutablePage out) {
  const Impl& m = *impl_;
  const std::string& path = m.file->name();
  auto where = [&] { return path + " block " + std::to_string(block); };
  if (block >= m.num_blocks) {
    return Status::OutOfRange(where() + ": beyond the last block " +
                              std::to_string(m.num_blocks - 1));
  }
  std::byte* buf = ThreadReadBuffer();
  if (buf == nullptr)
    return Status::ResourceExhausted("read buffer: " + where());
  const long result =
      m.file->Read(block * kPageSize, std::span<std::byte>(buf, kPageSize));
  if (result < 0) {
    // ENOMEM and EAGAIN as status.h maps them (kResourceExhausted,
    // kBusy: a load may try again); EIO and every other errno of a failed
    // device kIoError, the errno kept (ErrnoNameOf names ETIMEDOUT, not EIO).
    const int err = static_cast<int>(-result);
    return PosixError("read " + where(), err,
                      err == ENOMEM || err == EAGAIN ? StatusCodeForErrno(err)
                                                     : StatusCode::kIoError);
  }
  if (result != static_cast<long>(kPageSize)) {
    return Status::IoError("short read of " + where() + ": " +
                           std::to_string(result) + " of 4096 bytes");
  }
  if (m.cipher != nullptr) {
    const Status s = m.cipher->Open(block, MutablePage(buf, kPageSize));
    if (!s.ok()) return Status(s.code(), path + ": " + s.message());
  }
  std::memcpy(out.data(), buf, kPageSize);
  return Status::Ok();
}

}  // namespace ztier
