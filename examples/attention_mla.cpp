// DeepSeek's multi-head latent attention (DeepSeek-V2, arXiv:2405.04434 §2.1) both ways, and
// why the absorbed form is exact: with k_nope_h = W_UK_h c and v_h = W_UV_h c for the token's
// latent c,
//
//   q_nope_h . k_nope_h = (W_UK_h^T q_nope_h) . c          (absorb W_UK into the query)
//   sum_j p_j v_h,j     = W_UV_h (sum_j p_j c_j)            (apply W_UV after the attention)
//
// so every head can attend over the cached latent rows [c | k_pe] (values: their first
// kv_lora_rank elements) instead of its own 192-wide keys and 128-wide values.
//
//   heads 4, qk_nope 16 + qk_rope 8 (= 24, scale 1/sqrt(24)), v_head 16, kv_lora_rank 32;
//   6 tokens decoded one at a time, RoPE (interleaved) on q_pe / k_pe only.
//
// expect: values per token: unabsorbed 160, latent 40
// expect: absorbed == unabsorbed at every step (max |difference| < 1e-5): yes
// expect: with the latent row's own scale 1/sqrt(40) instead: differs by > 1e-3: yes

#include <posenc/kv_cache.hpp>
#include <posenc/rope_frequencies.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <vector>

