// The non-finite attention tests again, built for AVX-512 (tests/CMakeLists.txt adds this
// target only where the configuring machine runs AVX-512 code): 16-float packets, so the
// softmax's -inf test and the padding rows run on 16 lanes.

#include <catch2/catch.hpp>

#include "test_attention_nonfinite.cpp"

TEST_CASE("attention nonfinite avx512: 16-float packets under this target",
          "[attention][nonfinite][simd][avx512]") {
  REQUIRE(__builtin_cpu_supports("avx512f"));
  STATIC_REQUIRE(posenc::detail::kAttnLanes<float> == 16);
}
