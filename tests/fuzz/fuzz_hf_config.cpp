// libFuzzer target for the HF config loader (scripts/fuzz.sh builds and runs it).
// Contract under test: for any input bytes, parse_hf_config either returns a config whose RoPE
// plans and per-layer attention parameters (config_checks.hpp) posenc can use, or throws
// std::invalid_argument. Anything else -- another exception
// type (nlohmann's, std::out_of_range, bad_alloc), a crash, a sanitizer report, a hang --
// is a bug. Loaded configs are pushed through the planner and the long-context report too.

#include <posenc/diagnostics.hpp>
#include <posenc/hf_config.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string_view>

#include "config_checks.hpp"

#ifdef POSENC_FUZZ_MAIN
static long g_accepted = 0;
#endif

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  posenc::HfConfigOptions options;
  if (size > 0 && data[0] % 3 == 1) options.layout = posenc::RopeLayout::kInterleaved;
  try {
    const posenc::HfModelConfig c = posenc::parse_hf_config(text, "fuzz.json", options);
    posenc_fuzz::check_accepted_config(c);
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
    return 0;
  }
#ifdef POSENC_FUZZ_MAIN
  ++g_accepted;
#endif
  return 0;
}

#ifdef POSENC_FUZZ_MAIN
// Without libFuzzer: mutated seed files (mutate.hpp), e.g. in the build tree
//   tests/posenc_fuzz_hf_config 5000 1 tests/fuzz/hf_config.dict SEED_DIRECTORY...
// Byte mutations alone leave few inputs valid JSON (about 3 %), so three inputs in four are
// made by edits of the parsed document instead: a value set to an edge number, another type
// or another node's value, a dictionary key added, a key or an element removed, an array
// resized.
#include <functional>
#include <string>
#include <vector>

#include "mutate.hpp"

namespace {

using json = nlohmann::json;

void collect(json& node, std::vector<json*>& nodes) {
  nodes.push_back(&node);
  if (node.is_structured()) {
    for (auto& child : node) collect(child, nodes);
  }
}

json interesting_value(posenc_test::SplitMix64& rng, const std::vector<std::string>& keys) {
  const double numbers[] = {0.0, -0.0, 1.0, -1.0, 2.0, 0.5, 1.5, 4.0, 8.0, 32.0, 40.0, 64.0,
                            128.0, 4096.0, 8192.0, 32768.0, 131072.0, 1e308, -1e308, 5e-324,
                            1e20, 1e-300, 2147483648.0, 4294967296.0, 0.1, 1e6};
  switch (rng.next() % 8) {
    case 0: return numbers[rng.next() % std::size(numbers)];
    case 1: {
      const std::int64_t ints[] = {0, 1, -1, 2, 3, 7, 16, 31, 33, 63, 64, 65, 127, 129, 255,
                                   2147483647, -2147483648LL, 4294967295LL, 9007199254740993LL,
                                   std::numeric_limits<std::int64_t>::min(),
                                   std::numeric_limits<std::int64_t>::max()};
      return ints[rng.next() % std::size(ints)];
    }
    case 2: return std::numeric_limits<std::uint64_t>::max();
    case 3: return rng.next() % 2 == 0;
    case 4: return nullptr;
    case 5: return keys.empty() ? json("") : json(keys[rng.next() % keys.size()]);
    case 6: return json::array();
    default: {
      json a = json::array();
      const std::size_t n = std::vector<std::size_t>{1, 2, 3, 32, 63, 64, 65}[rng.next() % 7];
      const double v = numbers[rng.next() % std::size(numbers)];
      for (std::size_t i = 0; i < n; ++i) a.push_back(v);
      return a;
    }
  }
}

bool mutate_json(posenc_test::SplitMix64& rng, posenc_fuzz::Bytes& x,
                 const std::vector<std::string>& keys) {
  json doc = json::parse(x.begin(), x.end(), nullptr, false);
  if (doc.is_discarded()) return false;
  std::vector<json*> nodes;
  collect(doc, nodes);
  const auto action = rng.next() % 6;
  // The nodes the action applies to: objects (3), non-empty objects and arrays (4), arrays (5).
  std::vector<json*> fit;
  for (json* n : nodes) {
    if (action < 3 || (action == 3 && n->is_object()) ||
        (action == 4 && n->is_structured() && !n->empty()) || (action == 5 && n->is_array())) {
      fit.push_back(n);
    }
  }
  if (fit.empty() || (action == 3 && keys.empty())) return false;
  json& node = *fit[rng.next() % fit.size()];
  switch (action) {
    case 0:
    case 1: node = interesting_value(rng, keys); break;
    case 2: node = json(*nodes[rng.next() % nodes.size()]); break;  // another node's value
    case 3: node[keys[rng.next() % keys.size()]] = interesting_value(rng, keys); break;
    case 4:  // remove a key or an element
      if (node.is_object()) {
        auto it = node.begin();
        std::advance(it, static_cast<std::ptrdiff_t>(rng.next() % node.size()));
        node.erase(it);
      } else {
        node.erase(static_cast<std::size_t>(rng.next() % node.size()));
      }
      break;
    default:  // an array one longer or shorter
      if (rng.next() % 2 == 0 && !node.empty()) {
        node.erase(node.size() - 1);
      } else {
        node.push_back(node.empty() ? json(1.0) : json(node.back()));
      }
      break;
  }
  const std::string text = doc.dump();
  x.assign(text.begin(), text.end());
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  // The dictionary's quoted keys and names, unquoted: the keys and strings the loader reads.
  std::vector<std::string> keys;
  if (argc > 3) {
    for (const auto& token : posenc_fuzz::read_dictionary(argv[3])) {
      if (token.size() >= 2 && token.front() == '"' && token.back() == '"') {
        keys.emplace_back(token.begin() + 1, token.end() - 1);
      }
    }
  }
  const long runs = posenc_fuzz::run_mutated_seeds(
      argc, argv, 16384, g_accepted,
      [&keys](posenc_test::SplitMix64& rng, posenc_fuzz::Bytes& x) {
        return mutate_json(rng, x, keys);
      });
  return runs < 0 ? 2 : 0;
}
#endif
