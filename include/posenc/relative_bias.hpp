#pragma once
/// \file posenc/relative_bias.hpp
/// T5's relative attention bias (Raffel et al. 2020, "Exploring the Limits of Transfer Learning
/// with a Unified Text-to-Text Transformer", §2.1; Mesh TensorFlow and HF T5Attention): no
/// position vectors; each head h adds a learned scalar to its scores, chosen by the bucket of
/// the relative position r = pos_k - pos_q:
///
///   bias[h, i, j] = table[bucket(pos_k[j] - pos_q[i]), h]
///
///   bidirectional (encoders): n = num_buckets / 2 buckets per side, r > 0 in [n, 2n)
///   unidirectional (decoder self-attention): every r >= 0 in bucket 0, r < 0 by |r|
///   then with e = n / 2 exact buckets:  |r| < e:  |r|
///                                       else:     e + trunc(ln(|r| / e) / ln(D / e) (n - e)),
///                                                 at most n - 1 (D = max_distance)
///
/// T5 / mT5 / Flan-T5 / the T5 text encoders of diffusion models use 32 buckets and D = 128:
/// per side 8 exact distances, then 8 logarithmic bins up to 128, beyond which every distance
/// shares the last bucket. T5 does not scale q.k by 1/sqrt(d) (its initialisation absorbs it):
/// set AttentionParams::scale = 1. Like ALiBi the bias is not a mask (decoder self-attention is
/// causal as well); the fused kernel (AttentionParams::relative_bias) adds it on the fly from
/// the tokens' positions, so decode (one query at position t against cached keys) reads the
/// row of t, not of the query's index (HF computes it from cache_position for the same reason).
/// The log branch is evaluated in float, as HF's float32 tensors are.

#include <cmath>
#include <cstdint>
#include <string_view>
#include <vector>

#include "posenc/attention_types.hpp"
#include "posenc/detail/numeric.hpp"
#include "posenc/error.hpp"
#include "posenc/tensor.hpp"

namespace posenc {

/// \brief T5's bucket of the relative position pos_k - pos_q (see the file comment).
/// Throws std::invalid_argument for num_buckets / max_distance that leave no exact bucket or
/// put max_distance at or below it, or |relative_position| > 2^53.
inline std::int64_t relative_position_bucket(std::int64_t relative_position,
                                             std::int64_t num_buckets = 32,
                                             std::int64_t max_distance = 128,
                                             bool bidirectional = true) {
  constexpr std::string_view fn = "relative_position_bucket";
  detail::validate_relative_buckets(fn, num_buckets, max_distance, bidirectional);
  detail::require(relative_position >= -detail::kMaxAttentionPosition &&
                      relative_position <= detail::kMaxAttentionPosition,
                  fn, "relative_position = ", relative_position, " must be in [-2^53, 2^53]");
  return detail::relative_bucket(relative_position, num_buckets, max_distance, bidirectional);
}

/// \brief The plan the fused kernel reads (AttentionParams::relative_bias) from a checkpoint's
/// relative_attention_bias weight. table: [num_buckets, heads] (HF's nn.Embedding(num_buckets,
/// n_heads) weight; T5 keeps one per stack in its first layer, UMT5 one per layer).
/// Throws std::invalid_argument (bucket parameters as relative_position_bucket, a non-finite
/// entry, no heads) before returning.
template <typename T>
RelativePositionBias relative_position_bias(ConstTensorView<T, 2> table,
                                            std::int64_t max_distance = 128,
                                            bool bidirectional = true) {
  static_assert(detail::is_storage_type_v<T>, "posenc: table must be float, double, half or bfloat16");
  constexpr std::string_view fn = "relative_position_bias";
  RelativePositionBias r;
  r.num_buckets = table.dimension(0);
  r.max_distance = max_distance;
  r.bidirectional = bidirectional;
  r.heads = table.dimension(1);
  detail::validate_relative_buckets(fn, r.num_buckets, max_distance, bidirectional);
  detail::require(r.heads >= 1, fn, "table heads = ", r.heads, " must be >= 1");
  r.table.resize(static_cast<std::size_t>(r.num_buckets * r.heads));
  for (Eigen::Index k = 0; k < r.num_buckets; ++k) {
    for (Eigen::Index h = 0; h < r.heads; ++h) {
      const double x = detail::to_double(table(k, h));
      detail::require(std::isfinite(x), fn, "table[", k, ", ", h, "] = ", x, " must be finite");
      r.table[static_cast<std::size_t>(k * r.heads + h)] = x;
    }
  }
  // The buckets grow with |r| and end at each side's last; in float32 they can reach it a few
  // distances past max_distance (RelativePositionBias::saturation_distance).
  const auto bucket = [&](std::int64_t rel) {
    return detail::relative_bucket(rel, r.num_buckets, max_distance, bidirectional);
  };
  const std::int64_t far = detail::kMaxAttentionPosition;
  std::int64_t sat = max_distance;
  while (bucket(sat) != bucket(far) || bucket(-sat) != bucket(-far)) ++sat;
  r.saturation_distance = sat;
  const std::int64_t span = 2 * sat + 1;
  r.by_distance.resize(static_cast<std::size_t>(r.heads * span));
  for (std::int64_t rel = -sat; rel <= sat; ++rel) {
    const std::int64_t k = bucket(rel);
    for (Eigen::Index h = 0; h < r.heads; ++h) {
      r.by_distance[static_cast<std::size_t>(h * span + rel + sat)] =
          r.table[static_cast<std::size_t>(k * r.heads + h)];
    }
  }
  return r;
}

/// \brief Materialises the bias for reference and inspection: out[b, h, i, j] =
/// table[bucket(key_positions[b, j] - query_positions[b, i]), h]. query_positions: [batch,
/// q_len]; key_positions: [batch, k_len]; out: [batch, heads, q_len, k_len]. Future keys are not
/// masked here.
/// Throws std::invalid_argument (a plan not built for out's heads, positions outside
/// [0, 2^53], shapes) before writing anything.
template <typename T>
void relative_position_bias_matrix(const RelativePositionBias& bias, PositionIdsView query_positions,
                                   PositionIdsView key_positions, TensorView<T, 4> out) {
  static_assert(detail::is_storage_type_v<T>, "posenc: out must be float, double, half or bfloat16");
  constexpr std::string_view fn = "relative_position_bias_matrix";
  const Eigen::Index batch = out.dimension(0), heads = out.dimension(1), q_len = out.dimension(2),
                     k_len = out.dimension(3);
  detail::validate_relative_bias(fn, bias, heads);
  detail::validate_positions(fn, "query_positions", query_positions, batch, q_len, "q_len");
  detail::validate_positions(fn, "key_positions", key_positions, batch, k_len, "k_len");
  detail::fill_position_bias(query_positions, key_positions, out,
                             [&](Eigen::Index h, std::int64_t pq, std::int64_t pk) {
                               return detail::relative_bias_at(bias, h, pk - pq);
                             });
}

}  // namespace posenc
