#pragma once
/// \file posenc/rope_params.hpp
/// RoPE configuration: which coordinates rotate together, how wide the rotated slice is, and
/// which Hugging Face `rope_scaling` recipe turns `theta` into the planned frequencies.
///
/// Field names follow HF `config.json` (`rope_theta` -> theta, `rope_scaling.rope_type` ->
/// RopeScaling::type, `partial_rotary_factor`, `original_max_position_embeddings`, ...), so a
/// config loader is a one-to-one copy. Planning lives in rope_frequencies.hpp, rotation in
/// rope.hpp.

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "posenc/error.hpp"
#include "posenc/tensor.hpp"

namespace posenc {

/// Which coordinates of a head vector form a rotation pair. Diagrams for head_dim = 8,
/// rotary_dim = 4 ("c"/"s": the cos and sin coordinate of a pair, "0": passed through):
enum class RopeLayout : std::uint8_t {
  kInterleaved = 0,  ///< pairs (2j, 2j+1)      [cscs0000]  GPT-J, Meta's llama, ggml NORMAL
  kHalfSplit = 1,    ///< pairs (j, j + r/2)    [ccss0000]  GPT-NeoX, HF rotate_half, ggml NEOX
};

constexpr std::string_view to_string(RopeLayout layout) noexcept {
  switch (layout) {
    case RopeLayout::kInterleaved: return "interleaved";
    case RopeLayout::kHalfSplit: return "half_split";
  }
  return "unknown";
}

/// The HF `rope_type` recipes (plus static NTK-aware scaling, which HF spells by editing theta).
enum class RopeScalingType {
  kDefault,   ///< "default": inv_freq[j] = theta^(-2j/d)
  kLinear,    ///< "linear": position interpolation, inv_freq / factor
  kNtk,       ///< "ntk" (static NTK-aware): theta' = theta * factor^(d/(d-2))
  kDynamic,   ///< "dynamic": NTK base recomputed from the current sequence length (HF semantics)
  kYarn,      ///< "yarn": NTK-by-parts ramp + attention factor (Peng et al. 2023)
  kLongRope,  ///< "longrope": per-frequency short/long rescale factors (Phi-3)
  kLlama3,    ///< "llama3": Llama-3.1 wavelength bands
  /// "proportional" (Gemma-4 full-attention layers): the whole head rotates, exponent over
  /// head_dim, only the first int(partial_rotary_factor * head_dim / 2) pairs turn
  kProportional,
  /// "ntk" as vLLM reads it from a config (transformers has no "ntk"): base b s and every
  /// frequency divided by s^(2/d), or with mixed_b Su's NTK-RoPE-mixed (kexue.fm/archives/9706)
  kVllmNtk,
};

constexpr std::string_view to_string(RopeScalingType type) noexcept {
  switch (type) {
    case RopeScalingType::kDefault: return "default";
    case RopeScalingType::kLinear: return "linear";
    case RopeScalingType::kNtk: return "ntk";
    case RopeScalingType::kDynamic: return "dynamic";
    case RopeScalingType::kYarn: return "yarn";
    case RopeScalingType::kLongRope: return "longrope";
    case RopeScalingType::kLlama3: return "llama3";
    case RopeScalingType::kProportional: return "proportional";
    case RopeScalingType::kVllmNtk: return "vllm_ntk";
  }
  return "unknown";
}

/// Parses an HF `rope_type` (or legacy `type`) string. "su" is HF's old name for longrope.
/// Throws std::invalid_argument naming `rope_type` for anything else.
inline RopeScalingType rope_scaling_type_from_string(std::string_view name) {
  if (name == "default") return RopeScalingType::kDefault;
  if (name == "linear") return RopeScalingType::kLinear;
  if (name == "ntk") return RopeScalingType::kNtk;
  if (name == "dynamic") return RopeScalingType::kDynamic;
  if (name == "yarn") return RopeScalingType::kYarn;
  if (name == "longrope" || name == "su") return RopeScalingType::kLongRope;
  if (name == "llama3") return RopeScalingType::kLlama3;
  if (name == "proportional") return RopeScalingType::kProportional;
  if (name == "vllm_ntk") return RopeScalingType::kVllmNtk;
  detail::throw_invalid_argument("rope_scaling_type_from_string", "rope_type = \"", name,
                                 "\" is not one of default, linear, ntk, dynamic, yarn, "
                                 "longrope (su), llama3, proportional, vllm_ntk");
}

/// HF `rope_scaling`. Only the fields of the chosen type are read; 0 / empty / nullopt mean
/// "absent from the config" and take HF's default.
struct RopeScaling {
  RopeScalingType type = RopeScalingType::kDefault;
  /// s: context extension factor (linear, ntk, dynamic, yarn, llama3, proportional, vllm_ntk;
  /// longrope's default attention factor when the config has no max/original ratio). >= 1.
  double factor = 1.0;
  /// L0, the pre-training context. 0 = use RopeParams::max_position_embeddings (HF's fallback
  /// for yarn and dynamic). Required (directly or through that fallback) by dynamic, yarn,
  /// longrope and llama3.
  std::int64_t original_max_position_embeddings = 0;

