// 2-D RoPE of a Qwen2-VL-style vision encoder, worked by hand from HF's rot_pos_emb.
//
// 1. Patch order. A 4 x 4 patch grid whose 2 x 2 windows are merged into one LLM token later:
//    the processor emits the patches window by window (windows row-major, patches row-major
//    inside), and each patch keeps its own row h and column w.
// expect: h: 0 0 1 1 0 0 1 1 2 2 3 3 2 2 3 3
// expect: w: 0 1 0 1 2 3 2 3 0 1 0 1 2 3 2 3
//
// 2. The rotation. head_dim 8, theta 10000: VisionRotaryEmbedding(8 / 2) has frequencies
//    f_i = 10000^(-2i/4) = 1, 0.01. Half-split pairs (j, j + 4) turn by h f_0, h f_1, w f_0,
//    w f_1. Token 6 is the patch at (h, w) = (1, 2): pair (0, 4) turns by 1 rad, pair (2, 6)
//    by 2 rad. The unit vector e_0 becomes cos 1 e_0 + sin 1 e_4, and e_2 becomes
//    cos 2 e_2 + sin 2 e_6 (cos 1 = 0.540302, sin 1 = 0.841471, cos 2 = -0.416147,
//    sin 2 = 0.909297).
// expect: token 6 (h 1, w 2): e0 -> [0.540302 0 0 0 0.841471 0 0 0]
// expect: token 6 (h 1, w 2): e2 -> [0 0 -0.416147 0 0 0 0.909297 0]

#include <cstdint>
#include <cstdio>
#include <vector>

#include <posenc/vision_rope.hpp>

int main() {
  constexpr Eigen::Index kTokens = 16, kHeadDim = 8;
  std::vector<std::int64_t> pos(3 * kTokens);
  posenc::vision_rope_2d_positions(1, 4, 4, 2,
                                   posenc::TensorView<std::int64_t, 3>(pos.data(), 3, 1, kTokens));
  for (int stream = 1; stream <= 2; ++stream) {
    std::printf("%s:", stream == 1 ? "h" : "w");
    for (Eigen::Index s = 0; s < kTokens; ++s) {
      std::printf(" %lld", static_cast<long long>(pos[static_cast<std::size_t>(stream * kTokens + s)]));
    }
    std::printf("\n");
  }

  const posenc::VisionRope2D plan = posenc::vision_rope_2d(kHeadDim);
  for (const int unit : {0, 2}) {
    // Every token holds the same unit vector; token 6 is printed.
    std::vector<float> x(kTokens * kHeadDim, 0.0f);
    for (Eigen::Index s = 0; s < kTokens; ++s) x[static_cast<std::size_t>(s * kHeadDim + unit)] = 1.0f;
    posenc::apply_mrope_inplace<float>(
        posenc::rope_heads<float>(posenc::TensorView<float, 4>(x.data(), 1, kTokens, 1, kHeadDim)),
        posenc::MRopePositionsView(pos.data(), 3, 1, kTokens), plan.freqs,
        posenc::RopeLayout::kHalfSplit, plan.sections);
    std::printf("token 6 (h %lld, w %lld): e%d -> [", static_cast<long long>(pos[kTokens + 6]),
                static_cast<long long>(pos[2 * kTokens + 6]), unit);
    for (Eigen::Index i = 0; i < kHeadDim; ++i) {
      const float v = x[static_cast<std::size_t>(6 * kHeadDim + i)];
      std::printf(i == 0 ? "%g" : " %g", v == 0.0f ? 0.0 : static_cast<double>(v));
    }
    std::printf("]\n");
  }
  return 0;
}
