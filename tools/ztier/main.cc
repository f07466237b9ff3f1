// File: tools/ztier/main.cc
//
// The `ztier` command: one binary, subcommands found in small tables.
//
//   ztier serve [flags]               zram devices over NBD (userspace zram)
//   ztier ctl [flags] ATTR [VALUE]    show or store an attribute of `serve`
//   ztier status [flags]              the devices of `serve`, as zramctl
//   ztier estimate [flags]            what compressed memory would save
//   ztier corpus capture [flags]      a page corpus from a running process
//   ztier usemem [flags]              the usemem workload on a region
//   ztier bench engine [flags]        codec and store throughput and memory
//   ztier bench latency [flags]       slowest high-priority load/store
//   ztier bench nbd [flags]           `serve` vs nbdkit memory over NBD
//   ztier bench policy [flags]        client reads with the policy vs without
//   ztier bench readahead [flags]     region readahead and fault-in latency
//   ztier bench recompress [flags]    idle recompression: memory and speed
//   ztier bench ublk [flags]          zram vs ztier over ublk and NBD, in a guest
//   ztier bench writeback [flags]     writeback one page at a time vs batched
//   ztier bench zram-compare [flags]  the kernel's zram vs ztier
//   ztier help [COMMAND]              usage (also: ztier --help, ztier -h)
//   ztier --version
//
// Each command's usage line and flags: its --help, and README.md's
// "Command reference".
//
// Exit status: what the subcommand returns (0 success, 1 runtime failure,
// also when its output could not be written);
// 2 for bad usage: no or an unknown subcommand, or an unknown flag, reported
// on stderr with a hint to run `--help`. A new subcommand is one row in
// kCommands (or in a group's table, as `bench` has).
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "bench_engine.h"
#include "bench_latency.h"
#include "bench_nbd.h"
#include "bench_policy.h"
#include "bench_readahead.h"
#include "bench_ratio.h"
#include "bench_recompress.h"
#include "bench_ublk.h"
#include "bench_writeback.h"
#include "bench_zram_compare.h"
#include "corpus_cmd.h"
#include "ctl_cmd.h"
#include "estimate_cmd.h"
#include "serve_cmd.h"
#include "status_cmd.h"
#include "usemem.h"

#ifndef ZTIER_VERSION
#define ZTIER_VERSION "0.0.0-dev"
#endif

