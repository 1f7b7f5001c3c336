// AttentionMetadata::attention_bias, a caller's additive bias [batch or 1, heads or 1, q_len,
// k_len]. Expected values: softmax(scale q.k + bias) V written out in long double, the seed
// article's ALiBi example (biased scores [0.6, 0.7, 0.8], in closed form), and the same scores
// reached through
// another route of posenc's (ALiBi slopes, T5 buckets, the causal mask, key padding) whose own
// tests hold it to independent values.

#include <catch2/catch.hpp>

#include <posenc/alibi.hpp>
#include <posenc/attention.hpp>
#include <posenc/attention_mla.hpp>
#include <posenc/attention_rope.hpp>
#include <posenc/dual_chunk_attention.hpp>
#include <posenc/reference/attention.hpp>
#include <posenc/relative_bias.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "support/attention_ld.hpp"
#include "support/attention_shape.hpp"
#include "support/rng.hpp"

using Catch::Matchers::Contains;
using posenc_test::Shape;

namespace {

using LD = long double;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

struct Problem {
  Shape s;
  Eigen::Index dv;
  std::vector<float> q, k, v;
  explicit Problem(Shape shape, std::uint64_t seed)
      : s(shape),
        dv(shape.d),
        q(posenc_test::random_vector<float>(
            static_cast<std::size_t>(s.batch * s.q_len * s.heads * s.d), seed)),
        k(posenc_test::random_vector<float>(
            static_cast<std::size_t>(s.batch * s.k_len * s.kv_heads * s.d), seed + 1)),
        v(posenc_test::random_vector<float>(
            static_cast<std::size_t>(s.batch * s.k_len * s.kv_heads * s.d), seed + 2)) {}
  posenc::ConstTensorView<float, 4> qv() const {
    return {q.data(), s.batch, s.q_len, s.heads, s.d};
  }
  posenc::ConstTensorView<float, 4> kv() const {
    return {k.data(), s.batch, s.k_len, s.kv_heads, s.d};
  }
  posenc::ConstTensorView<float, 4> vv() const {
    return {v.data(), s.batch, s.k_len, s.kv_heads, dv};
  }
  std::vector<float> out() const { return std::vector<float>(q.size(), -9.0f); }
  posenc::TensorView<float, 4> ov(std::vector<float>& o) const {
    return {o.data(), s.batch, s.q_len, s.heads, dv};
  }
};

posenc::AttentionMetadata with_bias(const std::vector<float>& bias, Eigen::Index b, Eigen::Index h,
                                    Eigen::Index q_len, Eigen::Index k_len) {
  posenc::AttentionMetadata meta;
  meta.attention_bias.emplace(bias.data(), b, h, q_len, k_len);
  return meta;
}

/// Row (b, i, h) of attention over the keys the causal / bidirectional mask leaves, bias from
/// the [bb, bh, q_len, k_len] buffer, in long double.
std::vector<LD> expected_row(const Problem& p, const std::vector<float>& bias, Eigen::Index bb,
                             Eigen::Index bh, bool causal, Eigen::Index b, Eigen::Index i,
                             Eigen::Index h) {
  const Shape& s = p.s;
  const Eigen::Index g = h / (s.heads / s.kv_heads);
  std::vector<Eigen::Index> keys;
  std::vector<LD> add;
  for (Eigen::Index j = 0; j < s.k_len; ++j) {
    if (causal && j > i + s.k_len - s.q_len) continue;
    keys.push_back(j);
    const Eigen::Index at =
        (((bb == 1 ? 0 : b) * bh + (bh == 1 ? 0 : h)) * s.q_len + i) * s.k_len + j;
    add.push_back(bias[static_cast<std::size_t>(at)]);
  }
  const float* kb = p.k.data() + b * s.k_len * s.kv_heads * s.d + g * s.d;
  const float* vb = p.v.data() + b * s.k_len * s.kv_heads * s.d + g * s.d;
  return posenc_test::attend_ld(p.q.data() + ((b * s.q_len + i) * s.heads + h) * s.d, kb, vb,
                                s.kv_heads * s.d, s.d, keys, add,
                                1.0L / std::sqrt(static_cast<LD>(s.d)));
}

}  // namespace

