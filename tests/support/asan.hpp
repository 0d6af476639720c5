// GPTVK_ASAN is defined in builds with AddressSanitizer (GCC's __SANITIZE_ADDRESS__, Clang's
// __has_feature), whose shadow memory and allocator change what a test may assume: an
// unlimited address space, malloc's own growth.
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#define GPTVK_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GPTVK_ASAN 1
#endif
#endif
