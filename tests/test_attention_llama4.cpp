// Llama-4's attention: chunked attention (attention_chunk_size on its RoPE layers: a query sees
// only the keys of its own chunk floor(pos / C) of absolute positions, on top of the causal
// mask) and the query temperature of its NoPE layers (AttentionParams::query_temperature).
//
// Expected values: softmax(scale q.k - slope (pos_q - pos_k) | visible) v written out below in
// long double, with the visibility rule spelled out per (query, key) from the positions —
// not through any posenc code. The chunk rule is HF's chunked_overlay with its left-padding
// correction ((slot - left_padding) // C, i.e. the position) and Meta's reference
// create_chunked_attention_mask (block of the token index).

#include <catch2/catch.hpp>

#include <posenc/attention.hpp>
#include <posenc/attention_paged.hpp>
#include <posenc/attention_temperature.hpp>
#include <posenc/diagnostics.hpp>
#include <posenc/rope_frequencies.hpp>
#include <posenc/attention_varlen.hpp>
#include <posenc/kv_cache.hpp>
#include <posenc/paged_kv_cache.hpp>
#include <posenc/reference/attention.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <ostream>
#include <vector>

#include "support/check.hpp"
#include "support/attention_shape.hpp"
#include "support/rng.hpp"

using Catch::Matchers::Contains;
using posenc::AttentionMetadata;
using posenc::AttentionParams;
using posenc::ConstTensorView;
using posenc::PositionIdsView;
using posenc::TensorView;
using posenc::detail::to_double;

namespace {

using posenc_test::Shape;

/// Positions and padding of one problem: [batch, q_len] / [batch, k_len]; empty = defaults
/// (query i at k_len - q_len + i, key j at j, every key valid).
struct Layout {
  std::vector<std::int64_t> q_pos, k_pos;
  std::vector<std::uint8_t> key_valid;
};

/// The rule under test, per (query, key): causal bottom-right by slot, the sliding window by
/// slot, the chunk by position, key padding.
struct Rule {
  std::int64_t chunk = 0;
  std::int64_t window = 0;
  bool causal = true;
  /// Query temperature (Llama-4 NoPE layers): logits of a query at p times
  /// 1 + attn_scale ln(1 + floor((p + 1) / floor_scale)); floor_scale 0 = none.
  long double floor_scale = 0.0L, attn_scale = 0.0L;
};

template <typename T>
std::vector<long double> expected(const Shape& s, const std::vector<T>& q, const std::vector<T>& k,
                                  const std::vector<T>& v, const Layout& lay, const Rule& rule,
                                  const std::vector<double>& slopes = {}) {
  std::vector<long double> out(static_cast<std::size_t>(s.batch * s.q_len * s.heads * s.d), 0.0L);
  const long double scale = 1.0L / std::sqrt(static_cast<long double>(s.d));
  const Eigen::Index group = s.heads / s.kv_heads;
  const auto at = [](Eigen::Index i) { return static_cast<std::size_t>(i); };
  std::vector<long double> w(at(s.k_len));
  for (Eigen::Index b = 0; b < s.batch; ++b) {
    for (Eigen::Index i = 0; i < s.q_len; ++i) {
      const Eigen::Index a = s.k_len - s.q_len + i;
      const std::int64_t pq = lay.q_pos.empty() ? a : lay.q_pos[at(b * s.q_len + i)];
      for (Eigen::Index h = 0; h < s.heads; ++h) {
        const Eigen::Index g = h / group;
        long double mx = -std::numeric_limits<long double>::infinity();
        for (Eigen::Index j = 0; j < s.k_len; ++j) {
          const std::int64_t pk = lay.k_pos.empty() ? j : lay.k_pos[at(b * s.k_len + j)];
          bool visible = !rule.causal || j <= a;
          if (rule.window > 0) visible = visible && a - j < rule.window && j - a < rule.window;
          if (rule.chunk > 0) visible = visible && pq / rule.chunk == pk / rule.chunk;
          if (!lay.key_valid.empty()) visible = visible && lay.key_valid[at(b * s.k_len + j)];
          long double dot = 0.0L;
          for (Eigen::Index c = 0; c < s.d; ++c) {
            dot += static_cast<long double>(to_double(q[at(((b * s.q_len + i) * s.heads + h) * s.d + c)])) *
                   to_double(k[at(((b * s.k_len + j) * s.kv_heads + g) * s.d + c)]);
          }
          long double logit = scale * dot;
          if (rule.floor_scale > 0.0L) {
            logit *= 1.0L + rule.attn_scale *
                                std::log(1.0L + std::floor((pq + 1.0L) / rule.floor_scale));
          }
          if (!slopes.empty()) logit -= slopes[at(h)] * static_cast<long double>(pq - pk);
          w[at(j)] = visible ? logit : -std::numeric_limits<long double>::infinity();
          mx = std::max(mx, w[at(j)]);
        }
        if (mx == -std::numeric_limits<long double>::infinity()) continue;
        long double sum = 0.0L;
        for (auto& x : w) {
          x = std::exp(x - mx);
          sum += x;
        }
        long double* o = &out[at(((b * s.q_len + i) * s.heads + h) * s.d)];
        for (Eigen::Index j = 0; j < s.k_len; ++j) {
          for (Eigen::Index c = 0; c < s.d; ++c) {
            o[c] += w[at(j)] / sum * to_double(v[at(((b * s.k_len + j) * s.kv_heads + g) * s.d + c)]);
          }
        }
      }
    }
  }
  return out;
}

template <typename T>
void require_close(const std::vector<T>& got, const std::vector<long double>& want) {
  REQUIRE(got.size() == want.size());
  const double rel = std::is_same_v<T, Eigen::bfloat16> ? 1.0 / 128 : 0.0;
  POSENC_REQUIRE_CLOSE(posenc_test::compare(
      got.size(), [&](std::size_t i) { return to_double(got[i]); },
      [&](std::size_t i) { return static_cast<double>(want[i]); }, 2e-5, rel));
}

template <typename T>
struct Problem {
  Shape s;
  std::vector<T> q, k, v;
  Problem(const Shape& shape, std::uint64_t seed) : s(shape) {
    q = posenc_test::random_vector<T>(static_cast<std::size_t>(s.batch * s.q_len * s.heads * s.d), seed);
    k = posenc_test::random_vector<T>(static_cast<std::size_t>(s.batch * s.k_len * s.kv_heads * s.d), seed + 1);
    v = posenc_test::random_vector<T>(static_cast<std::size_t>(s.batch * s.k_len * s.kv_heads * s.d), seed + 2);
    // Larger logits make the chunk matter more than the noise of a near-uniform softmax.
    for (auto& x : q) x = T(3.0f * static_cast<float>(to_double(x)));
  }
  ConstTensorView<T, 4> qv() const { return {q.data(), s.batch, s.q_len, s.heads, s.d}; }
  ConstTensorView<T, 4> kv() const { return {k.data(), s.batch, s.k_len, s.kv_heads, s.d}; }
  ConstTensorView<T, 4> vv() const { return {v.data(), s.batch, s.k_len, s.kv_heads, s.d}; }
  std::vector<T> run(const AttentionParams& params, const AttentionMetadata& meta = {}) const {
    std::vector<T> out(q.size(), T(0.0f));
    posenc::attention<T>(qv(), kv(), vv(), TensorView<T, 4>(out.data(), s.batch, s.q_len, s.heads, s.d),
                         params, meta);
    return out;
  }
};

/// The fused path (attention) and the reference path both equal `want`.
void require_fused_and_reference(const Problem<float>& x, const AttentionParams& params,
                                 const std::vector<long double>& want) {
  require_close(x.run(params), want);
  std::vector<float> ref(x.q.size());
  posenc::reference::attention<float>(
      x.qv(), x.kv(), x.vv(),
      TensorView<float, 4>(ref.data(), x.s.batch, x.s.q_len, x.s.heads, x.s.d), params);
  require_close(ref, want);
}

}  // namespace

