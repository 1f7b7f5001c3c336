#pragma once
/// \file posenc/dual_chunk_attention.hpp
/// Dual Chunk Attention (DCA; An et al. 2024, "Training-Free Long-Context Scaling of Large
/// Language Models", §3), as Qwen2.5-7B/14B-Instruct-1M's `dual_chunk_attention_config`
/// configures it and vLLM runs it (DualChunkRotaryEmbedding and the dense path of the
/// DUAL_CHUNK_FLASH_ATTN backend; the MInference sparse path is not here).
///
/// Positions are cut into chunks of chunk_len = chunk_size - local_size. Keys are rotated at
/// their place in their chunk, p_k mod chunk_len; a query at p is rotated one of three ways,
/// by the chunk of the key it meets (c = chunk_len, S = chunk_size):
///
///   key in                  query rotated at            rotated distance
///   the query's chunk       p mod c                     p - p_k             (< c)
///   the chunk before it     min(p mod c + c, S)         p - p_k, capped at S
///   any earlier chunk       min(2c - 1, S)              S - (p_k mod c)     (in (S - c, S])
///
/// (the three query tables of vLLM: q, qc clamped at S, and qc's last row), so no rotated
/// distance exceeds S, the context the model was trained for, at any length. One softmax runs
/// over every key the causal mask shows: the three parts are attended separately and merged by
/// their log-sum-exps (attention_merge.hpp), which is the same softmax.
///
/// Length scaling (original_max_position_embeddings = L0 > 0): s(L) = max(1, 0.1 ln(L / L0) + 1).
/// vLLM multiplies each key by s of the sequence length when the key is written (a prompt's
/// keys by s(prompt length), a decode step's key by s(length after the step)) and the queries
/// by s of the current length, so the logits past L0 grow by about s^2. Here the keys' factor is
/// dual_chunk_rotate_keys_inplace's seq_len and the queries' is s(last query position + 1) of
/// each sequence, taken by dual_chunk_attention itself. (vLLM's chunked prefill gives every
/// chunk of a prompt the factor of the whole prompt's length; this is the same for an
/// unchunked prefill and for decode.)
///
/// Flow per layer: rotate the new keys with dual_chunk_rotate_keys_inplace (they are then what
/// vLLM stores), keep them (a KvCache or PagedKvCache without a RoPE plan, or your own
/// buffer), and attend with the unrotated queries: dual_chunk_attention (tensors) or
/// dual_chunk_attend (a KvCache, or the sequences of a page pool). The rotated queries are
/// staged in float (double for double storage), not rounded to a 16-bit storage type first as
/// vLLM does.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string_view>
#include <type_traits>
#include <vector>

#include "posenc/attention.hpp"
#include "posenc/attention_merge.hpp"
#include "posenc/attention_paged.hpp"
#include "posenc/attention_rope.hpp"
#include "posenc/attention_types.hpp"
#include "posenc/detail/numeric.hpp"
#include "posenc/dual_chunk_params.hpp"
#include "posenc/error.hpp"
#include "posenc/kv_cache.hpp"
#include "posenc/paged_kv_cache.hpp"
#include "posenc/rope.hpp"
#include "posenc/rope_frequencies.hpp"
#include "posenc/tensor.hpp"

namespace posenc {

/// The RoPE frequencies (the model's plain rope_theta plan), the pair layout and the chunking:
/// plan once per model.
struct DualChunkPlan {
  RopeFrequencies freqs;
  RopeLayout layout = RopeLayout::kHalfSplit;
  DualChunkParams chunks;
};

/// Reusable buffers of the DCA calls (rotated queries, the parts' outputs and log-sum-exps, the
/// mapped positions and a key mask) plus the fused kernel's tiles: grows to the largest call,
/// then stays, so the hot path allocates nothing. One call at a time per workspace.
class DualChunkWorkspace {
 public:
  AttentionWorkspace& kernel() noexcept { return kernel_; }
  /// which: 0 rotated queries, 1 and 2 the two parts' outputs, 3 and 4 their log-sum-exps,
  /// 5 the queries widened, unrotated.
  template <typename Acc>
  std::vector<Acc>& staging(int which, std::size_t n) {
    auto& v = [&]() -> std::vector<Acc>& {
      if constexpr (std::is_same_v<Acc, double>) {
        return d_[which];
      } else {
        return f_[which];
      }
    }();
    if (v.size() < n) v.resize(n);
    return v;
  }
  std::vector<std::int64_t>& positions(std::size_t n) {
    if (positions_.size() < n) positions_.resize(n);
    return positions_;
  }
  std::vector<std::uint8_t>& key_mask(std::size_t n) {
    if (key_mask_.size() < n) key_mask_.resize(n);
    return key_mask_;
  }

