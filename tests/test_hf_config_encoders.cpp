// Encoders read from Hugging Face configs: bidirectional attention (HfModelConfig::mask), the
// windows of their local layers, and T5-style relative bias configs. Expected values: the
// keys of answerdotai/ModernBERT-base's and google-t5/t5-small's config.json and HF's rules
// written out by hand (ModernBertModel: layer i global iff
// i % global_attn_every_n_layers == 0; local layers see |i - j| <= local_attention / 2, the
// FlashAttention window (l / 2, l / 2)); the attention itself against softmax over exactly
// those keys in long double.

#include <catch2/catch.hpp>

#include <posenc/attention.hpp>
#include <posenc/hf_config.hpp>

#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "support/attention_ld.hpp"
#include "support/config_notes.hpp"
#include "support/hf_config_loader.hpp"
#include "support/rng.hpp"

using Catch::Matchers::Contains;
using posenc::MaskMode;
using posenc_test::has_note;

namespace {

// The position keys of answerdotai/ModernBERT-base's config.json.
const char* const kModernBertBase = R"({"architectures": ["ModernBertForMaskedLM"],
    "model_type": "modernbert", "hidden_size": 768, "num_attention_heads": 12,
    "num_hidden_layers": 22, "max_position_embeddings": 8192, "global_attn_every_n_layers": 3,
    "global_rope_theta": 160000.0, "local_attention": 128, "local_rope_theta": 10000.0})";

}  // namespace

TEST_CASE("hf_config: ModernBERT is bidirectional, global every third layer, local |i - j| <= 64",
          "[hf_config][encoder]") {
  const auto c = posenc_test::parse_hf_config(kModernBertBase);
  REQUIRE(c.mask == MaskMode::kBidirectional);
  REQUIRE(c.sliding_window == 65);  // |a - j| < 65  <=>  |a - j| <= 128 / 2
  REQUIRE(c.layer_types.size() == 22);
  for (std::size_t i = 0; i < 22; ++i) {
    CAPTURE(i);
    REQUIRE(c.layer_types[i] == (i % 3 == 0 ? "full_attention" : "sliding_attention"));
  }
  REQUIRE(c.layer_ropes.size() == 2);
  REQUIRE(c.layer_ropes[0].layer_type == "full_attention");
  REQUIRE(c.layer_ropes[0].num_layers == 8);  // 0, 3, ..., 21
  REQUIRE(c.layer_ropes[0].params.theta == 160000.0);
  REQUIRE(c.layer_ropes[1].layer_type == "sliding_attention");
  REQUIRE(c.layer_ropes[1].num_layers == 14);
  REQUIRE(c.layer_ropes[1].params.theta == 10000.0);
  REQUIRE(c.rope.head_dim == 64);  // 768 / 12
  REQUIRE(c.rope.layout == posenc::RopeLayout::kHalfSplit);
  REQUIRE(c.softmax_scale == 0.125);
  for (const Eigen::Index layer : {Eigen::Index{0}, Eigen::Index{1}, Eigen::Index{2}, Eigen::Index{21}}) {
    CAPTURE(layer);
    const auto p = posenc::hf_attention_params(c, layer);
    REQUIRE(p.mask == MaskMode::kBidirectional);
    REQUIRE(p.sliding_window == (layer % 3 == 0 ? 0 : 65));
  }
  // The same model from transformers' defaults alone.
  const auto d = posenc_test::parse_hf_config(R"({"model_type": "modernbert", "hidden_size": 768,
      "num_attention_heads": 12, "num_hidden_layers": 22})");
  REQUIRE(d.mask == MaskMode::kBidirectional);
  REQUIRE(d.sliding_window == 65);
  REQUIRE(d.layer_types == c.layer_types);
  REQUIRE(d.layer_ropes.size() == 2);
  REQUIRE(d.layer_ropes[0].params.theta == 160000.0);
  REQUIRE(d.layer_ropes[1].params.theta == 10000.0);
  REQUIRE(has_note(d, "local_attention absent"));
  REQUIRE(has_note(d, "global_rope_theta absent"));
  REQUIRE(has_note(d, "local_rope_theta absent"));
  // A decoder stays causal.
  REQUIRE(posenc_test::parse_hf_config(R"({"hidden_size": 64, "num_attention_heads": 4})").mask == MaskMode::kCausal);
  REQUIRE_THROWS_WITH(posenc_test::parse_hf_config(R"({"model_type": "modernbert", "hidden_size": 64,
      "num_attention_heads": 4, "num_hidden_layers": 3, "local_attention": 0})"),
                      Contains("local_attention\" = 0 must be in [1, 2^53]"));
  REQUIRE_THROWS_WITH(posenc_test::parse_hf_config(R"({"model_type": "modernbert", "hidden_size": 64,
      "num_attention_heads": 4, "num_hidden_layers": 3, "global_attn_every_n_layers": 0})"),
                      Contains("global_attn_every_n_layers\" = 0 must be > 0"));
}

