// 2-D vision RoPE (Qwen2-VL / Qwen2.5-VL / Qwen3-VL / GLM-4V encoders) against HF's rot_pos_emb and
// apply_rotary_pos_emb_vision transcribed step by step in long double: the 4-D reshape /
// permute of the row and column ids, VisionRotaryEmbedding(head_dim // 2)'s table, the
// cat(h, w) angles, cat(emb, emb) and q * cos + rotate_half(q) * sin.

#include <catch2/catch.hpp>

#include <posenc/vision_rope.hpp>

#include <array>
#include <cmath>
#include <cstdint>
#include <vector>

#include "support/rng.hpp"

namespace {

using Catch::Matchers::Contains;

/// HF: hpos = arange(h)[:, None].expand(h, w).reshape(h/m, m, w/m, m).permute(0, 2, 1, 3)
/// .flatten(), wpos likewise from arange(w)[None, :], stacked and repeated t times.
std::vector<std::array<long, 2>> hf_pos_ids(long t, long h, long w, long m) {
  std::vector<long> hgrid(static_cast<std::size_t>(h * w)), wgrid(hgrid.size());
  for (long r = 0; r < h; ++r)
    for (long c = 0; c < w; ++c) {
      hgrid[static_cast<std::size_t>(r * w + c)] = r;
      wgrid[static_cast<std::size_t>(r * w + c)] = c;
    }
  // reshape (h/m, m, w/m, m): element [a][i][c][j] is grid row a m + i, column c m + j;
  // permute (0, 2, 1, 3) then flatten walks a, c, i, j.
  std::vector<std::array<long, 2>> ids;
  for (long a = 0; a < h / m; ++a)
    for (long c = 0; c < w / m; ++c)
      for (long i = 0; i < m; ++i)
        for (long j = 0; j < m; ++j) {
          const auto at = static_cast<std::size_t>((a * m + i) * w + (c * m + j));
          ids.push_back({hgrid[at], wgrid[at]});
        }
  std::vector<std::array<long, 2>> all;
  for (long f = 0; f < t; ++f) all.insert(all.end(), ids.begin(), ids.end());
  return all;
}

/// One head rotated as apply_rotary_pos_emb_vision does, in long double.
template <typename T>
std::vector<long double> hf_vision_rotate(const T* x, long head_dim, long hp, long wp, long double theta) {
  const long dim = head_dim / 2;  // VisionRotaryEmbedding(dim)
  std::vector<long double> inv;
  for (long k = 0; k < dim; k += 2) inv.push_back(1.0L / std::pow(theta, static_cast<long double>(k) / dim));
  std::vector<long double> rpe;  // table[pos_ids].flatten(1): cat(table[h], table[w])
  for (long double f : inv) rpe.push_back(static_cast<long double>(hp) * f);
  for (long double f : inv) rpe.push_back(static_cast<long double>(wp) * f);
  std::vector<long double> emb = rpe;  // cat(rpe, rpe)
  emb.insert(emb.end(), rpe.begin(), rpe.end());
  std::vector<long double> y(static_cast<std::size_t>(head_dim));
  for (long i = 0; i < head_dim; ++i) {
    const long double xi = static_cast<long double>(posenc::detail::to_double(x[i]));
    const long double rot = i < dim ? -static_cast<long double>(posenc::detail::to_double(x[i + dim]))
                                    : static_cast<long double>(posenc::detail::to_double(x[i - dim]));
    y[static_cast<std::size_t>(i)] = xi * std::cos(emb[static_cast<std::size_t>(i)]) + rot * std::sin(emb[static_cast<std::size_t>(i)]);
  }
  return y;
}

}  // namespace

