#pragma once
/// \file posenc/attention.hpp
/// Fused scaled-dot-product attention with the positional schemes that live inside it:
///
///   out = softmax(scale * Q K^T + bias + mask) V
///
/// q: [batch, q_len, heads, head_dim]; k: [batch, k_len, kv_heads, head_dim]; v: [batch, k_len,
/// kv_heads, v_head_dim]; out: [batch, q_len, heads, v_head_dim] (BSHD, row-major; v_head_dim
/// is head_dim except for DeepSeek MLA, see attention_mla.hpp). See attention_types.hpp for the
/// mask (causal bottom-right, key padding), the positions and GQA. Positional schemes:
///   - none: plain content attention (permutation-equivariant without a mask);
///   - ALiBi: AttentionParams::alibi_slopes, bias from absolute positions, added on the fly;
///   - RoPE: rotate Q and K before the call (posenc/rope.hpp), or let KvCache store rotated keys.
///
/// The kernel (detail/attention_kernel.hpp) is FlashAttention-2's tiled online softmax: it
/// never forms the [q_len, k_len] score matrix; each thread holds O(rows * head_dim) floats.
/// Accumulation is float for float/half/bfloat16 storage and double for double storage. For
/// the materialised scores and weights, see posenc/reference/attention.hpp.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string_view>
#include <type_traits>
#include <vector>

#include "posenc/alibi.hpp"
#include "posenc/attention_types.hpp"
#include "posenc/detail/attention_kernel.hpp"
#include "posenc/detail/numeric.hpp"
#include "posenc/error.hpp"
#include "posenc/tensor.hpp"

namespace posenc {

/// Per-thread tile buffers for the fused kernel, sized on first use and reused: keep one per
/// model (or per layer loop) and the hot path allocates nothing. Not thread-safe: one call at a
/// time per workspace.
class AttentionWorkspace {
 public:
  /// Floats (or doubles) held, for reporting: O(threads * (rows * head_dim + tile)), plus per
  /// thread at most 4 MiB of K/V rows kept packed between work items (whatever k_len is).
  std::size_t size() const noexcept {
    std::size_t n = 0;
    const auto held = [](const auto& b) {
      return b.qt.size() + b.st.size() + b.o.size() + b.kf.size() + b.vf.size();
    };
    for (const auto& b : f_) n += held(b);
    for (const auto& b : d_) n += held(b);
    return n;
  }

  template <typename Acc>
  std::vector<detail::AttentionTileBuffers<Acc>>& buffers() {
    if constexpr (std::is_same_v<Acc, double>) {
      return d_;
    } else {
      return f_;
    }
  }

