// Swin's (shifted) windows. Expected values: layouts, windows and masks worked by hand from the
// Swin paper's Fig. 4 construction and HF's SwinLayer / Swinv2Layer rules; the mask checked
// against its meaning (a token pair is kept exactly when the cyclic shift wrapped both or
// neither, per axis); and a whole shifted block's attention written out in long double from
// the map's own coordinates, without windows.

#include <catch2/catch.hpp>

#include <posenc/attention.hpp>
#include <posenc/swin_window.hpp>

#include <cmath>
#include <vector>

#include "support/attention_ld.hpp"
#include "support/rng.hpp"

using Catch::Matchers::Contains;
using posenc::SwinWindowLayout;
using posenc::SwinWindowRule;

namespace {

std::vector<float> swin_mask(const SwinWindowLayout& l, float masked = -100.0f) {
  const Eigen::Index nw = posenc::swin_num_windows(l), n = posenc::swin_window_tokens(l);
  std::vector<float> m(static_cast<std::size_t>(nw * n * n), 7.0f);
  posenc::swin_shift_mask(l, posenc::TensorView<float, 4>(m.data(), nw, 1, n, n), masked);
  return m;
}

Eigen::Index padded(Eigen::Index n, Eigen::Index w) { return (n + w - 1) / w * w; }

}  // namespace

TEST_CASE("swin window: layouts of Swin-T and of maps smaller than the window", "[swin]") {
  // Swin-T at 224 px: 4 x 4 patches, stages of 56, 28, 14, 7 patches, window 7.
  const Eigen::Index sides[4] = {56, 28, 14, 7}, windows[4] = {64, 16, 4, 1};
  for (int s = 0; s < 4; ++s) {
    for (const auto rule : {SwinWindowRule::kSwin, SwinWindowRule::kSwinV2}) {
      const SwinWindowLayout a = posenc::swin_block_layout(sides[s], sides[s], 7, false, rule),
                             b = posenc::swin_block_layout(sides[s], sides[s], 7, true, rule);
      CHECK(a.window == 7);
      CHECK(a.shift == 0);
      CHECK(b.window == 7);
      CHECK(b.shift == (s < 3 ? 3 : 0));  // the last stage fits one window: no shift
      CHECK(posenc::swin_num_windows(b) == windows[s]);
      CHECK(posenc::swin_window_tokens(b) == 49);
    }
  }
  // 5 x 20 patches, window 7. Swin: min(5, 20) <= 7 -> window 5, no shift, 1 x 4 windows.
  // Swin-v2 reads the height: window min(5, 7) = 5, 5 <= 5 -> no shift.
  SwinWindowLayout l = posenc::swin_block_layout(5, 20, 7, true, SwinWindowRule::kSwin);
  CHECK((l.window == 5 && l.shift == 0 && posenc::swin_num_windows(l) == 4));
  l = posenc::swin_block_layout(5, 20, 7, true, SwinWindowRule::kSwinV2);
  CHECK((l.window == 5 && l.shift == 0 && posenc::swin_num_windows(l) == 4));
  // 20 x 5: Swin shrinks to 5 (4 x 1 windows); Swin-v2 keeps 7 and the shift 3 (height 20 >
  // 7) and pads the width to 7: 3 x 1 windows.
  l = posenc::swin_block_layout(20, 5, 7, true, SwinWindowRule::kSwin);
  CHECK((l.window == 5 && l.shift == 0 && posenc::swin_num_windows(l) == 4));
  l = posenc::swin_block_layout(20, 5, 7, true, SwinWindowRule::kSwinV2);
  CHECK((l.window == 7 && l.shift == 3 && posenc::swin_num_windows(l) == 3));
  // Swin-v2-B at 256 px, window 16 (swinv2-base-patch4-window16-256): stage 4 is 8 x 8.
  l = posenc::swin_block_layout(8, 8, 16, true, SwinWindowRule::kSwinV2);
  CHECK((l.window == 8 && l.shift == 0 && posenc::swin_num_windows(l) == 1));
  // Padding: 9 x 10 patches, window 4 -> 12 x 12, 9 windows.
  l = posenc::swin_block_layout(9, 10, 4, true);
  CHECK((l.window == 4 && l.shift == 2 && posenc::swin_num_windows(l) == 9));
}

