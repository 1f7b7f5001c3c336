// RoPE frequency planning: every HF rope_type against formulas re-derived by hand in long double
// (inline below, or posenc::reference::rope_frequencies), with the published configs' numbers.

#include <catch2/catch.hpp>

#include <posenc/reference/rope.hpp>
#include <posenc/rope.hpp>
#include <posenc/rope_frequencies.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <vector>

namespace {

using Catch::Matchers::Contains;
using Catch::Matchers::WithinAbs;
using Catch::Matchers::WithinRel;
using posenc::RopeScalingType;

constexpr long double kPi = 3.141592653589793238462643383279502884L;

long double theta_j(long double base, int j, int d) {
  return 1.0L / std::pow(base, 2.0L * j / static_cast<long double>(d));
}

void require_matches_reference(const posenc::RopeParams& p, std::int64_t seq_len = 0) {
  const auto fast = posenc::compute_rope_frequencies(p, seq_len);
  const auto ref = posenc::reference::rope_frequencies(p, seq_len);
  REQUIRE(fast.inv_freq.size() == ref.inv_freq.size());
  for (std::size_t j = 0; j < ref.inv_freq.size(); ++j) {
    CAPTURE(j);
    REQUIRE_THAT(fast.inv_freq[j], WithinRel(static_cast<double>(ref.inv_freq[j]), 1e-14));
  }
  REQUIRE_THAT(fast.attention_factor, WithinRel(static_cast<double>(ref.attention_factor), 1e-15));
  REQUIRE_THAT(fast.softmax_scale_multiplier,
               WithinRel(static_cast<double>(ref.softmax_scale_multiplier), 1e-15));
}

// YaRN over head_dim 64, theta 10000, in long double (HF find_correction_range /
// linear_ramp_factor): the dimension whose wavelength turns r times in l0 tokens, and the
// frequencies th_j / s inside the ramp's [lo, hi], th_j below, mixed linearly between.
long double yarn_corr_64(long double l0, long double r) {
  return 64.0L * std::log(l0 / (2.0L * kPi * r)) / (2.0L * std::log(10000.0L));
}

void require_yarn_ramp_64(const posenc::RopeFrequencies& f, long double factor, long double lo,
                          long double hi) {
  for (int j = 0; j < 32; ++j) {
    CAPTURE(j);
    const long double ramp = std::clamp((j - lo) / (hi - lo), 0.0L, 1.0L);
    const long double th = theta_j(10000.0L, j, 64);
    REQUIRE_THAT(f.inv_freq[static_cast<std::size_t>(j)],
                 WithinRel(static_cast<double>(th / factor * ramp + th * (1.0L - ramp)), 1e-14));
  }
}

}  // namespace

TEST_CASE("rope scaling: default inv_freq = theta^(-2j/d), rotary_dim from partial_rotary_factor", "[rope][scaling]") {
  posenc::RopeParams p;
  p.head_dim = 4;
  const auto f = posenc::compute_rope_frequencies(p);
  REQUIRE(f.inv_freq.size() == 2);
  CHECK(f.inv_freq[0] == 1.0);
  CHECK_THAT(f.inv_freq[1], WithinRel(0.01, 1e-15));
  CHECK(f.attention_factor == 1.0);
  CHECK(f.softmax_scale_multiplier == 1.0);
  // Phi-2: hidden 2560 / 32 heads = 80, partial_rotary_factor 0.4 -> int(32.0) = 32 dims; the
  // exponent uses rotary_dim (32), not head_dim.
  posenc::RopeParams phi2;
  phi2.head_dim = 80;
  phi2.partial_rotary_factor = 0.4;
  const auto g = posenc::compute_rope_frequencies(phi2);
  REQUIRE(g.rotary_dim == 32);
  REQUIRE(g.inv_freq.size() == 16);
  CHECK_THAT(g.inv_freq[1], WithinRel(static_cast<double>(theta_j(10000.0L, 1, 32)), 1e-15));
  CHECK(posenc::resolved_rotary_dim(phi2) == 32);
  require_matches_reference(phi2);
}

TEST_CASE("rope scaling: linear divides every frequency by the factor", "[rope][scaling][linear]") {
  posenc::RopeParams p;
  p.head_dim = 128;
  p.scaling.type = RopeScalingType::kLinear;
  p.scaling.factor = 4.0;
  const auto f = posenc::compute_rope_frequencies(p);
  for (int j = 0; j < 64; ++j) REQUIRE_THAT(f.inv_freq[static_cast<std::size_t>(j)], WithinRel(static_cast<double>(theta_j(10000.0L, j, 128) / 4.0L), 1e-14));
  CHECK(f.attention_factor == 1.0);
}

TEST_CASE("rope scaling: seed - 4K to 32K by interpolation, position 16000 takes the phases of 2000", "[rope][scaling][linear][seed]") {
  // Seed 001: factor 1/8 from 4K to 32K, "target position 16000 uses the original phase
  // coordinate 2000". w / 8 and 16000 = 8 * 2000 are exact scalings by a power of two, so the
  // rotated vectors are bit-identical, in both pair layouts.
  posenc::RopeParams p;
  p.head_dim = 64;
  p.max_position_embeddings = 4096;
  const auto plain = posenc::compute_rope_frequencies(p);
  p.scaling.type = RopeScalingType::kLinear;
  p.scaling.factor = 8.0;
  const auto pi = posenc::compute_rope_frequencies(p);
  std::vector<float> a(64), b(64);
  for (int i = 0; i < 64; ++i) a[static_cast<std::size_t>(i)] = b[static_cast<std::size_t>(i)] = std::sin(0.37f * static_cast<float>(i)) + 0.1f;
  for (const auto layout : {posenc::RopeLayout::kHalfSplit, posenc::RopeLayout::kInterleaved}) {
    std::vector<float> x = a, y = b;
    const std::int64_t at_16000[1] = {16000}, at_2000[1] = {2000};
    posenc::apply_rope_inplace<float>(posenc::TensorView<float, 4>(x.data(), 1, 1, 1, 64), posenc::PositionIdsView(at_16000, 1, 1), pi, layout);
    posenc::apply_rope_inplace<float>(posenc::TensorView<float, 4>(y.data(), 1, 1, 1, 64), posenc::PositionIdsView(at_2000, 1, 1), plain, layout);
    REQUIRE(x == y);
    REQUIRE(x != a);
  }
  // The price the seed names: neighbouring positions are w / 8 apart instead of w.
  for (std::size_t j = 0; j < 32; ++j) REQUIRE(pi.inv_freq[j] * 8.0 == plain.inv_freq[j]);
}

TEST_CASE("rope scaling: static NTK-aware raises the base to theta * s^(d/(d-2))", "[rope][scaling][ntk]") {
  posenc::RopeParams p;
  p.head_dim = 128;
  p.scaling.type = RopeScalingType::kNtk;
  p.scaling.factor = 8.0;
  const auto f = posenc::compute_rope_frequencies(p);
  const long double base = 10000.0L * std::pow(8.0L, 128.0L / 126.0L);
  CHECK_THAT(f.effective_theta, WithinRel(static_cast<double>(base), 1e-14));
  for (int j = 0; j < 64; ++j) REQUIRE_THAT(f.inv_freq[static_cast<std::size_t>(j)], WithinRel(static_cast<double>(theta_j(base, j, 128)), 1e-13));
  // The highest frequency is untouched, the lowest is divided by ~s: NTK's point.
  CHECK(f.inv_freq[0] == 1.0);
  CHECK_THAT(f.inv_freq[63] / static_cast<double>(theta_j(10000.0L, 63, 128)), WithinRel(1.0 / 8.0, 1e-12));
}

TEST_CASE("rope scaling: vLLM's ntk (fixed: base b s, / s^(2/d), mixed_b: NTK-RoPE-mixed) is not static NTK-aware", "[rope][scaling][ntk]") {
  posenc::RopeParams p;
  p.head_dim = 128;
  p.scaling.type = RopeScalingType::kVllmNtk;
  p.scaling.factor = 4.0;
  const auto f = posenc::compute_rope_frequencies(p);
  // Closed forms: pair 0 turns at s^(-2/d) (static NTK-aware keeps it at 1), the last pair at
  // exactly th_63 / s, as static NTK-aware does.
  CHECK_THAT(f.inv_freq[0], WithinRel(static_cast<double>(std::pow(4.0L, -2.0L / 128.0L)), 1e-15));
  CHECK_THAT(f.inv_freq[63], WithinRel(static_cast<double>(theta_j(10000.0L, 63, 128) / 4.0L), 1e-14));
  for (int j = 0; j < 64; ++j) {
    CAPTURE(j);
    const long double want = theta_j(40000.0L, j, 128) * std::pow(4.0L, -2.0L / 128.0L);
    REQUIRE_THAT(f.inv_freq[static_cast<std::size_t>(j)], WithinRel(static_cast<double>(want), 1e-14));
  }
  require_matches_reference(p);
  posenc::RopeParams aware = p;
  aware.scaling.type = RopeScalingType::kNtk;
  CHECK(posenc::compute_rope_frequencies(aware).inv_freq[0] == 1.0);

  SECTION("mixed_b: lambda_j = exp(ln s (j+1)^b / (d/2)^b), so the last pair is divided by s") {
    p.scaling.mixed_b = 0.625;
    const auto m = posenc::compute_rope_frequencies(p);
    CHECK_THAT(m.inv_freq[63], WithinRel(static_cast<double>(theta_j(10000.0L, 63, 128) / 4.0L), 1e-14));
    CHECK_THAT(m.inv_freq[0], WithinRel(static_cast<double>(1.0L / std::pow(4.0L, 1.0L / std::pow(64.0L, 0.625L))), 1e-14));
    require_matches_reference(p);
  }
  SECTION("mixed_b must be finite and > 0") {
    p.scaling.mixed_b = 0.0;
    REQUIRE_THROWS_MATCHES(posenc::compute_rope_frequencies(p), std::invalid_argument,
                           Catch::Matchers::Message("posenc::compute_rope_frequencies: mixed_b = 0 must be finite and > 0"));
  }
}

