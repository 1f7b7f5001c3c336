// libFuzzer target for RoPE frequency planning (scripts/fuzz.sh builds and runs it).
// Contract under test (rope_params.hpp, rope_frequencies.hpp, diagnostics.hpp): for any
// RopeParams -- every field drawn from typical values, the edges of a double (0, -0, the
// smallest subnormal, DBL_MAX, 1 +- ulp, NaN, +-Inf) and random bit patterns, invalid enum
// values, factor lists of any length -- compute_rope_frequencies either throws
// std::invalid_argument naming its function, or returns a plan that
//   - has rotary_dim / 2 frequencies, each finite and >= 0, a finite attention_factor > 0 and
//     softmax_scale_multiplier > 0 and a finite effective_theta (an overflow is an error the
//     caller must hear of, not an angle of NaN);
//   - agrees with posenc::reference::rope_frequencies (long double, written apart from the
//     planner) within an error bound derived from the conditioning of each recipe's formula
//     (below, `Bound`);
// RopePlan follows HF's dynamic_rope_update over a random run of sequence lengths (a model of
// its state here), returns true exactly when it re-plans, and keeps its plan when update()
// throws; with_freq_factors divides or throws; analyze_rope_length accepts what the planner
// accepts. Any other exception, a crash or a sanitizer report is a bug.
//
// Without libFuzzer (-DPOSENC_FUZZ_MAIN) the file builds a driver that runs random inputs:
//   g++ -std=c++17 -O2 -DPOSENC_FUZZ_MAIN -I include -isystem /usr/include/eigen3
//       tests/fuzz/fuzz_rope_plan.cpp -o fuzz_rope_plan   (then ./fuzz_rope_plan 100000)

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <posenc/diagnostics.hpp>
#include <posenc/reference/rope.hpp>
#include <posenc/rope_frequencies.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "fuzz_support.hpp"

namespace {

using posenc_fuzz::Choices;
using Index = Eigen::Index;
using ld = long double;
using posenc::RopeScalingType;

constexpr double kEps = std::numeric_limits<double>::epsilon();
constexpr double kInf = std::numeric_limits<double>::infinity();

std::string g_context;
/// The standalone driver's seed of this input (0 under libFuzzer): `./target 1 SEED` replays it.
std::uint64_t g_seed = 0;

/// What the runs reached (printed by the standalone driver): plans formed per rope_type,
/// compared pair by pair, and left to the properties only (Bound::skip_inv).
struct Tally {
  long accepted[9] = {}, rejected = 0, compared = 0, skipped = 0, replans = 0;
};
Tally g_tally;

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "fuzz_rope_plan (seed %llu): %s\n  params: %s\n",
               static_cast<unsigned long long>(g_seed), what.c_str(), g_context.c_str());
  std::fflush(stderr);
  __builtin_trap();
}

/// Per input: the share of fields drawn from the edges of their format (0 in half the inputs,
/// so that most plans form and reach the comparison).
int g_wild_percent = 0;

/// A double from the whole range: usually in [lo, hi], with g_wild_percent at an edge of the
/// format.
double wild(Choices& in, double lo, double hi) {
  switch (in.chance(g_wild_percent) ? in.in(0, 9) : 10) {
    case 0:
      return 0.0;
    case 1:
      return -0.0;
    case 2:
      return std::numeric_limits<double>::denorm_min();
    case 3:
      return std::numeric_limits<double>::max();
    case 4:
      return std::numeric_limits<double>::quiet_NaN();
    case 5:
      return in.chance(50) ? kInf : -kInf;
    case 6:
      return in.chance(50) ? std::nextafter(1.0, 2.0) : std::nextafter(1.0, 0.0);
    case 7:
      return std::ldexp(1.0, static_cast<int>(in.in(-1074, 1023)));  // powers of two
    case 8: {
      std::uint64_t bits = 0;
      for (int b = 0; b < 8; ++b) bits = (bits << 8) | in.byte();
      double v;
      std::memcpy(&v, &bits, sizeof v);
      return v;
    }
    case 9:
      return -std::ldexp(1.0 + static_cast<double>(in.byte()) / 256.0,
                         static_cast<int>(in.in(-20, 20)));
    default: {  // typical: lo..hi, uniform in the exponent or in the value
      const double u = static_cast<double>(in.in(0, 65535)) / 65535.0;
      if (lo > 0.0 && in.chance(50)) return lo * std::pow(hi / lo, u);
      return lo + (hi - lo) * u;
    }
  }
}

