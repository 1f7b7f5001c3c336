// GGUF metadata -> posenc parameters (posenc/gguf_config.hpp). The files are laid out by
// tests/support/gguf_writer.hpp with the keys convert_hf_to_gguf.py writes for each model; the
// expected values come from the published formulas written out in long double here
// (RoFormer's theta_j, YaRN, the converter's Llama-3.1 factor rule, ggml's ALiBi slopes).

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "posenc/attention_types.hpp"
#include "posenc/gguf_config.hpp"
#include "support/gguf_config_loader.hpp"
#include "support/gguf_writer.hpp"

using Catch::Matchers::Contains;
using Catch::Matchers::WithinRel;
using posenc::RopeLayout;
using posenc::RopeScalingType;
using posenc_test::GgufWriter;

namespace {

constexpr long double kPi = 3.141592653589793238462643383279502884L;

long double theta_j(long double base, int j, int d) {
  return std::pow(base, -2.0L * static_cast<long double>(j) / static_cast<long double>(d));
}

/// YaRN's inv_freq by Peng et al. 2023 §3.2 / transformers `_compute_yarn_parameters`
/// (truncated correction range, extrapolation factor 1), in long double.
long double yarn_inv_freq(long double base, int j, int d, long double s, long double l0,
                          long double beta_fast, long double beta_slow) {
  const auto corr = [&](long double rot) {
    return d * std::log(l0 / (rot * 2.0L * kPi)) / (2.0L * std::log(base));
  };
  long double lo = std::max(std::floor(corr(beta_fast)), 0.0L);
  long double hi = std::min(std::ceil(corr(beta_slow)), static_cast<long double>(d - 1));
  if (lo == hi) hi += 0.001L;
  const long double ramp = std::clamp((j - lo) / (hi - lo), 0.0L, 1.0L);
  const long double th = theta_j(base, j, d);
  return th / s * ramp + th * (1.0L - ramp);
}

posenc::HfModelConfig parse(const GgufWriter& w, const std::string& name = "m.gguf") {
  const auto bytes = w.bytes();
  return posenc_test::parse_gguf_config(bytes.data(), bytes.size(), name);
}

/// The file is refused with invalid_argument, the message naming the file and `what`.
void refuse(const GgufWriter& w, const std::string& what) {
  INFO(what);
  const auto bytes = w.bytes();
  REQUIRE_THROWS_AS(posenc_test::parse_gguf_config(bytes.data(), bytes.size(), "bad.gguf"),
                    std::invalid_argument);
  REQUIRE_THROWS_WITH(posenc_test::parse_gguf_config(bytes.data(), bytes.size(), "bad.gguf"),
                      Contains("bad.gguf") && Contains(what));
}

/// The Llama-3.1 factors convert_hf_to_gguf.py writes into rope_freqs.weight (its
/// LlamaModel.generate_extra_tensors), from factor 8, low 1, high 4, L0 8192, theta 500000.
std::vector<float> llama31_rope_freqs() {
  std::vector<float> out;
  for (int j = 0; j < 64; ++j) {
    const long double freq = 1.0L / std::pow(500000.0L, 2.0L * j / 128.0L);
    const long double wavelen = 2.0L * kPi / freq;
    long double f = 1.0L;
    if (wavelen > 8192.0L) {
      f = 8.0L;
    } else if (wavelen >= 8192.0L / 4.0L) {
      const long double smooth = (8192.0L / wavelen - 1.0L) / (4.0L - 1.0L);
      f = 1.0L / ((1.0L - smooth) / 8.0L + smooth);
    }
    out.push_back(static_cast<float>(f));
  }
  return out;
}

GgufWriter llama31_8b() {
  GgufWriter w;
  w.str("general.architecture", "llama")
      .u32("llama.context_length", 131072)
      .u32("llama.embedding_length", 4096)
      .u32("llama.block_count", 32)
      .u32("llama.attention.head_count", 32)
      .u32("llama.attention.head_count_kv", 8)
      .u32("llama.rope.dimension_count", 128)
      .f32("llama.rope.freq_base", 500000.0f);
  w.tensor("rope_freqs.weight", {64}, posenc::kGgmlTypeF32, w.f32_bytes(llama31_rope_freqs()));
  return w;
}

}  // namespace

TEST_CASE("gguf config: Llama-3.1-8B's rope_freqs tensor gives the llama3 frequencies", "[gguf]") {
  const posenc::HfModelConfig c = parse(llama31_8b());
  CHECK(c.model_type == "llama");
  CHECK(c.scheme == posenc::HfPositionScheme::kRope);
  CHECK(c.num_attention_heads == 32);
  CHECK(c.num_key_value_heads == 8);
  CHECK(c.num_hidden_layers == 32);
  CHECK(c.max_position_embeddings == 131072);
  CHECK(c.rope.head_dim == 128);
  CHECK(c.rope.rotary_dim == 128);
  CHECK(c.rope.theta == 500000.0);
  // GGUF Llama weights are permuted at conversion: adjacent pairs (ggml NORM).
  CHECK(c.rope.layout == RopeLayout::kInterleaved);
  CHECK_THAT(c.layout_reason, Contains("NORM"));
  CHECK(c.rope.scaling.type == RopeScalingType::kDefault);
  REQUIRE(c.layer_ropes.size() == 1);
  CHECK(c.layer_ropes[0].num_layers == 32);
  CHECK(c.softmax_scale == 1.0 / std::sqrt(128.0));
  const auto f = posenc::compute_rope_frequencies(c.rope);
  CHECK(f.attention_factor == 1.0);
  // Llama-3.1's rule (factor 8, low 1, high 4, L0 8192) in long double: the file's factors are
  // floats, so agreement to float precision.
  for (int j = 0; j < 64; ++j) {
    CAPTURE(j);
    const long double th = theta_j(500000.0L, j, 128);
    const long double wavelen = 2.0L * kPi / th;
    long double expect = th;
    if (wavelen > 8192.0L) {
      expect = th / 8.0L;
    } else if (wavelen >= 2048.0L) {
      const long double m = (8192.0L / wavelen - 1.0L) / 3.0L;
      expect = (1.0L - m) * th / 8.0L + m * th;
    }
    REQUIRE_THAT(f.inv_freq[static_cast<std::size_t>(j)],
                 WithinRel(static_cast<double>(expect), 1.5e-7));
  }
}

TEST_CASE("gguf config: a file on disk reads like the same bytes in memory", "[gguf]") {
  const auto bytes = llama31_8b().bytes();
  const std::string path = std::string(P_tmpdir) + "/posenc_test_gguf_config_llama.gguf";
  {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }
  const auto disk = posenc_test::load_gguf_config(path);
  const auto memory = posenc_test::parse_gguf_config(bytes.data(), bytes.size());
  CHECK(disk.source == path);
  CHECK(disk.rope.scaling.freq_factors == memory.rope.scaling.freq_factors);
  CHECK(disk.rope.scaling.freq_factors.size() == 64);
  CHECK(disk.rope.theta == memory.rope.theta);
  std::remove(path.c_str());
}

TEST_CASE("gguf config: Qwen2.5 with YaRN (factor 4, L0 32768)", "[gguf]") {
  GgufWriter w;
  w.str("general.architecture", "qwen2")
      .u32("qwen2.context_length", 131072)
      .u32("qwen2.embedding_length", 3584)
      .u32("qwen2.block_count", 28)
      .u32("qwen2.attention.head_count", 28)
      .u32("qwen2.attention.head_count_kv", 4)
      .f32("qwen2.rope.freq_base", 1000000.0f)
      .str("qwen2.rope.scaling.type", "yarn")
      .f32("qwen2.rope.scaling.factor", 4.0f)
      .u32("qwen2.rope.scaling.original_context_length", 32768);
  const auto c = parse(w);
  CHECK(c.rope.layout == RopeLayout::kHalfSplit);
  CHECK(c.rope.head_dim == 128);  // 3584 / 28
  CHECK(c.rope.scaling.type == RopeScalingType::kYarn);
  CHECK(c.rope.scaling.factor == 4.0);
  CHECK(c.rope.scaling.original_max_position_embeddings == 32768);
  CHECK(c.original_max_position_embeddings == 32768);
  CHECK(c.trained_length() == 32768);
  const auto f = posenc::compute_rope_frequencies(c.rope);
  for (int j = 0; j < 64; ++j) {
    CAPTURE(j);
    REQUIRE_THAT(f.inv_freq[static_cast<std::size_t>(j)],
                 WithinRel(static_cast<double>(yarn_inv_freq(1e6L, j, 128, 4.0L, 32768.0L, 32.0L, 1.0L)), 1e-13));
  }
  CHECK_THAT(f.attention_factor, WithinRel(static_cast<double>(0.1L * std::log(4.0L) + 1.0L), 1e-15));
  CHECK(f.softmax_scale_multiplier == 1.0);
}

TEST_CASE("gguf config: DeepSeek-V3's MLA heads and its yarn_log_multiplier", "[gguf]") {
  // convert_hf_to_gguf.py (DeepseekV2Model): rope.dimension_count = qk_rope_head_dim,
  // key_length = kv_lora_rank + qk_rope, value_length = kv_lora_rank, the _mla lengths the
  // unabsorbed heads, yarn_log_multiplier = 0.1 * mscale_all_dim.
  GgufWriter w;
  w.str("general.architecture", "deepseek2")
      .u32("deepseek2.context_length", 163840)
      .u32("deepseek2.embedding_length", 7168)
      .u32("deepseek2.block_count", 61)
      .u32("deepseek2.attention.head_count", 128)
      .u32("deepseek2.attention.head_count_kv", 1)
      .u32("deepseek2.attention.key_length", 576)
      .u32("deepseek2.attention.value_length", 512)
      .u32("deepseek2.attention.key_length_mla", 192)
      .u32("deepseek2.attention.value_length_mla", 128)
      .u32("deepseek2.attention.kv_lora_rank", 512)
      .u32("deepseek2.attention.q_lora_rank", 1536)
      .u32("deepseek2.rope.dimension_count", 64)
      .f32("deepseek2.rope.freq_base", 10000.0f)
      .str("deepseek2.rope.scaling.type", "yarn")
      .f32("deepseek2.rope.scaling.factor", 40.0f)
      .u32("deepseek2.rope.scaling.original_context_length", 4096)
      .f32("deepseek2.rope.scaling.yarn_log_multiplier", 0.1f);
  const auto c = parse(w);
  CHECK(c.rope.layout == RopeLayout::kInterleaved);
  CHECK(c.rope.head_dim == 64);
  CHECK(c.attention_head_dim == 192);
  CHECK(c.qk_nope_head_dim == 128);
  CHECK(c.v_head_dim == 128);
  CHECK(c.kv_lora_rank == 512);
  const auto f = posenc::compute_rope_frequencies(c.rope);
  // The golden values: cos / sin factor 1, softmax multiplier (0.1 ln 40 + 1)^2. The
  // file's 0.1f is a float, so mscale_all_dim = 0.1f / 0.1 is 1 to float precision.
  CHECK_THAT(f.attention_factor, WithinRel(1.0, 1e-15));
  const long double g = 0.1L * std::log(40.0L) + 1.0L;
  CHECK_THAT(f.softmax_scale_multiplier, WithinRel(static_cast<double>(g * g), 1e-7));
  CHECK_THAT(c.softmax_scale, WithinRel(static_cast<double>(g * g / std::sqrt(192.0L)), 1e-7));
  const auto latent = posenc::hf_mla_rope_params(c, posenc::HfMlaHead::kLatent);
  CHECK(latent.head_dim == 576);
  CHECK(latent.rotary_offset == 512);
  const auto full = posenc::hf_mla_rope_params(c, posenc::HfMlaHead::kConcatenated);
  CHECK(full.head_dim == 192);
  CHECK(full.rotary_offset == 128);
}

