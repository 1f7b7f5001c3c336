// The AVX2 + FMA row kernels (detail/rope_kernels.hpp) are compiled only when the compiler
// targets AVX2, which the test targets do not by default. This translation unit switches the
// target on for everything after the pragma, so the SIMD paths run against the long-double
// reference here (x86-64 with GCC; it needs an AVX2 + FMA + F16C machine to run).

#include <catch2/catch.hpp>

// GCC only: Clang ignores `#pragma GCC target`, so there the file reruns the portable path.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#pragma GCC target("avx2,fma,f16c")
#define POSENC_TEST_SIMD_TARGET 1
#define POSENC_ROPE_FORCE_SIMD 1
#endif

#include <posenc/reference/rope.hpp>
#include <posenc/rope.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "support/check.hpp"
#include "support/rng.hpp"

#ifdef POSENC_TEST_SIMD_TARGET
namespace {
template <typename T>
double tol();
template <>
double tol<float>() { return 2e-6; }
template <>
double tol<Eigen::half>() { return 2e-3; }
template <>
double tol<Eigen::bfloat16>() { return 1.6e-2; }

/// The (rotary_dim, rotary_offset) cases of head_dim 96: whole head, a slice past 16 nope dims,
/// a short one and one that is not a multiple of the 8-wide vectors.
const std::vector<std::pair<Eigen::Index, Eigen::Index>> kSlices = {{96, 0}, {64, 16}, {16, 0}, {12, 4}};

/// Default RoPE of head_dim 96 on the slice [off, off + rd).
posenc::RopeParams slice_params(Eigen::Index rd, Eigen::Index off, Eigen::Index head_dim = 96) {
  posenc::RopeParams p;
  p.head_dim = head_dim;
  p.rotary_dim = rd;
  p.rotary_offset = off;
  return p;
}

/// Positions of S tokens: 40 contiguous from 100 (the anchored recurrence), then every 7th.
std::vector<std::int64_t> test_positions(Eigen::Index S) {
  std::vector<std::int64_t> pos(static_cast<std::size_t>(S));
  for (Eigen::Index s = 0; s < S; ++s) pos[static_cast<std::size_t>(s)] = s < 40 ? s + 100 : 7 * s;
  return pos;
}

/// Its frequencies with attention_factor 1.1.
auto frequencies(Eigen::Index rd, Eigen::Index off, Eigen::Index head_dim = 96) {
  auto f = posenc::compute_rope_frequencies(slice_params(rd, off, head_dim));
  f.attention_factor = 1.1;
  return f;
}
/// The long-double rotation of `before` [1, S, H, D] (BSHD) by frequencies(rd, off).
template <typename T>
std::vector<long double> expected_rotation(const std::vector<T>& before, Eigen::Index S, Eigen::Index H,
                                           Eigen::Index D, const std::vector<std::int64_t>& pos,
                                           Eigen::Index rd, Eigen::Index off, posenc::RopeLayout layout) {
  return posenc::reference::apply_rope(before.data(), 1, S, H, D, posenc::HeadLayout::kBSHD, pos.data(),
                                       posenc::reference::rope_frequencies(slice_params(rd, off, D)).inv_freq,
                                       1.1L, off, layout);
}
}  // namespace
#endif

TEMPLATE_TEST_CASE("rope simd: AVX2 kernels match the long-double reference", "[rope][simd]", float,
                   Eigen::half, Eigen::bfloat16) {
#ifndef POSENC_TEST_SIMD_TARGET
  SUCCEED("not an x86-64 GCC build: the AVX2 kernels are not compiled");
#else
  REQUIRE(__builtin_cpu_supports("avx2"));
#ifndef POSENC_ROPE_SIMD
  FAIL("POSENC_ROPE_SIMD should be defined under the avx2,fma target");
#endif
  // 45 tokens run from cache (register-blocked pair order); the rows of 3000 tokens take more
  // than kRopeResidentBytes and go through the row-streaming order.
  const Eigen::Index S = GENERATE(45, 3000), H = 3, D = 96;
  CAPTURE(S);
  for (const auto& slice : kSlices) {
    const Eigen::Index rd = slice.first, off = slice.second;  // a lambda below captures them
    for (const auto layout : {posenc::RopeLayout::kHalfSplit, posenc::RopeLayout::kInterleaved}) {
      CAPTURE(rd, off, posenc::to_string(layout));
      const auto f = frequencies(rd, off);
      auto x = posenc_test::random_vector<TestType>(static_cast<std::size_t>(S * H * D), 7);
      x[5] = TestType(std::numeric_limits<float>::quiet_NaN());  // NaN stays NaN (dim 5 of row 0)
      const auto before = x;
      const auto pos = test_positions(S);
      posenc::apply_rope_inplace<TestType>(posenc::TensorView<TestType, 4>(x.data(), 1, S, H, D),
                                           posenc::PositionIdsView(pos.data(), 1, S), f, layout);
      std::vector<TestType> out(x.size());
      posenc::apply_rope<TestType>(posenc::ConstTensorView<TestType, 4>(before.data(), 1, S, H, D),
                                   posenc::PositionIdsView(pos.data(), 1, S), f, layout,
                                   posenc::TensorView<TestType, 4>(out.data(), 1, S, H, D));
      REQUIRE(std::memcmp(out.data(), x.data(), x.size() * sizeof(TestType)) == 0);
      const auto expect = expected_rotation(before, S, H, D, pos, rd, off, layout);
      // The NaN contaminates its pair partner only; everything else must match.
      const auto [i1, i2] = posenc::reference::rope_pair(layout, (5 - off) >= 0 && 5 - off < rd ? (layout == posenc::RopeLayout::kHalfSplit ? (5 - off) % (rd / 2) : (5 - off) / 2) : 0, rd, off);
      const bool in_slice = 5 >= off && 5 < off + rd;
      for (std::size_t i = 0; i < x.size(); ++i) {
        const double got = posenc::detail::to_double(x[i]);
        if (i == 5 || (in_slice && (static_cast<Eigen::Index>(i) == i1 || static_cast<Eigen::Index>(i) == i2))) {
          if (i == 5) REQUIRE(std::isnan(got));
          continue;
        }
        CAPTURE(i);
        REQUIRE_THAT(got, Catch::Matchers::WithinAbs(static_cast<double>(expect[i]), 1.1 * tol<TestType>()));
      }
    }
  }
#endif
}

