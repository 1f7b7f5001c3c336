#pragma once
/// \file posenc/rope_frequencies.hpp
/// RoPE frequency planning: RopeParams (+ the current sequence length where a recipe needs it)
/// -> inv_freq[rotary_dim / 2], the cos/sin multiplier `attention_factor` and DeepSeek's
/// softmax-scale multiplier. Semantics are Hugging Face transformers' `modeling_rope_utils.py`
/// (`_compute_*_parameters`, `dynamic_rope_update`), re-derived in double:
///
///   d = rotary_dim, j in [0, d/2), b = theta, s = factor, L0 = original context,
///   th_j = b^(-2j/d)                                               (RoFormer, Su et al. §3.4)
///   default   inv_j = th_j
///   linear    inv_j = th_j / s                                     (Chen et al. 2023, PI)
///   ntk       inv_j = (b s^(d/(d-2)))^(-2j/d)                      (static NTK-aware, bloc97)
///   dynamic   inv_j = (b (s L/L0 - (s-1))^(d/(d-2)))^(-2j/d),  L = max(seq_len, L0)
///   yarn      corr(r) = d ln(L0 / (2 pi r)) / (2 ln b);  lo = corr(beta_fast), hi = corr(beta_slow)
///             (floor/ceil when truncate), lo = max(lo, 0), hi = min(hi, d - 1), hi += 0.001 if
///             lo == hi;  ramp_j = clamp((j - lo)/(hi - lo), 0, 1)
///             inv_j = (th_j / s) (1 - m_j) + th_j m_j,  m_j = (1 - ramp_j) e  (Peng et al. 2023,
///             §3.2; e = extrapolation_factor, 1 unless set: vLLM / ggml ext_factor)
///             attention_factor = given, else g(s, mscale)/g(s, mscale_all_dim) when both are
///             non-zero, else g(s, 1);  g(s, m) = 0.1 m ln s + 1 (1 when s <= 1; the slope
///             0.1 is RopeScaling::mscale_slope, 0.07 for TeleChat3's telechat3-yarn)
///             softmax_scale_multiplier = g(s, mscale_all_dim)^2 when mscale_all_dim != 0
///             (DeepSeek-V2/V3 attention), else 1
///   llama3    w_j = 2 pi / th_j;  w_j < L0/hf: th_j;  w_j > L0/lf: th_j / s;  otherwise
///             m = (L0/w_j - lf)/(hf - lf), inv_j = (1 - m) th_j / s + m th_j.
///             lf == hf leaves no smoothing band: the one boundary wavelength takes th_j / s
///             (m = 0, as vLLM defines it) instead of dividing 0 by 0.
///   longrope  inv_j = th_j / f_j with f = long_factor if seq_len > L0 else short_factor;
///             attention_factor = given, else short_mscale / long_mscale of the table in use
///             (Phi-3.5-MoE), else sqrt(1 + ln S / ln L0) for S > 1 (1 otherwise),
///             S = max_position_embeddings / L0 when max_position_embeddings is set, else factor.
///   proportional  d = head_dim (the whole head turns), n = floor(f d / 2) for
///             f = partial_rotary_factor;  inv_j = th_j / s for j < n, 0 for j >= n (the pair
///             passes through: cos 1, sin 0). HF `_compute_proportional_rope_parameters`, the
///             Gemma-4 full-attention layers.
///   vllm_ntk  inv_j = (b s)^(-2j/d) / s^(2/d);  with mixed_b = m: inv_j = th_j / exp(a (j+1)^m),
///             a = ln s / (d/2)^m (Su, kexue.fm/archives/9706). vLLM NTKScalingRotaryEmbedding,
///             what vLLM does with a config's rope_type "ntk" (transformers has no "ntk").
///   any type  inv_j /= freq_factors[j] after the recipe when RopeScaling::freq_factors is set
///             (ggml_rope_ext's per-pair factors, a GGUF's rope_freqs.weight).

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "posenc/error.hpp"
#include "posenc/rope_params.hpp"

