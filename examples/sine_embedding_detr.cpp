// DETR's 2-D sine embedding of a padded batch, worked by hand from HF's
// DetrSinePositionEmbedding (Carion et al. 2020, Appendix A.4).
//
// 1. Two images share a 3 x 4 feature map: image A is real in its top-left 2 x 3 pixels,
//    image B everywhere. num_pos_feats F = 2, so each token is [sin y, cos y, sin x, cos x]
//    with y = cy / (ty + 1e-6) 2 pi: cy counts the real pixels of the column down to the
//    token, ty the whole column's (x likewise along the row). A's first token: y = 1 / 2 of
//    the way round (sin ~ 0, cos -1), x = 1 / 3 (sin 120 deg = 0.866026 and cos = -0.499999,
//    the 1e-6 turning them a hair short of 0.866025 / -0.5). A's last real token sits a full
//    turn round on both axes. A padded token keeps the count of the last real pixel before it;
//    a wholly padded row or column has count 0 and total 0: coordinate 0, sin 0, cos 1.
// expect: A (0, 0): 0.000002 -1.000000 0.866026 -0.499999
// expect: A (1, 2): -0.000003 1.000000 -0.000002 1.000000
// expect: A (0, 3): 0.000000 1.000000 -0.000002 1.000000
// expect: A (2, 3): 0.000000 1.000000 0.000000 1.000000
//    B's map is full: its first token is 1 / 3 of the way down (120 deg) and 1 / 4 across (90).
// expect: B (0, 0): 0.866026 -0.499999 1.000000 0.000000
//    A's real pixels get exactly the embedding of a lone, unpadded 2 x 3 image: padding is
//    invisible to them.
// expect: A's real pixels equal the unpadded 2 x 3 image's: yes
//
// 2. Deformable DETR subtracts 0.5 from the counts: the first token of a 2 x 2 map is at
//    0.5 / 2 of a turn on both axes (sin 90 deg = 1).
// expect: Deformable DETR (0, 0) of 2 x 2: 1.000000 0.000001 1.000000 0.000001
//
// 3. The decoder's queries carry their own positions: Conditional DETR embeds an anchor point
//    (x, y) = (0.25, 0.5) as [y block | x block] at 2 pi v: y at pi (sin 0, cos -1), x at
//    pi / 2 (sin 1, cos 0); F = 2 again.
// expect: anchor (0.25, 0.5): 0.000000 -1.000000 1.000000 0.000000
//
// 4. The mask comes from the pixel mask, nearest-resized to each backbone level: an 800 x 1066
//    image in a batch padded to 800 x 1216, at stride 32 (a 25 x 38 map), is real in the
//    columns that read pixel 32 o < 1066: o <= 33, 34 of them.
// expect: stride-32 map 25 x 38: 34 real columns, 25 real rows

#include <cstdint>
#include <cstdio>
#include <vector>

#include <posenc/sine_embedding_2d.hpp>

namespace {

void print_token(const char* label, const double* row) {
  std::printf("%s: %.6f %.6f %.6f %.6f\n", label, row[0], row[1], row[2], row[3]);
}

}  // namespace

int main() {
  // 1. A padded batch of two.
  const Eigen::Index batch = 2, h = 3, w = 4, dim = 4;
  std::vector<std::uint8_t> mask(static_cast<std::size_t>(batch * h * w), 1);
  for (Eigen::Index i = 0; i < h; ++i) {
    for (Eigen::Index j = 0; j < w; ++j) {
      mask[static_cast<std::size_t>(i * w + j)] = i < 2 && j < 3 ? 1 : 0;
    }
  }
  posenc::SineEmbedding2dParams detr;  // DETR's defaults (temperature 10^4, 2 pi, eps 1e-6)
  detr.num_pos_feats = 2;
  const posenc::SineEmbedding2dPlan plan(detr);
  // Doubles here, so the printed digits are the formula's.
  std::vector<double> pos(static_cast<std::size_t>(batch * h * w * dim));
  posenc::sine_embedding_2d<double>(
      posenc::ConstTensorView<std::uint8_t, 3>(mask.data(), batch, h, w),
      posenc::TensorView<double, 4>(pos.data(), batch, h, w, dim), plan);
  const auto token = [&](Eigen::Index b, Eigen::Index i, Eigen::Index j) {
    return pos.data() + ((b * h + i) * w + j) * dim;
  };
  print_token("A (0, 0)", token(0, 0, 0));
  print_token("A (1, 2)", token(0, 1, 2));
  print_token("A (0, 3)", token(0, 0, 3));
  print_token("A (2, 3)", token(0, 2, 3));
  print_token("B (0, 0)", token(1, 0, 0));

  std::vector<double> lone(static_cast<std::size_t>(2 * 3 * dim));
  posenc::sine_embedding_2d<double>(posenc::TensorView<double, 3>(lone.data(), 2, 3, dim), plan);
  bool same = true;
  for (Eigen::Index i = 0; i < 2; ++i) {
    for (Eigen::Index j = 0; j < 3; ++j) {
      for (Eigen::Index c = 0; c < dim; ++c) {
        same = same && token(0, i, j)[c] == lone[static_cast<std::size_t>((i * 3 + j) * dim + c)];
      }
    }
  }
  std::printf("A's real pixels equal the unpadded 2 x 3 image's: %s\n", same ? "yes" : "no");

  // 2. Deformable DETR.
  posenc::SineEmbedding2dParams deformable = detr;
  deformable.offset = 0.5;
  std::vector<double> small(static_cast<std::size_t>(2 * 2 * dim));
  posenc::sine_embedding_2d<double>(posenc::TensorView<double, 3>(small.data(), 2, 2, dim),
                                    deformable);
  print_token("Deformable DETR (0, 0) of 2 x 2", small.data());

  // 3. A decoder query's anchor point.
  const std::vector<double> anchor = {0.25, 0.5};
  std::vector<double> anchor_pos(4);
  posenc::CoordinateSineParams query;
  query.num_pos_feats = 2;
  posenc::coordinate_sine_embedding<double>(
      posenc::ConstTensorView<double, 2>(anchor.data(), 1, 2),
      posenc::TensorView<double, 2>(anchor_pos.data(), 1, 4), query);
  print_token("anchor (0.25, 0.5)", anchor_pos.data());

  // 4. The pixel mask at stride 32.
  const Eigen::Index ih = 800, iw = 1216, fh = 25, fw = 38;
  std::vector<std::uint8_t> pixels(static_cast<std::size_t>(ih * iw), 0);
  for (Eigen::Index i = 0; i < ih; ++i) {
    for (Eigen::Index j = 0; j < 1066; ++j) pixels[static_cast<std::size_t>(i * iw + j)] = 1;
  }
  std::vector<std::uint8_t> level(static_cast<std::size_t>(fh * fw));
  posenc::resize_pixel_mask_nearest(
      posenc::ConstTensorView<std::uint8_t, 3>(pixels.data(), 1, ih, iw),
      posenc::TensorView<std::uint8_t, 3>(level.data(), 1, fh, fw));
  int real_columns = 0, real_rows = 0;
  for (Eigen::Index j = 0; j < fw; ++j) real_columns += level[static_cast<std::size_t>(j)];
  for (Eigen::Index i = 0; i < fh; ++i) real_rows += level[static_cast<std::size_t>(i * fw)];
  std::printf("stride-32 map %lld x %lld: %d real columns, %d real rows\n",
              static_cast<long long>(fh), static_cast<long long>(fw), real_columns, real_rows);
  return 0;
}
