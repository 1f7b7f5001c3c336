// PagedKvCache: sequences appended in interleaved chunks (so their pages interleave in the
// pool) must attend exactly like the double reference over each sequence's own tokens, with
// RoPE (keys rotated at their slots, rounded once), ALiBi, forks that share pages, releases
// that return them, and errors that change nothing.

#include <catch2/catch.hpp>

#include <posenc/alibi.hpp>
#include <posenc/attention.hpp>
#include <posenc/paged_kv_cache.hpp>
#include <posenc/reference/attention.hpp>
#include <posenc/rope.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "support/check.hpp"
#include "support/rng.hpp"
#include "support/rope_plans.hpp"

using Catch::Matchers::Contains;
using posenc::AttentionParams;
using posenc::ConstTensorView;
using posenc::TensorView;

namespace {

constexpr Eigen::Index H = 8, KH = 2, d = 32, row = KH * d;
enum class Positional { kNone, kAlibi, kRope };

/// One sequence's tokens as the caller holds them: K and V rows [len, kv_heads, d].
struct History {
  std::vector<float> k, v;
  Eigen::Index length() const { return static_cast<Eigen::Index>(k.size()) / row; }
  void add(const std::vector<float>& nk, const std::vector<float>& nv) {
    k.insert(k.end(), nk.begin(), nk.end());
    v.insert(v.end(), nv.begin(), nv.end());
  }
};

posenc::RopeFrequencies plan() {
  posenc::RopeParams rp;
  rp.head_dim = d;
  posenc::RopeFrequencies f = posenc::compute_rope_frequencies(rp);
  f.softmax_scale_multiplier = 1.5;  // the default scale must take it (as DeepSeek YaRN's)
  return f;
}

template <typename T>
float round_to(float x) {
  return float(T(x));
}

/// The double reference for one sequence: keys rotated at slots 0..len-1 and rounded once to T,
/// values rounded to T, the q_len queries rotated at slots len - q_len + i. lse: attention()'s
/// on the same inputs (checked against a long-double log-sum-exp in test_attention_merge.cpp).
template <typename T>
std::vector<float> expected(const History& h, const std::vector<float>& q, Eigen::Index q_len,
                            Positional positional, AttentionParams params, std::vector<float>& lse) {
  const Eigen::Index len = h.length();
  std::vector<float> k = h.k, v = h.v, qr = q;
  if (positional == Positional::kRope) {
    const auto f = plan();
    posenc::apply_rope_inplace<float>(posenc::rope_heads<float>(TensorView<float, 4>(k.data(), 1, len, KH, d)),
                                      posenc::RopePositions::contiguous(1, len, 0), f, posenc::RopeLayout::kHalfSplit);
    posenc::apply_rope_inplace<float>(posenc::rope_heads<float>(TensorView<float, 4>(qr.data(), 1, q_len, H, d)),
                                      posenc::RopePositions::contiguous(1, q_len, len - q_len), f,
                                      posenc::RopeLayout::kHalfSplit);
    params.scale = 1.5 / std::sqrt(double(d));
  }
  for (float& x : k) x = round_to<T>(x);
  for (float& x : v) x = round_to<T>(x);
  std::vector<float> out(qr.size()), fused(qr.size());
  const ConstTensorView<float, 4> qv(qr.data(), 1, q_len, H, d), kv(k.data(), 1, len, KH, d),
      vv(v.data(), 1, len, KH, d);
  posenc::reference::attention<float>(qv, kv, vv, TensorView<float, 4>(out.data(), 1, q_len, H, d), params);
  lse.resize(static_cast<std::size_t>(q_len * H));
  posenc::attention<float>(qv, kv, vv, TensorView<float, 4>(fused.data(), 1, q_len, H, d),
                           TensorView<float, 3>(lse.data(), 1, q_len, H), params);
  return out;
}

/// Attends the listed sequences' last q_len tokens and checks each against expected().
template <typename T>
void check_attend(posenc::PagedKvCache<T>& cache, const std::vector<std::int64_t>& ids,
                  const std::vector<History>& hist, Eigen::Index q_len, Positional positional,
                  const AttentionParams& params) {
  const auto B = static_cast<Eigen::Index>(ids.size());
  const auto q = posenc_test::random_vector<float>(static_cast<std::size_t>(B * q_len * H * d), 11);
  std::vector<float> out(q.size(), -7.0f), lse(static_cast<std::size_t>(B * q_len * H), -7.0f);
  cache.attend(ids, ConstTensorView<float, 4>(q.data(), B, q_len, H, d), TensorView<float, 4>(out.data(), B, q_len, H, d),
               params, TensorView<float, 3>(lse.data(), B, q_len, H));
  const Eigen::Index per = q_len * H * d;
  for (Eigen::Index b = 0; b < B; ++b) {
    CAPTURE(b, q_len);
    const std::vector<float> qb(q.begin() + b * per, q.begin() + (b + 1) * per);
    std::vector<float> want_lse;
    const auto want = expected<T>(hist[static_cast<std::size_t>(b)], qb, q_len, positional, params, want_lse);
    POSENC_REQUIRE_CLOSE(posenc_test::compare(
        want.size(), [&](std::size_t i) { return double(out[static_cast<std::size_t>(b * per) + i]); },
        [&](std::size_t i) { return double(want[i]); }, 1e-5));
    POSENC_REQUIRE_CLOSE(posenc_test::compare(
        want_lse.size(), [&](std::size_t i) { return double(lse[static_cast<std::size_t>(b * q_len * H) + i]); },
        [&](std::size_t i) { return double(want_lse[i]); }, 1e-5));
  }
}

template <typename T>
void append(posenc::PagedKvCache<T>& cache, std::int64_t id, History& h, Eigen::Index n, std::uint64_t seed) {
  const auto k = posenc_test::random_vector<float>(static_cast<std::size_t>(n * row), seed);
  const auto v = posenc_test::random_vector<float>(k.size(), seed + 1000);
  cache.append(id, ConstTensorView<float, 3>(k.data(), n, KH, d), ConstTensorView<float, 3>(v.data(), n, KH, d));
  h.add(k, v);
}

}  // namespace

