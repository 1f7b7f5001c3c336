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
///   kAlternatingHw pair j -> h if j < s_h + s_w and j even, -> w if odd, else t; s_h == s_w
///                 (HF ERNIE-4.5-VL: its inv_freq "pre-rotated" on the h / w dims and its cos /
///                 sin recomposed as stack(h, w) then t: "hwhw...ttt"; the config lists the
///                 sections as [h, w, t], e.g. [22, 22, 20]; vLLM's BailingMRotaryEmbedding
///                 for Ling's BailingMoeV3-VL takes the same map on interleaved pairs, its
///                 mrope_section listed as [t, h, w])
///
/// XD-RoPE (HunYuan-VL / HunyuanOCR, rope_type "xdrope"): four streams (p, w, h, i) — the
/// token index, the column and row in the image's LLM grid, the image's ordinal — over four
/// contiguous sections, kContiguous with section[3] > 0 and positions [4, batch, seq]
/// (xdrope_position_ids). Tencent's code and vLLM split cos / sin per pair (xdrope_section * 2,
/// list repetition: both halves of a pair read one stream); a transformers port doubles each
/// section instead ([2 s for s in sections] over cat(freqs, freqs)), so that half-split pair
/// (j, j + r/2) takes cos / sin of two streams and is no rotation for image tokens. posenc
/// follows the reference code.
///
/// The section layout is independent of the pair layout (RopeLayout): Qwen2/3-VL use
/// half-split pairs with either section layout, ERNIE-4.5-VL interleaved pairs (its
/// rotate_half_text turns (2j, 2j + 1)).
///
/// Angles are formed per token in double and reduced exactly (the three streams jump
/// independently); text tokens, all streams at one position, take 1-D RoPE's angles (exact
/// anchors, the angle-addition step between consecutive positions). Or they are read from a
/// caller's float cos/sin cache (the *_cached calls: no trigonometry per token). The kernels
/// are rope.hpp's, so every view, dtype, direction and the thread pool option work the same
/// way, and the apply call never allocates.
///
/// Positions (mrope_position_ids, HF Qwen2-VL / Qwen2.5-VL `get_rope_index`): a prompt is a run
/// of text and vision segments. Text continues at the largest position so far + 1 in all three
/// streams; a vision block of grid_t x grid_h x grid_w tokens (the LLM grid, after the vision
/// encoder's spatial merge) starts at that same position b and gives token (t, h, w) the
/// positions (b + T(t), b + h, b + w), T(t) = t for images and Qwen2-VL video, and
/// trunc(t * seconds_per_grid_t * tokens_per_second) in float32 for Qwen2.5-VL video. So a
/// prompt of n tokens ends below position n, and every later token i (decode, or text
/// appended) sits at i + delta in all three streams, delta = (largest position + 1) - n:
///
///   text 3 | image 2 x 3 | text 2       t: 0 1 2  3 3 3 3 3 3  6 7     delta = 8 - 11 = -3
///                                       h: 0 1 2  3 3 3 4 4 4  6 7     decode token 11: 8
///                                       w: 0 1 2  3 4 5 3 4 5  6 7
///
/// Qwen3-VL marks video time with timestamp text instead: each frame is its own segment
/// video(1, h, w), the timestamp tokens text segments between them (its get_rope_index splits
/// video_grid_thw frame by frame).
///
/// The delta belongs to the whole prompt: chunked prefill takes its chunk's columns of the
/// prompt's positions, and decode keeps the delta from there (vLLM #10403 recomputed it per
/// chunk; transformers #40490 lost it in generate).
///
/// With a KvCache: rotate the prompt's Q and K with apply_mrope_qk_inplace and append the keys
/// while no plan is set (the slots keep their token indices; the causal mask goes by slot),
/// then set_rope(freqs, layout) and append each decode token at position i + delta: the cache
/// rotates it and its query by plain RoPE, which is M-RoPE for text. update_rope cannot turn
/// the prompt's keys (it knows one position per slot); re-prefill instead.

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "posenc/rope.hpp"

