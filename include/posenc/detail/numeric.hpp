#pragma once
/// \file posenc/detail/numeric.hpp
/// Storage types and their conversions. posenc computes angles in double and accumulates in
/// float or better; activations are stored in the caller's type.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include <Eigen/Core>

#include "posenc/float8.hpp"

/// Marks a loop whose iterations write memory the compiler cannot prove disjoint (several
/// caller rows, our stack state) but that posenc's callers guarantee is: without it GCC gives
/// up on the alias checks and emits scalar code. Nothing for Clang: its
/// `vectorize(assume_safety)` warns (-Wpass-failed) in the callers' builds wherever it does
/// not vectorise, and the sinusoidal loops it marked were such loops (Clang 14).
#if defined(__GNUC__) && !defined(__clang__)
#define POSENC_IVDEP _Pragma("GCC ivdep")
#else
#define POSENC_IVDEP
#endif

/// Unrolls a loop over a register array (V v[P], P a template constant) completely. GCC does
/// that by itself only at -O3; at -O2 (CMake's RelWithDebInfo, distributions' builds) it kept
/// the loops and the arrays in stack memory, every vector stored and reloaded.
#if defined(__GNUC__)  // GCC and Clang
#define POSENC_UNROLL _Pragma("GCC unroll 16")
#else
#define POSENC_UNROLL
#endif

