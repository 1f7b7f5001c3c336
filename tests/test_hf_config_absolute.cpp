// Absolute-position models read from Hugging Face configs: which table (learned, sinusoidal,
// a patch grid), which sinusoid formula, which grid, which mask. Expected values come from
// transformers' modeling code, written out here by hand in long double (MarianSinusoidal-
// PositionalEmbedding._init_weight, fairseq's get_embedding as M2M-100 copies it, XLM's
// create_sinusoidal_embeddings, ViT-MAE's get_2d_sincos_pos_embed) and from published
// sequence lengths of real checkpoints (ViT-B/16: [1, 197, 768], the shape HF's ViT doc
// example prints; DINOv2 at 518 px: 37 x 37 + 1 = 1370 rows; CLIP ViT-B/32: 50;
// SigLIP so400m-patch14-384: 729; DeiT distilled: 198).

#include <catch2/catch.hpp>

#include <posenc/hf_config.hpp>
#include <posenc/reference/attention.hpp>
#include <posenc/sincos_grid.hpp>
#include <posenc/sinusoidal.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "support/config_notes.hpp"
#include "support/hf_config_loader.hpp"

using Catch::Matchers::Contains;
using posenc::HfAbsoluteKind;
using posenc::HfPositionScheme;
using posenc::MaskMode;
using posenc::SinusoidalLayout;
using posenc_test::has_note;

namespace {

// The table a loaded sinusoidal config describes, rows [first, first + n), built by posenc.
std::vector<double> posenc_rows(const posenc::HfModelConfig& c, Eigen::Index d,
                                std::int64_t first, Eigen::Index n) {
  std::vector<double> out(static_cast<std::size_t>(n * d));
  posenc::TensorView<double, 2> view(out.data(), n, d);
  posenc::sinusoidal_table<double>(view, *c.absolute->sinusoidal, first);
  return out;
}

// MarianSinusoidalPositionalEmbedding._init_weight: position_enc[p][j] =
// p / 10000^(2 (j // 2) / d); the first d / 2 columns are sin of the even j, the rest cos of
// the odd j.
long double marian(std::int64_t p, Eigen::Index j, Eigen::Index d) {
  const Eigen::Index half = d / 2;
  const Eigen::Index source = j < half ? 2 * j : 2 * (j - half) + 1;
  const long double angle =
      static_cast<long double>(p) /
      std::pow(10000.0L, 2.0L * static_cast<long double>(source / 2) / static_cast<long double>(d));
  return j < half ? std::sin(angle) : std::cos(angle);
}

// fairseq's get_embedding (M2M-100, NLLB-MoE, XGLM, Speech2Text, FSMT):
// emb_k = exp(-k ln 10000 / (d/2 - 1)), row p = [sin(p emb) | cos(p emb)].
long double fairseq(std::int64_t p, Eigen::Index j, Eigen::Index d) {
  const Eigen::Index half = d / 2;
  const Eigen::Index k = j < half ? j : j - half;
  const long double emb = std::exp(-static_cast<long double>(k) * std::log(10000.0L) /
                                   static_cast<long double>(half - 1));
  const long double angle = static_cast<long double>(p) * emb;
  return j < half ? std::sin(angle) : std::cos(angle);
}

// XLM's create_sinusoidal_embeddings (DistilBERT's sinusoidal_pos_embds): column j holds
// p / 10000^(2 (j // 2) / d), sin on even j, cos on odd j.
long double xlm(std::int64_t p, Eigen::Index j, Eigen::Index d) {
  const long double angle =
      static_cast<long double>(p) /
      std::pow(10000.0L, 2.0L * static_cast<long double>(j / 2) / static_cast<long double>(d));
  return j % 2 == 0 ? std::sin(angle) : std::cos(angle);
}

}  // namespace

