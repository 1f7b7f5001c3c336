// Fixed sin-cos grid embeddings (MAE / DiT, diffusers' PixArt / SD3, CogVideoX).
// Expected values: rows written out by hand from MAE's get_2d_sincos_pos_embed (np.meshgrid
// (grid_w, grid_h): the column's block first), diffusers' coordinates i / (n / base_size) /
// interpolation_scale, CogVideoX's [time | column | row] split, with the sines and cosines as
// literals (Python's math module); and every element of random grids against the long-double
// reference (posenc/reference/sincos_grid.hpp), which decodes each token by division.

#include <catch2/catch.hpp>

#include <posenc/reference/sincos_grid.hpp>
#include <posenc/sincos_grid.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "support/rng.hpp"

using Catch::Matchers::Contains;
using Catch::Matchers::WithinAbs;
using posenc::SincosGridParams;
using posenc::SincosGridPlan;

namespace {

template <typename T>
std::vector<T> table(const SincosGridParams& params) {
  const SincosGridPlan plan(params);
  std::vector<T> out(static_cast<std::size_t>(plan.tokens() * plan.dim()), T(7.0f));
  posenc::sincos_grid_table<T>(posenc::TensorView<T, 2>(out.data(), plan.tokens(), plan.dim()),
                               plan);
  return out;
}

void check_row(const std::vector<double>& t, Eigen::Index dim, Eigen::Index row,
               const std::vector<double>& expected) {
  REQUIRE(static_cast<Eigen::Index>(expected.size()) == dim);
  for (Eigen::Index c = 0; c < dim; ++c) {
    CAPTURE(row, c);
    CHECK_THAT(t[static_cast<std::size_t>(row * dim + c)],
               WithinAbs(expected[static_cast<std::size_t>(c)], 1e-15));
  }
}

/// Every element within one rounding to T of the long-double value (half an ulp of T, passed
/// as `rounding` relative to |v|) plus the double angle's error.
template <typename T>
void check_against_reference(const SincosGridParams& params, double rounding) {
  const SincosGridPlan plan(params);
  const auto t = table<T>(params);
  // The double angle's own error: the coordinate's, the frequency's and the product's
  // roundings, a few ulps of the largest angle.
  double angle = 0.0;
  for (const auto& block : params.blocks) {
    const auto& axis = params.axes[static_cast<std::size_t>(block.axis)];
    const double m = static_cast<double>(block.width / 2);
    const double w_max = std::max(1.0, std::pow(params.base, -(m - 1.0) / m));
    angle = std::max(angle, static_cast<double>(axis.first + axis.size - 1) * axis.scale * w_max);
  }
  for (Eigen::Index r = 0; r < plan.tokens(); ++r) {
    for (Eigen::Index c = 0; c < plan.dim(); ++c) {
      const long double ref = posenc::reference::sincos_grid_value(params, r, c);
      const double got = static_cast<double>(t[static_cast<std::size_t>(r * plan.dim() + c)]);
      // Half the spacing of T's subnormals: a tiny value rounds absolutely, not relatively.
      const double tol = rounding * std::fabs(static_cast<double>(ref)) + 0x1p-51 * angle +
                         static_cast<double>(std::numeric_limits<T>::denorm_min()) / 2;
      if (std::fabs(got - static_cast<double>(ref)) > tol) {
        CAPTURE(r, c, got, static_cast<double>(ref));
        FAIL("element off the long-double reference");
      }
    }
  }
}

SincosGridParams random_grid(posenc_test::SplitMix64& rng) {
  using posenc_test::between;
  using posenc_test::coin;
  SincosGridParams p;
  const auto num_axes = static_cast<int>(rng.integer(1, 3));
  for (int a = 0; a < num_axes; ++a) {
    posenc::SincosGridAxis axis;
    axis.size = rng.integer(1, 7);
    axis.first = coin(rng, 0.25) ? rng.integer(0, 1000000) : 0;
    axis.scale = coin(rng, 0.5) ? 1.0 : between(rng, 0.01, 4.0);
    p.axes.push_back(axis);
  }
  const auto num_blocks = rng.integer(1, 4);
  for (std::int64_t b = 0; b < num_blocks; ++b) {
    p.blocks.push_back({static_cast<int>(rng.integer(0, num_axes - 1)), 2 * rng.integer(1, 9)});
  }
  p.base = coin(rng, 0.3) ? between(rng, 2.0, 1e6) : 10000.0;
  p.extra_tokens = rng.integer(0, 2);
  return p;
}

}  // namespace

