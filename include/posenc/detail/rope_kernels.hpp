#pragma once
/// \file posenc/detail/rope_kernels.hpp
/// Inner loops of the RoPE kernels: a vectorisable double-precision sin/cos with Cody-Waite
/// range reduction, the two pair rotations, and storage <-> compute row conversions. Nothing
/// here validates or allocates; rope.hpp does both before calling in.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include <Eigen/Core>

// POSENC_ROPE_FORCE_SIMD: compile the AVX2 kernels although the predefined ISA macros are off,
// for a translation unit that raised its target with `#pragma GCC target("avx2,fma,f16c")`
// (g++ does not update __AVX2__ in C++ then). posenc's own SIMD test does this.
#if (defined(__F16C__) && defined(__AVX__)) || (defined(__AVX2__) && defined(__FMA__)) || \
    defined(POSENC_ROPE_FORCE_SIMD)
#include <immintrin.h>
#endif

#include "posenc/detail/numeric.hpp"

namespace posenc::detail {

/// |angle| below which rope_sincos is accurate to ~1 ulp of double. k = round(x 2/pi) stays
/// below 2^30, so k * kPio2Hi (23 significant bits) and k * kPio2Mid (21 bits) are exact.
inline constexpr double kRopeFastTrigLimit = 0x1p30;

/// Eigen's double packet: 4 lanes with AVX, 8 with AVX-512, 2 with SSE2 / NEON, double itself
/// where Eigen does not vectorise. The per-token trigonometry of the on-the-fly angles is written
/// over it, not as plain loops for the compiler to vectorise: GCC 12 vectorises those only from
/// -O3, and a caller's -O2 build (CMake's RelWithDebInfo, distribution packages) got scalar
/// code. One decode token of 32 + 8 heads x 128 with on-the-fly angles (Zen 3, -O2
/// -march=native, best of 20000): 804 ns scalar against 418 ns for the -O3 build.
using RopeTrigPacket = Eigen::internal::packet_traits<double>::type;
inline constexpr Eigen::Index kRopeTrigLanes = Eigen::internal::packet_traits<double>::size;

/// The polynomial c0 z^n + c1 z^(n-1) + ... + cn at the lanes of z (Horner, one FMA a term).
template <typename P, typename... Rest>
EIGEN_STRONG_INLINE P rope_horner(const P& z, double c0, Rest... rest) {
  namespace ei = Eigen::internal;
  P acc = ei::pset1<P>(c0);
  ((acc = ei::pmadd(acc, z, ei::pset1<P>(rest))), ...);
  return acc;
}

/// sin and cos of the lanes of x, |x| <= kRopeFastTrigLimit (rope_sincos).
/// Reduction: x = k pi/2 + r, |r| <= pi/4, pi/2 split in three parts (Cody & Waite 1980; the
/// fdlibm __ieee754_rem_pio2 idea with narrower high parts so that k may reach 2^30). sin and
/// cos of r are their Taylor series to r^17 / r^16, whose truncation error at pi/4 is < 1e-17
/// (kFullDouble), or to r^13 / r^12 (< 4e-13) when the results only feed float arithmetic.
template <bool kFullDouble, typename P>
EIGEN_STRONG_INLINE void rope_sincos_packet(const P& x, P& s, P& c) {
  namespace ei = Eigen::internal;
  const auto k1 = [](double v) { return ei::pset1<P>(v); };
  const P shifter = k1(0x1.8p52);  // (y + 1.5*2^52) - 1.5*2^52 = rint(y)
  const P k = ei::psub(ei::pmadd(x, k1(0x1.45f306dc9c883p-1), shifter), shifter);  // x 2/pi
  // pi/2 = Hi + Mid + Lo (+ 2^-100); k Hi (23 significant bits) and k Mid (21) are exact.
  P r = ei::psub(x, ei::pmul(k, k1(0x1.921fb4p+0)));
  r = ei::psub(r, ei::pmul(k, k1(0x1.4442d0p-24)));
  r = ei::psub(r, ei::pmul(k, k1(0x1.8469898cc5170p-48)));
  // Quadrant k mod 4 in {0, 1, 2, 3}; floor(k/4) = rint(k/4 - 3/8) for integer k (no ties).
  const P floor4 = ei::psub(ei::padd(ei::pmadd(k, k1(0.25), k1(-0.375)), shifter), shifter);
  const P q = ei::pmadd(floor4, k1(-4.0), k);
  const P z = ei::pmul(r, r);
  P ps, pc;  // sin r = r + r z ps(z), cos r = 1 - z / 2 + z^2 pc(z)
  if constexpr (kFullDouble) {
    ps = rope_horner(z, 1.0 / 355687428096000.0, -1.0 / 1307674368000.0, 1.0 / 6227020800.0,
                     -1.0 / 39916800.0, 1.0 / 362880.0, -1.0 / 5040.0, 1.0 / 120.0, -1.0 / 6.0);
    pc = rope_horner(z, 1.0 / 20922789888000.0, -1.0 / 87178291200.0, 1.0 / 479001600.0,
                     -1.0 / 3628800.0, 1.0 / 40320.0, -1.0 / 720.0, 1.0 / 24.0);
  } else {
    ps = rope_horner(z, 1.0 / 6227020800.0, -1.0 / 39916800.0, 1.0 / 362880.0, -1.0 / 5040.0,
                     1.0 / 120.0, -1.0 / 6.0);
    pc = rope_horner(z, 1.0 / 479001600.0, -1.0 / 3628800.0, 1.0 / 40320.0, -1.0 / 720.0,
                     1.0 / 24.0);
  }
  const P sr = ei::pmadd(ei::pmul(r, z), ps, r);
  const P cr = ei::pmadd(ei::pmul(z, z), pc, ei::pmadd(z, k1(-0.5), k1(1.0)));
  // sin(r + q pi/2), cos(r + q pi/2): swap on odd q, sin negated for q >= 2, cos for q in {1,2}.
  const P q1 = ei::pcmp_eq(q, k1(1.0)), q2 = ei::pcmp_eq(q, k1(2.0));
  const P odd = ei::por(q1, ei::pcmp_eq(q, k1(3.0)));
  const P sv = ei::pselect(odd, cr, sr), cv = ei::pselect(odd, sr, cr);
  s = ei::pselect(ei::pcmp_le(k1(2.0), q), ei::pnegate(sv), sv);
  c = ei::pselect(ei::por(q1, q2), ei::pnegate(cv), cv);
}

/// s[i] = sin(x[i]), c[i] = cos(x[i]) for |x[i]| <= kRopeFastTrigLimit, to ~1 ulp of double
/// (kFullDouble) or < 4e-13 (rope_sincos_packet); the per-token sin/cos of an anchor costs
/// ~rotary_dim/2 of these.
template <bool kFullDouble = true>
inline void rope_sincos(const double* __restrict x, double* __restrict s, double* __restrict c,
                        Eigen::Index n) {
  namespace ei = Eigen::internal;
  using P = RopeTrigPacket;
  constexpr Eigen::Index L = kRopeTrigLanes;
  Eigen::Index i = 0;
  for (; i + L <= n; i += L) {
    P sp, cp;
    rope_sincos_packet<kFullDouble>(ei::ploadu<P>(x + i), sp, cp);
    ei::pstoreu(s + i, sp);
    ei::pstoreu(c + i, cp);
  }
  if (i < n) {  // the last n - i values through one packet, padded with zeros
    alignas(64) double xt[L] = {}, st[L], ct[L];
    std::copy(x + i, x + n, xt);
    P sp, cp;
    rope_sincos_packet<kFullDouble>(ei::pload<P>(xt), sp, cp);
    ei::pstore(st, sp);
    ei::pstore(ct, cp);
    std::copy(st, st + (n - i), s + i);
    std::copy(ct, ct + (n - i), c + i);
  }
}

/// Half-split pairs (j, j + half) for j < pairs (<= half: the rest are held still), in place:
/// x1' = x1 c - x2 s, x2' = x2 c + x1 s.
template <typename C>
inline void rope_rotate_half_split(C* x, const C* c, const C* s, Eigen::Index half,
                                   Eigen::Index pairs) {
  C* x2 = x + half;
  for (Eigen::Index j = 0; j < pairs; ++j) {
    const C a = x[j];
    const C b = x2[j];
    x[j] = a * c[j] - b * s[j];
    x2[j] = b * c[j] + a * s[j];
  }
}

/// Interleaved pairs (2j, 2j+1), in place; c[j], s[j] per pair as for the half-split layout.
template <typename C>
inline void rope_rotate_interleaved(C* x, const C* c, const C* s, Eigen::Index rd) {
  for (Eigen::Index j = 0; j < rd / 2; ++j) {
    const C a = x[2 * j];
    const C b = x[2 * j + 1];
    x[2 * j] = a * c[j] + b * -s[j];  // -s, not - b s: a NaN b keeps its sign either way
    x[2 * j + 1] = b * c[j] + a * s[j];
  }
}

/// Out-of-place versions; src and dst must not overlap.
template <typename C>
inline void rope_rotate_half_split(const C* __restrict src, C* __restrict dst, const C* c,
                                   const C* s, Eigen::Index half, Eigen::Index pairs) {
  for (Eigen::Index j = 0; j < pairs; ++j) {
    const C a = src[j];
    const C b = src[j + half];
    dst[j] = a * c[j] - b * s[j];
    dst[j + half] = b * c[j] + a * s[j];
  }
}

template <typename C>
inline void rope_rotate_interleaved(const C* __restrict src, C* __restrict dst, const C* c,
                                    const C* s, Eigen::Index rd) {
  for (Eigen::Index j = 0; j < rd / 2; ++j) {
    const C a = src[2 * j];
    const C b = src[2 * j + 1];
    dst[2 * j] = a * c[j] + b * -s[j];
    dst[2 * j + 1] = b * c[j] + a * s[j];
  }
}

// --- 16-bit storage <-> float rows -------------------------------------------------------------
// Eigen's scalar conversions do not vectorise; these loops on the raw bits do. bfloat16 is the
// top half of a float, rounded to nearest-even (NaN kept quiet), exactly Eigen's rounding.

inline void bf16_to_float(const Eigen::bfloat16* src, float* dst, Eigen::Index n) {
  const auto* bits = reinterpret_cast<const std::uint16_t*>(src);
  for (Eigen::Index i = 0; i < n; ++i) {
    const std::uint32_t u = static_cast<std::uint32_t>(bits[i]) << 16;
    float f;
    std::memcpy(&f, &u, sizeof f);
    dst[i] = f;
  }
}

inline void float_to_bf16(const float* src, Eigen::bfloat16* dst, Eigen::Index n) {
  auto* bits = reinterpret_cast<std::uint16_t*>(dst);
  for (Eigen::Index i = 0; i < n; ++i) {
    std::uint32_t u;
    std::memcpy(&u, &src[i], sizeof u);
    const bool nan = (u & 0x7fffffffu) > 0x7f800000u;
    const std::uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    bits[i] = static_cast<std::uint16_t>(nan ? ((u >> 16) | 0x40u) : rounded);
  }
}

inline void half_to_float(const Eigen::half* src, float* dst, Eigen::Index n) {
  Eigen::Index i = 0;
#if defined(__F16C__) && defined(__AVX__)
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
  }
#endif
  for (; i < n; ++i) dst[i] = static_cast<float>(src[i]);
}

