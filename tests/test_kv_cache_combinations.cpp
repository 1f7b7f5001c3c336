// KV-cache decode paths with their options combined: a seeded randomized differential sweep in
// the spirit of test_attention_combinations.cpp. Each scenario draws a cache (KvCache or
// PagedKvCache), a storage type (float, bfloat16, half, FP8 E4M3 or E5M2 with per-tensor or
// per-head scales), GQA, a head size, values of the keys' width or narrower / wider ones, or an
// MLA latent cache (one row per token, [c_kv | k_pe], whose first v_head_dim elements are the
// value and whose RoPE turns only the trailing k_pe through rotary_offset = v_head_dim), a
// positional scheme (RoPE interleaved / half-split, possibly partial and scaled, ALiBi or
// none), a rolling window or a chunked rolling cache, the attention options
// (window, chunk, soft cap, sinks, temperature, scale, bidirectional, threads), left padding,
// and then a random sequence of operations: prefill, chunks of 1-5 tokens, decode steps, erase,
// llama.cpp's context shift, shift_positions, update_rope with another plan, a draft tree
// verified in one pass whose rejected tokens are then erased, fork and release (paged).
//
// The test keeps its own model of what the cache should logically hold (the raw keys, values,
// positions and validity of every token, which of them a rolling cache still holds, how often a
// stored key was rounded) and after each attend compares:
//  - the stored positions / validity / keys / values with the model (keys: the raw key turned to
//    its current position by the current plan in long double, posenc::reference::rope_vector,
//    within the roundings it went through; values exact, FP8 within half a code; a latent
//    cache's values read from its key rows);
//  - the output with posenc::reference::attention (double, materialised) over the slots the
//    cache should hold, with explicit positions, key mask and tree mask;
//  - for a rolling cache or a sliding-window pool that has only appended (and erased rejected
//    draft tokens), the output with the reference over the WHOLE history: the documented claim
//    that dropping slots loses nothing any query can see.
// 16-bit and FP8 caches: the reference reads the cache's own (verified) stored keys and values,
// so the comparison keeps a float-sized tolerance (see kOutputTol).

#include <catch2/catch.hpp>

#include <posenc/alibi.hpp>
#include <posenc/attention_paged.hpp>
#include <posenc/float8.hpp>
#include <posenc/kv_cache.hpp>
#include <posenc/paged_kv_cache.hpp>
#include <posenc/reference/attention.hpp>
#include <posenc/reference/rope.hpp>
#include <posenc/rope_frequencies.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "support/attention_params_text.hpp"
#include "support/float8_spec.hpp"
#include "support/rng.hpp"