namespace posenc {

/// How mrope_section maps rotation pairs to the position streams (see file comment).
enum class MRopeSectionLayout : std::uint8_t {
  kContiguous = 0,   ///< [ttt...hhh...www...]  Qwen2-VL, Qwen2.5-VL
  kInterleaved = 1,  ///< [thwthw...ttt]        Qwen3-VL
  kAlternatingHw = 2,  ///< [hwhw...ttt]        ERNIE-4.5-VL
};

constexpr std::string_view to_string(MRopeSectionLayout layout) noexcept {
  switch (layout) {
    case MRopeSectionLayout::kContiguous: return "contiguous";
    case MRopeSectionLayout::kInterleaved: return "interleaved";
    case MRopeSectionLayout::kAlternatingHw: return "alternating_hw";
  }
  return "unknown";
}

/// Most position streams a token carries (XD-RoPE's p, w, h, i).
inline constexpr int kMaxMRopeStreams = 4;

/// HF `rope_scaling.mrope_section` (+ Qwen3-VL's `mrope_interleaved`), or XD-RoPE's
/// `xdrope_section` (four entries, kContiguous).
struct MRopeSections {
  /// Pairs per stream, (t, h, w) or (p, w, h, i); sum = rotary_dim / 2. section[3] = 0 for the
  /// three-stream layouts.
  std::array<Eigen::Index, kMaxMRopeStreams> section{};
  MRopeSectionLayout layout = MRopeSectionLayout::kContiguous;

  /// Position streams the sections read: 4 when section[3] > 0, else 3.
  int streams() const noexcept { return section[3] != 0 ? 4 : 3; }
};

/// Positions [streams, batch, seq], int64: (t, h, w) as HF's position_ids for Qwen2-VL, or
/// XD-RoPE's (p, w, h, i).
using MRopePositionsView = ConstTensorView<std::int64_t, 3>;

namespace detail {

inline std::string mrope_sections_string(const MRopeSections& sec) {
  std::string out = "[";
  for (int k = 0; k < sec.streams(); ++k) {
    if (k > 0) out += ", ";
    out += std::to_string(sec.section[static_cast<std::size_t>(k)]);
  }
  return out + "]";
}

inline void validate_mrope_sections(std::string_view fn, const MRopeSections& sec,
                                    Eigen::Index rotary_dim) {
  const Eigen::Index half = rotary_dim / 2;
  // Each entry in [0, half] before it is added: entries near INT64_MAX wrapped the sum back
  // to half.
  Eigen::Index sum = 0;
  bool non_negative = true;
  for (const Eigen::Index s : sec.section) {
    non_negative = non_negative && s >= 0 && s <= half;
    if (non_negative) sum += s;
  }
  require(non_negative && sum == half, fn, "mrope_section = ", mrope_sections_string(sec),
          " must be >= 0 and sum to rotary_dim / 2 = ", half);
  require(sec.layout == MRopeSectionLayout::kContiguous ||
              sec.layout == MRopeSectionLayout::kInterleaved ||
              sec.layout == MRopeSectionLayout::kAlternatingHw,
          fn, "mrope section layout = ", static_cast<int>(sec.layout),
          " is not an MRopeSectionLayout");
  require(sec.streams() == 3 || sec.layout == MRopeSectionLayout::kContiguous, fn,
          "mrope_section = ", mrope_sections_string(sec), ": four streams need the contiguous "
          "layout, not ", to_string(sec.layout));
  require(sec.layout != MRopeSectionLayout::kAlternatingHw || sec.section[1] == sec.section[2],
          fn, "mrope_section = ", mrope_sections_string(sec),
          ": alternating h / w pairs need as many h as w pairs");
  if (sec.layout == MRopeSectionLayout::kInterleaved) {
    require(3 * sec.section[1] - 2 < half && 3 * sec.section[2] - 1 < half, fn,
            "mrope_section = ", mrope_sections_string(sec),
            ": interleaved h / w pairs (j % 3 == 1 / 2, j < 3 s) must fit in rotary_dim / 2 = ",
            half);
  }
}

/// Stream of pair j (0 = t, 1 = h, 2 = w; XD-RoPE 0 .. 3 = p, w, h, i); sections validated.
inline int mrope_stream(const MRopeSections& sec, Eigen::Index j) {
  if (sec.layout == MRopeSectionLayout::kAlternatingHw) {
    if (j < sec.section[1] + sec.section[2]) return j % 2 == 0 ? 1 : 2;
    return 0;
  }
  if (sec.layout == MRopeSectionLayout::kInterleaved) {
    if (j % 3 == 1 && j < 3 * sec.section[1]) return 1;
    if (j % 3 == 2 && j < 3 * sec.section[2]) return 2;
    return 0;
  }
  Eigen::Index end = 0;
  for (int k = 0; k + 1 < kMaxMRopeStreams; ++k) {
    end += sec.section[static_cast<std::size_t>(k)];
    if (j < end) return k;
  }
  return kMaxMRopeStreams - 1;
}

/// A token's positions, one per stream; a three-stream token repeats its first in the fourth,
/// so "all equal" means a text token either way.
using MRopeTokenPosition = std::array<std::int64_t, kMaxMRopeStreams>;

/// Token (b, s) -> its positions.
struct MRopeTokenPositions {
  const std::int64_t* data;
  Eigen::Index batch, seq;
  int streams;
  MRopeTokenPosition at(Eigen::Index b, Eigen::Index s) const noexcept {
    const Eigen::Index stride = batch * seq;
    const Eigen::Index i = b * seq + s;
    return {data[i], data[stride + i], data[2 * stride + i],
            data[(streams == 4 ? 3 : 0) * stride + i]};
  }
};

inline bool mrope_all_equal(const MRopeTokenPosition& p) noexcept {
  return p[0] == p[1] && p[1] == p[2] && p[2] == p[3];
}

/// Per-token cos/sin of angle_j = p[stream(j)] * inv_freq[j], in double. Text tokens (every
/// stream at one position) take 1-D RoPE's angles (RopeTrig: exact anchors, the angle-addition
/// step between consecutive positions), so a text run costs what 1-D RoPE's does and rotates
/// as it does; every other token is an exact anchor.
template <typename C>
class MRopeAngles {
 public:
  MRopeAngles(const double* inv_freq, Eigen::Index half, const MRopeSections& sec, double cm,
              double sm)
      : inv_(inv_freq), half_(half), cm_(cm), sm_(sm), text_(inv_freq, half) {
    for (Eigen::Index j = 0; j < half; ++j) stream_[j] = static_cast<std::uint8_t>(mrope_stream(sec, j));
  }

