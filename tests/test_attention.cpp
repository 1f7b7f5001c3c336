// Attention: the fused online-softmax kernel against the materialising double reference, the
// seed article's worked ALiBi numbers, closed-form softmax values, permutation equivariance
// (seed 000 §1.2) and its breaking, causal structure, padding, GQA and the error paths.

#include <catch2/catch.hpp>

#include <posenc/attention.hpp>
#include <posenc/attention_rope.hpp>
#include <posenc/reference/attention.hpp>
#include <posenc/relative_bias.hpp>
#include <posenc/rope.hpp>
#include <posenc/sinusoidal.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <ostream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "support/check.hpp"
#include "support/attention_shape.hpp"
#include "support/rng.hpp"

using Catch::Matchers::Contains;
using Catch::Matchers::WithinAbs;
using posenc::AttentionMetadata;
using posenc::AttentionParams;
using posenc::MaskMode;

namespace {

using posenc_test::Shape;

/// Q [batch, q_len, heads, d], K/V [batch, k_len, kv_heads, d] filled from splitmix64.
template <typename T>
struct Problem {
  Eigen::Index batch, q_len, k_len, heads, kv_heads, d;
  std::vector<T> q, k, v;

  Problem(Eigen::Index b, Eigen::Index ql, Eigen::Index kl, Eigen::Index h, Eigen::Index kvh,
          Eigen::Index dim, std::uint64_t seed, double amplitude = 1.0)
      : batch(b), q_len(ql), k_len(kl), heads(h), kv_heads(kvh), d(dim) {
    q = scaled(posenc_test::random_vector<float>(static_cast<std::size_t>(b * ql * h * dim), seed), amplitude);
    k = scaled(posenc_test::random_vector<float>(static_cast<std::size_t>(b * kl * kvh * dim), seed + 1), amplitude);
    v = scaled(posenc_test::random_vector<float>(static_cast<std::size_t>(b * kl * kvh * dim), seed + 2), 1.0);
  }
  Problem(const Shape& s, std::uint64_t seed, double amplitude = 1.0)
      : Problem(s.batch, s.q_len, s.k_len, s.heads, s.kv_heads, s.d, seed, amplitude) {}
  static std::vector<T> scaled(const std::vector<float>& x, double a) {
    std::vector<T> out(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) out[i] = T(static_cast<float>(x[i] * a));
    return out;
  }
  posenc::ConstTensorView<T, 4> Q() const { return {q.data(), batch, q_len, heads, d}; }
  posenc::ConstTensorView<T, 4> K() const { return {k.data(), batch, k_len, kv_heads, d}; }
  posenc::ConstTensorView<T, 4> V() const { return {v.data(), batch, k_len, kv_heads, d}; }
  std::size_t out_size() const { return static_cast<std::size_t>(batch * q_len * heads * d); }
  posenc::TensorView<T, 4> view(std::vector<T>& o) const { return {o.data(), batch, q_len, heads, d}; }
};

template <typename T>
std::vector<T> fused(const Problem<T>& p, const AttentionParams& params,
                     const AttentionMetadata& meta = {}) {
  std::vector<T> out(p.out_size(), T(-7.0f));
  posenc::attention<T>(p.Q(), p.K(), p.V(), p.view(out), params, meta);
  return out;
}

template <typename T>
std::vector<T> reference(const Problem<T>& p, const AttentionParams& params,
                         const AttentionMetadata& meta = {}) {
  std::vector<T> out(p.out_size(), T(-7.0f));
  posenc::reference::attention<T>(p.Q(), p.K(), p.V(), p.view(out), params, meta);
  return out;
}

template <typename A, typename B>
posenc_test::CloseReport close(const std::vector<A>& a, const std::vector<B>& b, double tol) {
  return posenc_test::compare(
      a.size(), [&](std::size_t i) { return static_cast<double>(a[i]); },
      [&](std::size_t i) { return static_cast<double>(b[i]); }, tol);
}

AttentionParams make_params(MaskMode mask, Eigen::Index alibi_heads = 0) {
  AttentionParams p;
  p.mask = mask;
  if (alibi_heads > 0) p.alibi_slopes = posenc::alibi_slopes(alibi_heads);
  return p;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(double(a[i]) - double(b[i])));
  return m;
}

}  // namespace

TEST_CASE("attention: the seed's ALiBi example, scores [1.0, 0.9, 0.8], slope 0.2, query at 2",
          "[attention][alibi][seed]") {
  // d = 3, scale = 1: q = e0, k_j = s_j e0, v_j = e_j, so out = the attention weights.
  const std::vector<float> s = {1.0f, 0.9f, 0.8f};
  std::vector<float> q = {1, 0, 0}, k(9, 0.0f), v(9, 0.0f);
  for (int j = 0; j < 3; ++j) {
    k[static_cast<std::size_t>(3 * j)] = s[static_cast<std::size_t>(j)];
    v[static_cast<std::size_t>(4 * j)] = 1.0f;
  }
  AttentionParams params;
  params.scale = 1.0;
  const std::vector<std::int64_t> qpos = {2}, kpos = {0, 1, 2};
  AttentionMetadata meta;
  meta.query_positions = posenc::PositionIdsView(qpos.data(), 1, 1);
  meta.key_positions = posenc::PositionIdsView(kpos.data(), 1, 3);
  auto run = [&](bool fused_path, std::vector<double>* weights) {
    std::vector<float> out(3, -1.0f);
    posenc::ConstTensorView<float, 4> Q(q.data(), 1, 1, 1, 3), K(k.data(), 1, 3, 1, 3),
        V(v.data(), 1, 3, 1, 3);
    posenc::TensorView<float, 4> O(out.data(), 1, 1, 1, 3);
    if (fused_path) {
      posenc::attention<float>(Q, K, V, O, params, meta);
    } else {
      posenc::reference::attention<float>(Q, K, V, O, params, meta,
                                          posenc::TensorView<double, 4>(weights->data(), 1, 1, 1, 3));
    }
    return out;
  };

  SECTION("without ALiBi: the seed's [0.367, 0.332, 0.301]") {
    std::vector<double> w(3);
    const auto ref = run(false, &w);
    const auto out = run(true, nullptr);
    const double seed[3] = {0.367, 0.332, 0.301};
    const double z = std::exp(1.0) + std::exp(0.9) + std::exp(0.8);
    for (int j = 0; j < 3; ++j) {
      CHECK_THAT(w[static_cast<std::size_t>(j)], WithinAbs(seed[j], 5e-4));
      CHECK_THAT(w[static_cast<std::size_t>(j)], WithinAbs(std::exp(double(s[static_cast<std::size_t>(j)])) / z, 1e-7));
      CHECK_THAT(out[static_cast<std::size_t>(j)], WithinAbs(w[static_cast<std::size_t>(j)], 1e-6));
      CHECK_THAT(ref[static_cast<std::size_t>(j)], WithinAbs(w[static_cast<std::size_t>(j)], 1e-6));
    }
  }
  SECTION("with ALiBi: biased scores [0.6, 0.7, 0.8] and their softmax") {
    params.alibi_slopes = {0.2};
    std::vector<double> w(3);
    run(false, &w);
    const auto out = run(true, nullptr);
    // Closed form: softmax([0.6, 0.7, 0.8]) = [0.30061, 0.33222, 0.36717]. The seed prints
    // [0.269, 0.299, 0.332], which sums to 0.900 and so is not a softmax; its own biased scores
    // [0.6, 0.7, 0.8] give the values below (the no-ALiBi weights reversed, by shift invariance).
    const double z = std::exp(0.6) + std::exp(0.7) + std::exp(0.8);
    const double expected[3] = {std::exp(0.6) / z, std::exp(0.7) / z, std::exp(0.8) / z};
    for (int j = 0; j < 3; ++j) {
      CHECK_THAT(w[static_cast<std::size_t>(j)], WithinAbs(expected[j], 1e-6));
      CHECK_THAT(out[static_cast<std::size_t>(j)], WithinAbs(expected[j], 1e-6));
    }
    // ALiBi moves weight to the nearest key even though key 0 has the best content score.
    CHECK(w[2] > w[1]);
    CHECK(w[1] > w[0]);
  }
}

TEST_CASE("attention: causal weights above the diagonal are exactly 0, bottom-right aligned",
          "[attention][causal]") {
  const Eigen::Index q_len = GENERATE(5, 9, 1);
  const Eigen::Index k_len = 9;
  CAPTURE(q_len, k_len);
  const Problem<float> p(1, q_len, k_len, 2, 2, 8, 11);
  std::vector<double> w(static_cast<std::size_t>(2 * q_len * k_len), -1.0);
  std::vector<float> out(p.out_size());
  posenc::reference::attention<float>(p.Q(), p.K(), p.V(), p.view(out), make_params(MaskMode::kCausal),
                                      {}, posenc::TensorView<double, 4>(w.data(), 1, 2, q_len, k_len));
  for (Eigen::Index h = 0; h < 2; ++h) {
    for (Eigen::Index i = 0; i < q_len; ++i) {
      double sum = 0.0;
      for (Eigen::Index j = 0; j < k_len; ++j) {
        const double wij = w[static_cast<std::size_t>((h * q_len + i) * k_len + j)];
        sum += wij;
        if (j > i + (k_len - q_len)) {
          CHECK(wij == 0.0);
        } else {
          CHECK(wij > 0.0);
        }
      }
      CHECK_THAT(sum, WithinAbs(1.0, 1e-12));
    }
  }
  POSENC_REQUIRE_CLOSE(close(fused(p, make_params(MaskMode::kCausal)), out, 1e-5));
  // The last query row sees every key: causal and bidirectional agree there.
  const auto bidir = fused(p, make_params(MaskMode::kBidirectional));
  const auto causal = fused(p, make_params(MaskMode::kCausal));
  const std::size_t last = static_cast<std::size_t>((q_len - 1) * 2 * 8);
  for (std::size_t c = last; c < causal.size(); ++c) CHECK_THAT(causal[c], WithinAbs(bidir[c], 1e-6));
}

