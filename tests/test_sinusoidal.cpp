// Sinusoidal absolute encodings against the seed article's numbers, closed forms (the shift
// rotation) and an independent long-double reference, for every layout and storage type.

#include <catch2/catch.hpp>

#include <posenc/reference/sinusoidal.hpp>
#include <posenc/sinusoidal.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "support/check.hpp"
#include "support/rng.hpp"

using posenc::SinusoidalLayout;
using posenc::SinusoidalParams;
using Catch::Matchers::WithinAbs;

namespace {

SinusoidalParams with_layout(SinusoidalLayout layout, double base = 10000.0) {
  SinusoidalParams p;
  p.layout = layout;
  p.base = base;
  return p;
}

template <typename T>
std::vector<T> encode(double position, Eigen::Index d, const SinusoidalParams& params) {
  std::vector<T> row(static_cast<std::size_t>(d));
  posenc::sinusoidal_encoding<T>(position, posenc::TensorView<T, 1>(row.data(), d), params);
  return row;
}

// Storage rounding on top of a float-accurate value: half-ulp of the type at magnitude 1,
// plus the float compute of the 16-bit types.
template <typename T> double storage_tolerance();
template <> double storage_tolerance<double>() { return 1e-12; }
template <> double storage_tolerance<float>() { return 2e-7; }
template <> double storage_tolerance<Eigen::half>() { return 1e-3; }        // 2^-11 at 1.0 = 4.9e-4
template <> double storage_tolerance<Eigen::bfloat16>() { return 8e-3; }    // 2^-8 at 1.0 = 3.9e-3

// Adds the encoding in place to a copy of emb0 and compares every element with emb0 + the
// long-double reference encoding at ids[b * seq + s].
template <typename T>
void check_add_inplace(const std::vector<T>& emb0, const std::vector<std::int64_t>& ids,
                       Eigen::Index batch, Eigen::Index seq, Eigen::Index d,
                       const SinusoidalParams& params, double tol) {
  auto emb = emb0;
  posenc::add_sinusoidal_inplace<T>(posenc::TensorView<T, 3>(emb.data(), batch, seq, d),
                                    posenc::PositionIdsView(ids.data(), batch, seq), params);
  POSENC_REQUIRE_CLOSE(posenc_test::compare(
      emb.size(), [&](std::size_t k) { return static_cast<double>(emb[k]); },
      [&](std::size_t k) {
        const auto bs = k / static_cast<std::size_t>(d);
        const auto col = static_cast<Eigen::Index>(k % static_cast<std::size_t>(d));
        const long double pe = posenc::reference::sinusoidal_value(
            static_cast<long double>(ids[bs]), col, d, params);
        return static_cast<double>(static_cast<long double>(static_cast<double>(emb0[k])) + pe);
      },
      tol));
}

}  // namespace

TEST_CASE("sinusoidal: the seed's worked numbers PE(0) and PE(1) for d = 4", "[sinusoidal][seed]") {
  // Seed 000 §3.2: PE(1) = [sin 1, cos 1, sin 0.01, cos 0.01] ~ [0.8415, 0.5403, 0.0100, 0.99995].
  const auto pe0 = encode<double>(0.0, 4, {});
  CHECK(pe0 == std::vector<double>{0.0, 1.0, 0.0, 1.0});
  const auto pe1 = encode<double>(1.0, 4, {});
  CHECK_THAT(pe1[0], WithinAbs(0.8415, 5e-5));
  CHECK_THAT(pe1[1], WithinAbs(0.5403, 5e-5));
  CHECK_THAT(pe1[2], WithinAbs(0.0100, 5e-5));
  CHECK_THAT(pe1[3], WithinAbs(0.99995, 5e-6));
  CHECK_THAT(pe1[2], WithinAbs(std::sin(0.01), 1e-15));  // 10000^(-2/4) = 0.01 exactly
}

