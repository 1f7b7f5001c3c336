// ALiBi slopes against the paper's get_slopes recursion in long double, closed forms, MPT's
// gen_slopes route and ggml's max_bias generalisation; the bias from absolute positions at
// decode and under left padding; the error paths.

#include <catch2/catch.hpp>

#include <posenc/alibi.hpp>
#include <posenc/reference/alibi.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

using Catch::Matchers::Contains;
using Catch::Matchers::WithinAbs;
using Catch::Matchers::WithinRel;
using posenc::MaskMode;

TEST_CASE("alibi: slopes match the paper's get_slopes (long double) for any head count",
          "[alibi][slopes]") {
  const Eigen::Index heads = GENERATE(1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 20, 40, 64, 71, 96);
  CAPTURE(heads);
  const auto slopes = posenc::alibi_slopes(heads);
  const auto expected = posenc::reference::alibi_slopes(heads);
  REQUIRE(slopes.size() == static_cast<std::size_t>(heads));
  REQUIRE(expected.size() == static_cast<std::size_t>(heads));
  for (std::size_t h = 0; h < slopes.size(); ++h) {
    CAPTURE(h);
    CHECK_THAT(slopes[h], WithinRel(static_cast<double>(expected[h]), 1e-15));
    CHECK(slopes[h] > 0.0);
    CHECK(slopes[h] < 1.0);
  }
}

TEST_CASE("alibi: closed forms of the paper's slopes", "[alibi][slopes]") {
  SECTION("H = 8: 1/2, 1/4, ..., 1/256 (paper §3)") {
    const auto s = posenc::alibi_slopes(8);
    for (int h = 0; h < 8; ++h) CHECK(s[static_cast<std::size_t>(h)] == std::ldexp(1.0, -(h + 1)));
  }
  SECTION("H = 16: 2^-0.5, 2^-1, ..., 2^-8") {
    const auto s = posenc::alibi_slopes(16);
    for (int h = 0; h < 16; ++h) CHECK_THAT(s[static_cast<std::size_t>(h)], WithinRel(std::pow(2.0, -0.5 * (h + 1)), 1e-15));
  }
  SECTION("H = 12: the eight of H = 8, then every other slope of H = 16: 2^-0.5, 2^-1.5, ...") {
    const auto s = posenc::alibi_slopes(12);
    for (int h = 0; h < 8; ++h) CHECK(s[static_cast<std::size_t>(h)] == std::ldexp(1.0, -(h + 1)));
    for (int e = 0; e < 4; ++e) CHECK_THAT(s[static_cast<std::size_t>(8 + e)], WithinRel(std::pow(2.0, -0.5 - e), 1e-15));
  }
  SECTION("H = 1 and H = 2: 2^-8; 2^-4, 2^-8") {
    CHECK(posenc::alibi_slopes(1)[0] == std::ldexp(1.0, -8));
    const auto s = posenc::alibi_slopes(2);
    CHECK(s[0] == std::ldexp(1.0, -4));
    CHECK(s[1] == std::ldexp(1.0, -8));
  }
}

TEST_CASE("alibi: max_bias generalisation equals MPT's gen_slopes and ggml's m0/m1 powers",
          "[alibi][slopes]") {
  const double max_bias = GENERATE(8.0, 16.0, 4.5);
  const Eigen::Index heads = GENERATE(5, 12, 32, 40, 71);
  CAPTURE(max_bias, heads);
  const auto s = posenc::alibi_slopes(heads, max_bias);
  // MPT (HF modeling_mpt build_alibi_bias): N = 2^ceil(log2 H), m_k = 2^(-B k / N), k = 1..N;
  // for H < N: cat(m[1::2], m[::2])[:H].
  Eigen::Index N = 1;
  while (N < heads) N *= 2;
  std::vector<long double> m;
  for (Eigen::Index kk = 1; kk <= N; ++kk) m.push_back(std::pow(2.0L, -static_cast<long double>(max_bias) * kk / N));
  std::vector<long double> mpt;
  if (N == heads) {
    mpt = m;
  } else {
    for (std::size_t i = 1; i < m.size(); i += 2) mpt.push_back(m[i]);
    for (std::size_t i = 0; i < m.size(); i += 2) mpt.push_back(m[i]);
    mpt.resize(static_cast<std::size_t>(heads));
  }
  // ggml soft_max: n = 2^floor(log2 H), m0 = 2^(-B/n), m1 = 2^(-B/2/n).
  Eigen::Index n = 1;
  while (2 * n <= heads) n *= 2;
  const long double m0 = std::pow(2.0L, -static_cast<long double>(max_bias) / n);
  const long double m1 = std::pow(2.0L, -static_cast<long double>(max_bias) / 2 / n);
  const auto ref = posenc::reference::alibi_slopes(heads, max_bias);
  for (Eigen::Index h = 0; h < heads; ++h) {
    CAPTURE(h);
    const long double ggml = h < n ? std::pow(m0, h + 1) : std::pow(m1, 2 * (h - n) + 1);
    const double got = s[static_cast<std::size_t>(h)];
    CHECK_THAT(got, WithinRel(static_cast<double>(mpt[static_cast<std::size_t>(h)]), 1e-15));
    CHECK_THAT(got, WithinRel(static_cast<double>(ggml), 1e-15));
    CHECK_THAT(got, WithinRel(static_cast<double>(ref[static_cast<std::size_t>(h)]), 1e-15));
  }
}

