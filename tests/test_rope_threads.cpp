// RoPE on a caller's Eigen::ThreadPoolDevice: same results as the single-threaded call. This
// translation unit defines EIGEN_USE_THREADS before any include, as a threaded user must.

#define EIGEN_USE_THREADS
#include <catch2/catch.hpp>

#include <posenc/mrope.hpp>
#include <posenc/reference/rope.hpp>
#include <posenc/rope.hpp>

#include <cstdint>
#include <cstring>
#include <vector>

#include "support/check.hpp"
#include "support/rng.hpp"

TEST_CASE("rope: two threads give the single-threaded result", "[rope][threads]") {
  Eigen::ThreadPool pool(2);
  Eigen::ThreadPoolDevice device(&pool, 2);
  const Eigen::Index B = 3, S = 257, Hq = 8, Hk = 2, D = 64;
  posenc::RopeParams params;
  params.head_dim = D;
  const auto freqs = posenc::compute_rope_frequencies(params);
  const auto cache = posenc::make_rope_cos_sin_cache(freqs, S + 8);
  const posenc::ConstTensorView<float, 2> cview(cache.data(), cache.dimension(0), cache.dimension(1));
  const auto q0 = posenc_test::random_vector<float>(static_cast<std::size_t>(B * S * Hq * D), 3);
  const auto k0 = posenc_test::random_vector<float>(static_cast<std::size_t>(B * S * Hk * D), 4);
  const auto positions = posenc::RopePositions::contiguous(B, S, 7);
  posenc::RopeApplyOptions threaded;
  threaded.set_device(device);
  for (const auto layout : {posenc::RopeLayout::kHalfSplit, posenc::RopeLayout::kInterleaved}) {
    auto q1 = q0, k1 = k0, q2 = q0, k2 = k0, q3 = q0, k3 = k0, q4 = q0, k4 = k0;
    const auto heads = [&](std::vector<float>& v, Eigen::Index h) {
      return posenc::rope_heads<float>(posenc::TensorView<float, 4>(v.data(), B, S, h, D));
    };
    posenc::apply_rope_qk_inplace<float>(heads(q1, Hq), heads(k1, Hk), positions, freqs, layout);
    posenc::apply_rope_qk_inplace<float>(heads(q2, Hq), heads(k2, Hk), positions, freqs, layout, threaded);
    // Chunk boundaries move the exact anchors of the recurrence: equal to rounding.
    POSENC_REQUIRE_CLOSE(posenc_test::compare(
        q1.size(), [&](std::size_t i) { return q2[i]; }, [&](std::size_t i) { return q1[i]; }, 1e-6));
    POSENC_REQUIRE_CLOSE(posenc_test::compare(
        k1.size(), [&](std::size_t i) { return k2[i]; }, [&](std::size_t i) { return k1[i]; }, 1e-6));
    // From a cache the values are the same bits whatever the split.
    posenc::apply_rope_qk_inplace_cached<float>(heads(q3, Hq), heads(k3, Hk), positions, cview, layout);
    posenc::apply_rope_qk_inplace_cached<float>(heads(q4, Hq), heads(k4, Hk), positions, cview, layout, 0, threaded);
    REQUIRE(std::memcmp(q3.data(), q4.data(), q3.size() * sizeof(float)) == 0);
    REQUIRE(std::memcmp(k3.data(), k4.data(), k3.size() * sizeof(float)) == 0);
    // And against the long-double reference.
    std::vector<std::int64_t> pos(static_cast<std::size_t>(B * S));
    for (Eigen::Index b = 0; b < B; ++b)
      for (Eigen::Index s = 0; s < S; ++s) pos[static_cast<std::size_t>(b * S + s)] = s + 7;
    const auto expect = posenc::reference::apply_rope(q0.data(), B, S, Hq, D, posenc::HeadLayout::kBSHD, pos.data(),
                                                      posenc::reference::rope_frequencies(params).inv_freq, 1.0L, 0, layout);
    POSENC_REQUIRE_CLOSE(posenc_test::compare(
        q2.size(), [&](std::size_t i) { return q2[i]; }, [&](std::size_t i) { return static_cast<double>(expect[i]); }, 2e-6));
  }
}

TEST_CASE("rope: SBHD views and M-RoPE from a cache on two threads give the single-threaded bits", "[rope][threads][mrope]") {
  // Cache-based calls read the same cos / sin rows whatever the split, and the SBHD walk is
  // seq-major on every thread: the results must be bit-identical.
  Eigen::ThreadPool pool(2);
  Eigen::ThreadPoolDevice device(&pool, 2);
  const Eigen::Index B = 3, S = 129, H = 4, D = 64;
  posenc::RopeParams params;
  params.head_dim = D;
  const auto freqs = posenc::compute_rope_frequencies(params);
  const auto cache = posenc::make_rope_cos_sin_cache(freqs, S + 8);
  const posenc::ConstTensorView<float, 2> cview(cache.data(), cache.dimension(0), cache.dimension(1));
  posenc::RopeApplyOptions threaded;
  threaded.set_device(device);
  const auto x0 = posenc_test::random_vector<float>(static_cast<std::size_t>(S * B * H * D), 5);
  auto a = x0, b = x0;
  const auto sbhd = [&](std::vector<float>& v) {
    return posenc::rope_heads<float>(posenc::TensorView<float, 4>(v.data(), S, B, H, D), posenc::HeadLayout::kSBHD);
  };
  const auto positions = posenc::RopePositions::contiguous(B, S, 3);
  posenc::apply_rope_inplace_cached<float>(sbhd(a), positions, cview, posenc::RopeLayout::kHalfSplit);
  posenc::apply_rope_inplace_cached<float>(sbhd(b), positions, cview, posenc::RopeLayout::kHalfSplit, 0, threaded);
  REQUIRE(a == b);
  REQUIRE(a != x0);

  std::vector<std::int64_t> mpos(static_cast<std::size_t>(3 * B * S));
  for (std::size_t i = 0; i < mpos.size(); ++i) mpos[i] = static_cast<std::int64_t>((i * 13) % (S + 8));
  const posenc::MRopePositionsView mview(mpos.data(), 3, B, S);
  posenc::MRopeSections sec;
  sec.section = {8, 12, 12};
  auto c = x0, d = x0;
  const auto bshd = [&](std::vector<float>& v) {
    return posenc::rope_heads<float>(posenc::TensorView<float, 4>(v.data(), B, S, H, D));
  };
  posenc::apply_mrope_inplace_cached<float>(bshd(c), mview, cview, posenc::RopeLayout::kHalfSplit, sec);
  posenc::apply_mrope_inplace_cached<float>(bshd(d), mview, cview, posenc::RopeLayout::kHalfSplit, sec, 0, threaded);
  REQUIRE(c == d);
  REQUIRE(c != x0);
}
