// Every sinusoidal test again, with the AVX2 + FMA float kernel (detail/sinusoidal_kernels.hpp)
// compiled in: the test targets do not target AVX2 by default, so test_sinusoidal.cpp alone
// runs the portable loop. x86-64 with GCC; needs an AVX2 + FMA machine to run.

#include <catch2/catch.hpp>

// GCC only: Clang ignores `#pragma GCC target`, so there the file reruns the portable path.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#pragma GCC target("avx2,fma")
#define POSENC_SINUSOIDAL_FORCE_SIMD 1
#endif

#include "test_sinusoidal.cpp"

#if defined(POSENC_SINUSOIDAL_SIMD)
TEST_CASE("sinusoidal simd: the AVX2 kernel is the one under test", "[sinusoidal][simd]") {
  REQUIRE(__builtin_cpu_supports("avx2"));
  REQUIRE(__builtin_cpu_supports("fma"));
}
#endif
