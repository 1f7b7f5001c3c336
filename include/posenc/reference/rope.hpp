#pragma once
/// \file posenc/reference/rope.hpp
/// Obviously-correct long-double RoPE: the oracle the fast kernels are tested against. Each
/// scaling recipe is written again straight from its paper / HF formula, in long double, with
/// no shared code from the fast planner; the rotation is the textbook 2x2 matrix per pair, one
/// element at a time, with sinl/cosl of the full angle.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <utility>
#include <vector>

#include "posenc/rope_params.hpp"
#include "posenc/tensor.hpp"

namespace posenc::reference {

struct RopeFrequencies {
  std::vector<long double> inv_freq;
  long double attention_factor = 1.0L;
  long double softmax_scale_multiplier = 1.0L;
  Eigen::Index rotary_dim = 0;
};

inline constexpr long double kPi = 3.141592653589793238462643383279502884L;

/// theta^(-2j/d) = 1 / theta^(2j/d), RoFormer eq. (15).
inline long double rope_base_inv_freq(long double theta, Eigen::Index j, Eigen::Index d) {
  return 1.0L / std::pow(theta, 2.0L * static_cast<long double>(j) / static_cast<long double>(d));
}

/// Unvalidated (tests pass valid params). rotary_dim resolved as HF does.
inline RopeFrequencies rope_frequencies(const RopeParams& p, std::int64_t seq_len = 0) {
  RopeFrequencies f;
  const bool proportional = p.scaling.type == RopeScalingType::kProportional;
  const Eigen::Index d = p.rotary_dim != 0 ? p.rotary_dim
                         : proportional    ? p.head_dim
                                           : static_cast<Eigen::Index>(
                                              static_cast<double>(p.head_dim) *
                                              p.partial_rotary_factor);
  f.rotary_dim = d;
  const Eigen::Index half = d / 2;
  const long double theta = static_cast<long double>(p.theta);
  const long double s = static_cast<long double>(p.scaling.factor);
  const long double dd = static_cast<long double>(d);
  const std::int64_t l0_int = p.scaling.original_max_position_embeddings > 0
                                  ? p.scaling.original_max_position_embeddings
                                  : p.max_position_embeddings;
  const long double l0 = static_cast<long double>(l0_int);
  const long double slope = static_cast<long double>(p.scaling.mscale_slope);
  const auto g = [slope](long double scale, long double m) {
    return scale <= 1.0L ? 1.0L : slope * m * std::log(scale) + 1.0L;
  };
  for (Eigen::Index j = 0; j < half; ++j) {
    const long double base = rope_base_inv_freq(theta, j, d);
    long double w = base;
    switch (p.scaling.type) {
      case RopeScalingType::kDefault: break;
      case RopeScalingType::kLinear: w = base / s; break;
      case RopeScalingType::kNtk:
        w = rope_base_inv_freq(theta * std::pow(s, dd / (dd - 2.0L)), j, d);
        break;
      case RopeScalingType::kDynamic: {
        const long double len = std::max(static_cast<long double>(seq_len), l0);
        w = rope_base_inv_freq(theta * std::pow(s * len / l0 - (s - 1.0L), dd / (dd - 2.0L)), j, d);
        break;
      }
      case RopeScalingType::kYarn: {
        // Peng et al. 2023, eq. (17)-(19) in HF's dimension form.
        const auto corr = [&](long double rot) {
          return dd * std::log(l0 / (rot * 2.0L * kPi)) / (2.0L * std::log(theta));
        };
        long double lo = corr(static_cast<long double>(p.scaling.beta_fast));
        long double hi = corr(static_cast<long double>(p.scaling.beta_slow));
        if (p.scaling.truncate) {
          lo = std::floor(lo);
          hi = std::ceil(hi);
        }
        if (lo < 0.0L) lo = 0.0L;
        if (hi > dd - 1.0L) hi = dd - 1.0L;
        if (lo == hi) hi += 0.001L;
        long double ramp = (static_cast<long double>(j) - lo) / (hi - lo);
        ramp = ramp < 0.0L ? 0.0L : (ramp > 1.0L ? 1.0L : ramp);
        // vLLM's extrapolation_factor scales the extrapolated share (1 by default: HF).
        const long double extrapolation_weight =
            (1.0L - ramp) * static_cast<long double>(p.scaling.extrapolation_factor);
        w = (base / s) * (1.0L - extrapolation_weight) + base * extrapolation_weight;
        break;
      }
      case RopeScalingType::kLlama3: {
        const long double lf = static_cast<long double>(p.scaling.low_freq_factor);
        const long double hf = static_cast<long double>(p.scaling.high_freq_factor);
        const long double l0l = static_cast<long double>(p.scaling.original_max_position_embeddings);
        const long double wavelen = 2.0L * kPi / base;
        if (wavelen < l0l / hf) {
          w = base;
        } else if (wavelen > l0l / lf || lf == hf) {
          w = base / s;
        } else {
          const long double smooth = (l0l / wavelen - lf) / (hf - lf);
          w = (1.0L - smooth) * base / s + smooth * base;
        }
        break;
      }
      case RopeScalingType::kVllmNtk: {
        const long double jj = static_cast<long double>(j);
        if (p.scaling.mixed_b) {
          // Su's NTK-RoPE-mixed: lambda_j = exp(ln s (j+1)^b / (d/2)^b).
          const long double b = static_cast<long double>(*p.scaling.mixed_b);
          w = base / std::exp(std::log(s) * std::pow((jj + 1.0L) / (dd / 2.0L), b));
        } else {
          w = std::pow(theta * s, -2.0L * jj / dd) * std::pow(s, -2.0L / dd);
        }
        break;
      }
      case RopeScalingType::kProportional: {
        // Gemma-4: pairs j < int(f * head_dim // 2) turn at theta^(-2j/head_dim) / s. The count
        // is HF's Python float product, rounded in double (0.3 * 20 is 6.0 there, 5.99.. in
        // long double).
        const double product = p.partial_rotary_factor * static_cast<double>(d);
        const long double turning = std::floor(static_cast<long double>(product) / 2.0L);
        w = static_cast<long double>(j) < turning ? base / s : 0.0L;
        break;
      }
      case RopeScalingType::kLongRope: {
        const bool use_long = seq_len > p.scaling.original_max_position_embeddings;
        const auto& ext = use_long ? p.scaling.long_factor : p.scaling.short_factor;
        w = 1.0L / (static_cast<long double>(ext[static_cast<std::size_t>(j)]) *
                    std::pow(theta, 2.0L * static_cast<long double>(j) / dd));
        break;
      }
    }
    f.inv_freq.push_back(w);
  }
  if (p.scaling.type == RopeScalingType::kYarn) {
    const long double ms = static_cast<long double>(p.scaling.mscale);
    const long double msa = static_cast<long double>(p.scaling.mscale_all_dim);
    if (p.scaling.attention_factor) {
      f.attention_factor = static_cast<long double>(*p.scaling.attention_factor);
    } else if (ms != 0.0L && msa != 0.0L) {
      f.attention_factor = g(s, ms) / g(s, msa);
    } else {
      f.attention_factor = g(s, 1.0L);
    }
    if (msa != 0.0L) f.softmax_scale_multiplier = g(s, msa) * g(s, msa);
  } else if (p.scaling.type == RopeScalingType::kLongRope) {
    const long double l0l = static_cast<long double>(p.scaling.original_max_position_embeddings);
    const long double big_s =
        p.max_position_embeddings > 0 ? static_cast<long double>(p.max_position_embeddings) / l0l : s;
    const auto& table = seq_len > p.scaling.original_max_position_embeddings ? p.scaling.long_mscale
                                                                              : p.scaling.short_mscale;
    f.attention_factor = p.scaling.attention_factor
                             ? static_cast<long double>(*p.scaling.attention_factor)
                         : table ? static_cast<long double>(*table)
                                 : (big_s <= 1.0L ? 1.0L
                                                  : std::sqrt(1.0L + std::log(big_s) / std::log(l0l)));
  } else if (p.scaling.attention_factor) {
    f.attention_factor = static_cast<long double>(*p.scaling.attention_factor);
  }
  return f;
}

/// Dims (i1, i2) of pair j inside a head vector.
inline std::pair<Eigen::Index, Eigen::Index> rope_pair(RopeLayout layout, Eigen::Index j,
                                                       Eigen::Index rotary_dim,
                                                       Eigen::Index offset) {
  if (layout == RopeLayout::kInterleaved) return {offset + 2 * j, offset + 2 * j + 1};
  return {offset + j, offset + rotary_dim / 2 + j};
}

/// One head vector rotated by position p: y = a R(p) x, or the exact inverse R(-p) x / a.
/// x: [head_dim] (any type convertible to long double)
template <typename T>
std::vector<long double> rope_vector(const T* x, Eigen::Index head_dim, std::int64_t p,
                                     const std::vector<long double>& inv_freq,
                                     long double attention_factor, Eigen::Index offset,
                                     RopeLayout layout, bool inverse = false) {
  std::vector<long double> y(static_cast<std::size_t>(head_dim));
  for (Eigen::Index i = 0; i < head_dim; ++i) {
    y[static_cast<std::size_t>(i)] = static_cast<long double>(static_cast<double>(x[i]));
  }
  const auto rd = static_cast<Eigen::Index>(2 * inv_freq.size());
  for (Eigen::Index j = 0; j < rd / 2; ++j) {
    const auto [i1, i2] = rope_pair(layout, j, rd, offset);
    const long double angle = static_cast<long double>(p) * inv_freq[static_cast<std::size_t>(j)];
    const long double c = std::cos(angle), s = inverse ? -std::sin(angle) : std::sin(angle);
    const long double scale = inverse ? 1.0L / attention_factor : attention_factor;
    const long double x1 = y[static_cast<std::size_t>(i1)], x2 = y[static_cast<std::size_t>(i2)];
    y[static_cast<std::size_t>(i1)] = scale * (x1 * c - x2 * s);
    y[static_cast<std::size_t>(i2)] = scale * (x2 * c + x1 * s);
  }
  return y;
}

/// Whole tensor: x [batch, seq, heads, head_dim] (BSHD), [batch, heads, seq, head_dim] (BHSD)
/// or [seq, batch, heads, head_dim] (SBHD), contiguous; positions [batch, seq]. Returns the
/// rotated tensor, same layout.
template <typename T>
std::vector<long double> apply_rope(const T* x, Eigen::Index batch, Eigen::Index seq,
                                    Eigen::Index heads, Eigen::Index head_dim,
                                    HeadLayout head_layout, const std::int64_t* positions,
                                    const std::vector<long double>& inv_freq,
                                    long double attention_factor, Eigen::Index offset,
                                    RopeLayout layout, bool inverse = false) {
  std::vector<long double> out(static_cast<std::size_t>(batch * seq * heads * head_dim));
  for (Eigen::Index b = 0; b < batch; ++b) {
    for (Eigen::Index s = 0; s < seq; ++s) {
      for (Eigen::Index h = 0; h < heads; ++h) {
        Eigen::Index row = 0;
        switch (head_layout) {
          case HeadLayout::kBSHD: row = ((b * seq + s) * heads + h) * head_dim; break;
          case HeadLayout::kBHSD: row = ((b * heads + h) * seq + s) * head_dim; break;
          case HeadLayout::kSBHD: row = ((s * batch + b) * heads + h) * head_dim; break;
          default: throw std::invalid_argument("reference::apply_rope: not a HeadLayout");
        }
        const auto y = rope_vector(x + row, head_dim, positions[b * seq + s], inv_freq,
                                   attention_factor, offset, layout, inverse);
        std::copy(y.begin(), y.end(), out.begin() + row);
      }
    }
  }
  return out;
}

}  // namespace posenc::reference
