#pragma once
/// \file posenc/sine_embedding_2d.hpp
/// DETR's position embeddings of a padded feature map (Carion et al. 2020, §3.2 and
/// Appendix A.4): the 2-D sine embedding of DETR, Conditional / Deformable / DAB-DETR, Table
/// Transformer, Grounding DINO and the Mask2Former family, and DETR's learned row / column
/// alternative (`position_embedding_type: "learned"`). They are added to the queries and keys
/// of every encoder layer, not to the input.
///
/// A batch of images is padded to one size; m[b, i, j] = 1 marks a real pixel of the H x W
/// feature map (HF's pixel_mask, nearest-resized to the map: resize_pixel_mask_nearest).
/// Coordinates count the real pixels up to and including (i, j) along each axis, and are
/// normalised by the count of the whole column / row (HF DetrSinePositionEmbedding):
///
///   cy = sum_{r <= i} m[b, r, j]        ty = cy at i = H - 1      (column j's real pixels)
///   cx = sum_{c <= j} m[b, i, c]        tx = cx at j = W - 1      (row i's real pixels)
///   y  = (cy - offset) / (ty + eps) scale,    x = (cx - offset) / (tx + eps) scale
///
/// (normalize = false: y = cy, x = cx). An image's real pixels therefore get exactly the
/// embedding they would get unpadded (the same counts and totals). Padded pixels keep the
/// count of the last real pixel before them, as in HF; the attention masks them as keys. Each axis
/// is a block of F = num_pos_feats channels, Vaswani's interleaved layout
/// (SinusoidalLayout::kInterleaved) with frequencies w_k = temperature^(-2k / F):
///
///   [sin(y w_0) cos(y w_0) .. sin(y w_{F/2-1}) cos(y w_{F/2-1}) | the same of x]   (kYX)
///
/// DETR, 2 x 3 map, F = 4 (row of token (i, j); "s1" = sin(y w_1)):
///
///   channel:  0   1   2   3   4   5   6   7
///             sy0 cy0 sy1 cy1 sx0 cx0 sx1 cx1        y = (i + 1) / (2 + 1e-6) 2 pi
///                                                    x = (j + 1) / (3 + 1e-6) 2 pi
///
/// Model recipes (HF builders; F = d_model / 2 everywhere):
///   DETR, Conditional DETR, Table Transformer, MaskFormer, Mask2Former, OneFormer: the
///     defaults (temperature 10000, offset 0, eps 1e-6, scale 2 pi, normalize). The Mask*Former
///     models pass no mask: every pixel is real.
///   Deformable DETR (and DETA): offset 0.5 ((cumsum - 0.5) / (last + eps) scale).
///   DAB-DETR: temperature_height / temperature_width (20 / 20).
///   Grounding DINO, MM Grounding DINO: temperature 20 (positional_embedding_temperature).
/// RT-DETR / D-FINE's fixed table takes raw indices and no mask: sincos_grid_rt_detr
/// (sincos_grid.hpp). The decoders' query positions (anchor points and boxes) are
/// coordinate_sine_embedding.
///
/// HF forms the coordinates and angles in float32 (the newer files in the feature dtype, which
/// can be bfloat16); posenc forms them in double and rounds the sin / cos once to the storage
/// type, so float results differ from HF's by up to ~1e-6 (float32 angle rounding near 2 pi).
/// Only padded pixels before any real one, with offset != 0, reach large angles (-offset /
/// eps scale = -3.1e6 for Deformable DETR's empty columns), where float32 keeps no digit of
/// the angle: HF's values there are noise, posenc's are the double formula's.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string_view>
#include <type_traits>
#include <vector>

#include "posenc/detail/numeric.hpp"
#include "posenc/error.hpp"
#include "posenc/sinusoidal.hpp"
#include "posenc/tensor.hpp"