TEST_CASE("sinusoidal: layouts place sin and cos where their sources do", "[sinusoidal]") {
  const Eigen::Index d = 8;
  const double p = 3.0;
  SECTION("interleaved (Vaswani): w_i = 10000^(-2i/d)") {
    const auto row = encode<double>(p, d, with_layout(SinusoidalLayout::kInterleaved));
    for (int i = 0; i < 4; ++i) {
      const double w = std::pow(10000.0, -2.0 * i / 8.0);
      CHECK_THAT(row[2 * i], WithinAbs(std::sin(p * w), 1e-15));
      CHECK_THAT(row[2 * i + 1], WithinAbs(std::cos(p * w), 1e-15));
    }
  }
  SECTION("sin|cos (tensor2tensor / fairseq / Whisper): w_i = exp(-ln(10000) i / (d/2 - 1))") {
    const auto row = encode<double>(p, d, with_layout(SinusoidalLayout::kSinCos));
    for (int i = 0; i < 4; ++i) {
      const double w = std::exp(-std::log(10000.0) * i / 3.0);
      CHECK_THAT(row[i], WithinAbs(std::sin(p * w), 1e-15));
      CHECK_THAT(row[4 + i], WithinAbs(std::cos(p * w), 1e-15));
    }
    CHECK_THAT(row[3], WithinAbs(std::sin(p * 1e-4), 1e-15));  // last pair reaches 1/base
  }
  SECTION("cos|sin (timestep embedding): w_i = exp(-ln(max_period) i / (d/2))") {
    const auto row = encode<double>(p, d, with_layout(SinusoidalLayout::kCosSin));
    for (int i = 0; i < 4; ++i) {
      const double w = std::exp(-std::log(10000.0) * i / 4.0);
      CHECK_THAT(row[i], WithinAbs(std::cos(p * w), 1e-15));
      CHECK_THAT(row[4 + i], WithinAbs(std::sin(p * w), 1e-15));
    }
  }
  SECTION("sin|cos with Vaswani's w_i = 10000^(-2i/d) (Transformer-XL, MAE's 1-D blocks)") {
    const auto row = encode<double>(p, d, with_layout(SinusoidalLayout::kSinCosVaswani));
    // w = 1, 0.1, 0.01, 0.001 (10000^(-1/4) = 0.1): kSinCos's w_1 would be 10000^(-1/3).
    const double w[4] = {1.0, 0.1, 0.01, 0.001};
    for (int i = 0; i < 4; ++i) {
      CHECK_THAT(row[i], WithinAbs(std::sin(p * w[i]), 2e-16));
      CHECK_THAT(row[4 + i], WithinAbs(std::cos(p * w[i]), 2e-16));
    }
    CHECK_THAT(row[1], WithinAbs(0.29552020666133955, 1e-16));  // sin(0.3)
  }
}

TEST_CASE("sinusoidal: shift property PE(p + k) = M(k w) PE(p) for every pair",
          "[sinusoidal][shift]") {
  // Vaswani §3.5: for each pair (sin, cos) of frequency w, shifting by k is the fixed rotation
  // [sin(a+b); cos(a+b)] = [[cos b, sin b], [-sin b, cos b]] [sin a; cos a], b = k w.
  const Eigen::Index d = 64;
  const auto params = with_layout(SinusoidalLayout::kInterleaved);
  const auto w = posenc::sinusoidal_frequencies(d, params);
  for (const double p : {0.0, 7.0, 1000.0, 99999.0}) {
    for (const double k : {1.0, 13.0, 4096.0, 100000.0}) {
      CAPTURE(p, k);
      const auto a = encode<double>(p, d, params);
      const auto b = encode<double>(p + k, d, params);
      double worst = 0.0;
      for (Eigen::Index i = 0; i < d / 2; ++i) {
        const double c = std::cos(k * w[i]), s = std::sin(k * w[i]);
        const double sin_shifted = c * a[2 * i] + s * a[2 * i + 1];
        const double cos_shifted = -s * a[2 * i] + c * a[2 * i + 1];
        worst = std::max({worst, std::abs(sin_shifted - b[2 * i]),
                          std::abs(cos_shifted - b[2 * i + 1])});
      }
      CHECK(worst < 1e-10);
    }
  }
}

