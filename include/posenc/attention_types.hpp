#pragma once
/// \file posenc/attention_types.hpp
/// Parameters and per-call metadata shared by ALiBi, the attention kernels and the KV cache.
///
///   out = softmax(scale * Q K^T + bias + mask) V
///
/// Shapes (BSHD, head_dim innermost): Q [batch, q_len, heads, head_dim],
/// K [batch, k_len, kv_heads, head_dim], V [batch, k_len, kv_heads, v_head_dim], out
/// [batch, q_len, heads, v_head_dim]; heads a multiple of kv_heads (GQA; MQA when kv_heads = 1).
/// Query head h reads kv head h / (heads / kv_heads) (HF repeat_kv order). v_head_dim is
/// usually head_dim; DeepSeek's MLA attends with q.k over 192 dims (128 nope + 64 rope) and
/// values of 128 (HF DeepseekV3Attention: qk_head_dim, v_head_dim), and the default scale
/// is 1 / sqrt(head_dim) of Q and K.
///
/// Scores: s = scale q.k, soft-capped to c tanh(s / c) when logit_softcap = c > 0 (Gemma-2),
/// then the biases (ALiBi, T5's relative bias, a caller's attention_bias: those given are
/// summed), then the mask.
///
/// Mask: causal attention aligns bottom-right (FlashAttention >= 2.1, TE causal_bottom_right):
/// query i sees key j iff j <= i + (k_len - q_len), so a chunk of q_len new tokens at the end
/// of k_len keys (chunked prefill, decode with q_len = 1) sees exactly its past. Key padding
/// (per-sequence lengths or a key mask) removes keys for every query. A row with no visible key
/// returns zeros, never NaN.
///
/// Non-finite input. A padding key (past key_lengths, key_mask 0, a cache's padding slot)
/// never reaches the output, whatever its K and V rows hold (unwritten memory, a pad token
/// whose 16-bit activations overflowed): the kernels skip its value row, since its weight 0
/// times NaN or inf is NaN. A NaN or +inf logit among the keys a row sees makes that row NaN
/// (out, and lse where asked), as softmax(S) V gives, and no other row; a -inf logit weighs 0,
/// and a row whose every visible logit is -inf returns zeros like a row with no visible key.
/// The masks computed per row (causal, window, chunk, tree) remove a key from the softmax
/// only: a NaN or inf in the V row of a key some rows of the same tile see may still reach
/// the others as 0 * V (as in FlashAttention's tiles and PyTorch's math path); such a key's
/// own row is NaN anyway. posenc::reference::attention sums over each row's visible keys only.
///
/// Sliding window (AttentionParams::sliding_window = W > 0; Mistral, Gemma-2/3 local layers,
/// Qwen2 with use_sliding_window): with a = i + (k_len - q_len), query i sees key j only if
/// a - j < W (causal: the W keys a - W + 1 .. a, itself included) or, bidirectional,
/// |a - j| < W (2W - 1 keys). This is HF transformers' sliding_window_overlay
/// (kv_idx > q_idx - sliding_window) and FlashAttention's window_size = (W - 1, 0) (causal) or
/// (W - 1, W - 1); implementations that use <= W instead see one key more. Like the causal mask
/// it counts key slots (cache indices), not positions.
///
/// Chunked attention (AttentionParams::attention_chunk_size = C > 0; Llama-4's RoPE layers):
/// on top of the other masks, query i sees key j only if floor(pos_q / C) == floor(pos_k / C),
/// from the tokens' absolute positions (below). With C = 3, causal, positions 0..5:
///
///   q\k 0 1 2 3 4 5
///    0   x . . . . .
///    1   x x . . . .
///    2   x x x . . .
///    3   . . . x . .
///    4   . . . x x .
///    5   . . . x x x
///
/// Positions (int64, >= 0) matter to positional schemes and chunks: ALiBi adds
/// -slope_h * (pos_q - pos_k) (causal) or -slope_h * |pos_q - pos_k| (bidirectional), always from
/// the tokens' absolute positions, never from tensor columns — so it stays right at decode
/// (one query at position t against cached keys) and under left padding.

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "posenc/detail/numeric.hpp"
#include "posenc/error.hpp"
#include "posenc/tensor.hpp"

