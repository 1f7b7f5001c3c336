// Tree attention (speculative decoding: a tree of draft tokens verified in one pass). The
// independent expectation is the definition: each draft token must attend exactly as it would
// in an ordinary causal sequence made of the prefix and its path from the root, at the same
// positions — computed here in long double, with RoPE turned at each token's position and
// ALiBi from positions. Plus fused == reference, the KV-cache flow (verify, erase the rejected
// slots, continue) and the error paths.

#include <catch2/catch.hpp>

#include <posenc/attention.hpp>
#include <posenc/attention_paged.hpp>
#include <posenc/attention_rope.hpp>
#include <posenc/draft_tree.hpp>
#include <posenc/dual_chunk_attention.hpp>
#include <posenc/kv_cache.hpp>
#include <posenc/reference/attention.hpp>
#include <posenc/relative_bias.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "support/check.hpp"
#include "support/rng.hpp"

namespace {

using Catch::Matchers::Contains;
using LD = long double;

/// A draft tree: parent[t] < t, or -1 for a child of the prefix's last token.
struct Tree {
  std::vector<int> parent;
  Eigen::Index size() const { return static_cast<Eigen::Index>(parent.size()); }
  int depth(int t) const { return parent[static_cast<std::size_t>(t)] < 0 ? 0 : 1 + depth(parent[static_cast<std::size_t>(t)]); }
  bool ancestor_or_self(int a, int t) const {
    for (int x = t; x >= 0; x = parent[static_cast<std::size_t>(x)])
      if (x == a) return true;
    return false;
  }
  /// [q_len, q_len] row-major: 1 where draft token t is an ancestor of i or i itself.
  std::vector<std::uint8_t> mask() const {
    const auto n = static_cast<std::size_t>(size());
    std::vector<std::uint8_t> m(n * n, 0);
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t t = 0; t < n; ++t) m[i * n + t] = ancestor_or_self(static_cast<int>(t), static_cast<int>(i)) ? 1 : 0;
    return m;
  }
  /// Path root .. t (draft indices).
  std::vector<int> path(int t) const {
    std::vector<int> p;
    for (int x = t; x >= 0; x = parent[static_cast<std::size_t>(x)]) p.push_back(x);
    std::reverse(p.begin(), p.end());
    return p;
  }
};

/// Half-split RoPE of one row at position pos, long double: pair (j, j + D/2) turns by pos / base^(2j/D).
std::vector<LD> rope_ld(const float* x, Eigen::Index D, std::int64_t pos, LD base) {
  std::vector<LD> y(static_cast<std::size_t>(D));
  const Eigen::Index half = D / 2;
  for (Eigen::Index j = 0; j < half; ++j) {
    const LD a = static_cast<LD>(pos) * std::pow(base, -2.0L * static_cast<LD>(j) / static_cast<LD>(D));
    const LD x1 = x[j], x2 = x[j + half];
    y[static_cast<std::size_t>(j)] = x1 * std::cos(a) - x2 * std::sin(a);
    y[static_cast<std::size_t>(j + half)] = x2 * std::cos(a) + x1 * std::sin(a);
  }
  return y;
}

/// Causal attention of the last key's query over `keys` (indices into k / v rows of one
/// sequence, in sequence order, positions pos[key]), long double. rope: turn q and k at their
/// positions; slope: ALiBi -slope (pq - pk).
std::vector<LD> path_attention(const float* q, const std::vector<Eigen::Index>& keys, const std::vector<std::int64_t>& pos,
                               std::int64_t pq, const float* k, const float* v, Eigen::Index kv_row, Eigen::Index D, bool rope,
                               LD slope) {
  const LD base = 10000.0L;
  const auto qr = rope ? rope_ld(q, D, pq, base) : std::vector<LD>(q, q + D);
  std::vector<LD> w(keys.size());
  for (std::size_t n = 0; n < keys.size(); ++n) {
    const float* kr = k + keys[n] * kv_row;
    const auto kk = rope ? rope_ld(kr, D, pos[static_cast<std::size_t>(keys[n])], base) : std::vector<LD>(kr, kr + D);
    LD dot = 0;
    for (Eigen::Index c = 0; c < D; ++c) dot += qr[static_cast<std::size_t>(c)] * kk[static_cast<std::size_t>(c)];
    w[n] = dot / std::sqrt(static_cast<LD>(D)) - slope * static_cast<LD>(pq - pos[static_cast<std::size_t>(keys[n])]);
  }
  const LD top = *std::max_element(w.begin(), w.end());
  LD sum = 0;
  std::vector<LD> out(static_cast<std::size_t>(D), 0);
  for (std::size_t n = 0; n < keys.size(); ++n) {
    const LD e = std::exp(w[n] - top);
    sum += e;
    for (Eigen::Index c = 0; c < D; ++c) out[static_cast<std::size_t>(c)] += e * v[keys[n] * kv_row + c];
  }
  for (auto& o : out) o /= sum;
  return out;
}

}  // namespace