  // --- yarn --------------------------------------------------------------------------------
  double beta_fast = 32.0;  ///< rotations at which the ramp starts (high frequencies kept)
  double beta_slow = 1.0;   ///< rotations at which the ramp ends (low frequencies interpolated)
  /// Explicit cos/sin multiplier (yarn, longrope); overrides every default formula.
  std::optional<double> attention_factor;
  /// DeepSeek's pair: attention_factor = g(s, mscale) / g(s, mscale_all_dim) when both are
  /// non-zero, g(s, m) = 0.1 m ln s + 1. 0 = absent (HF tests them for truthiness). >= 0.
  double mscale = 0.0;
  double mscale_all_dim = 0.0;
  /// The slope of g(s, m) = mscale_slope m ln s + 1: 0.1 (YaRN, HF, DeepSeek); 0.07 for
  /// TeleChat3's rope_type "telechat3-yarn" (its remote code and vLLM's
  /// TeleChat3RoPEScaledRotaryEmbedding). Finite, >= 0.
  double mscale_slope = 0.1;
  /// floor/ceil the correction range (HF default true; gpt-oss sets false).
  bool truncate = true;
  /// vLLM's extrapolation_factor / ggml's ext_factor e in [0, 1]: pair j keeps the share
  /// (1 - ramp_j) e of its original frequency, the rest interpolated. 1 = the paper and HF
  /// (transformers has no such key); 0 = every pair interpolated (th / s, as linear). The
  /// attention factor does not depend on it, as in vLLM; ggml also drops its g(s) when
  /// ext_factor = 0 (set attention_factor = 1 to match that).
  double extrapolation_factor = 1.0;

  // --- vllm_ntk ----------------------------------------------------------------------------
  /// vLLM's `mixed_b`: frequency j divided by exp(a (j+1)^mixed_b), a = ln s / (d/2)^mixed_b.
  /// Absent: the fixed form (b s)^(-2j/d) / s^(2/d).
  std::optional<double> mixed_b;

  // --- llama3 ------------------------------------------------------------------------------
  double low_freq_factor = 1.0;   ///< wavelengths above L0 / low_freq_factor are interpolated
  double high_freq_factor = 4.0;  ///< wavelengths below L0 / high_freq_factor are kept

  // --- longrope ----------------------------------------------------------------------------
  std::vector<double> short_factor;  ///< rotary_dim / 2 divisors used while seq_len <= L0
  std::vector<double> long_factor;   ///< rotary_dim / 2 divisors used once seq_len > L0
  /// Phi-3.5-MoE's cos/sin multiplier of each table (transformers PhimoeRotaryEmbedding, vLLM
  /// Phi3LongRoPEScaledRotaryEmbedding); absent: the default attention factor. An explicit
  /// attention_factor wins over both.
  std::optional<double> short_mscale;
  std::optional<double> long_mscale;