namespace {

namespace fp8 = posenc_test::fp8;
using posenc::AttentionMetadata;
using posenc::AttentionParams;
using posenc::ConstTensorView;
using posenc::KvScales;
using posenc::MaskMode;
using posenc::RopeLayout;
using posenc::TemperatureForm;
using posenc::TensorView;
using posenc_test::between;
using posenc_test::describe;
using posenc_test::coin;
using posenc_test::pick;
using posenc_test::SplitMix64;
using Index = Eigen::Index;
using E4M3 = posenc::float8_e4m3;
using E5M2 = posenc::float8_e5m2;
template <typename T>
constexpr bool kIsFp8 = posenc::detail::is_float8_v<T>;

// Outputs are convex combinations of values in [-1, 1]. The kernel works in float: logits of at
// most scale * sum |q k| <= ~15 here carry ~1e-6 absolute error, queries and keys turned in
// float differ from long double by ~1e-7 relative, so outputs agree to ~3e-7 in this sweep and
// to 2.3e-6 at worst over 6500 scenarios (the failure message prints the ratio); a single
// wrong key (weight >= ~1e-3 here) or position moves outputs by far more than 1e-5.
constexpr double kOutputTol = 1e-5;

// ---- random draws ------------------------------------------------------------------------------

Index irange(SplitMix64& rng, Index lo, Index hi) {
  return static_cast<Index>(rng.integer(lo, hi));
}
std::size_t at(Index i) { return static_cast<std::size_t>(i); }
std::vector<float> random_floats(SplitMix64& rng, Index n) {
  std::vector<float> x(at(n));
  for (float& e : x) e = static_cast<float>(rng.uniform());
  return x;
}
// x[first, first + n) as a new vector: built whole, because GCC 12 at -O3 for AArch64 warns
// (-Wnonnull) on the memmove into an empty vector's null buffer inside assign().
std::vector<float> slice(const std::vector<float>& x, std::size_t first, std::size_t n) {
  const auto begin = x.begin() + static_cast<std::ptrdiff_t>(first);
  return std::vector<float>(begin, begin + static_cast<std::ptrdiff_t>(n));
}

// ---- storage types -----------------------------------------------------------------------------

enum class Storage { kFloat, kBFloat16, kHalf, kFp8, kFp8E5M2 };
const char* name(Storage s) {
  switch (s) {
    case Storage::kFloat: return "float";
    case Storage::kBFloat16: return "bfloat16";
    case Storage::kHalf: return "half";
    case Storage::kFp8: return "fp8_e4m3";
    case Storage::kFp8E5M2: return "fp8_e5m2";
  }
  return "?";
}
bool is_fp8(Storage s) { return s == Storage::kFp8 || s == Storage::kFp8E5M2; }

/// Spacing of T's values: relative (ulp / |x| at most, normal range) and the subnormal step.
struct Spacing {
  double relative;
  double subnormal;
};
template <typename T>
constexpr Spacing spacing() {
  if constexpr (std::is_same_v<T, float>) return {0x1p-23, 0x1p-149};
  if constexpr (std::is_same_v<T, Eigen::bfloat16>) return {0x1p-7, 0x1p-133};
  if constexpr (std::is_same_v<T, Eigen::half>) return {0x1p-10, 0x1p-24};
  // E5M2: 2 mantissa bits, so a code's neighbour is up to 2^-2 |x| away in the normal range
  // (half a code: 2^-3 |x|, twice E4M3's); subnormals are multiples of 2^(1 - 15 - 2).
  if constexpr (std::is_same_v<T, E5M2>) return {0x1p-2, 0x1p-16};
  return {0x1p-3, 0x1p-9};  // E4M3
}

/// A stored element's value: FP8 from the OCP closed form (float8_spec.hpp) times its scale,
/// independent of posenc/float8.hpp.
template <typename T>
double decode(T x, double scale) {
  if constexpr (std::is_same_v<T, E4M3>) {
    return static_cast<double>(fp8::spec_value(fp8::kE4M3, x.bits)) * scale;
  } else if constexpr (std::is_same_v<T, E5M2>) {
    return static_cast<double>(fp8::spec_value(fp8::kE5M2, x.bits)) * scale;
  } else {
    (void)scale;
    return posenc::detail::to_double(x);
  }
}

// ---- positional schemes and RoPE plans ---------------------------------------------------------

enum class Scheme { kNone, kAlibi, kRopeInterleaved, kRopeHalfSplit };
const char* name(Scheme s) {
  switch (s) {
    case Scheme::kNone: return "none";
    case Scheme::kAlibi: return "alibi";
    case Scheme::kRopeInterleaved: return "rope-interleaved";
    case Scheme::kRopeHalfSplit: return "rope-half-split";
  }
  return "?";
}
bool is_rope(Scheme s) { return s == Scheme::kRopeInterleaved || s == Scheme::kRopeHalfSplit; }

/// A RoPE plan twice: posenc's (for the cache) and the long-double reference's (the oracle).
struct Plan {
  posenc::RopeFrequencies lib;
  posenc::reference::RopeFrequencies ref;
  RopeLayout layout = RopeLayout::kHalfSplit;
  Index offset = 0;  // first rotated element (the reference plan does not carry it)
  std::string text;
};

/// Same rotary slice for every plan of a scenario (update_rope requires it): partial or not.
/// latent_dv > 0: an MLA latent row's plan, turning only k_pe = [latent_dv, d).
Plan draw_plan(SplitMix64& rng, Index d, RopeLayout layout, bool partial, Index latent_dv = 0) {
  posenc::RopeParams p;
  p.head_dim = d;
  p.theta = pick(rng, {100.0, 10000.0, 500000.0});
  if (partial) p.partial_rotary_factor = 0.5;
  if (latent_dv > 0) {
    p.rotary_dim = d - latent_dv;
    p.rotary_offset = latent_dv;
  }
  std::ostringstream os;
  os << "theta=" << p.theta << (partial ? " partial=0.5" : "");
  if (latent_dv > 0) os << " rotary [" << latent_dv << ", " << d << ")";
  const Index kind = irange(rng, 0, 2);
  if (kind >= 1) {
    p.scaling.type = posenc::RopeScalingType::kLinear;
    p.scaling.factor = pick(rng, {2.0, 4.0});
    os << " linear=" << p.scaling.factor;
  }
  if (kind == 2) {
    // An attention factor != 1 is in the stored keys: shift_positions must not apply it again.
    p.scaling.attention_factor = 1.2;
    os << " attention_factor=1.2";
  }
  return {posenc::compute_rope_frequencies(p), posenc::reference::rope_frequencies(p), layout,
          latent_dv, os.str()};
}

/// The element a RoPE pair couples with c, or -1 when c is not rotated.
Index partner(const Plan* plan, Index c) {
  if (!plan) return -1;
  const Index rd = plan->ref.rotary_dim, o = plan->offset, j = c - o;
  if (j < 0 || j >= rd) return -1;
  if (plan->layout == RopeLayout::kInterleaved) return o + (j ^ 1);
  return o + (j < rd / 2 ? j + rd / 2 : j - rd / 2);
}

// ---- the model of one cached token -------------------------------------------------------------

struct Token {
  std::vector<float> k, v;  // as appended: [kv_heads * d], [kv_heads * v_head_dim]
  std::int64_t pos = 0;
  std::uint8_t valid = 1;
  int rounds = 1;  // roundings the stored key went through (append, each shift, each re-rotation)
  std::vector<long double> key;  // k turned to pos by the current plan (cached)
  bool stale = true;
};

const std::vector<long double>& logical_key(Token& t, const Plan* plan, Index kv_heads, Index d) {
  if (!t.stale) return t.key;
  t.key.assign(at(kv_heads * d), 0.0L);
  for (Index g = 0; g < kv_heads; ++g) {
    if (plan) {
      const auto y =
          posenc::reference::rope_vector(t.k.data() + g * d, d, t.pos, plan->ref.inv_freq,
                                         plan->ref.attention_factor, plan->offset, plan->layout);
      std::copy(y.begin(), y.end(), t.key.begin() + g * d);
    } else {
      for (Index c = 0; c < d; ++c) t.key[at(g * d + c)] = t.k[at(g * d + c)];
    }
  }
  t.stale = false;
  return t.key;
}

/// Mismatches of one attend; detail names the first few.
struct Report {
  int state = 0, keys = 0, values = 0, held = 0, history = 0, direct = 0;
  double worst = 0.0;  // max |out - reference| / kOutputTol
  std::string detail;
  int noted = 0;
  void note(const std::string& s) {
    if (noted++ < 8) detail += s + "\n";
  }
};

/// One attend's checks, failing with the scenario and its operation log; true when any failed.
bool report(const Report& r, const std::string& config, const std::string& log) {
  CAPTURE(config, log);
  INFO(r.detail << "largest |out - reference| / tolerance: " << r.worst);
  CHECK(r.state == 0);
  CHECK(r.keys == 0);
  CHECK(r.values == 0);
  CHECK(r.held == 0);
  CHECK(r.history == 0);
  CHECK(r.direct == 0);
  return r.state || r.keys || r.values || r.held || r.history || r.direct;
}

/// Row widths of a cache: keys d, values dv per kv head; a latent cache's values are the first
/// dv elements of its key rows (stride d), others' rows of their own (stride dv).
struct Widths {
  Index kv_heads = 1, d = 16, dv = 16;
  bool latent = false;
  Index v_stride() const { return latent ? d : dv; }
};

/// Checks one stored token (key row ks [kv_heads * d], value row vs [kv_heads * v_stride])
/// against the model and appends the rows the oracle uses to k_out / v_out: the model's own
/// (float storage) or the verified stored ones (16-bit, FP8: the reference then sees the same
/// rounded keys).
template <typename T>
void verify_token(const T* ks, const T* vs, Token& t, const Plan* plan, const Widths& w,
                  const KvScales& sc, const std::string& where, Report& r,
                  std::vector<double>& k_out, std::vector<double>& v_out) {
  constexpr auto sp = spacing<T>();
  const Index kv_heads = w.kv_heads, d = w.d;
  const auto& key = logical_key(t, plan, kv_heads, d);
  bool key_ok = true, value_ok = true;
  for (Index g = 0; g < kv_heads; ++g) {
    const double ksc = kIsFp8<T> ? sc.k_of(g) : 1.0;
    const double vsc = kIsFp8<T> ? sc.v_of(g) : 1.0;
    for (Index c = 0; c < d; ++c) {
      const auto e = at(g * d + c);
      const long double want = key[e];
      const Index other = partner(plan, c);
      // Each rounding errs by <= half a spacing per element; a turn keeps the pair's error norm,
      // so after n roundings <= n * sqrt(1/2) spacings of the pair's norm (+ float noise).
      const double norm = static_cast<double>(
          other < 0 ? std::fabs(want)
                    : std::hypot(want, key[at(g * d + other)]));
      const double tol = t.rounds * (0.71 * sp.relative + 4e-7) * norm +
                         0.05 * sp.relative * norm + t.rounds * sp.subnormal * ksc;
      const double got = decode(ks[e], ksc);
      if (!(std::fabs(got - static_cast<double>(want)) <= tol)) {
        key_ok = false;
        std::ostringstream os;
        os.precision(9);
        os << "key " << where << " g=" << g << " c=" << c << ": stored " << got << " want "
           << static_cast<double>(want) << " (tol " << tol << ", rounds " << t.rounds << ")";
        r.note(os.str());
      }
      k_out.push_back(std::is_same_v<T, float> ? static_cast<double>(want) : got);
    }
    for (Index c = 0; c < w.dv; ++c) {
      const auto e = at(g * w.dv + c);
      const double raw = t.v[e], vgot = decode(vs[at(g * w.v_stride() + c)], vsc);
      double vwant = raw, vtol = 0.0;
      if constexpr (kIsFp8<T>) {
        // Half a code of the format (spacing), relative to the value plus float noise of the
        // division by the scale, or half a subnormal step in scaled units.
        vtol = (0.5 * sp.relative + 1e-6) * std::fabs(raw) + 0.5 * sp.subnormal * vsc;
      } else {
        vwant = posenc::detail::to_double(posenc::detail::from_value<T>(t.v[e]));
      }
      if (!(std::fabs(vgot - vwant) <= vtol)) {
        value_ok = false;
        std::ostringstream os;
        os.precision(9);
        os << "value " << where << " g=" << g << " c=" << c << ": stored " << vgot << " want "
           << vwant;
        r.note(os.str());
      }
      v_out.push_back(std::is_same_v<T, float> ? raw : vgot);
    }
  }
  r.keys += !key_ok;
  r.values += !value_ok;
}

/// Rows of a token the cache no longer holds (a rolling cache's or a pool's dropped slots): the
/// model's own; the history oracle must mask them anyway.
void model_rows(Token& t, const Plan* plan, Index kv_heads, Index d, std::vector<double>& k_out,
                std::vector<double>& v_out) {
  const auto& key = logical_key(t, plan, kv_heads, d);
  for (const long double x : key) k_out.push_back(static_cast<double>(x));
  for (const float x : t.v) v_out.push_back(x);
}

/// q [batch, q_len, heads, d] turned to qpos by the plan in long double (or as is).
std::vector<double> turned_queries(const std::vector<float>& q, Index batch, Index q_len,
                                   Index heads, Index d, const std::vector<std::int64_t>& qpos,
                                   const Plan* plan) {
  std::vector<double> out(q.size());
  for (Index b = 0; b < batch; ++b) {
    for (Index i = 0; i < q_len; ++i) {
      for (Index h = 0; h < heads; ++h) {
        const Index row = ((b * q_len + i) * heads + h) * d;
        if (plan) {
          const auto y =
              posenc::reference::rope_vector(q.data() + row, d, qpos[at(b * q_len + i)],
                                             plan->ref.inv_freq, plan->ref.attention_factor,
                                             plan->offset, plan->layout);
          for (Index c = 0; c < d; ++c) out[at(row + c)] = static_cast<double>(y[at(c)]);
        } else {
          for (Index c = 0; c < d; ++c) out[at(row + c)] = q[at(row + c)];
        }
      }
    }
  }
  return out;
}

/// posenc::reference::attention in double over k_len keys per sequence (values of dv).
std::vector<double> reference_out(Index batch, Index q_len, Index k_len, Index heads,
                                  Index kv_heads, Index d, Index dv, const std::vector<double>& q,
                                  const std::vector<double>& k, const std::vector<double>& v,
                                  const std::vector<std::int64_t>& qpos,
                                  const std::vector<std::int64_t>& kpos,
                                  const std::vector<std::uint8_t>& kmask,
                                  const std::vector<std::uint8_t>& tree,
                                  const AttentionParams& params) {
  std::vector<double> out(at(batch * q_len * heads * dv), 0.0);
  AttentionMetadata meta;
  meta.query_positions = posenc::PositionIdsView(qpos.data(), batch, q_len);
  meta.key_positions = posenc::PositionIdsView(kpos.data(), batch, k_len);
  if (!kmask.empty()) meta.key_mask = ConstTensorView<std::uint8_t, 2>(kmask.data(), batch, k_len);
  if (!tree.empty()) {
    meta.tree_mask = ConstTensorView<std::uint8_t, 3>(tree.data(), batch, q_len, q_len);
  }
  AttentionParams p = params;
  p.num_threads = 1;
  posenc::reference::attention<double>(
      ConstTensorView<double, 4>(q.data(), batch, q_len, heads, d),
      ConstTensorView<double, 4>(k.data(), batch, k_len, kv_heads, d),
      ConstTensorView<double, 4>(v.data(), batch, k_len, kv_heads, dv),
      TensorView<double, 4>(out.data(), batch, q_len, heads, dv), p, meta);
  return out;
}

/// Counts the outputs off the oracle by more than kOutputTol.
int compare(const std::vector<float>& got, const std::vector<double>& want, const char* what,
            Index heads, Index d, Report& r) {
  int bad = 0;
  for (std::size_t e = 0; e < got.size(); ++e) {
    const double diff = std::fabs(static_cast<double>(got[e]) - want[e]);
    r.worst = std::max(r.worst, std::isnan(diff) ? 1e300 : diff / kOutputTol);
    if (!(diff <= kOutputTol)) {
      if (bad++ == 0) {
        const auto idx = static_cast<Index>(e);
        std::ostringstream os;
        os.precision(9);
        os << what << ": row (b, i) = " << idx / (heads * d) << " head " << (idx / d) % heads
           << " c " << idx % d << ": got " << got[e] << " want " << want[e];
        r.note(os.str());
      }
    }
  }
  return bad;
}

/// Options of one scenario. cache_window: a rolling cache's / pool's W (0: none); the window or
/// chunk of the params then lies in [1, W], as attend requires.
/// need_scale: a latent cache (its row's width is not the model's head size: attend requires
/// the scale).
AttentionParams draw_params(SplitMix64& rng, Index heads, Scheme scheme, std::int64_t cache_window,
                            bool tree, bool need_scale) {
  AttentionParams p;
  if (!tree && coin(rng, 0.1)) p.mask = MaskMode::kBidirectional;
  if (coin(rng, 0.3) || need_scale) p.scale = between(rng, 0.03, 0.3);
  if (scheme == Scheme::kAlibi) {
    if (coin(rng, 0.5)) {
      p.alibi_slopes = posenc::alibi_slopes(heads);
    } else {
      for (Index h = 0; h < heads; ++h) p.alibi_slopes.push_back(between(rng, 0.0, 0.5));
    }
  }
  if (coin(rng, 0.25)) p.logit_softcap = pick(rng, {0.5, 2.0, between(rng, 1.0, 20.0)});
  if (coin(rng, 0.25)) {
    for (Index h = 0; h < heads; ++h) p.sink_logits.push_back(between(rng, -2.0, 3.0));
  }
  if (cache_window > 0) {
    // A sliding-window layer (window <= W), a chunked layer (chunk <= W: Llama-4's rolling cache
    // of C slots), or both.
    const Index mode = irange(rng, 0, 2);
    if (mode != 1) p.sliding_window = coin(rng, 0.4) ? cache_window : irange(rng, 1, cache_window);
    if (mode != 0) {
      p.attention_chunk_size = coin(rng, 0.4) ? cache_window : irange(rng, 1, cache_window);
    }
  } else {
    if (coin(rng, 0.25)) p.sliding_window = pick<std::int64_t>(rng, {1, 2, irange(rng, 1, 16)});
    if (coin(rng, 0.2)) p.attention_chunk_size = pick<std::int64_t>(rng, {1, irange(rng, 2, 12)});
  }
  if (coin(rng, 0.15)) {
    posenc::AttentionTemperature t;
    t.form = pick(rng, {TemperatureForm::kLlama4, TemperatureForm::kXai,
                        TemperatureForm::kMistral3});
    t.floor_scale = static_cast<double>(irange(rng, 1, 12));
    t.attn_scale = between(rng, 0.05, 0.5);
    t.temperature_len = irange(rng, 2, 20);
    p.query_temperature = t;
  }
  p.num_threads = coin(rng, 0.6) ? 1 : 2;
  return p;
}

/// Shared by both cache kinds.
struct Common {
  int index = 0;
  std::uint64_t seed = 0;
  Storage storage = Storage::kFloat;
  Index kv_heads = 1, heads = 1, d = 16;
  Index dv = 16;        // value width: d, narrower or wider; a latent row's value prefix
  bool latent = false;  // MLA latent rows (KvCache::latent / PagedKvCache::latent)
  Scheme scheme = Scheme::kNone;
  bool partial = false;
  KvScales scales;
  AttentionParams params;
  Widths widths() const { return {kv_heads, d, dv, latent}; }
  Index rope_offset() const { return latent ? dv : 0; }
};

/// FP8 scales per tensor or per kv head, independent for keys and values.
KvScales draw_scales(SplitMix64& rng, Index kv_heads) {
  if (coin(rng, 0.5)) {
    const double k = between(rng, 0.01, 0.2);  // sequenced: the same scales from every compiler
    return KvScales(k, between(rng, 0.01, 0.2));
  }
  std::vector<double> ks, vs;
  for (Index g = 0; g < kv_heads; ++g) {
    ks.push_back(between(rng, 0.01, 0.2));
    vs.push_back(between(rng, 0.01, 0.2));
  }
  return KvScales::per_head(ks, vs);
}

Common draw_common(SplitMix64& rng, int index, std::uint64_t seed) {
  Common c;
  c.index = index;
  c.seed = seed;
  const double st = between(rng, 0.0, 1.0);
  c.storage = st < 0.55 ? Storage::kFloat
              : st < 0.7 ? Storage::kBFloat16
              : st < 0.85 ? Storage::kHalf
                          : Storage::kFp8;
  const Index ratio = pick<Index>(rng, {1, 2, 4});
  c.kv_heads = irange(rng, 1, 2);
  c.heads = c.kv_heads * ratio;
  c.d = pick<Index>(rng, {16, 64, 80, 128});
  const double sc = between(rng, 0.0, 1.0);
  c.scheme = sc < 0.25 ? Scheme::kNone
             : sc < 0.45 ? Scheme::kAlibi
             : sc < 0.72 ? Scheme::kRopeInterleaved
                         : Scheme::kRopeHalfSplit;
  c.partial = is_rope(c.scheme) && coin(rng, 0.25);
  // Keys reach ~1.7 (turned, attention factor 1.2): scales keep codes well inside E4M3.
  if (c.storage == Storage::kFp8) c.scales = draw_scales(rng, c.kv_heads);
  c.dv = c.d;
  // The options added later come from a stream of their own: a scenario without them draws
  // everything else as before.
  SplitMix64 extra(seed ^ 0xD1A7E5F8ULL);
  if (c.storage == Storage::kFloat && coin(extra, 0.3)) {
    // vLLM's E5M2 cache runs unscaled by default; its range (57344) fits either way.
    c.storage = Storage::kFp8E5M2;
    if (!coin(extra, 0.3)) c.scales = draw_scales(extra, c.kv_heads);
  }
  const double shape = between(extra, 0.0, 1.0);
  if (shape < 0.2) {
    // k_pe of 8 .. 64 after c_kv (DeepSeek-V3: 64 after 512); without RoPE the value may also
    // be the whole row.
    c.latent = true;
    c.partial = false;  // the latent plan's slice is all of k_pe
    const Index tail = c.d == 16    ? 8
                       : c.d == 128 ? pick<Index>(extra, {16, 32, 64})
                                    : pick<Index>(extra, {16, 32});
    c.dv = !is_rope(c.scheme) && coin(extra, 0.5) ? c.d : c.d - tail;
    c.scales.v = c.scales.k;  // one scale for the row (set_scales requires it)
    c.scales.v_heads = c.scales.k_heads;
  } else if (shape < 0.4) {
    // Odd widths and widths off the SIMD lanes too.
    c.dv = coin(extra, 0.5) ? pick<Index>(extra, {3, 8, c.d / 2, c.d - 8})
                            : pick<Index>(extra, {c.d + 1, c.d + 8, c.d + 40, 2 * c.d});
  }
  return c;
}

std::string describe(const Common& c) {
  std::ostringstream os;
  os.precision(4);
  os << "#" << c.index << " (seed " << c.seed << "): " << name(c.storage) << " heads " << c.heads
     << " kv_heads " << c.kv_heads << " head_dim " << c.d << " " << name(c.scheme)
     << (c.partial ? " partial" : "");
  if (c.latent) {
    os << " latent v_head_dim " << c.dv;
  } else if (c.dv != c.d) {
    os << " v_head_dim " << c.dv;
  }
  if (is_fp8(c.storage)) {
    os << " scales k=" << c.scales.k << " v=" << c.scales.v;
    for (std::size_t g = 0; g < c.scales.k_heads.size(); ++g) {
      os << " [g" << g << " k=" << c.scales.k_heads[g] << " v=" << c.scales.v_heads[g] << "]";
    }
  }
  os << " | " << describe(c.params);
  return os.str();
}

/// What the sweeps combined (for the coverage tally at the end of each).
struct Tally {
  std::map<std::string, int> n;
  void add(const std::string& what, bool yes = true) { n[what] += yes ? 1 : 0; }
};

void tally_common(Tally& t, const Common& c) {
  t.add(name(c.storage));
  t.add(name(c.scheme));
  t.add("partial rope", c.partial);
  t.add("gqa 4", c.heads == 4 * c.kv_heads);
  t.add("gqa 2", c.heads == 2 * c.kv_heads);
  t.add("head_dim 80", c.d == 80);
  t.add("head_dim 128", c.d == 128);
  t.add("head_dim 16", c.d == 16);
  t.add("head_dim 64", c.d == 64);
  t.add("softcap", c.params.logit_softcap > 0.0);
  t.add("sinks", !c.params.sink_logits.empty());
  t.add("temperature", c.params.query_temperature.has_value());
  t.add("window", c.params.sliding_window > 0);
  t.add("chunk", c.params.attention_chunk_size > 0);
  t.add("bidirectional", c.params.mask == MaskMode::kBidirectional);
  t.add("threads 2", c.params.num_threads == 2);
  t.add("scale", c.params.scale.has_value());
  t.add("per-head fp8 scales", !c.scales.k_heads.empty());
  t.add("per-head e5m2 scales", c.storage == Storage::kFp8E5M2 && !c.scales.k_heads.empty());
  t.add("v_head_dim narrower", !c.latent && c.dv < c.d);
  t.add("v_head_dim wider", !c.latent && c.dv > c.d);
  t.add("latent", c.latent);
  t.add("latent rope", c.latent && is_rope(c.scheme));
  t.add("latent fp8", c.latent && is_fp8(c.storage));
  t.add("latent value = whole row", c.latent && c.dv == c.d);
}

// ---- KvCache -----------------------------------------------------------------------------------

struct KvConfig {
  Common c;
  Index batch = 1, max_len = 1;
  std::int64_t rolling = 0;
  std::vector<Index> prompt;  // real tokens per sequence, left-padded to the longest
  bool tree = false;
};

KvConfig draw_kv_config(int index) {
  KvConfig k;
  const std::uint64_t seed = 0x6B76C0DEULL + static_cast<std::uint64_t>(index) * 7919ULL;
  SplitMix64 rng(seed);
  k.c = draw_common(rng, index, seed);
  k.batch = irange(rng, 1, 3);
  for (Index b = 0; b < k.batch; ++b) {
    // Sometimes past the kernel's key tiles (64 keys) and its decode blocks.
    k.prompt.push_back(coin(rng, 0.3)   ? irange(rng, 1, 3)
                       : coin(rng, 0.1) ? irange(rng, 60, 140)
                                        : irange(rng, 1, 16));
  }
  const Index longest = *std::max_element(k.prompt.begin(), k.prompt.end());
  k.tree = coin(rng, 0.3);
  if (coin(rng, 0.4)) {
    // max_len >= W + 4 so that chunks of 5 fit after the W - 1 kept slots; often small enough
    // that prefill and the first chunks already evict.
    k.rolling = coin(rng, 0.15) ? irange(rng, 60, 80) : irange(rng, 1, 10);
    k.max_len = std::max<Index>(k.rolling + irange(rng, 4, 8), longest);
  } else {
    k.max_len = longest + 8 * 5 + 8;  // the most the operations below can append
  }
  k.c.params = draw_params(rng, k.c.heads, k.c.scheme, k.rolling, k.tree, k.c.latent);
  return k;
}

std::string describe(const KvConfig& k) {
  std::ostringstream os;
  os << "KvCache " << describe(k.c) << " | batch " << k.batch << " max_len " << k.max_len
     << " rolling W " << k.rolling << " prompts [";
  for (const Index p : k.prompt) os << p << ' ';
  os << "]" << (k.tree ? " tree step" : "");
  return os.str();
}

/// The model: all[b] every token appended and not erased, in slot order; the cache should hold
/// all[b][evicted ...] (a suffix: a rolling cache drops from the front, erase removes in both).
struct KvModel {
  std::vector<std::vector<Token>> all;
  Index evicted = 0;
  bool lossless = true;  // a rolling cache that only appended: the history oracle applies
  std::optional<Plan> plan;
  Index held() const { return static_cast<Index>(all[0].size()) - evicted; }
  Token& slot(Index b, Index s) { return all[at(b)][at(evicted + s)]; }
};

/// The values of a latent row [kv_heads * d]: the first dv elements of each head's.
std::vector<float> latent_values(const std::vector<float>& row, const Widths& w) {
  std::vector<float> v(at(w.kv_heads * w.dv));
  for (Index g = 0; g < w.kv_heads; ++g) {
    for (Index c = 0; c < w.dv; ++c) v[at(g * w.dv + c)] = row[at(g * w.d + c)];
  }
  return v;
}

template <typename T>
posenc::KvCache<T> make_cache(const KvConfig& k) {
  const Common& c = k.c;
  if (c.latent) {
    return posenc::KvCache<T>::latent(k.batch, k.max_len, c.kv_heads, c.d, c.dv, k.rolling);
  }
  // v_head_dim 0 (= head_dim) as the scenarios before v_head_dim was drawn called it.
  return posenc::KvCache<T>(k.batch, k.max_len, c.kv_heads, c.d, k.rolling,
                            c.dv == c.d ? 0 : c.dv);
}

template <typename T>
class KvRun {
 public:
  explicit KvRun(const KvConfig& k)
      : k_(k), c_(k.c), rng_(k.c.seed + 1), cache_(make_cache<T>(k)) {
    m_.all.resize(at(k.batch));
    if constexpr (kIsFp8<T>) cache_.set_scales(c_.scales);
    if (is_rope(c_.scheme)) {
      const RopeLayout layout = c_.scheme == Scheme::kRopeInterleaved ? RopeLayout::kInterleaved
                                                                      : RopeLayout::kHalfSplit;
      m_.plan = draw_plan(rng_, c_.d, layout, c_.partial, c_.rope_offset());
      cache_.set_rope(m_.plan->lib, layout);
      log_ << "set_rope(" << m_.plan->text << "); ";
    }
  }

