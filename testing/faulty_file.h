// faulty_file.h: FaultyFile(fault), the BackingOptions::wrap_file (or
// DeviceDefaults::backing_file_wrap) that puts a NewFaultyBackingFile with
// `fault` around the file a BackingStore opens (ztier/backing_file.h).
// Tests use it to make EIO, ENOSPC and short transfers happen on a real
// file, and writers that cannot be made (FileIo::Kind::kNewWriter).
#ifndef ZTIER_TESTING_FAULTY_FILE_H_
#define ZTIER_TESTING_FAULTY_FILE_H_

#include <memory>
#include <utility>

#include "ztier/backing_file.h"

namespace ztier::testing {

inline BackingFileWrap FaultyFile(FileFault fault) {
  return [fault = std::move(fault)](std::shared_ptr<BackingFile> file) {
    return std::shared_ptr<BackingFile>(
        NewFaultyBackingFile(std::move(file), fault));
  };
}

}  // namespace ztier::testing

#endif  // ZTIER_TESTING_FAULTY_FILE_H_
