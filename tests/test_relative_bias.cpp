// T5's relative attention bias. Expected values: buckets worked by hand from the formula in
// Raffel et al. / HF T5Attention._relative_position_bucket, the same formula transcribed here in
// long double, and attention as softmax(q.k + table[bucket]) V written out in long double.

#include <catch2/catch.hpp>

#include <posenc/attention.hpp>
#include <posenc/dual_chunk_attention.hpp>
#include <posenc/kv_cache.hpp>
#include <posenc/reference/attention.hpp>
#include <posenc/relative_bias.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "support/attention_ld.hpp"
#include "support/rng.hpp"

using Catch::Matchers::Contains;
using posenc::relative_position_bucket;
using posenc_test::attend_ld;

namespace {

using LD = long double;

/// The bucket formula in long double (the test's own transcription).
std::int64_t bucket_ld(std::int64_t rel, std::int64_t nb, std::int64_t md, bool bidir) {
  std::int64_t out = 0;
  if (bidir) {
    nb /= 2;
    if (rel > 0) out += nb;
    rel = std::llabs(rel);
  } else {
    rel = rel < 0 ? -rel : 0;
  }
  const std::int64_t e = nb / 2;
  if (rel < e) return out + rel;
  // x = ln(r / e) / ln(D / e) (n - e) is an integer exactly when (r / e)^(n - e) = (D / e)^k,
  // e.g. r = 64, e = 8, D = 128, n - e = 8: x = 8 ln 8 / ln 16 = 6. Computed, x may land an ulp
  // below (it does in binary128, AArch64's long double), and trunc would drop a bucket; the
  // 1e-12 nudge is far above long double's error here (x < 400) and, as the test below states,
  // far below the distance of any non-integer x from an integer.
  const LD x = std::log(static_cast<LD>(rel) / e) / std::log(static_cast<LD>(md) / e) * (nb - e);
  const LD large = static_cast<LD>(e) + std::trunc(x + 1e-12L);
  return out + std::min<std::int64_t>(static_cast<std::int64_t>(large), nb - 1);
}

posenc::RelativePositionBias plan(std::int64_t nb, Eigen::Index heads, std::int64_t md, bool bidir, std::vector<float>& table,
                                  std::uint64_t seed) {
  table = posenc_test::random_vector<float>(static_cast<std::size_t>(nb * heads), seed);
  for (auto& x : table) x *= 3.0f;
  return posenc::relative_position_bias(posenc::ConstTensorView<float, 2>(table.data(), nb, heads), md, bidir);
}

}  // namespace

TEST_CASE("relative bias: T5's buckets worked by hand", "[relative_bias]") {
  // Bidirectional, 32 buckets, max_distance 128: 16 per side, 8 exact, then 8 + trunc(8 ln(r / 8)
  // / ln 16) = 8 + trunc(2 log2(r / 8)): r = 11 -> 8 + trunc(0.919) = 8, 12 -> 8 + trunc(1.170) = 9,
  // 16 -> 10, 32 -> 12, 64 -> 14, 128 -> 16 -> capped 15. Keys after the query: + 16.
  const std::vector<std::pair<std::int64_t, std::int64_t>> bidir = {
      {0, 0}, {-1, 1}, {-7, 7}, {-8, 8}, {-11, 8}, {-12, 9}, {-16, 10}, {-32, 12}, {-64, 14}, {-127, 15},
      {-128, 15}, {-100000, 15}, {1, 17}, {7, 23}, {8, 24}, {16, 26}, {128, 31}, {std::int64_t{1} << 40, 31}};
  for (const auto& [rel, bucket] : bidir) {
    CAPTURE(rel);
    REQUIRE(relative_position_bucket(rel) == bucket);
  }
  // Unidirectional (decoder self-attention), 32 buckets, 128: every r >= 0 in bucket 0; 16
  // exact; 16 + trunc(16 ln(r / 16) / ln 8): r = 32 -> 16 + trunc(5.33) = 21, 64 -> 26, 128 -> 31.
  const std::vector<std::pair<std::int64_t, std::int64_t>> unidir = {
      {5, 0}, {0, 0}, {-1, 1}, {-15, 15}, {-16, 16}, {-32, 21}, {-64, 26}, {-127, 31}, {-128, 31}, {-5000, 31}};
  for (const auto& [rel, bucket] : unidir) {
    CAPTURE(rel);
    REQUIRE(relative_position_bucket(rel, 32, 128, false) == bucket);
  }
}