  /// The scenario; an exception (a cache that disagrees with the model may reject a later
  /// operation) fails it with its configuration and log, and the sweep goes on.
  void run(Tally& tally) {
    try {
      steps(tally);
    } catch (const std::exception& e) {
      const std::string config = describe(k_);
      const std::string log = log_.str();
      CAPTURE(config, log);
      FAIL_CHECK("unexpected exception: " << e.what());
    }
  }

 private:
  void steps(Tally& tally) {
    // Prefill: left padding (valid 0, position 0) up to the longest prompt.
    const Index n = *std::max_element(k_.prompt.begin(), k_.prompt.end());
    std::vector<std::int64_t> pos;
    std::vector<std::uint8_t> valid;
    for (Index b = 0; b < k_.batch; ++b) {
      const Index pad = n - k_.prompt[at(b)];
      for (Index s = 0; s < n; ++s) {
        pos.push_back(s < pad ? 0 : s - pad);
        valid.push_back(s < pad ? 0 : 1);
      }
    }
    tally.add("left padding", std::count(valid.begin(), valid.end(), 0) > 0);
    tally.add("past a key tile", n > 64);
    append(n, pos, valid);
    attend(irange(rng_, 1, n), {});
    const Index steps = irange(rng_, 3, 7);
    const Index tree_at = k_.tree ? irange(rng_, 0, steps - 1) : -1;
    for (Index step = 0; step < steps && !failed_; ++step) {
      if (step == tree_at) {
        tree_step();
        tally.add("tree");
        continue;
      }
      const double op = between(rng_, 0.0, 1.0);
      if (op < 0.4) {
        decode(1);
      } else if (op < 0.65) {
        decode(irange(rng_, 2, 5));
      } else if (op < 0.75 && m_.held() >= 1) {
        erase();
        tally.add("erase");
      } else if (op < 0.9 && m_.held() >= 1) {
        shift();
        tally.add("shift");
      } else if (m_.plan) {
        update_rope();
        tally.add("update_rope");
      } else {
        decode(1);
      }
    }
    if (!failed_) decode(1);  // every operation is followed by an attend
    tally.add("rolling", k_.rolling > 0);
    tally.add("rolling evicted", cache_.evicted() > 0);
    tally.add("rolling chunked", k_.rolling > 0 && c_.params.attention_chunk_size > 0);
    tally.add("history checked", history_checks_ > 0);
    // The operations that move or re-store rows of their own widths.
    tally.add("latent erase", c_.latent && erased_);
    tally.add("latent turned", c_.latent && turned_);
    tally.add("latent rolling evicted", c_.latent && cache_.evicted() > 0);
    tally.add("v_head_dim erase", !c_.latent && c_.dv != c_.d && erased_);
    tally.add("v_head_dim rolling evicted", !c_.latent && c_.dv != c_.d && cache_.evicted() > 0);
  }