TEST_CASE("tree attention: every draft token attends as in the causal sequence of its own path",
          "[attention][tree]") {
  // Trees over prefixes that put the draft block across a key tile boundary or not, and sizes
  // that take the decode work item (q_len * group <= 4) and the prefill one.
  struct Case {
    Eigen::Index prefix, heads, kv_heads;
    std::vector<Tree> trees;  // one per sequence
  };
  const std::vector<Case> cases = {
      {7, 4, 2, {Tree{{-1, 0, 0, 1, 1, 2, 5}}, Tree{{-1, -1, 0, 1, 2, 0, 5}}}},
      {121, 4, 1, {Tree{{-1, 0, 1, 0, 3, 3, 1, 2, 7}}}},
      {5, 2, 1, {Tree{{-1, -1}}, Tree{{-1, 0}}}},
      {64, 8, 2, {Tree{{-1}}}},
      // The deepest path ends before the last token (a root child), so the rows' windows do
      // not start in query order: with W = 70 (prefill item, 64-key tiles) the last row's
      // starts at 125 and the deepest's at 130, with the whole tile 128 .. 191 between them and
      // the draft block; with W = 140 (decode item, 128-key tiles) at 127 and 129 around 128.
      {194, 4, 2, {Tree{{-1, 0, 1, 2, 3, 4, -1}}}},
      {266, 1, 1, {Tree{{-1, 0, 1, -1}}}},
  };
  const Eigen::Index D = 32;
  for (const auto& c : cases) {
    int deepest = 0;
    for (const Tree& tr : c.trees)
      for (int t = 0; t < tr.size(); ++t) deepest = std::max(deepest, tr.depth(t) + 1);
    // Sliding windows: none, exactly the deepest path (its prefix part empty), a few prefix
    // keys more, and ones that cross key tile boundaries of the longer prefixes.
    for (const std::int64_t window : {std::int64_t{0}, std::int64_t{deepest}, std::int64_t{deepest + 3}, std::int64_t{50},
                                      std::int64_t{70}, std::int64_t{140}})
    for (const bool rope : {false, true})
      for (const bool alibi : {false, true}) {
        const Eigen::Index B = static_cast<Eigen::Index>(c.trees.size()), T = c.trees[0].size(), K = c.prefix + T;
        CAPTURE(c.prefix, T, B, c.heads, c.kv_heads, window, rope, alibi);
        const auto q = posenc_test::random_vector<float>(static_cast<std::size_t>(B * T * c.heads * D), 61);
        const auto k = posenc_test::random_vector<float>(static_cast<std::size_t>(B * K * c.kv_heads * D), 62);
        const auto v = posenc_test::random_vector<float>(static_cast<std::size_t>(B * K * c.kv_heads * D), 63);
        std::vector<std::uint8_t> mask;
        std::vector<std::int64_t> qpos, kpos;
        for (const Tree& tr : c.trees) {
          REQUIRE(tr.size() == T);
          const auto m = tr.mask();
          mask.insert(mask.end(), m.begin(), m.end());
          for (Eigen::Index j = 0; j < c.prefix; ++j) kpos.push_back(j);
          for (int t = 0; t < T; ++t) {
            kpos.push_back(c.prefix + tr.depth(t));
            qpos.push_back(c.prefix + tr.depth(t));
          }
        }
        posenc::AttentionParams params;
        if (alibi) params.alibi_slopes = posenc::alibi_slopes(c.heads);
        params.sliding_window = window;
        posenc::AttentionMetadata meta;
        meta.query_positions = posenc::PositionIdsView(qpos.data(), B, T);
        meta.key_positions = posenc::PositionIdsView(kpos.data(), B, K);
        meta.tree_mask = posenc::ConstTensorView<std::uint8_t, 3>(mask.data(), B, T, T);
        std::vector<float> out(q.size(), -9.0f);
        const posenc::ConstTensorView<float, 4> qv(q.data(), B, T, c.heads, D), kv(k.data(), B, K, c.kv_heads, D),
            vv(v.data(), B, K, c.kv_heads, D);
        const posenc::TensorView<float, 4> ov(out.data(), B, T, c.heads, D);
        posenc::RopeParams rp;
        rp.head_dim = D;
        if (rope) {
          posenc::attention_with_rope<float>(qv, kv, vv, ov, posenc::compute_rope_frequencies(rp), posenc::RopeLayout::kHalfSplit,
                                             params, meta);
        } else {
          posenc::attention<float>(qv, kv, vv, ov, params, meta);
        }
        const Eigen::Index group = c.heads / c.kv_heads;
        for (Eigen::Index b = 0; b < B; ++b) {
          const Tree& tr = c.trees[static_cast<std::size_t>(b)];
          const std::vector<std::int64_t> pos(kpos.begin() + b * K, kpos.begin() + (b + 1) * K);
          for (int t = 0; t < T; ++t) {
            std::vector<Eigen::Index> keys;
            for (Eigen::Index j = 0; j < c.prefix; ++j) keys.push_back(j);
            for (const int a : tr.path(t)) keys.push_back(c.prefix + a);
            // The window of the token's own sequence: its last W keys.
            if (window > 0 && static_cast<std::int64_t>(keys.size()) > window) {
              keys.erase(keys.begin(), keys.end() - window);
            }
            for (Eigen::Index h = 0; h < c.heads; ++h) {
              const Eigen::Index g = h / group;
              const LD slope = alibi ? static_cast<LD>(params.alibi_slopes[static_cast<std::size_t>(h)]) : 0.0L;
              const auto expect = path_attention(q.data() + ((b * T + t) * c.heads + h) * D, keys, pos, c.prefix + tr.depth(t),
                                                 k.data() + b * K * c.kv_heads * D + g * D, v.data() + b * K * c.kv_heads * D + g * D,
                                                 c.kv_heads * D, D, rope, slope);
              for (Eigen::Index e = 0; e < D; ++e) {
                CAPTURE(b, t, h, e);
                REQUIRE_THAT(out[static_cast<std::size_t>(((b * T + t) * c.heads + h) * D + e)],
                             Catch::Matchers::WithinAbs(static_cast<double>(expect[static_cast<std::size_t>(e)]), 2e-5));
              }
            }
          }
        }
      }
  }
}