std::int64_t wild_int(Choices& in, std::int64_t lo, std::int64_t hi) {
  switch (in.chance(g_wild_percent) ? in.in(0, 6) : 7) {
    case 0:
      return 0;
    case 1:
      return -1;
    case 2:
      return 1;
    case 3:
      return std::numeric_limits<std::int64_t>::max();
    case 4:
      return std::numeric_limits<std::int64_t>::min();
    case 5:
      return std::int64_t{1} << in.in(0, 62);
    case 6:
      return (std::int64_t{1} << in.in(1, 62)) + in.in(-2, 2);
    default:
      return in.in(lo, hi);
  }
}

std::vector<double> wild_list(Choices& in, std::size_t half) {
  std::size_t n = half;
  if (in.chance(8)) n = static_cast<std::size_t>(in.in(0, 2 * static_cast<std::int64_t>(half) + 2));
  std::vector<double> v(n);
  const bool tame = in.chance(70);
  for (auto& x : v)
    x = tame ? 0.5 + static_cast<double>(in.in(0, 255)) / 16.0 : wild(in, 0.5, 64.0);
  return v;
}

std::optional<double> maybe(Choices& in, int percent, double lo, double hi) {
  if (!in.chance(percent)) return std::nullopt;
  return wild(in, lo, hi);
}

posenc::RopeParams draw_params(Choices& in) {
  posenc::RopeParams p;
  p.head_dim = in.chance(85) ? 2 * in.in(1, 160) + (in.chance(10) ? 1 : 0) : wild_int(in, 1, 1100);
  if (in.chance(40)) {
    p.rotary_dim = in.chance(80) ? 2 * in.in(0, std::max<std::int64_t>(1, p.head_dim / 2))
                                 : wild_int(in, 0, 1100);
  }
  if (in.chance(40)) {
    const double nice[] = {0.25, 0.4, 0.5, 0.75, 1.0};
    p.partial_rotary_factor = in.chance(50) ? nice[in.in(0, 4)] : wild(in, 0.05, 1.0);
  }
  if (in.chance(15)) p.rotary_offset = in.chance(80) ? in.in(0, 64) : wild_int(in, 0, 64);
  p.theta = in.chance(75) ? wild(in, 1.5, 1e7) : wild(in, 1.0, 1e300);
  if (in.chance(3)) {
    p.layout = static_cast<posenc::RopeLayout>(in.in(0, 9));
  } else {
    p.layout = in.chance(50) ? posenc::RopeLayout::kInterleaved : posenc::RopeLayout::kHalfSplit;
  }
  const int type = static_cast<int>(in.in(0, 40));
  p.scaling.type = type < 36 ? static_cast<RopeScalingType>(type % 9)
                             : static_cast<RopeScalingType>(9 + type % 4);
  posenc::RopeScaling& sc = p.scaling;
  sc.factor = in.chance(75) ? wild(in, 1.0, 64.0) : wild(in, 1.0, 1e300);
  if (in.chance(70))
    sc.original_max_position_embeddings =
        in.chance(80) ? in.in(1, 1 << 17) : wild_int(in, 1, 1 << 20);
  if (in.chance(60))
    p.max_position_embeddings = in.chance(80) ? in.in(1, 1 << 20) : wild_int(in, 1, 1 << 24);
  if (in.chance(40)) sc.beta_fast = wild(in, 0.5, 64.0);
  if (in.chance(40)) sc.beta_slow = wild(in, 0.1, 8.0);
  sc.attention_factor = maybe(in, 15, 0.5, 4.0);
  if (in.chance(40)) sc.mscale = wild(in, 0.0, 2.0);
  if (in.chance(40)) sc.mscale_all_dim = wild(in, 0.0, 2.0);
  if (in.chance(15)) sc.mscale_slope = wild(in, 0.0, 0.2);
  sc.truncate = in.chance(70);
  if (in.chance(20)) sc.extrapolation_factor = wild(in, 0.0, 1.0);
  sc.mixed_b = maybe(in, 30, 0.1, 8.0);
  if (in.chance(50)) sc.low_freq_factor = wild(in, 0.5, 4.0);
  if (in.chance(50)) sc.high_freq_factor = in.chance(20) ? sc.low_freq_factor : wild(in, 1.0, 8.0);
  // Lists of the resolved width (when it resolves), sometimes of another length.
  std::size_t half = 4;
  try {
    half = static_cast<std::size_t>(posenc::resolved_rotary_dim(p) / 2);
  } catch (const std::invalid_argument&) {
  }
  if (sc.type == RopeScalingType::kLongRope || in.chance(5)) {
    sc.short_factor = wild_list(in, half);
    sc.long_factor = wild_list(in, half);
  }
  sc.short_mscale = maybe(in, 15, 0.5, 2.0);
  sc.long_mscale = maybe(in, 15, 0.5, 2.0);
  if (in.chance(15)) sc.freq_factors = wild_list(in, half);
  return p;
}

