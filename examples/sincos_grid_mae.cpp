// Fixed 2-D sin-cos position embeddings of MAE / DiT and of SD3's cropped table, worked by hand
// from MAE's get_2d_sincos_pos_embed and diffusers' cropped_pos_embed.
//
// 1. MAE, embed_dim 8, a 2 x 3 patch grid and a class token. Each half of a row is a 1-D
//    [sin | cos] block of 4 channels with w = 10000^(-j/2) = 1, 0.01. np.meshgrid(grid_w,
//    grid_h) encodes the column in the first half, the row in the second. The class token's
//    row is zero; patch (row 1, column 2) is token 1 + 3 + 2 = 6: column 2 then row 1
//    (sin 2 = 0.909297, sin 0.02 = 0.019999, cos 2 = -0.416147, cos 0.02 = 0.999800,
//    sin 1 = 0.841471, sin 0.01 = 0.010000, cos 1 = 0.540302, cos 0.01 = 0.999950).
// expect: token 0 (class), column block: 0.000000 0.000000 0.000000 0.000000
// expect: token 0 (class), row block: 0.000000 0.000000 0.000000 0.000000
// expect: token 6 (row 1, column 2), column block: 0.909297 0.019999 -0.416147 0.999800
// expect: token 6 (row 1, column 2), row block: 0.841471 0.010000 0.540302 0.999950
//
// 2. SD3 keeps an M x M table (pos_embed_max_size M = 8 here) whose coordinates are
//    i / (M / base_size) / interpolation_scale = i / 2 for base_size 4, and crops its centre
//    to the latent's patches: a 3 x 6 crop starts at row (8 - 3) / 2 = 2 (rounded down) and
//    column (8 - 6) / 2 = 1. Its first patch is the full table's (2, 1): column 0.5, row 1.0
//    (sin 0.5 = 0.479426, sin 0.005 = 0.005000, cos 0.5 = 0.877583, cos 0.005 = 0.999988).
// expect: crop patch (0, 0) = full (2, 1), column block: 0.479426 0.005000 0.877583 0.999988
// expect: crop patch (0, 0) = full (2, 1), row block: 0.841471 0.010000 0.540302 0.999950
//
// 3. The forward pass adds the table to the patch embeddings; the class token's zero row
//    leaves it as it was. Patch embeddings of 0.25 everywhere: token 0 keeps 0.25, token 2
//    (row 0, column 1) gets 0.25 + sin 1 = 1.091471 in channel 0 and 0.25 + cos 0 = 1.25 in
//    channel 6 (float: 1.091471 rounds to the same six decimals).
// expect: after add: token 0 channel 0 = 0.250000
// expect: after add: token 2 channel 0 = 1.091471, channel 6 = 1.250000

#include <cstdio>
#include <vector>

#include <posenc/sincos_grid.hpp>

namespace {

/// A row of embed_dim 8 as its two blocks: the column's channels 0-3, the row's 4-7.
void print_row(const char* label, const std::vector<double>& t, Eigen::Index row) {
  for (const int block : {0, 1}) {
    std::printf("%s, %s block:", label, block == 0 ? "column" : "row");
    for (Eigen::Index c = 4 * block; c < 4 * block + 4; ++c) {
      std::printf(" %.6f", t[static_cast<std::size_t>(row * 8 + c)]);
    }
    std::printf("\n");
  }
}

}  // namespace

int main() {
  // 1. MAE.
  const posenc::SincosGridPlan mae(posenc::sincos_grid_mae(8, 2, 3, /*cls_token=*/true));
  // Tables in double here, so the printed digits are the formula's (float storage would print
  // cos 0.005 = 0.99998750 as 0.999987).
  std::vector<double> table(static_cast<std::size_t>(mae.tokens() * mae.dim()));
  posenc::sincos_grid_table<double>(
      posenc::TensorView<double, 2>(table.data(), mae.tokens(), mae.dim()), mae);
  print_row("token 0 (class)", table, 0);
  print_row("token 6 (row 1, column 2)", table, 6);

  // 2. SD3's crop, built without the 8 x 8 table.
  const posenc::SincosGridPlan crop(posenc::sincos_grid_sd3_crop(8, 8, 4.0, 1.0, 3, 6));
  std::vector<double> cropped(static_cast<std::size_t>(crop.tokens() * crop.dim()));
  posenc::sincos_grid_table<double>(
      posenc::TensorView<double, 2>(cropped.data(), crop.tokens(), crop.dim()), crop);
  print_row("crop patch (0, 0) = full (2, 1)", cropped, 0);

  // 3. Float patch embeddings + the MAE table.
  std::vector<float> x(static_cast<std::size_t>(mae.tokens() * mae.dim()), 0.25f);
  posenc::add_sincos_grid_inplace<float>(
      posenc::TensorView<float, 3>(x.data(), 1, mae.tokens(), mae.dim()), mae);
  std::printf("after add: token 0 channel 0 = %.6f\n", static_cast<double>(x[0]));
  std::printf("after add: token 2 channel 0 = %.6f, channel 6 = %.6f\n",
              static_cast<double>(x[16]), static_cast<double>(x[22]));
  return 0;
}
