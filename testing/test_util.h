// Helpers shared by ztier's tests.
#ifndef ZTIER_TESTING_TEST_UTIL_H_
#define ZTIER_TESTING_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "ztier/status.h"

// Keep tests strong even in builds without assertions.
#undef NDEBUG

#define ASSERT_OK(expr)                                        \
  do {                                                         \
    const ::ztier::Status zt_s_ = (expr);                      \
    ASSERT_TRUE(zt_s_.ok()) << #expr << ": " << zt_s_.ToString(); \
  } while (0)
#define EXPECT_OK(expr)                                        \
  do {                                                         \
    const ::ztier::Status zt_s_ = (expr);                      \
    EXPECT_TRUE(zt_s_.ok()) << #expr << ": " << zt_s_.ToString(); \
  } while (0)

namespace ztier::testing {

// The shared corpus folder (../shared/corpus beside the checkout), or the
// value of $ZTIER_CORPUS_DIR when set.
inline std::string CorpusDir() {
  const char* env = std::getenv("ZTIER_CORPUS_DIR");
  return env != nullptr ? env : ZTIER_CORPUS_DIR;
}

// A fresh directory under $TMPDIR (or /tmp), removed with everything in it
// when the object dies.
class ScopedTempDir {
 public:
  ScopedTempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base != nullptr ? base : "/tmp") +
                       "/ztier-test-XXXXXX";
    if (mkdtemp(tmpl.data()) == nullptr) std::abort();
    path_ = tmpl;
  }
  ~ScopedTempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScopedTempDir(const ScopedTempDir&) = delete;
  ScopedTempDir& operator=(const ScopedTempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

}  // namespace ztier::testing

#endif  // ZTIER_TESTING_TEST_UTIL_H_
