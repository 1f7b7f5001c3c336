// Attention options in combination: a seeded randomized differential sweep. The other attention
// tests vary one option at a time; bugs hide where options meet (a window inside a chunk under
// key padding, a sink on a row that sees nothing, ALiBi at explicit positions across a key tile,
// a tree mask under a window, ...). Each configuration draws a shape and a random subset of
// the options of attention() (AttentionParams, AttentionMetadata, lse, storage type, threads,
// a reused workspace) and compares posenc::attention (and attention_varlen) with
// posenc::reference::attention (scores materialised, double) and with a brute force written
// here from the rules stated in attention_types.hpp, so that a rule both library paths get
// wrong the same way fails too. A failure prints the configuration it broke on. Not here: the
// KV-cache, paged and MLA-latent entry points and FP8 KV scales (the reference takes none).

#include <catch2/catch.hpp>

#include <posenc/alibi.hpp>
#include <posenc/attention.hpp>
#include <posenc/attention_varlen.hpp>
#include <posenc/reference/attention.hpp>
#include <posenc/relative_bias.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "support/attention_params_text.hpp"
#include "support/rng.hpp"

namespace {

using posenc::AttentionMetadata;
using posenc::AttentionParams;
using posenc::AttentionWorkspace;
using posenc::ConstTensorView;
using posenc::MaskMode;
using posenc::TensorView;
using posenc::TemperatureForm;
using posenc_test::between;
using posenc_test::describe;
using posenc_test::coin;
using posenc_test::pick;
using posenc_test::SplitMix64;
using Index = Eigen::Index;

constexpr double kInf = std::numeric_limits<double>::infinity();

// ---- random draws ------------------------------------------------------------------------------

Index irange(SplitMix64& rng, Index lo, Index hi) {
  return static_cast<Index>(rng.integer(lo, hi));
}
std::size_t at(Index i) { return static_cast<std::size_t>(i); }

// ---- what one problem looks like -------------------------------------------------------------

enum class Storage { kFloat, kDouble, kBFloat16, kHalf };
const char* name(Storage s) {
  switch (s) {
    case Storage::kFloat: return "float";
    case Storage::kDouble: return "double";
    case Storage::kBFloat16: return "bfloat16";
    case Storage::kHalf: return "half";
  }
  return "?";
}

/// Where positions come from: the default slots, left padding (keys before pad_b masked,
/// positions counted from the first real token), increasing with gaps from a random base,
/// random and unordered (the API does not ask for order), draft tokens at prefix + depth.
enum class Positions { kSlots, kLeftPadding, kGaps, kShuffled, kTreeDepth };
const char* name(Positions p) {
  switch (p) {
    case Positions::kSlots: return "slots";
    case Positions::kLeftPadding: return "left-padding";
    case Positions::kGaps: return "gaps";
    case Positions::kShuffled: return "shuffled";
    case Positions::kTreeDepth: return "tree-depth";
  }
  return "?";
}

/// A proper draft tree (ancestors and self), or any lower-triangular 0/1 mask (also legal).
enum class TreeKind { kNone, kTree, kLowerTriangular };

struct Shape {
  Index batch, q_len, k_len, heads, kv_heads, d, dv;
};

/// The metadata of one BSHD problem, owned; view() lends it to an attention call.
struct Layout {
  Index batch = 0, q_len = 0, k_len = 0;
  std::vector<std::int64_t> q_pos, k_pos, key_lengths;  // empty: not given
  std::vector<std::uint8_t> key_mask, tree;             // empty: not given

