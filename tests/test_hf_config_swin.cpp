// Swin-family configs. Expected values are worked by hand from the hub configs' keys and the
// rules of HF's modeling code (SwinEncoder: stage i over image_size / patch_size / 2^i patches,
// embed_dim 2^i wide; SwinStage: odd blocks shift by window_size / 2; SwinLayer: a map no
// larger than the window takes one unshifted window; Swinv2Layer: window min(height,
// window_size), no shift when height <= that window) and from the published model cards
// (Swin-T: 12 blocks over 56, 28, 14, 7 patches; SwinV2-B window12to24 at 384 px).

#include <catch2/catch.hpp>

#include <posenc/continuous_position_bias.hpp>
#include <posenc/hf_config.hpp>
#include <posenc/swin_window.hpp>

#include <string>
#include <vector>

#include "support/config_notes.hpp"
#include "support/config_refusal.hpp"
#include "support/hf_config_loader.hpp"

using Catch::Matchers::Contains;
using posenc::HfPositionScheme;
using posenc::SwinWindowRule;
using posenc_test::has_note;

namespace {

struct StageExpect {
  Eigen::Index depth, width, heads, side_h, side_w, window, shift, table, pretrained;
};

void check_stages(const posenc::HfModelConfig& c, const std::vector<StageExpect>& expect) {
  REQUIRE(c.swin);
  REQUIRE(c.swin->stages.size() == expect.size());
  for (std::size_t i = 0; i < expect.size(); ++i) {
    CAPTURE(i);
    const posenc::HfSwinStage& st = c.swin->stages[i];
    const StageExpect& e = expect[i];
    CHECK(st.depth == e.depth);
    CHECK(st.hidden_size == e.width);
    CHECK(st.num_heads == e.heads);
    CHECK((st.block.height == e.side_h && st.block.width == e.side_w));
    CHECK((st.shifted_block.height == e.side_h && st.shifted_block.width == e.side_w));
    CHECK(st.block.window == e.window);
    CHECK(st.block.shift == 0);
    CHECK(st.shifted_block.window == e.window);
    CHECK(st.shifted_block.shift == e.shift);
    CHECK(st.table_window == e.table);
    CHECK(st.pretrained_window == e.pretrained);
  }
}

}  // namespace

TEST_CASE("hf_config: Swin-T, its stages, windows and per-layer heads", "[hf_config][swin]") {
  // microsoft/swin-tiny-patch4-window7-224's keys (num_layers counts stages, hidden_size is the
  // last stage's width: neither is read as such).
  const auto c = posenc_test::parse_hf_config(R"({"architectures": ["SwinForImageClassification"],
      "model_type": "swin", "depths": [2, 2, 6, 2], "embed_dim": 96, "hidden_size": 768,
      "image_size": 224, "num_heads": [3, 6, 12, 24], "num_layers": 4, "patch_size": 4,
      "window_size": 7, "use_absolute_embeddings": false, "mlp_ratio": 4.0, "qkv_bias": true})");
  CHECK(c.scheme == HfPositionScheme::kRelativeBias2d);
  CHECK(c.mask == posenc::MaskMode::kBidirectional);
  CHECK(c.swin->rule == SwinWindowRule::kSwin);
  CHECK(c.swin->window_size == 7);
  check_stages(c, {{2, 96, 3, 56, 56, 7, 3, 7, 0},
                   {2, 192, 6, 28, 28, 7, 3, 7, 0},
                   {6, 384, 12, 14, 14, 7, 3, 7, 0},
                   {2, 768, 24, 7, 7, 7, 0, 7, 0}});  // one 7 x 7 window: no shift
  // A table of (2 7 - 1)^2 = 169 rows in each of the 12 blocks.
  REQUIRE(c.relative_bias_2d);
  CHECK(posenc::relative_bias_2d_table_rows(c.relative_bias_2d->window) == 169);
  CHECK(c.relative_bias_2d->per_layer_tables);
  CHECK_FALSE(c.relative_bias_2d->per_layer_mlp);
  CHECK_FALSE(c.relative_bias_2d->window.class_token);
  CHECK(c.num_hidden_layers == 12);
  const std::vector<Eigen::Index> heads = {3, 3, 6, 6, 12, 12, 12, 12, 12, 12, 24, 24};
  CHECK(c.layer_num_attention_heads == heads);
  for (Eigen::Index layer = 0; layer < 12; ++layer) {
    CAPTURE(layer);
    const posenc::HfLayerHeads h = posenc::hf_layer_heads(c, layer);
    CHECK(h.num_attention_heads == heads[static_cast<std::size_t>(layer)]);
    CHECK(h.num_key_value_heads == heads[static_cast<std::size_t>(layer)]);
    const auto p = posenc::hf_attention_params(c, layer);
    CHECK(p.mask == posenc::MaskMode::kBidirectional);
    REQUIRE(p.scale);
    CHECK(*p.scale == Approx(1.0 / std::sqrt(32.0)).epsilon(1e-15));  // 96 / 3 = 32 wide
  }
  // Windows per image: 64, 16, 4, 1.
  const Eigen::Index windows[4] = {64, 16, 4, 1};
  for (std::size_t i = 0; i < 4; ++i) {
    CHECK(posenc::swin_num_windows(c.swin->stages[i].shifted_block) == windows[i]);
  }
  CHECK(has_note(c, "4 stages, 12 blocks, windows 7, 7, 7, 7"));
}