TEMPLATE_TEST_CASE("sinusoidal: every layout matches the long-double reference",
                   "[sinusoidal][reference]", float, double, Eigen::half, Eigen::bfloat16) {
  using T = TestType;
  const auto layout = GENERATE(SinusoidalLayout::kInterleaved, SinusoidalLayout::kSinCos,
                               SinusoidalLayout::kCosSin, SinusoidalLayout::kSinCosVaswani);
  const Eigen::Index d = GENERATE(4, 6, 48, 64, 300);
  const auto params = with_layout(layout);
  CAPTURE(posenc::to_string(layout), d);

  SECTION("single rows at positions up to 2^31 - 1") {
    for (const double p : {0.0, 1.0, 17.0, 4095.0, 131071.0, 1e6, 2147483647.0}) {
      CAPTURE(p);
      const auto row = encode<T>(p, d, params);
      // Past 10^6 the angle's own double rounding (p * ulp(w)) dominates: ~p * 1e-16.
      const double tol = storage_tolerance<T>() + p * 2e-16;
      POSENC_REQUIRE_CLOSE(posenc_test::compare(
          row.size(), [&](std::size_t k) { return static_cast<double>(row[k]); },
          [&](std::size_t k) {
            return static_cast<double>(posenc::reference::sinusoidal_value(
                p, static_cast<Eigen::Index>(k), d, params));
          },
          tol));
    }
  }
  SECTION("tables (recurrence + re-anchoring) starting anywhere") {
    const Eigen::Index rows = 300;  // recurrence groups (re-anchoring: the test below)
    for (const std::int64_t first : {std::int64_t{0}, std::int64_t{999'900}}) {
      CAPTURE(first);
      std::vector<T> table(static_cast<std::size_t>(rows * d));
      posenc::sinusoidal_table<T>(posenc::TensorView<T, 2>(table.data(), rows, d), params, first);
      POSENC_REQUIRE_CLOSE(posenc_test::compare(
          table.size(), [&](std::size_t k) { return static_cast<double>(table[k]); },
          [&](std::size_t k) {
            const auto r = static_cast<Eigen::Index>(k) / d;
            return static_cast<double>(posenc::reference::sinusoidal_value(
                static_cast<long double>(first + r), static_cast<Eigen::Index>(k) % d, d, params));
          },
          // The double angle itself carries ~p * 2^-52 rad of rounding near 10^6.
          storage_tolerance<T>() + static_cast<double>(first + rows) * 3e-16));
    }
  }
}

TEST_CASE("sinusoidal: the shift recurrence stays within 1e-12 over long contiguous runs",
          "[sinusoidal][reference]") {
  // 10000 consecutive positions cross two re-anchoring points; double storage exposes drift
  // that float rounding would hide.
  const Eigen::Index rows = 10000, d = 16;
  for (const std::int64_t first : {std::int64_t{0}, std::int64_t{123457}}) {
    const auto params = with_layout(SinusoidalLayout::kSinCos);
    std::vector<double> table(static_cast<std::size_t>(rows * d));
    posenc::sinusoidal_table<double>(posenc::TensorView<double, 2>(table.data(), rows, d), params,
                                     first);
    POSENC_REQUIRE_CLOSE(posenc_test::compare(
        table.size(), [&](std::size_t k) { return table[k]; },
        [&](std::size_t k) {
          const auto r = static_cast<Eigen::Index>(k) / d;
          return static_cast<double>(posenc::reference::sinusoidal_value(
              static_cast<long double>(first + r), static_cast<Eigen::Index>(k) % d, d, params));
        },
        1e-12 + static_cast<double>(first + rows) * 3e-16));
  }
}

TEST_CASE("sinusoidal: re-anchoring bounds the recurrence's drift (pair 0 exact to 2e-13)",
          "[sinusoidal][precision]") {
  // Pair 0 of every layout has w = 1: its angle p is exact, so its error against long double
  // sin / cos of p is the recurrence's drift alone (the other pairs also carry the rounding
  // of p w, which hides it). Measured over 65536 rows: 5.8e-14; re-anchoring removed, 9.1e-13
  // (1.5e-11 over 2^20 rows).
  constexpr Eigen::Index rows = 65536, d = 16;
  for (const auto layout : {SinusoidalLayout::kInterleaved, SinusoidalLayout::kSinCos}) {
    CAPTURE(posenc::to_string(layout));
    const auto params = with_layout(layout);
    std::vector<double> table(static_cast<std::size_t>(rows * d));
    posenc::sinusoidal_table<double>(posenc::TensorView<double, 2>(table.data(), rows, d), params);
    const Eigen::Index cos_col = layout == SinusoidalLayout::kInterleaved ? 1 : d / 2;
    double worst = 0.0;
    for (Eigen::Index r = 0; r < rows; ++r) {
      const auto p = static_cast<long double>(r);
      const auto at = [&](Eigen::Index c) { return table[static_cast<std::size_t>(r * d + c)]; };
      worst = std::max({worst, std::abs(at(0) - static_cast<double>(std::sin(p))),
                        std::abs(at(cos_col) - static_cast<double>(std::cos(p)))});
    }
    INFO("largest error " << worst);
    CHECK(worst <= 2e-13);
  }
}

TEST_CASE("sinusoidal: float output within 2e-7 of long double at positions up to 10^6",
          "[sinusoidal][precision]") {
  // The accuracy bar: angles in double, one rounding to float. float(p) * w would miss
  // by ~0.06 rad at 10^6.
  const Eigen::Index d = 512;
  const auto params = with_layout(SinusoidalLayout::kInterleaved);
  for (const double p : {65535.0, 131071.0, 524287.0, 1e6}) {
    const auto row = encode<float>(p, d, params);
    for (Eigen::Index k = 0; k < d; ++k) {
      const long double want = posenc::reference::sinusoidal_value(p, k, d, params);
      INFO("p = " << p << ", k = " << k);
      REQUIRE(std::abs(static_cast<long double>(row[static_cast<std::size_t>(k)]) - want) <= 2e-7L);
    }
  }
}

TEMPLATE_TEST_CASE("sinusoidal: add in place with position_ids (padding, jumps, repeats)",
                   "[sinusoidal][add]", float, double, Eigen::half, Eigen::bfloat16) {
  using T = TestType;
  const Eigen::Index batch = 3, seq = 150, d = 260;  // d/2 = 130 pairs spans two blocks
  const auto layout = GENERATE(SinusoidalLayout::kInterleaved, SinusoidalLayout::kSinCos,
                               SinusoidalLayout::kCosSin, SinusoidalLayout::kSinCosVaswani);
  const auto params = with_layout(layout);
  CAPTURE(posenc::to_string(layout));
  const auto emb0 = posenc_test::random_vector<T>(static_cast<std::size_t>(batch * seq * d), 7);
  std::vector<std::int64_t> ids(static_cast<std::size_t>(batch * seq));
  posenc_test::SplitMix64 rng(11);
  for (Eigen::Index s = 0; s < seq; ++s) {
    ids[static_cast<std::size_t>(s)] = s;                                       // contiguous
    ids[static_cast<std::size_t>(seq + s)] = s < 40 ? 0 : s - 40;              // left padding
    ids[static_cast<std::size_t>(2 * seq + s)] = rng.integer(0, 2'000'000'000);  // random jumps
  }
  // The sum can reach 2 in magnitude: twice the storage rounding, plus the angle rounding of
  // positions near 2e9 (~4e-7 rad).
  check_add_inplace<T>(emb0, ids, batch, seq, d, params, 2 * storage_tolerance<T>() + 5e-7);
}

TEST_CASE("sinusoidal: timestep embedding accepts fractional timesteps", "[sinusoidal][timestep]") {
  const std::vector<double> t{0.0, 0.5, 999.25};
  const Eigen::Index d = 8;
  std::vector<float> out(t.size() * d);
  posenc::timestep_embedding<float>(posenc::ConstTensorView<double, 1>(t.data(), 3),
                                    posenc::TensorView<float, 2>(out.data(), 3, d));
  for (std::size_t n = 0; n < t.size(); ++n) {
    for (int i = 0; i < 4; ++i) {
      const double w = std::exp(-std::log(10000.0) * i / 4.0);
      CHECK_THAT(out[n * d + i], WithinAbs(std::cos(t[n] * w), 2e-7));
      CHECK_THAT(out[n * d + 4 + i], WithinAbs(std::sin(t[n] * w), 2e-7));
    }
  }
}

TEST_CASE("sinusoidal: bad input throws, names the parameter and writes nothing",
          "[sinusoidal][errors]") {
  using Catch::Matchers::Contains;
  std::vector<float> emb(2 * 3 * 8, 0.25f);
  const auto before = emb;
  std::vector<std::int64_t> ids{0, 1, 2, 0, 1, 2};

  SECTION("odd d_model") {
    std::vector<float> odd(2 * 3 * 7, 0.25f);
    const auto odd_before = odd;
    REQUIRE_THROWS_MATCHES(
        posenc::add_sinusoidal_inplace<float>(posenc::TensorView<float, 3>(odd.data(), 2, 3, 7),
                                              posenc::PositionIdsView(ids.data(), 2, 3)),
        std::invalid_argument,
        Catch::Matchers::Message("posenc::add_sinusoidal_inplace: d_model = 7 must be even "
                                 "(sin/cos come in pairs)"));
    CHECK(odd == odd_before);
  }
  SECTION("negative position, found after valid ones") {
    ids[4] = -3;
    REQUIRE_THROWS_WITH(
        posenc::add_sinusoidal_inplace<float>(posenc::TensorView<float, 3>(emb.data(), 2, 3, 8),
                                              posenc::PositionIdsView(ids.data(), 2, 3)),
        Contains("position_ids[1, 1] = -3") && Contains("[0, 2^53]"));
    CHECK(emb == before);
  }
  SECTION("position_ids shape mismatch") {
    REQUIRE_THROWS_WITH(
        posenc::add_sinusoidal_inplace<float>(posenc::TensorView<float, 3>(emb.data(), 2, 3, 8),
                                              posenc::PositionIdsView(ids.data(), 3, 2)),
        Contains("position_ids shape [3, 2]") && Contains("[2, 3]"));
    CHECK(emb == before);
  }
  SECTION("zero-size dimensions") {
    REQUIRE_THROWS_AS(
        posenc::add_sinusoidal_inplace<float>(posenc::TensorView<float, 3>(emb.data(), 0, 3, 8),
                                              posenc::PositionIdsView(ids.data(), 0, 3)),
        std::invalid_argument);
    REQUIRE_THROWS_WITH(
        posenc::sinusoidal_table<float>(posenc::TensorView<float, 2>(emb.data(), 0, 8)),
        Contains("num_positions = 0"));
    CHECK(emb == before);
  }
  SECTION("sin|cos needs d >= 4; base must be positive") {
    REQUIRE_THROWS_WITH(posenc::sinusoidal_frequencies(2, with_layout(SinusoidalLayout::kSinCos)),
                        Contains("d_model = 2 must be >= 4"));
    REQUIRE_THROWS_WITH(
        posenc::sinusoidal_frequencies(8, with_layout(SinusoidalLayout::kInterleaved, -1.0)),
        Contains("base = -1"));
  }
  SECTION("a base, d_model or position whose angles would not be finite") {
    // sin|cos reaches w = 1 / base: base 1e-310 gave w = inf, so PE(0) had 0 * inf = NaN;
    // base 1e-300 gives w = 1e300, finite, but 2^53 w is not. Interleaved reaches
    // base^(-(d-2)/d): 1e299.4 for d = 1000, 2^53 times that overflows too.
    for (const double base : {1e-310, 1e-300}) {
      CAPTURE(base);
      REQUIRE_THROWS_WITH(posenc::sinusoidal_frequencies(8, with_layout(SinusoidalLayout::kSinCos, base)),
                          Contains("2^53 times it must be finite"));
    }
    REQUIRE_THROWS_WITH(posenc::sinusoidal_frequencies(1000, with_layout(SinusoidalLayout::kInterleaved, 1e-300)),
                        Contains("2^53 times it must be finite"));
    CHECK(posenc::sinusoidal_frequencies(8, with_layout(SinusoidalLayout::kInterleaved, 1e-300)).back() ==
          Approx(std::pow(1e-300, -0.75)));  // 1e225: every angle up to 2^53 stays finite
    // A base just below 1 is fine at integer positions; a huge fractional one is not.
    float row[4] = {9, 9, 9, 9};
    const auto small_base = with_layout(SinusoidalLayout::kSinCos, 1e-3);  // w up to 1000
    REQUIRE_THROWS_WITH(posenc::sinusoidal_encoding<float>(1e307, posenc::TensorView<float, 1>(row, 4), small_base),
                        Contains("position = 9.9999999999999999e+306 times the largest frequency"));
    CHECK(row[0] == 9.0f);
    const std::vector<double> t = {1e307};  // cos|sin, d = 4: w up to 1e-3^(-1/2) = 31.6
    REQUIRE_THROWS_WITH(posenc::timestep_embedding<float>(posenc::ConstTensorView<double, 1>(t.data(), 1),
                                                          posenc::TensorView<float, 2>(row, 1, 4), 1e-3),
                        Contains("timestep = 9.9999999999999999e+306 times the largest frequency"));
    CHECK(row[0] == 9.0f);
    // d_model past 2^20: the plan's vectors were sized unchecked (length_error, bad_alloc).
    REQUIRE_THROWS_WITH(posenc::SinusoidalPlan(std::numeric_limits<Eigen::Index>::max() - 1),
                        Contains("d_model = 9223372036854775806 must be <= 2^20"));
  }
  SECTION("the table reaches 2^53 itself, as add_sinusoidal_inplace does") {
    const std::int64_t top = std::int64_t{1} << 53;
    float one[8], two[16];
    posenc::sinusoidal_table<float>(posenc::TensorView<float, 2>(one, 1, 8), {}, top);
    std::vector<float> added(8, 0.0f);
    const std::vector<std::int64_t> at_top{top};
    posenc::add_sinusoidal_inplace<float>(posenc::TensorView<float, 3>(added.data(), 1, 1, 8),
                                          posenc::PositionIdsView(at_top.data(), 1, 1));
    for (int k = 0; k < 8; ++k) CHECK(one[k] == added[static_cast<std::size_t>(k)]);
    REQUIRE_THROWS_WITH(posenc::sinusoidal_table<float>(posenc::TensorView<float, 2>(two, 2, 8), {}, top),
                        Contains("first_position = 9007199254740992 must be in [0, 2^53 - num_positions + 1]"));
  }
  SECTION("negative or non-finite single positions") {
    float row[4] = {9, 9, 9, 9};
    REQUIRE_THROWS_WITH(posenc::sinusoidal_encoding<float>(-1.0, posenc::TensorView<float, 1>(row, 4)),
                        Contains("position = -1"));
    REQUIRE_THROWS_AS(posenc::sinusoidal_encoding<float>(std::nan(""), posenc::TensorView<float, 1>(row, 4)),
                      std::invalid_argument);
    CHECK(row[0] == 9.0f);
  }
}

TEMPLATE_TEST_CASE("sinusoidal: batch rows sharing position_ids are encoded once and added to each",
                   "[sinusoidal][add]", float, double, Eigen::half, Eigen::bfloat16) {
  // Batch rows 0-2 share contiguous positions, rows 3-4 share a left-padded run, so the kernel
  // fans one computation out to several rows. d/2 = 2573 pairs crosses the 2048-pair state
  // block, several 512-pair fan-out chunks and leaves a tail that is not a multiple of 8;
  // seq = 23 mixes groups of 4 with single rows.
  using T = TestType;
  const Eigen::Index batch = 5, seq = 23, d = 2 * 2573;
  const auto layout = GENERATE(SinusoidalLayout::kInterleaved, SinusoidalLayout::kSinCos,
                               SinusoidalLayout::kCosSin, SinusoidalLayout::kSinCosVaswani);
  const auto params = with_layout(layout);
  CAPTURE(posenc::to_string(layout));
  const auto emb0 = posenc_test::random_vector<T>(static_cast<std::size_t>(batch * seq * d), 5);
  std::vector<std::int64_t> ids(static_cast<std::size_t>(batch * seq));
  for (Eigen::Index b = 0; b < batch; ++b) {
    for (Eigen::Index s = 0; s < seq; ++s) {
      ids[static_cast<std::size_t>(b * seq + s)] = b < 3 ? 100'000 + s : (s < 6 ? 0 : s - 6);
    }
  }
  check_add_inplace<T>(emb0, ids, batch, seq, d, params, 2 * storage_tolerance<T>() + 1e-10);
}

TEST_CASE("sinusoidal: float tables stay within 2e-7 across a whole re-anchoring period",
          "[sinusoidal][precision]") {
  // 4100 consecutive rows: the longest run of chained shift rotations (4096) and a re-anchor,
  // near position 10^6. Every layout; d_model 200 leaves a tail after the 8-pair SIMD blocks.
  const Eigen::Index rows = 4100, d = 200;
  const std::int64_t first = 1'000'000 - 2050;
  for (const auto layout : {SinusoidalLayout::kInterleaved, SinusoidalLayout::kSinCos,
                            SinusoidalLayout::kCosSin, SinusoidalLayout::kSinCosVaswani}) {
    CAPTURE(posenc::to_string(layout));
    const auto params = with_layout(layout);
    std::vector<float> table(static_cast<std::size_t>(rows * d));
    posenc::sinusoidal_table<float>(posenc::TensorView<float, 2>(table.data(), rows, d), params,
                                    first);
    POSENC_REQUIRE_CLOSE(posenc_test::compare(
        table.size(), [&](std::size_t k) { return static_cast<double>(table[k]); },
        [&](std::size_t k) {
          const auto r = static_cast<Eigen::Index>(k) / d;
          return static_cast<double>(posenc::reference::sinusoidal_value(
              static_cast<long double>(first + r), static_cast<Eigen::Index>(k) % d, d, params));
        },
        2e-7 + 1e6 * 3e-16));
  }
}

TEST_CASE("sinusoidal: d_model, base and layout limits throw naming the parameter",
          "[sinusoidal][errors]") {
  using Catch::Matchers::Contains;
  const double inf = std::numeric_limits<double>::infinity();
  const auto interleaved_base = [](double base) {
    return with_layout(SinusoidalLayout::kInterleaved, base);
  };
  const auto bad_layout = with_layout(static_cast<SinusoidalLayout>(4));
  REQUIRE_THROWS_WITH(posenc::sinusoidal_frequencies(0), Contains("d_model = 0 must be > 0"));
  // 2^20 is the documented widest d_model; 2^20 + 2 is past it.
  CHECK(posenc::sinusoidal_frequencies(Eigen::Index{1} << 20).size() == (std::size_t{1} << 19));
  REQUIRE_THROWS_WITH(posenc::sinusoidal_frequencies((Eigen::Index{1} << 20) + 2),
                      Contains("d_model = 1048578 must be <= 2^20"));
  // d = 2 has a single pair of w = base^0 = 1: nothing but the base check itself rejects these.
  REQUIRE_THROWS_WITH(posenc::sinusoidal_frequencies(2, interleaved_base(0.0)),
                      Contains("base = 0 must be finite and > 0"));
  REQUIRE_THROWS_WITH(posenc::sinusoidal_frequencies(8, interleaved_base(inf)),
                      Contains("base = inf must be finite and > 0"));
  REQUIRE_THROWS_WITH(posenc::sinusoidal_frequencies(8, bad_layout),
                      Contains("layout = 4 is not a SinusoidalLayout"));
}

TEST_CASE("sinusoidal: a plan, position_ids or timesteps of the wrong shape throw before writing",
          "[sinusoidal][errors]") {
  using Catch::Matchers::Contains;
  using Catch::Matchers::StartsWith;
  using Out2 = posenc::TensorView<float, 2>;
  using Steps = posenc::ConstTensorView<double, 1>;
  const posenc::SinusoidalPlan plan8(8);
  std::vector<float> buf(2 * 3 * 16, 0.25f);
  const auto before = buf;
  REQUIRE_THROWS_WITH(posenc::sinusoidal_table<float>(Out2(buf.data(), 3, 16), plan8),
                      Contains("out d_model = 16 must equal the plan's d_model (8)"));
  const std::vector<std::int64_t> ids{0, 1, 2, 0, 1, 2, 3, 4};
  REQUIRE_THROWS_WITH(
      posenc::add_sinusoidal_inplace<float>(posenc::TensorView<float, 3>(buf.data(), 2, 3, 16),
                                            posenc::PositionIdsView(ids.data(), 2, 3), plan8),
      Contains("embeddings d_model = 16 must equal the plan's d_model (8)"));
  // Batch matches, seq does not: [2, 4] ids for [2, 3] rows.
  REQUIRE_THROWS_WITH(
      posenc::add_sinusoidal_inplace<float>(posenc::TensorView<float, 3>(buf.data(), 2, 3, 8),
                                            posenc::PositionIdsView(ids.data(), 2, 4), plan8),
      Contains("position_ids shape [2, 4]") && Contains("[batch, seq] = [2, 3]"));
  const std::vector<double> t{1.0, 2.0};
  REQUIRE_THROWS_WITH(posenc::timestep_embedding<float>(Steps(t.data(), 2),
                                                        Out2(buf.data(), 3, 8)),
                      Contains("out rows = 3 must equal the number of timesteps (2)"));
  // The convenience table names itself, not the plan it builds (error.hpp: the message names
  // the function called).
  REQUIRE_THROWS_WITH(posenc::sinusoidal_table<float>(Out2(buf.data(), 2, 7)),
                      StartsWith("posenc::sinusoidal_table: d_model = 7 must be even"));
  CHECK(buf == before);
}

TEST_CASE("sinusoidal: runs that break inside a group of four match the long-double reference",
          "[sinusoidal][add]") {
  // The kernel advances four rows at once only when all four positions are consecutive, and
  // anchors with exact sin/cos elsewhere. Row 0 starts at position 1 (fairseq's first position
  // is padding_idx + 1), runs 2 | 5 and 4, 5, 6 | 8 break at the 2nd and the 4th row of a group;
  // row 1 equals row 0 except its last id, so the two rows must not share one encoding.
  const Eigen::Index batch = 2, seq = 12, d = 16;
  std::vector<std::int64_t> ids{1, 2, 5, 9, 3, 4, 5, 6, 8, 0, 1, 2};
  ids.insert(ids.end(), ids.begin(), ids.end());
  ids.back() = 3;
  for (const auto layout : {SinusoidalLayout::kInterleaved, SinusoidalLayout::kSinCos,
                            SinusoidalLayout::kCosSin, SinusoidalLayout::kSinCosVaswani}) {
    CAPTURE(posenc::to_string(layout));
    const std::vector<double> emb0(static_cast<std::size_t>(batch * seq * d), 0.5);
    check_add_inplace<double>(emb0, ids, batch, seq, d, with_layout(layout), 1e-12);
    // A table that starts at position 1.
    std::vector<double> table(static_cast<std::size_t>(6 * d));
    posenc::sinusoidal_table<double>(posenc::TensorView<double, 2>(table.data(), 6, d),
                                     with_layout(layout), 1);
    for (Eigen::Index k = 0; k < 6 * d; ++k) {
      const long double want = posenc::reference::sinusoidal_value(
          static_cast<long double>(1 + k / d), k % d, d, with_layout(layout));
      CHECK_THAT(table[static_cast<std::size_t>(k)], WithinAbs(static_cast<double>(want), 1e-12));
    }
  }
}

// ---- mutation audit: posenc/reference/sinusoidal.hpp pinned on its own -------------------

TEST_CASE("sinusoidal: the long-double reference equals each layout's closed form, any base",
          "[sinusoidal][reference]") {
  // The file comment's formulas, written out here in long double:
  //   kInterleaved PE(p, 2i) = sin(p / base^(2i/d)), PE(p, 2i+1) = cos(p / base^(2i/d));
  //   kSinCos      PE(p, i) = sin(p base^(-i/(d/2-1))), PE(p, d/2+i) = cos(...);
  //   kCosSin      PE(p, i) = cos(p base^(-i/(d/2))),   PE(p, d/2+i) = sin(...).
  // Base 100 (not 10000) so that a reference ignoring params.base is told apart.
  const Eigen::Index d = 8;
  const long double p = 3.0L;
  for (const double base : {10000.0, 100.0}) {
    CAPTURE(base);
    const long double b = base;
    for (Eigen::Index i = 0; i < d / 2; ++i) {
      CAPTURE(i);
      const long double ii = static_cast<long double>(i);
      const long double a_int = p / std::pow(b, 2.0L * ii / 8.0L);
      const auto inter = with_layout(SinusoidalLayout::kInterleaved, base);
      CHECK(std::fabs(posenc::reference::sinusoidal_value(p, 2 * i, d, inter) - std::sin(a_int)) <
            1e-15L);
      CHECK(std::fabs(posenc::reference::sinusoidal_value(p, 2 * i + 1, d, inter) -
                      std::cos(a_int)) < 1e-15L);
      const long double a_sc = p * std::pow(b, -ii / 3.0L);
      const auto sincos = with_layout(SinusoidalLayout::kSinCos, base);
      CHECK(std::fabs(posenc::reference::sinusoidal_value(p, i, d, sincos) - std::sin(a_sc)) <
            1e-15L);
      CHECK(std::fabs(posenc::reference::sinusoidal_value(p, 4 + i, d, sincos) -
                      std::cos(a_sc)) < 1e-15L);
      const long double a_cs = p * std::pow(b, -ii / 4.0L);
      const auto cossin = with_layout(SinusoidalLayout::kCosSin, base);
      CHECK(std::fabs(posenc::reference::sinusoidal_value(p, i, d, cossin) - std::cos(a_cs)) <
            1e-15L);
      CHECK(std::fabs(posenc::reference::sinusoidal_value(p, 4 + i, d, cossin) -
                      std::sin(a_cs)) < 1e-15L);
    }
  }
  // A worked number: interleaved, base 100, d = 8, PE(3, 2) = sin(3 / 100^(1/4)) = sin(0.9487).
  const auto inter100 = with_layout(SinusoidalLayout::kInterleaved, 100.0);
  CHECK(std::fabs(posenc::reference::sinusoidal_value(3.0L, 2, 8, inter100) - 0.81265L) < 5e-5L);
}
