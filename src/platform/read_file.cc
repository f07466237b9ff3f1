// read_file.cc: ReadRegularFile and ReadRegularFileBytes (contract in
// include/platform/read_file.h).
#include "platform/read_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <string>
#include <vector>

#include "platform/unique_fd.h"

namespace ztier::platform {
namespace {

// Both public functions: Buffer is std::string or std::vector<std::byte>,
// each resized (zero-filled) as it grows.
template <typename Buffer>
Result<Buffer> ReadInto(const std::string& path, std::size_t max_bytes,
                        std::string_view what) {
  const std::string where = std::string(what) + " " + path;
  auto invalid = [&](const std::string& why) {
    return Err(Status::InvalidArgument(where + ": " + why));
  };
  const UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  struct stat st;
  if (fd.get() < 0 || ::fstat(fd.get(), &st) != 0) {
    return Err(PosixError(where, errno));
  }
  if (S_ISDIR(st.st_mode)) return invalid("is a directory");
  if (!S_ISREG(st.st_mode)) return invalid("not a regular file");
  const std::string too_large =
      "larger than " + std::to_string(max_bytes) + " bytes";
  if (static_cast<std::uint64_t>(st.st_size) > max_bytes) {
    return invalid(too_large);
  }
  // At least one byte past the size: a read that fills the buffer has
  // found growth (or a /proc file, whose size says 0, read from 4 KiB).
  // The buffer never grows past max_bytes + 1, and a full one of that size
  // is refused before the next read, so the loop ends with got <= max_bytes.
  Buffer data(std::min(max_bytes + 1,
                       std::max(static_cast<std::size_t>(st.st_size) + 1,
                                std::size_t{4096})),
              typename Buffer::value_type{});
  std::size_t got = 0;
  for (;;) {
    if (got == data.size()) {
      if (got > max_bytes) return invalid(too_large);
      data.resize(std::min(max_bytes + 1, std::max<std::size_t>(2 * got, 4096)));
    }
    const ssize_t r = ::read(fd.get(), data.data() + got, data.size() - got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return Err(PosixError(where, errno));
    if (r == 0) break;
    got += static_cast<std::size_t>(r);
  }
  data.resize(got);
  return data;
}

}  // namespace

Result<std::string> ReadRegularFile(const std::string& path,
                                    std::size_t max_bytes,
                                    std::string_view what) {
  return ReadInto<std::string>(path, max_bytes, what);
}

Result<std::vector<std::byte>> ReadRegularFileBytes(const std::string& path,
                                                    std::size_t max_bytes,
                                                    std::string_view what) {
  return ReadInto<std::vector<std::byte>>(path, max_bytes, what);
}

}  // namespace ztier::platform