TEMPLATE_TEST_CASE("paged kv cache: interleaved sequences attend like the reference on their own tokens",
                   "[paged][kv_cache]", float, Eigen::bfloat16) {
  const Eigen::Index page_size = GENERATE(1, 5, 16);
  const auto positional = GENERATE(Positional::kNone, Positional::kAlibi, Positional::kRope);
  CAPTURE(page_size, static_cast<int>(positional));
  const Eigen::Index pool = 110 / page_size + 3;  // 100 tokens are appended
  posenc::PagedKvCache<TestType> cache(pool, page_size, KH, d);
  if (positional == Positional::kRope) cache.set_rope(plan(), posenc::RopeLayout::kHalfSplit);
  AttentionParams params;
  if (positional == Positional::kAlibi) params.alibi_slopes = posenc::alibi_slopes(H);
  const std::vector<std::int64_t> ids = {cache.add_sequence(), cache.add_sequence(), cache.add_sequence()};
  std::vector<History> hist(3);
  // Round-robin chunks: prefills, single-token decode steps, a late long chunk.
  const std::vector<std::vector<Eigen::Index>> chunks = {{5, 1, 1, 30}, {17, 1, 1, 1}, {1, 1, 1, 40}};
  std::uint64_t seed = 1;
  for (std::size_t step = 0; step < 4; ++step) {
    for (std::size_t s = 0; s < 3; ++s) append(cache, ids[s], hist[s], chunks[s][step], seed++);
    if (step == 2) check_attend(cache, ids, hist, 1, positional, params);  // a decode step
  }
  for (std::size_t s = 0; s < 3; ++s) REQUIRE(cache.length(ids[s]) == hist[s].length());
  check_attend(cache, ids, hist, 1, positional, params);
  check_attend(cache, ids, hist, 3, positional, params);  // speculative: 3 draft tokens
  // A subset, in another order, and one sequence twice.
  check_attend(cache, {ids[2], ids[0], ids[2]}, {hist[2], hist[0], hist[2]}, 2, positional, params);
  // Pages held: exactly what the lengths need, none shared.
  Eigen::Index held = 0;
  for (std::size_t s = 0; s < 3; ++s) {
    held += static_cast<Eigen::Index>(cache.pages(ids[s]).size());
    REQUIRE(static_cast<Eigen::Index>(cache.pages(ids[s]).size()) == (hist[s].length() + page_size - 1) / page_size);
  }
  REQUIRE(cache.free_pages() == pool - held);
}

