// failing_new.h: a replacement of the global operator new and delete
// (every form, over malloc and free) that fails the allocations a test
// chooses, on the test's own thread only: a std::bad_alloc from the
// throwing forms, null from the nothrow ones. For the out-of-memory paths
// of code that allocates with new (std::vector, std::string,
// std::function); malloc itself is left alone. A hook may also see every
// operator new, on every thread (device/no_alloc_test.cc counts them).
//
// Link testing/failing_new.cc into the test binary (it defines the
// operators; one binary, one definition):
//
//   ztier::testing::FailNthAllocation(3);   // the third from now fails
//   ... code under test ...
//   ztier::testing::FailNthAllocation(0);   // off
//   if (ztier::testing::AllocationFailed()) ...
//
// Thread safety: the settings are the calling thread's; other threads'
// allocations never fail.
#ifndef ZTIER_TESTING_FAILING_NEW_H_
#define ZTIER_TESTING_FAILING_NEW_H_

namespace ztier::testing {

// The n-th allocation of this thread from now fails (1: the next), and
// only that one; 0: none. Clears AllocationFailed().
void FailNthAllocation(long n);
// Every allocation of this thread fails while `on`. Clears
// AllocationFailed() when turned on.
void FailEveryAllocation(bool on);
// Whether an allocation of this thread failed since the last of the two
// above.
bool AllocationFailed();
// Calls `hook` at every operator new from now on, on any thread, before
// it allocates; null: none. The hook must not allocate.
void SetNewHook(void (*hook)());

}  // namespace ztier::testing

#endif  // ZTIER_TESTING_FAILING_NEW_H_
