// Decomposed relative positions (MViTv2 Eq. 3; SAM / ViTDet). Expected values: table rows
// worked by hand from HF's get_rel_pos coordinates (equal grids, pooled keys, a ratio of 1.5),
// biases of a 2 x 2 grid by hand, torch's linear interpolation (align_corners false) by hand,
// and attention with the bias written out in long double.

#include <catch2/catch.hpp>

#include <posenc/attention.hpp>
#include <posenc/decomposed_rel_pos.hpp>

#include <cmath>
#include <vector>

#include "support/attention_ld.hpp"
#include "support/rng.hpp"

using Catch::Matchers::Contains;
using posenc::RelPosGrid;

namespace {

// The bias of one head of width 1 with q = 1, tables rh / rw.
std::vector<float> unit_bias(const RelPosGrid& g, const std::vector<float>& rh,
                             const std::vector<float>& rw) {
  const Eigen::Index n = g.q_h * g.q_w, keys = g.k_h * g.k_w;
  std::vector<float> q(static_cast<std::size_t>(n), 1.0f), out(static_cast<std::size_t>(n * keys));
  posenc::decomposed_rel_pos_bias<float, float>(
      posenc::ConstTensorView<float, 4>(q.data(), 1, n, 1, 1),
      posenc::ConstTensorView<float, 2>(rh.data(), static_cast<Eigen::Index>(rh.size()), 1),
      posenc::ConstTensorView<float, 2>(rw.data(), static_cast<Eigen::Index>(rw.size()), 1), g,
      posenc::TensorView<float, 4>(out.data(), 1, 1, n, keys));
  return out;
}

}  // namespace

TEST_CASE("decomposed rel pos: a 2 x 2 grid by hand", "[rel_pos]") {
  // R_h = [10, 20, 30], R_w = [1, 2, 3] (the middle rows are offset 0), q = 1:
  // B[(qy, qx), (ky, kx)] = R_h[qy - ky + 1] + R_w[qx - kx + 1].
  const std::vector<float> b = unit_bias({2, 2, 2, 2}, {10, 20, 30}, {1, 2, 3});
  const std::vector<float> expected = {22, 21, 12, 11,   // query (0, 0)
                                       23, 22, 13, 12,   // query (0, 1)
                                       32, 31, 22, 21,   // query (1, 0)
                                       33, 32, 23, 22};  // query (1, 1)
  CHECK(b == expected);
}

TEST_CASE("decomposed rel pos: table rows for pooled and unequal grids", "[rel_pos]") {
  // R_h[r] = r, R_w = 0: the bias is the row get_rel_pos picks.
  // q 4 x 1 against k 2 x 1 (keys pooled 2x, MViTv2): r = i - 2 j + 2, 7 rows.
  CHECK(posenc::rel_pos_table_rows(4, 2) == 7);
  std::vector<float> b = unit_bias({4, 1, 2, 1}, {0, 1, 2, 3, 4, 5, 6}, {0});
  CHECK(b == std::vector<float>{2, 0, 3, 1, 4, 2, 5, 3});
  // q 2 x 1 against k 4 x 1: r = 2 i - j + 3.
  b = unit_bias({2, 1, 4, 1}, {0, 1, 2, 3, 4, 5, 6}, {0});
  CHECK(b == std::vector<float>{3, 2, 1, 0, 5, 4, 3, 2});
  // q 3 x 1 against k 2 x 1: r = trunc(i - 1.5 j + 1.5), 5 rows.
  b = unit_bias({3, 1, 2, 1}, {0, 1, 2, 3, 4}, {0});
  CHECK(b == std::vector<float>{1, 0, 2, 1, 3, 2});
  // The same on the width axis (q 1 x 3, k 1 x 2).
  b = unit_bias({1, 3, 1, 2}, {0}, {0, 1, 2, 3, 4});
  CHECK(b == std::vector<float>{1, 0, 2, 1, 3, 2});
}

