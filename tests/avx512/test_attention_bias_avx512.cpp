// The attention-bias tests again, built for AVX-512 (tests/CMakeLists.txt adds this target only
// where the configuring machine runs AVX-512 code): the bias is then added 16 lanes x 16 keys
// at a time through a 16 x 16 register transpose (attn_add_bias), where the default build
// takes 4 x 4.

#include <catch2/catch.hpp>

#include "test_attention_bias.cpp"

TEST_CASE("attention bias avx512: 16-float packets under this target", "[attention_bias][avx512]") {
  REQUIRE(__builtin_cpu_supports("avx512f"));
  STATIC_REQUIRE(posenc::detail::kAttnLanes<float> == 16);
}
