// DETR's 2-D sine embedding of a padded feature map, its learned row / column alternative, the
// nearest-resized pixel mask, and RT-DETR's fixed encoder table.
// Expected values: closed forms worked by hand (a 1 x 1 map's y = 2 pi / (1 + 1e-6), raw counts
// with w_1 = 10000^(-1/2)); the padding invariance DETR's design rests on (an image's real
// pixels get its unpadded embedding); PyTorch's nearest indices worked out for small sizes; and
// every element of random masks against the long-double reference
// (posenc/reference/sine_embedding_2d.hpp), which runs HF's steps as whole arrays.

#include <catch2/catch.hpp>

#include <posenc/reference/sincos_grid.hpp>
#include <posenc/reference/sine_embedding_2d.hpp>
#include <posenc/sincos_grid.hpp>
#include <posenc/sine_embedding_2d.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "support/rng.hpp"

using Catch::Matchers::Contains;
using Catch::Matchers::WithinAbs;
using posenc::SineAxisOrder;
using posenc::SineEmbedding2dParams;

namespace {

constexpr double kTwoPi = 6.283185307179586;

template <typename T>
std::vector<T> embed(const std::vector<std::uint8_t>& mask, Eigen::Index batch, Eigen::Index h,
                     Eigen::Index w, const SineEmbedding2dParams& p) {
  const Eigen::Index dim = 2 * p.num_pos_feats;
  std::vector<T> out(static_cast<std::size_t>(batch * h * w * dim), T(7.0f));
  posenc::sine_embedding_2d<T>(posenc::ConstTensorView<std::uint8_t, 3>(mask.data(), batch, h, w),
                               posenc::TensorView<T, 4>(out.data(), batch, h, w, dim), p);
  return out;
}

template <typename T>
std::vector<T> embed_unpadded(Eigen::Index h, Eigen::Index w, const SineEmbedding2dParams& p) {
  const Eigen::Index dim = 2 * p.num_pos_feats;
  std::vector<T> out(static_cast<std::size_t>(h * w * dim), T(7.0f));
  posenc::sine_embedding_2d<T>(posenc::TensorView<T, 3>(out.data(), h, w, dim), p);
  return out;
}

SineEmbedding2dParams feats(Eigen::Index f) {
  SineEmbedding2dParams p;
  p.num_pos_feats = f;
  return p;
}

/// Half the spacing of T's subnormals: half's start below 6.1e-5, where the relative rounding
/// no longer holds (float's and bfloat16's lie far below any value here).
template <typename T>
constexpr double subnormal_rounding() {
  return std::is_same_v<T, Eigen::half> ? 0x1p-25 : 0.0;
}

/// Every element within half an ulp of T (relative `rounding`) of the long-double value, plus
/// the double angle's error (a few ulps of the largest angle).
template <typename T>
void check_against_reference(const std::vector<std::uint8_t>& mask, Eigen::Index batch,
                             Eigen::Index h, Eigen::Index w, const SineEmbedding2dParams& p,
                             double rounding) {
  const auto got = embed<T>(mask, batch, h, w, p);
  const auto want = posenc::reference::sine_embedding_2d(mask, batch, h, w, p);
  REQUIRE(got.size() == want.size());
  // The double angle's error: a few ulps of the token's largest angle, |coordinate| times
  // the largest frequency (1 for temperatures >= 1, T^(-(F/2 - 1) / (F/2)) below).
  const auto coords = posenc::reference::sine_coordinates_2d(mask, batch, h, w, p);
  const auto w_max = [&](double t) {
    const double half = static_cast<double>(p.num_pos_feats / 2);
    return std::max(1.0, std::pow(t, -(half - 1.0) / half));
  };
  const std::size_t dim = static_cast<std::size_t>(2 * p.num_pos_feats);
  for (std::size_t e = 0; e < got.size(); ++e) {
    const double v = static_cast<double>(want[e]);
    const std::size_t token = e / dim;
    const double angle =
        std::max(std::abs(static_cast<double>(coords.y[token])) * w_max(p.temperature_height),
                 std::abs(static_cast<double>(coords.x[token])) * w_max(p.temperature_width));
    const double tolerance =
        16.0 * std::numeric_limits<double>::epsilon() * (1.0 + angle) + subnormal_rounding<T>();
    CAPTURE(e, angle);
    CHECK_THAT(posenc::detail::to_double(got[e]), WithinAbs(v, rounding * std::abs(v) + tolerance));
  }
}

/// f() throws E (another type fails the test) with `what` in its message.
template <typename E, typename F>
void throws(F&& f, const std::string& what) {
  try {
    f();
    FAIL("no exception; expected one containing: " << what);
  } catch (const E& e) {
    CHECK_THAT(e.what(), Contains(what));
  }
}

}  // namespace

