#pragma once
/// \file posenc/continuous_position_bias.hpp
/// Swin-v2's log-spaced continuous position bias (Liu et al. 2022, "Swin Transformer V2",
/// §3.3, Eqs. 3-4): instead of a learned table per window offset, a small MLP G maps each
/// offset (dy, dx) of a window_h x window_w window to one bias per head, so a model trained on
/// one window runs on another. The offsets are first normalised and log-spaced:
///
///   u = 8 dy / (P_h - 1),  v = 8 dx / (P_w - 1)     P = the pretrained window, else the window
///   (u, v) -> sign(u) log2(1 + |u|) / log2(8), the same for v     (so +-8 -> +-1.0566)
///   table[r, h] = 16 sigmoid(G(u_r, v_r)[h]),  G(c) = W2 relu(W1 c + b1)   (W2 has no bias)
///
/// row r = (dy + window_h - 1)(2 window_w - 1) + dx + window_w - 1, the offset grid of
/// relative_bias_2d.hpp, so the table goes straight to relative_position_bias_2d (or to
/// swin_window_bias). HF Swinv2SelfAttention: continuous_position_bias_mlp.0.weight = W1
/// [hidden, 2], .0.bias = b1 [hidden], .2.weight = W2 [heads, hidden], hidden = 512; the
/// config's pretrained_window_sizes give P (0 = none). HF skips the division for a window of 1,
/// as posenc does per axis; a pretrained window of 1 would divide by zero and is refused.
/// posenc computes the coordinates and the MLP in double (HF: float32) and stores float.

#include <cmath>
#include <string_view>
#include <vector>

#include "posenc/attention_types.hpp"
#include "posenc/detail/numeric.hpp"
#include "posenc/error.hpp"
#include "posenc/relative_bias_2d.hpp"
#include "posenc/tensor.hpp"