TEMPLATE_TEST_CASE("rope simd: applying from a cos/sin cache matches the long-double reference, "
                   "and its transpose undoes it up to attention_factor^2", "[rope][simd][cache]",
                   float, Eigen::half, Eigen::bfloat16) {
#ifndef POSENC_TEST_SIMD_TARGET
  SUCCEED("not an x86-64 GCC build: the AVX2 kernels are not compiled");
#else
  // Both layouts through the cache path (rows taken from the cache, interleaved ones expanded),
  // with and without a rotary offset; 45 tokens run from cache, 3000 stream.
  const Eigen::Index S = GENERATE(45, 3000), H = 3, D = 96;
  CAPTURE(S);
  for (const auto& slice : kSlices) {
    const Eigen::Index rd = slice.first, off = slice.second;  // a lambda below captures them
    for (const auto layout : {posenc::RopeLayout::kHalfSplit, posenc::RopeLayout::kInterleaved}) {
      CAPTURE(rd, off, posenc::to_string(layout));
      const auto f = frequencies(rd, off);
      const auto cache = posenc::make_rope_cos_sin_cache(f, 7 * S);
      const posenc::ConstTensorView<float, 2> cview(cache.data(), cache.dimension(0), cache.dimension(1));
      auto x = posenc_test::random_vector<TestType>(static_cast<std::size_t>(S * H * D), 9);
      const auto before = x;
      const auto pos = test_positions(S);
      const auto positions = posenc::RopePositions::from_ids(posenc::PositionIdsView(pos.data(), 1, S));
      const auto heads = posenc::rope_heads<TestType>(posenc::TensorView<TestType, 4>(x.data(), 1, S, H, D));
      posenc::apply_rope_inplace_cached<TestType>(heads, positions, cview, layout, off);
      const auto expect = expected_rotation(before, S, H, D, pos, rd, off, layout);
      POSENC_REQUIRE_CLOSE(posenc_test::compare(
          x.size(), [&](std::size_t i) { return posenc::detail::to_double(x[i]); },
          [&](std::size_t i) { return static_cast<double>(expect[i]); }, 1.1 * tol<TestType>()));
      // R(m)^T R(m) = I: the transpose of the scaled rotation brings x back times 1.1^2.
      posenc::RopeApplyOptions transpose;
      transpose.direction = posenc::RopeDirection::kTranspose;
      posenc::apply_rope_inplace_cached<TestType>(heads, positions, cview, layout, off, transpose);
      POSENC_REQUIRE_CLOSE(posenc_test::compare(
          x.size(), [&](std::size_t i) { return posenc::detail::to_double(x[i]); },
          [&](std::size_t i) {
            const auto d = static_cast<Eigen::Index>(i) % D;
            return (d >= off && d < off + rd ? 1.21 : 1.0) * posenc::detail::to_double(before[i]);
          },
          3 * tol<TestType>()));
    }
  }
#endif
}

