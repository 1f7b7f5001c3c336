#pragma once
/// \file posenc/sinusoidal.hpp
/// Fixed sinusoidal absolute position encodings, in the three layouts real checkpoints use.
///
/// d = d_model (even), i in [0, d/2), p = position (any non-negative number, exact up to 2^53):
///
///   kInterleaved  [s c s c s c ...]  PE(p, 2i) = sin(p w_i), PE(p, 2i+1) = cos(p w_i),
///                 w_i = base^(-2i/d)                         Vaswani et al. 2017, §3.5
///   kSinCos       [s s s ... c c c]  PE(p, i) = sin(p w_i),  PE(p, d/2 + i) = cos(p w_i),
///                 w_i = exp(-ln(base) i / (d/2 - 1))         tensor2tensor get_timing_signal_1d,
///                                                            fairseq SinusoidalPositionalEmbedding,
///                                                            Whisper `sinusoids` (needs d >= 4)
///   kCosSin       [c c c ... s s s]  PE(p, i) = cos(p w_i),  PE(p, d/2 + i) = sin(p w_i),
///                 w_i = exp(-ln(max_period) i / (d/2))       diffusion timestep embedding,
///                                                            ggml_timestep_embedding
///   kSinCosVaswani [s s s ... c c c] PE(p, i) = sin(p w_i),  PE(p, d/2 + i) = cos(p w_i),
///                 w_i = base^(-2i/d), Vaswani's frequencies  Transformer-XL, MAE's
///                                                            get_1d_sincos_pos_embed_from_grid
///                                                            (the blocks of sincos_grid.hpp)
///
/// kSinCos and kSinCosVaswani differ only in the exponent's denominator, d/2 - 1 against d/2,
/// which changes every pair's frequency but the first (d = 8, base 10^4: w_1 = 0.0464 against
/// 0.1).
///
/// Angles p * w_i are formed and reduced in double (std::sin/cos do the full range reduction);
/// forming them in float, as `float(p) * w` does, loses every digit of the angle past p ~ 10^7.
/// What remains is the rounding of the product itself, at most 2^-53 p w_i radians (1e-9 at
/// p = 10^7 and w = 1; 0.06 at p = 2^53 and w = 0.1), where the table's recurrence and the
/// single-row call may round differently. The result is rounded once to the caller's storage
/// type.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "posenc/detail/numeric.hpp"
#include "posenc/detail/sinusoidal_kernels.hpp"
#include "posenc/error.hpp"
#include "posenc/tensor.hpp"

