// File: corpus/capture.h
//
// Capturing a page corpus from a running process: the pages a workload
// really holds, as ztier would be asked to store them.
//
//   auto c = corpus::CaptureProcess(pid, {.mappings = MappingSet::kAnon,
//                                         .max_pages = 4096});
//   if (!c) ... c.error() ...       // kNotFound, kPermissionDenied, ...
//   corpus::WritePageSet(path, c->pages);
//
// What is read (proc(5), Documentation/admin-guide/mm/pagemap.rst):
// - /proc/PID/maps names the mappings. kAnon keeps the private anonymous
//   ones: no file, or `[heap]`, `[stack]`, `[anon:NAME]`; never the kernel's
//   `[vdso]`, `[vvar]`, `[vsyscall]` and the like. kFile keeps the mappings
//   of files (shared or private). kAll both. A mapping without read
//   permission is skipped (guard pages).
// - /proc/PID/pagemap keeps a page when it is present (bit 63) or swapped
//   (bit 62): a page the process never touched is not taken. Where the page
//   frame numbers are visible (CAP_SYS_ADMIN) and /proc/kpageflags is
//   readable, a present page that maps the kernel's shared zero page
//   (KPF_ZERO_PAGE, bit 24) is memory read but never written: it is counted
//   and not taken.
// - The pages are read with process_vm_readv(2). Nothing is written to the
//   target; it is not stopped (stop it first for a consistent picture).
//   Reading a swapped page brings it back into the target's memory, as any
//   reader of /proc/PID/mem would.
//
// With more than `max_pages` eligible pages, page floor(i * P / max_pages)
// of the P eligible ones is taken for i = 0 .. max_pages-1, in address
// order: a fixed, fractional stride over the whole address space, so that
// the sample does not line up with power-of-two allocator layouts.
//
// Errors (the message names the process and, first, the errno, as in
// "EPERM: ..."):
//   kNotFound          no such process (ESRCH), or it exited during the
//                      capture ("exited during capture").
//   kPermissionDenied  this process may not read the target's memory
//                      (EPERM: another user's process without
//                      CAP_SYS_PTRACE, or a Yama ptrace_scope that forbids
//                      it).
//   kInvalidArgument   a bad option (max_pages 0), or no eligible page.
//   kIoError           any other failure reading /proc.
//
// Thread safety: plain functions; the hooks run on the calling thread.
#ifndef ZTIER_CORPUS_CAPTURE_H_
#define ZTIER_CORPUS_CAPTURE_H_

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "corpus/corpus.h"
#include "ztier/status.h"

namespace ztier::corpus {

enum class MappingSet { kAnon, kFile, kAll };

// "anon", "file", "all"; and back (kInvalidArgument naming the choices).
std::string_view MappingSetName(MappingSet set);
Result<MappingSet> ParseMappingSet(std::string_view name);

struct CaptureOptions {
  MappingSet mappings = MappingSet::kAnon;
  std::size_t max_pages = 4096;
  // Called after the eligible pages are known (stage "pagemap") and after
  // each batch of pages read (stage "read"), with the pages read so far and
  // the pages to read. Tests use it to act between the stages; the tool
  // shows progress with it.
  std::function<void(std::string_view stage, std::size_t done,
                     std::size_t total)>
      on_progress;
};

// One mapping that the capture considered, as /proc/PID/maps shows it.
struct CapturedMapping {
  std::uint64_t start = 0;
  std::uint64_t end = 0;
  std::string perms;  // "rw-p"
  std::string name;   // path, "[heap]", or "" for an unnamed mapping
  std::uint64_t present = 0;    // pages present in memory
  std::uint64_t swapped = 0;    // pages swapped out
  std::uint64_t zero_page = 0;  // present pages on the shared zero page
  std::uint64_t taken = 0;      // pages in the corpus
};

struct Capture {
  PageSet pages;
  pid_t pid = 0;
  std::string comm;     // /proc/PID/comm
  std::string cmdline;  // /proc/PID/cmdline, NULs as spaces
  MappingSet mappings = MappingSet::kAnon;
  std::vector<CapturedMapping> considered;  // the mappings of the set
  std::uint64_t untouched = 0;   // pages neither present nor swapped
  std::uint64_t zero_page = 0;   // present pages on the shared zero page
  std::uint64_t eligible = 0;    // present or swapped, not the zero page
  std::uint64_t vanished = 0;    // eligible and chosen, unmapped before read
  bool zero_page_known = false;  // page frames and kpageflags were readable
  // Of the pages taken: all-zero ones and same-filled ones (every 8-byte word
  // equal and non-zero, what zram stores without compressing).
  std::uint64_t zero_filled = 0;
  std::uint64_t same_filled = 0;
};

Result<Capture> CaptureProcess(pid_t pid, const CaptureOptions& options);

// One line of /proc/PID/maps, parsed; false when it is malformed.
bool ParseMapsLine(std::string_view line, CapturedMapping* out);
// Whether a mapping belongs to `set` (see above).
bool InMappingSet(const CapturedMapping& m, MappingSet set);

}  // namespace ztier::corpus

#endif  // ZTIER_CORPUS_CAPTURE_H_
