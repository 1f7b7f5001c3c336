// HF config.json loader: the published configs in tests/data/hf-configs (expected numbers read
// off the files and SOURCES.md, derived quantities from the formulas by hand), synthetic configs
// for legacy keys / layer types / ALiBi variants, and every bad-input path.

#include <catch2/catch.hpp>

#include <posenc/hf_config.hpp>

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "support/config_notes.hpp"
#include "support/hf_config_loader.hpp"

using posenc_test::has_note;

namespace {

using Catch::Matchers::Contains;
using Catch::Matchers::WithinAbs;
using Catch::Matchers::WithinRel;
using posenc::HfPositionScheme;
using posenc::RopeLayout;
using posenc::RopeScalingType;

std::string config_path(const std::string& name) {
  return std::string(POSENC_TEST_DATA_DIR) + "/hf-configs/" + name;
}

posenc::HfModelConfig load(const std::string& name) {
  return posenc_test::load_hf_config(config_path(name));
}

}  // namespace

TEST_CASE("hf_config: Llama-3.1-8B reads llama3 scaling, theta 500000, half-split",
          "[hf_config][llama3]") {
  const auto c = load("Llama-3.1-8B.json");
  REQUIRE(c.scheme == HfPositionScheme::kRope);
  REQUIRE(c.model_type == "llama");
  REQUIRE(c.rope.theta == 500000.0);
  REQUIRE(c.rope.head_dim == 128);  // 4096 / 32
  REQUIRE(posenc::resolved_rotary_dim(c.rope) == 128);
  REQUIRE(c.rope.layout == RopeLayout::kHalfSplit);  // HF checkpoints: rotate_half
  REQUIRE(c.rope.scaling.type == RopeScalingType::kLlama3);
  REQUIRE(c.rope.scaling.factor == 8.0);
  REQUIRE(c.rope.scaling.low_freq_factor == 1.0);
  REQUIRE(c.rope.scaling.high_freq_factor == 4.0);
  REQUIRE(c.rope.scaling.original_max_position_embeddings == 8192);
  REQUIRE(c.max_position_embeddings == 131072);
  REQUIRE(c.original_max_position_embeddings == 8192);
  REQUIRE(c.num_attention_heads == 32);
  REQUIRE(c.num_key_value_heads == 8);
  REQUIRE(c.num_hidden_layers == 32);
  REQUIRE(c.layer_ropes.size() == 1);
  REQUIRE(c.layer_ropes[0].layer_type == "all");
  REQUIRE_THAT(c.softmax_scale, WithinRel(1.0 / std::sqrt(128.0), 1e-15));
  REQUIRE(has_note(c, "Meta's original or GGUF weights need layout interleaved"));
}

TEST_CASE("hf_config: Llama-2-7b has no rope_theta and takes transformers' default",
          "[hf_config][default]") {
  const auto c = load("Llama-2-7b.json");
  REQUIRE(c.rope.theta == 10000.0);
  REQUIRE(c.rope.scaling.type == RopeScalingType::kDefault);  // "rope_scaling": null
  REQUIRE(c.max_position_embeddings == 2048);
  REQUIRE(c.trained_length() == 2048);
  REQUIRE(c.rope.head_dim == 128);
  REQUIRE(has_note(c, "rope_theta absent"));
}

TEST_CASE("hf_config: DeepSeek-V3 MLA rope head, interleaved, yarn with mscale pair",
          "[hf_config][yarn][deepseek]") {
  const auto c = load("DeepSeek-V3.json");
  REQUIRE(c.rope.head_dim == 64);  // qk_rope_head_dim
  REQUIRE(posenc::resolved_rotary_dim(c.rope) == 64);
  REQUIRE(c.qk_nope_head_dim == 128);
  REQUIRE(c.attention_head_dim == 192);
  REQUIRE(c.rope.layout == RopeLayout::kInterleaved);
  REQUIRE(c.rope.theta == 10000.0);
  const auto& s = c.rope.scaling;
  REQUIRE(s.type == RopeScalingType::kYarn);  // legacy "type": "yarn"
  REQUIRE(s.factor == 40.0);
  REQUIRE(s.mscale == 1.0);
  REQUIRE(s.mscale_all_dim == 1.0);
  REQUIRE(s.beta_fast == 32.0);
  REQUIRE(s.beta_slow == 1.0);
  REQUIRE(s.original_max_position_embeddings == 4096);
  REQUIRE(c.max_position_embeddings == 163840);
  // DeepSeek: cos/sin multiplier g(40,1)/g(40,1) = 1; softmax scale 192^-1/2 * g(40,1)^2 with
  // g(s, m) = 0.1 m ln s + 1 (HF yarn_get_mscale).
  const double g = 0.1 * std::log(40.0) + 1.0;
  const auto f = posenc::compute_rope_frequencies(c.rope);
  REQUIRE_THAT(f.attention_factor, WithinAbs(1.0, 1e-15));
  REQUIRE_THAT(c.softmax_scale, WithinRel(g * g / std::sqrt(192.0), 1e-14));
  REQUIRE(has_note(c, "legacy key for rope_type"));
  REQUIRE(has_note(c, "rotary_offset = 128"));
  // MLA's value heads and latent rank, for KvCache(..., v_head_dim) and KvCache::latent.
  REQUIRE(c.v_head_dim == 128);
  REQUIRE(c.kv_lora_rank == 512);
  REQUIRE(has_note(c, "latent rows of kv_lora_rank + qk_rope_head_dim = 576"));
  // The whole-head plans: the rope slice at the end of a 192-wide [nope | rope] head and of a
  // 576-wide latent row, with the 64-dim head's frequencies (exponent over rotary_dim 64).
  for (const auto& [head, width, offset] :
       {std::tuple{posenc::HfMlaHead::kConcatenated, 192, 128},
        std::tuple{posenc::HfMlaHead::kLatent, 576, 512}}) {
    const auto wide = posenc::hf_mla_rope_params(c, head);
    CHECK(wide.head_dim == width);
    CHECK(wide.rotary_offset == offset);
    CHECK(posenc::resolved_rotary_dim(wide) == 64);
    const auto fw = posenc::compute_rope_frequencies(wide);
    CHECK(fw.inv_freq == f.inv_freq);
    CHECK(fw.attention_factor == f.attention_factor);
    CHECK(fw.softmax_scale_multiplier == f.softmax_scale_multiplier);
    CHECK(fw.rotary_offset == offset);
  }
  REQUIRE_THROWS_WITH(posenc::hf_mla_rope_params(load("Llama-3.1-8B.json"),
                                                 posenc::HfMlaHead::kLatent),
                      Contains("kv_lora_rank = 0: "));
  // A config built by hand: prefix + head_dim overflowed (INT64_MAX + 64).
  auto wide_prefix = c;
  wide_prefix.kv_lora_rank = std::numeric_limits<Eigen::Index>::max();
  REQUIRE_THROWS_WITH(posenc::hf_mla_rope_params(wide_prefix, posenc::HfMlaHead::kLatent),
                      Contains("kv_lora_rank = 9223372036854775807, rope.head_dim = 64") &&
                          Contains("must be in [0, 2^20]"));
  REQUIRE_THROWS_WITH(posenc_test::parse_hf_config(R"({"hidden_size": 64, "num_attention_heads": 4,
                                                   "qk_rope_head_dim": 8, "qk_nope_head_dim": 8,
                                                   "v_head_dim": -3})"),
                      Contains("v_head_dim\" = -3 must be in [0, "));
}

TEST_CASE("hf_config: Phi-3.5-mini longrope with 48-entry lists and top-level original",
          "[hf_config][longrope]") {
  const auto c = load("Phi-3.5-mini-instruct.json");
  REQUIRE(c.rope.head_dim == 96);  // 3072 / 32
  REQUIRE(c.rope.scaling.type == RopeScalingType::kLongRope);
  REQUIRE(c.rope.scaling.short_factor.size() == 48);
  REQUIRE(c.rope.scaling.long_factor.size() == 48);
  REQUIRE(c.rope.scaling.short_factor[0] == 1.0);
  REQUIRE(c.rope.scaling.long_factor[0] == 1.0800000429153442);
  REQUIRE(c.rope.scaling.original_max_position_embeddings == 4096);
  REQUIRE(c.max_position_embeddings == 131072);
  REQUIRE(c.rope.layout == RopeLayout::kHalfSplit);
  // Default attention factor sqrt(1 + ln(131072 / 4096) / ln 4096) = sqrt(1 + 5 / 12).
  const auto f = posenc::compute_rope_frequencies(c.rope);
  REQUIRE_THAT(f.attention_factor, WithinRel(std::sqrt(1.0 + 5.0 / 12.0), 1e-14));
}

TEST_CASE("hf_config: Qwen2.5 base and with the documented yarn block",
          "[hf_config][yarn][qwen]") {
  const auto base = load("Qwen2.5-7B.json");
  REQUIRE(base.rope.theta == 1000000.0);
  REQUIRE(base.rope.head_dim == 128);  // 3584 / 28
  REQUIRE(base.rope.scaling.type == RopeScalingType::kDefault);
  REQUIRE(base.num_key_value_heads == 4);
  REQUIRE(base.sliding_window == 0);  // "use_sliding_window": false
  REQUIRE(has_note(base, "use_sliding_window = false"));
  REQUIRE(load("Phi-3.5-mini-instruct.json").sliding_window == 262144);

  const auto y = load("Qwen2.5-7B+qwen-doc-yarn.json");
  REQUIRE(y.rope.scaling.type == RopeScalingType::kYarn);
  REQUIRE(y.rope.scaling.factor == 4.0);
  REQUIRE(y.rope.scaling.original_max_position_embeddings == 32768);
  const auto f = posenc::compute_rope_frequencies(y.rope);
  REQUIRE_THAT(f.attention_factor, WithinRel(0.1 * std::log(4.0) + 1.0, 1e-14));
  REQUIRE_THAT(f.softmax_scale_multiplier, WithinAbs(1.0, 0.0));
}

TEST_CASE("hf_config: yarn keys other loaders dropped: an explicit factor, attention_factor, "
          "truncate (transformers#38224, vllm#46280, transformers PR#42189)",
          "[hf_config][yarn][field]") {
  // Qwen3's layout: max_position_embeddings 40960 with a yarn block of factor 4 over L0 32768.
  // Revisions of transformers before #40320 replaced the factor by 40960 / 32768 = 1.25.
  const std::string head = R"({"model_type": "qwen3", "hidden_size": 4096, "head_dim": 128,
      "num_attention_heads": 32, "num_key_value_heads": 8, "max_position_embeddings": 40960,
      "rope_theta": 1000000, "rope_scaling": {"rope_type": "yarn", "factor": 4.0,
      "original_max_position_embeddings": 32768)";
  const auto qwen3 = posenc_test::parse_hf_config(head + "}}", "qwen3.json");
  REQUIRE(qwen3.rope.scaling.factor == 4.0);
  REQUIRE(has_note(qwen3, "the explicit factor is used"));
  // Qwen2.5's documented YaRN block added to a config that keeps max_position_embeddings at
  // L0: a ratio of 1, which the older revisions planned as no interpolation at all.
  const auto doc_block = posenc_test::parse_hf_config(R"({"model_type": "qwen2", "hidden_size": 3584,
      "num_attention_heads": 28, "num_key_value_heads": 4, "max_position_embeddings": 32768,
      "rope_theta": 1000000, "rope_scaling": {"type": "yarn", "factor": 4.0,
      "original_max_position_embeddings": 32768}})");
  REQUIRE(doc_block.rope.scaling.factor == 4.0);
  REQUIRE(has_note(doc_block, "original_max_position_embeddings = 1; the explicit factor is used"));
  const auto f = posenc::compute_rope_frequencies(qwen3.rope);
  REQUIRE_THAT(f.attention_factor, WithinRel(0.1 * std::log(4.0) + 1.0, 1e-14));
  // The lowest frequency is interpolated by the factor: base^(-126/128) / 4.
  REQUIRE_THAT(f.inv_freq.back(), WithinRel(std::pow(1e6, -126.0 / 128.0) / 4.0, 1e-12));

  // beta_fast / beta_slow other than the defaults 32 / 1 reach the plan (every checkpoint
  // config here uses the defaults, which a loader ignoring the keys would also produce).
  const auto betas = posenc_test::parse_hf_config(head + R"(, "beta_fast": 16, "beta_slow": 2}})");
  REQUIRE(betas.rope.scaling.beta_fast == 16.0);
  REQUIRE(betas.rope.scaling.beta_slow == 2.0);
  posenc::RopeParams by_hand = qwen3.rope;
  by_hand.scaling.beta_fast = 16.0;
  by_hand.scaling.beta_slow = 2.0;
  const auto fb = posenc::compute_rope_frequencies(betas.rope);
  REQUIRE(fb.inv_freq == posenc::compute_rope_frequencies(by_hand).inv_freq);
  REQUIRE(fb.inv_freq != f.inv_freq);
  // An explicit attention_factor wins over g(s) (vLLM dropped it: Laguna's 1.4159 became 1.0).
  const auto laguna = posenc_test::parse_hf_config(head + R"(, "attention_factor": 1.4159}})");
  REQUIRE(laguna.rope.scaling.attention_factor == 1.4159);
  REQUIRE(posenc::compute_rope_frequencies(laguna.rope).attention_factor == 1.4159);

  // gpt-oss: truncate = false keeps the fractional correction range. The loaded flag must reach
  // the planner: the ramp dims then differ from the truncated plan's.
  const auto oss = posenc_test::parse_hf_config(head + R"(, "truncate": false}})");
  REQUIRE_FALSE(oss.rope.scaling.truncate);
  REQUIRE(qwen3.rope.scaling.truncate);
  const auto g = posenc::compute_rope_frequencies(oss.rope);
  std::size_t differ = 0;
  for (std::size_t j = 0; j < g.inv_freq.size(); ++j) differ += g.inv_freq[j] != f.inv_freq[j];
  REQUIRE(differ > 0);
  REQUIRE_THROWS_WITH(posenc_test::parse_hf_config(head + R"(, "truncate": "no"}})"),
                      Contains("truncate"));
}

TEST_CASE("hf_config: Qwen3-VL's interleaved M-RoPE sections, bad sections name their key",
          "[hf_config][mrope]") {
  // Qwen3-VL-8B-Instruct's text_config: head_dim 128, mrope_section [24, 20, 20] (64 pairs),
  // mrope_interleaved true.
  const std::string head = R"({"model_type": "qwen3_vl", "text_config": {"model_type": "qwen3_vl_text",
      "hidden_size": 4096, "head_dim": 128, "num_attention_heads": 32, "num_key_value_heads": 8,
      "rope_theta": 5000000, "rope_scaling": {"rope_type": "default", )";
  const auto c = posenc_test::parse_hf_config(head + R"("mrope_section": [24, 20, 20], "mrope_interleaved": true}}})");
  REQUIRE(c.mrope.has_value());
  REQUIRE(c.mrope->section == std::array<Eigen::Index, 4>{24, 20, 20});
  REQUIRE(c.mrope->layout == posenc::MRopeSectionLayout::kInterleaved);
  REQUIRE_FALSE(posenc_test::parse_hf_config(R"({"hidden_size": 128, "num_attention_heads": 2})").mrope);

  REQUIRE_THROWS_WITH(posenc_test::parse_hf_config(head + R"("mrope_section": [24, 20]}}})"),
                      Contains("text_config.rope_scaling.mrope_section") && Contains("has 2 entries"));
  REQUIRE_THROWS_WITH(posenc_test::parse_hf_config(head + R"("mrope_section": [24, 20, 21]}}})"),
                      Contains("mrope_section") && Contains("sum to rotary_dim / 2 = 64"));
  REQUIRE_THROWS_WITH(posenc_test::parse_hf_config(head + R"("mrope_section": [24, 19.5, 20.5]}}})"),
                      Contains("mrope_section") && Contains("whole number"));
  REQUIRE_THROWS_WITH(posenc_test::parse_hf_config(head + R"("mrope_section": [24, 20, 20], "mrope_interleaved": 1}}})"),
                      Contains("mrope_interleaved") && Contains("true or false"));
}

TEST_CASE("hf_config: phi-2 partial rotary 0.4 of head 80 rotates 32 dims",
          "[hf_config][partial]") {
  const auto c = load("phi-2.json");
  REQUIRE(c.rope.head_dim == 80);  // 2560 / 32
  REQUIRE(c.rope.partial_rotary_factor == 0.4);
  REQUIRE(posenc::resolved_rotary_dim(c.rope) == 32);  // int(80 * 0.4)
  REQUIRE(c.rope.layout == RopeLayout::kHalfSplit);
}

TEST_CASE("hf_config: gpt-j rotary_dim 64 of head 256, interleaved, n_positions",
          "[hf_config][gptj]") {
  const auto c = load("gpt-j-6b.json");
  REQUIRE(c.rope.head_dim == 256);  // n_embd 4096 / n_head 16
  REQUIRE(c.rope.rotary_dim == 64);
  REQUIRE(c.rope.layout == RopeLayout::kInterleaved);
  REQUIRE(c.max_position_embeddings == 2048);
  REQUIRE(c.rope.theta == 10000.0);

  SECTION("the caller overrides the family layout") {
    posenc::HfConfigOptions o;
    o.layout = RopeLayout::kHalfSplit;
    const auto h = posenc_test::load_hf_config(config_path("gpt-j-6b.json"), o);
    REQUIRE(h.rope.layout == RopeLayout::kHalfSplit);
    REQUIRE(h.layout_reason == "caller override");
  }
}

TEST_CASE("hf_config: bloom is ALiBi with the paper's slopes for its 16 heads",
          "[hf_config][alibi]") {
  const auto c = load("bloom.json");
  REQUIRE(c.scheme == HfPositionScheme::kAlibi);
  REQUIRE(c.alibi_slopes.size() == 16);
  REQUIRE(c.alibi_max_bias == 8.0);
  // Press et al.: m_h = 2^(-8 (h + 1) / 16) for a power-of-two head count.
  for (int h = 0; h < 16; ++h) {
    CAPTURE(h);
    REQUIRE_THAT(c.alibi_slopes[static_cast<std::size_t>(h)],
                 WithinRel(std::pow(2.0, -0.5 * (h + 1)), 1e-15));
  }
}

TEST_CASE("hf_config: MPT attn_config alibi with alibi_bias_max and 12 heads",
          "[hf_config][alibi][mpt]") {
  const auto c = posenc_test::parse_hf_config(R"({"model_type": "mpt", "d_model": 768,
      "n_heads": 12, "max_seq_len": 2048,
      "attn_config": {"alibi": true, "alibi_bias_max": 8}})",
                                         "mpt.json");
  REQUIRE(c.scheme == HfPositionScheme::kAlibi);
  REQUIRE(c.max_position_embeddings == 2048);
  // MPT gen_slopes(12, 8): 2^-1 .. 2^-8, then 2^-0.5, 2^-1.5, 2^-2.5, 2^-3.5.
  const std::vector<double> want = {0.5,       0.25,      0.125,     0.0625,
                                    0.03125,   0.015625,  0.0078125, 0.00390625,
                                    std::pow(2.0, -0.5), std::pow(2.0, -1.5),
                                    std::pow(2.0, -2.5), std::pow(2.0, -3.5)};
  REQUIRE(c.alibi_slopes.size() == want.size());
  for (std::size_t h = 0; h < want.size(); ++h) {
    CAPTURE(h);
    REQUIRE_THAT(c.alibi_slopes[h], WithinRel(want[h], 1e-15));
  }
  const auto b16 = posenc_test::parse_hf_config(
      R"({"n_heads": 4, "d_model": 64, "attn_config": {"alibi": true, "alibi_bias_max": 16}})");
  // 2^(-16 (h + 1) / 4): 1/16, 1/256, ...
  REQUIRE_THAT(b16.alibi_slopes[0], WithinRel(1.0 / 16.0, 1e-15));
  REQUIRE_THAT(b16.alibi_slopes[1], WithinRel(1.0 / 256.0, 1e-15));
}

TEST_CASE("hf_config: legacy names are normalised and reported", "[hf_config][legacy]") {
  SECTION("\"su\" is longrope") {
    std::string sf = "[", lf = "[";
    for (int i = 0; i < 4; ++i) {
      sf += (i ? ", " : "") + std::string("1.0");
      lf += (i ? ", " : "") + std::to_string(2 + i) + ".0";
    }
    sf += "]";
    lf += "]";
    const auto c = posenc_test::parse_hf_config(
        R"({"hidden_size": 32, "num_attention_heads": 4, "max_position_embeddings": 131072,
            "original_max_position_embeddings": 4096,
            "rope_scaling": {"type": "su", "short_factor": )" +
        sf + R"(, "long_factor": )" + lf + "}}");
    REQUIRE(c.rope.scaling.type == RopeScalingType::kLongRope);
    REQUIRE(c.rope.scaling.long_factor[3] == 5.0);
    REQUIRE(has_note(c, "\"su\""));
  }
  SECTION("GPT-NeoX rotary_pct and rotary_emb_base") {
    const auto c = posenc_test::parse_hf_config(
        R"({"model_type": "gpt_neox", "hidden_size": 2048, "num_attention_heads": 16,
            "rotary_pct": 0.25, "rotary_emb_base": 10000, "max_position_embeddings": 2048})");
    REQUIRE(posenc::resolved_rotary_dim(c.rope) == 32);  // int(128 * 0.25)
    REQUIRE(c.rope.layout == RopeLayout::kHalfSplit);
    REQUIRE(has_note(c, "rotary_pct"));
    REQUIRE(has_note(c, "rotary_emb_base"));
  }
  SECTION("Qwen2-VL \"mrope\" plans the text RoPE and keeps the M-RoPE sections") {
    // head_dim 128 / 2 = 64: 16 + 8 + 8 = 32 pairs = rotary_dim / 2.
    const auto c = posenc_test::parse_hf_config(
        R"({"hidden_size": 128, "num_attention_heads": 2, "rope_theta": 1000000.0,
            "rope_scaling": {"type": "mrope", "mrope_section": [16, 8, 8]}})");
    REQUIRE(c.rope.scaling.type == RopeScalingType::kDefault);
    REQUIRE(has_note(c, "mrope"));
    REQUIRE(c.mrope.has_value());
    REQUIRE(c.mrope->section == std::array<Eigen::Index, 4>{16, 8, 8});
    REQUIRE(c.mrope->layout == posenc::MRopeSectionLayout::kContiguous);
  }
  SECTION("a linear Llama-2 extension with the legacy type key") {
    const auto c = posenc_test::parse_hf_config(
        R"({"hidden_size": 4096, "num_attention_heads": 32, "max_position_embeddings": 4096,
            "rope_scaling": {"type": "linear", "factor": 2.0}})");
    REQUIRE(c.rope.scaling.type == RopeScalingType::kLinear);
    REQUIRE(c.rope.scaling.factor == 2.0);
  }
}

TEST_CASE("hf_config: Gemma-2's attention logit soft cap and sliding window are read, a bad cap "
          "names its key", "[hf_config][attention]") {
  const auto c = posenc_test::parse_hf_config(
      R"({"model_type": "gemma2", "hidden_size": 2304, "num_attention_heads": 8,
          "num_key_value_heads": 4, "head_dim": 256, "num_hidden_layers": 26,
          "rope_theta": 10000.0, "sliding_window": 4096, "attn_logit_softcapping": 50.0,
          "final_logit_softcapping": 30.0, "query_pre_attn_scalar": 256,
          "max_position_embeddings": 8192})");
  REQUIRE(c.attn_logit_softcapping == 50.0);  // not final_logit_softcapping (the LM head's)
  REQUIRE(c.sliding_window == 4096);
  const auto none = posenc_test::parse_hf_config(
      R"({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4,
          "attn_logit_softcapping": null})");
  REQUIRE(none.attn_logit_softcapping == 0.0);
  REQUIRE_THROWS_WITH(posenc_test::parse_hf_config(R"({"hidden_size": 64, "num_attention_heads": 4,
                                                   "attn_logit_softcapping": -1})"),
                      Contains("\"attn_logit_softcapping\" = -1 must be finite and > 0"));
}

TEST_CASE("hf_config: per-layer attention parameters follow HF's sliding-layer rules",
          "[hf_config][attention]") {
  // Mistral: no layer_types, every layer slides.
  const auto mistral = posenc_test::parse_hf_config(
      R"({"model_type": "mistral", "hidden_size": 4096, "num_attention_heads": 32,
          "num_key_value_heads": 8, "num_hidden_layers": 32, "sliding_window": 4096,
          "rope_theta": 10000.0, "max_position_embeddings": 32768})");
  for (const Eigen::Index layer : {0, 17, 31}) {
    const auto p = posenc::hf_attention_params(mistral, layer);
    CHECK(p.sliding_window == 4096);
    CHECK(p.mask == posenc::MaskMode::kCausal);
    REQUIRE(p.scale.has_value());
    CHECK_THAT(*p.scale, WithinRel(1.0 / std::sqrt(128.0), 1e-15));
    CHECK(p.logit_softcap == 0.0);
    CHECK(p.alibi_slopes.empty());
  }
  // Gemma-2: no layer_types, the even layers slide (HF: (i + 1) % 2 != 0); the soft cap and
  // query_pre_attn_scalar^-1/2 on every layer.
  const auto gemma2 = posenc_test::parse_hf_config(
      R"({"model_type": "gemma2", "hidden_size": 2304, "num_attention_heads": 8,
          "num_key_value_heads": 4, "head_dim": 256, "num_hidden_layers": 26,
          "rope_theta": 10000.0, "sliding_window": 4096, "attn_logit_softcapping": 50.0,
          "query_pre_attn_scalar": 224, "max_position_embeddings": 8192})");
  CHECK(posenc::hf_attention_params(gemma2, 0).sliding_window == 4096);
  CHECK(posenc::hf_attention_params(gemma2, 1).sliding_window == 0);
  CHECK(posenc::hf_attention_params(gemma2, 24).sliding_window == 4096);
  CHECK(posenc::hf_attention_params(gemma2, 25).logit_softcap == 50.0);
  CHECK_THAT(*posenc::hf_attention_params(gemma2, 3).scale, WithinRel(1.0 / std::sqrt(224.0), 1e-15));
  // Qwen2 with use_sliding_window: layers [max_window_layers, ..) slide.
  const auto qwen = posenc_test::parse_hf_config(
      R"({"model_type": "qwen2", "hidden_size": 3584, "num_attention_heads": 28,
          "num_key_value_heads": 4, "num_hidden_layers": 28, "rope_theta": 1000000.0,
          "use_sliding_window": true, "sliding_window": 32768, "max_window_layers": 21,
          "max_position_embeddings": 131072})");
  CHECK(qwen.max_window_layers == 21);
  CHECK(posenc::hf_attention_params(qwen, 20).sliding_window == 0);
  CHECK(posenc::hf_attention_params(qwen, 21).sliding_window == 32768);
  // The shipped Qwen2.5-7B turns the window off (use_sliding_window = false).
  const auto qwen25 = load("Qwen2.5-7B.json");
  for (Eigen::Index layer = 0; layer < qwen25.num_hidden_layers; ++layer) {
    CHECK(posenc::hf_attention_params(qwen25, layer).sliding_window == 0);
  }
  // Gemma-3: layer_types built from sliding_window_pattern = 6 (layer 5 is full).
  const auto gemma3 = posenc_test::parse_hf_config(
      R"({"model_type": "gemma3_text", "hidden_size": 2560, "num_attention_heads": 8,
          "num_key_value_heads": 4, "head_dim": 256, "num_hidden_layers": 12,
          "rope_theta": 1000000.0, "rope_local_base_freq": 10000.0, "sliding_window": 1024,
          "sliding_window_pattern": 6, "max_position_embeddings": 131072})");
  CHECK(posenc::hf_attention_params(gemma3, 4).sliding_window == 1024);
  CHECK(posenc::hf_attention_params(gemma3, 5).sliding_window == 0);
  // BLOOM: ALiBi slopes, no window.
  const auto bloom = load("bloom.json");
  const auto pb = posenc::hf_attention_params(bloom, 0);
  CHECK(pb.alibi_slopes == bloom.alibi_slopes);
  CHECK(pb.alibi_slopes.size() == static_cast<std::size_t>(bloom.num_attention_heads));
  CHECK(pb.sliding_window == 0);
  // Layers outside the model.
  REQUIRE_THROWS_AS(posenc::hf_attention_params(mistral, 32), std::out_of_range);
  REQUIRE_THROWS_WITH(posenc::hf_attention_params(mistral, -1),
                      Contains("layer = -1 is outside [0, num_hidden_layers = 32)"));
}

