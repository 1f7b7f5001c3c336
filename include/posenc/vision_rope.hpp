#pragma once
/// \file posenc/vision_rope.hpp
/// 2-D RoPE of the Qwen2-VL / Qwen2.5-VL / Qwen3-VL / GLM-4V vision encoders: each image patch
/// rotates by its row h in the first quarter of the pairs and by its column w in the second,
/// with the frequencies of a head_dim / 2 wide RoPE (HF `VisionRotaryEmbedding(head_dim // 2)`,
/// `rot_pos_emb`, `apply_rotary_pos_emb_vision`):
///
///   q = head_dim / 4,  f_i = theta^(-2i / (head_dim / 2)),  i in [0, q)
///   half-split pair j (j, j + head_dim/2):  angle = h f_j for j < q,  w f_(j-q) for q <= j < 2q
///
/// which is M-RoPE with sections (t, h, w) = (0, q, q) over inv_freq = [f_0 .. f_(q-1),
/// f_0 .. f_(q-1)]: vision_rope_2d() returns that plan and apply_mrope_inplace /
/// apply_mrope_qk_inplace run it (every view, storage type and thread option of rope.hpp).
///
/// Patch order (vision_rope_2d_positions): the processor emits a frame's patches window by
/// window, m x m windows (m = spatial_merge_size) in row-major order and row-major inside, so
/// that each window becomes one LLM token after the merger:
///
///   grid 4 x 4, m = 2     token  0  1  2  3  4  5  6  7  8  9 10 11 12 13 14 15
///                         h      0  0  1  1  0  0  1  1  2  2  3  3  2  2  3  3
///                         w      0  1  0  1  2  3  2  3  0  1  0  1  2  3  2  3
///
/// Every frame of a video repeats its frame's positions (time is not rotated in the encoder).
/// Qwen2.5-VL's window attention permutes the patches (window_index) before the blocks that
/// form Q and K: permute these positions the same way.
///
/// Pixtral's vision encoder (Pixtral-12B, Mistral-Small-3.1; HF PixtralRotaryEmbedding) is the
/// same M-RoPE geometry over a head_dim-wide RoPE's frequencies split by parity: with
/// g_k = theta^(-2k / head_dim), k in [0, head_dim / 2), the h pairs take g_0, g_2, g_4, ..
/// and the w pairs g_1, g_3, g_5, .. (freqs[::2], freqs[1::2]); patches in row-major order
/// (vision_rope_2d_positions with spatial_merge_size 1). vision_rope_2d_pixtral() returns it.
///
/// Llama-4's vision encoder (HF Llama4VisionRotaryEmbedding + vision_apply_rotary_emb) takes the
/// Qwen-VL frequencies above but turns *interleaved* pairs (2j, 2j + 1; view_as_complex), counts
/// from 1 and puts the column first: pairs [0, q) turn by column + 1, pairs [q, 2q) by row + 1,
/// so no patch sits at the identity; the class token, appended after the patches, does not turn
/// (its angles are masked to 0). vision_rope_2d_llama4() is that plan (layout kInterleaved) and
/// vision_rope_2d_positions_llama4() writes (0, column + 1, row + 1) for the row-major patches,
/// then (0, 0, 0) for the class token:
///
///   grid 2 x 3 + CLS   token  0  1  2  3  4  5  6
///                      h      1  2  3  1  2  3  0     (stream h drives pairs [0, q): columns)
///                      w      1  1  1  2  2  2  0     (stream w drives pairs [q, 2q): rows)

#include <cmath>
#include <cstdint>
#include <string_view>

#include "posenc/error.hpp"
#include "posenc/mrope.hpp"
#include "posenc/rope_frequencies.hpp"
#include "posenc/tensor.hpp"

