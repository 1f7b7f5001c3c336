// Resizing learned 2-D position grids (ViT / CLIP / SigLIP / DINOv2 interpolate_pos_encoding).
// Expected values: 1 x 2 -> 1 x 4 worked by hand from Keys' cubic convolution (A = -0.75) and
// from linear interpolation, constants and identity resizes, and PyTorch's sampling rules
// (area_pixel_compute_source_index, the cubic taps) transcribed here in long double.

#include <catch2/catch.hpp>

#include <posenc/learned_grid.hpp>

#include <cmath>
#include <cstdint>
#include <vector>

#include "support/rng.hpp"

using Catch::Matchers::Contains;
using posenc::GridInterpolation;
using posenc::GridResize;

namespace {

using LD = long double;

std::vector<float> resize(const std::vector<float>& in, Eigen::Index ih, Eigen::Index iw, Eigen::Index d,
                          Eigen::Index oh, Eigen::Index ow, const GridResize& o) {
  std::vector<float> out(static_cast<std::size_t>(oh * ow * d));
  posenc::resize_learned_grid<float>(posenc::ConstTensorView<float, 2>(in.data(), ih * iw, d), ih, iw,
                                     posenc::TensorView<float, 2>(out.data(), oh * ow, d), oh, ow, o);
  return out;
}

LD keys_cubic(LD u) {
  const LD a = -0.75L;
  u = std::fabs(u);
  if (u <= 1) return (a + 2) * u * u * u - (a + 3) * u * u + 1;
  if (u < 2) return a * u * u * u - 5 * a * u * u + 8 * a * u - 4 * a;
  return 0;
}

/// One axis of PyTorch's sampling, long double: (row, weight) pairs for output index o.
std::vector<std::pair<Eigen::Index, LD>> axis(Eigen::Index o, Eigen::Index in, Eigen::Index out, bool cubic, bool corners,
                                              LD factor) {
  LD x;
  if (corners) {
    x = out > 1 ? static_cast<LD>(o) * (in - 1) / (out - 1) : 0;
  } else {
    const LD step = factor > 0 ? 1 / factor : static_cast<LD>(in) / out;
    x = (o + 0.5L) * step - 0.5L;
  }
  const auto clampi = [in](Eigen::Index r) { return r < 0 ? Eigen::Index{0} : r > in - 1 ? in - 1 : r; };
  std::vector<std::pair<Eigen::Index, LD>> taps;
  if (!cubic) {
    if (x < 0) x = 0;
    Eigen::Index i = static_cast<Eigen::Index>(std::floor(x));
    if (i > in - 1) i = in - 1;
    const LD t = x - i;
    taps = {{i, 1 - t}, {clampi(i + 1), t}};
    return taps;
  }
  Eigen::Index i = static_cast<Eigen::Index>(std::floor(x));
  if (i > in - 1) i = in - 1;
  LD t = x - i;
  t = t < 0 ? 0 : t > 1 ? 1 : t;
  for (int k = -1; k <= 2; ++k) taps.push_back({clampi(i + k), keys_cubic(t - k)});
  return taps;
}

}  // namespace

TEST_CASE("learned grid: 1 x 2 -> 1 x 4 by hand, bicubic and bilinear", "[learned][grid]") {
  // Bicubic, A = -0.75: W(0.25) = 0.87890625, W(0.75) = 0.26171875, W(1.25) = -0.10546875,
  // W(1.75) = -0.03515625. Sources x = -0.25, 0.25, 0.75, 1.25 (step 1/2), rows clamped to
  // {0, 1}, values [0, 1]: W(1.25) = -0.10546875; W(0.75) + W(1.75) = 0.2265625; W(0.25) +
  // W(1.25) = 0.7734375; W(0.25) + W(0.75) + W(1.75) = 1.10546875.
  const std::vector<float> in = {0.0f, 1.0f};
  const auto cubic = resize(in, 1, 2, 1, 1, 4, {});
  const std::vector<float> want_cubic = {-0.10546875f, 0.2265625f, 0.7734375f, 1.10546875f};
  for (std::size_t i = 0; i < 4; ++i) {
    CAPTURE(i);
    REQUIRE(cubic[i] == want_cubic[i]);  // dyadic: exact in float
  }
  // Bilinear: x clamped at 0, so 0, then 0.25, 0.75, and the last row: [0, 0.25, 0.75, 1].
  GridResize lin;
  lin.mode = GridInterpolation::kBilinear;
  const auto linear = resize(in, 1, 2, 1, 1, 4, lin);
  const std::vector<float> want_linear = {0.0f, 0.25f, 0.75f, 1.0f};
  for (std::size_t i = 0; i < 4; ++i) REQUIRE(linear[i] == want_linear[i]);
  // align_corners: x = o / 3, so [0, 1/3, 2/3, 1] bilinearly.
  lin.align_corners = true;
  const auto corners = resize(in, 1, 2, 1, 1, 4, lin);
  REQUIRE_THAT(corners[1], Catch::Matchers::WithinAbs(1.0 / 3.0, 1e-7));
  REQUIRE_THAT(corners[2], Catch::Matchers::WithinAbs(2.0 / 3.0, 1e-7));
  REQUIRE(corners[3] == 1.0f);
}

