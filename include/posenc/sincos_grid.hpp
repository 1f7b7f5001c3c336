#pragma once
/// \file posenc/sincos_grid.hpp
/// Fixed sin-cos position embeddings over patch grids: the 2-D tables of MAE, DiT, I-JEPA and
/// HF `ViTMAEModel`; diffusers' `get_2d_sincos_pos_embed` (PixArt, SD3 with its centre crop);
/// CogVideoX's 3-D video table; 1-D temporal tables (Latte); RT-DETR's encoder table.
///
/// The grid has axes a = 0 .. A-1, outer to inner, of n_a tokens each. After `extra_tokens`
/// zero rows (a class token's), token t is the row-major index of (i_0, .., i_{A-1}):
///
///     t = (..(i_0 n_1 + i_1) n_2 + ..) n_{A-1} + i_{A-1}
///     x_a = (first_a + i_a) scale_a                     (axis a's coordinate)
///
/// A row is a concatenation of channel blocks. Block b encodes the coordinate of one axis in
/// `width` channels, m = width / 2 pairs (MAE's get_1d_sincos_pos_embed_from_grid;
/// SinusoidalLayout::kSinCosVaswani at position x):
///
///     [sin(x w_0) .. sin(x w_{m-1}) | cos(x w_0) .. cos(x w_{m-1})],    w_j = base^(-j / m)
///
/// The recipes below give each checkpoint's axes and blocks. Their block order is not their
/// axis order: MAE's np.meshgrid(grid_w, grid_h) encodes the column in the first half. MAE,
/// embed_dim 8, a 2 x 3 grid, class token (w = 1, 0.01):
///
///     row 0            0       0          0       0          0       0          0       0
///     row 1 + 3i + j   sin j   sin .01j   cos j   cos .01j   sin i   sin .01i   cos i   cos .01i
///                      \------ column block (axis 1) -----/  \------- row block (axis 0) ------/
///
/// Coordinates and angles are formed in double (std::sin / std::cos reduce the full range);
/// the result is rounded once to the storage type. diffusers and MAE's copies form the
/// coordinates in float32 (np.arange(h, dtype=np.float32) / (h / base_size) / scale: two
/// roundings), so their tables differ from these by up to ~1e-7 times the angle.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "posenc/detail/cache_line_vector.hpp"
#include "posenc/detail/numeric.hpp"
#include "posenc/error.hpp"
#include "posenc/sinusoidal.hpp"
#include "posenc/tensor.hpp"

