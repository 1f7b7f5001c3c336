// FoPE (Fourier Position Embedding): the frequency count by hand, the cos / sin cache and the
// rotation against the definition written out in long double, and the identity mixture equal to
// plain half-split RoPE.

#include <catch2/catch.hpp>

#include <posenc/fope.hpp>
#include <posenc/rope.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <stdexcept>
#include <vector>

#include "support/rng.hpp"

using Catch::Matchers::Contains;
using LD = long double;

namespace {

posenc::RopeFrequencies plan(Eigen::Index head_dim, double theta = 10000.0) {
  posenc::RopeParams p;
  p.head_dim = head_dim;
  p.theta = theta;
  return posenc::compute_rope_frequencies(p);
}

struct CosSinLD {
  LD c;
  LD s;
};

/// cos / sin of pair d at position t for coefficient table hc, long double from the definition.
CosSinLD fope_ld(const posenc::RopeFrequencies& f, const std::vector<float>& C, const std::vector<float>& S,
                 Eigen::Index hc, Eigen::Index F, Eigen::Index t, Eigen::Index d) {
  if (d >= F) return {1.0L, 0.0L};
  LD c = 0, s = 0;
  for (Eigen::Index k = 0; k < F; ++k) {
    const LD w = static_cast<LD>(f.inv_freq[static_cast<std::size_t>(k)]) * static_cast<LD>(t);
    c += std::cos(w) * C[static_cast<std::size_t>((hc * F + k) * F + d)];
    s += std::sin(w) * S[static_cast<std::size_t>((hc * F + k) * F + d)];
  }
  return {c, s};
}

}  // namespace

TEST_CASE("fope: the frequencies that complete a period within the trained length", "[fope]") {
  // theta 10000, head_dim 128: w_j = 10000^(-j/64) > 2 pi / 4096 <=> j < 64 ln(4096 / (2 pi)) /
  // ln 10000 = 45.03, so j = 0 .. 45: 46 frequencies.
  const auto f = plan(128);
  REQUIRE(posenc::fope_num_frequencies(f, std::nullopt, 4096) == 46);
  REQUIRE(posenc::fope_num_frequencies(f, Eigen::Index{10}, 4096) == 10);
  REQUIRE_THROWS_WITH(posenc::fope_num_frequencies(f, Eigen::Index{65}, 4096), Contains("num_inv_freq = 65 must be in [1, 64]"));
  REQUIRE(posenc::fope_num_frequencies(f, Eigen::Index{64}, 4096) == 64);  // every frequency
  REQUIRE_THROWS_WITH(posenc::fope_num_frequencies(f, Eigen::Index{0}, 4096), Contains("num_inv_freq = 0"));
}

