// Llama-4's attention temperature tuning on NoPE layers: q * (1 + attn_scale ln(1 +
// floor((pos + 1) / floor_scale))). Expected values are that closed form in long double, and
// the step positions worked out by hand (8191 = 8192 - 1 is the first position whose
// (pos + 1) / 8192 reaches 1).

#include <catch2/catch.hpp>

#include <posenc/attention.hpp>
#include <posenc/attention_temperature.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "support/attention_ld.hpp"
#include "support/rng.hpp"

using Catch::Matchers::Contains;
using posenc::AttentionTemperature;
using posenc::PositionIdsView;
using posenc::TensorView;

namespace {

long double closed_form(std::int64_t pos, long double floor_scale = 8192.0L,
                        long double attn_scale = 0.1L) {
  return 1.0L + attn_scale * std::log(1.0L + std::floor((static_cast<long double>(pos) + 1.0L) / floor_scale));
}

}  // namespace

TEST_CASE("attention temperature: the steps of Llama-4's factor", "[attention][temperature]") {
  using posenc::attention_temperature;
  REQUIRE(attention_temperature(0) == 1.0);
  REQUIRE(attention_temperature(8190) == 1.0);
  // From 8191 on: 1 + 0.1 ln 2; from 16383 on: 1 + 0.1 ln 3.
  const long double ln2 = std::log(2.0L), ln3 = std::log(3.0L);
  REQUIRE(std::abs(attention_temperature(8191) - static_cast<double>(1.0L + 0.1L * ln2)) < 1e-15);
  REQUIRE(std::abs(attention_temperature(16382) - static_cast<double>(1.0L + 0.1L * ln2)) < 1e-15);
  REQUIRE(std::abs(attention_temperature(16383) - static_cast<double>(1.0L + 0.1L * ln3)) < 1e-15);
  // A 10M-token context (Scout's advertised length): floor(10^7 / 8192) = 1220.
  REQUIRE(std::abs(attention_temperature(9'999'999) -
                   static_cast<double>(1.0L + 0.1L * std::log(1221.0L))) < 1e-15);
  for (const std::int64_t pos : {std::int64_t{1}, std::int64_t{4095}, std::int64_t{131071},
                                 std::int64_t{1} << 40, std::int64_t{1} << 53}) {
    CAPTURE(pos);
    REQUIRE(std::abs(attention_temperature(pos) - static_cast<double>(closed_form(pos))) < 1e-14);
  }
  const AttentionTemperature other{100.0, 0.25};
  REQUIRE(std::abs(attention_temperature(1234, other) -
                   static_cast<double>(closed_form(1234, 100.0L, 0.25L))) < 1e-15);
}

TEMPLATE_TEST_CASE("attention temperature: queries scaled per position in place",
                   "[attention][temperature]", float, double, Eigen::half, Eigen::bfloat16) {
  using T = TestType;
  constexpr Eigen::Index batch = 2, seq = 5, heads = 3, d = 8;
  const auto before = posenc_test::random_vector<T>(static_cast<std::size_t>(batch * seq * heads * d), 5);
  auto q = before;
  // Sequence 0 crosses the first step; sequence 1 sits in the millions (left padding would
  // give it small repeated positions instead: any positions work).
  const std::vector<std::int64_t> pos{8188, 8189, 8190, 8191, 8192, 0, 0, 1'000'000, 16383, 5'000'000};
  posenc::apply_attention_temperature_inplace<T>(TensorView<T, 4>(q.data(), batch, seq, heads, d),
                                                 PositionIdsView(pos.data(), batch, seq));
  double tol = 2.0 * std::numeric_limits<float>::epsilon();
  if constexpr (std::is_same_v<T, double>) tol = 1e-15;
  if constexpr (std::is_same_v<T, Eigen::half>) tol = 1.0 / 1024;
  if constexpr (std::is_same_v<T, Eigen::bfloat16>) tol = 1.0 / 128;
  for (Eigen::Index r = 0; r < batch * seq; ++r) {
    const long double t = closed_form(pos[static_cast<std::size_t>(r)]);
    for (Eigen::Index i = 0; i < heads * d; ++i) {
      const auto at = static_cast<std::size_t>(r * heads * d + i);
      const long double want = static_cast<long double>(posenc::detail::to_double(before[at])) * t;
      const double got = posenc::detail::to_double(q[at]);
      CAPTURE(r, i, got, static_cast<double>(want));
      REQUIRE(std::abs(got - static_cast<double>(want)) <= tol * std::abs(static_cast<double>(want)));
      // Below the first step (and at positions 0) the query is left exactly as it was.
      if (t == 1.0L) REQUIRE(got == posenc::detail::to_double(before[at]));
    }
  }
}

