// GPTVK_ASAN and GPTVK_TSAN are defined in builds with AddressSanitizer or ThreadSanitizer
// (GCC's __SANITIZE_ADDRESS__ / __SANITIZE_THREAD__, Clang's __has_feature), whose shadow
// memory and allocators change what a test may assume: an unlimited address space, malloc's
// own growth.
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#define GPTVK_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GPTVK_ASAN 1
#endif
#endif

#if defined(__SANITIZE_THREAD__)
#define GPTVK_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define GPTVK_TSAN 1
#endif
#endif