TEST_CASE("relative bias: buckets equal the long-double formula, so float evaluation changes none",
          "[relative_bias]") {
  // HF evaluates the log branch in float32; posenc does too. For the configurations in use the
  // exact value of e + ln(r / e) / ln(D / e) (n - e) is never within float rounding of an
  // integer it is not equal to, so the long-double buckets are the same at every distance.
  struct Config {
    std::int64_t nb, md;
  };
  for (const Config c : {Config{32, 128}, Config{32, 256}, Config{64, 128}, Config{128, 256}, Config{320, 800}, Config{8, 16}})
    for (const bool bidir : {true, false})
      for (std::int64_t rel = -3 * c.md; rel <= 3 * c.md; ++rel) {
        CAPTURE(c.nb, c.md, bidir, rel);
        REQUIRE(relative_position_bucket(rel, c.nb, c.md, bidir) == bucket_ld(rel, c.nb, c.md, bidir));
      }
}

TEST_CASE("relative bias: the plan's rows are the table at each distance's bucket", "[relative_bias]") {
  std::vector<float> table;
  const auto r = plan(32, 3, 128, true, table, 501);
  REQUIRE(r.by_distance.size() == 3u * 257u);
  std::vector<std::int64_t> qpos = {300, 0}, kpos = {0, 290, 299, 300, 301, 310, 500, 1000};
  std::vector<float> out(2 * 3 * 1 * 8);
  // Two sequences of one query each: positions 300 and 0 against the same keys.
  std::vector<std::int64_t> q2 = {300, 0}, k2(16);
  for (int b = 0; b < 2; ++b)
    for (int j = 0; j < 8; ++j) k2[static_cast<std::size_t>(b * 8 + j)] = kpos[static_cast<std::size_t>(j)];
  posenc::relative_position_bias_matrix<float>(r, posenc::PositionIdsView(q2.data(), 2, 1),
                                               posenc::PositionIdsView(k2.data(), 2, 8),
                                               posenc::TensorView<float, 4>(out.data(), 2, 3, 1, 8));
  for (int b = 0; b < 2; ++b)
    for (int h = 0; h < 3; ++h)
      for (int j = 0; j < 8; ++j) {
        const std::int64_t bucket = bucket_ld(kpos[static_cast<std::size_t>(j)] - q2[static_cast<std::size_t>(b)], 32, 128, true);
        CAPTURE(b, h, j, bucket);
        REQUIRE(out[static_cast<std::size_t>((b * 3 + h) * 8 + j)] == table[static_cast<std::size_t>(bucket * 3 + h)]);
      }
}