TEST_CASE("chunked attention: the weights are the chunked causal pattern",
          "[attention][chunked]") {
  // The C = 3 picture of attention_types.hpp, through the reference path's weights: exactly 0
  // outside the chunk, > 0 inside (causal).
  const Shape s{1, 6, 6, 1, 1, 4};
  const Problem<float> x(s, 11);
  AttentionParams params;
  params.attention_chunk_size = 3;
  std::vector<float> out(x.q.size());
  std::vector<double> weights(36);
  posenc::reference::attention<float>(
      x.qv(), x.kv(), x.vv(), TensorView<float, 4>(out.data(), 1, 6, 1, 4), params, {},
      TensorView<double, 4>(weights.data(), 1, 1, 6, 6));
  for (int i = 0; i < 6; ++i) {
    for (int j = 0; j < 6; ++j) {
      CAPTURE(i, j);
      const bool visible = j <= i && i / 3 == j / 3;
      REQUIRE((weights[static_cast<std::size_t>(i * 6 + j)] > 0.0) == visible);
    }
  }
  // Query 3 opens a chunk: it sees only itself, so its output is v_3.
  for (int c = 0; c < 4; ++c) REQUIRE(out[static_cast<std::size_t>(3 * 4 + c)] == x.v[static_cast<std::size_t>(3 * 4 + c)]);
}

