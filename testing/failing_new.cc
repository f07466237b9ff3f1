// failing_new.cc: the operators of failing_new.h.
#include "testing/failing_new.h"

#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <new>

// The operators below are a matched set (new -> malloc, delete -> free);
// GCC cannot see that through the replacement and warns.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

namespace {

// 0: off; -1: every allocation fails; else the allocations of this thread
// left until the one that fails (1: the next one).
thread_local long t_fail_in = 0;
thread_local bool t_failed = false;
std::atomic<void (*)()> g_hook{nullptr};

void* Allocate(std::size_t n, std::size_t align) {
  if (void (*hook)() = g_hook.load(std::memory_order_relaxed)) hook();
  if (t_fail_in < 0 || (t_fail_in > 0 && --t_fail_in == 0)) {
    t_failed = true;
    return nullptr;
  }
  if (n == 0) n = 1;
  if (align <= alignof(std::max_align_t)) return std::malloc(n);
  return std::aligned_alloc(align, (n + align - 1) / align * align);
}

void* AllocateOrThrow(std::size_t n, std::size_t align = 0) {
  if (void* p = Allocate(n, align)) return p;
  throw std::bad_alloc();
}

}  // namespace

namespace ztier::testing {

void FailNthAllocation(long n) {
  t_fail_in = n > 0 ? n : 0;
  t_failed = false;
}

void FailEveryAllocation(bool on) {
  t_fail_in = on ? -1 : 0;
  if (on) t_failed = false;
}

bool AllocationFailed() { return t_failed; }

void SetNewHook(void (*hook)()) { g_hook.store(hook); }

}  // namespace ztier::testing

void* operator new(std::size_t n) { return AllocateOrThrow(n); }
void* operator new[](std::size_t n) { return AllocateOrThrow(n); }
void* operator new(std::size_t n, std::align_val_t a) {
  return AllocateOrThrow(n, static_cast<std::size_t>(a));
}
void* operator new[](std::size_t n, std::align_val_t a) {
  return AllocateOrThrow(n, static_cast<std::size_t>(a));
}
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  return Allocate(n, 0);
}
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept {
  return Allocate(n, 0);
}
void* operator new(std::size_t n, std::align_val_t a,
                   const std::nothrow_t&) noexcept {
  return Allocate(n, static_cast<std::size_t>(a));
}
void* operator new[](std::size_t n, std::align_val_t a,
                     const std::nothrow_t&) noexcept {
  return Allocate(n, static_cast<std::size_t>(a));
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept {
  std::free(p);
}