TEST_CASE("fope: the cache and the rotation against the definition, per kv head and shared",
          "[fope]") {
  const Eigen::Index D = 16, F = 5, KV = 2, group = 2, H = KV * group, maxpos = 40, B = 2, S = 3;
  const auto f = plan(D);
  for (const Eigen::Index hc : {KV, Eigen::Index{1}}) {
    CAPTURE(hc);
    const auto C = posenc_test::random_vector<float>(static_cast<std::size_t>(hc * F * F), 601);
    const auto Sn = posenc_test::random_vector<float>(static_cast<std::size_t>(hc * F * F), 602);
    std::vector<float> cache(static_cast<std::size_t>(KV * maxpos * D));
    posenc::fill_fope_cos_sin_cache<float>(f, posenc::ConstTensorView<float, 3>(C.data(), hc, F, F),
                                           posenc::ConstTensorView<float, 3>(Sn.data(), hc, F, F),
                                           posenc::TensorView<float, 3>(cache.data(), KV, maxpos, D));
    for (Eigen::Index h = 0; h < KV; ++h)
      for (Eigen::Index t = 0; t < maxpos; ++t)
        for (Eigen::Index d = 0; d < D / 2; ++d) {
          const auto [c, s] = fope_ld(f, C, Sn, hc == 1 ? 0 : h, F, t, d);
          CAPTURE(h, t, d);
          REQUIRE_THAT(cache[static_cast<std::size_t>((h * maxpos + t) * D + d)], Catch::Matchers::WithinAbs(static_cast<double>(c), 1e-6));
          REQUIRE_THAT(cache[static_cast<std::size_t>((h * maxpos + t) * D + D / 2 + d)],
                       Catch::Matchers::WithinAbs(static_cast<double>(s), 1e-6));
        }
    // q / k of 2 sequences x 3 tokens at scattered positions; q heads 0, 1 use kv head 0.
    const std::vector<std::int64_t> pos = {0, 7, 39, 12, 12, 3};
    const auto q0 = posenc_test::random_vector<float>(static_cast<std::size_t>(B * S * H * D), 603);
    const auto k0 = posenc_test::random_vector<float>(static_cast<std::size_t>(B * S * KV * D), 604);
    auto q = q0, k = k0;
    posenc::apply_fope_qk_inplace<float>(posenc::rope_heads(posenc::TensorView<float, 4>(q.data(), B, S, H, D)),
                                         posenc::rope_heads(posenc::TensorView<float, 4>(k.data(), B, S, KV, D)),
                                         posenc::RopePositions::from_ids(posenc::PositionIdsView(pos.data(), B, S)),
                                         posenc::ConstTensorView<float, 3>(cache.data(), KV, maxpos, D));
    const auto check = [&](const std::vector<float>& x0, const std::vector<float>& x, Eigen::Index heads, Eigen::Index per_kv) {
      for (Eigen::Index n = 0; n < B * S; ++n)
        for (Eigen::Index h = 0; h < heads; ++h) {
          const Eigen::Index g = h / per_kv;
          for (Eigen::Index d = 0; d < D / 2; ++d) {
            const auto [c, s] = fope_ld(f, C, Sn, hc == 1 ? 0 : g, F, pos[static_cast<std::size_t>(n)], d);
            const float* in = x0.data() + (n * heads + h) * D;
            const float* out = x.data() + (n * heads + h) * D;
            CAPTURE(n, h, d);
            REQUIRE_THAT(out[d], Catch::Matchers::WithinAbs(static_cast<double>(in[d] * c - in[d + D / 2] * s), 2e-6));
            REQUIRE_THAT(out[d + D / 2], Catch::Matchers::WithinAbs(static_cast<double>(in[d + D / 2] * c + in[d] * s), 2e-6));
          }
        }
    };
    check(q0, q, H, group);
    check(k0, k, KV, 1);
  }
}

TEST_CASE("fope: the identity mixture of every frequency is plain half-split RoPE", "[fope]") {
  const Eigen::Index D = 32, F = D / 2, S = 9;
  const auto f = plan(D, 500000.0);
  std::vector<float> eye(static_cast<std::size_t>(F * F), 0.0f);
  for (Eigen::Index i = 0; i < F; ++i) eye[static_cast<std::size_t>(i * F + i)] = 1.0f;
  std::vector<float> cache(static_cast<std::size_t>(1000 * D));
  posenc::fill_fope_cos_sin_cache<float>(f, posenc::ConstTensorView<float, 3>(eye.data(), 1, F, F),
                                         posenc::ConstTensorView<float, 3>(eye.data(), 1, F, F),
                                         posenc::TensorView<float, 3>(cache.data(), 1, 1000, D));
  const std::vector<std::int64_t> pos = {0, 1, 2, 100, 500, 999, 3, 4, 5};
  const auto q0 = posenc_test::random_vector<float>(static_cast<std::size_t>(S * 4 * D), 605);
  const auto k0 = posenc_test::random_vector<float>(static_cast<std::size_t>(S * D), 606);
  auto q = q0, k = k0, qr = q0, kr = k0;
  const auto ids = posenc::RopePositions::from_ids(posenc::PositionIdsView(pos.data(), 1, S));
  posenc::apply_fope_qk_inplace<float>(posenc::rope_heads(posenc::TensorView<float, 4>(q.data(), 1, S, 4, D)),
                                       posenc::rope_heads(posenc::TensorView<float, 4>(k.data(), 1, S, 1, D)), ids,
                                       posenc::ConstTensorView<float, 3>(cache.data(), 1, 1000, D));
  posenc::apply_rope_qk_inplace<float>(posenc::rope_heads(posenc::TensorView<float, 4>(qr.data(), 1, S, 4, D)),
                                       posenc::rope_heads(posenc::TensorView<float, 4>(kr.data(), 1, S, 1, D)), ids, f,
                                       posenc::RopeLayout::kHalfSplit);
  for (std::size_t i = 0; i < q.size(); ++i) REQUIRE_THAT(q[i], Catch::Matchers::WithinAbs(qr[i], 1e-6));
  for (std::size_t i = 0; i < k.size(); ++i) REQUIRE_THAT(k[i], Catch::Matchers::WithinAbs(kr[i], 1e-6));
}