std::string describe(const posenc::RopeParams& p) {
  std::ostringstream o;
  o.precision(17);
  const auto& sc = p.scaling;
  const auto opt = [&](const std::optional<double>& v) {
    return v ? std::to_string(*v) : std::string("none");
  };
  o << "head_dim " << p.head_dim << " rotary_dim " << p.rotary_dim << " prf "
    << p.partial_rotary_factor << " offset " << p.rotary_offset << " theta " << p.theta
    << " layout " << static_cast<int>(p.layout) << " type " << static_cast<int>(sc.type)
    << " factor " << sc.factor << " L0 " << sc.original_max_position_embeddings << " max "
    << p.max_position_embeddings << " beta " << sc.beta_fast << "/" << sc.beta_slow << " af "
    << opt(sc.attention_factor) << " mscale " << sc.mscale << "/" << sc.mscale_all_dim << " slope "
    << sc.mscale_slope << " truncate " << sc.truncate << " ext " << sc.extrapolation_factor
    << " mixed_b " << opt(sc.mixed_b) << " lf/hf " << sc.low_freq_factor << "/"
    << sc.high_freq_factor << " lists " << sc.short_factor.size() << "/" << sc.long_factor.size()
    << " table mscale " << opt(sc.short_mscale) << "/" << opt(sc.long_mscale) << " freq_factors "
    << sc.freq_factors.size();
  for (const double f : sc.short_factor) o << " s" << f;
  for (const double f : sc.long_factor) o << " l" << f;
  for (const double f : sc.freq_factors) o << " c" << f;
  return o.str();
}

/// Error bound of the planner's double arithmetic against the long-double reference, per pair
/// and for the two multipliers, from each formula's condition numbers (rope_frequencies.hpp's
/// file comment has the formulas). skip: the double and long-double results may legitimately
/// take different branches (a YaRN correction bound that floor / ceil puts on either side of an
/// integer, the lo == hi guard, Llama-3's one boundary wavelength when lf == hf); only the
/// plan's own properties are checked there.
struct Bound {
  std::vector<double> inv;                       // absolute, per pair
  double attention_factor = 0.0, softmax = 0.0;  // relative
  bool skip_inv = false;
};

/// |d ln x^e| for x^e with x and e carrying relative errors: e (|ln x| + 1).
double pow_cond(double base, double exponent) {
  return std::fabs(exponent) * (std::fabs(std::log(base)) + 2.0) + 2.0;
}