TEMPLATE_TEST_CASE("tree attention: fused == reference, with soft cap, sinks and two threads", "[attention][tree]", float,
                   Eigen::bfloat16) {
  const Eigen::Index B = 2, P = 70, T = 12, K = P + T, H = 8, G = 2, D = 64;
  const Tree tree{{-1, 0, 0, 1, 2, 2, 4, -1, 7, 8, 3, 10}};
  const auto m = tree.mask();
  std::vector<std::uint8_t> mask(m);
  mask.insert(mask.end(), m.begin(), m.end());
  mask[static_cast<std::size_t>(T * T + 5 * T + 5)] = 0;  // sequence 1: token 5 does not see itself
  std::vector<std::int64_t> qpos, kpos;
  for (Eigen::Index b = 0; b < B; ++b) {
    for (Eigen::Index j = 0; j < P; ++j) kpos.push_back(j);
    for (int t = 0; t < T; ++t) kpos.push_back(P + tree.depth(t));
    for (int t = 0; t < T; ++t) qpos.push_back(P + tree.depth(t));
  }
  const auto q = posenc_test::random_vector<TestType>(static_cast<std::size_t>(B * T * H * D), 64);
  const auto k = posenc_test::random_vector<TestType>(static_cast<std::size_t>(B * K * G * D), 65);
  const auto v = posenc_test::random_vector<TestType>(static_cast<std::size_t>(B * K * G * D), 66);
  posenc::AttentionMetadata meta;
  meta.query_positions = posenc::PositionIdsView(qpos.data(), B, T);
  meta.key_positions = posenc::PositionIdsView(kpos.data(), B, K);
  meta.tree_mask = posenc::ConstTensorView<std::uint8_t, 3>(mask.data(), B, T, T);
  const posenc::ConstTensorView<TestType, 4> qv(q.data(), B, T, H, D), kv(k.data(), B, K, G, D), vv(v.data(), B, K, G, D);
  const double tol = std::is_same_v<TestType, float> ? 1e-5 : 1.6e-2;
  for (int variant = 0; variant < 5; ++variant) {
    CAPTURE(variant);
    posenc::AttentionParams params;
    // Windows of the tokens' own sequences (the deepest path is 5): one thread and two.
    if (variant >= 3) {
      params.sliding_window = variant == 3 ? 5 : 19;
      params.num_threads = variant == 3 ? 1 : 2;
      params.alibi_slopes = posenc::alibi_slopes(H);
    }
    if (variant == 1) {
      params.logit_softcap = 2.0;
      params.alibi_slopes = posenc::alibi_slopes(H);
    }
    if (variant == 2) {
      params.sink_logits.assign(static_cast<std::size_t>(H), 0.5);
      params.num_threads = 2;
    }
    std::vector<TestType> fused(q.size()), ref(q.size());
    std::vector<double> weights(static_cast<std::size_t>(B * H * T * K));
    posenc::attention<TestType>(qv, kv, vv, posenc::TensorView<TestType, 4>(fused.data(), B, T, H, D), params, meta);
    posenc::reference::attention<TestType>(qv, kv, vv, posenc::TensorView<TestType, 4>(ref.data(), B, T, H, D), params, meta,
                                           posenc::TensorView<double, 4>(weights.data(), B, H, T, K));
    for (std::size_t i = 0; i < fused.size(); ++i) {
      CAPTURE(i);
      REQUIRE_THAT(posenc::detail::to_double(fused[i]), Catch::Matchers::WithinAbs(posenc::detail::to_double(ref[i]), tol));
    }
    // The reference's weights: zero exactly off the tree, and on it where the mask says.
    for (Eigen::Index b = 0; b < B; ++b)
      for (Eigen::Index h = 0; h < H; ++h)
        for (Eigen::Index i = 0; i < T; ++i)
          for (Eigen::Index t = 0; t < T; ++t) {
            const double w = weights[static_cast<std::size_t>(((b * H + h) * T + i) * K + P + t)];
            CAPTURE(b, h, i, t);
            REQUIRE((mask[static_cast<std::size_t>((b * T + i) * T + t)] != 0) == (w > 0.0));
          }
    // With a window the prefix keys a query sees are the last W - depth: weights > 0 exactly
    // there (depth = the draft tokens its mask row holds).
    if (params.sliding_window > 0)
      for (Eigen::Index b = 0; b < B; ++b)
        for (Eigen::Index h = 0; h < H; ++h)
          for (Eigen::Index i = 0; i < T; ++i) {
            Eigen::Index depth = 0;
            for (Eigen::Index t = 0; t < T; ++t) depth += mask[static_cast<std::size_t>((b * T + i) * T + t)] != 0;
            for (Eigen::Index j = 0; j < P; ++j) {
              const double w = weights[static_cast<std::size_t>(((b * H + h) * T + i) * K + j)];
              CAPTURE(b, h, i, j, depth);
              REQUIRE((j >= P - (params.sliding_window - depth)) == (w > 0.0));
            }
          }
  }
}

