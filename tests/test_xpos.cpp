// xPos (Sun et al. 2023; FlashAttention's rotary scale_base): expected values are the paper's
// closed forms in long double — zeta_j = (2j + 0.4 r) / (1.4 r), the q / k scales
// zeta^(+-(p - c) / gamma), and q_n . k_m = sum_j zeta_j^((n - m) / gamma) [(q1 k1 + q2 k2)
// cos((m - n) w_j) + (q2 k1 - q1 k2) sin((m - n) w_j)] for RoPE's rotation of each pair.

#include <catch2/catch.hpp>

#include <posenc/rope.hpp>
#include <posenc/rope_frequencies.hpp>
#include <posenc/xpos.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "support/rng.hpp"

using Catch::Matchers::Contains;
using posenc::TensorView;

namespace {

long double zeta(int j, int r) { return (2.0L * j + 0.4L * r) / (1.4L * r); }

posenc::RopeFrequencies plan(Eigen::Index d) {
  posenc::RopeParams p;
  p.head_dim = d;
  return posenc::compute_rope_frequencies(p);
}

}  // namespace

TEMPLATE_TEST_CASE("xpos: cache rows are RoPE's cos / sin times zeta^(+-(p - c) / gamma)",
                   "[rope][xpos]", float, double) {
  constexpr Eigen::Index d = 16, rows = 40;
  const auto f = plan(d);
  const posenc::XposParams xp{512.0, 20};
  std::vector<TestType> qc(rows * d), kc(rows * d);
  posenc::fill_xpos_cos_sin_caches<TestType>(f, xp, TensorView<TestType, 2>(qc.data(), rows, d),
                                             TensorView<TestType, 2>(kc.data(), rows, d), 1000);
  const double tol = std::is_same_v<TestType, float> ? 1e-6 : 1e-12;  // double: angles ~ 10^3 rad
  for (Eigen::Index r = 0; r < rows; ++r) {
    const long double p = 1000 + r, power = (p - 20) / 512.0L;
    for (int j = 0; j < d / 2; ++j) {
      CAPTURE(r, j);
      const long double w = std::pow(10000.0L, -2.0L * j / d), up = std::pow(zeta(j, d), power);
      const long double c = std::cos(p * w), s = std::sin(p * w);
      REQUIRE(std::abs(qc[r * d + j] - static_cast<double>(up * c)) <= tol * up);
      REQUIRE(std::abs(qc[r * d + d / 2 + j] - static_cast<double>(up * s)) <= tol * up);
      REQUIRE(std::abs(kc[r * d + j] - static_cast<double>(c / up)) <= tol / up);
      REQUIRE(std::abs(kc[r * d + d / 2 + j] - static_cast<double>(s / up)) <= tol / up);
    }
  }
}

TEST_CASE("xpos: q . k decays as zeta^((n - m) / gamma) and does not depend on the centre",
          "[rope][xpos]") {
  constexpr Eigen::Index d = 16, rows = 300;
  const auto f = plan(d);
  const auto q0 = posenc_test::random_vector<double>(d, 5), k0 = posenc_test::random_vector<double>(d, 6);
  for (const std::int64_t center : {std::int64_t{0}, std::int64_t{150}, std::int64_t{299}}) {
    CAPTURE(center);
    std::vector<double> qc(rows * d), kc(rows * d);
    posenc::fill_xpos_cos_sin_caches<double>(f, {16.0, center},
                                             TensorView<double, 2>(qc.data(), rows, d),
                                             TensorView<double, 2>(kc.data(), rows, d));
    for (const auto& [n, m] : {std::pair<std::int64_t, std::int64_t>{10, 3}, {250, 40}, {299, 0}, {77, 77}}) {
      CAPTURE(n, m);
      auto q = q0, k = k0;
      posenc::apply_rope_inplace_cached<double>(
          posenc::rope_heads<double>(TensorView<double, 4>(q.data(), 1, 1, 1, d)),
          posenc::RopePositions::contiguous(1, 1, n), posenc::ConstTensorView<double, 2>(qc.data(), rows, d),
          posenc::RopeLayout::kHalfSplit);
      posenc::apply_rope_inplace_cached<double>(
          posenc::rope_heads<double>(TensorView<double, 4>(k.data(), 1, 1, 1, d)),
          posenc::RopePositions::contiguous(1, 1, m), posenc::ConstTensorView<double, 2>(kc.data(), rows, d),
          posenc::RopeLayout::kHalfSplit);
      double got = 0.0;
      for (Eigen::Index i = 0; i < d; ++i) got += q[i] * k[i];
      long double want = 0.0L;
      for (int j = 0; j < d / 2; ++j) {
        const long double w = std::pow(10000.0L, -2.0L * j / d), a = static_cast<long double>(m - n) * w;
        const long double q1 = q0[j], q2 = q0[j + d / 2], k1 = k0[j], k2 = k0[j + d / 2];
        want += std::pow(zeta(j, d), static_cast<long double>(n - m) / 16.0L) *
                ((q1 * k1 + q2 * k2) * std::cos(a) + (q2 * k1 - q1 * k2) * std::sin(a));
      }
      REQUIRE(std::abs(got - static_cast<double>(want)) <= 1e-12 * std::max(1.0L, std::abs(want)));
    }
  }
}

