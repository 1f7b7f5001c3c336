#pragma once
/// \file posenc/gguf_config.hpp
/// A GGUF model file (llama.cpp) -> the positional-encoding parameters posenc needs, in the
/// same HfModelConfig as a Hugging Face config.json (model_config.hpp): RopeParams per layer
/// type, ALiBi slopes, T5 buckets or an absolute table, plus the geometry, windows and softmax
/// scale. The semantics are llama.cpp's (src/llama-model.cpp load_hparams, llama-context.cpp,
/// ggml's rope), and where the file carries a Hugging Face value that llama.cpp drops, the
/// value is kept and the difference is noted.
///
/// Keys read, `A` = general.architecture (required):
///
///   geometry  A.context_length, A.embedding_length, A.block_count (all required);
///             A.attention.head_count (+ _kv; a u32 or one per layer: the lists per layer,
///             0 = no attention there, the model's counts the first attention layer's),
///             A.attention.shared_kv_layers (gemma3n / gemma4: layer_kv_source),
///             A.attention.key_length / value_length (default embedding_length / head_count),
///             A.rope.dimension_count (default key_length) = rotary_dim; sliding layers
///             A.attention.key_length_swa / A.rope.dimension_count_swa (default the same).
///   theta     A.rope.freq_base (default 10000); A.rope.freq_base_swa on sliding layers.
///   scaling   A.rope.scaling.type: "none", "linear" (the default), "yarn", "longrope";
///             A.rope.scaling.factor (the legacy A.rope.scale_linear only if it is absent; 0 = 1);
///             A.rope.scaling.original_context_length (default context_length) = L0;
///             yarn: A.rope.scaling.yarn_beta_fast / _slow / _ext_factor / _attn_factor (HF's
///             beta_fast, beta_slow, extrapolation_factor, attention_factor: written by the
///             converter, read here; llama.cpp's generic loader ignores them), and
///             A.rope.scaling.yarn_log_multiplier (DeepSeek-2: 0.1 mscale_all_dim, as
///             convert_hf_to_gguf.py writes it; other architectures: mscale_all_dim itself, as
///             llama.cpp reads it); A.rope.scaling.attn_factor multiplies cos / sin for every
///             type (llama.cpp's rope_attn_factor; Phi-3 writes its LongRoPE factor there);
///             A.rope.scaling.alpha (Hunyuan's NTK-alpha, base theta * alpha^(d / (d - 2)):
///             rope_type ntk) on hunyuan-dense / hunyuan_vl, noted and unused elsewhere.
///   tensors   rope_freqs.weight: per-pair frequency factors (RopeScaling::freq_factors; the
///             converter's form of Llama-3.1's rope_scaling), or, when they are 1 on the first
///             n pairs of a whole-head rotation and >= 1e20 on the rest, its form of
///             proportional RoPE (Gemma-4's full layers: rope_type proportional, read as such;
///             gemma4 applies them on its full layers only); rope_factors_long.weight and
///             rope_factors_short.weight: LongRoPE's lists (Phi-3 writes no scaling type).
///   M-RoPE    A.rope.dimension_sections (4 integers): contiguous sections (ggml MROPE) or
///             Qwen3-VL's interleaved ones (IMROPE).
///   windows   A.attention.sliding_window, A.attention.sliding_window_pattern (a period p:
///             layer i slides iff i % p < p - 1, or one bool per layer), else llama.cpp's
///             pattern of the architecture (gemma2 2, gemma3 6, gpt-oss 2, cohere2 4, olmo2
///             4: OLMo-3, whose sliding layers rotate unscaled at the main base); other
///             architectures' windows are not applied, as llama.cpp does not (noted).
///             Llama-4: chunks of 8192 on its RoPE layers, every 4th layer NoPE with the
///             attention temperature, unless A.attention.sliding_window = 0.
///   ALiBi     A.attention.max_alibi_bias > 0 (MPT, JAIS), or 8 where llama.cpp hard-codes it
///             (bloom, refact, jina-bert-v2, 40-layer baichuan): ggml's slopes (alibi.hpp).
///   other     A.attention.causal (false: encoders), A.attention.scale (Granite), gemma's
///             query_pre_attn_scalar rule (gemma3n / gemma4: 1, their q / k are normalised),
///             A.attn_logit_softcapping, A.attention.kv_lora_rank / key_length_mla /
///             value_length_mla (DeepSeek MLA: rope.dimension_count is qk_rope_head_dim),
///             A.attention.indexer.head_count / key_length / top_k (deepseek32's and glm-dsa's
///             sparse-attention indexer), A.attention.relative_buckets_count (T5: kRelativeBias),
///             a position_embd.weight tensor (a learned absolute table: kAbsolute).
///
/// Pair layout: the ggml rope type of the architecture (llama.cpp llama_model_rope_type):
/// NORM -> kInterleaved (llama, deepseek2, granite, ...; GGUF Llama weights are permuted at
/// conversion so that adjacent pairs are right for them), NEOX / MROPE / IMROPE -> kHalfSplit
/// (qwen2, gemma*, phi3, gpt-oss, ...). An architecture missing from the table needs
/// GgufConfigOptions::layout.
///
/// Where llama.cpp differs from transformers and the file cannot say (notes name each case):
/// YaRN's correction range is always floored / ceiled (gpt-oss's truncate = false is lost),
/// LongRoPE picks its list by the configured context, not the sequence length, and llama.cpp
/// plans frequencies in float by repeated multiplication (posenc in double).
///
/// Errors: a missing required key, a wrong type, an unknown rope.scaling.type, factor lists of
/// the wrong length, an architecture without attention heads... throw std::invalid_argument
///   "posenc::load_gguf_config: model.gguf: key \"llama.rope.scaling.type\" = \"su\" is not
///    one of none, linear, yarn, longrope"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "posenc/alibi.hpp"
#include "posenc/error.hpp"
#include "posenc/gguf.hpp"
#include "posenc/model_config.hpp"
#include "posenc/rope_frequencies.hpp"
#include "posenc/rope_params.hpp"

