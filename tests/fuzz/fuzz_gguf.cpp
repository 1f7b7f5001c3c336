// libFuzzer target for the GGUF reader (scripts/fuzz.sh gguf builds and runs it).
// Contract under test: for any input bytes, parse_gguf_config either returns a config whose RoPE
// plans posenc can use, or throws std::invalid_argument. Anything else -- another exception
// type (std::out_of_range, bad_alloc, length_error), a crash, a sanitizer report, a hang, an
// allocation the input cannot justify (libFuzzer's -rss_limit_mb) -- is a bug.

#include <posenc/gguf_config.hpp>

#include <cstddef>
#include <cstdint>
#include <stdexcept>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  posenc::GgufConfigOptions options;
  // Unknown architectures get a layout now and then, so their RoPE keys are exercised too.
  if (size > 0 && data[size - 1] % 2 == 1) options.layout = posenc::RopeLayout::kHalfSplit;
  try {
    const posenc::HfModelConfig c = posenc::parse_gguf_config(data, size, "fuzz.gguf", options);
    if (c.scheme == posenc::HfPositionScheme::kRope) {
      for (const auto& lr : c.layer_ropes) {
        // A file the reader accepted must plan without throwing, short and long.
        (void)posenc::compute_rope_frequencies(lr.params, 0);
        (void)posenc::compute_rope_frequencies(lr.params, c.max_position_embeddings);
      }
    }
    if (c.scheme == posenc::HfPositionScheme::kAlibi &&
        static_cast<Eigen::Index>(c.alibi_slopes.size()) != c.num_attention_heads) {
      __builtin_trap();
    }
  } catch (const std::invalid_argument&) {
    // The documented rejection.
  }
  return 0;
}
