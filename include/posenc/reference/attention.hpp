#pragma once
/// \file posenc/reference/attention.hpp
/// Attention the textbook way, in double: materialise S = scale Q K^T with an Eigen matrix
/// product, add the biases (ALiBi, T5's, the caller's) and the mask, softmax each row
/// (max-subtracted; an attention sink adds its term to the denominator), then O = P V.
/// O(q_len * k_len) memory per (batch, head): for checking the fused kernel and for inspecting
/// the weights, not for long sequences.

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string_view>
#include <vector>

#include <Eigen/Core>

#include "posenc/alibi.hpp"
#include "posenc/attention_types.hpp"
#include "posenc/detail/numeric.hpp"
#include "posenc/tensor.hpp"

namespace posenc::reference {

/// \brief out = softmax(scale Q K^T + bias + mask) V with every score materialised (double).
/// q: [batch, q_len, heads, head_dim]; k: [batch, k_len, kv_heads, head_dim];
/// v: [batch, k_len, kv_heads, v_head_dim]; out: [batch, q_len, heads, v_head_dim];
/// weights (optional): [batch, heads, q_len, k_len], the softmax probabilities (exactly 0 where
/// masked; an all-zero row when no key is visible).
/// Non-finite input as softmax(S) V defines it: a NaN or +inf logit among the keys a row sees
/// makes its weights and output NaN; a key the row cannot see never reaches it, whatever its
/// K and V rows hold.
/// Same conventions, validation and exceptions as posenc::attention.
template <typename T>
void attention(ConstTensorView<T, 4> q, ConstTensorView<T, 4> k, ConstTensorView<T, 4> v,
               TensorView<T, 4> out, const AttentionParams& params = {},
               const AttentionMetadata& metadata = {},
               std::optional<TensorView<double, 4>> weights = std::nullopt) {
  constexpr std::string_view fn = "reference::attention";
  detail::validate_attention(fn, q, k, v, out, params, metadata);
  const Eigen::Index batch = q.dimension(0), q_len = q.dimension(1), heads = q.dimension(2),
                     d = q.dimension(3), k_len = k.dimension(1), kv_heads = k.dimension(2),
                     dv = v.dimension(3);
  if (weights) {
    detail::require(weights->dimension(0) == batch && weights->dimension(1) == heads &&
                        weights->dimension(2) == q_len && weights->dimension(3) == k_len,
                    fn, "weights shape [", weights->dimension(0), ", ", weights->dimension(1),
                    ", ", weights->dimension(2), ", ", weights->dimension(3),
                    "] must be [batch, heads, q_len, k_len] = [", batch, ", ", heads, ", ",
                    q_len, ", ", k_len, "]");
  }
  const Eigen::Index group = heads / kv_heads;
  const double scale = params.scale ? *params.scale : 1.0 / std::sqrt(static_cast<double>(d));
  const bool causal = params.mask == MaskMode::kCausal;
  const Eigen::Index offset = k_len - q_len;
  const double neg_inf = -std::numeric_limits<double>::infinity();
  const auto query_position = [&](Eigen::Index b, Eigen::Index i) -> std::int64_t {
    return metadata.query_positions ? (*metadata.query_positions)(b, i)
                                    : static_cast<std::int64_t>(offset + i);
  };

  // The contractions are 2-D, so they are Eigen matrix products (GEMM). (The Tensor module's
  // contract() computes the same, but GCC 12 reports a false -Warray-bounds inside its
  // evaluator under -O2 with sanitizers.)
  using Matrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  Matrix qh(q_len, d), kh(k_len, d), vh(k_len, dv);
  // visible_at[i * k_len + j]: query i sees key j (P V sums over these keys only).
  std::vector<char> visible_at(static_cast<std::size_t>(q_len * k_len));
  // Draft tokens query i of sequence b sees under the tree mask (its depth).
  const auto tree_depth = [&](Eigen::Index b, Eigen::Index i) {
    Eigen::Index depth = 0;
    for (Eigen::Index t = 0; t <= i; ++t) depth += (*metadata.tree_mask)(b, i, t) != 0;
    return depth;
  };
  for (Eigen::Index b = 0; b < batch; ++b) {
    for (Eigen::Index h = 0; h < heads; ++h) {
      const Eigen::Index g = h / group;
      for (Eigen::Index i = 0; i < q_len; ++i)
        for (Eigen::Index c = 0; c < d; ++c) qh(i, c) = detail::to_double(q(b, i, h, c));
      for (Eigen::Index j = 0; j < k_len; ++j) {
        for (Eigen::Index c = 0; c < d; ++c) kh(j, c) = detail::to_double(k(b, j, g, c));
        for (Eigen::Index c = 0; c < dv; ++c) vh(j, c) = detail::to_double(v(b, j, g, c));
      }
      // S[i, j] = scale * sum_c Q[i, c] K[j, c]
      Matrix s = scale * (qh * kh.transpose());
      if (params.query_temperature) {  // Llama-4's NoPE layers: row i times t(pos_q)
        for (Eigen::Index i = 0; i < q_len; ++i) {
          s.row(i) *= detail::temperature_at(query_position(b, i), *params.query_temperature);
        }
      }
      if (params.logit_softcap > 0.0) {
        const double c = params.logit_softcap;
        s = s.unaryExpr([c](double x) { return c * std::tanh(x / c); });
      }
      for (Eigen::Index i = 0; i < q_len; ++i) {
        const std::int64_t pq = query_position(b, i);
        // An attention sink is one more softmax entry, with no value row.
        const bool sink = !params.sink_logits.empty();
        const double sink_logit = sink ? params.sink_logits[static_cast<std::size_t>(h)] : 0.0;
        double row_max = sink ? sink_logit : neg_inf;
        for (Eigen::Index j = 0; j < k_len; ++j) {
          const std::int64_t pk =
              metadata.key_positions ? (*metadata.key_positions)(b, j) : static_cast<std::int64_t>(j);
          bool visible = !causal || j <= i + offset;
          if (params.sliding_window > 0) {
            Eigen::Index ahead = i + offset - j;  // a - j
            if (metadata.tree_mask) {
              // The window spans the query's own sequence: the prefix, then the d_i draft
              // tokens it sees (d_i <= W, validated). It cuts the prefix to its last W - d_i
              // keys; the draft tokens are the mask's alone (a token whose own row is empty
              // has no depth that places it on the path).
              ahead = j < offset ? offset + tree_depth(b, i) - 1 - j : 0;
            }
            visible = visible && ahead < params.sliding_window && -ahead < params.sliding_window;
          }
          if (params.attention_chunk_size > 0) {
            visible = visible && pq / params.attention_chunk_size == pk / params.attention_chunk_size;
          }
          if (metadata.key_lengths && j >= (*metadata.key_lengths)(b)) visible = false;
          if (metadata.key_mask && (*metadata.key_mask)(b, j) == 0) visible = false;
          if (metadata.tree_mask && j >= k_len - q_len &&
              (*metadata.tree_mask)(b, i, j - (k_len - q_len)) == 0) {
            visible = false;
          }
          if (!params.alibi_slopes.empty()) {
            s(i, j) += detail::alibi_value(params.alibi_slopes[static_cast<std::size_t>(h)], pq,
                                           pk, params.mask);
          }
          if (params.relative_bias) {
            // T5: the table at the bucket of pos_k - pos_q, from the definition (the kernel
            // reads the plan's clamped rows instead).
            const auto& r = *params.relative_bias;
            const std::int64_t bucket =
                detail::relative_bucket(pk - pq, r.num_buckets, r.max_distance, r.bidirectional);
            s(i, j) += r.table[static_cast<std::size_t>(bucket * heads + h)];
          }
          if (metadata.attention_bias) {
            const auto& bias = *metadata.attention_bias;  // [batch or 1, heads or 1, q, k]
            s(i, j) += static_cast<double>(
                bias(bias.dimension(0) == 1 ? 0 : b, bias.dimension(1) == 1 ? 0 : h, i, j));
          }
          visible_at[static_cast<std::size_t>(i * k_len + j)] = visible;
          if (!visible) s(i, j) = neg_inf;
          row_max = std::max(row_max, s(i, j));
        }
        double sum = sink ? std::exp(sink_logit - row_max) : 0.0;
        for (Eigen::Index j = 0; j < k_len; ++j) {
          s(i, j) = s(i, j) == neg_inf ? 0.0 : std::exp(s(i, j) - row_max);
          sum += s(i, j);
        }
        // sum = 0: no key visible (or only -inf logits): zeros. NaN stays NaN.
        for (Eigen::Index j = 0; j < k_len; ++j) s(i, j) = sum == 0.0 ? 0.0 : s(i, j) / sum;
      }
      if (weights) {
        for (Eigen::Index i = 0; i < q_len; ++i)
          for (Eigen::Index j = 0; j < k_len; ++j) (*weights)(b, h, i, j) = s(i, j);
      }
      // O[i, c] = sum_j P[i, j] V[j, c] over the keys row i sees: the product takes the rows
      // of V that are finite, and a non-finite one is added to the rows that see its key
      // (0 * NaN would reach the others).
      std::vector<Eigen::Index> nonfinite;
      for (Eigen::Index j = 0; j < k_len; ++j) {
        if (!vh.row(j).allFinite()) {
          nonfinite.push_back(j);
          vh.row(j).setZero();
        }
      }
      Matrix o = s * vh;
      for (const Eigen::Index j : nonfinite) {
        for (Eigen::Index c = 0; c < dv; ++c) vh(j, c) = detail::to_double(v(b, j, g, c));
        for (Eigen::Index i = 0; i < q_len; ++i) {
          if (visible_at[static_cast<std::size_t>(i * k_len + j)]) o.row(i) += s(i, j) * vh.row(j);
        }
      }
      for (Eigen::Index i = 0; i < q_len; ++i)
        for (Eigen::Index c = 0; c < dv; ++c) out(b, i, h, c) = detail::from_value<T>(o(i, c));
    }
  }
}

}  // namespace posenc::reference
