// File: tools/ztier/bench_writeback.h
//
// `ztier bench writeback`: zram-style writeback of a filled store to a
// backing file, one page at a time (one synchronous 4 KiB pwrite per page,
// zram before "zram: batch IOs during writeback", patch 4/5 of the zram
// writeback batching series in docs/references.md) against batched
// io_uring writeback (as in that series), with fio's sequential-write
// bandwidth on the same file system as the limit, in one run; with
// --backing URI also to an NBD export (nbd/nbd_backing_file.h), one write
// in flight at a time and batched over --backing-connections. Flags:
// ztier(8); the variants, method and output: docs/benchmarks.md, "Writeback
// to a backing file" and "Writeback to another machine".
//
// A store measurement opens DIR/ztier-bench-writeback.img (BackingStore,
// O_DIRECT where the file system allows it), fills a store of --size with
// the corpus and marks every slot idle (untimed), times one Writeback() of
// every slot (an error unless it writes every candidate), then reads back
// and checks every 64th slot. fio writes DIR/ztier-bench-fio.img. Each file
// is removed after its measurement, on error and on SIGINT/SIGTERM/SIGHUP.
//
// Exit status: 0 done (also without fio); 1 a runtime failure (no corpus,
// a writeback that fails or does not write every candidate, data that
// reads back wrong, fio failing, --plot given and no chart); 2 bad usage.
#ifndef ZTIER_TOOLS_ZTIER_BENCH_WRITEBACK_H_
#define ZTIER_TOOLS_ZTIER_BENCH_WRITEBACK_H_

#include <span>
#include <string_view>

namespace ztier::tool {

// args: the words after `writeback`. Returns the exit status.
int RunBenchWriteback(std::span<const std::string_view> args);

}  // namespace ztier::tool

#endif  // ZTIER_TOOLS_ZTIER_BENCH_WRITEBACK_H_
