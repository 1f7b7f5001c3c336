// Dual chunk attention by hand (An et al. 2024; Qwen2.5-1M's dual_chunk_attention_config as
// vLLM runs it). chunk_size S = 6, local_size 2: chunks of c = 4 positions.
//
//   key at position k  is rotated at  k mod c
//   query at p meets   its own chunk's keys      rotated at  p mod c
//                      the chunk before's keys   rotated at  min(p mod c + c, S)
//                      every earlier key         rotated at  min(2c - 1, S)
//
// Query 9 (chunk 2, 9 mod 4 = 1) against keys 0-9: keys 8, 9 are its own chunk (q at 1, keys
// at 0, 1: distances 1, 0); keys 4-7 the chunk before (q at min(5, 6) = 5, keys at 0-3: 5 4 3
// 2, the true distances); keys 0-3 earlier (q at min(7, 6) = 6: 6 5 4 3). No rotated distance
// exceeds S = 6, where plain RoPE would rotate up to 9.
//
// With one pair turning at inv_freq 0.5 and q = k = (1, 0), a score is cos(0.5 x rotated
// distance), so the weights are exp(cos(0.5 D)) / sum — by hand from the distances above:
//
// expect: rotated distances of query 9 to keys 0-9: 6 5 4 3 5 4 3 2 1 0
// expect: DCA weights of query 9: 0.032 0.039 0.057 0.093 0.039 0.057 0.093 0.148 0.208 0.235
// expect: plain RoPE weights:     0.073 0.047 0.035 0.033 0.040 0.059 0.097 0.154 0.216 0.245
// expect: Qwen2.5-1M (L0 = 262144): length scale s(1000000) = 1 + 0.1 ln(1e6 / 262144) = 1.133886

#include <posenc/attention.hpp>
#include <posenc/dual_chunk_attention.hpp>

#include <cstdio>
#include <vector>

int main() {
  constexpr Eigen::Index n = 10;
  const posenc::DualChunkParams chunks{6, 2, 0};
  posenc::DualChunkPlan plan;
  plan.freqs.inv_freq = {0.5};
  plan.freqs.rotary_dim = 2;
  plan.freqs.head_dim = 2;
  plan.chunks = chunks;

  std::printf("rotated distances of query 9 to keys 0-9:");
  const std::int64_t p = 9, c = chunks.chunk_size - chunks.local_size;
  for (std::int64_t key = 0; key < n; ++key) {
    const auto part = key / c == p / c       ? posenc::DualChunkPart::kIntra
                      : key / c + 1 == p / c ? posenc::DualChunkPart::kSuccessive
                                             : posenc::DualChunkPart::kInter;
    std::printf(" %lld", static_cast<long long>(posenc::dual_chunk_query_position(p, part, chunks) -
                                                posenc::dual_chunk_key_position(key, chunks)));
  }
  std::printf("\n");

  // q = k = (1, 0) for every token; V rows are e_j, so the output row of a query is its weights.
  std::vector<float> q(n * 2), k(n * 2), v(n * n, 0.0f), out(n * n), plain(n * n);
  std::vector<std::int64_t> pos(n);
  for (Eigen::Index j = 0; j < n; ++j) {
    q[static_cast<std::size_t>(2 * j)] = k[static_cast<std::size_t>(2 * j)] = 1.0f;
    v[static_cast<std::size_t>(j * n + j)] = 1.0f;
    pos[static_cast<std::size_t>(j)] = j;
  }
  std::vector<float> k_dca = k;
  posenc::dual_chunk_rotate_keys_inplace<float>(posenc::TensorView<float, 4>(k_dca.data(), 1, n, 1, 2),
                                                posenc::PositionIdsView(pos.data(), 1, n), plan);
  posenc::AttentionParams unscaled;
  unscaled.scale = 1.0;  // logits are the cosines themselves
  posenc::dual_chunk_attention<float>(posenc::ConstTensorView<float, 4>(q.data(), 1, n, 1, 2),
                                      posenc::ConstTensorView<float, 4>(k_dca.data(), 1, n, 1, 2),
                                      posenc::ConstTensorView<float, 4>(v.data(), 1, n, 1, n),
                                      posenc::TensorView<float, 4>(out.data(), 1, n, 1, n), plan,
                                      unscaled);
  std::printf("DCA weights of query 9:");
  for (Eigen::Index j = 0; j < n; ++j) std::printf(" %.3f", static_cast<double>(out[9 * n + j]));
  std::printf("\n");

  // Plain RoPE at the true positions for comparison.
  std::vector<float> q_rot = q, k_rot = k;
  posenc::apply_rope_inplace<float>(posenc::TensorView<float, 4>(q_rot.data(), 1, n, 1, 2),
                                    posenc::PositionIdsView(pos.data(), 1, n), plan.freqs,
                                    plan.layout);
  posenc::apply_rope_inplace<float>(posenc::TensorView<float, 4>(k_rot.data(), 1, n, 1, 2),
                                    posenc::PositionIdsView(pos.data(), 1, n), plan.freqs,
                                    plan.layout);
  posenc::attention<float>(posenc::ConstTensorView<float, 4>(q_rot.data(), 1, n, 1, 2),
                           posenc::ConstTensorView<float, 4>(k_rot.data(), 1, n, 1, 2),
                           posenc::ConstTensorView<float, 4>(v.data(), 1, n, 1, n),
                           posenc::TensorView<float, 4>(plain.data(), 1, n, 1, n), unscaled);
  std::printf("plain RoPE weights:    ");
  for (Eigen::Index j = 0; j < n; ++j) std::printf(" %.3f", static_cast<double>(plain[9 * n + j]));
  std::printf("\n");

  const posenc::DualChunkParams qwen{262144, 8192, 262144};
  std::printf("Qwen2.5-1M (L0 = 262144): length scale s(1000000) = 1 + 0.1 ln(1e6 / 262144) = "
              "%.6f\n", posenc::dual_chunk_scaling_factor(1000000, qwen));
}
