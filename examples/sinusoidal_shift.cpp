// Sinusoidal position encodings (Vaswani et al. 2017, §3.5) and the shift matrix.
//
//   PE(p, 2i) = sin(p w_i),  PE(p, 2i+1) = cos(p w_i),  w_i = 10000^(-2i/d)
//
// For every pair the encoding of p + k is a fixed rotation of the encoding of p:
//   [sin((p+k)w)]   [ cos(kw)  sin(kw)] [sin(pw)]
//   [cos((p+k)w)] = [-sin(kw)  cos(kw)] [cos(pw)]
// which is why a linear layer can read relative offsets from absolute encodings.
// Numbers to check by hand (seed article §3.2):
// expect: PE(0) = [0.0000, 1.0000, 0.0000, 1.00000]
// expect: PE(1) = [0.8415, 0.5403, 0.0100, 0.99995]
// sin 2 = 0.9093, cos 2 = -0.4161, sin 0.02 = 0.0200, cos 0.02 = 0.9998:
// expect: row 2 = [0.9093, -0.4161, 0.0200, 0.9998]
// At p = 3, d = 8, each layout on its own grid (below): interleaved 10000^(-2i/8) = 1, 0.1,
// 0.01, 0.001; sin|cos 10000^(-i/3) = 1, 0.0464, 0.00215, 0.0001; cos|sin 10000^(-i/4).
// expect: interleaved  [0.1411, -0.9900, 0.2955, 0.9553, 0.0300, 0.9996, 0.0030, 1.0000]
// expect: sin|cos      [0.1411, 0.1388, 0.0065, 0.0003, -0.9900, 0.9903, 1.0000, 1.0000]
// expect: cos|sin      [-0.9900, 0.9553, 0.9996, 1.0000, 0.1411, 0.2955, 0.0300, 0.0030]

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <posenc/sinusoidal.hpp>

int main() {
  const Eigen::Index d = 4;
  float pe[2][4];
  for (int p = 0; p < 2; ++p) {
    posenc::sinusoidal_encoding<float>(p, posenc::TensorView<float, 1>(pe[p], d));
    std::printf("PE(%d) = [%.4f, %.4f, %.4f, %.5f]\n", p, pe[p][0], pe[p][1], pe[p][2], pe[p][3]);
  }

  // The shift matrix M(k) applied pair by pair to PE(p) gives PE(p + k).
  const auto w = posenc::sinusoidal_frequencies(d);
  const double p = 5.0, k = 3.0;
  float at_p[4], at_pk[4];
  posenc::sinusoidal_encoding<float>(p, posenc::TensorView<float, 1>(at_p, d));
  posenc::sinusoidal_encoding<float>(p + k, posenc::TensorView<float, 1>(at_pk, d));
  std::printf("\nshift by k = %.0f from p = %.0f, pair by pair:\n", k, p);
  for (Eigen::Index i = 0; i < d / 2; ++i) {
    const double c = std::cos(k * w[i]), s = std::sin(k * w[i]);
    const double sin_shifted = c * at_p[2 * i] + s * at_p[2 * i + 1];
    const double cos_shifted = -s * at_p[2 * i] + c * at_p[2 * i + 1];
    std::printf("  pair %ld (w = %g): M(k) PE(p) = [%.6f, %.6f]  PE(p+k) = [%.6f, %.6f]\n",
                static_cast<long>(i), w[i], sin_shifted, cos_shifted, at_pk[2 * i], at_pk[2 * i + 1]);
  }

  // The three layouts real checkpoints use, for d = 8 at position 3. Each keeps its source's
  // frequency grid: interleaved w_i = 10000^(-2i/d) (Vaswani et al.); sin|cos w_i =
  // 10000^(-i/(d/2 - 1)) (tensor2tensor's get_timing_signal_1d: 1, 0.0464, 0.00215, 0.0001, so
  // sin(3 * 0.0464) = 0.1388); cos|sin w_i = 10000^(-i/(d/2)) (timestep embeddings).
  std::printf("\nlayouts at p = 3, d = 8:\n");
  for (const auto layout : {posenc::SinusoidalLayout::kInterleaved, posenc::SinusoidalLayout::kSinCos,
                            posenc::SinusoidalLayout::kCosSin}) {
    posenc::SinusoidalParams params;
    params.layout = layout;
    float row[8];
    posenc::sinusoidal_encoding<float>(3.0, posenc::TensorView<float, 1>(row, 8), params);
    std::printf("  %-12s [", std::string(posenc::to_string(layout)).c_str());
    for (int j = 0; j < 8; ++j) std::printf("%s%.4f", j ? ", " : "", row[j]);
    std::printf("]\n");
  }

  // Adding the encoding to embeddings [batch = 1, seq = 3, d = 4] in place.
  std::vector<float> emb(12, 0.0f);
  const std::vector<std::int64_t> ids{0, 1, 2};
  posenc::add_sinusoidal_inplace<float>(posenc::TensorView<float, 3>(emb.data(), 1, 3, 4),
                                        posenc::PositionIdsView(ids.data(), 1, 3));
  std::printf("\nzero embeddings + PE, row 2 = [%.4f, %.4f, %.4f, %.4f] (sin 2, cos 2, sin .02, cos .02)\n",
              emb[8], emb[9], emb[10], emb[11]);
  return 0;
}
