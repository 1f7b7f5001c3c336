// KV-cache decode paths with their options combined: a seeded randomized differential sweep in
// the spirit of test_attention_combinations.cpp. Each scenario draws a cache (KvCache or
// PagedKvCache), a storage type (float, bfloat16, half, FP8 E4M3 or E5M2 with per-tensor or
// per-head scales, double from float or double rows), GQA, a head size, values of the keys'
// width or narrower / wider ones, or an MLA latent cache (one row per token, [c_kv | k_pe],
// whose first v_head_dim elements are the value and whose RoPE turns only the trailing k_pe
// through rotary_offset = v_head_dim), a
// positional scheme (RoPE interleaved / half-split, possibly partial and scaled, ALiBi or
// none), a rolling window or a chunked rolling cache, the attention options
// (window, chunk, soft cap, sinks, temperature, scale, bidirectional, threads), left padding,
// and then a random sequence of operations: prefill, chunks of 1-5 tokens, decode steps, erase,
// llama.cpp's context shift, shift_positions, update_rope with another plan, a draft tree
// verified in one pass whose rejected tokens are then erased, fork and release (paged).
// Paged pools are also read by the free functions over their own pages, block tables and
// lengths: attention_paged (attention_paged_latent for latent pools), a windowed pool's
// dropped pages pointed at some other page; its tree-mask overload on draft tokens appended
// to a forked child; attention_paged_varlen with a q_len per sequence (0 included); and one
// sequence given fewer keys than queries (rows with no key). The optional lse of attend and
// of each of those is checked against attention.hpp's definition (see reference_lse).
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
//    that dropping slots loses nothing any query can see;
//  - attention_paged on the pool with the queries PagedKvCache::attend rotates (posenc's RoPE,
//    as the pool calls it) against attend's output and lse, bit for bit: paged_kv_cache.hpp
//    says attend runs attention_paged over the pool (same kernel, same order; it holds for
//    FP8 E4M3 too, which attend reads as NaN-free codes). attention_paged_varlen runs each
//    sequence as its own batch-1 call, whose blocking may differ: within tolerance only.
// Not reachable here: KvCache::attend has no lse output; PagedKvCache has no tree-mask attend
// (nor erase: a paged draft tree is verified in a forked child, then released);
// attention_paged_latent has no tree overload and takes no FP8 pages; attention_paged_varlen
// takes neither FP8 pages nor scales; the pools' dropped-page table entries are not valid
// page ids of key_pages(); double rows into an E4M3 cache do not compile (see append).
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
#include <posenc/rope.hpp>
#include <posenc/rope_frequencies.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
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

