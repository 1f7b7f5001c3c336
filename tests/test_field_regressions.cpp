// Bugs that users of other systems reported (../shared/design/field.md §3), each as the failure
// scenario it was found in, run against posenc. Expected values come from the formulas re-derived
// by hand (long double), posenc::reference (long-double rotation, materialised double attention),
// or bit-for-bit comparison with the untouched input. The README's "Bugs others shipped" table
// maps every field.md item to the test that covers it; this file holds the ones no other test
// exercised in the reported form.

#include <catch2/catch.hpp>

#include <posenc/attention.hpp>
#include <posenc/kv_cache.hpp>
#include <posenc/paged_kv_cache.hpp>
#include <posenc/reference/attention.hpp>
#include <posenc/reference/rope.hpp>
#include <posenc/rope.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "support/check.hpp"
#include "support/rng.hpp"

namespace {

using posenc::RopeLayout;
using posenc::RopeScalingType;
using Catch::Matchers::Contains;
using Catch::Matchers::WithinRel;

/// g(s, m) = 0.1 m ln s + 1 (s > 1): YaRN's magnitude correction (HF get_mscale).
long double yarn_g(long double s, long double m) { return 0.1L * m * std::log(s) + 1.0L; }

/// DeepSeek-V3's rope_scaling (config.json): yarn, factor 40, L0 4096, mscale = mscale_all_dim = 1.
posenc::RopeScaling deepseek_v3_yarn() {
  posenc::RopeScaling s;
  s.type = RopeScalingType::kYarn;
  s.factor = 40.0;
  s.original_max_position_embeddings = 4096;
  s.beta_fast = 32.0;
  s.beta_slow = 1.0;
  s.mscale = 1.0;
  s.mscale_all_dim = 1.0;
  return s;
}

}  // namespace

TEST_CASE("field vllm#52665: dynamic NTK below the trained length keeps the default base",
          "[field][rope][dynamic]") {
  // HF's formula base * (s L / L0 - (s - 1))^(d / (d - 2)) with L = seq_len < L0 takes a
  // negative number to a fractional power (NaN, or ~1e38 in vLLM's complex arithmetic);
  // L = max(seq_len, L0) keeps the default base for every length the model was trained on.
  posenc::RopeParams p;
  p.head_dim = 128;
  p.theta = 10000.0;
  p.max_position_embeddings = 4096;
  p.scaling.type = RopeScalingType::kDynamic;
  p.scaling.factor = 8.0;
  for (const std::int64_t seq_len : {std::int64_t{1}, std::int64_t{100}, std::int64_t{2048},
                                     std::int64_t{4095}, std::int64_t{4096}}) {
    CAPTURE(seq_len);
    const auto f = posenc::compute_rope_frequencies(p, seq_len);
    REQUIRE(f.inv_freq.size() == 64);
    for (std::size_t j = 0; j < f.inv_freq.size(); ++j) {
      const long double want = std::pow(10000.0L, -2.0L * static_cast<long double>(j) / 128.0L);
      REQUIRE(std::isfinite(f.inv_freq[j]));
      REQUIRE_THAT(f.inv_freq[j], WithinRel(static_cast<double>(want), 1e-14));
    }
  }
  // An engine that reports short sequences every step never sees the plan change.
  posenc::RopePlan plan(p);
  for (const std::int64_t seq_len : {1, 17, 4095, 4096}) REQUIRE_FALSE(plan.update(seq_len));
}

