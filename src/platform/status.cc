// Status formatting and the errno boundary.
#include "ztier/status.h"

#include <cerrno>
#include <cstring>
#include <string>

namespace ztier {

std::string_view StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "OK";
    case StatusCode::kInvalidArgument: return "InvalidArgument";
    case StatusCode::kNotFound: return "NotFound";
    case StatusCode::kResourceExhausted: return "ResourceExhausted";
    case StatusCode::kIoError: return "IoError";
    case StatusCode::kCorruption: return "Corruption";
    case StatusCode::kUnsupported: return "Unsupported";
    case StatusCode::kBusy: return "Busy";
    case StatusCode::kOutOfRange: return "OutOfRange";
    case StatusCode::kFailedPrecondition: return "FailedPrecondition";
    case StatusCode::kPermissionDenied: return "PermissionDenied";
  }
  return "Unknown";
}

std::string_view StatusCodeErrnoName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "0";
    case StatusCode::kInvalidArgument: return "EINVAL";
    case StatusCode::kNotFound: return "ENODEV";
    case StatusCode::kResourceExhausted: return "ENOMEM";
    case StatusCode::kIoError: return "EIO";
    case StatusCode::kCorruption: return "EIO";
    case StatusCode::kUnsupported: return "EOPNOTSUPP";
    case StatusCode::kBusy: return "EBUSY";
    case StatusCode::kOutOfRange: return "ERANGE";
    case StatusCode::kFailedPrecondition: return "EINVAL";
    case StatusCode::kPermissionDenied: return "EPERM";
  }
  return "EIO";
}

std::string_view ErrnoName(int err) {
  if (err == 0) return {};
  const char* name = ::strerrorname_np(err);
  return name != nullptr ? std::string_view(name) : std::string_view();
}

std::string_view ErrnoNameOf(const Status& s) {
  const std::string_view name = ErrnoName(s.posix_errno());
  return name.empty() ? StatusCodeErrnoName(s.code()) : name;
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  std::string out(StatusCodeName(code_));
  out += ": ";
  out += message_;
  return out;
}

StatusCode StatusCodeForErrno(int err) {
  switch (err) {
    case ENOENT:
    case ENODEV:
      return StatusCode::kNotFound;
    case ENOMEM:
    case ENOSPC:
    case EDQUOT:
    case EMFILE:
    case ENFILE:
    case ENOBUFS:
      return StatusCode::kResourceExhausted;
    case EINVAL:
    case E2BIG:
      return StatusCode::kInvalidArgument;
    case EBUSY:
    case EADDRINUSE:  // the address is another's
    case EAGAIN:  // EWOULDBLOCK: try again later
      return StatusCode::kBusy;
    case ERANGE:
      return StatusCode::kOutOfRange;
    case EOPNOTSUPP:
    case ENOSYS:
      return StatusCode::kUnsupported;
    case EPERM:
    case EACCES:
      return StatusCode::kPermissionDenied;
    default:
      return StatusCode::kIoError;
  }
}

Status PosixError(std::string_view context, int err) {
  std::string msg(context);
  msg += ": ";
  msg += std::strerror(err);
  Status s(StatusCodeForErrno(err), std::move(msg));
  s.posix_errno_ = err;
  return s;
}

Status Annotate(std::string_view context, const Status& s) {
  if (s.ok()) return s;
  Status a(s.code(), std::string(context) + ": " + s.message());
  a.posix_errno_ = s.posix_errno_;
  return a;
}

}  // namespace ztier