TEST_CASE("gguf config: YaRN's optional keys, Mistral's log multiplier, rope attn_factor", "[gguf]") {
  const auto yarn_file = [](const std::string& arch) {
    GgufWriter w;
    w.str("general.architecture", arch)
        .u32(arch + ".context_length", 262144)
        .u32(arch + ".embedding_length", 4096)
        .u32(arch + ".block_count", 4)
        .u32(arch + ".attention.head_count", 32)
        .u32(arch + ".attention.key_length", 128)
        .f32(arch + ".rope.freq_base", 1000000.0f)
        .str(arch + ".rope.scaling.type", "yarn")
        .f32(arch + ".rope.scaling.factor", 16.0f)
        .u32(arch + ".rope.scaling.original_context_length", 16384);
    return w;
  };
  const long double g16 = 0.1L * std::log(16.0L) + 1.0L;
  {  // The converter's copies of transformers' keys.
    GgufWriter w = yarn_file("qwen3");
    w.f32("qwen3.rope.scaling.yarn_beta_fast", 16.0f)
        .f32("qwen3.rope.scaling.yarn_beta_slow", 2.0f)
        .f32("qwen3.rope.scaling.yarn_ext_factor", 0.5f)
        .f32("qwen3.rope.scaling.yarn_attn_factor", 1.25f);
    const auto c = parse(w);
    CHECK(c.rope.scaling.beta_fast == 16.0);
    CHECK(c.rope.scaling.beta_slow == 2.0);
    CHECK(c.rope.scaling.extrapolation_factor == 0.5);
    CHECK(posenc::compute_rope_frequencies(c.rope).attention_factor == 1.25);
  }
  {  // Mistral-3 (a MistralModel conversion): yarn_log_multiplier is mscale_all_dim itself and
     // mscale stays 1, so cos / sin take g(s, 1) / g(s, m_all) (llama.cpp's llama_context).
    GgufWriter w = yarn_file("mistral3");
    w.f32("mistral3.rope.scaling.yarn_log_multiplier", 0.5f);
    const auto c = parse(w);
    CHECK(c.rope.scaling.mscale == 1.0);
    CHECK(c.rope.scaling.mscale_all_dim == 0.5);
    const long double g_half = 0.05L * std::log(16.0L) + 1.0L;
    CHECK_THAT(posenc::compute_rope_frequencies(c.rope).attention_factor,
               WithinRel(static_cast<double>(g16 / g_half), 1e-15));
  }
  {  // rope.scaling.attn_factor multiplies the YaRN factor.
    GgufWriter w = yarn_file("qwen3");
    w.f32("qwen3.rope.scaling.attn_factor", 0.75f);
    const auto c = parse(w);
    CHECK_THAT(posenc::compute_rope_frequencies(c.rope).attention_factor,
               WithinRel(static_cast<double>(g16 * 0.75L), 1e-15));
  }
}

TEST_CASE("gguf config: gpt-oss's alternate sliding layers and YaRN keys", "[gguf]") {
  GgufWriter w;
  w.str("general.architecture", "gpt-oss")
      .u32("gpt-oss.context_length", 131072)
      .u32("gpt-oss.embedding_length", 2880)
      .u32("gpt-oss.block_count", 24)
      .u32("gpt-oss.attention.head_count", 64)
      .u32("gpt-oss.attention.head_count_kv", 8)
      .u32("gpt-oss.attention.key_length", 64)
      .u32("gpt-oss.attention.value_length", 64)
      .u32("gpt-oss.rope.dimension_count", 64)
      .f32("gpt-oss.rope.freq_base", 150000.0f)
      .str("gpt-oss.rope.scaling.type", "yarn")
      .f32("gpt-oss.rope.scaling.factor", 32.0f)
      .u32("gpt-oss.rope.scaling.original_context_length", 4096)
      .f32("gpt-oss.rope.scaling.yarn_beta_fast", 32.0f)
      .f32("gpt-oss.rope.scaling.yarn_beta_slow", 1.0f)
      .u32("gpt-oss.attention.sliding_window", 128);
  const auto c = parse(w);
  CHECK(c.rope.layout == RopeLayout::kHalfSplit);
  CHECK(c.sliding_window == 128);
  REQUIRE(c.layer_types.size() == 24);
  for (Eigen::Index i = 0; i < 24; ++i) {
    CAPTURE(i);
    // llama.cpp's set_swa_pattern(2): the even layers slide, as transformers' layer_types.
    CHECK(posenc::hf_layer_is_sliding(c, i) == (i % 2 == 0));
    CHECK(posenc::hf_attention_params(c, i).sliding_window == (i % 2 == 0 ? 128 : 0));
  }
  REQUIRE(c.layer_ropes.size() == 2);
  CHECK(c.layer_ropes[1].layer_type == "sliding_attention");
  CHECK(c.layer_ropes[1].num_layers == 12);
  CHECK(c.layer_ropes[1].params.scaling.type == RopeScalingType::kYarn);  // YaRN on both kinds
  CHECK(c.rope.scaling.truncate);
  bool noted = false;
  for (const auto& n : c.notes) noted = noted || n.find("truncate = false") != std::string::npos;
  CHECK(noted);
  const auto f = posenc::compute_rope_frequencies(c.rope);
  for (int j = 0; j < 32; ++j) {
    REQUIRE_THAT(f.inv_freq[static_cast<std::size_t>(j)],
                 WithinRel(static_cast<double>(yarn_inv_freq(150000.0L, j, 64, 32.0L, 4096.0L, 32.0L, 1.0L)), 1e-13));
  }
  CHECK(c.softmax_scale == 0.125);
}

TEST_CASE("gguf config: Gemma-3's global and local layers", "[gguf]") {
  for (bool swa_key : {false, true}) {
    CAPTURE(swa_key);
    GgufWriter w;
    w.str("general.architecture", "gemma3")
        .u32("gemma3.context_length", 131072)
        .u32("gemma3.embedding_length", 2560)
        .u32("gemma3.block_count", 34)
        .u32("gemma3.attention.head_count", 8)
        .u32("gemma3.attention.head_count_kv", 4)
        .u32("gemma3.attention.key_length", 256)
        .u32("gemma3.attention.value_length", 256)
        .f32("gemma3.rope.freq_base", 1000000.0f)
        .str("gemma3.rope.scaling.type", "linear")
        .f32("gemma3.rope.scaling.factor", 8.0f)
        .u32("gemma3.attention.sliding_window", 1024);
    if (swa_key) w.f32("gemma3.rope.freq_base_swa", 20000.0f);
    const auto c = parse(w);
    for (Eigen::Index i = 0; i < 34; ++i) {
      CAPTURE(i);
      CHECK(posenc::hf_layer_is_sliding(c, i) == (i % 6 != 5));
    }
    REQUIRE(c.layer_ropes.size() == 2);
    CHECK(c.layer_ropes[0].layer_type == "full_attention");
    CHECK(c.layer_ropes[0].num_layers == 5);
    CHECK(c.layer_ropes[0].params.theta == 1e6);
    CHECK(c.layer_ropes[0].params.scaling.type == RopeScalingType::kLinear);
    CHECK(c.layer_ropes[0].params.scaling.factor == 8.0);
    const auto& local = c.layer_ropes[1].params;
    CHECK(local.theta == (swa_key ? 20000.0 : 10000.0));
    CHECK(local.scaling.type == RopeScalingType::kDefault);  // local layers unscaled
    CHECK(c.softmax_scale == 1.0 / 16.0);
  }
}

/// What convert_hf_to_gguf.py's Gemma4Model writes for a 12-layer Gemma-4 text model (5 sliding
/// layers of 256-wide heads per full layer of 512), with switches for the malformed variants.
struct Gemma4File {
  bool window = true;
  int pattern = 2;  // 0 absent, 1 a scalar, 2 one bool per layer
  std::uint32_t rot_swa = 256;
  std::uint32_t shared_kv_layers = 0;
  GgufWriter write() const {
    std::vector<bool> slides;
    std::vector<std::int32_t> kv_heads;
    for (int i = 0; i < 12; ++i) {
      slides.push_back((i + 1) % 6 != 0);
      kv_heads.push_back(slides.back() ? 4 : 2);
    }
    // generate_extra_tensors: partial_rotary_factor 0.25 of 512 / 2 pairs turn, the rest 1e30.
    std::vector<float> freqs(256, 1e30f);
    std::fill(freqs.begin(), freqs.begin() + 64, 1.0f);
    GgufWriter w;
    w.str("general.architecture", "gemma4")
        .u32("gemma4.context_length", 131072)
        .u32("gemma4.embedding_length", 2560)
        .u32("gemma4.block_count", 12)
        .u32("gemma4.attention.head_count", 8)
        .i32_array("gemma4.attention.head_count_kv", kv_heads)
        .u32("gemma4.attention.key_length", 512)
        .u32("gemma4.attention.value_length", 512)
        .u32("gemma4.attention.key_length_swa", 256)
        .u32("gemma4.attention.value_length_swa", 256)
        .u32("gemma4.rope.dimension_count", 512)
        .u32("gemma4.rope.dimension_count_swa", rot_swa)
        .f32("gemma4.rope.freq_base", 1000000.0f)
        .f32("gemma4.rope.freq_base_swa", 10000.0f);
    if (shared_kv_layers > 0) w.u32("gemma4.attention.shared_kv_layers", shared_kv_layers);
    if (window) w.u32("gemma4.attention.sliding_window", 512);
    if (pattern == 1) w.u32("gemma4.attention.sliding_window_pattern", 6);
    if (pattern == 2) w.bool_array("gemma4.attention.sliding_window_pattern", slides);
    w.tensor("rope_freqs.weight", {256}, posenc::kGgmlTypeF32, w.f32_bytes(freqs));
    return w;
  }
};