TEST_CASE("hf_config: each sinusoidal family's table is its own formula, offset included",
          "[hf_config][absolute]") {
  struct Case {
    std::string json;
    long double (*formula)(std::int64_t, Eigen::Index, Eigen::Index);
    std::int64_t offset;
  };
  // d = 16: wide enough that the two [sin | cos] exponents (2i / d against i / (d/2 - 1))
  // differ by far more than the tolerance on every pair but the first.
  const std::vector<Case> cases = {
      {R"({"model_type": "marian", "d_model": 16, "encoder_attention_heads": 2})", marian, 0},
      {R"({"model_type": "pegasus", "d_model": 16, "encoder_attention_heads": 2})", marian, 0},
      {R"({"model_type": "m2m_100", "d_model": 16, "encoder_attention_heads": 2})", fairseq, 2},
      {R"({"model_type": "nllb-moe", "d_model": 16, "encoder_attention_heads": 2})", fairseq, 2},
      {R"({"model_type": "xglm", "d_model": 16, "attention_heads": 2})", fairseq, 2},
      {R"({"model_type": "speech_to_text", "d_model": 16, "encoder_attention_heads": 2})",
       fairseq, 2},
      {R"({"model_type": "fsmt", "d_model": 16, "encoder_attention_heads": 2})", fairseq, 2},
      {R"({"model_type": "distilbert", "dim": 16, "n_heads": 2, "sinusoidal_pos_embds": true})",
       xlm, 0},
      {R"({"model_type": "xlm", "emb_dim": 16, "n_heads": 2, "sinusoidal_embeddings": true})",
       xlm, 0},
  };
  constexpr Eigen::Index d = 16;
  for (const Case& k : cases) {
    CAPTURE(k.json);
    const auto c = posenc_test::parse_hf_config(k.json);
    REQUIRE(c.scheme == HfPositionScheme::kAbsolute);
    REQUIRE(c.absolute);
    REQUIRE(c.absolute->kind == HfAbsoluteKind::kSinusoidal);
    REQUIRE(c.absolute->sinusoidal);
    REQUIRE(c.absolute_position_offset == k.offset);
    // The width each class names its own way (d_model, dim, emb_dim), and the heads.
    REQUIRE(c.hidden_size == d);
    REQUIRE(c.num_attention_heads == 2);
    // Tokens 0 .. 40 of a sequence, at the rows the model reads: position + offset.
    const std::vector<double> rows = posenc_rows(c, d, c.absolute_position_offset, 41);
    for (std::int64_t t = 0; t <= 40; ++t) {
      for (Eigen::Index j = 0; j < d; ++j) {
        CAPTURE(t, j);
        const long double want = k.formula(t + k.offset, j, d);
        REQUIRE(std::abs(rows[static_cast<std::size_t>(t * d + j)] - static_cast<double>(want)) <
                1e-12);
      }
    }
  }
  // A check of the oracles, not of posenc: the two [sin | cos] formulas really are different
  // tables, so the loop above can tell a swapped layout (pair 1 at position 1 turns by
  // 10000^(-1/8) against 10000^(-1/7)).
  REQUIRE(std::abs(marian(1, 1, d) - fairseq(1, 1, d)) > 0.02L);
}

// openai/whisper-tiny's position keys. OpenAI's sinusoids(length, channels): increment
// ln(10000) / (channels / 2 - 1), inv_timescales exp(-increment i), [sin | cos] of t inv:
// fairseq's formula above, from position 0.
TEST_CASE("hf_config: Whisper's encoder sinusoids and decoder table, each with its length",
          "[hf_config][absolute]") {
  const auto c = posenc_test::parse_hf_config(R"({"model_type": "whisper", "d_model": 384,
      "encoder_attention_heads": 6, "decoder_attention_heads": 6, "encoder_layers": 4,
      "decoder_layers": 4, "max_source_positions": 1500, "max_target_positions": 448,
      "num_mel_bins": 80})");
  REQUIRE(c.absolute);
  CHECK(c.absolute->kind == HfAbsoluteKind::kLearned);  // the decoder's
  CHECK(c.max_position_embeddings == 448);
  CHECK(c.absolute->encoder_max_positions == 1500);
  REQUIRE(c.absolute->encoder_sinusoidal);
  constexpr Eigen::Index d = 384;
  std::vector<double> rows(1500 * d);
  posenc::TensorView<double, 2> view(rows.data(), 1500, d);
  posenc::sinusoidal_table<double>(view, *c.absolute->encoder_sinusoidal);
  for (const std::int64_t t : {0, 1, 2, 750, 1499}) {
    for (Eigen::Index j = 0; j < d; ++j) {
      CAPTURE(t, j);
      REQUIRE(std::abs(rows[static_cast<std::size_t>(t * d + j)] -
                       static_cast<double>(fairseq(t, j, d))) < 1e-12);
    }
  }
  // WhisperConfig has no max_position_embeddings: a converted config's key does not replace
  // the decoder's max_target_positions.
  const auto both = posenc_test::parse_hf_config(R"({"model_type": "whisper", "d_model": 384,
      "encoder_attention_heads": 6, "max_position_embeddings": 1500,
      "max_target_positions": 448})");
  CHECK(both.max_position_embeddings == 448);
  CHECK(has_note(both, "max_position_embeddings = 1500 ignored"));
  // Other encoder-decoder families have no second table; max_position_embeddings wins.
  const auto bart = posenc_test::parse_hf_config(R"({"model_type": "bart", "d_model": 1024,
      "encoder_attention_heads": 16, "max_position_embeddings": 1024,
      "max_target_positions": 512})");
  REQUIRE(bart.absolute);
  CHECK_FALSE(bart.absolute->encoder_sinusoidal);
  CHECK(bart.max_position_embeddings == 1024);
  CHECK_THROWS_WITH(posenc_test::parse_hf_config(R"({"model_type": "whisper", "d_model": 384,
                        "encoder_attention_heads": 6, "max_source_positions": 0})"),
                    Contains("\"max_source_positions\" = 0 must be in [1, 2^53]"));
}

