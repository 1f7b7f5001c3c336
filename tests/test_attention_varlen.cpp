// Packed variable-length attention (THD, cu_seqlens): each sequence of the packed batch must
// equal the double reference run on that sequence alone (batch 1), with causal chunks
// (q_len < k_len), q_len > k_len rows, empty sequences, ALiBi, windows, sinks and the lse;
// it must never read another sequence's keys; bad cu_seqlens write nothing.

#include <catch2/catch.hpp>

#include <posenc/alibi.hpp>
#include <posenc/attention_varlen.hpp>
#include <posenc/reference/attention.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "support/attention_variants.hpp"
#include "support/check.hpp"
#include "support/rng.hpp"

using Catch::Matchers::Contains;
using posenc::AttentionParams;
using posenc::ConstTensorView;
using posenc::MaskMode;
using posenc::TensorView;

namespace {

constexpr Eigen::Index H = 8, KH = 2, d = 40;

struct Packed {
  std::vector<std::int64_t> cu_q, cu_k;
  std::vector<float> q, k, v;
  Packed(const std::vector<std::int64_t>& q_lens, const std::vector<std::int64_t>& k_lens) {
    cu_q = {0};
    cu_k = {0};
    for (std::size_t s = 0; s < q_lens.size(); ++s) {
      cu_q.push_back(cu_q.back() + q_lens[s]);
      cu_k.push_back(cu_k.back() + k_lens[s]);
    }
    q = posenc_test::random_vector<float>(static_cast<std::size_t>(cu_q.back() * H * d), 71);
    k = posenc_test::random_vector<float>(static_cast<std::size_t>(cu_k.back() * KH * d), 72);
    v = posenc_test::random_vector<float>(k.size(), 73);
    for (float& x : q) x *= 2.0f;
    for (float& x : k) x *= 2.0f;
  }
  Eigen::Index seqs() const { return static_cast<Eigen::Index>(cu_q.size()) - 1; }
  Eigen::Index total_q() const { return cu_q.back(); }
  Eigen::Index total_k() const { return cu_k.back(); }
};

void run(const Packed& x, std::vector<float>& out, std::vector<float>& lse, const AttentionParams& params) {
  posenc::attention_varlen<float>(
      ConstTensorView<float, 3>(x.q.data(), x.total_q(), H, d), ConstTensorView<float, 3>(x.k.data(), x.total_k(), KH, d),
      ConstTensorView<float, 3>(x.v.data(), x.total_k(), KH, d), TensorView<float, 3>(out.data(), x.total_q(), H, d),
      ConstTensorView<std::int64_t, 1>(x.cu_q.data(), x.seqs() + 1),
      ConstTensorView<std::int64_t, 1>(x.cu_k.data(), x.seqs() + 1), params, nullptr,
      TensorView<float, 2>(lse.data(), x.total_q(), H));
}

}  // namespace

