// Dual chunk attention decode steps never allocate once the workspace has seen the shape: this
// translation unit counts every heap allocation (tests/support/alloc_counter.hpp) around the
// key rotation, the append and the attend of each step, for a KvCache and a page pool, while
// the steps cross chunk boundaries (all three parts run).

#include <catch2/catch.hpp>

#include <posenc/dual_chunk_attention.hpp>
#include <posenc/kv_cache.hpp>
#include <posenc/paged_kv_cache.hpp>
#include <posenc/rope_frequencies.hpp>

#include <cstdint>
#include <vector>

#include "support/alloc_counter.hpp"
#include "support/rng.hpp"

namespace {

constexpr Eigen::Index kHeads = 8, kKvHeads = 2, kD = 32, kSteps = 30;

posenc::DualChunkPlan small_plan(std::int64_t l0) {
  posenc::RopeParams rp;
  rp.head_dim = kD;
  posenc::DualChunkPlan plan;
  plan.freqs = posenc::compute_rope_frequencies(rp);
  plan.chunks = {12, 4, l0};  // chunk_len 8: 30 steps cross three chunk boundaries
  return plan;
}

/// Token t's key rotated as DCA keeps it, from the same raw key every step.
void rotate_step(std::vector<float>& k, const std::vector<float>& k0, std::vector<std::int64_t>& pos,
                 Eigen::Index t, const posenc::DualChunkPlan& plan, posenc::DualChunkWorkspace& ws) {
  k = k0;
  pos[0] = t;
  posenc::dual_chunk_rotate_keys_inplace<float>(posenc::TensorView<float, 4>(k.data(), 1, 1, kKvHeads, kD),
                                                posenc::PositionIdsView(pos.data(), 1, 1), plan, t + 1, &ws);
}

}  // namespace

TEST_CASE("dual chunk attention: decode steps through a KvCache allocate nothing",
          "[dual_chunk][alloc]") {
  for (const std::int64_t l0 : {std::int64_t{0}, std::int64_t{4}}) {
    const posenc::DualChunkPlan plan = small_plan(l0);
    posenc::KvCache<float> cache(1, kSteps, kKvHeads, kD);
    posenc::DualChunkWorkspace ws;
    const auto k0 = posenc_test::random_vector<float>(static_cast<std::size_t>(kKvHeads * kD), 1);
    const auto v = posenc_test::random_vector<float>(k0.size(), 2);
    const auto q = posenc_test::random_vector<float>(static_cast<std::size_t>(kHeads * kD), 3);
    std::vector<float> k = k0, out(q.size());
    std::vector<std::int64_t> pos(1);
    long counted = 0;
    for (Eigen::Index t = 0; t < kSteps; ++t) {
      const long before = posenc_test::allocation_count();
      rotate_step(k, k0, pos, t, plan, ws);
      cache.append<float>(posenc::ConstTensorView<float, 4>(k.data(), 1, 1, kKvHeads, kD),
                          posenc::ConstTensorView<float, 4>(v.data(), 1, 1, kKvHeads, kD),
                          posenc::PositionIdsView(pos.data(), 1, 1));
      posenc::dual_chunk_attend<float>(cache, posenc::ConstTensorView<float, 4>(q.data(), 1, 1, kHeads, kD),
                                       posenc::TensorView<float, 4>(out.data(), 1, 1, kHeads, kD), plan, {}, &ws);
      // The first steps size the workspace (the kernel's tiles, each part's first call).
      if (t >= 2 * 8) counted += posenc_test::allocation_count() - before;
    }
    CAPTURE(l0);
    CHECK(counted == 0);
  }
}

TEST_CASE("dual chunk attention: decode steps through a page pool allocate nothing within a "
          "page", "[dual_chunk][alloc][paged]") {
  const posenc::DualChunkPlan plan = small_plan(0);
  posenc::PagedKvCache<float> pool(16, 4, kKvHeads, kD);
  posenc::DualChunkWorkspace ws;
  const auto s = pool.add_sequence();
  const auto k0 = posenc_test::random_vector<float>(static_cast<std::size_t>(kKvHeads * kD), 1);
  const auto v = posenc_test::random_vector<float>(k0.size(), 2);
  const auto q = posenc_test::random_vector<float>(static_cast<std::size_t>(kHeads * kD), 3);
  std::vector<float> k = k0, out(q.size());
  std::vector<std::int64_t> pos(1);
  const std::vector<posenc::PagedKvCache<float>::SequenceId> seqs{s};
  long counted = 0;
  for (Eigen::Index t = 0; t < kSteps; ++t) {
    const long before = posenc_test::allocation_count();
    rotate_step(k, k0, pos, t, plan, ws);
    pool.append<float>(s, posenc::ConstTensorView<float, 3>(k.data(), 1, kKvHeads, kD),
                       posenc::ConstTensorView<float, 3>(v.data(), 1, kKvHeads, kD));
    posenc::dual_chunk_attend<float>(pool, seqs, posenc::ConstTensorView<float, 4>(q.data(), 1, 1, kHeads, kD),
                                     posenc::TensorView<float, 4>(out.data(), 1, 1, kHeads, kD), plan, {}, &ws);
    // A step that opens a page grows the sequence's page list (documented for PagedKvCache).
    if (t >= 2 * 8 && t % 4 != 0) counted += posenc_test::allocation_count() - before;
  }
  CHECK(counted == 0);
}

TEST_CASE("dual chunk alloc: the counter sees allocations", "[dual_chunk][alloc]") {
  const long before = posenc_test::allocation_count();
  std::vector<int> v(100);
  v.push_back(1);
  CHECK(posenc_test::allocation_count() - before >= 2);
}
