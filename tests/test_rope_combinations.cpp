// RoPE apply calls in combination: a seeded randomized differential sweep in the spirit of
// test_attention_combinations.cpp. The other RoPE tests vary one option at a time, while the
// kernels (detail/rope_kernels.hpp) pick their path from several at once: storage type, pair
// layout, the count of turning pairs (multiples of 8, 16 and 32 take vector kernels; the still
// pairs of a proportional plan are skipped in blocks of 32), head strides, a row's phase in its
// cache line (AVX-512 float rows), the size of the call and where cos / sin come from. Each
// scenario draws a view (rank-4 in every head layout, packed, strided with gaps, a slice of a
// fused QKV buffer, arbitrary strides), head and rotary widths with an offset, a pair layout, a
// plan of any recipe, positions (contiguous, per-sequence starts, left-padded or arbitrary ids,
// packed token ids; up to 2^40 and 2^53), a direction and a call (in place, out of place, Q and
// K in one pass, from a cos / sin cache of any element type, re-rotation between two plans).
// The oracle is a long-double brute force written here from the formulas of rope.hpp, fed with
// the plan's own inv_freq (the planner is checked against posenc::reference on the side) or
// the cache's own stored values: every rotated element within one rounding to T
// (rope_plans.hpp) plus the error of an angle formed in double, every other dim of the view
// bit-identical (in place) or copied bit-exact (out of place), every element outside the views
// (NaN sentinels in the gaps) untouched. In place and out of place, and one Q+K call and two
// single calls, must agree bit for bit where the kernels walk the tokens in the same order or
// read a cos / sin cache (see seq_major below). A share of scenarios breaks one contract (a
// negative position, one past 2^53, a slice wider than the head, a cache too short,
// re-rotation in another direction): the call must throw its documented type and write nothing.
// A failure prints the configuration and its seed; the tally at the end keeps every option in.
//
// Also drawn: (1) threads: ~10 % of scenarios run every call on an Eigen::ThreadPoolDevice of
// 2, 3 or 4 threads (the machine may have 2 cores: uneven splits), sized to pass Eigen's cost
// model so that the tokens really split (counted: half the scenarios go through a device that
// records its chunks). Checked: the oracle as usual; the same call twice gives the same bits
// (rope.hpp: results depend only on inputs, views and thread count); from a cache the bits of
// one thread ("whatever the split"); on the fly only the oracle (the recurrence restarts at a
// chunk's first token). (2) rotary_dim up to kMaxRotaryDim = 1024 (head_dim up to 1088), and
// one past it rejected with the documented message. (3) NaN / +Inf / -Inf planted in the
// rotated inputs: the formula in long double decides NaN-ness and the sign of an infinity,
// except for the still pairs rope.hpp documents (cos exactly 1 and sin 0 in whole trailing
// blocks of 32 pairs, every pair of a position-0 token with attention factor 1): those are
// left untouched, so Inf stays Inf and a partner's NaN does not spread. (4) A separate test of
// calls with >= 16 MiB of rotated rows (the kernels' DRAM path with software prefetch), checked
// on sampled tokens against the oracle, every row for a change, and every other element of
// the buffers bit for bit.

#define EIGEN_USE_THREADS
#include <catch2/catch.hpp>

#include <posenc/reference/rope.hpp>
#include <posenc/rope.hpp>

#include <unsupported/Eigen/CXX11/Tensor>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <new>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "support/rng.hpp"
#include "support/rope_plans.hpp"

// A longer sweep over other draws: -DPOSENC_SWEEP_CONFIGS=20000 -DPOSENC_SWEEP_SALT=1 (CI runs
// the defaults).
#ifndef POSENC_SWEEP_CONFIGS
#define POSENC_SWEEP_CONFIGS 500
#endif
#ifndef POSENC_SWEEP_SALT
#define POSENC_SWEEP_SALT 0ULL
#endif

namespace {

using posenc::ConstTensorView;
using posenc::HeadLayout;
using posenc::RopeDirection;
using posenc::RopeFrequencies;
using posenc::RopeHeads;
using posenc::RopeLayout;
using posenc::RopeScalingType;
using posenc::TensorView;
using posenc_test::between;
using posenc_test::coin;
using posenc_test::pick;
using posenc_test::SplitMix64;
using Index = Eigen::Index;
using Pos = std::int64_t;

constexpr Pos kMaxPos = posenc::kMaxRopePosition;

Index irange(SplitMix64& rng, Index lo, Index hi) {
  return static_cast<Index>(rng.integer(lo, hi));
}
std::size_t at(Index i) { return static_cast<std::size_t>(i); }
template <typename T>
long double wide(T x) {
  return static_cast<long double>(posenc::detail::to_double(x));  // exact for every type
}

/// Mismatches of one scenario: counted, the first few described.
struct Report {
  std::size_t checked = 0, bad = 0;
  std::string detail;
  // Planted NaN / Inf inputs met: in a still pair (left as they are), in a turning pair, and
  // an infinity turned into NaN by the formula (times an exact 0, or Inf - Inf).
  int nonfinite_still = 0, nonfinite_turned = 0, inf_to_nan = 0;
  void fail(const std::string& what) {
    if (bad < 6) detail += what + "\n";
    ++bad;
  }
};

// ---- memory --------------------------------------------------------------------------------

/// Buffers start on a cache line, so that the lead drawn for a view (elements before it) fixes
/// the phase of its rows in a line, which selects the AVX-512 line-phase float kernels; and
/// they are sized exactly, so that an access past a view's last row meets ASan's redzone.
template <typename T>
struct LineAllocator {
  using value_type = T;
  LineAllocator() = default;
  template <typename U>
  LineAllocator(const LineAllocator<U>&) noexcept {}  // NOLINT: rebinding, as std::allocator
  T* allocate(std::size_t n) {
    return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t{64}));
  }
  void deallocate(T* p, std::size_t) noexcept { ::operator delete(p, std::align_val_t{64}); }
  friend bool operator==(const LineAllocator&, const LineAllocator&) { return true; }
  friend bool operator!=(const LineAllocator&, const LineAllocator&) { return false; }
};
template <typename T>
using LineVector = std::vector<T, LineAllocator<T>>;

template <typename T>
using Bits = std::conditional_t<sizeof(T) == 8, std::uint64_t,
                                std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint16_t>>;
template <typename T>
Bits<T> bits(T x) {
  Bits<T> u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}

/// Memory outside every view: NaN (or infinity) patterns with random sign and payload, all
/// different, so that a kernel that reads one spreads NaN into an output and one that writes
/// or moves one fails the bit-for-bit check.
template <typename T>
T sentinel(SplitMix64& rng) {
  using U = Bits<T>;
  U exponent = 0;
  if constexpr (std::is_same_v<T, double>) {
    exponent = 0x7ff0000000000000ull;
  } else if constexpr (std::is_same_v<T, float>) {
    exponent = 0x7f800000u;
  } else if constexpr (std::is_same_v<T, Eigen::half>) {
    exponent = 0x7c00u;
  } else {
    exponent = 0x7f80u;
  }
  const U u = static_cast<U>(static_cast<U>(rng.next()) | exponent);
  T x;
  std::memcpy(static_cast<void*>(&x), &u, sizeof x);  // Eigen's 16-bit types: trivially copyable
  return x;
}

// ---- views -----------------------------------------------------------------------------------

enum class ViewKind { kBshd, kBhsd, kSbhd, kPacked, kStrided, kFusedQ, kFusedK, kGeneric };

const char* name(ViewKind k) {
  switch (k) {
    case ViewKind::kBshd: return "bshd";
    case ViewKind::kBhsd: return "bhsd";
    case ViewKind::kSbhd: return "sbhd";
    case ViewKind::kPacked: return "packed";
    case ViewKind::kStrided: return "strided";
    case ViewKind::kFusedQ: return "fused-qkv/q";
    case ViewKind::kFusedK: return "fused-qkv/k";
    case ViewKind::kGeneric: return "any-strides";
  }
  return "?";
}
bool is_rank4(ViewKind k) {
  return k == ViewKind::kBshd || k == ViewKind::kBhsd || k == ViewKind::kSbhd;
}
HeadLayout head_layout(ViewKind k) {
  return k == ViewKind::kBhsd ? HeadLayout::kBHSD
         : k == ViewKind::kSbhd ? HeadLayout::kSBHD
                                : HeadLayout::kBSHD;
}

/// Where a view's rows live in its buffer. The strides are derived here from the kind, not
/// read back from posenc's view helpers, so a helper that gets them wrong fails the oracle.
struct Region {
  ViewKind kind = ViewKind::kBshd;
  int buffer = -1;
  Index batch = 0, seq = 0, heads = 0, dim = 0;
  Index base = 0, bs = 0, ss = 0, hs = 0;

  Index row(Index b, Index s, Index h) const { return base + b * bs + s * ss + h * hs; }
  Index end() const {
    if (batch * seq * heads == 0) return base;
    return row(batch - 1, seq - 1, heads - 1) + dim;
  }
};

std::string describe(const Region& r) {
  std::ostringstream os;
  os << name(r.kind) << "[b" << r.batch << " s" << r.seq << " h" << r.heads << " d" << r.dim
     << "] buf" << r.buffer << "@" << r.base << " strides(" << r.bs << "," << r.ss << "," << r.hs
     << ")";
  return os.str();
}

/// Strides of a view of `kind` starting at element `base` (fused slices: fused_pair).
Region lay_out(SplitMix64& rng, ViewKind kind, Index batch, Index seq, Index heads, Index dim,
               Index base) {
  Region r;
  r.kind = kind;
  r.batch = batch;
  r.seq = seq;
  r.heads = heads;
  r.dim = dim;
  r.base = base;
  switch (kind) {
    case ViewKind::kBshd:
      r.hs = dim;
      r.ss = heads * dim;
      r.bs = seq * heads * dim;
      break;
    case ViewKind::kBhsd:
      r.ss = dim;
      r.hs = seq * dim;
      r.bs = heads * seq * dim;
      break;
    case ViewKind::kSbhd:
      r.hs = dim;
      r.bs = heads * dim;
      r.ss = batch * heads * dim;
      break;
    case ViewKind::kPacked:
      r.hs = dim;
      r.ss = heads * dim;
      break;
    case ViewKind::kStrided:
      r.hs = dim + (coin(rng, 0.8) ? irange(rng, 1, 6) : 0);
      r.ss = heads * r.hs + irange(rng, 1, 9);
      break;
    case ViewKind::kGeneric: {
      // b, s and h nested in a random order, innermost first, each level with a gap after it.
      std::array<int, 3> order{0, 1, 2};
      for (int i = 2; i > 0; --i) std::swap(order[at(i)], order[at(irange(rng, 0, i))]);
      const std::array<Index, 3> extent{batch, seq, heads};
      std::array<Index, 3> stride{};
      Index step = dim + irange(rng, 0, 4);
      for (const int axis : order) {
        stride[at(axis)] = step;
        step = step * std::max<Index>(extent[at(axis)], 1) + irange(rng, 0, 5);
      }
      r.bs = stride[0];
      r.ss = stride[1];
      r.hs = stride[2];
      break;
    }
    case ViewKind::kFusedQ:
    case ViewKind::kFusedK: break;
  }
  return r;
}

/// A view in a buffer of its own: `lead` elements before it (its phase in a cache line; < 0:
/// drawn) and a few after it.
Region own_view(SplitMix64& rng, std::vector<Index>& sizes, ViewKind kind, Index batch,
                Index seq, Index heads, Index dim, Index lead) {
  Region r = lay_out(rng, kind, batch, seq, heads, dim, lead >= 0 ? lead : irange(rng, 0, 15));
  r.buffer = static_cast<int>(sizes.size());
  sizes.push_back(r.end() + irange(rng, 0, 3));
  return r;
}

/// The Q and K slices of one fused QKV buffer [tokens, (hq + 2 hk) dim]; V follows them.
std::pair<Region, Region> fused_pair(SplitMix64& rng, std::vector<Index>& sizes, Index seq,
                                     Index hq, Index hk, Index dim, Index lead) {
  const Index first = lead >= 0 ? lead : irange(rng, 0, 15), width = (hq + 2 * hk) * dim;
  Region q, k;
  q.kind = ViewKind::kFusedQ;
  k.kind = ViewKind::kFusedK;
  for (Region* r : {&q, &k}) {
    r->buffer = static_cast<int>(sizes.size());
    r->batch = 1;
    r->seq = seq;
    r->dim = dim;
    r->ss = width;
    r->hs = dim;
  }
  q.heads = hq;
  k.heads = hk;
  q.base = first;
  k.base = first + hq * dim;
  sizes.push_back(first + seq * width + irange(rng, 0, 3));
  return {q, k};
}

/// A view of any kind for a single-tensor call; a fused slice gets partners of random width.
Region single_view(SplitMix64& rng, std::vector<Index>& sizes, ViewKind kind, Index batch,
                   Index seq, Index heads, Index dim, Index lead) {
  if (kind != ViewKind::kFusedQ) return own_view(rng, sizes, kind, batch, seq, heads, dim, lead);
  const Index others = irange(rng, 1, 8);
  if (coin(rng, 0.5)) return fused_pair(rng, sizes, seq, heads, others, dim, lead).first;
  return fused_pair(rng, sizes, seq, others, heads, dim, lead).second;
}

/// Any kind the batch allows (packed, strided and fused views are batch 1); kFusedQ stands
/// for "a fused slice".
ViewKind draw_kind(SplitMix64& rng, Index batch, bool allow_fused) {
  if (batch > 1) {
    return pick(rng, {ViewKind::kBshd, ViewKind::kBhsd, ViewKind::kSbhd, ViewKind::kGeneric});
  }
  const ViewKind k = pick(rng, {ViewKind::kBshd, ViewKind::kBhsd, ViewKind::kSbhd,
                                ViewKind::kPacked, ViewKind::kStrided, ViewKind::kStrided,
                                ViewKind::kGeneric, ViewKind::kFusedQ});
  return k == ViewKind::kFusedQ && !allow_fused ? ViewKind::kStrided : k;
}

template <typename T>
TensorView<T, 4> tensor4(T* buffer, const Region& r) {
  T* p = buffer + r.base;
  if (r.kind == ViewKind::kBhsd) return TensorView<T, 4>(p, r.batch, r.heads, r.seq, r.dim);
  if (r.kind == ViewKind::kSbhd) return TensorView<T, 4>(p, r.seq, r.batch, r.heads, r.dim);
  return TensorView<T, 4>(p, r.batch, r.seq, r.heads, r.dim);
}
template <typename T>
ConstTensorView<T, 4> const_tensor4(const T* buffer, const Region& r) {
  const T* p = buffer + r.base;
  if (r.kind == ViewKind::kBhsd) return ConstTensorView<T, 4>(p, r.batch, r.heads, r.seq, r.dim);
  if (r.kind == ViewKind::kSbhd) return ConstTensorView<T, 4>(p, r.seq, r.batch, r.heads, r.dim);
  return ConstTensorView<T, 4>(p, r.batch, r.seq, r.heads, r.dim);
}