Bound error_bound(const posenc::RopeParams& p, const posenc::RopeFrequencies& got,
                  std::int64_t seq_len) {
  const auto& sc = p.scaling;
  const Index d = got.rotary_dim;
  const double dd = static_cast<double>(d);
  const double s = sc.factor;
  const std::size_t half = got.inv_freq.size();
  const std::int64_t l0i = sc.original_max_position_embeddings > 0
                               ? sc.original_max_position_embeddings
                               : p.max_position_embeddings;
  const double l0 = static_cast<double>(l0i);
  Bound b;
  b.inv.assign(half, 0.0);
  b.attention_factor = 16.0 * kEps;
  b.softmax = 16.0 * kEps;
  // Relative error of the base ladder theta_eff^(-2j/d), theta_eff carrying rel_theta.
  double theta_eff = p.theta, rel_theta = 0.0;
  if (sc.type == RopeScalingType::kNtk) {
    theta_eff = p.theta * std::pow(s, dd / (dd - 2.0));
    rel_theta = kEps * pow_cond(s, dd / (dd - 2.0));
  } else if (sc.type == RopeScalingType::kDynamic) {
    // u = s L / L0 - (s - 1) cancels when s is large and L near L0 (HF's formula, kept for
    // bit parity): past a condition of 1e6 double and long double give unrelated numbers.
    const ld len = std::max(static_cast<ld>(seq_len), static_cast<ld>(l0));
    const ld u = static_cast<ld>(s) * len / l0 - (static_cast<ld>(s) - 1.0L);
    const ld kappa = (static_cast<ld>(s) * len / l0 + s + 1.0L) / u;
    if (!(u > 0.0L) || !(kappa < 1e6L)) b.skip_inv = true;
    const double ud = static_cast<double>(u);
    theta_eff = p.theta * std::pow(ud, dd / (dd - 2.0));
    rel_theta =
        kEps * (4.0 * static_cast<double>(kappa) * dd / (dd - 2.0) + pow_cond(ud, dd / (dd - 2.0)));
  } else if (sc.type == RopeScalingType::kVllmNtk && !sc.mixed_b) {
    theta_eff = p.theta * s;
    rel_theta = 2.0 * kEps;
  }
  std::vector<double> rel(half);
  for (std::size_t j = 0; j < half; ++j) {
    const double x = 2.0 * static_cast<double>(j) / dd;
    rel[j] = 8.0 * kEps * pow_cond(theta_eff, x) + 2.0 * x * rel_theta + 8.0 * kEps;
    if (sc.type == RopeScalingType::kVllmNtk && !sc.mixed_b) {
      rel[j] += 4.0 * kEps * pow_cond(s, 2.0 / dd);
    }
    if (sc.type == RopeScalingType::kVllmNtk && sc.mixed_b) {
      // exp(ln s ((j+1)/(d/2))^m): the exponent's relative error scaled by its size.
      const double m = *sc.mixed_b;
      const double r = (static_cast<double>(j) + 1.0) / (dd / 2.0);
      const double e = std::log(s) * std::pow(r, m);
      if (e != 0.0)
        rel[j] += 8.0 * kEps * std::fabs(e) * (4.0 + m * (std::fabs(std::log(r)) + 2.0));
    }
  }
  const std::vector<double>& w = got.inv_freq;
  for (std::size_t j = 0; j < half; ++j) b.inv[j] = rel[j] * w[j];
  if (sc.type == RopeScalingType::kYarn) {
    // corr(r) = d ln(L0 / (2 pi r)) / (2 ln b): absolute error from the logs' relative ones.
    const auto corr = [&](double r) {
      return dd * std::log(l0 / (r * 2.0 * posenc::detail::kRopePi)) / (2.0 * std::log(p.theta));
    };
    const double lo = corr(sc.beta_fast), hi = corr(sc.beta_slow);
    const double ln_b = std::log(p.theta);
    const double err_c =
        8.0 * kEps *
        (std::fabs(lo) + std::fabs(hi) + dd / ln_b * (4.0 + std::fabs(std::log(l0)) + 1.0 / ln_b));
    const double near_int =
        std::min(std::fabs(lo - std::round(lo)), std::fabs(hi - std::round(hi)));
    double lo_c = lo, hi_c = hi;
    if (sc.truncate) {
      lo_c = std::floor(lo);
      hi_c = std::ceil(hi);
    }
    lo_c = std::max(lo_c, 0.0);
    hi_c = std::min(hi_c, dd - 1.0);
    if ((sc.truncate && near_int <= err_c) || std::fabs(hi_c - lo_c) <= 2.0 * err_c + 0.002) {
      b.skip_inv = true;
    }
    const double span = std::fabs(hi_c - lo_c);
    const double d_ramp = sc.truncate ? 4.0 * kEps * (dd + std::fabs(lo_c)) / span
                                      : (2.0 * err_c + 4.0 * kEps * dd) / span;
    for (std::size_t j = 0; j < half; ++j) {
      const ld th = posenc::reference::rope_base_inv_freq(p.theta, static_cast<Index>(j), d);
      const double gap = static_cast<double>(th - th / s);
      b.inv[j] += std::fabs(gap) * sc.extrapolation_factor * d_ramp + 4.0 * kEps * w[j];
    }
    const auto g_cond = [&](double m) {
      const double t = sc.mscale_slope * m * std::log(s);
      // An infinite g is rejected (require_finite_plan) or not used (m = 0 is absent).
      return s <= 1.0 || !std::isfinite(t) ? 1.0 : (std::fabs(t) + 1.0) / std::fabs(t + 1.0);
    };
    b.attention_factor = 16.0 * kEps * (2.0 + g_cond(sc.mscale) + g_cond(sc.mscale_all_dim));
    b.softmax = 16.0 * kEps * (2.0 + 2.0 * g_cond(sc.mscale_all_dim));
  }
  if (sc.type == RopeScalingType::kLlama3) {
    const double lf = sc.low_freq_factor, hf = sc.high_freq_factor;
    const double l0l = static_cast<double>(sc.original_max_position_embeddings);
    for (std::size_t j = 0; j < half; ++j) {
      const ld th = posenc::reference::rope_base_inv_freq(p.theta, static_cast<Index>(j), d);
      const double wavelen = static_cast<double>(2.0L * posenc::reference::kPi / th);
      const double gap = static_cast<double>(th - th / s);
      if (lf == hf) {
        if (std::fabs(wavelen - l0l / hf) <= 64.0 * kEps * wavelen * (1.0 + rel[j] / kEps)) {
          b.skip_inv = true;
        }
        continue;
      }
      const double ratio = l0l / wavelen;
      const double d_m = 8.0 * (ratio * (rel[j] + 4.0 * kEps) + kEps * (lf + hf)) / (hf - lf);
      b.inv[j] += std::fabs(gap) * d_m;
    }
  }
  if (sc.type == RopeScalingType::kLongRope) {
    for (std::size_t j = 0; j < half; ++j) b.inv[j] += 4.0 * kEps * w[j];
    b.attention_factor = 64.0 * kEps;
  }
  if (!sc.freq_factors.empty()) {
    for (std::size_t j = 0; j < half; ++j) b.inv[j] += 2.0 * kEps * w[j];
  }
  // Results in the subnormal range round to an absolute grid, which a per-pair factor below 1
  // stretches (the plan divides by it after the recipe).
  for (std::size_t j = 0; j < half; ++j) {
    const double stretch = j < sc.freq_factors.size() ? std::min(1.0, sc.freq_factors[j]) : 1.0;
    b.inv[j] += 0x1p-1000 / stretch;
  }
  return b;
}

