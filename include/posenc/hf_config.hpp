#pragma once
/// \file posenc/hf_config.hpp
/// Hugging Face `config.json` -> the positional-encoding parameters a model needs: RopeParams
/// (per layer type when layers differ), or ALiBi slopes, plus the lengths and notes a
/// long-context check needs. The only posenc header that needs nlohmann_json
/// (`<nlohmann/json.hpp>`); the umbrella posenc.hpp does not include it.
///
/// What is read (transformers' semantics: `modeling_rope_utils.py`
/// `RotaryEmbeddingConfigMixin.standardize_rope_params` / `_compute_*_parameters` and each
/// model's configuration file), in order of priority:
///
///   geometry   head_dim, else the family's default (Gemma / Qwen3-Next 256, Qwen3 / GLM-4 128,
///              hf_family_defaults), else hidden_size / num_attention_heads (integer division,
///              HF); missing sizes from the class defaults where configs are saved as a diff
///              against them (Llama, Mistral, Qwen2, Gemma, Gemma-2, Gemma-3 text:
///              hf_family_sizes; Gemma-3's released text_config has no heads); aliases
///              n_embd / n_embed / d_model / model_dim and n_head / n_heads (GPT-J, BLOOM,
///              MPT, OpenELM). Head counts per layer: Laguna's num_attention_heads_per_layer,
///              OpenELM's num_query_heads / num_kv_heads, DeciLM / Nemotron-NAS block_configs
///              (hf_read_layer_heads, hf_layer_heads).
///              DeepSeek MLA: qk_rope_head_dim is the rotated head (q_pe / k_pe); the
///              sparse-attention indexer (index_head_dim, indexer_rope_interleave) rotates
///              the first qk_rope_head_dim of its heads (hf_mla_rope_params, kIndexer);
///              deepseek_v32 without them takes DeepseekV32Config's 128 / 64 heads / top 2048.
///   theta      rope_parameters.rope_theta (transformers >= 5), rope_theta, rotary_emb_base
///              (GPT-NeoX), rope_freq_constant (OpenELM), 10000 * rope_ratio (ChatGLM), else
///              the family's transformers
///              default (Mixtral / MiniMax 1e6, Llama-4 / ERNIE-4.5 5e5, SmolLM3 2e6, ...:
///              hf_family_defaults), else 10000.
///   width      rope_parameters.partial_rotary_factor, partial_rotary_factor, rotary_pct
///              (GPT-NeoX), rotary_dim (GPT-J / CodeGen, absolute), else the family's default
///              (Phi / GLM / Nemotron 0.5, StableLM / GPT-NeoX / Qwen3-Next 0.25), else 1.
///   scaling    rope_scaling when non-empty, else rope_parameters (transformers 5's
///              `rope_scaling or rope_parameters`: the whole dict, theta included, is replaced);
///              rope_type, else the legacy key `type`;
///              legacy names "su" -> longrope, "mrope" -> default (Qwen2-VL's text RoPE),
///              "ernie_3d" -> default (ERNIE-4.5-VL before transformers 5), "telechat3-yarn" ->
///              yarn with g's slope 0.07 (TeleChat3), "xdrope" -> dynamic (HunYuan-VL, with
///              its xdrope_section read as a four-stream mrope_section);
///              "ntk" (no transformers recipe) as vLLM reads it -> vllm_ntk (+ mixed_b);
///              "dynamic" with `alpha` (Hunyuan) -> static NTK with factor = alpha; longrope's
///              short_mscale / long_mscale (Phi-3.5-MoE). Each recipe parses only the keys it
///              reads (attention_factor: yarn and longrope, as transformers); the others are
///              listed in the notes, as transformers warns about them.
///   lengths    max_position_embeddings (aliases n_positions, max_seq_len, seq_length,
///              max_sequence_length, max_context_length); L0 = the
///              top-level original_max_position_embeddings (Phi-3: HF gives it priority), else
///              rope_scaling's, else max_position_embeddings (standardize_rope_params).
///   layers     layer_types, or Gemma-3's sliding_window_pattern (layer i is sliding iff
///              (i + 1) % pattern != 0) with rope_local_base_freq for the sliding layers, or a
///              rope_parameters dict keyed by layer type (transformers >= 5); Gemma-4's
///              full_attention entry rotates heads of global_head_dim (gemma3_text defaults:
///              rope_local_base_freq 10000, pattern 6). Hub lists: MiMo-V2's
///              hybrid_layer_pattern (+ swa_rope_theta, swa_num_key_value_heads), MiniMax's
///              attn_type_list; the OLMo-3 / OLMo-Hybrid / MiMo-V2-Flash class defaults.
///              OLMo-3 scales RoPE on its full_attention layers only; LFM2's full_attn_idxs
///              (the other layers "conv"). Layers without softmax attention apply no RoPE:
///              linear_attention (Qwen3-Next, MiniMax, OLMo-Hybrid), conv (LFM2), mamba
///              (Granite-4.0-H), and layers without heads (Nemotron-NAS no-op blocks).
///   vision     Qwen2-VL / Qwen2.5-VL / Qwen3-VL / GLM-4V (root model_type): the vision tower's
///              2-D RoPE heads, vision_config embed_dim (Qwen2-VL) or hidden_size over
///              num_heads, and spatial_merge_size (HfModelConfig::vision_rope).
///   absolute   position_embedding_type absolute / learned / sinusoidal, or a family that never
///              wrote one (GPT-2, GPT-BigCode, GPT-Neo, OPT, BioGPT, BERT, RoBERTa, XLM-R, XLM,
///              DistilBERT, ELECTRA, ALBERT, CLIP, SigLIP, BART, mBART, Blenderbot, Whisper;
///              sinusoidal Marian, Pegasus, M2M-100, NLLB-MoE, XGLM, Speech2Text, FSMT; the
///              vision encoders ViT, DeiT, DINOv2, ViT-MSN, I-JEPA, CLIP / SigLIP vision, ViT-MAE,
///              BEiT, DPT's own ViT; VideoMAE's fixed interleaved sinusoids) unless the config
///              names a rotary key; absolute_position_offset 2 where the
///              table has two leading rows (OPT, BART, RoBERTa, M2M-100, Speech2Text, FSMT).
///              HfModelConfig::absolute gives the table's kind and, for sinusoids, the family's
///              formula (Marian / Pegasus kSinCosVaswani, fairseq's kSinCos, XLM / DistilBERT's
///              sinusoidal flags kInterleaved); for vision encoders the image_size / patch_size
///              grid and the class-token rows before it; for ViT-MAE the encoder's and the
///              decoder's sin-cos table widths. Encoder families are bidirectional (unless
///              is_decoder, or XLM's causal); encoder-decoder families keep the decoder's causal
///              mask. relative_key(_query) is refused, and so are families whose positions are
///              schemes no position key announces (XLNet, Transformer-XL, Swin2SR, VitDet,
///              DiNAT), convolutional backbones, and a vision config
///              (image_size, patch_size, num_frames, tubelet_size) of a family posenc does not
///              know, unless it names a rotary key.
///              BEiT / data2vec-vision: a learned grid with use_absolute_position_embeddings;
///              DeBERTa(-v2): a learned table with position_biased_input, refused with
///              relative_attention (every released checkpoint).
///   2-D bias   BEiT / data2vec-vision with use_relative_position_bias (a table per layer) or
///              use_shared_relative_position_bias (one for all): scheme kRelativeBias2d over
///              the image_size / patch_size window after the class token
///              (HfModelConfig::relative_bias_2d; relative_bias_2d.hpp builds the bias),
///              bidirectional; absolute too when use_absolute_position_embeddings is set.
///              Swin / Swin-v2 / Donut-Swin / MaskFormer-Swin: stages of depths and num_heads
///              lists, window_size, Swin-v2's pretrained_window_sizes (HfModelConfig::swin:
///              each stage's map, windows and shifts; swin_window.hpp runs a block), one
///              table (Swin) or MLP (Swin-v2) per layer, the layers' head counts per stage.
///   detection  DETR, Conditional DETR, Table Transformer, Deformable DETR, DETA, DAB-DETR,
///              Grounding DINO, MM Grounding DINO: scheme kFeatureMap, DETR's sine embedding of
///              the padded feature map (HfModelConfig::feature_map: its recipe, num_pos_feats
///              d_model / 2, position_embedding_type "learned" for the 50-row tables);
///              RT-DETR, RT-DETR v2, D-FINE: the fixed table of sincos_grid_rt_detr on the
///              encode_proj_layers levels. Heads and layers are the encoder's.
///   backbones  DPT (with a backbone_config, not is_hybrid), UperNet, Mask2Former, MaskFormer,
///              OneFormer, Depth Anything, ZoeDepth, VitMatte: the keys of backbone_config,
///              whose model_type is the family read (the wrapper's own decoder is not).
///   ALiBi      attn_config.alibi (+ alibi_bias_max, MPT), alibi = true (Falcon/RW),
///              position_embedding_type = "alibi" (JAIS; Jina-BERT, an encoder), model_type
///              "bloom".
///   T5 bias    relative_attention_num_buckets (+ relative_attention_max_distance, default
///              128; d_kv heads): scheme kRelativeBias, softmax scale 1 for the T5 family;
///              MPNet (no is_encoder_decoder) an encoder with 1 / sqrt(d).
///   encoders   bidirectional attention (HfModelConfig::mask) for model_type "modernbert",
///              Jina-BERT (model_type "bert" with ALiBi), is_causal = false, and
///              use_bidirectional_attention = true / "all" (EmbeddingGemma, Gemma-4). ModernBERT:
///              global_rope_theta, local_rope_theta on the local layers, every
///              global_attn_every_n_layers-th layer global (layer 0 first), local_attention l:
///              |i - j| <= l / 2 (sliding_window l / 2 + 1); transformers' defaults when absent.
///              Gemma's bidirectional sliding_window s: |i - j| <= s / 2 (transformers' s / 2 + 1
///              with FlashAttention's exclusive bounds).
///   layout     caller's override, else the config key rope_interleave (DeepSeek-V3), else the
///              model family table below, else half-split (HF rotate_half).
///   Llama-4    attention_chunk_size (its chunked_attention layers: AttentionParams::
///              attention_chunk_size), no_rope_layers (empty or absent: every
///              no_rope_layer_interval-th layer is NoPE, default 4, as Llama4TextConfig and
///              SmolLM3Config fill it), layer_types by default chunked_attention on RoPE layers
///              and full_attention on NoPE ones, attn_temperature_tuning / floor_scale /
///              attn_scale (HfModelConfig::attention_temperature, for the NoPE layers' queries).
///   Mistral-3  rope_parameters.llama_4_scaling_beta with its original_max_position_embeddings
///              (HfModelConfig::attention_temperature, TemperatureForm::kMistral3, every layer).
///   DCA        dual_chunk_attention_config (Qwen2.5-1M; HfModelConfig::dual_chunk for
///              dual_chunk_attention: vLLM's reading, transformers ignores the key).
///
/// Pair layout by family, for weights as stored in HF checkpoints (posenc::RopeLayout):
///
///   interleaved (2j, 2j+1)  gptj, codegen (rotate_every_two); cohere, cohere2, cohere2_vision
///                           (repeat_interleave cos/sin); glm, glm4, glm4v(_text), chatglm (interleaved
///                           on the rotated part; glm4v with M-RoPE sections; glm4_moe and
///                           glm4v_moe are half-split); deepseek_v2, deepseek_v3, deepseek_v32
///                           (main attention; its indexer's rope is half-split), kimi_k2
///                           (DeepseekV3ForCausalLM), longcat_flash (view_as_complex /
///                           rope_interleave = true / apply_rotary_pos_emb_interleave);
///                           llama4, llama4_text (view_as_complex: HF keeps Meta's pair order;
///                           vLLM and SGLang permute q_proj / k_proj at load and rotate NeoX-style);
///                           ernie4_5, ernie4_5_moe, ernie4_5_vl (GLM's rotate_half on
///                           repeat_interleave(2) cos / sin; ggml NORM)
///   half-split (j, j + r/2) everything else: llama, mistral, qwen2/3, phi, phi3, gemma*,
///                           gpt_neox, falcon, stablelm, starcoder2, olmo, ... (HF rotate_half)
///
/// Llama is half-split here because HF's conversion script permutes Meta's Q/K weights so that
/// rotate_half works; Meta's original consolidated.pth weights (and GGUF, which un-permutes)
/// need kInterleaved — pass HfConfigOptions::layout for those.
///
/// Errors: malformed JSON, a wrong type, an unknown rope_type, a missing required key, a factor
/// list of the wrong length, theta <= 1, a negative length... throw std::invalid_argument
///   "posenc::load_hf_config: <file>: key \"rope_scaling.long_factor\" has 47 entries, ..."
/// naming the file and the key. Nothing else escapes (no nlohmann exception, no crash).

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "posenc/alibi.hpp"
#include "posenc/attention_temperature.hpp"
#include "posenc/attention_types.hpp"
#include "posenc/dual_chunk_params.hpp"
#include "posenc/error.hpp"
#include "posenc/model_config.hpp"
#include "posenc/mrope.hpp"
#include "posenc/rope_frequencies.hpp"
#include "posenc/rope_params.hpp"
#include "posenc/sincos_grid.hpp"
#include "posenc/sine_embedding_2d.hpp"

namespace posenc {


namespace detail {

/// Reads one config object, throwing invalid_argument that names the file and the key path.
class HfConfigReader {
 public:
  using json = nlohmann::json;

  explicit HfConfigReader(std::string source) : source_(std::move(source)) {}

  const std::string& source() const noexcept { return source_; }

  template <typename... Parts>
  [[noreturn]] void fail(std::string_view key, const Parts&... parts) const {
    throw_invalid_argument("load_hf_config", source_, ": key \"", key, "\" ", parts...);
  }

  /// The value at obj[key], or nullptr when absent or JSON null (HF treats both as unset).
  static const json* find(const json& obj, std::string_view key) {
    if (!obj.is_object()) return nullptr;
    const auto it = obj.find(std::string(key));
    if (it == obj.end() || it->is_null()) return nullptr;
    return &*it;
  }

  std::optional<double> number(const json& obj, std::string_view key,
                               const std::string& path) const {
    const json* v = find(obj, key);
    if (!v) return std::nullopt;
    if (!v->is_number()) fail(path, "must be a number, got ", v->type_name());
    const double d = v->get<double>();
    if (!std::isfinite(d)) fail(path, "= ", d, " must be finite");
    return d;
  }

  /// Integers; a float is accepted when it is integral (some exporters write 4096.0).
  std::optional<std::int64_t> integer(const json& obj, std::string_view key,
                                      const std::string& path) const {
    const json* v = find(obj, key);
    if (!v) return std::nullopt;
    return integer_value(*v, path);
  }

  /// One integer that must be there (a list element: JSON null is an error, not "unset").
  std::int64_t integer_value(const json& value, const std::string& path) const {
    const json* v = &value;
    if (v->is_number_unsigned()) {
      const auto u = v->get<std::uint64_t>();
      if (u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
        fail(path, "= ", u, " is out of the int64 range");
      }
      return static_cast<std::int64_t>(u);
    }
    if (v->is_number_integer()) return v->get<std::int64_t>();
    if (v->is_number_float()) {
      const double d = v->get<double>();
      if (!std::isfinite(d) || std::floor(d) != d || std::abs(d) > 9007199254740992.0) {
        fail(path, "= ", d, " must be an integer");
      }
      return static_cast<std::int64_t>(d);
    }
    fail(path, "must be an integer, got ", v->type_name());
  }

  std::optional<std::string> string(const json& obj, std::string_view key,
                                    const std::string& path) const {
    const json* v = find(obj, key);
    if (!v) return std::nullopt;
    if (!v->is_string()) fail(path, "must be a string, got ", v->type_name());
    return v->get<std::string>();
  }

  std::optional<bool> boolean(const json& obj, std::string_view key,
                              const std::string& path) const {
    const json* v = find(obj, key);
    if (!v) return std::nullopt;
    if (!v->is_boolean()) fail(path, "must be true or false, got ", v->type_name());
    return v->get<bool>();
  }

  std::optional<std::vector<double>> number_list(const json& obj, std::string_view key,
                                                 const std::string& path) const {
    const json* v = find(obj, key);
    if (!v) return std::nullopt;
    if (!v->is_array()) fail(path, "must be a list of numbers, got ", v->type_name());
    std::vector<double> out;
    out.reserve(std::min<std::size_t>(v->size(), 4096));
    for (std::size_t i = 0; i < v->size(); ++i) {
      const json& e = (*v)[i];
      if (!e.is_number()) fail(path, "[", i, "] must be a number, got ", e.type_name());
      const double d = e.get<double>();
      if (!std::isfinite(d)) fail(path, "[", i, "] = ", d, " must be finite");
      out.push_back(d);
    }
    return out;
  }

  /// First present key of a list of aliases; records which one in `used`.
  std::optional<std::int64_t> integer_alias(const json& obj,
                                            std::initializer_list<std::string_view> keys,
                                            const std::string& prefix, std::string* used) const {
    for (std::string_view k : keys) {
      if (auto v = integer(obj, k, prefix + std::string(k))) {
        if (used) *used = std::string(k);
        return v;
      }
    }
    return std::nullopt;
  }