TEMPLATE_TEST_CASE("rope simd: calls too large for L2 (rows walked in address order, split "
                   "into even and odd elements from L3, prefetched ahead from DRAM) equal the "
                   "same rows rotated in cache-sized calls, bit for bit", "[rope][simd][cache]",
                   float, Eigen::half, Eigen::bfloat16) {
#ifndef POSENC_TEST_SIMD_TARGET
  SUCCEED("not an x86-64 GCC build: the AVX2 kernels are not compiled");
#else
  // From a cos/sin cache every order does the same arithmetic per value, so they must agree
  // exactly; 32 tokens a call take the register-blocked order.
  using posenc::detail::RopeSource;
  const Eigen::Index H = 8, D = 96, chunk = 32;
  for (const auto source : {RopeSource::kMemory, RopeSource::kL3}) {
    // rotary_dim 96: 4 chunks with cos / sin held across the heads and 2 loaded per chunk
    // (half-split; interleaved from L3: 4 + 2 split steps); 48 interleaved: 3 split steps, fewer
    // than the 4 held.
    for (const auto& [rd, off] :
         {std::pair<Eigen::Index, Eigen::Index>{96, 0}, {64, 16}, {48, 8}}) {
      for (const auto layout : {posenc::RopeLayout::kHalfSplit, posenc::RopeLayout::kInterleaved}) {
        const double row_bytes = static_cast<double>(H * rd * sizeof(TestType));
        Eigen::Index S = 1024;
        while (source == RopeSource::kMemory &&
               row_bytes * static_cast<double>(S) <
                   static_cast<double>(posenc::detail::kFromMemoryBytes)) {
          S *= 2;
        }
        CAPTURE(S, rd, off, posenc::to_string(layout));
        REQUIRE(posenc::detail::rope_source(row_bytes * S, row_bytes * S) == source);
        REQUIRE(posenc::detail::rope_source(row_bytes * chunk, row_bytes * chunk) ==
                RopeSource::kL2);
        const auto cache = posenc::make_rope_cos_sin_cache(frequencies(rd, off), S);
        const posenc::ConstTensorView<float, 2> cview(cache.data(), cache.dimension(0),
                                                      cache.dimension(1));
        auto whole = posenc_test::random_vector<TestType>(static_cast<std::size_t>(S * H * D), 13);
        const auto before = whole;
        auto chunked = whole;
        posenc::apply_rope_inplace_cached<TestType>(
            posenc::rope_heads<TestType>(posenc::TensorView<TestType, 4>(whole.data(), 1, S, H, D)),
            posenc::RopePositions::contiguous(1, S), cview, layout, off);
        for (Eigen::Index s0 = 0; s0 < S; s0 += chunk) {
          posenc::apply_rope_inplace_cached<TestType>(
              posenc::rope_heads<TestType>(
                  posenc::TensorView<TestType, 4>(chunked.data() + s0 * H * D, 1, chunk, H, D)),
              posenc::RopePositions::contiguous(1, chunk, s0), cview, layout, off);
        }
        REQUIRE(std::memcmp(whole.data(), chunked.data(), whole.size() * sizeof(TestType)) == 0);
        REQUIRE(std::memcmp(whole.data(), before.data(), whole.size() * sizeof(TestType)) != 0);
      }
    }
  }
#endif
}

TEMPLATE_TEST_CASE("rope simd: rows off a cache line, streamed from DRAM (on AVX-512 builds by "
                   "the 32-byte kernels), equal cache-sized calls bit for bit",
                   "[rope][simd][cache]", float, Eigen::bfloat16) {
#ifndef POSENC_TEST_SIMD_TARGET
  SUCCEED("not an x86-64 GCC build: the AVX2 kernels are not compiled");
#else
  // The rows start 16 bytes past a cache line whatever the allocator gives; one call of all
  // tokens streams (RopeSource::kMemory), 32 tokens a call run from cache.
  const Eigen::Index S = 16384, H = 8, D = 128, chunk = 32, skew = 16 / sizeof(TestType);
  for (const auto layout : {posenc::RopeLayout::kHalfSplit, posenc::RopeLayout::kInterleaved}) {
    CAPTURE(posenc::to_string(layout));
    const auto cache = posenc::make_rope_cos_sin_cache(frequencies(D, 0, D), S);
    const posenc::ConstTensorView<float, 2> cview(cache.data(), cache.dimension(0), cache.dimension(1));
    const auto x = posenc_test::random_vector<TestType>(static_cast<std::size_t>(S * H * D), 17);
    std::vector<TestType> whole_buf(x.size() + 64), chunked_buf(x.size() + 64);
    const auto skewed = [&](std::vector<TestType>& buf) {
      const auto base = reinterpret_cast<std::uintptr_t>(buf.data());
      const auto aligned = (base + 63) / 64 * 64;
      TestType* p = reinterpret_cast<TestType*>(aligned) + skew;
      std::copy(x.begin(), x.end(), p);
      return p;
    };
    TestType* whole = skewed(whole_buf);
    TestType* chunked = skewed(chunked_buf);
    REQUIRE(reinterpret_cast<std::uintptr_t>(whole) % 64 == 16);
    posenc::apply_rope_inplace_cached<TestType>(
        posenc::rope_heads<TestType>(posenc::TensorView<TestType, 4>(whole, 1, S, H, D)),
        posenc::RopePositions::contiguous(1, S), cview, layout, 0);
    for (Eigen::Index s0 = 0; s0 < S; s0 += chunk) {
      posenc::apply_rope_inplace_cached<TestType>(
          posenc::rope_heads<TestType>(
              posenc::TensorView<TestType, 4>(chunked + s0 * H * D, 1, chunk, H, D)),
          posenc::RopePositions::contiguous(1, chunk, s0), cview, layout, 0);
    }
    REQUIRE(std::memcmp(whole, chunked, x.size() * sizeof(TestType)) == 0);
    REQUIRE(std::memcmp(whole, x.data(), x.size() * sizeof(TestType)) != 0);
  }
#endif
}