inline void float_to_half(const float* src, Eigen::half* dst, Eigen::Index n) {
  Eigen::Index i = 0;
#if defined(__F16C__) && defined(__AVX__)
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), h);
  }
#endif
  for (; i < n; ++i) dst[i] = Eigen::half(src[i]);
}


/// Calls whose rotated slices (source and destination, counted once each) take at most this
/// many bytes run from cache (the L2 of the machines we measure on is 512 KiB a core) and take
/// the register-blocked order; larger ones stream from memory, where whole rows in address
/// order are faster. Counting the in-place rows twice (read and write) sent 16 tokens of GQA
/// Q 32 + K 8 heads (320 KiB) down the streaming path: 0.62 of the in-place stream for
/// interleaved and 0.94 for half-split pairs, against 0.97 and 1.03 in the blocked order.
inline constexpr double kRopeResidentBytes = 512.0 * 1024.0;

/// Where a call's rows come from, which sets the kernels' loop order.
enum class RopeSource {
  kL2,      ///< at most kRopeResidentBytes: pair blocks outer, heads inner, cos/sin in registers
  kL3,      ///< below kFromMemoryBytes: one head row at a time, in address order
  kMemory,  ///< larger: as kL3, with each row's lines prefetched kRopePrefetchBytes ahead, on
            ///< every thread (from L3 the requests only cost issue slots: 8-10 MiB calls
            ///< measured 0-5 % slower with them)
};

/// range_bytes: the rows one thread rotates; call_bytes: the whole call's.
inline RopeSource rope_source(double range_bytes, double call_bytes) {
  if (range_bytes <= kRopeResidentBytes) return RopeSource::kL2;
  return call_bytes < static_cast<double>(kFromMemoryBytes) ? RopeSource::kL3
                                                             : RopeSource::kMemory;
}

// --- AVX2 + FMA row kernels ---------------------------------------------------------------------
// One pass per head row for every storage type: load 8 values, widen to float, rotate, round
// back, store. The 16-bit types are converted in registers, with no scratch row. src == dst is
// the in-place call (each iteration loads before it stores); otherwise they must not overlap.
#if (defined(__AVX2__) && defined(__FMA__)) || defined(POSENC_ROPE_FORCE_SIMD)
#define POSENC_ROPE_SIMD 1

/// Calls that stream from DRAM (RopeSource::kMemory) prefetch each head row's lines this many
/// bytes ahead in address order: the next rows of a [.., seq, heads, head_dim] tensor, or the
/// same head a few tokens on when heads are the outer dimension. The core's own prefetchers alone
/// left the rotation's arithmetic serialised with the DRAM traffic. Paired with the in-place
/// stream at T = 4096 / 32768, 32 (+ 8) heads (medians of two runs): bfloat16 0.58-0.72 ->
/// 0.81-0.91, float 0.76-0.94 -> 0.93-1.09; float on 2 threads (q32k8) 0.92-0.99 -> 1.03-1.14.
/// 2 and 8 KiB ahead were within the noise of 4 KiB; 1 KiB fell short (bfloat16 0.72-0.83).
inline constexpr std::uintptr_t kRopePrefetchBytes = 4096;

/// Prefetches the cache lines of row[0, n) + kRopePrefetchBytes into L1.
template <typename T>
inline void rope_prefetch_ahead(const T* row, Eigen::Index n) {
  const auto first = reinterpret_cast<std::uintptr_t>(row) + kRopePrefetchBytes;
  const std::uintptr_t last = first + static_cast<std::uintptr_t>(n) * sizeof(T) - 1;
  for (std::uintptr_t line = first & ~std::uintptr_t{63}; line <= last; line += 64) {
    _mm_prefetch(reinterpret_cast<const char*>(line), _MM_HINT_T0);
  }
}

/// Stack buffers of the row kernels: rotary_dim / 2 <= kMaxRotaryDim / 2 (rope_params.hpp
/// validates rotary_dim <= 1024 before any kernel runs).
inline constexpr Eigen::Index kRopeSimdMaxHalf = 512;

template <typename T>
inline __m256 rope_load8(const T* p) {
  if constexpr (std::is_same_v<T, float>) {
    return _mm256_loadu_ps(p);
  } else if constexpr (std::is_same_v<T, Eigen::bfloat16>) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  } else {
    static_assert(std::is_same_v<T, Eigen::half>, "rope_load8: float, bfloat16 or half");
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
}

template <typename T>
inline void rope_store8(T* p, __m256 v) {
  if constexpr (std::is_same_v<T, float>) {
    _mm256_storeu_ps(p, v);
  } else if constexpr (std::is_same_v<T, Eigen::bfloat16>) {
    // Round to nearest even on the bits, (u + 0x7fff + lsb) >> 16. No NaN special case, unlike
    // float_to_bf16: every value stored here is computed from bfloat16 inputs and finite cos /
    // sin, so a NaN is either an input's (low 16 bits zero) or the default NaN 0xffc00000, and
    // for both the addition cannot carry into the exponent: NaN stays NaN.
    const __m256i u = _mm256_castps_si256(v);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    const __m256i r =
        _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), lsb), 16);
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0xD8);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_castsi256_si128(packed));
  } else {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
  }
}