 private:
  std::string source_;
};


/// ERNIE-4.5 (text, MoE, VL): GLM's rotate_half on repeat_interleave(2) cos / sin.
inline bool hf_family_is_ernie(const std::string& normalised) {
  return normalised.compare(0, 7, "ernie45") == 0;
}

/// ERNIE-4.5-VL ("ernie4_5_vl", "ernie4_5_moe_vl", "Ernie4_5_VLMoeForConditionalGeneration"):
/// alternating h / w M-RoPE sections.
inline bool hf_family_is_ernie_vl(std::string_view name) {
  const std::string n = hf_lower_alnum(name);
  return hf_family_is_ernie(n) && n.find("vl", 7) != std::string::npos;
}

/// The language model class a multimodal wrapper builds from a text_config dict without its own
/// model_type (transformers: Gemma3Config / Llama4Config / Gemma3nConfig / Qwen*VLConfig build
/// their *TextConfig; LlavaConfig and Mistral3Config default the dict's model_type to "llama" /
/// "mistral"). Empty when the wrapper is not listed (the outer model_type is kept).
inline std::string_view hf_wrapper_text_model_type(std::string_view wrapper) {
  static constexpr std::pair<std::string_view, std::string_view> kWrappers[] = {
      {"gemma3", "gemma3_text"},       {"gemma3n", "gemma3n_text"},
      {"llama4", "llama4_text"},       {"llava", "llama"},
      {"mistral3", "mistral"},         {"qwen2vl", "qwen2_vl_text"},
      {"qwen25vl", "qwen2_5_vl_text"}, {"qwen35", "qwen3_5_text"},
      {"qwen35moe", "qwen3_5_moe_text"},
  };
  const std::string n = hf_lower_alnum(wrapper);
  for (const auto& [outer, text] : kWrappers) {
    if (n == outer) return text;
  }
  return {};
}

/// Which self-attention an absolute-position family runs: decoder-only (causal), encoder-only
/// (bidirectional), or both stacks (HfModelConfig::mask is then the decoder's, causal).
enum class HfStack : std::uint8_t { kDecoder, kEncoder, kEncoderDecoder };

/// Model families whose positions are absolute embeddings, with no position_embedding_type key
/// to say so (read as RoPE otherwise): the rows a token at position p reads start at p + offset.
struct HfAbsoluteFamily {
  std::string_view family;  ///< hf_lower_alnum(model_type)
  HfAbsoluteKind kind;
  std::int64_t offset;      ///< OPT / BART / RoBERTa-style leading rows of a 1-D table
  HfStack stack;
  SinusoidalLayout layout = SinusoidalLayout::kInterleaved;  ///< kind kSinusoidal
  std::int64_t leading_rows = 0;  ///< grids: class (and distillation) token rows
};

inline const HfAbsoluteFamily* hf_absolute_family(std::string_view model_type) {
  // transformers' modeling code: learned tables (GPT-2 wpe, BERT / CLIP position_embedding,
  // OPTLearnedPositionalEmbedding / BartLearnedPositionalEmbedding offset 2, RoBERTa's
  // padding_idx + 1 = 2) and sinusoidal ones. Marian / Pegasus (MarianSinusoidalPositional-
  // Embedding._init_weight): pos / 10000^(2 (j // 2) / d), sines then cosines. M2M-100 /
  // NLLB-MoE, XGLM, Speech2Text and FSMT (fairseq's get_embedding, "matches tensor2tensor"):
  // exp(-i ln 10000 / (d/2 - 1)), offset 2: their positions start at padding_idx + 1, pad
  // id 1, into rows numbered by position. Whisper: a learned decoder table (its encoder's
  // sinusoids are stored as weights). Vision encoders (ViTEmbeddings and its copies): one
  // row per patch of the image_size / patch_size grid after the class token (DeiT: class and
  // distillation tokens; I-JEPA and SigLIP: none); ViT-MAE's rows are
  // get_2d_sincos_pos_embed(add_cls_token = True), fixed. SigLIP's text tower has no causal
  // mask, CLIP's has.
  using K = HfAbsoluteKind;
  using S = HfStack;
  constexpr SinusoidalLayout kFairseq = SinusoidalLayout::kSinCos;
  constexpr SinusoidalLayout kMarian = SinusoidalLayout::kSinCosVaswani;
  static constexpr HfAbsoluteFamily kFamilies[] = {
      {"gpt2", K::kLearned, 0, S::kDecoder},
      {"gptbigcode", K::kLearned, 0, S::kDecoder},
      {"gptneo", K::kLearned, 0, S::kDecoder},
      {"opt", K::kLearned, 2, S::kDecoder},
      {"biogpt", K::kLearned, 2, S::kDecoder},
      {"clip", K::kLearned, 0, S::kDecoder},
      {"cliptextmodel", K::kLearned, 0, S::kDecoder},
      {"xglm", K::kSinusoidal, 2, S::kDecoder, kFairseq},
      {"bert", K::kLearned, 0, S::kEncoder},
      {"roberta", K::kLearned, 2, S::kEncoder},
      {"xlmroberta", K::kLearned, 2, S::kEncoder},
      {"camembert", K::kLearned, 2, S::kEncoder},
      {"distilbert", K::kLearned, 0, S::kEncoder},
      {"electra", K::kLearned, 0, S::kEncoder},
      {"albert", K::kLearned, 0, S::kEncoder},
      {"layoutlm", K::kLearned, 0, S::kEncoder},
      {"xlm", K::kLearned, 0, S::kEncoder},
      {"siglip", K::kLearned, 0, S::kEncoder},
      {"sigliptextmodel", K::kLearned, 0, S::kEncoder},
      {"bart", K::kLearned, 2, S::kEncoderDecoder},
      {"mbart", K::kLearned, 2, S::kEncoderDecoder},
      {"blenderbot", K::kLearned, 0, S::kEncoderDecoder},
      {"whisper", K::kLearned, 0, S::kEncoderDecoder},
      {"marian", K::kSinusoidal, 0, S::kEncoderDecoder, kMarian},
      {"pegasus", K::kSinusoidal, 0, S::kEncoderDecoder, kMarian},
      {"m2m100", K::kSinusoidal, 2, S::kEncoderDecoder, kFairseq},
      {"nllbmoe", K::kSinusoidal, 2, S::kEncoderDecoder, kFairseq},
      {"speechtotext", K::kSinusoidal, 2, S::kEncoderDecoder, kFairseq},
      {"fsmt", K::kSinusoidal, 2, S::kEncoderDecoder, kFairseq},
      // Grids: the layout field is unused ({}), then the rows before the patches.
      {"vit", K::kLearnedGrid, 0, S::kEncoder, {}, 1},
      {"vitmsn", K::kLearnedGrid, 0, S::kEncoder, {}, 1},
      {"deit", K::kLearnedGrid, 0, S::kEncoder, {}, 2},
      {"dinov2", K::kLearnedGrid, 0, S::kEncoder, {}, 1},
      {"dinov2withregisters", K::kLearnedGrid, 0, S::kEncoder, {}, 1},
      {"ijepa", K::kLearnedGrid, 0, S::kEncoder, {}, 0},
      {"clipvisionmodel", K::kLearnedGrid, 0, S::kEncoder, {}, 1},
      {"siglipvisionmodel", K::kLearnedGrid, 0, S::kEncoder, {}, 0},
      {"vitmae", K::kSincosGrid, 0, S::kEncoder, {}, 1},
      // DPT's own ViT (DPTViTEmbeddings; DPTViTHybridEmbeddings after a CNN: the same grid).
      {"dpt", K::kLearnedGrid, 0, S::kEncoder, {}, 1},
      // VideoMAE: get_sinusoid_encoding_table over the (num_frames / tubelet_size)
      // (image_size / patch_size)^2 tubelets, Vaswani's interleaved sinusoids, fixed.
      {"videomae", K::kSinusoidal, 0, S::kEncoder, SinusoidalLayout::kInterleaved},
  };
  const std::string n = hf_lower_alnum(model_type);
  for (const HfAbsoluteFamily& f : kFamilies) {
    if (n == f.family) return &f;
  }
  return nullptr;
}

/// Size keys that configuration classes rename through their attribute_map:
/// num_attention_heads -> encoder_attention_heads for the encoder-decoder families (the
/// encoder's count; the decoder's, decoder_attention_heads, is the same in released
/// checkpoints), attention_heads for XGLM; hidden_size -> dim for DistilBERT, emb_dim for XLM.
/// Empty where the usual names (and their aliases) hold.
struct HfSizeKeys {
  std::string_view heads;
  std::string_view hidden;
};

inline HfSizeKeys hf_family_size_keys(std::string_view family) {
  if (family == "distilbert") return {{}, "dim"};
  if (family == "xlm") return {{}, "emb_dim"};
  if (family == "xglm") return {"attention_heads", {}};
  const HfAbsoluteFamily* f = hf_absolute_family(family);
  if (f && f->stack == HfStack::kEncoderDecoder) return {"encoder_attention_heads", {}};
  return {};
}

/// The interleaved families (see the file comment), normalised to lowercase alphanumerics so
/// that "deepseek_v3" and "DeepseekV3ForCausalLM" both match.
inline bool hf_family_is_interleaved(std::string_view name, bool prefix_match) {
  static constexpr std::string_view kInterleaved[] = {
      "gptj",       "codegen",      "cohere2",       "cohere",     "cohere2vision",
      "glm4",       "glm",          "glm4v",         "glm4vtext",  "chatglm",    "deepseekv2",
      "deepseekv3", "deepseekv32",  "kimik2",        "longcatflash", "llama4text",
      "llama4"};
  const std::string n = hf_lower_alnum(name);
  if (hf_family_is_ernie(n)) return true;
  for (std::string_view fam : kInterleaved) {
    if (n == fam) return true;
    // Architecture names: the family followed by the task head, e.g. "GPTJForCausalLM".
    if (prefix_match && n.size() > fam.size() && n.compare(0, fam.size(), fam) == 0 &&
        n.compare(fam.size(), 3, "for") == 0) {
      return true;
    }
  }
  return false;
}

/// Limits that keep a hostile config from allocating without bound.
inline constexpr std::int64_t kHfMaxHeads = std::int64_t{1} << 20;
inline constexpr std::int64_t kHfMaxLayers = std::int64_t{1} << 16;
inline constexpr std::int64_t kHfMaxDim = std::int64_t{1} << 30;
inline constexpr std::int64_t kHfMaxPosition = std::int64_t{1} << 53;
inline constexpr int kHfMaxDepth = 64;

/// Normalises an HF rope_type / legacy type name; notes what it changed.
inline RopeScalingType hf_rope_type(const HfConfigReader& r, std::string name,
                                    const std::string& path, std::vector<std::string>& notes) {
  struct Alias {
    std::string_view name, reads_as, why;
  };
  static constexpr Alias kAliases[] = {
      {"su", "longrope",
       " is the old name of \"longrope\" (Phi-3 configs before transformers 4.42)"},
      {"mrope", "default",
       " (Qwen2-VL): transformers reads it as \"default\"; the sections are in "
       "HfModelConfig::mrope"},
      {"telechat3-yarn", "yarn",
       " (TeleChat3): YaRN with g(s) = 0.07 ln s + 1 (RopeScaling::mscale_slope), as its remote "
       "code and vLLM"},
      {"xdrope", "dynamic",
       " (HunYuan-VL): transformers reads it as \"dynamic\" (with `alpha`: Hunyuan's NTK-alpha "
       "base); the four XD-RoPE sections are in HfModelConfig::mrope"},
      {"ernie_3d", "default",
       " (ERNIE-4.5-VL before transformers 5): default frequencies; the 3-D sections are in "
       "HfModelConfig::mrope"},
  };
  for (const Alias& a : kAliases) {
    if (name != a.name) continue;
    notes.push_back(path + " = \"" + name + "\"" + std::string(a.why) + "; read as " +
                    std::string(a.reads_as));
    name = std::string(a.reads_as);
    break;
  }
  if (name == "default") return RopeScalingType::kDefault;
  if (name == "linear") return RopeScalingType::kLinear;
  if (name == "ntk") {
    // transformers has no "ntk"; vLLM reads it as NTKScalingRotaryEmbedding, whose frequencies
    // are not bloc97's static NTK-aware ones (posenc's kNtk).
    notes.push_back(path + " = \"ntk\" is vLLM's recipe (transformers has none): base theta * "
                           "factor, frequencies / factor^(2/d), or NTK-RoPE-mixed with mixed_b; "
                           "read as rope_type vllm_ntk");
    return RopeScalingType::kVllmNtk;
  }
  if (name == "dynamic") return RopeScalingType::kDynamic;
  if (name == "yarn") return RopeScalingType::kYarn;
  if (name == "longrope") return RopeScalingType::kLongRope;
  if (name == "llama3") return RopeScalingType::kLlama3;
  if (name == "proportional") return RopeScalingType::kProportional;
  if (name == "vllm_ntk") return RopeScalingType::kVllmNtk;
  r.fail(path, "= \"", name,
         "\" is not a known rope_type (default, linear, ntk, dynamic, yarn, longrope/su, "
         "llama3, proportional, vllm_ntk, mrope)");
}

/// Inputs shared by every layer type's RoPE.
struct HfRopeContext {
  Eigen::Index head_dim = 0;
  std::int64_t max_position_embeddings = 0;
  std::int64_t top_original = 0;  ///< top-level original_max_position_embeddings (0 = absent)
  double top_theta = 10000.0;
  std::optional<double> top_partial;  ///< partial_rotary_factor / rotary_pct
  Eigen::Index top_rotary_dim = 0;    ///< rotary_dim / qk_rope_head_dim (absolute)
  RopeLayout layout = RopeLayout::kHalfSplit;
};

/// Notes every key of a RoPE dict that the recipe does not read: transformers warns about
/// them (`_check_received_keys`) and ignores them, and so does posenc, but a silent drop hides
/// a config written for another engine's recipe.
inline void hf_note_unread_keys(const nlohmann::json& dict, const std::string& dpath,
                                std::string_view recipe,
                                const std::vector<std::string_view>& known,
                                std::vector<std::string>& notes) {
  for (auto it = dict.begin(); it != dict.end(); ++it) {
    if (std::find(known.begin(), known.end(), it.key()) != known.end()) continue;
    notes.push_back(dpath + "." + it.key() + " is not read by rope_type " + std::string(recipe) +
                    " (transformers' recipe warns and ignores it, and so does posenc; a "
                    "model's own code might use it)");
  }
}

/// Builds the RopeParams of one layer type from its scaling dict (nullptr = none).
inline RopeParams hf_rope_params(const HfConfigReader& r, const nlohmann::json* dict,
                                 const std::string& dpath, const HfRopeContext& ctx,
                                 std::vector<std::string>& notes) {
  RopeParams p;
  p.head_dim = ctx.head_dim;
  p.layout = ctx.layout;
  p.theta = ctx.top_theta;
  p.max_position_embeddings = ctx.max_position_embeddings;
  p.rotary_dim = ctx.top_rotary_dim;
  if (ctx.top_partial) p.partial_rotary_factor = *ctx.top_partial;
  if (!dict) return p;
  if (!dict->is_object()) r.fail(dpath, "must be an object, got ", dict->type_name());
  const auto key = [&](std::string_view k) { return dpath + "." + std::string(k); };

  if (auto t = r.number(*dict, "rope_theta", key("rope_theta"))) {
    if (!(*t > 1.0)) r.fail(key("rope_theta"), "= ", *t, " must be > 1");
    p.theta = *t;
  }
  if (auto f = r.number(*dict, "partial_rotary_factor", key("partial_rotary_factor"))) {
    if (!(*f > 0.0 && *f <= 1.0)) {
      r.fail(key("partial_rotary_factor"), "= ", *f, " must be in (0, 1]");
    }
    p.partial_rotary_factor = *f;
    p.rotary_dim = 0;
  }

  std::string type_name = "default";
  std::string type_path = key("rope_type");
  if (auto t = r.string(*dict, "rope_type", key("rope_type"))) {
    type_name = *t;
  } else if (auto legacy = r.string(*dict, "type", key("type"))) {
    type_name = *legacy;
    type_path = key("type");
    notes.push_back(key("type") + " = \"" + *legacy +
                    "\": legacy key for rope_type (transformers copies it over)");
  }
  RopeScaling& sc = p.scaling;
  sc.type = hf_rope_type(r, type_name, type_path, notes);
  if (type_name == "telechat3-yarn") sc.mscale_slope = 0.07;
  if (sc.type == RopeScalingType::kDynamic && HfConfigReader::find(*dict, "alpha")) {
    // Hunyuan: "dynamic" with `alpha` is a fixed base theta * alpha^(d/(d-2)) (vLLM
    // DynamicNTKAlphaRotaryEmbedding), i.e. static NTK with factor = alpha; `factor` unused.
    const auto alpha = r.number(*dict, "alpha", key("alpha"));
    if (!(*alpha >= 1.0)) r.fail(key("alpha"), "= ", *alpha, " must be >= 1");
    std::ostringstream s;
    s << key("alpha") << " = " << *alpha << ": Hunyuan's NTK-alpha, a fixed base theta * alpha^"
      << "(d/(d-2)); read as rope_type ntk with factor = alpha (" << key("factor")
      << " is not used)";
    notes.push_back(s.str());
    sc.type = RopeScalingType::kNtk;
    sc.factor = *alpha;
    hf_note_unread_keys(*dict, dpath, "ntk (Hunyuan alpha)",
                        {"rope_type", "type", "rope_theta", "partial_rotary_factor", "alpha",
                         "factor", "mrope_section", "mrope_interleaved", "xdrope_section"},
                        notes);
    return p;
  }

  // Keys are parsed (and checked) only for the recipes that read them; the rest are noted below.
  const auto factor = sc.type != RopeScalingType::kDefault
                          ? r.number(*dict, "factor", key("factor"))
                          : std::nullopt;
  const bool needs_factor = sc.type == RopeScalingType::kLinear ||
                            sc.type == RopeScalingType::kNtk ||
                            sc.type == RopeScalingType::kVllmNtk ||
                            sc.type == RopeScalingType::kDynamic ||
                            sc.type == RopeScalingType::kYarn || sc.type == RopeScalingType::kLlama3;
  if (needs_factor && !factor) {
    r.fail(key("factor"), "is missing; rope_type ", to_string(sc.type), " requires it");
  }
  if (factor) {
    if (!(*factor >= 1.0)) r.fail(key("factor"), "= ", *factor, " must be >= 1");
    sc.factor = *factor;
  }

  // L0: HF (standardize_rope_params) gives the top-level key priority for llama3/yarn/longrope.
  const bool needs_original = sc.type == RopeScalingType::kYarn ||
                              sc.type == RopeScalingType::kLongRope ||
                              sc.type == RopeScalingType::kLlama3 ||
                              sc.type == RopeScalingType::kDynamic;
  const auto inner_original =
      needs_original ? r.integer(*dict, "original_max_position_embeddings",
                                 key("original_max_position_embeddings"))
                     : std::nullopt;
  if (inner_original && *inner_original <= 0) {
    r.fail(key("original_max_position_embeddings"), "= ", *inner_original, " must be > 0");
  }
  if (needs_original) {
    std::int64_t l0 = 0;
    if (ctx.top_original > 0 && sc.type != RopeScalingType::kDynamic) {
      l0 = ctx.top_original;
      if (inner_original && *inner_original != l0) {
        notes.push_back("top-level original_max_position_embeddings = " + std::to_string(l0) +
                        " overrides " + key("original_max_position_embeddings") + " = " +
                        std::to_string(*inner_original) + " (transformers gives it priority)");
      }
    } else if (inner_original) {
      l0 = *inner_original;
    } else if (ctx.top_original > 0) {
      l0 = ctx.top_original;
    } else {
      if (ctx.max_position_embeddings <= 0) {
        r.fail(key("original_max_position_embeddings"),
               "is missing and so is max_position_embeddings; rope_type ", to_string(sc.type),
               " needs the pre-training length");
      }
      l0 = ctx.max_position_embeddings;
      notes.push_back(key("original_max_position_embeddings") +
                      " absent: L0 = max_position_embeddings = " + std::to_string(l0) +
                      " (transformers' fallback)");
    }
    sc.original_max_position_embeddings = l0;
  }

  if (sc.type == RopeScalingType::kYarn) {
    // HF: `rope_scaling.get("beta_fast") or 32` -- 0 and null both mean the default.
    if (auto b = r.number(*dict, "beta_fast", key("beta_fast")); b && *b != 0.0) {
      if (!(*b > 0.0)) r.fail(key("beta_fast"), "= ", *b, " must be > 0");
      sc.beta_fast = *b;
    }
    if (auto b = r.number(*dict, "beta_slow", key("beta_slow")); b && *b != 0.0) {
      if (!(*b > 0.0)) r.fail(key("beta_slow"), "= ", *b, " must be > 0");
      sc.beta_slow = *b;
    }
    if (auto m = r.number(*dict, "mscale", key("mscale"))) sc.mscale = *m;
    if (auto m = r.number(*dict, "mscale_all_dim", key("mscale_all_dim"))) sc.mscale_all_dim = *m;
    if (auto t = r.boolean(*dict, "truncate", key("truncate"))) sc.truncate = *t;
    if (ctx.max_position_embeddings > 0 && sc.original_max_position_embeddings > 0) {
      const double implicit = static_cast<double>(ctx.max_position_embeddings) /
                              static_cast<double>(sc.original_max_position_embeddings);
      // A ratio of 1 too (Qwen's documented YaRN block added to a config whose
      // max_position_embeddings stays the pre-training length): the older code then planned
      // factor 1, no interpolation at all.
      if (std::abs(implicit - sc.factor) > 1e-9 * sc.factor) {
        std::ostringstream s;
        s << key("factor") << " = " << sc.factor << " differs from max_position_embeddings / "
          << "original_max_position_embeddings = " << implicit
          << "; the explicit factor is used (transformers since PR #40320 warns the same way; "
             "revisions before it replaced factor by that ratio whenever rope_scaling gave "
             "original_max_position_embeddings)";
        notes.push_back(s.str());
      }
    }
  }
  if (sc.type == RopeScalingType::kVllmNtk) {
    if (auto m = r.number(*dict, "mixed_b", key("mixed_b"))) {
      if (!(std::isfinite(*m) && *m > 0.0)) r.fail(key("mixed_b"), "= ", *m, " must be > 0");
      sc.mixed_b = *m;
    }
  }
  if (sc.type == RopeScalingType::kLlama3) {
    const auto lf = r.number(*dict, "low_freq_factor", key("low_freq_factor"));
    const auto hf = r.number(*dict, "high_freq_factor", key("high_freq_factor"));
    if (!lf) r.fail(key("low_freq_factor"), "is missing; rope_type llama3 requires it");
    if (!hf) r.fail(key("high_freq_factor"), "is missing; rope_type llama3 requires it");
    if (!(*lf > 0.0)) r.fail(key("low_freq_factor"), "= ", *lf, " must be > 0");
    if (!(*hf >= *lf)) {
      r.fail(key("high_freq_factor"), "= ", *hf, " must be >= low_freq_factor = ", *lf);
    }
    sc.low_freq_factor = *lf;
    sc.high_freq_factor = *hf;
  }
  if (sc.type == RopeScalingType::kLongRope) {
    auto sf = r.number_list(*dict, "short_factor", key("short_factor"));
    auto lf = r.number_list(*dict, "long_factor", key("long_factor"));
    if (!sf) r.fail(key("short_factor"), "is missing; rope_type longrope requires it");
    if (!lf) r.fail(key("long_factor"), "is missing; rope_type longrope requires it");
    sc.short_factor = std::move(*sf);
    sc.long_factor = std::move(*lf);
    // Phi-3.5-MoE: the cos/sin multiplier of each table (transformers PhimoeRotaryEmbedding,
    // vLLM Phi3LongRoPEScaledRotaryEmbedding); the paper's default when absent.
    for (const char* name : {"short_mscale", "long_mscale"}) {
      if (auto m = r.number(*dict, name, key(name))) {
        if (!(std::isfinite(*m) && *m > 0.0)) r.fail(key(name), "= ", *m, " must be > 0");
        (std::string_view(name) == "short_mscale" ? sc.short_mscale : sc.long_mscale) = *m;
      }
    }
  }
  // transformers reads attention_factor for yarn and longrope only; the other recipes return
  // a cos/sin multiplier of 1 whatever the dict says.
  const bool reads_attention_factor =
      sc.type == RopeScalingType::kYarn || sc.type == RopeScalingType::kLongRope;
  if (reads_attention_factor) {
    if (auto a = r.number(*dict, "attention_factor", key("attention_factor"))) {
      if (!(*a > 0.0)) r.fail(key("attention_factor"), "= ", *a, " must be > 0");
      sc.attention_factor = *a;
    }
  }
  if (sc.type == RopeScalingType::kLongRope && !sc.attention_factor && ctx.top_original <= 0 &&
      factor && sc.original_max_position_embeddings > 0) {
    // Without a top-level original, HF derives the default attention factor from `factor`,
    // not from max/L0 (modeling_rope_utils `_compute_longrope_parameters`).
    const double l0 = static_cast<double>(sc.original_max_position_embeddings);
    sc.attention_factor =
        sc.factor <= 1.0 ? 1.0 : std::sqrt(1.0 + std::log(sc.factor) / std::log(l0));
  }
  std::vector<std::string_view> known = {"rope_type", "type", "rope_theta", "partial_rotary_factor",
                                         "mrope_section", "mrope_interleaved", "xdrope_section"};
  if (HfConfigReader::find(*dict, "llama_4_scaling_beta")) {  // Mistral-3's query temperature
    known.insert(known.end(), {"llama_4_scaling_beta", "original_max_position_embeddings"});
  }
  // FoPE (InternS1-Pro): its cos / sin mixtures are weights (fope.hpp); the keys say how many
  // frequencies they mix and whether each kv head has its own.
  const bool fope = HfConfigReader::find(*dict, "fope_init_factor") ||
                    HfConfigReader::find(*dict, "fope_sep_head") ||
                    HfConfigReader::find(*dict, "num_inv_freq");
  if (fope) {
    known.insert(known.end(), {"fope_init_factor", "fope_sep_head", "num_inv_freq"});
    const auto num = HfConfigReader::find(*dict, "num_inv_freq");
    const auto sep = HfConfigReader::find(*dict, "fope_sep_head");
    notes.push_back(dpath + ": FoPE (fope_sep_head = " +
                    (sep && sep->is_boolean() ? (sep->get<bool>() ? "true" : "false") : "absent") +
                    ", num_inv_freq = " + (num && num->is_number_integer() ? num->dump() : "absent") +
                    "): the cos / sin are learned mixtures of this plan's frequencies, weights of "
                    "the checkpoint (fope_num_frequencies, fill_fope_cos_sin_cache, "
                    "apply_fope_qk_inplace)");
  }
  switch (sc.type) {
    case RopeScalingType::kDefault: break;
    case RopeScalingType::kLinear:
    case RopeScalingType::kNtk:
    case RopeScalingType::kProportional: known.push_back("factor"); break;
    case RopeScalingType::kVllmNtk: known.insert(known.end(), {"factor", "mixed_b"}); break;
    case RopeScalingType::kDynamic:
      known.insert(known.end(), {"factor", "original_max_position_embeddings"});
      break;
    case RopeScalingType::kYarn:
      known.insert(known.end(), {"factor", "original_max_position_embeddings", "beta_fast",
                                 "beta_slow", "mscale", "mscale_all_dim", "truncate",
                                 "attention_factor"});
      break;
    case RopeScalingType::kLlama3:
      known.insert(known.end(), {"factor", "original_max_position_embeddings", "low_freq_factor",
                                 "high_freq_factor"});
      break;
    case RopeScalingType::kLongRope:
      known.insert(known.end(), {"factor", "original_max_position_embeddings", "short_factor",
                                 "long_factor", "attention_factor", "short_mscale",
                                 "long_mscale"});
      break;
  }
  hf_note_unread_keys(*dict, dpath, to_string(sc.type), known, notes);
  if (sc.type == RopeScalingType::kYarn && HfConfigReader::find(*dict, "extrapolation_factor")) {
    notes.push_back(dpath + ".extrapolation_factor: vLLM applies it, transformers does not; set "
                    "RopeScaling::extrapolation_factor to follow vLLM");
  }
  return p;
}

/// Checks one layer type's params with the planner and re-throws naming the file and the key.
inline void hf_check_rope(const HfConfigReader& r, const RopeParams& p, const std::string& dpath) {
  Eigen::Index rd = 0;
  try {
    rd = resolved_rotary_dim(p);
  } catch (const std::invalid_argument& e) {
    r.fail("head_dim / partial_rotary_factor / rotary_dim", "give an unusable rotary width: ",
           e.what());
  }
  const auto half = static_cast<std::size_t>(rd / 2);
  if (p.scaling.type == RopeScalingType::kLongRope) {
    if (p.scaling.short_factor.size() != half) {
      r.fail(dpath + ".short_factor", "has ", p.scaling.short_factor.size(),
             " entries; it must have rotary_dim / 2 = ", half);
    }
    if (p.scaling.long_factor.size() != half) {
      r.fail(dpath + ".long_factor", "has ", p.scaling.long_factor.size(),
             " entries; it must have rotary_dim / 2 = ", half);
    }
    for (const auto* list : {&p.scaling.short_factor, &p.scaling.long_factor}) {
      for (std::size_t j = 0; j < list->size(); ++j) {
        if (!((*list)[j] > 0.0)) {
          r.fail(dpath + (list == &p.scaling.short_factor ? ".short_factor" : ".long_factor"),
                 "[", j, "] = ", (*list)[j], " must be > 0");
        }
      }
    }
  }
  try {
    (void)compute_rope_frequencies(p, 0);
  } catch (const std::invalid_argument& e) {
    r.fail(dpath, "describes RoPE parameters posenc rejects: ", e.what());
  }
}

/// Llama-4's vision tower (Llama4VisionConfig: hidden_size 768, num_attention_heads 16,
/// image_size 448, patch_size 14, rope_theta 10000 by default; Scout: 1408 / 16, 336 / 14).
inline void hf_read_llama4_vision_rope(const HfConfigReader& r, const nlohmann::json& vc,
                                       HfModelConfig& out) {
  const auto read = [&](std::string_view key, std::int64_t fallback, std::int64_t limit) {
    const std::string where = "vision_config." + std::string(key);
    const std::int64_t v = r.integer(vc, key, where).value_or(fallback);
    if (v <= 0 || v > limit) r.fail(where, "= ", v, " must be in [1, ", limit, "]");
    return v;
  };
  const std::int64_t width = read("hidden_size", 768, kHfMaxDim);
  const std::int64_t heads = read("num_attention_heads", 16, kHfMaxHeads);
  const std::int64_t image = read("image_size", 448, kHfMaxDim);
  const std::int64_t patch = read("patch_size", 14, kHfMaxDim);
  const double theta = r.number(vc, "rope_theta", "vision_config.rope_theta").value_or(10000.0);
  if (!(theta > 1.0)) r.fail("vision_config.rope_theta", "= ", theta, " must be > 1");
  const std::int64_t head_dim = width / heads;
  if (head_dim <= 0 || head_dim % 4 != 0 || head_dim > kMaxRotaryDim) {
    out.notes.push_back("vision_config: heads of " + std::to_string(head_dim) +
                        " are not a multiple of 4 up to " + std::to_string(kMaxRotaryDim) +
                        "; the vision RoPE is not read");
    return;
  }
  HfModelConfig::VisionRope v;
  v.head_dim = static_cast<Eigen::Index>(head_dim);
  v.theta = theta;
  v.llama4 = true;
  if (patch > image) {
    r.fail("vision_config.patch_size", "= ", patch, " is larger than image_size = ", image,
           ": no patch fits");
  }
  v.grid_side = static_cast<Eigen::Index>(image / patch);
  out.vision_rope = v;
  out.notes.push_back("vision_config: Llama-4 2-D RoPE on heads of " + std::to_string(head_dim) +
                      ", " + std::to_string(v.grid_side) + " x " + std::to_string(v.grid_side) +
                      " patches + class token (vision_rope_2d_llama4)");
}

/// The vision tower's 2-D RoPE of the Qwen-VL / GLM-4V families (HfModelConfig::vision_rope):
/// only for those root model_types, since other vision_configs (CLIP, SigLIP, Pixtral) rotate
/// differently or not at all.
inline void hf_read_vision_rope(const HfConfigReader& r, const nlohmann::json& root,
                                HfModelConfig& out) {
  static constexpr std::string_view kFamilies[] = {"qwen2vl", "qwen25vl", "qwen3vl",
                                                   "qwen3vlmoe", "glm4v", "glm4vmoe"};
  const auto type = r.string(root, "model_type", "model_type");
  const nlohmann::json* vc = HfConfigReader::find(root, "vision_config");
  if (!type || !vc || !vc->is_object()) return;
  const std::string family = hf_lower_alnum(*type);
  if (family == "llama4") {
    hf_read_llama4_vision_rope(r, *vc, out);
    return;
  }
  if (std::find(std::begin(kFamilies), std::end(kFamilies), family) == std::end(kFamilies)) return;
  const auto heads = r.integer(*vc, "num_heads", "vision_config.num_heads");
  std::string width_key = "vision_config.embed_dim";  // Qwen2-VL; hidden_size is the merger's
  auto width = r.integer(*vc, "embed_dim", width_key);
  if (!width) {
    width_key = "vision_config.hidden_size";
    width = r.integer(*vc, "hidden_size", width_key);
  }
  if (!heads || !width) {
    out.notes.push_back("vision_config: no num_heads / width, the vision RoPE is not read");
    return;
  }
  if (*heads <= 0 || *heads > kHfMaxHeads) {
    r.fail("vision_config.num_heads", "= ", *heads, " must be in [1, ", kHfMaxHeads, "]");
  }
  if (*width <= 0 || *width > kHfMaxDim) {
    r.fail(width_key, "= ", *width, " must be in [1, ", kHfMaxDim, "]");
  }
  // Absent: the vision config classes' default, 2 in every family here (Qwen2VLVisionConfig,
  // Qwen2_5_VLVisionConfig, Qwen3VLVisionConfig, Glm4vVisionConfig: spatial_merge_size=2).
  const auto merge = r.integer(*vc, "spatial_merge_size", "vision_config.spatial_merge_size")
                         .value_or(2);
  if (merge <= 0 || merge > kHfMaxDim) {
    r.fail("vision_config.spatial_merge_size", "= ", merge, " must be in [1, ", kHfMaxDim, "]");
  }
  const std::int64_t head_dim = *width / *heads;
  if (head_dim <= 0 || head_dim % 4 != 0 || head_dim > kMaxRotaryDim) {
    out.notes.push_back("vision_config: heads of " + std::to_string(head_dim) +
                        " are not a multiple of 4 up to " + std::to_string(kMaxRotaryDim) +
                        "; the vision RoPE is not read");
    return;
  }
  out.vision_rope = HfModelConfig::VisionRope{static_cast<Eigen::Index>(head_dim),
                                              static_cast<Eigen::Index>(merge), 10000.0};
  out.notes.push_back("vision_config: 2-D RoPE on heads of " + std::to_string(head_dim) + " (" +
                      width_key + " / num_heads), patches merged " + std::to_string(merge) +
                      " x " + std::to_string(merge) + " (vision_rope_2d)");
}

/// Bounded nesting check before parsing: a hostile "[[[[..." must not reach recursive code.
inline bool hf_nesting_within(std::string_view text, int limit) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '[' || c == '{') {
      if (++depth > limit) return false;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return true;
}

/// Encoders: bidirectional attention (ModernBERT and its local window, is_causal = false,
/// Gemma's use_bidirectional_attention and its halved window) into out.mask / sliding_window.
inline void hf_read_encoder_mask(const HfConfigReader& r, const nlohmann::json& c,
                                 const std::string& prefix, HfModelConfig& out) {
  using json = nlohmann::json;
  const auto path = [&](std::string_view k) { return prefix + std::string(k); };
  const std::string fam = detail::hf_lower_alnum(out.model_type);
  if (fam == "modernbert") {
    out.mask = MaskMode::kBidirectional;
    // ModernBERT's local layers: |i - j| <= local_attention / 2 (HF ModernBertModel's
    // sliding_window_mask, FlashAttention window_size (l / 2, l / 2)).
    auto local = r.integer(c, "local_attention", path("local_attention"));
    if (!local) {
      local = 128;
      out.notes.push_back("modernbert: local_attention absent, transformers' default 128");
    }
    if (*local <= 0 || *local > detail::kHfMaxPosition) {
      r.fail(path("local_attention"), "= ", *local, " must be in [1, 2^53]");
    }
    out.sliding_window = *local / 2 + 1;
    out.notes.push_back("modernbert: bidirectional; local layers see |i - j| <= local_attention"
                        " / 2 = " + std::to_string(*local / 2) + " (sliding_window " +
                        std::to_string(out.sliding_window) + ")");
  }
  if (auto causal = r.boolean(c, "is_causal", path("is_causal")); causal && !*causal) {
    out.mask = MaskMode::kBidirectional;
    out.notes.push_back("is_causal = false: bidirectional attention");
  }
  if (const json* bi = HfConfigReader::find(c, "use_bidirectional_attention")) {
    const std::string key = path("use_bidirectional_attention");
    bool all = false;
    if (bi->is_boolean()) {
      all = bi->get<bool>();
    } else if (bi->is_string() && (bi->get<std::string>() == "all" || bi->get<std::string>() == "vision")) {
      all = bi->get<std::string>() == "all";
      if (!all) out.notes.push_back(key + " = \"vision\": the text tokens stay causal");
    } else if (!bi->is_null()) {
      r.fail(key, "must be a bool, \"all\" or \"vision\", got ", bi->dump());
    }
    if (all) {
      out.mask = MaskMode::kBidirectional;
      if (out.sliding_window > 0) {
        // transformers halves it (sliding_window // 2 + 1 "due to fa we set exclusive
        // bounds"): FlashAttention then sees |i - j| <= s / 2 (its eager mask, inclusive in
        // later versions, one more key each side).
        const std::int64_t s0 = out.sliding_window;
        out.sliding_window = s0 / 2 + 1;
        out.notes.push_back(key + ": bidirectional; sliding layers see |i - j| <= "
                            "sliding_window / 2 = " + std::to_string(s0 / 2) +
                            " (sliding_window " + std::to_string(out.sliding_window) + ")");
      } else {
        out.notes.push_back(key + ": bidirectional attention");
      }
    }
  }
}

/// T5's relative attention bias (relative_attention_num_buckets): scheme kRelativeBias with the
/// bucket parameters, d_kv heads and T5's unscaled q.k. False when the config has no buckets.
inline bool hf_read_relative_bias(const HfConfigReader& r, const nlohmann::json& c,
                                  const std::string& prefix, HfModelConfig& out) {
  const auto path = [&](std::string_view k) { return prefix + std::string(k); };
  const auto nb = r.integer(c, "relative_attention_num_buckets",
                            path("relative_attention_num_buckets"));
  if (!nb) return false;
  // T5 and its descendants (mT5, UMT5, Flan-T5, Switch, Pix2Struct, ...), MPNet: a learned
  // bias per (bucket, head); no RoPE, no ALiBi.
  auto md = r.integer(c, "relative_attention_max_distance", path("relative_attention_max_distance"));
  if (!md) {
    md = 128;
    out.notes.push_back("relative_attention_max_distance absent: transformers' default 128");
  }
  const std::string fam = detail::hf_lower_alnum(out.model_type);
  const bool encoder_decoder = r.boolean(c, "is_encoder_decoder", path("is_encoder_decoder"))
                                   .value_or(fam.find("t5") != std::string::npos);
  // Two-sided buckets (encoders) need an exact bucket per side, and max_distance must lie
  // beyond the exact buckets of every stack (a decoder's one-sided ones: num_buckets / 2).
  if (*nb < 4 || *nb > (std::int64_t{1} << 20)) {
    r.fail(path("relative_attention_num_buckets"), "= ", *nb, " must be in [4, 2^20]");
  }
  const std::int64_t exact = encoder_decoder ? *nb / 2 : *nb / 4;
  if (*md <= exact || *md > (std::int64_t{1} << 20)) {
    r.fail(path("relative_attention_max_distance"), "= ", *md, " must be in (", exact,
           " (the exact buckets), 2^20]");
  }
  out.scheme = HfPositionScheme::kRelativeBias;
  out.relative_attention_num_buckets = *nb;
  out.relative_attention_max_distance = *md;
  // T5 keeps the inner width apart from d_model (d_kv x num_heads; T5-11B: 128 x 128 vs 1024).
  Eigen::Index head_dim = out.hidden_size > 0 && out.num_attention_heads > 0
                              ? out.hidden_size / out.num_attention_heads
                              : 0;
  if (auto dkv = r.integer(c, "d_kv", path("d_kv"))) {
    if (*dkv <= 0 || *dkv > detail::kHfMaxDim) {
      r.fail(path("d_kv"), "= ", *dkv, " must be in [1, ", detail::kHfMaxDim, "]");
    }
    head_dim = *dkv;
  }
  out.attention_head_dim = head_dim;
  const bool t5_scale = fam.find("t5") != std::string::npos || fam == "switchtransformers" ||
                        fam == "pix2struct" || fam == "udop" || fam == "pop2piano";
  if (t5_scale) {
    // T5 does not scale q.k (Mesh TensorFlow folds 1 / sqrt(d_kv) into the initialisation).
    out.softmax_scale = 1.0;
  } else if (head_dim > 0) {
    out.softmax_scale = 1.0 / std::sqrt(static_cast<double>(head_dim));
  }
  if (!encoder_decoder) out.mask = MaskMode::kBidirectional;
  std::ostringstream note;
  note << "relative attention bias (T5 buckets): " << *nb << " buckets up to distance " << *md
       << "; the table is the checkpoint's relative_attention_bias weight "
          "(relative_position_bias(table, max_distance, bidirectional)); softmax scale "
       << (t5_scale ? "1 (T5 does not scale q.k)" : "1 / sqrt(head_dim)");
  if (encoder_decoder) {
    note << "; encoder self-attention: bidirectional buckets and mask, decoder self-attention: "
            "one-sided buckets, causal";
  } else {
    note << "; an encoder: bidirectional buckets and mask";
  }
  out.notes.push_back(note.str());
  return true;
}

/// image_size / patch_size as ViTPatchEmbeddings reads them: one integer for both axes, or
/// [height, width]. Empty when the key is absent.
inline std::optional<std::pair<std::int64_t, std::int64_t>> hf_image_pair(
    const HfConfigReader& r, const nlohmann::json& c, std::string_view key,
    const std::string& where) {
  const nlohmann::json* v = HfConfigReader::find(c, key);
  if (!v || v->is_null()) return std::nullopt;
  std::int64_t hw[2] = {0, 0};
  if (v->is_array()) {
    if (v->size() != 2) r.fail(where, "must be one integer or [height, width], got ", v->dump());
    for (std::size_t i = 0; i < 2; ++i) {
      hw[i] = r.integer_value((*v)[i], where + "[" + std::to_string(i) + "]");
    }
  } else {
    hw[0] = hw[1] = r.integer_value(*v, where);
  }
  for (const std::int64_t x : hw) {
    if (x <= 0 || x > kHfMaxDim) r.fail(where, "= ", v->dump(), " must be in [1, ", kHfMaxDim, "]");
  }
  return std::pair{hw[0], hw[1]};
}

/// image_size and patch_size (each hf_image_pair) of a family with class defaults: a default
/// for an absent key, with a note naming `owner` (the config class). Returns {image, patch}.
inline std::pair<std::pair<std::int64_t, std::int64_t>, std::pair<std::int64_t, std::int64_t>>
hf_image_and_patch(const HfConfigReader& r, const nlohmann::json& c, const std::string& prefix,
                   std::int64_t default_image, std::int64_t default_patch, std::string_view owner,
                   HfModelConfig& out) {
  const auto read = [&](const char* key, std::int64_t fallback) {
    const auto v = hf_image_pair(r, c, key, prefix + key);
    if (!v) {
      out.notes.push_back(prefix + key + " absent: " + std::string(owner) + "'s default " +
                          std::to_string(fallback));
    }
    return v.value_or(std::pair<std::int64_t, std::int64_t>{fallback, fallback});
  };
  return {read("image_size", default_image), read("patch_size", default_patch)};
}

/// GPT-Neo's global and local layers (GPTNeoConfig: attention_types [[["global", "local"], 12]]
/// expanded into attention_layers, window_size 256). A local layer masks the keys with
/// i - j >= window_size (GPTNeoSelfAttention: bias ^ tril(bias, -window_size)), which is
/// posenc's sliding_window W = window_size: layer_types "sliding_attention" there.
inline void hf_read_gpt_neo_layers(const HfConfigReader& r, const nlohmann::json& c,
                                   const std::string& prefix, HfModelConfig& out) {
  using json = nlohmann::json;
  const auto path = [&](std::string_view k) { return prefix + std::string(k); };
  std::vector<std::string> kinds;
  std::string source = path("attention_types");
  const auto add = [&](const json& e, const std::string& where) {
    if (!e.is_string() || (e.get<std::string>() != "global" && e.get<std::string>() != "local")) {
      r.fail(where, "must be \"global\" or \"local\", got ", e.dump());
    }
    if (kinds.size() >= static_cast<std::size_t>(kHfMaxLayers)) {
      r.fail(where, "makes more than ", kHfMaxLayers, " layers");
    }
    kinds.push_back(e.get<std::string>());
  };
  if (const json* layers = HfConfigReader::find(c, "attention_layers")) {
    source = path("attention_layers");
    if (!layers->is_array()) r.fail(source, "must be a list of strings");
    for (std::size_t i = 0; i < layers->size(); ++i) {
      add((*layers)[i], path("attention_layers") + "[" + std::to_string(i) + "]");
    }
  } else if (const json* types = HfConfigReader::find(c, "attention_types")) {
    // [[pattern, repeats], ...]: pattern repeated `repeats` times (expand_attention_types_params).
    const std::string key = path("attention_types");
    if (!types->is_array()) r.fail(key, "must be a list of [pattern, repeats] pairs");
    for (std::size_t i = 0; i < types->size(); ++i) {
      const json& item = (*types)[i];
      const std::string at = key + "[" + std::to_string(i) + "]";
      if (!item.is_array() || item.size() != 2 || !item[0].is_array()) {
        r.fail(at, "must be a [pattern, repeats] pair, got ", item.dump());
      }
      const std::int64_t repeats = r.integer_value(item[1], at + "[1]");
      const std::size_t width = item[0].size();
      // Bounded before expanding: repeats x width layers may not pass kHfMaxLayers.
      const auto room = static_cast<std::int64_t>(kHfMaxLayers) -
                        static_cast<std::int64_t>(kinds.size());
      if (width == 0 || repeats < 0 || repeats > room / static_cast<std::int64_t>(width)) {
        r.fail(at, "= [", width, " layer types, ", repeats, " repeats] must name at least one ",
               "layer and stay within ", kHfMaxLayers, " layers");
      }
      for (std::int64_t k = 0; k < repeats; ++k) {
        for (std::size_t j = 0; j < width; ++j) {
          add(item[0][j], at + "[0][" + std::to_string(j) + "]");
        }
      }
    }
  } else {
    const std::int64_t n = out.num_hidden_layers > 0 ? out.num_hidden_layers : 24;
    for (std::int64_t i = 0; i < n; ++i) kinds.push_back(i % 2 == 0 ? "global" : "local");
    out.notes.push_back(path("attention_types") + " absent: GPTNeoConfig's default, global and "
                        "local layers alternating");
  }
  if (out.num_hidden_layers == 0) {
    out.num_hidden_layers = static_cast<Eigen::Index>(kinds.size());
  } else if (static_cast<Eigen::Index>(kinds.size()) != out.num_hidden_layers) {
    r.fail(source, "gives ", kinds.size(), " layers, the config's layer count is ",
           out.num_hidden_layers, " (GPTNeoConfig requires them equal)");
  }
  auto window = r.integer(c, "window_size", path("window_size"));
  if (!window) window = 256;  // GPTNeoConfig's default
  if (*window <= 0 || *window > kHfMaxPosition) {
    r.fail(path("window_size"), "= ", *window, " must be in [1, 2^53]");
  }
  std::size_t local = 0;
  for (const std::string& k : kinds) {
    out.layer_types.push_back(k == "local" ? "sliding_attention" : "full_attention");
    local += k == "local";
  }
  out.sliding_window = local > 0 ? *window : 0;
  out.notes.push_back("gpt_neo: " + std::to_string(local) + " of " + std::to_string(kinds.size()) +
                      " layers local, each query seeing its last window_size = " +
                      std::to_string(*window) + " keys (sliding_window)");
}

/// Scheme kAbsolute (HfModelConfig::absolute): the table's kind and formula, a vision grid's
/// geometry, and the family's mask. pe_type: position_embedding_type when the config has one;
/// default_grid: the patch grid when the config gives no image or patch size (BEiT's, from
/// BeitConfig's defaults), else the grid stays unknown.
inline void hf_read_absolute(
    const HfConfigReader& r, const nlohmann::json& c, const std::string& prefix,
    const HfAbsoluteFamily* family, const std::optional<std::string>& pe_type,
    std::string_view hidden_key, HfModelConfig& out,
    std::optional<std::pair<std::int64_t, std::int64_t>> default_grid = std::nullopt) {
  const auto path = [&](std::string_view k) { return prefix + std::string(k); };
  HfAbsolutePositions a;
  a.kind = family ? family->kind : HfAbsoluteKind::kLearned;
  if (family && a.kind == HfAbsoluteKind::kSinusoidal) {
    a.sinusoidal = SinusoidalParams{family->layout, 10000.0};
  }
  // XLM's sinusoidal_embeddings and DistilBERT's sinusoidal_pos_embds replace the learned
  // table by create_sinusoidal_embeddings: pos / 10000^(2 (j // 2) / d), sin on even j, cos on
  // odd j (Vaswani's interleaving).
  const std::string fam = hf_lower_alnum(out.model_type);
  const char* flag = fam == "xlm"          ? "sinusoidal_embeddings"
                     : fam == "distilbert" ? "sinusoidal_pos_embds"
                                           : nullptr;
  const bool flag_on = flag && r.boolean(c, flag, path(flag)).value_or(false);
  if (flag_on) {
    a.kind = HfAbsoluteKind::kSinusoidal;
    a.sinusoidal = SinusoidalParams{SinusoidalLayout::kInterleaved, 10000.0};
  }
  if (family && !pe_type) {
    std::string note = "model_type \"" + out.model_type + "\": " +
                       std::string(to_string(a.kind)) + " absolute positions (no RoPE, no ALiBi)";
    if (family->offset > 0) {
      const bool sinusoidal = a.kind == HfAbsoluteKind::kSinusoidal;
      note += "; position p reads " +
              std::string(sinusoidal ? "the sinusoid of p + " : "the table's row p + ") +
              std::to_string(family->offset) +
              (sinusoidal ? "" : " (LearnedPositionTable's position_offset)");
    }
    out.notes.push_back(note);
  }
  if (flag_on) {
    out.notes.push_back(path(flag) + " = true: fixed interleaved sinusoids, not a learned table");
  }
  if (pe_type && *pe_type == "sinusoidal" && a.kind != HfAbsoluteKind::kSinusoidal) {
    a.kind = HfAbsoluteKind::kSinusoidal;
    out.notes.push_back("position_embedding_type = \"sinusoidal\": the formula (interleaved or "
                        "[sin | cos], which exponent) is the model code's, not the config's");
  }
  if (a.sinusoidal) {
    out.notes.push_back(std::string("sinusoidal table: layout ") +
                        std::string(to_string(a.sinusoidal->layout)) + ", base 10000");
  }
  // The width the sinusoids run over must suit the formula (even; fairseq's d/2 - 1 > 0).
  const auto check_width = [&](const SinusoidalParams& sp) {
    if (out.hidden_size <= 0) return;
    try {
      validate_sinusoidal("hf_config", out.hidden_size, sp);
    } catch (const std::invalid_argument& e) {
      r.fail(path(hidden_key), "= ", out.hidden_size, " cannot carry ", out.model_type,
             "'s sinusoids: ", e.what());
    }
  };
  const bool grid =
      a.kind == HfAbsoluteKind::kLearnedGrid || a.kind == HfAbsoluteKind::kSincosGrid;
  if (grid && family) {
    a.leading_rows = family->leading_rows;
    a.embed_dim = out.hidden_size;
    const auto image = hf_image_pair(r, c, "image_size", path("image_size"));
    const auto patch = hf_image_pair(r, c, "patch_size", path("patch_size"));
    if (image && patch) {
      if (patch->first > image->first || patch->second > image->second) {
        r.fail(path("patch_size"), "is larger than image_size: no patch fits");
      }
      a.grid_h = image->first / patch->first;
      a.grid_w = image->second / patch->second;
      // Both at most 2^30, so the product is exact; 2^40 patches is far past any table.
      if (a.grid_h * a.grid_w > (std::int64_t{1} << 40)) {
        r.fail(path("image_size"), "gives a ", a.grid_h, " x ", a.grid_w, " patch grid, more ",
               "than 2^40 patches");
      }
    } else if (default_grid) {
      a.grid_h = default_grid->first;
      a.grid_w = default_grid->second;
    }
    if (a.grid_h > 0) {
      out.notes.push_back(std::string(to_string(a.kind)) + ": " + std::to_string(a.grid_h) +
                          " x " + std::to_string(a.grid_w) + " patches after " +
                          std::to_string(a.leading_rows) + " leading row(s)");
    } else {
      out.notes.push_back("image_size / patch_size absent: the grid's size is not known");
    }
  }
  if (a.kind == HfAbsoluteKind::kSincosGrid) {
    // ViTMAEEmbeddings: get_2d_sincos_pos_embed(width, int(num_patches ** 0.5)) for the
    // encoder and the decoder, one sin-cos block per half: both widths multiples of 4, and
    // num_patches rows only when the grid is square.
    if (a.grid_h != a.grid_w) {
      r.fail(path("image_size"), "gives a ", a.grid_h, " x ", a.grid_w, " patch grid; ",
             out.model_type, " builds a square table of int(sqrt(num_patches)) a side");
    }
    if (out.hidden_size > 0 && out.hidden_size % 4 != 0) {
      r.fail(path("hidden_size"), "= ", out.hidden_size,
             " must be a multiple of 4 (two [sin | cos] halves)");
    }
    auto dec = r.integer(c, "decoder_hidden_size", path("decoder_hidden_size"));
    if (!dec) {
      dec = 512;
      out.notes.push_back(path("decoder_hidden_size") + " absent: ViTMAEConfig's default 512");
    }
    if (*dec < 4 || *dec > kHfMaxDim || *dec % 4 != 0) {
      r.fail(path("decoder_hidden_size"), "= ", *dec, " must be a positive multiple of 4 up to ",
             kHfMaxDim, " (two [sin | cos] halves)");
    }
    a.decoder_embed_dim = static_cast<Eigen::Index>(*dec);
  }
  if (fam == "gptneo") hf_read_gpt_neo_layers(r, c, prefix, out);
  const HfStack stack = family ? family->stack : HfStack::kDecoder;
  if (stack == HfStack::kEncoder) {
    // BertConfig's is_decoder (on the BERT mask path: BERT, RoBERTa, XLM-R, CamemBERT,
    // ELECTRA; DistilBERT, ALBERT, LayoutLM and the vision encoders ignore it) and XLMConfig's
    // causal turn the encoder into a decoder.
    const bool bert_mask = fam == "bert" || fam == "roberta" || fam == "xlmroberta" ||
                           fam == "camembert" || fam == "electra";
    const bool decoder =
        (bert_mask && r.boolean(c, "is_decoder", path("is_decoder")).value_or(false)) ||
        (fam == "xlm" && r.boolean(c, "causal", path("causal")).value_or(false));
    if (!decoder) {
      out.mask = MaskMode::kBidirectional;
      out.notes.push_back(out.model_type + ": an encoder, bidirectional attention");
    } else {
      out.notes.push_back(out.model_type + " configured as a decoder (is_decoder / causal): "
                          "causal attention");
    }
  } else if (stack == HfStack::kEncoderDecoder) {
    out.notes.push_back(out.model_type + ": encoder self-attention bidirectional, decoder "
                        "self-attention causal (mask: the decoder's)");
    // Speech models name their two lengths (Whisper, Speech2Text): the decoder's table is the
    // one a generation length runs into.
    const auto length = [&](const char* key) -> std::int64_t {
      const auto v = r.integer(c, key, path(key));
      if (v && (*v <= 0 || *v > kHfMaxPosition)) {
        r.fail(path(key), "= ", *v, " must be in [1, 2^53]");
      }
      return v.value_or(0);
    };
    a.encoder_max_positions = length("max_source_positions");
    // WhisperConfig and Speech2TextConfig size the decoder's table by max_target_positions
    // and have no max_position_embeddings; elsewhere that key, when given, is the table's.
    const bool target_sized = fam == "whisper" || fam == "speechtotext";
    const std::int64_t target = length("max_target_positions");
    if (target > 0 && (out.max_position_embeddings == 0 || target_sized)) {
      if (out.max_position_embeddings > 0 && out.max_position_embeddings != target) {
        out.notes.push_back("max_position_embeddings = " +
                            std::to_string(out.max_position_embeddings) + " ignored: " +
                            out.model_type + " sizes its decoder table by max_target_positions");
      }
      out.max_position_embeddings = target;
      out.notes.push_back("max_position_embeddings read from " + path("max_target_positions") +
                          " (the decoder's table)");
    }
    if (fam == "whisper") {
      // WhisperEncoder's embed_positions hold sinusoids(max_source_positions, d_model):
      // [sin | cos] with exp(-i ln 10000 / (d/2 - 1)), positions from 0.
      a.encoder_sinusoidal = SinusoidalParams{SinusoidalLayout::kSinCos, 10000.0};
      out.notes.push_back("whisper: the encoder's positions are fixed sinusoids (layout sin|cos, "
                          "stored as weights), the decoder's a learned table");
    }
  }
  if (a.sinusoidal) check_width(*a.sinusoidal);
  if (a.encoder_sinusoidal) check_width(*a.encoder_sinusoidal);
  out.absolute = a;
}

/// BEiT / data2vec-vision's learned grid after the class token
/// (use_absolute_position_embeddings; the layout field is unused: the kind is not kSinusoidal).
inline constexpr HfAbsoluteFamily kHfBeitGrid = {"beit", HfAbsoluteKind::kLearnedGrid, 0,
                                                HfStack::kEncoder, SinusoidalLayout::kInterleaved,
                                                1};

/// Families that choose their positions by flags, absolute ones among them. BEiT and
/// data2vec-vision (BeitConfig; all false by default): a learned patch grid after the class
/// token (use_absolute_position_embeddings), or relative-position bias tables
/// (use_relative_position_bias, use_shared_relative_position_bias). DeBERTa(-v2)
/// (DebertaConfig: relative_attention false, position_biased_input true by default; every
/// released checkpoint sets relative_attention): disentangled relative attention, or a learned
/// table added to the input. posenc reads the absolute forms, leaves BEiT's relative tables to
/// hf_read_relative_bias_2d (null) and refuses DeBERTa's relative attention by name. Null for
/// other families.
inline const HfAbsoluteFamily* hf_flagged_positions(const HfConfigReader& r,
                                                    const nlohmann::json& c,
                                                    const std::string& prefix,
                                                    const std::string& model_type) {
  const std::string n = hf_lower_alnum(model_type);
  const auto flag = [&](const char* key, bool fallback) {
    return r.boolean(c, key, prefix + key).value_or(fallback);
  };
  if (n == "deberta" || n == "debertav2") {
    if (flag("relative_attention", false)) {
      r.fail(prefix + "relative_attention", "= true: ", model_type, "'s disentangled attention "
             "over relative-position embeddings is not a posenc scheme (posenc reads rope, "
             "alibi, absolute, T5 buckets)");
    }
    if (!flag("position_biased_input", true)) {
      r.fail(prefix + "position_biased_input", "= false and relative_attention is off: ",
             model_type, " has no position embedding posenc could describe");
    }
    static constexpr HfAbsoluteFamily kDeberta = {"deberta", HfAbsoluteKind::kLearned, 0,
                                                  HfStack::kEncoder};
    return &kDeberta;
  }
  if (n != "beit" && n != "data2vecvision") return nullptr;
  // With a relative bias table hf_read_relative_bias_2d reads the config.
  if (flag("use_relative_position_bias", false) ||
      flag("use_shared_relative_position_bias", false)) {
    return nullptr;
  }
  if (!flag("use_absolute_position_embeddings", false)) {
    r.fail(prefix + "use_absolute_position_embeddings", "is false or absent and no relative bias "
           "is set: ", model_type, " has no position embedding posenc could describe");
  }
  return &kHfBeitGrid;
}

/// BEiT / data2vec-vision with relative-position bias tables (use_relative_position_bias: one
/// per layer, use_shared_relative_position_bias: one for all; HF adds both when both are set):
/// scheme kRelativeBias2d over the patch window image_size / patch_size (BeitConfig: 224, 16)
/// after the class token, bidirectional, plus the learned grid when
/// use_absolute_position_embeddings is set too. False for other configs.
inline bool hf_read_relative_bias_2d(const HfConfigReader& r, const nlohmann::json& c,
                                     const std::string& prefix, std::string_view hidden_key,
                                     HfModelConfig& out) {
  const std::string n = hf_lower_alnum(out.model_type);
  if (n != "beit" && n != "data2vecvision") return false;
  const auto path = [&](std::string_view k) { return prefix + std::string(k); };
  const auto flag = [&](const char* key) {
    return r.boolean(c, key, path(key)).value_or(false);
  };
  HfRelativeBias2d rb;
  rb.per_layer_tables = flag("use_relative_position_bias");
  rb.shared_table = flag("use_shared_relative_position_bias");
  if (!rb.per_layer_tables && !rb.shared_table) return false;
  const auto [image, patch] = hf_image_and_patch(r, c, prefix, 224, 16, "BeitConfig", out);
  rb.window.window_h = image.first / patch.first;
  rb.window.window_w = image.second / patch.second;
  rb.window.class_token = true;
  for (const Eigen::Index side : {rb.window.window_h, rb.window.window_w}) {
    if (side < 1 || side > detail::kMaxRelativeWindow) {
      r.fail(path("patch_size"), "gives a ", rb.window.window_h, " x ", rb.window.window_w,
             " patch window from image_size; each side must be in [1, 2^15]");
    }
  }
  out.scheme = HfPositionScheme::kRelativeBias2d;
  out.relative_bias_2d = rb;
  out.mask = MaskMode::kBidirectional;
  const std::string which = rb.shared_table && rb.per_layer_tables
                                ? "a shared table plus one per layer, summed"
                            : rb.shared_table ? "one shared table" : "one table per layer";
  out.notes.push_back(out.model_type + ": 2-D relative position bias over a " +
                      std::to_string(rb.window.window_h) + " x " +
                      std::to_string(rb.window.window_w) + " patch window after the class "
                      "token (" + which + " of " +
                      std::to_string(relative_bias_2d_table_rows(rb.window)) +
                      " rows), bidirectional");
  if (rb.window.window_h != rb.window.window_w) {
    out.notes.push_back("a non-square window: HF resamples the table's (2 w - 1) x (2 h - 1) "
                        "reshape on every forward, so its bias is not the plain lookup");
  }
  if (flag("use_absolute_position_embeddings")) {
    hf_read_absolute(r, c, prefix, &kHfBeitGrid, std::nullopt, hidden_key, out,
                     std::pair<std::int64_t, std::int64_t>{rb.window.window_h, rb.window.window_w});
  }
  return true;
}

/// Swin (SwinConfig), Swin-v2 (Swinv2Config), Donut-Swin and MaskFormer-Swin (their Swin
/// copies): stages of depths[i] blocks over image_size / patch_size / 2^i patches, embed_dim
/// 2^i channels in num_heads[i] heads, windows of window_size with every second block shifted
/// by window_size / 2; the class defaults (224, 4, 96, [2, 2, 6, 2], [3, 6, 12, 24], 7) for
/// absent keys. Scheme kRelativeBias2d, bidirectional, one bias per layer: Swin's tables (the
/// config's window_size) or Swin-v2's MLP (pretrained_window_sizes). False for other families
/// (the caller skips it for a config that names a rotary key: RoPE, as for any family).
inline bool hf_read_swin(const HfConfigReader& r, const nlohmann::json& c,
                         const std::string& prefix, HfModelConfig& out) {
  using json = nlohmann::json;
  const std::string n = hf_lower_alnum(out.model_type);
  const bool v2 = n == "swinv2";
  if (n != "swin" && !v2 && n != "donutswin" && n != "maskformerswin") return false;
  const auto path = [&](std::string_view k) { return prefix + std::string(k); };
  const auto defaulted = [&](std::string_view key, const std::string& value) {
    out.notes.push_back(path(key) + " absent: " + out.model_type + "'s default " + value);
  };
  HfSwin sw;
  sw.rule = v2 ? SwinWindowRule::kSwinV2 : SwinWindowRule::kSwin;
  const auto [image, patch] = hf_image_and_patch(r, c, prefix, 224, 4, out.model_type, out);
  if (patch.first > image.first || patch.second > image.second) {
    r.fail(path("patch_size"), "is larger than image_size: no patch fits");
  }
  sw.image_h = image.first;
  sw.image_w = image.second;
  sw.patch_h = patch.first;
  sw.patch_w = patch.second;
  if (sw.image_h % sw.patch_h != 0 || sw.image_w % sw.patch_w != 0) {
    out.notes.push_back(path("image_size") + " is not a multiple of patch_size: HF builds the "
                        "stages for the floor and pads the image up to the next patch");
  }
  const std::int64_t embed_dim = r.integer(c, "embed_dim", path("embed_dim")).value_or(96);
  if (!HfConfigReader::find(c, "embed_dim")) defaulted("embed_dim", "96");
  const std::int64_t window = r.integer(c, "window_size", path("window_size")).value_or(7);
  if (!HfConfigReader::find(c, "window_size")) defaulted("window_size", "7");
  if (window < 1 || window > detail::kMaxRelativeWindow) {
    r.fail(path("window_size"), "= ", window, " must be in [1, 2^15]");
  }
  sw.window_size = window;
  // The per-stage lists: integers >= lo, one per stage.
  const auto stage_list = [&](const char* key, std::vector<std::int64_t> fallback,
                              std::int64_t lo, std::int64_t hi) {
    const json* v = HfConfigReader::find(c, key);
    if (!v || v->is_null()) {
      std::string shown;
      for (const auto x : fallback) shown += (shown.empty() ? "" : ", ") + std::to_string(x);
      defaulted(key, "[" + shown + "]");
      return fallback;
    }
    if (!v->is_array() || v->empty() || static_cast<std::int64_t>(v->size()) > 64) {
      r.fail(path(key), "must be a list of 1 to 64 integers (one per stage), got ", v->dump());
    }
    std::vector<std::int64_t> xs;
    for (std::size_t i = 0; i < v->size(); ++i) {
      const std::string where = path(key) + "[" + std::to_string(i) + "]";
      const std::int64_t x = r.integer_value((*v)[i], where);
      if (x < lo || x > hi) r.fail(where, "= ", x, " must be in [", lo, ", ", hi, "]");
      xs.push_back(x);
    }
    return xs;
  };
  const std::vector<std::int64_t> depths = stage_list("depths", {2, 2, 6, 2}, 0, kHfMaxLayers);
  const std::vector<std::int64_t> heads =
      stage_list("num_heads", {3, 6, 12, 24}, 1, kHfMaxHeads);
  if (heads.size() != depths.size()) {
    r.fail(path("num_heads"), "has ", heads.size(), " entries; one per stage (depths has ",
           depths.size(), ")");
  }
  std::vector<std::int64_t> pretrained(depths.size(), 0);
  if (v2) {
    pretrained = stage_list("pretrained_window_sizes", pretrained, 0, detail::kMaxRelativeWindow);
    if (pretrained.size() != depths.size()) {
      r.fail(path("pretrained_window_sizes"), "has ", pretrained.size(),
             " entries; one per stage (depths has ", depths.size(), ")");
    }
    for (std::size_t i = 0; i < pretrained.size(); ++i) {
      if (pretrained[i] == 1) {
        r.fail(path("pretrained_window_sizes") + "[" + std::to_string(i) + "]",
               "= 1 divides the MLP's coordinates by 0 (0 = none, else >= 2)");
      }
    }
  }
  if (embed_dim < 1 || embed_dim > (kHfMaxDim >> (depths.size() - 1))) {
    r.fail(path("embed_dim"), "= ", embed_dim, " must be in [1, 2^30 / 2^(stages - 1)]");
  }
  // Stage i's map: the patch grid halved i times (SwinEncoder builds its layers for the floor,
  // SwinPatchMerging pads an odd side, so the forward sees the ceiling).
  std::int64_t built_h = sw.image_h / sw.patch_h, built_w = sw.image_w / sw.patch_w;
  std::int64_t run_h = built_h, run_w = built_w, layers = 0;
  std::vector<Eigen::Index> layer_heads;
  Eigen::Index head_dim = 0;
  bool uniform_head_dim = true;
  for (std::size_t i = 0; i < depths.size(); ++i) {
    const std::string at = "stage " + std::to_string(i);
    if (built_h < 1 || built_w < 1) {
      r.fail(path("depths"), "has ", depths.size(), " stages; ", at, " of a ", sw.image_h / sw.patch_h,
             " x ", sw.image_w / sw.patch_w, " patch grid has no patch left");
    }
    HfSwinStage st;
    st.depth = depths[i];
    st.hidden_size = embed_dim << i;
    st.num_heads = heads[i];
    if (st.hidden_size % st.num_heads != 0) {
      r.fail(path("num_heads") + "[" + std::to_string(i) + "]", "= ", st.num_heads,
             " must divide the stage's width embed_dim 2^", i, " = ", st.hidden_size);
    }
    // Swin applies its rule to the map each forward sees; Swin-v2 once, to the built map.
    const std::int64_t rule_h = v2 ? built_h : run_h, rule_w = v2 ? built_w : run_w;
    const SwinWindowLayout plain = swin_block_layout(rule_h, rule_w, window, false, sw.rule),
                           shifted = swin_block_layout(rule_h, rule_w, window, true, sw.rule);
    st.block = SwinWindowLayout{run_h, run_w, plain.window, plain.shift};
    st.shifted_block = SwinWindowLayout{run_h, run_w, shifted.window, shifted.shift};
    st.table_window = v2 ? plain.window : window;
    st.pretrained_window = pretrained[i];
    if (!v2 && plain.window != window) {
      out.notes.push_back(at + "'s " + std::to_string(run_h) + " x " + std::to_string(run_w) +
                          " map is smaller than window_size " + std::to_string(window) +
                          ": its windows shrink to " + std::to_string(plain.window) +
                          ", but the checkpoint's tables are for " + std::to_string(window) +
                          " (HF's forward fails there; the original code builds smaller tables)");
    }
    if (run_h != built_h || run_w != built_w) {
      out.notes.push_back(at + " runs on a " + std::to_string(run_h) + " x " +
                          std::to_string(run_w) + " map (an odd side padded by the merge); " +
                          (v2 ? "Swin-v2 chose its window for " : "its layers were built for ") +
                          std::to_string(built_h) + " x " + std::to_string(built_w));
    }
    const Eigen::Index d = st.hidden_size / st.num_heads;
    if (head_dim != 0 && d != head_dim) uniform_head_dim = false;
    if (head_dim == 0) head_dim = d;
    layers += st.depth;
    if (layers > kHfMaxLayers) r.fail(path("depths"), "sum to more than ", kHfMaxLayers, " layers");
    layer_heads.insert(layer_heads.end(), static_cast<std::size_t>(st.depth), st.num_heads);
    sw.stages.push_back(st);
    built_h /= 2;
    built_w /= 2;
    run_h = (run_h + 1) / 2;
    run_w = (run_w + 1) / 2;
  }
  if (r.boolean(c, "use_absolute_embeddings", path("use_absolute_embeddings")).value_or(false)) {
    out.notes.push_back(path("use_absolute_embeddings") + " = true: HF's table has num_patches + "
                        "1 rows for num_patches tokens (its forward fails); not read");
  }

  out.scheme = HfPositionScheme::kRelativeBias2d;
  HfRelativeBias2d rb;
  rb.window = RelativeBias2dWindow{sw.stages[0].table_window, sw.stages[0].table_window, false};
  rb.per_layer_tables = !v2;
  rb.per_layer_mlp = v2;
  out.relative_bias_2d = rb;
  out.mask = MaskMode::kBidirectional;
  out.num_hidden_layers = layers;
  out.num_attention_heads = out.num_key_value_heads = sw.stages[0].num_heads;
  out.layer_num_attention_heads = layer_heads;
  out.layer_num_key_value_heads = layer_heads;
  out.hidden_size = embed_dim;
  if (uniform_head_dim) {
    out.attention_head_dim = head_dim;
  } else {
    out.notes.push_back("the stages' head widths differ: attention_head_dim left 0 (stage i's is "
                        "embed_dim 2^i / num_heads[i])");
  }
  if (v2) {
    // Swinv2SelfAttention: cosine similarity times exp(min(logit_scale, ln 100)) per head.
    out.softmax_scale = 1.0;
    out.notes.push_back("swinv2: the scores are cosine similarities times a learned per-head "
                        "exp(min(logit_scale, ln 100)): normalise q and k, fold the factor into "
                        "q; softmax_scale 1");
    out.notes.push_back("swinv2: HF adds the shifted-window mask twice (-200; the original code "
                        "-100): swin_window_bias's masked_value");
  } else if (uniform_head_dim) {
    out.softmax_scale = 1.0 / std::sqrt(static_cast<double>(head_dim));
  }
  std::string windows;
  for (const HfSwinStage& st : sw.stages) {
    windows += (windows.empty() ? "" : ", ") + std::to_string(st.block.window);
  }
  out.notes.push_back(out.model_type + ": " + std::to_string(sw.stages.size()) + " stages, " +
                      std::to_string(layers) + " blocks, windows " + windows + (v2 ? " (bias from "
                      "each layer's MLP, continuous_position_bias_table)" : " (a table per layer, "
                      "swin_window_bias)") + ", every second block shifted");
  out.swin = std::move(sw);
  return true;
}

/// A vision encoder's attention geometry: `layers` bidirectional layers of `heads` heads
/// (kv heads alike) of width / heads, softmax scale head_dim^-1/2 (callers check divisibility).
inline void hf_set_vision_encoder(HfModelConfig& out, std::int64_t width, std::int64_t heads,
                                  std::int64_t layers) {
  out.hidden_size = width;
  out.num_attention_heads = out.num_key_value_heads = heads;
  out.num_hidden_layers = layers;
  out.attention_head_dim = width / heads;
  out.softmax_scale = 1.0 / std::sqrt(static_cast<double>(width / heads));
  out.mask = MaskMode::kBidirectional;
}

/// Segment Anything (SamConfig, model_type "sam"): the image encoder under vision_config
/// (SamVisionConfig; its defaults 768, 12 heads, 12 layers, 1024 / 16, window 14, use_abs_pos,
/// use_rel_pos, global_attn_indexes [2, 5, 8, 11] for absent keys): a learned 64 x 64 grid
/// without a class token (pos_embed [1, 64, 64, hidden]) and decomposed relative positions,
/// global on the listed layers, in 14 x 14 windows on the others. Bidirectional, head_dim^-1/2.
/// The prompt encoder's random Fourier features and the mask decoder are not described.
inline void hf_read_sam(const HfConfigReader& r, const nlohmann::json& root, HfModelConfig& out) {
  using json = nlohmann::json;
  const json* vc = HfConfigReader::find(root, "vision_config");
  if (!vc || !vc->is_object()) {
    r.fail("vision_config", "is absent: SAM's image encoder, whose positions posenc reads, is "
           "described there");
  }
  const std::string prefix = "vision_config.";
  const auto key = [&](const char* k) { return prefix + k; };
  const auto integer = [&](const char* k, std::int64_t fallback, std::int64_t lo,
                           std::int64_t hi) {
    const auto v = r.integer(*vc, k, key(k));
    if (!v) {
      out.notes.push_back(key(k) + " absent: SamVisionConfig's default " +
                          std::to_string(fallback));
    }
    const std::int64_t x = v.value_or(fallback);
    if (x < lo || x > hi) r.fail(key(k), "= ", x, " must be in [", lo, ", ", hi, "]");
    return x;
  };
  out.model_type = "sam_vision_model";
  out.notes.push_back("sam: the image encoder's keys, read from vision_config (the prompt "
                      "encoder and mask decoder are not described)");
  const std::int64_t hidden = integer("hidden_size", 768, 1, kHfMaxDim);
  const std::int64_t heads = integer("num_attention_heads", 12, 1, kHfMaxHeads);
  const std::int64_t layers = integer("num_hidden_layers", 12, 1, kHfMaxLayers);
  const auto [image, patch] =
      hf_image_and_patch(r, *vc, prefix, 1024, 16, "SamVisionConfig", out);
  if (patch.first > image.first || patch.second > image.second) {
    r.fail(key("patch_size"), "is larger than image_size: no patch fits");
  }
  const std::int64_t window = integer("window_size", 14, 0, kMaxRelPosSide);
  if (hidden % heads != 0) {
    r.fail(key("num_attention_heads"), "= ", heads, " must divide hidden_size = ", hidden);
  }
  const std::int64_t grid_h = image.first / patch.first, grid_w = image.second / patch.second;
  if (grid_h > kMaxRelPosSide || grid_w > kMaxRelPosSide) {
    r.fail(key("image_size"), "gives a ", grid_h, " x ", grid_w, " patch grid; each side must "
           "be at most 2^15");
  }
  const bool abs_pos = r.boolean(*vc, "use_abs_pos", key("use_abs_pos")).value_or(true);
  const bool rel_pos = r.boolean(*vc, "use_rel_pos", key("use_rel_pos")).value_or(true);
  HfDecomposedRelPos rp;
  rp.grid_h = grid_h;
  rp.grid_w = grid_w;
  rp.window_size = window;
  rp.global_layers.assign(static_cast<std::size_t>(layers), window == 0);
  const json* global = HfConfigReader::find(*vc, "global_attn_indexes");
  if (!global) {
    out.notes.push_back(key("global_attn_indexes") + " absent: SamVisionConfig's default "
                        "[2, 5, 8, 11]");
  }
  if (global && !global->is_array()) {
    r.fail(key("global_attn_indexes"), "must be a list of layer indices, got ", global->dump());
  }
  const std::vector<std::int64_t> fallback = {2, 5, 8, 11};
  const std::size_t count = global ? global->size() : fallback.size();
  for (std::size_t i = 0; i < count; ++i) {
    const std::string where = key("global_attn_indexes") + "[" + std::to_string(i) + "]";
    const std::int64_t l = global ? r.integer_value((*global)[i], where) : fallback[i];
    if (l < 0 || l >= layers) {
      r.fail(where, "= ", l, " must be a layer in [0, num_hidden_layers = ", layers, ")");
    }
    rp.global_layers[static_cast<std::size_t>(l)] = true;
  }
  hf_set_vision_encoder(out, hidden, heads, layers);
  if (abs_pos) {
    HfAbsolutePositions a;
    a.kind = HfAbsoluteKind::kLearnedGrid;
    a.grid_h = grid_h;
    a.grid_w = grid_w;
    a.embed_dim = hidden;
    out.absolute = a;
  }
  if (rel_pos) {
    out.scheme = HfPositionScheme::kDecomposedRelPos;
    const auto globals = std::count(rp.global_layers.begin(), rp.global_layers.end(), true);
    out.notes.push_back("sam: decomposed relative positions, global over the " +
                        std::to_string(grid_h) + " x " + std::to_string(grid_w) + " grid on " +
                        std::to_string(globals) + " of " + std::to_string(layers) +
                        " layers (tables of " + std::to_string(2 * grid_h - 1) + " rows), " +
                        (window > 0 ? std::to_string(window) + " x " + std::to_string(window) +
                                          " windows on the others (tables of " +
                                          std::to_string(2 * window - 1) + " rows)"
                                    : std::string("no windowed layers")));
    out.decomposed_rel_pos = std::move(rp);
  } else if (abs_pos) {
    out.scheme = HfPositionScheme::kAbsolute;
  } else {
    r.fail(key("use_rel_pos"), "and use_abs_pos are false: SAM's encoder has no positions "
           "posenc could describe");
  }
  if (abs_pos) {
    out.notes.push_back("sam: a learned " + std::to_string(grid_h) + " x " +
                        std::to_string(grid_w) + " grid (pos_embed), no class token");
  }
}

/// One detection-transformer family: where its width and temperature live, and its sine recipe.
struct HfDetrFamily {
  std::string_view name;          ///< hf_lower_alnum(model_type)
  std::string_view config_class;  ///< for the notes on defaults
  const char* width_key;          ///< d_model, hidden_size (DAB-DETR), encoder_hidden_dim (RT-DETR)
  const char* temperature_key;    ///< "" when the temperature is fixed in the model code
  double temperature;             ///< the class default (or the code's constant)
  double offset;                  ///< subtracted from the counts (Deformable DETR, DETA: 0.5)
  bool learned_option;            ///< reads position_embedding_type ("sine" / "learned")
  bool sincos_grid;               ///< RT-DETR's raw-index table instead of the sine embedding
  bool deformable;                ///< the encoder's attention samples points: no keys
};

inline const HfDetrFamily* hf_detr_family(std::string_view model_type) {
  static constexpr HfDetrFamily kFamilies[] = {
      {"detr", "DetrConfig", "d_model", "", 10000.0, 0.0, true, false, false},
      {"conditionaldetr", "ConditionalDetrConfig", "d_model", "", 10000.0, 0.0, true, false,
       false},
      {"tabletransformer", "TableTransformerConfig", "d_model", "", 10000.0, 0.0, true, false,
       false},
      {"deformabledetr", "DeformableDetrConfig", "d_model", "", 10000.0, 0.5, true, false, true},
      {"deta", "DetaConfig", "d_model", "", 10000.0, 0.5, true, false, true},
      {"dabdetr", "DabDetrConfig", "hidden_size", "temperature_height", 20.0, 0.0, false, false,
       false},
      {"groundingdino", "GroundingDinoConfig", "d_model", "positional_embedding_temperature",
       20.0, 0.0, true, false, true},
      {"mmgroundingdino", "MMGroundingDinoConfig", "d_model", "positional_embedding_temperature",
       20.0, 0.0, true, false, true},
      {"rtdetr", "RTDetrConfig", "encoder_hidden_dim", "positional_encoding_temperature",
       10000.0, 0.0, false, true, false},
      {"rtdetrv2", "RTDetrV2Config", "encoder_hidden_dim", "positional_encoding_temperature",
       10000.0, 0.0, false, true, false},
      {"dfine", "DFineConfig", "encoder_hidden_dim", "positional_encoding_temperature", 10000.0,
       0.0, false, true, false},
  };
  const std::string n = hf_lower_alnum(model_type);
  for (const HfDetrFamily& f : kFamilies) {
    if (n == f.name) return &f;
  }
  return nullptr;
}

/// Detection transformers (DETR, Conditional / Deformable / DAB-DETR, DETA, Table
/// Transformer, Grounding DINO, RT-DETR, D-FINE): scheme kFeatureMap, the encoder's heads and
/// layers, the class defaults for absent keys. False for other families.
inline bool hf_read_detr(const HfConfigReader& r, const nlohmann::json& c,
                         const std::string& prefix, HfModelConfig& out) {
  const HfDetrFamily* family = hf_detr_family(out.model_type);
  if (!family) return false;
  const auto path = [&](std::string_view k) { return prefix + std::string(k); };
  const auto integer = [&](const char* k, std::int64_t fallback, std::int64_t hi) {
    const auto v = r.integer(c, k, path(k));
    if (!v) {
      out.notes.push_back(path(k) + " absent: " + std::string(family->config_class) +
                          "'s default " + std::to_string(fallback));
    }
    const std::int64_t x = v.value_or(fallback);
    if (x < 1 || x > hi) r.fail(path(k), "= ", x, " must be in [1, ", hi, "]");
    return x;
  };
  const std::int64_t width = integer(family->width_key, 256, kHfMaxDim);
  const std::int64_t heads = integer("encoder_attention_heads", 8, kHfMaxHeads);
  const std::int64_t layers = integer("encoder_layers", family->sincos_grid ? 1 : 6, kHfMaxLayers);
  if (width % heads != 0) {
    r.fail(path("encoder_attention_heads"), "= ", heads, " must divide ", family->width_key,
           " = ", width);
  }
  const auto temperature = [&](const char* key, double fallback) {
    const auto t = r.number(c, key, path(key));
    if (!t) {
      out.notes.push_back(path(key) + " absent: " + std::string(family->config_class) +
                          "'s default " + detail::concat(fallback));
    }
    const double v = t.value_or(fallback);
    if (!(v > 0.0)) r.fail(path(key), "= ", v, " must be > 0");
    return v;
  };
  HfFeatureMapPositions fm;
  fm.embed_dim = width;
  if (family->sincos_grid) {
    if (width % 4 != 0) {
      r.fail(path(family->width_key), "= ", width, " must be a multiple of 4 (RT-DETR's table "
             "has [sin | cos] blocks for the row and the column)");
    }
    fm.kind = HfFeatureMapKind::kSincosGrid;
    fm.temperature = temperature(family->temperature_key, family->temperature);
    const nlohmann::json* levels = HfConfigReader::find(c, "encode_proj_layers");
    if (!levels) {
      out.notes.push_back(path("encode_proj_layers") + " absent: " +
                          std::string(family->config_class) + "'s default [2]");
      fm.levels = {2};
    } else if (!levels->is_array() || levels->empty() || levels->size() > 64) {
      r.fail(path("encode_proj_layers"), "must be a list of 1 to 64 backbone levels, got ",
             levels->dump());
    } else {
      for (std::size_t i = 0; i < levels->size(); ++i) {
        const std::string where = path("encode_proj_layers") + "[" + std::to_string(i) + "]";
        const std::int64_t l = r.integer_value((*levels)[i], where);
        if (l < 0 || l > 63) r.fail(where, "= ", l, " must be a level in [0, 63]");
        fm.levels.push_back(l);
      }
    }
    out.notes.push_back(out.model_type + ": a fixed [row | column] sin-cos table at raw indices "
                        "on the encoded levels, no mask (sincos_grid_rt_detr; HF's layout since "
                        "its refactor, the original's only on square maps: legacy_layout)");
    if (HfConfigReader::find(c, "eval_size")) {
      out.notes.push_back(path("eval_size") + " is set: HF's hybrid encoder then passes no "
                          "position embedding outside training (the original repository "
                          "precomputes the table for that size)");
    }
  } else {
    fm.sine.num_pos_feats = width / 2;
    if (width % 2 != 0) {
      r.fail(path(family->width_key), "= ", width, " must be even (a block per axis)");
    }
    fm.sine.offset = family->offset;
    if (family->name == "dabdetr") {
      fm.sine.temperature_height = temperature("temperature_height", family->temperature);
      fm.sine.temperature_width = temperature("temperature_width", family->temperature);
      if (const auto scale = r.number(c, "sine_position_embedding_scale",
                                      path("sine_position_embedding_scale"))) {
        fm.sine.scale = *scale;
      }
    } else if (*family->temperature_key != '\0') {
      fm.sine.temperature_height = fm.sine.temperature_width =
          temperature(family->temperature_key, family->temperature);
    } else {
      fm.sine.temperature_height = fm.sine.temperature_width = family->temperature;
    }
    std::string type = "sine";
    if (family->learned_option) {
      if (const auto t = r.string(c, "position_embedding_type", path("position_embedding_type"))) {
        type = *t;
      } else {
        out.notes.push_back(path("position_embedding_type") + " absent: " +
                            std::string(family->config_class) + "'s default \"sine\"");
      }
    }
    if (type == "sine" && width % 4 != 0) {
      r.fail(path(family->width_key), "= ", width, " must be a multiple of 4 (two blocks of ",
             "sin / cos pairs, one per axis)");
    }
    if (type == "learned") {
      fm.kind = HfFeatureMapKind::kLearned;
      fm.sine.order = SineAxisOrder::kXY;
      fm.learned_rows = 50;
      out.notes.push_back(out.model_type + ": learned row / column tables of 50 rows each "
                          "(the model code's constant): feature maps up to 50 x 50, [column | "
                          "row] (learned_embedding_2d)");
    } else if (type == "sine") {
      out.notes.push_back(
          out.model_type + ": the sine embedding of the padded map, temperature " +
          detail::concat(fm.sine.temperature_height) +
          (fm.sine.temperature_width != fm.sine.temperature_height
               ? " (height) / " + detail::concat(fm.sine.temperature_width) + " (width)"
               : std::string()) +
          (fm.sine.offset != 0.0 ? ", counts less " + detail::concat(fm.sine.offset) : "") +
          " (sine_embedding_2d)");
    } else {
      r.fail(path("position_embedding_type"), "= \"", type, "\" is neither \"sine\" nor "
             "\"learned\" (", family->config_class, "'s two)");
    }
  }
  // The recipe must be one the embedding calls take (widths up to 2^21, temperatures whose
  // frequencies stay finite).
  try {
    if (fm.kind == HfFeatureMapKind::kSincosGrid) {
      (void)SincosGridPlan(sincos_grid_rt_detr(width, 1, 1, fm.temperature));
    } else if (fm.kind == HfFeatureMapKind::kSine) {
      (void)SineEmbedding2dPlan(fm.sine);
    }
  } catch (const std::invalid_argument& e) {
    r.fail(path(family->width_key), "= ", width, " with the config's temperature gives an "
           "embedding posenc rejects: ", e.what());
  }
  if (family->deformable) {
    out.notes.push_back(out.model_type + ": the encoder's deformable attention adds the "
                        "embedding (and a per-level embedding) to the queries that predict its "
                        "sampling points; there are no keys");
  } else {
    out.notes.push_back(out.model_type + ": the embedding is added to the queries and keys of "
                        "every encoder layer, not to the values or the input");
  }
  out.scheme = HfPositionScheme::kFeatureMap;
  hf_set_vision_encoder(out, width, heads, layers);
  out.feature_map = std::move(fm);
  return true;
}

/// Dense-prediction and segmentation models whose attention (and positions) is a backbone's,
/// described under backbone_config: DPT (unless is_hybrid: then its own ViT after a CNN),
/// UperNet, Mask2Former, MaskFormer, OneFormer, Depth Anything, ZoeDepth, VitMatte.
inline bool hf_backbone_wrapper(std::string_view model_type) {
  static constexpr std::string_view kWrappers[] = {"dpt",       "upernet",       "mask2former",
                                                   "maskformer", "oneformer",     "depthanything",
                                                   "zoedepth",  "vitmatte"};
  const std::string n = hf_lower_alnum(model_type);
  for (const std::string_view w : kWrappers) {
    if (n == w) return true;
  }
  return false;
}

/// Families whose positions are none of posenc's schemes and whose configs name no position
/// key, so the RoPE default would misread them: why (a clause for the error message), or empty.
inline std::string_view hf_unsupported_positions(std::string_view model_type) {
  const std::string n = hf_lower_alnum(model_type);
  static constexpr std::string_view kConvolutional[] = {
      "resnet",      "convnext",    "convnextv2", "bit",        "regnet",   "efficientnet",
      "mobilenetv1", "mobilenetv2", "van",        "poolformer", "timmbackbone", "dinat",
      "nat"};
  for (const std::string_view cnn : kConvolutional) {
    if (n == cnn) {
      return n == "dinat" || n == "nat"
                 ? "its positions are a learned relative bias per neighbourhood of its "
                   "neighbourhood attention (NATTEN's rpb)"
                 : "a convolutional network, with no attention and no positions";
    }
  }
  if (n == "vitdet") {
    return "its positions are a learned grid interpolated to each input and, with "
           "use_relative_position_embeddings, decomposed relative positions inside the scores "
           "(MViTv2)";
  }
  if (n == "swin2sr") {
    return "Swin-v2 blocks in residual groups at one resolution, which the Swin reader does not "
           "describe (swin_window.hpp and continuous_position_bias.hpp run its windows)";
  }
  if (n == "transfoxl" || n == "xlnet") {
    return "its positions are sinusoidal relative-position embeddings inside the scores "
           "(Transformer-XL's r_w / r_r biases)";
  }
  return {};
}

/// A query temperature the loader read must pass attention()'s own rules (validate_temperature:
/// finite parameters, t(2^53) within float's range); `keys` name the config keys it came from.
inline void hf_check_temperature(const HfConfigReader& r, const AttentionTemperature& t,
                                 const std::string& keys) {
  try {
    validate_temperature("attention_temperature", t);
  } catch (const std::invalid_argument& e) {
    r.fail(keys, "give a query temperature attention() rejects: ", e.what());
  }
}

/// The Mistral-3 family's query temperature (transformers Ministral3Attention, vLLM DeepseekV2
/// for Mistral Large 3): llama_4_scaling_beta in the RoPE dict, steps of the dict's
/// original_max_position_embeddings, every layer.
inline void hf_read_mistral_temperature(const HfConfigReader& r, const nlohmann::json& dict,
                                        const std::string& dpath, HfModelConfig& out) {
  const std::string bkey = dpath + ".llama_4_scaling_beta";
  if (auto beta = r.number(dict, "llama_4_scaling_beta", bkey)) {
    if (out.attention_temperature) {
      r.fail(bkey, "and ",
             out.attention_temperature->form == TemperatureForm::kXai ? "attn_temperature_len"
                                                                       : "attn_temperature_tuning",
             " are both set: one query temperature per model");
    }
    const std::string lkey = dpath + ".original_max_position_embeddings";
    auto l0 = r.integer(dict, "original_max_position_embeddings", lkey);
    if (!l0) r.fail(bkey, "needs ", lkey, " (the temperature steps every L0 positions)");
    if (*l0 <= 0) r.fail(lkey, "= ", *l0, " must be > 0");
    if (*beta < 0.0) r.fail(bkey, "= ", *beta, " must be >= 0 (t = 1 + beta ln(...) below 1)");
    if (*beta != 0.0) {  // GGUF conversions write 0 for "none"
      AttentionTemperature t;
      t.form = TemperatureForm::kMistral3;
      t.attn_scale = *beta;
      t.floor_scale = static_cast<double>(*l0);
      hf_check_temperature(r, t, bkey + " and " + lkey);
      out.attention_temperature = t;
      std::ostringstream note;
      note << "attention temperature (Mistral-3 llama_4_scaling) on every layer's queries: "
           << "1 + " << *beta << " ln(1 + floor(pos / " << *l0 << "))";
      out.notes.push_back(note.str());
    }
  }
}

/// quantization_config's KV cache (compressed-tensors' kv_cache_scheme, ModelOpt's
/// kv_cache_quant_algo): whether the checkpoint's k_scale / v_scale are per tensor or per kv
/// head. Integer or other-width schemes are noted, not mapped (posenc's caches are FP8); a
/// kv_cache_scheme without "type" is integer (compressed-tensors' QuantizationArgs default).
inline void hf_read_kv_cache_scheme(const HfConfigReader& r, const nlohmann::json& root,
                                    HfModelConfig& out) {
  const nlohmann::json* qc = HfConfigReader::find(root, "quantization_config");
  if (qc == nullptr || !qc->is_object()) return;
  if (const nlohmann::json* kv = HfConfigReader::find(*qc, "kv_cache_scheme")) {
    const std::string p = "quantization_config.kv_cache_scheme.";
    if (!kv->is_object()) r.fail("quantization_config.kv_cache_scheme", "must be an object");
    const auto bits = r.integer(*kv, "num_bits", p + "num_bits").value_or(8);
    // compressed-tensors' QuantizationArgs: `type: QuantizationType = QuantizationType.INT`, so
    // a scheme without "type" is an int cache (quant_args.py), not FP8.
    const auto given_type = r.string(*kv, "type", p + "type");
    const std::string type = given_type.value_or("int");
    const std::string strategy = r.string(*kv, "strategy", p + "strategy").value_or("tensor");
    if (bits != 8 || type != "float") {
      out.notes.push_back("quantization_config.kv_cache_scheme: " + std::to_string(bits) +
                          "-bit " + type + " KV cache, not an FP8 cache posenc stores" +
                          (given_type ? "" : " (" + p + "type absent: QuantizationArgs' "
                                             "default \"int\")"));
      return;
    }
    if (strategy == "tensor") {
      out.kv_cache_scales = HfKvCacheScales::kPerTensor;
    } else if (strategy == "attn_head") {
      out.kv_cache_scales = HfKvCacheScales::kPerHead;
    } else {
      out.notes.push_back("quantization_config.kv_cache_scheme.strategy = \"" + strategy +
                          "\": scales posenc's FP8 caches do not take (tensor, attn_head)");
      return;
    }
    out.notes.push_back("FP8 KV cache with " + std::string(strategy == "tensor" ? "per-tensor" : "per-kv-head") +
                        " k_scale / v_scale (compressed-tensors kv_cache_scheme \"" + strategy +
                        "\"): the checkpoint's scales go into " +
                        (strategy == "tensor" ? "KvScales{k, v}" : "KvScales::per_head(k, v)"));
    return;
  }
  // ModelOpt writes it flat or under "quantization" (hf_quant_config.json's layout).
  const nlohmann::json* nested = HfConfigReader::find(*qc, "quantization");
  const bool flat = HfConfigReader::find(*qc, "kv_cache_quant_algo") != nullptr;
  const nlohmann::json& holder = flat || nested == nullptr || !nested->is_object() ? *qc : *nested;
  const std::string key = std::string("quantization_config.") + (&holder == qc ? "" : "quantization.") +
                          "kv_cache_quant_algo";
  if (auto algo = r.string(holder, "kv_cache_quant_algo", key)) {
    if (*algo == "FP8") {
      out.kv_cache_scales = HfKvCacheScales::kPerTensor;
      out.notes.push_back("FP8 KV cache with per-tensor k_scale / v_scale (ModelOpt "
                          "kv_cache_quant_algo): KvScales{k, v}");
    } else {
      out.notes.push_back("quantization_config.kv_cache_quant_algo = \"" + *algo +
                          "\": not an FP8 cache posenc stores");
    }
  }
}

/// DeepSeek sparse attention's indexer (index_head_dim, index_n_heads, index_topk,
/// indexer_rope_interleave) of an MLA config whose rope head is rope_hd. deepseek_v32 takes
/// DeepseekV32Config's defaults (128, 64, 2048) for absent keys; other models need
/// index_head_dim.
inline void hf_read_indexer(const HfConfigReader& r, const nlohmann::json& c,
                            const std::string& prefix, std::int64_t rope_hd, HfModelConfig& out) {
  const auto path = [&](std::string_view k) { return prefix + std::string(k); };
  // DeepSeek sparse attention (V3.2's Indexer, vLLM's indexer_rope_emb): the indexer rotates
  // the first qk_rope_head_dim dims of its index_head_dim heads, half-split unless
  // indexer_rope_interleave (DeepSeek's own demo code rotated them interleaved until its
  // 2025-11-17 fix, which degraded the model).
  // DeepseekV32Config (transformers): index_head_dim = 128, index_n_heads = 64,
  // index_topk = 2048 by default, so every deepseek_v32 model has its indexer.
  const bool v32 = hf_lower_alnum(out.model_type) == "deepseekv32";
  auto ihd = r.integer(c, "index_head_dim", path("index_head_dim"));
  if (!ihd && v32) ihd = 128;
  if (ihd) {
    if (*ihd < rope_hd || *ihd > detail::kHfMaxDim) {
      r.fail(path("index_head_dim"), "= ", *ihd, " must be in [qk_rope_head_dim = ", rope_hd,
             ", ", detail::kHfMaxDim, "]");
    }
    out.index_head_dim = *ihd;
    for (auto [key, field, v32_default] :
         {std::tuple{"index_n_heads", &out.index_n_heads, std::int64_t{64}},
          std::tuple{"index_topk", &out.index_topk, std::int64_t{2048}}}) {
      const auto value = r.integer(c, key, path(key)).value_or(v32 ? v32_default : 0);
      if (value < 0 || value > detail::kHfMaxPosition) {
        r.fail(path(key), "= ", value, " must be >= 0");
      }
      *field = value;
    }
    const bool inter = r.boolean(c, "indexer_rope_interleave", path("indexer_rope_interleave"))
                           .value_or(false);
    out.indexer_layout = inter ? RopeLayout::kInterleaved : RopeLayout::kHalfSplit;
    out.notes.push_back("sparse-attention indexer: heads of index_head_dim = " +
                        std::to_string(*ihd) + " rotate their first " + std::to_string(rope_hd) +
                        " dims [rope | nope], " + (inter ? "interleaved" : "half-split") +
                        " (indexer_rope_interleave = " + (inter ? "true" : "false or absent") +
                        "; hf_mla_rope_params(c, HfMlaHead::kIndexer))");
  }
}

/// Why no attention layer of the model rotates (transformers' modeling code), or "" when some
/// do: Jamba and Nemotron-H have no rotary embedding, Kimi-Linear deletes its own (MLA with
/// NoPE), Zamba has none and Zamba2 only with use_mem_rope, GraniteMoeHybrid (Granite 4.0) only
/// with position_embedding_type "rope", OLMo-Hybrid only with a rope_theta.
inline std::string hf_nope_model(const HfConfigReader& r, const nlohmann::json& c,
                                 const std::string& prefix, const std::string& family) {
  if (family == "jamba" || family == "nemotronh" || family == "zamba") {
    return "its modeling code has no rotary embedding";
  }
  if (family == "kimilinear") return "Kimi-Linear's MLA runs without RoPE (NoPE)";
  if (family == "zamba2" &&
      !r.boolean(c, "use_mem_rope", prefix + "use_mem_rope").value_or(false)) {
    return "use_mem_rope is false or absent";
  }
  if (family == "olmohybrid") {
    // OlmoHybridModel builds its rotary embedding only from a non-null rope_parameters
    // rope_theta; the released checkpoints write none ("Released ckpt don't use any ROPE").
    const nlohmann::json* rp = HfConfigReader::find(c, "rope_parameters");
    const bool theta = r.number(c, "rope_theta", prefix + "rope_theta") ||
                       (rp && rp->is_object() &&
                        r.number(*rp, "rope_theta", prefix + "rope_parameters.rope_theta"));
    if (!theta) return "no rope_theta is given (released OLMo-Hybrid checkpoints set none)";
  }
  if (family == "granitemoehybrid" &&
      r.string(c, "position_embedding_type", prefix + "position_embedding_type")
              .value_or("") != "rope") {
    return "position_embedding_type is not \"rope\"";
  }
  return "";
}

/// What a family's transformers configuration class uses when config.json omits rope_theta,
/// partial_rotary_factor (or rotary_pct) or head_dim (transformers 5: the class's
/// `default_theta`, its `kwargs.setdefault("partial_rotary_factor", ..)`, its `head_dim` field
/// default); 0 = the generic default (10000, 1, hidden_size / num_attention_heads). Families
/// whose versions disagree (Persimmon; Cohere and OLMo-3, 10000 in one stored file and 5e5 in
/// another: a config saved as a diff against the older default would change meaning) or that
/// add a whole scaling dict (gpt_oss, apertus) are left out.
struct HfFamilyDefaults {
  double theta = 0.0;
  double partial_rotary_factor = 0.0;
  Eigen::Index head_dim = 0;
};

inline HfFamilyDefaults hf_family_defaults(std::string_view family) {
  struct Row {
    std::string_view family;
    HfFamilyDefaults d;
  };
  static constexpr Row kRows[] = {
      {"mixtral", {1e6, 0, 0}},         {"phimoe", {1e6, 0, 0}},
      {"lfm2", {1e6, 0, 0}},            {"lfm2moe", {1e6, 0, 0}},
      {"qwen2vl", {1e6, 0, 0}},         {"qwen2vltext", {1e6, 0, 0}},
      {"minimax", {1e6, 0, 0}},         {"solaropen", {1e6, 0, 128}},
      {"llama4text", {5e5, 0, 128}},    {"ernie45", {5e5, 0, 128}},
      {"ernie45moe", {5e5, 0, 0}},      {"bitnet", {5e5, 0, 0}},
      {"smollm3", {2e6, 0, 0}},
      {"helium", {1e5, 0, 128}},        {"fuyu", {25000, 0.5, 0}},
      {"modernbert", {160000, 0, 0}},   {"minimaxm2", {5e6, 0, 0}},
      {"mimov2flash", {5e6, 0.334, 192}},
      {"phi", {0, 0.5, 0}},             {"glm", {0, 0.5, 128}},
      {"glm4", {0, 0.5, 128}},          {"glm4moe", {0, 0.5, 0}},
      {"nemotron", {0, 0.5, 0}},        {"recurrentgemma", {0, 0.5, 0}},
      {"stablelm", {0, 0.25, 0}},       {"gptneox", {0, 0.25, 0}},
      {"qwen3next", {0, 0.25, 256}},    {"qwen35", {0, 0.25, 256}},
      {"qwen35text", {0, 0.25, 256}},   {"qwen35moe", {0, 0.25, 256}},
      {"qwen35moetext", {0, 0.25, 256}}, {"gemma", {0, 0, 256}},
      {"gemma2", {0, 0, 256}},          {"qwen3", {0, 0, 128}},
      {"seedoss", {0, 0, 128}},         {"gemma3text", {1e6, 0, 256}},
  };
  for (const Row& row : kRows) {
    if (row.family == family) return row.d;
  }
  return {};
}

/// The sizes a configuration class assumes when config.json omits them (its __init__ /
/// field defaults), for the classes whose released configs are saved as a diff against those
/// defaults (multimodal text_config dicts). 0 = not listed (the key is required; a missing
/// num_key_value_heads is num_attention_heads).
struct HfFamilySizes {
  Eigen::Index hidden_size = 0;
  Eigen::Index num_attention_heads = 0;
  Eigen::Index num_key_value_heads = 0;
  Eigen::Index max_position_embeddings = 0;
  Eigen::Index sliding_window = 0;  ///< applied on the family's sliding layers
  bool sliding_window_off = false;  ///< use_sliding_window defaults to false (Qwen2 family)
};

inline HfFamilySizes hf_family_sizes(std::string_view family) {
  struct Row {
    std::string_view family;
    HfFamilySizes s;
  };
  static constexpr Row kRows[] = {
      {"llama", {4096, 32, 0, 2048, 0, false}},
      {"mistral", {4096, 32, 8, 131072, 4096, false}},
      {"qwen2", {4096, 32, 32, 32768, 0, true}},
      {"qwen2moe", {0, 0, 16, 0, 0, true}},
      {"qwen3", {4096, 32, 32, 32768, 0, true}},
      {"qwen3moe", {0, 0, 4, 0, 0, true}},
      {"gemma", {3072, 16, 16, 8192, 0, false}},
      {"gemma2", {2304, 8, 4, 8192, 4096, false}},
      {"gemma3text", {2304, 8, 4, 131072, 4096, false}},
      {"vitmae", {768, 12, 0, 0, 0, false}},
  };
  for (const Row& row : kRows) {
    if (row.family == family) return row.s;
  }
  return {};
}

/// layer_types the configuration classes build when config.json has none (needs
/// num_hidden_layers, except the hub's lists):
///   hybrid_layer_pattern  MiMo-V2's hub config: 1 = sliding_attention, 0 = full_attention (the
///                         transformers converter's mapping)
///   attn_type_list        MiniMax's hub config: 1 = full_attention, 0 = linear_attention
///   olmo3                 sliding_attention unless (i + 1) % 4 == 0 (Olmo3Config)
///   olmo_hybrid           linear_attention unless i % 4 == 3; the last layer full when no
///                         other is (OlmoHybridConfig)
///   mimo_v2_flash         full_attention at i = 0 and where (i + 1) % 6 == 0 (MiMoV2FlashConfig)
///   full_attn_idxs        LFM2: full_attention at those layers, "conv" elsewhere (Lfm2Config)
inline void hf_default_layer_types(const HfConfigReader& r, const nlohmann::json& c,
                                   const std::string& prefix, const std::string& family,
                                   HfModelConfig& out) {
  // Two hub lists of 0 / 1 per layer: MiMo-V2's hybrid_layer_pattern (1 = sliding, the
  // transformers converter's mapping) and MiniMax's attn_type_list (1 = softmax attention,
  // 0 = lightning / linear attention: MiniMax-Text-01's remote code, vLLM).
  for (const auto& [name, zero, one] :
       {std::tuple{"hybrid_layer_pattern", "full_attention", "sliding_attention"},
        std::tuple{"attn_type_list", "linear_attention", "full_attention"}}) {
    const nlohmann::json* list = HfConfigReader::find(c, name);
    if (!list) continue;
    const std::string key = prefix + name;
    if (!list->is_array()) r.fail(key, "must be a list of 0 / 1, got ", list->type_name());
    if (static_cast<std::int64_t>(list->size()) > kHfMaxLayers) {
      r.fail(key, "has ", list->size(), " entries, more than ", kHfMaxLayers);
    }
    for (std::size_t i = 0; i < list->size(); ++i) {
      const nlohmann::json& e = (*list)[i];
      const bool bit = (e.is_number_integer() || e.is_number_unsigned()) &&
                       (e.get<std::int64_t>() == 0 || e.get<std::int64_t>() == 1);
      if (!bit) r.fail(key, "[", i, "] must be 0 (", zero, ") or 1 (", one, "), got ", e.dump());
      out.layer_types.push_back(e.get<std::int64_t>() == 1 ? one : zero);
    }
    // One entry per layer: layers past a short list would run as full attention with RoPE.
    if (out.num_hidden_layers > 0 &&
        static_cast<Eigen::Index>(list->size()) != out.num_hidden_layers) {
      r.fail(key, "has ", list->size(), " entries; one per layer (num_hidden_layers = ",
             out.num_hidden_layers, ") expected");
    }
    out.notes.push_back(std::string("layer_types from ") + name + " (1 = " + one + ")");
    return;
  }
  const Eigen::Index n = out.num_hidden_layers;
  if (n <= 0) return;
  if (const nlohmann::json* idx = HfConfigReader::find(c, "full_attn_idxs")) {
    // Lfm2Config: full_attention at the listed layers, short convolutions elsewhere.
    const std::string key = prefix + "full_attn_idxs";
    if (!idx->is_array()) r.fail(key, "must be a list of layer indices, got ", idx->type_name());
    out.layer_types.assign(static_cast<std::size_t>(n), "conv");
    for (std::size_t i = 0; i < idx->size(); ++i) {
      const nlohmann::json& e = (*idx)[i];
      const bool integral = e.is_number_integer() || e.is_number_unsigned();
      if (!integral || e.get<std::int64_t>() < 0 || e.get<std::int64_t>() >= n) {
        r.fail(key, "[", i, "] must be a layer index in [0, ", n, "), got ", e.dump());
      }
      out.layer_types[static_cast<std::size_t>(e.get<std::int64_t>())] = "full_attention";
    }
    out.notes.push_back("layer_types from full_attn_idxs (LFM2: the other layers \"conv\")");
    return;
  }
  const auto build = [&](auto is_full, const char* other, const char* rule) {
    for (Eigen::Index i = 0; i < n; ++i) {
      out.layer_types.push_back(is_full(i) ? "full_attention" : other);
    }
    out.notes.push_back(out.model_type + ": layer_types absent, transformers' default (" + rule +
                        ")");
  };
  if (family == "olmo3") {
    build([](Eigen::Index i) { return (i + 1) % 4 == 0; }, "sliding_attention",
          "every 4th layer full_attention");
  } else if (family == "olmohybrid") {
    build([n](Eigen::Index i) { return i % 4 == 3 || (n < 4 && i == n - 1); },
          "linear_attention", "every 4th layer full_attention, the rest linear_attention");
  } else if (family == "mimov2flash") {
    build([](Eigen::Index i) { return i == 0 || (i + 1) % 6 == 0; }, "sliding_attention",
          "full_attention at layer 0 and every 6th layer");
  } else if (family == "qwen3next" || family == "qwen35" || family == "qwen35text" ||
             family == "qwen35moe" || family == "qwen35moetext") {
    // Qwen3NextConfig (and Qwen3.5's text configs, its subclasses): layer i is full_attention
    // when (i + 1) % full_attention_interval == 0 (default 4), else linear_attention.
    const std::string key = prefix + "full_attention_interval";
    const std::int64_t every = r.integer(c, "full_attention_interval", key).value_or(4);
    if (every < 1 || every > kHfMaxLayers) {
      r.fail(key, "= ", every, " must be in [1, ", kHfMaxLayers, "]");
    }
    build([every](Eigen::Index i) { return (i + 1) % every == 0; }, "linear_attention",
          "full_attention every full_attention_interval-th layer, the rest linear_attention");
  }
}

/// MiMo-V2 (hub "mimo_v2", transformers "mimo_v2_flash"): value heads of v_head_dim (transformers'
/// default 128), and the sliding layers' head counts. Their heads must be as wide as the full
/// layers' (swa_head_dim): one RoPE width per model. Attention sinks on the sliding layers and
/// attention_value_scale (v times 0.707) are weights / model code, noted only.
inline void hf_read_mimo_v2(const HfConfigReader& r, const nlohmann::json& c,
                            const std::string& prefix, const std::string& family,
                            Eigen::Index head_dim, HfModelConfig& out) {
  const auto count = [&](const char* key, Eigen::Index fallback, std::int64_t max) {
    const auto v = r.integer(c, key, prefix + key).value_or(fallback);
    if (v <= 0 || v > max) r.fail(prefix + key, "= ", v, " must be in [1, ", max, "]");
    return static_cast<Eigen::Index>(v);
  };
  out.v_head_dim = count("v_head_dim", family == "mimov2flash" ? 128 : head_dim, kHfMaxDim);
  if (const auto swa = count("swa_head_dim", head_dim, kHfMaxDim); swa != head_dim) {
    r.fail(prefix + "swa_head_dim", "= ", swa, " differs from head_dim = ", head_dim,
           ": posenc plans one RoPE head width per model");
  }
  if (const auto swa_v = count("swa_v_head_dim", out.v_head_dim, kHfMaxDim);
      swa_v != out.v_head_dim) {
    r.fail(prefix + "swa_v_head_dim", "= ", swa_v, " differs from v_head_dim = ", out.v_head_dim);
  }
  const Eigen::Index kv = out.num_key_value_heads;
  out.sliding_num_attention_heads =
      count("swa_num_attention_heads", out.num_attention_heads, kHfMaxHeads);
  out.sliding_num_key_value_heads =
      count("swa_num_key_value_heads", family == "mimov2flash" ? 2 * kv : kv, kHfMaxHeads);
  if (out.sliding_num_attention_heads % out.sliding_num_key_value_heads != 0) {
    r.fail(prefix + "swa_num_attention_heads", "= ", out.sliding_num_attention_heads,
           " is not a multiple of the sliding layers' ", out.sliding_num_key_value_heads,
           " kv heads");
  }
  out.notes.push_back(out.model_type + ": sliding_attention layers have " +
                      std::to_string(out.sliding_num_attention_heads) + " query / " +
                      std::to_string(out.sliding_num_key_value_heads) +
                      " kv heads and attention sinks (weights); values of v_head_dim = " +
                      std::to_string(out.v_head_dim) + ", scaled by attention_value_scale");
}

/// Head counts that differ by layer (HfModelConfig::layer_num_attention_heads):
///   num_attention_heads_per_layer  Laguna: query heads per layer (48 on full, 64 on sliding
///                                  layers in Laguna-XS-2.1), kv heads the model's
///   num_query_heads, num_kv_heads  OpenELM: both per layer (num_transformer_layers entries)
///   block_configs                  DeciLM / Nemotron-NAS: attention.n_heads_in_group (kv heads
///                                  = num_attention_heads / group); no_op or replace_with_linear:
///                                  no attention on the layer (0 / 0)
/// Every list has one entry per layer, query heads a multiple of kv heads. The model's counts
/// become the first attention layer's (vLLM reads Nemotron-NAS's kv heads the same way).
inline void hf_read_layer_heads(const HfConfigReader& r, const nlohmann::json& c,
                                const std::string& prefix, HfModelConfig& out) {
  using json = nlohmann::json;
  const auto list = [&](const char* key) -> const json* {
    const json* v = HfConfigReader::find(c, key);
    if (!v) return nullptr;
    if (!v->is_array()) r.fail(prefix + key, "must be a list, got ", v->type_name());
    const auto n = static_cast<Eigen::Index>(v->size());
    if (out.num_hidden_layers > 0 && n != out.num_hidden_layers) {
      r.fail(prefix + key, "has ", v->size(), " entries; one per layer (num_hidden_layers = ",
             out.num_hidden_layers, ") expected");
    }
    if (static_cast<std::int64_t>(v->size()) > kHfMaxLayers) {
      r.fail(prefix + key, "has ", v->size(), " entries, more than ", kHfMaxLayers);
    }
    return v;
  };
  const auto count = [&](const json& e, const std::string& key) {
    const bool integral = e.is_number_unsigned() || e.is_number_integer();
    const std::int64_t v = integral ? e.get<std::int64_t>() : 0;
    if (!integral || v < 1 || v > kHfMaxHeads) {
      r.fail(key, "must be an integer in [1, ", kHfMaxHeads, "], got ", e.dump());
    }
    return static_cast<Eigen::Index>(v);
  };
  std::vector<Eigen::Index> q, kv;
  std::string source;
  if (const json* per_layer = list("num_attention_heads_per_layer")) {
    for (std::size_t i = 0; i < per_layer->size(); ++i) {
      q.push_back(count((*per_layer)[i], prefix + "num_attention_heads_per_layer[" +
                                             std::to_string(i) + "]"));
      kv.push_back(out.num_key_value_heads);
    }
    source = "num_attention_heads_per_layer";
  } else if (const json* qs = list("num_query_heads")) {
    const json* kvs = list("num_kv_heads");
    if (!kvs || kvs->size() != qs->size()) {
      r.fail(prefix + "num_kv_heads", kvs ? "has a different length than num_query_heads"
                                          : "is missing: OpenELM lists both per layer");
    }
    for (std::size_t i = 0; i < qs->size(); ++i) {
      const std::string at = "[" + std::to_string(i) + "]";
      q.push_back(count((*qs)[i], prefix + "num_query_heads" + at));
      kv.push_back(count((*kvs)[i], prefix + "num_kv_heads" + at));
    }
    source = "num_query_heads / num_kv_heads";
  } else if (const json* blocks = list("block_configs")) {
    for (std::size_t i = 0; i < blocks->size(); ++i) {
      const std::string at = prefix + "block_configs[" + std::to_string(i) + "].attention";
      const json* attn = HfConfigReader::find((*blocks)[i], "attention");
      if (!attn || !attn->is_object()) r.fail(at, "must be an object");
      const bool absent = r.boolean(*attn, "no_op", at + ".no_op").value_or(false) ||
                          r.boolean(*attn, "replace_with_linear", at + ".replace_with_linear")
                              .value_or(false);
      if (absent) {
        q.push_back(0);
        kv.push_back(0);
        continue;
      }
      if (const json* w = HfConfigReader::find(*attn, "window_length")) {
        r.fail(at + ".window_length", "= ", w->dump(), ": per-block windows are not supported");
      }
      const json* group = HfConfigReader::find(*attn, "n_heads_in_group");
      if (!group) r.fail(at + ".n_heads_in_group", "is missing on an attention block");
      const Eigen::Index g = count(*group, at + ".n_heads_in_group");
      if (out.num_attention_heads % g != 0) {
        r.fail(at + ".n_heads_in_group", "= ", g, " does not divide num_attention_heads = ",
               out.num_attention_heads);
      }
      q.push_back(out.num_attention_heads);
      kv.push_back(out.num_attention_heads / g);
    }
    source = "block_configs";
  } else {
    return;
  }
  Eigen::Index first = -1, without = 0;
  for (std::size_t i = 0; i < q.size(); ++i) {
    if (q[i] == 0) {
      ++without;
      continue;
    }
    if (kv[i] <= 0 || q[i] % kv[i] != 0) {
      r.fail(prefix + source, "layer ", i, ": ", q[i], " query heads are not a multiple of ",
             kv[i], " kv heads");
    }
    if (first < 0) first = static_cast<Eigen::Index>(i);
  }
  if (first < 0) r.fail(prefix + source, "gives no layer attention heads");
  if (out.num_hidden_layers == 0) out.num_hidden_layers = static_cast<Eigen::Index>(q.size());
  out.num_attention_heads = q[static_cast<std::size_t>(first)];
  out.num_key_value_heads = kv[static_cast<std::size_t>(first)];
  out.layer_num_attention_heads = std::move(q);
  out.layer_num_key_value_heads = std::move(kv);
  out.notes.push_back("head counts per layer from " + source + (without > 0 ? "; " +
                      std::to_string(without) + " layers without attention" : std::string()) +
                      " (hf_layer_heads)");
}

/// Gemma-4 with attention_k_eq_v: the full_attention layers have num_global_key_value_heads kv
/// heads whose keys are also the values (no V projection), the sliding layers
/// num_key_value_heads (transformers' Gemma4TextAttention: use_alternative_attention). Needs
/// layer_types; fills the per-layer lists.
inline void hf_read_global_kv_heads(const HfConfigReader& r, const nlohmann::json& c,
                                    const std::string& prefix, HfModelConfig& out) {
  const auto global = r.integer(c, "num_global_key_value_heads",
                                prefix + "num_global_key_value_heads");
  if (!global || !r.boolean(c, "attention_k_eq_v", prefix + "attention_k_eq_v").value_or(false)) {
    return;
  }
  const std::string key = prefix + "num_global_key_value_heads";
  if (*global < 1 || *global > kHfMaxHeads || out.num_attention_heads % *global != 0) {
    r.fail(key, "= ", *global, " must divide num_attention_heads = ", out.num_attention_heads);
  }
  if (out.layer_types.empty()) {
    r.fail(key, "needs layer_types: only full_attention layers have them");
  }
  const std::size_t n = out.layer_types.size();
  if (out.layer_num_attention_heads.empty()) {
    out.layer_num_attention_heads.assign(n, out.num_attention_heads);
    out.layer_num_key_value_heads.assign(n, out.num_key_value_heads);
  }
  for (std::size_t i = 0; i < n && i < out.layer_num_key_value_heads.size(); ++i) {
    if (out.layer_types[i] == "full_attention") out.layer_num_key_value_heads[i] = *global;
  }
  out.notes.push_back("full_attention layers: " + std::to_string(*global) + " kv heads " +
                      "(num_global_key_value_heads), keys also the values (attention_k_eq_v)");
}

/// Gemma-3n / Gemma-4's num_kv_shared_layers: layers i >= first = num_hidden_layers - shared
/// attend the KV cache of the last layer before `first` of their layer type (transformers'
/// Gemma3n / Gemma4 attention: kv_shared_layer_index). Needs num_hidden_layers; layer types
/// default to one type.
inline void hf_read_kv_sharing(const HfConfigReader& r, const nlohmann::json& c,
                               const std::string& prefix, HfModelConfig& out) {
  const std::string key = prefix + "num_kv_shared_layers";
  const auto shared = r.integer(c, "num_kv_shared_layers", key);
  if (!shared || *shared == 0) return;
  const Eigen::Index n = out.num_hidden_layers;
  if (*shared < 0 || *shared >= n) {
    r.fail(key, "= ", *shared, " must be in [0, num_hidden_layers = ", n, ")");
  }
  const Eigen::Index first = n - *shared;
  const auto type_of = [&](Eigen::Index i) {
    return out.layer_types.empty() ? std::string("full_attention")
                                   : out.layer_types[static_cast<std::size_t>(i)];
  };
  if (!out.layer_types.empty() && static_cast<Eigen::Index>(out.layer_types.size()) != n) {
    r.fail(key, "needs one layer_types entry per layer (", out.layer_types.size(), " for ", n,
           " layers)");
  }
  out.layer_kv_source.resize(static_cast<std::size_t>(n));
  for (Eigen::Index i = 0; i < n; ++i) {
    Eigen::Index source = i;
    if (i >= first) {
      source = first - 1;
      while (source >= 0 && type_of(source) != type_of(i)) --source;
      if (source < 0) {
        r.fail(key, "= ", *shared, ": layer ", i, " (", type_of(i),
               ") has no earlier layer of its type to share a KV cache with");
      }
    }
    out.layer_kv_source[static_cast<std::size_t>(i)] = source;
  }
  out.notes.push_back("layers " + std::to_string(first) + " to " + std::to_string(n - 1) +
                      " attend the KV cache of the last earlier layer of their type " +
                      "(num_kv_shared_layers = " + std::to_string(*shared) +
                      ", hf_layer_kv_source)");
}

/// Zamba / Zamba2's q.k width: attention_head_dim = 2 hidden_size / num_attention_heads unless
/// given (its attention runs on the concatenation of the hidden state and the first
/// embedding; Zamba2Config maps head_dim to it). Needs both counts.
inline Eigen::Index hf_zamba_attention_head_dim(const HfConfigReader& r, const nlohmann::json& c,
                                                const std::string& prefix,
                                                const HfModelConfig& out) {
  const auto w = r.integer(c, "attention_head_dim", prefix + "attention_head_dim")
                     .value_or(2 * out.hidden_size / out.num_attention_heads);
  if (w <= 0 || w > kHfMaxDim) {
    r.fail(prefix + "attention_head_dim", "= ", w, " must be in [1, ", kHfMaxDim, "]");
  }
  return w;
}

/// The q.k scale of the families whose transformers attention does not use head_dim^-1/2
/// (their Attention classes' `scaling`), else `standard`; each rule is noted.
///   gemma3n, gemma4          1 (q and k RMS-normalised)
///   granite* (GraniteConfig) attention_multiplier, default 1; hyperclovax: default standard
///   mpt                      attn_config.softmax_scale, default standard
///   gpt2, gpt_bigcode, ...   1 when scale_attn_weights = false; gpt2's
///                            scale_attn_by_inverse_layer_idx divides layer i's by i + 1
///   gpt_neo                  1 (no scaling)
///   zamba, zamba2            (attention_head_dim / 2)^-1/2 (ZambaAttention)
///   falcon_h1                standard * key_multiplier (keys are scaled before q.k)
///   any other                query_pre_attn_scalar^-1/2 when given (Gemma-2 / Gemma-3)
inline double hf_family_softmax_scale(const HfConfigReader& r, const nlohmann::json& c,
                                      const std::string& prefix, HfModelConfig& out,
                                      double standard) {
  const auto path = [&](std::string_view k) { return prefix + std::string(k); };
  const std::string fam = hf_lower_alnum(out.model_type);
  const auto noted = [&](double scale, const std::string& why) {
    std::ostringstream note;
    note << "softmax scale " << scale << ": " << why;
    out.notes.push_back(note.str());
    return scale;
  };
  const auto one_of = [&](std::initializer_list<std::string_view> names) {
    return std::find(names.begin(), names.end(), fam) != names.end();
  };
  if (one_of({"gemma3n", "gemma3ntext", "gemma4", "gemma4text"})) {
    return noted(1.0, out.model_type + " normalises q and k and does not scale q.k");
  }
  if (one_of({"granite", "granitemoe", "granitemoeshared", "granitemoehybrid", "graniteswa",
              "hyperclovax"})) {
    const auto m = r.number(c, "attention_multiplier", path("attention_multiplier"));
    if (m && !(*m > 0.0)) r.fail(path("attention_multiplier"), "= ", *m, " must be > 0");
    if (!m && fam == "hyperclovax") return standard;
    return noted(m.value_or(1.0), m ? "attention_multiplier (Granite's scaling)"
                                    : "Granite's default attention_multiplier (1)");
  }
  if (fam == "mpt") {
    const nlohmann::json* attn = HfConfigReader::find(c, "attn_config");
    if (attn && attn->is_object()) {
      if (auto sc = r.number(*attn, "softmax_scale", path("attn_config.softmax_scale"))) {
        if (!(*sc > 0.0)) r.fail(path("attn_config.softmax_scale"), "= ", *sc, " must be > 0");
        return noted(*sc, "attn_config.softmax_scale");
      }
    }
    return standard;
  }
  if (one_of({"gpt2", "gptbigcode", "decisiontransformer", "imagegpt"})) {
    if (fam == "gpt2" &&
        r.boolean(c, "scale_attn_by_inverse_layer_idx", path("scale_attn_by_inverse_layer_idx"))
            .value_or(false)) {
      out.scale_attn_by_inverse_layer_idx = true;
      out.notes.push_back("scale_attn_by_inverse_layer_idx: layer i's scores are divided by i + 1 "
                          "(hf_attention_params; transformers' eager attention only, its sdpa "
                          "and flash paths ignore it)");
    }
    if (!r.boolean(c, "scale_attn_weights", path("scale_attn_weights")).value_or(true)) {
      return noted(1.0, "scale_attn_weights = false");
    }
    return standard;
  }
  if (fam == "gptneo") return noted(1.0, "GPT-Neo does not scale q.k");
  if (one_of({"zamba", "zamba2"}) && out.num_attention_heads > 0 && out.hidden_size > 0) {
    const auto w = hf_zamba_attention_head_dim(r, c, prefix, out);
    return noted(1.0 / std::sqrt(static_cast<double>(w) / 2.0),
                 "(attention_head_dim / 2)^-1/2, Zamba's scaling");
  }
  if (fam == "falconh1") {
    if (auto km = r.number(c, "key_multiplier", path("key_multiplier"))) {
      if (!(*km > 0.0)) r.fail(path("key_multiplier"), "= ", *km, " must be > 0");
      return noted(standard * *km, "head_dim^-1/2 times key_multiplier (Falcon-H1 scales keys)");
    }
    return standard;
  }
  if (auto qs = r.number(c, "query_pre_attn_scalar", path("query_pre_attn_scalar"))) {
    if (!(*qs > 0.0)) r.fail(path("query_pre_attn_scalar"), "= ", *qs, " must be > 0");
    return 1.0 / std::sqrt(*qs);  // Gemma 2/3: scaling = query_pre_attn_scalar ** -0.5
  }
  if (one_of({"gemma2", "gemma3text"})) {
    return noted(1.0 / 16.0, "query_pre_attn_scalar absent: the class default 256, 256^-1/2");
  }
  return standard;
}

}  // namespace detail