#ifdef POSENC_ROPE_SIMD512
TEST_CASE("rope simd: the 512-bit kernels take rows on cache lines, and rows off one unless "
          "they stream from DRAM", "[rope][simd]") {
  using posenc::detail::RopeSource;
  using posenc::detail::rope_rows_take_512;
  alignas(64) float rows[64];
  for (const auto source : {RopeSource::kL2, RopeSource::kL3, RopeSource::kMemory}) {
    CHECK(rope_rows_take_512(rows, rows, 128, 128, source));
    CHECK(rope_rows_take_512(rows + 16, rows + 32, 144, 16, source));
  }
  CHECK(rope_rows_take_512(rows + 4, rows + 4, 128, 128, RopeSource::kL3));
  CHECK_FALSE(rope_rows_take_512(rows + 4, rows + 4, 128, 128, RopeSource::kMemory));
  CHECK_FALSE(rope_rows_take_512(rows, rows + 4, 128, 128, RopeSource::kMemory));
  CHECK_FALSE(rope_rows_take_512(rows, rows, 136, 128, RopeSource::kMemory));  // head stride
  CHECK_FALSE(rope_rows_take_512(rows, rows, 128, 200, RopeSource::kMemory));
}
#endif

#ifdef POSENC_ROPE_SIMD512
TEST_CASE("rope simd: float runs off a cache line take the line-phase kernels from cache",
          "[rope][simd]") {
  using posenc::detail::RopeSource;
  using posenc::detail::rope_rows_phase;
  alignas(64) float rows[256];
  CHECK(rope_rows_phase(rows + 4, rows + 4, 128, 128, 128, false, RopeSource::kL2) == 4);
  CHECK(rope_rows_phase(rows + 4, rows + 4, 128, 128, 128, true, RopeSource::kL3) == 4);
  CHECK(rope_rows_phase(rows + 3, rows + 19, 64, 64, 64, false, RopeSource::kL2) == 3);
  CHECK(rope_rows_phase(rows + 15, rows + 15, 32, 32, 32, false, RopeSource::kL2) == 15);
  CHECK(rope_rows_phase(rows + 2, rows + 2, 16, 16, 16, true, RopeSource::kL2) == 2);
  CHECK(rope_rows_phase(rows, rows, 128, 128, 128, false, RopeSource::kL2) == 0);       // aligned
  CHECK(rope_rows_phase(rows + 4, rows + 4, 128, 128, 128, false, RopeSource::kMemory) == 0);
  CHECK(rope_rows_phase(rows + 4, rows + 8, 128, 128, 128, false, RopeSource::kL2) == 0);  // phases
  CHECK(rope_rows_phase(rows + 3, rows + 3, 128, 128, 128, true, RopeSource::kL2) == 0);  // odd
  CHECK(rope_rows_phase(rows + 4, rows + 4, 136, 128, 128, false, RopeSource::kL2) == 0);
  CHECK(rope_rows_phase(rows + 4, rows + 4, 128, 144, 128, false, RopeSource::kL2) == 0);
  CHECK(rope_rows_phase(rows + 4, rows + 4, 48, 48, 48, false, RopeSource::kL2) == 0);  // 16 x1 dims + 8
  CHECK(rope_rows_phase(rows + 4, rows + 4, 48, 48, 48, true, RopeSource::kL2) == 4);
  CHECK(rope_rows_phase(rows + 4, rows + 4, 256, 256, 256, true, RopeSource::kL2) == 0);  // > 8 vectors
}
#endif