/// The RopeHeads of a region, through the posenc helper its kind stands for.
template <typename T>
RopeHeads<T> heads_of(T* buffer, const Region& r) {
  T* p = buffer + r.base;
  switch (r.kind) {
    case ViewKind::kBshd:
    case ViewKind::kBhsd:
    case ViewKind::kSbhd: return posenc::rope_heads<T>(tensor4(buffer, r), head_layout(r.kind));
    case ViewKind::kPacked:
      return posenc::rope_heads_packed<T>(TensorView<T, 3>(p, r.seq, r.heads, r.dim));
    case ViewKind::kStrided:
    case ViewKind::kFusedQ:
    case ViewKind::kFusedK:
      return posenc::rope_heads_strided<T>(p, r.seq, r.heads, r.dim, r.ss, r.hs);
    case ViewKind::kGeneric: break;
  }
  return RopeHeads<T>{p, r.batch, r.seq, r.heads, r.dim, r.bs, r.ss, r.hs};
}
template <typename T>
RopeHeads<const T> const_heads_of(const T* buffer, const Region& r) {
  if (is_rank4(r.kind)) return posenc::rope_heads<T>(const_tensor4(buffer, r), head_layout(r.kind));
  return posenc::detail::as_const(heads_of(const_cast<T*>(buffer), r));
}

// ---- positions -----------------------------------------------------------------------------

enum class PosKind { kContiguous, kContiguousFrom, kIds, kLeftPadded, kTokenIds };

const char* name(PosKind k) {
  switch (k) {
    case PosKind::kContiguous: return "contiguous";
    case PosKind::kContiguousFrom: return "contiguous_from";
    case PosKind::kIds: return "from_ids";
    case PosKind::kLeftPadded: return "from_ids(left-padded)";
    case PosKind::kTokenIds: return "from_token_ids";
  }
  return "?";
}

struct Positions {
  PosKind kind = PosKind::kContiguous;
  std::vector<Pos> ids;     // [batch, seq] (from_ids) or [seq] (from_token_ids)
  std::vector<Pos> starts;  // [batch] (contiguous_from)
  Pos offset = 0;           // the start of contiguous, the common offset of the id kinds

  /// The position of token (b, s), computed here from the documented rule.
  Pos value(Index b, Index s, Index seq) const {
    switch (kind) {
      case PosKind::kContiguous: return offset + s;
      case PosKind::kContiguousFrom: return starts[at(b)] + s;
      case PosKind::kTokenIds: return ids[at(s)] + offset;
      case PosKind::kIds:
      case PosKind::kLeftPadded: break;
    }
    return ids[at(b * seq + s)] + offset;
  }
  posenc::RopePositions make(Index batch, Index seq) const {
    switch (kind) {
      case PosKind::kContiguous: return posenc::RopePositions::contiguous(batch, seq, offset);
      case PosKind::kContiguousFrom:
        return posenc::RopePositions::contiguous_from(
            ConstTensorView<Pos, 1>(starts.data(), batch), seq);
      case PosKind::kTokenIds:
        return posenc::RopePositions::from_token_ids(ConstTensorView<Pos, 1>(ids.data(), seq),
                                                     offset);
      case PosKind::kIds:
      case PosKind::kLeftPadded: break;
    }
    return posenc::RopePositions::from_ids(posenc::PositionIdsView(ids.data(), batch, seq), offset);
  }
};

/// A base position: mostly small, often about float's 2^24 integers, some where p w passes the
/// fast reduction's 2^30 (std::sin / cos of the double angle), a few near 2^40.
Pos draw_base(SplitMix64& rng, bool cached) {
  if (cached) return coin(rng, 0.5) ? 0 : irange(rng, 0, 100);  // rows of the cache
  const double u = between(rng, 0.0, 1.0);
  if (u < 0.45) return irange(rng, 0, 64);
  if (u < 0.62) return irange(rng, 0, 70000);
  if (u < 0.77) return (Pos{1} << 24) + irange(rng, -100, 100);
  if (u < 0.95) return irange(rng, Pos{1} << 24, Pos{1} << 31);
  return (Pos{1} << 40) + irange(rng, -(Pos{1} << 20), Pos{1} << 20);
}

Positions draw_positions(SplitMix64& rng, PosKind kind, Index batch, Index seq, bool cached) {
  Positions p;
  p.kind = kind;
  switch (kind) {
    case PosKind::kContiguous: p.offset = draw_base(rng, cached); break;
    case PosKind::kContiguousFrom:
      for (Index b = 0; b < batch; ++b) {
        p.starts.push_back(b > 0 && coin(rng, 0.2) ? p.starts[0] : draw_base(rng, cached));
      }
      break;
    case PosKind::kIds: {
      // Arbitrary, non-monotone, repeats allowed.
      const Pos base = draw_base(rng, cached);
      for (Index i = 0; i < batch * seq; ++i) p.ids.push_back(base + irange(rng, 0, 3 * seq + 5));
      if (coin(rng, 0.3)) p.offset = draw_base(rng, cached);
      break;
    }
    case PosKind::kLeftPadded:
      // HF: position_ids = cumsum(mask) - 1, padding filled with 1 (or clipped to 0).
      for (Index b = 0; b < batch; ++b) {
        const Index pad = irange(rng, 0, seq);
        const Pos fill = pick<Pos>(rng, {0, 1});
        for (Index s = 0; s < seq; ++s) p.ids.push_back(s < pad ? fill : s - pad);
      }
      if (coin(rng, 0.4)) p.offset = draw_base(rng, cached);
      break;
    case PosKind::kTokenIds: {
      // A varlen batch: runs of consecutive positions, each after a cached prefix.
      Index s = 0;
      while (s < seq) {
        const Index len = irange(rng, 1, seq - s);
        const Pos start = draw_base(rng, cached);
        for (Index i = 0; i < len; ++i) p.ids.push_back(start + i);
        s += len;
      }
      if (coin(rng, 0.3)) p.offset = draw_base(rng, true);  // small: the runs carry large starts
      break;
    }
  }
  return p;
}

// ---- plans -----------------------------------------------------------------------------------

struct PlanSpec {
  posenc::RopeParams params;
  Pos seq_len = 0;  // what compute_rope_frequencies plans for
};

std::string describe(const PlanSpec& ps) {
  const posenc::RopeParams& p = ps.params;
  const posenc::RopeScaling& sc = p.scaling;
  std::ostringstream os;
  os.precision(17);
  os << posenc::to_string(sc.type) << " theta=" << p.theta << " head_dim=" << p.head_dim
     << " rotary_dim=" << p.rotary_dim << " partial=" << p.partial_rotary_factor
     << " offset=" << p.rotary_offset << " seq_len=" << ps.seq_len;
  if (sc.factor != 1.0) os << " factor=" << sc.factor;
  if (p.max_position_embeddings) os << " max_pos_emb=" << p.max_position_embeddings;
  if (sc.original_max_position_embeddings) os << " L0=" << sc.original_max_position_embeddings;
  if (sc.type == RopeScalingType::kYarn) {
    os << " beta=" << sc.beta_fast << "/" << sc.beta_slow << " truncate=" << sc.truncate
       << " mscale=" << sc.mscale << "/" << sc.mscale_all_dim << " ext=" << sc.extrapolation_factor
       << " slope=" << sc.mscale_slope;
  }
  if (sc.type == RopeScalingType::kLlama3) {
    os << " lf=" << sc.low_freq_factor << " hf=" << sc.high_freq_factor;
  }
  if (sc.type == RopeScalingType::kLongRope) {
    os << " short[0]=" << sc.short_factor.at(0) << " long[0]=" << sc.long_factor.at(0);
    if (sc.short_mscale) os << " mscales=" << *sc.short_mscale << "/" << *sc.long_mscale;
  }
  if (sc.mixed_b) os << " mixed_b=" << *sc.mixed_b;
  if (sc.attention_factor) os << " attention_factor=" << *sc.attention_factor;
  if (!sc.freq_factors.empty()) os << " freq_factors[0]=" << sc.freq_factors[0];
  return os.str();
}

/// Any recipe that rotates [offset, offset + rd); seq_now = max position + 1 of the scenario.
PlanSpec draw_plan(SplitMix64& rng, Index rd, Index offset, RopeLayout layout, Pos seq_now,
                   bool proportional = false) {
  PlanSpec ps;
  posenc::RopeParams& p = ps.params;
  posenc::RopeScaling& sc = p.scaling;
  p.layout = layout;
  p.theta = pick(rng, {10000.0, 10000.0, 500000.0, 1e6, 100.0, between(rng, 2.0, 2e6)});
  const double u = between(rng, 0.0, 1.0);
  RopeScalingType type = u < 0.15   ? RopeScalingType::kDefault
                         : u < 0.25 ? RopeScalingType::kLinear
                         : u < 0.33 ? RopeScalingType::kNtk
                         : u < 0.45 ? RopeScalingType::kDynamic
                         : u < 0.62 ? RopeScalingType::kYarn
                         : u < 0.72 ? RopeScalingType::kLlama3
                         : u < 0.84 ? RopeScalingType::kLongRope
                         : u < 0.95 ? RopeScalingType::kProportional
                                    : RopeScalingType::kVllmNtk;
  // Proportional rotates the whole (plan) head from dim 0; ntk / dynamic need rd > 2.
  if (proportional) type = RopeScalingType::kProportional;
  if (type == RopeScalingType::kProportional && offset != 0) type = RopeScalingType::kYarn;
  if ((type == RopeScalingType::kNtk || type == RopeScalingType::kDynamic) && rd <= 2) {
    type = RopeScalingType::kLinear;
  }
  sc.type = type;
  const Index half = rd / 2;
  switch (type) {
    case RopeScalingType::kDefault: break;
    case RopeScalingType::kLinear:
    case RopeScalingType::kNtk: sc.factor = pick(rng, {2.0, 4.0, between(rng, 1.0, 8.0)}); break;
    case RopeScalingType::kDynamic: {
      sc.factor = pick(rng, {2.0, 4.0, between(rng, 1.0, 8.0)});
      const Pos l0 = pick<Pos>(rng, {64, 2048, 4096});
      if (coin(rng, 0.5)) {
        p.max_position_embeddings = l0;
      } else {
        sc.original_max_position_embeddings = l0;
      }
      ps.seq_len = pick<Pos>(rng, {0, l0 / 2, l0 + irange(rng, 1, 3 * l0), 10 * l0, seq_now});
      break;
    }
    case RopeScalingType::kYarn: {
      sc.factor = pick(rng, {4.0, 16.0, 32.0, 40.0, between(rng, 1.0, 64.0)});
      const Pos l0 = pick<Pos>(rng, {2048, 4096, 32768, irange(rng, 64, 100000)});
      if (coin(rng, 0.7)) {
        sc.original_max_position_embeddings = l0;
      } else {
        p.max_position_embeddings = l0;
      }
      if (coin(rng, 0.3)) {
        sc.beta_fast = between(rng, 8.0, 64.0);
        sc.beta_slow = between(rng, 0.5, 2.0);
      }
      sc.truncate = coin(rng, 0.65);
      if (coin(rng, 0.35)) {
        sc.mscale = pick(rng, {0.707, 1.0});
        sc.mscale_all_dim = pick(rng, {0.0, 0.707, 1.0});
      }
      if (coin(rng, 0.1)) sc.extrapolation_factor = between(rng, 0.0, 1.0);
      if (coin(rng, 0.1)) sc.mscale_slope = 0.07;
      break;
    }
    case RopeScalingType::kLlama3:
      sc.factor = pick(rng, {8.0, 32.0, between(rng, 1.0, 16.0)});
      sc.original_max_position_embeddings = pick<Pos>(rng, {8192, 64, irange(rng, 16, 20000)});
      sc.low_freq_factor = pick(rng, {1.0, between(rng, 0.5, 2.0)});
      sc.high_freq_factor = sc.low_freq_factor * pick(rng, {4.0, 1.0, between(rng, 1.0, 8.0)});
      break;
    case RopeScalingType::kLongRope: {
      const Pos l0 = pick<Pos>(rng, {64, 4096, irange(rng, 16, 10000)});
      sc.original_max_position_embeddings = l0;
      if (coin(rng, 0.5)) {
        p.max_position_embeddings = pick<Pos>(rng, {4 * l0, 32 * l0});
      } else {
        sc.factor = between(rng, 1.0, 16.0);
      }
      for (Index j = 0; j < half; ++j) {
        sc.short_factor.push_back(between(rng, 0.9, 1.3));
        sc.long_factor.push_back(between(rng, 1.0, 8.0));
      }
      if (coin(rng, 0.2)) {
        sc.short_mscale = between(rng, 0.8, 1.3);
        sc.long_mscale = between(rng, 1.0, 1.6);
      }
      ps.seq_len = pick<Pos>(rng, {0, l0, l0 + 1, irange(rng, 1, 2 * l0), seq_now});
      break;
    }
    case RopeScalingType::kProportional:
      sc.factor = pick(rng, {1.0, between(rng, 1.0, 8.0)});
      break;
    case RopeScalingType::kVllmNtk:
      sc.factor = between(rng, 1.0, 8.0);
      if (coin(rng, 0.4)) sc.mixed_b = between(rng, 0.5, 3.0);
      break;
  }
  if (type == RopeScalingType::kProportional) {
    // The whole head turns; partial_rotary_factor picks how many pairs (the rest: inv_freq 0).
    p.head_dim = rd;
    p.rotary_dim = coin(rng, 0.5) ? 0 : rd;
    double f = pick(rng, {0.25, 0.25, 0.5, 0.75, 1.0, between(rng, 0.0, 1.0)});
    if (std::floor(f * static_cast<double>(rd) / 2.0) < 1.0) f = 1.0;
    p.partial_rotary_factor = f;
  } else {
    p.head_dim = offset + rd + (coin(rng, 0.5) ? 0 : irange(rng, 1, 64));
    const double w = between(rng, 0.0, 1.0);
    if (w < 0.3 && rd < p.head_dim) {
      // HF's int(head_dim * partial_rotary_factor): rd + 0.5 keeps clear of the truncation.
      p.rotary_dim = 0;
      p.partial_rotary_factor = (static_cast<double>(rd) + 0.5) / static_cast<double>(p.head_dim);
    } else if (w < 0.4 && rd == p.head_dim) {
      p.rotary_dim = 0;
    } else {
      p.rotary_dim = rd;
    }
  }
  p.rotary_offset = offset;
  if (coin(rng, 0.12)) sc.attention_factor = between(rng, 0.7, 1.5);
  if (coin(rng, 0.08)) {
    for (Index j = 0; j < half; ++j) sc.freq_factors.push_back(between(rng, 1.0, 8.0));
  }
  return ps;
}