TEST_CASE("attention bias: fused and reference against long double, every broadcast",
          "[attention_bias]") {
  // Prefill items (q_len 37 and 130 over several key tiles; q_len 3 with 8 query heads on one
  // kv head: 24 rows per kv head), and decode items, which take at most 4 rows per kv head
  // (q_len x group): q_len 1 with GQA 4, q_len 2 with GQA 2, q_len 4 MHA, q_len 3 and 1 x 1.
  // Head widths 16 to 80, MHA / GQA / MQA.
  const std::vector<Shape> shapes = {
      {2, 37, 37, 4, 4, 64}, {2, 5, 37, 4, 2, 80},  {1, 130, 150, 2, 1, 64},
      {2, 3, 70, 8, 1, 80},  {2, 1, 100, 8, 2, 64}, {1, 2, 50, 2, 1, 64},
      {2, 4, 129, 4, 4, 32}, {1, 3, 20, 2, 2, 16}};
  std::uint64_t seed = 100;
  for (const Shape& s : shapes) {
    const Problem p(s, seed += 10);
    for (const bool causal : {true, false}) {
      for (const Eigen::Index bb : {Eigen::Index{1}, s.batch}) {
        for (const Eigen::Index bh : {Eigen::Index{1}, s.heads}) {
          CAPTURE(s, causal, bb, bh);
          auto bias = posenc_test::random_vector<float>(
              static_cast<std::size_t>(bb * bh * s.q_len * s.k_len), seed + 5);
          for (auto& x : bias) x *= 4.0f;
          posenc::AttentionParams params;
          params.mask = causal ? posenc::MaskMode::kCausal : posenc::MaskMode::kBidirectional;
          const auto meta = with_bias(bias, bb, bh, s.q_len, s.k_len);
          auto fused = p.out(), ref = p.out(), threaded = p.out();
          posenc::attention<float>(p.qv(), p.kv(), p.vv(), p.ov(fused), params, meta);
          posenc::reference::attention<float>(p.qv(), p.kv(), p.vv(), p.ov(ref), params, meta);
          params.num_threads = 2;
          posenc::attention<float>(p.qv(), p.kv(), p.vv(), p.ov(threaded), params, meta);
          for (Eigen::Index b = 0; b < s.batch; ++b) {
            for (Eigen::Index i = 0; i < s.q_len; ++i) {
              for (Eigen::Index h = 0; h < s.heads; ++h) {
                const auto want = expected_row(p, bias, bb, bh, causal, b, i, h);
                for (Eigen::Index c = 0; c < s.d; ++c) {
                  const auto at =
                      static_cast<std::size_t>(((b * s.q_len + i) * s.heads + h) * s.d + c);
                  const LD w = want[static_cast<std::size_t>(c)];
                  REQUIRE(std::abs(fused[at] - w) < 1e-5L);
                  REQUIRE(std::abs(threaded[at] - w) < 1e-5L);
                  REQUIRE(std::abs(ref[at] - w) < 1e-6L);
                }
              }
            }
          }
        }
      }
    }
  }
}

TEST_CASE("attention bias: the seed's ALiBi example as a bias", "[attention_bias]") {
  // Content scores [1.0, 0.9, 0.8] (q = 1, k = scores, d = 1, scale 1), ALiBi slope 0.2 for the
  // query at position 2: bias -0.2 (2 - j) = [-0.4, -0.2, 0]. Values e_j, so out = weights =
  // softmax([0.6, 0.7, 0.8]) (the seed prints [0.269, 0.299, 0.332], which sums to 0.9 and is
  // not a softmax; test_attention.cpp has the same finding).
  const std::vector<float> q = {1.0f}, k = {1.0f, 0.9f, 0.8f};
  const std::vector<float> v = {1, 0, 0, 0, 1, 0, 0, 0, 1};
  const std::vector<float> bias = {-0.4f, -0.2f, 0.0f};
  posenc::AttentionParams params;
  params.scale = 1.0;
  std::vector<float> out(3, -1.0f);
  std::vector<double> weights(3, -1.0);
  const posenc::ConstTensorView<float, 4> qv(q.data(), 1, 1, 1, 1), kv(k.data(), 1, 3, 1, 1),
      vv(v.data(), 1, 3, 1, 3);
  const double z = std::exp(0.6) + std::exp(0.7) + std::exp(0.8);
  const double want[3] = {std::exp(0.6) / z, std::exp(0.7) / z, std::exp(0.8) / z};
  posenc::attention<float>(qv, kv, vv, {out.data(), 1, 1, 1, 3}, params,
                           with_bias(bias, 1, 1, 1, 3));
  for (int j = 0; j < 3; ++j)
    CHECK(out[static_cast<std::size_t>(j)] == Approx(want[j]).margin(1e-6));
  posenc::reference::attention<float>(qv, kv, vv, {out.data(), 1, 1, 1, 3}, params,
                                      with_bias(bias, 1, 1, 1, 3),
                                      posenc::TensorView<double, 4>(weights.data(), 1, 1, 1, 3));
  for (int j = 0; j < 3; ++j)
    CHECK(weights[static_cast<std::size_t>(j)] == Approx(want[j]).margin(1e-7));
  // Without the bias the seed's weights [0.367, 0.332, 0.301].
  const std::vector<float> none = {0.0f, 0.0f, 0.0f};
  posenc::attention<float>(qv, kv, vv, {out.data(), 1, 1, 1, 3}, params,
                           with_bias(none, 1, 1, 1, 3));
  CHECK(out[0] == Approx(0.367).margin(5e-4));
  CHECK(out[1] == Approx(0.332).margin(5e-4));
  CHECK(out[2] == Approx(0.301).margin(5e-4));
}