TEST_CASE("hf_config: Gemma-3 style sliding layers use the local base, full layers the scaled",
          "[hf_config][layers]") {
  const auto c = posenc_test::parse_hf_config(
      R"({"model_type": "gemma3", "text_config": {"model_type": "gemma3_text",
          "hidden_size": 2560, "num_attention_heads": 8, "num_key_value_heads": 4,
          "head_dim": 256, "num_hidden_layers": 12, "rope_theta": 1000000.0,
          "rope_local_base_freq": 10000.0, "sliding_window_pattern": 6,
          "query_pre_attn_scalar": 256, "max_position_embeddings": 131072,
          "rope_scaling": {"rope_type": "linear", "factor": 8.0}}})");
  REQUIRE(c.model_type == "gemma3_text");
  REQUIRE(c.layer_types.size() == 12);
  REQUIRE(c.layer_types[4] == "sliding_attention");
  REQUIRE(c.layer_types[5] == "full_attention");  // (5 + 1) % 6 == 0
  REQUIRE(c.layer_types[11] == "full_attention");
  REQUIRE(c.layer_ropes.size() == 2);
  const auto& full = c.layer_ropes[0];
  const auto& local = c.layer_ropes[1];
  REQUIRE(full.layer_type == "full_attention");
  REQUIRE(full.num_layers == 2);
  REQUIRE(full.params.theta == 1000000.0);
  REQUIRE(full.params.scaling.type == RopeScalingType::kLinear);
  REQUIRE(local.layer_type == "sliding_attention");
  REQUIRE(local.num_layers == 10);
  REQUIRE(local.params.theta == 10000.0);
  REQUIRE(local.params.scaling.type == RopeScalingType::kDefault);
  REQUIRE(c.rope.theta == 1000000.0);  // main = full attention
  REQUIRE_THAT(c.softmax_scale, WithinRel(1.0 / 16.0, 1e-15));  // 256^-1/2
  REQUIRE(has_note(c, "text_config"));
}

TEST_CASE("hf_config: transformers 5 rope_parameters, flat and keyed by layer type",
          "[hf_config][v5]") {
  SECTION("flat dict carrying rope_theta") {
    const auto c = posenc_test::parse_hf_config(
        R"({"hidden_size": 4096, "num_attention_heads": 32, "max_position_embeddings": 131072,
            "rope_parameters": {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
              "low_freq_factor": 1.0, "high_freq_factor": 4.0,
              "original_max_position_embeddings": 8192}})");
    REQUIRE(c.rope.theta == 500000.0);
    REQUIRE(c.rope.scaling.type == RopeScalingType::kLlama3);
    REQUIRE(!has_note(c, "rope_theta absent"));
  }
  SECTION("keyed by layer type") {
    const auto c = posenc_test::parse_hf_config(
        R"({"hidden_size": 1024, "num_attention_heads": 4, "head_dim": 256,
            "max_position_embeddings": 32768,
            "layer_types": ["sliding_attention", "sliding_attention", "full_attention"],
            "rope_parameters": {
              "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
              "full_attention": {"rope_type": "linear", "factor": 4.0, "rope_theta": 1e6}}})");
    REQUIRE(c.layer_ropes.size() == 2);
    REQUIRE(c.rope.theta == 1e6);
    REQUIRE(c.rope.scaling.factor == 4.0);
    for (const auto& lr : c.layer_ropes) {
      if (lr.layer_type == "sliding_attention") {
        REQUIRE(lr.params.theta == 10000.0);
        REQUIRE(lr.num_layers == 2);
      }
    }
  }
}

TEST_CASE("hf_config: families whose attention applies no RoPE, or sizes it its own way",
          "[hf_config]") {
  const auto nope_layers = [](const posenc::HfModelConfig& c) {
    return std::count(c.layer_uses_rope.begin(), c.layer_uses_rope.end(), false);
  };
  // No rotary embedding in the modeling code at all (Jamba, Nemotron-H, Zamba), or deleted
  // (Kimi-Linear's NoPE MLA): every layer NoPE, whatever rope keys the config carries.
  for (const char* type : {"jamba", "nemotron_h", "zamba", "kimi_linear"}) {
    CAPTURE(type);
    const auto c = posenc_test::parse_hf_config(std::string(R"({"model_type": ")") + type +
                                           R"(", "hidden_size": 1024, "num_attention_heads": 8,
        "num_hidden_layers": 6, "rope_theta": 10000})");
    CHECK(c.layer_uses_rope.size() == 6);
    CHECK(nope_layers(c) == 6);
    CHECK(has_note(c, "no attention layer applies RoPE"));
  }
  // Zamba2: RoPE only with use_mem_rope, on heads of attention_head_dim = 2 hidden / heads.
  const std::string zamba2 = R"({"model_type": "zamba2", "hidden_size": 2560,
      "num_attention_heads": 32, "num_hidden_layers": 4, "rope_theta": 10000)";
  CHECK(nope_layers(posenc_test::parse_hf_config(zamba2 + "}")) == 4);
  const auto mem_rope = posenc_test::parse_hf_config(zamba2 + R"(, "use_mem_rope": true})");
  CHECK(nope_layers(mem_rope) == 0);
  CHECK(mem_rope.rope.head_dim == 160);
  CHECK(posenc::resolved_rotary_dim(mem_rope.rope) == 160);
  // Granite 4.0 (granitemoehybrid): RoPE only with position_embedding_type "rope".
  const std::string granite4 = R"({"model_type": "granitemoehybrid", "hidden_size": 1536,
      "num_attention_heads": 12, "num_hidden_layers": 3, "rope_theta": 10000)";
  CHECK(nope_layers(posenc_test::parse_hf_config(granite4 + "}")) == 3);
  CHECK(nope_layers(posenc_test::parse_hf_config(granite4 + R"(, "position_embedding_type": "rope"})")) == 0);
  // Exaone-4 with a window and AFMoE rotate on their sliding / local layers only.
  const std::string types = R"("layer_types": ["sliding_attention", "sliding_attention",
      "sliding_attention", "full_attention"], "num_hidden_layers": 4)";
  for (const char* type : {"exaone4", "afmoe"}) {
    CAPTURE(type);
    const auto c = posenc_test::parse_hf_config(std::string(R"({"model_type": ")") + type +
                                           R"(", "hidden_size": 1024, "num_attention_heads": 8,
        "rope_theta": 1000000, "sliding_window": 4096, )" + types + "}");
    REQUIRE(c.layer_uses_rope.size() == 4);
    CHECK(c.layer_uses_rope[0]);
    CHECK_FALSE(c.layer_uses_rope[3]);
  }
  // Exaone-4 without a window rotates everywhere (Exaone4Attention: sliding_window is None).
  CHECK(posenc_test::parse_hf_config(R"({"model_type": "exaone4", "hidden_size": 1024,
      "num_attention_heads": 8, "rope_theta": 1000000, )" + types + "}").layer_uses_rope.empty());
  // Bamba hard-codes partial_rotary_factor 0.5; MiniMax-M2 rotates rotary_dim (default half
  // the head) at base 5e6 unless the config says otherwise.
  const auto bamba = posenc_test::parse_hf_config(R"({"model_type": "bamba", "hidden_size": 4096,
      "num_attention_heads": 32, "rope_theta": 10000})");
  CHECK(posenc::resolved_rotary_dim(bamba.rope) == 64);
  const auto m2 = posenc_test::parse_hf_config(R"({"model_type": "minimax_m2", "hidden_size": 3072,
      "num_attention_heads": 48, "head_dim": 128})");
  CHECK(posenc::resolved_rotary_dim(m2.rope) == 64);
  CHECK(m2.rope.theta == 5000000.0);
  const auto m2_given = posenc_test::parse_hf_config(R"({"model_type": "minimax_m2", "hidden_size": 3072,
      "num_attention_heads": 48, "head_dim": 128, "rotary_dim": 32, "rope_theta": 1000000,
      "partial_rotary_factor": 1.0})");
  CHECK(posenc::resolved_rotary_dim(m2_given.rope) == 32);
  CHECK(m2_given.rope.theta == 1000000.0);
  // DBRX keeps rope_theta and its kv head count in attn_config (databricks/dbrx-base).
  const auto dbrx = posenc_test::parse_hf_config(R"({"model_type": "dbrx", "d_model": 6144, "n_heads": 48,
      "max_seq_len": 32768, "attn_config": {"clip_qkv": 8, "kv_n_heads": 8, "rope_theta": 500000}})");
  CHECK(dbrx.rope.theta == 500000.0);
  CHECK(dbrx.num_key_value_heads == 8);
  CHECK(dbrx.rope.head_dim == 128);
  // JetMoE's heads are kv_channels wide; JetMoeConfig sets num_attention_heads to
  // num_key_value_heads * num_experts_per_tok (default 2; 16 kv heads by default).
  const auto jetmoe = posenc_test::parse_hf_config(R"({"model_type": "jetmoe", "hidden_size": 2048,
      "num_key_value_heads": 16, "kv_channels": 128, "rope_theta": 10000})");
  CHECK(jetmoe.rope.head_dim == 128);
  CHECK(jetmoe.num_attention_heads == 32);
  CHECK(jetmoe.num_key_value_heads == 16);
  const auto top4 = posenc_test::parse_hf_config(R"({"model_type": "jetmoe", "kv_channels": 128,
      "num_experts_per_tok": 4})");
  CHECK(top4.num_attention_heads == 64);
  CHECK(top4.num_key_value_heads == 16);
  REQUIRE_THROWS_WITH(posenc_test::parse_hf_config(R"({"model_type": "jetmoe", "kv_channels": 128,
      "num_experts_per_tok": 0})"), Contains("\"num_experts_per_tok\" = 0 must be in [1, "));
}

TEST_CASE("hf_config: families whose attention scale is not head_dim^-1/2", "[hf_config]") {
  // Each expected value is the family's transformers Attention `scaling` line evaluated by hand.
  const auto scale = [](const std::string& json) { return posenc_test::parse_hf_config(json).softmax_scale; };
  // GraniteAttention: scaling = config.attention_multiplier (GraniteConfig default 1.0).
  const std::string granite = R"({"model_type": "granite", "hidden_size": 4096,
      "num_attention_heads": 32, "rope_theta": 10000000)";
  CHECK(scale(granite + R"(, "attention_multiplier": 0.0078125})") == 0.0078125);
  CHECK(scale(granite + "}") == 1.0);
  CHECK(scale(R"({"model_type": "granitemoehybrid", "hidden_size": 1536, "num_attention_heads": 12,
      "rope_theta": 10000, "attention_multiplier": 0.015625})") == 0.015625);
  // HyperCLOVAX inherits Granite's attention; its config defaults the multiplier to head_dim^-1/2.
  CHECK(scale(R"({"model_type": "hyperclovax", "hidden_size": 4096, "num_attention_heads": 32,
      "rope_theta": 10000})") == 1.0 / std::sqrt(128.0));
  // MptAttention: attn_config.softmax_scale, else 1 / sqrt(d_model / n_heads).
  const std::string mpt = R"({"model_type": "mpt", "d_model": 768, "n_heads": 12, "attn_config": {"alibi": true)";
  CHECK(scale(mpt + R"(, "softmax_scale": 0.1}})") == 0.1);
  CHECK(scale(mpt + R"(, "softmax_scale": null}})") == 0.125);
  // GPT-2: / sqrt(d) only when scale_attn_weights; / (layer_idx + 1) when asked (eager).
  const std::string gpt2 = R"({"model_type": "gpt2", "n_embd": 768, "n_head": 12, "n_positions": 1024)";
  CHECK(scale(gpt2 + "}") == 0.125);
  CHECK(scale(gpt2 + R"(, "scale_attn_weights": false})") == 1.0);
  const auto by_layer = posenc_test::parse_hf_config(gpt2 + R"(, "scale_attn_by_inverse_layer_idx": true})");
  CHECK(posenc::hf_attention_params(by_layer, 0).scale == 0.125);
  CHECK(posenc::hf_attention_params(by_layer, 3).scale == 0.125 / 4.0);
  CHECK(posenc::hf_attention_params(posenc_test::parse_hf_config(gpt2 + "}"), 3).scale == 0.125);
  // Without a layer count any layer is accepted: layer + 1 overflowed at INT64_MAX.
  auto no_count = by_layer;
  no_count.num_hidden_layers = 0;
  CHECK(posenc::hf_attention_params(no_count, std::numeric_limits<Eigen::Index>::max()).scale ==
        0.125 / 0x1p63);
  CHECK(scale(R"({"model_type": "gpt_bigcode", "n_embd": 768, "n_head": 12, "n_positions": 1024,
      "scale_attn_weights": false})") == 1.0);
  // GPT-Neo never divides q.k.
  CHECK(scale(R"({"model_type": "gpt_neo", "hidden_size": 768, "num_heads": 12,
      "max_position_embeddings": 2048})") == 1.0);
  // ZambaAttention: (attention_head_dim / 2)^-1/2, attention_head_dim = 2 hidden / heads.
  CHECK(scale(R"({"model_type": "zamba2", "hidden_size": 2560, "num_attention_heads": 32,
      "attention_head_dim": 160, "rope_theta": 10000})") == 1.0 / std::sqrt(80.0));
  // Falcon-H1 multiplies its keys by key_multiplier before q.k.
  CHECK(scale(R"({"model_type": "falcon_h1", "hidden_size": 1024, "num_attention_heads": 8,
      "head_dim": 64, "rope_theta": 100000000000, "key_multiplier": 0.5})") == 0.0625);
  // Everyone else: head_dim^-1/2, reported for absolute families too.
  CHECK(scale(R"({"model_type": "bert", "hidden_size": 768, "num_attention_heads": 12,
      "position_embedding_type": "absolute"})") == 0.125);
  CHECK(scale(R"({"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32,
      "rope_theta": 10000, "attention_multiplier": 0.5})") == 1.0 / std::sqrt(128.0));
  REQUIRE_THROWS_WITH(scale(granite + R"(, "attention_multiplier": 0})"),
                      Contains("attention_multiplier\" = 0 must be > 0"));
}

TEST_CASE("hf_config: Gemma-3n and Gemma-4 do not scale q.k, Gemma-3 scales by query_pre_attn_scalar",
          "[hf_config]") {
  // transformers: Gemma3nTextAttention / Gemma4TextAttention set scaling = 1.0 (q and k are
  // RMS-normalised); Gemma3Attention uses query_pre_attn_scalar ** -0.5.
  const auto cfg = [](const std::string& type) {
    return posenc_test::parse_hf_config(R"({"model_type": ")" + type + R"(", "hidden_size": 2048,
        "num_attention_heads": 8, "head_dim": 256, "query_pre_attn_scalar": 64})");
  };
  for (const char* type : {"gemma3n_text", "gemma3n", "gemma4_text", "gemma4"}) {
    CAPTURE(type);
    const auto c = cfg(type);
    CHECK(c.softmax_scale == 1.0);
    CHECK(has_note(c, "softmax scale 1"));
  }
  CHECK(cfg("gemma3_text").softmax_scale == 0.125);
}

TEST_CASE("hf_config: Gemma-4 style proportional RoPE on global_head_dim full-attention heads",
          "[hf_config][v5][proportional]") {
  // The keys of Gemma-4's text config (transformers 5): sliding layers default RoPE on 256-wide
  // heads, full layers "proportional" with partial_rotary_factor 0.25 on 512-wide heads.
  const auto c = posenc_test::parse_hf_config(
      R"({"model_type": "gemma4_text", "hidden_size": 2048, "num_attention_heads": 8,
          "head_dim": 256, "global_head_dim": 512, "max_position_embeddings": 131072,
          "layer_types": ["sliding_attention", "sliding_attention", "full_attention"],
          "rope_parameters": {
            "full_attention": {"partial_rotary_factor": 0.25, "rope_theta": 1000000.0,
                               "rope_type": "proportional"},
            "sliding_attention": {"rope_theta": 10000.0, "rope_type": "default"}}})");
  REQUIRE(c.layer_ropes.size() == 2);
  REQUIRE(c.rope.scaling.type == RopeScalingType::kProportional);
  REQUIRE(c.rope.head_dim == 512);
  REQUIRE(c.rope.partial_rotary_factor == 0.25);
  const auto f = posenc::compute_rope_frequencies(c.rope);
  REQUIRE(f.rotary_dim == 512);
  std::size_t turning = 0;
  for (double w : f.inv_freq) turning += w != 0.0;
  REQUIRE(turning == 64);  // int(0.25 * 512 // 2)
  REQUIRE_THAT(f.inv_freq[1], WithinRel(std::pow(1e6, -2.0 / 512.0), 1e-14));
  REQUIRE(has_note(c, "global_head_dim = 512"));
  // Gemma-4's text attention RMS-normalises q and k and sets scaling = 1.0.
  CHECK(c.softmax_scale == 1.0);
  // Flat dicts have no full_attention entry to apply it to: said, not silently dropped.
  const auto flat = posenc_test::parse_hf_config(
      R"({"hidden_size": 2048, "num_attention_heads": 8, "head_dim": 256, "global_head_dim": 512,
          "rope_scaling": {"rope_type": "default"}})");
  REQUIRE(flat.rope.head_dim == 256);
  REQUIRE(has_note(flat, "global_head_dim = 512 not used"));
  REQUIRE_THROWS_WITH(posenc_test::parse_hf_config(R"({"hidden_size": 64, "num_attention_heads": 1,
                                                 "global_head_dim": 0})", "g.json"),
                      Contains("g.json: key \"global_head_dim\" = 0 must be in [1, "));
  for (const auto& lr : c.layer_ropes) {
    if (lr.layer_type != "sliding_attention") continue;
    REQUIRE(lr.params.head_dim == 256);
    REQUIRE(posenc::resolved_rotary_dim(lr.params) == 256);
    REQUIRE(lr.params.scaling.type == RopeScalingType::kDefault);
  }
}

TEST_CASE("hf_config: Hunyuan's dynamic + alpha is a fixed NTK base, not HF dynamic scaling",
          "[hf_config][ntk][alpha]") {
  // Hunyuan-A13B's rope_scaling block; vLLM DynamicNTKAlphaRotaryEmbedding: base * alpha^(d/(d-2)).
  const auto c = posenc_test::parse_hf_config(
      R"({"model_type": "hunyuan_v1_moe", "hidden_size": 4096, "num_attention_heads": 32,
          "head_dim": 128, "max_position_embeddings": 32768, "rope_theta": 10000.0,
          "rope_scaling": {"alpha": 1000.0, "beta_fast": 32, "beta_slow": 1, "factor": 1.0,
                           "mscale": 1.0, "mscale_all_dim": 1.0, "type": "dynamic"}})");
  REQUIRE(c.rope.scaling.type == RopeScalingType::kNtk);
  REQUIRE(c.rope.scaling.factor == 1000.0);
  const auto f = posenc::compute_rope_frequencies(c.rope, 100000);
  const long double base = 10000.0L * std::pow(1000.0L, 128.0L / 126.0L);
  REQUIRE_THAT(f.effective_theta, WithinRel(static_cast<double>(base), 1e-14));
  REQUIRE_THAT(f.inv_freq[63], WithinRel(static_cast<double>(std::pow(base, -126.0L / 128.0L)), 1e-13));
  REQUIRE(f.attention_factor == 1.0);
  REQUIRE(has_note(c, "rope_scaling.alpha = 1000"));
  REQUIRE(has_note(c, "rope_scaling.mscale_all_dim is not read by rope_type ntk (Hunyuan alpha)"));
  REQUIRE_THROWS_WITH(posenc_test::parse_hf_config(
                          R"({"hidden_size": 64, "num_attention_heads": 1,
                              "rope_scaling": {"alpha": 0.5, "factor": 1.0, "type": "dynamic"}})",
                          "h.json"),
                      Contains("h.json: key \"rope_scaling.alpha\" = 0.5 must be >= 1"));
}

TEST_CASE("hf_config: rope_type ntk is read as vLLM reads it (transformers has no ntk)",
          "[hf_config][ntk]") {
  const auto c = posenc_test::parse_hf_config(
      R"({"hidden_size": 1024, "num_attention_heads": 8,
          "rope_scaling": {"type": "ntk", "factor": 4.0, "mixed_b": 0.625}})");
  REQUIRE(c.rope.scaling.type == RopeScalingType::kVllmNtk);
  REQUIRE(c.rope.scaling.factor == 4.0);
  REQUIRE(c.rope.scaling.mixed_b == 0.625);
  REQUIRE(has_note(c, "is vLLM's recipe"));
  const auto f = posenc::compute_rope_frequencies(c.rope);
  REQUIRE_THAT(f.inv_freq[63], WithinRel(std::pow(10000.0, -126.0 / 128.0) / 4.0, 1e-14));
  // The first pair tells the three "ntk"s apart: mixed_b divides it by 4^(1/64^0.625), the
  // fixed form by 4^(2/128), static NTK-aware not at all.
  REQUIRE_THAT(f.inv_freq[0], WithinRel(std::pow(4.0, -1.0 / std::pow(64.0, 0.625)), 1e-14));
  const auto fixed = posenc_test::parse_hf_config(
      R"({"hidden_size": 1024, "num_attention_heads": 8,
          "rope_scaling": {"rope_type": "vllm_ntk", "factor": 4.0}})");
  REQUIRE(fixed.rope.scaling.type == RopeScalingType::kVllmNtk);
  REQUIRE(!has_note(fixed, "is vLLM's recipe"));
  REQUIRE_THAT(posenc::compute_rope_frequencies(fixed.rope).inv_freq[0], WithinRel(std::pow(4.0, -2.0 / 128.0), 1e-15));
  REQUIRE_THROWS_WITH(posenc_test::parse_hf_config(
                          R"({"hidden_size": 64, "num_attention_heads": 1,
                              "rope_scaling": {"type": "ntk", "factor": 2.0, "mixed_b": 0}})", "n.json"),
                      Contains("n.json: key \"rope_scaling.mixed_b\" = 0 must be > 0"));
}

TEST_CASE("hf_config: keys a recipe does not read are noted, and attention_factor applies only "
          "where transformers reads it", "[hf_config][keys]") {
  // HF's linear / dynamic / llama3 / default recipes return a cos/sin multiplier of 1 whatever
  // the dict says; yarn and longrope read attention_factor.
  const auto lin = posenc_test::parse_hf_config(
      R"({"hidden_size": 256, "num_attention_heads": 2,
          "rope_scaling": {"rope_type": "linear", "factor": 2.0, "attention_factor": 3.0,
                           "beta_fast": 16}})");
  REQUIRE(!lin.rope.scaling.attention_factor);
  REQUIRE(posenc::compute_rope_frequencies(lin.rope).attention_factor == 1.0);
  REQUIRE(has_note(lin, "rope_scaling.attention_factor is not read by rope_type linear"));
  REQUIRE(has_note(lin, "rope_scaling.beta_fast is not read by rope_type linear"));
  const auto yarn = posenc_test::parse_hf_config(
      R"({"hidden_size": 256, "num_attention_heads": 2, "max_position_embeddings": 8192,
          "rope_scaling": {"rope_type": "yarn", "factor": 2.0, "attention_factor": 3.0,
                           "original_max_position_embeddings": 4096}})");
  REQUIRE(posenc::compute_rope_frequencies(yarn.rope).attention_factor == 3.0);
  for (const auto& n : yarn.notes) REQUIRE(n.find("is not read") == std::string::npos);
  // The published configs carry no key their recipe ignores.
  for (const char* name : {"Llama-3.1-8B.json", "DeepSeek-V3.json", "Phi-3.5-mini-instruct.json",
                           "Qwen2.5-7B+qwen-doc-yarn.json"}) {
    CAPTURE(name);
    for (const auto& n : load(name).notes) REQUIRE(n.find("is not read") == std::string::npos);
  }
  // Nor do these published rope blocks (copied from the models' config.json): Qwen2-VL,
  // gpt-oss, Gemma-3, a transformers 5 dict keyed by layer type, Phi-3.5-MoE.
  for (const char* block :
       {R"("rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24], "rope_type": "default"})",
        R"("rope_scaling": {"beta_fast": 32.0, "beta_slow": 1.0, "factor": 32.0,
            "original_max_position_embeddings": 4096, "rope_type": "yarn", "truncate": false})",
        R"("rope_scaling": {"factor": 8.0, "rope_type": "linear"})",
        R"("layer_types": ["sliding_attention", "full_attention"], "rope_parameters": {
            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
            "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1000000.0}})",
        R"("head_dim": 16, "original_max_position_embeddings": 4096, "rope_scaling": {"type": "longrope",
            "short_factor": [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0],
            "long_factor": [1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0],
            "short_mscale": 1.243163121016122, "long_mscale": 1.243163121016122})"}) {
    CAPTURE(block);
    const auto c = posenc_test::parse_hf_config(std::string(R"({"hidden_size": 4096, "num_attention_heads": 32,
        "max_position_embeddings": 131072, )") + block + "}");
    for (const auto& n : c.notes) REQUIRE(n.find("is not read") == std::string::npos);
  }
  // A key the recipe does not read is not parsed either: transformers ignores a bad factor in
  // a default dict, and so does posenc.
  const auto def = posenc_test::parse_hf_config(
      R"({"hidden_size": 256, "num_attention_heads": 2,
          "rope_scaling": {"rope_type": "default", "factor": 0.5, "attention_factor": "x"}})");
  REQUIRE(def.rope.scaling.type == RopeScalingType::kDefault);
  REQUIRE(has_note(def, "rope_scaling.factor is not read by rope_type default"));
  REQUIRE(has_note(def, "rope_scaling.attention_factor is not read by rope_type default"));
}

TEST_CASE("hf_config: Phi-3.5-MoE's short_mscale / long_mscale set the cos/sin multiplier",
          "[hf_config][longrope]") {
  // transformers PhimoeRotaryEmbedding / vLLM Phi3LongRoPEScaledRotaryEmbedding use them
  // instead of sqrt(1 + ln 32 / ln 4096) = 1.19024.
  const auto c = posenc_test::parse_hf_config(
      R"({"hidden_size": 4096, "num_attention_heads": 32, "max_position_embeddings": 131072,
          "original_max_position_embeddings": 4096,
          "rope_scaling": {"type": "longrope", "short_mscale": 1.243163121016122,
            "long_mscale": 1.243163121016122,
            "short_factor": [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
                             1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
                             1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
                             1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1],
            "long_factor": [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
                            1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
                            2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2,
                            4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4]}})");
  REQUIRE(c.rope.scaling.short_mscale == 1.243163121016122);
  REQUIRE(posenc::compute_rope_frequencies(c.rope, 100).attention_factor == 1.243163121016122);
  REQUIRE(posenc::compute_rope_frequencies(c.rope, 100000).attention_factor == 1.243163121016122);
  REQUIRE_THROWS_WITH(posenc_test::parse_hf_config(
                          R"({"hidden_size": 64, "num_attention_heads": 8,
                              "original_max_position_embeddings": 4096,
                              "rope_scaling": {"type": "longrope", "long_mscale": -1,
                                "short_factor": [1, 1, 1, 1], "long_factor": [1, 1, 1, 1]}})", "m.json"),
                      Contains("m.json: key \"rope_scaling.long_mscale\" = -1 must be > 0"));
}

TEST_CASE("hf_config: longrope without a top-level original length takes its attention factor "
          "from factor", "[hf_config][longrope]") {
  // transformers 5 `_compute_longrope_parameters`: factor from the dict when present (else
  // max / L0), attention factor sqrt(1 + ln factor / ln L0). Here factor 16 and max / L0 = 32
  // give different answers: sqrt(1 + 4/12) from factor, sqrt(1 + 5/12) from the lengths.
  const auto c = posenc_test::parse_hf_config(
      R"({"hidden_size": 64, "num_attention_heads": 8, "max_position_embeddings": 131072,
          "rope_scaling": {"type": "longrope", "factor": 16.0,
                           "original_max_position_embeddings": 4096,
                           "short_factor": [1.0, 1.0, 1.0, 1.0],
                           "long_factor": [1.0, 2.0, 4.0, 8.0]}})");
  REQUIRE(c.rope.scaling.type == RopeScalingType::kLongRope);
  REQUIRE(c.rope.scaling.original_max_position_embeddings == 4096);
  const auto f = posenc::compute_rope_frequencies(c.rope, 8192);
  REQUIRE_THAT(f.attention_factor, WithinRel(std::sqrt(4.0 / 3.0), 1e-14));
  REQUIRE(f.uses_long_factor);
  REQUIRE_THAT(f.inv_freq[3], WithinRel(std::pow(10000.0, -6.0 / 8.0) / 8.0, 1e-14));
}

