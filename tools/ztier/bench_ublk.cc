// File: tools/ztier/bench_ublk.cc
//
// `ztier bench ublk` (bench_ublk.h): checks the flags and runs the guest
// experiment's script.
#include "bench_ublk.h"

#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "bench_harness.h"
#include "bench_proc.h"
#include "bench_stats.h"
#include "flags.h"
#include "machine_info.h"
#include "tool_common.h"

#ifndef ZTIER_SOURCE_DIR
#define ZTIER_SOURCE_DIR "."
#endif

namespace ztier::tool {
namespace {

constexpr char kCommand[] = "ztier bench ublk";
constexpr char kScript[] = ZTIER_SOURCE_DIR "/testing/guest/bench_ublk.py";
constexpr char kSynopsis[] =
    "[--runs N] [--seconds S] [--size SIZE] [--targets LIST] [--guest DIR] "
    "[--mem MIB] [--smp N] [--cpu MODEL] [--serve-args ARGS] "
    "[--timeout SECONDS] [--quick] "
    "[--json FILE]";
constexpr char kAbout[] =
    "ztier as a block device in the test guest (qemu TCG, 2 vCPUs): the "
    "guest kernel's zram vs `ztier serve --ublk` (/dev/ublkb0) vs the same "
    "server over NBD on the guest's loopback, alternating, the fio jobs of "
    "`ztier bench nbd` with io_uring; median (min-max) over runs, and the "
    "targets ublk >= 2x NBD and >= 0.7x zram on 4 KiB random IO at QD32. "
    "Runs testing/guest/bench_ublk.py of the source tree (python3, "
    "qemu-system-x86, fio; `make test-kernel` installs them).";

}  // namespace

int RunBenchUblk(std::span<const std::string_view> args) {
  // Declared for --help and checked here; the script reads the same words.
  std::int64_t runs = 5, seconds = 5, mem = 1024, smp = 2, timeout = 0;
  std::string size, targets, guest, cpu, serve_args, json;
  bool quick = false;
  FlagSet flags(kCommand, kSynopsis);
  flags.AddInt("runs", &runs, "N", "runs of every job on every target "
               "(default 5)", 1, 1000);
  flags.AddInt("seconds", &seconds, "S", "fio runtime of each job "
               "(default 5)", 1, 3600);
  flags.AddString("size", &size, "SIZE", "size of each device (default "
                  "256M); the fill writes it all, the jobs cover it");
  flags.AddString("targets", &targets, "LIST", "comma list of zram, "
                  "ztier-ublk, ztier-nbd (default all three)");
  flags.AddString("guest", &guest, "DIR", "the guest's folder (default: "
                  "guest beside this binary, as `make test-kernel`)");
  flags.NotEmpty("guest");
  flags.AddInt("mem", &mem, "MIB", "guest RAM (default 1024)", 256, 65536);
  flags.AddInt("smp", &smp, "N", "guest vCPUs (default 2)", 1, 64);
  flags.AddString("cpu", &cpu, "MODEL", "qemu's -cpu for the guest "
                  "(default max,-erms,-fsrm: testing/guest/run_guest.py "
                  "says why)");
  flags.AddString("serve-args", &serve_args, "ARGS", "more flags for the "
                  "guest's `ztier serve` (e.g. \"--ublk-queues 2\")");
  flags.AddInt("timeout", &timeout, "SECONDS", "give up on the guest "
               "after this long (default: from the runs)", 1, 86400);
  flags.AddBool("quick", &quick, "the smallest settings (1 run, 1 s, "
                "64M): tries the chain, figures meaningless");
  AddJsonFlag(flags, &json);
  if (auto rc = flags.ParseCommandLine(args, kAbout)) return *rc;

  if (access(kScript, R_OK) != 0) {
    return ReportFailure(kCommand,
                         std::string("no ") + kScript +
                             " (this command runs the experiment of the "
                             "source tree the binary was built from)");
  }
  const std::string python = bench::FindExecutable("python3");
  if (python.empty()) {
    return ReportFailure(kCommand,
                         "python3 not found on PATH (`make test-kernel` "
                         "installs it)");
  }
  const std::string self = bench::SelfExecutable();
  if (self.empty()) {
    return ReportFailure(kCommand, "cannot find this binary (/proc/self/exe)");
  }
  const MachineInfo machine = GetMachineInfo();
  JsonWriter w;
  WriteMachineJson(machine, w);
  std::vector<std::string> words = {python,
                                    kScript,
                                    "--ztier",
                                    self,
                                    "--machine-line",
                                    MachineLine(machine),
                                    "--machine-json",
                                    w.Take()};
  for (std::string_view a : args) words.emplace_back(a);
  std::vector<char*> argv;
  for (std::string& s : words) argv.push_back(s.data());
  argv.push_back(nullptr);
  std::fflush(stdout);
  std::fflush(stderr);
  execv(python.c_str(), argv.data());
  return ReportFailure(kCommand,
                       "cannot run " + python + ": " + std::strerror(errno));
}

}  // namespace ztier::tool
