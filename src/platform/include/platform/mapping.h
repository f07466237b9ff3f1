// mapping.h: anonymous memory mappings (mmap(2)) owned by a value, and the
// madvise(2) advice the engine gives on their pages.
//
//   ZT_ASSIGN_OR_RETURN(platform::Mapping m,
//                       platform::Mapping::Anonymous(bytes,
//                           platform::Commit::kOnTouch, "mmap slot table"));
//   ZT_RETURN_IF_ERROR(m.Populate("populate slot table"));
//   auto* slots = m.as<Slot>();   // zero-filled
//   ...                           // ~Mapping unmaps
//
// A Mapping is private, readable and writable, and zero-filled: every page
// reads as zeros until written. It is move-only; the moved-from Mapping is
// empty (data() == nullptr, size() == 0), and destroying or assigning over a
// non-empty one unmaps it. Commit says whether the kernel charges the whole
// size against overcommit at once (kCharged: a host that does not
// overcommit refuses it here) or only pages as they are touched (kOnTouch,
// MAP_NORESERVE: address space is nearly free, and a touch the kernel cannot
// back kills the process with SIGBUS or the OOM killer instead).
//
// Errors: Anonymous() and Populate() return PosixError(what, errno): what
// names the mapping, as "mmap cipher table", and the errno gives the code
// (ENOMEM: kResourceExhausted; an mmap's EAGAIN, memory past the
// locked-memory limit under mlockall(MCL_FUTURE), kResourceExhausted too,
// its errno kept). Advise() returns PosixError naming the
// advice, as "madvise(MADV_DONTFORK)".
//
// Thread safety: a Mapping is a value: one thread moves or destroys it.
// Its pages are plain memory, shared as the caller arranges; Advise() and
// Populate() may run on any thread while others use other pages.
#ifndef ZTIER_PLATFORM_MAPPING_H_
#define ZTIER_PLATFORM_MAPPING_H_

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "ztier/status.h"

namespace ztier::platform {

// How an anonymous mapping is charged; see the file comment. kUnlocked is
// kOnTouch, and not locked by the process's mlockall(MCL_FUTURE) either,
// which would fault in the whole mapping at once and keep every page of
// it: for memory whose pages are dropped while the process runs (a
// Region's).
enum class Commit { kOnTouch, kCharged, kUnlocked };

class Mapping {
 public:
  // Maps `bytes` (> 0) of zero-filled anonymous memory.
  static Result<Mapping> Anonymous(std::size_t bytes, Commit commit,
                                   std::string_view what);
  // A zero-filled table of `bytes` (> 0), as the store's slot and unit
  // tables: with `populate` (a store that must not fault later) charged
  // and faulted in now, else kOnTouch. Errors name "mmap WHAT" or
  // "populate WHAT".
  static Result<Mapping> Table(std::size_t bytes, bool populate,
                               std::string_view what);
  // Maps `bytes` of the file or device `fd` at `offset` (page-aligned),
  // shared and read-only (PROT_READ, MAP_SHARED): a device's memory the
  // kernel writes and the process reads, as ublk's descriptor arrays
  // (platform/ublk.h). Writing through data() faults.
  static Result<Mapping> SharedReadOnly(int fd, std::uint64_t offset,
                                        std::size_t bytes,
                                        std::string_view what);

  Mapping() = default;
  Mapping(Mapping&& other) noexcept;
  Mapping& operator=(Mapping&& other) noexcept;
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  ~Mapping();

  std::byte* data() const { return data_; }
  std::size_t size() const { return size_; }
  bool empty() const { return data_ == nullptr; }
  template <typename T>
  T* as() const {
    return reinterpret_cast<T*>(data_);
  }

  // Faults every page in, writable, so that none faults later
  // (MADV_POPULATE_WRITE). On a kernel before 5.14, which does not know
  // that advice, writes one byte of each page instead. An error (ENOMEM)
  // leaves the pages populated so far.
  Status Populate(std::string_view what);

  // Gives up ownership without unmapping: the memory stays mapped for the
  // rest of the process (for pages the kernel may still be using). Returns
  // the address; the Mapping is empty after.
  std::byte* Leak();

 private:
  Mapping(std::byte* data, std::size_t size) : data_(data), size_(size) {}
  void Unmap();

  std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

// Advice on a page-aligned range of a mapping.
enum class Advice {
  kDiscard,        // MADV_DONTNEED: drop the pages; they read as zeros again
  kPopulateWrite,  // MADV_POPULATE_WRITE: fault them in now (Linux 5.14+)
  kHugePages,      // MADV_HUGEPAGE: back them with huge pages where it can
  kNoHugePages,    // MADV_NOHUGEPAGE: never with huge pages
  kDontFork,       // MADV_DONTFORK: a fork()ed child does not inherit them
};
Status Advise(void* addr, std::size_t bytes, Advice advice);

}  // namespace ztier::platform

#endif  // ZTIER_PLATFORM_MAPPING_H_