TEST_CASE("hf_config: the Qwen-VL vision tower's 2-D RoPE geometry", "[hf_config][vision]") {
  // Qwen2-VL: the ViT width is vision_config.embed_dim (1280; its hidden_size 3584 is the
  // merger's output), 16 heads -> 80; Qwen2.5-VL: hidden_size 1280 / 16; both merge 2 x 2.
  const auto q2 = posenc_test::parse_hf_config(
      R"({"model_type": "qwen2_vl", "hidden_size": 3584, "num_attention_heads": 28,
          "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]},
          "vision_config": {"embed_dim": 1280, "hidden_size": 3584, "num_heads": 16,
                            "spatial_merge_size": 2}})");
  REQUIRE(q2.vision_rope);
  REQUIRE(q2.vision_rope->head_dim == 80);
  REQUIRE(q2.vision_rope->spatial_merge_size == 2);
  REQUIRE(has_note(q2, "2-D RoPE on heads of 80 (vision_config.embed_dim / num_heads)"));
  const auto q25 = posenc_test::parse_hf_config(
      R"({"model_type": "qwen2_5_vl", "hidden_size": 3584, "num_attention_heads": 28,
          "vision_config": {"hidden_size": 1280, "num_heads": 16, "out_hidden_size": 3584,
                            "spatial_merge_size": 2}})");
  REQUIRE(q25.vision_rope);
  REQUIRE(q25.vision_rope->head_dim == 80);
  // A CLIP tower (LLaVA) has no 2-D RoPE: nothing is read.
  const auto llava = posenc_test::parse_hf_config(
      R"({"model_type": "llava", "text_config": {"hidden_size": 4096, "num_attention_heads": 32},
          "vision_config": {"hidden_size": 1024, "num_attention_heads": 16}})");
  REQUIRE(!llava.vision_rope);
  // Nor a Pixtral tower (Mistral-3), whose 2-D RoPE interleaves its axes differently, even
  // with keys that look alike.
  const auto pixtral = posenc_test::parse_hf_config(
      R"({"model_type": "mistral3", "text_config": {"hidden_size": 5120, "num_attention_heads": 32},
          "vision_config": {"hidden_size": 1024, "num_heads": 16, "spatial_merge_size": 2}})");
  REQUIRE(!pixtral.vision_rope);
  REQUIRE_THROWS_WITH(posenc_test::parse_hf_config(R"({"model_type": "qwen2_vl", "hidden_size": 64,
                                                 "num_attention_heads": 1,
                                                 "vision_config": {"embed_dim": 64, "num_heads": 0}})", "v.json"),
                      Contains("v.json: key \"vision_config.num_heads\" = 0 must be in [1, "));
}

TEST_CASE("hf_config: NoPE layers are reported per layer", "[hf_config][layers][nope]") {
  const auto smol = posenc_test::parse_hf_config(
      R"({"hidden_size": 64, "num_attention_heads": 2, "num_hidden_layers": 4,
          "no_rope_layers": [1, 1, 1, 0]})");
  REQUIRE(smol.layer_uses_rope == std::vector<bool>{true, true, true, false});
  REQUIRE(has_note(smol, "1 of 4 layers apply no RoPE"));
  const auto cohere2 = posenc_test::parse_hf_config(
      R"({"model_type": "cohere2", "hidden_size": 64, "num_attention_heads": 2,
          "num_hidden_layers": 4, "layer_types": ["sliding_attention", "sliding_attention",
          "sliding_attention", "full_attention"]})");
  REQUIRE(cohere2.layer_uses_rope == std::vector<bool>{true, true, true, false});
  REQUIRE(cohere2.rope.layout == RopeLayout::kInterleaved);
  REQUIRE_THROWS_WITH(posenc_test::parse_hf_config(R"({"hidden_size": 64, "num_attention_heads": 2,
                      "no_rope_layers": ["yes"]})"),
                      Contains("no_rope_layers"));
}

TEST_CASE("hf_config: rope_interleave and architectures decide the layout",
          "[hf_config][layout]") {
  const auto off = posenc_test::parse_hf_config(
      R"({"model_type": "deepseek_v3", "hidden_size": 64, "num_attention_heads": 2,
          "rope_interleave": false})");
  REQUIRE(off.rope.layout == RopeLayout::kHalfSplit);
  const auto arch = posenc_test::parse_hf_config(
      R"({"architectures": ["CohereForCausalLM"], "hidden_size": 64, "num_attention_heads": 2})");
  REQUIRE(arch.rope.layout == RopeLayout::kInterleaved);
  const auto other = posenc_test::parse_hf_config(
      R"({"model_type": "mistral", "hidden_size": 64, "num_attention_heads": 2,
          "num_key_value_heads": 2})");
  REQUIRE(other.rope.layout == RopeLayout::kHalfSplit);
  // Each family by its modeling code: GLM-4V's text attention uses rotate_half_llm (x[..., 0::2])
  // on repeat_interleave(2) cos / sin, GLM-4.5 / GLM-4.5V Llama's rotate_half; Cohere2-Vision's
  // text model is cohere2; LongCat-Flash calls apply_rotary_pos_emb_interleave; DeepSeek-V3.2's
  // main attention keeps DeepSeek's interleaved apply_rotary_emb; Kimi-K2 runs
  // DeepseekV3ForCausalLM. Qwen3-Next / GPT-OSS / Granite stay half-split.
  const auto layout_of = [](const char* type) {
    return posenc_test::parse_hf_config(std::string(R"({"model_type": ")") + type +
                                   R"(", "hidden_size": 64, "num_attention_heads": 2})")
        .rope.layout;
  };
  for (const char* type : {"glm4v", "cohere2_vision", "longcat_flash", "deepseek_v32", "kimi_k2",
                           "glm4", "glm", "ernie4_5_moe"}) {
    CAPTURE(type);
    CHECK(layout_of(type) == RopeLayout::kInterleaved);
  }
  // GLM-4.1V as shipped: the text model's keys (and model_type) under text_config.
  const auto glm41v = posenc_test::parse_hf_config(R"({"model_type": "glm4v",
      "text_config": {"model_type": "glm4v_text", "hidden_size": 4096, "num_attention_heads": 32,
                      "partial_rotary_factor": 0.5,
                      "rope_scaling": {"rope_type": "default", "mrope_section": [8, 12, 12]}}})");
  CHECK(glm41v.rope.layout == RopeLayout::kInterleaved);
  REQUIRE(glm41v.mrope.has_value());
  CHECK(glm41v.mrope->layout == posenc::MRopeSectionLayout::kContiguous);
  for (const char* type : {"glm4_moe", "glm4v_moe", "qwen3_next", "gpt_oss", "granite",
                           "hunyuan_v1_dense", "olmo3", "seed_oss"}) {
    CAPTURE(type);
    CHECK(layout_of(type) == RopeLayout::kHalfSplit);
  }
}

TEST_CASE("hf_config: ChatGLM keys (kv_channels, rope_ratio, half-head interleaved RoPE)",
          "[hf_config][chatglm]") {
  const auto c = posenc_test::parse_hf_config(
      R"({"model_type": "chatglm", "hidden_size": 4096, "num_attention_heads": 32,
          "kv_channels": 128, "multi_query_group_num": 2, "rope_ratio": 50,
          "seq_length": 32768})");
  REQUIRE(c.rope.head_dim == 128);
  REQUIRE(posenc::resolved_rotary_dim(c.rope) == 64);  // RotaryEmbedding(kv_channels // 2)
  REQUIRE(c.rope.theta == 500000.0);                    // 10000 * rope_ratio
  REQUIRE(c.rope.layout == RopeLayout::kInterleaved);
  REQUIRE(c.num_key_value_heads == 2);
  REQUIRE(c.max_position_embeddings == 32768);
}

TEST_CASE("hf_config: absolute-position models are recognised", "[hf_config][absolute]") {
  const auto c = posenc_test::parse_hf_config(
      R"({"model_type": "bert", "hidden_size": 768, "num_attention_heads": 12,
          "position_embedding_type": "absolute", "max_position_embeddings": 512})");
  REQUIRE(c.scheme == HfPositionScheme::kAbsolute);
  // Families whose configs never say so were read as RoPE (theta 10000) before: GPT-2's wpe,
  // OPT's and BART's tables read at position + 2 (OPTLearnedPositionalEmbedding /
  // BartLearnedPositionalEmbedding), RoBERTa's at padding_idx + 1 = 2, Marian's sinusoids;
  // BART and Whisper name their heads per stack (encoder_attention_heads, their classes'
  // attribute_map).
  const std::vector<std::tuple<std::string, std::int64_t, std::string>> families = {
      {R"({"model_type": "gpt2", "n_embd": 768, "n_head": 12, "n_positions": 1024})", 0, "learned"},
      {R"({"model_type": "opt", "hidden_size": 768, "num_attention_heads": 12, "max_position_embeddings": 2048})", 2, "learned"},
      {R"({"model_type": "bart", "d_model": 1024, "encoder_attention_heads": 16, "max_position_embeddings": 1024})", 2,
       "learned"},
      {R"({"model_type": "roberta", "hidden_size": 768, "num_attention_heads": 12})", 2, "learned"},
      {R"({"model_type": "whisper", "d_model": 384, "encoder_attention_heads": 6})", 0, "learned"},
      {R"({"model_type": "clip_text_model", "hidden_size": 512, "num_attention_heads": 8})", 0, "learned"},
      {R"({"model_type": "marian", "d_model": 512, "encoder_attention_heads": 8})", 0, "sinusoidal"},
  };
  for (const auto& [json, offset, kind] : families) {
    CAPTURE(json);
    const auto f = posenc_test::parse_hf_config(json);
    REQUIRE(f.scheme == HfPositionScheme::kAbsolute);
    REQUIRE(f.absolute_position_offset == offset);
    REQUIRE(has_note(f, kind + " absolute positions"));
  }
  REQUIRE(posenc_test::parse_hf_config(R"({"model_type": "gpt2", "n_embd": 768, "n_head": 12, "n_positions": 1024})")
              .max_position_embeddings == 1024);
  // A config that names a rotary scheme keeps it, whatever its model_type; GPT-NeoX is rotary.
  REQUIRE(posenc_test::parse_hf_config(R"({"model_type": "bert", "hidden_size": 768, "num_attention_heads": 12,
      "rope_theta": 10000})").scheme == HfPositionScheme::kRope);
  REQUIRE(posenc_test::parse_hf_config(R"({"model_type": "gpt_neox", "hidden_size": 768, "num_attention_heads": 12})")
              .scheme == HfPositionScheme::kRope);
  // Shaw-style relative key embeddings are no posenc scheme: refused by name.
  REQUIRE_THROWS_WITH(posenc_test::parse_hf_config(R"({"model_type": "bert", "hidden_size": 768,
      "num_attention_heads": 12, "position_embedding_type": "relative_key_query"})"),
                      Contains("position_embedding_type\" = \"relative_key_query\"") && Contains("is not supported"));
}

TEST_CASE("hf_config: bad input throws invalid_argument naming the key and the file",
          "[hf_config][errors]") {
  using posenc_test::parse_hf_config;
  const std::string geo = R"("hidden_size": 64, "num_attention_heads": 2, )";
  SECTION("malformed JSON") {
    REQUIRE_THROWS_AS(parse_hf_config("{\"hidden_size\": 64,", "broken.json"),
                      std::invalid_argument);
    REQUIRE_THROWS_WITH(parse_hf_config("{\"hidden_size\": 64,", "broken.json"),
                        Contains("broken.json") && Contains("malformed JSON"));
  }
  SECTION("not an object") {
    REQUIRE_THROWS_WITH(parse_hf_config("[1, 2]", "a.json"), Contains("a.json") && Contains("object"));
  }
  SECTION("unknown rope_type") {
    REQUIRE_THROWS_WITH(
        parse_hf_config("{" + geo + R"("rope_scaling": {"rope_type": "magic", "factor": 2}})",
                        "m.json"),
        Contains("m.json") && Contains("rope_scaling.rope_type") && Contains("magic"));
  }
  SECTION("missing required factor") {
    REQUIRE_THROWS_WITH(
        parse_hf_config("{" + geo + R"("rope_scaling": {"rope_type": "linear"}})", "f.json"),
        Contains("f.json") && Contains("rope_scaling.factor") && Contains("missing"));
  }
  SECTION("missing llama3 band keys") {
    REQUIRE_THROWS_WITH(parse_hf_config("{" + geo + R"("rope_scaling": {"rope_type": "llama3",
                        "factor": 8, "original_max_position_embeddings": 8192}})"),
                        Contains("rope_scaling.low_freq_factor"));
  }
  SECTION("factor list of the wrong length") {
    // head_dim 32 -> 16 pairs; 3 given.
    REQUIRE_THROWS_WITH(
        parse_hf_config("{" + geo + R"("original_max_position_embeddings": 4096,
            "rope_scaling": {"rope_type": "longrope", "short_factor": [1, 1, 1],
            "long_factor": [1, 1, 1]}})",
                        "phi.json"),
        Contains("phi.json") && Contains("rope_scaling.short_factor") && Contains("16"));
  }
  SECTION("negative theta") {
    REQUIRE_THROWS_WITH(parse_hf_config("{" + geo + R"("rope_theta": -10000})", "t.json"),
                        Contains("t.json") && Contains("rope_theta") && Contains("-10000"));
  }
  SECTION("missing geometry") {
    REQUIRE_THROWS_WITH(parse_hf_config(R"({"num_attention_heads": 2})", "g.json"),
                        Contains("g.json") && Contains("hidden_size") && Contains("missing"));
  }
  SECTION("wrong types") {
    REQUIRE_THROWS_WITH(parse_hf_config(R"({"hidden_size": "64", "num_attention_heads": 2})"),
                        Contains("hidden_size") && Contains("integer"));
    REQUIRE_THROWS_WITH(parse_hf_config("{" + geo + R"("rope_scaling": [1, 2]})"),
                        Contains("rope_scaling") && Contains("object"));
    REQUIRE_THROWS_WITH(parse_hf_config("{" + geo + R"("rope_scaling": {"rope_type": "linear",
                        "factor": true}})"),
                        Contains("rope_scaling.factor") && Contains("number"));
  }
  SECTION("factor below 1 and odd rotary width") {
    REQUIRE_THROWS_WITH(parse_hf_config("{" + geo + R"("rope_scaling": {"rope_type": "linear",
                        "factor": 0.5}})"),
                        Contains("rope_scaling.factor"));
    REQUIRE_THROWS_WITH(parse_hf_config(R"({"hidden_size": 60, "num_attention_heads": 4})"),
                        Contains("rotary"));
  }
  SECTION("deep nesting and huge numbers") {
    REQUIRE_THROWS_WITH(parse_hf_config(std::string(5000, '[')), Contains("nested"));
    REQUIRE_THROWS_WITH(
        parse_hf_config(R"({"hidden_size": 1e400, "num_attention_heads": 2})"),
        Contains("1e400"));
    REQUIRE_THROWS_WITH(
        parse_hf_config(R"({"hidden_size": 64, "num_attention_heads": 99999999999999})"),
        Contains("num_attention_heads"));
  }
  SECTION("missing file") {
    REQUIRE_THROWS_WITH(posenc_test::load_hf_config(config_path("no-such-model.json")),
                        Contains("no-such-model.json") && Contains("cannot open"));
  }
}

TEST_CASE("hf_config: Llama-4 Scout's chunked RoPE layers, NoPE layers and temperature tuning",
          "[hf_config][llama4]") {
  // The text_config keys of meta-llama/Llama-4-Scout-17B-16E that concern positions, inside the
  // multimodal wrapper. no_rope_layers is [] there: Llama4TextConfig fills it from
  // no_rope_layer_interval (default 4), so layers 3, 7, ..., 47 (0-based) are NoPE.
  const auto c = posenc_test::parse_hf_config(R"({
      "model_type": "llama4", "architectures": ["Llama4ForConditionalGeneration"],
      "vision_config": {"model_type": "llama4_vision_model", "hidden_size": 1408,
                        "num_attention_heads": 16, "image_size": 336, "patch_size": 14,
                        "rope_theta": 10000},
      "text_config": {
        "model_type": "llama4_text", "hidden_size": 5120, "head_dim": 128,
        "num_attention_heads": 40, "num_key_value_heads": 8, "num_hidden_layers": 48,
        "max_position_embeddings": 10485760, "rope_theta": 500000.0,
        "rope_scaling": {"factor": 16.0, "high_freq_factor": 1.0, "low_freq_factor": 1.0,
                         "original_max_position_embeddings": 8192, "rope_type": "llama3"},
        "attention_chunk_size": 8192, "no_rope_layers": [], "attn_temperature_tuning": 4,
        "floor_scale": 8192, "attn_scale": 0.1, "use_qk_norm": true}})", "scout.json");
  REQUIRE(c.model_type == "llama4_text");
  // HF's Llama4 apply_rotary_emb multiplies view_as_complex pairs (2j, 2j + 1).
  REQUIRE(c.rope.layout == RopeLayout::kInterleaved);
  REQUIRE(c.layout_reason.find("llama4_text") != std::string::npos);
  REQUIRE(c.rope.scaling.type == posenc::RopeScalingType::kLlama3);
  REQUIRE(c.rope.scaling.factor == 16.0);
  REQUIRE(c.num_key_value_heads == 8);
  REQUIRE(c.layer_uses_rope.size() == 48);
  REQUIRE(c.layer_types.size() == 48);
  for (std::size_t i = 0; i < 48; ++i) {
    CAPTURE(i);
    const bool nope = i % 4 == 3;
    REQUIRE(c.layer_uses_rope[i] == !nope);
    REQUIRE(c.layer_types[i] == (nope ? "full_attention" : "chunked_attention"));
  }
  REQUIRE(has_note(c, "every 4th layer applies no RoPE"));
  // Per layer: chunks on the RoPE layers, full attention on the NoPE ones.
  REQUIRE(posenc::hf_attention_params(c, 0).attention_chunk_size == 8192);
  REQUIRE(posenc::hf_attention_params(c, 3).attention_chunk_size == 0);
  REQUIRE(posenc::hf_attention_params(c, 46).attention_chunk_size == 8192);
  REQUIRE(posenc::hf_attention_params(c, 47).attention_chunk_size == 0);
  REQUIRE(!posenc::hf_attention_params(c, 46).query_temperature);
  REQUIRE(posenc::hf_attention_params(c, 47).query_temperature);
  REQUIRE(posenc::hf_attention_params(c, 47).query_temperature->floor_scale == 8192.0);
  REQUIRE(c.attention_chunk_size == 8192);
  REQUIRE(c.attention_temperature);
  REQUIRE(c.attention_temperature->floor_scale == 8192.0);
  REQUIRE(c.attention_temperature->attn_scale == 0.1);
  // The vision tower: 1408 / 16 = 88-wide heads, 336 / 14 = 24 patches a side.
  REQUIRE(c.vision_rope);
  REQUIRE(c.vision_rope->llama4);
  REQUIRE(c.vision_rope->head_dim == 88);
  REQUIRE(c.vision_rope->grid_side == 24);
  REQUIRE(c.vision_rope->theta == 10000.0);

  // Without the keys: transformers' defaults (chunks of 8192, tuning on) and the interval.
  const auto bare = posenc_test::parse_hf_config(
      R"({"model_type": "llama4_text", "hidden_size": 64, "num_attention_heads": 2,
          "num_hidden_layers": 6, "no_rope_layer_interval": 3})");
  REQUIRE(bare.layer_uses_rope == std::vector<bool>{true, true, false, true, true, false});
  REQUIRE(bare.attention_chunk_size == 8192);
  REQUIRE(has_note(bare, "attention_chunk_size absent"));
  REQUIRE(bare.attention_temperature);
  REQUIRE(bare.attention_temperature->attn_scale == 0.1);
  // An explicit list wins; tuning off gives no temperature.
  const auto listed = posenc_test::parse_hf_config(
      R"({"model_type": "llama4_text", "hidden_size": 64, "num_attention_heads": 2,
          "num_hidden_layers": 3, "no_rope_layers": [0, 1, 1], "attn_temperature_tuning": false,
          "attention_chunk_size": 16})");
  REQUIRE(listed.layer_uses_rope == std::vector<bool>{false, true, true});
  REQUIRE(listed.layer_types ==
          std::vector<std::string>{"full_attention", "chunked_attention", "chunked_attention"});
  REQUIRE(!listed.attention_temperature);
  REQUIRE(listed.attention_chunk_size == 16);
  // SmolLM3 fills an absent list the same way; other families keep "every layer".
  const auto smol = posenc_test::parse_hf_config(
      R"({"model_type": "smollm3", "hidden_size": 64, "num_attention_heads": 2,
          "num_hidden_layers": 8})");
  REQUIRE(smol.layer_uses_rope ==
          std::vector<bool>{true, true, true, false, true, true, true, false});
  REQUIRE(smol.layer_types.empty());
  REQUIRE(!smol.attention_temperature);
  REQUIRE(smol.rope.layout == RopeLayout::kHalfSplit);
  const auto llama = posenc_test::parse_hf_config(
      R"({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 2,
          "num_hidden_layers": 8})");
  REQUIRE(llama.layer_uses_rope.empty());
  REQUIRE(llama.attention_chunk_size == 0);

  REQUIRE_THROWS_WITH(posenc_test::parse_hf_config(R"({"model_type": "llama4",
                      "text_config": {"model_type": "llama4_text", "hidden_size": 64,
                                      "num_attention_heads": 2},
                      "vision_config": {"hidden_size": 64, "num_attention_heads": 0}})"),
                      Contains("\"vision_config.num_attention_heads\" = 0 must be in [1, "));
  REQUIRE_THROWS_WITH(posenc_test::parse_hf_config(R"({"model_type": "llama4_text", "hidden_size": 64,
                      "num_attention_heads": 2, "num_hidden_layers": 4,
                      "no_rope_layer_interval": 0})", "l4.json"),
                      Contains("l4.json: key \"no_rope_layer_interval\" = 0 must be in [1, "));
  REQUIRE_THROWS_WITH(posenc_test::parse_hf_config(R"({"model_type": "llama4_text", "hidden_size": 64,
                      "num_attention_heads": 2, "attention_chunk_size": -8})"),
                      Contains("\"attention_chunk_size\" = -8 must be in [0, 2^53]"));
  REQUIRE_THROWS_WITH(posenc_test::parse_hf_config(R"({"model_type": "llama4_text", "hidden_size": 64,
                      "num_attention_heads": 2, "floor_scale": 0})"),
                      Contains("\"floor_scale\" = 0 must be > 0"));
  REQUIRE_THROWS_WITH(posenc_test::parse_hf_config(R"({"model_type": "llama4_text", "hidden_size": 64,
                      "num_attention_heads": 2, "attn_temperature_tuning": "yes"})"),
                      Contains("attn_temperature_tuning\" must be a bool or a number"));
}

TEST_CASE("hf_config: a yarn extrapolation_factor is noted, not applied (transformers ignores it)",
          "[hf_config][yarn]") {
  const auto c = posenc_test::parse_hf_config(
      R"({"hidden_size": 64, "num_attention_heads": 2, "max_position_embeddings": 8192,
          "rope_scaling": {"rope_type": "yarn", "factor": 4, "original_max_position_embeddings": 2048,
                           "extrapolation_factor": 0.5}})");
  REQUIRE(c.rope.scaling.extrapolation_factor == 1.0);
  REQUIRE(has_note(c, "rope_scaling.extrapolation_factor: vLLM applies it, transformers does not"));
}

TEST_CASE("hf_config: Qwen2.5-1M's dual_chunk_attention_config", "[hf_config][dual_chunk]") {
  // Qwen2.5-7B-Instruct-1M's position keys (its sparse_attention_config abridged to one layer).
  const std::string head = R"({"model_type": "qwen2", "hidden_size": 3584,
      "num_attention_heads": 28, "num_key_value_heads": 4, "num_hidden_layers": 28,
      "max_position_embeddings": 1010000, "rope_theta": 10000000.0)";
  const auto c = posenc_test::parse_hf_config(head + R"(, "dual_chunk_attention_config": {
      "chunk_size": 262144, "local_size": 8192, "original_max_position_embeddings": 262144,
      "sparse_attention_enabled": true,
      "sparse_attention_config": [{"0": ["vertical_and_slash", 1000, 6096, 0.5]}]}})");
  REQUIRE(c.dual_chunk.has_value());
  CHECK(c.dual_chunk->chunk_size == 262144);
  CHECK(c.dual_chunk->local_size == 8192);
  CHECK(c.dual_chunk->original_max_position_embeddings == 262144);
  CHECK(has_note(c, "transformers ignores it"));
  CHECK(has_note(c, "sparse (MInference) prefill keys are not applied"));
  // The RoPE itself is the plain rope_theta one (128-wide heads, theta 1e7).
  CHECK(c.rope.head_dim == 128);
  CHECK(c.rope.theta == 1e7);
  CHECK(c.rope.scaling.type == posenc::RopeScalingType::kDefault);

  // Absent keys take vLLM's defaults; no key, no DCA.
  const auto bare = posenc_test::parse_hf_config(head + R"(, "dual_chunk_attention_config": {}})");
  REQUIRE(bare.dual_chunk.has_value());
  CHECK(bare.dual_chunk->chunk_size == 8192);
  CHECK(bare.dual_chunk->local_size == 1024);
  CHECK(bare.dual_chunk->original_max_position_embeddings == 0);
  CHECK_FALSE(posenc_test::parse_hf_config(head + "}").dual_chunk.has_value());

  REQUIRE_THROWS_WITH(posenc_test::parse_hf_config(head + R"(, "dual_chunk_attention_config": {
      "chunk_size": 4096, "local_size": 4096}})"),
                      Contains("dual_chunk_attention_config.chunk_size") && Contains("4096"));
  REQUIRE_THROWS_WITH(posenc_test::parse_hf_config(head + R"(, "dual_chunk_attention_config": {
      "local_size": -3}})"),
                      Contains("dual_chunk_attention_config.local_size"));
  REQUIRE_THROWS_WITH(posenc_test::parse_hf_config(head + R"(, "dual_chunk_attention_config": 5})"),
                      Contains("dual_chunk_attention_config\" must be an object"));
  REQUIRE_THROWS_WITH(posenc_test::parse_hf_config(head + R"(, "dual_chunk_attention_config": {
      "original_max_position_embeddings": "long"}})"),
                      Contains("original_max_position_embeddings"));
}