TEST_CASE("rope scaling: dynamic NTK follows HF (L = max(seq_len, L0)) and RopePlan reports changes", "[rope][scaling][dynamic]") {
  posenc::RopeParams p;
  p.head_dim = 64;
  p.max_position_embeddings = 2048;
  p.scaling.type = RopeScalingType::kDynamic;
  p.scaling.factor = 2.0;
  // Below or at L0 the plan is the default one.
  const auto at_init = posenc::compute_rope_frequencies(p, 0);
  const auto below = posenc::compute_rope_frequencies(p, 2048);
  for (int j = 0; j < 32; ++j) {
    REQUIRE_THAT(at_init.inv_freq[static_cast<std::size_t>(j)], WithinRel(static_cast<double>(theta_j(10000.0L, j, 64)), 1e-14));
    REQUIRE(below.inv_freq[static_cast<std::size_t>(j)] == at_init.inv_freq[static_cast<std::size_t>(j)]);
  }
  // seq_len = 2 L0, s = 2: base' = base (2 * 2 - 1)^(64/62) = base 3^(32/31).
  const auto grown = posenc::compute_rope_frequencies(p, 4096);
  const long double base = 10000.0L * std::pow(3.0L, 64.0L / 62.0L);
  for (int j = 0; j < 32; ++j) REQUIRE_THAT(grown.inv_freq[static_cast<std::size_t>(j)], WithinRel(static_cast<double>(theta_j(base, j, 64)), 1e-13));
  require_matches_reference(p, 3000);

  posenc::RopePlan plan(p);
  CHECK(plan.max_seq_len_cached() == 2048);
  CHECK_FALSE(plan.update(100));
  CHECK_FALSE(plan.update(2048));
  CHECK(plan.update(2049));  // grows past L0
  CHECK_FALSE(plan.update(2049));
  CHECK_FALSE(plan.update(2048));  // back to L0 exactly: HF resets only strictly below L0
  CHECK(plan.max_seq_len_cached() == 2049);
  CHECK(plan.update(4096));
  REQUIRE_THAT(plan.frequencies().inv_freq[31], WithinRel(grown.inv_freq[31], 1e-15));
  CHECK(plan.update(10));  // below L0 after growth: reset to the original frequencies
  CHECK(plan.max_seq_len_cached() == 2048);
  REQUIRE(plan.frequencies().inv_freq == at_init.inv_freq);
  CHECK_FALSE(plan.update(11));
}

TEST_CASE("rope scaling: YaRN for DeepSeek-V3 (s = 40, mscale = mscale_all_dim = 1)", "[rope][scaling][yarn][deepseek]") {
  // DeepSeek-V3 config: qk_rope_head_dim 64 (after 128 nope dims), theta 10000, factor 40,
  // original_max_position_embeddings 4096, beta_fast 32, beta_slow 1, mscale 1, mscale_all_dim 1.
  posenc::RopeParams p;
  p.head_dim = 192;
  p.rotary_dim = 64;
  p.rotary_offset = 128;
  p.max_position_embeddings = 163840;
  p.layout = posenc::RopeLayout::kInterleaved;
  p.scaling.type = RopeScalingType::kYarn;
  p.scaling.factor = 40.0;
  p.scaling.original_max_position_embeddings = 4096;
  p.scaling.mscale = 1.0;
  p.scaling.mscale_all_dim = 1.0;
  const auto f = posenc::compute_rope_frequencies(p);
  // g(40, 1) / g(40, 1): the cos/sin factor is exactly 1.
  CHECK(f.attention_factor == 1.0);
  // DeepSeek multiplies softmax_scale by g(s, mscale_all_dim)^2 = (0.1 ln 40 + 1)^2 ~= 1.8739.
  const long double g = 0.1L * std::log(40.0L) + 1.0L;
  CHECK_THAT(f.softmax_scale_multiplier, WithinRel(static_cast<double>(g * g), 1e-15));
  CHECK_THAT(f.softmax_scale_multiplier, WithinAbs(1.8739, 1e-4));
  // Correction range by hand: corr(r) = 64 ln(4096 / (2 pi r)) / (2 ln 10000);
  // corr(32) = 10.47 -> floor 10, corr(1) = 22.51 -> ceil 23.
  const auto corr = [](long double r) { return 64.0L * std::log(4096.0L / (2.0L * kPi * r)) / (2.0L * std::log(10000.0L)); };
  REQUIRE(std::floor(corr(32.0L)) == 10.0L);
  REQUIRE(std::ceil(corr(1.0L)) == 23.0L);
  for (int j = 0; j < 32; ++j) {
    CAPTURE(j);
    const long double th = theta_j(10000.0L, j, 64);
    const long double ramp = j <= 10 ? 0.0L : (j >= 23 ? 1.0L : (j - 10.0L) / 13.0L);
    const long double expect = th / 40.0L * ramp + th * (1.0L - ramp);
    REQUIRE_THAT(f.inv_freq[static_cast<std::size_t>(j)], WithinRel(static_cast<double>(expect), 1e-14));
  }
  require_matches_reference(p);
  CHECK(f.rotary_offset == 128);
}

TEST_CASE("rope scaling: YaRN defaults (Qwen2.5 doc config) and explicit attention_factor", "[rope][scaling][yarn]") {
  // Qwen docs: {"factor": 4.0, "original_max_position_embeddings": 32768, "type": "yarn"},
  // theta 1e6, head_dim 3584 / 28 = 128.
  posenc::RopeParams p;
  p.head_dim = 128;
  p.theta = 1000000.0;
  p.max_position_embeddings = 131072;
  p.scaling.type = RopeScalingType::kYarn;
  p.scaling.factor = 4.0;
  p.scaling.original_max_position_embeddings = 32768;
  const auto f = posenc::compute_rope_frequencies(p);
  CHECK_THAT(f.attention_factor, WithinRel(static_cast<double>(0.1L * std::log(4.0L) + 1.0L), 1e-15));
  CHECK(f.softmax_scale_multiplier == 1.0);
  require_matches_reference(p);
  p.scaling.attention_factor = 1.4159;  // Laguna-style explicit value wins over every formula
  CHECK(posenc::compute_rope_frequencies(p).attention_factor == 1.4159);
  // mscale alone (no mscale_all_dim) falls back to g(s, 1).
  p.scaling.attention_factor.reset();
  p.scaling.mscale = 0.707;
  const auto mscale_alone = posenc::compute_rope_frequencies(p);
  CHECK_THAT(mscale_alone.attention_factor, WithinRel(static_cast<double>(0.1L * std::log(4.0L) + 1.0L), 1e-15));
  // ... and the softmax keeps its scale: g(s, mscale_all_dim = 0)^2 = 1 (llama.cpp #17945).
  CHECK(mscale_alone.softmax_scale_multiplier == 1.0);
  // DeepSeek-V2: mscale = mscale_all_dim = 0.707 -> factor 1, softmax (0.0707 ln s + 1)^2.
  p.scaling.mscale_all_dim = 0.707;
  const auto v2 = posenc::compute_rope_frequencies(p);
  CHECK(v2.attention_factor == 1.0);
  const long double g = 0.1L * 0.707L * std::log(4.0L) + 1.0L;
  CHECK_THAT(v2.softmax_scale_multiplier, WithinRel(static_cast<double>(g * g), 1e-15));
}