TEST_CASE("field vllm#48623 / transformers#47435: YaRN with mscale != mscale_all_dim",
          "[field][rope][yarn]") {
  // attention_factor = g(s, mscale) / g(s, mscale_all_dim) when both are non-zero (HF
  // _compute_yarn_parameters), the softmax scale multiplier g(s, mscale_all_dim)^2 (DeepSeek's
  // attention). Both orders, so a swapped ratio fails; the cos / sin reach the outputs scaled.
  posenc::RopeParams p;
  p.head_dim = 64;
  p.theta = 10000.0;
  p.scaling.type = RopeScalingType::kYarn;
  p.scaling.factor = 16.0;
  p.scaling.original_max_position_embeddings = 4096;
  for (const auto& [mscale, all_dim] : {std::pair{1.0, 0.5}, std::pair{0.5, 1.0},
                                        std::pair{0.707, 1.3}}) {
    CAPTURE(mscale, all_dim);
    p.scaling.mscale = mscale;
    p.scaling.mscale_all_dim = all_dim;
    const auto f = posenc::compute_rope_frequencies(p);
    const long double want_af = yarn_g(16.0L, mscale) / yarn_g(16.0L, all_dim);
    const long double want_mult = yarn_g(16.0L, all_dim) * yarn_g(16.0L, all_dim);
    REQUIRE_THAT(f.attention_factor, WithinRel(static_cast<double>(want_af), 1e-15));
    REQUIRE_THAT(f.softmax_scale_multiplier, WithinRel(static_cast<double>(want_mult), 1e-15));

    // Position 0 rotates by nothing: the output is the input times the attention factor.
    std::vector<float> x = posenc_test::random_vector<float>(64, 7);
    const std::vector<float> x0 = x;
    const std::int64_t zero = 0;
    posenc::apply_rope_inplace(posenc::TensorView<float, 4>(x.data(), 1, 1, 1, 64),
                               posenc::PositionIdsView(&zero, 1, 1), f, RopeLayout::kHalfSplit);
    for (std::size_t i = 0; i < x.size(); ++i) {
      REQUIRE_THAT(x[i], WithinRel(static_cast<float>(x0[i] * want_af), 1e-6f));
    }
  }
}

TEST_CASE("field transformers#47435 / flash-attention#862: KV-cache decode uses the plan's "
          "softmax multiplier and the layout it was given",
          "[field][kv_cache][paged][rope]") {
  // DeepSeek-V3's YaRN: cos / sin factor 1, softmax multiplier (0.1 ln 40 + 1)^2 ~ 1.87. A cache
  // that drops the multiplier, or rotates queries or keys in another pair layout than the one
  // it was given, gives different weights. Reference: keys and the query rotated in long double
  // at their positions, then materialised attention with the scale written out by hand.
  constexpr Eigen::Index n = 9, kv_heads = 2, heads = 4, d = 16;
  posenc::RopeParams p;
  p.head_dim = d;
  p.theta = 10000.0;
  p.scaling = deepseek_v3_yarn();
  const auto freqs = posenc::compute_rope_frequencies(p);
  const auto inv_freq = posenc::reference::rope_frequencies(p).inv_freq;
  const long double mult = yarn_g(40.0L, 1.0L) * yarn_g(40.0L, 1.0L);

  // Scores of order 1-3 so that a factor 1.87 in the scale moves the weights visibly.
  auto k = posenc_test::random_vector<float>(n * kv_heads * d, 11);
  auto v = posenc_test::random_vector<float>(n * kv_heads * d, 12);
  auto q = posenc_test::random_vector<float>(heads * d, 13);
  for (auto& x : q) x *= 2.0f;
  std::vector<std::int64_t> pos(n);
  for (Eigen::Index i = 0; i < n; ++i) pos[static_cast<std::size_t>(i)] = i;

  const auto layout = GENERATE(RopeLayout::kHalfSplit, RopeLayout::kInterleaved);
  CAPTURE(posenc::to_string(layout));
  std::vector<double> k_rot(k.size()), q_rot(q.size()), v_d(v.begin(), v.end());
  for (Eigen::Index j = 0; j < n; ++j) {
    for (Eigen::Index g = 0; g < kv_heads; ++g) {
      const auto y = posenc::reference::rope_vector(k.data() + (j * kv_heads + g) * d, d, j,
                                                    inv_freq, 1.0L, 0, layout);
      for (Eigen::Index c = 0; c < d; ++c) {
        k_rot[static_cast<std::size_t>((j * kv_heads + g) * d + c)] =
            static_cast<double>(y[static_cast<std::size_t>(c)]);
      }
    }
  }
  for (Eigen::Index h = 0; h < heads; ++h) {
    const auto y =
        posenc::reference::rope_vector(q.data() + h * d, d, n - 1, inv_freq, 1.0L, 0, layout);
    for (Eigen::Index c = 0; c < d; ++c) {
      q_rot[static_cast<std::size_t>(h * d + c)] = static_cast<double>(y[static_cast<std::size_t>(c)]);
    }
  }
  std::vector<double> ref(q.size()), plain(q.size());
  posenc::AttentionParams ref_params;
  ref_params.scale = static_cast<double>(mult / std::sqrt(static_cast<long double>(d)));
  posenc::reference::attention<double>({q_rot.data(), 1, 1, heads, d}, {k_rot.data(), 1, n, kv_heads, d},
                                       {v_d.data(), 1, n, kv_heads, d},
                                       {ref.data(), 1, 1, heads, d}, ref_params);
  // The same without the multiplier, to show the check can tell the two apart.
  posenc::reference::attention<double>({q_rot.data(), 1, 1, heads, d}, {k_rot.data(), 1, n, kv_heads, d},
                                       {v_d.data(), 1, n, kv_heads, d},
                                       {plain.data(), 1, 1, heads, d});
  double gap = 0.0;
  for (std::size_t i = 0; i < ref.size(); ++i) gap = std::max(gap, std::abs(ref[i] - plain[i]));
  REQUIRE(gap > 1e-2);

  std::vector<float> out(q.size(), -7.0f);
  SECTION("KvCache") {
    posenc::KvCache<float> cache(1, 16, kv_heads, d);
    cache.set_rope(freqs, layout);
    cache.append(posenc::ConstTensorView<float, 4>(k.data(), 1, n, kv_heads, d),
                 posenc::ConstTensorView<float, 4>(v.data(), 1, n, kv_heads, d),
                 posenc::PositionIdsView(pos.data(), 1, n));
    cache.attend(posenc::ConstTensorView<float, 4>(q.data(), 1, 1, heads, d),
                 posenc::TensorView<float, 4>(out.data(), 1, 1, heads, d));
  }
  SECTION("PagedKvCache, pages of 4 slots") {
    posenc::PagedKvCache<float> pool(4, 4, kv_heads, d);
    pool.set_rope(freqs, layout);
    const auto s = pool.add_sequence();
    pool.append(s, posenc::ConstTensorView<float, 3>(k.data(), n, kv_heads, d),
                posenc::ConstTensorView<float, 3>(v.data(), n, kv_heads, d));
    pool.attend({s}, posenc::ConstTensorView<float, 4>(q.data(), 1, 1, heads, d),
                posenc::TensorView<float, 4>(out.data(), 1, 1, heads, d));
  }
  POSENC_REQUIRE_CLOSE(posenc_test::compare(
      out.size(), [&](std::size_t i) { return out[i]; }, [&](std::size_t i) { return ref[i]; },
      2e-6, 1e-5));
}

