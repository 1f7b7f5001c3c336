// The absolute-encoding hot paths never allocate once planned: this executable counts every
// operator new (tests/support/alloc_counter.hpp) around the calls.

#include <catch2/catch.hpp>

#include <posenc/learned.hpp>
#include <posenc/sinusoidal.hpp>

#include <cstdint>
#include <vector>

#include "support/alloc_counter.hpp"

TEST_CASE("absolute: planned sinusoidal add and table build allocate nothing", "[sinusoidal][alloc]") {
  const Eigen::Index batch = 2, seq = 70, d = 96;
  std::vector<float> emb(static_cast<std::size_t>(batch * seq * d), 0.5f);
  std::vector<std::int64_t> ids(static_cast<std::size_t>(batch * seq));
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<std::int64_t>(i % 50) * 3 / 2;
  std::vector<double> table(static_cast<std::size_t>(seq * d));
  for (const auto layout : {posenc::SinusoidalLayout::kInterleaved, posenc::SinusoidalLayout::kSinCos,
                            posenc::SinusoidalLayout::kCosSin,
                            posenc::SinusoidalLayout::kSinCosVaswani}) {
    posenc::SinusoidalParams params;
    params.layout = layout;
    const posenc::SinusoidalPlan plan(d, params);
    const long before = posenc_test::allocation_count();
    posenc::add_sinusoidal_inplace<float>(posenc::TensorView<float, 3>(emb.data(), batch, seq, d),
                                          posenc::PositionIdsView(ids.data(), batch, seq), plan);
    posenc::sinusoidal_table<double>(posenc::TensorView<double, 2>(table.data(), seq, d), plan, 12345);
    CHECK(posenc_test::allocation_count() == before);
  }
  // The counter is live: the convenience overload plans (allocates) per call.
  const long before = posenc_test::allocation_count();
  posenc::add_sinusoidal_inplace<float>(posenc::TensorView<float, 3>(emb.data(), batch, seq, d),
                                        posenc::PositionIdsView(ids.data(), batch, seq));
  CHECK(posenc_test::allocation_count() > before);
}

TEST_CASE("absolute: learned add and lookup allocate nothing", "[learned][alloc]") {
  const std::vector<float> weights(16 * 8, 0.25f);
  const auto table = posenc::LearnedPositionTable<float>::view(
      posenc::ConstTensorView<float, 2>(weights.data(), 16, 8));
  std::vector<float> emb(3 * 5 * 8, 1.0f);
  const std::vector<std::int64_t> ids{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14};
  const long before = posenc_test::allocation_count();
  table.add_inplace(posenc::TensorView<float, 3>(emb.data(), 3, 5, 8), posenc::PositionIdsView(ids.data(), 3, 5));
  table.lookup(posenc::PositionIdsView(ids.data(), 3, 5), posenc::TensorView<float, 3>(emb.data(), 3, 5, 8));
  CHECK(posenc_test::allocation_count() == before);
}
