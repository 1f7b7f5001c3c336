#pragma once
// Counts heap allocations: include in exactly one translation unit of a test executable, which
// then replaces the global operator new/delete. allocation_count() is monotonic; tests compare
// it before and after the call under test.

#include <atomic>
#include <cstdlib>
#include <new>

namespace posenc_test {
inline std::atomic<long>& allocation_counter() {
  static std::atomic<long> count{0};
  return count;
}
inline long allocation_count() { return allocation_counter().load(std::memory_order_relaxed); }
}  // namespace posenc_test

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
