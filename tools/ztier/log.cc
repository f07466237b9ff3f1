// File: tools/ztier/log.cc
#include "log.h"

#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <type_traits>

namespace ztier::tool {
namespace {

std::atomic<int> g_level{static_cast<int>(LogLevel::kInfo)};
// Held while a line is written: its rest, after a short write, follows it
// with no other thread's line in between.
std::mutex g_write_mu;
// Log() runs during the process's exit too (log.h): nothing it uses may
// be torn down by a static destructor meanwhile.
static_assert(std::is_trivially_destructible_v<std::atomic<int>> &&
              std::is_trivially_destructible_v<std::mutex>);

// Whether stderr is the journal's stream: JOURNAL_STREAM ("DEV:INO") names
// it, and it still is stderr (sd-daemon(3)); a process that inherited the
// variable but writes its stderr elsewhere gets plain lines.
bool StderrIsJournal() {
  const char* env = std::getenv("JOURNAL_STREAM");
  if (env == nullptr) return false;
  unsigned long long dev = 0, ino = 0;
  if (std::sscanf(env, "%llu:%llu", &dev, &ino) != 2) return false;
  struct stat st {};
  return ::fstat(STDERR_FILENO, &st) == 0 &&
         static_cast<unsigned long long>(st.st_dev) == dev &&
         static_cast<unsigned long long>(st.st_ino) == ino;
}

bool ToJournal() {
  static const bool journal = StderrIsJournal();
  return journal;
}

}  // namespace

std::optional<LogLevel> ParseLogLevel(std::string_view name) {
  if (name == "error") return LogLevel::kError;
  if (name == "warning" || name == "warn") return LogLevel::kWarning;
  if (name == "info") return LogLevel::kInfo;
  if (name == "debug") return LogLevel::kDebug;
  return std::nullopt;
}

void SetLogLevel(LogLevel level) {
  g_level.store(static_cast<int>(level), std::memory_order_relaxed);
}

bool LogEnabled(LogLevel level) {
  return static_cast<int>(level) <= g_level.load(std::memory_order_relaxed);
}

namespace {

// A line's prefix on stderr.
std::string_view StderrPrefix(LogLevel level) {
  switch (level) {
    case LogLevel::kError:
      return "ztier serve: error: ";
    case LogLevel::kWarning:
      return "ztier serve: warning: ";
    case LogLevel::kDebug:
      return "ztier serve: debug: ";
    case LogLevel::kInfo:
      break;
  }
  return "ztier serve: ";
}

}  // namespace

void Log(LogLevel level, std::string_view message) {
  if (!LogEnabled(level)) return;
  const char journal[3] = {
      '<', static_cast<char>('0' + static_cast<int>(level)), '>'};
  const std::string_view prefix =
      ToJournal() ? std::string_view(journal, 3) : StderrPrefix(level);
  iovec iov[3] = {{const_cast<char*>(prefix.data()), prefix.size()},
                  {const_cast<char*>(message.data()), message.size()},
                  {const_cast<char*>("\n"), 1}};
  iovec* next = iov;
  int left = 3;
  // After a short write (a full pipe, a signal once some bytes went) the
  // rest; after EINTR (a signal before any) the same again. Any other error
  // (EAGAIN from a non-blocking stderr, EPIPE, EIO, ENOSPC), or a write of
  // nothing, drops what is left of the line: there is nowhere to report it.
  std::lock_guard<std::mutex> lock(g_write_mu);
  while (left > 0) {
    ssize_t n = ::writev(STDERR_FILENO, next, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    while (left > 0 && static_cast<std::size_t>(n) >= next->iov_len) {
      n -= static_cast<ssize_t>(next->iov_len);
      ++next;
      --left;
    }
    if (left > 0) {
      next->iov_base = static_cast<char*>(next->iov_base) + n;
      next->iov_len -= static_cast<std::size_t>(n);
    }
  }
}

}  // namespace ztier::tool
