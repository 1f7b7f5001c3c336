// RoPE kernels against in-run baselines over the same bytes: the in-place stream (one read and
// one write of every activation byte, the floor of any in-place kernel's traffic), the same
// stream on 2 threads, and a naive Eigen tensor-expression RoPE written the obvious way (the
// seed article's PyTorch code: float angles, cos/sin tensors, even/odd strided slices).
//
// Shapes: head_dim 128, Llama-7B Q (32 heads) and GQA Q 32 + K 8, tokens T in
// {1, 16, 512, 4096, 32768}, rotary_dim 128 (and 32), both pair layouts, float and bfloat16.
// Run a subset with --benchmark_filter=Rope --benchmark_min_time=0.1.

// The threaded benchmarks pass an Eigen::ThreadPoolDevice, which Eigen only defines with this.
#define EIGEN_USE_THREADS

#include <posenc/mrope.hpp>
#include <posenc/rope.hpp>

#if defined(__AVX512BW__)
#include <immintrin.h>
#endif
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#include <utility>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "baselines.hpp"

namespace {

constexpr Eigen::Index kHeadDim = 128;

/// kRerotate: rerotate_rope_inplace of a KV cache's keys from one plan to another (theta
/// 10000 -> 500000), the one-pass composed rotation; reported against the stream, no floor.
/// kMRope / kMRopeCache: apply_mrope_qk_inplace (each token's angles from its three positions)
/// and apply_mrope_qk_inplace_cached (rows of the cos/sin cache) with Qwen2-VL's sections
/// (16, 24, 24) over a prompt of text, an image and text; no floor either.
enum class Path { kCache, kOnTheFly, kRerotate, kMRope, kMRopeCache };

struct Config {
  bool bf16 = false;
  Path path = Path::kCache;
  posenc::RopeLayout layout = posenc::RopeLayout::kHalfSplit;
  Eigen::Index tokens = 1, q_heads = 32, kv_heads = 0, rotary_dim = 128;
  int threads = 1;
  // Activations start 64-byte aligned, as tensor allocators give them (PyTorch's, Eigen's
  // aligned_allocator at 32 or more); misaligned rows start 16 bytes past that, as a plain
  // std::vector's data may.
  bool misaligned = false;
};

/// n values of T starting 64-byte aligned, or 16 bytes past that when `misaligned`. (The
/// auto-vectorised stream peels to an aligned start; the kernels take the rows as they are, so
/// a 32-byte vector access straddles two cache lines every other time on misaligned rows.)
template <typename T>
class Activations {
 public:
  Activations(std::size_t n, bool misaligned)
      : memory_(static_cast<T*>(::operator new((n + 64) * sizeof(T), std::align_val_t{64}))),
        data_(memory_.get() + (misaligned ? 16 / sizeof(T) : 0)),
        n_(n) {
    std::uninitialized_fill_n(data_, n_, T(0.0f));
  }
  T* data() noexcept { return data_; }
  std::size_t size() const noexcept { return n_; }
  T& operator[](std::size_t i) noexcept { return data_[i]; }

