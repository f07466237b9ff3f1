// read_file.cc: ReadRegularFile (contract in
// include/platform/read_file.h).
#include "platform/read_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <string>

#include "platform/unique_fd.h"

namespace ztier::platform {

Result<std::string> ReadRegularFile(const std::string& path,
                                    std::size_t max_bytes,
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
  std::string data(
      std::min(max_bytes + 1,
               std::max(static_cast<std::size_t>(st.st_size) + 1,
                        std::size_t{4096})),
      '\0');
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

}  // namespace ztier::platform