TEST_CASE("gguf config: Gemma-4's proportional full layers and 256-wide sliding layers", "[gguf]") {
  const auto c = parse(Gemma4File{}.write());
  for (Eigen::Index i = 0; i < 12; ++i) {
    CAPTURE(i);
    CHECK(posenc::hf_layer_is_sliding(c, i) == ((i + 1) % 6 != 0));
  }
  CHECK(c.sliding_window == 512);
  CHECK(c.softmax_scale == 1.0);  // Gemma-4's q / k norms, scaling 1 (llama.cpp and HF)
  CHECK(c.num_key_value_heads == 4);
  REQUIRE(c.layer_ropes.size() == 2);
  const posenc::RopeParams& full = c.layer_ropes[0].params;
  const posenc::RopeParams& local = c.layer_ropes[1].params;
  CHECK(c.layer_ropes[0].layer_type == "full_attention");
  CHECK(c.layer_ropes[0].num_layers == 2);
  CHECK(c.layer_ropes[1].num_layers == 10);
  CHECK(c.rope.head_dim == 512);
  CHECK(full.layout == RopeLayout::kHalfSplit);
  CHECK(full.scaling.type == RopeScalingType::kProportional);
  CHECK(full.scaling.freq_factors.empty());
  CHECK(full.partial_rotary_factor == 0.25);
  // HF's proportional RoPE: theta_j over the whole 512-wide head for j < 64, the rest still.
  const auto f = posenc::compute_rope_frequencies(full);
  REQUIRE(f.rotary_dim == 512);
  REQUIRE(f.inv_freq.size() == 256);
  for (int j = 0; j < 256; ++j) {
    CAPTURE(j);
    if (j < 64) {
      REQUIRE_THAT(f.inv_freq[static_cast<std::size_t>(j)],
                   WithinRel(static_cast<double>(theta_j(1e6L, j, 512)), 1e-14));
    } else {
      REQUIRE(f.inv_freq[static_cast<std::size_t>(j)] == 0.0);
    }
  }
  CHECK(f.attention_factor == 1.0);
  // Sliding layers: plain RoPE over their own 256-wide heads, base 10000, no rope_freqs.
  CHECK(local.head_dim == 256);
  CHECK(local.scaling.type == RopeScalingType::kDefault);
  CHECK(local.scaling.freq_factors.empty());
  const auto g = posenc::compute_rope_frequencies(local);
  REQUIRE(g.rotary_dim == 256);
  for (int j = 0; j < 128; ++j) {
    CAPTURE(j);
    REQUIRE_THAT(g.inv_freq[static_cast<std::size_t>(j)],
                 WithinRel(static_cast<double>(theta_j(1e4L, j, 256)), 1e-14));
  }
  bool noted = false;
  for (const auto& n : c.notes) noted = noted || n.find("rope_type proportional") != std::string::npos;
  CHECK(noted);

  // KV sharing (Gemma-4 E2B style, here the last 6 of 12 layers): llama.cpp maps the shared
  // sliding layers 6-10 to layer 6 - 2 = 4 and the shared full layer 11 to 6 - 1 = 5, the
  // last sliding and full layers before 6, as transformers does.
  CHECK(c.layer_kv_source.empty());
  Gemma4File sharing;
  sharing.shared_kv_layers = 6;
  const auto s = parse(sharing.write());
  for (Eigen::Index i = 0; i < 12; ++i) {
    CAPTURE(i);
    CHECK(posenc::hf_layer_kv_source(s, i) == (i < 6 ? i : i == 11 ? 5 : 4));
  }
  const auto unlike = [](const posenc::HfModelConfig& cfg) {
    for (const auto& n : cfg.notes) {
      if (n.find("unlike transformers") != std::string::npos) return true;
    }
    return false;
  };
  CHECK_FALSE(unlike(s));
  // The last 4 shared: layers 6 and 7 are both sliding, so the full layer 11 reads layer 7.
  sharing.shared_kv_layers = 4;
  const auto mixed = parse(sharing.write());
  CHECK(posenc::hf_layer_kv_source(mixed, 11) == 7);
  CHECK(posenc::hf_layer_kv_source(mixed, 10) == 6);
  CHECK(unlike(mixed));
  sharing.shared_kv_layers = 11;
  REQUIRE_THROWS_WITH(parse(sharing.write()),
                      Contains("\"gemma4.attention.shared_kv_layers\" = 11 leaves 1 layers"));

  // A partial sliding rotation (rope.dimension_count_swa < key_length_swa) is kept as given.
  Gemma4File partial;
  partial.rot_swa = 128;
  CHECK(posenc::resolved_rotary_dim(parse(partial.write()).layer_ropes[1].params) == 128);

  // Any architecture's rope_freqs of that form reads the same way, including a share that
  // does not survive the round trip through floor(f d / 2): 15 of 44 pairs (2 * 15 / 88 * 44
  // is 14.999... in double).
  std::vector<float> freqs(44, 1e30f);
  std::fill(freqs.begin(), freqs.begin() + 15, 1.0f);
  GgufWriter w;
  w.str("general.architecture", "qwen3")
      .u32("qwen3.context_length", 4096)
      .u32("qwen3.embedding_length", 704)
      .u32("qwen3.block_count", 2)
      .u32("qwen3.attention.head_count", 8)
      .u32("qwen3.attention.key_length", 88);
  w.tensor("rope_freqs.weight", {44}, posenc::kGgmlTypeF32, w.f32_bytes(freqs));
  const auto odd = posenc::compute_rope_frequencies(parse(w).rope);
  std::size_t turning = 0;
  for (double x : odd.inv_freq) turning += x != 0.0;
  CHECK(turning == 15);
  CHECK(odd.inv_freq[14] > 0.0);
}

TEST_CASE("gguf config: Gemma-4 files without their layer pattern are refused", "[gguf]") {
  const auto refuse = [](const Gemma4File& f, const std::string& what) {
    INFO(what);
    const auto bytes = f.write().bytes();
    REQUIRE_THROWS_AS(posenc_test::parse_gguf_config(bytes.data(), bytes.size(), "g4.gguf"),
                      std::invalid_argument);
    REQUIRE_THROWS_WITH(posenc_test::parse_gguf_config(bytes.data(), bytes.size(), "g4.gguf"),
                        Contains("g4.gguf") && Contains(what));
  };
  Gemma4File f;
  f.window = false;
  refuse(f, "key \"gemma4.attention.sliding_window\" is missing");
  f = Gemma4File{};
  f.pattern = 0;
  refuse(f, "key \"gemma4.attention.sliding_window_pattern\" is missing: gemma4 needs one bool "
            "per layer");
  f.pattern = 1;
  refuse(f, "key \"gemma4.attention.sliding_window_pattern\" is a scalar");
  f = Gemma4File{};
  f.rot_swa = 320;
  refuse(f, "key \"gemma4.rope.dimension_count_swa\" gives 320 rotated dims on heads of 256");
  f.rot_swa = 255;
  refuse(f, "gives 255 rotated dims");
}

TEST_CASE("gguf config: Phi-3.5-mini's LongRoPE tensors and attention factor", "[gguf]") {
  std::vector<float> lf(48), sf(48);
  for (int j = 0; j < 48; ++j) {
    sf[static_cast<std::size_t>(j)] = 1.0f + 0.01f * static_cast<float>(j);
    lf[static_cast<std::size_t>(j)] = 1.0f + 1.25f * static_cast<float>(j);
  }
  // Phi3MiniModel: attn_factor = sqrt(1 + ln(131072 / 4096) / ln 4096), no scaling type.
  const float attn = static_cast<float>(std::sqrt(1.0L + std::log(32.0L) / std::log(4096.0L)));
  GgufWriter w;
  w.str("general.architecture", "phi3")
      .u32("phi3.context_length", 131072)
      .u32("phi3.embedding_length", 3072)
      .u32("phi3.block_count", 32)
      .u32("phi3.attention.head_count", 32)
      .u32("phi3.attention.head_count_kv", 32)
      .u32("phi3.rope.dimension_count", 96)
      .f32("phi3.rope.freq_base", 10000.0f)
      .u32("phi3.rope.scaling.original_context_length", 4096)
      .f32("phi3.rope.scaling.attn_factor", attn)
      .u32("phi3.attention.sliding_window", 262144);
  w.tensor("rope_factors_long.weight", {48}, posenc::kGgmlTypeF32, w.f32_bytes(lf))
      .tensor("rope_factors_short.weight", {48}, posenc::kGgmlTypeF32, w.f32_bytes(sf));
  const auto c = parse(w);
  CHECK(c.rope.scaling.type == RopeScalingType::kLongRope);
  CHECK(c.rope.scaling.original_max_position_embeddings == 4096);
  REQUIRE(c.rope.scaling.long_factor.size() == 48);
  CHECK(c.rope.scaling.long_factor[7] == static_cast<double>(lf[7]));
  CHECK(c.rope.scaling.short_factor[7] == static_cast<double>(sf[7]));
  const auto short_plan = posenc::compute_rope_frequencies(c.rope, 4096);
  const auto long_plan = posenc::compute_rope_frequencies(c.rope, 4097);
  CHECK(short_plan.attention_factor == static_cast<double>(attn));
  CHECK(long_plan.attention_factor == static_cast<double>(attn));
  for (int j = 0; j < 48; ++j) {
    CAPTURE(j);
    const long double th = theta_j(10000.0L, j, 96);
    REQUIRE_THAT(short_plan.inv_freq[static_cast<std::size_t>(j)],
                 WithinRel(static_cast<double>(th / sf[static_cast<std::size_t>(j)]), 1e-14));
    REQUIRE_THAT(long_plan.inv_freq[static_cast<std::size_t>(j)],
                 WithinRel(static_cast<double>(th / lf[static_cast<std::size_t>(j)]), 1e-14));
  }
  // llama.cpp runs Phi-3 without its window: not applied, and said so.
  CHECK(c.sliding_window == 0);
  CHECK_FALSE(posenc::hf_layer_is_sliding(c, 0));
  bool noted = false;
  for (const auto& n : c.notes) noted = noted || n.find("sliding_window = 262144 is not applied") != std::string::npos;
  CHECK(noted);

  // Without rope.scaling.attn_factor llama.cpp leaves cos / sin unscaled (transformers would
  // take sqrt(1 + ln 32 / ln 4096) from the lengths).
  GgufWriter bare;
  bare.str("general.architecture", "phi3")
      .u32("phi3.context_length", 131072)
      .u32("phi3.embedding_length", 3072)
      .u32("phi3.block_count", 32)
      .u32("phi3.attention.head_count", 32)
      .u32("phi3.rope.dimension_count", 96)
      .u32("phi3.rope.scaling.original_context_length", 4096);
  bare.tensor("rope_factors_long.weight", {48}, posenc::kGgmlTypeF32, bare.f32_bytes(lf))
      .tensor("rope_factors_short.weight", {48}, posenc::kGgmlTypeF32, bare.f32_bytes(sf));
  const auto b = parse(bare);
  CHECK(posenc::compute_rope_frequencies(b.rope, 8192).attention_factor == 1.0);
  CHECK(b.rope.scaling.long_factor == c.rope.scaling.long_factor);
}

