#pragma once
// One query row of attention written out in long double, the independent expectation of the
// tests: softmax(scale q.k + bias) V over the listed keys.

#include <Eigen/Core>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace posenc_test {

/// q: d values; key m is row keys[m] of k / v (rows kv_row elements apart, d / d values read);
/// bias: one per listed key, or empty for none.
inline std::vector<long double> attend_ld(const float* q, const float* k, const float* v,
                                          Eigen::Index kv_row, Eigen::Index d,
                                          const std::vector<Eigen::Index>& keys,
                                          const std::vector<long double>& bias, long double scale) {
  std::vector<long double> w(keys.size());
  long double top = -std::numeric_limits<long double>::infinity();
  for (std::size_t m = 0; m < keys.size(); ++m) {
    long double dot = 0.0L;
    for (Eigen::Index c = 0; c < d; ++c) dot += static_cast<long double>(q[c]) * k[keys[m] * kv_row + c];
    w[m] = scale * dot + (bias.empty() ? 0.0L : bias[m]);
    top = std::max(top, w[m]);
  }
  long double sum = 0.0L;
  for (auto& x : w) sum += (x = std::exp(x - top));
  std::vector<long double> out(static_cast<std::size_t>(d), 0.0L);
  for (std::size_t m = 0; m < keys.size(); ++m) {
    for (Eigen::Index c = 0; c < d; ++c) out[static_cast<std::size_t>(c)] += w[m] / sum * v[keys[m] * kv_row + c];
  }
  return out;
}

}  // namespace posenc_test