 private:
  AttentionWorkspace kernel_;
  std::vector<float> f_[6];
  std::vector<double> d_[6];
  std::vector<std::int64_t> positions_;
  std::vector<std::uint8_t> key_mask_;
};

namespace detail {

/// The attention features DCA composes with: a causal mask, a scale, a soft cap, threads.
inline void validate_dual_chunk_attention(std::string_view fn, const DualChunkPlan& plan,
                                          const AttentionParams& params, Eigen::Index d) {
  validate_dual_chunk(fn, plan.chunks);
  validate_attention_rope(fn, plan.freqs, plan.layout, d);
  require(params.mask == MaskMode::kCausal, fn, "params.mask = ", to_string(params.mask),
          " must be causal (dual chunk attention is defined for decoders)");
  require(params.alibi_slopes.empty() && params.sink_logits.empty() && !params.relative_bias,
          fn, "params.alibi_slopes (", params.alibi_slopes.size(), "), params.sink_logits (",
          params.sink_logits.size(), ") and relative_bias must be empty: dual chunk attention ",
          "is a RoPE scheme");
  require(params.sliding_window == 0 && params.attention_chunk_size == 0 &&
              !params.query_temperature,
          fn, "params.sliding_window = ", params.sliding_window, ", attention_chunk_size = ",
          params.attention_chunk_size,
          " and query_temperature must be unset: dual chunk attention sets its own chunks");
}

/// The queries' positions and the keys' positions and padding of one sequence.
struct DualChunkRow {
  const std::int64_t* q_pos;  ///< [q_len], or null: k_len - q_len + i
  const std::int64_t* k_pos;  ///< [k_len], or null: j
  const std::uint8_t* k_mask;  ///< [k_len], or null: every key valid
  std::int64_t k_valid_len;    ///< keys j >= k_valid_len are padding
};

/// One sequence's keys and values in rows (a tensor's batch row, a KvCache sequence): the parts
/// are row ranges of it.
template <typename T>
struct DualChunkRows {
  AttentionKvRows<T> kv;  ///< rows of this sequence from its slot 0; batch strides unused

  Eigen::Index k_len() const noexcept { return kv.k_len; }
  std::int64_t bytes() const noexcept {
    const Eigen::Index v_row = kv.v_row_elems > 0 ? kv.v_row_elems : kv.kv_heads * kv.dv;
    return kv.k_len * (kv.kv_heads * kv.d + v_row) * static_cast<std::int64_t>(sizeof(T));
  }
  /// Rows [0, g) of q against keys [lo, hi).
  template <typename Acc>
  void attend(const Acc* q, Eigen::Index g, Eigen::Index heads, Eigen::Index lo, Eigen::Index hi,
              const AttentionParams& params, const AttentionMetaRows& meta, double multiplier,
              Acc* out, Acc* lse, AttentionWorkspace& ws) const {
    const Eigen::Index v_row = kv.v_row_elems > 0 ? kv.v_row_elems : kv.kv_heads * kv.dv;
    const AttentionKvRows<T> part{kv.k + lo * kv.kv_heads * kv.d, kv.v + lo * v_row, hi - lo,
                                  kv.kv_heads, kv.d, kv.dv, 0, 0, kv.v_row_elems,
                                  kv.v_head_elems, bytes(), kv.scales};
    run_fused_attention(q, out, 1, g, heads, part, params, meta, ws, multiplier, lse);
  }
};

/// One sequence of a page pool (positions = slots, no padding): the parts start on page
/// boundaries (chunk_len a multiple of page_size), so a part is the page table from its first
/// page on.
template <typename T>
struct DualChunkPages {
  ConstTensorView<T, 4> k_pages, v_pages;  ///< [num_pages, page_size, kv_heads, d / dv]
  const std::int32_t* table;               ///< the sequence's pages
  Eigen::Index table_len, length;