 private:
  std::vector<detail::AttentionTileBuffers<float>> f_;
  std::vector<detail::AttentionTileBuffers<double>> d_;
};

namespace detail {

/// A cache that keeps only the slots a window of cache_window sees (a rolling KvCache, a
/// sliding-window PagedKvCache; cache_window 0: it keeps every slot) needs params.sliding_window
/// in [1, cache_window]: 0 would mean full attention over slots it no longer holds.
/// A chunked layer (params.attention_chunk_size = C) needs at most the C - 1 slots before a
/// query while positions grow by at least one a slot, so C <= cache_window is enough too.
inline void require_window_within(std::string_view fn, std::string_view cache,
                                  std::int64_t cache_window, const AttentionParams& params) {
  const auto within = [&](std::int64_t w) { return w >= 1 && w <= cache_window; };
  require(cache_window == 0 || within(params.sliding_window) ||
              within(params.attention_chunk_size),
          fn, "params.sliding_window = ", params.sliding_window, " must be in [1, ",
          cache_window, "] (or attention_chunk_size, now ", params.attention_chunk_size,
          ", for a chunked layer): this ", cache, " keeps only the slots a window of ",
          cache_window, " sees (0 would mean full attention)");
}

/// The fields of an AttentionProblem that come from params (p's shape already set).
template <typename Acc, typename TQ, typename TKV, typename TO>
void set_attention_params(AttentionProblem<Acc, TQ, TKV, TO>& p, const AttentionParams& params,
                          double softmax_scale_multiplier) {
  // Default scale: multiplier / sqrt(head_dim); the multiplier is DeepSeek YaRN's mscale^2 when
  // a RoPE plan supplies one. An explicit params.scale wins.
  p.scale = static_cast<Acc>(params.scale ? *params.scale
                                          : softmax_scale_multiplier /
                                                std::sqrt(static_cast<double>(p.d)));
  p.causal = params.mask == MaskMode::kCausal;
  p.softcap = static_cast<Acc>(params.logit_softcap);
  // A window of k_len + q_len keys or more hides nothing; clipping it keeps a +- window in range.
  p.window = static_cast<Eigen::Index>(
      std::min<std::int64_t>(params.sliding_window, static_cast<std::int64_t>(p.k_len + p.q_len)));
  p.chunk = params.attention_chunk_size;
  p.temperature = params.query_temperature ? &*params.query_temperature : nullptr;
  p.alibi = !params.alibi_slopes.empty();
  p.slopes = p.alibi ? params.alibi_slopes.data() : nullptr;
  p.sinks = params.sink_logits.empty() ? nullptr : params.sink_logits.data();
  p.rel_bias = params.relative_bias ? params.relative_bias->by_distance.data() : nullptr;
  p.rel_span = params.relative_bias ? detail::relative_saturation(*params.relative_bias) : 0;
}

/// Unscaled storage (every type but a scaled FP8 cache).
inline const KvScales kUnitKvScales{};

/// The scales into the problem: k into the softmax scale (scale q . (k x) = (k scale) q . x),
/// v into the output's 1 / l, each with the kernel's unit for TKV (attn_kv_unit). Per-head
/// scales stay per kv head: a query row takes its kv head's (AttentionProblem::k_heads).
template <typename Acc, typename TQ, typename TKV, typename TO>
void set_kv_scales(AttentionProblem<Acc, TQ, TKV, TO>& p, const KvScales& scales) {
  const bool k_heads = !scales.k_heads.empty(), v_heads = !scales.v_heads.empty();
  p.scale = static_cast<Acc>(static_cast<double>(p.scale) * (k_heads ? 1.0 : scales.k) *
                             attn_kv_unit<TKV>);
  p.v_scale = static_cast<Acc>((v_heads ? 1.0 : scales.v) * attn_kv_unit<TKV>);
  p.k_heads = k_heads ? scales.k_heads.data() : nullptr;
  p.v_heads = v_heads ? scales.v_heads.data() : nullptr;
}

/// K and V as the kernel reads them (validated views or a cache's storage): row j of sequence
/// b starts at k + b * k_batch_stride + j * kv_heads * d in K and at v + b * v_batch_stride +
/// j * v_row_elems in V, kv head g of a V row at g * v_head_elems. v_row_elems and
/// v_head_elems 0: V rows of their own (kv_heads * dv, dv); MLA's latent rows set v = k,
/// kv_heads * d and d.
template <typename TKV>
struct AttentionKvRows {
  const TKV* k;
  const TKV* v;
  Eigen::Index k_len, kv_heads, d, dv, k_batch_stride, v_batch_stride;
  Eigen::Index v_row_elems = 0, v_head_elems = 0;
  /// K + V bytes read by the caller's calls around this one (AttentionProblem::stream_bytes).
  std::int64_t stream_bytes = 0;
  /// The storage scales (a cache's own, which outlive the call); null = 1.
  const KvScales* scales = nullptr;
};

/// float8_e4m3 rows read as float8_e4m3_finite, whose widening skips the NaN test: for a
/// cache that has stored no NaN code.
inline AttentionKvRows<float8_e4m3_finite> as_finite_codes(
    const AttentionKvRows<float8_e4m3>& kv) {
  return {reinterpret_cast<const float8_e4m3_finite*>(kv.k),
          reinterpret_cast<const float8_e4m3_finite*>(kv.v),
          kv.k_len, kv.kv_heads, kv.d, kv.dv, kv.k_batch_stride, kv.v_batch_stride,
          kv.v_row_elems, kv.v_head_elems, kv.stream_bytes, kv.scales};
}
inline ConstTensorView<float8_e4m3_finite, 4> as_finite_codes(ConstTensorView<float8_e4m3, 4> x) {
  return {reinterpret_cast<const float8_e4m3_finite*>(x.data()), x.dimension(0), x.dimension(1),
          x.dimension(2), x.dimension(3)};
}

/// Per-call positions and key padding as raw rows (each null when absent); rows of batch b at
/// b * batch_stride for the key-side arrays, b * q_len for query_positions, b * q_len * q_len
/// for tree_mask.
struct AttentionMetaRows {
  const std::int64_t* query_positions = nullptr;
  const std::int64_t* key_positions = nullptr;
  const std::int64_t* key_lengths = nullptr;
  const std::uint8_t* key_mask = nullptr;
  Eigen::Index batch_stride = 0;
  const std::uint8_t* tree_mask = nullptr;
  /// attention_bias: row (b, h, i) at bias + b * bias_batch_stride + h * bias_head_stride +
  /// i * bias_row_stride (strides 0 where it broadcasts).
  const float* bias = nullptr;
  Eigen::Index bias_batch_stride = 0, bias_head_stride = 0, bias_row_stride = 0;
};

/// Fills an AttentionProblem from validated views (no copy of params: the decode path calls this
/// every step) and runs it. q: [batch, q_len, heads, kv.d]; out: [batch, q_len, heads, kv.dv].
template <typename TQ, typename TKV, typename TO>
void run_fused_attention(const TQ* q, TO* out, Eigen::Index batch, Eigen::Index q_len,
                         Eigen::Index heads, const AttentionKvRows<TKV>& kv,
                         const AttentionParams& params, const AttentionMetaRows& meta,
                         AttentionWorkspace& workspace, double softmax_scale_multiplier = 1.0,
                         compute_t<TQ>* lse = nullptr) {
  using Acc = compute_t<TQ>;
  AttentionProblem<Acc, TQ, TKV, TO> p;
  p.q = q;
  p.k = kv.k;
  p.v = kv.v;
  p.out = out;
  p.lse = lse;
  p.batch = batch;
  p.q_len = q_len;
  p.k_len = kv.k_len;
  p.heads = heads;
  p.kv_heads = kv.kv_heads;
  p.d = kv.d;
  p.dv = kv.dv;
  p.k_batch_stride = kv.k_batch_stride;
  p.v_batch_stride = kv.v_batch_stride;
  p.v_row_elems = kv.v_row_elems > 0 ? kv.v_row_elems : kv.kv_heads * kv.dv;
  p.v_head_elems = kv.v_head_elems > 0 ? kv.v_head_elems : kv.dv;
  p.stream_bytes = kv.stream_bytes;
  set_attention_params(p, params, softmax_scale_multiplier);
  set_kv_scales(p, kv.scales ? *kv.scales : kUnitKvScales);
  p.q_pos = meta.query_positions;
  p.k_pos = meta.key_positions;
  p.key_lengths = meta.key_lengths;
  p.key_mask = meta.key_mask;
  p.meta_batch_stride = meta.batch_stride;
  p.tree_mask = meta.tree_mask;
  p.bias = meta.bias;
  p.bias_batch_stride = meta.bias_batch_stride;
  p.bias_head_stride = meta.bias_head_stride;
  p.bias_row_stride = meta.bias_row_stride;
  run_attention(p, workspace.buffers<Acc>(), params.num_threads);
}

/// Latent rows (absorbed MLA): the values are the first v_head_dim of each head_dim-wide row.
inline void require_latent_width(std::string_view fn, Eigen::Index head_dim,
                                 Eigen::Index v_head_dim) {
  require(v_head_dim >= 1 && v_head_dim <= head_dim, fn, "v_head_dim = ", v_head_dim,
          " must be in [1, head_dim = ", head_dim,
          "]: the values are the first v_head_dim elements of each latent row");
}

/// Absorbed MLA (attention_latent, a latent KvCache) has no default scale: the model's is
/// 1 / sqrt(qk_nope_head_dim + qk_rope_head_dim), which the latent row's width does not tell.
inline void require_latent_scale(std::string_view fn, const AttentionParams& params) {
  require(params.scale.has_value(), fn, "params.scale must be set for latent (absorbed MLA) ",
          "attention: the model's softmax scale is 1 / sqrt(qk_nope_head_dim + ",
          "qk_rope_head_dim) (times mscale^2 under YaRN), not 1 / sqrt of the latent row's width");
}

/// The rows of an AttentionMetadata whose key-side arrays are [batch, k_len].
inline AttentionMetaRows meta_rows(const AttentionMetadata& m, Eigen::Index k_len) {
  AttentionMetaRows rows{m.query_positions ? m.query_positions->data() : nullptr,
                         m.key_positions ? m.key_positions->data() : nullptr,
                         m.key_lengths ? m.key_lengths->data() : nullptr,
                         m.key_mask ? m.key_mask->data() : nullptr, k_len,
                         m.tree_mask ? m.tree_mask->data() : nullptr};
  if (m.attention_bias) {
    const ConstTensorView<float, 4>& bias = *m.attention_bias;  // validated: [B|1, H|1, q, k]
    rows.bias = bias.data();
    rows.bias_row_stride = bias.dimension(3);
    rows.bias_head_stride = bias.dimension(1) == 1 ? 0 : bias.dimension(2) * bias.dimension(3);
    rows.bias_batch_stride =
        bias.dimension(0) == 1 ? 0 : bias.dimension(1) * bias.dimension(2) * bias.dimension(3);
  }
  return rows;
}

/// The caller's q, k, v and out (require_view): addressable extents, data unless empty.
template <typename Q, typename K, typename V, typename O>
void require_attention_views(std::string_view fn, const Q& q, const K& k, const V& v,
                             const O& out) {
  require_view(fn, "q", q);
  require_view(fn, "k", k);
  require_view(fn, "v", v);
  require_view(fn, "out", out);
}

/// lse must have q's shape without head_dim: [batch, q_len, heads], over memory (a null view
/// was read as "no lse": the output silently dropped).
template <typename Q, typename L>
void validate_lse(std::string_view fn, const Q& q, const L& lse) {
  require_view(fn, "lse", lse);
  require(lse.dimension(0) == q.dimension(0) && lse.dimension(1) == q.dimension(1) &&
              lse.dimension(2) == q.dimension(2),
          fn, "lse shape [", lse.dimension(0), ", ", lse.dimension(1), ", ", lse.dimension(2),
          "] must be [batch, q_len, heads] = [", q.dimension(0), ", ", q.dimension(1), ", ",
          q.dimension(2), "]");
}

/// attention() on validated views: K/V and metadata rows k_len apart.
template <typename T>
void run_attention_views(ConstTensorView<T, 4> q, ConstTensorView<T, 4> k,
                         ConstTensorView<T, 4> v, TensorView<T, 4> out,
                         const AttentionParams& params, const AttentionMetadata& metadata,
                         AttentionWorkspace* workspace, compute_t<T>* lse = nullptr) {
  static_assert(is_storage_type_v<T>, "posenc: storage type must be float, double, "
                                      "Eigen::half or Eigen::bfloat16");
  AttentionWorkspace local;
  AttentionWorkspace& ws = workspace ? *workspace : local;
  const Eigen::Index k_len = k.dimension(1), kv_heads = k.dimension(2), d = k.dimension(3),
                     dv = v.dimension(3);
  const AttentionKvRows<T> kv{k.data(), v.data(), k_len, kv_heads, d, dv, k_len * kv_heads * d,
                              k_len * kv_heads * dv};
  run_fused_attention(q.data(), out.data(), q.dimension(0), q.dimension(1), q.dimension(2), kv,
                      params, meta_rows(metadata, k_len), ws, 1.0, lse);
}

}  // namespace detail

/// Element type of a log-sum-exp output: float, or double for double storage (the kernel's
/// accumulation type).
template <typename T>
using lse_t = detail::compute_t<T>;

/// \brief Fused attention: out = softmax(scale Q K^T + ALiBi + mask) V, tiled with an online
/// softmax (no [q_len, k_len] buffer).
/// q: [batch, q_len, heads, head_dim]; k: [batch, k_len, kv_heads, head_dim];
/// v: [batch, k_len, kv_heads, v_head_dim]; out: [batch, q_len, heads, v_head_dim] (must not
/// alias q, k or v; v_head_dim may differ from head_dim: MLA).
/// heads % kv_heads == 0 (GQA/MQA); scale defaults to 1/sqrt(head_dim); causal masks align
/// bottom-right; params.sliding_window limits each query to its last W key slots (see
/// attention_types.hpp), and the kernel skips key tiles outside every query's window;
/// metadata gives positions (ALiBi), key padding, a tree mask (speculative decoding: draft
/// tokens verified in one pass, AttentionMetadata::tree_mask) and an additive attention_bias.
/// Rows with no visible key are written as zeros.
/// Throws std::invalid_argument (shape mismatch, head_dim mismatch, heads not a multiple of
/// kv_heads, slope count != heads, bad scale, negative sliding_window, positions outside
/// [0, 2^53], key_lengths outside [0, k_len], an attention_bias of the wrong shape) before
/// writing anything.
template <typename T>
void attention(ConstTensorView<T, 4> q, ConstTensorView<T, 4> k, ConstTensorView<T, 4> v,
               TensorView<T, 4> out, const AttentionParams& params = {},
               const AttentionMetadata& metadata = {}, AttentionWorkspace* workspace = nullptr) {
  detail::require_attention_views("attention", q, k, v, out);
  detail::validate_attention("attention", q, k, v, out, params, metadata);
  detail::run_attention_views(q, k, v, out, params, metadata, workspace);
}

/// \brief As attention(), and also writes each row's log-sum-exp of its final logits,
/// lse[b, i, h] = log(sum_j exp(s_j)) over the keys the row sees (s_j after the scale, soft cap,
/// ALiBi, T5 and attention_bias; exp(sink_h) included when sink_logits are set): for a row
/// that sees no key,
/// -inf, or sink_h with a sink (its state is the sink's alone, which a merge then counts once);
/// NaN for a row that met a NaN or +inf logit.
/// It is what merges attentions over disjoint key sets (attention_merge.hpp): split-K decode,
/// a shared prefix attended once (cascade attention), or FlashAttention's softmax_lse.
/// lse: [batch, q_len, heads] (the layout of out without head_dim; FlashAttention returns
/// [batch, heads, q_len]). Throws std::invalid_argument as attention() does, and for an lse of
/// the wrong shape, before writing anything.
template <typename T>
void attention(ConstTensorView<T, 4> q, ConstTensorView<T, 4> k, ConstTensorView<T, 4> v,
               TensorView<T, 4> out, TensorView<lse_t<T>, 3> lse,
               const AttentionParams& params = {}, const AttentionMetadata& metadata = {},
               AttentionWorkspace* workspace = nullptr) {
  constexpr std::string_view fn = "attention";
  detail::require_attention_views(fn, q, k, v, out);
  detail::validate_attention(fn, q, k, v, out, params, metadata);
  detail::validate_lse(fn, q, lse);
  detail::run_attention_views(q, k, v, out, params, metadata, workspace, lse.data());
}

}  // namespace posenc
