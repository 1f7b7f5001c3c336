#pragma once
/// \file posenc/model_config.hpp
/// What posenc takes from a model's configuration, whichever file it came from: a Hugging Face
/// config.json (hf_config.hpp, load_hf_config) or a GGUF file's metadata (gguf_config.hpp,
/// load_gguf_config). The Hf prefix is historical: the struct and the per-layer helpers below
/// serve both readers. No JSON dependency.

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "posenc/alibi.hpp"
#include "posenc/attention_temperature.hpp"
#include "posenc/attention_types.hpp"
#include "posenc/decomposed_rel_pos.hpp"
#include "posenc/dual_chunk_params.hpp"
#include "posenc/error.hpp"
#include "posenc/mrope.hpp"
#include "posenc/relative_bias_2d.hpp"
#include "posenc/rope_frequencies.hpp"
#include "posenc/rope_params.hpp"
#include "posenc/sine_embedding_2d.hpp"
#include "posenc/sinusoidal.hpp"
#include "posenc/swin_window.hpp"

namespace posenc {

/// How a model encodes positions, as far as its config says.
enum class HfPositionScheme : std::uint8_t {
  kRope = 0,      ///< rotary (RopeParams per layer type)
  kAlibi = 1,     ///< linear attention biases (alibi_slopes)
  kAbsolute = 2,  ///< learned / sinusoidal absolute embeddings (nothing for RoPE or ALiBi)
  /// T5's bucketed relative attention bias (relative_attention_num_buckets /
  /// relative_attention_max_distance; the table is a weight: relative_position_bias())
  kRelativeBias = 3,
  /// a learned 2-D relative-position bias table over the patch window (BEiT / data2vec-vision:
  /// use_relative_position_bias, use_shared_relative_position_bias): HfModelConfig::
  /// relative_bias_2d, the bias from relative_position_bias_2d (relative_bias_2d.hpp); Swin's
  /// shifted windows too (HfModelConfig::swin, swin_window.hpp)
  kRelativeBias2d = 4,
  /// decomposed relative positions per query (SAM's image encoder: use_rel_pos):
  /// HfModelConfig::decomposed_rel_pos, the bias from decomposed_rel_pos_bias
  /// (decomposed_rel_pos.hpp); HfModelConfig::absolute too with use_abs_pos
  kDecomposedRelPos = 5,
  /// 2-D embeddings of a detection transformer's backbone feature maps, added to the queries
  /// and keys of its encoder layers (DETR family, RT-DETR): HfModelConfig::feature_map,
  /// built by sine_embedding_2d / learned_embedding_2d (sine_embedding_2d.hpp) or
  /// sincos_grid_rt_detr (sincos_grid.hpp)
  kFeatureMap = 6,
};

constexpr std::string_view to_string(HfPositionScheme scheme) noexcept {
  switch (scheme) {
    case HfPositionScheme::kRope: return "rope";
    case HfPositionScheme::kAlibi: return "alibi";
    case HfPositionScheme::kAbsolute: return "absolute";
    case HfPositionScheme::kRelativeBias: return "relative_bias";
    case HfPositionScheme::kRelativeBias2d: return "relative_bias_2d";
    case HfPositionScheme::kDecomposedRelPos: return "decomposed_rel_pos";
    case HfPositionScheme::kFeatureMap: return "feature_map";
  }
  return "unknown";
}

/// Scheme kAbsolute: what the position table is.
enum class HfAbsoluteKind : std::uint8_t {
  /// a trained 1-D table (learned.hpp): max_position_embeddings rows after
  /// HfModelConfig::absolute_position_offset leading ones
  kLearned = 0,
  kSinusoidal = 1,   ///< fixed 1-D sinusoids (sinusoidal.hpp), HfAbsolutePositions::sinusoidal
  /// a trained table over the image's patch grid (ViT, DeiT, DINOv2, CLIP / SigLIP vision),
  /// resized for other resolutions by resize_learned_grid (learned_grid.hpp)
  kLearnedGrid = 2,
  kSincosGrid = 3,   ///< a fixed 2-D sin-cos grid (ViT-MAE): sincos_grid_mae (sincos_grid.hpp)
};

constexpr std::string_view to_string(HfAbsoluteKind kind) noexcept {
  switch (kind) {
    case HfAbsoluteKind::kLearned: return "learned";
    case HfAbsoluteKind::kSinusoidal: return "sinusoidal";
    case HfAbsoluteKind::kLearnedGrid: return "learned grid";
    case HfAbsoluteKind::kSincosGrid: return "sin-cos grid";
  }
  return "unknown";
}

/// Scheme kAbsolute: the table a model adds to its token (or patch) embeddings.
struct HfAbsolutePositions {
  HfAbsoluteKind kind = HfAbsoluteKind::kLearned;
  /// kSinusoidal: the family's formula, which the checkpoints disagree on (field notes §2.8):
  /// Marian and Pegasus [sin | cos] with w_i = 10000^(-2i/d) (kSinCosVaswani); fairseq's
  /// M2M-100, NLLB-MoE, XGLM, Speech2Text and FSMT [sin | cos] with 10000^(-i/(d/2 - 1))
  /// (kSinCos); XLM's sinusoidal_embeddings and DistilBERT's sinusoidal_pos_embds interleaved
  /// (kInterleaved). Empty when position_embedding_type says "sinusoidal" for a family posenc
  /// does not know: the formula is then the model code's.
  std::optional<SinusoidalParams> sinusoidal;
  /// Grids: patches per column and per row (image_size / patch_size per axis; 0 when the
  /// config gives neither), in row-major order after leading_rows rows of their own (a class
  /// token 1, DeiT's class and distillation tokens 2, I-JEPA and SigLIP 0).
  Eigen::Index grid_h = 0;
  Eigen::Index grid_w = 0;
  Eigen::Index leading_rows = 0;
  /// Grids: the table's width (hidden_size); kSincosGrid also ViT-MAE's decoder table's
  /// (decoder_hidden_size, over the same grid).
  Eigen::Index embed_dim = 0;
  Eigen::Index decoder_embed_dim = 0;
  /// Encoder-decoder models: the encoder's table when it differs from the decoder's. Whisper's
  /// encoder adds fixed sinusoids (kSinCos: OpenAI's sinusoids(), stored in the checkpoint as
  /// embed_positions) to its audio frames; its decoder's table is learned. Empty otherwise.
  std::optional<SinusoidalParams> encoder_sinusoidal;
  /// Encoder-decoder models: max_source_positions, the encoder's rows (Whisper 1500 frames,
  /// Speech2Text 6000); 0 when absent. The decoder's (max_target_positions) is
  /// HfModelConfig::max_position_embeddings when the config gives no such key.
  std::int64_t encoder_max_positions = 0;
};

/// Scheme kRelativeBias2d: BEiT's relative-position bias tables (BeitRelativePositionBias).
/// Each is [relative_bias_2d_table_rows(window), heads] in the checkpoint; a layer adds the bias
/// of the shared table and of its own (both when both flags are set) as
/// AttentionMetadata::attention_bias. At another resolution the tables are resized for the new
/// window (resize_relative_position_bias_2d), as HF does.
struct HfRelativeBias2d {
  /// image_size / patch_size per axis, after the class token (HF: patch_shape)
  RelativeBias2dWindow window;
  bool shared_table = false;     ///< use_shared_relative_position_bias: one for every layer
  bool per_layer_tables = false;  ///< use_relative_position_bias: one in each layer
  /// Swin-v2: no table in the checkpoint; each layer computes its own from an MLP
  /// (continuous_position_bias_table; HfModelConfig::swin has each stage's window).
  bool per_layer_mlp = false;
};

/// One stage of a Swin encoder at the config's image_size: depth blocks of hidden_size =
/// embed_dim 2^i channels in num_heads heads, over a height x width patch map; even blocks
/// attend in `block`'s windows, odd ones in `shifted_block`'s (the family's rule applied).
struct HfSwinStage {
  Eigen::Index depth = 0;        ///< depths[i]
  Eigen::Index hidden_size = 0;  ///< embed_dim 2^i
  Eigen::Index num_heads = 0;    ///< num_heads[i]
  SwinWindowLayout block;          ///< blocks 0, 2, 4, ...: shift 0
  SwinWindowLayout shifted_block;  ///< blocks 1, 3, ...: shift window_size / 2 unless the map fits
  /// Side of the stage's bias tables: window_size (Swin: the checkpoint's tables), or the
  /// stage's window (Swin-v2: its MLP evaluated at construction).
  Eigen::Index table_window = 0;
  Eigen::Index pretrained_window = 0;  ///< Swin-v2 pretrained_window_sizes[i]; 0 = none
};

/// Swin, Swin-v2, Donut-Swin and MaskFormer-Swin (scheme kRelativeBias2d): a hierarchy of
/// stages, each halving the patch map and doubling the width (swin_window.hpp runs a block).
struct HfSwin {
  SwinWindowRule rule = SwinWindowRule::kSwin;
  Eigen::Index window_size = 0;  ///< the config's window_size
  Eigen::Index image_h = 0, image_w = 0, patch_h = 0, patch_w = 0;
  std::vector<HfSwinStage> stages;
};

/// Scheme kDecomposedRelPos: SAM's image encoder (SamVisionAttention with use_rel_pos). Global
/// layers attend over the whole grid_h x grid_w patch grid with tables of 2 grid - 1 rows; the
/// others inside window_size x window_size windows (the grid padded to whole windows, never
/// shifted: swin_partition_windows with shift 0) with tables of 2 window_size - 1 rows.
struct HfDecomposedRelPos {
  Eigen::Index grid_h = 0, grid_w = 0;  ///< image_size / patch_size
  Eigen::Index window_size = 0;         ///< the windowed layers' side (0: every layer global)
  std::vector<bool> global_layers;      ///< per layer [num_hidden_layers]: global attention
};

/// Scheme kFeatureMap: which embedding a detection transformer gives its feature maps.
enum class HfFeatureMapKind : std::uint8_t {
  kSine = 0,     ///< DETR's sine embedding of the padded map: sine_embedding_2d
  kLearned = 1,  ///< DETR's learned row / column tables: learned_embedding_2d
  kSincosGrid = 2,  ///< RT-DETR's fixed table at raw indices, no mask: sincos_grid_rt_detr
};

constexpr std::string_view to_string(HfFeatureMapKind kind) noexcept {
  switch (kind) {
    case HfFeatureMapKind::kSine: return "sine";
    case HfFeatureMapKind::kLearned: return "learned";
    case HfFeatureMapKind::kSincosGrid: return "sin-cos grid";
  }
  return "unknown";
}

/// Scheme kFeatureMap: the embedding of every backbone level the encoder attends over
/// (DetrConvModel's position_embedding; RT-DETR's AIFI layers).
struct HfFeatureMapPositions {
  HfFeatureMapKind kind = HfFeatureMapKind::kSine;
  Eigen::Index embed_dim = 0;  ///< channels per pixel: d_model (RT-DETR: encoder_hidden_dim)
  /// kSine: the model's recipe (num_pos_feats = embed_dim / 2; Deformable DETR's offset 0.5,
  /// DAB-DETR's and Grounding DINO's temperatures). kLearned: num_pos_feats, order kXY.
  SineEmbedding2dParams sine;
  /// kLearned: rows of row_embeddings and of column_embeddings (HF: 50), the largest map side.
  Eigen::Index learned_rows = 0;
  /// kSincosGrid: positional_encoding_temperature, and encode_proj_layers: the backbone levels
  /// (0 = the finest) whose map the encoder attends over.
  double temperature = 10000.0;
  std::vector<Eigen::Index> levels;
};

/// Caller choices that override what the config implies.
struct HfConfigOptions {
  /// Pair layout to use instead of the family table (e.g. kInterleaved for GGUF-converted or
  /// Meta-original Llama weights).
  std::optional<RopeLayout> layout;
};

/// RoPE of one attention layer type ("full_attention", "sliding_attention", ... or "all").
struct HfLayerRope {
  std::string layer_type;
  RopeParams params;
  Eigen::Index num_layers = 0;  ///< layers of this type (0 = unknown)
};

/// How a checkpoint's quantised KV cache scales are laid out (its quantization_config), for
/// KvScales: the scales themselves are weights (each attention layer's k_scale / v_scale).
enum class HfKvCacheScales : std::uint8_t {
  kNone = 0,       ///< no FP8 KV cache in the config
  /// One k_scale / v_scale per layer: compressed-tensors' kv_cache_scheme strategy "tensor",
  /// ModelOpt's kv_cache_quant_algo "FP8" -> KvScales{k, v}
  kPerTensor = 1,
  /// One per kv head: compressed-tensors' strategy "attn_head" -> KvScales::per_head(k, v)
  kPerHead = 2,
};

/// Everything posenc takes from one config.json.
struct HfModelConfig {
  std::string source;      ///< file path, or the name given to parse_hf_config
  std::string model_type;  ///< "" when absent (text_config's when the model is multimodal)
  std::vector<std::string> architectures;
  HfPositionScheme scheme = HfPositionScheme::kRope;

