// File: tools/ztier/log.cc
#include "log.h"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>

namespace ztier::tool {
namespace {

std::atomic<int> g_level{static_cast<int>(LogLevel::kInfo)};

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

void Log(LogLevel level, std::string_view message) {
  if (!LogEnabled(level)) return;
  std::string line;
  line.reserve(message.size() + 32);
  if (ToJournal()) {
    line += '<';
    line += static_cast<char>('0' + static_cast<int>(level));
    line += '>';
  } else {
    line += "ztier serve: ";
    switch (level) {
      case LogLevel::kError: line += "error: "; break;
      case LogLevel::kWarning: line += "warning: "; break;
      case LogLevel::kDebug: line += "debug: "; break;
      case LogLevel::kInfo: break;
    }
  }
  line += message;
  line += '\n';
  std::size_t done = 0;
  while (done < line.size()) {
    const ssize_t n = ::write(STDERR_FILENO, line.data() + done, line.size() - done);
    if (n <= 0) break;
    done += static_cast<std::size_t>(n);
  }
}

}  // namespace ztier::tool