TEST_CASE("rope scaling: TeleChat3's telechat3-yarn (g's slope 0.07)", "[rope][scaling][yarn]") {
  // vLLM TeleChat3RoPEScaledRotaryEmbedding: YaRN frequencies, cos / sin times 0.07 ln s + 1.
  posenc::RopeParams p;
  p.head_dim = 128;
  p.theta = 1000000.0;
  p.scaling.type = RopeScalingType::kYarn;
  p.scaling.factor = 4.0;
  p.scaling.original_max_position_embeddings = 8192;
  const auto plain = posenc::compute_rope_frequencies(p);
  p.scaling.mscale_slope = 0.07;
  const auto tele = posenc::compute_rope_frequencies(p);
  CHECK_THAT(tele.attention_factor, WithinRel(static_cast<double>(0.07L * std::log(4.0L) + 1.0L), 1e-15));
  CHECK(tele.inv_freq == plain.inv_freq);
  require_matches_reference(p);
  p.scaling.mscale_slope = -0.1;
  REQUIRE_THROWS_WITH(posenc::compute_rope_frequencies(p), Contains("mscale_slope = -0.1"));
  p.scaling.mscale_slope = std::numeric_limits<double>::quiet_NaN();
  REQUIRE_THROWS_WITH(posenc::compute_rope_frequencies(p), Contains("mscale_slope"));
}

TEST_CASE("rope scaling: YaRN with truncate = false keeps the fractional correction range (gpt-oss)", "[rope][scaling][yarn]") {
  // gpt-oss: head_dim 64, theta 150000, factor 32, original 4096, beta 32 / 1, truncate false.
  posenc::RopeParams p;
  p.head_dim = 64;
  p.theta = 150000.0;
  p.scaling.type = RopeScalingType::kYarn;
  p.scaling.factor = 32.0;
  p.scaling.original_max_position_embeddings = 4096;
  p.scaling.truncate = false;
  const auto f = posenc::compute_rope_frequencies(p);
  const auto corr = [](long double r) { return 64.0L * std::log(4096.0L / (2.0L * kPi * r)) / (2.0L * std::log(150000.0L)); };
  const long double lo = corr(32.0L), hi = corr(1.0L);  // 8.09..., 20.96...
  REQUIRE(lo != std::floor(lo));
  for (int j = 0; j < 32; ++j) {
    CAPTURE(j);
    long double ramp = (j - lo) / (hi - lo);
    ramp = ramp < 0 ? 0 : (ramp > 1 ? 1 : ramp);
    const long double th = theta_j(150000.0L, j, 64);
    REQUIRE_THAT(f.inv_freq[static_cast<std::size_t>(j)], WithinRel(static_cast<double>(th / 32.0L * ramp + th * (1.0L - ramp)), 1e-14));
  }
  CHECK_THAT(f.attention_factor, WithinRel(static_cast<double>(0.1L * std::log(32.0L) + 1.0L), 1e-15));
  // With truncation the same config gives a different plan (floor / ceil of the range).
  p.scaling.truncate = true;
  const auto t = posenc::compute_rope_frequencies(p);
  CHECK(t.inv_freq[9] != f.inv_freq[9]);
  require_matches_reference(p);
}

TEST_CASE("rope scaling: YaRN with vLLM's extrapolation_factor (ggml ext_factor)", "[rope][scaling][yarn]") {
  // vLLM YaRNScalingRotaryEmbedding: mask_j = (1 - ramp_j) e; inv_j = th_j / s (1 - mask_j) +
  // th_j mask_j. e = 1 is HF's plan, e = 0 interpolates every pair (th / s).
  posenc::RopeParams p;
  p.head_dim = 64;
  p.theta = 10000.0;
  p.scaling.type = RopeScalingType::kYarn;
  p.scaling.factor = 8.0;
  p.scaling.original_max_position_embeddings = 2048;
  const auto hf = posenc::compute_rope_frequencies(p);
  const auto corr = [](long double r) { return 64.0L * std::log(2048.0L / (2.0L * kPi * r)) / (2.0L * std::log(10000.0L)); };
  const long double lo = std::floor(corr(32.0L)), hi = std::ceil(corr(1.0L));
  for (const long double e : {0.0L, 0.25L, 1.0L}) {
    CAPTURE(static_cast<double>(e));
    p.scaling.extrapolation_factor = static_cast<double>(e);
    const auto f = posenc::compute_rope_frequencies(p);
    for (int j = 0; j < 32; ++j) {
      CAPTURE(j);
      long double ramp = (j - lo) / (hi - lo);
      ramp = ramp < 0 ? 0 : (ramp > 1 ? 1 : ramp);
      const long double th = theta_j(10000.0L, j, 64), mask = (1.0L - ramp) * e;
      REQUIRE_THAT(f.inv_freq[static_cast<std::size_t>(j)],
                   WithinRel(static_cast<double>(th / 8.0L * (1.0L - mask) + th * mask), 1e-14));
      if (e == 0.0L) REQUIRE_THAT(f.inv_freq[static_cast<std::size_t>(j)], WithinRel(static_cast<double>(th / 8.0L), 1e-15));
      if (e == 1.0L) REQUIRE(f.inv_freq[static_cast<std::size_t>(j)] == hf.inv_freq[static_cast<std::size_t>(j)]);
    }
    // The attention factor stays g(s, 1), as in vLLM.
    CHECK_THAT(f.attention_factor, WithinRel(static_cast<double>(0.1L * std::log(8.0L) + 1.0L), 1e-15));
    require_matches_reference(p);
  }
  for (const double bad : {-0.5, 1.5, std::numeric_limits<double>::quiet_NaN()}) {
    p.scaling.extrapolation_factor = bad;
    REQUIRE_THROWS_WITH(posenc::compute_rope_frequencies(p), Contains("extrapolation_factor = ") && Contains("must be in [0, 1]"));
  }
}

TEST_CASE("rope scaling: YaRN clamps the range to [0, d - 1] and guards a degenerate range", "[rope][scaling][yarn]") {
  // d = 8, theta = 10, L0 = 636: corr(32) ~ 2.0 and corr(1) ~ 8.0, whose ceil 9 is clamped to
  // d - 1 = 7 (HF), not to d/2 - 1 = 3. The last pair (j = 3) is then only partly interpolated.
  posenc::RopeParams p;
  p.head_dim = 8;
  p.theta = 10.0;
  p.scaling.type = RopeScalingType::kYarn;
  p.scaling.factor = 16.0;
  p.scaling.original_max_position_embeddings = 636;
  const auto f = posenc::compute_rope_frequencies(p);
  const auto corr = [](long double r) { return 8.0L * std::log(636.0L / (2.0L * kPi * r)) / (2.0L * std::log(10.0L)); };
  const long double lo = std::floor(corr(32.0L));
  REQUIRE(std::ceil(corr(1.0L)) > 7.0L);
  const long double ramp3 = (3.0L - lo) / (7.0L - lo);
  REQUIRE(ramp3 < 1.0L);
  const long double th3 = theta_j(10.0L, 3, 8);
  CHECK_THAT(f.inv_freq[3], WithinRel(static_cast<double>(th3 / 16.0L * ramp3 + th3 * (1.0L - ramp3)), 1e-14));
  CHECK(f.inv_freq[3] > static_cast<double>(th3 / 16.0L) * 1.01);
  require_matches_reference(p);

  // beta_fast == beta_slow without truncation: lo == hi, HF adds 0.001 instead of dividing by 0.
  p.scaling.beta_fast = 1.0;
  p.scaling.beta_slow = 1.0;
  p.scaling.truncate = false;
  p.scaling.original_max_position_embeddings = 200;
  const auto d = posenc::compute_rope_frequencies(p);
  const long double c1 = 8.0L * std::log(200.0L / (2.0L * kPi)) / (2.0L * std::log(10.0L));  // 6.0...
  for (int j = 0; j < 4; ++j) {
    CAPTURE(j);
    REQUIRE(std::isfinite(d.inv_freq[static_cast<std::size_t>(j)]));
    long double ramp = (j - c1) / 0.001L;
    ramp = ramp < 0 ? 0 : (ramp > 1 ? 1 : ramp);
    const long double th = theta_j(10.0L, j, 8);
    REQUIRE_THAT(d.inv_freq[static_cast<std::size_t>(j)], WithinRel(static_cast<double>(th / 16.0L * ramp + th * (1.0L - ramp)), 1e-14));
  }
  require_matches_reference(p);
}