/// The planner against posenc::reference (long double, written separately), which has no
/// freq_factors: those divide its frequencies here.
void check_plan(const PlanSpec& ps, const RopeFrequencies& f, Report& r) {
  const auto ref = posenc::reference::rope_frequencies(ps.params, ps.seq_len);
  std::ostringstream os;
  os.precision(17);
  if (f.inv_freq.size() != ref.inv_freq.size()) {
    os << "plan has " << f.inv_freq.size() << " frequencies, reference " << ref.inv_freq.size();
    r.fail(os.str());
    return;
  }
  const auto& factors = ps.params.scaling.freq_factors;
  for (std::size_t j = 0; j < f.inv_freq.size(); ++j) {
    ++r.checked;
    const long double want = ref.inv_freq[j] / (factors.empty() ? 1.0L : factors[j]);
    const long double got = f.inv_freq[j];
    if (want == 0.0L ? got != 0.0L : !(std::fabs(got - want) <= 1e-12L * want)) {
      os << "plan inv_freq[" << j << "] = " << static_cast<double>(got) << ", reference "
         << static_cast<double>(want);
      r.fail(os.str());
      return;
    }
  }
  ++r.checked;
  const long double a = f.attention_factor;
  if (!(std::fabs(a - ref.attention_factor) <= 1e-12L * ref.attention_factor)) {
    os << "plan attention_factor " << f.attention_factor << ", reference "
       << static_cast<double>(ref.attention_factor);
    r.fail(os.str());
  }
}

// ---- one scenario --------------------------------------------------------------------------

enum class Call { kPlan, kPlanQk, kCached, kCachedQk, kRerotate };
enum class Fault { kNone, kNegative, kPastMax, kSliceTooWide, kCacheShort, kWrongDirection };
enum class Entry { kHeads, kRank4, kParams };  // which apply_rope_inplace overload
enum class CacheType { kFloat, kDouble, kHalf, kBFloat16 };

const char* name(Call c) {
  switch (c) {
    case Call::kPlan: return "apply_rope_inplace + apply_rope";
    case Call::kPlanQk: return "apply_rope_qk_inplace";
    case Call::kCached: return "apply_rope_inplace_cached + apply_rope_cached";
    case Call::kCachedQk: return "apply_rope_qk_inplace_cached";
    case Call::kRerotate: return "rerotate_rope_inplace";
  }
  return "?";
}
const char* name(Fault f) {
  switch (f) {
    case Fault::kNone: return "none";
    case Fault::kNegative: return "negative position";
    case Fault::kPastMax: return "position past 2^53";
    case Fault::kSliceTooWide: return "rotary_offset + rotary_dim > head_dim";
    case Fault::kCacheShort: return "cache too short";
    case Fault::kWrongDirection: return "re-rotation not forward";
  }
  return "?";
}
const char* name(CacheType t) {
  switch (t) {
    case CacheType::kFloat: return "float";
    case CacheType::kDouble: return "double";
    case CacheType::kHalf: return "half";
    case CacheType::kBFloat16: return "bfloat16";
  }
  return "?";
}
bool is_cached(Call c) { return c == Call::kCached || c == Call::kCachedQk; }
bool is_qk(Call c) { return c == Call::kPlanQk || c == Call::kCachedQk; }

struct Config {
  int index = 0;
  std::uint64_t seed = 0;
  const char* type = "";
  Call call = Call::kPlan;
  Fault fault = Fault::kNone;
  bool fault_out_of_place = false;  // a failing single call: apply_rope(_cached), not in place
  RopeDirection direction = RopeDirection::kForward;
  RopeLayout layout = RopeLayout::kHalfSplit;
  Index batch = 1, seq = 1, rd = 2, offset = 0;
  std::vector<Index> buffer_sizes;
  std::vector<Region> src;  // x, or q and k
  Region dst;               // the out-of-place destination of single calls
  Entry inplace_entry = Entry::kHeads;
  bool out_rank4 = false, qk_rank4 = false, alias_call = false;
  PlanSpec plan, plan_to;
  int helper = 0;  // rerotate: 1 dynamic_plan_change, 2 longrope_plan_change (rope_plans.hpp)
  Pos helper_l0 = 0, helper_seq = 0;
  double helper_factor = 1.0;
  Positions pos;
  CacheType cache_type = CacheType::kFloat;
  Pos cache_first = 0;
  Index cache_rows = 0, cache_offset_arg = 0;
  bool cache_mutable_view = false;
  bool tiny = false;  // 16-bit inputs scaled into the subnormal range
  int threads = 0;        // every call on a ThreadPoolDevice of this many threads (0: none)
  bool recorded = false;  // through RecordingDevice, which counts the chunks it runs
  bool nonfinite = false;  // a few NaN / +Inf / -Inf planted in the source views
};

template <typename T>
std::string list(const std::vector<T>& v) {
  std::ostringstream os;
  os << "{";
  for (std::size_t i = 0; i < v.size(); ++i) os << (i ? "," : "") << v[i];
  os << "}";
  return os.str();
}

std::string describe(const Config& c) {
  std::ostringstream os;
  os << "rope config #" << c.index << " (seed " << c.seed << ") " << c.type << ": " << name(c.call)
     << " | " << posenc::to_string(c.direction) << " " << posenc::to_string(c.layout)
     << " batch " << c.batch << " seq " << c.seq << " rotary_dim " << c.rd << " offset "
     << c.offset << (c.tiny ? " tiny inputs" : "") << (c.nonfinite ? " NaN/Inf inputs" : "");
  if (c.threads > 0) {
    os << " | " << c.threads << " threads" << (c.recorded ? " (recording device)" : "");
  }
  for (std::size_t t = 0; t < c.src.size(); ++t) {
    os << " | " << (c.src.size() == 2 ? (t == 0 ? "q " : "k ") : "x ") << describe(c.src[t]);
  }
  if (c.dst.buffer >= 0) os << " | out " << describe(c.dst);
  os << " | entry " << (c.inplace_entry == Entry::kRank4    ? "rank-4"
                        : c.inplace_entry == Entry::kParams ? "params"
                                                            : "heads")
     << (c.out_rank4 ? " out rank-4" : "") << (c.qk_rank4 ? " qk rank-4" : "")
     << (c.alias_call ? " +apply_rope(x, x)" : "");
  if (c.helper != 0) {
    os << " | plans " << (c.helper == 1 ? "dynamic_plan_change" : "longrope_plan_change")
       << "(L0 " << c.helper_l0 << ", factor " << c.helper_factor << ", seq " << c.helper_seq
       << ")";
  } else {
    os << " | plan " << describe(c.plan);
    if (c.call == Call::kRerotate) os << " -> " << describe(c.plan_to);
  }
  os << " | positions " << name(c.pos.kind) << " offset " << c.pos.offset;
  if (!c.pos.starts.empty()) os << " starts " << list(c.pos.starts);
  if (!c.pos.ids.empty()) os << " ids " << list(c.pos.ids);
  if (is_cached(c.call)) {
    os << " | cache " << name(c.cache_type) << " rows " << c.cache_rows << " first "
       << c.cache_first << " rotary_offset arg " << c.cache_offset_arg
       << (c.cache_mutable_view ? " (TensorView)" : " (ConstTensorView)");
  }
  os << " | fault " << name(c.fault) << (c.fault_out_of_place ? " (out of place)" : "");
  return os.str();
}

Index draw_dim(SplitMix64& rng) {
  if (coin(rng, 0.7)) {
    return pick<Index>(rng, {2, 4, 6, 8, 10, 16, 18, 32, 34, 48, 64, 64, 80, 96, 128, 128, 130,
                             160, 192, 256});
  }
  return 2 * irange(rng, 1, 128);
}

/// Heads past 256 dims (up to kMaxRotaryDim = 1024 rotated, 1088 wide), rotary_dim mostly > 256.
Index draw_wide_dim(SplitMix64& rng) {
  return pick<Index>(rng, {384, 512, 512, 640, 768, 1024, 1024, 1088, 2 * irange(rng, 129, 544)});
}
Index draw_wide_rotary(SplitMix64& rng, Index dim) {
  const Index top = std::min(dim, posenc::kMaxRotaryDim);
  if (coin(rng, 0.5)) return top;
  return std::min(top, pick<Index>(rng, {512, 1024, 2 * irange(rng, 129, top / 2), top - 32}));
}

/// Eigen's TensorCostModel: n tokens of b bytes (rope.hpp passes TensorOpCost(b, b, b)) cost
/// n b (1 + 2 * 11 / 64) cycles, and parallelFor takes a second thread from 2.1e5 cycles.
constexpr double kSplitBytes = 2.1e5 / (1.0 + 22.0 / 64.0);

/// Whether Eigen's parallelFor splits a call of `units` tokens of `token_bytes` (read + write
/// of the rotated dims of every target, in place or not, as validate_targets counts them).
bool predicted_split(Index units, double token_bytes, int threads) {
  if (threads <= 1 || units <= 1) return false;
  const Eigen::TensorOpCost cost(token_bytes, token_bytes, token_bytes);
  return Eigen::TensorCostModel<Eigen::ThreadPoolDevice>::numThreads(
             static_cast<double>(units), cost, threads) > 1;
}

Index draw_rotary(SplitMix64& rng, Index dim) {
  if (coin(rng, 0.45)) return dim;
  const Index half = std::max<Index>(2, dim / 2 - (dim / 2) % 2);
  const Index rd = pick<Index>(rng, {half, 16, 32, 64, 2, 2 * irange(rng, 1, dim / 2)});
  return std::min(rd, dim);
}

/// Largest position of the scenario (0 without tokens).
Pos max_position(const Config& c) {
  Pos top = 0;
  for (Index b = 0; b < c.batch; ++b) {
    for (Index s = 0; s < c.seq; ++s) top = std::max(top, c.pos.value(b, s, c.seq));
  }
  return top;
}

/// Breaks the positions: one value negative or past 2^53 (an id, an offset, a start, or a sum
/// of valid parts), mostly on the last token, so that a lazy check would have written before.
void inject_position_fault(SplitMix64& rng, Config& c) {
  Positions& p = c.pos;
  const bool negative = c.fault == Fault::kNegative;
  const Pos bad = negative ? -pick<Pos>(rng, {1, irange(rng, 2, 1000), Pos{1} << 40})
                           : kMaxPos + pick<Pos>(rng, {1, irange(rng, 2, 1000)});
  const Index last = c.batch * c.seq - 1;
  switch (p.kind) {
    case PosKind::kContiguous:
      // Past 2^53 through the sum: the start is valid, start + seq - 1 is not.
      p.offset = negative || coin(rng, 0.4) ? bad : kMaxPos - (c.seq - 1) + irange(rng, 1, 3);
      break;
    case PosKind::kContiguousFrom:
      p.starts[at(coin(rng, 0.6) ? c.batch - 1 : irange(rng, 0, c.batch - 1))] = bad;
      break;
    case PosKind::kIds:
    case PosKind::kLeftPadded:
    case PosKind::kTokenIds: {
      const Index n = static_cast<Index>(p.ids.size());
      if (coin(rng, 0.25)) {
        p.offset = bad;
      } else if (!negative && coin(rng, 0.3)) {
        p.offset = kMaxPos - p.ids[at(n - 1)] + 1;  // valid offset, valid id, sum past 2^53
      } else {
        p.ids[at(coin(rng, 0.6) ? std::min(last, n - 1) : irange(rng, 0, n - 1))] = bad;
      }
      break;
    }
  }
}

