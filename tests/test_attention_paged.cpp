// Paged attention (vLLM block tables): every sequence of a paged batch must equal the double
// reference run on its keys laid out contiguously, whatever the page size and page order; no
// read may leave the sequence's own pages and rows (unused pool rows hold NaN); bad page tables
// write nothing.

#include <catch2/catch.hpp>

#include <posenc/alibi.hpp>
#include <posenc/attention_paged.hpp>
#include <posenc/reference/attention.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
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

constexpr Eigen::Index d = 40;

/// A pool holding each sequence's keys in shuffled pages; every row no sequence owns is NaN.
template <typename T>
struct PagedBatch {
  Eigen::Index kv_heads, page_size, max_pages = 0, num_pages = 0;
  std::vector<std::int64_t> lens;
  std::vector<std::int32_t> table;
  std::vector<std::vector<float>> k, v;  // per sequence, contiguous [len, kv_heads, d]
  std::vector<T> k_pool, v_pool;

  PagedBatch(std::vector<std::int64_t> seq_lens, Eigen::Index kvh, Eigen::Index page)
      : kv_heads(kvh), page_size(page), lens(std::move(seq_lens)) {
    const Eigen::Index row = kv_heads * d;
    std::vector<Eigen::Index> pages_of;
    for (const std::int64_t len : lens) {
      pages_of.push_back((len + page_size - 1) / page_size);
      max_pages = std::max(max_pages, pages_of.back());
      num_pages += pages_of.back();
    }
    max_pages = std::max<Eigen::Index>(max_pages, 1) + 1;  // a spare column, never read
    num_pages += 3;                                         // pages nobody owns
    // Pages handed out in a scrambled order: sequence pages are neither contiguous nor sorted.
    std::vector<std::int32_t> order(static_cast<std::size_t>(num_pages));
    std::iota(order.begin(), order.end(), 0);
    std::reverse(order.begin(), order.end());
    for (std::size_t i = 0; i + 2 < order.size(); i += 3) std::swap(order[i], order[i + 2]);
    const auto nan = T(std::numeric_limits<float>::quiet_NaN());
    k_pool.assign(static_cast<std::size_t>(num_pages * page_size * row), nan);
    v_pool = k_pool;
    table.assign(lens.size() * static_cast<std::size_t>(max_pages), -1);
    std::size_t next = 0;
    for (std::size_t s = 0; s < lens.size(); ++s) {
      const auto n = static_cast<std::size_t>(lens[s] * row);
      k.push_back(posenc_test::random_vector<float>(n, 100 + s));
      v.push_back(posenc_test::random_vector<float>(n, 200 + s));
      for (float& x : k.back()) x = float(T(2.0f * x));  // exactly representable in T
      for (float& x : v.back()) x = float(T(x));
      for (Eigen::Index i = 0; i < pages_of[s]; ++i) {
        table[s * static_cast<std::size_t>(max_pages) + static_cast<std::size_t>(i)] = order[next++];
      }
      for (Eigen::Index j = 0; j < lens[s]; ++j) {
        const Eigen::Index page = table[s * static_cast<std::size_t>(max_pages) + static_cast<std::size_t>(j / page_size)];
        const Eigen::Index at = (page * page_size + j % page_size) * row;
        for (Eigen::Index c = 0; c < row; ++c) {
          k_pool[static_cast<std::size_t>(at + c)] = T(k[s][static_cast<std::size_t>(j * row + c)]);
          v_pool[static_cast<std::size_t>(at + c)] = T(v[s][static_cast<std::size_t>(j * row + c)]);
        }
      }
    }
  }
  Eigen::Index batch() const { return static_cast<Eigen::Index>(lens.size()); }
  ConstTensorView<T, 4> k_pages() const { return {k_pool.data(), num_pages, page_size, kv_heads, d}; }
  ConstTensorView<T, 4> v_pages() const { return {v_pool.data(), num_pages, page_size, kv_heads, d}; }
  ConstTensorView<std::int32_t, 2> page_table() const { return {table.data(), batch(), max_pages}; }
  ConstTensorView<std::int64_t, 1> seq_lens() const { return {lens.data(), batch()}; }
};

/// Checks the q_len rows (got, got_lse) of one sequence against the double reference on its
/// keys laid out contiguously, and its lse against attention()'s on the same keys (whose lse
/// test_attention_merge.cpp checks against a long-double log-sum-exp; tiles differ at page
/// edges, so not bitwise). A sequence without keys must give zeros and the sink's term alone.
void check_sequence(const float* got, const float* got_lse, const float* q, Eigen::Index q_len,
                    Eigen::Index heads, const std::vector<float>& k, const std::vector<float>& v,
                    Eigen::Index len, Eigen::Index kv_heads, const AttentionParams& params) {
  CAPTURE(q_len, len);
  const auto n = static_cast<std::size_t>(q_len * heads * d);
  if (len == 0) {
    for (std::size_t i = 0; i < n; ++i) REQUIRE(got[i] == 0.0f);
    for (Eigen::Index i = 0; i < q_len * heads; ++i) {
      const auto h = static_cast<std::size_t>(i % heads);
      REQUIRE(got_lse[i] == (params.sink_logits.empty() ? -std::numeric_limits<float>::infinity()
                                                        : float(params.sink_logits[h])));
    }
    return;
  }
  std::vector<float> want(n), alone(n), alone_lse(static_cast<std::size_t>(q_len * heads));
  const ConstTensorView<float, 4> qv(q, 1, q_len, heads, d), kv(k.data(), 1, len, kv_heads, d),
      vv(v.data(), 1, len, kv_heads, d);
  posenc::reference::attention<float>(qv, kv, vv, TensorView<float, 4>(want.data(), 1, q_len, heads, d), params);
  POSENC_REQUIRE_CLOSE(posenc_test::compare(
      n, [&](std::size_t i) { return static_cast<double>(got[i]); },
      [&](std::size_t i) { return static_cast<double>(want[i]); }, 1e-5));
  posenc::attention<float>(qv, kv, vv, TensorView<float, 4>(alone.data(), 1, q_len, heads, d),
                           TensorView<float, 3>(alone_lse.data(), 1, q_len, heads), params);
  for (std::size_t i = 0; i < alone_lse.size(); ++i) {
    CAPTURE(i);
    if (std::isinf(alone_lse[i])) {
      REQUIRE(got_lse[i] == alone_lse[i]);  // a row with no key: -inf in both
    } else {
      REQUIRE_THAT(got_lse[i], Catch::Matchers::WithinAbs(alone_lse[i], 1e-5));
    }
  }
}

