// backing_writers.h: the writers behind the real backing file
// (posix_backing_file.h). Private to platform/.
//
// NewPwriteWriter writes each IO with one pwrite() in Queue; NewUringWriter
// (uring_writer.cc, only with ZTIER_URING) queues SQEs and submits them
// together in Reap. Both own their buffers: one anonymous mapping of
// ios x io_bytes (platform/mapping.h), charged, so a writeback never faults
// for them. Mapping failure is kResourceExhausted naming the path.
//
// Thread safety: as ztier/backing_file.h.
#ifndef ZTIER_PLATFORM_BACKING_WRITERS_H_
#define ZTIER_PLATFORM_BACKING_WRITERS_H_

#include <cstddef>
#include <memory>
#include <string>

#include "ztier/backing_file.h"
#include "ztier/status.h"

namespace ztier::internal {

// Writers on `fd` (not owned), `path` for messages.
Result<std::unique_ptr<BackingFileWriter>> NewPwriteWriter(
    int fd, const std::string& path, std::size_t ios, std::size_t io_bytes);
#if ZTIER_URING
Result<std::unique_ptr<BackingFileWriter>> NewUringWriter(
    int fd, const std::string& path, std::size_t ios, std::size_t io_bytes);
#endif

}  // namespace ztier::internal

#endif  // ZTIER_PLATFORM_BACKING_WRITERS_H_