TEST_CASE("hf_config: learned tables, their offsets and masks by family", "[hf_config][absolute]") {
  struct Case {
    std::string json;
    std::int64_t offset;
    MaskMode mask;
  };
  const std::vector<Case> cases = {
      // Decoder-only: causal.
      {R"({"model_type": "gpt2", "n_embd": 768, "n_head": 12})", 0, MaskMode::kCausal},
      {R"({"model_type": "opt", "hidden_size": 768, "num_attention_heads": 12})", 2,
       MaskMode::kCausal},
      {R"({"model_type": "clip_text_model", "hidden_size": 512, "num_attention_heads": 8})", 0,
       MaskMode::kCausal},
      // Encoders: bidirectional. SigLIP's text tower has no causal mask, unlike CLIP's.
      {R"({"model_type": "bert", "hidden_size": 768, "num_attention_heads": 12})", 0,
       MaskMode::kBidirectional},
      {R"({"model_type": "roberta", "hidden_size": 768, "num_attention_heads": 12})", 2,
       MaskMode::kBidirectional},
      {R"({"model_type": "siglip_text_model", "hidden_size": 768, "num_attention_heads": 12})",
       0, MaskMode::kBidirectional},
      {R"({"model_type": "xlm", "emb_dim": 1024, "n_heads": 8})", 0, MaskMode::kBidirectional},
      // BertConfig's is_decoder and XLM's causal make them decoders; ALBERT's mask ignores
      // is_decoder (a padding mask only).
      {R"({"model_type": "bert", "hidden_size": 768, "num_attention_heads": 12,
           "is_decoder": true})", 0, MaskMode::kCausal},
      {R"({"model_type": "albert", "hidden_size": 768, "num_attention_heads": 12,
           "is_decoder": true})", 0, MaskMode::kBidirectional},
      {R"({"model_type": "roberta", "hidden_size": 768, "num_attention_heads": 12,
           "is_decoder": true})", 2, MaskMode::kCausal},
      {R"({"model_type": "electra", "hidden_size": 256, "num_attention_heads": 4,
           "is_decoder": true})", 0, MaskMode::kCausal},
      {R"({"model_type": "distilbert", "dim": 768, "n_heads": 12, "is_decoder": true})", 0,
       MaskMode::kBidirectional},
      {R"({"model_type": "layoutlm", "hidden_size": 768, "num_attention_heads": 12,
           "is_decoder": true})", 0, MaskMode::kBidirectional},
      // DebertaConfig's defaults: position_biased_input, no relative_attention.
      {R"({"model_type": "deberta", "hidden_size": 768, "num_attention_heads": 12})", 0,
       MaskMode::kBidirectional},
      {R"({"model_type": "xlm", "emb_dim": 1024, "n_heads": 8, "causal": true})", 0,
       MaskMode::kCausal},
      // Encoder-decoder: the decoder's causal mask, both stacks named in a note.
      {R"({"model_type": "bart", "d_model": 1024, "encoder_attention_heads": 16})", 2,
       MaskMode::kCausal},
      {R"({"model_type": "whisper", "d_model": 384, "encoder_attention_heads": 6})", 0,
       MaskMode::kCausal},
  };
  for (const Case& k : cases) {
    CAPTURE(k.json);
    const auto c = posenc_test::parse_hf_config(k.json);
    REQUIRE(c.scheme == HfPositionScheme::kAbsolute);
    REQUIRE(c.absolute);
    CHECK(c.absolute->kind == HfAbsoluteKind::kLearned);
    CHECK_FALSE(c.absolute->sinusoidal);
    CHECK(c.absolute_position_offset == k.offset);
    CHECK(c.mask == k.mask);
    CHECK(posenc::hf_attention_params(c, 0).mask == k.mask);
  }
  const auto bart = posenc_test::parse_hf_config(
      R"({"model_type": "bart", "d_model": 1024, "encoder_attention_heads": 16})");
  CHECK(has_note(bart, "encoder self-attention bidirectional"));
  // BartConfig's attribute_map: num_attention_heads is encoder_attention_heads.
  CHECK(bart.num_attention_heads == 16);
  CHECK(bart.attention_head_dim == 64);
  // Heads of 768 / 12 = 64: the q.k width is reported with the scale.
  const auto bert = posenc_test::parse_hf_config(
      R"({"model_type": "bert", "hidden_size": 768, "num_attention_heads": 12})");
  CHECK(bert.attention_head_dim == 64);
  CHECK(bert.softmax_scale == 0.125);
}