/// element_bytes: sizeof the storage type (16-bit inputs may be subnormal, the large calls are
/// sized to pass 512 KiB).
Config draw_config(int index, std::uint64_t salt, std::size_t element_bytes) {
  Config c;
  c.index = index;
  c.seed = salt + 0x9E3779B97F4A7C15ULL * static_cast<std::uint64_t>(index + 1);
  SplitMix64 rng(c.seed);
  // The options added later draw from a stream of their own: the others stay as they were.
  SplitMix64 extra(c.seed ^ 0x3C6EF372FE94F82BULL);
  c.threads = coin(extra, 0.09) ? pick(extra, {2, 2, 2, 3, 4}) : 0;
  c.recorded = c.threads > 0 && coin(extra, 0.5);
  c.nonfinite = coin(extra, 0.1);
  const double uc = between(rng, 0.0, 1.0);
  c.call = uc < 0.28   ? Call::kPlan
           : uc < 0.48 ? Call::kPlanQk
           : uc < 0.68 ? Call::kCached
           : uc < 0.82 ? Call::kCachedQk
                       : Call::kRerotate;
  const bool cached = is_cached(c.call), qk = is_qk(c.call);
  const bool rerotate = c.call == Call::kRerotate, plan_call = !cached && !rerotate;
  if (coin(rng, rerotate ? 0.3 : cached ? 0.17 : 0.13)) {
    if (cached) {
      c.fault = pick(rng, {Fault::kNegative, Fault::kPastMax, Fault::kSliceTooWide,
                           Fault::kCacheShort, Fault::kCacheShort});
    } else if (rerotate) {
      c.fault = pick(rng, {Fault::kNegative, Fault::kPastMax, Fault::kWrongDirection,
                           Fault::kWrongDirection, Fault::kWrongDirection});
    } else {
      c.fault = pick(rng, {Fault::kNegative, Fault::kPastMax, Fault::kSliceTooWide});
    }
  }
  // Every 40th call is larger than kRopeResidentBytes (512 KiB of rotated rows), which the
  // vector kernels walk row by row instead of in register-held pair blocks.
  const bool big = index % 40 == 17;
  if (big) c.fault = Fault::kNone;
  const bool fault = c.fault != Fault::kNone;
  c.fault_out_of_place = !qk && !rerotate && coin(rng, 0.5);
  c.batch = irange(rng, 1, 3);
  const double us = between(rng, 0.0, 1.0);
  c.seq = us < 0.06 ? 0 : us < 0.26 ? 1 : irange(rng, 2, 40);
  if (fault) c.seq = std::max<Index>(c.seq, 1);
  c.layout = coin(rng, 0.5) ? RopeLayout::kInterleaved : RopeLayout::kHalfSplit;
  const double ud = between(rng, 0.0, 1.0);
  c.direction = ud < 0.5    ? RopeDirection::kForward
                : ud < 0.75 ? RopeDirection::kInverse
                            : RopeDirection::kTranspose;
  if (rerotate) {
    c.direction = c.fault == Fault::kWrongDirection
                      ? pick(rng, {RopeDirection::kInverse, RopeDirection::kTranspose})
                      : RopeDirection::kForward;
  }

  // Widths: a slice [offset, offset + rd) of heads of `dim`. Presets: MLA (64 rotated after
  // 128 nope dims), Gemma-4 global heads (proportional, the whole head, most pairs still).
  const bool wide = !big && coin(extra, 0.07);
  const bool mla = !big && !wide && coin(rng, 0.08);
  const bool gemma = !big && !mla && !wide && coin(rng, 0.06);
  const Index dim = wide    ? draw_wide_dim(extra)
                    : mla   ? 192
                    : gemma ? pick<Index>(rng, {128, 256, 512})
                    : big   ? 256
                            : draw_dim(rng);
  c.rd = wide    ? draw_wide_rotary(extra, dim)
         : mla   ? 64
         : gemma ? dim
         : big   ? pick<Index>(rng, {dim, dim - 16})
                 : draw_rotary(rng, dim);
  c.offset = mla ? 128
             : (!gemma && c.rd < dim && coin(rng, 0.5)) ? irange(rng, 1, dim - c.rd)
                                                        : 0;
  Index hq = irange(rng, 1, 9);
  Index hk = mla ? 1 : coin(rng, 0.4) ? hq : irange(rng, 1, 9);
  if (big) {
    // 1.15 x 512 KiB (rd = 240: 1.08 x) for the call that crosses it: the out-of-place one
    // (rows read and written count twice), Q and K together. The in-place call and the single
    // calls stay below, so the bit-for-bit comparisons pit the two loop orders. A 16-bit
    // re-rotation (in place, one tensor) needs all 9 heads x 256 rotated dims: 1.05 x.
    c.batch = 3;
    c.seq = 40;
    const double head_bytes = static_cast<double>(c.batch * c.seq * 256 * element_bytes);
    const double rows_counted = rerotate ? 1.0 : 2.0;  // out of place, or q and k
    hq = static_cast<Index>(std::ceil(1.15 * 512 * 1024 / (rows_counted * head_bytes)));
    if (hq > 9) {
      hq = 9;
      c.rd = dim;
      c.offset = 0;
    }
    hk = hq;
  }
  Index dq = dim;
  Index dk = qk && coin(rng, 0.4) ? c.offset + c.rd + irange(rng, 0, 64) : dim;
  while (!big && c.batch * c.seq * (hq * dq + (qk ? hk * dk : 0)) > 24000 &&
         (hq > 1 || hk > 1)) {
    hq = std::max<Index>(1, hq - 1);
    hk = std::max<Index>(1, hk - 1);
  }
  while (wide && c.batch * c.seq * (hq * dq + (qk ? hk * dk : 0)) > 24000 && c.seq > 1) --c.seq;
  if (c.threads > 0 && !fault && !big && coin(extra, 0.9)) {
    // Enough tokens for Eigen to split the call: 1.1-1.8 times the threshold, within a budget
    // of elements (a call of narrow slices in wide heads may stay below it: tallied).
    const double token_bytes =
        2.0 * static_cast<double>((hq + (qk ? hk : 0)) * c.rd) * static_cast<double>(element_bytes);
    const Index want = static_cast<Index>(std::ceil(kSplitBytes * between(extra, 1.1, 1.8) /
                                                    token_bytes));
    const Index budget = (element_bytes == 2 ? 100000 : 60000) / (hq * dq + (qk ? hk * dk : 0));
    c.seq = std::max(c.seq, (std::min(want, budget) + c.batch - 1) / c.batch);
  }
  if (c.fault == Fault::kSliceTooWide && !cached) {
    const Index narrow = irange(rng, std::max<Index>(1, c.offset), c.offset + c.rd - 1);
    if (qk && coin(rng, 0.5)) {
      dk = narrow;
    } else {
      dq = narrow;
    }
  }

  // Views. Some plan calls take the rank-4 overloads (forward, position_ids without offset).
  // (The rank-4 overloads take no options: none on threads.)
  const bool force_rank4 = plan_call && !fault && coin(rng, 0.3) && c.threads == 0;
  if (force_rank4) c.direction = RopeDirection::kForward;
  const ViewKind forced = pick(rng, {ViewKind::kBshd, ViewKind::kBhsd, ViewKind::kSbhd});
  const auto kind = [&](bool allow_fused) {
    return force_rank4 ? forced : draw_kind(rng, c.batch, allow_fused);
  };
  if (qk) {
    if (!force_rank4 && c.batch == 1 && dq == dk && coin(rng, 0.3)) {
      const auto qkv = fused_pair(rng, c.buffer_sizes, c.seq, hq, hk, dq, -1);
      c.src = {qkv.first, qkv.second};
    } else {
      c.src.push_back(own_view(rng, c.buffer_sizes, kind(false), c.batch, c.seq, hq, dq, -1));
      c.src.push_back(own_view(rng, c.buffer_sizes, kind(false), c.batch, c.seq, hk, dk, -1));
    }
  } else {
    c.src.push_back(single_view(rng, c.buffer_sizes, kind(true), c.batch, c.seq, hq, dq, -1));
    if (!rerotate) {
      // Often on the same phase as the source: the AVX-512 line-phase kernels want both.
      const Index lead = coin(rng, 0.3) ? c.src[0].base % 16 : -1;
      c.dst = single_view(rng, c.buffer_sizes, kind(true), c.batch, c.seq, hq, dq, lead);
    }
  }

  // Positions.
  PosKind pk = PosKind::kContiguous;
  if (force_rank4) {
    pk = coin(rng, 0.5) ? PosKind::kIds : PosKind::kLeftPadded;
  } else {
    const double up = between(rng, 0.0, 1.0);
    pk = up < 0.28   ? PosKind::kContiguous
         : up < 0.42 ? PosKind::kContiguousFrom
         : up < 0.62 ? PosKind::kIds
         : up < 0.78 ? PosKind::kLeftPadded
                     : (c.batch == 1 ? PosKind::kTokenIds : PosKind::kIds);
  }
  c.pos = draw_positions(rng, pk, c.batch, c.seq, cached);
  if (force_rank4) c.pos.offset = 0;
  if (!cached && !fault && c.seq > 0 && coin(rng, 0.03)) {
    // The last valid position, 2^53, on the last token.
    switch (pk) {
      case PosKind::kContiguous: c.pos.offset = kMaxPos - (c.seq - 1); break;
      case PosKind::kContiguousFrom: c.pos.starts.back() = kMaxPos - (c.seq - 1); break;
      default: c.pos.ids.back() = kMaxPos - c.pos.offset; break;
    }
  }
  const Pos top = max_position(c);

  // Entries.
  const bool plain_ids = (pk == PosKind::kIds || pk == PosKind::kLeftPadded) &&
                         c.pos.offset == 0 && c.direction == RopeDirection::kForward && !fault;
  if (c.call == Call::kPlan && plain_ids && is_rank4(c.src[0].kind) && c.threads == 0) {
    const double ue = between(rng, 0.0, 1.0);
    c.inplace_entry = ue < 0.35 ? Entry::kHeads : ue < 0.7 ? Entry::kRank4 : Entry::kParams;
    c.out_rank4 = c.dst.kind == c.src[0].kind && coin(rng, 0.7);
  }
  if (c.call == Call::kPlanQk && plain_ids && is_rank4(c.src[0].kind) &&
      c.src[0].kind == c.src[1].kind && c.threads == 0) {
    c.qk_rank4 = coin(rng, 0.7);
  }
  c.alias_call = (c.call == Call::kPlan || c.call == Call::kCached) && !fault && coin(rng, 0.3);

  // Plans.
  c.plan = draw_plan(rng, c.rd, c.offset, c.layout, top + 1, gemma);
  if (c.inplace_entry == Entry::kParams) c.plan.seq_len = c.seq == 0 ? 0 : top + 1;
  if (rerotate) {
    if (c.offset == 0 && coin(rng, 0.35)) {
      c.helper = c.rd > 2 && coin(rng, 0.5) ? 1 : 2;
      c.helper_l0 = pick<Pos>(rng, {16, 64, 2048});
      c.helper_factor = pick(rng, {2.0, 4.0, between(rng, 1.5, 8.0)});
      c.helper_seq = c.helper_l0 + irange(rng, 1, 3 * c.helper_l0);
    } else {
      c.plan_to = draw_plan(rng, c.rd, c.offset, c.layout, top + 1);
    }
  }

  // The cache: rows for every position (first_position shifts the angles they hold).
  if (cached) {
    c.cache_type = pick(rng, {CacheType::kFloat, CacheType::kDouble, CacheType::kHalf,
                              CacheType::kBFloat16});
    const double uf = between(rng, 0.0, 1.0);
    c.cache_first = uf < 0.4    ? 0
                    : uf < 0.6  ? irange(rng, 1, 5000)
                    : uf < 0.75 ? (Pos{1} << 24) + irange(rng, -100, 100)
                    : uf < 0.93 ? irange(rng, Pos{1} << 24, Pos{1} << 31)
                                : (Pos{1} << 40) + irange(rng, 0, Pos{1} << 20);
    c.cache_rows = top + 1 + (coin(rng, 0.5) ? 0 : irange(rng, 1, 5));
    if (c.fault == Fault::kCacheShort) {
      if (top >= 1) {
        c.cache_rows = coin(rng, 0.7) ? top : irange(rng, 1, top);
      } else {
        c.fault = Fault::kNone;  // every position is 0: no cache is too short
      }
    }
    c.cache_offset_arg = c.offset;
    if (c.fault == Fault::kSliceTooWide) {
      c.cache_offset_arg = std::min(dq, dk) - c.rd + irange(rng, 1, 3);
    }
    c.cache_mutable_view = coin(rng, 0.5);
  }
  if (c.fault == Fault::kNegative || c.fault == Fault::kPastMax) inject_position_fault(rng, c);
  c.tiny = element_bytes == 2 && coin(rng, 0.12);
  return c;
}

enum class Throws { kNothing, kInvalidArgument, kOutOfRange };

/// What the call must throw, from the documented rules: ids, offsets and starts in [0, 2^53]
/// and every position <= 2^53 (std::invalid_argument), below the cache's rows for the cached
/// calls (std::out_of_range); a slice wider than a head or re-rotation in another direction is
/// std::invalid_argument.
Throws expected_throw(const Config& c) {
  if (c.fault == Fault::kSliceTooWide || c.fault == Fault::kWrongDirection) {
    return Throws::kInvalidArgument;
  }
  const auto outside = [](Pos v) { return v < 0 || v > kMaxPos; };
  bool bad = outside(c.pos.offset);
  for (const Pos v : c.pos.starts) bad = bad || outside(v);
  for (const Pos v : c.pos.ids) bad = bad || outside(v);
  if (bad) return Throws::kInvalidArgument;
  const bool cached = is_cached(c.call);
  const Pos limit = cached ? static_cast<Pos>(c.cache_rows) : kMaxPos + 1;
  for (Index b = 0; b < c.batch; ++b) {
    for (Index s = 0; s < c.seq; ++s) {
      if (c.pos.value(b, s, c.seq) >= limit) {
        return cached ? Throws::kOutOfRange : Throws::kInvalidArgument;
      }
    }
  }
  return Throws::kNothing;
}

// ---- the oracle --------------------------------------------------------------------------------

/// One pair of one token: y1 = x1 c - x2 s, y2 = x2 c + x1 s (long double).
struct PairTurn {
  long double c = 1.0L, s = 0.0L;
  long double mult = 1.0L;       // bound on |c|, |s|: scales the inputs for the tolerance
  long double angle_err = 0.0L;  // bound on the error of the angle the kernel formed, radians
};

/// The angle a kernel forms on the fly is p w (re-rotation: p (w_to - w_from)) rounded to
/// double, off by up to 2^-53 |p w| (the difference w_to - w_from adds another 2^-53 of it);
/// between anchors the angle-addition recurrence carries up to 32 steps of a few roundings
/// each (< 1.1e-14), and float compute uses the Taylor polynomial cut at r^13 (< 4e-13, see
/// rope_sincos). Turning a vector by a wrong angle d moves it by at most |x| d. rope.md records
/// double storage at 2^31 within |p| 2^-52, the same bound.
long double angle_error(long double angle, bool double_compute) {
  return std::fabs(angle) * 0x1p-52L + (double_compute ? 2e-14L : 5e-13L);
}

/// How far a rotated value may be from the long-double one: rounded_once_tolerance
/// (rope_plans.hpp: half an ulp of T plus float arithmetic relative to the inputs), the error
/// of the angle times the inputs (scale = |x1| + |x2| times the cos / sin multiplier), and for
/// float compute, float's absolute spacing below 2^-126: each of the <= 3 float roundings of a
/// rotated value (two products and a sum, or a product and an FMA) adds up to 2^-150 there,
/// which only the subnormal inputs drawn for the 16-bit types reach.
template <typename T>
double tolerance(long double want, long double scale, long double angle_err) {
  const double subnormal = std::is_same_v<T, double> ? 0.0 : 3.0 * 0x1p-150;
  return posenc_test::rounded_once_tolerance<T>(want, scale) +
         static_cast<double>(scale * angle_err) + subnormal;
}

/// A lower bound of tolerance() without its ilogb / ldexp: half an ulp of T is more than
/// |want| 2^-(bits + 2). Passing it passes tolerance(); the rest is decided by tolerance().
template <typename T>
long double quick_tolerance(long double want, long double scale, long double angle_err) {
  if constexpr (std::is_same_v<T, Eigen::half> || std::is_same_v<T, Eigen::bfloat16>) {
    constexpr long double kQuarterUlp = std::is_same_v<T, Eigen::half> ? 0x1p-12L : 0x1p-9L;
    return std::fabs(want) * kQuarterUlp + scale * angle_err;
  } else {
    return 0.0L;
  }
}

PairTurn directed(long double cs, long double sn, long double a, RopeDirection d) {
  PairTurn t;
  switch (d) {
    case RopeDirection::kForward: t = {a * cs, a * sn, a, 0.0L}; break;
    case RopeDirection::kInverse: t = {cs / a, -sn / a, 1.0L / a, 0.0L}; break;
    case RopeDirection::kTranspose: t = {a * cs, -a * sn, a, 0.0L}; break;
  }
  return t;
}

/// Per token and pair, from the plan's own inv_freq and attention factor.
std::vector<PairTurn> plan_turns(const Config& c, const RopeFrequencies& f, bool double_compute) {
  const Index half = c.rd / 2;
  std::vector<PairTurn> turns(at(c.batch * c.seq * half));
  for (Index b = 0; b < c.batch; ++b) {
    for (Index s = 0; s < c.seq; ++s) {
      const long double p = static_cast<long double>(c.pos.value(b, s, c.seq));
      for (Index j = 0; j < half; ++j) {
        const long double angle = p * static_cast<long double>(f.inv_freq[at(j)]);
        PairTurn& t = turns[at((b * c.seq + s) * half + j)];
        t = directed(std::cos(angle), std::sin(angle), f.attention_factor, c.direction);
        t.angle_err = angle_error(angle, double_compute);
      }
    }
  }
  return turns;
}

/// k <- R_to(p) R_from(p)^-1 k = (a_to / a_from) R(p (w_to - w_from)) k.
std::vector<PairTurn> rerotate_turns(const Config& c, const RopeFrequencies& from,
                                     const RopeFrequencies& to, bool double_compute) {
  const Index half = c.rd / 2;
  const long double ratio = static_cast<long double>(to.attention_factor) / from.attention_factor;
  std::vector<PairTurn> turns(at(c.batch * c.seq * half));
  for (Index b = 0; b < c.batch; ++b) {
    for (Index s = 0; s < c.seq; ++s) {
      const long double p = static_cast<long double>(c.pos.value(b, s, c.seq));
      for (Index j = 0; j < half; ++j) {
        const long double angle = p * (static_cast<long double>(to.inv_freq[at(j)]) -
                                       static_cast<long double>(from.inv_freq[at(j)]));
        PairTurn& t = turns[at((b * c.seq + s) * half + j)];
        t = directed(std::cos(angle), std::sin(angle), ratio, RopeDirection::kForward);
        t.angle_err = angle_error(angle, double_compute);
      }
    }
  }
  return turns;
}

