// The attention tests again, built for AVX-512 (tests/CMakeLists.txt adds this target only
// where the configuring machine runs AVX-512 code). Eigen's float packet is then 16 wide: the
// prefill micro-kernels run on 16-float packets, and decode reads 16-bit K / V through the
// 16-lane widening loads and folds its dot products from 16 lanes to 8 before the reduction.

#include <catch2/catch.hpp>

#include "test_attention.cpp"

TEST_CASE("attention avx512: 16-float packets and 16-lane widening under this target",
          "[attention][simd][avx512]") {
  REQUIRE(__builtin_cpu_supports("avx512f"));
  STATIC_REQUIRE(posenc::detail::kAttnLanes<float> == 16);
  STATIC_REQUIRE(posenc::detail::attn_loads_widened_v<float, Eigen::bfloat16>);
  STATIC_REQUIRE(posenc::detail::attn_loads_widened_v<float, Eigen::half>);
}
