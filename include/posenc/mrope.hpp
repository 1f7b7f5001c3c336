#pragma once
/// \file posenc/mrope.hpp
/// Multimodal RoPE (M-RoPE, Qwen2-VL, Wang et al. 2024 §2.1): every token carries three
/// positions — temporal, height, width — and each rotation pair takes its angle from one of
/// them: angle_j = position[stream(j)] * inv_freq[j]. For text tokens the three positions are
/// equal and M-RoPE is plain RoPE.
///
/// Which pair reads which stream (mrope_section = (s_t, s_h, s_w), s_t + s_h + s_w = rotary_dim/2):
///   kContiguous   pairs [0, s_t) -> t, [s_t, s_t + s_h) -> h, the rest -> w
///                 (HF Qwen2-VL apply_multimodal_rotary_pos_emb: cos.split(mrope_section * 2))
///   kInterleaved  pair j -> h if j % 3 == 1 and j < 3 s_h, -> w if j % 3 == 2 and j < 3 s_w,
///                 else t   (HF Qwen3-VL apply_interleaved_mrope, ggml IMROPE: "thwthw...ttt")
/// The section layout is independent of the pair layout (RopeLayout): Qwen2/3-VL use
/// half-split pairs with either section layout.
///
/// Angles are formed per token in double and reduced exactly (no recurrence: the three
/// streams jump independently); the kernels are rope.hpp's, so every view, dtype, direction
/// and the thread pool option work the same way, and the apply call never allocates.

#include <array>
#include <cstdint>
#include <string_view>
#include <utility>

#include "posenc/rope.hpp"

namespace posenc {

/// How mrope_section maps rotation pairs to the (t, h, w) position streams (see file comment).
enum class MRopeSectionLayout : std::uint8_t {
  kContiguous = 0,   ///< [ttt...hhh...www...]  Qwen2-VL, Qwen2.5-VL
  kInterleaved = 1,  ///< [thwthw...ttt]        Qwen3-VL
};

constexpr std::string_view to_string(MRopeSectionLayout layout) noexcept {
  switch (layout) {
    case MRopeSectionLayout::kContiguous: return "contiguous";
    case MRopeSectionLayout::kInterleaved: return "interleaved";
  }
  return "unknown";
}

/// HF `rope_scaling.mrope_section` (+ Qwen3-VL's `mrope_interleaved`).
struct MRopeSections {
  std::array<Eigen::Index, 3> section{};  ///< pairs per stream (t, h, w); sum = rotary_dim / 2
  MRopeSectionLayout layout = MRopeSectionLayout::kContiguous;
};

/// Positions [3, batch, seq] (t, h, w), int64, as HF's position_ids for Qwen2-VL.
using MRopePositionsView = ConstTensorView<std::int64_t, 3>;

namespace detail {

inline void validate_mrope_sections(std::string_view fn, const MRopeSections& sec,
                                    Eigen::Index rotary_dim) {
  const Eigen::Index half = rotary_dim / 2;
  require(sec.section[0] >= 0 && sec.section[1] >= 0 && sec.section[2] >= 0 &&
              sec.section[0] + sec.section[1] + sec.section[2] == half,
          fn, "mrope_section = [", sec.section[0], ", ", sec.section[1], ", ", sec.section[2],
          "] must be >= 0 and sum to rotary_dim / 2 = ", half);
  require(sec.layout == MRopeSectionLayout::kContiguous ||
              sec.layout == MRopeSectionLayout::kInterleaved,
          fn, "mrope section layout = ", static_cast<int>(sec.layout),
          " is not an MRopeSectionLayout");
  if (sec.layout == MRopeSectionLayout::kInterleaved) {
    require(3 * sec.section[1] - 2 < half && 3 * sec.section[2] - 1 < half, fn,
            "mrope_section = [", sec.section[0], ", ", sec.section[1], ", ", sec.section[2],
            "]: interleaved h / w pairs (j % 3 == 1 / 2, j < 3 s) must fit in rotary_dim / 2 = ",
            half);
  }
}

/// Stream (0 = t, 1 = h, 2 = w) of pair j; sections validated.
inline int mrope_stream(const MRopeSections& sec, Eigen::Index j) {
  if (sec.layout == MRopeSectionLayout::kInterleaved) {
    if (j % 3 == 1 && j < 3 * sec.section[1]) return 1;
    if (j % 3 == 2 && j < 3 * sec.section[2]) return 2;
    return 0;
  }
  if (j < sec.section[0]) return 0;
  return j < sec.section[0] + sec.section[1] ? 1 : 2;
}

/// Token (b, s) -> its three positions.
struct MRopeTokenPositions {
  const std::int64_t* data;
  Eigen::Index batch, seq;
  std::array<std::int64_t, 3> at(Eigen::Index b, Eigen::Index s) const noexcept {
    const Eigen::Index stride = batch * seq;
    const Eigen::Index i = b * seq + s;
    return {data[i], data[stride + i], data[2 * stride + i]};
  }
};

/// Per-token cos/sin of angle_j = p[stream(j)] * inv_freq[j], in double, every token exact.
template <typename C>
class MRopeAngles {
 public:
  MRopeAngles(const double* inv_freq, Eigen::Index half, const MRopeSections& sec, double cm,
              double sm)
      : inv_(inv_freq), half_(half), cm_(cm), sm_(sm) {
    for (Eigen::Index j = 0; j < half; ++j) stream_[j] = static_cast<std::uint8_t>(mrope_stream(sec, j));
  }