  std::int64_t next_pos(Index b) const {
    const auto& all = m_.all[at(b)];
    return all.empty() ? 0 : all.back().pos + 1;
  }

  void append(Index n, const std::vector<std::int64_t>& pos,
              const std::vector<std::uint8_t>& valid) {
    const Index row = c_.kv_heads * c_.d, vrow = c_.kv_heads * c_.dv;
    const auto k = random_floats(rng_, k_.batch * n * row);
    const auto v = c_.latent ? std::vector<float>() : random_floats(rng_, k_.batch * n * vrow);
    log_ << (c_.latent ? "append_latent(n=" : "append(n=") << n << " pos b0 " << pos[0] << ".."
         << pos[at(n - 1)] << "); ";
    const posenc::PositionIdsView positions(pos.data(), k_.batch, n);
    const ConstTensorView<std::uint8_t, 2> valid_view(valid.data(), k_.batch, n);
    const ConstTensorView<float, 4> kv(k.data(), k_.batch, n, c_.kv_heads, c_.d);
    if (c_.latent) {
      cache_.append_latent(kv, positions, valid_view);
    } else {
      cache_.append(kv, ConstTensorView<float, 4>(v.data(), k_.batch, n, c_.kv_heads, c_.dv),
                    positions, valid_view);
    }
    // The rolling rule of kv_cache.hpp: on overflow keep the newest W - 1 slots.
    if (k_.rolling > 0 && m_.held() + n > k_.max_len) {
      const Index keep = std::min<Index>(m_.held(), k_.rolling - 1);
      m_.evicted += m_.held() - keep;
    }
    for (Index b = 0; b < k_.batch; ++b) {
      for (Index s = 0; s < n; ++s) {
        Token t;
        t.k = slice(k, at((b * n + s) * row), at(row));
        t.v = c_.latent ? latent_values(t.k, c_.widths())
                        : slice(v, at((b * n + s) * vrow), at(vrow));
        t.pos = pos[at(b * n + s)];
        t.valid = valid[at(b * n + s)];
        m_.all[at(b)].push_back(std::move(t));
      }
    }
  }