TEST_CASE("field NeMo-Automodel#2674: MLA rope slices of packed tokens in fused buffers",
          "[field][rope][mla]") {
  // DeepSeek MLA (sizes scaled down): q heads are [nope | rope] = [32 | 16] rotated at
  // rotary_offset 32; k_pe is one 16-wide head at the end of each fused row [kv_lora 24 | k_pe
  // 16]. Packed tokens of two sequences (a prefill of 5, a 3-token chunk at positions 7..9).
  // Every rotated value is finite and equals the long-double rotation; nothing else moves.
  constexpr Eigen::Index tokens = 8, heads = 3, nope = 32, rope = 16, lora = 24, row = lora + rope;
  const std::vector<std::int64_t> pos = {0, 1, 2, 3, 4, 7, 8, 9};
  posenc::RopeParams qp;
  qp.head_dim = nope + rope;
  qp.rotary_dim = rope;
  qp.rotary_offset = nope;
  qp.theta = 10000.0;
  qp.layout = RopeLayout::kInterleaved;
  qp.scaling = deepseek_v3_yarn();
  posenc::RopeParams kp = qp;
  kp.head_dim = rope;
  kp.rotary_offset = 0;
  const auto inv_freq = posenc::reference::rope_frequencies(qp).inv_freq;
  const long double af = yarn_g(40.0L, 1.0L) / yarn_g(40.0L, 1.0L);  // = 1 (llama.cpp#7118)
  const posenc::ConstTensorView<std::int64_t, 1> ids(pos.data(), tokens);

  auto q = posenc_test::random_vector<float>(tokens * heads * (nope + rope), 21);
  auto kv = posenc_test::random_vector<float>(tokens * row, 22);
  const auto q0 = q, kv0 = kv;
  posenc::apply_rope_inplace(posenc::rope_heads_packed(posenc::TensorView<float, 3>(
                                 q.data(), tokens, heads, nope + rope)),
                             posenc::RopePositions::from_token_ids(ids),
                             posenc::compute_rope_frequencies(qp), RopeLayout::kInterleaved);
  posenc::apply_rope_inplace(posenc::rope_heads_strided(kv.data() + lora, tokens, 1, rope, row, rope),
                             posenc::RopePositions::from_token_ids(ids),
                             posenc::compute_rope_frequencies(kp), RopeLayout::kInterleaved);

  for (Eigen::Index t = 0; t < tokens; ++t) {
    CAPTURE(t);
    for (Eigen::Index h = 0; h < heads; ++h) {
      const float* head = q.data() + (t * heads + h) * (nope + rope);
      const float* head0 = q0.data() + (t * heads + h) * (nope + rope);
      REQUIRE(std::memcmp(head, head0, nope * sizeof(float)) == 0);
      const auto want = posenc::reference::rope_vector(head0, nope + rope, pos[static_cast<std::size_t>(t)],
                                                       inv_freq, af, nope, RopeLayout::kInterleaved);
      for (Eigen::Index c = nope; c < nope + rope; ++c) {
        REQUIRE(std::isfinite(head[c]));
        REQUIRE(std::abs(head[c] - static_cast<double>(want[static_cast<std::size_t>(c)])) <= 1e-6);
      }
    }
    const float* r = kv.data() + t * row;
    const float* r0 = kv0.data() + t * row;
    REQUIRE(std::memcmp(r, r0, lora * sizeof(float)) == 0);
    const auto want = posenc::reference::rope_vector(r0 + lora, rope, pos[static_cast<std::size_t>(t)],
                                                     inv_freq, af, 0, RopeLayout::kInterleaved);
    for (Eigen::Index c = 0; c < rope; ++c) {
      REQUIRE(std::isfinite(r[lora + c]));
      REQUIRE(std::abs(r[lora + c] - static_cast<double>(want[static_cast<std::size_t>(c)])) <= 1e-6);
    }
  }
}

