// The attention tests again, built with -mavx2 -mfma -mf16c (tests/CMakeLists.txt) so that
// Eigen uses 8-float packets: the decode path then reads 16-bit K / V in place through the
// in-register widening loads and reduces its dot products with the AVX horizontal-add tree of
// detail/attention_kernel.hpp. Needs an AVX2 + FMA + F16C machine to run.

#include <catch2/catch.hpp>

#include "test_attention.cpp"

#if defined(__AVX2__) && defined(__F16C__)
TEST_CASE("attention simd: decode widens 16-bit K / V in registers under this target",
          "[attention][simd]") {
  REQUIRE(__builtin_cpu_supports("avx2"));
#if !defined(__clang__)  // Clang 14 does not know the "f16c" feature string
  REQUIRE(__builtin_cpu_supports("f16c"));
#endif
  STATIC_REQUIRE(posenc::detail::kAttnLanes<float> == 8);
  STATIC_REQUIRE(posenc::detail::attn_loads_widened_v<float, Eigen::bfloat16>);
  STATIC_REQUIRE(posenc::detail::attn_loads_widened_v<float, Eigen::half>);
}
#endif