TEST_CASE("tree attention through a KV cache, plain and rolling: verify the draft tree, erase the rejected slots, decode on",
          "[attention][tree][kv_cache]") {
  // Prefix of 6 tokens; draft tree 0 -> {1, 2}, 1 -> {3}, 2 -> {4} (depths 1, 2, 2, 3, 3) at
  // positions 6 + depth; the accepted path is 0, 2, 4 (positions 6, 7, 8); then one more token
  // at position 9. Expected: long-double causal attention over each token's own sequence,
  // RoPE at its position. W = 0: a cache of 16 slots, no window. W = 4: a sliding-window layer
  // in a rolling cache of 8 slots, which the drafts overflow, so it keeps the newest W - 1 = 3
  // prefix slots; each draft token must see the last W keys of prefix + its path (depth 1:
  // prefix 3, 4, 5 and itself; depth 3: prefix 5 and its path), the next token the last 4 of
  // 0 .. 5, d0, d2, d4, next.
  const Eigen::Index P = 6, T = 5, Hq = 4, Hk = 2, D = 32;
  const Tree tree{{-1, 0, 0, 1, 2}};
  posenc::RopeParams rp;
  rp.head_dim = D;
  const auto freqs = posenc::compute_rope_frequencies(rp);
  const auto q = posenc_test::random_vector<float>(static_cast<std::size_t>((P + T + 1) * Hq * D), 67);
  const auto k = posenc_test::random_vector<float>(static_cast<std::size_t>((P + T + 1) * Hk * D), 68);
  const auto v = posenc_test::random_vector<float>(static_cast<std::size_t>((P + T + 1) * Hk * D), 69);
  // Token n of q / k / v: prefix 0 .. 5, draft 6 .. 10, the next token 11.
  std::vector<std::int64_t> pos(static_cast<std::size_t>(P + T + 1));
  for (Eigen::Index j = 0; j < P; ++j) pos[static_cast<std::size_t>(j)] = j;
  for (int t = 0; t < T; ++t) pos[static_cast<std::size_t>(P + t)] = P + tree.depth(t);
  pos[static_cast<std::size_t>(P + T)] = P + 3;
  const auto rows = [&](const std::vector<float>& x, Eigen::Index first, Eigen::Index n, Eigen::Index heads) {
    return posenc::ConstTensorView<float, 4>(x.data() + first * heads * D, 1, n, heads, D);
  };
  const auto mask = tree.mask();
  for (const std::int64_t W : {std::int64_t{0}, std::int64_t{4}}) {
    CAPTURE(W);
    // keys: the token's own sequence; with a window, its last W.
    const auto check = [&](const float* got, Eigen::Index token, std::vector<Eigen::Index> keys) {
      if (W > 0) keys.erase(keys.begin(), keys.end() - W);
      for (Eigen::Index h = 0; h < Hq; ++h) {
        const auto expect = path_attention(q.data() + (token * Hq + h) * D, keys, pos, pos[static_cast<std::size_t>(token)],
                                           k.data() + (h / (Hq / Hk)) * D, v.data() + (h / (Hq / Hk)) * D, Hk * D, D, true, 0.0L);
        for (Eigen::Index e = 0; e < D; ++e) {
          CAPTURE(token, h, e);
          REQUIRE_THAT(got[h * D + e], Catch::Matchers::WithinAbs(static_cast<double>(expect[static_cast<std::size_t>(e)]), 2e-5));
        }
      }
    };
    posenc::KvCache<float> cache(1, W > 0 ? 8 : 16, Hk, D, W);
    cache.set_rope(freqs, posenc::RopeLayout::kHalfSplit);
    posenc::AttentionParams params;
    params.sliding_window = W;
    cache.append(rows(k, 0, P, Hk), rows(v, 0, P, Hk), posenc::PositionIdsView(pos.data(), 1, P));
    cache.append(rows(k, P, T, Hk), rows(v, P, T, Hk), posenc::PositionIdsView(pos.data() + P, 1, T));
    REQUIRE(cache.size() == (W > 0 ? (W - 1) + T : P + T));  // the rolling eviction happened
    std::vector<float> out(static_cast<std::size_t>(T * Hq * D), -9.0f);
    cache.attend(rows(q, P, T, Hq), posenc::TensorView<float, 4>(out.data(), 1, T, Hq, D),
                 posenc::ConstTensorView<std::uint8_t, 3>(mask.data(), 1, T, T), params);
    for (int t = 0; t < T; ++t) {
      std::vector<Eigen::Index> keys;
      for (Eigen::Index j = 0; j < P; ++j) keys.push_back(j);
      for (const int a : tree.path(t)) keys.push_back(P + a);
      check(out.data() + t * Hq * D, P + t, keys);
    }
    // Accept 0, 2, 4: erase draft slots 3 and 1 (the last first).
    const Eigen::Index kept = cache.size() - T;  // prefix slots in the cache
    cache.erase(kept + 3, 1);
    cache.erase(kept + 1, 1);
    REQUIRE(cache.size() == kept + 3);
    const std::int64_t next_pos[1] = {P + 3};
    cache.append(rows(k, P + T, 1, Hk), rows(v, P + T, 1, Hk), posenc::PositionIdsView(next_pos, 1, 1));
    std::vector<float> step(static_cast<std::size_t>(Hq * D));
    cache.attend(rows(q, P + T, 1, Hq), posenc::TensorView<float, 4>(step.data(), 1, 1, Hq, D), params);
    check(step.data(), P + T, {0, 1, 2, 3, 4, 5, P + 0, P + 2, P + 4, P + T});
  }
}

