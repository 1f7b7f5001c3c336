// Merging attention states by hand: one query against 4 keys with logits [1, 0, 2, -1],
// attended as two halves whose (out, lse) are merged (split-K decode, cascade attention).
//
//   lse_a = log(e^1 + e^0)  = 1.3133     part a weights e^s / e^lse_a = [0.7311, 0.2689]
//   lse_b = log(e^2 + e^-1) = 2.0486     part b weights               = [0.9526, 0.0474]
//   merged: lse = log(e^lse_a + e^lse_b) = log(11.4752) = 2.4402, and each part's out is
//   scaled by e^(lse_part - lse), giving softmax([1, 0, 2, -1]) = [0.2369, 0.0871, 0.6439, 0.0321]
//
// As in the soft-cap example, q = e_0, k_j = s_j e_0 and scale 1 make the logits s_j, and V rows
// e_j make each output row the weights themselves.
//
// expect: part a: weights [0.7311, 0.2689, 0.0000, 0.0000], lse 1.3133
// expect: part b: weights [0.0000, 0.0000, 0.9526, 0.0474], lse 2.0486
// expect: merged: weights [0.2369, 0.0871, 0.6439, 0.0321], lse 2.4402
// expect: one call over all 4 keys: weights [0.2369, 0.0871, 0.6439, 0.0321], lse 2.4402

#include <posenc/attention.hpp>
#include <posenc/attention_merge.hpp>

#include <cstdio>
#include <vector>

namespace {

constexpr Eigen::Index d = 4;

void print(const char* what, const std::vector<float>& w, float lse) {
  std::printf("%s: weights [%.4f, %.4f, %.4f, %.4f], lse %.4f\n", what, static_cast<double>(w[0]),
              static_cast<double>(w[1]), static_cast<double>(w[2]), static_cast<double>(w[3]),
              static_cast<double>(lse));
}

}  // namespace

int main() {
  const float logits[4] = {1.0f, 0.0f, 2.0f, -1.0f};
  std::vector<float> q(d, 0.0f), k(4 * d, 0.0f), v(4 * d, 0.0f);
  q[0] = 1.0f;
  for (Eigen::Index j = 0; j < 4; ++j) {
    k[static_cast<std::size_t>(j * d)] = logits[j];
    v[static_cast<std::size_t>(j * d + j)] = 1.0f;
  }
  posenc::AttentionParams params;
  params.mask = posenc::MaskMode::kBidirectional;
  params.scale = 1.0;

  // Keys [j0, j0 + n): one attention call writing out and lse.
  auto attend = [&](Eigen::Index j0, Eigen::Index n, std::vector<float>& out, float& lse) {
    posenc::attention<float>(posenc::ConstTensorView<float, 4>(q.data(), 1, 1, 1, d),
                             posenc::ConstTensorView<float, 4>(k.data() + j0 * d, 1, n, 1, d),
                             posenc::ConstTensorView<float, 4>(v.data() + j0 * d, 1, n, 1, d),
                             posenc::TensorView<float, 4>(out.data(), 1, 1, 1, d),
                             posenc::TensorView<float, 3>(&lse, 1, 1, 1), params);
  };
  std::vector<float> a(d), b(d), all(d);
  float lse_a = 0.0f, lse_b = 0.0f, lse_all = 0.0f;
  attend(0, 2, a, lse_a);
  attend(2, 2, b, lse_b);
  print("part a", a, lse_a);
  print("part b", b, lse_b);
  posenc::merge_attention_state_inplace<float>(
      posenc::TensorView<float, 4>(a.data(), 1, 1, 1, d), posenc::TensorView<float, 3>(&lse_a, 1, 1, 1),
      posenc::ConstTensorView<float, 4>(b.data(), 1, 1, 1, d),
      posenc::ConstTensorView<float, 3>(&lse_b, 1, 1, 1));
  print("merged", a, lse_a);
  attend(0, 4, all, lse_all);
  print("one call over all 4 keys", all, lse_all);
  return 0;
}
