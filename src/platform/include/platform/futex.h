// futex.h: sleeping on a 32-bit atomic word until another thread wakes it,
// the Linux futex(2) (FUTEX_WAIT and FUTEX_WAKE, process-private).
//
//   // waiter: sleep while the word still holds `seen`
//   while ((seen = word.load()) & kBusy) platform::FutexWait(&word, seen);
//   // waker: after changing the word
//   word.store(0); platform::FutexWake(&word, 1);
//
// FutexWait compares the word with `expected` and sleeps only if they are
// equal, atomically with respect to FutexWake, so a wake that follows the
// change of the word is never lost. It may also return early (a signal, a
// spurious wake-up, the word already changed): callers reload the word and
// loop. The word must live in memory that only this process maps; it is
// the caller's own protocol that says what its values mean.
//
// Errors: none reported. EAGAIN (the word differed) and EINTR are the
// ordinary early returns above; any other error is a broken contract (an
// unaligned or unmapped word) and asserts.
//
// Thread safety: both may be called from any thread, at any time.
#ifndef ZTIER_PLATFORM_FUTEX_H_
#define ZTIER_PLATFORM_FUTEX_H_

#include <atomic>
#include <cstdint>

namespace ztier::platform {

static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t),
              "a futex word is a plain 32-bit word");

// Sleeps while *word == expected, until a FutexWake on `word` (or early).
void FutexWait(std::atomic<std::uint32_t>* word, std::uint32_t expected);

// Wakes up to `n` threads sleeping in FutexWait on `word`; returns how many
// it woke.
int FutexWake(std::atomic<std::uint32_t>* word, int n);

}  // namespace ztier::platform

#endif  // ZTIER_PLATFORM_FUTEX_H_
