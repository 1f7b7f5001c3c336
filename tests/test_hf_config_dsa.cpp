// DeepSeek sparse attention's lightning indexer read from a config: its heads of index_head_dim
// rotate their FIRST qk_rope_head_dim dims ([rope | nope], the reverse of MLA's [nope | rope])
// with the main YaRN plan, half-split for DeepSeek-V3.2 although its MLA heads are interleaved
// (DeepSeek's model card: "the input tensor to RoPE in the indexer module requires a
// non-interleaved layout, whereas RoPE in the MLA module expects an interleaved layout"; its
// demo code had it wrong until 2025-11-17), interleaved for GLM-5 (indexer_rope_interleave).
// Expected rotations are written out pair by pair in long double from the plan's inv_freq.

#include <catch2/catch.hpp>

#include <posenc/hf_config.hpp>
#include <posenc/rope.hpp>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "support/hf_config_loader.hpp"
#include "support/rng.hpp"

using Catch::Matchers::Contains;
using posenc::HfMlaHead;
using posenc::RopeLayout;

namespace {

// The position keys of deepseek-ai/DeepSeek-V3.2-Exp's config.json.
std::string v32(const std::string& extra = "") {
  return R"({"architectures": ["DeepseekV32ForCausalLM"], "model_type": "deepseek_v32",
      "hidden_size": 7168, "num_attention_heads": 128, "num_key_value_heads": 128,
      "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128, "kv_lora_rank": 512,
      "index_head_dim": 128, "index_n_heads": 64, "index_topk": 2048, "rope_theta": 10000,
      "max_position_embeddings": 163840, "rope_interleave": true,
      "rope_scaling": {"type": "yarn", "factor": 40, "original_max_position_embeddings": 4096,
        "beta_fast": 32, "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 1.0})" +
         extra + "}";
}

/// One 128-wide indexer row at `pos` rotated by `plan` against the pairs written out: half-split
/// (j, j + 32) or interleaved (2j, 2j + 1) over the first 64 dims, the last 64 untouched.
void check_indexer_row(const posenc::RopeParams& plan, bool interleaved, std::int64_t pos) {
  const auto f = posenc::compute_rope_frequencies(plan);
  REQUIRE(f.inv_freq.size() == 32);
  const auto x = posenc_test::random_vector<float>(128, 401);
  auto y = x;
  const std::int64_t ids[1] = {pos};
  posenc::apply_rope_inplace<float>(posenc::TensorView<float, 4>(y.data(), 1, 1, 1, 128),
                                    posenc::PositionIdsView(ids, 1, 1), f, plan.layout);
  for (std::size_t j = 0; j < 32; ++j) {
    const std::size_t a = interleaved ? 2 * j : j, b = interleaved ? 2 * j + 1 : j + 32;
    const long double angle = static_cast<long double>(pos) * f.inv_freq[j];
    const long double c = std::cos(angle) * f.attention_factor, s = std::sin(angle) * f.attention_factor;
    CAPTURE(j, pos, interleaved);
    REQUIRE_THAT(y[a], Catch::Matchers::WithinAbs(static_cast<double>(x[a] * c - x[b] * s), 2e-6));
    REQUIRE_THAT(y[b], Catch::Matchers::WithinAbs(static_cast<double>(x[b] * c + x[a] * s), 2e-6));
  }
  for (std::size_t e = 64; e < 128; ++e) REQUIRE(y[e] == x[e]);  // the nope part, bit for bit
}

}  // namespace

TEST_CASE("hf_config: DeepSeek-V3.2's indexer rotates the first 64 of its 128 dims, half-split",
          "[hf_config][mla][dsa]") {
  const auto c = posenc_test::parse_hf_config(v32());
  REQUIRE(c.index_head_dim == 128);
  REQUIRE(c.index_n_heads == 64);
  REQUIRE(c.index_topk == 2048);
  REQUIRE(c.rope.layout == RopeLayout::kInterleaved);  // the MLA heads
  REQUIRE(c.indexer_layout == RopeLayout::kHalfSplit);
  REQUIRE(c.layout_reason == "config key rope_interleave = true");
  const auto idx = posenc::hf_mla_rope_params(c, HfMlaHead::kIndexer);
  REQUIRE(idx.head_dim == 128);
  REQUIRE(idx.rotary_offset == 0);
  REQUIRE(posenc::resolved_rotary_dim(idx) == 64);
  REQUIRE(idx.layout == RopeLayout::kHalfSplit);
  // The MLA plan's YaRN frequencies and factors (exponent over rotary_dim 64).
  const auto main = posenc::compute_rope_frequencies(c.rope), fi = posenc::compute_rope_frequencies(idx);
  REQUIRE(fi.inv_freq == main.inv_freq);
  REQUIRE(fi.attention_factor == main.attention_factor);
  REQUIRE(fi.softmax_scale_multiplier == main.softmax_scale_multiplier);
  for (const std::int64_t pos : {std::int64_t{0}, std::int64_t{7}, std::int64_t{4095}, std::int64_t{131071}}) {
    check_indexer_row(idx, false, pos);
  }
  // The MLA head keeps its rope slice at the end, interleaved.
  const auto mla = posenc::hf_mla_rope_params(c, HfMlaHead::kConcatenated);
  REQUIRE(mla.rotary_offset == 128);
  REQUIRE(mla.layout == RopeLayout::kInterleaved);
  // indexer_rope_interleave = false says the same thing.
  REQUIRE(posenc_test::parse_hf_config(v32(R"(, "indexer_rope_interleave": false)")).indexer_layout ==
          RopeLayout::kHalfSplit);
  REQUIRE_THROWS_WITH(posenc_test::parse_hf_config(v32(R"(, "index_head_dim": 32)")),
                      Contains("index_head_dim\" = 32 must be in [qk_rope_head_dim = 64"));
  // A model without an indexer has no such plan.
  const auto v3 = posenc_test::parse_hf_config(R"({"hidden_size": 7168, "num_attention_heads": 128,
      "qk_rope_head_dim": 64, "qk_nope_head_dim": 128})");
  REQUIRE(v3.index_head_dim == 0);
  REQUIRE_THROWS_WITH(posenc::hf_mla_rope_params(v3, HfMlaHead::kIndexer),
                      Contains("index_head_dim = 0") && Contains("has no sparse-attention indexer"));
}