// EleutherAI/gpt-neo-125m's keys. GPTNeoSelfAttention builds its mask as
// bias = tril(ones(n, n)); local layers: bias ^ tril(bias, -window_size), so query i sees key j
// iff j <= i and not j <= i - window_size.
TEST_CASE("hf_config: GPT-Neo's local layers see their last window_size keys",
          "[hf_config][absolute]") {
  const auto c = posenc_test::parse_hf_config(R"({"model_type": "gpt_neo", "hidden_size": 768,
      "num_heads": 12, "num_layers": 12, "max_position_embeddings": 2048, "window_size": 256,
      "attention_types": [[["global", "local"], 6]]})");
  REQUIRE(c.layer_types.size() == 12);
  for (Eigen::Index i = 0; i < 12; ++i) {
    CAPTURE(i);
    CHECK(posenc::hf_attention_params(c, i).sliding_window == (i % 2 == 1 ? 256 : 0));
    CHECK(posenc::hf_attention_params(c, i).mask == MaskMode::kCausal);
  }
  // The attention of a local layer, with window_size 3 over 8 tokens: its zero weights are
  // exactly HF's masked entries.
  const auto small = posenc_test::parse_hf_config(R"({"model_type": "gpt_neo", "hidden_size": 8,
      "num_heads": 1, "window_size": 3, "attention_layers": ["global", "local"]})");
  REQUIRE(small.num_hidden_layers == 2);
  constexpr Eigen::Index n = 8;
  std::vector<float> q(n * 8, 0.25f), k(n * 8, 0.5f), v(n * 8, 1.0f), o(n * 8);
  std::vector<double> w(n * n);
  posenc::reference::attention<float>(
      posenc::ConstTensorView<float, 4>(q.data(), 1, n, 1, 8),
      posenc::ConstTensorView<float, 4>(k.data(), 1, n, 1, 8),
      posenc::ConstTensorView<float, 4>(v.data(), 1, n, 1, 8),
      posenc::TensorView<float, 4>(o.data(), 1, n, 1, 8), posenc::hf_attention_params(small, 1),
      {}, posenc::TensorView<double, 4>(w.data(), 1, 1, n, n));
  for (Eigen::Index i = 0; i < n; ++i) {
    for (Eigen::Index j = 0; j < n; ++j) {
      CAPTURE(i, j);
      const bool hf_visible = j <= i && !(j <= i - 3);
      CHECK((w[static_cast<std::size_t>(i * n + j)] > 0.0) == hf_visible);
    }
  }
  // Layer counts that disagree, and values other than global / local, are refused by key.
  CHECK_THROWS_WITH(posenc_test::parse_hf_config(R"({"model_type": "gpt_neo", "hidden_size": 768,
                        "num_heads": 12, "num_layers": 12,
                        "attention_types": [[["global", "local"], 5]]})"),
                    Contains("\"attention_types\" gives 10 layers") &&
                        Contains("the config's layer count is 12"));
  CHECK_THROWS_WITH(posenc_test::parse_hf_config(R"({"model_type": "gpt_neo", "hidden_size": 768,
                        "num_heads": 12, "attention_layers": ["global", "windowed"]})"),
                    Contains("\"attention_layers[1]\" must be \"global\" or \"local\""));
  // An empty pattern repeated 2^16 times would loop without adding a layer: refused first.
  CHECK_THROWS_WITH(posenc_test::parse_hf_config(R"({"model_type": "gpt_neo", "hidden_size": 64,
                        "num_heads": 2, "attention_types": [[[], 65536], [[], 65536]]})"),
                    Contains("\"attention_types[0]\"") && Contains("must name at least one layer"));
  CHECK_THROWS_WITH(posenc_test::parse_hf_config(R"({"model_type": "gpt_neo", "hidden_size": 64,
                        "num_heads": 2, "attention_types": [[["local"], null]]})"),
                    Contains("\"attention_types[0][1]\" must be an integer, got null"));
  // The error names the key the layers came from.
  CHECK_THROWS_WITH(posenc_test::parse_hf_config(R"({"model_type": "gpt_neo", "hidden_size": 64,
                        "num_heads": 2, "num_layers": 3, "attention_layers": ["global"]})"),
                    Contains("\"attention_layers\" gives 1 layers"));
}