TEST_CASE("sine embedding 2d: a 1 x 1 map sits at y = x = 2 pi / (1 + 1e-6)", "[sine_2d]") {
  // sin(2 pi (1 - 1e-6 / (1 + 1e-6))) = -sin(2 pi 1e-6 / (1 + 1e-6)) = -6.2831790e-6; the
  // second pair's frequency 10000^(-2/4) = 0.01 gives sin(0.0628318) and cos(0.0628318).
  const auto t = embed_unpadded<double>(1, 1, feats(4));
  const double a = kTwoPi / (1.0 + 1e-6);
  const double s0 = -6.28317902395922e-6;
  CHECK_THAT(t[0], WithinAbs(s0, 2e-15));  // the double angle's rounding, ~1 ulp of 2 pi
  CHECK_THAT(t[1], WithinAbs(1.0 - 0.5 * s0 * s0, 1e-15));
  CHECK_THAT(t[2], WithinAbs(0.0627905, 1e-7));  // sin(0.0628318)
  CHECK_THAT(t[3], WithinAbs(0.9980267, 1e-7));  // cos(0.0628318)
  CHECK_THAT(t[2], WithinAbs(std::sin(0.01 * a), 1e-16));
  for (int c = 0; c < 4; ++c)
    CHECK(t[static_cast<std::size_t>(4 + c)] == t[static_cast<std::size_t>(c)]);
}

TEST_CASE("sine embedding 2d: Deformable DETR's offset 0.5 puts a 1 x 1 map at pi", "[sine_2d]") {
  // y = 0.5 / (1 + 1e-6) 2 pi = pi - pi 1e-6 / (1 + 1e-6): sin = 3.1415895e-6, cos = -1.
  SineEmbedding2dParams p = feats(2);
  p.offset = 0.5;
  const auto t = embed_unpadded<double>(1, 1, p);
  CHECK_THAT(t[0], WithinAbs(3.1415895119951132e-6, 2e-15));
  CHECK_THAT(t[1], WithinAbs(-1.0, 1e-11));
  CHECK(t[2] == t[0]);
  CHECK(t[3] == t[1]);
}

TEST_CASE("sine embedding 2d: raw counts, channel order and per-axis temperatures", "[sine_2d]") {
  // normalize = false: y = i + 1, x = j + 1. F = 4: w_0 = 1, w_1 = T^(-1/2) (0.01 for 10^4,
  // 0.2236068 for DAB-DETR's 20).
  SineEmbedding2dParams p = feats(4);
  p.normalize = false;
  p.temperature_height = 10000.0;
  p.temperature_width = 20.0;
  const Eigen::Index h = 2, w = 3;
  for (const auto order : {SineAxisOrder::kYX, SineAxisOrder::kXY}) {
    p.order = order;
    const auto t = embed_unpadded<double>(h, w, p);
    const std::size_t y0 = order == SineAxisOrder::kYX ? 0 : 4, x0 = 4 - y0;
    const std::size_t row = static_cast<std::size_t>((1 * w + 2) * 8);    // token (1, 2)
    CHECK_THAT(t[row + y0 + 0], WithinAbs(0.9092974268256817, 1e-15));    // sin 2
    CHECK_THAT(t[row + y0 + 1], WithinAbs(-0.4161468365471424, 1e-15));   // cos 2
    CHECK_THAT(t[row + y0 + 2], WithinAbs(0.019998666693333080, 1e-15));  // sin 0.02
    CHECK_THAT(t[row + y0 + 3], WithinAbs(0.99980000666657776, 1e-15));   // cos 0.02
    CHECK_THAT(t[row + x0 + 0], WithinAbs(0.1411200080598672, 1e-15));    // sin 3
    CHECK_THAT(t[row + x0 + 1], WithinAbs(-0.9899924966004454, 1e-15));   // cos 3
    CHECK_THAT(t[row + x0 + 2], WithinAbs(0.6216288199924985, 1e-15));    // sin(3 / sqrt 20)
    CHECK_THAT(t[row + x0 + 3], WithinAbs(0.7833119494522817, 1e-15));    // cos(3 / sqrt 20)
  }
}

