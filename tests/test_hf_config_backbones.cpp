// Vision models whose attention is a backbone's (DPT, UperNet, Mask2Former, Depth Anything,
// ZoeDepth: backbone_config), DPT's own ViT, VideoMAE's fixed sinusoids, and the families that
// must be refused rather than read as RoPE. Expected values: published sequence lengths (HF's
// DPT doc example prints [1, 577, 1024] for Intel/dpt-large; Depth Anything's DINOv2 at 518 px:
// 37 x 37 + 1 = 1370), table sizes worked from the modeling code (BEiT-L/16 at 384 px: 47 x 47
// + 3 = 2212 rows), and get_sinusoid_encoding_table written out in long double.

#include <catch2/catch.hpp>

#include <posenc/decomposed_rel_pos.hpp>
#include <posenc/hf_config.hpp>
#include <posenc/sinusoidal.hpp>
#include <posenc/swin_window.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "support/config_notes.hpp"
#include "support/config_refusal.hpp"
#include "support/hf_config_loader.hpp"

using Catch::Matchers::Contains;
using posenc::HfAbsoluteKind;
using posenc::HfPositionScheme;
using posenc_test::has_note;

TEST_CASE("hf_config: DPT's own ViT, plain and hybrid", "[hf_config][backbone]") {
  // Intel/dpt-large: 384 / 16 = 24 patches a side after the class token, 577 rows.
  for (const char* json : {R"({"model_type": "dpt", "hidden_size": 1024, "num_attention_heads": 16,
            "num_hidden_layers": 24, "image_size": 384, "patch_size": 16,
            "backbone_config": null, "is_hybrid": false})",
                           // Intel/dpt-hybrid-midas: a BiT stem, then the same ViT grid.
                           R"({"model_type": "dpt", "hidden_size": 768, "num_attention_heads": 12,
            "image_size": 384, "patch_size": 16, "is_hybrid": true,
            "backbone_config": {"model_type": "bit", "layer_type": "bottleneck"}})"}) {
    CAPTURE(json);
    const auto c = posenc_test::parse_hf_config(json);
    REQUIRE(c.scheme == HfPositionScheme::kAbsolute);
    REQUIRE(c.absolute);
    CHECK(c.absolute->kind == HfAbsoluteKind::kLearnedGrid);
    CHECK(c.absolute->grid_h * c.absolute->grid_w + c.absolute->leading_rows == 577);
    CHECK(c.mask == posenc::MaskMode::kBidirectional);
    CHECK_FALSE(has_note(c, "backbone_config"));
  }
}

TEST_CASE("hf_config: a wrapper's backbone_config is read as the model", "[hf_config][backbone]") {
  // Intel/dpt-beit-large-384: BEiT-L/16, a table of 47 x 47 + 3 rows per layer.
  const auto beit = posenc_test::parse_hf_config(R"({"model_type": "dpt", "hidden_size": 768,
      "num_attention_heads": 12, "is_hybrid": false, "backbone_config": {"model_type": "beit",
      "hidden_size": 1024, "num_attention_heads": 16, "num_hidden_layers": 24,
      "image_size": 384, "patch_size": 16, "use_relative_position_bias": true}})");
  CHECK(beit.model_type == "beit");
  REQUIRE(beit.scheme == HfPositionScheme::kRelativeBias2d);
  CHECK(posenc::relative_bias_2d_table_rows(beit.relative_bias_2d->window) == 2212);
  CHECK(beit.num_attention_heads == 16);  // the backbone's, not the wrapper's 12
  CHECK(has_note(beit, "dpt: the backbone's keys, read from backbone_config"));
  // LiheYoung/depth-anything-small-hf: DINOv2-S/14 at 518 px, 1370 positions.
  const auto da = posenc_test::parse_hf_config(R"({"model_type": "depth_anything",
      "backbone_config": {"model_type": "dinov2", "hidden_size": 384,
      "num_attention_heads": 6, "image_size": 518, "patch_size": 14}})");
  REQUIRE(da.scheme == HfPositionScheme::kAbsolute);
  CHECK(da.absolute->grid_h * da.absolute->grid_w + da.absolute->leading_rows == 1370);
  // openmmlab/upernet-swin-tiny and facebook/mask2former-swin-base-IN21k-coco-instance.
  const auto uper = posenc_test::parse_hf_config(R"({"model_type": "upernet", "hidden_size": 512,
      "backbone_config": {"model_type": "swin", "embed_dim": 96, "depths": [2, 2, 6, 2],
      "num_heads": [3, 6, 12, 24], "window_size": 7, "image_size": 224}})");
  REQUIRE(uper.swin);
  CHECK(uper.swin->stages.size() == 4);
  CHECK(uper.num_hidden_layers == 12);
  const auto m2f = posenc_test::parse_hf_config(R"({"model_type": "mask2former",
      "backbone_config": {"model_type": "swin", "embed_dim": 128, "depths": [2, 2, 18, 2],
      "num_heads": [4, 8, 16, 32], "window_size": 12, "image_size": 384}})");
  REQUIRE(m2f.swin);
  CHECK(m2f.swin->stages[0].shifted_block.shift == 6);
  CHECK(m2f.swin->stages[3].shifted_block.shift == 0);  // 12 x 12: one window
  CHECK(has_note(m2f, "pixel decoder and transformer decoder add DETR's sine embedding"));
  CHECK_FALSE(has_note(uper, "sine embedding"));
  // Intel/zoedepth-nyu: BEiT-L/16 at 384 with its relative bias.
  const auto zoe = posenc_test::parse_hf_config(R"({"model_type": "zoedepth",
      "backbone_config": {"model_type": "beit", "hidden_size": 1024,
      "num_attention_heads": 16, "image_size": 384, "patch_size": 16,
      "use_relative_position_bias": true}})");
  REQUIRE(zoe.scheme == HfPositionScheme::kRelativeBias2d);
  CHECK(zoe.relative_bias_2d->window.window_h == 24);
}

