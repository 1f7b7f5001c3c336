// A model converted to GGUF reads as the same RoPE as its config.json: each real config of
// tests/data/hf-configs is written out the way llama.cpp's convert_hf_to_gguf.py writes it
// (the converter's rules re-derived here: the generic TextModel keys, LlamaModel's rope_freqs
// tensor, Phi3MiniModel's LongRoPE tensors and attn_factor, DeepseekV2Model's MLA lengths and
// 0.1 * mscale_all_dim), then read back with load_gguf_config and compared with
// load_hf_config's reading of the JSON. The GGUF stores floats where the JSON has doubles,
// so the plans agree to float precision.

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "posenc/gguf_config.hpp"
#include "posenc/hf_config.hpp"
#include "support/gguf_config_loader.hpp"
#include "support/gguf_writer.hpp"
#include "support/hf_config_loader.hpp"

using Catch::Matchers::WithinRel;
using posenc_test::GgufWriter;

namespace {

std::string config_path(const std::string& name) {
  return std::string(POSENC_TEST_DATA_DIR) + "/hf-configs/" + name;
}

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

/// The GGUF's plan equals the config.json's: attention factor, softmax multiplier and every
/// inv_freq within `rel` (a still pair's 0 exactly).
void check_same_plan(const posenc::RopeFrequencies& hf, const posenc::RopeFrequencies& gg,
                     double rel) {
  REQUIRE(gg.inv_freq.size() == hf.inv_freq.size());
  CHECK_THAT(gg.attention_factor, WithinRel(hf.attention_factor, rel));
  CHECK_THAT(gg.softmax_scale_multiplier, WithinRel(hf.softmax_scale_multiplier, rel));
  for (std::size_t j = 0; j < hf.inv_freq.size(); ++j) {
    CAPTURE(j);
    REQUIRE_THAT(gg.inv_freq[j], WithinRel(hf.inv_freq[j], rel));
  }
}

/// convert_hf_to_gguf.py's output for the four families below (metadata and RoPE tensors).
GgufWriter convert(const nlohmann::json& c) {
  const std::string type = c.at("model_type");
  const std::string arch = type == "deepseek_v3"    ? "deepseek2"
                           : type == "deepseek_v32" ? "deepseek32"
                           : type == "glm_moe_dsa"  ? "glm-dsa"
                                                    : type;
  const bool mla = arch == "deepseek2" || arch == "deepseek32" || arch == "glm-dsa";
  const auto u = [](const nlohmann::json& v) { return v.get<std::uint32_t>(); };
  const auto K = [&](const char* k) { return arch + "." + k; };
  const std::uint32_t n_embd = u(c.at("hidden_size"));
  const std::uint32_t n_head = u(c.at("num_attention_heads"));
  GgufWriter w;
  w.str("general.architecture", arch)
      .u32(K("context_length"), u(c.at("max_position_embeddings")))
      .u32(K("embedding_length"), n_embd)
      .u32(K("block_count"), u(c.at("num_hidden_layers")))
      .u32(K("attention.head_count"), n_head)
      .f32(K("rope.freq_base"), c.at("rope_theta").get<float>());
  const nlohmann::json rs = c.value("rope_scaling", nlohmann::json::object());
  const std::string rope_type = rs.value("rope_type", rs.value("type", std::string("default")));

  if (mla) {
    // DeepseekV2Model (MLA era): a single latent kv head.
    const std::uint32_t rope = u(c.at("qk_rope_head_dim")), nope = u(c.at("qk_nope_head_dim"));
    const std::uint32_t rank = u(c.at("kv_lora_rank"));
    w.u32(K("attention.head_count_kv"), 1)
        .u32(K("rope.dimension_count"), rope)
        .u32(K("attention.key_length"), rank + rope)
        .u32(K("attention.value_length"), rank)
        .u32(K("attention.key_length_mla"), nope + rope)
        .u32(K("attention.value_length_mla"), u(c.at("v_head_dim")))
        .u32(K("attention.kv_lora_rank"), rank)
        .f32(K("rope.scaling.yarn_log_multiplier"),
             static_cast<float>(0.1 * rs.at("mscale_all_dim").get<double>()));
    if (c.contains("index_head_dim")) {
      // DeepseekV32Model / GlmMoeDsaModel: the indexer's geometry; its weights as they are.
      w.u32(K("attention.indexer.head_count"), u(c.at("index_n_heads")))
          .u32(K("attention.indexer.key_length"), u(c.at("index_head_dim")))
          .u32(K("attention.indexer.top_k"), u(c.at("index_topk")));
    }
  } else {
    w.u32(K("attention.head_count_kv"), u(c.at("num_key_value_heads")));
  }
  if (rope_type == "yarn") {
    // TextModel: type, factor, original length, and the betas when the config has them.
    w.str(K("rope.scaling.type"), "yarn")
        .f32(K("rope.scaling.factor"), rs.at("factor").get<float>())
        .u32(K("rope.scaling.original_context_length"), u(rs.at("original_max_position_embeddings")));
    if (rs.contains("beta_fast")) w.f32(K("rope.scaling.yarn_beta_fast"), rs.at("beta_fast").get<float>());
    if (rs.contains("beta_slow")) w.f32(K("rope.scaling.yarn_beta_slow"), rs.at("beta_slow").get<float>());
  }
  if (rope_type == "llama3") {
    // LlamaModel.generate_extra_tensors: float32 frequencies, factors by the llama3 rule.
    const auto dim = static_cast<int>(n_embd / n_head);
    w.u32(K("rope.dimension_count"), static_cast<std::uint32_t>(dim));
    const float base = c.at("rope_theta").get<float>();
    const double factor = rs.at("factor"), lf = rs.at("low_freq_factor"), hf = rs.at("high_freq_factor");
    const double l0 = rs.at("original_max_position_embeddings");
    std::vector<float> factors;
    for (int j = 0; j < dim; j += 2) {
      const float freq = 1.0f / std::pow(base, static_cast<float>(j) / static_cast<float>(dim));
      const double wavelen = 2.0 * 3.141592653589793 / static_cast<double>(freq);
      if (wavelen < l0 / hf) {
        factors.push_back(1.0f);
      } else if (wavelen > l0 / lf) {
        factors.push_back(static_cast<float>(factor));
      } else {
        const double smooth = (l0 / wavelen - lf) / (hf - lf);
        factors.push_back(static_cast<float>(1.0 / ((1.0 - smooth) / factor + smooth)));
      }
    }
    w.tensor("rope_freqs.weight", {factors.size()}, posenc::kGgmlTypeF32, w.f32_bytes(factors));
  }
  if (rope_type == "longrope") {
    // Phi3MiniModel: no scaling type; the lists as tensors; attn_factor from the lengths.
    const double orig = c.at("original_max_position_embeddings");
    const double scale = c.at("max_position_embeddings").get<double>() / orig;
    w.u32(K("rope.scaling.original_context_length"), static_cast<std::uint32_t>(orig))
        .u32(K("rope.dimension_count"), n_embd / n_head)
        .f32(K("rope.scaling.attn_factor"),
             static_cast<float>(std::sqrt(1.0 + std::log(scale) / std::log(orig))));
    for (const char* which : {"long", "short"}) {
      const auto list = rs.at(std::string(which) + "_factor").get<std::vector<float>>();
      w.tensor(std::string("rope_factors_") + which + ".weight", {list.size()},
               posenc::kGgmlTypeF32, w.f32_bytes(list));
    }
  }
  return w;
}

}  // namespace