TEST_CASE("sine embedding 2d: real pixels get their unpadded embedding, padding the last count",
          "[sine_2d]") {
  // A 3 x 4 image padded to 5 x 6 (HF's pixel_mask: 1 on the image), next to a full 5 x 6 one.
  const Eigen::Index h = 5, w = 6, ih = 3, iw = 4, dim = 8;
  std::vector<std::uint8_t> mask(static_cast<std::size_t>(2 * h * w), 1);
  for (Eigen::Index i = 0; i < h; ++i) {
    for (Eigen::Index j = 0; j < w; ++j) {
      mask[static_cast<std::size_t>(i * w + j)] = i < ih && j < iw ? 1 : 0;
    }
  }
  for (const double offset : {0.0, 0.5}) {
    SineEmbedding2dParams p = feats(4);
    p.offset = offset;
    const auto t = embed<float>(mask, 2, h, w, p);
    const auto small = embed_unpadded<float>(ih, iw, p);
    const auto full = embed_unpadded<float>(h, w, p);
    const auto value = [&](const std::vector<float>& v, Eigen::Index b, Eigen::Index width,
                           Eigen::Index i, Eigen::Index j, Eigen::Index c) {
      return v[static_cast<std::size_t>(((b * h + i) * width + j) * dim + c)];
    };
    for (Eigen::Index i = 0; i < h; ++i) {
      for (Eigen::Index j = 0; j < w; ++j) {
        for (Eigen::Index c = 0; c < dim; ++c) {
          CAPTURE(offset, i, j, c);
          const float got = value(t, 0, w, i, j, c);
          if (i < ih && j < iw) {
            CHECK(got == small[static_cast<std::size_t>((i * iw + j) * dim + c)]);
          } else if (c >= 4 && i < ih) {  // x of a padded column in a real row: the row's last
            CHECK(got == small[static_cast<std::size_t>((i * iw + iw - 1) * dim + c)]);
          } else if (c < 4 && j < iw) {  // y of a padded row in a real column: the last row's
            CHECK(got == small[static_cast<std::size_t>(((ih - 1) * iw + j) * dim + c)]);
          } else {
            // An empty row (x) or column (y): count 0, total 0, so the coordinate is
            // -offset / eps 2 pi (0 without the offset: sin 0 = 0, cos 0 = 1).
            const double v = -offset / 1e-6 * kTwoPi * (c % 4 < 2 ? 1.0 : 0.01);
            CHECK_THAT(got, WithinAbs(c % 2 == 0 ? std::sin(v) : std::cos(v), 1e-7));
          }
          CHECK(value(t, 1, w, i, j, c) == full[static_cast<std::size_t>((i * w + j) * dim + c)]);
        }
      }
    }
  }
}

TEST_CASE("sine embedding 2d: random masks against the long-double reference, every type",
          "[sine_2d]") {
  posenc_test::SplitMix64 rng(47);
  for (int trial = 0; trial < 12; ++trial) {
    const Eigen::Index batch = rng.integer(1, 3), h = rng.integer(1, 9), w = rng.integer(1, 9);
    SineEmbedding2dParams p;
    p.num_pos_feats = 2 * rng.integer(1, 12);
    p.temperature_height = posenc_test::pick(rng, {10000.0, 20.0, 0.5});
    p.temperature_width = posenc_test::coin(rng, 0.5) ? p.temperature_height : 20.0;
    p.normalize = trial % 4 != 3;
    p.offset = posenc_test::pick(rng, {0.0, 0.5, -0.25});
    p.eps = posenc_test::pick(rng, {1e-6, 0.25});
    p.scale = posenc_test::pick(rng, {kTwoPi, 1.0});
    p.order = trial % 2 == 0 ? SineAxisOrder::kYX : SineAxisOrder::kXY;
    // Ragged padding (bottom-right like HF's processor) in some trials, random pixels (every
    // copy path of the kernel: equal rows, equal columns, zero runs) in the others.
    std::vector<std::uint8_t> mask(static_cast<std::size_t>(batch * h * w));
    for (Eigen::Index b = 0; b < batch; ++b) {
      const Eigen::Index rh = rng.integer(0, h), rw = rng.integer(0, w);
      for (Eigen::Index i = 0; i < h; ++i) {
        for (Eigen::Index j = 0; j < w; ++j) {
          const bool real = trial % 3 == 0 ? posenc_test::coin(rng, 0.6) : (i < rh && j < rw);
          mask[static_cast<std::size_t>((b * h + i) * w + j)] = real ? 1 : 0;
        }
      }
    }
    CAPTURE(trial, batch, h, w, p.num_pos_feats, p.offset, p.eps, p.normalize);
    check_against_reference<double>(mask, batch, h, w, p, 0.0);
    check_against_reference<float>(mask, batch, h, w, p, 0x1p-24);
    check_against_reference<Eigen::half>(mask, batch, h, w, p, 0x1p-11);
    check_against_reference<Eigen::bfloat16>(mask, batch, h, w, p, 0x1p-8);
  }
}

TEST_CASE("sine embedding 2d: the unmasked overload equals an all-real mask", "[sine_2d]") {
  const Eigen::Index h = 7, w = 4;
  const std::vector<std::uint8_t> ones(static_cast<std::size_t>(h * w), 1);
  SineEmbedding2dParams p = feats(16);
  p.order = SineAxisOrder::kXY;
  CHECK(embed<float>(ones, 1, h, w, p) == embed_unpadded<float>(h, w, p));
}

