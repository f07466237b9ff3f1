// File: tools/ztier/log.h
//
// The log of `ztier serve`: one line per event on stderr, which the journal
// collects under systemd. Levels, from the most to the least severe: error,
// warning, info (the default: connections, configuration, passes, limits),
// debug. `-q` shows warnings and errors only, `-v` adds debug.
//
// A line is "ztier serve: [LEVEL: ]MESSAGE" (no level word for info). When
// stderr is the journal ($JOURNAL_STREAM, set by systemd), the line starts
// instead with the syslog priority prefix "<N>" that journald reads
// (sd-daemon(3)), and without "ztier serve: ", which the journal adds.
//
// Thread safety: Log() may be called from any thread; a line is written
// with one writev(2), and its rest after a short write with more, under a
// lock, so lines never interleave. A signal neither drops nor cuts a line
// (EINTR is retried); any other error drops the rest of the line,
// unreported. Log() does not allocate: the engine logs where memory may
// have run out (a device at its mem_limit, on the IO path). Log() may also
// be called while the process exits, after main has returned (a ublk
// blocking DEL_DEV ending late, ublk/ublk_disk.h): its state has no
// destructor to run before then. SetLogLevel() at start-up.
#ifndef ZTIER_TOOLS_ZTIER_LOG_H_
#define ZTIER_TOOLS_ZTIER_LOG_H_

#include <optional>
#include <string>
#include <string_view>

namespace ztier::tool {

enum class LogLevel { kError = 3, kWarning = 4, kInfo = 6, kDebug = 7 };

// "error", "warning" (or "warn"), "info", "debug".
std::optional<LogLevel> ParseLogLevel(std::string_view name);

void SetLogLevel(LogLevel level);
bool LogEnabled(LogLevel level);
void Log(LogLevel level, std::string_view message);

}  // namespace ztier::tool

#endif  // ZTIER_TOOLS_ZTIER_LOG_H_
