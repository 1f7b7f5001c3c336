// Sinusoidal absolute encodings: table build and in-place add, against the in-place stream over
// the same embedding bytes; the same for the fixed sin-cos grids of vision transformers.

#include <posenc/sincos_grid.hpp>
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

// Patch embeddings + their fixed 2-D sin-cos table (add_sincos_grid_inplace), MAE's layout:
// ViT-B/16 at 224 px (14 x 14 patches + class token, 768 channels, batch 8: 4.6 MiB, from the
// L3), DiT-XL/2 at 256 px (32 x 32, 1152, batch 8: 36 MiB) and SD3 at 1024 px (64 x 64, 1536,
// batch 2: 48 MiB), paired with the in-place stream over the same buffer. Reported without a
// floor (no issue sets one). The rows come from per-axis rows planned once, so each vector of
// x costs one more load than the stream's (0.6-0.75 of it on Zen 4; a constant in its place
// ran at 0.95-1.03).
void BM_SincosGrid_AddInplace(benchmark::State& state) {
  const Eigen::Index batch = state.range(0), side = state.range(1), dim = state.range(2);
  const bool cls = state.range(3) != 0;
  const posenc::SincosGridPlan plan(posenc::sincos_grid_mae(dim, side, side, cls));
  std::vector<float> x(static_cast<std::size_t>(batch * plan.tokens() * dim), 0.5f);
  state.counters["paired_stream"] = posenc_bench::run_paired(
      state,
      [&] {
        posenc::add_sincos_grid_inplace<float>(
            posenc::TensorView<float, 3>(x.data(), batch, plan.tokens(), dim), plan);
        benchmark::DoNotOptimize(x.data());
        benchmark::ClobberMemory();
      },
      [&] {
        posenc_bench::stream_rmw(x.data(), x.size());
        benchmark::DoNotOptimize(x.data());
        benchmark::ClobberMemory();
      });
  const auto bytes = static_cast<std::int64_t>(x.size() * sizeof(float));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * 2 * bytes);
  state.SetLabel(posenc_bench::ratio_label("stream_rmw/" + std::to_string(bytes), 0.0));
}
BENCHMARK(BM_SincosGrid_AddInplace)
    ->ArgNames({"batch", "side", "dim", "cls"})
    ->UseManualTime()
    ->Args({8, 14, 768, 1})
    ->Args({8, 32, 1152, 0})
    ->Args({2, 64, 1536, 0});

}  // namespace
