// The FP8 KV cache a checkpoint was calibrated for, from its quantization_config:
// compressed-tensors' kv_cache_scheme (strategy "tensor" or "attn_head", llm-compressor's
// QuantizationStrategy) and ModelOpt's kv_cache_quant_algo. The scales themselves are weights;
// the config says which KvScales form takes them.

#include <catch2/catch.hpp>

#include <posenc/hf_config.hpp>

#include <string>

#include "support/config_notes.hpp"
#include "support/hf_config_loader.hpp"

using Catch::Matchers::Contains;
using posenc::HfKvCacheScales;
using posenc_test::has_note;

namespace {

std::string llama_with(const std::string& quantization_config) {
  return R"({"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32,
             "num_key_value_heads": 8, "max_position_embeddings": 8192, "rope_theta": 500000.0)" +
         (quantization_config.empty() ? std::string() : ", \"quantization_config\": " + quantization_config) +
         "}";
}

}  // namespace

TEST_CASE("hf_config: quantization_config tells per-tensor from per-head FP8 KV scales", "[hf_config][fp8]") {
  CHECK(posenc_test::parse_hf_config(llama_with("")).kv_cache_scales == HfKvCacheScales::kNone);

  // compressed-tensors (RedHat / llm-compressor FP8-KV checkpoints).
  const auto tensor = posenc_test::parse_hf_config(llama_with(R"({"quant_method": "compressed-tensors",
      "kv_cache_scheme": {"num_bits": 8, "type": "float", "strategy": "tensor", "dynamic": false,
                          "symmetric": true}})"));
  CHECK(tensor.kv_cache_scales == HfKvCacheScales::kPerTensor);
  CHECK(has_note(tensor, "KvScales{k, v}"));
  const auto head = posenc_test::parse_hf_config(llama_with(R"({"quant_method": "compressed-tensors",
      "kv_cache_scheme": {"num_bits": 8, "type": "float", "strategy": "attn_head"}})"));
  CHECK(head.kv_cache_scales == HfKvCacheScales::kPerHead);
  CHECK(has_note(head, "KvScales::per_head(k, v)"));
  // Not an FP8 cache, or scales posenc's caches do not take: noted, the RoPE still read.
  const auto int8 = posenc_test::parse_hf_config(llama_with(R"({"kv_cache_scheme": {"num_bits": 8,
      "type": "int", "strategy": "tensor"}})"));
  CHECK(int8.kv_cache_scales == HfKvCacheScales::kNone);
  CHECK(has_note(int8, "8-bit int KV cache, not an FP8 cache posenc stores"));
  CHECK(int8.rope.theta == 500000.0);
  const auto channel = posenc_test::parse_hf_config(llama_with(R"({"kv_cache_scheme": {"num_bits": 8,
      "type": "float", "strategy": "channel"}})"));
  CHECK(channel.kv_cache_scales == HfKvCacheScales::kNone);
  CHECK(has_note(channel, "strategy = \"channel\""));

  // ModelOpt: flat, or nested under "quantization" as hf_quant_config.json writes it.
  for (const char* qc : {R"({"quant_method": "modelopt", "quant_algo": "FP8", "kv_cache_quant_algo": "FP8"})",
                         R"({"quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": "FP8"}})"}) {
    CAPTURE(qc);
    const auto m = posenc_test::parse_hf_config(llama_with(qc));
    CHECK(m.kv_cache_scales == HfKvCacheScales::kPerTensor);
  }
  CHECK(posenc_test::parse_hf_config(llama_with(R"({"kv_cache_quant_algo": "INT8"})")).kv_cache_scales ==
        HfKvCacheScales::kNone);

  REQUIRE_THROWS_AS(posenc_test::parse_hf_config(llama_with(R"({"kv_cache_scheme": 8})"), "q.json"),
                    std::invalid_argument);
  REQUIRE_THROWS_WITH(posenc_test::parse_hf_config(llama_with(R"({"kv_cache_scheme": 8})"), "q.json"),
                      Contains("q.json: key \"quantization_config.kv_cache_scheme\" must be an object"));
  REQUIRE_THROWS_WITH(posenc_test::parse_hf_config(llama_with(R"({"kv_cache_scheme": {"num_bits": "8"}})"), "q.json"),
                      Contains("quantization_config.kv_cache_scheme.num_bits\" must be an integer"));
}

// compressed-tensors' QuantizationArgs: num_bits defaults to 8, and a strategy left unset with
// no group_size is inferred as "tensor" (validate_model_after). A float scheme that omits them
// is an FP8 per-tensor cache.
TEST_CASE("hf_config: kv_cache_scheme without num_bits or strategy takes QuantizationArgs' "
          "defaults", "[hf_config][fp8]") {
  const auto no_bits = posenc_test::parse_hf_config(llama_with(R"({"kv_cache_scheme": {
      "type": "float", "strategy": "tensor"}})"));
  CHECK(no_bits.kv_cache_scales == HfKvCacheScales::kPerTensor);
  const auto no_strategy = posenc_test::parse_hf_config(llama_with(R"({"kv_cache_scheme": {
      "num_bits": 8, "type": "float"}})"));
  CHECK(no_strategy.kv_cache_scales == HfKvCacheScales::kPerTensor);
}

// compressed-tensors' num_bits 4 with type "float" is FP4 (FP4_E2M1), not an FP8 cache.
TEST_CASE("hf_config: a 4-bit float kv_cache_scheme is not read as FP8", "[hf_config][fp8]") {
  const auto c = posenc_test::parse_hf_config(llama_with(R"({"kv_cache_scheme": {"num_bits": 4,
      "type": "float", "strategy": "tensor"}})"));
  CHECK(c.kv_cache_scales == HfKvCacheScales::kNone);
  CHECK(has_note(c, "4-bit float KV cache, not an FP8 cache posenc stores"));
}

// compressed-tensors' QuantizationArgs (src/compressed_tensors/quantization/quant_args.py):
// `type: QuantizationType = QuantizationType.INT`. A kv_cache_scheme without "type" is an
// 8-bit int cache, handled as "type": "int" is: no FP8 scales, a note naming the key.
TEST_CASE("hf_config: kv_cache_scheme without type is an int cache by QuantizationArgs' default",
          "[hf_config][fp8]") {
  const auto c = posenc_test::parse_hf_config(llama_with(R"({"quant_method": "compressed-tensors",
      "kv_cache_scheme": {"num_bits": 8, "strategy": "tensor"}})"));
  CHECK(c.kv_cache_scales == HfKvCacheScales::kNone);
  CHECK(has_note(c, "8-bit int KV cache, not an FP8 cache posenc stores"));
  CHECK(has_note(c, "quantization_config.kv_cache_scheme.type absent"));
  CHECK(c.rope.theta == 500000.0);
}
