// FP8 storage types against the OCP FP8 specification (tests/support/float8_spec.hpp): every
// code's value as the closed form in long double, and quantisation as the nearest code found
// by searching all 256 (ties to the even code, saturation at the largest finite value).

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "posenc/float8.hpp"
#include "support/float8_spec.hpp"

namespace {

using namespace posenc_test::fp8;

template <typename F>
void check_every_code(const Spec& s) {
  for (int code = 0; code < 256; ++code) {
    const float v = static_cast<float>(F::from_bits(static_cast<std::uint8_t>(code)));
    INFO("code " << code);
    if (spec_is_nan(s, code)) {
      CHECK(std::isnan(v));
    } else if (spec_is_inf(s, code)) {
      CHECK(std::isinf(v));
      CHECK(std::signbit(v) == ((code & 0x80) != 0));
    } else {
      CHECK(static_cast<long double>(v) == spec_value(s, code));
      CHECK(std::signbit(v) == ((code & 0x80) != 0));
      CHECK(static_cast<double>(F::from_bits(static_cast<std::uint8_t>(code))) ==
            static_cast<double>(spec_value(s, code)));
    }
  }
}

template <typename F>
void check_rounding(const Spec& s) {
  std::vector<float> xs;
  // Every finite value, the midpoints between neighbours and one float ulp either side of them.
  for (int code = 0; code < 128; ++code) {
    if (spec_is_nan(s, code) || spec_is_inf(s, code)) continue;
    const long double v = spec_value(s, code);
    const long double next = code + 1 < 128 && !spec_is_nan(s, code + 1) &&
                                     !spec_is_inf(s, code + 1)
                                 ? spec_value(s, code + 1)
                                 : 2 * v;  // past the largest: saturation territory
    const auto mid = static_cast<float>((v + next) / 2);
    for (float x : {static_cast<float>(v), mid, std::nextafter(mid, 0.0f),
                    std::nextafter(mid, 1e30f)}) {
      xs.push_back(x);
      xs.push_back(-x);
    }
  }
  std::mt19937 rng(20261201);
  std::uniform_real_distribution<float> mant(1.0f, 2.0f);
  std::uniform_int_distribution<int> expo(-24, 18);
  for (int i = 0; i < 20000; ++i) {
    const float x = std::ldexp(mant(rng), expo(rng));
    xs.push_back(i % 2 ? x : -x);
  }
  xs.push_back(0.0f);
  xs.push_back(-0.0f);
  xs.push_back(std::numeric_limits<float>::denorm_min());
  xs.push_back(std::numeric_limits<float>::max());
  xs.push_back(std::numeric_limits<float>::infinity());
  xs.push_back(-std::numeric_limits<float>::infinity());
  for (const float x : xs) {
    INFO("x = " << x);
    REQUIRE(static_cast<int>(F(x).bits) == spec_nearest(s, x));
  }
  const F nan(std::numeric_limits<float>::quiet_NaN());
  CHECK(std::isnan(static_cast<float>(nan)));
}

}  // namespace

TEST_CASE("float8: every E4M3 and E5M2 code decodes to the OCP closed form", "[float8]") {
  check_every_code<posenc::float8_e4m3>(kE4M3);
  check_every_code<posenc::float8_e5m2>(kE5M2);
  CHECK(posenc::float8_e4m3::max() == 448.0f);
  CHECK(posenc::float8_e5m2::max() == 57344.0f);
  CHECK(static_cast<float>(posenc::float8_e4m3::from_bits(0x01)) == std::ldexp(1.0f, -9));
  CHECK(static_cast<float>(posenc::float8_e5m2::from_bits(0x01)) == std::ldexp(1.0f, -16));
}

namespace {

/// Doubles a hair off every midpoint between neighbouring codes: float cannot tell them from the
/// midpoint itself, so converting through the nearest float rounds twice.
template <typename F>
void check_double_rounding(const Spec& s) {
  for (int code = 0; code < 127; ++code) {
    if (spec_is_nan(s, code) || spec_is_inf(s, code) || spec_is_nan(s, code + 1) ||
        spec_is_inf(s, code + 1)) {
      continue;
    }
    const auto mid = static_cast<double>((spec_value(s, code) + spec_value(s, code + 1)) / 2);
    for (const double x : {mid * (1 + 0x1p-40), mid * (1 - 0x1p-40), std::nextafter(mid, 1e300),
                           std::nextafter(mid, 0.0), mid}) {
      for (const double signed_x : {x, -x}) {
        INFO("x = " << signed_x);
        REQUIRE(static_cast<int>(F(signed_x).bits) == spec_nearest(s, signed_x));
      }
    }
  }
  for (const double x : {1e300, -1e300, std::numeric_limits<double>::infinity(), 1e-300,
                         -std::numeric_limits<double>::denorm_min()}) {
    INFO("x = " << x);
    REQUIRE(static_cast<int>(F(x).bits) == spec_nearest(s, x));
  }
  CHECK(std::isnan(static_cast<float>(F(std::numeric_limits<double>::quiet_NaN()))));
}

}  // namespace

