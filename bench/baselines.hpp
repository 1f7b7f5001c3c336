#pragma once
// Memory-bandwidth baselines every kernel benchmark is judged against, over the same bytes.

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "summary.hpp"

namespace posenc_bench {

/// n floats uniform in [-1, 1) from a 64-bit LCG (Knuth's MMIX constants): the same inputs on
/// every machine and standard library, so runs compare.
inline std::vector<float> filled(std::size_t n, std::uint64_t seed) {
  std::vector<float> x(n);
  std::uint64_t s = seed;
  for (auto& v : x) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    v = static_cast<float>(static_cast<double>(s >> 40) / static_cast<double>(1ULL << 24)) * 2.0f -
        1.0f;
  }
  return x;
}

/// n floats (all `value`) starting on a cache line, as the kernels' buffers do. The label
/// baselines used to stream std::vector storage, 16 bytes off a line (glibc's large blocks), so
/// 32-float rows touched three lines instead of two, and the rotary_dim 32 cells from DRAM read
/// 1.9-2.3 "of the stream" against 0.69-0.76 paired.
class AlignedFloats {
 public:
  AlignedFloats(std::size_t n, float value)
      : data_(static_cast<float*>(::operator new(n * sizeof(float), std::align_val_t{64}))),
        n_(n) {
    std::fill_n(data_.get(), n_, value);
  }
  float* data() noexcept { return data_.get(); }
  std::size_t size() const noexcept { return n_; }

 private:
  struct Free {
    void operator()(float* p) const noexcept { ::operator delete(p, std::align_val_t{64}); }
  };
  std::unique_ptr<float, Free> data_;
  std::size_t n_;
};

// The streams below are defined out of line in streams.cpp, which is built with every loop
// starting on a 64-byte boundary (bench/CMakeLists.txt). Inlined into the benchmark files, or
// out of line at whatever address the linker gave them, their speed followed unrelated code:
// Zen 3, the same stream loop (23 bytes) starting 48 bytes into a 64-byte line instead of at its
// start ran 11 % slower over 8 MiB (L3) and 2.1x slower over 256 KiB (L2), and in two benchmark
// binaries differing only in the half-split RoPE kernels, the interleaved cells' paired
// reference took 178 and 164 us while the kernel took the same 196-218 us.

/// x[i] = x[i] * a + b over n floats: one read and one write per element, the traffic of any
/// in-place elementwise kernel. Reported bytes: 2 * n * sizeof(float) per pass.
void stream_rmw(float* x, std::size_t n);

/// stream_rmw's traffic and one vector add per vector, leaving every value as it was (x + 0.0f
/// only turns -0.0f into +0.0f, so the compiler keeps it). The paired reference for buffers of
/// 16-bit values: read as floats and driven towards 1 by stream_rmw, their low halves become
/// arbitrary bfloat16 words (NaN, Inf, denormal), which real activations are not. From L2 it
/// is faster than stream_rmw (Zen 5, 128 KiB: 551-571 vs 721 ns; a stream flipping every sign
/// bit, which changes each word, 561 ns), so ratios paired with it are the stricter ones.
void stream_rmw_keep(float* x, std::size_t n);

/// stream_rmw (keep_values: stream_rmw_keep) over `rows` runs of `width` floats whose starts
/// are `stride` floats apart: the traffic of an in-place kernel that rewrites only part of each
/// row (RoPE with rotary_dim < head_dim rotates the first rotary_dim values of every head).
void stream_rmw_rows(float* x, std::size_t rows, std::size_t width, std::size_t stride,
                     bool keep_values);

/// Sum of n floats with Eigen's vectorised reduction (several packet accumulators): the ceiling
/// of any kernel that only reads its data, e.g. attention decode over a KV cache. (A plain C++
/// loop is not vectorised without -ffast-math and would understate the ceiling 3x.)
float stream_read(const float* x, std::size_t n);

