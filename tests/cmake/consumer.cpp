// A consumer's first call into posenc: PE(1) of the seed article (d = 4), checked by hand.
#include <cmath>
#include <cstdio>

#include <posenc/posenc.hpp>

int main() {
  float row[4];
  posenc::sinusoidal_encoding<float>(1.0, posenc::TensorView<float, 1>(row, 4));
  const bool ok = std::abs(row[0] - std::sin(1.0f)) < 1e-6f && std::abs(row[3] - std::cos(0.01f)) < 1e-6f;
  std::printf("posenc %s: PE(1) = [%.4f, %.4f, %.4f, %.5f]\n", POSENC_VERSION, row[0], row[1], row[2], row[3]);
  if (!ok) return 1;
  std::puts("posenc consumer OK");
  return 0;
}
