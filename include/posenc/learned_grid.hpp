#pragma once
/// \file posenc/learned_grid.hpp
/// Resizing a learned 2-D grid of position embeddings, the way vision encoders run at a
/// resolution they were not trained at (HF ViT / CLIP / SigLIP / DINOv2 `interpolate_pos_encoding`,
/// the vision towers of LLaVA-style VLMs): the patch rows of the table, seen as an in_h x in_w
/// image with d_model channels, are resampled to out_h x out_w exactly as
/// torch.nn.functional.interpolate(mode = "bicubic" or "bilinear", antialias = False) does.
/// A class-token row (ViT, CLIP) is not part of the grid: pass the patch rows only.
///
/// Per axis, output index o reads the source coordinate (PyTorch's area_pixel_compute_*):
///
///   align_corners:  x = o (in - 1) / (out - 1)           (0 when out = 1)
///   otherwise:      x = (o + 0.5) s - 0.5,  s = in / out, or 1 / scale_factor when the caller's
///                   model passes a scale factor (DINOv2); bilinear clamps x < 0 to 0
///
/// bilinear: i = floor(x), weights 1 - t, t on rows i, min(i + 1, in - 1) (t = x - i);
/// bicubic:  i = min(floor(x), in - 1), t = clamp(x - i, 0, 1), Keys' cubic convolution with
///           A = -0.75 on rows i - 1 .. i + 2 clamped to [0, in - 1]:
///             W(u) = (A + 2)|u|^3 - (A + 3)|u|^2 + 1          |u| <= 1
///             W(u) = A|u|^3 - 5A|u|^2 + 8A|u| - 4A             1 < |u| < 2
///
/// so bicubic overshoots at edges (a 1 x 2 grid [0, 1] to 1 x 4 gives -0.1055, 0.2266, 0.7734,
/// 1.1055). The sums are formed in double and rounded once to the table's type. The resized
/// rows are still untrained: the model was never taught these positions.

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <string_view>
#include <vector>

#include "posenc/detail/numeric.hpp"
#include "posenc/error.hpp"
#include "posenc/tensor.hpp"