bool close(double got, ld want_ld, double tol) {
  const double want = static_cast<double>(want_ld);
  if (got == want) return true;
  return std::fabs(got - want) <= tol;
}

void check_plan(const posenc::RopeParams& p, const posenc::RopeFrequencies& f, std::int64_t seq_len,
                const char* what) {
  const std::string at = std::string(what) + " seq_len " + std::to_string(seq_len);
  if (f.rotary_dim <= 0 || f.rotary_dim % 2 != 0 || f.rotary_dim > posenc::kMaxRotaryDim ||
      static_cast<Index>(f.inv_freq.size()) * 2 != f.rotary_dim) {
    fail(at + ": rotary_dim " + std::to_string(f.rotary_dim) + " with " +
         std::to_string(f.inv_freq.size()) + " frequencies");
  }
  if (f.rotary_offset < 0 || f.rotary_offset + f.rotary_dim > f.head_dim ||
      f.head_dim != p.head_dim) {
    fail(at + ": slice [" + std::to_string(f.rotary_offset) + ", +" + std::to_string(f.rotary_dim) +
         ") outside head_dim " + std::to_string(f.head_dim));
  }
  for (std::size_t j = 0; j < f.inv_freq.size(); ++j) {
    if (!(std::isfinite(f.inv_freq[j]) && f.inv_freq[j] >= 0.0)) {
      fail(at + ": inv_freq[" + std::to_string(j) + "] = " + std::to_string(f.inv_freq[j]));
    }
  }
  if (!(std::isfinite(f.attention_factor) && f.attention_factor > 0.0)) {
    fail(at + ": attention_factor = " + std::to_string(f.attention_factor));
  }
  if (!(std::isfinite(f.softmax_scale_multiplier) && f.softmax_scale_multiplier > 0.0)) {
    fail(at + ": softmax_scale_multiplier = " + std::to_string(f.softmax_scale_multiplier));
  }
  if (!std::isfinite(f.effective_theta)) {
    fail(at + ": effective_theta = " + std::to_string(f.effective_theta));
  }
  posenc::reference::RopeFrequencies want = posenc::reference::rope_frequencies(p, seq_len);
  // The reference plans the recipe alone; ggml's per-pair factors divide after it.
  for (std::size_t j = 0; j < p.scaling.freq_factors.size() && j < want.inv_freq.size(); ++j) {
    want.inv_freq[j] /= static_cast<ld>(p.scaling.freq_factors[j]);
  }
  if (want.rotary_dim != f.rotary_dim) fail(at + ": rotary_dim differs from the reference");
  if (p.scaling.type == RopeScalingType::kLongRope) {
    const bool want_long = seq_len > p.scaling.original_max_position_embeddings;
    if (f.uses_long_factor != want_long) fail(at + ": uses_long_factor");
  }
  const Bound b = error_bound(p, f, seq_len);
  ++(b.skip_inv ? g_tally.skipped : g_tally.compared);
  for (std::size_t j = 0; j < f.inv_freq.size() && !b.skip_inv; ++j) {
    if (!close(f.inv_freq[j], want.inv_freq[j], b.inv[j])) {
      char buf[160];
      std::snprintf(buf, sizeof buf, ": inv_freq[%zu] = %.17g, reference %.17g, bound %.3g", j,
                    f.inv_freq[j], static_cast<double>(want.inv_freq[j]), b.inv[j]);
      fail(at + buf);
    }
  }
  const auto multiplier = [&](const char* name, double got, ld ref, double rel) {
    if (close(got, ref, rel * std::fabs(static_cast<double>(ref)))) return;
    char buf[160];
    std::snprintf(buf, sizeof buf, ": %s = %.17g, reference %.17g", name, got,
                  static_cast<double>(ref));
    fail(at + buf);
  };
  multiplier("attention_factor", f.attention_factor, want.attention_factor, b.attention_factor);
  multiplier("softmax_scale_multiplier", f.softmax_scale_multiplier,
             want.softmax_scale_multiplier, b.softmax);
}

