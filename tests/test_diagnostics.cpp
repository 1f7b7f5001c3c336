// Diagnostics: the long-context pair report against band edges computed by hand, HF's
// left-padding position_ids, the position validator, and prefill vs token-by-token decode.

#include <catch2/catch.hpp>

#include <posenc/diagnostics.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace {

using Catch::Matchers::Contains;
using Catch::Matchers::WithinAbs;
using Catch::Matchers::WithinRel;
using posenc::RopePairRange;
using posenc::RopePairScaling;

posenc::RopeParams llama31() {
  posenc::RopeParams p;
  p.head_dim = 128;
  p.theta = 500000.0;
  p.max_position_embeddings = 131072;
  p.scaling.type = posenc::RopeScalingType::kLlama3;
  p.scaling.factor = 8.0;
  p.scaling.low_freq_factor = 1.0;
  p.scaling.high_freq_factor = 4.0;
  p.scaling.original_max_position_embeddings = 8192;
  return p;
}

bool any_contains(const std::vector<std::string>& v, const std::string& s) {
  for (const auto& x : v) {
    if (x.find(s) != std::string::npos) return true;
  }
  return false;
}

// splitmix64 -> [-1, 1): reproducible across standard libraries.
struct Rng {
  std::uint64_t s;
  float next() {
    std::uint64_t z = (s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return static_cast<float>(static_cast<double>(z >> 11) / 9007199254740992.0 * 2.0 - 1.0);
  }
};

}  // namespace

TEST_CASE("diagnostics: Llama-3.1 bands at 131072 match the wavelength cut-offs",
          "[diagnostics][length][llama3]") {
  const auto rep = posenc::analyze_rope_length(llama31(), 131072);
  REQUIRE(rep.pairs.size() == 64);
  // Band edges by hand: lambda_j = 2 pi 500000^(j/64); kept while lambda < 8192/4 = 2048,
  // i.e. j < 64 ln(2048/2pi)/ln(500000) = 28.2; interpolated once lambda > 8192, j > 34.98.
  int kept = 0, blended = 0, interp = 0;
  for (const auto& p : rep.pairs) {
    CAPTURE(p.pair);
    if (p.pair <= 28) REQUIRE(p.scaling == RopePairScaling::kKept);
    if (p.pair >= 29 && p.pair <= 34) REQUIRE(p.scaling == RopePairScaling::kBlended);
    if (p.pair >= 35) REQUIRE(p.scaling == RopePairScaling::kInterpolated);
    kept += p.scaling == RopePairScaling::kKept;
    blended += p.scaling == RopePairScaling::kBlended;
    interp += p.scaling == RopePairScaling::kInterpolated;
  }
  REQUIRE(kept == 29);
  REQUIRE(blended == 6);
  REQUIRE(interp == 29);
  const double pi = 3.14159265358979323846;
  REQUIRE_THAT(rep.pairs[0].wavelength_before, WithinRel(2.0 * pi, 1e-15));
  REQUIRE_THAT(rep.pairs[0].periods_in_training, WithinRel(8192.0 / (2.0 * pi), 1e-14));
  REQUIRE_THAT(rep.pairs[63].wavelength_after,
               WithinRel(8.0 * 2.0 * pi * std::pow(500000.0, 63.0 / 64.0), 1e-12));
  // The three lengths: accepted 131072, covered 8192 x 8 = 65536 < 131072.
  REQUIRE(rep.accepted_length == 131072);
  REQUIRE(rep.trained_length == 8192);
  REQUIRE(rep.covered_length == 65536.0);
  REQUIRE(rep.computable_length == (std::int64_t{1} << 53));
  REQUIRE(any_contains(rep.warnings, "65536"));
  // Interpolated pairs (lambda > 8192, < 1 period in training) reach 131071/8 > 8191 radians
  // per unit frequency: angles pre-training never produced.
  REQUIRE(rep.unseen_pairs == 29);
  REQUIRE(rep.pairs[63].range == RopePairRange::kExtrapolatedUnseen);
  REQUIRE(rep.pairs[0].range == RopePairRange::kExtrapolatedSeenPhases);
}