TEST_CASE("sine embedding 2d: bad parameters and shapes throw naming them, nothing written",
          "[sine_2d]") {
  const Eigen::Index h = 2, w = 3;
  const std::vector<std::uint8_t> mask(static_cast<std::size_t>(h * w), 1);
  std::vector<float> out(static_cast<std::size_t>(h * w * 8), 7.0f);
  const auto call = [&](const SineEmbedding2dParams& p, Eigen::Index channels) {
    posenc::sine_embedding_2d<float>(posenc::ConstTensorView<std::uint8_t, 3>(mask.data(), 1, h, w),
                                     posenc::TensorView<float, 4>(out.data(), 1, h, w, channels),
                                     p);
  };
  const auto expect = [&](const SineEmbedding2dParams& p, Eigen::Index channels,
                          const std::string& what) {
    throws<std::invalid_argument>([&] { call(p, channels); }, what);
    for (const float v : out) REQUIRE(v == 7.0f);
  };
  SineEmbedding2dParams p = feats(4);
  expect(p, 6, "out channels = 6 must be 2 num_pos_feats = 8");
  p.num_pos_feats = 3;
  expect(p, 6, "num_pos_feats = 3 must be even");
  p = feats(4);
  p.temperature_width = 0.0;
  expect(p, 8, "temperature_width = 0 must be finite and > 0");
  p = feats(4);
  p.temperature_height = std::numeric_limits<double>::infinity();
  expect(p, 8, "temperature_height = inf");
  p = feats(4);
  p.eps = 0.0;
  expect(p, 8, "eps = 0 must be finite and > 0");
  p = feats(4);
  p.offset = std::nan("");
  expect(p, 8, "offset = nan must be finite");
  p = feats(4);
  p.scale = 1e306;
  p.offset = 0.5;
  expect(p, 8, "must be finite (offset = 0.5");
  p = feats(4);
  p.order = static_cast<SineAxisOrder>(5);
  expect(p, 8, "order = 5 is not a SineAxisOrder");
  // normalize = false leaves offset / eps / scale unread, as HF's class does.
  p = feats(4);
  p.normalize = false;
  p.eps = 0.0;
  CHECK_NOTHROW(call(p, 8));
  // Shapes: out's batch / H / W must be the mask's.
  std::fill(out.begin(), out.end(), 7.0f);
  throws<std::invalid_argument>(
      [&] {
        posenc::sine_embedding_2d<float>(
            posenc::ConstTensorView<std::uint8_t, 3>(mask.data(), 1, h, w),
            posenc::TensorView<float, 4>(out.data(), 1, w, h, 8), feats(4));
      },
      "must be [batch, H, W] of mask [1, 2, 3]");
  for (const float v : out) REQUIRE(v == 7.0f);
  throws<std::invalid_argument>(
      [&] {
        posenc::sine_embedding_2d<float>(posenc::TensorView<float, 3>(out.data(), 0, w, 8),
                                         feats(4));
      },
      "feature map 0 x 3");
  // A mask inside the output buffer would be overwritten while counted.
  std::vector<float> both(static_cast<std::size_t>(h * w * 8), 7.0f);
  const auto* bytes = reinterpret_cast<const std::uint8_t*>(both.data());
  throws<std::invalid_argument>(
      [&] {
        posenc::sine_embedding_2d<float>(posenc::ConstTensorView<std::uint8_t, 3>(bytes, 1, h, w),
                                         posenc::TensorView<float, 4>(both.data(), 1, h, w, 8),
                                         feats(4));
      },
      "out overlaps mask");
  for (const float v : both) REQUIRE(v == 7.0f);
}

TEST_CASE("sine embedding 2d: the plan's frequencies are T^(-2k / F) per axis", "[sine_2d]") {
  SineEmbedding2dParams p = feats(6);
  p.temperature_height = 20.0;
  p.temperature_width = 10000.0;
  const posenc::SineEmbedding2dPlan plan(p);
  CHECK(plan.dim() == 12);
  REQUIRE(plan.inv_freq_y().size() == 3);
  // 20^(-1/3) = 0.36840315, 20^(-2/3) = 0.13572088; 10000^(-1/3) = 0.04641589.
  CHECK_THAT(plan.inv_freq_y()[1], WithinAbs(0.368403149864039, 1e-14));
  CHECK_THAT(plan.inv_freq_y()[2], WithinAbs(0.135720880829745, 1e-14));
  CHECK_THAT(plan.inv_freq_x()[1], WithinAbs(0.046415888336128, 1e-14));
  CHECK(plan.inv_freq_x()[0] == 1.0);
}