TEST_CASE("sincos grid: MAE's 2-D table puts the column block first, the class row zero",
          "[sincos_grid]") {
  // embed_dim 8, 2 rows x 3 columns: blocks of 4, w = 1 and 10000^(-1/2) = 0.01.
  const auto params = posenc::sincos_grid_mae(8, 2, 3, /*cls_token=*/true);
  const auto t = table<double>(params);
  REQUIRE(t.size() == 7 * 8);
  check_row(t, 8, 0, {0, 0, 0, 0, 0, 0, 0, 0});
  // Patch (row 1, column 2) is token 1 + 3 * 1 + 2 = 6: column 2 in the first half.
  check_row(t, 8, 6,
            {0.9092974268256817, 0.01999866669333308, -0.4161468365471424, 0.9998000066665778,
             0.8414709848078965, 0.009999833334166664, 0.5403023058681398, 0.9999500004166653});
  // Patch (row 0, column 1): the row half is sin 0 = 0, cos 0 = 1.
  check_row(t, 8, 2,
            {0.8414709848078965, 0.009999833334166664, 0.5403023058681398, 0.9999500004166653,
             0, 0, 1, 1});
  // Without the class token the same rows move up by one.
  const auto no_cls = table<double>(posenc::sincos_grid_mae(8, 2, 3));
  REQUIRE(no_cls.size() == 6 * 8);
  for (std::size_t i = 0; i < no_cls.size(); ++i) CHECK(no_cls[i] == t[i + 8]);
}

TEST_CASE("sincos grid: diffusers' base_size and interpolation_scale set the coordinates",
          "[sincos_grid]") {
  // grid 4 x 2, base_size 2, interpolation_scale 2: row i at i / (4 / 2) / 2 = i / 4, column j
  // at j / (2 / 2) / 2 = j / 2. Patch (3, 1) = token 7: column 0.5, row 0.75.
  const auto params = posenc::sincos_grid_diffusers(8, 4, 2, 2.0, 2.0, /*extra_tokens=*/2);
  const auto t = table<double>(params);
  REQUIRE(t.size() == 10 * 8);
  check_row(t, 8, 1, {0, 0, 0, 0, 0, 0, 0, 0});
  check_row(t, 8, 2 + 7,
            {0.479425538604203, 0.004999979166692708, 0.8775825618903728, 0.9999875000260416,
             0.6816387600233341, 0.007499929687697754, 0.7316888688738209, 0.9999718751318357});
  // DiT: base_size = the grid's side, scale 1, which is MAE's table.
  const auto dit = table<double>(posenc::sincos_grid_diffusers(16, 4, 4, 4.0, 1.0));
  CHECK(dit == table<double>(posenc::sincos_grid_mae(16, 4, 4)));
}

