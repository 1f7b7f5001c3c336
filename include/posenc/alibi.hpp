#pragma once
/// \file posenc/alibi.hpp
/// ALiBi (Press, Smith, Lewis 2022, "Train Short, Test Long"): no position vectors; each head h
/// adds a linear distance penalty to its attention scores,
///
///   causal:         bias[h, i, j] = -m_h * (pos_q[i] - pos_k[j])
///   bidirectional:  bias[h, i, j] = -m_h * |pos_q[i] - pos_k[j]|
///
/// from the tokens' absolute positions. The bias is not a mask: in causal attention future keys
/// get a positive bias and must still be masked (seed 000 §5.3). The fused attention kernel
/// (attention.hpp) adds the bias on the fly; alibi_bias materialises it for reference and
/// inspection.
///
/// Slopes (paper §3, reference `get_slopes`; ggml soft_max `max_bias`; MPT `alibi_bias_max`),
/// n = the largest power of two <= H, B = max_bias (the paper's 8):
///
///   h <  n:  m_h = 2^(-B (h + 1) / n)              geometric, ratio 2^(-B/n)
///   h >= n:  m_h = 2^(-B (2 (h - n) + 1) / (2 n))  every other slope of the 2n-head sequence
///
/// For H = 8: 1/2, 1/4, ..., 1/256. For H = 12: those eight, then 2^-0.5, 2^-1.5, 2^-2.5, 2^-3.5.

#include <cmath>
#include <cstdint>
#include <string_view>
#include <vector>

#include "posenc/attention_types.hpp"
#include "posenc/detail/numeric.hpp"
#include "posenc/error.hpp"
#include "posenc/tensor.hpp"