  void at(const std::array<std::int64_t, 3>& p) {
    if (p == previous_) return;
    previous_ = p;
    bool fast = true;
    for (Eigen::Index j = 0; j < half_; ++j) {
      angle_[j] = static_cast<double>(p[stream_[j]]) * inv_[j];
      fast = fast && angle_[j] <= kRopeFastTrigLimit;
    }
    if (fast) {
      rope_sincos<std::is_same_v<C, double>>(angle_, s_, c_, half_);
    } else {
      for (Eigen::Index j = 0; j < half_; ++j) {
        s_[j] = std::sin(angle_[j]);
        c_[j] = std::cos(angle_[j]);
      }
    }
    emit_cos_sin(c_, s_, cm_, sm_, half_, out_c_, out_s_);
  }
  const C* cos() const noexcept { return out_c_; }
  const C* sin() const noexcept { return out_s_; }

 private:
  static constexpr Eigen::Index kHalfMax = kMaxRotaryDim / 2;
  const double* inv_;
  Eigen::Index half_;
  double cm_, sm_;
  std::array<std::int64_t, 3> previous_{-1, -1, -1};
  std::uint8_t stream_[kHalfMax];
  alignas(64) double angle_[kHalfMax];
  alignas(64) double c_[kHalfMax];
  alignas(64) double s_[kHalfMax];
  alignas(64) C out_c_[kMaxRotaryDim / 2];
  alignas(64) C out_s_[kMaxRotaryDim / 2];
};

template <typename T>
void mrope_apply(std::string_view fn, const RopeTarget<T>* targets, int num_targets,
                 MRopePositionsView positions, const RopeFrequencies& freqs, RopeLayout layout,
                 const MRopeSections& sections, const RopeApplyOptions& options) {
  static_assert(is_storage_type_v<std::remove_const_t<T>>,
                "posenc: storage type must be float, double, Eigen::half or Eigen::bfloat16");
  const Eigen::Index rd = validate_freqs(fn, freqs);
  validate_layout(fn, layout);
  validate_direction(fn, options.direction);
  validate_device(fn, options);
  validate_mrope_sections(fn, sections, rd);
  double bytes = 0.0;
  const Eigen::Index units =
      validate_targets(fn, targets, num_targets, rd, freqs.rotary_offset, &bytes);
  const Eigen::Index batch = targets[0].dst.batch, seq = targets[0].dst.seq;
  require(positions.dimension(0) == 3 && positions.dimension(1) == batch &&
              positions.dimension(2) == seq,
          fn, "position_ids shape [", positions.dimension(0), ", ", positions.dimension(1), ", ",
          positions.dimension(2), "] must be [3, batch, seq] = [3, ", batch, ", ", seq, "]");
  for (Eigen::Index k = 0; k < 3; ++k) {
    for (Eigen::Index b = 0; b < batch; ++b) {
      for (Eigen::Index s = 0; s < seq; ++s) {
        const std::int64_t p = positions(k, b, s);
        require(p >= 0 && p <= kMaxRopePosition, fn, "position_ids[", k, ", ", b, ", ", s,
                "] = ", p, " must be in [0, 2^53]");
      }
    }
  }
  if (units == 0) return;
  const MRopeTokenPositions pos{positions.data(), batch, seq};
  const std::pair<double, double> mult =
      rope_cos_sin_multipliers(freqs.attention_factor, options.direction);
  const auto run = [&](auto layout_constant) {
    constexpr RopeLayout L = decltype(layout_constant)::value;
    auto worker = [&](Eigen::Index u0, Eigen::Index u1) {
      MRopeAngles<compute_t<T>> angles(freqs.inv_freq.data(), rd / 2, sections, mult.first,
                                       mult.second);
      rope_run_tokens<T, L>(targets, num_targets, pos, u0, u1, angles, rd, freqs.rotary_offset);
    };
    rope_parallel_for(options, units, bytes, worker);
  };
  with_rope_layout(layout, run);
}

}  // namespace detail

/// \brief M-RoPE in place: pair j of token (b, s) rotates by positions[stream(j), b, s] *
/// inv_freq[j] (Qwen2-VL / Qwen3-VL; stream map in the file comment).
/// x: any RopeHeads view [batch, seq, heads, head_dim]; positions: [3, batch, seq] (t, h, w)
/// Throws std::invalid_argument for sections that do not sum to rotary_dim / 2, a positions
/// shape other than [3, batch, seq], negative positions, and everything apply_rope_inplace
/// checks — before the first write.
template <typename T>
void apply_mrope_inplace(RopeHeads<T> x, MRopePositionsView positions,
                         const RopeFrequencies& freqs, RopeLayout layout,
                         const MRopeSections& sections, const RopeApplyOptions& options = {}) {
  const detail::RopeTarget<T> target{detail::as_const(x), x};
  detail::mrope_apply<T>("apply_mrope_inplace", &target, 1, positions, freqs, layout, sections,
                         options);
}

/// \brief M-RoPE on Q and K in one pass (GQA head counts may differ).
template <typename T>
void apply_mrope_qk_inplace(RopeHeads<T> q, RopeHeads<T> k, MRopePositionsView positions,
                            const RopeFrequencies& freqs, RopeLayout layout,
                            const MRopeSections& sections, const RopeApplyOptions& options = {}) {
  const detail::RopeTarget<T> targets[2] = {{detail::as_const(q), q}, {detail::as_const(k), k}};
  detail::mrope_apply<T>("apply_mrope_qk_inplace", targets, 2, positions, freqs, layout,
                         sections, options);
}

}  // namespace posenc
