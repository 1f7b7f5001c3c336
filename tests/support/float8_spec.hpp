#pragma once
// The OCP FP8 formats written out from the specification (OCP 8-bit Floating Point
// Specification, 2023, section 5.3), independent of posenc/float8.hpp: each code's value as the
// closed form in long double, and the code of a value as the nearest one found by searching all
// 256 (ties to the even code, saturation at the largest finite value, as CUDA's SATFINITE).

#include <cmath>

namespace posenc_test::fp8 {

struct Spec {
  int exp_bits, man_bits, bias;
  bool ieee;  // top exponent reserved for inf / NaN (E5M2); E4M3FN has NaN = s1111111 only
};
constexpr Spec kE4M3{4, 3, 7, false};
constexpr Spec kE5M2{5, 2, 15, true};

inline bool spec_is_nan(const Spec& s, int code) {
  const int e = (code >> s.man_bits) & ((1 << s.exp_bits) - 1);
  const int m = code & ((1 << s.man_bits) - 1);
  if (s.ieee) return e == (1 << s.exp_bits) - 1 && m != 0;
  return (code & 0x7F) == 0x7F;
}
inline bool spec_is_inf(const Spec& s, int code) {
  const int e = (code >> s.man_bits) & ((1 << s.exp_bits) - 1);
  const int m = code & ((1 << s.man_bits) - 1);
  return s.ieee && e == (1 << s.exp_bits) - 1 && m == 0;
}
// OCP spec, section 5.3: (-1)^s 2^(e - bias) (1 + m 2^-M), subnormals 2^(1 - bias) (m 2^-M).
inline long double spec_value(const Spec& s, int code) {
  const int e = (code >> s.man_bits) & ((1 << s.exp_bits) - 1);
  const int m = code & ((1 << s.man_bits) - 1);
  const long double sign = (code & 0x80) ? -1.0L : 1.0L;
  const long double frac = static_cast<long double>(m) / static_cast<long double>(1 << s.man_bits);
  if (e == 0) return sign * std::pow(2.0L, 1 - s.bias) * frac;
  return sign * std::pow(2.0L, e - s.bias) * (1.0L + frac);
}

// The code of x: the nearest finite code (ties to the even code), |x| beyond the largest
// finite value saturating to it, NaN to NaN (checked by the caller).
inline int spec_nearest(const Spec& s, long double x) {
  int best = -1;
  long double best_dist = 0;
  long double max_finite = 0;
  int max_code = 0;
  for (int code = 0; code < 256; ++code) {
    if (spec_is_nan(s, code) || spec_is_inf(s, code)) continue;
    const long double v = spec_value(s, code);
    if (v == 0 && (code & 0x80) != (std::signbit(x) ? 0x80 : 0)) continue;  // keep the sign of 0
    if ((code & 0x80) == 0 && v > max_finite) {
      max_finite = v;
      max_code = code;
    }
    const long double dist = std::fabs(v - x);
    if (best < 0 || dist < best_dist || (dist == best_dist && (code & 1) == 0)) {
      best = code;
      best_dist = dist;
    }
  }
  if (std::fabs(x) >= max_finite) return max_code | (std::signbit(x) ? 0x80 : 0);
  return best;
}

}  // namespace posenc_test::fp8
