// File: tools/ztier/flags.h
//
// A tiny command-line flag parser for the ztier tool's subcommands.
//
//   std::vector<std::string> codecs;
//   int runs = 5;
//   ztier::tool::FlagSet flags("ztier bench engine");
//   flags.AddList("codec", &codecs, "NAME", "codec to measure (repeatable)");
//   flags.AddInt("runs", &runs, "N", "measured runs");
//   ztier::Status s = flags.Parse(args);   // args: after the subcommand
//
// Accepted forms: `--flag value`, `--flag=value`, and for booleans `--flag`.
// A flag given a one-letter alias (Short) also takes `-x value` and `-xvalue`,
// and booleans cluster as getopt's do: `-bn` is `-b -n`; in a cluster, a
// letter that takes a value takes the rest of the word (`-bo NAME`, `-boNAME`).
// A list flag may be repeated and each value may be a comma list
// (`--codec lz4,zstd --codec lzo`). `--help`/`-h` are not flags here: the
// caller checks for them (HelpRequested) before or after Parse, or lets
// ParseCommandLine do both:
//
//   // 0 after --help (usage printed), 2 after a usage error (message printed)
//   if (auto rc = flags.ParseCommandLine(args, "what it does.")) return *rc;
//
// Errors (all kInvalidArgument, with a message naming the flag): an unknown
// flag, a missing value, a malformed or out-of-range number, a positional
// argument (no subcommand here takes any), a non-list flag given twice.
//
// Thread safety: a FlagSet is used by one thread; it writes through the
// pointers it was given, which must outlive Parse().
#ifndef ZTIER_TOOLS_ZTIER_FLAGS_H_
#define ZTIER_TOOLS_ZTIER_FLAGS_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ztier/status.h"

namespace ztier::tool {

class FlagSet {
 public:
  // `command` names the subcommand in messages and usage ("ztier bench
  // engine"); `synopsis` follows it on the usage line.
  explicit FlagSet(std::string command, std::string synopsis = "[flags]")
      : command_(std::move(command)), synopsis_(std::move(synopsis)) {}
  FlagSet(const FlagSet&) = delete;
  FlagSet& operator=(const FlagSet&) = delete;

  // Declares a flag. `value_name` is shown in the usage ("FILE", "N").
  void AddString(std::string name, std::string* out, std::string value_name,
                 std::string help);
  // A string naming a file the command will write: NotEmpty, and Parse()
  // refuses a path whose folder does not exist, so that a command that
  // runs for minutes does not find out only when it writes (or, for an
  // empty name, never: it would write nothing).
  void AddOutputFile(std::string name, std::string* out, std::string value_name,
                     std::string help);
  // Repeatable; each occurrence may be a comma list (SplitCommaList); empty
  // items are skipped.
  void AddList(std::string name, std::vector<std::string>* out,
               std::string value_name, std::string help);
  // A decimal integer in [min, max].
  void AddInt(std::string name, std::int64_t* out, std::string value_name,
              std::string help, std::int64_t min = 0,
              std::int64_t max = INT64_MAX);
  // `--name` alone sets true; `--name=true|false|1|0` also accepted.
  void AddBool(std::string name, bool* out, std::string help);
  // The flags declared after this call are listed in Usage() under
  // "<title>:" rather than "flags:", until the next Section(): a command
  // with many flags groups them by what they set.
  void Section(std::string title) { section_ = std::move(title); }
  // Gives the declared flag `name` the alias `-letter` (REQUIRES: declared,
  // the letter not taken, and not 'h', which means --help).
  void Short(std::string_view name, char letter);
  // Parse() refuses an empty value of the declared string flag `name`
  // ("--name: empty VALUE_NAME"): `--ctl "$SOCK"` with SOCK unset is a
  // mistake, never a request for the flag's default, which may name
  // another server's socket or nothing at all.
  void NotEmpty(std::string_view name);
  // Parse() calls `hook` once every flag is set and checked, in the order
  // added: the place for what a flag's own declaration must say about its
  // value before the command goes on (AddPlotFlag's warning that no charts
  // will be drawn). Not called after an error or for --help.
  void AfterParse(std::function<void()> hook);

  // Parses `args` (the words after the subcommand name). On error returns
  // kInvalidArgument; the outputs may then be partly written.
  Status Parse(std::span<const std::string_view> args);

  // Parse(), printing an error as "<message>\nRun '<command> --help' for
  // usage.\n" to stderr: then 2 (the usage exit status), else nullopt.
  std::optional<int> ParseOrUsageError(std::span<const std::string_view> args);

  // What a subcommand does with its words first. With --help or -h among
  // them, prints "<command>: <about>\n\n<Usage()>" to stdout and returns 0;
  // else ParseOrUsageError(args). nullopt: parsed, carry on.
  std::optional<int> ParseCommandLine(std::span<const std::string_view> args,
                                      std::string_view about);

  // Whether a flag named `name` was given during Parse().
  bool WasSet(std::string_view name) const;

  // The `command` given to the constructor ("ztier bench engine").
  const std::string& command() const { return command_; }

  // Usage text: "usage: <command> <synopsis>" and one line per flag, under
  // "flags:" or the heading of its Section().
  std::string Usage() const;

  // True when args hold `--help` or `-h` anywhere.
  static bool HelpRequested(std::span<const std::string_view> args);

 private:
  enum class Kind { kString, kList, kInt, kBool };
  struct Flag {
    std::string name;
    Kind kind;
    void* out;
    std::string value_name;
    std::string help;
    std::int64_t min = 0;
    std::int64_t max = 0;
    bool seen = false;
    char letter = 0;  // the -x alias; 0: none
    bool output_file = false;  // AddOutputFile
    bool not_empty = false;    // NotEmpty
    std::string section;       // Section() in force when declared
  };

  // Adds `flag` to the current Section().
  void Declare(Flag flag);
  Flag* Find(std::string_view name);
  // Parses the short-flag word args[*i] ("-b", "-bn", "-oNAME", "-o NAME").
  Status ParseShort(std::span<const std::string_view> args, std::size_t* i);
  Status Set(Flag& flag, std::string_view value);
  // Parse()'s last step: the folder of every output file given exists.
  Status CheckOutputFolders() const;

  std::string command_;
  std::string synopsis_;
  std::vector<Flag> flags_;
  std::string section_;  // the current Section(); empty: "flags"
  std::vector<std::function<void()>> after_parse_;
};

// Splits "a,b,,c" into {"a","b","c"}; a comma inside parentheses does not
// split: "zstd(level=9,dict=F),lz4" is {"zstd(level=9,dict=F)","lz4"}.
std::vector<std::string> SplitCommaList(std::string_view text);

}  // namespace ztier::tool

#endif  // ZTIER_TOOLS_ZTIER_FLAGS_H_