TEST_CASE("fope: bad input throws before writing", "[fope]") {
  const Eigen::Index D = 8, F = 2;
  const auto f = plan(D);
  std::vector<float> C(static_cast<std::size_t>(2 * F * F), 0.5f), cache(static_cast<std::size_t>(2 * 10 * D), -9.0f);
  C[3] = std::numeric_limits<float>::quiet_NaN();
  const posenc::ConstTensorView<float, 3> cv(C.data(), 2, F, F);
  REQUIRE_THROWS_WITH(posenc::fill_fope_cos_sin_cache<float>(f, cv, cv, posenc::TensorView<float, 3>(cache.data(), 2, 10, D)),
                      Contains("cos_coef entry 3 = nan must be finite"));
  C[3] = 0.5f;
  REQUIRE_THROWS_WITH(posenc::fill_fope_cos_sin_cache<float>(f, cv, cv, posenc::TensorView<float, 3>(cache.data(), 3, 5, D)),
                      Contains("must be [1 or kv_heads = 3, F, F]"));
  for (const float x : cache) REQUIRE(x == -9.0f);
  posenc::fill_fope_cos_sin_cache<float>(f, cv, cv, posenc::TensorView<float, 3>(cache.data(), 2, 10, D));
  std::vector<float> q(static_cast<std::size_t>(4 * D), 1.0f), k(static_cast<std::size_t>(2 * D), 1.0f);
  const std::vector<std::int64_t> pos = {10};  // one past the cache
  REQUIRE_THROWS_WITH(posenc::apply_fope_qk_inplace<float>(posenc::rope_heads(posenc::TensorView<float, 4>(q.data(), 1, 1, 4, D)),
                                                           posenc::rope_heads(posenc::TensorView<float, 4>(k.data(), 1, 1, 2, D)),
                                                           posenc::RopePositions::from_ids(posenc::PositionIdsView(pos.data(), 1, 1)),
                                                           posenc::ConstTensorView<float, 3>(cache.data(), 2, 10, D)),
                      Contains("position[0, 0] = 10 must be in [0, max_position = 10)"));
  REQUIRE_THROWS_WITH(posenc::apply_fope_qk_inplace<float>(posenc::rope_heads(posenc::TensorView<float, 4>(q.data(), 1, 1, 4, D)),
                                                           posenc::rope_heads(posenc::TensorView<float, 4>(k.data(), 1, 1, 1, D)),
                                                           posenc::RopePositions::contiguous(1, 1),
                                                           posenc::ConstTensorView<float, 3>(cache.data(), 2, 10, D)),
                      Contains("k heads = 1 must equal the cache's kv_heads = 2"));
  for (const float x : q) REQUIRE(x == 1.0f);
  for (const float x : k) REQUIRE(x == 1.0f);
}

