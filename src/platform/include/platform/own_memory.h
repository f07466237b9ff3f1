// own_memory.h: OwnMemory, reads of this process's own pages that never
// wait on a page fault, through /proc/self/mem.
//
//   ZT_ASSIGN_OR_RETURN(platform::OwnMemory mem, platform::OwnMemory::Open());
//   std::size_t got = mem.ReadPages(addr, pages, out);  // pages [0, got) read
//
// A thread that resolves userfaultfd faults cannot touch memory of its own
// range that has no page: the fault would wait for that very thread (or
// for one waiting on a lock it holds). An application may drop such a page
// at any moment (madvise(MADV_DONTNEED)). A read through /proc/self/mem
// instead reaches pages with the kernel's get_user_pages_remote() and no
// FAULT_FLAG_ALLOW_RETRY, for which handle_userfault() returns
// VM_FAULT_SIGBUS (fs/userfaultfd.c) rather than waiting: the read stops at
// that page. Pages that are present, or swapped out, read as plain memory.
//
// Errors: Open() returns PosixError("open /proc/self/mem", errno) (no /proc
// mounted: kNotFound).
//
// Thread safety: ReadPages may run on any number of threads at once; moving
// or destroying an OwnMemory needs them done.
#ifndef ZTIER_PLATFORM_OWN_MEMORY_H_
#define ZTIER_PLATFORM_OWN_MEMORY_H_

#include <cstddef>
#include <cstdint>

#include "platform/unique_fd.h"
#include "ztier/status.h"

namespace ztier::platform {

class OwnMemory {
 public:
  static Result<OwnMemory> Open();

  OwnMemory() = default;  // empty: ReadPages reads nothing

  bool empty() const { return fd_.get() < 0; }

  // Copies the 4 KiB pages [addr, addr + pages * 4096) (addr page-aligned)
  // to out, in order, and returns how many were copied: fewer than `pages`
  // when page number (return value) could not be read (no page there, in a
  // userfaultfd range, or not mapped at all). Never faults on the pages
  // read; `out` itself must be plain memory, not in a userfaultfd range
  // (the kernel's copy into it may fault). A kernel built with
  // CONFIG_DEBUG_VM logs a rate-limited stack for each page it refuses.
  std::size_t ReadPages(std::uintptr_t addr, std::size_t pages,
                        std::byte* out) const;

 private:
  explicit OwnMemory(int fd) : fd_(fd) {}

  UniqueFd fd_;
};

}  // namespace ztier::platform

#endif  // ZTIER_PLATFORM_OWN_MEMORY_H_