/// Runs attention_paged and checks each sequence against the reference on its contiguous keys.
template <typename T>
void check_against_reference(const PagedBatch<T>& x, Eigen::Index heads, Eigen::Index q_len,
                             const AttentionParams& params) {
  const Eigen::Index B = x.batch(), KH = x.kv_heads;
  const auto q = posenc_test::random_vector<float>(static_cast<std::size_t>(B * q_len * heads * d), 7);
  std::vector<float> out(q.size(), -9.0f), lse(static_cast<std::size_t>(B * q_len * heads), -9.0f);
  posenc::attention_paged<float, T>(ConstTensorView<float, 4>(q.data(), B, q_len, heads, d), x.k_pages(),
                                    x.v_pages(), x.page_table(), x.seq_lens(),
                                    TensorView<float, 4>(out.data(), B, q_len, heads, d), params, nullptr,
                                    TensorView<float, 3>(lse.data(), B, q_len, heads));
  const Eigen::Index per_seq = q_len * heads * d;
  for (Eigen::Index s = 0; s < B; ++s) {
    CAPTURE(s);
    const auto at = static_cast<std::size_t>(s);
    check_sequence(out.data() + s * per_seq, lse.data() + s * q_len * heads, q.data() + s * per_seq, q_len,
                   heads, x.k[at], x.v[at], x.lens[at], KH, params);
  }
}

}  // namespace

TEST_CASE("attention paged: each sequence equals the reference on its keys laid out contiguously",
          "[attention][paged]") {
  // Lengths: empty, one key, shorter than q_len, a page-size multiple, tiles and pages mixed.
  const std::vector<std::int64_t> lens = {0, 1, 37, 128, 301};
  const Eigen::Index page_size = GENERATE(1, 3, 16, 64, 100);
  // GQA 8 / 2: q_len 1 takes the decode item, q_len 7 (28 rows) the tiled one; 4 / 4 decodes
  // one row per kv head.
  const auto [heads, kv_heads, q_len] = GENERATE(std::tuple<Eigen::Index, Eigen::Index, Eigen::Index>{8, 2, 1},
                                                 std::tuple<Eigen::Index, Eigen::Index, Eigen::Index>{8, 2, 7},
                                                 std::tuple<Eigen::Index, Eigen::Index, Eigen::Index>{4, 4, 1});
  const int variant = GENERATE(0, 1, 2, 3, 4, 5);  // plain, ALiBi, window 50 + sinks, bidirectional, soft cap, chunks
  const int threads = GENERATE(1, 2);
  CAPTURE(page_size, heads, kv_heads, q_len, variant, threads);
  const PagedBatch<float> x(lens, kv_heads, page_size);
  check_against_reference(x, heads, q_len, posenc_test::attention_variant(variant, heads, threads));
}

TEST_CASE("attention paged: a bfloat16 or half pool with float queries", "[attention][paged]") {
  const std::vector<std::int64_t> lens = {77, 5, 260};
  const Eigen::Index page_size = GENERATE(16, 50);
  const int variant = GENERATE(0, 1);
  CAPTURE(page_size, variant);
  check_against_reference(PagedBatch<Eigen::bfloat16>(lens, 2, page_size), 8, 1, posenc_test::attention_variant(variant, 8, 1));
  check_against_reference(PagedBatch<Eigen::half>(lens, 2, page_size), 8, 3, posenc_test::attention_variant(variant, 8, 1));
}

TEST_CASE("attention paged: a sequence reads only its own pages", "[attention][paged]") {
  // Two sequences over interleaved pages, keys all 0 (equal scores), V = +1 for sequence 0,
  // -1 for sequence 1 and 1000 in the pool's unused pages: each output must be exactly its
  // own value, any read of another page pulls it away.
  const Eigen::Index page_size = GENERATE(1, 16, 33);
  PagedBatch<float> x({200, 150}, 2, page_size);
  std::fill(x.k_pool.begin(), x.k_pool.end(), 0.0f);
  std::fill(x.v_pool.begin(), x.v_pool.end(), 1000.0f);
  const Eigen::Index row = 2 * d;
  for (std::size_t s = 0; s < 2; ++s) {
    for (Eigen::Index j = 0; j < x.lens[s]; ++j) {
      const Eigen::Index page = x.table[s * static_cast<std::size_t>(x.max_pages) + static_cast<std::size_t>(j / page_size)];
      std::fill_n(x.v_pool.begin() + (page * page_size + j % page_size) * row, row, s == 0 ? 1.0f : -1.0f);
    }
  }
  const Eigen::Index q_len = GENERATE(1, 9);
  CAPTURE(page_size, q_len);
  const auto q = posenc_test::random_vector<float>(static_cast<std::size_t>(2 * q_len * 8 * d), 3);
  std::vector<float> out(q.size());
  AttentionParams params;
  params.mask = MaskMode::kBidirectional;
  posenc::attention_paged<float, float>(ConstTensorView<float, 4>(q.data(), 2, q_len, 8, d), x.k_pages(), x.v_pages(),
                                        x.page_table(), x.seq_lens(), TensorView<float, 4>(out.data(), 2, q_len, 8, d),
                                        params);
  for (std::size_t i = 0; i < out.size(); ++i) {
    CAPTURE(i);
    REQUIRE(out[i] == (i < out.size() / 2 ? 1.0f : -1.0f));
  }
}

TEST_CASE("attention paged: bad page tables and shapes throw before anything is written",
          "[attention][paged][errors]") {
  PagedBatch<float> x({10, 20}, 2, 8);
  const auto q = posenc_test::random_vector<float>(static_cast<std::size_t>(2 * 8 * d), 5);
  std::vector<float> out(q.size(), 5.0f), lse(16, 5.0f);
  auto call = [&](const PagedBatch<float>& y, Eigen::Index heads = 8, Eigen::Index lse_heads = 8,
                  AttentionParams params = {}) {
    posenc::attention_paged<float, float>(
        ConstTensorView<float, 4>(q.data(), 2, 1, heads, d), y.k_pages(), y.v_pages(), y.page_table(), y.seq_lens(),
        TensorView<float, 4>(out.data(), 2, 1, heads, d), params, nullptr,
        TensorView<float, 3>(lse.data(), 2, 1, lse_heads));
  };
  PagedBatch<float> bad = x;
  bad.table[1] = static_cast<std::int32_t>(x.num_pages);  // sequence 0's second page
  REQUIRE_THROWS_AS(call(bad), std::invalid_argument);
  REQUIRE_THROWS_WITH(call(bad), Contains("page_table[0, 1] = " + std::to_string(x.num_pages)) &&
                                     Contains("must be in [0, num_pages = " + std::to_string(x.num_pages) + ")"));
  bad = x;
  bad.table[static_cast<std::size_t>(x.max_pages)] = -1;  // sequence 1's first page
  REQUIRE_THROWS_WITH(call(bad), Contains("page_table[1, 0] = -1"));
  bad = x;
  bad.lens[1] = x.max_pages * 8 + 1;
  REQUIRE_THROWS_WITH(call(bad), Contains("seq_lens[1] = " + std::to_string(x.max_pages * 8 + 1)) &&
                                     Contains("must be in [0, page_table columns * page_size"));
  bad = x;
  bad.lens[0] = -1;
  REQUIRE_THROWS_WITH(call(bad), Contains("seq_lens[0] = -1"));
  REQUIRE_THROWS_WITH(call(x, 5, 5), Contains("heads = 5 must be a multiple of kv_heads = 2"));
  REQUIRE_THROWS_WITH(call(x, 8, 4), Contains("lse shape [2, 1, 4] must be [batch, q_len, heads] = [2, 1, 8]"));
  AttentionParams params;
  params.alibi_slopes = {0.5};
  REQUIRE_THROWS_WITH(call(x, 8, 8, params), Contains("alibi_slopes has 1 entries"));
  // A page id past the sequence's pages is never read, so it need not be valid.
  bad = x;
  bad.table[3] = 12345;
  REQUIRE_NOTHROW(call(bad));
  CHECK(std::none_of(out.begin(), out.end(), [](float o) { return std::isnan(o); }));
  std::fill(out.begin(), out.end(), 5.0f);
  std::fill(lse.begin(), lse.end(), 5.0f);
  bad.table[0] = 99;
  REQUIRE_THROWS(call(bad));
  CHECK(std::all_of(out.begin(), out.end(), [](float o) { return o == 5.0f; }));
  CHECK(std::all_of(lse.begin(), lse.end(), [](float o) { return o == 5.0f; }));
}

