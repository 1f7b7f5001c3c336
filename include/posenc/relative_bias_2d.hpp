#pragma once
/// \file posenc/relative_bias_2d.hpp
/// The learned 2-D relative position bias of windowed vision encoders: Swin (Liu et al. 2021,
/// "Swin Transformer", §3.2, Eq. 4: Attention = SoftMax(Q K^T / sqrt(d) + B) V) and BEiT /
/// data2vec-vision (Bao et al. 2022, §2.2, with a class token). Each head learns one scalar per
/// 2-D offset between two patches of a window_h x window_w window:
///
///   patch p at (y, x) = (p / window_w, p % window_w)    (row-major, torch.meshgrid "ij")
///   index(i, j) = (y_i - y_j + window_h - 1) (2 window_w - 1) + (x_i - x_j + window_w - 1)
///   B[h, i, j] = table[index(i, j), h]         table: [(2 window_h - 1)(2 window_w - 1), heads]
///
/// so the table is itself a (2 window_h - 1) x (2 window_w - 1) grid, offset (dy, dx) at row
/// dy + window_h - 1 and column dx + window_w - 1. With a class token (BEiT) token 0 is the
/// class token, token t >= 1 is patch t - 1, and three rows follow the grid (R = grid rows):
///
///   index(0, j) = R        class token attending to anything
///   index(i, 0) = R + 1    a patch attending to the class token
///   index(0, 0) = R + 2    class token to itself
///
/// This is HF transformers' BeitRelativePositionBias.generate_relative_position_index and
/// SwinSelfAttention's relative_position_index (query minus key). Pass the result to attention
/// as AttentionMetadata::attention_bias, mask MaskMode::kBidirectional. BEiT at another
/// resolution resizes the grid part of the table bilinearly (align_corners false) and keeps the
/// three class rows: resize_relative_position_bias_2d. Swin's windows, cyclic shift and shifted-
/// window mask: swin_window.hpp; Swin-v2's table from an MLP over log-spaced offsets:
/// continuous_position_bias.hpp.

#include <cmath>
#include <cstdint>
#include <limits>
#include <string_view>

#include "posenc/attention_types.hpp"
#include "posenc/detail/numeric.hpp"
#include "posenc/error.hpp"
#include "posenc/learned_grid.hpp"
#include "posenc/tensor.hpp"