/// \brief Reads a parsed config.json object. `source` names it in error messages.
/// Throws std::invalid_argument naming source and key for anything it cannot use.
inline HfModelConfig hf_config_from_json(const nlohmann::json& root, std::string source,
                                         const HfConfigOptions& options = {}) {
  using json = nlohmann::json;
  using detail::HfConfigReader;
  HfConfigReader r(source);
  HfModelConfig out;
  out.source = source;
  if (!root.is_object()) r.fail("<root>", "must be a JSON object, got ", root.type_name());

  // Multimodal wrappers keep the language model's keys under text_config (Gemma-3 4B+, Llama-4,
  // Mistral-3, Qwen2-VL in transformers >= 5), language_config (DeepSeek-VL2, Janus) or
  // llm_config (InternVL).
  const json* cfg = &root;
  std::string prefix;
  if (!HfConfigReader::find(root, "num_attention_heads") &&
      !HfConfigReader::find(root, "hidden_size") && !HfConfigReader::find(root, "head_dim")) {
    for (const char* key : {"text_config", "language_config", "llm_config"}) {
      if (const json* tc = HfConfigReader::find(root, key); tc && tc->is_object()) {
        cfg = tc;
        prefix = std::string(key) + ".";
        out.notes.push_back(std::string("language-model keys read from ") + key);
        break;
      }
    }
  }
  if (prefix.empty()) {
    const json* outer = HfConfigReader::find(root, "model_type");
    const std::string wrapper = outer && outer->is_string() ? outer->get<std::string>() : "";
    const json* hybrid = HfConfigReader::find(root, "is_hybrid");
    const bool own_vit = detail::hf_lower_alnum(wrapper) == "dpt" &&
                         (hybrid && hybrid->is_boolean() && hybrid->get<bool>());
    if (detail::hf_backbone_wrapper(wrapper) && !own_vit) {
      const json* bc = HfConfigReader::find(root, "backbone_config");
      if (bc && bc->is_object()) {
        if (!HfConfigReader::find(*bc, "model_type")) {
          r.fail("backbone_config.model_type", "is absent: the backbone's family is unknown");
        }
        cfg = bc;
        prefix = "backbone_config.";
        out.notes.push_back(wrapper + ": the backbone's keys, read from backbone_config (the " +
                            "wrapper's own head or decoder is not described)");
        const std::string w = detail::hf_lower_alnum(wrapper);
        if (w == "mask2former" || w == "maskformer" || w == "oneformer") {
          out.notes.push_back(wrapper + ": its pixel decoder and transformer decoder add DETR's "
                              "sine embedding to their feature maps (sine_embedding_2d, "
                              "num_pos_feats = their width / 2, every pixel real)");
        }
      } else if (detail::hf_lower_alnum(wrapper) != "dpt") {
        // DPT without a backbone_config runs its own ViT, described by the root keys.
        const json* name = HfConfigReader::find(root, "backbone");
        r.fail("backbone_config", "is absent: ", wrapper, " runs a backbone ",
               name && name->is_string() ? "named " + name->dump() + " (timm or the hub)"
                                         : "its config does not describe",
               "; the positions are that backbone's, in its own config.json");
      }
    }
  }
  // transformers 5 (convert_rope_params_to_dict): rope_parameters = rope_scaling or
  // rope_parameters. A non-empty rope_scaling replaces the whole dict, its rope_theta included
  // (the theta then comes from the top-level key or the class default), as when a YaRN
  // rope_scaling is added to a config saved by transformers 5.
  json replaced;
  if (const json* rs = HfConfigReader::find(*cfg, "rope_scaling");
      rs && !(rs->is_object() && rs->empty()) && HfConfigReader::find(*cfg, "rope_parameters")) {
    replaced = *cfg;
    replaced.erase("rope_parameters");
    cfg = &replaced;
    out.notes.push_back(prefix + "rope_parameters ignored: a non-empty " + prefix +
                        "rope_scaling replaces it (transformers 5, convert_rope_params_to_dict)");
  }
  const json& c = *cfg;
  const auto path = [&](std::string_view k) { return prefix + std::string(k); };

  if (auto mt = r.string(c, "model_type", path("model_type"))) {
    out.model_type = *mt;
  } else if (auto outer = r.string(root, "model_type", "model_type")) {
    out.model_type = *outer;
    if (const auto text = detail::hf_wrapper_text_model_type(*outer);
        !prefix.empty() && !text.empty()) {
      out.model_type = std::string(text);
      out.notes.push_back(path("model_type") + " absent: " + *outer + "'s language model, " +
                          out.model_type);
    }
  }
  detail::hf_read_vision_rope(r, root, out);
  detail::hf_read_kv_cache_scheme(r, root, out);
  if (const json* arch = HfConfigReader::find(root, "architectures")) {
    if (!arch->is_array()) r.fail("architectures", "must be a list of strings");
    for (std::size_t i = 0; i < arch->size() && i < 64; ++i) {
      if (!(*arch)[i].is_string()) r.fail("architectures", "[", i, "] must be a string");
      out.architectures.push_back((*arch)[i].get<std::string>());
    }
  }

  if (prefix.empty() && detail::hf_lower_alnum(out.model_type) == "sam") {
    detail::hf_read_sam(r, root, out);
    return out;
  }
  // ---- geometry -------------------------------------------------------------------------
  const std::string family = detail::hf_lower_alnum(out.model_type);
  // A config that names a rotary key is read as RoPE, whatever its model_type.
  const bool names_rotary = HfConfigReader::find(c, "rope_theta") ||
                            HfConfigReader::find(c, "rope_scaling") ||
                            HfConfigReader::find(c, "rope_parameters") ||
                            HfConfigReader::find(c, "rotary_dim") ||
                            HfConfigReader::find(c, "partial_rotary_factor");
  // Swin's per-stage lists (num_heads is one) follow a geometry of their own.
  if (!names_rotary && detail::hf_read_swin(r, c, prefix, out)) return out;
  if (!names_rotary && detail::hf_read_detr(r, c, prefix, out)) return out;
  // Families with positions posenc does not read, and vision configs of families it does not
  // know, fail here rather than fall to the RoPE default.
  if (const std::string_view why = detail::hf_unsupported_positions(out.model_type);
      !why.empty() && !names_rotary) {
    r.fail(path("model_type"), "= \"", out.model_type, "\": ", why,
           "; not a posenc scheme (posenc reads rope, alibi, absolute, T5 buckets, 2-D biases)");
  }
  if (!names_rotary && !detail::hf_absolute_family(family) && family != "beit" &&
      family != "data2vecvision") {
    for (const char* key : {"image_size", "patch_size", "num_frames", "tubelet_size"}) {
      if (HfConfigReader::find(c, key)) {
        r.fail(path(key), "is given but model_type = \"", out.model_type, "\" is no vision ",
               "family posenc knows and the config names no rotary key: its positions cannot ",
               "be told from the config (posenc reads ViT, DeiT, DINOv2, ViT-MSN, I-JEPA, CLIP ",
               "/ SigLIP vision, ViT-MAE, DPT, VideoMAE, BEiT, data2vec-vision and the Swin ",
               "families)");
      }
    }
  }
  // Configuration classes whose saved configs (save_pretrained writes only the keys that
  // differ from the class's defaults; Gemma-3's text_config is such a diff) need the class
  // defaults of the sizes too.
  const detail::HfFamilySizes sizes = detail::hf_family_sizes(family);
  const auto size_default = [&](const char* key, auto value, auto& into) {
    into = value;
    out.notes.push_back(path(key) + " absent: " + out.model_type + "'s default " +
                        std::to_string(value));
  };
  std::string used;
  const detail::HfSizeKeys renamed = detail::hf_family_size_keys(family);
  auto heads = r.integer_alias(c, {"num_attention_heads", "n_head", "n_heads", "num_heads"},
                               prefix, &used);
  if (!heads && !renamed.heads.empty()) {
    heads = r.integer(c, renamed.heads, path(renamed.heads));
    if (heads) used = std::string(renamed.heads);
  }
  const json* attn_config = HfConfigReader::find(c, "attn_config");  // MPT
  if (heads) {
    if (*heads <= 0 || *heads > detail::kHfMaxHeads) {
      r.fail(path(used), "= ", *heads, " must be in [1, ", detail::kHfMaxHeads, "]");
    }
    out.num_attention_heads = *heads;
    if (used != "num_attention_heads") out.notes.push_back("heads read from " + used);
  } else if (sizes.num_attention_heads > 0) {
    size_default("num_attention_heads", sizes.num_attention_heads, out.num_attention_heads);
  }
  auto hidden =
      r.integer_alias(c, {"hidden_size", "n_embd", "n_embed", "d_model", "model_dim"}, prefix,
                      &used);
  if (!hidden && !renamed.hidden.empty()) {
    hidden = r.integer(c, renamed.hidden, path(renamed.hidden));
    if (hidden) used = std::string(renamed.hidden);
  }
  const std::string hidden_key = hidden ? used : std::string("hidden_size");
  if (hidden) {
    if (*hidden <= 0 || *hidden > detail::kHfMaxDim) {
      r.fail(path(used), "= ", *hidden, " must be in [1, ", detail::kHfMaxDim, "]");
    }
    out.hidden_size = *hidden;
  } else if (sizes.hidden_size > 0) {
    size_default("hidden_size", sizes.hidden_size, out.hidden_size);
  }
  std::string kv_key;  // where num_key_value_heads came from: a key, or a family default
  if (auto kv = r.integer_alias(c, {"num_key_value_heads", "multi_query_group_num", "n_head_kv"},
                                prefix, &used)) {
    if (*kv <= 0 || *kv > detail::kHfMaxHeads) {
      r.fail(path(used), "= ", *kv, " must be in [1, ", detail::kHfMaxHeads, "]");
    }
    out.num_key_value_heads = *kv;
    kv_key = used;
  } else if (attn_config && attn_config->is_object() &&
             HfConfigReader::find(*attn_config, "kv_n_heads")) {
    // DBRX keeps its kv head count (and its rope_theta, below) in attn_config.
    const auto kv_heads = r.integer(*attn_config, "kv_n_heads", path("attn_config.kv_n_heads"));
    if (*kv_heads <= 0 || *kv_heads > detail::kHfMaxHeads) {
      r.fail(path("attn_config.kv_n_heads"), "= ", *kv_heads, " must be in [1, ",
             detail::kHfMaxHeads, "]");
    }
    out.num_key_value_heads = *kv_heads;
    kv_key = "attn_config.kv_n_heads";
  } else if (c.is_object() && c.contains("num_key_value_heads") &&
             c["num_key_value_heads"].is_null()) {
    // An explicit null is None in transformers' configs, which then use num_attention_heads
    // (LlamaConfig / MistralConfig: "if num_key_value_heads is None"), not the class default.
    out.num_key_value_heads = out.num_attention_heads;
    out.notes.push_back(path("num_key_value_heads") + " = null: num_attention_heads (MHA), as " +
                        "transformers reads None");
  } else if (sizes.num_key_value_heads > 0) {
    size_default("num_key_value_heads", sizes.num_key_value_heads, out.num_key_value_heads);
    kv_key = "num_key_value_heads (absent: " + out.model_type + "'s default)";
  } else {
    out.num_key_value_heads = out.num_attention_heads;
  }
  // JetMoE's attention is a mixture of attention heads: JetMoeConfig never reads
  // num_attention_heads; it sets num_key_value_heads (16) * num_experts_per_tok (2), the query
  // heads of the top-k experts.
  if (family == "jetmoe" && out.num_attention_heads == 0) {
    const auto kv = !kv_key.empty() ? out.num_key_value_heads : Eigen::Index{16};
    const auto top_k = r.integer(c, "num_experts_per_tok", path("num_experts_per_tok")).value_or(2);
    if (top_k <= 0 || top_k > detail::kHfMaxHeads / kv) {
      r.fail(path("num_experts_per_tok"), "= ", top_k, " must be in [1, ",
             detail::kHfMaxHeads / kv, "] (JetMoE's query heads: kv heads times it)");
    }
    out.num_key_value_heads = kv;
    out.num_attention_heads = kv * top_k;
    if (kv_key.empty()) kv_key = "num_key_value_heads (absent: jetmoe's default)";
    out.notes.push_back("jetmoe: num_attention_heads = num_key_value_heads * " +
                        std::string("num_experts_per_tok = ") +
                        std::to_string(out.num_attention_heads) + " (JetMoeConfig)");
  }
  // GQA shares each kv head among heads / kv_heads query heads (transformers' repeat_kv). A
  // family default counts too: transformers takes it as well, and repeat_kv then fails.
  if (!kv_key.empty() && out.num_attention_heads > 0 &&
      out.num_attention_heads % out.num_key_value_heads != 0) {
    r.fail(path(kv_key), "= ", out.num_key_value_heads, " must divide num_attention_heads = ",
           out.num_attention_heads);
  }
  if (auto layers = r.integer_alias(
          c, {"num_hidden_layers", "n_layer", "n_layers", "num_layers", "num_transformer_layers"},
          prefix, &used)) {
    if (*layers < 0 || *layers > detail::kHfMaxLayers) {
      r.fail(path(used), "= ", *layers, " must be in [0, ", detail::kHfMaxLayers, "]");
    }
    out.num_hidden_layers = *layers;
  }
  detail::hf_read_layer_heads(r, c, prefix, out);
  // Key / value heads without the query heads they serve: no attention call fits them (a
  // family default would be transformers' class default, which posenc does not know here).
  if (!kv_key.empty() && out.num_attention_heads == 0) {
    r.fail(path("num_attention_heads"), "is missing, but ", kv_key, " = ",
           out.num_key_value_heads, " is given: the query heads it must divide are unknown");
  }
  if (auto mp = r.integer_alias(c, {"max_position_embeddings", "n_positions", "max_seq_len",
                                    "seq_length", "max_sequence_length", "max_context_length"},
                                prefix, &used)) {
    if (*mp < 0 || *mp > detail::kHfMaxPosition) {
      r.fail(path(used), "= ", *mp, " must be in [0, 2^53]");
    }
    out.max_position_embeddings = *mp;
    if (used != "max_position_embeddings") {
      out.notes.push_back("max_position_embeddings read from " + used);
    }
  } else if (sizes.max_position_embeddings > 0) {
    size_default("max_position_embeddings", sizes.max_position_embeddings,
                 out.max_position_embeddings);
  }
  if (auto o = r.integer(c, "original_max_position_embeddings",
                         path("original_max_position_embeddings"))) {
    if (*o <= 0 || *o > detail::kHfMaxPosition) {
      r.fail(path("original_max_position_embeddings"), "= ", *o, " must be in [1, 2^53]");
    }
    out.original_max_position_embeddings = *o;
  }

  if (auto sw = r.integer(c, "sliding_window", path("sliding_window"))) {
    if (*sw < 0 || *sw > detail::kHfMaxPosition) {
      r.fail(path("sliding_window"), "= ", *sw, " must be in [0, 2^53]");
    }
    auto use = r.boolean(c, "use_sliding_window", path("use_sliding_window"));
    if (!use && sizes.sliding_window_off) {
      use = false;
      out.notes.push_back(path("use_sliding_window") + " absent: " + out.model_type +
                          "'s default false");
    }
    if (use && !*use) {
      out.notes.push_back("sliding_window = " + std::to_string(*sw) +
                          " ignored: use_sliding_window = false");
    } else {
      out.sliding_window = *sw;
    }
  } else if (sizes.sliding_window > 0 && !c.contains("sliding_window")) {
    // (An explicit "sliding_window": null turns the window off, as in Mistral-7B-v0.2+.) The
    // classes with a default window (Mistral, Gemma-2, Gemma-3) have no use_sliding_window;
    // only false turns the window off, as for a given window (vLLM's get_sliding_window).
    if (auto use = r.boolean(c, "use_sliding_window", path("use_sliding_window")); use && !*use) {
      out.notes.push_back(out.model_type + "'s default sliding_window " +
                          std::to_string(sizes.sliding_window) +
                          " ignored: use_sliding_window = false");
    } else {
      size_default("sliding_window", sizes.sliding_window, out.sliding_window);
    }
  }
  detail::hf_read_encoder_mask(r, c, prefix, out);
  if (auto ch = r.integer(c, "attention_chunk_size", path("attention_chunk_size"))) {
    if (*ch < 0 || *ch > detail::kHfMaxPosition) {
      r.fail(path("attention_chunk_size"), "= ", *ch, " must be in [0, 2^53]");
    }
    out.attention_chunk_size = *ch;
  }
  if (const json* dca = HfConfigReader::find(c, "dual_chunk_attention_config")) {
    const std::string key = path("dual_chunk_attention_config");
    if (!dca->is_object()) r.fail(key, "must be an object, got ", dca->type_name());
    DualChunkParams p;
    const auto field = [&](const char* name, std::int64_t& into) {
      if (auto v = r.integer(*dca, name, key + "." + name)) into = *v;
    };
    field("chunk_size", p.chunk_size);
    field("local_size", p.local_size);
    field("original_max_position_embeddings", p.original_max_position_embeddings);
    if (p.local_size < 0) r.fail(key + ".local_size", "= ", p.local_size, " must be >= 0");
    if (p.chunk_size <= p.local_size || p.chunk_size > detail::kHfMaxPosition) {
      r.fail(key + ".chunk_size", "= ", p.chunk_size, " must be > local_size (", p.local_size,
             ") and <= 2^53");
    }
    if (p.original_max_position_embeddings < 0 ||
        p.original_max_position_embeddings > detail::kHfMaxPosition) {
      r.fail(key + ".original_max_position_embeddings", "= ",
             p.original_max_position_embeddings, " must be in [0, 2^53]");
    }
    out.dual_chunk = p;
    out.notes.push_back("dual_chunk_attention_config: vLLM runs dual chunk attention (chunk_size " +
                        std::to_string(p.chunk_size) + ", local_size " +
                        std::to_string(p.local_size) +
                        "); transformers ignores it and runs plain RoPE");
    if (HfConfigReader::find(*dca, "sparse_attention_config") ||
        HfConfigReader::find(*dca, "sparse_attention_enabled")) {
      out.notes.push_back("dual_chunk_attention_config: the sparse (MInference) prefill keys are "
                          "not applied; posenc's dual chunk attention is dense");
    }
  }
  if (auto mw = r.integer(c, "max_window_layers", path("max_window_layers"))) {
    if (*mw < 0 || *mw > detail::kHfMaxLayers) {
      r.fail(path("max_window_layers"), "= ", *mw, " must be in [0, ", detail::kHfMaxLayers, "]");
    }
    out.max_window_layers = *mw;
  } else if (sizes.sliding_window_off && out.sliding_window > 0) {
    out.max_window_layers = 28;  // Qwen2Config: layers from max_window_layers = 28 on slide
    out.notes.push_back(path("max_window_layers") + " absent: " + out.model_type +
                        "'s default 28");
  }
  if (auto cap = r.number(c, "attn_logit_softcapping", path("attn_logit_softcapping"))) {
    if (!(std::isfinite(*cap) && *cap > 0.0)) {
      r.fail(path("attn_logit_softcapping"), "= ", *cap, " must be finite and > 0");
    }
    out.attn_logit_softcapping = *cap;
  } else if (family == "gemma2" && !c.contains("attn_logit_softcapping")) {
    out.attn_logit_softcapping = 50.0;  // Gemma2Config's default (null turns it off)
    out.notes.push_back(path("attn_logit_softcapping") + " absent: gemma2's default 50");
  }

  // ---- T5's relative attention bias ---------------------------------------------------------
  if (detail::hf_read_relative_bias(r, c, prefix, out)) return out;

  // ---- ALiBi -----------------------------------------------------------------------------
  double alibi_bias = 0.0;
  bool alibi = false;
  if (attn_config) {
    if (!attn_config->is_object()) r.fail(path("attn_config"), "must be an object");
    if (auto a = r.boolean(*attn_config, "alibi", path("attn_config.alibi")); a && *a) {
      alibi = true;
      alibi_bias = r.number(*attn_config, "alibi_bias_max", path("attn_config.alibi_bias_max"))
                       .value_or(8.0);
      if (!(alibi_bias > 0.0)) {
        r.fail(path("attn_config.alibi_bias_max"), "= ", alibi_bias, " must be > 0");
      }
    }
  }
  if (auto a = r.boolean(c, "alibi", path("alibi")); a && *a) alibi = true;
  const detail::HfAbsoluteFamily* absolute =
      detail::hf_flagged_positions(r, c, prefix, out.model_type);
  if (!absolute) absolute = detail::hf_absolute_family(out.model_type);
  // Absolute families' q.k scale: head_dim^-1/2 unless the family scales otherwise (GPT-Neo,
  // GPT-2's flags); left 0 when the config gives no head width.
  const auto absolute_scale = [&] {
    if (out.hidden_size > 0 && out.num_attention_heads > 0) {
      // As the RoPE path: heads 0 wide would make the scale 1 / sqrt(0) = inf.
      if (out.hidden_size < out.num_attention_heads) {
        r.fail(path("hidden_size"), "= ", out.hidden_size,
               " is smaller than num_attention_heads = ", out.num_attention_heads,
               ": heads of width 0");
      }
      if (out.attention_head_dim == 0) {
        out.attention_head_dim = out.hidden_size / out.num_attention_heads;
      }
      const double d = static_cast<double>(out.hidden_size / out.num_attention_heads);
      out.softmax_scale = detail::hf_family_softmax_scale(r, c, prefix, out, 1.0 / std::sqrt(d));
    }
  };
  if (detail::hf_read_relative_bias_2d(r, c, prefix, hidden_key, out)) {
    absolute_scale();
    return out;
  }
  if (auto pe = r.string(c, "position_embedding_type", path("position_embedding_type"))) {
    if (*pe == "alibi") alibi = true;
    if (*pe == "relative_key" || *pe == "relative_key_query") {
      // Shaw et al.'s learned distance embeddings inside q.k (BERT variants): not a posenc scheme.
      r.fail(path("position_embedding_type"), "= \"", *pe, "\" (learned relative-distance ",
             "embeddings inside the scores) is not supported: posenc reads rope, alibi, absolute");
    }
    if (*pe == "absolute" || *pe == "learned" || *pe == "sinusoidal") {
      out.scheme = HfPositionScheme::kAbsolute;
      out.absolute_position_offset = absolute ? absolute->offset : 0;
      out.notes.push_back("position_embedding_type = \"" + *pe + "\": no RoPE, no ALiBi");
      detail::hf_read_absolute(r, c, prefix, absolute, pe, hidden_key, out);
      absolute_scale();
      return out;
    }
  }
  // Families that never wrote position_embedding_type (GPT-2, OPT, BART, Whisper, CLIP, ...):
  // absolute embeddings, unless the config itself names a rotary or ALiBi scheme.
  if (absolute && !alibi && !names_rotary) {
    out.scheme = HfPositionScheme::kAbsolute;
    out.absolute_position_offset = absolute->offset;
    detail::hf_read_absolute(r, c, prefix, absolute, std::nullopt, hidden_key, out);
    absolute_scale();
    return out;
  }
  if (detail::hf_lower_alnum(out.model_type) == "bloom") alibi = true;
  if (alibi && detail::hf_lower_alnum(out.model_type) == "bert") {
    // Jina-BERT (jina-embeddings-v2): an encoder whose ALiBi is symmetric, -m |i - j|.
    out.mask = MaskMode::kBidirectional;
    out.notes.push_back("bert with ALiBi (Jina-BERT): bidirectional, bias -m |i - j|");
  }
  if (alibi) {
    if (out.num_attention_heads <= 0) {
      r.fail(path("num_attention_heads"), "is missing; ALiBi needs one slope per head");
    }
    if (alibi_bias == 0.0) alibi_bias = 8.0;  // Press et al. 2022; BLOOM hard-codes 8
    out.scheme = HfPositionScheme::kAlibi;
    out.alibi_max_bias = alibi_bias;
    out.alibi_slopes = alibi_slopes(out.num_attention_heads, alibi_bias);
    out.attention_head_dim = out.hidden_size > 0 ? out.hidden_size / out.num_attention_heads : 0;
    if (out.attention_head_dim > 0) {
      out.softmax_scale = detail::hf_family_softmax_scale(
          r, c, prefix, out, 1.0 / std::sqrt(static_cast<double>(out.attention_head_dim)));
    }
    return out;
  }

  // ---- RoPE geometry ---------------------------------------------------------------------
  detail::HfRopeContext ctx;
  ctx.max_position_embeddings = out.max_position_embeddings;
  ctx.top_original = out.original_max_position_embeddings;
  const detail::HfFamilyDefaults defaults = detail::hf_family_defaults(family);
  Eigen::Index head_dim = 0;
  if (auto hd = r.integer(c, "head_dim", path("head_dim"))) {
    if (*hd <= 0 || *hd > detail::kHfMaxDim) {
      r.fail(path("head_dim"), "= ", *hd, " must be in [1, ", detail::kHfMaxDim, "]");
    }
    head_dim = *hd;
  } else if ((family == "zamba" || family == "zamba2") && out.hidden_size > 0 &&
             out.num_attention_heads > 0) {
    // ZambaConfig / Zamba2Config: attention_head_dim = 2 * hidden_size // num_attention_heads
    // (attention over [hidden state, first embedding]), not hidden_size / heads.
    head_dim = detail::hf_zamba_attention_head_dim(r, c, prefix, out);
    out.notes.push_back(out.model_type + ": heads of attention_head_dim = " +
                        std::to_string(head_dim) + " (given, else 2 hidden_size / " +
                        "num_attention_heads)");
  } else if (auto kc = r.integer(c, "kv_channels", path("kv_channels"))) {  // ChatGLM, JetMoE
    if (*kc <= 0 || *kc > detail::kHfMaxDim) {
      r.fail(path("kv_channels"), "= ", *kc, " must be in [1, ", detail::kHfMaxDim, "]");
    }
    head_dim = *kc;
    out.notes.push_back("head_dim read from kv_channels (ChatGLM, JetMoE)");
  } else if (const auto d = defaults.head_dim; d > 0) {
    head_dim = d;
    out.notes.push_back(out.model_type + ": head_dim absent, transformers' default " +
                        std::to_string(d));
  } else {
    if (out.hidden_size <= 0) {
      r.fail(path("hidden_size"), "is missing (and no head_dim): cannot size the heads");
    }
    if (out.num_attention_heads <= 0) {
      r.fail(path("num_attention_heads"), "is missing (and no head_dim): cannot size the heads");
    }
    head_dim = out.hidden_size / out.num_attention_heads;  // HF: integer division
    if (head_dim <= 0) {
      r.fail(path("hidden_size"), "= ", out.hidden_size, " is smaller than num_attention_heads = ",
             out.num_attention_heads);
    }
  }
  out.attention_head_dim = head_dim;
  if (auto rope_hd = r.integer(c, "qk_rope_head_dim", path("qk_rope_head_dim"))) {
    if (*rope_hd <= 0 || *rope_hd > detail::kHfMaxDim) {
      r.fail(path("qk_rope_head_dim"), "= ", *rope_hd, " must be in [1, ", detail::kHfMaxDim, "]");
    }
    const auto nope = r.integer(c, "qk_nope_head_dim", path("qk_nope_head_dim")).value_or(0);
    if (nope < 0 || nope > detail::kHfMaxDim) {
      r.fail(path("qk_nope_head_dim"), "= ", nope, " must be in [0, ", detail::kHfMaxDim, "]");
    }
    // MLA (DeepSeek-V2/V3): RoPE runs on the separate q_pe / k_pe heads of qk_rope_head_dim;
    // the score uses the concatenated nope + rope head (HF DeepseekV3Attention.qk_head_dim).
    head_dim = *rope_hd;
    out.qk_nope_head_dim = nope;
    out.attention_head_dim = nope + *rope_hd;
    out.notes.push_back("MLA: RoPE head = qk_rope_head_dim = " + std::to_string(*rope_hd) +
                        " (q_pe/k_pe); q.k width = qk_nope_head_dim + qk_rope_head_dim = " +
                        std::to_string(out.attention_head_dim) +
                        "; in a concatenated [nope, rope] head use rotary_offset = " +
                        std::to_string(nope));
    for (auto [key, field] : {std::pair{"v_head_dim", &out.v_head_dim},
                              std::pair{"kv_lora_rank", &out.kv_lora_rank}}) {
      const auto value = r.integer(c, key, path(key)).value_or(0);
      if (value < 0 || value > detail::kHfMaxDim) {
        r.fail(path(key), "= ", value, " must be in [0, ", detail::kHfMaxDim, "]");
      }
      *field = value;
    }
    if (out.v_head_dim > 0) {
      out.notes.push_back("MLA: values of v_head_dim = " + std::to_string(out.v_head_dim) +
                          " (KvCache / attention with v narrower than q.k)");
    }
    if (out.kv_lora_rank > 0) {
      out.notes.push_back(
          "MLA absorbed: latent rows of kv_lora_rank + qk_rope_head_dim = " +
          std::to_string(out.kv_lora_rank + *rope_hd) + ", values the first kv_lora_rank = " +
          std::to_string(out.kv_lora_rank) + " (KvCache::latent, attention_latent), RoPE at " +
          "rotary_offset = " + std::to_string(out.kv_lora_rank));
    }
    detail::hf_read_indexer(r, c, prefix, *rope_hd, out);
  }
  ctx.head_dim = head_dim;
  if (family == "mimov2" || family == "mimov2flash") {
    detail::hf_read_mimo_v2(r, c, prefix, family, head_dim, out);
  }

  if (auto t = r.number(c, "rope_theta", path("rope_theta"))) {
    if (!(*t > 1.0)) r.fail(path("rope_theta"), "= ", *t, " must be > 1");
    ctx.top_theta = *t;
  } else if (auto g = r.number(c, "global_rope_theta", path("global_rope_theta"))) {
    if (!(*g > 1.0)) r.fail(path("global_rope_theta"), "= ", *g, " must be > 1");
    ctx.top_theta = *g;
    out.notes.push_back("theta read from global_rope_theta (ModernBERT's global layers)");
  } else if (auto b = r.number(c, "rotary_emb_base", path("rotary_emb_base"))) {
    if (!(*b > 1.0)) r.fail(path("rotary_emb_base"), "= ", *b, " must be > 1");
    ctx.top_theta = *b;
    out.notes.push_back("theta read from rotary_emb_base (GPT-NeoX name for rope_theta)");
  } else if (auto f = r.number(c, "rope_freq_constant", path("rope_freq_constant"))) {
    if (!(*f > 1.0)) r.fail(path("rope_freq_constant"), "= ", *f, " must be > 1");
    ctx.top_theta = *f;
    out.notes.push_back("theta read from rope_freq_constant (OpenELM)");
  } else if (const auto dbrx_theta =
                 attn_config && attn_config->is_object()
                     ? r.number(*attn_config, "rope_theta", path("attn_config.rope_theta"))
                     : std::nullopt) {
    // DBRX (databricks/dbrx-*): attn_config.rope_theta = 500000, which vLLM reads.
    if (!(*dbrx_theta > 1.0)) {
      r.fail(path("attn_config.rope_theta"), "= ", *dbrx_theta, " must be > 1");
    }
    ctx.top_theta = *dbrx_theta;
    out.notes.push_back("theta read from attn_config.rope_theta (DBRX)");
  } else if (auto ratio = r.number(c, "rope_ratio", path("rope_ratio"))) {
    if (!(*ratio > 0.0) || !(10000.0 * *ratio > 1.0)) {
      r.fail(path("rope_ratio"), "= ", *ratio, " must make theta = 10000 * rope_ratio > 1");
    }
    ctx.top_theta = 10000.0 * *ratio;
    out.notes.push_back("theta = 10000 * rope_ratio (ChatGLM)");
  } else {
    bool nested_theta = false;
    if (const json* rp = HfConfigReader::find(c, "rope_parameters"); rp && rp->is_object()) {
      nested_theta = true;  // transformers >= 5 keeps rope_theta inside; checked per dict
    }
    // transformers 5 fills a rope_parameters dict's missing rope_theta the same way.
    if (defaults.theta > 0.0) ctx.top_theta = defaults.theta;
    if (!nested_theta) {
      const bool modernbert = family == "modernbert";
      out.notes.push_back(out.model_type + (out.model_type.empty() ? "" : ": ") +
                          (modernbert ? "global_rope_theta" : "rope_theta") +
                          " absent: transformers' default " + detail::concat(ctx.top_theta));
    }
  }

  if (auto f = r.number(c, "partial_rotary_factor", path("partial_rotary_factor"))) {
    if (!(*f > 0.0 && *f <= 1.0)) {
      r.fail(path("partial_rotary_factor"), "= ", *f, " must be in (0, 1]");
    }
    ctx.top_partial = *f;
  } else if (auto pct = r.number(c, "rotary_pct", path("rotary_pct"))) {
    if (!(*pct > 0.0 && *pct <= 1.0)) r.fail(path("rotary_pct"), "= ", *pct, " must be in (0, 1]");
    ctx.top_partial = *pct;
    out.notes.push_back("partial_rotary_factor read from rotary_pct (GPT-NeoX)");
  }
  if (!ctx.top_partial && defaults.partial_rotary_factor > 0.0 &&
      !HfConfigReader::find(c, "rotary_dim")) {
    ctx.top_partial = defaults.partial_rotary_factor;
    out.notes.push_back(out.model_type + ": partial_rotary_factor absent, transformers' default " +
                        detail::concat(defaults.partial_rotary_factor));
  }
  if (family == "bamba") {
    // BambaConfig.__post_init__: partial_rotary_factor = 0.5, "hardcode for BC".
    if (ctx.top_partial && *ctx.top_partial != 0.5) {
      out.notes.push_back("bamba: partial_rotary_factor given as " +
                          detail::concat(*ctx.top_partial) + " is overridden");
    }
    ctx.top_partial = 0.5;
    out.notes.push_back("bamba: RoPE on half of each head (transformers hard-codes "
                        "partial_rotary_factor 0.5)");
  }
  if (family == "minimaxm2") {
    // MiniMaxM2Config: partial_rotary_factor = rotary_dim / head_dim (rotary_dim defaulting
    // to head_dim / 2), whatever partial_rotary_factor says.
    if (!HfConfigReader::find(c, "rotary_dim")) {
      ctx.top_partial = 0.5;
      out.notes.push_back("minimax_m2: rotary_dim absent, transformers' default head_dim / 2");
    }
  }
  if (!ctx.top_partial && family == "chatglm") {
    // THUDM ChatGLM2/3 modeling code: RotaryEmbedding(kv_channels // 2) on the first half of
    // each head; the config has no key for it.
    ctx.top_partial = 0.5;
    out.notes.push_back("chatglm: RoPE on the first half of each head (partial_rotary_factor "
                        "0.5, from ChatGLM's modeling code; not a config key)");
  }
  if (out.qk_nope_head_dim > 0 || HfConfigReader::find(c, "qk_rope_head_dim")) {
    ctx.top_rotary_dim = head_dim;
  } else if (auto rd = r.integer(c, "rotary_dim", path("rotary_dim"))) {
    if (*rd <= 0 || *rd > head_dim || *rd % 2 != 0) {
      r.fail(path("rotary_dim"), "= ", *rd, " must be even and in [2, head_dim = ", head_dim, "]");
    }
    ctx.top_rotary_dim = *rd;
  }

  // ---- layout ----------------------------------------------------------------------------
  if (options.layout) {
    ctx.layout = *options.layout;
    out.layout_reason = "caller override";
  } else if (auto il = r.boolean(c, "rope_interleave", path("rope_interleave"))) {
    ctx.layout = *il ? RopeLayout::kInterleaved : RopeLayout::kHalfSplit;
    out.layout_reason = std::string("config key rope_interleave = ") + (*il ? "true" : "false");
  } else {
    bool inter = !out.model_type.empty() && detail::hf_family_is_interleaved(out.model_type, false);
    std::string by = "model_type \"" + out.model_type + "\"";
    if (out.model_type.empty()) {
      for (const auto& a : out.architectures) {
        if (detail::hf_family_is_interleaved(a, true)) {
          inter = true;
          by = "architecture \"" + a + "\"";
          break;
        }
      }
      if (!inter) by = "no model_type";
    }
    ctx.layout = inter ? RopeLayout::kInterleaved : RopeLayout::kHalfSplit;
    out.layout_reason = by + (inter ? ": interleaved family (rotate_every_two / interleave)"
                                    : ": HF rotate_half (half-split) default");
  }

  // ---- layer types -----------------------------------------------------------------------
  if (const json* lt = HfConfigReader::find(c, "layer_types")) {
    if (!lt->is_array()) r.fail(path("layer_types"), "must be a list of strings");
    if (static_cast<std::int64_t>(lt->size()) > detail::kHfMaxLayers) {
      r.fail(path("layer_types"), "has ", lt->size(), " entries, more than ", detail::kHfMaxLayers);
    }
    for (std::size_t i = 0; i < lt->size(); ++i) {
      if (!(*lt)[i].is_string()) r.fail(path("layer_types"), "[", i, "] must be a string");
      out.layer_types.push_back((*lt)[i].get<std::string>());
    }
    if (out.num_hidden_layers > 0 &&
        static_cast<Eigen::Index>(out.layer_types.size()) != out.num_hidden_layers) {
      out.notes.push_back("layer_types has " + std::to_string(out.layer_types.size()) +
                          " entries but num_hidden_layers = " +
                          std::to_string(out.num_hidden_layers));
    }
  }
  if (out.layer_types.empty()) {
    detail::hf_default_layer_types(r, c, prefix, family, out);
  }
  std::optional<double> local_theta;
  std::string local_key;
  // Gemma-3's rope_local_base_freq, ModernBERT's local_rope_theta, MiMo-V2's swa_rope_theta.
  for (std::string_view k : {"rope_local_base_freq", "local_rope_theta", "swa_rope_theta"}) {
    if (auto t = r.number(c, k, path(k))) {
      if (!(*t > 1.0)) r.fail(path(k), "= ", *t, " must be > 1");
      local_theta = *t;
      local_key = std::string(k);
      break;
    }
  }
  if (!local_theta && (family == "gemma3text" || family == "mimov2flash") &&
      !HfConfigReader::find(c, "rope_parameters")) {
    // The classes' sliding-layer base when no rope_parameters dict carries one:
    // Gemma3TextConfig's rope_local_base_freq (every 6th layer full: sliding_window_pattern,
    // _sliding_window_pattern in transformers >= 4.54), MiMoV2FlashConfig's sliding entry.
    local_theta = 10000.0;
    local_key = family == "gemma3text" ? "rope_local_base_freq" : "swa_rope_theta";
    out.notes.push_back(out.model_type + ": " + local_key + " absent, transformers' default " +
                        "10000 on the sliding layers");
  }
  if (out.layer_types.empty() && local_theta) {
    std::string pkey = "sliding_window_pattern";
    auto pat = r.integer(c, pkey, path(pkey));
    if (!pat) {
      pkey = "_sliding_window_pattern";
      pat = r.integer(c, pkey, path(pkey));
    }
    if (!pat && family == "gemma3text") {
      pat = 6;
      out.notes.push_back("gemma3_text: sliding_window_pattern absent, transformers' default 6");
    }
    if (pat) {
      if (*pat <= 0) r.fail(path(pkey), "= ", *pat, " must be > 0");
      // Gemma3Config: layer i is sliding iff (i + 1) % pattern != 0.
      for (Eigen::Index i = 0; i < out.num_hidden_layers; ++i) {
        out.layer_types.push_back((i + 1) % *pat != 0 ? "sliding_attention" : "full_attention");
      }
      out.notes.push_back("layer_types built from sliding_window_pattern = " +
                          std::to_string(*pat) + " (every " + std::to_string(*pat) +
                          "th layer full attention)");
    }
  }
  if (out.layer_types.empty() && family == "modernbert") {
    // ModernBertConfig: layer i is global iff i % global_attn_every_n_layers == 0 (default 3);
    // the local layers rotate with local_rope_theta (default 10000).
    auto every = r.integer(c, "global_attn_every_n_layers", path("global_attn_every_n_layers"));
    if (!every) every = 3;
    if (*every <= 0) {
      r.fail(path("global_attn_every_n_layers"), "= ", *every, " must be > 0");
    }
    for (Eigen::Index i = 0; i < out.num_hidden_layers; ++i) {
      out.layer_types.push_back(i % *every != 0 ? "sliding_attention" : "full_attention");
    }
    out.notes.push_back("modernbert: layer_types from global_attn_every_n_layers = " +
                        std::to_string(*every) + " (layers 0, " + std::to_string(*every) +
                        ", ... global)");
    if (!local_theta) {
      local_theta = 10000.0;
      local_key = "local_rope_theta";
      out.notes.push_back("modernbert: local_rope_theta absent, transformers' default 10000");
    }
  }
  const auto count_type = [&](const std::string& t) {
    return static_cast<Eigen::Index>(std::count(out.layer_types.begin(), out.layer_types.end(), t));
  };
  const bool llama4 = family == "llama4" || family == "llama4text";
  const json* nr = HfConfigReader::find(c, "no_rope_layers");
  if (nr && !nr->is_array()) r.fail(path("no_rope_layers"), "must be a list of 0/1");
  const auto interval = r.integer(c, "no_rope_layer_interval", path("no_rope_layer_interval"));
  if (nr && !nr->empty()) {
    if (static_cast<std::int64_t>(nr->size()) > detail::kHfMaxLayers) {
      r.fail(path("no_rope_layers"), "has ", nr->size(), " entries, more than ",
             detail::kHfMaxLayers);
    }
    // transformers indexes no_rope_layers[layer_idx]: a short list fails there, a long one
    // would count NoPE layers the model does not have.
    if (out.num_hidden_layers > 0 &&
        static_cast<Eigen::Index>(nr->size()) != out.num_hidden_layers) {
      r.fail(path("no_rope_layers"), "has ", nr->size(), " entries; one per layer ",
             "(num_hidden_layers = ", out.num_hidden_layers, ") expected");
    }
    Eigen::Index nope = 0;
    for (std::size_t i = 0; i < nr->size(); ++i) {
      const json& e = (*nr)[i];
      if (!e.is_boolean() && !e.is_number_integer() && !e.is_number_unsigned()) {
        r.fail(path("no_rope_layers"), "[", i, "] must be 0/1 or a bool, got ", e.type_name());
      }
      const bool uses = e.is_boolean() ? e.get<bool>() : e.get<std::int64_t>() != 0;
      out.layer_uses_rope.push_back(uses);
      nope += !uses;
    }
    out.notes.push_back("no_rope_layers: " + std::to_string(nope) + " of " +
                        std::to_string(nr->size()) +
                        " layers apply no RoPE (NoPE; 1 = RoPE, as Llama-4 / SmolLM3 read it)");
  } else if ((family == "cohere2" || family == "afmoe" ||
              (family == "exaone4" && out.sliding_window > 0)) &&
             !out.layer_types.empty()) {
    // Cohere2Attention and Exaone4Attention rotate only on sliding layers (Exaone-4: once the
    // model has a window, "global NoPE"), AfmoeAttention only on its local layers.
    for (const auto& t : out.layer_types) out.layer_uses_rope.push_back(t != "full_attention");
    out.notes.push_back(out.model_type + ": full_attention layers apply no RoPE (NoPE)");
  } else if (const std::string why = detail::hf_nope_model(r, c, prefix, family); !why.empty()) {
    const auto layers = static_cast<std::size_t>(std::max<Eigen::Index>(out.num_hidden_layers, 0));
    out.layer_uses_rope.assign(layers, false);
    out.notes.push_back(out.model_type + ": no attention layer applies RoPE (" + why + ")" +
                        (out.num_hidden_layers > 0 ? "" : "; num_hidden_layers is absent, so "
                                                          "layer_uses_rope is empty"));
  } else if (llama4 || family == "smollm3" || interval) {
    // Llama4TextConfig / SmolLM3Config: no_rope_layers absent or [] (Llama-4 Scout ships [])
    // means every no_rope_layer_interval-th layer is NoPE: uses_rope = (i + 1) % n != 0.
    const std::int64_t every = interval.value_or(4);
    if (every < 1 || every > detail::kHfMaxLayers) {
      r.fail(path("no_rope_layer_interval"), "= ", every, " must be in [1, ",
             detail::kHfMaxLayers, "]");
    }
    if (out.num_hidden_layers > 0) {
      for (Eigen::Index i = 0; i < out.num_hidden_layers; ++i) {
        out.layer_uses_rope.push_back((i + 1) % every != 0);
      }
      out.notes.push_back("no_rope_layers " + std::string(nr ? "[]" : "absent") +
                          ": every " + std::to_string(every) +
                          "th layer applies no RoPE (no_rope_layer_interval, as transformers "
                          "fills it)");
    } else {
      out.notes.push_back("no_rope_layer_interval = " + std::to_string(every) +
                          " not applied: num_hidden_layers is absent");
    }
  }
  detail::hf_read_global_kv_heads(r, c, prefix, out);
  detail::hf_read_kv_sharing(r, c, prefix, out);
  detail::hf_mark_layers_without_attention(out);
  if (llama4) {
    // Llama4TextConfig: layer_types default to chunked attention on the RoPE layers, full
    // attention on the NoPE ones; attention_chunk_size defaults to 8192.
    if (out.layer_types.empty() && !out.layer_uses_rope.empty()) {
      for (const bool rope : out.layer_uses_rope) {
        out.layer_types.push_back(rope ? "chunked_attention" : "full_attention");
      }
      out.notes.push_back("llama4: layer_types chunked_attention on RoPE layers, "
                          "full_attention on NoPE layers (transformers' default)");
    }
    if (out.attention_chunk_size == 0 && !HfConfigReader::find(c, "attention_chunk_size")) {
      out.attention_chunk_size = 8192;
      out.notes.push_back("llama4: attention_chunk_size absent, transformers' default 8192");
    }
  }
  // Llama-4's attention temperature tuning (on by default in Llama4TextConfig; configs write
  // true or a number, read as a flag as transformers does).
  bool tuning = llama4;
  if (const json* at = HfConfigReader::find(c, "attn_temperature_tuning")) {
    if (at->is_boolean()) {
      tuning = at->get<bool>();
    } else if (at->is_number()) {
      tuning = at->get<double>() != 0.0;
    } else {
      r.fail(path("attn_temperature_tuning"), "must be a bool or a number, got ", at->type_name());
    }
  }
  // Grok-2: attn_temperature_len L > 0 scales every layer's logits by log2(pos) / log2(L) past
  // L (SGLang's xai_temperature_len; -1 or absent: none).
  if (auto len = r.integer(c, "attn_temperature_len", path("attn_temperature_len")); len && *len > 0) {
    if (tuning) {
      r.fail(path("attn_temperature_len"), "and attn_temperature_tuning are both set: one ",
             "query temperature per model");
    }
    if (*len < 2) r.fail(path("attn_temperature_len"), "= ", *len, " must be >= 2 (or <= 0: none)");
    AttentionTemperature t;
    t.form = TemperatureForm::kXai;
    t.temperature_len = *len;
    out.attention_temperature = t;
    out.notes.push_back("attention temperature (Grok-2, SGLang xai_temperature_len) on every "
                        "layer: logits times log2(pos) / log2(" + std::to_string(*len) +
                        ") past position " + std::to_string(*len));
  }
  if (tuning) {
    AttentionTemperature t;
    if (auto fs = r.number(c, "floor_scale", path("floor_scale"))) t.floor_scale = *fs;
    if (auto as = r.number(c, "attn_scale", path("attn_scale"))) t.attn_scale = *as;
    if (!(t.floor_scale > 0.0)) r.fail(path("floor_scale"), "= ", t.floor_scale, " must be > 0");
    // A negative slope takes t below 1, then the softmax scale below 0 (attention rejects it).
    if (!(t.attn_scale >= 0.0)) r.fail(path("attn_scale"), "= ", t.attn_scale, " must be >= 0");
    detail::hf_check_temperature(r, t, path("floor_scale") + " and " + path("attn_scale"));
    out.attention_temperature = t;
    std::ostringstream note;
    note << "attention temperature tuning on the NoPE layers' queries: floor_scale "
         << t.floor_scale << ", attn_scale " << t.attn_scale;
    out.notes.push_back(note.str());
  }
  if (family == "llama" && !options.layout) {
    out.notes.push_back("llama: half-split matches HF checkpoints (Q/K permuted at conversion); "
                        "Meta's original or GGUF weights need layout interleaved");
  }

  // ---- scaling dicts ---------------------------------------------------------------------
  const json* dict = nullptr;
  std::string dpath;
  if (const json* rp = HfConfigReader::find(c, "rope_parameters")) {
    dict = rp;
    dpath = path("rope_parameters");
  } else if (const json* rs = HfConfigReader::find(c, "rope_scaling")) {
    dict = rs;
    dpath = path("rope_scaling");
  }
  if (dict && !dict->is_object()) r.fail(dpath, "must be an object, got ", dict->type_name());
  // Grok (xai-org/grok-2) names its RoPE recipe at the top level, beside scaling_factor /
  // original_max_position_embeddings / beta_fast / beta_slow / extrapolation_factor /
  // attn_factor: vLLM's Grok1ScalingRotaryEmbedding, whose "original" is plain RoPE (its mscale
  // is computed but never applied). Its other modes (yarn, yarn_linear, yarn_log, theta_scale)
  // have no released config; refused rather than planned as plain RoPE.
  if (!dict) {
    if (auto top = r.string(c, "rope_type", path("rope_type"))) {
      if (*top != "original" && *top != "default") {
        r.fail(path("rope_type"), "= \"", *top, "\" at the top level (Grok's scaling modes, vLLM ",
               "Grok1ScalingRotaryEmbedding) is not supported: posenc reads \"original\" (plain RoPE)");
      }
      out.notes.push_back(path("rope_type") + " = \"" + *top + "\" at the top level (Grok, vLLM " +
                          "Grok1ScalingRotaryEmbedding): plain RoPE; its scaling_factor, " +
                          "beta_fast / beta_slow, extrapolation_factor and attn_factor are not used");
    }
  }

  // transformers >= 5: a dict keyed by layer type holds one RoPE dict per type.
  bool nested = false;
  if (dict && !dict->empty() && !out.layer_types.empty()) {
    nested = true;
    for (auto it = dict->begin(); it != dict->end(); ++it) {
      if (std::find(out.layer_types.begin(), out.layer_types.end(), it.key()) ==
          out.layer_types.end()) {
        nested = false;
      }
    }
  }
  if (dict && !dict->empty() && out.layer_types.empty()) {
    // No layer_types, but every entry is a dict named "<something>_attention": still per type.
    bool all = true;
    for (auto it = dict->begin(); it != dict->end(); ++it) {
      const std::string& k = it.key();
      const std::string_view suffix = "attention";
      if (!it->is_object() || k.size() < suffix.size() ||
          k.compare(k.size() - suffix.size(), suffix.size(), suffix) != 0) {
        all = false;
      }
    }
    if (all) {
      nested = true;
      out.notes.push_back(dpath + " is keyed by layer type but the config has no layer_types");
    }
  }
  // Gemma-4: full-attention layers have heads of global_head_dim (HF Gemma4 passes
  // head_dim_key = "global_head_dim" to their rotary embedding).
  std::optional<std::int64_t> global_head_dim = r.integer(c, "global_head_dim",
                                                          path("global_head_dim"));
  if (global_head_dim && (*global_head_dim <= 0 || *global_head_dim > detail::kHfMaxDim)) {
    r.fail(path("global_head_dim"), "= ", *global_head_dim, " must be in [1, ",
           detail::kHfMaxDim, "]");
  }
  bool used_global_head_dim = false;
  if (nested) {
    for (auto it = dict->begin(); it != dict->end(); ++it) {
      const std::string sub = dpath + "." + it.key();
      HfLayerRope lr;
      lr.layer_type = it.key();
      detail::HfRopeContext layer_ctx = ctx;
      if (global_head_dim && *global_head_dim != ctx.head_dim &&
          lr.layer_type == "full_attention" && ctx.top_rotary_dim == 0) {
        layer_ctx.head_dim = *global_head_dim;
        out.notes.push_back(sub + ": heads of global_head_dim = " +
                            std::to_string(*global_head_dim) + " (head_dim = " +
                            std::to_string(ctx.head_dim) + " is the other layers')");
        used_global_head_dim = true;
      }
      lr.params =
          detail::hf_rope_params(r, it->is_null() ? nullptr : &*it, sub, layer_ctx, out.notes);
      detail::hf_check_rope(r, lr.params, sub);
      lr.num_layers = count_type(lr.layer_type);
      out.layer_ropes.push_back(std::move(lr));
    }
  } else {
    RopeParams main = detail::hf_rope_params(r, dict, dpath, ctx, out.notes);
    detail::hf_check_rope(r, main, dpath.empty() ? path("rope_theta") : dpath);
    // OLMo 3 scales RoPE on its full-attention layers only, its sliding layers rotate with
    // plain RoPE at the same base: OLMo-core PR #366, the Olmo 3 report's ablation, vLLM's
    // olmo3 (a PR to scale every layer measured MMLU 64.2 -> 60.5, vLLM #43419). transformers
    // 5.x passes one scaled rotation to every layer (fixed in PR #45945).
    const bool olmo3_split = family == "olmo3" && main.scaling.type != RopeScalingType::kDefault;
    if ((local_theta || olmo3_split) && !out.layer_types.empty()) {
      // Gemma-3 / MiMo-V2: sliding layers use plain RoPE with the local base, full layers the
      // main one (HF Gemma3TextModel.rotary_emb_local: rope_type "default", base
      // rope_local_base_freq; MiMo-V2 swa_rope_theta, the converter's rope_scaling on full
      // layers only).
      RopeParams local = main;
      if (local_theta) local.theta = *local_theta;
      local.scaling = RopeScaling{};
      detail::hf_check_rope(r, local, local_theta ? path(local_key) : dpath);
      out.layer_ropes.push_back({"full_attention", main, count_type("full_attention")});
      out.layer_ropes.push_back({"sliding_attention", local, count_type("sliding_attention")});
      out.notes.push_back("sliding_attention layers: default RoPE with theta = " +
                          (local_theta ? local_key : std::string("the main theta (olmo3)")) +
                          "; full_attention layers: the main theta and " +
                          (dpath.empty() ? std::string("no scaling") : dpath));
    } else {
      if (local_theta) {
        out.notes.push_back(local_key + " given but no layer types: ignored");
      }
      out.layer_ropes.push_back({"all", main, out.num_hidden_layers});
    }
  }
  if (global_head_dim && *global_head_dim != ctx.head_dim && !used_global_head_dim) {
    out.notes.push_back(path("global_head_dim") + " = " + std::to_string(*global_head_dim) +
                        " not used: it applies to a full_attention entry of a rope_parameters "
                        "dict keyed by layer type without an absolute rotary_dim");
  }
  out.rope = out.layer_ropes.front().params;
  for (const auto& lr : out.layer_ropes) {
    if (lr.layer_type == "full_attention") out.rope = lr.params;
  }
  if (dict && !nested) detail::hf_read_mistral_temperature(r, *dict, dpath, out);
  // M-RoPE sections of the main RoPE (a flat rope_scaling / rope_parameters dict). ERNIE-4.5-VL
  // lists them as [h, w, t] and alternates h / w pairs; before transformers 5 its config gave
  // only freq_allocation (the t pairs), the rest split evenly between h and w.
  const bool ernie_vl = detail::hf_family_is_ernie_vl(out.model_type) ||
                        std::any_of(out.architectures.begin(), out.architectures.end(),
                                    [](const std::string& a) { return detail::hf_family_is_ernie_vl(a); });
  const Eigen::Index mrope_half = resolved_rotary_dim(out.rope) / 2;
  std::optional<MRopeSections> sections;
  std::string skey = dpath + ".mrope_section";
  if (dict && !nested) {
    // HunYuan-VL's xdrope_section: transformers renames it to mrope_section and refuses a
    // config giving both with different values.
    auto sec = r.number_list(*dict, "mrope_section", skey);
    const std::string xkey = dpath + ".xdrope_section";
    if (auto xd = r.number_list(*dict, "xdrope_section", xkey)) {
      if (sec && *sec != *xd) {
        r.fail(xkey, "differs from ", skey, " (transformers refuses both with different values)");
      }
      if (!sec) {
        sec = xd;
        skey = xkey;
      }
    }
    if (sec) {
      const bool four = sec->size() == 4 && !ernie_vl;
      if (sec->size() != 3 && !four) {
        r.fail(skey, "has ", sec->size(), " entries; it must have 3 (",
               ernie_vl ? "h, w, t" : "t, h, w", ernie_vl ? ")" : ") or 4 (XD-RoPE: p, w, h, i)");
      }
      MRopeSections m;
      for (std::size_t i = 0; i < sec->size(); ++i) {
        const double v = (*sec)[i];
        if (!(v >= 0.0 && v <= 1e6 && v == std::floor(v))) {
          r.fail(skey, "[", i, "] = ", v, " must be a whole number of pairs >= 0");
        }
        m.section[ernie_vl ? (i + 1) % 3 : i] = static_cast<Eigen::Index>(v);
      }
      const std::string ikey = dpath + ".mrope_interleaved";
      if (auto il = r.boolean(*dict, "mrope_interleaved", ikey); il && *il) {
        m.layout = MRopeSectionLayout::kInterleaved;
      }
      if (ernie_vl) m.layout = MRopeSectionLayout::kAlternatingHw;
      if (four) {
        out.notes.push_back(skey + ": four XD-RoPE streams (HunYuan-VL: p, w, h, i), positions "
                            "[4, batch, seq] from xdrope_position_ids");
      }
      sections = m;
    }
  }
  if (ernie_vl && !sections) {
    MRopeSections m;
    m.layout = MRopeSectionLayout::kAlternatingHw;
    if (auto fa = r.integer(c, "freq_allocation", path("freq_allocation"))) {
      skey = path("freq_allocation");
      if (*fa < 0 || *fa > mrope_half || (mrope_half - *fa) % 2 != 0) {
        r.fail(skey, "= ", *fa, " must be in [0, rotary_dim / 2 = ", mrope_half,
               "] and leave an even number of pairs for h and w");
      }
      m.section = {*fa, (mrope_half - *fa) / 2, (mrope_half - *fa) / 2};
      out.notes.push_back("ERNIE-4.5-VL: freq_allocation = " + std::to_string(*fa) +
                          " t pairs, the other pairs alternate h / w");
    } else {
      m.section = {20, 22, 22};
      out.notes.push_back("ERNIE-4.5-VL: no mrope_section, transformers' default [h, w, t] = "
                          "[22, 22, 20]");
    }
    sections = m;
  }
  if (sections) {
    try {
      detail::validate_mrope_sections("load_hf_config", *sections, resolved_rotary_dim(out.rope));
    } catch (const std::invalid_argument& e) {
      r.fail(skey, "does not fit the RoPE: ", e.what());
    }
    out.mrope = sections;
  }
  // The main plan's RoPE lengths win over the top-level ones for reporting L0.
  if (out.rope.scaling.original_max_position_embeddings > 0) {
    out.original_max_position_embeddings = out.rope.scaling.original_max_position_embeddings;
  }

  const RopeFrequencies f = compute_rope_frequencies(out.rope, 0);
  const double base = detail::hf_family_softmax_scale(
      r, c, prefix, out, 1.0 / std::sqrt(static_cast<double>(out.attention_head_dim)));
  out.softmax_scale = base * f.softmax_scale_multiplier;
  return out;
}

