// The 2-D relative position bias of Swin / BEiT windows. Expected values: index matrices worked
// by hand from Swin's Eq. 4 definition (offset of query patch minus key patch, row-major
// patches), patch coordinates decoded independently in the tests, BEiT's three class-token rows
// from the paper's description, bilinear resizing worked by hand (align_corners false), and
// attention written out in long double.

#include <catch2/catch.hpp>

#include <posenc/attention.hpp>
#include <posenc/reference/attention.hpp>
#include <posenc/relative_bias_2d.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <set>
#include <vector>

#include "support/attention_ld.hpp"
#include "support/rng.hpp"

using Catch::Matchers::Contains;
using posenc::RelativeBias2dWindow;

namespace {

using LD = long double;

/// Offsets (dy, dx) of patch a minus patch b in a window w patches wide, decoded by the test.
std::pair<Eigen::Index, Eigen::Index> offset(Eigen::Index a, Eigen::Index b, Eigen::Index w) {
  return {a / w - b / w, a % w - b % w};
}

}  // namespace

TEST_CASE("relative bias 2d: the 2 x 2 window worked by hand", "[relative_bias_2d]") {
  // Patches (0,0) (0,1) (1,0) (1,1); the 3 x 3 offset grid puts (dy, dx) at (dy + 1) 3 + dx + 1.
  const std::vector<std::vector<std::int64_t>> swin = {
      {4, 3, 1, 0}, {5, 4, 2, 1}, {7, 6, 4, 3}, {8, 7, 5, 4}};
  const RelativeBias2dWindow w{2, 2, false};
  CHECK(posenc::relative_bias_2d_tokens(w) == 4);
  CHECK(posenc::relative_bias_2d_table_rows(w) == 9);
  for (Eigen::Index i = 0; i < 4; ++i) {
    for (Eigen::Index j = 0; j < 4; ++j) {
      CHECK(posenc::relative_position_index_2d(w, i, j) == swin[i][j]);
    }
  }
  // BEiT: the class token first; its row reads row 9, its column row 10, itself row 11.
  const RelativeBias2dWindow beit{2, 2, true};
  CHECK(posenc::relative_bias_2d_tokens(beit) == 5);
  CHECK(posenc::relative_bias_2d_table_rows(beit) == 12);
  CHECK(posenc::relative_position_index_2d(beit, 0, 0) == 11);
  for (Eigen::Index t = 1; t < 5; ++t) {
    CHECK(posenc::relative_position_index_2d(beit, 0, t) == 9);
    CHECK(posenc::relative_position_index_2d(beit, t, 0) == 10);
    for (Eigen::Index u = 1; u < 5; ++u) {
      CHECK(posenc::relative_position_index_2d(beit, t, u) == swin[t - 1][u - 1]);
    }
  }
}

TEST_CASE("relative bias 2d: indices are the offsets' grid cells for any window",
          "[relative_bias_2d]") {
  // Swin-T's 7 x 7, BEiT-B/16's 14 x 14, and windows that are not square.
  for (const auto& [h, w] : std::vector<std::pair<Eigen::Index, Eigen::Index>>{
           {7, 7}, {14, 14}, {3, 5}, {5, 3}, {1, 4}, {1, 1}}) {
    const RelativeBias2dWindow win{h, w, false};
    const Eigen::Index n = h * w, cols = 2 * w - 1;
    CHECK(posenc::relative_bias_2d_table_rows(win) == (2 * h - 1) * (2 * w - 1));
    std::set<std::int64_t> seen;
    for (Eigen::Index i = 0; i < n; ++i) {
      for (Eigen::Index j = 0; j < n; ++j) {
        const std::int64_t idx = posenc::relative_position_index_2d(win, i, j);
        const auto [dy, dx] = offset(i, j, w);
        REQUIRE(idx / cols - (h - 1) == dy);
        REQUIRE(idx % cols - (w - 1) == dx);
        // (i, j) and (j, i) are opposite offsets: mirrored about the centre cell.
        REQUIRE(idx + posenc::relative_position_index_2d(win, j, i) ==
                2 * ((h - 1) * cols + w - 1));
        seen.insert(idx);
      }
    }
    // Every offset between two patches of the window occurs: the table has no unused row.
    CHECK(static_cast<Eigen::Index>(seen.size()) == (2 * h - 1) * (2 * w - 1));
  }
}