  void at(const MRopeTokenPosition& p) {
    if (p == previous_) return;
    previous_ = p;
    if (mrope_all_equal(p)) {
      text_.at(p[0]);
      emit_cos_sin(text_.cos(), text_.sin(), cm_, sm_, half_, out_c_, out_s_);
      return;
    }
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
  RopeTrig<std::is_same_v<C, double>> text_;
  MRopeTokenPosition previous_{-1, -1, -1, -1};
  std::uint8_t stream_[kHalfMax];
  alignas(64) double angle_[kHalfMax];
  alignas(64) double c_[kHalfMax];
  alignas(64) double s_[kHalfMax];
  alignas(64) C out_c_[kMaxRotaryDim / 2];
  alignas(64) C out_s_[kMaxRotaryDim / 2];
};

/// Per-token cos / sin gathered from a cos / sin cache: pair j of row p[stream(j)] (vLLM
/// MRotaryEmbedding's lookup); text tokens (t = h = w) of a float cache read one row in place.
/// Other cache types are widened to double (exact) on the way.
template <typename C>
class MRopeAnglesFromCache {
 public:
  MRopeAnglesFromCache(const CosSinCacheView& cache, const MRopeSections& sec, RopeDirection dir)
      : cache_(cache), rd_(cache.rotary_dim()), dir_(dir) {
    for (Eigen::Index j = 0; j < rd_ / 2; ++j) stream_[j] = static_cast<std::uint8_t>(mrope_stream(sec, j));
  }

