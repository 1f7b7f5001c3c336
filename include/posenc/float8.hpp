#pragma once
/// \file posenc/float8.hpp
/// 8-bit floating point storage for KV caches: the OCP FP8 formats (OCP 8-bit Floating Point
/// Specification, 2023) that vLLM's `kv_cache_dtype = "fp8_e4m3"` / `"fp8_e5m2"`, FlashInfer's
/// `rope_quantize_fp8_append_paged_kv_cache` and TensorRT-LLM's FP8 KV cache store.
///
///   float8_e4m3 (E4M3FN)  s eeee mmm   bias 7,  max 448,   min subnormal 2^-9,  no infinity,
///                                      NaN = s 1111 111
///   float8_e5m2           s eeeee mm   bias 15, max 57344, min subnormal 2^-16, IEEE-like
///                                      (infinity s 11111 00, NaN s 11111 mm with mm != 0)
///
/// Quantisation rounds to nearest, ties to even, and saturates: a magnitude above the largest
/// finite value (infinity included) becomes that value, as CUDA's __NV_SATFINITE conversion that
/// vLLM's cache writes use (an unsaturated E4M3 would turn it into NaN). NaN stays NaN (code 0x7F
/// with its sign, as PyTorch's casts). Every FP8 value is exactly a float, so widening is exact.
///
/// These are storage types of KvCache / PagedKvCache only, with a per-tensor or per-kv-head
/// scale (KvCache::set_scales: stored = fp8(x / scale), as vLLM's k_scale / v_scale).

#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "posenc/detail/fast_math_guard.hpp"

namespace posenc {
namespace detail {

/// An OCP FP8 format: kExp exponent bits, kMan mantissa bits; kIeee formats (E5M2) reserve the
/// top exponent for infinity and NaN, E4M3FN only the all-ones code for NaN.
template <int kExp, int kMan, bool kIeee>
struct Float8Format {
  static constexpr int kBias = (1 << (kExp - 1)) - 1;
  static constexpr std::uint8_t kMaxCode =
      kIeee ? static_cast<std::uint8_t>((((1 << kExp) - 2) << kMan) | ((1 << kMan) - 1))  // 0x7B
            : static_cast<std::uint8_t>(0x7E);
  /// The NaN a cast writes, sign ORed in: 0x7F in both formats, as PyTorch's float8 casts (c10
  /// fp8*_from_fp32_value) and CUDA's __nv_cvt_float_to_fp8 (which drops the sign) write it.
  static constexpr std::uint8_t kNanCode = 0x7F;

  static bool is_nan(std::uint8_t code) noexcept {
    const std::uint8_t mag = code & 0x7F;
    return kIeee ? mag > (((1 << kExp) - 1) << kMan) : mag == 0x7F;
  }

  static std::uint32_t float_bits(float x) noexcept {
    std::uint32_t u;
    std::memcpy(&u, &x, sizeof u);
    return u;
  }
  static float bits_float(std::uint32_t u) noexcept {
    float x;
    std::memcpy(&x, &u, sizeof x);
    return x;
  }

  /// sign 2^(e - bias) (1 + m / 2^kMan), or 2^(1 - bias) m / 2^kMan when e = 0: the exponent
  /// field moves into a float's and is rebiased by 127 - bias; a subnormal is m times its ulp.
  static float decode(std::uint8_t code) noexcept {
    const std::uint32_t mag = code & 0x7Fu;
    const std::uint32_t sign = static_cast<std::uint32_t>(code & 0x80u) << 24;
    if (is_nan(code)) return std::numeric_limits<float>::quiet_NaN();
    if (kIeee && mag == (((1u << kExp) - 1) << kMan)) {
      return bits_float(sign | 0x7F800000u);
    }
    if (mag >> kMan == 0) {
      return bits_float(sign | float_bits(static_cast<float>(mag) * kSubnormalUlp));
    }
    return bits_float(sign | ((mag << (23 - kMan)) + ((127u - kBias) << 23)));
  }

  /// Round to nearest even on the float's bits, saturating (see the file comment).
  static std::uint8_t encode(float x) noexcept {
    std::uint32_t u = float_bits(x);
    const auto sign = static_cast<std::uint8_t>((u >> 24) & 0x80u);
    u &= 0x7FFFFFFFu;
    if (u > 0x7F800000u) return sign | kNanCode;
    if (u >= float_bits(decode(kMaxCode))) return sign | kMaxCode;
    if (u < (static_cast<std::uint32_t>(128 - kBias) << 23)) {
      // Below the smallest normal 2^(1 - bias): adding C, whose float ulp is the subnormal ulp
      // 2^(1 - bias - kMan), rounds |x| to a multiple of it (the default round-to-nearest-even
      // mode); the difference of the bits counts those ulps, 0 .. 2^kMan (the smallest normal).
      constexpr float kC = static_cast<float>(1 << 23) * kSubnormalUlp;
      const float sum = bits_float(u) + kC;
      return sign | static_cast<std::uint8_t>(float_bits(sum) - float_bits(kC));
    }
    // Normal: drop 23 - kMan mantissa bits, rounding half to even, and rebias the exponent; a
    // carry out of the mantissa moves into the exponent field as it should.
    constexpr int kDrop = 23 - kMan;
    u += ((static_cast<std::uint32_t>(kBias) - 127u) << 23) + ((1u << (kDrop - 1)) - 1u) +
         ((u >> kDrop) & 1u);
    return sign | static_cast<std::uint8_t>(u >> kDrop);
  }