TEST_CASE("xpos: bad input is rejected before anything is written", "[rope][xpos][errors]") {
  const auto f = plan(16);
  std::vector<float> qc(4 * 16, -1.0f), kc(4 * 16, -1.0f), small(3 * 16, -1.0f);
  const TensorView<float, 2> q(qc.data(), 4, 16), k(kc.data(), 4, 16);
  REQUIRE_THROWS_WITH(posenc::fill_xpos_cos_sin_caches<float>(f, {0.0, 0}, q, k),
                      Contains("scale_base = 0 must be finite and > 0"));
  REQUIRE_THROWS_WITH(posenc::fill_xpos_cos_sin_caches<float>(f, {512.0, 0}, q, TensorView<float, 2>(small.data(), 3, 16)),
                      Contains("k_cache shape [3, 16] must equal q_cache's [4, 16]"));
  // zeta_0 = 0.4 / 1.4: 100000 positions from the centre at gamma = 512 is 2^-353: beyond float.
  REQUIRE_THROWS_AS(posenc::fill_xpos_cos_sin_caches<float>(f, {512.0, 0}, q, k, 100000), std::out_of_range);
  REQUIRE_THROWS_WITH(posenc::fill_xpos_cos_sin_caches<float>(f, {512.0, 0}, q, k, 100000),
                      Contains("position 100003 is 100003 from center = 0"));
  // The farthest row may be the first: float's limit is 36260.7 positions at gamma = 512 (ln of
  // FLT_MAX / |ln zeta_0|); rows 0..3 with the centre at 36262 put row 0 past it, row 3 not.
  REQUIRE_THROWS_WITH(posenc::fill_xpos_cos_sin_caches<float>(f, {512.0, 36262}, q, k),
                      Contains("position 0 is 36262 from center = 36262"));
  REQUIRE(std::all_of(qc.begin(), qc.end(), [](float e) { return e == -1.0f; }));
  REQUIRE(std::all_of(kc.begin(), kc.end(), [](float e) { return e == -1.0f; }));
  // Centred on the rows, the same positions fit.
  posenc::fill_xpos_cos_sin_caches<float>(f, {512.0, 100001}, q, k, 100000);
  REQUIRE(std::isfinite(kc[0]));
}

TEST_CASE("xpos: a small attention factor with a far position stays finite in double",
          "[rope][xpos]") {
  // a = 1e-30, gamma = 1, position 620: a zeta_0^-620 = 2.1e307 fits a double (the guard lets
  // it through), but zeta_0^620 itself underflows, so a / zeta^p gave inf (and inf * 0 NaN).
  posenc::RopeFrequencies f;
  f.rotary_dim = 2;
  f.head_dim = 2;
  f.inv_freq = {0.0};  // cos 1, sin 0: the cache entries are the scales alone
  f.attention_factor = 1e-30;
  std::vector<double> qc(2), kc(2);
  posenc::fill_xpos_cos_sin_caches<double>(f, {1.0, 0}, TensorView<double, 2>(qc.data(), 1, 2),
                                           TensorView<double, 2>(kc.data(), 1, 2), 620);
  // zeta_0 = (0 + 0.4 r) / (1.4 r) = 2/7: k = a (2/7)^-620, q = a (2/7)^620 (0 in double).
  const long double want_k = 1e-30L * std::pow(3.5L, 620.0L);
  CHECK(std::abs(kc[0] - static_cast<double>(want_k)) <= 1e-12 * static_cast<double>(want_k));
  CHECK(kc[1] == 0.0);
  CHECK(qc[0] == 0.0);
}