TEST_CASE("chunked attention: fused and reference paths against long double",
          "[attention][chunked]") {
  struct Case {
    Shape s;
    std::int64_t chunk, window;
    bool alibi;
    int threads;
  };
  // Prefill (tiles of several chunks, chunks not a multiple of the tiles), chunked prefill
  // (q_len < k_len), decode with 1 and 4 rows per kv head, a window on top, ALiBi, 2 threads.
  const Case cases[] = {
      {{1, 300, 300, 4, 1, 32}, 64, 0, false, 1},  {{2, 200, 200, 8, 2, 64}, 37, 0, true, 2},
      {{1, 96, 500, 4, 4, 16}, 128, 0, false, 1},  {{2, 1, 700, 8, 2, 32}, 256, 0, false, 1},
      {{1, 1, 513, 2, 2, 32}, 100, 0, true, 1},    {{1, 3, 300, 4, 4, 32}, 100, 0, false, 1},
      {{1, 250, 250, 2, 1, 32}, 50, 30, false, 1}, {{1, 1, 300, 4, 1, 32}, 128, 40, false, 1},
      {{1, 130, 130, 2, 2, 80}, 1, 0, false, 1},   {{1, 64, 64, 2, 2, 32}, 1000, 0, false, 1},
  };
  for (const Case& c : cases) {
    CAPTURE(c.s, c.chunk, c.window, c.alibi, c.threads);
    const Problem<float> x(c.s, 100 + static_cast<std::uint64_t>(c.chunk));
    AttentionParams params;
    params.attention_chunk_size = c.chunk;
    params.sliding_window = c.window;
    params.num_threads = c.threads;
    std::vector<double> slopes;
    if (c.alibi) {
      for (Eigen::Index h = 0; h < c.s.heads; ++h) slopes.push_back(0.05 * static_cast<double>(h + 1));
      params.alibi_slopes = slopes;
    }
    require_fused_and_reference(
        x, params, expected(c.s, x.q, x.k, x.v, {}, {c.chunk, c.window, true}, slopes));
  }
}

TEST_CASE("chunked attention: bidirectional chunks and 16-bit keys", "[attention][chunked]") {
  const Shape s{1, 150, 150, 4, 2, 32};
  const Problem<float> x(s, 7);
  AttentionParams params;
  params.mask = posenc::MaskMode::kBidirectional;
  params.attention_chunk_size = 40;
  require_close(x.run(params), expected(s, x.q, x.k, x.v, {}, {40, 0, false}));

  const Shape d{1, 1, 600, 8, 2, 64};
  const Problem<Eigen::bfloat16> y(d, 8);
  AttentionParams causal;
  causal.attention_chunk_size = 256;
  require_close(y.run(causal), expected(d, y.q, y.k, y.v, {}, {256, 0, true}));
}

TEST_CASE("chunked attention: chunks follow positions under left padding",
          "[attention][chunked][padding]") {
  // Sequence 1 is sequence 0's first 40 tokens behind 9 padding slots. Its chunks must start at
  // its first token (position 0), so its rows equal those of the same tokens unpadded.
  // HF's _legacy_chunked_overlay cut chunks by slot (kv_idx // C), which shifts them by the
  // padding: the slot rule gives a different answer here (asserted below).
  constexpr Eigen::Index n = 49, pad = 9, heads = 4, kv_heads = 2, d = 32;
  constexpr std::int64_t chunk = 16;
  const Shape s{2, n, n, heads, kv_heads, d};
  Problem<float> x(s, 21);
  const auto row = [&](Eigen::Index b, Eigen::Index t, Eigen::Index hd, Eigen::Index width) {
    return static_cast<std::size_t>(((b * n + t) * hd) * width);
  };
  for (Eigen::Index t = 0; t + pad < n; ++t) {  // copy tokens 0..39 of sequence 0 after the pad
    std::copy_n(x.q.begin() + static_cast<std::ptrdiff_t>(row(0, t, heads, d)), heads * d,
                x.q.begin() + static_cast<std::ptrdiff_t>(row(1, t + pad, heads, d)));
    std::copy_n(x.k.begin() + static_cast<std::ptrdiff_t>(row(0, t, kv_heads, d)), kv_heads * d,
                x.k.begin() + static_cast<std::ptrdiff_t>(row(1, t + pad, kv_heads, d)));
    std::copy_n(x.v.begin() + static_cast<std::ptrdiff_t>(row(0, t, kv_heads, d)), kv_heads * d,
                x.v.begin() + static_cast<std::ptrdiff_t>(row(1, t + pad, kv_heads, d)));
  }
  Layout lay;
  lay.q_pos.resize(2 * n);
  lay.key_valid.assign(2 * n, 1);
  for (Eigen::Index t = 0; t < n; ++t) {
    lay.q_pos[static_cast<std::size_t>(t)] = t;
    lay.q_pos[static_cast<std::size_t>(n + t)] = std::max<Eigen::Index>(t - pad, 0);
    if (t < pad) lay.key_valid[static_cast<std::size_t>(n + t)] = 0;
  }
  lay.k_pos = lay.q_pos;
  AttentionMetadata meta;
  meta.query_positions = PositionIdsView(lay.q_pos.data(), 2, n);
  meta.key_positions = PositionIdsView(lay.k_pos.data(), 2, n);
  meta.key_mask = ConstTensorView<std::uint8_t, 2>(lay.key_valid.data(), 2, n);
  AttentionParams params;
  params.attention_chunk_size = chunk;
  const auto got = x.run(params, meta);
  require_close(got, expected(s, x.q, x.k, x.v, lay, {chunk, 0, true}));
  double worst = 0.0;
  for (Eigen::Index t = 0; t + pad < n; ++t) {
    for (Eigen::Index c = 0; c < heads * d; ++c) {
      const double a = got[row(0, t, heads, d) + static_cast<std::size_t>(c)];
      const double b = got[row(1, t + pad, heads, d) + static_cast<std::size_t>(c)];
      worst = std::max(worst, std::abs(a - b));
    }
  }
  REQUIRE(worst < 1e-5);
  // The decode item: only the last token of each sequence as the query (position 48 and 39).
  const Shape last{2, 1, n, heads, kv_heads, d};
  Problem<float> y(last, 22);
  y.k = x.k;
  y.v = x.v;
  for (Eigen::Index b = 0; b < 2; ++b) {
    std::copy_n(x.q.begin() + static_cast<std::ptrdiff_t>(row(b, n - 1, heads, d)), heads * d,
                y.q.begin() + b * heads * d);
  }
  Layout one = lay;
  one.q_pos = {lay.q_pos[n - 1], lay.q_pos[2 * n - 1]};
  AttentionMetadata meta1 = meta;
  meta1.query_positions.emplace(one.q_pos.data(), 2, 1);  // = on an engaged map copies elements
  require_close(y.run(params, meta1), expected(last, y.q, y.k, y.v, one, {chunk, 0, true}));
  // The slot rule (positions = slots) on the same padded batch differs for sequence 1.
  Layout by_slot = lay;
  by_slot.q_pos.clear();
  by_slot.k_pos.clear();
  const auto legacy = expected(s, x.q, x.k, x.v, by_slot, {chunk, 0, true});
  double moved = 0.0;
  for (std::size_t i = row(1, pad, heads, d); i < got.size(); ++i) {
    moved = std::max(moved, std::abs(static_cast<double>(legacy[i]) - got[i]));
  }
  REQUIRE(moved > 0.05);
}