/// \brief Parses config.json text. `source` names it in error messages (a path, or a label).
/// Throws std::invalid_argument for malformed JSON (with nlohmann's position) and everything
/// hf_config_from_json rejects.
inline HfModelConfig parse_hf_config(std::string_view text, std::string source = "<string>",
                                     const HfConfigOptions& options = {}) {
  if (!detail::hf_nesting_within(text, detail::kHfMaxDepth)) {
    detail::throw_invalid_argument("load_hf_config", source, ": JSON nested deeper than ",
                                   detail::kHfMaxDepth, " levels");
  }
  nlohmann::json root;
  try {
    root = nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::exception& e) {
    detail::throw_invalid_argument("load_hf_config", source, ": malformed JSON: ", e.what());
  }
  return hf_config_from_json(root, std::move(source), options);
}


/// \brief Reads and parses a config.json file.
/// Throws std::invalid_argument naming the file when it cannot be read or is rejected.
inline HfModelConfig load_hf_config(const std::string& path, const HfConfigOptions& options = {}) {
  std::ifstream in(path, std::ios::binary);
  if (!in) detail::throw_invalid_argument("load_hf_config", path, ": cannot open the file");
  std::ostringstream buf;
  buf << in.rdbuf();
  if (in.bad()) detail::throw_invalid_argument("load_hf_config", path, ": read error");
  return parse_hf_config(buf.str(), path, options);
}

}  // namespace posenc