TEST_CASE("gguf config: M-RoPE sections, contiguous (Qwen2-VL) and interleaved (Qwen3-VL)", "[gguf]") {
  for (const char* arch : {"qwen2vl", "qwen3vl"}) {
    CAPTURE(arch);
    const std::string a = arch;
    GgufWriter w;
    w.str("general.architecture", a)
        .u32(a + ".context_length", 32768)
        .u32(a + ".embedding_length", 3584)
        .u32(a + ".block_count", 28)
        .u32(a + ".attention.head_count", 28)
        .u32(a + ".attention.head_count_kv", 4)
        .f32(a + ".rope.freq_base", 1000000.0f);
    const bool qwen3 = a == "qwen3vl";
    w.i32_array(a + ".rope.dimension_sections", qwen3 ? std::vector<std::int32_t>{24, 20, 20, 0}
                                                      : std::vector<std::int32_t>{16, 24, 24, 0});
    const auto c = parse(w);
    REQUIRE(c.mrope.has_value());
    CHECK(c.mrope->section[0] == (qwen3 ? 24 : 16));
    CHECK(c.mrope->section[2] == (qwen3 ? 20 : 24));
    CHECK(c.mrope->streams() == 3);
    CHECK(c.mrope->layout == (qwen3 ? posenc::MRopeSectionLayout::kInterleaved
                                    : posenc::MRopeSectionLayout::kContiguous));
    CHECK(c.rope.layout == RopeLayout::kHalfSplit);
  }
  // llama.cpp reads the sections for its M-RoPE rope types only: on llama (NORM) they were
  // applied anyway, an M-RoPE the model's graph never runs.
  GgufWriter w;
  w.str("general.architecture", "llama")
      .u32("llama.context_length", 4096)
      .u32("llama.embedding_length", 4096)
      .u32("llama.block_count", 4)
      .u32("llama.attention.head_count", 32)
      .i32_array("llama.rope.dimension_sections", {16, 24, 24, 0});
  const auto c = parse(w);
  CHECK_FALSE(c.mrope.has_value());
  CHECK(c.rope.layout == RopeLayout::kInterleaved);
  bool noted = false;
  for (const auto& n : c.notes) noted |= n.find("rope.dimension_sections: not read") != std::string::npos;
  CHECK(noted);
}

TEST_CASE("gguf config: ALiBi from max_alibi_bias and llama.cpp's fixed bias of 8", "[gguf]") {
  // ggml's soft_max: n = 2^floor(log2 H), m0 = 2^(-b / n), m1 = 2^(-b / 2 / n); head h < n
  // takes m0^(h + 1), the rest m1^(2 (h - n) + 1).
  const auto ggml_slope = [](int heads, long double bias, int h) {
    int n = 1;
    while (2 * n <= heads) n *= 2;
    const long double m0 = std::pow(2.0L, -bias / n), m1 = std::pow(2.0L, -bias / 2.0L / n);
    return h < n ? std::pow(m0, h + 1) : std::pow(m1, 2 * (h - n) + 1);
  };
  struct Case { const char* arch; int heads; float bias; double expect_bias; };
  for (const Case& k : {Case{"bloom", 32, 0.0f, 8.0}, Case{"mpt", 12, 8.0f, 8.0},
                        Case{"mpt", 40, 6.0f, 6.0}, Case{"jais", 20, 8.0f, 8.0}}) {
    const std::string a = k.arch;
    CAPTURE(a, k.heads);
    GgufWriter w;
    w.str("general.architecture", a)
        .u32(a + ".context_length", 2048)
        .u32(a + ".embedding_length", 64 * static_cast<std::uint32_t>(k.heads))
        .u32(a + ".block_count", 4)
        .u32(a + ".attention.head_count", static_cast<std::uint32_t>(k.heads));
    if (k.bias > 0.0f) w.f32(a + ".attention.max_alibi_bias", k.bias);
    const auto c = parse(w);
    REQUIRE(c.scheme == posenc::HfPositionScheme::kAlibi);
    CHECK(c.alibi_max_bias == k.expect_bias);
    REQUIRE(c.alibi_slopes.size() == static_cast<std::size_t>(k.heads));
    for (int h = 0; h < k.heads; ++h) {
      CAPTURE(h);
      CHECK_THAT(c.alibi_slopes[static_cast<std::size_t>(h)],
                 WithinRel(static_cast<double>(ggml_slope(k.heads, k.expect_bias, h)), 1e-14));
    }
    CHECK(posenc::hf_attention_params(c, 0).alibi_slopes == c.alibi_slopes);
  }
}

TEST_CASE("gguf config: ALiBi slopes per layer follow each layer's own head count", "[gguf]") {
  // llama.cpp's soft_max_ext forms the slopes from the tensor's head count (ne02), so layers of
  // 8 and 4 heads (max_bias 8, powers of two) have 2^-(h + 1) and 2^-2(h + 1) (Press et al.
  // 2022: 2^(-8 (h + 1) / n)). The fuzz driver found layer 1 given layer 0's 8 slopes.
  GgufWriter w;
  w.str("general.architecture", "mpt")
      .u32("mpt.context_length", 2048)
      .u32("mpt.embedding_length", 512)
      .u32("mpt.block_count", 3)
      .i32_array("mpt.attention.head_count", {8, 4, 0})
      .i32_array("mpt.attention.head_count_kv", {8, 4, 0})
      .f32("mpt.attention.max_alibi_bias", 8.0f);
  const auto c = parse(w);
  REQUIRE(c.scheme == posenc::HfPositionScheme::kAlibi);
  REQUIRE(c.num_attention_heads == 8);
  for (int layer = 0; layer < 2; ++layer) {
    CAPTURE(layer);
    const int heads = layer == 0 ? 8 : 4;
    const auto p = posenc::hf_attention_params(c, layer);
    REQUIRE(p.alibi_slopes.size() == static_cast<std::size_t>(heads));
    for (int h = 0; h < heads; ++h) {
      CHECK(p.alibi_slopes[static_cast<std::size_t>(h)] ==
            std::ldexp(1.0, -(8 / heads) * (h + 1)));
    }
  }
  CHECK(posenc::hf_attention_params(c, 2).alibi_slopes == c.alibi_slopes);  // no heads there
}

TEST_CASE("gguf config: learned tables, encoders, T5 buckets, Granite's scale", "[gguf]") {
  {  // GPT-2: a position_embd table, causal.
    GgufWriter w;
    w.str("general.architecture", "gpt2")
        .u32("gpt2.context_length", 1024)
        .u32("gpt2.embedding_length", 768)
        .u32("gpt2.block_count", 12)
        .u32("gpt2.attention.head_count", 12);
    w.tensor("position_embd.weight", {768, 1024}, posenc::kGgmlTypeF32, {});
    const auto c = parse(w);
    CHECK(c.scheme == posenc::HfPositionScheme::kAbsolute);
    REQUIRE(c.absolute);
    CHECK(c.absolute->kind == posenc::HfAbsoluteKind::kLearned);
    CHECK(c.mask == posenc::MaskMode::kCausal);
    CHECK(c.softmax_scale == 0.125);
    CHECK_THAT(c.notes.back(), Contains("1024 rows"));
  }
  {  // BERT: attention.causal = false.
    GgufWriter w;
    w.str("general.architecture", "bert")
        .u32("bert.context_length", 512)
        .u32("bert.embedding_length", 384)
        .u32("bert.block_count", 12)
        .u32("bert.attention.head_count", 12)
        .boolean("bert.attention.causal", false);
    w.tensor("position_embd.weight", {384, 512}, posenc::kGgmlTypeF32, {});
    const auto c = parse(w);
    CHECK(c.scheme == posenc::HfPositionScheme::kAbsolute);
    CHECK(c.mask == posenc::MaskMode::kBidirectional);
    CHECK(posenc::hf_attention_params(c, 11).mask == posenc::MaskMode::kBidirectional);
  }
  {  // Nomic-BERT: a RoPE encoder (NEOX).
    GgufWriter w;
    w.str("general.architecture", "nomic-bert")
        .u32("nomic-bert.context_length", 2048)
        .u32("nomic-bert.embedding_length", 768)
        .u32("nomic-bert.block_count", 12)
        .u32("nomic-bert.attention.head_count", 12)
        .boolean("nomic-bert.attention.causal", false)
        .f32("nomic-bert.rope.freq_base", 1000.0f);
    const auto c = parse(w);
    CHECK(c.scheme == posenc::HfPositionScheme::kRope);
    CHECK(c.rope.layout == RopeLayout::kHalfSplit);
    CHECK(c.rope.theta == 1000.0);
    CHECK(c.mask == posenc::MaskMode::kBidirectional);
  }
  {  // T5 encoder.
    GgufWriter w;
    w.str("general.architecture", "t5encoder")
        .u32("t5encoder.context_length", 512)
        .u32("t5encoder.embedding_length", 4096)
        .u32("t5encoder.block_count", 24)
        .u32("t5encoder.attention.head_count", 64)
        .u32("t5encoder.attention.key_length", 64)
        .u32("t5encoder.attention.relative_buckets_count", 32);
    const auto c = parse(w);
    CHECK(c.scheme == posenc::HfPositionScheme::kRelativeBias);
    CHECK(c.relative_attention_num_buckets == 32);
    CHECK(c.relative_attention_max_distance == 128);
    CHECK(c.mask == posenc::MaskMode::kBidirectional);
    CHECK(c.softmax_scale == 1.0);
    CHECK(c.attention_head_dim == 64);
  }
  {  // Granite: attention.scale replaces 1 / sqrt(head_dim); the legacy linear key.
    GgufWriter w;
    w.str("general.architecture", "granite")
        .u32("granite.context_length", 4096)
        .u32("granite.embedding_length", 2048)
        .u32("granite.block_count", 40)
        .u32("granite.attention.head_count", 32)
        .u32("granite.attention.head_count_kv", 8)
        .f32("granite.attention.scale", 0.015625f)
        .f32("granite.rope.scale_linear", 2.0f);
    const auto c = parse(w);
    CHECK(c.softmax_scale == 0.015625);
    CHECK(posenc::hf_attention_params(c, 0).scale == 0.015625);
    CHECK(c.rope.layout == RopeLayout::kInterleaved);
    CHECK(c.rope.scaling.type == RopeScalingType::kLinear);
    CHECK(c.rope.scaling.factor == 2.0);
  }
}

