#pragma once
/// \file posenc/fope.hpp
/// FoPE, Fourier Position Embedding (Hua et al. 2024, arXiv 2412.17739; InternS1-Pro's
/// `fope_init_factor` / `fope_sep_head` / `num_inv_freq`, vLLM's FourierRotaryEmbedding): RoPE
/// whose cos / sin per output pair are learned mixtures of F frequencies. For kv head h (or one
/// table for all heads without fope_sep_head), position t and pair d < F:
///
///   cos[h, t, d] = sum_D cos(t w_D) C[h, D, d]      sin[h, t, d] = sum_D sin(t w_D) S[h, D, d]
///
/// with w_D the first F inv_freq of the plan (num_inv_freq, else every w > 2 pi / L, L =
/// max_position_embeddings: the frequencies that complete a period within the trained
/// length); pairs d >= F keep cos 1, sin 0 (untouched). Every q / k head of kv group h is then
/// turned half-split over the whole head, (x_d, x_{d + D/2}) -> (x_d c - x_{d+D/2} s,
/// x_{d+D/2} c + x_d s) — the RoPE formula with cos / sin that need not satisfy c^2 + s^2 = 1,
/// so q.k depends on both positions, not only on their difference.
///
/// The cache [kv_heads, max_position, head_dim] holds row (h, t) = cat(cos, sin), computed in
/// double and stored float; apply_fope_qk_inplace reads it with the vectorised cached RoPE
/// kernels, one kv group at a time (cache rows h * max_position + t).

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string_view>
#include <vector>

#include "posenc/rope.hpp"
#include "posenc/rope_frequencies.hpp"
#include "posenc/tensor.hpp"