namespace posenc {

/// Which axis fills the first half of a row.
enum class SineAxisOrder : std::uint8_t {
  kYX = 0,  ///< [y block | x block]  every sine embedding above (torch.cat((pos_y, pos_x)))
  kXY = 1,  ///< [x block | y block]  DETR's learned embedding (cat(column, row))
};

constexpr std::string_view to_string(SineAxisOrder order) noexcept {
  switch (order) {
    case SineAxisOrder::kYX:
      return "yx";
    case SineAxisOrder::kXY:
      return "xy";
  }
  return "unknown";
}

struct SineEmbedding2dParams {
  Eigen::Index num_pos_feats = 128;     ///< F: channels per axis, even, in [2, 2^20]; rows hold 2F
  double temperature_height = 10000.0;  ///< the y block's base; finite and > 0
  double temperature_width = 10000.0;   ///< the x block's base; finite and > 0
  bool normalize = true;                ///< false: raw counts (offset, eps, scale unused)
  double offset = 0.0;               ///< subtracted from the count: 0.5 for Deformable DETR; finite
  double eps = 1e-6;                 ///< added to the column / row count; finite and > 0
  double scale = 6.283185307179586;  ///< 2 pi; finite
  SineAxisOrder order = SineAxisOrder::kYX;
};

/// Largest feature-map side the calls accept (DETR's maps: <= 400 at stride 4 of 1600 pixels).
inline constexpr Eigen::Index kMaxSineEmbeddingSide = Eigen::Index{1} << 20;

namespace detail {

inline void validate_sine_embedding_2d(std::string_view fn, const SineEmbedding2dParams& p) {
  const Eigen::Index f = p.num_pos_feats;
  require(f >= 2 && f % 2 == 0 && f <= kMaxSinusoidalDim, fn, "num_pos_feats = ", f,
          " must be even and in [2, 2^20] (sin / cos pairs per axis)");
  require(std::isfinite(p.temperature_height) && p.temperature_height > 0.0, fn,
          "temperature_height = ", p.temperature_height, " must be finite and > 0");
  require(std::isfinite(p.temperature_width) && p.temperature_width > 0.0, fn,
          "temperature_width = ", p.temperature_width, " must be finite and > 0");
  require(p.order == SineAxisOrder::kYX || p.order == SineAxisOrder::kXY, fn,
          "order = ", static_cast<int>(p.order), " is not a SineAxisOrder");
  if (p.normalize) {
    require(std::isfinite(p.offset), fn, "offset = ", p.offset, " must be finite");
    require(std::isfinite(p.eps) && p.eps > 0.0, fn, "eps = ", p.eps,
            " must be finite and > 0 (it divides an empty column's count)");
    require(std::isfinite(p.scale), fn, "scale = ", p.scale, " must be finite");
  }
}

/// The largest |coordinate| a side of n pixels can give.
inline double largest_sine_coordinate(const SineEmbedding2dParams& p, Eigen::Index n) {
  const double count = static_cast<double>(n);
  if (!p.normalize) return count;
  return std::max(std::abs(count - p.offset), std::abs(p.offset)) / p.eps * std::abs(p.scale);
}

inline SinusoidalParams sine_axis_params(double temperature) {
  SinusoidalParams s;
  s.layout = SinusoidalLayout::kInterleaved;
  s.base = temperature;
  return s;
}

}  // namespace detail

/// The parameters and both axes' frequencies, computed once: build it outside a hot loop;
/// sine_embedding_2d then allocates nothing.
class SineEmbedding2dPlan {
 public:
  /// Throws std::invalid_argument naming the parameter (see SineEmbedding2dParams' limits).
  explicit SineEmbedding2dPlan(const SineEmbedding2dParams& params) : params_(params) {
    detail::validate_sine_embedding_2d("SineEmbedding2dPlan", params_);
    const Eigen::Index f = params_.num_pos_feats;
    const SinusoidalParams y = detail::sine_axis_params(params_.temperature_height);
    const SinusoidalParams x = detail::sine_axis_params(params_.temperature_width);
    inv_freq_y_.resize(static_cast<std::size_t>(f / 2));
    inv_freq_x_.resize(static_cast<std::size_t>(f / 2));
    for (Eigen::Index k = 0; k < f / 2; ++k) {
      inv_freq_y_[static_cast<std::size_t>(k)] = detail::sinusoidal_frequency(k, f, y);
      inv_freq_x_[static_cast<std::size_t>(k)] = detail::sinusoidal_frequency(k, f, x);
    }
  }