TEST_CASE("sincos grid: SD3's centre crop equals the same rows of the full table",
          "[sincos_grid]") {
  // pos_embed_max_size 8, base_size 4, interpolation_scale 1.5; a 3 x 6 crop sits at top
  // (8 - 3) / 2 = 2 (rounded down), left (8 - 6) / 2 = 1.
  const Eigen::Index m = 8, h = 3, w = 6, e = 12;
  const auto full = table<double>(posenc::sincos_grid_diffusers(e, m, m, 4.0, 1.5));
  const auto crop = table<double>(posenc::sincos_grid_sd3_crop(e, m, 4.0, 1.5, h, w));
  REQUIRE(crop.size() == static_cast<std::size_t>(h * w * e));
  for (Eigen::Index i = 0; i < h; ++i) {
    for (Eigen::Index j = 0; j < w; ++j) {
      for (Eigen::Index c = 0; c < e; ++c) {
        CAPTURE(i, j, c);
        CHECK(crop[static_cast<std::size_t>((i * w + j) * e + c)] ==
              full[static_cast<std::size_t>(((2 + i) * m + 1 + j) * e + c)]);
      }
    }
  }
  // An odd margin on the other axis: 8 x 5 starts at column (8 - 5) / 2 = 1, not 2.
  const auto crop5 = table<double>(posenc::sincos_grid_sd3_crop(e, m, 4.0, 1.5, m, 5));
  for (Eigen::Index i = 0; i < m; ++i) {
    for (Eigen::Index j = 0; j < 5; ++j) {
      for (Eigen::Index c = 0; c < e; ++c) {
        CAPTURE(i, j, c);
        CHECK(crop5[static_cast<std::size_t>((i * 5 + j) * e + c)] ==
              full[static_cast<std::size_t>((i * m + 1 + j) * e + c)]);
      }
    }
  }
  // The whole grid is no crop.
  CHECK(table<double>(posenc::sincos_grid_sd3_crop(e, m, 4.0, 1.5, m, m)) == full);
}

TEST_CASE("sincos grid: CogVideoX's 3-D table is [time | column | row]", "[sincos_grid]") {
  // embed_dim 16: time 4 channels (w = 1, 0.01), column and row 6 (w = 10000^(-j/3)); 2 frames
  // of 2 x 3 patches, spatial_interpolation_scale 1.875. Token (frame 1, row 1, column 2) =
  // 1 * 6 + 1 * 3 + 2 = 11: time 1, column 2 / 1.875, row 1 / 1.875.
  const auto params = posenc::sincos_grid_cogvideox(16, 2, 2, 3, 1.875, 1.0);
  const auto t = table<double>(params);
  REQUIRE(t.size() == 12 * 16);
  check_row(t, 16, 11,
            {0.8414709848078965, 0.009999833334166664, 0.5403023058681398, 0.9999500004166653,
             0.8755952198100255, 0.04949005621034061, 0.0022980616466518277,
             0.48304555794027665, 0.9987746163856475, 0.9999973594528478,  //
             0.5084065509313012, 0.024752612128344134, 0.001149031581844182,
             0.8611171691298103, 0.999693607158125, 0.999999339862994});
  // temporal_interpolation_scale 2: frame 1 at time 0.5. Token 6 = (frame 1, row 0, column 0).
  const auto t2 = table<double>(posenc::sincos_grid_cogvideox(16, 2, 2, 3, 1.875, 2.0));
  for (int c = 0; c < 4; ++c) {
    const double expected[4] = {0.479425538604203, 0.004999979166692708, 0.8775825618903728,
                                0.9999875000260416};  // sin .5, sin .005, cos .5, cos .005
    CHECK_THAT(t2[static_cast<std::size_t>(6 * 16 + c)], WithinAbs(expected[c], 1e-15));
  }
}

TEST_CASE("sincos grid: one axis and one block is the kSinCosVaswani sinusoidal table",
          "[sincos_grid]") {
  SincosGridParams p;
  p.axes = {{40, 3, 1.0}};
  p.blocks = {{0, 64}};
  p.base = 500.0;
  posenc::SinusoidalParams s;
  s.layout = posenc::SinusoidalLayout::kSinCosVaswani;
  s.base = 500.0;
  std::vector<double> expected(40 * 64);
  posenc::sinusoidal_table<double>(posenc::TensorView<double, 2>(expected.data(), 40, 64), s, 3);
  const auto t = table<double>(p);
  for (std::size_t i = 0; i < t.size(); ++i) CHECK_THAT(t[i], WithinAbs(expected[i], 1e-12));
}

