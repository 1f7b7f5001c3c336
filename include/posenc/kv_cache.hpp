#pragma once
/// \file posenc/kv_cache.hpp
/// A per-layer KV cache for autoregressive decoding: keys and values of every token seen so
/// far, with the positions and validity (padding) of each slot, so that a decode step attends
/// with the right causal limit, the right ALiBi distances and without the padding.
///
/// Storage: [batch, max_len, kv_heads, head_dim] for K and [batch, max_len, kv_heads,
/// v_head_dim] for V (v_head_dim = head_dim unless given: DeepSeek MLA without weight
/// absorption keeps keys of 192 and values of 128), in T = float, Eigen::bfloat16 or Eigen::half
/// (double also accepted), or FP8 (float8_e4m3 / float8_e5m2, float8.hpp) with per-tensor or
/// per-kv-head scales (set_scales: vLLM's k_scale / v_scale); [batch, max_len] int64 positions and uint8
/// validity.
///
/// FP8: append rotates a key in float and quantises it once, fp8(R(p) k / k_scale) (FlashInfer's
/// rope_quantize_fp8_append_paged_kv_cache, vLLM's fp8 cache write); attend reads the codes in
/// place and folds k_scale into the softmax scale and v_scale into the output, so a decode step
/// reads a quarter of a float cache's bytes and multiplies nothing per element.
///
/// MLA latent cache (KvCache::latent, DeepSeek-V2 / V3 decode with absorbed weights, as
/// FlashMLA and vLLM's MLA backends keep it): one row per token, [c_kv | k_pe], that is the key
/// (all head_dim) and whose first v_head_dim elements are the value; no V storage. RoPE set with
/// rotary_offset = v_head_dim turns only k_pe. See attention_mla.hpp.
/// All sequences of a batch share the slot count (left padding keeps them aligned: a padding
/// slot is stored with valid = 0 and never attended to).
///
/// With RoPE set (set_rope), append rotates the keys by their positions before storing them —
/// keys are stored rotated, as every engine does, so a decode step only rotates its query.
/// Rotation runs in float (double for double input) and the result is rounded once to T.
///
/// Flow per layer:  prefill  append(K, V, positions[, valid]) then attend(Q, out, params)
///                  decode   append(k_t, v_t, {t}) then attend(q_t, out, params)
///
/// Rolling cache (the 5th constructor argument, sliding_window = W > 0) for sliding-window
/// layers (Mistral, Gemma-2/3 local layers): its memory is max_len slots however long the
/// sequence grows. Each query needs only the W - 1 slots before it, so a chunk of n tokens needs
/// the W - 1 slots before the chunk plus itself. When an append would overflow, the cache first
/// keeps just the newest W - 1 slots, moved to the front (HF's sliding-window cache layer keeps
/// the same W - 1), and drops the rest:
///
///   max_len = 8, W = 4      before: [t0 t1 t2 t3 t4 t5 t6 t7]   append t8, t9
///                           after:  [t5 t6 t7 t8 t9 .. .. ..]   evicted() = 5
///
/// The kept slots stay contiguous and in order, so the attention kernel reads one plain slot
/// range. The move copies W - 1 slots once per max_len - W + 1 appended tokens: with
/// max_len = 2W about one slot copy per token, amortised (bench: BM_KvCache_RollingEvict).
/// Chunks may hold up to max_len - (W - 1) tokens, and attend requires windows of at most W.

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string_view>
#include <type_traits>
#include <vector>

#include "posenc/attention.hpp"
#include "posenc/attention_rope.hpp"
#include "posenc/attention_types.hpp"
#include "posenc/detail/cache_line_vector.hpp"
#include "posenc/detail/numeric.hpp"
#include "posenc/error.hpp"
#include "posenc/rope.hpp"
#include "posenc/rope_frequencies.hpp"
#include "posenc/rope_params.hpp"
#include "posenc/tensor.hpp"

namespace posenc {

template <typename T>
class KvCache {
  static_assert(detail::is_kv_storage_type_v<T>, "posenc: KvCache storage must be float, "
                                                 "double, Eigen::half, Eigen::bfloat16 or FP8");

