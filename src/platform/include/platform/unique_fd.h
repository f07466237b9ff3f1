// unique_fd.h: UniqueFd, the one owner of a file descriptor. It closes the
// descriptor when destroyed or given another, and moves but never copies,
// so that a type holding one gets its move and destructor by default.
//
//   const int fd = ::eventfd(0, EFD_CLOEXEC);
//   if (fd < 0) return Err(PosixError("eventfd", errno));
//   platform::UniqueFd owned(fd);  // closed when `owned` goes
//
// Thread safety: a value owned by one thread at a time; get() may be read
// by several while none changes it.
#ifndef ZTIER_PLATFORM_UNIQUE_FD_H_
#define ZTIER_PLATFORM_UNIQUE_FD_H_

#include <unistd.h>

#include <utility>

namespace ztier::platform {

class UniqueFd {
 public:
  UniqueFd() = default;  // owns nothing: get() is -1
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) Reset(std::exchange(other.fd_, -1));
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { Reset(); }

  int get() const { return fd_; }
  // Closes the descriptor owned (if any; close(2)'s error is dropped, as
  // the descriptor is gone either way) and owns `fd` instead.
  void Reset(int fd = -1) {
    if (fd_ >= 0 && fd_ != fd) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

}  // namespace ztier::platform

#endif  // ZTIER_PLATFORM_UNIQUE_FD_H_