/// From the cache's stored values: position p reads row p (which fill_rope_cos_sin_cache
/// filled for first_position + p), cos in [0, rd/2), sin in [rd/2, rd), the attention factor
/// in them. Forward turns by (c, s) as stored, the transpose by (c, -s), the inverse is the
/// forward's exact inverse, (c, -s) / (c^2 + s^2).
std::vector<PairTurn> cached_turns(const Config& c, const std::vector<long double>& rows) {
  const Index half = c.rd / 2;
  std::vector<PairTurn> turns(at(c.batch * c.seq * half));
  for (Index b = 0; b < c.batch; ++b) {
    for (Index s = 0; s < c.seq; ++s) {
      const Index row = static_cast<Index>(c.pos.value(b, s, c.seq));
      for (Index j = 0; j < half; ++j) {
        const long double cs = rows[at(row * c.rd + j)], sn = rows[at(row * c.rd + half + j)];
        PairTurn t;
        switch (c.direction) {
          case RopeDirection::kForward: t = {cs, sn, 0.0L, 0.0L}; break;
          case RopeDirection::kTranspose: t = {cs, -sn, 0.0L, 0.0L}; break;
          case RopeDirection::kInverse: {
            const long double n = cs * cs + sn * sn;
            t = {cs / n, -sn / n, 0.0L, 0.0L};
            break;
          }
        }
        t.mult = std::max(std::fabs(t.c), std::fabs(t.s));
        turns[at((b * c.seq + s) * half + j)] = t;
      }
    }
  }
  return turns;
}

// ---- checks ----------------------------------------------------------------------------------

template <typename T>
struct Memory {
  std::vector<LineVector<T>> buffers;
  T* ptr(const Region& r) { return buffers[at(r.buffer)].data(); }
  const T* ptr(const Region& r) const { return buffers[at(r.buffer)].data(); }
};

using Coverage = std::vector<std::vector<char>>;  // per buffer: written by the call under test

template <typename T>
Coverage no_coverage(const Memory<T>& m) {
  Coverage cov;
  for (const auto& b : m.buffers) cov.emplace_back(b.size(), char{0});
  return cov;
}

/// Per token, how many leading pairs turn, by the rule rope.hpp documents for
/// rope_turning_pairs: trailing whole blocks of 32 pairs whose cos is exactly 1 and sin +-0 in
/// the kernels' compute type C (and a first partial block, when it is all that is left) are
/// left untouched; when the last pair turns, every pair does.
template <typename C>
std::vector<Index> turning_pairs(const std::vector<PairTurn>& turns, Index tokens, Index half) {
  std::vector<Index> out(at(tokens), half);
  for (Index u = 0; u < tokens && half > 0; ++u) {
    const PairTurn* t = turns.data() + u * half;
    const auto still = [&](Index j) {
      return static_cast<C>(t[j].c) == C(1) && static_cast<C>(t[j].s) == C(0);
    };
    const auto all_still = [&](Index from, Index to) {
      for (Index j = from; j < to; ++j) {
        if (!still(j)) return false;
      }
      return true;
    };
    if (!still(half - 1)) continue;
    Index n = half;
    while (n >= 32 && all_still(n - 32, n)) n -= 32;
    out[at(u)] = n > 0 && n < 32 && all_still(0, n) ? 0 : n;
  }
  return out;
}

/// The view `out` of `got` against the oracle applied to the view `in` of `input`: rotated
/// dims within tolerance, the others bit-identical to their source, and so are the still pairs
/// (turning_pairs). A NaN or an infinity the formula gives (from planted inputs) must be one
/// too, an infinity of the same sign.
template <typename T>
void check_rotated(Report& r, const char* what, const Memory<T>& got, const Region& out,
                   const Memory<T>& input, const Region& in, const std::vector<PairTurn>& turns,
                   const Config& c, Index offset, Coverage& cov) {
  const Index half = c.rd / 2, dim = out.dim;
  const bool interleaved = c.layout == RopeLayout::kInterleaved;
  const std::vector<Index> pairs =
      turning_pairs<posenc::detail::compute_t<T>>(turns, c.batch * c.seq, half);
  for (Index b = 0; b < out.batch; ++b) {
    for (Index s = 0; s < out.seq; ++s) {
      const Index turning = pairs[at(b * c.seq + s)];
      for (Index h = 0; h < out.heads; ++h) {
        const T* x = input.ptr(in) + in.row(b, s, h);
        const T* y = got.ptr(out) + out.row(b, s, h);
        for (Index i = 0; i < dim; ++i) cov[at(out.buffer)][at(out.row(b, s, h) + i)] = 1;
        for (Index i = 0; i < dim; ++i) {
          if (i >= offset && i < offset + c.rd) continue;
          ++r.checked;
          if (bits(y[i]) != bits(x[i])) {
            std::ostringstream os;
            os << what << " [" << b << "," << s << "," << h << "] pass-through dim " << i
               << ": got " << wide(y[i]) << ", want the input " << wide(x[i]) << " bit for bit";
            r.fail(os.str());
          }
        }
        for (Index j = 0; j < half; ++j) {
          const PairTurn& t = turns[at((b * c.seq + s) * half + j)];
          const Index i1 = interleaved ? offset + 2 * j : offset + j;
          const Index i2 = interleaved ? offset + 2 * j + 1 : offset + half + j;
          const long double x1 = wide(x[i1]), x2 = wide(x[i2]);
          const long double scale = t.mult * (std::fabs(x1) + std::fabs(x2));
          const long double want[2] = {x1 * t.c - x2 * t.s, x2 * t.c + x1 * t.s};
          const Index dims[2] = {i1, i2};
          const bool finite_in = std::isfinite(x1) && std::isfinite(x2);
          if (j >= turning) {
            r.nonfinite_still += !finite_in;
            for (const Index i : dims) {
              ++r.checked;
              if (bits(y[i]) != bits(x[i])) {
                std::ostringstream os;
                os << what << " [" << b << "," << s << "," << h << "] dim " << i << " (still pair "
                   << j << " of " << half << ", " << turning << " turn, position "
                   << c.pos.value(b, s, c.seq) << "): got " << wide(y[i]) << ", want the input "
                   << wide(x[i]) << " bit for bit";
                r.fail(os.str());
              }
            }
            continue;
          }
          r.nonfinite_turned += !finite_in;
          r.inf_to_nan += !std::isnan(x1) && !std::isnan(x2) &&
                          (std::isnan(want[0]) || std::isnan(want[1]));
          for (int e = 0; e < 2; ++e) {
            ++r.checked;
            const long double g = wide(y[dims[e]]);
            if (!std::isfinite(want[e]) || !std::isfinite(g)) {
              // NaN-ness and the infinity's sign exactly (a finite want: the tolerance below).
              const bool ok = std::isnan(want[e])   ? std::isnan(g)
                              : std::isinf(want[e]) ? g == want[e]
                                                    : false;
              if (!ok) {
                std::ostringstream os;
                os << what << " [" << b << "," << s << "," << h << "] dim " << dims[e]
                   << " (pair " << j << ", position " << c.pos.value(b, s, c.seq) << ", inputs "
                   << static_cast<double>(x1) << ", " << static_cast<double>(x2) << ", cos "
                   << static_cast<double>(t.c) << ", sin " << static_cast<double>(t.s)
                   << "): got " << static_cast<double>(g) << ", the formula gives "
                   << static_cast<double>(want[e]);
                r.fail(os.str());
              }
              continue;
            }
            const long double diff = std::fabs(g - want[e]);
            if (diff <= quick_tolerance<T>(want[e], scale, t.angle_err)) continue;
            const double tol = tolerance<T>(want[e], scale, t.angle_err);
            if (!(diff <= tol)) {
              std::ostringstream os;
              os.precision(10);
              os << what << " [" << b << "," << s << "," << h << "] dim " << dims[e] << " (pair "
                 << j << ", position " << c.pos.value(b, s, c.seq) << "): got "
                 << static_cast<double>(g) << ", want " << static_cast<double>(want[e])
                 << " (diff " << static_cast<double>(std::fabs(g - want[e])) << ", tol " << tol
                 << ")";
              r.fail(os.str());
            }
          }
        }
      }
    }
  }
}

/// Every element the call was not asked to write is bit-identical to before.
template <typename T>
void check_untouched(Report& r, const char* what, const Memory<T>& got, const Memory<T>& before,
                     const Coverage& cov) {
  for (std::size_t k = 0; k < got.buffers.size(); ++k) {
    for (std::size_t i = 0; i < got.buffers[k].size(); ++i) {
      if (cov[k][i]) continue;
      ++r.checked;
      if (bits(got.buffers[k][i]) != bits(before.buffers[k][i])) {
        std::ostringstream os;
        os << what << ": buffer " << k << " element " << i << " outside the views changed";
        r.fail(os.str());
      }
    }
  }
}

/// Bits equal, or (any_nan) both NaN: the sign and payload of a NaN computed from a planted
/// NaN are not the same in every loop on every target (see the "[!mayfail]" test below).
template <typename T>
bool same(T x, T y, bool any_nan) {
  return bits(x) == bits(y) || (any_nan && std::isnan(wide(x)) && std::isnan(wide(y)));
}

template <typename T>
void compare_memory(Report& r, const char* what, const Memory<T>& a, const Memory<T>& b,
                    bool any_nan = false) {
  for (std::size_t k = 0; k < a.buffers.size(); ++k) {
    for (std::size_t i = 0; i < a.buffers[k].size(); ++i) {
      if (!same(a.buffers[k][i], b.buffers[k][i], any_nan)) {
        std::ostringstream os;
        os << what << ": buffer " << k << " element " << i << " differs: "
           << wide(a.buffers[k][i]) << " vs " << wide(b.buffers[k][i]);
        r.fail(os.str());
        return;
      }
    }
  }
}

template <typename T>
void compare_views(Report& r, const char* what, const Memory<T>& a, const Region& ra,
                   const Memory<T>& b, const Region& rb, bool any_nan = false) {
  for (Index n = 0; n < ra.batch; ++n) {
    for (Index s = 0; s < ra.seq; ++s) {
      for (Index h = 0; h < ra.heads; ++h) {
        for (Index i = 0; i < ra.dim; ++i) {
          const T x = a.ptr(ra)[ra.row(n, s, h) + i], y = b.ptr(rb)[rb.row(n, s, h) + i];
          if (!same(x, y, any_nan)) {
            std::ostringstream os;
            os << what << " [" << n << "," << s << "," << h << "] dim " << i << ": " << wide(x)
               << " vs " << wide(y);
            r.fail(os.str());
            return;
          }
        }
      }
    }
  }
}

// ---- the cache -----------------------------------------------------------------------------

struct Cache {
  LineVector<float> f;
  LineVector<double> d;
  LineVector<Eigen::half> h;
  LineVector<Eigen::bfloat16> b;
  std::vector<long double> values;  // every element widened
};

template <typename C>
LineVector<C> filled_cache(const RopeFrequencies& freqs, Index rows, Pos first,
                           std::vector<long double>& values) {
  LineVector<C> v(at(rows * freqs.rotary_dim));
  posenc::fill_rope_cos_sin_cache<C>(freqs, TensorView<C, 2>(v.data(), rows, freqs.rotary_dim),
                                     first);
  values = std::vector<long double>(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) values[i] = wide(v[i]);
  return v;
}

/// A CosSinCacheView through its implicit conversion from a (Const)TensorView.
template <typename C>
posenc::CosSinCacheView cache_view(const LineVector<C>& v, Index rows, Index rd,
                                   bool mutable_view) {
  if (mutable_view) return TensorView<C, 2>(const_cast<C*>(v.data()), rows, rd);
  return ConstTensorView<C, 2>(v.data(), rows, rd);
}

/// The rows the scenario reads, against a cos / sin of (first + row) w_j in long double: one
/// rounding to C of a value computed in double (angle error as on the fly, full precision).
template <typename C>
void check_cache_rows(Report& r, const Config& c, const RopeFrequencies& f,
                      const std::vector<long double>& values) {
  std::set<Pos> rows;
  for (Index b = 0; b < c.batch; ++b) {
    for (Index s = 0; s < c.seq; ++s) rows.insert(c.pos.value(b, s, c.seq));
  }
  const Index half = c.rd / 2;
  const long double a = f.attention_factor;
  for (const Pos row : rows) {
    const long double p = static_cast<long double>(c.cache_first + row);
    for (Index j = 0; j < half; ++j) {
      const long double angle = p * static_cast<long double>(f.inv_freq[at(j)]);
      const long double want[2] = {a * std::cos(angle), a * std::sin(angle)};
      const Index col[2] = {j, half + j};
      for (int e = 0; e < 2; ++e) {
        ++r.checked;
        const long double got = values[at(row * c.rd + col[e])];
        const double tol = posenc_test::rounded_once_tolerance<C>(want[e], a) +
                           static_cast<double>(a * angle_error(angle, true));
        if (!(std::fabs(got - want[e]) <= tol)) {
          std::ostringstream os;
          os << "cache row " << row << " column " << col[e] << ": got "
             << static_cast<double>(got) << ", want " << static_cast<double>(want[e]);
          r.fail(os.str());
        }
      }
    }
  }
}

// ---- the tally -----------------------------------------------------------------------------