TEST_CASE("relative bias: past max_distance every distance reads the last bucket HF's float32 "
          "gives it", "[relative_bias]") {
  // HF forms x = log(r / e) / log(D / e) (n - e) in float32 (torch.log of a float tensor,
  // math.log's double rounded to float32 by the tensor op), transcribed here. With D one above
  // e = 4160 (unidirectional, 8320 buckets) the ratio's rounding moves log(D / e) ~ 2.4e-4 by
  // 2.5e-4 of itself: x = 4158.96 at D, one bucket short of the last (8318, not 8319), which HF
  // reaches at D + 1. The plan clamped every distance past D to D's bucket, so far keys read
  // table[8318] where HF reads table[8319].
  const auto hf_bucket = [](std::int64_t rel) {
    const std::int64_t n = 8320, e = 4160, d = 4161;
    const std::int64_t r = rel < 0 ? -rel : 0;
    if (r < e) return r;
    const float x = std::log(static_cast<float>(r) / static_cast<float>(e)) /
                    static_cast<float>(std::log(static_cast<double>(d) / static_cast<double>(e))) *
                    static_cast<float>(n - e);
    return std::min<std::int64_t>(e + static_cast<std::int64_t>(x), n - 1);
  };
  REQUIRE(hf_bucket(-4161) == 8318);
  REQUIRE(hf_bucket(-4162) == 8319);
  std::vector<float> table;
  const auto r = plan(8320, 1, 4161, false, table, 503);
  CHECK(r.saturation_distance == 4162);
  const std::vector<std::int64_t> q = {5000000};
  const std::vector<std::int64_t> k = {0, 5000000 - 4162, 5000000 - 4161, 5000000 - 4160, 5000000};
  std::vector<float> out(k.size());
  posenc::relative_position_bias_matrix<float>(r, posenc::PositionIdsView(q.data(), 1, 1),
                                               posenc::PositionIdsView(k.data(), 1, 5),
                                               posenc::TensorView<float, 4>(out.data(), 1, 1, 1, 5));
  for (std::size_t j = 0; j < k.size(); ++j) {
    const std::int64_t bucket = hf_bucket(k[j] - q[0]);
    CAPTURE(j, bucket);
    REQUIRE(out[j] == table[static_cast<std::size_t>(bucket)]);
  }
}

TEST_CASE("relative bias: an encoder (bidirectional buckets and mask) against long double",
          "[relative_bias][attention]") {
  // 40 tokens with 8 buckets and max_distance 16 (so most pairs lie beyond it), and 150
  // tokens with T5's 32 / 128; 3 heads of 8, T5's scale 1; one sequence left-padded by 2.
  for (const auto& [n, nb, md] : {std::tuple<Eigen::Index, std::int64_t, std::int64_t>{40, 8, 16},
                                  std::tuple<Eigen::Index, std::int64_t, std::int64_t>{150, 32, 128}}) {
    const Eigen::Index H = 3, D = 8;
    std::vector<float> table;
    posenc::AttentionParams p;
    p.mask = posenc::MaskMode::kBidirectional;
    p.scale = 1.0;
    p.relative_bias = plan(nb, H, md, true, table, 502);
    const auto q = posenc_test::random_vector<float>(static_cast<std::size_t>(2 * n * H * D), 503);
    const auto k = posenc_test::random_vector<float>(static_cast<std::size_t>(2 * n * H * D), 504);
    const auto v = posenc_test::random_vector<float>(static_cast<std::size_t>(2 * n * H * D), 505);
    std::vector<std::int64_t> pos(static_cast<std::size_t>(2 * n));
    std::vector<std::uint8_t> keep(pos.size(), 1);
    for (Eigen::Index j = 0; j < n; ++j) {
      pos[static_cast<std::size_t>(j)] = j;
      pos[static_cast<std::size_t>(n + j)] = std::max<Eigen::Index>(0, j - 2);  // left padding of 2
    }
    keep[static_cast<std::size_t>(n)] = keep[static_cast<std::size_t>(n + 1)] = 0;
    posenc::AttentionMetadata meta;
    meta.query_positions = posenc::PositionIdsView(pos.data(), 2, n);
    meta.key_positions = posenc::PositionIdsView(pos.data(), 2, n);
    meta.key_mask = posenc::ConstTensorView<std::uint8_t, 2>(keep.data(), 2, n);
    std::vector<float> out(q.size());
    posenc::attention<float>(posenc::ConstTensorView<float, 4>(q.data(), 2, n, H, D),
                             posenc::ConstTensorView<float, 4>(k.data(), 2, n, H, D),
                             posenc::ConstTensorView<float, 4>(v.data(), 2, n, H, D),
                             posenc::TensorView<float, 4>(out.data(), 2, n, H, D), p, meta);
    for (Eigen::Index b = 0; b < 2; ++b)
      for (Eigen::Index i = 0; i < n; ++i)
        for (Eigen::Index h = 0; h < H; ++h) {
          std::vector<Eigen::Index> keys;
          std::vector<LD> bias;
          for (Eigen::Index j = 0; j < n; ++j) {
            if (!keep[static_cast<std::size_t>(b * n + j)]) continue;
            keys.push_back(j);
            const std::int64_t rel = pos[static_cast<std::size_t>(b * n + j)] - pos[static_cast<std::size_t>(b * n + i)];
            bias.push_back(table[static_cast<std::size_t>(bucket_ld(rel, nb, md, true) * H + h)]);
          }
          const auto expect = attend_ld(q.data() + ((b * n + i) * H + h) * D, k.data() + b * n * H * D + h * D,
                                        v.data() + b * n * H * D + h * D, H * D, D, keys, bias, 1.0L);
          for (Eigen::Index c = 0; c < D; ++c) {
            CAPTURE(n, b, i, h, c);
            REQUIRE_THAT(out[static_cast<std::size_t>(((b * n + i) * H + h) * D + c)],
                         Catch::Matchers::WithinAbs(static_cast<double>(expect[static_cast<std::size_t>(c)]), 2e-5));
          }
        }
  }
}