 private:
  struct Free {
    void operator()(T* p) const noexcept { ::operator delete(p, std::align_val_t{64}); }
  };
  std::unique_ptr<T, Free> memory_;
  T* data_;
  std::size_t n_;
};

/// The process-wide 2-thread pool of the threaded benchmarks (the library has no global state;
/// the benchmark, as a caller, owns this one).
Eigen::ThreadPoolDevice& device2() {
  static Eigen::ThreadPool pool(2);
  static Eigen::ThreadPoolDevice device(&pool, 2);
  return device;
}

std::string stream_id(std::size_t bytes, int threads) {
  return (threads == 1 ? std::string("stream_rmw/") : std::string("stream_rmw_2t/")) +
         std::to_string(bytes);
}

/// A partial-rotary cell's label baseline: the in-place stream over the same rows and slices
/// (`rows` runs of `width` floats, `stride` floats apart), in a buffer of the kernel's size.
struct RowStream {
  std::size_t rows, width, stride;
  bool operator<(const RowStream& o) const {
    return std::tie(rows, width, stride) < std::tie(o.rows, o.width, o.stride);
  }
  bool operator==(const RowStream& o) const {
    return rows == o.rows && width == o.width && stride == o.stride;
  }
  std::string id() const {
    return "stream_rmw_rows/" + std::to_string(rows) + "x" + std::to_string(width) + "of" +
           std::to_string(stride);
  }
};

template <typename T>
RowStream row_stream(const Eigen::Index tokens, const Eigen::Index heads, const Eigen::Index rd) {
  const std::size_t per_float = sizeof(float) / sizeof(T);
  return RowStream{static_cast<std::size_t>(tokens * heads),
                   static_cast<std::size_t>(rd) / per_float,
                   static_cast<std::size_t>(kHeadDim) / per_float};
}

template <typename T>
std::size_t activation_bytes(const Config& c) {
  return static_cast<std::size_t>(c.tokens * (c.q_heads + c.kv_heads) * kHeadDim) * sizeof(T);
}

/// The bytes an in-place call reads and writes once each: the first rotary_dim values of every
/// head (all of them at rotary_dim = head_dim). Partial-rotary cells are credited and compared
/// with these, not with the whole tensor, whose other values the kernel never touches.
template <typename T>
std::size_t rotated_bytes(const Config& c) {
  return static_cast<std::size_t>(c.tokens * (c.q_heads + c.kv_heads) * c.rotary_dim) * sizeof(T);
}

/// Calls timed together on the same (cache-resident) buffer: decode-sized calls (16 KiB at
/// T = 1, ~0.1 us) are too close to the clock's resolution and overhead to time one by one.
int calls_per_timing(std::size_t bytes) {
  return static_cast<int>(std::clamp<std::size_t>((std::size_t{256} << 10) / bytes, 1, 64));
}

/// The in-place stream over n floats at x, on 1 or 2 threads (one contiguous half per thread);
/// keep_values: stream_rmw_keep, for buffers of 16-bit values.
void stream_pass(float* x, std::size_t n, int threads, bool keep_values) {
  void (*pass)(float*, std::size_t) =
      keep_values ? posenc_bench::stream_rmw_keep : posenc_bench::stream_rmw;
  if (threads == 1) {
    pass(x, n);
    return;
  }
  device2().parallelFor(2, Eigen::TensorOpCost(1e9, 1e9, 1e9),
                        [x, n, pass](Eigen::Index first, Eigen::Index last) {
                          for (Eigen::Index part = first; part < last; ++part) {
                            const auto p = static_cast<std::size_t>(part);
                            pass(x + p * n / 2, (p + 1) * n / 2 - p * n / 2);
                          }
                        });
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

template <typename T>
void run_rope(benchmark::State& state, Config c) {
  const Eigen::Index n_q = c.tokens * c.q_heads * kHeadDim;
  const Eigen::Index n_k = c.tokens * c.kv_heads * kHeadDim;
  Activations<T> q(static_cast<std::size_t>(n_q), c.misaligned), k(static_cast<std::size_t>(n_k), c.misaligned);
  for (std::size_t i = 0; i < q.size(); ++i) q[i] = T(static_cast<float>(i % 97) * 0.01f - 0.5f);
  for (std::size_t i = 0; i < k.size(); ++i) k[i] = T(static_cast<float>(i % 89) * 0.01f - 0.4f);
  posenc::RopeParams params;
  params.head_dim = kHeadDim;
  params.rotary_dim = c.rotary_dim;
  const auto freqs = posenc::compute_rope_frequencies(params);
  params.theta = 500000.0;
  const auto freqs_to = posenc::compute_rope_frequencies(params);
  // Decode (T = 1) sits at position 4095 of a 4096-token context; prefill starts at 0.
  const std::int64_t start = c.tokens == 1 ? 4095 : 0;
  const auto cache = posenc::make_rope_cos_sin_cache(freqs, start + c.tokens);
  const posenc::ConstTensorView<float, 2> cview(cache.data(), cache.dimension(0), cache.dimension(1));
  const auto positions = posenc::RopePositions::contiguous(1, c.tokens, start);
  // M-RoPE: text, then an image of about half the tokens (32 columns), then text.
  std::vector<std::int64_t> mpos(static_cast<std::size_t>(3 * c.tokens));
  posenc::MRopeSections sections;
  sections.section = {16, 24, 24};
  if (c.path == Path::kMRope || c.path == Path::kMRopeCache) {
    const Eigen::Index rows = std::max<Eigen::Index>(1, c.tokens / 64), image = 32 * rows;
    const Eigen::Index before = (c.tokens - image) / 2;
    posenc::mrope_position_ids({posenc::MRopeSegment::text(before), posenc::MRopeSegment::image(rows, 32),
                                posenc::MRopeSegment::text(c.tokens - image - before)},
                               posenc::TensorView<std::int64_t, 3>(mpos.data(), 3, 1, c.tokens));
  }
  const posenc::MRopePositionsView mview(mpos.data(), 3, 1, c.tokens);
  const auto hq = posenc::rope_heads<T>(posenc::TensorView<T, 4>(q.data(), 1, c.tokens, c.q_heads, kHeadDim));
  const auto hk = posenc::rope_heads<T>(posenc::TensorView<T, 4>(k.data(), 1, c.tokens, c.kv_heads, kHeadDim));
  posenc::RopeApplyOptions options;
  if (c.threads == 2) options.set_device(device2());
  const std::size_t bytes = rotated_bytes<T>(c);
  const int batch = calls_per_timing(activation_bytes<T>(c));
  const auto call = [&] {
    if (c.path == Path::kRerotate) {
      posenc::rerotate_rope_inplace<T>(hq, positions, freqs, freqs_to, c.layout, options);
    } else if (c.path == Path::kMRope) {
      posenc::apply_mrope_qk_inplace<T>(hq, hk, mview, freqs, c.layout, sections, options);
    } else if (c.path == Path::kMRopeCache) {
      posenc::apply_mrope_qk_inplace_cached<T>(hq, hk, mview, cview, c.layout, sections, 0, options);
    } else if (c.kv_heads > 0) {
      if (c.path == Path::kCache) {
        posenc::apply_rope_qk_inplace_cached<T>(hq, hk, positions, cview, c.layout, 0, options);
      } else {
        posenc::apply_rope_qk_inplace<T>(hq, hk, positions, freqs, c.layout, options);
      }
    } else {
      if (c.path == Path::kCache) {
        posenc::apply_rope_inplace_cached<T>(hq, positions, cview, c.layout, 0, options);
      } else {
        posenc::apply_rope_inplace<T>(hq, positions, freqs, c.layout, options);
      }
    }
    benchmark::DoNotOptimize(q.data());
    benchmark::DoNotOptimize(k.data());
    benchmark::ClobberMemory();
  };
  const auto kernel = [&] {
    for (int i = 0; i < batch; ++i) call();
  };
  // The paired reference streams over the kernel's own buffers (as floats: the same bytes and
  // the same cache residency). On float buffers it drives every value towards 1, so the
  // rotated values stay normal numbers (no denormal slow paths) for both. On bfloat16 buffers
  // it leaves the values as they are. Driven towards 1 as floats, 5 % of the bf16 words became
  // NaN / Inf and 7 % nonzero but below 2^-87, so the rotation gave denormal results and the
  // kernel took its integer rounding path and mispredicted branches (Zen 5, half-split T = 16:
  // 2.1 us a call on those words, 1.9 us on the activations as they were; the benchmark's
  // bf16 cells got 20-30 % faster with this reference).
  // Partial rotary: the stream rewrites the rotated part of each head only (rotary_dim values
  // every head_dim), the kernel's own traffic.
  const bool keep_values = !std::is_same_v<T, float>;
  const bool partial = c.rotary_dim < kHeadDim;
  const auto stream_buffer = [&](T* data, std::size_t n) {
    auto* x = reinterpret_cast<float*>(data);
    if (partial) {
      const std::size_t per_float = sizeof(float) / sizeof(T);
      posenc_bench::stream_rmw_rows(x, n / kHeadDim, static_cast<std::size_t>(c.rotary_dim) / per_float,
                                    kHeadDim / per_float, keep_values);
    } else {
      stream_pass(x, n * sizeof(T) / sizeof(float), c.threads, keep_values);
    }
  };
  const auto reference = [&] {
    for (int i = 0; i < batch; ++i) {
      stream_buffer(q.data(), q.size());
      stream_buffer(k.data(), k.size());
      benchmark::DoNotOptimize(q.data());
      benchmark::DoNotOptimize(k.data());
      benchmark::ClobberMemory();
    }
  };
  state.counters[c.threads == 2 ? "paired_stream_2t" : "paired_stream"] =
      posenc_bench::run_paired(state, kernel, reference);
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * batch * 2 *
                          static_cast<std::int64_t>(bytes));
  if (batch > 1) state.counters["calls_per_timing"] = batch;
  double floor = c.path == Path::kCache ? 0.90 : 0.50;
  if (c.bf16) floor = 0.70;
  if (c.threads == 2) floor = 0.90;
  if (c.path == Path::kRerotate || c.path == Path::kMRope || c.path == Path::kMRopeCache) {
    floor = 0.0;
  }
  const std::string baseline =
      partial ? row_stream<T>(c.tokens, c.q_heads + c.kv_heads, c.rotary_dim).id()
              : stream_id(bytes, c.threads);
  state.SetLabel(posenc_bench::ratio_label(baseline, floor));
}

/// The seed's PyTorch apply_rope transcribed to Eigen tensor expressions: float angles, cos/sin
/// tensors materialised per call, even/odd (or two halves) slices combined by broadcasting.
void naive_eigen_rope(float* data, Eigen::Index tokens, Eigen::Index heads, Eigen::Index d,
                      const Eigen::Tensor<float, 1, Eigen::RowMajor>& inv_freq,
                      posenc::RopeLayout layout) {
  using Idx = Eigen::Index;
  posenc::TensorView<float, 3> x(data, tokens, heads, d);
  const Idx half = d / 2;
  Eigen::Tensor<float, 1, Eigen::RowMajor> pos(tokens);
  for (Idx t = 0; t < tokens; ++t) pos(t) = static_cast<float>(t);
  const Eigen::array<Idx, 2> col{tokens, 1}, row{1, half};
  const Eigen::array<Idx, 2> bc_col{1, half}, bc_row{tokens, 1};
  const Eigen::Tensor<float, 2, Eigen::RowMajor> angles =
      pos.reshape(col).broadcast(bc_col) * inv_freq.reshape(row).broadcast(bc_row);
  const Eigen::Tensor<float, 2, Eigen::RowMajor> cos = angles.unaryExpr([](float a) { return std::cos(a); });
  const Eigen::Tensor<float, 2, Eigen::RowMajor> sin = angles.unaryExpr([](float a) { return std::sin(a); });
  const Eigen::array<Idx, 3> per_token{tokens, 1, half}, over_heads{1, heads, 1};
  const auto c3 = cos.reshape(per_token).broadcast(over_heads);
  const auto s3 = sin.reshape(per_token).broadcast(over_heads);
  const Eigen::array<Idx, 3> extent{tokens, heads, half};
  if (layout == posenc::RopeLayout::kHalfSplit) {
    const Eigen::array<Idx, 3> o1{0, 0, 0}, o2{0, 0, half};
    const Eigen::Tensor<float, 3, Eigen::RowMajor> x1 = x.slice(o1, extent);
    const Eigen::Tensor<float, 3, Eigen::RowMajor> x2 = x.slice(o2, extent);
    x.slice(o1, extent) = x1 * c3 - x2 * s3;
    x.slice(o2, extent) = x2 * c3 + x1 * s3;
  } else {
    const Eigen::array<Idx, 3> stride{1, 1, 2}, o0{0, 0, 0}, o1{0, 0, 1}, all{tokens, heads, d - 1};
    const Eigen::Tensor<float, 3, Eigen::RowMajor> even = x.stride(stride);
    const Eigen::Tensor<float, 3, Eigen::RowMajor> odd = x.slice(o1, all).stride(stride);
    x.stride(stride) = even * c3 - odd * s3;
    x.slice(o1, all).stride(stride) = even * s3 + odd * c3;
    (void)o0;
  }
}

std::string naive_id(posenc::RopeLayout layout, Eigen::Index tokens) {
  return "naive_eigen/" + std::string(posenc::to_string(layout)) + "/" + std::to_string(tokens);
}

/// The naive version allocates its temporaries (x1, x2, angles, cos, sin: 4 MiB each at
/// T = 512) in every call, as the PyTorch code it transcribes does. PyTorch's caching allocator
/// hands the same blocks back; glibc returns blocks past its mmap threshold to the kernel at
/// free(), and the next call page-faults them in again (measured on this VM: ~70 % of the naive
/// call, which inflated the 5x ratio 4-6 fold). While alive, this keeps freed blocks in the heap,
/// as a caching allocator would.
class CachingHeap {
 public:
  CachingHeap() {
#if defined(__GLIBC__)
    mallopt(M_MMAP_MAX, 0);
    mallopt(M_TRIM_THRESHOLD, INT_MAX);
#endif
  }
  ~CachingHeap() {
#if defined(__GLIBC__)
    mallopt(M_MMAP_MAX, 65536);  // glibc's defaults
    mallopt(M_TRIM_THRESHOLD, 128 * 1024);
    malloc_trim(0);
#endif
  }
  CachingHeap(const CachingHeap&) = delete;
  CachingHeap& operator=(const CachingHeap&) = delete;
};

void run_naive(benchmark::State& state, posenc::RopeLayout layout, Eigen::Index tokens) {
  const CachingHeap heap;
  const Eigen::Index heads = 32;
  std::vector<float> q(static_cast<std::size_t>(tokens * heads * kHeadDim));
  for (std::size_t i = 0; i < q.size(); ++i) q[i] = static_cast<float>(i % 97) * 0.01f - 0.5f;
  Eigen::Tensor<float, 1, Eigen::RowMajor> inv_freq(kHeadDim / 2);
  for (Eigen::Index j = 0; j < kHeadDim / 2; ++j) {
    inv_freq(j) = static_cast<float>(std::pow(10000.0, -2.0 * static_cast<double>(j) / kHeadDim));
  }
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    naive_eigen_rope(q.data(), tokens, heads, kHeadDim, inv_freq, layout);
    benchmark::DoNotOptimize(q.data());
    benchmark::ClobberMemory();
    state.SetIterationTime(seconds_since(t0));
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * 2 *
                          static_cast<std::int64_t>(q.size() * sizeof(float)));
  state.SetLabel(posenc_bench::baseline_label(naive_id(layout, tokens)));
}