namespace posenc {

/// Caller choices that override what the file implies.
struct GgufConfigOptions {
  /// Pair layout instead of the architecture table (required for an architecture it lacks).
  std::optional<RopeLayout> layout;
};

namespace detail {

/// ggml's rope modes of llama_model_rope_type (llama.h LLAMA_ROPE_TYPE_*).
enum class GgmlRopeType : std::uint8_t {
  kNone = 0,    ///< no RoPE (ALiBi, learned tables, T5, recurrent models)
  kNorm = 1,    ///< adjacent pairs (2j, 2j+1)
  kNeox = 2,    ///< pairs (j, j + n_rot/2)
  kMrope = 3,   ///< NEOX pairs, contiguous M-RoPE sections
  kImrope = 4,  ///< NEOX pairs, Qwen3-VL's interleaved sections
  kUnknown = 5, ///< not in posenc's table
};

inline bool gguf_arch_in(std::string_view arch, std::initializer_list<std::string_view> names) {
  for (std::string_view n : names) {
    if (arch == n) return true;
  }
  return false;
}

/// llama.cpp's llama_model_rope_type by general.architecture (2026 table); glm4, glm4moe and
/// hunyuan_vl switch to MROPE when the file has rope.dimension_sections.
inline GgmlRopeType gguf_rope_type(std::string_view arch, bool has_sections) {
  if (gguf_arch_in(arch, {"glm4"})) return has_sections ? GgmlRopeType::kMrope : GgmlRopeType::kNorm;
  if (gguf_arch_in(arch, {"glm4moe", "hunyuan_vl"})) {
    return has_sections ? GgmlRopeType::kMrope : GgmlRopeType::kNeox;
  }
  if (gguf_arch_in(arch, {"qwen2vl", "paddleocr"})) return GgmlRopeType::kMrope;
  if (gguf_arch_in(arch, {"qwen3vl", "qwen3vlmoe", "qwen35", "qwen35moe"})) {
    return GgmlRopeType::kImrope;
  }
  if (gguf_arch_in(arch, {"llama", "llada", "llama4", "deci", "baichuan", "starcoder", "internlm2",
                          "minicpm", "xverse", "command-r", "cohere2", "cohere2moe", "olmo",
                          "arctic", "deepseek", "deepseek2", "deepseek2-ocr", "deepseek32",
                          "deepseek4", "plm", "chatglm", "granite", "granitemoe",
                          "granitehybrid", "chameleon", "bailingmoe", "neo-bert", "smollm3",
                          "arcee", "ernie4_5", "ernie4_5-moe", "mistral3", "mistral4",
                          "llama-embed", "maincoder", "glm-dsa"})) {
    return GgmlRopeType::kNorm;
  }
  if (gguf_arch_in(arch, {"falcon", "falcon-h1", "grok", "dbrx", "bert", "jina-bert-v3",
                          "modern-bert", "nomic-bert", "nomic-bert-moe", "eurobert", "stablelm",
                          "bitnet", "qwen", "qwen2", "dream", "qwen2moe", "qwen3", "qwen3moe",
                          "llada-moe", "olmo2", "olmoe", "phi2", "phi3", "phimoe", "plamo",
                          "plamo2", "plamo3", "gemma", "gemma2", "gemma3", "gemma3n", "gemma4",
                          "gemma-embedding", "starcoder2", "openelm", "gptneox", "codeshell",
                          "orion", "nemotron", "exaone", "exaone4", "exaone-moe", "minicpm3",
                          "bailingmoe2", "dots1", "hunyuan-moe", "jais2", "gpt-oss",
                          "hunyuan-dense", "lfm2", "lfm2moe", "smallthinker", "seed_oss",
                          "grovemoe", "apertus", "minimax-m2", "cogvlm", "pangu-embedded",
                          "afmoe", "qwen3next", "mimo2", "step35"})) {
    return GgmlRopeType::kNeox;
  }
  if (gguf_arch_in(arch, {"gpt2", "mpt", "refact", "bloom", "jina-bert-v2", "t5", "t5encoder",
                          "jais", "gptj", "mamba", "mamba2", "jamba", "rwkv6", "rwkv6qwen2",
                          "rwkv7", "arwkv7", "nemotron_h", "nemotron_h_moe"})) {
    return GgmlRopeType::kNone;
  }
  return GgmlRopeType::kUnknown;
}

/// Reads the GGUF keys of one architecture; failures name the file and the key.
class GgufKeys {
 public:
  GgufKeys(const GgufMetadata& m, std::string arch) : m_(m), arch_(std::move(arch)) {}

  std::string key(std::string_view k) const { return arch_ + "." + std::string(k); }
  const GgufMetadata& meta() const { return m_; }
  const std::string& arch() const { return arch_; }

  template <typename... Parts>
  [[noreturn]] void fail(std::string_view k, const Parts&... parts) const {
    throw_invalid_argument("load_gguf_config", m_.source, ": key \"", key(k), "\" ", parts...);
  }

  bool has(std::string_view k) const { return m_.find(key(k)) != nullptr; }

  /// A count or length in [lo, hi].
  std::optional<std::int64_t> count(std::string_view k, std::int64_t lo, std::int64_t hi) const {
    const auto v = m_.get_int(key(k));
    if (v && (*v < lo || *v > hi)) fail(k, "= ", *v, " must be in [", lo, ", ", hi, "]");
    return v;
  }
  std::int64_t required_count(std::string_view k, std::int64_t lo, std::int64_t hi) const {
    const auto v = count(k, lo, hi);
    if (!v) fail(k, "is missing (llama.cpp requires it)");
    return *v;
  }
  std::optional<double> number(std::string_view k) const {
    const auto v = m_.get_float(key(k));
    if (v && !std::isfinite(*v)) fail(k, "= ", *v, " must be finite");
    return v;
  }
  /// A u32 or one value per layer (llama.cpp get_key_or_arr), as one value per layer.
  std::optional<std::vector<std::int64_t>> per_layer(std::string_view k,
                                                     std::int64_t layers) const {
    const GgufValue* v = m_.find(key(k));
    if (v == nullptr) return std::nullopt;
    if (v->type != GgufType::kArray) {
      return std::vector<std::int64_t>(static_cast<std::size_t>(layers),
                                       count(k, 0, std::int64_t{1} << 20).value_or(0));
    }
    auto all = *m_.get_int_array(key(k));
    if (static_cast<std::int64_t>(all.size()) != layers) {
      fail(k, "has ", all.size(), " entries; one per layer (block_count = ", layers, ") expected");
    }
    for (std::int64_t x : all) {
      if (x < 0 || x > (std::int64_t{1} << 20)) fail(k, "holds ", x, ", outside [0, 2^20]");
    }
    return all;
  }