// bfloat16 without shuffles: a 32-bit lane holds bf16 elements (2i, 2i+1); as floats the even
// one is lane << 16 and the odd one is lane & 0xffff0000. Rotating the even and odd elements
// as two vectors and blending the rounded upper halves back needs no lane-crossing shuffle
// (the shuffle port, not arithmetic, is what limits a widen / rotate / narrow loop on AVX2).
inline void rope_bf16_split(const Eigen::bfloat16* p, __m256& even, __m256& odd) {
  const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  even = _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
  odd = _mm256_castsi256_ps(_mm256_and_si256(v, _mm256_set1_epi32(static_cast<int>(0xffff0000u))));
}

inline __m256i rope_bf16_round(__m256 v) {  // RNE, see rope_store8 for NaN
  const __m256i u = _mm256_castps_si256(v);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  return _mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), lsb);
}

inline void rope_bf16_join(Eigen::bfloat16* p, __m256 even, __m256 odd) {
  const __m256i e = _mm256_srli_epi32(rope_bf16_round(even), 16);  // even result in the low word
  const __m256i o = rope_bf16_round(odd);                          // odd result in the high word
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm256_blend_epi16(e, o, 0xAA));
}

/// The row kernels below are written once over a vector policy: RopeVec8 (AVX2 + FMA, 8 floats)
/// and, where the compiler targets AVX-512, RopeVec16 (16 floats, 32 registers).
struct RopeVec8 {
  using V = __m256;
  static constexpr int kLanes = 8;
  static constexpr int kBlockVecs = 4;  // cos / sin vectors held in registers: 8 of 16
  // Rows held whole: 8 of 16 registers, rotary_dim <= 32 interleaved, <= 64 half-split. Zen 3,
  // rotary_dim 32 of 128, 32 heads, from a cos / sin cache (a driver's best of 10, A/B):
  // half-split T = 512 / 4096 115 / 2973 -> 79 / 2029 us, interleaved T = 512 124 -> 92 us,
  // T = 16 1.26 / 1.40 -> 1.22 / 1.26 us.
  static constexpr int kWholeVecs = 4;
  static constexpr bool kSplitPairs = true;  // split_pairs, join_pairs, pair_order
  template <typename T>
  static V load(const T* p) { return rope_load8(p); }
  template <typename T>
  static void store(T* p, V v) { rope_store8(p, v); }
  static V loadf(const float* p) { return _mm256_loadu_ps(p); }
  static V fmadd(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V fmsub(V a, V b, V c) { return _mm256_fmsub_ps(a, b, c); }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static V swap_pairs(V v) { return _mm256_permute_ps(v, 0xB1); }  // (x1, x0, x3, x2, ...)
  /// [c0 c0 c1 c1 c2 c2 c3 c3] from c[0, 4): the interleaved layout's cos per lane.
  static V pair_cos(const float* c) {
    const __m256i dup = _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3);
    return _mm256_permutevar8x32_ps(_mm256_castps128_ps256(_mm_loadu_ps(c)), dup);
  }
  /// [-s0 s0 -s1 s1 ..]: the sin that multiplies swap_pairs(x).
  static V pair_sin(const float* s) {
    return _mm256_xor_ps(pair_cos(s), _mm256_setr_ps(-0.0f, 0.0f, -0.0f, 0.0f, -0.0f, 0.0f,
                                                     -0.0f, 0.0f));
  }
  static void storef(float* p, V v) { _mm256_storeu_ps(p, v); }
  /// 2 kLanes interleaved values (pairs 0-7) as their even and odd elements, by in-lane
  /// shuffles only: the pairs come out in the order [p0 p1 p4 p5 | p2 p3 p6 p7] of
  /// pair_order, and join_pairs puts them back.
  template <typename T>
  static void split_pairs(const T* p, V& even, V& odd) {
    const V a = load(p), b = load(p + kLanes);
    even = _mm256_shuffle_ps(a, b, 0x88);
    odd = _mm256_shuffle_ps(a, b, 0xDD);
  }
  template <typename T>
  static void join_pairs(T* p, V even, V odd) {
    store(p, _mm256_unpacklo_ps(even, odd));
    store(p + kLanes, _mm256_unpackhi_ps(even, odd));
  }
  /// c[0, 8) in split_pairs' order.
  static V pair_order(const float* c) {
    return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_loadu_ps(c)), 0xD8));
  }
  /// The even and the odd elements of p[0, 2 kLanes).
  static void deinterleave(const float* p, V& even, V& odd) {
    const __m256 a = _mm256_loadu_ps(p), b = _mm256_loadu_ps(p + 8);
    // [a0 a2 b0 b2 | a4 a6 b4 b6] -> [a0 a2 a4 a6 b0 b2 b4 b6], likewise for the odd ones
    even = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0x88)), 0xD8));
    odd = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0xDD)), 0xD8));
  }
  /// 2 kLanes bfloat16 values as their even and odd elements (rope_bf16_split) and back.
  static void bf16_split(const Eigen::bfloat16* p, V& even, V& odd) {
    rope_bf16_split(p, even, odd);
  }
  static void bf16_join(Eigen::bfloat16* p, V even, V odd) { rope_bf16_join(p, even, odd); }
};

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512DQ__)
#define POSENC_ROPE_SIMD512 1
/// 16-float vectors. On AVX-512 machines the in-place stream the kernels are measured against
/// moves 64 bytes per instruction, and 8-float rows ran at 0.52-0.67 of it from L1 / L2
/// (Zen 5, float, cos / sin cache).
struct RopeVec16 {
  using V = __m512;
  static constexpr int kLanes = 16;
  static constexpr int kBlockVecs = 4;  // 8 of 32 (8 + 8 measured no better at T <= 512)
  static constexpr int kWholeVecs = 8;  // 16 of 32: rotary_dim 128 interleaved, 256 half-split
  static constexpr bool kSplitPairs = false;
  template <typename T>
  static V load(const T* p) {
    if constexpr (std::is_same_v<T, float>) {
      return _mm512_loadu_ps(p);
    } else if constexpr (std::is_same_v<T, Eigen::bfloat16>) {
      const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
      return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    } else {
      static_assert(std::is_same_v<T, Eigen::half>, "RopeVec16::load: float, bfloat16 or half");
      return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    }
  }
  template <typename T>
  static void store(T* p, V v) {
    if constexpr (std::is_same_v<T, float>) {
      _mm512_storeu_ps(p, v);
    } else if constexpr (std::is_same_v<T, Eigen::bfloat16>) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), bf16_bits(v));
    } else {
      // Every lane, written as maskz: GCC's _mm512_cvtps_ph is a macro at -O0 whose mask -1
      // trips -Wsign-conversion in the caller's build.
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(p),
                          _mm512_maskz_cvtps_ph(0xFFFF, v, _MM_FROUND_TO_NEAREST_INT));
    }
  }
  /// bfloat16 bits of v rounded to nearest even, as float_to_bf16 (NaN: see rope_store8).
  /// vcvtneps2bf16 (AVX512-BF16) rounds the same way but treats denormal inputs as zero, which
  /// Eigen's conversion does not; a vector holding one takes the integer rounding instead.
  static __m256i bf16_bits(V v) {
#if defined(__AVX512BF16__)
    if (_mm512_fpclass_ps_mask(v, 0x20) == 0) {  // 0x20: denormal
      const __m256bh b = _mm512_cvtneps_pbh(v);
      __m256i bits;
      std::memcpy(&bits, &b, sizeof bits);
      return bits;
    }
#endif
    return _mm512_cvtepi32_epi16(_mm512_srli_epi32(round_bits(v), 16));
  }
  static V loadf(const float* p) { return _mm512_loadu_ps(p); }
  static V fmadd(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V fmsub(V a, V b, V c) { return _mm512_fmsub_ps(a, b, c); }
  static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  static V swap_pairs(V v) { return _mm512_permute_ps(v, 0xB1); }
  static V pair_cos(const float* c) {  // as RopeVec8::pair_cos, from c[0, 8)
    const __m512i dup = _mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
    return _mm512_permutexvar_ps(dup, _mm512_castps256_ps512(_mm256_loadu_ps(c)));
  }
  static V pair_sin(const float* s) {
    const __m512 even_sign = _mm512_castsi512_ps(_mm512_set1_epi64(0x80000000ll));
    return _mm512_xor_ps(pair_cos(s), even_sign);
  }
  static void storef(float* p, V v) { _mm512_storeu_ps(p, v); }
  static void deinterleave(const float* p, V& even, V& odd) {  // as RopeVec8::deinterleave
    const __m512 a = _mm512_loadu_ps(p), b = _mm512_loadu_ps(p + 16);
    const __m512i evens = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    even = _mm512_permutex2var_ps(a, evens, b);
    odd = _mm512_permutex2var_ps(a, _mm512_add_epi32(evens, _mm512_set1_epi32(1)), b);
  }
  static void bf16_split(const Eigen::bfloat16* p, V& even, V& odd) {
    const __m512i v = _mm512_loadu_si512(p);
    even = _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
    const __m512i high_words = _mm512_set1_epi32(static_cast<int>(0xffff0000u));
    odd = _mm512_castsi512_ps(_mm512_and_si512(v, high_words));
  }
  /// As bf16_bits: vcvtne2ps2bf16 packs [even | odd] and one word permute interleaves them;
  /// when either vector holds a denormal, the integer rounding and a word blend.
  static void bf16_join(Eigen::bfloat16* p, V even, V odd) {
#if defined(__AVX512BF16__)
    if ((_mm512_fpclass_ps_mask(even, 0x20) | _mm512_fpclass_ps_mask(odd, 0x20)) == 0) {
      const __m512bh packed = _mm512_cvtne2ps_pbh(odd, even);  // words 0-15 even, 16-31 odd
      __m512i bits;
      std::memcpy(&bits, &packed, sizeof bits);
      const __m512i order = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9,
                                             24, 8, 23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17,
                                             1, 16, 0);
      _mm512_storeu_si512(p, _mm512_permutexvar_epi16(order, bits));
      return;
    }
#endif
    const __m512i e = _mm512_srli_epi32(round_bits(even), 16);  // even result in the low word
    _mm512_storeu_si512(p, _mm512_mask_blend_epi16(0xAAAAAAAAu, e, round_bits(odd)));
  }
  /// u + 0x7fff + lsb: the rounded bfloat16 in the high word (NaN: see rope_store8).
  static __m512i round_bits(V v) {
    const __m512i u = _mm512_castps_si512(v);
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    return _mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), lsb);
  }
};
#endif

