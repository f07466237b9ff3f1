// File: tools/ztier/log.cc
#include "log.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>

namespace ztier::tool {
namespace {

std::atomic<int> g_level{static_cast<int>(LogLevel::kInfo)};

bool ToJournal() {
  static const bool journal = std::getenv("JOURNAL_STREAM") != nullptr;
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
