// File: ztier/status.h
//
// Status and Result<T>: how every ztier operation reports success or failure.
//
// A Status is either OK or carries a code from a closed set plus a message
// that names what failed (a file, an offset, a token). Status objects are
// values: cheap to copy when OK (no allocation), and [[nodiscard]] so that an
// error cannot be dropped by accident. ztier's engine uses no exceptions.
//
// The codes mean (callers branch on the code, never on the message):
//   kOk                 success.
//   kInvalidArgument    the caller passed something malformed (a bad token, a
//                       size of 0, an unknown codec name). Maps to EINVAL.
//   kNotFound           the named thing does not exist. Maps to ENOENT/ENODEV.
//   kResourceExhausted  a limit or the memory ran out (mem_limit, pool full,
//                       backing store full). The operation left no partial
//                       state. Maps to ENOMEM/ENOSPC.
//   kIoError            a read or write of an external resource failed. EIO.
//   kCorruption         stored or received data is damaged (a compressed
//                       object that does not decompress). EIO on the wire.
//   kUnsupported        a valid request this build or backend cannot do.
//   kBusy               refused because the object is in use. EBUSY.
//   kOutOfRange         an index or offset beyond the end. ERANGE.
//   kFailedPrecondition the object is not in the state the call needs (not
//                       initialised yet). EINVAL in zram's terms.
//   kPermissionDenied   the caller may not do this to that object (EPERM,
//                       EACCES: another user's process, a file's mode).
//
// Result<T> is std::expected<T, Status>: a value or the error explaining why
// there is none.
//
// Thread safety: Status and Result are plain values; const methods may be
// called concurrently.
#ifndef ZTIER_STATUS_H_
#define ZTIER_STATUS_H_

#include <expected>
// Every C++ header of ztier uses std::expected (Result<T>): say so here, not
// with an error about `expected` deep in a user's build (C programs use
// ztier/region_c.h, which needs none of this).
#if !defined(__cpp_lib_expected) || __cpp_lib_expected < 202202L
#error \
    "ztier's C++ headers need C++23 std::expected: compile with -std=c++23 (GCC 12 or later with libstdc++)"
#endif
#include <string>
#include <string_view>
#include <utility>

namespace ztier {

enum class StatusCode : int {
  kOk = 0,
  kInvalidArgument,
  kNotFound,
  kResourceExhausted,
  kIoError,
  kCorruption,
  kUnsupported,
  kBusy,
  kOutOfRange,
  kFailedPrecondition,
  kPermissionDenied,
};

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string_view message)
      : code_(code), message_(message) {}

  static Status Ok() { return Status(); }
  static Status InvalidArgument(std::string_view m) {
    return {StatusCode::kInvalidArgument, m};
  }
  static Status NotFound(std::string_view m) {
    return {StatusCode::kNotFound, m};
  }
  static Status ResourceExhausted(std::string_view m) {
    return {StatusCode::kResourceExhausted, m};
  }
  static Status IoError(std::string_view m) { return {StatusCode::kIoError, m}; }
  static Status Corruption(std::string_view m) {
    return {StatusCode::kCorruption, m};
  }
  static Status Unsupported(std::string_view m) {
    return {StatusCode::kUnsupported, m};
  }
  static Status Busy(std::string_view m) { return {StatusCode::kBusy, m}; }
  static Status OutOfRange(std::string_view m) {
    return {StatusCode::kOutOfRange, m};
  }
  static Status FailedPrecondition(std::string_view m) {
    return {StatusCode::kFailedPrecondition, m};
  }
  static Status PermissionDenied(std::string_view m) {
    return {StatusCode::kPermissionDenied, m};
  }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // The errno of a Status made by PosixError; 0 for any other. Messages
  // for people name it (ENOENT, EADDRINUSE) where the code's errno name
  // (StatusCodeErrnoName, zram's) would be a different one.
  int posix_errno() const { return posix_errno_; }

  // "OK", or "<CodeName>: <message>".
  std::string ToString() const;

  // Explicitly ignores an error where dropping it is the documented intent.
  void IgnoreError() const {}

  friend bool operator==(const Status& a, const Status& b) {
    return a.code_ == b.code_ && a.message_ == b.message_;
  }

 private:
  friend Status PosixError(std::string_view context, int err, StatusCode code);
  friend Status Annotate(std::string_view context, const Status& s);
  friend Status StatusWithErrno(StatusCode code, std::string_view message,
                                int err);

  StatusCode code_ = StatusCode::kOk;
  int posix_errno_ = 0;
  std::string message_;
};