TEST_CASE("paged kv cache: fork shares full pages, copies the partial one, and diverges safely",
          "[paged][kv_cache]") {
  const Eigen::Index parent_len = GENERATE(10, 8);  // a partial last page of 4, or none
  CAPTURE(parent_len);
  posenc::PagedKvCache<float> cache(12, 4, KH, d);
  cache.set_rope(plan(), posenc::RopeLayout::kHalfSplit);
  History parent_h;
  const std::int64_t parent = cache.add_sequence();
  append(cache, parent, parent_h, parent_len, 50);
  const Eigen::Index parent_pages = (parent_len + 3) / 4;
  REQUIRE(cache.free_pages() == 12 - parent_pages);

  const std::int64_t child = cache.fork(parent);
  History child_h = parent_h;
  const auto& pp = cache.pages(parent);
  const auto& cp = cache.pages(child);
  REQUIRE(cache.length(child) == parent_len);
  REQUIRE(cp.size() == pp.size());
  const bool partial = parent_len % 4 != 0;
  for (std::size_t i = 0; i < pp.size(); ++i) {
    const bool shared = !(partial && i + 1 == pp.size());
    CHECK((cp[i] == pp[i]) == shared);
    CHECK(cache.page_refs(pp[i]) == (shared ? 2 : 1));
  }
  REQUIRE(cache.free_pages() == 12 - parent_pages - (partial ? 1 : 0));

  // Both grow with different tokens; each must see its own history only.
  append(cache, child, child_h, 5, 60);
  append(cache, parent, parent_h, 3, 70);
  append(cache, child, child_h, 1, 80);
  check_attend(cache, {parent, child}, {parent_h, child_h}, 1, Positional::kRope, {});
  check_attend(cache, {child, parent}, {child_h, parent_h}, 4, Positional::kRope, {});

  // Releasing the parent frees only what the child does not hold.
  const Eigen::Index before = cache.free_pages();
  const Eigen::Index shared_pages = parent_len / 4;
  const Eigen::Index parent_now = static_cast<Eigen::Index>(cache.pages(parent).size());
  cache.release(parent);
  REQUIRE(cache.free_pages() == before + parent_now - shared_pages);
  for (const std::int32_t p : cache.pages(child)) CHECK(cache.page_refs(p) == 1);
  check_attend(cache, {child}, {child_h}, 2, Positional::kRope, {});
  cache.release(child);
  REQUIRE(cache.free_pages() == 12);
  REQUIRE(cache.sequences() == 0);
}

