#pragma once
// What the fuzz targets share: the input as a stream of choices (every target but
// fuzz_attention.cpp), and for the KV cache targets (fuzz_kv_cache.cpp, fuzz_paged_kv_cache.cpp)
// the tensor values, storage tolerances, RoPE in long double, the random plans and attention
// parameters, and one query row of attention checked in long double against the definitions in
// posenc/attention_types.hpp.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <optional>
#include <posenc/attention_types.hpp>
#include <posenc/float8.hpp>
#include <posenc/rope_frequencies.hpp>
#include <posenc/rope_params.hpp>
#include <string>
#include <type_traits>
#include <vector>

#include "../support/rng.hpp"

namespace posenc_fuzz {

using ld = long double;
using Index = Eigen::Index;

/// The fuzz input as a stream of small choices; 0 once it runs out.
class Choices {
 public:
  Choices(const std::uint8_t* data, std::size_t size) : p_(data), n_(size) {}
  std::uint8_t byte() {
    if (n_ == 0) return 0;
    --n_;
    return *p_++;
  }
  /// An integer in [lo, hi].
  std::int64_t in(std::int64_t lo, std::int64_t hi) {
    const std::uint64_t span = static_cast<std::uint64_t>(hi - lo) + 1;
    std::uint64_t x = byte();
    if (span > 256) x = (x << 8) | byte();
    return lo + static_cast<std::int64_t>(x % span);
  }
  bool chance(int percent) { return in(0, 99) < percent; }
  bool empty() const { return n_ == 0; }