TEST_CASE("attention: fused equals the reference over shapes, GQA ratios and positional modes",
          "[attention][fused]") {
  // q_len = 1 (decode), lengths not a multiple of the 64-key tile or 48-row tile, head_dim
  // 64/80/128/256, GQA ratios 1/4/8 (MQA), q_len < k_len (chunked prefill).
  const Shape shape = GENERATE(Shape{1, 1, 77, 8, 2, 64}, Shape{2, 70, 70, 4, 4, 64},
                               Shape{1, 33, 130, 8, 1, 80}, Shape{1, 65, 65, 4, 1, 128},
                               Shape{1, 20, 150, 8, 8, 256}, Shape{2, 1, 200, 16, 2, 128},
                               Shape{1, 50, 50, 3, 3, 12}, Shape{1, 17, 40, 2, 2, 7});
  const MaskMode mask = GENERATE(MaskMode::kCausal, MaskMode::kBidirectional);
  const bool alibi = GENERATE(false, true);
  CAPTURE(shape, posenc::to_string(mask), alibi);
  const Problem<float> p(shape, 100 + static_cast<std::uint64_t>(shape.d), 2.0);
  const AttentionParams params = make_params(mask, alibi ? shape.heads : 0);
  POSENC_REQUIRE_CLOSE(close(fused(p, params), reference(p, params), 1e-5));
}

TEST_CASE("attention: decode shapes (q_len x group <= 4 rows per kv head) equal the reference",
          "[attention][fused][decode]") {
  // Rows per kv head R = q_len * heads / kv_heads in 1..4; k_len around the 32-key softmax step
  // (1, 31, 33, 300) and the 8 / 4 / 2 / 1 keys of the dot and value blocks; head_dim with and
  // without a column tail after whole packets (7, 12, 20, 64, 128).
  const Shape shape = GENERATE(Shape{1, 1, 77, 8, 8, 12}, Shape{2, 1, 45, 4, 2, 64},
                               Shape{1, 1, 70, 6, 2, 20}, Shape{1, 2, 33, 4, 4, 16},
                               Shape{1, 4, 100, 2, 2, 7}, Shape{1, 1, 300, 32, 8, 128},
                               Shape{1, 1, 1, 4, 1, 8}, Shape{3, 3, 31, 3, 3, 24});
  const MaskMode mask = GENERATE(MaskMode::kCausal, MaskMode::kBidirectional);
  const bool alibi = GENERATE(false, true);
  const int threads = GENERATE(1, 2);
  CAPTURE(shape, posenc::to_string(mask), alibi, threads);
  const Problem<float> p(shape, 300 + static_cast<std::uint64_t>(shape.d), 2.0);
  AttentionParams params = make_params(mask, alibi ? shape.heads : 0);
  params.num_threads = threads;
  POSENC_REQUIRE_CLOSE(close(fused(p, params), reference(p, params), 1e-5));
  // Key padding: every third key of sequence 0 masked, sequence 1 (if any) a left-padded run.
  std::vector<std::uint8_t> key_mask(static_cast<std::size_t>(shape.batch * shape.k_len), 1);
  for (Eigen::Index j = 0; j < shape.k_len; ++j) {
    key_mask[static_cast<std::size_t>(j)] = static_cast<std::uint8_t>(j % 3 != 1);
    if (shape.batch > 1 && j < shape.k_len / 2) key_mask[static_cast<std::size_t>(shape.k_len + j)] = 0;
  }
  AttentionMetadata meta;
  meta.key_mask = posenc::ConstTensorView<std::uint8_t, 2>(key_mask.data(), shape.batch, shape.k_len);
  const auto out = fused(p, params, meta);
  for (const float x : out) REQUIRE(std::isfinite(x));
  POSENC_REQUIRE_CLOSE(close(out, reference(p, params, meta), 1e-5));
}

TEST_CASE("attention: decode with key lengths ending inside a key step, rows of one and four "
          "pages, equals the reference", "[attention][fused][decode]") {
  // The decode item requests the page starts of rows kAttnDecodePageAhead keys ahead; the requests
  // must stop at each sequence's last visible key (650 ends inside a step, before k_len), and
  // cover every page of a row (kv 32 x 128 floats = 4 pages).
  for (const Eigen::Index kv_heads : {8, 32}) {
    CAPTURE(kv_heads);
    const Problem<float> p(2, 1, 700, 32, kv_heads, 128, 77);
    const std::vector<std::int64_t> lengths = {700, 650};
    AttentionMetadata meta;
    meta.key_lengths = posenc::ConstTensorView<std::int64_t, 1>(lengths.data(), 2);
    const AttentionParams params = make_params(MaskMode::kBidirectional, 32);
    POSENC_REQUIRE_CLOSE(close(fused(p, params, meta), reference(p, params, meta), 1e-5));
  }
}

TEST_CASE("attention: a GQA decode over 16 MiB of K / V per sequence (whole slices requested "
          "ahead) equals the reference", "[attention][fused][decode]") {
  // Each sequence's item reads >= 2090 keys x 8 kv heads x 128 floats x (K + V) > 16 MiB, so
  // the decode item also requests kv-head slices ahead of its reads (kFromMemoryBytes);
  // the key lengths end both sequences inside a key step, where the requests must stop too.
  STATIC_REQUIRE(2 * 2090 * 8 * 128 * sizeof(float) >=
                 static_cast<std::size_t>(posenc::detail::kFromMemoryBytes));
  const Problem<float> p(2, 1, 2100, 32, 8, 128, 77);
  const std::vector<std::int64_t> lengths = {2100, 2090};
  AttentionMetadata meta;
  meta.key_lengths = posenc::ConstTensorView<std::int64_t, 1>(lengths.data(), 2);
  const AttentionParams params = make_params(MaskMode::kBidirectional, 32);
  POSENC_REQUIRE_CLOSE(close(fused(p, params, meta), reference(p, params, meta), 1e-5));
}

TEMPLATE_TEST_CASE("attention: an MHA decode over more K / V than the L3 (rows read in address "
                   "order, slices requested bytes ahead) equals the reference",
                   "[attention][fused][decode]", float, Eigen::bfloat16) {
  // One row per kv head (32 / 32) and >= 32 MiB of K + V per sequence, every kv head of a
  // sequence in one item (on 2 threads, one sequence each): the decode item reads the rows key
  // after key and requests each kv head's slice kAttnDecodeBytesAhead bytes on
  // (kAttnDecodeStreamBytes). The key lengths end inside a key step and one sequence before
  // its last row, where the requests must stop.
  const Eigen::Index k_len = std::is_same_v<TestType, float> ? 1100 : 2200;
  STATIC_REQUIRE(2 * 1090 * 32 * 128 * sizeof(float) >=
                 static_cast<std::size_t>(posenc::detail::kAttnDecodeStreamBytes));
  STATIC_REQUIRE(2 * 2190 * 32 * 128 * 2 >=
                 static_cast<std::size_t>(posenc::detail::kAttnDecodeStreamBytes));
  const Problem<TestType> p(2, 1, k_len, 32, 32, 128, 78);
  const std::vector<std::int64_t> lengths = {k_len, k_len - 10};
  AttentionMetadata meta;
  meta.key_lengths = posenc::ConstTensorView<std::int64_t, 1>(lengths.data(), 2);
  // No ALiBi: every key keeps a weight near 1 / k_len, so a wrong score anywhere shows.
  AttentionParams params = make_params(MaskMode::kCausal);
  params.num_threads = GENERATE(1, 2);
  CAPTURE(params.num_threads);
  // bfloat16 outputs: the two paths may round to neighbouring values, 2^-7 apart relative.
  const double abs_tol = std::is_same_v<TestType, float> ? 1e-5 : 1e-6;
  const double rel_tol = std::is_same_v<TestType, float> ? 0.0 : 1.0 / 128;
  const auto got = fused(p, params, meta), want = reference(p, params, meta);
  POSENC_REQUIRE_CLOSE(posenc_test::compare(
      got.size(), [&](std::size_t i) { return static_cast<double>(got[i]); },
      [&](std::size_t i) { return static_cast<double>(want[i]); }, abs_tol, rel_tol));
}

TEMPLATE_TEST_CASE("attention: decode over 16-bit and double K / V accumulates in float / double",
                   "[attention][dtype][decode]", float, double, Eigen::half, Eigen::bfloat16) {
  // R = 4 and R = 1 rows per kv head, 75 keys (two full 32-key steps and a tail).
  for (const Eigen::Index kv_heads : {2, 8}) {
    CAPTURE(kv_heads);
    const Problem<TestType> p(1, 1, 75, 8, kv_heads, 40, 13);
    const auto params = make_params(MaskMode::kCausal, 8);
    const double tol = std::is_same_v<TestType, double> ? 1e-12
                       : std::is_same_v<TestType, float> ? 1e-5
                       : std::is_same_v<TestType, Eigen::half> ? 2e-3 : 1.6e-2;
    POSENC_REQUIRE_CLOSE(close(fused(p, params), reference(p, params), tol));
  }
}

// ---- sliding window ----------------------------------------------------------------------------
// Query i (a = i + k_len - q_len) sees key j iff a - j < W (causal, j <= a) or |a - j| < W
// (bidirectional): HF's sliding_window_overlay, kv_idx > q_idx - sliding_window.

namespace {

/// Keys [first, last] query i may see with window W (the rule above), before key padding.
std::pair<Eigen::Index, Eigen::Index> window_keys(Eigen::Index i, Eigen::Index q_len,
                                                  Eigen::Index k_len, Eigen::Index w, MaskMode mask) {
  const Eigen::Index a = i + k_len - q_len;
  const Eigen::Index last = mask == MaskMode::kCausal ? std::min(a, k_len - 1) : std::min(a + w - 1, k_len - 1);
  return {std::max<Eigen::Index>(0, a - w + 1), last};
}

}  // namespace