TEST_CASE("chunked attention: decode rows across a chunk boundary under left padding",
          "[attention][chunked][padding]") {
  // 4 queries (one per kv head: the decode item) at positions 30..33 behind 10 padding slots:
  // the first two are in chunk 1, the last two in chunk 2, while their slots 40..43 all lie
  // in slot chunk 2.
  constexpr Eigen::Index k_len = 44, pad = 10;
  constexpr std::int64_t chunk = 16;
  for (const Eigen::Index kv_heads : {Eigen::Index{1}, Eigen::Index{3}}) {
    const Shape s{1, 4, k_len, kv_heads, kv_heads, 32};
    CAPTURE(s);
    const Problem<float> x(s, 24);
    Layout lay;
    for (Eigen::Index j = 0; j < k_len; ++j) {
      lay.k_pos.push_back(std::max<Eigen::Index>(j - pad, 0));
      lay.key_valid.push_back(j >= pad ? 1 : 0);
    }
    lay.q_pos = {30, 31, 32, 33};
    AttentionMetadata meta;
    meta.query_positions.emplace(lay.q_pos.data(), 1, 4);
    meta.key_positions.emplace(lay.k_pos.data(), 1, k_len);
    meta.key_mask.emplace(lay.key_valid.data(), 1, k_len);
    AttentionParams params;
    params.attention_chunk_size = chunk;
    require_close(x.run(params, meta), expected(s, x.q, x.k, x.v, lay, {chunk, 0, true}));
  }
}

TEST_CASE("chunked attention: a decode query chunks far past its keys sees none of them",
          "[attention][chunked]") {
  // Query positions may reach 2^53 while the keys sit at 0..299: the query's chunk then starts
  // ~2^53 keys past the last one. The decode item formed its byte count from that negative
  // range, a signed overflow the sanitizer build reports (found by the attention fuzzer).
  // (4 kv heads x 128 floats: 4 KiB of K + V per key, 2^53 of them overflow.) The row sees
  // no key: zeros, as the oracle gives.
  const Shape s{1, 1, 300, 8, 4, 128};
  const Problem<float> x(s, 62);
  for (const std::int64_t pos : {std::int64_t{1} << 53, (std::int64_t{1} << 53) - 17}) {
    CAPTURE(pos);
    Layout lay;
    lay.q_pos = {pos};
    AttentionMetadata meta;
    meta.query_positions.emplace(lay.q_pos.data(), 1, 1);
    AttentionParams params;
    params.attention_chunk_size = 16;
    const std::vector<float> out = x.run(params, meta);
    CHECK(std::all_of(out.begin(), out.end(), [](float e) { return e == 0.0f; }));
    require_close(out, expected(s, x.q, x.k, x.v, lay, {16, 0, true}));
  }
}