TEST_CASE("xpos: bad shapes and an infinite scale_base are rejected before writing",
          "[rope][xpos][errors]") {
  const auto f = plan(16);
  std::vector<float> qc(4 * 16, -1.0f), kc(4 * 16, -1.0f);
  const TensorView<float, 2> q(qc.data(), 4, 16), k(kc.data(), 4, 16);
  REQUIRE_THROWS_WITH(posenc::fill_xpos_cos_sin_caches<float>(
                          f, {std::numeric_limits<double>::infinity(), 0}, q, k),
                      Contains("must be finite and > 0"));
  // No rows.
  const TensorView<float, 2> q0(qc.data(), 0, 16), k0(kc.data(), 0, 16);
  REQUIRE_THROWS_WITH(posenc::fill_xpos_cos_sin_caches<float>(f, {512.0, 0}, q0, k0),
                      Contains("must be [rows > 0, rotary_dim = 16]"));
  // k_cache rows right, width half the rotary_dim (its buffer is large enough either way).
  const TensorView<float, 2> narrow(kc.data(), 4, 8);
  REQUIRE_THROWS_WITH(posenc::fill_xpos_cos_sin_caches<float>(f, {512.0, 0}, q, narrow),
                      Contains("k_cache shape [4, 8] must equal q_cache's [4, 16]"));
  REQUIRE(std::all_of(qc.begin(), qc.end(), [](float e) { return e == -1.0f; }));
  REQUIRE(std::all_of(kc.begin(), kc.end(), [](float e) { return e == -1.0f; }));
}

TEST_CASE("xpos: positions and the centre reach 2^53 inclusive", "[rope][xpos][errors]") {
  // first_position in [0, 2^53 - rows] and center in [0, 2^53] (the documented ranges).
  const auto f = plan(16);
  constexpr std::int64_t top = std::int64_t{1} << 53;
  std::vector<double> qc(4 * 16), kc(4 * 16);
  const TensorView<double, 2> q(qc.data(), 4, 16), k(kc.data(), 4, 16);
  // Rows 2^53 - 4 .. 2^53 - 1, centred on row 2: its scale is zeta^0 = 1 for q and k alike.
  posenc::fill_xpos_cos_sin_caches<double>(f, {512.0, top - 2}, q, k, top - 4);
  for (Eigen::Index j = 0; j < 16; ++j) {
    CAPTURE(j);
    CHECK(qc[2 * 16 + j] == kc[2 * 16 + j]);
    CHECK(std::isfinite(qc[j]));
  }
  REQUIRE_THROWS_WITH(posenc::fill_xpos_cos_sin_caches<double>(f, {512.0, top - 2}, q, k, top - 3),
                      Contains("must be in [0, 2^53 - rows]"));
  // The centre at 2^53 itself, one position past the last row.
  posenc::fill_xpos_cos_sin_caches<double>(f, {512.0, top}, q, k, top - 4);
  CHECK(std::isfinite(kc[0]));
  REQUIRE_THROWS_WITH(posenc::fill_xpos_cos_sin_caches<double>(f, {512.0, top + 1}, q, k, top - 4),
                      Contains("must be in [0, 2^53]"));
}

TEST_CASE("xpos: a q_cache of the wrong width is rejected before writing",
          "[rope][xpos][errors]") {
  // q_cache must be [rows, rotary_dim] (k_cache right here, so only q's check can refuse it).
  const auto f = plan(16);
  std::vector<float> qc(4 * 16, -1.0f), kc(4 * 16, -1.0f);
  const TensorView<float, 2> narrow(qc.data(), 4, 8), k(kc.data(), 4, 16);
  REQUIRE_THROWS_WITH(posenc::fill_xpos_cos_sin_caches<float>(f, {512.0, 0}, narrow, k),
                      Contains("q_cache shape [4, 8] must be [rows > 0, rotary_dim = 16]"));
  REQUIRE(std::all_of(qc.begin(), qc.end(), [](float e) { return e == -1.0f; }));
  REQUIRE(std::all_of(kc.begin(), kc.end(), [](float e) { return e == -1.0f; }));
}