TEST_CASE("attention varlen: each packed sequence equals the reference on that sequence alone",
          "[attention][varlen]") {
  // Sequences: a prefill, an empty one, a chunk after 170 cached keys, a decode token, a
  // sequence with more queries than keys (rows without keys), and queries with no key at all.
  const std::vector<std::int64_t> q_lens = {37, 0, 130, 1, 6, 3}, k_lens = {37, 9, 300, 77, 4, 0};
  const Packed x(q_lens, k_lens);
  const int variant = GENERATE(0, 1, 2, 3, 5);  // plain causal, ALiBi, window 50 + sinks, bidirectional, chunks
  const int threads = GENERATE(1, 2);
  CAPTURE(variant, threads);
  const AttentionParams params = posenc_test::attention_variant(variant, H, threads);
  std::vector<float> out(static_cast<std::size_t>(x.total_q() * H * d), -9.0f),
      lse(static_cast<std::size_t>(x.total_q() * H), -9.0f);
  run(x, out, lse, params);

  for (Eigen::Index s = 0; s < x.seqs(); ++s) {
    const Eigen::Index q0 = x.cu_q[static_cast<std::size_t>(s)], q_len = q_lens[static_cast<std::size_t>(s)];
    const Eigen::Index k0 = x.cu_k[static_cast<std::size_t>(s)], k_len = k_lens[static_cast<std::size_t>(s)];
    CAPTURE(s, q_len, k_len);
    if (q_len == 0) continue;
    const auto got = [&](std::size_t i) { return static_cast<double>(out[static_cast<std::size_t>(q0 * H * d) + i]); };
    if (k_len == 0) {
      for (Eigen::Index i = 0; i < q_len * H * d; ++i) CHECK(got(static_cast<std::size_t>(i)) == 0.0);
      for (Eigen::Index i = 0; i < q_len * H; ++i) {  // attention()'s rule: the sink's term alone
        CHECK(lse[static_cast<std::size_t>(q0 * H + i)] ==
              (params.sink_logits.empty() ? -std::numeric_limits<float>::infinity()
                                          : float(params.sink_logits[static_cast<std::size_t>(i % H)])));
      }
      continue;
    }
    // The sequence copied out alone, batch 1, through the double reference.
    const std::vector<float> qs(x.q.begin() + q0 * H * d, x.q.begin() + (q0 + q_len) * H * d);
    const std::vector<float> ks(x.k.begin() + k0 * KH * d, x.k.begin() + (k0 + k_len) * KH * d);
    const std::vector<float> vs(x.v.begin() + k0 * KH * d, x.v.begin() + (k0 + k_len) * KH * d);
    std::vector<float> want(qs.size());
    posenc::reference::attention<float>(ConstTensorView<float, 4>(qs.data(), 1, q_len, H, d),
                                        ConstTensorView<float, 4>(ks.data(), 1, k_len, KH, d),
                                        ConstTensorView<float, 4>(vs.data(), 1, k_len, KH, d),
                                        TensorView<float, 4>(want.data(), 1, q_len, H, d), params);
    POSENC_REQUIRE_CLOSE(posenc_test::compare(
        want.size(), got, [&](std::size_t i) { return static_cast<double>(want[i]); }, 1e-5));
    // The lse equals attention()'s for the sequence alone, bit for bit (the same kernel on the
    // same rows; attention()'s lse itself is checked in test_attention_merge.cpp).
    std::vector<float> alone(qs.size()), alone_lse(static_cast<std::size_t>(q_len * H));
    posenc::attention<float>(ConstTensorView<float, 4>(qs.data(), 1, q_len, H, d),
                             ConstTensorView<float, 4>(ks.data(), 1, k_len, KH, d),
                             ConstTensorView<float, 4>(vs.data(), 1, k_len, KH, d),
                             TensorView<float, 4>(alone.data(), 1, q_len, H, d),
                             TensorView<float, 3>(alone_lse.data(), 1, q_len, H), params);
    CHECK(std::equal(alone_lse.begin(), alone_lse.end(), lse.begin() + q0 * H));
  }
}

TEST_CASE("attention varlen: a v_head_dim other than head_dim reads each sequence's own V rows",
          "[attention][varlen][mla]") {
  // DeepSeek MLA's shapes in small: q / k 24 wide, v / out 16. Sequence s's V rows start at
  // cu_k[s] * kv_heads * dv, not * d; every sequence past the first tells the two apart.
  constexpr Eigen::Index dk = 24, dv = 16;
  const std::vector<std::int64_t> q_lens = {5, 3, 1}, k_lens = {5, 9, 12};
  std::vector<std::int64_t> cu_q = {0}, cu_k = {0};
  for (std::size_t s = 0; s < q_lens.size(); ++s) {
    cu_q.push_back(cu_q.back() + q_lens[s]);
    cu_k.push_back(cu_k.back() + k_lens[s]);
  }
  const Eigen::Index tq = cu_q.back(), tk = cu_k.back();
  const auto q = posenc_test::random_vector<float>(static_cast<std::size_t>(tq * H * dk), 81);
  const auto k = posenc_test::random_vector<float>(static_cast<std::size_t>(tk * KH * dk), 82);
  const auto v = posenc_test::random_vector<float>(static_cast<std::size_t>(tk * KH * dv), 83);
  std::vector<float> out(static_cast<std::size_t>(tq * H * dv), -9.0f);
  posenc::attention_varlen<float>(
      ConstTensorView<float, 3>(q.data(), tq, H, dk), ConstTensorView<float, 3>(k.data(), tk, KH, dk),
      ConstTensorView<float, 3>(v.data(), tk, KH, dv), TensorView<float, 3>(out.data(), tq, H, dv),
      ConstTensorView<std::int64_t, 1>(cu_q.data(), 4), ConstTensorView<std::int64_t, 1>(cu_k.data(), 4));
  for (std::size_t s = 0; s < q_lens.size(); ++s) {
    CAPTURE(s);
    const Eigen::Index q0 = cu_q[s], k0 = cu_k[s], nq = q_lens[s], nk = k_lens[s];
    const std::vector<float> qs(q.begin() + q0 * H * dk, q.begin() + (q0 + nq) * H * dk);
    const std::vector<float> ks(k.begin() + k0 * KH * dk, k.begin() + (k0 + nk) * KH * dk);
    const std::vector<float> vs(v.begin() + k0 * KH * dv, v.begin() + (k0 + nk) * KH * dv);
    std::vector<float> want(static_cast<std::size_t>(nq * H * dv));
    posenc::reference::attention<float>(ConstTensorView<float, 4>(qs.data(), 1, nq, H, dk),
                                        ConstTensorView<float, 4>(ks.data(), 1, nk, KH, dk),
                                        ConstTensorView<float, 4>(vs.data(), 1, nk, KH, dv),
                                        TensorView<float, 4>(want.data(), 1, nq, H, dv), {});
    POSENC_REQUIRE_CLOSE(posenc_test::compare(
        want.size(),
        [&](std::size_t i) { return static_cast<double>(out[static_cast<std::size_t>(q0 * H * dv) + i]); },
        [&](std::size_t i) { return static_cast<double>(want[i]); }, 1e-5));
  }
}