TEST_CASE("fope: plans, coefficients, positions and inverses that had no defined result are "
          "rejected", "[fope][errors]") {
  const Eigen::Index D = 8, F = 2, P = 4;
  std::vector<float> cache(static_cast<std::size_t>(P * D), -9.0f);
  const posenc::TensorView<float, 3> cache_view(cache.data(), 1, P, D);
  std::vector<float> C(static_cast<std::size_t>(F * F), 0.5f);
  const posenc::ConstTensorView<float, 3> cv(C.data(), 1, F, F);
  // A plan the RoPE calls reject (inv_freq inf) filled the cache with NaN.
  auto bad_plan = plan(D);
  bad_plan.inv_freq[1] = std::numeric_limits<double>::infinity();
  REQUIRE_THROWS_WITH(posenc::fill_fope_cos_sin_cache<float>(bad_plan, cv, cv, cache_view),
                      Contains("inv_freq[1] = inf must be finite and >= 0"));
  bad_plan.inv_freq[1] = -0.5;  // a negative frequency turns the wrong way: no such plan
  REQUIRE_THROWS_WITH(posenc::fill_fope_cos_sin_cache<float>(bad_plan, cv, cv, cache_view),
                      Contains("inv_freq[1] = -0.5 must be finite and >= 0"));
  // Finite double coefficients whose mix passes FLT_MAX: the float conversion was undefined.
  const std::vector<double> huge(static_cast<std::size_t>(F * F), 1e300);
  const posenc::ConstTensorView<double, 3> hv(huge.data(), 1, F, F);
  REQUIRE_THROWS_AS(posenc::fill_fope_cos_sin_cache<double>(plan(D), hv, hv, cache_view),
                    std::out_of_range);
  REQUIRE_THROWS_WITH(posenc::fill_fope_cos_sin_cache<double>(plan(D), hv, hv, cache_view),
                      Contains("cos_coef[0, :, 0] sums to 2.0000000000000001e+300 in magnitude"));
  for (const float x : cache) REQUIRE(x == -9.0f);

  // Pair 1's coefficients all 0: cos = sin = 0 at every position, a pair with no inverse.
  C = {1.0f, 0.0f, 0.0f, 0.0f};  // C[D = 0, d = 0] = 1, the rest 0
  posenc::fill_fope_cos_sin_cache<float>(plan(D), cv, cv, cache_view);
  std::vector<float> q(static_cast<std::size_t>(D), 1.0f), k = q;
  const auto call = [&](const posenc::RopePositions& pos, posenc::RopeDirection dir) {
    posenc::RopeApplyOptions o;
    o.direction = dir;
    posenc::apply_fope_qk_inplace<float>(posenc::rope_heads(posenc::TensorView<float, 4>(q.data(), 1, 1, 1, D)),
                                         posenc::rope_heads(posenc::TensorView<float, 4>(k.data(), 1, 1, 1, D)),
                                         pos, posenc::ConstTensorView<float, 3>(cache.data(), 1, P, D), o);
  };
  REQUIRE_THROWS_WITH(call(posenc::RopePositions::contiguous(1, 1), posenc::RopeDirection::kInverse),
                      Contains("cache row (kv head 0, position 0) pair 1 has cos = sin = 0"));
  // ids + offset of INT64_MAX + 1 wrapped before the range check.
  const std::vector<std::int64_t> big = {std::numeric_limits<std::int64_t>::max()};
  REQUIRE_THROWS_WITH(call(posenc::RopePositions::from_ids(posenc::PositionIdsView(big.data(), 1, 1), 1),
                           posenc::RopeDirection::kForward),
                      Contains("position_ids[0, 0] = 9223372036854775807 must be in [0, 2^53]"));
  for (const float x : q) REQUIRE(x == 1.0f);
  for (const float x : k) REQUIRE(x == 1.0f);
  // Forward is defined there (the pair maps to 0).
  call(posenc::RopePositions::contiguous(1, 1), posenc::RopeDirection::kForward);
  CHECK(q[1] == 0.0f);
  CHECK(q[1 + D / 2] == 0.0f);
}