enum Feature : int {
  kCallPlan, kCallPlanQk, kCallCached, kCallCachedQk, kCallRerotate,
  kViewBshd, kViewBhsd, kViewSbhd, kViewPacked, kViewStrided, kViewFusedQ, kViewFusedK,
  kViewGeneric, kOutRestrided, kAliasOut, kEntryRank4, kEntryParams, kEntryRank4Out,
  kEntryRank4Qk, kInterleaved, kHalfSplit, kPartial, kOffset, kFactorWidth, kPairsScalar,
  kPairs8, kPairs16, kPairs32, kHeadDimOdd8, kQkHeads, kQkDims, kBatch3,
  kDefault, kLinear, kNtk, kDynamic, kDynamicPast, kYarn, kYarnNoTruncate, kYarnMscale,
  kLlama3, kLongShort, kLongLong, kProportional, kStillBlock, kVllmNtk, kFreqFactors,
  kAttentionFactor, kRerotateHelper,
  kContiguous, kContiguousFrom, kIds, kLeftPadded, kTokenIds, kPosOffset, kPos24,
  kPastFastTrig, kPos40, kPosMax, kSeq0, kSeq1,
  kForward, kInverse, kTranspose,
  kCacheFloat, kCacheDouble, kCacheHalf, kCacheBf16, kCacheFirst, kCacheFirstHuge,
  kPhaseRows, kTiny, kFromL3,
  kThrowNegative, kThrowPastMax, kThrowSlice, kThrowCacheShort, kThrowDirection,
  kWideRotary, kRotary1024, kWideHead,
  kThreads2, kThreads34, kThreadRecorded, kThreadSplitCached, kThreadSplitFly, kThreadUnsplit,
  kNonFinite, kNonFiniteStill, kNonFiniteTurned, kInfToNan,
  kFeatureCount
};
constexpr std::array<const char*, kFeatureCount> kFeatureNames = {
    "call plan", "call plan q+k", "call cached", "call cached q+k", "call rerotate",
    "view bshd", "view bhsd", "view sbhd", "view packed", "view strided+gaps", "view fused q",
    "view fused k", "view any strides", "out-of-place other strides", "apply_rope(x, x)",
    "rank-4 in-place overload", "RopeParams overload", "rank-4 out-of-place overload",
    "rank-4 q+k overload", "interleaved", "half-split", "partial rotary", "rotary_offset",
    "partial_rotary_factor width", "pairs % 8 != 0", "pairs % 16 == 8", "pairs % 32 == 16",
    "pairs % 32 == 0", "head_dim % 8 != 0", "q/k head counts differ", "q/k head_dims differ",
    "batch 3",
    "default", "linear", "ntk", "dynamic", "dynamic past L0", "yarn", "yarn truncate=false",
    "yarn mscale", "llama3", "longrope short", "longrope long", "proportional",
    "still block of 32 pairs", "vllm_ntk", "freq_factors", "attention_factor != 1",
    "rerotate helper plans",
    "contiguous", "contiguous_from", "from_ids", "left padded", "from_token_ids",
    "position offset", "position >= 2^24", "angle > 2^30", "position >= 2^39", "position 2^53",
    "seq 0", "seq 1",
    "forward", "inverse", "transpose",
    "cache float", "cache double", "cache half", "cache bfloat16", "cache first_position",
    "cache first_position >= 2^24",
    "float rows off a cache line", "subnormal 16-bit inputs", "call > 512 KiB (row order)",
    "throws: negative", "throws: past 2^53", "throws: slice too wide", "throws: cache short",
    "throws: rerotate direction",
    "rotary_dim > 256", "rotary_dim 1024", "head_dim > 1024",
    "2 threads", "3 or 4 threads", "recording device split", "threads split, from a cache",
    "threads split, on the fly", "threads, call below the split",
    "NaN / Inf inputs", "NaN / Inf in a still pair", "NaN / Inf in a turning pair",
    "Inf turned into NaN"};

using Features = std::array<bool, kFeatureCount>;

void plan_features(Features& f, const PlanSpec& ps, const RopeFrequencies& fr) {
  const auto& sc = ps.params.scaling;
  switch (sc.type) {
    case RopeScalingType::kDefault: f[kDefault] = true; break;
    case RopeScalingType::kLinear: f[kLinear] = true; break;
    case RopeScalingType::kNtk: f[kNtk] = true; break;
    case RopeScalingType::kDynamic: {
      f[kDynamic] = true;
      const Pos l0 = sc.original_max_position_embeddings > 0 ? sc.original_max_position_embeddings
                                                              : ps.params.max_position_embeddings;
      f[kDynamicPast] = f[kDynamicPast] || ps.seq_len > l0;
      break;
    }
    case RopeScalingType::kYarn:
      f[kYarn] = true;
      f[kYarnNoTruncate] = f[kYarnNoTruncate] || !sc.truncate;
      f[kYarnMscale] = f[kYarnMscale] || sc.mscale != 0.0;
      break;
    case RopeScalingType::kLlama3: f[kLlama3] = true; break;
    case RopeScalingType::kLongRope:
      f[fr.uses_long_factor ? kLongLong : kLongShort] = true;
      break;
    case RopeScalingType::kProportional: {
      f[kProportional] = true;
      Index still = 0;
      for (const double w : fr.inv_freq) still += w == 0.0;
      f[kStillBlock] = f[kStillBlock] || (still >= 32 && fr.attention_factor == 1.0);
      break;
    }
    case RopeScalingType::kVllmNtk: f[kVllmNtk] = true; break;
  }
  f[kFreqFactors] = f[kFreqFactors] || !sc.freq_factors.empty();
  f[kAttentionFactor] = f[kAttentionFactor] || fr.attention_factor != 1.0;
  f[kFactorWidth] = f[kFactorWidth] || (ps.params.rotary_dim == 0 &&
                                        sc.type != RopeScalingType::kProportional &&
                                        ps.params.partial_rotary_factor < 1.0);
}

template <typename T>
void config_features(Features& f, const Config& c, const RopeFrequencies& freqs) {
  f[kCallPlan + static_cast<int>(c.call)] = true;
  for (const Region* r : {&c.src[0], c.src.size() > 1 ? &c.src[1] : &c.dst}) {
    if (r->buffer >= 0) f[kViewBshd + static_cast<int>(r->kind)] = true;
  }
  if (c.dst.buffer >= 0) {
    const Region& x = c.src[0];
    f[kOutRestrided] = c.dst.ss != x.ss || c.dst.hs != x.hs || c.dst.bs != x.bs;
  }
  f[kAliasOut] = c.alias_call;
  f[kEntryRank4] = c.inplace_entry == Entry::kRank4;
  f[kEntryParams] = c.inplace_entry == Entry::kParams;
  f[kEntryRank4Out] = c.out_rank4;
  f[kEntryRank4Qk] = c.qk_rank4;
  f[c.layout == RopeLayout::kInterleaved ? kInterleaved : kHalfSplit] = true;
  const Index pairs = c.rd / 2;
  f[kPartial] = c.rd < c.src[0].dim;
  f[kOffset] = c.offset > 0;
  f[pairs % 8 != 0 ? kPairsScalar : pairs % 16 != 0 ? kPairs8 : pairs % 32 != 0 ? kPairs16
                                                                                 : kPairs32] = true;
  f[kHeadDimOdd8] = c.src[0].dim % 8 != 0;
  if (c.src.size() == 2) {
    f[kQkHeads] = c.src[0].heads != c.src[1].heads;
    f[kQkDims] = c.src[0].dim != c.src[1].dim;
  }
  f[kBatch3] = c.batch == 3;
  f[kRerotateHelper] = c.helper != 0;
  f[kContiguous + static_cast<int>(c.pos.kind)] = true;
  f[kPosOffset] = c.pos.offset != 0;
  f[kSeq0] = c.seq == 0;
  f[kSeq1] = c.seq == 1;
  double max_w = 0.0;
  for (const double w : freqs.inv_freq) max_w = std::max(max_w, w);
  for (Index b = 0; b < c.batch; ++b) {
    for (Index s = 0; s < c.seq; ++s) {
      const Pos p = c.pos.value(b, s, c.seq) + (is_cached(c.call) ? c.cache_first : 0);
      f[kPos24] = f[kPos24] || p >= (Pos{1} << 24);
      f[kPos40] = f[kPos40] || p >= (Pos{1} << 39);
      f[kPosMax] = f[kPosMax] || p == kMaxPos;
      f[kPastFastTrig] = f[kPastFastTrig] || static_cast<double>(p) * max_w > 0x1p30;
    }
  }
  f[kForward + static_cast<int>(c.direction)] = true;
  if (is_cached(c.call)) {
    f[kCacheFloat + static_cast<int>(c.cache_type)] = true;
    f[kCacheFirst] = c.cache_first > 0;
    f[kCacheFirstHuge] = c.cache_first >= (Pos{1} << 24);
  }
  // The first token's rows of a float view that rope_rows_phase may take (AVX-512 builds).
  if constexpr (std::is_same_v<T, float>) {
    for (const Region& r : c.src) {
      const bool shape = r.hs == r.dim && r.dim == c.rd && c.offset == 0 && c.rd % 16 == 0 &&
                         c.rd <= 128 && r.base % 16 != 0;
      const bool phase = c.layout == RopeLayout::kInterleaved ? r.base % 2 == 0 : c.rd % 32 == 0;
      f[kPhaseRows] = f[kPhaseRows] || (shape && phase && r.seq > 0);
    }
  }
  f[kTiny] = c.tiny;
  f[kWideRotary] = c.rd > 256;
  f[kRotary1024] = c.rd == posenc::kMaxRotaryDim;
  for (const Region& r : c.src) f[kWideHead] = f[kWideHead] || r.dim > posenc::kMaxRotaryDim;
  f[c.threads == 2 ? kThreads2 : kThreads34] = c.threads > 0;
  // rope_run_tokens' RopeSource: rotated bytes of the call (out of place counted twice).
  double bytes = 0.0;
  for (const Region& r : c.src) {
    const double copies = c.call == Call::kPlan || c.call == Call::kCached ? 2.0 : 1.0;
    bytes += copies * static_cast<double>(r.batch * r.seq * r.heads * c.rd * sizeof(T));
  }
  f[kFromL3] = bytes > 512.0 * 1024.0;
}

// ---- running one scenario ----------------------------------------------------------------------

template <typename T>
double tiny_scale() {
  if constexpr (std::is_same_v<T, Eigen::bfloat16>) return 0x1p-128;  // float / bf16 subnormals
  if constexpr (std::is_same_v<T, Eigen::half>) return 0x1p-17;      // half subnormals
  return 1.0;
}

/// A few NaN, +Inf and -Inf in each source view: mostly in the rotated slice, most of them on
/// a token at position 0 (still pairs when the attention factor is 1), some with the pair's
/// partner non-finite too (Inf - Inf).
template <typename T>
void plant_nonfinite(const Config& c, Memory<T>& m) {
  SplitMix64 rng(c.seed ^ 0x6A09E667F3BCC908ULL);
  const double kInf = std::numeric_limits<double>::infinity();
  const auto value = [&] {
    return posenc::detail::from_value<T>(
        pick(rng, {std::numeric_limits<double>::quiet_NaN(), kInf, -kInf}));
  };
  std::vector<std::pair<Index, Index>> at_zero;  // tokens at position 0
  for (Index b = 0; b < c.batch; ++b) {
    for (Index s = 0; s < c.seq; ++s) {
      if (c.pos.value(b, s, c.seq) == 0) at_zero.emplace_back(b, s);
    }
  }
  const Index offset = c.cache_offset_arg > 0 ? c.cache_offset_arg : c.offset, half = c.rd / 2;
  for (const Region& r : c.src) {
    if (r.batch * r.seq * r.heads == 0) continue;
    for (Index n = irange(rng, 1, 5); n > 0; --n) {
      Index b = irange(rng, 0, r.batch - 1), s = irange(rng, 0, r.seq - 1);
      if (!at_zero.empty() && coin(rng, 0.7)) {
        std::tie(b, s) = at_zero[at(irange(rng, 0, static_cast<Index>(at_zero.size()) - 1))];
      }
      T* row = m.ptr(r) + r.row(b, s, irange(rng, 0, r.heads - 1));
      if (!coin(rng, 0.8) || offset + c.rd > r.dim) {
        row[irange(rng, 0, r.dim - 1)] = value();
        continue;
      }
      const Index i = irange(rng, 0, c.rd - 1);
      row[offset + i] = value();
      if (coin(rng, 0.3)) {
        const Index partner = c.layout == RopeLayout::kInterleaved ? i ^ 1 : (i + half) % c.rd;
        row[offset + partner] = value();
      }
    }
  }
}

/// Every buffer full of sentinels, then the source views' elements drawn in [-1, 1).
template <typename T>
Memory<T> make_memory(const Config& c) {
  SplitMix64 rng(c.seed ^ 0xA5A5A5A5A5A5A5A5ULL);
  Memory<T> m;
  for (const Index n : c.buffer_sizes) {
    LineVector<T> v(at(n));
    for (T& e : v) e = sentinel<T>(rng);
    m.buffers.push_back(std::move(v));
  }
  const double scale = c.tiny ? tiny_scale<T>() : 1.0;
  for (const Region& r : c.src) {
    T* data = m.ptr(r);
    for (Index b = 0; b < r.batch; ++b) {
      for (Index s = 0; s < r.seq; ++s) {
        for (Index h = 0; h < r.heads; ++h) {
          for (Index i = 0; i < r.dim; ++i) {
            data[r.row(b, s, h) + i] = posenc::detail::from_value<T>(scale * rng.uniform());
          }
        }
      }
    }
  }
  if (c.nonfinite) plant_nonfinite(c, m);
  return m;
}

/// rope_run_tokens (rope.hpp) walks a call's tokens seq-major when its first destination view
/// keeps a batch's rows apart within a token (SBHD: seq_stride > batch_stride), batch-major
/// otherwise; on the fly, a position one past the previous token's is reached by the
/// angle-addition recurrence, any other is an exact anchor. So two calls whose destinations are
/// walked in different orders turn some tokens by cos / sin that differ in rounding (a double
/// value by up to ~10 ulps, a 16-bit one by 1), as two threads' chunk boundaries do
/// (test_rope_threads.cpp). Both are checked against the oracle; bit for bit only in the same
/// order, or from a cache, where every token reads its row.
bool seq_major(const Region& r) { return r.batch > 1 && r.ss > r.bs; }

struct Outcome {
  Report report;
  Features features{};
  Throws throws = Throws::kNothing;
  int cross_order_pairs = 0, cross_order_differ = 0;  // bit-for-bit pairs left to the oracle
  int thread_fly_calls = 0, thread_fly_differ = 0;  // on the fly, threads vs one: bits differ
};

/// A device for RopeApplyOptions::set_device (any type with Eigen's numThreads() and
/// parallelFor(n, TensorOpCost, f)) that runs an Eigen::ThreadPoolDevice's parallelFor and
/// counts the chunks it hands to rope.hpp.
struct RecordingDevice {
  explicit RecordingDevice(const Eigen::ThreadPoolDevice* d) : device(d) {}
  int numThreads() const { return device->numThreads(); }
  template <typename F>
  void parallelFor(Index n, const Eigen::TensorOpCost& cost, F f) const {
    device->parallelFor(n, cost, [this, &f](Index first, Index last) {
      chunks.fetch_add(1, std::memory_order_relaxed);
      f(first, last);
    });
  }
  const Eigen::ThreadPoolDevice* device;
  mutable std::atomic<int> chunks{0};
};

