// unique_fd_test.cc: UniqueFd closes its descriptor exactly once, when
// destroyed or given another, and a move hands the descriptor over.
#include "platform/unique_fd.h"

#include <fcntl.h>
#include <gtest/gtest.h>

#include <cerrno>
#include <utility>

namespace ztier::platform {
namespace {

bool IsOpen(int fd) { return ::fcntl(fd, F_GETFD) != -1 || errno != EBADF; }

int OpenDevNull() {
  const int fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  EXPECT_GE(fd, 0) << "open /dev/null: errno " << errno;
  return fd;
}

TEST(UniqueFdTest, ClosesWhenDestroyed) {
  const int fd = OpenDevNull();
  {
    UniqueFd owned(fd);
    EXPECT_EQ(owned.get(), fd);
    EXPECT_TRUE(IsOpen(fd));
  }
  EXPECT_FALSE(IsOpen(fd));
}

TEST(UniqueFdTest, AMoveHandsTheDescriptorOver) {
  const int fd = OpenDevNull();
  UniqueFd to;
  {
    UniqueFd from(fd);
    UniqueFd middle(std::move(from));
    EXPECT_EQ(from.get(), -1);
    to = std::move(middle);
    EXPECT_EQ(middle.get(), -1);
  }
  EXPECT_EQ(to.get(), fd);
  EXPECT_TRUE(IsOpen(fd));
}

TEST(UniqueFdTest, GivenAnotherItClosesTheOld) {
  const int first = OpenDevNull();
  const int second = OpenDevNull();
  UniqueFd owned(first);
  owned = UniqueFd(second);
  EXPECT_FALSE(IsOpen(first));
  EXPECT_EQ(owned.get(), second);
  owned.Reset();
  EXPECT_FALSE(IsOpen(second));
  EXPECT_EQ(owned.get(), -1);
}

}  // namespace
}  // namespace ztier::platform
