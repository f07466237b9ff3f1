// protocol.cc: Status -> NBD error, command names (see protocol.h).
#include "nbd/protocol.h"

namespace ztier::nbd {

std::uint32_t ToNbdError(const Status& status) {
  switch (status.code()) {
    case StatusCode::kOk:
      return 0;
    case StatusCode::kResourceExhausted:
      return kErrNoSpc;  // mem_limit reached: the client sees ENOSPC
    case StatusCode::kInvalidArgument:
    case StatusCode::kOutOfRange:
    case StatusCode::kFailedPrecondition:
    case StatusCode::kNotFound:
      return kErrInval;
    case StatusCode::kUnsupported:
      return kErrNotSup;
    case StatusCode::kPermissionDenied:
      return kErrPerm;
    case StatusCode::kIoError:
    case StatusCode::kCorruption:
    case StatusCode::kBusy:
      return kErrIo;
  }
  return kErrIo;
}

std::string_view NbdErrorName(std::uint32_t error) {
  switch (error) {
    case 0: return "0";
    case kErrPerm: return "EPERM";
    case kErrIo: return "EIO";
    case kErrNoMem: return "ENOMEM";
    case kErrInval: return "EINVAL";
    case kErrNoSpc: return "ENOSPC";
    case kErrOverflow: return "EOVERFLOW";
    case kErrNotSup: return "ENOTSUP";
    case kErrShutdown: return "ESHUTDOWN";
    default: return "E?";
  }
}

std::string_view CommandName(std::uint16_t type) {
  switch (type) {
    case kCmdRead: return "NBD_CMD_READ";
    case kCmdWrite: return "NBD_CMD_WRITE";
    case kCmdDisc: return "NBD_CMD_DISC";
    case kCmdFlush: return "NBD_CMD_FLUSH";
    case kCmdTrim: return "NBD_CMD_TRIM";
    case kCmdCache: return "NBD_CMD_CACHE";
    case kCmdWriteZeroes: return "NBD_CMD_WRITE_ZEROES";
    case kCmdBlockStatus: return "NBD_CMD_BLOCK_STATUS";
    default: return "NBD_CMD_(unknown)";
  }
}

}  // namespace ztier::nbd
