// The absolute-encoding hot paths never allocate once planned: this executable counts every
// operator new (tests/support/alloc_counter.hpp) around the calls.

#include <catch2/catch.hpp>

#include <posenc/learned.hpp>
#include <posenc/sincos_grid.hpp>
#include <posenc/sine_embedding_2d.hpp>
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

TEST_CASE("absolute: planned sin-cos grid table and add allocate nothing", "[sincos_grid][alloc]") {
  const posenc::SincosGridPlan plan(posenc::sincos_grid_cogvideox(64, 3, 4, 5, 1.875));
  std::vector<float> table(static_cast<std::size_t>(plan.tokens() * plan.dim()));
  std::vector<Eigen::bfloat16> x(static_cast<std::size_t>(2 * plan.tokens() * plan.dim()));
  const long before = posenc_test::allocation_count();
  posenc::sincos_grid_table<float>(
      posenc::TensorView<float, 2>(table.data(), plan.tokens(), plan.dim()), plan);
  posenc::add_sincos_grid_inplace<Eigen::bfloat16>(
      posenc::TensorView<Eigen::bfloat16, 3>(x.data(), 2, plan.tokens(), plan.dim()), plan);
  CHECK(posenc_test::allocation_count() == before);
  // The calls ran: token 0's time block is cos 0 = 1 from channel 8; token 1 (column 1) starts
  // its column block (channel 16) with sin(1 / 1.875) = 0.508; x got the same values.
  CHECK(table[8] == 1.0f);
  CHECK_THAT(table[static_cast<std::size_t>(plan.dim() + 16)],
             Catch::Matchers::WithinAbs(0.5084, 1e-4));
  CHECK(static_cast<float>(x[static_cast<std::size_t>(plan.dim() + 16)]) ==
        static_cast<float>(Eigen::bfloat16(table[static_cast<std::size_t>(plan.dim() + 16)])));
}

TEST_CASE("absolute: planned DETR sine embeddings allocate nothing", "[sine_2d][alloc]") {
  const Eigen::Index batch = 2, h = 9, w = 13;
  std::vector<std::uint8_t> mask(static_cast<std::size_t>(batch * h * w), 1);
  for (Eigen::Index j = 10; j < w; ++j) mask[static_cast<std::size_t>(4 * w + j)] = 0;
  posenc::SineEmbedding2dParams params;
  params.num_pos_feats = 32;
  const posenc::SineEmbedding2dPlan plan(params);
  std::vector<float> out(static_cast<std::size_t>(batch * h * w * plan.dim()));
  std::vector<float> boxes(300 * 4, 0.25f), query_pos(300 * 4 * 128);
  const long before = posenc_test::allocation_count();
  posenc::sine_embedding_2d<float>(
      posenc::ConstTensorView<std::uint8_t, 3>(mask.data(), batch, h, w),
      posenc::TensorView<float, 4>(out.data(), batch, h, w, plan.dim()), plan);
  // The decoder's query coordinates: frequency by frequency, nothing stored.
  posenc::coordinate_sine_embedding<float>(
      posenc::ConstTensorView<float, 2>(boxes.data(), 300, 4),
      posenc::TensorView<float, 2>(query_pos.data(), 300, 4 * 128));
  CHECK(posenc_test::allocation_count() == before);
  // The counter is live: the convenience overload plans (allocates) per call.
  posenc::sine_embedding_2d<float>(
      posenc::ConstTensorView<std::uint8_t, 3>(mask.data(), batch, h, w),
      posenc::TensorView<float, 4>(out.data(), batch, h, w, plan.dim()), params);
  CHECK(posenc_test::allocation_count() > before);
}
