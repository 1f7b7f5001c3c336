#pragma once
// POSENC_TEST_UNDER_ASAN: defined when AddressSanitizer is on (GCC's macro, Clang's feature
// test). ASan replaces the allocator, so allocation counting and huge-request tests differ.

#if defined(__SANITIZE_ADDRESS__)
#define POSENC_TEST_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define POSENC_TEST_UNDER_ASAN 1
#endif
#endif