TEST_CASE("hf_config: position_embedding_type sinusoidal on an unknown family keeps the formula "
          "open", "[hf_config][absolute]") {
  const auto c = posenc_test::parse_hf_config(R"({"model_type": "my_encoder", "hidden_size": 64,
      "num_attention_heads": 4, "position_embedding_type": "sinusoidal"})");
  REQUIRE(c.scheme == HfPositionScheme::kAbsolute);
  REQUIRE(c.absolute);
  CHECK(c.absolute->kind == HfAbsoluteKind::kSinusoidal);
  CHECK_FALSE(c.absolute->sinusoidal);
  CHECK(has_note(c, "is the model code's"));
  // "absolute" is HF's name for a learned nn.Embedding.
  const auto b = posenc_test::parse_hf_config(R"({"model_type": "my_encoder", "hidden_size": 64,
      "num_attention_heads": 4, "position_embedding_type": "absolute"})");
  REQUIRE(b.absolute);
  CHECK(b.absolute->kind == HfAbsoluteKind::kLearned);
}

TEST_CASE("hf_config: vision encoders' patch grids match the checkpoints' position rows",
          "[hf_config][absolute][vision]") {
  struct Case {
    std::string json;
    HfAbsoluteKind kind;
    Eigen::Index side_h, side_w, leading, rows;  // rows: the published table length
    Eigen::Index width;
  };
  const std::vector<Case> cases = {
      // google/vit-base-patch16-224: [1, 197, 768].
      {R"({"model_type": "vit", "hidden_size": 768, "num_attention_heads": 12,
           "image_size": 224, "patch_size": 16})",
       HfAbsoluteKind::kLearnedGrid, 14, 14, 1, 197, 768},
      // facebook/deit-base-distilled-patch16-224: class and distillation tokens.
      {R"({"model_type": "deit", "hidden_size": 768, "num_attention_heads": 12,
           "image_size": 224, "patch_size": 16})",
       HfAbsoluteKind::kLearnedGrid, 14, 14, 2, 198, 768},
      // facebook/dinov2-base: 518 px, patch 14.
      {R"({"model_type": "dinov2", "hidden_size": 768, "num_attention_heads": 12,
           "image_size": 518, "patch_size": 14})",
       HfAbsoluteKind::kLearnedGrid, 37, 37, 1, 1370, 768},
      // openai/clip-vit-base-patch32's vision tower: 50 positions.
      {R"({"model_type": "clip_vision_model", "hidden_size": 768, "num_attention_heads": 12,
           "image_size": 224, "patch_size": 32})",
       HfAbsoluteKind::kLearnedGrid, 7, 7, 1, 50, 768},
      // google/siglip-so400m-patch14-384's vision tower: 729, no class token.
      {R"({"model_type": "siglip_vision_model", "hidden_size": 1152, "num_attention_heads": 16,
           "image_size": 384, "patch_size": 14})",
       HfAbsoluteKind::kLearnedGrid, 27, 27, 0, 729, 1152},
      // facebook/ijepa_vith14_1k: patches only.
      {R"({"model_type": "ijepa", "hidden_size": 1280, "num_attention_heads": 16,
           "image_size": 224, "patch_size": 14})",
       HfAbsoluteKind::kLearnedGrid, 16, 16, 0, 256, 1280},
      // facebook/vit-mae-base: the fixed sin-cos table, 197 rows.
      {R"({"model_type": "vit_mae", "hidden_size": 768, "num_attention_heads": 12,
           "image_size": 224, "patch_size": 16, "decoder_hidden_size": 512})",
       HfAbsoluteKind::kSincosGrid, 14, 14, 1, 197, 768},
      // BEiT with use_absolute_position_embeddings (BeitEmbeddings: num_patches + 1 rows).
      {R"({"model_type": "data2vec-vision", "hidden_size": 768, "num_attention_heads": 12,
           "image_size": 224, "patch_size": 16, "use_absolute_position_embeddings": true,
           "use_relative_position_bias": false})",
       HfAbsoluteKind::kLearnedGrid, 14, 14, 1, 197, 768},
      // [height, width] image and patch sizes (ViTPatchEmbeddings reads either form).
      {R"({"model_type": "vit", "hidden_size": 64, "num_attention_heads": 4,
           "image_size": [96, 160], "patch_size": [16, 32]})",
       HfAbsoluteKind::kLearnedGrid, 6, 5, 1, 31, 64},
  };
  for (const Case& k : cases) {
    CAPTURE(k.json);
    const auto c = posenc_test::parse_hf_config(k.json);
    REQUIRE(c.scheme == HfPositionScheme::kAbsolute);
    REQUIRE(c.absolute);
    CHECK(c.absolute->kind == k.kind);
    CHECK(c.absolute->grid_h == k.side_h);
    CHECK(c.absolute->grid_w == k.side_w);
    CHECK(c.absolute->leading_rows == k.leading);
    CHECK(c.absolute->leading_rows + c.absolute->grid_h * c.absolute->grid_w == k.rows);
    CHECK(c.absolute->embed_dim == k.width);
    CHECK(c.mask == MaskMode::kBidirectional);
  }
  // Without image_size / patch_size the grid's size is unknown, and said so.
  const auto bare = posenc_test::parse_hf_config(
      R"({"model_type": "vit", "hidden_size": 768, "num_attention_heads": 12})");
  REQUIRE(bare.absolute);
  CHECK(bare.absolute->kind == HfAbsoluteKind::kLearnedGrid);
  CHECK(bare.absolute->grid_h == 0);
  CHECK(has_note(bare, "grid's size is not known"));
  // A ViT config was read as RoPE with theta 10000 before.
  CHECK(bare.scheme == HfPositionScheme::kAbsolute);
}

