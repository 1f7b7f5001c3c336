#pragma once
/// \file posenc/detail/sinusoidal_kernels.hpp
/// AVX2 inner loop of the sinusoidal kernel for float rows: advance the (cos, sin) state of 8
/// pairs by the shift rotations in double, round to float, and scatter the pairs into each
/// row's layout. Nothing here validates; sinusoidal.hpp does that before calling in.

#include <cstdint>

#include <Eigen/Core>

#include "posenc/detail/fast_math_guard.hpp"

#if (defined(__AVX2__) && defined(__FMA__)) || defined(POSENC_SINUSOIDAL_FORCE_SIMD)
#include <immintrin.h>
#define POSENC_SINUSOIDAL_SIMD 1
#endif

namespace posenc::detail {

#if defined(POSENC_SINUSOIDAL_SIMD)

/// Adds (accumulate) or stores 8 values at p.
template <bool accumulate>
inline void sinusoidal_put8(float* p, __m256 v) {
  if constexpr (accumulate) v = _mm256_add_ps(_mm256_loadu_ps(p), v);
  _mm256_storeu_ps(p, v);
}

#if defined(__AVX512F__) && defined(__AVX512DQ__)
#define POSENC_SINUSOIDAL_SIMD512 1
/// Adds (accumulate) or stores 16 values at p.
template <bool accumulate>
inline void sinusoidal_put16(float* p, __m512 v) {
  if constexpr (accumulate) v = _mm512_add_ps(_mm512_loadu_ps(p), v);
  _mm512_storeu_ps(p, v);
}

/// Rows of calls that come from DRAM are prefetched this many floats ahead (4 KiB), as the RoPE
/// rows are: the hardware prefetchers alone keep too few lines in flight while the core
/// rotates. Interleaved rows only: [1, 4096, 4096] interleaved 0.56-0.61 -> 0.77-0.83 of the
/// stream; the two half-row streams of sin|cos went 0.66-0.68 -> 0.60-0.63 and do without.
inline constexpr Eigen::Index kSinusoidalPrefetchFloats = 1024;

/// sinusoidal_rotate_rows_simd's step for 16 pairs a vector pair (8 doubles each) on AVX-512
/// machines, where the in-place stream it is measured against moves 64 bytes per instruction;
/// returns the pairs done (n8 rounded down to 16), the 8-pair loop does the rest.
template <bool accumulate, int layout, int count>
inline Eigen::Index sinusoidal_rotate_rows_simd512(float* const* rows, double* c, double* s,
                                                   const double* step_c, const double* step_s,
                                                   Eigen::Index n8, Eigen::Index i0,
                                                   Eigen::Index half, bool prefetch) {
  // [s c s c ...] of pairs 0-7 and 8-15 from sin (lanes 0-15) and cos (16-31) in two permutes.
  const __m512i lo = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  const __m512i hi = _mm512_set_epi32(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8);
  Eigen::Index i = 0;
  for (; i + 16 <= n8; i += 16) {
    __m512d c0 = _mm512_loadu_pd(c + i), c1 = _mm512_loadu_pd(c + i + 8);
    __m512d s0 = _mm512_loadu_pd(s + i), s1 = _mm512_loadu_pd(s + i + 8);
    const __m512d C0 = _mm512_loadu_pd(step_c + i), C1 = _mm512_loadu_pd(step_c + i + 8);
    const __m512d S0 = _mm512_loadu_pd(step_s + i), S1 = _mm512_loadu_pd(step_s + i + 8);
    for (int g = 0; g < count; ++g) {
      const __m512d next_c0 = _mm512_fmsub_pd(c0, C0, _mm512_mul_pd(s0, S0));
      const __m512d next_c1 = _mm512_fmsub_pd(c1, C1, _mm512_mul_pd(s1, S1));
      s0 = _mm512_fmadd_pd(s0, C0, _mm512_mul_pd(c0, S0));
      s1 = _mm512_fmadd_pd(s1, C1, _mm512_mul_pd(c1, S1));
      c0 = next_c0;
      c1 = next_c1;
      const __m512 cf = _mm512_insertf32x8(_mm512_castps256_ps512(_mm512_cvtpd_ps(c0)),
                                           _mm512_cvtpd_ps(c1), 1);
      const __m512 sf = _mm512_insertf32x8(_mm512_castps256_ps512(_mm512_cvtpd_ps(s0)),
                                           _mm512_cvtpd_ps(s1), 1);
      float* row = rows[g];
      if constexpr (layout == 0) {
        float* p = row + 2 * (i0 + i);
        if (prefetch) {
          _mm_prefetch(reinterpret_cast<const char*>(p + kSinusoidalPrefetchFloats), _MM_HINT_T0);
          _mm_prefetch(reinterpret_cast<const char*>(p + kSinusoidalPrefetchFloats + 16),
                       _MM_HINT_T0);
        }
        sinusoidal_put16<accumulate>(p, _mm512_permutex2var_ps(sf, lo, cf));
        sinusoidal_put16<accumulate>(p + 16, _mm512_permutex2var_ps(sf, hi, cf));
      } else {
        float* first = row + i0 + i;
        sinusoidal_put16<accumulate>(first, layout == 1 ? sf : cf);
        sinusoidal_put16<accumulate>(first + half, layout == 1 ? cf : sf);
      }
    }
    _mm512_storeu_pd(c + i, c0);
    _mm512_storeu_pd(c + i + 8, c1);
    _mm512_storeu_pd(s + i, s0);
    _mm512_storeu_pd(s + i + 8, s1);
  }
  return i;
}
#endif

/// Rows rows[0..count) at consecutive positions p+1 .. p+count from the state (c, s) = PE(p),
/// for pairs [0, n8) of the block that starts at pair i0; n8 a multiple of 8. Each row is the
/// previous one advanced by one step of the shift rotation (Vaswani et al. §3.5), in double:
///   c' = c C - s S,  s' = s C + c S,  C = cos w, S = sin w,
/// and the state moves to the last row. Chaining keeps one step table in cache instead of one
/// per row; the chain latency is hidden by the independent pairs in flight. layout: 0
/// interleaved [scsc..], 1 [ss..cc..], 2 [cc..ss..] (SinusoidalLayout's values).
/// prefetch: the rows come from DRAM (see kSinusoidalPrefetchFloats; AVX-512 only).
template <bool accumulate, int layout, int count>
inline void sinusoidal_rotate_rows_simd(float* const* rows, double* c, double* s,
                                        const double* step_c, const double* step_s,
                                        Eigen::Index n8, Eigen::Index i0, Eigen::Index half,
                                        [[maybe_unused]] bool prefetch = false) {
  Eigen::Index i = 0;
#if defined(POSENC_SINUSOIDAL_SIMD512)
  i = sinusoidal_rotate_rows_simd512<accumulate, layout, count>(rows, c, s, step_c, step_s, n8,
                                                                 i0, half, prefetch);
#endif
  for (; i < n8; i += 8) {
    __m256d c0 = _mm256_loadu_pd(c + i), c1 = _mm256_loadu_pd(c + i + 4);
    __m256d s0 = _mm256_loadu_pd(s + i), s1 = _mm256_loadu_pd(s + i + 4);
    const __m256d C0 = _mm256_loadu_pd(step_c + i), C1 = _mm256_loadu_pd(step_c + i + 4);
    const __m256d S0 = _mm256_loadu_pd(step_s + i), S1 = _mm256_loadu_pd(step_s + i + 4);
    for (int g = 0; g < count; ++g) {
      const __m256d next_c0 = _mm256_fmsub_pd(c0, C0, _mm256_mul_pd(s0, S0));
      const __m256d next_c1 = _mm256_fmsub_pd(c1, C1, _mm256_mul_pd(s1, S1));
      s0 = _mm256_fmadd_pd(s0, C0, _mm256_mul_pd(c0, S0));
      s1 = _mm256_fmadd_pd(s1, C1, _mm256_mul_pd(c1, S1));
      c0 = next_c0;
      c1 = next_c1;
      const __m128 cf0 = _mm256_cvtpd_ps(c0), cf1 = _mm256_cvtpd_ps(c1);
      const __m128 sf0 = _mm256_cvtpd_ps(s0), sf1 = _mm256_cvtpd_ps(s1);
      float* row = rows[g];
      if constexpr (layout == 0) {
        // [s c s c ...]: pairs i..i+3 fill 8 floats at column 2(i0 + i).
        float* p = row + 2 * (i0 + i);
        sinusoidal_put8<accumulate>(
            p, _mm256_set_m128(_mm_unpackhi_ps(sf0, cf0), _mm_unpacklo_ps(sf0, cf0)));
        sinusoidal_put8<accumulate>(
            p + 8, _mm256_set_m128(_mm_unpackhi_ps(sf1, cf1), _mm_unpacklo_ps(sf1, cf1)));
      } else {
        const __m256 cf = _mm256_set_m128(cf1, cf0), sf = _mm256_set_m128(sf1, sf0);
        float* first = row + i0 + i;
        float* second = first + half;
        sinusoidal_put8<accumulate>(first, layout == 1 ? sf : cf);
        sinusoidal_put8<accumulate>(second, layout == 1 ? cf : sf);
      }
    }
    _mm256_storeu_pd(c + i, c0);
    _mm256_storeu_pd(c + i + 4, c1);
    _mm256_storeu_pd(s + i, s0);
    _mm256_storeu_pd(s + i + 4, s1);
  }
}

/// Pairs per chunk of the fan-out: `count` float rows of 2 * 512 values (16 KiB at count 4)
/// stay in L1 between the rotation and the adds into each copy.
inline constexpr Eigen::Index kSinusoidalFanoutChunk = 512;

/// sinusoidal_rotate_rows_simd for rows that are each put at row + k * copy_stride, k in
/// [0, copies): the rotation runs once per chunk into an L1 scratch, then each copy is a plain
/// streaming add (or store) of that scratch.
template <bool accumulate, int layout, int count>
inline void sinusoidal_rotate_rows_fanout(float* const* rows, Eigen::Index copies,
                                          Eigen::Index copy_stride, double* c, double* s,
                                          const double* step_c, const double* step_s,
                                          Eigen::Index n8,
                                          Eigen::Index i0, Eigen::Index half) {
  constexpr Eigen::Index kChunk = kSinusoidalFanoutChunk;
  alignas(64) float scratch[std::size_t{count}][2 * kChunk];
  float* scratch_rows[std::size_t{count}];
  for (int g = 0; g < count; ++g) scratch_rows[g] = scratch[g];
  for (Eigen::Index ic = 0; ic < n8; ic += kChunk) {
    const Eigen::Index m = n8 - ic < kChunk ? n8 - ic : kChunk;
    // Scratch row g: the chunk's m pairs laid out as a row of width 2m ([sc..] or two halves).
    sinusoidal_rotate_rows_simd<false, layout, count>(scratch_rows, c + ic, s + ic,
                                                      step_c + ic, step_s + ic, m, 0, m);
    // The two destination spans of the chunk and where they come from in the scratch row.
    const Eigen::Index first_col = layout == 0 ? 2 * (i0 + ic) : i0 + ic;
    const Eigen::Index second_col = layout == 0 ? first_col + m : half + i0 + ic;
    for (Eigen::Index k = 0; k < copies; ++k) {
      // The copies are far apart (a batch stride) and short: prefetch the next copy's spans
      // while this one is added, as the hardware prefetcher does not follow such jumps.
      const Eigen::Index ahead = k + 1 < copies ? copy_stride : 0;
      for (int g = 0; g < count; ++g) {
        float* row = rows[g] + k * copy_stride;
        const float* src = scratch[g];
        Eigen::Index j = 0;
#if defined(POSENC_SINUSOIDAL_SIMD512)
        for (; j + 16 <= m; j += 16) {
          _mm_prefetch(reinterpret_cast<const char*>(row + ahead + first_col + j), _MM_HINT_T0);
          _mm_prefetch(reinterpret_cast<const char*>(row + ahead + second_col + j), _MM_HINT_T0);
          sinusoidal_put16<accumulate>(row + first_col + j, _mm512_loadu_ps(src + j));
          sinusoidal_put16<accumulate>(row + second_col + j, _mm512_loadu_ps(src + m + j));
        }
#endif
        for (; j < m; j += 8) {
          if (j % 16 == 0) {  // one prefetch per 64-byte line
            _mm_prefetch(reinterpret_cast<const char*>(row + ahead + first_col + j), _MM_HINT_T0);
            _mm_prefetch(reinterpret_cast<const char*>(row + ahead + second_col + j), _MM_HINT_T0);
          }
          sinusoidal_put8<accumulate>(row + first_col + j, _mm256_load_ps(src + j));
          sinusoidal_put8<accumulate>(row + second_col + j, _mm256_load_ps(src + m + j));
        }
      }
    }
  }
}

#endif


}  // namespace posenc::detail