TEST_CASE("swin window: the 8 x 8 map of the paper's figure, window 4, shift 2", "[swin]") {
  const SwinWindowLayout l = posenc::swin_block_layout(8, 8, 4, true);
  REQUIRE(l.shift == 2);
  const std::vector<float> m = swin_mask(l);
  // Window 0 is one region; windows 1 and 2 hold two regions of 8 tokens (2 x 64 of 256 pairs
  // kept); window 3 holds four regions of 4 tokens (4 x 16 kept).
  const int masked_expected[4] = {0, 128, 128, 192};
  for (int w = 0; w < 4; ++w) {
    int masked = 0;
    for (int e = 0; e < 256; ++e) {
      const float x = m[static_cast<std::size_t>(w * 256 + e)];
      REQUIRE((x == 0.0f || x == -100.0f));
      masked += x != 0.0f;
    }
    CHECK(masked == masked_expected[w]);
  }
  // Window 3's regions, the file comment's picture: rows [0 0 1 1] [0 0 1 1] [2 2 3 3] [2 2 3 3].
  const int region[16] = {0, 0, 1, 1, 0, 0, 1, 1, 2, 2, 3, 3, 2, 2, 3, 3};
  for (int i = 0; i < 16; ++i) {
    for (int j = 0; j < 16; ++j) {
      CHECK(m[static_cast<std::size_t>(3 * 256 + i * 16 + j)] ==
            (region[i] == region[j] ? 0.0f : -100.0f));
    }
  }
  // No shift: no mask.
  for (const float x : swin_mask(posenc::swin_block_layout(8, 8, 4, false))) CHECK(x == 0.0f);
}

TEST_CASE("swin window: a pair is masked exactly when the shift wrapped one of them", "[swin]") {
  // The rolled map puts padded cell y at shifted row (y - shift) mod Hp; a shifted row ys came
  // across the edge when ys + shift >= Hp. Two tokens of a window may attend to each other iff
  // both or neither wrapped, on each axis.
  for (const auto& [h, w, ws] : std::vector<std::tuple<Eigen::Index, Eigen::Index, Eigen::Index>>{
           {8, 8, 4}, {9, 10, 4}, {14, 14, 7}, {12, 5, 6}, {7, 11, 3}, {5, 5, 2}}) {
    const SwinWindowLayout l{h, w, ws, ws / 2};  // {12, 5, 6}: a map narrower than its window
    const Eigen::Index hp = padded(h, ws), wp = padded(w, ws), cols = wp / ws, n = ws * ws;
    const std::vector<float> m = swin_mask(l, -7.5f);
    REQUIRE(static_cast<Eigen::Index>(m.size()) == hp / ws * cols * n * n);
    for (Eigen::Index win = 0; win < hp / ws * cols; ++win) {
      for (Eigen::Index i = 0; i < n; ++i) {
        for (Eigen::Index j = 0; j < n; ++j) {
          const Eigen::Index yi = win / cols * ws + i / ws, xi = win % cols * ws + i % ws;
          const Eigen::Index yj = win / cols * ws + j / ws, xj = win % cols * ws + j % ws;
          const bool kept = (yi + l.shift >= hp) == (yj + l.shift >= hp) &&
                            (xi + l.shift >= wp) == (xj + l.shift >= wp);
          REQUIRE(m[static_cast<std::size_t>((win * n + i) * n + j)] == (kept ? 0.0f : -7.5f));
        }
      }
    }
  }
}

