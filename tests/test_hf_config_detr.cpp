// Detection transformers' configs: DETR and its family (sine or learned feature-map embeddings)
// and RT-DETR / D-FINE (a fixed sin-cos table). Expected values: the config classes' defaults
// and the recipes of the modeling files (DeformableDetrSinePositionEmbedding subtracts 0.5;
// DAB-DETR's temperature_height / temperature_width; Grounding DINO's
// positional_embedding_temperature 20), and, end to end, the embedding of a loaded config
// against closed forms.

#include <catch2/catch.hpp>

#include <posenc/hf_config.hpp>
#include <posenc/sincos_grid.hpp>
#include <posenc/sine_embedding_2d.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "support/config_notes.hpp"
#include "support/config_refusal.hpp"
#include "support/hf_config_loader.hpp"

using Catch::Matchers::Contains;
using Catch::Matchers::WithinAbs;
using posenc::HfFeatureMapKind;
using posenc::HfPositionScheme;
using posenc_test::parse_hf_config;
using posenc_test::has_note;

TEST_CASE("hf_config: DETR's sine embedding, its heads and layers", "[hf_config][detr]") {
  // facebook/detr-resnet-50's keys.
  const auto c = parse_hf_config(R"({"model_type": "detr", "d_model": 256,
      "encoder_attention_heads": 8, "encoder_layers": 6, "decoder_attention_heads": 8,
      "decoder_layers": 6, "position_embedding_type": "sine", "num_queries": 100,
      "backbone": "resnet50", "use_timm_backbone": true})");
  REQUIRE(c.scheme == HfPositionScheme::kFeatureMap);
  CHECK(posenc::to_string(c.scheme) == "feature_map");
  REQUIRE(c.feature_map);
  const auto& fm = *c.feature_map;
  CHECK(fm.kind == HfFeatureMapKind::kSine);
  CHECK(posenc::to_string(fm.kind) == "sine");
  CHECK(fm.embed_dim == 256);
  CHECK(fm.sine.num_pos_feats == 128);  // d_model / 2, as build_position_encoding's n_steps
  CHECK(fm.sine.temperature_height == 10000.0);
  CHECK(fm.sine.temperature_width == 10000.0);
  CHECK(fm.sine.offset == 0.0);
  CHECK(fm.sine.normalize);
  CHECK(fm.sine.order == posenc::SineAxisOrder::kYX);
  CHECK(c.num_attention_heads == 8);
  CHECK(c.num_hidden_layers == 6);
  CHECK(c.attention_head_dim == 32);
  CHECK(c.softmax_scale == 1.0 / std::sqrt(32.0));
  CHECK(c.mask == posenc::MaskMode::kBidirectional);
  CHECK(has_note(c, "added to the queries and keys of every encoder layer"));
  // Conditional DETR and Table Transformer share the recipe.
  for (const char* type : {"conditional_detr", "table-transformer"}) {
    const auto t = parse_hf_config(std::string(R"({"model_type": ")") + type + R"(",
        "d_model": 256, "encoder_attention_heads": 8, "encoder_layers": 6})");
    CAPTURE(type);
    REQUIRE(t.feature_map);
    CHECK(t.feature_map->kind == HfFeatureMapKind::kSine);
    CHECK(t.feature_map->sine.offset == 0.0);
    CHECK(has_note(t, "position_embedding_type absent"));
  }
}