TEST_CASE("attention varlen: keyless sequences with positions and tree masks",
          "[attention][varlen][errors]") {
  // Sequence 1 has queries and no keys. With key_positions its rows are zeros (it reads no
  // position); with tree_masks its queries would have to be its last keys, which it has not:
  // an error, checked although the sequence is validated as one with q_len keys.
  const std::vector<std::int64_t> q_lens = {1, 2}, k_lens = {2, 0};
  const Packed x(q_lens, k_lens);
  std::vector<float> out(static_cast<std::size_t>(x.total_q() * H * d), -9.0f);
  const std::vector<std::int64_t> qpos = {1, 0, 1}, kpos = {0, 1};
  posenc::VarlenMetadata meta;
  meta.query_positions = ConstTensorView<std::int64_t, 1>(qpos.data(), 3);
  meta.key_positions = ConstTensorView<std::int64_t, 1>(kpos.data(), 2);
  const auto call = [&](const posenc::VarlenMetadata& m) {
    posenc::attention_varlen<float>(
        ConstTensorView<float, 3>(x.q.data(), x.total_q(), H, d),
        ConstTensorView<float, 3>(x.k.data(), x.total_k(), KH, d),
        ConstTensorView<float, 3>(x.v.data(), x.total_k(), KH, d),
        TensorView<float, 3>(out.data(), x.total_q(), H, d),
        ConstTensorView<std::int64_t, 1>(x.cu_q.data(), 3),
        ConstTensorView<std::int64_t, 1>(x.cu_k.data(), 3), AttentionParams{}, m);
  };
  REQUIRE_NOTHROW(call(meta));
  for (std::size_t i = static_cast<std::size_t>(H * d); i < out.size(); ++i) REQUIRE(out[i] == 0.0f);
  std::fill(out.begin(), out.end(), -9.0f);
  const std::vector<std::uint8_t> masks = {1, 1, 0, 1, 1};  // [1 x 1] then [2 x 2]
  posenc::VarlenMetadata trees = meta;
  trees.tree_masks = ConstTensorView<std::uint8_t, 1>(masks.data(), 5);
  REQUIRE_THROWS_WITH(call(trees), Contains("sequence 1 has 2 queries and 0 keys: with tree_masks "
                                            "its queries are its last keys"));
  for (const float y : out) REQUIRE(y == -9.0f);
}

TEST_CASE("attention varlen: a sequence never sees another sequence's keys",
          "[attention][varlen]") {
  // Two sequences whose keys are all 0 (equal scores) with V = 1 in sequence 0 and V = -1 in
  // sequence 1: each output must be exactly its own value (any leak pulls it towards 0).
  const std::vector<std::int64_t> q_lens = {20, 20}, k_lens = {70, 70};
  Packed x(q_lens, k_lens);
  std::fill(x.k.begin(), x.k.end(), 0.0f);
  const auto half = static_cast<std::ptrdiff_t>(x.v.size() / 2);
  std::fill(x.v.begin(), x.v.begin() + half, 1.0f);
  std::fill(x.v.begin() + half, x.v.end(), -1.0f);
  std::vector<float> out(static_cast<std::size_t>(x.total_q() * H * d)), lse(static_cast<std::size_t>(x.total_q() * H));
  AttentionParams params;
  params.mask = MaskMode::kBidirectional;
  run(x, out, lse, params);
  for (std::size_t i = 0; i < out.size(); ++i) {
    CAPTURE(i);
    REQUIRE(out[i] == (i < out.size() / 2 ? 1.0f : -1.0f));
  }
  // Equal scores: lse = log(70) for every row.
  for (const float l : lse) CHECK_THAT(l, Catch::Matchers::WithinAbs(std::log(70.0), 1e-6));
}

