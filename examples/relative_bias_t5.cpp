// T5's relative attention bias by hand: the buckets of 32 / 128 (T5, Flan-T5, mT5, the T5
// text encoders of diffusion models), then a 3-token encoder whose scores are the bias alone.
//
//   bidirectional: 16 buckets per side, keys after the query + 16; |r| < 8 exact, then
//                  8 + trunc(8 ln(|r| / 8) / ln 16) = 8 + trunc(2 log2(|r| / 8)), at most 15:
//                  |r| = 11 -> 8, 12 -> 9, 16 -> 10, 32 -> 12, 64 -> 14, >= 128 -> 15
//   one-sided (decoder self-attention): r >= 0 -> 0; |r| < 16 exact, then
//                  16 + trunc(16 ln(|r| / 16) / ln 8): 32 -> 21, 64 -> 26, >= 128 -> 31
//   encoder:       q = 0, so scores = table[bucket(j - i)]; with table[b] = b / 10 the query at
//                  0 sees keys at r = 0, 1, 2 in buckets 0, 17, 18: softmax([0, 1.7, 1.8]) =
//                  [1, 5.4739, 6.0496] / 12.5236 = [0.0798, 0.4371, 0.4831]
//
// expect: bidirectional r=-130:15 r=-64:14 r=-32:12 r=-16:10 r=-12:9 r=-11:8 r=-7:7 r=0:0 r=1:17 r=16:26 r=128:31
// expect: one-sided r=5:0 r=-15:15 r=-32:21 r=-64:26 r=-128:31
// expect: encoder weights of query 0: [0.0798, 0.4371, 0.4831]

#include <posenc/attention.hpp>
#include <posenc/relative_bias.hpp>

#include <cstdint>
#include <cstdio>
#include <vector>

int main() {
  std::printf("bidirectional");
  for (const std::int64_t r : {-130, -64, -32, -16, -12, -11, -7, 0, 1, 16, 128}) {
    std::printf(" r=%lld:%lld", static_cast<long long>(r),
                static_cast<long long>(posenc::relative_position_bucket(r)));
  }
  std::printf("\none-sided");
  for (const std::int64_t r : {5, -15, -32, -64, -128}) {
    std::printf(" r=%lld:%lld", static_cast<long long>(r),
                static_cast<long long>(posenc::relative_position_bucket(r, 32, 128, false)));
  }
  std::printf("\n");

  // One head; table[b] = b / 10; q = 0 so only the bias decides; v_j = e_j makes the output row
  // the attention weights.
  std::vector<float> table(32);
  for (std::size_t b = 0; b < table.size(); ++b) table[b] = static_cast<float>(b) / 10.0f;
  posenc::AttentionParams params;
  params.mask = posenc::MaskMode::kBidirectional;
  params.scale = 1.0;  // T5 does not scale q.k
  params.relative_bias =
      posenc::relative_position_bias(posenc::ConstTensorView<float, 2>(table.data(), 32, 1));
  std::vector<float> q(9, 0.0f), k(9, 0.5f), v(9, 0.0f), out(9);
  for (int j = 0; j < 3; ++j) v[static_cast<std::size_t>(4 * j)] = 1.0f;
  posenc::attention<float>(posenc::ConstTensorView<float, 4>(q.data(), 1, 3, 1, 3),
                           posenc::ConstTensorView<float, 4>(k.data(), 1, 3, 1, 3),
                           posenc::ConstTensorView<float, 4>(v.data(), 1, 3, 1, 3),
                           posenc::TensorView<float, 4>(out.data(), 1, 3, 1, 3), params);
  std::printf("encoder weights of query 0: [%.4f, %.4f, %.4f]\n", static_cast<double>(out[0]),
              static_cast<double>(out[1]), static_cast<double>(out[2]));
  return 0;
}