TEST_CASE("attention paged: bidirectional chunks or temperatures reject seq_len below q_len",
          "[attention][paged][errors]") {
  // Query i of sequence b sits at slot seq_lens[b] - q_len + i. The shared checks saw only the
  // longest sequence, so a shorter one (3 keys, 5 queries) put queries at slots -2 and -1,
  // whose chunks and temperatures were read (found by tests/fuzz/fuzz_attention.cpp).
  // attention() rejects such a shape; so must attention_paged, per sequence.
  constexpr Eigen::Index q_len = 5, heads = 8;
  const PagedBatch<float> longest_ok({10, 3}, 2, 4), empty_ok({10, 0}, 2, 4);
  const auto q =
      posenc_test::random_vector<float>(static_cast<std::size_t>(2 * q_len * heads * d), 5);
  std::vector<float> out(q.size(), 5.0f);
  auto call = [&](const PagedBatch<float>& x, const AttentionParams& params) {
    posenc::attention_paged<float, float>(
        ConstTensorView<float, 4>(q.data(), 2, q_len, heads, d), x.k_pages(), x.v_pages(),
        x.page_table(), x.seq_lens(), TensorView<float, 4>(out.data(), 2, q_len, heads, d),
        params);
  };
  AttentionParams chunks;
  chunks.mask = MaskMode::kBidirectional;
  chunks.attention_chunk_size = 4;
  AttentionParams temperature;
  temperature.mask = MaskMode::kBidirectional;
  temperature.query_temperature = posenc::AttentionTemperature{};
  REQUIRE_THROWS_AS(call(longest_ok, chunks), std::invalid_argument);
  REQUIRE_THROWS_WITH(call(longest_ok, chunks),
                      Contains("seq_lens[1] = 3 < q_len = 5") && Contains("attention_chunk_size"));
  REQUIRE_THROWS_WITH(call(longest_ok, temperature),
                      Contains("seq_lens[1] = 3 < q_len = 5") && Contains("query_temperature"));
  CHECK(std::all_of(out.begin(), out.end(), [](float o) { return o == 5.0f; }));
  // Causal, those queries see no key and read no position; a sequence without keys gives zero
  // rows; bidirectional without chunks or temperatures reads no position either.
  AttentionParams causal = chunks;
  causal.mask = MaskMode::kCausal;
  REQUIRE_NOTHROW(call(longest_ok, causal));
  REQUIRE_NOTHROW(call(empty_ok, chunks));
  REQUIRE_NOTHROW(call(empty_ok, temperature));
  AttentionParams plain;
  plain.mask = MaskMode::kBidirectional;
  REQUIRE_NOTHROW(call(longest_ok, plain));
}

TEST_CASE("attention paged varlen: a batch without a query still rejects a bad call",
          "[attention][paged][varlen][errors]") {
  // As attention_varlen: the per-sequence checks never ran when no sequence had a query.
  const PagedBatch<float> x({6, 3}, 2, 4);
  std::vector<float> q, out;  // total_q = 0
  const std::vector<std::int64_t> cu{0, 0, 0};
  auto call = [&](Eigen::Index heads, const AttentionParams& params) {
    posenc::attention_paged_varlen<float, float>(
        ConstTensorView<float, 3>(q.data(), 0, heads, d), x.k_pages(), x.v_pages(), x.page_table(),
        x.seq_lens(), ConstTensorView<std::int64_t, 1>(cu.data(), 3),
        TensorView<float, 3>(out.data(), 0, heads, d), params);
  };
  REQUIRE_NOTHROW(call(8, {}));
  REQUIRE_THROWS_WITH(call(5, {}), Contains("heads = 5 must be a multiple of kv_heads = 2"));
  AttentionParams slopes;
  slopes.alibi_slopes = {0.5};
  REQUIRE_THROWS_WITH(call(8, slopes), Contains("alibi_slopes has 1 entries"));
  AttentionParams softcap;
  softcap.logit_softcap = -1.0;
  REQUIRE_THROWS_WITH(call(8, softcap), Contains("logit_softcap = -1"));
}

TEST_CASE("attention paged varlen: packed queries of mixed lengths, each against its own pages",
          "[attention][paged][varlen]") {
  // A whole prefill, a sequence without queries, a decode token, a 40-query chunk after 100
  // cached keys, queries with no key at all.
  const std::vector<std::int64_t> lens = {5, 9, 77, 140, 0}, q_lens = {5, 0, 1, 40, 3};
  const Eigen::Index page_size = GENERATE(4, 16);
  const int variant = GENERATE(0, 1, 2);
  const int threads = GENERATE(1, 2);
  CAPTURE(page_size, variant, threads);
  constexpr Eigen::Index heads = 8, kv_heads = 2;
  const PagedBatch<float> x(lens, kv_heads, page_size);
  std::vector<std::int64_t> cu = {0};
  for (const std::int64_t n : q_lens) cu.push_back(cu.back() + n);
  const Eigen::Index total_q = cu.back();
  const auto q = posenc_test::random_vector<float>(static_cast<std::size_t>(total_q * heads * d), 17);
  std::vector<float> out(q.size(), -9.0f), lse(static_cast<std::size_t>(total_q * heads), -9.0f);
  const AttentionParams params = posenc_test::attention_variant(variant, heads, threads);
  posenc::attention_paged_varlen<float, float>(
      ConstTensorView<float, 3>(q.data(), total_q, heads, d), x.k_pages(), x.v_pages(), x.page_table(), x.seq_lens(),
      ConstTensorView<std::int64_t, 1>(cu.data(), static_cast<Eigen::Index>(cu.size())),
      TensorView<float, 3>(out.data(), total_q, heads, d), params, nullptr,
      TensorView<float, 2>(lse.data(), total_q, heads));
  for (std::size_t s = 0; s < lens.size(); ++s) {
    CAPTURE(s);
    const Eigen::Index q0 = cu[s];
    if (q_lens[s] == 0) continue;
    check_sequence(out.data() + q0 * heads * d, lse.data() + q0 * heads, q.data() + q0 * heads * d, q_lens[s],
                   heads, x.k[s], x.v[s], lens[s], kv_heads, params);
  }
  // Rows of the query-less sequence do not exist; nothing else may be left unwritten.
  CHECK(std::none_of(out.begin(), out.end(), [](float o) { return o == -9.0f; }));
}

