// An FP8 (E4M3) KV cache by hand: what the per-tensor scale does to each stored key, and what
// saturation does to attention.
//
// E4M3 holds 1 sign, 4 exponent and 3 mantissa bits: between 64 and 128 its values are 8 apart,
// between 256 and 448 (the largest) 32 apart. With k_scale = v_scale = 1/64 a key x is stored as
// the code nearest 64 x (ties to the even mantissa) and read back as code / 64:
//   1.0    -> 64                 -> 1.0       (exact)
//   1.5625 -> 100, a tie of 96 and 104 -> 96 -> 1.5
//   0.5    -> 32                 -> 0.5
//   10     -> 640, past 448: saturates -> 448 -> 7.0  (posenc clamps to the largest finite
//             code, as vLLM's quantisation does; a plain cast to float8_e4m3fn gives NaN)
// One query q = [1, 0] (head_dim 2, scale 1/sqrt 2) against keys [1.5625, 0], [0.5, 0], [10, 0]
// and values [1, 0], [0, 1], [-1, -1]:
//   float cache: logits [1.5625, 0.5, 10] / sqrt 2 -> weights [0.0026, 0.0012, 0.9962],
//                out = w0 [1, 0] + w1 [0, 1] - w2 [1, 1] = [-0.9937, -0.9950]
//   FP8 cache:   logits [1.5, 0.5, 7] / sqrt 2     -> weights [0.0199, 0.0098, 0.9704],
//                out = [-0.9505, -0.9606]
// The saturated key moved the output by 0.04: choose k_scale >= max |k| / 448 (vLLM computes
// it per layer from calibration data, or reads it from the checkpoint).
// expect:   1.0000  ->    64 -> 1.0000
// expect:   1.5625  ->    96 -> 1.5000
// expect:   0.5000  ->    32 -> 0.5000
// expect:   10.0000 ->   448 -> 7.0000
// expect: float cache out = [-0.9937, -0.9950]
// expect: FP8 cache out   = [-0.9505, -0.9606]  (stored key codes 96 32 448)

#include <cstdint>
#include <cstdio>
#include <vector>

#include <posenc/float8.hpp>
#include <posenc/kv_cache.hpp>

namespace {

template <typename T>
std::vector<float> attend_once(posenc::KvCache<T>& cache) {
  const std::vector<float> k = {1.5625f, 0.0f, 0.5f, 0.0f, 10.0f, 0.0f};
  const std::vector<float> v = {1.0f, 0.0f, 0.0f, 1.0f, -1.0f, -1.0f};
  const std::vector<std::int64_t> pos = {0, 1, 2};
  cache.append(posenc::ConstTensorView<float, 4>(k.data(), 1, 3, 1, 2),
               posenc::ConstTensorView<float, 4>(v.data(), 1, 3, 1, 2),
               posenc::PositionIdsView(pos.data(), 1, 3));
  const std::vector<float> q = {1.0f, 0.0f};
  std::vector<float> out(2);
  cache.attend(posenc::ConstTensorView<float, 4>(q.data(), 1, 1, 1, 2),
               posenc::TensorView<float, 4>(out.data(), 1, 1, 1, 2));
  return out;
}

}  // namespace

int main() {
  using posenc::float8_e4m3;
  std::printf("E4M3 with k_scale = 1/64: x -> code value -> read back\n");
  for (const float x : {1.0f, 1.5625f, 0.5f, 10.0f}) {
    const float8_e4m3 code(x * 64.0f);
    std::printf("  %-7.4f -> %5.0f -> %.4f\n", x, static_cast<float>(code),
                static_cast<float>(code) / 64.0f);
  }

  posenc::KvCache<float> plain(1, 3, 1, 2);
  const auto f = attend_once(plain);
  std::printf("float cache out = [%.4f, %.4f]\n", f[0], f[1]);

  posenc::KvCache<float8_e4m3> quantised(1, 3, 1, 2);
  quantised.set_scales({1.0 / 64.0, 1.0 / 64.0});
  const auto q = attend_once(quantised);
  std::printf("FP8 cache out   = [%.4f, %.4f]  (stored key codes %d %d %d)\n", q[0], q[1],
              static_cast<int>(static_cast<float>(quantised.keys()(0, 0, 0, 0))),
              static_cast<int>(static_cast<float>(quantised.keys()(0, 1, 0, 0))),
              static_cast<int>(static_cast<float>(quantised.keys()(0, 2, 0, 0))));
  return 0;
}