TEST_CASE("relative bias 2d: the materialised bias reads the table", "[relative_bias_2d]") {
  for (const bool cls : {false, true}) {
    const RelativeBias2dWindow win{3, 4, cls};
    const Eigen::Index rows = posenc::relative_bias_2d_table_rows(win), heads = 3;
    const Eigen::Index n = posenc::relative_bias_2d_tokens(win);
    // Row r, head h holds r + 1000 h + 0.25: the bias names its own row.
    std::vector<double> table(static_cast<std::size_t>(rows * heads));
    for (Eigen::Index r = 0; r < rows; ++r)
      for (Eigen::Index h = 0; h < heads; ++h)
        table[static_cast<std::size_t>(r * heads + h)] = r + 1000.0 * h + 0.25;
    std::vector<float> out(static_cast<std::size_t>(heads * n * n), -7.0f);
    posenc::relative_position_bias_2d<double>({table.data(), rows, heads}, win,
                                              {out.data(), 1, heads, n, n});
    for (Eigen::Index h = 0; h < heads; ++h) {
      for (Eigen::Index i = 0; i < n; ++i) {
        for (Eigen::Index j = 0; j < n; ++j) {
          std::int64_t r = 0;
          if (cls && i == 0) {
            r = j == 0 ? rows - 1 : rows - 3;
          } else if (cls && j == 0) {
            r = rows - 2;
          } else {
            const Eigen::Index a = i - (cls ? 1 : 0), b = j - (cls ? 1 : 0);
            const auto [dy, dx] = offset(a, b, 4);
            r = (dy + 2) * 7 + dx + 3;
          }
          REQUIRE(out[static_cast<std::size_t>((h * n + i) * n + j)] ==
                  static_cast<float>(r + 1000.0 * h + 0.25));
        }
      }
    }
  }
}

TEST_CASE("relative bias 2d: BEiT attention with the bias against long double",
          "[relative_bias_2d]") {
  // A 2 x 3 window plus class token (7 tokens), 2 heads of width 8, bidirectional.
  const RelativeBias2dWindow win{2, 3, true};
  const Eigen::Index n = 7, heads = 2, d = 8, rows = posenc::relative_bias_2d_table_rows(win);
  REQUIRE(rows == 3 * 5 + 3);
  const auto table = posenc_test::random_vector<float>(static_cast<std::size_t>(rows * heads), 11);
  std::vector<float> bias(static_cast<std::size_t>(heads * n * n));
  posenc::relative_position_bias_2d<float>({table.data(), rows, heads}, win,
                                           {bias.data(), 1, heads, n, n});
  const auto q = posenc_test::random_vector<float>(static_cast<std::size_t>(n * heads * d), 12);
  const auto k = posenc_test::random_vector<float>(static_cast<std::size_t>(n * heads * d), 13);
  const auto v = posenc_test::random_vector<float>(static_cast<std::size_t>(n * heads * d), 14);
  posenc::AttentionParams params;
  params.mask = posenc::MaskMode::kBidirectional;
  posenc::AttentionMetadata meta;
  meta.attention_bias = posenc::ConstTensorView<float, 4>(bias.data(), 1, heads, n, n);
  std::vector<float> fused(q.size()), ref(q.size());
  posenc::attention<float>({q.data(), 1, n, heads, d}, {k.data(), 1, n, heads, d},
                           {v.data(), 1, n, heads, d}, {fused.data(), 1, n, heads, d}, params,
                           meta);
  posenc::reference::attention<float>({q.data(), 1, n, heads, d}, {k.data(), 1, n, heads, d},
                                      {v.data(), 1, n, heads, d}, {ref.data(), 1, n, heads, d},
                                      params, meta);
  std::vector<Eigen::Index> keys(static_cast<std::size_t>(n));
  for (Eigen::Index j = 0; j < n; ++j) keys[static_cast<std::size_t>(j)] = j;
  for (Eigen::Index h = 0; h < heads; ++h) {
    for (Eigen::Index i = 0; i < n; ++i) {
      // The bias of (i, j) from the table by the test's own index: class rows, then offsets.
      std::vector<LD> b(static_cast<std::size_t>(n));
      for (Eigen::Index j = 0; j < n; ++j) {
        Eigen::Index r = 0;
        if (i == 0) {
          r = j == 0 ? 17 : 15;
        } else if (j == 0) {
          r = 16;
        } else {
          const auto [dy, dx] = offset(i - 1, j - 1, 3);
          r = (dy + 1) * 5 + dx + 2;
        }
        b[static_cast<std::size_t>(j)] = table[static_cast<std::size_t>(r * heads + h)];
      }
      const auto want =
          posenc_test::attend_ld(q.data() + (i * heads + h) * d, k.data() + h * d, v.data() + h * d,
                                 heads * d, d, keys, b, 1.0L / std::sqrt(static_cast<LD>(d)));
      for (Eigen::Index c = 0; c < d; ++c) {
        const auto at = static_cast<std::size_t>((i * heads + h) * d + c);
        REQUIRE(std::abs(fused[at] - want[static_cast<std::size_t>(c)]) < 2e-6L);
        REQUIRE(std::abs(ref[at] - want[static_cast<std::size_t>(c)]) < 1e-6L);
      }
    }
  }
}