TEST_CASE("rope scaling: Llama-3.1 (factor 8, low 1, high 4, L0 8192, theta 500000)", "[rope][scaling][llama3]") {
  posenc::RopeParams p;
  p.head_dim = 128;
  p.theta = 500000.0;
  p.max_position_embeddings = 131072;
  p.scaling.type = RopeScalingType::kLlama3;
  p.scaling.factor = 8.0;
  p.scaling.low_freq_factor = 1.0;
  p.scaling.high_freq_factor = 4.0;
  p.scaling.original_max_position_embeddings = 8192;
  const auto f = posenc::compute_rope_frequencies(p);
  int kept = 0, divided = 0, smoothed = 0;
  for (int j = 0; j < 64; ++j) {
    CAPTURE(j);
    const long double th = theta_j(500000.0L, j, 128);
    const long double wavelen = 2.0L * kPi / th;
    long double expect;
    if (wavelen < 8192.0L / 4.0L) {  // short wavelengths: untouched
      expect = th;
      ++kept;
    } else if (wavelen > 8192.0L / 1.0L) {  // long wavelengths: position interpolation
      expect = th / 8.0L;
      ++divided;
    } else {
      const long double smooth = (8192.0L / wavelen - 1.0L) / (4.0L - 1.0L);
      expect = (1.0L - smooth) * th / 8.0L + smooth * th;
      ++smoothed;
    }
    REQUIRE_THAT(f.inv_freq[static_cast<std::size_t>(j)], WithinRel(static_cast<double>(expect), 1e-14));
  }
  // The three bands are all populated for the real config.
  CHECK(kept > 0);
  CHECK(divided > 0);
  CHECK(smoothed > 0);
  CHECK(f.attention_factor == 1.0);
  require_matches_reference(p);

  // low_freq_factor == high_freq_factor (Llama-4 style): no smoothing band and no 0/0.
  p.scaling.high_freq_factor = 1.0;
  const auto g = posenc::compute_rope_frequencies(p);
  for (int j = 0; j < 64; ++j) {
    const long double th = theta_j(500000.0L, j, 128);
    const long double wavelen = 2.0L * kPi / th;
    const long double expect = wavelen < 8192.0L ? th : th / 8.0L;
    REQUIRE(std::isfinite(g.inv_freq[static_cast<std::size_t>(j)]));
    REQUIRE_THAT(g.inv_freq[static_cast<std::size_t>(j)], WithinRel(static_cast<double>(expect), 1e-14));
  }
  require_matches_reference(p);
}

TEST_CASE("rope scaling: ggml freq_factors (llama.cpp rope_freqs) turn the default plan into "
          "Llama-3.1's", "[rope][scaling][llama3][ggml]") {
  // llama.cpp's converter writes rope_freqs for Llama-3.1 as 1 / ((1 - smooth) / s + smooth)
  // per pair (1 for short wavelengths, s for long ones); ggml divides each angle by it.
  posenc::RopeParams p;
  p.head_dim = 128;
  p.theta = 500000.0;
  posenc::RopeFrequencies plain = posenc::compute_rope_frequencies(p);
  plain.attention_factor = 1.25;  // kept as it is
  std::vector<double> factors(64);
  std::vector<long double> expect(64);
  for (int j = 0; j < 64; ++j) {
    const long double th = theta_j(500000.0L, j, 128);
    const long double wavelen = 2.0L * kPi / th;
    long double factor = 1.0L;
    if (wavelen > 8192.0L) {
      factor = 8.0L;
    } else if (wavelen >= 8192.0L / 4.0L) {
      const long double smooth = (8192.0L / wavelen - 1.0L) / 3.0L;
      factor = 1.0L / ((1.0L - smooth) / 8.0L + smooth);
    }
    factors[static_cast<std::size_t>(j)] = static_cast<double>(factor);
    expect[static_cast<std::size_t>(j)] = th / factor;
  }
  const auto f = posenc::with_freq_factors(plain, factors);
  p.scaling.type = RopeScalingType::kLlama3;
  p.scaling.factor = 8.0;
  p.scaling.low_freq_factor = 1.0;
  p.scaling.high_freq_factor = 4.0;
  p.scaling.original_max_position_embeddings = 8192;
  const auto llama3 = posenc::compute_rope_frequencies(p);
  for (int j = 0; j < 64; ++j) {
    CAPTURE(j);
    const auto at = static_cast<std::size_t>(j);
    REQUIRE_THAT(f.inv_freq[at], WithinRel(static_cast<double>(expect[at]), 1e-14));
    REQUIRE_THAT(f.inv_freq[at], WithinRel(llama3.inv_freq[at], 1e-14));
  }
  CHECK(f.attention_factor == 1.25);
  CHECK(f.rotary_dim == 128);
  REQUIRE_THROWS_WITH(posenc::with_freq_factors(plain, std::vector<double>(63, 1.0)),
                      Contains("factors has 63 entries; it must have one per rotated pair (rotary_dim / 2 = 64)"));
  factors[5] = 0.0;
  REQUIRE_THROWS_WITH(posenc::with_freq_factors(plain, factors), Contains("factors[5] = 0 must be finite and > 0"));
  factors[5] = std::numeric_limits<double>::quiet_NaN();
  REQUIRE_THROWS_AS(posenc::with_freq_factors(plain, factors), std::invalid_argument);
}

TEST_CASE("rope scaling: RopeScaling freq_factors divide every recipe's frequencies after it", "[rope][scaling]") {
  // ggml_rope_ext divides theta_base by c[j] before its YaRN mix; both mixed angles scale alike,
  // so the plan is the recipe's inv_freq[j] / c[j] (by hand below), the rest of the plan kept.
  posenc::RopeParams p;
  p.head_dim = 64;
  p.rotary_dim = 32;
  p.theta = 10000.0;
  std::vector<double> ff(16);
  for (int j = 0; j < 16; ++j) ff[static_cast<std::size_t>(j)] = 1.0 + 0.5 * j;
  for (const auto type : {RopeScalingType::kDefault, RopeScalingType::kLinear, RopeScalingType::kYarn}) {
    CAPTURE(posenc::to_string(type));
    p.scaling = {};
    p.scaling.type = type;
    p.scaling.factor = type == RopeScalingType::kDefault ? 1.0 : 4.0;
    p.scaling.original_max_position_embeddings = 4096;
    const auto base = posenc::compute_rope_frequencies(p);
    p.scaling.freq_factors = ff;
    const auto with = posenc::compute_rope_frequencies(p);
    for (std::size_t j = 0; j < 16; ++j) {
      CAPTURE(j);
      CHECK(with.inv_freq[j] == base.inv_freq[j] / ff[j]);
    }
    CHECK(with.attention_factor == base.attention_factor);
    CHECK(with.softmax_scale_multiplier == base.softmax_scale_multiplier);
    // The per-step plan honours them too.
    posenc::RopePlan plan(p);
    CHECK(plan.frequencies().inv_freq[15] == base.inv_freq[15] / ff[15]);
  }
  // Default RoPE at j = 3: 10000^(-6/32) / 2.5, independently.
  p.scaling = {};
  p.scaling.freq_factors = ff;
  CHECK_THAT(posenc::compute_rope_frequencies(p).inv_freq[3],
             WithinRel(static_cast<double>(std::pow(10000.0L, -6.0L / 32.0L) / 2.5L), 1e-15));
  p.scaling.freq_factors.pop_back();
  REQUIRE_THROWS_AS(posenc::compute_rope_frequencies(p), std::invalid_argument);
  REQUIRE_THROWS_WITH(posenc::compute_rope_frequencies(p),
                      Contains("freq_factors has 15 entries; it must have one per rotated pair (rotary_dim / 2 = 16)"));
  p.scaling.freq_factors = ff;
  p.scaling.freq_factors[7] = -1.0;
  REQUIRE_THROWS_WITH(posenc::compute_rope_frequencies(p), Contains("freq_factors[7] = -1 must be finite and > 0"));
}