/// f(std::integral_constant<int, n>{}) for a run-time n in [1, kMax].
template <int kMax, typename F>
inline void rope_with_vecs(Eigen::Index n, F&& f) {
  if constexpr (kMax >= 1) {
    if (n == kMax) {
      f(std::integral_constant<int, kMax>{});
    } else {
      rope_with_vecs<kMax - 1>(n, f);
    }
  }
}

/// One chunk of 2W pairs of a bfloat16 half-split row: x1 = x[j, j + 2W), x2 = x[half + j, ..),
/// cos / sin in the even / odd order of bf16_split.
template <typename Vec>
EIGEN_ALWAYS_INLINE void rope_bf16_half_split_chunk(const Eigen::bfloat16* x, Eigen::bfloat16* y,
                                       Eigen::Index half, Eigen::Index j, typename Vec::V ce,
                                       typename Vec::V co, typename Vec::V se,
                                       typename Vec::V so) {
  typename Vec::V ae, ao, be, bo;
  Vec::bf16_split(x + j, ae, ao);
  Vec::bf16_split(x + half + j, be, bo);
  Vec::bf16_join(y + j, Vec::fmsub(ae, ce, Vec::mul(be, se)), Vec::fmsub(ao, co, Vec::mul(bo, so)));
  Vec::bf16_join(y + half + j, Vec::fmadd(be, ce, Vec::mul(ae, se)),
                 Vec::fmadd(bo, co, Vec::mul(ao, so)));
}

/// One chunk of W interleaved pairs (2W values at x + j); c, s per pair.
template <typename Vec>
EIGEN_ALWAYS_INLINE void rope_bf16_interleaved_chunk(const Eigen::bfloat16* x, Eigen::bfloat16* y,
                                        Eigen::Index j, typename Vec::V cv, typename Vec::V sv) {
  typename Vec::V e, o;
  Vec::bf16_split(x + j, e, o);
  Vec::bf16_join(y + j, Vec::fmsub(e, cv, Vec::mul(o, sv)), Vec::fmadd(o, cv, Vec::mul(e, sv)));
}

/// bfloat16 rows with the cos / sin of all N chunks held in registers across every head, as the
/// float rows are (rope_simd_half_split_held): 4 N registers for half-split (2W N pairs, the
/// partner `half` further on), 2 N for interleaved (rd = 2W N). Reloading them per head and chunk cost 30-40 % at T >= 16:
/// Zen 5, 32 heads x 128, A/B (3 rounds), half-split T = 16 / 512 / 4096 8.7-10.4 us /
/// 142-156 us / 1.21-1.27 ms -> 5.3-5.8 / 90-97 / 0.96-1.02; interleaved T = 16 / 512
/// 6.9-7.0 / 98-99 us -> 5.7-6.1 / 79-82. The chunk helpers are forced inline: GCC left the
/// half-split one out of line, and the calls made it slower than before (T = 512: 148-164 us).
template <typename Vec, int N, bool kInterleaved>
inline void rope_bf16_rows_held(const Eigen::bfloat16* src, Eigen::bfloat16* dst,
                                Eigen::Index heads, Eigen::Index src_hs, Eigen::Index dst_hs,
                                const float* c, const float* s, Eigen::Index half,
                                RopeSource source) {
  using V = typename Vec::V;
  constexpr int W = Vec::kLanes;
  constexpr int kPerChunk = kInterleaved ? 1 : 2;  // cos (and sin) vectors per chunk
  V cv[std::size_t{kPerChunk * N}], sv[std::size_t{kPerChunk * N}];
  POSENC_UNROLL
  for (int k = 0; k < kPerChunk * N; ++k) {
    cv[k] = Vec::loadf(c + W * k);
    sv[k] = Vec::loadf(s + W * k);
  }
  for (Eigen::Index h = 0; h < heads; ++h) {
    const Eigen::bfloat16* x = src + h * src_hs;
    Eigen::bfloat16* y = dst + h * dst_hs;
    if (source == RopeSource::kMemory) rope_prefetch_ahead(x, kInterleaved ? 2 * W * N : 2 * half);
    POSENC_UNROLL
    for (int k = 0; k < N; ++k) {
      if constexpr (kInterleaved) {
        rope_bf16_interleaved_chunk<Vec>(x, y, 2 * W * k, cv[k], sv[k]);
      } else {
        rope_bf16_half_split_chunk<Vec>(x, y, half, 2 * W * k, cv[2 * k], cv[2 * k + 1],
                                        sv[2 * k], sv[2 * k + 1]);
      }
    }
  }
}

/// rope_bf16_rows_held for `chunks` chunks where they fit in registers, as many as the float
/// rows hold whole (2 Vec::kWholeVecs: AVX-512 at most 4 half-split or 8 interleaved chunks,
/// AVX2 2 or 4, i.e. rotary_dim <= 64); false when they do not. On AVX2 the rows then keep 8
/// of the 16 registers for the widening and rounding. Zen 3, rotary_dim 32 of 128, 32 heads
/// (A/B, 3 rounds, paired with the partial-row stream): interleaved T = 4096 from the cache
/// 2.37-2.93 -> 1.19-1.30 ms (0.44-0.51 -> 0.70-0.76), on the fly 2.07-2.46 -> 1.31-1.42 ms;
/// half-split 1.26-1.57 -> 1.22-1.34 ms; T = 512 65-85 against 69-88 us; T = 16 unchanged.
template <typename Vec, bool kInterleaved>
inline bool rope_bf16_try_rows_held(const Eigen::bfloat16* src, Eigen::bfloat16* dst,
                                Eigen::Index heads, Eigen::Index src_hs, Eigen::Index dst_hs,
                                const float* c, const float* s, Eigen::Index chunks,
                                Eigen::Index half, RopeSource source) {
  constexpr int kMaxChunks = kInterleaved ? Vec::kWholeVecs : Vec::kWholeVecs / 2;
  if (chunks > kMaxChunks) return false;
  rope_with_vecs<kMaxChunks>(chunks, [&](auto n) {
    rope_bf16_rows_held<Vec, decltype(n)::value, kInterleaved>(src, dst, heads, src_hs, dst_hs,
                                                               c, s, half, source);
  });
  return true;
}