TEST_CASE("swin window: partition and merge, worked by hand and round trip", "[swin]") {
  // A 3 x 3 map, value 10 y + x + 1, window 2, shift 1. Padded to 4 x 4 (zeros in row and
  // column 3), rolled by -1: shifted (ys, xs) = padded ((ys + 1) mod 4, (xs + 1) mod 4).
  const SwinWindowLayout l{3, 3, 2, 1};
  std::vector<float> map(9), win(16, -1.0f), back(9, -1.0f);
  for (int y = 0; y < 3; ++y) {
    for (int x = 0; x < 3; ++x) map[static_cast<std::size_t>(y * 3 + x)] = 10.0f * y + x + 1;
  }
  posenc::swin_partition_windows<float>(posenc::ConstTensorView<float, 4>(map.data(), 1, 3, 3, 1),
                                        l, posenc::TensorView<float, 3>(win.data(), 4, 4, 1));
  const std::vector<float> expected = {12, 13, 22, 23, 0, 11, 0, 21, 0, 0, 2, 3, 0, 0, 0, 1};
  CHECK(win == expected);
  posenc::swin_merge_windows<float>(posenc::ConstTensorView<float, 3>(win.data(), 4, 4, 1), l,
                                    posenc::TensorView<float, 4>(back.data(), 1, 3, 3, 1));
  CHECK(back == map);
  // The same layout's mask: window 0 one region, window 1 columns {2} / {3} (tokens 0, 2 and
  // 1, 3), window 3 four regions of one token each.
  const std::vector<float> m = swin_mask(l);
  for (int e = 0; e < 16; ++e) CHECK(m[static_cast<std::size_t>(e)] == 0.0f);
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 4; ++j) {
      CHECK(m[static_cast<std::size_t>(16 + i * 4 + j)] == (i % 2 == j % 2 ? 0.0f : -100.0f));
      CHECK(m[static_cast<std::size_t>(48 + i * 4 + j)] == (i == j ? 0.0f : -100.0f));
    }
  }

  // Round trips over several images and channels, in every storage type.
  posenc_test::SplitMix64 rng(11);
  for (const SwinWindowLayout& lay : {SwinWindowLayout{9, 10, 4, 2}, SwinWindowLayout{7, 7, 7, 0},
                                      SwinWindowLayout{5, 13, 3, 1}}) {
    const Eigen::Index b = 2, c = 5, nw = posenc::swin_num_windows(lay),
                       n = lay.window * lay.window;
    std::vector<Eigen::bfloat16> x(static_cast<std::size_t>(b * lay.height * lay.width * c));
    for (auto& v : x) v = Eigen::bfloat16(static_cast<float>(rng.uniform()));
    std::vector<Eigen::bfloat16> ws(static_cast<std::size_t>(b * nw * n * c)), y(x.size());
    posenc::swin_partition_windows<Eigen::bfloat16>(
        posenc::ConstTensorView<Eigen::bfloat16, 4>(x.data(), b, lay.height, lay.width, c), lay,
        posenc::TensorView<Eigen::bfloat16, 3>(ws.data(), b * nw, n, c));
    posenc::swin_merge_windows<Eigen::bfloat16>(
        posenc::ConstTensorView<Eigen::bfloat16, 3>(ws.data(), b * nw, n, c), lay,
        posenc::TensorView<Eigen::bfloat16, 4>(y.data(), b, lay.height, lay.width, c));
    for (std::size_t e = 0; e < x.size(); ++e)
      REQUIRE(Eigen::numext::bit_cast<std::uint16_t>(y[e]) ==
              Eigen::numext::bit_cast<std::uint16_t>(x[e]));
    // Every map cell appears once among the windows; the rest are padding zeros.
    std::size_t zeros = 0;
    for (const auto v : ws) zeros += static_cast<float>(v) == 0.0f;
    CHECK(zeros >= static_cast<std::size_t>(b * (nw * n - lay.height * lay.width) * c));
  }
}

TEST_CASE("swin window: the block bias is the table's bias plus the mask", "[swin]") {
  posenc_test::SplitMix64 rng(5);
  const Eigen::Index heads = 3, ws = 4, rows = 49;
  std::vector<double> table(static_cast<std::size_t>(rows * heads));
  for (auto& v : table) v = rng.uniform();
  const posenc::ConstTensorView<double, 2> t(table.data(), rows, heads);
  const SwinWindowLayout shifted = posenc::swin_block_layout(9, 6, ws, true);
  const Eigen::Index nw = posenc::swin_num_windows(shifted), n = ws * ws;
  std::vector<float> bias(static_cast<std::size_t>(nw * heads * n * n));
  posenc::swin_window_bias<double>(t, shifted,
                                   posenc::TensorView<float, 4>(bias.data(), nw, heads, n, n));
  const std::vector<float> m = swin_mask(shifted);
  for (Eigen::Index w = 0; w < nw; ++w) {
    for (Eigen::Index h = 0; h < heads; ++h) {
      for (Eigen::Index i = 0; i < n; ++i) {
        for (Eigen::Index j = 0; j < n; ++j) {
          const Eigen::Index dy = i / ws - j / ws, dx = i % ws - j % ws;
          const float rel = static_cast<float>(
              table[static_cast<std::size_t>(((dy + 3) * 7 + dx + 3) * heads + h)]);
          REQUIRE(bias[static_cast<std::size_t>(((w * heads + h) * n + i) * n + j)] ==
                  rel + m[static_cast<std::size_t>((w * n + i) * n + j)]);
        }
      }
    }
  }
  // An unshifted block: one [1, heads, N, N] bias serves every window.
  std::vector<float> one(static_cast<std::size_t>(heads * n * n));
  posenc::swin_window_bias<double>(t, posenc::swin_block_layout(9, 6, ws, false),
                                   posenc::TensorView<float, 4>(one.data(), 1, heads, n, n));
  for (Eigen::Index h = 0; h < heads; ++h) {
    CHECK(one[static_cast<std::size_t>((h * n + 0) * n + 5)] ==
          static_cast<float>(table[static_cast<std::size_t>(((-1 + 3) * 7 - 1 + 3) * heads + h)]));
  }
}