namespace posenc {

/// Which keys a query may see (before key padding).
enum class MaskMode : std::uint8_t {
  kCausal = 0,         ///< key j visible to query i iff j <= i + k_len - q_len (bottom-right)
  kBidirectional = 1,  ///< every key visible (encoders); ALiBi uses -m |pos_q - pos_k|
};

constexpr std::string_view to_string(MaskMode mode) noexcept {
  switch (mode) {
    case MaskMode::kCausal: return "causal";
    case MaskMode::kBidirectional: return "bidirectional";
  }
  return "unknown";
}

/// Which position-dependent factor t(pos) multiplies a query's logits
/// (attention_temperature.hpp).
enum class TemperatureForm : std::uint8_t {
  /// Llama-4's NoPE layers: t = 1 + attn_scale ln(1 + floor((pos + 1) / floor_scale)).
  kLlama4 = 0,
  /// xAI's Grok-2 (config attn_temperature_len L; SGLang's xai_temperature_len), every layer:
  /// t = log2(pos) / log2(L) for pos > L, else 1.
  kXai = 1,
  /// The Mistral-3 family (Ministral-3, Devstral 2, Mistral Large 3; config
  /// rope_parameters.llama_4_scaling_beta), every layer:
  /// t = 1 + attn_scale ln(1 + floor(pos / floor_scale)), floor_scale = the YaRN
  /// original_max_position_embeddings. Llama-4's step at pos + 1, one position later.
  kMistral3 = 2,
};

constexpr std::string_view to_string(TemperatureForm form) noexcept {
  switch (form) {
    case TemperatureForm::kLlama4: return "llama4";
    case TemperatureForm::kXai: return "xai";
    case TemperatureForm::kMistral3: return "mistral3";
  }
  return "unknown";
}

/// A query temperature t(pos) (attention_temperature.hpp); the defaults are Llama-4's config
/// values.
struct AttentionTemperature {
  double floor_scale = 8192.0;  ///< kLlama4, kMistral3: positions per step of the floor; > 0
  double attn_scale = 0.1;      ///< kLlama4, kMistral3: slope of the log (Mistral's beta)
  TemperatureForm form = TemperatureForm::kLlama4;
  std::int64_t temperature_len = 0;  ///< kXai: L, the last position left at 1; >= 2
};

/// T5's bucketed relative attention bias (Raffel et al. 2020, §2.1; relative_bias.hpp): a
/// learned scalar per (bucket, head) added to every score, the bucket of the relative position
/// pos_k - pos_q. Build it with relative_position_bias() from the checkpoint's
/// relative_attention_bias table; the kernel reads by_distance.
struct RelativePositionBias {
  std::int64_t num_buckets = 32;    ///< relative_attention_num_buckets
  std::int64_t max_distance = 128;  ///< relative_attention_max_distance
  /// true: encoders (keys on both sides get buckets of their own); false: decoder
  /// self-attention (every later key shares bucket 0).
  bool bidirectional = true;
  Eigen::Index heads = 0;
  /// [num_buckets][heads]: the checkpoint's relative_attention_bias weight (HF nn.Embedding
  /// layout), the bias of head h in bucket k at table[k * heads + h].
  std::vector<double> table;
  /// S: the distance from which every bucket is its side's last. max_distance in exact
  /// arithmetic, but the float32 log can leave bucket(+-max_distance) one short when
  /// max_distance is just above the exact buckets (num_buckets 8320, max_distance 4161: the
  /// last bucket from 4162 on); relative_position_bias() finds it. 0 = max_distance.
  std::int64_t saturation_distance = 0;
  /// [heads][2 S + 1]: the table read at the bucket of pos_k - pos_q = r for r in [-S, S];
  /// farther distances take the end values (the buckets saturate there). What the fused kernel
  /// reads. relative_position_bias() checks that every entry is finite; attention calls check
  /// only the sizes.
  std::vector<double> by_distance;
};

/// Per-model attention configuration (plan once, reuse across layers and steps).
struct AttentionParams {
  MaskMode mask = MaskMode::kCausal;
  /// Multiplies Q K^T; unset = 1 / sqrt(head_dim). DeepSeek YaRN multiplies it by mscale^2
  /// (RopeFrequencies::softmax_scale_multiplier). Must be finite and > 0.
  std::optional<double> scale;
  /// ALiBi slopes, one per query head (alibi_slopes(heads) or a checkpoint's own); empty = no
  /// ALiBi. Must be finite and >= 0.
  std::vector<double> alibi_slopes;
  /// Gemma-2's attn_logit_softcapping c: scores s = scale q.k become c tanh(s / c), before the
  /// ALiBi bias and the mask (HF Gemma2Attention, FlashAttention's softcap). 0 = none; must be
  /// finite and >= 0.
  double logit_softcap = 0.0;
  /// GPT-OSS's learned attention sinks, one logit per query head (the checkpoint's
  /// self_attn.sinks); empty = none. Each row's softmax gets one more entry exp(sink_h) in its
  /// denominator, for a "key" with no value: weights_j = exp(s_j) / (exp(sink_h) + sum_k
  /// exp(s_k)), which need not sum to 1 (HF GptOssAttention: concatenate the sink to the masked
  /// logits, softmax, drop its column; FlashInfer / vLLM `sinks`). The sink is neither scaled
  /// nor soft-capped nor biased. A row with no visible key still gives 0. Must be finite.
  std::vector<double> sink_logits;
  /// Sliding window W (keys per query, the query's own included); 0 = no window. Must be >= 0.
  /// Key tiles outside every query's window are skipped: the cost grows with W, not k_len.
  std::int64_t sliding_window = 0;
  /// Chunked attention C (Llama-4's attention_chunk_size on its RoPE layers); 0 = none. Query
  /// and key must also share a chunk of absolute positions: floor(pos_q / C) == floor(pos_k / C),
  /// so the first query of each chunk sees only itself (causal). Positions, not slots: under
  /// left padding the chunks start at the sequence's first token, as HF's chunked_overlay
  /// (slot - left_padding) and vLLM's chunked local attention have them. Key tiles of other
  /// chunks are skipped: the cost grows with C, not k_len. Must be >= 0.
  std::int64_t attention_chunk_size = 0;
  /// A query temperature: each query row's logits also multiplied by t(pos_q)
  /// (AttentionTemperature: Llama-4's NoPE layers, Grok-2's every layer), folded into the scale
  /// when Q is loaded, so before the soft cap. Empty = none.
  std::optional<AttentionTemperature> query_temperature;
  /// T5's relative attention bias (relative_position_bias()), added to the scaled (and capped)
  /// scores as ALiBi's is; T5 itself does not scale q.k: set scale = 1. Empty = none.
  std::optional<RelativePositionBias> relative_bias;
  /// Threads the fused kernel may use (1 = the calling thread only). Work is split over
  /// (batch, kv_head, query tile); results do not depend on the thread count.
  int num_threads = 1;
};

/// Per-call positions and key padding. Every field is optional; all are views over the
/// caller's memory, which must outlive the call. Assigning a field rebinds it (OptionalView).
struct AttentionMetadata {
  /// [batch, q_len]; default: q_pos[b, i] = k_len - q_len + i (bottom-right alignment). That
  /// is negative for i < q_len - k_len, so a bidirectional call with q_len > k_len and chunks
  /// or a query temperature (which read the position) must give them.
  OptionalView<PositionIdsView> query_positions;
  /// [batch, k_len]; default: k_pos[b, j] = j.
  OptionalView<PositionIdsView> key_positions;
  /// [batch]; keys j >= key_lengths[b] are padding (right padding). In [0, k_len].
  OptionalView<ConstTensorView<std::int64_t, 1>> key_lengths;
  /// [batch, k_len]; 0 marks a padding key (left padding, packed or ragged batches).
  OptionalView<ConstTensorView<std::uint8_t, 2>> key_mask;
  /// Tree attention (speculative decoding: verifying a tree of draft tokens in one pass, as
  /// FlashInfer's custom_mask and vLLM's tree attention): [batch, q_len, q_len]; the queries are
  /// the last q_len keys, in an order where every token follows its parent, and query i sees
  /// the keys before them and draft token t only where tree_mask[b, i, t] != 0 (its ancestors
  /// and itself). Causal mode; entries with t > i must be 0. Positions are the caller's: a draft
  /// token sits at its parent's position + 1 (query_positions / key_positions, or the cache's).
  /// A sliding window W is the one of each draft token's own sequence, the prefix and its path:
  /// query i, seeing d_i draft tokens (its depth), sees the prefix's last W - d_i keys (its
  /// siblings' slots are not counted); every d_i must be <= W.
  OptionalView<ConstTensorView<std::uint8_t, 3>> tree_mask;
  /// An additive bias, [batch or 1, heads or 1, q_len, k_len] (broadcast over a dimension of
  /// 1, as PyTorch SDPA's float attn_mask and TransformerEngine's post_scale_bias), added to
  /// the scaled (and soft-capped) score of query i and key slot j before the mask: the learned
  /// 2-D relative position bias of BEiT / data2vec-vision / Swin windows
  /// (relative_bias_2d.hpp), or any bias a model computes itself. A -inf entry gives weight
  /// exactly 0 (an additive mask); a row whose visible keys are all -inf returns zeros. Unlike
  /// key padding it does not keep the key's V row out: 0 times a NaN or inf there is NaN, as
  /// in PyTorch (use key_mask / key_lengths for slots whose values may be garbage). A NaN or
  /// +inf entry at a key the row sees makes the row NaN, as softmax defines; at a masked key it
  /// has no effect. Float for every storage type.
  OptionalView<ConstTensorView<float, 4>> attention_bias;
};

/// The scales of an FP8 KV cache (vLLM's k_scale / v_scale, from a checkpoint's quantisation or
/// calibration): a key x is stored as fp8(x / k), a value as fp8(x / v), and attention reads
/// them as code * k and code * v. 1 for every other storage type.
struct KvScales {
  KvScales() = default;
  KvScales(double k_scale, double v_scale) : k(k_scale), v(v_scale) {}
  /// Scales per kv head (see k_heads).
  static KvScales per_head(std::vector<double> k_scales, std::vector<double> v_scales) {
    KvScales s;
    s.k_heads = std::move(k_scales);
    s.v_heads = std::move(v_scales);
    return s;
  }