TEST_CASE("gguf config: Llama-4's chunked RoPE layers, NoPE layers and temperature", "[gguf]") {
  for (bool no_chunks : {false, true}) {
    CAPTURE(no_chunks);
    GgufWriter w;
    w.str("general.architecture", "llama4")
        .u32("llama4.context_length", 10485760)
        .u32("llama4.embedding_length", 5120)
        .u32("llama4.block_count", 48)
        .u32("llama4.attention.head_count", 40)
        .u32("llama4.attention.head_count_kv", 8)
        .u32("llama4.rope.dimension_count", 128)
        .f32("llama4.rope.freq_base", 500000.0f);
    if (no_chunks) w.u32("llama4.attention.sliding_window", 0);
    const auto c = parse(w);
    for (Eigen::Index i = 0; i < 48; ++i) {
      CAPTURE(i);
      const bool nope = !no_chunks && (i + 1) % 4 == 0;
      const auto a = posenc::hf_attention_params(c, i);
      CHECK(a.attention_chunk_size == (no_chunks || nope ? 0 : 8192));
      CHECK(a.query_temperature.has_value() == nope);
      CHECK(c.layer_uses_rope[static_cast<std::size_t>(i)] == !nope);
    }
  }
}

TEST_CASE("gguf config: Cohere2 rotates its sliding layers only", "[gguf]") {
  GgufWriter w;
  w.str("general.architecture", "cohere2")
      .u32("cohere2.context_length", 8192)
      .u32("cohere2.embedding_length", 4096)
      .u32("cohere2.block_count", 8)
      .u32("cohere2.attention.head_count", 32)
      .u32("cohere2.attention.head_count_kv", 8)
      .f32("cohere2.rope.freq_base", 50000.0f)
      .u32("cohere2.attention.sliding_window", 4096);
  const auto c = parse(w);
  for (Eigen::Index i = 0; i < 8; ++i) {
    CAPTURE(i);
    CHECK(posenc::hf_layer_is_sliding(c, i) == (i % 4 != 3));
    CHECK(c.layer_uses_rope[static_cast<std::size_t>(i)] == (i % 4 != 3));
  }
  // An explicit pattern wins: a period of 2, then one flag per layer.
  GgufWriter p2 = w;
  p2.u32("cohere2.attention.sliding_window_pattern", 2);
  const auto c2 = parse(p2);
  for (Eigen::Index i = 0; i < 8; ++i) CHECK(posenc::hf_layer_is_sliding(c2, i) == (i % 2 == 0));
  GgufWriter flags = w;
  flags.bool_array("cohere2.attention.sliding_window_pattern",
                   {false, true, true, false, false, false, true, true});
  const auto c3 = parse(flags);
  CHECK(posenc::hf_layer_is_sliding(c3, 0) == false);
  CHECK(posenc::hf_layer_is_sliding(c3, 1) == true);
  CHECK(posenc::hf_layer_is_sliding(c3, 5) == false);
  CHECK(posenc::hf_layer_is_sliding(c3, 7) == true);
}

TEST_CASE("gguf config: a window applies where llama.cpp applies one", "[gguf]") {
  const auto file = [](bool pattern) {
    GgufWriter w;
    w.str("general.architecture", "exaone4")
        .u32("exaone4.context_length", 65536)
        .u32("exaone4.embedding_length", 5120)
        .u32("exaone4.block_count", 8)
        .u32("exaone4.attention.head_count", 40)
        .u32("exaone4.attention.head_count_kv", 8)
        .u32("exaone4.attention.sliding_window", 4096);
    if (pattern) w.u32("exaone4.attention.sliding_window_pattern", 4);
    return w;
  };
  const auto with = parse(file(true));
  for (Eigen::Index i = 0; i < 8; ++i) CHECK(posenc::hf_layer_is_sliding(with, i) == (i % 4 != 3));
  const auto without = parse(file(false));
  CHECK(without.sliding_window == 0);
  CHECK(without.layer_types.empty());
  for (Eigen::Index i = 0; i < 8; ++i) CHECK_FALSE(posenc::hf_layer_is_sliding(without, i));
}

TEST_CASE("gguf config: an architecture outside the table needs a layout", "[gguf]") {
  GgufWriter w;
  w.str("general.architecture", "newmodel")
      .u32("newmodel.context_length", 4096)
      .u32("newmodel.embedding_length", 1024)
      .u32("newmodel.block_count", 2)
      .u32("newmodel.attention.head_count", 8);
  const auto bytes = w.bytes();
  REQUIRE_THROWS_AS(posenc_test::parse_gguf_config(bytes.data(), bytes.size(), "n.gguf"), std::invalid_argument);
  REQUIRE_THROWS_WITH(posenc_test::parse_gguf_config(bytes.data(), bytes.size(), "n.gguf"),
                      Contains("architecture \"newmodel\" is not in posenc's table of ggml rope types"));
  posenc::GgufConfigOptions o;
  o.layout = RopeLayout::kHalfSplit;
  const auto c = posenc_test::parse_gguf_config(bytes.data(), bytes.size(), "n.gguf", o);
  CHECK(c.rope.layout == RopeLayout::kHalfSplit);
  CHECK(c.layout_reason == "caller override");
}

TEST_CASE("gguf config: bad files name the key and the value", "[gguf]") {
  const auto base = [](const std::string& arch) {
    GgufWriter w;
    w.str("general.architecture", arch)
        .u32(arch + ".context_length", 4096)
        .u32(arch + ".embedding_length", 4096)
        .u32(arch + ".block_count", 4)
        .u32(arch + ".attention.head_count", 32);
    return w;
  };
  refuse(GgufWriter().u32("llama.context_length", 1), "key \"general.architecture\" is missing");
  {
    GgufWriter w;
    w.str("general.architecture", "llama").u32("llama.embedding_length", 4096).u32("llama.block_count", 1);
    refuse(w, "key \"llama.context_length\" is missing");
  }
  {
    GgufWriter w;
    w.str("general.architecture", "llama").str("llama.context_length", "4096");
    refuse(w, "key \"llama.context_length\" must be an integer, got string");
  }
  {
    GgufWriter w;
    w.str("general.architecture", "llama")
        .u32("llama.context_length", 4096)
        .u32("llama.embedding_length", 4096)
        .u32("llama.block_count", 4);
    refuse(w, "key \"llama.attention.head_count\" is missing");
  }
  refuse(base("llama").u32("llama.attention.head_count_kv", 5),
         "key \"llama.attention.head_count_kv\" = 5 on layer 0 must divide head_count = 32");
  refuse(base("llama").str("llama.rope.scaling.type", "su"),
         "key \"llama.rope.scaling.type\" = \"su\" is not one of none, linear, yarn, longrope");
  refuse(base("llama").f32("llama.rope.scaling.factor", 0.5f),
         "key \"llama.rope.scaling.factor\" = 0.5 must be >= 1");
  refuse(base("llama").u32("llama.rope.dimension_count", 130),
         "key \"llama.rope.dimension_count\" = 130 must be even and <= the head (128)");
  refuse(base("llama").f32("llama.rope.freq_base", 1.0f), "key \"llama.rope.freq_base\" = 1 must be > 1");
  {
    GgufWriter w = base("llama");
    w.tensor("rope_freqs.weight", {63}, posenc::kGgmlTypeF32, std::vector<unsigned char>(252));
    refuse(w, "tensor \"rope_freqs.weight\" has 63 values; rope.dimension_count / 2 = 64 expected");
  }
  {
    GgufWriter w = base("llama");
    std::vector<float> bad(64, 1.0f);
    bad[9] = 0.0f;
    w.tensor("rope_freqs.weight", {64}, posenc::kGgmlTypeF32, w.f32_bytes(bad));
    refuse(w, "freq_factors[9] = 0 must be finite and > 0");
  }
  {
    GgufWriter w = base("phi3");
    w.tensor("rope_factors_long.weight", {64}, posenc::kGgmlTypeF32, std::vector<unsigned char>(256));
    refuse(w, "LongRoPE needs both tensors rope_factors_long.weight and rope_factors_short.weight; "
              "the file has only the long one");
  }
  refuse(base("qwen2vl").i32_array("qwen2vl.rope.dimension_sections", {16, 24, 20, 0}),
         "key \"qwen2vl.rope.dimension_sections\" sums to 60; rope.dimension_count / 2 = 64 expected");
  // INT64_MAX entries wrapped the sum back to 64 and were loaded.
  const std::int64_t big = std::numeric_limits<std::int64_t>::max();
  refuse(base("qwen2vl").i64_array("qwen2vl.rope.dimension_sections", {big, big, 66, 0}),
         "key \"qwen2vl.rope.dimension_sections\" [0] = 9223372036854775807 must be in [0, "
         "rope.dimension_count / 2 = 64]");
  // A negative scale was stored, then ignored by hf_attention_params (1 / sqrt(d) instead).
  refuse(base("granite").f32("granite.attention.scale", -0.0078125f),
         "key \"granite.attention.scale\" = -0.0078125 must be > 0 (0 = the default)");
  refuse(base("mamba"), "architecture \"mamba\" applies no RoPE in llama.cpp");
  // Sliding heads narrower than the rotation the full layers default to.
  refuse(base("gemma2")
             .u32("gemma2.attention.key_length", 128)
             .u32("gemma2.attention.sliding_window", 4096)
             .u32("gemma2.attention.key_length_swa", 64),
         "key \"gemma2.attention.key_length_swa\" gives 128 rotated dims on heads of 64");
  refuse(base("gemma2").u32("gemma2.attention.sliding_window", 4096).u32_array(
             "gemma2.attention.sliding_window_pattern", {1, 0, 1, 0}),
         "must be an array of bools, got array of u32");
  refuse(base("hunyuan-dense")
             .u32("hunyuan-dense.rope.dimension_count", 64)
             .f32("hunyuan-dense.rope.scaling.alpha", 1000.0f),
         "key \"hunyuan-dense.rope.scaling.alpha\" = 1000 on a partial rotation");
  refuse(base("hunyuan-dense")
             .str("hunyuan-dense.rope.scaling.type", "linear")
             .f32("hunyuan-dense.rope.scaling.factor", 2.0f)
             .f32("hunyuan-dense.rope.scaling.alpha", 1000.0f),
         "with rope.scaling.type linear or rope_freqs: posenc does not combine them");
  refuse(base("hunyuan-dense").f32("hunyuan-dense.rope.scaling.alpha", 0.5f),
         "must be >= 1");
  {
    GgufWriter w;
    w.str("general.architecture", "llama")
        .u32("llama.context_length", 4096)
        .u32("llama.embedding_length", 4096)
        .u32("llama.block_count", 4)
        .u32("llama.attention.head_count", 0);
    refuse(w, "key \"llama.attention.head_count\" gives no layer attention heads");
  }
}