TEST_CASE("hf_config: ERNIE-4.5-VL's 3-D RoPE sections and interleaved pairs",
          "[hf_config][mrope][ernie]") {
  // transformers 5 (rope_parameters with mrope_section listed as [h, w, t]).
  const auto v5 = posenc_test::parse_hf_config(R"({"model_type": "ernie4_5_vl_moe",
      "hidden_size": 2560, "num_attention_heads": 20, "num_key_value_heads": 4,
      "rope_parameters": {"rope_type": "default", "rope_theta": 500000,
                          "mrope_section": [22, 22, 20]}})");
  CHECK(v5.rope.layout == posenc::RopeLayout::kInterleaved);
  CHECK(v5.rope.theta == 500000.0);
  REQUIRE(v5.mrope.has_value());
  CHECK(v5.mrope->layout == posenc::MRopeSectionLayout::kAlternatingHw);
  CHECK(v5.mrope->section == std::array<Eigen::Index, 4>{20, 22, 22});  // (t, h, w)
  // Unequal h / w from a config: named by key.
  REQUIRE_THROWS_WITH(posenc_test::parse_hf_config(R"({"model_type": "ernie4_5_vl_moe",
      "hidden_size": 2560, "num_attention_heads": 20,
      "rope_parameters": {"rope_type": "default", "rope_theta": 500000,
                          "mrope_section": [24, 20, 20]}})"),
                      Contains("mrope_section") && Contains("as many h as w pairs"));

  // Baidu's original config: rope_3d + freq_allocation, top-level rope_theta.
  const auto baidu = posenc_test::parse_hf_config(R"({"model_type": "ernie4_5_moe_vl",
      "architectures": ["Ernie4_5_VLMoeForConditionalGeneration"], "hidden_size": 2560,
      "num_attention_heads": 20, "rope_theta": 500000, "rope_3d": true,
      "freq_allocation": 20})");
  CHECK(baidu.rope.layout == posenc::RopeLayout::kInterleaved);
  REQUIRE(baidu.mrope.has_value());
  CHECK(baidu.mrope->section == std::array<Eigen::Index, 4>{20, 22, 22});
  CHECK(baidu.mrope->layout == posenc::MRopeSectionLayout::kAlternatingHw);
  CHECK(has_note(baidu, "freq_allocation = 20"));
  // Older transformers: rope_scaling type "ernie_3d", no sections: the default [22, 22, 20].
  const auto old = posenc_test::parse_hf_config(R"({"model_type": "ernie4_5_vl",
      "hidden_size": 2560, "num_attention_heads": 20, "rope_theta": 500000,
      "rope_scaling": {"type": "ernie_3d"}})");
  CHECK(old.rope.scaling.type == posenc::RopeScalingType::kDefault);
  CHECK(has_note(old, "ernie_3d"));
  REQUIRE(old.mrope.has_value());
  CHECK(old.mrope->section == std::array<Eigen::Index, 4>{20, 22, 22});
  REQUIRE_THROWS_WITH(posenc_test::parse_hf_config(R"({"model_type": "ernie4_5_moe_vl",
      "hidden_size": 2560, "num_attention_heads": 20, "freq_allocation": 21})"),
                      Contains("freq_allocation") && Contains("= 21"));
  // The text models rotate interleaved pairs too (HF Ernie4_5 apply_rotary_pos_emb: GLM's
  // rotate_half on cos[..., :d/2].repeat_interleave(2)), with no sections.
  for (const char* type : {"ernie4_5", "ernie4_5_moe"}) {
    const auto text = posenc_test::parse_hf_config(std::string(R"({"model_type": ")") + type +
                                              R"(", "hidden_size": 1024,
        "num_attention_heads": 16, "rope_theta": 500000})");
    CHECK(text.rope.layout == posenc::RopeLayout::kInterleaved);
    CHECK_FALSE(text.mrope.has_value());
  }
}

TEST_CASE("hf_config: language models under language_config (DeepSeek-VL2) and llm_config "
          "(InternVL)", "[hf_config]") {
  const auto vl2 = posenc_test::parse_hf_config(R"({"model_type": "deepseek_vl_v2",
      "language_config": {"model_type": "deepseek_v2", "hidden_size": 2048,
                          "num_attention_heads": 16, "kv_lora_rank": 512,
                          "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
                          "rope_theta": 10000, "max_position_embeddings": 4096}})");
  CHECK(vl2.model_type == "deepseek_v2");
  CHECK(vl2.rope.layout == RopeLayout::kInterleaved);  // view_as_complex, as DeepSeek-V2
  CHECK(vl2.rope.head_dim == 64);                       // the rotated q_pe / k_pe
  CHECK(vl2.attention_head_dim == 192);
  CHECK(has_note(vl2, "language-model keys read from language_config"));
  const auto internvl = posenc_test::parse_hf_config(R"({"model_type": "internvl_chat",
      "llm_config": {"model_type": "qwen2", "hidden_size": 896, "num_attention_heads": 14,
                     "num_key_value_heads": 2, "rope_theta": 1000000.0,
                     "max_position_embeddings": 32768}})");
  CHECK(internvl.rope.head_dim == 64);
  CHECK(internvl.rope.theta == 1e6);
  CHECK(internvl.rope.layout == RopeLayout::kHalfSplit);
  CHECK(internvl.num_key_value_heads == 2);
  CHECK(has_note(internvl, "language-model keys read from llm_config"));
  // A bad key inside is named with its path.
  REQUIRE_THROWS_WITH(posenc_test::parse_hf_config(R"({"model_type": "internvl_chat",
      "llm_config": {"hidden_size": 896, "num_attention_heads": 14, "rope_theta": -1}})"),
                      Contains("llm_config.rope_theta"));
}

TEST_CASE("hf_config: TeleChat3's rope_type telechat3-yarn", "[hf_config][yarn]") {
  // TeleChat3-36B's geometry (heads 48 / 8, head_dim 128, theta 1e6); factor and L0 illustrative.
  const auto c = posenc_test::parse_hf_config(R"({"model_type": "telechat3", "hidden_size": 6144,
      "num_attention_heads": 48, "num_key_value_heads": 8, "rope_theta": 1000000,
      "max_position_embeddings": 32768,
      "rope_scaling": {"rope_type": "telechat3-yarn", "factor": 4.0,
                       "original_max_position_embeddings": 8192}})");
  CHECK(c.rope.scaling.type == posenc::RopeScalingType::kYarn);
  CHECK(c.rope.scaling.mscale_slope == 0.07);
  CHECK(has_note(c, "telechat3-yarn"));
  CHECK(posenc::compute_rope_frequencies(c.rope).attention_factor ==
        Approx(1.0 + 0.07 * std::log(4.0)).epsilon(1e-14));
}

TEST_CASE("hf_config: HunYuan-VL's xdrope reads as Hunyuan's NTK-alpha with four M-RoPE streams",
          "[hf_config][mrope][xdrope]") {
  // The keys of HunyuanOCR's rope_scaling (head_dim 128, 16 heads); alpha illustrative.
  const std::string head = R"({"model_type": "hunyuan_vl", "hidden_size": 2048, "head_dim": 128,
      "num_attention_heads": 16, "num_key_value_heads": 8, "rope_theta": 10000.0,
      "max_position_embeddings": 32768, "rope_scaling": {"type": "xdrope", "alpha": 1000.0,
      "beta_fast": 32, "beta_slow": 1, "factor": 1.0, "mscale": 1.0, "mscale_all_dim": 1.0, )";
  const auto c = posenc_test::parse_hf_config(head + R"("xdrope_section": [16, 16, 16, 16]}})");
  REQUIRE(c.rope.scaling.type == RopeScalingType::kNtk);
  REQUIRE(c.rope.scaling.factor == 1000.0);
  REQUIRE(c.mrope.has_value());
  REQUIRE(c.mrope->section == std::array<Eigen::Index, 4>{16, 16, 16, 16});
  REQUIRE(c.mrope->streams() == 4);
  REQUIRE(c.mrope->layout == posenc::MRopeSectionLayout::kContiguous);
  REQUIRE(has_note(c, "rope_scaling.type = \"xdrope\""));
  REQUIRE(has_note(c, "four XD-RoPE streams"));
  REQUIRE(has_note(c, "beta_fast is not read"));
  // inv_freq = (theta alpha^(d / (d - 2)))^(-2j / d), transformers' HunYuanVLRotaryEmbedding.
  const auto f = posenc::compute_rope_frequencies(c.rope);
  const long double base = 10000.0L * std::pow(1000.0L, 128.0L / 126.0L);
  for (std::size_t j = 0; j < 64; ++j) {
    CAPTURE(j);
    REQUIRE_THAT(f.inv_freq[j], Catch::Matchers::WithinRel(static_cast<double>(std::pow(base, -2.0L * static_cast<long double>(j) / 128.0L)), 1e-13));
  }
  // transformers' alias rule: both keys must agree; mrope_section alone works the same.
  REQUIRE(posenc_test::parse_hf_config(head + R"("mrope_section": [16, 16, 16, 16], "xdrope_section": [16, 16, 16, 16]}})")
              .mrope->section == std::array<Eigen::Index, 4>{16, 16, 16, 16});
  REQUIRE(posenc_test::parse_hf_config(head + R"("mrope_section": [8, 24, 16, 16]}})").mrope->section ==
          std::array<Eigen::Index, 4>{8, 24, 16, 16});
  REQUIRE_THROWS_AS(posenc_test::parse_hf_config(head + R"("mrope_section": [16, 16, 16, 16], "xdrope_section": [8, 24, 16, 16]}})"),
                    std::invalid_argument);
  REQUIRE_THROWS_WITH(posenc_test::parse_hf_config(head + R"("mrope_section": [16, 16, 16, 16], "xdrope_section": [8, 24, 16, 16]}})"),
                      Contains("\"rope_scaling.xdrope_section\" differs from rope_scaling.mrope_section"));
  REQUIRE_THROWS_WITH(posenc_test::parse_hf_config(head + R"("xdrope_section": [16, 16, 16, 8, 8]}})"),
                      Contains("rope_scaling.xdrope_section\" has 5 entries; it must have 3 (t, h, w) or 4 (XD-RoPE: p, w, h, i)"));
  REQUIRE_THROWS_WITH(posenc_test::parse_hf_config(head + R"("xdrope_section": [16, 16, 16, 16], "mrope_interleaved": true}})"),
                      Contains("four streams need the contiguous layout"));
  REQUIRE_THROWS_WITH(posenc_test::parse_hf_config(head + R"("xdrope_section": [16, 16, 16, 17]}})"),
                      Contains("sum to rotary_dim / 2 = 64"));
}

TEST_CASE("hf_config: Grok-2's attn_temperature_len gives every layer the xAI query temperature",
          "[hf_config][temperature][xai]") {
  // The attention keys of xai-org/grok-2's config.json (top-level rope_type "original": plain
  // RoPE, as vLLM's Grok1ScalingRotaryEmbedding reads it).
  const std::string grok = R"({"model_type": "git", "hidden_size": 8192, "head_dim": 128,
      "num_attention_heads": 64, "num_key_value_heads": 8, "num_hidden_layers": 64,
      "rope_theta": 208533496, "max_position_embeddings": 131072, "attn_logit_softcapping": 30.0,
      "attn_temperature_len": 1024, "rope_type": "original", "original_max_position_embeddings": 8192,
      "scaling_factor": 16.0, "extrapolation_factor": 1.0, "attn_factor": 1.0, "beta_fast": 8, "beta_slow": 1})";
  const auto c = posenc_test::parse_hf_config(grok);
  REQUIRE(c.rope.scaling.type == RopeScalingType::kDefault);
  REQUIRE(c.rope.theta == 208533496.0);
  REQUIRE(c.attention_temperature.has_value());
  REQUIRE(c.attention_temperature->form == posenc::TemperatureForm::kXai);
  REQUIRE(c.attention_temperature->temperature_len == 1024);
  REQUIRE(has_note(c, "Grok-2"));
  REQUIRE(has_note(c, "rope_type = \"original\" at the top level"));
  for (const Eigen::Index layer : {Eigen::Index{0}, Eigen::Index{63}}) {
    const auto p = posenc::hf_attention_params(c, layer);
    REQUIRE(p.query_temperature.has_value());
    REQUIRE(p.query_temperature->temperature_len == 1024);
    REQUIRE(p.logit_softcap == 30.0);
  }
  // Grok's other top-level modes have no released config: refused, not planned as plain RoPE.
  std::string yarn_log = grok;
  yarn_log.replace(yarn_log.find("\"original\""), std::string("\"original\"").size(), "\"yarn_log\"");
  REQUIRE_THROWS_WITH(posenc_test::parse_hf_config(yarn_log), Contains("rope_type\" = \"yarn_log\" at the top level") &&
                                                             Contains("is not supported"));
  // -1 (SGLang's "off") or absent: none; 1: refused; with Llama-4's tuning: refused.
  REQUIRE_FALSE(posenc_test::parse_hf_config(R"({"hidden_size": 128, "num_attention_heads": 2, "attn_temperature_len": -1})")
                    .attention_temperature);
  REQUIRE_THROWS_WITH(posenc_test::parse_hf_config(R"({"hidden_size": 128, "num_attention_heads": 2, "attn_temperature_len": 1})"),
                      Contains("attn_temperature_len\" = 1 must be >= 2"));
  REQUIRE_THROWS_WITH(posenc_test::parse_hf_config(R"({"hidden_size": 128, "num_attention_heads": 2, "attn_temperature_len": 1024,
                                                  "attn_temperature_tuning": true})"),
                      Contains("one query temperature per model"));
}

TEST_CASE("hf_config: Mistral-3's llama_4_scaling_beta gives every layer its query temperature",
          "[hf_config][temperature][mistral3]") {
  // The language-model part of mistralai/Ministral-3-8B-Instruct-2512's config.json (a
  // Mistral3ForConditionalGeneration whose text_config is a ministral3): YaRN 16 from 16384
  // with mscale = mscale_all_dim = 1, and the query temperature's beta beside it.
  const std::string ministral = R"({"architectures": ["Mistral3ForConditionalGeneration"],
      "model_type": "mistral3", "vision_config": {"model_type": "pixtral"},
      "text_config": {"model_type": "ministral3", "hidden_size": 4096, "head_dim": 128,
        "num_attention_heads": 32, "num_key_value_heads": 8, "num_hidden_layers": 34,
        "max_position_embeddings": 262144, "sliding_window": null,
        "rope_parameters": {"rope_type": "yarn", "type": "yarn", "rope_theta": 1000000000.0,
          "factor": 16.0, "original_max_position_embeddings": 16384, "beta_fast": 32.0,
          "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 1.0, "llama_4_scaling_beta": 0.1}}})";
  const auto c = posenc_test::parse_hf_config(ministral);
  REQUIRE(c.rope.scaling.type == RopeScalingType::kYarn);
  REQUIRE(c.rope.scaling.original_max_position_embeddings == 16384);
  REQUIRE(c.attention_temperature.has_value());
  REQUIRE(c.attention_temperature->form == posenc::TemperatureForm::kMistral3);
  REQUIRE(c.attention_temperature->attn_scale == 0.1);
  REQUIRE(c.attention_temperature->floor_scale == 16384.0);
  REQUIRE(has_note(c, "Mistral-3 llama_4_scaling"));
  REQUIRE_FALSE(has_note(c, "llama_4_scaling_beta is not read"));
  for (const Eigen::Index layer : {Eigen::Index{0}, Eigen::Index{17}, Eigen::Index{33}}) {
    const auto p = posenc::hf_attention_params(c, layer);
    REQUIRE(p.query_temperature.has_value());
    REQUIRE(p.query_temperature->form == posenc::TemperatureForm::kMistral3);
    CHECK_THAT(posenc::attention_temperature(16384, *p.query_temperature),
               Catch::Matchers::WithinRel(static_cast<double>(1.0L + 0.1L * std::log(2.0L)), 1e-15));
  }
  // The older rope_scaling key and a default recipe (mlx's minimal ministral3 config): read
  // the same way, L0 from the dict.
  const auto plain = posenc_test::parse_hf_config(R"({"model_type": "ministral3", "hidden_size": 64,
      "num_attention_heads": 4, "num_hidden_layers": 2, "rope_scaling": {"rope_type": "default",
      "rope_theta": 10000.0, "llama_4_scaling_beta": 0.25, "original_max_position_embeddings": 4096}})");
  REQUIRE(plain.rope.scaling.type == RopeScalingType::kDefault);
  REQUIRE(plain.attention_temperature.has_value());
  REQUIRE(plain.attention_temperature->attn_scale == 0.25);
  REQUIRE(plain.attention_temperature->floor_scale == 4096.0);
  REQUIRE_FALSE(has_note(plain, "original_max_position_embeddings is not read"));
  // beta 0 (GGUF conversions' "none"): no temperature.
  REQUIRE_FALSE(posenc_test::parse_hf_config(R"({"hidden_size": 64, "num_attention_heads": 4,
      "rope_parameters": {"rope_type": "default", "llama_4_scaling_beta": 0.0,
      "original_max_position_embeddings": 4096}})").attention_temperature);
  // No L0, a bad L0, or a second temperature: refused with the keys named.
  REQUIRE_THROWS_WITH(posenc_test::parse_hf_config(R"({"hidden_size": 64, "num_attention_heads": 4,
      "rope_parameters": {"rope_type": "default", "llama_4_scaling_beta": 0.1}})"),
                      Contains("llama_4_scaling_beta") && Contains("needs") &&
                          Contains("original_max_position_embeddings"));
  REQUIRE_THROWS_WITH(posenc_test::parse_hf_config(R"({"hidden_size": 64, "num_attention_heads": 4,
      "rope_parameters": {"rope_type": "default", "llama_4_scaling_beta": 0.1,
      "original_max_position_embeddings": 0}})"),
                      Contains("original_max_position_embeddings\" = 0 must be > 0"));
  REQUIRE_THROWS_WITH(posenc_test::parse_hf_config(R"({"hidden_size": 64, "num_attention_heads": 4,
      "attn_temperature_len": 1024, "rope_parameters": {"rope_type": "default",
      "llama_4_scaling_beta": 0.1, "original_max_position_embeddings": 4096}})"),
                      Contains("one query temperature per model"));
  // A negative slope takes t below 1 and the softmax scale below 0 at long positions.
  REQUIRE_THROWS_WITH(posenc_test::parse_hf_config(R"({"hidden_size": 64, "num_attention_heads": 4,
      "rope_parameters": {"rope_type": "default", "llama_4_scaling_beta": -0.1,
      "original_max_position_embeddings": 4096}})"),
                      Contains("llama_4_scaling_beta") && Contains("= -0.10000000000000001 must be >= 0"));
  REQUIRE_THROWS_WITH(posenc_test::parse_hf_config(R"({"hidden_size": 64, "num_attention_heads": 4,
      "attn_temperature_tuning": true, "floor_scale": 8192, "attn_scale": -0.5})"),
                      Contains("attn_scale\" = -0.5 must be >= 0"));
}

TEST_CASE("hf_config: InternS1-Pro's FoPE keys are read and named, not reported as unread",
          "[hf_config][fope]") {
  const auto c = posenc_test::parse_hf_config(R"({"model_type": "interns1_pro_text", "hidden_size": 4096,
      "num_attention_heads": 32, "num_key_value_heads": 4, "head_dim": 128,
      "max_position_embeddings": 262144, "rope_parameters": {"rope_type": "default",
      "rope_theta": 5000000, "fope_init_factor": 0.5, "fope_sep_head": true}})");
  REQUIRE(c.rope.theta == 5000000.0);
  REQUIRE(has_note(c, "FoPE (fope_sep_head = true, num_inv_freq = absent)"));
  REQUIRE_FALSE(has_note(c, "fope_init_factor is not read"));
  REQUIRE_FALSE(has_note(c, "fope_sep_head is not read"));
}

TEST_CASE("hf_config: OLMo-3 scales RoPE on its full-attention layers only",
          "[hf_config][layers][olmo3]") {
  // An Olmo-3-7B style config: YaRN 8x from 8192 on theta 5e5, three sliding layers in four.
  const std::string head = R"({"model_type": "olmo3", "hidden_size": 4096,
      "num_attention_heads": 32, "num_hidden_layers": 8, "max_position_embeddings": 65536,
      "rope_theta": 500000, "sliding_window": 4096)";
  const std::string yarn = R"(, "rope_scaling": {"rope_type": "yarn", "factor": 8.0,
      "original_max_position_embeddings": 8192, "beta_fast": 32, "beta_slow": 1,
      "attention_factor": 1.2079441541679836})";
  const std::string types = R"(, "layer_types": ["sliding_attention", "sliding_attention",
      "sliding_attention", "full_attention", "sliding_attention", "sliding_attention",
      "sliding_attention", "full_attention"])";
  for (const bool given : {true, false}) {
    CAPTURE(given);
    const auto c = posenc_test::parse_hf_config(head + yarn + (given ? types : "") + "}");
    REQUIRE(c.layer_types.size() == 8);
    for (int i = 0; i < 8; ++i) {
      CHECK(c.layer_types[static_cast<std::size_t>(i)] ==
            ((i + 1) % 4 == 0 ? "full_attention" : "sliding_attention"));
    }
    REQUIRE(c.layer_ropes.size() == 2);
    const auto& full = c.layer_ropes[0];
    const auto& sliding = c.layer_ropes[1];
    REQUIRE(full.layer_type == "full_attention");
    CHECK(full.num_layers == 2);
    CHECK(full.params.scaling.type == RopeScalingType::kYarn);
    CHECK(full.params.scaling.factor == 8.0);
    REQUIRE(sliding.layer_type == "sliding_attention");
    CHECK(sliding.num_layers == 6);
    CHECK(sliding.params.theta == 500000.0);
    CHECK(sliding.params.scaling.type == RopeScalingType::kDefault);
    // The sliding layers' plan is plain RoPE: 5e5^(-2j/128), cos / sin unscaled.
    const auto plan = posenc::compute_rope_frequencies(sliding.params);
    CHECK(plan.attention_factor == 1.0);
    REQUIRE(plan.inv_freq.size() == 64);
    for (std::size_t j = 0; j < 64; ++j) {
      const long double want = std::pow(500000.0L, -2.0L * static_cast<long double>(j) / 128.0L);
      CHECK_THAT(plan.inv_freq[j], WithinRel(static_cast<double>(want), 1e-15));
    }
    CHECK(posenc::compute_rope_frequencies(full.params).attention_factor == 1.2079441541679836);
    CHECK(c.rope.scaling.type == RopeScalingType::kYarn);  // main = full attention
    CHECK(posenc::hf_attention_params(c, 0).sliding_window == 4096);
    CHECK(posenc::hf_attention_params(c, 3).sliding_window == 0);
  }
  // Without scaling every layer shares one plan.
  const auto plain = posenc_test::parse_hf_config(head + types + "}");
  REQUIRE(plain.layer_ropes.size() == 1);
  CHECK(plain.layer_ropes[0].layer_type == "all");
  // Gemma-3-like families keep their rule; another family with layer types and YaRN scales
  // every layer, as its transformers code does.
  const auto other = posenc_test::parse_hf_config(
      std::string(R"({"model_type": "olmo2", "hidden_size": 4096, "num_attention_heads": 32,
      "num_hidden_layers": 8, "rope_theta": 500000)") + yarn + types + "}");
  REQUIRE(other.layer_ropes.size() == 1);
  CHECK(other.layer_ropes[0].params.scaling.type == RopeScalingType::kYarn);
}

TEST_CASE("hf_config: linear-attention layers and OLMo-Hybrid apply no RoPE",
          "[hf_config][layers][nope]") {
  const auto rotating = [](const posenc::HfModelConfig& c) {
    std::vector<int> out;
    for (std::size_t i = 0; i < c.layer_uses_rope.size(); ++i) {
      if (c.layer_uses_rope[i]) out.push_back(static_cast<int>(i));
    }
    return out;
  };
  // OLMo-Hybrid's released checkpoints carry no rope_theta: no layer rotates.
  const std::string hybrid = R"({"model_type": "olmo_hybrid", "hidden_size": 3840,
      "num_attention_heads": 30, "num_hidden_layers": 8)";
  for (const char* rope : {"", R"(, "rope_parameters": null)", R"(, "rope_theta": null)",
                           R"(, "rope_parameters": {"rope_type": "default"})"}) {
    CAPTURE(rope);
    const auto c = posenc_test::parse_hf_config(hybrid + rope + "}");
    REQUIRE(c.layer_uses_rope.size() == 8);
    CHECK(rotating(c).empty());
    CHECK(has_note(c, "no attention layer applies RoPE"));
  }
  // With a theta, its full-attention layers rotate (default layer_types: every 4th full).
  for (const char* rope : {R"(, "rope_theta": 500000)",
                           R"(, "rope_parameters": {"rope_type": "default",
                                                     "rope_theta": 500000})"}) {
    CAPTURE(rope);
    const auto c = posenc_test::parse_hf_config(hybrid + rope + "}");
    REQUIRE(c.layer_types.size() == 8);
    CHECK(c.layer_types[0] == "linear_attention");
    CHECK(c.layer_types[3] == "full_attention");
    CHECK(rotating(c) == std::vector<int>{3, 7});
    CHECK(c.rope.theta == 500000.0);
    CHECK(c.rope.head_dim == 128);  // 3840 / 30
  }
  // Fewer than four layers: the last is full attention.
  CHECK(posenc_test::parse_hf_config(R"({"model_type": "olmo_hybrid", "hidden_size": 256,
      "num_attention_heads": 2, "num_hidden_layers": 3, "rope_theta": 10000})").layer_types ==
        std::vector<std::string>{"linear_attention", "linear_attention", "full_attention"});
  // Qwen3-Next style layer_types: the Gated DeltaNet layers do not rotate.
  const auto next = posenc_test::parse_hf_config(R"({"model_type": "qwen3_next", "hidden_size": 2048,
      "num_attention_heads": 16, "head_dim": 256, "partial_rotary_factor": 0.25,
      "rope_theta": 10000000, "layer_types": ["linear_attention", "linear_attention",
      "linear_attention", "full_attention"]})");
  CHECK(rotating(next) == std::vector<int>{3});
  CHECK(posenc::resolved_rotary_dim(next.rope) == 64);
  // Without layer_types, Qwen3NextConfig (and Qwen3.5's text configs, its subclasses) builds
  // them: full_attention where (i + 1) % full_attention_interval == 0 (default 4), the rest
  // linear_attention. posenc had read every layer as full attention with RoPE.
  const std::string next_head = R"({"model_type": "qwen3_next", "hidden_size": 2048,
      "num_attention_heads": 16, "num_key_value_heads": 2, "head_dim": 256,
      "num_hidden_layers": 8, "rope_theta": 10000000)";
  const auto next8 = posenc_test::parse_hf_config(next_head + "}");
  CHECK(rotating(next8) == std::vector<int>{3, 7});
  CHECK(posenc::hf_layer_heads(next8, 2).num_attention_heads == 0);
  CHECK(posenc::hf_layer_heads(next8, 3).num_attention_heads == 16);
  CHECK(rotating(posenc_test::parse_hf_config(next_head + R"(, "full_attention_interval": 2})")) ==
        std::vector<int>{1, 3, 5, 7});
  CHECK(rotating(posenc_test::parse_hf_config(R"({"model_type": "qwen3_5", "text_config": {
      "model_type": "qwen3_5_text", "hidden_size": 4096, "num_attention_heads": 16,
      "num_key_value_heads": 4, "head_dim": 256, "num_hidden_layers": 4}})")) ==
        std::vector<int>{3});
  REQUIRE_THROWS_WITH(posenc_test::parse_hf_config(next_head + R"(, "full_attention_interval": 0})"),
                      Contains("\"full_attention_interval\" = 0 must be in [1, "));
  // MiniMax-Text-01's attn_type_list (1 = softmax attention, 0 = lightning attention); its
  // rotary_dim is read as vLLM and MiniMax's own code read it.
  const std::string minimax = R"({"model_type": "minimax", "hidden_size": 6144,
      "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 128, "rotary_dim": 64,
      "rope_theta": 10000000, "num_hidden_layers": 4)";
  const auto mm = posenc_test::parse_hf_config(minimax + R"(, "attn_type_list": [0, 1, 0, 1]})");
  CHECK(mm.layer_types == std::vector<std::string>{"linear_attention", "full_attention",
                                                   "linear_attention", "full_attention"});
  CHECK(rotating(mm) == std::vector<int>{1, 3});
  CHECK(posenc::resolved_rotary_dim(mm.rope) == 64);
  REQUIRE_THROWS_AS(posenc_test::parse_hf_config(minimax + R"(, "attn_type_list": [0, 2, 0, 1]})"),
                    std::invalid_argument);
  REQUIRE_THROWS_WITH(posenc_test::parse_hf_config(minimax + R"(, "attn_type_list": [0, 2, 0, 1]})"),
                      Contains("attn_type_list") && Contains("[1] must be 0"));
  REQUIRE_THROWS_WITH(posenc_test::parse_hf_config(minimax + R"(, "attn_type_list": 1})"),
                      Contains("attn_type_list") && Contains("must be a list"));
}