TEST_CASE("diagnostics: ggml's rope_freqs factors read like the llama3 recipe they encode",
          "[diagnostics][length][llama3]") {
  // A GGUF's Llama-3.1: default RoPE plus per-pair factors by the converter's rule (1 below
  // 2048 tokens of wavelength, 8 above 8192, 1 / ((1 - m) / 8 + m) between), computed here.
  posenc::RopeParams p;
  p.head_dim = 128;
  p.theta = 500000.0;
  p.max_position_embeddings = 131072;
  const long double pi = 3.141592653589793238462643383279502884L;
  for (int j = 0; j < 64; ++j) {
    const long double wavelen = 2.0L * pi * std::pow(500000.0L, j / 64.0L);
    long double f = wavelen < 2048.0L ? 1.0L : wavelen > 8192.0L ? 8.0L : 0.0L;
    if (f == 0.0L) {
      const long double m = (8192.0L / wavelen - 1.0L) / 3.0L;
      f = 1.0L / ((1.0L - m) / 8.0L + m);
    }
    p.scaling.freq_factors.push_back(static_cast<double>(f));
  }
  SECTION("with the pre-training length") {
    p.scaling.original_max_position_embeddings = 8192;
    const auto rep = posenc::analyze_rope_length(p, 131072);
    int kept = 0, blended = 0, interp = 0;
    for (const auto& pr : rep.pairs) {
      kept += pr.scaling == RopePairScaling::kKept;
      blended += pr.scaling == RopePairScaling::kBlended;
      interp += pr.scaling == RopePairScaling::kInterpolated;
    }
    CHECK(kept == 29);
    CHECK(blended == 6);
    CHECK(interp == 29);
    CHECK(rep.factor == 8.0);
    CHECK(rep.covered_length == 65536.0);
    CHECK(rep.unseen_pairs == 29);
    CHECK_FALSE(any_contains(rep.warnings, "no rope_scaling"));
  }
  SECTION("without it (a GGUF does not carry L0)") {
    const auto rep = posenc::analyze_rope_length(p, 131072);
    CHECK(rep.trained_length == 131072);
    CHECK(any_contains(rep.warnings, "pre-training was about 16384 (max / factor)"));
  }
}

TEST_CASE("diagnostics: at the training length nothing is unseen", "[diagnostics][length]") {
  const auto rep = posenc::analyze_rope_length(llama31(), 8192);
  REQUIRE(rep.unseen_pairs == 0);
  for (const auto& p : rep.pairs) REQUIRE(p.range == RopePairRange::kWithinTraining);
  REQUIRE(rep.warnings.empty());
}

TEST_CASE("diagnostics: YaRN pairs are within training up to exactly L0 x factor",
          "[diagnostics][length][yarn]") {
  // Qwen2.5-7B with Qwen's YaRN block: d = 128, theta 1e6, factor 4, L0 = 32768, covered 131072.
  // The fully interpolated pairs are j >= ceil(dim(beta_slow = 1)), dim(b) = d ln(L0 / (2 pi b))
  // / (2 ln theta) (YaRN's correction range): one turn or less over L0, so once n / 4 > L0 their
  // angles were never produced; at n = 131072 the judged n w / 4 = L0 w is the trained phase.
  posenc::RopeParams p;
  p.head_dim = 128;
  p.theta = 1e6;
  p.max_position_embeddings = 32768;
  p.scaling.type = posenc::RopeScalingType::kYarn;
  p.scaling.factor = 4.0;
  p.scaling.original_max_position_embeddings = 32768;
  const double pi = 3.14159265358979323846;
  const double dim1 = 128.0 * std::log(32768.0 / (2.0 * pi)) / (2.0 * std::log(1e6));  // 39.65
  const auto interpolated = 64 - static_cast<Eigen::Index>(std::ceil(dim1));           // 24
  REQUIRE(interpolated == 24);

  const auto at_covered = posenc::analyze_rope_length(p, 131072);
  REQUIRE(at_covered.covered_length == 131072.0);
  CHECK(at_covered.unseen_pairs == 0);
  for (const auto& pr : at_covered.pairs) {
    CAPTURE(pr.pair);
    CHECK(pr.range != RopePairRange::kExtrapolatedUnseen);
    if (pr.scaling == RopePairScaling::kInterpolated) {
      CHECK(pr.range == RopePairRange::kWithinTraining);
    }
  }
  CHECK_FALSE(any_contains(at_covered.warnings, "exceeds the length covered by training"));

  const auto past = posenc::analyze_rope_length(p, 131073);
  CHECK(past.unseen_pairs == interpolated);
  CHECK(any_contains(past.warnings, "exceeds the length covered by training"));
  // A sliding window of 131072 judges the same distances as the covered length.
  CHECK(posenc::analyze_rope_length(p, 200000, 131072).unseen_pairs == 0);
}