TEST_CASE("attention varlen: bad cu_seqlens and shapes throw before anything is written",
          "[attention][varlen][errors]") {
  const Packed x({3, 2}, {4, 2});
  std::vector<float> out(static_cast<std::size_t>(x.total_q() * H * d), 5.0f), lse(static_cast<std::size_t>(x.total_q() * H), 5.0f);
  const auto untouched = [&] {
    return std::all_of(out.begin(), out.end(), [](float o) { return o == 5.0f; }) &&
           std::all_of(lse.begin(), lse.end(), [](float o) { return o == 5.0f; });
  };
  auto call = [&](std::vector<std::int64_t> cu_q, std::vector<std::int64_t> cu_k, AttentionParams params = {}) {
    posenc::attention_varlen<float>(
        ConstTensorView<float, 3>(x.q.data(), x.total_q(), H, d), ConstTensorView<float, 3>(x.k.data(), x.total_k(), KH, d),
        ConstTensorView<float, 3>(x.v.data(), x.total_k(), KH, d), TensorView<float, 3>(out.data(), x.total_q(), H, d),
        ConstTensorView<std::int64_t, 1>(cu_q.data(), static_cast<Eigen::Index>(cu_q.size())),
        ConstTensorView<std::int64_t, 1>(cu_k.data(), static_cast<Eigen::Index>(cu_k.size())), params, nullptr,
        TensorView<float, 2>(lse.data(), x.total_q(), H));
  };
  REQUIRE_THROWS_AS(call({0, 3, 4}, {0, 4, 6}), std::invalid_argument);
  REQUIRE_THROWS_WITH(call({0, 3, 4}, {0, 4, 6}), Contains("cu_seqlens_q must run from 0 to 5") &&
                                                      Contains("it runs from 0 to 4"));
  REQUIRE_THROWS_WITH(call({0, 3, 5}, {0, 5, 4, 6}), Contains("have 3 and 4 entries"));
  REQUIRE_THROWS_WITH(call({0, 3, 5}, {0, 7, 6}), Contains("cu_seqlens_k[2] = 6 is below cu_seqlens_k[1] = 7"));
  REQUIRE_THROWS_WITH(call({1, 3, 5}, {0, 4, 6}), Contains("cu_seqlens_q must run from 0"));
  AttentionParams params;
  params.alibi_slopes = {0.5};  // attention()'s own parameter checks apply
  REQUIRE_THROWS_WITH(call({0, 3, 5}, {0, 4, 6}, params), Contains("alibi_slopes has 1 entries"));
  CHECK(untouched());
}

TEST_CASE("attention varlen: a batch without a query still rejects a bad call",
          "[attention][varlen][errors]") {
  // The per-sequence checks run for sequences with queries; a step whose sequences all had
  // none let any parameter through (found by tests/fuzz/fuzz_attention.cpp). A bad call must
  // throw whatever the batch holds. 480 key elements: [12, 2, 20], [6, 2, 40] or [4, 3, 40].
  const std::vector<float> kv(480, 1.0f);
  std::vector<float> q, out, lse;  // total_q = 0
  auto call = [&](Eigen::Index rows, Eigen::Index kv_heads, Eigen::Index k_dim,
                  const AttentionParams& params) {
    const std::vector<std::int64_t> cu_q{0, 0, 0}, cu_k{0, rows - 2, rows};
    posenc::attention_varlen<float>(
        ConstTensorView<float, 3>(q.data(), 0, H, d),
        ConstTensorView<float, 3>(kv.data(), rows, kv_heads, k_dim),
        ConstTensorView<float, 3>(kv.data(), rows, kv_heads, k_dim),
        TensorView<float, 3>(out.data(), 0, H, k_dim),
        ConstTensorView<std::int64_t, 1>(cu_q.data(), 3),
        ConstTensorView<std::int64_t, 1>(cu_k.data(), 3), params, nullptr,
        TensorView<float, 2>(lse.data(), 0, H));
  };
  REQUIRE_NOTHROW(call(6, KH, d, {}));
  AttentionParams slopes;
  slopes.alibi_slopes = {0.5};
  REQUIRE_THROWS_WITH(call(6, KH, d, slopes), Contains("alibi_slopes has 1 entries"));
  AttentionParams threads;
  threads.num_threads = 0;
  REQUIRE_THROWS_WITH(call(6, KH, d, threads), Contains("num_threads = 0 must be >= 1"));
  AttentionParams window;
  window.sliding_window = -1;
  REQUIRE_THROWS_AS(call(6, KH, d, window), std::invalid_argument);
  REQUIRE_THROWS_WITH(call(4, 3, d, {}), Contains("heads = 8 must be a multiple of kv_heads = 3"));
  REQUIRE_THROWS_WITH(call(12, KH, 20, {}), Contains("q head_dim = 40 and k head_dim = 20"));
}

