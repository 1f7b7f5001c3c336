// Attention states: the log-sum-exp output of attention() against a long-double computation of
// each row's logits, and merge_attention_state_inplace: split-K decode and a shared prefix
// attended once for a whole batch (cascade attention) must equal one attention over all keys;
// closed-form merges of single-key parts; empty parts; errors that write nothing.

#include <catch2/catch.hpp>

#include <posenc/alibi.hpp>
#include <posenc/attention.hpp>
#include <posenc/attention_merge.hpp>
#include <posenc/reference/attention.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "support/check.hpp"
#include "support/rng.hpp"

using Catch::Matchers::Contains;
using Catch::Matchers::WithinAbs;
using posenc::AttentionMetadata;
using posenc::AttentionParams;
using posenc::ConstTensorView;
using posenc::MaskMode;
using posenc::TensorView;

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

struct Sizes {
  Eigen::Index batch, q_len, k_len, heads, kv_heads, d;
};

/// log(sum_j exp(s_j) [+ exp(sink_h)]) of row (b, i, h) in long double, from the logits'
/// definition: s_j = scale q.k_j, soft-capped, plus ALiBi from the default positions
/// (query a = i + k_len - q_len, key j); keys outside the causal limit or the window excluded.
long double expected_lse(const Sizes& z, const std::vector<float>& q, const std::vector<float>& k,
                         const AttentionParams& params, Eigen::Index b, Eigen::Index i,
                         Eigen::Index h) {
  const Eigen::Index g = h / (z.heads / z.kv_heads), a = i + z.k_len - z.q_len;
  const long double scale = 1.0L / std::sqrt(static_cast<long double>(z.d));
  long double total = params.sink_logits.empty()
                          ? 0.0L
                          : std::exp(static_cast<long double>(params.sink_logits[static_cast<std::size_t>(h)]));
  for (Eigen::Index j = 0; j < z.k_len; ++j) {
    if (params.mask == MaskMode::kCausal && j > a) continue;
    if (params.sliding_window > 0 && (a - j >= params.sliding_window || j - a >= params.sliding_window)) continue;
    long double s = 0.0L;
    for (Eigen::Index c = 0; c < z.d; ++c) {
      s += static_cast<long double>(q[static_cast<std::size_t>(((b * z.q_len + i) * z.heads + h) * z.d + c)]) *
           static_cast<long double>(k[static_cast<std::size_t>(((b * z.k_len + j) * z.kv_heads + g) * z.d + c)]);
    }
    s *= scale;
    if (params.logit_softcap > 0.0) {
      const long double cap = params.logit_softcap;
      s = cap * std::tanh(s / cap);
    }
    if (!params.alibi_slopes.empty()) {
      const long double dist = static_cast<long double>(a - j);
      s -= static_cast<long double>(params.alibi_slopes[static_cast<std::size_t>(h)]) * std::abs(dist);
    }
    total += std::exp(s);
  }
  return std::log(total);  // log(0) = -inf: no visible key
}

std::vector<float> random(std::size_t n, std::uint64_t seed, float amplitude = 1.0f) {
  auto x = posenc_test::random_vector<float>(n, seed);
  for (float& e : x) e *= amplitude;
  return x;
}

/// One attention call returning (out, lse).
struct State {
  std::vector<float> out, lse;
};
State attend(const Sizes& z, const float* q, const float* k, const float* v, const AttentionParams& params,
             const AttentionMetadata& meta = {}) {
  State s{std::vector<float>(static_cast<std::size_t>(z.batch * z.q_len * z.heads * z.d), -3.0f),
          std::vector<float>(static_cast<std::size_t>(z.batch * z.q_len * z.heads), -3.0f)};
  posenc::attention<float>(ConstTensorView<float, 4>(q, z.batch, z.q_len, z.heads, z.d),
                           ConstTensorView<float, 4>(k, z.batch, z.k_len, z.kv_heads, z.d),
                           ConstTensorView<float, 4>(v, z.batch, z.k_len, z.kv_heads, z.d),
                           TensorView<float, 4>(s.out.data(), z.batch, z.q_len, z.heads, z.d),
                           TensorView<float, 3>(s.lse.data(), z.batch, z.q_len, z.heads), params, meta);
  return s;
}