namespace posenc {

/// Largest head count alibi_slopes plans for (the config loaders' limit too): a count past any
/// model is a corrupt field, better reported than allocated.
inline constexpr Eigen::Index kMaxAlibiHeads = Eigen::Index{1} << 20;

/// \brief The ALiBi slope of every head, in double (each an exact exp2 of its exponent).
/// num_heads in [1, kMaxAlibiHeads]; max_bias finite and > 0 (8 = the paper).
/// Throws std::invalid_argument otherwise.
inline std::vector<double> alibi_slopes(Eigen::Index num_heads, double max_bias = 8.0) {
  constexpr std::string_view fn = "alibi_slopes";
  detail::require(num_heads > 0 && num_heads <= kMaxAlibiHeads, fn, "num_heads = ", num_heads,
                  " must be in [1, 2^20]");
  detail::require(std::isfinite(max_bias) && max_bias > 0.0, fn, "max_bias = ", max_bias,
                  " must be finite and > 0");
  Eigen::Index n = 1;
  while (n * 2 <= num_heads) n *= 2;
  std::vector<double> slopes(static_cast<std::size_t>(num_heads));
  const double nd = static_cast<double>(n);
  for (Eigen::Index h = 0; h < num_heads; ++h) {
    // One exp2 per slope rather than ggml's running product m0^(h+1): no error build-up.
    const double exponent =
        h < n ? -max_bias * static_cast<double>(h + 1) / nd
              : -max_bias * static_cast<double>(2 * (h - n) + 1) / (2.0 * nd);
    slopes[static_cast<std::size_t>(h)] = std::exp2(exponent);
  }
  return slopes;
}

namespace detail {

/// -m (pq - pk) or -m |pq - pk|, the difference taken exactly in int64 (positions <= 2^53),
/// written so the diagonal is +0, not -0.
inline double alibi_value(double slope, std::int64_t pq, std::int64_t pk, MaskMode mode) {
  const double diff = static_cast<double>(pk - pq);
  return mode == MaskMode::kCausal ? slope * diff : 0.0 - slope * std::abs(diff);
}

inline void validate_alibi_bias(std::string_view fn, const std::vector<double>& slopes,
                                Eigen::Index heads, MaskMode mode) {
  require(heads > 0, fn, "out heads = ", heads, " must be > 0");
  validate_slopes(fn, slopes, heads);
  require(mode == MaskMode::kCausal || mode == MaskMode::kBidirectional, fn, "mode = ",
          static_cast<int>(mode), " is not a MaskMode");
}

}  // namespace detail

/// \brief Materialises the ALiBi bias of one sequence.
/// slopes: [heads]; query_positions: [q_len]; key_positions: [k_len];
/// out: [heads, q_len, k_len], out[h, i, j] = -slopes[h] * (pq[i] - pk[j]) (kCausal) or
/// -slopes[h] * |pq[i] - pk[j]| (kBidirectional). Future keys are not masked here.
/// Decode: query_positions = {t}, key_positions = {0..t} gives the row -m (t - j), not the
/// all-zero row a bias built from the query length would give (keras-hub #2861).
/// Throws std::invalid_argument (slope count != heads, negative/non-finite slope, shape
/// mismatch, positions outside [0, 2^53]) before writing anything.
template <typename T>
void alibi_bias(const std::vector<double>& slopes, ConstTensorView<std::int64_t, 1> query_positions,
                ConstTensorView<std::int64_t, 1> key_positions, MaskMode mode,
                TensorView<T, 3> out) {
  static_assert(detail::is_storage_type_v<T>, "posenc: storage type must be float, double, "
                                              "Eigen::half or Eigen::bfloat16");
  constexpr std::string_view fn = "alibi_bias";
  const Eigen::Index heads = out.dimension(0), q_len = out.dimension(1), k_len = out.dimension(2);
  detail::validate_alibi_bias(fn, slopes, heads, mode);
  detail::require(query_positions.dimension(0) == q_len && key_positions.dimension(0) == k_len,
                  fn, "positions [", query_positions.dimension(0), "] x [",
                  key_positions.dimension(0), "] must match out [q_len, k_len] = [", q_len, ", ",
                  k_len, "]");
  detail::validate_positions(fn, "query_positions",
                             PositionIdsView(query_positions.data(), 1, q_len), 1, q_len, "q_len");
  detail::validate_positions(fn, "key_positions", PositionIdsView(key_positions.data(), 1, k_len),
                             1, k_len, "k_len");
  for (Eigen::Index h = 0; h < heads; ++h) {
    for (Eigen::Index i = 0; i < q_len; ++i) {
      for (Eigen::Index j = 0; j < k_len; ++j) {
        out(h, i, j) = detail::from_value<T>(detail::alibi_value(
            slopes[static_cast<std::size_t>(h)], query_positions(i), key_positions(j), mode));
      }
    }
  }
}

/// \brief Batched alibi_bias: every sequence with its own positions (left padding, packing).
/// slopes: [heads]; query_positions: [batch, q_len]; key_positions: [batch, k_len];
/// out: [batch, heads, q_len, k_len].
template <typename T>
void alibi_bias(const std::vector<double>& slopes, PositionIdsView query_positions,
                PositionIdsView key_positions, MaskMode mode, TensorView<T, 4> out) {
  static_assert(detail::is_storage_type_v<T>, "posenc: storage type must be float, double, "
                                              "Eigen::half or Eigen::bfloat16");
  constexpr std::string_view fn = "alibi_bias";
  const Eigen::Index batch = out.dimension(0), heads = out.dimension(1), q_len = out.dimension(2),
                     k_len = out.dimension(3);
  detail::validate_alibi_bias(fn, slopes, heads, mode);
  detail::validate_positions(fn, "query_positions", query_positions, batch, q_len, "q_len");
  detail::validate_positions(fn, "key_positions", key_positions, batch, k_len, "k_len");
  detail::fill_position_bias(query_positions, key_positions, out,
                             [&](Eigen::Index h, std::int64_t pq, std::int64_t pk) {
                               return detail::alibi_value(slopes[static_cast<std::size_t>(h)], pq,
                                                          pk, mode);
                             });
}

}  // namespace posenc
