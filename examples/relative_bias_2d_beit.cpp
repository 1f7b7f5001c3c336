// The 2-D relative position bias of Swin and BEiT by hand (Swin Eq. 4: softmax(QK^T / sqrt(d)
// + B) V, B read from a table of (2 Wh - 1)(2 Ww - 1) offsets).
//
//   2 x 2 window, patches (0,0) (0,1) (1,0) (1,1); offset (dy, dx) = query - key sits at row
//   (dy + 1) 3 + (dx + 1) of the 3 x 3 offset grid:
//     query (0,0): keys (0,0) -> 4, (0,1) -> 3 (dx = -1), (1,0) -> 1 (dy = -1), (1,1) -> 0
//   BEiT puts a class token first and three more rows after the grid: 9 (class token to
//   anything), 10 (a patch to the class token), 11 (class token to itself). BEiT-B/16 at 224 px:
//   a 14 x 14 window, 196 + 1 tokens, 27 x 27 + 3 = 732 rows (its checkpoints' [732, 12]).
//   Attention with q = 0 and table[r] = r / 10 (one head) leaves the bias alone in the scores:
//     class token: [1.1, 0.9, 0.9, 0.9, 0.9] -> [0.2339, 0.1915, 0.1915, 0.1915, 0.1915]
//     patch (0,0): [1.0, 0.4, 0.3, 0.1, 0.0] -> [0.3546, 0.1946, 0.1761, 0.1442, 0.1305]
//
// expect: 2 x 2 window rows: [4 3 1 0] [5 4 2 1] [7 6 4 3] [8 7 5 4]
// expect: BEiT-B/16: 197 tokens, table rows 732
// expect: class token weights [0.2339, 0.1915, 0.1915, 0.1915, 0.1915]
// expect: patch (0,0) weights [0.3546, 0.1946, 0.1761, 0.1442, 0.1305]

#include <posenc/attention.hpp>
#include <posenc/relative_bias_2d.hpp>

#include <cstdio>
#include <vector>

int main() {
  const posenc::RelativeBias2dWindow swin{2, 2, false};
  std::printf("2 x 2 window rows:");
  for (Eigen::Index i = 0; i < 4; ++i) {
    std::printf(" [");
    for (Eigen::Index j = 0; j < 4; ++j) {
      std::printf(j ? " %lld" : "%lld",
                  static_cast<long long>(posenc::relative_position_index_2d(swin, i, j)));
    }
    std::printf("]");
  }
  const posenc::RelativeBias2dWindow beit_b16{14, 14, true};
  std::printf("\nBEiT-B/16: %ld tokens, table rows %ld\n",
              static_cast<long>(posenc::relative_bias_2d_tokens(beit_b16)),
              static_cast<long>(posenc::relative_bias_2d_table_rows(beit_b16)));

  // A 2 x 2 window after a class token: 5 tokens, 12 table rows, one head, table[r] = r / 10.
  const posenc::RelativeBias2dWindow win{2, 2, true};
  const Eigen::Index n = 5, rows = 12;
  std::vector<float> table(rows), bias(n * n);
  for (Eigen::Index r = 0; r < rows; ++r)
    table[static_cast<std::size_t>(r)] = static_cast<float>(r) / 10.0f;
  posenc::relative_position_bias_2d<float>(posenc::ConstTensorView<float, 2>(table.data(), rows, 1),
                                           win,
                                           posenc::TensorView<float, 4>(bias.data(), 1, 1, n, n));
  posenc::AttentionParams params;
  params.mask = posenc::MaskMode::kBidirectional;  // an encoder: every token sees every token
  posenc::AttentionMetadata meta;
  meta.attention_bias = posenc::ConstTensorView<float, 4>(bias.data(), 1, 1, n, n);
  // q = 0 (the scores are the bias), v_j = e_j (each output row is its weights).
  std::vector<float> q(n * n, 0.0f), k(n * n, 0.5f), v(n * n, 0.0f), out(n * n);
  for (Eigen::Index j = 0; j < n; ++j) v[static_cast<std::size_t>(j * n + j)] = 1.0f;
  posenc::attention<float>(posenc::ConstTensorView<float, 4>(q.data(), 1, n, 1, n),
                           posenc::ConstTensorView<float, 4>(k.data(), 1, n, 1, n),
                           posenc::ConstTensorView<float, 4>(v.data(), 1, n, 1, n),
                           posenc::TensorView<float, 4>(out.data(), 1, n, 1, n), params, meta);
  const char* names[2] = {"class token", "patch (0,0)"};
  for (Eigen::Index i = 0; i < 2; ++i) {
    std::printf("%s weights [", names[i]);
    for (Eigen::Index j = 0; j < n; ++j) {
      std::printf(j ? ", %.4f" : "%.4f",
                  static_cast<double>(out[static_cast<std::size_t>(i * n + j)]));
    }
    std::printf("]\n");
  }
  return 0;
}
