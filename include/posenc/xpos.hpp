#pragma once
/// \file posenc/xpos.hpp
/// xPos (Sun et al. 2023, "A Length-Extrapolatable Transformer", §3.1; FlashAttention's
/// RotaryEmbedding(scale_base = ...)): RoPE whose pair j is also scaled by zeta_j raised to the
/// token's distance from a centre c, with opposite signs for queries and keys,
///
///   q_n -> zeta^( (n - c) / gamma) R(n) q_n      zeta_j = (2j + 0.4 r) / (1.4 r)   (r = rotary_dim)
///   k_m -> zeta^(-(m - c) / gamma) R(m) k_m      gamma  = scale_base (512 in the paper)
///
/// so each pair of q_n . k_m picks up zeta_j^((n - m) / gamma): a decay with distance
/// (zeta_j < 1, strongest on the fast pairs), still a function of n - m only. The centre only
/// keeps the powers inside the number range (FlashAttention takes seqlen // 2) and cancels in
/// every q . k. posenc builds the two cos/sin caches (the vLLM / FlashInfer layout of
/// fill_rope_cos_sin_cache, attention factor folded in); the cached apply calls rotate Q with the
/// q cache and K with the k cache.

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "posenc/detail/numeric.hpp"
#include "posenc/error.hpp"
#include "posenc/rope.hpp"
#include "posenc/rope_frequencies.hpp"
#include "posenc/tensor.hpp"

namespace posenc {

struct XposParams {
  double scale_base = 512.0;  ///< gamma; finite and > 0
  std::int64_t center = 0;    ///< c, a position in [0, 2^53]; cancels in q . k
};

/// \brief Fills the xPos caches of positions first_position + r, r in [0, rows):
/// q_cache[r] = a zeta^(+(p - c) / gamma) cat(cos(p w), sin(p w)), k_cache[r] the same with
/// zeta^(-(p - c) / gamma), computed in double and rounded once to T.
/// q_cache, k_cache: [rows, rotary_dim], rotary_dim == freqs.rotary_dim.
/// Throws std::invalid_argument (shapes, scale_base, first_position, center) and
/// std::out_of_range when a scale at the rows farthest from the centre would not fit in T —
/// before writing anything.
template <typename T = float>
void fill_xpos_cos_sin_caches(const RopeFrequencies& freqs, const XposParams& xpos,
                              TensorView<T, 2> q_cache, TensorView<T, 2> k_cache,
                              std::int64_t first_position = 0) {
  static_assert(detail::is_storage_type_v<T>, "posenc: cache type must be a storage type");
  constexpr std::string_view fn = "fill_xpos_cos_sin_caches";
  const Eigen::Index rd = detail::validate_freqs(fn, freqs);
  const Eigen::Index rows = q_cache.dimension(0);
  detail::require(q_cache.dimension(1) == rd && rows > 0, fn, "q_cache shape [", rows, ", ",
                  q_cache.dimension(1), "] must be [rows > 0, rotary_dim = ", rd, "]");
  detail::require(k_cache.dimension(0) == rows && k_cache.dimension(1) == rd, fn,
                  "k_cache shape [", k_cache.dimension(0), ", ", k_cache.dimension(1),
                  "] must equal q_cache's [", rows, ", ", rd, "]");
  detail::require(std::isfinite(xpos.scale_base) && xpos.scale_base > 0.0, fn, "scale_base = ",
                  xpos.scale_base, " must be finite and > 0");
  detail::require(xpos.center >= 0 && xpos.center <= kMaxRopePosition, fn, "center = ",
                  xpos.center, " must be in [0, 2^53]");
  detail::require(first_position >= 0 && first_position <= kMaxRopePosition - rows, fn,
                  "first_position = ", first_position, " must be in [0, 2^53 - rows]");
  const double r = static_cast<double>(rd);
  const auto zeta = [&](Eigen::Index j) { return (2.0 * static_cast<double>(j) + 0.4 * r) / (1.4 * r); };
  // The largest |log scale| is at pair 0 (smallest zeta) and the row farthest from the centre.
  const std::int64_t last = first_position + rows - 1;
  const std::int64_t far = std::abs(first_position - xpos.center) >= std::abs(last - xpos.center)
                               ? first_position
                               : last;
  const double log_max = std::abs(std::log(zeta(0))) *
                             std::abs(static_cast<double>(far - xpos.center)) / xpos.scale_base +
                         std::log(std::abs(freqs.attention_factor));
  const double log_limit = std::log(static_cast<double>(Eigen::NumTraits<T>::highest()));
  if (!(log_max < log_limit)) {
    detail::throw_out_of_range(fn, "position ", far, " is ", std::abs(far - xpos.center),
                               " from center = ", xpos.center, ": its scale zeta_0^(",
                               static_cast<double>(far - xpos.center) / xpos.scale_base,
                               ") overflows the cache type; move the center closer");
  }
  const Eigen::Index half = rd / 2;
  const double log_a = std::log(freqs.attention_factor);
  for (Eigen::Index row = 0; row < rows; ++row) {
    const std::int64_t p = first_position + row;
    const double power = static_cast<double>(p - xpos.center) / xpos.scale_base;
    T* qr = q_cache.data() + row * rd;
    T* kr = k_cache.data() + row * rd;
    for (Eigen::Index j = 0; j < half; ++j) {
      const double angle = static_cast<double>(p) * freqs.inv_freq[static_cast<std::size_t>(j)];
      const double c = std::cos(angle), s = std::sin(angle);
      // In log space: the guard above bounds log a +- power log zeta, but a / zeta^power
      // formed zeta^power first, which underflows to 0 for a small a (inf / NaN in k_cache).
      const double log_scale = power * std::log(zeta(j));
      const double up = std::exp(log_a + log_scale), down = std::exp(log_a - log_scale);
      qr[j] = detail::from_value<T>(up * c);
      qr[half + j] = detail::from_value<T>(up * s);
      kr[j] = detail::from_value<T>(down * c);
      kr[half + j] = detail::from_value<T>(down * s);
    }
  }
}

}  // namespace posenc