 public:
  /// \brief An empty cache of max_len slots per sequence. sliding_window = 0 keeps every token
  /// (appending past max_len throws); W > 0 makes a rolling cache for a layer whose queries see
  /// their last W slots only (see the file comment): it never overflows, it drops slots no
  /// query can see any more.
  /// v_head_dim: the width of a value row, 0 = head_dim (the keys' width).
  /// Throws std::invalid_argument when a dimension is <= 0, v_head_dim < 0, sliding_window < 0,
  /// or sliding_window > max_len (a rolling cache must hold W - 1 slots plus the new token).
  KvCache(Eigen::Index batch, Eigen::Index max_len, Eigen::Index kv_heads, Eigen::Index head_dim,
          std::int64_t sliding_window = 0, Eigen::Index v_head_dim = 0)
      : KvCache(batch, max_len, kv_heads, head_dim, sliding_window, v_head_dim, false) {}

 private:
  KvCache(Eigen::Index batch, Eigen::Index max_len, Eigen::Index kv_heads, Eigen::Index head_dim,
          std::int64_t sliding_window, Eigen::Index v_head_dim, bool latent)
      : batch_(batch), max_len_(max_len), kv_heads_(kv_heads), d_(head_dim),
        dv_(v_head_dim == 0 ? head_dim : v_head_dim), latent_(latent), window_(sliding_window) {
    detail::require(batch > 0 && max_len > 0 && kv_heads > 0 && head_dim > 0, "KvCache",
                    "shape [batch, max_len, kv_heads, head_dim] = [", batch, ", ", max_len, ", ",
                    kv_heads, ", ", head_dim, "] must have no zero dimension");
    detail::require(v_head_dim >= 0, "KvCache", "v_head_dim = ", v_head_dim,
                    " must be >= 0 (0: head_dim)");
    detail::require(sliding_window >= 0 && sliding_window <= max_len, "KvCache",
                    "sliding_window = ", sliding_window, " must be in [0, max_len = ", max_len,
                    "] (0: keep every token)");
    const std::size_t slots = detail::checked_elements("KvCache", "slots", {batch, max_len},
                                                       sizeof(std::int64_t));
    k_.assign(detail::checked_elements("KvCache", "keys", {batch, max_len, kv_heads, head_dim},
                                       sizeof(T)),
              T(0.0f));
    if (!latent) {
      v_.assign(detail::checked_elements("KvCache", "values", {batch, max_len, kv_heads, dv_},
                                         sizeof(T)),
                T(0.0f));
    }
    pos_.assign(slots, 0);
    valid_.assign(slots, 0);
  }

 public:
  Eigen::Index batch() const noexcept { return batch_; }
  Eigen::Index max_len() const noexcept { return max_len_; }
  Eigen::Index kv_heads() const noexcept { return kv_heads_; }
  Eigen::Index head_dim() const noexcept { return d_; }
  Eigen::Index v_head_dim() const noexcept { return dv_; }
  /// True for a latent cache (KvCache::latent): values are the first v_head_dim of each key row.
  bool is_latent() const noexcept { return latent_; }

  /// \brief An empty MLA latent cache (see the file comment): rows of head_dim per kv head,
  /// appended with append_latent, whose first v_head_dim elements are the values.
  /// DeepSeek-V3: kv_heads 1, head_dim 576 (kv_lora_rank 512 + qk_rope_head_dim 64),
  /// v_head_dim 512. Throws std::invalid_argument when a dimension is <= 0, v_head_dim >
  /// head_dim, or the window is invalid (as the constructor).
  static KvCache latent(Eigen::Index batch, Eigen::Index max_len, Eigen::Index kv_heads,
                        Eigen::Index head_dim, Eigen::Index v_head_dim,
                        std::int64_t sliding_window = 0) {
    detail::require_latent_width("KvCache::latent", head_dim, v_head_dim);
    return KvCache(batch, max_len, kv_heads, head_dim, sliding_window, v_head_dim, true);
  }
  /// Slots filled so far (the same for every sequence of the batch).
  Eigen::Index size() const noexcept { return size_; }
  /// The rolling cache's window W, or 0 for a cache that keeps every token.
  std::int64_t sliding_window() const noexcept { return window_; }
  /// Slots a rolling cache has dropped from the front: stored slot s holds the sequence's
  /// slot evicted() + s (always 0 for a cache that keeps every token; erase() is not counted).
  std::int64_t evicted() const noexcept { return evicted_; }