TEST_CASE("tree attention: bad tree masks throw before writing", "[attention][tree][errors]") {
  const Eigen::Index P = 4, T = 3, K = P + T, H = 2, D = 8;
  const auto q = posenc_test::random_vector<float>(static_cast<std::size_t>(T * H * D), 70);
  const auto k = posenc_test::random_vector<float>(static_cast<std::size_t>(K * H * D), 71);
  std::vector<float> out(q.size(), -9.0f);
  const posenc::ConstTensorView<float, 4> qv(q.data(), 1, T, H, D), kv(k.data(), 1, K, H, D);
  const posenc::TensorView<float, 4> ov(out.data(), 1, T, H, D);
  std::vector<std::uint8_t> mask = {1, 0, 0, 1, 1, 0, 1, 0, 1};
  posenc::AttentionMetadata meta;
  meta.tree_mask = posenc::ConstTensorView<std::uint8_t, 3>(mask.data(), 1, T, T);
  REQUIRE_NOTHROW(posenc::attention<float>(qv, kv, kv, ov, {}, meta));
  std::fill(out.begin(), out.end(), -9.0f);

  mask[1] = 1;  // query 0 sees draft token 1, listed after it
  REQUIRE_THROWS_AS(posenc::attention<float>(qv, kv, kv, ov, {}, meta), std::invalid_argument);
  REQUIRE_THROWS_WITH(posenc::attention<float>(qv, kv, kv, ov, {}, meta),
                      Contains("tree_mask[0, 0, 1] = 1 must be 0: draft token 1 comes after query 0"));
  mask[1] = 0;
  posenc::AttentionParams bidir;
  bidir.mask = posenc::MaskMode::kBidirectional;
  REQUIRE_THROWS_WITH(posenc::attention<float>(qv, kv, kv, ov, bidir, meta), Contains("tree_mask needs the causal mask"));
  posenc::AttentionParams windowed;
  windowed.sliding_window = 2;  // paths of 1, 2 and 2 tokens fit
  REQUIRE_NOTHROW(posenc::attention<float>(qv, kv, kv, ov, windowed, meta));
  std::fill(out.begin(), out.end(), -9.0f);
  windowed.sliding_window = 1;
  REQUIRE_THROWS_WITH(posenc::attention<float>(qv, kv, kv, ov, windowed, meta),
                      Contains("tree_mask: query 1 of sequence 0 sees 2 draft tokens, more than sliding_window = 1"));
  // emplace: assigning a view to an engaged optional view would copy elements (TensorMap's =).
  meta.tree_mask.emplace(mask.data(), 1, 1, T);
  REQUIRE_THROWS_WITH(posenc::attention<float>(qv, kv, kv, ov, {}, meta),
                      Contains("tree_mask shape [1, 1, 3] must be [batch, q_len, q_len] = [1, 3, 3]"));
  // More draft tokens than keys.
  const posenc::ConstTensorView<float, 4> short_k(k.data(), 1, 2, H, D);
  meta.tree_mask.emplace(mask.data(), 1, T, T);
  REQUIRE_THROWS_WITH(posenc::attention<float>(qv, short_k, short_k, ov, {}, meta), Contains("tree_mask: q_len = 3 must be <= k_len = 2"));
  // Dual chunk attention does not take one.
  posenc::RopeParams rp;
  rp.head_dim = D;
  posenc::DualChunkPlan plan;
  plan.freqs = posenc::compute_rope_frequencies(rp);
  plan.chunks = {8, 4, 64};
  REQUIRE_THROWS_WITH(posenc::dual_chunk_attention<float>(qv, kv, kv, ov, plan, {}, meta),
                      Contains("tree_mask is not supported by dual chunk attention"));
  // The cache's overload: the same checks, nothing written.
  posenc::KvCache<float> cache(1, 8, H, D);
  cache.append(kv, kv, posenc::PositionIdsView(std::vector<std::int64_t>{0, 1, 2, 3, 4, 5, 6}.data(), 1, K));
  mask[2] = 1;
  REQUIRE_THROWS_WITH(cache.attend(qv, ov, posenc::ConstTensorView<std::uint8_t, 3>(mask.data(), 1, T, T)),
                      Contains("KvCache::attend: tree_mask[0, 0, 2] = 1 must be 0"));
  for (const float x : out) REQUIRE(x == -9.0f);
}

