// RoPE in three steps, with numbers from the seed articles (shared/seeds 000 §4.3-4.4).
//
// 1. The seed's apply_rope example: x [batch 1, heads 1, seq 3, head_dim 4], even/odd pairs
//    (RopeLayout::kInterleaved, [cscs]), base 10000 -> inv_freq = {1, 0.01}, positions 0, 1, 2.
//    Row p rotates pair (x0, x1) by p rad and pair (x2, x3) by 0.01 p rad:
//      row 1 = (0, 1) by 1 -> (-sin 1, cos 1);  (1, 0) by 0.01 -> (cos 0.01, sin 0.01)
//      row 2 = (1, 1) by 2 -> (cos 2 - sin 2, sin 2 + cos 2);  (0.5, -0.5) by 0.02
// expect: row 0:  1.000000  0.000000  0.000000  1.000000
// expect: row 1: -0.841471  0.540302  0.999950  0.010000
// expect: row 2: -1.325444  0.493151  0.509899 -0.489901
//
// 2. Relative positions (seed §4.3): one pair, w = 1, q = k = (1, 0):
//    <R(1)q, R(2)k> = cos(1 - 2) = cos 1, and the same after shifting both by 10.
// expect: <R(1)q, R(2)k> = 0.540302, <R(11)q, R(12)k> = 0.540302
//
// 3. Decode with a KV cache (seed §4.6): Q (32 heads) and K (8 heads, GQA) of token t rotated
//    alone at position offset t give the same values as row t of the full prefill.
// expect: decode at t = 100 matches prefill row 100: yes

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <vector>

#include <posenc/rope.hpp>

int main() {
  // --- 1. the seed tensor --------------------------------------------------------------------
  std::vector<float> x = {1.0f, 0.0f, 0.0f, 1.0f,    // position 0
                          0.0f, 1.0f, 1.0f, 0.0f,    // position 1
                          1.0f, 1.0f, 0.5f, -0.5f};  // position 2
  const std::int64_t pos[3] = {0, 1, 2};
  posenc::RopeParams params;
  params.head_dim = 4;
  params.layout = posenc::RopeLayout::kInterleaved;
  posenc::apply_rope_inplace<float>(posenc::TensorView<float, 4>(x.data(), 1, 1, 3, 4),
                                    posenc::PositionIdsView(pos, 1, 3), params,
                                    posenc::HeadLayout::kBHSD);
  for (int row = 0; row < 3; ++row) {
    std::printf("row %d: %9.6f %9.6f %9.6f %9.6f\n", row, x[4 * row], x[4 * row + 1],
                x[4 * row + 2], x[4 * row + 3]);
  }

  // --- 2. <R(m)q, R(n)k> depends on n - m only -----------------------------------------------
  posenc::RopeFrequencies unit;  // one pair, w = 1: built by hand, no planning needed
  unit.inv_freq = {1.0};
  unit.rotary_dim = 2;
  const auto rotated = [&](std::int64_t p) {
    std::vector<double> v = {1.0, 0.0};
    posenc::apply_rope_inplace<double>(posenc::TensorView<double, 4>(v.data(), 1, 1, 1, 2),
                                       posenc::PositionIdsView(&p, 1, 1), unit,
                                       posenc::RopeLayout::kInterleaved);
    return v;
  };
  const auto dot = [&](std::int64_t m, std::int64_t n) {
    const auto a = rotated(m), b = rotated(n);
    return a[0] * b[0] + a[1] * b[1];
  };
  std::printf("<R(1)q, R(2)k> = %.6f, <R(11)q, R(12)k> = %.6f\n", dot(1, 2), dot(11, 12));

  // --- 3. GQA prefill vs decode, from a cos/sin cache ----------------------------------------
  // Shapes: q [1, T, 32, 128], k [1, T, 8, 128] (BSHD), Llama-3.1 frequencies.
  const Eigen::Index T = 128, Hq = 32, Hk = 8, D = 128;
  posenc::RopeParams llama;
  llama.head_dim = D;
  llama.theta = 500000.0;
  llama.scaling.type = posenc::RopeScalingType::kLlama3;
  llama.scaling.factor = 8.0;
  llama.scaling.original_max_position_embeddings = 8192;
  const posenc::RopeFrequencies freqs = posenc::compute_rope_frequencies(llama);
  const posenc::Tensor<float, 2> cache = posenc::make_rope_cos_sin_cache(freqs, 4096);
  const posenc::ConstTensorView<float, 2> cos_sin(cache.data(), cache.dimension(0), D);

  std::vector<float> q(static_cast<std::size_t>(T * Hq * D)), k(static_cast<std::size_t>(T * Hk * D));
  for (std::size_t i = 0; i < q.size(); ++i) q[i] = std::sin(0.37f * static_cast<float>(i));
  for (std::size_t i = 0; i < k.size(); ++i) k[i] = std::cos(0.11f * static_cast<float>(i));
  const std::int64_t t = 100;
  std::vector<float> q_t(q.begin() + t * Hq * D, q.begin() + (t + 1) * Hq * D);
  std::vector<float> k_t(k.begin() + t * Hk * D, k.begin() + (t + 1) * Hk * D);

  // Prefill: positions 0 .. T-1, Q and K in one call.
  posenc::apply_rope_qk_inplace_cached<float>(
      posenc::rope_heads<float>(posenc::TensorView<float, 4>(q.data(), 1, T, Hq, D)),
      posenc::rope_heads<float>(posenc::TensorView<float, 4>(k.data(), 1, T, Hk, D)),
      posenc::RopePositions::contiguous(1, T), cos_sin, posenc::RopeLayout::kHalfSplit);
  // Decode: token t alone, positions start at t (the number of cached tokens).
  posenc::apply_rope_qk_inplace_cached<float>(
      posenc::rope_heads<float>(posenc::TensorView<float, 4>(q_t.data(), 1, 1, Hq, D)),
      posenc::rope_heads<float>(posenc::TensorView<float, 4>(k_t.data(), 1, 1, Hk, D)),
      posenc::RopePositions::contiguous(1, 1, t), cos_sin, posenc::RopeLayout::kHalfSplit);
  bool same = true;
  for (Eigen::Index i = 0; i < Hq * D; ++i) same = same && q_t[static_cast<std::size_t>(i)] == q[static_cast<std::size_t>(t * Hq * D + i)];
  for (Eigen::Index i = 0; i < Hk * D; ++i) same = same && k_t[static_cast<std::size_t>(i)] == k[static_cast<std::size_t>(t * Hk * D + i)];
  std::printf("decode at t = %lld matches prefill row %lld: %s\n", static_cast<long long>(t),
              static_cast<long long>(t), same ? "yes" : "NO");
  return same ? 0 : 1;
}