  /// Whole storage [batch, max_len, kv_heads, head_dim] (values: v_head_dim); slots >= size()
  /// are unspecified. A latent cache has no value storage of its own: values() throws
  /// std::invalid_argument there (its values are keys()[..., :v_head_dim]).
  ConstTensorView<T, 4> keys() const { return {k_.data(), batch_, max_len_, kv_heads_, d_}; }
  ConstTensorView<T, 4> values() const {
    detail::require(!latent_, "KvCache::values", "a latent cache stores no values of their own: ",
                    "they are the first v_head_dim = ", dv_, " elements of each keys() row");
    return {v_.data(), batch_, max_len_, kv_heads_, dv_};
  }
  /// \brief FP8 caches: the scales keys and values are stored with, per tensor or per kv head
  /// (see KvScales). Throws std::invalid_argument, changing nothing, unless every scale is
  /// finite and > 0, per-head lists hold kv_heads() entries, the cache is empty (size() == 0)
  /// and, for a latent cache, the key and value scales are equal.
  void set_scales(const KvScales& scales) {
    static_assert(detail::is_float8_v<T>, "posenc: only FP8 caches store with a scale");
    detail::validate_kv_scales("KvCache::set_scales", scales, size_, latent_, kv_heads_);
    scales_ = scales;
  }
  /// The storage scales (1, 1 unless an FP8 cache set others).
  const KvScales& scales() const noexcept { return scales_; }

  /// [batch, max_len] positions of the stored tokens and 0/1 validity (0 = padding).
  PositionIdsView positions() const { return {pos_.data(), batch_, max_len_}; }
  ConstTensorView<std::uint8_t, 2> valid() const { return {valid_.data(), batch_, max_len_}; }

  /// \brief Rotates keys on append and queries on attend with this plan from now on.
  /// Keys already stored keep their rotation (for a dynamic-NTK / LongRoPE plan change, use
  /// update_rope). Throws std::invalid_argument when the plan does not fit head_dim.
  void set_rope(RopeFrequencies freqs, RopeLayout layout) {
    detail::validate_attention_rope("KvCache::set_rope", freqs, layout, d_);
    rope_ = std::move(freqs);
    rope_layout_ = layout;
  }
  /// \brief Switches to a new plan of the same rotary slice and re-rotates the stored keys to
  /// it at their stored positions, in place: a dynamic-NTK or LongRoPE plan that changed
  /// (RopePlan::update() == true) keeps the cache valid without a re-prefill. One pass per
  /// sequence, 16-bit keys rounded once (rerotate_rope_inplace). Throws std::invalid_argument
  /// when no plan is set, or the new one does not fit head_dim or rotates another slice; the
  /// cache is then unchanged.
  void update_rope(RopeFrequencies freqs, const RopeApplyOptions& options = {}) {
    constexpr std::string_view fn = "KvCache::update_rope";
    detail::validate_rope_update(fn, rope_, freqs, rope_layout_, d_);
    // Every sequence is re-rotated with the same plans, shapes and validated positions: if the
    // first call does not throw (before writing), none does.
    for (Eigen::Index b = 0; b < batch_ && size_ > 0; ++b) {
      const auto positions =
          RopePositions::from_ids(PositionIdsView(pos_.data() + b * max_len_, 1, size_));
      detail::rerotate_cached_keys(k_.data() + b * max_len_ * kv_heads_ * d_, size_, kv_heads_,
                                   d_, positions, *rope_, freqs, rope_layout_, options, staging_);
    }
    rope_ = std::move(freqs);
  }
  void clear_rope() { rope_.reset(); }
  bool has_rope() const noexcept { return rope_.has_value(); }

