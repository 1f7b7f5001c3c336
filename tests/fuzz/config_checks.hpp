#pragma once
// What every config a reader accepted must give (fuzz_hf_config.cpp, fuzz_gguf.cpp): per layer,
// head counts an attention call takes (0 / 0 on a layer without attention, else kv_heads > 0
// dividing heads), a KV source among the layers before it, and attention parameters
// (hf_attention_params) that attention() accepts with those heads. A violation prints what
// failed and traps.

#include <posenc/attention_types.hpp>
#include <posenc/continuous_position_bias.hpp>
#include <posenc/model_config.hpp>
#include <posenc/sincos_grid.hpp>
#include <posenc/sine_embedding_2d.hpp>
#include <posenc/swin_window.hpp>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

namespace posenc_fuzz {

[[noreturn]] inline void config_violation(const posenc::HfModelConfig& c, Eigen::Index layer,
                                          const std::string& what) {
  std::fprintf(stderr, "accepted config %s, layer %lld: %s\n", c.source.c_str(),
               static_cast<long long>(layer), what.c_str());
  __builtin_trap();
}

inline void check_accepted_config(const posenc::HfModelConfig& c) {
  // BEiT's window must be one relative_position_bias_2d takes.
  if (c.relative_bias_2d) {
    try {
      (void)posenc::relative_bias_2d_table_rows(c.relative_bias_2d->window);
    } catch (const std::exception& e) {
      config_violation(c, 0, std::string("relative_bias_2d window: ") + e.what());
    }
  }
  if (c.decomposed_rel_pos) {
    const posenc::HfDecomposedRelPos& rp = *c.decomposed_rel_pos;
    if (static_cast<Eigen::Index>(rp.global_layers.size()) != c.num_hidden_layers) {
      config_violation(c, 0, "SAM's global_layers are not one per layer");
    }
    try {
      (void)posenc::rel_pos_table_rows(rp.grid_h, rp.grid_w);
      if (rp.window_size > 0) (void)posenc::rel_pos_table_rows(rp.window_size, rp.window_size);
    } catch (const std::exception& e) {
      config_violation(c, 0, std::string("decomposed rel pos grid: ") + e.what());
    }
  }
  // A detection model's recipe must be one the embedding calls take.
  if (c.feature_map) {
    const posenc::HfFeatureMapPositions& fm = *c.feature_map;
    try {
      if (fm.kind == posenc::HfFeatureMapKind::kSincosGrid) {
        (void)posenc::SincosGridPlan(
            posenc::sincos_grid_rt_detr(fm.embed_dim, 2, 3, fm.temperature));
      } else if (fm.kind == posenc::HfFeatureMapKind::kSine) {
        const posenc::SineEmbedding2dPlan plan(fm.sine);
        if (plan.dim() != fm.embed_dim) config_violation(c, 0, "feature map width");
      } else if (2 * fm.sine.num_pos_feats != fm.embed_dim || fm.learned_rows < 1) {
        config_violation(c, 0, "learned feature-map tables");
      }
    } catch (const std::exception& e) {
      config_violation(c, 0, std::string("feature map recipe: ") + e.what());
    }
  }
  if (c.swin) {
    Eigen::Index blocks = 0;
    for (const posenc::HfSwinStage& st : c.swin->stages) {
      try {
        (void)posenc::swin_num_windows(st.block);
        (void)posenc::swin_num_windows(st.shifted_block);
        // (The MLP's coordinates for windows up to 256: a table of at most 511^2 rows.)
        if (c.relative_bias_2d && c.relative_bias_2d->per_layer_mlp && st.table_window <= 256) {
          std::vector<double> coords(static_cast<std::size_t>(
              (2 * st.table_window - 1) * (2 * st.table_window - 1) * 2));
          posenc::log_spaced_relative_coords_2d(
              {st.table_window, st.table_window, st.pretrained_window, st.pretrained_window},
              posenc::TensorView<double, 2>(coords.data(),
                                            static_cast<Eigen::Index>(coords.size() / 2), 2));
        } else if (st.table_window != c.swin->window_size) {
          config_violation(c, blocks, "a Swin stage's table is not the config's window_size");
        }
      } catch (const std::exception& e) {
        config_violation(c, blocks, std::string("Swin stage: ") + e.what());
      }
      if (st.hidden_size % st.num_heads != 0) {
        config_violation(c, blocks, "a Swin stage's width is not a multiple of its heads");
      }
      blocks += st.depth;
    }
    if (blocks != c.num_hidden_layers) {
      config_violation(c, 0, "the Swin stages' blocks are not num_hidden_layers");
    }
  }
  const auto listed = static_cast<Eigen::Index>(
      std::max(c.layer_types.size(), c.layer_num_attention_heads.size()));
  const Eigen::Index layers = c.num_hidden_layers > 0 ? c.num_hidden_layers : listed;
  // Layer 0 stands for every layer of a config that does not count them; at most 512.
  for (Eigen::Index i = 0; i < std::clamp<Eigen::Index>(layers, 1, 512); ++i) {
    const posenc::HfLayerHeads heads = posenc::hf_layer_heads(c, i);
    const Eigen::Index source = posenc::hf_layer_kv_source(c, i);
    if (source < 0 || source > i) {
      config_violation(c, i, "KV source " + std::to_string(source) + " is not an earlier layer");
    }
    if (heads.num_attention_heads == 0 && heads.num_key_value_heads == 0) continue;
    try {
      posenc::detail::validate_attention_params("hf_attention_params",
                                                posenc::hf_attention_params(c, i),
                                                heads.num_attention_heads,
                                                heads.num_key_value_heads);
    } catch (const std::exception& e) {
      config_violation(c, i, std::string("attention() rejects its parameters: ") + e.what());
    }
  }
}

}  // namespace posenc_fuzz