  const SineEmbedding2dParams& params() const noexcept { return params_; }
  /// Channels per token: 2 num_pos_feats.
  Eigen::Index dim() const noexcept { return 2 * params_.num_pos_feats; }
  /// w_k of the y block (temperature_height) and of the x block, k in [0, F / 2).
  const std::vector<double>& inv_freq_y() const noexcept { return inv_freq_y_; }
  const std::vector<double>& inv_freq_x() const noexcept { return inv_freq_x_; }

 private:
  SineEmbedding2dParams params_;
  std::vector<double> inv_freq_y_, inv_freq_x_;
};

namespace detail {

inline double sine_coordinate(const SineEmbedding2dParams& p, std::int64_t count,
                              std::int64_t total) {
  const double c = static_cast<double>(count);
  if (!p.normalize) return c;
  return (c - p.offset) / (static_cast<double>(total) + p.eps) * p.scale;
}

/// One axis block, [sin(v w_0) cos(v w_0) sin(v w_1) ..].
template <typename T>
void sine_block(T* dst, double coordinate, const std::vector<double>& inv_freq) {
  for (std::size_t k = 0; k < inv_freq.size(); ++k) {
    const double angle = coordinate * inv_freq[k];
    dst[2 * k] = from_value<T>(std::sin(angle));
    dst[2 * k + 1] = from_value<T>(std::cos(angle));
  }
}

/// Columns per strip of the pass over an image: each keeps its running count, its total and
/// whether it equals the column before it on the stack (17 bytes a column).
inline constexpr Eigen::Index kSineStripColumns = 512;

/// One image, row by row. A block depends only on its (count, total), so sin / cos are
/// evaluated once per distinct mask row (x) and column (y): a block whose count did not grow
/// (padding) or whose row / column equals the previous one copies its neighbour's, from the
/// token to the left (just written) or the one above. An unpadded H x W map evaluates
/// (H + W) F / 2 sin / cos pairs and writes H W 2F values; wider maps go in strips of columns.
template <typename T, typename IsReal>
void sine_embedding_image(const SineEmbedding2dPlan& plan, Eigen::Index h, Eigen::Index w,
                          IsReal is_real, T* out) {
  const SineEmbedding2dParams& p = plan.params();
  const Eigen::Index f = p.num_pos_feats;
  const Eigen::Index dim = 2 * f;
  const Eigen::Index y_off = p.order == SineAxisOrder::kYX ? 0 : f;
  const Eigen::Index x_off = f - y_off;
  const auto at = [&](Eigen::Index i, Eigen::Index j) { return out + (i * w + j) * dim; };
  std::int64_t count_y[kSineStripColumns], total_y[kSineStripColumns];
  bool same_column[kSineStripColumns];
  for (Eigen::Index j0 = 0; j0 < w; j0 += kSineStripColumns) {
    const Eigen::Index j1 = std::min(w, j0 + kSineStripColumns);
    for (Eigen::Index j = j0; j < j1; ++j) {
      const auto s = static_cast<std::size_t>(j - j0);
      count_y[s] = total_y[s] = 0;
      same_column[s] = j > 0;
      for (Eigen::Index i = 0; i < h; ++i) {
        total_y[s] += is_real(i, j) ? 1 : 0;
        same_column[s] = same_column[s] && is_real(i, j) == is_real(i, j - 1);
      }
    }
    for (Eigen::Index i = 0; i < h; ++i) {
      bool same_row = i > 0;
      std::int64_t total_x = 0, count_x = 0;
      for (Eigen::Index j = 0; j < w; ++j) {
        same_row = same_row && is_real(i, j) == is_real(i - 1, j);
        total_x += is_real(i, j) ? 1 : 0;
        count_x += j < j0 && is_real(i, j) ? 1 : 0;
      }
      for (Eigen::Index j = j0; j < j1; ++j) {
        const auto s = static_cast<std::size_t>(j - j0);
        T* dst = at(i, j);
        const bool real = is_real(i, j);
        count_x += real ? 1 : 0;
        count_y[s] += real ? 1 : 0;
        if (j > 0 && !real) {
          std::copy_n(at(i, j - 1) + x_off, f, dst + x_off);
        } else if (same_row) {
          std::copy_n(at(i - 1, j) + x_off, f, dst + x_off);
        } else {
          sine_block(dst + x_off, sine_coordinate(p, count_x, total_x), plan.inv_freq_x());
        }
        if (same_column[s]) {
          std::copy_n(at(i, j - 1) + y_off, f, dst + y_off);
        } else if (i > 0 && !real) {
          std::copy_n(at(i - 1, j) + y_off, f, dst + y_off);
        } else {
          sine_block(dst + y_off, sine_coordinate(p, count_y[s], total_y[s]), plan.inv_freq_y());
        }
      }
    }
  }
}

inline void validate_sine_output(std::string_view fn, const SineEmbedding2dPlan& plan,
                                 Eigen::Index h, Eigen::Index w, Eigen::Index channels) {
  require(h >= 1 && h <= kMaxSineEmbeddingSide && w >= 1 && w <= kMaxSineEmbeddingSide, fn,
          "feature map ", h, " x ", w, ": each side must be in [1, 2^20]");
  require(channels == plan.dim(), fn, "out channels = ", channels,
          " must be 2 num_pos_feats = ", plan.dim());
  const SineEmbedding2dParams& p = plan.params();
  const double wy =
      largest_sinusoidal_frequency(p.num_pos_feats, sine_axis_params(p.temperature_height));
  const double wx =
      largest_sinusoidal_frequency(p.num_pos_feats, sine_axis_params(p.temperature_width));
  const double ay = largest_sine_coordinate(p, h) * wy;
  const double ax = largest_sine_coordinate(p, w) * wx;
  require(std::isfinite(ay) && std::isfinite(ax), fn, "the largest angles ", ay, " (y) and ", ax,
          " (x) of a ", h, " x ", w, " map must be finite (offset = ", p.offset, ", eps = ", p.eps,
          ", scale = ", p.scale, ")");
}

}  // namespace detail

/// \brief DETR's sine embedding of a padded batch (file comment), no allocation.
/// mask: [batch, H, W], nonzero = real pixel (HF pixel_mask; the Mask2Former family's
/// padding mask is its complement); out: [batch, H, W, 2 num_pos_feats], token (i, j) at row
/// i W + j: HF's pos.flatten(2).permute(0, 2, 1), what the encoder adds to q and k.
/// Throws std::invalid_argument for mismatched shapes or angles that are not finite, before
/// writing anything.
template <typename T>
void sine_embedding_2d(ConstTensorView<std::uint8_t, 3> mask, TensorView<T, 4> out,
                       const SineEmbedding2dPlan& plan) {
  static_assert(detail::is_storage_type_v<T>,
                "posenc: storage type must be float, double, "
                "Eigen::half or Eigen::bfloat16");
  constexpr std::string_view fn = "sine_embedding_2d";
  const Eigen::Index batch = mask.dimension(0), h = mask.dimension(1), w = mask.dimension(2);
  detail::require(out.dimension(0) == batch && out.dimension(1) == h && out.dimension(2) == w, fn,
                  "out shape [", out.dimension(0), ", ", out.dimension(1), ", ", out.dimension(2),
                  ", ", out.dimension(3), "] must be [batch, H, W] of mask [", batch, ", ", h, ", ",
                  w, "] and 2 num_pos_feats = ", plan.dim(), " channels");
  detail::require(batch >= 1, fn, "batch = ", batch, " must be >= 1");
  detail::validate_sine_output(fn, plan, h, w, out.dimension(3));
  const std::size_t values =
      detail::checked_elements(fn, "out", {batch, h, w, plan.dim()}, sizeof(T));
  detail::require(!detail::bytes_overlap(mask.data(), static_cast<std::size_t>(batch * h * w),
                                         out.data(), values * sizeof(T)),
                  fn, "out overlaps mask: the embedding would overwrite the pixels it counts");
  for (Eigen::Index b = 0; b < batch; ++b) {
    const std::uint8_t* m = mask.data() + b * h * w;
    detail::sine_embedding_image(
        plan, h, w, [m, w](Eigen::Index i, Eigen::Index j) { return m[i * w + j] != 0; },
        out.data() + b * h * w * plan.dim());
  }
}

/// \brief The embedding of one unpadded map (every pixel real: the Mask*Former models, or a
/// batch without padding, whose images all share it). out: [H, W, 2 num_pos_feats].
template <typename T>
void sine_embedding_2d(TensorView<T, 3> out, const SineEmbedding2dPlan& plan) {
  static_assert(detail::is_storage_type_v<T>,
                "posenc: storage type must be float, double, "
                "Eigen::half or Eigen::bfloat16");
  const Eigen::Index h = out.dimension(0), w = out.dimension(1);
  detail::validate_sine_output("sine_embedding_2d", plan, h, w, out.dimension(2));
  (void)detail::checked_elements("sine_embedding_2d", "out", {h, w, plan.dim()}, sizeof(T));
  detail::sine_embedding_image(
      plan, h, w, [](Eigen::Index, Eigen::Index) { return true; }, out.data());
}

/// \brief Convenience overloads: plan (validating the parameters first), then embed.
template <typename T>
void sine_embedding_2d(ConstTensorView<std::uint8_t, 3> mask, TensorView<T, 4> out,
                       const SineEmbedding2dParams& params = {}) {
  sine_embedding_2d<T>(mask, out, SineEmbedding2dPlan(params));
}

template <typename T>
void sine_embedding_2d(TensorView<T, 3> out, const SineEmbedding2dParams& params = {}) {
  sine_embedding_2d<T>(out, SineEmbedding2dPlan(params));
}

/// A detection decoder's query positions: each of a query's k coordinates v (an anchor
/// point (x, y) or box (x, y, w, h), normalised to [0, 1]) becomes a block of F channels,
/// [sin(a w_0) cos(a w_0) .. sin(a w_{F/2-1}) cos(a w_{F/2-1})], a = scale v,
/// w_j = temperature^(-2j / F): Conditional DETR's and DAB-DETR's gen_sine_position_embeddings
/// (F = d_model / 2, blocks [y | x] or [y | x | w | h]: swap_xy), Grounding DINO's
/// get_sine_pos_embed (exchange_xy, F 128), Deformable DETR's get_proposal_pos_embed (F 128,
/// the proposals' own order [x | y | w | h]: swap_xy false, and v = sigmoid(the proposal's
/// logits), which the caller applies). HF forms a and the angles in float32.
struct CoordinateSineParams {
  Eigen::Index num_pos_feats = 128;  ///< F: channels per coordinate, even, in [2, 2^20]
  double temperature = 10000.0;      ///< finite and > 0
  double scale = 6.283185307179586;  ///< 2 pi; finite
  bool swap_xy = true;               ///< blocks (y, x, w, h) for coordinates (x, y, w, h)
};

/// Most coordinates a query may have (boxes have 4).
inline constexpr Eigen::Index kMaxSineCoordinates = 8;

/// \brief out[q] = the blocks of coords[q]'s coordinates (above), no allocation.
/// coords: [queries, k], k in [1, 8]; out: [queries, k num_pos_feats].
/// Throws std::invalid_argument for mismatched shapes, bad parameters or a coordinate whose
/// angles are not finite, before writing anything.
template <typename T>
void coordinate_sine_embedding(ConstTensorView<T, 2> coords, TensorView<T, 2> out,
                               const CoordinateSineParams& params = {}) {
  static_assert(detail::is_storage_type_v<T>,
                "posenc: storage type must be float, double, "
                "Eigen::half or Eigen::bfloat16");
  constexpr std::string_view fn = "coordinate_sine_embedding";
  const Eigen::Index n = coords.dimension(0), k = coords.dimension(1);
  const Eigen::Index f = params.num_pos_feats;
  detail::require(f >= 2 && f % 2 == 0 && f <= kMaxSinusoidalDim, fn, "num_pos_feats = ", f,
                  " must be even and in [2, 2^20]");
  detail::require(std::isfinite(params.temperature) && params.temperature > 0.0, fn,
                  "temperature = ", params.temperature, " must be finite and > 0");
  detail::require(std::isfinite(params.scale), fn, "scale = ", params.scale, " must be finite");
  detail::require(k >= 1 && k <= kMaxSineCoordinates, fn, "coords has ", k,
                  " coordinates per query: must be in [1, 8]");
  detail::require(out.dimension(0) == n && out.dimension(1) == k * f, fn, "out shape [",
                  out.dimension(0), ", ", out.dimension(1), "] must be [queries = ", n,
                  ", coordinates x num_pos_feats = ", k * f, "]");
  const std::size_t values = detail::checked_elements(fn, "out", {n, k * f}, sizeof(T));
  detail::require(!detail::bytes_overlap(coords.data(), static_cast<std::size_t>(n * k) * sizeof(T),
                                         out.data(), values * sizeof(T)),
                  fn, "out overlaps coords: the coordinates would be overwritten while read");
  const SinusoidalParams frequencies = detail::sine_axis_params(params.temperature);
  const double w_max = detail::largest_sinusoidal_frequency(f, frequencies);
  for (Eigen::Index q = 0; q < n; ++q) {
    for (Eigen::Index c = 0; c < k; ++c) {
      const double v = detail::to_double(coords(q, c));
      detail::require(std::isfinite(v * params.scale * w_max), fn, "coords[", q, ", ", c, "] = ", v,
                      " times scale ", params.scale, " and the largest frequency ", w_max,
                      " must be finite");
    }
  }
  // Frequency by frequency: F / 2 pow calls per call, and nothing to store.
  for (Eigen::Index j = 0; j < f / 2; ++j) {
    const double w = detail::sinusoidal_frequency(j, f, frequencies);
    for (Eigen::Index q = 0; q < n; ++q) {
      for (Eigen::Index c = 0; c < k; ++c) {
        const Eigen::Index block = params.swap_xy && c < 2 && k >= 2 ? 1 - c : c;
        const double angle = detail::to_double(coords(q, c)) * params.scale * w;
        out(q, block * f + 2 * j) = detail::from_value<T>(std::sin(angle));
        out(q, block * f + 2 * j + 1) = detail::from_value<T>(std::cos(angle));
      }
    }
  }
}

/// \brief HF's pixel mask at a feature map's size: torch.nn.functional.interpolate(mode =
/// "nearest") on [batch, in_h, in_w], as DetrConvEncoder resizes it for every backbone level.
/// Output index o reads input floor(o s) with s = in / out in float32, clamped to in - 1
/// (PyTorch's nearest_idx). Any nonzero input is 1.
/// in: [batch, in_h, in_w]; out: [batch, out_h, out_w], sides >= 1.
inline void resize_pixel_mask_nearest(ConstTensorView<std::uint8_t, 3> in,
                                      TensorView<std::uint8_t, 3> out) {
  constexpr std::string_view fn = "resize_pixel_mask_nearest";
  const Eigen::Index batch = in.dimension(0);
  detail::require(out.dimension(0) == batch, fn, "out batch = ", out.dimension(0),
                  " must equal in's batch = ", batch);
  for (int a = 1; a <= 2; ++a) {
    detail::require(in.dimension(a) >= 1 && in.dimension(a) <= kMaxSineEmbeddingSide &&
                        out.dimension(a) >= 1 && out.dimension(a) <= kMaxSineEmbeddingSide,
                    fn, "in ", in.dimension(1), " x ", in.dimension(2), ", out ", out.dimension(1),
                    " x ", out.dimension(2), ": every side must be in [1, 2^20]");
  }
  // PyTorch's nearest_idx (UpSample.h): floor(o * (float)(in / out)) clamped, the product in
  // float (its exact-2x branch, o >> 1, is the same index: s = 0.5 is exact).
  const auto source = [](Eigen::Index o, Eigen::Index n_in, Eigen::Index n_out) {
    if (n_in == n_out) return o;
    const float s = static_cast<float>(n_in) / static_cast<float>(n_out);
    const auto i = static_cast<Eigen::Index>(std::floor(static_cast<float>(o) * s));
    return std::min(i, n_in - 1);
  };
  const Eigen::Index in_h = in.dimension(1), in_w = in.dimension(2);
  const Eigen::Index out_h = out.dimension(1), out_w = out.dimension(2);
  for (Eigen::Index b = 0; b < batch; ++b) {
    for (Eigen::Index i = 0; i < out_h; ++i) {
      const Eigen::Index si = source(i, in_h, out_h);
      for (Eigen::Index j = 0; j < out_w; ++j) {
        out(b, i, j) = in(b, si, source(j, in_w, out_w)) != 0 ? 1 : 0;
      }
    }
  }
}

/// \brief DETR's learned alternative (DetrLearnedPositionEmbedding): token (i, j) gets
/// [column_embeddings[j] | row_embeddings[i]] (kXY, HF's order) or [row | column] (kYX). The
/// mask is not read: padded pixels get their index's rows too. DETR's tables have 50 rows, a
/// hard limit: a larger map has no trained rows, and the call throws std::out_of_range.
/// row_embeddings: [rows, F]; column_embeddings: [columns, F]; out: [H, W, 2F].
template <typename T>
void learned_embedding_2d(ConstTensorView<T, 2> row_embeddings,
                          ConstTensorView<T, 2> column_embeddings, TensorView<T, 3> out,
                          SineAxisOrder order = SineAxisOrder::kXY) {
  static_assert(detail::is_storage_type_v<T>,
                "posenc: storage type must be float, double, "
                "Eigen::half or Eigen::bfloat16");
  constexpr std::string_view fn = "learned_embedding_2d";
  const Eigen::Index f = row_embeddings.dimension(1);
  const Eigen::Index h = out.dimension(0), w = out.dimension(1);
  detail::require(f >= 1 && column_embeddings.dimension(1) == f && out.dimension(2) == 2 * f, fn,
                  "row_embeddings width ", f, ", column_embeddings width ",
                  column_embeddings.dimension(1), " and out channels ", out.dimension(2),
                  ": the tables must share a width F >= 1 and out must have 2F channels");
  detail::require(order == SineAxisOrder::kYX || order == SineAxisOrder::kXY, fn,
                  "order = ", static_cast<int>(order), " is not a SineAxisOrder");
  detail::require(h >= 1 && w >= 1, fn, "feature map ", h, " x ", w, " must not be empty");
  if (h > row_embeddings.dimension(0)) {
    detail::throw_out_of_range(fn, "feature map height ", h, " exceeds the ",
                               row_embeddings.dimension(0), " rows of row_embeddings");
  }
  if (w > column_embeddings.dimension(0)) {
    detail::throw_out_of_range(fn, "feature map width ", w, " exceeds the ",
                               column_embeddings.dimension(0), " rows of column_embeddings");
  }
  const Eigen::Index row_off = order == SineAxisOrder::kYX ? 0 : f;
  const Eigen::Index col_off = f - row_off;
  for (Eigen::Index i = 0; i < h; ++i) {
    for (Eigen::Index j = 0; j < w; ++j) {
      T* dst = out.data() + (i * w + j) * 2 * f;
      std::copy_n(row_embeddings.data() + i * f, f, dst + row_off);
      std::copy_n(column_embeddings.data() + j * f, f, dst + col_off);
    }
  }
}

}  // namespace posenc
