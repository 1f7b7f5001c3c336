#pragma once
// The attention parameter sets the packed / paged batch tests sweep (test_attention_varlen.cpp,
// test_attention_paged.cpp).

#include <posenc/alibi.hpp>
#include <posenc/attention_types.hpp>

namespace posenc_test {

/// 0 plain causal, 1 ALiBi, 2 window 50 + a sink logit per head, 3 bidirectional, 4 soft cap 5,
/// 5 chunks of 40 (Llama-4) + ALiBi.
inline posenc::AttentionParams attention_variant(int variant, Eigen::Index heads, int threads) {
  posenc::AttentionParams params;
  params.num_threads = threads;
  if (variant == 1) params.alibi_slopes = posenc::alibi_slopes(heads);
  if (variant == 2) {
    params.sliding_window = 50;
    for (Eigen::Index h = 0; h < heads; ++h) params.sink_logits.push_back(0.5 * double(h) - 1.0);
  }
  if (variant == 3) params.mask = posenc::MaskMode::kBidirectional;
  if (variant == 4) params.logit_softcap = 5.0;
  if (variant == 5) {
    params.attention_chunk_size = 40;
    params.alibi_slopes = posenc::alibi_slopes(heads);
  }
  return params;
}

}  // namespace posenc_test