TEST_CASE("attention paged varlen: bad cu_seqlens_q throws before anything is written",
          "[attention][paged][varlen][errors]") {
  const PagedBatch<float> x({6, 3}, 2, 4);
  const auto q = posenc_test::random_vector<float>(static_cast<std::size_t>(5 * 8 * d), 5);
  std::vector<float> out(q.size(), 5.0f);
  auto call = [&](std::vector<std::int64_t> cu) {
    posenc::attention_paged_varlen<float, float>(
        ConstTensorView<float, 3>(q.data(), 5, 8, d), x.k_pages(), x.v_pages(), x.page_table(), x.seq_lens(),
        ConstTensorView<std::int64_t, 1>(cu.data(), static_cast<Eigen::Index>(cu.size())),
        TensorView<float, 3>(out.data(), 5, 8, d));
  };
  REQUIRE_THROWS_AS(call({0, 3}), std::invalid_argument);
  REQUIRE_THROWS_WITH(call({0, 3}), Contains("cu_seqlens_q has 2 entries; it must have num_seqs + 1 with num_seqs = 2"));
  REQUIRE_THROWS_WITH(call({0, 3, 4}), Contains("cu_seqlens_q must run from 0 to 5"));
  REQUIRE_THROWS_WITH(call({0, 6, 5}), Contains("cu_seqlens_q[2] = 5 is below cu_seqlens_q[1] = 6"));
  CHECK(std::all_of(out.begin(), out.end(), [](float o) { return o == 5.0f; }));
  // Sequence 1 has 3 keys: 2 queries are fine, and so are more queries than keys. With 4
  // (cu {0, 1, 5}) the causal mask aligns bottom-right, so its first query (token 1) sees no
  // key: a row of zeros; its last sees all three.
  REQUIRE_NOTHROW(call({0, 3, 5}));
  REQUIRE_NOTHROW(call({0, 1, 5}));
  const auto row = [&](Eigen::Index token) {
    return std::vector<float>(out.begin() + token * 8 * d, out.begin() + (token + 1) * 8 * d);
  };
  CHECK(row(1) == std::vector<float>(static_cast<std::size_t>(8 * d), 0.0f));
  const auto last = row(4);
  CHECK(std::any_of(last.begin(), last.end(), [](float o) { return o != 0.0f; }));
}

// ---- From a mutation audit (twenty-ninth session) ----

TEST_CASE("attention paged varlen: v_head_dim below head_dim - each sequence's rows land at "
          "its own packed offset", "[attention][paged][varlen]") {
  // 2 sequences of one key each (pages of 2, one kv head, head_dim 4, v_head_dim 2), one query
  // each: a query over a single key gives that key's value row exactly (softmax weight 1).
  const std::vector<float> k_pool = {1, 0, 0, 0, 9, 9, 9, 9, 0, 1, 0, 0, 9, 9, 9, 9};
  const std::vector<float> v_pool = {1.5f, -2.0f, 9, 9, 3.0f, 7.0f, 9, 9};
  const std::vector<std::int32_t> table = {0, 1};
  const std::vector<std::int64_t> lens = {1, 1}, cu = {0, 1, 2};
  const std::vector<float> q = {0.5f, 0.25f, 0.0f, 1.0f, 2.0f, 1.0f, 0.0f, 0.0f};
  std::vector<float> out(8, -7.0f), lse(2, -7.0f);  // the view is out[0..4)
  posenc::attention_paged_varlen<float, float>(
      ConstTensorView<float, 3>(q.data(), 2, 1, 4),
      ConstTensorView<float, 4>(k_pool.data(), 2, 2, 1, 4),
      ConstTensorView<float, 4>(v_pool.data(), 2, 2, 1, 2),
      ConstTensorView<std::int32_t, 2>(table.data(), 2, 1),
      ConstTensorView<std::int64_t, 1>(lens.data(), 2),
      ConstTensorView<std::int64_t, 1>(cu.data(), 3),
      TensorView<float, 3>(out.data(), 2, 1, 2), {}, nullptr,
      TensorView<float, 2>(lse.data(), 2, 1));
  CHECK(out == std::vector<float>{1.5f, -2.0f, 3.0f, 7.0f, -7.0f, -7.0f, -7.0f, -7.0f});
  // lse of one key: its logit q.k / sqrt(4) = 0.5 / 2 and 1 / 2.
  CHECK_THAT(lse[0], Catch::Matchers::WithinAbs(0.25, 1e-6));
  CHECK_THAT(lse[1], Catch::Matchers::WithinAbs(0.5, 1e-6));
}

TEST_CASE("attention paged: seq_lens with other than batch entries throws, writing nothing",
          "[attention][paged][errors]") {
  PagedBatch<float> x({10, 20}, 2, 8);
  const auto q = posenc_test::random_vector<float>(static_cast<std::size_t>(2 * 8 * d), 5);
  std::vector<float> out(q.size(), 5.0f);
  const std::vector<std::int64_t> lens3 = {10, 20, 5};
  const auto call = [&] {
    posenc::attention_paged<float, float>(
        ConstTensorView<float, 4>(q.data(), 2, 1, 8, d), x.k_pages(), x.v_pages(), x.page_table(),
        ConstTensorView<std::int64_t, 1>(lens3.data(), 3),
        TensorView<float, 4>(out.data(), 2, 1, 8, d));
  };
  REQUIRE_THROWS_AS(call(), std::invalid_argument);
  CHECK(std::all_of(out.begin(), out.end(), [](float o) { return o == 5.0f; }));
}

TEST_CASE("attention paged: v_pages must match k_pages in pages and kv heads",
          "[attention][paged][errors]") {
  PagedBatch<float> x({10, 20}, 2, 8);
  const auto q = posenc_test::random_vector<float>(static_cast<std::size_t>(2 * 8 * d), 5);
  std::vector<float> out(q.size(), 5.0f);
  const auto call = [&](ConstTensorView<float, 4> v_pages) {
    posenc::attention_paged<float, float>(
        ConstTensorView<float, 4>(q.data(), 2, 1, 8, d), x.k_pages(), v_pages, x.page_table(),
        x.seq_lens(), TensorView<float, 4>(out.data(), 2, 1, 8, d));
  };
  // One page fewer than k_pages (the last page would be read past the V pool), or one kv
  // head instead of 2 (same v_head_dim, half the pool).
  const ConstTensorView<float, 4> fewer_pages(x.v_pool.data(), x.num_pages - 1, 8, 2, d);
  const ConstTensorView<float, 4> fewer_heads(x.v_pool.data(), x.num_pages, 8, 1, d);
  REQUIRE_THROWS_AS(call(fewer_pages), std::invalid_argument);
  REQUIRE_THROWS_AS(call(fewer_heads), std::invalid_argument);
  CHECK(std::all_of(out.begin(), out.end(), [](float o) { return o == 5.0f; }));
}

