// The baselines' stream loops (declared in baselines.hpp), in a translation unit of their own
// built with -falign-loops=64: their code and placement no longer depend on the kernels the
// benchmark files include.

#include <Eigen/Core>

#include "baselines.hpp"

namespace posenc_bench {

void stream_rmw(float* x, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) x[i] = x[i] * 0.999f + 0.001f;
}

void stream_rmw_keep(float* x, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) x[i] = x[i] + 0.0f;
}

namespace {

// Rows of a width known at compile time: each row is straight-line vector code (Eigen packets:
// GCC 12 left the plain loop over 16 floats scalar) and the row loop
// is the only loop (starting on a cache line). With the width a run-time value, each row
// entered a vector loop of 2-4 iterations through its checks and alignment padding, and the
// stream over rotary_dim 32 of 128 took 1.4x the time of this one.
template <bool kKeep, std::size_t kWidth>
void stream_fixed_rows(float* x, std::size_t rows, std::size_t stride) {
  using Row = Eigen::Map<Eigen::Array<float, static_cast<int>(kWidth), 1>>;
  for (std::size_t r = 0; r < rows; ++r) {
    Row row(x + r * stride);
    if constexpr (kKeep) {
      row = row + 0.0f;
    } else {
      row = row * 0.999f + 0.001f;
    }
  }
}

template <bool kKeep>
void stream_rows(float* x, std::size_t rows, std::size_t width, std::size_t stride) {
  switch (width) {
    case 8: return stream_fixed_rows<kKeep, 8>(x, rows, stride);
    case 16: return stream_fixed_rows<kKeep, 16>(x, rows, stride);
    case 32: return stream_fixed_rows<kKeep, 32>(x, rows, stride);
    case 64: return stream_fixed_rows<kKeep, 64>(x, rows, stride);
    default:
      for (std::size_t r = 0; r < rows; ++r) {
        if constexpr (kKeep) {
          stream_rmw_keep(x + r * stride, width);
        } else {
          stream_rmw(x + r * stride, width);
        }
      }
  }
}

}  // namespace

void stream_rmw_rows(float* x, std::size_t rows, std::size_t width, std::size_t stride,
                     bool keep_values) {
  if (keep_values) {
    stream_rows<true>(x, rows, width, stride);
  } else {
    stream_rows<false>(x, rows, width, stride);
  }
}

float stream_read(const float* x, std::size_t n) {
  return Eigen::Map<const Eigen::ArrayXf>(x, static_cast<Eigen::Index>(n)).sum();
}

}  // namespace posenc_bench