TEST_CASE("diagnostics: without a training length no pair is judged", "[diagnostics][length]") {
  posenc::RopeParams p;
  p.head_dim = 16;
  p.max_position_embeddings = 0;
  const auto rep = posenc::analyze_rope_length(p, 4096);
  CHECK(rep.unseen_pairs == 0);
  for (const auto& pr : rep.pairs) CHECK(pr.range == RopePairRange::kNotJudged);
  CHECK(posenc::to_string(RopePairRange::kNotJudged) == "not judged (no L0)");
  CHECK(any_contains(rep.warnings, "max_position_embeddings = 0, "
                                   "original_max_position_embeddings = 0; 0 = absent"));
}

TEST_CASE("diagnostics: unscaled Llama-2 at twice its length", "[diagnostics][length]") {
  posenc::RopeParams p;
  p.head_dim = 128;
  p.max_position_embeddings = 2048;
  const auto rep = posenc::analyze_rope_length(p, 4096);
  // lambda_j = 2 pi 10000^(j/64) > 2048 for j > 64 ln(2048/2pi)/ln(10000) = 40.2: 23 pairs.
  REQUIRE(rep.unseen_pairs == 23);
  REQUIRE(any_contains(rep.warnings, "exceeds max_position_embeddings = 2048"));
  REQUIRE(any_contains(rep.warnings, "no rope_scaling"));
}

TEST_CASE("diagnostics: recipe warnings (dynamic, longrope, empty llama3 band)",
          "[diagnostics][length]") {
  posenc::RopeParams p;
  p.head_dim = 8;
  p.max_position_embeddings = 4096;
  SECTION("dynamic") {
    p.scaling.type = posenc::RopeScalingType::kDynamic;
    p.scaling.factor = 2.0;
    REQUIRE(any_contains(posenc::analyze_rope_length(p, 8192).warnings, "stale base"));
  }
  SECTION("longrope") {
    p.max_position_embeddings = 16384;
    p.scaling.type = posenc::RopeScalingType::kLongRope;
    p.scaling.original_max_position_embeddings = 4096;
    p.scaling.short_factor = {1, 1, 1, 1};
    p.scaling.long_factor = {1, 2, 4, 4};
    const auto rep = posenc::analyze_rope_length(p, 8192);
    REQUIRE(any_contains(rep.warnings, "short_factor to long_factor"));
    REQUIRE(rep.factor == 4.0);  // 16384 / 4096
    REQUIRE(rep.pairs[0].scaling == RopePairScaling::kKept);
    REQUIRE(rep.pairs[1].scaling == RopePairScaling::kBlended);
    REQUIRE(rep.pairs[3].scaling == RopePairScaling::kInterpolated);
    // At 4096 the short table (all 1) is used: nothing scaled, no switch warning.
    const auto short_rep = posenc::analyze_rope_length(p, 4096);
    REQUIRE(short_rep.pairs[3].scaling == RopePairScaling::kKept);
    REQUIRE(!any_contains(short_rep.warnings, "short_factor to long_factor"));
  }
  SECTION("llama3 with low_freq_factor == high_freq_factor") {
    p.scaling.type = posenc::RopeScalingType::kLlama3;
    p.scaling.factor = 8.0;
    p.scaling.low_freq_factor = 2.0;
    p.scaling.high_freq_factor = 2.0;
    p.scaling.original_max_position_embeddings = 4096;
    REQUIRE(any_contains(posenc::analyze_rope_length(p, 100).warnings, "band is empty"));
  }
  SECTION("bad target") {
    REQUIRE_THROWS_WITH(posenc::analyze_rope_length(p, 0), Contains("target_length"));
  }
}