// ---- From a mutation audit (thirty-second session) ----

TEST_CASE("attention paged: views over no memory are refused before anything is written",
          "[attention][paged][errors]") {
  // As attention() (test_limits.cpp): a null view with extents was read or written through.
  const PagedBatch<float> x({5, 3}, 2, 4);
  const auto q = posenc_test::random_vector<float>(static_cast<std::size_t>(2 * 8 * d), 5);
  std::vector<float> out(q.size(), 5.0f), lse(16, 5.0f);
  const ConstTensorView<float, 4> qv(q.data(), 2, 1, 8, d);
  const TensorView<float, 4> ov(out.data(), 2, 1, 8, d);
  const ConstTensorView<float, 4> no_k(nullptr, x.num_pages, 4, 2, d);
  const ConstTensorView<std::int32_t, 2> no_table(nullptr, 2, x.max_pages);
  const ConstTensorView<std::int64_t, 1> no_lens(nullptr, 2);
  const auto paged = [&](ConstTensorView<float, 4> q4, ConstTensorView<float, 4> k,
                         ConstTensorView<float, 4> v, ConstTensorView<std::int32_t, 2> table,
                         ConstTensorView<std::int64_t, 1> lens, TensorView<float, 4> o) {
    posenc::attention_paged<float, float>(q4, k, v, table, lens, o, {}, nullptr,
                                          TensorView<float, 3>(lse.data(), 2, 1, 8));
  };
  REQUIRE_THROWS_WITH(paged(qv, no_k, x.v_pages(), x.page_table(), x.seq_lens(), ov),
                      Contains("k_pages data is null"));
  REQUIRE_THROWS_WITH(paged(qv, x.k_pages(), no_k, x.page_table(), x.seq_lens(), ov),
                      Contains("v_pages data is null"));
  REQUIRE_THROWS_WITH(paged(qv, x.k_pages(), x.v_pages(), no_table, x.seq_lens(), ov),
                      Contains("page_table data is null"));
  REQUIRE_THROWS_WITH(paged(qv, x.k_pages(), x.v_pages(), x.page_table(), no_lens, ov),
                      Contains("seq_lens data is null"));
  REQUIRE_THROWS_WITH(paged(ConstTensorView<float, 4>(nullptr, 2, 1, 8, d), x.k_pages(),
                            x.v_pages(), x.page_table(), x.seq_lens(), ov),
                      Contains("q data is null"));
  REQUIRE_THROWS_WITH(paged(qv, x.k_pages(), x.v_pages(), x.page_table(), x.seq_lens(),
                            TensorView<float, 4>(nullptr, 2, 1, 8, d)),
                      Contains("out data is null"));
  // Latent pages: the same checks on q and out.
  AttentionParams latent;
  latent.scale = 0.125;
  const auto paged_latent = [&](ConstTensorView<float, 4> q4, TensorView<float, 4> o) {
    posenc::attention_paged_latent<float, float>(q4, x.k_pages(), x.page_table(), x.seq_lens(),
                                                 o, latent);
  };
  REQUIRE_THROWS_WITH(paged_latent(ConstTensorView<float, 4>(nullptr, 2, 1, 8, d), ov),
                      Contains("q data is null"));
  REQUIRE_THROWS_WITH(paged_latent(qv, TensorView<float, 4>(nullptr, 2, 1, 8, d)),
                      Contains("out data is null"));
  // Varlen: q, out, lse, cu_seqlens_q and seq_lens (2 sequences of one query each).
  const std::vector<std::int64_t> cu = {0, 1, 2};
  const auto varlen = [&](ConstTensorView<float, 3> q3, TensorView<float, 3> o,
                          TensorView<float, 2> l, ConstTensorView<std::int64_t, 1> lens,
                          ConstTensorView<std::int64_t, 1> cuv) {
    posenc::attention_paged_varlen<float, float>(q3, x.k_pages(), x.v_pages(), x.page_table(),
                                                 lens, cuv, o, {}, nullptr, l);
  };
  const ConstTensorView<float, 3> q3(q.data(), 2, 8, d);
  const TensorView<float, 3> o3(out.data(), 2, 8, d);
  const TensorView<float, 2> l2(lse.data(), 2, 8);
  const ConstTensorView<std::int64_t, 1> cuv(cu.data(), 3);
  REQUIRE_THROWS_WITH(varlen(ConstTensorView<float, 3>(nullptr, 2, 8, d), o3, l2, x.seq_lens(),
                             cuv),
                      Contains("q data is null"));
  REQUIRE_THROWS_WITH(varlen(q3, TensorView<float, 3>(nullptr, 2, 8, d), l2, x.seq_lens(), cuv),
                      Contains("out data is null"));
  REQUIRE_THROWS_WITH(varlen(q3, o3, TensorView<float, 2>(nullptr, 2, 8), x.seq_lens(), cuv),
                      Contains("lse data is null"));
  REQUIRE_THROWS_WITH(varlen(q3, o3, l2, no_lens, cuv), Contains("seq_lens data is null"));
  REQUIRE_THROWS_WITH(varlen(q3, o3, l2, x.seq_lens(),
                             ConstTensorView<std::int64_t, 1>(nullptr, 3)),
                      Contains("cu_seqlens_q data is null"));
  CHECK(std::all_of(out.begin(), out.end(), [](float o) { return o == 5.0f; }));
  CHECK(std::all_of(lse.begin(), lse.end(), [](float o) { return o == 5.0f; }));
}

