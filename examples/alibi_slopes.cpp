// ALiBi by hand: the paper's slopes for 8 and 12 heads, the bias row of a decode step, and the
// seed article's worked example (content scores [1.0, 0.9, 0.8], slope 0.2, query at 2).
//
//   slopes:   n = largest power of two <= H;  m_h = 2^(-8 (h+1) / n) for h < n,
//             then every other slope of the 2n-head sequence
//   bias:     -m (pos_q - pos_k)  (causal),  -m |pos_q - pos_k|  (bidirectional)
//
// 8 heads: 2^-1 .. 2^-8. 12 heads: those 8, then slopes 1, 3, 5, 7 (1-based) of the 16-head
// sequence 2^(-h/2): 2^-0.5, 2^-1.5, 2^-2.5, 2^-3.5.
// expect: alibi_slopes(8): 0.500000 0.250000 0.125000 0.062500 0.031250 0.015625 0.007812 0.003906
// expect: alibi_slopes(12): 0.500000 0.250000 0.125000 0.062500 0.031250 0.015625 0.007812
// expect: 0.007812 0.003906 0.707107 0.353553 0.176777 0.088388
// The decode row: -0.25 (5 - j) for keys j = 0..5.
// expect: decode bias row (m = 0.25, query at 5): -1.25 -1.00 -0.75 -0.50 -0.25 0.00
// softmax([1.0, 0.9, 0.8]) = e^{-0.1 k} / (1 + e^-0.1 + e^-0.2); with the bias -0.2 (2 - j) the
// scores become [0.6, 0.7, 0.8], the same weights reversed.
// expect: without ALiBi weights: [0.367, 0.332, 0.301]
// expect: with ALiBi    weights: [0.301, 0.332, 0.367]

#include <posenc/alibi.hpp>
#include <posenc/attention.hpp>

#include <cstdint>
#include <cstdio>
#include <vector>

int main() {
  for (const Eigen::Index heads : {8, 12}) {
    const auto slopes = posenc::alibi_slopes(heads);
    std::printf("alibi_slopes(%ld):", static_cast<long>(heads));
    for (const double m : slopes) std::printf(" %.6f", m);
    std::printf("\n");
  }

  // Decode: one query at position 5 against cached keys 0..5 gives -m (5 - j), not zeros.
  const std::vector<double> slope = {0.25};
  const std::vector<std::int64_t> qpos = {5}, kpos = {0, 1, 2, 3, 4, 5};
  std::vector<float> bias(6);
  posenc::alibi_bias<float>(slope, posenc::ConstTensorView<std::int64_t, 1>(qpos.data(), 1),
                            posenc::ConstTensorView<std::int64_t, 1>(kpos.data(), 6),
                            posenc::MaskMode::kCausal, posenc::TensorView<float, 3>(bias.data(), 1, 1, 6));
  std::printf("decode bias row (m = 0.25, query at 5):");
  for (const float b : bias) std::printf(" %.2f", static_cast<double>(b));
  std::printf("\n");

  // The seed's example through the fused kernel: d = 3, q = e0, k_j = s_j e0, v_j = e_j, so the
  // output row is the attention weights.
  const float s[3] = {1.0f, 0.9f, 0.8f};
  std::vector<float> q = {1, 0, 0}, k(9, 0.0f), v(9, 0.0f), out(3);
  for (int j = 0; j < 3; ++j) {
    k[static_cast<std::size_t>(3 * j)] = s[j];
    v[static_cast<std::size_t>(4 * j)] = 1.0f;
  }
  const std::vector<std::int64_t> qp = {2}, kp = {0, 1, 2};
  posenc::AttentionMetadata meta;
  meta.query_positions = posenc::PositionIdsView(qp.data(), 1, 1);
  meta.key_positions = posenc::PositionIdsView(kp.data(), 1, 3);
  for (const bool alibi : {false, true}) {
    posenc::AttentionParams params;
    params.scale = 1.0;
    if (alibi) params.alibi_slopes = {0.2};
    posenc::attention<float>(posenc::ConstTensorView<float, 4>(q.data(), 1, 1, 1, 3),
                             posenc::ConstTensorView<float, 4>(k.data(), 1, 3, 1, 3),
                             posenc::ConstTensorView<float, 4>(v.data(), 1, 3, 1, 3),
                             posenc::TensorView<float, 4>(out.data(), 1, 1, 1, 3), params, meta);
    std::printf("%s weights: [%.3f, %.3f, %.3f]\n", alibi ? "with ALiBi   " : "without ALiBi",
                static_cast<double>(out[0]), static_cast<double>(out[1]), static_cast<double>(out[2]));
  }
  std::printf("(biased scores [0.6, 0.7, 0.8]: softmax = [0.301, 0.332, 0.367]; the seed's\n"
              " [0.269, 0.299, 0.332] sums to 0.9 and is a typo)\n");
  return 0;
}