namespace posenc {

/// One axis of the grid.
struct SincosGridAxis {
  Eigen::Index size = 1;   ///< tokens along the axis, >= 1
  std::int64_t first = 0;  ///< index of its first token, >= 0 (a crop's offset)
  double scale = 1.0;      ///< coordinate = (first + i) * scale; finite and > 0
};

/// `width` channels (even, >= 2) holding [sin | cos] of axis `axis`'s coordinate.
struct SincosGridBlock {
  int axis = 0;
  Eigen::Index width = 0;
};

struct SincosGridParams {
  std::vector<SincosGridAxis> axes;     ///< outer to inner: tokens in row-major order
  std::vector<SincosGridBlock> blocks;  ///< in channel order; the widths add up to the row
  double base = 10000.0;                ///< finite and > 0
  Eigen::Index extra_tokens = 0;        ///< zero rows before the grid's (a class token), >= 0
};

/// Most axes a grid may have (real grids: 1 to 3); the kernels keep the index on the stack.
inline constexpr int kMaxSincosGridAxes = 8;
/// Most grid tokens (product of the axis sizes).
inline constexpr Eigen::Index kMaxSincosGridTokens = Eigen::Index{1} << 40;

namespace detail {

inline SinusoidalParams sincos_grid_block_params(double base) {
  SinusoidalParams params;
  params.layout = SinusoidalLayout::kSinCosVaswani;
  params.base = base;
  return params;
}

/// Checks every parameter; returns (row width, grid tokens).
inline std::pair<Eigen::Index, Eigen::Index> validate_sincos_grid(std::string_view fn,
                                                                  const SincosGridParams& p) {
  require(std::isfinite(p.base) && p.base > 0.0, fn, "base = ", p.base, " must be finite and > 0");
  const auto num_axes = static_cast<Eigen::Index>(p.axes.size());
  require(num_axes >= 1 && num_axes <= kMaxSincosGridAxes, fn, "axes.size() = ", num_axes,
          " must be in [1, ", kMaxSincosGridAxes, "]");
  require(p.extra_tokens >= 0, fn, "extra_tokens = ", p.extra_tokens, " must be >= 0");
  constexpr std::int64_t kMaxExact = std::int64_t{1} << 53;
  Eigen::Index tokens = 1;
  for (Eigen::Index a = 0; a < num_axes; ++a) {
    const SincosGridAxis& axis = p.axes[static_cast<std::size_t>(a)];
    require(axis.size >= 1 && axis.size <= kMaxSincosGridTokens, fn, "axes[", a, "].size = ",
            axis.size, " must be in [1, 2^40]");
    require(axis.first >= 0 && axis.first <= kMaxExact - (axis.size - 1), fn, "axes[", a,
            "].first = ", axis.first, " must be in [0, 2^53 - size + 1] (size = ", axis.size, ")");
    require(std::isfinite(axis.scale) && axis.scale > 0.0, fn, "axes[", a, "].scale = ",
            axis.scale, " must be finite and > 0");
    require(tokens <= kMaxSincosGridTokens / axis.size, fn, "the grid's ", tokens, " x ",
            axis.size, " tokens (through axes[", a, "]) must be at most 2^40");
    tokens *= axis.size;
  }
  require(tokens <= kMaxSincosGridTokens - p.extra_tokens, fn, "extra_tokens = ",
          p.extra_tokens, " plus the grid's ", tokens, " tokens must be at most 2^40");
  require(!p.blocks.empty(), fn, "blocks must not be empty");
  Eigen::Index width = 0;
  for (std::size_t b = 0; b < p.blocks.size(); ++b) {
    const SincosGridBlock& block = p.blocks[b];
    require(block.axis >= 0 && block.axis < num_axes, fn, "blocks[", b, "].axis = ", block.axis,
            " must be in [0, axes.size() = ", num_axes, ")");
    require(block.width >= 2 && block.width % 2 == 0 && block.width <= kMaxSinusoidalDim, fn,
            "blocks[", b, "].width = ", block.width,
            " must be even and in [2, 2^20] (sin and cos halves)");
    require(width <= kMaxSinusoidalDim - block.width, fn, "the blocks' widths through blocks[",
            b, "] add up to ", width + block.width, ": the row must be at most 2^20 wide");
    width += block.width;
    // Largest angle: the largest coordinate times the largest frequency (w_0 = 1 for base >= 1,
    // w_{m-1} = base^(-(m-1)/m) below).
    const SincosGridAxis& axis = p.axes[static_cast<std::size_t>(block.axis)];
    const double x_max = static_cast<double>(axis.first + axis.size - 1) * axis.scale;
    const double w_max =
        largest_sinusoidal_frequency(block.width, sincos_grid_block_params(p.base));
    require(std::isfinite(x_max * w_max), fn, "blocks[", b, "]: the largest coordinate ", x_max,
            " (axes[", block.axis, "]) times the largest frequency ", w_max, " (base = ", p.base,
            ") must be finite");
  }
  return {width, tokens};
}

}  // namespace detail

/// The block rows of one grid, computed once (sin / cos per axis index, not per token): build
/// it outside a hot loop; sincos_grid_table and add_sincos_grid_inplace then allocate nothing.
class SincosGridPlan {
 public:
  /// Throws std::invalid_argument naming the parameter (see SincosGridParams' limits).
  explicit SincosGridPlan(SincosGridParams params) : params_(std::move(params)) {
    std::tie(dim_, grid_tokens_) = detail::validate_sincos_grid("SincosGridPlan", params_);
    std::size_t values = 0;
    for (const SincosGridBlock& block : params_.blocks) {
      offset_.push_back(values);
      values += static_cast<std::size_t>(axis_of(block).size * block.width);
    }
    values_.resize(values);
    const SinusoidalParams frequencies = detail::sincos_grid_block_params(params_.base);
    for (std::size_t b = 0; b < params_.blocks.size(); ++b) {
      const SincosGridBlock& block = params_.blocks[b];
      const SincosGridAxis& axis = axis_of(block);
      const Eigen::Index m = block.width / 2;
      for (Eigen::Index j = 0; j < m; ++j) {
        const double w = detail::sinusoidal_frequency(j, block.width, frequencies);
        for (Eigen::Index i = 0; i < axis.size; ++i) {
          const double angle = static_cast<double>(axis.first + i) * axis.scale * w;
          double* row = values_.data() + offset_[b] + static_cast<std::size_t>(i * block.width);
          row[j] = std::sin(angle);
          row[m + j] = std::cos(angle);
        }
      }
    }
    values_f_.assign(values_.begin(), values_.end());
  }