  /// The main RoPE (full-attention layers, or every layer). Valid when scheme == kRope.
  RopeParams rope;
  /// One entry per distinct layer type (a single "all" entry when every layer is the same).
  std::vector<HfLayerRope> layer_ropes;
  /// Per-layer type names [num_hidden_layers] when the config has them; empty otherwise.
  std::vector<std::string> layer_types;
  /// Per layer: false where the layer applies no RoPE at all (NoPE): no_rope_layers entries of
  /// 0 (Llama-4, SmolLM3: 1 = RoPE), Cohere2's full-attention layers, linear_attention layers
  /// (Qwen3-Next, MiniMax, OLMo-Hybrid), every layer of a NoPE family (Jamba, OLMo-Hybrid
  /// without a rope_theta, ...). Empty = every layer.
  std::vector<bool> layer_uses_rope;
  /// Why rope.layout is what it is ("caller override", "rope_interleave = true", "family ...").
  std::string layout_reason;
  /// Qwen2-VL / Qwen2.5-VL / Qwen3-VL: rope_scaling.mrope_section (+ mrope_interleaved), for
  /// apply_mrope_inplace with the main RoPE's plan; empty for 1-D RoPE. ERNIE-4.5-VL: its
  /// [h, w, t] mrope_section (or the older freq_allocation t pairs; transformers' default
  /// [22, 22, 20] when neither is given), stored as (t, h, w) with kAlternatingHw. HunYuan-VL:
  /// four contiguous XD-RoPE sections (p, w, h, i) from xdrope_section or mrope_section.
  std::optional<MRopeSections> mrope;
  /// The vision tower's 2-D RoPE (Qwen2-VL / Qwen2.5-VL / Qwen3-VL / GLM-4V, root model_type of
  /// those families): heads of vision_config embed_dim (Qwen2-VL) or hidden_size over
  /// num_heads, patches merged spatial_merge_size x spatial_merge_size; for vision_rope_2d /
  /// vision_rope_2d_positions. Llama-4 (root model_type llama4): heads of hidden_size over
  /// num_attention_heads, vision_config rope_theta, a square grid of image_size / patch_size
  /// patches a side; for vision_rope_2d_llama4 / vision_rope_2d_positions_llama4.
  /// Empty for other models.
  struct VisionRope {
    Eigen::Index head_dim = 0;
    Eigen::Index spatial_merge_size = 1;
    double theta = 10000.0;  ///< VisionRotaryEmbedding's default; Llama-4: vision rope_theta
    bool llama4 = false;     ///< Llama-4's interleaved, 1-based geometry (vision_rope.hpp)
    Eigen::Index grid_side = 0;  ///< Llama-4: patches per side (0 = not fixed by the config)
  };
  std::optional<VisionRope> vision_rope;