/// The on-the-fly kernel paired with the naive version on a copy of the same tensor (floor 5x).
void run_vs_naive(benchmark::State& state, posenc::RopeLayout layout, Eigen::Index tokens) {
  const CachingHeap heap;
  const Eigen::Index heads = 32;
  std::vector<float> q(static_cast<std::size_t>(tokens * heads * kHeadDim));
  for (std::size_t i = 0; i < q.size(); ++i) q[i] = static_cast<float>(i % 97) * 0.01f - 0.5f;
  std::vector<float> q_naive = q;
  Eigen::Tensor<float, 1, Eigen::RowMajor> inv_freq(kHeadDim / 2);
  for (Eigen::Index j = 0; j < kHeadDim / 2; ++j) {
    inv_freq(j) = static_cast<float>(std::pow(10000.0, -2.0 * static_cast<double>(j) / kHeadDim));
  }
  posenc::RopeParams params;
  params.head_dim = kHeadDim;
  const auto freqs = posenc::compute_rope_frequencies(params);
  const auto hq = posenc::rope_heads<float>(posenc::TensorView<float, 4>(q.data(), 1, tokens, heads, kHeadDim));
  const auto positions = posenc::RopePositions::contiguous(1, tokens);
  state.counters["paired_naive"] = posenc_bench::run_paired(
      state,
      [&] {
        posenc::apply_rope_inplace<float>(hq, positions, freqs, layout);
        benchmark::DoNotOptimize(q.data());
        benchmark::ClobberMemory();
      },
      [&] {
        naive_eigen_rope(q_naive.data(), tokens, heads, kHeadDim, inv_freq, layout);
        benchmark::DoNotOptimize(q_naive.data());
        benchmark::ClobberMemory();
      });
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * 2 *
                          static_cast<std::int64_t>(q.size() * sizeof(float)));
  state.SetLabel(posenc_bench::ratio_label(naive_id(layout, tokens), 5.0));
}