TEST_CASE("attention varlen: per-token positions and draft-tree masks equal the reference on each sequence with "
          "the same metadata",
          "[attention][varlen][tree]") {
  // Sequence 0: a prefill chunk of 3 after 4 cached keys at positions 10.. (a trimmed prefix);
  // sequence 1: a draft tree of 4 tokens (parents -1, 0, -1, 2) after 5 keys, at depths 5 5 6
  // ... ; sequence 2: no queries; sequence 3: one decode token with a 1 x 1 tree (itself).
  const Packed x({3, 4, 0, 1}, {7, 9, 2, 6});
  std::vector<std::int64_t> qpos, kpos;
  for (std::int64_t j = 0; j < 7; ++j) kpos.push_back(10 + j);
  for (std::int64_t i = 0; i < 3; ++i) qpos.push_back(14 + i);
  const int parent[4] = {-1, 0, -1, 2};
  std::int64_t depth[4];
  for (int t = 0; t < 4; ++t) depth[t] = parent[t] < 0 ? 0 : depth[parent[t]] + 1;
  for (std::int64_t j = 0; j < 5; ++j) kpos.push_back(j);
  for (int t = 0; t < 4; ++t) kpos.push_back(5 + depth[t]);
  for (int t = 0; t < 4; ++t) qpos.push_back(5 + depth[t]);
  kpos.push_back(0);
  kpos.push_back(1);
  for (std::int64_t j = 0; j < 6; ++j) kpos.push_back(100 + j);
  qpos.push_back(105);
  // Masks: sequence 0 a plain causal block, sequence 1 the tree, sequence 3 [1].
  std::vector<std::uint8_t> masks = {1, 0, 0, 1, 1, 0, 1, 1, 1};
  for (int i = 0; i < 4; ++i)
    for (int t = 0; t < 4; ++t) {
      bool anc = false;
      for (int a = i; a >= 0; a = parent[a]) anc = anc || a == t;
      masks.push_back(anc ? 1 : 0);
    }
  masks.push_back(1);
  REQUIRE(static_cast<Eigen::Index>(qpos.size()) == x.total_q());
  REQUIRE(static_cast<Eigen::Index>(kpos.size()) == x.total_k());
  posenc::VarlenMetadata meta;
  meta.query_positions = ConstTensorView<std::int64_t, 1>(qpos.data(), x.total_q());
  meta.key_positions = ConstTensorView<std::int64_t, 1>(kpos.data(), x.total_k());
  meta.tree_masks = ConstTensorView<std::uint8_t, 1>(masks.data(), static_cast<Eigen::Index>(masks.size()));
  AttentionParams params;
  params.alibi_slopes = posenc::alibi_slopes(H);
  const auto packed_views = [&](std::vector<float>& out) {
    return std::tuple{ConstTensorView<float, 3>(x.q.data(), x.total_q(), H, d), ConstTensorView<float, 3>(x.k.data(), x.total_k(), KH, d),
                      ConstTensorView<float, 3>(x.v.data(), x.total_k(), KH, d), TensorView<float, 3>(out.data(), x.total_q(), H, d),
                      ConstTensorView<std::int64_t, 1>(x.cu_q.data(), x.seqs() + 1),
                      ConstTensorView<std::int64_t, 1>(x.cu_k.data(), x.seqs() + 1)};
  };
  std::vector<float> out(x.q.size(), -9.0f);
  {
    const auto [qv, kv, vv, ov, cq, ck] = packed_views(out);
    posenc::attention_varlen<float>(qv, kv, vv, ov, cq, ck, params, meta);
  }
  std::size_t mask0 = 0;
  for (Eigen::Index s = 0; s < x.seqs(); ++s) {
    const Eigen::Index q0 = x.cu_q[static_cast<std::size_t>(s)], ql = x.cu_q[static_cast<std::size_t>(s) + 1] - q0;
    const Eigen::Index k0 = x.cu_k[static_cast<std::size_t>(s)], kl = x.cu_k[static_cast<std::size_t>(s) + 1] - k0;
    if (ql == 0) continue;
    posenc::AttentionMetadata m;
    m.query_positions = posenc::PositionIdsView(qpos.data() + q0, 1, ql);
    m.key_positions = posenc::PositionIdsView(kpos.data() + k0, 1, kl);
    m.tree_mask = ConstTensorView<std::uint8_t, 3>(masks.data() + mask0, 1, ql, ql);
    mask0 += static_cast<std::size_t>(ql * ql);
    std::vector<float> ref(static_cast<std::size_t>(ql * H * d));
    posenc::reference::attention<float>(ConstTensorView<float, 4>(x.q.data() + q0 * H * d, 1, ql, H, d),
                                        ConstTensorView<float, 4>(x.k.data() + k0 * KH * d, 1, kl, KH, d),
                                        ConstTensorView<float, 4>(x.v.data() + k0 * KH * d, 1, kl, KH, d),
                                        TensorView<float, 4>(ref.data(), 1, ql, H, d), params, m);
    for (std::size_t i = 0; i < ref.size(); ++i) {
      CAPTURE(s, i);
      REQUIRE_THAT(out[static_cast<std::size_t>(q0 * H * d) + i], Catch::Matchers::WithinAbs(ref[i], 1e-5));
    }
  }
  // The positions matter: slot positions instead give other ALiBi distances.
  std::vector<float> by_slot(x.q.size());
  {
    const auto [qv, kv, vv, ov, cq, ck] = packed_views(by_slot);
    posenc::VarlenMetadata trees_only;
    trees_only.tree_masks = ConstTensorView<std::uint8_t, 1>(masks.data(), static_cast<Eigen::Index>(masks.size()));
    posenc::attention_varlen<float>(qv, kv, vv, ov, cq, ck, params, trees_only);
  }
  double moved = 0.0;
  for (std::size_t i = 0; i < out.size(); ++i) moved = std::max(moved, static_cast<double>(std::abs(out[i] - by_slot[i])));
  REQUIRE(moved > 1e-3);

  // Errors, nothing written.
  std::vector<float> untouched(x.q.size(), -9.0f);
  const auto [qv, kv, vv, ov, cq, ck] = packed_views(untouched);
  posenc::VarlenMetadata bad = meta;
  bad.tree_masks = ConstTensorView<std::uint8_t, 1>(masks.data(), static_cast<Eigen::Index>(masks.size()) - 1);
  REQUIRE_THROWS_WITH(posenc::attention_varlen<float>(qv, kv, vv, ov, cq, ck, params, bad),
                      Contains("tree_masks has 25 entries; it must have sum over sequences of q_len^2 = 26"));
  bad = meta;
  bad.key_positions = ConstTensorView<std::int64_t, 1>(kpos.data(), x.total_k() - 1);
  REQUIRE_THROWS_WITH(posenc::attention_varlen<float>(qv, kv, vv, ov, cq, ck, params, bad),
                      Contains("key_positions has 23 entries; it must have total_k = 24"));
  std::vector<std::uint8_t> upper = masks;
  upper[9 + 1] = 1;  // sequence 1, query 0 sees draft token 1
  bad = meta;
  bad.tree_masks = ConstTensorView<std::uint8_t, 1>(upper.data(), static_cast<Eigen::Index>(upper.size()));
  REQUIRE_THROWS_WITH(posenc::attention_varlen<float>(qv, kv, vv, ov, cq, ck, params, bad),
                      Contains("tree_mask[0, 0, 1] = 1 must be 0"));
  std::vector<std::int64_t> negative = qpos;
  negative[4] = -1;
  bad = meta;
  bad.query_positions = ConstTensorView<std::int64_t, 1>(negative.data(), x.total_q());
  REQUIRE_THROWS_WITH(posenc::attention_varlen<float>(qv, kv, vv, ov, cq, ck, params, bad),
                      Contains("query_positions[0, 1] = -1 must be in [0, 2^53]"));
  for (const float y : untouched) REQUIRE(y == -9.0f);
}