TEST_CASE("sine embedding 2d: the learned row / column tables, column first, 50-row limit",
          "[sine_2d][learned]") {
  // Row r of row_embeddings holds 100 + r, row c of column_embeddings 200 + c (F = 2).
  const Eigen::Index rows = 4, columns = 5, f = 2;
  std::vector<float> row_table(static_cast<std::size_t>(rows * f)),
      column_table(static_cast<std::size_t>(columns * f));
  for (Eigen::Index r = 0; r < rows; ++r) {
    for (Eigen::Index c = 0; c < f; ++c)
      row_table[static_cast<std::size_t>(r * f + c)] = 100.0f + r;
  }
  for (Eigen::Index r = 0; r < columns; ++r) {
    for (Eigen::Index c = 0; c < f; ++c) {
      column_table[static_cast<std::size_t>(r * f + c)] = 200.0f + r;
    }
  }
  const posenc::ConstTensorView<float, 2> row_view(row_table.data(), rows, f);
  const posenc::ConstTensorView<float, 2> column_view(column_table.data(), columns, f);
  const Eigen::Index h = 3, w = 5;
  std::vector<float> out(static_cast<std::size_t>(h * w * 2 * f), 7.0f);
  posenc::learned_embedding_2d<float>(row_view, column_view,
                                      posenc::TensorView<float, 3>(out.data(), h, w, 2 * f));
  for (Eigen::Index i = 0; i < h; ++i) {
    for (Eigen::Index j = 0; j < w; ++j) {
      const float* t = out.data() + (i * w + j) * 2 * f;
      CHECK(t[0] == 200.0f + j);  // HF: cat([x_emb, y_emb]), the column's row first
      CHECK(t[1] == 200.0f + j);
      CHECK(t[2] == 100.0f + i);
      CHECK(t[3] == 100.0f + i);
    }
  }
  posenc::learned_embedding_2d<float>(row_view, column_view,
                                      posenc::TensorView<float, 3>(out.data(), h, w, 2 * f),
                                      SineAxisOrder::kYX);
  CHECK(out[static_cast<std::size_t>((2 * w + 1) * 2 * f)] == 102.0f);
  CHECK(out[static_cast<std::size_t>((2 * w + 1) * 2 * f + 2)] == 201.0f);
  // A map taller than the table has no trained rows: out_of_range, nothing written.
  std::vector<float> tall(static_cast<std::size_t>(5 * 2 * 2 * f), 7.0f);
  throws<std::out_of_range>(
      [&] {
        posenc::learned_embedding_2d<float>(row_view, column_view,
                                            posenc::TensorView<float, 3>(tall.data(), 5, 2, 2 * f));
      },
      "feature map height 5 exceeds the 4 rows of row_embeddings");
  for (const float v : tall) REQUIRE(v == 7.0f);
  std::vector<float> wide(static_cast<std::size_t>(1 * 6 * 2 * f), 7.0f);
  throws<std::out_of_range>(
      [&] {
        posenc::learned_embedding_2d<float>(row_view, column_view,
                                            posenc::TensorView<float, 3>(wide.data(), 1, 6, 2 * f));
      },
      "feature map width 6 exceeds the 5 rows of column_embeddings");
  throws<std::invalid_argument>(
      [&] {
        posenc::learned_embedding_2d<float>(row_view, column_view,
                                            posenc::TensorView<float, 3>(wide.data(), 1, 3, 3));
      },
      "out channels 3");
  for (const float v : wide) REQUIRE(v == 7.0f);
}

