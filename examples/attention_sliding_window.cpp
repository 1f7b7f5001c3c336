// Sliding-window attention and Gemma-2's logit soft cap by hand.
//
//   window:   query i (slot a = i + k_len - q_len) keeps key j iff a - j < W   (causal)
//             = HF's kv_idx > q_idx - sliding_window: W keys, the query's own included
//   soft cap: s -> c tanh(s / c) on scale q.k, before the mask
//
// With every key equal to 0 the scores are all 0, so a query's weights are uniform over the keys
// it may see; with V rows e_j the output row *is* the weights. The soft-cap part reuses the
// ALiBi example's trick: q = e0, k_j = s_j e0, v_j = e_j, scale 1.
//
// expect: query 1 weights (W = 3): 0.500 0.500 0.000 0.000 0.000 0.000
// expect: query 5 weights (W = 3): 0.000 0.000 0.000 0.333 0.333 0.333
// expect: decode at slot 5, W = 3: 0.000 0.000 0.000 0.333 0.333 0.333
// expect: rolling 4-slot cache, W = 3, token 5: 0.000 0.000 0.000 0.333 0.333 0.333 (holds tokens 2-5)
// expect: scores [3, 0, -3], no cap:    [0.950, 0.047, 0.002]
// expect: scores [3, 0, -3], cap c = 2: [0.840, 0.137, 0.022]

#include <posenc/attention.hpp>
#include <posenc/kv_cache.hpp>

#include <cstdio>
#include <vector>

int main() {
  constexpr Eigen::Index n = 6;
  std::vector<float> q(n * n, 0.0f), k(n * n, 0.0f), v(n * n, 0.0f), out(n * n);
  for (Eigen::Index j = 0; j < n; ++j) v[static_cast<std::size_t>(j * n + j)] = 1.0f;
  posenc::AttentionParams params;
  params.sliding_window = 3;

  // Prefill of 6 tokens: query 1 sees slots 0-1 (fewer than W exist), query 5 sees slots 3-5.
  posenc::attention<float>(posenc::ConstTensorView<float, 4>(q.data(), 1, n, 1, n),
                           posenc::ConstTensorView<float, 4>(k.data(), 1, n, 1, n),
                           posenc::ConstTensorView<float, 4>(v.data(), 1, n, 1, n),
                           posenc::TensorView<float, 4>(out.data(), 1, n, 1, n), params);
  for (const Eigen::Index i : {1, 5}) {
    std::printf("query %ld weights (W = 3):", static_cast<long>(i));
    for (Eigen::Index j = 0; j < n; ++j) {
      std::printf(" %.3f", static_cast<double>(out[static_cast<std::size_t>(i * n + j)]));
    }
    std::printf("\n");
  }
  // Decode: one query against the 6 cached slots is bottom-right aligned (slot 5), so it keeps
  // slots 3, 4, 5 -- the same row as the prefill's last query.
  std::vector<float> one(n);
  posenc::attention<float>(posenc::ConstTensorView<float, 4>(q.data(), 1, 1, 1, n),
                           posenc::ConstTensorView<float, 4>(k.data(), 1, n, 1, n),
                           posenc::ConstTensorView<float, 4>(v.data(), 1, n, 1, n),
                           posenc::TensorView<float, 4>(one.data(), 1, 1, 1, n), params);
  std::printf("decode at slot 5, W = 3:");
  for (const float w : one) std::printf(" %.3f", static_cast<double>(w));
  std::printf("\n");

  // The same decode through a rolling cache of 4 slots (KvCache's 5th argument W = 3): tokens
  // go in one at a time; token 4 finds the cache full, so it keeps the newest W - 1 = 2 slots
  // (tokens 2, 3) and drops 0 and 1. Token 5 then sees tokens 3-5, as without the cache. Its
  // output row is indexed by token, from the V rows e_token.
  posenc::KvCache<float> rolling(1, 4, 1, n, 3);
  for (Eigen::Index t = 0; t < n; ++t) {
    const std::int64_t position = t;
    rolling.append(posenc::ConstTensorView<float, 4>(k.data() + t * n, 1, 1, 1, n),
                   posenc::ConstTensorView<float, 4>(v.data() + t * n, 1, 1, 1, n),
                   posenc::PositionIdsView(&position, 1, 1));
    rolling.attend(posenc::ConstTensorView<float, 4>(q.data(), 1, 1, 1, n),
                   posenc::TensorView<float, 4>(one.data(), 1, 1, 1, n), params);
  }
  std::printf("rolling 4-slot cache, W = 3, token 5:");
  for (const float w : one) std::printf(" %.3f", static_cast<double>(w));
  std::printf(" (holds tokens %ld-%ld)\n", static_cast<long>(rolling.evicted()),
              static_cast<long>(rolling.evicted() + rolling.size() - 1));

  // Soft cap: scores 3, 0, -3 become 2 tanh(1.5) = 1.8103, 0, -1.8103, whose softmax is
  // e^1.8103 / (e^1.8103 + 1 + e^-1.8103) = 6.1123 / 7.2760 = 0.840, then 0.137 and 0.022.
  const float s[3] = {3.0f, 0.0f, -3.0f};
  std::vector<float> q3 = {1, 0, 0}, k3(9, 0.0f), v3(9, 0.0f), o3(3);
  for (int j = 0; j < 3; ++j) {
    k3[static_cast<std::size_t>(3 * j)] = s[j];
    v3[static_cast<std::size_t>(4 * j)] = 1.0f;
  }
  for (const double cap : {0.0, 2.0}) {
    posenc::AttentionParams p;
    p.mask = posenc::MaskMode::kBidirectional;
    p.scale = 1.0;
    p.logit_softcap = cap;
    posenc::attention<float>(posenc::ConstTensorView<float, 4>(q3.data(), 1, 1, 1, 3),
                             posenc::ConstTensorView<float, 4>(k3.data(), 1, 3, 1, 3),
                             posenc::ConstTensorView<float, 4>(v3.data(), 1, 3, 1, 3),
                             posenc::TensorView<float, 4>(o3.data(), 1, 1, 1, 3), p);
    std::printf("scores [3, 0, -3], %s [%.3f, %.3f, %.3f]\n", cap > 0 ? "cap c = 2:" : "no cap:   ",
                static_cast<double>(o3[0]), static_cast<double>(o3[1]), static_cast<double>(o3[2]));
  }
  return 0;
}