TEST_CASE("attention paged: every axis of the pool and the page table is checked",
          "[attention][paged][errors]") {
  // k_pages and v_pages are [num_pages, page_size, kv_heads, head_dim / v_head_dim > 0] with
  // the same first three axes, page_table [batch, max_pages] (the file comment); a view that
  // is not throws, writing nothing. Sequences of no key read no page, so only the shape checks
  // stand between these calls and a zero output.
  const std::vector<float> pool(4096, 0.25f);
  const std::vector<std::int32_t> table = {0, 0, 0};
  const std::vector<std::int64_t> empty = {0, 0}, lens = {3, 2};
  const auto q = posenc_test::random_vector<float>(static_cast<std::size_t>(2 * 4 * 8), 9);
  std::vector<float> out(q.size(), 5.0f);
  const auto call = [&](ConstTensorView<float, 4> k, ConstTensorView<float, 4> v,
                        Eigen::Index table_rows, const std::vector<std::int64_t>& l) {
    posenc::attention_paged<float, float>(
        ConstTensorView<float, 4>(q.data(), 2, 1, 4, 8), k, v,
        ConstTensorView<std::int32_t, 2>(table.data(), table_rows, 1),
        ConstTensorView<std::int64_t, 1>(l.data(), 2),
        TensorView<float, 4>(out.data(), 2, 1, 4, 8));
  };
  const auto pages = [&](Eigen::Index n, Eigen::Index page, Eigen::Index kvh, Eigen::Index w) {
    return ConstTensorView<float, 4>(pool.data(), n, page, kvh, w);
  };
  REQUIRE_NOTHROW(call(pages(1, 4, 2, 8), pages(1, 4, 2, 8), 2, lens));
  std::fill(out.begin(), out.end(), 5.0f);
  // No page at all, pages of no row.
  REQUIRE_THROWS_WITH(call(pages(0, 4, 2, 8), pages(0, 4, 2, 8), 2, empty),
                      Contains("k_pages shape [0, 4, 2, 8] must have no zero dimension"));
  REQUIRE_THROWS_WITH(call(pages(1, 0, 2, 8), pages(1, 0, 2, 8), 2, empty),
                      Contains("k_pages shape [1, 0, 2, 8] must have no zero dimension"));
  // v_pages with one page more, another page size, more kv heads than k_pages.
  REQUIRE_THROWS_WITH(call(pages(1, 4, 2, 8), pages(2, 4, 2, 8), 2, lens),
                      Contains("v_pages shape [2, 4, 2, 8] must be"));
  REQUIRE_THROWS_WITH(call(pages(1, 4, 2, 8), pages(1, 3, 2, 8), 2, lens),
                      Contains("v_pages shape [1, 3, 2, 8] must be"));
  REQUIRE_THROWS_WITH(call(pages(1, 4, 2, 8), pages(1, 4, 4, 8), 2, lens),
                      Contains("v_pages shape [1, 4, 4, 8] must be"));
  // A page table with a row more than the batch.
  REQUIRE_THROWS_WITH(call(pages(1, 4, 2, 8), pages(1, 4, 2, 8), 3, lens),
                      Contains("page_table has 3 rows"));
  CHECK(std::all_of(out.begin(), out.end(), [](float o) { return o == 5.0f; }));

  // Varlen without a query: no sequence's attention() checks run, so v_head_dim 0 and pages of
  // no row must be caught by the pool's own.
  const std::vector<std::int64_t> cu = {0, 0, 0};
  std::vector<float> none;
  const auto varlen = [&](ConstTensorView<float, 4> k, ConstTensorView<float, 4> v,
                          Eigen::Index dv) {
    posenc::attention_paged_varlen<float, float>(
        ConstTensorView<float, 3>(none.data(), 0, 4, 8), k, v,
        ConstTensorView<std::int32_t, 2>(table.data(), 2, 1),
        ConstTensorView<std::int64_t, 1>(empty.data(), 2),
        ConstTensorView<std::int64_t, 1>(cu.data(), 3),
        TensorView<float, 3>(none.data(), 0, 4, dv));
  };
  REQUIRE_NOTHROW(varlen(pages(1, 4, 2, 8), pages(1, 4, 2, 8), 8));
  REQUIRE_THROWS_WITH(varlen(pages(1, 4, 2, 8), pages(1, 4, 2, 0), 0),
                      Contains("v_pages shape [1, 4, 2, 0] must be"));
  REQUIRE_THROWS_WITH(varlen(pages(1, 0, 2, 8), pages(1, 0, 2, 8), 8),
                      Contains("k_pages shape [1, 0, 2, 8] must have no zero dimension"));
}

TEST_CASE("attention paged: bidirectional chunks check the first sequence too, and allow "
          "seq_len = q_len", "[attention][paged][errors]") {
  // Query i sits at slot seq_len - q_len + i: the first sequence (3 keys, 5 queries) puts
  // queries at slots -2 and -1; with seq_len = q_len = 5 the first query is at slot 0.
  constexpr Eigen::Index q_len = 5, heads = 8;
  const auto q =
      posenc_test::random_vector<float>(static_cast<std::size_t>(2 * q_len * heads * d), 6);
  std::vector<float> out(q.size(), 5.0f), lse(static_cast<std::size_t>(2 * q_len * heads), 5.0f);
  AttentionParams chunks;
  chunks.mask = MaskMode::kBidirectional;
  chunks.attention_chunk_size = 4;
  const auto call = [&](const PagedBatch<float>& x) {
    posenc::attention_paged<float, float>(
        ConstTensorView<float, 4>(q.data(), 2, q_len, heads, d), x.k_pages(), x.v_pages(),
        x.page_table(), x.seq_lens(), TensorView<float, 4>(out.data(), 2, q_len, heads, d),
        chunks, nullptr, TensorView<float, 3>(lse.data(), 2, q_len, heads));
  };
  REQUIRE_THROWS_WITH(call(PagedBatch<float>({3, 10}, 2, 4)),
                      Contains("seq_lens[0] = 3 < q_len = 5"));
  CHECK(std::all_of(out.begin(), out.end(), [](float o) { return o == 5.0f; }));
  const PagedBatch<float> exact({5, 10}, 2, 4);
  REQUIRE_NOTHROW(call(exact));
  // Sequence 0's queries see its 5 keys; as the reference on them.
  check_sequence(out.data(), lse.data(), q.data(), q_len, heads, exact.k[0], exact.v[0], 5, 2,
                 chunks);
}

TEST_CASE("attention paged varlen: the page table, cu_seqlens_q and each sequence, the first "
          "included, are checked before anything is written",
          "[attention][paged][varlen][errors]") {
  // Sequence 0 has 3 keys, sequence 1 six (pages of 4).
  const PagedBatch<float> x({3, 6}, 2, 4);
  const auto q = posenc_test::random_vector<float>(static_cast<std::size_t>(5 * 8 * d), 5);
  std::vector<float> out(q.size(), 5.0f);
  const auto call = [&](const PagedBatch<float>& y, std::vector<std::int64_t> cu,
                        const AttentionParams& params) {
    posenc::attention_paged_varlen<float, float>(
        ConstTensorView<float, 3>(q.data(), 5, 8, d), y.k_pages(), y.v_pages(), y.page_table(),
        y.seq_lens(),
        ConstTensorView<std::int64_t, 1>(cu.data(), static_cast<Eigen::Index>(cu.size())),
        TensorView<float, 3>(out.data(), 5, 8, d), params);
  };
  // num_seqs + 1 entries exactly: one more (ending at total_q all the same) is refused too.
  REQUIRE_THROWS_WITH(call(x, {0, 3, 5, 5}, {}), Contains("cu_seqlens_q has 4 entries"));
  // A page id outside the pool among sequence 1's pages (its first).
  PagedBatch<float> bad = x;
  bad.table[static_cast<std::size_t>(x.max_pages)] = static_cast<std::int32_t>(x.num_pages);
  REQUIRE_THROWS_WITH(call(bad, {0, 1, 5}, {}), Contains("page_table[1, 0] = "));
  // Bidirectional chunks: sequence 0's 4 queries over its 3 keys put query 0 at slot -1
  // (attention_paged with batch 1 refuses it, as attention() does).
  AttentionParams chunks;
  chunks.mask = MaskMode::kBidirectional;
  chunks.attention_chunk_size = 2;
  REQUIRE_THROWS_WITH(call(x, {0, 4, 5}, chunks), Contains("q_len = 4 > k_len = 3"));
  // out of one row fewer than q, an lse of half the heads.
  const std::vector<std::int64_t> cu = {0, 3, 5};
  std::vector<float> lse(40, 5.0f);
  REQUIRE_THROWS_WITH(posenc::attention_paged_varlen<float>(
                          ConstTensorView<float, 3>(q.data(), 5, 8, d), x.k_pages(), x.v_pages(),
                          x.page_table(), x.seq_lens(),
                          ConstTensorView<std::int64_t, 1>(cu.data(), 3),
                          TensorView<float, 3>(out.data(), 4, 8, d)),
                      Contains("out shape [4, 8, 40] must be [total_q, heads, v_head_dim]"));
  REQUIRE_THROWS_WITH(posenc::attention_paged_varlen<float>(
                          ConstTensorView<float, 3>(q.data(), 5, 8, d), x.k_pages(), x.v_pages(),
                          x.page_table(), x.seq_lens(),
                          ConstTensorView<std::int64_t, 1>(cu.data(), 3),
                          TensorView<float, 3>(out.data(), 5, 8, d), {}, nullptr,
                          TensorView<float, 2>(lse.data(), 5, 4)),
                      Contains("lse shape [5, 4] must be [total_q, heads]"));
  CHECK(std::all_of(out.begin(), out.end(), [](float o) { return o == 5.0f; }));
  CHECK(std::all_of(lse.begin(), lse.end(), [](float o) { return o == 5.0f; }));
  REQUIRE_NOTHROW(call(x, {0, 3, 5}, chunks));
}