/// Runs f; returns true if it returned, false if it threw std::invalid_argument whose message
/// names `function` (or the planner it delegates to); anything else fails.
template <typename F>
bool accepts(const char* function, F&& f) {
  try {
    f();
    return true;
  } catch (const std::invalid_argument& e) {
    const std::string msg = e.what();
    const auto starts = [&](const std::string& name) {
      return msg.rfind("posenc::" + name + ":", 0) == 0;
    };
    if (!starts(function) && !starts("compute_rope_frequencies") && !starts("RopePlan")) {
      fail(std::string("message of ") + function + " does not start with a name: " + msg);
    }
    return false;
  } catch (const std::exception& e) {
    fail(std::string(function) + " threw another type: " + e.what());
  }
}

bool same(const posenc::RopeFrequencies& a, const posenc::RopeFrequencies& b) {
  return a.inv_freq == b.inv_freq && a.attention_factor == b.attention_factor &&
         a.softmax_scale_multiplier == b.softmax_scale_multiplier &&
         a.uses_long_factor == b.uses_long_factor && a.planned_seq_len == b.planned_seq_len;
}

/// a + b, saturated at the int64 limits.
std::int64_t plus(std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) {
    return b > 0 ? std::numeric_limits<std::int64_t>::max()
                 : std::numeric_limits<std::int64_t>::min();
  }
  return r;
}