/// Gemma-4's global layers: 16 query heads of 512, proportional RoPE with 64 of 256 pairs
/// turning (partial_rotary_factor 0.25, base 1e6), from the cos / sin cache; paired with a
/// whole-head rotation of the same tensor (default RoPE over 512 dims: the bytes a kernel that
/// rotated the still pairs too would move). Positions from 4096 on (no free position-0 rows).
template <typename T>
void run_proportional(benchmark::State& state, posenc::RopeLayout layout, Eigen::Index tokens) {
  const Eigen::Index heads = 16, head_dim = 512;
  std::vector<T> q(static_cast<std::size_t>(tokens * heads * head_dim));
  for (std::size_t i = 0; i < q.size(); ++i) q[i] = T(static_cast<float>(i % 97) * 0.01f - 0.5f);
  std::vector<T> q_full = q;
  posenc::RopeParams proportional;
  proportional.head_dim = head_dim;
  proportional.theta = 1e6;
  proportional.scaling.type = posenc::RopeScalingType::kProportional;
  proportional.partial_rotary_factor = 0.25;
  posenc::RopeParams full = proportional;
  full.scaling = posenc::RopeScaling{};
  full.partial_rotary_factor = 1.0;
  const auto cache_p = posenc::make_rope_cos_sin_cache(posenc::compute_rope_frequencies(proportional), 4096 + tokens);
  const auto cache_f = posenc::make_rope_cos_sin_cache(posenc::compute_rope_frequencies(full), 4096 + tokens);
  const posenc::ConstTensorView<float, 2> view_p(cache_p.data(), cache_p.dimension(0), cache_p.dimension(1));
  const posenc::ConstTensorView<float, 2> view_f(cache_f.data(), cache_f.dimension(0), cache_f.dimension(1));
  const auto hq = posenc::rope_heads<T>(posenc::TensorView<T, 4>(q.data(), 1, tokens, heads, head_dim));
  const auto hf = posenc::rope_heads<T>(posenc::TensorView<T, 4>(q_full.data(), 1, tokens, heads, head_dim));
  const auto positions = posenc::RopePositions::contiguous(1, tokens, 4096);
  state.counters["paired_full_head"] = posenc_bench::run_paired(
      state,
      [&] {
        posenc::apply_rope_inplace_cached<T>(hq, positions, view_p, layout, 0);
        benchmark::DoNotOptimize(q.data());
        benchmark::ClobberMemory();
      },
      [&] {
        posenc::apply_rope_inplace_cached<T>(hf, positions, view_f, layout, 0);
        benchmark::DoNotOptimize(q_full.data());
        benchmark::ClobberMemory();
      });
}

