// Swin-v2's log-spaced continuous position bias. Expected values: the paper's coordinate map
// (8 d / (P - 1), then sign(u) log2(1 + |u|) / log2 8) evaluated in long double at chosen
// offsets, MLPs small enough to work by hand (16 sigmoid(0) = 8), and the MLP written out in
// long double for random weights, read through the patches' own offsets.

#include <catch2/catch.hpp>

#include <posenc/continuous_position_bias.hpp>
#include <posenc/relative_bias_2d.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

#include "support/rng.hpp"

using Catch::Matchers::Contains;
using posenc::ContinuousBias2dWindow;

namespace {

using LD = long double;

LD log_spaced(LD d, LD divisor) {
  const LD u = 8.0L * d / divisor;
  return (u < 0 ? -1.0L : 1.0L) * std::log2(1.0L + std::fabs(u)) / std::log2(8.0L);
}

std::vector<double> coords(const ContinuousBias2dWindow& w) {
  const Eigen::Index rows = (2 * w.window_h - 1) * (2 * w.window_w - 1);
  std::vector<double> c(static_cast<std::size_t>(rows * 2), -9.0);
  posenc::log_spaced_relative_coords_2d(w, posenc::TensorView<double, 2>(c.data(), rows, 2));
  return c;
}

}  // namespace

TEST_CASE("continuous position bias: log-spaced coordinates", "[swin][cpb]") {
  // Swin-v2 window 8 from scratch: an offset of 7 maps to 8, log2(9) / 3 = 1.05664.
  const ContinuousBias2dWindow w8{8, 8, 0, 0};
  const std::vector<double> c = coords(w8);
  REQUIRE(c.size() == 225 * 2);
  const auto at = [&](Eigen::Index dy, Eigen::Index dx, int axis) {
    return c[static_cast<std::size_t>(((dy + 7) * 15 + dx + 7) * 2 + axis)];
  };
  CHECK(at(0, 0, 0) == 0.0);
  CHECK(at(0, 0, 1) == 0.0);
  CHECK(std::abs(at(7, 0, 0) - 1.0566416671474375) < 1e-15);  // log2(9) / 3
  CHECK(at(-7, 0, 0) == -at(7, 0, 0));
  for (Eigen::Index dy = -7; dy <= 7; ++dy) {
    for (Eigen::Index dx = -7; dx <= 7; ++dx) {
      REQUIRE(std::abs(at(dy, dx, 0) - static_cast<double>(log_spaced(dy, 7))) < 1e-15);
      REQUIRE(std::abs(at(dy, dx, 1) - static_cast<double>(log_spaced(dx, 7))) < 1e-15);
    }
  }
  // Fine-tuned at window 24 from a window-12 model (pretrained_window_sizes 12): offsets are
  // divided by 11, so the largest (23) reaches 8 23 / 11 = 16.727 -> log2(17.727) / 3 = 1.382633.
  const ContinuousBias2dWindow w24{24, 24, 12, 12};
  const std::vector<double> c24 = coords(w24);
  CHECK(std::abs(c24[0] - static_cast<double>(log_spaced(-23, 11))) < 1e-15);
  CHECK(std::abs(c24[0] + 1.3826329) < 1e-6);
  // A non-square window normalises each axis by its own size; a window of 1 stays at 0.
  const std::vector<double> c35 = coords({3, 5, 0, 0});
  CHECK(std::abs(c35[0] - static_cast<double>(log_spaced(-2, 2))) < 1e-15);  // dy = -2 of 3
  CHECK(std::abs(c35[1] - static_cast<double>(log_spaced(-4, 4))) < 1e-15);  // dx = -4 of 5
  const std::vector<double> c1 = coords({1, 2, 0, 0});
  REQUIRE(c1.size() == 6);
  CHECK((c1[0] == 0.0 && c1[2] == 0.0 && c1[4] == 0.0));
  CHECK(std::abs(c1[1] + 1.0566416671474375) < 1e-15);  // dx = -1 of a width of 2: u = -8
}