TEST_CASE("diagnostics: a proportional plan's still pairs are kept, never NaN",
          "[diagnostics][length][proportional]") {
  // head_dim 16, f = 0.5: pairs 0..3 turn at theta^(-2j/16) / 2, pairs 4..7 have inv_freq 0.
  posenc::RopeParams p;
  p.head_dim = 16;
  p.partial_rotary_factor = 0.5;
  p.max_position_embeddings = 4096;
  p.scaling.type = posenc::RopeScalingType::kProportional;
  p.scaling.factor = 2.0;
  const auto rep = posenc::analyze_rope_length(p, 8192);
  // Only factor 1 makes a proportional plan unscaled (the Gemma-4 case below): with factor 2 the
  // missing original length is reported as an assumption, not as unscaled use.
  CHECK(any_contains(rep.warnings, "gives no original_max_position_embeddings"));
  CHECK(!any_contains(rep.warnings, "every pair is used unscaled"));
  REQUIRE(rep.pairs.size() == 8);
  for (std::size_t j = 0; j < 8; ++j) {
    CAPTURE(j);
    const auto& pr = rep.pairs[j];
    const double w = std::pow(10000.0, -2.0 * static_cast<double>(j) / 16.0);
    if (j < 4) {
      REQUIRE_THAT(pr.inv_freq_before, WithinRel(w, 1e-14));
      REQUIRE_THAT(pr.ratio, WithinRel(2.0, 1e-14));
      REQUIRE(pr.scaling == RopePairScaling::kInterpolated);
    } else {
      REQUIRE(pr.inv_freq_before == 0.0);
      REQUIRE(pr.inv_freq_after == 0.0);
      REQUIRE(pr.ratio == 1.0);
      REQUIRE(std::isinf(pr.wavelength_after));
      REQUIRE(pr.scaling == RopePairScaling::kKept);
      REQUIRE(pr.range == posenc::RopePairRange::kWithinTraining);
    }
  }
  // Gemma-4 itself: factor 1, no original length. Judged as unscaled RoPE, without the
  // "no original_max_position_embeddings" guess (factor 1 has nothing to divide).
  p.scaling.factor = 1.0;
  const auto g4 = posenc::analyze_rope_length(p, 8192);
  REQUIRE(any_contains(g4.warnings, "every pair is used unscaled beyond the training length 4096"));
  REQUIRE(!any_contains(g4.warnings, "gives no original_max_position_embeddings"));
  REQUIRE(!any_contains(posenc::analyze_rope_length(p, 4096).warnings, "unscaled beyond"));
}

TEST_CASE("diagnostics: position_ids from a left-padded mask", "[diagnostics][positions]") {
  const std::vector<std::uint8_t> mask = {0, 0, 1, 1, 1,  //
                                          1, 1, 1, 1, 1};
  const posenc::ConstTensorView<std::uint8_t, 2> m(mask.data(), 2, 5);
  const auto pos = posenc::position_ids_from_mask(m);
  const std::int64_t want[2][5] = {{0, 0, 0, 1, 2}, {0, 1, 2, 3, 4}};
  for (int b = 0; b < 2; ++b) {
    for (int s = 0; s < 5; ++s) REQUIRE(pos(b, s) == want[b][s]);
  }
  const auto hf = posenc::position_ids_from_mask(m, 1);  // HF's masked_fill_(mask == 0, 1)
  REQUIRE(hf(0, 0) == 1);
  REQUIRE(hf(0, 1) == 1);
  REQUIRE(hf(0, 2) == 0);
  std::vector<std::int64_t> small(4);
  REQUIRE_THROWS_WITH(posenc::position_ids_from_mask(m, -1), Contains("pad_value = -1 must be >= 0"));
  REQUIRE_THROWS_WITH(posenc::position_ids_from_mask(
                          m, posenc::TensorView<std::int64_t, 2>(small.data(), 2, 2)),
                      Contains("out shape"));
}

