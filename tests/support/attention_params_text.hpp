#pragma once
// One line naming every option an AttentionParams sets, for the CAPTURE of randomized tests.

#include <posenc/attention_types.hpp>

#include <sstream>
#include <string>

namespace posenc_test {

inline std::string describe(const posenc::AttentionParams& p) {
  std::ostringstream os;
  os.precision(4);
  os << (p.mask == posenc::MaskMode::kCausal ? "causal" : "bidirectional");
  if (p.scale) os << " scale=" << *p.scale;
  if (!p.alibi_slopes.empty()) {
    os << " alibi=[";
    for (const double s : p.alibi_slopes) os << s << ' ';
    os << ']';
  }
  if (p.logit_softcap > 0.0) os << " softcap=" << p.logit_softcap;
  if (!p.sink_logits.empty()) {
    os << " sinks=[";
    for (const double s : p.sink_logits) os << s << ' ';
    os << ']';
  }
  if (p.sliding_window > 0) os << " window=" << p.sliding_window;
  if (p.attention_chunk_size > 0) os << " chunk=" << p.attention_chunk_size;
  if (p.query_temperature) {
    const auto& t = *p.query_temperature;
    os << " temperature=" << posenc::to_string(t.form) << "(floor_scale=" << t.floor_scale
       << " attn_scale=" << t.attn_scale << " len=" << t.temperature_len << ")";
  }
  if (p.relative_bias) {
    const auto& r = *p.relative_bias;
    os << " relative_bias(buckets=" << r.num_buckets << " max_distance=" << r.max_distance
       << (r.bidirectional ? " bidirectional)" : " unidirectional)");
  }
  os << " threads=" << p.num_threads;
  return os.str();
}

}  // namespace posenc_test
