#pragma once
/// \file posenc/diagnostics.hpp
/// Checks the seed articles tell engineers to run before trusting positions or a longer
/// context (seed 000 §7, §13.4; seed 001 "排查"):
///
///  - analyze_rope_length: per frequency pair, what a RoPE plan does at a target length --
///    wavelength before/after scaling, periods the pre-training length covers, whether the pair
///    is kept / interpolated / blended and whether its angles at the target were ever seen in
///    training; the three lengths (accepted by the config, computable, covered by training);
///    plain warnings. rope-inspect prints this.
///  - position_ids_from_mask: HF's cumsum(mask) - 1 for left padding.
///  - validate_position_ids: non-monotonic positions, positions beyond a length, batch rows
///    that share positions although their masks differ.
///  - check_prefill_vs_decode: full forward vs token-by-token KV-cache decode, max |diff| per
///    step ("先固定一个很短的确定性输入，比对完整前向与逐 token KV-Cache 解码").

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "posenc/attention.hpp"
#include "posenc/attention_types.hpp"
#include "posenc/detail/numeric.hpp"
#include "posenc/error.hpp"
#include "posenc/kv_cache.hpp"
#include "posenc/rope.hpp"
#include "posenc/rope_frequencies.hpp"
#include "posenc/rope_params.hpp"
#include "posenc/tensor.hpp"