TEST_CASE("fope: frequency count, cache shapes and coefficient bounds at their limits",
          "[fope][errors]") {
  // vLLM FourierRotaryEmbedding._compute_inv_freq keeps inv_freq > 2 pi / L, strictly: a
  // frequency of exactly one period over L is dropped.
  posenc::RopeFrequencies fr;
  const double two_pi = 2.0 * 3.14159265358979323846;
  fr.inv_freq = {7.0, two_pi, 1.0};
  CHECK(posenc::fope_num_frequencies(fr, std::nullopt, 1) == 1);
  CHECK_THROWS_AS(posenc::fope_num_frequencies(plan(8), std::nullopt, 0), std::invalid_argument);

  const Eigen::Index D = 8, F = 2;
  const auto f = plan(D);
  std::vector<float> C(64, 0.0f), cache(static_cast<std::size_t>(2 * 10 * D), -9.0f);
  const auto untouched = [&] {
    for (const float x : cache) REQUIRE(x == -9.0f);
  };
  const posenc::ConstTensorView<float, 3> c1(C.data(), 1, F, F);
  using CV = posenc::ConstTensorView<float, 3>;
  const auto fill = [&](CV cc, CV sc, Eigen::Index kv, Eigen::Index len) {
    posenc::fill_fope_cos_sin_cache<float>(f, cc, sc,
                                           posenc::TensorView<float, 3>(cache.data(), kv, len, D));
  };
  // An empty cache (no kv head, or no position) is a bad shape, not a no-op.
  CHECK_THROWS_AS(fill(c1, c1, 1, 0), std::invalid_argument);
  CHECK_THROWS_AS(fill(c1, c1, 0, 10), std::invalid_argument);
  // cos_coef [1, F, F + 1] and sin_coef [2, F, F] against [1, F, F].
  CHECK_THROWS_AS(fill(CV(C.data(), 1, F, F + 1), c1, 1, 10), std::invalid_argument);
  CHECK_THROWS_AS(fill(c1, CV(C.data(), 2, F, F), 2, 10), std::invalid_argument);
  // Column d = 0 mixes FLT_MAX twice (its sum of magnitudes 2 FLT_MAX): out of range, although
  // every row (k fixed) sums to FLT_MAX.
  const float fmax = std::numeric_limits<float>::max();
  C[0] = fmax;  // C[0, 0, 0]
  C[2] = fmax;  // C[0, 1, 0]
  CHECK_THROWS_AS(fill(c1, c1, 1, 10), std::out_of_range);
  untouched();
  // A column summing to exactly FLT_MAX fits: cos[0, 0] = cos(0) FLT_MAX = FLT_MAX.
  C[2] = 0.0f;
  REQUIRE_NOTHROW(fill(c1, c1, 1, 10));
  CHECK(cache[0] == fmax);
}

TEST_CASE("fope: a zero frequency mixes cos 1 and sin 0, by the definition", "[fope]") {
  const Eigen::Index D = 8, F = 2, L = 6;
  auto f = plan(D);
  f.inv_freq[0] = 0.0;  // finite and >= 0: a constant term
  const std::vector<float> C = {0.5f, -1.0f, 2.0f, 0.25f}, S = {1.5f, 0.75f, -0.5f, 1.0f};
  std::vector<float> cache(static_cast<std::size_t>(L * D), -9.0f);
  using CV = posenc::ConstTensorView<float, 3>;
  REQUIRE_NOTHROW(posenc::fill_fope_cos_sin_cache<float>(
      f, CV(C.data(), 1, F, F), CV(S.data(), 1, F, F),
      posenc::TensorView<float, 3>(cache.data(), 1, L, D)));
  for (Eigen::Index t = 0; t < L; ++t)
    for (Eigen::Index d = 0; d < D / 2; ++d) {
      const CosSinLD e = fope_ld(f, C, S, 0, F, t, d);
      const auto at = static_cast<std::size_t>(t * D + d);
      CHECK(std::abs(cache[at] - static_cast<double>(e.c)) < 1e-6);
      CHECK(std::abs(cache[at + D / 2] - static_cast<double>(e.s)) < 1e-6);
    }
}