#if defined(__AVX512BW__)
/// What bounds bfloat16 rows in cache: the least arithmetic any half-split bf16 rotation issues
/// on AVX-512, as a kernel. Per 32 values: one 64-byte load, the even / odd widening (a shift
/// and an AND), the rotation's two multiplies and two FMAs (two FMA pipes: 2 cycles per 64
/// bytes on Zen 5), a truncating join (a shift and one vpternlogd) and one store. Not a correct
/// kernel: posenc's rounds to nearest even (vcvtne2ps2bf16 + a word permute) and tests for
/// denormal results, which only adds to this. Where this ceiling sits below the 0.70 floor of
/// issue 3, no kernel meets the floor.
void bf16_rotation_ceiling(std::uint16_t* x, Eigen::Index tokens, Eigen::Index heads,
                           const float* cos_sin) {  // cos_sin: [tokens][kHeadDim] cos | sin
  constexpr Eigen::Index half = kHeadDim / 2;
  const __m512i high_words = _mm512_set1_epi32(static_cast<int>(0xffff0000u));
  auto split = [&](const std::uint16_t* p, __m512& even, __m512& odd) {
    __m512i v = _mm512_load_si512(p);
    posenc::detail::keep_in_register(v);  // one load, as the stream does (not one per use)
    even = _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
    odd = _mm512_castsi512_ps(_mm512_and_si512(v, high_words));
  };
  auto join = [&](std::uint16_t* p, __m512 even, __m512 odd) {  // (odd & high) | (even >> 16)
    _mm512_store_si512(p, _mm512_ternarylogic_epi32(_mm512_castps_si512(odd),
                                                    _mm512_srli_epi32(_mm512_castps_si512(even), 16),
                                                    high_words, 0xE4));
  };
  for (Eigen::Index t = 0; t < tokens; ++t) {
    const float* c = cos_sin + t * kHeadDim;
    __m512 cv[half / 16], sv[half / 16];
    for (int k = 0; k < half / 16; ++k) {
      cv[k] = _mm512_loadu_ps(c + 16 * k);
      sv[k] = _mm512_loadu_ps(c + half + 16 * k);
    }
    for (Eigen::Index h = 0; h < heads; ++h) {
      std::uint16_t* y = x + (t * heads + h) * kHeadDim;
      for (int k = 0; k < half / 32; ++k) {
        __m512 ae, ao, be, bo;
        split(y + 32 * k, ae, ao);
        split(y + half + 32 * k, be, bo);
        const __m512 ce = cv[2 * k], co = cv[2 * k + 1], se = sv[2 * k], so = sv[2 * k + 1];
        join(y + 32 * k, _mm512_fmsub_ps(ae, ce, _mm512_mul_ps(be, se)),
             _mm512_fmsub_ps(ao, co, _mm512_mul_ps(bo, so)));
        join(y + half + 32 * k, _mm512_fmadd_ps(be, ce, _mm512_mul_ps(ae, se)),
             _mm512_fmadd_ps(bo, co, _mm512_mul_ps(ao, so)));
      }
    }
  }
}