TEST_CASE("paged kv cache: update_rope turns every stored key to the new plan, shared pages once",
          "[paged][kv_cache][rope]") {
  // A dynamic-NTK plan that changes once the sequences outgrow max_position_embeddings = 8
  // (cached keys must not keep the old angles: transformers #25104, #33129). The child shares the
  // parent's two full pages, so turning a page per holder would rotate those twice.
  const auto [old_freqs, new_freqs] = posenc_test::dynamic_plan_change(d, 8, 2.0, 18);
  const auto layout = GENERATE(posenc::RopeLayout::kHalfSplit, posenc::RopeLayout::kInterleaved);
  CAPTURE(posenc::to_string(layout));
  std::vector<History> hist(2);
  auto fill = [&](posenc::PagedKvCache<float>& pool, const posenc::RopeFrequencies& freqs) {
    pool.set_rope(freqs, layout);
    hist.assign(2, History{});
    const std::int64_t parent = pool.add_sequence();
    append(pool, parent, hist[0], 10, 90);
    const std::int64_t child = pool.fork(parent);
    hist[1] = hist[0];
    append(pool, child, hist[1], 5, 91);
    append(pool, parent, hist[0], 3, 92);
    return std::vector<std::int64_t>{parent, child};
  };
  posenc::PagedKvCache<float> pool(12, 4, KH, d), fresh(12, 4, KH, d);
  const auto ids = fill(pool, old_freqs);
  fill(fresh, new_freqs);
  pool.update_rope(new_freqs);
  // Same operations, same pages: the pools must hold the same keys (rotated twice vs once).
  const auto got = pool.key_pages(), want = fresh.key_pages();
  POSENC_REQUIRE_CLOSE(posenc_test::compare(
      static_cast<std::size_t>(got.size()), [&](std::size_t i) { return double(got.data()[i]); },
      [&](std::size_t i) { return double(want.data()[i]); }, 2e-6));
  const auto q = posenc_test::random_vector<float>(static_cast<std::size_t>(2 * H * d), 93);
  std::vector<float> out(q.size()), ref(q.size());
  pool.attend(ids, ConstTensorView<float, 4>(q.data(), 2, 1, H, d), TensorView<float, 4>(out.data(), 2, 1, H, d));
  fresh.attend(ids, ConstTensorView<float, 4>(q.data(), 2, 1, H, d), TensorView<float, 4>(ref.data(), 2, 1, H, d));
  POSENC_REQUIRE_CLOSE(posenc_test::compare(
      out.size(), [&](std::size_t i) { return double(out[i]); }, [&](std::size_t i) { return double(ref[i]); }, 1e-5));

  // Without a plan, or with a plan of another slice: invalid_argument, nothing turned.
  posenc::PagedKvCache<float> bare(4, 4, KH, d);
  REQUIRE_THROWS_WITH(bare.update_rope(new_freqs), Contains("no RoPE plan is set"));
  posenc::RopeParams narrow;
  narrow.head_dim = d;
  narrow.rotary_dim = d / 2;
  const std::vector<float> before(got.data(), got.data() + got.size());
  REQUIRE_THROWS_WITH(pool.update_rope(posenc::compute_rope_frequencies(narrow)),
                      Contains("PagedKvCache::update_rope") && Contains("rotary_dim 16 vs 32"));
  REQUIRE(std::equal(before.begin(), before.end(), pool.key_pages().data()));
}