  double k = 1.0;
  double v = 1.0;
  /// Per kv head (compressed-tensors' kv_cache_scheme with strategy "attn_head", whose k_scale
  /// / v_scale have one entry per kv head): when non-empty, kv head g is stored and read with
  /// k_heads[g] / v_heads[g] in place of k / v. Empty or one entry per kv head.
  std::vector<double> k_heads;
  std::vector<double> v_heads;

  double k_of(Eigen::Index g) const { return k_heads.empty() ? k : k_heads[static_cast<std::size_t>(g)]; }
  double v_of(Eigen::Index g) const { return v_heads.empty() ? v : v_heads[static_cast<std::size_t>(g)]; }
};

namespace detail {

/// Scales of a cache holding `stored` slots: finite, > 0, set while the cache is empty (codes
/// already stored were quantised with the old ones); a latent cache (values = the first
/// v_head_dim of each key row) has one scale for both.
inline void validate_kv_scales(std::string_view fn, const KvScales& s, Eigen::Index stored,
                               bool latent, Eigen::Index kv_heads) {
  // Stores divide by the scale in float: it must be a normal float (1e-50 became 0, and a zero
  // key was stored as 0 / 0 = NaN).
  const auto normal_float = [](double x) {
    return x >= static_cast<double>(std::numeric_limits<float>::min()) &&
           x <= static_cast<double>(std::numeric_limits<float>::max());
  };
  constexpr std::string_view range =
      " must be in [FLT_MIN, FLT_MAX] (stores divide by it in float)";
  require(normal_float(s.k), fn, "k_scale = ", s.k, range);
  require(normal_float(s.v), fn, "v_scale = ", s.v, range);
  for (const auto* heads : {&s.k_heads, &s.v_heads}) {
    const char* name = heads == &s.k_heads ? "k_heads" : "v_heads";
    require(heads->empty() || static_cast<Eigen::Index>(heads->size()) == kv_heads, fn, name,
            " has ", heads->size(), " scales; it must be empty or hold one per kv head (",
            kv_heads, ")");
    for (std::size_t g = 0; g < heads->size(); ++g) {
      require(normal_float((*heads)[g]), fn, name, "[", g, "] = ", (*heads)[g], range);
    }
  }
  require(!latent || (s.k == s.v && s.k_heads == s.v_heads), fn, "k_scale = ", s.k,
          " and v_scale = ", s.v, " (and k_heads / v_heads)",
          " must be equal in a latent cache: its values are the first v_head_dim of each key row");
  require(stored == 0, fn, "the cache holds ", stored, " slots quantised with the current ",
          "scales: set the scales before the first append (or after emptying it)");
}

inline void validate_temperature(std::string_view fn, const AttentionTemperature& t) {
  require(t.form == TemperatureForm::kLlama4 || t.form == TemperatureForm::kXai ||
              t.form == TemperatureForm::kMistral3,
          fn, "temperature form = ", static_cast<int>(t.form), " is not a TemperatureForm");
  if (t.form == TemperatureForm::kXai) {
    require(t.temperature_len >= 2, fn, "temperature_len = ", t.temperature_len,
            " must be >= 2 (t = log2(pos) / log2(temperature_len))");
    return;
  }
  require(std::isfinite(t.floor_scale) && t.floor_scale > 0.0, fn, "floor_scale = ",
          t.floor_scale, " must be finite and > 0");
  // t >= 1 for attn_scale >= 0; a negative slope drove t, and so the softmax scale, to 0 and
  // below. The largest t (at 2^53) must also be a float, the kernels' compute type: a tiny
  // floor_scale or a huge slope gave inf (and 0 * inf = NaN scores).
  require(std::isfinite(t.attn_scale) && t.attn_scale >= 0.0, fn, "attn_scale = ", t.attn_scale,
          " must be finite and >= 0");
  const double t_max = 1.0 + t.attn_scale * std::log1p(std::floor(
                                                 (0x1p53 + 1.0) / t.floor_scale));
  require(t_max <= static_cast<double>(std::numeric_limits<float>::max()), fn,
          "attn_scale = ", t.attn_scale, " and floor_scale = ", t.floor_scale,
          " give t(2^53) = ", t_max, ", past float's range");
}

/// T5's bucket of relative position rel = pos_k - pos_q (HF T5Attention._relative_position_bucket,
/// Mesh TensorFlow's _relative_position_bucket): half the buckets (of each side, when
/// bidirectional) exact, the rest logarithmic up to max_distance, then the last. The log branch
/// is evaluated in float as HF's float32 tensors are (truncated toward zero).
inline std::int64_t relative_bucket(std::int64_t rel, std::int64_t num_buckets,
                                    std::int64_t max_distance, bool bidirectional) {
  std::int64_t bucket = 0, n = num_buckets;
  if (bidirectional) {
    n /= 2;
    if (rel > 0) bucket += n;
    rel = rel < 0 ? -rel : rel;
  } else {
    rel = rel < 0 ? -rel : 0;
  }
  const std::int64_t max_exact = n / 2;
  if (rel < max_exact) return bucket + rel;
  const float ratio = static_cast<float>(rel) / static_cast<float>(max_exact);
  const auto denom = static_cast<float>(std::log(static_cast<double>(max_distance) /
                                                 static_cast<double>(max_exact)));
  const float large = std::log(ratio) / denom * static_cast<float>(n - max_exact);
  // rel <= 2^53 keeps large below 2^31; truncation as torch's .to(torch.long).
  const std::int64_t log_bucket = max_exact + static_cast<std::int64_t>(large);
  return bucket + std::min(log_bucket, n - 1);
}

/// num_buckets / max_distance that make relative_bucket well defined: at least one exact
/// bucket (max_exact >= 1) and max_distance above it.
inline void validate_relative_buckets(std::string_view fn, std::int64_t num_buckets,
                                      std::int64_t max_distance, bool bidirectional) {
  const std::int64_t min_buckets = bidirectional ? 4 : 2;
  require(num_buckets >= min_buckets && num_buckets <= (std::int64_t{1} << 20), fn,
          "num_buckets = ", num_buckets, " must be in [", min_buckets, ", 2^20] (",
          bidirectional ? "bidirectional" : "unidirectional", ": at least one exact bucket)");
  const std::int64_t max_exact = (bidirectional ? num_buckets / 2 : num_buckets) / 2;
  require(max_distance > max_exact && max_distance <= (std::int64_t{1} << 20), fn,
          "max_distance = ", max_distance, " must be in (", max_exact, " (the exact buckets), 2^20]");
}

/// S of RelativePositionBias::saturation_distance (0 = max_distance).
inline std::int64_t relative_saturation(const RelativePositionBias& r) {
  return r.saturation_distance > 0 ? r.saturation_distance : r.max_distance;
}

inline void validate_relative_bias(std::string_view fn, const RelativePositionBias& r,
                                   Eigen::Index heads) {
  validate_relative_buckets(fn, r.num_buckets, r.max_distance, r.bidirectional);
  const std::int64_t sat = relative_saturation(r);
  require(sat >= r.max_distance && sat <= (std::int64_t{1} << 21), fn,
          "relative_bias.saturation_distance = ", r.saturation_distance,
          " must be 0 or in [max_distance = ", r.max_distance, ", 2^21]");
  require(r.heads == heads, fn, "relative_bias has ", r.heads, " heads; q has heads = ", heads);
  // Sizes compared by division: num_buckets * heads (and heads * span) overflowed for a q
  // whose head count an address space still holds.
  const auto nb = static_cast<std::size_t>(r.num_buckets);
  const auto span = static_cast<std::size_t>(2 * sat + 1);
  const auto h = static_cast<std::size_t>(heads);
  require(r.table.size() % nb == 0 && r.table.size() / nb == h, fn, "relative_bias.table has ",
          r.table.size(), " entries; it must have num_buckets * heads = ", r.num_buckets, " * ",
          heads);
  require(r.by_distance.size() % span == 0 && r.by_distance.size() / span == h, fn,
          "relative_bias.by_distance has ", r.by_distance.size(), " entries; it must have heads * ",
          "(2 saturation_distance + 1) = ", heads, " * ", span,
          " (build it with relative_position_bias)");
  // The entries' finiteness is checked once, by relative_position_bias: a per-call pass over
  // heads x (2 max_distance + 1) values would cost a T5 decode step more than its bias does.
}

/// The bias of head h at pos_k - pos_q = rel (validated r).
inline double relative_bias_at(const RelativePositionBias& r, Eigen::Index h, std::int64_t rel) {
  const std::int64_t md = relative_saturation(r);
  const std::int64_t at = std::clamp<std::int64_t>(rel, -md, md) + md;
  return r.by_distance[static_cast<std::size_t>(h * (2 * md + 1) + at)];
}

/// t(position) in double (validated parameters, position in [0, 2^53]).
inline double temperature_at(std::int64_t position, const AttentionTemperature& t) {
  if (t.form == TemperatureForm::kXai) {
    return position > t.temperature_len
               ? std::log2(static_cast<double>(position)) /
                     std::log2(static_cast<double>(t.temperature_len))
               : 1.0;
  }
  // Llama-4 steps at floor((pos + 1) / floor_scale), Mistral-3 at floor(pos / floor_scale).
  const double steps_at = static_cast<double>(position) +
                          (t.form == TemperatureForm::kLlama4 ? 1.0 : 0.0);
  return 1.0 + t.attn_scale * std::log1p(std::floor(steps_at / t.floor_scale));
}

/// out[b, h, i, j] = value(h, query_positions(b, i), key_positions(b, j)) rounded to T: the
/// materialising bias builders (alibi_bias, relative_position_bias_matrix), shapes validated.
template <typename T, typename Value>
void fill_position_bias(PositionIdsView query_positions, PositionIdsView key_positions,
                        TensorView<T, 4> out, Value value) {
  for (Eigen::Index b = 0; b < out.dimension(0); ++b) {
    for (Eigen::Index h = 0; h < out.dimension(1); ++h) {
      for (Eigen::Index i = 0; i < out.dimension(2); ++i) {
        for (Eigen::Index j = 0; j < out.dimension(3); ++j) {
          out(b, h, i, j) = from_value<T>(value(h, query_positions(b, i), key_positions(b, j)));
        }
      }
    }
  }
}

/// Largest position posenc accepts (double counts exactly up to 2^53).
inline constexpr std::int64_t kMaxAttentionPosition = std::int64_t{1} << 53;

/// positions: [batch, len] with every entry in [0, 2^53]; len_name names the second axis in the
/// message ("q_len", "k_len", "n").
inline void validate_positions(std::string_view function, std::string_view name,
                               PositionIdsView positions, Eigen::Index batch, Eigen::Index len,
                               std::string_view len_name = "seq") {
  require(positions.dimension(0) == batch && positions.dimension(1) == len, function, name,
          " shape [", positions.dimension(0), ", ", positions.dimension(1), "] must be [batch, ",
          len_name, "] = [", batch, ", ", len, "]");
  require(positions.data() != nullptr || batch * len == 0, function, name, " data is null");
  for (Eigen::Index b = 0; b < batch; ++b) {
    for (Eigen::Index s = 0; s < len; ++s) {
      const std::int64_t p = positions(b, s);
      if (p < 0 || p > kMaxAttentionPosition) {
        throw_invalid_argument(function, name, "[", b, ", ", s, "] = ", p,
                               " must be in [0, 2^53]");
      }
    }
  }
}

/// One value per query head, each finite (and >= 0 when non_negative): ALiBi slopes, sinks.
inline void validate_per_head(std::string_view function, std::string_view name,
                              const std::vector<double>& values, Eigen::Index heads,
                              bool non_negative) {
  require(static_cast<Eigen::Index>(values.size()) == heads, function, name, " has ",
          values.size(), " entries; it must have one per query head (heads = ", heads, ")");
  for (std::size_t h = 0; h < values.size(); ++h) {
    require(std::isfinite(values[h]) && (!non_negative || values[h] >= 0.0), function, name,
            "[", h, "] = ", values[h], non_negative ? " must be finite and >= 0"
                                                    : " must be finite");
  }
}

inline void validate_slopes(std::string_view function, const std::vector<double>& slopes,
                            Eigen::Index heads) {
  validate_per_head(function, "alibi_slopes", slopes, heads, true);
}

/// tree_mask: [batch, q_len, q_len] for the last q_len of k_len keys, causal, t <= i, no
/// path longer than the sliding window (see AttentionMetadata::tree_mask).
inline void validate_tree_mask(std::string_view fn, ConstTensorView<std::uint8_t, 3> tree,
                               Eigen::Index batch, Eigen::Index q_len, Eigen::Index k_len,
                               const AttentionParams& params) {
  require(tree.dimension(0) == batch && tree.dimension(1) == q_len && tree.dimension(2) == q_len,
          fn, "tree_mask shape [", tree.dimension(0), ", ", tree.dimension(1), ", ",
          tree.dimension(2), "] must be [batch, q_len, q_len] = [", batch, ", ", q_len, ", ",
          q_len, "]");
  require(tree.data() != nullptr, fn, "tree_mask data is null");
  require(params.mask == MaskMode::kCausal, fn, "tree_mask needs the causal mask, not ",
          to_string(params.mask));
  require(q_len <= k_len, fn, "tree_mask: q_len = ", q_len, " must be <= k_len = ", k_len,
          " (the draft tokens are the last q_len keys)");
  for (Eigen::Index b = 0; b < batch; ++b) {
    for (Eigen::Index i = 0; i < q_len; ++i) {
      Eigen::Index depth = 0;
      for (Eigen::Index t = 0; t <= i; ++t) depth += tree(b, i, t) != 0;
      for (Eigen::Index t = i + 1; t < q_len; ++t) {
        require(tree(b, i, t) == 0, fn, "tree_mask[", b, ", ", i, ", ", t, "] = ",
                static_cast<int>(tree(b, i, t)), " must be 0: draft token ", t,
                " comes after query ", i, " (list every token after its parent)");
      }
      // The window of a draft token's own sequence (prefix and path) ends at the token and
      // counts only its path's slots; a path longer than the window would lose its oldest
      // ancestors too, which the kernel does not cut.
      require(params.sliding_window == 0 || depth <= params.sliding_window, fn,
              "tree_mask: query ", i, " of sequence ", b, " sees ", depth,
              " draft tokens, more than sliding_window = ", params.sliding_window,
              " (a path must fit in the window)");
    }
  }
}

/// The checks of attention()'s parameters that need no tensor but the head counts (also run
/// by the packed calls when no sequence has a query, so a bad call throws whatever the batch).
inline void validate_attention_params(std::string_view fn, const AttentionParams& params,
                                      Eigen::Index heads, Eigen::Index kv_heads) {
  require(heads > 0 && kv_heads > 0, fn, "heads = ", heads, " and kv_heads = ", kv_heads,
          " must be > 0");
  require(heads % kv_heads == 0, fn, "heads = ", heads, " must be a multiple of kv_heads = ",
          kv_heads, " (GQA / MQA)");
  require(params.mask == MaskMode::kCausal || params.mask == MaskMode::kBidirectional, fn,
          "mask = ", static_cast<int>(params.mask), " is not a MaskMode");
  if (params.scale) {
    require(std::isfinite(*params.scale) && *params.scale > 0.0, fn, "scale = ", *params.scale,
            " must be finite and > 0");
  }
  require(std::isfinite(params.logit_softcap) && params.logit_softcap >= 0.0, fn,
          "logit_softcap = ", params.logit_softcap, " must be finite and >= 0 (0 = none)");
  require(params.sliding_window >= 0, fn, "sliding_window = ", params.sliding_window,
          " must be >= 0 (0 = no window)");
  if (params.query_temperature) validate_temperature(fn, *params.query_temperature);
  if (params.relative_bias) validate_relative_bias(fn, *params.relative_bias, heads);
  require(params.attention_chunk_size >= 0, fn, "attention_chunk_size = ",
          params.attention_chunk_size, " must be >= 0 (0 = no chunks)");
  require(params.num_threads >= 1, fn, "num_threads = ", params.num_threads, " must be >= 1");
  if (!params.alibi_slopes.empty()) validate_slopes(fn, params.alibi_slopes, heads);
  if (!params.sink_logits.empty()) {
    validate_per_head(fn, "sink_logits", params.sink_logits, heads, false);
  }
}

/// A tensor the caller passed: extents an address space can hold (a view over a small buffer
/// may claim any, and products of them overflowed Index in the kernels), and data unless it
/// is empty.
template <typename View>
void require_view(std::string_view fn, std::string_view name, const View& v) {
  constexpr int rank = View::NumDimensions;
  std::array<Eigen::Index, std::size_t{rank}> dims{};
  for (int a = 0; a < rank; ++a) dims[static_cast<std::size_t>(a)] = v.dimension(a);
  std::size_t elements = 0;
  if (!addressable(dims.data(), dims.size(), sizeof(typename View::Scalar), &elements)) {
    std::string shape;
    for (const Eigen::Index e : dims) shape += (shape.empty() ? "" : ", ") + std::to_string(e);
    throw_invalid_argument(fn, name, " shape [", shape,
                           "] exceeds the addressable size (PTRDIFF_MAX bytes)");
  }
  require(v.data() != nullptr || elements == 0, fn, name, " data is null");
}

/// attention_bias must be [batch or 1, heads or 1, q_len, k_len] over memory.
inline void validate_attention_bias(std::string_view fn, const ConstTensorView<float, 4>& bias,
                                    Eigen::Index batch, Eigen::Index heads, Eigen::Index q_len,
                                    Eigen::Index k_len) {
  require((bias.dimension(0) == batch || bias.dimension(0) == 1) &&
              (bias.dimension(1) == heads || bias.dimension(1) == 1) &&
              bias.dimension(2) == q_len && bias.dimension(3) == k_len,
          fn, "attention_bias shape [", bias.dimension(0), ", ", bias.dimension(1), ", ",
          bias.dimension(2), ", ", bias.dimension(3), "] must be [batch or 1, heads or 1, q_len, ",
          "k_len] = [", batch, " or 1, ", heads, " or 1, ", q_len, ", ", k_len, "]");
  require_view(fn, "attention_bias", bias);
}

/// Checks every shape, parameter and metadata entry of an attention call; throws
/// std::invalid_argument naming the first bad one. q: [batch, q_len, heads, d];
/// k: [batch, k_len, kv_heads, d]; v: [batch, k_len, kv_heads, dv]; out: [batch, q_len, heads, dv].
template <typename Q, typename K, typename V, typename O>
void validate_attention(std::string_view fn, const Q& q, const K& k, const V& v, const O& out,
                        const AttentionParams& params, const AttentionMetadata& meta) {
  const Eigen::Index batch = q.dimension(0), q_len = q.dimension(1), heads = q.dimension(2),
                     d = q.dimension(3);
  const Eigen::Index k_len = k.dimension(1), kv_heads = k.dimension(2);
  require(batch > 0 && q_len > 0 && heads > 0 && d > 0, fn, "q shape [", batch, ", ", q_len,
          ", ", heads, ", ", d, "] must have no zero dimension");
  require(k.dimension(0) == batch, fn, "k batch = ", k.dimension(0), " must equal q batch (",
          batch, ")");
  require(k_len > 0 && kv_heads > 0, fn, "k shape [", k.dimension(0), ", ", k_len, ", ",
          kv_heads, ", ", k.dimension(3), "] must have no zero dimension");
  require(k.dimension(3) == d, fn, "k head_dim = ", k.dimension(3), " must equal q head_dim (",
          d, ")");
  const Eigen::Index dv = v.dimension(3);
  require(v.dimension(0) == batch && v.dimension(1) == k_len && v.dimension(2) == kv_heads &&
              dv > 0,
          fn, "v shape [", v.dimension(0), ", ", v.dimension(1), ", ", v.dimension(2), ", ", dv,
          "] must be [batch, k_len, kv_heads, v_head_dim > 0] = [", batch, ", ", k_len, ", ",
          kv_heads, ", v_head_dim]");
  require(out.dimension(0) == batch && out.dimension(1) == q_len && out.dimension(2) == heads &&
              out.dimension(3) == dv,
          fn, "out shape [", out.dimension(0), ", ", out.dimension(1), ", ", out.dimension(2),
          ", ", out.dimension(3), "] must be [batch, q_len, heads, v_head_dim] = [", batch, ", ",
          q_len, ", ", heads, ", ", dv, "]");
  validate_attention_params(fn, params, heads, kv_heads);
  if (meta.query_positions) {
    validate_positions(fn, "query_positions", *meta.query_positions, batch, q_len, "q_len");
  }
  if (meta.key_positions) validate_positions(fn, "key_positions", *meta.key_positions, batch, k_len, "k_len");
  // Positions are >= 0; the default query positions k_len - q_len + i are not when q_len >
  // k_len. Causal, such a query sees no key; bidirectional, it sees them all, and chunks
  // (floor(pos / C)) and temperatures (log of the position) would read the negative position.
  require(params.mask != MaskMode::kBidirectional || meta.query_positions || q_len <= k_len ||
              (params.attention_chunk_size == 0 && !params.query_temperature),
          fn, "q_len = ", q_len, " > k_len = ", k_len,
          " puts the default query positions k_len - q_len + i below 0, which ",
          params.attention_chunk_size > 0 ? "attention_chunk_size" : "query_temperature",
          " reads in bidirectional attention: pass query_positions");
  if (meta.key_lengths) {
    require(meta.key_lengths->dimension(0) == batch, fn, "key_lengths has ",
            meta.key_lengths->dimension(0), " entries; it must have batch = ", batch);
    require(meta.key_lengths->data() != nullptr, fn, "key_lengths data is null");
    for (Eigen::Index b = 0; b < batch; ++b) {
      const std::int64_t len = (*meta.key_lengths)(b);
      require(len >= 0 && len <= k_len, fn, "key_lengths[", b, "] = ", len, " must be in [0, ",
              k_len, "]");
    }
  }
  if (meta.key_mask) {
    require(meta.key_mask->dimension(0) == batch && meta.key_mask->dimension(1) == k_len, fn,
            "key_mask shape [", meta.key_mask->dimension(0), ", ", meta.key_mask->dimension(1),
            "] must be [batch, k_len] = [", batch, ", ", k_len, "]");
    require(meta.key_mask->data() != nullptr, fn, "key_mask data is null");
  }
  if (meta.tree_mask) validate_tree_mask(fn, *meta.tree_mask, batch, q_len, k_len, params);
  if (meta.attention_bias) {
    validate_attention_bias(fn, *meta.attention_bias, batch, heads, q_len, k_len);
  }
}

}  // namespace detail
}  // namespace posenc
