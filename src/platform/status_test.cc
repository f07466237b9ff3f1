// status_test.cc: Status, Result and the error macros.
#include "ztier/status.h"

#include <cerrno>

#include "testing/test_util.h"

namespace ztier {
namespace {

TEST(StatusTest, DefaultIsOk) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kOk);
  EXPECT_EQ(s.ToString(), "OK");
  EXPECT_EQ(s, Status::Ok());
}

TEST(StatusTest, FactoriesSetCodeAndMessage) {
  const Status s = Status::Corruption("page 7");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kCorruption);
  EXPECT_EQ(s.message(), "page 7");
  EXPECT_EQ(s.ToString(), "Corruption: page 7");
  EXPECT_EQ(Status::InvalidArgument("x").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Status::NotFound("x").code(), StatusCode::kNotFound);
  EXPECT_EQ(Status::ResourceExhausted("x").code(),
            StatusCode::kResourceExhausted);
  EXPECT_EQ(Status::IoError("x").code(), StatusCode::kIoError);
  EXPECT_EQ(Status::Unsupported("x").code(), StatusCode::kUnsupported);
  EXPECT_EQ(Status::Busy("x").code(), StatusCode::kBusy);
  EXPECT_EQ(Status::OutOfRange("x").code(), StatusCode::kOutOfRange);
  EXPECT_EQ(Status::FailedPrecondition("x").code(),
            StatusCode::kFailedPrecondition);
  EXPECT_NE(Status::IoError("a"), Status::IoError("b"));
}

TEST(StatusTest, CodeNamesAndErrnoNames) {
  EXPECT_EQ(StatusCodeName(StatusCode::kInvalidArgument), "InvalidArgument");
  EXPECT_EQ(StatusCodeErrnoName(StatusCode::kInvalidArgument), "EINVAL");
  EXPECT_EQ(StatusCodeErrnoName(StatusCode::kCorruption), "EIO");
  EXPECT_EQ(StatusCodeErrnoName(StatusCode::kResourceExhausted), "ENOMEM");
  EXPECT_EQ(StatusCodeErrnoName(StatusCode::kBusy), "EBUSY");
}

TEST(StatusTest, ErrnoNames) {
  EXPECT_EQ(ErrnoName(ENOENT), "ENOENT");
  EXPECT_EQ(ErrnoName(EADDRINUSE), "EADDRINUSE");
  // No name: none at all, never a null or a number.
  EXPECT_EQ(ErrnoName(0), "");
  EXPECT_EQ(ErrnoName(-EINVAL), "");
  EXPECT_EQ(ErrnoName(4096), "");
}

TEST(StatusTest, ErrnoByNameReadsErrnoNamesBack) {
  EXPECT_EQ(ErrnoByName("ENOSPC"), ENOSPC);
  EXPECT_EQ(ErrnoByName("ETIMEDOUT"), ETIMEDOUT);
  EXPECT_EQ(ErrnoByName(ErrnoName(EHWPOISON)), EHWPOISON);
  EXPECT_EQ(ErrnoByName(""), 0);
  EXPECT_EQ(ErrnoByName("0"), 0);
  EXPECT_EQ(ErrnoByName("ENOSUCH"), 0);
  EXPECT_EQ(ErrnoByName("enospc"), 0);
}

// <errno.h>'s second names of an errno, which ErrnoName never gives but
// another program may send (a control reply): read as the errno they name.
TEST(StatusTest, ErrnoByNameReadsAnErrnosOtherNames) {
  EXPECT_EQ(ErrnoByName("EWOULDBLOCK"), EWOULDBLOCK);
  EXPECT_EQ(ErrnoByName("ENOTSUP"), ENOTSUP);
  EXPECT_EQ(ErrnoByName("EDEADLOCK"), EDEADLOCK);
}

// The errno of a message that names it already: kept for ErrnoNameOf,
// the message left as given (no strerror text added).
TEST(StatusTest, StatusWithErrnoKeepsCodeMessageAndErrno) {
  const Status s = StatusWithErrno(StatusCode::kResourceExhausted,
                                   "ENOSPC: writeback failed", ENOSPC);
  EXPECT_EQ(s, Status::ResourceExhausted("ENOSPC: writeback failed"));
  EXPECT_EQ(s.posix_errno(), ENOSPC);
  EXPECT_EQ(ErrnoNameOf(s), "ENOSPC");
  EXPECT_EQ(ErrnoNameOf(Annotate("ctl", s)), "ENOSPC");
  EXPECT_EQ(ErrnoNameOf(StatusWithErrno(StatusCode::kBusy, "x", 0)), "EBUSY");
}

TEST(StatusTest, ErrnoNameOfAStatusIsItsErrnosElseItsCodes) {
  EXPECT_EQ(ErrnoNameOf(PosixError("open /x", EACCES)), "EACCES");
  EXPECT_EQ(ErrnoNameOf(PosixError("bind", EADDRINUSE)), "EADDRINUSE");
  EXPECT_EQ(ErrnoNameOf(Status::NotFound("no device")), "ENODEV");
  EXPECT_EQ(ErrnoNameOf(Status::Ok()), "0");
  // An errno glibc has no name for: the code PosixError gave it (kIoError).
  const Status unknown = PosixError("ioctl", 4096);
  ASSERT_EQ(unknown.posix_errno(), 4096);
  EXPECT_EQ(ErrnoNameOf(unknown), "EIO");
}