  const SincosGridParams& params() const noexcept { return params_; }
  /// Channels per row: the blocks' widths added up.
  Eigen::Index dim() const noexcept { return dim_; }
  /// Rows of a table: extra_tokens + the grid's tokens.
  Eigen::Index tokens() const noexcept { return params_.extra_tokens + grid_tokens_; }
  Eigen::Index grid_tokens() const noexcept { return grid_tokens_; }
  /// Block b's rows [axes[blocks[b].axis].size, blocks[b].width], row i at axis index i.
  const double* block_rows(std::size_t b) const noexcept { return values_.data() + offset_[b]; }
  /// The same rows rounded once to float: what float, half and bfloat16 rows are formed from
  /// (from_value rounds through float), at half the bytes read per token and no conversion.
  const float* block_rows_float(std::size_t b) const noexcept {
    return values_f_.data() + offset_[b];
  }

 private:
  const SincosGridAxis& axis_of(const SincosGridBlock& block) const {
    return params_.axes[static_cast<std::size_t>(block.axis)];
  }

  SincosGridParams params_;
  Eigen::Index dim_ = 0;
  Eigen::Index grid_tokens_ = 0;
  std::vector<std::size_t> offset_;  // of each block's rows in values_
  std::vector<double> values_;
  std::vector<float, detail::CacheLineAllocator<float>> values_f_;
};

namespace detail {

template <typename C>
const C* block_rows(const SincosGridPlan& plan, std::size_t b) {
  if constexpr (std::is_same_v<C, float>) {
    return plan.block_rows_float(b);
  } else {
    return plan.block_rows(b);
  }
}

/// Writes (or adds) the grid's rows, token t at out + t * row_stride.
template <typename T, bool accumulate>
void sincos_grid_rows(const SincosGridPlan& plan, T* out, Eigen::Index row_stride) {
  using C = compute_t<T>;
  const SincosGridParams& p = plan.params();
  const int num_axes = static_cast<int>(p.axes.size());
  Eigen::Index index[std::size_t{kMaxSincosGridAxes}] = {};
  for (Eigen::Index t = 0; t < plan.grid_tokens(); ++t) {
    T* dst = out + t * row_stride;
    for (std::size_t b = 0; b < p.blocks.size(); ++b) {
      const Eigen::Index width = p.blocks[b].width;
      const C* src = block_rows<C>(plan, b) + index[p.blocks[b].axis] * width;
      if constexpr (accumulate) {
        add_values(dst, src, width);
      } else {
        for (Eigen::Index c = 0; c < width; ++c) dst[c] = from_value<T>(src[c]);
      }
      dst += width;
    }
    for (int a = num_axes - 1; a >= 0; --a) {  // the next token's index, inner axis fastest
      if (++index[a] < p.axes[static_cast<std::size_t>(a)].size) break;
      index[a] = 0;
    }
  }
}

}  // namespace detail

/// \brief The table: extra_tokens zero rows, then one row per grid token (file comment).
/// out: [plan.tokens(), plan.dim()]
/// Throws std::invalid_argument when out's shape differs, before writing anything.
template <typename T>
void sincos_grid_table(TensorView<T, 2> out, const SincosGridPlan& plan) {
  static_assert(detail::is_storage_type_v<T>, "posenc: storage type must be float, double, "
                                              "Eigen::half or Eigen::bfloat16");
  constexpr std::string_view fn = "sincos_grid_table";
  detail::require(out.dimension(0) == plan.tokens() && out.dimension(1) == plan.dim(), fn,
                  "out shape [", out.dimension(0), ", ", out.dimension(1), "] must be [tokens = ",
                  plan.tokens(), " (", plan.params().extra_tokens, " extra + ",
                  plan.grid_tokens(), " grid), dim = ", plan.dim(), "]");
  const Eigen::Index extra = plan.params().extra_tokens * plan.dim();
  std::fill(out.data(), out.data() + extra, T(0.0f));
  detail::sincos_grid_rows<T, false>(plan, out.data() + extra, plan.dim());
}

/// \brief Convenience overload: plans (validating every parameter first), then builds the table.
template <typename T>
void sincos_grid_table(TensorView<T, 2> out, const SincosGridParams& params) {
  sincos_grid_table<T>(out, SincosGridPlan(params));
}

/// \brief x[b, extra_tokens + t, :] += row t of the grid, for every batch row (the patch
/// embeddings plus their fixed position embedding, as ViT / DiT forward passes add it). The
/// extra rows, whose embedding is zero, are left as they are. In the storage type's compute
/// precision (float, double for double), rounded once.
/// x: [batch, plan.tokens(), plan.dim()]
/// Throws std::invalid_argument when x's shape differs, before writing anything.
template <typename T>
void add_sincos_grid_inplace(TensorView<T, 3> x, const SincosGridPlan& plan) {
  static_assert(detail::is_storage_type_v<T>, "posenc: storage type must be float, double, "
                                              "Eigen::half or Eigen::bfloat16");
  constexpr std::string_view fn = "add_sincos_grid_inplace";
  detail::require(x.dimension(0) >= 1 && x.dimension(1) == plan.tokens() &&
                      x.dimension(2) == plan.dim(),
                  fn, "x shape [", x.dimension(0), ", ", x.dimension(1), ", ", x.dimension(2),
                  "] must be [batch >= 1, tokens = ", plan.tokens(), " (",
                  plan.params().extra_tokens, " extra + ", plan.grid_tokens(), " grid), dim = ",
                  plan.dim(), "]");
  const Eigen::Index rows = plan.tokens() * plan.dim();
  const Eigen::Index extra = plan.params().extra_tokens * plan.dim();
  for (Eigen::Index b = 0; b < x.dimension(0); ++b) {
    detail::sincos_grid_rows<T, true>(plan, x.data() + b * rows + extra, plan.dim());
  }
}

// --- Recipes ------------------------------------------------------------------------------------

namespace detail {

inline void require_positive(std::string_view fn, const char* name, double value) {
  require(std::isfinite(value) && value > 0.0, fn, name, " = ", value, " must be finite and > 0");
}

/// Rows then columns, blocks [column: half | row: half] (np.meshgrid(grid_w, grid_h)).
inline SincosGridParams sincos_grid_rows_columns(Eigen::Index half, SincosGridAxis rows,
                                                 SincosGridAxis columns,
                                                 Eigen::Index extra_tokens) {
  SincosGridParams p;
  p.axes = {rows, columns};
  p.blocks = {{1, half}, {0, half}};
  p.extra_tokens = extra_tokens;
  return p;
}

inline void require_two_halves(std::string_view fn, Eigen::Index embed_dim) {
  require(embed_dim >= 4 && embed_dim % 4 == 0, fn, "embed_dim = ", embed_dim,
          " must be a positive multiple of 4 (two [sin | cos] halves)");
}

/// diffusers' coordinates i / (n / base_size) / interpolation_scale, as one scale per axis.
inline SincosGridParams sincos_grid_diffusers(std::string_view fn, Eigen::Index embed_dim,
                                              Eigen::Index grid_h, Eigen::Index grid_w,
                                              double base_size, double interpolation_scale,
                                              Eigen::Index extra_tokens) {
  require_two_halves(fn, embed_dim);
  require(grid_h >= 1 && grid_w >= 1, fn, "grid ", grid_h, " x ", grid_w,
          " must have at least one row and one column");
  require_positive(fn, "base_size", base_size);
  require_positive(fn, "interpolation_scale", interpolation_scale);
  const auto scale = [&](Eigen::Index n) {
    return base_size / (static_cast<double>(n) * interpolation_scale);
  };
  return sincos_grid_rows_columns(embed_dim / 2, {grid_h, 0, scale(grid_h)},
                                  {grid_w, 0, scale(grid_w)}, extra_tokens);
}

}  // namespace detail

/// MAE's get_2d_sincos_pos_embed (also DiT, I-JEPA and HF ViTMAEModel): grid_h x grid_w
/// patches in row-major order, the integer row and column as coordinates, channels
/// [column: embed_dim / 2 | row: embed_dim / 2]. cls_token puts one zero row first (MAE's
/// cls_token, ViTMAE's add_cls_token). embed_dim must be a multiple of 4 (each half is a
/// [sin | cos] block); the grid sizes are checked by SincosGridPlan.
inline SincosGridParams sincos_grid_mae(Eigen::Index embed_dim, Eigen::Index grid_h,
                                        Eigen::Index grid_w, bool cls_token = false) {
  detail::require_two_halves("sincos_grid_mae", embed_dim);
  return detail::sincos_grid_rows_columns(embed_dim / 2, {grid_h, 0, 1.0}, {grid_w, 0, 1.0},
                                          cls_token ? 1 : 0);
}

/// diffusers' get_2d_sincos_pos_embed (PixArt-alpha / Sigma, SD3, Hunyuan-DiT's PatchEmbed):
/// MAE's table with row i at i / (grid_h / base_size) / interpolation_scale and column j at
/// j / (grid_w / base_size) / interpolation_scale, after extra_tokens zero rows.
inline SincosGridParams sincos_grid_diffusers(Eigen::Index embed_dim, Eigen::Index grid_h,
                                              Eigen::Index grid_w, double base_size = 16.0,
                                              double interpolation_scale = 1.0,
                                              Eigen::Index extra_tokens = 0) {
  return detail::sincos_grid_diffusers("sincos_grid_diffusers", embed_dim, grid_h, grid_w,
                                       base_size, interpolation_scale, extra_tokens);
}

/// SD3's PatchEmbed with pos_embed_max_size M (SD3 / SD3.5: M = 192, base_size = sample_size /
/// patch_size): diffusers' M x M table (base_size, interpolation_scale) cropped at its centre
/// to grid_h x grid_w patches (cropped_pos_embed: top = (M - grid_h) / 2, left = (M - grid_w)
/// / 2, rounded down), built directly, without the M x M table.
inline SincosGridParams sincos_grid_sd3_crop(Eigen::Index embed_dim,
                                             Eigen::Index pos_embed_max_size, double base_size,
                                             double interpolation_scale, Eigen::Index grid_h,
                                             Eigen::Index grid_w) {
  constexpr std::string_view fn = "sincos_grid_sd3_crop";
  const Eigen::Index m = pos_embed_max_size;
  detail::require(m >= 1, fn, "pos_embed_max_size = ", m, " must be >= 1");
  detail::require(grid_h >= 1 && grid_h <= m, fn, "grid_h = ", grid_h,
                  " must be in [1, pos_embed_max_size = ", m, "]");
  detail::require(grid_w >= 1 && grid_w <= m, fn, "grid_w = ", grid_w,
                  " must be in [1, pos_embed_max_size = ", m, "]");
  SincosGridParams p =
      detail::sincos_grid_diffusers(fn, embed_dim, m, m, base_size, interpolation_scale, 0);
  p.axes[0].size = grid_h;
  p.axes[0].first = (m - grid_h) / 2;
  p.axes[1].size = grid_w;
  p.axes[1].first = (m - grid_w) / 2;
  return p;
}

/// CogVideoX's get_3d_sincos_pos_embed: frames x grid_h x grid_w patches (frame, then row,
/// then column), channels [time: E / 4 | column: 3E / 8 | row: 3E / 8] with coordinates
/// index / temporal_interpolation_scale and index / spatial_interpolation_scale. E must be a
/// multiple of 16, so that every block is a whole [sin | cos] pair of halves.
inline SincosGridParams sincos_grid_cogvideox(Eigen::Index embed_dim, Eigen::Index frames,
                                              Eigen::Index grid_h, Eigen::Index grid_w,
                                              double spatial_interpolation_scale = 1.0,
                                              double temporal_interpolation_scale = 1.0) {
  constexpr std::string_view fn = "sincos_grid_cogvideox";
  detail::require(embed_dim >= 16 && embed_dim % 16 == 0, fn, "embed_dim = ", embed_dim,
                  " must be a positive multiple of 16 (blocks of E/4, 3E/8 and 3E/8 channels)");
  detail::require_positive(fn, "spatial_interpolation_scale", spatial_interpolation_scale);
  detail::require_positive(fn, "temporal_interpolation_scale", temporal_interpolation_scale);
  SincosGridParams p;
  p.axes = {{frames, 0, 1.0 / temporal_interpolation_scale},
            {grid_h, 0, 1.0 / spatial_interpolation_scale},
            {grid_w, 0, 1.0 / spatial_interpolation_scale}};
  p.blocks = {{0, embed_dim / 4}, {2, embed_dim * 3 / 8}, {1, embed_dim * 3 / 8}};
  return p;
}

/// RT-DETR's fixed table for the attention layer of its hybrid encoder (AIFI; HF
/// RTDetrSinePositionEmbedding, also RT-DETR v2, D-FINE and DEIMv2): a height x width feature
/// map, tokens in row-major order at their integer row and column, channels
/// [row: E / 2 | column: E / 2], each a [sin | cos] block with w_k = temperature^(-k / (E / 4)).
/// No mask and no normalisation, unlike DETR's sine_embedding_2d. legacy_layout gives HF's
/// build_2d_sincos_position_embedding before its refactor, still OmDet-Turbo's and the original
/// repository's: meshgrid(grid_w, grid_h, indexing = "ij") makes the column the outer index, so
/// token t reads column t / height and row t % height, and the blocks are [column | row]. The
/// two layouts agree on square maps (640 x 640 inputs) and on nothing else.
inline SincosGridParams sincos_grid_rt_detr(Eigen::Index embed_dim, Eigen::Index height,
                                            Eigen::Index width, double temperature = 10000.0,
                                            bool legacy_layout = false) {
  constexpr std::string_view fn = "sincos_grid_rt_detr";
  detail::require_two_halves(fn, embed_dim);
  detail::require_positive(fn, "temperature", temperature);
  SincosGridParams p;
  p.base = temperature;
  if (legacy_layout) {
    p.axes = {{width, 0, 1.0}, {height, 0, 1.0}};
  } else {
    p.axes = {{height, 0, 1.0}, {width, 0, 1.0}};
  }
  p.blocks = {{0, embed_dim / 2}, {1, embed_dim / 2}};
  return p;
}

}  // namespace posenc
