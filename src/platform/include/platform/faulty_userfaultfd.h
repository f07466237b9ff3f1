// faulty_userfaultfd.h: a Userfaultfd that wraps another and fails the
// calls a test chooses, for error paths a real userfaultfd will not produce
// on demand (UFFDIO_COPY failing with ENOMEM, retries exhausted with
// EAGAIN). The kind of wrapper leveldb's EnvWrapper makes cheap.
//
//   auto real = OpenUserfaultfd();
//   FaultyUserfaultfd f(std::move(*real), [](const UffdCall& c) {
//     return c.op == UffdCall::kCopy ? ENOMEM : 0;
//   });
//
// Before each call the fault function sees it; a nonzero errno fails the
// call without reaching the wrapped one: done is 0, the Status is
// PosixError("<ioctl> <start>+<len> (injected)", errno), ReadEvents returns
// that error. 0 passes the call through. can_poison() and poll_fd() pass
// through unchanged.
//
// Thread safety: as the wrapped Userfaultfd; the fault function is called on
// the caller's thread, so it must be thread-safe if calls are.
#ifndef ZTIER_PLATFORM_FAULTY_USERFAULTFD_H_
#define ZTIER_PLATFORM_FAULTY_USERFAULTFD_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "platform/userfaultfd.h"

namespace ztier::internal {

// What the fault function is shown.
struct UffdCall {
  enum Op {
    kRegister,
    kUnregister,
    kZeroPage,
    kCopy,
    kWriteProtect,
    kWake,
    kPoison,
    kReadEvents,
  } op = kCopy;
  std::uintptr_t start = 0;  // 0 for kReadEvents
  std::size_t len = 0;       // bytes; for kReadEvents the messages asked for
};
// Returns the errno to fail the call with, or 0.
using UffdFault = std::function<int(const UffdCall& call)>;

class FaultyUserfaultfd final : public Userfaultfd {
 public:
  FaultyUserfaultfd(std::unique_ptr<Userfaultfd> base, UffdFault fault);

  Status Register(void* start, std::size_t len) override;
  Status Unregister(void* start, std::size_t len) override;
  bool can_poison() const override { return base_->can_poison(); }
  Status ZeroPage(std::uintptr_t start, std::size_t len,
                  std::size_t* done) override;
  Status Copy(std::uintptr_t dst, const std::byte* src, std::size_t len,
              bool wp, std::size_t* done) override;
  Status WriteProtect(std::uintptr_t start, std::size_t len, bool wp) override;
  Status Wake(std::uintptr_t start, std::size_t len) override;
  Status Poison(std::uintptr_t start, std::size_t len) override;
  Result<std::size_t> ReadEvents(uffd_msg* msgs, std::size_t max) override;
  int poll_fd() const override { return base_->poll_fd(); }

 private:
  // The injected error for `call`, or OK.
  Status Inject(UffdCall::Op op, std::uintptr_t start, std::size_t len) const;

  std::unique_ptr<Userfaultfd> base_;
  UffdFault fault_;
};

}  // namespace ztier::internal

#endif  // ZTIER_PLATFORM_FAULTY_USERFAULTFD_H_