  /// \brief Removes slots [first, first + count) of every sequence; later slots move down
  /// (their keys, values, positions and validity unchanged). With shift_positions this is
  /// llama.cpp's context shift: keep the first n_keep slots (the prompt's instructions or
  /// attention sinks), drop the next n_discard, then shift the rest back by n_discard.
  /// Throws std::invalid_argument, changing nothing, unless 0 <= first <= first + count <= size().
  void erase(Eigen::Index first, Eigen::Index count) {
    // first and count apart in the message: the arguments are formed before the check, and
    // first + count overflows for a count near INT64_MAX.
    detail::require(first >= 0 && count >= 0 && count <= size_ - first, "KvCache::erase",
                    "slots [first, first + count) with first = ", first, ", count = ", count,
                    " must lie within [0, size = ", size_, "]");
    remove_slots(first, count);
  }

  /// \brief Adds delta to the positions of slots [first, last) of every sequence and, with
  /// RoPE set, turns their stored keys by the same delta: k <- R(delta) k, pair by pair
  /// (R(p + delta) = R(delta) R(p); the plan's attention_factor, already in k, is not applied
  /// again). The keys are rotated in float (double for double) and rounded once, like the
  /// re-rotation of update_rope. Queries attend from the new positions on, as if the tokens had
  /// been appended there (ALiBi distances too).
  /// Throws std::invalid_argument, changing nothing, unless 0 <= first <= last <= size() and
  /// every shifted position stays in [0, 2^53].
  void shift_positions(Eigen::Index first, Eigen::Index last, std::int64_t delta) {
    constexpr std::string_view fn = "KvCache::shift_positions";
    detail::require(first >= 0 && first <= last && last <= size_, fn, "slots [first, last) = [",
                    first, ", ", last, ") must lie within [0, size = ", size_, "]");
    constexpr std::int64_t kMax = detail::kMaxAttentionPosition;
    detail::require(delta >= -kMax && delta <= kMax, fn, "delta = ", delta,
                    " must be in [-2^53, 2^53]");
    for (Eigen::Index b = 0; b < batch_; ++b) {
      for (Eigen::Index s = first; s < last; ++s) {
        const std::int64_t p = pos_[static_cast<std::size_t>(b * max_len_ + s)];
        detail::require(p + delta >= 0 && p + delta <= kMax, fn, "position ", p, " of slot ", s,
                        " (sequence ", b, ") shifted by delta = ", delta, " leaves [0, 2^53]");
      }
    }
    const Eigen::Index n = last - first;
    if (n == 0 || delta == 0) return;
    if (rope_) {
      // R(delta) = a forward turn by |delta| (or an inverse one for delta < 0) of the same
      // frequencies with attention factor 1.
      using Acc = detail::compute_t<T>;
      RopeFrequencies turn = *rope_;
      turn.attention_factor = 1.0;
      RopeApplyOptions options;
      options.direction = delta > 0 ? RopeDirection::kForward : RopeDirection::kInverse;
      const Eigen::Index row = kv_heads_ * d_;
      auto& stage = staging_.get<Acc>();
      stage.resize(static_cast<std::size_t>(batch_ * n * row));
      for (Eigen::Index b = 0; b < batch_; ++b) {
        const T* from = k_.data() + (b * max_len_ + first) * row;
        Acc* to = stage.data() + b * n * row;
        for (Eigen::Index i = 0; i < n * row; ++i) {
          to[i] = static_cast<Acc>(detail::to_compute(from[i]));
        }
      }
      // Every slot turns by the same |delta|: as batch * n sequences of one token each.
      const Eigen::Index tokens = batch_ * n;
      apply_rope_inplace<Acc>(
          rope_heads<Acc>(TensorView<Acc, 4>(stage.data(), tokens, 1, kv_heads_, d_)),
          RopePositions::contiguous(tokens, 1, delta < 0 ? -delta : delta), turn, rope_layout_,
          options);
      store(stage.data(), k_, d_, first, n, 1.0);  // the codes turned: the scale cancels
    }
    for (Eigen::Index b = 0; b < batch_; ++b) {
      for (Eigen::Index s = first; s < last; ++s) {
        pos_[static_cast<std::size_t>(b * max_len_ + s)] += delta;
      }
    }
  }