TEST_CASE("hf_config: Swin-v2 with pretrained windows, Donut-Swin, MaskFormer-Swin",
          "[hf_config][swin]") {
  // microsoft/swinv2-base-patch4-window12to24-192to384-22kto1k-ft: window 24 from a window-12
  // model, stage 4 (12 x 12) at window 12 from its pretrained 6.
  const auto v2 = posenc_test::parse_hf_config(R"({"model_type": "swinv2", "depths": [2, 2, 18, 2],
      "embed_dim": 128, "image_size": 384, "num_heads": [4, 8, 16, 32], "patch_size": 4,
      "window_size": 24, "pretrained_window_sizes": [12, 12, 12, 6]})");
  CHECK(v2.swin->rule == SwinWindowRule::kSwinV2);
  check_stages(v2, {{2, 128, 4, 96, 96, 24, 12, 24, 12},
                    {2, 256, 8, 48, 48, 24, 12, 24, 12},
                    {18, 512, 16, 24, 24, 24, 0, 24, 12},  // height 24 <= 24: no shift
                    {2, 1024, 32, 12, 12, 12, 0, 12, 6}});
  REQUIRE(v2.relative_bias_2d);
  CHECK(v2.relative_bias_2d->per_layer_mlp);
  CHECK_FALSE(v2.relative_bias_2d->per_layer_tables);
  CHECK(v2.num_hidden_layers == 24);
  // Cosine attention: the learned logit scale goes into q, softmax scale 1.
  REQUIRE(posenc::hf_attention_params(v2, 23).scale);
  CHECK(*posenc::hf_attention_params(v2, 23).scale == 1.0);
  CHECK(has_note(v2, "cosine similarities"));
  CHECK(has_note(v2, "twice (-200"));
  // The stage's ContinuousBias2dWindow is valid for the MLP: 12 x 12 from a pretrained 6.
  const posenc::HfSwinStage& last = v2.swin->stages.back();
  std::vector<double> coords(23 * 23 * 2);
  posenc::log_spaced_relative_coords_2d(
      {last.table_window, last.table_window, last.pretrained_window, last.pretrained_window},
      posenc::TensorView<double, 2>(coords.data(), 23 * 23, 2));
  CHECK(coords[0] == Approx(-std::log2(1.0 + 8.0 * 11.0 / 5.0) / 3.0));  // dy = -11 of P = 6

  // Swinv2Config's defaults: swinv2-tiny at 224 with window 7, pretrained 0.
  const auto v2d = posenc_test::parse_hf_config(R"({"model_type": "swinv2"})");
  check_stages(v2d, {{2, 96, 3, 56, 56, 7, 3, 7, 0},
                     {2, 192, 6, 28, 28, 7, 3, 7, 0},
                     {6, 384, 12, 14, 14, 7, 3, 7, 0},
                     {2, 768, 24, 7, 7, 7, 0, 7, 0}});
  CHECK(has_note(v2d, "pretrained_window_sizes absent"));

  // naver-clova-ix/donut-base: a 2560 x 1920 page, window 10, all four stages shifted.
  const auto donut = posenc_test::parse_hf_config(R"({"model_type": "donut-swin",
      "depths": [2, 2, 14, 2], "embed_dim": 128, "image_size": [2560, 1920],
      "num_heads": [4, 8, 16, 32], "patch_size": 4, "window_size": 10})");
  check_stages(donut, {{2, 128, 4, 640, 480, 10, 5, 10, 0},
                       {2, 256, 8, 320, 240, 10, 5, 10, 0},
                       {14, 512, 16, 160, 120, 10, 5, 10, 0},
                       {2, 1024, 32, 80, 60, 10, 5, 10, 0}});
  CHECK(posenc::swin_num_windows(donut.swin->stages[0].block) == 64 * 48);
  // MaskFormer's Swin-B backbone at 384 px, window 12.
  const auto mf = posenc_test::parse_hf_config(R"({"model_type": "maskformer-swin",
      "depths": [2, 2, 18, 2], "embed_dim": 128, "image_size": 384,
      "num_heads": [4, 8, 16, 32], "patch_size": 4, "window_size": 12})");
  check_stages(mf, {{2, 128, 4, 96, 96, 12, 6, 12, 0},
                    {2, 256, 8, 48, 48, 12, 6, 12, 0},
                    {18, 512, 16, 24, 24, 12, 6, 12, 0},
                    {2, 1024, 32, 12, 12, 12, 0, 12, 0}});
}