TEST_CASE("alibi: the bias from absolute positions, causal and bidirectional", "[alibi][bias]") {
  const std::vector<double> slopes = {0.1, 0.4};  // seed 000 §5.3's two heads
  SECTION("prefill, seq_len 4: -m (i - j), future keys positive (the bias is no mask)") {
    const std::vector<std::int64_t> pos = {0, 1, 2, 3};
    std::vector<float> out(2 * 4 * 4);
    posenc::alibi_bias<float>(slopes, posenc::ConstTensorView<std::int64_t, 1>(pos.data(), 4),
                              posenc::ConstTensorView<std::int64_t, 1>(pos.data(), 4), MaskMode::kCausal,
                              posenc::TensorView<float, 3>(out.data(), 2, 4, 4));
    for (int h = 0; h < 2; ++h)
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) {
          CHECK_THAT(out[static_cast<std::size_t>((h * 4 + i) * 4 + j)],
                     WithinAbs(-slopes[static_cast<std::size_t>(h)] * (i - j), 1e-7));
        }
    CHECK(out[3] > 0.0f);  // head 0, i = 0, j = 3: +0.3
  }
  SECTION("decode: one query at t = 9 against keys 0..9 gives -m (9 - j), not zeros") {
    const std::vector<std::int64_t> qpos = {9};
    std::vector<std::int64_t> kpos(10);
    for (int j = 0; j < 10; ++j) kpos[static_cast<std::size_t>(j)] = j;
    std::vector<double> out(2 * 10);
    posenc::alibi_bias<double>(slopes, posenc::ConstTensorView<std::int64_t, 1>(qpos.data(), 1),
                               posenc::ConstTensorView<std::int64_t, 1>(kpos.data(), 10), MaskMode::kCausal,
                               posenc::TensorView<double, 3>(out.data(), 2, 1, 10));
    for (int h = 0; h < 2; ++h)
      for (int j = 0; j < 10; ++j) CHECK(out[static_cast<std::size_t>(h * 10 + j)] == -slopes[static_cast<std::size_t>(h)] * (9 - j));
    CHECK(out[0] == -0.9);
  }
  SECTION("bidirectional: -m |i - j|, symmetric") {
    const std::vector<std::int64_t> pos = {0, 1, 2};
    std::vector<double> out(2 * 3 * 3);
    posenc::alibi_bias<double>(slopes, posenc::ConstTensorView<std::int64_t, 1>(pos.data(), 3),
                               posenc::ConstTensorView<std::int64_t, 1>(pos.data(), 3), MaskMode::kBidirectional,
                               posenc::TensorView<double, 3>(out.data(), 2, 3, 3));
    CHECK(out[2] == -0.2);  // h0, i0, j2
    CHECK(out[6] == -0.2);  // h0, i2, j0
    CHECK(out[9 + 1] == -0.4);
  }
  SECTION("batched with left padding: the real tokens' bias equals the unpadded sequence's") {
    // Sequence 0: 2 padding slots (position 0), real tokens at positions 0..2; sequence 1: 0..4.
    const std::vector<std::int64_t> pos = {0, 0, 0, 1, 2, 0, 1, 2, 3, 4};
    std::vector<float> out(2 * 2 * 5 * 5);
    posenc::alibi_bias<float>(slopes, posenc::PositionIdsView(pos.data(), 2, 5), posenc::PositionIdsView(pos.data(), 2, 5),
                              MaskMode::kCausal, posenc::TensorView<float, 4>(out.data(), 2, 2, 5, 5));
    for (int h = 0; h < 2; ++h)
      for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j) {
          const float padded = out[static_cast<std::size_t>(((0 * 2 + h) * 5 + (i + 2)) * 5 + (j + 2))];
          const float plain = out[static_cast<std::size_t>(((1 * 2 + h) * 5 + i) * 5 + j)];
          CHECK(padded == plain);
        }
  }
}