TEST_CASE("float8: a double is rounded once, not through the nearest float", "[float8]") {
  // 1.0625 is the tie between 1 and 1.125 in E4M3; 1.0625 + 2^-40 is above it (nearest 1.125)
  // but rounds to exactly 1.0625 in float, and the tie then went to the even code, 1.
  CHECK(posenc::float8_e4m3(1.0625 + 0x1p-40).bits == 0x39);
  CHECK(posenc::float8_e5m2(1.125 + 0x1p-40).bits == 0x3D);  // 1.25, not 1
  check_double_rounding<posenc::float8_e4m3>(kE4M3);
  check_double_rounding<posenc::float8_e5m2>(kE5M2);
}

TEST_CASE("float8: quantisation rounds to the nearest code, ties to even, and saturates",
          "[float8]") {
  check_rounding<posenc::float8_e4m3>(kE4M3);
  check_rounding<posenc::float8_e5m2>(kE5M2);
  // Hand cases: 1.0625 is half-way between 1 (m = 0) and 1.125 (m = 1): the even one.
  CHECK(posenc::float8_e4m3(1.0625f).bits == 0x38);
  CHECK(posenc::float8_e4m3(1.1875f).bits == 0x3A);  // between m = 1 and 2: 1.25
  CHECK(posenc::float8_e4m3(1000.0f).bits == 0x7E);  // saturates at 448, not NaN
  CHECK(posenc::float8_e4m3(-std::numeric_limits<float>::infinity()).bits == 0xFE);
  CHECK(posenc::float8_e5m2(std::numeric_limits<float>::infinity()).bits == 0x7B);
  CHECK(posenc::float8_e4m3(-0.0f).bits == 0x80);
}

TEST_CASE("float8: NaN encodes as PyTorch's cast does, 0x7F with the float's sign", "[float8]") {
  // PyTorch c10 (Float8_e4m3fn.h / Float8_e5m2.h, fp8*_from_fp32_value): a NaN becomes 0x7F,
  // then the float's sign bit is ORed in. For E4M3FN 0x7F is the only NaN magnitude (OCP);
  // for E5M2 (s.11111.mm, mm != 0) it is the quiet NaN with both mantissa bits set, the code
  // CUDA's __nv_cvt_float_to_fp8 gives too (which drops the sign).
  const float qnan = std::numeric_limits<float>::quiet_NaN();
  const float pos = std::copysign(qnan, 1.0f), neg = std::copysign(qnan, -1.0f);
  CHECK(static_cast<int>(posenc::float8_e4m3(pos).bits) == 0x7F);
  CHECK(static_cast<int>(posenc::float8_e4m3(neg).bits) == 0xFF);
  CHECK(static_cast<int>(posenc::float8_e5m2(pos).bits) == 0x7F);
  CHECK(static_cast<int>(posenc::float8_e5m2(neg).bits) == 0xFF);
  CHECK(std::isnan(static_cast<float>(posenc::float8_e5m2(neg))));
}

TEST_CASE("float8: == and != compare the codes", "[float8]") {
  using E4 = posenc::float8_e4m3;
  using E5 = posenc::float8_e5m2;
  // Codes, not values: +0 (0x00) and -0 (0x80) are different codes.
  CHECK(E4::from_bits(0x38) == E4::from_bits(0x38));
  CHECK_FALSE(E4::from_bits(0x38) != E4::from_bits(0x38));
  CHECK(E4::from_bits(0x38) != E4::from_bits(0x39));
  CHECK_FALSE(E4::from_bits(0x38) == E4::from_bits(0x39));
  CHECK(E4::from_bits(0x00) != E4::from_bits(0x80));
  CHECK(E5::from_bits(0x3C) != E5::from_bits(0xBC));
  CHECK_FALSE(E5::from_bits(0x7B) != E5(57344.0f));
}

TEST_CASE("float8: the tie between the largest finite value and the next code saturates",
          "[float8]") {
  // E5M2's largest finite value 57344 = 1.11b x 2^15 has an odd mantissa; half-way to the next
  // code (2^16, infinity) is 61440, where round-to-nearest-even alone would pick 2^16, the
  // even one, and give infinity. The header (and CUDA's __NV_SATFINITE) saturates every
  // magnitude above the largest finite value: 0x7B. E4M3's 448 = 1.110b x 2^8 is even, so its
  // tie 464 with the NaN code 480 stays 448 either way; past it, still 448.
  using E5 = posenc::float8_e5m2;
  using E4 = posenc::float8_e4m3;
  for (const float x : {61440.0f, std::nextafter(61440.0f, 0.0f), std::nextafter(61440.0f, 1e30f),
                        65536.0f, 57344.0f}) {
    INFO("x = " << x);
    CHECK(static_cast<int>(E5(x).bits) == 0x7B);
    CHECK(static_cast<int>(E5(-x).bits) == 0xFB);
    CHECK(static_cast<int>(E5(static_cast<double>(x)).bits) == 0x7B);
    CHECK(spec_nearest(kE5M2, x) == 0x7B);
  }
  for (const float x : {464.0f, std::nextafter(464.0f, 1e30f), 480.0f, 496.0f}) {
    INFO("x = " << x);
    CHECK(static_cast<int>(E4(x).bits) == 0x7E);
    CHECK(static_cast<int>(E4(-x).bits) == 0xFE);
    CHECK(spec_nearest(kE4M3, x) == 0x7E);
  }
}