TEST_CASE("attention: a sliding window of 1 returns each query's own value row, exactly",
          "[attention][window]") {
  // W = 1 leaves one visible key, j = a: its weight is exp(0) / exp(0) = 1 and out = v_a bit for
  // bit. q_len > k_len leaves the first q_len - k_len queries no key at all (zeros). Shapes: decode
  // rows (q_len x group <= 4), several heads per item, 48-row items over 64-key tiles.
  const Shape shape = GENERATE(Shape{1, 1, 77, 8, 8, 12}, Shape{2, 3, 40, 8, 2, 16},
                               Shape{1, 130, 130, 4, 1, 32}, Shape{2, 20, 150, 8, 2, 64},
                               Shape{1, 10, 6, 2, 2, 8});
  const MaskMode mask = GENERATE(MaskMode::kCausal, MaskMode::kBidirectional);
  CAPTURE(shape, posenc::to_string(mask));
  const Problem<float> p(shape, 900, 2.0);
  AttentionParams params = make_params(mask, shape.heads);  // ALiBi cannot move a lone key
  params.sliding_window = 1;
  const auto got = fused(p, params), ref = reference(p, params);
  const Eigen::Index group = shape.heads / shape.kv_heads, d = shape.d;
  for (Eigen::Index b = 0; b < shape.batch; ++b) {
    for (Eigen::Index i = 0; i < shape.q_len; ++i) {
      const Eigen::Index a = i + shape.k_len - shape.q_len;
      for (Eigen::Index h = 0; h < shape.heads; ++h) {
        for (Eigen::Index c = 0; c < d; ++c) {
          const float want = a < 0 ? 0.0f
                                   : p.v[static_cast<std::size_t>(((b * shape.k_len + a) * shape.kv_heads + h / group) * d + c)];
          const auto at = static_cast<std::size_t>(((b * shape.q_len + i) * shape.heads + h) * d + c);
          REQUIRE(got[at] == want);
          REQUIRE(ref[at] == want);
        }
      }
    }
  }
}

TEST_CASE("attention: with equal scores a sliding window averages exactly the keys it covers",
          "[attention][window]") {
  // K = 0 makes every score 0, so each query's weights are uniform over its visible keys and
  // out = the mean of V over [max(0, a - W + 1), a] (causal) or up to min(a + W - 1, k_len - 1)
  // (bidirectional), computed here in double from V. Windows on both sides of the 64-key tile
  // and of k_len; the chunk (q_len < k_len) is bottom-right aligned; key_lengths cut sequence 1.
  const Shape shape = GENERATE(Shape{2, 200, 200, 4, 2, 16}, Shape{2, 30, 300, 8, 8, 8},
                               Shape{2, 1, 300, 8, 2, 32});
  const Eigen::Index w = GENERATE(2, 63, 64, 65, 100, 299, 300, 1000);
  const MaskMode mask = GENERATE(MaskMode::kCausal, MaskMode::kBidirectional);
  const int threads = GENERATE(1, 2);
  CAPTURE(shape, w, posenc::to_string(mask), threads);
  Problem<float> p(shape, 910);
  std::fill(p.k.begin(), p.k.end(), 0.0f);
  AttentionParams params = make_params(mask);
  params.sliding_window = w;
  params.num_threads = threads;
  const std::vector<std::int64_t> lengths = {shape.k_len, shape.k_len - 37};
  AttentionMetadata meta;
  meta.key_lengths = posenc::ConstTensorView<std::int64_t, 1>(lengths.data(), 2);
  std::vector<double> want(p.out_size(), 0.0);
  const Eigen::Index group = shape.heads / shape.kv_heads, d = shape.d;
  for (Eigen::Index b = 0; b < 2; ++b) {
    for (Eigen::Index i = 0; i < shape.q_len; ++i) {
      auto [first, last] = window_keys(i, shape.q_len, shape.k_len, w, mask);
      last = std::min<Eigen::Index>(last, lengths[static_cast<std::size_t>(b)] - 1);
      for (Eigen::Index h = 0; h < shape.heads; ++h) {
        for (Eigen::Index c = 0; c < d; ++c) {
          double sum = 0.0;
          for (Eigen::Index j = first; j <= last; ++j) {
            sum += p.v[static_cast<std::size_t>(((b * shape.k_len + j) * shape.kv_heads + h / group) * d + c)];
          }
          want[static_cast<std::size_t>(((b * shape.q_len + i) * shape.heads + h) * d + c)] =
              last >= first ? sum / static_cast<double>(last - first + 1) : 0.0;
        }
      }
    }
  }
  POSENC_REQUIRE_CLOSE(close(fused(p, params, meta), want, 1e-5));
  POSENC_REQUIRE_CLOSE(close(reference(p, params, meta), want, 1e-7));  // rounded to float
}

TEST_CASE("attention: sliding-window attention equals the reference over shapes, masks, ALiBi "
          "and key padding", "[attention][window]") {
  // Random scores: the window's edges inside and across tiles, items of several q tiles per kv
  // head (400 queries: the packed K/V run moves with the window), decode and multi-head items.
  const Shape shape = GENERATE(Shape{1, 400, 400, 2, 1, 32}, Shape{2, 70, 333, 8, 2, 80},
                               Shape{1, 1, 500, 32, 8, 128}, Shape{2, 4, 90, 8, 8, 24},
                               Shape{1, 12, 200, 16, 2, 40});
  const Eigen::Index w = GENERATE(1, 17, 64, 129, 450);
  const MaskMode mask = GENERATE(MaskMode::kCausal, MaskMode::kBidirectional);
  const bool alibi = GENERATE(false, true);
  CAPTURE(shape, w, posenc::to_string(mask), alibi);
  const Problem<float> p(shape, 920 + static_cast<std::uint64_t>(w), 2.0);
  AttentionParams params = make_params(mask, alibi ? shape.heads : 0);
  params.sliding_window = w;
  const auto got = fused(p, params);
  POSENC_REQUIRE_CLOSE(close(got, reference(p, params), 1e-5));
  params.num_threads = 2;
  CHECK(fused(p, params) == got);
  // Left-padded sequence 1 (first 50 slots masked), every 7th key of sequence 0 masked.
  std::vector<std::uint8_t> key_mask(static_cast<std::size_t>(shape.batch * shape.k_len), 1);
  for (Eigen::Index j = 0; j < shape.k_len; ++j) {
    key_mask[static_cast<std::size_t>(j)] = static_cast<std::uint8_t>(j % 7 != 3);
    if (shape.batch > 1 && j < 50) key_mask[static_cast<std::size_t>(shape.k_len + j)] = 0;
  }
  AttentionMetadata meta;
  meta.key_mask = posenc::ConstTensorView<std::uint8_t, 2>(key_mask.data(), shape.batch, shape.k_len);
  POSENC_REQUIRE_CLOSE(close(fused(p, params, meta), reference(p, params, meta), 1e-5));
}

TEST_CASE("attention: a window as wide as the keys changes nothing, a narrower one does",
          "[attention][window]") {
  const Problem<float> p(1, 150, 150, 4, 2, 32, 930, 2.0);
  for (const MaskMode mask : {MaskMode::kCausal, MaskMode::kBidirectional}) {
    CAPTURE(posenc::to_string(mask));
    AttentionParams params = make_params(mask, 4);
    const auto none = fused(p, params);
    params.sliding_window = 150;  // a - j <= 149 for every pair: every key stays visible
    CHECK(fused(p, params) == none);
    params.sliding_window = std::int64_t{1} << 62;
    CHECK(fused(p, params) == none);
    params.sliding_window = 149;  // the last query loses key 0 (and the first, bidirectional, key 149)
    CHECK(max_abs_diff(fused(p, params), none) > 1e-4);
  }
}

TEST_CASE("attention: a sliding window over more keys than stay packed equals the reference",
          "[attention][window][workspace]") {
  // 25000 keys of d = 8 exceed the 21824 keys kept packed, and 120 queries make three work items
  // per kv head: their windows start inside and past the packed run.
  const Problem<float> p(1, 120, 25000, 2, 1, 8, 940);
  for (const Eigen::Index w : {100, 3000, 24000}) {
    CAPTURE(w);
    AttentionParams params = make_params(MaskMode::kCausal);
    params.sliding_window = w;
    POSENC_REQUIRE_CLOSE(close(fused(p, params), reference(p, params), 1e-5));
  }
}

// ---- logit soft cap (Gemma-2) ------------------------------------------------------------------

namespace {
/// Shapes for the features that change the scores (soft cap, sinks): a 130 x 130 prefill
/// item, a GQA 32/8 decode, a batch of short multi-head rows and a 12 x 200 chunk.
const std::vector<Shape> kScoreFeatureShapes = {Shape{1, 130, 130, 4, 2, 64}, Shape{1, 1, 300, 32, 8, 128},
                                                Shape{2, 4, 90, 8, 8, 24}, Shape{1, 12, 200, 16, 2, 40}};
}  // namespace