TEST_CASE("paged kv cache: errors throw and change nothing", "[paged][kv_cache][errors]") {
  posenc::PagedKvCache<float> cache(3, 4, KH, d);
  History h;
  const std::int64_t s = cache.add_sequence();
  append(cache, s, h, 9, 5);  // 3 pages: the pool is full
  const std::vector<float> k_before(cache.key_pages().data(), cache.key_pages().data() + cache.key_pages().size());
  const auto unchanged = [&] {
    return cache.length(s) == 9 && cache.free_pages() == 0 && cache.pages(s).size() == 3 &&
           std::equal(k_before.begin(), k_before.end(), cache.key_pages().data());
  };
  const auto x = posenc_test::random_vector<float>(static_cast<std::size_t>(4 * row), 9);
  const ConstTensorView<float, 3> one(x.data(), 1, KH, d), four(x.data(), 4, KH, d);
  // Slot 9 is in page 2 (partial): fine; 4 more need a 4th page.
  REQUIRE_THROWS_AS(cache.append(s, four, four), std::out_of_range);
  REQUIRE_THROWS_WITH(cache.append(s, four, four), Contains("needs 1 new pages of 4 tokens; 0 of 3 are free"));
  CHECK(unchanged());
  REQUIRE_THROWS_AS(cache.fork(s), std::out_of_range);
  REQUIRE_THROWS_WITH(cache.fork(s), Contains("partial last page to copy and no page of 3 is free"));
  CHECK(unchanged());
  CHECK(cache.sequences() == 1);
  REQUIRE_THROWS_WITH(cache.append(s + 7, one, one), Contains("sequence " + std::to_string(s + 7) + " is not in the cache"));
  REQUIRE_THROWS_WITH(cache.release(s + 7), Contains("is not in the cache"));
  REQUIRE_THROWS_WITH(cache.append(s, ConstTensorView<float, 3>(x.data(), 1, KH, d - 1), one),
                      Contains("must be [n, kv_heads, head_dim]"));
  CHECK(unchanged());

  const auto q = posenc_test::random_vector<float>(static_cast<std::size_t>(10 * H * d), 10);
  std::vector<float> out(q.size(), 3.0f);
  const auto attend = [&](std::vector<std::int64_t> ids, Eigen::Index q_len, AttentionParams p = {}) {
    const auto B = static_cast<Eigen::Index>(ids.size());
    cache.attend(ids, ConstTensorView<float, 4>(q.data(), B, q_len, H, d), TensorView<float, 4>(out.data(), B, q_len, H, d),
                 p);
  };
  REQUIRE_THROWS_WITH(attend({s}, 10), Contains("q_len = 10 must be in [1, length = 9] of sequence"));
  REQUIRE_THROWS_WITH(attend({s, 99}, 1), Contains("sequence 99 is not in the cache"));
  REQUIRE_THROWS_WITH(attend({}, 1), Contains("number of sequences listed (0, at least 1)"));
  AttentionParams p;
  p.alibi_slopes = {1.0, 2.0};
  REQUIRE_THROWS_WITH(attend({s}, 1, p), Contains("alibi_slopes has 2 entries"));
  CHECK(std::all_of(out.begin(), out.end(), [](float o) { return o == 3.0f; }));
  REQUIRE_THROWS_AS(posenc::PagedKvCache<float>(0, 4, KH, d), std::invalid_argument);
  REQUIRE_THROWS_WITH(cache.page_refs(3), Contains("page = 3 must be in [0, num_pages = 3)"));
  // After the errors the cache still works.
  check_attend(cache, {s}, {h}, 2, Positional::kNone, {});
  cache.release(s);
  CHECK(cache.free_pages() == 3);
}

TEST_CASE("paged kv cache: a sliding-window pool gives back pages no window can see",
          "[paged][kv_cache][window]") {
  // W = 6, pages of 4: a sequence holds at most the pages of its last W - 1 slots plus its new
  // chunk, so 10 pages carry a sequence of 61 tokens, one of 42 and a fork.
  constexpr std::int64_t W = 6;
  const auto positional = GENERATE(Positional::kNone, Positional::kAlibi, Positional::kRope);
  const std::int64_t window = GENERATE(std::int64_t{6}, std::int64_t{3});  // attend's: any in [1, W]
  CAPTURE(static_cast<int>(positional), window);
  posenc::PagedKvCache<float> cache(10, 4, KH, d, W);
  if (positional == Positional::kRope) cache.set_rope(plan(), posenc::RopeLayout::kHalfSplit);
  AttentionParams params;
  params.sliding_window = window;
  if (positional == Positional::kAlibi) params.alibi_slopes = posenc::alibi_slopes(H);
  const std::vector<std::int64_t> ids = {cache.add_sequence(), cache.add_sequence()};
  std::vector<History> hist(2);
  const std::vector<Eigen::Index> chunks = {5, 1, 1, 9, 1, 1, 1, 4, 1, 6, 1, 1, 1, 1, 3, 1, 7, 1, 1, 1, 1, 1, 1, 1, 9};
  std::uint64_t seed = 300;
  for (const Eigen::Index n : chunks) {
    for (std::size_t s = 0; s < 2; ++s) append(cache, ids[s], hist[s], s == 0 ? n : 1 + n / 2, seed++);
    // Every query of the newest chunks against the windowed reference over the whole history.
    const Eigen::Index q_len = std::min<Eigen::Index>(n, 1 + n / 2);
    check_attend(cache, ids, hist, q_len, positional, params);
    for (std::size_t s = 0; s < 2; ++s) {
      Eigen::Index held = 0;
      for (const std::int32_t p : cache.pages(ids[s])) held += p != cache.num_pages();
      const Eigen::Index chunk = s == 0 ? n : 1 + n / 2;
      CHECK(held <= (W - 1 + chunk + 3) / 4 + 1);
    }
  }
  REQUIRE(hist[0].length() == 61);  // 16 pages of 4 without the window
  // A fork of a sequence with dropped pages holds (and later gives back) only real pages.
  const std::int64_t child = cache.fork(ids[0]);
  History child_h = hist[0];
  append(cache, child, child_h, 2, 999);
  check_attend(cache, {child}, {child_h}, 2, positional, params);
  // Every page's count is the number of sequences listing it; free pages are listed by none.
  for (std::int32_t p = 0; p < 10; ++p) {
    std::int32_t holders = 0;
    for (const std::int64_t s : {ids[0], ids[1], child}) {
      const auto& pages = cache.pages(s);
      holders += static_cast<std::int32_t>(std::count(pages.begin(), pages.end(), p));
    }
    CHECK(cache.page_refs(p) == holders);
  }
  for (const std::int64_t s : {ids[0], ids[1], child}) cache.release(s);
  REQUIRE(cache.free_pages() == 10);
}

