#pragma once
// The standalone driver of every fuzz target, built with -DPOSENC_FUZZ_MAIN instead of
// libFuzzer: `./target RUNS [FIRST_SEED]` feeds RUNS inputs of splitmix64 bytes, seeds
// FIRST_SEED, FIRST_SEED + 1, ... (a seed gives the same input on every machine, so a mismatch
// a target reports with its seed replays with `./target 1 SEED`).

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "../support/rng.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace posenc_fuzz {

/// Runs the inputs of argv's count and first seed, `size` bytes each; before_run(seed) is
/// called before each one. Returns the count run.
template <typename BeforeRun>
long run_random_inputs(int argc, char** argv, std::size_t size, BeforeRun before_run) {
  const long runs = argc > 1 ? std::atol(argv[1]) : 1000;
  const std::uint64_t first = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 1;
  std::vector<std::uint8_t> bytes(size);
  for (long r = 0; r < runs; ++r) {
    const std::uint64_t seed = first + static_cast<std::uint64_t>(r);
    posenc_test::SplitMix64 gen(seed);
    for (auto& x : bytes) x = static_cast<std::uint8_t>(gen.next());
    before_run(seed);
    LLVMFuzzerTestOneInput(bytes.data(), bytes.size());
  }
  return runs;
}

}  // namespace posenc_fuzz