TEST_CASE("hf_config: ViT-MAE's encoder and decoder tables are get_2d_sincos_pos_embed's",
          "[hf_config][absolute][vision]") {
  // 64 px, patch 16: a 4 x 4 grid; encoder width 16, decoder width 8.
  const auto c = posenc_test::parse_hf_config(R"({"model_type": "vit_mae", "hidden_size": 16,
      "num_attention_heads": 2, "image_size": 64, "patch_size": 16, "decoder_hidden_size": 8})");
  REQUIRE(c.absolute);
  REQUIRE(c.absolute->kind == HfAbsoluteKind::kSincosGrid);
  REQUIRE(c.absolute->decoder_embed_dim == 8);
  const auto& a = *c.absolute;
  REQUIRE(a.embed_dim == 16);
  REQUIRE(a.grid_h == 4);
  REQUIRE(a.grid_w == 4);
  REQUIRE(a.leading_rows == 1);
  for (const Eigen::Index width : {a.embed_dim, a.decoder_embed_dim}) {
    CAPTURE(width);
    const posenc::SincosGridParams p =
        posenc::sincos_grid_mae(width, a.grid_h, a.grid_w, a.leading_rows == 1);
    const posenc::SincosGridPlan plan(p);
    REQUIRE(plan.tokens() == 17);
    std::vector<double> table(static_cast<std::size_t>(17 * width));
    posenc::TensorView<double, 2> view(table.data(), 17, width);
    posenc::sincos_grid_table<double>(view, plan);
    // get_2d_sincos_pos_embed(width, 4, add_cls_token=True): a zero row, then token
    // (r, c) = [1d(width / 2, c) | 1d(width / 2, r)] (np.meshgrid(grid_w, grid_h): the first
    // half encodes the column), 1d(E, x) = [sin(x w_k) | cos(x w_k)], w_k = 10000^(-k/(E/2)).
    const Eigen::Index e = width / 2, m = e / 2;
    for (Eigen::Index j = 0; j < width; ++j) CHECK(table[static_cast<std::size_t>(j)] == 0.0);
    for (Eigen::Index r = 0; r < 4; ++r) {
      for (Eigen::Index col = 0; col < 4; ++col) {
        for (Eigen::Index j = 0; j < width; ++j) {
          CAPTURE(r, col, j);
          const Eigen::Index block = j / e, within = j % e, k = within % m;
          const long double x = static_cast<long double>(block == 0 ? col : r);
          const long double w =
              std::pow(10000.0L, -static_cast<long double>(k) / static_cast<long double>(m));
          const long double want = within < m ? std::sin(x * w) : std::cos(x * w);
          const double got = table[static_cast<std::size_t>((1 + r * 4 + col) * width + j)];
          REQUIRE(std::abs(got - static_cast<double>(want)) < 1e-14);
        }
      }
    }
  }
  // decoder_hidden_size absent: ViTMAEConfig's default 512.
  const auto d = posenc_test::parse_hf_config(R"({"model_type": "vit_mae", "hidden_size": 768,
      "num_attention_heads": 12, "image_size": 224, "patch_size": 16})");
  REQUIRE(d.absolute);
  CHECK(d.absolute->decoder_embed_dim == 512);
  CHECK(has_note(d, "decoder_hidden_size absent"));
  // hidden_size and heads absent: ViTMAEConfig's 768 and 12.
  const auto e = posenc_test::parse_hf_config(
      R"({"model_type": "vit_mae", "image_size": 224, "patch_size": 16})");
  REQUIRE(e.absolute);
  CHECK(e.absolute->embed_dim == 768);
  CHECK(e.num_attention_heads == 12);
  CHECK(has_note(e, "hidden_size absent"));
}