TEST_CASE("relative bias: a decoder's cached decode reads the bias at the query's position",
          "[relative_bias][kv_cache]") {
  // Unidirectional buckets, causal mask: 20 prompt tokens through a KV cache, then 6 decode
  // steps; each step must equal that row of one causal forward over all 26 tokens, and the
  // bias of step t must be table[bucket(j - t)], not the bucket of a 1-token query's index.
  const Eigen::Index n = 26, prompt = 20, H = 4, G = 2, D = 16;
  std::vector<float> table;
  posenc::AttentionParams p;
  p.scale = 1.0;
  p.relative_bias = plan(32, H, 128, false, table, 506);
  const auto q = posenc_test::random_vector<float>(static_cast<std::size_t>(n * H * D), 507);
  const auto k = posenc_test::random_vector<float>(static_cast<std::size_t>(n * G * D), 508);
  const auto v = posenc_test::random_vector<float>(static_cast<std::size_t>(n * G * D), 509);
  std::vector<float> full(q.size());
  posenc::attention<float>(posenc::ConstTensorView<float, 4>(q.data(), 1, n, H, D),
                           posenc::ConstTensorView<float, 4>(k.data(), 1, n, G, D),
                           posenc::ConstTensorView<float, 4>(v.data(), 1, n, G, D),
                           posenc::TensorView<float, 4>(full.data(), 1, n, H, D), p);
  for (Eigen::Index t = 0; t < n; ++t)
    for (Eigen::Index h = 0; h < H; ++h) {
      std::vector<Eigen::Index> keys;
      std::vector<LD> bias;
      for (Eigen::Index j = 0; j <= t; ++j) {
        keys.push_back(j);
        bias.push_back(table[static_cast<std::size_t>(bucket_ld(j - t, 32, 128, false) * H + h)]);
      }
      const auto expect = attend_ld(q.data() + (t * H + h) * D, k.data() + (h / 2) * D, v.data() + (h / 2) * D, G * D, D,
                                    keys, bias, 1.0L);
      for (Eigen::Index c = 0; c < D; ++c) {
        CAPTURE(t, h, c);
        REQUIRE_THAT(full[static_cast<std::size_t>((t * H + h) * D + c)],
                     Catch::Matchers::WithinAbs(static_cast<double>(expect[static_cast<std::size_t>(c)]), 2e-5));
      }
    }
  posenc::KvCache<float> cache(1, n, G, D);
  std::vector<std::int64_t> pos(static_cast<std::size_t>(n));
  for (Eigen::Index j = 0; j < n; ++j) pos[static_cast<std::size_t>(j)] = j;
  cache.append(posenc::ConstTensorView<float, 4>(k.data(), 1, prompt, G, D), posenc::ConstTensorView<float, 4>(v.data(), 1, prompt, G, D),
               posenc::PositionIdsView(pos.data(), 1, prompt));
  for (Eigen::Index t = prompt; t < n; ++t) {
    cache.append(posenc::ConstTensorView<float, 4>(k.data() + t * G * D, 1, 1, G, D),
                 posenc::ConstTensorView<float, 4>(v.data() + t * G * D, 1, 1, G, D), posenc::PositionIdsView(pos.data() + t, 1, 1));
    std::vector<float> step(static_cast<std::size_t>(H * D));
    cache.attend(posenc::ConstTensorView<float, 4>(q.data() + t * H * D, 1, 1, H, D), posenc::TensorView<float, 4>(step.data(), 1, 1, H, D),
                 p);
    for (Eigen::Index e = 0; e < H * D; ++e) {
      CAPTURE(t, e);
      REQUIRE_THAT(step[static_cast<std::size_t>(e)], Catch::Matchers::WithinAbs(full[static_cast<std::size_t>(t * H * D + e)], 1e-5));
    }
  }
}