TEMPLATE_TEST_CASE("tree attention over a paged pool equals attention() over the same keys laid out contiguously",
                   "[attention][tree][paged]", float, Eigen::bfloat16) {
  // Pages of 4 keys, handed out in a scrambled order; sequence 0 holds 6 prefix keys + 5 draft
  // tokens, sequence 1 holds 2 + 5. Keys and queries are taken as already rotated by the caller.
  const Eigen::Index page = 4, pages = 8, T = 5, H = 4, G = 2, D = 16;
  const std::vector<Eigen::Index> prefix = {6, 2};
  const Tree trees[2] = {Tree{{-1, 0, 1, 0, -1}}, Tree{{-1, -1, 1, 2, 0}}};
  const std::vector<std::int32_t> order = {5, 2, 7, 0, 3, 6, 1, 4};
  const auto q = posenc_test::random_vector<TestType>(static_cast<std::size_t>(2 * T * H * D), 81);
  std::vector<TestType> k_pages(static_cast<std::size_t>(pages * page * G * D)), v_pages(k_pages.size());
  std::vector<std::int32_t> table(2 * 3, 0);
  std::vector<std::int64_t> lens = {prefix[0] + T, prefix[1] + T};
  std::vector<std::uint8_t> mask;
  std::vector<float> out(q.size(), -9.0f);
  std::size_t next = 0;
  std::vector<std::vector<TestType>> k_seq(2), v_seq(2);
  for (std::size_t b = 0; b < 2; ++b) {
    const auto m = trees[b].mask();
    mask.insert(mask.end(), m.begin(), m.end());
    const auto n = static_cast<std::size_t>(lens[b]);
    k_seq[b] = posenc_test::random_vector<TestType>(n * static_cast<std::size_t>(G * D), 82 + b);
    v_seq[b] = posenc_test::random_vector<TestType>(n * static_cast<std::size_t>(G * D), 84 + b);
    for (std::size_t j = 0; j < n; ++j) {
      if (j % static_cast<std::size_t>(page) == 0) table[b * 3 + j / static_cast<std::size_t>(page)] = order[next++];
      const std::size_t slot = static_cast<std::size_t>(table[b * 3 + j / static_cast<std::size_t>(page)]) * static_cast<std::size_t>(page) +
                               j % static_cast<std::size_t>(page);
      std::copy_n(k_seq[b].begin() + static_cast<std::ptrdiff_t>(j * G * D), G * D, k_pages.begin() + static_cast<std::ptrdiff_t>(slot * G * D));
      std::copy_n(v_seq[b].begin() + static_cast<std::ptrdiff_t>(j * G * D), G * D, v_pages.begin() + static_cast<std::ptrdiff_t>(slot * G * D));
    }
  }
  std::vector<TestType> paged_out(q.size());
  const posenc::ConstTensorView<TestType, 4> kp(k_pages.data(), pages, page, G, D), vp(v_pages.data(), pages, page, G, D);
  const posenc::ConstTensorView<std::int32_t, 2> tv(table.data(), 2, 3);
  const posenc::ConstTensorView<std::int64_t, 1> lv(lens.data(), 2);
  const posenc::ConstTensorView<std::uint8_t, 3> mv(mask.data(), 2, T, T);
  posenc::attention_paged<TestType, TestType>(posenc::ConstTensorView<TestType, 4>(q.data(), 2, T, H, D), kp, vp, tv, lv,
                                              posenc::TensorView<TestType, 4>(paged_out.data(), 2, T, H, D), mv);
  for (Eigen::Index b = 0; b < 2; ++b) {
    std::vector<TestType> ref(static_cast<std::size_t>(T * H * D));
    posenc::AttentionMetadata meta;
    meta.tree_mask = posenc::ConstTensorView<std::uint8_t, 3>(mask.data() + b * T * T, 1, T, T);
    const Eigen::Index n = lens[static_cast<std::size_t>(b)];
    posenc::attention<TestType>(posenc::ConstTensorView<TestType, 4>(q.data() + b * T * H * D, 1, T, H, D),
                                posenc::ConstTensorView<TestType, 4>(k_seq[static_cast<std::size_t>(b)].data(), 1, n, G, D),
                                posenc::ConstTensorView<TestType, 4>(v_seq[static_cast<std::size_t>(b)].data(), 1, n, G, D),
                                posenc::TensorView<TestType, 4>(ref.data(), 1, T, H, D), {}, meta);
    for (std::size_t i = 0; i < ref.size(); ++i) {
      CAPTURE(b, i);
      REQUIRE(posenc::detail::to_double(paged_out[static_cast<std::size_t>(b * T * H * D) + i]) ==
              Approx(posenc::detail::to_double(ref[i])).margin(std::is_same_v<TestType, float> ? 1e-6 : 8e-3));
    }
  }
  // A sliding window of 3 (the deepest paths): each draft token's own sequence's, as attention()
  // has it over the same keys laid out contiguously.
  posenc::AttentionParams windowed;
  windowed.sliding_window = 3;
  std::vector<TestType> paged_window(q.size());
  posenc::attention_paged<TestType, TestType>(posenc::ConstTensorView<TestType, 4>(q.data(), 2, T, H, D), kp, vp, tv, lv,
                                              posenc::TensorView<TestType, 4>(paged_window.data(), 2, T, H, D), mv, windowed);
  for (Eigen::Index b = 0; b < 2; ++b) {
    std::vector<TestType> ref(static_cast<std::size_t>(T * H * D));
    posenc::AttentionMetadata meta;
    meta.tree_mask = posenc::ConstTensorView<std::uint8_t, 3>(mask.data() + b * T * T, 1, T, T);
    const Eigen::Index n = lens[static_cast<std::size_t>(b)];
    posenc::reference::attention<TestType>(posenc::ConstTensorView<TestType, 4>(q.data() + b * T * H * D, 1, T, H, D),
                                           posenc::ConstTensorView<TestType, 4>(k_seq[static_cast<std::size_t>(b)].data(), 1, n, G, D),
                                           posenc::ConstTensorView<TestType, 4>(v_seq[static_cast<std::size_t>(b)].data(), 1, n, G, D),
                                           posenc::TensorView<TestType, 4>(ref.data(), 1, T, H, D), windowed, meta);
    for (std::size_t i = 0; i < ref.size(); ++i) {
      CAPTURE(b, i);
      REQUIRE(posenc::detail::to_double(paged_window[static_cast<std::size_t>(b * T * H * D) + i]) ==
              Approx(posenc::detail::to_double(ref[i])).margin(std::is_same_v<TestType, float> ? 1e-6 : 8e-3));
    }
  }
  REQUIRE(paged_window != paged_out);
  // The mask matters here (sequence 1's siblings 0 and 1 do not see each other).
  std::vector<TestType> unmasked(q.size());
  posenc::attention_paged<TestType, TestType>(posenc::ConstTensorView<TestType, 4>(q.data(), 2, T, H, D), kp, vp, tv, lv,
                                              posenc::TensorView<TestType, 4>(unmasked.data(), 2, T, H, D));
  REQUIRE(unmasked != paged_out);

  // Errors, nothing written: ALiBi (paged positions are slots), a sequence shorter than q_len.
  std::vector<TestType> untouched(q.size(), TestType(-9.0f));
  const posenc::TensorView<TestType, 4> uv(untouched.data(), 2, T, H, D);
  posenc::AttentionParams alibi;
  alibi.alibi_slopes = posenc::alibi_slopes(H);
  const auto verify = [&](posenc::ConstTensorView<std::int64_t, 1> seq_lens, const posenc::AttentionParams& params) {
    posenc::attention_paged<TestType, TestType>(posenc::ConstTensorView<TestType, 4>(q.data(), 2, T, H, D), kp, vp, tv, seq_lens, uv,
                                                mv, params);
  };
  REQUIRE_THROWS_WITH(verify(lv, alibi),
                      Contains("tree_mask with ALiBi, a relative bias, attention chunks or a query temperature needs the draft tokens' positions"));
  posenc::AttentionParams t5;
  std::vector<float> t5_table(32 * H, 0.25f);
  t5.relative_bias = posenc::relative_position_bias(posenc::ConstTensorView<float, 2>(t5_table.data(), 32, H));
  REQUIRE_THROWS_WITH(verify(lv, t5), Contains("a relative bias"));
  std::vector<std::int64_t> short_lens = {prefix[0] + T, 3};
  REQUIRE_THROWS_WITH(verify(posenc::ConstTensorView<std::int64_t, 1>(short_lens.data(), 2), {}),
                      Contains("seq_lens[1] = 3 must be >= q_len = 5 with tree_mask"));
  for (const auto x : untouched) REQUIRE(posenc::detail::to_double(x) == -9.0);
}

