// Swin's windows (swin_window.hpp), against in-run references on the same bytes / shapes:
//  - swin_partition_windows / swin_merge_windows (pad, cyclic shift, window gather) vs a
//    memcpy of the map's bytes, paired and as a label (no floor: a gather of rows of one
//    token's channels, 512 bytes for Swin-B);
//  - a block's window attention with its bias (a shifted block's relative table + shift mask,
//    [windows, heads, N, N]; an unshifted block's [1, heads, N, N]) vs the same call without a
//    bias, in GFLOP/s (no floor; the 10 % bound is ALiBi's, computed, not read).
// Shapes: stage 0 of Swin-T at 224 px (56 x 56 patches, window 7, 3 heads of 32) and of
// Swin-B at 384 px (96 x 96, window 12, 4 heads of 32), batch 1.

#include <posenc/attention.hpp>
#include <posenc/swin_window.hpp>

#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "baselines.hpp"
#include "summary.hpp"

namespace {

struct SwinStage0 {
  const char* name;
  Eigen::Index side, window, heads, channels;
};
constexpr SwinStage0 kStages[2] = {{"swin_t_224", 56, 7, 3, 96}, {"swin_b_384", 96, 12, 4, 128}};

using posenc_bench::filled;

// The memcpy of one stage's map: read + write of its bytes.
void BM_Swin_MapMemcpy(benchmark::State& state) {
  const SwinStage0& st = kStages[state.range(0)];
  const auto n = static_cast<std::size_t>(st.side * st.side * st.channels);
  const auto src = filled(n, 1);
  std::vector<float> dst(n);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), n * sizeof(float));
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(2 * n * sizeof(float)));
  state.SetLabel(posenc_bench::baseline_label(std::string("memcpy/") + st.name));
}
BENCHMARK(BM_Swin_MapMemcpy)->ArgName("stage")->Arg(0)->Arg(1);

// op 0: partition (map -> windows), 1: merge (windows -> map), of a shifted block. Bytes: the
// map's, read and written (the padding the windows add is not counted).
void BM_Swin_Windows(benchmark::State& state) {
  const SwinStage0& st = kStages[state.range(0)];
  const bool merge = state.range(1) != 0;
  const posenc::SwinWindowLayout l = posenc::swin_block_layout(st.side, st.side, st.window, true);
  const Eigen::Index nw = posenc::swin_num_windows(l), n = posenc::swin_window_tokens(l);
  const auto map_elems = static_cast<std::size_t>(st.side * st.side * st.channels);
  const auto map = filled(map_elems, 2);
  std::vector<float> windows(static_cast<std::size_t>(nw * n * st.channels)), back(map_elems),
      copy(map_elems);
  const auto kernel = [&] {
    if (merge) {
      posenc::swin_merge_windows<float>(
          posenc::ConstTensorView<float, 3>(windows.data(), nw, n, st.channels), l,
          posenc::TensorView<float, 4>(back.data(), 1, st.side, st.side, st.channels));
      benchmark::DoNotOptimize(back.data());
    } else {
      posenc::swin_partition_windows<float>(
          posenc::ConstTensorView<float, 4>(map.data(), 1, st.side, st.side, st.channels), l,
          posenc::TensorView<float, 3>(windows.data(), nw, n, st.channels));
      benchmark::DoNotOptimize(windows.data());
    }
    benchmark::ClobberMemory();
  };
  const auto reference = [&] {
    std::memcpy(copy.data(), map.data(), map_elems * sizeof(float));
    benchmark::DoNotOptimize(copy.data());
    benchmark::ClobberMemory();
  };
  kernel();  // the windows merge reads
  state.counters["paired_memcpy"] = posenc_bench::run_paired(state, kernel, reference);
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(2 * map_elems * sizeof(float)));
  state.SetLabel(posenc_bench::ratio_label(std::string("memcpy/") + st.name, 0.0));
}
BENCHMARK(BM_Swin_Windows)
    ->ArgNames({"stage", "merge"})
    ->Args({0, 0})
    ->Args({0, 1})
    ->Args({1, 0})
    ->Args({1, 1})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

// A block's attention over its windows: batch = windows, N = window^2 tokens, bidirectional;
// bias 0: none, 1: a shifted block's [windows, heads, N, N] (swin_window_bias), 2: an unshifted
// block's [1, heads, N, N], one bias every window reads.
void BM_Swin_WindowAttention(benchmark::State& state) {
  const SwinStage0& st = kStages[state.range(0)];
  const bool biased = state.range(1) != 0, shared = state.range(1) == 2;
  const posenc::SwinWindowLayout l = posenc::swin_block_layout(st.side, st.side, st.window, true);
  const Eigen::Index nw = posenc::swin_num_windows(l), n = posenc::swin_window_tokens(l);
  const Eigen::Index heads = st.heads, d = st.channels / st.heads;
  const Eigen::Index rows = (2 * st.window - 1) * (2 * st.window - 1);
  const auto table = filled(static_cast<std::size_t>(rows * heads), 3);
  std::vector<float> bias(static_cast<std::size_t>(nw * heads * n * n));
  posenc::swin_window_bias<float>(posenc::ConstTensorView<float, 2>(table.data(), rows, heads), l,
                                  posenc::TensorView<float, 4>(bias.data(), nw, heads, n, n));
  const auto q = filled(static_cast<std::size_t>(nw * n * heads * d), 4);
  const auto k = filled(q.size(), 5);
  const auto v = filled(q.size(), 6);
  std::vector<float> out(q.size());
  posenc::AttentionParams params;
  params.mask = posenc::MaskMode::kBidirectional;
  posenc::AttentionMetadata meta;
  if (biased) meta.attention_bias.emplace(bias.data(), shared ? 1 : nw, heads, n, n);
  posenc::AttentionWorkspace ws;
  for (auto _ : state) {
    posenc::attention<float>(posenc::ConstTensorView<float, 4>(q.data(), nw, n, heads, d),
                             posenc::ConstTensorView<float, 4>(k.data(), nw, n, heads, d),
                             posenc::ConstTensorView<float, 4>(v.data(), nw, n, heads, d),
                             posenc::TensorView<float, 4>(out.data(), nw, n, heads, d), params,
                             meta, &ws);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  const double flops = 2.0 * 2.0 * double(nw) * double(n) * double(n) * double(d) * double(heads);
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  const std::string id = std::string(st.name) + "/plain";
  state.SetLabel(biased ? posenc_bench::ratio_label(id, 0.0, "GFLOP/s")
                        : posenc_bench::baseline_label(id));
}
BENCHMARK(BM_Swin_WindowAttention)
    ->ArgNames({"stage", "bias"})
    ->Args({0, 0})
    ->Args({0, 1})
    ->Args({0, 2})
    ->Args({1, 0})
    ->Args({1, 1})
    ->Args({1, 2})
    ->Unit(benchmark::kMillisecond);

}  // namespace
