// KV-cache decode with the right position offsets (seed 000 §13.3), and what a wrong one does.
//
//   batch 1, prefill n = 5 tokens, then m = 3 decode steps of one token (8 tokens in all)
//   q [1, 8, heads 4, head_dim 8], k, v [1, 8, kv_heads 2, head_dim 8] (BSHD, GQA: query
//   heads 0-1 read kv head 0, heads 2-3 kv head 1), entries uniform in [-1, 1) (splitmix64)
//   causal attention, scale 1/sqrt(8); "full forward" = one call over all 8 tokens.
//
// 1. RoPE (theta 10000, half-split pairs). With T tokens cached, the new token is at position
//    T: prefill positions 0..4, decode positions 5, 6, 7. posenc::KvCache stores keys rotated
//    at their position and rotates each decode query at its own; the outputs then equal the
//    rows 5..7 of the full forward up to float rounding (< 1e-5).
// expect: decode at position t = cache length: max |decode - full forward| < 1e-5: yes
//    Restarting every decode token at position 0 (the seed's warning) rotates it as if it
//    opened the sequence: relative to the cached keys its distances are wrong. Being off by
//    one (position t + 1, e.g. the cache length read after the append) is wrong too.
// expect: decode at position 0: max |decode - full forward| > 1e-3: yes
// expect: decode at position t + 1: max |decode - full forward| > 1e-3: yes
//
// 2. ALiBi (slopes 1/4, 1/16, 1/64, 1/256): the bias of the query at t = 7 against keys 0..7
//    is -m (7 - j); for head 0 (m = 1/4):
// expect: bias row, head 0, query at 7: -1.75 -1.50 -1.25 -1.00 -0.75 -0.50 -0.25 0.00
//    Built from the query length instead (keras-hub #2861: positions arange(q_len) = {0} for
//    a one-token decode step), the bias is the single entry -m (0 - 0) = 0, broadcast over all
//    keys: the decode step loses its distance penalty.
// expect: bias row built from q_len = 1: 0.00 0.00 0.00 0.00 0.00 0.00 0.00 0.00
// expect: ALiBi, positions from the cache: max |decode - full forward| < 1e-5: yes
// expect: ALiBi, bias from the query length: max |decode - full forward| > 1e-3: yes
//
// 3. Causal attention with RoPE, materialised by posenc::reference::attention (double):
//    every weight of a future key (j > i) is exactly 0.0 and every row sums to 1. Only
//    differences of positions matter: the same weights come back with positions 100..107.
//    Query 0 sees only key 0, so its row is one 1 and seven 0s:
// expect: row 0: 1.0000 0.0000 0.0000 0.0000 0.0000 0.0000 0.0000 0.0000
// expect: future weights (j > i) exactly 0.0 in all 4 heads x 8 rows: yes
// expect: every row sums to 1 (|sum - 1| < 1e-12): yes
// expect: weights with positions 100..107 equal those with 0..7 (< 1e-9): yes

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <vector>

#include <posenc/alibi.hpp>
#include <posenc/attention.hpp>
#include <posenc/attention_rope.hpp>
#include <posenc/kv_cache.hpp>
#include <posenc/reference/attention.hpp>
#include <posenc/rope.hpp>
#include <posenc/rope_frequencies.hpp>