/// Runs the in-place stream over `bytes` bytes (rounded down to floats) and labels it as the
/// baseline "stream_rmw/<bytes>".
inline void run_stream_rmw_baseline(benchmark::State& state, std::size_t bytes) {
  AlignedFloats x(bytes / sizeof(float), 1.0f);
  for (auto _ : state) {
    stream_rmw(x.data(), x.size());
    benchmark::DoNotOptimize(x.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(2 * x.size() * sizeof(float)));
  state.SetLabel(baseline_label("stream_rmw/" + std::to_string(bytes)));
}

/// Bytes of the buffer evict_caches() reads: twice the largest cache Google Benchmark reports
/// (the L3), and at least 64 MiB.
inline std::size_t eviction_bytes() {
  std::size_t largest = 0;
  for (const auto& cache : benchmark::CPUInfo::Get().caches) {
    largest = std::max(largest, static_cast<std::size_t>(std::max(cache.size, 0)));
  }
  return std::max<std::size_t>(std::size_t{64} << 20, 2 * largest);
}

/// Reads a buffer of eviction_bytes() (allocated once), so that what a kernel or a stream reads
/// next comes from DRAM: the state a decode step's K / V are in when the other layers' caches
/// have passed through the L3 since the layer's last step.
inline void evict_caches() {
  static const std::vector<float> buffer(eviction_bytes() / sizeof(float), 1.0f);
  benchmark::DoNotOptimize(stream_read(buffer.data(), buffer.size()));
  benchmark::ClobberMemory();
}

/// Reads `bytes` bytes per iteration (rounded down to floats), each pass after evict_caches()
/// and timed alone (register with UseManualTime()); baseline "stream_read/<bytes>", of the
/// kernels timed by run_paired_cold. Reported bytes: bytes per pass (read only).
inline void run_stream_read_baseline(benchmark::State& state, std::size_t bytes) {
  AlignedFloats x(bytes / sizeof(float), 1.0f);
  for (auto _ : state) {
    evict_caches();
    const auto t0 = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(stream_read(x.data(), x.size()));
    benchmark::ClobberMemory();
    state.SetIterationTime(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(x.size() * sizeof(float)));
  state.SetLabel(baseline_label("stream_read/" + std::to_string(bytes)));
}

}  // namespace posenc_bench

namespace posenc_bench {

/// The in-place stream of run_stream_rmw_baseline, split across a caller's thread pool:
/// parallel_for(n, fn) must call fn(begin, end) over disjoint ranges covering [0, n) (e.g. an
/// Eigen::ThreadPoolDevice's parallelFor). Labelled as the baseline "stream_rmw_<tag>/<bytes>",
/// so multi-threaded kernels are compared with the same pool moving the same bytes.
template <typename ParallelFor>
inline void run_stream_rmw_baseline_parallel(benchmark::State& state, std::size_t bytes,
                                             const std::string& tag, ParallelFor&& parallel_for) {
  AlignedFloats x(bytes / sizeof(float), 1.0f);
  float* data = x.data();
  for (auto _ : state) {
    parallel_for(x.size(), [data](std::size_t begin, std::size_t end) {
      stream_rmw(data + begin, end - begin);
    });
    benchmark::DoNotOptimize(x.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(2 * x.size() * sizeof(float)));
  state.SetLabel(baseline_label("stream_rmw_" + tag + "/" + std::to_string(bytes)));
}

/// The pairs of run_paired (kCold false) and run_paired_cold (kCold true).
template <bool kCold, typename Kernel, typename Reference>
double run_paired_passes(benchmark::State& state, Kernel&& kernel, Reference&& reference) {
  using Clock = std::chrono::steady_clock;
  double best_kernel = 1e30, best_reference = 1e30;
  for (auto _ : state) {
    if constexpr (kCold) evict_caches();
    const auto t0 = Clock::now();
    kernel();
    auto t1 = Clock::now();
    const double tk = std::chrono::duration<double>(t1 - t0).count();
    if constexpr (kCold) {
      evict_caches();
      t1 = Clock::now();
    }
    reference();
    const double tr = std::chrono::duration<double>(Clock::now() - t1).count();
    state.SetIterationTime(tk);
    best_kernel = std::min(best_kernel, tk);
    best_reference = std::min(best_reference, tr);
  }
  return best_reference / best_kernel;
}

/// Times `kernel` as the benchmark's manual time and, right after each kernel pass, a
/// `reference` pass (a baseline over the same bytes). Returns best reference time / best kernel
/// time: timed back to back, the pair sees the same machine state and cache residency, which a
/// separate baseline benchmark does not on a shared VM. Register with UseManualTime(). Kernels
/// that only read inputs about the size of the L3 take run_paired_cold instead.
template <typename Kernel, typename Reference>
double run_paired(benchmark::State& state, Kernel&& kernel, Reference&& reference) {
  return run_paired_passes<false>(state, kernel, reference);
}

/// run_paired with evict_caches() before the kernel pass and before the reference pass, so
/// both read from DRAM, for kernels that only read large inputs (a decode step over its KV
/// cache). The reference must read bytes of its own, not the kernel's: the eviction pass did
/// not clear a buffer read twice an iteration. Float kv 8 decode, 32 MiB of K + V, Zen 3
/// (32 MiB L3), a driver's best of 100:
///   the read stream right after the step, on the step's cache:      step 1.43-1.53 ms, stream
///     0.92-1.06 ms (0.64-0.69 of the stream);
///   the same, each after the eviction pass:                          1.87-1.96, 1.37-1.56 ms;
///   the stream over a copy of the cache, each after the eviction:    2.06-2.14, 1.75-1.86 ms
///     (0.83-0.86).
template <typename Kernel, typename Reference>
double run_paired_cold(benchmark::State& state, Kernel&& kernel, Reference&& reference) {
  return run_paired_passes<true>(state, kernel, reference);
}

}  // namespace posenc_bench
