// The sinusoidal tests again, built for AVX-512 (see test_attention_avx512.cpp): float rows take
// 16 pairs per step (8-double state vectors, two-source permutes for the interleaved layout),
// and a block's last 8 pairs, when its width is 8 mod 16, the AVX2 step.

#include <catch2/catch.hpp>

#include "test_sinusoidal_simd.cpp"

TEST_CASE("sinusoidal avx512: the 16-pair step is compiled under this target",
          "[sinusoidal][simd][avx512]") {
  REQUIRE(__builtin_cpu_supports("avx512f"));
#ifndef POSENC_SINUSOIDAL_SIMD512
  FAIL("POSENC_SINUSOIDAL_SIMD512 should be defined under the AVX-512 target");
#endif
  SUCCEED();
}
