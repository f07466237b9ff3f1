// read_file_test.cc: ReadRegularFile reads a regular file whole, /proc's
// size-0 files included, and refuses what is not one, what is too large
// and what cannot be opened, each with the path named.
#include "platform/read_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "testing/test_util.h"

namespace ztier::platform {
namespace {

using ::ztier::testing::ScopedTempDir;

void Write(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

TEST(ReadRegularFileTest, ReadsTheWholeFile) {
  ScopedTempDir dir;
  const std::string path = dir.File("f");
  std::string text(100000, '\0');
  for (std::size_t i = 0; i < text.size(); ++i) text[i] = char(i * 7 + i / 251);
  Write(path, text);
  auto got = ReadRegularFile(path, text.size(), "test");
  ASSERT_TRUE(got.has_value()) << got.error().ToString();
  EXPECT_EQ(*got, text);
  // The same bytes, read straight into a byte vector.
  auto bytes = ReadRegularFileBytes(path, text.size(), "test");
  ASSERT_TRUE(bytes.has_value()) << bytes.error().ToString();
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(bytes->data()),
                        bytes->size()),
            text);
  bytes = ReadRegularFileBytes(path, text.size() - 1, "test");
  ASSERT_FALSE(bytes.has_value());
  EXPECT_EQ(bytes.error().message(),
            "test " + path + ": larger than 99999 bytes");
  Write(path, "");
  got = ReadRegularFile(path, 10, "test");
  ASSERT_TRUE(got.has_value()) << got.error().ToString();
  EXPECT_EQ(*got, "");
}

// A /proc file says size 0 and holds more: it is read to its end.
TEST(ReadRegularFileTest, ReadsAProcFileToItsEnd) {
  auto got = ReadRegularFile("/proc/self/maps", 64 << 20, "maps");
  ASSERT_TRUE(got.has_value()) << got.error().ToString();
  EXPECT_GT(got->size(), 100u);
  EXPECT_EQ(got->back(), '\n');
  got = ReadRegularFile("/proc/self/maps", 10, "maps");
  ASSERT_FALSE(got.has_value());
  EXPECT_NE(got.error().message().find("maps /proc/self/maps: larger than 10 "
                                       "bytes"),
            std::string::npos)
      << got.error().message();
}

TEST(ReadRegularFileTest, RefusesAFileLargerThanTheBound) {
  ScopedTempDir dir;
  const std::string path = dir.File("big");
  Write(path, std::string(4097, 'x'));
  EXPECT_TRUE(ReadRegularFile(path, 4097, "t").has_value());
  const auto got = ReadRegularFile(path, 4096, "t");
  ASSERT_FALSE(got.has_value());
  EXPECT_EQ(got.error().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(got.error().message(), "t " + path + ": larger than 4096 bytes");
}

// Neither a FIFO (which would block an open without O_NONBLOCK) nor a
// device nor a directory is read.
TEST(ReadRegularFileTest, RefusesWhatIsNotARegularFile) {
  ScopedTempDir dir;
  const std::string fifo = dir.File("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (const std::string& path : {fifo, std::string("/dev/zero")}) {
    const auto got = ReadRegularFile(path, 1 << 20, "t");
    ASSERT_FALSE(got.has_value()) << path;
    EXPECT_EQ(got.error().code(), StatusCode::kInvalidArgument) << path;
    EXPECT_EQ(got.error().message(), "t " + path + ": not a regular file");
  }
  const auto got = ReadRegularFile(dir.path(), 1 << 20, "t");
  ASSERT_FALSE(got.has_value());
  EXPECT_EQ(got.error().message(), "t " + dir.path() + ": is a directory");
}

TEST(ReadRegularFileTest, AFailedOpenKeepsItsErrno) {
  ScopedTempDir dir;
  const auto got = ReadRegularFile(dir.File("none"), 10, "dict");
  ASSERT_FALSE(got.has_value());
  EXPECT_EQ(got.error().code(), StatusCode::kNotFound);
  EXPECT_EQ(got.error().posix_errno(), ENOENT);
  EXPECT_EQ(got.error().message().rfind("dict " + dir.File("none") + ": ", 0),
            0u)
      << got.error().message();
}

}  // namespace
}  // namespace ztier::platform