TEST_CASE("chunked attention: a decode row whose window starts past key_lengths reads no padding",
          "[attention][chunked][padding]") {
  // Explicit key positions, a window of 4 (starting at slot 60) and key_lengths 10: the row
  // sees no key. The decode item narrowed the empty range [60, 10) by the chunk's keys and got
  // [10, 60) back, padding included; those rows hold NaN here (found by the attention fuzzer:
  // out NaN instead of 0). With and without a sink.
  const Shape s{1, 1, 64, 2, 1, 16};
  Problem<float> x(s, 63);
  constexpr Eigen::Index valid = 10;
  for (std::size_t i = valid * s.d; i < x.k.size(); ++i) {
    x.k[i] = std::numeric_limits<float>::quiet_NaN();
    x.v[i] = std::numeric_limits<float>::quiet_NaN();
  }
  std::vector<std::int64_t> k_pos(64), q_pos{63}, lengths{valid};
  for (std::size_t j = 0; j < k_pos.size(); ++j) k_pos[j] = static_cast<std::int64_t>(j);
  AttentionMetadata meta;
  meta.query_positions.emplace(q_pos.data(), 1, 1);
  meta.key_positions.emplace(k_pos.data(), 1, 64);
  meta.key_lengths.emplace(lengths.data(), 1);
  for (const bool sink : {false, true}) {
    CAPTURE(sink);
    AttentionParams params;
    params.attention_chunk_size = 16;
    params.sliding_window = 4;
    if (sink) params.sink_logits = {0.5, -0.5};
    const std::vector<float> out = x.run(params, meta);
    CHECK(std::all_of(out.begin(), out.end(), [](float e) { return e == 0.0f; }));
  }
}

TEST_CASE("chunked attention: packed sequences chunk from their own starts",
          "[attention][chunked][varlen]") {
  // Two packed sequences of 70 and 45 tokens: varlen gives each its positions from 0, so the
  // second one's chunks start at its first token, as if it were run alone.
  constexpr Eigen::Index heads = 4, kv_heads = 2, d = 32;
  constexpr std::int64_t chunk = 32;
  const std::vector<std::int64_t> cu{0, 70, 115};
  const Eigen::Index total = 115;
  const auto q = posenc_test::random_vector<float>(static_cast<std::size_t>(total * heads * d), 31);
  const auto k = posenc_test::random_vector<float>(static_cast<std::size_t>(total * kv_heads * d), 32);
  const auto v = posenc_test::random_vector<float>(static_cast<std::size_t>(total * kv_heads * d), 33);
  std::vector<float> out(q.size());
  AttentionParams params;
  params.attention_chunk_size = chunk;
  posenc::attention_varlen<float>(
      ConstTensorView<float, 3>(q.data(), total, heads, d),
      ConstTensorView<float, 3>(k.data(), total, kv_heads, d),
      ConstTensorView<float, 3>(v.data(), total, kv_heads, d),
      TensorView<float, 3>(out.data(), total, heads, d),
      ConstTensorView<std::int64_t, 1>(cu.data(), 3), ConstTensorView<std::int64_t, 1>(cu.data(), 3),
      params);
  for (std::size_t seq = 0; seq < 2; ++seq) {
    const Eigen::Index first = cu[seq], len = cu[seq + 1] - cu[seq];
    CAPTURE(seq);
    const Shape s{1, len, len, heads, kv_heads, d};
    const auto slice = [&](const std::vector<float>& x, Eigen::Index width) {
      return std::vector<float>(x.begin() + first * width, x.begin() + (first + len) * width);
    };
    const auto want = expected(s, slice(q, heads * d), slice(k, kv_heads * d),
                               slice(v, kv_heads * d), {}, {chunk, 0, true});
    require_close(slice(out, heads * d), want);
  }
}