void merge(const Sizes& z, State& into, const State& other) {
  posenc::merge_attention_state_inplace<float>(
      TensorView<float, 4>(into.out.data(), z.batch, z.q_len, z.heads, z.d),
      TensorView<float, 3>(into.lse.data(), z.batch, z.q_len, z.heads),
      ConstTensorView<float, 4>(other.out.data(), z.batch, z.q_len, z.heads, z.d),
      ConstTensorView<float, 3>(other.lse.data(), z.batch, z.q_len, z.heads));
}

posenc_test::CloseReport close(const std::vector<float>& a, const std::vector<float>& b, double tol) {
  return posenc_test::compare(
      a.size(), [&](std::size_t i) { return static_cast<double>(a[i]); },
      [&](std::size_t i) { return static_cast<double>(b[i]); }, tol);
}

}  // namespace

TEST_CASE("attention lse: each row's log-sum-exp equals the long-double one of its logits",
          "[attention][lse]") {
  const Sizes z = GENERATE(Sizes{1, 130, 130, 4, 2, 64}, Sizes{1, 1, 300, 32, 8, 128},
                           Sizes{2, 5, 3, 4, 4, 16}, Sizes{1, 70, 200, 8, 2, 40});
  const int variant = GENERATE(0, 1, 2, 3, 4);  // plain, ALiBi, soft cap, window, sinks
  CAPTURE(z.batch, z.q_len, z.k_len, z.heads, z.kv_heads, z.d, variant);
  const auto q = random(static_cast<std::size_t>(z.batch * z.q_len * z.heads * z.d), 31, 3.0f);
  const auto k = random(static_cast<std::size_t>(z.batch * z.k_len * z.kv_heads * z.d), 32, 3.0f);
  const auto v = random(k.size(), 33);
  AttentionParams params;
  if (variant == 1) params.alibi_slopes = posenc::alibi_slopes(z.heads);
  if (variant == 2) params.logit_softcap = 4.0;
  if (variant == 3) params.sliding_window = 40;
  for (Eigen::Index h = 0; variant == 4 && h < z.heads; ++h) params.sink_logits.push_back(double(h % 5));
  const State s = attend(z, q.data(), k.data(), v.data(), params);
  Eigen::Index empty_rows = 0;
  for (Eigen::Index b = 0; b < z.batch; ++b) {
    for (Eigen::Index i = 0; i < z.q_len; ++i) {
      for (Eigen::Index h = 0; h < z.heads; ++h) {
        const long double want = expected_lse(z, q, k, params, b, i, h);
        const float got = s.lse[static_cast<std::size_t>((b * z.q_len + i) * z.heads + h)];
        CAPTURE(b, i, h);
        if (std::isinf(want)) {
          ++empty_rows;
          CHECK(got == kNegInf);
        } else {
          CHECK_THAT(got, WithinAbs(static_cast<double>(want), 2e-5 * std::max(1.0L, std::abs(want))));
        }
      }
    }
  }
  // Sizes{2, 5, 3, ...}: the first two query rows of each sequence see no key (without sinks).
  if (z.q_len > z.k_len && variant != 4) CHECK(empty_rows == z.batch * (z.q_len - z.k_len) * z.heads);
}

