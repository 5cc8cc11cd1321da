// Clang's thread-safety attributes behind macros, as LevelDB's port/thread_annotations.h: they
// let `-Wthread-safety` prove at compile time that a field marked GUARDED_BY(mu_) is only touched
// with mu_ held and that a function marked REQUIRES(mu_) is only called so. Under other
// compilers the macros are empty. The lock types that carry them are in util/mutex.h.
// Reference: https://clang.llvm.org/docs/ThreadSafetyAnalysis.html
#pragma once

#if defined(__clang__)
#define TIPFS_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define TIPFS_THREAD_ANNOTATION(x)
#endif

// A type that is a lock ("mutex") or a scoped holder of one.
#define CAPABILITY(x) TIPFS_THREAD_ANNOTATION(capability(x))
#define SCOPED_CAPABILITY TIPFS_THREAD_ANNOTATION(scoped_lockable)

// A field read or written only with the lock held (PT_: the pointee of a pointer field).
#define GUARDED_BY(x) TIPFS_THREAD_ANNOTATION(guarded_by(x))
#define PT_GUARDED_BY(x) TIPFS_THREAD_ANNOTATION(pt_guarded_by(x))

// Lock order: this lock is taken after (or before) the named ones.
#define ACQUIRED_AFTER(...) TIPFS_THREAD_ANNOTATION(acquired_after(__VA_ARGS__))
#define ACQUIRED_BEFORE(...) TIPFS_THREAD_ANNOTATION(acquired_before(__VA_ARGS__))

// Preconditions of a function: the caller holds (exclusively or shared) or does not hold a lock.
#define REQUIRES(...) TIPFS_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define REQUIRES_SHARED(...) TIPFS_THREAD_ANNOTATION(requires_shared_capability(__VA_ARGS__))
#define EXCLUDES(...) TIPFS_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))

// Effects of a function: it takes or releases a lock and returns with it so.
#define ACQUIRE(...) TIPFS_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define ACQUIRE_SHARED(...) TIPFS_THREAD_ANNOTATION(acquire_shared_capability(__VA_ARGS__))
#define RELEASE(...) TIPFS_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define RELEASE_SHARED(...) TIPFS_THREAD_ANNOTATION(release_shared_capability(__VA_ARGS__))
#define RELEASE_GENERIC(...) TIPFS_THREAD_ANNOTATION(release_generic_capability(__VA_ARGS__))
#define TRY_ACQUIRE(...) TIPFS_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
#define TRY_ACQUIRE_SHARED(...) TIPFS_THREAD_ANNOTATION(try_acquire_shared_capability(__VA_ARGS__))

// A run-time check that the lock is held; the analysis then assumes it is.
#define ASSERT_CAPABILITY(x) TIPFS_THREAD_ANNOTATION(assert_capability(x))
#define ASSERT_SHARED_CAPABILITY(x) TIPFS_THREAD_ANNOTATION(assert_shared_capability(x))

// A function returning a reference to a lock (so callers' REQUIRES can name it).
#define RETURN_CAPABILITY(x) TIPFS_THREAD_ANNOTATION(lock_returned(x))

// Turns the analysis off for one function. Each use says why in a comment: the analysis cannot
// follow locks handed between objects or held across a callback it does not see.
#define NO_THREAD_SAFETY_ANALYSIS TIPFS_THREAD_ANNOTATION(no_thread_safety_analysis)