TEST_CASE("hf_config: VideoMAE's fixed sinusoids over its tubelets", "[hf_config][backbone]") {
  // MCG-NJU/videomae-base: 16 frames in tubelets of 2, 14 x 14 patches: 1568 positions of
  // get_sinusoid_encoding_table, angle p / 10000^(2 (j // 2) / d), sin at even j, cos at odd j.
  const auto c = posenc_test::parse_hf_config(R"({"model_type": "videomae", "hidden_size": 768,
      "num_attention_heads": 12, "image_size": 224, "patch_size": 16, "num_frames": 16,
      "tubelet_size": 2})");
  REQUIRE(c.scheme == HfPositionScheme::kAbsolute);
  REQUIRE(c.absolute);
  REQUIRE(c.absolute->sinusoidal);
  const Eigen::Index d = 768;
  std::vector<double> rows(static_cast<std::size_t>(2 * d));
  posenc::sinusoidal_table<double>(posenc::TensorView<double, 2>(rows.data(), 2, d),
                                   *c.absolute->sinusoidal, 1566);
  for (Eigen::Index r = 0; r < 2; ++r) {
    const long double p = 1566.0L + static_cast<long double>(r);
    for (Eigen::Index j = 0; j < d; ++j) {
      const long double angle = p / std::pow(10000.0L, 2.0L * static_cast<long double>(j / 2) /
                                                           static_cast<long double>(d));
      const long double expected = j % 2 == 0 ? std::sin(angle) : std::cos(angle);
      REQUIRE(std::fabs(static_cast<long double>(rows[static_cast<std::size_t>(r * d + j)]) -
                        expected) < 1e-12L);
    }
  }
  CHECK(c.mask == posenc::MaskMode::kBidirectional);
}

