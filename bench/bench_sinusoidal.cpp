// Sinusoidal absolute encodings: table build and in-place add, against the in-place stream over
// the same embedding bytes.

#include <posenc/sinusoidal.hpp>

#include <cstdint>
#include <vector>

#include "baselines.hpp"

namespace {

void BM_Sinusoidal_AddInplace(benchmark::State& state) {
  const Eigen::Index batch = state.range(0), seq = state.range(1), d = state.range(2);
  std::vector<float> emb(static_cast<std::size_t>(batch * seq * d), 0.5f);
  std::vector<std::int64_t> ids(static_cast<std::size_t>(batch * seq));
  for (Eigen::Index b = 0; b < batch; ++b)
    for (Eigen::Index s = 0; s < seq; ++s) ids[static_cast<std::size_t>(b * seq + s)] = s;
  posenc::SinusoidalParams params;
  params.layout = static_cast<posenc::SinusoidalLayout>(state.range(3));
  const posenc::SinusoidalPlan plan(d, params);  // planned once, as an engine would
  // paired_stream: each kernel pass followed by the in-place stream over the same buffer.
  state.counters["paired_stream"] = posenc_bench::run_paired(
      state,
      [&] {
        posenc::add_sinusoidal_inplace<float>(
            posenc::TensorView<float, 3>(emb.data(), batch, seq, d),
            posenc::PositionIdsView(ids.data(), batch, seq), plan);
        benchmark::DoNotOptimize(emb.data());
        benchmark::ClobberMemory();
      },
      [&] {
        posenc_bench::stream_rmw(emb.data(), emb.size());
        benchmark::DoNotOptimize(emb.data());
        benchmark::ClobberMemory();
      });
  const auto bytes = static_cast<std::int64_t>(emb.size() * sizeof(float));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * 2 * bytes);
  state.SetLabel(posenc_bench::ratio_label("stream_rmw/" + std::to_string(bytes), 0.70));
}
BENCHMARK(BM_Sinusoidal_AddInplace)
    ->ArgNames({"batch", "seq", "d", "layout"})
    ->UseManualTime()
    ->Args({1, 4096, 4096, 0})
    ->Args({1, 4096, 4096, 1})
    ->Args({8, 512, 1024, 0})
    ->Args({8, 512, 1024, 2});

void BM_Sinusoidal_Table(benchmark::State& state) {
  const Eigen::Index rows = state.range(0), d = state.range(1);
  std::vector<float> table(static_cast<std::size_t>(rows * d));
  const posenc::SinusoidalPlan plan(d);
  for (auto _ : state) {
    posenc::sinusoidal_table<float>(posenc::TensorView<float, 2>(table.data(), rows, d), plan);
    benchmark::DoNotOptimize(table.data());
    benchmark::ClobberMemory();
  }
  // A table build only writes: compare it with memcpy's rate over the same bytes (which counts
  // read + write) as an indication, without a floor.
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(table.size() * sizeof(float)));
}
BENCHMARK(BM_Sinusoidal_Table)->ArgNames({"positions", "d"})->Args({4096, 4096})->Args({512, 1024});

}  // namespace
