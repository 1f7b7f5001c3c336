// One shifted Swin block by hand (Liu et al. 2021, §3.2, Fig. 4): pad the map to whole
// windows, roll it by -shift, attend inside each window with the relative bias plus a mask
// that separates the pieces the roll brought together, roll back.
//
//   Swin-T at 224 px: 56, 28, 14, 7 patches a side, window 7 -> 64, 16, 4, 1 windows; the last
//   stage is one window, so its "shifted" blocks do not shift (HF SwinLayer).
//
//   A 3 x 3 map, value 10 y + x + 1, window 2, shift 1: padded to 4 x 4 (zeros in row and
//   column 3), rolled so shifted (ys, xs) = padded ((ys + 1) mod 4, (xs + 1) mod 4):
//     window 0 (ys 0-1, xs 0-1) = [12 13 22 23]    window 1 (ys 0-1, xs 2-3) = [0 11 0 21]
//     window 2 (ys 2-3, xs 0-1) = [0 0 2 3]        window 3 (ys 2-3, xs 2-3) = [0 0 0 1]
//   Regions of the shifted frame per axis: [0, 2), [2, 3), [3, 4). Window 1 holds two (its
//   columns 2 and 3): tokens 0, 2 (padding) and 1, 3 (the map's column 0); window 3 four.
//   With q = 0 each token averages v over the tokens of its region; rolled back:
//     masked   [[1, 2.5, 2.5], [16, 17.5, 17.5], [16, 17.5, 17.5]]
//     unmasked [[0.25, 1.25, 1.25], [8, 17.5, 17.5], [8, 17.5, 17.5]]   (cell (1, 0): (0 + 11 +
//     0 + 21) / 4, mixing in padding from the far edge)
//   The paper's 8 x 8 map, window 4, shift 2: 0, 128, 128, 192 masked pairs of 256 per window.
//
//   Swin-v2's log-spaced offsets, window 8: 8 d / 7 -> sign log2(1 + |u|) / 3:
//     d = 7 -> 1.0566, d = -3 -> -0.7156, d = 1 -> 0.3665
//
// expect: Swin-T windows per stage: 64 (shift 3), 16 (shift 3), 4 (shift 3), 1 (shift 0)
// expect: windows [12 13 22 23] [0 11 0 21] [0 0 2 3] [0 0 0 1]
// expect: masked [[1, 2.5, 2.5], [16, 17.5, 17.5], [16, 17.5, 17.5]]
// expect: unmasked [[0.25, 1.25, 1.25], [8, 17.5, 17.5], [8, 17.5, 17.5]]
// expect: masked pairs per window: 0 128 128 192
// expect: Swin-v2 coordinates: 1.0566 -0.7156 0.3665

#include <posenc/attention.hpp>
#include <posenc/continuous_position_bias.hpp>
#include <posenc/swin_window.hpp>

#include <cstdio>
#include <vector>

namespace {

// One head of width 1, q = k = 0: each token averages v over the keys its bias leaves.
void print_block(const char* name, const posenc::SwinWindowLayout& l,
                 const std::vector<float>& windows, const std::vector<float>& bias,
                 Eigen::Index bias_windows) {
  const Eigen::Index nw = posenc::swin_num_windows(l), n = posenc::swin_window_tokens(l);
  std::vector<float> zero(windows.size(), 0.0f), out(windows.size()), map(9);
  posenc::AttentionParams params;
  params.mask = posenc::MaskMode::kBidirectional;
  posenc::AttentionMetadata meta;
  meta.attention_bias = posenc::ConstTensorView<float, 4>(bias.data(), bias_windows, 1, n, n);
  posenc::attention<float>(posenc::ConstTensorView<float, 4>(zero.data(), nw, n, 1, 1),
                           posenc::ConstTensorView<float, 4>(zero.data(), nw, n, 1, 1),
                           posenc::ConstTensorView<float, 4>(windows.data(), nw, n, 1, 1),
                           posenc::TensorView<float, 4>(out.data(), nw, n, 1, 1), params, meta);
  posenc::swin_merge_windows<float>(posenc::ConstTensorView<float, 3>(out.data(), nw, n, 1), l,
                                    posenc::TensorView<float, 4>(map.data(), 1, 3, 3, 1));
  std::printf("%s [", name);
  for (int y = 0; y < 3; ++y) {
    std::printf(y ? ", [" : "[");
    for (int x = 0; x < 3; ++x) {
      std::printf(x ? ", %g" : "%g", static_cast<double>(map[static_cast<std::size_t>(y * 3 + x)]));
    }
    std::printf("]");
  }
  std::printf("]\n");
}

}  // namespace

