/* common/asan.h: marking memory that a free list keeps as unusable under
 * AddressSanitizer.
 *
 * A structure recycled through a free list instead of free() would hide a
 * use after its release from ASan: the memory stays allocated. Poisoning
 * it while it waits on the list (and unpoisoning it before reuse or
 * free()) keeps such a use reported as it was when the structure was
 * freed. Both are no-ops in a build without ASan. */
#ifndef ONCE_COMMON_ASAN_H_
#define ONCE_COMMON_ASAN_H_

#if defined(__SANITIZE_ADDRESS__)
#define ONCE_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ONCE_ASAN 1
#endif
#endif

#ifdef ONCE_ASAN
#include <sanitizer/asan_interface.h>
#define ONCE_POISON(p, n)   ASAN_POISON_MEMORY_REGION((p), (n))
#define ONCE_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define ONCE_POISON(p, n)   ((void)(p), (void)(n))
#define ONCE_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#endif /* ONCE_COMMON_ASAN_H_ */