  void at(const MRopeTokenPosition& p) {
    if (p == previous_) return;
    previous_ = p;
    const Eigen::Index half = rd_ / 2;
    if (cache_.element() == CosSinCacheView::Element::kFloat) {
      const auto* cache = static_cast<const float*>(cache_.data());
      if (mrope_all_equal(p)) {
        const float* row = cache + p[0] * rd_;
        turn_.set(row, row + half, half, dir_);
        return;
      }
      gather(cache, p, c_, s_);
      turn_.set(c_, s_, half, dir_);
      return;
    }
    with_cache_rows(cache_, [&](const auto* cache) { gather(cache, p, wide_c_, wide_s_); });
    turn_.set(wide_c_, wide_s_, half, dir_);
  }
  const C* cos() const noexcept { return turn_.cos; }
  const C* sin() const noexcept { return turn_.sin; }

 private:
  /// Pair j's cos / sin from row p[stream(j)], as Out (float rows stay float, others widen).
  template <typename Src, typename Out>
  void gather(const Src* cache, const MRopeTokenPosition& p, Out* c, Out* s) const {
    const Eigen::Index half = rd_ / 2;
    for (Eigen::Index j = 0; j < half; ++j) {
      const Src* row = cache + p[stream_[j]] * rd_;
      c[j] = static_cast<Out>(to_double(row[j]));
      s[j] = static_cast<Out>(to_double(row[half + j]));
    }
  }

