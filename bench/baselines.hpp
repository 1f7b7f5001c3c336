#pragma once
// Memory-bandwidth baselines every kernel benchmark is judged against, over the same bytes.

#include <benchmark/benchmark.h>

#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

#include "summary.hpp"

namespace posenc_bench {

/// x[i] = x[i] * a + b over n floats: one read and one write per element, the traffic of any
/// in-place elementwise kernel. Reported bytes: 2 * n * sizeof(float) per pass.
inline void stream_rmw(float* x, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) x[i] = x[i] * 0.999f + 0.001f;
}

/// Runs the in-place stream over `bytes` bytes (rounded down to floats) and labels it as the
/// baseline "stream_rmw/<bytes>".
inline void run_stream_rmw_baseline(benchmark::State& state, std::size_t bytes) {
  std::vector<float> x(bytes / sizeof(float), 1.0f);
  for (auto _ : state) {
    stream_rmw(x.data(), x.size());
    benchmark::DoNotOptimize(x.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(2 * x.size() * sizeof(float)));
  state.SetLabel(baseline_label("stream_rmw/" + std::to_string(bytes)));
}

}  // namespace posenc_bench
