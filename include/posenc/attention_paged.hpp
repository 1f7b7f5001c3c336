#pragma once
/// \file posenc/attention_paged.hpp
/// Attention over a paged KV cache (vLLM's PagedAttention, FlashInfer's paged_kv): K and V live
/// in a pool of fixed-size pages, and each sequence lists its pages in a page table, so
/// sequences grow a page at a time, free their pages when done and can share a prefix's pages.
///
///   k_pages, v_pages: [num_pages, page_size, kv_heads, head_dim] (v_pages: v_head_dim, usually
///                     head_dim)
///   page_table:       [batch, max_pages] int32; key j of sequence b is row j % page_size of
///                     page page_table[b, j / page_size] (vLLM's block_tables)
///   seq_lens:         [batch] int64 keys per sequence; entries past its pages are not read
///
///   page_size = 4     pool:  p0 [a0 a1 a2 a3]  p1 [b0 b1 .. ..]  p2 [a4 a5 .. ..]  p3 [b2 ..]
///                     sequence a: page_table {0, 2}, seq_len 6
///                     sequence b: page_table {1, ...}, seq_len 2
///
/// Queries: q [batch, q_len, heads, head_dim], out [.., v_head_dim], the sequences' last q_len tokens (decode:
/// q_len = 1; speculative decoding checks q_len draft tokens at once). Query i of sequence b
/// sits at slot seq_lens[b] - q_len + i: the causal mask aligns bottom-right per sequence,
/// sliding windows and ALiBi distances count that sequence's slots (key j at position j).
/// RoPE: store keys rotated (PagedKvCache does) and rotate q before the call.
///
/// attention_paged_varlen takes the queries packed instead (q [total_q, heads, head_dim] with
/// cu_seqlens_q, as attention_varlen): a continuous-batching step that mixes prefill chunks and
/// decode tokens of different sequences in one call.
///
/// The kernel is attention()'s: a key tile never crosses a page, so a page is read as one run
/// of rows (pages of 16 or more keys keep the decode loop's blocks full; see the benchmark
/// BM_Attention_PagedDecode for the cost against a contiguous cache).

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <string_view>
#include <tuple>

#include "posenc/attention.hpp"
#include "posenc/attention_types.hpp"
#include "posenc/attention_varlen.hpp"
#include "posenc/detail/attention_kernel.hpp"
#include "posenc/detail/numeric.hpp"
#include "posenc/error.hpp"
#include "posenc/tensor.hpp"