TEST_CASE("relative bias 2d: resizing a BEiT table for another resolution", "[relative_bias_2d]") {
  // Trained on a 2 x 2 window (3 x 3 offsets), run on 3 x 3 (5 x 5). Bilinear, align_corners
  // false, 3 -> 5 samples x = (o + 0.5) 3 / 5 - 0.5 = -0.2 (clamped to 0), 0.4, 1, 1.6, 2.2
  // (past the last row: row 2), so a grid f(y, x) = 10 y + x becomes 10 Y + X with Y, X in
  // {0, 0.4, 1, 1.6, 2}.
  const RelativeBias2dWindow from{2, 2, true}, to{3, 3, true};
  const Eigen::Index heads = 2;
  std::vector<double> table(12 * heads);
  for (Eigen::Index r = 0; r < 9; ++r) {
    table[static_cast<std::size_t>(r * heads)] = 10.0 * (r / 3) + r % 3;
    table[static_cast<std::size_t>(r * heads + 1)] = -(10.0 * (r / 3) + r % 3);
  }
  for (Eigen::Index r = 9; r < 12; ++r) {
    table[static_cast<std::size_t>(r * heads)] = 100.0 + r;
    table[static_cast<std::size_t>(r * heads + 1)] = -100.0 - r;
  }
  std::vector<double> out(static_cast<std::size_t>(28 * heads), 0.0);
  posenc::resize_relative_position_bias_2d<double>({table.data(), 12, heads}, from,
                                                   {out.data(), 28, heads}, to);
  const double at[5] = {0.0, 0.4, 1.0, 1.6, 2.0};
  for (Eigen::Index y = 0; y < 5; ++y) {
    for (Eigen::Index x = 0; x < 5; ++x) {
      const double want = 10.0 * at[y] + at[x];
      CHECK(out[static_cast<std::size_t>((y * 5 + x) * heads)] == Approx(want).margin(1e-12));
      CHECK(out[static_cast<std::size_t>((y * 5 + x) * heads + 1)] == Approx(-want).margin(1e-12));
    }
  }
  for (Eigen::Index r = 0; r < 3; ++r) {  // the class rows, unchanged
    CHECK(out[static_cast<std::size_t>((25 + r) * heads)] == 109.0 + r);
    CHECK(out[static_cast<std::size_t>((25 + r) * heads + 1)] == -109.0 - r);
  }
  // The trained window itself: the same table, bit for bit (HF resamples to the same size).
  const auto f = posenc_test::random_vector<float>(12 * heads, 21);
  std::vector<float> same(f.size());
  posenc::resize_relative_position_bias_2d<float>({f.data(), 12, heads}, from,
                                                  {same.data(), 12, heads}, from);
  CHECK(same == f);
}

TEST_CASE("relative bias 2d: bad windows, tables and outputs are refused before writing",
          "[relative_bias_2d]") {
  const RelativeBias2dWindow win{2, 2, false};
  std::vector<float> table(9 * 2, 0.5f), out(2 * 4 * 4, -3.0f);
  const std::vector<float> before = out;
  const auto bias = [&](RelativeBias2dWindow w, Eigen::Index rows, Eigen::Index n) {
    posenc::relative_position_bias_2d<float>({table.data(), rows, 2}, w, {out.data(), 1, 2, n, n});
  };
  CHECK_THROWS_WITH(bias({0, 2, false}, 9, 4), Contains("window_h = 0"));
  CHECK_THROWS_WITH(bias({2, 40000, false}, 9, 4), Contains("window_w = 40000"));
  CHECK_THROWS_WITH(bias({2, 2, true}, 9, 4), Contains("must be [12, heads >= 1]"));
  CHECK_THROWS_WITH(bias(win, 9, 5), Contains("[1, heads, tokens, tokens] = [1, 2, 4, 4]"));
  table[7] = std::numeric_limits<float>::quiet_NaN();
  CHECK_THROWS_WITH(bias(win, 9, 4), Contains("table[3, 1] = nan must be finite"));
  table[7] = 0.5f;
  std::vector<double> wide(9 * 2, 0.5);
  wide[4] = 1e300;  // finite, but not a float
  CHECK_THROWS_WITH(
      posenc::relative_position_bias_2d<double>({wide.data(), 9, 2}, win, {out.data(), 1, 2, 4, 4}),
      Contains("table[2, 0] = 1.0000000000000001e+300 is outside float's range"));
  CHECK(out == before);
  CHECK_THROWS_AS(posenc::relative_position_index_2d(win, 4, 0), std::invalid_argument);
  CHECK_THROWS_WITH(posenc::relative_position_index_2d(win, 0, -1), Contains("key_token = -1"));
  std::vector<float> resized(25 * 2, -3.0f);
  const std::vector<float> resized_before = resized;
  CHECK_THROWS_WITH(posenc::resize_relative_position_bias_2d<float>(
                        {table.data(), 9, 2}, win, {resized.data(), 28, 2}, {3, 3, true}),
                    Contains("class_token"));
  CHECK_THROWS_WITH(posenc::resize_relative_position_bias_2d<float>(
                        {table.data(), 9, 2}, win, {resized.data(), 24, 2}, {3, 3, false}),
                    Contains("out shape [24, 2] must be [25, 2]"));
  CHECK(resized == resized_before);
}
