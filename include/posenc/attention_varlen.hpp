#pragma once
/// \file posenc/attention_varlen.hpp
/// Attention over a packed batch of sequences of different lengths, without padding
/// (FlashAttention's flash_attn_varlen_func, the "THD" layout continuous-batching engines use):
///
///   q:      [total_q, heads, head_dim]        tokens of every sequence, back to back
///   k:      [total_k, kv_heads, head_dim]
///   v:      [total_k, kv_heads, v_head_dim]   (v_head_dim usually head_dim; MLA: narrower)
///   out:    [total_q, heads, v_head_dim]
///   cu_seqlens_q, cu_seqlens_k: [num_seqs + 1] int64 prefix sums, 0 = cu[0] <= cu[1] <= ...
///
///   q rows:  |-- seq 0 --|- seq 1 -|------ seq 2 ------|      cu_seqlens_q = {0, 3, 5, 11}
///   k rows:  |---- seq 0 ----|- seq 1 -|---- seq 2 ----|      cu_seqlens_k = {0, 5, 7, 12}
///
/// Sequence s is attention() with batch 1 over its own rows: its queries
/// [cu_q[s], cu_q[s + 1]) see only its keys [cu_k[s], cu_k[s + 1]), with the causal mask
/// aligned bottom-right inside the sequence (query i sits at slot k_len_s - q_len_s + i: a
/// chunk of new tokens after its cached ones), sliding windows and ALiBi distances counted in
/// the sequence's own slots. A sequence with no query is skipped; one with queries but no key
/// gives zero rows (lse -inf, or the sink logit with sink_logits, as attention()).
///
/// VarlenMetadata adds per-token positions ([total_q], [total_k]: ALiBi, chunks and query
/// temperatures from them, not from the slots) and per-sequence draft-tree masks (speculative
/// decoding across a continuous batch, FlashInfer's custom_mask with qo_indptr): sequence s's
/// [q_len_s, q_len_s] block, the blocks back to back.

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <string_view>
#include <tuple>

#include "posenc/attention.hpp"
#include "posenc/attention_types.hpp"
#include "posenc/detail/numeric.hpp"
#include "posenc/error.hpp"
#include "posenc/tensor.hpp"