  Eigen::Index num_attention_heads = 0;
  Eigen::Index num_key_value_heads = 0;  ///< = num_attention_heads when absent
  Eigen::Index num_hidden_layers = 0;    ///< 0 when absent
  /// MiMo-V2's sliding_attention layers have head counts of their own (the hub config's
  /// swa_num_attention_heads / swa_num_key_value_heads; transformers' mimo_v2_flash doubles
  /// num_key_value_heads there). 0 = the same as every other layer's.
  Eigen::Index sliding_num_attention_heads = 0;
  Eigen::Index sliding_num_key_value_heads = 0;
  /// Per layer [num_hidden_layers] when the head counts differ by layer, else empty (and
  /// num_attention_heads / num_key_value_heads, or MiMo-V2's sliding_num_*, hold for every
  /// layer; hf_layer_heads reads every form). 0 / 0 on a layer without attention: LFM2's
  /// convolution layers, Granite-4.0-H's Mamba layers, Nemotron-NAS's no-op and linear blocks.
  /// Sources: Laguna's num_attention_heads_per_layer, OpenELM's num_query_heads / num_kv_heads,
  /// DeciLM / Nemotron-NAS block_configs (kv heads = heads / n_heads_in_group), Gemma-4's
  /// num_global_key_value_heads on full layers with attention_k_eq_v, GGUF
  /// attention.head_count / head_count_kv arrays. num_attention_heads / num_key_value_heads
  /// are then the first attention layer's.
  std::vector<Eigen::Index> layer_num_attention_heads;
  std::vector<Eigen::Index> layer_num_key_value_heads;
  /// Per layer [num_hidden_layers], the layer whose KV cache it attends when some layers share
  /// one, else empty (every layer its own): Gemma-3n / Gemma-4's last num_kv_shared_layers
  /// layers read the cache of the last earlier layer of their layer type and store none
  /// (transformers' kv_shared_layer_index; vLLM's kv_sharing_target_layer_name).
  /// hf_layer_kv_source reads it.
  std::vector<Eigen::Index> layer_kv_source;
  /// 0 when absent (head_dim given directly); the family's default where configs are saved
  /// as a diff against it (hf_config's hf_family_sizes: Llama, Mistral, Qwen2/3, Gemma 1-3).
  Eigen::Index hidden_size = 0;
  /// Width of the q.k dot product, for the softmax scale: head_dim, or qk_nope_head_dim +
  /// qk_rope_head_dim for DeepSeek MLA.
  Eigen::Index attention_head_dim = 0;
  Eigen::Index qk_nope_head_dim = 0;  ///< DeepSeek MLA: the un-rotated part of a q/k head
  /// DeepSeek MLA and MiMo-V2 (0 elsewhere): the value head width (KvCache's v_head_dim for
  /// the unabsorbed form), and MLA's latent rank (absorbed: KvCache::latent rows of
  /// kv_lora_rank + qk_rope_head_dim, values kv_lora_rank).
  Eigen::Index v_head_dim = 0;
  Eigen::Index kv_lora_rank = 0;
  /// DeepSeek sparse attention's lightning indexer (DeepSeek-V3.2, GLM-5; 0 elsewhere): its
  /// q / k heads of index_head_dim rotate their first qk_rope_head_dim dims ([rope | nope], the
  /// reverse of MLA's) with the main plan's frequencies, in indexer_layout
  /// (hf_mla_rope_params(c, HfMlaHead::kIndexer)); index_n_heads query heads, index_topk keys
  /// kept per query.
  Eigen::Index index_head_dim = 0;
  Eigen::Index index_n_heads = 0;
  Eigen::Index index_topk = 0;
  /// indexer_rope_interleave: false or absent (DeepSeek-V3.2) half-split, true (GLM-5)
  /// interleaved — whatever the MLA heads use.
  RopeLayout indexer_layout = RopeLayout::kHalfSplit;
  /// Attention softmax scale: attention_head_dim^-1/2, or the family's own (query_pre_attn_scalar
  /// ^-1/2 for Gemma-2 / 3, 1 for Gemma-3n / 4 and GPT-Neo, Granite's attention_multiplier, MPT's
  /// attn_config.softmax_scale, ...: hf_family_softmax_scale), times the RoPE plan's
  /// softmax_scale_multiplier (DeepSeek YaRN mscale_all_dim). 0 when the config gives no head
  /// width (AttentionParams then takes 1 / sqrt(head_dim)).
  double softmax_scale = 0.0;
  /// GPT-2's scale_attn_by_inverse_layer_idx: hf_attention_params divides layer i's scale by
  /// i + 1.
  bool scale_attn_by_inverse_layer_idx = false;

