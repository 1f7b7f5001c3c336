#pragma once
/// \file posenc/attention_temperature.hpp
/// Query temperatures: a factor t(pos) on each query's logits that grows with its position.
///
/// Llama-4's attention temperature tuning: on its NoPE layers (no RoPE, full attention over the
/// whole context) each query is scaled by a factor that grows with the log of its position, so
/// that softmax over millions of keys does not flatten (Scalable-Softmax, Nakanishi 2025,
/// arXiv 2501.19399, in the stepped form Meta's Llama-4 code uses):
///
///   q <- q * t(pos),   t(pos) = 1 + attn_scale * ln(1 + floor((pos + 1) / floor_scale))
///
/// Llama-4 Scout / Maverick: floor_scale 8192, attn_scale 0.1, so t = 1 for the first 8191
/// positions, 1 + 0.1 ln 2 from 8191 on, 1 + 0.1 ln 3 from 16383 on. HF Llama4TextAttention
/// (attn_temperature_tuning, only where the layer has no RoPE) and vLLM's Llama4Attention
/// (_get_attn_scale) compute the same factor in float32 from the position (HF: cache_position,
/// the same number when nothing is left-padded); posenc forms it in double and multiplies each
/// element in float (double for double), rounding once to the caller's type, as those do.
///
/// xAI's Grok-2 (config attn_temperature_len = L = 1024; SGLang's xai_temperature_len in its
/// attention kernels) scales the logits of every layer, RoPE or not:
///
///   t(pos) = log2(pos) / log2(L) for pos > L, else 1        (TemperatureForm::kXai)
///
/// so t = 1.1 at pos 2048 and 1.2 at 4096 with L = 1024. SGLang multiplies scale q.k by it
/// before the soft cap (Grok-2 caps at 30), in float32 from the query's 0-based position in its
/// sequence; posenc folds it into the scale (before the cap too), in double.
///
/// The Mistral-3 family (Ministral-3, Devstral 2, Mistral Large 3) keeps Llama-4's form with
/// its own constants in rope_parameters (llama_4_scaling_beta beta = 0.1, the YaRN
/// original_max_position_embeddings L0 = 16384) and applies it on every layer, after RoPE:
///
///   t(pos) = 1 + beta ln(1 + floor(pos / L0))                (TemperatureForm::kMistral3)
///
/// with the 0-based position where Llama-4 has pos + 1: t = 1 up to 16383, 1 + 0.1 ln 2 from
/// 16384 on (transformers' Ministral3Attention `_get_llama_4_attn_scale` on cache_position, vLLM's
/// `_get_llama_4_scaling` on positions; both float32, posenc double).
///
/// Scaling q is the same as scaling the logits of its row, so it composes with any
/// AttentionParams (the scale, ALiBi, masks): apply it to the NoPE layers' queries before
/// attention() or KvCache::attend — or set AttentionParams::query_temperature, which folds
/// t(pos_q) into the softmax scale inside every attention call (no pass over q, no rounding of
/// the scaled q to a 16-bit type; struct AttentionTemperature lives in attention_types.hpp).

#include <cmath>
#include <cstdint>
#include <string_view>

#include "posenc/attention_types.hpp"
#include "posenc/detail/numeric.hpp"
#include "posenc/error.hpp"
#include "posenc/tensor.hpp"

namespace posenc {

/// \brief t(position), the factor a query at `position` is multiplied by (see the file comment).
/// Throws std::invalid_argument for a position outside [0, 2^53] or invalid parameters.
inline double attention_temperature(std::int64_t position, const AttentionTemperature& t = {}) {
  constexpr std::string_view fn = "attention_temperature";
  detail::validate_temperature(fn, t);
  detail::require(position >= 0 && position <= detail::kMaxAttentionPosition, fn, "position = ",
                  position, " must be in [0, 2^53]");
  return detail::temperature_at(position, t);
}

/// \brief q[b, s, h, :] *= t(positions[b, s]) for every head, in place.
/// q: [batch, seq, heads, head_dim] (BSHD); positions: [batch, seq], each in [0, 2^53].
/// Throws std::invalid_argument (shape, a position, parameters) before writing anything.
template <typename T>
void apply_attention_temperature_inplace(TensorView<T, 4> q, PositionIdsView positions,
                                         const AttentionTemperature& t = {}) {
  static_assert(detail::is_storage_type_v<T>, "posenc: q must be float, double, half or bfloat16");
  constexpr std::string_view fn = "apply_attention_temperature_inplace";
  detail::validate_temperature(fn, t);
  const Eigen::Index batch = q.dimension(0), seq = q.dimension(1);
  const Eigen::Index width = q.dimension(2) * q.dimension(3);
  detail::validate_positions(fn, "positions", positions, batch, seq);
  using C = detail::compute_t<T>;
  for (Eigen::Index b = 0; b < batch; ++b) {
    for (Eigen::Index s = 0; s < seq; ++s) {
      const auto factor = static_cast<C>(detail::temperature_at(positions(b, s), t));
      if (factor == C(1)) continue;  // every position before the first step
      T* row = q.data() + (b * seq + s) * width;
      for (Eigen::Index i = 0; i < width; ++i) {
        row[i] = detail::from_value<T>(detail::to_compute(row[i]) * factor);
      }
    }
  }
}

}  // namespace posenc
