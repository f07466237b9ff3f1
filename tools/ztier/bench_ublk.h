// File: tools/ztier/bench_ublk.h
//
// `ztier bench ublk` (ztier(8)): the guest experiment (the guest kernel's
// zram, `ztier serve --ublk` and the same server over NBD, under qemu) of
// testing/guest/bench_ublk.py in the checkout this binary was built from
// (ZTIER_SOURCE_DIR). This command checks ARGS, so that --help and usage
// errors are the tool's own, and then runs
//   python3 SCRIPT --ztier <this binary> --machine-line L --machine-json J
//           ARGS...
// so that the machine line is every experiment's (machine_info.h).
//
// Exit status: the script's (0 measured, 1 a failure); 1 when python3 or
// the script is missing; 2 bad usage.
#ifndef ZTIER_TOOLS_ZTIER_BENCH_UBLK_H_
#define ZTIER_TOOLS_ZTIER_BENCH_UBLK_H_

#include <span>
#include <string_view>

namespace ztier::tool {

// Runs the command on the words after `ublk`; returns the exit status.
int RunBenchUblk(std::span<const std::string_view> args);

}  // namespace ztier::tool

#endif  // ZTIER_TOOLS_ZTIER_BENCH_UBLK_H_