  /// Accepted by the config: max_position_embeddings (0 = absent).
  std::int64_t max_position_embeddings = 0;
  /// Pre-training context L0 (0 = absent; then max_position_embeddings is the trained length).
  std::int64_t original_max_position_embeddings = 0;
  /// sliding_window of the sliding-attention layers (0 = none, or use_sliding_window = false):
  /// AttentionParams::sliding_window on those layers (posenc's W: a causal query sees the keys
  /// a - W < j <= a, a bidirectional one |a - j| < W; an encoder's radius r is read as r + 1).
  std::int64_t sliding_window = 0;
  /// Scheme kAbsolute: the row of position p is p + this (OPT, BART, RoBERTa, M2M-100: 2).
  std::int64_t absolute_position_offset = 0;
  /// Scheme kAbsolute: the table's kind, formula and grid (empty for the other schemes but
  /// kRelativeBias2d, when BEiT also adds a learned grid: use_absolute_position_embeddings).
  std::optional<HfAbsolutePositions> absolute;
  /// Scheme kRelativeBias2d: the window and which tables the checkpoint holds.
  std::optional<HfRelativeBias2d> relative_bias_2d;
  /// Swin families (scheme kRelativeBias2d): the stages, their windows and shifts.
  std::optional<HfSwin> swin;
  /// Scheme kDecomposedRelPos: SAM's grid, windows and global layers.
  std::optional<HfDecomposedRelPos> decomposed_rel_pos;
  /// Scheme kFeatureMap: the feature maps' embedding.
  std::optional<HfFeatureMapPositions> feature_map;
  /// T5's relative attention bias (scheme kRelativeBias; 0 elsewhere): the bucket count and the
  /// distance the log buckets reach, for relative_position_bias(table, max_distance, ...).
  std::int64_t relative_attention_num_buckets = 0;
  std::int64_t relative_attention_max_distance = 0;
  /// kBidirectional for encoders (ModernBERT, Jina-BERT's ALiBi, is_causal = false, Gemma's
  /// use_bidirectional_attention): AttentionParams::mask on every layer.
  MaskMode mask = MaskMode::kCausal;
  /// Qwen2-family max_window_layers: layers [max_window_layers, ..) slide when no layer_types
  /// are given (-1 = absent).
  std::int64_t max_window_layers = -1;
  /// Gemma-2's attn_logit_softcapping (0 = none): AttentionParams::logit_softcap.
  double attn_logit_softcapping = 0.0;
  /// Llama-4's attention_chunk_size (0 = none): AttentionParams::attention_chunk_size on the
  /// layers whose layer_types entry is "chunked_attention".
  std::int64_t attention_chunk_size = 0;
  /// Llama-4's attention temperature tuning (attn_temperature_tuning, floor_scale, attn_scale)
  /// for the queries of the NoPE layers (layer_uses_rope[i] == false), or Grok-2's
  /// attn_temperature_len (TemperatureForm::kXai) or Mistral-3's rope_parameters
  /// llama_4_scaling_beta (TemperatureForm::kMistral3) for every layer: hf_attention_params sets it
  /// as AttentionParams::query_temperature there (or apply_attention_temperature_inplace).
  /// Empty when the model does not tune.
  std::optional<AttentionTemperature> attention_temperature;
  /// Qwen2.5-1M's dual_chunk_attention_config (chunk_size, local_size,
  /// original_max_position_embeddings; absent keys take vLLM's defaults 8192, 1024, 0): vLLM
  /// runs every layer as dual chunk attention (dual_chunk_attention.hpp); transformers ignores
  /// the key and runs plain RoPE. Empty when the config has none.
  std::optional<DualChunkParams> dual_chunk;

