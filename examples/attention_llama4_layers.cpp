// Llama-4's two kinds of attention layer by hand (iRoPE):
//
//   RoPE layers: chunked attention. Query at position p sees key at position q only if
//                q <= p and floor(q / C) == floor(p / C) (attention_chunk_size C = 8192 in
//                Scout / Maverick; 3 here). Chunks are cut on positions, so left padding
//                does not move them (HF's chunked_overlay subtracts the padding; its legacy
//                version cut on slots and did).
//   NoPE layers: full causal attention with no RoPE; each query is multiplied by
//                t(p) = 1 + 0.1 ln(1 + floor((p + 1) / 8192))   (attention temperature tuning;
//                AttentionParams::query_temperature, or apply_attention_temperature_inplace).
//
// As in attention_sliding_window: with every key 0 the scores are 0, so a query's weights are
// uniform over the keys it may see, and with V rows e_j the output row is the weights.
//
// expect: chunk 3, query 2: 0.333 0.333 0.333 0.000 0.000 0.000
// expect: chunk 3, query 3: 0.000 0.000 0.000 1.000 0.000 0.000
// expect: chunk 3, query 5: 0.000 0.000 0.000 0.333 0.333 0.333
// expect: 2 padding slots, last token (position 3): 0.000 0.000 0.000 0.000 0.000 1.000
// expect: rolling cache of W = 3 slots, token 4: 0.000 0.000 0.000 0.500 0.500 0.000
// expect: t(8190) = 1.000000, t(8191) = 1.069315, t(16383) = 1.109861
// expect: NoPE query, scores [1, 0], at position 8190: 0.7311 0.2689; at 8191: 0.7445 0.2555

#include <posenc/attention.hpp>
#include <posenc/attention_temperature.hpp>
#include <posenc/kv_cache.hpp>

#include <cstdio>
#include <vector>

namespace {

void print_row(const char* what, const float* row, Eigen::Index n) {
  std::printf("%s:", what);
  for (Eigen::Index j = 0; j < n; ++j) std::printf(" %.3f", static_cast<double>(row[j]));
  std::printf("\n");
}

}  // namespace

int main() {
  constexpr Eigen::Index n = 6;
  std::vector<float> q(n * n, 0.0f), k(n * n, 0.0f), v(n * n, 0.0f), out(n * n);
  for (Eigen::Index j = 0; j < n; ++j) v[static_cast<std::size_t>(j * n + j)] = 1.0f;
  posenc::AttentionParams chunked;
  chunked.attention_chunk_size = 3;

  // Prefill of 6 tokens at positions 0-5: chunks {0, 1, 2} and {3, 4, 5}.
  posenc::attention<float>(posenc::ConstTensorView<float, 4>(q.data(), 1, n, 1, n),
                           posenc::ConstTensorView<float, 4>(k.data(), 1, n, 1, n),
                           posenc::ConstTensorView<float, 4>(v.data(), 1, n, 1, n),
                           posenc::TensorView<float, 4>(out.data(), 1, n, 1, n), chunked);
  print_row("chunk 3, query 2", out.data() + 2 * n, n);
  print_row("chunk 3, query 3", out.data() + 3 * n, n);
  print_row("chunk 3, query 5", out.data() + 5 * n, n);

  // The same 6 slots holding 2 padding slots, then tokens at positions 0-3: the last token
  // (slot 5, position 3) opens chunk 1 and sees only itself. Cut on slots it would see 3-5.
  const std::vector<std::int64_t> positions{0, 0, 0, 1, 2, 3};
  const std::vector<std::uint8_t> valid{0, 0, 1, 1, 1, 1};
  posenc::AttentionMetadata padded;
  padded.query_positions.emplace(positions.data(), 1, n);
  padded.key_positions.emplace(positions.data(), 1, n);
  padded.key_mask.emplace(valid.data(), 1, n);
  posenc::attention<float>(posenc::ConstTensorView<float, 4>(q.data(), 1, n, 1, n),
                           posenc::ConstTensorView<float, 4>(k.data(), 1, n, 1, n),
                           posenc::ConstTensorView<float, 4>(v.data(), 1, n, 1, n),
                           posenc::TensorView<float, 4>(out.data(), 1, n, 1, n), chunked, padded);
  print_row("2 padding slots, last token (position 3)", out.data() + 5 * n, n);

  // Decode through a rolling cache of W = C = 3 slots (HF keeps attention_chunk_size slots for
  // these layers): a chunk never needs more than the C - 1 tokens before its query. Token 4
  // sees tokens 3 and 4; its row is indexed by token (V rows e_token).
  posenc::KvCache<float> rolling(1, 3, 1, n, 3);
  std::vector<float> one(n);
  for (Eigen::Index t = 0; t <= 4; ++t) {
    const std::int64_t position = t;
    rolling.append(posenc::ConstTensorView<float, 4>(k.data() + t * n, 1, 1, 1, n),
                   posenc::ConstTensorView<float, 4>(v.data() + t * n, 1, 1, 1, n),
                   posenc::PositionIdsView(&position, 1, 1));
    rolling.attend(posenc::ConstTensorView<float, 4>(q.data(), 1, 1, 1, n),
                   posenc::TensorView<float, 4>(one.data(), 1, 1, 1, n), chunked);
  }
  print_row("rolling cache of W = 3 slots, token 4", one.data(), n);

  // Temperature: 1 below position 8191, then 1 + 0.1 ln 2 = 1.0693147, 1 + 0.1 ln 3 = 1.1098612.
  std::printf("t(8190) = %.6f, t(8191) = %.6f, t(16383) = %.6f\n",
              posenc::attention_temperature(8190), posenc::attention_temperature(8191),
              posenc::attention_temperature(16383));

  // A NoPE layer with AttentionParams::query_temperature: q = e0 against k = [e0, 0] gives
  // scores [1, 0]; at 8191 they become [t, 0], t = 1.0693147, so the weights move from
  // 1 / (1 + e^-1) = 0.7311 to 1 / (1 + e^-t) = 0.7445 (V rows e_j: the output is the weights).
  std::vector<float> q2 = {1, 0}, k2 = {1, 0, 0, 0}, v2 = {1, 0, 0, 1}, o2(2);
  posenc::AttentionParams nope;
  nope.scale = 1.0;
  nope.query_temperature = posenc::AttentionTemperature{};  // Llama-4: 8192, 0.1
  std::printf("NoPE query, scores [1, 0],");
  for (const std::int64_t p : {std::int64_t{8190}, std::int64_t{8191}}) {
    const std::int64_t key_positions[2] = {p - 1, p};
    posenc::AttentionMetadata at;
    at.query_positions.emplace(&p, 1, 1);
    at.key_positions.emplace(key_positions, 1, 2);
    posenc::attention<float>(posenc::ConstTensorView<float, 4>(q2.data(), 1, 1, 1, 2),
                             posenc::ConstTensorView<float, 4>(k2.data(), 1, 2, 1, 2),
                             posenc::ConstTensorView<float, 4>(v2.data(), 1, 2, 1, 2),
                             posenc::TensorView<float, 4>(o2.data(), 1, 1, 1, 2), nope, at);
    std::printf(p == 8190 ? " at position %ld: %.4f %.4f" : "; at %ld: %.4f %.4f",
                static_cast<long>(p), static_cast<double>(o2[0]), static_cast<double>(o2[1]));
  }
  std::printf("\n");
  return 0;
}