namespace posenc {

/// Where sin and cos sit in an encoding row (diagrams for d = 8).
enum class SinusoidalLayout : std::uint8_t {
  kInterleaved = 0,  ///< [scscscsc]  Vaswani et al. 2017
  kSinCos = 1,       ///< [sssscccc]  tensor2tensor / fairseq / Whisper
  kCosSin = 2,       ///< [ccccssss]  timestep embedding (Stable Diffusion, ggml)
  kSinCosVaswani = 3,  ///< [sssscccc]  w_i = base^(-2i/d): Transformer-XL, MAE / DiT grids
};

constexpr std::string_view to_string(SinusoidalLayout layout) noexcept {
  switch (layout) {
    case SinusoidalLayout::kInterleaved: return "interleaved";
    case SinusoidalLayout::kSinCos: return "sin|cos";
    case SinusoidalLayout::kCosSin: return "cos|sin";
    case SinusoidalLayout::kSinCosVaswani: return "sin|cos (base^(-2i/d))";
  }
  return "unknown";
}

struct SinusoidalParams {
  SinusoidalLayout layout = SinusoidalLayout::kInterleaved;
  /// The "10000" of every layout (called max_period for the timestep embedding). Finite and > 0;
  /// below 1 the frequencies exceed 1 (up to 1 / base), and 2^53 times the largest must stay
  /// finite.
  double base = 10000.0;
};

/// Widest d_model the sinusoidal calls accept (real models: <= 16384); the plan keeps
/// 2 kSinusoidalGroup + 1 doubles per pair.
inline constexpr Eigen::Index kMaxSinusoidalDim = Eigen::Index{1} << 20;

namespace detail {

/// w_i for pair i (see the file comment). Unvalidated: callers validate first.
inline double sinusoidal_frequency(Eigen::Index i, Eigen::Index d,
                                   const SinusoidalParams& params) {
  const double half = static_cast<double>(d / 2);
  const double ln_base = std::log(params.base);
  switch (params.layout) {
    case SinusoidalLayout::kInterleaved:
      return std::pow(params.base, -2.0 * static_cast<double>(i) / static_cast<double>(d));
    case SinusoidalLayout::kSinCos:
      return std::exp(-ln_base * static_cast<double>(i) / (half - 1.0));
    case SinusoidalLayout::kCosSin:
    case SinusoidalLayout::kSinCosVaswani:
      return std::exp(-ln_base * static_cast<double>(i) / half);
  }
  return 0.0;
}

/// The largest w_i: the first pair's (1) for base >= 1, the last pair's below (w is monotone).
inline double largest_sinusoidal_frequency(Eigen::Index d, const SinusoidalParams& params) {
  return std::max(sinusoidal_frequency(0, d, params), sinusoidal_frequency(d / 2 - 1, d, params));
}

inline void validate_sinusoidal(std::string_view function, Eigen::Index d,
                                const SinusoidalParams& params) {
  require(d > 0, function, "d_model = ", d, " must be > 0");
  require(d % 2 == 0, function, "d_model = ", d, " must be even (sin/cos come in pairs)");
  require(params.layout != SinusoidalLayout::kSinCos || d >= 4, function, "d_model = ", d,
          " must be >= 4 for the sin|cos layout (its frequency divides by d/2 - 1)");
  require(d <= kMaxSinusoidalDim, function, "d_model = ", d, " must be <= 2^20");
  require(std::isfinite(params.base) && params.base > 0.0, function, "base = ", params.base,
          " must be finite and > 0");
  require(params.layout == SinusoidalLayout::kInterleaved ||
              params.layout == SinusoidalLayout::kSinCos ||
              params.layout == SinusoidalLayout::kCosSin ||
              params.layout == SinusoidalLayout::kSinCosVaswani,
          function, "layout = ", static_cast<int>(params.layout), " is not a SinusoidalLayout");
  // A tiny base makes w (up to 1 / base) or p w overflow: sin(inf) = NaN, and 0 * inf at p = 0.
  const double w_max = largest_sinusoidal_frequency(d, params);
  require(std::isfinite(w_max * 0x1p53), function, "base = ", params.base,
          " gives a largest frequency of ", w_max, ": 2^53 times it must be finite");
}

/// position * w_i finite for every i (a fractional position can pass 2^53).
inline void require_finite_angles(std::string_view function, const char* what, double position,
                                  Eigen::Index d, const SinusoidalParams& params) {
  const double w_max = largest_sinusoidal_frequency(d, params);
  require(std::isfinite(position * w_max), function, what, " = ", position,
          " times the largest frequency ", w_max, " (base = ", params.base,
          ") must be finite");
}

/// Column of sin(p w_i) and of cos(p w_i) in a row of width d.
struct SinCosColumns {
  Eigen::Index sin_col;
  Eigen::Index cos_col;
};

constexpr SinCosColumns sinusoidal_columns(Eigen::Index i, Eigen::Index d, SinusoidalLayout layout) {
  switch (layout) {
    case SinusoidalLayout::kInterleaved: return {2 * i, 2 * i + 1};
    case SinusoidalLayout::kSinCos:
    case SinusoidalLayout::kSinCosVaswani: return {i, d / 2 + i};
    case SinusoidalLayout::kCosSin: return {d / 2 + i, i};
  }
  return {0, 0};
}

/// Pairs whose running state (cos, sin: 16 bytes a pair) the kernel keeps on the stack at once:
/// rows up to d_model = 4096 are processed whole, in one sequential pass over the caller's
/// memory; wider rows are split into column blocks.
inline constexpr Eigen::Index kSinusoidalPairBlock = 2048;

/// Contiguous positions p, p+1, ... advance by the shift property PE(p+k) = M(k w) PE(p) (a
/// 2x2 rotation per pair, Vaswani §3.5), in double: no sin/cos per element. Each advance adds
/// ~1 ulp of double per group of kSinusoidalGroup rows; re-anchoring with exact sin/cos every
/// kSinusoidalReanchor positions bounds the drift by ~1e-13 (tested against long double).
inline constexpr std::int64_t kSinusoidalReanchor = 4096;

/// Rows advanced together when their positions are consecutive. Row g of a group is rotated
/// straight from the group's base state by (g+1) w, so the rows are independent (chaining g
/// rotations would serialise on FMA latency) and the state is read and written once a group.
inline constexpr int kSinusoidalGroup = 4;

/// Stores (or adds) one pair's sin and cos at the columns its layout gives them.
template <typename T, bool accumulate, SinusoidalLayout layout>
inline void put_pair(T* row, Eigen::Index i, Eigen::Index half, double sin_value,
                     double cos_value) {
  // layout is a template argument, so the switch inside folds away.
  const auto [sin_col, cos_col] = sinusoidal_columns(i, 2 * half, layout);
  using C = compute_t<T>;
  if constexpr (accumulate) {
    row[sin_col] = from_value<T>(to_compute(row[sin_col]) + static_cast<C>(sin_value));
    row[cos_col] = from_value<T>(to_compute(row[cos_col]) + static_cast<C>(cos_value));
  } else {
    row[sin_col] = from_value<T>(static_cast<C>(sin_value));
    row[cos_col] = from_value<T>(static_cast<C>(cos_value));
  }
}

}  // namespace detail

/// Frequencies and step rotations for one (d_model, params), computed once: build it outside a
/// hot loop and pass it to add_sinusoidal_inplace / sinusoidal_table, which then allocate
/// nothing.
class SinusoidalPlan {
 public:
  /// Throws std::invalid_argument for odd or non-positive d_model, d_model < 4 with kSinCos,
  /// base <= 0 or non-finite.
  explicit SinusoidalPlan(Eigen::Index d_model, const SinusoidalParams& params = {})
      : d_model_(d_model), params_(params) {
    detail::validate_sinusoidal("SinusoidalPlan", d_model, params);
    const Eigen::Index half = d_model / 2;
    constexpr int G = detail::kSinusoidalGroup;
    inv_freq_.resize(static_cast<std::size_t>(half));
    steps_.resize(static_cast<std::size_t>(2 * G * step_stride()));
    for (Eigen::Index i = 0; i < half; ++i) {
      const double w = detail::sinusoidal_frequency(i, d_model, params);
      inv_freq_[static_cast<std::size_t>(i)] = w;
      for (int k = 1; k <= G; ++k) {
        steps_[static_cast<std::size_t>((k - 1) * step_stride() + i)] = std::cos(k * w);
        steps_[static_cast<std::size_t>((G + k - 1) * step_stride() + i)] = std::sin(k * w);
      }
    }
  }