TEST_CASE("hf_config: a ModernBERT local layer through attention() sees exactly |i - j| <= 64",
          "[hf_config][encoder]") {
  // 150 tokens, one head of 8: every query against softmax over the keys within 64 of it on
  // both sides, in long double (the window of HF's sliding_window_mask), and a global layer
  // over all 150.
  const auto c = posenc_test::parse_hf_config(kModernBertBase);
  const Eigen::Index n = 150, d = 8;
  const auto q = posenc_test::random_vector<float>(static_cast<std::size_t>(n * d), 301);
  const auto k = posenc_test::random_vector<float>(static_cast<std::size_t>(n * d), 302);
  const auto v = posenc_test::random_vector<float>(static_cast<std::size_t>(n * d), 303);
  for (const Eigen::Index layer : {Eigen::Index{0}, Eigen::Index{1}}) {
    CAPTURE(layer);
    posenc::AttentionParams p = posenc::hf_attention_params(c, layer);
    p.scale.reset();  // the test's head is 8 wide, not the model's 64
    std::vector<float> out(static_cast<std::size_t>(n * d));
    posenc::attention<float>(posenc::ConstTensorView<float, 4>(q.data(), 1, n, 1, d),
                             posenc::ConstTensorView<float, 4>(k.data(), 1, n, 1, d),
                             posenc::ConstTensorView<float, 4>(v.data(), 1, n, 1, d),
                             posenc::TensorView<float, 4>(out.data(), 1, n, 1, d), p);
    const Eigen::Index radius = layer == 0 ? n : 64;
    for (Eigen::Index i = 0; i < n; ++i) {
      std::vector<Eigen::Index> keys;
      for (Eigen::Index j = 0; j < n; ++j) {
        if (std::abs(i - j) <= radius) keys.push_back(j);
      }
      const auto expect = posenc_test::attend_ld(q.data() + i * d, k.data(), v.data(), d, d, keys, {},
                                                 1.0L / std::sqrt(static_cast<long double>(d)));
      for (Eigen::Index e = 0; e < d; ++e) {
        CAPTURE(i, e);
        REQUIRE_THAT(out[static_cast<std::size_t>(i * d + e)],
                     Catch::Matchers::WithinAbs(static_cast<double>(expect[static_cast<std::size_t>(e)]), 1e-5));
      }
    }
  }
}

