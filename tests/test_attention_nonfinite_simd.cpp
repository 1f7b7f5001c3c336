// The non-finite attention tests again, built with -mavx2 -mfma -mf16c (tests/CMakeLists.txt):
// 8-float packets, and decode reads 16-bit K / V through the in-register widening loads.
// Needs an AVX2 + FMA + F16C machine to run.

#include <catch2/catch.hpp>

#include "test_attention_nonfinite.cpp"

#if defined(__AVX2__) && defined(__F16C__)
TEST_CASE("attention nonfinite simd: 8-float packets under this target",
          "[attention][nonfinite][simd]") {
  REQUIRE(__builtin_cpu_supports("avx2"));
  STATIC_REQUIRE(posenc::detail::kAttnLanes<float> == 8);
}
#endif