/// bfloat16 half-split, pairs a multiple of 2W (W = Vec::kLanes): cos/sin are regrouped once
/// per token into the even / odd order of bf16_split (chunk k: c[2W k + 2i], then
/// c[2W k + 2i + 1]), two permutes per 2W values (the scalar loop it replaced cost 3-6 % at
/// T >= 16).
template <typename Vec>
inline void rope_simd_half_split_bf16(const Eigen::bfloat16* src, Eigen::bfloat16* dst,
                                      Eigen::Index heads, Eigen::Index src_hs,
                                      Eigen::Index dst_hs, const float* c, const float* s,
                                      Eigen::Index half, Eigen::Index pairs, RopeSource source) {
  constexpr int W = Vec::kLanes;
  alignas(64) float cp[kRopeSimdMaxHalf];
  alignas(64) float sp[kRopeSimdMaxHalf];
  for (Eigen::Index j = 0; j < pairs; j += 2 * W) {
    typename Vec::V even, odd;
    Vec::deinterleave(c + j, even, odd);
    Vec::storef(cp + j, even);
    Vec::storef(cp + j + W, odd);
    Vec::deinterleave(s + j, even, odd);
    Vec::storef(sp + j, even);
    Vec::storef(sp + j + W, odd);
  }
  if (rope_bf16_try_rows_held<Vec, false>(src, dst, heads, src_hs, dst_hs, cp, sp,
                                          pairs / (2 * W), half, source)) {
    return;
  }
  for (Eigen::Index h = 0; h < heads; ++h) {
    const Eigen::bfloat16* x = src + h * src_hs;
    Eigen::bfloat16* y = dst + h * dst_hs;
    if (source == RopeSource::kMemory) rope_prefetch_ahead(x, 2 * half);
    for (Eigen::Index j = 0; j < pairs; j += 2 * W) {
      rope_bf16_half_split_chunk<Vec>(x, y, half, j, Vec::loadf(cp + j), Vec::loadf(cp + j + W),
                                      Vec::loadf(sp + j), Vec::loadf(sp + j + W));
    }
  }
}

/// bfloat16 interleaved, rd a multiple of 2W: the even / odd split *is* the pair split, so the
/// per-pair cos / sin are used as they are.
template <typename Vec>
inline void rope_simd_interleaved_bf16(const Eigen::bfloat16* src, Eigen::bfloat16* dst,
                                       Eigen::Index heads, Eigen::Index src_hs,
                                       Eigen::Index dst_hs, const float* c, const float* s,
                                       Eigen::Index rd, RopeSource source) {
  constexpr int W = Vec::kLanes;
  if (rope_bf16_try_rows_held<Vec, true>(src, dst, heads, src_hs, dst_hs, c, s, rd / (2 * W),
                                         rd / 2, source)) {
    return;
  }
  for (Eigen::Index h = 0; h < heads; ++h) {
    const Eigen::bfloat16* x = src + h * src_hs;
    Eigen::bfloat16* y = dst + h * dst_hs;
    if (source == RopeSource::kMemory) rope_prefetch_ahead(x, rd);
    for (Eigen::Index j = 0; j < rd; j += 2 * W) {
      rope_bf16_interleaved_chunk<Vec>(x, y, j, Vec::loadf(c + j / 2), Vec::loadf(s + j / 2));
    }
  }
}

// Rows in cache: the cos / sin of a block of pairs are loaded into registers once and serve
// every head of the token (heads inner, pair blocks outer). Per vector the loop then does the
// stream's one load and one store; reloading cos and sin per head would add two more loads, and
// L1 issues only three memory operations a cycle, so in cache the kernel would run at ~2/3 of
// the stream.

/// W half-split pairs: x[0, W) with x[half, half + W), cos cv and sin sv.
template <typename Vec, typename T>
EIGEN_ALWAYS_INLINE void rope_half_split_vec(const T* x, T* y, Eigen::Index half,
                                             typename Vec::V cv, typename Vec::V sv) {
  const typename Vec::V a = Vec::load(x), b = Vec::load(x + half);
  Vec::store(y, Vec::fmsub(a, cv, Vec::mul(b, sv)));
  Vec::store(y + half, Vec::fmadd(b, cv, Vec::mul(a, sv)));
}

/// Pairs [0, pairs) of `heads` rows, one head row after another: chunks [0, kHeld) with their
/// cos / sin held in registers across the heads, the rest (rows longer than the registers
/// hold) loading theirs per chunk, 4 loads a store pair where the stream does 2. Zen 3 (AVX2),
/// 32 heads x 128 (4 of 8 chunks held), 512 tokens (8 MiB, from L3), a driver calling
/// apply_rope_inplace_cached, best of 200, 2 rounds: 179 -> 162-171 us against loading every
/// chunk's (the in-place stream 151-155 us). In the benchmark (3 rounds) the same cells read
/// 0.86-0.87 -> 0.95-0.96 of the paired stream (q32k8 0.83-0.85 -> 0.92-0.96); from DRAM
/// (T = 4096) within the noise.
template <typename Vec, typename T, int kHeld>
inline void rope_simd_half_split_held(const T* src, T* dst, Eigen::Index heads,
                                      Eigen::Index src_hs, Eigen::Index dst_hs, const float* c,
                                      const float* s, Eigen::Index half, Eigen::Index pairs,
                                      bool prefetch = false) {
  using V = typename Vec::V;
  constexpr int W = Vec::kLanes;
  V cv[std::size_t{kHeld}], sv[std::size_t{kHeld}];
  POSENC_UNROLL
  for (int k = 0; k < kHeld; ++k) {
    cv[k] = Vec::loadf(c + W * k);
    sv[k] = Vec::loadf(s + W * k);
  }
  for (Eigen::Index h = 0; h < heads; ++h) {
    const T* x = src + h * src_hs;
    T* y = dst + h * dst_hs;
    if (prefetch) rope_prefetch_ahead(x, 2 * half);
    POSENC_UNROLL
    for (int k = 0; k < kHeld; ++k) {
      rope_half_split_vec<Vec>(x + W * k, y + W * k, half, cv[k], sv[k]);
    }
    for (Eigen::Index j = W * kHeld; j < pairs; j += W) {
      rope_half_split_vec<Vec>(x + j, y + j, half, Vec::loadf(c + j), Vec::loadf(s + j));
    }
  }
}

/// Half-split rotation of pairs [0, pairs) of `heads` rows (row h at src + h * src_hs), partner
/// `half` further on, pairs a multiple of W. Rows whose cos / sin fit in 2 Vec::kWholeVecs
/// registers are rotated in one pass over every head in address order with no cos / sin reload,
/// wherever they come from; otherwise from L3 / DRAM each row is walked with the first
/// kWholeVecs chunks' cos / sin held and the rest loaded alongside, and from L2 in blocks of
/// pairs with the heads inner.
template <typename Vec, typename T>
inline void rope_simd_half_split_rows(const T* src, T* dst, Eigen::Index heads,
                                      Eigen::Index src_hs, Eigen::Index dst_hs, const float* c,
                                      const float* s, Eigen::Index half, Eigen::Index pairs,
                                      RopeSource source) {
  constexpr int W = Vec::kLanes;
  if (pairs / W <= Vec::kWholeVecs) {
    rope_with_vecs<Vec::kWholeVecs>(pairs / W, [&](auto vecs) {
      constexpr int kVecs = decltype(vecs)::value;
      rope_simd_half_split_held<Vec, T, kVecs>(src, dst, heads, src_hs, dst_hs, c, s, half,
                                               W * kVecs, source == RopeSource::kMemory);
    });
    return;
  }
  if (source != RopeSource::kL2) {
    // From L3 or DRAM: one sequential pass per head row (see rope_simd_interleaved_rows).
    rope_simd_half_split_held<Vec, T, Vec::kWholeVecs>(src, dst, heads, src_hs, dst_hs, c, s,
                                                       half, pairs, source == RopeSource::kMemory);
    return;
  }
  constexpr int kBlock = W * Vec::kBlockVecs;
  Eigen::Index j = 0;
  for (; j + kBlock <= pairs; j += kBlock) {
    rope_simd_half_split_held<Vec, T, Vec::kBlockVecs>(src + j, dst + j, heads, src_hs, dst_hs,
                                                      c + j, s + j, half, kBlock);
  }
  for (; j < pairs; j += W) {
    rope_simd_half_split_held<Vec, T, 1>(src + j, dst + j, heads, src_hs, dst_hs, c + j, s + j,
                                         half, W);
  }
}

