// libFuzzer target for the GGUF reader (scripts/fuzz.sh gguf builds and runs it).
// Contract under test: for any input bytes, parse_gguf_config either returns a config whose RoPE
// plans and per-layer attention parameters (config_checks.hpp) posenc can use, or throws
// std::invalid_argument. Anything else -- another exception
// type (std::out_of_range, bad_alloc, length_error), a crash, a sanitizer report, a hang, an
// allocation the input cannot justify (libFuzzer's -rss_limit_mb) -- is a bug.

#include <posenc/gguf_config.hpp>

#include <cstddef>
#include <cstdint>
#include <stdexcept>

#include "config_checks.hpp"

#ifdef POSENC_FUZZ_MAIN
static long g_accepted = 0;
#endif

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  posenc::GgufConfigOptions options;
  // Unknown architectures get a layout now and then, so their RoPE keys are exercised too.
  if (size > 0 && data[size - 1] % 2 == 1) options.layout = posenc::RopeLayout::kHalfSplit;
  try {
    const posenc::HfModelConfig c = posenc::parse_gguf_config(data, size, "fuzz.gguf", options);
    posenc_fuzz::check_accepted_config(c);
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
    return 0;
  }
#ifdef POSENC_FUZZ_MAIN
  ++g_accepted;
#endif
  return 0;
}

#ifdef POSENC_FUZZ_MAIN
// Without libFuzzer: mutated seed files (mutate.hpp), e.g. in the build tree
//   tests/posenc_fuzz_gguf 5000 1 tests/fuzz/gguf.dict tests/gguf-samples
// Byte mutations of a GGUF header mostly break its framing (a type tag, a length), so three
// inputs in four are written whole instead (tests/support/gguf_writer.hpp): an architecture,
// a random subset of the keys the reader looks up, each usually of its own type with an
// ordinary value, now and then an edge value or another type, and now and then the RoPE
// factor tensors in random shapes and ggml types.
#include <string>
#include <utility>
#include <vector>

#include "../support/gguf_writer.hpp"
#include "mutate.hpp"

namespace {

using posenc_test::GgufWriter;

template <typename T, std::size_t N>
const T& one_of(posenc_test::SplitMix64& rng, const T (&xs)[N]) {
  return xs[rng.next() % N];
}

void random_key(posenc_test::SplitMix64& rng, GgufWriter& w, const std::string& key) {
  const std::uint64_t ints[] = {0, 1, 2, 3, 4, 8, 16, 32, 40, 64, 96, 128, 256, 4096, 8192,
                                32768, 131072, 0x7fffffff, 0x80000000, 0xffffffff,
                                0x100000000ull, ~0ull};
  const double reals[] = {0.0, -0.0, 0.5, 1.0, -1.0, 1.5, 4.0, 8.0, 32.0, 40.0, 1e4, 5e5, 1e6,
                          1e30, 1e-30, 1e300, 5e-324, 0.1, 3.0e38, -3.0e38};
  const char* strings[] = {"", "yarn", "linear", "longrope", "none", "llama", "proportional",
                           "dynamic", "full_attention", "sliding_attention"};
  const std::uint64_t n = one_of(rng, ints) % 70;  // array lengths 0 .. 69
  switch (rng.next() % 10) {
    case 0: w.u32(key, static_cast<std::uint32_t>(one_of(rng, ints))); break;
    case 1: w.i32(key, static_cast<std::int32_t>(one_of(rng, ints))); break;
    case 2: w.u64(key, one_of(rng, ints)); break;
    case 3: w.f32(key, static_cast<float>(one_of(rng, reals))); break;
    case 4: w.f64(key, one_of(rng, reals)); break;
    case 5: w.boolean(key, rng.next() % 2 == 0); break;
    case 6: w.str(key, one_of(rng, strings)); break;
    case 7: {
      std::vector<std::int32_t> v(n);
      for (auto& x : v) x = static_cast<std::int32_t>(one_of(rng, ints) % 130);
      w.i32_array(key, v);
      break;
    }
    case 8: {
      std::vector<float> v(n);
      for (auto& x : v) x = static_cast<float>(one_of(rng, reals));
      w.f32_array(key, v);
      break;
    }
    default: {
      std::vector<bool> v(n);
      for (std::size_t i = 0; i < v.size(); ++i) v[i] = rng.next() % 2 == 0;
      w.bool_array(key, v);
      break;
    }
  }
}

/// A value of the key's own type (u: integer, f: float, b: bool, s: string, a: integer
/// array), usually ordinary, now and then an edge value; arrays one per layer or not.
void typed_key(posenc_test::SplitMix64& rng, GgufWriter& w, const std::string& key, char type,
               std::uint32_t layers) {
  const std::uint32_t usual[] = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 4096, 8192, 32768};
  const float usual_reals[] = {0.0f, 0.1f, 0.5f, 1.0f, 2.0f, 4.0f, 8.0f, 32.0f, 40.0f, 1e4f, 1e6f};
  const bool edge = rng.next() % 12 == 0;
  if (edge && (type == 'u' || type == 'f')) {
    random_key(rng, w, key);
    return;
  }
  switch (type) {
    case 'u': w.u32(key, one_of(rng, usual)); break;
    case 'f': w.f32(key, one_of(rng, usual_reals)); break;
    case 'b': w.boolean(key, rng.next() % 2 == 0); break;
    case 's': w.str(key, one_of(rng, {"yarn", "linear", "longrope", "none", "", "dynamic"})); break;
    default: {
      std::vector<std::int32_t> v(rng.next() % 4 == 0 ? rng.next() % 9 : layers);
      for (auto& x : v) x = static_cast<std::int32_t>(one_of(rng, usual) % 129) - (edge ? 1 : 0);
      w.i32_array(key, v);
      break;
    }
  }
}