TEST_CASE("attention: a logit soft cap c turns scores s into c tanh(s / c) before the softmax",
          "[attention][softcap]") {
  // One query against keys whose scores are s_j = q.k_j (scale 1): q = e_0, k_j = s_j e_0, and
  // V rows e_j, so out = the weights: softmax_j(c tanh(s_j / c)), computed here in long double.
  const std::vector<double> scores = {3.0, 0.0, -3.0, 40.0, -1e4, 1e4};
  const Eigen::Index n = static_cast<Eigen::Index>(scores.size()), d = n;
  for (const double cap : {2.0, 50.0}) {
    CAPTURE(cap);
    std::vector<float> q(static_cast<std::size_t>(d), 0.0f), k(static_cast<std::size_t>(n * d), 0.0f),
        v(static_cast<std::size_t>(n * d), 0.0f);
    q[0] = 1.0f;
    for (Eigen::Index j = 0; j < n; ++j) {
      k[static_cast<std::size_t>(j * d)] = static_cast<float>(scores[static_cast<std::size_t>(j)]);
      v[static_cast<std::size_t>(j * d + j)] = 1.0f;
    }
    long double capped[6], total = 0.0L;
    for (Eigen::Index j = 0; j < n; ++j) {
      capped[j] = cap * std::tanh(static_cast<long double>(scores[static_cast<std::size_t>(j)]) / cap);
    }
    const long double top = *std::max_element(capped, capped + n);
    for (Eigen::Index j = 0; j < n; ++j) total += std::exp(capped[j] - top);
    AttentionParams params = make_params(MaskMode::kBidirectional);
    params.scale = 1.0;
    params.logit_softcap = cap;
    for (const bool use_fused : {true, false}) {
      std::vector<float> out(static_cast<std::size_t>(d), -1.0f);
      const posenc::ConstTensorView<float, 4> Q(q.data(), 1, 1, 1, d), K(k.data(), 1, n, 1, d), V(v.data(), 1, n, 1, d);
      const posenc::TensorView<float, 4> O(out.data(), 1, 1, 1, d);
      if (use_fused) {
        posenc::attention<float>(Q, K, V, O, params);
      } else {
        posenc::reference::attention<float>(Q, K, V, O, params);
      }
      for (Eigen::Index j = 0; j < n; ++j) {
        const double want = static_cast<double>(std::exp(capped[j] - top) / total);
        CAPTURE(use_fused, j);
        CHECK_THAT(out[static_cast<std::size_t>(j)], WithinAbs(want, 2e-7));
      }
    }
  }
}

TEST_CASE("attention: soft-capped attention equals the reference over prefill, decode, windows "
          "and ALiBi", "[attention][softcap]") {
  const Shape shape = GENERATE(from_range(kScoreFeatureShapes));
  const MaskMode mask = GENERATE(MaskMode::kCausal, MaskMode::kBidirectional);
  const bool alibi = GENERATE(false, true);
  const std::int64_t window = GENERATE(0, 50);
  CAPTURE(shape, posenc::to_string(mask), alibi, window);
  // Amplitude 6: scale q.k reaches ~25 for d = 128, well into the cap's bend at c = 5.
  const Problem<float> p(shape, 950, 6.0);
  AttentionParams params = make_params(mask, alibi ? shape.heads : 0);
  params.logit_softcap = 5.0;
  params.sliding_window = window;
  const auto capped = fused(p, params);
  POSENC_REQUIRE_CLOSE(close(capped, reference(p, params), 1e-5));
  params.logit_softcap = 0.0;
  CHECK(max_abs_diff(fused(p, params), capped) > 1e-3);  // the cap changed the result
}

// ---- attention sinks (GPT-OSS) -----------------------------------------------------------------

TEST_CASE("attention: a sink logit adds exp(sink) to the softmax denominator and nothing else",
          "[attention][sinks]") {
  // One query per head against keys with scores s_j = q.k_j (scale 1; q = e_0, k_j = s_j e_0)
  // and V rows e_j, so out = the weights exp(s_j) / (exp(sink_h) + sum_k exp(s_k)), here in
  // long double. Head 1's sink dwarfs every score. Separately, the first row of a causal call
  // with q_len = n + 1 sees no key and must stay 0.
  const std::vector<double> scores = {2.0, 0.0, -1.0, 30.0, -50.0};
  const std::vector<double> sinks = {29.0, 40.0, 26.0};  // near the top score 30, and above it
  const Eigen::Index n = static_cast<Eigen::Index>(scores.size()), d = n, H = 3;
  std::vector<float> q(static_cast<std::size_t>(2 * H * d), 0.0f), k(static_cast<std::size_t>(n * d), 0.0f),
      v(static_cast<std::size_t>(n * d), 0.0f);
  for (Eigen::Index r = 0; r < 2 * H; ++r) q[static_cast<std::size_t>(r * d)] = 1.0f;
  for (Eigen::Index j = 0; j < n; ++j) {
    k[static_cast<std::size_t>(j * d)] = static_cast<float>(scores[static_cast<std::size_t>(j)]);
    v[static_cast<std::size_t>(j * d + j)] = 1.0f;
  }
  AttentionParams params = make_params(MaskMode::kCausal);
  params.scale = 1.0;
  params.sink_logits = sinks;
  for (const bool use_fused : {true, false}) {
    // Causal, bottom-right: row 1 of q_len = 2 sees all n keys (checked); row 0 sees n - 1.
    std::vector<float> out(static_cast<std::size_t>(2 * H * d), -1.0f);
    const posenc::ConstTensorView<float, 4> Q(q.data(), 1, 2, H, d), K(k.data(), 1, n, 1, d),
        V(v.data(), 1, n, 1, d);
    const posenc::TensorView<float, 4> O(out.data(), 1, 2, H, d);
    std::vector<double> w(static_cast<std::size_t>(H * 2 * n), -1.0);
    if (use_fused) {
      posenc::attention<float>(Q, K, V, O, params);
    } else {
      posenc::reference::attention<float>(Q, K, V, O, params, {},
                                          posenc::TensorView<double, 4>(w.data(), 1, H, 2, n));
    }
    for (Eigen::Index h = 0; h < H; ++h) {
      long double total = std::exp(static_cast<long double>(sinks[static_cast<std::size_t>(h)]));
      for (const double sj : scores) total += std::exp(static_cast<long double>(sj));
      long double weight_sum = 0.0L;
      for (Eigen::Index j = 0; j < n; ++j) {
        const long double want = std::exp(static_cast<long double>(scores[static_cast<std::size_t>(j)])) / total;
        weight_sum += want;
        CAPTURE(use_fused, h, j);
        CHECK_THAT(out[static_cast<std::size_t>((H + h) * d + j)], WithinAbs(static_cast<double>(want), 2e-7));
        if (!use_fused) {
          CHECK_THAT(w[static_cast<std::size_t>((h * 2 + 1) * n + j)], WithinAbs(static_cast<double>(want), 1e-15));
        }
      }
      // The case is one where every head's sink takes a real share (>= 1.8 %) of the softmax.
      CHECK(weight_sum < 1.0L - 1e-2L);
    }
  }
  // A row with no visible key gives 0 with a sink too (its denominator holds the sink alone).
  std::vector<float> out(static_cast<std::size_t>((n + 1) * H * d), -1.0f);
  std::vector<float> q_long(out.size(), 1.0f);
  posenc::attention<float>(posenc::ConstTensorView<float, 4>(q_long.data(), 1, n + 1, H, d),
                           posenc::ConstTensorView<float, 4>(k.data(), 1, n, 1, d),
                           posenc::ConstTensorView<float, 4>(v.data(), 1, n, 1, d),
                           posenc::TensorView<float, 4>(out.data(), 1, n + 1, H, d), params);
  for (Eigen::Index c = 0; c < H * d; ++c) CHECK(out[static_cast<std::size_t>(c)] == 0.0f);
}

TEST_CASE("attention: with sinks the fused kernel equals the reference over prefill, decode, "
          "windows, ALiBi, the soft cap and threads", "[attention][sinks]") {
  const Shape shape = GENERATE(from_range(kScoreFeatureShapes));
  const MaskMode mask = GENERATE(MaskMode::kCausal, MaskMode::kBidirectional);
  const bool alibi = GENERATE(false, true);
  const int variant = GENERATE(0, 1, 2);  // plain, window 50, soft cap 5 on 2 threads
  CAPTURE(shape, posenc::to_string(mask), alibi, variant);
  const Problem<float> p(shape, 960, 2.0);
  AttentionParams params = make_params(mask, alibi ? shape.heads : 0);
  if (variant == 1) params.sliding_window = 50;
  if (variant == 2) {
    params.logit_softcap = 5.0;
    params.num_threads = 2;
  }
  // Sinks around the scores' own range (scale q.k ~ +-5 here), so they move the weights.
  for (Eigen::Index h = 0; h < shape.heads; ++h) params.sink_logits.push_back(double(h % 7) - 2.5);
  const auto with_sinks = fused(p, params);
  POSENC_REQUIRE_CLOSE(close(with_sinks, reference(p, params), 1e-5));
  params.sink_logits.clear();
  CHECK(max_abs_diff(fused(p, params), with_sinks) > 1e-3);  // the sinks changed the result
}

TEST_CASE("attention: key padding by lengths and by mask, rows with no visible key are 0",
          "[attention][padding]") {
  const Problem<float> p(3, 6, 10, 4, 2, 16, 7);
  const std::vector<std::int64_t> lengths = {10, 4, 0};
  std::vector<std::uint8_t> mask(30, 1);
  for (int j = 0; j < 6; ++j) mask[static_cast<std::size_t>(10 + j)] = 0;  // left-padded row 1
  for (int j = 0; j < 10; ++j) mask[static_cast<std::size_t>(20 + j)] = static_cast<std::uint8_t>(j % 3 == 0);
  for (const bool use_mask : {false, true}) {
    for (const MaskMode mode : {MaskMode::kCausal, MaskMode::kBidirectional}) {
      CAPTURE(use_mask, posenc::to_string(mode));
      AttentionMetadata meta;
      if (use_mask) {
        meta.key_mask = posenc::ConstTensorView<std::uint8_t, 2>(mask.data(), 3, 10);
      } else {
        meta.key_lengths = posenc::ConstTensorView<std::int64_t, 1>(lengths.data(), 3);
      }
      const AttentionParams params = make_params(mode, 4);
      const auto out = fused(p, params, meta);
      for (const float x : out) REQUIRE(std::isfinite(x));
      POSENC_REQUIRE_CLOSE(close(out, reference(p, params, meta), 1e-5));
      if (!use_mask) {
        // Sequence 2 has no keys at all: every output is exactly 0.
        for (std::size_t i = 2 * 6 * 4 * 16; i < out.size(); ++i) REQUIRE(out[i] == 0.0f);
      } else if (mode == MaskMode::kCausal) {
        // Sequence 1, left padding: query rows 0..1 (key limits 4, 5) see only padding keys.
        for (std::size_t i = 6 * 4 * 16; i < 6 * 4 * 16 + 2 * 4 * 16; ++i) REQUIRE(out[i] == 0.0f);
      }
    }
  }
}