TEST_CASE("hf_config: the DETR family's recipes", "[hf_config][detr]") {
  // Deformable DETR and DETA subtract 0.5 from the counts; their encoder samples points.
  for (const char* type : {"deformable_detr", "deta"}) {
    const auto d = parse_hf_config(std::string(R"({"model_type": ")") + type + R"(",
        "d_model": 256, "encoder_attention_heads": 8, "encoder_layers": 6,
        "position_embedding_type": "sine", "num_feature_levels": 4})");
    CAPTURE(type);
    REQUIRE(d.feature_map);
    CHECK(d.feature_map->sine.offset == 0.5);
    CHECK(d.feature_map->sine.temperature_height == 10000.0);
    CHECK(has_note(d, "deformable attention"));
    CHECK(has_note(d, "counts less 0.5"));
  }
  // DAB-DETR: hidden_size, and a temperature per axis (class defaults 20 / 20).
  const auto dab = parse_hf_config(R"({"model_type": "dab-detr", "hidden_size": 256,
      "encoder_attention_heads": 8, "encoder_layers": 6, "temperature_height": 20,
      "temperature_width": 10, "sine_position_embedding_scale": null})");
  REQUIRE(dab.feature_map);
  CHECK(dab.feature_map->sine.temperature_height == 20.0);
  CHECK(dab.feature_map->sine.temperature_width == 10.0);
  CHECK(dab.feature_map->sine.scale == Approx(2.0 * M_PI).epsilon(1e-15));
  CHECK(dab.feature_map->sine.num_pos_feats == 128);
  CHECK(has_note(dab, "temperature 20 (height) / 10 (width)"));
  const auto dab_defaults = parse_hf_config(R"({"model_type": "dab-detr"})");
  CHECK(dab_defaults.feature_map->sine.temperature_width == 20.0);
  CHECK(has_note(dab_defaults, "temperature_height absent: DabDetrConfig's default 20"));
  CHECK(has_note(dab_defaults, "hidden_size absent: DabDetrConfig's default 256"));
  // Grounding DINO: positional_embedding_temperature (20 by default), no offset.
  for (const char* type : {"grounding-dino", "mm-grounding-dino"}) {
    const auto g = parse_hf_config(std::string(R"({"model_type": ")") + type + R"(",
        "d_model": 256, "encoder_attention_heads": 8, "encoder_layers": 6,
        "positional_embedding_temperature": 20, "position_embedding_type": "sine",
        "backbone_config": {"model_type": "swin", "embed_dim": 96}})");
    CAPTURE(type);
    REQUIRE(g.feature_map);
    CHECK(g.feature_map->sine.temperature_height == 20.0);
    CHECK(g.feature_map->sine.temperature_width == 20.0);
    CHECK(g.feature_map->sine.offset == 0.0);
  }
  // position_embedding_type "learned": 50-row tables, column first.
  const auto learned = parse_hf_config(R"({"model_type": "detr", "d_model": 128,
      "encoder_attention_heads": 4, "encoder_layers": 2, "position_embedding_type": "learned"})");
  REQUIRE(learned.feature_map);
  CHECK(learned.feature_map->kind == HfFeatureMapKind::kLearned);
  CHECK(learned.feature_map->learned_rows == 50);
  CHECK(learned.feature_map->sine.num_pos_feats == 64);
  CHECK(learned.feature_map->sine.order == posenc::SineAxisOrder::kXY);
}

TEST_CASE("hf_config: RT-DETR and D-FINE's fixed table on the encoded levels",
          "[hf_config][detr]") {
  // PekingU/rtdetr_r50vd's keys.
  const auto c = parse_hf_config(R"({"model_type": "rt_detr", "d_model": 256,
      "encoder_hidden_dim": 256, "encoder_attention_heads": 8, "encoder_layers": 1,
      "positional_encoding_temperature": 10000, "encode_proj_layers": [2], "eval_size": null})");
  REQUIRE(c.feature_map);
  const auto& fm = *c.feature_map;
  CHECK(fm.kind == HfFeatureMapKind::kSincosGrid);
  CHECK(fm.embed_dim == 256);
  CHECK(fm.temperature == 10000.0);
  CHECK(fm.levels == std::vector<Eigen::Index>{2});
  CHECK(c.num_hidden_layers == 1);
  CHECK(c.attention_head_dim == 32);
  CHECK_FALSE(has_note(c, "eval_size is set"));
  // D-FINE-N: a narrower encoder on level 1; eval_size set (HF then passes no embedding).
  const auto n = parse_hf_config(R"({"model_type": "d_fine", "encoder_hidden_dim": 128,
      "encoder_attention_heads": 8, "encode_proj_layers": [1], "eval_size": [640, 640]})");
  REQUIRE(n.feature_map);
  CHECK(n.feature_map->embed_dim == 128);
  CHECK(n.feature_map->levels == std::vector<Eigen::Index>{1});
  CHECK(n.num_hidden_layers == 1);  // DFineConfig's default encoder_layers
  CHECK(has_note(n, "encoder_layers absent: DFineConfig's default 1"));
  CHECK(has_note(n, "eval_size is set"));
  const auto v2 = parse_hf_config(R"({"model_type": "rt_detr_v2"})");
  REQUIRE(v2.feature_map);
  CHECK(v2.feature_map->levels == std::vector<Eigen::Index>{2});
  CHECK(has_note(v2, "encode_proj_layers absent: RTDetrV2Config's default [2]"));
}