TEST_CASE("rope scaling: LongRoPE (Phi-3.5-mini) switches short/long factors at L0", "[rope][scaling][longrope]") {
  // Phi-3.5-mini-instruct config.json: head_dim 3072 / 32 = 96, theta 10000,
  // max_position_embeddings 131072, original_max_position_embeddings 4096.
  const std::vector<double> long_factor = {
      1.0800000429153442, 1.1100000143051147, 1.1399999856948853, 1.340000033378601, 1.5899999141693115,
      1.600000023841858,  1.6200000047683716, 2.620000123977661,  3.2300000190734863, 3.2300000190734863,
      4.789999961853027,  7.400000095367432,  7.700000286102295,  9.09000015258789,   12.199999809265137,
      17.670000076293945, 24.46000099182129,  28.57000160217285,  30.420001983642578, 30.840002059936523,
      32.590003967285156, 32.93000411987305,  42.320003509521484, 44.96000289916992,  50.340003967285156,
      50.45000457763672,  57.55000305175781,  57.93000411987305,  58.21000289916992,  60.1400032043457,
      62.61000442504883,  62.62000274658203,  62.71000289916992,  63.1400032043457,   63.1400032043457,
      63.77000427246094,  63.93000411987305,  63.96000289916992,  63.970001220703125, 64.02999877929688,
      64.06999969482422,  64.08000183105469,  64.12000274658203,  64.41000366210938,  64.4800033569336,
      64.51000213623047,  64.52999877929688,  64.83999633789062};
  const std::vector<double> short_factor = {
      1.0, 1.0199999809265137, 1.0299999713897705, 1.0299999713897705, 1.0499999523162842, 1.0499999523162842,
      1.0499999523162842, 1.0499999523162842, 1.0499999523162842, 1.0699999332427979, 1.0999999046325684,
      1.1099998950958252, 1.1599998474121094, 1.1599998474121094, 1.1699998378753662, 1.2899998426437378,
      1.339999794960022, 1.679999828338623, 1.7899998426437378, 1.8199998140335083, 1.8499997854232788,
      1.8799997568130493, 1.9099997282028198, 1.9399996995925903, 1.9899996519088745, 2.0199997425079346,
      2.0199997425079346, 2.0199997425079346, 2.0199997425079346, 2.0199997425079346, 2.0199997425079346,
      2.0299997329711914, 2.0299997329711914, 2.0299997329711914, 2.0299997329711914, 2.0299997329711914,
      2.0299997329711914, 2.0299997329711914, 2.0299997329711914, 2.0299997329711914, 2.0799996852874756,
      2.0899996757507324, 2.189999580383301, 2.2199995517730713, 2.5899994373321533, 2.729999542236328,
      2.749999523162842, 2.8399994373321533};
  posenc::RopeParams p;
  p.head_dim = 96;
  p.max_position_embeddings = 131072;
  p.scaling.type = posenc::rope_scaling_type_from_string("longrope");
  p.scaling.original_max_position_embeddings = 4096;
  p.scaling.short_factor = short_factor;
  p.scaling.long_factor = long_factor;
  // s = 131072 / 4096 = 32: sqrt(1 + ln 32 / ln 4096) = sqrt(1 + 5/12) = sqrt(17/12).
  const double expected_af = std::sqrt(17.0 / 12.0);
  for (const std::int64_t seq_len : {std::int64_t{0}, std::int64_t{4096}, std::int64_t{4097}, std::int64_t{131072}}) {
    CAPTURE(seq_len);
    const auto f = posenc::compute_rope_frequencies(p, seq_len);
    const bool use_long = seq_len > 4096;
    CHECK(f.uses_long_factor == use_long);
    CHECK_THAT(f.attention_factor, WithinRel(expected_af, 1e-15));
    for (int j = 0; j < 48; ++j) {
      const long double ext = use_long ? long_factor[static_cast<std::size_t>(j)] : short_factor[static_cast<std::size_t>(j)];
      REQUIRE_THAT(f.inv_freq[static_cast<std::size_t>(j)], WithinRel(static_cast<double>(theta_j(10000.0L, j, 96) / ext), 1e-14));
    }
    require_matches_reference(p, seq_len);
  }
  posenc::RopePlan plan(p);
  CHECK_FALSE(plan.frequencies().uses_long_factor);
  CHECK_FALSE(plan.update(4096));
  CHECK(plan.update(4097));
  CHECK(plan.frequencies().uses_long_factor);
  CHECK_FALSE(plan.update(9000));
  CHECK(plan.update(100));
  CHECK_FALSE(plan.frequencies().uses_long_factor);
  // Explicit attention_factor override; and no max_position_embeddings -> s = factor.
  p.scaling.attention_factor = 1.0;
  CHECK(posenc::compute_rope_frequencies(p).attention_factor == 1.0);
  p.scaling.attention_factor.reset();
  p.max_position_embeddings = 0;
  p.scaling.factor = 4.0;
  CHECK_THAT(posenc::compute_rope_frequencies(p).attention_factor,
             WithinRel(static_cast<double>(std::sqrt(1.0L + std::log(4.0L) / std::log(4096.0L))), 1e-15));
}

TEST_CASE("rope scaling: proportional (Gemma-4) turns floor(f d / 2) pairs of the whole head, exponent over head_dim", "[rope][scaling][proportional]") {
  // Gemma-4 full-attention layers: head_dim 512, partial_rotary_factor 0.25, theta 1e6.
  posenc::RopeParams p;
  p.head_dim = 512;
  p.partial_rotary_factor = 0.25;
  p.theta = 1e6;
  p.scaling.type = RopeScalingType::kProportional;
  const auto f = posenc::compute_rope_frequencies(p);
  REQUIRE(f.rotary_dim == 512);
  REQUIRE(f.inv_freq.size() == 256);
  for (int j = 0; j < 256; ++j) {
    CAPTURE(j);
    if (j < 64) {
      REQUIRE_THAT(f.inv_freq[static_cast<std::size_t>(j)], WithinRel(static_cast<double>(theta_j(1e6L, j, 512)), 1e-14));
    } else {
      REQUIRE(f.inv_freq[static_cast<std::size_t>(j)] == 0.0);
    }
  }
  CHECK(f.attention_factor == 1.0);
  CHECK(f.softmax_scale_multiplier == 1.0);
  require_matches_reference(p);

  // Not the standard partial rotary of the same factor: that one rotates the first 128 dims
  // with the exponent over 128, so its second pair turns 4x faster in log terms.
  posenc::RopeParams standard = p;
  standard.scaling.type = RopeScalingType::kDefault;
  const auto g = posenc::compute_rope_frequencies(standard);
  REQUIRE(g.rotary_dim == 128);
  CHECK_THAT(g.inv_freq[1], WithinRel(static_cast<double>(theta_j(1e6L, 1, 128)), 1e-14));
  CHECK(std::abs(g.inv_freq[1] / f.inv_freq[1] - 1.0) > 0.1);

  SECTION("factor divides the turning pairs only") {
    p.scaling.factor = 8.0;
    const auto h = posenc::compute_rope_frequencies(p);
    CHECK_THAT(h.inv_freq[63], WithinRel(static_cast<double>(theta_j(1e6L, 63, 512) / 8.0L), 1e-14));
    CHECK(h.inv_freq[64] == 0.0);
    require_matches_reference(p);
  }
  SECTION("the count is HF's float product: 0.3 * 20 is 6.0 in double, so 3 pairs turn") {
    p.head_dim = 20;
    p.partial_rotary_factor = 0.3;
    const auto h = posenc::compute_rope_frequencies(p);
    CHECK(h.inv_freq[2] != 0.0);
    CHECK(h.inv_freq[3] == 0.0);
    require_matches_reference(p);
  }
  SECTION("floor: 0.3 of 10 dims is 1.5 pairs, so one turns") {
    p.head_dim = 10;
    p.partial_rotary_factor = 0.3;
    const auto h = posenc::compute_rope_frequencies(p);
    REQUIRE(h.inv_freq.size() == 5);
    CHECK(h.inv_freq[0] == 1.0);
    for (std::size_t j = 1; j < 5; ++j) CHECK(h.inv_freq[j] == 0.0);
  }
}

TEST_CASE("rope scaling: proportional rotation of a head is [cc00ss00], the rest bit-identical", "[rope][scaling][proportional]") {
  // head_dim 8, f = 0.5: pairs (0, 4) at inv_freq 1 and (1, 5) at 100^(-2/8) turn (theta 100),
  // dims 2, 3, 6, 7 pass through.
  posenc::RopeParams p;
  p.head_dim = 8;
  p.partial_rotary_factor = 0.5;
  p.theta = 100.0;
  p.scaling.type = RopeScalingType::kProportional;
  const auto f = posenc::compute_rope_frequencies(p);
  const float x0[8] = {0.5f, -1.25f, 3.0f, -0.75f, 2.0f, 0.25f, -6.5f, 1.5f};
  for (const std::int64_t pos : {std::int64_t{1}, std::int64_t{7}, std::int64_t{100000}}) {
    CAPTURE(pos);
    float x[8];
    std::copy(x0, x0 + 8, x);
    const std::int64_t ids[1] = {pos};
    posenc::apply_rope_inplace<float>(posenc::TensorView<float, 4>(x, 1, 1, 1, 8), posenc::PositionIdsView(ids, 1, 1), f,
                                      posenc::RopeLayout::kHalfSplit);
    const long double w1 = std::pow(100.0L, -2.0L / 8.0L);
    const long double a0 = static_cast<long double>(pos), a1 = static_cast<long double>(pos) * w1;
    CHECK_THAT(x[0], WithinAbs(static_cast<double>(0.5L * std::cos(a0) - 2.0L * std::sin(a0)), 1e-6));
    CHECK_THAT(x[4], WithinAbs(static_cast<double>(2.0L * std::cos(a0) + 0.5L * std::sin(a0)), 1e-6));
    CHECK_THAT(x[1], WithinAbs(static_cast<double>(-1.25L * std::cos(a1) - 0.25L * std::sin(a1)), 1e-6));
    CHECK_THAT(x[5], WithinAbs(static_cast<double>(0.25L * std::cos(a1) - 1.25L * std::sin(a1)), 1e-6));
    for (const int i : {2, 3, 6, 7}) {
      CAPTURE(i);
      CHECK(x[i] == x0[i]);
    }
  }
}

