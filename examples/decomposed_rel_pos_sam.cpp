// Segment Anything's decomposed relative positions by hand (MViTv2 Eq. 3): a query adds
// q . R_h[qy - ky + H - 1] + q . R_w[qx - kx + W - 1] to its score with key (ky, kx), so a
// head learns how much it cares about rows and columns apart from its content.
//
//   2 x 2 grid, one head of width 1, q = 1, R_h = [10, 20, 30], R_w = [1, 2, 3]:
//     query (0, 0): keys (0,0) 20 + 2 = 22, (0,1) 20 + 1 = 21, (1,0) 10 + 2 = 12, (1,1) 11
//     query (1, 1): 33 32 23 22
//   The tables' rows: 2 max(q, k) - 1. SAM ViT-B at 1024 px: global layers over 64 x 64
//   patches read 127 rows a table, windowed layers (14 x 14) 27. A checkpoint's table used on
//   another grid is resized linearly (align_corners false): [0, 1, 2] -> 5 rows
//   [0, 0.4, 1, 1.6, 2].
//   Pooled keys (MViTv2: 4 query rows, 2 key rows): row 2 + i - 2 j, so query row 3 reads
//   rows 5 and 3.
//
// expect: query (0, 0): 22 21 12 11
// expect: query (1, 1): 33 32 23 22
// expect: SAM ViT-B rows: global 127, window 27
// expect: resized [0, 0.4, 1, 1.6, 2]
// expect: pooled query row 3 reads rows 5 3

#include <posenc/decomposed_rel_pos.hpp>

#include <cstdio>
#include <vector>

int main() {
  const posenc::RelPosGrid g{2, 2, 2, 2};
  const std::vector<float> q(4, 1.0f), rh = {10, 20, 30}, rw = {1, 2, 3};
  std::vector<float> bias(16);
  posenc::decomposed_rel_pos_bias<float, float>(
      posenc::ConstTensorView<float, 4>(q.data(), 1, 4, 1, 1),
      posenc::ConstTensorView<float, 2>(rh.data(), 3, 1),
      posenc::ConstTensorView<float, 2>(rw.data(), 3, 1), g,
      posenc::TensorView<float, 4>(bias.data(), 1, 1, 4, 4));
  for (const int query : {0, 3}) {
    std::printf("query (%d, %d):", query / 2, query % 2);
    for (int key = 0; key < 4; ++key) {
      std::printf(" %g", static_cast<double>(bias[static_cast<std::size_t>(query * 4 + key)]));
    }
    std::printf("\n");
  }
  std::printf("SAM ViT-B rows: global %ld, window %ld\n",
              static_cast<long>(posenc::rel_pos_table_rows(64, 64)),
              static_cast<long>(posenc::rel_pos_table_rows(14, 14)));

  const std::vector<double> table = {0, 1, 2};
  std::vector<double> resized(5);
  posenc::resize_rel_pos_table<double>(posenc::ConstTensorView<double, 2>(table.data(), 3, 1),
                                       posenc::TensorView<double, 2>(resized.data(), 5, 1));
  std::printf("resized [%g, %g, %g, %g, %g]\n", resized[0], resized[1], resized[2], resized[3],
              resized[4]);

  // R_h[r] = r shows the row each (query row, key row) pair reads.
  const std::vector<float> rows = {0, 1, 2, 3, 4, 5, 6}, zero = {0};
  std::vector<float> one(4, 1.0f), pooled(8);
  posenc::decomposed_rel_pos_bias<float, float>(
      posenc::ConstTensorView<float, 4>(one.data(), 1, 4, 1, 1),
      posenc::ConstTensorView<float, 2>(rows.data(), 7, 1),
      posenc::ConstTensorView<float, 2>(zero.data(), 1, 1), {4, 1, 2, 1},
      posenc::TensorView<float, 4>(pooled.data(), 1, 1, 4, 2));
  std::printf("pooled query row 3 reads rows %g %g\n", static_cast<double>(pooled[6]),
              static_cast<double>(pooled[7]));
  return 0;
}
