// libFuzzer target for the HF config loader (scripts/fuzz.sh builds and runs it).
// Contract under test: for any input bytes, parse_hf_config either returns a config whose RoPE
// plans posenc can use, or throws std::invalid_argument. Anything else -- another exception
// type (nlohmann's, std::out_of_range, bad_alloc), a crash, a sanitizer report, a hang --
// is a bug. Loaded configs are pushed through the planner and the long-context report too.

#include <posenc/diagnostics.hpp>
#include <posenc/hf_config.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  posenc::HfConfigOptions options;
  if (size > 0 && data[0] % 3 == 1) options.layout = posenc::RopeLayout::kInterleaved;
  try {
    const posenc::HfModelConfig c = posenc::parse_hf_config(text, "fuzz.json", options);
    if (c.scheme == posenc::HfPositionScheme::kRope) {
      const std::int64_t target = std::max<std::int64_t>(1, c.max_position_embeddings) * 2;
      for (const auto& lr : c.layer_ropes) {
        // A config the loader accepted must plan without throwing.
        const auto rep = posenc::analyze_rope_length(lr.params, target);
        if (rep.pairs.empty()) __builtin_trap();
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
