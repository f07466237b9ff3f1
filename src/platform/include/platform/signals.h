// signals.h: SignalsBlocked, a scope in which the calling thread has every
// signal blocked, so that the threads it starts inherit that mask and are
// never picked to run a handler of a process-directed signal.
//
//   {
//     platform::SignalsBlocked blocked;
//     handler_ = std::thread(...);  // starts with every signal blocked
//   }                               // the caller's mask is back
//
// For a library's own threads that resolve the program's page faults (a
// region's fault handler, its store's workers): a program's signal handler
// that ran on one of them and touched region memory would wait on a fault
// only that thread can resolve, and every fault of the region after it.
// SIGKILL and SIGSTOP cannot be blocked; a synchronous SIGSEGV or SIGBUS
// of the thread's own still ends the process, as it would anyway.
//
// Thread safety: pthread_sigmask acts on the calling thread only; create
// and destroy the scope on one thread.
#ifndef ZTIER_PLATFORM_SIGNALS_H_
#define ZTIER_PLATFORM_SIGNALS_H_

#include <signal.h>

namespace ztier::platform {

class SignalsBlocked {
 public:
  SignalsBlocked();   // blocks every signal
  ~SignalsBlocked();  // restores the mask it found
  SignalsBlocked(const SignalsBlocked&) = delete;
  SignalsBlocked& operator=(const SignalsBlocked&) = delete;

 private:
  sigset_t old_;
};

}  // namespace ztier::platform

#endif  // ZTIER_PLATFORM_SIGNALS_H_