TEST_CASE("decomposed rel pos: resizing a table is torch's linear interpolation", "[rel_pos]") {
  // 3 rows -> 5: source (i + 0.5) 3 / 5 - 0.5 = -0.2 (clamped to 0), 0.4, 1, 1.6, 2.2 (-> 2).
  const std::vector<double> table = {0, 0, 1, 10, 2, 20};  // [3, 2]: column 1 is 10 x column 0
  std::vector<double> up(10), down(4);
  posenc::resize_rel_pos_table<double>(posenc::ConstTensorView<double, 2>(table.data(), 3, 2),
                                       posenc::TensorView<double, 2>(up.data(), 5, 2));
  const double expect_up[5] = {0.0, 0.4, 1.0, 1.6, 2.0};
  for (int i = 0; i < 5; ++i) {
    CHECK(up[static_cast<std::size_t>(2 * i)] == Approx(expect_up[i]).margin(1e-15));
    CHECK(up[static_cast<std::size_t>(2 * i + 1)] == Approx(10 * expect_up[i]).margin(1e-14));
  }
  // 3 rows -> 2: (i + 0.5) 1.5 - 0.5 = 0.25, 1.75.
  posenc::resize_rel_pos_table<double>(posenc::ConstTensorView<double, 2>(table.data(), 3, 2),
                                       posenc::TensorView<double, 2>(down.data(), 2, 2));
  CHECK(down[0] == Approx(0.25).margin(1e-15));
  CHECK(down[2] == Approx(1.75).margin(1e-15));
  CHECK(down[3] == Approx(17.5).margin(1e-14));
}

TEST_CASE("decomposed rel pos: attention with the bias against long double, and query chunks",
          "[rel_pos]") {
  // Two images of a 3 x 4 grid, 3 heads of 8, bidirectional: softmax(q.k / sqrt(8) + q.R_h +
  // q.R_w) v with the tables read at qy - ky + 2 and qx - kx + 3.
  posenc_test::SplitMix64 rng(9);
  const Eigen::Index b = 2, gh = 3, gw = 4, n = gh * gw, heads = 3, d = 8;
  std::vector<float> q(static_cast<std::size_t>(b * n * heads * d)), k(q.size()), v(q.size());
  std::vector<Eigen::bfloat16> rh(5 * d), rw(7 * d);
  for (auto* x : {&q, &k, &v}) {
    for (auto& e : *x) e = static_cast<float>(rng.uniform());
  }
  for (auto* x : {&rh, &rw}) {
    for (auto& e : *x) e = Eigen::bfloat16(static_cast<float>(rng.uniform()));
  }
  const RelPosGrid g{gh, gw, gh, gw};
  std::vector<float> bias(static_cast<std::size_t>(b * heads * n * n)), out(q.size());
  const posenc::ConstTensorView<Eigen::bfloat16, 2> th(rh.data(), 5, d), tw(rw.data(), 7, d);
  posenc::decomposed_rel_pos_bias<float, Eigen::bfloat16>(
      posenc::ConstTensorView<float, 4>(q.data(), b, n, heads, d), th, tw, g,
      posenc::TensorView<float, 4>(bias.data(), b, heads, n, n));
  posenc::AttentionParams params;
  params.mask = posenc::MaskMode::kBidirectional;
  posenc::AttentionMetadata meta;
  meta.attention_bias.emplace(bias.data(), b, heads, n, n);
  posenc::attention<float>(posenc::ConstTensorView<float, 4>(q.data(), b, n, heads, d),
                           posenc::ConstTensorView<float, 4>(k.data(), b, n, heads, d),
                           posenc::ConstTensorView<float, 4>(v.data(), b, n, heads, d),
                           posenc::TensorView<float, 4>(out.data(), b, n, heads, d), params, meta);
  std::vector<Eigen::Index> keys(static_cast<std::size_t>(n));
  for (Eigen::Index j = 0; j < n; ++j) keys[static_cast<std::size_t>(j)] = j;
  for (Eigen::Index img = 0; img < b; ++img) {
    for (Eigen::Index h = 0; h < heads; ++h) {
      for (Eigen::Index i = 0; i < n; ++i) {
        const float* qi = &q[static_cast<std::size_t>(((img * n + i) * heads + h) * d)];
        std::vector<long double> kb;
        for (Eigen::Index j = 0; j < n; ++j) {
          long double s = 0.0L;
          for (Eigen::Index c = 0; c < d; ++c) {
            s += static_cast<long double>(qi[c]) *
                 static_cast<float>(rh[static_cast<std::size_t>((i / gw - j / gw + 2) * d + c)]);
            s += static_cast<long double>(qi[c]) *
                 static_cast<float>(rw[static_cast<std::size_t>((i % gw - j % gw + 3) * d + c)]);
          }
          kb.push_back(s);
          REQUIRE(
              std::fabs(static_cast<long double>(
                            bias[static_cast<std::size_t>(((img * heads + h) * n + i) * n + j)]) -
                        s) < 2e-6L);
        }
        const auto ref = posenc_test::attend_ld(
            qi, &k[static_cast<std::size_t>((img * n * heads + h) * d)],
            &v[static_cast<std::size_t>((img * n * heads + h) * d)], heads * d, d, keys, kb,
            1.0L / std::sqrt(static_cast<long double>(d)));
        for (Eigen::Index c = 0; c < d; ++c) {
          REQUIRE(std::fabs(out[static_cast<std::size_t>(((img * n + i) * heads + h) * d + c)] -
                            ref[static_cast<std::size_t>(c)]) < 2e-5L);
        }
      }
    }
  }
  // Query rows 5..9 alone (a chunk of a global layer): the same rows, bit for bit.
  std::vector<float> chunk(static_cast<std::size_t>(b * heads * 5 * n));
  std::vector<float> qc(static_cast<std::size_t>(b * 5 * heads * d));
  for (Eigen::Index img = 0; img < b; ++img) {
    std::copy_n(&q[static_cast<std::size_t>((img * n + 5) * heads * d)], 5 * heads * d,
                &qc[static_cast<std::size_t>(img * 5 * heads * d)]);
  }
  posenc::decomposed_rel_pos_bias<float, Eigen::bfloat16>(
      posenc::ConstTensorView<float, 4>(qc.data(), b, 5, heads, d), th, tw, g,
      posenc::TensorView<float, 4>(chunk.data(), b, heads, 5, n), 5);
  for (Eigen::Index img = 0; img < b; ++img) {
    for (Eigen::Index h = 0; h < heads; ++h) {
      for (Eigen::Index t = 0; t < 5; ++t) {
        for (Eigen::Index j = 0; j < n; ++j) {
          REQUIRE(chunk[static_cast<std::size_t>(((img * heads + h) * 5 + t) * n + j)] ==
                  bias[static_cast<std::size_t>(((img * heads + h) * n + t + 5) * n + j)]);
        }
      }
    }
  }
}

