// The KV-cache decode tests again, built with -mavx2 -mfma -mf16c (tests/CMakeLists.txt) so
// that Eigen uses 8-float packets and decode reads 16-bit K caches in place through the
// in-register widening loads of detail/attention_kernel.hpp; the other test targets keep the
// compiler's default ISA. Needs an AVX2 + FMA + F16C machine to run.

#include <catch2/catch.hpp>

#include "test_kv_cache.cpp"

#if defined(__AVX2__) && defined(__F16C__)
TEST_CASE("kv_cache simd: 16-bit K caches are read in place under this target",
          "[kv_cache][simd]") {
  REQUIRE(__builtin_cpu_supports("avx2"));
#if !defined(__clang__)  // Clang 14 does not know the "f16c" feature string
  REQUIRE(__builtin_cpu_supports("f16c"));
#endif
  STATIC_REQUIRE(posenc::detail::attn_loads_widened_v<float, Eigen::bfloat16>);
  STATIC_REQUIRE(posenc::detail::attn_loads_widened_v<float, Eigen::half>);
}
#endif
