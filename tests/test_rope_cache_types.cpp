// cos/sin caches in the model's dtype (vLLM casts its cos_sin_cache to the activations' dtype):
// the cached apply calls read double, half and bfloat16 rows as they are. Expected values: the
// rotation by exactly the cached (rounded) cos / sin, written out in long double here; the
// cache rows are built in the test from long-double cos / sin, not by posenc.

#include <catch2/catch.hpp>

#include <posenc/mrope.hpp>
#include <posenc/rope.hpp>

#include <cmath>
#include <cstdint>
#include <vector>

#include "support/check.hpp"
#include "support/rng.hpp"

using posenc::ConstTensorView;
using posenc::RopeLayout;
using posenc::TensorView;

namespace {

using posenc::detail::to_double;  // exact for every storage type

/// rows x rd cache of C: row p = a * cat(cos(p w_j), sin(p w_j)), w_j = 10000^(-2j/rd), each
/// value rounded once to C from long double.
template <typename C>
std::vector<C> cache_rows(Eigen::Index rows, Eigen::Index rd, long double a) {
  std::vector<C> c(static_cast<std::size_t>(rows * rd));
  for (Eigen::Index p = 0; p < rows; ++p) {
    for (Eigen::Index j = 0; j < rd / 2; ++j) {
      const long double angle = p * std::pow(10000.0L, -2.0L * j / rd);
      c[static_cast<std::size_t>(p * rd + j)] = C(static_cast<float>(a * std::cos(angle)));
      c[static_cast<std::size_t>(p * rd + rd / 2 + j)] = C(static_cast<float>(a * std::sin(angle)));
      if constexpr (std::is_same_v<C, double>) {
        c[static_cast<std::size_t>(p * rd + j)] = static_cast<double>(a * std::cos(angle));
        c[static_cast<std::size_t>(p * rd + rd / 2 + j)] = static_cast<double>(a * std::sin(angle));
      }
    }
  }
  return c;
}

/// x' for one head of `d` at cache row `row`: pairs (off + j, off + j + rd/2) (half-split) or
/// (off + 2j, off + 2j + 1) (interleaved) turned by the cached (c, s); other dims unchanged.
template <typename C, typename T>
std::vector<long double> rotated(const T* x, Eigen::Index d, const C* row_c, const C* row_s,
                                 Eigen::Index rd, Eigen::Index off, RopeLayout layout) {
  std::vector<long double> y(static_cast<std::size_t>(d));
  for (Eigen::Index i = 0; i < d; ++i) y[static_cast<std::size_t>(i)] = to_double(x[i]);
  for (Eigen::Index j = 0; j < rd / 2; ++j) {
    const Eigen::Index i1 = layout == RopeLayout::kHalfSplit ? off + j : off + 2 * j;
    const Eigen::Index i2 = layout == RopeLayout::kHalfSplit ? off + j + rd / 2 : off + 2 * j + 1;
    const long double c = to_double(row_c[j]), s = to_double(row_s[j]);
    const long double a = to_double(x[i1]), b = to_double(x[i2]);
    y[static_cast<std::size_t>(i1)] = a * c - b * s;
    y[static_cast<std::size_t>(i2)] = b * c + a * s;
  }
  return y;
}

}  // namespace

