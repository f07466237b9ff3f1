// test_util_test.cc: testing/test_util.h keeps assert() on in tests, even
// where NDEBUG is defined (this file is built with it, testing/CMakeLists.txt).
#include <cassert>

#include "testing/test_util.h"

namespace ztier {
namespace {

TEST(TestUtilDeathTest, AssertIsOnUnderNdebug) {
#ifdef NDEBUG
  FAIL() << "test_util.h left NDEBUG defined";
#endif
  EXPECT_DEATH(assert(1 + 1 == 3), "1 \\+ 1 == 3");
}

}  // namespace
}  // namespace ztier