namespace posenc {

// ------------------------------------------------------------------------------------------
// Long-context report
// ------------------------------------------------------------------------------------------

/// What the scaling recipe does to one pair: r = inv_before / inv_after.
enum class RopePairScaling : std::uint8_t {
  kKept = 0,          ///< r = 1: the pre-training frequency (YaRN / Llama-3 high band)
  kInterpolated = 1,  ///< r >= factor: slowed by the full factor (positions squeezed)
  kBlended = 2,       ///< 1 < r < factor, or any other r: YaRN ramp, Llama-3 smoothing, NTK, LongRoPE
};

constexpr std::string_view to_string(RopePairScaling s) noexcept {
  switch (s) {
    case RopePairScaling::kKept: return "kept";
    case RopePairScaling::kInterpolated: return "interpolated";
    case RopePairScaling::kBlended: return "blended";
  }
  return "unknown";
}

/// Where a pair's largest angle at the target length falls relative to pre-training.
enum class RopePairRange : std::uint8_t {
  kWithinTraining = 0,  ///< n w_after <= L0 w_before (n positions judged): angles seen
  kExtrapolatedSeenPhases = 1,  ///< larger angles, but L0 covered >= 1 full period: phases seen
  kExtrapolatedUnseen = 2,      ///< larger angles and < 1 period in training: never seen
  kNotJudged = 3,               ///< no training length L0 to judge against
};

constexpr std::string_view to_string(RopePairRange r) noexcept {
  switch (r) {
    case RopePairRange::kWithinTraining: return "within training";
    case RopePairRange::kExtrapolatedSeenPhases: return "extrapolated (phases seen)";
    case RopePairRange::kExtrapolatedUnseen: return "extrapolated (UNSEEN angles)";
    case RopePairRange::kNotJudged: return "not judged (no L0)";
  }
  return "unknown";
}

/// One frequency pair j of a RoPE plan at a target length.
struct RopePairReport {
  Eigen::Index pair = 0;
  double inv_freq_before = 0.0;    ///< theta^(-2j/d): the unscaled frequency
  double inv_freq_after = 0.0;     ///< the planned frequency at the target length
  double wavelength_before = 0.0;  ///< 2 pi / inv_freq_before, in tokens
  double wavelength_after = 0.0;   ///< 2 pi / inv_freq_after
  double periods_in_training = 0.0;  ///< L0 / wavelength_before
  double ratio = 1.0;                ///< inv_freq_before / inv_freq_after
  RopePairScaling scaling = RopePairScaling::kKept;
  RopePairRange range = RopePairRange::kWithinTraining;
};

/// The three lengths of seed 000 §7 plus what the pairs do at `target_length`.
struct RopeLengthReport {
  std::int64_t target_length = 0;
  /// Accepted by the config (max_position_embeddings; 0 = not given).
  std::int64_t accepted_length = 0;
  /// Computable: posenc forms angles exactly for positions up to 2^53 (kMaxRopePosition).
  std::int64_t computable_length = 0;
  /// Pre-training length L0 (rope_scaling's original, else max_position_embeddings).
  std::int64_t trained_length = 0;
  /// Covered by training after scaling: L0 x factor (factor 1 without scaling).
  double covered_length = 0.0;
  /// Factor the recipe applies (LongRoPE: max_position_embeddings / L0 when given).
  double factor = 1.0;
  RopeFrequencies plan;  ///< the plan at the target length (dynamic / longrope depend on it)
  std::vector<RopePairReport> pairs;
  Eigen::Index unseen_pairs = 0;  ///< pairs with RopePairRange::kExtrapolatedUnseen
  std::vector<std::string> warnings;
};

/// \brief Analyses params at target_length (a sequence length, >= 1).
/// RoPE scores depend on q-k distances only, so a pair's angles over the n = target positions
/// (distances 0 .. n - 1) are judged against the L0 positions of pre-training: within training
/// while n w_after <= L0 w_before. That is the convention of covered_length = L0 x factor: an
/// interpolated pair (w_after = w_before / factor) is within training exactly up to the covered
/// length, although its largest angle (n - 1) w_after then passes (L0 - 1) w_before by less than
/// one trained step. A sliding-window layer (window > 0: distances < window) judges n = window,
/// and so does a chunked-attention layer (Llama-4) with window = attention_chunk_size.
/// Throws std::invalid_argument for invalid params, target_length < 1 or window < 0.
inline RopeLengthReport analyze_rope_length(const RopeParams& params, std::int64_t target_length,
                                            std::int64_t window = 0) {
  constexpr std::string_view fn = "analyze_rope_length";
  detail::require(target_length >= 1, fn, "target_length = ", target_length, " must be >= 1");
  detail::require(window >= 0, fn, "window = ", window, " must be >= 0 (0 = no window)");
  const std::int64_t max_distance =
      window > 0 ? std::min(target_length, window) - 1 : target_length - 1;
  RopeLengthReport rep;
  rep.target_length = target_length;
  rep.accepted_length = params.max_position_embeddings;
  rep.computable_length = kMaxRopePosition;
  rep.plan = compute_rope_frequencies(params, std::min(target_length, kMaxRopePosition));
  const RopeScaling& sc = params.scaling;
  const auto type = sc.type;
  rep.trained_length = sc.original_max_position_embeddings > 0
                           ? sc.original_max_position_embeddings
                           : params.max_position_embeddings;
  rep.factor = type == RopeScalingType::kDefault ? 1.0 : sc.factor;
  if (type == RopeScalingType::kLongRope && params.max_position_embeddings > 0) {
    rep.factor = static_cast<double>(params.max_position_embeddings) /
                 static_cast<double>(rep.trained_length);
  }
  // ggml's per-pair factors (a GGUF's rope_freqs) stretch the slowest pairs by their largest.
  if (!sc.freq_factors.empty()) {
    rep.factor *= *std::max_element(sc.freq_factors.begin(), sc.freq_factors.end());
  }
  rep.covered_length = static_cast<double>(rep.trained_length) * rep.factor;

  RopeParams unscaled = params;
  unscaled.scaling = RopeScaling{};
  if (type == RopeScalingType::kProportional) {
    unscaled.scaling.type = type;  // same width and turning pairs, factor 1
  }
  const RopeFrequencies before = compute_rope_frequencies(unscaled, 0);
  const double l0 = static_cast<double>(rep.trained_length);
  const double two_pi = 2.0 * detail::kRopePi;
  for (std::size_t j = 0; j < before.inv_freq.size(); ++j) {
    RopePairReport p;
    p.pair = static_cast<Eigen::Index>(j);
    p.inv_freq_before = before.inv_freq[j];
    p.inv_freq_after = rep.plan.inv_freq[j];
    p.wavelength_before = two_pi / p.inv_freq_before;
    p.wavelength_after = two_pi / p.inv_freq_after;
    p.periods_in_training = l0 > 0.0 ? l0 / p.wavelength_before : 0.0;
    // A proportional plan's pairs past floor(f d / 2) never turn: kept, inside training.
    p.ratio = p.inv_freq_before == 0.0 ? 1.0 : p.inv_freq_before / p.inv_freq_after;
    if (std::abs(p.ratio - 1.0) <= 1e-9) {
      p.scaling = RopePairScaling::kKept;
    } else if (rep.factor > 1.0 && p.ratio >= rep.factor * (1.0 - 1e-9)) {
      p.scaling = RopePairScaling::kInterpolated;
    } else {
      p.scaling = RopePairScaling::kBlended;
    }
    if (l0 <= 0.0) {
      p.range = RopePairRange::kNotJudged;
    } else {
      const double seen = l0 * p.inv_freq_before;
      const double reached = (static_cast<double>(max_distance) + 1.0) * p.inv_freq_after;
      if (reached <= seen * (1.0 + 1e-12)) {
        p.range = RopePairRange::kWithinTraining;
      } else if (l0 * p.inv_freq_before >= two_pi) {
        p.range = RopePairRange::kExtrapolatedSeenPhases;
      } else {
        p.range = RopePairRange::kExtrapolatedUnseen;
        ++rep.unseen_pairs;
      }
    }
    rep.pairs.push_back(p);
  }

  const auto warn = [&](const auto&... parts) { rep.warnings.push_back(detail::concat(parts...)); };
  if (rep.accepted_length > 0 && target_length > rep.accepted_length) {
    warn("target length ", target_length, " exceeds max_position_embeddings = ",
         rep.accepted_length, ": the config does not accept it (HF still computes the angles)");
  }
  if (window > 0 && window < target_length) {
    warn("sliding window ", window, " (or attention chunk): q-k distances stay below ", window,
         ", so this layer's angles are judged at distance ", max_distance, ", not ",
         target_length - 1);
  }
  // A proportional plan with factor 1 scales nothing: it is judged as unscaled RoPE.
  const bool unscaled_plan = sc.freq_factors.empty() &&
                             (type == RopeScalingType::kDefault ||
                              (type == RopeScalingType::kProportional && sc.factor == 1.0));
  if (!unscaled_plan && sc.original_max_position_embeddings <= 0 &&
      params.max_position_embeddings > 0) {
    warn("the config gives no original_max_position_embeddings: L0 is taken as "
         "max_position_embeddings = ", params.max_position_embeddings,
         "; if that is already the extended length, pre-training was about ",
         static_cast<double>(params.max_position_embeddings) / rep.factor, " (max / factor)");
  }
  if (rep.trained_length > 0 && static_cast<double>(max_distance + 1) > rep.covered_length) {
    warn("target length ", target_length, " exceeds the length covered by training, L0 x factor = ",
         rep.trained_length, " x ", rep.factor, " = ", rep.covered_length,
         ": the scaled frequencies reach angles pre-training never produced");
  }
  if (target_length > rep.computable_length) {
    warn("target length ", target_length, " exceeds 2^53: positions are no longer exact doubles");
  }
  if (rep.trained_length <= 0) {
    warn("no training length in the config (max_position_embeddings = ",
         params.max_position_embeddings, ", original_max_position_embeddings = ",
         sc.original_max_position_embeddings, "; 0 = absent): ranges cannot be judged");
  }
  if (rep.unseen_pairs > 0) {
    warn(rep.unseen_pairs, " of ", rep.pairs.size(),
         " frequency pairs reach angles at the target length that the pre-training length L0 = ",
         rep.trained_length, " never covered (less than one full period in training)");
  }
  if (type == RopeScalingType::kDynamic) {
    warn("dynamic NTK recomputes the base from the current length once it exceeds L0 = ",
         rep.trained_length, ": keys already in a KV cache stay rotated with the stale base "
         "(transformers #25104) unless they are re-rotated or re-prefilled");
  }
  if (type == RopeScalingType::kLongRope && rep.trained_length > 0 &&
      target_length > rep.trained_length) {
    warn("LongRoPE switches from short_factor to long_factor when the sequence passes L0 = ",
         rep.trained_length, ": keys cached before the switch were rotated with the short table "
         "(HF Phi-3 drops the cache and re-prefills at the switch)");
  }
  if (type == RopeScalingType::kLlama3 && sc.low_freq_factor == sc.high_freq_factor) {
    warn("low_freq_factor == high_freq_factor = ", sc.low_freq_factor,
         ": the Llama-3 smoothing band is empty (a hard cut; HF would divide 0 by 0 there)");
  }
  if (unscaled_plan && rep.trained_length > 0 && max_distance + 1 > rep.trained_length) {
    warn("no rope_scaling (or a factor of 1): every pair is used unscaled beyond the training "
         "length ",
         rep.trained_length);
  }
  return rep;
}

// ------------------------------------------------------------------------------------------
// Positions
// ------------------------------------------------------------------------------------------

/// \brief position_ids from an attention mask, as HF generate() builds them for left padding:
/// out[b, s] = (number of mask-1 tokens in row b up to and including s) - 1 for real tokens,
/// and pad_value for padding slots (mask 0). HF fills padding with 1 (masked_fill_(mask == 0,
/// 1)); posenc's default 0 is the "clamped" variant -- either way the slot is masked out.
/// mask: [batch, seq] (0 = padding, anything else = token); out: [batch, seq].
/// Throws std::invalid_argument for a shape mismatch or pad_value < 0.
inline void position_ids_from_mask(ConstTensorView<std::uint8_t, 2> mask,
                                   TensorView<std::int64_t, 2> out, std::int64_t pad_value = 0) {
  constexpr std::string_view fn = "position_ids_from_mask";
  detail::require(out.dimension(0) == mask.dimension(0) && out.dimension(1) == mask.dimension(1),
                  fn, "out shape [", out.dimension(0), ", ", out.dimension(1),
                  "] must equal mask shape [", mask.dimension(0), ", ", mask.dimension(1), "]");
  detail::require(pad_value >= 0, fn, "pad_value = ", pad_value, " must be >= 0");
  for (Eigen::Index b = 0; b < mask.dimension(0); ++b) {
    std::int64_t count = 0;
    for (Eigen::Index s = 0; s < mask.dimension(1); ++s) {
      if (mask(b, s) != 0) {
        out(b, s) = count++;
      } else {
        out(b, s) = pad_value;
      }
    }
  }
}

/// \brief Owning convenience overload. mask: [batch, seq]; returns [batch, seq].
inline Tensor<std::int64_t, 2> position_ids_from_mask(ConstTensorView<std::uint8_t, 2> mask,
                                                      std::int64_t pad_value = 0) {
  Tensor<std::int64_t, 2> out(mask.dimension(0), mask.dimension(1));
  position_ids_from_mask(mask, TensorView<std::int64_t, 2>(out.data(), out.dimension(0),
                                                            out.dimension(1)),
                         pad_value);
  return out;
}

/// What validate_position_ids found.
enum class PositionIssueKind : std::uint8_t {
  kNegative = 0,      ///< a real token with position < 0
  kNonMonotonic = 1,  ///< a real token whose position is <= the previous real token's
  kBeyondLength = 2,  ///< position >= max_length
  kSharedRow = 3,     ///< two rows with identical positions but different padding masks
};

constexpr std::string_view to_string(PositionIssueKind k) noexcept {
  switch (k) {
    case PositionIssueKind::kNegative: return "negative";
    case PositionIssueKind::kNonMonotonic: return "non-monotonic";
    case PositionIssueKind::kBeyondLength: return "beyond length";
    case PositionIssueKind::kSharedRow: return "shared row";
  }
  return "unknown";
}

struct PositionIssue {
  PositionIssueKind kind = PositionIssueKind::kNegative;
  Eigen::Index batch = 0;  ///< row
  Eigen::Index index = 0;  ///< column (kSharedRow: the other row)
  std::int64_t value = 0;  ///< the offending position (kSharedRow: 0)
  std::string message;
};

struct PositionCheckOptions {
  /// Positions must be < max_length (the plan's / config's length); 0 = not checked.
  std::int64_t max_length = 0;
  /// [batch, seq] 0 = padding: padding slots are skipped, and rows are compared by mask.
  OptionalView<ConstTensorView<std::uint8_t, 2>> attention_mask;
  /// Packed sequences restart at 0: a drop to exactly 0 is then not an issue.
  bool allow_restart_at_zero = false;
  /// Stop collecting after this many issues (the report says how many were left out).
  std::size_t max_issues = 64;
};

struct PositionReport {
  std::vector<PositionIssue> issues;
  std::size_t left_out = 0;
  bool ok() const noexcept { return issues.empty(); }
};

/// \brief Reports position mistakes of seed 000 §13.4: positions that do not grow along a row,
/// positions at or beyond max_length, and batch rows that share one position row although
/// their masks say the sequences are padded differently (a [1, seq] arange broadcast to a
/// left-padded batch).
/// position_ids: [batch, seq]; attention_mask (optional): [batch, seq].
/// Throws std::invalid_argument for a mask of the wrong shape or max_length < 0.
inline PositionReport validate_position_ids(PositionIdsView position_ids,
                                            const PositionCheckOptions& options = {}) {
  constexpr std::string_view fn = "validate_position_ids";
  const Eigen::Index batch = position_ids.dimension(0), seq = position_ids.dimension(1);
  detail::require(options.max_length >= 0, fn, "max_length = ", options.max_length,
                  " must be >= 0");
  if (options.attention_mask) {
    detail::require(options.attention_mask->dimension(0) == batch &&
                        options.attention_mask->dimension(1) == seq,
                    fn, "attention_mask shape [", options.attention_mask->dimension(0), ", ",
                    options.attention_mask->dimension(1), "] must equal position_ids shape [",
                    batch, ", ", seq, "]");
  }
  PositionReport rep;
  const auto add = [&](PositionIssueKind kind, Eigen::Index b, Eigen::Index i, std::int64_t v,
                       std::string msg) {
    if (rep.issues.size() >= options.max_issues) {
      ++rep.left_out;
      return;
    }
    rep.issues.push_back({kind, b, i, v, std::move(msg)});
  };
  const auto real = [&](Eigen::Index b, Eigen::Index s) {
    return !options.attention_mask || (*options.attention_mask)(b, s) != 0;
  };
  for (Eigen::Index b = 0; b < batch; ++b) {
    bool have_prev = false;
    std::int64_t prev = 0;
    for (Eigen::Index s = 0; s < seq; ++s) {
      if (!real(b, s)) continue;
      const std::int64_t p = position_ids(b, s);
      if (p < 0) {
        add(PositionIssueKind::kNegative, b, s, p,
            detail::concat("row ", b, " column ", s, ": position ", p, " is negative"));
      }
      if (options.max_length > 0 && p >= options.max_length) {
        add(PositionIssueKind::kBeyondLength, b, s, p,
            detail::concat("row ", b, " column ", s, ": position ", p, " >= max_length ",
                           options.max_length));
      }
      if (have_prev && p <= prev && !(options.allow_restart_at_zero && p == 0)) {
        add(PositionIssueKind::kNonMonotonic, b, s, p,
            detail::concat("row ", b, " column ", s, ": position ", p,
                           " does not grow (previous real token has ", prev, ")"));
      }
      have_prev = true;
      prev = p;
    }
  }
  if (options.attention_mask && batch > 1) {
    const auto& m = *options.attention_mask;
    for (Eigen::Index a = 0; a < batch; ++a) {
      for (Eigen::Index b = a + 1; b < batch; ++b) {
        bool same_pos = true, same_mask = true;
        for (Eigen::Index s = 0; s < seq && (same_pos || same_mask); ++s) {
          same_pos = same_pos && position_ids(a, s) == position_ids(b, s);
          same_mask = same_mask && ((m(a, s) != 0) == (m(b, s) != 0));
        }
        if (same_pos && !same_mask) {
          add(PositionIssueKind::kSharedRow, a, b, 0,
              detail::concat("rows ", a, " and ", b, " have identical positions but different "
                             "padding: positions were shared across the batch (build them per "
                             "row, e.g. position_ids_from_mask)"));
        }
      }
    }
  }
  return rep;
}

// ------------------------------------------------------------------------------------------
// Prefill vs decode
// ------------------------------------------------------------------------------------------

struct PrefillDecodeReport {
  std::vector<double> max_abs_diff;  ///< [seq]: max |full - decode| over batch, heads, dims
  double worst = 0.0;
  Eigen::Index worst_step = 0;
};

/// \brief Runs attention twice -- the whole sequence at once (prefill) and one token at a time
/// through a KvCache (decode) -- and reports the max |difference| of the outputs per step.
/// Both paths rotate Q and K with `rope` (if given) at `positions`, and apply params (ALiBi,
/// scale); the full pass is causal with the same positions, so a correct engine gives
/// differences at rounding level for every step.
/// q: [batch, seq, heads, head_dim]; k: [batch, seq, kv_heads, head_dim]; v: [batch, seq,
/// kv_heads, v_head_dim] (MLA: narrower than head_dim);
/// positions (optional, default 0..seq-1 per row): [batch, seq];
/// valid (optional, 0 = padding token): [batch, seq].
/// Throws std::invalid_argument for shape errors or a non-causal params.mask.
template <typename T>
PrefillDecodeReport check_prefill_vs_decode(
    ConstTensorView<T, 4> q, ConstTensorView<T, 4> k, ConstTensorView<T, 4> v,
    const AttentionParams& params, const std::optional<RopeFrequencies>& rope,
    RopeLayout layout = RopeLayout::kHalfSplit,
    std::optional<PositionIdsView> positions = std::nullopt,
    std::optional<ConstTensorView<std::uint8_t, 2>> valid = std::nullopt) {
  constexpr std::string_view fn = "check_prefill_vs_decode";
  const Eigen::Index batch = q.dimension(0), seq = q.dimension(1), heads = q.dimension(2),
                     d = q.dimension(3), kv_heads = k.dimension(2), dv = v.dimension(3);
  detail::require(params.mask == MaskMode::kCausal, fn,
                  "params.mask must be causal: decode only ever sees the past");
  detail::require(k.dimension(1) == seq, fn, "k seq = ", k.dimension(1), " must equal q seq = ",
                  seq, " (prefill of the same tokens)");
  // The out shape alone (no memory): allocating it from unvalidated extents was a huge
  // allocation, or an overflowing one, where a shape error was due.
  const TensorView<T, 4> out_shape(static_cast<T*>(nullptr), batch, seq, heads, dv);
  detail::validate_attention(fn, q, k, v, out_shape, params, {});
  std::vector<std::int64_t> pos_store;
  if (!positions) {
    pos_store.resize(static_cast<std::size_t>(batch * seq));
    for (Eigen::Index b = 0; b < batch; ++b) {
      for (Eigen::Index s = 0; s < seq; ++s) pos_store[static_cast<std::size_t>(b * seq + s)] = s;
    }
    positions = PositionIdsView(pos_store.data(), batch, seq);
  }
  detail::validate_positions(fn, "positions", *positions, batch, seq);
  if (valid) {
    detail::require(valid->dimension(0) == batch && valid->dimension(1) == seq, fn,
                    "valid shape [", valid->dimension(0), ", ", valid->dimension(1),
                    "] must be [batch, seq] = [", batch, ", ", seq, "]");
  }

  // Prefill: rotate all of Q and K, one causal call over the whole sequence.
  Tensor<T, 4> qr(batch, seq, heads, d), kr(batch, seq, kv_heads, d), full(batch, seq, heads, dv);
  std::copy(q.data(), q.data() + q.size(), qr.data());
  std::copy(k.data(), k.data() + k.size(), kr.data());
  if (rope) {
    apply_rope_inplace<T>(TensorView<T, 4>(qr.data(), batch, seq, heads, d), *positions, *rope,
                          layout);
    apply_rope_inplace<T>(TensorView<T, 4>(kr.data(), batch, seq, kv_heads, d), *positions, *rope,
                          layout);
  }
  AttentionMetadata meta;
  meta.query_positions = *positions;
  meta.key_positions = *positions;
  if (valid) meta.key_mask = *valid;
  attention<T>(ConstTensorView<T, 4>(qr.data(), batch, seq, heads, d),
               ConstTensorView<T, 4>(kr.data(), batch, seq, kv_heads, d), v,
               TensorView<T, 4>(full.data(), batch, seq, heads, dv), params, meta);

  // Decode: append one token's K/V (rotated by the cache), attend with its query.
  KvCache<T> cache(batch, seq, kv_heads, d, 0, dv);
  if (rope) cache.set_rope(*rope, layout);
  Tensor<T, 4> qt(batch, 1, heads, d), kt(batch, 1, kv_heads, d), vt(batch, 1, kv_heads, dv),
      ot(batch, 1, heads, dv);
  std::vector<std::int64_t> pt(static_cast<std::size_t>(batch));
  std::vector<std::uint8_t> vt_mask(static_cast<std::size_t>(batch));
  PrefillDecodeReport rep;
  rep.max_abs_diff.assign(static_cast<std::size_t>(seq), 0.0);
  for (Eigen::Index s = 0; s < seq; ++s) {
    for (Eigen::Index b = 0; b < batch; ++b) {
      for (Eigen::Index h = 0; h < heads; ++h) {
        for (Eigen::Index i = 0; i < d; ++i) qt(b, 0, h, i) = q(b, s, h, i);
      }
      for (Eigen::Index h = 0; h < kv_heads; ++h) {
        for (Eigen::Index i = 0; i < d; ++i) kt(b, 0, h, i) = k(b, s, h, i);
        for (Eigen::Index i = 0; i < dv; ++i) vt(b, 0, h, i) = v(b, s, h, i);
      }
      pt[static_cast<std::size_t>(b)] = (*positions)(b, s);
      vt_mask[static_cast<std::size_t>(b)] = valid ? (*valid)(b, s) : std::uint8_t{1};
    }
    cache.template append<T>(ConstTensorView<T, 4>(kt.data(), batch, 1, kv_heads, d),
                             ConstTensorView<T, 4>(vt.data(), batch, 1, kv_heads, dv),
                             PositionIdsView(pt.data(), batch, 1),
                             ConstTensorView<std::uint8_t, 2>(vt_mask.data(), batch, 1));
    cache.template attend<T>(ConstTensorView<T, 4>(qt.data(), batch, 1, heads, d),
                             TensorView<T, 4>(ot.data(), batch, 1, heads, dv), params);
    double worst = 0.0;
    for (Eigen::Index b = 0; b < batch; ++b) {
      for (Eigen::Index h = 0; h < heads; ++h) {
        for (Eigen::Index i = 0; i < dv; ++i) {
          const double diff =
              std::abs(detail::to_double(full(b, s, h, i)) - detail::to_double(ot(b, 0, h, i)));
          // NaN on either side is the worst possible mismatch, not a silent skip.
          worst = std::isnan(diff) ? std::numeric_limits<double>::infinity()
                                   : std::max(worst, diff);
        }
      }
    }
    rep.max_abs_diff[static_cast<std::size_t>(s)] = worst;
    if (worst > rep.worst) {
      rep.worst = worst;
      rep.worst_step = s;
    }
  }
  return rep;
}

}  // namespace posenc