TEMPLATE_TEST_CASE("rope cache types: a double, half or bfloat16 cos/sin cache rotates by its "
                   "own rounded values, forward and inverse, both layouts",
                   "[rope][cache]", double, Eigen::half, Eigen::bfloat16) {
  using C = TestType;
  // x in float (double for a double cache, which must not lose digits through float).
  using T = std::conditional_t<std::is_same_v<C, double>, double, float>;
  const Eigen::Index S = 7, H = 3, D = 40, rd = 32, off = 8, rows = 64;
  const long double a = 1.25L;  // an attention factor folded into the rows
  const auto cache = cache_rows<C>(rows, rd, a);
  const std::vector<std::int64_t> pos{0, 1, 5, 17, 17, 40, 63};
  for (const RopeLayout layout : {RopeLayout::kHalfSplit, RopeLayout::kInterleaved}) {
    CAPTURE(static_cast<int>(layout));
    posenc_test::SplitMix64 rng(5);
    std::vector<T> x(static_cast<std::size_t>(S * H * D));
    for (auto& e : x) e = static_cast<T>(rng.uniform());
    std::vector<T> y = x;
    posenc::apply_rope_inplace_cached<T>(
        posenc::rope_heads<T>(TensorView<T, 4>(y.data(), 1, S, H, D)),
        posenc::RopePositions::from_ids(posenc::PositionIdsView(pos.data(), 1, S)),
        ConstTensorView<C, 2>(cache.data(), rows, rd), layout, off);
    std::vector<long double> want;
    for (Eigen::Index s = 0; s < S; ++s) {
      const C* row = cache.data() + pos[static_cast<std::size_t>(s)] * rd;
      for (Eigen::Index h = 0; h < H; ++h) {
        const auto r = rotated(x.data() + (s * H + h) * D, D, row, row + rd / 2, rd, off, layout);
        want.insert(want.end(), r.begin(), r.end());
      }
    }
    const double tol = std::is_same_v<T, double> ? 1e-15 : 1e-6;
    POSENC_REQUIRE_CLOSE(posenc_test::compare(
        y.size(), [&](std::size_t i) { return static_cast<double>(y[i]); },
        [&](std::size_t i) { return static_cast<double>(want[i]); }, tol));
    // The inverse turn by the same rows undoes it (divided by |row pair|^2 = a^2 as rounded).
    posenc::RopeApplyOptions inverse;
    inverse.direction = posenc::RopeDirection::kInverse;
    posenc::apply_rope_inplace_cached<T>(
        posenc::rope_heads<T>(TensorView<T, 4>(y.data(), 1, S, H, D)),
        posenc::RopePositions::from_ids(posenc::PositionIdsView(pos.data(), 1, S)),
        ConstTensorView<C, 2>(cache.data(), rows, rd), layout, off, inverse);
    POSENC_REQUIRE_CLOSE(posenc_test::compare(
        y.size(), [&](std::size_t i) { return static_cast<double>(y[i]); },
        [&](std::size_t i) { return static_cast<double>(x[i]); }, tol * 4));
  }
}

TEST_CASE("rope cache types: bfloat16 activations with a bfloat16 cache (vLLM's dtype), and "
          "M-RoPE from a half cache", "[rope][cache][mrope]") {
  const Eigen::Index S = 5, H = 2, D = 16, rows = 32;
  const auto cache = cache_rows<Eigen::bfloat16>(rows, D, 1.0L);
  const posenc::Tensor<Eigen::bfloat16, 2> as_tensor = [&] {
    posenc::Tensor<Eigen::bfloat16, 2> t(rows, D);
    std::copy(cache.begin(), cache.end(), t.data());
    return t;
  }();
  posenc_test::SplitMix64 rng(9);
  std::vector<Eigen::bfloat16> x(static_cast<std::size_t>(S * H * D));
  for (auto& e : x) e = Eigen::bfloat16(static_cast<float>(rng.uniform()));
  std::vector<Eigen::bfloat16> y(x.size());
  const std::vector<std::int64_t> pos{3, 4, 5, 6, 30};
  // Out of place, the cache passed as a Tensor (converted to a view implicitly).
  posenc::apply_rope_cached<Eigen::bfloat16>(
      posenc::rope_heads<Eigen::bfloat16>(ConstTensorView<Eigen::bfloat16, 4>(x.data(), 1, S, H, D)),
      posenc::rope_heads<Eigen::bfloat16>(TensorView<Eigen::bfloat16, 4>(y.data(), 1, S, H, D)),
      posenc::RopePositions::from_ids(posenc::PositionIdsView(pos.data(), 1, S)), as_tensor,
      RopeLayout::kHalfSplit);
  for (Eigen::Index s = 0; s < S; ++s) {
    const Eigen::bfloat16* row = cache.data() + pos[static_cast<std::size_t>(s)] * D;
    for (Eigen::Index h = 0; h < H; ++h) {
      const auto want = rotated(x.data() + (s * H + h) * D, D, row, row + D / 2, D, 0,
                                RopeLayout::kHalfSplit);
      for (Eigen::Index i = 0; i < D; ++i) {
        // Rounded once from float: within half a bfloat16 ulp of the exact value (+ float error).
        const long double w = want[static_cast<std::size_t>(i)];
        CHECK(std::abs(to_double(y[static_cast<std::size_t>((s * H + h) * D + i)]) - w) <=
              std::abs(w) * (1.0L / 256) + 1e-7L);
      }
    }
  }

  // M-RoPE, half cache, sections (2, 3, 3) of 8 pairs, a vision token (t, h, w) = (2, 5, 9).
  const auto half_cache = cache_rows<Eigen::half>(rows, D, 1.0L);
  const posenc::MRopeSections sec{{2, 3, 3}, posenc::MRopeSectionLayout::kContiguous};
  const std::vector<std::int64_t> mpos{2, 5, 9};  // [3, 1, 1]
  std::vector<float> xf(static_cast<std::size_t>(H * D)), yf;
  for (auto& e : xf) e = static_cast<float>(rng.uniform());
  yf = xf;
  posenc::apply_mrope_inplace_cached<float>(
      posenc::rope_heads<float>(TensorView<float, 4>(yf.data(), 1, 1, H, D)),
      posenc::MRopePositionsView(mpos.data(), 3, 1, 1),
      ConstTensorView<Eigen::half, 2>(half_cache.data(), rows, D), RopeLayout::kHalfSplit, sec);
  for (Eigen::Index h = 0; h < H; ++h) {
    for (Eigen::Index j = 0; j < D / 2; ++j) {
      const std::int64_t p = mpos[static_cast<std::size_t>(j < 2 ? 0 : j < 5 ? 1 : 2)];
      const long double c = to_double(half_cache[static_cast<std::size_t>(p * D + j)]);
      const long double s = to_double(half_cache[static_cast<std::size_t>(p * D + D / 2 + j)]);
      const long double a = xf[static_cast<std::size_t>(h * D + j)];
      const long double b = xf[static_cast<std::size_t>(h * D + j + D / 2)];
      CHECK(std::abs(yf[static_cast<std::size_t>(h * D + j)] - static_cast<double>(a * c - b * s)) < 1e-6);
      CHECK(std::abs(yf[static_cast<std::size_t>(h * D + j + D / 2)] - static_cast<double>(b * c + a * s)) < 1e-6);
    }
  }
}

