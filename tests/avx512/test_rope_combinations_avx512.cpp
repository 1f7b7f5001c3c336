// The RoPE combination sweep again, built for AVX-512 (see test_rope_avx512.cpp): its views,
// widths and row phases then reach the 512-bit row kernels, the line-phase float kernels and
// the AVX512-BF16 rounding (denormal vectors by the integer path) as well as the AVX2 ones.

#include <catch2/catch.hpp>

#include "test_rope_combinations.cpp"

TEST_CASE("rope combinations avx512: the 512-bit row kernels are compiled under this target",
          "[rope][combinations][avx512]") {
  REQUIRE(__builtin_cpu_supports("avx512f"));
#ifndef POSENC_ROPE_SIMD512
  FAIL("POSENC_ROPE_SIMD512 should be defined under the AVX-512 target");
#endif
  STATIC_REQUIRE(posenc::detail::RopeVec16::kLanes == 16);
}
