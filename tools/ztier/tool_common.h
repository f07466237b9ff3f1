// File: tools/ztier/tool_common.h
//
// Small helpers that several ztier subcommands share: checking codec names
// and the --size flag, loading the --corpus file with a message that says
// how to pass one, and a private temporary folder (MakeTempDir, or TempDir,
// which removes it).
//
//   if (Status s = CheckCodecName(codec); !s.ok()) { ... s.message() ... }
//   auto size = ParseSizeFlag(size_text, 1 << 20, "1M");  // pages, rounded up
//   auto corpus = LoadCorpus(path);
//
// The messages carry no command name: the caller prints "<command>: " first.
//
// Thread safety: plain functions; no shared state.
#ifndef ZTIER_TOOLS_ZTIER_TOOL_COMMON_H_
#define ZTIER_TOOLS_ZTIER_TOOL_COMMON_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "corpus/corpus.h"
#include "ztier/status.h"

namespace ztier::tool {

// The corpora of the checkout this tool was built from (testdata/), which
// every corpus flag defaults to: the folder, and its anon-python corpus.
inline constexpr char kDefaultCorpusDir[] = ZTIER_TESTDATA_DIR;
inline constexpr char kDefaultCorpusFile[] =
    ZTIER_TESTDATA_DIR "/anon-python.pages.zst";

// "EBUSY: why": a Status as `ztier ctl` words an error, with its errno's
// name (StatusCodeErrnoName).
std::string ErrnoText(const Status& s);

// Prints "<command>: <message>" on stderr.
void PrintError(std::string_view command, const std::string& message);

// PrintError, then returns 1, the exit status of a runtime failure.
int ReportFailure(std::string_view command, const std::string& message);

// Prints "<command>: <message>\nRun '<command> --help' for usage." on
// stderr and returns 2, the exit status of bad usage.
int ReportUsageError(std::string_view command, const std::string& message);

// " (/abs/path)" when `path` is not already its absolute, normalized form;
// "" when it is or cannot be made absolute. Follows a path in a message.
std::string AbsoluteNote(const std::string& path);

// A backing_dev value as the server should get it: a relative path made
// absolute against this process's working directory (the caller's, not
// the server's); "", "none", an absolute path and a URI ("://") as given.
std::string BackingDevValue(const std::string& value);

// OK when CodecNames() holds `name`; else kInvalidArgument
// "unknown <noun> 'NAME' (known: a, b, c)".
Status CheckCodecName(std::string_view name, std::string_view noun = "codec");

// Appends each of `names` that *codecs lacks, in order, after checking it
// with CheckCodecName; stops at the first unknown one with its error.
Status AddCodecs(std::span<const std::string> names,
                 std::vector<std::string>* codecs);

// The --size value `text` in bytes, rounded up to whole pages.
// kInvalidArgument "--size TEXT: ..." when malformed or under `min` bytes
// (`min_text`, as "4K", names it in the message).
Result<std::uint64_t> ParseSizeFlag(const std::string& text, std::uint64_t min,
                                    std::string_view min_text);

// The corpus file at `path` (corpus::LoadPageSet). kNotFound, saying how to
// pass one with --corpus, when there is no such file; else LoadPageSet's
// error as "cannot load corpus PATH: <error>".
Result<corpus::PageSet> LoadCorpus(const std::string& path);

// Creates a private folder `<prefix>.XXXXXX` in the system's temporary
// folder (/tmp when it has none) and returns its path. The caller removes it.
Result<std::string> MakeTempDir(std::string_view prefix);

// A MakeTempDir folder, removed with everything in it when the object dies.
class TempDir {
 public:
  static Result<TempDir> Create(std::string_view prefix);
  TempDir(TempDir&& o) noexcept : path_(std::move(o.path_)) { o.path_.clear(); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir();
  const std::string& path() const { return path_; }

 private:
  explicit TempDir(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

}  // namespace ztier::tool

#endif  // ZTIER_TOOLS_ZTIER_TOOL_COMMON_H_