TEST_CASE("chunked attention: prefill then decode through the caches equals one forward",
          "[attention][chunked][kv_cache]") {
  // Llama-4's chunked layers in HF keep a cache of attention_chunk_size slots: a rolling
  // KvCache with W = C holds every key a chunk can see, so attend needs no sliding_window.
  constexpr Eigen::Index B = 2, H = 4, KH = 1, d = 32, n = 37, steps = 30;
  constexpr std::int64_t chunk = 24;
  const Shape full{B, n + steps, n + steps, H, KH, d};
  const Problem<float> x(full, 41);
  const auto want = expected(full, x.q, x.k, x.v, {}, {chunk, 0, true});
  AttentionParams params;
  params.attention_chunk_size = chunk;
  const auto slice = [&](const std::vector<float>& src, Eigen::Index t0, Eigen::Index len,
                         Eigen::Index width) {
    std::vector<float> r(static_cast<std::size_t>(B * len * width));
    for (Eigen::Index b = 0; b < B; ++b) {
      std::copy_n(src.begin() + (b * (n + steps) + t0) * width, len * width,
                  r.begin() + b * len * width);
    }
    return r;
  };
  const auto positions = [&](Eigen::Index t0, Eigen::Index len) {
    std::vector<std::int64_t> p(static_cast<std::size_t>(B * len));
    for (Eigen::Index b = 0; b < B; ++b)
      for (Eigen::Index t = 0; t < len; ++t) p[static_cast<std::size_t>(b * len + t)] = t0 + t;
    return p;
  };
  for (const std::int64_t window : {std::int64_t{0}, chunk}) {
    CAPTURE(window);
    posenc::KvCache<float> cache(B, window > 0 ? 2 * chunk : n + steps, KH, d, window);
    std::vector<float> got(x.q.size());
    const auto step = [&](Eigen::Index t0, Eigen::Index len) {
      const auto k = slice(x.k, t0, len, KH * d), v = slice(x.v, t0, len, KH * d);
      const auto q = slice(x.q, t0, len, H * d);
      const auto pos = positions(t0, len);
      cache.append(ConstTensorView<float, 4>(k.data(), B, len, KH, d),
                   ConstTensorView<float, 4>(v.data(), B, len, KH, d),
                   PositionIdsView(pos.data(), B, len));
      std::vector<float> o(q.size());
      cache.attend(ConstTensorView<float, 4>(q.data(), B, len, H, d),
                   TensorView<float, 4>(o.data(), B, len, H, d), params);
      for (Eigen::Index b = 0; b < B; ++b) {
        std::copy_n(o.begin() + b * len * H * d, len * H * d,
                    got.begin() + (b * (n + steps) + t0) * H * d);
      }
    };
    step(0, n);
    for (Eigen::Index t = n; t < n + steps; ++t) step(t, 1);
    require_close(got, want);
  }
  // Without chunks a rolling cache still refuses a window-less layer; a chunk wider than the
  // cache's window is refused too, and nothing is written.
  posenc::KvCache<float> rolling(1, 16, KH, d, 8);
  const std::vector<float> kv(static_cast<std::size_t>(KH * d), 0.5f), q(static_cast<std::size_t>(H * d), 0.5f);
  const std::int64_t pos0 = 0;
  rolling.append(ConstTensorView<float, 4>(kv.data(), 1, 1, KH, d),
                 ConstTensorView<float, 4>(kv.data(), 1, 1, KH, d), PositionIdsView(&pos0, 1, 1));
  std::vector<float> o(q.size(), -7.0f);
  AttentionParams wide;
  wide.attention_chunk_size = 9;
  REQUIRE_THROWS_WITH(rolling.attend(ConstTensorView<float, 4>(q.data(), 1, 1, H, d),
                                     TensorView<float, 4>(o.data(), 1, 1, H, d), wide),
                      Contains("must be in [1, 8] (or attention_chunk_size, now 9"));
  REQUIRE(std::all_of(o.begin(), o.end(), [](float e) { return e == -7.0f; }));
  wide.attention_chunk_size = 8;
  rolling.attend(ConstTensorView<float, 4>(q.data(), 1, 1, H, d),
                 TensorView<float, 4>(o.data(), 1, 1, H, d), wide);
  REQUIRE(o[0] == 0.5f);
}

TEST_CASE("chunked attention: a paged pool decodes within the chunk",
          "[attention][chunked][paged]") {
  // A prompt of 50 tokens, then 40 decode steps, against one full forward. The sliding-window
  // pool with W = C gives back the pages no chunk can reach any more.
  constexpr Eigen::Index H = 4, KH = 2, d = 32, n = 90, prompt = 50;
  constexpr std::int64_t chunk = 40;
  const Shape full{1, n, n, H, KH, d};
  const Problem<float> x(full, 51);
  const auto want = expected(full, x.q, x.k, x.v, {}, {chunk, 0, true});
  AttentionParams params;
  params.attention_chunk_size = chunk;
  for (const std::int64_t window : {std::int64_t{0}, chunk}) {
    CAPTURE(window);
    posenc::PagedKvCache<float> pool(window > 0 ? 7 : 12, 8, KH, d, window);
    const auto seq = pool.add_sequence();
    const std::vector<posenc::PagedKvCache<float>::SequenceId> seqs{seq};
    std::vector<float> got(static_cast<std::size_t>((n - prompt + 1) * H * d));
    const auto step = [&](Eigen::Index t0, Eigen::Index len) {
      pool.append(seq, ConstTensorView<float, 3>(x.k.data() + t0 * KH * d, len, KH, d),
                  ConstTensorView<float, 3>(x.v.data() + t0 * KH * d, len, KH, d));
      const Eigen::Index last = t0 + len - 1;  // attend the chunk's last token only
      pool.attend(seqs, ConstTensorView<float, 4>(x.q.data() + last * H * d, 1, 1, H, d),
                  TensorView<float, 4>(got.data() + (last - prompt + 1) * H * d, 1, 1, H, d),
                  params);
    };
    step(0, prompt);
    for (Eigen::Index t = prompt; t < n; ++t) step(t, 1);
    const std::vector<long double> rows(want.begin() + (prompt - 1) * H * d, want.end());
    require_close(got, rows);
  }
}