  AttentionMetadata view() const {
    AttentionMetadata m;
    if (!q_pos.empty()) m.query_positions = posenc::PositionIdsView(q_pos.data(), batch, q_len);
    if (!k_pos.empty()) m.key_positions = posenc::PositionIdsView(k_pos.data(), batch, k_len);
    if (!key_lengths.empty()) {
      m.key_lengths = ConstTensorView<std::int64_t, 1>(key_lengths.data(), batch);
    }
    if (!key_mask.empty()) {
      m.key_mask = ConstTensorView<std::uint8_t, 2>(key_mask.data(), batch, k_len);
    }
    if (!tree.empty()) {
      m.tree_mask = ConstTensorView<std::uint8_t, 3>(tree.data(), batch, q_len, q_len);
    }
    return m;
  }
  // The documented defaults: query i at k_len - q_len + i, key j at j.
  std::int64_t qp(Index b, Index i) const {
    return q_pos.empty() ? static_cast<std::int64_t>(k_len - q_len + i) : q_pos[at(b * q_len + i)];
  }
  std::int64_t kp(Index b, Index j) const {
    return k_pos.empty() ? static_cast<std::int64_t>(j) : k_pos[at(b * k_len + j)];
  }
  bool tree_at(Index b, Index i, Index t) const {
    return tree[at((b * q_len + i) * q_len + t)] != 0;
  }
  Index depth(Index b, Index i) const {  // draft tokens query i sees, itself included
    Index n = 0;
    for (Index t = 0; t <= i; ++t) n += tree_at(b, i, t);
    return n;
  }
  Index max_depth() const {
    Index m = 0;
    for (Index b = 0; !tree.empty() && b < batch; ++b) {
      for (Index i = 0; i < q_len; ++i) m = std::max(m, depth(b, i));
    }
    return m;
  }
};

template <typename T>
std::string list(const std::vector<T>& xs, std::size_t most = 64) {
  std::ostringstream os;
  os << '[';
  for (std::size_t i = 0; i < xs.size() && i < most; ++i) os << (i ? " " : "") << +xs[i];
  if (xs.size() > most) os << " ...";
  os << ']';
  return os.str();
}

// ---- the rules, written out (attention_types.hpp) --------------------------------------------

/// floor(a / c) for c > 0 (the chunk of a position).
std::int64_t floor_div(std::int64_t a, std::int64_t c) {
  return a >= 0 ? a / c : -((-a + c - 1) / c);
}

/// t(pos) of each TemperatureForm, from the formulas in attention_types.hpp.
double temperature(const posenc::AttentionTemperature& t, std::int64_t pos) {
  const auto p = static_cast<double>(pos);
  switch (t.form) {
    case TemperatureForm::kLlama4:
      return 1.0 + t.attn_scale * std::log(1.0 + std::floor((p + 1.0) / t.floor_scale));
    case TemperatureForm::kMistral3:
      return 1.0 + t.attn_scale * std::log(1.0 + std::floor(p / t.floor_scale));
    case TemperatureForm::kXai:
      return pos > t.temperature_len
                 ? std::log2(p) / std::log2(static_cast<double>(t.temperature_len))
                 : 1.0;
  }
  return 1.0;
}

/// HF T5Attention._relative_position_bucket (its log branch in float32, as HF's tensors).
std::int64_t t5_bucket(std::int64_t rel, std::int64_t buckets, std::int64_t max_distance,
                       bool bidirectional) {
  std::int64_t bucket = 0, n = buckets;
  if (bidirectional) {
    n /= 2;
    bucket = rel > 0 ? n : 0;
    rel = std::abs(rel);
  } else {
    rel = std::max<std::int64_t>(-rel, 0);
  }
  const std::int64_t exact = n / 2;
  if (rel < exact) return bucket + rel;
  const float ratio = static_cast<float>(rel) / static_cast<float>(exact);
  const auto denom = static_cast<float>(
      std::log(static_cast<double>(max_distance) / static_cast<double>(exact)));
  const auto large = static_cast<std::int64_t>(std::log(ratio) / denom *
                                               static_cast<float>(n - exact));
  return bucket + std::min(exact + large, n - 1);
}

/// One problem's inputs as the checker reads them (any of the four storage types).
template <typename T>
struct Inputs {
  Shape s;
  const T* q;
  const T* k;
  const T* v;
  const Layout* lay;
  double q_at(Index b, Index i, Index h, Index c) const {
    return posenc::detail::to_double(q[at(((b * s.q_len + i) * s.heads + h) * s.d + c)]);
  }
  double k_at(Index b, Index j, Index g, Index c) const {
    return posenc::detail::to_double(k[at(((b * s.k_len + j) * s.kv_heads + g) * s.d + c)]);
  }
  double v_at(Index b, Index j, Index g, Index c) const {
    return posenc::detail::to_double(v[at(((b * s.k_len + j) * s.kv_heads + g) * s.dv + c)]);
  }
};

/// One output row by the documented rules, in double.
struct Row {
  std::vector<double> out;
  double lse = -kInf;
  // Over the visible keys, max of scale sum_c |q_c k_c| + |biases|: the size float rounding
  // of a logit grows with (a dot product of large terms can cancel to a small logit).
  double logit_size = 0.0;
  bool sees_keys = false;
};

template <typename T>
Row brute_row(const Inputs<T>& in, const AttentionParams& p, Index b, Index i, Index h) {
  const Shape& s = in.s;
  const Layout& lay = *in.lay;
  const Index offset = s.k_len - s.q_len, a = offset + i, g = h / (s.heads / s.kv_heads);
  const bool causal = p.mask == MaskMode::kCausal, tree = !lay.tree.empty();
  const std::int64_t pq = lay.qp(b, i), W = p.sliding_window, C = p.attention_chunk_size;
  const Index depth = tree ? lay.depth(b, i) : 0;
  const double scale = (p.scale ? *p.scale : 1.0 / std::sqrt(static_cast<double>(s.d))) *
                       (p.query_temperature ? temperature(*p.query_temperature, pq) : 1.0);
  std::vector<std::pair<Index, double>> logits;
  Row row;
  for (Index j = 0; j < s.k_len; ++j) {
    bool visible;
    if (tree && j >= offset) {
      // Draft tokens: exactly where the tree mask says (it is causal by validation).
      visible = lay.tree_at(b, i, j - offset);
    } else {
      visible = !causal || j <= a;
      // The window counts slots: the last W from a (|a - j| < W both ways); under a tree the
      // window of the query's own path, so the prefix's last W - depth keys.
      if (W > 0) visible = visible && (tree ? j >= offset + depth - W : std::abs(a - j) < W);
    }
    const std::int64_t pk = lay.kp(b, j);
    if (C > 0) visible = visible && floor_div(pq, C) == floor_div(pk, C);
    if (!lay.key_lengths.empty()) visible = visible && j < lay.key_lengths[at(b)];
    if (!lay.key_mask.empty()) visible = visible && lay.key_mask[at(b * s.k_len + j)] != 0;
    if (!visible) continue;
    double dot = 0.0, size = 0.0;
    for (Index c = 0; c < s.d; ++c) {
      const double term = in.q_at(b, i, h, c) * in.k_at(b, j, g, c);
      dot += term;
      size += std::abs(term);
    }
    double x = scale * dot;  // the temperature is inside the scale: before the soft cap
    size *= std::abs(scale);
    if (p.logit_softcap > 0.0) x = p.logit_softcap * std::tanh(x / p.logit_softcap);
    double bias = 0.0;
    if (!p.alibi_slopes.empty()) {
      const double m = p.alibi_slopes[at(h)], diff = static_cast<double>(pk - pq);
      bias += causal ? m * diff : -m * std::abs(diff);
    }
    if (p.relative_bias) {
      const auto& r = *p.relative_bias;
      bias += r.table[at(t5_bucket(pk - pq, r.num_buckets, r.max_distance, r.bidirectional) *
                             s.heads + h)];
    }
    logits.emplace_back(j, x + bias);
    row.logit_size = std::max(row.logit_size, size + std::abs(bias));
  }
  row.out.assign(at(s.dv), 0.0);
  row.sees_keys = !logits.empty();
  const bool sink = !p.sink_logits.empty();
  const double sink_logit = sink ? p.sink_logits[at(h)] : 0.0;
  if (logits.empty()) {
    row.lse = sink ? sink_logit : -kInf;  // the sink alone (attention_varlen.hpp: "as attention()")
    return row;
  }
  double top = sink ? sink_logit : -kInf;
  for (const auto& [j, x] : logits) top = std::max(top, x);
  double sum = sink ? std::exp(sink_logit - top) : 0.0;
  for (const auto& [j, x] : logits) sum += std::exp(x - top);
  for (const auto& [j, x] : logits) {
    const double w = std::exp(x - top) / sum;
    for (Index c = 0; c < s.dv; ++c) row.out[at(c)] += w * in.v_at(b, j, g, c);
  }
  row.lse = top + std::log(sum);
  return row;
}

// ---- the comparison ------------------------------------------------------------------------

/// Mismatch counts of one problem; detail names the first few.
struct Report {
  std::size_t rows = 0, empty_rows = 0;
  std::size_t fused_vs_reference = 0, reference_vs_rules = 0, empty_not_zero = 0, lse = 0;
  double worst = 0.0;  // max |fused - reference| / tolerance
  std::string detail;
  int noted = 0;
  void note(const std::string& what, Index b, Index i, Index h, Index c, double got,
            double want, double tol) {
    if (noted++ >= 6) return;
    std::ostringstream os;
    os.precision(9);
    os << what << " at b=" << b << " i=" << i << " h=" << h << " c=" << c << ": got " << got
       << " want " << want << " (tol " << tol << ")\n";
    detail += os.str();
  }
};

/// One ulp of T at 1 (0 for double, whose outputs are not rounded further). Spelled out:
/// Eigen 3.4's NumTraits<half>::epsilon() is 2^-13, not the format's 2^-10. Below 2^-14 half
/// is subnormal, with a fixed ulp of 2^-24 (storage_ulp_floor).
template <typename T>
constexpr double storage_ulp_floor() {
  return std::is_same_v<T, Eigen::half> ? 0x1p-24 : 0.0;
}
template <typename T>
constexpr double storage_eps() {
  if constexpr (std::is_same_v<T, double>) {
    return 0.0;
  } else if constexpr (std::is_same_v<T, float>) {
    return 0x1p-23;
  } else if constexpr (std::is_same_v<T, Eigen::bfloat16>) {
    return 0x1p-7;
  } else {
    return 0x1p-10;
  }
}

/// Compares fused rows (and lse, when given) of one BSHD problem with the reference's and with
/// the rules'. Tolerances:
///   fused vs reference: float accumulation (float, half, bfloat16 storage) 1e-5 absolute
///     (|v| <= 1 here), grown with Row::logit_size / 25 past 25: a float logit carries a
///     rounding error proportional to that size (large q.k terms, ALiBi at distant
///     positions, temperatures), here allowed 1e-5 / 25 = 4e-7 of it (about 7 x 2^-24), and
///     an error e in the logits moves the output by about e max |v|.
///     Double storage: 1e-12 on the same scale. Both outputs are rounded to T: plus one ulp
///     of T (eps_T |x|; 2^-7 for bfloat16, 2^-10 for half).
///   reference vs the rules: both in double, the reference's output rounded to T.
///   lse: 1e-5 (double: 1e-12) times max(1, |lse|, logit_size / 25).
template <typename T>
Report check(const Inputs<T>& in, const AttentionParams& params, const T* fused,
             const posenc::lse_t<T>* fused_lse) {
  const Shape& s = in.s;
  std::vector<T> ref(at(s.batch * s.q_len * s.heads * s.dv), T(1000.0f));
  posenc::reference::attention<T>(
      ConstTensorView<T, 4>(in.q, s.batch, s.q_len, s.heads, s.d),
      ConstTensorView<T, 4>(in.k, s.batch, s.k_len, s.kv_heads, s.d),
      ConstTensorView<T, 4>(in.v, s.batch, s.k_len, s.kv_heads, s.dv),
      TensorView<T, 4>(ref.data(), s.batch, s.q_len, s.heads, s.dv), params, in.lay->view());
  const double acc_tol = std::is_same_v<T, double> ? 1e-12 : 1e-5;
  const double eps = storage_eps<T>(), ulp_floor = storage_ulp_floor<T>();
  Report r;
  for (Index b = 0; b < s.batch; ++b) {
    for (Index i = 0; i < s.q_len; ++i) {
      for (Index h = 0; h < s.heads; ++h) {
        const Row want = brute_row(in, params, b, i, h);
        const double grow = std::max(1.0, want.logit_size / 25.0);
        const Index row = (b * s.q_len + i) * s.heads + h;
        ++r.rows;
        r.empty_rows += !want.sees_keys;
        for (Index c = 0; c < s.dv; ++c) {
          const double f = posenc::detail::to_double(fused[at(row * s.dv + c)]);
          const double e = posenc::detail::to_double(ref[at(row * s.dv + c)]);
          const double x = want.out[at(c)];
          if (!want.sees_keys) {
            // A row with no visible key is exactly 0 (sink or not), in both paths.
            if (f != 0.0 || e != 0.0) {
              ++r.empty_not_zero;
              r.note("row sees no key but is not 0 (fused / reference)", b, i, h, c, f, e, 0.0);
            }
            continue;
          }
          const double tol = acc_tol * grow + eps * std::abs(e) + ulp_floor;
          const double diff = std::abs(f - e);
          if (!(diff <= tol)) {
            ++r.fused_vs_reference;
            r.note("fused vs reference", b, i, h, c, f, e, tol);
          }
          r.worst = std::max(r.worst, std::isnan(diff) ? kInf : diff / tol);
          const double rule_tol = 1e-9 * grow + eps * std::abs(x) + ulp_floor;
          if (!(std::abs(e - x) <= rule_tol)) {
            ++r.reference_vs_rules;
            r.note("reference vs the documented rules", b, i, h, c, e, x, rule_tol);
          }
        }
        if (fused_lse) {
          const double got = static_cast<double>(fused_lse[at(row)]);
          const double tol = acc_tol * std::max({1.0, std::abs(want.lse), grow});
          const bool ok = std::isinf(want.lse) ? got == want.lse : std::abs(got - want.lse) <= tol;
          if (!ok) {
            ++r.lse;
            r.note("lse vs the documented rules", b, i, h, -1, got, want.lse, tol);
          }
        }
      }
    }
  }
  std::ostringstream worst;
  worst << "largest |fused - reference| / tolerance: " << r.worst << "\n";
  r.detail += worst.str();
  return r;
}

// ---- one attention() configuration ---------------------------------------------------------

struct Config {
  int index = 0;
  std::uint64_t seed = 0;
  Storage storage = Storage::kFloat;
  Shape s{};
  double amplitude = 1.0;  // q and k uniform in [-amplitude, amplitude), v in [-1, 1)
  Positions positions = Positions::kSlots;
  std::vector<Index> left_pad;  // per sequence, with Positions::kLeftPadding
  int key_mask_kind = 0;        // 0 none (or left padding only), 1 holes, 2 a sequence all masked
  TreeKind tree = TreeKind::kNone;
  bool lse = false, shared_workspace = false;
  bool expect_throw = false;  // a combination the API must reject (tree + bidirectional, ...)
  AttentionParams params;
  Layout lay;
};

std::string describe(const Config& c) {
  std::ostringstream os;
  os << "config #" << c.index << " (seed " << c.seed << "): " << name(c.storage) << " batch "
     << c.s.batch << " q_len " << c.s.q_len << " k_len " << c.s.k_len << " heads " << c.s.heads
     << " kv_heads " << c.s.kv_heads << " head_dim " << c.s.d << " v_head_dim " << c.s.dv
     << " amplitude " << c.amplitude << " | " << describe(c.params) << " | positions "
     << name(c.positions);
  if (!c.left_pad.empty()) os << " left_pad=" << list(c.left_pad);
  if (!c.lay.q_pos.empty()) os << " q_pos=" << list(c.lay.q_pos);
  if (!c.lay.k_pos.empty()) os << " k_pos=" << list(c.lay.k_pos);
  if (!c.lay.key_lengths.empty()) os << " key_lengths=" << list(c.lay.key_lengths);
  if (!c.lay.key_mask.empty()) {
    os << " key_mask(" << (c.key_mask_kind == 1 ? "holes" : c.key_mask_kind == 2 ? "empty seq"
                                                                                 : "left pad")
       << ")=" << list(c.lay.key_mask, 200);
  }
  if (c.tree != TreeKind::kNone) {
    os << (c.tree == TreeKind::kTree ? " tree" : " lower-triangular tree") << " mask "
       << list(c.lay.tree, 200);
  }
  os << " | lse " << c.lse << " workspace " << (c.shared_workspace ? "shared" : "fresh");
  if (c.expect_throw) os << " | expects std::invalid_argument";
  return os.str();
}

/// The options, each drawn on its own (heads given; k_max bounds the windows and chunks drawn).
AttentionParams draw_params(SplitMix64& rng, Index heads, Index k_max) {
  AttentionParams p;
  p.mask = coin(rng, 0.3) ? MaskMode::kBidirectional : MaskMode::kCausal;
  if (coin(rng, 0.4)) p.scale = between(rng, 0.02, 0.6);
  if (coin(rng, 0.4)) {
    if (coin(rng, 0.5)) {
      p.alibi_slopes = posenc::alibi_slopes(heads);
    } else {
      for (Index h = 0; h < heads; ++h) p.alibi_slopes.push_back(between(rng, 0.0, 0.6));
    }
  }
  if (coin(rng, 0.3)) p.logit_softcap = pick(rng, {0.5, 2.0, between(rng, 1.0, 30.0)});
  if (coin(rng, 0.3)) {
    for (Index h = 0; h < heads; ++h) p.sink_logits.push_back(between(rng, -2.0, 3.0));
  }
  if (coin(rng, 0.35)) {
    // 1 and 2 are the edges; past k_len + q_len the kernel clips the window.
    p.sliding_window = pick<std::int64_t>(rng, {1, 2, irange(rng, 1, k_max), irange(rng, 1, 24),
                                                k_max + irange(rng, 0, 60)});
  }
  if (coin(rng, 0.3)) {
    p.attention_chunk_size =
        pick<std::int64_t>(rng, {1, irange(rng, 2, 8), irange(rng, 1, k_max), k_max + 5});
  }
  if (coin(rng, 0.2)) {
    posenc::AttentionTemperature t;
    t.form = pick(rng, {TemperatureForm::kLlama4, TemperatureForm::kXai,
                        TemperatureForm::kMistral3});
    // Small floor scales and lengths so that steps fall inside these short sequences.
    t.floor_scale = static_cast<double>(irange(rng, 1, 16));
    t.attn_scale = between(rng, 0.05, 0.5);
    t.temperature_len = irange(rng, 2, 24);
    p.query_temperature = t;
  }
  if (coin(rng, 0.15)) {
    const bool bidirectional = coin(rng, 0.5);
    const Index buckets = pick<Index>(rng, {4, 8, 16, 32});
    const Index exact = (bidirectional ? buckets / 2 : buckets) / 2;
    // Often just past the exact buckets, so that keys beyond max_distance (where the kernel
    // clamps the distance) occur in these short sequences.
    const std::int64_t max_distance =
        coin(rng, 0.5) ? irange(rng, exact + 1, exact + 6) : irange(rng, exact + 1, 64);
    std::vector<double> table(at(buckets * heads));
    for (double& x : table) x = 2.0 * rng.uniform();
    p.relative_bias = posenc::relative_position_bias<double>(
        ConstTensorView<double, 2>(table.data(), buckets, heads), max_distance, bidirectional);
  }
  p.num_threads = coin(rng, 0.6) ? 1 : static_cast<int>(irange(rng, 2, 3));
  return p;
}

Config draw_config(int index) {
  Config c;
  c.index = index;
  c.seed = 0xC0FFEE00ULL + static_cast<std::uint64_t>(index) * 7919ULL;
  SplitMix64 rng(c.seed);
  const double st = between(rng, 0.0, 1.0);
  c.storage = st < 0.82   ? Storage::kFloat
              : st < 0.88 ? Storage::kDouble
              : st < 0.94 ? Storage::kBFloat16
                          : Storage::kHalf;
  Shape& s = c.s;
  s.batch = irange(rng, 1, 3);
  const Index ratio = pick<Index>(rng, {1, 2, 4, 8});
  s.kv_heads = std::min(irange(rng, 1, 4), 16 / ratio);
  s.heads = s.kv_heads * ratio;
  s.d = pick<Index>(rng, {16, 64, 80, 128});
  // Mostly v_head_dim = head_dim; sometimes widths that leave a scalar column tail.
  s.dv = coin(rng, 0.85) ? s.d : pick<Index>(rng, {12, 40, s.d / 2});
  // A third of the shapes short: the decode item (q_len x group <= 4) and multi-head items.
  s.q_len = coin(rng, 0.3) ? irange(rng, 1, 4) : irange(rng, 1, 40);
  s.k_len = coin(rng, 0.2) ? s.q_len : irange(rng, s.q_len, 90);
  if (s.q_len * ratio <= 4 && coin(rng, 0.3)) s.k_len = irange(rng, s.q_len, 300);  // > 1 tile
  c.amplitude = pick(rng, {1.0, 1.0, 2.0, 4.0});
  c.params = draw_params(rng, s.heads, s.k_len);
  AttentionParams& p = c.params;
  const bool causal = p.mask == MaskMode::kCausal;
  if (coin(rng, causal ? 0.15 : 0.03)) {
    c.tree = coin(rng, 0.7) ? TreeKind::kTree : TreeKind::kLowerTriangular;
  }
  c.lse = coin(rng, 0.5);
  c.shared_workspace = coin(rng, 0.5);

  Layout& lay = c.lay;
  lay.batch = s.batch;
  lay.q_len = s.q_len;
  lay.k_len = s.k_len;
  const Index offset = s.k_len - s.q_len;
  if (c.tree != TreeKind::kNone) {
    lay.tree.assign(at(s.batch * s.q_len * s.q_len), 0);
    for (Index b = 0; b < s.batch; ++b) {
      std::vector<Index> parent(at(s.q_len));
      for (Index t = 0; t < s.q_len; ++t) parent[at(t)] = irange(rng, -1, t - 1);
      for (Index i = 0; i < s.q_len; ++i) {
        auto* row = lay.tree.data() + (b * s.q_len + i) * s.q_len;
        if (c.tree == TreeKind::kTree) {
          for (Index x = i; x >= 0; x = parent[at(x)]) row[x] = 1;
        } else {
          for (Index t = 0; t <= i; ++t) row[t] = coin(rng, 0.5) ? 1 : 0;
        }
      }
    }
    // Every path must fit in the window; a few configurations break that (or ask for a
    // bidirectional tree) on purpose, and the call must throw.
    const Index deepest = lay.max_depth();
    if (p.sliding_window > 0 && p.sliding_window < deepest) {
      if (coin(rng, 0.7)) p.sliding_window = deepest + irange(rng, 0, 3);
    }
    c.expect_throw = !causal || (p.sliding_window > 0 && p.sliding_window < deepest);
  }

  // Positions.
  const double pr = between(rng, 0.0, 1.0);
  c.positions = pr < 0.45   ? Positions::kSlots
                : pr < 0.62 ? Positions::kLeftPadding
                : pr < 0.8  ? Positions::kGaps
                            : Positions::kShuffled;
  if (c.tree != TreeKind::kNone && coin(rng, 0.5)) c.positions = Positions::kTreeDepth;
  if (c.positions != Positions::kSlots) {
    lay.q_pos.assign(at(s.batch * s.q_len), 0);
    lay.k_pos.assign(at(s.batch * s.k_len), 0);
  }
  for (Index b = 0; b < s.batch; ++b) {
    auto* qp = lay.q_pos.empty() ? nullptr : lay.q_pos.data() + b * s.q_len;
    auto* kp = lay.k_pos.empty() ? nullptr : lay.k_pos.data() + b * s.k_len;
    switch (c.positions) {
      case Positions::kSlots: break;
      case Positions::kLeftPadding: {
        const Index pad = irange(rng, 0, s.k_len);
        c.left_pad.push_back(pad);
        for (Index j = 0; j < s.k_len; ++j) kp[j] = std::max<Index>(j - pad, 0);
        for (Index i = 0; i < s.q_len; ++i) qp[i] = kp[offset + i];
        break;
      }
      case Positions::kGaps: {
        std::int64_t pos = irange(rng, 0, 2000);
        for (Index j = 0; j < s.k_len; ++j) {
          pos += coin(rng, 0.7) ? 1 : irange(rng, 0, 4);
          kp[j] = pos;
        }
        for (Index i = 0; i < s.q_len; ++i) qp[i] = kp[offset + i];
        break;
      }
      case Positions::kShuffled:
        for (Index j = 0; j < s.k_len; ++j) kp[j] = irange(rng, 0, 2 * s.k_len + 5);
        for (Index i = 0; i < s.q_len; ++i) qp[i] = irange(rng, 0, 2 * s.k_len + 5);
        break;
      case Positions::kTreeDepth:
        // The prefix at its slots, each draft token one past its parent (depth - 1 ancestors).
        for (Index j = 0; j < offset; ++j) kp[j] = j;
        for (Index t = 0; t < s.q_len; ++t) {
          const Index above = lay.depth(b, t) - (lay.tree_at(b, t, t) ? 1 : 0);
          kp[offset + t] = offset + above;
          qp[t] = offset + above;
        }
        break;
    }
  }
  // Key padding: lengths (right padding, 0 and k_len included) and / or a mask.
  if (coin(rng, 0.3)) {
    for (Index b = 0; b < s.batch; ++b) {
      lay.key_lengths.push_back(pick<std::int64_t>(rng, {0, s.k_len, irange(rng, 0, s.k_len),
                                                         irange(rng, 0, s.k_len)}));
    }
  }
  c.key_mask_kind = coin(rng, 0.3) ? (coin(rng, 0.8) ? 1 : 2) : 0;
  if (c.key_mask_kind != 0 || c.positions == Positions::kLeftPadding) {
    lay.key_mask.assign(at(s.batch * s.k_len), 1);
    const Index empty_seq = irange(rng, 0, s.batch - 1);
    const double hole = between(rng, 0.05, 0.6);
    for (Index b = 0; b < s.batch; ++b) {
      for (Index j = 0; j < s.k_len; ++j) {
        bool keep = true;
        if (c.positions == Positions::kLeftPadding) keep = j >= c.left_pad[at(b)];
        if (c.key_mask_kind == 1) keep = keep && !coin(rng, hole);
        if (c.key_mask_kind == 2 && b == empty_seq) keep = false;
        lay.key_mask[at(b * s.k_len + j)] = keep ? 1 : 0;
      }
    }
  }
  return c;
}

/// Which options a configuration combines, for the coverage tally.
enum Feature : int {
  kGqa, kShorterQuery, kBidirectional, kKeyLengths, kKeyMask, kWindow, kChunk, kAlibi,
  kSoftcap, kSinks, kTemperature, kRelativeBias, kTree, kPositions, kScale, kLse, kThreads,
  kNotFloat, kDecodeShape, kNarrowValues, kFeatureCount
};
constexpr std::array<const char*, kFeatureCount> kFeatureNames = {
    "gqa", "q_len<k_len", "bidirectional", "key_lengths", "key_mask", "window", "chunk",
    "alibi", "softcap", "sinks", "temperature", "relative_bias", "tree", "positions", "scale",
    "lse", "threads", "not-float", "decode-shape", "v_head_dim!=head_dim"};

std::array<bool, kFeatureCount> features(const Config& c) {
  const AttentionParams& p = c.params;
  std::array<bool, kFeatureCount> f{};
  f[kGqa] = c.s.heads > c.s.kv_heads;
  f[kShorterQuery] = c.s.q_len < c.s.k_len;
  f[kBidirectional] = p.mask == MaskMode::kBidirectional;
  f[kKeyLengths] = !c.lay.key_lengths.empty();
  f[kKeyMask] = !c.lay.key_mask.empty();
  f[kWindow] = p.sliding_window > 0;
  f[kChunk] = p.attention_chunk_size > 0;
  f[kAlibi] = !p.alibi_slopes.empty();
  f[kSoftcap] = p.logit_softcap > 0.0;
  f[kSinks] = !p.sink_logits.empty();
  f[kTemperature] = p.query_temperature.has_value();
  f[kRelativeBias] = p.relative_bias.has_value();
  f[kTree] = c.tree != TreeKind::kNone;
  f[kPositions] = !c.lay.q_pos.empty();
  f[kScale] = p.scale.has_value();
  f[kLse] = c.lse;
  f[kThreads] = p.num_threads > 1;
  f[kNotFloat] = c.storage != Storage::kFloat;
  f[kDecodeShape] = c.s.q_len * (c.s.heads / c.s.kv_heads) <= 4;
  f[kNarrowValues] = c.s.dv != c.s.d;
  return f;
}

template <typename T>
std::vector<T> random_storage(std::size_t n, std::uint64_t seed, double amplitude) {
  SplitMix64 rng(seed);
  std::vector<T> x(n);
  for (T& e : x) e = posenc::detail::from_value<T>(amplitude * rng.uniform());
  return x;
}

/// Runs one configuration in storage T: fused (with or without lse) against the checks, or
/// the throw both paths must give before writing anything.
template <typename T>
Report run_config(const Config& c, AttentionWorkspace& shared) {
  const Shape& s = c.s;
  const auto q = random_storage<T>(at(s.batch * s.q_len * s.heads * s.d), c.seed + 1, c.amplitude);
  const auto k = random_storage<T>(at(s.batch * s.k_len * s.kv_heads * s.d), c.seed + 2,
                                   c.amplitude);
  const auto v = random_storage<T>(at(s.batch * s.k_len * s.kv_heads * s.dv), c.seed + 3, 1.0);
  const Inputs<T> in{s, q.data(), k.data(), v.data(), &c.lay};
  // A sentinel: a row the kernel forgets to write cannot pass.
  std::vector<T> out(at(s.batch * s.q_len * s.heads * s.dv), T(1000.0f));
  std::vector<posenc::lse_t<T>> lse(at(s.batch * s.q_len * s.heads), 1000.0f);
  const ConstTensorView<T, 4> Q(q.data(), s.batch, s.q_len, s.heads, s.d);
  const ConstTensorView<T, 4> K(k.data(), s.batch, s.k_len, s.kv_heads, s.d);
  const ConstTensorView<T, 4> V(v.data(), s.batch, s.k_len, s.kv_heads, s.dv);
  const TensorView<T, 4> O(out.data(), s.batch, s.q_len, s.heads, s.dv);
  const TensorView<posenc::lse_t<T>, 3> L(lse.data(), s.batch, s.q_len, s.heads);
  AttentionWorkspace fresh;
  AttentionWorkspace* ws = c.shared_workspace ? &shared : &fresh;
  const AttentionMetadata meta = c.lay.view();
  Report r;
  if (c.expect_throw) {
    CHECK_THROWS_AS(posenc::attention<T>(Q, K, V, O, L, c.params, meta, ws),
                    std::invalid_argument);
    CHECK_THROWS_AS(posenc::reference::attention<T>(Q, K, V, O, c.params, meta),
                    std::invalid_argument);
    const bool untouched =
        std::all_of(out.begin(), out.end(), [](T x) { return x == T(1000.0f); }) &&
        std::all_of(lse.begin(), lse.end(), [](auto x) { return x == 1000.0f; });
    CHECK(untouched);
    return r;
  }
  if (c.lse) {
    posenc::attention<T>(Q, K, V, O, L, c.params, meta, ws);
  } else {
    posenc::attention<T>(Q, K, V, O, c.params, meta, ws);
  }
  return check(in, c.params, out.data(), c.lse ? lse.data() : nullptr);
}

}  // namespace