TEST_CASE("hf_config: BEiT's relative position bias tables and their window",
          "[hf_config][relative_bias_2d]") {
  struct Case {
    const char* json;
    Eigen::Index window, rows;  // rows: the checkpoint's relative_position_bias_table rows
    bool shared, per_layer, absolute;
  };
  const std::vector<Case> cases = {
      // microsoft/beit-base-patch16-224: a [732, 12] table in every layer (27 x 27 + 3).
      {R"({"model_type": "beit", "hidden_size": 768, "num_attention_heads": 12,
           "image_size": 224, "patch_size": 16, "use_relative_position_bias": true,
           "use_shared_relative_position_bias": false,
           "use_absolute_position_embeddings": false})",
       14, 732, false, true, false},
      // microsoft/beit-base-patch16-224-pt22k: one shared table in the encoder.
      {R"({"model_type": "beit", "hidden_size": 768, "num_attention_heads": 12,
           "image_size": 224, "patch_size": 16, "use_relative_position_bias": false,
           "use_shared_relative_position_bias": true})",
       14, 732, true, false, false},
      // microsoft/beit-large-patch16-512: 32 x 32 patches, 63 x 63 + 3 = 3972 rows.
      {R"({"model_type": "beit", "hidden_size": 1024, "num_attention_heads": 16,
           "image_size": 512, "patch_size": 16, "use_relative_position_bias": true})",
       32, 3972, false, true, false},
      // data2vec-vision with both tables and the learned grid (HF adds all three).
      {R"({"model_type": "data2vec-vision", "hidden_size": 768, "num_attention_heads": 12,
           "image_size": 224, "patch_size": 16, "use_relative_position_bias": true,
           "use_shared_relative_position_bias": true,
           "use_absolute_position_embeddings": true})",
       14, 732, true, true, true},
      // No sizes: BeitConfig's 224 / 16.
      {R"({"model_type": "beit", "hidden_size": 768, "num_attention_heads": 12,
           "use_shared_relative_position_bias": true})",
       14, 732, true, false, false},
  };
  for (const Case& k : cases) {
    CAPTURE(k.json);
    const auto c = posenc_test::parse_hf_config(k.json);
    REQUIRE(c.scheme == HfPositionScheme::kRelativeBias2d);
    CHECK(posenc::to_string(c.scheme) == "relative_bias_2d");
    REQUIRE(c.relative_bias_2d);
    const auto& rb = *c.relative_bias_2d;
    CHECK(rb.window.window_h == k.window);
    CHECK(rb.window.window_w == k.window);
    CHECK(rb.window.class_token);
    CHECK(posenc::relative_bias_2d_table_rows(rb.window) == k.rows);
    CHECK(posenc::relative_bias_2d_tokens(rb.window) == k.window * k.window + 1);
    CHECK(rb.shared_table == k.shared);
    CHECK(rb.per_layer_tables == k.per_layer);
    CHECK(c.mask == MaskMode::kBidirectional);
    CHECK(c.absolute.has_value() == k.absolute);
    if (k.absolute) {
      CHECK(c.absolute->kind == HfAbsoluteKind::kLearnedGrid);
      CHECK(c.absolute->grid_h * c.absolute->grid_w + c.absolute->leading_rows ==
            posenc::relative_bias_2d_tokens(rb.window));
    }
    // The q.k scale of a 64-wide head, bidirectional in every layer.
    const auto p = posenc::hf_attention_params(c, 0);
    CHECK(p.mask == MaskMode::kBidirectional);
    REQUIRE(p.scale);
    CHECK(*p.scale == Approx(1.0 / 8.0).epsilon(1e-15));
    CHECK(has_note(c, "2-D relative position bias"));
  }
  CHECK(has_note(posenc_test::parse_hf_config(cases.back().json),
                 "image_size absent: BeitConfig's default 224"));
  // The learned grid without sizes takes the same defaults as the window.
  const auto both = posenc_test::parse_hf_config(R"({"model_type": "beit", "hidden_size": 768,
      "num_attention_heads": 12, "use_relative_position_bias": true,
      "use_absolute_position_embeddings": true})");
  REQUIRE(both.absolute);
  CHECK(both.absolute->grid_h == 14);
  CHECK(both.absolute->grid_w == 14);
  CHECK_FALSE(has_note(both, "the grid's size is not known"));
  // A non-square window (HF resamples the table on every forward then): read, with a note.
  const auto wide = posenc_test::parse_hf_config(R"({"model_type": "beit", "hidden_size": 768,
      "num_attention_heads": 12, "image_size": [224, 320], "patch_size": 16,
      "use_relative_position_bias": true})");
  REQUIRE(wide.relative_bias_2d);
  CHECK(wide.relative_bias_2d->window.window_h == 14);
  CHECK(wide.relative_bias_2d->window.window_w == 20);
  CHECK(has_note(wide, "non-square window"));
}