TEST_CASE("chunked attention: a negative chunk is rejected before anything is written",
          "[attention][chunked][errors]") {
  const Shape s{1, 4, 4, 2, 1, 8};
  const Problem<float> x(s, 61);
  std::vector<float> out(x.q.size(), -3.0f);
  AttentionParams params;
  params.attention_chunk_size = -1;
  REQUIRE_THROWS_AS(posenc::attention<float>(x.qv(), x.kv(), x.vv(),
                                             TensorView<float, 4>(out.data(), 1, 4, 2, 8), params),
                    std::invalid_argument);
  REQUIRE_THROWS_WITH(posenc::attention<float>(x.qv(), x.kv(), x.vv(),
                                               TensorView<float, 4>(out.data(), 1, 4, 2, 8), params),
                      Contains("attention_chunk_size = -1 must be >= 0"));
  REQUIRE(std::all_of(out.begin(), out.end(), [](float e) { return e == -3.0f; }));
}

TEST_CASE("query temperature: fused and reference paths scale each row's logits by t(pos_q)",
          "[attention][temperature]") {
  // floor_scale 16, attn_scale 0.3: the factor steps at positions 15, 31, 47, ... so short
  // problems cross several steps (Llama-4: 8192 and 0.1).
  const posenc::AttentionTemperature t{16.0, 0.3};
  struct Case {
    Shape s;
    std::int64_t chunk;
    int threads;
  };
  const Case cases[] = {{{1, 200, 200, 8, 2, 32}, 0, 1}, {{2, 1, 300, 8, 2, 64}, 0, 1},
                        {{1, 3, 129, 4, 4, 32}, 0, 1},   {{1, 150, 150, 4, 1, 32}, 50, 2}};
  for (const Case& c : cases) {
    CAPTURE(c.s, c.chunk, c.threads);
    const Problem<float> x(c.s, 71);
    AttentionParams params;
    params.query_temperature = t;
    params.attention_chunk_size = c.chunk;
    params.num_threads = c.threads;
    Rule rule{c.chunk, 0, true, 16.0L, 0.3L};
    const auto want = expected(c.s, x.q, x.k, x.v, {}, rule);
    require_fused_and_reference(x, params, want);
    // The same as scaling q first (apply_attention_temperature_inplace), within float rounding.
    Problem<float> scaled = x;
    std::vector<std::int64_t> pos(static_cast<std::size_t>(c.s.batch * c.s.q_len));
    for (Eigen::Index b = 0; b < c.s.batch; ++b)
      for (Eigen::Index i = 0; i < c.s.q_len; ++i)
        pos[static_cast<std::size_t>(b * c.s.q_len + i)] = c.s.k_len - c.s.q_len + i;
    posenc::apply_attention_temperature_inplace<float>(
        TensorView<float, 4>(scaled.q.data(), c.s.batch, c.s.q_len, c.s.heads, c.s.d),
        PositionIdsView(pos.data(), c.s.batch, c.s.q_len), t);
    AttentionParams plain = params;
    plain.query_temperature.reset();
    require_close(scaled.run(plain), want);
  }
}