TEST_CASE("hf_config: GLM-5's indexer_rope_interleave turns the indexer's pairs interleaved",
          "[hf_config][mla][dsa]") {
  // zai-org/GLM-5 (glm_moe_dsa): rope_interleave and indexer_rope_interleave both true.
  const auto c = posenc_test::parse_hf_config(R"({"model_type": "glm_moe_dsa", "hidden_size": 6144,
      "num_attention_heads": 64, "qk_rope_head_dim": 64, "qk_nope_head_dim": 192,
      "v_head_dim": 256, "kv_lora_rank": 512, "index_head_dim": 128, "index_n_heads": 32,
      "index_topk": 2048, "rope_interleave": true, "indexer_rope_interleave": true,
      "rope_parameters": {"rope_theta": 1000000, "rope_type": "default"}})");
  REQUIRE(c.indexer_layout == RopeLayout::kInterleaved);
  const auto idx = posenc::hf_mla_rope_params(c, HfMlaHead::kIndexer);
  REQUIRE(idx.layout == RopeLayout::kInterleaved);
  REQUIRE(idx.theta == 1000000.0);
  for (const std::int64_t pos : {std::int64_t{3}, std::int64_t{200000}}) check_indexer_row(idx, true, pos);
}

// M58 (mutation audit). The indexer splits each head into [rope | nope] =
// [qk_rope_head_dim, index_head_dim - qk_rope_head_dim] (DeepSeek-V3.2 Indexer: torch.split of
// q / k with those sizes); a head exactly qk_rope_head_dim wide has an empty nope part and is
// rotated whole (a split size of 0 is valid), so index_head_dim == qk_rope_head_dim is accepted
// and one narrower is not.
TEST_CASE("hf_config: an indexer head as wide as qk_rope_head_dim is accepted") {
  const std::string base = R"({"model_type": "deepseek_v32", "hidden_size": 1024,
      "num_attention_heads": 8, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128,
      "v_head_dim": 128, "kv_lora_rank": 512, "index_n_heads": 4, "rope_theta": 10000,
      "index_head_dim": )";
  const auto c = posenc_test::parse_hf_config(base + "64}");
  CHECK(c.index_head_dim == 64);
  CHECK_THROWS_AS(posenc_test::parse_hf_config(base + "62}"), std::invalid_argument);
}

// transformers' DeepseekV32Config (models/deepseek_v32/configuration_deepseek_v32.py):
// index_topk = 2048, index_head_dim = 128, index_n_heads = 64 by default, so a deepseek_v32
// config that omits them still has its indexer. Other MLA models (GLM-5's glm_moe_dsa,
// DeepSeek-V3) get no default indexer.
TEST_CASE("hf_config: deepseek_v32 without index keys takes DeepseekV32Config's indexer defaults",
          "[hf_config][mla][dsa]") {
  const std::string mla = R"("hidden_size": 7168, "num_attention_heads": 128,
      "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128, "kv_lora_rank": 512,
      "rope_theta": 10000)";
  const auto c = posenc_test::parse_hf_config(R"({"model_type": "deepseek_v32", )" + mla + "}");
  CHECK(c.index_head_dim == 128);
  CHECK(c.index_n_heads == 64);
  CHECK(c.index_topk == 2048);
  CHECK(c.indexer_layout == RopeLayout::kHalfSplit);
  const auto idx = posenc::hf_mla_rope_params(c, HfMlaHead::kIndexer);
  CHECK(idx.head_dim == 128);
  CHECK(posenc::resolved_rotary_dim(idx) == 64);
  // A key that is given wins; the absent ones still default.
  const auto some = posenc_test::parse_hf_config(R"({"model_type": "deepseek_v32", )" + mla +
                                            R"(, "index_n_heads": 4})");
  CHECK(some.index_head_dim == 128);
  CHECK(some.index_n_heads == 4);
  CHECK(some.index_topk == 2048);
  for (const char* type : {"glm_moe_dsa", "deepseek_v3"}) {
    CAPTURE(type);
    const auto other = posenc_test::parse_hf_config(std::string(R"({"model_type": ")") + type +
                                               "\", " + mla + "}");
    CHECK(other.index_head_dim == 0);
    CHECK(other.index_n_heads == 0);
    CHECK(other.index_topk == 0);
  }
}