TEST_CASE("decomposed rel pos: bad grids, tables and rows are refused before writing",
          "[rel_pos]") {
  std::vector<float> q(12, 1.0f), rh(5, 0.5f), rw(7, 0.5f), out(144, 3.0f);
  const auto call = [&](RelPosGrid g, Eigen::Index rows, Eigen::Index rh_rows, Eigen::Index rw_rows,
                        Eigen::Index out_keys, Eigen::Index offset) {
    posenc::decomposed_rel_pos_bias<float, float>(
        posenc::ConstTensorView<float, 4>(q.data(), 1, rows, 1, 1),
        posenc::ConstTensorView<float, 2>(rh.data(), rh_rows, 1),
        posenc::ConstTensorView<float, 2>(rw.data(), rw_rows, 1), g,
        posenc::TensorView<float, 4>(out.data(), 1, 1, rows, out_keys), offset);
  };
  CHECK_THROWS_WITH(call({0, 4, 3, 4}, 12, 5, 7, 12, 0),
                    Contains("every side must be in [1, 2^15]"));
  CHECK_THROWS_WITH(
      call({3, 4, 3, 4}, 12, 4, 7, 12, 0),
      Contains("rel_pos_h shape [4, 1] must be [2 max(q_h, k_h) - 1, head_dim] = [5, 1]"));
  CHECK_THROWS_WITH(call({3, 4, 3, 4}, 12, 5, 5, 12, 0), Contains("rel_pos_w shape [5, 1]"));
  CHECK_THROWS_WITH(call({3, 4, 3, 4}, 12, 5, 7, 11, 0),
                    Contains("must be [batch, heads, query rows, k_h k_w] = [1, 1, 12, 12]"));
  CHECK_THROWS_WITH(call({3, 4, 3, 4}, 6, 5, 7, 12, 7),
                    Contains("query rows [7, 7 + 6) must lie in the 3 x 4 grid's 12 tokens"));
  CHECK_THROWS_WITH(call({3, 4, 3, 4}, 6, 5, 7, 12, -1), Contains("query rows [-1"));
  rw[3] = NAN;
  CHECK_THROWS_WITH(call({3, 4, 3, 4}, 12, 5, 7, 12, 0),
                    Contains("rel_pos_w[3, 0] = nan must be finite"));
  for (const float e : out) CHECK(e == 3.0f);
  CHECK_THROWS_WITH(posenc::rel_pos_table_rows(0, 4), Contains("q_size = 0"));
  std::vector<float> small(3);
  CHECK_THROWS_WITH(
      posenc::resize_rel_pos_table<float>(posenc::ConstTensorView<float, 2>(rh.data(), 5, 1),
                                          posenc::TensorView<float, 2>(small.data(), 1, 3)),
      Contains("out shape [1, 3] must be [rows >= 1, head_dim = 1]"));
}
