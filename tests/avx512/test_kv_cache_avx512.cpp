// The KV-cache tests again, built for AVX-512 (see test_attention_avx512.cpp): decode steps
// over float, bfloat16 and half caches through the 16-lane decode item.

#include <catch2/catch.hpp>

#include "test_kv_cache.cpp"

TEST_CASE("kv_cache avx512: 16-bit caches are read in place with 16-float packets",
          "[kv_cache][simd][avx512]") {
  STATIC_REQUIRE(posenc::detail::kAttnLanes<float> == 16);
  STATIC_REQUIRE(posenc::detail::attn_loads_widened_v<float, Eigen::bfloat16>);
  STATIC_REQUIRE(posenc::detail::attn_loads_widened_v<float, Eigen::half>);
}