TEST_CASE("draft trees: parent indices to the ancestor mask and the positions by depth", "[attention][tree]") {
  // The header's example by hand: parents -1 0 -1 2 after a prefix of 7 tokens.
  std::vector<std::uint8_t> mask(16, 9);
  std::vector<std::int64_t> pos(4, -9);
  posenc::draft_tree_mask({-1, 0, -1, 2}, posenc::TensorView<std::uint8_t, 2>(mask.data(), 4, 4));
  posenc::draft_tree_positions({-1, 0, -1, 2}, 7, posenc::TensorView<std::int64_t, 1>(pos.data(), 4));
  CHECK(mask == std::vector<std::uint8_t>{1, 0, 0, 0,  //
                                          1, 1, 0, 0,  //
                                          0, 0, 1, 0,  //
                                          0, 0, 1, 1});
  CHECK(pos == std::vector<std::int64_t>{7, 8, 7, 8});
  // The trees of the tests above, against this file's own ancestor walk.
  for (const Tree& tree : {Tree{{-1, 0, 0, 1, 1, 2, 5}}, Tree{{-1, 0, 0, 1, 2, 2, 4, -1, 7, 8, 3, 10}}}) {
    const auto n = tree.size();
    std::vector<std::int64_t> parents(tree.parent.begin(), tree.parent.end());
    std::vector<std::uint8_t> m(static_cast<std::size_t>(n * n));
    std::vector<std::int64_t> p(static_cast<std::size_t>(n));
    posenc::draft_tree_mask(parents, posenc::TensorView<std::uint8_t, 2>(m.data(), n, n));
    posenc::draft_tree_positions(parents, 100, posenc::TensorView<std::int64_t, 1>(p.data(), n));
    CHECK(m == tree.mask());
    for (int t = 0; t < n; ++t) CHECK(p[static_cast<std::size_t>(t)] == 100 + tree.depth(t));
  }
  // A parent after its child, or below -1, and wrong shapes: refused, nothing written.
  REQUIRE_THROWS_AS(posenc::draft_tree_mask({-1, 2, 0}, posenc::TensorView<std::uint8_t, 2>(mask.data(), 3, 3)), std::invalid_argument);
  REQUIRE_THROWS_WITH(posenc::draft_tree_mask({-1, 2, 0}, posenc::TensorView<std::uint8_t, 2>(mask.data(), 3, 3)),
                      Contains("parents[1] = 2 must be in [-1, 1)"));
  REQUIRE_THROWS_WITH(posenc::draft_tree_positions({-2}, 0, posenc::TensorView<std::int64_t, 1>(pos.data(), 1)),
                      Contains("parents[0] = -2 must be in [-1, 0)"));
  REQUIRE_THROWS_WITH(posenc::draft_tree_mask({-1, 0}, posenc::TensorView<std::uint8_t, 2>(mask.data(), 2, 3)),
                      Contains("mask shape [2, 3] must be [T, T] = [2, 2]"));
  REQUIRE_THROWS_WITH(posenc::draft_tree_positions({-1, 0}, 0, posenc::TensorView<std::int64_t, 1>(pos.data(), 3)),
                      Contains("positions has 3 entries; it must have T = parents.size() = 2"));
  REQUIRE_THROWS_WITH(posenc::draft_tree_positions({-1}, -1, posenc::TensorView<std::int64_t, 1>(pos.data(), 1)),
                      Contains("first_position = -1 must be in [0, 2^53 - T]"));
  CHECK(pos == std::vector<std::int64_t>{7, 8, 7, 8});
}

TEST_CASE("draft trees: first_position may reach 2^53 - T and no further",
          "[attention][tree][errors]") {
  // Positions must stay in [0, 2^53]: a tree of T tokens may be T - 1 deep, so the header bounds
  // first_position by 2^53 - T (draft_tree_positions: "first_position outside [0, 2^53 - T]").
  constexpr std::int64_t kMax = std::int64_t{1} << 53;
  std::vector<std::int64_t> pos(2, -9);
  const posenc::TensorView<std::int64_t, 1> view(pos.data(), 2);
  posenc::draft_tree_positions({-1, 0}, kMax - 2, view);
  CHECK(pos == std::vector<std::int64_t>{kMax - 2, kMax - 1});
  REQUIRE_THROWS_WITH(posenc::draft_tree_positions({-1, 0}, kMax - 1, view),
                      Contains("must be in [0, 2^53 - T]"));
  REQUIRE_THROWS_WITH(posenc::draft_tree_positions({-1, -1}, kMax, view),
                      Contains("must be in [0, 2^53 - T]"));
  CHECK(pos == std::vector<std::int64_t>{kMax - 2, kMax - 1});
}