namespace posenc {

/// A window and the window its MLP was pretrained on.
struct ContinuousBias2dWindow {
  Eigen::Index window_h = 0;             ///< patches per column; in [1, 2^15]
  Eigen::Index window_w = 0;             ///< patches per row; in [1, 2^15]
  Eigen::Index pretrained_window_h = 0;  ///< 0 = normalise by the window itself; else >= 2
  Eigen::Index pretrained_window_w = 0;  ///< 0 together with pretrained_window_h; else >= 2
};

namespace detail {

inline void validate_continuous_window(std::string_view fn, const ContinuousBias2dWindow& w) {
  validate_relative_window(fn, RelativeBias2dWindow{w.window_h, w.window_w, false});
  const bool none = w.pretrained_window_h == 0 && w.pretrained_window_w == 0;
  require(none || (w.pretrained_window_h >= 2 && w.pretrained_window_h <= kMaxRelativeWindow &&
                   w.pretrained_window_w >= 2 && w.pretrained_window_w <= kMaxRelativeWindow),
          fn, "pretrained_window_h = ", w.pretrained_window_h,
          ", pretrained_window_w = ", w.pretrained_window_w,
          " must both be 0 (none) or both in [2, 2^15] (a window of 1 divides by zero)");
}

/// The log-spaced coordinate of offset d on an axis normalised by the divisor (the file
/// comment's u -> sign(u) log2(1 + |u|) / log2(8)).
inline double log_spaced_coordinate(Eigen::Index d, Eigen::Index divisor) {
  const double u = 8.0 * static_cast<double>(d) / static_cast<double>(divisor);
  return std::copysign(std::log2(1.0 + std::abs(u)) / 3.0, u);
}

inline Eigen::Index continuous_divisor(Eigen::Index pretrained, Eigen::Index window) {
  return pretrained > 0 ? pretrained - 1 : (window > 1 ? window - 1 : 1);
}

}  // namespace detail

/// \brief The normalised, log-spaced offsets the MLP reads (HF: relative_coords_table):
/// out[r, 0] = the dy coordinate and out[r, 1] the dx coordinate of offset-grid row r.
/// out: [(2 window_h - 1)(2 window_w - 1), 2]. Values lie in [-1.0566, 1.0566] for offsets
/// within the pretrained window, beyond for larger windows.
/// Throws std::invalid_argument (windows, out's shape) before writing anything.
inline void log_spaced_relative_coords_2d(const ContinuousBias2dWindow& window,
                                          TensorView<double, 2> out) {
  constexpr std::string_view fn = "log_spaced_relative_coords_2d";
  detail::validate_continuous_window(fn, window);
  const Eigen::Index rows_h = 2 * window.window_h - 1, rows_w = 2 * window.window_w - 1;
  detail::require(out.dimension(0) == rows_h * rows_w && out.dimension(1) == 2, fn, "out shape [",
                  out.dimension(0), ", ", out.dimension(1), "] must be [", rows_h * rows_w, ", 2]");
  detail::require_view(fn, "out", out);
  const Eigen::Index div_h =
                         detail::continuous_divisor(window.pretrained_window_h, window.window_h),
                     div_w =
                         detail::continuous_divisor(window.pretrained_window_w, window.window_w);
  for (Eigen::Index a = 0; a < rows_h; ++a) {
    const double u = detail::log_spaced_coordinate(a - (window.window_h - 1), div_h);
    for (Eigen::Index b = 0; b < rows_w; ++b) {
      out(a * rows_w + b, 0) = u;
      out(a * rows_w + b, 1) = detail::log_spaced_coordinate(b - (window.window_w - 1), div_w);
    }
  }
}

/// \brief The bias table of one Swin-v2 block: table[r, h] = 16 sigmoid(W2 relu(W1 c_r + b1))[h]
/// with c_r = log_spaced_relative_coords_2d's row r, in double, stored float.
/// fc1_weight: [hidden, 2] (W1), fc1_bias: [hidden] (b1), fc2_weight: [heads, hidden] (W2);
/// out: [(2 window_h - 1)(2 window_w - 1), heads], the table relative_position_bias_2d and
/// swin_window_bias read.
/// Throws std::invalid_argument (windows, shapes, non-finite weights) before writing anything.
template <typename T>
void continuous_position_bias_table(ConstTensorView<T, 2> fc1_weight,
                                    ConstTensorView<T, 1> fc1_bias,
                                    ConstTensorView<T, 2> fc2_weight,
                                    const ContinuousBias2dWindow& window,
                                    TensorView<float, 2> out) {
  static_assert(detail::is_storage_type_v<T>,
                "posenc: the MLP weights must be float, double, half or bfloat16");
  constexpr std::string_view fn = "continuous_position_bias_table";
  detail::validate_continuous_window(fn, window);
  const Eigen::Index hidden = fc1_weight.dimension(0), heads = fc2_weight.dimension(0);
  detail::require(hidden >= 1 && fc1_weight.dimension(1) == 2, fn, "fc1_weight shape [", hidden,
                  ", ", fc1_weight.dimension(1), "] must be [hidden >= 1, 2]");
  detail::require(fc1_bias.dimension(0) == hidden, fn, "fc1_bias length ", fc1_bias.dimension(0),
                  " must be hidden = ", hidden);
  detail::require(heads >= 1 && fc2_weight.dimension(1) == hidden, fn, "fc2_weight shape [", heads,
                  ", ", fc2_weight.dimension(1), "] must be [heads >= 1, hidden = ", hidden, "]");
  const Eigen::Index rows = (2 * window.window_h - 1) * (2 * window.window_w - 1);
  detail::require(out.dimension(0) == rows && out.dimension(1) == heads, fn, "out shape [",
                  out.dimension(0), ", ", out.dimension(1), "] must be [", rows, ", ", heads, "]");
  detail::require_view(fn, "fc1_weight", fc1_weight);
  detail::require_view(fn, "fc1_bias", fc1_bias);
  detail::require_view(fn, "fc2_weight", fc2_weight);
  detail::require_view(fn, "out", out);
  const auto finite = [&](std::string_view name, const T* p, Eigen::Index n) {
    for (Eigen::Index i = 0; i < n; ++i) {
      detail::require(std::isfinite(detail::to_double(p[i])), fn, name, "[", i,
                      "] = ", detail::to_double(p[i]), " must be finite (flat index)");
    }
  };
  finite("fc1_weight", fc1_weight.data(), hidden * 2);
  finite("fc1_bias", fc1_bias.data(), hidden);
  finite("fc2_weight", fc2_weight.data(), heads * hidden);

  const Eigen::Index rows_w = 2 * window.window_w - 1;
  const Eigen::Index div_h =
                         detail::continuous_divisor(window.pretrained_window_h, window.window_h),
                     div_w =
                         detail::continuous_divisor(window.pretrained_window_w, window.window_w);
  std::vector<double> act(static_cast<std::size_t>(hidden));  // relu(W1 c + b1) of one row
  for (Eigen::Index r = 0; r < rows; ++r) {
    const double u = detail::log_spaced_coordinate(r / rows_w - (window.window_h - 1), div_h),
                 v = detail::log_spaced_coordinate(r % rows_w - (window.window_w - 1), div_w);
    for (Eigen::Index k = 0; k < hidden; ++k) {
      const double a = detail::to_double(fc1_weight(k, 0)) * u +
                       detail::to_double(fc1_weight(k, 1)) * v + detail::to_double(fc1_bias(k));
      act[static_cast<std::size_t>(k)] = a > 0.0 ? a : 0.0;
    }
    for (Eigen::Index h = 0; h < heads; ++h) {
      double g = 0.0;
      for (Eigen::Index k = 0; k < hidden; ++k) {
        g += detail::to_double(fc2_weight(h, k)) * act[static_cast<std::size_t>(k)];
      }
      out(r, h) = static_cast<float>(16.0 / (1.0 + std::exp(-g)));
    }
  }
}

}  // namespace posenc