TEST_CASE("rope simd: float rows at every offset into a cache line give the one-FMA rotation "
          "bit for bit and leave the floats around them alone", "[rope][simd][cache]") {
  // Expected per pair (a, b) with the cache's float c, s: fma(a, c, -(b s)), fma(b, c, a s), the
  // kernels' arithmetic written out. Runs of heads * rd floats start at every float offset of
  // a line (the line-phase kernels on AVX-512 take the even ones for interleaved pairs, all for
  // half-split with rd % 32 == 0), in place and into a buffer at the same or another offset;
  // the floats before and after each run hold sentinels that must survive.
#ifndef POSENC_TEST_SIMD_TARGET
  SUCCEED("not an x86-64 GCC build: the portable loop rounds a * c - b * s as its compiler "
          "contracts it, not as one FMA");
#else
  const float sentinel = -1234.5f;
  for (const auto layout : {posenc::RopeLayout::kHalfSplit, posenc::RopeLayout::kInterleaved}) {
    for (const Eigen::Index rd : {16, 32, 48, 64, 96, 128}) {
      posenc::RopeParams params;
      params.head_dim = rd;
      const auto cache = posenc::make_rope_cos_sin_cache(posenc::compute_rope_frequencies(params), 64);
      const posenc::ConstTensorView<float, 2> cview(cache.data(), cache.dimension(0), cache.dimension(1));
      for (const Eigen::Index H : {1, 3}) {
        const Eigen::Index S = 4, n = S * H * rd;
        const auto values = posenc_test::random_vector<float>(static_cast<std::size_t>(n), 29);
        for (int phase = 0; phase < 16; ++phase) {
          for (const int out_phase : {-1, phase, (phase + 6) % 16}) {  // -1: in place
            CAPTURE(posenc::to_string(layout), rd, H, phase, out_phase);
            std::vector<float> in_buf(static_cast<std::size_t>(n + 64), sentinel);
            std::vector<float> out_buf(static_cast<std::size_t>(n + 64), sentinel);
            const auto line_start = [](std::vector<float>& b) {
              const auto a = reinterpret_cast<std::uintptr_t>(b.data());
              return b.data() + (64 - a % 64) % 64 / sizeof(float);
            };
            float* x = line_start(in_buf) + phase;
            float* y = out_phase < 0 ? x : line_start(out_buf) + out_phase;
            std::copy(values.begin(), values.end(), x);
            const auto positions = posenc::RopePositions::contiguous(1, S, 5);
            if (out_phase < 0) {
              posenc::apply_rope_inplace_cached<float>(
                  posenc::rope_heads<float>(posenc::TensorView<float, 4>(x, 1, S, H, rd)),
                  positions, cview, layout);
            } else {
              posenc::apply_rope_cached<float>(
                  posenc::rope_heads<float>(posenc::ConstTensorView<float, 4>(x, 1, S, H, rd)),
                  posenc::rope_heads<float>(posenc::TensorView<float, 4>(y, 1, S, H, rd)),
                  positions, cview, layout);
            }
            std::size_t wrong = 0;
            for (Eigen::Index t = 0; t < S; ++t) {
              for (Eigen::Index h = 0; h < H; ++h) {
                for (Eigen::Index j = 0; j < rd / 2; ++j) {
                  const float c = cache(5 + t, j), s = cache(5 + t, rd / 2 + j);
                  const Eigen::Index i1 = (t * H + h) * rd + (layout == posenc::RopeLayout::kHalfSplit ? j : 2 * j);
                  const Eigen::Index i2 = i1 + (layout == posenc::RopeLayout::kHalfSplit ? rd / 2 : 1);
                  const float a = values[static_cast<std::size_t>(i1)], b = values[static_cast<std::size_t>(i2)];
                  wrong += std::memcmp(&y[i1], &static_cast<const float&>(std::fma(a, c, -(b * s))), 4) != 0;
                  wrong += std::memcmp(&y[i2], &static_cast<const float&>(std::fma(b, c, a * s)), 4) != 0;
                }
              }
            }
            REQUIRE(wrong == 0);
            std::vector<float>& out_vec = out_phase < 0 ? in_buf : out_buf;
            const std::ptrdiff_t first = y - out_vec.data();
            std::size_t touched = 0;
            for (std::ptrdiff_t i = 0; i < static_cast<std::ptrdiff_t>(out_vec.size()); ++i) {
              if (i < first || i >= first + n) touched += out_vec[static_cast<std::size_t>(i)] != sentinel;
            }
            REQUIRE(touched == 0);
            if (out_phase >= 0) REQUIRE(std::equal(values.begin(), values.end(), x));
          }
        }
      }
    }
  }
#endif
}

TEMPLATE_TEST_CASE("rope simd: rows wider than the cos / sin registers (pair blocks from cache, "
                   "row by row from L3 / DRAM) match the long-double reference",
                   "[rope][simd]", float, Eigen::bfloat16) {
#ifndef POSENC_TEST_SIMD_TARGET
  SUCCEED("not an x86-64 GCC build: the AVX2 kernels are not compiled");
#else
  // head_dim 512: rotary_dim 512 and a 320-wide slice from dim 64 exceed the 8 + 8 vectors an
  // AVX-512 row keeps in registers (and AVX2's 4 + 4), so 45 tokens take the pair-block order
  // and 3000 tokens (9-18 MiB) the row-by-row one.
  const Eigen::Index H = 3, D = 512;
  for (const Eigen::Index S : {Eigen::Index{45}, Eigen::Index{3000}}) {
    for (const auto& [rd, off] : {std::pair<Eigen::Index, Eigen::Index>{512, 0}, {320, 64}}) {
      for (const auto layout : {posenc::RopeLayout::kHalfSplit, posenc::RopeLayout::kInterleaved}) {
        CAPTURE(S, rd, off, posenc::to_string(layout));
        const auto f = frequencies(rd, off, D);
        auto x = posenc_test::random_vector<TestType>(static_cast<std::size_t>(S * H * D), 17);
        const auto before = x;
        const auto pos = test_positions(S);
        posenc::apply_rope_inplace<TestType>(posenc::TensorView<TestType, 4>(x.data(), 1, S, H, D),
                                             posenc::PositionIdsView(pos.data(), 1, S), f, layout);
        const auto expect = expected_rotation(before, S, H, D, pos, rd, off, layout);
        POSENC_REQUIRE_CLOSE(posenc_test::compare(
            x.size(), [&](std::size_t i) { return posenc::detail::to_double(x[i]); },
            [&](std::size_t i) { return static_cast<double>(expect[i]); }, 1.1 * tol<TestType>()));
      }
    }
  }
#endif
}

