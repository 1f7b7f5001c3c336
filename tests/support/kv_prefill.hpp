#pragma once
// A prompt whose Q / K the test rotated itself (M-RoPE, XD-RoPE), prefilled into a KvCache
// that has no plan: the keys go in at slots 0 .. n - 1 (positions = token index, which the
// causal mask reads), then the prompt's queries attend.

#include <posenc/kv_cache.hpp>

#include <cstdint>
#include <vector>

namespace posenc_test {

/// k / v: [1, n, kv_heads, d], q: [1, n, heads, d], all already rotated as the model wants;
/// returns out [1, n, heads, d].
inline std::vector<float> prefill_rotated(posenc::KvCache<float>& cache, const float* q, const float* k,
                                          const float* v, Eigen::Index n, Eigen::Index heads,
                                          Eigen::Index kv_heads, Eigen::Index d) {
  std::vector<std::int64_t> index(static_cast<std::size_t>(n));
  for (Eigen::Index i = 0; i < n; ++i) index[static_cast<std::size_t>(i)] = i;
  cache.append(posenc::ConstTensorView<float, 4>(k, 1, n, kv_heads, d), posenc::ConstTensorView<float, 4>(v, 1, n, kv_heads, d),
               posenc::PositionIdsView(index.data(), 1, n));
  std::vector<float> out(static_cast<std::size_t>(n * heads * d));
  cache.attend(posenc::ConstTensorView<float, 4>(q, 1, n, heads, d), posenc::TensorView<float, 4>(out.data(), 1, n, heads, d));
  return out;
}

}  // namespace posenc_test