namespace posenc {
namespace detail {

/// Prefix sums of sequence lengths over a packed tensor of `total` rows: cu[0] = 0,
/// non-decreasing, cu[last] = total.
inline void validate_cu_seqlens(std::string_view fn, std::string_view name,
                                ConstTensorView<std::int64_t, 1> cu, Eigen::Index total) {
  const Eigen::Index n = cu.dimension(0);
  require(n >= 2 && cu(0) == 0 && cu(n - 1) == total, fn, name, " must run from 0 to ", total,
          " (its tensor's rows) in at least 2 entries; it runs from ", n > 0 ? cu(0) : 0, " to ",
          n > 0 ? cu(n - 1) : 0);
  for (Eigen::Index s = 0; s + 1 < n; ++s) {
    require(cu(s) <= cu(s + 1), fn, name, "[", s + 1, "] = ", cu(s + 1), " is below ", name,
            "[", s, "] = ", cu(s), ": lengths must be >= 0");
  }
}

/// out must be [total_q, heads, v_head_dim] (q's rows and heads), and lse (if any)
/// [total_q, heads].
template <typename Q, typename O, typename L>
void validate_packed_out(std::string_view fn, const Q& q, const O& out,
                         const std::optional<L>& lse, Eigen::Index v_head_dim) {
  require(out.dimension(0) == q.dimension(0) && out.dimension(1) == q.dimension(1) &&
              out.dimension(2) == v_head_dim,
          fn, "out shape [", out.dimension(0), ", ", out.dimension(1), ", ", out.dimension(2),
          "] must be [total_q, heads, v_head_dim] = [", q.dimension(0), ", ", q.dimension(1),
          ", ", v_head_dim, "]");
  if (lse) {
    require(lse->dimension(0) == q.dimension(0) && lse->dimension(1) == q.dimension(1), fn,
            "lse shape [", lse->dimension(0), ", ", lse->dimension(1),
            "] must be [total_q, heads] = [", q.dimension(0), ", ", q.dimension(1), "]");
  }
}

/// The checks every sequence's attention() call makes that need only the head counts and
/// widths: run once up front, they also reject a bad call whose batch has no query.
inline void validate_packed_heads(std::string_view fn, Eigen::Index heads, Eigen::Index d,
                                  Eigen::Index kv_heads, Eigen::Index k_head_dim,
                                  const AttentionParams& params) {
  require(d > 0 && k_head_dim == d, fn, "q head_dim = ", d, " and k head_dim = ", k_head_dim,
          " must be equal and > 0");
  validate_attention_params(fn, params, heads, kv_heads);
}

}  // namespace detail

/// Per-token positions and draft-tree masks of a packed batch (every field optional; views over
/// the caller's memory). Positions default to each sequence's own slots (query i of sequence s
/// at k_len_s - q_len_s + i, key j at j); given, ALiBi, chunked attention and query
/// temperatures use them (as AttentionMetadata's in attention()), e.g. after left-trimmed
/// prefixes or for draft tokens at their tree depth.
struct VarlenMetadata {
  OptionalView<ConstTensorView<std::int64_t, 1>> query_positions;  ///< [total_q]
  OptionalView<ConstTensorView<std::int64_t, 1>> key_positions;    ///< [total_k]
  /// Speculative decoding: sequence s's [q_len_s, q_len_s] tree mask (AttentionMetadata::
  /// tree_mask; its queries are its last q_len_s keys), row-major, the sequences' blocks back
  /// to back: [sum_s q_len_s^2].
  OptionalView<ConstTensorView<std::uint8_t, 1>> tree_masks;
};

namespace detail {

template <typename T>
void run_attention_varlen(std::string_view fn, ConstTensorView<T, 3> q, ConstTensorView<T, 3> k,
                          ConstTensorView<T, 3> v, TensorView<T, 3> out,
                          ConstTensorView<std::int64_t, 1> cu_seqlens_q,
                          ConstTensorView<std::int64_t, 1> cu_seqlens_k,
                          const AttentionParams& params, const VarlenMetadata& meta,
                          AttentionWorkspace* workspace,
                          std::optional<TensorView<lse_t<T>, 2>> lse) {
  const Eigen::Index total_q = q.dimension(0), heads = q.dimension(1), d = q.dimension(2);
  const Eigen::Index total_k = k.dimension(0), kv_heads = k.dimension(1), dv = v.dimension(2);
  require_attention_views(fn, q, k, v, out);
  require_view(fn, "cu_seqlens_q", cu_seqlens_q);
  require_view(fn, "cu_seqlens_k", cu_seqlens_k);
  if (lse) require_view(fn, "lse", *lse);
  validate_packed_out(fn, q, out, lse, dv);
  require(v.dimension(0) == total_k && v.dimension(1) == kv_heads && dv > 0, fn, "v shape [",
          v.dimension(0), ", ", v.dimension(1), ", ", dv,
          "] must be [total_k, kv_heads, v_head_dim > 0] = [", total_k, ", ", kv_heads,
          ", v_head_dim]");
  const Eigen::Index n = cu_seqlens_q.dimension(0);
  require(n >= 2 && cu_seqlens_k.dimension(0) == n, fn, "cu_seqlens_q and cu_seqlens_k have ", n,
          " and ", cu_seqlens_k.dimension(0), " entries; both must have num_seqs + 1 >= 2");
  validate_cu_seqlens(fn, "cu_seqlens_q", cu_seqlens_q, total_q);
  validate_cu_seqlens(fn, "cu_seqlens_k", cu_seqlens_k, total_k);
  validate_packed_heads(fn, heads, d, kv_heads, k.dimension(2), params);
  if (meta.query_positions) {
    require(meta.query_positions->dimension(0) == total_q, fn, "query_positions has ",
            meta.query_positions->dimension(0), " entries; it must have total_q = ", total_q);
  }
  if (meta.key_positions) {
    require(meta.key_positions->dimension(0) == total_k, fn, "key_positions has ",
            meta.key_positions->dimension(0), " entries; it must have total_k = ", total_k);
  }
  // Per-sequence views; every call is validated before the first one writes.
  struct Seq {
    Eigen::Index q0, q_len, k0, k_len, mask0;
  };
  // sum of q_len_s^2; with tree masks it counts bytes of one, so it fits an Index (a 2^32-row
  // q made 2^64, wrapped to a length a short mask passed).
  std::int64_t mask_total = 0;
  constexpr std::int64_t kMaxIndex = std::numeric_limits<std::int64_t>::max();
  for (Eigen::Index s = 0; meta.tree_masks && s + 1 < n; ++s) {
    const std::int64_t ql = cu_seqlens_q(s + 1) - cu_seqlens_q(s);
    require(ql <= kMaxIndex / std::max<std::int64_t>(ql, 1) && ql * ql <= kMaxIndex - mask_total,
            fn, "tree_masks: sequence ", s, "'s ", ql, " queries need ", ql, "^2 mask entries, ",
            "more than an Index counts");
    mask_total += ql * ql;
  }
  if (meta.tree_masks) {
    require(meta.tree_masks->dimension(0) == mask_total, fn, "tree_masks has ",
            meta.tree_masks->dimension(0),
            " entries; it must have sum over sequences of q_len^2 = ", mask_total);
  }
  // Sequence s; its tree-mask block starts at mask0 (the blocks of the sequences before it).
  const auto seq = [&](Eigen::Index s, Eigen::Index mask0) {
    return Seq{cu_seqlens_q(s), cu_seqlens_q(s + 1) - cu_seqlens_q(s), cu_seqlens_k(s),
               cu_seqlens_k(s + 1) - cu_seqlens_k(s), mask0};
  };
  const auto views = [&](const Seq& x) {
    return std::tuple{ConstTensorView<T, 4>(q.data() + x.q0 * heads * d, 1, x.q_len, heads, d),
                      ConstTensorView<T, 4>(k.data() + x.k0 * kv_heads * d, 1, x.k_len, kv_heads,
                                            k.dimension(2)),
                      ConstTensorView<T, 4>(v.data() + x.k0 * kv_heads * dv, 1, x.k_len, kv_heads,
                                            dv),
                      TensorView<T, 4>(out.data() + x.q0 * heads * dv, 1, x.q_len, heads, dv)};
  };
  // Sequence x's slice of the packed metadata (key positions only when it has keys).
  const auto metadata = [&](const Seq& x) {
    AttentionMetadata m;
    if (meta.query_positions) m.query_positions.emplace(meta.query_positions->data() + x.q0, 1, x.q_len);
    if (meta.key_positions && x.k_len > 0) {
      m.key_positions.emplace(meta.key_positions->data() + x.k0, 1, x.k_len);
    }
    if (meta.tree_masks) m.tree_mask.emplace(meta.tree_masks->data() + x.mask0, 1, x.q_len, x.q_len);
    return m;
  };
  for (Eigen::Index s = 0, mask0 = 0; s + 1 < n; ++s) {
    const Seq x = seq(s, mask0);
    if (meta.tree_masks) mask0 += x.q_len * x.q_len;  // bounded by mask_total
    if (x.q_len == 0) continue;
    require(!meta.tree_masks || x.k_len >= x.q_len, fn, "sequence ", s, " has ", x.q_len,
            " queries and ", x.k_len, " keys: with tree_masks its queries are its last keys");
    // A sequence without keys is checked as one with q_len keys: the same shapes otherwise,
    // and default query positions from 0 (its rows are 0 and read no position).
    const auto [qs, ks, vs, os] =
        views(Seq{x.q0, x.q_len, 0, x.k_len > 0 ? x.k_len : x.q_len, x.mask0});
    validate_attention(fn, qs, ks, vs, os, params, metadata(x));
  }

  AttentionWorkspace local;
  AttentionWorkspace& ws = workspace ? *workspace : local;
  for (Eigen::Index s = 0, mask0 = 0; s + 1 < n; ++s) {
    const Seq x = seq(s, mask0);
    if (meta.tree_masks) mask0 += x.q_len * x.q_len;  // bounded by mask_total
    if (x.q_len == 0) continue;
    lse_t<T>* row_lse = lse ? lse->data() + x.q0 * heads : nullptr;
    const auto [qs, ks, vs, os] = views(x);
    if (x.k_len == 0) {
      std::fill(os.data(), os.data() + os.size(), from_value<T>(lse_t<T>(0)));
      // As attention() for a row that sees no key: the sink's term alone, else nothing.
      const auto& sinks = params.sink_logits;
      for (Eigen::Index i = 0; row_lse && i < x.q_len * heads; ++i) {
        const auto h = static_cast<std::size_t>(i % heads);
        row_lse[i] = sinks.empty() ? -std::numeric_limits<lse_t<T>>::infinity()
                                   : static_cast<lse_t<T>>(sinks[h]);
      }
      continue;
    }
    run_attention_views(qs, ks, vs, os, params, metadata(x), &ws, row_lse);
  }
}

}  // namespace detail

/// \brief Fused attention over a packed variable-length batch (see the file comment).
/// lse (optional): [total_q, heads], each row's log-sum-exp as attention(..., lse, ...).
/// Sequences run one after another, each on params.num_threads threads.
/// Throws std::invalid_argument, before writing anything, for bad shapes, cu_seqlens that do
/// not start at 0, decrease, or end elsewhere than at total_q / total_k, and every parameter
/// error attention() reports.
template <typename T>
void attention_varlen(ConstTensorView<T, 3> q, ConstTensorView<T, 3> k, ConstTensorView<T, 3> v,
                      TensorView<T, 3> out, ConstTensorView<std::int64_t, 1> cu_seqlens_q,
                      ConstTensorView<std::int64_t, 1> cu_seqlens_k,
                      const AttentionParams& params = {}, AttentionWorkspace* workspace = nullptr,
                      std::optional<TensorView<lse_t<T>, 2>> lse = std::nullopt) {
  detail::run_attention_varlen<T>("attention_varlen", q, k, v, out, cu_seqlens_q, cu_seqlens_k,
                                  params, VarlenMetadata{}, workspace, lse);
}

/// \brief attention_varlen with per-token positions and / or draft-tree masks (VarlenMetadata).
/// Throws std::invalid_argument as attention_varlen does, and for metadata of the wrong length,
/// positions outside [0, 2^53], a tree mask entry above its diagonal, or a sequence with
/// tree_masks and fewer keys than queries, before writing anything.
template <typename T>
void attention_varlen(ConstTensorView<T, 3> q, ConstTensorView<T, 3> k, ConstTensorView<T, 3> v,
                      TensorView<T, 3> out, ConstTensorView<std::int64_t, 1> cu_seqlens_q,
                      ConstTensorView<std::int64_t, 1> cu_seqlens_k, const AttentionParams& params,
                      const VarlenMetadata& metadata, AttentionWorkspace* workspace = nullptr,
                      std::optional<TensorView<lse_t<T>, 2>> lse = std::nullopt) {
  detail::run_attention_varlen<T>("attention_varlen", q, k, v, out, cu_seqlens_q, cu_seqlens_k,
                                  params, metadata, workspace, lse);
}

}  // namespace posenc