TEST_CASE("hf_config: MiMo-V2-Flash's sliding layers (swa_rope_theta, hybrid_layer_pattern)",
          "[hf_config][layers][mimo]") {
  // The hub config's keys (XiaomiMiMo/MiMo-V2-Flash style, 12 of its 48 layers).
  const std::string hub = R"({"model_type": "mimo_v2", "hidden_size": 4096,
      "num_attention_heads": 64, "num_key_value_heads": 4, "head_dim": 192, "v_head_dim": 128,
      "swa_num_attention_heads": 64, "swa_num_key_value_heads": 8, "swa_head_dim": 192,
      "swa_v_head_dim": 128, "rope_theta": 5000000, "swa_rope_theta": 10000,
      "partial_rotary_factor": 0.334, "sliding_window": 128, "num_hidden_layers": 12,
      "max_position_embeddings": 262144, "add_swa_attention_sink_bias": true,
      "attention_value_scale": 0.707)";
  const std::string pattern = R"(, "hybrid_layer_pattern": [0, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1, 0])";
  const auto c = posenc_test::parse_hf_config(hub + pattern + "}");
  REQUIRE(c.layer_types.size() == 12);
  CHECK(c.layer_types[0] == "full_attention");
  CHECK(c.layer_types[1] == "sliding_attention");
  CHECK(c.layer_types[5] == "full_attention");
  REQUIRE(c.layer_ropes.size() == 2);
  const auto& full = c.layer_ropes[0].params;
  const auto& sliding = c.layer_ropes[1].params;
  CHECK(c.layer_ropes[0].num_layers == 3);
  CHECK(c.layer_ropes[1].num_layers == 9);
  CHECK(full.theta == 5000000.0);
  CHECK(sliding.theta == 10000.0);
  // rotary_dim = int(192 * 0.334) = int(64.128) = 64 on both.
  CHECK(posenc::resolved_rotary_dim(full) == 64);
  CHECK(posenc::resolved_rotary_dim(sliding) == 64);
  const auto plan = posenc::compute_rope_frequencies(sliding);
  REQUIRE(plan.inv_freq.size() == 32);
  CHECK_THAT(plan.inv_freq[31], WithinRel(std::pow(10000.0, -62.0 / 64.0), 1e-15));
  CHECK(c.num_key_value_heads == 4);
  CHECK(c.sliding_num_attention_heads == 64);
  CHECK(c.sliding_num_key_value_heads == 8);
  CHECK(posenc::hf_layer_heads(c, 1).num_key_value_heads == 8);
  CHECK(posenc::hf_layer_heads(c, 1).num_attention_heads == 64);
  CHECK(posenc::hf_layer_heads(c, 0).num_key_value_heads == 4);
  CHECK(c.v_head_dim == 128);
  CHECK_THAT(c.softmax_scale, WithinRel(1.0 / std::sqrt(192.0), 1e-15));
  CHECK(posenc::hf_attention_params(c, 1).sliding_window == 128);
  CHECK(posenc::hf_attention_params(c, 0).sliding_window == 0);
  // transformers' own mimo_v2_flash drops the swa_* head keys and doubles the kv heads.
  const auto native = posenc_test::parse_hf_config(R"({"model_type": "mimo_v2_flash",
      "hidden_size": 4096, "num_attention_heads": 64, "num_key_value_heads": 4, "head_dim": 192,
      "num_hidden_layers": 12, "sliding_window": 128, "layer_types": ["full_attention",
      "sliding_attention"], "rope_parameters": {
        "full_attention": {"rope_type": "default", "rope_theta": 5000000.0,
                           "partial_rotary_factor": 0.334},
        "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0,
                              "partial_rotary_factor": 0.334}}})");
  CHECK(native.sliding_num_key_value_heads == 8);
  CHECK(native.v_head_dim == 128);
  for (const auto& lr : native.layer_ropes) CHECK(posenc::resolved_rotary_dim(lr.params) == 64);
  // Errors name the key.
  REQUIRE_THROWS_AS(posenc_test::parse_hf_config(hub + R"(, "hybrid_layer_pattern": [0, 3]})"),
                    std::invalid_argument);
  REQUIRE_THROWS_WITH(posenc_test::parse_hf_config(hub + R"(, "hybrid_layer_pattern": [0, 3]})"),
                      Contains("hybrid_layer_pattern") && Contains("[1] must be 0"));
  REQUIRE_THROWS_WITH(posenc_test::parse_hf_config(hub + pattern + R"(, "swa_head_dim": 128})"),
                      Contains("swa_head_dim") && Contains("differs from head_dim = 192"));
  REQUIRE_THROWS_WITH(posenc_test::parse_hf_config(hub + pattern + R"(, "swa_num_key_value_heads": 5})"),
                      Contains("swa_num_attention_heads") && Contains("multiple"));
}

TEST_CASE("hf_config: a family's own defaults fill rope_theta, partial_rotary_factor and head_dim",
          "[hf_config][defaults]") {
  // Expected values: each transformers configuration class (its default_theta, the
  // partial_rotary_factor it sets by default, its head_dim field default).
  struct Case {
    const char* model_type;
    double theta;
    Eigen::Index rotary_dim;  // of a head of head_dim
    Eigen::Index head_dim;
  };
  // hidden_size 2048 over 16 heads would give 128-wide heads.
  const Case cases[] = {
      {"mixtral", 1e6, 128, 128},     {"phimoe", 1e6, 128, 128},     {"lfm2", 1e6, 128, 128},
      {"qwen2_vl_text", 1e6, 128, 128}, {"minimax", 1e6, 128, 128},  {"cohere", 1e4, 128, 128},
      {"llama4_text", 5e5, 128, 128}, {"ernie4_5_moe", 5e5, 128, 128}, {"olmo3", 1e4, 128, 128},
      {"bitnet", 5e5, 128, 128},      {"smollm3", 2e6, 128, 128},    {"helium", 1e5, 128, 128},
      {"fuyu", 25000, 64, 128},       {"phi", 1e4, 64, 128},         {"glm4_moe", 1e4, 64, 128},
      {"nemotron", 1e4, 64, 128},     {"recurrent_gemma", 1e4, 64, 128},
      {"stablelm", 1e4, 32, 128},     {"gpt_neox", 1e4, 32, 128},    {"qwen3_next", 1e4, 64, 256},
      {"gemma", 1e4, 256, 256},       {"gemma2", 1e4, 256, 256},     {"qwen3", 1e4, 128, 128},
      {"seed_oss", 1e4, 128, 128},    {"glm4", 1e4, 64, 128},        {"llama", 1e4, 128, 128},
      {"mimo_v2_flash", 5e6, 64, 192},
  };
  for (const Case& k : cases) {
    CAPTURE(k.model_type);
    const auto c = posenc_test::parse_hf_config(std::string(R"({"model_type": ")") + k.model_type +
                                           R"(", "hidden_size": 2048, "num_attention_heads": 16,
        "num_key_value_heads": 4})");
    CHECK(c.rope.theta == k.theta);
    CHECK(c.rope.head_dim == k.head_dim);
    CHECK(posenc::resolved_rotary_dim(c.rope) == k.rotary_dim);
  }
  // Given keys win over the defaults.
  const auto given = posenc_test::parse_hf_config(R"({"model_type": "phi", "hidden_size": 2560,
      "num_attention_heads": 32, "head_dim": 80, "rope_theta": 20000,
      "partial_rotary_factor": 0.4})");
  CHECK(given.rope.theta == 20000.0);
  CHECK(posenc::resolved_rotary_dim(given.rope) == 32);
  CHECK(posenc_test::parse_hf_config(R"({"model_type": "gpt_neox", "hidden_size": 2048,
      "num_attention_heads": 16, "rotary_pct": 1.0})").rope.partial_rotary_factor == 1.0);
  // transformers 5: a rope_parameters dict without rope_theta takes the class default too.
  CHECK(posenc_test::parse_hf_config(R"({"model_type": "mixtral", "hidden_size": 2048,
      "num_attention_heads": 16, "rope_parameters": {"rope_type": "default"}})").rope.theta == 1e6);
  // MiMo-V2-Flash without rope_parameters: 5e6 on full layers, 1e4 on sliding ones.
  const auto mimo = posenc_test::parse_hf_config(R"({"model_type": "mimo_v2_flash",
      "hidden_size": 4096, "num_attention_heads": 64, "num_key_value_heads": 4,
      "num_hidden_layers": 12, "sliding_window": 128})");
  REQUIRE(mimo.layer_types.size() == 12);
  CHECK(mimo.layer_types[0] == "full_attention");
  CHECK(mimo.layer_types[1] == "sliding_attention");
  CHECK(mimo.layer_types[5] == "full_attention");
  CHECK(mimo.layer_types[11] == "full_attention");
  REQUIRE(mimo.layer_ropes.size() == 2);
  CHECK(mimo.layer_ropes[0].params.theta == 5e6);
  CHECK(mimo.layer_ropes[0].num_layers == 3);
  CHECK(mimo.layer_ropes[1].params.theta == 1e4);
  CHECK(posenc::resolved_rotary_dim(mimo.layer_ropes[1].params) == 64);
}

TEST_CASE("hf_config: Gemma-3's text_config saved as a diff against Gemma3TextConfig's defaults",
          "[hf_config][defaults][layers]") {
  // google/gemma-3-4b-it's config.json: save_pretrained writes only the text_config keys that
  // differ from the class defaults (heads 8, kv 4, head_dim 256, rope_theta 1e6,
  // rope_local_base_freq 1e4, sliding_window_pattern 6, query_pre_attn_scalar 256,
  // max_position_embeddings 131072).
  const auto c = posenc_test::parse_hf_config(R"({"architectures": ["Gemma3ForConditionalGeneration"],
      "model_type": "gemma3", "mm_tokens_per_image": 256,
      "text_config": {"hidden_size": 2560, "intermediate_size": 10240,
        "model_type": "gemma3_text", "num_hidden_layers": 34,
        "rope_scaling": {"factor": 8.0, "rope_type": "linear"}, "sliding_window": 1024}})");
  CHECK(c.num_attention_heads == 8);
  CHECK(c.num_key_value_heads == 4);
  CHECK(c.rope.head_dim == 256);
  CHECK(c.max_position_embeddings == 131072);
  CHECK_THAT(c.softmax_scale, WithinRel(1.0 / 16.0, 1e-15));
  REQUIRE(c.layer_types.size() == 34);
  REQUIRE(c.layer_ropes.size() == 2);
  const auto& full = c.layer_ropes[0];
  const auto& local = c.layer_ropes[1];
  REQUIRE(full.layer_type == "full_attention");
  CHECK(full.num_layers == 5);  // layers 5, 11, 17, 23, 29
  CHECK(full.params.theta == 1e6);
  CHECK(full.params.scaling.type == RopeScalingType::kLinear);
  CHECK(full.params.scaling.factor == 8.0);
  CHECK(local.num_layers == 29);
  CHECK(local.params.theta == 1e4);
  CHECK(local.params.scaling.type == RopeScalingType::kDefault);
  CHECK(posenc::hf_attention_params(c, 0).sliding_window == 1024);
  CHECK(posenc::hf_attention_params(c, 5).sliding_window == 0);
  // gemma-3-27b-it gives its heads and scalar, not the bases: 1e6 / 1e4 all the same.
  const auto big = posenc_test::parse_hf_config(R"({"model_type": "gemma3", "text_config": {
      "head_dim": 128, "hidden_size": 5376, "model_type": "gemma3_text",
      "num_attention_heads": 32, "num_hidden_layers": 62, "num_key_value_heads": 16,
      "query_pre_attn_scalar": 168, "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
      "sliding_window": 1024}})");
  CHECK(big.layer_ropes[0].params.theta == 1e6);
  CHECK(big.layer_ropes[1].params.theta == 1e4);
  CHECK(big.layer_ropes[0].num_layers == 10);
  CHECK(big.rope.head_dim == 128);
  CHECK_THAT(big.softmax_scale, WithinRel(1.0 / std::sqrt(168.0), 1e-15));
  // A 128-wide head without the scalar still scales by 256^-1/2, the class default.
  const auto narrow = posenc_test::parse_hf_config(R"({"model_type": "gemma3_text", "head_dim": 128,
      "num_attention_heads": 4, "num_hidden_layers": 6, "rope_theta": 1000000})");
  CHECK_THAT(narrow.softmax_scale, WithinRel(1.0 / 16.0, 1e-15));
  // transformers >= 4.54 writes _sliding_window_pattern.
  const auto underscored = posenc_test::parse_hf_config(R"({"model_type": "gemma3_text",
      "num_hidden_layers": 4, "_sliding_window_pattern": 2})");
  CHECK(underscored.layer_types == std::vector<std::string>{"sliding_attention", "full_attention",
                                                            "sliding_attention", "full_attention"});
}

TEST_CASE("hf_config: the sizes of diff-saved text configs (LLaVA, Mistral, Qwen2, Gemma)",
          "[hf_config][defaults]") {
  // Expected values: each class's __init__ defaults (LlamaConfig, MistralConfig, Qwen2Config,
  // GemmaConfig, Gemma2Config).
  const auto llava = posenc_test::parse_hf_config(R"({"model_type": "llava", "text_config": {
      "model_type": "llama", "vocab_size": 32064}})");
  CHECK(llava.num_attention_heads == 32);
  CHECK(llava.num_key_value_heads == 32);
  CHECK(llava.rope.head_dim == 128);
  CHECK(llava.max_position_embeddings == 2048);
  CHECK(llava.rope.theta == 10000.0);
  const auto mistral = posenc_test::parse_hf_config(R"({"model_type": "mistral",
      "num_hidden_layers": 2})");
  CHECK(mistral.num_key_value_heads == 8);
  CHECK(mistral.max_position_embeddings == 131072);
  CHECK(mistral.sliding_window == 4096);
  CHECK(posenc_test::parse_hf_config(R"({"model_type": "mistral", "sliding_window": null})")
            .sliding_window == 0);
  // MistralConfig / Gemma2Config have no use_sliding_window: true keeps the class's window
  // (transformers ignores the key); false turns it off as it does a given window (vLLM).
  for (const char* type : {"mistral", "gemma2"}) {
    CAPTURE(type);
    const auto on = posenc_test::parse_hf_config(std::string(R"({"model_type": ")") + type +
                                            R"(", "use_sliding_window": true})");
    CHECK(on.sliding_window == 4096);
    const auto off = posenc_test::parse_hf_config(std::string(R"({"model_type": ")") + type +
                                             R"(", "use_sliding_window": false})");
    CHECK(off.sliding_window == 0);
    CHECK(has_note(off, "default sliding_window 4096 ignored: use_sliding_window = false"));
  }
  // Qwen2: use_sliding_window defaults to false, so a given window is not applied.
  const auto qwen2 = posenc_test::parse_hf_config(R"({"model_type": "qwen2", "hidden_size": 3584,
      "num_attention_heads": 28, "num_key_value_heads": 4, "sliding_window": 131072})");
  CHECK(qwen2.sliding_window == 0);
  CHECK(has_note(qwen2, "use_sliding_window absent"));
  const auto qwen2_window = posenc_test::parse_hf_config(R"({"model_type": "qwen2",
      "sliding_window": 4096, "use_sliding_window": true, "num_hidden_layers": 32})");
  CHECK(qwen2_window.sliding_window == 4096);
  CHECK(qwen2_window.max_window_layers == 28);  // Qwen2Config's default
  CHECK_FALSE(posenc::hf_layer_is_sliding(qwen2_window, 27));
  CHECK(posenc::hf_layer_is_sliding(qwen2_window, 28));
  const auto qwen3 = posenc_test::parse_hf_config(R"({"model_type": "qwen3", "sliding_window": 4096})");
  CHECK(qwen3.num_key_value_heads == 32);
  CHECK(qwen3.rope.head_dim == 128);
  CHECK(qwen3.max_position_embeddings == 32768);
  CHECK(qwen3.sliding_window == 0);
  const auto gemma = posenc_test::parse_hf_config(R"({"model_type": "gemma"})");
  CHECK(gemma.num_attention_heads == 16);
  CHECK(gemma.rope.head_dim == 256);
  CHECK(gemma.max_position_embeddings == 8192);
  const auto gemma2 = posenc_test::parse_hf_config(R"({"model_type": "gemma2",
      "num_hidden_layers": 4})");
  CHECK(gemma2.num_key_value_heads == 4);
  CHECK(gemma2.sliding_window == 4096);
  CHECK_THAT(gemma2.softmax_scale, WithinRel(1.0 / 16.0, 1e-15));
  CHECK(gemma2.attn_logit_softcapping == 50.0);
  CHECK(posenc_test::parse_hf_config(R"({"model_type": "gemma2", "attn_logit_softcapping": null})")
            .attn_logit_softcapping == 0.0);
  // Families without a table entry still need their sizes.
  REQUIRE_THROWS_WITH(posenc_test::parse_hf_config(R"({"model_type": "phi3"})"),
                      Contains("hidden_size") && Contains("missing"));
}

TEST_CASE("hf_config: head counts per layer (Laguna, OpenELM, Nemotron-NAS)",
          "[hf_config][layers][heads]") {
  const auto heads_of = [](const posenc::HfModelConfig& c) {
    std::vector<std::pair<Eigen::Index, Eigen::Index>> out;
    for (Eigen::Index i = 0; i < c.num_hidden_layers; ++i) {
      const auto h = posenc::hf_layer_heads(c, i);
      out.emplace_back(h.num_attention_heads, h.num_key_value_heads);
    }
    return out;
  };
  using Heads = std::vector<std::pair<Eigen::Index, Eigen::Index>>;
  // poolside/Laguna-XS-2.1 (8 of its layers): 48 query heads on full layers, 64 on sliding ones,
  // 8 kv heads everywhere; YaRN on full layers rotating half of the 128-wide head.
  const std::string laguna = R"({"model_type": "laguna", "hidden_size": 2048,
      "num_hidden_layers": 8, "num_attention_heads": 48, "num_key_value_heads": 8,
      "head_dim": 128, "max_position_embeddings": 262144, "sliding_window": 512,
      "layer_types": ["full_attention", "sliding_attention", "sliding_attention",
        "sliding_attention", "full_attention", "sliding_attention", "sliding_attention",
        "sliding_attention"],
      "rope_parameters": {
        "full_attention": {"rope_theta": 500000.0, "rope_type": "yarn", "factor": 32.0,
          "original_max_position_embeddings": 8192, "beta_slow": 1.0, "beta_fast": 64.0,
          "attention_factor": 1.3465735902799727, "partial_rotary_factor": 0.5},
        "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0,
          "partial_rotary_factor": 1.0}})";
  const auto l = posenc_test::parse_hf_config(laguna +
      R"(, "num_attention_heads_per_layer": [48, 64, 64, 64, 48, 64, 64, 64]})");
  CHECK(heads_of(l) ==
        Heads{{48, 8}, {64, 8}, {64, 8}, {64, 8}, {48, 8}, {64, 8}, {64, 8}, {64, 8}});
  CHECK(l.num_attention_heads == 48);
  CHECK(l.layer_uses_rope.empty());
  REQUIRE(l.layer_ropes.size() == 2);
  CHECK(posenc::resolved_rotary_dim(l.layer_ropes[0].params) == 64);
  CHECK(posenc::resolved_rotary_dim(l.layer_ropes[1].params) == 128);
  CHECK(l.layer_ropes[0].params.scaling.attention_factor == 1.3465735902799727);
  // Without the list every layer has the model's counts.
  CHECK(heads_of(posenc_test::parse_hf_config(laguna + "}")) == Heads(8, {48, 8}));
  const std::string two = R"(, "num_attention_heads_per_layer": [48, 64]})";
  REQUIRE_THROWS_AS(posenc_test::parse_hf_config(laguna + two), std::invalid_argument);
  REQUIRE_THROWS_WITH(posenc_test::parse_hf_config(laguna + two),
                      Contains("num_attention_heads_per_layer\" has 2 entries; one per layer "
                               "(num_hidden_layers = 8) expected"));
  const std::string sixty =
      R"(, "num_attention_heads_per_layer": [48, 60, 64, 64, 48, 64, 64, 64]})";
  REQUIRE_THROWS_WITH(posenc_test::parse_hf_config(laguna + sixty),
                      Contains("layer 1: 60 query heads are not a multiple of 8 kv heads"));
  REQUIRE_THROWS_WITH(posenc_test::parse_hf_config(laguna +
                          R"(, "num_attention_heads_per_layer": [48, 0, 64, 64, 48, 64, 64, 64]})"),
                      Contains("num_attention_heads_per_layer[1]\" must be an integer in [1, "));

  // apple/OpenELM-270M's keys (4 of its 16 layers; rope_freq_constant changed from its 10000 so
  // that the alias is seen): counts per layer, its names for layers, width, length and base.
  const std::string openelm = R"({"model_type": "openelm", "head_dim": 64,
      "max_context_length": 2048, "model_dim": 1280, "num_gqa_groups": 4,
      "num_kv_heads": [3, 3, 4, 5], "num_query_heads": [12, 12, 16, 20],
      "num_transformer_layers": 4, "rope_freq_constant": 50000, "rope_max_length": 4096)";
  const auto e = posenc_test::parse_hf_config(openelm + "}");
  CHECK(e.num_hidden_layers == 4);
  CHECK(e.hidden_size == 1280);
  CHECK(e.max_position_embeddings == 2048);
  CHECK(e.rope.theta == 50000.0);
  CHECK(e.rope.head_dim == 64);
  CHECK(heads_of(e) == Heads{{12, 3}, {12, 3}, {16, 4}, {20, 5}});
  CHECK(e.num_attention_heads == 12);
  CHECK(e.num_key_value_heads == 3);
  REQUIRE_THROWS_WITH(posenc_test::parse_hf_config(R"({"model_type": "openelm", "head_dim": 64,
      "num_query_heads": [12, 12], "num_transformer_layers": 2})"),
                      Contains("num_kv_heads\" is missing"));

  // nvidia/Llama-3_3-Nemotron-Super-49B-v1 style block_configs (DeciLM): kv heads = 64 /
  // n_heads_in_group; no_op and replace_with_linear blocks have no attention (and no RoPE).
  const auto block = [](const std::string& attention) {
    return R"({"attention": )" + attention + R"(, "ffn": {"ffn_mult": 2.625}})";
  };
  const std::string nas = R"({"model_type": "nemotron-nas", "hidden_size": 8192,
      "num_attention_heads": 64, "num_hidden_layers": 4, "max_position_embeddings": 131072,
      "rope_theta": 500000.0, "rope_scaling": {"factor": 8.0, "high_freq_factor": 4.0,
        "low_freq_factor": 1.0, "original_max_position_embeddings": 8192, "rope_type": "llama3"},
      "block_configs": [)";
  const std::string attend8 = block(R"({"n_heads_in_group": 8, "no_op": false,
      "replace_with_linear": false, "window_length": null, "num_sink_tokens": null})");
  const std::string no_op = block(R"({"n_heads_in_group": null, "no_op": true})");
  const std::string linear = block(R"({"n_heads_in_group": null, "replace_with_linear": true})");
  const auto n = posenc_test::parse_hf_config(nas + no_op + "," + attend8 + "," + linear + "," +
                                         block(R"({"n_heads_in_group": 16})") + "]}");
  CHECK(heads_of(n) == Heads{{0, 0}, {64, 8}, {0, 0}, {64, 4}});
  CHECK(n.num_attention_heads == 64);
  CHECK(n.num_key_value_heads == 8);  // the first attention layer's, as vLLM reads it
  CHECK(n.layer_uses_rope == std::vector<bool>{false, true, false, true});
  CHECK(n.rope.scaling.type == RopeScalingType::kLlama3);
  CHECK(has_note(n, "2 layers without attention"));
  const auto nas_error = [&](const std::string& blocks) {
    try {
      posenc_test::parse_hf_config(nas + blocks + "]}", "nas.json");
    } catch (const std::invalid_argument& err) {
      return std::string(err.what());
    }
    return std::string("no error");
  };
  CHECK_THAT(nas_error(attend8 + "," + attend8 + "," + attend8),
             Contains("block_configs\" has 3 entries; one per layer"));
  const std::string three = attend8 + "," + attend8 + "," + attend8 + ",";
  CHECK_THAT(nas_error(three + block(R"({"no_op": false})")),
             Contains("nas.json: key \"block_configs[3].attention.n_heads_in_group\" is missing"));
  CHECK_THAT(nas_error(three + block(R"({"n_heads_in_group": 6})")),
             Contains("n_heads_in_group\" = 6 does not divide num_attention_heads = 64"));
  CHECK_THAT(nas_error(three + block(R"({"n_heads_in_group": 8, "window_length": 4096})")),
             Contains("block_configs[3].attention.window_length\" = 4096: per-block windows"));
  CHECK_THAT(nas_error(no_op + "," + no_op + "," + linear + "," + no_op),
             Contains("block_configs\" gives no layer attention heads"));
  CHECK_THAT(nas_error(attend8 + "," + attend8 + "," + attend8 + R"(, {"ffn": {}})"),
             Contains("block_configs[3].attention\" must be an object"));
  REQUIRE_THROWS_AS(posenc::hf_layer_heads(n, 4), std::out_of_range);
  REQUIRE_THROWS_AS(posenc::hf_layer_heads(n, -1), std::out_of_range);

  // google/gemma-4-31B style: attention_k_eq_v gives the full layers num_global_key_value_heads
  // (keys also the values), the sliding layers num_key_value_heads (Gemma4TextAttention).
  const std::string gemma4 = R"({"model_type": "gemma4_text", "hidden_size": 5376,
      "num_attention_heads": 32, "num_key_value_heads": 16, "num_global_key_value_heads": 4,
      "head_dim": 256, "global_head_dim": 512, "num_hidden_layers": 4, "sliding_window": 1024,
      "layer_types": ["sliding_attention", "sliding_attention", "sliding_attention",
                      "full_attention"])";
  const auto k_eq_v = posenc_test::parse_hf_config(gemma4 + R"(, "attention_k_eq_v": true})");
  CHECK(heads_of(k_eq_v) == Heads{{32, 16}, {32, 16}, {32, 16}, {32, 4}});
  CHECK(has_note(k_eq_v, "keys also the values"));
  // Without attention_k_eq_v every layer has num_key_value_heads (E2B / E4B).
  CHECK(heads_of(posenc_test::parse_hf_config(gemma4 + "}")) == Heads(4, {32, 16}));
  REQUIRE_THROWS_WITH(posenc_test::parse_hf_config(gemma4 + R"(, "attention_k_eq_v": true,
      "num_global_key_value_heads": 5})"),
                      Contains("num_global_key_value_heads\" = 5 must divide "
                               "num_attention_heads = 32"));
}

TEST_CASE("hf_config: convolution and Mamba layers apply no RoPE and have no heads (LFM2, "
          "Granite-4.0-H)",
          "[hf_config][layers][heads]") {
  // LiquidAI/LFM2-1.2B: full_attn_idxs, no layer_types (Lfm2Config builds "conv" elsewhere).
  const std::string lfm2 = R"({"model_type": "lfm2", "hidden_size": 2048,
      "num_attention_heads": 32, "num_key_value_heads": 8, "num_hidden_layers": 16,
      "max_position_embeddings": 128000, "rope_theta": 1000000.0, "conv_L_cache": 3)";
  const auto c = posenc_test::parse_hf_config(lfm2 + R"(, "full_attn_idxs": [2, 5, 8, 10, 12, 14]})");
  const std::vector<int> full = {2, 5, 8, 10, 12, 14};
  REQUIRE(c.layer_types.size() == 16);
  REQUIRE(c.layer_uses_rope.size() == 16);
  for (int i = 0; i < 16; ++i) {
    INFO("layer " << i);
    const bool attends = std::find(full.begin(), full.end(), i) != full.end();
    CHECK(c.layer_types[static_cast<std::size_t>(i)] == (attends ? "full_attention" : "conv"));
    CHECK(c.layer_uses_rope[static_cast<std::size_t>(i)] == attends);
    CHECK(posenc::hf_layer_heads(c, i).num_attention_heads == (attends ? 32 : 0));
    CHECK(posenc::hf_layer_heads(c, i).num_key_value_heads == (attends ? 8 : 0));
  }
  CHECK(c.rope.theta == 1000000.0);
  // The same from layer_types (transformers >= 4.54 writes them); no list: every layer attends.
  const auto typed = posenc_test::parse_hf_config(lfm2 +
      R"(, "num_hidden_layers": 3, "layer_types": ["conv", "full_attention", "conv"]})");
  CHECK(typed.layer_uses_rope == std::vector<bool>{false, true, false});
  CHECK(posenc_test::parse_hf_config(lfm2 + "}").layer_uses_rope.empty());
  REQUIRE_THROWS_WITH(posenc_test::parse_hf_config(lfm2 + R"(, "full_attn_idxs": [2, 16]})"),
                      Contains("full_attn_idxs\" [1] must be a layer index in [0, 16), got 16"));
  // ibm-granite/granite-4.0-h style: Mamba-2 layers and RoPE attention layers.
  const auto g = posenc_test::parse_hf_config(R"({"model_type": "granitemoehybrid",
      "hidden_size": 1536, "num_attention_heads": 12, "num_key_value_heads": 4,
      "num_hidden_layers": 4, "position_embedding_type": "rope", "rope_theta": 10000,
      "layer_types": ["mamba", "mamba", "attention", "mamba"]})");
  CHECK(g.layer_uses_rope == std::vector<bool>{false, false, true, false});
  CHECK(posenc::hf_layer_heads(g, 2).num_key_value_heads == 4);
  CHECK(posenc::hf_layer_heads(g, 0).num_key_value_heads == 0);
}