  static constexpr float kSubnormalUlp =
      1.0f / static_cast<float>(std::uint64_t{1} << (kBias - 1 + kMan));
};

using Float8E4M3Format = Float8Format<4, 3, false>;
using Float8E5M2Format = Float8Format<5, 2, true>;

/// x as a float rounded to odd: the nearest float, stepped one toward x when it is inexact and
/// even. A tie of FP8 codes in double that float's rounding moved onto a tie would otherwise
/// round twice (1.0625000000009 -> 1.0625f -> 1 in E4M3, where x's nearest code is 1.125).
inline float narrow_to_odd(double x) noexcept {
  constexpr double kFloatMax = static_cast<double>(std::numeric_limits<float>::max());
  if (!(x >= -kFloatMax && x <= kFloatMax)) {  // NaN, or beyond float: the sign decides
    return x != x ? std::numeric_limits<float>::quiet_NaN()
                  : static_cast<float>(x > 0 ? kFloatMax : -kFloatMax);
  }
  float f = static_cast<float>(x);
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if (static_cast<double>(f) != x && (u & 1u) == 0) {
    u = static_cast<double>(f) < x ? (f >= 0.0f ? u + 1 : u - 1) : (f > 0.0f ? u - 1 : u + 1);
    std::memcpy(&f, &u, sizeof f);
  }
  return f;
}

template <typename Format, typename Tag>
struct Float8 {
  std::uint8_t bits = 0;
  using format = Format;

  Float8() = default;
  /// Rounds to nearest even, saturating at +-max (see the file comment).
  explicit Float8(float x) noexcept : bits(Format::encode(x)) {}
  /// One rounding, not two: x goes to float rounded to odd (float keeps more than twice FP8's
  /// bits plus two, so the FP8 rounding of that float is the FP8 rounding of x), saturated first
  /// (a double past FLT_MAX has no float).
  explicit Float8(double x) noexcept : Float8(detail::narrow_to_odd(x)) {}
  explicit operator float() const noexcept { return Format::decode(bits); }
  explicit operator double() const noexcept { return static_cast<double>(Format::decode(bits)); }

  static constexpr Float8 from_bits(std::uint8_t b) noexcept {
    Float8 f;
    f.bits = b;
    return f;
  }
  /// The largest finite value (448 for E4M3, 57344 for E5M2).
  static float max() noexcept { return Format::decode(Format::kMaxCode); }

  friend bool operator==(Float8 a, Float8 b) noexcept { return a.bits == b.bits; }
  friend bool operator!=(Float8 a, Float8 b) noexcept { return a.bits != b.bits; }
};

struct E4M3Tag {};
struct E5M2Tag {};
struct E4M3FiniteTag {};

}  // namespace detail

/// OCP FP8 E4M3FN: 4 exponent bits, 3 mantissa bits, finite range +-448.
using float8_e4m3 = detail::Float8<detail::Float8E4M3Format, detail::E4M3Tag>;
/// OCP FP8 E5M2: 5 exponent bits, 2 mantissa bits, finite range +-57344, infinities.
using float8_e5m2 = detail::Float8<detail::Float8E5M2Format, detail::E5M2Tag>;

static_assert(sizeof(float8_e4m3) == 1 && sizeof(float8_e5m2) == 1);
static_assert(std::is_trivially_copyable_v<float8_e4m3>);

namespace detail {
/// E4M3 codes known to hold no NaN (a cache that never stored one): the attention kernel reads
/// a float8_e4m3 cache through this type to skip the NaN test of its widening.
using float8_e4m3_finite = Float8<Float8E4M3Format, E4M3FiniteTag>;

/// The public FP8 storage types (a KV cache's T).
template <typename T>
inline constexpr bool is_float8_v =
    std::is_same_v<T, float8_e4m3> || std::is_same_v<T, float8_e5m2>;
/// Any FP8 code type the kernel reads, float8_e4m3_finite included.
template <typename T>
inline constexpr bool is_float8_code_v = is_float8_v<T> || std::is_same_v<T, float8_e4m3_finite>;
}  // namespace detail

}  // namespace posenc