TEST_CASE("hf_config: Swin maps smaller than the window, and odd maps", "[hf_config][swin]") {
  // Swin at 192 px with window 7: stage 4 is 6 x 6, one window of 6 whose bias the
  // checkpoint's 7-window tables do not give (HF's forward fails there).
  const auto small = posenc_test::parse_hf_config(R"({"model_type": "swin", "image_size": 192,
      "window_size": 7})");
  check_stages(small, {{2, 96, 3, 48, 48, 7, 3, 7, 0},
                       {2, 192, 6, 24, 24, 7, 3, 7, 0},
                       {6, 384, 12, 12, 12, 7, 3, 7, 0},
                       {2, 768, 24, 6, 6, 6, 0, 7, 0}});
  CHECK(has_note(small, "stage 3's 6 x 6 map is smaller than window_size 7"));
  // 200 px: 50, 25, then 13 (the merge pads 25 to 26) where the layers were built for 12.
  const auto odd = posenc_test::parse_hf_config(R"({"model_type": "swin", "image_size": 200,
      "window_size": 5})");
  check_stages(odd, {{2, 96, 3, 50, 50, 5, 2, 5, 0},
                     {2, 192, 6, 25, 25, 5, 2, 5, 0},
                     {6, 384, 12, 13, 13, 5, 2, 5, 0},
                     {2, 768, 24, 7, 7, 5, 2, 5, 0}});
  CHECK(has_note(odd, "stage 2 runs on a 13 x 13 map"));
  CHECK(posenc::swin_num_windows(odd.swin->stages[2].block) == 9);  // 13 -> 15 = 3 windows a side
  // Swin-v2 decides on the built map: 12 x 12 at stage 2 -> window 5, shift 2 on the 13 x 13.
  const auto odd2 = posenc_test::parse_hf_config(R"({"model_type": "swinv2", "image_size": 200,
      "window_size": 12})");
  check_stages(odd2, {{2, 96, 3, 50, 50, 12, 6, 12, 0},
                      {2, 192, 6, 25, 25, 12, 6, 12, 0},
                      {6, 384, 12, 13, 13, 12, 0, 12, 0},  // built 12: window 12, no shift
                      {2, 768, 24, 7, 7, 6, 0, 6, 0}});    // built 6: window 6
  CHECK(has_note(odd2, "Swin-v2 chose its window for 12 x 12"));
  // A rotary key keeps any family on RoPE, as before.
  CHECK(posenc_test::parse_hf_config(R"({"model_type": "swin", "hidden_size": 768,
      "num_attention_heads": 12, "rope_theta": 10000})")
            .scheme == HfPositionScheme::kRope);
}

TEST_CASE("hf_config: bad Swin configs are refused by key", "[hf_config][swin][errors]") {
  using posenc_test::parse_hf_config;
  const auto fails = posenc_test::check_refused;
  fails(R"({"model_type": "swin", "depths": [2, 2], "num_heads": [3, 6, 12]})",
        "\"num_heads\" has 3 entries; one per stage (depths has 2)");
  fails(R"({"model_type": "swin", "depths": 4})", "\"depths\" must be a list of 1 to 64");
  fails(R"({"model_type": "swin", "depths": [2, -1]})", "\"depths[1]\" = -1 must be in [0, ");
  fails(R"({"model_type": "swin", "num_heads": [3, 5, 12, 24]})",
        "\"num_heads[1]\" = 5 must divide the stage's width embed_dim 2^1 = 192");
  fails(R"({"model_type": "swin", "num_heads": [3, 0, 12, 24]})", "\"num_heads[1]\" = 0");
  fails(R"({"model_type": "swin", "window_size": 0})", "\"window_size\" = 0 must be in [1, 2^15]");
  fails(R"({"model_type": "swin", "image_size": 32, "depths": [1, 1, 1, 1, 1],
            "num_heads": [1, 1, 1, 1, 1]})",
        "\"depths\" has 5 stages; stage 4 of a 8 x 8 patch grid has no patch left");
  fails(R"({"model_type": "swin", "patch_size": 300})", "\"patch_size\" is larger than image_size");
  fails(R"({"model_type": "swinv2", "pretrained_window_sizes": [0, 1, 0, 0]})",
        "\"pretrained_window_sizes[1]\" = 1 divides the MLP's coordinates by 0");
  fails(R"({"model_type": "swinv2", "pretrained_window_sizes": [8, 8]})",
        "\"pretrained_window_sizes\" has 2 entries; one per stage (depths has 4)");
  fails(R"({"model_type": "swin", "embed_dim": 0})", "\"embed_dim\" = 0 must be in [1, ");
}
