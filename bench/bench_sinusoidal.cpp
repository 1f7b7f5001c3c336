// Sinusoidal absolute encodings: table build and in-place add, against the in-place stream over
// the same embedding bytes; the same for the fixed sin-cos grids of vision transformers; DETR's
// sine embedding of a padded batch against a write of its bytes and HF's per-element way.

#include <posenc/sincos_grid.hpp>
#include <posenc/sine_embedding_2d.hpp>
#include <posenc/sinusoidal.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
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

// DETR's sine embedding (sine_embedding_2d, planned once) of a batch of two images, the second
// padded to the first's size (3 / 4 of its columns real), 2 x 128 channels. Levels: DETR-R50 at
// stride 32 of 800 x 1216 pixels (25 x 38, 0.9 MiB of output, from cache) and Deformable DETR's
// stride 8 (100 x 152, 14.8 MiB), float. Paired with (a) std::fill over the same bytes, the
// write-bandwidth bound of any table, and (b) HF's way (DetrSinePositionEmbedding), one sin or
// cos per output element from the two cumulative sums, in double: what an engine porting the
// Python would write. Reported without a floor (no issue sets one).
void BM_SineEmbedding2d(benchmark::State& state) {
  const Eigen::Index batch = 2, h = state.range(0), w = state.range(1);
  posenc::SineEmbedding2dParams params;  // F = 128, DETR's d_model 256
  const posenc::SineEmbedding2dPlan plan(params);
  const Eigen::Index f = params.num_pos_feats, dim = plan.dim();
  std::vector<std::uint8_t> mask(static_cast<std::size_t>(batch * h * w), 1);
  for (Eigen::Index i = 0; i < h; ++i) {
    for (Eigen::Index j = w * 3 / 4; j < w; ++j) {
      mask[static_cast<std::size_t>((h + i) * w + j)] = 0;
    }
  }
  std::vector<float> out(static_cast<std::size_t>(batch * h * w * dim));
  const auto kernel = [&] {
    posenc::sine_embedding_2d<float>(
        posenc::ConstTensorView<std::uint8_t, 3>(mask.data(), batch, h, w),
        posenc::TensorView<float, 4>(out.data(), batch, h, w, dim), plan);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  };
  const auto fill = [&] {
    std::fill(out.begin(), out.end(), 0.25f);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  };
  std::vector<double> y(mask.size()), x(mask.size());
  const auto per_element = [&] {
    for (Eigen::Index b = 0; b < batch; ++b) {
      for (Eigen::Index i = 0; i < h; ++i) {
        for (Eigen::Index j = 0; j < w; ++j) {
          const auto t = static_cast<std::size_t>((b * h + i) * w + j);
          const double m = mask[t];
          y[t] = m + (i > 0 ? y[t - static_cast<std::size_t>(w)] : 0.0);
          x[t] = m + (j > 0 ? x[t - 1] : 0.0);
        }
      }
      for (Eigen::Index i = 0; i < h; ++i) {
        for (Eigen::Index j = 0; j < w; ++j) {
          const auto t = static_cast<std::size_t>((b * h + i) * w + j);
          const double yn = y[t] / (y[static_cast<std::size_t>((b * h + h - 1) * w + j)] + 1e-6);
          const double xn = x[t] / (x[static_cast<std::size_t>((b * h + i) * w + w - 1)] + 1e-6);
          float* row = out.data() + t * static_cast<std::size_t>(dim);
          for (Eigen::Index c = 0; c < f; ++c) {
            const double inv = plan.inv_freq_y()[static_cast<std::size_t>(c / 2)];
            const double ay = yn * params.scale * inv, ax = xn * params.scale * inv;
            row[c] = static_cast<float>(c % 2 == 0 ? std::sin(ay) : std::cos(ay));
            row[f + c] = static_cast<float>(c % 2 == 0 ? std::sin(ax) : std::cos(ax));
          }
        }
      }
    }
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  };
  // Each kernel pass followed by both baselines; the ratios are best baseline time over best
  // kernel time, as run_paired's.
  using Clock = std::chrono::steady_clock;
  const auto seconds = [](Clock::time_point t0, Clock::time_point t1) {
    return std::chrono::duration<double>(t1 - t0).count();
  };
  double best_kernel = 1e30, best_fill = 1e30, best_naive = 1e30;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    kernel();
    const auto t1 = Clock::now();
    fill();
    const auto t2 = Clock::now();
    per_element();
    const auto t3 = Clock::now();
    state.SetIterationTime(seconds(t0, t1));
    best_kernel = std::min(best_kernel, seconds(t0, t1));
    best_fill = std::min(best_fill, seconds(t1, t2));
    best_naive = std::min(best_naive, seconds(t2, t3));
  }
  state.counters["paired_fill"] = best_fill / best_kernel;
  state.counters["paired_naive"] = best_naive / best_kernel;
  const auto bytes = static_cast<std::int64_t>(out.size() * sizeof(float));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * bytes);
}
BENCHMARK(BM_SineEmbedding2d)
    ->ArgNames({"h", "w"})
    ->UseManualTime()
    ->Args({25, 38})
    ->Args({100, 152});

}  // namespace