TEST_CASE("diagnostics: validate_position_ids finds the seed's mistakes",
          "[diagnostics][positions]") {
  SECTION("non-monotonic and beyond length") {
    const std::vector<std::int64_t> ids = {0, 1, 2, 2, 5};
    posenc::PositionCheckOptions o;
    o.max_length = 4;
    const auto rep = posenc::validate_position_ids(posenc::PositionIdsView(ids.data(), 1, 5), o);
    REQUIRE(rep.issues.size() == 2);
    REQUIRE(rep.issues[0].kind == posenc::PositionIssueKind::kNonMonotonic);
    REQUIRE(rep.issues[0].index == 3);
    REQUIRE(rep.issues[1].kind == posenc::PositionIssueKind::kBeyondLength);
    REQUIRE(rep.issues[1].value == 5);
  }
  SECTION("a shared arange over a left-padded batch") {
    const std::vector<std::int64_t> ids = {0, 1, 2, 3, 0, 1, 2, 3};
    const std::vector<std::uint8_t> mask = {0, 1, 1, 1, 1, 1, 1, 1};
    posenc::PositionCheckOptions o;
    o.attention_mask = posenc::ConstTensorView<std::uint8_t, 2>(mask.data(), 2, 4);
    const auto rep = posenc::validate_position_ids(posenc::PositionIdsView(ids.data(), 2, 4), o);
    REQUIRE(rep.issues.size() == 1);
    REQUIRE(rep.issues[0].kind == posenc::PositionIssueKind::kSharedRow);
    REQUIRE_THAT(rep.issues[0].message, Contains("rows 0 and 1"));
    // Built per row from the mask instead: no issue.
    const auto fixed = posenc::position_ids_from_mask(*o.attention_mask);
    REQUIRE(posenc::validate_position_ids(posenc::PositionIdsView(fixed.data(), 2, 4), o).ok());
  }
  SECTION("packed sequences may restart at zero when allowed") {
    const std::vector<std::int64_t> ids = {0, 1, 2, 0, 1};
    const posenc::PositionIdsView v(ids.data(), 1, 5);
    REQUIRE(!posenc::validate_position_ids(v).ok());
    posenc::PositionCheckOptions o;
    o.allow_restart_at_zero = true;
    REQUIRE(posenc::validate_position_ids(v, o).ok());
  }
  SECTION("each rule at its boundary") {
    // Negative: -1 is, 0 is not. Beyond length: p == max_length is (positions 0 .. L - 1).
    // A restart is allowed to 0 only, not to any smaller position.
    const std::vector<std::int64_t> ids = {-1, 0, 1, 2, 3};
    posenc::PositionCheckOptions o;
    o.max_length = 3;
    const auto rep = posenc::validate_position_ids(posenc::PositionIdsView(ids.data(), 1, 5), o);
    REQUIRE(rep.issues.size() == 2);
    CHECK(rep.issues[0].kind == posenc::PositionIssueKind::kNegative);
    CHECK(rep.issues[0].index == 0);
    CHECK(rep.issues[0].value == -1);
    CHECK(rep.issues[1].kind == posenc::PositionIssueKind::kBeyondLength);
    CHECK(rep.issues[1].index == 4);
    const std::vector<std::int64_t> restart = {0, 1, 2, 1};
    posenc::PositionCheckOptions packed;
    packed.allow_restart_at_zero = true;
    const auto r2 =
        posenc::validate_position_ids(posenc::PositionIdsView(restart.data(), 1, 4), packed);
    REQUIRE(r2.issues.size() == 1);
    CHECK(r2.issues[0].kind == posenc::PositionIssueKind::kNonMonotonic);
    CHECK(r2.issues[0].index == 3);
  }
  SECTION("a shared row between two rows past the first") {
    // Row 0 has its own positions; rows 1 and 2 share an arange but not their padding.
    const std::vector<std::int64_t> ids = {5, 6, 7, 0, 1, 2, 0, 1, 2};
    const std::vector<std::uint8_t> mask = {1, 1, 1, 1, 1, 1, 0, 1, 1};
    posenc::PositionCheckOptions o;
    o.attention_mask = posenc::ConstTensorView<std::uint8_t, 2>(mask.data(), 3, 3);
    const auto rep = posenc::validate_position_ids(posenc::PositionIdsView(ids.data(), 3, 3), o);
    REQUIRE(rep.issues.size() == 1);
    CHECK(rep.issues[0].kind == posenc::PositionIssueKind::kSharedRow);
    CHECK_THAT(rep.issues[0].message, Contains("rows 1 and 2"));
  }
  SECTION("max_issues bounds the report") {
    const std::vector<std::int64_t> ids(10, 7);
    posenc::PositionCheckOptions o;
    o.max_issues = 3;
    const auto rep = posenc::validate_position_ids(posenc::PositionIdsView(ids.data(), 1, 10), o);
    REQUIRE(rep.issues.size() == 3);
    REQUIRE(rep.left_out == 6);
  }
}

