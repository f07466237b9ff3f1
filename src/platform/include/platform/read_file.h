// read_file.h: ReadRegularFile (as text) and ReadRegularFileBytes (as
// bytes), the whole of a small regular file: a configuration file, a TLS
// key, a dictionary, a /proc file.
//
//   ZT_ASSIGN_OR_RETURN(std::string text,
//                       platform::ReadRegularFile(path, 1 << 20, "TLS key"));
//
// The file is opened O_NONBLOCK, so that a FIFO at the path blocks neither
// the open nor the read (it is refused), and only a regular file is read:
// a device such as /dev/zero would never end. /proc's files are regular
// files of size 0 and are read to their end like any other.
//
// The data goes into one buffer sized from fstat(2) at the open, so that a
// secret read this way leaves no copy of itself in freed memory (the
// caller wipes the result); only a file that grows while it is read makes
// the buffer move.
//
// Errors, each message starting with "<what> <path>: ":
//   - the open, fstat or a read failed: PosixError's code for its errno
//     (kNotFound, kPermissionDenied, ...; Status::posix_errno() gives it);
//   - not a regular file: kInvalidArgument, "is a directory" or "not a
//     regular file";
//   - more than max_bytes, at the open or grown while read:
//     kInvalidArgument, "larger than N bytes".
//
// Thread safety: any thread, any number at once.
#ifndef ZTIER_PLATFORM_READ_FILE_H_
#define ZTIER_PLATFORM_READ_FILE_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "ztier/status.h"

namespace ztier::platform {

Result<std::string> ReadRegularFile(const std::string& path,
                                    std::size_t max_bytes,
                                    std::string_view what);

// The same, read straight into bytes, for binary data kept as bytes (a
// codec's dictionary) without a copy from a string.
Result<std::vector<std::byte>> ReadRegularFileBytes(const std::string& path,
                                                    std::size_t max_bytes,
                                                    std::string_view what);

}  // namespace ztier::platform

#endif  // ZTIER_PLATFORM_READ_FILE_H_