TEST(StatusTest, AnnotateKeepsCodeAndErrno) {
  const Status a =
      Annotate("metrics listen ':80'", PosixError("bind", EADDRNOTAVAIL));
  EXPECT_EQ(a.code(), StatusCode::kIoError);
  EXPECT_EQ(a.posix_errno(), EADDRNOTAVAIL);
  EXPECT_EQ(ErrnoNameOf(a), "EADDRNOTAVAIL");
  EXPECT_EQ(a.message().rfind("metrics listen ':80': bind: ", 0), 0u)
      << a.message();
  const Status b = Annotate("x", Status::Busy("held"));
  EXPECT_EQ(b, Status::Busy("x: held"));
  EXPECT_EQ(b.posix_errno(), 0);
  EXPECT_TRUE(Annotate("x", Status::Ok()).ok());
}

TEST(StatusTest, PosixErrorWithACodeKeepsTheErrno) {
  const Status s = PosixError("write /x", EINVAL, StatusCode::kIoError);
  EXPECT_EQ(s.code(), StatusCode::kIoError);
  EXPECT_EQ(s.posix_errno(), EINVAL);
  EXPECT_EQ(ErrnoNameOf(s), "EINVAL");
  EXPECT_EQ(s.message(), PosixError("write /x", EINVAL).message());
}

TEST(StatusTest, PosixErrorMapsErrno) {
  EXPECT_EQ(PosixError("open /x", ENOENT).code(), StatusCode::kNotFound);
  EXPECT_EQ(PosixError("open /x", ENOENT).posix_errno(), ENOENT);
  EXPECT_EQ(PosixError("bind", EADDRINUSE).posix_errno(), EADDRINUSE);
  EXPECT_EQ(Status::NotFound("no device").posix_errno(), 0);
  EXPECT_EQ(PosixError("mmap", ENOMEM).code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(PosixError("write", ENOSPC).code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(PosixError("ioctl", EINVAL).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(PosixError("open", EBUSY).code(), StatusCode::kBusy);
  EXPECT_EQ(PosixError("accept", EAGAIN).code(), StatusCode::kBusy);
  EXPECT_EQ(PosixError("bind", EADDRINUSE).code(), StatusCode::kBusy);
  EXPECT_EQ(PosixError("write", EDQUOT).code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(PosixError("io_uring_setup", ENOSYS).code(),
            StatusCode::kUnsupported);
  EXPECT_EQ(PosixError("strtoul", ERANGE).code(), StatusCode::kOutOfRange);
  EXPECT_EQ(PosixError("execve", E2BIG).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(StatusCodeForErrno(EACCES), StatusCode::kPermissionDenied);
  EXPECT_EQ(StatusCodeForErrno(EIO), StatusCode::kIoError);
  EXPECT_EQ(PosixError("accept", EMFILE).code(),
            StatusCode::kResourceExhausted);
  EXPECT_EQ(PosixError("socket", ENFILE).code(),
            StatusCode::kResourceExhausted);
  EXPECT_EQ(PosixError("send", ENOBUFS).code(),
            StatusCode::kResourceExhausted);
  const Status io = PosixError("pread /dev/sdb", EIO);
  EXPECT_EQ(io.code(), StatusCode::kIoError);
  EXPECT_EQ(io.message().rfind("pread /dev/sdb: ", 0), 0u);
}

Result<int> Half(int x) {
  if (x % 2 != 0) return Err(Status::InvalidArgument("odd"));
  return x / 2;
}

Result<int> Quarter(int x) {
  ZT_ASSIGN_OR_RETURN(int h, Half(x));
  ZT_ASSIGN_OR_RETURN(int q, Half(h));
  return q;
}

Status CheckEven(int x) {
  ZT_RETURN_IF_ERROR(Half(x).has_value() ? Status::Ok()
                                         : Status::InvalidArgument("odd"));
  return Status::Ok();
}

Status QuarterStatus(int x, int* out) {
  ZT_ASSIGN_OR_RETURN(*out, Quarter(x));
  return Status::Ok();
}

TEST(StatusTest, MacrosPropagate) {
  ASSERT_TRUE(Quarter(8).has_value());
  EXPECT_EQ(*Quarter(8), 2);
  ASSERT_FALSE(Quarter(6).has_value());
  EXPECT_EQ(Quarter(6).error().code(), StatusCode::kInvalidArgument);
  EXPECT_OK(CheckEven(4));
  EXPECT_EQ(CheckEven(3).code(), StatusCode::kInvalidArgument);
  int q = 0;
  EXPECT_OK(QuarterStatus(12, &q));
  EXPECT_EQ(q, 3);
  EXPECT_FALSE(QuarterStatus(2, &q).ok());
}

}  // namespace
}  // namespace ztier