  Eigen::Index k_len() const noexcept { return length; }
  std::int64_t bytes() const noexcept {
    return length * k_pages.dimension(2) * (k_pages.dimension(3) + v_pages.dimension(3)) *
           static_cast<std::int64_t>(sizeof(T));
  }
  template <typename Acc>
  void attend(const Acc* q, Eigen::Index g, Eigen::Index heads, Eigen::Index lo, Eigen::Index hi,
              const AttentionParams& params, const AttentionMetaRows& meta, double multiplier,
              Acc* out, Acc* lse, AttentionWorkspace& ws) const {
    const Eigen::Index first_page = lo / k_pages.dimension(1);
    const std::int64_t len = hi - lo;
    run_attention_paged(ConstTensorView<Acc, 4>(q, 1, g, heads, k_pages.dimension(3)), k_pages,
                        v_pages, ConstTensorView<std::int32_t, 2>(table + first_page, 1,
                                                                  table_len - first_page),
                        ConstTensorView<std::int64_t, 1>(&len, 1), out, params, ws, lse,
                        meta.query_positions, multiplier, false, bytes());
  }
};

/// Validated inputs, q_len <= k_len: each query i is key slot k_len - q_len + i. Queries are
/// taken in groups of one chunk whose earlier-chunk keys are the same for every member (a group
/// ends where a query's own slot holds a key of an earlier chunk), so each group attends
/// its intra part with the kernel's chunk mask and its two cross parts as plain bidirectional
/// attention over the slots of those keys. Keys: DualChunkRows or DualChunkPages.
template <typename T, typename Keys>
void run_dual_chunk(const T* q, T* out, Eigen::Index q_len, Eigen::Index heads, Eigen::Index d,
                    Eigen::Index dv, const Keys& keys, const DualChunkRow& row,
                    const DualChunkPlan& plan, const AttentionParams& params,
                    DualChunkWorkspace& ws) {
  using Acc = compute_t<T>;
  const Eigen::Index k_len = keys.k_len(), shift = k_len - q_len;
  const std::int64_t c = dual_chunk_len(plan.chunks);
  const auto qpos = [&](Eigen::Index i) { return row.q_pos ? row.q_pos[i] : shift + i; };
  const auto kpos = [&](Eigen::Index j) { return row.k_pos ? row.k_pos[j] : std::int64_t{j}; };
  const auto valid = [&](Eigen::Index j) {
    return j < row.k_valid_len && (!row.k_mask || row.k_mask[j] != 0);
  };

  std::int64_t last = 0;
  for (Eigen::Index i = 0; i < q_len; ++i) last = std::max(last, qpos(i));
  // vLLM: softmax_scale * s(L) in prefill, q * s(L) in decode; an explicit scale keeps s(L).
  const double length_scale = dual_chunk_scale_at(last + 1, plan.chunks);
  const double multiplier = plan.freqs.softmax_scale_multiplier * length_scale;
  AttentionParams intra = params;
  intra.attention_chunk_size = c;
  if (params.scale) intra.scale = *params.scale * length_scale;
  AttentionParams cross = intra;
  cross.mask = MaskMode::kBidirectional;
  cross.attention_chunk_size = 0;

  const auto n = static_cast<std::size_t>(q_len);
  auto& qs = ws.staging<Acc>(0, n * static_cast<std::size_t>(heads * d));
  auto& out_a = ws.staging<Acc>(1, n * static_cast<std::size_t>(heads * dv));
  auto& out_b = ws.staging<Acc>(2, n * static_cast<std::size_t>(heads * dv));
  auto& lse_a = ws.staging<Acc>(3, n * static_cast<std::size_t>(heads));
  auto& lse_b = ws.staging<Acc>(4, n * static_cast<std::size_t>(heads));
  auto& rot_pos = ws.positions(n);
  // Widened once; each part rotates the group's rows out of place from here.
  auto& q_wide = ws.staging<Acc>(5, n * static_cast<std::size_t>(heads * d));
  for (Eigen::Index e = 0; e < q_len * heads * d; ++e) {
    q_wide[static_cast<std::size_t>(e)] = to_compute(q[e]);
  }

  Eigen::Index i0 = 0;
  while (i0 < q_len) {
    const std::int64_t chunk = qpos(i0) / c;
    Eigen::Index i1 = i0 + 1;
    while (i1 < q_len && qpos(i1) / c == chunk &&
           !(valid(shift + i1) && kpos(shift + i1) / c < chunk)) {
      ++i1;
    }
    const Eigen::Index g = i1 - i0;
    const TensorView<Acc, 4> qg(qs.data(), 1, g, heads, d);
    const ConstTensorView<Acc, 4> q_group(q_wide.data() + i0 * heads * d, 1, g, heads, d);
    const auto rotate = [&](DualChunkPart part) {
      for (Eigen::Index i = 0; i < g; ++i) {
        rot_pos[static_cast<std::size_t>(i)] = dual_chunk_query_at(qpos(i0 + i), part, plan.chunks);
      }
      apply_rope<Acc>(q_group, PositionIdsView(rot_pos.data(), 1, g), plan.freqs, plan.layout, qg);
    };

    // Intra: causal within the chunk of positions, over the slots up to the group's last query.
    rotate(DualChunkPart::kIntra);
    const Eigen::Index intra_len = shift + i1;
    const std::int64_t intra_valid = std::min<std::int64_t>(row.k_valid_len, intra_len);
    // Absent padding stays absent: the kernel's fast paths need no per-key test then.
    const AttentionMetaRows intra_meta{row.q_pos ? row.q_pos + i0 : nullptr, row.k_pos,
                                       intra_valid < intra_len ? &intra_valid : nullptr,
                                       row.k_mask, intra_len};
    keys.attend(qs.data(), g, heads, 0, intra_len, intra, intra_meta, multiplier, out_a.data(),
                lse_a.data(), ws.kernel());

    // Successive and inter: every key of those chunks the group's first query sees.
    const Eigen::Index seen = shift + i0 + 1;
    for (const DualChunkPart part : {DualChunkPart::kSuccessive, DualChunkPart::kInter}) {
      const auto in_part = [&](Eigen::Index j) {
        const std::int64_t kc = kpos(j) / c;
        return valid(j) &&
               (part == DualChunkPart::kSuccessive ? kc + 1 == chunk : kc + 1 < chunk);
      };
      Eigen::Index lo = seen, hi = 0, count = 0;
      if (!row.k_pos && !row.k_mask && row.k_valid_len >= seen) {
        // Keys at their slots (a page pool, default positions): the parts' ranges directly.
        const std::int64_t end = part == DualChunkPart::kSuccessive ? chunk * c : (chunk - 1) * c;
        lo = part == DualChunkPart::kSuccessive ? std::max<std::int64_t>((chunk - 1) * c, 0) : 0;
        hi = std::max<std::int64_t>(std::min<std::int64_t>(end, seen), lo);
        count = hi - lo;
      } else {
        for (Eigen::Index j = 0; j < seen; ++j) {
          if (in_part(j)) {
            lo = std::min(lo, j);
            hi = j + 1;
            ++count;
          }
        }
      }
      if (hi <= lo) continue;
      // Contiguous keys (positions that grow with the slots) need no mask, and no buffer.
      const std::uint8_t* part_mask = nullptr;
      if (count != hi - lo) {
        auto& mask = ws.key_mask(static_cast<std::size_t>(hi - lo));
        for (Eigen::Index j = lo; j < hi; ++j) mask[static_cast<std::size_t>(j - lo)] = in_part(j);
        part_mask = mask.data();
      }
      rotate(part);
      const AttentionMetaRows part_meta{nullptr, nullptr, nullptr, part_mask, hi - lo};
      keys.attend(qs.data(), g, heads, lo, hi, cross, part_meta, multiplier, out_b.data(),
                  lse_b.data(), ws.kernel());
      merge_attention_state_inplace<Acc>(TensorView<Acc, 4>(out_a.data(), 1, g, heads, dv),
                                         TensorView<Acc, 3>(lse_a.data(), 1, g, heads),
                                         ConstTensorView<Acc, 4>(out_b.data(), 1, g, heads, dv),
                                         ConstTensorView<Acc, 3>(lse_b.data(), 1, g, heads));
    }
    T* dst = out + i0 * heads * dv;
    for (Eigen::Index e = 0; e < g * heads * dv; ++e) {
      dst[e] = from_value<T>(out_a[static_cast<std::size_t>(e)]);
    }
    i0 = i1;
  }
}

/// A cache DCA can read: keys as dual_chunk_rotate_keys_inplace left them, every token kept.
template <typename Cache>
void require_dual_chunk_cache(std::string_view fn, const Cache& cache) {
  require(!cache.has_rope() && cache.sliding_window() == 0 && !cache.is_latent(), fn,
          "the cache must keep every token's own key and value, rotated by "
          "dual_chunk_rotate_keys_inplace: no RoPE plan of its own (has_rope = ",
          cache.has_rope(), "), no window (", cache.sliding_window(), "), not latent");
}

/// run_dual_chunk for each sequence b of validated q / out, with its keys_of(b) and row_of(b).
template <typename T, typename KeysOf, typename RowOf>
void run_dual_chunk_batch(ConstTensorView<T, 4> q, TensorView<T, 4> out, KeysOf keys_of,
                          RowOf row_of, const DualChunkPlan& plan, const AttentionParams& params,
                          DualChunkWorkspace* workspace) {
  DualChunkWorkspace local;
  DualChunkWorkspace& ws = workspace ? *workspace : local;
  const Eigen::Index q_len = q.dimension(1), heads = q.dimension(2), d = q.dimension(3),
                     dv = out.dimension(3);
  for (Eigen::Index b = 0; b < q.dimension(0); ++b) {
    run_dual_chunk(q.data() + b * q_len * heads * d, out.data() + b * q_len * heads * dv, q_len,
                   heads, d, dv, keys_of(b), row_of(b), plan, params, ws);
  }
}

}  // namespace detail

/// \brief Turns new keys into what DCA keeps: each rotated at its position mod chunk_len, then
/// (with L0 > 0) multiplied by s(seq_len), the sequence length after these keys are added, and
/// rounded to T (vLLM rotates, then scales the rotated key in its dtype).
/// k: [batch, n, kv_heads, head_dim] in place; position_ids: [batch, n] in [0, 2^53];
/// seq_len: >= 1 when original_max_position_embeddings > 0 (otherwise unused).
/// Throws std::invalid_argument (params, plan, shapes, positions, seq_len) before writing.
template <typename T>
void dual_chunk_rotate_keys_inplace(TensorView<T, 4> k, PositionIdsView position_ids,
                                    const DualChunkPlan& plan, std::int64_t seq_len = 0,
                                    DualChunkWorkspace* workspace = nullptr) {
  static_assert(detail::is_storage_type_v<T>, "posenc: storage type must be float, double, "
                                              "Eigen::half or Eigen::bfloat16");
  constexpr std::string_view fn = "dual_chunk_rotate_keys_inplace";
  detail::validate_dual_chunk(fn, plan.chunks);
  detail::validate_attention_rope(fn, plan.freqs, plan.layout, k.dimension(3));
  const Eigen::Index batch = k.dimension(0), n = k.dimension(1);
  detail::validate_positions(fn, "position_ids", position_ids, batch, n, "n");
  const bool scaled = plan.chunks.original_max_position_embeddings > 0;
  detail::require(!scaled || seq_len >= 1, fn, "seq_len = ", seq_len,
                  " must be >= 1 when original_max_position_embeddings (",
                  plan.chunks.original_max_position_embeddings, ") > 0");

  DualChunkWorkspace local;
  DualChunkWorkspace& ws = workspace ? *workspace : local;
  auto& mapped = ws.positions(static_cast<std::size_t>(batch * n));
  const std::int64_t c = detail::dual_chunk_len(plan.chunks);
  for (Eigen::Index e = 0; e < batch * n; ++e) {
    mapped[static_cast<std::size_t>(e)] = position_ids.data()[e] % c;
  }
  apply_rope_inplace<T>(k, PositionIdsView(mapped.data(), batch, n), plan.freqs, plan.layout);
  if (!scaled) return;
  using Acc = detail::compute_t<T>;
  const auto s = static_cast<Acc>(detail::dual_chunk_scale_at(seq_len, plan.chunks));
  if (s == Acc(1)) return;
  for (Eigen::Index e = 0; e < k.size(); ++e) {
    k.data()[e] = detail::from_value<T>(detail::to_compute(k.data()[e]) * s);
  }
}

/// \brief Dual chunk attention over keys from dual_chunk_rotate_keys_inplace:
/// out = softmax over the causally visible keys of (scale s(L) q_part . k), q_part the query
/// rotated for the key's chunk (file comment), times V.
/// q: [batch, q_len, heads, head_dim], unrotated; k: [batch, k_len, kv_heads, head_dim], rotated
/// by dual_chunk_rotate_keys_inplace; v: [batch, k_len, kv_heads, v_head_dim]; out: [batch,
/// q_len, heads, v_head_dim]; q_len <= k_len (the queries' own keys are the last q_len).
/// Chunks follow the metadata's positions (defaults k_len - q_len + i and j), so left padding
/// does not move them; key padding as in attention(). L = the last query position + 1 of each
/// sequence. params: causal; scale, logit_softcap and num_threads apply; ALiBi, sinks, windows,
/// chunks and temperatures are rejected, and so are a tree mask and an attention_bias.
/// Throws std::invalid_argument (as attention(), plus the plan, params and q_len) before
/// writing anything.
template <typename T>
void dual_chunk_attention(ConstTensorView<T, 4> q, ConstTensorView<T, 4> k,
                          ConstTensorView<T, 4> v, TensorView<T, 4> out, const DualChunkPlan& plan,
                          const AttentionParams& params = {},
                          const AttentionMetadata& metadata = {},
                          DualChunkWorkspace* workspace = nullptr) {
  static_assert(detail::is_storage_type_v<T>, "posenc: storage type must be float, double, "
                                              "Eigen::half or Eigen::bfloat16");
  constexpr std::string_view fn = "dual_chunk_attention";
  detail::require_attention_views(fn, q, k, v, out);
  detail::validate_attention(fn, q, k, v, out, params, metadata);
  detail::validate_dual_chunk_attention(fn, plan, params, q.dimension(3));
  const Eigen::Index q_len = q.dimension(1), d = q.dimension(3), k_len = k.dimension(1),
                     kv_heads = k.dimension(2), dv = v.dimension(3);
  detail::require(q_len <= k_len, fn, "q_len = ", q_len, " must be <= k_len = ", k_len,
                  " (the queries' own keys are the last q_len)");
  detail::require(!metadata.tree_mask, fn, "tree_mask is not supported by dual chunk attention");
  detail::require(!metadata.attention_bias, fn,
                  "attention_bias is not supported by dual chunk attention");

  const auto at = [](const auto& view, Eigen::Index b, Eigen::Index len) {
    return view ? view->data() + b * len : nullptr;
  };
  detail::run_dual_chunk_batch<T>(
      q, out,
      [&](Eigen::Index b) {
        return detail::DualChunkRows<T>{{k.data() + b * k_len * kv_heads * d,
                                         v.data() + b * k_len * kv_heads * dv, k_len, kv_heads,
                                         d, dv, 0, 0}};
      },
      [&](Eigen::Index b) {
        return detail::DualChunkRow{
            at(metadata.query_positions, b, q_len), at(metadata.key_positions, b, k_len),
            at(metadata.key_mask, b, k_len),
            metadata.key_lengths ? (*metadata.key_lengths)(b) : std::int64_t{k_len}};
      },
      plan, params, workspace);
}

/// \brief dual_chunk_attention of the last q_len appended tokens against a KvCache holding keys
/// from dual_chunk_rotate_keys_inplace (a cache without a RoPE plan of its own, keeping every
/// token): query positions and key positions / padding are the cache's stored ones. The cache
/// has no plan, so KvCache::shift_positions moves positions without turning the keys: after a
/// context shift, re-append the shifted tokens' keys rotated at their new positions.
/// q: [batch, q_len, heads, head_dim] unrotated, out: [batch, q_len, heads, v_head_dim],
/// 1 <= q_len <= size(). Throws std::invalid_argument (a cache with RoPE set, a rolling or
/// latent cache, shapes, params) before writing anything.
template <typename T>
void dual_chunk_attend(const KvCache<T>& cache, ConstTensorView<T, 4> q, TensorView<T, 4> out,
                       const DualChunkPlan& plan, const AttentionParams& params = {},
                       DualChunkWorkspace* workspace = nullptr) {
  constexpr std::string_view fn = "dual_chunk_attend";
  detail::require_dual_chunk_cache(fn, cache);
  const Eigen::Index q_len = q.dimension(1), size = cache.size(), batch = cache.batch(),
                     max_len = cache.max_len(), kv_heads = cache.kv_heads(),
                     d = cache.head_dim(), dv = cache.v_head_dim();
  detail::require(q.dimension(0) == batch, fn, "q batch = ", q.dimension(0),
                  " must equal the cache's batch (", batch, ")");
  detail::require(q_len >= 1 && q_len <= size, fn, "q_len = ", q_len, " must be in [1, size = ",
                  size, "]: append the new tokens' keys and values first");
  const ConstTensorView<T, 4> k_shape(cache.keys().data(), batch, size, kv_heads, d);
  const ConstTensorView<T, 4> v_shape(cache.values().data(), batch, size, kv_heads, dv);
  detail::require_view(fn, "q", q);
  detail::require_view(fn, "out", out);
  detail::validate_attention(fn, q, k_shape, v_shape, out, params, {});
  detail::validate_dual_chunk_attention(fn, plan, params, d);

  const auto slot0 = [&](Eigen::Index b) { return b * max_len; };
  detail::run_dual_chunk_batch<T>(
      q, out,
      [&](Eigen::Index b) {
        return detail::DualChunkRows<T>{{cache.keys().data() + slot0(b) * kv_heads * d,
                                         cache.values().data() + slot0(b) * kv_heads * dv, size,
                                         kv_heads, d, dv, 0, 0}};
      },
      [&](Eigen::Index b) {
        return detail::DualChunkRow{cache.positions().data() + slot0(b) + size - q_len,
                                    cache.positions().data() + slot0(b),
                                    cache.valid().data() + slot0(b), std::int64_t{size}};
      },
      plan, params, workspace);
}

/// \brief dual_chunk_attention of the last q_len appended tokens of each listed sequence of a
/// page pool (vLLM's paged DCA): keys appended rotated by dual_chunk_rotate_keys_inplace at
/// their slots (positions), to a pool with no RoPE plan of its own, no window, not latent.
/// chunk_len must be a multiple of page_size (vLLM requires the same), so every part starts on
/// a page.
/// q: [seqs.size(), q_len, heads, head_dim] unrotated, out: [seqs.size(), q_len, heads,
/// v_head_dim], 1 <= q_len <= each length. Throws std::invalid_argument (unknown sequence, a
/// pool with RoPE, a window or latent rows, chunk_len vs page_size, shapes, params) before
/// writing anything.
template <typename T>
void dual_chunk_attend(const PagedKvCache<T>& cache,
                       const std::vector<typename PagedKvCache<T>::SequenceId>& seqs,
                       ConstTensorView<T, 4> q, TensorView<T, 4> out, const DualChunkPlan& plan,
                       const AttentionParams& params = {},
                       DualChunkWorkspace* workspace = nullptr) {
  constexpr std::string_view fn = "dual_chunk_attend";
  detail::require_dual_chunk_cache(fn, cache);
  detail::validate_dual_chunk(fn, plan.chunks);
  const std::int64_t c = detail::dual_chunk_len(plan.chunks);
  detail::require(c % cache.page_size() == 0, fn, "chunk_len = chunk_size - local_size = ", c,
                  " must be a multiple of page_size = ", cache.page_size());
  const auto batch = static_cast<Eigen::Index>(seqs.size());
  const Eigen::Index q_len = q.dimension(1), kv_heads = cache.kv_heads(), d = cache.head_dim(),
                     dv = cache.v_head_dim();
  detail::require(batch > 0 && q.dimension(0) == batch, fn, "q batch = ", q.dimension(0),
                  " must equal the number of sequences listed (", batch, ", at least 1)");
  Eigen::Index longest = 1;
  for (const auto s : seqs) {
    const Eigen::Index len = cache.length(s);
    detail::require(q_len >= 1 && q_len <= len, fn, "q_len = ", q_len, " must be in [1, length = ",
                    len, "] of sequence ", s, ": append the new tokens' keys and values first");
    longest = std::max(longest, len);
  }
  const ConstTensorView<T, 4> k_shape(cache.key_pages().data(), batch, longest, kv_heads, d);
  const ConstTensorView<T, 4> v_shape(cache.value_pages().data(), batch, longest, kv_heads, dv);
  detail::require_view(fn, "q", q);
  detail::require_view(fn, "out", out);
  detail::validate_attention(fn, q, k_shape, v_shape, out, params, {});
  detail::validate_dual_chunk_attention(fn, plan, params, d);

  detail::run_dual_chunk_batch<T>(
      q, out,
      [&](Eigen::Index b) {
        const auto s = seqs[static_cast<std::size_t>(b)];
        const auto& pages = cache.pages(s);
        return detail::DualChunkPages<T>{cache.key_pages(), cache.value_pages(), pages.data(),
                                         static_cast<Eigen::Index>(pages.size()),
                                         cache.length(s)};
      },
      [&](Eigen::Index b) {
        return detail::DualChunkRow{nullptr, nullptr, nullptr,
                                    std::int64_t{cache.length(seqs[static_cast<std::size_t>(b)])}};
      },
      plan, params, workspace);
}

}  // namespace posenc