TEST_CASE("gguf config: Hunyuan's NTK-alpha on hunyuan-dense and hunyuan_vl only", "[gguf]") {
  const auto file = [](const std::string& arch) {
    GgufWriter w;
    w.str("general.architecture", arch)
        .u32(arch + ".context_length", 262144)
        .u32(arch + ".embedding_length", 4096)
        .u32(arch + ".block_count", 2)
        .u32(arch + ".attention.head_count", 32)
        .u32(arch + ".attention.head_count_kv", 8)
        .f32(arch + ".rope.freq_base", 10000.0f)
        .f32(arch + ".rope.scaling.alpha", 1000.0f);
    return w;
  };
  // llama.cpp (hunyuan_vl's load_arch_hparams): base = theta * alpha^(d / (d - 2)), d = 128.
  const long double base = 10000.0L * std::pow(1000.0L, 128.0L / 126.0L);
  for (const char* arch : {"hunyuan-dense", "hunyuan_vl"}) {
    CAPTURE(arch);
    const auto c = parse(file(arch));
    CHECK(c.rope.scaling.type == RopeScalingType::kNtk);
    const auto f = posenc::compute_rope_frequencies(c.rope);
    for (int j = 0; j < 64; ++j) {
      CAPTURE(j);
      REQUIRE_THAT(f.inv_freq[static_cast<std::size_t>(j)],
                   WithinRel(static_cast<double>(theta_j(base, j, 128)), 1e-12));
    }
  }
  // Other architectures read the key and ignore it (llama.cpp): noted, not applied.
  const auto other = parse(file("qwen2"));
  CHECK(other.rope.scaling.type == RopeScalingType::kDefault);
  CHECK(posenc::compute_rope_frequencies(other.rope).inv_freq[1] ==
        std::pow(10000.0, -2.0 / 128.0));
  bool noted = false;
  for (const auto& n : other.notes) noted = noted || n.find("not applied") != std::string::npos;
  CHECK(noted);
}

TEST_CASE("gguf config: the sparse-attention indexer keys of deepseek32 and glm-dsa", "[gguf]") {
  const auto file = [](const std::string& arch, int indexer_length) {
    GgufWriter w;
    w.str("general.architecture", arch)
        .u32(arch + ".context_length", 163840)
        .u32(arch + ".embedding_length", 7168)
        .u32(arch + ".block_count", 2)
        .u32(arch + ".attention.head_count", 128)
        .u32(arch + ".attention.head_count_kv", 1)
        .u32(arch + ".attention.key_length", 576)
        .u32(arch + ".attention.value_length", 512)
        .u32(arch + ".attention.key_length_mla", 192)
        .u32(arch + ".attention.value_length_mla", 128)
        .u32(arch + ".attention.kv_lora_rank", 512)
        .u32(arch + ".rope.dimension_count", 64);
    if (indexer_length > 0) {
      w.u32(arch + ".attention.indexer.head_count", 64)
          .u32(arch + ".attention.indexer.key_length", static_cast<std::uint32_t>(indexer_length))
          .u32(arch + ".attention.indexer.top_k", 2048);
    }
    return w;
  };
  // llama.cpp's graphs: NEOX on deepseek32's indexer, NORM on glm-dsa's; the first 64 dims.
  for (const char* arch : {"deepseek32", "glm-dsa"}) {
    CAPTURE(arch);
    const auto c = parse(file(arch, 128));
    CHECK(c.index_head_dim == 128);
    CHECK(c.index_n_heads == 64);
    CHECK(c.index_topk == 2048);
    CHECK(c.rope.layout == RopeLayout::kInterleaved);
    CHECK(c.indexer_layout == (std::string(arch) == "glm-dsa" ? RopeLayout::kInterleaved
                                                               : RopeLayout::kHalfSplit));
    const auto idx = posenc::hf_mla_rope_params(c, posenc::HfMlaHead::kIndexer);
    CHECK(idx.rotary_offset == 0);
    CHECK(posenc::resolved_rotary_dim(idx) == 64);
  }
  const auto refuse = [](const GgufWriter& w, const std::string& what) {
    INFO(what);
    const auto bytes = w.bytes();
    REQUIRE_THROWS_AS(posenc_test::parse_gguf_config(bytes.data(), bytes.size()), std::invalid_argument);
    REQUIRE_THROWS_WITH(posenc_test::parse_gguf_config(bytes.data(), bytes.size()), Contains(what));
  };
  refuse(file("deepseek32", 0),
         "key \"deepseek32.attention.indexer.key_length\" is missing (llama.cpp requires it)");
  refuse(file("glm-dsa", 32), "key \"glm-dsa.attention.indexer.key_length\" = 32 must be in [64, ");
  // An architecture whose indexer layout posenc does not know: said, not guessed.
  const auto other = parse(file("deepseek2", 128));
  CHECK(other.index_head_dim == 0);
  bool noted = false;
  for (const auto& n : other.notes) noted = noted || n.find("indexer of deepseek2 is not read") != std::string::npos;
  CHECK(noted);
}

TEST_CASE("gguf config: head counts per layer, and layers without attention", "[gguf]") {
  // OpenELM: both counts grow with depth (convert_hf_to_gguf.py writes num_query_heads /
  // num_kv_heads as arrays).
  GgufWriter w;
  w.str("general.architecture", "openelm")
      .u32("openelm.context_length", 2048)
      .u32("openelm.embedding_length", 1280)
      .u32("openelm.block_count", 3)
      .i32_array("openelm.attention.head_count", {12, 16, 20})
      .i32_array("openelm.attention.head_count_kv", {3, 4, 5})
      .u32("openelm.attention.key_length", 64)
      .u32("openelm.rope.dimension_count", 64);
  const auto c = parse(w);
  CHECK(c.num_attention_heads == 12);
  CHECK(c.num_key_value_heads == 3);
  CHECK(c.rope.head_dim == 64);
  CHECK(c.layer_num_attention_heads == std::vector<Eigen::Index>{12, 16, 20});
  CHECK(c.layer_num_key_value_heads == std::vector<Eigen::Index>{3, 4, 5});
  for (Eigen::Index i = 0; i < 3; ++i) {
    CHECK(posenc::hf_layer_heads(c, i).num_attention_heads == 12 + 4 * i);
    CHECK(posenc::hf_layer_heads(c, i).num_key_value_heads == 3 + i);
  }
  CHECK(c.layer_uses_rope.empty());
  REQUIRE_THROWS_AS(posenc::hf_layer_heads(c, 3), std::out_of_range);
  // LFM2 (convert_hf_to_gguf.py's LFM2Model): head_count a scalar, head_count_kv 0 on the
  // short-convolution layers; LiquidAI/LFM2-1.2B's first attention layer is layer 2.
  const std::vector<std::int32_t> kv_heads = {0, 0, 8, 0, 0, 8, 0, 0, 8, 0, 8, 0, 8, 0, 8, 0};
  GgufWriter lfm2;
  lfm2.str("general.architecture", "lfm2")
      .u32("lfm2.context_length", 128000)
      .u32("lfm2.embedding_length", 2048)
      .u32("lfm2.block_count", 16)
      .u32("lfm2.attention.head_count", 32)
      .i32_array("lfm2.attention.head_count_kv", kv_heads)
      .f32("lfm2.rope.freq_base", 1000000.0f);
  const auto l = parse(lfm2);
  CHECK(l.num_attention_heads == 32);
  CHECK(l.num_key_value_heads == 8);
  CHECK(l.rope.head_dim == 64);
  CHECK(l.rope.theta == 1000000.0);
  REQUIRE(l.layer_uses_rope.size() == 16);
  for (std::size_t i = 0; i < 16; ++i) {
    INFO("layer " << i);
    const auto h = posenc::hf_layer_heads(l, static_cast<Eigen::Index>(i));
    CHECK(h.num_attention_heads == (kv_heads[i] > 0 ? 32 : 0));
    CHECK(h.num_key_value_heads == kv_heads[i]);
    CHECK(l.layer_uses_rope[i] == (kv_heads[i] > 0));
  }
  // Uniform counts keep the lists empty.
  GgufWriter same;
  same.str("general.architecture", "openelm")
      .u32("openelm.context_length", 2048)
      .u32("openelm.embedding_length", 1280)
      .u32("openelm.block_count", 2)
      .i32_array("openelm.attention.head_count", {16, 16})
      .u32("openelm.attention.head_count_kv", 4);
  const auto u = parse(same);
  CHECK(u.layer_num_attention_heads.empty());
  CHECK(posenc::hf_layer_heads(u, 1).num_key_value_heads == 4);
  GgufWriter bad;
  bad.str("general.architecture", "openelm")
      .u32("openelm.context_length", 2048)
      .u32("openelm.embedding_length", 1280)
      .u32("openelm.block_count", 3)
      .i32_array("openelm.attention.head_count", {12, 16});
  const auto bytes = bad.bytes();
  REQUIRE_THROWS_WITH(posenc_test::parse_gguf_config(bytes.data(), bytes.size()),
                      Contains("\"openelm.attention.head_count\" has 2 entries; one per layer (block_count = 3) expected"));
}