int main() {
  constexpr Eigen::Index H = 4, nope = 16, rope = 8, dv = 16, rank = 32, steps = 6;
  constexpr Eigen::Index dqk = nope + rope, dlat = rank + rope;
  auto value = [](std::size_t i, double f) { return static_cast<float>(std::sin(f * static_cast<double>(i + 1))); };
  std::vector<float> w_uk(H * nope * rank), w_uv(H * dv * rank);  // [H][out][rank]
  for (std::size_t i = 0; i < w_uk.size(); ++i) w_uk[i] = 0.3f * value(i, 0.61);
  for (std::size_t i = 0; i < w_uv.size(); ++i) w_uv[i] = 0.3f * value(i, 0.43);

  // RoPE on the rope part: rotary_dim 8 at the end of a 24-wide (unabsorbed) or 40-wide
  // (latent) head.
  auto plan = [&](Eigen::Index head_dim) {
    posenc::RopeParams rp;
    rp.head_dim = head_dim;
    rp.rotary_dim = rope;
    rp.rotary_offset = head_dim - rope;
    rp.layout = posenc::RopeLayout::kInterleaved;
    return posenc::compute_rope_frequencies(rp);
  };
  posenc::KvCache<float> unabsorbed(1, steps, H, dqk, 0, dv);
  unabsorbed.set_rope(plan(dqk), posenc::RopeLayout::kInterleaved);
  auto latent = posenc::KvCache<float>::latent(1, steps, 1, dlat, rank);
  latent.set_rope(plan(dlat), posenc::RopeLayout::kInterleaved);
  std::printf("values per token: unabsorbed %ld, latent %ld\n",
              static_cast<long>(H * (dqk + dv)), static_cast<long>(dlat));

  posenc::AttentionParams scale_qk;
  scale_qk.scale = 1.0 / std::sqrt(static_cast<double>(dqk));  // DeepSeek's softmax_scale
  posenc::AttentionParams scale_row;
  scale_row.scale = 1.0 / std::sqrt(static_cast<double>(dlat));  // the mistake
  double max_diff = 0.0, wrong_scale_diff = 0.0;
  for (Eigen::Index t = 0; t < steps; ++t) {
    // This token's latent c, k_pe, and per-head q_nope, q_pe.
    std::vector<float> c(rank), k_pe(rope), q_nope(H * nope), q_pe(H * rope);
    for (Eigen::Index i = 0; i < rank; ++i) c[i] = value(t * 100 + i, 0.37);
    for (Eigen::Index i = 0; i < rope; ++i) k_pe[i] = value(t * 100 + i, 0.83);
    for (Eigen::Index i = 0; i < H * nope; ++i) q_nope[i] = value(t * 1000 + i, 0.29);
    for (Eigen::Index i = 0; i < H * rope; ++i) q_pe[i] = value(t * 1000 + i, 0.91);
    const std::int64_t pos = t;

    // Unabsorbed: k_h = [W_UK_h c | k_pe], v_h = W_UV_h c, q_h = [q_nope_h | q_pe_h].
    std::vector<float> k(H * dqk), v(H * dv), q(H * dqk), out(H * dv);
    for (Eigen::Index h = 0; h < H; ++h) {
      for (Eigen::Index o = 0; o < nope; ++o) {
        float s = 0.0f;
        for (Eigen::Index r = 0; r < rank; ++r) s += w_uk[(h * nope + o) * rank + r] * c[r];
        k[h * dqk + o] = s;
        q[h * dqk + o] = q_nope[h * nope + o];
      }
      for (Eigen::Index o = 0; o < dv; ++o) {
        float s = 0.0f;
        for (Eigen::Index r = 0; r < rank; ++r) s += w_uv[(h * dv + o) * rank + r] * c[r];
        v[h * dv + o] = s;
      }
      std::copy(k_pe.begin(), k_pe.end(), k.begin() + h * dqk + nope);
      std::copy(q_pe.begin() + h * rope, q_pe.begin() + (h + 1) * rope, q.begin() + h * dqk + nope);
    }
    unabsorbed.append(posenc::ConstTensorView<float, 4>(k.data(), 1, 1, H, dqk),
                      posenc::ConstTensorView<float, 4>(v.data(), 1, 1, H, dv),
                      posenc::PositionIdsView(&pos, 1, 1));
    unabsorbed.attend(posenc::ConstTensorView<float, 4>(q.data(), 1, 1, H, dqk),
                      posenc::TensorView<float, 4>(out.data(), 1, 1, H, dv), scale_qk);

    // Absorbed: the row [c | k_pe]; q_h = [W_UK_h^T q_nope_h | q_pe_h]; out_h = W_UV_h o_h.
    std::vector<float> row(dlat), qa(H * dlat), o(H * rank), o_wrong(H * rank);
    std::copy(c.begin(), c.end(), row.begin());
    std::copy(k_pe.begin(), k_pe.end(), row.begin() + rank);
    for (Eigen::Index h = 0; h < H; ++h) {
      for (Eigen::Index r = 0; r < rank; ++r) {
        float s = 0.0f;
        for (Eigen::Index i = 0; i < nope; ++i) s += w_uk[(h * nope + i) * rank + r] * q_nope[h * nope + i];
        qa[h * dlat + r] = s;
      }
      std::copy(q_pe.begin() + h * rope, q_pe.begin() + (h + 1) * rope, qa.begin() + h * dlat + rank);
    }
    latent.append_latent(posenc::ConstTensorView<float, 4>(row.data(), 1, 1, 1, dlat),
                         posenc::PositionIdsView(&pos, 1, 1));
    const posenc::ConstTensorView<float, 4> qv(qa.data(), 1, 1, H, dlat);
    latent.attend(qv, posenc::TensorView<float, 4>(o.data(), 1, 1, H, rank), scale_qk);
    latent.attend(qv, posenc::TensorView<float, 4>(o_wrong.data(), 1, 1, H, rank), scale_row);
    for (Eigen::Index h = 0; h < H; ++h) {
      for (Eigen::Index i = 0; i < dv; ++i) {
        float s = 0.0f, s_wrong = 0.0f;
        for (Eigen::Index r = 0; r < rank; ++r) {
          s += w_uv[(h * dv + i) * rank + r] * o[h * rank + r];
          s_wrong += w_uv[(h * dv + i) * rank + r] * o_wrong[h * rank + r];
        }
        const double ref = out[h * dv + i];
        max_diff = std::max(max_diff, std::abs(ref - s));
        wrong_scale_diff = std::max(wrong_scale_diff, std::abs(ref - s_wrong));
      }
    }
    std::printf("step %ld: head 0 out[0..3] unabsorbed %+.6f %+.6f %+.6f %+.6f\n",
                static_cast<long>(t), out[0], out[1], out[2], out[3]);
  }
  std::printf("absorbed == unabsorbed at every step (max |difference| < 1e-5): %s  (%.2e)\n",
              max_diff < 1e-5 ? "yes" : "no", max_diff);
  std::printf("with the latent row's own scale 1/sqrt(40) instead: differs by > 1e-3: %s  (%.2e)\n",
              wrong_scale_diff > 1e-3 ? "yes" : "no", wrong_scale_diff);
  return max_diff < 1e-5 ? 0 : 1;
}
