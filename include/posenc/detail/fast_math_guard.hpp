#pragma once
/// \file posenc/detail/fast_math_guard.hpp
/// posenc refuses to compile under -ffast-math / -Ofast and the parts of them that change its
/// results, unless POSENC_ALLOW_FAST_MATH is defined. Measured with GCC 12 at -O2 on posenc's
/// tests (with -ffast-math test_attention failed 4 of 47 cases and test_float8 4 of 6; with
/// -ffast-math -fno-finite-math-only test_rope failed 25 of 58):
///  - -fassociative-math (with -fno-signed-zeros -fno-trapping-math, without which it does not
///    act: 22 of 58 RoPE cases failed): the range reduction of
///    the RoPE angles rounds k = rint(x 2/pi) as (y + 1.5 * 2^52) - 1.5 * 2^52, which it folds
///    to y (k = 6.366 for x = 10, not 6). sin / cos come out wrong: a rotated value 0.630
///    instead of -0.534, and attention with RoPE gave the output of attention without it;
///  - -ffinite-math-only: the input checks for NaN / inf (sink logits, the logit soft cap)
///    let such values through;
///  - -fno-signed-zeros (alone too): FP8 code 0x80 decoded to +0, not -0;
///  - linking with -ffast-math sets FTZ / DAZ for the whole process, which no header can see:
///    an attention weight of e^-720 (a subnormal) became 0.
/// -freciprocal-math alone is accepted: it changes last bits only, and the FP8 cache's tests
/// (the divisions by k_scale / v_scale) pass with it. GCC names each part with a macro; Clang
/// defines only __FAST_MATH__ and __FINITE_MATH_ONLY__, so there -fassociative-math alone is
/// not seen.

#if !defined(POSENC_ALLOW_FAST_MATH) &&                                              \
    (defined(__FAST_MATH__) || (defined(__FINITE_MATH_ONLY__) && __FINITE_MATH_ONLY__) || \
     defined(__ASSOCIATIVE_MATH__) || defined(__NO_SIGNED_ZEROS__))
#error "posenc: compiled with -ffast-math / -Ofast (or -ffinite-math-only, -fassociative-math, \
-fno-signed-zeros). These change posenc's results: RoPE's sin / cos \
come out wrong and NaN / inf inputs pass its checks (see \
posenc/detail/fast_math_guard.hpp). Compile the files that include posenc without them \
(e.g. -fno-fast-math), or define POSENC_ALLOW_FAST_MATH to accept unchecked results."
#endif
