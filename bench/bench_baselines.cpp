// Bandwidth ceilings measured in the same run as the kernels: an in-place read-modify-write
// stream (the traffic of every in-place kernel) and memcpy.

#include <cstring>
#include <vector>

#include "baselines.hpp"

namespace {

void BM_Baseline_StreamRMW(benchmark::State& state) {
  posenc_bench::run_stream_rmw_baseline(state, static_cast<std::size_t>(state.range(0)));
}
// Sizes: [1, 4096, 4096] and [8, 512, 1024] float embeddings (64 MiB, 16 MiB); the sin-cos
// grid cells' patch embeddings [8, 197, 768], [8, 1024, 1152] and [2, 4096, 1536].
BENCHMARK(BM_Baseline_StreamRMW)
    ->ArgName("bytes")
    ->Arg(64 << 20)
    ->Arg(16 << 20)
    ->Arg(8 * 197 * 768 * 4)
    ->Arg(8 * 1024 * 1152 * 4)
    ->Arg(2 * 4096 * 1536 * 4)
    ->UseRealTime();

void BM_Baseline_Memcpy(benchmark::State& state) {
  const auto bytes = static_cast<std::size_t>(state.range(0));
  std::vector<char> src(bytes, 1), dst(bytes, 0);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), bytes);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  // memcpy moves 2 * bytes (read + write), like the in-place stream.
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(2 * bytes));
  state.SetLabel(posenc_bench::baseline_label("memcpy/" + std::to_string(bytes)));
}
BENCHMARK(BM_Baseline_Memcpy)->ArgName("bytes")->Arg(64 << 20)->Arg(16 << 20);

}  // namespace