TEST_CASE("field TransformerEngine#2188: per-sequence start offsets", "[field][rope][positions]") {
  // A batch whose sequences sit at different cache lengths: position(b, s) = starts[b] + s.
  constexpr Eigen::Index batch = 3, seq = 4, heads = 2, d = 8;
  const std::vector<std::int64_t> starts = {0, 5, 100000};
  posenc::RopeParams p;
  p.head_dim = d;
  p.theta = 10000.0;
  const auto freqs = posenc::compute_rope_frequencies(p);
  const auto inv_freq = posenc::reference::rope_frequencies(p).inv_freq;
  auto x = posenc_test::random_vector<float>(batch * seq * heads * d, 31);
  const auto x0 = x;
  std::vector<std::int64_t> ids(batch * seq);
  for (Eigen::Index b = 0; b < batch; ++b) {
    for (Eigen::Index s = 0; s < seq; ++s) ids[static_cast<std::size_t>(b * seq + s)] = starts[static_cast<std::size_t>(b)] + s;
  }
  const auto want = posenc::reference::apply_rope(x0.data(), batch, seq, heads, d,
                                                  posenc::HeadLayout::kBSHD, ids.data(), inv_freq,
                                                  1.0L, 0, RopeLayout::kHalfSplit);
  posenc::apply_rope_inplace(
      posenc::rope_heads(posenc::TensorView<float, 4>(x.data(), batch, seq, heads, d)),
      posenc::RopePositions::contiguous_from(
          posenc::ConstTensorView<std::int64_t, 1>(starts.data(), batch), seq),
      freqs, RopeLayout::kHalfSplit);
  POSENC_REQUIRE_CLOSE(posenc_test::compare(
      x.size(), [&](std::size_t i) { return x[i]; }, [&](std::size_t i) { return want[i]; }, 1e-6));

  // A negative start is a negative position: rejected before anything is written.
  const std::vector<std::int64_t> bad = {0, -1, 3};
  x = x0;
  REQUIRE_THROWS_AS(posenc::apply_rope_inplace(
                        posenc::rope_heads(posenc::TensorView<float, 4>(x.data(), batch, seq, heads, d)),
                        posenc::RopePositions::contiguous_from(
                            posenc::ConstTensorView<std::int64_t, 1>(bad.data(), batch), seq),
                        freqs, RopeLayout::kHalfSplit),
                    std::invalid_argument);
  REQUIRE(std::memcmp(x.data(), x0.data(), x.size() * sizeof(float)) == 0);
}