/// y = x * cc + swap_pairs(x) * ss for W / 2 interleaved pairs, with the per-lane
/// cc = [c0 c0 c1 c1 ..] and ss = [-s0 s0 -s1 s1 ..] (Vec::pair_cos, Vec::pair_sin).
template <typename Vec>
inline typename Vec::V rope_rotate_pairs(typename Vec::V v, typename Vec::V cv,
                                         typename Vec::V sv) {
  return Vec::fmadd(v, cv, Vec::mul(Vec::swap_pairs(v), sv));
}

#ifdef POSENC_ROPE_SIMD512
/// Whether the 512-bit row kernels take these rows. Rows off a cache line (a caller's plain
/// std::vector starts 16 bytes into one) make every 64-byte load and store touch two lines;
/// from DRAM the 32-byte kernels are then faster, from cache still slower. Zen 5, A/B
/// (2 rounds), T = 4096, q32k0, rows 16 bytes off: interleaved 2.64-2.67 -> 1.86-1.92 ms,
/// half-split 1.97-1.98 -> 1.78-1.97 ms; at T = 512 (L3) interleaved 113-116 -> 193-196 us.
/// From cache, float runs off a line take the line-phase kernels below (rope_rows_phase).
template <typename T>
inline bool rope_rows_take_512(const T* src, T* dst, Eigen::Index src_hs, Eigen::Index dst_hs,
                               RopeSource source) {
  if (source != RopeSource::kMemory) return true;
  const auto stride = [](Eigen::Index hs) { return static_cast<std::uintptr_t>(hs) * sizeof(T); };
  const std::uintptr_t offsets = reinterpret_cast<std::uintptr_t>(src) |
                                 reinterpret_cast<std::uintptr_t>(dst) | stride(src_hs) |
                                 stride(dst_hs);
  return offsets % 64 == 0;
}

// --- float rows back to back, off a cache line --------------------------------------------------
// A token's heads with head stride == rotary_dim form one run of heads * rd floats. When the
// run starts p floats into a cache line (p != 0: a caller's std::vector), the 512-bit kernels
// above split every load and store over two lines. These walk the run in line-aligned vectors
// instead: vector m holds run dims 16 m + l - p (lane l), i.e. row dims (16 m + l - p) mod rd,
// a pattern that repeats every P = rd / 16 vectors. The per-lane cos / sin are the row's own
// (phase 0) vectors shifted by p lanes, formed once per call; lanes before the run or after
// it are masked. Half-split partners sit P / 2 vectors on (x1 lanes) or back (x2 lanes) in the
// same lane; the two vectors that straddle a half boundary take theirs from both sides.
//
//        line:  |    16 lanes    |    16 lanes    |  ...  |    16 lanes    |
//   run (p = 4): ....[x1 0-11   ][x1 12-27       ] ... [x2 52-63 | next row x1 0-3] ...
//
// Each lane's arithmetic is the aligned kernels' (fmadd(x, c, partner * (-s or s))), so the
// results are the same bits. Zen 5, 32 heads x 128, rows 16 bytes off, A/B (3 rounds):
// half-split T = 1 / 16 / 512 2.18-2.23 / 2.09-2.17 / 83-89 us -> 1.65-1.72 / 1.74-1.77 /
// 78-94 us; interleaved 2.69-2.77 / 3.07-3.15 / 106-110 -> 1.88-1.93 / 1.65-1.67 / 78-88 us
// (the aligned rows: interleaved 1.87-1.95 / 1.72-1.74 / 79-93 us). On aligned rows the same
// kernel (p = 0) measured no different from the row-held blocks, which keep those.

/// The line phase in floats (1-15) of rows the phase kernels take, or 0. They take float runs
/// (head strides == rd, rd / 16 <= 8 vectors, rd % 32 == 0 for half-split, an even phase for
/// interleaved pairs) whose source and destination share the phase, read from cache: from
/// DRAM the 32-byte kernels (rope_rows_take_512) are kept.
inline int rope_rows_phase(const float* src, const float* dst, Eigen::Index src_hs,
                           Eigen::Index dst_hs, Eigen::Index rd, bool interleaved,
                           RopeSource source) {
  const auto line_offset = [](const float* p) { return reinterpret_cast<std::uintptr_t>(p) % 64; };
  const std::uintptr_t offset = line_offset(src);
  if (source == RopeSource::kMemory || offset == 0 || offset != line_offset(dst) ||
      src_hs != rd || dst_hs != rd || rd % 16 != 0 || rd > 128) {
    return 0;
  }
  const int phase = static_cast<int>(offset / sizeof(float));
  if (interleaved ? phase % 2 != 0 : rd % 32 != 0) return 0;
  return phase;
}

/// Rotates `heads` runs of rd = 16 P floats at src (to dst, possibly == src), line phase p;
/// c, s per pair (rd / 2 values).
template <int P, bool kInterleaved>
inline void rope_phase_rows(const float* src, float* dst, Eigen::Index heads, const float* c,
                            const float* s, int p) {
  using V = __m512;
  const __m512 sign = _mm512_castsi512_ps(_mm512_set1_epi32(static_cast<int>(0x80000000u)));
  V c0[std::size_t{P}], s0[std::size_t{P}];  // phase 0: lanes of row dims 16 k .. 16 k + 15
  POSENC_UNROLL
  for (int k = 0; k < P; ++k) {
    if constexpr (kInterleaved) {
      c0[k] = RopeVec16::pair_cos(c + 8 * k);
      s0[k] = RopeVec16::pair_sin(s + 8 * k);
    } else {  // x1 lanes (dims < rd / 2) take -s, x2 lanes +s
      const int j = (16 * k) % (8 * P);
      c0[k] = _mm512_loadu_ps(c + j);
      s0[k] = 16 * k < 8 * P ? _mm512_xor_ps(_mm512_loadu_ps(s + j), sign) : _mm512_loadu_ps(s + j);
    }
  }
  // Lane l of vector m holds row dim 16 k + l - p: lanes l < p come from vector k - 1's
  // lanes 16 - p + l, the others from vector k's lanes l - p.
  const __m512i shift =
      _mm512_add_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                       _mm512_set1_epi32(16 - p));
  V cv[std::size_t{P}], sv[std::size_t{P}];
  POSENC_UNROLL
  for (int k = 0; k < P; ++k) {
    cv[k] = _mm512_permutex2var_ps(c0[(k + P - 1) % P], shift, c0[k]);
    sv[k] = _mm512_permutex2var_ps(s0[(k + P - 1) % P], shift, s0[k]);
  }
  const auto head_lanes = static_cast<__mmask16>(0xffffu << p);  // lanes l >= p
  const auto tail_lanes = static_cast<__mmask16>(~head_lanes);   // lanes l < p
  const float* x = reinterpret_cast<const float*>(reinterpret_cast<std::uintptr_t>(src) & ~std::uintptr_t{63});
  float* y = reinterpret_cast<float*>(reinterpret_cast<std::uintptr_t>(dst) & ~std::uintptr_t{63});
  V previous_half = _mm512_setzero_ps();  // vector m - P / 2 of the next row's first vector
  for (Eigen::Index h = 0; h < heads; ++h, x += 16 * P, y += 16 * P) {
    V v[std::size_t{P}];
    v[0] = h == 0 ? _mm512_maskz_loadu_ps(head_lanes, x) : _mm512_load_ps(x);
    POSENC_UNROLL
    for (int i = 1; i < P; ++i) v[i] = _mm512_load_ps(x + 16 * i);
    V out[std::size_t{P}];
    if constexpr (kInterleaved) {
      POSENC_UNROLL
      for (int i = 0; i < P; ++i) out[i] = rope_rotate_pairs<RopeVec16>(v[i], cv[i], sv[i]);
    } else {
      const V next = h + 1 == heads ? _mm512_maskz_loadu_ps(tail_lanes, x + 16 * P)
                                    : _mm512_load_ps(x + 16 * P);
      POSENC_UNROLL
      for (int i = 0; i < P; ++i) {
        V partner;
        if (i == 0) {
          partner = _mm512_mask_blend_ps(tail_lanes, v[P / 2], previous_half);
        } else if (i < P / 2) {
          partner = v[i + P / 2];
        } else if (i == P / 2) {
          partner = _mm512_mask_blend_ps(tail_lanes, v[0], next);
        } else {
          partner = v[i - P / 2];
        }
        out[i] = _mm512_fmadd_ps(v[i], cv[i], _mm512_mul_ps(partner, sv[i]));
      }
      previous_half = v[P / 2];
    }
    if (h == 0) {
      _mm512_mask_storeu_ps(y, head_lanes, out[0]);
    } else {
      _mm512_store_ps(y, out[0]);
    }
    POSENC_UNROLL
    for (int i = 1; i < P; ++i) _mm512_store_ps(y + 16 * i, out[i]);
  }
  // The last row's final p dims (x2 lanes for half-split) share a line with what follows.
  const V last = _mm512_maskz_loadu_ps(tail_lanes, x);
  const V out = kInterleaved ? rope_rotate_pairs<RopeVec16>(last, cv[0], sv[0])
                             : _mm512_fmadd_ps(last, cv[0], _mm512_mul_ps(previous_half, sv[0]));
  _mm512_mask_storeu_ps(y, tail_lanes, out);
}