namespace posenc {
namespace detail {

/// Checks the pool, page table and lengths of a paged call (see attention_paged).
template <typename TKV>
void validate_paged_kv(std::string_view fn, Eigen::Index batch, ConstTensorView<TKV, 4> k_pages,
                       ConstTensorView<TKV, 4> v_pages,
                       ConstTensorView<std::int32_t, 2> page_table,
                       ConstTensorView<std::int64_t, 1> seq_lens) {
  const Eigen::Index num_pages = k_pages.dimension(0), page_size = k_pages.dimension(1);
  require_view(fn, "k_pages", k_pages);
  require_view(fn, "v_pages", v_pages);
  require_view(fn, "page_table", page_table);
  require_view(fn, "seq_lens", seq_lens);
  require(num_pages > 0 && page_size > 0 && k_pages.dimension(2) > 0 && k_pages.dimension(3) > 0,
          fn, "k_pages shape [", num_pages, ", ", page_size, ", ", k_pages.dimension(2), ", ",
          k_pages.dimension(3), "] must have no zero dimension");
  require(v_pages.dimension(0) == num_pages && v_pages.dimension(1) == page_size &&
              v_pages.dimension(2) == k_pages.dimension(2) && v_pages.dimension(3) > 0,
          fn, "v_pages shape [", v_pages.dimension(0), ", ", v_pages.dimension(1), ", ",
          v_pages.dimension(2), ", ", v_pages.dimension(3),
          "] must be [num_pages, page_size, kv_heads, v_head_dim > 0] = [", num_pages, ", ",
          page_size, ", ", k_pages.dimension(2), ", v_head_dim]");
  require(page_table.dimension(0) == batch && seq_lens.dimension(0) == batch, fn,
          "page_table has ", page_table.dimension(0), " rows and seq_lens ",
          seq_lens.dimension(0), " entries; both must have batch = ", batch);
  const Eigen::Index max_pages = page_table.dimension(1);
  for (Eigen::Index b = 0; b < batch; ++b) {
    const std::int64_t len = seq_lens(b);
    // ceil(len / page_size) pages, formed without len + page_size - 1 or max_pages *
    // page_size (both overflowed for addressable views: a negative bound checked no page).
    const std::int64_t pages = len / page_size + (len % page_size != 0);
    require(len >= 0 && pages <= max_pages, fn, "seq_lens[", b, "] = ", len,
            " must be in [0, page_table columns * page_size = ", max_pages, " * ", page_size,
            "]");
    for (Eigen::Index i = 0; i < pages; ++i) {
      const std::int32_t page = page_table(b, i);
      require(page >= 0 && page < num_pages, fn, "page_table[", b, ", ", i, "] = ", page,
              " must be in [0, num_pages = ", num_pages, ")");
    }
  }
}

/// The longest sequence's key count (0 for an empty batch).
inline Eigen::Index longest_sequence(ConstTensorView<std::int64_t, 1> seq_lens) {
  Eigen::Index longest = 0;
  for (Eigen::Index b = 0; b < seq_lens.dimension(0); ++b) {
    longest = std::max(longest, static_cast<Eigen::Index>(seq_lens(b)));
  }
  return longest;
}

/// The key count the shared checks (validate_attention) see for paged sequences of at most
/// `longest` keys: only their dimensions are read. A batch without keys gives zero rows
/// whatever q_len is, so it is checked as q_len keys there (1 at least): its default query
/// positions would otherwise look negative to the bidirectional chunk / temperature check,
/// which require_paged_query_slots makes per sequence instead.
inline Eigen::Index paged_checked_keys(Eigen::Index longest, Eigen::Index q_len) {
  return longest > 0 ? longest : std::max<Eigen::Index>(1, q_len);
}

/// Query i of sequence b sits at slot seq_lens[b] - q_len + i, below 0 for a sequence with
/// fewer keys than queries. validate_attention sees the longest sequence only; bidirectional
/// chunks and temperatures read every query's position, so each sequence with keys is checked
/// (one without keys gives zero rows and reads none).
inline void require_paged_query_slots(std::string_view fn, Eigen::Index q_len,
                                      ConstTensorView<std::int64_t, 1> seq_lens,
                                      const AttentionParams& params) {
  if (params.mask != MaskMode::kBidirectional ||
      (params.attention_chunk_size == 0 && !params.query_temperature)) {
    return;
  }
  for (Eigen::Index b = 0; b < seq_lens.dimension(0); ++b) {
    require(seq_lens(b) == 0 || seq_lens(b) >= q_len, fn, "seq_lens[", b, "] = ", seq_lens(b),
            " < q_len = ", q_len, " puts its first queries at slots below 0, which ",
            params.attention_chunk_size > 0 ? "attention_chunk_size" : "query_temperature",
            " reads in bidirectional attention");
  }
}

/// attention_paged on validated views; q_pos (or null: slots) as in AttentionProblem.
/// values_in_keys (MLA latent pages): v_pages is k_pages' storage seen with v_head_dim columns,
/// the values being the first v_head_dim elements of each key row.
template <typename TQ, typename TKV, typename TO>
void run_attention_paged(ConstTensorView<TQ, 4> q, ConstTensorView<TKV, 4> k_pages,
                         ConstTensorView<TKV, 4> v_pages,
                         ConstTensorView<std::int32_t, 2> page_table,
                         ConstTensorView<std::int64_t, 1> seq_lens, TO* out,
                         const AttentionParams& params, AttentionWorkspace& workspace,
                         compute_t<TQ>* lse = nullptr, const std::int64_t* q_pos = nullptr,
                         double softmax_scale_multiplier = 1.0, bool values_in_keys = false,
                         std::int64_t stream_bytes = 0, const KvScales& scales = {},
                         const std::uint8_t* tree_mask = nullptr) {
  using Acc = compute_t<TQ>;
  AttentionProblem<Acc, TQ, TKV, TO> p;
  p.q = q.data();
  p.k = k_pages.data();
  p.v = v_pages.data();
  p.out = out;
  p.lse = lse;
  p.batch = q.dimension(0);
  p.q_len = q.dimension(1);
  p.heads = q.dimension(2);
  p.kv_heads = k_pages.dimension(2);
  p.d = q.dimension(3);
  p.dv = v_pages.dimension(3);
  p.v_head_elems = values_in_keys ? p.d : p.dv;
  p.v_row_elems = p.kv_heads * p.v_head_elems;
  p.k_len = longest_sequence(seq_lens);
  p.stream_bytes = stream_bytes;
  set_attention_params(p, params, softmax_scale_multiplier);
  set_kv_scales(p, scales);
  p.q_pos = q_pos;
  p.seq_lens = seq_lens.data();
  p.page_table = page_table.data();
  p.page_size = k_pages.dimension(1);
  p.page_table_stride = page_table.dimension(1);
  p.tree_mask = tree_mask;
  run_attention(p, workspace.buffers<Acc>(), params.num_threads);
}

/// attention_paged with or without a tree mask (null).
template <typename TQ, typename TKV>
void attention_paged_checked(std::string_view fn, ConstTensorView<TQ, 4> q,
                             ConstTensorView<TKV, 4> k_pages, ConstTensorView<TKV, 4> v_pages,
                             ConstTensorView<std::int32_t, 2> page_table,
                             ConstTensorView<std::int64_t, 1> seq_lens, TensorView<TQ, 4> out,
                             const ConstTensorView<std::uint8_t, 3>* tree_mask,
                             const AttentionParams& params, AttentionWorkspace* workspace,
                             std::optional<TensorView<lse_t<TQ>, 3>> lse, const KvScales& scales) {
  static_assert(is_storage_type_v<TQ> && is_kv_storage_type_v<TKV>,
                "posenc: q must be float, double, Eigen::half or Eigen::bfloat16, the pages "
                "one of those or FP8");
  const Eigen::Index batch = q.dimension(0);
  require_view(fn, "q", q);
  require_view(fn, "out", out);
  if (lse) require_view(fn, "lse", *lse);
  validate_kv_scales(fn, scales, 0, false, k_pages.dimension(2));
  validate_paged_kv(fn, batch, k_pages, v_pages, page_table, seq_lens);
  // The shared checks see k / v as [batch, longest sequence, kv_heads, d / dv].
  const Eigen::Index longest = paged_checked_keys(longest_sequence(seq_lens), q.dimension(1));
  const ConstTensorView<TKV, 4> k_shape(k_pages.data(), batch, longest, k_pages.dimension(2),
                                        k_pages.dimension(3));
  const ConstTensorView<TKV, 4> v_shape(v_pages.data(), batch, longest, v_pages.dimension(2),
                                        v_pages.dimension(3));
  AttentionMetadata checked;
  if (tree_mask) {
    checked.tree_mask = *tree_mask;
    // Paged positions are the slots; a draft token's is its depth, which only RoPE applied by
    // the caller (keys in the pages, q) carries here.
    require(params.alibi_slopes.empty() && params.attention_chunk_size == 0 &&
                !params.query_temperature && !params.relative_bias,
            fn, "tree_mask with ALiBi, a relative bias, attention chunks or a query temperature ",
            "needs the draft tokens' positions, and paged attention takes its positions from ",
            "the slots");
    for (Eigen::Index b = 0; b < batch; ++b) {
      require(seq_lens(b) >= q.dimension(1), fn, "seq_lens[", b, "] = ", seq_lens(b),
              " must be >= q_len = ", q.dimension(1), " with tree_mask: the draft tokens are ",
              "each sequence's last q_len keys");
    }
  }
  validate_attention(fn, q, k_shape, v_shape, out, params, checked);
  require_paged_query_slots(fn, q.dimension(1), seq_lens, params);
  if (lse) validate_lse(fn, q, *lse);
  AttentionWorkspace local;
  run_attention_paged(q, k_pages, v_pages, page_table, seq_lens, out.data(), params,
                      workspace ? *workspace : local, lse ? lse->data() : nullptr, nullptr, 1.0,
                      false, 0, scales, tree_mask ? tree_mask->data() : nullptr);
}

}  // namespace detail

/// \brief Fused attention of q against a paged KV cache (see the file comment): out =
/// softmax(scale q K^T + ALiBi + mask) V per sequence, over its seq_lens[b] keys.
/// q: [batch, q_len, heads, head_dim]; out: [batch, q_len, heads, v_head_dim] (must not alias
/// anything else); k_pages: [num_pages, page_size, kv_heads, head_dim], v_pages: [num_pages,
/// page_size, kv_heads, v_head_dim], in TKV (may differ from TQ, e.g. a bfloat16 pool with
/// float queries); page_table [batch, max_pages]; seq_lens [batch].
/// lse (optional): [batch, q_len, heads], each row's log-sum-exp as attention(..., lse, ...).
/// scales: the pages' storage scales (an FP8 pool of your own, vLLM's k_scale / v_scale: key
/// code x of kv head g stands for x * scales.k_of(g), per tensor or per kv head); 1 for pools
/// of unscaled values.
/// A sequence with seq_len 0, or a query row with no key before it, gives zeros (lse -inf, or
/// the sink logit with sink_logits, as attention()).
/// Throws std::invalid_argument, before writing anything, for shape errors, seq_lens outside
/// [0, max_pages * page_size], a page id outside [0, num_pages) among the pages a sequence
/// uses, a scale that is not finite and > 0, every parameter error attention() reports, and
/// bidirectional chunks or a query temperature with a sequence of 0 < seq_len < q_len (its
/// first queries would sit at negative slots).
template <typename TQ, typename TKV>
void attention_paged(ConstTensorView<TQ, 4> q, ConstTensorView<TKV, 4> k_pages,
                     ConstTensorView<TKV, 4> v_pages, ConstTensorView<std::int32_t, 2> page_table,
                     ConstTensorView<std::int64_t, 1> seq_lens, TensorView<TQ, 4> out,
                     const AttentionParams& params = {}, AttentionWorkspace* workspace = nullptr,
                     std::optional<TensorView<lse_t<TQ>, 3>> lse = std::nullopt,
                     const KvScales& scales = {}) {
  detail::attention_paged_checked("attention_paged", q, k_pages, v_pages, page_table, seq_lens,
                                  out, nullptr, params, workspace, lse, scales);
}

/// \brief attention_paged verifying a tree of draft tokens per sequence (speculative decoding;
/// AttentionMetadata::tree_mask): the draft tokens are each sequence's last q_len keys, already
/// in the pages with q and k rotated by the caller at their depths (each its parent's position
/// + 1). tree_mask: [batch, q_len, q_len], entries with t > i zero.
/// Throws std::invalid_argument as attention_paged does, and for a bad tree mask (shape, an
/// entry above its diagonal, a path longer than the sliding window), a sequence shorter than
/// q_len, ALiBi, chunks or a query temperature (paged positions are slots), before writing
/// anything. A window is each draft token's own sequence's (AttentionMetadata::tree_mask).
template <typename TQ, typename TKV>
void attention_paged(ConstTensorView<TQ, 4> q, ConstTensorView<TKV, 4> k_pages,
                     ConstTensorView<TKV, 4> v_pages, ConstTensorView<std::int32_t, 2> page_table,
                     ConstTensorView<std::int64_t, 1> seq_lens, TensorView<TQ, 4> out,
                     ConstTensorView<std::uint8_t, 3> tree_mask, const AttentionParams& params = {},
                     AttentionWorkspace* workspace = nullptr,
                     std::optional<TensorView<lse_t<TQ>, 3>> lse = std::nullopt,
                     const KvScales& scales = {}) {
  detail::attention_paged_checked("attention_paged", q, k_pages, v_pages, page_table, seq_lens,
                                  out, &tree_mask, params, workspace, lse, scales);
}

/// \brief Absorbed MLA over a paged pool of latent rows (vLLM's MLA backends, FlashMLA's
/// paged cache with head_dim_v; see attention_mla.hpp): kv_pages [num_pages, page_size,
/// kv_heads, head_dim] rows are the keys, their first v_head_dim = out.dimension(3) elements
/// the values. q [batch, q_len, heads, head_dim], out [batch, q_len, heads, v_head_dim];
/// page table, lengths and lse as attention_paged. params.scale must be set (the model's
/// 1 / sqrt(qk_nope + qk_rope), not the row's).
/// Throws std::invalid_argument as attention_paged, for v_head_dim outside [1, head_dim] and
/// an unset scale, before writing anything.
template <typename TQ, typename TKV>
void attention_paged_latent(ConstTensorView<TQ, 4> q, ConstTensorView<TKV, 4> kv_pages,
                            ConstTensorView<std::int32_t, 2> page_table,
                            ConstTensorView<std::int64_t, 1> seq_lens, TensorView<TQ, 4> out,
                            const AttentionParams& params, AttentionWorkspace* workspace = nullptr,
                            std::optional<TensorView<lse_t<TQ>, 3>> lse = std::nullopt) {
  static_assert(detail::is_storage_type_v<TQ> && detail::is_storage_type_v<TKV>,
                "posenc: storage types must be float, double, Eigen::half or Eigen::bfloat16");
  constexpr std::string_view fn = "attention_paged_latent";
  const Eigen::Index batch = q.dimension(0), d = kv_pages.dimension(3), dv = out.dimension(3);
  detail::require_view(fn, "q", q);
  detail::require_view(fn, "out", out);
  if (lse) detail::require_view(fn, "lse", *lse);
  detail::require_latent_width(fn, d, dv);
  detail::require_latent_scale(fn, params);
  const ConstTensorView<TKV, 4> v_pages(kv_pages.data(), kv_pages.dimension(0),
                                        kv_pages.dimension(1), kv_pages.dimension(2), dv);
  detail::validate_paged_kv(fn, batch, kv_pages, v_pages, page_table, seq_lens);
  const Eigen::Index longest =
      detail::paged_checked_keys(detail::longest_sequence(seq_lens), q.dimension(1));
  const ConstTensorView<TKV, 4> k_shape(kv_pages.data(), batch, longest, kv_pages.dimension(2), d);
  const ConstTensorView<TKV, 4> v_shape(kv_pages.data(), batch, longest, kv_pages.dimension(2), dv);
  detail::validate_attention(fn, q, k_shape, v_shape, out, params, {});
  detail::require_paged_query_slots(fn, q.dimension(1), seq_lens, params);
  if (lse) detail::validate_lse(fn, q, *lse);
  AttentionWorkspace local;
  detail::run_attention_paged(q, kv_pages, v_pages, page_table, seq_lens, out.data(), params,
                              workspace ? *workspace : local, lse ? lse->data() : nullptr,
                              nullptr, 1.0, true);
}

/// \brief attention_paged with the queries packed without padding (FlashAttention's varlen /
/// FlashInfer's qo_indptr): sequence s has queries q[cu_seqlens_q[s], cu_seqlens_q[s + 1]),
/// its last tokens, at slots seq_lens[s] - q_len_s + i. q: [total_q, heads, head_dim],
/// out: [total_q, heads, v_head_dim];
/// lse (optional): [total_q, heads]. Each sequence runs as attention_paged with batch 1 on
/// sub-views (no copy), one after another, each on params.num_threads threads.
/// Throws std::invalid_argument, before writing anything, for every error attention_paged
/// reports and for cu_seqlens_q that does not start at 0, decreases, does not end at total_q
/// or has other than num_seqs + 1 entries.
template <typename TQ, typename TKV>
void attention_paged_varlen(ConstTensorView<TQ, 3> q, ConstTensorView<TKV, 4> k_pages,
                            ConstTensorView<TKV, 4> v_pages,
                            ConstTensorView<std::int32_t, 2> page_table,
                            ConstTensorView<std::int64_t, 1> seq_lens,
                            ConstTensorView<std::int64_t, 1> cu_seqlens_q, TensorView<TQ, 3> out,
                            const AttentionParams& params = {},
                            AttentionWorkspace* workspace = nullptr,
                            std::optional<TensorView<lse_t<TQ>, 2>> lse = std::nullopt) {
  static_assert(detail::is_storage_type_v<TQ> && detail::is_storage_type_v<TKV>,
                "posenc: storage types must be float, double, Eigen::half or Eigen::bfloat16");
  constexpr std::string_view fn = "attention_paged_varlen";
  const Eigen::Index total_q = q.dimension(0), heads = q.dimension(1), d = q.dimension(2);
  const Eigen::Index seqs = seq_lens.dimension(0), max_pages = page_table.dimension(1);
  const Eigen::Index dv = v_pages.dimension(3);
  detail::require_view(fn, "q", q);
  detail::require_view(fn, "out", out);
  if (lse) detail::require_view(fn, "lse", *lse);
  detail::require_view(fn, "cu_seqlens_q", cu_seqlens_q);
  detail::require_view(fn, "seq_lens", seq_lens);
  detail::validate_packed_out(fn, q, out, lse, dv);
  // Not seqs + 1 (a seq_lens view of INT64_MAX entries overflowed it, in the message too).
  detail::require(cu_seqlens_q.dimension(0) - 1 == seqs, fn, "cu_seqlens_q has ",
                  cu_seqlens_q.dimension(0), " entries; it must have num_seqs + 1 with num_seqs ",
                  "= ", seqs, " (seq_lens entries)");
  detail::validate_cu_seqlens(fn, "cu_seqlens_q", cu_seqlens_q, total_q);
  detail::validate_paged_kv(fn, seqs, k_pages, v_pages, page_table, seq_lens);
  detail::validate_packed_heads(fn, heads, d, k_pages.dimension(2), k_pages.dimension(3), params);
  // Sequence s alone: batch-1 views of its queries, page-table row and length.
  const auto views = [&](Eigen::Index s) {
    const Eigen::Index q0 = cu_seqlens_q(s), q_len = cu_seqlens_q(s + 1) - q0;
    return std::tuple{ConstTensorView<TQ, 4>(q.data() + q0 * heads * d, 1, q_len, heads, d),
                      TensorView<TQ, 4>(out.data() + q0 * heads * dv, 1, q_len, heads, dv),
                      ConstTensorView<std::int32_t, 2>(page_table.data() + s * max_pages, 1,
                                                       max_pages),
                      ConstTensorView<std::int64_t, 1>(seq_lens.data() + s, 1), q0, q_len};
  };
  for (Eigen::Index s = 0; s < seqs; ++s) {
    const auto [qs, os, table, len, q0, q_len] = views(s);
    if (q_len == 0) continue;
    const Eigen::Index keys = detail::paged_checked_keys(len(0), q_len);
    const ConstTensorView<TKV, 4> k_shape(k_pages.data(), 1, keys, k_pages.dimension(2),
                                          k_pages.dimension(3));
    const ConstTensorView<TKV, 4> v_shape(v_pages.data(), 1, keys, v_pages.dimension(2), dv);
    detail::validate_attention(fn, qs, k_shape, v_shape, os, params, {});
  }
  AttentionWorkspace local;
  AttentionWorkspace& ws = workspace ? *workspace : local;
  for (Eigen::Index s = 0; s < seqs; ++s) {
    const auto [qs, os, table, len, q0, q_len] = views(s);
    if (q_len == 0) continue;
    detail::run_attention_paged(qs, k_pages, v_pages, table, len, os.data(), params, ws,
                                lse ? lse->data() + q0 * heads : nullptr);
  }
}

}  // namespace posenc