/// device: an Eigen::ThreadPoolDevice of c.threads threads when c.threads > 0.
template <typename T>
Outcome run_config(const Config& c, const Eigen::ThreadPoolDevice* device) {
  Outcome o;
  Report& r = o.report;
  const Memory<T> before = make_memory<T>(c);
  const bool cached = is_cached(c.call), rerotate = c.call == Call::kRerotate;
  constexpr bool kDoubleCompute = std::is_same_v<T, double>;

  // Plans, checked against the reference planner.
  RopeFrequencies freqs, to;
  if (c.helper == 0) {
    freqs = posenc::compute_rope_frequencies(c.plan.params, c.plan.seq_len);
    check_plan(c.plan, freqs, r);
    plan_features(o.features, c.plan, freqs);
    if (rerotate) {
      to = posenc::compute_rope_frequencies(c.plan_to.params, c.plan_to.seq_len);
      check_plan(c.plan_to, to, r);
      plan_features(o.features, c.plan_to, to);
    }
  } else {
    const auto change = c.helper == 1 ? posenc_test::dynamic_plan_change(
                                            c.rd, c.helper_l0, c.helper_factor, c.helper_seq)
                                      : posenc_test::longrope_plan_change(c.rd, c.helper_l0,
                                                                          c.helper_seq);
    freqs = change.from;
    to = change.to;
    o.features[kAttentionFactor] = to.attention_factor != 1.0;
  }
  REQUIRE(freqs.rotary_dim == c.rd);
  REQUIRE(freqs.rotary_offset == c.offset);
  config_features<T>(o.features, c, freqs);

  // The cache, and its rows checked against long double.
  Cache cache;
  std::optional<posenc::CosSinCacheView> cache_view_opt;
  if (cached) {
    const Index rows = c.cache_rows, rd = c.rd;
    switch (c.cache_type) {
      case CacheType::kFloat:
        cache.f = filled_cache<float>(freqs, rows, c.cache_first, cache.values);
        cache_view_opt = cache_view(cache.f, rows, rd, c.cache_mutable_view);
        break;
      case CacheType::kDouble:
        cache.d = filled_cache<double>(freqs, rows, c.cache_first, cache.values);
        cache_view_opt = cache_view(cache.d, rows, rd, c.cache_mutable_view);
        break;
      case CacheType::kHalf:
        cache.h = filled_cache<Eigen::half>(freqs, rows, c.cache_first, cache.values);
        cache_view_opt = cache_view(cache.h, rows, rd, c.cache_mutable_view);
        break;
      case CacheType::kBFloat16:
        cache.b = filled_cache<Eigen::bfloat16>(freqs, rows, c.cache_first, cache.values);
        cache_view_opt = cache_view(cache.b, rows, rd, c.cache_mutable_view);
        break;
    }
  }

  const posenc::RopePositions rp = c.pos.make(c.batch, c.seq);
  const posenc::PositionIdsView ids(c.pos.ids.data(), c.batch, c.seq);
  posenc::RopeApplyOptions opts;
  opts.direction = c.direction;
  const posenc::RopeApplyOptions serial = opts;  // the single-threaded twin of a threaded call
  RecordingDevice recorder(device);
  if (c.threads > 0) {
    REQUIRE(device != nullptr);
    REQUIRE(device->numThreads() == c.threads);
    if (c.recorded) {
      opts.set_device(recorder);
    } else {
      opts.set_device(*device);
    }
  }
  const posenc::RopeApplyOptions* use = &opts;  // what the calls below take
  const RopeLayout layout = c.layout;
  const Index arg = c.cache_offset_arg;
  const Region& x = c.src[0];
  const auto view = [](Memory<T>& m, const Region& reg) { return heads_of<T>(m.ptr(reg), reg); };
  const auto cview = [](Memory<T>& m, const Region& reg) {
    return const_heads_of<T>(m.ptr(reg), reg);
  };

  const auto single_inplace = [&](Memory<T>& m) {
    if (cached) {
      posenc::apply_rope_inplace_cached<T>(view(m, x), rp, *cache_view_opt, layout, arg, *use);
    } else if (rerotate) {
      posenc::rerotate_rope_inplace<T>(view(m, x), rp, freqs, to, layout, *use);
    } else if (c.inplace_entry == Entry::kRank4) {
      posenc::apply_rope_inplace<T>(tensor4<T>(m.ptr(x), x), ids, freqs, layout,
                                    head_layout(x.kind));
    } else if (c.inplace_entry == Entry::kParams) {
      posenc::apply_rope_inplace<T>(tensor4<T>(m.ptr(x), x), ids, c.plan.params,
                                    head_layout(x.kind));
    } else {
      posenc::apply_rope_inplace<T>(view(m, x), rp, freqs, layout, *use);
    }
  };
  const auto single_out = [&](Memory<T>& m, const Region& out) {
    if (cached) {
      posenc::apply_rope_cached<T>(cview(m, x), view(m, out), rp, *cache_view_opt, layout, arg,
                                   *use);
    } else if (c.out_rank4) {
      posenc::apply_rope<T>(const_tensor4<T>(m.ptr(x), x), ids, freqs, layout,
                            tensor4<T>(m.ptr(out), out), head_layout(x.kind));
    } else {
      posenc::apply_rope<T>(cview(m, x), view(m, out), rp, freqs, layout, *use);
    }
  };
  const auto qk_call = [&](Memory<T>& m) {
    const Region& q = c.src[0];
    const Region& k = c.src[1];
    if (cached) {
      posenc::apply_rope_qk_inplace_cached<T>(view(m, q), view(m, k), rp, *cache_view_opt,
                                              layout, arg, *use);
    } else if (c.qk_rank4) {
      posenc::apply_rope_qk_inplace<T>(tensor4<T>(m.ptr(q), q), tensor4<T>(m.ptr(k), k), ids,
                                       freqs, layout, head_layout(q.kind));
    } else {
      posenc::apply_rope_qk_inplace<T>(view(m, q), view(m, k), rp, freqs, layout, *use);
    }
  };

  // A broken contract: the documented exception, and not one element written anywhere.
  o.throws = expected_throw(c);
  if (o.throws != Throws::kNothing) {
    Memory<T> work = before;
    const auto call = [&] {
      if (is_qk(c.call)) {
        qk_call(work);
      } else if (c.fault_out_of_place) {
        single_out(work, c.dst);
      } else {
        single_inplace(work);
      }
    };
    if (o.throws == Throws::kOutOfRange) {
      CHECK_THROWS_AS(call(), std::out_of_range);
    } else {
      CHECK_THROWS_AS(call(), std::invalid_argument);
    }
    compare_memory(r, "memory after the throw", work, before);
    switch (c.fault) {
      case Fault::kNegative: o.features[kThrowNegative] = true; break;
      case Fault::kPastMax: o.features[kThrowPastMax] = true; break;
      case Fault::kSliceTooWide: o.features[kThrowSlice] = true; break;
      case Fault::kCacheShort: o.features[kThrowCacheShort] = true; break;
      case Fault::kWrongDirection: o.features[kThrowDirection] = true; break;
      case Fault::kNone: break;
    }
    return o;
  }

  const std::vector<PairTurn> turns = cached   ? cached_turns(c, cache.values)
                                      : rerotate ? rerotate_turns(c, freqs, to, kDoubleCompute)
                                                 : plan_turns(c, freqs, kDoubleCompute);
  if (cached) {
    switch (c.cache_type) {
      case CacheType::kFloat: check_cache_rows<float>(r, c, freqs, cache.values); break;
      case CacheType::kDouble: check_cache_rows<double>(r, c, freqs, cache.values); break;
      case CacheType::kHalf: check_cache_rows<Eigen::half>(r, c, freqs, cache.values); break;
      case CacheType::kBFloat16:
        check_cache_rows<Eigen::bfloat16>(r, c, freqs, cache.values);
        break;
    }
  }
  const Index offset = cached ? arg : freqs.rotary_offset;

  // A threaded call (got, from `call` with *use): the same call again gives the same bits
  // (results depend only on inputs, views and thread count); the single-threaded call gives
  // them too when cos / sin come from a cache, and is left to the oracle on the fly. Whether
  // Eigen splits it: predicted from its cost model, and seen by the recording device.
  const auto thread_checks = [&](const Memory<T>& got, const auto& call, double token_bytes) {
    if (c.threads == 0) return;
    const bool split = predicted_split(c.batch * c.seq, token_bytes, c.threads);
    Memory<T> again = before;
    recorder.chunks = 0;
    call(again);
    compare_memory(r, "the threaded call twice", again, got);
    if (c.recorded) {
      const int chunks = recorder.chunks.load();
      if ((chunks >= 2) != split) {
        std::ostringstream os;
        os << "the device ran " << chunks << " chunks; Eigen's cost model "
           << (split ? "splits" : "does not split") << " " << c.batch * c.seq << " tokens of "
           << token_bytes << " bytes";
        r.fail(os.str());
      }
      o.features[kThreadRecorded] = o.features[kThreadRecorded] || chunks >= 2;
    }
    Memory<T> one_thread = before;
    use = &serial;
    call(one_thread);
    use = &opts;
    if (cached) {
      compare_memory(r, "threaded vs one thread, from a cache", got, one_thread, c.nonfinite);
    } else {
      Report differ;
      compare_memory(differ, "", got, one_thread);
      ++o.thread_fly_calls;
      o.thread_fly_differ += differ.bad > 0;
    }
    o.features[kThreadUnsplit] = o.features[kThreadUnsplit] || !split;
    o.features[cached ? kThreadSplitCached : kThreadSplitFly] =
        o.features[cached ? kThreadSplitCached : kThreadSplitFly] || split;
  };
  const auto token_bytes = [&](const Region& reg) {
    return 2.0 * static_cast<double>(reg.heads * c.rd * static_cast<Index>(sizeof(T)));
  };

  if (is_qk(c.call)) {
    Memory<T> one = before, two = before;
    qk_call(one);
    thread_checks(one, qk_call, token_bytes(c.src[0]) + token_bytes(c.src[1]));
    // The same rotation as two single-tensor calls, bit for bit.
    for (const Region& t : c.src) {
      if (cached) {
        posenc::apply_rope_inplace_cached<T>(view(two, t), rp, *cache_view_opt, layout, arg,
                                             opts);
      } else {
        posenc::apply_rope_inplace<T>(view(two, t), rp, freqs, layout, opts);
      }
    }
    Coverage cov = no_coverage(one);
    for (const Region& t : c.src) {
      check_rotated(r, "q+k", one, t, before, t, turns, c, offset, cov);
    }
    check_untouched(r, "q+k", one, before, cov);
    // (On threads the q+k call and the single calls are split at other tokens.)
    if (cached || (seq_major(c.src[0]) == seq_major(c.src[1]) && c.threads == 0)) {
      compare_memory(r, "one q+k call vs two single calls", one, two, c.nonfinite);
    } else {
      Report differ;
      compare_memory(differ, "", one, two);
      ++o.cross_order_pairs;
      o.cross_order_differ += differ.bad > 0;
    }
  } else if (rerotate) {
    Memory<T> one = before;
    single_inplace(one);
    thread_checks(one, single_inplace, token_bytes(x));
    Coverage cov = no_coverage(one);
    check_rotated(r, "rerotate", one, x, before, x, turns, c, offset, cov);
    check_untouched(r, "rerotate", one, before, cov);
  } else {
    Memory<T> in = before, out = before;
    single_inplace(in);
    single_out(out, c.dst);
    thread_checks(in, single_inplace, token_bytes(x));
    Coverage cov_in = no_coverage(in), cov_out = no_coverage(out);
    check_rotated(r, "in place", in, x, before, x, turns, c, offset, cov_in);
    check_untouched(r, "in place", in, before, cov_in);
    check_rotated(r, "out of place", out, c.dst, before, x, turns, c, offset, cov_out);
    check_untouched(r, "out of place (source and gaps)", out, before, cov_out);
    if (cached || seq_major(x) == seq_major(c.dst)) {
      compare_views(r, "in place vs out of place", in, x, out, c.dst, c.nonfinite);
    } else {
      Report differ;
      compare_views(differ, "", in, x, out, c.dst);
      ++o.cross_order_pairs;
      o.cross_order_differ += differ.bad > 0;
    }
    if (c.alias_call) {
      Memory<T> alias = before;
      if (cached) {
        posenc::apply_rope_cached<T>(cview(alias, x), view(alias, x), rp, *cache_view_opt,
                                     layout, arg, opts);
      } else {
        posenc::apply_rope<T>(cview(alias, x), view(alias, x), rp, freqs, layout, opts);
      }
      compare_memory(r, "apply_rope(x, out = x) vs in place", alias, in, c.nonfinite);
    }
  }
  if (c.nonfinite) {
    o.features[kNonFinite] = true;
    o.features[kNonFiniteStill] = r.nonfinite_still > 0;
    o.features[kNonFiniteTurned] = r.nonfinite_turned > 0;
    o.features[kInfToNan] = r.inf_to_nan > 0;
  }
  return o;
}

template <typename T>
constexpr std::uint64_t type_salt() {
  if constexpr (std::is_same_v<T, float>) return 0xF10A7000ULL;
  if constexpr (std::is_same_v<T, double>) return 0xD0B1E000ULL;
  if constexpr (std::is_same_v<T, Eigen::half>) return 0x4A1F0000ULL;
  return 0xBF160000ULL;
}
template <typename T>
const char* type_name() {
  if constexpr (std::is_same_v<T, float>) return "float";
  if constexpr (std::is_same_v<T, double>) return "double";
  if constexpr (std::is_same_v<T, Eigen::half>) return "half";
  return "bfloat16";
}

}  // namespace

TEMPLATE_TEST_CASE("rope combinations: random views, plans, positions, caches and calls match a "
                   "long-double brute force, bit for bit across equivalent calls",
                   "[rope][combinations]", float, double, Eigen::half, Eigen::bfloat16) {
  using T = TestType;
  constexpr int kConfigs = POSENC_SWEEP_CONFIGS;
  // Pools of 2, 3 and 4 threads (on a 2-core machine too: uneven splits, threads waiting).
  Eigen::ThreadPool pool2(2), pool3(3), pool4(4);
  const Eigen::ThreadPoolDevice device2(&pool2, 2), device3(&pool3, 3), device4(&pool4, 4);
  std::array<int, kFeatureCount> seen{};
  std::size_t checked = 0, throws = 0;
  int cross_order_pairs = 0, cross_order_differ = 0, thread_fly_calls = 0, thread_fly_differ = 0;
  for (int index = 0; index < kConfigs; ++index) {
    Config c = draw_config(index, type_salt<T>() ^ POSENC_SWEEP_SALT, sizeof(T));
    c.type = type_name<T>();
    const std::string config = describe(c);
    CAPTURE(config);
    const Eigen::ThreadPoolDevice* device = c.threads == 2   ? &device2
                                            : c.threads == 3 ? &device3
                                            : c.threads == 4 ? &device4
                                                             : nullptr;
    const Outcome o = run_config<T>(c, device);
    INFO(o.report.detail);
    CHECK(o.report.bad == 0);
    checked += o.report.checked;
    throws += o.throws != Throws::kNothing;
    cross_order_pairs += o.cross_order_pairs;
    cross_order_differ += o.cross_order_differ;
    thread_fly_calls += o.thread_fly_calls;
    thread_fly_differ += o.thread_fly_differ;
    for (int f = 0; f < kFeatureCount; ++f) seen[at(f)] += o.features[at(f)];
  }
  // The sweep must keep reaching every option (a change to the draws that drops one fails
  // here); the float-only and 16-bit-only ones where they apply.
  for (int f = 0; f < kFeatureCount; ++f) {
    if (f == kPhaseRows && !std::is_same_v<T, float>) continue;
    if (f == kTiny && sizeof(T) != 2) continue;
    CAPTURE(kFeatureNames[at(f)], seen[at(f)]);
    CHECK(seen[at(f)] >= 3);
  }
  // Pairs walked in different orders (seq_major above) are left to the oracle: how many.
  CAPTURE(cross_order_pairs, cross_order_differ);
  // On the fly, threaded calls whose bits differ from one thread's (allowed, counted).
  CAPTURE(thread_fly_calls, thread_fly_differ);
  CHECK(throws >= 30);
  CHECK(checked > 1000000);
}