TEST_CASE("sine embedding 2d: the pixel mask resized as PyTorch's nearest interpolation",
          "[sine_2d][mask]") {
  // nearest_idx: equal sizes copy, an exact 2x upsample reads o / 2, otherwise floor(o s) with
  // s = in / out in float. 5 -> 3: s = 1.667, rows 0, 1, 3. 3 -> 5: s = 0.6, rows 0, 0, 1, 1, 2.
  // 4 -> 2: rows 0, 2. 2 -> 4 (2x): 0, 0, 1, 1.
  const auto resize_rows = [](Eigen::Index in_h, Eigen::Index out_h) {
    std::vector<std::uint8_t> in(static_cast<std::size_t>(in_h * 2), 0);
    std::vector<std::uint8_t> out(static_cast<std::size_t>(out_h * 2), 9);
    std::vector<Eigen::Index> picked(static_cast<std::size_t>(out_h), -1);
    for (Eigen::Index probe = 0; probe < in_h; ++probe) {  // one real row at a time
      std::fill(in.begin(), in.end(), std::uint8_t{0});
      in[static_cast<std::size_t>(probe * 2)] = 5;  // any nonzero value is real
      posenc::resize_pixel_mask_nearest(
          posenc::ConstTensorView<std::uint8_t, 3>(in.data(), 1, in_h, 2),
          posenc::TensorView<std::uint8_t, 3>(out.data(), 1, out_h, 2));
      for (Eigen::Index o = 0; o < out_h; ++o) {
        const std::uint8_t v = out[static_cast<std::size_t>(o * 2)];
        REQUIRE((v == 0 || v == 1));
        if (v == 1) picked[static_cast<std::size_t>(o)] = probe;
      }
    }
    return picked;
  };
  CHECK(resize_rows(5, 3) == std::vector<Eigen::Index>{0, 1, 3});
  CHECK(resize_rows(3, 5) == std::vector<Eigen::Index>{0, 0, 1, 1, 2});
  CHECK(resize_rows(4, 2) == std::vector<Eigen::Index>{0, 2});
  CHECK(resize_rows(2, 4) == std::vector<Eigen::Index>{0, 0, 1, 1});
  CHECK(resize_rows(3, 3) == std::vector<Eigen::Index>{0, 1, 2});
  // DETR at stride 32: an 800 x 1066 image in a batch padded to 800 x 1216; the 25 x 38 map is
  // real in its first ceil(1066 / 32) = 34 columns (column o reads pixel 32 o).
  const Eigen::Index ih = 800, iw = 1216;
  std::vector<std::uint8_t> pixels(static_cast<std::size_t>(ih * iw), 0);
  for (Eigen::Index i = 0; i < ih; ++i) {
    for (Eigen::Index j = 0; j < 1066; ++j) pixels[static_cast<std::size_t>(i * iw + j)] = 1;
  }
  std::vector<std::uint8_t> map(25 * 38, 9);
  posenc::resize_pixel_mask_nearest(
      posenc::ConstTensorView<std::uint8_t, 3>(pixels.data(), 1, ih, iw),
      posenc::TensorView<std::uint8_t, 3>(map.data(), 1, 25, 38));
  for (Eigen::Index i = 0; i < 25; ++i) {
    for (Eigen::Index j = 0; j < 38; ++j) {
      CHECK(map[static_cast<std::size_t>(i * 38 + j)] == (j < 34 ? 1 : 0));
    }
  }
  std::vector<std::uint8_t> wrong(2 * 25 * 38, 9);
  throws<std::invalid_argument>(
      [&] {
        posenc::resize_pixel_mask_nearest(
            posenc::ConstTensorView<std::uint8_t, 3>(pixels.data(), 1, ih, iw),
            posenc::TensorView<std::uint8_t, 3>(wrong.data(), 2, 25, 38));
      },
      "out batch = 2 must equal in's batch = 1");
  for (const std::uint8_t v : wrong) REQUIRE(v == 9);
}

TEST_CASE("sine embedding 2d: RT-DETR's table is [row | column], the legacy one transposed",
          "[sine_2d][sincos_grid]") {
  // embed_dim 8: P = 2 pairs per block, w = 1, 10000^(-1/2) = 0.01. Token t of a 2 x 3 map is
  // row t / 3, column t % 3 (HF's meshgrid indexing "xy"); channels
  // [sin r, sin .01r, cos r, cos .01r, sin c, sin .01c, cos c, cos .01c].
  const auto table = [](const posenc::SincosGridParams& params) {
    const posenc::SincosGridPlan plan(params);
    std::vector<double> out(static_cast<std::size_t>(plan.tokens() * plan.dim()));
    posenc::sincos_grid_table<double>(
        posenc::TensorView<double, 2>(out.data(), plan.tokens(), plan.dim()), plan);
    return out;
  };
  const auto t = table(posenc::sincos_grid_rt_detr(8, 2, 3));
  REQUIRE(t.size() == 6 * 8);
  const std::size_t token5 = 5 * 8;                                   // row 1, column 2
  CHECK_THAT(t[token5 + 0], WithinAbs(0.8414709848078965, 1e-15));    // sin 1
  CHECK_THAT(t[token5 + 1], WithinAbs(0.009999833334166665, 1e-15));  // sin 0.01
  CHECK_THAT(t[token5 + 2], WithinAbs(0.5403023058681398, 1e-15));    // cos 1
  CHECK_THAT(t[token5 + 4], WithinAbs(0.9092974268256817, 1e-15));    // sin 2
  CHECK_THAT(t[token5 + 7], WithinAbs(0.9998000066665778, 1e-15));    // cos 0.02
  // Legacy (meshgrid(grid_w, grid_h, "ij"), blocks [w | h]): token t is column t / 2, row
  // t % 2; token 5 is column 2, row 1, with the column's block first.
  const auto legacy = table(posenc::sincos_grid_rt_detr(8, 2, 3, 10000.0, true));
  CHECK_THAT(legacy[token5 + 0], WithinAbs(0.9092974268256817, 1e-15));  // sin 2 (column)
  CHECK_THAT(legacy[token5 + 4], WithinAbs(0.8414709848078965, 1e-15));  // sin 1 (row)
  // Token 1 differs: new = (row 0, column 1), legacy = (column 0, row 1).
  CHECK_THAT(t[8 + 4], WithinAbs(std::sin(1.0), 1e-15));
  CHECK_THAT(legacy[8 + 4], WithinAbs(std::sin(1.0), 1e-15));
  CHECK_THAT(t[8 + 0], WithinAbs(0.0, 1e-15));
  CHECK_THAT(legacy[8 + 0], WithinAbs(0.0, 1e-15));
  // Square maps: the two layouts are one table (640 x 640 inputs, a 20 x 20 map at stride 32).
  CHECK(table(posenc::sincos_grid_rt_detr(16, 4, 4)) ==
        table(posenc::sincos_grid_rt_detr(16, 4, 4, 10000.0, true)));
  // Every element against the long-double reference of the grid, 256 channels (HF's default).
  const auto params = posenc::sincos_grid_rt_detr(256, 3, 5, 10000.0);
  const auto big = table(params);
  for (Eigen::Index token = 0; token < 15; ++token) {
    for (Eigen::Index c = 0; c < 256; ++c) {
      const auto want = static_cast<double>(posenc::reference::sincos_grid_value(params, token, c));
      CHECK_THAT(big[static_cast<std::size_t>(token * 256 + c)], WithinAbs(want, 1e-15));
    }
  }
  throws<std::invalid_argument>([&] { posenc::sincos_grid_rt_detr(6, 2, 2); },
                                "embed_dim = 6 must be a positive multiple of 4");
  throws<std::invalid_argument>([&] { posenc::sincos_grid_rt_detr(8, 2, 2, -1.0); },
                                "temperature = -1 must be finite and > 0");
}