TEMPLATE_TEST_CASE("vision rope: Qwen2-VL's 2-D encoder RoPE over a video and an image in window order", "[rope][vision]", float, Eigen::bfloat16) {
  // A video of 2 frames of 4 x 6 patches (merge 2) and then an image of 6 x 4, in one packed
  // sequence of 72 tokens; 3 heads of 32 (q = 8 pairs per axis); theta 10000.
  const Eigen::Index D = 32, H = 3, n1 = 2 * 4 * 6, n2 = 6 * 4, N = n1 + n2;
  const auto plan = posenc::vision_rope_2d(D);
  std::vector<std::int64_t> pos(static_cast<std::size_t>(3 * N), -7);
  const posenc::TensorView<std::int64_t, 3> pview(pos.data(), 3, 1, N);
  REQUIRE(posenc::vision_rope_2d_positions(2, 4, 6, 2, pview) == n1);
  REQUIRE(posenc::vision_rope_2d_positions(1, 6, 4, 2, pview, 0, n1) == n2);
  std::vector<std::array<long, 2>> ids = hf_pos_ids(2, 4, 6, 2);
  const auto second = hf_pos_ids(1, 6, 4, 2);
  ids.insert(ids.end(), second.begin(), second.end());
  for (Eigen::Index s = 0; s < N; ++s) {
    CAPTURE(s);
    REQUIRE(pos[static_cast<std::size_t>(s)] == 0);  // stream 0: (0, h, w), frames included
    REQUIRE(pos[static_cast<std::size_t>(N + s)] == ids[static_cast<std::size_t>(s)][0]);
    REQUIRE(pos[static_cast<std::size_t>(2 * N + s)] == ids[static_cast<std::size_t>(s)][1]);
  }

  const auto x0 = posenc_test::random_vector<TestType>(static_cast<std::size_t>(N * H * D), 21);
  auto x = x0;
  posenc::apply_mrope_inplace<TestType>(posenc::rope_heads<TestType>(posenc::TensorView<TestType, 4>(x.data(), 1, N, H, D)),
                                        posenc::MRopePositionsView(pos.data(), 3, 1, N), plan.freqs,
                                        posenc::RopeLayout::kHalfSplit, plan.sections);
  const double tol = std::is_same_v<TestType, float> ? 2e-6 : 1.6e-2;
  for (Eigen::Index s = 0; s < N; ++s)
    for (Eigen::Index h = 0; h < H; ++h) {
      const auto row = static_cast<std::size_t>((s * H + h) * D);
      const auto want = hf_vision_rotate(x0.data() + row, D, ids[static_cast<std::size_t>(s)][0],
                                         ids[static_cast<std::size_t>(s)][1], 10000.0L);
      for (Eigen::Index i = 0; i < D; ++i) {
        CAPTURE(s, h, i);
        REQUIRE_THAT(posenc::detail::to_double(x[row + static_cast<std::size_t>(i)]),
                     Catch::Matchers::WithinAbs(static_cast<double>(want[static_cast<std::size_t>(i)]), tol));
      }
    }
}

TEST_CASE("vision rope: the window order of a 4 x 4 grid, merge 2 (the file comment's table)", "[rope][vision]") {
  std::vector<std::int64_t> pos(3 * 16);
  posenc::vision_rope_2d_positions(1, 4, 4, 2, posenc::TensorView<std::int64_t, 3>(pos.data(), 3, 1, 16));
  const std::vector<std::int64_t> h(pos.begin() + 16, pos.begin() + 32), w(pos.begin() + 32, pos.end());
  CHECK(h == std::vector<std::int64_t>{0, 0, 1, 1, 0, 0, 1, 1, 2, 2, 3, 3, 2, 2, 3, 3});
  CHECK(w == std::vector<std::int64_t>{0, 1, 0, 1, 2, 3, 2, 3, 0, 1, 0, 1, 2, 3, 2, 3});
  // merge 1: plain row-major patches.
  posenc::vision_rope_2d_positions(1, 2, 3, 1, posenc::TensorView<std::int64_t, 3>(pos.data(), 3, 1, 16));
  CHECK(std::vector<std::int64_t>(pos.begin() + 16, pos.begin() + 22) == std::vector<std::int64_t>{0, 0, 0, 1, 1, 1});
  CHECK(std::vector<std::int64_t>(pos.begin() + 32, pos.begin() + 38) == std::vector<std::int64_t>{0, 1, 2, 0, 1, 2});
}