TEST_CASE("rope simd: bfloat16 rows round like Eigen's scalar conversion, denormal results "
          "included", "[rope][simd][cache]") {
#ifndef POSENC_TEST_SIMD_TARGET
  SUCCEED("not an x86-64 GCC build: the AVX2 kernels are not compiled");
#else
  // Expected: each output in float as the kernels compute it (one FMA over a rounded product,
  // with the cache's float cos / sin), then Eigen's own float -> bfloat16 conversion (round to
  // nearest even, denormals kept). Every other token is scaled by 2^-128, so its rotated values
  // are float denormals: vcvtneps2bf16 would flush those to zero.
  // Head dims 96 (kSlices) and 128 / 256 (rotary_dim 128: two or four chunks of 32 pairs held
  // in registers; 256 half-split: four).
  using bf16 = Eigen::bfloat16;
  const Eigen::Index H = 3;
  struct Slice {
    Eigen::Index rd, off, D;
  };
  std::vector<Slice> slices;
  for (const auto& [rd, off] : kSlices) slices.push_back({rd, off, 96});
  slices.push_back({128, 0, 128});
  slices.push_back({256, 0, 256});
  for (const Eigen::Index S : {Eigen::Index{45}, Eigen::Index{3000}}) {
    for (const auto& [rd, off, D] : slices) {
      if (rd % 8 != 0) continue;  // the scalar rows' arithmetic is the compiler's, not one FMA
      for (const auto layout : {posenc::RopeLayout::kHalfSplit, posenc::RopeLayout::kInterleaved}) {
        CAPTURE(S, rd, off, D, posenc::to_string(layout));
        const auto cache = posenc::make_rope_cos_sin_cache(frequencies(rd, off, D), S);
        const posenc::ConstTensorView<float, 2> cview(cache.data(), cache.dimension(0), cache.dimension(1));
        auto x = posenc_test::random_vector<bf16>(static_cast<std::size_t>(S * H * D), 21);
        for (Eigen::Index t = 1; t < S; t += 2) {
          for (Eigen::Index i = t * H * D; i < (t + 1) * H * D; ++i) {
            x[static_cast<std::size_t>(i)] = bf16(std::ldexp(static_cast<float>(x[static_cast<std::size_t>(i)]), -128));
          }
        }
        const auto before = x;
        posenc::apply_rope_inplace_cached<bf16>(
            posenc::rope_heads<bf16>(posenc::TensorView<bf16, 4>(x.data(), 1, S, H, D)),
            posenc::RopePositions::contiguous(1, S), cview, layout, off);
        std::size_t denormal = 0;
        for (Eigen::Index t = 0; t < S; ++t) {
          for (Eigen::Index h = 0; h < H; ++h) {
            const Eigen::Index row = (t * H + h) * D;
            for (Eigen::Index j = 0; j < rd / 2; ++j) {
              const float c = cache(t, j), s = cache(t, rd / 2 + j);
              const Eigen::Index i1 = row + off + (layout == posenc::RopeLayout::kHalfSplit ? j : 2 * j);
              const Eigen::Index i2 = i1 + (layout == posenc::RopeLayout::kHalfSplit ? rd / 2 : 1);
              const float a = static_cast<float>(before[static_cast<std::size_t>(i1)]);
              const float b = static_cast<float>(before[static_cast<std::size_t>(i2)]);
              const float y1 = std::fma(a, c, -(b * s)), y2 = std::fma(b, c, a * s);
              denormal += std::fpclassify(y1) == FP_SUBNORMAL;
              CAPTURE(t, h, j, a, b, y1, y2);
              REQUIRE(Eigen::numext::bit_cast<std::uint16_t>(x[static_cast<std::size_t>(i1)]) ==
                      Eigen::numext::bit_cast<std::uint16_t>(bf16(y1)));
              REQUIRE(Eigen::numext::bit_cast<std::uint16_t>(x[static_cast<std::size_t>(i2)]) ==
                      Eigen::numext::bit_cast<std::uint16_t>(bf16(y2)));
            }
          }
        }
        REQUIRE(denormal > static_cast<std::size_t>(S * H * rd / 8));
      }
    }
  }
#endif
}

TEST_CASE("rope simd: where a call's rows come from", "[rope][simd]") {
  using posenc::detail::RopeSource;
  using posenc::detail::rope_source;
  const double kib = 1024.0, mib = 1024.0 * kib;
  CHECK(rope_source(512 * kib, 512 * kib) == RopeSource::kL2);
  CHECK(rope_source(512 * kib + 1, 512 * kib + 1) == RopeSource::kL3);
  CHECK(rope_source(16 * mib - 1, 16 * mib - 1) == RopeSource::kL3);
  CHECK(rope_source(16 * mib, 16 * mib) == RopeSource::kMemory);
  // A thread's share of a large call still comes from DRAM; a share that fits L2 is blocked.
  CHECK(rope_source(4 * mib, 32 * mib) == RopeSource::kMemory);
  CHECK(rope_source(256 * kib, 32 * mib) == RopeSource::kL2);
}