TEST_CASE("attention combinations: random mixes of every option, fused == reference == rules",
          "[attention][combinations]") {
  constexpr int kConfigs = 800;
  AttentionWorkspace shared;  // reused across shapes and types: stale buffers must not leak
  std::array<int, kFeatureCount> seen{};
  std::array<std::array<int, kFeatureCount>, kFeatureCount> pairs{};
  std::size_t rows = 0, empty_rows = 0, empty_with_sinks = 0, throws = 0;
  for (int index = 0; index < kConfigs; ++index) {
    const Config c = draw_config(index);
    const std::string config = describe(c);
    CAPTURE(config);
    Report r;
    switch (c.storage) {
      case Storage::kFloat: r = run_config<float>(c, shared); break;
      case Storage::kDouble: r = run_config<double>(c, shared); break;
      case Storage::kBFloat16: r = run_config<Eigen::bfloat16>(c, shared); break;
      case Storage::kHalf: r = run_config<Eigen::half>(c, shared); break;
    }
    INFO(r.detail);
    CHECK(r.fused_vs_reference == 0);
    CHECK(r.reference_vs_rules == 0);
    CHECK(r.empty_not_zero == 0);
    CHECK(r.lse == 0);
    rows += r.rows;
    empty_rows += r.empty_rows;
    if (!c.params.sink_logits.empty()) empty_with_sinks += r.empty_rows;
    throws += c.expect_throw;
    if (c.expect_throw) continue;
    const auto f = features(c);
    for (int a = 0; a < kFeatureCount; ++a) {
      seen[at(a)] += f[at(a)];
      for (int b = 0; b < kFeatureCount; ++b) pairs[at(a)][at(b)] += f[at(a)] && f[at(b)];
    }
  }
  // The sweep must keep combining: every option with every other several times (a tree is
  // causal only; 13 is the rarest pair now), a good share of rows that see no key (also with
  // sinks), and some rejected combinations.
  for (int a = 0; a < kFeatureCount; ++a) {
    for (int b = a; b < kFeatureCount; ++b) {
      if ((a == kBidirectional && b == kTree) || (a == kTree && b == kBidirectional)) continue;
      CAPTURE(kFeatureNames[at(a)], kFeatureNames[at(b)]);
      CHECK(pairs[at(a)][at(b)] >= 3);
    }
  }
  CHECK(rows > 100000);
  CHECK(empty_rows > 10000);
  CHECK(empty_with_sinks > 3000);
  CHECK(throws >= 5);
}