TEMPLATE_TEST_CASE("relative bias: fused == reference, GQA, with ALiBi and soft cap, two threads",
                   "[relative_bias][attention]", float, Eigen::bfloat16) {
  const Eigen::Index B = 2, n = 90, H = 8, G = 2, D = 32;
  std::vector<float> table;
  const auto q = posenc_test::random_vector<TestType>(static_cast<std::size_t>(B * n * H * D), 510);
  const auto k = posenc_test::random_vector<TestType>(static_cast<std::size_t>(B * n * G * D), 511);
  const auto v = posenc_test::random_vector<TestType>(static_cast<std::size_t>(B * n * G * D), 512);
  const posenc::ConstTensorView<TestType, 4> qv(q.data(), B, n, H, D), kv(k.data(), B, n, G, D), vv(v.data(), B, n, G, D);
  for (int variant = 0; variant < 3; ++variant) {
    CAPTURE(variant);
    posenc::AttentionParams p;
    p.relative_bias = plan(32, H, 64, variant != 1, table, 513);
    if (variant == 1) p.mask = posenc::MaskMode::kCausal;
    if (variant != 1) p.mask = posenc::MaskMode::kBidirectional;
    if (variant == 2) {
      p.alibi_slopes = posenc::alibi_slopes(H);
      p.logit_softcap = 5.0;
      p.num_threads = 2;
    }
    std::vector<TestType> fused(q.size()), ref(q.size());
    posenc::attention<TestType>(qv, kv, vv, posenc::TensorView<TestType, 4>(fused.data(), B, n, H, D), p);
    posenc::reference::attention<TestType>(qv, kv, vv, posenc::TensorView<TestType, 4>(ref.data(), B, n, H, D), p);
    const double tol = std::is_same_v<TestType, float> ? 1e-5 : 1.6e-2;
    for (std::size_t i = 0; i < fused.size(); ++i) {
      CAPTURE(i);
      REQUIRE_THAT(posenc::detail::to_double(fused[i]), Catch::Matchers::WithinAbs(posenc::detail::to_double(ref[i]), tol));
    }
  }
}

