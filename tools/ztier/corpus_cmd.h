// File: tools/ztier/corpus_cmd.h
//
// `ztier corpus capture`: a page corpus from a running process, to measure
// ztier on one's own workload (`ztier estimate --corpus FILE`, `ztier bench
// engine --corpus FILE`).
//
//   ztier corpus capture --pid PID -o FILE.pages.zst
//   ztier corpus capture [--after SECONDS] -o FILE.pages.zst -- COMMAND ARGS...
//
// The second form starts COMMAND (its output goes where ztier's does),
// waits SECONDS (default 1; fractions allowed), captures it and then stops
// it (SIGTERM, SIGKILL after 5 s). What is read and how the pages are
// chosen: tools/corpus/include/corpus/capture.h. Flags: --mappings anon|file|all (default
// anon), --max-pages N (default 4096), --level N (zstd level of the file,
// default 9; 19 writes the smallest files, in about 10 s for 4096 pages).
//
// Output: FILE (one zstd frame of the pages; `zstd -d` gives them back) and
// FILE.json beside it, which names the process, the totals (pages eligible,
// never touched, on the shared zero page, not sampled) and, one a line, the
// mappings the corpus took pages from, with their pages present, swapped,
// on the shared zero page and taken. Both
// appear whole or not at all: on any error neither is written (an existing
// FILE is left as it was). A summary goes to stdout.
//
// Exit status: 0; 1 when the capture fails (the message starts with the
// errno: ESRCH no such process or it exited mid-capture, EPERM not permitted,
// ...); 2 for bad usage.
//
// Thread safety: runs on the calling thread only.
#ifndef ZTIER_TOOLS_ZTIER_CORPUS_CMD_H_
#define ZTIER_TOOLS_ZTIER_CORPUS_CMD_H_

#include <span>
#include <string_view>

namespace ztier::tool {

// args: the words after `corpus capture`.
int RunCorpusCapture(std::span<const std::string_view> args);

}  // namespace ztier::tool

#endif  // ZTIER_TOOLS_ZTIER_CORPUS_CMD_H_
