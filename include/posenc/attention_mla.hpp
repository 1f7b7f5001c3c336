#pragma once
/// \file posenc/attention_mla.hpp
/// Multi-head latent attention (DeepSeek-V2, arXiv:2405.04434 §2.1) in the absorbed form that
/// engines run at decode (FlashMLA's head_dim_v, vLLM's MLA backends, llama.cpp): W_UK is folded
/// into the query and W_UV into the output projection, so every head attends over one cached
/// latent row per token, which is both its key and (its first v_head_dim elements) its value:
///
///   kv row (head_dim 576):   [ c_kv (kv_lora_rank 512)           | k_pe (64, RoPE) ]
///   query:                   [ q_nope W_UK (512)                  | q_pe (64, RoPE) ]
///   out (v_head_dim 512):    softmax(scale q . kv) c_kv           (W_UV applied after)
///
/// The cache then holds 576 values a token instead of 128 heads x (192 + 128) for the
/// unabsorbed form (posenc::attention with v narrower than q / k covers that one: prefill).
/// Rotate q_pe / k_pe with a RoPE plan whose rotary_offset is 512 (KvCache::latent +
/// set_rope does it on append / attend).
///
/// Scale: the model's softmax_scale, 1 / sqrt(qk_nope_head_dim + qk_rope_head_dim) (= 192 for
/// DeepSeek-V3), times mscale^2 under YaRN (RopeFrequencies::softmax_scale_multiplier) — not
/// 1 / sqrt(576). The shapes cannot tell it, so params.scale must be set.

#include <string_view>

#include "posenc/attention.hpp"
#include "posenc/attention_types.hpp"
#include "posenc/error.hpp"
#include "posenc/tensor.hpp"

namespace posenc {

/// \brief Absorbed MLA: out = softmax(scale q kv^T + bias + mask) kv[..., :v_head_dim] (bias:
/// ALiBi, T5's, AttentionMetadata::attention_bias).
/// q: [batch, q_len, heads, head_dim]; kv: [batch, k_len, kv_heads, head_dim] (DeepSeek:
/// kv_heads 1); out: [batch, q_len, heads, v_head_dim] with 1 <= v_head_dim <= head_dim (the
/// values are the first v_head_dim elements of each kv row, read in place). Masks, positions,
/// padding, GQA and the kernel are attention()'s.
/// Throws std::invalid_argument as attention(), for v_head_dim > head_dim and when
/// params.scale is unset, before writing anything.
template <typename T>
void attention_latent(ConstTensorView<T, 4> q, ConstTensorView<T, 4> kv, TensorView<T, 4> out,
                      const AttentionParams& params, const AttentionMetadata& metadata = {},
                      AttentionWorkspace* workspace = nullptr) {
  static_assert(detail::is_storage_type_v<T>, "posenc: storage type must be float, double, "
                                              "Eigen::half or Eigen::bfloat16");
  constexpr std::string_view fn = "attention_latent";
  const Eigen::Index batch = kv.dimension(0), k_len = kv.dimension(1),
                     kv_heads = kv.dimension(2), d = kv.dimension(3), dv = out.dimension(3);
  detail::require_view(fn, "q", q);
  detail::require_view(fn, "kv", kv);
  detail::require_view(fn, "out", out);
  detail::require_latent_width(fn, d, dv);
  detail::require_latent_scale(fn, params);
  // The values as a shape only: [batch, k_len, kv_heads, v_head_dim] inside the kv rows.
  const ConstTensorView<T, 4> v_shape(kv.data(), batch, k_len, kv_heads, dv);
  detail::validate_attention(fn, q, kv, v_shape, out, params, metadata);
  AttentionWorkspace local;
  const Eigen::Index k_stride = k_len * kv_heads * d;
  const detail::AttentionKvRows<T> rows{kv.data(), kv.data(), k_len,    kv_heads,     d,
                                        dv,        k_stride,  k_stride, kv_heads * d, d};
  detail::run_fused_attention(q.data(), out.data(), q.dimension(0), q.dimension(1),
                              q.dimension(2), rows, params, detail::meta_rows(metadata, k_len),
                              workspace ? *workspace : local);
}

}  // namespace posenc