TEST_CASE("hf_config: other encoders - Jina-BERT's ALiBi, is_causal = false, Gemma's bidirectional attention",
          "[hf_config][encoder]") {
  // jinaai/jina-embeddings-v2-base-en: model_type bert with position_embedding_type alibi.
  const auto jina = posenc_test::parse_hf_config(R"({"model_type": "bert", "architectures": ["JinaBertForMaskedLM"],
      "hidden_size": 768, "num_attention_heads": 12, "num_hidden_layers": 12,
      "position_embedding_type": "alibi", "max_position_embeddings": 8192})");
  REQUIRE(jina.scheme == posenc::HfPositionScheme::kAlibi);
  REQUIRE(jina.mask == MaskMode::kBidirectional);
  REQUIRE(posenc::hf_attention_params(jina, 3).mask == MaskMode::kBidirectional);
  REQUIRE(has_note(jina, "Jina-BERT"));
  // JAIS keeps its causal ALiBi.
  REQUIRE(posenc_test::parse_hf_config(R"({"model_type": "jais", "hidden_size": 64, "num_attention_heads": 4,
      "position_embedding_type": "alibi"})").mask == MaskMode::kCausal);
  REQUIRE(posenc_test::parse_hf_config(R"({"hidden_size": 64, "num_attention_heads": 4, "is_causal": false})").mask ==
          MaskMode::kBidirectional);
  REQUIRE(posenc_test::parse_hf_config(R"({"hidden_size": 64, "num_attention_heads": 4, "is_causal": true})").mask ==
          MaskMode::kCausal);
  // google/embeddinggemma-300m: Gemma-3 text with use_bidirectional_attention and a window of
  // 512, which transformers halves to 512 / 2 + 1 = 257 for FlashAttention's exclusive bounds:
  // |i - j| <= 256, posenc's 257.
  const std::string gemma = R"({"model_type": "gemma3_text", "hidden_size": 768, "num_attention_heads": 3,
      "num_key_value_heads": 1, "head_dim": 256, "num_hidden_layers": 24, "sliding_window": 512,
      "rope_theta": 1000000.0, "rope_local_base_freq": 10000.0, "query_pre_attn_scalar": 256,
      "layer_types": ["sliding_attention", "full_attention"], "use_bidirectional_attention": )";
  const auto eg = posenc_test::parse_hf_config(gemma + "true}");
  REQUIRE(eg.mask == MaskMode::kBidirectional);
  REQUIRE(eg.sliding_window == 257);
  REQUIRE(posenc::hf_attention_params(eg, 0).sliding_window == 257);
  REQUIRE(posenc::hf_attention_params(eg, 0).mask == MaskMode::kBidirectional);
  REQUIRE(posenc::hf_attention_params(eg, 1).sliding_window == 0);
  REQUIRE(has_note(eg, "|i - j| <= sliding_window / 2 = 256"));
  // Gemma-4's string form: "all" as true, "vision" keeps text causal and the window whole.
  REQUIRE(posenc_test::parse_hf_config(gemma + "\"all\"}").sliding_window == 257);
  const auto vision = posenc_test::parse_hf_config(gemma + "\"vision\"}");
  REQUIRE(vision.mask == MaskMode::kCausal);
  REQUIRE(vision.sliding_window == 512);
  REQUIRE(has_note(vision, "text tokens stay causal"));
  REQUIRE(posenc_test::parse_hf_config(gemma + "false}").mask == MaskMode::kCausal);
  REQUIRE_THROWS_WITH(posenc_test::parse_hf_config(gemma + "\"some\"}"),
                      Contains("use_bidirectional_attention\" must be a bool, \"all\" or \"vision\""));
}