/// rope_phase_rows for rd = 16 P, P in [1, 8].
template <bool kInterleaved>
inline void rope_phase_rows(const float* src, float* dst, Eigen::Index heads, const float* c,
                            const float* s, Eigen::Index rd, int p) {
  rope_with_vecs<8>(rd / 16, [&](auto vecs) {
    rope_phase_rows<decltype(vecs)::value, kInterleaved>(src, dst, heads, c, s, p);
  });
}
#endif

/// Half-split rotation of pairs [0, pairs) of `heads` rows (partners `half` further on; the
/// pairs past `pairs` are held still), pairs a multiple of 8. source: see RopeSource.
template <typename T>
inline void rope_simd_half_split(const T* src, T* dst, Eigen::Index heads, Eigen::Index src_hs,
                                 Eigen::Index dst_hs, const float* c, const float* s,
                                 Eigen::Index half, Eigen::Index pairs, RopeSource source) {
#ifdef POSENC_ROPE_SIMD512
  if constexpr (std::is_same_v<T, Eigen::bfloat16>) {
    if (pairs % 32 == 0) {
      rope_simd_half_split_bf16<RopeVec16>(src, dst, heads, src_hs, dst_hs, c, s, half, pairs,
                                           source);
      return;
    }
  }
  if constexpr (std::is_same_v<T, float>) {
    if (pairs == half) {
      if (const int p = rope_rows_phase(src, dst, src_hs, dst_hs, 2 * half, false, source)) {
        rope_phase_rows<false>(src, dst, heads, c, s, 2 * half, p);
        return;
      }
    }
  }
  if (pairs % 16 == 0 && rope_rows_take_512(src, dst, src_hs, dst_hs, source)) {
    rope_simd_half_split_rows<RopeVec16>(src, dst, heads, src_hs, dst_hs, c, s, half, pairs,
                                         source);
    return;
  }
#endif
  if constexpr (std::is_same_v<T, Eigen::bfloat16>) {
    if (pairs % 16 == 0) {
      rope_simd_half_split_bf16<RopeVec8>(src, dst, heads, src_hs, dst_hs, c, s, half, pairs,
                                          source);
      return;
    }
  }
  rope_simd_half_split_rows<RopeVec8>(src, dst, heads, src_hs, dst_hs, c, s, half, pairs, source);
}

/// keep_in_register for 512-bit vectors only. Unpinned, GCC folds the load into both the
/// pair swap and the multiply-add that use it: two loads and a store per 16 values, where the
/// stream does one of each. Zen 5, 32 (+ 8) heads x 128, A/B (3 rounds): interleaved T = 16
/// q32k0 / q32k8 1.71-1.73 / 2.25-2.27 us -> 1.62-1.66 / 2.09-2.12 us. DRAM-sized calls keep
/// the folded loads (1.68-1.81 -> 1.77-2.02 ms at T = 4096 pinned); 32-byte vectors too (Zen 3:
/// 0.70-0.77 of the stream pinned against 0.79-0.81, see README).
template <typename V>
inline void rope_keep_in_register(V& v) {
  if constexpr (sizeof(V) == 64) keep_in_register(v);
}

/// cc, ss of rope_rotate_pairs for rd dims (rd a multiple of W) from the per-pair c, s.
template <typename Vec>
inline void rope_expand_pairs(const float* c, const float* s, Eigen::Index rd, float* cc,
                              float* ss) {
  constexpr int W = Vec::kLanes;
  for (Eigen::Index j = 0; j < rd; j += W) {
    Vec::storef(cc + j, Vec::pair_cos(c + j / 2));
    Vec::storef(ss + j, Vec::pair_sin(s + j / 2));
  }
}

/// Dims [0, W kVecs) of `heads` rows with cos / sin held in registers, taken from the per-pair
/// c, s (kExpanded false) or from rows already expanded by rope_expand_pairs.
template <typename Vec, typename T, int kVecs, bool kExpanded>
inline void rope_simd_interleaved_block(const T* src, T* dst, Eigen::Index heads,
                                        Eigen::Index src_hs, Eigen::Index dst_hs, const float* c,
                                        const float* s, bool prefetch = false) {
  using V = typename Vec::V;
  constexpr int W = Vec::kLanes;
  V cv[std::size_t{kVecs}], sv[std::size_t{kVecs}];
  POSENC_UNROLL
  for (int k = 0; k < kVecs; ++k) {
    if constexpr (kExpanded) {
      cv[k] = Vec::loadf(c + W * k);
      sv[k] = Vec::loadf(s + W * k);
    } else {
      cv[k] = Vec::pair_cos(c + W / 2 * k);
      sv[k] = Vec::pair_sin(s + W / 2 * k);
    }
  }
  for (Eigen::Index h = 0; h < heads; ++h) {
    const T* x = src + h * src_hs;
    T* y = dst + h * dst_hs;
    if (prefetch) {
      rope_prefetch_ahead(x, W * kVecs);
      POSENC_UNROLL
      for (int k = 0; k < kVecs; ++k) {
        Vec::store(y + W * k, rope_rotate_pairs<Vec>(Vec::load(x + W * k), cv[k], sv[k]));
      }
    } else {
      POSENC_UNROLL
      for (int k = 0; k < kVecs; ++k) {
        V v = Vec::load(x + W * k);
        rope_keep_in_register(v);
        Vec::store(y + W * k, rope_rotate_pairs<Vec>(v, cv[k], sv[k]));
      }
    }
  }
}