TEST_CASE("field transformers#29285 / candle#3520: bfloat16 storage at positions up to 2^24",
          "[field][rope][bf16]") {
  // Angles in bf16 or float (what autocast and fp16 tables did) are off by whole radians at
  // these positions; posenc computes them in double and rounds each output once, so every
  // output is within one bf16 ulp of the long-double rotation of the bf16 inputs.
  constexpr Eigen::Index heads = 4, d = 64;
  const std::vector<std::int64_t> pos = {65535, 100000, 131071, 500000, 1000000, 1 << 24};
  const auto seq = static_cast<Eigen::Index>(pos.size());
  posenc::RopeParams p;
  p.head_dim = d;
  p.theta = 500000.0;
  const auto freqs = posenc::compute_rope_frequencies(p);
  const auto inv_freq = posenc::reference::rope_frequencies(p).inv_freq;
  const auto layout = GENERATE(RopeLayout::kHalfSplit, RopeLayout::kInterleaved);
  CAPTURE(posenc::to_string(layout));
  auto x = posenc_test::random_vector<Eigen::bfloat16>(seq * heads * d, 41);
  const auto want = posenc::reference::apply_rope(x.data(), 1, seq, heads, d,
                                                  posenc::HeadLayout::kBSHD, pos.data(), inv_freq,
                                                  1.0L, 0, layout);
  posenc::apply_rope_inplace(posenc::TensorView<Eigen::bfloat16, 4>(x.data(), 1, seq, heads, d),
                             posenc::PositionIdsView(pos.data(), 1, seq), freqs, layout);
  std::size_t exact = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    CAPTURE(i, want[i]);
    const double got = static_cast<double>(static_cast<float>(x[i]));
    const double w = static_cast<double>(want[i]);
    // One bf16 ulp at |w| (8 significant bits), and 2^-30 for results that cancel to ~0.
    const double ulp = std::ldexp(1.0, std::ilogb(std::max(std::abs(w), 0x1p-30)) - 7);
    REQUIRE(std::abs(got - w) <= ulp);
    exact += got == static_cast<double>(static_cast<float>(Eigen::bfloat16(static_cast<float>(w))));
  }
  // Most outputs are the correctly rounded value; the rest are one ulp off (a float rotation
  // near a rounding boundary).
  REQUIRE(exact >= x.size() * 9 / 10);
}

TEST_CASE("field vllm#1009: Baichuan's key-only ALiBi form m * j weighs keys as -m (i - j) does",
          "[field][alibi][attention]") {
  // Baichuan-13B adds slope_h * j (the key's position alone, one row for every query) to the
  // causal scores; vLLM#1009 asked whether an engine's -m (i - j) is the same model. Per query
  // row the two differ by the constant m i, which softmax removes: the weights, and so the
  // output, are equal. Expected: the key-only form evaluated by hand in long double.
  constexpr Eigen::Index n = 6, heads = 2, d = 4;
  const auto q = posenc_test::random_vector<float>(n * heads * d, 71);
  const auto k = posenc_test::random_vector<float>(n * heads * d, 72);
  const auto v = posenc_test::random_vector<float>(n * heads * d, 73);
  posenc::AttentionParams params;
  params.alibi_slopes = {0.5, 0.0625};
  std::vector<float> out(q.size());
  posenc::attention<float>(posenc::ConstTensorView<float, 4>(q.data(), 1, n, heads, d),
                           posenc::ConstTensorView<float, 4>(k.data(), 1, n, heads, d),
                           posenc::ConstTensorView<float, 4>(v.data(), 1, n, heads, d),
                           posenc::TensorView<float, 4>(out.data(), 1, n, heads, d), params);
  const auto at = [&](const std::vector<float>& x, Eigen::Index i, Eigen::Index h,
                      Eigen::Index c) {
    return static_cast<long double>(x[static_cast<std::size_t>((i * heads + h) * d + c)]);
  };
  for (Eigen::Index h = 0; h < heads; ++h) {
    const long double m = params.alibi_slopes[static_cast<std::size_t>(h)];
    for (Eigen::Index i = 0; i < n; ++i) {
      std::vector<long double> s(static_cast<std::size_t>(i + 1));
      long double top = -1e300L;
      for (Eigen::Index j = 0; j <= i; ++j) {
        long double dot = 0.0L;
        for (Eigen::Index c = 0; c < d; ++c) dot += at(q, i, h, c) * at(k, j, h, c);
        s[static_cast<std::size_t>(j)] = dot / 2.0L + m * static_cast<long double>(j);
        top = std::max(top, s[static_cast<std::size_t>(j)]);
      }
      long double sum = 0.0L;
      for (auto& x : s) sum += (x = std::exp(x - top));
      for (Eigen::Index c = 0; c < d; ++c) {
        long double want = 0.0L;
        for (Eigen::Index j = 0; j <= i; ++j) {
          want += s[static_cast<std::size_t>(j)] / sum * at(v, j, h, c);
        }
        CAPTURE(h, i, c);
        CHECK(std::abs(at(out, i, h, c) - want) <= 1e-6L);
      }
    }
  }
}