namespace posenc::detail {

/// Pins a SIMD value to a register: an empty asm that claims to modify it. GCC otherwise folds
/// a loaded value into every instruction that uses it, one memory operand each, and the loop
/// issues several loads where one would do (decode's dot products: 12 loads per 8 FMAs instead
/// of 6 for 4 rows x 2 keys; RoPE's interleaved rows: two loads per 16 values). 32-byte
/// vectors with AVX, 64-byte with AVX-512; anything else, and other compilers, untouched.
template <typename V>
EIGEN_STRONG_INLINE void keep_in_register([[maybe_unused]] V& v) {
#if defined(__GNUC__) && defined(__AVX__)
  if constexpr (sizeof(V) == 32) __asm__("" : "+x"(v));
#if defined(__AVX512F__)
  if constexpr (sizeof(V) == 64) __asm__("" : "+v"(v));
#endif
#endif
}

/// Calls that touch at least this many bytes (half the 32 MiB L3 of the machines we measure on)
/// stream from DRAM, where the kernels request lines ahead of the hardware prefetchers (RoPE
/// rows, decode slices, sinusoidal rows); smaller ones come from cache and do not.
inline constexpr std::int64_t kFromMemoryBytes = std::int64_t{16} << 20;

/// The four storage types posenc kernels accept.
template <typename T>
inline constexpr bool is_storage_type_v =
    std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, Eigen::half> ||
    std::is_same_v<T, Eigen::bfloat16>;

/// What a KV cache may store: the four storage types, or FP8 (E4M3 / E5M2) with a scale.
template <typename T>
inline constexpr bool is_kv_storage_type_v = is_storage_type_v<T> || is_float8_v<T>;

/// Arithmetic type for element-wise work on T: double stays double, the 16-bit types and float
/// compute in float (vLLM / FlashInfer / TE all do fp32 math on bf16/fp16 activations).
template <typename T>
using compute_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

template <typename T>
constexpr double to_double(T value) noexcept {
  return static_cast<double>(static_cast<compute_t<T>>(value));
}

template <typename T>
constexpr compute_t<T> to_compute(T value) noexcept {
  return static_cast<compute_t<T>>(value);
}

/// Rounds to T. For the 16-bit types the value goes through float first: a double rounding
/// that can differ from a direct round in the last bit only on exact ties.
template <typename T, typename From>
constexpr T from_value(From value) noexcept {
  if constexpr (std::is_same_v<T, double> || std::is_same_v<T, float>) {
    return static_cast<T>(value);
  } else {
    return T(static_cast<float>(value));
  }
}

/// dst[i] = dst[i] + src[i] for i < n, in the compute type, rounded once to T. Rows of float or
/// double onto the same type go through Eigen's packets (unaligned loads, the rest one by one),
/// not a plain loop left for the compiler to vectorise: GCC 12 does that only from -O3, and at
/// -O2 (CMake's RelWithDebInfo) the benchmark's MAE / DiT patch grids took 3-8x the time. An
/// Eigen::Map expression instead measured 8-20 % slower than the plain loop at -O3 on the MAE
/// grid (8 x 197 tokens, 2 rows of 384 floats a token), this loop 3-5 %.
template <typename T, typename S>
void add_values(T* dst, const S* src, Eigen::Index n) {
  Eigen::Index whole = 0;  // values done in packets
  if constexpr (std::is_same_v<T, S> && (std::is_same_v<T, float> || std::is_same_v<T, double>)) {
    namespace ei = Eigen::internal;
    using P = typename ei::packet_traits<T>::type;
    constexpr Eigen::Index L = ei::packet_traits<T>::size;
    whole = n / L * L;
    for (Eigen::Index i = 0; i < whole; i += L) {
      ei::pstoreu(dst + i, ei::padd(ei::ploadu<P>(src + i), ei::ploadu<P>(dst + i)));
    }
  }
  for (Eigen::Index i = whole; i < n; ++i) {
    dst[i] = from_value<T>(to_compute(dst[i]) + to_compute(src[i]));
  }
}

/// Rounds x into a KV cache element: FP8 stores x / scale (vLLM's cache write: the division in
/// float, then the saturating round), every other type x rounded once (scale is 1 there).
template <typename T, typename From>
T to_cache_value(From x, [[maybe_unused]] float scale) noexcept {
  if constexpr (is_float8_v<T>) {
    return T(static_cast<float>(x) / scale);
  } else {
    return from_value<T>(x);
  }
}

/// The bits of x. For x >= +0 (NaN excluded) their unsigned order is the order of the values
/// (IEEE 754 encodes sign, biased exponent, fraction), and loops that test many doubles through
/// integer compares vectorise, where GCC keeps double compares (which may trap on NaN) scalar.
inline std::uint64_t double_bits(double x) noexcept {
  std::uint64_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}

/// Rounds n values of src into a cache row (to_cache_value); returns whether an E4M3 NaN code
/// was stored (the caches keep that flag: their attend reads NaN-free codes faster). NaN is the
/// one input that gives a NaN code (x / scale with a finite scale > 0; the rest saturates). The
/// test is a loop of its own over the inputs' bits: inside the rounding loop, in any form, it
/// kept that loop scalar (an E4M3 append of 4096 tokens x 8 kv heads: 16-17 ms, not 2.5).
template <typename T, typename Src>
bool store_cache_values(const Src* src, T* dst, std::ptrdiff_t n, float scale) noexcept {
  for (std::ptrdiff_t i = 0; i < n; ++i) dst[i] = to_cache_value<T>(to_compute(src[i]), scale);
  if constexpr (std::is_same_v<T, float8_e4m3>) {
    // The largest magnitude's bits: NaN sorts above infinity.
    if constexpr (std::is_same_v<compute_t<Src>, double>) {
      std::uint64_t top = 0;
      for (std::ptrdiff_t i = 0; i < n; ++i) {
        top = std::max<std::uint64_t>(top, double_bits(to_compute(src[i])) & 0x7fffffffffffffffull);
      }
      return top > 0x7ff0000000000000ull;
    } else {
      std::uint32_t top = 0;
      for (std::ptrdiff_t i = 0; i < n; ++i) {
        const float x = to_compute(src[i]);
        std::uint32_t u;
        std::memcpy(&u, &x, sizeof u);
        top = std::max(top, u & 0x7fffffffu);
      }
      return top > 0x7f800000u;
    }
  }
  return false;
}

/// n rows of kv_heads x width values: each head's slice / head_scales[g] when given, else
/// every value / scale. Returns whether a NaN was stored (store_cache_values).
template <typename Src, typename T>
bool store_cache_rows(const Src* src, T* dst, std::ptrdiff_t n, std::ptrdiff_t kv_heads,
                      std::ptrdiff_t width, double scale,
                      const std::vector<double>& head_scales) noexcept {
  if (head_scales.empty()) {
    return store_cache_values(src, dst, n * kv_heads * width, static_cast<float>(scale));
  }
  bool nan = false;
  for (std::ptrdiff_t r = 0; r < n * kv_heads; ++r) {
    nan |= store_cache_values(src + r * width, dst + r * width, width,
                              static_cast<float>(head_scales[static_cast<std::size_t>(r % kv_heads)]));
  }
  return nan;
}

/// Float and double buffers reused across calls (they grow to the largest use, then stay): an
/// input is converted into its compute type's buffer, rotated there and rounded once on the way
/// out (KvCache, PagedKvCache).
class StagingBuffers {
 public:
  template <typename Acc>
  std::vector<Acc>& get() {
    if constexpr (std::is_same_v<Acc, double>) {
      return d_;
    } else {
      return f_;
    }
  }
  /// The buffer of Acc, holding src[0, n) converted.
  template <typename Acc, typename Src>
  std::vector<Acc>& convert(const Src* src, std::size_t n) {
    auto& stage = get<Acc>();
    stage.resize(n);
    for (std::size_t i = 0; i < n; ++i) stage[i] = static_cast<Acc>(to_compute(src[i]));
    return stage;
  }

 private:
  std::vector<float> f_;
  std::vector<double> d_;
};

}  // namespace posenc::detail