TEST_CASE("hf_config: Gemma-3n's KV sharing layers read an earlier layer's cache "
          "(num_kv_shared_layers)",
          "[hf_config][layers][kv_sharing]") {
  // google/gemma-3n-E2B's text config: 30 layers, every 5th full attention, the last 10 share.
  // transformers: layer i >= 20 attends the cache of the last layer before 20 of its type:
  // sliding layers 18, full layers 19 (worked by hand from the layer list).
  std::string types;
  for (int i = 0; i < 30; ++i) {
    types += std::string(i ? ", " : "") + ((i + 1) % 5 == 0 ? "\"full_attention\""
                                                             : "\"sliding_attention\"");
  }
  const std::string head = R"({"model_type": "gemma3n_text", "hidden_size": 2048,
      "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 256,
      "num_hidden_layers": 30, "sliding_window": 512, "layer_types": [)" + types + "]";
  const auto c = posenc_test::parse_hf_config(head + R"(, "num_kv_shared_layers": 10})");
  std::vector<Eigen::Index> expect(30);
  for (Eigen::Index i = 0; i < 20; ++i) expect[static_cast<std::size_t>(i)] = i;
  for (Eigen::Index i = 20; i < 30; ++i) {
    expect[static_cast<std::size_t>(i)] = (i + 1) % 5 == 0 ? 19 : 18;
  }
  for (Eigen::Index i = 0; i < 30; ++i) {
    INFO("layer " << i);
    CHECK(posenc::hf_layer_kv_source(c, i) == expect[static_cast<std::size_t>(i)]);
  }
  CHECK(has_note(c, "layers 20 to 29 attend the KV cache of the last earlier layer"));
  // No sharing: every layer its own, and the list stays empty.
  const auto own = posenc_test::parse_hf_config(head + R"(, "num_kv_shared_layers": 0})");
  CHECK(own.layer_kv_source.empty());
  CHECK(posenc::hf_layer_kv_source(own, 29) == 29);
  REQUIRE_THROWS_AS(posenc::hf_layer_kv_source(own, 30), std::out_of_range);
  // Errors: every layer shared; a type that only the shared layers have.
  REQUIRE_THROWS_WITH(posenc_test::parse_hf_config(head + R"(, "num_kv_shared_layers": 30})"),
                      Contains("num_kv_shared_layers\" = 30 must be in "
                               "[0, num_hidden_layers = 30)"));
  const auto two = R"({"model_type": "gemma3n_text", "hidden_size": 512, "num_attention_heads": 2,
      "num_hidden_layers": 3, "layer_types": ["sliding_attention", "sliding_attention",
      "full_attention"], "num_kv_shared_layers": 1})";
  REQUIRE_THROWS_WITH(posenc_test::parse_hf_config(two),
                      Contains("layer 2 (full_attention) has no earlier layer of its type"));
}

// Configs that loaded without an error but with values transformers (or posenc's own rules)
// would not give, found by a review; each case is what loaded before.
TEST_CASE("hf_config: degenerate geometries and per-layer lists are refused, not loaded wrong",
          "[hf_config][errors]") {
  const auto refuses = [](const std::string& text, const std::string& what) {
    CAPTURE(text);
    REQUIRE_THROWS_AS(posenc_test::parse_hf_config(text), std::invalid_argument);
    REQUIRE_THROWS_WITH(posenc_test::parse_hf_config(text), Contains(what));
  };
  // Absolute families: heads 0 wide gave softmax_scale = 1 / sqrt(0) = inf.
  refuses(R"({"model_type": "gpt2", "n_embd": 4, "n_head": 8, "n_layer": 2, "n_positions": 1024})",
          "is smaller than num_attention_heads = 8: heads of width 0");
  // Falcon-H1's key_multiplier: -1 gave a negative scale, 0 the "no scale" sentinel.
  refuses(R"({"model_type": "falcon_h1", "hidden_size": 1024, "num_attention_heads": 8,
              "key_multiplier": -1.0})", "key_multiplier\" = -1 must be > 0");
  refuses(R"({"model_type": "falcon_h1", "hidden_size": 1024, "num_attention_heads": 8,
              "key_multiplier": 0})", "key_multiplier\" = 0 must be > 0");
  // kv heads that do not divide the query heads (the per-layer lists already refused them).
  refuses(R"({"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32,
              "num_key_value_heads": 5})", "num_key_value_heads\" = 5 must divide num_attention_heads = 32");
  // Per-layer lists of another length than num_hidden_layers: layers past a short list ran as
  // full attention with RoPE; a long no_rope_layers counted NoPE layers that do not exist.
  refuses(R"({"model_type": "minimax", "hidden_size": 1024, "num_attention_heads": 8,
              "num_hidden_layers": 8, "attn_type_list": [0, 1]})",
          "attn_type_list\" has 2 entries; one per layer (num_hidden_layers = 8) expected");
  refuses(R"({"model_type": "smollm3", "hidden_size": 1024, "num_attention_heads": 8,
              "num_hidden_layers": 2, "no_rope_layers": [1, 1, 0, 0, 0, 0]})",
          "no_rope_layers\" has 6 entries; one per layer (num_hidden_layers = 2) expected");
  refuses(R"({"model_type": "smollm3", "hidden_size": 1024, "num_attention_heads": 8,
              "num_hidden_layers": 4, "no_rope_layers": [0]})",
          "no_rope_layers\" has 1 entries; one per layer (num_hidden_layers = 4) expected");
  // Llama-4's vision tower: a patch larger than the image gave grid_side 0.
  refuses(R"({"model_type": "llama4", "text_config": {"model_type": "llama4_text",
              "hidden_size": 1024, "num_attention_heads": 8, "num_hidden_layers": 4},
              "vision_config": {"image_size": 14, "patch_size": 28}})",
          "patch_size\" = 28 is larger than image_size = 14");
}

TEST_CASE("hf_config: vision heads 0 wide leave the vision RoPE unread", "[hf_config][vision]") {
  // embed_dim 2 over 4 heads: head_dim 0 passed the "multiple of 4" test (0 % 4 == 0).
  const auto qwen = posenc_test::parse_hf_config(R"({"model_type": "qwen2_vl", "hidden_size": 1024,
      "num_attention_heads": 8, "vision_config": {"embed_dim": 2, "num_heads": 4,
      "spatial_merge_size": 2}})");
  CHECK_FALSE(qwen.vision_rope);
  const auto llama4 = posenc_test::parse_hf_config(R"({"model_type": "llama4", "text_config": {
      "model_type": "llama4_text", "hidden_size": 1024, "num_attention_heads": 8,
      "num_hidden_layers": 4}, "vision_config": {"hidden_size": 8, "num_attention_heads": 16}})");
  CHECK_FALSE(llama4.vision_rope);
}

TEST_CASE("hf_config: transformers' readings of an explicit null kv head count and of "
          "rope_scaling beside rope_parameters", "[hf_config]") {
  // MistralConfig: "if num_key_value_heads is None: num_key_value_heads = num_attention_heads";
  // the family default (8) is for an absent key only.
  const auto null_kv = posenc_test::parse_hf_config(R"({"model_type": "mistral", "hidden_size": 4096,
      "num_attention_heads": 32, "num_key_value_heads": null})");
  CHECK(null_kv.num_key_value_heads == 32);
  const auto absent_kv = posenc_test::parse_hf_config(R"({"model_type": "mistral", "hidden_size": 4096,
      "num_attention_heads": 32})");
  CHECK(absent_kv.num_key_value_heads == 8);
  // transformers 5 convert_rope_params_to_dict: rope_parameters = rope_scaling or
  // rope_parameters. A YaRN rope_scaling added to a config saved by transformers 5 wins, theta
  // from the top-level key.
  const auto both = posenc_test::parse_hf_config(R"({"model_type": "qwen2", "hidden_size": 4096,
      "num_attention_heads": 32, "max_position_embeddings": 131072, "rope_theta": 1000000,
      "rope_parameters": {"rope_type": "default", "rope_theta": 1000000},
      "rope_scaling": {"rope_type": "yarn", "factor": 4.0,
                       "original_max_position_embeddings": 32768}})");
  CHECK(both.rope.scaling.type == RopeScalingType::kYarn);
  CHECK(both.rope.scaling.factor == 4.0);
  CHECK(both.rope.theta == 1000000.0);
  CHECK(has_note(both, "rope_parameters ignored"));
  // An empty rope_scaling is falsy in Python: rope_parameters stays.
  const auto empty = posenc_test::parse_hf_config(R"({"model_type": "qwen2", "hidden_size": 4096,
      "num_attention_heads": 32, "rope_parameters": {"rope_type": "linear", "factor": 2.0,
      "rope_theta": 1000000}, "rope_scaling": {}})");
  CHECK(empty.rope.scaling.type == RopeScalingType::kLinear);
  CHECK(empty.rope.theta == 1000000.0);
}

// Configs the structure-aware fuzz driver (tests/fuzz/fuzz_hf_config.cpp with config_checks.hpp)
// found accepted although no attention call could take their parameters.
TEST_CASE("hf_config: head counts and temperatures no attention call takes are refused",
          "[hf_config]") {
  // Key / value heads without query heads: 8 kv heads of an unknown number of query heads.
  REQUIRE_THROWS_WITH(posenc_test::parse_hf_config(R"({"model_type": "llama4_text", "head_dim": 128,
                      "num_key_value_heads": 8, "num_hidden_layers": 4})", "kv.json"),
                      Contains("kv.json: key \"num_attention_heads\" is missing, but "
                               "num_key_value_heads = 8 is given"));
  // Qwen2's default of 32 kv heads (transformers' Qwen2Config) does not divide 28 query heads:
  // transformers takes it and repeat_kv fails, so the loader refuses it as it refuses 32 given.
  const std::string qwen = R"({"model_type": "qwen2", "hidden_size": 3584,
                      "num_attention_heads": 28, "num_hidden_layers": 28)";
  REQUIRE_THROWS_WITH(posenc_test::parse_hf_config(qwen + "}"),
                      Contains("num_key_value_heads (absent: qwen2's default)\" = 32 must divide "
                               "num_attention_heads = 28"));
  REQUIRE_THROWS_WITH(posenc_test::parse_hf_config(qwen + R"(, "num_key_value_heads": 32})"),
                      Contains("\"num_key_value_heads\" = 32 must divide num_attention_heads = 28"));
  CHECK(posenc_test::parse_hf_config(qwen + R"(, "num_key_value_heads": 4})").num_key_value_heads == 4);
  // Temperatures whose t(2^53) is past float's range (max ~3.4e38): 1 + 1e38 ln(1 + 2^53 /
  // 8192) ~ 2.1e39, and floor_scale 1e-300, whose 2^53 / 1e-300 is past double's; 1 + 0.1
  // ln(1 + 2^53 / 1e-3) ~ 5.4 is fine.
  for (const char* keys : {R"("attn_scale": 1e38})", R"("floor_scale": 1e-300})"}) {
    CAPTURE(keys);
    REQUIRE_THROWS_WITH(posenc_test::parse_hf_config(std::string(R"({"model_type": "llama4_text",
                        "hidden_size": 64, "num_attention_heads": 2,
                        "attn_temperature_tuning": true, )") + keys),
                        Contains("floor_scale and attn_scale\" give a query temperature "
                                 "attention() rejects") && Contains("past float's range"));
  }
  CHECK(posenc_test::parse_hf_config(R"({"model_type": "llama4_text", "hidden_size": 64,
        "num_attention_heads": 2, "attn_temperature_tuning": true, "floor_scale": 1e-3})")
            .attention_temperature->floor_scale == 1e-3);
  REQUIRE_THROWS_WITH(posenc_test::parse_hf_config(R"({"hidden_size": 64, "num_attention_heads": 4,
      "rope_parameters": {"rope_type": "default", "llama_4_scaling_beta": 1e38,
      "original_max_position_embeddings": 1}})"),
                      Contains("llama_4_scaling_beta and ") && Contains("past float's range"));
}

TEST_CASE("hf_config: per-layer helpers on hand-built configs (model_config.hpp rules)",
          "[hf_config][layers]") {
  // trained_length: L0 when given, else max_position_embeddings.
  posenc::HfModelConfig base;
  base.max_position_embeddings = 4096;
  CHECK(base.trained_length() == 4096);
  base.original_max_position_embeddings = 2048;
  CHECK(base.trained_length() == 2048);

  // No sliding_window: no layer slides, whatever the family rule says.
  posenc::HfModelConfig plain;
  plain.model_type = "mistral";
  plain.num_hidden_layers = 4;
  CHECK_FALSE(posenc::hf_layer_is_sliding(plain, 0));
  CHECK(posenc::hf_attention_params(plain, 0).sliding_window == 0);

  // GPT-OSS without layer_types (HF GptOssConfig's default: layer i slides when (i + 1) % 2).
  posenc::HfModelConfig oss;
  oss.model_type = "gpt_oss";
  oss.num_hidden_layers = 4;
  oss.sliding_window = 128;
  for (Eigen::Index i = 0; i < 4; ++i) {
    CAPTURE(i);
    CHECK(posenc::hf_layer_is_sliding(oss, i) == ((i + 1) % 2 != 0));
  }
  // Gemma-2 built by hand (max_window_layers left at "absent"): even layers slide.
  posenc::HfModelConfig g2 = oss;
  g2.model_type = "gemma2";
  CHECK(posenc::hf_layer_is_sliding(g2, 0));
  CHECK_FALSE(posenc::hf_layer_is_sliding(g2, 1));

  // Sliding layers without MiMo-style counts keep the model's head counts.
  posenc::HfModelConfig typed;
  typed.num_hidden_layers = 2;
  typed.num_attention_heads = 8;
  typed.num_key_value_heads = 2;
  typed.sliding_window = 64;
  typed.layer_types = {"sliding_attention", "full_attention"};
  CHECK(posenc::hf_layer_heads(typed, 0).num_attention_heads == 8);
  CHECK(posenc::hf_layer_heads(typed, 0).num_key_value_heads == 2);

  // No layer count: the per-layer head lists bound the layer index.
  posenc::HfModelConfig lists;
  lists.layer_num_attention_heads = {8, 8, 4};
  lists.layer_num_key_value_heads = {2, 2, 1};
  CHECK(posenc::hf_layer_heads(lists, 2).num_key_value_heads == 1);
  REQUIRE_THROWS_WITH(posenc::hf_layer_heads(lists, 3),
                      Contains("layer = 3 is outside [0, num_hidden_layers = 3)"));

  // softmax_scale 0 (no head width in the config): AttentionParams keeps its own default.
  CHECK_FALSE(posenc::hf_attention_params(plain, 0).scale.has_value());
}

TEST_CASE("hf_config: hf_mla_rope_params keeps the plan's own rotary_offset past the prefix",
          "[hf_config][mla]") {
  posenc::HfModelConfig c;
  c.rope.head_dim = 64;
  c.rope.rotary_dim = 32;
  c.rope.rotary_offset = 8;  // the rotated slice starts 8 into the 64-wide rope part
  c.qk_nope_head_dim = 128;
  c.kv_lora_rank = 512;
  const auto concat = posenc::hf_mla_rope_params(c, posenc::HfMlaHead::kConcatenated);
  CHECK(concat.head_dim == 128 + 64);
  CHECK(concat.rotary_offset == 128 + 8);
  const auto latent = posenc::hf_mla_rope_params(c, posenc::HfMlaHead::kLatent);
  CHECK(latent.head_dim == 512 + 64);
  CHECK(latent.rotary_offset == 512 + 8);
}

// ---- mutation-audit additions (hf_config.hpp family defaults and rules) --------------------

// M01. SolarOpenConfig (transformers configuration_solar_open.py): head_dim = 128,
// default_theta = 1e6. 2048 / 32 = 64 would be the hidden_size / heads derivation.
TEST_CASE("hf_config: solar_open without head_dim or rope_theta takes SolarOpenConfig's "
          "defaults") {
  const auto c = posenc_test::parse_hf_config(R"({"model_type": "solar_open", "hidden_size": 2048,
      "num_attention_heads": 32, "num_key_value_heads": 8})");
  CHECK(c.rope.head_dim == 128);
  CHECK(c.attention_head_dim == 128);
  CHECK(c.rope.theta == 1e6);
  CHECK(posenc::resolved_rotary_dim(c.rope) == 128);
}

// M02. Ernie4_5Config (configuration_ernie4_5.py): default_theta = 500000, head_dim = 128
// (1024 / 16 = 64 would be the derivation).
TEST_CASE("hf_config: ernie4_5 without rope_theta or head_dim takes Ernie4_5Config's "
          "defaults") {
  const auto c = posenc_test::parse_hf_config(R"({"model_type": "ernie4_5", "hidden_size": 1024,
      "num_attention_heads": 16, "num_key_value_heads": 2})");
  CHECK(c.rope.theta == 5e5);
  CHECK(c.rope.head_dim == 128);
}

// M03. Qwen3_5TextConfig (configuration_qwen3_5.py): head_dim = 256 and
// partial_rotary_factor 0.25 ("assign default for BC"): rotary_dim = 0.25 * 256 = 64, for the
// flat "qwen3_5" spelling as for "qwen3_5_text".
TEST_CASE("hf_config: qwen3_5 without partial_rotary_factor rotates a quarter of its "
          "256-wide heads") {
  for (const char* type : {"qwen3_5", "qwen3_5_text"}) {
    CAPTURE(type);
    const auto c = posenc_test::parse_hf_config(std::string(R"({"model_type": ")") + type +
                                           R"(", "hidden_size": 4096, "num_attention_heads": 16,
        "num_key_value_heads": 4, "rope_theta": 10000000})");
    CHECK(c.rope.head_dim == 256);
    CHECK(posenc::resolved_rotary_dim(c.rope) == 64);
  }
}

// M04. Lfm2MoeConfig (configuration_lfm2_moe.py): default_theta = 1000000.0.
TEST_CASE("hf_config: lfm2_moe without rope_theta takes Lfm2MoeConfig's default 1e6") {
  const auto c = posenc_test::parse_hf_config(R"({"model_type": "lfm2_moe", "hidden_size": 2048,
      "num_attention_heads": 32, "num_key_value_heads": 8})");
  CHECK(c.rope.theta == 1e6);
}

// M05. GlmConfig (configuration_glm.py): head_dim = 128, partial_rotary_factor 0.5:
// rotary_dim = 64 on 128-wide heads (2048 / 32 = 64 would be the derivation).
TEST_CASE("hf_config: glm without head_dim takes GlmConfig's 128 and rotates half of it") {
  const auto c = posenc_test::parse_hf_config(R"({"model_type": "glm", "hidden_size": 2048,
      "num_attention_heads": 32, "num_key_value_heads": 2, "rope_theta": 10000})");
  CHECK(c.rope.head_dim == 128);
  CHECK(c.attention_head_dim == 128);
  CHECK(posenc::resolved_rotary_dim(c.rope) == 64);
}

// M07. Qwen2VLTextConfig (configuration_qwen2_vl.py): default_theta = 1000000.0, also for a
// flat config saved with the wrapper's model_type "qwen2_vl" (transformers < 5 layout).
TEST_CASE("hf_config: a flat qwen2_vl config without rope_theta takes Qwen2-VL's default 1e6") {
  const auto c = posenc_test::parse_hf_config(R"({"model_type": "qwen2_vl", "hidden_size": 1536,
      "num_attention_heads": 12, "num_key_value_heads": 2,
      "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]}})");
  CHECK(c.rope.theta == 1e6);
  CHECK(c.rope.head_dim == 128);
}

// M13. GPT-J / CodeGen's rotary_dim may cover the whole head: GPTJAttention rotates
// key[..., :rotary_dim] (the full head when rotary_dim is None), so rotary_dim == head_dim is
// the same RoPE as no rotary_dim at all (invariant), and must be accepted.
TEST_CASE("hf_config: rotary_dim equal to head_dim is accepted and rotates the whole head") {
  const std::string base = R"({"model_type": "gptj", "n_embd": 256, "n_head": 4,
      "n_positions": 2048)";
  const auto full = posenc_test::parse_hf_config(base + R"(, "rotary_dim": 64})");
  const auto none = posenc_test::parse_hf_config(base + "}");
  CHECK(full.rope.head_dim == 64);
  CHECK(posenc::resolved_rotary_dim(full.rope) == 64);
  CHECK(posenc::resolved_rotary_dim(full.rope) == posenc::resolved_rotary_dim(none.rope));
}

// M14. CodeGen rotates pairs (2j, 2j+1): modeling_codegen.py apply_rotary_pos_emb uses
// rotate_every_two with repeat_interleave'd sin / cos (copied from GPT-J).
TEST_CASE("hf_config: codegen is an interleaved (rotate_every_two) family") {
  const auto c = posenc_test::parse_hf_config(R"({"model_type": "codegen", "n_embd": 1024,
      "n_head": 16, "rotary_dim": 32, "n_positions": 2048})");
  CHECK(c.rope.layout == RopeLayout::kInterleaved);
  CHECK(posenc::resolved_rotary_dim(c.rope) == 32);
  const auto arch = posenc_test::parse_hf_config(R"({"architectures": ["CodeGenForCausalLM"],
      "n_embd": 1024, "n_head": 16, "rotary_dim": 32})");
  CHECK(arch.rope.layout == RopeLayout::kInterleaved);
}

// M17. Architecture names match a family only when "For..." follows it: GLM-4.5's
// Glm4MoeForCausalLM starts with "glm" but Glm4MoeAttention rotates half-split
// (modeling_glm4_moe.py: rotate_half on cat((freqs, freqs))), unlike GLM / GLM-4.
TEST_CASE("hf_config: an architecture that only starts with an interleaved family's name "
          "stays half-split") {
  const auto moe = posenc_test::parse_hf_config(R"({"architectures": ["Glm4MoeForCausalLM"],
      "hidden_size": 4096, "num_attention_heads": 32, "head_dim": 128, "rope_theta": 1000000})");
  CHECK(moe.rope.layout == RopeLayout::kHalfSplit);
  const auto glm = posenc_test::parse_hf_config(R"({"architectures": ["GlmForCausalLM"],
      "hidden_size": 4096, "num_attention_heads": 32, "head_dim": 128, "rope_theta": 1000000})");
  CHECK(glm.rope.layout == RopeLayout::kInterleaved);
}

// M26. Gemma3TextConfig (configuration_gemma3.py): sliding_window defaults to 4096. Gemma-3
// 4B+ configs save text_config as a diff against the class defaults and omit it.
TEST_CASE("hf_config: gemma3_text without sliding_window takes Gemma3TextConfig's 4096") {
  const auto c = posenc_test::parse_hf_config(R"({"model_type": "gemma3",
      "text_config": {"model_type": "gemma3_text", "hidden_size": 2560,
                      "num_hidden_layers": 34, "rope_scaling": {"rope_type": "linear",
                      "factor": 8.0}}})");
  CHECK(c.sliding_window == 4096);
  // Contrast: an explicit null turns the window off, as for Mistral.
  const auto off = posenc_test::parse_hf_config(R"({"model_type": "gemma3_text", "hidden_size": 2560,
      "num_attention_heads": 8, "num_hidden_layers": 34, "sliding_window": null})");
  CHECK(off.sliding_window == 0);
}

// M31. Hunyuan's NTK-alpha base is theta * alpha^(d / (d - 2)) (vLLM
// DynamicNTKAlphaRotaryEmbedding); alpha = 1 gives theta itself (hand computation: 1^x = 1),
// plain RoPE, so it is a valid value, the lower end of the range.
TEST_CASE("hf_config: Hunyuan dynamic alpha = 1 is accepted as factor 1") {
  const auto c = posenc_test::parse_hf_config(R"({"model_type": "hunyuan_v1_dense",
      "hidden_size": 512, "num_attention_heads": 4, "rope_theta": 10000,
      "rope_scaling": {"type": "dynamic", "alpha": 1.0, "factor": 1.0}})");
  CHECK(c.rope.scaling.type == RopeScalingType::kNtk);
  CHECK(c.rope.scaling.factor == 1.0);
}

// M36. transformers _compute_yarn_parameters: beta_fast = rope_parameters.get("beta_fast") or 32
// and beta_slow = ... or 1, so a written 0 means the defaults, not an error.
TEST_CASE("hf_config: yarn beta_fast = 0 and beta_slow = 0 read as the defaults 32 and 1") {
  const auto c = posenc_test::parse_hf_config(R"({"model_type": "qwen2", "hidden_size": 512,
      "num_attention_heads": 4, "num_key_value_heads": 4, "max_position_embeddings": 131072,
      "rope_theta": 1000000, "rope_scaling": {"rope_type": "yarn", "factor": 4.0,
                       "original_max_position_embeddings": 32768,
                       "beta_fast": 0, "beta_slow": 0}})");
  CHECK(c.rope.scaling.type == RopeScalingType::kYarn);
  CHECK(c.rope.scaling.beta_fast == 32.0);
  CHECK(c.rope.scaling.beta_slow == 1.0);
}

// M42, M44, M56. Llama4VisionConfig (configuration_llama4.py): image_size = 448,
// patch_size = 14 by default, so a vision_config without them has 448 / 14 = 32 patches a
// side; no default_theta of its own, so RotaryEmbeddingConfigMixin's 10000 (rope_theta=10000
// in transformers 4.x).
TEST_CASE("hf_config: a Llama-4 vision_config without image_size or patch_size or rope_theta "
          "takes Llama4VisionConfig's defaults") {
  const auto c = posenc_test::parse_hf_config(R"({"model_type": "llama4",
      "text_config": {"model_type": "llama4_text", "hidden_size": 5120,
                      "num_attention_heads": 40, "num_key_value_heads": 8, "head_dim": 128,
                      "num_hidden_layers": 4, "rope_theta": 500000},
      "vision_config": {"hidden_size": 1408, "num_attention_heads": 16}})");
  REQUIRE(c.vision_rope);
  CHECK(c.vision_rope->llama4);
  CHECK(c.vision_rope->head_dim == 88);
  CHECK(c.vision_rope->grid_side == 32);
  CHECK(c.vision_rope->theta == 10000.0);
}

// M49. MptAttentionConfig (configuration_mpt.py): alibi_bias_max defaults to 8. MPT
// gen_slopes(8, 8) = 2^(-8 (h + 1) / 8) = 2^-(h + 1) (hand computation): 1/2 .. 1/256.
TEST_CASE("hf_config: MPT attn_config alibi without alibi_bias_max uses MPT's default 8") {
  const auto c = posenc_test::parse_hf_config(R"({"model_type": "mpt", "d_model": 512,
      "n_heads": 8, "max_seq_len": 2048, "attn_config": {"alibi": true}})");
  REQUIRE(c.scheme == HfPositionScheme::kAlibi);
  CHECK(c.alibi_max_bias == 8.0);
  REQUIRE(c.alibi_slopes.size() == 8);
  for (std::size_t h = 0; h < 8; ++h) {
    CAPTURE(h);
    CHECK_THAT(c.alibi_slopes[h], WithinRel(std::pow(2.0, -static_cast<double>(h + 1)), 1e-15));
  }
}

// M50. BioGptLearnedPositionalEmbedding (modeling_biogpt.py) keeps OPT's offset = 2: position p
// reads row p + 2 of embed_positions.
TEST_CASE("hf_config: biogpt reads learned positions with offset 2") {
  const auto c = posenc_test::parse_hf_config(R"({"model_type": "biogpt", "hidden_size": 1024,
      "num_attention_heads": 16, "num_hidden_layers": 24, "max_position_embeddings": 1024})");
  CHECK(c.scheme == HfPositionScheme::kAbsolute);
  CHECK(c.absolute_position_offset == 2);
}