TEST_CASE("relative bias: bad parameters throw before writing", "[relative_bias][errors]") {
  REQUIRE_THROWS_WITH(relative_position_bucket(1, 2, 128, true), Contains("num_buckets = 2 must be in [4, 2^20]"));
  REQUIRE_THROWS_WITH(relative_position_bucket(1, 32, 8, true), Contains("max_distance = 8 must be in (8 (the exact buckets), 2^20]"));
  REQUIRE_THROWS_WITH(relative_position_bucket(std::int64_t{1} << 60), Contains("relative_position = "));
  std::vector<float> table(32 * 4, 0.5f);
  table[7] = std::numeric_limits<float>::infinity();
  REQUIRE_THROWS_WITH(posenc::relative_position_bias(posenc::ConstTensorView<float, 2>(table.data(), 32, 4)),
                      Contains("table[1, 3] = inf must be finite"));
  table[7] = 0.5f;
  const auto r = posenc::relative_position_bias(posenc::ConstTensorView<float, 2>(table.data(), 32, 4));
  const Eigen::Index n = 5, D = 8;
  const auto q = posenc_test::random_vector<float>(static_cast<std::size_t>(n * 2 * D), 514);
  std::vector<float> out(q.size(), -9.0f);
  const posenc::ConstTensorView<float, 4> qv(q.data(), 1, n, 2, D);
  const posenc::TensorView<float, 4> ov(out.data(), 1, n, 2, D);
  posenc::AttentionParams p;
  p.relative_bias = r;  // 4 heads against q's 2
  REQUIRE_THROWS_WITH(posenc::attention<float>(qv, qv, qv, ov, p), Contains("relative_bias has 4 heads; q has heads = 2"));
  p.relative_bias = posenc::relative_position_bias(posenc::ConstTensorView<float, 2>(table.data(), 32, 2));
  p.relative_bias->by_distance.pop_back();
  REQUIRE_THROWS_WITH(posenc::attention<float>(qv, qv, qv, ov, p), Contains("build it with relative_position_bias"));
  // Dual chunk attention remaps positions: a positional bias has no meaning there.
  p.relative_bias = posenc::relative_position_bias(posenc::ConstTensorView<float, 2>(table.data(), 32, 2));
  posenc::RopeParams rp;
  rp.head_dim = D;
  posenc::DualChunkPlan dca;
  dca.freqs = posenc::compute_rope_frequencies(rp);
  dca.chunks = {8, 4, 64};
  REQUIRE_THROWS_WITH(posenc::dual_chunk_attention<float>(qv, qv, qv, ov, dca, p),
                      Contains("relative_bias must be empty: dual chunk attention is a RoPE scheme"));
  for (const float x : out) REQUIRE(x == -9.0f);
}

TEST_CASE("relative bias: odd halves take HF's integer halving of the bucket counts",
          "[relative_bias]") {
  // HF: num_buckets //= 2 (bidirectional), max_exact = num_buckets // 2. 10 buckets, D = 20:
  // 5 per side, 2 exact, then 2 + trunc(3 ln(r / 2) / ln 10): r = 3 -> 2 + trunc(0.528) = 2,
  // 5 -> 2 + trunc(1.194) = 3, 20 -> capped at 4; keys after the query + 5.
  const std::vector<std::pair<std::int64_t, std::int64_t>> hand = {
      {0, 0}, {-1, 1}, {-2, 2}, {-3, 2}, {-5, 3}, {-20, 4}, {-1000, 4},
      {1, 6}, {3, 7}, {5, 8}};
  for (const auto& [rel, bucket] : hand) {
    CAPTURE(rel);
    REQUIRE(relative_position_bucket(rel, 10, 20, true) == bucket);
  }
  using Config = std::pair<std::int64_t, std::int64_t>;
  for (const auto& [nb, md] : {Config{10, 20}, Config{6, 9}, Config{7, 12}, Config{13, 40}})
    for (const bool bidir : {true, false})
      for (std::int64_t rel = -3 * md; rel <= 3 * md; ++rel) {
        CAPTURE(nb, md, bidir, rel);
        REQUIRE(relative_position_bucket(rel, nb, md, bidir) ==
                bucket_ld(rel, nb, md, bidir));
      }
}

