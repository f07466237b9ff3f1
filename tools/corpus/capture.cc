// capture.cc: a page corpus from a running process (capture.h).
#include "corpus/capture.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "platform/read_file.h"

namespace ztier::corpus {
namespace {

constexpr std::uint64_t kPmPresent = 1ull << 63;
constexpr std::uint64_t kPmSwapped = 1ull << 62;
constexpr std::uint64_t kPmPfnMask = (1ull << 55) - 1;
constexpr std::uint64_t kKpfZeroPage = 1ull << 24;  // KPF_ZERO_PAGE
// Pages read by one process_vm_readv() call: its remote iovecs are at most
// IOV_MAX, and adjacent pages share one.
constexpr std::size_t kReadBatch = 256;

std::string Proc(pid_t pid, const char* what) {
  return "/proc/" + std::to_string(pid) + "/" + what;
}

const char* ErrnoName(int err) {
  switch (err) {
    case EPERM: return "EPERM";
    case EACCES: return "EACCES";
    case ESRCH: return "ESRCH";
    case ENOENT: return "ENOENT";
    case EFAULT: return "EFAULT";
    case ENOMEM: return "ENOMEM";
    case EIO: return "EIO";
    default: return "errno";
  }
}

// "ERRNO: what: strerror" with the code PosixError gives `err`.
Status Errno(const std::string& what, int err) {
  const Status s = PosixError(what, err);
  return Status(s.code(), std::string(ErrnoName(err)) + ": " + s.message());
}

Status Exited(pid_t pid) {
  return Status::NotFound("ESRCH: process " + std::to_string(pid) +
                          " exited during capture; no corpus written");
}

Status NotPermitted(pid_t pid, const std::string& how) {
  struct stat st{};
  std::string owner;
  if (::stat(Proc(pid, "").c_str(), &st) == 0) {
    owner = " (owned by uid " + std::to_string(st.st_uid) + ")";
  }
  return Status::PermissionDenied(
      "EPERM: not permitted to read the memory of process " +
      std::to_string(pid) + owner + ": " + how +
      ". Run as the process's user or as root (CAP_SYS_PTRACE); see "
      "/proc/sys/kernel/yama/ptrace_scope where Yama is enabled");
}

// The whole of a /proc file (ReadRegularFile; no mappings list nears the
// bound); errno on failure, 0 for one that has none.
Result<std::string> ReadSmallFile(const std::string& path, int* err) {
  auto text = platform::ReadRegularFile(path, std::size_t{1} << 30, "read");
  if (!text.has_value()) {
    *err = text.error().posix_errno();
    if (*err != 0) return Err(Errno("read " + path, *err));
  }
  return text;
}

// pread() of exactly `len` bytes: 0, or the errno (0 never; ENODATA for an
// early end of file, which is what a process's /proc files give once it has
// exited).
int ReadFull(int fd, void* buf, std::size_t len, off_t off) {
  auto* p = static_cast<char*>(buf);
  while (len > 0) {
    const ssize_t r = ::pread(fd, p, len, off);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return errno;
    if (r == 0) return ENODATA;
    p += r;
    len -= static_cast<std::size_t>(r);
    off += r;
  }
  return 0;
}

// Whether the process has exited: gone, or a zombie whose memory is gone.
bool ProcessGone(pid_t pid) {
  if (::kill(pid, 0) != 0 && errno == ESRCH) return true;
  int err = 0;
  auto stat = ReadSmallFile(Proc(pid, "stat"), &err);
  if (!stat.has_value()) return err == ENOENT || err == ESRCH;
  // "PID (comm) S ...": the state follows the last ')'.
  const auto paren = stat->rfind(')');
  if (paren == std::string::npos || paren + 2 >= stat->size()) return false;
  const char state = (*stat)[paren + 2];
  return state == 'Z' || state == 'X';
}

bool ParseHex(std::string_view s, std::uint64_t* out) {
  if (s.empty() || s.size() > 16) return false;
  std::uint64_t v = 0;
  for (char c : s) {
    int d;
    if (c >= '0' && c <= '9') d = c - '0';
    else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
    else return false;
    v = v << 4 | static_cast<std::uint64_t>(d);
  }
  *out = v;
  return true;
}

// The next space-separated field of *s (and drops it from *s).
std::string_view NextField(std::string_view* s) {
  const auto start = s->find_first_not_of(' ');
  if (start == std::string_view::npos) {
    *s = {};
    return {};
  }
  s->remove_prefix(start);
  const auto end = s->find(' ');
  const std::string_view f = s->substr(0, end);
  s->remove_prefix(end == std::string_view::npos ? s->size() : end);
  return f;
}

bool SameFilled(const std::byte* page, bool* zero) {
  std::uint64_t first;
  std::memcpy(&first, page, 8);
  for (std::size_t off = 8; off < kPageSize; off += 8) {
    std::uint64_t w;
    std::memcpy(&w, page + off, 8);
    if (w != first) return false;
  }
  *zero = first == 0;
  return true;
}

// Where an eligible page lives: its address and its mapping.
struct Eligible {
  std::uint64_t addr;
  std::uint32_t mapping;
};

}  // namespace

std::string_view MappingSetName(MappingSet set) {
  switch (set) {
    case MappingSet::kAnon: return "anon";
    case MappingSet::kFile: return "file";
    case MappingSet::kAll: return "all";
  }
  return "anon";
}

Result<MappingSet> ParseMappingSet(std::string_view name) {
  for (MappingSet s : {MappingSet::kAnon, MappingSet::kFile, MappingSet::kAll}) {
    if (name == MappingSetName(s)) return s;
  }
  return Err(Status::InvalidArgument("unknown mapping set '" +
                                     std::string(name) +
                                     "' (known: anon, file, all)"));
}

bool ParseMapsLine(std::string_view line, CapturedMapping* out) {
  // start-end perms offset dev inode [name]
  std::string_view rest = line;
  const std::string_view range = NextField(&rest);
  const std::string_view perms = NextField(&rest);
  const std::string_view offset = NextField(&rest);
  const std::string_view dev = NextField(&rest);
  const std::string_view inode = NextField(&rest);
  const auto dash = range.find('-');
  if (dash == std::string_view::npos || perms.size() != 4 || offset.empty() ||
      dev.empty() || inode.empty()) {
    return false;
  }
  CapturedMapping m;
  if (!ParseHex(range.substr(0, dash), &m.start) ||
      !ParseHex(range.substr(dash + 1), &m.end) || m.end <= m.start ||
      m.start % kPageSize != 0 || m.end % kPageSize != 0) {
    return false;
  }
  m.perms = std::string(perms);
  const auto name_start = rest.find_first_not_of(' ');
  if (name_start != std::string_view::npos) {
    m.name = std::string(rest.substr(name_start));
  }
  *out = std::move(m);
  return true;
}

bool InMappingSet(const CapturedMapping& m, MappingSet set) {
  if (m.perms.size() != 4 || m.perms[0] != 'r') return false;
  const bool special = m.name.starts_with("[");
  const bool anon_named = m.name == "[heap]" || m.name.starts_with("[stack") ||
                          m.name.starts_with("[anon:");
  const bool anon = m.perms[3] == 'p' && (m.name.empty() || anon_named);
  const bool file = !m.name.empty() && !special;
  switch (set) {
    case MappingSet::kAnon: return anon;
    case MappingSet::kFile: return file;
    case MappingSet::kAll: return anon || file;
  }
  return false;
}

namespace {

// A file descriptor closed when it goes out of scope; -1 when none.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// Whether `pid` exists and we may read its memory, as process_vm_readv()
// checks it: one byte at address 0 fails with ESRCH (no process), EPERM
// (not permitted) or, for a process we may read, EFAULT (nothing there).
Status CheckReadable(pid_t pid) {
  char byte;
  iovec local{&byte, 1};
  iovec remote{nullptr, 1};
  if (::process_vm_readv(pid, &local, 1, &remote, 1, 0) >= 0) {
    return Status::Ok();
  }
  if (errno == ESRCH) {
    // No process, or one without an address space (mm_access() gives
    // ESRCH for both): /proc/PID tells them apart.
    int err = 0;
    auto stat = ReadSmallFile(Proc(pid, "stat"), &err);
    const auto paren = stat.has_value() ? stat->rfind(')') : std::string::npos;
    if (paren == std::string::npos || paren + 2 >= stat->size()) {
      return Status::NotFound("ESRCH: no process " + std::to_string(pid));
    }
    const char state = (*stat)[paren + 2];
    return Status::NotFound(
        "ESRCH: process " + std::to_string(pid) +
        (state == 'Z' || state == 'X'
             ? " has exited (a zombie): its memory is gone"
             : " has no user memory to capture (a kernel thread)"));
  }
  if (errno == EPERM) {
    return NotPermitted(pid, "process_vm_readv: Operation not permitted");
  }
  if (errno == ENOSYS) {
    return Status::Unsupported(
        "ENOSYS: process_vm_readv is not available on this kernel");
  }
  return Status::Ok();
}

// The error of a /proc/PID file that could not be opened or read.
Status ProcFileError(pid_t pid, const char* what, int err, Status error) {
  if (err == ENOENT || err == ESRCH) return Exited(pid);
  if (err == EACCES || err == EPERM) {
    return NotPermitted(pid, std::string("open /proc/PID/") + what + ": " +
                                 std::strerror(err));
  }
  return error;
}

// c->comm, c->cmdline, and the mappings of `set` from /proc/PID/maps.
Status ReadMappings(pid_t pid, MappingSet set, Capture* c) {
  int err = 0;
  if (auto comm = ReadSmallFile(Proc(pid, "comm"), &err); comm.has_value()) {
    c->comm = comm->substr(0, comm->find('\n'));
  }
  if (auto cmd = ReadSmallFile(Proc(pid, "cmdline"), &err); cmd.has_value()) {
    c->cmdline = *cmd;
    while (!c->cmdline.empty() && c->cmdline.back() == '\0') {
      c->cmdline.pop_back();
    }
    std::replace(c->cmdline.begin(), c->cmdline.end(), '\0', ' ');
  }
  auto maps = ReadSmallFile(Proc(pid, "maps"), &err);
  if (!maps.has_value()) return ProcFileError(pid, "maps", err, maps.error());
  std::string_view text = *maps;
  while (!text.empty()) {
    const auto nl = text.find('\n');
    const std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    CapturedMapping m;
    if (line.empty()) continue;
    if (!ParseMapsLine(line, &m)) {
      return Status::IoError(Proc(pid, "maps") + ": unexpected line '" +
                             std::string(line) + "'");
    }
    if (InMappingSet(m, set)) c->considered.push_back(std::move(m));
  }
  if (c->considered.empty() && maps->empty()) return Exited(pid);
  return Status::Ok();
}

// Counts one present page at pfn as the kernel's zero page (through
// /proc/kpageflags, when readable): true when it is one.
bool CountZeroPage(int kpf, std::uint64_t pfn, CapturedMapping* m,
                   Capture* c) {
  std::uint64_t flags = 0;
  if (pfn == 0 || kpf < 0 ||
      ReadFull(kpf, &flags, sizeof(flags),
               static_cast<off_t>(pfn * sizeof(flags))) != 0) {
    return false;
  }
  c->zero_page_known = true;
  if ((flags & kKpfZeroPage) == 0) return false;
  ++m->zero_page;
  ++c->zero_page;
  return true;
}

// The pages of the considered mappings that are in memory or swap (and not
// the zero page), from /proc/PID/pagemap, counting the others in *c.
Result<std::vector<Eligible>> ScanPagemap(pid_t pid, Capture* c) {
  const std::string path = Proc(pid, "pagemap");
  const Fd pm(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (pm.get() < 0) {
    const int e = errno;
    return Err(ProcFileError(pid, "pagemap", e, Errno("open " + path, e)));
  }
  const Fd kpf(::open("/proc/kpageflags", O_RDONLY | O_CLOEXEC));
  std::vector<Eligible> eligible;
  std::vector<std::uint64_t> entries;
  for (std::uint32_t mi = 0; mi < c->considered.size(); ++mi) {
    CapturedMapping& m = c->considered[mi];
    const std::uint64_t n = (m.end - m.start) / kPageSize;
    // In slices, so that a huge sparse mapping needs no huge buffer.
    constexpr std::uint64_t kSlice = 1 << 16;
    for (std::uint64_t first = 0; first < n; first += kSlice) {
      const std::uint64_t count = std::min(kSlice, n - first);
      entries.resize(count);
      const off_t off = static_cast<off_t>((m.start / kPageSize + first) *
                                           sizeof(std::uint64_t));
      if (const int e = ReadFull(pm.get(), entries.data(),
                                 count * sizeof(std::uint64_t), off);
          e != 0) {
        if (e == ESRCH || e == ENODATA || ProcessGone(pid)) {
          return Err(Exited(pid));
        }
        return Err(Errno("read " + path, e));
      }
      for (std::uint64_t i = 0; i < count; ++i) {
        const std::uint64_t e = entries[i];
        if ((e & (kPmPresent | kPmSwapped)) == 0) {
          ++c->untouched;
          continue;
        }
        if (e & kPmSwapped) {
          ++m.swapped;
        } else {
          ++m.present;
          if (CountZeroPage(kpf.get(), e & kPmPfnMask, &m, c)) continue;
        }
        eligible.push_back({m.start + (first + i) * kPageSize, mi});
      }
    }
  }
  return eligible;
}

// A fixed fractional stride of `want` pages over `eligible`.
std::vector<Eligible> Sample(const std::vector<Eligible>& eligible,
                             std::size_t want) {
  std::vector<Eligible> chosen(want);
  for (std::size_t i = 0; i < want; ++i) {
    chosen[i] = eligible[static_cast<std::size_t>(
        static_cast<std::uint64_t>(i) * eligible.size() / want)];
  }
  return chosen;
}

// Reads chosen[first, first + count) into `out`, one page at a time,
// skipping those that went away (EFAULT) since pagemap. Returns the pages
// read.
Result<std::size_t> ReadOneByOne(pid_t pid, std::span<const Eligible> chosen,
                                 std::byte* out, Capture* c) {
  std::size_t kept = 0;
  for (const Eligible& page : chosen) {
    iovec local{out + kept * kPageSize, kPageSize};
    iovec remote{reinterpret_cast<void*>(page.addr), kPageSize};
    const ssize_t r = ::process_vm_readv(pid, &local, 1, &remote, 1, 0);
    if (r < 0 && errno == ESRCH) return Err(Exited(pid));
    if (r == static_cast<ssize_t>(kPageSize)) {
      ++c->considered[page.mapping].taken;
      ++kept;
    } else if (r < 0 && errno != EFAULT && errno != ENOMEM) {
      return Err(Errno("process_vm_readv process " + std::to_string(pid),
                       errno));
    } else {
      ++c->vanished;
    }
  }
  return kept;
}

// Reads the chosen pages, kReadBatch to a process_vm_readv() call (adjacent
// pages share an iovec). Returns their bytes, the pages that went away
// left out.
Result<std::vector<std::byte>> ReadPages(pid_t pid,
                                         const std::vector<Eligible>& chosen,
                                         const CaptureOptions& options,
                                         Capture* c) {
  const std::size_t want = chosen.size();
  std::vector<std::byte> bytes(want * kPageSize);
  std::size_t kept = 0;  // pages in bytes so far
  for (std::size_t first = 0; first < want; first += kReadBatch) {
    const std::size_t count = std::min(kReadBatch, want - first);
    std::vector<iovec> remote;
    for (std::size_t i = first; i < first + count; ++i) {
      void* addr = reinterpret_cast<void*>(chosen[i].addr);
      if (!remote.empty() &&
          static_cast<char*>(remote.back().iov_base) + remote.back().iov_len ==
              addr) {
        remote.back().iov_len += kPageSize;
      } else {
        remote.push_back({addr, kPageSize});
      }
    }
    iovec local{bytes.data() + kept * kPageSize, count * kPageSize};
    const ssize_t r = ::process_vm_readv(pid, &local, 1, remote.data(),
                                         remote.size(), 0);
    if (r < 0 && errno == ESRCH) return Err(Exited(pid));
    if (r < 0 && errno == EPERM) {
      return Err(NotPermitted(pid, "process_vm_readv: Operation not permitted"));
    }
    if (r == static_cast<ssize_t>(count * kPageSize)) {
      for (std::size_t i = first; i < first + count; ++i) {
        ++c->considered[chosen[i].mapping].taken;
      }
      kept += count;
    } else {
      ZT_ASSIGN_OR_RETURN(
          const std::size_t n,
          ReadOneByOne(pid, std::span(chosen).subspan(first, count),
                       bytes.data() + kept * kPageSize, c));
      kept += n;
    }
    if (options.on_progress) options.on_progress("read", first + count, want);
  }
  bytes.resize(kept * kPageSize);
  return bytes;
}

}  // namespace

Result<Capture> CaptureProcess(pid_t pid, const CaptureOptions& options) {
  if (options.max_pages == 0) {
    return Err(Status::InvalidArgument("max_pages must be at least 1"));
  }
  if (pid <= 0) {
    return Err(Status::InvalidArgument("bad process id " +
                                       std::to_string(pid)));
  }
  const std::string who = "process " + std::to_string(pid);
  ZT_RETURN_IF_ERROR(CheckReadable(pid));
  Capture c;
  c.pid = pid;
  c.mappings = options.mappings;
  ZT_RETURN_IF_ERROR(ReadMappings(pid, options.mappings, &c));
  ZT_ASSIGN_OR_RETURN(std::vector<Eligible> eligible, ScanPagemap(pid, &c));
  c.eligible = eligible.size();
  if (eligible.empty()) {
    if (ProcessGone(pid)) return Err(Exited(pid));
    return Err(Status::InvalidArgument(
        who + " has no " + std::string(MappingSetName(options.mappings)) +
        " pages in memory or swap to capture"));
  }
  const std::vector<Eligible> chosen = Sample(
      eligible, std::min<std::size_t>(options.max_pages, eligible.size()));
  eligible = {};
  if (options.on_progress) options.on_progress("pagemap", 0, chosen.size());
  ZT_ASSIGN_OR_RETURN(std::vector<std::byte> bytes,
                      ReadPages(pid, chosen, options, &c));
  // A process that has exited is gone whatever we read: its last pages may
  // have come from a dying address space.
  if (ProcessGone(pid)) return Err(Exited(pid));
  if (bytes.empty()) {
    return Err(Status::InvalidArgument(who + ": every chosen page was "
                                       "unmapped before it could be read"));
  }
  for (std::size_t i = 0; i < bytes.size() / kPageSize; ++i) {
    bool zero = false;
    if (SameFilled(bytes.data() + i * kPageSize, &zero)) {
      ++(zero ? c.zero_filled : c.same_filled);
    }
  }
  c.pages = PageSet(c.comm.empty() ? who : c.comm, std::move(bytes));
  return c;
}

}  // namespace ztier::corpus