TEST_CASE("attention merge: split-K decode merged equals one attention over all keys",
          "[attention][lse][merge]") {
  // One query (position 299) against 300 keys, GQA 32/8, d = 128, the keys cut in two at `cut`;
  // each part is attended with its own key positions, the sinks go to part A only.
  const Sizes full{1, 1, 300, 32, 8, 128};
  const Eigen::Index row = full.kv_heads * full.d;
  const Eigen::Index cut = GENERATE(1, 64, 150, 299);
  const bool alibi = GENERATE(false, true);
  const bool sinks = GENERATE(false, true);
  CAPTURE(cut, alibi, sinks);
  const auto q = random(static_cast<std::size_t>(full.heads * full.d), 41, 2.0f);
  const auto k = random(static_cast<std::size_t>(full.k_len * row), 42, 2.0f);
  const auto v = random(k.size(), 43);
  std::vector<std::int64_t> kpos(static_cast<std::size_t>(full.k_len));
  for (Eigen::Index j = 0; j < full.k_len; ++j) kpos[static_cast<std::size_t>(j)] = j;
  const std::int64_t qpos = full.k_len - 1;

  AttentionParams params;
  if (alibi) params.alibi_slopes = posenc::alibi_slopes(full.heads);
  for (Eigen::Index h = 0; sinks && h < full.heads; ++h) params.sink_logits.push_back(0.3 * double(h % 9));
  const State whole = attend(full, q.data(), k.data(), v.data(), params);

  auto part = [&](Eigen::Index j0, Eigen::Index n, const AttentionParams& pp) {
    AttentionMetadata meta;
    meta.query_positions = posenc::PositionIdsView(&qpos, 1, 1);
    meta.key_positions = posenc::PositionIdsView(kpos.data() + j0, 1, n);
    const Sizes z{1, 1, n, full.heads, full.kv_heads, full.d};
    return attend(z, q.data(), k.data() + j0 * row, v.data() + j0 * row, pp, meta);
  };
  AttentionParams no_sinks = params;
  no_sinks.sink_logits.clear();
  State merged = part(0, cut, params);
  merge(full, merged, part(cut, full.k_len - cut, no_sinks));
  POSENC_REQUIRE_CLOSE(close(merged.out, whole.out, 1e-5));
  POSENC_REQUIRE_CLOSE(close(merged.lse, whole.lse, 1e-5));
  // And against the double reference, which knows nothing of states.
  std::vector<float> ref(whole.out.size());
  posenc::reference::attention<float>(
      ConstTensorView<float, 4>(q.data(), 1, 1, full.heads, full.d),
      ConstTensorView<float, 4>(k.data(), 1, full.k_len, full.kv_heads, full.d),
      ConstTensorView<float, 4>(v.data(), 1, full.k_len, full.kv_heads, full.d),
      TensorView<float, 4>(ref.data(), 1, 1, full.heads, full.d), params);
  POSENC_REQUIRE_CLOSE(close(merged.out, ref, 1e-5));
}

TEST_CASE("attention merge: a prefix shared by a batch, attended once, merged with each "
          "sequence's causal suffix equals causal attention over prefix + suffix",
          "[attention][lse][merge]") {
  // Cascade attention: 2 sequences share a 100-token prefix (one copy of its K / V) and have
  // 40 tokens of their own. The prefix call stacks both sequences' queries as one batch of
  // 2 x 40 rows (every row sees every prefix key; [2, 40, H, d] and [1, 80, H, d] are the same
  // memory), the suffix call is causal per sequence. Positions: prefix 0..99, suffix 100..139.
  constexpr Eigen::Index B = 2, P = 100, n = 40, H = 8, KH = 2, d = 64, row = KH * d;
  const bool alibi = GENERATE(false, true);
  CAPTURE(alibi);
  const auto q = random(static_cast<std::size_t>(B * n * H * d), 51, 2.0f);
  const auto prefix_k = random(static_cast<std::size_t>(P * row), 52, 2.0f);
  const auto prefix_v = random(prefix_k.size(), 53);
  const auto suffix_k = random(static_cast<std::size_t>(B * n * row), 54, 2.0f);
  const auto suffix_v = random(suffix_k.size(), 55);
  AttentionParams params;
  if (alibi) params.alibi_slopes = posenc::alibi_slopes(H);

  std::vector<std::int64_t> qpos(static_cast<std::size_t>(B * n)), prefix_pos(P), suffix_pos(static_cast<std::size_t>(B * n));
  for (Eigen::Index i = 0; i < B * n; ++i) qpos[static_cast<std::size_t>(i)] = P + i % n;
  for (Eigen::Index j = 0; j < P; ++j) prefix_pos[static_cast<std::size_t>(j)] = j;
  suffix_pos = qpos;

  AttentionParams bidirectional = params;
  bidirectional.mask = MaskMode::kBidirectional;  // ALiBi |p_q - p_k| = p_q - p_k here
  AttentionMetadata prefix_meta;
  prefix_meta.query_positions = posenc::PositionIdsView(qpos.data(), 1, B * n);
  prefix_meta.key_positions = posenc::PositionIdsView(prefix_pos.data(), 1, P);
  State merged = attend(Sizes{1, B * n, P, H, KH, d}, q.data(), prefix_k.data(), prefix_v.data(),
                        bidirectional, prefix_meta);
  AttentionMetadata suffix_meta;
  suffix_meta.query_positions = posenc::PositionIdsView(qpos.data(), B, n);
  suffix_meta.key_positions = posenc::PositionIdsView(suffix_pos.data(), B, n);
  const Sizes z{B, n, n, H, KH, d};
  merge(z, merged, attend(z, q.data(), suffix_k.data(), suffix_v.data(), params, suffix_meta));

  // Oracle: each sequence's prefix + suffix keys laid out in full, causal, default positions.
  std::vector<float> k_all, v_all;
  for (Eigen::Index b = 0; b < B; ++b) {
    k_all.insert(k_all.end(), prefix_k.begin(), prefix_k.end());
    k_all.insert(k_all.end(), suffix_k.begin() + b * n * row, suffix_k.begin() + (b + 1) * n * row);
    v_all.insert(v_all.end(), prefix_v.begin(), prefix_v.end());
    v_all.insert(v_all.end(), suffix_v.begin() + b * n * row, suffix_v.begin() + (b + 1) * n * row);
  }
  std::vector<float> ref(merged.out.size());
  posenc::reference::attention<float>(ConstTensorView<float, 4>(q.data(), B, n, H, d),
                                      ConstTensorView<float, 4>(k_all.data(), B, P + n, KH, d),
                                      ConstTensorView<float, 4>(v_all.data(), B, P + n, KH, d),
                                      TensorView<float, 4>(ref.data(), B, n, H, d), params);
  POSENC_REQUIRE_CLOSE(close(merged.out, ref, 1e-5));
  const State whole = attend(Sizes{B, n, P + n, H, KH, d}, q.data(), k_all.data(), v_all.data(), params);
  POSENC_REQUIRE_CLOSE(close(merged.lse, whole.lse, 1e-5));
}