// "Ok", "InvalidArgument", ...
std::string_view StatusCodeName(StatusCode code);

// The kernel errno name a zram user expects for this code ("EINVAL", ...).
std::string_view StatusCodeErrnoName(StatusCode code);

// `err`'s name ("ENOENT", "EADDRINUSE"), as glibc's strerrorname_np()
// gives it; empty for 0 and for a value that glibc names none (a negative
// one, an unknown one).
std::string_view ErrnoName(int err);

// The errno that ErrnoName names `name` ("ENOSPC" gives ENOSPC), or that
// <errno.h> gives `name` as a second name (EWOULDBLOCK, ENOTSUP,
// EDEADLOCK); 0 for a name of no errno (empty, unknown, "0").
int ErrnoByName(std::string_view name);

// The errno name a person reads for `s`: its posix_errno()'s (PosixError's)
// where that has a name, else StatusCodeErrnoName(s.code()), so never
// empty. "0" for OK.
std::string_view ErrnoNameOf(const Status& s);

// The one place where errno becomes a Status. `context` names what was being
// done and to what ("open /var/lib/x", "mmap 1 GiB arena").
Status PosixError(std::string_view context, int err);

// As PosixError(context, err), with `code` in place of
// StatusCodeForErrno(err): for a layer whose contract gives every errno of
// a call one code (a failed write of the backing file is kIoError, EINVAL
// or EACCES as much as EIO), while ErrnoNameOf still names `err`.
Status PosixError(std::string_view context, int err, StatusCode code);

// `s` with "<context>: " before its message, its code and posix_errno()
// kept, so that an error passed up a layer names where it happened and
// ErrnoNameOf still names the errno it came from. OK stays OK.
Status Annotate(std::string_view context, const Status& s);

// A Status of `code` and `message` whose posix_errno() is `err`: for an
// errno that arrives from elsewhere, named in a message that says it
// already (a control server's reply, ctl::Request; libnbd's error, which
// ends in strerror's text), where PosixError would add strerror's text to
// it. `code` is not kOk.
Status StatusWithErrno(StatusCode code, std::string_view message, int err);

// The code PosixError gives `err` (kIoError for any errno it does not name).
StatusCode StatusCodeForErrno(int err);

template <typename T>
using Result = std::expected<T, Status>;

// Wraps an error Status for returning from a function that returns Result<T>.
inline std::unexpected<Status> Err(Status s) {
  return std::unexpected<Status>(std::move(s));
}

namespace internal {
// What the macros below return: converts to Status and to any Result<T>, so
// one macro serves functions of either return type.
struct ErrorReturn {
  Status status;
  operator Status() && { return std::move(status); }  // NOLINT
  template <typename T>
  operator Result<T>() && {  // NOLINT
    return std::unexpected<Status>(std::move(status));
  }
};
}  // namespace internal

}  // namespace ztier

#define ZT_CONCAT_INNER_(a, b) a##b
#define ZT_CONCAT_(a, b) ZT_CONCAT_INNER_(a, b)

// Returns from the current function if `expr` (a Status) is not OK.
#define ZT_RETURN_IF_ERROR(expr)              \
  do {                                        \
    ::ztier::Status zt_status_ = (expr);      \
    if (!zt_status_.ok())                     \
      return ::ztier::internal::ErrorReturn{std::move(zt_status_)}; \
  } while (0)

// `lhs = value of expr` (a Result<T>), or returns its error. Works in
// functions returning Status or Result<U>.
#define ZT_ASSIGN_OR_RETURN(lhs, expr) \
  ZT_ASSIGN_OR_RETURN_IMPL_(ZT_CONCAT_(zt_result_, __LINE__), lhs, expr)
#define ZT_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr)             \
  auto tmp = (expr);                                         \
  if (!tmp.has_value())                                      \
    return ::ztier::internal::ErrorReturn{std::move(tmp.error())}; \
  lhs = std::move(*tmp)

#endif  // ZTIER_STATUS_H_