/// HF's dynamic_rope_update as a state machine: which sequence length the plan is for.
void run_plan(Choices& in, const posenc::RopeParams& p) {
  std::optional<posenc::RopePlan> plan;
  if (!accepts("RopePlan", [&] { plan.emplace(p); })) return;
  check_plan(p, plan->frequencies(), 0, "RopePlan()");
  const auto type = p.scaling.type;
  const std::int64_t l0 = p.scaling.original_max_position_embeddings > 0
                              ? p.scaling.original_max_position_embeddings
                              : p.max_position_embeddings;
  std::int64_t planned = 0;  // the seq_len the model says the plan is for
  // max_seq_len_cached(): L0 for the two recipes that follow the length (longrope keeps it).
  std::int64_t cached =
      type == RopeScalingType::kDynamic || type == RopeScalingType::kLongRope ? l0 : 0;
  const int steps = static_cast<int>(in.in(1, 8));
  for (int step = 0; step < steps; ++step) {
    std::int64_t seq = 0;
    switch (in.in(0, 5)) {
      case 0:
        seq = plus(l0, in.in(-2, 2));
        break;
      case 1:
        seq = plus(cached, in.in(-1, 3));
        break;
      case 2:
        seq = in.in(0, 1 << 20);
        break;
      case 3:
        seq = wild_int(in, 0, 1 << 24);
        break;
      default:
        seq = std::max<std::int64_t>(0, plus(planned, in.in(-64, 64)));
        break;
    }
    const posenc::RopeFrequencies before = plan->frequencies();
    bool changed = false;
    const bool ok = accepts("RopePlan::update", [&] { changed = plan->update(seq); });
    if (!ok) {
      if (!same(before, plan->frequencies())) fail("update threw but changed the plan");
      // Only a negative length or a plan that cannot be formed (an overflow) may throw.
      if (seq >= 0 &&
          accepts("compute_rope_frequencies", [&] { posenc::compute_rope_frequencies(p, seq); })) {
        fail("update(" + std::to_string(seq) + ") threw for a length the planner accepts");
      }
      continue;
    }
    bool want_change = false;
    if (type == RopeScalingType::kDynamic) {
      if (seq > cached) {
        want_change = true;
        planned = cached = seq;
      } else if (seq < l0 && cached > l0) {
        want_change = true;
        planned = 0;
        cached = l0;
      }
    } else if (type == RopeScalingType::kLongRope) {
      const bool was_long = planned > l0, is_long = seq > l0;
      want_change = was_long != is_long;
      if (want_change) planned = seq;
    }
    if (changed != want_change) {
      fail("update(" + std::to_string(seq) + ") returned " + std::to_string(changed) +
           ", HF's rule says " + std::to_string(want_change));
    }
    if (plan->max_seq_len_cached() != cached) fail("max_seq_len_cached");
    if (!changed && !same(before, plan->frequencies()))
      fail("update returned false but re-planned");
    g_tally.replans += changed;
    check_plan(p, plan->frequencies(), planned, "RopePlan::update");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Choices in(data, size);
  g_wild_percent = in.chance(50) ? 0 : static_cast<int>(in.in(1, 30));
  const posenc::RopeParams p = draw_params(in);
  g_context = describe(p);
  const std::int64_t seq = in.chance(80) ? in.in(0, 1 << 20) : wild_int(in, 0, 1 << 24);
  posenc::RopeFrequencies f;
  const bool ok =
      accepts("compute_rope_frequencies", [&] { f = posenc::compute_rope_frequencies(p, seq); });
  if (ok) {
    check_plan(p, f, seq, "compute_rope_frequencies");
    ++g_tally.accepted[static_cast<int>(p.scaling.type)];
  } else {
    ++g_tally.rejected;
  }
  // resolved_rotary_dim agrees with the plan's width whenever the plan forms.
  Index rd = 0;
  const bool rd_ok = accepts("resolved_rotary_dim", [&] { rd = posenc::resolved_rotary_dim(p); });
  if (ok && (!rd_ok || rd != f.rotary_dim)) fail("resolved_rotary_dim disagrees with the plan");
  if (ok) {
    // Per-pair factors applied after planning: the same division, or a rejection.
    std::vector<double> factors = wild_list(in, f.inv_freq.size());
    posenc::RopeFrequencies g;
    if (accepts("with_freq_factors", [&] { g = posenc::with_freq_factors(f, factors); })) {
      for (std::size_t j = 0; j < factors.size(); ++j) {
        if (g.inv_freq[j] != f.inv_freq[j] / factors[j] || !std::isfinite(g.inv_freq[j])) {
          fail("with_freq_factors[" + std::to_string(j) + "]");
        }
      }
    }
    const std::int64_t target = in.chance(80) ? in.in(1, 1 << 22) : wild_int(in, 1, 1 << 24);
    const std::int64_t window = in.chance(70) ? 0 : wild_int(in, 0, 1 << 16);
    posenc::RopeLengthReport rep;
    if (accepts("analyze_rope_length",
                [&] { rep = posenc::analyze_rope_length(p, target, window); })) {
      if (rep.pairs.size() != f.inv_freq.size()) fail("analyze_rope_length: pair count");
    } else if (target >= 1 && window >= 0) {
      // The report plans at min(target, 2^53); only such a plan may fail.
      const std::int64_t at = std::min(target, posenc::kMaxRopePosition);
      if (accepts("compute_rope_frequencies", [&] { posenc::compute_rope_frequencies(p, at); })) {
        fail("analyze_rope_length rejected params the planner accepts");
      }
    }
  }
  run_plan(in, p);
  return 0;
}

#ifdef POSENC_FUZZ_MAIN
#include "driver.hpp"
int main(int argc, char** argv) {
  const bool verbose = std::getenv("FZR_VERBOSE") != nullptr;
  const long runs = posenc_fuzz::run_random_inputs(argc, argv, 512, [&](std::uint64_t seed) {
    g_seed = seed;
    if (verbose) std::fprintf(stderr, "seed %llu\n", static_cast<unsigned long long>(seed));
  });
  std::printf(
      "%ld runs: %ld rejected, %ld plans compared with the reference, %ld checked for "
      "their properties only, %ld re-plans by update()\n  accepted by rope_type:",
      runs, g_tally.rejected, g_tally.compared, g_tally.skipped, g_tally.replans);
  for (int t = 0; t < 9; ++t) {
    std::printf(" %s %ld", std::string(posenc::to_string(static_cast<RopeScalingType>(t))).c_str(),
                g_tally.accepted[t]);
  }
  std::printf("\n");
  return 0;
}
#endif