TEST_CASE("vision rope: bad head widths, grids and outputs throw before writing", "[rope][vision][errors]") {
  REQUIRE_THROWS_MATCHES(posenc::vision_rope_2d(30), std::invalid_argument,
                         Catch::Matchers::Message("posenc::vision_rope_2d: head_dim = 30 must be a multiple of 4 in [4, 1024] "
                                                  "(a quarter of the pairs per axis)"));
  REQUIRE_THROWS_WITH(posenc::vision_rope_2d(64, 1.0), Contains("theta = 1 must be finite and > 1"));
  std::vector<std::int64_t> pos(3 * 16, -1);
  const posenc::TensorView<std::int64_t, 3> out(pos.data(), 3, 1, 16);
  REQUIRE_THROWS_MATCHES(posenc::vision_rope_2d_positions(1, 4, 6, 4, out), std::invalid_argument,
                         Catch::Matchers::Message("posenc::vision_rope_2d_positions: spatial_merge_size = 4 must be >= 1 and "
                                                  "divide grid_h = 4 and grid_w = 6"));
  REQUIRE_THROWS_WITH(posenc::vision_rope_2d_positions(1, 4, 6, 2, out), Contains("first = 0 + 24 tokens must fit in seq = 16"));
  REQUIRE_THROWS_WITH(posenc::vision_rope_2d_positions(1, 2, 2, 2, out, 0, 13), Contains("first = 13 + 4 tokens must fit in seq = 16"));
  REQUIRE_THROWS_WITH(posenc::vision_rope_2d_positions(0, 2, 2, 1, out), Contains("grid (t, h, w) = (0, 2, 2)"));
  REQUIRE_THROWS_WITH(posenc::vision_rope_2d_positions(1, 2, 2, 1, out, 1), Contains("b = 1 must be in [0, batch = 1)"));
  for (auto v : pos) REQUIRE(v == -1);
}

TEMPLATE_TEST_CASE("vision rope: Pixtral's 2-D RoPE (parity-split frequencies, row-major patches) "
                   "against PixtralRotaryEmbedding transcribed in long double",
                   "[rope][vision][pixtral]", float, Eigen::bfloat16) {
  // Two images of 3 x 5 and 4 x 2 patches packed in one sequence, 2 heads of 32, theta 10000.
  // HF: freqs = theta^(-arange(0, dim, 2) / dim); inv_freq[h, w] = cat(h freqs[::2],
  // w freqs[1::2]); position id h * max_width + w of a row-major meshgrid; cat(inv, inv) with
  // rotate_half.
  const long D = 32, H = 2, N = 3 * 5 + 4 * 2;
  const auto plan = posenc::vision_rope_2d_pixtral(D);
  std::vector<std::int64_t> pos(static_cast<std::size_t>(3 * N), -7);
  const posenc::TensorView<std::int64_t, 3> pview(pos.data(), 3, 1, N);
  REQUIRE(posenc::vision_rope_2d_positions(1, 3, 5, 1, pview) == 15);
  REQUIRE(posenc::vision_rope_2d_positions(1, 4, 2, 1, pview, 0, 15) == 8);
  std::vector<std::array<long, 2>> ids;  // meshgrid(arange(h), arange(w), indexing="ij")
  for (const auto [gh, gw] : {std::array<long, 2>{3, 5}, std::array<long, 2>{4, 2}})
    for (long r = 0; r < gh; ++r)
      for (long c = 0; c < gw; ++c) ids.push_back({r, c});
  std::vector<long double> freqs;
  for (long k = 0; k < D; k += 2) freqs.push_back(1.0L / std::pow(10000.0L, static_cast<long double>(k) / D));

  const auto x0 = posenc_test::random_vector<TestType>(static_cast<std::size_t>(N * H * D), 33);
  auto x = x0;
  posenc::apply_mrope_inplace<TestType>(
      posenc::rope_heads<TestType>(posenc::TensorView<TestType, 4>(x.data(), 1, N, H, D)),
      posenc::MRopePositionsView(pos.data(), 3, 1, N), plan.freqs, posenc::RopeLayout::kHalfSplit,
      plan.sections);
  const double tol = std::is_same_v<TestType, float> ? 2e-6 : 1.6e-2;
  for (long s = 0; s < N; ++s) {
    std::vector<long double> inv;
    for (std::size_t k = 0; k < freqs.size(); k += 2) inv.push_back(ids[static_cast<std::size_t>(s)][0] * freqs[k]);
    for (std::size_t k = 1; k < freqs.size(); k += 2) inv.push_back(ids[static_cast<std::size_t>(s)][1] * freqs[k]);
    for (long h = 0; h < H; ++h) {
      const auto row = static_cast<std::size_t>((s * H + h) * D);
      for (long i = 0; i < D; ++i) {
        CAPTURE(s, h, i);
        const long double angle = inv[static_cast<std::size_t>(i % (D / 2))];
        const long double xi = posenc::detail::to_double(x0[row + static_cast<std::size_t>(i)]);
        const long double rot = i < D / 2 ? -static_cast<long double>(posenc::detail::to_double(x0[row + static_cast<std::size_t>(i + D / 2)]))
                                          : static_cast<long double>(posenc::detail::to_double(x0[row + static_cast<std::size_t>(i - D / 2)]));
        REQUIRE_THAT(posenc::detail::to_double(x[row + static_cast<std::size_t>(i)]),
                     Catch::Matchers::WithinAbs(static_cast<double>(xi * std::cos(angle) + rot * std::sin(angle)), tol));
      }
    }
  }
}