TEST_CASE("sincos grid: random grids against the long-double reference, every storage type",
          "[sincos_grid]") {
  posenc_test::SplitMix64 rng(20261206);
  for (int trial = 0; trial < 60; ++trial) {
    const auto params = random_grid(rng);
    CAPTURE(trial);
    check_against_reference<double>(params, 1e-15);
    check_against_reference<float>(params, 0x1p-24);
    check_against_reference<Eigen::half>(params, 0x1p-11);
    check_against_reference<Eigen::bfloat16>(params, 0x1p-8);
  }
  // Coordinates past float's exact range: the angles are formed in double.
  SincosGridParams far;
  far.axes = {{3, 1000000, 1.0}, {2, 131071, 1.0}};
  far.blocks = {{0, 32}, {1, 32}};
  check_against_reference<float>(far, 0x1p-24);
}

TEST_CASE("sincos grid: add_sincos_grid_inplace adds the table to every batch row",
          "[sincos_grid]") {
  const auto params = posenc::sincos_grid_mae(16, 3, 5, /*cls_token=*/true);
  const SincosGridPlan plan(params);
  const Eigen::Index batch = 3, tokens = plan.tokens(), dim = plan.dim();
  const auto t = table<float>(params);
  std::vector<float> x(static_cast<std::size_t>(batch * tokens * dim));
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 13) * 0.25f - 1.5f;
  // The class rows hold -0 and NaN: left as they are (no + 0 turning -0 into +0).
  for (Eigen::Index b = 0; b < batch; ++b) {
    x[static_cast<std::size_t>(b * tokens * dim)] = -0.0f;
    x[static_cast<std::size_t>(b * tokens * dim + 1)] = std::numeric_limits<float>::quiet_NaN();
  }
  const auto before = x;
  posenc::add_sincos_grid_inplace<float>(posenc::TensorView<float, 3>(x.data(), batch, tokens, dim),
                                         plan);
  for (Eigen::Index b = 0; b < batch; ++b) {
    for (Eigen::Index r = 0; r < tokens; ++r) {
      for (Eigen::Index c = 0; c < dim; ++c) {
        const auto i = static_cast<std::size_t>((b * tokens + r) * dim + c);
        const auto ti = static_cast<std::size_t>(r * dim + c);
        CAPTURE(b, r, c);
        if (r == 0) {
          CHECK(std::memcmp(&x[i], &before[i], sizeof(float)) == 0);
        } else {
          CHECK(x[i] == before[i] + t[ti]);  // one float add of the float-rounded table
        }
      }
    }
  }
  // bfloat16: x + v in float, rounded once.
  std::vector<Eigen::bfloat16> xb(static_cast<std::size_t>(tokens * dim), Eigen::bfloat16(0.5f));
  posenc::add_sincos_grid_inplace<Eigen::bfloat16>(
      posenc::TensorView<Eigen::bfloat16, 3>(xb.data(), 1, tokens, dim), plan);
  const auto tf = table<double>(params);
  for (std::size_t i = 0; i < xb.size(); ++i) {
    CHECK(xb[i] == Eigen::bfloat16(0.5f + static_cast<float>(tf[i])));
  }
}