TEST_CASE("attention merge: two single-key parts give the two-key softmax, empty parts weigh "
          "nothing, a NaN part makes the row NaN", "[attention][merge]") {
  // Part a: one key of logit 1 and value row (1, 0); part b: logit 0, value (0, 1). Merged:
  // weights e / (e + 1) = 0.7310585786 and 1 / (e + 1) = 0.2689414214, lse = log(e + 1) =
  // 1.3132616875.
  std::vector<float> out = {1.0f, 0.0f}, lse = {1.0f};
  const std::vector<float> other = {0.0f, 1.0f}, other_lse = {0.0f};
  auto run = [&](std::vector<float>& o, std::vector<float>& l, const std::vector<float>& ob,
                 const std::vector<float>& lb) {
    posenc::merge_attention_state_inplace<float>(TensorView<float, 4>(o.data(), 1, 1, 1, 2),
                                                 TensorView<float, 3>(l.data(), 1, 1, 1),
                                                 ConstTensorView<float, 4>(ob.data(), 1, 1, 1, 2),
                                                 ConstTensorView<float, 3>(lb.data(), 1, 1, 1));
  };
  run(out, lse, other, other_lse);
  CHECK_THAT(out[0], WithinAbs(0.7310585786, 1e-7));
  CHECK_THAT(out[1], WithinAbs(0.2689414214, 1e-7));
  CHECK_THAT(lse[0], WithinAbs(1.3132616875, 1e-6));

  // An empty part (lse = -inf, out 0) leaves the other exactly as it was, on either side.
  std::vector<float> o1 = {0.25f, -2.0f}, l1 = {3.5f};
  const std::vector<float> empty = {0.0f, 0.0f}, empty_lse = {kNegInf};
  run(o1, l1, empty, empty_lse);
  CHECK(o1 == std::vector<float>{0.25f, -2.0f});
  CHECK(l1[0] == 3.5f);
  std::vector<float> o2 = empty, l2 = empty_lse;
  run(o2, l2, std::vector<float>{0.25f, -2.0f}, std::vector<float>{3.5f});
  CHECK(o2 == std::vector<float>{0.25f, -2.0f});
  CHECK(l2[0] == 3.5f);
  // Two empty parts: 0 and -inf, no NaN (whatever the empty out held).
  std::vector<float> o3 = {9.0f, 9.0f}, l3 = empty_lse;
  run(o3, l3, empty, empty_lse);
  CHECK(o3 == empty);
  CHECK(l3[0] == kNegInf);
  // A NaN part (a row that met a NaN logit) makes the merge NaN on either side, an empty
  // other part included: std::max(-inf, NaN) is -inf, which read as two empty parts (0, -inf).
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const bool nan_first : {false, true}) {
    for (const float other_lse_value : {kNegInf, 0.5f}) {
      CAPTURE(nan_first, other_lse_value);
      std::vector<float> o = {0.25f, -2.0f}, l = {other_lse_value};
      std::vector<float> on = {nan, nan}, ln = {nan};
      if (nan_first) std::swap(o, on), std::swap(l, ln);
      run(o, l, on, ln);
      CHECK(std::isnan(o[0]));
      CHECK(std::isnan(o[1]));
      CHECK(std::isnan(l[0]));
    }
  }
}

