#pragma once
/// \file posenc/swin_window.hpp
/// Swin's windows around posenc's attention (Liu et al. 2021, "Swin Transformer", §3.2): each
/// block attends inside square windows of window x window patches, every second block after a
/// cyclic shift of the feature map by window / 2 ("shifted windows"), and adds the learned
/// relative position bias (relative_bias_2d.hpp, Eq. 4) plus a mask that keeps the patches a
/// shift brought together from opposite edges from seeing each other.
///
///   feature map [H, W] --pad to [Hp, Wp] (multiples of window, zeros right / bottom)
///                      --roll by (-shift, -shift)   (torch.roll: shifted[y] = padded[y + shift])
///                      --cut into (Hp / window)(Wp / window) windows, row-major
///   window token t = r window + c, r, c in [0, window)
///
/// An 8 x 8 map, window 4, shift 2: the bottom-right window holds four regions that came from
/// the four corners of the map (labels 0 1 / 2 3 below); a token sees only its own region.
///
///   shifted rows 4..7 x cols 4..7:  [0 0 1 1]     labels of the shifted-frame regions
///                                   [0 0 1 1]     [0, Hp - window), [Hp - window, Hp - shift),
///                                   [2 2 3 3]     [Hp - shift, Hp) per axis (HF's three
///                                   [2 2 3 3]     slices), label = 3 row region + col region
///
/// Token pairs of different labels get masked_value (-100 in Swin, HF SwinLayer.get_attn_mask;
/// HF's Swinv2SelfAttention adds its mask twice, so -200 there). Padding is not masked: padded
/// zeros take part in the softmax, as in HF and the original code.
///
/// Running one Swin block with posenc:
///   swin_partition_windows(x, layout, windows)        [B, H, W, C] -> [B nW, N, C]
///   q, k, v = the block's projections of windows      [B nW, N, heads, head_dim]
///   swin_window_bias(table, layout, bias)             [nW, heads, N, N] (or [1, ...] unshifted)
///   per image b: attention over windows b nW .. b nW + nW - 1, bias as
///   AttentionMetadata::attention_bias, MaskMode::kBidirectional
///   swin_merge_windows(out, layout, y)                [B nW, N, C] -> [B, H, W, C]
/// Swin-v2's cosine attention normalises q and k per head and scales by exp(min(logit_scale,
/// ln 100)): fold that per-head factor into q and set AttentionParams::scale = 1; its bias
/// table comes from continuous_position_bias.hpp.

#include <algorithm>
#include <cstring>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>
#include <string_view>

#include "posenc/attention_types.hpp"
#include "posenc/detail/numeric.hpp"
#include "posenc/error.hpp"
#include "posenc/relative_bias_2d.hpp"
#include "posenc/tensor.hpp"

