// From a Hugging Face config.json to posenc's RoPE plan (posenc/hf_config.hpp).
//
//   hf_config_load [config.json]
//
// Without an argument it reads two embedded configs: the RoPE fields of Llama-3.1-8B's
// config.json (rope_theta 500000, llama3 factor 8 / 1 / 4 / 8192, hidden 4096, 32 heads), and
// Qwen2.5-7B with the yarn block Qwen's docs tell users to add ("type": "yarn", the legacy
// key transformers copies into rope_type). Checked by hand:
//   Llama-3.1  head_dim = 4096 / 32 = 128; pair 0: 500000^0 = 1; pair 63 has wavelength
//              2 pi 500000^(126/128) = 2.56e6 > L0 = 8192, so it is divided by 8:
//              500000^(-126/128) / 8 = 2.4551e-06 / 8 = 3.0689e-07.
//   Qwen yarn  head_dim = 3584 / 28 = 128; cos/sin multiplier 0.1 ln 4 + 1 = 1.138629.
//   A negative rope_theta is rejected with the key and the source named.
//   Two translation models without any position key, d_model 16: Marian's sinusoids use
//              w_i = 10000^(-2i/16), so pair 1 turns 10000^(-1/8) = 0.316228 rad per position
//              and column 1 of position 1 is sin 0.316228 = 0.310984; M2M-100's (fairseq) use
//              w_i = 10000^(-i/7), and position 1 reads the sinusoid of 1 + 2 (positions start
//              at padding_idx + 1 = 2): sin(3 x 0.268270) = sin 0.804809 = 0.720698.
//
// expect: llama: llama3 factor 8, theta 500000, head_dim 128, rotary_dim 128, layout half_split
// expect: pair 0 inv_freq 1.0000e+00, pair 63 inv_freq 3.0689e-07
// expect: qwen2: yarn factor 4, L0 32768, head_dim 128, attention factor 1.138629
// expect: note: rope_scaling.type = "yarn": legacy key for rope_type
// expect: rejected: posenc::load_hf_config: bad.json: key "rope_theta" = -1 must be > 1
// expect: marian: absolute sinusoidal, layout sin|cos (base^(-2i/d)), position 1 -> row 1
// expect: row 1, column 1 = 0.310984
// expect: m2m_100: absolute sinusoidal, layout sin|cos, position 1 -> row 3, column 1 = 0.720698

#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include <posenc/hf_config.hpp>
#include <posenc/sinusoidal.hpp>

namespace {

// Absolute-position models: the table's kind, and for sinusoids the formula and the value
// that position 1 reads in column 1 (the sine of pair 1 in a [sin | cos] layout).
void show_absolute(const posenc::HfModelConfig& c) {
  const posenc::HfAbsolutePositions a = c.absolute.value_or(posenc::HfAbsolutePositions{});
  std::printf("%s: absolute %s", c.model_type.c_str(), std::string(to_string(a.kind)).c_str());
  if (a.sinusoidal && c.hidden_size >= 4) {
    const std::int64_t row = 1 + c.absolute_position_offset;
    std::vector<double> table(static_cast<std::size_t>(c.hidden_size));
    posenc::TensorView<double, 2> view(table.data(), 1, c.hidden_size);
    posenc::sinusoidal_table<double>(view, *a.sinusoidal, row);
    std::printf(", layout %s, position 1 -> row %lld, column 1 = %.6f",
                std::string(to_string(a.sinusoidal->layout)).c_str(),
                static_cast<long long>(row), table[1]);
  }
  std::printf("\n");
}

void show(const posenc::HfModelConfig& c) {
  if (c.scheme == posenc::HfPositionScheme::kAbsolute) {
    show_absolute(c);
    for (const auto& n : c.notes) std::printf("note: %s\n", n.c_str());
    return;
  }
  if (c.scheme != posenc::HfPositionScheme::kRope) {
    std::printf("%s: scheme %s, no RoPE plan\n", c.model_type.c_str(),
                std::string(to_string(c.scheme)).c_str());
    return;
  }
  const auto& p = c.rope;
  const auto f = posenc::compute_rope_frequencies(p);
  std::printf("%s: %s factor %g, ", c.model_type.c_str(),
              std::string(posenc::to_string(p.scaling.type)).c_str(), p.scaling.factor);
  if (p.scaling.type == posenc::RopeScalingType::kYarn) {
    std::printf("L0 %lld, head_dim %ld, attention factor %.6f\n",
                static_cast<long long>(p.scaling.original_max_position_embeddings),
                static_cast<long>(p.head_dim), f.attention_factor);
  } else {
    std::printf("theta %g, head_dim %ld, rotary_dim %ld, layout %s\n", p.theta,
                static_cast<long>(p.head_dim), static_cast<long>(f.rotary_dim),
                std::string(posenc::to_string(p.layout)).c_str());
    std::printf("pair 0 inv_freq %.4e, pair %zu inv_freq %.4e\n", f.inv_freq.front(),
                f.inv_freq.size() - 1, f.inv_freq.back());
  }
  for (const auto& n : c.notes) std::printf("note: %s\n", n.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1) {
    try {
      show(posenc::load_hf_config(argv[1]));
    } catch (const std::invalid_argument& e) {
      std::printf("rejected: %s\n", e.what());
      return 1;
    }
    return 0;
  }
  show(posenc::parse_hf_config(R"({
    "architectures": ["LlamaForCausalLM"], "model_type": "llama",
    "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8,
    "max_position_embeddings": 131072, "rope_theta": 500000.0,
    "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"}})",
                               "Llama-3.1-8B (embedded)"));
  show(posenc::parse_hf_config(R"({
    "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2",
    "hidden_size": 3584, "num_attention_heads": 28, "num_key_value_heads": 4,
    "max_position_embeddings": 131072, "rope_theta": 1000000.0,
    "rope_scaling": {"factor": 4.0, "original_max_position_embeddings": 32768, "type": "yarn"}})",
                               "Qwen2.5-7B + yarn (embedded)"));
  try {
    posenc::parse_hf_config(R"({"hidden_size": 64, "num_attention_heads": 2, "rope_theta": -1})",
                            "bad.json");
  } catch (const std::invalid_argument& e) {
    std::printf("rejected: %s\n", e.what());
  }
  for (const char* json :
       {R"({"model_type": "marian", "d_model": 16, "encoder_attention_heads": 2})",
        R"({"model_type": "m2m_100", "d_model": 16, "encoder_attention_heads": 2})"}) {
    show_absolute(posenc::parse_hf_config(json));
  }
  return 0;
}