TEST_CASE("diagnostics: prefill and token-by-token decode agree", "[diagnostics][decode]") {
  const Eigen::Index batch = 2, seq = 7, heads = 4, kv_heads = 2, d = 16;
  Rng rng{42};
  std::vector<float> q(static_cast<std::size_t>(batch * seq * heads * d));
  std::vector<float> k(static_cast<std::size_t>(batch * seq * kv_heads * d)), v(k.size());
  for (auto& x : q) x = rng.next();
  for (auto& x : k) x = rng.next();
  for (auto& x : v) x = rng.next();
  const posenc::ConstTensorView<float, 4> qv(q.data(), batch, seq, heads, d);
  const posenc::ConstTensorView<float, 4> kv(k.data(), batch, seq, kv_heads, d);
  const posenc::ConstTensorView<float, 4> vv(v.data(), batch, seq, kv_heads, d);
  posenc::RopeParams rp;
  rp.head_dim = d;
  const auto freqs = posenc::compute_rope_frequencies(rp);

  SECTION("RoPE, GQA, default positions") {
    const auto rep = posenc::check_prefill_vs_decode<float>(qv, kv, vv, {}, freqs,
                                                            posenc::RopeLayout::kHalfSplit);
    REQUIRE(rep.max_abs_diff.size() == static_cast<std::size_t>(seq));
    REQUIRE(rep.worst < 1e-5);
  }
  SECTION("ALiBi with left padding and positions from the mask") {
    const std::vector<std::uint8_t> mask = {0, 0, 1, 1, 1, 1, 1,  //
                                            1, 1, 1, 1, 1, 1, 1};
    const posenc::ConstTensorView<std::uint8_t, 2> m(mask.data(), batch, seq);
    const auto pos = posenc::position_ids_from_mask(m);
    posenc::AttentionParams ap;
    ap.alibi_slopes = posenc::alibi_slopes(heads);
    const auto rep = posenc::check_prefill_vs_decode<float>(
        qv, kv, vv, ap, std::nullopt, posenc::RopeLayout::kHalfSplit,
        posenc::PositionIdsView(pos.data(), batch, seq), m);
    REQUIRE(rep.worst < 1e-5);
  }
  SECTION("positions that jump: ALiBi and chunks read them on both paths") {
    // Slots 0..6 at positions 0, 1, 2, 10, 11, 12, 13: ALiBi's -m (i - j) and Llama-4's chunk
    // test floor(pos / C) depend on them, not on the slots; both paths must use them.
    const std::vector<std::int64_t> jump = {0, 1, 2, 10, 11, 12, 13, 0, 1, 2, 10, 11, 12, 13};
    const posenc::PositionIdsView pv(jump.data(), batch, seq);
    posenc::AttentionParams alibi;
    alibi.alibi_slopes = posenc::alibi_slopes(heads);
    CHECK(posenc::check_prefill_vs_decode<float>(qv, kv, vv, alibi, std::nullopt,
                                                 posenc::RopeLayout::kHalfSplit, pv)
              .worst < 1e-5);
    posenc::AttentionParams chunked;
    chunked.attention_chunk_size = 4;
    CHECK(posenc::check_prefill_vs_decode<float>(qv, kv, vv, chunked, freqs,
                                                 posenc::RopeLayout::kHalfSplit, pv)
              .worst < 1e-5);
  }
  SECTION("a NaN step is the worst one, reported as infinity at its step") {
    std::vector<float> qn = q;
    for (Eigen::Index i = 0; i < d; ++i) {
      qn[static_cast<std::size_t>(3 * heads * d + i)] = std::numeric_limits<float>::quiet_NaN();
    }
    const auto rep = posenc::check_prefill_vs_decode<float>(
        posenc::ConstTensorView<float, 4>(qn.data(), batch, seq, heads, d), kv, vv, {}, freqs);
    CHECK(std::isinf(rep.worst));
    CHECK(rep.worst_step == 3);
    CHECK(rep.max_abs_diff[2] < 1e-5);
  }
  SECTION("a bidirectional mask is rejected") {
    posenc::AttentionParams ap;
    ap.mask = posenc::MaskMode::kBidirectional;
    REQUIRE_THROWS_WITH(posenc::check_prefill_vs_decode<float>(qv, kv, vv, ap, freqs),
                        Contains("causal"));
  }
  SECTION("a v of the wrong shape is a shape error, not an allocation of its extents") {
    // v [batch, 0, kv_heads, 2^40]: the output buffer sized from it asked for 8 TiB (or
    // overflowed at 2^62) before the shapes were checked.
    const posenc::ConstTensorView<float, 4> bad_v(v.data(), batch, 0, kv_heads,
                                                  Eigen::Index{1} << 40);
    REQUIRE_THROWS_AS(posenc::check_prefill_vs_decode<float>(qv, kv, bad_v, {}, freqs),
                      std::invalid_argument);
    REQUIRE_THROWS_WITH(posenc::check_prefill_vs_decode<float>(qv, kv, bad_v, {}, freqs),
                        Contains("v shape [2, 0, 2, 1099511627776]"));
  }
}

