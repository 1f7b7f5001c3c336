#pragma once
/// \file posenc/attention_rope.hpp
/// Attention with RoPE applied inside the call: Q and K are rotated by their positions
/// (RoFormer, Su et al. 2021; posenc/rope.hpp) into the workspace, then the fused kernel runs
/// on the rotated copies. The caller's tensors are not modified.
///
/// Memory: the rotated Q and K, and V, are staged in float (double for double storage) in the
/// workspace: O(input), reused across calls. Engines that
/// keep a KV cache rotate each key once on append instead (KvCache::set_rope), so a decode step
/// only rotates its query.
///
/// Scale: unless AttentionParams::scale is set, 1/sqrt(head_dim) times the plan's
/// softmax_scale_multiplier (DeepSeek-V2/V3 YaRN's mscale(s, mscale_all_dim)^2; 1 otherwise).

#include <cmath>
#include <cstdint>
#include <optional>
#include <string_view>
#include <type_traits>
#include <vector>

#include "posenc/attention.hpp"
#include "posenc/attention_types.hpp"
#include "posenc/detail/numeric.hpp"
#include "posenc/error.hpp"
#include "posenc/rope.hpp"
#include "posenc/rope_frequencies.hpp"
#include "posenc/rope_params.hpp"
#include "posenc/tensor.hpp"

namespace posenc {

namespace detail {

inline void validate_attention_rope(std::string_view fn, const RopeFrequencies& freqs,
                                    RopeLayout layout, Eigen::Index d) {
  require(freqs.rotary_dim > 0 && freqs.rotary_dim % 2 == 0 &&
              static_cast<Eigen::Index>(freqs.inv_freq.size()) * 2 == freqs.rotary_dim,
          fn, "freqs.rotary_dim = ", freqs.rotary_dim, " must be even, > 0 and twice ",
          "inv_freq.size() (", freqs.inv_freq.size(), ")");
  // Not offset + rotary_dim <= d: the sum overflows for an offset near INT64_MAX.
  require(freqs.rotary_offset >= 0 && freqs.rotary_offset <= d - freqs.rotary_dim, fn,
          "rotary_offset + rotary_dim = ", freqs.rotary_offset, " + ", freqs.rotary_dim,
          " must be <= head_dim = ", d);
  require(layout == RopeLayout::kInterleaved || layout == RopeLayout::kHalfSplit, fn,
          "layout = ", static_cast<int>(layout), " is not a RopeLayout");
  require(std::isfinite(freqs.softmax_scale_multiplier) && freqs.softmax_scale_multiplier > 0.0,
          fn, "freqs.softmax_scale_multiplier = ", freqs.softmax_scale_multiplier,
          " must be finite and > 0");
  // The values too (inv_freq, attention_factor), as every RoPE call checks them: a cache took
  // a NaN plan at set_rope and its append evicted slots / took pages before the rotation threw.
  validate_freqs(fn, freqs);
}

/// A cache's update_rope(freqs): a plan is set (`current`), and the new one fits head_dim d and
/// rotates the same slice, so the stored keys can be turned from one to the other in place.
inline void validate_rope_update(std::string_view fn, const std::optional<RopeFrequencies>& current,
                                 const RopeFrequencies& freqs, RopeLayout layout, Eigen::Index d) {
  require(current.has_value(), fn, "no RoPE plan is set (set_rope first)");
  validate_attention_rope(fn, freqs, layout, d);
  require(freqs.rotary_dim == current->rotary_dim && freqs.rotary_offset == current->rotary_offset,
          fn, "the new plan must rotate the same slice: rotary_dim ", freqs.rotary_dim, " vs ",
          current->rotary_dim, ", rotary_offset ", freqs.rotary_offset, " vs ",
          current->rotary_offset);
}

/// A cache's stored keys [1, rows, kv_heads, d] turned from plan `from` to plan `to` in place
/// (update_rope). FP8 codes go through float and are quantised again: the turn is linear, so
/// the storage scale cancels (fp8(R x / s) with x = code * s).
template <typename T>
void rerotate_cached_keys(T* keys, Eigen::Index rows, Eigen::Index kv_heads, Eigen::Index d,
                          const RopePositions& positions, const RopeFrequencies& from,
                          const RopeFrequencies& to, RopeLayout layout,
                          const RopeApplyOptions& options, StagingBuffers& staging) {
  if constexpr (is_float8_v<T>) {
    const auto count = static_cast<std::size_t>(rows * kv_heads * d);
    auto& stage = staging.convert<float>(keys, count);
    rerotate_rope_inplace<float>(
        rope_heads<float>(TensorView<float, 4>(stage.data(), 1, rows, kv_heads, d)), positions,
        from, to, layout, options);
    store_cache_values(stage.data(), keys, static_cast<std::ptrdiff_t>(count), 1.0f);
  } else {
    rerotate_rope_inplace<T>(rope_heads<T>(TensorView<T, 4>(keys, 1, rows, kv_heads, d)),
                             positions, from, to, layout, options);
  }
}

template <typename Acc, typename T>
void stage_copy(const T* src, std::size_t n, std::vector<Acc>& dst) {
  dst.resize(n);
  for (std::size_t i = 0; i < n; ++i) dst[i] = static_cast<Acc>(to_compute(src[i]));
}

}  // namespace detail

/// Reusable staging for attention_with_rope (rotated Q, K and a float V), plus the kernel's
/// tile buffers. Grows to the largest call, then stays.
class AttentionRopeWorkspace {
 public:
  AttentionWorkspace& kernel() noexcept { return kernel_; }
  template <typename Acc>
  std::vector<Acc>& staging(int which) {
    if constexpr (std::is_same_v<Acc, double>) {
      return d_[which];
    } else {
      return f_[which];
    }
  }