TEST_CASE("attention bias: ALiBi and T5 biases given as tensors match their own paths",
          "[attention_bias]") {
  const Shape s{2, 24, 40, 4, 2, 64};
  const Problem p(s, 300);
  const std::vector<double> slopes = posenc::alibi_slopes(s.heads);
  for (const bool causal : {true, false}) {
    CAPTURE(causal);
    posenc::AttentionParams plain;
    plain.mask = causal ? posenc::MaskMode::kCausal : posenc::MaskMode::kBidirectional;
    // ALiBi from the tokens' default positions: query i at k_len - q_len + i, key j at j;
    // causal -m (pos_q - pos_k), bidirectional -m |pos_q - pos_k| (attention_types.hpp).
    std::vector<float> alibi(static_cast<std::size_t>(s.heads * s.q_len * s.k_len));
    for (Eigen::Index h = 0; h < s.heads; ++h)
      for (Eigen::Index i = 0; i < s.q_len; ++i)
        for (Eigen::Index j = 0; j < s.k_len; ++j) {
          const double rel = static_cast<double>(s.k_len - s.q_len + i - j);
          alibi[static_cast<std::size_t>((h * s.q_len + i) * s.k_len + j)] = static_cast<float>(
              -slopes[static_cast<std::size_t>(h)] * (causal ? rel : std::abs(rel)));
        }
    auto via_bias = p.out(), via_slopes = p.out();
    posenc::attention<float>(p.qv(), p.kv(), p.vv(), p.ov(via_bias), plain,
                             with_bias(alibi, 1, s.heads, s.q_len, s.k_len));
    posenc::AttentionParams with_alibi = plain;
    with_alibi.alibi_slopes = slopes;
    posenc::attention<float>(p.qv(), p.kv(), p.vv(), p.ov(via_slopes), with_alibi);
    for (std::size_t x = 0; x < via_bias.size(); ++x)
      REQUIRE(via_bias[x] == Approx(via_slopes[x]).margin(2e-6));
    // T5's bucketed bias, materialised and passed back as a tensor.
    auto table = posenc_test::random_vector<float>(32 * static_cast<std::size_t>(s.heads), 301);
    const auto t5 =
        posenc::relative_position_bias<float>({table.data(), 32, s.heads}, 128, !causal);
    std::vector<std::int64_t> qpos(static_cast<std::size_t>(s.batch * s.q_len)),
        kpos(static_cast<std::size_t>(s.batch * s.k_len));
    for (Eigen::Index b = 0; b < s.batch; ++b) {
      for (Eigen::Index i = 0; i < s.q_len; ++i)
        qpos[static_cast<std::size_t>(b * s.q_len + i)] = s.k_len - s.q_len + i;
      for (Eigen::Index j = 0; j < s.k_len; ++j)
        kpos[static_cast<std::size_t>(b * s.k_len + j)] = j;
    }
    std::vector<float> t5_bias(static_cast<std::size_t>(s.batch * s.heads * s.q_len * s.k_len));
    posenc::relative_position_bias_matrix<float>(
        t5, {qpos.data(), s.batch, s.q_len}, {kpos.data(), s.batch, s.k_len},
        {t5_bias.data(), s.batch, s.heads, s.q_len, s.k_len});
    auto t5_tensor = p.out(), t5_plan = p.out();
    posenc::attention<float>(p.qv(), p.kv(), p.vv(), p.ov(t5_tensor), plain,
                             with_bias(t5_bias, s.batch, s.heads, s.q_len, s.k_len));
    posenc::AttentionParams with_t5 = plain;
    with_t5.relative_bias = t5;
    posenc::attention<float>(p.qv(), p.kv(), p.vv(), p.ov(t5_plan), with_t5);
    for (std::size_t x = 0; x < t5_tensor.size(); ++x)
      REQUIRE(t5_tensor[x] == Approx(t5_plan[x]).margin(2e-6));
  }
}

