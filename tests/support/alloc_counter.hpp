#pragma once
// Counts heap allocations: include in exactly one translation unit of a test executable.
// allocation_count() is monotonic; tests compare it before and after the call under test.
//
// Normal builds replace the global operator new/delete with counting ones. Under
// AddressSanitizer a replacement would fight ASan's own allocator (alloc-dealloc-mismatch on
// pointers libstdc++ got from ASan), so there the count comes from ASan's allocation hook,
// which sees every malloc and operator new.

#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <new>

#include "sanitizer.hpp"

namespace posenc_test {
inline std::atomic<long>& allocation_counter() {
  static std::atomic<long> count{0};
  return count;
}
inline long allocation_count() { return allocation_counter().load(std::memory_order_relaxed); }
}  // namespace posenc_test

#if defined(POSENC_TEST_UNDER_ASAN)

// sanitizer/allocator_interface.h is not shipped with GCC 12; the function is in libasan.
extern "C" int __sanitizer_install_malloc_and_free_hooks(
    void (*malloc_hook)(const volatile void*, std::size_t), void (*free_hook)(const volatile void*));

namespace posenc_test {
inline void count_allocation(const volatile void*, std::size_t) {
  allocation_counter().fetch_add(1, std::memory_order_relaxed);
}
inline void ignore_free(const volatile void*) {}
// ASan refuses a null free hook (the call then returns 0 and counts nothing).
inline const int kAllocationHookInstalled =
    __sanitizer_install_malloc_and_free_hooks(&count_allocation, &ignore_free);
}  // namespace posenc_test

#else

// GCC 12 inlines these replacements into callers and then flags free() on a pointer that came
// from "operator new" (-Wmismatched-new-delete) although both sides are ours, malloc/free.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
void* operator new(std::size_t size) {
  posenc_test::allocation_counter().fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t size) { return operator new(size); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

#endif