/// The ceiling above over 32 heads x T tokens, paired with the in-place stream over the same
/// bytes as the kernels are (no floor: it is a bound, not a kernel).
void run_bf16_ceiling(benchmark::State& state, Eigen::Index tokens) {
  Config c;
  c.bf16 = true;
  c.tokens = tokens;
  const std::size_t bytes = activation_bytes<Eigen::bfloat16>(c);
  Activations<Eigen::bfloat16> q(bytes / sizeof(Eigen::bfloat16), false);
  for (std::size_t i = 0; i < q.size(); ++i) q[i] = Eigen::bfloat16(static_cast<float>(i % 97) * 0.01f - 0.5f);
  posenc::RopeParams params;
  params.head_dim = kHeadDim;
  const auto cache = posenc::make_rope_cos_sin_cache(posenc::compute_rope_frequencies(params), tokens);
  auto* x = reinterpret_cast<std::uint16_t*>(q.data());
  const int batch = calls_per_timing(bytes);
  state.counters["paired_stream"] = posenc_bench::run_paired(
      state,
      [&] {
        for (int i = 0; i < batch; ++i) {
          bf16_rotation_ceiling(x, tokens, c.q_heads, cache.data());
          benchmark::DoNotOptimize(x);
          benchmark::ClobberMemory();
        }
      },
      [&] {
        for (int i = 0; i < batch; ++i) {
          stream_pass(reinterpret_cast<float*>(x), bytes / sizeof(float), 1, true);
          benchmark::DoNotOptimize(x);
          benchmark::ClobberMemory();
        }
      });
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * batch * 2 *
                          static_cast<std::int64_t>(bytes));
  if (batch > 1) state.counters["calls_per_timing"] = batch;
  state.SetLabel(posenc_bench::ratio_label(stream_id(bytes, 1), 0.0));
}
#endif