// M53. Qwen2-VL's VisionRotaryEmbedding(head_dim / 2) gives head_dim / 4 frequencies to rows
// and as many to columns; cat((emb, emb)) is head_dim wide only when 4 divides head_dim (hand
// computation: 90-wide heads would get 2 * 2 * ceil(45 / 2) = 92 columns). Not read then.
TEST_CASE("hf_config: a Qwen2-VL vision tower whose heads are not a multiple of 4 is not read") {
  const std::string head = R"({"model_type": "qwen2_vl", "hidden_size": 1536,
      "num_attention_heads": 12, "num_key_value_heads": 2, "rope_theta": 1000000,
      "vision_config": {"num_heads": 16, "spatial_merge_size": 2, "embed_dim": )";
  const auto bad = posenc_test::parse_hf_config(head + "1440}}");  // 90-wide heads
  CHECK(!bad.vision_rope);
  const auto good = posenc_test::parse_hf_config(head + "1280}}");  // 80-wide heads
  REQUIRE(good.vision_rope);
  CHECK(good.vision_rope->head_dim == 80);
}

// A mutation audit found these defaults no test pinned, and both were wrong.
TEST_CASE("hf_config: vision towers without a key take their config class's default",
          "[hf_config][vision]") {
  // Qwen2VLVisionConfig.__init__(spatial_merge_size=2) (also Qwen2.5-VL, Qwen3-VL and
  // Glm4vVisionConfig): a vision_config saved as a diff merges 2 x 2 patches. posenc took 1.
  const auto qwen = posenc_test::parse_hf_config(R"({"model_type": "qwen2_vl", "hidden_size": 1536,
      "num_attention_heads": 12, "num_key_value_heads": 2, "rope_theta": 1000000,
      "vision_config": {"embed_dim": 1280, "num_heads": 16}})");
  REQUIRE(qwen.vision_rope);
  CHECK(qwen.vision_rope->head_dim == 80);
  CHECK(qwen.vision_rope->spatial_merge_size == 2);
  const auto glm = posenc_test::parse_hf_config(R"({"model_type": "glm4v", "hidden_size": 4096,
      "num_attention_heads": 32, "num_key_value_heads": 2,
      "vision_config": {"hidden_size": 1536, "num_heads": 12}})");
  REQUIRE(glm.vision_rope);
  CHECK(glm.vision_rope->head_dim == 128);
  CHECK(glm.vision_rope->spatial_merge_size == 2);
  // Llama4VisionConfig(hidden_size=768, num_attention_heads=16, ...): 48-wide heads. posenc
  // took 12 heads (64 wide).
  const auto llama4 = posenc_test::parse_hf_config(R"({"model_type": "llama4",
      "text_config": {"model_type": "llama4_text", "hidden_size": 5120,
                      "num_attention_heads": 40, "num_key_value_heads": 8, "head_dim": 128,
                      "num_hidden_layers": 4, "rope_theta": 500000},
      "vision_config": {"image_size": 336, "patch_size": 14}})");
  REQUIRE(llama4.vision_rope);
  CHECK(llama4.vision_rope->head_dim == 48);
  CHECK(llama4.vision_rope->grid_side == 24);
}

// Round-3 mutation audit of hf_config_from_json: cases no test pinned.
TEST_CASE("hf_config: zero or too small geometry and theta are refused naming the key",
          "[hf_config][errors]") {
  // Ranges the loader documents in its messages: heads and head_dim in [1, ..], L0 in
  // [1, 2^53], theta > 1, rotary_dim even.
  CHECK_THROWS_WITH(posenc_test::parse_hf_config(R"({"num_attention_heads": 0, "head_dim": 64,
      "rope_theta": 10000})"), Contains("\"num_attention_heads\" = 0 must be in [1,"));
  CHECK_THROWS_WITH(posenc_test::parse_hf_config(R"({"num_attention_heads": 32, "hidden_size": 4096,
      "head_dim": 0})"), Contains("\"head_dim\" = 0 must be in [1,"));
  CHECK_THROWS_WITH(posenc_test::parse_hf_config(R"({"num_attention_heads": 32, "hidden_size": 4096,
      "original_max_position_embeddings": 0})"),
      Contains("\"original_max_position_embeddings\" = 0 must be in [1, 2^53]"));
  CHECK_THROWS_WITH(posenc_test::parse_hf_config(R"({"num_attention_heads": 32, "hidden_size": 4096,
      "rope_theta": 1})"), Contains("\"rope_theta\" = 1 must be > 1"));
  CHECK_THROWS_WITH(posenc_test::parse_hf_config(R"({"num_attention_heads": 32, "hidden_size": 4096,
      "rotary_dim": 33})"), Contains("\"rotary_dim\" = 33 must be even"));
  // ERNIE-4.5-VL's mrope_section is [h, w, t]: four entries (HunYuan's XD-RoPE) do not apply.
  CHECK_THROWS_WITH(posenc_test::parse_hf_config(R"({"model_type": "ernie4_5_moe_vl",
      "num_attention_heads": 32, "hidden_size": 4096,
      "rope_scaling": {"mrope_section": [22, 22, 20, 0]}})"), Contains("it must have 3 (h, w, t)"));
}

TEST_CASE("hf_config: zero layers, positions, window and attn_scale are accepted",
          "[hf_config]") {
  // The lower bounds the loader documents: num_hidden_layers, max_position_embeddings and
  // sliding_window in [0, ..], Llama-4's attn_scale >= 0 (t = 1 at every position).
  const auto c = posenc_test::parse_hf_config(R"({"num_attention_heads": 32, "hidden_size": 4096,
      "num_hidden_layers": 0, "max_position_embeddings": 0, "sliding_window": 0})");
  CHECK(c.num_hidden_layers == 0);
  CHECK(c.max_position_embeddings == 0);
  CHECK(c.sliding_window == 0);
  const auto l4 = posenc_test::parse_hf_config(R"({"model_type": "llama4_text",
      "num_attention_heads": 40, "hidden_size": 5120, "num_key_value_heads": 8, "head_dim": 128,
      "num_hidden_layers": 4, "attn_scale": 0})");
  REQUIRE(l4.attention_temperature);
  CHECK(l4.attention_temperature->attn_scale == 0.0);
}

TEST_CASE("hf_config: head_dim without the key is hidden_size // num_attention_heads",
          "[hf_config]") {
  // LlamaAttention / Llama4TextAttention: getattr(config, "head_dim",
  // config.hidden_size // config.num_attention_heads): 200 // 3 = 66, not 67.
  const auto c = posenc_test::parse_hf_config(R"({"num_attention_heads": 3, "hidden_size": 200})");
  CHECK(c.attention_head_dim == 66);
  CHECK(c.rope.head_dim == 66);
}

TEST_CASE("hf_config: Falcon with alibi false rotates", "[hf_config][alibi]") {
  // FalconConfig: rotary = not alibi (falcon-7b's config.json writes "alibi": false).
  const auto c = posenc_test::parse_hf_config(R"({"model_type": "falcon", "hidden_size": 4544,
      "num_attention_heads": 71, "alibi": false})");
  CHECK(c.scheme == HfPositionScheme::kRope);
  CHECK(c.alibi_slopes.empty());
  CHECK(c.rope.head_dim == 64);
}

TEST_CASE("hf_config: RoBERTa's position_embedding_type absolute keeps the offset 2",
          "[hf_config][absolute]") {
  // transformers create_position_ids_from_input_ids: positions start at padding_idx + 1 = 2
  // (RoBERTa's pad_token_id 1); its config.json writes position_embedding_type "absolute".
  const auto c = posenc_test::parse_hf_config(R"({"model_type": "roberta", "hidden_size": 768,
      "num_attention_heads": 12, "pad_token_id": 1, "position_embedding_type": "absolute"})");
  CHECK(c.scheme == HfPositionScheme::kAbsolute);
  CHECK(c.absolute_position_offset == 2);
}

TEST_CASE("hf_config: ModernBERT's global_rope_theta sets the global layers' theta",
          "[hf_config][modernbert]") {
  // ModernBertConfig.global_rope_theta (default 160000): the global (full) layers' base.
  const auto c = posenc_test::parse_hf_config(R"({"model_type": "modernbert", "hidden_size": 768,
      "num_attention_heads": 12, "num_hidden_layers": 6, "global_rope_theta": 80000})");
  CHECK(c.rope.theta == 80000.0);
  bool found = false;
  for (const auto& lr : c.layer_ropes) {
    if (lr.layer_type == "full_attention") {
      found = true;
      CHECK(lr.params.theta == 80000.0);
    }
  }
  CHECK(found);
}

TEST_CASE("hf_config: Bamba overrides a given partial_rotary_factor with 0.5",
          "[hf_config][partial]") {
  // BambaConfig.__init__: kwargs["partial_rotary_factor"] = 0.5  # hardcode for BC.
  const auto c = posenc_test::parse_hf_config(R"({"model_type": "bamba", "hidden_size": 4096,
      "num_attention_heads": 32, "num_key_value_heads": 8, "partial_rotary_factor": 0.25})");
  CHECK(posenc::resolved_rotary_dim(c.rope) == 64);  // 128 * 0.5
}

TEST_CASE("hf_config: Llama-4 attn_temperature_tuning 0 turns the temperature off",
          "[hf_config][llama4]") {
  // Llama4TextAttention: "if self.attn_temperature_tuning and not self.use_rope" (0 is falsy).
  const auto c = posenc_test::parse_hf_config(R"({"model_type": "llama4_text",
      "num_attention_heads": 40, "hidden_size": 5120, "num_key_value_heads": 8, "head_dim": 128,
      "num_hidden_layers": 4, "attn_temperature_tuning": 0})");
  CHECK_FALSE(c.attention_temperature);
}

TEST_CASE("hf_config: a top-level rope_type default is plain RoPE", "[hf_config]") {
  const auto c = posenc_test::parse_hf_config(R"({"num_attention_heads": 32, "hidden_size": 4096,
      "rope_type": "default"})");
  CHECK(c.rope.scaling.type == RopeScalingType::kDefault);
  CHECK(c.rope.theta == 10000.0);
}

TEST_CASE("hf_config: rope is the full_attention entry and layer_ropes count the layers",
          "[hf_config][layer_types]") {
  // HfModelConfig::rope is "the main RoPE (full-attention layers, or every layer)", whatever
  // the dict's order; HfLayerRope::num_layers counts the layers of its type (0 = unknown).
  // ("chunked_attention" sorts before "full_attention" in the parsed JSON object.)
  const auto c = posenc_test::parse_hf_config(R"({"num_attention_heads": 32, "hidden_size": 4096,
      "num_hidden_layers": 4,
      "layer_types": ["chunked_attention", "full_attention", "chunked_attention", "full_attention"],
      "rope_parameters": {"chunked_attention": {"rope_type": "default", "rope_theta": 10000},
                          "full_attention": {"rope_type": "default", "rope_theta": 1000000}}})");
  REQUIRE(c.layer_ropes.size() == 2);
  CHECK(c.rope.theta == 1000000.0);
  const auto plain = posenc_test::parse_hf_config(R"({"num_attention_heads": 32, "hidden_size": 4096,
      "num_hidden_layers": 32})");
  REQUIRE(plain.layer_ropes.size() == 1);
  CHECK(plain.layer_ropes[0].num_layers == 32);
}

TEST_CASE("hf_config: more refusals name their key", "[hf_config][errors]") {
  CHECK_THROWS_WITH(posenc_test::parse_hf_config(R"({"num_attention_heads": 32, "hidden_size": 4096,
      "attn_logit_softcapping": 0})"), Contains("\"attn_logit_softcapping\" = 0 must be finite"));
  // ChatGLM: theta = 10000 * rope_ratio must be > 1 (here 0.5).
  CHECK_THROWS_WITH(posenc_test::parse_hf_config(R"({"model_type": "chatglm",
      "num_attention_heads": 32, "hidden_size": 4096, "rope_ratio": 0.00005})"),
      Contains("\"rope_ratio\" = 5.0000000000000002e-05 must make theta"));
  CHECK_THROWS_WITH(posenc_test::parse_hf_config(R"({"model_type": "gemma3_text",
      "num_attention_heads": 8, "hidden_size": 2304, "num_hidden_layers": 6,
      "rope_local_base_freq": 1})"), Contains("\"rope_local_base_freq\" = 1 must be > 1"));
  CHECK_THROWS_AS(posenc_test::parse_hf_config(R"({"num_attention_heads": 32, "hidden_size": 4096,
      "architectures": "LlamaForCausalLM"})"), std::invalid_argument);
  CHECK_THROWS_WITH(posenc_test::parse_hf_config(R"({"model_type": "dbrx",
      "num_attention_heads": 48, "hidden_size": 6144,
      "attn_config": {"kv_n_heads": 0, "rope_theta": 500000}})"),
      Contains("\"attn_config.kv_n_heads\" = 0 must be in [1,"));
  // JetMoE's query heads are kv heads (16) times num_experts_per_tok: 16 * 2^20 is too many.
  CHECK_THROWS_WITH(posenc_test::parse_hf_config(R"({"model_type": "jetmoe", "hidden_size": 2048,
      "num_key_value_heads": 16, "kv_channels": 128, "num_experts_per_tok": 1048576})"),
      Contains("\"num_experts_per_tok\" = 1048576 must be in [1,"));
}

TEST_CASE("hf_config: lower bounds of zero are accepted where the loader documents them",
          "[hf_config]") {
  // MLA with qk_nope_head_dim 0 (range [0, ..]): the q.k width is the rope head alone.
  const auto mla = posenc_test::parse_hf_config(R"({"model_type": "deepseek_v3",
      "num_attention_heads": 16, "hidden_size": 2048, "qk_rope_head_dim": 64,
      "qk_nope_head_dim": 0, "kv_lora_rank": 512, "v_head_dim": 128})");
  CHECK(mla.qk_nope_head_dim == 0);
  CHECK(mla.attention_head_dim == 64);
  // attn_temperature_len "-1 or absent: none"; the message says "(or <= 0: none)".
  const auto grok = posenc_test::parse_hf_config(R"({"num_attention_heads": 32, "hidden_size": 4096,
      "attn_temperature_len": 0})");
  CHECK_FALSE(grok.attention_temperature);
  // max_window_layers 0 (Qwen2: every layer from 0 on slides), attention_chunk_size 0.
  const auto qwen = posenc_test::parse_hf_config(R"({"model_type": "qwen2",
      "num_attention_heads": 32, "hidden_size": 4096, "sliding_window": 4096,
      "use_sliding_window": true, "max_window_layers": 0, "attention_chunk_size": 0})");
  CHECK(qwen.max_window_layers == 0);
  CHECK(qwen.attention_chunk_size == 0);
  // ERNIE-4.5-VL freq_allocation in [0, rotary_dim / 2]: 64 t pairs of a 128-wide head.
  const auto ernie = posenc_test::parse_hf_config(R"({"model_type": "ernie4_5_moe_vl",
      "num_attention_heads": 32, "hidden_size": 4096, "freq_allocation": 64})");
  REQUIRE(ernie.mrope);
  CHECK(ernie.mrope->section[0] == 64);
  CHECK(ernie.mrope->section[1] == 0);
  CHECK(ernie.mrope->section[2] == 0);
}

TEST_CASE("hf_config: top-level L0, architectures, sinusoidal and a wrapper's model_type",
          "[hf_config]") {
  // L0 = the top-level original_max_position_embeddings (the loader's documented order).
  const auto l0 = posenc_test::parse_hf_config(R"({"num_attention_heads": 32, "hidden_size": 4096,
      "original_max_position_embeddings": 4096})");
  CHECK(l0.original_max_position_embeddings == 4096);
  const auto arch = posenc_test::parse_hf_config(R"({"num_attention_heads": 32, "hidden_size": 4096,
      "architectures": ["LlamaForCausalLM", "LlamaModel"]})");
  REQUIRE(arch.architectures.size() == 2);
  CHECK(arch.architectures[1] == "LlamaModel");
  // position_embedding_type absolute / learned / sinusoidal: absolute positions.
  const auto sin = posenc_test::parse_hf_config(R"({"hidden_size": 768, "num_attention_heads": 12,
      "position_embedding_type": "sinusoidal"})");
  CHECK(sin.scheme == HfPositionScheme::kAbsolute);
  // A text_config without its own model_type takes the outer one when no wrapper class says
  // otherwise.
  const auto wrap = posenc_test::parse_hf_config(R"({"model_type": "llama",
      "text_config": {"num_attention_heads": 40, "hidden_size": 5120, "num_key_value_heads": 8,
                      "head_dim": 128, "num_hidden_layers": 4, "rope_theta": 500000}})");
  CHECK(wrap.model_type == "llama");
}

TEST_CASE("hf_config: a wrapper's text_config without model_type is its language model class",
          "[hf_config][defaults]") {
  // Llama4Config builds Llama4TextConfig(**text_config): rope_theta 500000, head_dim 128,
  // Meta's interleaved pairs, every 4th layer NoPE.
  const auto l4 = posenc_test::parse_hf_config(R"({"model_type": "llama4",
      "text_config": {"num_attention_heads": 40, "hidden_size": 5120, "num_key_value_heads": 8,
                      "num_hidden_layers": 4}})");
  CHECK(l4.model_type == "llama4_text");
  CHECK(l4.rope.theta == 500000.0);
  CHECK(l4.rope.head_dim == 128);
  CHECK(l4.rope.layout == posenc::RopeLayout::kInterleaved);
  CHECK(has_note(l4, "text_config.model_type absent: llama4's language model, llama4_text"));
  // Gemma3Config builds Gemma3TextConfig: sliding layers on base 10000, every 6th global on
  // rope_theta 1e6 (the class defaults), a 256-wide head scaled by 256^-1/2.
  const auto g3 = posenc_test::parse_hf_config(R"({"model_type": "gemma3",
      "text_config": {"hidden_size": 2560, "num_attention_heads": 8, "num_key_value_heads": 4,
                      "num_hidden_layers": 6}})");
  CHECK(g3.model_type == "gemma3_text");
  CHECK(g3.rope.head_dim == 256);
  CHECK(g3.rope.theta == 1e6);
  CHECK(g3.layer_types == std::vector<std::string>{"sliding_attention", "sliding_attention",
                                                   "sliding_attention", "sliding_attention",
                                                   "sliding_attention", "full_attention"});
  // Mistral3Config / LlavaConfig default the dict's model_type to "mistral" / "llama": Mistral's
  // 8 kv heads and 4096 window, Llama's 32 heads.
  const auto m3 = posenc_test::parse_hf_config(R"({"model_type": "mistral3",
      "text_config": {"hidden_size": 5120, "num_attention_heads": 32, "head_dim": 128}})");
  CHECK(m3.model_type == "mistral");
  CHECK(m3.num_key_value_heads == 8);
  CHECK(m3.sliding_window == 4096);
  const auto llava = posenc_test::parse_hf_config(R"({"model_type": "llava",
      "text_config": {"vocab_size": 32064}})");
  CHECK(llava.model_type == "llama");
  CHECK(llava.num_attention_heads == 32);
}

TEST_CASE("hf_config: an absolute family that names a rotary key rotates",
          "[hf_config][absolute]") {
  // The documented rule: families that never wrote position_embedding_type are absolute
  // "unless the config names a rotary key" (rope_theta, rope_scaling, rope_parameters,
  // rotary_dim, partial_rotary_factor).
  for (const char* key : {R"("rope_scaling": {"rope_type": "linear", "factor": 2.0})",
                          R"("rotary_dim": 32)", R"("partial_rotary_factor": 0.5)"}) {
    INFO(key);
    const auto c = posenc_test::parse_hf_config(std::string(R"({"model_type": "gpt2",
        "n_embd": 768, "n_head": 12, )") + key + "}");
    CHECK(c.scheme == HfPositionScheme::kRope);
  }
}

TEST_CASE("hf_config: Gemma-3 has no attention logit softcap by default", "[hf_config][gemma]") {
  // Gemma3TextConfig(attn_logit_softcapping=None), unlike Gemma2Config's 50.
  const auto c = posenc_test::parse_hf_config(R"({"model_type": "gemma3_text", "hidden_size": 2304,
      "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256,
      "num_hidden_layers": 6})");
  CHECK(c.attn_logit_softcapping == 0.0);
}

TEST_CASE("hf_config: ERNIE-4.5-VL is recognised by its architecture", "[hf_config][mrope]") {
  // No model_type: the architecture names the family; no mrope_section, so transformers'
  // default [h, w, t] = [22, 22, 20] pairs, h / w alternating.
  const auto c = posenc_test::parse_hf_config(R"({"num_attention_heads": 32, "hidden_size": 4096,
      "architectures": ["Ernie4_5_VLMoeForConditionalGeneration"]})");
  REQUIRE(c.mrope);
  CHECK(c.mrope->layout == posenc::MRopeSectionLayout::kAlternatingHw);
  CHECK(c.mrope->section[0] + c.mrope->section[1] + c.mrope->section[2] == 64);
}

TEST_CASE("hf_config: given layer_types stay as given, and their entries must be strings",
          "[hf_config][layer_types]") {
  const auto c = posenc_test::parse_hf_config(R"({"model_type": "llama4_text",
      "num_attention_heads": 40, "hidden_size": 5120, "num_key_value_heads": 8, "head_dim": 128,
      "num_hidden_layers": 4, "rope_theta": 500000,
      "layer_types": ["chunked_attention", "chunked_attention", "chunked_attention",
                      "full_attention"]})");
  CHECK(c.layer_types.size() == 4);
  CHECK_THROWS_AS(posenc_test::parse_hf_config(R"({"num_attention_heads": 32, "hidden_size": 4096,
      "num_hidden_layers": 2, "layer_types": [1, 2]})"), std::invalid_argument);
}

TEST_CASE("hf_config: DCA local_size 0 is accepted and MPT alibi_bias_max 0 is not",
          "[hf_config]") {
  // local_size in [0, chunk_size); alibi_bias_max > 0 (slopes 2^(-8 i / n) at the default 8).
  const auto c = posenc_test::parse_hf_config(R"({"num_attention_heads": 32, "hidden_size": 4096,
      "dual_chunk_attention_config": {"chunk_size": 262144, "local_size": 0,
                                      "original_max_position_embeddings": 262144}})");
  REQUIRE(c.dual_chunk);
  CHECK(c.dual_chunk->local_size == 0);
  CHECK_THROWS_WITH(posenc_test::parse_hf_config(R"({"model_type": "mpt", "d_model": 4096,
      "n_heads": 32, "attn_config": {"alibi": true, "alibi_bias_max": 0}})"),
      Contains("\"attn_config.alibi_bias_max\" = 0 must be > 0"));
}

// Round-3 mutation audit of the loader's detail:: helpers (HfConfigReader, the RoPE dict
// reader, the family tables, the vision and layer-type readers): each case below pins a change
// no earlier test noticed. Expected values come from the transformers classes named in each
// comment, or from the loader's documented contract.

// HfConfigReader::integer: "a float is accepted when it is integral" (some exporters write
// 4096.0), up to 2^53, the largest range where every integer is a double;
// max_position_embeddings' own range is [0, 2^53].
TEST_CASE("hf_config: integral floats up to 2^53 read as integers, fractional ones are refused",
          "[hf_config][reader]") {
  const std::string head = R"({"model_type": "llama", "num_attention_heads": 4,
      "num_key_value_heads": 4, )";
  const auto c = posenc_test::parse_hf_config(
      head + R"("hidden_size": 256.0, "max_position_embeddings": 9007199254740992.0})");
  CHECK(c.rope.head_dim == 64);
  CHECK(c.max_position_embeddings == (std::int64_t{1} << 53));
  REQUIRE_THROWS_WITH(posenc_test::parse_hf_config(head + R"("hidden_size": 256.5})", "f.json"),
                      Contains("f.json: key \"hidden_size\" = 256.5 must be an integer"));
}

// parse_hf_config refuses JSON nested deeper than 64 levels (kHfMaxDepth); 64 itself is read.
TEST_CASE("hf_config: JSON nested exactly 64 levels deep is read, 65 levels are refused",
          "[hf_config][reader]") {
  const auto nested = [](std::size_t depth) {  // the root object is level 1
    return std::string(R"({"model_type": "llama", "hidden_size": 256, "num_attention_heads": 4,
        "unread": )") + std::string(depth - 1, '[') + std::string(depth - 1, ']') + "}";
  };
  CHECK(posenc_test::parse_hf_config(nested(64)).rope.head_dim == 64);
  REQUIRE_THROWS_WITH(posenc_test::parse_hf_config(nested(65), "d.json"),
                      Contains("d.json: JSON nested deeper than 64 levels"));
}

// The loader's contract: errors name the file and the key. A bad value inside the RoPE dict is
// named by its own key, not only as "rope_scaling describes RoPE parameters posenc rejects"
// (the planner's re-check, which would still refuse these).
TEST_CASE("hf_config: a bad value inside rope_scaling is named by its own key",
          "[hf_config][errors]") {
  const std::string head = R"({"model_type": "llama", "hidden_size": 256, "num_attention_heads": 4,
      "max_position_embeddings": 8192, "rope_scaling": )";
  std::string ones = "[1.0", zero_first = "[0.0";
  for (int i = 1; i < 32; ++i) {
    ones += ", 1.0";
    zero_first += ", 1.0";
  }
  ones += "]";
  zero_first += "]";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"rope_type": "default", "rope_theta": 1.0})",
       "key \"rope_scaling.rope_theta\" = 1 must be > 1"},
      {R"({"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 0})",
       "key \"rope_scaling.original_max_position_embeddings\" = 0 must be > 0"},
      {R"({"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 0.0,
           "high_freq_factor": 4.0, "original_max_position_embeddings": 1024})",
       "key \"rope_scaling.low_freq_factor\" = 0 must be > 0"},
      {R"({"rope_type": "yarn", "factor": 4.0, "attention_factor": 0.0,
           "original_max_position_embeddings": 2048})",
       "key \"rope_scaling.attention_factor\" = 0 must be > 0"},
      {R"({"rope_type": "longrope", "factor": 4.0, "original_max_position_embeddings": 2048,
           "short_factor": )" + zero_first + R"(, "long_factor": )" + ones + "}",
       "key \"rope_scaling.short_factor\" [0] = 0 must be > 0"},
      {R"({"rope_type": "longrope", "factor": 4.0, "original_max_position_embeddings": 2048,
           "short_factor": )" + ones.substr(0, ones.size() - 1) + R"(, 1.0], "long_factor": )" +
           ones + "}",
       "key \"rope_scaling.short_factor\" has 33 entries; it must have rotary_dim / 2 = 32"},
      {R"({"rope_type": "longrope", "factor": 4.0, "original_max_position_embeddings": 2048,
           "short_factor": )" + ones + R"(, "long_factor": )" + ones.substr(0, ones.size() - 1) +
           ", 1.0]}",
       "key \"rope_scaling.long_factor\" has 33 entries; it must have rotary_dim / 2 = 32"},
  };
  for (const auto& [dict, message] : cases) {
    CAPTURE(dict);
    REQUIRE_THROWS_WITH(posenc_test::parse_hf_config(head + dict + "}", "k.json"),
                        Contains("k.json: " + message));
  }
}

// transformers' rope_config_validation / standardize_rope_params read
// rope_scaling.get("rope_type", rope_scaling.get("type")): the new key wins over the legacy one.
TEST_CASE("hf_config: rope_type wins over a legacy type key in the same dict",
          "[hf_config][legacy]") {
  const auto c = posenc_test::parse_hf_config(R"({"model_type": "llama", "hidden_size": 256,
      "num_attention_heads": 4, "max_position_embeddings": 8192,
      "rope_scaling": {"rope_type": "linear", "type": "dynamic", "factor": 2.0}})");
  CHECK(c.rope.scaling.type == RopeScalingType::kLinear);
  CHECK(c.rope.scaling.factor == 2.0);
}

// _validate_linear_scaling_rope_parameters warns only for factor < 1: 1 is a valid factor.
TEST_CASE("hf_config: a scaling factor of exactly 1 is accepted", "[hf_config]") {
  const auto c = posenc_test::parse_hf_config(R"({"model_type": "llama", "hidden_size": 256,
      "num_attention_heads": 4, "rope_scaling": {"rope_type": "linear", "factor": 1.0}})");
  CHECK(c.rope.scaling.type == RopeScalingType::kLinear);
  CHECK(c.rope.scaling.factor == 1.0);
}