// ---- attention_varlen ------------------------------------------------------------------------

TEST_CASE("attention combinations: packed varlen batches with the same mixes, per sequence",
          "[attention][combinations][varlen]") {
  // Each packed sequence must equal the reference (and the rules) on that sequence alone,
  // batch 1, with its slice of the per-token positions and tree masks: attention_varlen adds
  // sequences with no query (skipped), with no key (zero rows; lse -inf or the sink) and, in
  // causal mode, fewer keys than queries (leading rows see nothing).
  constexpr int kConfigs = 160;
  AttentionWorkspace shared;
  std::size_t sequences = 0, keyless = 0, queryless = 0, longer_q = 0;
  for (int index = 0; index < kConfigs; ++index) {
    const std::uint64_t seed = 0xBADC0DEULL + static_cast<std::uint64_t>(index) * 104729ULL;
    SplitMix64 rng(seed);
    const Index ratio = pick<Index>(rng, {1, 2, 4, 8});
    const Index kv_heads = std::min(irange(rng, 1, 3), 16 / ratio), heads = kv_heads * ratio;
    const Index d = pick<Index>(rng, {16, 64, 80, 128});
    const Index dv = coin(rng, 0.85) ? d : pick<Index>(rng, {12, 40});
    AttentionParams params = draw_params(rng, heads, 40);
    const bool causal = params.mask == MaskMode::kCausal;
    const bool trees = causal && coin(rng, 0.25), positions = coin(rng, 0.5);
    const Index seqs = irange(rng, 1, 5);
    std::vector<std::int64_t> cu_q{0}, cu_k{0};
    for (Index n = 0; n < seqs; ++n) {
      const Index ql =
          coin(rng, 0.15) ? 0 : (coin(rng, 0.3) ? irange(rng, 1, 4) : irange(rng, 1, 16));
      Index kl = irange(rng, ql, ql + 40);
      // No keys at all; or (causal, no tree) fewer keys than queries, whose leading rows sit
      // at negative default positions and see nothing. Not bidirectional: there those rows
      // would see keys from positions below 0, which the positional rules do not define.
      if (!trees && coin(rng, 0.1)) kl = 0;
      if (causal && !trees && ql > 1 && coin(rng, 0.15)) kl = irange(rng, 1, ql - 1);
      cu_q.push_back(cu_q.back() + ql);
      cu_k.push_back(cu_k.back() + kl);
    }
    const Index total_q = cu_q.back(), total_k = cu_k.back();
    std::vector<std::int64_t> q_pos, k_pos;
    std::vector<std::uint8_t> tree_masks;
    for (Index n = 0; n < seqs; ++n) {
      const Index ql = cu_q[at(n + 1)] - cu_q[at(n)], kl = cu_k[at(n + 1)] - cu_k[at(n)];
      const std::int64_t base = irange(rng, 0, 500);
      if (positions) {
        for (Index j = 0; j < kl; ++j) k_pos.push_back(base + j);
        // A query at its slot's position (rows before the first key: at the base).
        for (Index i = 0; i < ql; ++i) q_pos.push_back(base + std::max<Index>(kl - ql + i, 0));
      }
      for (Index i = 0; trees && i < ql; ++i) {
        for (Index t = 0; t < ql; ++t) {
          tree_masks.push_back(t == i || (t < i && coin(rng, 0.5)) ? 1 : 0);
        }
      }
    }
    Index deepest = 0;
    for (Index n = 0, m0 = 0; trees && n < seqs; ++n) {
      const Index ql = cu_q[at(n + 1)] - cu_q[at(n)];
      for (Index i = 0; i < ql; ++i) {
        Index depth = 0;
        for (Index t = 0; t < ql; ++t) depth += tree_masks[at(m0 + i * ql + t)];
        deepest = std::max(deepest, depth);
      }
      m0 += ql * ql;
    }
    if (params.sliding_window > 0) params.sliding_window = std::max(params.sliding_window, deepest);
    const bool with_lse = coin(rng, 0.6);

    const auto q = random_storage<float>(at(total_q * heads * d), seed + 1, 2.0);
    const auto k = random_storage<float>(at(total_k * kv_heads * d), seed + 2, 2.0);
    const auto v = random_storage<float>(at(total_k * kv_heads * dv), seed + 3, 1.0);
    std::vector<float> out(at(total_q * heads * dv), 1000.0f), lse(at(total_q * heads), 1000.0f);
    posenc::VarlenMetadata meta;
    if (positions) {
      meta.query_positions = ConstTensorView<std::int64_t, 1>(q_pos.data(), total_q);
      meta.key_positions = ConstTensorView<std::int64_t, 1>(k_pos.data(), total_k);
    }
    if (trees) {
      meta.tree_masks = ConstTensorView<std::uint8_t, 1>(tree_masks.data(),
                                                          static_cast<Index>(tree_masks.size()));
    }
    std::optional<TensorView<float, 2>> lse_view;
    if (with_lse) lse_view.emplace(lse.data(), total_q, heads);
    std::ostringstream cfg;
    cfg << "varlen config #" << index << " (seed " << seed << "): heads " << heads
        << " kv_heads " << kv_heads << " head_dim " << d << " v_head_dim " << dv
        << " cu_seqlens_q " << list(cu_q) << " cu_seqlens_k " << list(cu_k) << " | "
        << describe(params) << " | positions " << (positions ? list(q_pos) + " / " + list(k_pos)
                                                             : std::string("slots"))
        << (trees ? " tree masks " + list(tree_masks, 400) : std::string()) << " lse "
        << with_lse;
    const std::string config = cfg.str();
    CAPTURE(config);
    posenc::attention_varlen<float>(
        ConstTensorView<float, 3>(q.data(), total_q, heads, d),
        ConstTensorView<float, 3>(k.data(), total_k, kv_heads, d),
        ConstTensorView<float, 3>(v.data(), total_k, kv_heads, dv),
        TensorView<float, 3>(out.data(), total_q, heads, dv),
        ConstTensorView<std::int64_t, 1>(cu_q.data(), seqs + 1),
        ConstTensorView<std::int64_t, 1>(cu_k.data(), seqs + 1), params, meta,
        coin(rng, 0.5) ? &shared : nullptr, lse_view);

    for (Index n = 0, m0 = 0; n < seqs; ++n) {
      const Index q0 = cu_q[at(n)], ql = cu_q[at(n + 1)] - q0;
      const Index k0 = cu_k[at(n)], kl = cu_k[at(n + 1)] - k0;
      CAPTURE(n, ql, kl);
      ++sequences;
      if (ql == 0) {
        ++queryless;
        continue;
      }
      const float* got = out.data() + q0 * heads * dv;
      const float* got_lse = with_lse ? lse.data() + q0 * heads : nullptr;
      if (kl == 0) {
        // No key: zero rows, lse -inf, or the sink's logit alone.
        ++keyless;
        CHECK(std::all_of(got, got + ql * heads * dv, [](float x) { return x == 0.0f; }));
        for (Index r = 0; got_lse && r < ql * heads; ++r) {
          const auto h = at(r % heads);
          const double want = params.sink_logits.empty() ? -kInf : params.sink_logits[h];
          CHECK(static_cast<double>(got_lse[r]) == static_cast<double>(static_cast<float>(want)));
        }
        m0 += ql * ql;
        continue;
      }
      longer_q += ql > kl;
      Layout lay;
      lay.batch = 1;
      lay.q_len = ql;
      lay.k_len = kl;
      if (positions) {
        lay.q_pos.assign(q_pos.begin() + q0, q_pos.begin() + q0 + ql);
        lay.k_pos.assign(k_pos.begin() + k0, k_pos.begin() + k0 + kl);
      }
      if (trees) {
        lay.tree.assign(tree_masks.begin() + m0, tree_masks.begin() + m0 + ql * ql);
      }
      m0 += ql * ql;
      const Inputs<float> in{{1, ql, kl, heads, kv_heads, d, dv}, q.data() + q0 * heads * d,
                             k.data() + k0 * kv_heads * d, v.data() + k0 * kv_heads * dv, &lay};
      const Report r = check(in, params, got, got_lse);
      INFO(r.detail);
      CHECK(r.fused_vs_reference == 0);
      CHECK(r.reference_vs_rules == 0);
      CHECK(r.empty_not_zero == 0);
      CHECK(r.lse == 0);
    }
  }
  // The packed cases the sweep exists for must keep occurring.
  CHECK(sequences > 300);
  CHECK(keyless >= 10);
  CHECK(queryless >= 20);
  CHECK(longer_q >= 10);
}