TEST_CASE("continuous position bias: one hidden unit by hand", "[swin][cpb]") {
  // W1 = [1, 0], b1 = 0, W2 = [[1], [-2]]: head 0 = 16 sigmoid(relu(u)), head 1 = 16
  // sigmoid(-2 relu(u)). dy <= 0 gives 16 sigmoid(0) = 8 exactly for both heads.
  const std::vector<float> w1 = {1.0f, 0.0f}, b1 = {0.0f}, w2 = {1.0f, -2.0f};
  const ContinuousBias2dWindow win{8, 8, 0, 0};
  std::vector<float> table(225 * 2);
  posenc::continuous_position_bias_table<float>(posenc::ConstTensorView<float, 2>(w1.data(), 1, 2),
                                                posenc::ConstTensorView<float, 1>(b1.data(), 1),
                                                posenc::ConstTensorView<float, 2>(w2.data(), 2, 1),
                                                win,
                                                posenc::TensorView<float, 2>(table.data(), 225, 2));
  for (Eigen::Index dy = -7; dy <= 7; ++dy) {
    const LD u = dy > 0 ? log_spaced(dy, 7) : 0.0L;
    for (Eigen::Index dx = -7; dx <= 7; ++dx) {
      const std::size_t r = static_cast<std::size_t>((dy + 7) * 15 + dx + 7);
      REQUIRE(table[r * 2] == static_cast<float>(16.0L / (1.0L + std::exp(-u))));
      REQUIRE(table[r * 2 + 1] == static_cast<float>(16.0L / (1.0L + std::exp(2.0L * u))));
      if (dy <= 0) REQUIRE((table[r * 2] == 8.0f && table[r * 2 + 1] == 8.0f));
    }
  }
}

TEST_CASE("continuous position bias: random MLP against long double, through the bias",
          "[swin][cpb]") {
  // Swin-v2's MLP (hidden 512) for a 6 x 4 window pretrained at 8 x 8, 3 heads; weights stored
  // in bfloat16 as a bf16 checkpoint would hold them. The bias of patches i, j must be the MLP
  // at the patches' own offset.
  posenc_test::SplitMix64 rng(3);
  const Eigen::Index hidden = 512, heads = 3, wh = 6, ww = 4, rows = 11 * 7;
  std::vector<Eigen::bfloat16> w1(hidden * 2), b1(hidden), w2(heads * hidden);
  for (auto* v : {&w1, &b1, &w2}) {
    for (auto& e : *v) e = Eigen::bfloat16(static_cast<float>(rng.uniform() * 0.5));
  }
  const ContinuousBias2dWindow win{wh, ww, 8, 8};
  std::vector<float> table(static_cast<std::size_t>(rows * heads));
  posenc::continuous_position_bias_table<Eigen::bfloat16>(
      posenc::ConstTensorView<Eigen::bfloat16, 2>(w1.data(), hidden, 2),
      posenc::ConstTensorView<Eigen::bfloat16, 1>(b1.data(), hidden),
      posenc::ConstTensorView<Eigen::bfloat16, 2>(w2.data(), heads, hidden), win,
      posenc::TensorView<float, 2>(table.data(), rows, heads));
  const Eigen::Index n = wh * ww;
  std::vector<float> bias(static_cast<std::size_t>(heads * n * n));
  posenc::relative_position_bias_2d<float>(
      posenc::ConstTensorView<float, 2>(table.data(), rows, heads), {wh, ww, false},
      posenc::TensorView<float, 4>(bias.data(), 1, heads, n, n));
  const auto f = [](Eigen::bfloat16 x) { return static_cast<LD>(static_cast<float>(x)); };
  for (Eigen::Index i = 0; i < n; ++i) {
    for (Eigen::Index j = 0; j < n; ++j) {
      const LD u = log_spaced(i / ww - j / ww, 7), v = log_spaced(i % ww - j % ww, 7);
      for (Eigen::Index h = 0; h < heads; ++h) {
        LD g = 0.0L;
        for (Eigen::Index k = 0; k < hidden; ++k) {
          const LD a = f(w1[static_cast<std::size_t>(2 * k)]) * u +
                       f(w1[static_cast<std::size_t>(2 * k + 1)]) * v +
                       f(b1[static_cast<std::size_t>(k)]);
          if (a > 0) g += f(w2[static_cast<std::size_t>(h * hidden + k)]) * a;
        }
        const LD expected = 16.0L / (1.0L + std::exp(-g));
        const float got = bias[static_cast<std::size_t>((h * n + i) * n + j)];
        REQUIRE(std::fabs(static_cast<LD>(got) - expected) <= 1e-6L * expected);
        REQUIRE((got > 0.0f && got < 16.0f));
      }
    }
  }
}