TEST_CASE("attention: logits of 1e4 neither overflow nor lose the softmax",
          "[attention][numerics]") {
  // q . k * scale = 1e4 * (1, 0.999, 0.998...): exp(1e4) overflows any float; the max-subtracted
  // softmax keeps exponents <= 0. Closed form: weights ~ exp(1e4 (s_j - 1)).
  const Eigen::Index k_len = 5;
  std::vector<float> q = {1.0f}, k(k_len), v(k_len);
  for (Eigen::Index j = 0; j < k_len; ++j) {
    k[static_cast<std::size_t>(j)] = 1.0f - 0.0001f * static_cast<float>(j);
    v[static_cast<std::size_t>(j)] = static_cast<float>(j);
  }
  AttentionParams params;
  params.mask = MaskMode::kBidirectional;
  params.scale = 1e4;
  std::vector<float> out(1);
  posenc::attention<float>(posenc::ConstTensorView<float, 4>(q.data(), 1, 1, 1, 1),
                           posenc::ConstTensorView<float, 4>(k.data(), 1, k_len, 1, 1),
                           posenc::ConstTensorView<float, 4>(v.data(), 1, k_len, 1, 1),
                           posenc::TensorView<float, 4>(out.data(), 1, 1, 1, 1), params);
  double num = 0.0, den = 0.0;
  for (Eigen::Index j = 0; j < k_len; ++j) {
    const double w = std::exp(1e4 * (double(k[static_cast<std::size_t>(j)]) - 1.0));
    num += w * static_cast<double>(j);
    den += w;
  }
  REQUIRE(std::isfinite(out[0]));
  CHECK_THAT(out[0], WithinAbs(num / den, 1e-4));
}

TEST_CASE("attention: permutation equivariance without positions, broken by ALiBi and "
          "absolute encodings", "[attention][seed][permutation]") {
  // Seed 000 §1.2: Attention(PX, PX, PX) = P Attention(X, X, X) with no mask and no position.
  const Eigen::Index n = 12, heads = 2, d = 8;
  const Problem<float> p(1, n, n, heads, heads, d, 31);
  std::vector<Eigen::Index> perm(static_cast<std::size_t>(n));
  std::iota(perm.begin(), perm.end(), 0);
  posenc_test::SplitMix64 rng(5);
  for (Eigen::Index i = n - 1; i > 0; --i) {
    std::swap(perm[static_cast<std::size_t>(i)], perm[static_cast<std::size_t>(rng.integer(0, i))]);
  }
  const std::size_t row = static_cast<std::size_t>(heads * d);
  auto permute = [&](const std::vector<float>& x) {
    std::vector<float> y(x.size());
    for (Eigen::Index i = 0; i < n; ++i) {
      std::copy_n(x.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(perm[static_cast<std::size_t>(i)]) * row),
                  row, y.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(i) * row));
    }
    return y;
  };
  Problem<float> pp = p;
  pp.q = permute(p.q);
  pp.k = permute(p.k);
  pp.v = permute(p.v);

  SECTION("no positional information: outputs are permuted the same way") {
    const auto params = make_params(MaskMode::kBidirectional);
    POSENC_REQUIRE_CLOSE(close(fused(pp, params), permute(fused(p, params)), 1e-6));
  }
  SECTION("ALiBi breaks the identity") {
    const auto params = make_params(MaskMode::kBidirectional, heads);
    CHECK(max_abs_diff(fused(pp, params), permute(fused(p, params))) > 1e-2);
  }
  SECTION("RoPE breaks the identity") {
    posenc::RopeParams rp;
    rp.head_dim = d;
    const auto freqs = posenc::compute_rope_frequencies(rp);
    const auto params = make_params(MaskMode::kBidirectional);
    auto run = [&](const Problem<float>& x) {
      std::vector<float> out(x.out_size());
      posenc::attention_with_rope<float>(x.Q(), x.K(), x.V(), x.view(out), freqs,
                                         posenc::RopeLayout::kHalfSplit, params);
      return out;
    };
    CHECK(max_abs_diff(run(pp), permute(run(p))) > 1e-2);
  }
  SECTION("absolute sinusoidal encodings added to Q and K break the identity") {
    auto add_pe = [&](Problem<float>& x) {
      std::vector<std::int64_t> ids(static_cast<std::size_t>(n));
      std::iota(ids.begin(), ids.end(), 0);
      for (auto* buf : {&x.q, &x.k}) {
        posenc::add_sinusoidal_inplace<float>(posenc::TensorView<float, 3>(buf->data(), 1, n, heads * d),
                                              posenc::PositionIdsView(ids.data(), 1, n));
      }
    };
    Problem<float> a = p, b = pp;
    add_pe(a);
    add_pe(b);
    const auto params = make_params(MaskMode::kBidirectional);
    CHECK(max_abs_diff(fused(b, params), permute(fused(a, params))) > 1e-2);
  }
}

TEST_CASE("attention: ALiBi uses absolute positions, so left padding does not shift it",
          "[attention][alibi][padding]") {
  // Sequence A unpadded (positions 0..4); sequence B is A left-padded by 3 slots with the same
  // positions for the real tokens: the real rows must produce the same outputs.
  const Eigen::Index n = 5, pad = 3, heads = 4, d = 16;
  const Problem<float> a(1, n, n, heads, heads, d, 77);
  Problem<float> b(1, n + pad, n + pad, heads, heads, d, 78);
  const std::size_t row = static_cast<std::size_t>(heads * d);
  std::copy(a.q.begin(), a.q.end(), b.q.begin() + static_cast<std::ptrdiff_t>(pad * row));
  std::copy(a.k.begin(), a.k.end(), b.k.begin() + static_cast<std::ptrdiff_t>(pad * row));
  std::copy(a.v.begin(), a.v.end(), b.v.begin() + static_cast<std::ptrdiff_t>(pad * row));
  std::vector<std::int64_t> pos(static_cast<std::size_t>(n + pad), 0);
  std::vector<std::uint8_t> mask(static_cast<std::size_t>(n + pad), 0);
  for (Eigen::Index i = 0; i < n; ++i) {
    pos[static_cast<std::size_t>(pad + i)] = i;
    mask[static_cast<std::size_t>(pad + i)] = 1;
  }
  AttentionMetadata meta;
  meta.query_positions = posenc::PositionIdsView(pos.data(), 1, n + pad);
  meta.key_positions = posenc::PositionIdsView(pos.data(), 1, n + pad);
  meta.key_mask = posenc::ConstTensorView<std::uint8_t, 2>(mask.data(), 1, n + pad);
  for (const MaskMode mode : {MaskMode::kCausal, MaskMode::kBidirectional}) {
    CAPTURE(posenc::to_string(mode));
    const auto params = make_params(mode, heads);
    const auto out_a = fused(a, params);
    const auto out_b = fused(b, params, meta);
    const std::vector<float> tail(out_b.begin() + static_cast<std::ptrdiff_t>(pad * row), out_b.end());
    POSENC_REQUIRE_CLOSE(close(tail, out_a, 1e-6));
  }
}

TEMPLATE_TEST_CASE("attention: 16-bit and double storage accumulate in float / double",
                   "[attention][dtype]", float, double, Eigen::half, Eigen::bfloat16) {
  const Problem<TestType> p(1, 40, 70, 4, 2, 32, 9);
  const auto params = make_params(MaskMode::kCausal, 4);
  const double tol = std::is_same_v<TestType, double> ? 1e-12
                     : std::is_same_v<TestType, float> ? 1e-5
                     : std::is_same_v<TestType, Eigen::half> ? 2e-3 : 1.6e-2;
  // Both paths read the same rounded inputs; the tolerance is one rounding of the output.
  POSENC_REQUIRE_CLOSE(close(fused(p, params), reference(p, params), tol));
}

TEMPLATE_TEST_CASE("attention: 16-bit K / V with a head_dim column tail equal the reference",
                   "[attention][dtype]", Eigen::half, Eigen::bfloat16) {
  // head_dim 12 and 20 are not multiples of 8 or 16 floats: the packed K / V rows end in
  // columns converted one at a time after the packets widened in registers.
  const double tol = std::is_same_v<TestType, Eigen::half> ? 2e-3 : 1.6e-2;
  for (const Eigen::Index d : {12, 20}) {
    INFO("head_dim " << d);
    const Problem<TestType> p(1, 40, 70, 4, 2, d, 9);
    const auto params = make_params(MaskMode::kCausal, 4);
    POSENC_REQUIRE_CLOSE(close(fused(p, params), reference(p, params), tol));
  }
}