 private:
  const GgufMetadata& m_;
  std::string arch_;
};

/// The configuration keys are scalars or per-layer arrays: longer arrays (the tokenizer's) are
/// skipped, not stored.
inline constexpr GgufReadOptions kGgufConfigRead{std::uint64_t{1} << 16};

inline constexpr std::int64_t kGgufMaxDim = std::int64_t{1} << 16;
inline constexpr std::int64_t kGgufMaxLength = std::int64_t{1} << 40;

/// llama.cpp's fixed sliding-window period of an architecture (set_swa_pattern), 0 = none.
inline std::int64_t gguf_swa_period(std::string_view arch) {
  if (arch == "gemma2" || arch == "gpt-oss") return 2;
  if (arch == "gemma3") return 6;
  // olmo2 (OLMo-3's GGUF arch): period 4 once the file has attention.sliding_window > 0.
  if (arch == "cohere2" || arch == "olmo2") return 4;
  return 0;
}

/// Whether llama.cpp applies the file's attention.sliding_window: the architectures whose
/// pattern it fixes, or any file that gives its own pattern.
inline bool gguf_window_read(const GgufKeys& k) {
  return gguf_swa_period(k.arch()) > 0 || k.has("attention.sliding_window_pattern");
}

/// Which layers slide: llama.cpp's set_swa_pattern(p) (layer i slides iff i % p < p - 1; p = 0:
/// every layer), a per-layer bool array, or the architecture's fixed period (gguf_window_read
/// holds: one of them exists).
inline std::vector<bool> gguf_sliding_layers(const GgufKeys& k, std::int64_t layers,
                                             std::string* how) {
  std::vector<bool> slides(static_cast<std::size_t>(layers), true);
  std::int64_t period = gguf_swa_period(k.arch());
  const GgufValue* v = k.meta().find(k.key("attention.sliding_window_pattern"));
  if (v != nullptr && v->type == GgufType::kArray) {
    const auto flags = *k.meta().get_bool_array(k.key("attention.sliding_window_pattern"));
    if (static_cast<std::int64_t>(flags.size()) != layers) {
      k.fail("attention.sliding_window_pattern", "has ", flags.size(),
             " entries; one per layer (block_count = ", layers, ") expected");
    }
    *how = "attention.sliding_window_pattern (per layer)";
    return flags;
  }
  if (v != nullptr) {
    period = *k.count("attention.sliding_window_pattern", 0, std::int64_t{1} << 20);
    *how = "attention.sliding_window_pattern = " + std::to_string(period);
  } else {
    *how = "llama.cpp's pattern for " + k.arch() + ": period " + std::to_string(period);
  }
  for (std::int64_t i = 0; i < layers; ++i) {
    slides[static_cast<std::size_t>(i)] = period == 0 || i % period < period - 1;
  }
  return slides;
}

/// The factor list of a tensor, as doubles; `pairs` values expected.
template <typename TensorReader>
std::vector<double> gguf_factor_tensor(const GgufMetadata& m, TensorReader& read,
                                       std::string_view name, Eigen::Index pairs) {
  const GgufTensorInfo* t = m.find_tensor(name);
  POSENC_ASSERT(t != nullptr);
  if (t->num_elements() != pairs) {
    throw_invalid_argument("load_gguf_config", m.source, ": tensor \"", name, "\" has ",
                           t->num_elements(), " values; rope.dimension_count / 2 = ", pairs,
                           " expected");
  }
  const std::vector<float> v = read(name);
  return std::vector<double>(v.begin(), v.end());
}

/// The plan of p, or std::invalid_argument naming the file when the parameters it holds are
/// not a valid RoPE.
inline RopeFrequencies gguf_checked_plan(const GgufKeys& k, const RopeParams& p) {
  try {
    return compute_rope_frequencies(p, 0);
  } catch (const std::invalid_argument& e) {
    throw_invalid_argument("load_gguf_config", k.meta().source, ": the RoPE of architecture \"",
                           k.arch(), "\" is not valid: ", e.what());
  }
}

/// The RoPE scaling of the file (see the file comment), with L0 and the rope_attn_factor.
template <typename TensorReader>
void gguf_read_scaling(const GgufKeys& k, TensorReader& read, RopeParams& p,
                       std::int64_t n_ctx_train, HfModelConfig& out) {
  const GgufMetadata& m = k.meta();
  RopeScaling& sc = p.scaling;
  const Eigen::Index pairs = p.rotary_dim / 2;
  const std::string type = m.get_string(k.key("rope.scaling.type")).value_or("linear");
  if (type != "none" && type != "linear" && type != "yarn" && type != "longrope") {
    k.fail("rope.scaling.type", "= \"", type, "\" is not one of none, linear, yarn, longrope");
  }
  // llama.cpp's load_hparams reads the legacy key only when rope.scaling.factor is absent; a
  // present factor of 0 is "no scaling" even beside a legacy factor.
  double factor = 0.0;
  std::string_view factor_key = "rope.scaling.factor";
  if (auto f = k.number(factor_key)) {
    factor = *f;
  } else if (auto legacy = k.number("rope.scale_linear"); legacy && *legacy != 0.0) {
    factor = *legacy;
    factor_key = "rope.scale_linear";
    out.notes.push_back("rope.scale_linear: the legacy key of the linear factor");
  }
  if (factor == 0.0) factor = 1.0;  // llama.cpp: absent or 0 means no scaling
  if (!(factor >= 1.0)) {
    k.fail(factor_key, "= ", factor, " must be >= 1 (llama.cpp runs freq_scale = 1 / factor)");
  }
  const std::int64_t l0 = k.count("rope.scaling.original_context_length", 0, kGgufMaxLength)
                              .value_or(0);
  // Absent: llama.cpp takes context_length, as the planner does for yarn from
  // max_position_embeddings; left 0 so that the length report says it was assumed.
  sc.original_max_position_embeddings = l0;
  out.original_max_position_embeddings = l0;

  const bool has_freqs = m.find_tensor("rope_freqs.weight") != nullptr;
  const bool has_long = m.find_tensor("rope_factors_long.weight") != nullptr;
  const bool has_short = m.find_tensor("rope_factors_short.weight") != nullptr;
  if (has_freqs) {
    sc.freq_factors = gguf_factor_tensor(m, read, "rope_freqs.weight", pairs);
    out.notes.push_back("rope_freqs.weight: per-pair frequency factors (ggml_rope_ext's c; the "
                        "converter's form of Llama-3.1's llama3 rope_scaling)");
  }
  const bool longrope = !has_freqs && (type == "longrope" || has_long || has_short);
  if (type == "none") {
    sc.type = RopeScalingType::kDefault;
    if (factor != 1.0) out.notes.push_back("rope.scaling.type none: the factor is not applied");
  } else if (longrope) {
    if (!has_long || !has_short) {
      throw_invalid_argument("load_gguf_config", m.source,
                             ": LongRoPE needs both tensors rope_factors_long.weight and "
                             "rope_factors_short.weight; the file has ",
                             has_long ? "only the long one" : has_short ? "only the short one"
                                                                        : "neither");
    }
    if (type == "yarn" || factor != 1.0) {
      k.fail("rope.scaling.type", "= \"", type, "\" with factor ", factor,
             " and LongRoPE factor tensors: posenc does not combine them");
    }
    sc.type = RopeScalingType::kLongRope;
    if (l0 == 0) sc.original_max_position_embeddings = n_ctx_train;  // the planner needs it
    sc.long_factor = gguf_factor_tensor(m, read, "rope_factors_long.weight", pairs);
    sc.short_factor = gguf_factor_tensor(m, read, "rope_factors_short.weight", pairs);
    if (sc.original_max_position_embeddings > 0 && n_ctx_train > sc.original_max_position_embeddings) {
      sc.factor = static_cast<double>(n_ctx_train) /
                  static_cast<double>(sc.original_max_position_embeddings);
    }
    out.notes.push_back("longrope: the long factors once the sequence passes L0 (transformers); "
                        "llama.cpp picks the list once, by the configured context");
  } else if (type == "yarn") {
    sc.type = RopeScalingType::kYarn;
    sc.factor = factor;
    sc.truncate = true;  // ggml_rope_yarn_corr_dims always floors / ceils
    if (auto v = k.number("rope.scaling.yarn_beta_fast")) sc.beta_fast = *v;
    if (auto v = k.number("rope.scaling.yarn_beta_slow")) sc.beta_slow = *v;
    if (auto v = k.number("rope.scaling.yarn_ext_factor")) {
      if (*v >= 0.0) sc.extrapolation_factor = *v;  // llama.cpp: negative = auto (1 for yarn)
    }
    if (auto v = k.number("rope.scaling.yarn_attn_factor")) sc.attention_factor = *v;
    if (k.has("rope.scaling.yarn_beta_fast") || k.has("rope.scaling.yarn_beta_slow") ||
        k.has("rope.scaling.yarn_ext_factor") || k.has("rope.scaling.yarn_attn_factor")) {
      out.notes.push_back("yarn: rope.scaling.yarn_beta_fast / yarn_beta_slow / yarn_ext_factor / "
                          "yarn_attn_factor read (transformers' values); llama.cpp's generic "
                          "loader ignores them and runs 32 / 1 / 1 / its own factor");
    }
    if (auto log_mul = k.number("rope.scaling.yarn_log_multiplier"); log_mul && *log_mul != 0.0) {
      if (gguf_arch_in(k.arch(), {"deepseek2", "deepseek32", "glm-dsa"})) {
        // convert_hf_to_gguf.py's DeepseekV2Model (and its V3.2 / GLM-5 subclasses) writes
        // 0.1 mscale_all_dim, which llama.cpp divides back ([TAG_DEEPSEEK2_YARN_LOG_MUL_FIX]),
        // and their graphs use mscale = mscale_all_dim: cos / sin unscaled, softmax times
        // g(s, m_all)^2.
        sc.mscale_all_dim = *log_mul / 0.1;
        sc.mscale = sc.mscale_all_dim;
      } else {
        sc.mscale_all_dim = *log_mul;
        sc.mscale = 1.0;
      }
    }
    if (k.arch() == "gpt-oss") {
      out.notes.push_back("gpt-oss: transformers' config sets truncate = false; a GGUF cannot say "
                          "so and llama.cpp truncates (set scaling.truncate = false for "
                          "transformers' frequencies)");
    }
  } else if (factor != 1.0) {
    sc.type = RopeScalingType::kLinear;
    sc.factor = factor;
  }
  // llama.cpp's rope_attn_factor multiplies cos / sin whatever the type.
  if (auto af = k.number("rope.scaling.attn_factor")) {
    if (!(*af > 0.0)) k.fail("rope.scaling.attn_factor", "= ", *af, " must be > 0");
    const double planned = sc.type == RopeScalingType::kLongRope
                               ? 1.0
                               : gguf_checked_plan(k, p).attention_factor;
    sc.attention_factor = planned * *af;
    if (sc.type == RopeScalingType::kYarn) {
      out.notes.push_back("rope.scaling.attn_factor = " + detail::concat(*af) +
                          " multiplies llama.cpp's own YaRN factor (cos / sin x " +
                          detail::concat(*sc.attention_factor) + "); transformers' " +
                          "attention_factor, which the converter writes here for OLMo-3, " +
                          "replaces it instead");
    }
  } else if (sc.type == RopeScalingType::kLongRope) {
    sc.attention_factor = 1.0;
    out.notes.push_back("longrope without rope.scaling.attn_factor: cos / sin unscaled, as "
                        "llama.cpp runs it");
  }
}

/// DeepSeek sparse attention's lightning indexer (attention.indexer.head_count / key_length /
/// top_k, required by llama.cpp on deepseek32 and glm-dsa): its heads rotate their first n_rot
/// dims ([rope | nope]) with the main plan's frequencies, in a layout llama.cpp's graph fixes
/// per architecture — NEOX on deepseek32 (DeepSeek-V3.2, transformers' indexer_rope_interleave
/// false), NORM on glm-dsa (GLM-5, true); the converter writes neither and permutes nothing.
inline void gguf_read_indexer(const GgufKeys& k, std::int64_t n_rot, HfModelConfig& out) {
  const bool known = gguf_arch_in(k.arch(), {"deepseek32", "glm-dsa"});
  if (!k.has("attention.indexer.key_length")) {
    if (known) k.fail("attention.indexer.key_length", "is missing (llama.cpp requires it)");
    return;
  }
  if (!known) {
    out.notes.push_back("attention.indexer.*: the sparse-attention indexer of " + k.arch() +
                        " is not read (its RoPE layout is not in posenc's table)");
    return;
  }
  out.index_head_dim = k.required_count("attention.indexer.key_length", n_rot, kGgufMaxDim);
  out.index_n_heads = k.required_count("attention.indexer.head_count", 1, kGgufMaxDim);
  out.index_topk = k.required_count("attention.indexer.top_k", 1, kGgufMaxLength);
  const bool interleaved = k.arch() == "glm-dsa";
  out.indexer_layout = interleaved ? RopeLayout::kInterleaved : RopeLayout::kHalfSplit;
  out.notes.push_back("sparse-attention indexer: heads of " + std::to_string(out.index_head_dim) +
                      " rotate their first " + std::to_string(n_rot) + " dims [rope | nope], " +
                      (interleaved ? "interleaved (ggml NORM" : "half-split (ggml NEOX") +
                      ", as llama.cpp's " + k.arch() + " graph; hf_mla_rope_params(c, "
                      "HfMlaHead::kIndexer))");
}

/// Factors at or above this turn a pair by less than 2^53 / 1e20 ~ 1e-4 rad of theta_j over any
/// position the kernels accept: ggml's way of holding a pair still.
inline constexpr double kGgufStillFactor = 1e20;

/// convert_hf_to_gguf.py writes Gemma-4's proportional RoPE (transformers' rope_type
/// "proportional": exponent over the whole head, pairs j >= n held still) as rope_freqs factors
/// 1 on j < n and 1e30 on the rest, since ggml's NEOX rope pairs (j, j + n_rot / 2) and the
/// head cannot be rearranged. ggml then turns the still pairs by p theta_j / 1e30: cos 1 and
/// sin < 1e-14 at every position below 2^53. Read back as the recipe it encodes (the same
/// RopeParams as the config.json), so that plans, kernels and diagnostics see still pairs
/// as still, not as a 1e30-fold interpolation.
inline void gguf_read_proportional(RopeParams& p, HfModelConfig& out) {
  RopeScaling& sc = p.scaling;
  if (sc.freq_factors.empty() || sc.type != RopeScalingType::kDefault ||
      p.rotary_dim != p.head_dim || p.rotary_offset != 0) {
    return;
  }
  const std::vector<double>& f = sc.freq_factors;
  const auto n = static_cast<std::size_t>(
      std::find_if(f.begin(), f.end(), [](double x) { return x != 1.0; }) - f.begin());
  if (n == 0 || n == f.size() ||
      !std::all_of(f.begin() + static_cast<std::ptrdiff_t>(n), f.end(),
                   [](double x) { return x >= kGgufStillFactor; })) {
    return;
  }
  // HF turns floor(f head_dim / 2) pairs: 2 n / head_dim, nudged up where it rounds below n.
  const double share = 2.0 * static_cast<double>(n) / static_cast<double>(p.head_dim);
  p.partial_rotary_factor = share;
  if (rope_proportional_pairs(p, p.head_dim) < static_cast<Eigen::Index>(n)) {
    p.partial_rotary_factor = std::nextafter(share, 2.0);
  }
  const std::size_t still = f.size() - n;
  sc = RopeScaling{};
  sc.type = RopeScalingType::kProportional;
  out.notes.push_back("rope_freqs.weight: factors 1 on pairs [0, " + std::to_string(n) +
                      ") and >= 1e20 on the " + std::to_string(still) +
                      " others: the converter's form of proportional RoPE (Gemma-4), read as "
                      "rope_type proportional with partial_rotary_factor " +
                      std::to_string(n) + " / " + std::to_string(p.head_dim / 2));
}

template <typename TensorReader>
HfModelConfig gguf_config_from_metadata(const GgufMetadata& m, TensorReader& read,
                                        const GgufConfigOptions& options) {
  constexpr std::string_view fn = "load_gguf_config";
  HfModelConfig out;
  out.source = m.source;
  const auto arch_v = m.get_string("general.architecture");
  if (!arch_v || arch_v->empty()) {
    throw_invalid_argument(fn, m.source, ": key \"general.architecture\" is missing");
  }
  const GgufKeys k(m, *arch_v);
  const std::string& arch = k.arch();
  out.model_type = arch;

  const std::int64_t n_ctx_train = k.required_count("context_length", 1, kGgufMaxLength);
  const std::int64_t n_embd = k.required_count("embedding_length", 1, kGgufMaxDim);
  const std::int64_t n_layer = k.required_count("block_count", 1, std::int64_t{1} << 16);
  out.max_position_embeddings = n_ctx_train;
  out.hidden_size = n_embd;
  out.num_hidden_layers = n_layer;
  // Head counts, one per layer: a layer with 0 heads (or 0 kv heads) has no attention: LFM2's
  // convolution layers and Granite-4.0-H's Mamba layers (the converters write head_count_kv 0
  // there), OpenELM's counts grow with depth. The model's counts are the first attention
  // layer's.
  const auto layer_count = static_cast<std::size_t>(n_layer);
  const auto heads = k.per_layer("attention.head_count", n_layer);
  if (!heads) {
    k.fail("attention.head_count", "is missing: posenc reads positions of attention layers");
  }
  const std::vector<std::int64_t> kv_heads =
      k.per_layer("attention.head_count_kv", n_layer).value_or(*heads);
  std::int64_t first = -1, without = 0;
  for (std::size_t i = 0; i < layer_count; ++i) {
    const std::int64_t q = (*heads)[i], kv = kv_heads[i];
    if (q == 0 || kv == 0) {
      ++without;
      continue;
    }
    if (q % kv != 0) {
      k.fail("attention.head_count_kv", "= ", kv, " on layer ", i, " must divide head_count = ", q);
    }
    if (first < 0) first = static_cast<std::int64_t>(i);
  }
  if (first < 0) k.fail("attention.head_count", "gives no layer attention heads");
  const std::int64_t n_head = (*heads)[static_cast<std::size_t>(first)];
  const std::int64_t n_head_kv = kv_heads[static_cast<std::size_t>(first)];
  const bool counts_vary =
      without > 0 ||
      std::any_of(heads->begin(), heads->end(), [&](std::int64_t q) { return q != n_head; }) ||
      std::any_of(kv_heads.begin(), kv_heads.end(),
                  [&](std::int64_t kv) { return kv != n_head_kv; });
  if (counts_vary) {
    for (std::size_t i = 0; i < layer_count; ++i) {
      const bool attends = (*heads)[i] > 0 && kv_heads[i] > 0;
      out.layer_num_attention_heads.push_back(attends ? (*heads)[i] : 0);
      out.layer_num_key_value_heads.push_back(attends ? kv_heads[i] : 0);
    }
    out.notes.push_back("head counts differ by layer" +
                        (without > 0 ? "; " + std::to_string(without) + " layers without attention"
                                     : std::string()) +
                        " (hf_layer_heads)");
  }
  out.num_attention_heads = n_head;
  out.num_key_value_heads = n_head_kv;
  const std::int64_t key_length =
      k.count("attention.key_length", 1, kGgufMaxDim).value_or(n_embd / n_head);
  const std::int64_t value_length =
      k.count("attention.value_length", 1, kGgufMaxDim).value_or(n_embd / n_head);
  if (key_length <= 0) k.fail("attention.key_length", "= 0 (embedding_length / head_count)");
  out.attention_head_dim = key_length;
  out.mask = m.get_bool(k.key("attention.causal")).value_or(true) ? MaskMode::kCausal
                                                                 : MaskMode::kBidirectional;
  out.attn_logit_softcapping = k.number("attn_logit_softcapping").value_or(0.0);
  if (out.attn_logit_softcapping < 0.0) {
    k.fail("attn_logit_softcapping", "= ", out.attn_logit_softcapping, " must be >= 0");
  }

  // DeepSeek MLA: key_length_mla / value_length_mla (files converted for absorbed attention,
  // whose key_length is the latent row), else key_length / value_length.
  const std::int64_t kv_lora_rank = k.count("attention.kv_lora_rank", 0, kGgufMaxDim).value_or(0);
  const auto key_mla = k.count("attention.key_length_mla", 1, kGgufMaxDim);
  const auto value_mla = k.count("attention.value_length_mla", 1, kGgufMaxDim);

  const bool has_sections = k.has("rope.dimension_sections");
  const GgmlRopeType rope_type = gguf_rope_type(arch, has_sections);
  const bool learned_table = m.find_tensor("position_embd.weight") != nullptr;
  double alibi_bias = k.number("attention.max_alibi_bias").value_or(0.0);
  if (alibi_bias < 0.0) k.fail("attention.max_alibi_bias", "= ", alibi_bias, " must be >= 0");
  if (alibi_bias == 0.0 && (gguf_arch_in(arch, {"bloom", "refact", "jina-bert-v2"}) ||
                            (arch == "baichuan" && n_layer == 40))) {
    alibi_bias = 8.0;  // llama.cpp hard-codes these
    out.notes.push_back("ALiBi max_bias 8: llama.cpp's fixed value for " + arch);
  }

  if (learned_table) {
    out.scheme = HfPositionScheme::kAbsolute;
    out.absolute = HfAbsolutePositions{};  // kLearned
    out.notes.push_back("position_embd.weight: a learned absolute table of " +
                        std::to_string(m.find_tensor("position_embd.weight")->shape.back()) +
                        " rows (learned.hpp)");
  } else if (alibi_bias > 0.0) {
    out.scheme = HfPositionScheme::kAlibi;
    out.alibi_max_bias = alibi_bias;
    out.alibi_slopes = alibi_slopes(n_head, alibi_bias);
  } else if (auto buckets = k.count("attention.relative_buckets_count", 4, std::int64_t{1} << 20)) {
    out.scheme = HfPositionScheme::kRelativeBias;
    out.relative_attention_num_buckets = *buckets;
    out.relative_attention_max_distance = 128;
    out.softmax_scale = 1.0;
    if (arch == "t5encoder") out.mask = MaskMode::kBidirectional;
    out.notes.push_back("relative attention bias (T5 buckets): max_distance 128, llama.cpp's "
                        "fixed value; softmax scale 1");
  } else if (rope_type == GgmlRopeType::kNone) {
    throw_invalid_argument(fn, m.source, ": architecture \"", arch,
                           "\" applies no RoPE in llama.cpp, and the file has no ALiBi bias, T5 "
                           "buckets or position_embd table posenc could read");
  }
  if (out.scheme != HfPositionScheme::kRope) {
    if (out.softmax_scale == 0.0) out.softmax_scale = 1.0 / std::sqrt(static_cast<double>(key_length));
    return out;
  }

  // --- RoPE ----------------------------------------------------------------------------------
  if (arch == "gemma4") {
    // Its two layer types differ in head width and RoPE, so the file must say which is which
    // (llama.cpp: n_swa and the per-layer pattern are required).
    k.required_count("attention.sliding_window", 1, kGgufMaxLength);
    const GgufValue* pattern = m.find(k.key("attention.sliding_window_pattern"));
    if (pattern == nullptr || pattern->type != GgufType::kArray) {
      k.fail("attention.sliding_window_pattern",
             pattern == nullptr ? "is missing" : "is a scalar",
             ": gemma4 needs one bool per layer (convert_hf_to_gguf.py writes its layer_types)");
    }
  }
  if (rope_type == GgmlRopeType::kUnknown && !options.layout) {
    throw_invalid_argument(fn, m.source, ": architecture \"", arch,
                           "\" is not in posenc's table of ggml rope types; pass "
                           "GgufConfigOptions::layout (kInterleaved for ggml NORM, kHalfSplit "
                           "for NEOX)");
  }
  RopeParams p;
  const std::int64_t rope_head = kv_lora_rank > 0 ? key_mla.value_or(key_length) : key_length;
  const std::int64_t n_rot = k.count("rope.dimension_count", 2, kGgufMaxDim).value_or(rope_head);
  if (n_rot % 2 != 0 || n_rot > rope_head) {
    k.fail("rope.dimension_count", "= ", n_rot, " must be even and <= the head (", rope_head, ")");
  }
  if (kv_lora_rank > 0) {
    // As hf_config reads DeepSeek: the plan is for the rotated part alone (q_pe / k_pe);
    // hf_mla_rope_params widens it to the concatenated or the latent head.
    out.attention_head_dim = rope_head;
    out.qk_nope_head_dim = rope_head - n_rot;
    out.v_head_dim = value_mla.value_or(value_length);
    out.kv_lora_rank = kv_lora_rank;
    p.head_dim = n_rot;
  } else {
    p.head_dim = key_length;
  }
  p.rotary_dim = n_rot;
  gguf_read_indexer(k, n_rot, out);
  p.theta = k.number("rope.freq_base").value_or(10000.0);
  if (!(p.theta > 1.0)) k.fail("rope.freq_base", "= ", p.theta, " must be > 1");
  p.max_position_embeddings = n_ctx_train;
  if (options.layout) {
    p.layout = *options.layout;
    out.layout_reason = "caller override";
  } else {
    p.layout = rope_type == GgmlRopeType::kNorm ? RopeLayout::kInterleaved : RopeLayout::kHalfSplit;
    out.layout_reason = std::string("ggml rope type of ") + arch + ": " +
                        (rope_type == GgmlRopeType::kNorm    ? "NORM"
                         : rope_type == GgmlRopeType::kNeox  ? "NEOX"
                         : rope_type == GgmlRopeType::kMrope ? "MROPE"
                                                             : "IMROPE");
  }
  const bool mrope = rope_type == GgmlRopeType::kMrope || rope_type == GgmlRopeType::kImrope;
  if (has_sections && !mrope) {
    // llama.cpp reads the sections for its M-RoPE rope types only.
    out.notes.push_back(std::string("rope.dimension_sections: not read (the ggml rope type of ") +
                        arch + " is not M-RoPE, as in llama.cpp)");
  }
  if (has_sections && mrope) {
    const auto s = m.get_int_array(k.key("rope.dimension_sections"));
    if (!s || s->size() != 4) k.fail("rope.dimension_sections", "must hold 4 integers");
    MRopeSections sec;
    for (std::size_t i = 0; i < 4; ++i) {
      // Bounded before the sum below: INT64_MAX entries wrapped it back to n_rot / 2.
      if ((*s)[i] < 0 || (*s)[i] > n_rot / 2) {
        k.fail("rope.dimension_sections", "[", i, "] = ", (*s)[i], " must be in [0, ",
               "rope.dimension_count / 2 = ", n_rot / 2, "]");
      }
      sec.section[i] = (*s)[i];
    }
    sec.layout = rope_type == GgmlRopeType::kImrope ? MRopeSectionLayout::kInterleaved
                                                    : MRopeSectionLayout::kContiguous;
    const Eigen::Index sum = sec.section[0] + sec.section[1] + sec.section[2] + sec.section[3];
    if (sum != n_rot / 2) {
      k.fail("rope.dimension_sections", "sums to ", sum, "; rope.dimension_count / 2 = ", n_rot / 2,
             " expected");
    }
    out.mrope = sec;
  }
  gguf_read_scaling(k, read, p, n_ctx_train, out);
  // Hunyuan's NTK-alpha: llama.cpp's generic loader reads rope.scaling.alpha for every
  // architecture, and hunyuan_vl's load_arch_hparams (which hunyuan-dense reuses) alone applies
  // it, as base theta * alpha^(d / (d - 2)) over the whole head: static NTK with factor alpha,
  // as load_hf_config reads transformers' "dynamic" + alpha.
  if (const double alpha = k.number("rope.scaling.alpha").value_or(0.0); alpha > 0.0) {
    const std::string what = "rope.scaling.alpha = " + detail::concat(alpha);
    if (!gguf_arch_in(arch, {"hunyuan_vl", "hunyuan-dense"})) {
      out.notes.push_back(what + ": not applied (llama.cpp applies it on hunyuan_vl and "
                          "hunyuan-dense only)");
    } else {
      if (p.scaling.type != RopeScalingType::kDefault || !p.scaling.freq_factors.empty()) {
        k.fail("rope.scaling.alpha", "= ", alpha, " with rope.scaling.type ",
               to_string(p.scaling.type), " or rope_freqs: posenc does not combine them");
      }
      if (n_rot != key_length) {
        k.fail("rope.scaling.alpha", "= ", alpha, " on a partial rotation (rope.dimension_count ",
               n_rot, " of ", key_length, "): llama.cpp's exponent runs over the head, "
               "posenc's over the rotated dims");
      }
      if (!(alpha >= 1.0)) k.fail("rope.scaling.alpha", "= ", alpha, " must be >= 1");
      p.scaling.type = RopeScalingType::kNtk;
      p.scaling.factor = alpha;
      out.notes.push_back(what + ": Hunyuan's NTK-alpha, base theta * alpha^(d / (d - 2)) "
                          "(rope_type ntk, factor = alpha)");
    }
  }
  // Gemma-4 hands rope_freqs to its full-attention layers only (llama.cpp's gemma4 graph).
  RopeScaling swa_scaling = p.scaling;
  if (arch == "gemma4") swa_scaling.freq_factors.clear();
  gguf_read_proportional(p, out);
  const RopeFrequencies planned = gguf_checked_plan(k, p);
  out.rope = p;

  // Softmax scale: Granite's attention.scale, Gemma's query_pre_attn_scalar rule, else
  // 1 / sqrt(key width) times the plan's multiplier (DeepSeek YaRN).
  if (auto s = k.number("attention.scale"); s && *s != 0.0) {
    // hf_attention_params reads a scale > 0 only: a negative one would fall back silently.
    if (!(*s > 0.0)) k.fail("attention.scale", "= ", *s, " must be > 0 (0 = the default)");
    out.softmax_scale = *s;
  } else if ((arch == "gemma2" && n_layer == 46) || (arch == "gemma3" && n_layer == 62)) {
    out.softmax_scale = 1.0 / std::sqrt(static_cast<double>(n_embd / n_head));
    out.notes.push_back("softmax scale 1 / sqrt(embedding_length / head_count): the 27B model's "
                        "query_pre_attn_scalar (llama.cpp)");
  } else if (arch == "gemma3n" || arch == "gemma4") {
    out.softmax_scale = 1.0;  // q / k RMS-normed, unscaled (llama.cpp f_attention_scale = 1)
  } else {
    out.softmax_scale = planned.softmax_scale_multiplier /
                        std::sqrt(static_cast<double>(out.attention_head_dim));
  }

  // --- layers: sliding windows, Llama-4's chunks and NoPE layers ------------------------------
  if (arch == "llama4" || arch == "smollm3") {
    // llama.cpp: every 4th layer applies no RoPE; Llama-4 chunks its RoPE layers by 8192 and
    // tunes the NoPE layers' query temperature, unless attention.sliding_window = 0.
    const auto window = k.count("attention.sliding_window", 0, kGgufMaxLength);
    const bool chunked = arch == "llama4" && !(window && *window == 0);
    out.layer_uses_rope.assign(layer_count, true);
    if (arch == "smollm3" || chunked) {
      for (std::size_t i = 0; i < layer_count; ++i) out.layer_uses_rope[i] = (i + 1) % 4 != 0;
    }
    if (chunked) {
      out.attention_chunk_size = 8192;
      out.layer_types.resize(layer_count);
      for (std::size_t i = 0; i < layer_count; ++i) {
        out.layer_types[i] = out.layer_uses_rope[i] ? "chunked_attention" : "full_attention";
      }
      out.attention_temperature = AttentionTemperature{};  // floor_scale 8192, attn_scale 0.1
      out.notes.push_back("llama4: chunks of 8192 on the RoPE layers, every 4th layer NoPE with "
                          "attention temperature tuning (llama.cpp's fixed values)");
    }
  } else if (const auto window = k.count("attention.sliding_window", 0, kGgufMaxLength);
             window && *window > 0 && !gguf_window_read(k)) {
    // llama.cpp reads no window for this architecture (Phi-3's is disabled there): neither
    // does posenc, or a file would mean something else to posenc than to the engine it is for.
    out.notes.push_back("attention.sliding_window = " + std::to_string(*window) +
                        " is not applied: llama.cpp runs " + arch + " without a window (a file " +
                        "can give attention.sliding_window_pattern)");
  } else if (window && *window > 0) {
    out.sliding_window = *window;
    std::string how;
    const std::vector<bool> slides = gguf_sliding_layers(k, n_layer, &how);
    out.layer_types.resize(layer_count);
    for (std::size_t i = 0; i < layer_count; ++i) {
      out.layer_types[i] = slides[i] ? "sliding_attention" : "full_attention";
    }
    out.notes.push_back("sliding window " + std::to_string(*window) + " on: " + how);
    if (arch == "cohere2") {
      // Cohere2 rotates on its sliding layers only (llama.cpp and transformers alike).
      out.layer_uses_rope.assign(slides.begin(), slides.end());
    }
  }

  // Gemma-3n / Gemma-4 KV sharing: llama.cpp's layer_reuse_cb maps a layer il >= own =
  // n_layer - shared_kv_layers to own - 2 (sliding) or own - 1 (full), which is
  // transformers' rule (the last earlier layer of the type) when those two layers are one of
  // each, as in the released models; a file where they are not is noted.
  const auto shared = k.count("attention.shared_kv_layers", 0, n_layer);
  if (shared && *shared > 0) {
    const std::int64_t own = n_layer - *shared;
    if (own < 2) {
      k.fail("attention.shared_kv_layers", "= ", *shared, " leaves ", own,
             " layers with their own KV cache; llama.cpp needs 2");
    }
    const auto sliding = [&](std::int64_t i) {
      return static_cast<std::size_t>(i) < out.layer_types.size() &&
             out.layer_types[static_cast<std::size_t>(i)] == "sliding_attention";
    };
    out.layer_kv_source.resize(layer_count);
    bool differs = false;
    for (std::int64_t i = 0; i < n_layer; ++i) {
      const std::int64_t source = i < own ? i : own - (sliding(i) ? 2 : 1);
      differs = differs || sliding(source) != sliding(i);
      out.layer_kv_source[static_cast<std::size_t>(i)] = source;
    }
    out.notes.push_back("layers " + std::to_string(own) + " to " + std::to_string(n_layer - 1) +
                        " attend the KV cache of layer " + std::to_string(own - 2) +
                        " (sliding) or " + std::to_string(own - 1) +
                        " (full): llama.cpp's reuse rule (hf_layer_kv_source)" +
                        (differs ? "; here a shared layer reads a layer of the other type, "
                                   "unlike transformers"
                                 : ""));
  }

  hf_mark_layers_without_attention(out);

  // The layer types' RoPE: sliding layers take rope.freq_base_swa, and Gemma-3 runs them
  // unscaled at base 10000 (llama.cpp), as transformers' rope_local_base_freq.
  const bool any_sliding =
      std::find(out.layer_types.begin(), out.layer_types.end(), "sliding_attention") !=
      out.layer_types.end();
  const auto count_of = [&](std::string_view t) {
    return static_cast<Eigen::Index>(std::count(out.layer_types.begin(), out.layer_types.end(), t));
  };
  if (any_sliding) {
    RopeParams swa = p;
    swa.scaling = swa_scaling;
    swa.partial_rotary_factor = 1.0;
    // llama.cpp's generic loader: sliding layers' heads of key_length_swa, rotating
    // rope.dimension_count_swa dims (each defaults to the full layers' value).
    if (auto d = k.count("attention.key_length_swa", 1, kGgufMaxDim)) swa.head_dim = *d;
    swa.rotary_dim = k.count("rope.dimension_count_swa", 2, kGgufMaxDim).value_or(p.rotary_dim);
    if (swa.rotary_dim % 2 != 0 || swa.rotary_dim > swa.head_dim) {
      k.fail(k.has("rope.dimension_count_swa") ? "rope.dimension_count_swa"
                                               : "attention.key_length_swa",
             "gives ", swa.rotary_dim, " rotated dims on heads of ", swa.head_dim,
             " (must be even and <= the head)");
    }
    if (gguf_arch_in(arch, {"gemma3", "gemma3n", "gemma-embedding"})) {
      swa.theta = 10000.0;
      swa.scaling = RopeScaling{};
    }
    // OLMo-3 (llama.cpp olmo2.cpp): sliding layers rotate unscaled (freq_scale 1, ext_factor 0,
    // attn_factor 1) at the main base; its graph passes freq_base there, not freq_base_swa.
    const bool olmo3 = arch == "olmo2";
    if (olmo3) swa.scaling = RopeScaling{};
    if (auto b = olmo3 ? std::nullopt : k.number("rope.freq_base_swa")) {
      if (!(*b > 1.0)) k.fail("rope.freq_base_swa", "= ", *b, " must be > 1");
      swa.theta = *b;
    }
    gguf_checked_plan(k, swa);
    out.layer_ropes.push_back({"full_attention", p, count_of("full_attention")});
    out.layer_ropes.push_back({"sliding_attention", swa, count_of("sliding_attention")});
  } else if (!out.layer_types.empty()) {
    out.layer_ropes.push_back({"chunked_attention", p, count_of("chunked_attention")});
    out.layer_ropes.push_back({"full_attention", p, count_of("full_attention")});
  } else {
    out.layer_ropes.push_back({"all", p, n_layer});
  }
  return out;
}

}  // namespace detail

/// \brief The positional-encoding parameters of a GGUF held in memory (the whole file: the
/// factor tensors are read from it).
/// Throws std::invalid_argument naming `source` and the key for anything rejected.
inline HfModelConfig parse_gguf_config(const void* bytes, std::size_t size,
                                       std::string source = "<memory>",
                                       const GgufConfigOptions& options = {}) {
  const GgufMetadata m = parse_gguf(bytes, size, std::move(source), detail::kGgufConfigRead);
  const auto read = [&](std::string_view name) {
    return gguf_tensor_as_float(m, name, bytes, size);
  };
  return detail::gguf_config_from_metadata(m, read, options);
}

/// \brief Reads a GGUF file's header (and its RoPE factor tensors, if any), not its weights.
inline HfModelConfig load_gguf_config(const std::string& path,
                                      const GgufConfigOptions& options = {}) {
  const GgufMetadata m = load_gguf(path, detail::kGgufConfigRead);
  const auto read = [&](std::string_view name) { return read_gguf_tensor(m, name, path); };
  return detail::gguf_config_from_metadata(m, read, options);
}

}  // namespace posenc