  // --- any type ----------------------------------------------------------------------------
  /// ggml's per-pair frequency factors (ggml_rope_ext's `c` tensor; a GGUF's rope_freqs.weight,
  /// where llama.cpp's converter writes Llama-3.1's rule): after the recipe, pair j turns at
  /// inv_freq[j] / freq_factors[j]. Empty (every HF config) = none; else rotary_dim / 2 values,
  /// finite and > 0.
  std::vector<double> freq_factors;
};

/// Everything that fixes the rotation angles of one attention layer.
struct RopeParams {
  /// Width of a head vector (innermost tensor dimension). Must be > 0.
  Eigen::Index head_dim = 0;
  /// Number of rotated dims (even). 0 = int(head_dim * partial_rotary_factor), HF's rule.
  /// rope_type proportional always rotates the whole head (0 or head_dim).
  Eigen::Index rotary_dim = 0;
  /// HF `partial_rotary_factor` in (0, 1]; read when rotary_dim == 0 (Phi-2: 0.4), and by
  /// rope_type proportional, where it is the share of pairs that turn, not the rotated width:
  ///   standard      [cc..ss..|0000]  rotary_dim = int(head_dim f), exponent over rotary_dim
  ///   proportional  [cc00ss00]       rotary_dim = head_dim, pairs (j, j + head_dim/2),
  ///                                  j < int(f head_dim / 2) turn, the rest have inv_freq 0
  double partial_rotary_factor = 1.0;
  /// First rotated dim: dims [rotary_offset, rotary_offset + rotary_dim) rotate, the rest pass
  /// through. 0 for nearly every model; qk_nope_head_dim for a "nope-first" MLA head.
  Eigen::Index rotary_offset = 0;
  /// Base of the geometric frequency ladder (`rope_theta`). Must be finite and > 1.
  double theta = 10000.0;
  RopeLayout layout = RopeLayout::kHalfSplit;
  RopeScaling scaling{};
  /// HF `max_position_embeddings` (the served context). 0 = absent. Used by dynamic and yarn as
  /// L0 when rope_scaling has no original_max_position_embeddings, and by longrope for its
  /// default attention factor sqrt(1 + ln(max/L0) / ln L0).
  std::int64_t max_position_embeddings = 0;
};

/// Largest rotary_dim the kernels accept: per-token cos/sin live in stack buffers of
/// rotary_dim / 2 entries so that the apply path never allocates. Real models use <= 256.
inline constexpr Eigen::Index kMaxRotaryDim = 1024;

namespace detail {

/// HF: rotary_dim = int(head_dim * partial_rotary_factor) when not given explicitly
/// (proportional: head_dim, its factor picks the turning pairs instead).
inline Eigen::Index resolve_rotary_dim(std::string_view function, const RopeParams& params) {
  require(params.head_dim > 0, function, "head_dim = ", params.head_dim, " must be > 0");
  const double f = params.partial_rotary_factor;
  const bool proportional = params.scaling.type == RopeScalingType::kProportional;
  if (params.rotary_dim == 0 || proportional) {
    require(f > 0.0 && f <= 1.0, function, "partial_rotary_factor = ", f,
            " must be in (0, 1]");
  }
  require(!proportional || params.rotary_dim == 0 || params.rotary_dim == params.head_dim,
          function, "rotary_dim = ", params.rotary_dim, " must be 0 or head_dim = ",
          params.head_dim, " for rope_type proportional (it rotates the whole head)");
  Eigen::Index rd = params.rotary_dim;
  if (rd == 0 && proportional) rd = params.head_dim;
  if (rd == 0) {
    // Converting a product past the Index range would be undefined; it is too wide anyway.
    const double product = static_cast<double>(params.head_dim) * f;
    require(product < 0x1p62, function,
            "rotary_dim = int(head_dim * partial_rotary_factor) = int(", params.head_dim, " * ",
            f, ") must be <= ", kMaxRotaryDim);
    rd = static_cast<Eigen::Index>(product);
  }
  require(rd > 0 && rd % 2 == 0, function, "rotary_dim = ", rd,
          " must be even and > 0 (head_dim = ", params.head_dim, ", partial_rotary_factor = ",
          params.partial_rotary_factor, ")");
  require(rd <= kMaxRotaryDim, function, "rotary_dim = ", rd, " must be <= ", kMaxRotaryDim);
  require(params.rotary_offset >= 0 && params.rotary_offset <= params.head_dim - rd, function,
          "rotary_offset = ", params.rotary_offset, " must be in [0, head_dim - rotary_dim] = [0, ",
          params.head_dim - rd, "] (head_dim = ", params.head_dim, ", rotary_dim = ", rd, ")");
  return rd;
}

}  // namespace detail

/// \brief The rotary width HF would use: rotary_dim, or int(head_dim * partial_rotary_factor)
/// (head_dim for rope_type proportional).
/// Throws std::invalid_argument when it is odd, zero, > kMaxRotaryDim, or does not fit in
/// head_dim at rotary_offset.
inline Eigen::Index resolved_rotary_dim(const RopeParams& params) {
  return detail::resolve_rotary_dim("resolved_rotary_dim", params);
}

}  // namespace posenc