TEST_CASE("query temperature: KvCache decode from stored positions equals one forward",
          "[attention][temperature][kv_cache]") {
  // A NoPE layer: no RoPE, full causal attention, the temperature from each query's position
  // (stored in the cache), left padding included: sequence 1 starts 6 slots late.
  constexpr Eigen::Index B = 2, H = 4, KH = 2, d = 32, n = 40, pad = 6;
  const Shape full{B, n, n, H, KH, d};
  const Problem<float> x(full, 81);
  Layout lay;
  for (Eigen::Index b = 0; b < B; ++b) {
    for (Eigen::Index t = 0; t < n; ++t) {
      const Eigen::Index p = b == 0 ? t : std::max<Eigen::Index>(t - pad, 0);
      lay.q_pos.push_back(p);
      lay.key_valid.push_back(b == 0 || t >= pad ? 1 : 0);
    }
  }
  lay.k_pos = lay.q_pos;
  const auto want = expected(full, x.q, x.k, x.v, lay, {0, 0, true, 8.0L, 0.1L});
  AttentionParams params;
  params.query_temperature = posenc::AttentionTemperature{8.0, 0.1};
  posenc::KvCache<float> cache(B, n, KH, d);
  std::vector<float> got(x.q.size());
  for (Eigen::Index t = 0; t < n; ++t) {
    std::vector<float> k(static_cast<std::size_t>(B * KH * d)), v(k.size()), q(static_cast<std::size_t>(B * H * d));
    std::vector<std::int64_t> pos(B);
    std::vector<std::uint8_t> valid(B);
    for (Eigen::Index b = 0; b < B; ++b) {
      std::copy_n(x.k.begin() + (b * n + t) * KH * d, KH * d, k.begin() + b * KH * d);
      std::copy_n(x.v.begin() + (b * n + t) * KH * d, KH * d, v.begin() + b * KH * d);
      std::copy_n(x.q.begin() + (b * n + t) * H * d, H * d, q.begin() + b * H * d);
      pos[static_cast<std::size_t>(b)] = lay.q_pos[static_cast<std::size_t>(b * n + t)];
      valid[static_cast<std::size_t>(b)] = lay.key_valid[static_cast<std::size_t>(b * n + t)];
    }
    cache.append(ConstTensorView<float, 4>(k.data(), B, 1, KH, d),
                 ConstTensorView<float, 4>(v.data(), B, 1, KH, d), PositionIdsView(pos.data(), B, 1),
                 ConstTensorView<std::uint8_t, 2>(valid.data(), B, 1));
    std::vector<float> o(q.size());
    cache.attend(ConstTensorView<float, 4>(q.data(), B, 1, H, d), TensorView<float, 4>(o.data(), B, 1, H, d),
                 params);
    for (Eigen::Index b = 0; b < B; ++b) {
      std::copy_n(o.begin() + b * H * d, H * d, got.begin() + (b * n + t) * H * d);
    }
  }
  // Padding rows of sequence 1 see no valid key in the cache (0) but one in the forward (the
  // padding query's own slot is masked there too): compare the real rows only.
  for (Eigen::Index b = 0; b < B; ++b) {
    for (Eigen::Index t = b == 0 ? 0 : pad; t < n; ++t) {
      CAPTURE(b, t);
      const auto first = static_cast<std::size_t>((b * n + t) * H * d);
      const std::vector<float> row(got.begin() + static_cast<std::ptrdiff_t>(first),
                                   got.begin() + static_cast<std::ptrdiff_t>(first + H * d));
      require_close(row, std::vector<long double>(want.begin() + static_cast<std::ptrdiff_t>(first),
                                                  want.begin() + static_cast<std::ptrdiff_t>(first + H * d)));
    }
  }
  std::vector<float> out(static_cast<std::size_t>(B * H * d), -2.0f);
  AttentionParams bad;
  bad.query_temperature = posenc::AttentionTemperature{0.0, 0.1};
  const std::vector<float> q(out.size(), 0.25f);
  REQUIRE_THROWS_WITH(cache.attend(ConstTensorView<float, 4>(q.data(), B, 1, H, d),
                                   TensorView<float, 4>(out.data(), B, 1, H, d), bad),
                      Contains("floor_scale = 0 must be finite and > 0"));
  REQUIRE(std::all_of(out.begin(), out.end(), [](float e) { return e == -2.0f; }));
}

TEST_CASE("llama-4 layers: prefill equals token-by-token decode for a chunked RoPE layer and a "
          "NoPE layer with temperature, left padding included", "[attention][chunked][temperature]") {
  // The seed's check ("先固定一个很短的确定性输入，比对完整前向与逐 token KV-Cache 解码") on both
  // layer kinds: Llama-4's RoPE (llama3 with low_freq_factor == high_freq_factor, interleaved
  // pairs) with chunks of 16, and its NoPE layer with the temperature stepping every 8.
  constexpr Eigen::Index B = 2, n = 45, H = 8, KH = 2, d = 32;
  const Shape s{B, n, n, H, KH, d};
  const Problem<float> x(s, 91);
  std::vector<std::int64_t> pos(static_cast<std::size_t>(B * n));
  std::vector<std::uint8_t> valid(pos.size(), 1);
  for (Eigen::Index t = 0; t < n; ++t) {
    pos[static_cast<std::size_t>(t)] = t;
    pos[static_cast<std::size_t>(n + t)] = std::max<Eigen::Index>(t - 5, 0);
    if (t < 5) valid[static_cast<std::size_t>(n + t)] = 0;
  }
  posenc::RopeParams rp;
  rp.head_dim = d;
  rp.theta = 500000.0;
  rp.scaling.type = posenc::RopeScalingType::kLlama3;
  rp.scaling.factor = 16.0;
  rp.scaling.low_freq_factor = rp.scaling.high_freq_factor = 1.0;
  rp.scaling.original_max_position_embeddings = 64;
  const auto rope = posenc::compute_rope_frequencies(rp);
  AttentionParams chunked;
  chunked.attention_chunk_size = 16;
  AttentionParams nope;
  nope.query_temperature = posenc::AttentionTemperature{8.0, 0.1};
  for (const bool rope_layer : {true, false}) {
    CAPTURE(rope_layer);
    const auto rep = posenc::check_prefill_vs_decode<float>(
        x.qv(), x.kv(), x.vv(), rope_layer ? chunked : nope,
        rope_layer ? std::optional<posenc::RopeFrequencies>(rope) : std::nullopt,
        posenc::RopeLayout::kInterleaved, PositionIdsView(pos.data(), B, n),
        ConstTensorView<std::uint8_t, 2>(valid.data(), B, n));
    CAPTURE(rep.worst, rep.worst_step);
    REQUIRE(rep.worst < 2e-6);
  }
}