TEST_CASE("swin window: a shifted block's attention against long double without windows",
          "[swin]") {
  // Two images of 9 x 6 patches, window 4 (padded to 12 x 8, 6 windows), shift 2, 2 heads of 4.
  // The block projects the padded, shifted windows, so a padding token's q / k / v are the
  // projections' biases. The expectation works on the map's own coordinates: cell (y, x) of
  // the padded map lies in the shifted window of ((y - 2) mod 12, (x - 2) mod 8).
  const Eigen::Index b = 2, h = 9, w = 6, ws = 4, sh = 2, heads = 2, d = 4, c = heads * d;
  const SwinWindowLayout l = posenc::swin_block_layout(h, w, ws, true);
  REQUIRE((l.window == ws && l.shift == sh));
  const Eigen::Index hp = 12, wp = 8, nw = 6, n = ws * ws;
  posenc_test::SplitMix64 rng(23);
  std::vector<float> x(static_cast<std::size_t>(b * h * w * c)), proj(3 * c * c), pbias(3 * c);
  std::vector<float> table(static_cast<std::size_t>(49 * heads));
  for (auto* v : {&x, &proj, &pbias, &table}) {
    for (auto& e : *v) e = static_cast<float>(rng.uniform());
  }
  // y = W x + b for projection p (0 = q, 1 = k, 2 = v), in float as a model would run it.
  const auto project = [&](int p, const float* in, float* out) {
    for (Eigen::Index o = 0; o < c; ++o) {
      float s = pbias[static_cast<std::size_t>(p * c + o)];
      for (Eigen::Index i = 0; i < c; ++i)
        s += proj[static_cast<std::size_t>((p * c + o) * c + i)] * in[i];
      out[o] = s;
    }
  };

  // posenc: partition, project, bias, attention per image, merge.
  std::vector<float> win(static_cast<std::size_t>(b * nw * n * c));
  posenc::swin_partition_windows<float>(posenc::ConstTensorView<float, 4>(x.data(), b, h, w, c), l,
                                        posenc::TensorView<float, 3>(win.data(), b * nw, n, c));
  std::vector<float> q(win.size()), k(win.size()), v(win.size()), o(win.size());
  for (Eigen::Index r = 0; r < b * nw * n; ++r) {
    project(0, &win[static_cast<std::size_t>(r * c)], &q[static_cast<std::size_t>(r * c)]);
    project(1, &win[static_cast<std::size_t>(r * c)], &k[static_cast<std::size_t>(r * c)]);
    project(2, &win[static_cast<std::size_t>(r * c)], &v[static_cast<std::size_t>(r * c)]);
  }
  std::vector<float> bias(static_cast<std::size_t>(nw * heads * n * n));
  posenc::swin_window_bias<float>(posenc::ConstTensorView<float, 2>(table.data(), 49, heads), l,
                                  posenc::TensorView<float, 4>(bias.data(), nw, heads, n, n));
  posenc::AttentionParams params;
  params.mask = posenc::MaskMode::kBidirectional;
  posenc::AttentionMetadata meta;
  meta.attention_bias.emplace(bias.data(), nw, heads, n, n);
  for (Eigen::Index img = 0; img < b; ++img) {
    const std::size_t off = static_cast<std::size_t>(img * nw * n * c);
    posenc::attention<float>(posenc::ConstTensorView<float, 4>(q.data() + off, nw, n, heads, d),
                             posenc::ConstTensorView<float, 4>(k.data() + off, nw, n, heads, d),
                             posenc::ConstTensorView<float, 4>(v.data() + off, nw, n, heads, d),
                             posenc::TensorView<float, 4>(o.data() + off, nw, n, heads, d), params,
                             meta);
  }
  std::vector<float> y(x.size());
  posenc::swin_merge_windows<float>(posenc::ConstTensorView<float, 3>(o.data(), b * nw, n, c), l,
                                    posenc::TensorView<float, 4>(y.data(), b, h, w, c));

  // The expectation: every padded cell's q / k / v, then each map cell's softmax over the cells
  // of its shifted window.
  std::vector<float> qa(static_cast<std::size_t>(hp * wp * c)), ka(qa.size()), va(qa.size());
  const std::vector<float> zero(static_cast<std::size_t>(c), 0.0f);
  const auto wrapped = [&](Eigen::Index coord, Eigen::Index len) {
    return (coord - sh + len) % len + sh >= len;  // shifted coordinate + shift past the edge
  };
  for (Eigen::Index img = 0; img < b; ++img) {
    for (Eigen::Index yy = 0; yy < hp; ++yy) {
      for (Eigen::Index xx = 0; xx < wp; ++xx) {
        const float* in = yy < h && xx < w
                              ? &x[static_cast<std::size_t>(((img * h + yy) * w + xx) * c)]
                              : zero.data();
        const std::size_t at = static_cast<std::size_t>((yy * wp + xx) * c);
        project(0, in, &qa[at]);
        project(1, in, &ka[at]);
        project(2, in, &va[at]);
      }
    }
    for (Eigen::Index yy = 0; yy < h; ++yy) {
      for (Eigen::Index xx = 0; xx < w; ++xx) {
        const Eigen::Index ys = (yy - sh + hp) % hp, xs = (xx - sh + wp) % wp;
        std::vector<Eigen::Index> keys;
        for (Eigen::Index ky = 0; ky < hp; ++ky) {
          for (Eigen::Index kx = 0; kx < wp; ++kx) {
            const Eigen::Index kys = (ky - sh + hp) % hp, kxs = (kx - sh + wp) % wp;
            if (kys / ws == ys / ws && kxs / ws == xs / ws) keys.push_back(ky * wp + kx);
          }
        }
        REQUIRE(keys.size() == static_cast<std::size_t>(n));
        for (Eigen::Index hd = 0; hd < heads; ++hd) {
          std::vector<long double> kb;
          for (const Eigen::Index key : keys) {
            const Eigen::Index ky = key / wp, kx = key % wp;
            const Eigen::Index dy = ys % ws - (ky - sh + hp) % hp % ws,
                               dx = xs % ws - (kx - sh + wp) % wp % ws;
            const bool kept =
                wrapped(yy, hp) == wrapped(ky, hp) && wrapped(xx, wp) == wrapped(kx, wp);
            kb.push_back(
                static_cast<long double>(
                    table[static_cast<std::size_t>(((dy + 3) * 7 + dx + 3) * heads + hd)]) +
                (kept ? 0.0L : -100.0L));
          }
          const auto ref = posenc_test::attend_ld(
              &qa[static_cast<std::size_t>((yy * wp + xx) * c + hd * d)], ka.data() + hd * d,
              va.data() + hd * d, c, d, keys, kb, 1.0L / std::sqrt(static_cast<long double>(d)));
          for (Eigen::Index e = 0; e < d; ++e) {
            const float got =
                y[static_cast<std::size_t>(((img * h + yy) * w + xx) * c + hd * d + e)];
            REQUIRE(std::abs(static_cast<long double>(got) - ref[static_cast<std::size_t>(e)]) <
                    2e-5L);
          }
        }
      }
    }
  }
}

