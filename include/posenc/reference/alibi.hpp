#pragma once
/// \file posenc/reference/alibi.hpp
/// ALiBi slopes the way the paper's code builds them (ofirpress/attention_with_linear_biases,
/// fairseq/models/transformer.py `get_slopes`), in long double: a geometric sequence
/// start * ratio^i with start = ratio = 2^(-B/n) for a power-of-two n, and for other head
/// counts the recursion get_slopes(n) + get_slopes(2n)[0::2][:H - n]. A different route from
/// posenc::alibi_slopes (one exp2 per head), so the two check each other.

#include <cmath>
#include <vector>

#include <Eigen/Core>

#include "posenc/detail/fast_math_guard.hpp"

namespace posenc::reference {

/// Slopes for a power-of-two head count n: [start * ratio^i for i in range(n)].
inline std::vector<long double> alibi_slopes_power_of_2(Eigen::Index n, long double max_bias) {
  const long double start = std::pow(2.0L, -max_bias / static_cast<long double>(n));
  std::vector<long double> slopes;
  for (Eigen::Index i = 0; i < n; ++i) {
    slopes.push_back(start * std::pow(start, static_cast<long double>(i)));
  }
  return slopes;
}

/// The paper's get_slopes(H), generalised from 8 to max_bias (for B = 8, start = 2^(-8/n)).
inline std::vector<long double> alibi_slopes(Eigen::Index num_heads, long double max_bias = 8.0L) {
  Eigen::Index closest = 1;
  while (closest * 2 <= num_heads) closest *= 2;
  if (closest == num_heads) return alibi_slopes_power_of_2(num_heads, max_bias);
  std::vector<long double> slopes = alibi_slopes_power_of_2(closest, max_bias);
  const std::vector<long double> doubled = alibi_slopes(2 * closest, max_bias);
  for (Eigen::Index i = 0; i < num_heads - closest; ++i) {
    slopes.push_back(doubled[static_cast<std::size_t>(2 * i)]);
  }
  return slopes;
}

}  // namespace posenc::reference