 private:
  const std::uint8_t* p_;
  std::size_t n_;
};

/// FP8 storage scales (vLLM's k_scale / v_scale): per tensor, or with per_head_percent chance
/// per kv head; each 2^e (1 + m / 4), e in [min_exp, 2]. A latent cache's values are its keys'
/// leading elements, so they take the keys' scales.
inline posenc::KvScales random_kv_scales(Choices& in, Index kv_heads, bool latent,
                                         int per_head_percent, int min_exp) {
  const auto one = [&] {
    return std::ldexp(1.0 + 0.25 * static_cast<double>(in.in(0, 3)),
                      static_cast<int>(in.in(min_exp, 2)));
  };
  if (!in.chance(per_head_percent)) {
    const double k = one();
    return posenc::KvScales(k, latent ? k : one());
  }
  std::vector<double> kh, vh;
  for (Index g = 0; g < kv_heads; ++g) kh.push_back(one());
  for (const double k : kh) vh.push_back(latent ? k : one());
  return posenc::KvScales::per_head(kh, vh);
}

/// The tensor values (splitmix64, as the unit tests draw theirs).
using Values = posenc_test::SplitMix64;
using posenc_test::between;

/// What the failing operation was doing, printed with the mismatch.
inline std::string g_context;

[[noreturn]] inline void fail(const std::string& what) {
  std::fprintf(stderr, "fuzz: %s\n  context: %s\n", what.c_str(), g_context.c_str());
  std::fflush(stderr);
  __builtin_trap();
}

template <typename T>
ld to_ld(T x) {
  return static_cast<ld>(static_cast<double>(static_cast<float>(x)));
}
template <>
inline ld to_ld<double>(double x) {
  return static_cast<ld>(x);
}

template <typename T>
constexpr const char* type_name() {
  if constexpr (std::is_same_v<T, float>) return "float";
  if constexpr (std::is_same_v<T, double>) return "double";
  if constexpr (std::is_same_v<T, Eigen::half>) return "half";
  if constexpr (std::is_same_v<T, Eigen::bfloat16>) return "bfloat16";
  if constexpr (std::is_same_v<T, posenc::float8_e4m3>) return "e4m3";
  if constexpr (std::is_same_v<T, posenc::float8_e5m2>) return "e5m2";
  return "?";
}

/// Relative rounding of one store into T (round to nearest: half an ulp, doubled for slack), and
/// the absolute step below its normal range.
template <typename T>
constexpr ld rel_eps() {
  if constexpr (std::is_same_v<T, double>) return 0x1.0p-52L;
  if constexpr (std::is_same_v<T, float>) return 0x1.0p-23L;
  if constexpr (std::is_same_v<T, Eigen::half>) return 0x1.0p-10L;
  if constexpr (std::is_same_v<T, Eigen::bfloat16>) return 0x1.0p-7L;
  if constexpr (std::is_same_v<T, posenc::float8_e4m3>) return 0x1.0p-3L;
  return 0x1.0p-2L;  // e5m2
}
template <typename T>
constexpr ld abs_eps() {
  if constexpr (std::is_same_v<T, Eigen::half>) return 0x1.0p-24L;
  if constexpr (std::is_same_v<T, posenc::float8_e4m3>) return 0x1.0p-9L;
  if constexpr (std::is_same_v<T, posenc::float8_e5m2>) return 0x1.0p-16L;
  return 0.0L;
}

/// R(pos) on every pair of the plan's slice of each kv head's row (RoFormer eq. 13-14): interleaved
/// pairs (2j, 2j + 1), half-split pairs (j, j + r / 2), times `factor`. The angle is pos * inv_freq
/// formed in double, as posenc (rope.hpp) and HF (in float) define it; its cos and sin in long
/// double.
inline void rotate_ld(std::vector<ld>& row, Index kv_heads, Index d, ld pos,
                      const posenc::RopeFrequencies& f, posenc::RopeLayout layout, ld factor) {
  const Index half = f.rotary_dim / 2;
  for (Index g = 0; g < kv_heads; ++g) {
    const Index base = g * d + f.rotary_offset;
    for (Index j = 0; j < half; ++j) {
      const bool inter = layout == posenc::RopeLayout::kInterleaved;
      const auto i0 = static_cast<std::size_t>(base + (inter ? 2 * j : j));
      const auto i1 = static_cast<std::size_t>(base + (inter ? 2 * j + 1 : j + half));
      const ld angle = static_cast<double>(pos) * f.inv_freq[static_cast<std::size_t>(j)];
      const ld c = std::cos(angle), s = std::sin(angle);
      const ld a = row[i0], b = row[i1];
      row[i0] = (a * c - b * s) * factor;
      row[i1] = (a * s + b * c) * factor;
    }
  }
}

struct Plan {
  posenc::RopeFrequencies freqs;
  posenc::RopeLayout layout = posenc::RopeLayout::kHalfSplit;
};

template <typename T>
constexpr ld compute_eps() {
  return std::is_same_v<posenc::detail::compute_t<T>, double> ? 2e-12L : 4e-7L;
}

/// A random plan for rows of head_dim d: any even slice (the latent rows' k_pe after v_head_dim dv,
/// mostly), a few bases, scaled frequencies, attention factors and softmax multipliers; none when d
/// < 2.
inline std::optional<Plan> make_plan(Choices& in, Index d, Index dv, bool latent) {
  Plan p;
  const Index pairs_max = d / 2;
  if (pairs_max < 1) return std::nullopt;
  const Index pairs = in.chance(50) ? pairs_max : in.in(1, pairs_max);
  p.freqs.rotary_dim = 2 * pairs;
  p.freqs.head_dim = d;
  p.freqs.rotary_offset = in.in(0, d - 2 * pairs);
  if (latent && in.chance(70) && d - dv >= 2) {
    p.freqs.rotary_dim = ((d - dv) / 2) * 2;
    p.freqs.rotary_offset = dv;
  }
  const double theta = in.chance(50) ? 10000.0 : std::ldexp(1.0, static_cast<int>(in.in(1, 20)));
  const Index r = p.freqs.rotary_dim;
  for (Index j = 0; j < r / 2; ++j) {
    // w <= 1: the tolerances on angles below assume it.
    const double w = std::pow(theta, -2.0 * static_cast<double>(j) / static_cast<double>(r));
    p.freqs.inv_freq.push_back(w / (in.chance(80) ? 1.0 : 1.0 + static_cast<double>(in.in(1, 40))));
  }
  p.freqs.attention_factor = in.chance(60) ? 1.0 : 0.75 + 0.125 * static_cast<double>(in.in(0, 6));
  p.freqs.softmax_scale_multiplier =
      in.chance(70) ? 1.0 : 0.5 + 0.25 * static_cast<double>(in.in(0, 6));
  p.layout = in.chance(50) ? posenc::RopeLayout::kHalfSplit : posenc::RopeLayout::kInterleaved;
  return p;
}

/// Random AttentionParams for a cache: cache_window W > 0 (a rolling cache, a sliding-window pool)
/// forces sliding_window into [1, W]; a latent cache needs a scale.
inline posenc::AttentionParams make_params(Choices& in, Values& val, Index heads, bool tree,
                                           bool latent, std::int64_t cache_window,
                                           Index max_window) {
  posenc::AttentionParams p;
  if (!tree && in.chance(8)) p.mask = posenc::MaskMode::kBidirectional;
  if (latent || in.chance(25)) p.scale = 0.05 + 0.05 * static_cast<double>(in.in(0, 20));
  if (in.chance(25)) {
    for (Index h = 0; h < heads; ++h) {
      p.alibi_slopes.push_back(std::ldexp(1.0, -static_cast<int>(in.in(0, 8))));
    }
  }
  if (in.chance(15)) p.logit_softcap = 0.5 + static_cast<double>(in.in(0, 30));
  if (in.chance(15)) {
    for (Index h = 0; h < heads; ++h) p.sink_logits.push_back(between(val, -3.0, 3.0));
  }
  if (cache_window > 0) {
    p.sliding_window = in.in(1, cache_window);
  } else if (in.chance(25)) {
    p.sliding_window = in.in(1, max_window);
  }
  if (in.chance(12)) p.attention_chunk_size = in.in(1, 40);
  if (in.chance(10)) {
    posenc::AttentionTemperature t;
    t.form = static_cast<posenc::TemperatureForm>(in.in(0, 2));
    t.floor_scale = static_cast<double>(in.in(1, 64));
    t.attn_scale = 0.05 * static_cast<double>(in.in(0, 10));
    t.temperature_len = in.in(2, 200);
    p.query_temperature = t;
  }
  if (in.chance(20)) p.num_threads = 2;
  return p;
}

/// t(pos) from attention_types.hpp's definitions.
inline ld temperature(const posenc::AttentionTemperature& t, std::int64_t pos) {
  if (t.form == posenc::TemperatureForm::kXai) {
    return pos > t.temperature_len
               ? std::log2(static_cast<ld>(pos)) / std::log2(static_cast<ld>(t.temperature_len))
               : 1.0L;
  }
  const ld at = static_cast<ld>(pos) + (t.form == posenc::TemperatureForm::kLlama4 ? 1.0L : 0.0L);
  return 1.0L + static_cast<ld>(t.attn_scale) *
                    std::log1p(std::floor(at / static_cast<ld>(t.floor_scale)));
}

/// The scale of query row at position qpos: params.scale, or the plan's multiplier / sqrt(d); times
/// the query temperature.
inline ld row_scale(const posenc::AttentionParams& params, const std::optional<Plan>& plan, Index d,
                    std::int64_t qpos) {
  ld scale = params.scale ? static_cast<ld>(*params.scale)
                          : (plan ? static_cast<ld>(plan->freqs.softmax_scale_multiplier) : 1.0L) /
                                std::sqrt(static_cast<ld>(d));
  if (params.query_temperature) scale *= temperature(*params.query_temperature, qpos);
  return scale;
}

inline std::string describe(const posenc::AttentionParams& p, const std::optional<Plan>& plan) {
  std::string d = p.mask == posenc::MaskMode::kCausal ? "causal" : "bidirectional";
  if (p.scale) d += " scale " + std::to_string(*p.scale);
  if (!p.alibi_slopes.empty()) d += " alibi";
  if (p.logit_softcap > 0) d += " softcap " + std::to_string(p.logit_softcap);
  if (!p.sink_logits.empty()) d += " sinks";
  if (p.sliding_window > 0) d += " window " + std::to_string(p.sliding_window);
  if (p.attention_chunk_size > 0) d += " chunk " + std::to_string(p.attention_chunk_size);
  if (p.query_temperature) {
    d += " temperature form " + std::to_string(static_cast<int>(p.query_temperature->form));
  }
  if (p.num_threads > 1) d += " threads 2";
  if (plan) {
    d += std::string(" rope ") +
         (plan->layout == posenc::RopeLayout::kInterleaved ? "interleaved" : "half-split") + " r " +
         std::to_string(plan->freqs.rotary_dim) + " offset " +
         std::to_string(plan->freqs.rotary_offset) + " af " +
         std::to_string(plan->freqs.attention_factor) + " mult " +
         std::to_string(plan->freqs.softmax_scale_multiplier);
  }
  return d;
}

/// A key a query row sees: its position and its rows as attend reads them (scales applied).
struct SeenKey {
  std::int64_t pos;
  std::vector<ld> k, v;
};

/// One query row: out_row (dv values of TQ) and lse (or null) against softmax(scale q.k,
/// soft-capped, + ALiBi; + the sink in the denominator) V over `seen`, in long double; q already
/// rotated. A row that sees no key gives zeros (lse -inf, or the sink).
template <typename TQ, typename L>
void check_attention_row(const std::vector<ld>& q, ld scale, std::int64_t qpos,
                         const std::vector<SeenKey>& seen, const posenc::AttentionParams& params,
                         Index h, const TQ* out_row, Index dv, const L* lse,
                         const std::string& where) {
  const bool causal = params.mask == posenc::MaskMode::kCausal;
  std::vector<ld> logit;
  for (const SeenKey& key : seen) {
    ld dot = 0.0L;
    for (std::size_t c = 0; c < q.size(); ++c) dot += q[c] * key.k[c];
    ld sc = scale * dot;
    if (params.logit_softcap > 0.0) {
      const ld cap = static_cast<ld>(params.logit_softcap);
      sc = cap * std::tanh(sc / cap);
    }
    if (!params.alibi_slopes.empty()) {
      const ld dist = static_cast<ld>(qpos) - static_cast<ld>(key.pos);
      sc -= static_cast<ld>(params.alibi_slopes[static_cast<std::size_t>(h)]) *
            (causal ? dist : std::fabs(dist));
    }
    logit.push_back(sc);
  }
  const bool sink = !params.sink_logits.empty();
  const ld sink_logit =
      sink ? static_cast<ld>(params.sink_logits[static_cast<std::size_t>(h)]) : 0.0L;
  ld top = sink ? sink_logit : -std::numeric_limits<ld>::infinity();
  for (ld x : logit) top = std::max(top, x);
  ld sum = sink ? std::exp(sink_logit - top) : 0.0L;
  for (ld x : logit) sum += std::exp(x - top);
  // The kernel holds each logit in compute_t<TQ>: its rounding moves the weights by about eps
  // |logit| (large ALiBi distances, a padding query far from its keys).
  const ld eps = std::is_same_v<TQ, double> ? 0x1.0p-52L : 0x1.0p-24L;
  ld lmax = 0.0L;
  for (ld x : logit) lmax = std::max(lmax, std::fabs(x));
  const ld logit_tol = 8.0L * eps * lmax;
  constexpr bool wide = std::is_same_v<TQ, float> || std::is_same_v<TQ, double>;
  for (Index c = 0; c < dv; ++c) {
    ld acc = 0.0L, vmax = 0.0L;
    for (std::size_t t = 0; t < seen.size(); ++t) {
      const ld vv = seen[t].v[static_cast<std::size_t>(c)];
      vmax = std::max(vmax, std::fabs(vv));
      acc += std::exp(logit[t] - top) / sum * vv;
    }
    const ld got = to_ld(out_row[c]);
    const ld tol =
        (wide ? 0.0L : rel_eps<TQ>() * std::fabs(acc)) + (2e-5L + logit_tol) * (1.0L + vmax);
    if (!(std::fabs(got - acc) <= tol)) {
      char buf[240];
      std::snprintf(buf, sizeof buf,
                    "%s, %s q: out[h %ld, c %ld] = %.9Lg, expected %.9Lg "
                    "(keys seen %zu)",
                    where.c_str(), type_name<TQ>(), static_cast<long>(h), static_cast<long>(c), got,
                    acc, seen.size());
      fail(buf);
    }
  }
  if (lse) {
    const ld want = seen.empty() ? (sink ? sink_logit : -std::numeric_limits<ld>::infinity())
                                 : top + std::log(sum);
    const ld got = static_cast<ld>(*lse);
    const bool ok = std::isinf(want)
                        ? got == want
                        : std::fabs(got - want) <= 2e-5L * (1.0L + std::fabs(want)) + logit_tol;
    if (!ok) {
      char buf[200];
      std::snprintf(buf, sizeof buf, "%s: lse[h %ld] = %.9Lg, expected %.9Lg", where.c_str(),
                    static_cast<long>(h), got, want);
      fail(buf);
    }
  }
}

}  // namespace posenc_fuzz
