// RoPE kernels: algebraic properties, the seed articles' numbers, layouts, positions, dtypes,
// caches and every error path. Expected values come from closed forms (cos/sin of hand-made
// angles) or from posenc::reference (long double, textbook 2x2 rotation per pair).

#include <catch2/catch.hpp>

#include <posenc/reference/rope.hpp>
#include <posenc/rope.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "support/check.hpp"
#include "support/rng.hpp"
#include "support/rope_plans.hpp"

namespace {

using posenc::HeadLayout;
using posenc::RopeLayout;
using Catch::Matchers::Contains;
using Catch::Matchers::WithinAbs;
using Catch::Matchers::WithinRel;

template <typename T>
double tolerance();
template <>
double tolerance<float>() { return 2e-6; }
template <>
double tolerance<double>() { return 1e-13; }
template <>
double tolerance<Eigen::half>() { return 2e-3; }
template <>
double tolerance<Eigen::bfloat16>() { return 1.6e-2; }

/// A default plan (theta 10000) for head_dim / rotary_dim / offset.
posenc::RopeFrequencies plan(Eigen::Index head_dim, Eigen::Index rotary_dim = 0,
                             Eigen::Index offset = 0, double theta = 10000.0) {
  posenc::RopeParams p;
  p.head_dim = head_dim;
  p.rotary_dim = rotary_dim;
  p.rotary_offset = offset;
  p.theta = theta;
  return posenc::compute_rope_frequencies(p);
}

std::vector<long double> ref_inv(Eigen::Index head_dim, Eigen::Index rotary_dim = 0,
                                 double theta = 10000.0) {
  posenc::RopeParams p;
  p.head_dim = head_dim;
  p.rotary_dim = rotary_dim;
  p.theta = theta;
  return posenc::reference::rope_frequencies(p).inv_freq;
}

template <typename T>
std::vector<T> seq_positions_tensor(std::size_t n, std::uint64_t seed) {
  return posenc_test::random_vector<T>(n, seed);
}

/// One head of D random doubles at position p, before and after the half-split rotation by f.
std::pair<std::vector<double>, std::vector<double>> rotate_one_token(const posenc::RopeFrequencies& f,
                                                                     Eigen::Index D, std::int64_t p,
                                                                     std::uint64_t seed) {
  auto x = posenc_test::random_vector<double>(static_cast<std::size_t>(D), seed);
  const auto before = x;
  const std::int64_t pos[1] = {p};
  posenc::apply_rope_inplace<double>(posenc::TensorView<double, 4>(x.data(), 1, 1, 1, D),
                                     posenc::PositionIdsView(pos, 1, 1), f, RopeLayout::kHalfSplit);
  return {before, x};
}

std::vector<std::int64_t> arange(std::int64_t n, std::int64_t start = 0) {
  std::vector<std::int64_t> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = start + i;
  return v;
}

/// Full rotation matrix R(p) [r, r] of a plan with head_dim = r, built column by column by
/// rotating the basis vectors with the fast kernel (double storage).
std::vector<double> rotation_matrix(const posenc::RopeFrequencies& f, RopeLayout layout,
                                    std::int64_t p) {
  const Eigen::Index r = f.rotary_dim;
  std::vector<double> m(static_cast<std::size_t>(r * r));
  std::vector<double> e(static_cast<std::size_t>(r));
  const std::int64_t pos[1] = {p};
  for (Eigen::Index col = 0; col < r; ++col) {
    std::fill(e.begin(), e.end(), 0.0);
    e[static_cast<std::size_t>(col)] = 1.0;
    posenc::apply_rope_inplace<double>(posenc::TensorView<double, 4>(e.data(), 1, 1, 1, r),
                                       posenc::PositionIdsView(pos, 1, 1), f, layout);
    for (Eigen::Index row = 0; row < r; ++row) m[static_cast<std::size_t>(row * r + col)] = e[static_cast<std::size_t>(row)];
  }
  return m;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Algebra
// ---------------------------------------------------------------------------------------------

TEST_CASE("rope: R(m)^T R(n) = R(n - m), per 2x2 block and as the full matrix", "[rope][algebra]") {
  const Eigen::Index r = 16;
  const auto f = plan(r);
  const auto inv = ref_inv(r);
  for (const RopeLayout layout : {RopeLayout::kHalfSplit, RopeLayout::kInterleaved}) {
    CAPTURE(posenc::to_string(layout));
    for (const auto& [m, n] : std::vector<std::pair<std::int64_t, std::int64_t>>{{3, 10}, {10, 3}, {1000, 1017}, {0, 5}}) {
      CAPTURE(m, n);
      const auto rm = rotation_matrix(f, layout, m);
      const auto rn = rotation_matrix(f, layout, n);
      // Expected R(n - m): block diagonal with [[c, -s], [s, c]] on each pair, zeros elsewhere.
      std::vector<long double> expect(static_cast<std::size_t>(r * r), 0.0L);
      for (Eigen::Index j = 0; j < r / 2; ++j) {
        const auto [i1, i2] = posenc::reference::rope_pair(layout, j, r, 0);
        const long double a = static_cast<long double>(n - m) * inv[static_cast<std::size_t>(j)];
        expect[static_cast<std::size_t>(i1 * r + i1)] = std::cos(a);
        expect[static_cast<std::size_t>(i1 * r + i2)] = -std::sin(a);
        expect[static_cast<std::size_t>(i2 * r + i1)] = std::sin(a);
        expect[static_cast<std::size_t>(i2 * r + i2)] = std::cos(a);
      }
      std::vector<double> prod(static_cast<std::size_t>(r * r), 0.0);
      for (Eigen::Index i = 0; i < r; ++i)
        for (Eigen::Index k = 0; k < r; ++k) {
          double acc = 0.0;
          for (Eigen::Index t = 0; t < r; ++t) acc += rm[static_cast<std::size_t>(t * r + i)] * rn[static_cast<std::size_t>(t * r + k)];
          prod[static_cast<std::size_t>(i * r + k)] = acc;
        }
      POSENC_REQUIRE_CLOSE(posenc_test::compare(
          prod.size(), [&](std::size_t i) { return prod[i]; },
          [&](std::size_t i) { return static_cast<double>(expect[i]); }, 1e-12));
    }
  }
}

TEST_CASE("rope: <R(m)q, R(n)k> is invariant under a common shift of 10, 1e3, 1e5", "[rope][algebra]") {
  const Eigen::Index d = 128;
  const auto f = plan(d);
  const auto inv = ref_inv(d);
  const auto q0 = posenc_test::random_vector<double>(d, 11);
  const auto k0 = posenc_test::random_vector<double>(d, 12);
  for (const RopeLayout layout : {RopeLayout::kHalfSplit, RopeLayout::kInterleaved}) {
    const auto score = [&](std::int64_t m, std::int64_t n) {
      auto q = q0;
      auto k = k0;
      const std::int64_t pm[1] = {m}, pn[1] = {n};
      posenc::apply_rope_inplace<double>(posenc::TensorView<double, 4>(q.data(), 1, 1, 1, d),
                                         posenc::PositionIdsView(pm, 1, 1), f, layout);
      posenc::apply_rope_inplace<double>(posenc::TensorView<double, 4>(k.data(), 1, 1, 1, d),
                                         posenc::PositionIdsView(pn, 1, 1), f, layout);
      double acc = 0.0;
      for (Eigen::Index i = 0; i < d; ++i) acc += q[static_cast<std::size_t>(i)] * k[static_cast<std::size_t>(i)];
      return acc;
    };
    // Closed form q^T R(n - m) k: sum_j (q1 k1 + q2 k2) cos(dw) + (q2 k1 - q1 k2) sin(dw), d = n - m.
    const auto closed = [&](std::int64_t delta) {
      long double acc = 0.0L;
      for (Eigen::Index j = 0; j < d / 2; ++j) {
        const auto [i1, i2] = posenc::reference::rope_pair(layout, j, d, 0);
        const long double a = static_cast<long double>(delta) * inv[static_cast<std::size_t>(j)];
        const long double q1 = q0[static_cast<std::size_t>(i1)], q2 = q0[static_cast<std::size_t>(i2)];
        const long double k1 = k0[static_cast<std::size_t>(i1)], k2 = k0[static_cast<std::size_t>(i2)];
        acc += (q1 * k1 + q2 * k2) * std::cos(a) + (q2 * k1 - q1 * k2) * std::sin(a);
      }
      return static_cast<double>(acc);
    };
    const double base = score(3, 7);
    CHECK_THAT(base, WithinAbs(closed(4), 1e-12));
    for (const std::int64_t shift : {10, 1000, 100000}) {
      CAPTURE(shift);
      CHECK_THAT(score(3 + shift, 7 + shift), WithinAbs(base, 1e-10));
    }
  }
}

TEST_CASE("rope: the norm of every head vector is preserved", "[rope][algebra]") {
  const Eigen::Index B = 2, S = 37, H = 3, D = 64;
  auto x = posenc_test::random_vector<float>(static_cast<std::size_t>(B * S * H * D), 21);
  const auto before = x;
  const auto pos = arange(B * S, 5);
  for (const RopeLayout layout : {RopeLayout::kHalfSplit, RopeLayout::kInterleaved}) {
    x = before;
    posenc::apply_rope_inplace<float>(posenc::TensorView<float, 4>(x.data(), B, S, H, D),
                                      posenc::PositionIdsView(pos.data(), B, S), plan(D), layout);
    for (Eigen::Index row = 0; row < B * S * H; ++row) {
      double n0 = 0.0, n1 = 0.0;
      for (Eigen::Index i = 0; i < D; ++i) {
        n0 += double(before[static_cast<std::size_t>(row * D + i)]) * before[static_cast<std::size_t>(row * D + i)];
        n1 += double(x[static_cast<std::size_t>(row * D + i)]) * x[static_cast<std::size_t>(row * D + i)];
      }
      REQUIRE_THAT(std::sqrt(n1), WithinRel(std::sqrt(n0), 1e-6));
    }
  }
}

TEMPLATE_TEST_CASE("rope: position 0 is the identity (bit for bit)", "[rope][algebra]", float,
                   double, Eigen::half, Eigen::bfloat16) {
  const Eigen::Index S = 4, H = 2, D = 32;
  auto x = posenc_test::random_vector<TestType>(static_cast<std::size_t>(S * H * D), 31);
  const auto before = x;
  const std::vector<std::int64_t> pos(static_cast<std::size_t>(S), 0);
  for (const RopeLayout layout : {RopeLayout::kHalfSplit, RopeLayout::kInterleaved}) {
    posenc::apply_rope_inplace<TestType>(posenc::TensorView<TestType, 4>(x.data(), 1, S, H, D),
                                         posenc::PositionIdsView(pos.data(), 1, S), plan(D), layout);
    REQUIRE(std::memcmp(x.data(), before.data(), x.size() * sizeof(TestType)) == 0);
  }
}

TEMPLATE_TEST_CASE("rope: inverse(apply(x)) == x", "[rope][algebra][inverse]", float, double,
                   Eigen::half, Eigen::bfloat16) {
  const Eigen::Index S = 50, H = 4, D = 64;
  auto x = posenc_test::random_vector<TestType>(static_cast<std::size_t>(S * H * D), 41);
  const auto before = x;
  auto f = plan(D, 48, 8);
  f.attention_factor = 1.25;  // the inverse also undoes the attention factor
  const auto pos = arange(S, 1000);
  for (const RopeLayout layout : {RopeLayout::kHalfSplit, RopeLayout::kInterleaved}) {
    const auto heads = posenc::rope_heads<TestType>(posenc::TensorView<TestType, 4>(x.data(), 1, S, H, D));
    const auto positions = posenc::RopePositions::contiguous(1, S, 1000);
    posenc::apply_rope_inplace<TestType>(heads, positions, f, layout);
    posenc::RopeApplyOptions inv;
    inv.direction = posenc::RopeDirection::kInverse;
    posenc::apply_rope_inplace<TestType>(heads, positions, f, layout, inv);
    POSENC_REQUIRE_CLOSE(posenc_test::compare(
        x.size(), [&](std::size_t i) { return posenc::detail::to_double(x[i]); },
        [&](std::size_t i) { return posenc::detail::to_double(before[i]); },
        2 * tolerance<TestType>()));
  }
}

TEST_CASE("rope: the transpose direction is the adjoint, <R^T y, x> = <y, a R x>", "[rope][algebra]") {
  const Eigen::Index D = 64;
  auto f = plan(D);
  f.attention_factor = 1.3;
  const auto x0 = posenc_test::random_vector<double>(D, 51);
  const auto y0 = posenc_test::random_vector<double>(D, 52);
  auto x = x0, y = y0;
  const std::int64_t p[1] = {12345};
  const auto heads_x = posenc::rope_heads<double>(posenc::TensorView<double, 4>(x.data(), 1, 1, 1, D));
  const auto heads_y = posenc::rope_heads<double>(posenc::TensorView<double, 4>(y.data(), 1, 1, 1, D));
  const auto pos = posenc::RopePositions::from_ids(posenc::PositionIdsView(p, 1, 1));
  posenc::apply_rope_inplace<double>(heads_x, pos, f, RopeLayout::kHalfSplit);
  posenc::RopeApplyOptions t;
  t.direction = posenc::RopeDirection::kTranspose;
  posenc::apply_rope_inplace<double>(heads_y, pos, f, RopeLayout::kHalfSplit, t);
  double lhs = 0.0, rhs = 0.0;
  for (Eigen::Index i = 0; i < D; ++i) {
    lhs += y[static_cast<std::size_t>(i)] * x0[static_cast<std::size_t>(i)];
    rhs += y0[static_cast<std::size_t>(i)] * x[static_cast<std::size_t>(i)];
  }
  CHECK_THAT(lhs, WithinAbs(rhs, 1e-12));
}

TEST_CASE("rope: interleaved and half-split agree under the matching permutation of dims", "[rope][layout]") {
  const Eigen::Index S = 20, H = 3, D = 64, R = 48;
  const auto f = plan(D, R);
  const auto inter0 = posenc_test::random_vector<float>(static_cast<std::size_t>(S * H * D), 61);
  // half-split dim j <-> interleaved dim 2j, half-split dim R/2 + j <-> interleaved dim 2j + 1.
  auto half0 = inter0;
  for (Eigen::Index row = 0; row < S * H; ++row)
    for (Eigen::Index j = 0; j < R / 2; ++j) {
      half0[static_cast<std::size_t>(row * D + j)] = inter0[static_cast<std::size_t>(row * D + 2 * j)];
      half0[static_cast<std::size_t>(row * D + R / 2 + j)] = inter0[static_cast<std::size_t>(row * D + 2 * j + 1)];
    }
  auto inter = inter0, half = half0;
  const auto pos = arange(S, 77);
  posenc::apply_rope_inplace<float>(posenc::TensorView<float, 4>(inter.data(), 1, S, H, D),
                                    posenc::PositionIdsView(pos.data(), 1, S), f, RopeLayout::kInterleaved);
  posenc::apply_rope_inplace<float>(posenc::TensorView<float, 4>(half.data(), 1, S, H, D),
                                    posenc::PositionIdsView(pos.data(), 1, S), f, RopeLayout::kHalfSplit);
  for (Eigen::Index row = 0; row < S * H; ++row) {
    for (Eigen::Index j = 0; j < R / 2; ++j) {
      REQUIRE_THAT(half[static_cast<std::size_t>(row * D + j)], WithinAbs(inter[static_cast<std::size_t>(row * D + 2 * j)], 1e-6));
      REQUIRE_THAT(half[static_cast<std::size_t>(row * D + R / 2 + j)], WithinAbs(inter[static_cast<std::size_t>(row * D + 2 * j + 1)], 1e-6));
    }
    for (Eigen::Index i = R; i < D; ++i) REQUIRE(half[static_cast<std::size_t>(row * D + i)] == inter[static_cast<std::size_t>(row * D + i)]);
  }
}

TEMPLATE_TEST_CASE("rope: partial rotary and a rotary offset leave the other dims bit-identical",
                   "[rope][partial]", float, double, Eigen::half, Eigen::bfloat16) {
  const Eigen::Index S = 9, H = 2, D = 80;
  for (const auto& [rd, off] : std::vector<std::pair<Eigen::Index, Eigen::Index>>{{32, 0}, {32, 48}, {16, 8}}) {
    CAPTURE(rd, off);
    const auto f = plan(D, rd, off);
    auto x = posenc_test::random_vector<TestType>(static_cast<std::size_t>(S * H * D), 71);
    const auto before = x;
    const auto pos = arange(S, 3);
    for (const RopeLayout layout : {RopeLayout::kHalfSplit, RopeLayout::kInterleaved}) {
      x = before;
      posenc::apply_rope_inplace<TestType>(posenc::TensorView<TestType, 4>(x.data(), 1, S, H, D),
                                           posenc::PositionIdsView(pos.data(), 1, S), f, layout);
      const auto expect = posenc::reference::apply_rope(before.data(), 1, S, H, D, HeadLayout::kBSHD, pos.data(),
                                                        ref_inv(D, rd), 1.0L, off, layout);
      for (Eigen::Index row = 0; row < S * H; ++row)
        for (Eigen::Index i = 0; i < D; ++i) {
          const auto k = static_cast<std::size_t>(row * D + i);
          if (i < off || i >= off + rd) {
            REQUIRE(std::memcmp(&x[k], &before[k], sizeof(TestType)) == 0);
          } else {
            REQUIRE_THAT(posenc::detail::to_double(x[k]), WithinAbs(static_cast<double>(expect[k]), tolerance<TestType>()));
          }
        }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// The seed articles
// ---------------------------------------------------------------------------------------------

TEST_CASE("rope: seed - with w = 1, <R(1)q, R(2)k> = cos 1, and the same at (11, 12)", "[rope][seed]") {
  posenc::RopeFrequencies f;
  f.inv_freq = {1.0};
  f.rotary_dim = 2;
  const auto rotated = [&](std::int64_t p) {
    double v[2] = {1.0, 0.0};
    const std::int64_t pos[1] = {p};
    posenc::apply_rope_inplace<double>(posenc::TensorView<double, 4>(v, 1, 1, 1, 2),
                                       posenc::PositionIdsView(pos, 1, 1), f, RopeLayout::kInterleaved);
    return std::pair<double, double>{v[0], v[1]};
  };
  const auto [q1a, q1b] = rotated(1);
  CHECK_THAT(q1a, WithinAbs(std::cos(1.0), 1e-15));  // R(1)[1,0] = [cos 1, sin 1]
  CHECK_THAT(q1b, WithinAbs(std::sin(1.0), 1e-15));
  const auto dot = [&](std::int64_t m, std::int64_t n) {
    const auto [a1, a2] = rotated(m);
    const auto [b1, b2] = rotated(n);
    return a1 * b1 + a2 * b2;
  };
  CHECK_THAT(dot(1, 2), WithinAbs(std::cos(1.0), 1e-15));
  CHECK_THAT(dot(11, 12), WithinAbs(std::cos(1.0), 1e-14));
  CHECK_THAT(dot(11, 12), WithinAbs(0.5403023058681398, 1e-14));
}

TEST_CASE("rope: seed - the apply_rope example tensor ([1, 1, 3, 4], even/odd pairs, base 10000)", "[rope][seed]") {
  // x: [batch 1, heads 1, seq 3, head_dim 4] (BHSD), position_ids [[0, 1, 2]], inv_freq = [1, 0.01].
  std::vector<float> x = {1.0f, 0.0f, 0.0f, 1.0f, 0.0f, 1.0f, 1.0f, 0.0f, 1.0f, 1.0f, 0.5f, -0.5f};
  const std::int64_t pos[3] = {0, 1, 2};
  posenc::RopeParams p;
  p.head_dim = 4;
  p.layout = RopeLayout::kInterleaved;
  posenc::apply_rope_inplace<float>(posenc::TensorView<float, 4>(x.data(), 1, 1, 3, 4),
                                    posenc::PositionIdsView(pos, 1, 3), p, HeadLayout::kBHSD);
  using std::cos;
  using std::sin;
  const double expect[12] = {
      1, 0, 0, 1,                                      // position 0: unchanged
      -sin(1.0), cos(1.0), cos(0.01), sin(0.01),      // (0,1) by 1 rad, (1,0) by 0.01 rad
      cos(2.0) - sin(2.0), sin(2.0) + cos(2.0),       // (1,1) by 2 rad
      0.5 * cos(0.02) + 0.5 * sin(0.02), 0.5 * sin(0.02) - 0.5 * cos(0.02)};  // (0.5,-0.5) by 0.02
  for (int i = 0; i < 12; ++i) {
    CAPTURE(i);
    CHECK_THAT(x[static_cast<std::size_t>(i)], WithinAbs(expect[i], 1e-6));
  }
  CHECK_THAT(x[4], WithinAbs(-0.8415, 5e-5));
  CHECK_THAT(x[5], WithinAbs(0.5403, 5e-5));
}

// ---------------------------------------------------------------------------------------------
// Positions: decode, left padding, packed, large positions
// ---------------------------------------------------------------------------------------------

TEST_CASE("rope: decoding token t alone with offset t equals row t of the prefill", "[rope][positions][decode]") {
  const Eigen::Index S = 100, H = 4, D = 64;
  const auto f = plan(D);
  const auto x0 = posenc_test::random_vector<float>(static_cast<std::size_t>(S * H * D), 81);
  const auto cache = posenc::make_rope_cos_sin_cache(f, S);
  for (const RopeLayout layout : {RopeLayout::kHalfSplit, RopeLayout::kInterleaved}) {
    auto prefill = x0;
    auto prefill_cached = x0;
    const auto pos = arange(S);
    posenc::apply_rope_inplace<float>(posenc::TensorView<float, 4>(prefill.data(), 1, S, H, D),
                                      posenc::PositionIdsView(pos.data(), 1, S), f, layout);
    const auto all = posenc::rope_heads<float>(posenc::TensorView<float, 4>(prefill_cached.data(), 1, S, H, D));
    posenc::apply_rope_inplace_cached<float>(all, posenc::RopePositions::contiguous(1, S), cache, layout);
    for (const std::int64_t t : {0, 1, 31, 32, 33, 64, 99}) {
      CAPTURE(t);
      std::vector<float> tok(x0.begin() + t * H * D, x0.begin() + (t + 1) * H * D);
      auto tok_cached = tok;
      const std::int64_t zero[1] = {0};
      // Decode: position_ids [[0]] plus offset t (the number of cached tokens).
      posenc::apply_rope_inplace<float>(posenc::rope_heads<float>(posenc::TensorView<float, 4>(tok.data(), 1, 1, H, D)),
                                        posenc::RopePositions::from_ids(posenc::PositionIdsView(zero, 1, 1), t), f, layout);
      posenc::apply_rope_inplace_cached<float>(posenc::rope_heads<float>(posenc::TensorView<float, 4>(tok_cached.data(), 1, 1, H, D)),
                                               posenc::RopePositions::contiguous(1, 1, t), cache, layout);
      for (Eigen::Index i = 0; i < H * D; ++i) {
        const auto k = static_cast<std::size_t>(t * H * D + i);
        REQUIRE_THAT(tok[static_cast<std::size_t>(i)], WithinAbs(prefill[k], 1e-6));
        REQUIRE(tok_cached[static_cast<std::size_t>(i)] == prefill_cached[k]);  // same cache row
      }
    }
  }
}

TEST_CASE("rope: a left-padded batch equals the same sequences unpadded", "[rope][positions][padding]") {
  const Eigen::Index S = 6, H = 2, D = 32;
  const auto f = plan(D);
  // Batch of two: sequence A has 6 tokens, B has 3 real tokens left-padded by 3.
  // HF: position_ids = cumsum(mask) - 1, pads filled with 1 (any value: pads are masked).
  const std::vector<std::int64_t> pos = {0, 1, 2, 3, 4, 5, 1, 1, 1, 0, 1, 2};
  const auto x0 = posenc_test::random_vector<float>(static_cast<std::size_t>(2 * S * H * D), 91);
  auto padded = x0;
  posenc::apply_rope_inplace<float>(posenc::TensorView<float, 4>(padded.data(), 2, S, H, D),
                                    posenc::PositionIdsView(pos.data(), 2, S), f, RopeLayout::kHalfSplit);
  // B alone, unpadded: its 3 real tokens at positions 0, 1, 2.
  std::vector<float> b(x0.begin() + (S + 3) * H * D, x0.end());
  const auto pb = arange(3);
  posenc::apply_rope_inplace<float>(posenc::TensorView<float, 4>(b.data(), 1, 3, H, D),
                                    posenc::PositionIdsView(pb.data(), 1, 3), f, RopeLayout::kHalfSplit);
  for (std::size_t i = 0; i < b.size(); ++i) REQUIRE_THAT(padded[(S + 3) * H * D + i], WithinAbs(b[i], 1e-7));
  // A is unaffected by B's padding.
  std::vector<float> a(x0.begin(), x0.begin() + S * H * D);
  const auto pa = arange(S);
  posenc::apply_rope_inplace<float>(posenc::TensorView<float, 4>(a.data(), 1, S, H, D),
                                    posenc::PositionIdsView(pa.data(), 1, S), f, RopeLayout::kHalfSplit);
  for (std::size_t i = 0; i < a.size(); ++i) REQUIRE(padded[i] == a[i]);
}

TEST_CASE("rope: float outputs at positions 131071 and 10^6 are within 1e-6 of long double", "[rope][precision]") {
  const Eigen::Index H = 2, D = 128;
  const auto f = plan(D);
  const auto inv = ref_inv(D);
  for (const RopeLayout layout : {RopeLayout::kHalfSplit, RopeLayout::kInterleaved}) {
    for (const std::int64_t p : {std::int64_t{131071}, std::int64_t{1000000}, std::int64_t{16777217}}) {
      CAPTURE(p);
      // A run of 40 contiguous positions ending at p exercises both anchors and the recurrence.
      const Eigen::Index S = 40;
      auto x = posenc_test::random_vector<float>(static_cast<std::size_t>(S * H * D), 101);
      const auto before = x;
      const auto pos = arange(S, p - S + 1);
      posenc::apply_rope_inplace<float>(posenc::TensorView<float, 4>(x.data(), 1, S, H, D),
                                        posenc::PositionIdsView(pos.data(), 1, S), f, layout);
      const auto expect = posenc::reference::apply_rope(before.data(), 1, S, H, D, HeadLayout::kBSHD,
                                                        pos.data(), inv, 1.0L, 0, layout);
      POSENC_REQUIRE_CLOSE(posenc_test::compare(
          x.size(), [&](std::size_t i) { return x[i]; },
          [&](std::size_t i) { return static_cast<double>(expect[i]); }, 1e-6));
    }
  }
}

TEST_CASE("rope: double storage stays exact to 1e-9 at positions up to 2^31", "[rope][precision]") {
  const Eigen::Index D = 64;
  const auto f = plan(D);
  const auto inv = ref_inv(D);
  for (const std::int64_t p : {std::int64_t{1} << 24, (std::int64_t{1} << 24) + 1, std::int64_t{1} << 31}) {
    CAPTURE(p);
    const auto [before, x] = rotate_one_token(f, D, p, 111);
    // The angle p * w_j itself is only known to |p w_j| * 2^-53 in double; 2^31 * 2^-53 < 1e-6.
    const auto expect = posenc::reference::rope_vector(before.data(), D, p, inv, 1.0L, 0, RopeLayout::kHalfSplit);
    const double tol = static_cast<double>(p) * 0x1p-52 + 1e-14;
    for (Eigen::Index i = 0; i < D; ++i) REQUIRE_THAT(x[static_cast<std::size_t>(i)], WithinAbs(static_cast<double>(expect[static_cast<std::size_t>(i)]), tol));
  }
}

TEST_CASE("rope: angles past the fast reduction (2^30) rotate by the sin / cos of the double angle",
          "[rope][precision]") {
  // Positions up to 2^53 are accepted. Past 2^30 radians the three-part pi/2 reduction is no
  // longer exact, and the kernel takes std::sin / std::cos of the angle p * w_j rounded to double:
  // that double angle, with sin / cos in long double, is the expected rotation.
  const Eigen::Index D = 16;
  const auto f = plan(D);
  for (const std::int64_t p : {std::int64_t{1} << 31, std::int64_t{1} << 40, (std::int64_t{1} << 52) + 1,
                               std::int64_t{3} << 50}) {
    CAPTURE(p);
    const auto [before, x] = rotate_one_token(f, D, p, 113);
    for (Eigen::Index j = 0; j < D / 2; ++j) {
      const auto angle = static_cast<long double>(static_cast<double>(p) * f.inv_freq[static_cast<std::size_t>(j)]);
      const long double c = std::cos(angle), s = std::sin(angle);
      const long double a = before[static_cast<std::size_t>(j)], b = before[static_cast<std::size_t>(j + D / 2)];
      REQUIRE_THAT(x[static_cast<std::size_t>(j)], WithinAbs(static_cast<double>(a * c - b * s), 1e-14));
      REQUIRE_THAT(x[static_cast<std::size_t>(j + D / 2)], WithinAbs(static_cast<double>(b * c + a * s), 1e-14));
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Tensor layouts, dtypes, Q+K, out of place
// ---------------------------------------------------------------------------------------------

TEMPLATE_TEST_CASE("rope: every storage type matches the long-double reference (BSHD, BHSD and SBHD)",
                   "[rope][dtype]", float, double, Eigen::half, Eigen::bfloat16) {
  const Eigen::Index B = 2, S = 70, H = 3, D = 64;
  const auto f = plan(D);
  const auto inv = ref_inv(D);
  // Left-padding-like repeats, a jump and a contiguous run.
  std::vector<std::int64_t> pos(static_cast<std::size_t>(B * S));
  for (Eigen::Index s = 0; s < S; ++s) {
    pos[static_cast<std::size_t>(s)] = s;
    pos[static_cast<std::size_t>(S + s)] = s < 5 ? 0 : (s < 30 ? s - 5 : s + 500);
  }
  for (const HeadLayout hl : {HeadLayout::kBSHD, HeadLayout::kBHSD, HeadLayout::kSBHD}) {
    for (const RopeLayout layout : {RopeLayout::kHalfSplit, RopeLayout::kInterleaved}) {
      CAPTURE(posenc::to_string(hl), posenc::to_string(layout));
      auto x = posenc_test::random_vector<TestType>(static_cast<std::size_t>(B * S * H * D), 121);
      const auto before = x;
      posenc::TensorView<TestType, 4> view = hl == HeadLayout::kBSHD   ? posenc::TensorView<TestType, 4>(x.data(), B, S, H, D)
                                             : hl == HeadLayout::kBHSD ? posenc::TensorView<TestType, 4>(x.data(), B, H, S, D)
                                                                       : posenc::TensorView<TestType, 4>(x.data(), S, B, H, D);
      posenc::apply_rope_inplace<TestType>(view, posenc::PositionIdsView(pos.data(), B, S), f, layout, hl);
      const auto expect = posenc::reference::apply_rope(before.data(), B, S, H, D, hl, pos.data(), inv, 1.0L, 0, layout);
      POSENC_REQUIRE_CLOSE(posenc_test::compare(
          x.size(), [&](std::size_t i) { return posenc::detail::to_double(x[i]); },
          [&](std::size_t i) { return static_cast<double>(expect[i]); }, tolerance<TestType>()));
    }
  }
}

TEST_CASE("rope: SBHD (TransformerEngine / Megatron) gives the BSHD result bit for bit at scattered positions", "[rope][layout]") {
  // x[s][b][h][:] rotated in place as [seq, batch, heads, d] equals the same rows rotated as a
  // [batch, seq, heads, d] copy: the layout only moves rows. Scattered positions make every
  // token an exact anchor in both walks; at consecutive positions the BSHD walk takes the
  // recurrence and the two agree to rounding (rope.hpp, "Reproducibility";
  // test_rope_combinations.cpp compares them to the oracle).
  const Eigen::Index S = 37, B = 3, Hq = 4, Hk = 2, D = 64;
  const auto f = plan(D);
  std::vector<std::int64_t> pos(static_cast<std::size_t>(B * S));
  for (Eigen::Index i = 0; i < B * S; ++i) pos[static_cast<std::size_t>(i)] = (i * 7919) % 5000;
  const auto q_sbhd0 = posenc_test::random_vector<float>(static_cast<std::size_t>(S * B * Hq * D), 141);
  const auto k_sbhd0 = posenc_test::random_vector<float>(static_cast<std::size_t>(S * B * Hk * D), 142);
  const auto to_bshd = [&](const std::vector<float>& x, Eigen::Index H) {
    std::vector<float> y(x.size());
    for (Eigen::Index s = 0; s < S; ++s)
      for (Eigen::Index b = 0; b < B; ++b)
        std::copy_n(x.begin() + ((s * B + b) * H) * D, H * D, y.begin() + ((b * S + s) * H) * D);
    return y;
  };
  for (const RopeLayout layout : {RopeLayout::kHalfSplit, RopeLayout::kInterleaved}) {
    auto q = q_sbhd0, k = k_sbhd0;
    auto q_b = to_bshd(q_sbhd0, Hq), k_b = to_bshd(k_sbhd0, Hk);
    const posenc::PositionIdsView ids(pos.data(), B, S);
    posenc::apply_rope_qk_inplace<float>(posenc::TensorView<float, 4>(q.data(), S, B, Hq, D),
                                         posenc::TensorView<float, 4>(k.data(), S, B, Hk, D), ids, f, layout,
                                         HeadLayout::kSBHD);
    posenc::apply_rope_qk_inplace<float>(posenc::TensorView<float, 4>(q_b.data(), B, S, Hq, D),
                                         posenc::TensorView<float, 4>(k_b.data(), B, S, Hk, D), ids, f, layout);
    REQUIRE(to_bshd(q, Hq) == q_b);
    REQUIRE(to_bshd(k, Hk) == k_b);
    REQUIRE(q != q_sbhd0);
  }
}

TEST_CASE("rope: packed tokens and a strided slice of a fused QKV buffer, Q and K in one call (GQA)", "[rope][layout][gqa]") {
  const Eigen::Index T = 33, Hq = 8, Hk = 2, D = 64, W = (Hq + 2 * Hk) * D;
  const auto f = plan(D);
  const auto inv = ref_inv(D);
  auto qkv = posenc_test::random_vector<float>(static_cast<std::size_t>(T * W), 131);
  const auto before = qkv;
  // Two packed sequences: positions 0..19 then 0..12.
  std::vector<std::int64_t> pos(static_cast<std::size_t>(T));
  for (Eigen::Index t = 0; t < T; ++t) pos[static_cast<std::size_t>(t)] = t < 20 ? t : t - 20;
  for (const RopeLayout layout : {RopeLayout::kHalfSplit, RopeLayout::kInterleaved}) {
    qkv = before;
    auto q = posenc::rope_heads_strided<float>(qkv.data(), T, Hq, D, W, D);
    auto k = posenc::rope_heads_strided<float>(qkv.data() + Hq * D, T, Hk, D, W, D);
    posenc::apply_rope_qk_inplace<float>(q, k, posenc::RopePositions::from_token_ids(
                                                   posenc::ConstTensorView<std::int64_t, 1>(pos.data(), T)),
                                         f, layout);
    for (Eigen::Index t = 0; t < T; ++t) {
      for (Eigen::Index h = 0; h < Hq + 2 * Hk; ++h) {
        const float* row = qkv.data() + t * W + h * D;
        const float* row0 = before.data() + t * W + h * D;
        if (h >= Hq + Hk) {  // V untouched
          REQUIRE(std::memcmp(row, row0, D * sizeof(float)) == 0);
          continue;
        }
        const auto expect = posenc::reference::rope_vector(row0, D, pos[static_cast<std::size_t>(t)], inv, 1.0L, 0, layout);
        for (Eigen::Index i = 0; i < D; ++i) REQUIRE_THAT(row[i], WithinAbs(static_cast<double>(expect[static_cast<std::size_t>(i)]), 2e-6));
      }
    }
    // The same through separate packed Q and K tensors gives the same bits.
    std::vector<float> qp(static_cast<std::size_t>(T * Hq * D)), kp(static_cast<std::size_t>(T * Hk * D));
    for (Eigen::Index t = 0; t < T; ++t) {
      std::copy(before.begin() + t * W, before.begin() + t * W + Hq * D, qp.begin() + t * Hq * D);
      std::copy(before.begin() + t * W + Hq * D, before.begin() + t * W + (Hq + Hk) * D, kp.begin() + t * Hk * D);
    }
    const auto positions = posenc::RopePositions::from_token_ids(posenc::ConstTensorView<std::int64_t, 1>(pos.data(), T));
    posenc::apply_rope_inplace<float>(posenc::rope_heads_packed<float>(posenc::TensorView<float, 3>(qp.data(), T, Hq, D)), positions, f, layout);
    posenc::apply_rope_inplace<float>(posenc::rope_heads_packed<float>(posenc::TensorView<float, 3>(kp.data(), T, Hk, D)), positions, f, layout);
    for (Eigen::Index t = 0; t < T; ++t) {
      REQUIRE(std::memcmp(qp.data() + t * Hq * D, qkv.data() + t * W, Hq * D * sizeof(float)) == 0);
      REQUIRE(std::memcmp(kp.data() + t * Hk * D, qkv.data() + t * W + Hq * D, Hk * D * sizeof(float)) == 0);
    }
  }
}

TEMPLATE_TEST_CASE("rope: out of place leaves x untouched and equals the in-place result", "[rope][out-of-place]",
                   float, double, Eigen::half, Eigen::bfloat16) {
  const Eigen::Index B = 2, S = 17, H = 3, D = 48;
  const auto f = plan(D, 32, 8);
  const auto x = posenc_test::random_vector<TestType>(static_cast<std::size_t>(B * S * H * D), 141);
  auto inplace = x;
  std::vector<TestType> out(x.size(), TestType(7.0f));
  const auto pos = arange(B * S, 9);
  for (const RopeLayout layout : {RopeLayout::kHalfSplit, RopeLayout::kInterleaved}) {
    inplace = x;
    posenc::apply_rope_inplace<TestType>(posenc::TensorView<TestType, 4>(inplace.data(), B, S, H, D),
                                         posenc::PositionIdsView(pos.data(), B, S), f, layout);
    const auto copy = x;
    posenc::apply_rope<TestType>(posenc::ConstTensorView<TestType, 4>(copy.data(), B, S, H, D),
                                 posenc::PositionIdsView(pos.data(), B, S), f, layout,
                                 posenc::TensorView<TestType, 4>(out.data(), B, S, H, D));
    REQUIRE(std::memcmp(copy.data(), x.data(), x.size() * sizeof(TestType)) == 0);
    POSENC_REQUIRE_CLOSE(posenc_test::compare(
        x.size(), [&](std::size_t i) { return posenc::detail::to_double(out[i]); },
        [&](std::size_t i) { return posenc::detail::to_double(inplace[i]); }, 0.0));
  }
}

// ---------------------------------------------------------------------------------------------
// cos/sin cache
// ---------------------------------------------------------------------------------------------

TEST_CASE("rope: the cos/sin cache is cat(cos, sin) * attention_factor in float", "[rope][cache]") {
  const Eigen::Index D = 64;
  auto f = plan(D, 32);
  f.attention_factor = 1.5;
  const auto inv = ref_inv(D, 32);
  const auto cache = posenc::make_rope_cos_sin_cache(f, 5000);
  REQUIRE(cache.dimension(0) == 5000);
  REQUIRE(cache.dimension(1) == 32);
  for (const Eigen::Index p : {0, 1, 77, 4096, 4999}) {
    for (Eigen::Index j = 0; j < 16; ++j) {
      const long double a = static_cast<long double>(p) * inv[static_cast<std::size_t>(j)];
      CHECK_THAT(cache(p, j), WithinAbs(static_cast<double>(1.5L * std::cos(a)), 2e-7));
      CHECK_THAT(cache(p, 16 + j), WithinAbs(static_cast<double>(1.5L * std::sin(a)), 2e-7));
    }
  }
}

TEMPLATE_TEST_CASE("rope: applying from a cache matches on-the-fly angles, forward, inverse, Q+K",
                   "[rope][cache]", float, double, Eigen::half, Eigen::bfloat16) {
  const Eigen::Index S = 40, Hq = 4, Hk = 2, D = 64;
  auto f = plan(D, 48, 16);
  f.attention_factor = 1.2;
  const auto cache = posenc::make_rope_cos_sin_cache(f, 4096);
  const posenc::ConstTensorView<float, 2> cview(cache.data(), cache.dimension(0), cache.dimension(1));
  const auto q0 = posenc_test::random_vector<TestType>(static_cast<std::size_t>(S * Hq * D), 151);
  const auto k0 = posenc_test::random_vector<TestType>(static_cast<std::size_t>(S * Hk * D), 152);
  std::vector<std::int64_t> pos(static_cast<std::size_t>(S));
  for (Eigen::Index s = 0; s < S; ++s) pos[static_cast<std::size_t>(s)] = (s * 97) % 4096;
  const auto positions = posenc::RopePositions::from_ids(posenc::PositionIdsView(pos.data(), 1, S));
  for (const RopeLayout layout : {RopeLayout::kHalfSplit, RopeLayout::kInterleaved}) {
    auto q = q0, k = k0, qr = q0, kr = k0;
    const auto hq = posenc::rope_heads<TestType>(posenc::TensorView<TestType, 4>(q.data(), 1, S, Hq, D));
    const auto hk = posenc::rope_heads<TestType>(posenc::TensorView<TestType, 4>(k.data(), 1, S, Hk, D));
    posenc::apply_rope_qk_inplace_cached<TestType>(hq, hk, positions, cview, layout, 16);
    posenc::apply_rope_qk_inplace<TestType>(posenc::rope_heads<TestType>(posenc::TensorView<TestType, 4>(qr.data(), 1, S, Hq, D)),
                                            posenc::rope_heads<TestType>(posenc::TensorView<TestType, 4>(kr.data(), 1, S, Hk, D)),
                                            positions, f, layout);
    const double tol = std::max(2 * tolerance<TestType>(), 1e-6);
    POSENC_REQUIRE_CLOSE(posenc_test::compare(
        q.size(), [&](std::size_t i) { return posenc::detail::to_double(q[i]); },
        [&](std::size_t i) { return posenc::detail::to_double(qr[i]); }, tol));
    POSENC_REQUIRE_CLOSE(posenc_test::compare(
        k.size(), [&](std::size_t i) { return posenc::detail::to_double(k[i]); },
        [&](std::size_t i) { return posenc::detail::to_double(kr[i]); }, tol));
    posenc::RopeApplyOptions inv;
    inv.direction = posenc::RopeDirection::kInverse;
    posenc::apply_rope_qk_inplace_cached<TestType>(hq, hk, positions, cview, layout, 16, inv);
    POSENC_REQUIRE_CLOSE(posenc_test::compare(
        q.size(), [&](std::size_t i) { return posenc::detail::to_double(q[i]); },
        [&](std::size_t i) { return posenc::detail::to_double(q0[i]); }, tol));
  }
}

TEST_CASE("rope: re-rotating cached keys from one plan to another equals rotating with the new plan", "[rope][rerotate]") {
  const Eigen::Index S = 64, H = 2, D = 64;
  const auto [old_freqs, new_freqs] = posenc_test::dynamic_plan_change(D, 32, 2.0, S);
  const auto k0 = posenc_test::random_vector<double>(static_cast<std::size_t>(S * H * D), 161);
  auto k = k0, expect = k0;
  const auto positions = posenc::RopePositions::contiguous(1, S);
  const auto hk = posenc::rope_heads<double>(posenc::TensorView<double, 4>(k.data(), 1, S, H, D));
  posenc::apply_rope_inplace<double>(hk, positions, old_freqs, RopeLayout::kHalfSplit);
  posenc::rerotate_rope_inplace<double>(hk, positions, old_freqs, new_freqs, RopeLayout::kHalfSplit);
  posenc::apply_rope_inplace<double>(posenc::rope_heads<double>(posenc::TensorView<double, 4>(expect.data(), 1, S, H, D)),
                                     positions, new_freqs, RopeLayout::kHalfSplit);
  POSENC_REQUIRE_CLOSE(posenc_test::compare(
      k.size(), [&](std::size_t i) { return k[i]; }, [&](std::size_t i) { return expect[i]; }, 1e-13));
}

TEMPLATE_TEST_CASE("rope: re-rotation is one rotation by (a_to / a_from) R(p w_to - p w_from), rounded once",
                   "[rope][rerotate]", float, double, Eigen::half, Eigen::bfloat16) {
  const Eigen::Index S = 48, H = 2, D = 64;
  auto [from, to] = posenc_test::dynamic_plan_change(D, 16, 4.0, S);
  from.attention_factor = 0.8;  // a ratio a_to / a_from != 1 as well
  to.attention_factor = 1.3;
  // Batch 0 contiguous from 0 (anchors and the recurrence), batch 1 left-padded with a jump.
  std::vector<std::int64_t> pos(static_cast<std::size_t>(2 * S));
  for (Eigen::Index s = 0; s < S; ++s) {
    pos[static_cast<std::size_t>(s)] = s;
    pos[static_cast<std::size_t>(S + s)] = s < 6 ? 0 : (s < 30 ? s - 6 : 3 * s + 1000);
  }
  for (const RopeLayout layout : {RopeLayout::kHalfSplit, RopeLayout::kInterleaved}) {
    CAPTURE(static_cast<int>(layout));
    const auto k0 = posenc_test::random_vector<TestType>(static_cast<std::size_t>(2 * S * H * D), 167);
    auto k = k0;
    posenc::rerotate_rope_inplace<TestType>(
        posenc::rope_heads<TestType>(posenc::TensorView<TestType, 4>(k.data(), 2, S, H, D)),
        posenc::RopePositions::from_ids(posenc::PositionIdsView(pos.data(), 2, S)), from, to, layout);
    const long double ratio = 1.3L / 0.8L;
    std::size_t checked = 0;
    for (std::size_t u = 0; u < static_cast<std::size_t>(2 * S); ++u) {
      for (std::size_t h = 0; h < static_cast<std::size_t>(H); ++h) {
        const std::size_t row = (u * H + h) * D;
        for (std::size_t j = 0; j < static_cast<std::size_t>(D / 2); ++j) {
          const std::size_t i1 = layout == RopeLayout::kHalfSplit ? j : 2 * j;
          const std::size_t i2 = layout == RopeLayout::kHalfSplit ? j + D / 2 : 2 * j + 1;
          const long double angle = static_cast<long double>(pos[u]) * to.inv_freq[j] -
                                    static_cast<long double>(pos[u]) * from.inv_freq[j];
          const long double c = ratio * std::cos(angle), sn = ratio * std::sin(angle);
          const long double x1 = posenc::detail::to_double(k0[row + i1]);
          const long double x2 = posenc::detail::to_double(k0[row + i2]);
          for (const auto& [i, e] : {std::pair{i1, x1 * c - x2 * sn}, std::pair{i2, x2 * c + x1 * sn}}) {
            // Inverse-then-forward rounds 16-bit keys twice and misses this tolerance.
            const double tol = posenc_test::rounded_once_tolerance<TestType>(e, ratio * (std::fabs(x1) + std::fabs(x2)));
            REQUIRE_THAT(posenc::detail::to_double(k[row + i]), WithinAbs(static_cast<double>(e), tol));
            ++checked;
          }
        }
      }
    }
    REQUIRE(checked == k.size());
  }
}

// ---------------------------------------------------------------------------------------------
// Errors: type, message naming the parameter, output unchanged
// ---------------------------------------------------------------------------------------------

TEST_CASE("rope: invalid apply arguments throw before writing anything", "[rope][errors]") {
  const Eigen::Index S = 4, H = 2, D = 16;
  auto x = posenc_test::random_vector<float>(static_cast<std::size_t>(S * H * D), 171);
  const auto before = x;
  const auto f = plan(D);
  const posenc::TensorView<float, 4> view(x.data(), 1, S, H, D);
  const auto unchanged = [&] { return std::memcmp(x.data(), before.data(), x.size() * sizeof(float)) == 0; };

  SECTION("negative position") {
    const std::vector<std::int64_t> pos = {0, 1, -2, 3};
    REQUIRE_THROWS_MATCHES(posenc::apply_rope_inplace<float>(view, posenc::PositionIdsView(pos.data(), 1, S), f, RopeLayout::kHalfSplit),
                           std::invalid_argument, Catch::Matchers::Message("posenc::apply_rope_inplace: position_ids[0, 2] = -2 must be in [0, 2^53]"));
  }
  SECTION("position_ids shape") {
    const auto pos = arange(S + 1);
    REQUIRE_THROWS_WITH(posenc::apply_rope_inplace<float>(view, posenc::PositionIdsView(pos.data(), 1, S + 1), f, RopeLayout::kHalfSplit),
                        Contains("position_ids shape [1, 5]") && Contains("[batch, seq] = [1, 4]"));
  }
  SECTION("negative offset") {
    const auto pos = arange(S);
    REQUIRE_THROWS_WITH(posenc::apply_rope_inplace<float>(posenc::rope_heads<float>(view),
                            posenc::RopePositions::from_ids(posenc::PositionIdsView(pos.data(), 1, S), -1), f, RopeLayout::kHalfSplit),
                        Contains("offset = -1"));
  }
  SECTION("inv_freq of the wrong length") {
    auto bad = f;
    bad.inv_freq.pop_back();
    const auto pos = arange(S);
    REQUIRE_THROWS_AS(posenc::apply_rope_inplace<float>(view, posenc::PositionIdsView(pos.data(), 1, S), bad, RopeLayout::kHalfSplit),
                      std::invalid_argument);
    REQUIRE_THROWS_WITH(posenc::apply_rope_inplace<float>(view, posenc::PositionIdsView(pos.data(), 1, S), bad, RopeLayout::kHalfSplit),
                        Contains("inv_freq has 7 entries"));
  }
  SECTION("non-finite inv_freq and attention_factor") {
    auto bad = f;
    bad.inv_freq[3] = std::nan("");
    const auto pos = arange(S);
    REQUIRE_THROWS_WITH(posenc::apply_rope_inplace<float>(view, posenc::PositionIdsView(pos.data(), 1, S), bad, RopeLayout::kHalfSplit),
                        Contains("inv_freq[3]"));
    // The check runs on the bits: every non-finite or negative double fails, both zeros pass.
    const double inf = std::numeric_limits<double>::infinity();
    for (const double w : {-std::nan(""), inf, -inf, -0.5, -std::numeric_limits<double>::denorm_min()}) {
      bad.inv_freq[3] = w;
      REQUIRE_THROWS_WITH(posenc::apply_rope_inplace<float>(view, posenc::PositionIdsView(pos.data(), 1, S), bad, RopeLayout::kHalfSplit),
                          Contains("inv_freq[3]") && Contains("must be finite and >= 0"));
    }
    auto scratch = x;  // the accepted values rotate a copy
    const posenc::TensorView<float, 4> scratch_view(scratch.data(), 1, S, H, D);
    for (const double w : {0.0, -0.0, std::numeric_limits<double>::denorm_min(), 0.25}) {
      bad.inv_freq[3] = w;
      REQUIRE_NOTHROW(posenc::apply_rope_inplace<float>(scratch_view, posenc::PositionIdsView(pos.data(), 1, S), bad, RopeLayout::kHalfSplit));
    }
    auto bad2 = f;
    bad2.attention_factor = 0.0;
    REQUIRE_THROWS_WITH(posenc::apply_rope_inplace<float>(view, posenc::PositionIdsView(pos.data(), 1, S), bad2, RopeLayout::kHalfSplit),
                        Contains("attention_factor = 0"));
  }
  SECTION("rotary slice wider than the head") {
    const auto wide = plan(32);
    const auto pos = arange(S);
    REQUIRE_THROWS_WITH(posenc::apply_rope_inplace<float>(view, posenc::PositionIdsView(pos.data(), 1, S), wide, RopeLayout::kHalfSplit),
                        Contains("rotary_offset + rotary_dim = 0 + 32") && Contains("head_dim (16)"));
  }
  SECTION("a rotary_offset near INT64_MAX (offset + rotary_dim wrapped negative: writes far out)") {
    auto far = f;
    far.rotary_offset = std::numeric_limits<Eigen::Index>::max() - 2;
    const auto pos = arange(S);
    REQUIRE_THROWS_WITH(posenc::apply_rope_inplace<float>(view, posenc::PositionIdsView(pos.data(), 1, S), far, RopeLayout::kHalfSplit),
                        Contains("rotary_offset + rotary_dim = 9223372036854775805 + 16 must be <= x head_dim (16)"));
  }
  SECTION("bad layout and direction enums") {
    const auto pos = arange(S);
    REQUIRE_THROWS_WITH(posenc::apply_rope_inplace<float>(view, posenc::PositionIdsView(pos.data(), 1, S), f, static_cast<RopeLayout>(7)),
                        Contains("layout = 7"));
    posenc::RopeApplyOptions o;
    o.direction = static_cast<posenc::RopeDirection>(9);
    REQUIRE_THROWS_WITH(posenc::apply_rope_inplace<float>(posenc::rope_heads<float>(view), posenc::RopePositions::contiguous(1, S), f, RopeLayout::kHalfSplit, o),
                        Contains("direction = 9"));
  }
  SECTION("bad head layout") {
    const auto pos = arange(S);
    REQUIRE_THROWS_MATCHES(posenc::apply_rope_inplace<float>(view, posenc::PositionIdsView(pos.data(), 1, S), f, RopeLayout::kHalfSplit,
                                                             static_cast<HeadLayout>(5)),
                           std::invalid_argument, Catch::Matchers::Message("posenc::rope_heads: head_layout = 5 is not a HeadLayout"));
  }
  SECTION("q and k with different token counts") {
    std::vector<float> k(static_cast<std::size_t>((S - 1) * D));
    REQUIRE_THROWS_WITH(posenc::apply_rope_qk_inplace<float>(posenc::rope_heads<float>(view),
                            posenc::rope_heads<float>(posenc::TensorView<float, 4>(k.data(), 1, S - 1, 1, D)),
                            posenc::RopePositions::contiguous(1, S), f, RopeLayout::kHalfSplit),
                        Contains("must equal k's [1, 3]"));
  }
  SECTION("a device without its parallel_for") {
    posenc::RopeApplyOptions o;
    int dummy = 0;
    o.device = &dummy;
    REQUIRE_THROWS_WITH(posenc::apply_rope_inplace<float>(posenc::rope_heads<float>(view), posenc::RopePositions::contiguous(1, S), f, RopeLayout::kHalfSplit, o),
                        Contains("options.device and options.parallel_for must be set together"));
  }
  SECTION("position past the cos/sin cache") {
    const auto cache = posenc::make_rope_cos_sin_cache(f, 8);
    const posenc::ConstTensorView<float, 2> cv(cache.data(), 8, 16);
    REQUIRE_THROWS_MATCHES(posenc::apply_rope_inplace_cached<float>(posenc::rope_heads<float>(view), posenc::RopePositions::contiguous(1, S, 5), cv, RopeLayout::kHalfSplit),
                           std::out_of_range, Catch::Matchers::Message("posenc::apply_rope_inplace_cached: position 8 of token [0, 3] is outside the cos/sin cache of max_position = 8 rows"));
    const posenc::ConstTensorView<float, 2> odd(cache.data(), 8, 15);
    REQUIRE_THROWS_WITH(posenc::apply_rope_inplace_cached<float>(posenc::rope_heads<float>(view), posenc::RopePositions::contiguous(1, S), odd, RopeLayout::kHalfSplit),
                        Contains("cos_sin_cache width (rotary_dim) = 15"));
  }
  SECTION("cache fill with the wrong width") {
    std::vector<float> c(4 * 10);
    REQUIRE_THROWS_WITH(posenc::fill_rope_cos_sin_cache<float>(f, posenc::TensorView<float, 2>(c.data(), 4, 10)),
                        Contains("cache width = 10 must equal rotary_dim = 16"));
  }
  REQUIRE(unchanged());
}

TEST_CASE("rope: invalid re-rotation arguments throw before writing anything", "[rope][errors][rerotate]") {
  const Eigen::Index S = 4, H = 2, D = 16;
  auto k = posenc_test::random_vector<float>(static_cast<std::size_t>(S * H * D), 173);
  const auto before = k;
  const auto hk = posenc::rope_heads<float>(posenc::TensorView<float, 4>(k.data(), 1, S, H, D));
  const auto unchanged = [&] { return std::memcmp(k.data(), before.data(), k.size() * sizeof(float)) == 0; };
  const auto from = plan(D, 8, 2), to = plan(D, 8, 2);
  const auto pos = arange(S);
  const auto positions = posenc::RopePositions::from_ids(posenc::PositionIdsView(pos.data(), 1, S));
  const auto rerotate = [&](const posenc::RopeFrequencies& a, const posenc::RopeFrequencies& b,
                            const posenc::RopePositions& p, const posenc::RopeApplyOptions& options) {
    posenc::rerotate_rope_inplace<float>(hk, p, a, b, RopeLayout::kHalfSplit, options);
  };

  SECTION("plans that rotate different slices") {
    REQUIRE_THROWS_MATCHES(rerotate(from, plan(D, 12, 2), positions, {}), std::invalid_argument,
                           Catch::Matchers::Message("posenc::rerotate_rope_inplace: from and to must rotate the "
                                                    "same slice: rotary_dim 8 vs 12, rotary_offset 2 vs 2"));
    REQUIRE_THROWS_WITH(rerotate(from, plan(D, 8, 4), positions, {}), Contains("rotary_offset 2 vs 4"));
  }
  SECTION("a direction other than forward") {
    posenc::RopeApplyOptions inverse;
    inverse.direction = posenc::RopeDirection::kInverse;
    REQUIRE_THROWS_AS(rerotate(from, to, positions, inverse), std::invalid_argument);
    REQUIRE_THROWS_WITH(rerotate(from, to, positions, inverse), Contains("options.direction must be kForward"));
  }
  SECTION("a non-finite inv_freq in either plan") {
    auto bad = to;
    bad.inv_freq[1] = std::numeric_limits<double>::infinity();
    REQUIRE_THROWS_WITH(rerotate(from, bad, positions, {}), Contains("inv_freq[1]"));
    REQUIRE_THROWS_WITH(rerotate(bad, to, positions, {}), Contains("inv_freq[1]"));
  }
  SECTION("a negative position") {
    const std::vector<std::int64_t> bad = {0, 1, 2, -3};
    REQUIRE_THROWS_WITH(rerotate(from, to, posenc::RopePositions::from_ids(posenc::PositionIdsView(bad.data(), 1, S)), {}),
                        Contains("position_ids[0, 3] = -3"));
  }
  SECTION("a slice past head_dim") {
    REQUIRE_THROWS_WITH(rerotate(plan(2 * D, 16, 8), plan(2 * D, 16, 8), positions, {}),
                        Contains("rotary_offset + rotary_dim = 8 + 16 must be <= k head_dim (16)"));
  }
  REQUIRE(unchanged());
}

TEST_CASE("rope: invalid parameters name the parameter", "[rope][errors][params]") {
  posenc::RopeParams p;
  p.head_dim = 64;
  SECTION("odd rotary_dim") {
    p.rotary_dim = 31;
    REQUIRE_THROWS_MATCHES(posenc::compute_rope_frequencies(p), std::invalid_argument, Catch::Matchers::Message(
        "posenc::compute_rope_frequencies: rotary_dim = 31 must be even and > 0 (head_dim = 64, partial_rotary_factor = 1)"));
  }
  SECTION("rotary_dim larger than head_dim") {
    p.rotary_dim = 66;
    REQUIRE_THROWS_WITH(posenc::compute_rope_frequencies(p), Contains("rotary_offset = 0 must be in [0, head_dim - rotary_dim]"));
  }
  SECTION("rotary_offset past the head") {
    p.rotary_dim = 32;
    p.rotary_offset = 40;
    REQUIRE_THROWS_WITH(posenc::compute_rope_frequencies(p), Contains("rotary_offset = 40"));
  }
  SECTION("head_dim") {
    p.head_dim = 0;
    REQUIRE_THROWS_WITH(posenc::compute_rope_frequencies(p), Contains("head_dim = 0"));
  }
  SECTION("partial_rotary_factor") {
    p.partial_rotary_factor = 0.0;
    REQUIRE_THROWS_WITH(posenc::compute_rope_frequencies(p), Contains("partial_rotary_factor = 0"));
    p.partial_rotary_factor = 0.3;  // int(64 * 0.3) = 19: odd
    REQUIRE_THROWS_WITH(posenc::compute_rope_frequencies(p), Contains("rotary_dim = 19"));
  }
  SECTION("theta") {
    p.theta = 0.0;
    REQUIRE_THROWS_WITH(posenc::compute_rope_frequencies(p), Contains("theta = 0"));
    p.theta = std::numeric_limits<double>::infinity();
    REQUIRE_THROWS_WITH(posenc::compute_rope_frequencies(p), Contains("theta = inf"));
  }
  SECTION("factor < 1") {
    for (const auto type : {posenc::RopeScalingType::kLinear, posenc::RopeScalingType::kNtk, posenc::RopeScalingType::kDynamic,
                            posenc::RopeScalingType::kYarn, posenc::RopeScalingType::kLlama3, posenc::RopeScalingType::kLongRope,
                            posenc::RopeScalingType::kVllmNtk, posenc::RopeScalingType::kProportional}) {
      CAPTURE(posenc::to_string(type));
      p.scaling.type = type;
      p.scaling.factor = 0.5;
      REQUIRE_THROWS_WITH(posenc::compute_rope_frequencies(p), Contains("factor = 0.5 must be finite and >= 1"));
    }
  }
  SECTION("missing original_max_position_embeddings") {
    for (const auto type : {posenc::RopeScalingType::kDynamic, posenc::RopeScalingType::kYarn,
                            posenc::RopeScalingType::kLlama3, posenc::RopeScalingType::kLongRope}) {
      CAPTURE(posenc::to_string(type));
      p.scaling.type = type;
      p.scaling.factor = 2.0;
      p.scaling.short_factor.assign(32, 1.0);
      p.scaling.long_factor.assign(32, 2.0);
      REQUIRE_THROWS_WITH(posenc::compute_rope_frequencies(p), Contains("original_max_position_embeddings"));
    }
  }
  SECTION("longrope factor lists") {
    p.scaling.type = posenc::RopeScalingType::kLongRope;
    p.scaling.original_max_position_embeddings = 4096;
    p.scaling.short_factor.assign(31, 1.0);
    p.scaling.long_factor.assign(32, 2.0);
    REQUIRE_THROWS_WITH(posenc::compute_rope_frequencies(p), Contains("short_factor has 31 entries, must have rotary_dim / 2 = 32"));
    p.scaling.short_factor.assign(32, 1.0);
    p.scaling.long_factor[5] = -1.0;
    REQUIRE_THROWS_WITH(posenc::compute_rope_frequencies(p), Contains("long_factor[5] = -1"));
  }
  SECTION("llama3 frequency factors") {
    p.scaling.type = posenc::RopeScalingType::kLlama3;
    p.scaling.factor = 8.0;
    p.scaling.original_max_position_embeddings = 8192;
    p.scaling.low_freq_factor = 4.0;
    p.scaling.high_freq_factor = 1.0;
    REQUIRE_THROWS_WITH(posenc::compute_rope_frequencies(p), Contains("high_freq_factor = 1 must be finite and >= low_freq_factor (4)"));
    p.scaling.low_freq_factor = 0.0;
    REQUIRE_THROWS_WITH(posenc::compute_rope_frequencies(p), Contains("low_freq_factor = 0"));
  }
  SECTION("yarn betas and attention_factor") {
    p.scaling.type = posenc::RopeScalingType::kYarn;
    p.scaling.factor = 4.0;
    p.max_position_embeddings = 4096;
    p.scaling.beta_fast = 0.0;
    REQUIRE_THROWS_WITH(posenc::compute_rope_frequencies(p), Contains("beta_fast = 0"));
    p.scaling.beta_fast = 32.0;
    p.scaling.attention_factor = -1.0;
    REQUIRE_THROWS_WITH(posenc::compute_rope_frequencies(p), Contains("attention_factor = -1"));
  }
  SECTION("NTK exponent needs rotary_dim > 2") {
    p.rotary_dim = 2;
    p.scaling.type = posenc::RopeScalingType::kNtk;
    p.scaling.factor = 2.0;
    REQUIRE_THROWS_WITH(posenc::compute_rope_frequencies(p), Contains("rotary_dim = 2 must be > 2"));
  }
  SECTION("seq_len and rope_type strings") {
    REQUIRE_THROWS_WITH(posenc::compute_rope_frequencies(p, -1), Contains("seq_len = -1"));
    REQUIRE_THROWS_MATCHES(posenc::rope_scaling_type_from_string("ntk-by-parts"), std::invalid_argument,
                           Catch::Matchers::Message("posenc::rope_scaling_type_from_string: rope_type = \"ntk-by-parts\" is not one of "
                                                    "default, linear, ntk, dynamic, yarn, longrope (su), llama3, proportional, vllm_ntk"));
    posenc::RopePlan plan_default(p);
    REQUIRE_THROWS_WITH(plan_default.update(-3), Contains("seq_len = -3"));
  }
}

TEMPLATE_TEST_CASE("rope: the turning-pair count leaves only whole blocks of still pairs out",
                   "[rope][proportional]", float, double) {
  // cos exactly 1 and sin +-0 is a still pair; anything else turns, a NaN sin included.
  const auto count = [](Eigen::Index half, Eigen::Index turning, TestType sin_still) {
    std::vector<TestType> c(static_cast<std::size_t>(half), TestType(1)), s(c.size(), sin_still);
    for (Eigen::Index j = 0; j < turning; ++j) {
      c[static_cast<std::size_t>(j)] = TestType(0.5);
      s[static_cast<std::size_t>(j)] = TestType(0.75);
    }
    return posenc::detail::rope_turning_pairs(c.data(), s.data(), half);
  };
  CHECK(count(256, 64, TestType(0)) == 64);   // Gemma-4's global heads
  CHECK(count(256, 64, TestType(-0.0)) == 64);
  CHECK(count(256, 65, TestType(0)) == 96);   // whole 32-pair blocks only
  CHECK(count(48, 12, TestType(0)) == 16);    // blocks counted from the end
  CHECK(count(256, 0, TestType(0)) == 0);     // position 0: nothing turns
  CHECK(count(16, 0, TestType(0)) == 0);
  CHECK(count(256, 256, TestType(0)) == 256);
  CHECK(count(256, 64, std::numeric_limits<TestType>::quiet_NaN()) == 256);
  CHECK(count(256, 64, TestType(1e-30)) == 256);
  std::vector<TestType> c(64, TestType(1)), s(64, TestType(0));
  c[40] = std::nextafter(TestType(1), TestType(2));  // one ulp off 1 in a block of the middle
  CHECK(posenc::detail::rope_turning_pairs(c.data(), s.data(), Eigen::Index{64}) == 64);
  c[40] = TestType(1);
  s[10] = TestType(-1e-38);
  CHECK(posenc::detail::rope_turning_pairs(c.data(), s.data(), Eigen::Index{64}) == 32);
}

TEST_CASE("rope: the portable bfloat16 store rounds to nearest, ties to even, bit for bit",
          "[rope][bf16]") {
  // The rows no vector kernel takes (builds without AVX2, rotary widths not a multiple of 8)
  // are rounded by detail::store_row. Rotated values are compared with a tolerance elsewhere
  // (a tie rounded the wrong way is half an ulp off too), so the rule is pinned here on float
  // bit patterns: the top 16 bits, rounded by the low 16 (0x8000 = exactly half an ulp).
  struct Case {
    std::uint32_t in;
    std::uint16_t want;
  };
  const Case cases[] = {
      {0x3F808000u, 0x3F80u},  // tie, even below: stays
      {0x3F818000u, 0x3F82u},  // tie, odd below: up to even
      {0x3F807FFFu, 0x3F80u},  // below half
      {0x3F808001u, 0x3F81u},  // above half
      {0xBF818000u, 0xBF82u},  // negative tie, odd: away from zero to even
      {0x7F7F8000u, 0x7F80u},  // tie above the largest finite bf16 (odd): to infinity
      {0x00018000u, 0x0002u},  // subnormal tie, odd: up
      {0x00008000u, 0x0000u},  // subnormal tie, even (zero): stays
      {0x7F800000u, 0x7F80u},  // +inf
      {0x7F800001u, 0x7FC0u},  // signalling NaN: kept a NaN, made quiet
  };
  std::vector<float> row;
  for (const Case& c : cases) {
    float f;
    std::memcpy(&f, &c.in, sizeof f);
    row.push_back(f);
  }
  std::vector<Eigen::bfloat16> out(row.size());
  posenc::detail::store_row<Eigen::bfloat16>(row.data(), out.data(),
                                             static_cast<Eigen::Index>(row.size()));
  for (std::size_t i = 0; i < row.size(); ++i) {
    std::uint16_t got;
    std::memcpy(&got, &out[i], sizeof got);
    CAPTURE(i, cases[i].in);
    CHECK(got == cases[i].want);
  }
}

TEST_CASE("rope: contiguous positions re-anchor their angle recurrence (pair 0 exact to 1e-14)",
          "[rope][precision]") {
  // Contiguous positions advance cos / sin by a recurrence, recomputed exactly every
  // kRopeReanchor tokens. Pair 0 turns at w = 1, so its angle p w = p is exact and any error
  // is the recurrence's own: (1, 0) rotated to position p must be (cos p, sin p). Measured:
  // 2.2e-15 over 65536 tokens; without re-anchoring 3.1e-12.
  constexpr Eigen::Index S = 65536, D = 16;
  posenc::RopeParams p;
  p.head_dim = D;
  const auto freqs = posenc::compute_rope_frequencies(p);
  REQUIRE(freqs.inv_freq[0] == 1.0);
  std::vector<double> x(static_cast<std::size_t>(S * D), 0.0);
  for (Eigen::Index s = 0; s < S; ++s) x[static_cast<std::size_t>(s * D)] = 1.0;
  posenc::apply_rope_inplace<double>(
      posenc::rope_heads<double>(posenc::TensorView<double, 4>(x.data(), 1, S, 1, D)),
      posenc::RopePositions::contiguous(1, S), freqs, RopeLayout::kHalfSplit);
  double worst = 0.0;
  for (Eigen::Index s = 0; s < S; ++s) {
    const auto at = static_cast<long double>(s);
    const auto i = static_cast<std::size_t>(s * D);
    worst = std::max({worst, std::abs(x[i] - static_cast<double>(std::cos(at))),
                      std::abs(x[i + D / 2] - static_cast<double>(std::sin(at)))});
  }
  INFO("largest error " << worst);
  CHECK(worst <= 1e-14);
}

TEST_CASE("rope: cache rows past the fast reduction (2^30) hold the sin / cos of the double angle",
          "[rope][cache][precision]") {
  // fill_rope_cos_sin_cache computes every row from the angle p * w_j rounded to double, as the
  // on-the-fly path does; past 2^30 radians the three-part pi/2 reduction is no longer exact.
  // Expected: a cos / a sin of that double angle in long double. first_position may reach
  // 2^53 - rows (the documented range), one more is refused by name.
  const Eigen::Index D = 16, rows = 3;
  auto f = plan(D);
  f.attention_factor = 1.25;
  std::vector<double> cache(static_cast<std::size_t>(rows * D));
  const posenc::TensorView<double, 2> view(cache.data(), rows, D);
  const std::int64_t last_first = (std::int64_t{1} << 53) - rows;
  for (const std::int64_t first : {std::int64_t{1} << 31, std::int64_t{1} << 40, last_first}) {
    CAPTURE(first);
    posenc::fill_rope_cos_sin_cache<double>(f, view, first);
    for (Eigen::Index r = 0; r < rows; ++r) {
      for (Eigen::Index j = 0; j < D / 2; ++j) {
        const double w = f.inv_freq[static_cast<std::size_t>(j)];
        const auto angle = static_cast<long double>(static_cast<double>(first + r) * w);
        const auto at = static_cast<std::size_t>(r * D + j);
        CHECK_THAT(cache[at], WithinAbs(static_cast<double>(1.25L * std::cos(angle)), 1e-14));
        CHECK_THAT(cache[at + D / 2],
                   WithinAbs(static_cast<double>(1.25L * std::sin(angle)), 1e-14));
      }
    }
  }
  REQUIRE_THROWS_WITH(posenc::fill_rope_cos_sin_cache<double>(f, view, last_first + 1),
                      Contains("first_position = 9007199254740990 must be in [0, 2^53 - rows]"));
}

TEST_CASE("rope: out of place with x and out of different head_dim throws, out untouched",
          "[rope][errors][out-of-place]") {
  // Both views hold the rotary slice, but out's rows are wider than x's: the pass-through copy
  // would read past x's rows. The shapes must be equal (the documented contract of apply_rope).
  const Eigen::Index S = 3, H = 2, D = 16;
  const auto f = plan(D);
  const auto x = posenc_test::random_vector<float>(static_cast<std::size_t>(S * H * 2 * D), 181);
  std::vector<float> out(static_cast<std::size_t>(S * H * 2 * D), -7.0f);
  const auto before = out;
  const auto pos = arange(S);
  for (const Eigen::Index out_dim : {D + 8, 2 * D}) {
    CAPTURE(out_dim);
    const posenc::ConstTensorView<float, 4> xv(x.data(), 1, S, H, D);
    const posenc::TensorView<float, 4> ov(out.data(), 1, S, H, out_dim);
    REQUIRE_THROWS_WITH(posenc::apply_rope<float>(xv, posenc::PositionIdsView(pos.data(), 1, S), f,
                                                  RopeLayout::kHalfSplit, ov),
                        Contains("x and out must have the same shape"));
    REQUIRE_THROWS_WITH(posenc::apply_rope_cached<float>(
                            posenc::rope_heads<float>(xv), posenc::rope_heads<float>(ov),
                            posenc::RopePositions::contiguous(1, S),
                            posenc::make_rope_cos_sin_cache(f, S), RopeLayout::kInterleaved),
                        Contains("x and out must have the same shape"));
  }
  CHECK(std::memcmp(out.data(), before.data(), out.size() * sizeof(float)) == 0);
}

TEST_CASE("rope: fill_rope_cos_sin_cache refuses 0 rows and a negative first_position by name",
          "[rope][errors][cache]") {
  // Documented range: rows > 0, first_position in [0, 2^53 - rows]; nothing is written on error.
  const Eigen::Index D = 16;
  const auto f = plan(D);
  std::vector<float> cache(static_cast<std::size_t>(4 * D), -3.0f);
  const auto before = cache;
  REQUIRE_THROWS_WITH(
      posenc::fill_rope_cos_sin_cache<float>(f, posenc::TensorView<float, 2>(cache.data(), 0, D)),
      Contains("cache rows = 0 must be > 0"));
  for (const std::int64_t first : {std::int64_t{-1}, std::numeric_limits<std::int64_t>::min()}) {
    CAPTURE(first);
    REQUIRE_THROWS_MATCHES(
        posenc::fill_rope_cos_sin_cache<float>(f, posenc::TensorView<float, 2>(cache.data(), 4, D),
                                               first),
        std::invalid_argument, Catch::Matchers::Message(
            "posenc::fill_rope_cos_sin_cache: first_position = " + std::to_string(first) +
            " must be in [0, 2^53 - rows]"));
  }
  CHECK(std::memcmp(cache.data(), before.data(), cache.size() * sizeof(float)) == 0);
}

TEST_CASE("rope: a device without its parallel_for is refused by the cached calls too",
          "[rope][errors][cache]") {
  // RopeApplyOptions::device and parallel_for are set together by set_device; half of the pair
  // is an error for every apply call (the plan-based ones are checked in the errors case above).
  const Eigen::Index S = 4, H = 2, D = 16;
  auto x = posenc_test::random_vector<float>(static_cast<std::size_t>(S * H * D), 191);
  const auto before = x;
  const auto cache = posenc::make_rope_cos_sin_cache(plan(D), S);
  const auto heads = posenc::rope_heads<float>(posenc::TensorView<float, 4>(x.data(), 1, S, H, D));
  const auto positions = posenc::RopePositions::contiguous(1, S);
  posenc::RopeApplyOptions o;
  int dummy = 0;
  o.device = &dummy;
  const auto message = Contains("options.device and options.parallel_for must be set together");
  REQUIRE_THROWS_WITH(posenc::apply_rope_inplace_cached<float>(heads, positions, cache,
                                                               RopeLayout::kHalfSplit, 0, o),
                      message);
  REQUIRE_THROWS_WITH(posenc::apply_rope_qk_inplace_cached<float>(heads, heads, positions, cache,
                                                                  RopeLayout::kInterleaved, 0, o),
                      message);
  REQUIRE_THROWS_WITH(posenc::apply_rope_cached<float>(posenc::detail::as_const(heads), heads,
                                                       positions, cache, RopeLayout::kHalfSplit,
                                                       0, o),
                      message);
  CHECK(std::memcmp(x.data(), before.data(), x.size() * sizeof(float)) == 0);
}

TEST_CASE("rope: Q+K calls name the tensor (q or k) whose view is bad", "[rope][errors][gqa]") {
  // apply_rope_qk_inplace validates q then k; the message says which one failed.
  const Eigen::Index S = 2, D = 16;
  const auto f = plan(D);
  std::vector<float> wide(static_cast<std::size_t>(S * 4 * D), 1.0f);
  std::vector<float> narrow(static_cast<std::size_t>(S * 2 * 8), 1.0f);
  const auto w = posenc::rope_heads<float>(posenc::TensorView<float, 4>(wide.data(), 1, S, 4, D));
  const auto n = posenc::rope_heads<float>(posenc::TensorView<float, 4>(narrow.data(), 1, S, 2, 8));
  const auto pos = posenc::RopePositions::contiguous(1, S);
  REQUIRE_THROWS_WITH(posenc::apply_rope_qk_inplace<float>(w, n, pos, f, RopeLayout::kHalfSplit),
                      Contains("must be <= k head_dim (8)"));
  REQUIRE_THROWS_WITH(posenc::apply_rope_qk_inplace<float>(n, w, pos, f, RopeLayout::kHalfSplit),
                      Contains("must be <= q head_dim (8)"));
  const auto cache = posenc::make_rope_cos_sin_cache(f, S);
  REQUIRE_THROWS_WITH(posenc::apply_rope_qk_inplace_cached<float>(w, n, pos, cache,
                                                                  RopeLayout::kInterleaved),
                      Contains("must be <= k head_dim (8)"));
  CHECK(std::all_of(wide.begin(), wide.end(), [](float v) { return v == 1.0f; }));
}

// ---- mutation audit: posenc/reference/rope.hpp's rotation pinned on its own ---------------

TEST_CASE("rope: the reference rotation meets the seed's cos 1 and the 2x2 closed form",
          "[rope][reference][seed]") {
  const std::vector<long double> w1 = {1.0L};
  // Seed: with w = 1, <R(1)q, R(2)k> = cos 1 for q = k = [1, 0].
  const double e0[2] = {1.0, 0.0};
  for (const auto layout : {RopeLayout::kInterleaved, RopeLayout::kHalfSplit}) {
    const auto a = posenc::reference::rope_vector(e0, 2, 1, w1, 1.0L, 0, layout);
    const auto b = posenc::reference::rope_vector(e0, 2, 2, w1, 1.0L, 0, layout);
    CHECK(std::fabs(a[0] * b[0] + a[1] * b[1] - std::cos(1.0L)) < 1e-18L);
    CHECK(std::fabs(a[1] - std::sin(1.0L)) < 1e-18L);  // R(1)[1, 0] = [cos 1, sin 1]
  }
  // General q, k: <R(m)q, R(n)k> = <q, R(n - m)k> = cos(n-m) q.k + sin(n-m) (q2 k1 - q1 k2).
  const double q[2] = {0.3, -0.7}, k[2] = {0.5, 0.2};
  const auto rq = posenc::reference::rope_vector(q, 2, 11, w1, 1.0L, 0, RopeLayout::kHalfSplit);
  const auto rk = posenc::reference::rope_vector(k, 2, 13, w1, 1.0L, 0, RopeLayout::kHalfSplit);
  const long double qk = 0.3L * 0.5L - 0.7L * 0.2L, cross = -0.7L * 0.5L - 0.3L * 0.2L;
  CHECK(std::fabs(rq[0] * rk[0] + rq[1] * rk[1] -
                  (std::cos(2.0L) * qk + std::sin(2.0L) * cross)) < 1e-15L);
}

TEST_CASE("rope: the reference scales both dims of a pair by the attention factor and "
          "inverts exactly",
          "[rope][reference]") {
  // y = a R(p) x: |y| = a |x| per pair; the inverse R(-p) y / a gives x back (file comment).
  const std::vector<long double> w = {1.0L, 0.01L};
  const double x[6] = {0.3, -0.7, 0.5, 0.2, 9.0, -9.0};  // dims 4, 5 pass through
  const long double a = 2.0L;
  for (const auto layout : {RopeLayout::kInterleaved, RopeLayout::kHalfSplit}) {
    const auto y = posenc::reference::rope_vector(x, 6, 7, w, a, 0, layout);
    for (Eigen::Index j = 0; j < 2; ++j) {
      CAPTURE(j);
      const auto [i1, i2] = posenc::reference::rope_pair(layout, j, 4, 0);
      const auto u1 = static_cast<std::size_t>(i1), u2 = static_cast<std::size_t>(i2);
      const long double before = std::hypot(static_cast<long double>(x[u1]),
                                            static_cast<long double>(x[u2]));
      CHECK(std::fabs(std::hypot(y[u1], y[u2]) - a * before) < 1e-15L);
    }
    CHECK(y[4] == 9.0L);
    CHECK(y[5] == -9.0L);
    std::vector<double> yd(y.begin(), y.end());
    const auto back = posenc::reference::rope_vector(yd.data(), 6, 7, w, a, 0, layout, true);
    for (std::size_t i = 0; i < 6; ++i) {
      CAPTURE(i);
      CHECK(std::fabs(back[i] - static_cast<long double>(x[i])) < 1e-14L);
    }
  }
}