// ---- mismatches the sweep found, reduced to their smallest case ------------------------------

namespace {

/// One head, head_dim 1, q = k = 0 (so every visible key weighs the same) and v = values: each
/// output row is the mean of the values of the keys its query sees, 0 when it sees none.
struct Flat {
  std::vector<float> q, k, v;
  Index q_len, k_len;
  Flat(Index ql, std::vector<float> values)
      : q(at(ql), 0.0f), k(values.size(), 0.0f), v(std::move(values)), q_len(ql),
        k_len(static_cast<Index>(v.size())) {}
  std::vector<float> run(bool fused, const AttentionParams& params,
                         const AttentionMetadata& meta = {}) const {
    std::vector<float> out(at(q_len), 1000.0f);
    const ConstTensorView<float, 4> Q(q.data(), 1, q_len, 1, 1), K(k.data(), 1, k_len, 1, 1),
        V(v.data(), 1, k_len, 1, 1);
    const TensorView<float, 4> O(out.data(), 1, q_len, 1, 1);
    if (fused) {
      posenc::attention<float>(Q, K, V, O, params, meta);
    } else {
      posenc::reference::attention<float>(Q, K, V, O, params, meta);
    }
    return out;
  }
};

}  // namespace

TEST_CASE("attention combinations: a draft row as deep as the window sees each token its mask "
          "lists",
          "[attention][combinations][tree]") {
  // Sweep configuration #349, reduced. No prefix (q_len = k_len = 2), tree mask rows [0 0]
  // and [1 1]: draft token 0 lists nothing, not even itself (a lower-triangular mask the API
  // accepts), token 1 lists both, so its depth is 2, and the window is 2 (depth <= window:
  // accepted). attention_types.hpp: a query sees draft token t exactly where its mask row is
  // set, and the window cuts only the prefix (the last W - depth keys of it). So token 1 sees
  // both keys, (1 + 3) / 2 = 2, and token 0 none, 0. The reference instead places token 0 at
  // its own depth (0) in token 1's path, 2 slots back, outside the window, and returns 3.
  const Flat x(2, {1.0f, 3.0f});
  const std::vector<std::uint8_t> tree = {0, 0, 1, 1};
  AttentionMetadata meta;
  meta.tree_mask = ConstTensorView<std::uint8_t, 3>(tree.data(), 1, 2, 2);
  AttentionParams params;
  for (const std::int64_t window : {0, 2}) {
    CAPTURE(window);
    params.sliding_window = window;
    for (const bool fused : {true, false}) {
      CAPTURE(fused);
      const auto out = x.run(fused, params, meta);
      CHECK(out[0] == 0.0f);
      CHECK(out[1] == 2.0f);
    }
  }
}

