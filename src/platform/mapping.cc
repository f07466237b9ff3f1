// mapping.cc: Mapping and Advise (platform/mapping.h).
#include "platform/mapping.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cassert>
#include <cerrno>
#include <string>
#include <utility>

namespace ztier::platform {
namespace {

struct AdviceName {
  int value;
  const char* text;
};

AdviceName Lookup(Advice advice) {
  switch (advice) {
    case Advice::kDiscard: return {MADV_DONTNEED, "madvise(MADV_DONTNEED)"};
    case Advice::kPopulateWrite:
      return {MADV_POPULATE_WRITE, "madvise(MADV_POPULATE_WRITE)"};
    case Advice::kHugePages: return {MADV_HUGEPAGE, "madvise(MADV_HUGEPAGE)"};
    case Advice::kNoHugePages:
      return {MADV_NOHUGEPAGE, "madvise(MADV_NOHUGEPAGE)"};
    case Advice::kDontFork: return {MADV_DONTFORK, "madvise(MADV_DONTFORK)"};
  }
  return {MADV_NORMAL, "madvise"};
}

// An anonymous mmap refused: its EAGAIN is memory past the locked-memory
// limit (mmap(2): RLIMIT_MEMLOCK under mlockall(MCL_FUTURE)), memory that
// cannot be had as ENOMEM is, not a busy resource to try again.
Status MapError(std::string_view what, int err) {
  return PosixError(
      what, err,
      err == EAGAIN ? StatusCode::kResourceExhausted : StatusCodeForErrno(err));
}

}  // namespace

Result<Mapping> Mapping::Anonymous(std::size_t bytes, Commit commit,
                                   std::string_view what) {
  int flags = MAP_PRIVATE | MAP_ANONYMOUS;
  if (commit != Commit::kCharged) flags |= MAP_NORESERVE;
  if (commit != Commit::kUnlocked) {
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, flags, -1, 0);
    if (p == MAP_FAILED) return Err(MapError(what, errno));
    return Mapping(static_cast<std::byte*>(p), bytes);
  }
  // Under mlockall(MCL_FUTURE) a new mapping is locked, and populated
  // whole at mmap unless it is inaccessible (mm/gup.c, __mm_populate,
  // ignores the fault on PROT_NONE). So: PROT_NONE, munlock (VM_LOCKED
  // off), then readable and writable, which populates nothing once it is
  // not locked (mm/mprotect.c, mprotect_fixup).
  void* p = ::mmap(nullptr, bytes, PROT_NONE, flags, -1, 0);
  if (p == MAP_FAILED) return Err(MapError(what, errno));
  Mapping m(static_cast<std::byte*>(p), bytes);
  if (::munlock(p, bytes) != 0) return Err(PosixError(what, errno));
  if (::mprotect(p, bytes, PROT_READ | PROT_WRITE) != 0) {
    return Err(PosixError(what, errno));
  }
  return m;
}

Result<Mapping> Mapping::Table(std::size_t bytes, bool populate,
                               std::string_view what) {
  ZT_ASSIGN_OR_RETURN(
      Mapping m,
      Anonymous(bytes, populate ? Commit::kCharged : Commit::kOnTouch,
                "mmap " + std::string(what)));
  if (populate) ZT_RETURN_IF_ERROR(m.Populate("populate " + std::string(what)));
  return m;
}

Result<Mapping> Mapping::SharedReadOnly(int fd, std::uint64_t offset,
                                        std::size_t bytes,
                                        std::string_view what) {
  void* p = ::mmap(nullptr, bytes, PROT_READ, MAP_SHARED, fd,
                   static_cast<off_t>(offset));
  if (p == MAP_FAILED) return Err(PosixError(what, errno));
  return Mapping(static_cast<std::byte*>(p), bytes);
}

Mapping::Mapping(Mapping&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)) {}

Mapping& Mapping::operator=(Mapping&& other) noexcept {
  if (this != &other) {
    Unmap();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

Mapping::~Mapping() { Unmap(); }

void Mapping::Unmap() {
  if (data_ == nullptr) return;
  // Fails only for a range that was never mapped: a broken contract.
  [[maybe_unused]] const int rc = ::munmap(data_, size_);
  assert(rc == 0);
  data_ = nullptr;
  size_ = 0;
}

std::byte* Mapping::Leak() {
  size_ = 0;
  return std::exchange(data_, nullptr);
}

Status Mapping::Populate(std::string_view what) {
  if (::madvise(data_, size_, MADV_POPULATE_WRITE) == 0) return Status::Ok();
  const int err = errno;
  if (err != EINVAL) return PosixError(what, err);
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  // Before Linux 5.14: a write to each page faults it in. The byte is
  // written back as it was, so memory in use keeps its contents.
  volatile char* bytes = static_cast<volatile char*>(static_cast<void*>(data_));
  for (std::size_t off = 0; off < size_; off += page) {
    bytes[off] = bytes[off];
  }
  return Status::Ok();
}

Status Advise(void* addr, std::size_t bytes, Advice advice) {
  const AdviceName a = Lookup(advice);
  if (::madvise(addr, bytes, a.value) == 0) return Status::Ok();
  return PosixError(a.text, errno);
}

}  // namespace ztier::platform