TEST_CASE("paged kv cache: a sliding-window pool refuses what its dropped pages would need",
          "[paged][kv_cache][window][errors]") {
  posenc::PagedKvCache<float> cache(8, 4, KH, d, 6);
  History h;
  const std::int64_t s = cache.add_sequence();
  append(cache, s, h, 20, 1);
  append(cache, s, h, 2, 2);
  const auto q = posenc_test::random_vector<float>(static_cast<std::size_t>(3 * H * d), 3);
  std::vector<float> out(q.size(), 3.0f);
  const auto attend = [&](Eigen::Index q_len, std::int64_t window) {
    AttentionParams p;
    p.sliding_window = window;
    cache.attend({s}, ConstTensorView<float, 4>(q.data(), 1, q_len, H, d), TensorView<float, 4>(out.data(), 1, q_len, H, d), p);
  };
  REQUIRE_THROWS_AS(attend(3, 6), std::invalid_argument);
  REQUIRE_THROWS_WITH(attend(3, 6), Contains("q_len = 3 exceeds the last appended chunk (2 tokens)"));
  REQUIRE_THROWS_WITH(attend(1, 0), Contains("params.sliding_window = 0 must be in [1, 6]"));
  REQUIRE_THROWS_WITH(attend(1, 7), Contains("params.sliding_window = 7 must be in [1, 6]"));
  CHECK(std::all_of(out.begin(), out.end(), [](float o) { return o == 3.0f; }));
  REQUIRE_THROWS_WITH(posenc::PagedKvCache<float>(8, 4, KH, d, -1), Contains("sliding_window = -1 must be >= 0"));
  // Pages before slot 20 - 6 + 1 = 15 were dropped at the second append: 0..2 (slots 0..11).
  const auto& pages = cache.pages(s);
  REQUIRE(pages.size() == 6);
  for (std::size_t i = 0; i < 6; ++i) CHECK((pages[i] == cache.num_pages()) == (i < 3));
  check_attend(cache, {s}, {h}, 2, Positional::kNone, [] {
    AttentionParams p;
    p.sliding_window = 6;
    return p;
  }());
}

// As for KvCache: the pools start on a 64-byte line, so page rows of a multiple of 64 bytes do.
TEMPLATE_TEST_CASE("paged kv cache: the page pools start on a 64-byte cache line", "[paged]",
                   float, Eigen::bfloat16) {
  for (const Eigen::Index pages : {1, 5, 64}) {
    posenc::PagedKvCache<TestType> cache(pages, 16, 3, 80);
    CAPTURE(pages);
    CHECK(reinterpret_cast<std::uintptr_t>(cache.key_pages().data()) % 64 == 0);
    CHECK(reinterpret_cast<std::uintptr_t>(cache.value_pages().data()) % 64 == 0);
  }
}

// ---- From a mutation audit (twenty-ninth session) ----