namespace posenc {

namespace detail {

/// out must be [3, batch, seq] with row b and `tokens` columns from `first` inside it (counted
/// in double: a grid's product may exceed Eigen::Index).
inline void validate_vision_positions_out(std::string_view fn, TensorView<std::int64_t, 3> out,
                                          Eigen::Index b, Eigen::Index first, double tokens) {
  require(out.dimension(0) == 3, fn, "out shape [", out.dimension(0), ", ", out.dimension(1),
          ", ", out.dimension(2), "] must be [3, batch, seq]");
  require(b >= 0 && b < out.dimension(1), fn, "b = ", b, " must be in [0, batch = ",
          out.dimension(1), ")");
  require(first >= 0 && first <= out.dimension(2) &&
              tokens <= static_cast<double>(out.dimension(2) - first),
          fn, "first = ", first, " + ", tokens, " tokens must fit in seq = ", out.dimension(2));
}

}  // namespace detail

/// The vision encoder's rotation as an M-RoPE plan (see the file comment).
struct VisionRope2D {
  RopeFrequencies freqs;   ///< rotary_dim = head_dim, inv_freq [head_dim / 2] = [f, f]
  MRopeSections sections;  ///< (0, head_dim / 4, head_dim / 4), contiguous
  /// The pair layout the encoder rotates: half-split (HF rotate_half: Qwen-VL, GLM-4V,
  /// Pixtral), interleaved for Llama-4.
  RopeLayout layout = RopeLayout::kHalfSplit;
};

/// \brief The 2-D vision RoPE plan for heads of head_dim (HF: hidden_size // num_heads of the
/// vision config) and base theta (10000 in every Qwen-VL / GLM-4V vision tower).
/// Throws std::invalid_argument when head_dim is not a positive multiple of 4, exceeds
/// kMaxRotaryDim, or theta is not finite and > 1.
inline VisionRope2D vision_rope_2d(Eigen::Index head_dim, double theta = 10000.0) {
  constexpr std::string_view fn = "vision_rope_2d";
  detail::require(head_dim > 0 && head_dim % 4 == 0 && head_dim <= kMaxRotaryDim, fn,
                  "head_dim = ", head_dim, " must be a multiple of 4 in [4, ", kMaxRotaryDim,
                  "] (a quarter of the pairs per axis)");
  detail::require(std::isfinite(theta) && theta > 1.0, fn, "theta = ", theta,
                  " must be finite and > 1");
  const Eigen::Index q = head_dim / 4;
  VisionRope2D plan;
  plan.freqs.rotary_dim = head_dim;
  plan.freqs.head_dim = head_dim;
  plan.freqs.effective_theta = theta;
  plan.freqs.inv_freq.resize(static_cast<std::size_t>(2 * q));
  for (Eigen::Index i = 0; i < q; ++i) {
    // HF VisionRotaryEmbedding(dim = head_dim / 2): theta^(-arange(0, dim, 2) / dim).
    const double w = std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(2 * q));
    plan.freqs.inv_freq[static_cast<std::size_t>(i)] = w;
    plan.freqs.inv_freq[static_cast<std::size_t>(q + i)] = w;
  }
  plan.sections.section = {0, q, q};
  return plan;
}

/// \brief Pixtral's 2-D vision RoPE plan (file comment): heads of head_dim (hidden_size //
/// num_attention_heads of the vision config, 64 for Pixtral-12B) and rope_theta (10000).
/// Throws std::invalid_argument as vision_rope_2d.
inline VisionRope2D vision_rope_2d_pixtral(Eigen::Index head_dim, double theta = 10000.0) {
  VisionRope2D plan = vision_rope_2d(head_dim, theta);
  const Eigen::Index q = head_dim / 4;
  for (Eigen::Index i = 0; i < q; ++i) {
    const auto g = [&](Eigen::Index k) {
      return std::pow(theta, -2.0 * static_cast<double>(k) / static_cast<double>(head_dim));
    };
    plan.freqs.inv_freq[static_cast<std::size_t>(i)] = g(2 * i);
    plan.freqs.inv_freq[static_cast<std::size_t>(q + i)] = g(2 * i + 1);
  }
  return plan;
}

/// \brief Llama-4's 2-D vision RoPE plan (file comment): heads of head_dim (vision_config
/// hidden_size // num_attention_heads: 1408 / 16 = 88) and rope_theta (10000).
/// Throws std::invalid_argument as vision_rope_2d.
inline VisionRope2D vision_rope_2d_llama4(Eigen::Index head_dim, double theta = 10000.0) {
  VisionRope2D plan = vision_rope_2d(head_dim, theta);
  plan.layout = RopeLayout::kInterleaved;
  return plan;
}