TEST_CASE("attention temperature: bad input is rejected before anything is written",
          "[attention][temperature][errors]") {
  std::vector<float> q(2 * 3 * 1 * 4, 1.5f);
  const std::vector<std::int64_t> pos{1, 2, 9000, 3, -4, 20000};
  const TensorView<float, 4> view(q.data(), 2, 3, 1, 4);
  REQUIRE_THROWS_WITH(posenc::apply_attention_temperature_inplace<float>(
                          view, PositionIdsView(pos.data(), 2, 3)),
                      Contains("positions[1, 1] = -4 must be in [0, 2^53]"));
  REQUIRE_THROWS_WITH(posenc::apply_attention_temperature_inplace<float>(
                          view, PositionIdsView(pos.data(), 3, 2)),
                      Contains("positions shape [3, 2] must be [batch, seq] = [2, 3]"));
  const std::vector<std::int64_t> good{1, 2, 9000, 3, 4, 20000};
  REQUIRE_THROWS_WITH(posenc::apply_attention_temperature_inplace<float>(
                          view, PositionIdsView(good.data(), 2, 3), AttentionTemperature{0.0, 0.1}),
                      Contains("floor_scale = 0 must be finite and > 0"));
  REQUIRE_THROWS_WITH(posenc::apply_attention_temperature_inplace<float>(
                          view, PositionIdsView(good.data(), 2, 3),
                          AttentionTemperature{8192.0, std::numeric_limits<double>::quiet_NaN()}),
                      Contains("attn_scale = nan must be finite"));
  // A negative slope made t < 1 (t(8191) = -5.9 for -10: a softmax scale below 0); a tiny
  // floor_scale or a huge slope made t(2^53) inf, or a float inf from a finite double (6.9e299
  // at 8191 for 1e299), and 0 * inf = NaN queries.
  const auto rejects = [&](AttentionTemperature t, const char* text) {
    CAPTURE(text);
    REQUIRE_THROWS_AS(posenc::apply_attention_temperature_inplace<float>(
                          view, PositionIdsView(good.data(), 2, 3), t),
                      std::invalid_argument);
    REQUIRE_THROWS_WITH(posenc::apply_attention_temperature_inplace<float>(
                            view, PositionIdsView(good.data(), 2, 3), t),
                        Contains(text));
  };
  rejects(AttentionTemperature{8192.0, -10.0}, "attn_scale = -10 must be finite and >= 0");
  rejects(AttentionTemperature{1e-310, 0.1}, "past float's range");
  rejects(AttentionTemperature{8192.0, 1e299}, "past float's range");
  rejects(AttentionTemperature{1e-310, 0.0}, "past float's range");  // 0 * log1p(inf) = NaN
  // The largest slope that keeps t(2^53) a float passes: t(2^53) = 1 + s ln(1 + 2^40).
  const double s_max = (static_cast<double>(std::numeric_limits<float>::max()) - 1.0) /
                       std::log1p(std::floor((0x1p53 + 1.0) / 8192.0)) * (1 - 1e-12);
  auto scratch = q;
  posenc::apply_attention_temperature_inplace<float>(
      TensorView<float, 4>(scratch.data(), 2, 3, 1, 4), PositionIdsView(good.data(), 2, 3),
      AttentionTemperature{8192.0, s_max});
  REQUIRE(std::all_of(q.begin(), q.end(), [](float e) { return e == 1.5f; }));
  REQUIRE_THROWS_AS(posenc::attention_temperature(-1), std::invalid_argument);
}