namespace posenc {

/// A window of patches and whether a class token precedes them (BEiT) or not (Swin).
struct RelativeBias2dWindow {
  Eigen::Index window_h = 0;  ///< patches per column (HF: window_size[0]); in [1, 2^15]
  Eigen::Index window_w = 0;  ///< patches per row (window_size[1]); in [1, 2^15]
  bool class_token = false;   ///< BEiT / data2vec-vision: token 0 is the class token
};

namespace detail {

inline constexpr Eigen::Index kMaxRelativeWindow = Eigen::Index{1} << 15;

inline void validate_relative_window(std::string_view fn, const RelativeBias2dWindow& w) {
  require(w.window_h >= 1 && w.window_h <= kMaxRelativeWindow, fn, "window_h = ", w.window_h,
          " must be in [1, 2^15]");
  require(w.window_w >= 1 && w.window_w <= kMaxRelativeWindow, fn, "window_w = ", w.window_w,
          " must be in [1, 2^15]");
}

/// (2 window_h - 1)(2 window_w - 1): the rows of the offset grid.
inline Eigen::Index relative_grid_rows(const RelativeBias2dWindow& w) {
  return (2 * w.window_h - 1) * (2 * w.window_w - 1);
}

/// Table rows: the offset grid, plus the class token's three.
inline Eigen::Index relative_table_rows(const RelativeBias2dWindow& w) {
  return relative_grid_rows(w) + (w.class_token ? 3 : 0);
}

/// Tokens: the window's patches, plus the class token.
inline Eigen::Index relative_tokens(const RelativeBias2dWindow& w) {
  return w.window_h * w.window_w + (w.class_token ? 1 : 0);
}

/// index(i, j) of the file comment, for validated w and tokens i, j < relative_tokens(w).
inline Eigen::Index relative_index_2d(const RelativeBias2dWindow& w, Eigen::Index i,
                                      Eigen::Index j) {
  const Eigen::Index grid = relative_grid_rows(w);
  if (w.class_token) {
    if (i == 0) return j == 0 ? grid + 2 : grid;
    if (j == 0) return grid + 1;
    --i;
    --j;
  }
  const Eigen::Index dy = i / w.window_w - j / w.window_w, dx = i % w.window_w - j % w.window_w;
  return (dy + w.window_h - 1) * (2 * w.window_w - 1) + dx + w.window_w - 1;
}

}  // namespace detail

/// \brief Tokens of a window: window_h window_w patches, plus one with a class token.
/// Throws std::invalid_argument for a window outside [1, 2^15] on either side.
inline Eigen::Index relative_bias_2d_tokens(const RelativeBias2dWindow& window) {
  detail::validate_relative_window("relative_bias_2d_tokens", window);
  return detail::relative_tokens(window);
}

/// \brief Rows of the learned table: (2 window_h - 1)(2 window_w - 1), plus 3 with a class
/// token (HF: num_relative_distance). Throws as relative_bias_2d_tokens.
inline Eigen::Index relative_bias_2d_table_rows(const RelativeBias2dWindow& window) {
  detail::validate_relative_window("relative_bias_2d_table_rows", window);
  return detail::relative_table_rows(window);
}

/// \brief The table row query token i and key token j read (the file comment's index).
/// Throws std::invalid_argument for a bad window or i, j outside [0, tokens).
inline std::int64_t relative_position_index_2d(const RelativeBias2dWindow& window,
                                               Eigen::Index query_token, Eigen::Index key_token) {
  constexpr std::string_view fn = "relative_position_index_2d";
  const Eigen::Index n = relative_bias_2d_tokens(window);
  detail::require(query_token >= 0 && query_token < n, fn, "query_token = ", query_token,
                  " must be in [0, ", n, ")");
  detail::require(key_token >= 0 && key_token < n, fn, "key_token = ", key_token,
                  " must be in [0, ", n, ")");
  return detail::relative_index_2d(window, query_token, key_token);
}

/// \brief Materialises B[h, i, j] = table[index(i, j), h] for every pair of the window's tokens,
/// in float (the attention_bias type). table: [relative_bias_2d_table_rows(window), heads], the
/// checkpoint's relative_position_bias_table (HF layout); out: [1, heads, N, N] with N =
/// relative_bias_2d_tokens(window), ready for AttentionMetadata::attention_bias.
/// Throws std::invalid_argument (a bad window, table rows or out shape, a non-finite entry)
/// before writing anything.
template <typename T>
void relative_position_bias_2d(ConstTensorView<T, 2> table, const RelativeBias2dWindow& window,
                               TensorView<float, 4> out) {
  static_assert(detail::is_storage_type_v<T>,
                "posenc: table must be float, double, half or bfloat16");
  constexpr std::string_view fn = "relative_position_bias_2d";
  detail::validate_relative_window(fn, window);
  const Eigen::Index rows = detail::relative_table_rows(window);
  const Eigen::Index heads = table.dimension(1);
  detail::require(table.dimension(0) == rows && heads >= 1, fn, "table shape [", table.dimension(0),
                  ", ", heads, "] must be [", rows, ", heads >= 1] for a ", window.window_h, " x ",
                  window.window_w, " window", window.class_token ? " with a class token" : "");
  detail::require_view(fn, "table", table);
  const Eigen::Index n = detail::relative_tokens(window);
  detail::require(out.dimension(0) == 1 && out.dimension(1) == heads && out.dimension(2) == n &&
                      out.dimension(3) == n,
                  fn, "out shape [", out.dimension(0), ", ", out.dimension(1), ", ",
                  out.dimension(2), ", ", out.dimension(3),
                  "] must be [1, heads, tokens, tokens] = [1, ", heads, ", ", n, ", ", n, "]");
  detail::require_view(fn, "out", out);
  for (Eigen::Index r = 0; r < rows; ++r) {
    for (Eigen::Index h = 0; h < heads; ++h) {
      const double x = detail::to_double(table(r, h));
      detail::require(std::isfinite(x), fn, "table[", r, ", ", h, "] = ", x, " must be finite");
      detail::require(std::abs(x) <= static_cast<double>(std::numeric_limits<float>::max()), fn,
                      "table[", r, ", ", h, "] = ", x, " is outside float's range");
    }
  }
  for (Eigen::Index i = 0; i < n; ++i) {
    for (Eigen::Index j = 0; j < n; ++j) {
      const Eigen::Index r = detail::relative_index_2d(window, i, j);
      for (Eigen::Index h = 0; h < heads; ++h) {
        out(0, h, i, j) = static_cast<float>(detail::to_double(table(r, h)));
      }
    }
  }
}

/// \brief A table trained on window `from` resized for window `to`, as HF's
/// BeitRelativePositionBias does for another resolution: the grid rows, seen as a
/// (2 from.window_h - 1) x (2 from.window_w - 1) image with `heads` channels, are resampled to
/// (2 to.window_h - 1) x (2 to.window_w - 1) by bilinear interpolation, align_corners false
/// (resize_learned_grid), and the three class rows are copied. HF reshapes the grid as
/// (width, height) before interpolating, which is this layout whenever the trained window is
/// square (every released BEiT / data2vec-vision checkpoint); for a non-square trained window
/// posenc keeps the index's own (height, width) layout. (HF runs that resampling on every
/// forward, so with a non-square trained window its bias differs from the table lookup even
/// at the trained resolution; no released checkpoint has one.)
/// table: [relative_bias_2d_table_rows(from), heads]; out: [relative_bias_2d_table_rows(to),
/// heads]; from.class_token must equal to.class_token. out must not alias table.
/// Throws std::invalid_argument (windows, shapes, class tokens that differ) before writing.
template <typename T>
void resize_relative_position_bias_2d(ConstTensorView<T, 2> table, const RelativeBias2dWindow& from,
                                      TensorView<T, 2> out, const RelativeBias2dWindow& to) {
  static_assert(detail::is_storage_type_v<T>,
                "posenc: table must be float, double, half or bfloat16");
  constexpr std::string_view fn = "resize_relative_position_bias_2d";
  detail::validate_relative_window(fn, from);
  detail::validate_relative_window(fn, to);
  detail::require(from.class_token == to.class_token, fn, "from.class_token = ", from.class_token,
                  " must equal to.class_token = ", to.class_token);
  const Eigen::Index extra = from.class_token ? 3 : 0, heads = table.dimension(1);
  const Eigen::Index in_rows = detail::relative_grid_rows(from),
                     out_rows = detail::relative_grid_rows(to);
  detail::require(table.dimension(0) == in_rows + extra && heads >= 1, fn, "table shape [",
                  table.dimension(0), ", ", heads, "] must be [", in_rows + extra,
                  ", heads >= 1] for the window it was trained on");
  detail::require(out.dimension(0) == out_rows + extra && out.dimension(1) == heads, fn,
                  "out shape [", out.dimension(0), ", ", out.dimension(1), "] must be [",
                  out_rows + extra, ", ", heads, "]");
  detail::require_view(fn, "table", table);
  detail::require_view(fn, "out", out);
  resize_learned_grid<T>(ConstTensorView<T, 2>(table.data(), in_rows, heads), 2 * from.window_h - 1,
                         2 * from.window_w - 1, TensorView<T, 2>(out.data(), out_rows, heads),
                         2 * to.window_h - 1, 2 * to.window_w - 1,
                         GridResize{GridInterpolation::kBilinear, false});
  for (Eigen::Index r = 0; r < extra; ++r) {
    for (Eigen::Index h = 0; h < heads; ++h) out(out_rows + r, h) = table(in_rows + r, h);
  }
}

}  // namespace posenc
