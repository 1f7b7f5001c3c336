#pragma once
/// \file posenc/reference/sinusoidal.hpp
/// Obviously-correct long-double sinusoidal encodings: the oracle the fast kernels are tested
/// against. No recurrence, no blocking: each element straight from the formula.

#include <cmath>
#include <cstdint>

#include "posenc/sinusoidal.hpp"

namespace posenc::reference {

/// w_i in long double, written from the papers' formulas independently of the fast path.
inline long double sinusoidal_frequency(Eigen::Index i, Eigen::Index d,
                                        const SinusoidalParams& params) {
  const long double base = static_cast<long double>(params.base);
  const long double half = static_cast<long double>(d / 2);
  const long double ii = static_cast<long double>(i);
  switch (params.layout) {
    case SinusoidalLayout::kInterleaved:
      return 1.0L / std::pow(base, 2.0L * ii / static_cast<long double>(d));
    case SinusoidalLayout::kSinCos: return std::exp(-std::log(base) * ii / (half - 1.0L));
    case SinusoidalLayout::kCosSin: return std::exp(-std::log(base) * ii / half);
    case SinusoidalLayout::kSinCosVaswani:
      return 1.0L / std::pow(base, ii / half);
  }
  return 0.0L;
}

/// PE(position)[k] in long double.
inline long double sinusoidal_value(long double position, Eigen::Index k, Eigen::Index d,
                                    const SinusoidalParams& params) {
  const Eigen::Index half = d / 2;
  switch (params.layout) {
    case SinusoidalLayout::kInterleaved: {
      const long double a = position * sinusoidal_frequency(k / 2, d, params);
      return k % 2 == 0 ? std::sin(a) : std::cos(a);
    }
    case SinusoidalLayout::kSinCos:
    case SinusoidalLayout::kSinCosVaswani: {
      const long double a = position * sinusoidal_frequency(k % half, d, params);
      return k < half ? std::sin(a) : std::cos(a);
    }
    case SinusoidalLayout::kCosSin: {
      const long double a = position * sinusoidal_frequency(k % half, d, params);
      return k < half ? std::cos(a) : std::sin(a);
    }
  }
  return 0.0L;
}

}  // namespace posenc::reference