TEST_CASE("sincos grid: bad parameters throw naming them, and nothing is written",
          "[sincos_grid]") {
  const double inf = std::numeric_limits<double>::infinity();
  const auto good = posenc::sincos_grid_mae(8, 2, 3);
  const auto plan_error = [](const SincosGridParams& p) {
    try {
      SincosGridPlan plan(p);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  auto with = [&](auto edit) {
    SincosGridParams p = good;
    edit(p);
    return plan_error(p);
  };
  CHECK(plan_error(good) == "no error");
  CHECK_THAT(with([](SincosGridParams& p) { p.base = 0.0; }),
             Contains("posenc::SincosGridPlan: base = 0 must be finite and > 0"));
  CHECK_THAT(with([](SincosGridParams& p) { p.axes.clear(); }),
             Contains("axes.size() = 0 must be in [1, 8]"));
  CHECK_THAT(with([](SincosGridParams& p) { p.axes.resize(9); }),
             Contains("axes.size() = 9 must be in [1, 8]"));
  CHECK_THAT(with([](SincosGridParams& p) { p.axes[1].size = 0; }),
             Contains("axes[1].size = 0 must be in [1, 2^40]"));
  CHECK_THAT(with([](SincosGridParams& p) { p.axes[0].first = -1; }),
             Contains("axes[0].first = -1 must be in [0, 2^53 - size + 1] (size = 2)"));
  CHECK_THAT(with([](SincosGridParams& p) { p.axes[0].first = (std::int64_t{1} << 53); }),
             Contains("axes[0].first = 9007199254740992 must be in [0, 2^53 - size + 1]"));
  CHECK(with([](SincosGridParams& p) { p.axes[0].first = (std::int64_t{1} << 53) - 1; }) ==
        "no error");
  CHECK_THAT(with([&](SincosGridParams& p) { p.axes[1].scale = inf; }),
             Contains("axes[1].scale = inf must be finite and > 0"));
  CHECK_THAT(with([](SincosGridParams& p) { p.axes[1].scale = 0.0; }),
             Contains("axes[1].scale = 0 must be finite and > 0"));
  // A finite coordinate (2 x 1e300) times a finite frequency (1e-300^(-1/2) = 1e150).
  CHECK_THAT(with([](SincosGridParams& p) {
               p.axes[1].scale = 1e300;
               p.base = 1e-300;
             }),
             Contains("blocks[0]: the largest coordinate 2.0000000000000001e+300 (axes[1]) "
                      "times the largest frequency 9.9999999999998817e+149 (base = 1e-300) "
                      "must be finite"));
  // The coordinate counts `first`: one token at index 2 of scale 1e308 is at 2e308 = inf.
  CHECK_THAT(with([](SincosGridParams& p) {
               p.axes = {{1, 2, 1e308}, {3}};
             }),
             Contains("blocks[1]: the largest coordinate inf (axes[0])"));
  CHECK_THAT(with([](SincosGridParams& p) { p.extra_tokens = -1; }),
             Contains("extra_tokens = -1 must be >= 0"));
  CHECK_THAT(with([](SincosGridParams& p) {
               p.axes = {{Eigen::Index{1} << 20}, {Eigen::Index{1} << 21}};
             }),
             Contains("the grid's 1048576 x 2097152 tokens (through axes[1]) must be at most "
                      "2^40"));
  CHECK_THAT(with([](SincosGridParams& p) {
               p.axes = {{Eigen::Index{1} << 40}};
               p.extra_tokens = 1;
             }),
             Contains("extra_tokens = 1 plus the grid's 1099511627776 tokens must be at "
                      "most 2^40"));
  {  // Exactly 2^40 grid tokens is a grid (the plan holds 2 x 2^20 rows of 2 values).
    SincosGridParams p;
    p.axes = {{Eigen::Index{1} << 20}, {Eigen::Index{1} << 20}};
    p.blocks = {{0, 2}, {1, 2}};
    CHECK(SincosGridPlan(p).tokens() == (Eigen::Index{1} << 40));
  }
  CHECK_THAT(with([](SincosGridParams& p) { p.blocks.clear(); }),
             Contains("blocks must not be empty"));
  CHECK_THAT(with([](SincosGridParams& p) { p.blocks[1].axis = 2; }),
             Contains("blocks[1].axis = 2 must be in [0, axes.size() = 2)"));
  CHECK_THAT(with([](SincosGridParams& p) { p.blocks[0].width = 3; }),
             Contains("blocks[0].width = 3 must be even and in [2, 2^20]"));
  CHECK_THAT(with([](SincosGridParams& p) { p.blocks[0].width = 0; }),
             Contains("blocks[0].width = 0 must be even"));
  CHECK_THAT(with([](SincosGridParams& p) {
               p.blocks = {{0, Eigen::Index{1} << 20}, {1, 2}};
             }),
             Contains("the blocks' widths through blocks[1] add up to 1048578"));

  // Recipes.
  const auto recipe_error = [](auto make) {
    try {
      make();
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK_THAT(recipe_error([] { posenc::sincos_grid_mae(6, 2, 2); }),
             Contains("posenc::sincos_grid_mae: embed_dim = 6 must be a positive multiple of 4"));
  CHECK_THAT(recipe_error([] { posenc::sincos_grid_diffusers(8, 0, 2); }),
             Contains("sincos_grid_diffusers: grid 0 x 2 must have at least one row"));
  CHECK_THAT(recipe_error([] { posenc::sincos_grid_diffusers(8, 2, 2, -1.0); }),
             Contains("base_size = -1 must be finite and > 0"));
  CHECK_THAT(recipe_error([] { posenc::sincos_grid_diffusers(8, 2, 2, 16.0, 0.0); }),
             Contains("interpolation_scale = 0 must be finite and > 0"));
  CHECK_THAT(recipe_error([] { posenc::sincos_grid_sd3_crop(8, 192, 64.0, 1.0, 193, 10); }),
             Contains("sincos_grid_sd3_crop: grid_h = 193 must be in [1, pos_embed_max_size = "
                      "192]"));
  CHECK_THAT(recipe_error([] { posenc::sincos_grid_sd3_crop(8, 192, 64.0, 1.0, 10, 0); }),
             Contains("grid_w = 0 must be in [1, pos_embed_max_size = 192]"));
  CHECK_THAT(recipe_error([] { posenc::sincos_grid_sd3_crop(10, 192, 64.0, 1.0, 10, 10); }),
             Contains("sincos_grid_sd3_crop: embed_dim = 10 must be a positive multiple of 4"));
  CHECK_THAT(recipe_error([] { posenc::sincos_grid_cogvideox(40, 2, 2, 2); }),
             Contains("sincos_grid_cogvideox: embed_dim = 40 must be a positive multiple of 16"));
  CHECK_THAT(recipe_error([&] { posenc::sincos_grid_cogvideox(16, 2, 2, 2, 1.0, inf); }),
             Contains("temporal_interpolation_scale = inf must be finite and > 0"));

  // Shapes: nothing is written.
  const SincosGridPlan plan(good);
  std::vector<float> out(7 * 8, 3.0f);
  REQUIRE_THROWS_WITH(
      posenc::sincos_grid_table<float>(posenc::TensorView<float, 2>(out.data(), 7, 8), plan),
      Contains("sincos_grid_table: out shape [7, 8] must be [tokens = 6 (0 extra + 6 grid), "
               "dim = 8]"));
  REQUIRE_THROWS_WITH(
      posenc::add_sincos_grid_inplace<float>(posenc::TensorView<float, 3>(out.data(), 1, 6, 9),
                                             plan),
      Contains("x shape [1, 6, 9] must be [batch >= 1, tokens = 6 (0 extra + 6 grid), dim = 8]"));
  REQUIRE_THROWS_WITH(
      posenc::add_sincos_grid_inplace<float>(posenc::TensorView<float, 3>(out.data(), 0, 6, 8),
                                             plan),
      Contains("x shape [0, 6, 8] must be [batch >= 1"));
  SincosGridParams bad = good;
  bad.blocks[0].width = 5;
  REQUIRE_THROWS_AS(
      posenc::sincos_grid_table<float>(posenc::TensorView<float, 2>(out.data(), 6, 8), bad),
      std::invalid_argument);
  for (const float v : out) CHECK(v == 3.0f);
}