TEST_CASE("swin window: bad layouts, shapes and overlaps are refused before writing", "[swin]") {
  CHECK_THROWS_WITH(posenc::swin_block_layout(0, 4, 7, false), Contains("height = 0"));
  CHECK_THROWS_WITH(posenc::swin_block_layout(8, 8, 0, false), Contains("window_size = 0"));
  CHECK_THROWS_WITH(posenc::swin_block_layout(8, 8, 40000, false), Contains("window_size = 40000"));
  CHECK_THROWS_WITH(posenc::swin_num_windows(SwinWindowLayout{8, 8, 4, 4}),
                    Contains("layout shift = 4 must be in [0, 4)"));
  CHECK_THROWS_WITH(posenc::swin_window_tokens(SwinWindowLayout{8, 8, 4, -1}),
                    Contains("layout shift = -1"));

  const SwinWindowLayout l{8, 8, 4, 2};
  std::vector<float> m(4 * 256, 3.0f);
  CHECK_THROWS_WITH(posenc::swin_shift_mask(l, posenc::TensorView<float, 4>(m.data(), 4, 2, 16, 8)),
                    Contains("must be [num_windows, 1, N, N] = [4, 1, 16, 16]"));
  CHECK_THROWS_WITH(
      posenc::swin_shift_mask(l, posenc::TensorView<float, 4>(m.data(), 4, 1, 16, 16), 1.0f),
      Contains("masked_value = 1 must be <= 0"));
  CHECK_THROWS_AS(posenc::swin_shift_mask(l, posenc::TensorView<float, 4>(m.data(), 4, 1, 16, 16),
                                          std::nanf("")),
                  std::invalid_argument);

  std::vector<float> table(49 * 2, 0.5f);
  table[17] = INFINITY;
  CHECK_THROWS_WITH(
      posenc::swin_window_bias<float>(posenc::ConstTensorView<float, 2>(table.data(), 49, 2), l,
                                      posenc::TensorView<float, 4>(m.data(), 2, 2, 16, 16)),
      Contains("[num_windows, heads, N, N] = [4, 2, 16, 16]"));
  CHECK_THROWS_WITH(
      posenc::swin_window_bias<float>(posenc::ConstTensorView<float, 2>(table.data(), 49, 2), l,
                                      posenc::TensorView<float, 4>(m.data(), 1, 2, 16, 16)),
      Contains("[4, 2, 16, 16]"));
  std::vector<float> big(4 * 2 * 256, 3.0f);
  CHECK_THROWS_WITH(
      posenc::swin_window_bias<float>(posenc::ConstTensorView<float, 2>(table.data(), 49, 2), l,
                                      posenc::TensorView<float, 4>(big.data(), 4, 2, 16, 16)),
      Contains("table[8, 1] = inf must be finite"));
  CHECK_THROWS_WITH(
      posenc::swin_window_bias<float>(posenc::ConstTensorView<float, 2>(table.data(), 48, 2), l,
                                      posenc::TensorView<float, 4>(big.data(), 4, 2, 16, 16)),
      Contains("must be [49, heads >= 1]"));
  for (const float e : m) CHECK(e == 3.0f);
  for (const float e : big) CHECK(e == 3.0f);

  std::vector<float> map(2 * 8 * 8 * 3, 1.0f), win(2 * 4 * 16 * 3, 5.0f);
  CHECK_THROWS_WITH(posenc::swin_partition_windows<float>(
                        posenc::ConstTensorView<float, 4>(map.data(), 2, 8, 7, 3), l,
                        posenc::TensorView<float, 3>(win.data(), 8, 16, 3)),
                    Contains("in shape [2, 8, 7, 3] must be [batch, height, width, channels]"));
  CHECK_THROWS_WITH(
      posenc::swin_partition_windows<float>(
          posenc::ConstTensorView<float, 4>(map.data(), 2, 8, 8, 3), l,
          posenc::TensorView<float, 3>(win.data(), 4, 16, 3)),
      Contains("out shape [4, 16, 3] must be [batch * num_windows, N, channels] = [8, 16, 3]"));
  CHECK_THROWS_WITH(posenc::swin_partition_windows<float>(
                        posenc::ConstTensorView<float, 4>(map.data(), 2, 8, 8, 0), l,
                        posenc::TensorView<float, 3>(win.data(), 8, 16, 0)),
                    Contains("in channels = 0 must be >= 1"));
  CHECK_THROWS_WITH(posenc::swin_partition_windows<float>(
                        posenc::ConstTensorView<float, 4>(win.data(), 2, 8, 8, 3), l,
                        posenc::TensorView<float, 3>(win.data() + 10, 8, 16, 3)),
                    Contains("in and out must not overlap"));
  CHECK_THROWS_WITH(
      posenc::swin_merge_windows<float>(posenc::ConstTensorView<float, 3>(win.data(), 8, 16, 3), l,
                                        posenc::TensorView<float, 4>(map.data(), 2, 8, 8, 2)),
      Contains("in shape [8, 16, 3] must be [batch * num_windows, N, channels] = [8, 16, 2]"));
  for (const float e : map) CHECK(e == 1.0f);
  for (const float e : win) CHECK(e == 5.0f);
}
