#pragma once
/// \file posenc/detail/cache_line_vector.hpp
/// std::vector storage that starts on a cache line, for the buffers posenc's kernels stream.
///
/// std::vector<float> gives 16-byte alignment, and Eigen's aligned_allocator the widest packet
/// the build targets (32 bytes with AVX2). A KV cache row then starts 16 bytes into a line, and
/// every 64-byte (AVX-512) load of it touches two lines: f32 decode from L2 took 16.0-17.5 ns
/// per (key, kv head) with the rows 16 bytes off a line and 13.6-14.9 ns on it (Zen 5, 4 rows
/// per kv head, d = 128).

#include <cstddef>
#include <new>
#include <vector>

namespace posenc::detail {

inline constexpr std::size_t kCacheLineBytes = 64;

template <typename T>
struct CacheLineAllocator {
  using value_type = T;
  static constexpr std::align_val_t kAlign{kCacheLineBytes > alignof(T) ? kCacheLineBytes
                                                                        : alignof(T)};

  CacheLineAllocator() noexcept = default;
  template <typename U>
  CacheLineAllocator(const CacheLineAllocator<U>&) noexcept {}  // NOLINT: rebind

  T* allocate(std::size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), kAlign)); }
  // The unsized form: the sized aligned delete is declared only under __cpp_sized_deallocation,
  // which Clang leaves off by default before version 19 (libstdc++'s <new>).
  void deallocate(T* p, std::size_t) noexcept { ::operator delete(p, kAlign); }

  template <typename U>
  bool operator==(const CacheLineAllocator<U>&) const noexcept {
    return true;
  }
  template <typename U>
  bool operator!=(const CacheLineAllocator<U>&) const noexcept {
    return false;
  }
};

template <typename T>
using cache_line_vector = std::vector<T, CacheLineAllocator<T>>;

}  // namespace posenc::detail