// From a mutation audit (thirty-second session): the paged overload's own checks, on every
// sequence, and a sequence made of the draft tokens alone.
TEST_CASE("tree attention over a paged pool: a sequence of q_len keys, and every check on "
          "every sequence", "[attention][tree][paged][errors]") {
  // Pages of 2 keys, one kv head: sequence 0 is the 3 draft tokens alone (pages 3, 0),
  // sequence 1 two prefix keys + 3 draft tokens (pages 4, 1, 2).
  const Eigen::Index page = 2, pages = 5, T = 3, H = 2, D = 8;
  const auto q = posenc_test::random_vector<float>(static_cast<std::size_t>(2 * T * H * D), 91);
  const auto rows = static_cast<std::size_t>(pages * page * D);
  const auto pool_k = posenc_test::random_vector<float>(rows, 92);
  const auto pool_v = posenc_test::random_vector<float>(rows, 93);
  const std::vector<std::int32_t> table = {3, 0, 0, 4, 1, 2};
  std::vector<std::int64_t> lens = {T, T + 2};
  const Tree tree{{-1, 0, 0}};  // two siblings under one root
  std::vector<std::uint8_t> mask = tree.mask();
  const auto m1 = tree.mask();
  mask.insert(mask.end(), m1.begin(), m1.end());
  const posenc::ConstTensorView<float, 4> kp(pool_k.data(), pages, page, 1, D),
      vp(pool_v.data(), pages, page, 1, D);
  std::vector<float> out(q.size(), -9.0f);
  const auto verify = [&](const std::vector<std::int64_t>& l, const std::vector<std::uint8_t>& m,
                          const posenc::AttentionParams& params) {
    posenc::attention_paged<float, float>(
        posenc::ConstTensorView<float, 4>(q.data(), 2, T, H, D), kp, vp,
        posenc::ConstTensorView<std::int32_t, 2>(table.data(), 2, 3),
        posenc::ConstTensorView<std::int64_t, 1>(l.data(), 2),
        posenc::TensorView<float, 4>(out.data(), 2, T, H, D),
        posenc::ConstTensorView<std::uint8_t, 3>(m.data(), 2, T, T), params);
  };
  // Refused, nothing written: chunks or a query temperature (positions are slots), sequence 0
  // shorter than q_len, an entry above the diagonal in sequence 0's mask.
  posenc::AttentionParams chunks;
  chunks.attention_chunk_size = 4;
  REQUIRE_THROWS_WITH(verify(lens, mask, chunks), Contains("attention chunks"));
  posenc::AttentionParams temperature;
  temperature.query_temperature = posenc::AttentionTemperature{};
  REQUIRE_THROWS_WITH(verify(lens, mask, temperature), Contains("query temperature"));
  REQUIRE_THROWS_WITH(verify({2, T + 2}, mask, {}),
                      Contains("seq_lens[0] = 2 must be >= q_len = 3"));
  std::vector<std::uint8_t> bad = mask;
  bad[1] = 1;  // query 0 of sequence 0 sees draft token 1
  REQUIRE_THROWS_WITH(verify(lens, bad, {}), Contains("tree_mask[0, 0, 1] = 1 must be 0"));
  for (const float x : out) REQUIRE(x == -9.0f);
  // seq_len = q_len: the draft tokens are the whole sequence. Each sequence as the reference
  // over its keys laid out contiguously.
  REQUIRE_NOTHROW(verify(lens, mask, {}));
  for (std::size_t b = 0; b < 2; ++b) {
    const auto n = static_cast<std::size_t>(lens[b]);
    std::vector<float> k(n * static_cast<std::size_t>(D)), v(k.size());
    for (std::size_t j = 0; j < n; ++j) {
      const auto slot = static_cast<std::size_t>(table[b * 3 + j / page] * page) + j % page;
      std::copy_n(pool_k.begin() + static_cast<std::ptrdiff_t>(slot * D), D,
                  k.begin() + static_cast<std::ptrdiff_t>(j * D));
      std::copy_n(pool_v.begin() + static_cast<std::ptrdiff_t>(slot * D), D,
                  v.begin() + static_cast<std::ptrdiff_t>(j * D));
    }
    std::vector<float> ref(static_cast<std::size_t>(T * H * D));
    posenc::AttentionMetadata meta;
    meta.tree_mask = posenc::ConstTensorView<std::uint8_t, 3>(mask.data() + b * T * T, 1, T, T);
    const auto keys = static_cast<Eigen::Index>(n);
    posenc::reference::attention<float>(
        posenc::ConstTensorView<float, 4>(q.data() + b * T * H * D, 1, T, H, D),
        posenc::ConstTensorView<float, 4>(k.data(), 1, keys, 1, D),
        posenc::ConstTensorView<float, 4>(v.data(), 1, keys, 1, D),
        posenc::TensorView<float, 4>(ref.data(), 1, T, H, D), {}, meta);
    for (std::size_t i = 0; i < ref.size(); ++i) {
      CAPTURE(b, i);
      REQUIRE(out[b * static_cast<std::size_t>(T * H * D) + i] == Approx(ref[i]).margin(1e-6));
    }
  }
}
