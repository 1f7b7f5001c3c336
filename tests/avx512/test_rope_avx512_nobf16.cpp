// The RoPE SIMD tests built for AVX-512 without AVX512-BF16 (Skylake-X, Ice Lake): the 512-bit
// rows are the same, but every bfloat16 store rounds by the integer path and joins even / odd
// halves with a word blend (tests/CMakeLists.txt drops -mavx512bf16 for this target).

#include <catch2/catch.hpp>

#include "test_rope_simd.cpp"

TEST_CASE("rope avx512 without BF16: the 512-bit rows are compiled, the BF16 conversions not",
          "[rope][simd][avx512]") {
#ifndef POSENC_ROPE_SIMD512
  FAIL("POSENC_ROPE_SIMD512 should be defined under the AVX-512 target");
#endif
#ifdef __AVX512BF16__
  FAIL("this target must be built without -mavx512bf16");
#endif
  STATIC_REQUIRE(posenc::detail::RopeVec16::kLanes == 16);
}