TEST_CASE("attention: results do not depend on the thread count", "[attention][threads]") {
  const Problem<float> p(2, 100, 100, 8, 2, 64, 3);
  AttentionParams one = make_params(MaskMode::kCausal, 8), two = one;
  two.num_threads = 2;
  posenc::AttentionWorkspace ws;
  std::vector<float> a(p.out_size()), b(p.out_size());
  posenc::attention<float>(p.Q(), p.K(), p.V(), p.view(a), one, {}, &ws);
  posenc::attention<float>(p.Q(), p.K(), p.V(), p.view(b), two, {}, &ws);
  CHECK(a == b);
  // Per thread: Q^T, Q, O of 48 rows x 64, the 64 x 48 score tile, and K, V packed with a row
  // pad of 16: 100 keys rounded up to two tiles kept for the next item, plus one tile.
  CHECK(ws.size() <= 2 * (48 * 64 * 3 + 64 * 48 + 2 * (128 + 64) * (64 + 16)));
  {
    // 8 kv heads, 3 query tiles each: the two threads share heads as well as tiles.
    const Problem<float> h(1, 130, 130, 8, 8, 32, 5);
    std::vector<float> ha(h.out_size()), hb(h.out_size());
    posenc::attention<float>(h.Q(), h.K(), h.V(), h.view(ha), one, {}, &ws);
    posenc::attention<float>(h.Q(), h.K(), h.V(), h.view(hb), two, {}, &ws);
    CHECK(ha == hb);
    POSENC_REQUIRE_CLOSE(close(hb, reference(h, two), 1e-5));
  }
  {
    // Chunks of a few tokens (q_len * group = 8: several kv heads per item). Two threads give
    // each thread fewer heads per item; the key tile, where the online softmax rescales, used
    // to follow (42 keys for 3 heads, 64 for 2), so bits moved with num_threads (found by
    // tests/fuzz/fuzz_attention.cpp).
    const Problem<float> m(1, 2, 200, 12, 3, 128, 11);
    AttentionParams one12 = make_params(MaskMode::kCausal, 12), two12 = one12;
    two12.num_threads = 2;
    std::vector<float> ma(m.out_size()), mb(m.out_size());
    posenc::attention<float>(m.Q(), m.K(), m.V(), m.view(ma), one12, {}, &ws);
    posenc::attention<float>(m.Q(), m.K(), m.V(), m.view(mb), two12, {}, &ws);
    CHECK(ma == mb);
    POSENC_REQUIRE_CLOSE(close(mb, reference(m, two12), 1e-5));
  }
}

TEST_CASE("attention: the workspace stops growing with k_len, keys past the packed prefix are right",
          "[attention][workspace]") {
  // d = 8: packed rows of 8 + 16 floats, so the 4 MiB of K + V kept packed hold 21824 keys
  // (a whole number of 64-key tiles); 25000 and 50000 keys both run past them.
  posenc::AttentionWorkspace ws;
  std::size_t sizes[2] = {};
  int i = 0;
  for (Eigen::Index k_len : {25000, 50000}) {
    const Problem<float> p(1, 60, k_len, 2, 1, 8, 41);  // 60 x 2 rows: three work items
    const AttentionParams params = make_params(MaskMode::kCausal);
    std::vector<float> out(p.out_size(), -7.0f);
    posenc::attention<float>(p.Q(), p.K(), p.V(), p.view(out), params, {}, &ws);
    POSENC_REQUIRE_CLOSE(close(out, reference(p, params), 1e-5));
    sizes[i++] = ws.size();
  }
  CHECK(sizes[1] == sizes[0]);
  CHECK(sizes[0] * sizeof(float) <= (std::size_t{4} << 20) + 2 * 64 * 24 * sizeof(float) +
                                        (3 * 48 * 8 + 64 * 48) * sizeof(float));
}

TEST_CASE("attention: one work item per kv head packs K/V tile by tile, keeping nothing",
          "[attention][workspace]") {
  // 40 queries x 1 head fit one 48-row work item: no later item would reuse packed rows, so
  // the workspace holds one 64-key K and V tile (rows of 64 + 16 floats), not 5000 keys' worth.
  const Problem<float> p(1, 40, 5000, 1, 1, 64, 47);
  const AttentionParams params = make_params(MaskMode::kCausal);
  posenc::AttentionWorkspace ws;
  std::vector<float> out(p.out_size(), -7.0f);
  posenc::attention<float>(p.Q(), p.K(), p.V(), p.view(out), params, {}, &ws);
  POSENC_REQUIRE_CLOSE(close(out, reference(p, params), 1e-5));
  CHECK(ws.size() <= 48 * 64 * 3 + 64 * 48 + 2 * 64 * (64 + 16));
}

TEST_CASE("attention: a reused workspace sees K and V rewritten in place between calls",
          "[attention][workspace]") {
  // Packed K/V rows are kept from one work item to the next within a call; the next call must
  // pack again even though the caller's pointers are the same (a KV cache appends in place).
  Problem<float> p(1, 150, 150, 2, 1, 16, 43);  // 150 x 2 rows: seven work items, one kv head
  const AttentionParams params = make_params(MaskMode::kCausal);
  posenc::AttentionWorkspace ws;
  std::vector<float> out(p.out_size(), -7.0f);
  posenc::attention<float>(p.Q(), p.K(), p.V(), p.view(out), params, {}, &ws);
  POSENC_REQUIRE_CLOSE(close(out, reference(p, params), 1e-5));
  for (auto& x : p.k) x = -0.5f * x + 0.25f;
  for (auto& x : p.v) x = 2.0f * x - 1.0f;
  posenc::attention<float>(p.Q(), p.K(), p.V(), p.view(out), params, {}, &ws);
  POSENC_REQUIRE_CLOSE(close(out, reference(p, params), 1e-5));
}

TEST_CASE("attention: bad input throws before anything is written", "[attention][errors]") {
  const Problem<float> p(1, 4, 6, 4, 2, 8, 1);
  std::vector<float> out(p.out_size(), 3.0f);
  auto unchanged = [&] { return std::all_of(out.begin(), out.end(), [](float x) { return x == 3.0f; }); };
  auto run = [&](const Problem<float>& x, const AttentionParams& params, const AttentionMetadata& meta = {}) {
    posenc::attention<float>(x.Q(), x.K(), x.V(), x.view(out), params, meta);
  };
  SECTION("head_dim mismatch") {
    Problem<float> bad = p;
    bad.k.resize(static_cast<std::size_t>(6 * 2 * 4));
    auto K = posenc::ConstTensorView<float, 4>(bad.k.data(), 1, 6, 2, 4);
    REQUIRE_THROWS_MATCHES(posenc::attention<float>(p.Q(), K, K, p.view(out), {}), std::invalid_argument,
                           Catch::Matchers::Message("posenc::attention: k head_dim = 4 must equal q head_dim (8)"));
    CHECK(unchanged());
  }
  SECTION("heads not a multiple of kv_heads") {
    const Problem<float> bad(1, 4, 6, 4, 3, 8, 1);
    REQUIRE_THROWS_WITH(run(bad, {}), Contains("heads = 4 must be a multiple of kv_heads = 3"));
    CHECK(unchanged());
  }
  SECTION("slope count != heads") {
    AttentionParams params;
    params.alibi_slopes = posenc::alibi_slopes(3);
    REQUIRE_THROWS_AS(run(p, params), std::invalid_argument);
    REQUIRE_THROWS_WITH(run(p, params), Contains("alibi_slopes has 3 entries") && Contains("heads = 4"));
    CHECK(unchanged());
  }
  SECTION("scale, threads, positions, key_lengths, mask shape") {
    AttentionParams params;
    params.scale = 0.0;
    REQUIRE_THROWS_WITH(run(p, params), Contains("scale = 0 must be finite and > 0"));
    params.scale.reset();
    params.num_threads = 0;
    REQUIRE_THROWS_WITH(run(p, params), Contains("num_threads = 0"));
    std::vector<std::int64_t> pos = {0, 1, -2, 3};
    AttentionMetadata meta;
    meta.query_positions = posenc::PositionIdsView(pos.data(), 1, 4);
    REQUIRE_THROWS_WITH(run(p, {}, meta), Contains("query_positions[0, 2] = -2"));
    std::vector<std::int64_t> lens = {7};
    AttentionMetadata meta2;
    meta2.key_lengths = posenc::ConstTensorView<std::int64_t, 1>(lens.data(), 1);
    REQUIRE_THROWS_WITH(run(p, {}, meta2), Contains("key_lengths[0] = 7 must be in [0, 6]"));
    std::vector<std::uint8_t> km(5, 1);
    AttentionMetadata meta3;
    meta3.key_mask = posenc::ConstTensorView<std::uint8_t, 2>(km.data(), 1, 5);
    REQUIRE_THROWS_WITH(run(p, {}, meta3), Contains("key_mask shape [1, 5] must be [batch, k_len] = [1, 6]"));
    CHECK(unchanged());
  }
  SECTION("logit soft cap") {
    AttentionParams params;
    params.logit_softcap = -1.0;
    REQUIRE_THROWS_WITH(run(p, params), Contains("logit_softcap = -1 must be finite and >= 0"));
    params.logit_softcap = std::numeric_limits<double>::infinity();
    REQUIRE_THROWS_WITH(run(p, params), Contains("logit_softcap = inf must be finite"));
    CHECK(unchanged());
  }
  SECTION("sink logits") {
    AttentionParams params;
    params.sink_logits = {0.0, 1.0, 2.0};
    REQUIRE_THROWS_AS(run(p, params), std::invalid_argument);
    REQUIRE_THROWS_WITH(run(p, params), Contains("sink_logits has 3 entries") && Contains("heads = 4"));
    params.sink_logits = {0.0, 1.0, std::numeric_limits<double>::quiet_NaN(), 2.0};
    REQUIRE_THROWS_WITH(run(p, params), Contains("sink_logits[2] = nan must be finite"));
    CHECK(unchanged());
  }
  SECTION("negative sliding window") {
    AttentionParams params;
    params.sliding_window = -1;
    REQUIRE_THROWS_MATCHES(run(p, params), std::invalid_argument,
                           Catch::Matchers::Message("posenc::attention: sliding_window = -1 must be >= 0 (0 = no window)"));
    CHECK(unchanged());
  }
  SECTION("reference: the same checks plus the weights shape") {
    std::vector<double> w(10);
    REQUIRE_THROWS_WITH(posenc::reference::attention<float>(p.Q(), p.K(), p.V(), p.view(out), {}, {},
                                                            posenc::TensorView<double, 4>(w.data(), 1, 1, 2, 5)),
                        Contains("weights shape [1, 1, 2, 5] must be [batch, heads, q_len, k_len] = [1, 4, 4, 6]"));
    CHECK(unchanged());
  }
}