enum class Storage { kFloat, kBFloat16, kHalf, kFp8, kFp8E5M2, kDouble };
const char* name(Storage s) {
  switch (s) {
    case Storage::kFloat: return "float";
    case Storage::kBFloat16: return "bfloat16";
    case Storage::kHalf: return "half";
    case Storage::kFp8: return "fp8_e4m3";
    case Storage::kFp8E5M2: return "fp8_e5m2";
    case Storage::kDouble: return "double";
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
  if constexpr (std::is_same_v<T, double>) return {0x1p-52, 0x1p-1074};
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
  int lse = 0, identical = 0, empty = 0, tree = 0, varlen = 0, oracle = 0;
  double worst = 0.0;  // max |out - reference| / kOutputTol
  double worst_lse = 0.0;  // max |lse - reference| / kLseTol
  std::string detail;
  int noted = 0;
  void note(const std::string& s) {
    if (noted++ < 8) detail += s + "\n";
  }
};

/// One attend's checks, failing with the scenario and its operation log; true when any failed.
bool report(const Report& r, const std::string& config, const std::string& log) {
  CAPTURE(config, log);
  INFO(r.detail << "largest |out - reference| / tolerance: " << r.worst
                << ", |lse - reference| / tolerance: " << r.worst_lse);
  CHECK(r.state == 0);
  CHECK(r.keys == 0);
  CHECK(r.values == 0);
  CHECK(r.held == 0);
  CHECK(r.history == 0);
  CHECK(r.direct == 0);
  CHECK(r.lse == 0);
  CHECK(r.identical == 0);
  CHECK(r.empty == 0);
  CHECK(r.tree == 0);
  CHECK(r.varlen == 0);
  CHECK(r.oracle == 0);
  return r.state || r.keys || r.values || r.held || r.history || r.direct || r.lse ||
         r.identical || r.empty || r.tree || r.varlen || r.oracle;
}

/// Row widths of a cache: keys d, values dv per kv head; a latent cache's values are the first
/// dv elements of its key rows (stride d), others' rows of their own (stride dv).
struct Widths {
  Index kv_heads = 1, d = 16, dv = 16;
  bool latent = false;
  bool turned_in_double = false;  // double storage from double rows: every turn in double
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
      const double noise = w.turned_in_double ? 1e-12 : 4e-7;  // float turns: ~1e-7
      const double tol = t.rounds * (0.71 * sp.relative + noise) * norm +
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

// ---- log-sum-exp -------------------------------------------------------------------------------
// attention.hpp: lse[b, i, h] = log(sum_j exp(s_j)) (natural log) over the keys the row sees,
// s_j = the final logit: scale q.k (times the query temperature), soft-capped, plus ALiBi;
// exp(sink_h) included when sinks are set; -inf for a row that sees no key. The oracle below
// writes the logits out in long double from that definition and takes which keys a row sees
// from posenc::reference::attention's weights (exactly 0 where masked); it also checks that
// its logits are the reference's: s_j - lse = log(weight_j) for every visible key.
// Tolerance: the kernel keeps lse = m + log(l) in float; its logits carry the ~1e-6 absolute
// error of kOutputTol's note, so lse agrees to 1.5e-6 at worst over the sweep (the failure
// message prints the ratio); a missing scale, sink or max term moves it by far more.
constexpr double kLseTol = 2e-5;

/// t(pos) of attention_types.hpp's TemperatureForm, written from the formulas there.
long double temperature(std::int64_t pos, const posenc::AttentionTemperature& t) {
  const auto x = static_cast<long double>(pos);
  if (t.form == TemperatureForm::kXai) {
    return pos > t.temperature_len
               ? std::log2(x) / std::log2(static_cast<long double>(t.temperature_len))
               : 1.0L;
  }
  const long double step = t.form == TemperatureForm::kLlama4 ? x + 1.0L : x;
  return 1.0L + t.attn_scale * std::log1p(std::floor(step / t.floor_scale));
}

/// The lse of every row [batch, q_len, heads] from the reference's inputs (see above); rows
/// whose logits disagree with the reference's weights count in oracle.
std::vector<double> reference_lse(Index batch, Index q_len, Index k_len, Index heads,
                                  Index kv_heads, Index d, Index dv,
                                  const std::vector<double>& q, const std::vector<double>& k,
                                  const std::vector<double>& v,
                                  const std::vector<std::int64_t>& qpos,
                                  const std::vector<std::int64_t>& kpos,
                                  const std::vector<std::uint8_t>& tree,
                                  const AttentionParams& params, int& oracle) {
  std::vector<double> out(at(batch * q_len * heads * dv)), w(at(batch * heads * q_len * k_len));
  AttentionMetadata meta;
  meta.query_positions = posenc::PositionIdsView(qpos.data(), batch, q_len);
  meta.key_positions = posenc::PositionIdsView(kpos.data(), batch, k_len);
  if (!tree.empty()) {
    meta.tree_mask = ConstTensorView<std::uint8_t, 3>(tree.data(), batch, q_len, q_len);
  }
  posenc::reference::attention<double>(
      ConstTensorView<double, 4>(q.data(), batch, q_len, heads, d),
      ConstTensorView<double, 4>(k.data(), batch, k_len, kv_heads, d),
      ConstTensorView<double, 4>(v.data(), batch, k_len, kv_heads, dv),
      TensorView<double, 4>(out.data(), batch, q_len, heads, dv), params, meta,
      TensorView<double, 4>(w.data(), batch, heads, q_len, k_len));
  const long double scale =
      params.scale ? *params.scale : 1.0L / std::sqrt(static_cast<long double>(d));
  std::vector<double> lse(at(batch * q_len * heads));
  std::vector<long double> s(at(k_len));
  for (Index b = 0; b < batch; ++b) {
    for (Index i = 0; i < q_len; ++i) {
      const std::int64_t pq = qpos[at(b * q_len + i)];
      for (Index h = 0; h < heads; ++h) {
        const Index g = h / (heads / kv_heads);
        const double* qr = q.data() + ((b * q_len + i) * heads + h) * d;
        const double* wr = w.data() + ((b * heads + h) * q_len + i) * k_len;
        long double top = -std::numeric_limits<long double>::infinity();
        for (Index j = 0; j < k_len; ++j) {
          const double* kr = k.data() + ((b * k_len + j) * kv_heads + g) * d;
          long double dot = 0.0L;
          for (Index c = 0; c < d; ++c) dot += static_cast<long double>(qr[c]) * kr[c];
          long double x = scale * dot;
          if (params.query_temperature) x *= temperature(pq, *params.query_temperature);
          if (params.logit_softcap > 0.0) {
            const long double cap = params.logit_softcap;
            x = cap * std::tanh(x / cap);
          }
          if (!params.alibi_slopes.empty()) {
            const long double slope = params.alibi_slopes[at(h)];
            const auto diff = static_cast<long double>(kpos[at(b * k_len + j)] - pq);
            x += params.mask == MaskMode::kCausal ? slope * diff : -slope * std::fabs(diff);
          }
          s[at(j)] = x;
          if (wr[j] > 0.0) top = std::max(top, x);
        }
        const bool sink = !params.sink_logits.empty();
        const long double sink_logit = sink ? params.sink_logits[at(h)] : 0.0L;
        if (sink) top = std::max(top, sink_logit);
        long double sum = sink ? std::exp(sink_logit - top) : 0.0L;
        for (Index j = 0; j < k_len; ++j) {
          if (wr[j] > 0.0) sum += std::exp(s[at(j)] - top);
        }
        const long double l =
            sum > 0.0L ? top + std::log(sum) : -std::numeric_limits<long double>::infinity();
        lse[at((b * q_len + i) * heads + h)] = static_cast<double>(l);
        for (Index j = 0; j < k_len; ++j) {
          if (wr[j] > 0.0 && !(std::fabs(static_cast<double>(s[at(j)] - l) - std::log(wr[j])) <=
                               1e-9 * (1.0 + std::fabs(static_cast<double>(l))))) {
            ++oracle;
            break;
          }
        }
      }
    }
  }
  return lse;
}

/// Counts the lse entries off the oracle by more than kLseTol (-inf must be -inf).
int compare_lse(const std::vector<float>& got, const std::vector<double>& want, const char* what,
                Index heads, Report& r) {
  int bad = 0;
  for (std::size_t e = 0; e < got.size(); ++e) {
    const double g = got[e], diff = std::fabs(g - want[e]);
    const bool ok = std::isinf(want[e]) ? g == want[e] : diff <= kLseTol;
    if (!std::isinf(want[e])) r.worst_lse = std::max(r.worst_lse, ok ? diff / kLseTol : 1e300);
    if (!ok && bad++ == 0) {
      std::ostringstream os;
      os.precision(9);
      os << what << ": row (b, i) = " << e / at(heads) << " head " << e % at(heads) << ": got "
         << g << " want " << want[e];
      r.note(os.str());
    }
  }
  return bad;
}

/// Counts the elements whose bits differ (the header promises the same kernel on the same
/// inputs).
int count_different(const std::vector<float>& a, const std::vector<float>& b, const char* what,
                    Report& r) {
  int bad = 0;
  for (std::size_t e = 0; e < a.size(); ++e) {
    if (std::memcmp(&a[e], &b[e], sizeof(float)) != 0 && bad++ == 0) {
      std::ostringstream os;
      os.precision(9);
      os << what << ": element " << e << ": " << a[e] << " vs " << b[e];
      r.note(os.str());
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
  bool double_input = false;  // double storage appended from double rows (turned in double)
  Scheme scheme = Scheme::kNone;
  bool partial = false;
  KvScales scales;
  AttentionParams params;
  Widths widths() const { return {kv_heads, d, dv, latent, double_input}; }
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
  // Added later still, from a third stream: double storage (kv_cache.hpp and
  // paged_kv_cache.hpp accept it), appended from float rows (turned in float) or double ones.
  SplitMix64 more(seed ^ 0x0D0B1E5EEDULL);
  if (c.storage == Storage::kFloat && coin(more, 0.25)) {
    c.storage = Storage::kDouble;
    c.double_input = coin(more, 0.5);
  }
  return c;
}

std::string describe(const Common& c) {
  std::ostringstream os;
  os.precision(4);
  os << "#" << c.index << " (seed " << c.seed << "): " << name(c.storage) << " heads " << c.heads
     << " kv_heads " << c.kv_heads << " head_dim " << c.d << " " << name(c.scheme)
     << (c.partial ? " partial" : "") << (c.double_input ? " double input" : "");
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
  t.add("double input", c.double_input);
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
    const auto put = [&](const auto& keys, const auto& values) {
      using In = typename std::decay_t<decltype(keys)>::value_type;
      const ConstTensorView<In, 4> kv(keys.data(), k_.batch, n, c_.kv_heads, c_.d);
      if (c_.latent) {
        cache_.append_latent(kv, positions, valid_view);
      } else {
        cache_.append(kv, ConstTensorView<In, 4>(values.data(), k_.batch, n, c_.kv_heads, c_.dv),
                      positions, valid_view);
      }
    };
    // Double rows only into double storage: an E4M3 cache does not compile with double input
    // here (posenc/detail/numeric.hpp's std::max(uint64_t, unsigned long long); see the note).
    if constexpr (std::is_same_v<T, double>) {
      if (c_.double_input) {
        put(std::vector<double>(k.begin(), k.end()), std::vector<double>(v.begin(), v.end()));
      } else {
        put(k, v);
      }
    } else {
      put(k, v);
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
      : p_(p), c_(p.c), rng_(p.c.seed + 1), extra_(p.c.seed ^ 0x1E5EDA7AULL),
        pool_(make_pool<T>(p)) {
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
      append(s, len, rng_);
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
      // Added later, drawn from extra_ only: a draft tree verified by attention_paged's
      // tree-mask overload in a forked child, released afterwards (attention_paged_latent has
      // no tree overload: latent pools skip it).
      if (!failed_ && !c_.latent && coin(extra_, 0.35)) {
        tree_verify();
        tally.add("paged tree");
        tally.add("paged tree on a windowed pool", p_.window > 0);
        tally.add("paged tree sinks", !c_.params.sink_logits.empty());
        tally.add("paged tree fp8", is_fp8(c_.storage));
      }
    }
    if (!failed_) append_all();
    tally.add("windowed pool", p_.window > 0);
    tally.add("history beyond dropped pages", dropped_checked_ > 0);
    tally.add("page size 1", p_.page_size == 1);
    tally.add("page size 16", p_.page_size == 16);
    tally.add("attention_paged_latent", latent_direct_ > 0);
    tally.add("attend lse", attend_lse_ > 0);
    tally.add("attention_paged lse", direct_lse_ > 0);
    tally.add("attention_paged_latent lse", c_.latent && direct_lse_ > 0);
    tally.add("attention_paged on a windowed pool", remapped_ > 0);
    tally.add("bit-identical to attend", identical_ > 0);
    tally.add("bit-identical rope", plan_ && identical_ > 0);
    tally.add("bit-identical fp8", is_fp8(c_.storage) && identical_ > 0);
    tally.add("rows with no key", empty_rows_ > 0);
    tally.add("rows with no key, sinks", empty_rows_ > 0 && !c_.params.sink_logits.empty());
    tally.add("seq_len 0", zero_len_ > 0);
    tally.add("attention_paged_varlen", varlen_ > 0);
    tally.add("varlen q_len 0", varlen_skip_ > 0);
  }

  struct Seq {
    std::vector<Token> toks;
    Index last_chunk = 0;
  };

  /// n tokens to sequence s, drawn from rng (rng_, or extra_ for the draft tokens added later).
  void append(std::int64_t s, Index n, SplitMix64& rng) {
    const Index row = c_.kv_heads * c_.d, vrow = c_.kv_heads * c_.dv;
    const auto k = random_floats(rng, n * row);
    const auto v = c_.latent ? std::vector<float>() : random_floats(rng, n * vrow);
    log_ << (c_.latent ? "append_latent(" : "append(") << s << ", n=" << n << "); ";
    const auto put = [&](const auto& keys, const auto& values) {
      using In = typename std::decay_t<decltype(keys)>::value_type;
      const ConstTensorView<In, 3> kv(keys.data(), n, c_.kv_heads, c_.d);
      if (c_.latent) {
        pool_.append_latent(s, kv);
      } else {
        pool_.append(s, kv, ConstTensorView<In, 3>(values.data(), n, c_.kv_heads, c_.dv));
      }
    };
    // Double rows only into double storage: an E4M3 cache does not compile with double input
    // here (posenc/detail/numeric.hpp's std::max(uint64_t, unsigned long long); see the note).
    if constexpr (std::is_same_v<T, double>) {
      if (c_.double_input) {
        put(std::vector<double>(k.begin(), k.end()), std::vector<double>(v.begin(), v.end()));
      } else {
        put(k, v);
      }
    } else {
      put(k, v);
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
      append(s, coin(rng_, 0.5) ? 1 : irange(rng_, 1, 5), rng_);
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

  /// The oracle's rows of sequence id's len tokens, slots = positions: the verified stored
  /// rows of the pages it holds, the model's of pages a window dropped (which it must mask).
  void gather(std::int64_t id, Report& r, std::vector<double>& k, std::vector<double>& v,
              std::vector<std::int64_t>& kpos) {
    Seq& seq = seqs_[id];
    const auto& pages = pool_.pages(id);
    const Plan* plan = plan_ ? &*plan_ : nullptr;
    const Index ps = p_.page_size;
    for (Index t = 0; t < static_cast<Index>(seq.toks.size()); ++t) {
      const std::int32_t page = pages[at(t / ps)];
      if (page == p_.num_pages) {  // dropped by the window: the oracle must mask it
        ++dropped_checked_;
        model_rows(seq.toks[at(t)], plan, c_.kv_heads, c_.d, k, v);
      } else {
        const T* ks = &pool_.key_pages()(page, t % ps, 0, 0);
        const T* vs = c_.latent ? ks : &pool_.value_pages()(page, t % ps, 0, 0);
        verify_token(ks, vs, seq.toks[at(t)], plan, c_.widths(), c_.scales,
                     "seq=" + std::to_string(id) + " slot=" + std::to_string(t), r, k, v);
      }
      kpos.push_back(t);
    }
  }

  /// A page table of the pool for attention_paged: a sliding-window pool's dropped pages
  /// (id num_pages, outside key_pages()) pointed at a random page of the pool, whatever it
  /// holds: the window must mask those slots.
  std::vector<std::int32_t> direct_table(std::vector<std::int32_t> table) {
    for (auto& page : table) {
      if (page == p_.num_pages) {
        page = static_cast<std::int32_t>(irange(extra_, 0, p_.num_pages - 1));
        ++remapped_;
      }
    }
    return table;
  }

  /// q [B, q_len, heads, d] rotated as PagedKvCache::attend rotates it (posenc's float RoPE at
  /// slots starts[b] + i): the very inputs of the pool's kernel call.
  std::vector<float> pool_queries(std::vector<float> q, const std::vector<std::int64_t>& starts,
                                  Index q_len) {
    if (plan_) {
      const auto B = static_cast<Index>(starts.size());
      posenc::apply_rope_inplace<float>(
          posenc::rope_heads<float>(TensorView<float, 4>(q.data(), B, q_len, c_.heads, c_.d)),
          posenc::RopePositions::contiguous_from(
              ConstTensorView<std::int64_t, 1>(starts.data(), B), q_len),
          plan_->lib, plan_->layout);
    }
    return q;
  }

  /// attention_paged (attention_paged_latent for a latent pool) over the pool's pages; false
  /// when the call does not apply (FP8 latent pages, or a tree on a latent pool).
  bool direct(const std::vector<float>& q, Index B, Index q_len,
              const std::vector<std::int32_t>& table, const std::vector<std::int64_t>& lens,
              std::vector<float>& out, std::vector<float>* lse, const AttentionParams& params,
              const std::vector<std::uint8_t>& tree = {}) {
    const Index H = c_.heads;
    const ConstTensorView<float, 4> Q(q.data(), B, q_len, H, c_.d);
    const ConstTensorView<std::int32_t, 2> pt(table.data(), B,
                                               static_cast<Index>(table.size()) / B);
    const ConstTensorView<std::int64_t, 1> lv(lens.data(), B);
    const TensorView<float, 4> O(out.data(), B, q_len, H, c_.dv);
    std::optional<TensorView<float, 3>> L;
    if (lse) L = TensorView<float, 3>(lse->data(), B, q_len, H);
    if (c_.latent) {
      if constexpr (kIsFp8<T>) {
        return false;
      } else {
        if (!tree.empty()) return false;
        posenc::attention_paged_latent<float, T>(Q, pool_.key_pages(), pt, lv, O, params,
                                                 nullptr, L);
        return true;
      }
    }
    if (tree.empty()) {
      posenc::attention_paged<float, T>(Q, pool_.key_pages(), pool_.value_pages(), pt, lv, O,
                                        params, nullptr, L, c_.scales);
    } else {
      posenc::attention_paged<float, T>(
          Q, pool_.key_pages(), pool_.value_pages(), pt, lv, O,
          ConstTensorView<std::uint8_t, 3>(tree.data(), B, q_len, q_len), params, nullptr, L,
          c_.scales);
    }
    return true;
  }

  void attend(const std::vector<std::int64_t>& ids, Index q_len) {
    const auto B = static_cast<Index>(ids.size());
    const Index H = c_.heads, D = c_.d, DV = c_.dv;
    const auto q = random_floats(rng_, B * q_len * H * D);
    std::vector<float> out(at(B * q_len * H * DV), 1000.0f);
    // Added later (extra_): the optional lse of attend / attention_paged.
    const bool with_lse = coin(extra_, 0.6);
    std::vector<float> lse(at(B * q_len * H), 1000.0f);
    log_ << "attend({";
    for (const auto s : ids) log_ << s << ' ';
    log_ << "}, q_len=" << q_len << (with_lse ? ", lse" : "") << "); ";
    std::optional<TensorView<float, 3>> lse_view;
    if (with_lse) lse_view = TensorView<float, 3>(lse.data(), B, q_len, H);
    pool_.attend(ids, ConstTensorView<float, 4>(q.data(), B, q_len, H, D),
                 TensorView<float, 4>(out.data(), B, q_len, H, DV), c_.params, lse_view);
    attend_lse_ += with_lse;
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
    if (pool_.sequences() != static_cast<Index>(seqs_.size())) {
      ++r.state;
      r.note("sequences() = " + std::to_string(pool_.sequences()) + ", model " +
             std::to_string(seqs_.size()));
    }
    if (pool_.free_pages() != p_.num_pages - static_cast<Index>(holders.size())) {
      ++r.state;
      r.note("free pages " + std::to_string(pool_.free_pages()) + ", expected " +
             std::to_string(p_.num_pages - static_cast<Index>(holders.size())));
    }
    // Oracle per sequence (batch 1): the whole history at slots = positions.
    std::vector<double> want(out.size()), want_lse(lse.size());
    std::vector<std::int32_t> table;
    std::vector<std::int64_t> lens, starts;
    Index max_pages = 1;
    for (const auto s : ids) {
      max_pages = std::max(max_pages, static_cast<Index>(pool_.pages(s).size()));
    }
    for (Index b = 0; b < B && r.state == 0; ++b) {
      const auto& pages = pool_.pages(ids[at(b)]);
      const auto len = static_cast<Index>(seqs_[ids[at(b)]].toks.size());
      std::vector<double> k, v;
      std::vector<std::int64_t> kpos, qpos;
      gather(ids[at(b)], r, k, v, kpos);
      for (Index i = 0; i < q_len; ++i) qpos.push_back(len - q_len + i);
      const std::vector<float> qb(q.begin() + b * q_len * H * D,
                                  q.begin() + (b + 1) * q_len * H * D);
      const auto qt = turned_queries(qb, 1, q_len, H, D, qpos, plan);
      const auto o = reference_out(1, q_len, len, H, c_.kv_heads, D, DV, qt, k, v, qpos, kpos,
                                   {}, {}, c_.params);
      std::copy(o.begin(), o.end(), want.begin() + b * q_len * H * DV);
      const auto l = reference_lse(1, q_len, len, H, c_.kv_heads, D, DV, qt, k, v, qpos, kpos,
                                   {}, c_.params, r.oracle);
      std::copy(l.begin(), l.end(), want_lse.begin() + b * q_len * H);
      table.insert(table.end(), pages.begin(), pages.end());
      table.resize(at((b + 1) * max_pages), 0);
      lens.push_back(len);
      starts.push_back(len - q_len);
    }
    if (r.state == 0) {
      r.held = compare(out, want, "PagedKvCache::attend vs reference", H, DV, r);
      if (with_lse) r.lse += compare_lse(lse, want_lse, "PagedKvCache::attend lse", H, r);
      // attention_paged on the pool's own pages (attention_paged_latent takes no FP8 pages,
      // nor scales: those pools are checked through PagedKvCache::attend only), queries turned
      // by the test. A windowed pool's dropped pages point at a page of zeros outside
      // key_pages(): the table given here points them at some page of the pool instead.
      const auto dtable = direct_table(table);
      std::vector<float> qt(q.size()), got(out.size(), 1000.0f), got_lse(lse.size(), 1000.0f);
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
      const char* what = c_.latent ? "attention_paged_latent" : "attention_paged";
      if (direct(qt, B, q_len, dtable, lens, got, with_lse ? &got_lse : nullptr, c_.params)) {
        latent_direct_ += c_.latent;
        direct_lse_ += with_lse;
        r.direct = compare(got, want, what, H, DV, r);
        if (with_lse) r.lse += compare_lse(got_lse, want_lse, "attention_paged lse", H, r);
        // The same kernel call as attend's (paged_kv_cache.hpp: attend runs attention_paged
        // over the pool) on the same queries: bit-identical outputs and lse. Without RoPE the
        // test's queries are those already.
        if (plan_) {
          std::fill(got.begin(), got.end(), 1000.0f);
          std::fill(got_lse.begin(), got_lse.end(), 1000.0f);
          direct(pool_queries(q, starts, q_len), B, q_len, dtable, lens, got,
                 with_lse ? &got_lse : nullptr, c_.params);
        }
        r.identical = count_different(got, out, "attention_paged vs attend, bits", r);
        if (with_lse) {
          r.identical += count_different(got_lse, lse, "attention_paged vs attend lse, bits", r);
        }
        identical_ += r.identical == 0;
        if (c_.params.mask == MaskMode::kCausal && coin(extra_, 0.3)) {
          short_sequence(dtable, max_pages, lens[0], r);
        }
        if constexpr (!kIsFp8<T>) {
          if (!c_.latent && coin(extra_, 0.4)) {
            varlen(pool_queries(q, starts, q_len), B, q_len, dtable, lens, want, want_lse, r);
          }
        }
      }
    }
    failed_ = report(r, describe(p_), log_.str()) || failed_;
  }

  /// attention_paged of one sequence given fewer keys than queries: the first listed
  /// sequence's page-table row with seq_len in [0, q_len) (attention_paged: "a sequence with
  /// seq_len 0, or a query row with no key before it, gives zeros (lse -inf)"). The rows that
  /// see keys are the reference's over the keys as stored; the others must be 0 with lse -inf
  /// (with sinks the definition's log(exp(sink_h)) = sink_h, which the kernel gives: see the
  /// note on the file's lse oracle).
  void short_sequence(const std::vector<std::int32_t>& table, Index max_pages, Index first_len,
                      Report& r) {
    const Index H = c_.heads, G = c_.kv_heads, D = c_.d, DV = c_.dv, ps = p_.page_size;
    const Index q_len = irange(extra_, 1, 4);
    const Index n = std::min<Index>(irange(extra_, 0, q_len - 1), first_len);
    const std::vector<std::int32_t> row(table.begin(), table.begin() + max_pages);
    const auto q = random_floats(extra_, q_len * H * D);
    std::vector<float> out(at(q_len * H * DV), 1000.0f), lse(at(q_len * H), 1000.0f);
    log_ << "attention_paged(seq_len " << n << ", q_len " << q_len << "); ";
    direct(q, 1, q_len, row, {n}, out, &lse, c_.params);
    ++empty_rows_;
    zero_len_ += n == 0;
    std::vector<double> want(out.size(), 0.0), want_lse(lse.size());
    const Index blank = q_len - n;  // rows at slots < 0: no key
    for (Index i = 0; i < blank; ++i) {
      for (Index h = 0; h < H; ++h) {
        want_lse[at(i * H + h)] = c_.params.sink_logits.empty()
                                      ? -std::numeric_limits<double>::infinity()
                                      : c_.params.sink_logits[at(h)];
      }
    }
    if (n > 0) {
      // The keys as stored (decoded), at slots 0 .. n - 1 through the row.
      std::vector<double> k, v, qd(q.begin() + blank * H * D, q.end());
      std::vector<std::int64_t> pos;
      for (Index t = 0; t < n; ++t) {
        const std::int32_t page = row[at(t / ps)];
        for (Index g = 0; g < G; ++g) {
          const T* ks = &pool_.key_pages()(page, t % ps, g, 0);
          const T* vs = c_.latent ? ks : &pool_.value_pages()(page, t % ps, g, 0);
          for (Index c = 0; c < D; ++c) k.push_back(decode(ks[c], c_.scales.k_of(g)));
          for (Index c = 0; c < DV; ++c) v.push_back(decode(vs[c], c_.scales.v_of(g)));
        }
        pos.push_back(t);
      }
      const auto o = reference_out(1, n, n, H, G, D, DV, qd, k, v, pos, pos, {}, {}, c_.params);
      std::copy(o.begin(), o.end(), want.begin() + blank * H * DV);
      const auto l =
          reference_lse(1, n, n, H, G, D, DV, qd, k, v, pos, pos, {}, c_.params, r.oracle);
      std::copy(l.begin(), l.end(), want_lse.begin() + blank * H);
    }
    r.empty += compare(out, want, "attention_paged, seq_len < q_len", H, DV, r);
    r.empty += compare_lse(lse, want_lse, "attention_paged lse, seq_len < q_len", H, r);
  }

  /// attention_paged_varlen over the same sequences, each with its own q_len_b in [0, q_len]
  /// (0: skipped), the last q_len_b of its queries packed: each row is the row of the same
  /// query at the same slot above (the mask, windows, chunks, ALiBi and temperature of a row
  /// depend on its slot only).
  void varlen(const std::vector<float>& q, Index B, Index q_len,
              const std::vector<std::int32_t>& table, const std::vector<std::int64_t>& lens,
              const std::vector<double>& want, const std::vector<double>& want_lse, Report& r) {
    const Index H = c_.heads, D = c_.d, DV = c_.dv;
    std::vector<std::int64_t> cu{0};
    std::vector<float> packed;
    std::vector<double> w, wl;
    for (Index b = 0; b < B; ++b) {
      Index n = irange(extra_, 0, q_len);
      if (b == B - 1 && cu.back() == 0) n = std::max<Index>(n, 1);
      varlen_skip_ += n == 0;
      cu.push_back(cu.back() + n);
      const auto row0 = at((b * q_len + q_len - n) * H);
      packed.insert(packed.end(), q.begin() + row0 * D, q.begin() + (row0 + n * H) * D);
      w.insert(w.end(), want.begin() + row0 * DV, want.begin() + (row0 + n * H) * DV);
      wl.insert(wl.end(), want_lse.begin() + row0, want_lse.begin() + row0 + n * H);
    }
    const Index total = cu.back();
    std::vector<float> out(at(total * H * DV), 1000.0f), lse(at(total * H), 1000.0f);
    log_ << "attention_paged_varlen(total_q " << total << "); ";
    posenc::attention_paged_varlen<float, T>(
        ConstTensorView<float, 3>(packed.data(), total, H, D), pool_.key_pages(),
        pool_.value_pages(),
        ConstTensorView<std::int32_t, 2>(table.data(), B, static_cast<Index>(table.size()) / B),
        ConstTensorView<std::int64_t, 1>(lens.data(), B),
        ConstTensorView<std::int64_t, 1>(cu.data(), B + 1),
        TensorView<float, 3>(out.data(), total, H, DV), c_.params, nullptr,
        TensorView<float, 2>(lse.data(), total, H));
    ++varlen_;
    r.varlen += compare(out, w, "attention_paged_varlen", H, DV, r);
    r.varlen += compare_lse(lse, wl, "attention_paged_varlen lse", H, r);
  }

  /// A draft tree on a forked child of a random sequence (vLLM's speculative decoding over
  /// the block table): n draft tokens appended to the child, each listed after its parent,
  /// verified in one attention_paged call with the tree mask, then the child is released. The
  /// pool stores keys at their slots (paged positions are slots), so the queries are turned
  /// there too and the reference gets the slots as positions: this checks the mask over
  /// pages (ancestors, siblings, a window counting the path), not draft positions. ALiBi,
  /// chunks and temperatures are refused with a tree (attention_paged.hpp): dropped here, and
  /// a windowed pool whose layer is chunked only gets a window of its own in [1, W].
  void tree_verify() {
    AttentionParams tp = c_.params;
    tp.alibi_slopes.clear();
    tp.attention_chunk_size = 0;
    tp.query_temperature.reset();
    tp.mask = MaskMode::kCausal;
    if (p_.window > 0 && tp.sliding_window == 0) tp.sliding_window = irange(extra_, 1, p_.window);
    auto it = seqs_.begin();
    std::advance(it, irange(extra_, 0, static_cast<Index>(seqs_.size()) - 1));
    const std::int64_t parent = it->first;
    const std::int64_t child = pool_.fork(parent);
    log_ << "tree: fork(" << parent << ") = " << child << "; ";
    seqs_[child] = seqs_[parent];
    const Index n = irange(extra_, 2, 5);
    const std::int64_t limit = tp.sliding_window;  // paths must fit the window
    std::vector<Index> up(at(n)), depth(at(n));
    for (Index t = 0; t < n; ++t) {
      up[at(t)] = irange(extra_, -1, t - 1);
      depth[at(t)] = up[at(t)] < 0 ? 1 : depth[at(up[at(t)])] + 1;
      if (limit > 0 && depth[at(t)] > limit) {
        up[at(t)] = -1;
        depth[at(t)] = 1;
      }
    }
    std::vector<std::uint8_t> tree(at(n * n), 0);
    for (Index i = 0; i < n; ++i) {
      for (Index x = i; x >= 0; x = up[at(x)]) tree[at(i * n + x)] = 1;
    }
    log_ << "parents [";
    for (const Index u : up) log_ << u << ' ';
    log_ << "] ";
    append(child, n, extra_);
    const Index H = c_.heads, D = c_.d, DV = c_.dv;
    const Index len = pool_.length(child);
    const auto q = random_floats(extra_, n * H * D);
    const bool with_lse = coin(extra_, 0.6);
    Report r;
    std::vector<double> k, v;
    std::vector<std::int64_t> kpos, qpos;
    gather(child, r, k, v, kpos);
    for (Index i = 0; i < n; ++i) qpos.push_back(len - n + i);
    const Plan* plan = plan_ ? &*plan_ : nullptr;
    const auto qt = turned_queries(q, 1, n, H, D, qpos, plan);
    const std::vector<float> qf(qt.begin(), qt.end());
    std::vector<float> out(at(n * H * DV), 1000.0f), lse(at(n * H), 1000.0f);
    log_ << "attention_paged(tree, q_len=" << n << (with_lse ? ", lse" : "") << "); ";
    direct(qf, 1, n, direct_table(pool_.pages(child)), {len}, out, with_lse ? &lse : nullptr,
           tp, tree);
    if (r.keys == 0 && r.values == 0) {
      const auto want =
          reference_out(1, n, len, H, c_.kv_heads, D, DV, qt, k, v, qpos, kpos, {}, tree, tp);
      r.tree = compare(out, want, "attention_paged with a tree mask", H, DV, r);
      if (with_lse) {
        const auto wl = reference_lse(1, n, len, H, c_.kv_heads, D, DV, qt, k, v, qpos, kpos,
                                      tree, tp, r.oracle);
        r.tree += compare_lse(lse, wl, "attention_paged lse with a tree mask", H, r);
      }
    }
    log_ << "release(" << child << "); ";
    pool_.release(child);
    seqs_.erase(child);
    failed_ = report(r, describe(p_) + " | tree params " + describe(tp), log_.str()) || failed_;
  }

  const PagedConfig& p_;
  const Common& c_;
  SplitMix64 rng_;
  SplitMix64 extra_;  // the options added later: draws of their own (see draw_common)
  posenc::PagedKvCache<T> pool_;
  std::optional<Plan> plan_;
  std::map<std::int64_t, Seq> seqs_;
  std::ostringstream log_;
  int dropped_checked_ = 0;
  int latent_direct_ = 0;
  int attend_lse_ = 0, direct_lse_ = 0, remapped_ = 0, identical_ = 0, empty_rows_ = 0;
  int zero_len_ = 0, varlen_ = 0, varlen_skip_ = 0;
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
      case Storage::kDouble: KvRun<double>(k).run(tally); break;
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
                           "latent rolling evicted", "latent value = whole row", "double",
                           "double input"},
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
      case Storage::kDouble: PagedRun<double>(p).run(tally); break;
    }
  }
  require_coverage(tally, {"float", "bfloat16", "half", "fp8_e4m3", "alibi", "rope-interleaved",
                           "rope-half-split", "window", "chunk", "sinks", "softcap", "fork",
                           "past a key tile", "release", "update_rope", "windowed pool",
                           "history beyond dropped pages", "page size 1", "page size 16",
                           "fp8_e5m2", "per-head e5m2 scales", "v_head_dim narrower",
                           "v_head_dim wider", "v_head_dim fork", "latent", "latent rope",
                           "latent fp8", "latent fork", "latent update_rope",
                           "attention_paged_latent", "double", "double input", "attend lse",
                           "attention_paged lse", "attention_paged_latent lse",
                           "attention_paged on a windowed pool", "bit-identical to attend",
                           "bit-identical rope", "bit-identical fp8", "rows with no key",
                           "rows with no key, sinks", "seq_len 0", "attention_paged_varlen",
                           "varlen q_len 0", "paged tree", "paged tree on a windowed pool",
                           "paged tree sinks", "paged tree fp8"},
                   3);
}