TEST_CASE("attention bias: -inf entries weigh exactly 0, an all -inf row gives zeros",
          "[attention_bias]") {
  const Shape s{2, 33, 33, 4, 2, 64};
  const Problem p(s, 400);
  posenc::AttentionParams bidir;
  bidir.mask = posenc::MaskMode::kBidirectional;
  // Bidirectional plus -inf above the diagonal is the causal mask.
  std::vector<float> upper(static_cast<std::size_t>(s.q_len * s.k_len), 0.0f);
  for (Eigen::Index i = 0; i < s.q_len; ++i)
    for (Eigen::Index j = i + 1; j < s.k_len; ++j)
      upper[static_cast<std::size_t>(i * s.k_len + j)] = kNegInf;
  auto biased = p.out(), causal = p.out();
  posenc::attention<float>(p.qv(), p.kv(), p.vv(), p.ov(biased), bidir,
                           with_bias(upper, 1, 1, s.q_len, s.k_len));
  posenc::attention<float>(p.qv(), p.kv(), p.vv(), p.ov(causal));
  for (std::size_t x = 0; x < biased.size(); ++x)
    REQUIRE(biased[x] == Approx(causal[x]).margin(1e-6));
  std::vector<double> w(static_cast<std::size_t>(s.batch * s.heads * s.q_len * s.k_len));
  auto ref = p.out();
  posenc::reference::attention<float>(
      p.qv(), p.kv(), p.vv(), p.ov(ref), bidir, with_bias(upper, 1, 1, s.q_len, s.k_len),
      posenc::TensorView<double, 4>(w.data(), s.batch, s.heads, s.q_len, s.k_len));
  for (Eigen::Index r = 0; r < s.batch * s.heads; ++r)
    for (Eigen::Index i = 0; i < s.q_len; ++i)
      for (Eigen::Index j = i + 1; j < s.k_len; ++j)
        REQUIRE(w[static_cast<std::size_t>((r * s.q_len + i) * s.k_len + j)] == 0.0);
  // Whole key columns at -inf per sequence ([batch, 1, q, k]) act as key padding here, where
  // every V row is finite (0 times a NaN value row would still be NaN: key_mask skips it).
  std::vector<float> pad(static_cast<std::size_t>(s.batch * s.q_len * s.k_len), 0.0f);
  std::vector<std::uint8_t> key_mask(static_cast<std::size_t>(s.batch * s.k_len), 1);
  for (Eigen::Index b = 0; b < s.batch; ++b) {
    for (Eigen::Index j = 0; j < s.k_len; ++j) {
      if ((j * 7 + b) % 5 != 0) continue;
      key_mask[static_cast<std::size_t>(b * s.k_len + j)] = 0;
      for (Eigen::Index i = 0; i < s.q_len; ++i)
        pad[static_cast<std::size_t>((b * s.q_len + i) * s.k_len + j)] = kNegInf;
    }
  }
  auto padded_bias = p.out(), padded_mask = p.out();
  posenc::attention<float>(p.qv(), p.kv(), p.vv(), p.ov(padded_bias), bidir,
                           with_bias(pad, s.batch, 1, s.q_len, s.k_len));
  posenc::AttentionMetadata masked;
  masked.key_mask.emplace(key_mask.data(), s.batch, s.k_len);
  posenc::attention<float>(p.qv(), p.kv(), p.vv(), p.ov(padded_mask), bidir, masked);
  for (std::size_t x = 0; x < padded_bias.size(); ++x)
    REQUIRE(padded_bias[x] == Approx(padded_mask[x]).margin(1e-6));
  // Exactly 0, not exp(-88.7) ~ 3e-39 (Eigen's pexp clamp): key 3's values of 1e38 would add
  // ~0.3 to query 0, whose bias removes that key beside finite ones.
  Problem big = p;
  for (Eigen::Index b = 0; b < s.batch; ++b)
    for (Eigen::Index c = 0; c < s.kv_heads * s.d; ++c)
      big.v[static_cast<std::size_t>((b * s.k_len + 3) * s.kv_heads * s.d + c)] = 1e38f;
  std::vector<float> drop(static_cast<std::size_t>(s.q_len * s.k_len), 0.0f);
  drop[3] = kNegInf;
  auto dropped = big.out();
  posenc::attention<float>(big.qv(), big.kv(), big.vv(), big.ov(dropped), bidir,
                           with_bias(drop, 1, 1, s.q_len, s.k_len));
  std::vector<Eigen::Index> keys;
  for (Eigen::Index j = 0; j < s.k_len; ++j)
    if (j != 3) keys.push_back(j);
  for (Eigen::Index b = 0; b < s.batch; ++b) {
    for (Eigen::Index h = 0; h < s.heads; ++h) {
      const Eigen::Index g = h / 2, row = s.kv_heads * s.d;
      const auto want = posenc_test::attend_ld(big.q.data() + (b * s.q_len * s.heads + h) * s.d,
                                               big.k.data() + b * s.k_len * row + g * s.d,
                                               big.v.data() + b * s.k_len * row + g * s.d, row, s.d,
                                               keys, {}, 1.0L / std::sqrt(LD{64}));
      for (Eigen::Index c = 0; c < s.d; ++c) {
        REQUIRE(std::abs(dropped[static_cast<std::size_t>((b * s.q_len * s.heads + h) * s.d + c)] -
                         want[static_cast<std::size_t>(c)]) < 1e-5L);
      }
    }
  }
  // Row 5 of every head sees only -inf (causal: keys 0..5 at -inf, the rest masked): zeros.
  std::vector<float> dead(static_cast<std::size_t>(s.q_len * s.k_len), 0.0f);
  for (Eigen::Index j = 0; j < s.k_len; ++j)
    dead[static_cast<std::size_t>(5 * s.k_len + j)] = j <= 5 ? kNegInf : 1e30f;
  for (const bool fused : {true, false}) {
    auto o = p.out();
    if (fused) {
      posenc::attention<float>(p.qv(), p.kv(), p.vv(), p.ov(o), {},
                               with_bias(dead, 1, 1, s.q_len, s.k_len));
    } else {
      posenc::reference::attention<float>(p.qv(), p.kv(), p.vv(), p.ov(o), {},
                                          with_bias(dead, 1, 1, s.q_len, s.k_len));
    }
    for (Eigen::Index b = 0; b < s.batch; ++b)
      for (Eigen::Index h = 0; h < s.heads; ++h)
        for (Eigen::Index c = 0; c < s.d; ++c) {
          REQUIRE(o[static_cast<std::size_t>(((b * s.q_len + 5) * s.heads + h) * s.d + c)] == 0.0f);
          // Row 6 is unaffected: finite.
          REQUIRE(std::isfinite(
              o[static_cast<std::size_t>(((b * s.q_len + 6) * s.heads + h) * s.d + c)]));
        }
  }
}