TEST_CASE("alibi: bad input throws std::invalid_argument before writing", "[alibi][errors]") {
  REQUIRE_THROWS_MATCHES(posenc::alibi_slopes(0), std::invalid_argument,
                         Catch::Matchers::Message("posenc::alibi_slopes: num_heads = 0 must be in [1, 2^20]"));
  // A corrupt head count is reported, not allocated (2^40 slopes: 8 TiB; INT64_MAX overflowed
  // the power-of-two search).
  REQUIRE_THROWS_MATCHES(posenc::alibi_slopes(Eigen::Index{1} << 40), std::invalid_argument,
                         Catch::Matchers::Message("posenc::alibi_slopes: num_heads = 1099511627776 must be in [1, 2^20]"));
  REQUIRE_THROWS_AS(posenc::alibi_slopes(std::numeric_limits<Eigen::Index>::max()), std::invalid_argument);
  CHECK(posenc::alibi_slopes(Eigen::Index{1} << 20).back() ==
        std::exp2(-8.0));  // h = n - 1: 2^(-8 n / n), exact
  REQUIRE_THROWS_WITH(posenc::alibi_slopes(8, 0.0), Contains("max_bias = 0 must be finite and > 0"));
  REQUIRE_THROWS_WITH(posenc::alibi_slopes(8, std::nan("")), Contains("max_bias = nan"));
  const std::vector<std::int64_t> pos = {0, 1, 2};
  std::vector<float> out(3 * 3 * 3, 7.0f);
  auto bias = [&](const std::vector<double>& s, Eigen::Index heads) {
    posenc::alibi_bias<float>(s, posenc::ConstTensorView<std::int64_t, 1>(pos.data(), 3),
                              posenc::ConstTensorView<std::int64_t, 1>(pos.data(), 3), MaskMode::kCausal,
                              posenc::TensorView<float, 3>(out.data(), heads, 3, 3));
  };
  REQUIRE_THROWS_WITH(bias({0.5, 0.25}, 3), Contains("alibi_slopes has 2 entries; it must have one per query head (heads = 3)"));
  REQUIRE_THROWS_WITH(bias({0.5, -0.25, 0.1}, 3), Contains("alibi_slopes[1] = -0.25 must be finite and >= 0"));
  const std::vector<std::int64_t> neg = {0, -4, 2};
  REQUIRE_THROWS_WITH(posenc::alibi_bias<float>({0.5}, posenc::ConstTensorView<std::int64_t, 1>(neg.data(), 3),
                                                posenc::ConstTensorView<std::int64_t, 1>(pos.data(), 3), MaskMode::kCausal,
                                                posenc::TensorView<float, 3>(out.data(), 1, 3, 3)),
                      Contains("query_positions[0, 1] = -4 must be in [0, 2^53]"));
  for (const float x : out) CHECK(x == 7.0f);
}

namespace {
using V1 = posenc::ConstTensorView<std::int64_t, 1>;
using Ids = posenc::PositionIdsView;
using Out3 = posenc::TensorView<float, 3>;
using Out4 = posenc::TensorView<float, 4>;
}  // namespace

TEST_CASE("alibi: slope limits are exact (2^20 + 1 heads and infinite max_bias throw)",
          "[alibi][errors]") {
  // The documented range is [1, 2^20] heads and a finite max_bias > 0.
  REQUIRE_THROWS_MATCHES(posenc::alibi_slopes((Eigen::Index{1} << 20) + 1), std::invalid_argument,
                         Catch::Matchers::Message(
                             "posenc::alibi_slopes: num_heads = 1048577 must be in [1, 2^20]"));
  REQUIRE_THROWS_WITH(posenc::alibi_slopes(8, std::numeric_limits<double>::infinity()),
                      Contains("max_bias = inf must be finite and > 0"));
}

TEST_CASE("alibi: zero heads and an unknown MaskMode throw before writing", "[alibi][errors]") {
  const std::vector<std::int64_t> pos = {0, 1, 2};
  const V1 p3(pos.data(), 3);
  std::vector<float> out(2 * 3 * 3, 7.0f);
  REQUIRE_THROWS_WITH(posenc::alibi_bias<float>({}, p3, p3, MaskMode::kCausal,
                                                Out3(out.data(), 0, 3, 3)),
                      Contains("out heads = 0 must be > 0"));
  REQUIRE_THROWS_WITH(posenc::alibi_bias<float>({}, Ids(pos.data(), 1, 3),
                                                Ids(pos.data(), 1, 3),
                                                MaskMode::kCausal,
                                                Out4(out.data(), 1, 0, 3, 3)),
                      Contains("out heads = 0 must be > 0"));
  REQUIRE_THROWS_WITH(posenc::alibi_bias<float>({0.5, 0.25}, p3, p3, static_cast<MaskMode>(2),
                                                Out3(out.data(), 2, 3, 3)),
                      Contains("mode = 2 is not a MaskMode"));
  for (const float x : out) CHECK(x == 7.0f);
}