std::string config_name(const Config& c) {
  const char* path = c.path == Path::kCache      ? "Cache"
                     : c.path == Path::kOnTheFly ? "OnTheFly"
                     : c.path == Path::kMRope    ? "MRope"
                     : c.path == Path::kMRopeCache ? "MRopeCache"
                                                 : "Rerotate";
  return std::string("BM_Rope_") + path +
         (c.threads == 2 ? "_2T" : "") + "/" + (c.bf16 ? "bf16" : "f32") + "/" +
         std::string(posenc::to_string(c.layout)) + "/q" + std::to_string(c.q_heads) + "k" +
         std::to_string(c.kv_heads) + "/rd" + std::to_string(c.rotary_dim) + "/T:" +
         std::to_string(c.tokens) + (c.misaligned ? "/misaligned16" : "");
}

void register_config(const Config& c, std::vector<std::pair<std::size_t, int>>& streams,
                     std::vector<RowStream>& row_streams) {
  if (c.rotary_dim < kHeadDim) {
    // Partial rotary runs on one thread (the strided reference stream is single-threaded).
    if (c.threads != 1) std::abort();
    const Eigen::Index heads = c.q_heads + c.kv_heads;
    row_streams.push_back(c.bf16 ? row_stream<Eigen::bfloat16>(c.tokens, heads, c.rotary_dim)
                                 : row_stream<float>(c.tokens, heads, c.rotary_dim));
  } else {
    streams.emplace_back(c.bf16 ? rotated_bytes<Eigen::bfloat16>(c) : rotated_bytes<float>(c),
                         c.threads);
  }
  if (c.bf16) {
    benchmark::RegisterBenchmark(config_name(c).c_str(), run_rope<Eigen::bfloat16>, c)->UseManualTime();
  } else {
    // Manual (wall-clock) time of the kernel alone: also right for the threaded runs, whose
    // work the main thread's CPU time would hide.
    benchmark::RegisterBenchmark(config_name(c).c_str(), run_rope<float>, c)->UseManualTime();
  }
}