TEST_CASE("rope cache types: several caches in one call (multi-LoRA) as one stacked cache with "
          "row offsets", "[rope][cache]") {
  // FlashInfer / vLLM's older `offsets`: each request reads its own cache (e.g. a LoRA with
  // another scaling). Stacked as [A; B], a token of B passes position + rows(A): the cached
  // calls read row = position and nothing else of it.
  const Eigen::Index S = 5, H = 3, D = 16, rows = 40;
  auto stacked = cache_rows<float>(rows, D, 1.0L);
  const auto b = cache_rows<float>(rows, D, 0.5L);  // another amplitude: B's rows are not A's
  stacked.insert(stacked.end(), b.begin(), b.end());
  const std::vector<std::int64_t> pos{3, 4, 5, 7, 8};
  const std::vector<bool> of_b{false, false, false, true, true};
  std::vector<std::int64_t> rows_read(pos);
  for (std::size_t t = 0; t < pos.size(); ++t) rows_read[t] += of_b[t] ? rows : 0;
  const auto x = posenc_test::random_vector<float>(static_cast<std::size_t>(S * H * D), 17);
  auto y = x;
  posenc::apply_rope_inplace_cached<float>(
      posenc::rope_heads<float>(TensorView<float, 4>(y.data(), 1, S, H, D)),
      posenc::RopePositions::from_ids(posenc::PositionIdsView(rows_read.data(), 1, S)),
      ConstTensorView<float, 2>(stacked.data(), 2 * rows, D), RopeLayout::kInterleaved);
  for (Eigen::Index s = 0; s < S; ++s) {
    const auto& cache = of_b[static_cast<std::size_t>(s)] ? b : stacked;  // B's own rows, or A's
    const float* row = cache.data() + pos[static_cast<std::size_t>(s)] * D;
    for (Eigen::Index h = 0; h < H; ++h) {
      const auto want = rotated(x.data() + (s * H + h) * D, D, row, row + D / 2, D, 0,
                                RopeLayout::kInterleaved);
      for (Eigen::Index i = 0; i < D; ++i) {
        CHECK(std::abs(y[static_cast<std::size_t>((s * H + h) * D + i)] -
                       want[static_cast<std::size_t>(i)]) <= 1e-6L);
      }
    }
  }
}