namespace posenc {

/// \brief F, the frequencies FoPE mixes: num_inv_freq when given, else the count of inv_freq
/// above 2 pi / max_position_embeddings (vLLM's FourierRotaryEmbedding rule).
/// Throws std::invalid_argument for num_inv_freq outside [1, inv_freq count] or a length <= 0.
inline Eigen::Index fope_num_frequencies(const RopeFrequencies& freqs,
                                         std::optional<Eigen::Index> num_inv_freq,
                                         std::int64_t max_position_embeddings) {
  constexpr std::string_view fn = "fope_num_frequencies";
  const auto n = static_cast<Eigen::Index>(freqs.inv_freq.size());
  if (num_inv_freq) {
    detail::require(*num_inv_freq >= 1 && *num_inv_freq <= n, fn, "num_inv_freq = ",
                    *num_inv_freq, " must be in [1, ", n, "] (the plan's frequencies)");
    return *num_inv_freq;
  }
  detail::require(max_position_embeddings > 0, fn, "max_position_embeddings = ",
                  max_position_embeddings, " must be > 0");
  const double lowest = 2.0 * detail::kRopePi / static_cast<double>(max_position_embeddings);
  Eigen::Index f = 0;
  for (const double w : freqs.inv_freq) f += w > lowest;
  return f;
}

/// \brief The FoPE cos / sin cache. freqs: the model's plan (its first F inv_freq are mixed;
/// attention_factor is not applied: FoPE's coefficients carry the scale); cos_coef, sin_coef:
/// [Hc, F, F] with Hc = kv_heads (fope_sep_head) or 1 (one table for every head);
/// cache: [kv_heads, max_position, head_dim], head_dim even and >= 2 F.
/// Throws std::invalid_argument (shapes, F above the plan's frequencies, a mixed frequency that
/// is not finite and >= 0, a non-finite coefficient) and std::out_of_range (coefficients whose
/// sum of magnitudes in a column exceeds the float cache's range) before writing anything.
template <typename C>
void fill_fope_cos_sin_cache(const RopeFrequencies& freqs, ConstTensorView<C, 3> cos_coef,
                             ConstTensorView<C, 3> sin_coef, TensorView<float, 3> cache) {
  static_assert(detail::is_storage_type_v<C>, "posenc: coefficients must be a storage type");
  constexpr std::string_view fn = "fill_fope_cos_sin_cache";
  const Eigen::Index kv_heads = cache.dimension(0), max_pos = cache.dimension(1),
                     head_dim = cache.dimension(2), half = head_dim / 2;
  const Eigen::Index hc = cos_coef.dimension(0), f = cos_coef.dimension(1);
  detail::require(kv_heads >= 1 && max_pos >= 1 && head_dim >= 2 && head_dim % 2 == 0, fn,
                  "cache shape [", kv_heads, ", ", max_pos, ", ", head_dim,
                  "] must be [kv_heads >= 1, max_position >= 1, even head_dim]");
  detail::require(f >= 1 && cos_coef.dimension(2) == f && (hc == 1 || hc == kv_heads), fn,
                  "cos_coef shape [", hc, ", ", f, ", ", cos_coef.dimension(2),
                  "] must be [1 or kv_heads = ", kv_heads, ", F, F]");
  detail::require(sin_coef.dimension(0) == hc && sin_coef.dimension(1) == f &&
                      sin_coef.dimension(2) == f,
                  fn, "sin_coef shape [", sin_coef.dimension(0), ", ", sin_coef.dimension(1), ", ",
                  sin_coef.dimension(2), "] must equal cos_coef's [", hc, ", ", f, ", ", f, "]");
  detail::require(f <= static_cast<Eigen::Index>(freqs.inv_freq.size()) && f <= half, fn, "F = ",
                  f, " must be <= the plan's ", freqs.inv_freq.size(),
                  " frequencies and <= head_dim / 2 = ", half);
  for (Eigen::Index k = 0; k < f; ++k) {
    const double w = freqs.inv_freq[static_cast<std::size_t>(k)];
    detail::require(std::isfinite(w) && w >= 0.0, fn, "inv_freq[", k, "] = ", w,
                    " must be finite and >= 0");
  }
  for (const auto* coef : {&cos_coef, &sin_coef}) {
    for (Eigen::Index i = 0; i < coef->size(); ++i) {
      const double x = detail::to_double(coef->data()[i]);
      detail::require(std::isfinite(x), fn, coef == &cos_coef ? "cos_coef" : "sin_coef", " entry ",
                      i, " = ", x, " must be finite");
    }
  }
  // |cos[h, t, d]| <= sum_D |C[h, D, d]| at every t (likewise sin): a column within float's
  // range cannot overflow the cache, whose conversion from double is undefined past it.
  for (const auto* coef : {&cos_coef, &sin_coef}) {
    for (Eigen::Index h = 0; h < hc; ++h) {
      for (Eigen::Index d = 0; d < f; ++d) {
        double bound = 0.0;
        for (Eigen::Index k = 0; k < f; ++k) bound += std::abs(detail::to_double((*coef)(h, k, d)));
        if (!(bound <= static_cast<double>(std::numeric_limits<float>::max()))) {
          detail::throw_out_of_range(fn, coef == &cos_coef ? "cos_coef" : "sin_coef", "[", h,
                                     ", :, ", d, "] sums to ", bound,
                                     " in magnitude: its mix can exceed the float cache's range (",
                                     std::numeric_limits<float>::max(), ")");
        }
      }
    }
  }
  std::vector<double> c(static_cast<std::size_t>(f)), s(c.size());
  for (Eigen::Index t = 0; t < max_pos; ++t) {
    for (Eigen::Index k = 0; k < f; ++k) {
      const double angle = static_cast<double>(t) * freqs.inv_freq[static_cast<std::size_t>(k)];
      c[static_cast<std::size_t>(k)] = std::cos(angle);
      s[static_cast<std::size_t>(k)] = std::sin(angle);
    }
    for (Eigen::Index h = 0; h < kv_heads; ++h) {
      const Eigen::Index src = hc == 1 ? 0 : h;
      float* row = cache.data() + (h * max_pos + t) * head_dim;
      for (Eigen::Index d = 0; d < half; ++d) {
        double cos_d = 1.0, sin_d = 0.0;  // pairs past F pass through
        if (d < f) {
          cos_d = sin_d = 0.0;
          for (Eigen::Index k = 0; k < f; ++k) {
            cos_d += c[static_cast<std::size_t>(k)] * detail::to_double(cos_coef(src, k, d));
            sin_d += s[static_cast<std::size_t>(k)] * detail::to_double(sin_coef(src, k, d));
          }
        }
        row[d] = static_cast<float>(cos_d);
        row[half + d] = static_cast<float>(sin_d);
      }
    }
  }
}

/// \brief FoPE on Q and K in place from fill_fope_cos_sin_cache's cache: the q heads of kv
/// group h (heads h * group .. (h + 1) * group - 1) and k head h read the cache rows of h.
/// q: heads = group * kv_heads, k: kv_heads heads, both of the cache's head_dim; positions in
/// [0, max_position). options: threads and direction as the cached RoPE calls; kInverse needs
/// cos^2 + sin^2 > 0 on every pair of the rows it reads (FoPE's mixtures can reach 0 there).
/// Throws std::invalid_argument (shapes, a position outside the cache, a pair without an
/// inverse) before writing anything.
template <typename T>
void apply_fope_qk_inplace(RopeHeads<T> q, RopeHeads<T> k, const RopePositions& positions,
                           ConstTensorView<float, 3> cache, const RopeApplyOptions& options = {}) {
  constexpr std::string_view fn = "apply_fope_qk_inplace";
  const Eigen::Index kv_heads = cache.dimension(0), max_pos = cache.dimension(1),
                     head_dim = cache.dimension(2);
  detail::require(k.heads == kv_heads && kv_heads >= 1 && q.heads % kv_heads == 0, fn,
                  "k heads = ", k.heads, " must equal the cache's kv_heads = ", kv_heads,
                  " and q heads = ", q.heads, " a multiple of it");
  detail::require(q.head_dim == head_dim && k.head_dim == head_dim, fn, "head_dim q = ",
                  q.head_dim, ", k = ", k.head_dim, " must equal the cache's ", head_dim);
  detail::require(q.batch == k.batch && q.seq == k.seq, fn, "q [", q.batch, ", ", q.seq,
                  "] and k [", k.batch, ", ", k.seq, "] must have the same tokens");
  detail::require(positions.batch == q.batch && positions.seq == q.seq, fn, "positions [",
                  positions.batch, ", ", positions.seq, "] must match the tokens [", q.batch,
                  ", ", q.seq, "]");
  // The kv groups' rows are stacked in one cache: check the positions against one group's
  // length here, before the per-group calls offset them. The parts first, in [0, 2^53] (their
  // sum overflowed for ids of INT64_MAX), as every RoPE call checks them.
  detail::validate_positions(fn, positions, q.batch, q.seq, kMaxRopePosition + 1, false);
  for (Eigen::Index b = 0; b < positions.batch; ++b) {
    for (Eigen::Index s = 0; s < positions.seq; ++s) {
      const std::int64_t p = positions.at(b, s);
      detail::require(p >= 0 && p < max_pos, fn, "position[", b, ", ", s, "] = ", p,
                      " must be in [0, max_position = ", max_pos, ")");
    }
  }
  // kInverse divides by c^2 + s^2, which FoPE's learned mixtures (unlike a RoPE plan's a^2)
  // can make 0: such a pair maps every input to 0 and has no inverse.
  if (options.direction == RopeDirection::kInverse) {
    const Eigen::Index half = head_dim / 2;
    for (Eigen::Index h = 0; h < kv_heads; ++h) {
      for (Eigen::Index b = 0; b < positions.batch; ++b) {
        for (Eigen::Index s = 0; s < positions.seq; ++s) {
          const std::int64_t t = positions.at(b, s);
          const float* row = cache.data() + (h * max_pos + t) * head_dim;
          for (Eigen::Index d = 0; d < half; ++d) {
            const double c = static_cast<double>(row[d]), sn = static_cast<double>(row[half + d]);
            detail::require(c * c + sn * sn > 0.0, fn, "cache row (kv head ", h, ", position ",
                            t, ") pair ", d, " has cos = sin = 0: direction inverse has no ",
                            "inverse there");
          }
        }
      }
    }
  }
  // Nothing to turn: only the views' own checks, no group pointers into null data.
  if (q.batch * q.seq == 0) {
    detail::validate_heads(fn, "q", detail::as_const(q), head_dim, 0);
    detail::validate_heads(fn, "k", detail::as_const(k), head_dim, 0);
    return;
  }
  const Eigen::Index group = q.heads / kv_heads;
  const ConstTensorView<float, 2> rows(cache.data(), kv_heads * max_pos, head_dim);
  for (Eigen::Index h = 0; h < kv_heads; ++h) {
    RopeHeads<T> qh = q, kh = k;
    qh.data = q.data + h * group * q.head_stride;
    qh.heads = group;
    kh.data = k.data + h * k.head_stride;
    kh.heads = 1;
    RopePositions ph = positions;
    ph.offset += h * max_pos;
    apply_rope_qk_inplace_cached<T>(qh, kh, ph, rows, RopeLayout::kHalfSplit, 0, options);
  }
}

}  // namespace posenc