TEST_CASE("learned grid: constants stay, the same size is the identity", "[learned][grid]") {
  for (const auto mode : {GridInterpolation::kBicubic, GridInterpolation::kBilinear}) {
    CAPTURE(posenc::to_string(mode));
    GridResize o;
    o.mode = mode;
    const std::vector<float> flat(static_cast<std::size_t>(5 * 7 * 3), 0.625f);
    for (const float x : resize(flat, 5, 7, 3, 11, 4, o)) REQUIRE_THAT(x, Catch::Matchers::WithinAbs(0.625, 1e-6));
    const auto grid = posenc_test::random_vector<float>(static_cast<std::size_t>(6 * 6 * 8), 701);
    REQUIRE(resize(grid, 6, 6, 8, 6, 6, o) == grid);
  }
}

TEST_CASE("learned grid: PyTorch's sampling in long double, up, down, scale factors, corners",
          "[learned][grid]") {
  struct Case {
    Eigen::Index ih, iw, oh, ow;
    GridResize o;
  };
  GridResize bilinear;
  bilinear.mode = GridInterpolation::kBilinear;
  GridResize corners;
  corners.align_corners = true;
  GridResize dinov2;  // DINOv2: scale_factor = (h + 0.1) / sqrt(N) in older ports
  dinov2.scale_factor_h = 24.1 / 16.0;
  dinov2.scale_factor_w = 20.1 / 16.0;
  const std::vector<Case> cases = {
      {16, 16, 24, 24, {}},  // SigLIP 256 -> 384 patches of 16
      {24, 24, 16, 16, {}},  // down, no antialias
      {7, 5, 11, 9, bilinear},
      {7, 5, 3, 2, bilinear},
      {6, 4, 9, 10, corners},
      {16, 16, 24, 20, dinov2},
  };
  const Eigen::Index d = 5;
  for (const auto& c : cases) {
    CAPTURE(c.ih, c.iw, c.oh, c.ow, posenc::to_string(c.o.mode), c.o.align_corners);
    const auto in = posenc_test::random_vector<float>(static_cast<std::size_t>(c.ih * c.iw * d), 702);
    const auto out = resize(in, c.ih, c.iw, d, c.oh, c.ow, c.o);
    const bool cubic = c.o.mode == GridInterpolation::kBicubic;
    for (Eigen::Index y = 0; y < c.oh; ++y)
      for (Eigen::Index x = 0; x < c.ow; ++x) {
        const auto ty = axis(y, c.ih, c.oh, cubic, c.o.align_corners, c.o.scale_factor_h);
        const auto tx = axis(x, c.iw, c.ow, cubic, c.o.align_corners, c.o.scale_factor_w);
        for (Eigen::Index e = 0; e < d; ++e) {
          LD want = 0;
          for (const auto& [ry, wy] : ty)
            for (const auto& [rx, wx] : tx) want += wy * wx * in[static_cast<std::size_t>((ry * c.iw + rx) * d + e)];
          CAPTURE(y, x, e);
          REQUIRE_THAT(out[static_cast<std::size_t>((y * c.ow + x) * d + e)],
                       Catch::Matchers::WithinAbs(static_cast<double>(want), 1e-6));
        }
      }
  }
}