  /// Forgets every token (size() = 0, evicted() = 0); storage and the RoPE plan are kept.
  void clear() noexcept {
    size_ = 0;
    evicted_ = 0;
    nan_codes_ = false;
  }

  /// \brief Appends n tokens per sequence: keys (rotated by their positions when RoPE is set),
  /// values, positions and validity.
  /// k: [batch, n, kv_heads, head_dim]; v: [batch, n, kv_heads, v_head_dim];
  /// positions: [batch, n] in [0, 2^53];
  /// valid (optional, default all 1): [batch, n], 0 marks a padding token.
  /// A rolling cache first drops all but its newest W - 1 slots when size() + n > max_len.
  /// Throws std::out_of_range when the tokens do not fit (size() + n > max_len; for a rolling
  /// cache n > max_len - (W - 1)), std::invalid_argument for shape or position errors; on any
  /// throw the cache is unchanged.
  template <typename In>
  void append(ConstTensorView<In, 4> k, ConstTensorView<In, 4> v, PositionIdsView positions,
              std::optional<ConstTensorView<std::uint8_t, 2>> valid = std::nullopt) {
    detail::require(!latent_, "KvCache::append", "this is a latent cache (values are the first ",
                    "v_head_dim of each key row): append its rows with append_latent");
    append_rows("KvCache::append", k, &v, positions, valid);
  }

  /// \brief A latent cache's append: kv [batch, n, kv_heads, head_dim] rows ([c_kv | k_pe];
  /// k_pe rotated by their positions when RoPE is set), positions and validity as append.
  /// Throws as append, and std::invalid_argument on a cache that is not latent.
  template <typename In>
  void append_latent(ConstTensorView<In, 4> kv, PositionIdsView positions,
                     std::optional<ConstTensorView<std::uint8_t, 2>> valid = std::nullopt) {
    detail::require(latent_, "KvCache::append_latent", "this cache keeps values of their own: ",
                    "append keys and values with append (KvCache::latent makes a latent cache)");
    append_rows<In>("KvCache::append_latent", kv, nullptr, positions, valid);
  }