TEST_CASE("rope scaling: proportional rejects a factor below 1 and a share that turns no pair", "[rope][scaling][proportional]") {
  posenc::RopeParams p;
  p.head_dim = 64;
  p.scaling.type = RopeScalingType::kProportional;
  p.partial_rotary_factor = 0.01;  // floor(0.32) = 0 pairs
  REQUIRE_THROWS_MATCHES(posenc::compute_rope_frequencies(p), std::invalid_argument,
                         Catch::Matchers::Message("posenc::compute_rope_frequencies: partial_rotary_factor = 0.01 turns no pair of "
                                                  "rotary_dim = 64 (rope_type proportional turns floor(partial_rotary_factor * "
                                                  "rotary_dim / 2) pairs)"));
  p.partial_rotary_factor = 0.25;
  p.scaling.factor = 0.5;
  REQUIRE_THROWS_MATCHES(posenc::compute_rope_frequencies(p), std::invalid_argument,
                         Catch::Matchers::Message("posenc::compute_rope_frequencies: factor = 0.5 must be finite and >= 1"));
  p.scaling.factor = 1.0;
  p.partial_rotary_factor = 1.5;
  REQUIRE_THROWS_WITH(posenc::compute_rope_frequencies(p), Catch::Matchers::Contains("partial_rotary_factor = 1.5 must be in (0, 1]"));
  p.partial_rotary_factor = 0.25;
  p.rotary_dim = 32;  // the recipe rotates the whole head
  REQUIRE_THROWS_MATCHES(posenc::compute_rope_frequencies(p), std::invalid_argument,
                         Catch::Matchers::Message("posenc::compute_rope_frequencies: rotary_dim = 32 must be 0 or head_dim = 64 for "
                                                  "rope_type proportional (it rotates the whole head)"));
  p.rotary_dim = 64;
  CHECK(posenc::compute_rope_frequencies(p).rotary_dim == 64);
}

TEST_CASE("rope scaling: LongRoPE short_mscale / long_mscale (Phi-3.5-MoE) are the cos/sin multiplier of each table", "[rope][scaling][longrope]") {
  // Phi-3.5-MoE's config: both 1.243163121016122, where the default would be
  // sqrt(1 + ln 32 / ln 4096) = 1.19024; here distinct values to see the table switch.
  posenc::RopeParams p;
  p.head_dim = 8;
  p.max_position_embeddings = 131072;
  p.scaling.type = RopeScalingType::kLongRope;
  p.scaling.original_max_position_embeddings = 4096;
  p.scaling.short_factor = {1.0, 1.0, 1.0, 1.0};
  p.scaling.long_factor = {1.0, 2.0, 4.0, 8.0};
  p.scaling.short_mscale = 1.25;
  p.scaling.long_mscale = 1.5;
  CHECK(posenc::compute_rope_frequencies(p, 4096).attention_factor == 1.25);
  CHECK(posenc::compute_rope_frequencies(p, 4097).attention_factor == 1.5);
  require_matches_reference(p, 4096);
  require_matches_reference(p, 8192);
  p.scaling.long_mscale.reset();
  CHECK_THAT(posenc::compute_rope_frequencies(p, 8192).attention_factor,
             WithinRel(static_cast<double>(std::sqrt(1.0L + std::log(32.0L) / std::log(4096.0L))), 1e-15));
  p.scaling.attention_factor = 2.0;  // an explicit factor wins over both
  CHECK(posenc::compute_rope_frequencies(p, 10).attention_factor == 2.0);
  p.scaling.attention_factor.reset();
  p.scaling.short_mscale = 0.0;
  REQUIRE_THROWS_MATCHES(posenc::compute_rope_frequencies(p), std::invalid_argument,
                         Catch::Matchers::Message("posenc::compute_rope_frequencies: short_mscale = 0 must be finite and > 0"));
}

TEST_CASE("rope scaling: HF rope_type strings and to_string round-trip", "[rope][scaling]") {
  for (const auto type : {RopeScalingType::kDefault, RopeScalingType::kLinear, RopeScalingType::kNtk, RopeScalingType::kDynamic,
                          RopeScalingType::kYarn, RopeScalingType::kLongRope, RopeScalingType::kLlama3,
                          RopeScalingType::kProportional, RopeScalingType::kVllmNtk}) {
    CHECK(posenc::rope_scaling_type_from_string(posenc::to_string(type)) == type);
  }
  CHECK(posenc::rope_scaling_type_from_string("su") == RopeScalingType::kLongRope);
  CHECK(posenc::to_string(posenc::RopeLayout::kInterleaved) == "interleaved");
  CHECK(posenc::to_string(posenc::RopeLayout::kHalfSplit) == "half_split");
}