TEST_CASE("attention merge: bad shapes and lse values throw before anything is written",
          "[attention][merge][errors]") {
  std::vector<float> out(2 * 3 * 4, 5.0f), lse(2 * 3, 1.0f), other(out.size(), 1.0f), other_lse(lse.size(), 0.0f);
  const std::vector<float> out0 = out, lse0 = lse;
  auto run = [&](Eigen::Index other_heads) {
    posenc::merge_attention_state_inplace<float>(
        TensorView<float, 4>(out.data(), 1, 2, 3, 4), TensorView<float, 3>(lse.data(), 1, 2, 3),
        ConstTensorView<float, 4>(other.data(), 1, 2, other_heads, 4),
        ConstTensorView<float, 3>(other_lse.data(), 1, 2, 3));
  };
  REQUIRE_THROWS_AS(run(2), std::invalid_argument);
  REQUIRE_THROWS_WITH(run(2), Contains("other_out shape [1, 2, 2, 4] must equal out shape [1, 2, 3, 4]"));
  other_lse[4] = std::numeric_limits<float>::infinity();
  REQUIRE_THROWS_WITH(run(3), Contains("other_lse entry 4 = inf must be finite, -inf"));
  CHECK(out == out0);
  CHECK(lse == lse0);

  // attention() with an lse of the wrong shape writes neither out nor lse.
  const auto q = random(2 * 3 * 4, 1);
  std::vector<float> bad_lse(5, 7.0f);
  REQUIRE_THROWS_WITH(posenc::attention<float>(ConstTensorView<float, 4>(q.data(), 1, 2, 3, 4),
                                               ConstTensorView<float, 4>(q.data(), 1, 2, 3, 4),
                                               ConstTensorView<float, 4>(q.data(), 1, 2, 3, 4),
                                               TensorView<float, 4>(out.data(), 1, 2, 3, 4),
                                               TensorView<float, 3>(bad_lse.data(), 1, 5, 1)),
                      Contains("lse shape [1, 5, 1] must be [batch, q_len, heads] = [1, 2, 3]"));
  CHECK(out == out0);
  CHECK(std::all_of(bad_lse.begin(), bad_lse.end(), [](float x) { return x == 7.0f; }));
}