TEST_CASE("relative bias: the parameter ranges are inclusive at their documented ends",
          "[relative_bias][errors]") {
  // The fewest buckets with one exact bucket: 4 bidirectional (2 a side), 2 unidirectional;
  // e = 1, D = 2: distance 1 is e + trunc(ln 1 / ln 2) = 1, capped at n - 1 = 1.
  CHECK(relative_position_bucket(0, 4, 2, true) == 0);
  CHECK(relative_position_bucket(-1, 4, 2, true) == 1);
  CHECK(relative_position_bucket(1, 4, 2, true) == 3);
  CHECK(relative_position_bucket(-1, 2, 2, false) == 1);
  CHECK(relative_position_bucket(5, 2, 2, false) == 0);
  REQUIRE_THROWS_WITH(relative_position_bucket(-1, 3, 8, true),
                      Contains("num_buckets = 3 must be in [4, 2^20]"));
  REQUIRE_THROWS_WITH(relative_position_bucket(-1, 1, 8, false),
                      Contains("num_buckets = 1 must be in [2, 2^20]"));
  // 2^20 buckets and max_distance 2^20 are allowed (2^18 exact a side), 2^20 + 1 is not.
  const std::int64_t m = std::int64_t{1} << 20;
  CHECK(relative_position_bucket(-5, m, m, true) == 5);
  CHECK(relative_position_bucket(5, m, m, true) == m / 2 + 5);
  REQUIRE_THROWS_WITH(relative_position_bucket(-5, m + 1, m, true),
                      Contains("num_buckets = 1048577"));
  // 32 buckets reaching 2^20: distance 2^20 is 8 + trunc(8 ln 2^17 / ln 2^17), capped at 15.
  CHECK(relative_position_bucket(-m, 32, m, true) == 15);
  REQUIRE_THROWS_WITH(relative_position_bucket(-5, 32, m + 1, true),
                      Contains("max_distance = 1048577"));
  // Relative positions in [-2^53, 2^53]: the ends are the last bucket of each side.
  const std::int64_t top = std::int64_t{1} << 53;
  CHECK(relative_position_bucket(-top) == 15);
  CHECK(relative_position_bucket(top) == 31);
  REQUIRE_THROWS_WITH(relative_position_bucket(-top - 1), Contains("relative_position = "));
  REQUIRE_THROWS_WITH(relative_position_bucket(top + 1), Contains("relative_position = "));
  // A table without heads.
  const std::vector<float> table(32, 0.5f);
  const posenc::ConstTensorView<float, 2> no_heads(table.data(), 32, 0);
  REQUIRE_THROWS_WITH(posenc::relative_position_bias(no_heads),
                      Contains("table heads = 0 must be >= 1"));
}

TEST_CASE("relative bias: an integer log bucket stays whole in HF's order of operations",
          "[relative_bias]") {
  // HF: max_exact + (log(r / max_exact) / log(max_distance / max_exact) * (n - max_exact)),
  // divided before multiplied. Where (r / e)^(n - e) is a power of D / e the exact value is an
  // integer, e.g. 18 buckets bidirectional (n = 9, e = 4), D = 128, r = 32: ln 8 / ln 32 * 5 =
  // (3/5) 5 = 3, bucket 4 + 3 = 7 (+ 9 after the query); float32 in that order lands on 3.
  // Multiplying first (ln 8 * 5 / ln 32) lands an ulp below and truncates to 2.
  CHECK(relative_position_bucket(-32, 18, 128, true) == 7);
  CHECK(relative_position_bucket(32, 18, 128, true) == 16);
  CHECK(bucket_ld(-32, 18, 128, true) == 7);
  // Unidirectional: 10 buckets, D = 160 (e = 5): r = 40 -> 5 + 5 ln 8 / ln 32 = 5 + 3 = 8;
  // 20 buckets, D = 320 (e = 10): r = 80 -> 10 + 10 (3/5) = 16.
  CHECK(relative_position_bucket(-40, 10, 160, false) == 8);
  CHECK(relative_position_bucket(-80, 20, 320, false) == 16);
  CHECK(bucket_ld(-40, 10, 160, false) == 8);
  CHECK(bucket_ld(-80, 20, 320, false) == 16);
}

TEST_CASE("relative bias: the plan refuses the bucket parameters the bucket function refuses",
          "[relative_bias][errors]") {
  // relative_position_bias: "Throws std::invalid_argument (bucket parameters as
  // relative_position_bucket ...)": max_distance past 2^20, at the exact buckets, too few buckets.
  const std::vector<float> table(32 * 2, 0.5f);
  const posenc::ConstTensorView<float, 2> tv(table.data(), 32, 2);
  REQUIRE_THROWS_WITH(posenc::relative_position_bias(tv, (std::int64_t{1} << 20) + 1),
                      Contains("max_distance = 1048577"));
  REQUIRE_THROWS_WITH(posenc::relative_position_bias(tv, 8),
                      Contains("max_distance = 8 must be in (8 (the exact buckets), 2^20]"));
  REQUIRE_THROWS_WITH(posenc::relative_position_bias(
                          posenc::ConstTensorView<float, 2>(table.data(), 3, 2), 16),
                      Contains("num_buckets = 3 must be in [4, 2^20]"));
}

