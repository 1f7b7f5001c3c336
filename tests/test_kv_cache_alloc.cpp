// Decode steps through a warmed-up KvCache never allocate: this translation unit replaces the
// global operator new with a counting one (tests/support/alloc_counter.hpp) and counts the
// append + attend calls of steady-state decoding, with and without RoPE, for float and bfloat16
// caches, GQA and MHA, and for a rolling cache dropping its old slots; likewise PagedKvCache
// decode steps within a page.

#include <catch2/catch.hpp>

#include <posenc/kv_cache.hpp>
#include <posenc/paged_kv_cache.hpp>

#include <cstdint>
#include <vector>

#include "support/alloc_counter.hpp"
#include "support/rng.hpp"

namespace {

template <typename T>
long allocations_during_decode(Eigen::Index kv_heads, bool rope, bool rolling) {
  const Eigen::Index B = 2, prefill = 20, steps = 6, heads = 8, D = 64;
  // The rolling cache (window 8, 2 slots to spare after the prefill) drops all but 7 slots at
  // the third step, which is counted.
  const std::int64_t window = rolling ? 8 : 0;
  posenc::KvCache<T> cache(B, prefill + (rolling ? 2 : steps), kv_heads, D, window);
  posenc::AttentionParams params;
  params.sliding_window = window;
  if (rope) {
    posenc::RopeParams params;
    params.head_dim = D;
    cache.set_rope(posenc::compute_rope_frequencies(params), posenc::RopeLayout::kHalfSplit);
  }
  const auto k = posenc_test::random_vector<float>(static_cast<std::size_t>(B * prefill * kv_heads * D), 1);
  const auto v = posenc_test::random_vector<float>(k.size(), 2);
  const auto q = posenc_test::random_vector<float>(static_cast<std::size_t>(B * prefill * heads * D), 3);
  std::vector<float> out(q.size());
  std::vector<std::int64_t> pos(static_cast<std::size_t>(B * prefill));
  for (std::size_t i = 0; i < pos.size(); ++i) pos[i] = static_cast<std::int64_t>(i % prefill);
  cache.append(posenc::ConstTensorView<float, 4>(k.data(), B, prefill, kv_heads, D),
               posenc::ConstTensorView<float, 4>(v.data(), B, prefill, kv_heads, D),
               posenc::PositionIdsView(pos.data(), B, prefill));
  cache.attend(posenc::ConstTensorView<float, 4>(q.data(), B, prefill, heads, D),
               posenc::TensorView<float, 4>(out.data(), B, prefill, heads, D), params);
  long counted = 0;
  for (Eigen::Index t = 0; t < steps; ++t) {
    std::vector<std::int64_t> step_pos(static_cast<std::size_t>(B), prefill + t);
    const long before = posenc_test::allocation_count();
    cache.append(posenc::ConstTensorView<float, 4>(k.data(), B, 1, kv_heads, D),
                 posenc::ConstTensorView<float, 4>(v.data(), B, 1, kv_heads, D),
                 posenc::PositionIdsView(step_pos.data(), B, 1));
    cache.attend(posenc::ConstTensorView<float, 4>(q.data(), B, 1, heads, D),
                 posenc::TensorView<float, 4>(out.data(), B, 1, heads, D), params);
    // The first step sizes the decode workspace (a new shape); the later ones must reuse it.
    if (t > 0) counted += posenc_test::allocation_count() - before;
  }
  if (rolling) REQUIRE(cache.evicted() > 0);
  return counted;
}

}  // namespace

TEMPLATE_TEST_CASE("kv_cache: steady-state decode steps allocate nothing", "[kv_cache][alloc]",
                   float, Eigen::bfloat16) {
  for (const Eigen::Index kv_heads : {2, 8}) {
    for (const bool rope : {false, true}) {
      for (const bool rolling : {false, true}) {
        CAPTURE(kv_heads, rope, rolling);
        CHECK(allocations_during_decode<TestType>(kv_heads, rope, rolling) == 0);
      }
    }
  }
}

TEMPLATE_TEST_CASE("paged kv cache: decode steps within a page allocate nothing", "[paged][alloc]",
                   float, Eigen::bfloat16) {
  // Pages of 64: after a 20-token prefill, 6 steps stay in each sequence's first page. (A step
  // that takes a new page appends to the sequence's page list, which may grow its vector.)
  constexpr Eigen::Index heads = 8, kv_heads = 2, D = 64, prefill = 20;
  for (const bool rope : {false, true}) {
    CAPTURE(rope);
    posenc::PagedKvCache<TestType> cache(8, 64, kv_heads, D);
    if (rope) {
      posenc::RopeParams rp;
      rp.head_dim = D;
      cache.set_rope(posenc::compute_rope_frequencies(rp), posenc::RopeLayout::kHalfSplit);
    }
    const std::vector<std::int64_t> ids = {cache.add_sequence(), cache.add_sequence()};
    const auto k = posenc_test::random_vector<float>(static_cast<std::size_t>(prefill * kv_heads * D), 1);
    const auto q = posenc_test::random_vector<float>(static_cast<std::size_t>(2 * heads * D), 3);
    std::vector<float> out(q.size());
    for (const std::int64_t s : ids) {
      cache.append(s, posenc::ConstTensorView<float, 3>(k.data(), prefill, kv_heads, D),
                   posenc::ConstTensorView<float, 3>(k.data(), prefill, kv_heads, D));
    }
    long counted = 0;
    for (int t = 0; t < 6; ++t) {
      const long before = posenc_test::allocation_count();
      for (const std::int64_t s : ids) {
        cache.append(s, posenc::ConstTensorView<float, 3>(k.data(), 1, kv_heads, D),
                     posenc::ConstTensorView<float, 3>(k.data(), 1, kv_heads, D));
      }
      cache.attend(ids, posenc::ConstTensorView<float, 4>(q.data(), 2, 1, heads, D),
                   posenc::TensorView<float, 4>(out.data(), 2, 1, heads, D));
      // The first step sizes the workspace and the call's page table; the later ones reuse them.
      if (t > 0) counted += posenc_test::allocation_count() - before;
    }
    CHECK(counted == 0);
  }
}

TEST_CASE("kv_cache alloc: the counter sees allocations", "[kv_cache][alloc]") {
  const long before = posenc_test::allocation_count();
  std::vector<int>* v = new std::vector<int>(100, 1);
  CHECK(posenc_test::allocation_count() - before >= 2);
  delete v;
}