TEST_CASE("paged kv cache: forking a sequence of full pages needs no free page",
          "[paged][kv_cache]") {
  // Only a partial last page is copied (the file comment): 8 tokens in pages of 4 fill both
  // pages of a 2-page pool, and the fork shares them.
  posenc::PagedKvCache<float> cache(2, 4, KH, d);
  History h;
  const std::int64_t s = cache.add_sequence();
  append(cache, s, h, 8, 40);
  REQUIRE(cache.free_pages() == 0);
  std::int64_t child = -1;
  REQUIRE_NOTHROW(child = cache.fork(s));
  CHECK(cache.pages(child) == cache.pages(s));
  for (const std::int32_t p : cache.pages(s)) CHECK(cache.page_refs(p) == 2);
  CHECK(cache.free_pages() == 0);
  check_attend(cache, {s, child}, {h, h}, 2, Positional::kNone, {});
}

TEST_CASE("paged kv cache: a sliding-window pool drops exactly the pages before the next "
          "query's window, and may use them for the same append", "[paged][kv_cache][window]") {
  // W = 5, pages of 4. After 8 tokens the next query (slot 8) sees slots 4..8: page 0
  // (slots 0..3) is dropped and, held by this sequence alone, taken again for slots 8..11.
  posenc::PagedKvCache<float> cache(2, 4, KH, d, 5);
  History h;
  const std::int64_t s = cache.add_sequence();
  append(cache, s, h, 7, 60);
  // At length 7 the next query (slot 7) sees slots 3..7: page 0 must stay.
  append(cache, s, h, 1, 61);
  REQUIRE(cache.pages(s).size() == 2);
  CHECK(cache.pages(s)[0] != cache.num_pages());
  CHECK(cache.free_pages() == 0);
  AttentionParams params;
  params.sliding_window = 5;
  check_attend(cache, {s}, {h}, 1, Positional::kNone, params);
  // The pool is full, yet 4 more tokens fit: page 0 is freed first.
  REQUIRE_NOTHROW(append(cache, s, h, 4, 62));
  REQUIRE(cache.pages(s).size() == 3);
  CHECK(cache.pages(s)[0] == cache.num_pages());
  CHECK(cache.free_pages() == 0);
  check_attend(cache, {s}, {h}, 4, Positional::kNone, params);
}

TEST_CASE("paged kv cache: a sliding-window pool does not count a shared dropped page as "
          "freed", "[paged][kv_cache][window][errors]") {
  // W = 2, pages of 4, 3 pages. s holds 8 tokens (pages 0, 1), its fork shares both; 1 page is
  // free. 8 more tokens for s need 2 pages; dropping page 0 frees nothing (the fork holds it).
  posenc::PagedKvCache<float> cache(3, 4, KH, d, 2);
  History h;
  const std::int64_t s = cache.add_sequence();
  append(cache, s, h, 8, 70);
  const std::int64_t child = cache.fork(s);
  REQUIRE(cache.free_pages() == 1);
  const std::vector<std::int32_t> pages_before = cache.pages(s);
  History extra;
  REQUIRE_THROWS_AS(append(cache, s, extra, 8, 71), std::out_of_range);
  CHECK(cache.length(s) == 8);
  CHECK(cache.pages(s) == pages_before);
  CHECK(cache.free_pages() == 1);
  for (const std::int32_t p : cache.pages(child)) CHECK(cache.page_refs(p) == 2);
}

TEST_CASE("paged kv cache: the file comment's example - lowest free page ids first, fork copies "
          "the partial page into the next", "[paged][kv_cache][fork]") {
  // paged_kv_cache.hpp: page_size 4, a holds 6 tokens in pages {0, 1}, c = fork(a) shares p0
  // (refcount 2) and copies a's partial p1 into p2, leaving p3 free.
  posenc::PagedKvCache<float> cache(4, 4, KH, d);
  History h;
  const std::int64_t a = cache.add_sequence();
  append(cache, a, h, 6, 21);
  CHECK(cache.pages(a) == std::vector<std::int32_t>{0, 1});
  const std::int64_t c = cache.fork(a);
  CHECK(cache.pages(c) == std::vector<std::int32_t>{0, 2});
  CHECK(cache.page_refs(0) == 2);
  CHECK(cache.page_refs(1) == 1);
  CHECK(cache.page_refs(2) == 1);
  CHECK(cache.page_refs(3) == 0);
  CHECK(cache.free_pages() == 1);
}