int main() {
  std::printf("Swin-T windows per stage:");
  const Eigen::Index sides[4] = {56, 28, 14, 7};
  for (int s = 0; s < 4; ++s) {
    const posenc::SwinWindowLayout l = posenc::swin_block_layout(sides[s], sides[s], 7, true);
    std::printf(s ? ", %ld (shift %ld)" : " %ld (shift %ld)",
                static_cast<long>(posenc::swin_num_windows(l)), static_cast<long>(l.shift));
  }
  std::printf("\n");

  const posenc::SwinWindowLayout l{3, 3, 2, 1};
  std::vector<float> map(9), windows(16);
  for (int y = 0; y < 3; ++y) {
    for (int x = 0; x < 3; ++x) map[static_cast<std::size_t>(y * 3 + x)] = 10.0f * y + x + 1;
  }
  posenc::swin_partition_windows<float>(posenc::ConstTensorView<float, 4>(map.data(), 1, 3, 3, 1),
                                        l, posenc::TensorView<float, 3>(windows.data(), 4, 4, 1));
  std::printf("windows");
  for (int w = 0; w < 4; ++w) {
    std::printf(" [");
    for (int t = 0; t < 4; ++t) {
      std::printf(t ? " %g" : "%g",
                  static_cast<double>(windows[static_cast<std::size_t>(w * 4 + t)]));
    }
    std::printf("]");
  }
  std::printf("\n");

  // A zero table leaves the mask alone in the bias; without the mask, one zero bias for all.
  const std::vector<float> table(9, 0.0f);
  std::vector<float> bias(4 * 16), none(16, 0.0f);
  posenc::swin_window_bias<float>(posenc::ConstTensorView<float, 2>(table.data(), 9, 1), l,
                                  posenc::TensorView<float, 4>(bias.data(), 4, 1, 4, 4));
  print_block("masked", l, windows, bias, 4);
  print_block("unmasked", l, windows, none, 1);

  const posenc::SwinWindowLayout fig = posenc::swin_block_layout(8, 8, 4, true);
  std::vector<float> mask(4 * 256);
  posenc::swin_shift_mask(fig, posenc::TensorView<float, 4>(mask.data(), 4, 1, 16, 16));
  std::printf("masked pairs per window:");
  for (int w = 0; w < 4; ++w) {
    int masked = 0;
    for (int e = 0; e < 256; ++e) masked += mask[static_cast<std::size_t>(w * 256 + e)] != 0.0f;
    std::printf(" %d", masked);
  }
  std::printf("\n");

  std::vector<double> coords(15 * 15 * 2);
  posenc::log_spaced_relative_coords_2d({8, 8, 0, 0},
                                        posenc::TensorView<double, 2>(coords.data(), 225, 2));
  // Row of offset (dy, 0): (dy + 7) 15 + 7; column 0 holds the dy coordinate.
  std::printf("Swin-v2 coordinates: %.4f %.4f %.4f\n", coords[((7 + 7) * 15 + 7) * 2],
              coords[((-3 + 7) * 15 + 7) * 2], coords[((1 + 7) * 15 + 7) * 2]);
  return 0;
}
