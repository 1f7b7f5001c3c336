// The RoPE apply calls never allocate: this translation unit replaces the global operator new
// with a counting one and runs every apply entry point (all storage types, both layouts, plan
// and cache paths, Q+K, out of place, inverse, SBHD, M-RoPE) inside a counted window.

#include <catch2/catch.hpp>

#include <posenc/mrope.hpp>
#include <posenc/rope.hpp>

#include <cstdint>
#include <vector>

#include "support/alloc_counter.hpp"
#include "support/rng.hpp"


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
  std::vector<std::int64_t> mpos(static_cast<std::size_t>(3 * B * S));
  for (std::size_t i = 0; i < mpos.size(); ++i) mpos[i] = static_cast<std::int64_t>((i * 7) % 100);
  const posenc::MRopePositionsView mview(mpos.data(), 3, B, S);
  posenc::MRopeSections sections;
  sections.section = {8, 8, 8};  // rotary_dim 48

  const long before = posenc_test::allocation_count();
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
  posenc::apply_rope_inplace<T>(posenc::TensorView<T, 4>(q.data(), S, B, Hq, D), ids, freqs, layout,
                                posenc::HeadLayout::kSBHD);
  posenc::apply_mrope_qk_inplace<T>(hq, hk, mview, freqs, layout, sections);
  posenc::apply_mrope_qk_inplace_cached<T>(hq, hk, mview, cview, layout, sections, 8, inverse);
  return posenc_test::allocation_count() - before;
}

}  // namespace

TEMPLATE_TEST_CASE("rope: the apply calls perform no heap allocation", "[rope][alloc]", float, double,
                   Eigen::half, Eigen::bfloat16) {
  // Sanity: the counter does count.
  const long probe = posenc_test::allocation_count();
  void* probe_block = ::operator new(16);  // a direct call: new-expressions may be elided
  ::operator delete(probe_block);
  REQUIRE(posenc_test::allocation_count() == probe + 1);
  CHECK(allocations_during_apply<TestType>(posenc::RopeLayout::kHalfSplit) == 0);
  CHECK(allocations_during_apply<TestType>(posenc::RopeLayout::kInterleaved) == 0);
}