TEST_CASE("alibi: a query length mismatch and bad key or batched positions write nothing",
          "[alibi][errors]") {
  const std::vector<std::int64_t> pos = {0, 1, 2};
  const std::vector<std::int64_t> bad_key = {0, 1, -1};
  std::vector<float> out(2 * 3 * 3, 7.0f);
  // Two query positions (the buffer holds three) against out [1, 3, 3]; keys match.
  REQUIRE_THROWS_WITH(posenc::alibi_bias<float>({0.5}, V1(pos.data(), 2),
                                                V1(pos.data(), 3),
                                                MaskMode::kCausal,
                                                Out3(out.data(), 1, 3, 3)),
                      Contains("positions [2] x [3] must match out [q_len, k_len] = [3, 3]"));
  REQUIRE_THROWS_WITH(posenc::alibi_bias<float>({0.5}, V1(pos.data(), 3),
                                                V1(bad_key.data(), 3),
                                                MaskMode::kCausal,
                                                Out3(out.data(), 1, 3, 3)),
                      Contains("key_positions[0, 2] = -1 must be in [0, 2^53]"));
  const std::vector<std::int64_t> bad_query = {0, 1, 2, -5, 0, 1};
  const std::vector<std::int64_t> keys = {0, 1, 2, 0, 1, 2};
  std::vector<float> out4(2 * 1 * 3 * 3, 7.0f);
  REQUIRE_THROWS_WITH(posenc::alibi_bias<float>({0.5}, Ids(bad_query.data(), 2, 3),
                                                Ids(keys.data(), 2, 3),
                                                MaskMode::kCausal,
                                                Out4(out4.data(), 2, 1, 3, 3)),
                      Contains("query_positions[1, 0] = -5 must be in [0, 2^53]"));
  for (const float x : out) CHECK(x == 7.0f);
  for (const float x : out4) CHECK(x == 7.0f);
}

TEST_CASE("alibi: the diagonal is +0, not -0, in both modes", "[alibi][bias]") {
  // alibi.hpp documents a +0 diagonal: -m * |0| would be -0 (a sign a later x * inf or
  // 1 / x exposes); 0 - m * 0 is +0 in round-to-nearest.
  const std::vector<double> slopes = {0.5, 0.0625};
  const std::vector<std::int64_t> pos = {0, 3, 7};
  for (const auto mode : {MaskMode::kCausal, MaskMode::kBidirectional}) {
    std::vector<double> out(2 * 3 * 3, 7.0);
    posenc::alibi_bias<double>(slopes, V1(pos.data(), 3),
                               V1(pos.data(), 3), mode,
                               posenc::TensorView<double, 3>(out.data(), 2, 3, 3));
    for (int h = 0; h < 2; ++h)
      for (int i = 0; i < 3; ++i) {
        const double x = out[static_cast<std::size_t>((h * 3 + i) * 3 + i)];
        CHECK(x == 0.0);
        CHECK_FALSE(std::signbit(x));
      }
  }
}

TEST_CASE("alibi: the batched builder gives each head its own slope", "[alibi][bias]") {
  // out[b, h, i, j] = -m_h (pq - pk) (causal) or -m_h |pq - pk|, closed form: the slopes are
  // powers of two and the positions small integers, so every value is exact in double.
  const std::vector<double> slopes = {0.5, 0.25, 0.125};
  const std::vector<std::int64_t> qpos = {4, 5, 0, 9};   // [2, 2]
  const std::vector<std::int64_t> kpos = {0, 2, 5, 3, 6, 9};  // [2, 3]
  for (const auto mode : {MaskMode::kCausal, MaskMode::kBidirectional}) {
    std::vector<double> out(2 * 3 * 2 * 3);
    posenc::alibi_bias<double>(slopes, Ids(qpos.data(), 2, 2),
                               Ids(kpos.data(), 2, 3), mode,
                               posenc::TensorView<double, 4>(out.data(), 2, 3, 2, 3));
    for (int b = 0; b < 2; ++b)
      for (int h = 0; h < 3; ++h)
        for (int i = 0; i < 2; ++i)
          for (int j = 0; j < 3; ++j) {
            const auto d = static_cast<double>(qpos[static_cast<std::size_t>(b * 2 + i)] -
                                               kpos[static_cast<std::size_t>(b * 3 + j)]);
            const double m = slopes[static_cast<std::size_t>(h)];
            const double want = mode == MaskMode::kCausal ? -m * d : -m * std::abs(d);
            CAPTURE(b, h, i, j);
            CHECK(out[static_cast<std::size_t>(((b * 3 + h) * 2 + i) * 3 + j)] == want);
          }
  }
}
