// signals.cc: see platform/signals.h.
#include "platform/signals.h"

#include <pthread.h>

namespace ztier::platform {

SignalsBlocked::SignalsBlocked() {
  sigset_t all;
  sigfillset(&all);
  // Fails only for a bad `how`: not here.
  pthread_sigmask(SIG_BLOCK, &all, &old_);
}

SignalsBlocked::~SignalsBlocked() { pthread_sigmask(SIG_SETMASK, &old_, nullptr); }

}  // namespace ztier::platform
