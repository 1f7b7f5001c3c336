// The RoPE SIMD tests again, built for AVX-512 (see test_attention_avx512.cpp): rows whose
// rotated width is a multiple of 16 take the 512-bit kernels (RopeVec16), bfloat16 stores
// round with vcvtneps2bf16 (denormal vectors by the integer path), narrower slices the AVX2
// ones.

#include <catch2/catch.hpp>

#include "test_rope_simd.cpp"

TEST_CASE("rope avx512: the 512-bit row kernels are compiled under this target",
          "[rope][simd][avx512]") {
  REQUIRE(__builtin_cpu_supports("avx512f"));
#ifndef POSENC_ROPE_SIMD512
  FAIL("POSENC_ROPE_SIMD512 should be defined under the AVX-512 target");
#endif
  STATIC_REQUIRE(posenc::detail::RopeVec16::kLanes == 16);
}