TEST_CASE("continuous position bias: bad windows, weights and shapes are refused before writing",
          "[swin][cpb]") {
  std::vector<double> c(9 * 2, 4.0);
  const auto coords_of = [&](ContinuousBias2dWindow w, Eigen::Index rows) {
    posenc::log_spaced_relative_coords_2d(w, posenc::TensorView<double, 2>(c.data(), rows, 2));
  };
  CHECK_THROWS_WITH(coords_of({0, 2, 0, 0}, 9), Contains("window_h = 0"));
  CHECK_THROWS_WITH(coords_of({2, 2, 1, 1}, 9), Contains("pretrained_window_h = 1"));
  CHECK_THROWS_WITH(coords_of({2, 2, 8, 0}, 9),
                    Contains("must both be 0 (none) or both in [2, 2^15]"));
  CHECK_THROWS_WITH(coords_of({2, 2, 0, 0}, 8), Contains("out shape [8, 2] must be [9, 2]"));
  for (const double e : c) CHECK(e == 4.0);

  std::vector<float> w1(8, 0.1f), b1(4, 0.1f), w2(12, 0.1f), out(9 * 3, 4.0f);
  const auto table = [&](Eigen::Index hidden, Eigen::Index b1_len, Eigen::Index heads,
                         Eigen::Index w2_cols, Eigen::Index out_rows, Eigen::Index out_heads) {
    posenc::continuous_position_bias_table<float>(
        posenc::ConstTensorView<float, 2>(w1.data(), hidden, 2),
        posenc::ConstTensorView<float, 1>(b1.data(), b1_len),
        posenc::ConstTensorView<float, 2>(w2.data(), heads, w2_cols), {2, 2, 0, 0},
        posenc::TensorView<float, 2>(out.data(), out_rows, out_heads));
  };
  CHECK_THROWS_WITH(table(4, 3, 3, 4, 9, 3), Contains("fc1_bias length 3 must be hidden = 4"));
  CHECK_THROWS_WITH(table(4, 4, 3, 3, 9, 3),
                    Contains("fc2_weight shape [3, 3] must be [heads >= 1, hidden = 4]"));
  CHECK_THROWS_WITH(table(4, 4, 3, 4, 9, 2), Contains("out shape [9, 2] must be [9, 3]"));
  CHECK_THROWS_WITH(table(0, 0, 3, 0, 9, 3),
                    Contains("fc1_weight shape [0, 2] must be [hidden >= 1, 2]"));
  w2[7] = NAN;
  CHECK_THROWS_WITH(table(4, 4, 3, 4, 9, 3), Contains("fc2_weight[7] = nan must be finite"));
  for (const float e : out) CHECK(e == 4.0f);
  // W1 = 0, b1 = 0.5, W2 = 0.25: every offset gives 16 sigmoid(4 x 0.25 x 0.5).
  std::fill(w1.begin(), w1.end(), 0.0f);
  std::fill(b1.begin(), b1.end(), 0.5f);
  std::fill(w2.begin(), w2.end(), 0.25f);
  table(4, 4, 3, 4, 9, 3);
  for (const float e : out) CHECK(e == static_cast<float>(16.0 / (1.0 + std::exp(-0.5))));
}
