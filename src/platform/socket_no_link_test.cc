// socket_no_link_test.cc: Listener::Unix where the file system has neither
// hard links nor RENAME_NOREPLACE (some FUSE and 9p file systems), the
// fallback of socket.cc's BindPrivate. This binary defines link() and
// renameat2() itself, so socket.cc calls these: with the fault on, link
// fails with EPERM and a RENAME_NOREPLACE rename with EINVAL, as such a
// file system answers; otherwise they make the system calls.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <string>

#include "platform/socket.h"
#include "testing/test_util.h"

namespace {

bool g_no_links = false;
// Created at link()'s target just before it fails: a file that appears
// there between the check for a stale socket and the rename.
std::string g_appears_at_link;

}  // namespace

extern "C" int link(const char* from, const char* to) noexcept {
  if (!g_no_links) {
    return static_cast<int>(
        ::syscall(SYS_linkat, AT_FDCWD, from, AT_FDCWD, to, 0));
  }
  if (!g_appears_at_link.empty() && g_appears_at_link == to) {
    const int fd = ::open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd >= 0) ::close(fd);
  }
  errno = EPERM;
  return -1;
}

extern "C" int renameat2(int from_dir, const char* from, int to_dir,
                         const char* to, unsigned int flags) noexcept {
  if (g_no_links && (flags & RENAME_NOREPLACE) != 0) {
    errno = EINVAL;
    return -1;
  }
  return static_cast<int>(
      ::syscall(SYS_renameat2, from_dir, from, to_dir, to, flags));
}

namespace ztier::platform {
namespace {

class NoLinkTest : public ::testing::Test {
 protected:
  void SetUp() override { g_no_links = true; }
  void TearDown() override {
    g_no_links = false;
    g_appears_at_link.clear();
  }
};

TEST_F(NoLinkTest, TheSocketIsRenamedIntoPlace) {
  testing::ScopedTempDir tmp;
  const std::string path = tmp.File("a.sock");
  Result<Listener> l = Listener::Unix(path);
  ASSERT_TRUE(l.has_value()) << l.error().ToString();
  struct stat st;
  ASSERT_EQ(::lstat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  Result<int> c = ConnectUnix(path);
  ASSERT_TRUE(c.has_value()) << c.error().ToString();
  ::close(*c);
}

// What appeared at the path after the check for a stale socket is kept,
// and the listener is kBusy (socket.h), as where link() says EEXIST.
TEST_F(NoLinkTest, WhatAppearedMeanwhileIsKeptAndBusy) {
  testing::ScopedTempDir tmp;
  const std::string path = tmp.File("a.sock");
  g_appears_at_link = path;
  Result<Listener> l = Listener::Unix(path);
  ASSERT_FALSE(l.has_value());
  EXPECT_EQ(l.error().code(), StatusCode::kBusy) << l.error().ToString();
  struct stat st;
  ASSERT_EQ(::lstat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
}

}  // namespace
}  // namespace ztier::platform