// From a mutation audit: every dimension of out / other_out and every axis of both lse
// views is checked, and both lse views are scanned to their last entry for +inf.
TEST_CASE("attention merge: each dimension and each lse entry is checked, nothing written",
          "[attention][merge][errors]") {
  // out [1, 2, 3, 4]: 6 rows of head_dim 4.
  std::vector<float> out(24, 5.0f), lse(6, 1.0f), other(24, 1.0f), other_lse(6, 0.0f);
  const std::vector<float> out0 = out, lse0 = lse;
  const auto run = [&](std::vector<Eigen::Index> od, std::vector<Eigen::Index> ld,
                       std::vector<Eigen::Index> old) {
    posenc::merge_attention_state_inplace<float>(
        TensorView<float, 4>(out.data(), 1, 2, 3, 4),
        TensorView<float, 3>(lse.data(), ld[0], ld[1], ld[2]),
        ConstTensorView<float, 4>(other.data(), od[0], od[1], od[2], od[3]),
        ConstTensorView<float, 3>(other_lse.data(), old[0], old[1], old[2]));
  };
  const auto unchanged = [&] { return out == out0 && lse == lse0; };
  // head_dim of other_out (the 4th axis).
  REQUIRE_THROWS_AS(run({1, 2, 3, 3}, {1, 2, 3}, {1, 2, 3}), std::invalid_argument);
  CHECK(unchanged());
  // The heads axis of lse and of other_lse (the 3rd axis), other_lse alone on any axis.
  REQUIRE_THROWS_AS(run({1, 2, 3, 4}, {1, 2, 2}, {1, 2, 3}), std::invalid_argument);
  CHECK(unchanged());
  REQUIRE_THROWS_AS(run({1, 2, 3, 4}, {1, 2, 3}, {1, 2, 2}), std::invalid_argument);
  CHECK(unchanged());
  REQUIRE_THROWS_AS(run({1, 2, 3, 4}, {1, 2, 3}, {1, 3, 2}), std::invalid_argument);
  CHECK(unchanged());
  // +inf as the last entry (row 5) of other_lse, then of lse itself.
  other_lse[5] = std::numeric_limits<float>::infinity();
  REQUIRE_THROWS_WITH(run({1, 2, 3, 4}, {1, 2, 3}, {1, 2, 3}),
                      Contains("other_lse entry 5 = inf"));
  CHECK(unchanged());
  other_lse[5] = 0.0f;
  lse[5] = std::numeric_limits<float>::infinity();
  const std::vector<float> lse_inf = lse;
  REQUIRE_THROWS_WITH(run({1, 2, 3, 4}, {1, 2, 3}, {1, 2, 3}),
                      Contains("lse entry 5 = inf") && !Contains("other_lse"));
  CHECK(out == out0);
  CHECK(lse == lse_inf);
}

// From a mutation audit (thirty-second session): the batch axis of every view and the first
// lse entry are checked too.
TEST_CASE("attention merge: the batch axis and the first lse entry are checked, nothing written",
          "[attention][merge][errors]") {
  // out [1, 2, 3, 4]; the views below differ from it in the batch axis only (2, not 1).
  std::vector<float> out(24, 5.0f), lse(6, 1.0f), other(48, 1.0f), other_lse(12, 0.0f);
  const std::vector<float> out0 = out, lse0 = lse;
  const auto run = [&](Eigen::Index other_batch, Eigen::Index lse_batch,
                       Eigen::Index other_lse_batch) {
    posenc::merge_attention_state_inplace<float>(
        TensorView<float, 4>(out.data(), 1, 2, 3, 4),
        TensorView<float, 3>(lse.data(), lse_batch, 2, 3),
        ConstTensorView<float, 4>(other.data(), other_batch, 2, 3, 4),
        ConstTensorView<float, 3>(other_lse.data(), other_lse_batch, 2, 3));
  };
  const auto unchanged = [&] { return out == out0 && lse == lse0; };
  std::vector<float> lse_big(12, 1.0f);
  REQUIRE_THROWS_WITH(run(2, 1, 1), Contains("other_out shape [2, 2, 3, 4] must equal"));
  CHECK(unchanged());
  REQUIRE_THROWS_WITH(run(1, 1, 2), Contains("other_lse shape [2, 2, 3]"));
  CHECK(unchanged());
  REQUIRE_THROWS_WITH(posenc::merge_attention_state_inplace<float>(
                          TensorView<float, 4>(out.data(), 1, 2, 3, 4),
                          TensorView<float, 3>(lse_big.data(), 2, 2, 3),
                          ConstTensorView<float, 4>(other.data(), 1, 2, 3, 4),
                          ConstTensorView<float, 3>(other_lse.data(), 1, 2, 3)),
                      Contains("lse shape [2, 2, 3]"));
  CHECK(unchanged());
  CHECK(std::all_of(lse_big.begin(), lse_big.end(), [](float x) { return x == 1.0f; }));
  // +inf as the first entry (row 0) of other_lse, then of lse.
  other_lse[0] = std::numeric_limits<float>::infinity();
  REQUIRE_THROWS_WITH(run(1, 1, 1), Contains("other_lse entry 0 = inf"));
  CHECK(unchanged());
  other_lse[0] = 0.0f;
  lse[0] = std::numeric_limits<float>::infinity();
  const std::vector<float> lse_inf = lse;
  REQUIRE_THROWS_WITH(run(1, 1, 1), Contains("lse entry 0 = inf") && !Contains("other_lse"));
  CHECK(out == out0);
  CHECK(lse == lse_inf);
}