const bool registered = [] {
  std::vector<std::pair<std::size_t, int>> streams;
  std::vector<RowStream> row_streams;
  for (const bool bf16 : {false, true}) {
    for (const Path path : {Path::kCache, Path::kOnTheFly}) {
      for (const auto layout : {posenc::RopeLayout::kHalfSplit, posenc::RopeLayout::kInterleaved}) {
        for (const Eigen::Index kv : {0, 8}) {
          for (const Eigen::Index tokens : {1, 16, 512, 4096, 32768}) {
            Config c;
            c.bf16 = bf16;
            c.path = path;
            c.layout = layout;
            c.kv_heads = kv;
            c.tokens = tokens;
            register_config(c, streams, row_streams);
          }
        }
        for (const Eigen::Index tokens : {16, 512, 4096}) {  // a quarter of each head rotated
          Config c;
          c.bf16 = bf16;
          c.path = path;
          c.layout = layout;
          c.rotary_dim = 32;
          c.tokens = tokens;
          register_config(c, streams, row_streams);
        }
      }
    }
  }
  for (const Path path : {Path::kCache, Path::kOnTheFly}) {
    for (const Eigen::Index tokens : {4096, 32768}) {
      Config c;
      c.path = path;
      c.kv_heads = 8;
      c.tokens = tokens;
      c.threads = 2;
      register_config(c, streams, row_streams);
    }
  }
#if defined(__AVX512BW__)
  for (const Eigen::Index tokens : {1, 16, 512, 4096}) {  // streams registered by the kernels
    benchmark::RegisterBenchmark(
        ("BM_Rope_Bf16Ceiling/half_split/q32k0/rd128/T:" + std::to_string(tokens)).c_str(),
        run_bf16_ceiling, tokens)
        ->UseManualTime();
  }
#endif
  // Re-rotating the keys of an 8-head KV cache after a plan change.
  for (const bool bf16 : {false, true}) {
    for (const Eigen::Index tokens : {4096, 32768}) {
      Config c;
      c.bf16 = bf16;
      c.path = Path::kRerotate;
      c.q_heads = 8;
      c.tokens = tokens;
      register_config(c, streams, row_streams);
    }
  }
  // M-RoPE (Qwen2-VL) on Q 32 + K 8 heads: text | an image of 32 columns and T / 64 rows |
  // text (T >= 32).
  for (const bool bf16 : {false, true}) {
    for (const Path path : {Path::kMRope, Path::kMRopeCache}) {
      for (const Eigen::Index tokens : {512, 4096}) {
        Config c;
        c.bf16 = bf16;
        c.path = path;
        c.kv_heads = 8;
        c.tokens = tokens;
        register_config(c, streams, row_streams);
      }
    }
  }
  // The same kernels on rows 16 bytes off a 32-byte boundary (float cache path).
  for (const auto layout : {posenc::RopeLayout::kHalfSplit, posenc::RopeLayout::kInterleaved}) {
    for (const Eigen::Index tokens : {1, 16, 512, 4096}) {
      Config c;
      c.layout = layout;
      c.tokens = tokens;
      c.misaligned = true;
      register_config(c, streams, row_streams);
    }
  }
  for (const auto layout : {posenc::RopeLayout::kHalfSplit, posenc::RopeLayout::kInterleaved}) {
    for (const Eigen::Index tokens : {512, 4096}) {
      const std::string suffix = std::string(posenc::to_string(layout)) + "/q32k0/rd128/T:" + std::to_string(tokens);
      benchmark::RegisterBenchmark(("BM_Rope_NaiveEigen/f32/" + suffix).c_str(), run_naive, layout, tokens)
          ->UseManualTime();
      benchmark::RegisterBenchmark(("BM_Rope_OnTheFly_vsNaive/f32/" + suffix).c_str(), run_vs_naive, layout, tokens)
          ->UseManualTime();
    }
  }
  for (const Eigen::Index tokens : {1, 512}) {
    const std::string suffix = "/half_split/q16/hd512/T:" + std::to_string(tokens);
    benchmark::RegisterBenchmark(("BM_Rope_Proportional/f32" + suffix).c_str(),
                                 run_proportional<float>, posenc::RopeLayout::kHalfSplit, tokens)
        ->UseManualTime();
    benchmark::RegisterBenchmark(("BM_Rope_Proportional/bf16" + suffix).c_str(),
                                 run_proportional<Eigen::bfloat16>, posenc::RopeLayout::kHalfSplit,
                                 tokens)
        ->UseManualTime();
  }
  std::sort(row_streams.begin(), row_streams.end());
  row_streams.erase(std::unique(row_streams.begin(), row_streams.end()), row_streams.end());
  for (const RowStream& rs : row_streams) {
    const std::string name = "BM_Rope_Baseline_StreamRows/rows:" + std::to_string(rs.rows) +
                             "/width:" + std::to_string(rs.width) + "/stride:" +
                             std::to_string(rs.stride);
    benchmark::RegisterBenchmark(name.c_str(), [rs](benchmark::State& state) {
      posenc_bench::AlignedFloats x(rs.rows * rs.stride, 1.0f);
      for (auto _ : state) {
        posenc_bench::stream_rmw_rows(x.data(), rs.rows, rs.width, rs.stride, false);
        benchmark::DoNotOptimize(x.data());
        benchmark::ClobberMemory();
      }
      state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * 2 *
                              static_cast<std::int64_t>(rs.rows * rs.width * sizeof(float)));
      state.SetLabel(posenc_bench::baseline_label(rs.id()));
    })->UseRealTime();
  }
  std::sort(streams.begin(), streams.end());
  streams.erase(std::unique(streams.begin(), streams.end()), streams.end());
  for (const auto& [bytes, threads] : streams) {
    const std::string name = std::string("BM_Rope_Baseline_Stream") + (threads == 2 ? "_2T" : "") +
                             "/bytes:" + std::to_string(bytes);
    if (threads == 1) {
      benchmark::RegisterBenchmark(name.c_str(), [bytes = bytes](benchmark::State& state) {
        posenc_bench::run_stream_rmw_baseline(state, bytes);
      })->UseRealTime();  // wall clock, like the kernels' manual time
    } else {
      benchmark::RegisterBenchmark(name.c_str(), [bytes = bytes](benchmark::State& state) {
        posenc_bench::run_stream_rmw_baseline_parallel(
            state, bytes, "2t", [](std::size_t n, auto fn) {
              // One contiguous half per thread: the best split a streaming loop can get.
              device2().parallelFor(2, Eigen::TensorOpCost(1e9, 1e9, 1e9),
                                    [&fn, n](Eigen::Index first, Eigen::Index last) {
                                      for (Eigen::Index part = first; part < last; ++part) {
                                        const auto p = static_cast<std::size_t>(part);
                                        fn(p * n / 2, (p + 1) * n / 2);
                                      }
                                    });
            });
      })->UseRealTime();
    }
  }
  return true;
}();

}  // namespace