TEST_CASE("attention temperature: Grok-2's log2(pos) / log2(L) past L, by hand", "[attention][temperature][xai]") {
  AttentionTemperature t;
  t.form = posenc::TemperatureForm::kXai;
  t.temperature_len = 1024;
  // log2(2048) / log2(1024) = 11 / 10, log2(4096) / 10 = 12 / 10, log2(2^20) / 10 = 2.
  CHECK(posenc::attention_temperature(0, t) == 1.0);
  CHECK(posenc::attention_temperature(1024, t) == 1.0);  // pos > L starts the scaling
  CHECK_THAT(posenc::attention_temperature(1025, t), Catch::Matchers::WithinRel(static_cast<double>(std::log2(1025.0L) / 10.0L), 1e-15));
  CHECK_THAT(posenc::attention_temperature(2048, t), Catch::Matchers::WithinRel(1.1, 1e-15));
  CHECK_THAT(posenc::attention_temperature(4096, t), Catch::Matchers::WithinRel(1.2, 1e-15));
  CHECK_THAT(posenc::attention_temperature(std::int64_t{1} << 20, t), Catch::Matchers::WithinRel(2.0, 1e-15));
  t.temperature_len = 1;
  REQUIRE_THROWS_AS(posenc::attention_temperature(5, t), std::invalid_argument);
  REQUIRE_THROWS_WITH(posenc::attention_temperature(5, t), Contains("temperature_len = 1 must be >= 2"));
}

TEST_CASE("attention temperature: Grok-2's factor scales the logits before the soft cap, in the fused kernel",
          "[attention][temperature][xai]") {
  // One query at position 2048 (t = 1.1 exactly) over 6 keys: the same as the scale times 1.1
  // with no temperature; with Grok-2's soft cap 30 the cap sees the scaled logits. Keys at 0..4
  // and the query's own at 2048; values chosen large enough that the cap bites.
  const Eigen::Index K = 6, H = 2, D = 8;
  std::vector<float> q = posenc_test::random_vector<float>(static_cast<std::size_t>(H * D), 90);
  std::vector<float> k = posenc_test::random_vector<float>(static_cast<std::size_t>(K * H * D), 91);
  for (auto& x : q) x *= 40.0f;
  for (auto& x : k) x *= 4.0f;
  std::vector<std::int64_t> kpos = {0, 1, 2, 3, 4, 2048};
  const std::int64_t qpos[1] = {2048};
  posenc::AttentionMetadata meta;
  meta.query_positions = PositionIdsView(qpos, 1, 1);
  meta.key_positions = PositionIdsView(kpos.data(), 1, K);
  const posenc::ConstTensorView<float, 4> qv(q.data(), 1, 1, H, D), kv(k.data(), 1, K, H, D);
  for (const double cap : {0.0, 30.0}) {
    CAPTURE(cap);
    posenc::AttentionParams tempered, scaled;
    tempered.logit_softcap = scaled.logit_softcap = cap;
    tempered.query_temperature = AttentionTemperature{};
    tempered.query_temperature->form = posenc::TemperatureForm::kXai;
    tempered.query_temperature->temperature_len = 1024;
    scaled.scale = 1.1 / std::sqrt(static_cast<double>(D));
    std::vector<float> a(static_cast<std::size_t>(H * D)), b(a.size()), plain(a.size());
    posenc::attention<float>(qv, kv, kv, TensorView<float, 4>(a.data(), 1, 1, H, D), tempered, meta);
    posenc::attention<float>(qv, kv, kv, TensorView<float, 4>(b.data(), 1, 1, H, D), scaled, meta);
    posenc::AttentionParams none;
    none.logit_softcap = cap;
    posenc::attention<float>(qv, kv, kv, TensorView<float, 4>(plain.data(), 1, 1, H, D), none, meta);
    double moved = 0.0;
    for (std::size_t i = 0; i < a.size(); ++i) {
      CAPTURE(i);
      REQUIRE_THAT(a[i], Catch::Matchers::WithinAbs(b[i], 1e-5));
      moved = std::max(moved, static_cast<double>(std::abs(a[i] - plain[i])));
    }
    REQUIRE(moved > 1e-3);  // the temperature does something here
  }
}