/// Interleaved rows from L3, rd a multiple of 2W, one head row after another in address
/// order: 2W values are split into their even and odd elements (Vec::split_pairs), so one cos
/// and one sin vector, put in the split's pair order once per call, serve 2W values where the
/// expanded per-lane rows take two of each; the arithmetic per value, and so every bit, is
/// rope_rotate_pairs'. With 8-float vectors each 8 values cost 2 loads, a store and two in-lane
/// shuffles, against 3 loads, a store and a shuffle, and L1 serves two 32-byte loads a cycle.
/// Zen 3 (AVX2), 32 heads x 128, T = 512 (8 MiB), paired with the in-place stream in the
/// benchmark, A/B against the expanded rows (3 rounds, final code): cos / sin cache q32k0 /
/// q32k8 0.63-0.65 / 0.61-0.63 -> 0.77-0.78 / 0.75-0.76, on the fly 0.59-0.60 / 0.56-0.57 ->
/// 0.69-0.70 / 0.69-0.71. DRAM-sized calls keep the expanded
/// rows and their prefetch (T = 4096: 0.96-0.98 -> 0.91-0.97 with the split). Out of line (one
/// call per token): inlined, GCC 12 compiled the callers' other paths slower (rotary_dim 32,
/// which does not come here, 0.59-0.61 -> 0.56 at T = 512; out of line 0.57-0.60).
/// The first kWholeVecs steps' cos / sin stay in registers across the heads: 199 -> 189-191 us
/// (the driver of rope_simd_half_split_held, cache); in the benchmark (3 rounds, paired) cache
/// 0.73-0.77 -> 0.77-0.81, on the fly 0.67-0.71 -> 0.71-0.74. Split rows from DRAM, with them,
/// measured no better (T = 4096 / 32768: times within the noise, paired 0.95-1.07 ->
/// 0.87-0.97).
template <typename Vec, typename T>
EIGEN_DONT_INLINE void rope_simd_interleaved_split_rows(const T* src, T* dst,
                                                        Eigen::Index heads, Eigen::Index src_hs,
                                                        Eigen::Index dst_hs, const float* c,
                                                        const float* s, Eigen::Index rd) {
  using V = typename Vec::V;
  constexpr int W = Vec::kLanes;
  alignas(64) float co[kRopeSimdMaxHalf];
  alignas(64) float so[kRopeSimdMaxHalf];
  for (Eigen::Index j = 0; j < rd / 2; j += W) {
    Vec::storef(co + j, Vec::pair_order(c + j));
    Vec::storef(so + j, Vec::pair_order(s + j));
  }
  const auto rotate = [](const T* x, T* y, V cv, V sv) {
    V e, o;
    Vec::split_pairs(x, e, o);
    Vec::join_pairs(y, Vec::fmsub(e, cv, Vec::mul(o, sv)), Vec::fmadd(o, cv, Vec::mul(e, sv)));
  };
  constexpr int kHeld = Vec::kWholeVecs;
  const bool held = rd >= 2 * W * kHeld;
  if (!held) {  // defined values in the registers that go unused
    std::fill(co + rd / 2, co + W * kHeld, 0.0f);
    std::fill(so + rd / 2, so + W * kHeld, 0.0f);
  }
  V ch[std::size_t{kHeld}], sh[std::size_t{kHeld}];
  POSENC_UNROLL
  for (int k = 0; k < kHeld; ++k) {
    ch[k] = Vec::loadf(co + W * k);
    sh[k] = Vec::loadf(so + W * k);
  }
  for (Eigen::Index h = 0; h < heads; ++h) {
    const T* x = src + h * src_hs;
    T* y = dst + h * dst_hs;
    if (held) {
      POSENC_UNROLL
      for (int k = 0; k < kHeld; ++k) rotate(x + 2 * W * k, y + 2 * W * k, ch[k], sh[k]);
    }
    for (Eigen::Index j = held ? 2 * W * kHeld : 0; j < rd; j += 2 * W) {
      rotate(x + j, y + j, Vec::loadf(co + j / 2), Vec::loadf(so + j / 2));
    }
  }
}

/// Interleaved rotation of `heads` rows, rd a multiple of W, per-pair c, s. Rows held whole in
/// registers (rotary_dim <= 128 on AVX-512, 32 on AVX2) widen c, s into per-lane vectors once per
/// call; the other paths load per-lane vectors with each block, from rows expanded here once.
/// Expanding per token in the caller instead (a double round trip and 2 rd floats written and read
/// back per token) cost 18-22 % of a 16-token call (Zen 5, perf, 32 heads x 128).
template <typename Vec, typename T>
inline void rope_simd_interleaved_rows(const T* src, T* dst, Eigen::Index heads,
                                       Eigen::Index src_hs, Eigen::Index dst_hs, const float* c,
                                       const float* s, Eigen::Index rd, RopeSource source) {
  constexpr int W = Vec::kLanes;
  if (rd / W <= Vec::kWholeVecs) {  // as in rope_simd_half_split_rows
    rope_with_vecs<Vec::kWholeVecs>(rd / W, [&](auto vecs) {
      rope_simd_interleaved_block<Vec, T, decltype(vecs)::value, false>(
          src, dst, heads, src_hs, dst_hs, c, s, source == RopeSource::kMemory);
    });
    return;
  }
  if constexpr (Vec::kSplitPairs) {
    if (source == RopeSource::kL3 && rd % (2 * W) == 0) {
      rope_simd_interleaved_split_rows<Vec>(src, dst, heads, src_hs, dst_hs, c, s, rd);
      return;
    }
  }
  alignas(64) float cc[2 * kRopeSimdMaxHalf];
  alignas(64) float ss[2 * kRopeSimdMaxHalf];
  rope_expand_pairs<Vec>(c, s, rd, cc, ss);
  if (source != RopeSource::kL2) {
    // From L3 or DRAM: one sequential pass per head row, cos / sin loaded with each vector.
    // Blocking the pairs walks each row in several strided passes, which the hardware
    // prefetcher follows worse than the extra loads cost; sweeping two heads at once (one
    // cos / sin load per 16 values) measured 0.63-0.69 of the stream against 0.85-0.86 for
    // this with 32-byte aligned rows (AVX2, T = 4096, 32 heads), though 0.92 against
    // 0.86-0.88 with rows 16 bytes off.
    for (Eigen::Index h = 0; h < heads; ++h) {
      if (source == RopeSource::kMemory) rope_prefetch_ahead(src + h * src_hs, rd);
      for (Eigen::Index j = 0; j < rd; j += W) {
        rope_simd_interleaved_block<Vec, T, 1, true>(src + h * src_hs + j, dst + h * dst_hs + j,
                                                     1, 0, 0, cc + j, ss + j);
      }
    }
    return;
  }
  constexpr int kBlock = W * Vec::kBlockVecs;
  Eigen::Index j = 0;
  for (; j + kBlock <= rd; j += kBlock) {
    rope_simd_interleaved_block<Vec, T, Vec::kBlockVecs, true>(src + j, dst + j, heads, src_hs,
                                                              dst_hs, cc + j, ss + j);
  }
  for (; j < rd; j += W) {
    rope_simd_interleaved_block<Vec, T, 1, true>(src + j, dst + j, heads, src_hs, dst_hs, cc + j,
                                                 ss + j);
  }
}

/// Interleaved rotation of `heads` rows, rd a multiple of 8, per-pair c[j], s[j]:
/// y = x * [c0 c0 c1 c1 ..] + swap_pairs(x) * [-s0 s0 -s1 s1 ..].
template <typename T>
inline void rope_simd_interleaved(const T* src, T* dst, Eigen::Index heads, Eigen::Index src_hs,
                                  Eigen::Index dst_hs, const float* c, const float* s,
                                  Eigen::Index rd, RopeSource source) {
#ifdef POSENC_ROPE_SIMD512
  if constexpr (std::is_same_v<T, Eigen::bfloat16>) {
    if (rd % 32 == 0) {
      rope_simd_interleaved_bf16<RopeVec16>(src, dst, heads, src_hs, dst_hs, c, s, rd, source);
      return;
    }
  }
  if constexpr (std::is_same_v<T, float>) {
    if (const int p = rope_rows_phase(src, dst, src_hs, dst_hs, rd, true, source)) {
      rope_phase_rows<true>(src, dst, heads, c, s, rd, p);
      return;
    }
  }
  if (rd % 16 == 0 && rope_rows_take_512(src, dst, src_hs, dst_hs, source)) {
    rope_simd_interleaved_rows<RopeVec16>(src, dst, heads, src_hs, dst_hs, c, s, rd, source);
    return;
  }
#endif
  if constexpr (std::is_same_v<T, Eigen::bfloat16>) {
    if (rd % 16 == 0) {
      rope_simd_interleaved_bf16<RopeVec8>(src, dst, heads, src_hs, dst_hs, c, s, rd, source);
      return;
    }
  }
  rope_simd_interleaved_rows<RopeVec8>(src, dst, heads, src_hs, dst_hs, c, s, rd, source);
}
#endif

/// Row of storage T -> compute type (float for the 16-bit types).
template <typename T>
inline void load_row(const T* src, compute_t<T>* dst, Eigen::Index n) {
  if constexpr (std::is_same_v<T, Eigen::bfloat16>) {
    bf16_to_float(src, dst, n);
  } else if constexpr (std::is_same_v<T, Eigen::half>) {
    half_to_float(src, dst, n);
  } else {
    for (Eigen::Index i = 0; i < n; ++i) dst[i] = src[i];
  }
}

template <typename T>
inline void store_row(const compute_t<T>* src, T* dst, Eigen::Index n) {
  if constexpr (std::is_same_v<T, Eigen::bfloat16>) {
    float_to_bf16(src, dst, n);
  } else if constexpr (std::is_same_v<T, Eigen::half>) {
    float_to_half(src, dst, n);
  } else {
    for (Eigen::Index i = 0; i < n; ++i) dst[i] = src[i];
  }
}

}  // namespace posenc::detail