TEST_CASE("fope: apply checks every head count, width, token and inverse pair before writing",
          "[fope][errors]") {
  // Per kv head tables, head_dim 4, F = 2 = head_dim / 2: head 0 the identity mixture, head 1
  // the identity with its last pair's column zeroed (cos = sin = 0 there at every position).
  const Eigen::Index D = 4, F = 2, L = 5;
  const auto f = plan(D);
  const std::vector<float> C = {1, 0, 0, 1, 1, 0, 0, 0};
  std::vector<float> cache(static_cast<std::size_t>(2 * L * D));
  const posenc::ConstTensorView<float, 3> cv(C.data(), 2, F, F);
  posenc::fill_fope_cos_sin_cache<float>(f, cv, cv,
                                         posenc::TensorView<float, 3>(cache.data(), 2, L, D));
  const posenc::ConstTensorView<float, 3> cc(cache.data(), 2, L, D);
  std::vector<float> q(static_cast<std::size_t>(2 * 4 * D), 1.0f);
  std::vector<float> k(static_cast<std::size_t>(2 * 2 * D), 1.0f);
  const auto qh = [&](Eigen::Index seq, Eigen::Index heads, Eigen::Index d) {
    return posenc::rope_heads(posenc::TensorView<float, 4>(q.data(), 1, seq, heads, d));
  };
  const auto kh = [&](Eigen::Index seq, Eigen::Index heads, Eigen::Index d) {
    return posenc::rope_heads(posenc::TensorView<float, 4>(k.data(), 1, seq, heads, d));
  };
  const auto one = posenc::RopePositions::contiguous(1, 1);
  using posenc::apply_fope_qk_inplace;
  CHECK_THROWS_AS(apply_fope_qk_inplace<float>(qh(1, 3, D), kh(1, 2, D), one, cc),
                  std::invalid_argument);
  CHECK_THROWS_AS(apply_fope_qk_inplace<float>(qh(1, 2, D), kh(1, 2, 2 * D), one, cc),
                  std::invalid_argument);
  CHECK_THROWS_AS(apply_fope_qk_inplace<float>(qh(2, 2, D), kh(1, 2, D),
                                               posenc::RopePositions::contiguous(1, 2), cc),
                  std::invalid_argument);
  posenc::RopeApplyOptions inv;
  inv.direction = posenc::RopeDirection::kInverse;
  CHECK_THROWS_WITH(apply_fope_qk_inplace<float>(qh(1, 2, D), kh(1, 2, D), one, cc, inv),
                    Contains("kv head 1, position 0) pair 1 has cos = sin = 0"));
  for (const float x : q) REQUIRE(x == 1.0f);
  for (const float x : k) REQUIRE(x == 1.0f);
}

TEST_CASE("fope: a pair with cos 0 but sin not 0 has an inverse, and positions past 2^53 are "
          "invalid arguments", "[fope]") {
  // One kv head, head_dim 4, F = 2: cos_coef's column 1 is zero, so pair 1 has cos = 0 and
  // sin = sin(t w_1) at every t; c^2 + s^2 > 0 for t >= 1, so the inverse exists there.
  const Eigen::Index D = 4, F = 2, L = 4;
  const auto f = plan(D);
  const std::vector<float> C = {1, 0, 0, 0}, S = {1, 0, 0, 1};
  std::vector<float> cache(static_cast<std::size_t>(L * D));
  using CV = posenc::ConstTensorView<float, 3>;
  posenc::fill_fope_cos_sin_cache<float>(f, CV(C.data(), 1, F, F), CV(S.data(), 1, F, F),
                                         posenc::TensorView<float, 3>(cache.data(), 1, L, D));
  REQUIRE(cache[static_cast<std::size_t>(1 * D + 1)] == 0.0f);
  REQUIRE(cache[static_cast<std::size_t>(1 * D + D / 2 + 1)] != 0.0f);
  const std::vector<double> q0 = {0.3, -1.2, 0.7, 2.5, -0.4, 1.1, 0.9, -0.6};
  const std::vector<double> k0 = {1.0, 0.5, -0.25, 2.0};
  auto q = q0, k = k0;
  const auto qh = posenc::rope_heads(posenc::TensorView<double, 4>(q.data(), 1, 1, 2, D));
  const auto kh = posenc::rope_heads(posenc::TensorView<double, 4>(k.data(), 1, 1, 1, D));
  const std::vector<std::int64_t> pos = {1};
  const auto p = posenc::RopePositions::from_ids(posenc::PositionIdsView(pos.data(), 1, 1));
  const CV cc(cache.data(), 1, L, D);
  posenc::apply_fope_qk_inplace<double>(qh, kh, p, cc);
  posenc::RopeApplyOptions inv;
  inv.direction = posenc::RopeDirection::kInverse;
  REQUIRE_NOTHROW(posenc::apply_fope_qk_inplace<double>(qh, kh, p, cc, inv));
  for (std::size_t i = 0; i < q.size(); ++i) CHECK(std::abs(q[i] - q0[i]) < 1e-12);
  for (std::size_t i = 0; i < k.size(); ++i) CHECK(std::abs(k[i] - k0[i]) < 1e-12);
  // Offset 2^53 + id 1: the documented std::invalid_argument, not the cache's out_of_range.
  const auto past = posenc::RopePositions::from_ids(posenc::PositionIdsView(pos.data(), 1, 1),
                                                    std::int64_t{1} << 53);
  CHECK_THROWS_AS(posenc::apply_fope_qk_inplace<double>(qh, kh, past, cc), std::invalid_argument);
}