TEST_CASE("learned grid: a tiny scale factor reads the last row, as every x past it does",
          "[learned][grid]") {
  // scale_factor 1e-30: source step 1e30, x ~ 5e29 for every output row. Past in - 1 both
  // filters put weight 1 on the last row (bilinear t = 1 on rows in - 1, in - 1; Keys' W(0) = 1,
  // W(1) = W(2) = W(-1) = 0), so the rows must be the table's last row exactly. The conversion
  // of x to an integer row was undefined (x86: INT64_MIN, row 0).
  const Eigen::Index ih = 3, iw = 4, d = 2;
  const auto table = posenc_test::random_vector<float>(static_cast<std::size_t>(ih * iw * d), 703);
  for (const auto mode : {GridInterpolation::kBicubic, GridInterpolation::kBilinear}) {
    CAPTURE(posenc::to_string(mode));
    GridResize o;
    o.mode = mode;
    o.scale_factor_h = 1e-30;
    const auto out = resize(table, ih, iw, d, 2, iw, o);
    for (Eigen::Index y = 0; y < 2; ++y)
      for (Eigen::Index i = 0; i < iw * d; ++i) {
        CAPTURE(y, i);
        REQUIRE(out[static_cast<std::size_t>(y * iw * d + i)] ==
                table[static_cast<std::size_t>((ih - 1) * iw * d + i)]);
      }
  }
}

TEST_CASE("learned grid: bad input throws before writing", "[learned][grid]") {
  const std::vector<float> in(static_cast<std::size_t>(4 * 4 * 2), 1.0f);
  std::vector<float> out(static_cast<std::size_t>(6 * 6 * 2), -9.0f);
  const posenc::ConstTensorView<float, 2> iv(in.data(), 16, 2);
  REQUIRE_THROWS_WITH(posenc::resize_learned_grid<float>(iv, 4, 3, posenc::TensorView<float, 2>(out.data(), 36, 2), 6, 6),
                      Contains("table shape [16, 2] must be [in_h * in_w = 12"));
  REQUIRE_THROWS_WITH(posenc::resize_learned_grid<float>(iv, 4, 4, posenc::TensorView<float, 2>(out.data(), 36, 2), 6, 5),
                      Contains("out shape [36, 2] must be [out_h * out_w = 30"));
  GridResize bad;
  bad.scale_factor_w = -1.0;
  REQUIRE_THROWS_WITH(posenc::resize_learned_grid<float>(iv, 4, 4, posenc::TensorView<float, 2>(out.data(), 36, 2), 6, 6, bad),
                      Contains("scale factor = -1 must be finite and >= 0"));
  REQUIRE_THROWS_WITH(posenc::resize_learned_grid<float>(iv, 4, 4, posenc::TensorView<float, 2>(out.data(), 36, 2), 0, 6),
                      Contains("must have positive sizes"));
  for (const float x : out) REQUIRE(x == -9.0f);
}

TEST_CASE("learned grid: a zero output width, d_model 0, a bad mode or an infinite factor throw",
          "[learned][grid]") {
  const std::vector<float> in(static_cast<std::size_t>(4 * 4 * 2), 1.0f);
  std::vector<float> out(static_cast<std::size_t>(6 * 6 * 2), -9.0f);
  const auto run = [&](Eigen::Index d, Eigen::Index out_rows, Eigen::Index oh, Eigen::Index ow,
                       const GridResize& o) {
    posenc::resize_learned_grid<float>(posenc::ConstTensorView<float, 2>(in.data(), 16, d), 4, 4,
                                       posenc::TensorView<float, 2>(out.data(), out_rows, d), oh,
                                       ow, o);
  };
  // Empty output grids whose out view agrees (0 rows): only the size check rejects them.
  REQUIRE_THROWS_WITH(run(2, 0, 6, 0, {}), Contains("must have positive sizes"));
  REQUIRE_THROWS_WITH(run(2, 0, 0, 6, {}), Contains("must have positive sizes"));
  // d_model = 0 in both table and out.
  REQUIRE_THROWS_WITH(run(0, 36, 6, 6, {}), Contains("d_model > 0"));
  GridResize bad_mode;
  bad_mode.mode = static_cast<GridInterpolation>(7);
  REQUIRE_THROWS_WITH(run(2, 36, 6, 6, bad_mode), Contains("mode = 7 is not a GridInterpolation"));
  GridResize inf;
  inf.scale_factor_h = std::numeric_limits<double>::infinity();
  REQUIRE_THROWS_WITH(run(2, 36, 6, 6, inf), Contains("must be finite and >= 0"));
  for (const float x : out) REQUIRE(x == -9.0f);
}