TEST_CASE("attention temperature: Mistral-3's llama_4_scaling steps at pos / L0, one position after Llama-4's",
          "[attention][temperature][mistral3]") {
  // Ministral-3: beta 0.1, L0 16384. floor(pos / 16384) is 0 up to 16383, 1 from 16384, 2 from
  // 32768, 15 at 262143 (the 256k context): t = 1, 1 + 0.1 ln 2, 1 + 0.1 ln 3, 1 + 0.1 ln 16.
  AttentionTemperature m;
  m.form = posenc::TemperatureForm::kMistral3;
  m.floor_scale = 16384.0;
  m.attn_scale = 0.1;
  const long double ln2 = std::log(2.0L), ln3 = std::log(3.0L), ln16 = std::log(16.0L);
  CHECK(posenc::attention_temperature(0, m) == 1.0);
  CHECK(posenc::attention_temperature(16383, m) == 1.0);
  CHECK_THAT(posenc::attention_temperature(16384, m), Catch::Matchers::WithinRel(static_cast<double>(1.0L + 0.1L * ln2), 1e-15));
  CHECK_THAT(posenc::attention_temperature(32767, m), Catch::Matchers::WithinRel(static_cast<double>(1.0L + 0.1L * ln2), 1e-15));
  CHECK_THAT(posenc::attention_temperature(32768, m), Catch::Matchers::WithinRel(static_cast<double>(1.0L + 0.1L * ln3), 1e-15));
  CHECK_THAT(posenc::attention_temperature(262143, m), Catch::Matchers::WithinRel(static_cast<double>(1.0L + 0.1L * ln16), 1e-15));
  // Llama-4's form with the same constants already steps at 16383 ((16383 + 1) / 16384 = 1).
  AttentionTemperature llama = m;
  llama.form = posenc::TemperatureForm::kLlama4;
  CHECK_THAT(posenc::attention_temperature(16383, llama), Catch::Matchers::WithinRel(static_cast<double>(1.0L + 0.1L * ln2), 1e-15));
  CHECK(posenc::to_string(posenc::TemperatureForm::kMistral3) == "mistral3");
  m.floor_scale = 0.0;
  REQUIRE_THROWS_WITH(posenc::attention_temperature(5, m), Contains("floor_scale = 0 must be finite and > 0"));
}

TEST_CASE("attention temperature: Mistral-3's factor in the fused kernel, queries either side of the step",
          "[attention][temperature][mistral3]") {
  // Two queries at positions 16383 (t = 1) and 16384 (t = 1 + 0.1 ln 2) over keys at 0, 1, 2,
  // 16383, 16384; expected: softmax(t scale q.k) V over the keys at or before the query,
  // written out in long double.
  const Eigen::Index Q = 2, K = 5, H = 2, D = 8;
  std::vector<float> q = posenc_test::random_vector<float>(static_cast<std::size_t>(Q * H * D), 92);
  std::vector<float> k = posenc_test::random_vector<float>(static_cast<std::size_t>(K * H * D), 93);
  std::vector<float> v = posenc_test::random_vector<float>(static_cast<std::size_t>(K * H * D), 94);
  for (auto& x : q) x *= 6.0f;
  const std::int64_t qpos[Q] = {16383, 16384};
  const std::int64_t kpos[K] = {0, 1, 2, 16383, 16384};
  posenc::AttentionMetadata meta;
  meta.query_positions = PositionIdsView(qpos, 1, Q);
  meta.key_positions = PositionIdsView(kpos, 1, K);
  posenc::AttentionParams p;
  p.query_temperature = AttentionTemperature{16384.0, 0.1, posenc::TemperatureForm::kMistral3, 0};
  std::vector<float> out(static_cast<std::size_t>(Q * H * D));
  posenc::attention<float>(posenc::ConstTensorView<float, 4>(q.data(), 1, Q, H, D),
                           posenc::ConstTensorView<float, 4>(k.data(), 1, K, H, D),
                           posenc::ConstTensorView<float, 4>(v.data(), 1, K, H, D),
                           TensorView<float, 4>(out.data(), 1, Q, H, D), p, meta);
  const long double temps[Q] = {1.0L, 1.0L + 0.1L * std::log(2.0L)};
  for (Eigen::Index i = 0; i < Q; ++i) {
    std::vector<Eigen::Index> keys;
    for (Eigen::Index j = 0; j < K; ++j) {
      if (kpos[j] <= qpos[i]) keys.push_back(j);
    }
    for (Eigen::Index h = 0; h < H; ++h) {
      const auto expect = posenc_test::attend_ld(q.data() + (i * H + h) * D, k.data() + h * D, v.data() + h * D, H * D, D,
                                                 keys, {}, temps[i] / std::sqrt(static_cast<long double>(D)));
      for (Eigen::Index c = 0; c < D; ++c) {
        CAPTURE(i, h, c);
        REQUIRE_THAT(out[static_cast<std::size_t>((i * H + h) * D + c)],
                     Catch::Matchers::WithinAbs(static_cast<double>(expect[static_cast<std::size_t>(c)]), 1e-5));
      }
    }
  }
}