TEST_CASE("hf config vs gguf: a converted model reads as the same RoPE", "[gguf][hf_config]") {
  for (const char* name : {"Llama-3.1-8B.json", "Qwen2.5-7B+qwen-doc-yarn.json",
                           "Phi-3.5-mini-instruct.json", "DeepSeek-V3.json"}) {
    CAPTURE(name);
    const posenc::HfModelConfig hf = posenc_test::load_hf_config(config_path(name));
    const auto bytes = convert(read_json(config_path(name))).bytes();
    const posenc::HfModelConfig gg = posenc_test::parse_gguf_config(bytes.data(), bytes.size(), name);
    CHECK(gg.num_attention_heads == hf.num_attention_heads);
    CHECK(gg.attention_head_dim == hf.attention_head_dim);
    CHECK(gg.rope.head_dim == hf.rope.head_dim);
    CHECK(posenc::resolved_rotary_dim(gg.rope) == posenc::resolved_rotary_dim(hf.rope));
    CHECK(gg.rope.theta == hf.rope.theta);
    CHECK(gg.max_position_embeddings == hf.max_position_embeddings);
    // GGUF Llama weights are permuted to adjacent pairs; the others keep the HF layout.
    const bool llama = hf.model_type == "llama";
    // Llama-3.1's L0 (8192) lives in rope_scaling, which the converter turns into the factor
    // tensor alone: the file does not say it.
    CHECK(gg.trained_length() == (llama ? hf.max_position_embeddings : hf.trained_length()));
    CHECK(gg.rope.layout == (llama ? posenc::RopeLayout::kInterleaved : hf.rope.layout));
    CHECK_THAT(gg.softmax_scale, WithinRel(hf.softmax_scale, 1e-6));
    for (std::int64_t seq_len : {std::int64_t{0}, std::int64_t{4096}, std::int64_t{4097},
                                 std::int64_t{131072}}) {
      CAPTURE(seq_len);
      check_same_plan(posenc::compute_rope_frequencies(hf.rope, seq_len),
                      posenc::compute_rope_frequencies(gg.rope, seq_len), 1e-6);
    }
    if (hf.kv_lora_rank > 0) {
      CHECK(gg.kv_lora_rank == hf.kv_lora_rank);
      CHECK(gg.qk_nope_head_dim == hf.qk_nope_head_dim);
      CHECK(gg.v_head_dim == hf.v_head_dim);
      const auto a = posenc::hf_mla_rope_params(hf, posenc::HfMlaHead::kLatent);
      const auto b = posenc::hf_mla_rope_params(gg, posenc::HfMlaHead::kLatent);
      CHECK(a.head_dim == b.head_dim);
      CHECK(a.rotary_offset == b.rotary_offset);
    }
  }
}