void write_gguf(posenc_test::SplitMix64& rng, posenc_fuzz::Bytes& x) {
  const char* archs[] = {"llama", "qwen2", "deepseek2", "gemma3", "gemma2", "gpt-oss", "llama4",
                         "qwen3vl", "qwen2vl", "phi3", "mpt", "bloom", "t5encoder", "lfm2",
                         "cohere2", "glm4", "baichuan", "falcon", "gptneox", "mistral3",
                         "gemma4", "minicpm3", "jais", "qwen3next", "bert", "unknown"};
  // The keys the reader looks up, with their types; per-layer counts take arrays too.
  const std::pair<const char*, char> keys[] = {
      {"context_length", 'u'}, {"embedding_length", 'u'}, {"attention.head_count", 'u'},
      {"attention.head_count_kv", 'u'}, {"attention.key_length", 'u'},
      {"attention.value_length", 'u'}, {"attention.key_length_mla", 'u'},
      {"attention.value_length_mla", 'u'}, {"attention.kv_lora_rank", 'u'},
      {"attention.causal", 'b'}, {"attention.scale", 'f'}, {"attention.max_alibi_bias", 'f'},
      {"attention.sliding_window", 'u'}, {"attention.sliding_window_pattern", 'u'},
      {"attention.relative_buckets_count", 'u'}, {"attn_logit_softcapping", 'f'},
      {"rope.dimension_count", 'u'}, {"rope.dimension_sections", 'a'}, {"rope.freq_base", 'f'},
      {"rope.freq_base_swa", 'f'}, {"rope.scale_linear", 'f'}, {"rope.scaling.type", 's'},
      {"rope.scaling.factor", 'f'}, {"rope.scaling.attn_factor", 'f'},
      {"rope.scaling.original_context_length", 'u'}, {"rope.scaling.yarn_log_multiplier", 'f'},
      {"rope.scaling.yarn_beta_fast", 'f'}, {"rope.scaling.yarn_beta_slow", 'f'},
      {"rope.scaling.yarn_ext_factor", 'f'}, {"rope.scaling.yarn_attn_factor", 'f'}};
  const std::string arch = one_of(rng, archs);
  GgufWriter w(rng.next() % 16 == 0);
  if (rng.next() % 16 != 0) w.str("general.architecture", arch);
  const auto layers = static_cast<std::uint32_t>(1 + rng.next() % 8);
  if (rng.next() % 16 != 0) w.u32(arch + ".block_count", layers);
  for (const auto& [suffix, type] : keys) {
    // The sizes a config needs, usually present; the others now and then.
    const std::string name(suffix);
    const bool core = name == "context_length" || name == "embedding_length" ||
                      name == "attention.head_count";
    if (rng.next() % 16 >= (core ? 15u : 5u)) continue;
    const bool per_layer = name == "attention.head_count" || name == "attention.head_count_kv" ||
                           name == "attention.sliding_window_pattern";
    typed_key(rng, w, arch + "." + name, per_layer && rng.next() % 4 == 0 ? 'a' : type, layers);
  }
  if (rng.next() % 8 == 0) random_key(rng, w, "general.alignment");
  const char* tensors[] = {"rope_freqs.weight", "rope_factors_long.weight",
                           "rope_factors_short.weight", "position_embd.weight"};
  for (const char* name : tensors) {
    if (rng.next() % 4 != 0) continue;
    const std::uint64_t dims[] = {0, 1, 2, 16, 32, 63, 64, 65, 128};
    std::vector<std::uint64_t> ne{one_of(rng, dims)};
    if (rng.next() % 4 == 0) ne.push_back(one_of(rng, dims));
    std::uint64_t count = 1;
    for (auto d : ne) count *= d;
    const std::uint32_t type = one_of(rng, {0u, 0u, 1u, 30u, 2u});  // f32, f16, bf16, q4_0
    std::vector<float> values(count, static_cast<float>(1 + rng.next() % 8) * 0.5f);
    if (rng.next() % 4 == 0 && !values.empty()) values[0] = -1.0f;
    auto data = w.f32_bytes(values);
    if (type != 0) data.resize(data.size() / 2);  // 16-bit values (too few bytes for q4_0)
    w.tensor(name, ne, type, data);
  }
  x = w.bytes();
}

}  // namespace

int main(int argc, char** argv) {
  const long runs = posenc_fuzz::run_mutated_seeds(
      argc, argv, 1 << 16, g_accepted,
      [](posenc_test::SplitMix64& rng, posenc_fuzz::Bytes& x) {
        write_gguf(rng, x);
        return true;
      });
  return runs < 0 ? 2 : 0;
}
#endif
