#include <catch2/catch.hpp>

#include <posenc/reference/sinusoidal.hpp>
#include <posenc/sinusoidal.hpp>

TEST_CASE("sinusoidal: seed PE(1) for d = 4", "[sinusoidal][seed]") {
  float row[4];
  posenc::sinusoidal_encoding<float>(1.0, posenc::TensorView<float, 1>(row, 4));
  CHECK_THAT(row[0], Catch::Matchers::WithinAbs(0.8415, 5e-5));
}