  void decode(Index n) {
    std::vector<std::int64_t> pos;
    for (Index b = 0; b < k_.batch; ++b) {
      for (Index s = 0; s < n; ++s) pos.push_back(next_pos(b) + s);
    }
    append(n, pos, std::vector<std::uint8_t>(at(k_.batch * n), 1));
    // A cache that keeps every token may re-attend earlier slots too (a rolling one has
    // dropped their windows).
    const Index extra = k_.rolling == 0 && coin(rng_, 0.2) ? irange(rng_, 1, 3) : 0;
    attend(irange(rng_, 1, std::min(n + extra, m_.held())), {});
  }

  /// Draft tokens (the same tree for the batch, so that the rejected slots are the same), each
  /// at its parent's position + 1, verified in one attend; then a random path is accepted and
  /// the other slots erased, last first (kv_cache.hpp).
  void tree_step() {
    const Index n = irange(rng_, 2, 5);
    const std::int64_t limit = c_.params.sliding_window;  // paths must fit the window
    std::vector<Index> parent(at(n)), depth(at(n));
    for (Index t = 0; t < n; ++t) {
      parent[at(t)] = irange(rng_, -1, t - 1);
      depth[at(t)] = parent[at(t)] < 0 ? 1 : depth[at(parent[at(t)])] + 1;
      if (limit > 0 && depth[at(t)] > limit) {
        parent[at(t)] = -1;
        depth[at(t)] = 1;
      }
    }
    std::vector<std::uint8_t> tree(at(k_.batch * n * n), 0);
    std::vector<std::int64_t> pos;
    for (Index b = 0; b < k_.batch; ++b) {
      for (Index i = 0; i < n; ++i) {
        for (Index x = i; x >= 0; x = parent[at(x)]) tree[at((b * n + i) * n + x)] = 1;
        pos.push_back(next_pos(b) + depth[at(i)] - 1);
      }
    }
    log_ << "tree(parents [";
    for (const Index p : parent) log_ << p << ' ';
    log_ << "]) ";
    append(n, pos, std::vector<std::uint8_t>(at(k_.batch * n), 1));
    attend(n, tree);
    std::vector<bool> accepted(at(n), false);
    for (Index x = irange(rng_, 0, n - 1); x >= 0; x = parent[at(x)]) accepted[at(x)] = true;
    const Index first = m_.held() - n;
    log_ << "erase rejected [";
    for (Index t = n - 1; t >= 0; --t) {
      if (accepted[at(t)]) continue;
      log_ << t << ' ';
      cache_.erase(first + t, 1);
      erased_ = true;
      for (auto& all : m_.all) {
        all.erase(all.begin() + static_cast<std::ptrdiff_t>(m_.evicted + first + t));
      }
    }
    log_ << "]; ";
    // The accepted path is now an ordinary suffix at consecutive positions; a rolling cache
    // still holds the W - 1 slots before it, so the history oracle still applies.
  }

  void erase() {
    const Index size = m_.held();
    const Index first = irange(rng_, 0, size - 1);
    const Index count = irange(rng_, 1, std::min<Index>(4, size - first));
    log_ << "erase(" << first << ", " << count << "); ";
    cache_.erase(first, count);
    remove(first, count);
  }

  void remove(Index first, Index count) {
    for (auto& all : m_.all) {
      const auto from = all.begin() + static_cast<std::ptrdiff_t>(m_.evicted + first);
      all.erase(from, from + static_cast<std::ptrdiff_t>(count));
    }
    erased_ = erased_ || count > 0;
    m_.lossless = false;  // later windows may reach slots the rolling cache has dropped
  }