TEST_CASE("hf_config: bad vision geometry and unsupported relative schemes are refused by name",
          "[hf_config][absolute][errors]") {
  using posenc_test::parse_hf_config;
  const std::string vit =
      R"({"model_type": "vit", "hidden_size": 768, "num_attention_heads": 12, )";
  const std::string mae =
      R"({"model_type": "vit_mae", "hidden_size": 768, "num_attention_heads": 12, )";
  CHECK_THROWS_WITH(parse_hf_config(vit + R"("image_size": 224, "patch_size": 0})"),
                    Contains("\"patch_size\" = 0 must be in [1, "));
  CHECK_THROWS_WITH(parse_hf_config(vit + R"("image_size": 224, "patch_size": 256})"),
                    Contains("\"patch_size\" is larger than image_size"));
  CHECK_THROWS_WITH(parse_hf_config(vit + R"("image_size": [224], "patch_size": 16})"),
                    Contains("\"image_size\" must be one integer or [height, width]"));
  CHECK_THROWS_WITH(parse_hf_config(vit + R"("image_size": [224, "x"], "patch_size": 16})"),
                    Contains("\"image_size[1]\" must be an integer"));
  CHECK_THROWS_WITH(parse_hf_config(mae + R"("image_size": [224, 448], "patch_size": 16})"),
                    Contains("14 x 28 patch grid") && Contains("square table"));
  CHECK_THROWS_WITH(parse_hf_config(mae + R"("image_size": 224, "patch_size": 16,
                        "decoder_hidden_size": 510})"),
                    Contains("\"decoder_hidden_size\" = 510 must be a positive multiple of 4"));
  CHECK_THROWS_WITH(parse_hf_config(R"({"model_type": "vit_mae", "hidden_size": 770,
                        "num_attention_heads": 10, "image_size": 224, "patch_size": 16})"),
                    Contains("\"hidden_size\" = 770 must be a multiple of 4"));
  // BEiT / data2vec-vision: BeitConfig's flags, all false by default.
  const std::string beit = R"({"model_type": "beit", "hidden_size": 768,
      "num_attention_heads": 12, "image_size": 224, "patch_size": 16, )";
  CHECK_THROWS_WITH(parse_hf_config(beit + R"("use_relative_position_bias": true,
                        "patch_size": 300})"),
                    Contains("\"patch_size\" gives a 0 x 0 patch window"));
  CHECK_THROWS_WITH(parse_hf_config(beit + R"("use_mask_token": false})"),
                    Contains("\"use_absolute_position_embeddings\" is false or absent"));
  // A null inside a list is an error, not "unset".
  CHECK_THROWS_WITH(parse_hf_config(vit + R"("image_size": [224, null], "patch_size": 16})"),
                    Contains("\"image_size[1]\" must be an integer, got null"));
  // More than 2^40 patches.
  CHECK_THROWS_WITH(parse_hf_config(vit + R"("image_size": 1073741824, "patch_size": 1})"),
                    Contains("more than 2^40 patches"));
  // A width the family's sinusoids cannot use: fairseq divides by d/2 - 1, Marian needs an
  // even width.
  CHECK_THROWS_WITH(parse_hf_config(R"({"model_type": "m2m_100", "d_model": 2,
                        "encoder_attention_heads": 1})"),
                    Contains("\"d_model\" = 2 cannot carry m2m_100's sinusoids"));
  CHECK_THROWS_WITH(parse_hf_config(R"({"model_type": "marian", "d_model": 15,
                        "encoder_attention_heads": 1})"),
                    Contains("\"d_model\" = 15 cannot carry marian's sinusoids"));
  // DeBERTa: relative_attention (every released checkpoint), or no position at all.
  CHECK_THROWS_WITH(parse_hf_config(R"({"model_type": "deberta-v2", "hidden_size": 768,
                        "num_attention_heads": 12, "relative_attention": true})"),
                    Contains("\"relative_attention\" = true") && Contains("not a posenc scheme"));
  CHECK_THROWS_WITH(parse_hf_config(R"({"model_type": "deberta", "hidden_size": 768,
                        "num_attention_heads": 12, "position_biased_input": false})"),
                    Contains("\"position_biased_input\" = false"));
  // Relative schemes whose configs name no position key were read as RoPE, theta 10000.
  for (const char* family : {"swin2sr", "xlnet", "transfo-xl"}) {
    CAPTURE(family);
    CHECK_THROWS_WITH(parse_hf_config(std::string(R"({"model_type": ")") + family +
                                      R"(", "hidden_size": 768, "num_attention_heads": 12})"),
                      Contains(std::string("\"model_type\" = \"") + family + "\"") &&
                          Contains("not a posenc scheme"));
  }
  // A config that names a rotary key keeps it, whatever its model_type (as for BERT).
  CHECK(parse_hf_config(R"({"model_type": "swin", "hidden_size": 768, "num_attention_heads": 12,
            "rope_theta": 10000})").scheme == HfPositionScheme::kRope);
}