 private:
  /// append / append_latent (v null: a latent row).
  template <typename In>
  void append_rows(std::string_view fn, ConstTensorView<In, 4> k, const ConstTensorView<In, 4>* v,
                   PositionIdsView positions,
                   std::optional<ConstTensorView<std::uint8_t, 2>> valid) {
    static_assert(detail::is_storage_type_v<In>, "posenc: input must be a storage type");
    const Eigen::Index n = k.dimension(1);
    const Eigen::Index want_k[4] = {batch_, n, kv_heads_, d_};
    const Eigen::Index want_v[4] = {batch_, n, kv_heads_, dv_};
    for (int a = 0; a < 4; ++a) {
      detail::require(k.dimension(a) == want_k[a], fn, v ? "k" : "kv", " shape [",
                      k.dimension(0), ", ", k.dimension(1), ", ", k.dimension(2), ", ",
                      k.dimension(3), "] must be [batch, n, kv_heads, head_dim] = [", batch_,
                      ", ", n, ", ", kv_heads_, ", ", d_, "]");
      detail::require(!v || v->dimension(a) == want_v[a], fn, "v shape [",
                      v ? v->dimension(0) : 0, ", ", v ? v->dimension(1) : 0, ", ",
                      v ? v->dimension(2) : 0, ", ", v ? v->dimension(3) : 0,
                      "] must be [batch, n, kv_heads, v_head_dim] = [", batch_, ", ", n, ", ",
                      kv_heads_, ", ", dv_, "]");
    }
    detail::require(n > 0, fn, "n = 0 tokens: nothing to append");
    // A rolling cache keeps the newest W - 1 slots: the first new query's window.
    const Eigen::Index keep =
        window_ > 0 ? std::min<Eigen::Index>(size_, static_cast<Eigen::Index>(window_ - 1)) : size_;
    if (n > max_len_ - keep) {
      if (window_ > 0) {
        detail::throw_out_of_range(fn, "appending n = ", n, " tokens to a rolling cache of ",
                                   "max_len = ", max_len_, " slots that must keep the last ",
                                   "sliding_window - 1 = ", keep, " would overflow it: append ",
                                   "chunks of at most ", max_len_ - keep, " tokens");
      }
      detail::throw_out_of_range(fn, "appending n = ", n, " tokens to a cache holding ", size_,
                                 " of max_len = ", max_len_, " slots would overflow it");
    }
    detail::validate_positions(fn, "positions", positions, batch_, n, "n");
    if (valid) {
      detail::require(valid->dimension(0) == batch_ && valid->dimension(1) == n, fn,
                      "valid shape [", valid->dimension(0), ", ", valid->dimension(1),
                      "] must be [batch, n] = [", batch_, ", ", n, "]");
    }

    if (n > max_len_ - size_) evict_all_but(keep);
    const Eigen::Index row = kv_heads_ * d_;
    if (rope_) {
      // Rotate a float (double) copy, then round once into the cache.
      using Acc = detail::compute_t<In>;
      auto& stage = staging_.convert<Acc>(k.data(), static_cast<std::size_t>(batch_ * n * row));
      apply_rope_inplace<Acc>(TensorView<Acc, 4>(stage.data(), batch_, n, kv_heads_, d_), positions,
                              *rope_, rope_layout_);
      store(stage.data(), k_, d_, size_, n, scales_.k, scales_.k_heads);
    } else {
      store(k.data(), k_, d_, size_, n, scales_.k, scales_.k_heads);
    }
    if (v) store(v->data(), v_, dv_, size_, n, scales_.v, scales_.v_heads);
    for (Eigen::Index b = 0; b < batch_; ++b) {
      for (Eigen::Index s = 0; s < n; ++s) {
        const auto slot = static_cast<std::size_t>(b * max_len_ + size_ + s);
        pos_[slot] = positions(b, s);
        valid_[slot] = valid ? static_cast<std::uint8_t>((*valid)(b, s) != 0) : std::uint8_t{1};
      }
    }
    size_ += n;
  }

 public:

  /// \brief Attention of the last q_len appended tokens against every cached token:
  /// out = softmax(scale q K^T + ALiBi + mask) V with causal bottom-right alignment (query i is
  /// slot size() - q_len + i), padding slots masked, query positions = the stored positions of
  /// those slots, and q rotated by them when RoPE is set (then the default scale also takes the
  /// plan's softmax_scale_multiplier, as attention_with_rope). params.sliding_window counts
  /// slots back from each query's own (decode reads only the last W slots). A rolling cache
  /// requires params.sliding_window in [1, W]: a wider window would need dropped slots.
  /// q: [batch, q_len, heads, head_dim], out: [batch, q_len, heads, v_head_dim],
  /// 1 <= q_len <= size(), heads % kv_heads == 0. A latent cache requires params.scale (see
  /// attention_latent: the model's scale is not 1 / sqrt(head_dim) of the latent row).
  /// lse (optional): [batch, q_len, heads], each row's log-sum-exp as attention()'s, to merge
  /// with the same queries' attention over keys held elsewhere (attention_merge.hpp): a shared
  /// prefix attended once (cascade attention), older slots offloaded to another store.
  /// Throws std::invalid_argument (shapes, q_len, slopes, scale, window, lse shape) before
  /// writing anything.
  template <typename TQ>
  void attend(ConstTensorView<TQ, 4> q, TensorView<TQ, 4> out, const AttentionParams& params = {},
              std::optional<TensorView<lse_t<TQ>, 3>> lse = std::nullopt) {
    attend_with(q, out, params, nullptr, lse);
  }