TEST_CASE("rope scaling: the attention factor reaches the rotated values", "[rope][scaling]") {
  // A YaRN plan with s = e^10 has attention_factor 0.1 * 10 + 1 = 2 exactly in closed form; at
  // position 0 the rotation is the identity, so the output is exactly 2x.
  posenc::RopeParams p;
  p.head_dim = 8;
  p.scaling.type = RopeScalingType::kYarn;
  p.scaling.factor = std::exp(10.0);
  p.max_position_embeddings = 4096;
  const auto f = posenc::compute_rope_frequencies(p);
  CHECK_THAT(f.attention_factor, WithinAbs(2.0, 1e-15));
  float x[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  const std::int64_t pos[1] = {0};
  posenc::apply_rope_inplace<float>(posenc::TensorView<float, 4>(x, 1, 1, 1, 8), posenc::PositionIdsView(pos, 1, 1), f, posenc::RopeLayout::kHalfSplit);
  for (int i = 0; i < 8; ++i) CHECK_THAT(x[i], WithinAbs(2.0 * (i + 1), 1e-5));
}

// Found by tests/fuzz/fuzz_rope_plan.cpp: parameters each check accepted whose plan came out
// infinite, NaN or of the wrong sign. Expected values: HF's formulas in long double.
TEST_CASE("rope scaling: a plan that would be infinite, NaN or negative is rejected by name",
          "[rope][scaling]") {
  using Catch::Matchers::Message;
  posenc::RopeParams p;
  p.head_dim = 64;
  const auto rejects = [&](const std::string& text) {
    CAPTURE(text);
    REQUIRE_THROWS_WITH(posenc::compute_rope_frequencies(p), Contains(text));
    REQUIRE_THROWS_AS(posenc::compute_rope_frequencies(p), std::invalid_argument);
  };

  SECTION("YaRN: a negative mscale made g(s, m) = 0.1 m ln s + 1 zero (attention_factor inf)") {
    p.scaling.type = RopeScalingType::kYarn;
    p.max_position_embeddings = 4096;
    p.scaling.factor = std::exp(10.0);  // ln s = 10: g(s, -1) = 0
    p.scaling.mscale = 1.0;
    p.scaling.mscale_all_dim = -1.0;
    rejects("mscale_all_dim = -1 must be finite and >= 0");
    p.scaling.mscale_all_dim = 1.0;
    p.scaling.mscale = -5.0;  // g = -4: cos and sin flipped in sign
    rejects("mscale = -5 must be finite and >= 0");
    p.scaling.mscale = 0.0;  // 0 = absent: g(s, 1) / 1 ... the default g(s, 1)
    const auto f = posenc::compute_rope_frequencies(p);
    CHECK_THAT(f.attention_factor, WithinRel(2.0, 1e-15));           // 0.1 * 10 + 1
    CHECK_THAT(f.softmax_scale_multiplier, WithinRel(4.0, 1e-15));   // g(s, 1)^2
  }

  SECTION("LongRoPE: L0 = 1 divided by ln L0 = 0 in the default attention factor") {
    p.scaling.type = RopeScalingType::kLongRope;
    p.scaling.original_max_position_embeddings = 1;
    p.max_position_embeddings = 4096;
    p.scaling.short_factor.assign(32, 1.0);
    p.scaling.long_factor.assign(32, 2.0);
    rejects("original_max_position_embeddings = 1 must be > 1 for rope_type longrope's default "
            "attention factor sqrt(1 + ln S / ln L0), S = 4096");
    p.scaling.attention_factor = 1.25;  // the default is not formed: the plan is valid
    CHECK(posenc::compute_rope_frequencies(p).attention_factor == 1.25);
    p.scaling.attention_factor.reset();
    p.max_position_embeddings = 1;  // S = 1: the factor is 1 without a logarithm
    CHECK(posenc::compute_rope_frequencies(p).attention_factor == 1.0);
  }

  SECTION("vLLM NTK-mixed: (d/2)^m overflowed for a large m, so 0 * inf made every pair NaN") {
    p.scaling.type = RopeScalingType::kVllmNtk;
    p.scaling.factor = 4.0;
    p.scaling.mixed_b = 300.0;  // 32^300 ~ 1e451
    const auto f = posenc::compute_rope_frequencies(p);
    for (int j = 0; j < 32; ++j) {
      CAPTURE(j);
      // th_j / exp(ln s ((j+1) / 32)^300): 1 for every pair but the last, s for it.
      const long double lambda =
          std::exp(std::log(4.0L) * std::pow((j + 1) / 32.0L, 300.0L));
      REQUIRE_THAT(f.inv_freq[static_cast<std::size_t>(j)],
                   WithinRel(static_cast<double>(theta_j(10000.0L, j, 64) / lambda), 1e-14));
    }
    const long double last = theta_j(10000.0L, 31, 64) / 4.0L;
    CHECK_THAT(f.inv_freq[31], WithinRel(static_cast<double>(last), 1e-14));
  }

  SECTION("NTK: theta s^(d/(d-2)) past DBL_MAX left pair 0 at 1 and every other at 0") {
    p.scaling.type = RopeScalingType::kNtk;
    p.theta = 1e300;
    p.scaling.factor = 1e10;
    rejects("rope_type ntk with theta = 1.0000000000000001e+300, factor = 10000000000 and "
            "seq_len = 0 overflows a double: effective_theta = inf");
  }

  SECTION("freq_factors: a factor near the smallest subnormal made inv_freq infinite") {
    p.scaling.freq_factors.assign(32, 1.0);
    p.scaling.freq_factors[0] = std::numeric_limits<double>::denorm_min();
    rejects("overflows a double: inv_freq = inf");
    p.scaling.freq_factors.clear();
    std::vector<double> factors(32, 1.0);
    factors[0] = std::numeric_limits<double>::denorm_min();
    const auto plan = posenc::compute_rope_frequencies(p);
    REQUIRE_THROWS_MATCHES(posenc::with_freq_factors(plan, factors), std::invalid_argument,
                           Message("posenc::with_freq_factors: inv_freq[0] = 1 / freq_factors[0] "
                                   "= 4.9406564584124654e-324 overflows a double"));
  }

  SECTION("dynamic: a length that overflows the base throws from update and keeps the plan") {
    p.scaling.type = RopeScalingType::kDynamic;
    p.theta = 1e300;
    p.scaling.factor = 2.0;
    p.max_position_embeddings = 4096;
    posenc::RopePlan plan(p);
    REQUIRE(plan.update(8192));  // (2 * 2 - 1)^(64/62): 1e300 * 3.1, finite
    const auto before = plan.frequencies();
    // (2 L / 4096 - 1)^(64/62) > 1.8e8 once L > ~4e11.
    REQUIRE_THROWS_WITH(plan.update(std::int64_t{1} << 40),
                        Contains("overflows a double: effective_theta = inf"));
    CHECK(plan.frequencies().inv_freq == before.inv_freq);
    CHECK(plan.frequencies().planned_seq_len == 8192);
    CHECK(plan.max_seq_len_cached() == 8192);
    CHECK_FALSE(plan.update(8000));  // still planned for 8192
  }

  SECTION("partial_rotary_factor: int(head_dim * f) past the Index range was undefined") {
    p.head_dim = std::numeric_limits<std::int64_t>::max();
    p.partial_rotary_factor = 1.0;
    REQUIRE_THROWS_MATCHES(
        posenc::resolved_rotary_dim(p), std::invalid_argument,
        Message("posenc::resolved_rotary_dim: rotary_dim = int(head_dim * partial_rotary_factor) "
                "= int(9223372036854775807 * 1) must be <= 1024"));
  }
}

TEST_CASE("rope scaling: the edges of theta and mscale_slope (theta > 1, slope >= 0)",
          "[rope][scaling][yarn]") {
  posenc::RopeParams p;
  p.head_dim = 64;
  // theta = 1 makes every frequency 1 (no position information): refused, as documented.
  p.theta = 1.0;
  REQUIRE_THROWS_WITH(posenc::compute_rope_frequencies(p),
                      Contains("theta = 1 must be finite and > 1"));
  p.theta = std::nextafter(1.0, 2.0);
  REQUIRE_NOTHROW(posenc::compute_rope_frequencies(p));
  // slope 0 is in range: g(s, m) = 0 m ln s + 1 = 1, so YaRN's factors are all 1 and the
  // frequencies are HF's ramp (slope 0 affects only g).
  p.theta = 10000.0;
  p.scaling.type = RopeScalingType::kYarn;
  p.scaling.factor = 8.0;
  p.scaling.original_max_position_embeddings = 4096;
  p.scaling.mscale = 0.5;
  p.scaling.mscale_all_dim = 2.0;
  p.scaling.mscale_slope = 0.0;
  const auto f = posenc::compute_rope_frequencies(p);
  CHECK(f.attention_factor == 1.0);
  CHECK(f.softmax_scale_multiplier == 1.0);
  require_yarn_ramp_64(f, 8.0L, std::max(std::floor(yarn_corr_64(4096.0L, 32.0L)), 0.0L),
                       std::min(std::ceil(yarn_corr_64(4096.0L, 1.0L)), 63.0L));
  p.scaling.mscale_slope = -0.1;
  REQUIRE_THROWS_WITH(posenc::compute_rope_frequencies(p), Contains("mscale_slope = -0.1"));
}

TEST_CASE("rope scaling: YaRN clamps a negative low end to 0 and guards lo == hi after truncation",
          "[rope][scaling][yarn]") {
  // HF find_correction_range: low = max(floor(corr(beta_fast)), 0),
  // high = min(ceil(corr(beta_slow)), d - 1); linear_ramp_factor adds 0.001 to high when
  // low == high. Recomputed in long double.
  const auto yarn = [](std::int64_t l0, double beta_fast, double beta_slow) {
    posenc::RopeParams p;
    p.head_dim = 64;
    p.scaling.type = RopeScalingType::kYarn;
    p.scaling.factor = 4.0;
    p.scaling.original_max_position_embeddings = l0;
    p.scaling.beta_fast = beta_fast;
    p.scaling.beta_slow = beta_slow;
    return p;
  };
  const auto check = [](const posenc::RopeParams& p, long double lo, long double hi) {
    require_yarn_ramp_64(posenc::compute_rope_frequencies(p), 4.0L, lo, hi);
  };
  const auto corr = yarn_corr_64;
  SECTION("L0 = 100 < 2 pi beta_fast: corr(32) < 0 is clamped to 0") {
    REQUIRE(std::floor(corr(100.0L, 32.0L)) < 0.0L);
    check(yarn(100, 32.0, 1.0), 0.0L, std::ceil(corr(100.0L, 1.0L)));
  }
  SECTION("floor(corr(140)) = ceil(corr(170)) = 5: the range becomes [5, 5.001]") {
    REQUIRE(std::floor(corr(4096.0L, 140.0L)) == 5.0L);
    REQUIRE(std::ceil(corr(4096.0L, 170.0L)) == 5.0L);
    check(yarn(4096, 140.0, 170.0), 5.0L, 5.001L);
  }
}

TEST_CASE("rope scaling: Llama-3 with low_freq_factor == high_freq_factor on the bound wavelength",
          "[rope][scaling][llama3]") {
  // lf == hf leaves no smoothing band; a wavelength exactly L0 / lf is not above the low-frequency
  // bound, so HF would form m = 0 / 0. The documented rule (vLLM's): it takes th_j / s. Pair 0
  // (th_0 = 1, wavelength 2 pi) sits on the bound when L0 / lf == 2 pi in double.
  posenc::RopeParams p;
  p.head_dim = 64;
  p.theta = 500000.0;
  p.scaling.type = RopeScalingType::kLlama3;
  p.scaling.factor = 8.0;
  const double two_pi = 2.0 * static_cast<double>(kPi);
  std::int64_t l0 = 0;
  double lf = 0.0;
  for (std::int64_t cand = 1; cand < 1000 && l0 == 0; ++cand) {
    const double factor = static_cast<double>(cand) / two_pi;
    if (static_cast<double>(cand) / factor == two_pi) {
      l0 = cand;
      lf = factor;
    }
  }
  REQUIRE(l0 > 0);
  p.scaling.original_max_position_embeddings = l0;
  p.scaling.low_freq_factor = lf;
  p.scaling.high_freq_factor = lf;
  const auto f = posenc::compute_rope_frequencies(p);
  CHECK(f.inv_freq[0] == 1.0 / 8.0);
  for (int j = 1; j < 32; ++j) {  // longer wavelengths: all above the bound, th_j / s
    CAPTURE(j);
    REQUIRE_THAT(f.inv_freq[static_cast<std::size_t>(j)],
                 WithinRel(static_cast<double>(theta_j(500000.0L, j, 64) / 8.0L), 1e-14));
  }
}

TEST_CASE("rope scaling: a negative max_position_embeddings is refused by name for every rope_type",
          "[rope][scaling]") {
  // 0 means absent; a negative value is no context length, whether or not the recipe reads it.
  posenc::RopeParams p;
  p.head_dim = 64;
  p.max_position_embeddings = -1;
  for (const auto type : {RopeScalingType::kDefault, RopeScalingType::kLinear,
                          RopeScalingType::kNtk, RopeScalingType::kLlama3}) {
    CAPTURE(posenc::to_string(type));
    p.scaling.type = type;
    p.scaling.original_max_position_embeddings = 8192;
    REQUIRE_THROWS_WITH(posenc::compute_rope_frequencies(p),
                        Contains("max_position_embeddings = -1 must be >= 0"));
  }
}

TEST_CASE("rope scaling: a YaRN softmax_scale_multiplier g^2 past DBL_MAX is rejected by name",
          "[rope][scaling][yarn]") {
  // mscale_all_dim = 1e200, s = 4: g(s, m) = 0.1 m ln 4 + 1 ~ 1.4e199 is finite, its square (the
  // softmax multiplier, DeepSeek's mscale^2) is not. With mscale 0 the attention factor is
  // g(s, 1), finite: only the multiplier overflows.
  posenc::RopeParams p;
  p.head_dim = 64;
  p.scaling.type = RopeScalingType::kYarn;
  p.scaling.factor = 4.0;
  p.scaling.original_max_position_embeddings = 4096;
  p.scaling.mscale_all_dim = 1e200;
  REQUIRE_THROWS_WITH(posenc::compute_rope_frequencies(p),
                      Contains("overflows a double: softmax_scale_multiplier = inf"));
  p.scaling.mscale_all_dim = 1e100;  // g^2 ~ 1.9e199: finite, accepted
  const auto f = posenc::compute_rope_frequencies(p);
  const long double g = 0.1L * 1e100L * std::log(4.0L) + 1.0L;
  CHECK_THAT(f.softmax_scale_multiplier, WithinRel(static_cast<double>(g * g), 1e-14));
}

// ---- mutation audit: posenc/reference/rope.hpp's recipes pinned on their own ---------------
// The reference is the oracle the fast planner is compared with, and users copy it as the
// textbook math: each recipe below is checked against the file comment's closed form written
// out here in long double (theta_j = theta^(-2j/d), RoFormer eq. 15), not against the planner.

namespace {

void require_reference_inv_freq(const posenc::RopeParams& p, std::int64_t seq_len,
                                const std::vector<long double>& expected) {
  const auto ref = posenc::reference::rope_frequencies(p, seq_len);
  REQUIRE(ref.inv_freq.size() == expected.size());
  for (std::size_t j = 0; j < expected.size(); ++j) {
    CAPTURE(j);
    REQUIRE(std::fabs(ref.inv_freq[j] / expected[j] - 1.0L) < 1e-15L);
  }
}

}  // namespace

TEST_CASE("rope scaling: the reference's linear, NTK and dynamic recipes equal their closed forms",
          "[rope][scaling][reference]") {
  posenc::RopeParams p;
  p.head_dim = 16;
  p.max_position_embeddings = 2048;
  p.scaling.factor = 4.0;
  std::vector<long double> expected(8);
  SECTION("linear: theta_j / s") {
    p.scaling.type = RopeScalingType::kLinear;
    for (int j = 0; j < 8; ++j) expected[static_cast<std::size_t>(j)] = theta_j(1e4L, j, 16) / 4.0L;
    require_reference_inv_freq(p, 0, expected);
  }
  SECTION("static NTK: base theta s^(d/(d-2)) = 1e4 4^(16/14)") {
    p.scaling.type = RopeScalingType::kNtk;
    const long double base = 1e4L * std::pow(4.0L, 16.0L / 14.0L);
    for (int j = 0; j < 8; ++j) expected[static_cast<std::size_t>(j)] = theta_j(base, j, 16);
    require_reference_inv_freq(p, 0, expected);
  }
  SECTION("dynamic: L = max(seq_len, L0), so a short sequence keeps theta_j") {
    p.scaling.type = RopeScalingType::kDynamic;
    for (int j = 0; j < 8; ++j) expected[static_cast<std::size_t>(j)] = theta_j(1e4L, j, 16);
    require_reference_inv_freq(p, 100, expected);
    // L = 4096 = 2 L0: base theta (4 * 2 - 3)^(16/14).
    const long double base = 1e4L * std::pow(5.0L, 16.0L / 14.0L);
    for (int j = 0; j < 8; ++j) expected[static_cast<std::size_t>(j)] = theta_j(base, j, 16);
    require_reference_inv_freq(p, 4096, expected);
  }
}

TEST_CASE("rope scaling: the reference's YaRN range clamps and its attention factor rules",
          "[rope][scaling][reference][yarn]") {
  posenc::RopeParams p;
  p.head_dim = 64;
  p.scaling.type = RopeScalingType::kYarn;
  p.scaling.factor = 4.0;
  const auto ramp_inv_freq = [](long double lo, long double hi) {
    std::vector<long double> w(32);
    for (int j = 0; j < 32; ++j) {
      const long double ramp = std::clamp((j - lo) / (hi - lo), 0.0L, 1.0L);
      const long double th = theta_j(1e4L, j, 64);
      w[static_cast<std::size_t>(j)] = th / 4.0L * ramp + th * (1.0L - ramp);
    }
    return w;
  };
  SECTION("L0 = 100: floor(corr(32)) < 0 is clamped to 0 (HF find_correction_range)") {
    p.scaling.original_max_position_embeddings = 100;
    p.scaling.beta_fast = 32.0;
    p.scaling.beta_slow = 1.0;
    REQUIRE(std::floor(yarn_corr_64(100.0L, 32.0L)) < 0.0L);
    require_reference_inv_freq(p, 0, ramp_inv_freq(0.0L, std::ceil(yarn_corr_64(100.0L, 1.0L))));
  }
  SECTION("floor(corr(140)) = ceil(corr(170)) = 5: linear_ramp_factor's range [5, 5.001]") {
    p.scaling.original_max_position_embeddings = 4096;
    p.scaling.beta_fast = 140.0;
    p.scaling.beta_slow = 170.0;
    require_reference_inv_freq(p, 0, ramp_inv_freq(5.0L, 5.001L));
  }
  // g(s, m) = 0.1 m ln s + 1; s = 4.
  const auto g = [](long double m) { return 0.1L * m * std::log(4.0L) + 1.0L; };
  p.scaling.original_max_position_embeddings = 4096;
  SECTION("attention_factor given: taken as is") {
    p.scaling.attention_factor = 1.25;
    p.scaling.mscale = 2.0;
    p.scaling.mscale_all_dim = 1.0;
    CHECK(posenc::reference::rope_frequencies(p).attention_factor == 1.25L);
  }
  SECTION("mscale and mscale_all_dim both set: g(s, mscale) / g(s, mscale_all_dim)") {
    p.scaling.mscale = 1.0;
    p.scaling.mscale_all_dim = 0.5;
    const auto f = posenc::reference::rope_frequencies(p);
    CHECK(std::fabs(f.attention_factor - g(1.0L) / g(0.5L)) < 1e-15L);
    CHECK(std::fabs(f.softmax_scale_multiplier - g(0.5L) * g(0.5L)) < 1e-15L);
  }
  SECTION("mscale alone (mscale_all_dim 0): g(s, 1), the mscale is not read") {
    p.scaling.mscale = 2.0;
    p.scaling.mscale_all_dim = 0.0;
    const auto f = posenc::reference::rope_frequencies(p);
    CHECK(std::fabs(f.attention_factor - g(1.0L)) < 1e-15L);
    CHECK(f.softmax_scale_multiplier == 1.0L);
  }
}

TEST_CASE("rope scaling: the reference takes a given attention_factor for the other recipes",
          "[rope][scaling][reference]") {
  // The file comment: an explicit attention_factor is the cos/sin multiplier of any recipe.
  posenc::RopeParams p;
  p.head_dim = 16;
  p.scaling.type = RopeScalingType::kLinear;
  p.scaling.factor = 2.0;
  p.scaling.attention_factor = 1.5;
  CHECK(posenc::reference::rope_frequencies(p).attention_factor == 1.5L);
}

TEST_CASE("rope scaling: the reference's Llama-3 rule with lf == hf on the bound wavelength",
          "[rope][scaling][reference][llama3]") {
  // File comment: lf == hf leaves no smoothing band, the boundary wavelength takes th_j / s
  // (vLLM's m = 0) instead of 0 / 0. Pair 0 (th_0 = 1, wavelength 2 pi) lies on L0 / lf in
  // x87 long double for L0 = 30239, lf = hf = 0x1.2ccafb2f09bb7p+12 (found by search). With
  // another long double (AArch64's binary128, or double) that pair is off the bound, so the
  // case is checked where long double has a 64-bit significand only.
  if (std::numeric_limits<long double>::digits != 64) {
    SUCCEED("the boundary pair was searched for x87 long double");
    return;
  }
  posenc::RopeParams p;
  p.head_dim = 64;
  p.theta = 500000.0;
  p.scaling.type = RopeScalingType::kLlama3;
  p.scaling.factor = 8.0;
  p.scaling.original_max_position_embeddings = 30239;
  p.scaling.low_freq_factor = 0x1.2ccafb2f09bb7p+12;
  p.scaling.high_freq_factor = 0x1.2ccafb2f09bb7p+12;
  REQUIRE(30239.0L / static_cast<long double>(p.scaling.low_freq_factor) ==
          2.0L * posenc::reference::kPi);
  const auto f = posenc::reference::rope_frequencies(p);
  CHECK(f.inv_freq[0] == 1.0L / 8.0L);
  for (std::size_t j = 1; j < 32; ++j) {
    CAPTURE(j);
    CHECK(std::fabs(f.inv_freq[j] / (theta_j(5e5L, static_cast<int>(j), 64) / 8.0L) - 1.0L) <
          1e-15L);
  }
}