  /// The FP8 KV cache the checkpoint was calibrated for (quantization_config), kNone if any.
  HfKvCacheScales kv_cache_scales = HfKvCacheScales::kNone;

  /// ALiBi: one slope per query head (scheme == kAlibi) of num_attention_heads, and the max
  /// bias they come from (hf_attention_params gives a layer with another head count its own).
  std::vector<double> alibi_slopes;
  double alibi_max_bias = 0.0;

  /// Human-readable notes: legacy keys normalised, defaults taken, aliases used.
  std::vector<std::string> notes;

  /// The training length the loader believes in: L0 if given, else max_position_embeddings.
  std::int64_t trained_length() const noexcept {
    return original_max_position_embeddings > 0 ? original_max_position_embeddings
                                                : max_position_embeddings;
  }
};

namespace detail {

/// Lowercase alphanumerics of a model-family name ("GptOss", "gpt_oss", "gpt-oss" -> "gptoss").
inline std::string hf_lower_alnum(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c >= 'A' && c <= 'Z') out.push_back(static_cast<char>(c - 'A' + 'a'));
    else if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')) out.push_back(c);
  }
  return out;
}

/// Layer types without softmax attention (no heads, no KV cache, no RoPE): linear attention
/// (Qwen3-Next / Qwen3.5's Gated DeltaNet, MiniMax's lightning attention, OLMo-Hybrid), LFM2's
/// short convolutions ("conv"), Granite-4.0-H's Mamba-2 layers ("mamba").
inline bool hf_layer_type_without_attention(std::string_view type) {
  return type == "linear_attention" || type == "conv" || type == "mamba";
}