TEMPLATE_TEST_CASE("vision rope: Llama-4's 2-D RoPE (interleaved pairs, 1-based column then row, "
                   "class token unturned) against Llama4VisionRotaryEmbedding in long double",
                   "[rope][vision][llama4]", float, Eigen::bfloat16) {
  // An image of 3 x 4 patches (HF builds a square idx x idx grid; the rule is the same) and
  // its class token, 2 heads of 24, theta 10000. HF: freq_dim = head_dim / 2,
  // rope_freq = theta^(-arange(0, freq_dim, 2)[: freq_dim / 2] / freq_dim); freqs_x =
  // (x + 1) rope_freq, freqs_y = (y + 1) rope_freq, each repeat_interleave(2); cat(x, y)[::2]
  // gives pair angles [(x + 1) f_0 .. (x + 1) f_5, (y + 1) f_0 .. (y + 1) f_5]; the class token
  // (img_idx -2) gets 0; complex multiply of (x_2j, x_2j+1).
  const long D = 24, H = 2, GH = 3, GW = 4, N = GH * GW + 1;
  const auto plan = posenc::vision_rope_2d_llama4(D);
  REQUIRE(plan.layout == posenc::RopeLayout::kInterleaved);
  std::vector<std::int64_t> pos(static_cast<std::size_t>(3 * (N + 2)), -7);
  const posenc::TensorView<std::int64_t, 3> pview(pos.data(), 3, 1, N + 2);
  REQUIRE(posenc::vision_rope_2d_positions_llama4(GH, GW, pview, 0, 1) == N);
  REQUIRE(pos[0] == -7);  // columns outside [first, first + N) untouched
  REQUIRE(pos[static_cast<std::size_t>(N + 1)] == -7);
  for (long stream = 0; stream < 3; ++stream) {  // the neighbours: tokens at position 0
    pos[static_cast<std::size_t>(stream * (N + 2))] = 0;
    pos[static_cast<std::size_t>(stream * (N + 2) + N + 1)] = 0;
  }

  const long double freq_dim = D / 2;
  std::vector<long double> f;
  for (long k = 0; k < D / 2; k += 2) f.push_back(1.0L / std::pow(10000.0L, static_cast<long double>(k) / freq_dim));
  const auto x0 = posenc_test::random_vector<TestType>(static_cast<std::size_t>((N + 2) * H * D), 35);
  auto x = x0;
  posenc::apply_mrope_inplace<TestType>(
      posenc::rope_heads<TestType>(posenc::TensorView<TestType, 4>(x.data(), 1, N + 2, H, D)),
      posenc::MRopePositionsView(pos.data(), 3, 1, N + 2), plan.freqs, plan.layout,
      plan.sections);
  const double tol = std::is_same_v<TestType, float> ? 2e-6 : 1.6e-2;
  for (long s = 1; s <= N; ++s) {
    const long n = s - 1;  // HF's img_idx; the class token is the last one
    const bool cls = n == GH * GW;
    const long double px = cls ? 0.0L : static_cast<long double>(n % GW + 1);
    const long double py = cls ? 0.0L : static_cast<long double>(n / GW + 1);
    for (long h = 0; h < H; ++h) {
      const auto row = static_cast<std::size_t>((s * H + h) * D);
      for (long j = 0; j < D / 2; ++j) {
        CAPTURE(s, h, j);
        const std::size_t jj = static_cast<std::size_t>(j % (D / 4));
        const long double angle = (j < D / 4 ? px : py) * f[jj];
        const long double re = posenc::detail::to_double(x0[row + static_cast<std::size_t>(2 * j)]);
        const long double im = posenc::detail::to_double(x0[row + static_cast<std::size_t>(2 * j + 1)]);
        REQUIRE_THAT(posenc::detail::to_double(x[row + static_cast<std::size_t>(2 * j)]),
                     Catch::Matchers::WithinAbs(static_cast<double>(re * std::cos(angle) - im * std::sin(angle)), tol));
        REQUIRE_THAT(posenc::detail::to_double(x[row + static_cast<std::size_t>(2 * j + 1)]),
                     Catch::Matchers::WithinAbs(static_cast<double>(re * std::sin(angle) + im * std::cos(angle)), tol));
      }
    }
  }
  std::vector<std::int64_t> small(3 * 4, -1);
  const posenc::TensorView<std::int64_t, 3> sview(small.data(), 3, 1, 4);
  REQUIRE_THROWS_WITH(posenc::vision_rope_2d_positions_llama4(2, 2, sview),
                      Contains("first = 0 + 5 tokens must fit in seq = 4"));
  REQUIRE_THROWS_WITH(posenc::vision_rope_2d_positions_llama4(0, 2, sview),
                      Contains("grid (h, w) = (0, 2) must be >= 1"));
  for (auto v : small) REQUIRE(v == -1);
}