namespace posenc {

/// The two families' rules for a stage whose feature map is not larger than the window.
enum class SwinWindowRule {
  /// Swin (original code, HF SwinLayer.set_shift_and_window_size): when min(H, W) <= window_size
  /// the window shrinks to min(H, W) and the shift to 0.
  kSwin = 0,
  /// Swin-v2 (HF Swinv2Layer._compute_window_shift): window = min(H, window_size), shift 0
  /// when H <= that window. HF reads the height only, and applies the rule once, to the
  /// resolution the config describes (image_size / patch_size / 2^stage).
  kSwinV2 = 1,
};

/// One block's windows over a feature map of height x width patches.
struct SwinWindowLayout {
  Eigen::Index height = 0;  ///< feature-map rows before padding; >= 1
  Eigen::Index width = 0;   ///< feature-map columns before padding; >= 1
  Eigen::Index window = 0;  ///< side of the square window; in [1, 2^15]
  Eigen::Index shift = 0;   ///< cyclic shift of the block; in [0, window)
};

namespace detail {

inline void validate_swin_layout(std::string_view fn, const SwinWindowLayout& l) {
  require(l.height >= 1 && l.width >= 1, fn, "layout height = ", l.height, ", width = ", l.width,
          " must be >= 1");
  require(l.window >= 1 && l.window <= kMaxRelativeWindow, fn, "layout window = ", l.window,
          " must be in [1, 2^15]");
  require(l.shift >= 0 && l.shift < l.window, fn, "layout shift = ", l.shift, " must be in [0, ",
          l.window, ")");
  const Eigen::Index limit = std::numeric_limits<std::int32_t>::max();
  require(l.height <= limit && l.width <= limit, fn, "layout height = ", l.height,
          ", width = ", l.width, " must be <= 2^31 - 1");
}

inline Eigen::Index swin_padded(Eigen::Index n, Eigen::Index window) {
  return (n + window - 1) / window * window;
}

/// A layout's padded map and window grid.
struct SwinGeometry {
  Eigen::Index hp, wp;  ///< the map padded to whole windows
  Eigen::Index cols;    ///< windows per row
  Eigen::Index nw;      ///< windows per image
};

inline SwinGeometry swin_geometry(const SwinWindowLayout& l) {
  const Eigen::Index hp = swin_padded(l.height, l.window), wp = swin_padded(l.width, l.window);
  return {hp, wp, wp / l.window, hp / l.window * (wp / l.window)};
}

/// The row / column region of a shifted-frame coordinate (the file comment's three slices).
inline int swin_region(Eigen::Index s, Eigen::Index padded, const SwinWindowLayout& l) {
  return s < padded - l.window ? 0 : (s < padded - l.shift ? 1 : 2);
}

/// The region label (3 row region + column region) of every token of window w.
inline void swin_window_labels(const SwinWindowLayout& l, Eigen::Index w, std::vector<int>& label) {
  const SwinGeometry g = swin_geometry(l);
  for (Eigen::Index t = 0; t < l.window * l.window; ++t) {
    label[static_cast<std::size_t>(t)] =
        3 * swin_region(w / g.cols * l.window + t / l.window, g.hp, l) +
        swin_region(w % g.cols * l.window + t % l.window, g.wp, l);
  }
}

}  // namespace detail

/// \brief The layout of one block: height x width patches, the config's window_size, and
/// whether the block is a shifted one (HF: odd blocks of a stage, shift window_size / 2), with
/// the family's rule for small maps applied.
/// Throws std::invalid_argument for height, width < 1 or window_size outside [1, 2^15].
inline SwinWindowLayout swin_block_layout(Eigen::Index height, Eigen::Index width,
                                          Eigen::Index window_size, bool shifted,
                                          SwinWindowRule rule = SwinWindowRule::kSwin) {
  constexpr std::string_view fn = "swin_block_layout";
  detail::require(window_size >= 1 && window_size <= detail::kMaxRelativeWindow, fn,
                  "window_size = ", window_size, " must be in [1, 2^15]");
  SwinWindowLayout l{height, width, window_size, shifted ? window_size / 2 : 0};
  if (rule == SwinWindowRule::kSwin) {
    if (std::min(height, width) <= window_size) {
      l.window = std::max<Eigen::Index>(std::min(height, width), 1);
      l.shift = 0;
    }
  } else {
    l.window = std::max<Eigen::Index>(std::min(height, window_size), 1);
    if (height <= l.window) l.shift = 0;
  }
  detail::validate_swin_layout(fn, l);
  return l;
}

/// \brief Windows per image: (Hp / window)(Wp / window), Hp and Wp padded up to multiples of
/// the window. Throws std::invalid_argument for an invalid layout.
inline Eigen::Index swin_num_windows(const SwinWindowLayout& layout) {
  detail::validate_swin_layout("swin_num_windows", layout);
  return detail::swin_geometry(layout).nw;
}

/// \brief Tokens per window: window^2. Throws std::invalid_argument for an invalid layout.
inline Eigen::Index swin_window_tokens(const SwinWindowLayout& layout) {
  detail::validate_swin_layout("swin_window_tokens", layout);
  return layout.window * layout.window;
}

/// \brief The shifted-window mask, out[w, 0, i, j] = 0 when tokens i and j of window w lie in
/// one region of the shifted frame and masked_value otherwise (all 0 for shift 0).
/// out: [swin_num_windows(layout), 1, N, N], N = window^2: a bias that broadcasts over heads.
/// Throws std::invalid_argument (layout, out's shape, a masked_value that is NaN or > 0)
/// before writing anything.
inline void swin_shift_mask(const SwinWindowLayout& layout, TensorView<float, 4> out,
                            float masked_value = -100.0f) {
  constexpr std::string_view fn = "swin_shift_mask";
  const Eigen::Index nw = swin_num_windows(layout), n = layout.window * layout.window;
  detail::require(out.dimension(0) == nw && out.dimension(1) == 1 && out.dimension(2) == n &&
                      out.dimension(3) == n,
                  fn, "out shape [", out.dimension(0), ", ", out.dimension(1), ", ",
                  out.dimension(2), ", ", out.dimension(3), "] must be [num_windows, 1, N, N] = [",
                  nw, ", 1, ", n, ", ", n, "]");
  detail::require_view(fn, "out", out);
  detail::require(masked_value <= 0.0f, fn, "masked_value = ", masked_value,
                  " must be <= 0 (and not NaN)");
  std::vector<int> label(static_cast<std::size_t>(n));
  for (Eigen::Index w = 0; w < nw; ++w) {
    detail::swin_window_labels(layout, w, label);
    for (Eigen::Index i = 0; i < n; ++i) {
      for (Eigen::Index j = 0; j < n; ++j) {
        out(w, 0, i, j) = label[static_cast<std::size_t>(i)] == label[static_cast<std::size_t>(j)]
                              ? 0.0f
                              : masked_value;
      }
    }
  }
}

/// \brief A Swin block's whole additive bias: out[w, h, i, j] = table[index(i, j), h] +
/// mask[w, i, j] (relative_position_bias_2d over a window x window window, plus
/// swin_shift_mask). table: [(2 window - 1)^2, heads], the block's relative_position_bias_table;
/// out: [swin_num_windows(layout), heads, N, N], or [1, heads, N, N] for an unshifted block
/// (no mask, one bias for every window).
/// Throws std::invalid_argument (layout, shapes, a non-finite table entry, masked_value) before
/// writing anything.
template <typename T>
void swin_window_bias(ConstTensorView<T, 2> table, const SwinWindowLayout& layout,
                      TensorView<float, 4> out, float masked_value = -100.0f) {
  static_assert(detail::is_storage_type_v<T>,
                "posenc: table must be float, double, half or bfloat16");
  constexpr std::string_view fn = "swin_window_bias";
  const Eigen::Index nw = swin_num_windows(layout), n = layout.window * layout.window;
  const Eigen::Index heads = table.dimension(1);
  const bool one = out.dimension(0) == 1 && layout.shift == 0;
  detail::require((out.dimension(0) == nw || one) && out.dimension(1) == heads &&
                      out.dimension(2) == n && out.dimension(3) == n,
                  fn, "out shape [", out.dimension(0), ", ", out.dimension(1), ", ",
                  out.dimension(2), ", ", out.dimension(3),
                  "] must be [num_windows, heads, N, N] = [", nw, ", ", heads, ", ", n, ", ", n,
                  "]", layout.shift == 0 ? " or [1, heads, N, N] (an unshifted block)" : "");
  detail::require_view(fn, "out", out);
  detail::require(masked_value <= 0.0f, fn, "masked_value = ", masked_value,
                  " must be <= 0 (and not NaN)");
  const RelativeBias2dWindow window{layout.window, layout.window, false};
  // Validates the table (rows, heads, finite values) and fills window 0.
  relative_position_bias_2d<T>(table, window, TensorView<float, 4>(out.data(), 1, heads, n, n));
  const std::size_t per_window = static_cast<std::size_t>(heads * n * n);
  for (Eigen::Index w = 1; w < out.dimension(0); ++w) {
    std::memcpy(out.data() + w * heads * n * n, out.data(), per_window * sizeof(float));
  }
  if (layout.shift == 0) return;
  std::vector<int> label(static_cast<std::size_t>(n));
  for (Eigen::Index w = 0; w < nw; ++w) {
    detail::swin_window_labels(layout, w, label);
    for (Eigen::Index h = 0; h < heads; ++h) {
      for (Eigen::Index i = 0; i < n; ++i) {
        for (Eigen::Index j = 0; j < n; ++j) {
          if (label[static_cast<std::size_t>(i)] != label[static_cast<std::size_t>(j)]) {
            out(w, h, i, j) += masked_value;
          }
        }
      }
    }
  }
}

namespace detail {

/// Checks a [B, H, W, C] map against a [B nW, N, C] window tensor; returns B and C.
template <typename Map, typename Windows>
std::pair<Eigen::Index, Eigen::Index> validate_swin_tensors(std::string_view fn,
                                                            const SwinWindowLayout& layout,
                                                            const Map& map, const Windows& windows,
                                                            std::string_view map_name,
                                                            std::string_view windows_name) {
  const Eigen::Index nw = swin_num_windows(layout), n = layout.window * layout.window;
  const Eigen::Index b = map.dimension(0), c = map.dimension(3);
  require(c >= 1, fn, map_name, " channels = ", c, " must be >= 1");
  require(map.dimension(1) == layout.height && map.dimension(2) == layout.width, fn, map_name,
          " shape [", b, ", ", map.dimension(1), ", ", map.dimension(2), ", ", c,
          "] must be [batch, height, width, channels] with height = ", layout.height,
          ", width = ", layout.width);
  require_view(fn, map_name, map);
  require(windows.dimension(0) == b * nw && windows.dimension(1) == n && windows.dimension(2) == c,
          fn, windows_name, " shape [", windows.dimension(0), ", ", windows.dimension(1), ", ",
          windows.dimension(2), "] must be [batch * num_windows, N, channels] = [", b * nw, ", ", n,
          ", ", c, "]");
  require_view(fn, windows_name, windows);
  using S = typename Map::Scalar;
  require(!bytes_overlap(map.data(), static_cast<std::size_t>(map.size()) * sizeof(S),
                         windows.data(), static_cast<std::size_t>(windows.size()) * sizeof(S)),
          fn, map_name, " and ", windows_name, " must not overlap");
  return {b, c};
}

}  // namespace detail

/// \brief Pads, shifts and cuts a feature map into windows (HF SwinLayer.forward up to the
/// attention): out[b nW + w, t, :] = the padded map at ((ys + shift) mod Hp, (xs + shift) mod
/// Wp), (ys, xs) the shifted-frame cell of token t of window w, zeros past height / width.
/// in: [batch, height, width, channels]; out: [batch * swin_num_windows(layout), window^2,
/// channels]; they must not overlap.
/// Throws std::invalid_argument (layout, shapes, overlap) before writing anything.
template <typename T>
void swin_partition_windows(ConstTensorView<T, 4> in, const SwinWindowLayout& layout,
                            TensorView<T, 3> out) {
  static_assert(detail::is_storage_type_v<T>, "posenc: in must be float, double, half or bfloat16");
  const auto [batch, channels] =
      detail::validate_swin_tensors("swin_partition_windows", layout, in, out, "in", "out");
  const Eigen::Index ws = layout.window;
  const auto [hp, wp, cols, nw] = detail::swin_geometry(layout);
  const auto row_bytes = static_cast<std::size_t>(channels) * sizeof(T);
  for (Eigen::Index b = 0; b < batch; ++b) {
    for (Eigen::Index w = 0; w < nw; ++w) {
      for (Eigen::Index t = 0; t < ws * ws; ++t) {
        const Eigen::Index y = (w / cols * ws + t / ws + layout.shift) % hp,
                           x = (w % cols * ws + t % ws + layout.shift) % wp;
        T* dst = out.data() + ((b * nw + w) * ws * ws + t) * channels;
        if (y < layout.height && x < layout.width) {
          std::memcpy(dst, in.data() + ((b * layout.height + y) * layout.width + x) * channels,
                      row_bytes);
        } else {
          std::fill(dst, dst + channels, T(0));
        }
      }
    }
  }
}

/// \brief The inverse of swin_partition_windows (HF window_reverse, the roll back by +shift and
/// the crop): out[b, y, x, :] = in[b nW + w, t, :] for the window w and token t the map cell
/// (y, x) went to; the padding's tokens are dropped.
/// in: [batch * swin_num_windows(layout), window^2, channels]; out: [batch, height, width,
/// channels]; they must not overlap.
/// Throws std::invalid_argument (layout, shapes, overlap) before writing anything.
template <typename T>
void swin_merge_windows(ConstTensorView<T, 3> in, const SwinWindowLayout& layout,
                        TensorView<T, 4> out) {
  static_assert(detail::is_storage_type_v<T>, "posenc: in must be float, double, half or bfloat16");
  const auto [batch, channels] =
      detail::validate_swin_tensors("swin_merge_windows", layout, out, in, "out", "in");
  const Eigen::Index ws = layout.window;
  const auto [hp, wp, cols, nw] = detail::swin_geometry(layout);
  const auto row_bytes = static_cast<std::size_t>(channels) * sizeof(T);
  for (Eigen::Index b = 0; b < batch; ++b) {
    for (Eigen::Index y = 0; y < layout.height; ++y) {
      const Eigen::Index ys = (y + hp - layout.shift) % hp;
      for (Eigen::Index x = 0; x < layout.width; ++x) {
        const Eigen::Index xs = (x + wp - layout.shift) % wp;
        const Eigen::Index w = ys / ws * cols + xs / ws, t = ys % ws * ws + xs % ws;
        std::memcpy(out.data() + ((b * layout.height + y) * layout.width + x) * channels,
                    in.data() + ((b * nw + w) * ws * ws + t) * channels, row_bytes);
      }
    }
  }
}

}  // namespace posenc