TEST_CASE("gguf config: OLMo-3's sliding layers rotate unscaled at the main base", "[gguf]") {
  // convert_hf_to_gguf.py's Olmo2Model for Olmo-3-7B style configs: arch olmo2, YaRN type /
  // factor / original length, HF's attention_factor as rope.scaling.attn_factor, the window
  // and one bool per layer from layer_types (or (i + 1) % 4 != 0 without them).
  const auto file = [](bool pattern) {
    GgufWriter w;
    w.str("general.architecture", "olmo2")
        .u32("olmo2.context_length", 65536)
        .u32("olmo2.embedding_length", 4096)
        .u32("olmo2.block_count", 8)
        .u32("olmo2.attention.head_count", 32)
        .u32("olmo2.attention.head_count_kv", 32)
        .f32("olmo2.rope.freq_base", 500000.0f)
        .str("olmo2.rope.scaling.type", "yarn")
        .f32("olmo2.rope.scaling.factor", 8.0f)
        .f32("olmo2.rope.scaling.attn_factor", 1.2079441541679836f)
        .u32("olmo2.rope.scaling.original_context_length", 8192)
        .u32("olmo2.attention.sliding_window", 4096);
    if (pattern) {
      w.bool_array("olmo2.attention.sliding_window_pattern",
                   {true, true, true, false, true, true, true, false});
    }
    return w;
  };
  for (const bool pattern : {true, false}) {
    CAPTURE(pattern);
    const auto c = parse(file(pattern));
    CHECK(c.sliding_window == 4096);
    for (Eigen::Index i = 0; i < 8; ++i) CHECK(posenc::hf_layer_is_sliding(c, i) == (i % 4 != 3));
    REQUIRE(c.layer_ropes.size() == 2);
    const auto& full = c.layer_ropes[0];
    const auto& swa = c.layer_ropes[1];
    REQUIRE(full.layer_type == "full_attention");
    REQUIRE(swa.layer_type == "sliding_attention");
    CHECK(swa.num_layers == 6);
    const auto ff = posenc::compute_rope_frequencies(full.params);
    const auto fs = posenc::compute_rope_frequencies(swa.params);
    REQUIRE(ff.inv_freq.size() == 64);
    REQUIRE(fs.inv_freq.size() == 64);
    for (int j = 0; j < 64; ++j) {
      CAPTURE(j);
      const auto u = static_cast<std::size_t>(j);
      const long double want = yarn_inv_freq(5e5L, j, 128, 8.0L, 8192.0L, 32.0L, 1.0L);
      CHECK_THAT(ff.inv_freq[u], WithinRel(static_cast<double>(want), 1e-13));
      CHECK_THAT(fs.inv_freq[u], WithinRel(static_cast<double>(theta_j(5e5L, j, 128)), 1e-13));
    }
    // llama.cpp (llama-context.cpp, since PR #17945) keeps its own YaRN factor g(8) and
    // multiplies rope.scaling.attn_factor onto it; its olmo2 graph passes attn_factor 1 on
    // the sliding layers.
    const long double g8 = 0.1L * std::log(8.0L) + 1.0L;
    const long double stored = 1.2079441541679836f;  // the file's f32
    CHECK_THAT(ff.attention_factor, WithinRel(static_cast<double>(g8 * stored), 1e-7));
    CHECK(fs.attention_factor == 1.0);
  }
  // llama.cpp loads rope.freq_base_swa for olmo2, but its graph rotates with freq_base.
  GgufWriter with_swa_base = file(true);
  with_swa_base.f32("olmo2.rope.freq_base_swa", 10000.0f);
  CHECK(parse(with_swa_base).layer_ropes[1].params.theta == 500000.0);
}

TEST_CASE("gguf config: llama.cpp's per-architecture rules and defaults", "[gguf]") {
  // Each rule as llama.cpp has it (llama_model_rope_type, llm_load_hparams): a minimal file per
  // architecture, the expected value from the rule itself.
  const auto base = [](const std::string& a, std::uint32_t layers, std::uint32_t embd,
                       std::uint32_t heads) {
    GgufWriter w;
    w.str("general.architecture", a)
        .u32(a + ".context_length", 4096)
        .u32(a + ".embedding_length", embd)
        .u32(a + ".block_count", layers)
        .u32(a + ".attention.head_count", heads);
    return w;
  };
  SECTION("glm4 without dimension_sections rotates NORM (interleaved) pairs") {
    const auto c = parse(base("glm4", 2, 512, 4));
    CHECK(c.scheme == posenc::HfPositionScheme::kRope);
    CHECK(c.rope.layout == posenc::RopeLayout::kInterleaved);
  }
  SECTION("Baichuan-13B (40 layers) is ALiBi with llama.cpp's fixed max_bias 8; 32 layers RoPE") {
    const auto b13 = parse(base("baichuan", 40, 5120, 40));
    REQUIRE(b13.scheme == posenc::HfPositionScheme::kAlibi);
    CHECK(b13.alibi_max_bias == 8.0);
    CHECK(parse(base("baichuan", 32, 4096, 32)).scheme == posenc::HfPositionScheme::kRope);
  }
  SECTION("Gemma-3 27B (62 layers): softmax scale 1 / sqrt(5376 / 32) = 1 / sqrt(168)") {
    GgufWriter w = base("gemma3", 62, 5376, 32);
    w.u32("gemma3.attention.key_length", 128).u32("gemma3.attention.value_length", 128);
    const auto c = parse(w);
    CHECK_THAT(c.softmax_scale, WithinRel(static_cast<double>(1.0L / std::sqrt(168.0L)), 1e-15));
  }
  SECTION("yarn_ext_factor < 0 means llama.cpp's auto: 1 for YaRN") {
    GgufWriter w = base("qwen3", 2, 1024, 8);
    w.str("qwen3.rope.scaling.type", "yarn")
        .f32("qwen3.rope.scaling.factor", 4.0f)
        .u32("qwen3.rope.scaling.original_context_length", 1024)
        .f32("qwen3.rope.scaling.yarn_ext_factor", -1.0f);
    CHECK(parse(w).rope.scaling.extrapolation_factor == 1.0);
  }
  SECTION("LongRoPE without original_context_length takes context_length as L0") {
    std::vector<float> f(32, 1.0f);
    GgufWriter w = base("phi3", 2, 2048, 32);
    w.u32("phi3.rope.dimension_count", 64);
    w.tensor("rope_factors_long.weight", {32}, posenc::kGgmlTypeF32, w.f32_bytes(f))
        .tensor("rope_factors_short.weight", {32}, posenc::kGgmlTypeF32, w.f32_bytes(f));
    const auto c = parse(w);
    CHECK(c.rope.scaling.type == RopeScalingType::kLongRope);
    CHECK(c.rope.scaling.original_max_position_embeddings == 4096);
  }
}

