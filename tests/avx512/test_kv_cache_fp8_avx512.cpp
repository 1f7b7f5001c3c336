// The FP8 KV-cache tests again, built for AVX-512 (see test_attention_avx512.cpp): K and V
// codes widened in registers, 16 floats at a time.

#include <catch2/catch.hpp>

#include "test_kv_cache_fp8.cpp"

TEST_CASE("kv_cache fp8 avx512: FP8 caches are read in place with 16-float packets",
          "[kv_cache][fp8][simd][avx512]") {
  STATIC_REQUIRE(posenc::detail::kAttnLanes<float> == 16);
  STATIC_REQUIRE(posenc::detail::attn_loads_widened_v<float, posenc::float8_e4m3>);
  STATIC_REQUIRE(posenc::detail::attn_loads_widened_v<float, posenc::float8_e5m2>);
}
