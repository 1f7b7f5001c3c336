// Writes small GGUF headers of the families gguf_config.hpp reads, laid out by
// tests/support/gguf_writer.hpp: the seed corpus of fuzz_gguf (scripts/fuzz.sh gguf) and the
// files of the rope-inspect GGUF tests (tests/tools.cmake).
//   gguf_seeds <directory>     (created if missing)

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "support/gguf_writer.hpp"

using posenc_test::GgufWriter;

namespace {

GgufWriter base(const std::string& a, std::uint32_t heads = 32) {
  GgufWriter w;
  w.str("general.architecture", a)
      .u32(a + ".context_length", 131072)
      .u32(a + ".embedding_length", 4096)
      .u32(a + ".block_count", 8)
      .u32(a + ".attention.head_count", heads)
      .u32(a + ".attention.head_count_kv", 8)
      .f32(a + ".rope.freq_base", 500000.0f);
  return w;
}

void save(const std::string& dir, const std::string& name, const GgufWriter& w) {
  const auto bytes = w.bytes();
  std::ofstream out(dir + "/" + name, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  const std::string dir = argv[1];
  std::filesystem::create_directories(dir);
  // Llama-3.1-8B: rope_freqs by convert_hf_to_gguf.py's llama3 rule (factor 8, low 1, high 4,
  // L0 8192): 1 below a wavelength of 2048 tokens, 8 above 8192, 1 / ((1 - m) / 8 + m) between.
  GgufWriter llama = base("llama");
  llama.u32("llama.rope.dimension_count", 128);
  std::vector<float> factors;
  for (int j = 0; j < 64; ++j) {
    const double wavelen = 2.0 * 3.141592653589793 * std::pow(500000.0, j / 64.0);
    const double m = (8192.0 / wavelen - 1.0) / 3.0;
    factors.push_back(wavelen < 2048.0   ? 1.0f
                      : wavelen > 8192.0 ? 8.0f
                                         : static_cast<float>(1.0 / ((1.0 - m) / 8.0 + m)));
  }
  llama.tensor("rope_freqs.weight", {64}, 0, llama.f32_bytes(factors));
  save(dir, "llama31.gguf", llama);
  auto cut = llama.bytes();
  cut.resize(40);
  std::ofstream(dir + "/truncated.gguf", std::ios::binary)
      .write(reinterpret_cast<const char*>(cut.data()), static_cast<std::streamsize>(cut.size()));
  save(dir, "qwen2-yarn.gguf", base("qwen2")
                                   .str("qwen2.rope.scaling.type", "yarn")
                                   .f32("qwen2.rope.scaling.factor", 4.0f)
                                   .u32("qwen2.rope.scaling.original_context_length", 32768)
                                   .f32("qwen2.rope.scaling.yarn_beta_fast", 32.0f)
                                   .f32("qwen2.rope.scaling.attn_factor", 1.5f));
  save(dir, "deepseek2.gguf", base("deepseek2")
                                  .u32("deepseek2.attention.kv_lora_rank", 512)
                                  .u32("deepseek2.attention.key_length", 576)
                                  .u32("deepseek2.attention.key_length_mla", 192)
                                  .u32("deepseek2.rope.dimension_count", 64)
                                  .str("deepseek2.rope.scaling.type", "yarn")
                                  .f32("deepseek2.rope.scaling.factor", 40.0f)
                                  .f32("deepseek2.rope.scaling.yarn_log_multiplier", 0.1f));
  GgufWriter phi = base("phi3");
  phi.u32("phi3.rope.scaling.original_context_length", 4096)
      .f32("phi3.rope.scaling.attn_factor", 1.19f)
      .tensor("rope_factors_long.weight", {64}, 0, phi.f32_bytes(std::vector<float>(64, 3.0f)))
      .tensor("rope_factors_short.weight", {64}, 1, phi.u16_bytes(std::vector<std::uint16_t>(64, 0x3c00)));
  save(dir, "phi3-longrope.gguf", phi);
  save(dir, "gemma3.gguf", base("gemma3")
                               .u32("gemma3.attention.sliding_window", 1024)
                               .str("gemma3.rope.scaling.type", "linear")
                               .f32("gemma3.rope.scaling.factor", 8.0f));
  save(dir, "cohere2-pattern.gguf",
       base("cohere2")
           .u32("cohere2.attention.sliding_window", 4096)
           .bool_array("cohere2.attention.sliding_window_pattern",
                       {true, true, true, false, true, true, true, false}));
  save(dir, "qwen3vl.gguf", base("qwen3vl").i32_array("qwen3vl.rope.dimension_sections", {24, 20, 20, 0}));
  save(dir, "llama4.gguf", base("llama4"));
  save(dir, "mpt-alibi.gguf", base("mpt", 12).f32("mpt.attention.max_alibi_bias", 8.0f));
  save(dir, "t5encoder.gguf", base("t5encoder").u32("t5encoder.attention.relative_buckets_count", 32));
  // LFM2: head_count_kv per layer, 0 on the short-convolution layers (LFM2Model's rule).
  GgufWriter lfm2;
  lfm2.str("general.architecture", "lfm2")
      .u32("lfm2.context_length", 128000)
      .u32("lfm2.embedding_length", 2048)
      .u32("lfm2.block_count", 8)
      .u32("lfm2.attention.head_count", 32)
      .i32_array("lfm2.attention.head_count_kv", {0, 0, 8, 0, 0, 8, 0, 8})
      .f32("lfm2.rope.freq_base", 1000000.0f);
  save(dir, "lfm2-conv.gguf", lfm2);
  GgufWriter be(true);
  be.str("general.architecture", "llama")
      .u32("llama.context_length", 4096)
      .u32("llama.embedding_length", 4096)
      .u32("llama.block_count", 2)
      .i32_array("llama.attention.head_count", {32, 32});
  save(dir, "big-endian.gguf", be);
  return 0;
}
