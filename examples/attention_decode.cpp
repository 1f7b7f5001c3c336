// Prefill + decode through a KV cache equals one full causal forward, with RoPE stored in the
// cache and a left-padded batch of two sequences.
//
//   batch 2, heads 4 over kv_heads 2 (GQA), head_dim 8; sequence 0 has 2 padding slots.
//   prefill 5 slots, then 3 decode steps of one token; compare with attention over all 8.
//
// The causal mask aligns slots (key slot j visible to query slot i iff j <= i), so the padding
// query slots 0 and 1 of sequence 0 see only padding keys: their rows are zeros, not NaN.
// A ninth token does not fit the 8 slots: std::out_of_range, the cache unchanged.
// expect: padding query rows of sequence 0 (slots 0, 1) are all zeros: yes
// expect: full cache (std::out_of_range): posenc::KvCache::append: appending n = 1 tokens
// expect: to a cache holding 8 of max_len = 8 slots would overflow it
// expect: cache still holds 8 tokens

#include <posenc/attention_rope.hpp>
#include <posenc/kv_cache.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <vector>

int main() {
  constexpr Eigen::Index B = 2, N = 8, H = 4, KH = 2, D = 8, prefill = 5;
  auto value = [](std::size_t i, double f) { return static_cast<float>(std::sin(f * static_cast<double>(i + 1))); };
  std::vector<float> q(B * N * H * D), k(B * N * KH * D), v(B * N * KH * D);
  for (std::size_t i = 0; i < q.size(); ++i) q[i] = value(i, 0.37);
  for (std::size_t i = 0; i < k.size(); ++i) k[i] = value(i, 0.53);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = value(i, 0.71);
  // Sequence 0: two padding slots (position 0, valid 0), then tokens at positions 0..5.
  std::vector<std::int64_t> pos = {0, 0, 0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5, 6, 7};
  std::vector<std::uint8_t> valid = {0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};

  posenc::RopeParams rp;
  rp.head_dim = D;
  const auto freqs = posenc::compute_rope_frequencies(rp);
  posenc::AttentionParams params;  // causal, 1/sqrt(8)

  // One full forward over all N slots.
  std::vector<float> full(q.size());
  posenc::AttentionMetadata meta;
  meta.query_positions = posenc::PositionIdsView(pos.data(), B, N);
  meta.key_positions = posenc::PositionIdsView(pos.data(), B, N);
  meta.key_mask = posenc::ConstTensorView<std::uint8_t, 2>(valid.data(), B, N);
  posenc::attention_with_rope<float>(posenc::ConstTensorView<float, 4>(q.data(), B, N, H, D),
                                     posenc::ConstTensorView<float, 4>(k.data(), B, N, KH, D),
                                     posenc::ConstTensorView<float, 4>(v.data(), B, N, KH, D),
                                     posenc::TensorView<float, 4>(full.data(), B, N, H, D), freqs,
                                     posenc::RopeLayout::kHalfSplit, params, meta);

  // The same through the cache: slots [s0, s0 + len) per step.
  posenc::KvCache<float> cache(B, N, KH, D);
  cache.set_rope(freqs, posenc::RopeLayout::kHalfSplit);
  double max_diff = 0.0;
  auto step = [&](Eigen::Index s0, Eigen::Index len) {
    std::vector<float> qs, ks, vs, out(static_cast<std::size_t>(B * len * H * D));
    std::vector<std::int64_t> ps;
    std::vector<std::uint8_t> ms;
    for (Eigen::Index b = 0; b < B; ++b) {
      for (Eigen::Index s = s0; s < s0 + len; ++s) {
        const auto slot = static_cast<std::size_t>(b * N + s);
        qs.insert(qs.end(), q.begin() + static_cast<std::ptrdiff_t>(slot * H * D), q.begin() + static_cast<std::ptrdiff_t>((slot + 1) * H * D));
        ks.insert(ks.end(), k.begin() + static_cast<std::ptrdiff_t>(slot * KH * D), k.begin() + static_cast<std::ptrdiff_t>((slot + 1) * KH * D));
        vs.insert(vs.end(), v.begin() + static_cast<std::ptrdiff_t>(slot * KH * D), v.begin() + static_cast<std::ptrdiff_t>((slot + 1) * KH * D));
        ps.push_back(pos[slot]);
        ms.push_back(valid[slot]);
      }
    }
    cache.append(posenc::ConstTensorView<float, 4>(ks.data(), B, len, KH, D),
                 posenc::ConstTensorView<float, 4>(vs.data(), B, len, KH, D),
                 posenc::PositionIdsView(ps.data(), B, len),
                 posenc::ConstTensorView<std::uint8_t, 2>(ms.data(), B, len));
    cache.attend(posenc::ConstTensorView<float, 4>(qs.data(), B, len, H, D),
                 posenc::TensorView<float, 4>(out.data(), B, len, H, D), params);
    for (Eigen::Index b = 0; b < B; ++b)
      for (Eigen::Index s = 0; s < len; ++s)
        for (Eigen::Index c = 0; c < H * D; ++c) {
          const double a = out[static_cast<std::size_t>((b * len + s) * H * D + c)];
          const double f = full[static_cast<std::size_t>((b * N + s0 + s) * H * D + c)];
          max_diff = std::max(max_diff, std::abs(a - f));
        }
    std::printf("step slots [%ld, %ld): cache holds %ld tokens\n", static_cast<long>(s0),
                static_cast<long>(s0 + len), static_cast<long>(cache.size()));
  };
  step(0, prefill);
  for (Eigen::Index t = prefill; t < N; ++t) step(t, 1);
  std::printf("max |cache - full forward| = %.2e (float rounding only)\n", max_diff);
  bool padding_zero = true;
  for (Eigen::Index c = 0; c < 2 * H * D; ++c) {
    padding_zero = padding_zero && full[static_cast<std::size_t>(c)] == 0.0f;
  }
  std::printf("padding query rows of sequence 0 (slots 0, 1) are all zeros: %s\n",
              padding_zero ? "yes" : "no");
  bool threw = false;
  try {
    cache.append(posenc::ConstTensorView<float, 4>(k.data(), B, 1, KH, D),
                 posenc::ConstTensorView<float, 4>(v.data(), B, 1, KH, D),
                 posenc::PositionIdsView(pos.data(), B, 1));
  } catch (const std::out_of_range& e) {
    threw = true;
    std::printf("full cache (std::out_of_range): %s\n", e.what());
  }
  std::printf("cache still holds %ld tokens\n", static_cast<long>(cache.size()));
  return max_diff < 1e-5 && padding_zero && threw ? 0 : 1;
}