TEST_CASE("attention combinations: bidirectional calls with q_len > k_len need query positions "
          "for chunks and temperatures",
          "[attention][combinations][chunked]") {
  // Found next to the sweep (which keeps k_len >= q_len): q_len 4 > k_len 2, bidirectional,
  // puts the default query positions k_len - q_len + i at -2, -1, 0, 1. The fused kernel marked
  // padding lanes with chunk -1, the chunk of position -2 (C = 2), and let that row see both
  // keys (2, the reference 0); a Llama-4 temperature took the log of a non-positive number
  // (NaN). Positions are >= 0, so both are refused, naming the lengths and the option; causal
  // calls are not (their rows at negative positions see no key).
  const Flat x(4, {1.0f, 3.0f});
  AttentionParams chunked;
  chunked.mask = MaskMode::kBidirectional;
  chunked.attention_chunk_size = 2;
  AttentionParams tempered;
  tempered.mask = MaskMode::kBidirectional;
  posenc::AttentionTemperature t;
  t.form = TemperatureForm::kLlama4;
  t.floor_scale = 1.0;
  t.attn_scale = 0.5;
  tempered.query_temperature = t;
  for (const bool fused : {true, false}) {
    CAPTURE(fused);
    REQUIRE_THROWS_AS(x.run(fused, chunked), std::invalid_argument);
    REQUIRE_THROWS_WITH(x.run(fused, chunked),
                        Catch::Contains("q_len = 4 > k_len = 2") &&
                            Catch::Contains("attention_chunk_size") &&
                            Catch::Contains("query_positions"));
    REQUIRE_THROWS_WITH(x.run(fused, tempered), Catch::Contains("query_temperature"));
    AttentionParams causal = chunked;
    causal.mask = MaskMode::kCausal;
    REQUIRE_NOTHROW(x.run(fused, causal));
  }
  // With positions 0..3 given: queries 0 and 1 share chunk 0 with the keys, (1 + 3) / 2 = 2;
  // queries 2 and 3 (chunk 1) see none, 0.
  const std::vector<std::int64_t> qpos = {0, 1, 2, 3};
  AttentionMetadata meta;
  meta.query_positions = posenc::PositionIdsView(qpos.data(), 1, 4);
  for (const bool fused : {true, false}) {
    CAPTURE(fused);
    REQUIRE(x.run(fused, chunked, meta) == std::vector<float>{2.0f, 2.0f, 0.0f, 0.0f});
  }
}
