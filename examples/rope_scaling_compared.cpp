// Long-context RoPE scaling compared on one table (seed 001 §6: 位置插值, 基频调整, YaRN).
//
// A head small enough to check by hand: rotary_dim d = 8 (4 pairs), theta b = 10000, so the
// unscaled frequencies are th_j = b^(-2j/d) = 10000^(-j/4) = 1, 0.1, 0.01, 0.001.
// Extension factor s = 4, pre-training length L0 = 2048. Each recipe (HF modeling_rope_utils;
// static ntk is bloc97's rule and vllm_ntk vLLM's, neither in transformers):
//
//   linear    th_j / s                                 -> 0.25, 0.025, 0.0025, 0.00025
//   ntk       (b s^(d/(d-2)))^(-2j/d) = th_j 4^(-j/3)  -> 1, 0.06299605, 0.00396850, 0.00025
//             (the highest frequency is kept, the lowest divided by exactly s)
//   yarn      ramp from corr(32) = 8 ln(2048/(64 pi)) / (2 ln 10000) = 1.008 -> floor 1 to
//             corr(1) = 2.513 -> ceil 3: ramp_j = clamp((j - 1) / 2, 0, 1) = 0, 0, 0.5, 1;
//             th_j / s * ramp + th_j (1 - ramp)          -> 1, 0.1, 0.00625, 0.00025
//             cos/sin multiplier 0.1 ln 4 + 1 = 1.138629
//   llama3    (low_freq_factor 1, high_freq_factor 4) wavelengths 2 pi / th_j = 6.28, 62.8,
//             628.3, 6283: below L0/4 = 512 kept, above L0/1 = 2048 divided by s, and j = 2
//             blended with m = (2048/628.3185 - 1) / 3 = 0.753164:
//             (1 - m) th/s + m th = 0.01 (0.246836/4 + 0.753164) -> 1, 0.1, 0.00814873, 0.00025
//   longrope  th_j / long_factor_j with long_factor = {1, 1.5, 3, 4} (past L0)
//                                                      -> 1, 0.06666667, 0.00333333, 0.00025
//             multiplier sqrt(1 + ln(8192/2048) / ln 2048) = sqrt(1 + 2/11) = 1.087115
//   vllm_ntk  vLLM's "ntk": (b s)^(-2j/d) / s^(2/d) = th_j 4^(-(j+1)/4)
//                                                      -> 0.70710678, 0.05, 0.00353553, 0.00025
//             (unlike bloc97's ntk above, the fastest pair slows too, by s^(2/d) = sqrt 2)
//   proportional  (Gemma-4, partial_rotary_factor 0.5) floor(0.5 * 8 / 2) = 2 pairs turn,
//             th_j / s for them, 0 for the rest       -> 0.25, 0.025, 0, 0
//             (the standard partial rotary of 0.5 would rotate 4 dims with exponent over 4)
//
// expect: j=0: default 1.00000000 linear 0.25000000 ntk 1.00000000 yarn 1.00000000 llama3 1.00000000 longrope 1.00000000
// expect: j=1: default 0.10000000 linear 0.02500000 ntk 0.06299605 yarn 0.10000000 llama3 0.10000000 longrope 0.06666667
// expect: j=2: default 0.01000000 linear 0.00250000 ntk 0.00396850 yarn 0.00625000 llama3 0.00814873 longrope 0.00333333
// expect: j=3: default 0.00100000 linear 0.00025000 ntk 0.00025000 yarn 0.00025000 llama3 0.00025000 longrope 0.00025000
// expect: attention factor: yarn 1.138629, longrope 1.087115
// expect: vllm_ntk 0.70710678 0.05000000 0.00353553 0.00025000
// expect: proportional 0.25000000 0.02500000 0.00000000 0.00000000
//
// Reading the table: linear slows every pair by 4 (local detail is squeezed too); NTK keeps
// the fastest pair and slows the slowest by exactly 4; YaRN and Llama-3 keep the fast pairs,
// interpolate the slow ones and blend in between; LongRoPE uses searched per-pair factors.

#include <cstdio>
#include <string>
#include <vector>

#include <posenc/rope_frequencies.hpp>

int main() {
  posenc::RopeParams base;
  base.head_dim = 8;
  base.theta = 10000.0;
  base.max_position_embeddings = 8192;  // the extended context (LongRoPE reads 8192 / 2048)

  const auto plan = [&](posenc::RopeScalingType type) {
    posenc::RopeParams p = base;
    p.scaling.type = type;
    p.scaling.factor = 4.0;
    p.scaling.original_max_position_embeddings = 2048;
    p.scaling.short_factor = {1.0, 1.0, 1.0, 1.0};
    p.scaling.long_factor = {1.0, 1.5, 3.0, 4.0};
    if (type == posenc::RopeScalingType::kProportional) p.partial_rotary_factor = 0.5;
    // seq_len past L0 so LongRoPE uses its long factors (the others ignore it).
    return posenc::compute_rope_frequencies(p, 8192);
  };
  using T = posenc::RopeScalingType;
  const auto def = plan(T::kDefault), lin = plan(T::kLinear), ntk = plan(T::kNtk),
             yarn = plan(T::kYarn), l3 = plan(T::kLlama3), lr = plan(T::kLongRope);

  std::printf("inv_freq per pair (d = 8, theta = 10000, factor 4, L0 = 2048)\n");
  for (std::size_t j = 0; j < def.inv_freq.size(); ++j) {
    std::printf("j=%zu: default %.8f linear %.8f ntk %.8f yarn %.8f llama3 %.8f longrope %.8f\n",
                j, def.inv_freq[j], lin.inv_freq[j], ntk.inv_freq[j], yarn.inv_freq[j],
                l3.inv_freq[j], lr.inv_freq[j]);
  }
  std::printf("attention factor: yarn %.6f, longrope %.6f\n", yarn.attention_factor,
              lr.attention_factor);
  std::printf("ntk effective theta: %.2f (= 10000 * 4^(4/3))\n", ntk.effective_theta);
  for (const T type : {T::kVllmNtk, T::kProportional}) {
    const auto f = plan(type);
    std::printf("%s", std::string(posenc::to_string(type)).c_str());
    for (double w : f.inv_freq) std::printf(" %.8f", w);
    std::printf("\n");
  }
  return 0;
}