 private:
  AttentionWorkspace kernel_;
  std::vector<float> f_[3];
  std::vector<double> d_[3];
};

/// \brief out = softmax(scale R(pq) Q (R(pk) K)^T + bias + mask) V: attention with RoPE applied
/// to Q and K at their positions (metadata; defaults k_len - q_len + i and j).
/// q: [batch, q_len, heads, head_dim]; k: [batch, k_len, kv_heads, head_dim];
/// v: [batch, k_len, kv_heads, v_head_dim]; out: [batch, q_len, heads, v_head_dim];
/// freqs: a plan from compute_rope_frequencies (rotary_offset + rotary_dim <= head_dim).
/// Throws std::invalid_argument as posenc::attention, plus for a plan that does not fit
/// head_dim, before anything is written.
template <typename T>
void attention_with_rope(ConstTensorView<T, 4> q, ConstTensorView<T, 4> k, ConstTensorView<T, 4> v,
                         TensorView<T, 4> out, const RopeFrequencies& freqs, RopeLayout layout,
                         const AttentionParams& params = {}, const AttentionMetadata& metadata = {},
                         AttentionRopeWorkspace* workspace = nullptr) {
  static_assert(detail::is_storage_type_v<T>, "posenc: storage type must be float, double, "
                                              "Eigen::half or Eigen::bfloat16");
  constexpr std::string_view fn = "attention_with_rope";
  detail::require_attention_views(fn, q, k, v, out);
  detail::validate_attention(fn, q, k, v, out, params, metadata);
  const Eigen::Index batch = q.dimension(0), q_len = q.dimension(1), heads = q.dimension(2),
                     d = q.dimension(3), k_len = k.dimension(1), kv_heads = k.dimension(2);
  detail::validate_attention_rope(fn, freqs, layout, d);

  AttentionRopeWorkspace local;
  AttentionRopeWorkspace& ws = workspace ? *workspace : local;
  using Acc = detail::compute_t<T>;
  auto& qs = ws.staging<Acc>(0);
  auto& ks = ws.staging<Acc>(1);
  auto& vs = ws.staging<Acc>(2);
  detail::stage_copy(q.data(), static_cast<std::size_t>(q.size()), qs);
  detail::stage_copy(k.data(), static_cast<std::size_t>(k.size()), ks);
  detail::stage_copy(v.data(), static_cast<std::size_t>(v.size()), vs);

  // Rotate at the positions the kernel uses: the caller's, or its bottom-right defaults
  // (queries at k_len - q_len + i, keys at j), expressed as contiguous RoPE positions without
  // materialising them. Only q_len > k_len needs a buffer: queries before the first key clamp to 0.
  const std::int64_t* qp = metadata.query_positions ? metadata.query_positions->data() : nullptr;
  const std::int64_t* kp = metadata.key_positions ? metadata.key_positions->data() : nullptr;
  std::vector<std::int64_t> clamped_qpos;
  RopePositions qrot = RopePositions::contiguous(batch, q_len, k_len - q_len);
  if (qp) {
    qrot = RopePositions::from_ids(PositionIdsView(qp, batch, q_len));
  } else if (q_len > k_len) {
    clamped_qpos.resize(static_cast<std::size_t>(batch * q_len));
    for (Eigen::Index b = 0; b < batch; ++b)
      for (Eigen::Index i = 0; i < q_len; ++i)
        clamped_qpos[static_cast<std::size_t>(b * q_len + i)] =
            std::max<std::int64_t>(0, k_len - q_len + i);
    qp = clamped_qpos.data();
    qrot = RopePositions::from_ids(PositionIdsView(qp, batch, q_len));
  }
  const RopePositions krot = kp ? RopePositions::from_ids(PositionIdsView(kp, batch, k_len))
                                : RopePositions::contiguous(batch, k_len);
  apply_rope_inplace<Acc>(rope_heads<Acc>(TensorView<Acc, 4>(qs.data(), batch, q_len, heads, d)),
                          qrot, freqs, layout);
  apply_rope_inplace<Acc>(
      rope_heads<Acc>(TensorView<Acc, 4>(ks.data(), batch, k_len, kv_heads, d)), krot, freqs,
      layout);
  const Eigen::Index dv = v.dimension(3);
  const detail::AttentionKvRows<Acc> kv{ks.data(), vs.data(), k_len, kv_heads, d, dv,
                                        k_len * kv_heads * d, k_len * kv_heads * dv};
  detail::AttentionMetaRows meta = detail::meta_rows(metadata, k_len);
  meta.query_positions = qp;
  meta.key_positions = kp;
  detail::run_fused_attention(qs.data(), out.data(), batch, q_len, heads, kv, params, meta,
                              ws.kernel(), freqs.softmax_scale_multiplier);
}

}  // namespace posenc