TEST_CASE("sine embedding 2d: maps wider than a strip of columns", "[sine_2d]") {
  // 1100 columns: three strips of the kernel's pass (512 columns each). Rows padded at random
  // lengths, one column fully padded, a few holes: every count crosses a strip boundary.
  posenc_test::SplitMix64 rng(1100);
  const Eigen::Index batch = 2, h = 3, w = 1100;
  std::vector<std::uint8_t> mask(static_cast<std::size_t>(batch * h * w));
  for (Eigen::Index b = 0; b < batch; ++b) {
    for (Eigen::Index i = 0; i < h; ++i) {
      const Eigen::Index real_columns = rng.integer(500, w);
      for (Eigen::Index j = 0; j < w; ++j) {
        const bool hole = posenc_test::coin(rng, 0.02) || j == 700;
        mask[static_cast<std::size_t>((b * h + i) * w + j)] = j < real_columns && !hole ? 1 : 0;
      }
    }
  }
  SineEmbedding2dParams p = feats(4);
  p.offset = 0.5;
  check_against_reference<double>(mask, batch, h, w, p, 0.0);
  check_against_reference<float>(mask, batch, h, w, p, 0x1p-24);
}

TEST_CASE("sine embedding 2d: query coordinates, [y | x | w | h] or the proposals' order",
          "[sine_2d][coordinates]") {
  // F = 4 (w = 1, 0.01). A box (x, y, w, h) = (0.25, 0.5, 0.125, 1): angles 2 pi v = pi / 2,
  // pi, pi / 4, 2 pi. swap_xy puts y's block first, as cat(pos_y, pos_x, pos_w, pos_h).
  const std::vector<double> box = {0.25, 0.5, 0.125, 1.0};
  posenc::CoordinateSineParams p;
  p.num_pos_feats = 4;
  std::vector<double> out(16, 7.0);
  posenc::coordinate_sine_embedding<double>(posenc::ConstTensorView<double, 2>(box.data(), 1, 4),
                                            posenc::TensorView<double, 2>(out.data(), 1, 16), p);
  const double r = 1.0 / std::sqrt(2.0);
  const std::vector<double> want = {
      0.0, -1.0, std::sin(0.01 * M_PI),   std::cos(0.01 * M_PI),    // y: pi
      1.0, 0.0,  std::sin(0.005 * M_PI),  std::cos(0.005 * M_PI),   // x: pi / 2
      r,   r,    std::sin(0.0025 * M_PI), std::cos(0.0025 * M_PI),  // w: pi / 4
      0.0, 1.0,  std::sin(0.02 * M_PI),   std::cos(0.02 * M_PI)};   // h: 2 pi
  for (std::size_t c = 0; c < 16; ++c) {
    CAPTURE(c);
    CHECK_THAT(out[c], WithinAbs(want[c], 1e-15));
  }
  // Deformable DETR's proposals keep (x, y, w, h).
  p.swap_xy = false;
  posenc::coordinate_sine_embedding<double>(posenc::ConstTensorView<double, 2>(box.data(), 1, 4),
                                            posenc::TensorView<double, 2>(out.data(), 1, 16), p);
  CHECK_THAT(out[0], WithinAbs(1.0, 1e-15));  // x first: sin(pi / 2)
  CHECK_THAT(out[4], WithinAbs(0.0, 1e-15));  // then y: sin(pi)
  CHECK_THAT(out[5], WithinAbs(-1.0, 1e-15));
}