/// \brief Writes Llama-4's positions for one image of grid_h x grid_w patches (HF:
/// image_size // patch_size on each side) and its class token: (0, column + 1, row + 1) for the
/// patches in row-major order, then (0, 0, 0), to out[:, b, first .. first + grid_h grid_w + 1).
/// Returns the number of tokens written.
/// Throws std::invalid_argument (a grid dimension < 1, out not [3, batch, seq], b or first out
/// of range, the tokens past the end of the row) before writing anything.
inline Eigen::Index vision_rope_2d_positions_llama4(Eigen::Index grid_h, Eigen::Index grid_w,
                                                    TensorView<std::int64_t, 3> out,
                                                    Eigen::Index b = 0, Eigen::Index first = 0) {
  constexpr std::string_view fn = "vision_rope_2d_positions_llama4";
  detail::require(grid_h >= 1 && grid_w >= 1, fn, "grid (h, w) = (", grid_h, ", ", grid_w,
                  ") must be >= 1 in both dimensions");
  detail::validate_vision_positions_out(
      fn, out, b, first, static_cast<double>(grid_h) * static_cast<double>(grid_w) + 1.0);
  Eigen::Index col = first;
  for (Eigen::Index r = 0; r < grid_h; ++r) {
    for (Eigen::Index c = 0; c < grid_w; ++c, ++col) {
      out(0, b, col) = 0;
      out(1, b, col) = c + 1;
      out(2, b, col) = r + 1;
    }
  }
  out(0, b, col) = out(1, b, col) = out(2, b, col) = 0;  // the class token
  return col + 1 - first;
}

/// \brief Writes the (0, h, w) positions of one image (grid_t = 1) or video's patches, in the
/// processor's window order (file comment), to out[:, b, first .. first + t h w); other columns
/// are not touched. grid_h / grid_w: patches per column / row (HF image_grid_thw, before the
/// merge). Returns the number of tokens written, so that images can follow one another.
/// Throws std::invalid_argument (a grid dimension < 1, spatial_merge_size < 1 or not dividing
/// grid_h and grid_w, out not [3, batch, seq], b or first out of range, the tokens past the
/// end of the row) before writing anything.
inline Eigen::Index vision_rope_2d_positions(Eigen::Index grid_t, Eigen::Index grid_h,
                                             Eigen::Index grid_w, Eigen::Index spatial_merge_size,
                                             TensorView<std::int64_t, 3> out, Eigen::Index b = 0,
                                             Eigen::Index first = 0) {
  constexpr std::string_view fn = "vision_rope_2d_positions";
  const Eigen::Index m = spatial_merge_size;
  detail::require(grid_t >= 1 && grid_h >= 1 && grid_w >= 1, fn, "grid (t, h, w) = (", grid_t,
                  ", ", grid_h, ", ", grid_w, ") must be >= 1 in every dimension");
  detail::require(m >= 1 && grid_h % m == 0 && grid_w % m == 0, fn, "spatial_merge_size = ", m,
                  " must be >= 1 and divide grid_h = ", grid_h, " and grid_w = ", grid_w);
  detail::validate_vision_positions_out(fn, out, b, first,
                                        static_cast<double>(grid_t) *
                                            static_cast<double>(grid_h) *
                                            static_cast<double>(grid_w));
  Eigen::Index col = first;
  for (Eigen::Index t = 0; t < grid_t; ++t) {
    for (Eigen::Index wh = 0; wh < grid_h / m; ++wh) {
      for (Eigen::Index ww = 0; ww < grid_w / m; ++ww) {
        for (Eigen::Index ih = 0; ih < m; ++ih) {
          for (Eigen::Index iw = 0; iw < m; ++iw, ++col) {
            out(0, b, col) = 0;
            out(1, b, col) = wh * m + ih;
            out(2, b, col) = ww * m + iw;
          }
        }
      }
    }
  }
  return col - first;
}

}  // namespace posenc