TEST_CASE("attention bias: passes through attention_with_rope", "[attention_bias]") {
  const Shape s{1, 20, 20, 4, 4, 32};
  const Problem p(s, 500);
  posenc::RopeParams rp;
  rp.head_dim = s.d;
  const auto freqs = posenc::compute_rope_frequencies(rp);
  const std::vector<double> slopes = posenc::alibi_slopes(s.heads);
  std::vector<float> alibi(static_cast<std::size_t>(s.heads * s.q_len * s.k_len));
  for (Eigen::Index h = 0; h < s.heads; ++h)
    for (Eigen::Index i = 0; i < s.q_len; ++i)
      for (Eigen::Index j = 0; j < s.k_len; ++j)
        alibi[static_cast<std::size_t>((h * s.q_len + i) * s.k_len + j)] =
            static_cast<float>(-slopes[static_cast<std::size_t>(h)] * static_cast<double>(i - j));
  auto a = p.out(), b = p.out();
  posenc::attention_with_rope<float>(p.qv(), p.kv(), p.vv(), p.ov(a), freqs,
                                     posenc::RopeLayout::kHalfSplit, {},
                                     with_bias(alibi, 1, s.heads, s.q_len, s.k_len));
  posenc::AttentionParams with_alibi;
  with_alibi.alibi_slopes = slopes;
  posenc::attention_with_rope<float>(p.qv(), p.kv(), p.vv(), p.ov(b), freqs,
                                     posenc::RopeLayout::kHalfSplit, with_alibi);
  for (std::size_t x = 0; x < a.size(); ++x) REQUIRE(a[x] == Approx(b[x]).margin(2e-6));
}