TEST_CASE("diagnostics: a sliding window caps the judged distance", "[diagnostics][length]") {
  posenc::RopeParams p;
  p.head_dim = 128;
  p.max_position_embeddings = 2048;
  // Unscaled at 8192 with a 1024-token window: distances < 1024 <= L0, all within training.
  const auto rep = posenc::analyze_rope_length(p, 8192, 1024);
  REQUIRE(rep.unseen_pairs == 0);
  for (const auto& pr : rep.pairs) REQUIRE(pr.range == RopePairRange::kWithinTraining);
  REQUIRE(any_contains(rep.warnings, "sliding window 1024"));
  // Without the window the same call finds the 23 slow pairs of the Llama-2 case.
  REQUIRE(posenc::analyze_rope_length(p, 8192).unseen_pairs == 23);
  REQUIRE_THROWS_WITH(posenc::analyze_rope_length(p, 8192, -1), Contains("window"));
}

TEST_CASE("diagnostics: linear scaling without an original length says what it assumed",
          "[diagnostics][length]") {
  posenc::RopeParams p;
  p.head_dim = 8;
  p.max_position_embeddings = 131072;
  p.scaling.type = posenc::RopeScalingType::kLinear;
  p.scaling.factor = 8.0;
  const auto rep = posenc::analyze_rope_length(p, 32768);
  REQUIRE(rep.trained_length == 131072);
  REQUIRE(any_contains(rep.warnings, "pre-training was about 16384"));  // 131072 / 8
}

TEST_CASE("diagnostics: lengths at their limits and a window longer than the target",
          "[diagnostics][length]") {
  posenc::RopeParams p;
  p.head_dim = 128;
  p.max_position_embeddings = 2048;
  // A target of exactly max_position_embeddings (or of the window) is accepted silently.
  const auto at_max = posenc::analyze_rope_length(p, 2048, 2048);
  CHECK(!any_contains(at_max.warnings, "exceeds max_position_embeddings"));
  CHECK(!any_contains(at_max.warnings, "sliding window"));
  CHECK(any_contains(posenc::analyze_rope_length(p, 2049).warnings,
                     "exceeds max_position_embeddings"));
  // A window past the target caps nothing: distances stay < 1000 <= L0, all within training.
  const auto wide = posenc::analyze_rope_length(p, 1000, 4096);
  CHECK(wide.unseen_pairs == 0);
  for (const auto& pr : wide.pairs) CHECK(pr.range == RopePairRange::kWithinTraining);
  CHECK(wide.warnings == posenc::analyze_rope_length(p, 1000).warnings);
  // Positions are exact doubles up to 2^53 itself.
  const std::int64_t two53 = std::int64_t{1} << 53;
  CHECK(!any_contains(posenc::analyze_rope_length(p, two53).warnings, "exceeds 2^53"));
  CHECK(any_contains(posenc::analyze_rope_length(p, two53 + 1).warnings, "exceeds 2^53"));
}

TEST_CASE("diagnostics: periods in training and the factor of each recipe",
          "[diagnostics][length]") {
  // periods_in_training = L0 / (2 pi / theta^(-2j/d)) with the UNSCALED frequency.
  const auto rep = posenc::analyze_rope_length(llama31(), 131072);
  const long double pi = 3.141592653589793238462643383279503L;
  for (std::size_t j = 0; j < rep.pairs.size(); ++j) {
    CAPTURE(j);
    const long double w = std::pow(500000.0L, -2.0L * static_cast<long double>(j) / 128.0L);
    CHECK_THAT(rep.pairs[j].periods_in_training,
               WithinRel(static_cast<double>(8192.0L * w / (2.0L * pi)), 1e-12));
  }
  // Plain RoPE applies no factor, whatever a stray rope_scaling factor says.
  posenc::RopeParams plain;
  plain.head_dim = 8;
  plain.max_position_embeddings = 4096;
  plain.scaling.factor = 4.0;
  const auto p1 = posenc::analyze_rope_length(plain, 100);
  CHECK(p1.factor == 1.0);
  CHECK(p1.covered_length == 4096.0);
  // LongRoPE without max_position_embeddings keeps the config's factor.
  posenc::RopeParams lr;
  lr.head_dim = 8;
  lr.scaling.type = posenc::RopeScalingType::kLongRope;
  lr.scaling.factor = 4.0;
  lr.scaling.original_max_position_embeddings = 4096;
  lr.scaling.short_factor = {1, 1, 1, 1};
  lr.scaling.long_factor = {1, 2, 4, 4};
  const auto p2 = posenc::analyze_rope_length(lr, 8192);
  CHECK(p2.factor == 4.0);
  CHECK(p2.covered_length == 16384.0);
}