namespace {

/// Rotates a copy of x ([batch, seq, heads, d]) by positions with the RoPE kernels.
std::vector<float> rotated(const std::vector<float>& x, Eigen::Index batch, Eigen::Index seq,
                           Eigen::Index heads, Eigen::Index d, const std::vector<std::int64_t>& pos,
                           const posenc::RopeFrequencies& freqs, posenc::RopeLayout layout) {
  std::vector<float> y = x;
  posenc::apply_rope_inplace<float>(posenc::TensorView<float, 4>(y.data(), batch, seq, heads, d),
                                    posenc::PositionIdsView(pos.data(), batch, seq), freqs, layout);
  return y;
}

}  // namespace

TEST_CASE("attention: with RoPE equals the reference on rotated Q and K", "[attention][rope]") {
  const Shape shape = GENERATE(Shape{1, 1, 50, 8, 2, 64}, Shape{2, 33, 70, 4, 1, 80},
                               Shape{1, 40, 40, 2, 2, 256}, Shape{1, 9, 9, 8, 1, 128});
  const posenc::RopeLayout layout = GENERATE(posenc::RopeLayout::kHalfSplit, posenc::RopeLayout::kInterleaved);
  const bool alibi = GENERATE(false, true);
  CAPTURE(shape, posenc::to_string(layout), alibi);
  const Problem<float> p(shape, 55);
  posenc::RopeParams rp;
  rp.head_dim = shape.d;
  rp.layout = layout;
  const auto freqs = posenc::compute_rope_frequencies(rp);
  const auto params = make_params(MaskMode::kCausal, alibi ? shape.heads : 0);
  std::vector<std::int64_t> qpos, kpos;
  for (Eigen::Index b = 0; b < shape.batch; ++b) {
    for (Eigen::Index i = 0; i < shape.q_len; ++i) qpos.push_back(shape.k_len - shape.q_len + i);
    for (Eigen::Index j = 0; j < shape.k_len; ++j) kpos.push_back(j);
  }
  Problem<float> r = p;
  r.q = rotated(p.q, shape.batch, shape.q_len, shape.heads, shape.d, qpos, freqs, layout);
  r.k = rotated(p.k, shape.batch, shape.k_len, shape.kv_heads, shape.d, kpos, freqs, layout);
  std::vector<float> out(p.out_size());
  posenc::attention_with_rope<float>(p.Q(), p.K(), p.V(), p.view(out), freqs, layout, params);
  POSENC_REQUIRE_CLOSE(close(out, reference(r, params), 1e-5));
}

TEST_CASE("attention: RoPE scores depend only on position differences", "[attention][rope]") {
  // <R(m) q, R(n) k> = <q, R(n - m) k> (RoFormer §3.4.2): shifting every position by 1000 leaves
  // the output unchanged (bidirectional, no ALiBi).
  const Problem<float> p(1, 12, 12, 4, 2, 32, 91);
  posenc::RopeParams rp;
  rp.head_dim = 32;
  const auto freqs = posenc::compute_rope_frequencies(rp);
  std::vector<std::int64_t> pos(12), shifted(12);
  for (int i = 0; i < 12; ++i) {
    pos[static_cast<std::size_t>(i)] = i;
    shifted[static_cast<std::size_t>(i)] = 1000 + i;
  }
  auto run = [&](const std::vector<std::int64_t>& ids) {
    AttentionMetadata meta;
    meta.query_positions = posenc::PositionIdsView(ids.data(), 1, 12);
    meta.key_positions = posenc::PositionIdsView(ids.data(), 1, 12);
    std::vector<float> out(p.out_size());
    posenc::attention_with_rope<float>(p.Q(), p.K(), p.V(), p.view(out), freqs, posenc::RopeLayout::kHalfSplit,
                                       make_params(MaskMode::kBidirectional), meta);
    return out;
  };
  const auto a = run(pos), b = run(shifted);
  POSENC_REQUIRE_CLOSE(close(a, b, 2e-5));
  CHECK(max_abs_diff(a, fused(p, make_params(MaskMode::kBidirectional))) > 1e-3);  // RoPE did act
}

TEST_CASE("attention: the RoPE plan's softmax_scale_multiplier scales the default scale",
          "[attention][rope][yarn]") {
  // DeepSeek-V3 YaRN: factor 40, mscale = mscale_all_dim = 1 -> cos/sin factor 1 and softmax
  // multiplier (0.1 ln 40 + 1)^2 ~ 1.87 (field notes §4).
  posenc::RopeParams rp;
  rp.head_dim = 16;
  rp.scaling.type = posenc::RopeScalingType::kYarn;
  rp.scaling.factor = 40.0;
  rp.scaling.original_max_position_embeddings = 4096;
  rp.scaling.mscale = 1.0;
  rp.scaling.mscale_all_dim = 1.0;
  const auto freqs = posenc::compute_rope_frequencies(rp);
  const double multiplier = std::pow(0.1 * std::log(40.0) + 1.0, 2.0);
  REQUIRE_THAT(freqs.softmax_scale_multiplier, Catch::Matchers::WithinRel(multiplier, 1e-12));
  const Problem<float> p(1, 6, 6, 2, 2, 16, 17);
  std::vector<float> out(p.out_size());
  posenc::attention_with_rope<float>(p.Q(), p.K(), p.V(), p.view(out), freqs, posenc::RopeLayout::kHalfSplit,
                                     make_params(MaskMode::kCausal));
  std::vector<std::int64_t> pos = {0, 1, 2, 3, 4, 5};
  Problem<float> r = p;
  r.q = rotated(p.q, 1, 6, 2, 16, pos, freqs, posenc::RopeLayout::kHalfSplit);
  r.k = rotated(p.k, 1, 6, 2, 16, pos, freqs, posenc::RopeLayout::kHalfSplit);
  AttentionParams params = make_params(MaskMode::kCausal);
  params.scale = multiplier / std::sqrt(16.0);
  POSENC_REQUIRE_CLOSE(close(out, reference(r, params), 1e-5));
}

TEST_CASE("attention metadata: assigning a view again rebinds it, the old view's memory stays as it was",
          "[attention][metadata]") {
  // std::optional<TensorMap> would copy the new view's elements into the old one's memory
  // (TensorMap::operator=): a decode loop setting query_positions every step overwrote its first
  // step's buffer. OptionalView rebinds.
  std::int64_t first[2] = {1, 2}, second[2] = {7, 8};
  std::uint8_t mask_a[3] = {1, 1, 1}, mask_b[3] = {0, 1, 1};
  std::uint8_t tree_a[1] = {1}, tree_b[1] = {1};
  posenc::AttentionMetadata meta;
  meta.query_positions = posenc::PositionIdsView(first, 1, 2);
  meta.query_positions = posenc::PositionIdsView(second, 1, 2);
  meta.key_mask = posenc::ConstTensorView<std::uint8_t, 2>(mask_a, 1, 3);
  meta.key_mask = posenc::ConstTensorView<std::uint8_t, 2>(mask_b, 1, 3);
  meta.tree_mask = posenc::ConstTensorView<std::uint8_t, 3>(tree_a, 1, 1, 1);
  meta.tree_mask = posenc::ConstTensorView<std::uint8_t, 3>(tree_b, 1, 1, 1);
  CHECK(first[0] == 1);
  CHECK(first[1] == 2);
  CHECK(mask_a[0] == 1);
  CHECK(meta.query_positions->data() == second);
  CHECK(meta.key_mask->data() == mask_b);
  CHECK(meta.tree_mask->data() == tree_b);
  posenc::AttentionMetadata copy = meta;
  CHECK(copy.key_mask->data() == mask_b);
  meta.key_mask = std::nullopt;
  CHECK_FALSE(meta.key_mask.has_value());
  CHECK(meta.key_mask == std::nullopt);
  CHECK(meta.query_positions != std::nullopt);
  CHECK(copy.key_mask.has_value());
  copy = meta;  // rebinding the whole struct leaves both masks' memory alone too
  CHECK_FALSE(copy.key_mask);
  CHECK(mask_b[0] == 0);
  CHECK(copy.query_positions->data() == second);

  // In use: one decode query over 4 keys, its position set each step through the same
  // metadata, equals a fresh metadata per step.
  const Eigen::Index K = 4, H = 2, D = 8;
  const auto q = posenc_test::random_vector<float>(static_cast<std::size_t>(H * D), 80);
  const auto k = posenc_test::random_vector<float>(static_cast<std::size_t>(K * H * D), 81);
  posenc::AttentionParams params;
  params.alibi_slopes = {0.5, 0.25};
  posenc::AttentionMetadata reused;
  std::int64_t steps[3] = {3, 10, 40};
  for (std::int64_t& pos : steps) {
    reused.query_positions = posenc::PositionIdsView(&pos, 1, 1);
    posenc::AttentionMetadata fresh;
    fresh.query_positions = posenc::PositionIdsView(&pos, 1, 1);
    std::vector<float> a(static_cast<std::size_t>(H * D)), b(a.size());
    const posenc::ConstTensorView<float, 4> qv(q.data(), 1, 1, H, D), kv(k.data(), 1, K, H, D);
    posenc::attention<float>(qv, kv, kv, posenc::TensorView<float, 4>(a.data(), 1, 1, H, D), params, reused);
    posenc::attention<float>(qv, kv, kv, posenc::TensorView<float, 4>(b.data(), 1, 1, H, D), params, fresh);
    CHECK(a == b);
  }
  CHECK(steps[0] == 3);
  CHECK(steps[1] == 10);
}