TEST_CASE("vision rope: grid, merge, output and width limits of the position writers",
          "[rope][vision][errors]") {
  std::vector<std::int64_t> pos(4 * 16, -1);
  const posenc::TensorView<std::int64_t, 3> out(pos.data(), 3, 1, 16);
  const posenc::TensorView<std::int64_t, 3> out4(pos.data(), 4, 1, 16);
  using posenc::vision_rope_2d_positions;
  using posenc::vision_rope_2d_positions_llama4;
  CHECK_THROWS_AS(vision_rope_2d_positions(1, 2, 2, 1, out4), std::invalid_argument);
  CHECK_THROWS_AS(vision_rope_2d_positions_llama4(2, 2, out4), std::invalid_argument);
  CHECK_THROWS_AS(vision_rope_2d_positions_llama4(2, 0, out), std::invalid_argument);
  CHECK_THROWS_AS(vision_rope_2d_positions_llama4(0, 2, out), std::invalid_argument);
  // 2 does not divide grid_h = 3.
  CHECK_THROWS_AS(vision_rope_2d_positions(1, 3, 4, 2, out), std::invalid_argument);
  CHECK_THROWS_AS(vision_rope_2d_positions(1, 2, 2, 0, out), std::invalid_argument);
  CHECK_THROWS_AS(vision_rope_2d_positions(1, 2, 2, 1, out, 0, -1), std::invalid_argument);
  CHECK_THROWS_AS(vision_rope_2d_positions_llama4(1, 2, out, 0, -1), std::invalid_argument);
  for (auto v : pos) REQUIRE(v == -1);
  // The widest head rope.hpp allows (kMaxRotaryDim = 1024, a multiple of 4) is a valid plan:
  // f_i = theta^(-2i / (head_dim / 2)) on both axes (HF VisionRotaryEmbedding(head_dim // 2)).
  const auto plan = posenc::vision_rope_2d(posenc::kMaxRotaryDim);
  const Eigen::Index q = posenc::kMaxRotaryDim / 4;
  REQUIRE(plan.freqs.inv_freq.size() == static_cast<std::size_t>(2 * q));
  for (const Eigen::Index i : {Eigen::Index{0}, Eigen::Index{1}, q - 1}) {
    const long double e = std::pow(10000.0L, -2.0L * static_cast<long double>(i) / (2.0L * q));
    CHECK(std::abs(plan.freqs.inv_freq[static_cast<std::size_t>(i)] - static_cast<double>(e)) <
          1e-15);
    CHECK(plan.freqs.inv_freq[static_cast<std::size_t>(q + i)] ==
          plan.freqs.inv_freq[static_cast<std::size_t>(i)]);
  }
}