TEST_CASE("rope combinations: rotary_dim past kMaxRotaryDim is rejected with the documented "
          "message, before any write",
          "[rope][combinations]") {
  // rope_params.hpp: kMaxRotaryDim = 1024 (stack buffers of rotary_dim / 2 entries); the
  // sweep above runs up to it. One pair more: the planner, a hand-made plan and a cache.
  const Index over = posenc::kMaxRotaryDim + 2;
  posenc::RopeParams params;
  params.head_dim = over;
  CHECK_THROWS_WITH(posenc::compute_rope_frequencies(params),
                    Catch::Contains("rotary_dim = 1026 must be <= 1024"));
  RopeFrequencies freqs;
  freqs.inv_freq = std::vector<double>(at(over / 2), 0.5);
  freqs.rotary_dim = over;
  freqs.head_dim = over;
  LineVector<float> x(at(3 * over), 0.25f);
  const LineVector<float> x0 = x;
  const auto heads = posenc::rope_heads_strided<float>(x.data(), 3, 1, over, over, over);
  const auto positions = posenc::RopePositions::contiguous(1, 3, 1);
  CHECK_THROWS_WITH(posenc::apply_rope_inplace<float>(heads, positions, freqs,
                                                      RopeLayout::kHalfSplit),
                    Catch::Contains("rotary_dim = 1026 must be even and in [2, 1024]"));
  const LineVector<float> cache(at(4 * over), 0.5f);
  CHECK_THROWS_WITH(posenc::apply_rope_inplace_cached<float>(
                        heads, positions, ConstTensorView<float, 2>(cache.data(), 4, over),
                        RopeLayout::kInterleaved),
                    Catch::Contains("cos_sin_cache width (rotary_dim) = 1026 must be even and "
                                    "in [2, 1024]"));
  CHECK(std::memcmp(x.data(), x0.data(), x.size() * sizeof(float)) == 0);
}

namespace {

// ---- calls from DRAM -------------------------------------------------------------------------

/// One call whose rotated rows (read and write, out of place counted twice: rope_run_tokens)
/// take >= 16 MiB: RopeSource::kMemory, whose kernels prefetch each row 4 KiB ahead.
struct LargeSpec {
  ViewKind kind, out_kind;  // out_kind: the destination of an out-of-place call
  Index batch, seq, heads, heads_k, dim, rd, offset, lead;  // heads_k > 0: a q+k call
  RopeLayout layout;
  RopeDirection direction;
  bool cached, out_of_place;
  CacheType cache_type;
  int threads;
};

template <typename C>
posenc::CosSinCacheView large_cache(const RopeFrequencies& freqs, Index rows, Cache& cache,
                                    LineVector<C>& store) {
  store = filled_cache<C>(freqs, rows, 0, cache.values);
  return cache_view(store, rows, freqs.rotary_dim, false);
}

template <typename T>
void run_large(const LargeSpec& sp, const Eigen::ThreadPoolDevice* device) {
  const bool qk = sp.heads_k > 0;
  Config c;
  c.index = -1;
  c.seed = 0x1A26E000ULL + static_cast<std::uint64_t>(sp.seq * 131 + sp.heads * 7 + sp.rd);
  c.type = type_name<T>();
  c.call = sp.cached ? (qk ? Call::kCachedQk : Call::kCached) : (qk ? Call::kPlanQk : Call::kPlan);
  c.layout = sp.layout;
  c.direction = sp.direction;
  c.batch = sp.batch;
  c.seq = sp.seq;
  c.rd = sp.rd;
  c.offset = sp.offset;
  c.cache_offset_arg = sp.cached ? sp.offset : 0;
  c.threads = sp.threads;
  SplitMix64 rng(c.seed);
  c.src.push_back(own_view(rng, c.buffer_sizes, sp.kind, sp.batch, sp.seq, sp.heads, sp.dim,
                           sp.lead));
  if (qk) {
    c.src.push_back(own_view(rng, c.buffer_sizes, sp.kind, sp.batch, sp.seq, sp.heads_k, sp.dim,
                             sp.lead));
  }
  if (sp.out_of_place) {
    c.dst = own_view(rng, c.buffer_sizes, sp.out_kind, sp.batch, sp.seq, sp.heads, sp.dim,
                     sp.lead);
  }
  // Positions: rows of a 4096-row cache at random, or runs from per-sequence starts.
  constexpr Index kRows = 4096;
  if (sp.cached) {
    c.pos.kind = PosKind::kIds;
    for (Index i = 0; i < sp.batch * sp.seq; ++i) c.pos.ids.push_back(irange(rng, 1, kRows - 1));
  } else {
    c.pos.kind = PosKind::kContiguousFrom;
    for (Index b = 0; b < sp.batch; ++b) c.pos.starts.push_back(irange(rng, 1, 200000));
  }
  c.cache_rows = kRows;
  const std::string config = describe(c);
  CAPTURE(config);

  double call_bytes = 0.0;
  for (const Region& t : c.src) {
    call_bytes += (sp.out_of_place ? 2.0 : 1.0) *
                  static_cast<double>(t.batch * t.seq * t.heads * sp.rd * sizeof(T));
  }
  REQUIRE(call_bytes >= static_cast<double>(posenc::detail::kFromMemoryBytes));

  posenc::RopeParams params;
  params.head_dim = sp.dim;
  params.rotary_dim = sp.rd;
  params.rotary_offset = sp.offset;
  params.theta = 500000.0;
  params.layout = sp.layout;
  const RopeFrequencies freqs = posenc::compute_rope_frequencies(params);
  Cache cache;
  std::optional<posenc::CosSinCacheView> cv;
  if (sp.cached) {
    switch (sp.cache_type) {
      case CacheType::kFloat: cv = large_cache(freqs, kRows, cache, cache.f); break;
      case CacheType::kDouble: cv = large_cache(freqs, kRows, cache, cache.d); break;
      case CacheType::kHalf: cv = large_cache(freqs, kRows, cache, cache.h); break;
      case CacheType::kBFloat16: cv = large_cache(freqs, kRows, cache, cache.b); break;
    }
  }

  const Memory<T> before = make_memory<T>(c);
  const posenc::RopePositions rp = c.pos.make(c.batch, c.seq);
  posenc::RopeApplyOptions opts;
  opts.direction = sp.direction;
  const posenc::RopeApplyOptions serial = opts;
  if (device != nullptr) opts.set_device(*device);
  const Region& x = c.src[0];
  const auto call = [&](Memory<T>& m, const posenc::RopeApplyOptions& o) {
    const auto view = [&](const Region& reg) { return heads_of<T>(m.ptr(reg), reg); };
    const auto cview = [&](const Region& reg) { return const_heads_of<T>(m.ptr(reg), reg); };
    if (qk && sp.cached) {
      posenc::apply_rope_qk_inplace_cached<T>(view(x), view(c.src[1]), rp, *cv, sp.layout,
                                              sp.offset, o);
    } else if (qk) {
      posenc::apply_rope_qk_inplace<T>(view(x), view(c.src[1]), rp, freqs, sp.layout, o);
    } else if (sp.out_of_place && sp.cached) {
      posenc::apply_rope_cached<T>(cview(x), view(c.dst), rp, *cv, sp.layout, sp.offset, o);
    } else if (sp.out_of_place) {
      posenc::apply_rope<T>(cview(x), view(c.dst), rp, freqs, sp.layout, o);
    } else if (sp.cached) {
      posenc::apply_rope_inplace_cached<T>(view(x), rp, *cv, sp.layout, sp.offset, o);
    } else {
      posenc::apply_rope_inplace<T>(view(x), rp, freqs, sp.layout, o);
    }
  };
  Memory<T> got = before;
  call(got, opts);

  // Every element but the rotated dims as before (out of place: the pass-through dims copied
  // from the source), and every rotated row changed (positions >= 1: no still pairs).
  Report r;
  Memory<T> expect = before;
  std::vector<std::pair<const Region*, const Region*>> targets;  // (source, destination)
  if (sp.out_of_place) {
    targets.emplace_back(&x, &c.dst);
  } else {
    for (const Region& t : c.src) targets.emplace_back(&t, &t);
  }
  const Index half = sp.rd / 2;
  const bool interleaved = sp.layout == RopeLayout::kInterleaved;
  for (const auto& [in, out] : targets) {
    for (Index b = 0; b < sp.batch; ++b) {
      for (Index s = 0; s < sp.seq; ++s) {
        for (Index h = 0; h < in->heads; ++h) {
          const T* src = before.ptr(*in) + in->row(b, s, h);
          const T* y = got.ptr(*out) + out->row(b, s, h);
          T* e = expect.ptr(*out) + out->row(b, s, h);
          std::copy(src, src + sp.dim, e);
          std::copy(y + sp.offset, y + sp.offset + sp.rd, e + sp.offset);
          bool changed = false;
          for (Index i = sp.offset; i < sp.offset + sp.rd && !changed; ++i) {
            changed = bits(y[i]) != bits(src[i]);
          }
          if (!changed) {
            std::ostringstream os;
            os << "row [" << b << "," << s << "," << h << "] of " << describe(*out)
               << " was not rotated";
            r.fail(os.str());
          }
        }
      }
    }
  }
  compare_memory(r, "outside the rotated dims", got, expect);

  // The oracle on sampled tokens (the first and last two, and 160 more), every head.
  std::vector<Index> tokens = {0, 1, sp.batch * sp.seq - 2, sp.batch * sp.seq - 1};
  for (int i = 0; i < 160; ++i) tokens.push_back(irange(rng, 0, sp.batch * sp.seq - 1));
  constexpr bool kDoubleCompute = std::is_same_v<T, double>;
  for (const Index u : tokens) {
    const Index b = u / sp.seq, s = u % sp.seq;
    const Pos p = c.pos.value(b, s, sp.seq);
    std::vector<PairTurn> turn(at(half));
    for (Index j = 0; j < half; ++j) {
      if (sp.cached) {
        const long double cs = cache.values[at(p * sp.rd + j)];
        const long double sn = cache.values[at(p * sp.rd + half + j)];
        const long double n = sp.direction == RopeDirection::kInverse ? cs * cs + sn * sn : 1.0L;
        const long double sign = sp.direction == RopeDirection::kForward ? 1.0L : -1.0L;
        turn[at(j)] = {cs / n, sign * sn / n, 0.0L, 0.0L};
        turn[at(j)].mult = std::max(std::fabs(turn[at(j)].c), std::fabs(turn[at(j)].s));
      } else {
        const long double angle =
            static_cast<long double>(p) * static_cast<long double>(freqs.inv_freq[at(j)]);
        turn[at(j)] =
            directed(std::cos(angle), std::sin(angle), freqs.attention_factor, sp.direction);
        turn[at(j)].angle_err = angle_error(angle, kDoubleCompute);
      }
    }
    for (const auto& [in, out] : targets) {
      for (Index h = 0; h < in->heads; ++h) {
        const T* src = before.ptr(*in) + in->row(b, s, h) + sp.offset;
        const T* y = got.ptr(*out) + out->row(b, s, h) + sp.offset;
        for (Index j = 0; j < half; ++j) {
          const PairTurn& t = turn[at(j)];
          const Index i1 = interleaved ? 2 * j : j, i2 = interleaved ? 2 * j + 1 : half + j;
          const long double x1 = wide(src[i1]), x2 = wide(src[i2]);
          const long double scale = t.mult * (std::fabs(x1) + std::fabs(x2));
          const long double want[2] = {x1 * t.c - x2 * t.s, x2 * t.c + x1 * t.s};
          const Index dims[2] = {i1, i2};
          for (int e = 0; e < 2; ++e) {
            ++r.checked;
            const long double g = wide(y[dims[e]]);
            const double tol = tolerance<T>(want[e], scale, t.angle_err);
            if (!(std::fabs(g - want[e]) <= tol)) {
              std::ostringstream os;
              os << describe(*out) << " [" << b << "," << s << "," << h << "] rotated dim "
                 << dims[e] << " (position " << p << "): got " << static_cast<double>(g)
                 << ", want " << static_cast<double>(want[e]) << " (tol " << tol << ")";
              r.fail(os.str());
            }
          }
        }
      }
    }
  }
  // On threads from a cache: the bits of one thread.
  if (device != nullptr && sp.cached) {
    Memory<T> one = before;
    call(one, serial);
    compare_memory(r, "threaded vs one thread, from a cache", got, one);
  }
  INFO(r.detail);
  CHECK(r.bad == 0);
  CHECK(r.checked > 100000);
}

}  // namespace

// The paths past 16 MiB (requests ahead, kMemory rows) are the x86 SIMD kernels'; elsewhere
// these calls would rerun the scalar loops the sweep covers, at qemu speed in CI's AArch64 run.
#if defined(__x86_64__) || defined(_M_X64)
TEST_CASE("rope combinations: calls of 16 MiB and more (the DRAM path) match the long-double "
          "oracle on sampled tokens and leave everything else untouched",
          "[rope][combinations][large]") {
  Eigen::ThreadPool pool2(2), pool3(3);
  const Eigen::ThreadPoolDevice device2(&pool2, 2), device3(&pool3, 3);
  const auto kHalf = RopeLayout::kHalfSplit;
  const auto kInter = RopeLayout::kInterleaved;
  const auto kFwd = RopeDirection::kForward;
  const auto kInv = RopeDirection::kInverse;
  const auto kTr = RopeDirection::kTranspose;
  const auto bshd = ViewKind::kBshd;
  // kind, out kind, batch, seq, heads, k heads, dim, rd, offset, lead, layout, direction,
  // cached, out of place, cache type, threads.
  SECTION("float, bshd, in place from a float cache, rows on cache lines") {
    run_large<float>({bshd, bshd, 2, 520, 32, 0, 128, 128, 0, 0, kHalf, kFwd, true, false,
                      CacheType::kFloat, 0}, nullptr);
  }
  SECTION("float, bhsd to bshd out of place on the fly, a slice at 16, rows 16 bytes off") {
    run_large<float>({ViewKind::kBhsd, bshd, 1, 1400, 16, 0, 128, 96, 16, 4, kInter, kInv, false,
                      true, CacheType::kFloat, 0}, nullptr);
  }
  SECTION("float, 512-wide heads out of place on the fly, 2 threads") {
    run_large<float>({bshd, bshd, 1, 520, 8, 0, 512, 512, 0, 0, kHalf, kTr, false, true,
                      CacheType::kFloat, 2}, &device2);
  }
  SECTION("bfloat16, q+k (32 + 8 heads) in place on the fly") {
    run_large<Eigen::bfloat16>({bshd, bshd, 2, 850, 32, 8, 128, 128, 0, 0, kHalf, kFwd, false,
                                false, CacheType::kFloat, 0}, nullptr);
  }
  SECTION("bfloat16, rotary_dim 1024 in place from a bfloat16 cache, 3 threads") {
    run_large<Eigen::bfloat16>({bshd, bshd, 3, 700, 4, 0, 1024, 1024, 0, 0, kInter, kInv, true,
                                false, CacheType::kBFloat16, 3}, &device3);
  }
  SECTION("half, strided rows with gaps in place from a half cache") {
    run_large<Eigen::half>({ViewKind::kStrided, bshd, 1, 4200, 8, 0, 256, 256, 0, 3, kInter, kTr,
                            true, false, CacheType::kHalf, 0}, nullptr);
  }
}
#endif