TEST_CASE("attention paged varlen: v_head_dim below head_dim - each sequence reads its own "
          "packed queries", "[attention][paged][varlen]") {
  // head_dim 4, v_head_dim 2, one head. Sequence 1's query (row 1 of q, elements 4..8) is
  // (2, 0, 0, 0) over keys (1, 0, 0, 0) and (0, 0, 0, 0) with values (1, 0) and (0, 1):
  // logits 2 / sqrt(4) = 1 and 0, so out = (e, 1) / (e + 1), lse = log(e + 1). Elements 2..6
  // (a stride of v_head_dim) would give the logits 0 and 0: (0.5, 0.5).
  const std::vector<float> k_pool = {0, 0, 0, 1, 9, 9, 9, 9, 1, 0, 0, 0, 0, 0, 0, 0};
  const std::vector<float> v_pool = {4, 5, 9, 9, 1, 0, 0, 1};
  const std::vector<std::int32_t> table = {0, 1};
  const std::vector<std::int64_t> lens = {1, 2}, cu = {0, 1, 2};
  const std::vector<float> q = {0, 0, 0, 0, 2, 0, 0, 0};
  std::vector<float> out(4, -7.0f), lse(2, -7.0f);
  posenc::attention_paged_varlen<float, float>(
      ConstTensorView<float, 3>(q.data(), 2, 1, 4),
      ConstTensorView<float, 4>(k_pool.data(), 2, 2, 1, 4),
      ConstTensorView<float, 4>(v_pool.data(), 2, 2, 1, 2),
      ConstTensorView<std::int32_t, 2>(table.data(), 2, 1),
      ConstTensorView<std::int64_t, 1>(lens.data(), 2),
      ConstTensorView<std::int64_t, 1>(cu.data(), 3), TensorView<float, 3>(out.data(), 2, 1, 2),
      {}, nullptr, TensorView<float, 2>(lse.data(), 2, 1));
  // Sequence 0: one key, weight 1, logit 0.
  CHECK(out[0] == 4.0f);
  CHECK(out[1] == 5.0f);
  CHECK(lse[0] == 0.0f);
  CHECK_THAT(out[2], Catch::Matchers::WithinAbs(0.7310585786, 1e-6));
  CHECK_THAT(out[3], Catch::Matchers::WithinAbs(0.2689414214, 1e-6));
  CHECK_THAT(lse[1], Catch::Matchers::WithinAbs(1.3132616875, 1e-6));
}

TEST_CASE("attention paged latent: values are each row's first v_head_dim, lse, empty batches "
          "and every check", "[attention][paged][latent]") {
  // Pages of 2 latent rows of head_dim 4 (one kv head), v_head_dim 2, scale 0.5. Sequence 0
  // has rows (1, 0, 0, 0), (0, 1, 0, 0), (0, 0, 0, 0) in pages 1, 0; sequence 1 none (NaN:
  // rows no sequence owns).
  // Head 0's query (2, 0, 0, 0): logits 1, 0, 0, so out = (e, 1) / (e + 2), lse = log(e + 2);
  // head 1's query 0: equal weights, out = (1, 1) / 3, lse = log 3. Sequence 1: zeros, -inf.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> pool = {0, 0, 0, 0, nan, nan, nan, nan, 1,   0,   0,   0,
                                   0, 1, 0, 0, nan, nan, nan, nan, nan, nan, nan, nan};
  std::vector<std::int32_t> table = {1, 0, 2, 2};
  const std::vector<float> q = {2, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1};
  std::vector<float> out(8, -7.0f), lse(4, -7.0f);
  AttentionParams params;
  params.scale = 0.5;
  const auto call = [&](const std::vector<std::int64_t>& lens, Eigen::Index dv,
                        const AttentionParams& p, Eigen::Index lse_heads) {
    posenc::attention_paged_latent<float, float>(
        ConstTensorView<float, 4>(q.data(), 2, 1, 2, 4),
        ConstTensorView<float, 4>(pool.data(), 3, 2, 1, 4),
        ConstTensorView<std::int32_t, 2>(table.data(), 2, 2),
        ConstTensorView<std::int64_t, 1>(lens.data(), 2),
        TensorView<float, 4>(out.data(), 2, 1, 2, dv),
        p, nullptr, TensorView<float, 3>(lse.data(), 2, 1, lse_heads));
  };
  REQUIRE_NOTHROW(call({3, 0}, 2, params, 2));
  CHECK_THAT(out[0], Catch::Matchers::WithinAbs(0.5761168847658291, 1e-6));
  CHECK_THAT(out[1], Catch::Matchers::WithinAbs(0.21194155761708547, 1e-6));
  CHECK_THAT(out[2], Catch::Matchers::WithinAbs(1.0 / 3.0, 1e-6));
  CHECK_THAT(out[3], Catch::Matchers::WithinAbs(1.0 / 3.0, 1e-6));
  CHECK_THAT(lse[0], Catch::Matchers::WithinAbs(1.5514447139320509, 1e-6));
  CHECK_THAT(lse[1], Catch::Matchers::WithinAbs(1.0986122886681098, 1e-6));
  CHECK(std::vector<float>(out.begin() + 4, out.end()) == std::vector<float>(4, 0.0f));
  CHECK(lse[2] == -std::numeric_limits<float>::infinity());
  CHECK(lse[3] == -std::numeric_limits<float>::infinity());
  // A batch whose sequences have no key at all: zeros and -inf, no error.
  std::fill(out.begin(), out.end(), -7.0f);
  REQUIRE_NOTHROW(call({0, 0}, 2, params, 2));
  CHECK(out == std::vector<float>(8, 0.0f));
  CHECK(lse == std::vector<float>(4, -std::numeric_limits<float>::infinity()));

  // Refused before anything is written: v_head_dim above head_dim, a page id outside the
  // pool, an lse of the wrong shape, bidirectional chunks with a sequence shorter than q_len
  // (its first queries at negative slots; 2 queries over 3 and 1 keys).
  std::fill(out.begin(), out.end(), -7.0f);
  std::fill(lse.begin(), lse.end(), -7.0f);
  REQUIRE_THROWS_WITH(call({3, 0}, 5, params, 2),
                      Contains("v_head_dim = 5 must be in [1, head_dim = 4]"));
  table[1] = 3;
  REQUIRE_THROWS_WITH(call({3, 0}, 2, params, 2), Contains("page_table[0, 1] = 3"));
  table[1] = 0;
  REQUIRE_THROWS_WITH(call({3, 0}, 2, params, 1), Contains("lse shape [2, 1, 1]"));
  CHECK(out == std::vector<float>(8, -7.0f));
  CHECK(lse == std::vector<float>(4, -7.0f));
  AttentionParams chunks = params;
  chunks.mask = MaskMode::kBidirectional;
  chunks.attention_chunk_size = 2;
  const std::vector<std::int64_t> lens = {3, 1};
  REQUIRE_THROWS_WITH(posenc::attention_paged_latent<float>(
                          ConstTensorView<float, 4>(q.data(), 2, 2, 1, 4),
                          ConstTensorView<float, 4>(pool.data(), 3, 2, 1, 4),
                          ConstTensorView<std::int32_t, 2>(table.data(), 2, 2),
                          ConstTensorView<std::int64_t, 1>(lens.data(), 2),
                          TensorView<float, 4>(out.data(), 2, 2, 1, 2), chunks),
                      Contains("seq_lens[1] = 1 < q_len = 2"));
  // q rows of head_dim 3 against latent rows of 4.
  REQUIRE_THROWS_WITH(posenc::attention_paged_latent<float>(
                          ConstTensorView<float, 4>(q.data(), 2, 1, 2, 3),
                          ConstTensorView<float, 4>(pool.data(), 3, 2, 1, 4),
                          ConstTensorView<std::int32_t, 2>(table.data(), 2, 2),
                          ConstTensorView<std::int64_t, 1>(lens.data(), 2),
                          TensorView<float, 4>(out.data(), 2, 1, 2, 2), params),
                      Contains("must equal q head_dim"));
  CHECK(out == std::vector<float>(8, -7.0f));
}