TEST_CASE("relative bias: the bias matrix checks its plan and positions before writing",
          "[relative_bias][errors]") {
  // "Throws std::invalid_argument (a plan not built for out's heads, positions outside
  // [0, 2^53], shapes) before writing anything."
  std::vector<float> table;
  const auto r = plan(32, 3, 128, true, table, 515);
  std::vector<std::int64_t> q = {4}, k = {0, 5};
  std::vector<float> out(3 * 2, -9.0f);
  const auto run = [&](Eigen::Index heads, Eigen::Index q_len) {
    posenc::relative_position_bias_matrix<float>(
        r, posenc::PositionIdsView(q.data(), 1, q_len), posenc::PositionIdsView(k.data(), 1, 2),
        posenc::TensorView<float, 4>(out.data(), 1, heads, 1, 2));
  };
  REQUIRE_THROWS_WITH(run(2, 1), Contains("relative_bias has 3 heads; q has heads = 2"));
  q[0] = -1;
  REQUIRE_THROWS_WITH(run(3, 1), Contains("query_positions[0, 0] = -1 must be in [0, 2^53]"));
  q[0] = 4;
  k[1] = (std::int64_t{1} << 53) + 1;
  REQUIRE_THROWS_WITH(run(3, 1), Contains("key_positions[0, 1] = 9007199254740993"));
  k[1] = 5;
  // query_positions [1, 1] for an out of q_len 2 (out's rows 0..1 hold 2 x 2 entries of head 0).
  REQUIRE_THROWS_WITH(
      posenc::relative_position_bias_matrix<float>(
          r, posenc::PositionIdsView(q.data(), 1, 1), posenc::PositionIdsView(k.data(), 1, 1),
          posenc::TensorView<float, 4>(out.data(), 1, 3, 2, 1)),
      Contains("query_positions shape [1, 1]"));
  for (const float x : out) REQUIRE(x == -9.0f);
  run(3, 1);  // the same call with valid input writes table[bucket(k - q), h]
  for (Eigen::Index h = 0; h < 3; ++h) {
    CHECK(out[static_cast<std::size_t>(h * 2)] == table[static_cast<std::size_t>(4 * 3 + h)]);
    CHECK(out[static_cast<std::size_t>(h * 2 + 1)] == table[static_cast<std::size_t>(17 * 3 + h)]);
  }
}

TEST_CASE("relative bias: a key max_distance after the query reads the last bucket, one before "
          "does not", "[relative_bias]") {
  // 32 buckets bidirectional (16 a side, e = 8) with D = 9: r = +8 is e + trunc(8 ln(8 / 8) /
  // ln(9 / 8)) = 8, bucket 16 + 8 = 24; r = +9 is 8 + 8 = 16, capped at 15: bucket 31, as is
  // every r past it. So the plan's positive end (r = +D) must be read as it is, not as D - 1.
  std::vector<float> table;
  const auto r = plan(32, 2, 9, true, table, 516);
  const std::vector<std::int64_t> q = {100};
  const std::vector<std::int64_t> k = {91, 92, 108, 109, 110, 5000};
  const std::vector<std::int64_t> want = {15, 8, 24, 31, 31, 31};
  std::vector<float> out(2 * k.size());
  posenc::relative_position_bias_matrix<float>(
      r, posenc::PositionIdsView(q.data(), 1, 1), posenc::PositionIdsView(k.data(), 1, 6),
      posenc::TensorView<float, 4>(out.data(), 1, 2, 1, 6));
  for (std::size_t j = 0; j < k.size(); ++j) {
    CAPTURE(j);
    REQUIRE(bucket_ld(k[j] - q[0], 32, 9, true) == want[j]);
    for (std::size_t h = 0; h < 2; ++h) {
      CAPTURE(h);
      REQUIRE(out[h * k.size() + j] == table[static_cast<std::size_t>(want[j]) * 2 + h]);
    }
  }
}