TEST_CASE("learned grid: align_corners ignores a scale factor, as PyTorch's does",
          "[learned][grid]") {
  // PyTorch area_pixel_compute_scale: with align_corners the step is (in - 1) / (out - 1)
  // whatever scale_factor says (only the half-pixel rule reads 1 / scale_factor); the file
  // comment states the same. 1 x 2 -> 1 x 4 bilinear with scale factor 2: x = o / 3, so
  // [0, 1/3, 2/3, 1] (1 / 2 would read x = 0, 0.5, 1, 1.5: [0, 0.5, 1, 1]).
  const std::vector<float> in = {0.0f, 1.0f};
  GridResize o;
  o.mode = GridInterpolation::kBilinear;
  o.align_corners = true;
  o.scale_factor_h = 2.0;
  o.scale_factor_w = 2.0;
  const auto out = resize(in, 1, 2, 1, 1, 4, o);
  CHECK(out[0] == 0.0f);
  CHECK_THAT(out[1], Catch::Matchers::WithinAbs(1.0 / 3.0, 1e-7));
  CHECK_THAT(out[2], Catch::Matchers::WithinAbs(2.0 / 3.0, 1e-7));
  CHECK(out[3] == 1.0f);
  // Bicubic too: the long-double taps with the corner rule, the factor unused.
  o.mode = GridInterpolation::kBicubic;
  o.scale_factor_h = 1.7;
  o.scale_factor_w = 0.6;
  const Eigen::Index ih = 5, iw = 4, oh = 7, ow = 3, d = 2;
  const auto grid = posenc_test::random_vector<float>(static_cast<std::size_t>(ih * iw * d), 704);
  const auto got = resize(grid, ih, iw, d, oh, ow, o);
  for (Eigen::Index y = 0; y < oh; ++y)
    for (Eigen::Index x = 0; x < ow; ++x) {
      const auto ty = axis(y, ih, oh, true, true, 0);
      const auto tx = axis(x, iw, ow, true, true, 0);
      for (Eigen::Index e = 0; e < d; ++e) {
        LD want = 0;
        for (const auto& [ry, wy] : ty)
          for (const auto& [rx, wx] : tx)
            want += wy * wx * grid[static_cast<std::size_t>((ry * iw + rx) * d + e)];
        CAPTURE(y, x, e);
        REQUIRE_THAT(got[static_cast<std::size_t>((y * ow + x) * d + e)],
                     Catch::Matchers::WithinAbs(static_cast<double>(want), 1e-6));
      }
    }
}

TEST_CASE("learned grid: an empty input grid and an out of another d_model throw",
          "[learned][grid]") {
  const std::vector<float> in(static_cast<std::size_t>(4 * 4 * 2), 1.0f);
  std::vector<float> out(static_cast<std::size_t>(6 * 6 * 3), -9.0f);
  // in_h = 0 with a table of 0 rows that agrees with it: only the size check refuses it.
  REQUIRE_THROWS_WITH(posenc::resize_learned_grid<float>(
                          posenc::ConstTensorView<float, 2>(in.data(), 0, 2), 0, 4,
                          posenc::TensorView<float, 2>(out.data(), 36, 2), 6, 6),
                      Contains("must have positive sizes"));
  // out has the right rows but 3 channels for the table's 2.
  REQUIRE_THROWS_WITH(posenc::resize_learned_grid<float>(
                          posenc::ConstTensorView<float, 2>(in.data(), 16, 2), 4, 4,
                          posenc::TensorView<float, 2>(out.data(), 36, 3), 6, 6),
                      Contains("out shape [36, 3] must be [out_h * out_w = 36, d_model = 2]"));
  for (const float x : out) REQUIRE(x == -9.0f);
}