namespace {

constexpr Eigen::Index S = 8, PREFILL = 5, H = 4, KH = 2, D = 8;

std::uint64_t g_state = 7;  // splitmix64: the same numbers on every compiler and library
float uniform() {           // [-1, 1)
  std::uint64_t z = (g_state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  z ^= z >> 31;
  return static_cast<float>(-1.0 + 2.0 * static_cast<double>(z >> 11) * 0x1.0p-53);
}

bool g_ok = true;
void verdict(const char* label, double diff, bool expect_equal) {
  const bool ok = expect_equal ? diff < 1e-5 : diff > 1e-3;
  g_ok = g_ok && ok;
  std::printf("%s: max |decode - full forward| %s: %s   (%.2e)\n", label,
              expect_equal ? "< 1e-5" : "> 1e-3", ok ? "yes" : "NO", diff);
}

// Rows [s0, s0 + len) of a [1, S, heads, D] tensor, as a new [1, len, heads, D] buffer.
std::vector<float> rows(const std::vector<float>& x, Eigen::Index heads, Eigen::Index s0, Eigen::Index len) {
  return {x.begin() + s0 * heads * D, x.begin() + (s0 + len) * heads * D};
}

}  // namespace

int main() {
  std::vector<float> q(S * H * D), k(S * KH * D), v(S * KH * D);
  for (auto* t : {&q, &k, &v})
    for (auto& e : *t) e = uniform();
  using CView = posenc::ConstTensorView<float, 4>;
  using View = posenc::TensorView<float, 4>;
  posenc::RopeParams rp;
  rp.head_dim = D;
  const posenc::RopeFrequencies freqs = posenc::compute_rope_frequencies(rp);
  const auto layout = posenc::RopeLayout::kHalfSplit;
  const std::vector<double> slopes = posenc::alibi_slopes(H);  // 1/4, 1/16, 1/64, 1/256

  // Prefill tokens 0..4 at positions 0..4 through a fresh cache, then decode 5, 6, 7 one at a
  // time at decode_pos(t); returns max |cache output - full| over all 8 rows.
  auto run_cache = [&](bool rope, const posenc::AttentionParams& prefill_params,
                       const posenc::AttentionParams& decode_params,
                       const std::function<std::int64_t(std::int64_t)>& decode_pos,
                       const std::vector<float>& full) {
    posenc::KvCache<float> cache(1, S, KH, D);
    if (rope) cache.set_rope(freqs, layout);
    double diff = 0.0;
    auto step = [&](Eigen::Index s0, Eigen::Index len, const std::vector<std::int64_t>& pos,
                    const posenc::AttentionParams& params) {
      const auto ks = rows(k, KH, s0, len), vs = rows(v, KH, s0, len), qs = rows(q, H, s0, len);
      std::vector<float> out(qs.size());
      cache.append(CView(ks.data(), 1, len, KH, D), CView(vs.data(), 1, len, KH, D),
                   posenc::PositionIdsView(pos.data(), 1, len));
      cache.attend(CView(qs.data(), 1, len, H, D), View(out.data(), 1, len, H, D), params);
      for (std::size_t i = 0; i < out.size(); ++i)
        diff = std::max(diff, static_cast<double>(std::abs(out[i] - full[s0 * H * D + i])));
    };
    step(0, PREFILL, {0, 1, 2, 3, 4}, prefill_params);
    for (std::int64_t t = PREFILL; t < S; ++t) step(t, 1, {decode_pos(t)}, decode_params);
    return diff;
  };

  // --- 1. RoPE ---------------------------------------------------------------------------------
  posenc::AttentionParams causal;  // kCausal, scale 1/sqrt(8)
  std::vector<float> full_rope(q.size());
  posenc::attention_with_rope<float>(CView(q.data(), 1, S, H, D), CView(k.data(), 1, S, KH, D),
                                     CView(v.data(), 1, S, KH, D), View(full_rope.data(), 1, S, H, D),
                                     freqs, layout, causal);  // positions 0..7
  std::printf("1. RoPE: prefill positions 0..4, decode 3 tokens\n");
  verdict("decode at position t = cache length",
          run_cache(true, causal, causal, [](std::int64_t t) { return t; }, full_rope), true);
  verdict("decode at position 0",
          run_cache(true, causal, causal, [](std::int64_t) { return 0; }, full_rope), false);
  verdict("decode at position t + 1",
          run_cache(true, causal, causal, [](std::int64_t t) { return t + 1; }, full_rope), false);

  // --- 2. ALiBi --------------------------------------------------------------------------------
  std::printf("\n2. ALiBi: slopes %g %g %g %g\n", slopes[0], slopes[1], slopes[2], slopes[3]);
  const std::vector<std::int64_t> keys = {0, 1, 2, 3, 4, 5, 6, 7}, at7 = {7}, arange_q = {0};
  std::vector<float> bias(H * S), short_bias(H);
  posenc::alibi_bias<float>(slopes, posenc::ConstTensorView<std::int64_t, 1>(at7.data(), 1),
                            posenc::ConstTensorView<std::int64_t, 1>(keys.data(), S),
                            posenc::MaskMode::kCausal, posenc::TensorView<float, 3>(bias.data(), H, 1, S));
  posenc::alibi_bias<float>(slopes, posenc::ConstTensorView<std::int64_t, 1>(arange_q.data(), 1),
                            posenc::ConstTensorView<std::int64_t, 1>(arange_q.data(), 1),
                            posenc::MaskMode::kCausal, posenc::TensorView<float, 3>(short_bias.data(), H, 1, 1));
  std::printf("bias row, head 0, query at 7:");
  for (Eigen::Index j = 0; j < S; ++j) std::printf(" %.2f", static_cast<double>(bias[j]));
  std::printf("\nbias row built from q_len = 1:");  // [1, 1] broadcast over the 8 keys
  for (Eigen::Index j = 0; j < S; ++j) std::printf(" %.2f", static_cast<double>(short_bias[0]) + 0.0);
  std::printf("\n");

  posenc::AttentionParams alibi = causal, no_bias = causal;
  alibi.alibi_slopes = slopes;
  std::vector<float> full_alibi(q.size());
  posenc::attention<float>(CView(q.data(), 1, S, H, D), CView(k.data(), 1, S, KH, D),
                           CView(v.data(), 1, S, KH, D), View(full_alibi.data(), 1, S, H, D), alibi);
  const auto same_pos = [](std::int64_t t) { return t; };
  verdict("ALiBi, positions from the cache", run_cache(false, alibi, alibi, same_pos, full_alibi), true);
  // The all-zero bias row of the bug is exactly attention without ALiBi for the decode steps.
  verdict("ALiBi, bias from the query length", run_cache(false, alibi, no_bias, same_pos, full_alibi), false);

  // --- 3. the weights of causal attention with RoPE ----------------------------------------------
  auto rope_weights = [&](std::int64_t first) {
    std::vector<double> qd(q.begin(), q.end()), kd(k.begin(), k.end()), vd(v.begin(), v.end()),
        out(q.size()), w(H * S * S);
    std::vector<std::int64_t> pos(S);
    for (Eigen::Index i = 0; i < S; ++i) pos[i] = first + i;
    const posenc::PositionIdsView ids(pos.data(), 1, S);
    posenc::apply_rope_inplace<double>(posenc::TensorView<double, 4>(qd.data(), 1, S, H, D), ids, freqs, layout);
    posenc::apply_rope_inplace<double>(posenc::TensorView<double, 4>(kd.data(), 1, S, KH, D), ids, freqs, layout);
    posenc::reference::attention<double>(
        posenc::ConstTensorView<double, 4>(qd.data(), 1, S, H, D),
        posenc::ConstTensorView<double, 4>(kd.data(), 1, S, KH, D),
        posenc::ConstTensorView<double, 4>(vd.data(), 1, S, KH, D),
        posenc::TensorView<double, 4>(out.data(), 1, S, H, D), causal, {},
        posenc::TensorView<double, 4>(w.data(), 1, H, S, S));
    return w;  // [head, i, j]
  };
  const auto w = rope_weights(0), w100 = rope_weights(100);
  std::printf("\n3. causal attention with RoPE, weights of head 0 (row i = query at position i):\n");
  bool future_zero = true, sums_one = true;
  double shift_diff = 0.0;
  for (Eigen::Index h = 0; h < H; ++h) {
    for (Eigen::Index i = 0; i < S; ++i) {
      double sum = 0.0;
      if (h == 0) std::printf("  row %ld:", static_cast<long>(i));
      for (Eigen::Index j = 0; j < S; ++j) {
        const double x = w[(h * S + i) * S + j];
        sum += x;
        if (j > i) future_zero = future_zero && x == 0.0;
        shift_diff = std::max(shift_diff, std::abs(x - w100[(h * S + i) * S + j]));
        if (h == 0) std::printf(" %.4f", x);
      }
      if (h == 0) std::printf("\n");
      sums_one = sums_one && std::abs(sum - 1.0) < 1e-12;
    }
  }
  std::printf("future weights (j > i) exactly 0.0 in all 4 heads x 8 rows: %s\n", future_zero ? "yes" : "NO");
  std::printf("every row sums to 1 (|sum - 1| < 1e-12): %s\n", sums_one ? "yes" : "NO");
  std::printf("weights with positions 100..107 equal those with 0..7 (< 1e-9): %s   (%.2e)\n",
              shift_diff < 1e-9 ? "yes" : "NO", shift_diff);
  return g_ok && future_zero && sums_one && shift_diff < 1e-9 ? 0 : 1;
}