  /// llama.cpp's context shift (keep n_keep, drop n_discard, move the rest back) or a random
  /// shift of a slot range; positions stay >= 0.
  void shift() {
    Index size = m_.held(), first = 0;
    std::int64_t delta = 0;
    if (size >= 3 && coin(rng_, 0.5)) {
      const Index keep = irange(rng_, 0, size - 2);
      const Index discard = irange(rng_, 1, size - keep - 1);
      log_ << "context shift: erase(" << keep << ", " << discard << "); ";
      cache_.erase(keep, discard);
      remove(keep, discard);
      size -= discard;
      first = keep;
      delta = -static_cast<std::int64_t>(discard);
    } else {
      first = irange(rng_, 0, size - 1);
      size = irange(rng_, first + 1, size);  // the range's end
      delta = irange(rng_, -6, 6);
    }
    std::int64_t lowest = std::numeric_limits<std::int64_t>::max();
    for (Index b = 0; b < k_.batch; ++b) {
      for (Index s = first; s < size; ++s) lowest = std::min(lowest, m_.slot(b, s).pos);
    }
    delta = std::max(delta, -lowest);
    log_ << "shift_positions(" << first << ", " << size << ", " << delta << "); ";
    cache_.shift_positions(first, size, delta);
    for (Index b = 0; b < k_.batch; ++b) {
      for (Index s = first; s < size; ++s) {
        Token& t = m_.slot(b, s);
        t.pos += delta;
        t.stale = true;
        if (m_.plan && delta != 0) ++t.rounds;
      }
    }
    turned_ = turned_ || (m_.plan && delta != 0 && first < size);
    if (delta != 0 && first < size) m_.lossless = false;
  }

  void update_rope() {
    Plan next = draw_plan(rng_, c_.d, m_.plan->layout, c_.partial, c_.rope_offset());
    log_ << "update_rope(" << next.text << "); ";
    cache_.update_rope(next.lib);
    m_.plan = std::move(next);
    turned_ = true;
    for (auto& all : m_.all) {
      for (Index s = 0; s < static_cast<Index>(all.size()); ++s) {
        all[at(s)].stale = true;
        if (s >= m_.evicted) ++all[at(s)].rounds;
      }
    }
  }

  /// Attend of the last q_len slots (with a tree mask when given), checked against the model.
  void attend(Index q_len, const std::vector<std::uint8_t>& tree) {
    const Index B = k_.batch, H = c_.heads, G = c_.kv_heads, D = c_.d, DV = c_.dv;
    const auto q = random_floats(rng_, B * q_len * H * D);
    std::vector<float> out(at(B * q_len * H * DV), 1000.0f);
    log_ << "attend(q_len=" << q_len << (tree.empty() ? "" : " tree") << "); ";
    const ConstTensorView<float, 4> Q(q.data(), B, q_len, H, D);
    const TensorView<float, 4> O(out.data(), B, q_len, H, DV);
    if (tree.empty()) {
      cache_.attend(Q, O, c_.params);
    } else {
      cache_.attend(Q, O, ConstTensorView<std::uint8_t, 3>(tree.data(), B, q_len, q_len),
                    c_.params);
    }
    Report r;
    const Index size = m_.held();
    if (cache_.size() != size || cache_.evicted() != m_.evicted) {
      ++r.state;
      std::ostringstream os;
      os << "size " << cache_.size() << " evicted " << cache_.evicted() << ", model " << size
         << " / " << m_.evicted;
      r.note(os.str());
    }
    const Plan* plan = m_.plan ? &*m_.plan : nullptr;
    std::vector<double> kh, vh, ka, va;  // held slots / whole history
    std::vector<std::int64_t> kpos_h, kpos_a, qpos;
    std::vector<std::uint8_t> mask_h, mask_a;
    const Index checked = std::min(size, cache_.size());
    for (Index b = 0; b < B; ++b) {
      auto& all = m_.all[at(b)];
      for (Index s = 0; s < m_.evicted; ++s) model_rows(all[at(s)], plan, G, D, ka, va);
      for (Index s = 0; s < checked; ++s) {
        Token& t = m_.slot(b, s);
        if (cache_.positions()(b, s) != t.pos || cache_.valid()(b, s) != t.valid) {
          ++r.state;
          std::ostringstream os;
          os << "slot " << s << " of sequence " << b << ": position " << cache_.positions()(b, s)
             << " valid " << +cache_.valid()(b, s) << ", model " << t.pos << " / " << +t.valid;
          r.note(os.str());
        }
        const T* ks = &cache_.keys()(b, s, 0, 0);
        const T* vs = c_.latent ? ks : &cache_.values()(b, s, 0, 0);
        const auto k0 = kh.size(), v0 = vh.size();
        verify_token(ks, vs, t, plan, c_.widths(), c_.scales,
                     "b=" + std::to_string(b) + " slot=" + std::to_string(s), r, kh, vh);
        ka.insert(ka.end(), kh.begin() + static_cast<std::ptrdiff_t>(k0), kh.end());
        va.insert(va.end(), vh.begin() + static_cast<std::ptrdiff_t>(v0), vh.end());
      }
      for (const Token& t : all) {
        kpos_a.push_back(t.pos);
        mask_a.push_back(t.valid);
      }
      for (Index s = 0; s < size; ++s) {
        kpos_h.push_back(m_.slot(b, s).pos);
        mask_h.push_back(m_.slot(b, s).valid);
      }
      for (Index i = 0; i < q_len; ++i) qpos.push_back(m_.slot(b, size - q_len + i).pos);
    }
    if (r.state == 0) {
      const auto qt = turned_queries(q, B, q_len, H, D, qpos, plan);
      const auto want = reference_out(B, q_len, size, H, G, D, DV, qt, kh, vh, qpos, kpos_h,
                                      mask_h, tree, c_.params);
      r.held = compare(out, want, "vs reference over the held slots", H, DV, r);
      if (k_.rolling > 0 && m_.lossless && m_.evicted > 0) {
        ++history_checks_;
        const auto n_all = static_cast<Index>(m_.all[0].size());
        const auto whole = reference_out(B, q_len, n_all, H, G, D, DV, qt, ka, va, qpos,
                                         kpos_a, mask_a, tree, c_.params);
        r.history = compare(out, whole, "vs reference over the whole history", H, DV, r);
      }
    }
    // Past a mismatch the model no longer describes the cache: stop this scenario.
    failed_ = report(r, describe(k_), log_.str()) || failed_;
  }

  const KvConfig& k_;
  const Common& c_;
  SplitMix64 rng_;
  posenc::KvCache<T> cache_;
  KvModel m_;
  std::ostringstream log_;
  int history_checks_ = 0;
  bool erased_ = false, turned_ = false;
  bool failed_ = false;
};

// ---- PagedKvCache ------------------------------------------------------------------------------

struct PagedConfig {
  Common c;
  Index page_size = 1, num_pages = 1;
  std::int64_t window = 0;
};

PagedConfig draw_paged_config(int index) {
  PagedConfig p;
  const std::uint64_t seed = 0x9A6EDULL + static_cast<std::uint64_t>(index) * 104729ULL;
  SplitMix64 rng(seed);
  p.c = draw_common(rng, index, seed);
  p.page_size = pick<Index>(rng, {1, 2, 3, 4, 8, 16});
  if (coin(rng, 0.35)) p.window = irange(rng, 1, 12);
  // At most 5 live sequences of at most 140 + 6 * 5 tokens, each fork copying one page.
  p.num_pages = 5 * ((140 + 6 * 5) / p.page_size + 3);
  p.c.params = draw_params(rng, p.c.heads, p.c.scheme, p.window, false, p.c.latent);
  return p;
}

std::string describe(const PagedConfig& p) {
  std::ostringstream os;
  os << "PagedKvCache " << describe(p.c) << " | page_size " << p.page_size << " num_pages "
     << p.num_pages << " window W " << p.window;
  return os.str();
}

template <typename T>
posenc::PagedKvCache<T> make_pool(const PagedConfig& p) {
  const Common& c = p.c;
  if (c.latent) {
    return posenc::PagedKvCache<T>::latent(p.num_pages, p.page_size, c.kv_heads, c.d, c.dv,
                                           p.window);
  }
  return posenc::PagedKvCache<T>(p.num_pages, p.page_size, c.kv_heads, c.d, p.window,
                                 c.dv == c.d ? 0 : c.dv);
}

template <typename T>
class PagedRun {
 public:
  explicit PagedRun(const PagedConfig& p)
      : p_(p), c_(p.c), rng_(p.c.seed + 1), pool_(make_pool<T>(p)) {
    if constexpr (kIsFp8<T>) pool_.set_scales(c_.scales);
    if (is_rope(c_.scheme)) {
      const RopeLayout layout = c_.scheme == Scheme::kRopeInterleaved ? RopeLayout::kInterleaved
                                                                      : RopeLayout::kHalfSplit;
      plan_ = draw_plan(rng_, c_.d, layout, c_.partial, c_.rope_offset());
      pool_.set_rope(plan_->lib, layout);
      log_ << "set_rope(" << plan_->text << "); ";
    }
  }