/// Layers without softmax attention take no position embeddings: layer_uses_rope false where
/// the layer type has no attention (hf_layer_type_without_attention) or the per-layer lists
/// give it no heads (Nemotron-NAS's no-op blocks, LFM2's GGUF conv layers). Both readers
/// finish with it.
inline void hf_mark_layers_without_attention(HfModelConfig& out) {
  const auto no_attention = [&](std::size_t i) {
    return (i < out.layer_types.size() && hf_layer_type_without_attention(out.layer_types[i])) ||
           (i < out.layer_num_attention_heads.size() && out.layer_num_attention_heads[i] == 0);
  };
  const std::size_t layers = std::max(out.layer_types.size(), out.layer_num_attention_heads.size());
  std::size_t without = 0;
  for (std::size_t i = 0; i < layers; ++i) without += no_attention(i);
  if (without == 0) return;
  if (out.layer_uses_rope.empty()) out.layer_uses_rope.assign(layers, true);
  for (std::size_t i = 0; i < std::min(layers, out.layer_uses_rope.size()); ++i) {
    if (no_attention(i)) out.layer_uses_rope[i] = false;
  }
  out.notes.push_back(std::to_string(without) + " layers without softmax attention " +
                      "(linear_attention, conv, mamba, or no heads) apply no RoPE");
}

/// Throws std::out_of_range naming fn when layer is outside [0, num_hidden_layers) (the
/// per-layer lists' length when num_hidden_layers is absent).
inline void hf_check_layer(std::string_view fn, const HfModelConfig& c, Eigen::Index layer) {
  const Eigen::Index layers =
      c.num_hidden_layers > 0
          ? c.num_hidden_layers
          : static_cast<Eigen::Index>(
                std::max(c.layer_types.size(), c.layer_num_attention_heads.size()));
  if (layer < 0 || (layers > 0 && layer >= layers)) {
    throw_out_of_range(fn, "layer = ", layer, " is outside [0, num_hidden_layers = ", layers,
                       ")");
  }
}

}  // namespace detail