TEST_CASE("rope simd: the vectorised sin/cos agrees with std::sin / std::cos", "[rope][simd][trig]") {
  posenc_test::SplitMix64 rng(99);
  std::vector<double> x(4096), s(4096), c(4096);
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double mag = std::pow(10.0, 9.0 * (rng.uniform() + 1.0) / 2.0);  // 1 .. 1e9
    x[i] = rng.uniform() * mag;
  }
  x[0] = 0.0;
  x[1] = 131071.0;
  x[2] = 1e6;
  x[3] = 0x1p30;
  posenc::detail::rope_sincos(x.data(), s.data(), c.data(), static_cast<Eigen::Index>(x.size()));
  for (std::size_t i = 0; i < x.size(); ++i) {
    CAPTURE(x[i]);
    REQUIRE_THAT(s[i], Catch::Matchers::WithinAbs(std::sin(x[i]), 4e-16));
    REQUIRE_THAT(c[i], Catch::Matchers::WithinAbs(std::cos(x[i]), 4e-16));
  }
  // Lengths that leave a partial packet (the padded last one) at every offset.
  for (std::size_t n = 1; n <= 11; ++n) {
    for (std::size_t at = 0; at < 3; ++at) {
      std::vector<double> sn(n, 7.0), cn(n, 7.0);
      posenc::detail::rope_sincos(x.data() + at, sn.data(), cn.data(),
                                  static_cast<Eigen::Index>(n));
      for (std::size_t i = 0; i < n; ++i) {
        CAPTURE(n, at, x[at + i]);
        REQUIRE_THAT(sn[i], Catch::Matchers::WithinAbs(std::sin(x[at + i]), 4e-16));
        REQUIRE_THAT(cn[i], Catch::Matchers::WithinAbs(std::cos(x[at + i]), 4e-16));
      }
    }
  }
  // The short polynomial used when the results feed float arithmetic: < 4e-13 (+ rounding).
  posenc::detail::rope_sincos<false>(x.data(), s.data(), c.data(), static_cast<Eigen::Index>(x.size()));
  for (std::size_t i = 0; i < x.size(); ++i) {
    CAPTURE(x[i]);
    REQUIRE_THAT(s[i], Catch::Matchers::WithinAbs(std::sin(x[i]), 1e-12));
    REQUIRE_THAT(c[i], Catch::Matchers::WithinAbs(std::cos(x[i]), 1e-12));
  }
}

TEMPLATE_TEST_CASE("rope simd: proportional RoPE's still pairs are left as they are, the turning "
                   "ones match the long-double reference", "[rope][simd][proportional]", float,
                   Eigen::half, Eigen::bfloat16) {
#ifndef POSENC_TEST_SIMD_TARGET
  SUCCEED("not an x86-64 GCC build: the AVX2 kernels are not compiled");
#else
  // Gemma-4's global heads: 512 wide, 64 of 256 pairs turn (exponent over 512), the partner of
  // pair j is j + 256; and a 96-wide head where 12 of 48 turn (the kernels widen that to 32,
  // whose extra pairs turn by 0). A still pair holds a NaN and a -0: rotated by 0 the -0
  // would become NaN, left alone it stays -0, bit for bit.
  for (const auto& [D, turning] : {std::pair<Eigen::Index, Eigen::Index>{512, 64}, {96, 12}}) {
    posenc::RopeParams p;
    p.head_dim = D;
    p.theta = 1e6;
    p.scaling.type = posenc::RopeScalingType::kProportional;
    p.partial_rotary_factor = 2.0 * static_cast<double>(turning) / static_cast<double>(D);
    const auto f = posenc::compute_rope_frequencies(p);
    REQUIRE(std::count_if(f.inv_freq.begin(), f.inv_freq.end(), [](double w) { return w != 0.0; }) ==
            turning);
    const Eigen::Index S = GENERATE(45, 3000), H = 3, half = D / 2;
    for (const auto layout : {posenc::RopeLayout::kHalfSplit, posenc::RopeLayout::kInterleaved}) {
      CAPTURE(D, S, posenc::to_string(layout));
      const auto pair_dims = [&](Eigen::Index j) {
        return layout == posenc::RopeLayout::kHalfSplit ? std::pair{j, j + half}
                                                        : std::pair{2 * j, 2 * j + 1};
      };
      auto x = posenc_test::random_vector<TestType>(static_cast<std::size_t>(S * H * D), 21);
      const auto [a, b] = pair_dims(half - 3);
      x[static_cast<std::size_t>(D + a)] = TestType(std::numeric_limits<float>::quiet_NaN());
      x[static_cast<std::size_t>(D + b)] = TestType(-0.0f);
      const auto before = x;
      const auto pos = test_positions(S);
      const auto cache = posenc::make_rope_cos_sin_cache(f, 7 * S);
      const posenc::ConstTensorView<float, 2> cview(cache.data(), cache.dimension(0), cache.dimension(1));
      const auto expect = posenc::reference::apply_rope(before.data(), 1, S, H, D, posenc::HeadLayout::kBSHD,
                                                        pos.data(), posenc::reference::rope_frequencies(p).inv_freq,
                                                        1.0L, 0, layout);
      std::vector<TestType> on_the_fly = before, from_cache = before, out_of_place(x.size());
      posenc::apply_rope_inplace<TestType>(posenc::TensorView<TestType, 4>(on_the_fly.data(), 1, S, H, D),
                                           posenc::PositionIdsView(pos.data(), 1, S), f, layout);
      posenc::apply_rope<TestType>(posenc::ConstTensorView<TestType, 4>(before.data(), 1, S, H, D),
                                   posenc::PositionIdsView(pos.data(), 1, S), f, layout,
                                   posenc::TensorView<TestType, 4>(out_of_place.data(), 1, S, H, D));
      posenc::apply_rope_inplace_cached<TestType>(
          posenc::rope_heads<TestType>(posenc::TensorView<TestType, 4>(from_cache.data(), 1, S, H, D)),
          posenc::RopePositions::from_ids(posenc::PositionIdsView(pos.data(), 1, S)), cview, layout, 0);
      for (const auto* got : {&on_the_fly, &out_of_place, &from_cache}) {
        for (Eigen::Index r = 0; r < S * H; ++r) {
          for (Eigen::Index j = 0; j < half; ++j) {
            for (const Eigen::Index d : {pair_dims(j).first, pair_dims(j).second}) {
              const auto i = static_cast<std::size_t>(r * D + d);
              if (j >= turning) {
                if (std::memcmp(&(*got)[i], &before[i], sizeof(TestType)) != 0) {
                  CAPTURE(r, j, d);
                  FAIL("a still pair's value changed");
                }
              } else if (std::abs(posenc::detail::to_double((*got)[i]) - static_cast<double>(expect[i])) >
                         tol<TestType>()) {
                CAPTURE(r, j, d, posenc::detail::to_double((*got)[i]), static_cast<double>(expect[i]));
                FAIL("a turning pair is off the reference");
              }
            }
          }
        }
      }
    }
  }
#endif
}