TEST_CASE("attention bias: passes through attention_latent", "[attention_bias]") {
  // Absorbed MLA over one latent head of 48 (values: its first 32), 4 query heads, q_len 3.
  const Shape s{1, 3, 50, 4, 1, 48};
  const Problem p(s, 550);
  const std::vector<double> slopes = posenc::alibi_slopes(s.heads);
  std::vector<float> alibi(static_cast<std::size_t>(s.heads * s.q_len * s.k_len));
  for (Eigen::Index h = 0; h < s.heads; ++h)
    for (Eigen::Index i = 0; i < s.q_len; ++i)
      for (Eigen::Index j = 0; j < s.k_len; ++j)
        alibi[static_cast<std::size_t>((h * s.q_len + i) * s.k_len + j)] = static_cast<float>(
            -slopes[static_cast<std::size_t>(h)] * static_cast<double>(s.k_len - s.q_len + i - j));
  std::vector<float> a(static_cast<std::size_t>(s.q_len * s.heads * 32)), b(a.size());
  posenc::AttentionParams params;
  params.scale = 0.125;
  posenc::attention_latent<float>(p.qv(), p.kv(), {a.data(), 1, s.q_len, s.heads, 32}, params,
                                  with_bias(alibi, 1, s.heads, s.q_len, s.k_len));
  params.alibi_slopes = slopes;
  posenc::attention_latent<float>(p.qv(), p.kv(), {b.data(), 1, s.q_len, s.heads, 32}, params);
  for (std::size_t x = 0; x < a.size(); ++x) REQUIRE(a[x] == Approx(b[x]).margin(2e-6));
}

TEST_CASE("attention bias: wrong shapes are refused before writing", "[attention_bias]") {
  const Shape s{2, 4, 6, 4, 2, 16};
  const Problem p(s, 600);
  std::vector<float> bias(static_cast<std::size_t>(3 * 4 * 4 * 6), 0.0f);
  auto out = p.out();
  const auto before = out;
  const auto call = [&](Eigen::Index b, Eigen::Index h, Eigen::Index q, Eigen::Index k) {
    posenc::attention<float>(p.qv(), p.kv(), p.vv(), p.ov(out), {}, with_bias(bias, b, h, q, k));
  };
  CHECK_THROWS_WITH(call(3, 4, 4, 6),
                    Contains("attention_bias shape [3, 4, 4, 6] must be [batch or 1, "
                             "heads or 1, q_len, k_len] = [2 or 1, 4 or 1, 4, 6]"));
  CHECK_THROWS_WITH(call(2, 2, 4, 6), Contains("attention_bias shape [2, 2, 4, 6]"));
  CHECK_THROWS_WITH(call(1, 1, 3, 6), Contains("attention_bias shape [1, 1, 3, 6]"));
  CHECK_THROWS_WITH(call(1, 1, 4, 5), Contains("attention_bias shape [1, 1, 4, 5]"));
  posenc::AttentionMetadata null_data;
  null_data.attention_bias.emplace(nullptr, 1, 1, 4, 6);
  CHECK_THROWS_WITH(posenc::attention<float>(p.qv(), p.kv(), p.vv(), p.ov(out), {}, null_data),
                    Contains("attention_bias data is null"));
  CHECK_THROWS_WITH(posenc::reference::attention<float>(p.qv(), p.kv(), p.vv(), p.ov(out), {},
                                                        with_bias(bias, 2, 3, 4, 6)),
                    Contains("reference::attention: attention_bias shape [2, 3, 4, 6]"));
  posenc::RopeParams rp;
  rp.head_dim = s.d;
  posenc::DualChunkPlan plan;
  plan.freqs = posenc::compute_rope_frequencies(rp);
  plan.chunks = {8, 4, 64};
  CHECK_THROWS_WITH(posenc::dual_chunk_attention<float>(p.qv(), p.kv(), p.vv(), p.ov(out), plan, {},
                                                        with_bias(bias, 1, 1, 4, 6)),
                    Contains("attention_bias is not supported by dual chunk attention"));
  CHECK(out == before);
}