  void run(Tally& tally) {
    try {
      steps(tally);
    } catch (const std::exception& e) {
      const std::string config = describe(p_);
      const std::string log = log_.str();
      CAPTURE(config, log);
      FAIL_CHECK("unexpected exception: " << e.what());
    }
  }

 private:
  void steps(Tally& tally) {
    const Index first = irange(rng_, 1, 3);
    std::vector<std::int64_t> ids;
    Index shortest = 16;
    for (Index n = 0; n < first; ++n) {
      const auto s = pool_.add_sequence();
      log_ << "add_sequence() = " << s << "; ";
      seqs_[s];
      const Index len = coin(rng_, 0.1) ? irange(rng_, 60, 140) : irange(rng_, 1, 16);
      append(s, len);
      shortest = std::min(shortest, len);
      tally.add("past a key tile", len > 64);
      ids.push_back(s);
    }
    attend(ids, irange(rng_, 1, shortest));
    const Index steps = irange(rng_, 3, 6);
    for (Index step = 0; step < steps && !failed_; ++step) {
      const double op = between(rng_, 0.0, 1.0);
      if (op < 0.45) {
        append_all();
      } else if (op < 0.7) {
        fork();
        tally.add("fork");
        tally.add("latent fork", c_.latent);
        tally.add("v_head_dim fork", !c_.latent && c_.dv != c_.d);
      } else if (op < 0.85 && seqs_.size() > 1) {
        release();
        tally.add("release");
        append_all();
      } else if (plan_) {
        update_rope();
        tally.add("update_rope");
        tally.add("latent update_rope", c_.latent);
      } else {
        append_all();
      }
    }
    if (!failed_) append_all();
    tally.add("windowed pool", p_.window > 0);
    tally.add("history beyond dropped pages", dropped_checked_ > 0);
    tally.add("page size 1", p_.page_size == 1);
    tally.add("page size 16", p_.page_size == 16);
    tally.add("attention_paged_latent", latent_direct_ > 0);
  }

  struct Seq {
    std::vector<Token> toks;
    Index last_chunk = 0;
  };

  void append(std::int64_t s, Index n) {
    const Index row = c_.kv_heads * c_.d, vrow = c_.kv_heads * c_.dv;
    const auto k = random_floats(rng_, n * row);
    const auto v = c_.latent ? std::vector<float>() : random_floats(rng_, n * vrow);
    log_ << (c_.latent ? "append_latent(" : "append(") << s << ", n=" << n << "); ";
    const ConstTensorView<float, 3> kv(k.data(), n, c_.kv_heads, c_.d);
    if (c_.latent) {
      pool_.append_latent(s, kv);
    } else {
      pool_.append(s, kv, ConstTensorView<float, 3>(v.data(), n, c_.kv_heads, c_.dv));
    }
    Seq& seq = seqs_[s];
    for (Index t = 0; t < n; ++t) {
      Token tok;
      tok.k = slice(k, at(t * row), at(row));
      tok.v = c_.latent ? latent_values(tok.k, c_.widths()) : slice(v, at(t * vrow), at(vrow));
      tok.pos = static_cast<std::int64_t>(seq.toks.size());  // paged positions are slots
      seq.toks.push_back(std::move(tok));
    }
    seq.last_chunk = n;
  }

  /// A chunk to every live sequence (of its own length), then an attend of a random subset in
  /// random order, q_len within every listed sequence's chunk.
  void append_all() {
    std::vector<std::int64_t> ids;
    for (auto& [s, seq] : seqs_) {
      append(s, coin(rng_, 0.5) ? 1 : irange(rng_, 1, 5));
      ids.push_back(s);
    }
    for (std::size_t i = ids.size(); i > 1; --i) {
      std::swap(ids[i - 1], ids[at(irange(rng_, 0, static_cast<Index>(i) - 1))]);
    }
    ids.resize(at(irange(rng_, 1, static_cast<Index>(ids.size()))));
    Index q_max = 5;
    for (const auto s : ids) q_max = std::min(q_max, seqs_[s].last_chunk);
    attend(ids, irange(rng_, 1, q_max));
  }

  /// A child of a random sequence (a partial last page copied, full ones shared), attended at
  /// once next to its parent: both must read the same tokens.
  void fork() {
    auto it = seqs_.begin();
    std::advance(it, irange(rng_, 0, static_cast<Index>(seqs_.size()) - 1));
    const std::int64_t parent = it->first;
    const std::int64_t child = pool_.fork(parent);
    log_ << "fork(" << parent << ") = " << child << "; ";
    seqs_[child] = seqs_[parent];
    attend({parent, child}, irange(rng_, 1, seqs_[parent].last_chunk));
    if (seqs_.size() > 4) release();
  }

  void release() {
    auto it = seqs_.begin();
    std::advance(it, irange(rng_, 0, static_cast<Index>(seqs_.size()) - 1));
    log_ << "release(" << it->first << "); ";
    pool_.release(it->first);
    seqs_.erase(it);
  }

  void update_rope() {
    Plan next = draw_plan(rng_, c_.d, plan_->layout, c_.partial, c_.rope_offset());
    log_ << "update_rope(" << next.text << "); ";
    pool_.update_rope(next.lib);
    plan_ = std::move(next);
    for (auto& [s, seq] : seqs_) {
      for (Token& t : seq.toks) {
        t.stale = true;
        ++t.rounds;  // shared pages turn once: each token's key is rounded once more
      }
    }
    std::vector<std::int64_t> ids;
    for (auto& [s, seq] : seqs_) ids.push_back(s);
    Index q_max = 5;
    for (const auto s : ids) q_max = std::min(q_max, seqs_[s].last_chunk);
    attend(ids, irange(rng_, 1, q_max));
  }