TEST_CASE("paged kv cache: constructor bounds - no zero page_size, num_pages below 2^31 - 1",
          "[paged][kv_cache][errors]") {
  // Documented: every dimension > 0, num_pages must fit int32 page ids (< 2^31 - 1: the zero
  // stand-in page takes id num_pages).
  REQUIRE_THROWS_AS(posenc::PagedKvCache<float>(3, 0, KH, d), std::invalid_argument);
  REQUIRE_THROWS_AS(posenc::PagedKvCache<float>(3, 4, 0, d), std::invalid_argument);
  REQUIRE_THROWS_AS(posenc::PagedKvCache<float>(3, 4, KH, 0), std::invalid_argument);
  constexpr Eigen::Index kMax32 = std::numeric_limits<std::int32_t>::max();
  constexpr Eigen::Index big = Eigen::Index{1} << 20;  // makes any storage unaddressable
  // num_pages = 2^31 - 1 is refused for its id range (not only for its size) ...
  REQUIRE_THROWS_WITH(posenc::PagedKvCache<float>(kMax32, big, big, big),
                      Contains("int32 page ids"));
  // ... and one page fewer passes that check (and fails on the storage size only).
  REQUIRE_THROWS_WITH(posenc::PagedKvCache<float>(kMax32 - 1, big, big, big),
                      !Contains("int32 page ids"));
}

TEST_CASE("paged kv cache: append checks every extent of k and v and changes nothing",
          "[paged][kv_cache][errors]") {
  posenc::PagedKvCache<float> cache(4, 4, KH, d);
  History h;
  const std::int64_t s = cache.add_sequence();
  append(cache, s, h, 3, 22);
  const std::vector<float> k_before(cache.key_pages().data(),
                                    cache.key_pages().data() + cache.key_pages().size());
  const std::vector<float> v_before(cache.value_pages().data(),
                                    cache.value_pages().data() + cache.value_pages().size());
  const auto unchanged = [&] {
    return cache.length(s) == 3 && cache.free_pages() == 3 && cache.pages(s).size() == 1 &&
           std::equal(k_before.begin(), k_before.end(), cache.key_pages().data()) &&
           std::equal(v_before.begin(), v_before.end(), cache.value_pages().data());
  };
  const auto x = posenc_test::random_vector<float>(static_cast<std::size_t>(4 * row), 23);
  const ConstTensorView<float, 3> one(x.data(), 1, KH, d);
  const ConstTensorView<float, 3> more_heads(x.data(), 1, KH + 1, d);
  const ConstTensorView<float, 3> narrow(x.data(), 1, KH, d - 1);
  REQUIRE_THROWS_AS(cache.append(s, more_heads, one), std::invalid_argument);
  CHECK(unchanged());
  REQUIRE_THROWS_AS(cache.append(s, one, more_heads), std::invalid_argument);
  CHECK(unchanged());
  REQUIRE_THROWS_AS(cache.append(s, one, narrow), std::invalid_argument);
  CHECK(unchanged());
  REQUIRE_THROWS_AS(cache.append(s, one, ConstTensorView<float, 3>(x.data(), 2, KH, d)),
                    std::invalid_argument);
  CHECK(unchanged());
}

TEST_CASE("paged kv cache: page_refs refuses a negative page id", "[paged][kv_cache][errors]") {
  posenc::PagedKvCache<float> cache(3, 4, KH, d);
  REQUIRE_THROWS_AS(cache.page_refs(-1), std::invalid_argument);
  REQUIRE_THROWS_WITH(cache.page_refs(-1), Contains("page = -1 must be in [0, num_pages = 3)"));
  CHECK(cache.page_refs(0) == 0);
}