TEST_CASE("diagnostics: validate_position_ids compares rows by padding, not mask values",
          "[diagnostics][positions]") {
  const std::vector<std::int64_t> pos = {0, 0, 1, 2, 0, 0, 1, 2};
  const posenc::PositionIdsView pv(pos.data(), 2, 4);
  // Same positions, same padding (1 and 2 are both "real"): nothing shared by mistake.
  const std::vector<std::uint8_t> same = {0, 1, 1, 1, 0, 2, 2, 1};
  posenc::PositionCheckOptions opt;
  opt.attention_mask = posenc::ConstTensorView<std::uint8_t, 2>(same.data(), 2, 4);
  CHECK(posenc::validate_position_ids(pv, opt).ok());
  // A mask whose batch differs from the positions' is a shape error.
  opt.attention_mask = posenc::ConstTensorView<std::uint8_t, 2>(same.data(), 1, 4);
  REQUIRE_THROWS_WITH(posenc::validate_position_ids(pv, opt),
                      Contains("attention_mask shape [1, 4]"));
}

TEST_CASE("diagnostics: check_prefill_vs_decode shape errors and a report with no difference",
          "[diagnostics][decode]") {
  const Eigen::Index batch = 2, seq = 5, heads = 2, d = 8;
  Rng rng{7};
  std::vector<float> q(static_cast<std::size_t>(batch * seq * heads * d)), k(q.size());
  for (auto& x : q) x = rng.next();
  for (auto& x : k) x = rng.next();
  const std::vector<float> zeros(q.size(), 0.0f);
  const posenc::ConstTensorView<float, 4> qv(q.data(), batch, seq, heads, d);
  const posenc::ConstTensorView<float, 4> kv(k.data(), batch, seq, heads, d);
  const posenc::ConstTensorView<float, 4> v0(zeros.data(), batch, seq, heads, d);
  // V = 0: both paths output exactly 0 at every step, so no step is worse than step 0.
  const auto rep = posenc::check_prefill_vs_decode<float>(qv, kv, v0, {}, std::nullopt);
  CHECK(rep.worst == 0.0);
  CHECK(rep.worst_step == 0);
  // Keys of a different length than the queries are not a prefill of the same tokens.
  REQUIRE_THROWS_WITH(posenc::check_prefill_vs_decode<float>(
                          posenc::ConstTensorView<float, 4>(q.data(), batch, seq - 1, heads, d),
                          posenc::ConstTensorView<float, 4>(k.data(), batch, seq, heads, d), v0, {},
                          std::nullopt),
                      Contains("k seq = 5 must equal q seq = 4"));
  // A valid mask of the wrong batch.
  const std::vector<std::uint8_t> valid(static_cast<std::size_t>(seq), 1);
  const posenc::ConstTensorView<std::uint8_t, 2> one_row(valid.data(), 1, seq);
  REQUIRE_THROWS_WITH(posenc::check_prefill_vs_decode<float>(
                          qv, kv, v0, {}, std::nullopt, posenc::RopeLayout::kHalfSplit,
                          std::nullopt, one_row),
                      Contains("valid shape [1, 5]"));
}

TEST_CASE("diagnostics: no training length, no covered-length or unscaled-use warning",
          "[diagnostics][length]") {
  // Without L0 nothing can be judged against training: only the "no training length" warning.
  posenc::RopeParams p;
  p.head_dim = 8;
  const auto rep = posenc::analyze_rope_length(p, 100);
  CHECK(rep.trained_length == 0);
  CHECK(any_contains(rep.warnings, "no training length"));
  CHECK(!any_contains(rep.warnings, "exceeds the length covered by training"));
  CHECK(!any_contains(rep.warnings, "unscaled beyond the training length"));
}

TEST_CASE("diagnostics: validate_position_ids treats any nonzero mask entry as a real token",
          "[diagnostics][positions]") {
  // Mask 0 = padding; 2 is a real token, so position 0 after position 0 does not grow.
  const std::vector<std::int64_t> pos = {0, 0, 1};
  const std::vector<std::uint8_t> mask = {1, 2, 1};
  posenc::PositionCheckOptions opt;
  opt.attention_mask = posenc::ConstTensorView<std::uint8_t, 2>(mask.data(), 1, 3);
  const auto rep = posenc::validate_position_ids(posenc::PositionIdsView(pos.data(), 1, 3), opt);
  REQUIRE(rep.issues.size() == 1);
  CHECK(rep.issues[0].kind == posenc::PositionIssueKind::kNonMonotonic);
  CHECK(rep.issues[0].index == 1);
}