namespace posenc {

/// The resampling filter (torch.nn.functional.interpolate's mode).
enum class GridInterpolation : std::uint8_t {
  kBicubic = 0,   ///< ViT, CLIP, SigLIP, DINOv2
  kBilinear = 1,  ///< some Swin / BEiT ports, Qwen2-VL-style tools
};

constexpr std::string_view to_string(GridInterpolation mode) noexcept {
  switch (mode) {
    case GridInterpolation::kBicubic: return "bicubic";
    case GridInterpolation::kBilinear: return "bilinear";
  }
  return "unknown";
}

/// How resize_learned_grid samples (the arguments of the model's interpolate call).
struct GridResize {
  GridInterpolation mode = GridInterpolation::kBicubic;
  bool align_corners = false;
  /// interpolate(scale_factor = (h, w)) as DINOv2 passes it: the source step becomes 1 / factor
  /// instead of in / out (with recompute_scale_factor unset). 0 = from the sizes.
  double scale_factor_h = 0.0, scale_factor_w = 0.0;
};

namespace detail {

/// One output index's source rows and weights along an axis.
struct GridTaps {
  std::array<Eigen::Index, 4> row{};
  std::array<double, 4> weight{};
  int count = 0;
};

inline double cubic_weight(double u) {
  constexpr double a = -0.75;
  u = std::abs(u);
  if (u <= 1.0) return ((a + 2.0) * u - (a + 3.0)) * u * u + 1.0;
  if (u < 2.0) return ((a * u - 5.0 * a) * u + 8.0 * a) * u - 4.0 * a;
  return 0.0;
}

/// PyTorch's taps for output index o of an axis of `in` rows resized to `out`.
inline GridTaps grid_taps(Eigen::Index o, Eigen::Index in, Eigen::Index out, double scale_factor,
                          GridInterpolation mode, bool align_corners) {
  double step = 0.0;
  if (align_corners) {
    step = out > 1 ? static_cast<double>(in - 1) / static_cast<double>(out - 1) : 0.0;
  } else {
    step = scale_factor > 0.0 ? 1.0 / scale_factor : static_cast<double>(in) / static_cast<double>(out);
  }
  // Past the last row every tap is row in - 1 with weights summing to 1, so x = in reads the
  // same; the clamp keeps a tiny scale factor (x ~ 1e29) from an undefined integer conversion.
  double x = std::min(align_corners ? step * static_cast<double>(o)
                                    : step * (static_cast<double>(o) + 0.5) - 0.5,
                      static_cast<double>(in));
  GridTaps taps;
  const auto clamp_row = [in](Eigen::Index r) { return std::clamp<Eigen::Index>(r, 0, in - 1); };
  if (mode == GridInterpolation::kBilinear) {
    if (x < 0.0) x = 0.0;
    const auto i = std::min(static_cast<Eigen::Index>(x), in - 1);
    const double t = x - static_cast<double>(i);
    taps.row = {i, clamp_row(i + 1), 0, 0};
    taps.weight = {1.0 - t, t, 0.0, 0.0};
    taps.count = 2;
    return taps;
  }
  const auto i = std::min(static_cast<Eigen::Index>(std::floor(x)), in - 1);
  const double t = std::clamp(x - static_cast<double>(i), 0.0, 1.0);
  for (int k = 0; k < 4; ++k) {
    taps.row[static_cast<std::size_t>(k)] = clamp_row(i - 1 + k);
    taps.weight[static_cast<std::size_t>(k)] = cubic_weight(t - static_cast<double>(k - 1));
  }
  taps.count = 4;
  return taps;
}

}  // namespace detail

/// \brief Resamples a learned position grid (see the file comment).
/// table: [in_h * in_w, d_model], row y * in_w + x = grid cell (y, x);
/// out: [out_h * out_w, d_model]. out must not alias table.
/// Throws std::invalid_argument (sizes <= 0, table or out rows not matching the grids, a
/// non-finite or negative scale factor, mode outside GridInterpolation) before writing anything.
template <typename T>
void resize_learned_grid(ConstTensorView<T, 2> table, Eigen::Index in_h, Eigen::Index in_w,
                         TensorView<T, 2> out, Eigen::Index out_h, Eigen::Index out_w,
                         const GridResize& options = {}) {
  static_assert(detail::is_storage_type_v<T>, "posenc: table must be float, double, half or bfloat16");
  constexpr std::string_view fn = "resize_learned_grid";
  detail::require(in_h > 0 && in_w > 0 && out_h > 0 && out_w > 0, fn, "grids ", in_h, " x ",
                  in_w, " -> ", out_h, " x ", out_w, " must have positive sizes");
  const Eigen::Index d = table.dimension(1);
  detail::require(table.dimension(0) == in_h * in_w && d > 0, fn, "table shape [",
                  table.dimension(0), ", ", d, "] must be [in_h * in_w = ", in_h * in_w,
                  ", d_model > 0]");
  detail::require(out.dimension(0) == out_h * out_w && out.dimension(1) == d, fn, "out shape [",
                  out.dimension(0), ", ", out.dimension(1), "] must be [out_h * out_w = ",
                  out_h * out_w, ", d_model = ", d, "]");
  detail::require(options.mode == GridInterpolation::kBicubic ||
                      options.mode == GridInterpolation::kBilinear,
                  fn, "mode = ", static_cast<int>(options.mode), " is not a GridInterpolation");
  for (const double f : {options.scale_factor_h, options.scale_factor_w}) {
    detail::require(std::isfinite(f) && f >= 0.0, fn, "scale factor = ", f,
                    " must be finite and >= 0 (0: from the sizes)");
  }
  std::vector<detail::GridTaps> ys(static_cast<std::size_t>(out_h)), xs(static_cast<std::size_t>(out_w));
  for (Eigen::Index o = 0; o < out_h; ++o) {
    ys[static_cast<std::size_t>(o)] = detail::grid_taps(o, in_h, out_h, options.scale_factor_h,
                                                        options.mode, options.align_corners);
  }
  for (Eigen::Index o = 0; o < out_w; ++o) {
    xs[static_cast<std::size_t>(o)] = detail::grid_taps(o, in_w, out_w, options.scale_factor_w,
                                                        options.mode, options.align_corners);
  }
  std::vector<double> acc(static_cast<std::size_t>(d));
  for (Eigen::Index oy = 0; oy < out_h; ++oy) {
    const auto& ty = ys[static_cast<std::size_t>(oy)];
    for (Eigen::Index ox = 0; ox < out_w; ++ox) {
      const auto& tx = xs[static_cast<std::size_t>(ox)];
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int a = 0; a < ty.count; ++a) {
        for (int b = 0; b < tx.count; ++b) {
          const double w = ty.weight[static_cast<std::size_t>(a)] * tx.weight[static_cast<std::size_t>(b)];
          const T* src = table.data() + (ty.row[static_cast<std::size_t>(a)] * in_w +
                                         tx.row[static_cast<std::size_t>(b)]) * d;
          for (Eigen::Index c = 0; c < d; ++c) acc[static_cast<std::size_t>(c)] += w * detail::to_double(src[c]);
        }
      }
      T* dst = out.data() + (oy * out_w + ox) * d;
      for (Eigen::Index c = 0; c < d; ++c) dst[c] = detail::from_value<T>(acc[static_cast<std::size_t>(c)]);
    }
  }
}

}  // namespace posenc