  Eigen::Index d_model() const noexcept { return d_model_; }
  const SinusoidalParams& params() const noexcept { return params_; }
  /// w_i, i in [0, d_model/2): radians per position of pair i.
  const std::vector<double>& frequencies() const noexcept { return inv_freq_; }

  /// cos(k w_i) and sin(k w_i) for k in [1, kSinusoidalGroup]: the shift rotations.
  const double* step_cos(int k) const noexcept { return steps_.data() + (k - 1) * step_stride(); }
  const double* step_sin(int k) const noexcept {
    return steps_.data() + (detail::kSinusoidalGroup + k - 1) * step_stride();
  }

 private:
  // Tables 64 bytes apart modulo 4 KiB, so the kernel's loads from several of them never alias
  // (d_model / 2 is often a multiple of 512 doubles = 4 KiB).
  Eigen::Index step_stride() const noexcept { return d_model_ / 2 + 8; }

  Eigen::Index d_model_;
  SinusoidalParams params_;
  std::vector<double> inv_freq_;
  std::vector<double> steps_;  // cos(k w) for k = 1..G, then sin(k w), step_stride() apart
};

namespace detail {

/// rows: a callable (Index r) -> (position p, T* row) for r in [0, num_rows); accumulate adds
/// the encoding to the row, otherwise it overwrites it. Each encoding row is also put at
/// row + k * copy_stride for k in [1, copies): batch rows that share their position_ids get
/// the encoding computed once (the fan-out that makes a batch nearly free).
template <typename T, bool accumulate, SinusoidalLayout layout, typename RowAt>
void sinusoidal_rows_impl(Eigen::Index num_rows, const SinusoidalPlan& plan, RowAt row_at,
                          Eigen::Index copies, Eigen::Index copy_stride) {
  constexpr int G = kSinusoidalGroup;
  const Eigen::Index half = plan.d_model() / 2;
  [[maybe_unused]] const bool from_memory =
      static_cast<double>(num_rows) *
          static_cast<double>(plan.d_model() * Eigen::Index{sizeof(T)}) >=
      static_cast<double>(kFromMemoryBytes);
  const double* w_all = plan.frequencies().data();
  // s sits 64 bytes past a 4 KiB multiple from c: c[i] and s[i] at the same address modulo
  // 4 KiB would make every load wait on the previous store (4K aliasing).
  alignas(64) double state[2 * kSinusoidalPairBlock + 8];
  double* const c = state;
  double* const s = state + kSinusoidalPairBlock + 8;

  const auto put = [&](T* row, Eigen::Index i, double sin_value, double cos_value) {
    for (Eigen::Index k = 0; k < copies; ++k) {
      put_pair<T, accumulate, layout>(row + k * copy_stride, i, half, sin_value, cos_value);
    }
  };

  for (Eigen::Index i0 = 0; i0 < half; i0 += kSinusoidalPairBlock) {
    const Eigen::Index n = std::min(kSinusoidalPairBlock, half - i0);
    const double* w = w_all + i0;
    const double* step_c[G];
    const double* step_s[G];
    for (int g = 0; g < G; ++g) {
      step_c[g] = plan.step_cos(g + 1) + i0;
      step_s[g] = plan.step_sin(g + 1) + i0;
    }
    // Writes `count` rows starting at r; with `rotate`, row g holds the state advanced by g+1
    // positions and the state moves to the last row; otherwise the state already holds the
    // rows' encoding.
    const auto emit = [&](Eigen::Index r, auto count_tag, bool rotate) {
      constexpr int count = decltype(count_tag)::value;
      T* rows[std::size_t{count}];
      for (int g = 0; g < count; ++g) rows[g] = row_at(r + g).second;
      if (rotate) {
        Eigen::Index i_simd = 0;
#if defined(POSENC_SINUSOIDAL_SIMD)
        if constexpr (std::is_same_v<T, float>) {
          i_simd = n - n % 8;
          if (copies == 1) {
            sinusoidal_rotate_rows_simd<accumulate, static_cast<int>(layout), count>(
                rows, c, s, step_c[0], step_s[0], i_simd, i0, half, from_memory);
          } else {
            sinusoidal_rotate_rows_fanout<accumulate, static_cast<int>(layout), count>(
                rows, copies, copy_stride, c, s, step_c[0], step_s[0], i_simd, i0, half);
          }
        }
#endif
        POSENC_IVDEP
        for (Eigen::Index i = i_simd; i < n; ++i) {
          const double ci = c[i], si = s[i];
          double cg = ci, sg = si;
          for (int g = 0; g < count; ++g) {
            cg = ci * step_c[g][i] - si * step_s[g][i];
            sg = si * step_c[g][i] + ci * step_s[g][i];
            put(rows[g], i0 + i, sg, cg);
          }
          c[i] = cg;
          s[i] = sg;
        }
      } else {
        POSENC_IVDEP
        for (Eigen::Index i = 0; i < n; ++i) {
          for (int g = 0; g < count; ++g) put(rows[g], i0 + i, s[i], c[i]);
        }
      }
    };

    std::int64_t previous = -2;
    std::int64_t since_anchor = 0;
    Eigen::Index r = 0;
    while (r < num_rows) {
      const std::int64_t position = row_at(r).first;
      if (position == previous + 1 && since_anchor + G <= kSinusoidalReanchor &&
          r + G <= num_rows) {
        bool consecutive = true;
        for (int g = 1; g < G; ++g) consecutive = consecutive && row_at(r + g).first == position + g;
        if (consecutive) {
          emit(r, std::integral_constant<int, G>{}, true);
          since_anchor += G;
          previous = position + G - 1;
          r += G;
          continue;
        }
      }
      if (position == previous + 1 && since_anchor < kSinusoidalReanchor) {
        emit(r, std::integral_constant<int, 1>{}, true);
        ++since_anchor;
      } else {
        if (position == 0) {
          // Every sequence of a batch starts here: no sin/cos needed.
          std::fill(c, c + n, 1.0);
          std::fill(s, s + n, 0.0);
          since_anchor = 0;
        } else if (position != previous) {
          const double p = static_cast<double>(position);
          for (Eigen::Index i = 0; i < n; ++i) {
            c[i] = std::cos(p * w[i]);
            s[i] = std::sin(p * w[i]);
          }
          since_anchor = 0;
        }
        emit(r, std::integral_constant<int, 1>{}, false);
      }
      previous = position;
      ++r;
    }
  }
}

template <typename T, bool accumulate, typename RowAt>
void sinusoidal_rows(Eigen::Index num_rows, const SinusoidalPlan& plan, RowAt row_at,
                     Eigen::Index copies = 1, Eigen::Index copy_stride = 0) {
  switch (plan.params().layout) {
    case SinusoidalLayout::kInterleaved:
      return sinusoidal_rows_impl<T, accumulate, SinusoidalLayout::kInterleaved>(
          num_rows, plan, row_at, copies, copy_stride);
    // The kernels place values by layout; the frequencies come from the plan, so the two
    // [sin | cos] layouts share one instantiation.
    case SinusoidalLayout::kSinCos:
    case SinusoidalLayout::kSinCosVaswani:
      return sinusoidal_rows_impl<T, accumulate, SinusoidalLayout::kSinCos>(
          num_rows, plan, row_at, copies, copy_stride);
    case SinusoidalLayout::kCosSin:
      return sinusoidal_rows_impl<T, accumulate, SinusoidalLayout::kCosSin>(
          num_rows, plan, row_at, copies, copy_stride);
  }
}

}  // namespace detail

/// \brief w_i, the d/2 angular frequencies of the chosen layout (radians per position).
/// Throws std::invalid_argument for odd or non-positive d, d < 4 with kSinCos, base <= 0.
inline std::vector<double> sinusoidal_frequencies(Eigen::Index d_model,
                                                  const SinusoidalParams& params = {}) {
  detail::validate_sinusoidal("sinusoidal_frequencies", d_model, params);
  std::vector<double> w(static_cast<std::size_t>(d_model / 2));
  for (Eigen::Index i = 0; i < d_model / 2; ++i) {
    w[static_cast<std::size_t>(i)] = detail::sinusoidal_frequency(i, d_model, params);
  }
  return w;
}

/// \brief One encoding row PE(position) for any non-negative finite position, fractional ones
/// included (diffusion timesteps).
/// out: [d_model]
/// Throws std::invalid_argument (bad d_model/base, negative or non-finite position) before
/// writing anything.
template <typename T>
void sinusoidal_encoding(double position, TensorView<T, 1> out,
                         const SinusoidalParams& params = {}) {
  static_assert(detail::is_storage_type_v<T>, "posenc: storage type must be float, double, "
                                              "Eigen::half or Eigen::bfloat16");
  constexpr std::string_view fn = "sinusoidal_encoding";
  const Eigen::Index d = out.dimension(0);
  detail::validate_sinusoidal(fn, d, params);
  detail::require(std::isfinite(position) && position >= 0.0, fn, "position = ", position,
                  " must be finite and >= 0");
  detail::require_finite_angles(fn, "position", position, d, params);
  for (Eigen::Index i = 0; i < d / 2; ++i) {
    const double angle = position * detail::sinusoidal_frequency(i, d, params);
    const auto cols = detail::sinusoidal_columns(i, d, params.layout);
    out(cols.sin_col) = detail::from_value<T>(std::sin(angle));
    out(cols.cos_col) = detail::from_value<T>(std::cos(angle));
  }
}

/// \brief The table out[r] = PE(first_position + r), r in [0, num_positions).
/// out: [num_positions, d_model]
/// Throws std::invalid_argument when out's d_model differs from the plan's, for zero rows, a
/// negative first_position or first_position + num_positions - 1 beyond 2^53 (where double
/// stops counting exactly; 2^53 itself is a position, as add_sinusoidal_inplace takes it).
template <typename T>
void sinusoidal_table(TensorView<T, 2> out, const SinusoidalPlan& plan,
                      std::int64_t first_position = 0) {
  static_assert(detail::is_storage_type_v<T>, "posenc: storage type must be float, double, "
                                              "Eigen::half or Eigen::bfloat16");
  constexpr std::string_view fn = "sinusoidal_table";
  const Eigen::Index rows = out.dimension(0);
  const Eigen::Index d = out.dimension(1);
  detail::require(d == plan.d_model(), fn, "out d_model = ", d,
                  " must equal the plan's d_model (", plan.d_model(), ")");
  detail::require(rows > 0, fn, "num_positions = ", rows, " must be > 0");
  constexpr std::int64_t kMaxExact = std::int64_t{1} << 53;
  detail::require(first_position >= 0 && first_position <= kMaxExact - (rows - 1), fn,
                  "first_position = ", first_position,
                  " must be in [0, 2^53 - num_positions + 1]");
  T* data = out.data();
  detail::sinusoidal_rows<T, false>(rows, plan, [&](Eigen::Index r) {
    return std::pair<std::int64_t, T*>{first_position + r, data + r * d};
  });
}

/// \brief Convenience overload: plans for out's d_model, then builds the table.
template <typename T>
void sinusoidal_table(TensorView<T, 2> out, const SinusoidalParams& params = {},
                      std::int64_t first_position = 0) {
  detail::validate_sinusoidal("sinusoidal_table", out.dimension(1), params);
  sinusoidal_table<T>(out, SinusoidalPlan(out.dimension(1), params), first_position);
}

/// \brief embeddings[b, s, :] += PE(position_ids[b, s]), in place; no allocation.
/// embeddings: [batch, seq, d_model]; position_ids: [batch, seq], int64, >= 0.
/// Consecutive positions are advanced by the shift rotation (no sin/cos per element), so the
/// kernel runs near memory speed; any jump in positions (left padding, packing, a new batch
/// row) re-anchors with exact sin/cos.
/// Throws std::invalid_argument when embeddings' d_model differs from the plan's, for zero-size
/// or mismatched shapes, and negative or > 2^53 positions — all checked before the first write.
template <typename T>
void add_sinusoidal_inplace(TensorView<T, 3> embeddings, PositionIdsView position_ids,
                            const SinusoidalPlan& plan) {
  static_assert(detail::is_storage_type_v<T>, "posenc: storage type must be float, double, "
                                              "Eigen::half or Eigen::bfloat16");
  constexpr std::string_view fn = "add_sinusoidal_inplace";
  const Eigen::Index batch = embeddings.dimension(0);
  const Eigen::Index seq = embeddings.dimension(1);
  const Eigen::Index d = embeddings.dimension(2);
  detail::require(d == plan.d_model(), fn, "embeddings d_model = ", d,
                  " must equal the plan's d_model (", plan.d_model(), ")");
  detail::require(batch > 0 && seq > 0, fn, "embeddings shape [", batch, ", ", seq, ", ", d,
                  "] must have batch > 0 and seq > 0");
  detail::require(position_ids.dimension(0) == batch && position_ids.dimension(1) == seq, fn,
                  "position_ids shape [", position_ids.dimension(0), ", ",
                  position_ids.dimension(1), "] must equal embeddings' [batch, seq] = [", batch,
                  ", ", seq, "]");
  constexpr std::int64_t kMaxExact = std::int64_t{1} << 53;
  for (Eigen::Index b = 0; b < batch; ++b) {
    for (Eigen::Index s = 0; s < seq; ++s) {
      const std::int64_t p = position_ids(b, s);
      if (p < 0 || p > kMaxExact) {
        detail::throw_invalid_argument(fn, "position_ids[", b, ", ", s, "] = ", p,
                                       " must be in [0, 2^53]");
      }
    }
  }
  // Batch rows with the same position_ids (every unpadded batch) share one computation: a run
  // of equal rows [b, e) is encoded once and added to each. Different runs are independent.
  const std::int64_t* ids = position_ids.data();
  for (Eigen::Index b = 0; b < batch;) {
    const std::int64_t* run_ids = ids + b * seq;
    Eigen::Index e = b + 1;
    while (e < batch && std::equal(run_ids, run_ids + seq, ids + e * seq)) ++e;
    T* rows = embeddings.data() + b * seq * d;
    detail::sinusoidal_rows<T, true>(
        seq, plan,
        [&](Eigen::Index r) { return std::pair<std::int64_t, T*>{run_ids[r], rows + r * d}; },
        e - b, seq * d);
    b = e;
  }
}

/// \brief Convenience overload: plans for embeddings' d_model (one allocation), then adds.
template <typename T>
void add_sinusoidal_inplace(TensorView<T, 3> embeddings, PositionIdsView position_ids,
                            const SinusoidalParams& params = {}) {
  detail::validate_sinusoidal("add_sinusoidal_inplace", embeddings.dimension(2), params);
  add_sinusoidal_inplace<T>(embeddings, position_ids,
                            SinusoidalPlan(embeddings.dimension(2), params));
}

/// \brief Diffusion-model timestep embedding, [cos | sin] with w_i = max_period^(-i/(d/2)):
/// out[n] = PE(timesteps[n]) for fractional timesteps (ggml_timestep_embedding, the DDPM/Stable
/// Diffusion `timestep_embedding`).
/// timesteps: [n] (finite, >= 0); out: [n, d_model]
template <typename T>
void timestep_embedding(ConstTensorView<double, 1> timesteps, TensorView<T, 2> out,
                        double max_period = 10000.0) {
  constexpr std::string_view fn = "timestep_embedding";
  SinusoidalParams params;
  params.layout = SinusoidalLayout::kCosSin;
  params.base = max_period;
  detail::validate_sinusoidal(fn, out.dimension(1), params);
  detail::require(out.dimension(0) == timesteps.dimension(0), fn, "out rows = ",
                  out.dimension(0), " must equal the number of timesteps (",
                  timesteps.dimension(0), ")");
  for (Eigen::Index n = 0; n < timesteps.dimension(0); ++n) {
    detail::require(std::isfinite(timesteps(n)) && timesteps(n) >= 0.0, fn, "timesteps[", n,
                    "] = ", timesteps(n), " must be finite and >= 0");
    detail::require_finite_angles(fn, "timestep", timesteps(n), out.dimension(1), params);
  }
  for (Eigen::Index n = 0; n < timesteps.dimension(0); ++n) {
    sinusoidal_encoding<T>(timesteps(n),
                           TensorView<T, 1>(out.data() + n * out.dimension(1), out.dimension(1)),
                           params);
  }
}

}  // namespace posenc