  /// \brief attend() for a tree of draft tokens (speculative decoding, FlashInfer's custom_mask,
  /// vLLM's tree attention): the last q_len slots hold the draft tokens, appended so that each
  /// follows its parent, each at its parent's position + 1; query i sees every earlier slot and
  /// draft slot t only where tree_mask[b, i, t] != 0 (its ancestors and itself; see
  /// AttentionMetadata::tree_mask). After verification, erase the rejected slots (last first)
  /// and the accepted path is an ordinary prefix at consecutive positions.
  /// tree_mask: [batch, q_len, q_len], entries with t > i zero. A sliding window (a rolling
  /// cache's too) is each draft token's own sequence's: the prefix's last W - depth slots and
  /// its path (AttentionMetadata::tree_mask); a rolling cache keeps the W - 1 prefix slots the
  /// shallowest draft tokens need.
  /// lse (optional) as attend()'s.
  /// Throws std::invalid_argument as attend() does, and for a tree mask of the wrong shape, with
  /// an entry above its diagonal, with a path longer than the window, or with bidirectional
  /// params, before writing anything.
  template <typename TQ>
  void attend(ConstTensorView<TQ, 4> q, TensorView<TQ, 4> out,
              ConstTensorView<std::uint8_t, 3> tree_mask, const AttentionParams& params = {},
              std::optional<TensorView<lse_t<TQ>, 3>> lse = std::nullopt) {
    attend_with(q, out, params, &tree_mask, lse);
  }

 private:
  template <typename TQ>
  void attend_with(ConstTensorView<TQ, 4> q, TensorView<TQ, 4> out, const AttentionParams& params,
                   const ConstTensorView<std::uint8_t, 3>* tree_mask,
                   const std::optional<TensorView<lse_t<TQ>, 3>>& lse) {
    static_assert(detail::is_storage_type_v<TQ>, "posenc: query must be a storage type");
    constexpr std::string_view fn = "KvCache::attend";
    const Eigen::Index q_len = q.dimension(1);
    detail::require(q.dimension(0) == batch_, fn, "q batch = ", q.dimension(0),
                    " must equal the cache's batch (", batch_, ")");
    detail::require(q_len >= 1 && q_len <= size_, fn, "q_len = ", q_len, " must be in [1, size = ",
                    size_, "]: append the new tokens' keys and values first");
    detail::require_window_within(fn, "rolling cache", window_, params);
    if (latent_) detail::require_latent_scale(fn, params);
    const ConstTensorView<T, 4> k_shape(k_.data(), batch_, size_, kv_heads_, d_);
    const ConstTensorView<T, 4> v_shape(k_.data(), batch_, size_, kv_heads_, dv_);
    AttentionMetadata checked;
    if (tree_mask) checked.tree_mask = *tree_mask;
    detail::require_view(fn, "q", q);
    detail::require_view(fn, "out", out);
    detail::validate_attention(fn, q, k_shape, v_shape, out, params, checked);
    if (lse) detail::validate_lse(fn, q, *lse);
    lse_t<TQ>* lse_rows = lse ? lse->data() : nullptr;

    const std::int64_t* qpos = query_positions(q_len);
    const Eigen::Index k_stride = max_len_ * kv_heads_ * d_;
    // A latent cache's values: the first dv_ of each key row.
    detail::AttentionKvRows<T> kv =
        latent_ ? detail::AttentionKvRows<T>{k_.data(), k_.data(), size_, kv_heads_, d_, dv_,
                                             k_stride, k_stride, kv_heads_ * d_, d_}
                : detail::AttentionKvRows<T>{k_.data(), v_.data(), size_, kv_heads_, d_, dv_,
                                             k_stride, max_len_ * kv_heads_ * dv_};
    kv.scales = &scales_;
    const detail::AttentionMetaRows meta{qpos, pos_.data(), nullptr, valid_.data(), max_len_,
                                         tree_mask ? tree_mask->data() : nullptr};
    const Eigen::Index heads = q.dimension(2);
    const auto run = [&](const auto& rows) {
      if (rope_) {
        using Acc = detail::compute_t<TQ>;
        auto& stage = staging_.convert<Acc>(q.data(), static_cast<std::size_t>(q.size()));
        apply_rope_inplace<Acc>(TensorView<Acc, 4>(stage.data(), batch_, q_len, heads, d_),
                                PositionIdsView(qpos, batch_, q_len), *rope_, rope_layout_);
        detail::run_fused_attention(stage.data(), out.data(), batch_, q_len, heads, rows, params,
                                    meta, workspace_, rope_->softmax_scale_multiplier, lse_rows);
      } else {
        detail::run_fused_attention(q.data(), out.data(), batch_, q_len, heads, rows, params,
                                    meta, workspace_, 1.0, lse_rows);
      }
    };
    if constexpr (std::is_same_v<T, float8_e4m3>) {
      if (!nan_codes_) return run(detail::as_finite_codes(kv));
    }
    run(kv);
  }

