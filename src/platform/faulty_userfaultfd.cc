// faulty_userfaultfd.cc: FaultyUserfaultfd (contract in
// faulty_userfaultfd.h).
#include "platform/faulty_userfaultfd.h"

#include <cstdio>
#include <string>
#include <utility>

namespace ztier::internal {
namespace {

const char* OpName(UffdCall::Op op) {
  switch (op) {
    case UffdCall::kRegister:
      return "UFFDIO_REGISTER";
    case UffdCall::kUnregister:
      return "UFFDIO_UNREGISTER";
    case UffdCall::kZeroPage:
      return "UFFDIO_ZEROPAGE";
    case UffdCall::kCopy:
      return "UFFDIO_COPY";
    case UffdCall::kWriteProtect:
      return "UFFDIO_WRITEPROTECT";
    case UffdCall::kWake:
      return "UFFDIO_WAKE";
    case UffdCall::kPoison:
      return "UFFDIO_POISON";
    case UffdCall::kReadEvents:
      return "read userfaultfd";
  }
  return "?";
}

}  // namespace

FaultyUserfaultfd::FaultyUserfaultfd(std::unique_ptr<Userfaultfd> base,
                                     UffdFault fault)
    : base_(std::move(base)), fault_(std::move(fault)) {}

Status FaultyUserfaultfd::Inject(UffdCall::Op op, std::uintptr_t start,
                                 std::size_t len) const {
  const int err = fault_ ? fault_(UffdCall{op, start, len}) : 0;
  if (err == 0) return Status::Ok();
  char where[64];
  std::snprintf(where, sizeof(where), " 0x%jx+%zu (injected)",
                static_cast<std::uintmax_t>(start), len);
  return PosixError(OpName(op) + std::string(where), err);
}

Status FaultyUserfaultfd::Register(void* start, std::size_t len) {
  ZT_RETURN_IF_ERROR(Inject(UffdCall::kRegister,
                            reinterpret_cast<std::uintptr_t>(start), len));
  return base_->Register(start, len);
}

Status FaultyUserfaultfd::Unregister(void* start, std::size_t len) {
  ZT_RETURN_IF_ERROR(Inject(UffdCall::kUnregister,
                            reinterpret_cast<std::uintptr_t>(start), len));
  return base_->Unregister(start, len);
}

Status FaultyUserfaultfd::ZeroPage(std::uintptr_t start, std::size_t len,
                                   std::size_t* done) {
  if (Status st = Inject(UffdCall::kZeroPage, start, len); !st.ok()) {
    if (done != nullptr) *done = 0;
    return st;
  }
  return base_->ZeroPage(start, len, done);
}

Status FaultyUserfaultfd::Copy(std::uintptr_t dst, const std::byte* src,
                               std::size_t len, bool wp, std::size_t* done) {
  if (Status st = Inject(UffdCall::kCopy, dst, len); !st.ok()) {
    if (done != nullptr) *done = 0;
    return st;
  }
  return base_->Copy(dst, src, len, wp, done);
}

Status FaultyUserfaultfd::WriteProtect(std::uintptr_t start, std::size_t len,
                                       bool wp) {
  ZT_RETURN_IF_ERROR(Inject(UffdCall::kWriteProtect, start, len));
  return base_->WriteProtect(start, len, wp);
}

Status FaultyUserfaultfd::Wake(std::uintptr_t start, std::size_t len) {
  ZT_RETURN_IF_ERROR(Inject(UffdCall::kWake, start, len));
  return base_->Wake(start, len);
}

Status FaultyUserfaultfd::Poison(std::uintptr_t start, std::size_t len) {
  ZT_RETURN_IF_ERROR(Inject(UffdCall::kPoison, start, len));
  return base_->Poison(start, len);
}

Result<std::size_t> FaultyUserfaultfd::ReadEvents(uffd_msg* msgs,
                                                  std::size_t max) {
  ZT_RETURN_IF_ERROR(Inject(UffdCall::kReadEvents, 0, max));
  return base_->ReadEvents(msgs, max);
}

}  // namespace ztier::internal
