// The FP8 KV-cache tests again, built for AVX2 + F16C (tests/CMakeLists.txt): K and V codes
// widened in registers, 8 floats at a time.

#include <catch2/catch.hpp>

#include "test_kv_cache_fp8.cpp"

#if defined(__AVX2__) && defined(__F16C__)
TEST_CASE("kv_cache fp8 simd: FP8 caches are read in place with 8-float packets",
          "[kv_cache][fp8][simd]") {
  STATIC_REQUIRE(posenc::detail::attn_loads_widened_v<float, posenc::float8_e4m3>);
  STATIC_REQUIRE(posenc::detail::attn_loads_widened_v<float, posenc::float8_e5m2>);
}
#endif