TEST_CASE("rope simd: bfloat16 vectors with denormal results in their odd elements only round "
          "like Eigen's scalar conversion", "[rope][simd][cache][bf16]") {
#ifndef POSENC_TEST_SIMD_TARGET
  SUCCEED("not an x86-64 GCC build: the AVX2 kernels are not compiled");
#else
  // The kernels split 2W bfloat16 values into their even and odd elements; here only the odd
  // elements' results are denormal (vcvtne2ps2bf16 would flush them to zero). Half-split: pairs
  // j odd hold values scaled by 2^-128. Interleaved: the cache's sin is 0 and the odd dims are
  // scaled, so y_odd = b c is denormal and y_even = a c is not. Expected as in the test above:
  // one FMA in float with the cache's cos / sin, then Eigen's float -> bfloat16 conversion.
  using bf16 = Eigen::bfloat16;
  const Eigen::Index S = 5, H = 3;
  for (const Eigen::Index D : {Eigen::Index{64}, Eigen::Index{128}, Eigen::Index{256}}) {
    for (const auto layout : {posenc::RopeLayout::kHalfSplit, posenc::RopeLayout::kInterleaved}) {
      const bool half_split = layout == posenc::RopeLayout::kHalfSplit;
      CAPTURE(D, posenc::to_string(layout));
      auto cache = posenc::make_rope_cos_sin_cache(frequencies(D, 0, D), S + 3);
      if (!half_split) {
        for (Eigen::Index t = 0; t < cache.dimension(0); ++t) {
          for (Eigen::Index j = 0; j < D / 2; ++j) cache(t, D / 2 + j) = 0.0f;
        }
      }
      const posenc::ConstTensorView<float, 2> cview(cache.data(), cache.dimension(0),
                                                    cache.dimension(1));
      auto x = posenc_test::random_vector<bf16>(static_cast<std::size_t>(S * H * D), 23);
      for (std::size_t i = 0; i < x.size(); ++i) {
        const Eigen::Index d = static_cast<Eigen::Index>(i) % D;
        const bool tiny = half_split ? (d % (D / 2)) % 2 == 1 : d % 2 == 1;
        if (tiny) x[i] = bf16(std::ldexp(static_cast<float>(x[i]), -128));
      }
      const auto before = x;
      posenc::apply_rope_inplace_cached<bf16>(
          posenc::rope_heads<bf16>(posenc::TensorView<bf16, 4>(x.data(), 1, S, H, D)),
          posenc::RopePositions::contiguous(1, S), cview, layout, 0);
      std::size_t denormal = 0;
      for (Eigen::Index t = 0; t < S; ++t) {
        for (Eigen::Index h = 0; h < H; ++h) {
          const Eigen::Index row = (t * H + h) * D;
          for (Eigen::Index j = 0; j < D / 2; ++j) {
            const float c = cache(t, j), s = cache(t, D / 2 + j);
            const Eigen::Index i1 = row + (half_split ? j : 2 * j);
            const Eigen::Index i2 = i1 + (half_split ? D / 2 : 1);
            const float a = static_cast<float>(before[static_cast<std::size_t>(i1)]);
            const float b = static_cast<float>(before[static_cast<std::size_t>(i2)]);
            const float y1 = std::fma(a, c, -(b * s)), y2 = std::fma(b, c, a * s);
            denormal += std::fpclassify(y2) == FP_SUBNORMAL;
            CAPTURE(t, h, j, a, b, y1, y2);
            REQUIRE(Eigen::numext::bit_cast<std::uint16_t>(x[static_cast<std::size_t>(i1)]) ==
                    Eigen::numext::bit_cast<std::uint16_t>(bf16(y1)));
            REQUIRE(Eigen::numext::bit_cast<std::uint16_t>(x[static_cast<std::size_t>(i2)]) ==
                    Eigen::numext::bit_cast<std::uint16_t>(bf16(y2)));
          }
        }
      }
      REQUIRE(denormal > static_cast<std::size_t>(S * H * D / 8));
    }
  }
#endif
}
