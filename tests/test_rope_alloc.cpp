// The RoPE apply calls never allocate: this translation unit replaces the global operator new
// with a counting one and runs every apply entry point (all storage types, both layouts, plan
// and cache paths, Q+K, out of place, inverse) inside a counted window.

#include <catch2/catch.hpp>

#include <posenc/rope.hpp>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <vector>

#include "support/rng.hpp"

namespace {
std::atomic<long> g_allocations{0};
}  // namespace

// GCC 12 inlines these replacements into callers and then flags free() on a pointer that came
// from "operator new" (-Wmismatched-new-delete) although both sides are ours, malloc/free.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
void* operator new(std::size_t size) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t size) { return operator new(size); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

namespace {

template <typename T>
long allocations_during_apply(posenc::RopeLayout layout) {
  const Eigen::Index B = 2, S = 40, Hq = 8, Hk = 2, D = 64;
  auto q = posenc_test::random_vector<T>(static_cast<std::size_t>(B * S * Hq * D), 1);
  auto k = posenc_test::random_vector<T>(static_cast<std::size_t>(B * S * Hk * D), 2);
  std::vector<T> out(q.size());
  std::vector<std::int64_t> pos(static_cast<std::size_t>(B * S));
  for (std::size_t i = 0; i < pos.size(); ++i) pos[i] = static_cast<std::int64_t>(i % S) + 3;
  posenc::RopeParams params;
  params.head_dim = D;
  params.rotary_dim = 48;
  params.rotary_offset = 8;
  const auto freqs = posenc::compute_rope_frequencies(params);
  const auto cache = posenc::make_rope_cos_sin_cache(freqs, 128);
  const posenc::ConstTensorView<float, 2> cview(cache.data(), cache.dimension(0), cache.dimension(1));
  const posenc::PositionIdsView ids(pos.data(), B, S);
  const auto positions = posenc::RopePositions::from_ids(ids);
  posenc::RopeApplyOptions inverse;
  inverse.direction = posenc::RopeDirection::kInverse;

  const long before = g_allocations.load();
  posenc::apply_rope_inplace<T>(posenc::TensorView<T, 4>(q.data(), B, S, Hq, D), ids, freqs, layout);
  posenc::apply_rope_inplace<T>(posenc::TensorView<T, 4>(q.data(), B, Hq, S, D), ids, freqs, layout,
                                posenc::HeadLayout::kBHSD);
  const auto hq = posenc::rope_heads<T>(posenc::TensorView<T, 4>(q.data(), B, S, Hq, D));
  const auto hk = posenc::rope_heads<T>(posenc::TensorView<T, 4>(k.data(), B, S, Hk, D));
  posenc::apply_rope_qk_inplace<T>(hq, hk, positions, freqs, layout);
  posenc::apply_rope_qk_inplace<T>(hq, hk, positions, freqs, layout, inverse);
  posenc::apply_rope_qk_inplace_cached<T>(hq, hk, positions, cview, layout, 8);
  posenc::apply_rope_inplace_cached<T>(hq, positions, cview, layout, 8, inverse);
  posenc::apply_rope<T>(posenc::ConstTensorView<T, 4>(q.data(), B, S, Hq, D), ids, freqs, layout,
                        posenc::TensorView<T, 4>(out.data(), B, S, Hq, D));
  posenc::apply_rope_cached<T>(posenc::detail::as_const(hq),
                               posenc::rope_heads<T>(posenc::TensorView<T, 4>(out.data(), B, S, Hq, D)),
                               posenc::RopePositions::contiguous(B, S, 10), cview, layout, 8);
  posenc::rerotate_rope_inplace<T>(hk, positions, freqs, freqs, layout);
  return g_allocations.load() - before;
}

}  // namespace

TEMPLATE_TEST_CASE("rope: the apply calls perform no heap allocation", "[rope][alloc]", float, double,
                   Eigen::half, Eigen::bfloat16) {
  // Sanity: the counter does count.
  const long probe = g_allocations.load();
  void* probe_block = ::operator new(16);  // a direct call: new-expressions may be elided
  ::operator delete(probe_block);
  REQUIRE(g_allocations.load() == probe + 1);
  CHECK(allocations_during_apply<TestType>(posenc::RopeLayout::kHalfSplit) == 0);
  CHECK(allocations_during_apply<TestType>(posenc::RopeLayout::kInterleaved) == 0);
}