namespace posenc {

/// The planned angles of one layer: rotate pair j of the slice [rotary_offset, rotary_offset +
/// rotary_dim) by position * inv_freq[j], and multiply cos and sin by attention_factor.
struct RopeFrequencies {
  std::vector<double> inv_freq;           ///< [rotary_dim / 2], radians per position
  double attention_factor = 1.0;          ///< multiplies cos and sin (q.k scales by its square)
  double softmax_scale_multiplier = 1.0;  ///< multiply the attention softmax scale by this
  Eigen::Index rotary_dim = 0;            ///< number of rotated dims (2 * inv_freq.size())
  Eigen::Index head_dim = 0;              ///< width of a head vector the plan was made for
  Eigen::Index rotary_offset = 0;         ///< first rotated dim
  RopeScalingType type = RopeScalingType::kDefault;
  std::int64_t planned_seq_len = 0;  ///< seq_len the plan was computed for (0 = init time)
  /// Base after NTK / dynamic adjustment (informational; vllm_ntk: b s, its frequencies then
  /// divided by s^(2/d) as well).
  double effective_theta = 0.0;
  bool uses_long_factor = false;     ///< longrope: long_factor selected
};

namespace detail {

inline constexpr double kRopePi = 3.141592653589793238462643383279502884;

/// g(s, m) = slope m ln s + 1, and 1 for s <= 1 (HF `get_mscale`, DeepSeek `yarn_get_mscale`:
/// slope 0.1; TeleChat3's telechat3-yarn: 0.07).
inline double yarn_mscale(double scale, double mscale, double slope = 0.1) {
  return scale <= 1.0 ? 1.0 : slope * mscale * std::log(scale) + 1.0;
}

inline bool finite_at_least(double v, double lo) { return std::isfinite(v) && v >= lo; }

/// L0 for the recipes that need one: rope_scaling's value, else max_position_embeddings.
inline std::int64_t rope_original_length(std::string_view function, const RopeParams& p) {
  const std::int64_t l0 = p.scaling.original_max_position_embeddings > 0
                              ? p.scaling.original_max_position_embeddings
                              : p.max_position_embeddings;
  require(l0 > 0, function, "original_max_position_embeddings = ",
          p.scaling.original_max_position_embeddings, " (max_position_embeddings = ",
          p.max_position_embeddings, ") must be > 0 for rope_type ", to_string(p.scaling.type));
  return l0;
}

/// longrope's S: max_position_embeddings / L0 when the config sets it, else factor.
inline double longrope_ratio(const RopeParams& p) {
  return p.max_position_embeddings > 0
             ? static_cast<double>(p.max_position_embeddings) /
                   static_cast<double>(p.scaling.original_max_position_embeddings)
             : p.scaling.factor;
}

/// proportional: the pairs that turn, floor(f d / 2) (HF: int(f * head_dim // 2)).
inline Eigen::Index rope_proportional_pairs(const RopeParams& p, Eigen::Index d) {
  return static_cast<Eigen::Index>(
      std::floor(p.partial_rotary_factor * static_cast<double>(d) / 2.0));
}

inline void fill_geometric(std::vector<double>& inv, double base, Eigen::Index d) {
  for (std::size_t j = 0; j < inv.size(); ++j) {
    inv[j] = std::pow(base, -2.0 * static_cast<double>(j) / static_cast<double>(d));
  }
}

/// ggml's per-pair frequency factors: one per rotated pair, finite and > 0.
inline void check_freq_factors(std::string_view fn, const std::vector<double>& factors,
                               Eigen::Index pairs) {
  require(static_cast<Eigen::Index>(factors.size()) == pairs, fn, "freq_factors has ",
          factors.size(), " entries; it must have one per rotated pair (rotary_dim / 2 = ", pairs,
          ")");
  for (std::size_t j = 0; j < factors.size(); ++j) {
    require(std::isfinite(factors[j]) && factors[j] > 0.0, fn, "freq_factors[", j, "] = ",
            factors[j], " must be finite and > 0");
  }
}

/// Checks every parameter the chosen recipe reads. Throws std::invalid_argument naming it.
inline Eigen::Index validate_rope_params(std::string_view fn, const RopeParams& p,
                                         std::int64_t seq_len) {
  const Eigen::Index d = resolve_rotary_dim(fn, p);
  require(std::isfinite(p.theta) && p.theta > 1.0, fn, "theta = ", p.theta,
          " must be finite and > 1");
  require(p.layout == RopeLayout::kInterleaved || p.layout == RopeLayout::kHalfSplit, fn,
          "layout = ", static_cast<int>(p.layout), " is not a RopeLayout");
  require(seq_len >= 0, fn, "seq_len = ", seq_len, " must be >= 0");
  require(p.max_position_embeddings >= 0, fn, "max_position_embeddings = ",
          p.max_position_embeddings, " must be >= 0");
  const RopeScaling& sc = p.scaling;
  switch (sc.type) {
    case RopeScalingType::kDefault: break;
    case RopeScalingType::kLinear:
      require(finite_at_least(sc.factor, 1.0), fn, "factor = ", sc.factor,
              " must be finite and >= 1");
      break;
    case RopeScalingType::kProportional:
      require(finite_at_least(sc.factor, 1.0), fn, "factor = ", sc.factor,
              " must be finite and >= 1");
      // HF returns all-zero frequencies there; a plan that rotates nothing is a config error.
      require(rope_proportional_pairs(p, d) >= 1, fn, "partial_rotary_factor = ",
              p.partial_rotary_factor, " turns no pair of rotary_dim = ", d,
              " (rope_type proportional turns floor(partial_rotary_factor * rotary_dim / 2) pairs)");
      break;
    case RopeScalingType::kVllmNtk:
      require(finite_at_least(sc.factor, 1.0), fn, "factor = ", sc.factor,
              " must be finite and >= 1");
      if (sc.mixed_b) {
        require(std::isfinite(*sc.mixed_b) && *sc.mixed_b > 0.0, fn, "mixed_b = ", *sc.mixed_b,
                " must be finite and > 0");
      }
      break;
    case RopeScalingType::kNtk:
    case RopeScalingType::kDynamic:
      require(finite_at_least(sc.factor, 1.0), fn, "factor = ", sc.factor,
              " must be finite and >= 1");
      require(d > 2, fn, "rotary_dim = ", d, " must be > 2 for rope_type ", to_string(sc.type),
              " (its exponent is d / (d - 2))");
      if (sc.type == RopeScalingType::kDynamic) rope_original_length(fn, p);
      break;
    case RopeScalingType::kYarn:
      require(finite_at_least(sc.factor, 1.0), fn, "factor = ", sc.factor,
              " must be finite and >= 1");
      rope_original_length(fn, p);
      require(std::isfinite(sc.beta_fast) && sc.beta_fast > 0.0, fn, "beta_fast = ", sc.beta_fast,
              " must be finite and > 0");
      require(std::isfinite(sc.beta_slow) && sc.beta_slow > 0.0, fn, "beta_slow = ", sc.beta_slow,
              " must be finite and > 0");
      // g(s, m) >= 1 for m >= 0; a negative m can make it 0 (an infinite attention factor)
      // or negative (a sign flip of cos and sin): no checkpoint uses one.
      require(finite_at_least(sc.mscale, 0.0), fn, "mscale = ", sc.mscale,
              " must be finite and >= 0");
      require(finite_at_least(sc.mscale_all_dim, 0.0), fn, "mscale_all_dim = ",
              sc.mscale_all_dim, " must be finite and >= 0");
      require(sc.extrapolation_factor >= 0.0 && sc.extrapolation_factor <= 1.0, fn,
              "extrapolation_factor = ", sc.extrapolation_factor, " must be in [0, 1]");
      require(std::isfinite(sc.mscale_slope) && sc.mscale_slope >= 0.0, fn, "mscale_slope = ",
              sc.mscale_slope, " must be finite and >= 0");
      break;
    case RopeScalingType::kLlama3:
      require(finite_at_least(sc.factor, 1.0), fn, "factor = ", sc.factor,
              " must be finite and >= 1");
      require(sc.original_max_position_embeddings > 0, fn,
              "original_max_position_embeddings = ", sc.original_max_position_embeddings,
              " must be > 0 for rope_type llama3 (a required key)");
      require(std::isfinite(sc.low_freq_factor) && sc.low_freq_factor > 0.0, fn,
              "low_freq_factor = ", sc.low_freq_factor, " must be finite and > 0");
      require(std::isfinite(sc.high_freq_factor) && sc.high_freq_factor >= sc.low_freq_factor,
              fn, "high_freq_factor = ", sc.high_freq_factor,
              " must be finite and >= low_freq_factor (", sc.low_freq_factor, ")");
      break;
    case RopeScalingType::kLongRope: {
      require(finite_at_least(sc.factor, 1.0), fn, "factor = ", sc.factor,
              " must be finite and >= 1");
      require(sc.original_max_position_embeddings > 0, fn,
              "original_max_position_embeddings = ", sc.original_max_position_embeddings,
              " must be > 0 for rope_type longrope");
      const auto half = static_cast<std::size_t>(d / 2);
      for (const auto* list : {&sc.short_factor, &sc.long_factor}) {
        const char* name = list == &sc.short_factor ? "short_factor" : "long_factor";
        require(list->size() == half, fn, name, " has ", list->size(),
                " entries, must have rotary_dim / 2 = ", half);
        for (std::size_t j = 0; j < half; ++j) {
          require(std::isfinite((*list)[j]) && (*list)[j] > 0.0, fn, name, "[", j,
                  "] = ", (*list)[j], " must be finite and > 0");
        }
      }
      for (const auto* m : {&sc.short_mscale, &sc.long_mscale}) {
        if (*m) {
          require(std::isfinite(**m) && **m > 0.0, fn,
                  m == &sc.short_mscale ? "short_mscale" : "long_mscale", " = ", **m,
                  " must be finite and > 0");
        }
      }
      // The default attention factor sqrt(1 + ln S / ln L0) divides by ln L0 (HF raises
      // ZeroDivisionError there).
      const bool default_factor =
          !sc.attention_factor && !(sc.short_mscale && sc.long_mscale);
      require(!default_factor || sc.original_max_position_embeddings > 1 ||
                  longrope_ratio(p) <= 1.0,
              fn, "original_max_position_embeddings = 1 must be > 1 for rope_type longrope's ",
              "default attention factor sqrt(1 + ln S / ln L0), S = ", longrope_ratio(p),
              " (or give attention_factor, or short_mscale and long_mscale)");
      break;
    }
    default:
      throw_invalid_argument(fn, "rope_type = ", static_cast<int>(sc.type),
                             " is not a RopeScalingType");
  }
  if (sc.attention_factor) {
    require(std::isfinite(*sc.attention_factor) && *sc.attention_factor > 0.0, fn,
            "attention_factor = ", *sc.attention_factor, " must be finite and > 0");
  }
  if (!sc.freq_factors.empty()) check_freq_factors(fn, sc.freq_factors, d / 2);
  return d;
}

/// The planner proper; p is validated, d = resolved rotary_dim.
inline RopeFrequencies plan_rope(const RopeParams& p, Eigen::Index d, std::int64_t seq_len) {
  RopeFrequencies f;
  f.rotary_dim = d;
  f.head_dim = p.head_dim;
  f.rotary_offset = p.rotary_offset;
  f.type = p.scaling.type;
  f.planned_seq_len = seq_len;
  f.effective_theta = p.theta;
  f.inv_freq.assign(static_cast<std::size_t>(d / 2), 0.0);
  const RopeScaling& sc = p.scaling;
  const double s = sc.factor;
  const double dd = static_cast<double>(d);
  switch (sc.type) {
    case RopeScalingType::kDefault: fill_geometric(f.inv_freq, p.theta, d); break;
    case RopeScalingType::kLinear:
      fill_geometric(f.inv_freq, p.theta, d);
      for (double& v : f.inv_freq) v /= s;
      break;
    case RopeScalingType::kProportional: {
      fill_geometric(f.inv_freq, p.theta, d);
      const auto turning = static_cast<std::size_t>(rope_proportional_pairs(p, d));
      for (std::size_t j = 0; j < f.inv_freq.size(); ++j) {
        f.inv_freq[j] = j < turning ? f.inv_freq[j] / s : 0.0;
      }
      break;
    }
    case RopeScalingType::kVllmNtk:
      if (sc.mixed_b) {
        fill_geometric(f.inv_freq, p.theta, d);
        // a (j+1)^m as ln s ((j+1) / (d/2))^m: the ratio is <= 1, so neither power
        // overflows for a large m ((d/2)^m = inf made a = 0 and 0 * inf = NaN).
        const double m = *sc.mixed_b;
        for (std::size_t j = 0; j < f.inv_freq.size(); ++j) {
          const double r = static_cast<double>(j + 1) / (dd / 2.0);
          f.inv_freq[j] /= std::exp(std::log(s) * std::pow(r, m));
        }
      } else {
        f.effective_theta = p.theta * s;
        fill_geometric(f.inv_freq, f.effective_theta, d);
        const double shift = std::pow(s, 2.0 / dd);
        for (double& v : f.inv_freq) v /= shift;
      }
      break;
    case RopeScalingType::kNtk:
      f.effective_theta = p.theta * std::pow(s, dd / (dd - 2.0));
      fill_geometric(f.inv_freq, f.effective_theta, d);
      break;
    case RopeScalingType::kDynamic: {
      const auto l0 = static_cast<double>(rope_original_length("compute_rope_frequencies", p));
      const double len = std::max(static_cast<double>(seq_len), l0);
      f.effective_theta = p.theta * std::pow(s * len / l0 - (s - 1.0), dd / (dd - 2.0));
      fill_geometric(f.inv_freq, f.effective_theta, d);
      break;
    }
    case RopeScalingType::kYarn: {
      const auto l0 = static_cast<double>(rope_original_length("compute_rope_frequencies", p));
      const double two_ln_base = 2.0 * std::log(p.theta);
      const auto corr = [&](double rotations) {
        return dd * std::log(l0 / (rotations * 2.0 * kRopePi)) / two_ln_base;
      };
      double lo = corr(sc.beta_fast);
      double hi = corr(sc.beta_slow);
      if (sc.truncate) {
        lo = std::floor(lo);
        hi = std::ceil(hi);
      }
      lo = std::max(lo, 0.0);
      hi = std::min(hi, dd - 1.0);  // d - 1 (HF), not d/2 - 1: the ramp may end past the last pair
      if (lo == hi) hi += 0.001;    // HF / vLLM singularity guard
      fill_geometric(f.inv_freq, p.theta, d);
      for (std::size_t j = 0; j < f.inv_freq.size(); ++j) {
        const double ramp = std::clamp((static_cast<double>(j) - lo) / (hi - lo), 0.0, 1.0);
        // HF's inv_freq_extrapolation_factor (1 - ramp), scaled by vLLM's extrapolation_factor.
        const double mix = (1.0 - ramp) * sc.extrapolation_factor;
        const double th = f.inv_freq[j];
        f.inv_freq[j] = th / s * (1.0 - mix) + th * mix;
      }
      if (sc.attention_factor) {
        f.attention_factor = *sc.attention_factor;
      } else if (sc.mscale != 0.0 && sc.mscale_all_dim != 0.0) {
        f.attention_factor = yarn_mscale(s, sc.mscale, sc.mscale_slope) /
                             yarn_mscale(s, sc.mscale_all_dim, sc.mscale_slope);
      } else {
        f.attention_factor = yarn_mscale(s, 1.0, sc.mscale_slope);
      }
      if (sc.mscale_all_dim != 0.0) {
        const double g = yarn_mscale(s, sc.mscale_all_dim, sc.mscale_slope);
        f.softmax_scale_multiplier = g * g;
      }
      break;
    }
    case RopeScalingType::kLlama3: {
      const auto l0 = static_cast<double>(sc.original_max_position_embeddings);
      const double lf = sc.low_freq_factor, hf = sc.high_freq_factor;
      const double low_freq_wavelen = l0 / lf, high_freq_wavelen = l0 / hf;
      fill_geometric(f.inv_freq, p.theta, d);
      for (double& th : f.inv_freq) {
        const double wavelen = 2.0 * kRopePi / th;
        if (wavelen < high_freq_wavelen) continue;
        if (wavelen > low_freq_wavelen || lf == hf) {
          th /= s;
          continue;
        }
        const double m = (l0 / wavelen - lf) / (hf - lf);
        th = (1.0 - m) * th / s + m * th;
      }
      break;
    }
    case RopeScalingType::kLongRope: {
      const auto l0 = sc.original_max_position_embeddings;
      f.uses_long_factor = seq_len > l0;
      const auto& ext = f.uses_long_factor ? sc.long_factor : sc.short_factor;
      const auto& table_mscale = f.uses_long_factor ? sc.long_mscale : sc.short_mscale;
      fill_geometric(f.inv_freq, p.theta, d);
      for (std::size_t j = 0; j < f.inv_freq.size(); ++j) f.inv_freq[j] /= ext[j];
      if (sc.attention_factor) {
        f.attention_factor = *sc.attention_factor;
      } else if (table_mscale) {
        f.attention_factor = *table_mscale;
      } else {
        const double big_s = longrope_ratio(p);
        f.attention_factor =
            big_s <= 1.0 ? 1.0
                         : std::sqrt(1.0 + std::log(big_s) / std::log(static_cast<double>(l0)));
      }
      break;
    }
  }
  if (sc.attention_factor && sc.type != RopeScalingType::kYarn &&
      sc.type != RopeScalingType::kLongRope) {
    f.attention_factor = *sc.attention_factor;
  }
  // ggml divides theta_base by the factor before its YaRN mix, which acts on both of the mixed
  // angles alike, so dividing the planned frequency is the same for every recipe.
  for (std::size_t j = 0; j < sc.freq_factors.size(); ++j) f.inv_freq[j] /= sc.freq_factors[j];
  return f;
}

/// Every recipe is finite for valid parameters in exact arithmetic, but a double can overflow
/// on the way (theta factor^(d/(d-2)) past 1.8e308, a freq_factor near the smallest subnormal,
/// g(s, m) = 0.1 m ln s + 1 for an m near DBL_MAX): such a plan is an error, not NaN angles.
inline void require_finite_plan(std::string_view fn, const RopeParams& p,
                                const RopeFrequencies& f) {
  const RopeScaling& sc = p.scaling;
  const auto overflow = [&](bool ok, const char* what, double value) {
    require(ok, fn, "rope_type ", to_string(sc.type), " with theta = ", p.theta, ", factor = ",
            sc.factor, " and seq_len = ", f.planned_seq_len, " overflows a double: ", what,
            " = ", value, " (a scaling parameter is out of any model's range)");
  };
  overflow(std::isfinite(f.effective_theta), "effective_theta", f.effective_theta);
  for (const double v : f.inv_freq) overflow(std::isfinite(v), "inv_freq", v);
  overflow(std::isfinite(f.attention_factor) && f.attention_factor > 0.0, "attention_factor",
           f.attention_factor);
  overflow(std::isfinite(f.softmax_scale_multiplier) && f.softmax_scale_multiplier > 0.0,
           "softmax_scale_multiplier", f.softmax_scale_multiplier);
}

}  // namespace detail

/// \brief Plans inv_freq / attention_factor / softmax multiplier for one layer.
/// seq_len: the current sequence length (max position + 1), read by `dynamic` (L = max(seq_len,
/// L0)) and `longrope` (long factors when seq_len > L0); 0 = init time, as HF's seq_len=None.
/// Formulas: see the file comment (HF modeling_rope_utils `_compute_*_parameters`).
/// Throws std::invalid_argument naming the offending parameter (factor < 1, theta <= 1, odd or
/// too large rotary_dim, factor lists of the wrong length, a missing required L0, ...), or
/// naming the recipe when valid parameters overflow a double (an infinite effective_theta,
/// inv_freq or attention_factor): the plan never holds a value that is not finite.
inline RopeFrequencies compute_rope_frequencies(const RopeParams& params,
                                                std::int64_t seq_len = 0) {
  constexpr std::string_view fn = "compute_rope_frequencies";
  const Eigen::Index d = detail::validate_rope_params(fn, params, seq_len);
  RopeFrequencies f = detail::plan_rope(params, d, seq_len);
  detail::require_finite_plan(fn, params, f);
  return f;
}

/// \brief ggml's per-pair frequency factors (llama.cpp's `rope_freqs.weight`, the `c` tensor of
/// ggml_rope_ext): pair j turns at inv_freq[j] / factors[j]. llama.cpp's converters write such
/// a tensor in place of a config's llama3 rule (factor_j = 1 / ((1 - smooth_j) / s + smooth_j))
/// and for LongRoPE (the chosen factor list), so a GGUF engine plans the default RoPE and
/// applies its model's factors here (or sets RopeScaling::freq_factors, which the planner
/// applies the same way). attention_factor and the rest of the plan are kept.
/// Throws std::invalid_argument for a count other than rotary_dim / 2, a factor that is not
/// finite and > 0, or a quotient that overflows.
inline RopeFrequencies with_freq_factors(RopeFrequencies freqs,
                                         const std::vector<double>& factors) {
  detail::check_freq_factors("with_freq_factors", factors,
                             static_cast<Eigen::Index>(freqs.inv_freq.size()));
  for (std::size_t j = 0; j < factors.size(); ++j) {
    const double v = freqs.inv_freq[j] / factors[j];
    detail::require(std::isfinite(v), "with_freq_factors", "inv_freq[", j, "] = ",
                    freqs.inv_freq[j], " / freq_factors[", j, "] = ", factors[j],
                    " overflows a double");
    freqs.inv_freq[j] = v;
  }
  return freqs;
}

/// \brief A layer's frequency plan that follows the sequence length the way HF's
/// `dynamic_rope_update` does, for an engine to call once per step:
///  - dynamic: grows when seq_len exceeds the largest length planned so far, and resets to the
///    original frequencies when seq_len drops below L0 after having grown;
///  - longrope: switches between short and long factors when seq_len crosses L0;
///  - every other type never changes.
/// update() returns true when the frequencies changed. Keys already in a KV cache were rotated
/// with the old plan: re-rotate them (rerotate_rope_inplace) or re-prefill, otherwise they keep
/// the old angles (transformers #25104, Phi-3's re-prefill at the long/short switch).
class RopePlan {
 public:
  /// Validates params and plans for init time (seq_len = 0).
  explicit RopePlan(RopeParams params)
      : params_(std::move(params)),
        freqs_(compute_rope_frequencies(params_, 0)),
        max_seq_len_cached_(0) {
    if (params_.scaling.type == RopeScalingType::kDynamic ||
        params_.scaling.type == RopeScalingType::kLongRope) {
      original_ = detail::rope_original_length("RopePlan", params_);
      max_seq_len_cached_ = original_;
    }
  }

