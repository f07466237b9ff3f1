// File: tools/ztier/progress.h
//
// Progress: a one-line status on stderr for long benchmarks, rewritten in
// place; silent unless stderr is a terminal, so logs and pipes stay clean.
// Used by one thread.
#ifndef ZTIER_TOOLS_ZTIER_PROGRESS_H_
#define ZTIER_TOOLS_ZTIER_PROGRESS_H_

#include <unistd.h>

#include <cstdio>
#include <string>

namespace ztier::tool {

class Progress {
 public:
  Progress() : enabled_(isatty(STDERR_FILENO) == 1) {}
  ~Progress() { Clear(); }
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  void Update(const std::string& text) {
    if (!enabled_) return;
    std::string line = text.substr(0, 118);
    const std::size_t shown = line.size();
    if (shown < width_) line.append(width_ - shown, ' ');
    width_ = shown;
    std::fprintf(stderr, "\r%s", line.c_str());
    std::fflush(stderr);
  }
  void Clear() {
    if (!enabled_ || width_ == 0) return;
    std::fprintf(stderr, "\r%s\r", std::string(width_, ' ').c_str());
    std::fflush(stderr);
    width_ = 0;
  }

 private:
  bool enabled_;
  std::size_t width_ = 0;
};

}  // namespace ztier::tool

#endif  // ZTIER_TOOLS_ZTIER_PROGRESS_H_