  CosSinCacheView cache_;
  Eigen::Index rd_;
  RopeDirection dir_;
  MRopeTokenPosition previous_{-1, -1, -1, -1};
  std::uint8_t stream_[kMaxRotaryDim / 2];
  alignas(64) float c_[kMaxRotaryDim / 2];
  alignas(64) float s_[kMaxRotaryDim / 2];
  alignas(64) double wide_c_[kMaxRotaryDim / 2];
  alignas(64) double wide_s_[kMaxRotaryDim / 2];
  RopeCachedTurn<C> turn_;
};

/// [streams, batch, seq] positions of the tensors' tokens, each in [0, 2^53], and below
/// cache_rows when a cos/sin cache is read (0: none; std::out_of_range past its rows).
inline void validate_mrope_positions(std::string_view fn, MRopePositionsView positions,
                                     int streams, Eigen::Index batch, Eigen::Index seq,
                                     Eigen::Index cache_rows) {
  require(positions.dimension(0) == streams && positions.dimension(1) == batch &&
              positions.dimension(2) == seq,
          fn, "position_ids shape [", positions.dimension(0), ", ", positions.dimension(1), ", ",
          positions.dimension(2), "] must be [streams, batch, seq] = [", streams, ", ", batch,
          ", ", seq, "] (", streams, " streams: ",
          streams == 4 ? "mrope_section has four entries" : "t, h, w", ")");
  for (Eigen::Index k = 0; k < streams; ++k) {
    for (Eigen::Index b = 0; b < batch; ++b) {
      for (Eigen::Index s = 0; s < seq; ++s) {
        const std::int64_t p = positions(k, b, s);
        require(p >= 0 && p <= kMaxRopePosition, fn, "position_ids[", k, ", ", b, ", ", s,
                "] = ", p, " must be in [0, 2^53]");
        if (cache_rows > 0 && p >= cache_rows) {
          throw_out_of_range(fn, "position_ids[", k, ", ", b, ", ", s, "] = ", p,
                             " is outside the cos/sin cache of max_position = ", cache_rows,
                             " rows");
        }
      }
    }
  }
}

/// The M-RoPE calls after their source (plan or cache) is checked: validates what both share,
/// then walks the tokens with the angles make_angles() gives each worker.
template <typename T, typename MakeAngles>
void mrope_run(std::string_view fn, const RopeTarget<T>* targets, int num_targets,
               MRopePositionsView positions, RopeLayout layout, const MRopeSections& sections,
               Eigen::Index rd, Eigen::Index rotary_offset, Eigen::Index cache_rows,
               const RopeApplyOptions& options, const MakeAngles& make_angles) {
  static_assert(is_storage_type_v<std::remove_const_t<T>>,
                "posenc: storage type must be float, double, Eigen::half or Eigen::bfloat16");
  validate_layout(fn, layout);
  validate_direction(fn, options.direction);
  validate_device(fn, options);
  validate_mrope_sections(fn, sections, rd);
  double bytes = 0.0;
  const Eigen::Index units = validate_targets(fn, targets, num_targets, rd, rotary_offset, &bytes);
  const Eigen::Index batch = targets[0].dst.batch, seq = targets[0].dst.seq;
  validate_mrope_positions(fn, positions, sections.streams(), batch, seq, cache_rows);
  if (units == 0) return;
  const MRopeTokenPositions pos{positions.data(), batch, seq, sections.streams()};
  const auto run = [&](auto layout_constant) {
    constexpr RopeLayout L = decltype(layout_constant)::value;
    auto worker = [&](Eigen::Index u0, Eigen::Index u1) {
      auto angles = make_angles();
      rope_run_tokens<T, L>(targets, num_targets, pos, u0, u1, angles, rd, rotary_offset);
    };
    rope_parallel_for(options, units, bytes, worker);
  };
  with_rope_layout(layout, run);
}

template <typename T>
void mrope_apply(std::string_view fn, const RopeTarget<T>* targets, int num_targets,
                 MRopePositionsView positions, const RopeFrequencies& freqs, RopeLayout layout,
                 const MRopeSections& sections, const RopeApplyOptions& options) {
  const Eigen::Index rd = validate_freqs(fn, freqs);
  const CosSinMultipliers mult =
      rope_cos_sin_multipliers(freqs.attention_factor, options.direction);
  mrope_run<T>(fn, targets, num_targets, positions, layout, sections, rd, freqs.rotary_offset, 0,
               options, [&] {
                 return MRopeAngles<compute_t<T>>(freqs.inv_freq.data(), rd / 2, sections,
                                                  mult.cos_factor, mult.sin_factor);
               });
}

template <typename T>
void mrope_apply_cache(std::string_view fn, const RopeTarget<T>* targets, int num_targets,
                       MRopePositionsView positions, const CosSinCacheView& cache,
                       RopeLayout layout, const MRopeSections& sections,
                       Eigen::Index rotary_offset, const RopeApplyOptions& options) {
  const Eigen::Index rd = validate_cos_sin_cache(fn, cache);
  require(rotary_offset >= 0, fn, "rotary_offset = ", rotary_offset, " must be >= 0");
  mrope_run<T>(fn, targets, num_targets, positions, layout, sections, rd, rotary_offset,
               cache.rows(), options, [&] {
                 return MRopeAnglesFromCache<compute_t<T>>(cache, sections, options.direction);
               });
}

}  // namespace detail

/// \brief M-RoPE in place: pair j of token (b, s) rotates by positions[stream(j), b, s] *
/// inv_freq[j] (Qwen2-VL / Qwen3-VL; stream map in the file comment).
/// x: any RopeHeads view [batch, seq, heads, head_dim]; positions: [streams, batch, seq] ((t, h, w),
/// or XD-RoPE's (p, w, h, i) when mrope_section has four entries)
/// Throws std::invalid_argument for sections that do not sum to rotary_dim / 2, a positions
/// shape other than [streams, batch, seq], negative positions, and everything apply_rope_inplace
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

/// \brief M-RoPE in place with cos / sin read from a caller's cache (make_rope_cos_sin_cache:
/// row p = cat(cos, sin) of position p, attention factor folded in): pair j of a token takes
/// row positions[stream(j)], as vLLM's MRotaryEmbedding does; no trigonometry per token.
/// x: any RopeHeads view; positions: [streams, batch, seq]; cos_sin_cache: [max_position, rotary_dim]
/// Throws std::out_of_range for a position >= max_position, std::invalid_argument for the
/// rest apply_mrope_inplace checks (a position < 0 or > 2^53 included) — before the first
/// write.
template <typename T>
void apply_mrope_inplace_cached(RopeHeads<T> x, MRopePositionsView positions,
                                const CosSinCacheView& cos_sin_cache, RopeLayout layout,
                                const MRopeSections& sections, Eigen::Index rotary_offset = 0,
                                const RopeApplyOptions& options = {}) {
  const detail::RopeTarget<T> target{detail::as_const(x), x};
  detail::mrope_apply_cache<T>("apply_mrope_inplace_cached", &target, 1, positions,
                               cos_sin_cache, layout, sections, rotary_offset, options);
}

/// \brief Q and K in one pass from a cos / sin cache (GQA head counts may differ).
template <typename T>
void apply_mrope_qk_inplace_cached(RopeHeads<T> q, RopeHeads<T> k, MRopePositionsView positions,
                                   const CosSinCacheView& cos_sin_cache, RopeLayout layout,
                                   const MRopeSections& sections, Eigen::Index rotary_offset = 0,
                                   const RopeApplyOptions& options = {}) {
  const detail::RopeTarget<T> targets[2] = {{detail::as_const(q), q}, {detail::as_const(k), k}};
  detail::mrope_apply_cache<T>("apply_mrope_qk_inplace_cached", targets, 2, positions,
                               cos_sin_cache, layout, sections, rotary_offset, options);
}

/// One piece of a multimodal prompt (mrope_position_ids): text tokens, or a vision block.
struct MRopeSegment {
  Eigen::Index text_tokens = 0;  ///< a text segment: this many tokens (grids 0)
  /// A vision segment (text_tokens 0): the LLM grid, HF image_grid_thw / video_grid_thw with h
  /// and w divided by spatial_merge_size.
  Eigen::Index grid_t = 0, grid_h = 0, grid_w = 0;
  /// Qwen2.5-VL video: temporal position of grid step t = trunc(t * seconds_per_grid_t *
  /// tokens_per_second) in float32 (second_per_grid_ts[i], vision_config.tokens_per_second).
  /// 1 and 1 give t itself (images, Qwen2-VL).
  float seconds_per_grid_t = 1.0f;
  float tokens_per_second = 1.0f;

