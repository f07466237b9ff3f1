// File: tools/ztier/mem_lock.h
//
// LockProcessMemory(): what `ztier serve --mlock` does once its devices are
// made (their memory preallocated) and before it serves: keep every page of
// the process in RAM, so that a server that is the host's swap device is
// never itself paged out (to itself).
//
// How, and why that way:
//   1. mlockall(MCL_CURRENT): every page mapped now is faulted in and
//      locked: the binary's and libraries' code (also the parts not run
//      yet, such as error paths, which would otherwise be read from disk at
//      their first use, perhaps under memory pressure), the heap, the
//      devices' preallocated reserves and slot tables.
//   2. mlockall(MCL_CURRENT | MCL_FUTURE | MCL_ONFAULT) (Linux 4.4+):
//      mappings made from now on are locked too, each page as it is first
//      touched. Plain MCL_FUTURE would fault every new mapping in whole when
//      it is made: each thread's 8 MiB stack (a reader per NBD connection,
//      the workers), every malloc arena, and, on a device without a
//      reserve, every 1 GiB pool arena. With MCL_ONFAULT a thread stack
//      costs what the thread touches, and that stays locked.
// The kernel still counts each locked mapping's whole length against
// RLIMIT_MEMLOCK (it is what /proc/PID/status calls VmLck; VmRSS is what is
// resident), so without CAP_IPC_LOCK a finite `ulimit -l` runs out as
// threads start, and new mappings then fail. The report says so.
//
// Thread safety: call once, from the main thread, before starting threads
// that matter (they are locked anyway; this is about when their stacks
// are counted).
#ifndef ZTIER_TOOLS_ZTIER_MEM_LOCK_H_
#define ZTIER_TOOLS_ZTIER_MEM_LOCK_H_

#include <cstdint>
#include <string>

#include "ztier/status.h"

namespace ztier::tool {

struct MemoryLockReport {
  std::uint64_t locked_bytes = 0;    // VmLck after locking
  std::uint64_t resident_bytes = 0;  // VmRSS after locking
  bool cap_ipc_lock = false;         // the process has CAP_IPC_LOCK
  bool limit_unlimited = false;      // RLIMIT_MEMLOCK is infinity
  std::uint64_t limit_bytes = 0;     // RLIMIT_MEMLOCK (soft) otherwise
  // Empty, or why the lock may not hold as the server grows (a finite
  // RLIMIT_MEMLOCK without CAP_IPC_LOCK).
  std::string warning;
};

// Locks the process's memory as described above. Errors (kResourceExhausted
// for ENOMEM and EAGAIN, kUnsupported for EPERM and EINVAL) carry a message
// that says what to do: raise `ulimit -l` (LimitMEMLOCK= for a systemd
// unit), or run as root / with CAP_IPC_LOCK. On error nothing stays locked.
Result<MemoryLockReport> LockProcessMemory();

}  // namespace ztier::tool

#endif  // ZTIER_TOOLS_ZTIER_MEM_LOCK_H_