TEST_CASE("sine embedding 2d: query coordinates against the long-double formula, every type",
          "[sine_2d][coordinates]") {
  // HF's gen_sine_position_embeddings per element: dim_t[c] = T^(2 floor(c / 2) / F), sin on
  // even and cos on odd channels of each coordinate's block.
  posenc_test::SplitMix64 rng(2);
  const auto run = [&](auto tag, double rounding) {
    using T = decltype(tag);
    for (int trial = 0; trial < 6; ++trial) {
      posenc::CoordinateSineParams p;
      p.num_pos_feats = 2 * rng.integer(1, 40);
      p.temperature = posenc_test::pick(rng, {10000.0, 20.0});
      p.swap_xy = trial % 2 == 0;
      const Eigen::Index n = rng.integer(1, 30), k = posenc_test::pick<Eigen::Index>(rng, {2, 4});
      std::vector<T> coords(static_cast<std::size_t>(n * k));
      for (auto& v : coords) v = posenc::detail::from_value<T>(0.5 * (rng.uniform() + 1.0));
      std::vector<T> out(static_cast<std::size_t>(n * k * p.num_pos_feats), T(7.0f));
      posenc::coordinate_sine_embedding<T>(
          posenc::ConstTensorView<T, 2>(coords.data(), n, k),
          posenc::TensorView<T, 2>(out.data(), n, k * p.num_pos_feats), p);
      const Eigen::Index f = p.num_pos_feats;
      for (Eigen::Index q = 0; q < n; ++q) {
        for (Eigen::Index c = 0; c < k; ++c) {
          const Eigen::Index block = p.swap_xy && c < 2 ? 1 - c : c;
          const long double a = static_cast<long double>(posenc::detail::to_double(
                                    coords[static_cast<std::size_t>(q * k + c)])) *
                                2.0L * 3.141592653589793238462643383279502884L;
          for (Eigen::Index ch = 0; ch < f; ++ch) {
            const long double dim_t =
                std::pow(static_cast<long double>(p.temperature),
                         2.0L * static_cast<long double>(ch / 2) / static_cast<long double>(f));
            const long double v = ch % 2 == 0 ? std::sin(a / dim_t) : std::cos(a / dim_t);
            const double got = posenc::detail::to_double(
                out[static_cast<std::size_t>(q * k * f + block * f + ch)]);
            CAPTURE(trial, q, c, ch);
            CHECK_THAT(
                got, WithinAbs(static_cast<double>(v), rounding * std::abs(static_cast<double>(v)) +
                                                           1e-14 + subnormal_rounding<T>()));
          }
        }
      }
    }
  };
  run(double{}, 0.0);
  run(float{}, 0x1p-24);
  run(Eigen::half{}, 0x1p-11);
  run(Eigen::bfloat16{}, 0x1p-8);
}

TEST_CASE("sine embedding 2d: bad query coordinates throw, nothing written",
          "[sine_2d][coordinates][errors]") {
  std::vector<float> coords = {0.5f, std::nanf(""), 0.25f, 0.75f};
  std::vector<float> out(2 * 2 * 4, 7.0f);
  posenc::CoordinateSineParams p;
  p.num_pos_feats = 4;
  const auto call = [&](Eigen::Index n, Eigen::Index k, Eigen::Index width) {
    posenc::coordinate_sine_embedding<float>(posenc::ConstTensorView<float, 2>(coords.data(), n, k),
                                             posenc::TensorView<float, 2>(out.data(), n, width), p);
  };
  throws<std::invalid_argument>([&] { call(2, 2, 8); }, "coords[0, 1] = nan");
  coords[1] = 0.5f;
  throws<std::invalid_argument>([&] { call(2, 2, 6); },
                                "out shape [2, 6] must be [queries = 2, coordinates x "
                                "num_pos_feats = 8]");
  p.num_pos_feats = 5;
  throws<std::invalid_argument>([&] { call(2, 2, 10); }, "num_pos_feats = 5 must be even");
  p.num_pos_feats = 4;
  p.temperature = 0.0;
  throws<std::invalid_argument>([&] { call(2, 2, 8); }, "temperature = 0 must be finite");
  p.temperature = 10000.0;
  for (const float v : out) REQUIRE(v == 7.0f);
  std::vector<float> nine(9, 0.5f), wide(9 * 4, 7.0f);
  throws<std::invalid_argument>(
      [&] {
        posenc::coordinate_sine_embedding<float>(
            posenc::ConstTensorView<float, 2>(nine.data(), 1, 9),
            posenc::TensorView<float, 2>(wide.data(), 1, 36), p);
      },
      "coords has 9 coordinates per query: must be in [1, 8]");
  for (const float v : wide) REQUIRE(v == 7.0f);
  // In place is refused: the coordinates would be overwritten while read.
  std::vector<float> shared(2 * 8, 0.25f);
  throws<std::invalid_argument>(
      [&] {
        posenc::coordinate_sine_embedding<float>(
            posenc::ConstTensorView<float, 2>(shared.data(), 2, 2),
            posenc::TensorView<float, 2>(shared.data(), 2, 8), p);
      },
      "out overlaps coords");
  for (const float v : shared) REQUIRE(v == 0.25f);
}
