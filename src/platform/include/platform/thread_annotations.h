// thread_annotations.h: Clang's thread-safety annotations, as macros.
//
// They turn the engine's lock rules into something the compiler checks:
// a lock type is a capability (ZT_CAPABILITY), a field says which lock
// guards it (ZT_GUARDED_BY), a function says which locks it needs
// (ZT_REQUIRES), takes (ZT_ACQUIRE, ZT_TRY_ACQUIRE), lets go of
// (ZT_RELEASE) or must not hold (ZT_EXCLUDES), and an RAII holder is a
// ZT_SCOPED_CAPABILITY. `make check-locks` builds the engine with clang++
// and -Wthread-safety -Werror; every other compiler (GCC, the default)
// sees empty macros. The attributes are Clang's
// (https://clang.llvm.org/docs/ThreadSafetyAnalysis.html), spelled as in
// abseil's base/thread_annotations.h.
//
// ZT_NO_THREAD_SAFETY_ANALYSIS is for a function whose locking the
// analysis cannot follow (a lock chosen at run time among several); each
// use says why beside it.
#ifndef ZTIER_PLATFORM_THREAD_ANNOTATIONS_H_
#define ZTIER_PLATFORM_THREAD_ANNOTATIONS_H_

#if defined(__clang__)
#define ZT_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define ZT_THREAD_ANNOTATION(x)
#endif

#define ZT_CAPABILITY(name) ZT_THREAD_ANNOTATION(capability(name))
#define ZT_SCOPED_CAPABILITY ZT_THREAD_ANNOTATION(scoped_lockable)
#define ZT_GUARDED_BY(x) ZT_THREAD_ANNOTATION(guarded_by(x))
#define ZT_PT_GUARDED_BY(x) ZT_THREAD_ANNOTATION(pt_guarded_by(x))
#define ZT_REQUIRES(...) \
  ZT_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define ZT_ACQUIRE(...) ZT_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define ZT_TRY_ACQUIRE(...) \
  ZT_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
#define ZT_RELEASE(...) ZT_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define ZT_EXCLUDES(...) ZT_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define ZT_RETURN_CAPABILITY(x) ZT_THREAD_ANNOTATION(lock_returned(x))
#define ZT_ASSERT_CAPABILITY(x) ZT_THREAD_ANNOTATION(assert_capability(x))
#define ZT_NO_THREAD_SAFETY_ANALYSIS \
  ZT_THREAD_ANNOTATION(no_thread_safety_analysis)

#endif  // ZTIER_PLATFORM_THREAD_ANNOTATIONS_H_