  /// \brief Tells the plan the current sequence length (max position id + 1 of this step).
  /// Returns true when frequencies() changed. Throws std::invalid_argument for seq_len < 0.
  bool update(std::int64_t seq_len) {
    detail::require(seq_len >= 0, "RopePlan::update", "seq_len = ", seq_len, " must be >= 0");
    switch (params_.scaling.type) {
      case RopeScalingType::kDynamic:
        if (seq_len > max_seq_len_cached_) {
          freqs_ = compute_rope_frequencies(params_, seq_len);
          max_seq_len_cached_ = seq_len;
          return true;
        }
        if (seq_len < original_ && max_seq_len_cached_ > original_) {
          freqs_ = compute_rope_frequencies(params_, 0);
          max_seq_len_cached_ = original_;
          return true;
        }
        return false;
      case RopeScalingType::kLongRope: {
        const bool want_long = seq_len > original_;
        if (want_long == freqs_.uses_long_factor) return false;
        freqs_ = compute_rope_frequencies(params_, seq_len);
        return true;
      }
      default: return false;
    }
  }

  const RopeFrequencies& frequencies() const noexcept { return freqs_; }
  const RopeParams& params() const noexcept { return params_; }
  /// dynamic: the largest length planned for so far (L0 initially).
  std::int64_t max_seq_len_cached() const noexcept { return max_seq_len_cached_; }

 private:
  RopeParams params_;
  RopeFrequencies freqs_;
  std::int64_t original_ = 0;
  std::int64_t max_seq_len_cached_;
};

}  // namespace posenc