TEST_CASE("hf_config: T5's relative attention bias, not RoPE", "[hf_config][relative_bias]") {
  // google-t5/t5-small's config.json: d_model 512, 8 heads of d_kv 64, 32 buckets up to 128.
  const auto c = posenc_test::parse_hf_config(R"({"architectures": ["T5ForConditionalGeneration"],
      "model_type": "t5", "d_ff": 2048, "d_kv": 64, "d_model": 512, "num_heads": 8, "num_layers": 6,
      "num_decoder_layers": 6, "relative_attention_num_buckets": 32,
      "relative_attention_max_distance": 128, "is_encoder_decoder": true, "n_positions": 512})");
  REQUIRE(c.scheme == posenc::HfPositionScheme::kRelativeBias);
  REQUIRE(c.relative_attention_num_buckets == 32);
  REQUIRE(c.relative_attention_max_distance == 128);
  REQUIRE(c.attention_head_dim == 64);
  REQUIRE(c.softmax_scale == 1.0);          // T5 does not scale q.k
  REQUIRE(c.mask == MaskMode::kCausal);     // the decoder's; the note names both stacks
  REQUIRE(has_note(c, "encoder self-attention: bidirectional buckets and mask"));
  REQUIRE(posenc::to_string(c.scheme) == "relative_bias");
  // T5-11B keeps its inner width apart from d_model: 128 heads of d_kv 128 over d_model 1024;
  // an old config without max_distance takes transformers' 128.
  const auto big = posenc_test::parse_hf_config(R"({"model_type": "t5", "d_kv": 128, "d_model": 1024,
      "num_heads": 128, "relative_attention_num_buckets": 32})");
  REQUIRE(big.attention_head_dim == 128);
  REQUIRE(big.relative_attention_max_distance == 128);
  REQUIRE(has_note(big, "relative_attention_max_distance absent"));
  // MPNet: an encoder with T5 buckets and BERT's 1 / sqrt(d) scale.
  const auto mpnet = posenc_test::parse_hf_config(R"({"model_type": "mpnet", "hidden_size": 768,
      "num_attention_heads": 12, "relative_attention_num_buckets": 32})");
  REQUIRE(mpnet.scheme == posenc::HfPositionScheme::kRelativeBias);
  REQUIRE(mpnet.mask == MaskMode::kBidirectional);
  REQUIRE(mpnet.softmax_scale == 0.125);
  REQUIRE_THROWS_WITH(posenc_test::parse_hf_config(R"({"model_type": "t5", "d_model": 64, "num_heads": 4,
      "relative_attention_num_buckets": 2})"),
                      Contains("relative_attention_num_buckets\" = 2 must be in [4, 2^20]"));
  REQUIRE_THROWS_WITH(posenc_test::parse_hf_config(R"({"model_type": "t5", "d_model": 64, "num_heads": 4,
      "relative_attention_num_buckets": 32, "relative_attention_max_distance": 16})"),
                      Contains("relative_attention_max_distance\" = 16 must be in (16 (the exact buckets)"));
}

// SwitchTransformersAttention is T5's (copied from T5Attention): scores = q k^T, no scaling,
// although its model_type has no "t5" in it.
TEST_CASE("hf_config: Switch Transformers do not scale q.k, as T5", "[hf_config][relative_bias]") {
  const auto c = posenc_test::parse_hf_config(R"({"model_type": "switch_transformers", "d_model": 768,
      "d_kv": 64, "num_heads": 12, "relative_attention_num_buckets": 32,
      "relative_attention_max_distance": 128, "is_encoder_decoder": true})");
  REQUIRE(c.scheme == posenc::HfPositionScheme::kRelativeBias);
  CHECK(c.attention_head_dim == 64);
  CHECK(c.softmax_scale == 1.0);
}

// Pix2StructTextAttention, UdopAttention and Pop2PianoAttention are T5's attention (no q.k
// scaling, "Mesh TensorFlow initialization to avoid scaling before softmax").
TEST_CASE("hf_config: Pix2Struct, UDOP and Pop2Piano do not scale q.k, as T5",
          "[hf_config][relative_bias]") {
  for (const char* type : {"pix2struct", "udop", "pop2piano"}) {
    CAPTURE(type);
    const auto c = posenc_test::parse_hf_config(std::string(R"({"model_type": ")") + type +
                                           R"(", "d_model": 768, "d_kv": 64, "num_heads": 12,
        "relative_attention_num_buckets": 32, "relative_attention_max_distance": 128,
        "is_encoder_decoder": true})");
    REQUIRE(c.scheme == posenc::HfPositionScheme::kRelativeBias);
    CHECK(c.softmax_scale == 1.0);
  }
}

// d_kv is a head width: 0 is refused by name.
TEST_CASE("hf_config: a T5 d_kv of 0 is refused", "[hf_config][relative_bias]") {
  REQUIRE_THROWS_WITH(posenc_test::parse_hf_config(R"({"model_type": "t5", "d_model": 512, "d_kv": 0,
      "num_heads": 8, "relative_attention_num_buckets": 32})", "t.json"),
                      Contains("t.json: key \"d_kv\" = 0 must be in [1, "));
}