TEST_CASE("hf_config: a loaded DETR recipe builds the embedding", "[hf_config][detr]") {
  // Deformable DETR with d_model 4 (F = 2) on an unpadded 1 x 2 map: y = 0.5 / (1 + 1e-6) 2 pi
  // (sin ~ 3.14e-6, cos ~ -1), x of pixel 1 = 1.5 / (2 + 1e-6) 2 pi = 3 pi / 2 - e with
  // e = 1.5 pi 1e-6 / (2 + 1e-6): sin = -cos e ~ -1, cos = -sin e.
  const auto c = parse_hf_config(R"({"model_type": "deformable_detr", "d_model": 4,
      "encoder_attention_heads": 1, "encoder_layers": 1})");
  REQUIRE(c.feature_map);
  std::vector<double> out(2 * 4);
  posenc::sine_embedding_2d<double>(posenc::TensorView<double, 3>(out.data(), 1, 2, 4),
                                    c.feature_map->sine);
  CHECK_THAT(out[0], WithinAbs(3.1415895e-6, 1e-12));
  CHECK_THAT(out[1], WithinAbs(-1.0, 1e-11));
  CHECK_THAT(out[4 + 2], WithinAbs(-1.0, 1e-11));
  CHECK_THAT(out[4 + 3], WithinAbs(-std::sin(1.5 * M_PI * 1e-6 / (2.0 + 1e-6)), 1e-15));
  // RT-DETR's table from the loaded keys: token 1 of a 2 x 2 map is row 0, column 1.
  const auto rt = parse_hf_config(R"({"model_type": "rt_detr", "encoder_hidden_dim": 8})");
  const posenc::SincosGridPlan plan(
      posenc::sincos_grid_rt_detr(rt.feature_map->embed_dim, 2, 2, rt.feature_map->temperature));
  std::vector<double> table(4 * 8);
  posenc::sincos_grid_table<double>(posenc::TensorView<double, 2>(table.data(), 4, 8), plan);
  CHECK(table[8 + 0] == 0.0);                                      // sin(row 0)
  CHECK_THAT(table[8 + 4], WithinAbs(0.8414709848078965, 1e-15));  // sin(column 1)
}

TEST_CASE("hf_config: bad DETR-family keys throw naming the key", "[hf_config][detr][errors]") {
  const auto fails = posenc_test::check_refused;
  fails(R"({"model_type": "detr", "position_embedding_type": "rope"})",
        "\"position_embedding_type\" = \"rope\" is neither \"sine\" nor \"learned\"");
  fails(R"({"model_type": "detr", "d_model": 256, "encoder_attention_heads": 3})",
        "\"encoder_attention_heads\" = 3 must divide d_model = 256");
  fails(R"({"model_type": "detr", "d_model": 6, "encoder_attention_heads": 1})",
        "\"d_model\" = 6 must be a multiple of 4");
  fails(R"({"model_type": "detr", "d_model": 5, "encoder_attention_heads": 1,
            "position_embedding_type": "learned"})",
        "\"d_model\" = 5 must be even");
  // The learned tables need only an even width: 2 x 3 channels.
  const auto narrow = parse_hf_config(R"({"model_type": "detr", "d_model": 6,
      "encoder_attention_heads": 1, "position_embedding_type": "learned"})");
  CHECK(narrow.feature_map->sine.num_pos_feats == 3);
  fails(R"({"model_type": "dab-detr", "temperature_width": 0})",
        "\"temperature_width\" = 0 must be > 0");
  fails(R"({"model_type": "rt_detr", "encode_proj_layers": []})",
        "\"encode_proj_layers\" must be a list of 1 to 64 backbone levels");
  fails(R"({"model_type": "rt_detr", "encode_proj_layers": [-1]})",
        "\"encode_proj_layers[0]\" = -1 must be a level");
  fails(R"({"model_type": "grounding-dino", "d_model": 0})", "\"d_model\" = 0 must be in [1, ");
  fails(R"({"model_type": "detr", "d_model": 4194304, "encoder_attention_heads": 1})",
        "embedding posenc rejects: posenc::SineEmbedding2dPlan: num_pos_feats = 2097152");
  // A rotary key makes any family RoPE, DETR's too.
  CHECK(parse_hf_config(R"({"model_type": "detr", "hidden_size": 256, "num_attention_heads": 8,
            "rope_theta": 10000})")
            .scheme == HfPositionScheme::kRope);
}