  void attend(const std::vector<std::int64_t>& ids, Index q_len) {
    const auto B = static_cast<Index>(ids.size());
    const Index H = c_.heads, G = c_.kv_heads, D = c_.d, DV = c_.dv, ps = p_.page_size;
    const auto q = random_floats(rng_, B * q_len * H * D);
    std::vector<float> out(at(B * q_len * H * DV), 1000.0f);
    log_ << "attend({";
    for (const auto s : ids) log_ << s << ' ';
    log_ << "}, q_len=" << q_len << "); ";
    pool_.attend(ids, ConstTensorView<float, 4>(q.data(), B, q_len, H, D),
                 TensorView<float, 4>(out.data(), B, q_len, H, DV), c_.params);
    Report r;
    const Plan* plan = plan_ ? &*plan_ : nullptr;
    // Page accounting: every page a live sequence holds counts its holders; the rest are free.
    std::map<std::int32_t, std::int32_t> holders;
    for (const auto& [s, seq] : seqs_) {
      if (pool_.length(s) != static_cast<Index>(seq.toks.size())) {
        ++r.state;
        r.note("length of sequence " + std::to_string(s) + " is " +
               std::to_string(pool_.length(s)) + ", model " + std::to_string(seq.toks.size()));
      }
      for (const std::int32_t page : pool_.pages(s)) {
        if (page != p_.num_pages) ++holders[page];
      }
    }
    for (const auto& [page, n] : holders) {
      if (pool_.page_refs(page) != n) {
        ++r.state;
        r.note("page " + std::to_string(page) + " has " + std::to_string(pool_.page_refs(page)) +
               " refs, " + std::to_string(n) + " holders");
      }
    }
    if (pool_.free_pages() != p_.num_pages - static_cast<Index>(holders.size())) {
      ++r.state;
      r.note("free pages " + std::to_string(pool_.free_pages()) + ", expected " +
             std::to_string(p_.num_pages - static_cast<Index>(holders.size())));
    }
    // Oracle per sequence (batch 1): the whole history at slots = positions.
    std::vector<double> want(out.size());
    std::vector<std::int32_t> table;
    std::vector<std::int64_t> lens;
    Index max_pages = 1;
    for (const auto s : ids) {
      max_pages = std::max(max_pages, static_cast<Index>(pool_.pages(s).size()));
    }
    for (Index b = 0; b < B && r.state == 0; ++b) {
      Seq& seq = seqs_[ids[at(b)]];
      const auto& pages = pool_.pages(ids[at(b)]);
      const auto len = static_cast<Index>(seq.toks.size());
      std::vector<double> k, v;
      std::vector<std::int64_t> kpos, qpos;
      for (Index t = 0; t < len; ++t) {
        const std::int32_t page = pages[at(t / ps)];
        if (page == p_.num_pages) {  // dropped by the window: the oracle must mask it
          ++dropped_checked_;
          model_rows(seq.toks[at(t)], plan, G, D, k, v);
        } else {
          const T* ks = &pool_.key_pages()(page, t % ps, 0, 0);
          const T* vs = c_.latent ? ks : &pool_.value_pages()(page, t % ps, 0, 0);
          verify_token(ks, vs, seq.toks[at(t)], plan, c_.widths(), c_.scales,
                       "seq=" + std::to_string(ids[at(b)]) + " slot=" + std::to_string(t), r, k,
                       v);
        }
        kpos.push_back(t);
      }
      for (Index i = 0; i < q_len; ++i) qpos.push_back(len - q_len + i);
      const std::vector<float> qb(q.begin() + b * q_len * H * D,
                                  q.begin() + (b + 1) * q_len * H * D);
      const auto qt = turned_queries(qb, 1, q_len, H, D, qpos, plan);
      const auto o = reference_out(1, q_len, len, H, G, D, DV, qt, k, v, qpos, kpos, {}, {},
                                   c_.params);
      std::copy(o.begin(), o.end(), want.begin() + b * q_len * H * DV);
      table.insert(table.end(), pages.begin(), pages.end());
      table.resize(at((b + 1) * max_pages), 0);
      lens.push_back(len);
    }
    if (r.state == 0) {
      r.held = compare(out, want, "PagedKvCache::attend vs reference", H, DV, r);
      // attention_paged_latent takes no FP8 pages (nor scales): those pools are checked
      // through PagedKvCache::attend only.
      if (p_.window == 0 && !(c_.latent && kIsFp8<T>)) {
        // attention_paged on the pool's own pages, queries turned by the test (a windowed pool
        // points dropped pages at a zero page outside key_pages(): not callable that way).
        std::vector<float> qt(q.size()), direct(out.size(), 1000.0f);
        for (Index b = 0; b < B; ++b) {
          std::vector<std::int64_t> qpos;
          for (Index i = 0; i < q_len; ++i) qpos.push_back(lens[at(b)] - q_len + i);
          const std::vector<float> qb(q.begin() + b * q_len * H * D,
                                      q.begin() + (b + 1) * q_len * H * D);
          const auto t = turned_queries(qb, 1, q_len, H, D, qpos, plan);
          for (std::size_t e = 0; e < t.size(); ++e) {
            qt[at(b * q_len * H * D) + e] = static_cast<float>(t[e]);
          }
        }
        const ConstTensorView<float, 4> Q(qt.data(), B, q_len, H, D);
        const ConstTensorView<std::int32_t, 2> pt(table.data(), B, max_pages);
        const ConstTensorView<std::int64_t, 1> lv(lens.data(), B);
        const TensorView<float, 4> O(direct.data(), B, q_len, H, DV);
        if (!c_.latent) {
          posenc::attention_paged<float, T>(Q, pool_.key_pages(), pool_.value_pages(), pt, lv,
                                            O, c_.params, nullptr, std::nullopt, c_.scales);
          r.direct = compare(direct, want, "attention_paged vs reference", H, DV, r);
        } else if constexpr (!kIsFp8<T>) {
          ++latent_direct_;
          posenc::attention_paged_latent<float, T>(Q, pool_.key_pages(), pt, lv, O, c_.params);
          r.direct = compare(direct, want, "attention_paged_latent vs reference", H, DV, r);
        }
      }
    }
    failed_ = report(r, describe(p_), log_.str()) || failed_;
  }

  const PagedConfig& p_;
  const Common& c_;
  SplitMix64 rng_;
  posenc::PagedKvCache<T> pool_;
  std::optional<Plan> plan_;
  std::map<std::int64_t, Seq> seqs_;
  std::ostringstream log_;
  int dropped_checked_ = 0;
  int latent_direct_ = 0;
  bool failed_ = false;
};

void require_coverage(const Tally& t, std::initializer_list<const char*> names, int least) {
  for (const char* n : names) {
    CAPTURE(n);
    const auto it = t.n.find(n);
    CHECK((it == t.n.end() ? 0 : it->second) >= least);
  }
}

}  // namespace

TEST_CASE("kv cache combinations: KvCache decode paths against the reference over the model",
          "[kv_cache][combinations]") {
  constexpr int kScenarios = 240;
  Tally tally;
  for (int index = 0; index < kScenarios; ++index) {
    const KvConfig k = draw_kv_config(index);
    tally_common(tally, k.c);
    switch (k.c.storage) {
      case Storage::kFloat: KvRun<float>(k).run(tally); break;
      case Storage::kBFloat16: KvRun<Eigen::bfloat16>(k).run(tally); break;
      case Storage::kHalf: KvRun<Eigen::half>(k).run(tally); break;
      case Storage::kFp8: KvRun<E4M3>(k).run(tally); break;
      case Storage::kFp8E5M2: KvRun<E5M2>(k).run(tally); break;
    }
  }
  // The sweep must keep combining what it exists for.
  require_coverage(tally, {"float", "bfloat16", "half", "fp8_e4m3", "none", "alibi",
                           "rope-interleaved", "rope-half-split", "partial rope", "gqa 4",
                           "head_dim 16", "head_dim 64", "head_dim 80", "head_dim 128",
                           "past a key tile", "softcap", "sinks", "temperature", "window", "chunk",
                           "bidirectional", "threads 2", "per-head fp8 scales", "left padding",
                           "tree", "erase", "shift", "update_rope", "rolling", "rolling evicted",
                           "rolling chunked", "history checked", "fp8_e5m2",
                           "per-head e5m2 scales", "v_head_dim narrower", "v_head_dim wider",
                           "v_head_dim erase", "v_head_dim rolling evicted", "latent",
                           "latent rope", "latent fp8", "latent erase", "latent turned",
                           "latent rolling evicted", "latent value = whole row"},
                   5);
}

TEST_CASE("kv cache combinations: PagedKvCache and attention_paged against the reference",
          "[kv_cache][combinations][paged]") {
  constexpr int kScenarios = 120;
  Tally tally;
  for (int index = 0; index < kScenarios; ++index) {
    const PagedConfig p = draw_paged_config(index);
    tally_common(tally, p.c);
    switch (p.c.storage) {
      case Storage::kFloat: PagedRun<float>(p).run(tally); break;
      case Storage::kBFloat16: PagedRun<Eigen::bfloat16>(p).run(tally); break;
      case Storage::kHalf: PagedRun<Eigen::half>(p).run(tally); break;
      case Storage::kFp8: PagedRun<E4M3>(p).run(tally); break;
      case Storage::kFp8E5M2: PagedRun<E5M2>(p).run(tally); break;
    }
  }
  require_coverage(tally, {"float", "bfloat16", "half", "fp8_e4m3", "alibi", "rope-interleaved",
                           "rope-half-split", "window", "chunk", "sinks", "softcap", "fork",
                           "past a key tile", "release", "update_rope", "windowed pool",
                           "history beyond dropped pages", "page size 1", "page size 16",
                           "fp8_e5m2", "per-head e5m2 scales", "v_head_dim narrower",
                           "v_head_dim wider", "v_head_dim fork", "latent", "latent rope",
                           "latent fp8", "latent fork", "latent update_rope",
                           "attention_paged_latent"},
                   3);
}