TEST_CASE("gguf config: more of llama.cpp's reading rules, one file each", "[gguf]") {
  // Expected values from llama.cpp (src/llama-model.cpp load_hparams / llama_model_rope_type,
  // src/llama-hparams.cpp set_swa_pattern, src/llama-context.cpp) and transformers, as noted.
  const auto base = [](const std::string& a, std::uint32_t layers, std::uint32_t embd,
                       std::uint32_t heads, std::uint64_t context = 4096) {
    GgufWriter w;
    w.str("general.architecture", a).u64(a + ".context_length", context);
    w.u32(a + ".embedding_length", embd)
        .u32(a + ".block_count", layers)
        .u32(a + ".attention.head_count", heads);
    return w;
  };
  SECTION("glm4moe without dimension_sections rotates NEOX (half-split) pairs") {
    CHECK(parse(base("glm4moe", 2, 512, 4)).rope.layout == RopeLayout::kHalfSplit);
  }
  SECTION("gpt2 applies no RoPE: refused without a table even when a layout is passed") {
    const auto bytes = base("gpt2", 2, 512, 4).bytes();
    posenc::GgufConfigOptions o;
    o.layout = RopeLayout::kHalfSplit;
    REQUIRE_THROWS_WITH(posenc_test::parse_gguf_config(bytes.data(), bytes.size(), "g.gguf", o),
                        Contains("applies no RoPE in llama.cpp"));
  }
  SECTION("refact is ALiBi with llama.cpp's fixed max_bias 8") {
    const auto c = parse(base("refact", 2, 512, 4));
    REQUIRE(c.scheme == posenc::HfPositionScheme::kAlibi);
    CHECK(c.alibi_max_bias == 8.0);
  }
  SECTION("context_length may be 2^40 (the upper limit itself), not more") {
    const auto w = base("llama", 2, 512, 4, std::uint64_t{1} << 40);
    CHECK(parse(w).max_position_embeddings == (std::int64_t{1} << 40));
    const auto over = base("llama", 2, 512, 4, (std::uint64_t{1} << 40) + 1);
    refuse(over, "key \"llama.context_length\" = 1099511627777 must be in [1, 1099511627776]");
  }
  SECTION("per-layer head counts: a negative entry is refused, 40 layers are read") {
    GgufWriter neg = base("llama", 2, 512, 8);
    neg.i32_array("llama.attention.head_count_kv", {-4, -4});
    refuse(neg, "key \"llama.attention.head_count_kv\" holds -4");
    GgufWriter w;
    w.str("general.architecture", "llama")
        .u32("llama.context_length", 4096)
        .u32("llama.embedding_length", 512)
        .u32("llama.block_count", 40)
        .i32_array("llama.attention.head_count", std::vector<std::int32_t>(40, 8))
        .i32_array("llama.attention.head_count_kv", std::vector<std::int32_t>(40, 2));
    const auto c = parse(w);
    CHECK(c.num_attention_heads == 8);
    CHECK(c.num_key_value_heads == 2);
  }
  SECTION("sliding_window_pattern 1: no layer slides, 0: every layer slides (set_swa_pattern)") {
    for (std::uint32_t period : {1u, 0u}) {
      CAPTURE(period);
      GgufWriter w = base("exaone4", 4, 512, 4);
      w.u32("exaone4.attention.sliding_window", 128)
          .u32("exaone4.attention.sliding_window_pattern", period);
      const auto c = parse(w);
      for (Eigen::Index i = 0; i < 4; ++i) {
        CHECK(posenc::hf_layer_is_sliding(c, i) == (period == 0));
      }
    }
  }
  SECTION("a per-layer pattern of the wrong length is refused") {
    GgufWriter w = base("exaone4", 4, 512, 4);
    w.u32("exaone4.attention.sliding_window", 128)
        .bool_array("exaone4.attention.sliding_window_pattern", {true, false, true});
    refuse(w, "key \"exaone4.attention.sliding_window_pattern\" has 3 entries");
  }
  SECTION("rope.scaling.factor wins over the legacy rope.scale_linear") {
    GgufWriter w = base("llama", 2, 512, 4);
    w.f32("llama.rope.scaling.factor", 2.0f).f32("llama.rope.scale_linear", 4.0f);
    const auto c = parse(w);
    CHECK(c.rope.scaling.type == RopeScalingType::kLinear);
    CHECK(c.rope.scaling.factor == 2.0);
  }
  SECTION("a present rope.scaling.factor of 0 is no scaling: the legacy key is not read") {
    // load_hparams: rope.scale_linear only if rope.scaling.factor is absent, then 0 -> scale 1.
    GgufWriter w = base("llama", 2, 512, 4);
    w.f32("llama.rope.scaling.factor", 0.0f).f32("llama.rope.scale_linear", 4.0f);
    const auto c = parse(w);
    CHECK(c.rope.scaling.type == RopeScalingType::kDefault);
    const auto plan = posenc::compute_rope_frequencies(c.rope, 0);
    for (int j = 0; j < 64; ++j) {
      CAPTURE(j);
      const long double want = std::pow(10000.0L, -2.0L * j / 128.0L);
      REQUIRE_THAT(plan.inv_freq[static_cast<std::size_t>(j)],
                   WithinRel(static_cast<double>(want), 1e-15));
    }
    GgufWriter legacy = base("llama", 2, 512, 4);
    legacy.f32("llama.rope.scale_linear", 4.0f);
    CHECK(parse(legacy).rope.scaling.factor == 4.0);
  }
  SECTION("rope_freqs wins over LongRoPE lists (llama_model::get_rope_factors)") {
    GgufWriter w = base("phi3", 2, 512, 4);
    const std::vector<float> f(64, 2.0f), l(64, 3.0f);
    w.tensor("rope_freqs.weight", {64}, posenc::kGgmlTypeF32, w.f32_bytes(f))
        .tensor("rope_factors_long.weight", {64}, posenc::kGgmlTypeF32, w.f32_bytes(l))
        .tensor("rope_factors_short.weight", {64}, posenc::kGgmlTypeF32, w.f32_bytes(l));
    const auto c = parse(w);
    CHECK(c.rope.scaling.type == RopeScalingType::kDefault);
    CHECK(c.rope.scaling.freq_factors == std::vector<double>(64, 2.0));
  }
  SECTION("yarn with LongRoPE lists is refused") {
    GgufWriter w = base("phi3", 2, 512, 4);
    const std::vector<float> l(64, 3.0f);
    w.str("phi3.rope.scaling.type", "yarn");
    w.tensor("rope_factors_long.weight", {64}, posenc::kGgmlTypeF32, w.f32_bytes(l))
        .tensor("rope_factors_short.weight", {64}, posenc::kGgmlTypeF32, w.f32_bytes(l));
    refuse(w, "key \"phi3.rope.scaling.type\" = \"yarn\" with factor 1 and LongRoPE factor");
  }
  SECTION("LongRoPE's factor is context_length / L0 (transformers _compute_longrope_parameters)") {
    GgufWriter w = base("phi3", 2, 512, 4, 131072);
    const std::vector<float> l(64, 3.0f);
    w.u32("phi3.rope.scaling.original_context_length", 4096);
    w.tensor("rope_factors_long.weight", {64}, posenc::kGgmlTypeF32, w.f32_bytes(l))
        .tensor("rope_factors_short.weight", {64}, posenc::kGgmlTypeF32, w.f32_bytes(l));
    CHECK(parse(w).rope.scaling.factor == 32.0);
  }
  SECTION("yarn_ext_factor 0 is kept: only a negative one means auto") {
    GgufWriter w = base("qwen3", 2, 1024, 8);
    w.str("qwen3.rope.scaling.type", "yarn")
        .f32("qwen3.rope.scaling.factor", 4.0f)
        .u32("qwen3.rope.scaling.original_context_length", 1024)
        .f32("qwen3.rope.scaling.yarn_ext_factor", 0.0f);
    CHECK(parse(w).rope.scaling.extrapolation_factor == 0.0);
  }
  SECTION("original_context_length 0 reads as absent: L0 = context_length (llama-context.cpp)") {
    GgufWriter w = base("qwen3", 2, 1024, 8);
    w.str("qwen3.rope.scaling.type", "yarn")
        .f32("qwen3.rope.scaling.factor", 4.0f)
        .u32("qwen3.rope.scaling.original_context_length", 0);
    const auto c = parse(w);
    const auto plan = posenc::compute_rope_frequencies(c.rope, 0);
    for (int j = 0; j < 64; ++j) {
      CAPTURE(j);
      const long double want = yarn_inv_freq(10000.0L, j, 128, 4.0L, 4096.0L, 32.0L, 1.0L);
      REQUIRE_THAT(plan.inv_freq[static_cast<std::size_t>(j)],
                   WithinRel(static_cast<double>(want), 1e-12));
    }
  }
  SECTION("rope.scaling.attn_factor 0 is refused, naming the key") {
    GgufWriter w = base("llama", 2, 512, 4);
    w.f32("llama.rope.scaling.attn_factor", 0.0f);
    refuse(w, "key \"llama.rope.scaling.attn_factor\" = 0 must be > 0");
  }
  SECTION("rope_freqs of the proportional shape stay factors off a plain whole-head rotation") {
    // 8 pairs at 1 and 8 held still: proportional only on a whole head with no other scaling.
    std::vector<float> f(16, 1.0f);
    for (std::size_t j = 8; j < 16; ++j) f[j] = 1e30f;
    GgufWriter partial = base("qwen3", 2, 512, 8);  // heads of 64, 32 rotated
    partial.u32("qwen3.rope.dimension_count", 32);
    partial.tensor("rope_freqs.weight", {16}, posenc::kGgmlTypeF32, partial.f32_bytes(f));
    const auto p = parse(partial);
    CHECK(p.rope.scaling.type == RopeScalingType::kDefault);
    CHECK(p.rope.scaling.freq_factors.size() == 16);
    GgufWriter linear = base("qwen3", 2, 256, 8);  // heads of 32, all rotated
    linear.f32("qwen3.rope.scaling.factor", 2.0f);
    linear.tensor("rope_freqs.weight", {16}, posenc::kGgmlTypeF32, linear.f32_bytes(f));
    const auto l = parse(linear);
    CHECK(l.rope.scaling.type == RopeScalingType::kLinear);
    CHECK(l.rope.scaling.freq_factors.size() == 16);
    GgufWriter still = base("qwen3", 2, 256, 8);
    still.tensor("rope_freqs.weight", {16}, posenc::kGgmlTypeF32,
                 still.f32_bytes(std::vector<float>(16, 1e30f)));
    const auto s = parse(still);
    CHECK(s.rope.scaling.type == RopeScalingType::kDefault);
    CHECK(s.rope.scaling.freq_factors.size() == 16);
  }
  SECTION("MLA without value_length: v heads of embedding_length / head_count") {
    GgufWriter w = base("deepseek2", 2, 2048, 16);
    w.u32("deepseek2.attention.kv_lora_rank", 512)
        .u32("deepseek2.attention.key_length_mla", 192)
        .u32("deepseek2.rope.dimension_count", 64);
    const auto c = parse(w);
    CHECK(c.v_head_dim == 2048 / 16);
    CHECK(c.qk_nope_head_dim == 192 - 64);
  }
  SECTION("Gemma-2 27B (46 layers): softmax scale 1 / sqrt(4608 / 32) = 1 / 12") {
    GgufWriter w = base("gemma2", 46, 4608, 32);
    w.u32("gemma2.attention.key_length", 128).u32("gemma2.attention.value_length", 128);
    CHECK_THAT(parse(w).softmax_scale, WithinRel(1.0 / 12.0, 1e-15));
  }
  SECTION("llama4 with a non-zero sliding_window still chunks by 8192 (llama.cpp overrides it)") {
    GgufWriter w = base("llama4", 4, 512, 4);
    w.u32("llama4.attention.sliding_window", 4096);
    const auto c = parse(w);
    CHECK(posenc::hf_attention_params(c, 0).attention_chunk_size == 8192);
    CHECK_FALSE(c.layer_uses_rope[3]);
  }
  SECTION("smollm3: every 4th layer is NoPE (n_no_rope_layer_step = 4)") {
    const auto c = parse(base("smollm3", 8, 512, 4));
    REQUIRE(c.layer_uses_rope.size() == 8);
    for (std::size_t i = 0; i < 8; ++i) CHECK(c.layer_uses_rope[i] == ((i + 1) % 4 != 0));
  }
  SECTION("rope.freq_base_swa must be > 1, and the error names it") {
    GgufWriter w = base("exaone4", 4, 512, 4);
    w.u32("exaone4.attention.sliding_window", 128)
        .u32("exaone4.attention.sliding_window_pattern", 4)
        .f32("exaone4.rope.freq_base_swa", 1.0f);
    refuse(w, "key \"exaone4.rope.freq_base_swa\" = 1 must be > 1");
  }
  SECTION("an odd rope.dimension_count is refused, naming the key") {
    GgufWriter w = base("llama", 2, 512, 4);
    w.u32("llama.rope.dimension_count", 63);
    refuse(w, "key \"llama.rope.dimension_count\" = 63 must be even");
  }
  SECTION("rope.dimension_sections must hold exactly 4 integers") {
    GgufWriter w = base("qwen2vl", 2, 1024, 8);
    w.i32_array("qwen2vl.rope.dimension_sections", {16, 24, 24, 0, 0});
    refuse(w, "key \"qwen2vl.rope.dimension_sections\" must hold 4 integers");
  }
}