namespace {

/// Gemma-4's text config in transformers 5 form (Gemma4TextConfig's defaults: 256-wide sliding
/// heads at base 10^4, 512-wide full heads with proportional RoPE 0.25 at base 10^6, five
/// sliding layers per full one and the last layer full).
nlohmann::json gemma4_text_config() {
  nlohmann::json types = nlohmann::json::array();
  for (int i = 0; i < 12; ++i) {
    types.push_back((i + 1) % 6 != 0 && i != 11 ? "sliding_attention" : "full_attention");
  }
  return {{"model_type", "gemma4_text"},
          {"hidden_size", 2560},
          {"num_hidden_layers", 12},
          {"num_attention_heads", 8},
          {"num_key_value_heads", 4},
          {"head_dim", 256},
          {"global_head_dim", 512},
          {"max_position_embeddings", 131072},
          {"sliding_window", 512},
          {"layer_types", types},
          {"rope_parameters",
           {{"full_attention",
             {{"rope_type", "proportional"}, {"partial_rotary_factor", 0.25}, {"rope_theta", 1e6}}},
            {"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 10000.0}}}}}};
}

/// convert_hf_to_gguf.py's Gemma4Model (over Gemma3Model and TextModel): full-layer geometry
/// in key_length / rope.dimension_count, the sliding layers' in the _swa keys, the pattern as
/// bools, and proportional RoPE as rope_freqs factors 1 / 1e30.
GgufWriter convert_gemma4(const nlohmann::json& c) {
  const auto u = [](const nlohmann::json& v) { return v.get<std::uint32_t>(); };
  const nlohmann::json& rp = c.at("rope_parameters");
  const std::uint32_t full = u(c.at("global_head_dim")), swa = u(c.at("head_dim"));
  std::vector<bool> pattern;
  for (const auto& t : c.at("layer_types")) pattern.push_back(t == "sliding_attention");
  const auto turning = static_cast<std::size_t>(
      full * rp.at("full_attention").at("partial_rotary_factor").get<double>() / 2);
  std::vector<float> freqs(full / 2, 1e30f);
  std::fill(freqs.begin(), freqs.begin() + static_cast<std::ptrdiff_t>(turning), 1.0f);
  GgufWriter w;
  w.str("general.architecture", "gemma4")
      .u32("gemma4.context_length", u(c.at("max_position_embeddings")))
      .u32("gemma4.embedding_length", u(c.at("hidden_size")))
      .u32("gemma4.block_count", u(c.at("num_hidden_layers")))
      .u32("gemma4.attention.head_count", u(c.at("num_attention_heads")))
      .u32("gemma4.attention.head_count_kv", u(c.at("num_key_value_heads")))
      .u32("gemma4.attention.key_length", full)
      .u32("gemma4.attention.value_length", full)
      .u32("gemma4.attention.key_length_swa", swa)
      .u32("gemma4.attention.value_length_swa", swa)
      .u32("gemma4.attention.sliding_window", u(c.at("sliding_window")))
      .bool_array("gemma4.attention.sliding_window_pattern", pattern)
      .u32("gemma4.rope.dimension_count", full)
      .u32("gemma4.rope.dimension_count_swa", swa)  // partial_rotary_factor 1 on sliding layers
      .f32("gemma4.rope.freq_base", rp.at("full_attention").at("rope_theta").get<float>())
      .f32("gemma4.rope.freq_base_swa", rp.at("sliding_attention").at("rope_theta").get<float>());
  w.tensor("rope_freqs.weight", {freqs.size()}, posenc::kGgmlTypeF32, w.f32_bytes(freqs));
  return w;
}

}  // namespace

TEST_CASE("hf config vs gguf: Gemma-4 reads as the same RoPE per layer type", "[gguf][hf_config]") {
  const nlohmann::json json = gemma4_text_config();
  const posenc::HfModelConfig hf = posenc_test::parse_hf_config(json.dump(), "gemma4.json");
  const auto bytes = convert_gemma4(json).bytes();
  const posenc::HfModelConfig gg = posenc_test::parse_gguf_config(bytes.data(), bytes.size(), "g4");
  CHECK(gg.softmax_scale == hf.softmax_scale);
  CHECK(gg.sliding_window == hf.sliding_window);
  for (Eigen::Index i = 0; i < 12; ++i) {
    CAPTURE(i);
    CHECK(posenc::hf_layer_is_sliding(gg, i) == posenc::hf_layer_is_sliding(hf, i));
  }
  REQUIRE(gg.layer_ropes.size() == hf.layer_ropes.size());
  for (const auto& a : hf.layer_ropes) {
    CAPTURE(a.layer_type);
    const auto b = std::find_if(gg.layer_ropes.begin(), gg.layer_ropes.end(),
                                [&](const auto& r) { return r.layer_type == a.layer_type; });
    REQUIRE(b != gg.layer_ropes.end());
    CHECK(b->num_layers == a.num_layers);
    CHECK(b->params.head_dim == a.params.head_dim);
    CHECK(b->params.layout == a.params.layout);
    CHECK(b->params.theta == a.params.theta);
    CHECK(b->params.partial_rotary_factor == a.params.partial_rotary_factor);
    CHECK(b->params.scaling.type == a.params.scaling.type);
    const auto fa = posenc::compute_rope_frequencies(a.params);
    const auto fb = posenc::compute_rope_frequencies(b->params);
    REQUIRE(fb.rotary_dim == fa.rotary_dim);
    check_same_plan(fa, fb, 1e-12);
  }
}

TEST_CASE("hf config vs gguf: DeepSeek-V3.2's and GLM-5's sparse-attention indexers",
          "[gguf][hf_config][dsa]") {
  // The position keys of deepseek-ai/DeepSeek-V3.2-Exp's config.json; GLM-5 as the same keys
  // with its model_type and indexer_rope_interleave = true.
  nlohmann::json v32 = nlohmann::json::parse(R"({"model_type": "deepseek_v32",
      "hidden_size": 7168, "num_attention_heads": 128, "num_key_value_heads": 128,
      "num_hidden_layers": 61, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128,
      "v_head_dim": 128, "kv_lora_rank": 512, "index_head_dim": 128, "index_n_heads": 64,
      "index_topk": 2048, "rope_theta": 10000, "max_position_embeddings": 163840,
      "rope_interleave": true,
      "rope_scaling": {"type": "yarn", "factor": 40, "original_max_position_embeddings": 4096,
        "beta_fast": 32, "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 1.0}})");
  nlohmann::json glm = v32;
  glm["model_type"] = "glm_moe_dsa";
  glm["indexer_rope_interleave"] = true;
  for (const nlohmann::json& json : {v32, glm}) {
    CAPTURE(json.at("model_type").get<std::string>());
    const posenc::HfModelConfig hf = posenc_test::parse_hf_config(json.dump(), "c.json");
    const auto bytes = convert(json).bytes();
    const posenc::HfModelConfig gg = posenc_test::parse_gguf_config(bytes.data(), bytes.size(), "g");
    CHECK(gg.index_head_dim == hf.index_head_dim);
    CHECK(gg.index_n_heads == hf.index_n_heads);
    CHECK(gg.index_topk == hf.index_topk);
    CHECK(gg.indexer_layout == hf.indexer_layout);
    CHECK(gg.rope.layout == hf.rope.layout);
    CHECK_THAT(gg.softmax_scale, WithinRel(hf.softmax_scale, 1e-6));
    const auto a = posenc::hf_mla_rope_params(hf, posenc::HfMlaHead::kIndexer);
    const auto b = posenc::hf_mla_rope_params(gg, posenc::HfMlaHead::kIndexer);
    CHECK(b.head_dim == a.head_dim);
    CHECK(b.rotary_offset == a.rotary_offset);
    CHECK(b.layout == a.layout);
    check_same_plan(posenc::compute_rope_frequencies(a), posenc::compute_rope_frequencies(b), 1e-6);
  }
}
