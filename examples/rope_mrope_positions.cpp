// M-RoPE (Qwen2-VL) positions for a prompt that mixes text and vision, worked by hand from HF's
// get_rope_index, then the rotation that uses them; and HunYuan-VL's four-stream XD-RoPE ones.
//
// 1. "<3 text tokens> <an image> <2 text tokens>". The image is 4 x 6 patches; the vision
//    encoder merges 2 x 2 patches, so the language model sees a 2 x 3 grid (6 tokens).
//    Text continues at (largest position so far) + 1 in all three streams; the image starts at
//    that position b = 3 and gives grid cell (h, w) the positions (t, h, w) = (b, b + h, b + w);
//    the text after it starts at max(3, 4, 5) + 1 = 6.
// expect: t: 0 1 2 3 3 3 3 3 3 6 7
// expect: h: 0 1 2 3 3 3 4 4 4 6 7
// expect: w: 0 1 2 3 4 5 3 4 5 6 7
//    11 tokens end at position 7, so every later token i (decode) sits at i + delta,
//    delta = 7 + 1 - 11 = -3, in all three streams.
// expect: mrope_position_delta = -3: decode token 11 at position 8
//
// 2. Qwen2.5-VL video: 2 grid steps of 1 s each at 2 tokens per second put the second step's
//    temporal position 2 further on (t = 1 + 0, 1 + 2 after one text token); h, w as an image.
// expect: video t: 1 1 1 1 3 3 3 3
//
// 3. A text token's three positions are equal, and M-RoPE then is plain RoPE: token 9 (position 6
//    in every stream) rotated with mrope_section = (2, 3, 3) equals plain RoPE at position 6.
// expect: text token 9 under M-RoPE == plain RoPE at position 6: yes
//
// 4. XD-RoPE (HunYuan-VL / HunyuanOCR, four streams p, w, h, i): "<2 text> <image_start>
//    <image token> <a 2 x 2 grid, each row ending in a newline token> <image_end> <1 text>".
//    Every stream starts at the token index; the grid starts at image_start + 2 = 4 (Tencent's
//    and vLLM's get_xdrope_input_positions: the image token after image_start keeps its index),
//    and its tokens (4 .. 9, rows of 2 + 1 columns) take their column, row and image number 0
//    in w, h, i, while p keeps the token index, so decode continues at i itself (delta 0).
// expect: xd p: 0 1 2 3 4 5 6 7 8 9 10 11
// expect: xd w: 0 1 2 3 0 1 2 0 1 2 10 11
// expect: xd h: 0 1 2 3 0 0 0 1 1 1 10 11
// expect: xd i: 0 1 2 3 0 0 0 0 0 0 10 11
// expect: xdrope delta = 0

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <vector>

#include <posenc/mrope.hpp>

namespace {

void print_stream(const char* name, const std::vector<std::int64_t>& ids, int k, int n) {
  std::printf("%s:", name);
  for (int i = 0; i < n; ++i) std::printf(" %lld", static_cast<long long>(ids[k * n + i]));
  std::printf("\n");
}

}  // namespace

int main() {
  using posenc::MRopeSegment;
  // --- 1. text | image | text ------------------------------------------------------------------
  constexpr int n = 11;
  std::vector<std::int64_t> ids(3 * n);  // [3, batch 1, seq 11]: t, h, w
  const std::int64_t delta = posenc::mrope_position_ids(
      {MRopeSegment::text(3), MRopeSegment::image(4 / 2, 6 / 2), MRopeSegment::text(2)},
      posenc::TensorView<std::int64_t, 3>(ids.data(), 3, 1, n));
  print_stream("t", ids, 0, n);
  print_stream("h", ids, 1, n);
  print_stream("w", ids, 2, n);
  std::printf("mrope_position_delta = %lld: decode token %d at position %lld\n",
              static_cast<long long>(delta), n, static_cast<long long>(n + delta));

  // --- 2. a Qwen2.5-VL video -------------------------------------------------------------------
  std::vector<std::int64_t> video(3 * 10);
  posenc::mrope_position_ids(
      {MRopeSegment::text(1), MRopeSegment::video(2, 2, 2, /*seconds_per_grid_t=*/1.0f,
                                                  /*tokens_per_second=*/2.0f),
       MRopeSegment::text(1)},
      posenc::TensorView<std::int64_t, 3>(video.data(), 3, 1, 10));
  std::printf("video t:");
  for (int i = 1; i <= 8; ++i) std::printf(" %lld", static_cast<long long>(video[i]));
  std::printf("\n");

  // --- 3. a text token: M-RoPE == RoPE ---------------------------------------------------------
  posenc::RopeParams params;
  params.head_dim = 16;
  const auto freqs = posenc::compute_rope_frequencies(params);
  posenc::MRopeSections sections;
  sections.section = {2, 3, 3};  // pairs per stream, sum = rotary_dim / 2 = 8
  std::vector<float> q(n * 16), plain(16);
  for (std::size_t i = 0; i < q.size(); ++i) q[i] = std::sin(0.37f * static_cast<float>(i));
  for (int c = 0; c < 16; ++c) plain[c] = q[9 * 16 + c];
  posenc::apply_mrope_inplace(posenc::rope_heads(posenc::TensorView<float, 4>(q.data(), 1, n, 1, 16)),
                              posenc::MRopePositionsView(ids.data(), 3, 1, n), freqs,
                              posenc::RopeLayout::kHalfSplit, sections);
  const std::int64_t six = 6;
  posenc::apply_rope_inplace(posenc::TensorView<float, 4>(plain.data(), 1, 1, 1, 16),
                             posenc::PositionIdsView(&six, 1, 1), freqs,
                             posenc::RopeLayout::kHalfSplit);
  bool same = true;
  for (int c = 0; c < 16; ++c) same = same && std::abs(q[9 * 16 + c] - plain[c]) <= 1e-6f;
  std::printf("text token 9 under M-RoPE == plain RoPE at position 6: %s\n", same ? "yes" : "no");

  // --- 4. XD-RoPE positions (rotate with sections of four entries, e.g. {16, 16, 16, 16}) -----
  constexpr int xn = 12;
  std::vector<std::int64_t> xd(4 * xn);  // [4, batch 1, seq 12]: p, w, h, i
  const std::int64_t xdelta = posenc::xdrope_position_ids(
      {posenc::XdRopeImage{/*first=*/2 + 2, /*rows=*/2, /*columns=*/2 + 1}}, xn,
      posenc::TensorView<std::int64_t, 3>(xd.data(), 4, 1, xn));
  print_stream("xd p", xd, 0, xn);
  print_stream("xd w", xd, 1, xn);
  print_stream("xd h", xd, 2, xn);
  print_stream("xd i", xd, 3, xn);
  std::printf("xdrope delta = %lld\n", static_cast<long long>(xdelta));
  return same ? 0 : 1;
}