  static MRopeSegment text(Eigen::Index n) {
    MRopeSegment s;
    s.text_tokens = n;
    return s;
  }
  static MRopeSegment image(Eigen::Index grid_h, Eigen::Index grid_w) {
    return video(1, grid_h, grid_w);
  }
  static MRopeSegment video(Eigen::Index grid_t, Eigen::Index grid_h, Eigen::Index grid_w,
                            float seconds_per_grid_t = 1.0f, float tokens_per_second = 1.0f) {
    MRopeSegment s;
    s.grid_t = grid_t;
    s.grid_h = grid_h;
    s.grid_w = grid_w;
    s.seconds_per_grid_t = seconds_per_grid_t;
    s.tokens_per_second = tokens_per_second;
    return s;
  }
  bool is_text() const noexcept { return grid_t == 0 && grid_h == 0 && grid_w == 0; }
};

namespace detail {

/// t * seconds_per_grid_t * tokens_per_second as HF's float32 tensors form it.
inline float mrope_temporal_product(Eigen::Index t, const MRopeSegment& seg) {
  const float scaled = static_cast<float>(t) * seg.seconds_per_grid_t;
  return scaled * seg.tokens_per_second;
}

/// Temporal offset of grid step t: the float32 product, truncated (mrope_position_ids checked
/// that the largest one is finite and <= 2^53).
inline std::int64_t mrope_temporal(Eigen::Index t, const MRopeSegment& seg) {
  return static_cast<std::int64_t>(mrope_temporal_product(t, seg));
}

}  // namespace detail

/// \brief The (t, h, w) positions of a multimodal prompt (see the file comment), written to
/// out[:, b, first .. first + n) (n = the segments' tokens; other columns, e.g. left padding,
/// are not touched). Returns mrope_position_delta: token i >= n (decode, appended text) has
/// position i + delta in every stream.
/// out: [3, batch, seq], as apply_mrope_inplace takes it.
/// Throws std::invalid_argument (a segment that is neither text nor a whole vision grid, a
/// negative or non-finite time scale, positions past 2^53, out's shape, b or first out of
/// range, n past the end of the row) before writing anything.
inline std::int64_t mrope_position_ids(const std::vector<MRopeSegment>& segments,
                                       TensorView<std::int64_t, 3> out, Eigen::Index b = 0,
                                       Eigen::Index first = 0) {
  constexpr std::string_view fn = "mrope_position_ids";
  // Positions only grow: the bound is checked on the running largest one, in double.
  double next = 0.0, tokens = 0.0;
  for (std::size_t i = 0; i < segments.size(); ++i) {
    const MRopeSegment& seg = segments[i];
    if (seg.is_text()) {
      detail::require(seg.text_tokens >= 0, fn, "segments[", i, "].text_tokens = ",
                      seg.text_tokens, " must be >= 0");
      next += static_cast<double>(seg.text_tokens);
      tokens += static_cast<double>(seg.text_tokens);
    } else {
      detail::require(seg.text_tokens == 0 && seg.grid_t > 0 && seg.grid_h > 0 && seg.grid_w > 0,
                      fn, "segments[", i, "]: a vision segment needs grid_t, grid_h, grid_w >= 1 ",
                      "and text_tokens = 0 (got ", seg.grid_t, " x ", seg.grid_h, " x ", seg.grid_w,
                      ", text_tokens ", seg.text_tokens, ")");
      detail::require(std::isfinite(seg.seconds_per_grid_t) && seg.seconds_per_grid_t >= 0.0f &&
                          std::isfinite(seg.tokens_per_second) && seg.tokens_per_second >= 0.0f,
                      fn, "segments[", i, "]: seconds_per_grid_t = ", seg.seconds_per_grid_t,
                      " and tokens_per_second = ", seg.tokens_per_second,
                      " must be finite and >= 0");
      // The value written, not the exact product: float32 can round past 2^53 or overflow
      // (FLT_MAX * 2 = inf, then inf * 0 = NaN). It grows with t, so the last step bounds it.
      const float t_product = detail::mrope_temporal_product(seg.grid_t - 1, seg);
      detail::require(std::isfinite(t_product), fn, "segments[", i, "]: (grid_t - 1) * ",
                      "seconds_per_grid_t * tokens_per_second = ", seg.grid_t - 1, " * ",
                      seg.seconds_per_grid_t, " * ", seg.tokens_per_second,
                      " is not finite in float32");
      const double t_last = std::trunc(static_cast<double>(t_product));
      next += std::max({t_last, static_cast<double>(seg.grid_h - 1),
                        static_cast<double>(seg.grid_w - 1)}) + 1.0;
      tokens += static_cast<double>(seg.grid_t) * static_cast<double>(seg.grid_h) *
                static_cast<double>(seg.grid_w);
    }
    detail::require(next <= static_cast<double>(kMaxRopePosition) &&
                        tokens <= static_cast<double>(kMaxRopePosition),
                    fn, "segments[0 .. ", i, "] reach position ", next, ", past 2^53");
  }
  const auto n = static_cast<Eigen::Index>(tokens);
  detail::require(out.dimension(0) == 3, fn, "out shape [", out.dimension(0), ", ",
                  out.dimension(1), ", ", out.dimension(2), "] must be [3, batch, seq]");
  detail::require(b >= 0 && b < out.dimension(1), fn, "b = ", b, " must be in [0, batch = ",
                  out.dimension(1), ")");
  detail::require(first >= 0 && n <= out.dimension(2) - first, fn, "first = ", first, " + ", n,
                  " tokens must fit in seq = ", out.dimension(2));

  std::int64_t pos = 0;  // the largest position so far + 1
  Eigen::Index col = first;
  for (const MRopeSegment& seg : segments) {
    if (seg.is_text()) {
      for (Eigen::Index i = 0; i < seg.text_tokens; ++i, ++col) {
        for (int st = 0; st < 3; ++st) out(st, b, col) = pos + i;
      }
      pos += seg.text_tokens;
      continue;
    }
    std::int64_t largest = std::max(seg.grid_h, seg.grid_w) - 1;
    for (Eigen::Index t = 0; t < seg.grid_t; ++t) {
      const std::int64_t tp = detail::mrope_temporal(t, seg);
      largest = std::max(largest, tp);
      for (Eigen::Index h = 0; h < seg.grid_h; ++h) {
        for (Eigen::Index w = 0; w < seg.grid_w; ++w, ++col) {
          out(0, b, col) = pos + tp;
          out(1, b, col) = pos + h;
          out(2, b, col) = pos + w;
        }
      }
    }
    pos += largest + 1;
  }
  return pos - static_cast<std::int64_t>(n);
}

/// One image of an XD-RoPE prompt (HunYuan-VL): its grid tokens, row after row.
struct XdRopeImage {
  /// Token index of its first grid token. HunYuan-VL prompts put two tokens before the grid,
  /// image_start and one image token, which keep their token index: first = image_start + 2
  /// (Tencent's and vLLM's get_xdrope_input_positions).
  Eigen::Index first = 0;
  Eigen::Index rows = 0;     ///< LLM grid rows: grid_h / spatial_merge_size
  /// Tokens per row, a row-end token included where the model has one: HunyuanOCR's merger
  /// appends a newline token to each row, so grid_w / spatial_merge_size + 1.
  Eigen::Index columns = 0;
};

/// \brief XD-RoPE positions of a prompt of n tokens (Tencent's get_xdrope_input_positions,
/// transformers' HunYuanVL get_rope_index): every stream starts at the token index 0 .. n - 1;
/// the grid tokens of image k (0-based in this sequence) then take (column, row, k) in the last
/// three streams, so with four streams the first (p) keeps the token index. Written to
/// out[:, b, first .. first + n); other columns (left padding) are not touched. Returns the
/// delta of later tokens (decode: token i >= n at i + delta in every stream): 0 with four
/// streams, as vLLM's get_next_input_positions continues.
/// images: ascending, disjoint, inside [0, n). out: [3 or 4, batch, seq].
/// transformers numbers images across the whole batch; Tencent's code and posenc per sequence.
/// Throws std::invalid_argument (an empty grid, images out of order, overlapping or past n,
/// out's shape, b, first or n out of range) before writing anything.
inline std::int64_t xdrope_position_ids(const std::vector<XdRopeImage>& images, Eigen::Index n,
                                        TensorView<std::int64_t, 3> out, Eigen::Index b = 0,
                                        Eigen::Index first = 0) {
  constexpr std::string_view fn = "xdrope_position_ids";
  const Eigen::Index streams = out.dimension(0);
  detail::require(streams == 3 || streams == 4, fn, "out shape [", streams, ", ",
                  out.dimension(1), ", ", out.dimension(2),
                  "] must be [3 or 4, batch, seq] (w, h, image index, after p with four)");
  detail::require(b >= 0 && b < out.dimension(1), fn, "b = ", b, " must be in [0, batch = ",
                  out.dimension(1), ")");
  detail::require(n >= 0 && first >= 0 && n <= out.dimension(2) - first, fn, "first = ", first,
                  " + n = ", n, " tokens must fit in seq = ", out.dimension(2));
  Eigen::Index next_free = 0;
  for (std::size_t k = 0; k < images.size(); ++k) {
    const XdRopeImage& im = images[k];
    detail::require(im.rows >= 1 && im.columns >= 1, fn, "images[", k, "]: rows = ", im.rows,
                    " and columns = ", im.columns, " must be >= 1");
    detail::require(im.first >= next_free, fn, "images[", k, "].first = ", im.first,
                    " must be >= ", next_free, " (images ascending and disjoint)");
    detail::require(im.rows <= (n - im.first) / im.columns, fn, "images[", k, "]: ", im.rows,
                    " x ", im.columns, " tokens from ", im.first, " must end by n = ", n);
    next_free = im.first + im.rows * im.columns;
  }

  for (Eigen::Index st = 0; st < streams; ++st) {
    for (Eigen::Index i = 0; i < n; ++i) out(st, b, first + i) = i;
  }
  const Eigen::Index w_stream = streams - 3;
  for (std::size_t k = 0; k < images.size(); ++k) {
    const XdRopeImage& im = images[k];
    for (Eigen::Index r = 0; r < im.rows; ++r) {
      for (Eigen::Index c = 0; c < im.columns; ++c) {
        const Eigen::Index col = first + im.first + r * im.columns + c;
        out(w_stream, b, col) = c;
        out(w_stream + 1, b, col) = r;
        out(w_stream + 2, b, col) = static_cast<std::int64_t>(k);
      }
    }
  }
  std::int64_t largest = -1;
  for (Eigen::Index st = 0; st < streams; ++st) {
    for (Eigen::Index i = 0; i < n; ++i) largest = std::max(largest, out(st, b, first + i));
  }
  return largest + 1 - static_cast<std::int64_t>(n);
}

}  // namespace posenc