// transformers' _compute_longrope_parameters: attention_factor = the dict's attention_factor;
// else, with a top-level original_max_position_embeddings, factor = max / original (the dict's
// factor is not used) and attention_factor = sqrt(1 + ln factor / ln original); without it,
// from the dict's factor, and 1 only when factor <= 1.
TEST_CASE("hf_config: longrope's attention factor - explicit, from max / original, from factor",
          "[hf_config][longrope]") {
  std::string ones = "[1.0";
  for (int i = 1; i < 32; ++i) ones += ", 1.0";
  ones += "]";
  const std::string lists = R"("short_factor": )" + ones + R"(, "long_factor": )" + ones;
  const std::string head = R"({"model_type": "phi3", "hidden_size": 256,
      "num_attention_heads": 4, "num_key_value_heads": 4, )";
  // Top-level original 4096, max 131072: factor 32, whatever the dict's factor 2 says.
  const auto top = posenc_test::parse_hf_config(head + R"("max_position_embeddings": 131072,
      "original_max_position_embeddings": 4096,
      "rope_scaling": {"rope_type": "longrope", "factor": 2.0, )" + lists + "}}");
  const long double top_expected = std::sqrt(1.0L + std::log(32.0L) / std::log(4096.0L));
  CHECK_THAT(posenc::compute_rope_frequencies(top.rope, 8192).attention_factor,
             WithinRel(static_cast<double>(top_expected), 1e-12));
  // No top-level original, factor 1.5 in (1, 2): sqrt(1 + ln 1.5 / ln 4096), not 1.
  const auto small = posenc_test::parse_hf_config(head + R"("max_position_embeddings": 6144,
      "rope_scaling": {"rope_type": "longrope", "factor": 1.5,
                       "original_max_position_embeddings": 4096, )" + lists + "}}");
  const long double small_expected = std::sqrt(1.0L + std::log(1.5L) / std::log(4096.0L));
  CHECK_THAT(posenc::compute_rope_frequencies(small.rope, 6144).attention_factor,
             WithinRel(static_cast<double>(small_expected), 1e-12));
  // An explicit attention_factor is used as given.
  const auto given = posenc_test::parse_hf_config(head + R"("max_position_embeddings": 131072,
      "original_max_position_embeddings": 4096,
      "rope_scaling": {"rope_type": "longrope", "attention_factor": 1.5, )" + lists + "}}");
  CHECK(posenc::compute_rope_frequencies(given.rope, 8192).attention_factor == 1.5);
}

// PhimoeRotaryEmbedding reads short_mscale and long_mscale by name, one per table.
TEST_CASE("hf_config: short_mscale and long_mscale are read into their own fields",
          "[hf_config][longrope]") {
  const auto c = posenc_test::parse_hf_config(R"({"hidden_size": 64, "num_attention_heads": 8,
      "max_position_embeddings": 131072, "original_max_position_embeddings": 4096,
      "rope_scaling": {"type": "longrope", "short_mscale": 1.125, "long_mscale": 1.375,
                       "short_factor": [1, 1, 1, 1], "long_factor": [1, 2, 4, 8]}})");
  CHECK(c.rope.scaling.short_mscale == 1.125);
  CHECK(c.rope.scaling.long_mscale == 1.375);
}

// Llama4VisionConfig: the grid is image_size // patch_size patches a side; a patch as large
// as the image is one patch (plus the class token), not a refusal.
TEST_CASE("hf_config: a Llama-4 vision patch as large as the image gives a 1 x 1 grid",
          "[hf_config][vision]") {
  const auto c = posenc_test::parse_hf_config(R"({"model_type": "llama4",
      "text_config": {"model_type": "llama4_text", "hidden_size": 5120,
                      "num_attention_heads": 40, "num_key_value_heads": 8, "head_dim": 128,
                      "num_hidden_layers": 4, "rope_theta": 500000},
      "vision_config": {"image_size": 14, "patch_size": 14}})");
  REQUIRE(c.vision_rope);
  CHECK(c.vision_rope->grid_side == 1);
}

// Qwen3VLMoeVisionConfig / Glm4vMoeVisionConfig: hidden_size over num_heads, spatial merge 2;
// the towers rotate with VisionRotaryEmbedding(head_dim / 2), theta 10000 (its default).
TEST_CASE("hf_config: the MoE Qwen3-VL and GLM-4V towers' 2-D RoPE is read, theta 10000",
          "[hf_config][vision]") {
  const auto qwen = posenc_test::parse_hf_config(R"({"model_type": "qwen3_vl_moe",
      "text_config": {"model_type": "qwen3_vl_moe_text", "hidden_size": 2048,
                      "num_attention_heads": 32, "num_key_value_heads": 4, "head_dim": 128,
                      "rope_theta": 5000000},
      "vision_config": {"hidden_size": 1152, "num_heads": 16, "spatial_merge_size": 2}})");
  REQUIRE(qwen.vision_rope);
  CHECK(qwen.vision_rope->head_dim == 72);
  CHECK(qwen.vision_rope->spatial_merge_size == 2);
  CHECK(qwen.vision_rope->theta == 10000.0);
  const auto glm = posenc_test::parse_hf_config(R"({"model_type": "glm4v_moe",
      "text_config": {"model_type": "glm4v_moe_text", "hidden_size": 4096,
                      "num_attention_heads": 96, "num_key_value_heads": 8, "head_dim": 128,
                      "rope_theta": 10000},
      "vision_config": {"hidden_size": 1536, "num_heads": 12}})");
  REQUIRE(glm.vision_rope);
  CHECK(glm.vision_rope->head_dim == 128);
  CHECK(glm.vision_rope->theta == 10000.0);
}

// head_dim field defaults of HeliumConfig, Qwen3Config, SeedOssConfig and Llama4TextConfig
// (all 128): a config without head_dim whose hidden_size / heads is 64 keeps 128.
TEST_CASE("hf_config: helium, qwen3, seed_oss and llama4_text default head_dim to 128",
          "[hf_config][defaults]") {
  for (const char* type : {"helium", "qwen3", "seed_oss", "llama4_text"}) {
    CAPTURE(type);
    const auto c = posenc_test::parse_hf_config(std::string(R"({"model_type": ")") + type +
                                           R"(", "hidden_size": 2048, "num_attention_heads": 32,
        "num_key_value_heads": 8, "num_hidden_layers": 4, "rope_theta": 10000})");
    CHECK(c.rope.head_dim == 128);
  }
}

// Qwen3MoeConfig: use_sliding_window = False, so sliding_window is dropped (as Qwen2 / Qwen3).
// GemmaConfig: num_key_value_heads = 16, whatever num_attention_heads says.
TEST_CASE("hf_config: qwen3_moe ignores sliding_window by default, gemma has 16 kv heads",
          "[hf_config][defaults]") {
  const auto moe = posenc_test::parse_hf_config(R"({"model_type": "qwen3_moe", "hidden_size": 2048,
      "num_attention_heads": 32, "num_key_value_heads": 4, "head_dim": 128,
      "sliding_window": 4096})");
  CHECK(moe.sliding_window == 0);
  const auto gemma = posenc_test::parse_hf_config(R"({"model_type": "gemma",
      "num_attention_heads": 32})");
  CHECK(gemma.num_key_value_heads == 16);
}

// Qwen3MoeConfig num_key_value_heads: int = 4; Qwen2MoeConfig num_key_value_heads = 16: a config
// without the key has those, not num_attention_heads (a dividing count is kept as it is).
TEST_CASE("hf_config: qwen3_moe and qwen2_moe without num_key_value_heads take 4 and 16",
          "[hf_config][defaults]") {
  const auto q3 = posenc_test::parse_hf_config(R"({"model_type": "qwen3_moe", "hidden_size": 2048,
      "num_attention_heads": 32, "head_dim": 128})");
  CHECK(q3.num_key_value_heads == 4);
  CHECK(has_note(q3, "num_key_value_heads absent: qwen3_moe's default 4"));
  const auto q2 = posenc_test::parse_hf_config(R"({"model_type": "qwen2_moe", "hidden_size": 4096,
      "num_attention_heads": 32})");
  CHECK(q2.num_key_value_heads == 16);
  // 28 heads cannot share 16 kv heads (repeat_kv fails in transformers): refused by name.
  CHECK_THROWS_WITH(posenc_test::parse_hf_config(R"({"model_type": "qwen2_moe", "hidden_size": 3584,
      "num_attention_heads": 28})"), Contains("num_key_value_heads"));
}

// Qwen3_5MoeTextConfig: head_dim: int = 256, kwargs.setdefault("partial_rotary_factor", 0.25):
// 2048 / 16 heads would be 128 wide, all rotated.
TEST_CASE("hf_config: qwen3_5_moe_text without head_dim is 256 wide, a quarter rotated",
          "[hf_config][defaults]") {
  for (const char* type : {"qwen3_5_moe", "qwen3_5_moe_text"}) {
    CAPTURE(type);
    const auto c = posenc_test::parse_hf_config(std::string(R"({"model_type": ")") + type +
                                           R"(", "hidden_size": 2048, "num_attention_heads": 16,
        "num_key_value_heads": 2, "num_hidden_layers": 4, "rope_theta": 10000000})");
    CHECK(c.rope.head_dim == 256);
    CHECK(posenc::resolved_rotary_dim(c.rope) == 64);
  }
}

// A hub list of 0 / 1 per layer must have exactly one entry per layer: a longer one is refused
// as a shorter one is.
TEST_CASE("hf_config: an attn_type_list longer than num_hidden_layers is refused",
          "[hf_config][layers]") {
  REQUIRE_THROWS_WITH(posenc_test::parse_hf_config(R"({"model_type": "minimax", "hidden_size": 6144,
      "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 128, "rotary_dim": 64,
      "rope_theta": 10000000, "num_hidden_layers": 4, "attn_type_list": [0, 1, 0, 1, 1]})",
                                              "l.json"),
                      Contains("l.json: key \"attn_type_list\" has 5 entries; one per layer "
                               "(num_hidden_layers = 4) expected"));
}

// GPTBigCodeConfig has no scale_attn_by_inverse_layer_idx (GPT-2's key): every layer keeps
// head_dim^-1/2 = 1/8.
TEST_CASE("hf_config: gpt_bigcode does not divide by the layer index", "[hf_config]") {
  const auto c = posenc_test::parse_hf_config(R"({"model_type": "gpt_bigcode", "n_embd": 768,
      "n_head": 12, "n_positions": 1024, "scale_attn_by_inverse_layer_idx": true})");
  CHECK(posenc::hf_attention_params(c, 3).scale == 0.125);
}

// transformers' modeling code: M2M100 / XGLM sinusoids (offset 2), MBartLearnedPositionalEmbedding
// (offset 2), CamemBERT = RoBERTa's embeddings (padding_idx + 1 = 2), BlenderbotLearned-
// PositionalEmbedding (no offset).
TEST_CASE("hf_config: more absolute-position families and their row offsets",
          "[hf_config][absolute]") {
  const std::vector<std::tuple<std::string, std::int64_t, std::string>> families = {
      {R"({"model_type": "m2m_100", "d_model": 1024, "encoder_attention_heads": 16})", 2,
       "sinusoidal"},
      {R"({"model_type": "xglm", "d_model": 1024, "attention_heads": 16})", 2, "sinusoidal"},
      {R"({"model_type": "mbart", "d_model": 1024, "encoder_attention_heads": 16})", 2,
       "learned"},
      {R"({"model_type": "camembert", "hidden_size": 768, "num_attention_heads": 12})", 2,
       "learned"},
      {R"({"model_type": "blenderbot", "d_model": 2560, "encoder_attention_heads": 32})", 0,
       "learned"},
      // Speech2TextSinusoidalPositionalEmbedding (offset 2; positions cumsum + padding_idx) and
      // FSMT's make_positions ("Position numbers begin at padding_idx+1"), pad id 1.
      {R"({"model_type": "speech_to_text", "d_model": 256, "encoder_attention_heads": 4})", 2,
       "sinusoidal"},
      {R"({"model_type": "fsmt", "d_model": 1024, "encoder_attention_heads": 16})", 2,
       "sinusoidal"},
  };
  for (const auto& [json, offset, kind] : families) {
    CAPTURE(json);
    const auto f = posenc_test::parse_hf_config(json);
    CHECK(f.scheme == HfPositionScheme::kAbsolute);
    CHECK(f.absolute_position_offset == offset);
    CHECK(has_note(f, kind + " absolute positions"));
  }
}

// Qwen3_5TextConfig: head_dim = 256 (the M03 case above has 4096 / 16 = 256 anyway).
// Glm4Config: head_dim = 128. Each against a hidden_size / heads of 128 or 64.
TEST_CASE("hf_config: qwen3_5 and glm4 without head_dim take their config classes' widths",
          "[hf_config][defaults]") {
  for (const char* type : {"qwen3_5", "qwen3_5_text"}) {
    CAPTURE(type);
    const auto qwen = posenc_test::parse_hf_config(std::string(R"({"model_type": ")") + type +
                                              R"(", "hidden_size": 2048,
        "num_attention_heads": 16, "num_key_value_heads": 2, "rope_theta": 10000000})");
    CHECK(qwen.rope.head_dim == 256);
    CHECK(posenc::resolved_rotary_dim(qwen.rope) == 64);  // partial_rotary_factor 0.25
  }
  const auto glm4 = posenc_test::parse_hf_config(R"({"model_type": "glm4", "hidden_size": 2048,
      "num_attention_heads": 32, "num_key_value_heads": 2, "rope_theta": 10000})");
  CHECK(glm4.rope.head_dim == 128);
  CHECK(posenc::resolved_rotary_dim(glm4.rope) == 64);  // partial_rotary_factor 0.5
}

// Qwen2MoeConfig.__post_init__: sliding_window = sliding_window if use_sliding_window else 0,
// use_sliding_window defaulting to False.
TEST_CASE("hf_config: qwen2_moe ignores sliding_window unless use_sliding_window",
          "[hf_config][defaults]") {
  const auto c = posenc_test::parse_hf_config(R"({"model_type": "qwen2_moe", "hidden_size": 2048,
      "num_attention_heads": 16, "num_key_value_heads": 16, "sliding_window": 4096})");
  CHECK(c.sliding_window == 0);
}

// transformers' yarn / llama3 / longrope read original_max_position_embeddings or, absent,
// max_position_embeddings (standardize_rope_params; 4.x: `... or config.max_position_embeddings`).
TEST_CASE("hf_config: yarn without any original length takes max_position_embeddings as L0",
          "[hf_config][yarn]") {
  const auto c = posenc_test::parse_hf_config(R"({"model_type": "llama", "hidden_size": 256,
      "num_attention_heads": 4, "max_position_embeddings": 32768,
      "rope_scaling": {"rope_type": "yarn", "factor": 4.0}})");
  CHECK(c.rope.scaling.original_max_position_embeddings == 32768);
}

// Vision towers: spatial_merge_size must be in [1, 2^30], as num_heads and the width.
TEST_CASE("hf_config: a vision spatial_merge_size of 0 is refused by name", "[hf_config][vision]") {
  REQUIRE_THROWS_WITH(posenc_test::parse_hf_config(R"({"model_type": "qwen2_vl", "hidden_size": 1536,
      "num_attention_heads": 12, "num_key_value_heads": 2, "rope_theta": 1000000,
      "vision_config": {"embed_dim": 1280, "num_heads": 16, "spatial_merge_size": 0}})", "v.json"),
                      Contains("v.json: key \"vision_config.spatial_merge_size\" = 0 "
                               "must be in [1, "));
}

// MiMo-V2: posenc plans one value width per model, so a sliding value width that differs is
// refused (as swa_head_dim is); OpenELM's two per-layer lists must have the same length, and
// without any layer count the lists give it.
TEST_CASE("hf_config: per-layer head widths and counts that disagree are refused",
          "[hf_config][layers][heads]") {
  REQUIRE_THROWS_WITH(posenc_test::parse_hf_config(R"({"model_type": "mimo_v2", "hidden_size": 4096,
      "num_attention_heads": 64, "num_key_value_heads": 4, "head_dim": 192, "v_head_dim": 128,
      "swa_head_dim": 192, "swa_v_head_dim": 64, "rope_theta": 5000000,
      "num_hidden_layers": 2, "hybrid_layer_pattern": [0, 1]})", "m.json"),
                      Contains("m.json: key \"swa_v_head_dim\" = 64 differs from "
                               "v_head_dim = 128"));
  REQUIRE_THROWS_WITH(posenc_test::parse_hf_config(R"({"model_type": "openelm", "head_dim": 64,
      "model_dim": 1280, "num_query_heads": [12, 12], "num_kv_heads": [3]})", "o.json"),
                      Contains("o.json: key \"num_kv_heads\" has a different length than "
                               "num_query_heads"));
  const auto e = posenc_test::parse_hf_config(R"({"model_type": "openelm", "head_dim": 64,
      "model_dim": 1280, "num_query_heads": [12, 16, 20], "num_kv_heads": [3, 4, 5]})");
  CHECK(e.num_hidden_layers == 3);
  CHECK(e.layer_num_attention_heads.size() == 3);
}

// OlmoHybridConfig: full_attention where i % 4 == 3, and the last layer only when no layer is
// full otherwise; 6 layers: layer 3 full, the others linear.
TEST_CASE("hf_config: OLMo-Hybrid's default layer types for 6 layers", "[hf_config][layers]") {
  const auto c = posenc_test::parse_hf_config(R"({"model_type": "olmo_hybrid", "hidden_size": 3840,
      "num_attention_heads": 30, "num_hidden_layers": 6})");
  CHECK(c.layer_types == std::vector<std::string>{"linear_attention", "linear_attention",
                                                  "linear_attention", "full_attention",
                                                  "linear_attention", "linear_attention"});
}

// GraniteMoeSharedAttention: scaling = config.attention_multiplier (default 1.0).
// ZambaAttention: scaling = (head_dim / 2)^-1/2 with ZambaConfig's attention_head_dim =
// 2 * hidden_size // num_attention_heads when absent: 2 * 3712 / 16 = 464, so 232^-1/2.
TEST_CASE("hf_config: GraniteMoeShared's and Zamba's attention scales", "[hf_config]") {
  CHECK(posenc_test::parse_hf_config(R"({"model_type": "granitemoeshared", "hidden_size": 1024,
      "num_attention_heads": 16, "rope_theta": 10000})").softmax_scale == 1.0);
  CHECK(posenc_test::parse_hf_config(R"({"model_type": "granitemoeshared", "hidden_size": 1024,
      "num_attention_heads": 16, "rope_theta": 10000, "attention_multiplier": 0.015625})")
            .softmax_scale == 0.015625);
  const auto zamba = posenc_test::parse_hf_config(R"({"model_type": "zamba", "hidden_size": 3712,
      "num_attention_heads": 16, "num_key_value_heads": 16})");
  CHECK_THAT(zamba.softmax_scale,
             WithinRel(static_cast<double>(1.0L / std::sqrt(232.0L)), 1e-15));
  // ZambaAttention reads config.attention_head_dim when given: (128 / 2)^-1/2 = 1/8.
  CHECK(posenc_test::parse_hf_config(R"({"model_type": "zamba", "hidden_size": 3712,
      "num_attention_heads": 16, "num_key_value_heads": 16, "attention_head_dim": 128})")
            .softmax_scale == 0.125);
}

// transformers' ZambaConfig (models/zamba/configuration_zamba.py): attention_head_dim =
// 2 * self.hidden_size // self.num_attention_heads when absent (2 * 3712 // 16 = 464), the q.k
// width of ZambaAttention, whose scaling (464 / 2)^-1/2 stays as it was.
TEST_CASE("hf_config: Zamba's attention_head_dim defaults to 2 hidden_size / heads",
          "[hf_config]") {
  const auto zamba = posenc_test::parse_hf_config(R"({"model_type": "zamba", "hidden_size": 3712,
      "num_attention_heads": 16, "num_key_value_heads": 16})");
  CHECK(zamba.attention_head_dim == 464);
  CHECK_THAT(zamba.softmax_scale,
             WithinRel(static_cast<double>(1.0L / std::sqrt(232.0L)), 1e-15));
  CHECK(posenc_test::parse_hf_config(R"({"model_type": "zamba", "hidden_size": 3712,
      "num_attention_heads": 16, "num_key_value_heads": 16, "attention_head_dim": 128})")
            .attention_head_dim == 128);
}

// HfConfigReader names the key of a value of the wrong JSON type (invalid_argument, not
// nlohmann's type_error): a list element and a string.
TEST_CASE("hf_config: values of the wrong JSON type are refused by key", "[hf_config][reader]") {
  const std::string head = R"({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 8,
      "max_position_embeddings": 8192, "original_max_position_embeddings": 4096, )";
  REQUIRE_THROWS_WITH(posenc_test::parse_hf_config(head + R"("rope_scaling": {"rope_type": "longrope",
      "short_factor": ["1", 1, 1, 1], "long_factor": [1, 1, 1, 1]}})", "t.json"),
                      Contains("t.json: key \"rope_scaling.short_factor\" [0] must be a number"));
  REQUIRE_THROWS_WITH(posenc_test::parse_hf_config(head + R"("rope_scaling": {"rope_type": 5}})",
                                              "t.json"),
                      Contains("t.json: key \"rope_scaling.rope_type\" must be a string"));
}

// The nesting limit counts depth, not brackets: 70 sibling lists two levels deep are read.
TEST_CASE("hf_config: many shallow lists are not mistaken for deep nesting",
          "[hf_config][reader]") {
  std::string lists;
  for (int i = 0; i < 70; ++i) lists += ", \"k" + std::to_string(i) + "\": [1]";
  CHECK(posenc_test::parse_hf_config(R"({"model_type": "llama", "hidden_size": 256,
      "num_attention_heads": 4)" + lists + "}").rope.head_dim == 64);
}

// transformers 5 _compute_longrope_parameters: `if factor is None: factor = max / original`,
// then attention_factor = sqrt(1 + ln factor / ln original): max 131072 / original 4096 = 32.
TEST_CASE("hf_config: longrope without factor takes max / original for its attention factor",
          "[hf_config][longrope]") {
  const auto c = posenc_test::parse_hf_config(R"({"hidden_size": 64, "num_attention_heads": 8,
      "max_position_embeddings": 131072,
      "rope_scaling": {"type": "longrope", "original_max_position_embeddings": 4096,
                       "short_factor": [1.0, 1.0, 1.0, 1.0],
                       "long_factor": [1.0, 2.0, 4.0, 8.0]}})");
  const long double expected = std::sqrt(1.0L + std::log(32.0L) / std::log(4096.0L));
  CHECK_THAT(posenc::compute_rope_frequencies(c.rope, 8192).attention_factor,
             WithinRel(static_cast<double>(expected), 1e-12));
}

// Scales that would zero or blow up q.k are refused by key: query_pre_attn_scalar^-1/2 and
// MPT's attn_config.softmax_scale must be > 0.
TEST_CASE("hf_config: a query_pre_attn_scalar or MPT softmax_scale of 0 is refused",
          "[hf_config][errors]") {
  REQUIRE_THROWS_WITH(posenc_test::parse_hf_config(R"({"model_type": "gemma2", "hidden_size": 2304,
      "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256,
      "query_pre_attn_scalar": 0})", "g.json"),
                      Contains("g.json: key \"query_pre_attn_scalar\" = 0 must be > 0"));
  REQUIRE_THROWS_WITH(posenc_test::parse_hf_config(R"({"model_type": "mpt", "d_model": 768,
      "n_heads": 12, "attn_config": {"alibi": true, "softmax_scale": 0}})", "p.json"),
                      Contains("p.json: key \"attn_config.softmax_scale\" = 0 must be > 0"));
}

// ---- mutation audit: model_config.hpp's helpers on hand-built configs ---------------------

// detail::hf_lower_alnum's contract: "GptOss", "gpt_oss", "gpt-oss" -> "gptoss"; every letter
// A..Z lowered, every digit 0..9 kept, anything else dropped (the ends included).
TEST_CASE("hf_config: family names keep every digit and lower every letter A to Z",
          "[hf_config][family]") {
  CHECK(posenc::detail::hf_lower_alnum("GptOss") == "gptoss");
  CHECK(posenc::detail::hf_lower_alnum("gpt-oss") == "gptoss");
  CHECK(posenc::detail::hf_lower_alnum("gpt_oss") == "gptoss");
  CHECK(posenc::detail::hf_lower_alnum("AZ-az_09.Gemma2") == "azaz09gemma2");
}

// hf_mla_rope_params: "the exponent runs over rotary_dim = qk_rope_head_dim either way": a
// rope head given as head_dim 64 with rotary_dim 0 (HF's rule: int(64 * f)) must keep that
// width on the widened head, not re-derive it from the 192-wide [nope | rope] head.
TEST_CASE("hf_config: hf_mla_rope_params resolves rotary_dim 0 from the rope head, not the "
          "widened one",
          "[hf_config][mla]") {
  posenc::HfModelConfig c;
  c.rope.head_dim = 64;
  c.qk_nope_head_dim = 128;
  c.kv_lora_rank = 512;
  for (const double f : {1.0, 0.5}) {
    CAPTURE(f);
    c.rope.partial_rotary_factor = f;
    const auto expected_rotary = static_cast<Eigen::Index>(64 * f);
    for (const auto head : {posenc::HfMlaHead::kConcatenated, posenc::HfMlaHead::kLatent}) {
      const auto wide = posenc::hf_mla_rope_params(c, head);
      CHECK(wide.head_dim == (head == posenc::HfMlaHead::kLatent ? 512 : 128) + 64);
      CHECK(posenc::resolved_rotary_dim(wide) == expected_rotary);
      // theta^(-2j / rotary_dim) with the rope head's rotary_dim (RoFormer eq. 15).
      const auto fw = posenc::compute_rope_frequencies(wide);
      REQUIRE(fw.inv_freq.size() == static_cast<std::size_t>(expected_rotary / 2));
      CHECK_THAT(fw.inv_freq[1],
                 WithinRel(std::pow(10000.0, -2.0 / static_cast<double>(expected_rotary)), 1e-12));
    }
  }
}

// "Throws ... a width past 2^20": 2^20 itself is not past it.
TEST_CASE("hf_config: hf_mla_rope_params accepts a prefix of exactly 2^20", "[hf_config][mla]") {
  posenc::HfModelConfig c;
  c.rope.head_dim = 64;
  c.rope.rotary_dim = 64;
  c.qk_nope_head_dim = Eigen::Index{1} << 20;
  c.kv_lora_rank = (Eigen::Index{1} << 20) + 1;
  const auto p = posenc::hf_mla_rope_params(c, posenc::HfMlaHead::kConcatenated);
  CHECK(p.head_dim == (Eigen::Index{1} << 20) + 64);
  CHECK(p.rotary_offset == Eigen::Index{1} << 20);
  REQUIRE_THROWS_WITH(posenc::hf_mla_rope_params(c, posenc::HfMlaHead::kLatent),
                      Contains("kv_lora_rank = 1048577") && Contains("must be in [0, 2^20]"));
}

// The scheme decides the bias: a RoPE model's layers get no ALiBi slopes, even when a
// hand-built config carries a leftover alibi_max_bias (HfModelConfig: the slopes are for
// scheme == kAlibi).
TEST_CASE("hf_config: hf_attention_params gives ALiBi slopes to an ALiBi scheme only",
          "[hf_config][alibi]") {
  posenc::HfModelConfig c;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 4;
  c.alibi_max_bias = 8.0;
  CHECK(posenc::hf_attention_params(c, 1).alibi_slopes.empty());
  // The same config as ALiBi: the paper's slopes for 4 heads, 2^(-8 (h + 1) / 4).
  c.scheme = HfPositionScheme::kAlibi;
  const auto slopes = posenc::hf_attention_params(c, 1).alibi_slopes;
  REQUIRE(slopes.size() == 4);
  for (std::size_t h = 0; h < 4; ++h) {
    CHECK_THAT(slopes[h], WithinRel(std::pow(2.0, -2.0 * static_cast<double>(h + 1)), 1e-15));
  }
}

// hf_mark_layers_without_attention reports how many layers it took RoPE from: LFM2 with
// layer_types [conv, full_attention, conv] has two.
TEST_CASE("hf_config: the layers without softmax attention are counted in a note",
          "[hf_config][layers]") {
  const auto c = posenc_test::parse_hf_config(R"({"model_type": "lfm2", "hidden_size": 2048,
      "num_attention_heads": 32, "num_key_value_heads": 8, "num_hidden_layers": 3,
      "rope_theta": 1000000.0, "layer_types": ["conv", "full_attention", "conv"]})");
  CHECK(has_note(c, "2 layers without softmax attention"));
  const auto dense = posenc_test::parse_hf_config(R"({"model_type": "llama", "hidden_size": 2048,
      "num_attention_heads": 32, "num_hidden_layers": 3})");
  CHECK_FALSE(has_note(dense, "without softmax attention"));
}