TEST_CASE("attention: a head_dim column tail over several key tiles equals the reference",
          "[attention][fused]") {
  // head_dim 7 / 13 / 20 leave columns after the last packet (4, 8 or 16 floats), handled by
  // the scalar loops of the value products; over 200+ keys (several 64-key prefill tiles, 128-key
  // decode tiles) a later tile raises the running max and those columns must be rescaled too.
  const Shape shape = GENERATE(Shape{1, 20, 300, 2, 2, 7}, Shape{1, 9, 260, 4, 2, 13},
                               Shape{1, 1, 400, 4, 4, 7}, Shape{2, 1, 300, 4, 2, 13},
                               Shape{1, 2, 300, 2, 2, 20}, Shape{1, 1, 260, 3, 1, 20});
  const MaskMode mask = GENERATE(MaskMode::kCausal, MaskMode::kBidirectional);
  CAPTURE(shape, posenc::to_string(mask));
  const Problem<float> p(shape, 700 + static_cast<std::uint64_t>(shape.d), 3.0);
  const AttentionParams params = make_params(mask);
  POSENC_REQUIRE_CLOSE(close(fused(p, params), reference(p, params), 1e-5));
}

TEST_CASE("attention: k batch, v kv_heads and lse heads are checked before anything is written",
          "[attention][errors]") {
  const Problem<float> p(2, 4, 6, 4, 2, 8, 5);
  std::vector<float> out(p.out_size(), 3.0f);
  std::vector<float> lse(2 * 4 * 4, 3.0f);
  auto unchanged = [&] {
    return std::all_of(out.begin(), out.end(), [](float x) { return x == 3.0f; }) &&
           std::all_of(lse.begin(), lse.end(), [](float x) { return x == 3.0f; });
  };
  const posenc::ConstTensorView<float, 4> k1(p.k.data(), 1, 6, 2, 8);
  REQUIRE_THROWS_WITH(posenc::attention<float>(p.Q(), k1, p.V(), p.view(out)),
                      Contains("k batch = 1 must equal q batch (2)"));
  const posenc::ConstTensorView<float, 4> v1(p.v.data(), 2, 6, 1, 8);
  REQUIRE_THROWS_WITH(posenc::attention<float>(p.Q(), p.K(), v1, p.view(out)),
                      Contains("v shape [2, 6, 1, 8] must be "
                               "[batch, k_len, kv_heads, v_head_dim > 0]"));
  const posenc::TensorView<float, 3> lse3(lse.data(), 2, 4, 3);
  REQUIRE_THROWS_WITH(posenc::attention<float>(p.Q(), p.K(), p.V(), p.view(out), lse3),
                      Contains("lse shape [2, 4, 3] must be [batch, q_len, heads] = [2, 4, 4]"));
  CHECK(unchanged());
}

TEST_CASE("attention: an ALiBi slope of 0 is accepted and leaves its head as plain attention",
          "[attention][alibi]") {
  // Slopes must be finite and >= 0; slope 0 adds -0 * |pos_q - pos_k| = 0 to every score, so
  // head 0 is the reference without ALiBi and head 1 (slope 0.5) the reference with it.
  const Problem<float> p(1, 5, 9, 2, 2, 16, 23);
  for (const MaskMode mask : {MaskMode::kCausal, MaskMode::kBidirectional}) {
    AttentionParams params = make_params(mask);
    params.alibi_slopes = {0.0, 0.5};
    const auto out = fused(p, params);
    const auto plain = reference(p, make_params(mask));
    const auto with = reference(p, params);
    for (Eigen::Index i = 0; i < 5; ++i) {
      for (Eigen::Index c = 0; c < 16; ++c) {
        const auto h0 = static_cast<std::size_t>((i * 2 + 0) * 16 + c);
        const auto h1 = static_cast<std::size_t>((i * 2 + 1) * 16 + c);
        CHECK_THAT(out[h0], WithinAbs(plain[h0], 1e-5));
        CHECK_THAT(out[h1], WithinAbs(with[h1], 1e-5));
      }
    }
  }
}

TEST_CASE("attention: RoPE with a softmax_scale_multiplier of 0 throws",
          "[attention][rope][errors]") {
  const Problem<float> p(1, 2, 4, 2, 2, 8, 3);
  posenc::RopeParams rp;
  rp.head_dim = 8;
  auto freqs = posenc::compute_rope_frequencies(rp);
  freqs.softmax_scale_multiplier = 0.0;
  std::vector<float> out(p.out_size(), 3.0f);
  REQUIRE_THROWS_WITH(posenc::attention_with_rope<float>(p.Q(), p.K(), p.V(), p.view(out), freqs,
                                                         posenc::RopeLayout::kHalfSplit),
                      Contains("softmax_scale_multiplier = 0 must be finite and > 0"));
  CHECK(std::all_of(out.begin(), out.end(), [](float x) { return x == 3.0f; }));
}

TEST_CASE("attention: RoPE queries before the first key sit at position 0, for the rotation "
          "and for ALiBi", "[attention][rope][alibi]") {
  // Bidirectional, q_len 5 > k_len 3, no positions given: queries 0 and 1 (defaults -2, -1)
  // clamp to 0 (attention_with_rope), so the call equals the reference on Q rotated at
  // {0, 0, 0, 1, 2}, K at {0, 1, 2}, with those query positions for ALiBi.
  const Problem<float> p(1, 5, 3, 2, 2, 16, 29);
  posenc::RopeParams rp;
  rp.head_dim = 16;
  const auto freqs = posenc::compute_rope_frequencies(rp);
  const auto layout = posenc::RopeLayout::kHalfSplit;
  AttentionParams params = make_params(MaskMode::kBidirectional);
  params.alibi_slopes = {0.25, 0.75};
  const std::vector<std::int64_t> qpos = {0, 0, 0, 1, 2}, kpos = {0, 1, 2};
  Problem<float> r = p;
  r.q = rotated(p.q, 1, 5, 2, 16, qpos, freqs, layout);
  r.k = rotated(p.k, 1, 3, 2, 16, kpos, freqs, layout);
  AttentionMetadata meta;
  meta.query_positions = posenc::PositionIdsView(qpos.data(), 1, 5);
  std::vector<float> out(p.out_size());
  posenc::attention_with_rope<float>(p.Q(), p.K(), p.V(), p.view(out), freqs, layout, params);
  POSENC_REQUIRE_CLOSE(close(out, reference(r, params, meta), 1e-5));
  // ALiBi alone cannot tell -2 from 0 (a constant shift of the row's scores); T5's exact
  // buckets of pos_k - pos_q can: the kernel must also read the clamped positions.
  const std::vector<float> table = posenc_test::random_vector<float>(32 * 2, 31);
  params.alibi_slopes.clear();
  params.relative_bias =
      posenc::relative_position_bias(posenc::ConstTensorView<float, 2>(table.data(), 32, 2));
  posenc::attention_with_rope<float>(p.Q(), p.K(), p.V(), p.view(out), freqs, layout, params);
  POSENC_REQUIRE_CLOSE(close(out, reference(r, params, meta), 1e-5));
}

// ---- mutation audit: posenc/reference/attention.hpp pinned on its own ----------------------

TEST_CASE("attention: the reference chunks by key position, not by key index",
          "[attention][reference][chunked]") {
  // Llama-4 chunked attention: query position a sees key position p when a / C == p / C (HF
  // llama4 chunked mask on cache positions). Keys held at positions 4..7 (their slots 0..3),
  // the query at 7, C = 4: all four keys share chunk 1, so zero scores give each weight 1/4.
  const std::vector<float> q(2, 0.0f), k(8, 0.0f), v = {1, 0, 0, 1, 2, 0, 0, 2};
  const std::vector<std::int64_t> qpos = {7}, kpos = {4, 5, 6, 7};
  AttentionParams params = make_params(MaskMode::kCausal);
  params.attention_chunk_size = 4;
  AttentionMetadata meta;
  meta.query_positions = posenc::PositionIdsView(qpos.data(), 1, 1);
  meta.key_positions = posenc::PositionIdsView(kpos.data(), 1, 4);
  std::vector<float> out(2, -1.0f);
  std::vector<double> w(4, -1.0);
  posenc::reference::attention<float>(
      posenc::ConstTensorView<float, 4>(q.data(), 1, 1, 1, 2),
      posenc::ConstTensorView<float, 4>(k.data(), 1, 4, 1, 2),
      posenc::ConstTensorView<float, 4>(v.data(), 1, 4, 1, 2),
      posenc::TensorView<float, 4>(out.data(), 1, 1, 1, 2), params, meta,
      posenc::TensorView<double, 4>(w.data(), 1, 1, 1, 4));
  for (std::size_t j = 0; j < 4; ++j) CHECK_THAT(w[j], WithinAbs(0.25, 1e-15));
  // O = mean of V's rows [1,0], [0,1], [2,0], [0,2] = [0.75, 0.75].
  CHECK_THAT(out[0], WithinAbs(0.75, 1e-7));
  CHECK_THAT(out[1], WithinAbs(0.75, 1e-7));
}

TEST_CASE("attention: the reference's row maximum includes the sink, so a far sink never "
          "overflows",
          "[attention][reference][sink]") {
  // softmax over [sink, s] = [720, 0]: the key's weight is e^(0 - 720) / (1 + e^-720), a
  // subnormal 2.5e-313, not 0 from an e^720 = inf denominator (max-subtracted softmax).
  const std::vector<float> q(2, 0.0f), k(2, 0.0f), v = {1, 1};
  AttentionParams params = make_params(MaskMode::kCausal);
  params.sink_logits = {720.0};
  std::vector<float> out(2, -1.0f);
  std::vector<double> w(1, -1.0);
  posenc::reference::attention<float>(
      posenc::ConstTensorView<float, 4>(q.data(), 1, 1, 1, 2),
      posenc::ConstTensorView<float, 4>(k.data(), 1, 1, 1, 2),
      posenc::ConstTensorView<float, 4>(v.data(), 1, 1, 1, 2),
      posenc::TensorView<float, 4>(out.data(), 1, 1, 1, 2), params, {},
      posenc::TensorView<double, 4>(w.data(), 1, 1, 1, 1));
  CHECK(w[0] > 0.0);
  CHECK_THAT(w[0], Catch::Matchers::WithinRel(std::exp(-720.0), 1e-9));  // 36 significant bits as a subnormal
  CHECK(out[0] == 0.0f);  // the sink has no value row; 2.5e-313 rounds to 0 in float
}
