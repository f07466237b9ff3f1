// testing/marked_pages.h: data and checks for the end-to-end writeback
// tests (tools/ztier/writeback_flow_test.cc, remote_netns_test.cc).
//
//   WriteMarkedPages(path, "ztier-remote", 1024);  // 4 MiB of text pages
//   EXPECT_EQ(Sha256(out), Sha256(path));
//   EXPECT_EQ(Numbers(s.Ctl("bd_stat").out)[0], 1024u);
#ifndef ZTIER_TESTING_MARKED_PAGES_H_
#define ZTIER_TESTING_MARKED_PAGES_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "testing/test_util.h"

namespace ztier::testing {

// The whitespace-separated numbers of `text` (a zram attribute's line).
inline std::vector<std::uint64_t> Numbers(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::uint64_t> v;
  std::uint64_t x;
  while (in >> x) v.push_back(x);
  return v;
}

// `pages` pages of text lines "MARKER page NNNNNN line NNN" into `path`:
// compressible, none same-filled, and the marker shows any plaintext.
inline void WriteMarkedPages(const std::string& path, const char* marker,
                             int pages) {
  std::string text;
  char line[64];
  for (int p = 0; p < pages; ++p) {
    std::string page;
    for (int k = 0; page.size() < 4096; ++k) {
      std::snprintf(line, sizeof(line), "%s page %06d line %03d\n", marker, p,
                    k);
      page += line;
    }
    page.resize(4096);
    text += page;
  }
  FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(std::fwrite(text.data(), 1, text.size(), f), text.size());
  std::fclose(f);
}

// The file's sha256, in hex.
inline std::string Sha256(const std::string& path) {
  return Sh("sha256sum '" + path + "'").out.substr(0, 64);
}

}  // namespace ztier::testing

#endif  // ZTIER_TESTING_MARKED_PAGES_H_