namespace ztier::tool {
namespace {

using Args = std::span<const std::string_view>;

struct Command {
  std::string_view name;
  std::string_view summary;
  int (*run)(Args args);  // args: the words after the command's name
};

// Lists `table` under a usage line.
std::string CommandList(std::string_view prefix,
                        std::span<const Command> table) {
  std::string text = "usage: " + std::string(prefix) +
                     " COMMAND [flags]\n\n"
                     "commands:\n";
  std::size_t width = 0;
  for (const Command& c : table) width = std::max(width, c.name.size());
  for (const Command& c : table) {
    text += "  " + std::string(c.name) +
            std::string(width + 2 - c.name.size(), ' ') +
            std::string(c.summary) + "\n";
  }
  return text;
}

// Runs the command of `table` that args[0] names. Help and usage errors are
// handled here, the same way at every level.
int Dispatch(std::string_view prefix, std::span<const Command> table,
             Args args) {
  const std::string list = CommandList(prefix, table);
  if (args.empty()) {
    std::fprintf(stderr, "%s: missing command\n%s", std::string(prefix).c_str(),
                 list.c_str());
    return 2;
  }
  const std::string_view word = args[0];
  if (word == "--help" || word == "-h") {
    std::fputs(list.c_str(), stdout);
    return 0;
  }
  for (const Command& c : table) {
    if (c.name == word) return c.run(args.subspan(1));
  }
  std::fprintf(stderr, "%s: unknown %s '%s'\nRun '%s --help' for usage.\n",
               std::string(prefix).c_str(),
               word.starts_with("-") ? "flag" : "command",
               std::string(word).c_str(), std::string(prefix).c_str());
  return 2;
}

int RunEngine(Args args) { return RunBenchEngine(args); }
int RunNbd(Args args) { return RunBenchNbd(args); }

constexpr Command kBenchCommands[] = {
    {"engine",
     "codec vs. store throughput (MB/s) and memory use on page corpora",
     RunEngine},
    {"latency",
     "slowest high-priority load/store: shared-stream baseline vs separate "
     "paths (zswap load contention series)",
     RunBenchLatency},
    {"nbd",
     "`ztier serve` vs. nbdkit memory over NBD: fio IOPS, nbdcopy, memory",
     RunNbd},
    {"policy",
     "client read latency with the post-processing policy running vs "
     "without it (target: median within 1.2x)",
     RunBenchPolicy},
    {"ratio",
     "memory for the same pages: per-page objects vs a trained dictionary "
     "vs the kernel's zram, with store and read MB/s",
     RunBenchRatio},
    {"readahead",
     "region fault-in: sequential read with page_cluster 0 vs 3 (zswap "
     "decompress batching series), and fault-in latency vs a bare "
     "UFFDIO_COPY fault",
     RunBenchReadahead},
    {"recompress",
     "idle recompression with a secondary codec (zram's recompress): "
     "mem_used_total against the secondary codec directly, serial vs "
     "parallel pass throughput",
     RunBenchRecompress},
    {"ublk",
     "ztier as a block device in the test guest (qemu TCG): the kernel's "
     "zram vs `ztier serve --ublk` vs the same over NBD, fio io_uring "
     "(testing/guest/bench_ublk.py)",
     RunBenchUblk},
    {"writeback",
     "writeback to a backing file: one page at a time vs batched io_uring "
     "vs fio (zram writeback batching series)",
     RunBenchWriteback},
    {"zram-compare",
     "the kernel's zram (/dev/zram0) vs ztier on the same data: mm_stat, "
     "io_uring/fio vs library/NBD IOPS",
     RunBenchZramCompare},
};

int RunBench(Args args) {
  return Dispatch("ztier bench", kBenchCommands, args);
}

constexpr Command kCorpusCommands[] = {
    {"capture",
     "capture a running process's memory pages as a page corpus",
     RunCorpusCapture},
};

int RunCorpus(Args args) {
  return Dispatch("ztier corpus", kCorpusCommands, args);
}

int RunHelp(Args args);

constexpr Command kCommands[] = {
    {"bench", "run an experiment (`ztier bench engine`)", RunBench},
    {"corpus", "make page corpora (`ztier corpus capture --pid PID -o F`)",
     RunCorpus},
    {"ctl", "show or store a zram attribute of `ztier serve`", RunCtl},
    {"estimate",
     "would compressed memory help this workload, and with which codec?",
     RunEstimate},
    {"serve", "serve zram devices over NBD (userspace zram)", RunServe},
    {"help", "show usage, or a command's usage (`ztier help bench`)", RunHelp},
    {"status", "list the devices of `ztier serve` like zramctl", RunStatus},
    {"usemem",
     "the zswap store batching series' usemem workload on a region: "
     "batched vs one-at-a-time stores",
     RunUsemem},
};

std::string TopUsage() {
  return "ztier " ZTIER_VERSION
         ": a compressed-memory tier (userspace zram/zswap).\n\n" +
         CommandList("ztier", kCommands) +
         "\nglobal flags:\n  --help, -h  show this help\n"
         "  --version   print the version\n\n"
         "Run 'ztier COMMAND --help' for a command's flags.\n";
}

int RunHelp(Args args) {
  if (args.empty()) {
    std::fputs(TopUsage().c_str(), stdout);
    return 0;
  }
  // `ztier help bench engine` == `ztier bench engine --help`.
  std::vector<std::string_view> words(args.begin(), args.end());
  words.push_back("--help");
  return Dispatch("ztier", kCommands, words);
}

int Main(Args args) {
  if (!args.empty()) {
    if (args[0] == "--help" || args[0] == "-h") return RunHelp({});
    if (args[0] == "--version") {
      std::printf("ztier %s\n", ZTIER_VERSION);
      return 0;
    }
  }
  if (args.empty()) {
    std::fputs(TopUsage().c_str(), stderr);
    return 2;
  }
  return Dispatch("ztier", kCommands, args);
}

}  // namespace
}  // namespace ztier::tool

int main(int argc, char** argv) {
  std::vector<std::string_view> args(argv + 1, argv + argc);
  const int status = ztier::tool::Main(args);
  // A report or listing that could not be written (a full disk, a file
  // system error) is no success: say so, and exit 1 rather than 0.
  errno = 0;
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
    const int err = errno;
    std::fprintf(stderr, "ztier: write error on standard output%s%s\n",
                 err != 0 ? ": " : "", err != 0 ? std::strerror(err) : "");
    return status == 0 ? 1 : status;
  }
  return status;
}