/// \brief Whether layer `layer` of the model is a sliding-window layer, by HF's rules: the
/// config's layer_types entry ("sliding_attention"); without layer_types, Qwen2-family configs
/// slide from max_window_layers on, Gemma-2 and GPT-OSS on the even layers, and every other
/// model (Mistral, Mixtral, Phi-3, Starcoder2) on all layers. False when sliding_window = 0.
/// Throws std::out_of_range when layer is outside [0, num_hidden_layers) (or < 0).
inline bool hf_layer_is_sliding(const HfModelConfig& c, Eigen::Index layer) {
  detail::hf_check_layer("hf_layer_is_sliding", c, layer);
  if (c.sliding_window <= 0) return false;
  if (!c.layer_types.empty()) {
    return layer < static_cast<Eigen::Index>(c.layer_types.size()) &&
           c.layer_types[static_cast<std::size_t>(layer)] == "sliding_attention";
  }
  if (c.max_window_layers >= 0) return layer >= c.max_window_layers;
  const std::string family = detail::hf_lower_alnum(c.model_type);
  if (family == "gemma2" || family == "gptoss") return layer % 2 == 0;
  return true;
}

/// Query and key/value head counts of one layer (hf_layer_heads); 0 / 0 for a layer without
/// attention.
struct HfLayerHeads {
  Eigen::Index num_attention_heads = 0;
  Eigen::Index num_key_value_heads = 0;
};

/// \brief The head counts of layer `layer`: 0 / 0 on a layer without softmax attention (its
/// layer_types entry linear_attention, conv or mamba, or no heads in the per-layer lists), the
/// per-layer lists when the config has them (layer_num_attention_heads), MiMo-V2's own counts
/// on its sliding layers, else the model's. What a KV cache per layer is sized by
/// (KvCache(capacity, kv_heads, head_dim)).
/// Throws std::out_of_range when layer is outside [0, num_hidden_layers) (or < 0).
inline HfLayerHeads hf_layer_heads(const HfModelConfig& c, Eigen::Index layer) {
  detail::hf_check_layer("hf_layer_heads", c, layer);
  const auto i = static_cast<std::size_t>(layer);
  if (i < c.layer_types.size() && detail::hf_layer_type_without_attention(c.layer_types[i])) {
    return {};
  }
  if (i < c.layer_num_attention_heads.size() && i < c.layer_num_key_value_heads.size()) {
    return {c.layer_num_attention_heads[i], c.layer_num_key_value_heads[i]};
  }
  if (c.sliding_num_attention_heads > 0 && i < c.layer_types.size() &&
      c.layer_types[i] == "sliding_attention") {
    return {c.sliding_num_attention_heads, c.sliding_num_key_value_heads};
  }
  return {c.num_attention_heads, c.num_key_value_heads};
}

/// \brief The layer whose KV cache layer `layer` attends: itself, or for Gemma-3n / Gemma-4's KV
/// sharing layers (HfModelConfig::layer_kv_source) an earlier layer of the same type. A layer
/// whose source is another layer appends nothing: size no cache for it.
/// Throws std::out_of_range when layer is outside [0, num_hidden_layers) (or < 0).
inline Eigen::Index hf_layer_kv_source(const HfModelConfig& c, Eigen::Index layer) {
  detail::hf_check_layer("hf_layer_kv_source", c, layer);
  const auto i = static_cast<std::size_t>(layer);
  return i < c.layer_kv_source.size() ? c.layer_kv_source[i] : layer;
}