  /// Rounds src [batch, n, kv_heads, width] into slots [first, first + n) of dst (FP8: src /
  /// scale, or / head_scales[g] in kv head g when given; see to_cache_value).
  template <typename Src>
  void store(const Src* src, detail::cache_line_vector<T>& dst, Eigen::Index width,
             Eigen::Index first, Eigen::Index n, double scale,
             const std::vector<double>& head_scales = {}) {
    const Eigen::Index row = kv_heads_ * width;
    for (Eigen::Index b = 0; b < batch_; ++b) {
      const Src* from = src + b * n * row;
      T* to = dst.data() + (b * max_len_ + first) * row;
      nan_codes_ |= detail::store_cache_rows(from, to, n, kv_heads_, width, scale, head_scales);
    }
  }

  /// Removes slots [first, first + count) of each sequence: the later slots (K, V, position,
  /// validity) move down. std::copy is safe: the destination starts before the source.
  void remove_slots(Eigen::Index first, Eigen::Index count) {
    const Eigen::Index tail = size_ - first - count;
    for (Eigen::Index b = 0; b < batch_ && count > 0; ++b) {
      const Eigen::Index slot0 = b * max_len_ + first;
      const auto move_down = [&](auto& x, Eigen::Index width) {
        const auto from = x.begin() + (slot0 + count) * width;
        std::copy(from, from + tail * width, x.begin() + slot0 * width);
      };
      move_down(k_, kv_heads_ * d_);
      if (!latent_) move_down(v_, kv_heads_ * dv_);
      move_down(pos_, 1);
      move_down(valid_, 1);
    }
    size_ -= count;
  }

  /// Keeps each sequence's newest `keep` slots, moved to the front (the rolling eviction).
  void evict_all_but(Eigen::Index keep) {
    const Eigen::Index drop = size_ - keep;
    remove_slots(0, drop);
    evicted_ += drop;
  }

  /// The query rows' positions, gathered contiguously ([batch, q_len]) from the cache slots.
  const std::int64_t* query_positions(Eigen::Index q_len) {
    qpos_.resize(static_cast<std::size_t>(batch_ * q_len));
    for (Eigen::Index b = 0; b < batch_; ++b) {
      for (Eigen::Index i = 0; i < q_len; ++i) {
        qpos_[static_cast<std::size_t>(b * q_len + i)] =
            pos_[static_cast<std::size_t>(b * max_len_ + size_ - q_len + i)];
      }
    }
    return qpos_.data();
  }

  Eigen::Index batch_, max_len_, kv_heads_, d_, dv_;
  bool latent_;
  std::int64_t window_;
  Eigen::Index size_ = 0;
  std::int64_t evicted_ = 0;
  detail::cache_line_vector<T> k_, v_;  // rows start on a cache line (see there)
  KvScales scales_;
  bool nan_codes_ = false;  // an E4M3 NaN code was stored (attend then tests for them)
  std::vector<std::int64_t> pos_;
  std::vector<std::uint8_t> valid_;
  std::optional<RopeFrequencies> rope_;
  RopeLayout rope_layout_ = RopeLayout::kHalfSplit;
  // Reused across steps: they grow to the largest append / query chunk, then stay.
  detail::StagingBuffers staging_;
  std::vector<std::int64_t> qpos_;
  AttentionWorkspace workspace_;
};

}  // namespace posenc