TEST_CASE("attention varlen: out, lse, v and query_positions of the wrong shape throw",
          "[attention][varlen][errors]") {
  const Packed x({3, 2}, {4, 2});
  std::vector<float> out(static_cast<std::size_t>((x.total_q() + 1) * H * d), 5.0f);
  std::vector<float> lse(static_cast<std::size_t>((x.total_q() + 1) * H), 5.0f);
  const std::vector<std::int64_t> qpos = {0, 1, 2, 3};  // total_q is 5
  const auto call = [&](Eigen::Index out_rows, Eigen::Index out_dv, Eigen::Index lse_rows,
                        Eigen::Index lse_heads, Eigen::Index v_rows, Eigen::Index v_dv,
                        bool positions) {
    posenc::VarlenMetadata meta;
    if (positions) meta.query_positions.emplace(qpos.data(), 4);
    posenc::attention_varlen<float>(
        ConstTensorView<float, 3>(x.q.data(), x.total_q(), H, d),
        ConstTensorView<float, 3>(x.k.data(), x.total_k(), KH, d),
        ConstTensorView<float, 3>(x.v.data(), v_rows, KH, v_dv),
        TensorView<float, 3>(out.data(), out_rows, H, out_dv),
        ConstTensorView<std::int64_t, 1>(x.cu_q.data(), 3),
        ConstTensorView<std::int64_t, 1>(x.cu_k.data(), 3), {}, meta, nullptr,
        TensorView<float, 2>(lse.data(), lse_rows, lse_heads));
  };
  const Eigen::Index tq = x.total_q(), tk = x.total_k();
  REQUIRE_NOTHROW(call(tq, d, tq, H, tk, d, false));
  std::fill(out.begin(), out.end(), 5.0f);
  std::fill(lse.begin(), lse.end(), 5.0f);
  REQUIRE_THROWS_WITH(call(tq + 1, d, tq, H, tk, d, false), Contains("out shape [6, 8, 40]"));
  REQUIRE_THROWS_WITH(call(tq, d - 8, tq, H, tk, d, false), Contains("out shape [5, 8, 32]"));
  REQUIRE_THROWS_WITH(call(tq, d, tq + 1, H, tk, d, false), Contains("lse shape [6, 8]"));
  REQUIRE_THROWS_WITH(call(tq, d, tq, H - 1, tk, d, false), Contains("lse shape [5, 7]"));
  REQUIRE_THROWS_WITH(call(tq, d, tq, H, tk - 1, d, false), Contains("v shape [5, 2, 40]"));
  REQUIRE_THROWS_WITH(call(tq, 0, tq, H, tk, 0, false), Contains("v shape [6, 2, 0]"));
  REQUIRE_THROWS_WITH(call(tq, d, tq, H, tk, d, true), Contains("query_positions has 4 entries"));
  CHECK(std::all_of(out.begin(), out.end(), [](float o) { return o == 5.0f; }));
  CHECK(std::all_of(lse.begin(), lse.end(), [](float o) { return o == 5.0f; }));
}

TEST_CASE("attention varlen: head_dim 0 is rejected even when no sequence has a query",
          "[attention][varlen][errors]") {
  std::vector<float> buf(16, 5.0f);
  const std::vector<std::int64_t> cu_q = {0, 0}, cu_k = {0, 2};
  REQUIRE_THROWS_WITH(posenc::attention_varlen<float>(
                          ConstTensorView<float, 3>(buf.data(), 0, 2, 0),
                          ConstTensorView<float, 3>(buf.data(), 2, 1, 0),
                          ConstTensorView<float, 3>(buf.data(), 2, 1, 4),
                          TensorView<float, 3>(buf.data(), 0, 2, 4),
                          ConstTensorView<std::int64_t, 1>(cu_q.data(), 2),
                          ConstTensorView<std::int64_t, 1>(cu_k.data(), 2)),
                      Contains("q head_dim = 0 and k head_dim = 0 must be equal and > 0"));
  CHECK(std::all_of(buf.begin(), buf.end(), [](float x) { return x == 5.0f; }));
}