TEST_CASE("hf_config: Segment Anything's image encoder", "[hf_config][backbone][rel_pos]") {
  // facebook/sam-vit-base: 1024 / 16 = 64 x 64 patches, 12 layers of 12 heads, global attention
  // on layers 2, 5, 8, 11 (tables of 127 rows), 14 x 14 windows on the rest (27 rows).
  const auto base = posenc_test::parse_hf_config(R"({"architectures": ["SamModel"],
      "model_type": "sam", "vision_config": {"hidden_size": 768, "num_attention_heads": 12,
      "num_hidden_layers": 12, "image_size": 1024, "patch_size": 16, "window_size": 14,
      "use_abs_pos": true, "use_rel_pos": true, "global_attn_indexes": [2, 5, 8, 11],
      "output_channels": 256}, "prompt_encoder_config": {"hidden_size": 256},
      "mask_decoder_config": {"hidden_size": 256, "num_attention_heads": 8}})");
  CHECK(base.model_type == "sam_vision_model");
  REQUIRE(base.scheme == HfPositionScheme::kDecomposedRelPos);
  CHECK(posenc::to_string(base.scheme) == "decomposed_rel_pos");
  REQUIRE(base.decomposed_rel_pos);
  const auto& rp = *base.decomposed_rel_pos;
  CHECK((rp.grid_h == 64 && rp.grid_w == 64 && rp.window_size == 14));
  const std::vector<bool> global = {false, false, true, false, false, true,
                                    false, false, true, false, false, true};
  CHECK(rp.global_layers == global);
  CHECK(posenc::rel_pos_table_rows(rp.grid_h, rp.grid_h) == 127);
  CHECK(posenc::rel_pos_table_rows(rp.window_size, rp.window_size) == 27);
  REQUIRE(base.absolute);  // pos_embed [1, 64, 64, 768]: no class token
  CHECK((base.absolute->grid_h == 64 && base.absolute->leading_rows == 0));
  CHECK(base.absolute->embed_dim == 768);
  CHECK(base.num_hidden_layers == 12);
  const auto p = posenc::hf_attention_params(base, 5);
  CHECK(p.mask == posenc::MaskMode::kBidirectional);
  REQUIRE(p.scale);
  CHECK(*p.scale == Approx(0.125).epsilon(1e-15));  // 768 / 12 = 64 wide
  // A windowed layer of SAM runs on the grid padded to 70 x 70: 25 windows, never shifted.
  const posenc::SwinWindowLayout w{rp.grid_h, rp.grid_w, rp.window_size, 0};
  CHECK(posenc::swin_num_windows(w) == 25);
  // facebook/sam-vit-huge: 32 layers of 16 heads over 1280, global 7, 15, 23, 31; and
  // SamVisionConfig's defaults for a config that keeps only the differences.
  const auto huge = posenc_test::parse_hf_config(R"({"model_type": "sam", "vision_config": {
      "hidden_size": 1280, "num_attention_heads": 16, "num_hidden_layers": 32,
      "global_attn_indexes": [7, 15, 23, 31]}})");
  CHECK(std::count(huge.decomposed_rel_pos->global_layers.begin(),
                   huge.decomposed_rel_pos->global_layers.end(), true) == 4);
  CHECK(huge.decomposed_rel_pos->global_layers[31]);
  CHECK(huge.attention_head_dim == 80);
  CHECK(has_note(huge, "vision_config.window_size absent: SamVisionConfig's default 14"));
  CHECK(has_note(huge, "vision_config.image_size absent: SamVisionConfig's default 1024"));
  CHECK(huge.decomposed_rel_pos->grid_h == 64);
  const auto defaults = posenc_test::parse_hf_config(R"({"model_type": "sam", "vision_config": {}})");
  CHECK(defaults.decomposed_rel_pos->global_layers == global);
  // use_rel_pos false: the learned grid alone.
  const auto abs_only =
      posenc_test::parse_hf_config(R"({"model_type": "sam", "vision_config": {"use_rel_pos": false}})");
  CHECK(abs_only.scheme == HfPositionScheme::kAbsolute);
  CHECK_FALSE(abs_only.decomposed_rel_pos);
  // Refusals.
  CHECK_THROWS_WITH(posenc_test::parse_hf_config(R"({"model_type": "sam"})"),
                    Contains("\"vision_config\" is absent"));
  CHECK_THROWS_WITH(posenc_test::parse_hf_config(R"({"model_type": "sam", "vision_config":
                        {"global_attn_indexes": [2, 12]}})"),
                    Contains("\"vision_config.global_attn_indexes[1]\" = 12 must be a layer in "
                             "[0, num_hidden_layers = 12)"));
  CHECK_THROWS_WITH(posenc_test::parse_hf_config(R"({"model_type": "sam", "vision_config":
                        {"num_attention_heads": 10}})"),
                    Contains("= 10 must divide hidden_size = 768"));
  CHECK_THROWS_WITH(posenc_test::parse_hf_config(R"({"model_type": "sam", "vision_config":
                        {"use_abs_pos": false, "use_rel_pos": false}})"),
                    Contains("SAM's encoder has no positions"));
}

TEST_CASE("hf_config: backbones and families posenc cannot describe are refused by name",
          "[hf_config][backbone][errors]") {
  using posenc_test::parse_hf_config;
  const auto fails = posenc_test::check_refused;
  // Every one of these was read as RoPE with theta 10000, or failed on a missing head count.
  fails(R"({"model_type": "upernet", "hidden_size": 512, "backbone_config":
            {"model_type": "convnext", "hidden_sizes": [96, 192, 384, 768]}})",
        "\"backbone_config.model_type\" = \"convnext\": a convolutional network");
  fails(R"({"model_type": "maskformer", "backbone": "resnet50", "use_timm_backbone": true})",
        "\"backbone_config\" is absent: maskformer runs a backbone named \"resnet50\"");
  fails(R"({"model_type": "oneformer", "hidden_size": 256, "backbone_config":
            {"hidden_size": 768}})",
        "\"backbone_config.model_type\" is absent");
  fails(R"({"model_type": "vitdet", "hidden_size": 768, "num_attention_heads": 12})",
        "decomposed relative positions");
  fails(R"({"model_type": "dinat", "embed_dim": 64, "num_heads": [2, 4, 8, 16]})",
        "neighbourhood attention");
  fails(R"({"model_type": "some_new_vit", "hidden_size": 768, "num_attention_heads": 12,
            "image_size": 224, "patch_size": 16})",
        "\"image_size\" is given but model_type = \"some_new_vit\" is no vision family posenc "
        "knows");
  fails(R"({"model_type": "some_video", "hidden_size": 768, "num_attention_heads": 12,
            "num_frames": 16})",
        "\"num_frames\" is given");
  // A vision config that names its rotary key is RoPE (EVA-02 style), as for any family.
  CHECK(parse_hf_config(R"({"model_type": "some_new_vit", "hidden_size": 768,
            "num_attention_heads": 12, "image_size": 224, "patch_size": 16,
            "rope_theta": 10000})")
            .scheme == HfPositionScheme::kRope);
}