/// \brief The attention parameters of layer `layer`: the config's softmax scale, ALiBi slopes
/// (for the layer's own head count), logit soft cap, on sliding layers (hf_layer_is_sliding)
/// its sliding window, on "chunked_attention" layers (Llama-4) its attention_chunk_size and its
/// query temperature (Llama-4's attn_temperature_tuning on NoPE layers; Grok-2's
/// attn_temperature_len and Mistral-3's llama_4_scaling_beta on every layer); the model's mask
/// (causal, bidirectional for encoders), one thread. GPT-OSS's attention sinks are weights, not
/// config: set sink_logits from the checkpoint's self_attn.sinks. Throws std::out_of_range for
/// a layer outside the model.
inline AttentionParams hf_attention_params(const HfModelConfig& c, Eigen::Index layer) {
  AttentionParams p;
  p.sliding_window = hf_layer_is_sliding(c, layer) ? c.sliding_window : 0;
  // Llama-4: the "chunked_attention" layers (its RoPE layers) attend within chunks.
  const bool chunked = layer < static_cast<Eigen::Index>(c.layer_types.size()) &&
                       c.layer_types[static_cast<std::size_t>(layer)] == "chunked_attention";
  p.attention_chunk_size = chunked ? c.attention_chunk_size : 0;
  // ... and its NoPE layers scale their queries (attn_temperature_tuning).
  const bool nope = layer < static_cast<Eigen::Index>(c.layer_uses_rope.size()) &&
                    !c.layer_uses_rope[static_cast<std::size_t>(layer)];
  p.mask = c.mask;
  // Grok-2's and Mistral-3's temperatures apply to every layer.
  if (c.attention_temperature &&
      (nope || c.attention_temperature->form != TemperatureForm::kLlama4)) {
    p.query_temperature = c.attention_temperature;
  }
  if (c.softmax_scale > 0.0) {
    p.scale = c.softmax_scale /
              (c.scale_attn_by_inverse_layer_idx ? static_cast<double>(layer) + 1.0 : 1.0);
  }
  if (c.scheme == HfPositionScheme::kAlibi) {
    // One slope per head of this layer: llama.cpp's soft_max_ext forms them from the layer's
    // own head count (ne02) and max_bias, so a GGUF with per-layer head counts has per-layer
    // slopes; c.alibi_slopes are those of the first attention layer's heads.
    const Eigen::Index heads = hf_layer_heads(c, layer).num_attention_heads;
    const bool own = heads > 0 && heads != static_cast<Eigen::Index>(c.alibi_slopes.size()) &&
                     c.alibi_max_bias > 0.0;
    p.alibi_slopes = own ? alibi_slopes(heads, c.alibi_max_bias) : c.alibi_slopes;
  }
  p.logit_softcap = c.attn_logit_softcapping;
  return p;
}

/// Which head of a DeepSeek MLA model a RoPE plan is for (hf_mla_rope_params).
enum class HfMlaHead : std::uint8_t {
  kConcatenated = 0,  ///< [nope | rope] q / k heads of qk_nope + qk_rope (KvCache(.., v_head_dim))
  kLatent = 1,        ///< [c_kv | k_pe] latent rows of kv_lora_rank + qk_rope (KvCache::latent)
  kIndexer = 2,       ///< [rope | nope] sparse-attention indexer heads of index_head_dim
};

/// \brief The RoPE parameters of a DeepSeek MLA model for a whole head: c.rope (whose head is
/// the qk_rope_head_dim part alone, q_pe / k_pe) widened to the concatenated or the latent
/// head, the rotated slice at its end (rotary_offset = qk_nope_head_dim or kv_lora_rank), or
/// to the sparse-attention indexer's head, the rotated slice first and in c.indexer_layout. The
/// plan's frequencies, attention factor and softmax multiplier are c.rope's: the exponent runs
/// over rotary_dim = qk_rope_head_dim either way.
/// Throws std::invalid_argument when c has no qk_nope_head_dim (kConcatenated), no
/// kv_lora_rank (kLatent) or no index_head_dim (kIndexer), or a width past 2^20.
inline RopeParams hf_mla_rope_params(const HfModelConfig& c, HfMlaHead head) {
  constexpr std::string_view fn = "hf_mla_rope_params";
  RopeParams p = c.rope;
  p.rotary_dim = resolved_rotary_dim(c.rope);
  p.partial_rotary_factor = 1.0;
  if (head == HfMlaHead::kIndexer) {
    detail::require(c.index_head_dim > 0, fn, "index_head_dim = ", c.index_head_dim, ": ",
                    c.source, " has no sparse-attention indexer");
    p.head_dim = c.index_head_dim;
    p.layout = c.indexer_layout;
    return p;
  }
  const bool latent = head == HfMlaHead::kLatent;
  const Eigen::Index prefix = latent ? c.kv_lora_rank : c.qk_nope_head_dim;
  detail::require(prefix > 0, fn, latent ? "kv_lora_rank" : "qk_nope_head_dim", " = ", prefix,
                  ": ", c.source, " is not a DeepSeek MLA config with that head");
  // Bounded before the sums below (the loaders cap widths far lower; a config built by hand
  // is not).
  constexpr Eigen::Index kWidest = Eigen::Index{1} << 20;
  detail::require(prefix <= kWidest && c.rope.head_dim >= 0 && c.rope.head_dim <= kWidest &&
                      c.rope.rotary_offset >= 0 && c.rope.rotary_offset <= kWidest,
                  fn, latent ? "kv_lora_rank" : "qk_nope_head_dim", " = ", prefix,
                  ", rope.head_dim = ", c.rope.head_dim, " and rope.rotary_offset = ",
                  c.rope.rotary_offset, " must be in [0, 2^20]");
  p.rotary_offset = prefix + c.rope.rotary_offset;
  p.head_dim = prefix + c.rope.head_dim;
  return p;
}

}  // namespace posenc
