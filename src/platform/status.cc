// Status formatting and the errno boundary.
#include "ztier/status.h"

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <iterator>
#include <string>

namespace ztier {

namespace {

// Each code's name and the errno it stands for at the errno boundary, in
// the order of StatusCode.
struct CodeNames {
  StatusCode code;
  std::string_view name;
  std::string_view errno_name;
};
constexpr CodeNames kCodeNames[] = {
    {StatusCode::kOk, "OK", "0"},
    {StatusCode::kInvalidArgument, "InvalidArgument", "EINVAL"},
    {StatusCode::kNotFound, "NotFound", "ENODEV"},
    {StatusCode::kResourceExhausted, "ResourceExhausted", "ENOMEM"},
    {StatusCode::kIoError, "IoError", "EIO"},
    {StatusCode::kCorruption, "Corruption", "EIO"},
    {StatusCode::kUnsupported, "Unsupported", "EOPNOTSUPP"},
    {StatusCode::kBusy, "Busy", "EBUSY"},
    {StatusCode::kOutOfRange, "OutOfRange", "ERANGE"},
    {StatusCode::kFailedPrecondition, "FailedPrecondition", "EINVAL"},
    {StatusCode::kPermissionDenied, "PermissionDenied", "EPERM"},
};
static_assert(std::size(kCodeNames) ==
              static_cast<std::size_t>(StatusCode::kPermissionDenied) + 1);
static_assert([] {
  for (std::size_t k = 0; k < std::size(kCodeNames); ++k) {
    if (static_cast<std::size_t>(kCodeNames[k].code) != k) return false;
  }
  return true;
}());

const CodeNames* Find(StatusCode code) {
  const auto i = static_cast<std::size_t>(code);
  return i < std::size(kCodeNames) ? &kCodeNames[i] : nullptr;
}

}  // namespace

std::string_view StatusCodeName(StatusCode code) {
  const CodeNames* c = Find(code);
  return c != nullptr ? c->name : "Unknown";
}

std::string_view StatusCodeErrnoName(StatusCode code) {
  const CodeNames* c = Find(code);
  return c != nullptr ? c->errno_name : "EIO";
}

std::string_view ErrnoName(int err) {
  if (err == 0) return {};
  const char* name = ::strerrorname_np(err);
  return name != nullptr ? std::string_view(name) : std::string_view();
}

int ErrnoByName(std::string_view name) {
  if (name.empty()) return 0;
  // The kernel's errnos are below MAX_ERRNO (include/linux/err.h).
  for (int err = 1; err < 4096; ++err) {
    if (ErrnoName(err) == name) return err;
  }
  // <errno.h>'s second names, which strerrorname_np() never gives (where
  // EDEADLOCK is an errno of its own, as on powerpc, the loop found it).
  static constexpr struct {
    std::string_view name;
    int err;
  } kOtherNames[] = {
      {"EWOULDBLOCK", EWOULDBLOCK},
      {"ENOTSUP", ENOTSUP},
      {"EDEADLOCK", EDEADLOCK},
  };
  for (const auto& n : kOtherNames) {
    if (n.name == name) return n.err;
  }
  return 0;
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
  return PosixError(context, err, StatusCodeForErrno(err));
}

Status PosixError(std::string_view context, int err, StatusCode code) {
  std::string msg(context);
  msg += ": ";
  msg += std::strerror(err);
  Status s(code, std::move(msg));
  s.posix_errno_ = err;
  return s;
}

Status StatusWithErrno(StatusCode code, std::string_view message, int err) {
  Status s(code, message);
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