// ---- A library bug found by a mutation audit (thirty-second session) ----

TEST_CASE("attention paged: sequences without keys give zeros under bidirectional chunks, "
          "whatever the others hold", "[attention][paged][regression]") {
  // The header: "A sequence with seq_len 0 ... gives zeros (lse -inf ...)", and bidirectional
  // chunks or temperatures refuse only "a sequence of 0 < seq_len < q_len". A batch {10, 0}
  // was accepted (the test above), but a batch whose sequences all have 0 keys was refused
  // ("q_len = 3 > k_len = 1": the shared checks saw k_len = max(1, longest) = 1), and so was
  // a varlen sequence of 0 keys and several queries, though a varlen call runs "each sequence
  // as attention_paged".
  constexpr Eigen::Index q_len = 3, heads = 8;
  const PagedBatch<float> none({0, 0}, 2, 4), mixed({0, 6}, 2, 4);
  const auto q =
      posenc_test::random_vector<float>(static_cast<std::size_t>(2 * q_len * heads * d), 8);
  AttentionParams chunks;
  chunks.mask = MaskMode::kBidirectional;
  chunks.attention_chunk_size = 2;
  AttentionParams temperature;
  temperature.mask = MaskMode::kBidirectional;
  temperature.query_temperature = posenc::AttentionTemperature{};
  for (const AttentionParams& params : {chunks, temperature}) {
    CAPTURE(params.attention_chunk_size);
    std::vector<float> out(q.size(), 5.0f);
    std::vector<float> lse(static_cast<std::size_t>(2 * q_len * heads), 5.0f);
    CHECK_NOTHROW(posenc::attention_paged<float, float>(
        ConstTensorView<float, 4>(q.data(), 2, q_len, heads, d), none.k_pages(), none.v_pages(),
        none.page_table(), none.seq_lens(), TensorView<float, 4>(out.data(), 2, q_len, heads, d),
        params, nullptr, TensorView<float, 3>(lse.data(), 2, q_len, heads)));
    CHECK(std::all_of(out.begin(), out.end(), [](float o) { return o == 0.0f; }));
    CHECK(std::all_of(lse.begin(), lse.end(),
                      [](float l) { return l == -std::numeric_limits<float>::infinity(); }));
    // Latent pages (values = each key row's first v_head_dim): the same rule.
    AttentionParams latent = params;
    latent.scale = 0.125;
    std::fill(out.begin(), out.end(), 5.0f);
    CHECK_NOTHROW(posenc::attention_paged_latent<float, float>(
        ConstTensorView<float, 4>(q.data(), 2, q_len, heads, d), none.k_pages(),
        none.page_table(), none.seq_lens(), TensorView<float, 4>(out.data(), 2, q_len, heads, d),
        latent));
    CHECK(std::all_of(out.begin(), out.end(), [](float o) { return o == 0.0f; }));
    // Varlen: sequence 0 (no key) has 3 queries, sequence 1 (6 keys) one.
    const std::vector<std::int64_t> cu = {0, 3, 4};
    std::fill(out.begin(), out.end(), 5.0f);
    CHECK_NOTHROW(posenc::attention_paged_varlen<float, float>(
        ConstTensorView<float, 3>(q.data(), 4, heads, d), mixed.k_pages(), mixed.v_pages(),
        mixed.page_table(), mixed.seq_lens(), ConstTensorView<std::int64_t, 1>(cu.data(), 3),
        TensorView<float, 3>(out.data(), 4, heads, d), params));
    CHECK(std::all_of(out.begin(), out.begin() + 3 * heads * d,
                      [](float o) { return o == 0.0f; }));
    // A sequence of 0 < seq_len < q_len is still refused: {2, 0} puts queries at slots -1, 0.
    const PagedBatch<float> short_one({2, 0}, 2, 4);
    const auto short_call = [&] {
      posenc::attention_paged<float, float>(
          ConstTensorView<float, 4>(q.data(), 2, q_len, heads, d), short_one.k_pages(),
          short_one.v_pages(), short_one.page_table(), short_one.seq_lens(),
          TensorView<float, 4>(out.data(), 2, q_len, heads, d), params);
    };
    REQUIRE_THROWS_WITH(short_call(), Contains("below 0"));
  }
}
