// libFuzzer differential target for the free attention functions: posenc::attention (with and
// without lse, with AttentionMetadata), attention_varlen (packed, VarlenMetadata),
// attention_paged (page pools + block tables, optional tree mask) and attention_paged_varlen.
//
// The fuzz bytes choose the STRUCTURE of a small problem (API, storage types, batch, q_len,
// k_len, GQA shape, head_dim / v_head_dim, mask, scale, ALiBi, soft cap, sinks, window, chunks,
// query temperature, T5 relative bias, positions, key padding, tree masks, threads, lse, page
// layout, non-finite injections, and sometimes ONE invalid parameter); tensor VALUES come from a
// splitmix64 stream seeded by four of the bytes.
//
// Oracle: an independent long-double implementation written from the semantics documented in
// posenc/attention_types.hpp (which keys a row sees, scale * temperature, c tanh(s / c), ALiBi,
// T5 bias, sinks as an extra denominator term, zero rows, lse), reading the inputs as the
// values actually stored in the chosen type. Each row gets an error bound derived from the
// accumulation type's unit roundoff and the magnitudes that enter each logit (worst-case dot
// product depth, ALiBi position magnitudes, soft cap, sink), propagated through the softmax
// (weights move by at most a factor exp(2 Delta)), plus the output type's rounding. The
// materialising posenc::reference::attention is compared as a second check (dense calls).
//
// Also checked: results do not depend on num_threads (bitwise), a reused workspace gives the
// same bits, padding keys (key_lengths, key_mask, paged slots past seq_len, unowned pages) never
// reach the output even when they hold NaN, a NaN / +inf logit makes exactly the rows that see
// it NaN, and the error contract: an invalid call throws std::invalid_argument and leaves out
// and lse bit-identical. Any mismatch prints the case and __builtin_trap()s.
//
// Run: scripts/fuzz.sh SECONDS attention (libFuzzer, ASan + UBSan). Without libFuzzer,
// -DPOSENC_FUZZ_MAIN builds a driver over random inputs (`./fuzz_attention RUNS [FIRST_SEED]`;
// a mismatch names its seed). FZA_VERBOSE=1 prints every decoded case and its worst
// error / bound ratio.
//
// Findings, each fixed with a regression test in tests/: attention_paged let a sequence with
// 0 < seq_len < q_len through bidirectional chunks / temperatures (negative slots read);
// the packed calls skipped every parameter check when no sequence had a query; the multi-head
// schedule's key tile followed num_threads (bits moved with the thread count); with sinks,
// keys seen only as -inf logits weighed ~1e-39, not 0; a decode query chunked ~2^53 past its
// keys overflowed a byte count (UBSan); a decode row whose window started past key_lengths
// read padding keys (the chunk narrowing turned the empty range inside out).

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <posenc/attention.hpp>
#include <posenc/attention_paged.hpp>
#include <posenc/attention_varlen.hpp>
#include <posenc/reference/attention.hpp>
#include <posenc/relative_bias.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace fza {

using ld = long double;
using posenc::AttentionMetadata;
using posenc::AttentionParams;
using posenc::ConstTensorView;
using posenc::MaskMode;
using posenc::TensorView;
using I64 = std::int64_t;

constexpr I64 kP53 = I64{1} << 53;
constexpr ld kInf = std::numeric_limits<ld>::infinity();

bool verbose() {
  static const bool v = std::getenv("FZA_VERBOSE") != nullptr;
  return v;
}

// ---- input decoding ----------------------------------------------------------------------------

struct Reader {
  const std::uint8_t* p;
  std::size_t n, i = 0;
  std::uint8_t u8() { return i < n ? p[i++] : 0; }
  unsigned pick(unsigned m) { return m <= 1 ? 0 : u8() % m; }
  bool bit() { return u8() & 1; }
  /// True with probability 1/m; false once the bytes run out (short inputs = plain problems).
  bool on(unsigned m) { return m <= 1 || pick(m) == m - 1; }
};

struct Rng {
  std::uint64_t s;
  std::uint64_t next() {
    std::uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double uni() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  double uni(double lo, double hi) { return lo + (hi - lo) * uni(); }
  I64 range(I64 lo, I64 hi) {  // inclusive
    return lo + static_cast<I64>(next() % static_cast<std::uint64_t>(hi - lo + 1));
  }
};

enum class Api { kDense, kVarlen, kPaged, kPagedVarlen };
enum class Ty { kF32, kF64, kF16, kBF16 };
const char* ty_name(Ty t) {
  switch (t) {
    case Ty::kF32:
      return "float";
    case Ty::kF64:
      return "double";
    case Ty::kF16:
      return "half";
    case Ty::kBF16:
      return "bfloat16";
  }
  return "?";
}
const char* api_name(Api a) {
  switch (a) {
    case Api::kDense:
      return "attention";
    case Api::kVarlen:
      return "attention_varlen";
    case Api::kPaged:
      return "attention_paged";
    case Api::kPagedVarlen:
      return "attention_paged_varlen";
  }
  return "?";
}

enum Inv : int {
  kNoInv = 0,
  kSlopesCount,
  kSlopeNeg,
  kWindowNeg,
  kChunkNeg,
  kScaleBad,
  kSoftcapBad,
  kSinkCount,
  kSinkNaN,
  kThreads,
  kTempBad,
  kRelBiasHeads,
  kRelBiasSize,
  kMaskEnum,
  kGqa,
  kHeadDim,
  kOutDv,
  kLseShape,
  kTreeAboveDiag,
  kTreeDepth,
  kTreeBidir,
  kBidirNegPos,
  // dense
  kKeyLenRange,
  kKeyLenShape,
  kKeyMaskShape,
  kQposNeg,
  kKposNeg,
  kPosBig,
  kQposShape,
  kBatchMismatch,
  kZeroDim,
  // varlen
  kCuEnd,
  kCuStart,
  kCuDecrease,
  kCuCount,
  kVposLen,
  kTreesLen,
  kVarlenTreeShort,
  // paged
  kPageId,
  kSeqLenRange,
  kPagedTreeAlibi,
  kPageTableRows,
  kVPagesShape,
  kPagedTreeShort,
  // paged varlen
  kPvCuCount,
  kPvCuEnd,
  kInvCount
};

const char* inv_name(int v) {
  static const char* names[] = {"none",
                                "slopes_count",
                                "slope_neg",
                                "window_neg",
                                "chunk_neg",
                                "scale_bad",
                                "softcap_bad",
                                "sink_count",
                                "sink_nan",
                                "threads",
                                "temp_bad",
                                "relbias_heads",
                                "relbias_size",
                                "mask_enum",
                                "gqa",
                                "head_dim",
                                "out_dv",
                                "lse_shape",
                                "tree_above_diag",
                                "tree_depth",
                                "tree_bidir",
                                "bidir_negpos",
                                "keylen_range",
                                "keylen_shape",
                                "keymask_shape",
                                "qpos_neg",
                                "kpos_neg",
                                "pos_big",
                                "qpos_shape",
                                "batch_mismatch",
                                "zero_dim",
                                "cu_end",
                                "cu_start",
                                "cu_decrease",
                                "cu_count",
                                "vpos_len",
                                "trees_len",
                                "varlen_tree_short",
                                "page_id",
                                "seqlen_range",
                                "paged_tree_alibi",
                                "page_table_rows",
                                "vpages_shape",
                                "paged_tree_short",
                                "pv_cu_count",
                                "pv_cu_end"};
  return v >= 0 && v < kInvCount ? names[v] : "?";
}

/// A decoded problem, independent of the storage type.
struct Case {
  Api api = Api::kDense;
  Ty tq = Ty::kF32, tkv = Ty::kF32;
  int nseq = 1, kvh = 1, group = 1, heads = 1, d = 1, dv = 1;
  std::vector<I64> qlen, klen;  // per sequence (dense / paged: q_len shared)
  AttentionParams params;
  bool lse = false, warm = false;
  int threads = 1;
  // Metadata (dense: [batch][..]; varlen: per sequence slices of the packed arrays).
  bool has_qpos = false, has_kpos = false, has_klen = false, has_kmask = false, has_tree = false;
  std::vector<std::vector<I64>> qpos, kpos;  // only when given
  std::vector<I64> key_lengths;
  std::vector<std::vector<std::uint8_t>> kmask, tree;
  // Paged layout.
  int page_size = 1, extra_pages = 1, extra_cols = 0;
  int shared_pages = 0;  // sequences s >= 1 reuse this many full pages of sequence 0
  // Values.
  std::uint64_t seed = 0;
  double amp_q = 1, amp_k = 1, amp_v = 1;
  bool nan_padding = false;
  int inject = 0;       // 0 none, 1 K, 2 V, 3 Q element
  int inject_kind = 0;  // 0 NaN, 1 +inf, 2 -inf
  int inv = kNoInv;
  std::uint8_t inv_sub = 0;
  bool expect_throw = false;  // a shape the library must reject though no parameter is bad
};

int dim_of(Reader& r) {
  static const int dims[] = {1, 2, 3, 4, 8, 16, 17, 32, 64, 80, 128};
  return dims[r.pick(11)];
}
I64 qlen_of(Reader& r, bool allow_zero) {
  static const I64 t[] = {1, 1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 15, 16, 17, 24, 31, 32, 33, 40, 0};
  const I64 v = t[r.pick(20)];
  return v == 0 && !allow_zero ? 1 + r.pick(40) : v;
}
I64 klen_of(Reader& r, bool allow_zero) {
  static const I64 t[] = {1,  2,  3,  4,  5,  7,  8,  11, 15, 16, 17,
                          31, 32, 33, 47, 48, 63, 64, 65, 70, 0};
  const I64 v = t[r.pick(21)];
  return v == 0 && !allow_zero ? 1 + r.pick(70) : v;
}

/// Positions of one sequence (len entries, a = default start) by pattern.
std::vector<I64> positions(Reader& r, Rng& rng, I64 len, I64 deflt0) {
  std::vector<I64> p(static_cast<std::size_t>(len));
  const unsigned pat = r.pick(9);
  const I64 big = I64{1} << (30 + r.pick(24));  // 2^30 .. 2^53
  I64 base = static_cast<I64>(rng.range(0, 100));
  for (I64 i = 0; i < len; ++i) {
    I64& x = p[static_cast<std::size_t>(i)];
    switch (pat) {
      case 0:
        x = std::max<I64>(0, deflt0 + i);
        break;  // the default, explicit
      case 1:
        x = rng.range(0, 100);
        break;  // random small
      case 2:
        base += rng.range(0, 3);
        x = base;
        break;  // non-decreasing, repeats
      case 3:
        x = std::max<I64>(0, 200 - 2 * i - rng.range(0, 2));
        break;  // decreasing
      case 4:
        x = (I64{1} << 40) + deflt0 + i;
        break;  // large, consecutive
      case 5:
        x = kP53 - rng.range(0, 40);
        break;  // at the top of the range
      case 6:
        x = base;
        break;  // all equal
      case 7:
        x = rng.range(0, 1) ? big + rng.range(0, 5) : rng.range(0, 50);
        break;  // mixed
      default:
        x = std::max<I64>(0, deflt0 + i + rng.range(-2, 2));
        break;  // jittered default
    }
    x = std::clamp<I64>(x, 0, kP53);
  }
  return p;
}

/// Lower-triangular q x q tree mask rows (tree-structured, random, or chain).
std::vector<std::uint8_t> make_tree(Reader& r, Rng& rng, I64 q) {
  std::vector<std::uint8_t> m(static_cast<std::size_t>(q * q), 0);
  const unsigned kind = r.pick(4);
  std::vector<I64> parent(static_cast<std::size_t>(q), -1);
  for (I64 i = 0; i < q; ++i) {
    if (kind == 0 || kind == 3) {  // a proper tree: ancestors and itself
      parent[i] = i == 0 || rng.range(0, 3) == 0 ? -1 : rng.range(0, i - 1);
      if (kind == 3 && i > 0) parent[i] = i - 1;  // a chain
      for (I64 a = i; a >= 0; a = parent[a]) m[i * q + a] = 1;
    } else if (kind == 1) {  // any lower-triangular pattern
      for (I64 t = 0; t <= i; ++t)
        m[i * q + t] = static_cast<std::uint8_t>(rng.range(0, 2) ? 1 + rng.range(0, 254) : 0);
    } else {  // sparse, some rows see no draft at all
      for (I64 t = 0; t <= i; ++t) m[i * q + t] = rng.range(0, 4) == 0;
    }
  }
  return m;
}
I64 max_depth(const std::vector<std::uint8_t>& m, I64 q) {
  I64 best = 0;
  for (I64 i = 0; i < q; ++i) {
    I64 dd = 0;
    for (I64 t = 0; t <= i; ++t) dd += m[i * q + t] != 0;
    best = std::max(best, dd);
  }
  return best;
}

std::vector<double> relbias_table;  // [num_buckets][heads] of the current case (float values)

Case decode(Reader& r, Rng& rng) {
  Case c;
  static const Api apis[] = {Api::kDense, Api::kDense,  Api::kDense,      Api::kDense,
                             Api::kDense, Api::kVarlen, Api::kVarlen,     Api::kPaged,
                             Api::kPaged, Api::kPaged,  Api::kPagedVarlen};
  c.api = apis[r.pick(11)];
  c.tq = static_cast<Ty>(r.pick(4));
  c.tkv = c.tq;
  if (c.api == Api::kPaged || c.api == Api::kPagedVarlen) {
    const unsigned alt = r.pick(3);
    if (alt != 0) {
      if (c.tq == Ty::kF32)
        c.tkv = alt == 1 ? Ty::kF16 : Ty::kBF16;
      else
        c.tkv = Ty::kF32;
    }
  }
  c.kvh = 1 + static_cast<int>(r.pick(3));
  c.group = 1 + static_cast<int>(r.pick(4));
  c.heads = c.kvh * c.group;
  c.d = dim_of(r);
  c.dv = r.bit() ? dim_of(r) : c.d;
  c.nseq = 1 + static_cast<int>(r.pick(3));
  const bool paged = c.api == Api::kPaged || c.api == Api::kPagedVarlen;
  const bool packed_q = c.api == Api::kVarlen || c.api == Api::kPagedVarlen;
  const I64 ql0 = qlen_of(r, false), kl0 = klen_of(r, false);
  for (int s = 0; s < c.nseq; ++s) {
    c.qlen.push_back(packed_q && s > 0 ? qlen_of(r, true) : (packed_q && r.on(6) ? 0 : ql0));
    c.klen.push_back(c.api == Api::kDense ? kl0
                                          : (s == 0 ? (r.on(8) ? 0 : kl0) : klen_of(r, true)));
  }
  c.params.mask = r.bit() ? MaskMode::kBidirectional : MaskMode::kCausal;
  const bool causal = c.params.mask == MaskMode::kCausal;
  switch (r.pick(6)) {
    case 1:
      c.params.scale = rng.uni(0.05, 1.5);
      break;
    case 2:
      c.params.scale = rng.uni(200.0, 3000.0);
      break;  // logits around 1e3..1e4
    case 3:
      c.params.scale = 1e-3;
      break;
    case 4:
      c.params.scale = 1.0;
      break;
    default:
      break;
  }
  if (r.on(3)) {
    c.params.alibi_slopes.resize(static_cast<std::size_t>(c.heads));
    const unsigned kind = r.pick(3);
    for (auto& s : c.params.alibi_slopes) {
      s = kind == 0   ? rng.uni(0.0, 1.0)
          : kind == 1 ? std::exp2(-static_cast<double>(rng.range(0, 12)))
                      : 0.0;
    }
    if (kind == 2) c.params.alibi_slopes = posenc::alibi_slopes(c.heads);
  }
  if (r.on(4)) {
    static const double caps[] = {0.5, 1.0, 5.0, 30.0, 50.0, 1e-3};
    c.params.logit_softcap = caps[r.pick(6)];
  }
  if (r.on(4)) {
    c.params.sink_logits.resize(static_cast<std::size_t>(c.heads));
    const bool big = r.on(4);
    for (auto& s : c.params.sink_logits) s = big ? rng.uni(-40.0, 40.0) : rng.uni(-4.0, 4.0);
  }
  if (r.on(3)) {
    static const I64 w[] = {1, 2, 3, 4, 5, 8, 16, 17, 32, 33, 63, 64, I64{1} << 40, 0};
    c.params.sliding_window = w[r.pick(14)];
    if (c.params.sliding_window == 0) c.params.sliding_window = 1 + rng.range(0, 110);
  }
  if (r.on(4)) {
    static const I64 ch[] = {1, 2, 3, 4, 5, 7, 8, 16, 17, 32, 64, I64{1} << 50, 0};
    c.params.attention_chunk_size = ch[r.pick(13)];
    if (c.params.attention_chunk_size == 0) c.params.attention_chunk_size = 1 + rng.range(0, 80);
  }
  if (r.on(5)) {
    posenc::AttentionTemperature t;
    t.form = static_cast<posenc::TemperatureForm>(r.pick(3));
    static const double fs[] = {1.0, 2.0, 3.0, 5.0, 8.0, 16.0, 8192.0, 0.5};
    static const double as[] = {0.1, 0.5, 1.0, 0.3, 0.0, 2.0};  // >= 0: t >= 1
    static const I64 tl[] = {2, 3, 4, 10, 16, 1024};
    t.floor_scale = fs[r.pick(8)];
    t.attn_scale = as[r.pick(6)];
    t.temperature_len = tl[r.pick(6)];
    c.params.query_temperature = t;
  }
  if (r.on(5)) {
    const bool bidir = r.bit();
    const I64 nb = (bidir ? 4 : 2) + r.pick(38);
    const I64 me = (bidir ? nb / 2 : nb) / 2;
    const I64 md = me + 1 + r.pick(3) * (1 + r.pick(60));
    relbias_table.assign(static_cast<std::size_t>(nb * c.heads), 0.0);
    std::vector<float> tab(relbias_table.size());
    for (std::size_t i = 0; i < tab.size(); ++i) {
      tab[i] = static_cast<float>(rng.uni(-2.0, 2.0));
      relbias_table[i] = tab[i];
    }
    c.params.relative_bias = posenc::relative_position_bias(
        ConstTensorView<float, 2>(tab.data(), nb, c.heads), md, bidir);
  }
  c.lse = r.bit();
  c.threads = r.on(3) ? 2 : 1;
  c.warm = r.on(5);
  c.nan_padding = r.bit();
  c.amp_q = r.on(4) ? 0.25 : r.on(3) ? 2.0 : 1.0;
  c.amp_k = r.on(4) ? 2.0 : 1.0;
  c.amp_v = r.on(4) ? 2.0 : 1.0;

  // Metadata.
  if (c.api == Api::kDense || c.api == Api::kVarlen) {
    c.has_qpos = r.on(3);
    c.has_kpos = r.on(3);
    for (int s = 0; s < c.nseq; ++s) {
      if (c.has_qpos) c.qpos.push_back(positions(r, rng, c.qlen[s], c.klen[s] - c.qlen[s]));
      if (c.has_kpos) c.kpos.push_back(positions(r, rng, c.klen[s], 0));
    }
  }
  if (c.api == Api::kDense) {
    c.has_klen = r.on(4);
    c.has_kmask = r.on(4);
    for (int s = 0; s < c.nseq; ++s) {
      if (c.has_klen) c.key_lengths.push_back(r.on(5) ? 0 : rng.range(0, c.klen[s]));
      if (c.has_kmask) {
        const double density = rng.uni(0.2, 1.0);
        std::vector<std::uint8_t> m(static_cast<std::size_t>(c.klen[s]));
        for (auto& x : m)
          x = rng.uni() < density ? static_cast<std::uint8_t>(1 + rng.range(0, 3)) : 0;
        c.kmask.push_back(std::move(m));
      }
    }
  }
  // Tree masks: causal, the queries the last q_len keys.
  const bool want_tree = r.on(5);
  if (want_tree && causal && c.api != Api::kPagedVarlen) {
    bool ok = true;
    for (int s = 0; s < c.nseq; ++s) ok = ok && (c.qlen[s] == 0 || c.klen[s] >= c.qlen[s]);
    if (ok) {
      c.has_tree = true;
      for (int s = 0; s < c.nseq; ++s) c.tree.push_back(make_tree(r, rng, c.qlen[s]));
      if (c.api == Api::kPaged) {  // paged positions are slots: nothing that reads positions
        c.params.alibi_slopes.clear();
        c.params.attention_chunk_size = 0;
        c.params.query_temperature.reset();
        c.params.relative_bias.reset();
      }
    }
  }
  if (c.has_tree && c.params.sliding_window > 0) {
    I64 depth = 0;
    for (int s = 0; s < c.nseq; ++s) depth = std::max(depth, max_depth(c.tree[s], c.qlen[s]));
    c.params.sliding_window = std::max(c.params.sliding_window, depth);
  }
  // Bidirectional queries before position 0 (q_len > k_len) must be given positions when
  // chunks or a temperature read them.
  if (!causal && (c.params.attention_chunk_size > 0 || c.params.query_temperature)) {
    // neg: the call must be rejected (attention() rules); gap: attention_paged's validation
    // sees only the longest sequence, so a shorter one (0 < seq_len < q_len) slips through.
    // A sequence without keys gives zero rows and reads no position, so it is never refused
    // (nor a paged batch without any key).
    bool neg = false, gap = false;
    I64 longest = 0;
    for (int s = 0; s < c.nseq; ++s) longest = std::max(longest, c.klen[s]);
    for (int s = 0; s < c.nseq; ++s) {
      const I64 q = c.qlen[s], k = c.klen[s];
      switch (c.api) {
        case Api::kDense:
        case Api::kVarlen:
          neg = neg || (q > 0 && k > 0 && q > k);
          break;
        case Api::kPagedVarlen:
          neg = neg || (q > 0 && k > 0 && q > k);
          break;
        case Api::kPaged:
          neg = neg || (longest > 0 && q > longest);
          gap = gap || (k > 0 && k < q);
          break;
      }
    }
    if (neg && (c.api == Api::kDense || c.api == Api::kVarlen)) {
      if (!c.has_qpos) {
        c.has_qpos = true;
        for (int s = 0; s < c.nseq; ++s) c.qpos.push_back(positions(r, rng, c.qlen[s], 0));
      }
    } else if (neg) {
      c.params.attention_chunk_size = 0;
      c.params.query_temperature.reset();
    } else if (gap) {
      c.expect_throw = true;  // attention() rejects this shape; so must attention_paged
    }
  }
  if (paged) {
    static const int ps[] = {1, 2, 3, 4, 5, 7, 8, 16, 17, 32, 64};
    c.page_size = ps[r.pick(11)];
    c.extra_pages = 1 + static_cast<int>(r.pick(3));
    c.extra_cols = static_cast<int>(r.pick(3));
    if (c.nseq > 1 && r.on(3)) c.shared_pages = 1 + static_cast<int>(r.pick(4));
  }
  if (r.on(6)) {
    c.inject = 1 + static_cast<int>(r.pick(3));
    c.inject_kind = static_cast<int>(r.pick(3));
  }
  if (r.on(7)) {
    c.inv = 1 + static_cast<int>(r.pick(kInvCount - 1));
    c.inv_sub = r.u8();
  }
  std::uint64_t seed = 0;
  for (int i = 0; i < 4; ++i) seed = seed << 8 | r.u8();
  c.seed = seed;
  return c;
}

// ---- storage helpers ---------------------------------------------------------------------------

template <typename T>
T store(ld x) {
  if constexpr (std::is_same_v<T, double>)
    return static_cast<double>(x);
  else if constexpr (std::is_same_v<T, float>)
    return static_cast<float>(x);
  else
    return T(static_cast<float>(x));
}
template <typename T>
ld load(T x) {
  if constexpr (std::is_same_v<T, double> || std::is_same_v<T, float>)
    return static_cast<ld>(x);
  else
    return static_cast<ld>(static_cast<float>(x));
}
template <typename T>
constexpr ld unit_roundoff() {
  if constexpr (std::is_same_v<T, double>)
    return 0x1p-53L;
  else if constexpr (std::is_same_v<T, float>)
    return 0x1p-24L;
  else if constexpr (std::is_same_v<T, Eigen::half>)
    return 0x1p-11L;
  else
    return 0x1p-8L;
}
template <typename T>
constexpr ld abs_floor() {
  if constexpr (std::is_same_v<T, double>)
    return 1e-290L;
  else if constexpr (std::is_same_v<T, Eigen::half>)
    return 0x1p-24L;
  else
    return 1e-30L;
}

// ---- the oracle --------------------------------------------------------------------------------

/// One sequence, logically: values as stored, effective positions, padding, tree.
struct SeqL {
  I64 ql = 0, kl = 0;
  std::vector<ld> q, k, v;  // [ql][H][D], [kl][KVH][D], [kl][KVH][DV]
  std::vector<I64> qpos, kpos;
  std::vector<std::uint8_t> pad_ok;  // 1: not padding
  const std::vector<std::uint8_t>* tree = nullptr;
};

I64 floor_div(I64 a, I64 b) {
  I64 q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

ld temperature(I64 pos, const posenc::AttentionTemperature& t) {
  using posenc::TemperatureForm;
  if (t.form == TemperatureForm::kXai) {
    return pos > t.temperature_len
               ? std::log2(static_cast<ld>(pos)) / std::log2(static_cast<ld>(t.temperature_len))
               : 1.0L;
  }
  const ld steps_at = static_cast<ld>(pos) + (t.form == TemperatureForm::kLlama4 ? 1.0L : 0.0L);
  return 1.0L + static_cast<ld>(t.attn_scale) *
                    std::log1p(std::floor(steps_at / static_cast<ld>(t.floor_scale)));
}

/// T5 bucket of rel = pos_k - pos_q, as relative_bias.hpp's comment defines it (HF's float32
/// log branch).
I64 t5_bucket(I64 rel, I64 nb, I64 md, bool bidir) {
  I64 bucket = 0, n = nb;
  if (bidir) {
    n /= 2;
    if (rel > 0) bucket = n;
    rel = rel < 0 ? -rel : rel;
  } else {
    rel = rel < 0 ? -rel : 0;
  }
  const I64 e = n / 2;
  if (rel < e) return bucket + rel;
  const float ratio = static_cast<float>(rel) / static_cast<float>(e);
  const float denom =
      static_cast<float>(std::log(static_cast<double>(md) / static_cast<double>(e)));
  const float large = std::log(ratio) / denom * static_cast<float>(n - e);
  return bucket + std::min<I64>(e + static_cast<I64>(large), n - 1);
}

struct RowExpect {
  bool nan_row = false, zero_row = false;
  std::vector<ld> out, maxv;  // expected, max |v| over weighted visible keys per column
  std::vector<std::uint8_t> col_nonfinite;  // 1: column must be non-finite; 2: may be either
  ld lse = 0;
  ld delta1 = 0;  // logit error bound / unit roundoff
  I64 kl = 0;
};

struct Oracle {
  const Case& c;
  int D, DV, H, KVH, G;
  Oracle(const Case& cc) : c(cc), D(cc.d), DV(cc.dv), H(cc.heads), KVH(cc.kvh), G(cc.group) {}

  bool visible(const SeqL& S, I64 i, I64 j) const {
    const AttentionParams& p = c.params;
    const I64 off = S.kl - S.ql, a = i + off;
    const bool causal = p.mask == MaskMode::kCausal;
    if (causal && j > a) return false;
    if (S.tree && j >= off && (*S.tree)[i * S.ql + (j - off)] == 0) return false;
    if (p.sliding_window > 0) {
      const I64 W = p.sliding_window;
      if (S.tree) {
        if (j < off) {
          I64 depth = 0;
          for (I64 t = 0; t <= i; ++t) depth += (*S.tree)[i * S.ql + t] != 0;
          if (off + depth - 1 - j >= W) return false;
        }
      } else {
        const I64 ahead = a - j;
        if (ahead >= W || -ahead >= W) return false;
      }
    }
    if (p.attention_chunk_size > 0) {
      const I64 C = p.attention_chunk_size;
      if (floor_div(S.qpos[i], C) != floor_div(S.kpos[j], C)) return false;
    }
    if (!S.pad_ok[j]) return false;
    return true;
  }

  RowExpect row(const SeqL& S, I64 i, int h) const {
    const AttentionParams& p = c.params;
    RowExpect R;
    R.kl = S.kl;
    R.out.assign(DV, 0.0L);
    R.maxv.assign(DV, 0.0L);
    R.col_nonfinite.assign(DV, 0);
    const int g = h / G;
    const I64 pq = S.qpos[i];
    const ld scale0 = p.scale ? static_cast<ld>(*p.scale) : 1.0L / std::sqrt(static_cast<ld>(D));
    ld scale = scale0, tmag = 0;  // tmag: |t|'s parts, t = 1 + a ln(..) cancels (error ~ u tmag)
    if (p.query_temperature) {
      const auto& tp = *p.query_temperature;
      const ld t = temperature(pq, tp);
      scale *= t;
      tmag = tp.form == posenc::TemperatureForm::kXai ? std::fabs(t) : 1 + std::fabs(t - 1);
    }
    I64 qmin = S.qpos.empty() ? 0 : *std::min_element(S.qpos.begin(), S.qpos.end());
    I64 qmax = S.qpos.empty() ? 0 : *std::max_element(S.qpos.begin(), S.qpos.end());
    const ld spread = static_cast<ld>(qmax - qmin);
    const bool sink = !p.sink_logits.empty();
    const ld sinkv = sink ? static_cast<ld>(p.sink_logits[h]) : 0.0L;
    const ld* q = &S.q[(i * H + h) * D];
    std::vector<ld> s;
    std::vector<I64> js;
    ld delta = sink ? std::fabs(sinkv) : 0.0L;
    bool nan = false;
    for (I64 j = 0; j < S.kl; ++j) {
      if (!visible(S, i, j)) continue;
      const ld* k = &S.k[(j * KVH + g) * D];
      ld dot = 0, mag = 0, dot0 = 0;
      for (int cc = 0; cc < D; ++cc) {
        dot += (scale * q[cc]) * k[cc];
        dot0 += (scale0 * q[cc]) * k[cc];
        mag += std::fabs(scale * q[cc] * k[cc]);
      }
      ld x = dot;
      // dot product depth, the scale's rounding, and t(pos) formed in double (log1p, floor)
      ld e =
          std::isfinite(mag) ? (D + 6) * mag + 3 * std::fabs(x) + 8 * tmag * std::fabs(dot0) : 0.0L;
      if (p.logit_softcap > 0.0) {
        const ld cap = p.logit_softcap;
        x = cap * std::tanh(x / cap);
        e += 4 * std::fabs(dot) + 64 * cap;
        if (!std::isfinite(mag)) e = 64 * cap;
      }
      const I64 pk = S.kpos[j];
      if (!p.alibi_slopes.empty()) {
        const ld slope = p.alibi_slopes[h];
        const ld diff = static_cast<ld>(pk) - static_cast<ld>(pq);
        const ld bias = p.mask == MaskMode::kCausal ? slope * diff : -slope * std::fabs(diff);
        x += bias;
        e += slope * (2 * std::fabs(diff) + 2 * spread + 2) + 3 * std::fabs(bias);
      }
      if (p.relative_bias) {
        const auto& rb = *p.relative_bias;
        const I64 bucket = t5_bucket(pk - pq, rb.num_buckets, rb.max_distance, rb.bidirectional);
        const ld b = relbias_table[static_cast<std::size_t>(bucket * H + h)];
        x += b;
        e += std::fabs(b);
      }
      e += 2 * std::fabs(x);
      if (std::isnan(x) || x == kInf) nan = true;
      if (x == -kInf) {
        // weight 0; a non-finite V element there may still give NaN (0 * NaN)
        const ld* v = &S.v[(j * KVH + g) * DV];
        for (int cc = 0; cc < DV; ++cc)
          if (!std::isfinite(v[cc])) R.col_nonfinite[cc] = 2;
        continue;
      }
      if (std::isfinite(x)) delta = std::max(delta, e);
      s.push_back(x);
      js.push_back(j);
    }
    // A NaN / inf in the V row of a key this row does not see (but another row of its tile may)
    // may still reach it as 0 * V (documented); padding keys never do.
    for (I64 j = 0; j < S.kl; ++j) {
      if (!S.pad_ok[j] || visible(S, i, j)) continue;
      const ld* v = &S.v[(j * KVH + g) * DV];
      for (int cc = 0; cc < DV; ++cc) {
        if (!std::isfinite(v[cc]) && R.col_nonfinite[cc] == 0) R.col_nonfinite[cc] = 2;
      }
    }
    if (nan) {
      R.nan_row = true;
      R.lse = std::numeric_limits<ld>::quiet_NaN();
      return R;
    }
    if (s.empty()) {
      R.zero_row = true;
      R.lse = sink ? sinkv : -kInf;
      return R;
    }
    ld m = sink ? sinkv : -kInf;
    for (ld x : s) m = std::max(m, x);
    ld l = sink ? std::exp(sinkv - m) : 0.0L;
    std::vector<ld> w(s.size());
    for (std::size_t t = 0; t < s.size(); ++t) l += (w[t] = std::exp(s[t] - m));
    for (std::size_t t = 0; t < s.size(); ++t) {
      const ld wt = w[t] / l;
      const ld* v = &S.v[(js[t] * KVH + g) * DV];
      for (int cc = 0; cc < DV; ++cc) {
        if (!std::isfinite(v[cc])) {
          R.col_nonfinite[cc] = 1;
          continue;
        }
        R.out[cc] += wt * v[cc];
        R.maxv[cc] = std::max(R.maxv[cc], std::fabs(v[cc]));
      }
    }
    R.lse = m + std::log(l);
    R.delta1 = delta + 8;
    return R;
  }
};

// ---- failure reporting -------------------------------------------------------------------------

std::string describe(const Case& c) {
  std::ostringstream o;
  o.precision(17);
  const auto& p = c.params;
  o << api_name(c.api) << " TQ=" << ty_name(c.tq) << " TKV=" << ty_name(c.tkv)
    << " batch=" << c.nseq << " kv_heads=" << c.kvh << " group=" << c.group << " heads=" << c.heads
    << " d=" << c.d << " dv=" << c.dv << "\n  q_len=[";
  for (auto x : c.qlen) o << x << " ";
  o << "] k_len=[";
  for (auto x : c.klen) o << x << " ";
  o << "]\n  mask=" << (p.mask == MaskMode::kCausal ? "causal" : "bidirectional")
    << " scale=" << (p.scale ? std::to_string(*p.scale) : std::string("default"))
    << " softcap=" << p.logit_softcap << " window=" << p.sliding_window
    << " chunk=" << p.attention_chunk_size << " threads=" << c.threads << " lse=" << c.lse
    << " warm=" << c.warm << " nan_padding=" << c.nan_padding;
  if (!p.alibi_slopes.empty()) {
    o << "\n  alibi=[";
    for (auto x : p.alibi_slopes) o << x << " ";
    o << "]";
  }
  if (!p.sink_logits.empty()) {
    o << "\n  sinks=[";
    for (auto x : p.sink_logits) o << x << " ";
    o << "]";
  }
  if (p.query_temperature) {
    const auto& t = *p.query_temperature;
    o << "\n  temperature form=" << static_cast<int>(t.form) << " floor_scale=" << t.floor_scale
      << " attn_scale=" << t.attn_scale << " len=" << t.temperature_len;
  }
  if (p.relative_bias) {
    o << "\n  relbias buckets=" << p.relative_bias->num_buckets
      << " max_distance=" << p.relative_bias->max_distance
      << " bidir=" << p.relative_bias->bidirectional;
  }
  auto vec = [&](const char* name, const std::vector<std::vector<I64>>& v) {
    for (std::size_t s = 0; s < v.size(); ++s) {
      o << "\n  " << name << "[" << s << "]=";
      for (auto x : v[s]) o << x << " ";
    }
  };
  if (c.has_qpos) vec("qpos", c.qpos);
  if (c.has_kpos) vec("kpos", c.kpos);
  if (c.has_klen) {
    o << "\n  key_lengths=";
    for (auto x : c.key_lengths) o << x << " ";
  }
  if (c.has_kmask) {
    for (std::size_t s = 0; s < c.kmask.size(); ++s) {
      o << "\n  key_mask[" << s << "]=";
      for (auto x : c.kmask[s]) o << (x ? '1' : '0');
    }
  }
  if (c.has_tree) {
    for (std::size_t s = 0; s < c.tree.size(); ++s) {
      o << "\n  tree[" << s << "]=";
      const I64 q = c.qlen[s];
      for (I64 i = 0; i < q; ++i) {
        for (I64 t = 0; t < q; ++t) o << (c.tree[s][i * q + t] ? '1' : '0');
        o << "|";
      }
    }
  }
  if (c.api == Api::kPaged || c.api == Api::kPagedVarlen) {
    o << "\n  page_size=" << c.page_size << " extra_pages=" << c.extra_pages
      << " extra_cols=" << c.extra_cols << " shared_pages=" << c.shared_pages;
  }
  o << "\n  inject=" << c.inject << " kind=" << c.inject_kind << " invalid=" << inv_name(c.inv)
    << " sub=" << int(c.inv_sub) << " seed=" << c.seed << " amp q/k/v=" << c.amp_q << "/" << c.amp_k
    << "/" << c.amp_v;
  return o.str();
}

std::uint64_t g_run_seed = 0;  // the standalone driver's run (POSENC_FUZZ_MAIN)

[[noreturn]] void fail(const Case& c, const std::string& what) {
  std::fprintf(stderr, "\n==== fuzz_attention MISMATCH (driver seed %llu) ====\n%s\n%s\n",
               static_cast<unsigned long long>(g_run_seed), describe(c).c_str(), what.c_str());
  std::fflush(stderr);
  __builtin_trap();
}

std::string fmt(ld x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.10Lg", x);
  return buf;
}

double worst_ratio = 0.0;  // FZA_VERBOSE statistics

// ---- the typed run -----------------------------------------------------------------------------

template <typename TQ, typename TKV>
struct Runner {
  using Acc = std::conditional_t<std::is_same_v<TQ, double>, double, float>;
  using L = posenc::lse_t<TQ>;
  Case& c;
  Rng rng;
  std::vector<SeqL> seq;
  int H, Hq, KVH, D, Dk, DV, DVo;

  explicit Runner(Case& cc) : c(cc), rng{cc.seed * 0x100000001B3ull + 12345} {
    H = c.heads;
    Hq = H;
    KVH = c.kvh;
    D = c.d;
    Dk = D;
    DV = c.dv;
    DVo = DV;
  }

  ld gen(double amp) { return rng.uni(-amp, amp); }

  /// Logical per-sequence values (as stored), effective positions, padding.
  void make_logical() {
    seq.resize(static_cast<std::size_t>(c.nseq));
    for (int s = 0; s < c.nseq; ++s) {
      SeqL& S = seq[s];
      S.ql = c.qlen[s];
      S.kl = c.klen[s];
      S.q.resize(static_cast<std::size_t>(S.ql * Hq * D));
      for (auto& x : S.q) x = load(store<TQ>(gen(c.amp_q)));
      S.k.resize(static_cast<std::size_t>(S.kl * KVH * D));
      for (auto& x : S.k) x = load(store<TKV>(gen(c.amp_k)));
      S.v.resize(static_cast<std::size_t>(S.kl * KVH * DV));
      for (auto& x : S.v) x = load(store<TKV>(gen(c.amp_v)));
      S.qpos.resize(static_cast<std::size_t>(S.ql));
      for (I64 i = 0; i < S.ql; ++i) S.qpos[i] = c.has_qpos ? c.qpos[s][i] : S.kl - S.ql + i;
      S.kpos.resize(static_cast<std::size_t>(S.kl));
      for (I64 j = 0; j < S.kl; ++j) S.kpos[j] = c.has_kpos ? c.kpos[s][j] : j;
      S.pad_ok.assign(static_cast<std::size_t>(S.kl), 1);
      if (c.has_klen)
        for (I64 j = c.key_lengths[s]; j < S.kl; ++j) S.pad_ok[j] = 0;
      if (c.has_kmask)
        for (I64 j = 0; j < S.kl; ++j)
          if (!c.kmask[s][j]) S.pad_ok[j] = 0;
      S.tree = c.has_tree ? &c.tree[s] : nullptr;
    }
    // Paged prefix sharing: sequence s reuses sequence 0's first pages (same keys).
    if ((c.api == Api::kPaged || c.api == Api::kPagedVarlen) && c.shared_pages > 0) {
      for (int s = 1; s < c.nseq; ++s) {
        const I64 full = std::min(seq[0].kl, seq[s].kl) / c.page_size;
        const I64 m = std::min<I64>(full, c.shared_pages) * c.page_size;
        std::copy(seq[0].k.begin(), seq[0].k.begin() + m * KVH * D, seq[s].k.begin());
        std::copy(seq[0].v.begin(), seq[0].v.begin() + m * KVH * DV, seq[s].v.begin());
      }
    }
    // Non-finite injection (not into shared pages).
    if (c.inject && !(c.shared_pages > 0 && c.nseq > 1 &&
                      (c.api == Api::kPaged || c.api == Api::kPagedVarlen))) {
      const ld val = c.inject_kind == 0   ? std::numeric_limits<ld>::quiet_NaN()
                     : c.inject_kind == 1 ? kInf
                                          : -kInf;
      const int s = static_cast<int>(rng.range(0, c.nseq - 1));
      SeqL& S = seq[s];
      if (c.inject == 1 && S.kl > 0) S.k[rng.range(0, S.kl * KVH * D - 1)] = val;
      if (c.inject == 2 && S.kl > 0) S.v[rng.range(0, S.kl * KVH * DV - 1)] = val;
      if (c.inject == 3 && S.ql > 0) S.q[rng.range(0, S.ql * Hq * D - 1)] = val;
    }
    // Padding keys may hold anything.
    if (c.nan_padding) {
      for (auto& S : seq) {
        for (I64 j = 0; j < S.kl; ++j) {
          if (S.pad_ok[j]) continue;
          for (I64 x = 0; x < KVH * D; ++x)
            S.k[j * KVH * D + x] = std::numeric_limits<ld>::quiet_NaN();
          for (I64 x = 0; x < KVH * DV; ++x) S.v[j * KVH * DV + x] = kInf;
        }
      }
    }
  }

  template <typename T>
  static void fill(std::vector<T>& dst, std::size_t at, const std::vector<ld>& src) {
    for (std::size_t i = 0; i < src.size(); ++i) dst[at + i] = store<T>(src[i]);
  }

  // Output / lse buffers and their sentinel copies.
  std::vector<TQ> out;
  std::vector<L> lse;
  std::vector<unsigned char> out_before, lse_before;

  void sentinel() {
    if (!out.empty()) std::memset(static_cast<void*>(out.data()), 0xA5, out.size() * sizeof(TQ));
    if (!lse.empty()) std::memset(static_cast<void*>(lse.data()), 0x5A, lse.size() * sizeof(L));
    out_before.assign(reinterpret_cast<unsigned char*>(out.data()),
                      reinterpret_cast<unsigned char*>(out.data()) + out.size() * sizeof(TQ));
    lse_before.assign(reinterpret_cast<unsigned char*>(lse.data()),
                      reinterpret_cast<unsigned char*>(lse.data()) + lse.size() * sizeof(L));
  }
  bool untouched() const {
    return (out.empty() || std::memcmp(out_before.data(), out.data(), out_before.size()) == 0) &&
           (lse.empty() || std::memcmp(lse_before.data(), lse.data(), lse_before.size()) == 0);
  }

  /// Row index (into out rows of DV and lse) of (sequence s, query i, head h).
  std::vector<I64> row0;  // first row of sequence s

  // ---- checking ----
  void check_row(const RowExpect& R, const TQ* got, const L* got_lse, const std::string& where) {
    const ld u = unit_roundoff<Acc>();
    const ld uo = std::is_same_v<TQ, Acc> ? 0.0L : unit_roundoff<TQ>();
    const ld floor_abs = abs_floor<TQ>();
    std::ostringstream msg;
    auto bad = [&](const std::string& m) { fail(c, where + ": " + m); };
    if (R.nan_row) {
      for (int cc = 0; cc < DV; ++cc) {
        if (!std::isnan(load(got[cc])))
          bad("row must be NaN (a NaN or +inf logit among its visible keys), out[" +
              std::to_string(cc) + "] = " + fmt(load(got[cc])));
      }
      if (got_lse && !std::isnan(static_cast<ld>(*got_lse)))
        bad("lse must be NaN, got " + fmt(*got_lse));
      return;
    }
    if (R.zero_row) {
      for (int cc = 0; cc < DV; ++cc) {
        if (R.col_nonfinite[cc] == 2 && !std::isfinite(load(got[cc]))) continue;
        if (load(got[cc]) != 0)
          bad("row sees no key: expected 0, out[" + std::to_string(cc) +
              "] = " + fmt(load(got[cc])));
      }
      if (got_lse) {
        const ld gl = *got_lse;
        const bool ok = std::isinf(R.lse)
                            ? gl == R.lse
                            : std::fabs(gl - R.lse) <= 2 * u * std::fabs(R.lse) + 1e-30L;
        if (!ok) bad("row sees no key: lse expected " + fmt(R.lse) + " got " + fmt(gl));
      }
      return;
    }
    const ld delta = u * R.delta1;
    const ld werr = delta > 1 ? kInf : std::expm1(2 * delta);
    for (int cc = 0; cc < DV; ++cc) {
      const ld g = load(got[cc]);
      if (R.col_nonfinite[cc] == 1) {
        if (std::isfinite(g))
          bad("column " + std::to_string(cc) +
              " must be non-finite (a visible key's V holds NaN/inf), got " + fmt(g));
        continue;
      }
      if (R.col_nonfinite[cc] == 2 && !std::isfinite(g)) continue;
      if (!std::isfinite(g))
        bad("out[" + std::to_string(cc) + "] = " + fmt(g) + " expected " + fmt(R.out[cc]));
      // Convex combination (weights sum to <= 1): always.
      if (std::fabs(g) > R.maxv[cc] * (1 + 1e-2L) + floor_abs + 4 * uo * R.maxv[cc]) {
        bad("out[" + std::to_string(cc) + "] = " + fmt(g) +
            " outside the values' hull (max |v| = " + fmt(R.maxv[cc]) + "), expected " +
            fmt(R.out[cc]));
      }
      if (!std::isfinite(werr)) continue;
      const ld tol = 2 * (R.maxv[cc] * (werr + (R.kl + 16) * 4 * u)) +
                     2 * uo * std::fabs(R.out[cc]) + floor_abs;
      const ld err = std::fabs(g - R.out[cc]);
      if (tol > 0 && verbose() && err / tol > 0.6L) {
        std::fprintf(stderr,
                     "  %s out[%d]: err %Lg tol %Lg (delta1 %Lg maxv %Lg werr %Lg exp %Lg)\n",
                     where.c_str(), cc, err, tol, R.delta1, R.maxv[cc], werr, R.out[cc]);
      }
      if (tol > 0) worst_ratio = std::max<double>(worst_ratio, static_cast<double>(err / tol));
      if (err > tol) {
        bad("out[" + std::to_string(cc) + "] = " + fmt(g) + " expected " + fmt(R.out[cc]) +
            " |err| " + fmt(err) + " > tol " + fmt(tol));
      }
    }
    if (got_lse) {
      const ld gl = *got_lse;
      bool any_nf = false;
      for (int cc = 0; cc < DV; ++cc) any_nf = any_nf || R.col_nonfinite[cc] != 0;
      (void)any_nf;
      if (!std::isfinite(gl)) bad("lse = " + fmt(gl) + " expected " + fmt(R.lse));
      if (std::isfinite(werr)) {
        const ld lu = unit_roundoff<L>();
        const ld tol = 2 * (delta + (R.kl + 16) * 2 * u + 4 * lu * std::fabs(R.lse)) + 1e-30L;
        const ld err = std::fabs(gl - R.lse);
        if (verbose() && err / tol > 0.6L)
          std::fprintf(stderr, "  %s lse: err %Lg tol %Lg (delta1 %Lg, lse %Lg)\n", where.c_str(),
                       err, tol, R.delta1, R.lse);
        worst_ratio = std::max<double>(worst_ratio, static_cast<double>(err / tol));
        if (err > tol)
          bad("lse expected " + fmt(R.lse) + " got " + fmt(gl) + " |err| " + fmt(err) + " > tol " +
              fmt(tol));
      }
    }
  }

  void check_all(const std::vector<TQ>& o, const std::vector<L>* l, const char* which) {
    Oracle orc(c);
    for (int s = 0; s < c.nseq; ++s) {
      const SeqL& S = seq[s];
      for (I64 i = 0; i < S.ql; ++i) {
        for (int h = 0; h < H; ++h) {
          const RowExpect R = orc.row(S, i, h);
          const I64 row = (row0[s] + i) * H + h;
          check_row(R, &o[row * DV], l ? &(*l)[row] : nullptr,
                    std::string(which) + " seq " + std::to_string(s) + " query " +
                        std::to_string(i) + " head " + std::to_string(h));
        }
      }
    }
  }

  /// posenc::reference::attention (double inside) against the oracle: a second check.
  void check_reference(const std::vector<TQ>& ref) {
    Oracle orc(c);
    const ld u = 0x1p-50L;  // double GEMM plus the reference's own steps
    const ld uo = std::is_same_v<TQ, double> ? 0x1p-53L : unit_roundoff<TQ>();
    for (int s = 0; s < c.nseq; ++s) {
      const SeqL& S = seq[s];
      for (I64 i = 0; i < S.ql; ++i) {
        for (int h = 0; h < H; ++h) {
          const RowExpect R = orc.row(S, i, h);
          if (R.nan_row) continue;
          const TQ* got = &ref[((row0[s] + i) * H + h) * DV];
          const ld delta = u * R.delta1;
          const ld werr = delta > 1 ? kInf : std::expm1(2 * delta);
          for (int cc = 0; cc < DV; ++cc) {
            const ld g = load(got[cc]);
            if (R.col_nonfinite[cc]) continue;
            const ld expect = R.zero_row ? 0.0L : R.out[cc];
            const ld tol = R.zero_row ? 0.0L
                                      : 2 * R.maxv[cc] * (werr + (R.kl + 16) * 4 * u) +
                                            2 * uo * std::fabs(expect) + abs_floor<TQ>();
            if (!(std::fabs(g - expect) <= tol) && std::isfinite(werr)) {
              fail(c, "posenc::reference::attention seq " + std::to_string(s) + " query " +
                          std::to_string(i) + " head " + std::to_string(h) + ": out[" +
                          std::to_string(cc) + "] = " + fmt(g) + " expected " + fmt(expect) +
                          " tol " + fmt(tol));
            }
          }
        }
      }
    }
  }

  template <typename E>
  static bool same_bits(const std::vector<E>& a, const std::vector<E>& b) {
    return a.size() == b.size() &&
           (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(E)) == 0);
  }

  // ---- the invalid-parameter mutations on params (shared by every API) ----
  bool mutate_params(AttentionParams& p) {
    const int sub = c.inv_sub;
    switch (c.inv) {
      case kSlopesCount:
        p.alibi_slopes.assign(
            static_cast<std::size_t>(sub % 2 == 0 ? Hq + 1 : (Hq > 1 ? Hq - 1 : 2)), 0.25);
        return true;
      case kSlopeNeg:
        p.alibi_slopes.assign(static_cast<std::size_t>(Hq), 0.25);
        p.alibi_slopes[sub % Hq] = sub % 3 == 0 ? -0.5 : sub % 3 == 1 ? std::nan("") : INFINITY;
        return true;
      case kWindowNeg:
        p.sliding_window = sub % 2 ? -1 : std::numeric_limits<I64>::min();
        return true;
      case kChunkNeg:
        p.attention_chunk_size = sub % 2 ? -1 : -1000;
        return true;
      case kScaleBad: {
        static const double bad[] = {0.0, -1.0, std::nan(""), INFINITY, -0.0};
        p.scale = bad[sub % 5];
        return true;
      }
      case kSoftcapBad: {
        static const double bad[] = {-1.0, std::nan(""), INFINITY, -1e-300};
        p.logit_softcap = bad[sub % 4];
        return true;
      }
      case kSinkCount:
        p.sink_logits.assign(static_cast<std::size_t>(Hq + 1 + sub % 2), 0.5);
        return true;
      case kSinkNaN:
        p.sink_logits.assign(static_cast<std::size_t>(Hq), 0.5);
        p.sink_logits[sub % Hq] = sub % 2 ? std::nan("") : -INFINITY;
        return true;
      case kThreads:
        p.num_threads = sub % 2 ? 0 : -3;
        return true;
      case kTempBad: {
        posenc::AttentionTemperature t;
        switch (sub % 6) {
          case 0:
            t.form = posenc::TemperatureForm::kXai;
            t.temperature_len = sub % 4 == 0 ? 1 : -5;
            break;
          case 1:
            t.floor_scale = 0.0;
            break;
          case 2:
            t.floor_scale = -8.0;
            break;
          case 3:
            t.floor_scale = std::nan("");
            break;
          case 4:
            t.attn_scale = INFINITY;
            break;
          default:
            t.form = static_cast<posenc::TemperatureForm>(7);
            break;
        }
        p.query_temperature = t;
        return true;
      }
      case kRelBiasHeads: {
        std::vector<float> tab(static_cast<std::size_t>(32 * (Hq + 1)), 0.5f);
        p.relative_bias =
            posenc::relative_position_bias(ConstTensorView<float, 2>(tab.data(), 32, Hq + 1));
        return true;
      }
      case kRelBiasSize: {
        std::vector<float> tab(static_cast<std::size_t>(32 * Hq), 0.5f);
        p.relative_bias =
            posenc::relative_position_bias(ConstTensorView<float, 2>(tab.data(), 32, Hq));
        if (sub % 3 == 0)
          p.relative_bias->by_distance.pop_back();
        else if (sub % 3 == 1)
          p.relative_bias->table.push_back(0.0);
        else
          p.relative_bias->max_distance += 1;  // by_distance no longer matches
        return true;
      }
      case kMaskEnum:
        p.mask = static_cast<MaskMode>(2 + sub % 200);
        return true;
      default:
        return false;
    }
  }

  /// Makes the per-head parameters follow a changed head count (kGqa).
  void resize_heads(AttentionParams& p) {
    if (!p.alibi_slopes.empty()) p.alibi_slopes.resize(static_cast<std::size_t>(Hq), 0.125);
    if (!p.sink_logits.empty()) p.sink_logits.resize(static_cast<std::size_t>(Hq), 0.0);
    if (p.relative_bias) {
      std::vector<float> tab(static_cast<std::size_t>(p.relative_bias->num_buckets * Hq), 0.5f);
      p.relative_bias = posenc::relative_position_bias(
          ConstTensorView<float, 2>(tab.data(), p.relative_bias->num_buckets, Hq),
          p.relative_bias->max_distance, p.relative_bias->bidirectional);
    }
  }

  template <typename F>
  void expect_throw(F&& call, const char* what) {
    try {
      call();
    } catch (const std::invalid_argument&) {
      if (!untouched())
        fail(c, std::string(what) + ": threw std::invalid_argument but wrote out or lse first");
      return;
    } catch (const std::exception& e) {
      fail(c, std::string(what) + ": threw " + typeid(e).name() + " (" + e.what() +
                  "), expected std::invalid_argument");
    } catch (...) {
      fail(c, std::string(what) + ": threw a non-std exception, expected std::invalid_argument");
    }
    fail(c, std::string(what) + ": did not throw, expected std::invalid_argument");
  }
  template <typename F>
  void expect_ok(F&& call, const char* what) {
    try {
      call();
    } catch (const std::exception& e) {
      fail(c, std::string(what) + ": a valid call threw " + typeid(e).name() + ": " + e.what());
    }
  }

  /// Runs `call(params, threads, workspace, out, lse)`: checks, the thread-count and workspace
  /// differentials, and the reference when given.
  template <typename Call>
  void run_valid(Call&& call) {
    AttentionParams p = c.params;
    p.num_threads = c.threads;
    posenc::AttentionWorkspace ws;
    if (c.warm) {  // dirty the workspace with another call first (flipped mask, no window)
      AttentionParams w = p;
      w.mask = w.mask == MaskMode::kCausal ? MaskMode::kBidirectional : MaskMode::kCausal;
      w.sliding_window = 0;
      std::vector<TQ> o2(out.size());
      std::vector<L> l2(lse.size());
      try {
        call(w, &ws, o2, l2);
      } catch (const std::invalid_argument&) {
      }
    }
    expect_ok([&] { call(p, c.warm ? &ws : nullptr, out, lse); }, api_name(c.api));
    check_all(out, c.lse ? &lse : nullptr, api_name(c.api));
    if (c.threads == 2 || c.warm) {
      AttentionParams p1 = p;
      p1.num_threads = c.threads == 2 ? 1 : 2;
      std::vector<TQ> o1(out.size());
      std::vector<L> l1(lse.size());
      if (!o1.empty()) std::memset(static_cast<void*>(o1.data()), 0xA5, o1.size() * sizeof(TQ));
      if (!l1.empty()) std::memset(static_cast<void*>(l1.data()), 0x5A, l1.size() * sizeof(L));
      expect_ok([&] { call(p1, c.warm ? &ws : nullptr, o1, l1); }, api_name(c.api));
      if (!same_bits(o1, out) || (c.lse && !same_bits(l1, lse))) {
        std::size_t at = 0;
        while (at < out.size() && std::memcmp(&o1[at], &out[at], sizeof(TQ)) == 0) ++at;
        std::size_t lat = 0;
        while (lat < lse.size() && std::memcmp(&l1[lat], &lse[lat], sizeof(L)) == 0) ++lat;
        std::string where = at < out.size() ? "out element " + std::to_string(at) + ": " +
                                                  fmt(load(out[at])) + " vs " + fmt(load(o1[at]))
                                            : "lse element " + std::to_string(lat) + ": " +
                                                  fmt(lse[lat]) + " vs " + fmt(l1[lat]);
        fail(c, std::string("results differ between num_threads = ") +
                    std::to_string(p.num_threads) + " and " + std::to_string(p1.num_threads) +
                    (c.warm ? " (reused workspace)" : "") + " at " + where);
      }
    }
  }

  // ---- the four APIs ----
  void run() {
    make_logical();
    if constexpr (std::is_same_v<TQ, TKV>) {
      if (c.api == Api::kDense) return dense();
      if (c.api == Api::kVarlen) return varlen();
    }
    paged(c.api == Api::kPagedVarlen);
  }

  void dense() {
    const I64 B = c.nseq, QL = c.qlen[0], KL = c.klen[0];
    row0.resize(B);
    for (I64 s = 0; s < B; ++s) row0[s] = s * QL;
    AttentionParams p = c.params;
    int inv = c.inv;
    const int sub = c.inv_sub;
    // Structural invalidity first: the shapes of the buffers.
    I64 Bk = B, KLv = KL, QLo = QL, Hl = H, QLl = QL;
    if (inv == kGqa && KVH >= 2) {
      Hq = H + 1;
      resize_heads(p);
    } else if (inv == kGqa)
      inv = kWindowNeg;
    if (inv == kHeadDim) Dk = D + 1 + (sub % 3);
    if (inv == kOutDv) {
      if (sub % 2)
        DVo = DV + 1;
      else
        QLo = QL + 1;
    }
    if (inv == kLseShape) {
      c.lse = true;
      if (sub % 2)
        Hl = Hq + 1;
      else
        QLl = QL + 1;
    }
    if (inv == kBatchMismatch) Bk = B + 1;
    if (inv == kZeroDim) KLv = 0;
    // Buffers.
    std::vector<TQ> q(static_cast<std::size_t>(B * QL * Hq * D));
    std::vector<TKV> k(static_cast<std::size_t>(Bk * KLv * KVH * Dk)),
        v(static_cast<std::size_t>(Bk * KLv * KVH * DV));
    if (inv == kNoInv ||
        (inv != kGqa && inv != kHeadDim && inv != kBatchMismatch && inv != kZeroDim)) {
      for (I64 s = 0; s < B; ++s) {
        fill(q, s * QL * Hq * D, seq[s].q);
        fill(k, s * KL * KVH * D, seq[s].k);
        fill(v, s * KL * KVH * DV, seq[s].v);
      }
    }
    out.assign(static_cast<std::size_t>(B * QLo * Hq * DVo), TQ(0));
    lse.assign(c.lse ? static_cast<std::size_t>(B * QLl * Hl) : 0, L(0));
    // Metadata.
    std::vector<I64> qp, kp, kls;
    std::vector<std::uint8_t> km, tm;
    I64 qp_len = QL;
    for (I64 s = 0; s < B; ++s) {
      if (c.has_qpos) qp.insert(qp.end(), c.qpos[s].begin(), c.qpos[s].end());
      if (c.has_kpos) kp.insert(kp.end(), c.kpos[s].begin(), c.kpos[s].end());
      if (c.has_kmask) km.insert(km.end(), c.kmask[s].begin(), c.kmask[s].end());
      if (c.has_tree) tm.insert(tm.end(), c.tree[s].begin(), c.tree[s].end());
    }
    if (c.has_klen) kls = c.key_lengths;
    bool tree_on = c.has_tree;
    switch (inv) {
      case kKeyLenRange:
        kls.assign(static_cast<std::size_t>(B), 0);
        kls[sub % B] = sub % 2 ? KL + 1 : -1;
        break;
      case kKeyLenShape:
        kls.assign(static_cast<std::size_t>(B + 1), 0);
        break;
      case kKeyMaskShape:
        km.assign(static_cast<std::size_t>(B * (KL + 1)), 1);
        break;
      case kQposNeg:
        if (qp.empty())
          for (I64 s = 0; s < B; ++s)
            for (I64 i = 0; i < QL; ++i) qp.push_back(std::max<I64>(0, KL - QL + i));
        qp[sub % qp.size()] = sub % 2 ? -1 : std::numeric_limits<I64>::min();
        break;
      case kKposNeg:
        if (kp.empty())
          for (I64 s = 0; s < B; ++s)
            for (I64 j = 0; j < KL; ++j) kp.push_back(j);
        kp[sub % kp.size()] = -1 - sub;
        break;
      case kPosBig:
        if (kp.empty())
          for (I64 s = 0; s < B; ++s)
            for (I64 j = 0; j < KL; ++j) kp.push_back(j);
        kp[sub % kp.size()] = sub % 2 ? kP53 + 1 : std::numeric_limits<I64>::max();
        break;
      case kQposShape:
        qp_len = QL + 1;
        qp.assign(static_cast<std::size_t>(B * qp_len), 0);
        break;
      case kTreeAboveDiag:
      case kTreeDepth:
      case kTreeBidir: {
        if (QL < 2 || KL < QL) {
          inv = kWindowNeg;
          break;
        }
        if (!tree_on) {
          tm.assign(static_cast<std::size_t>(B * QL * QL), 0);
          for (I64 s = 0; s < B; ++s)
            for (I64 i = 0; i < QL; ++i) tm[(s * QL + i) * QL + i] = 1;
        }
        tree_on = true;
        p.mask = MaskMode::kCausal;
        if (inv == kTreeAboveDiag) {
          const I64 s = sub % B, i = sub % (QL - 1), t = i + 1 + sub % (QL - 1 - i);
          tm[(s * QL + i) * QL + t] = 1;
        } else if (inv == kTreeDepth) {
          for (I64 i = 0; i < QL; ++i) tm[i * QL + i] = 1;
          tm[1 * QL + 0] = 1;  // row 1 has depth >= 2
          p.sliding_window = 1;
        } else {
          p.mask = MaskMode::kBidirectional;
        }
        break;
      }
      case kBidirNegPos:
        // Needs q_len > k_len and no query positions: rebuild as that shape is not at hand.
        if (QL > KL) {
          p.mask = MaskMode::kBidirectional;
          qp.clear();
          tree_on = false;
          if (sub % 2)
            p.attention_chunk_size = 1 + sub % 7;
          else
            p.query_temperature = posenc::AttentionTemperature{};
        } else {
          inv = kWindowNeg;
        }
        break;
      default:
        break;
    }
    {
      const bool structural = inv == kGqa || inv == kHeadDim || inv == kOutDv || inv == kLseShape ||
                              inv == kBatchMismatch || inv == kZeroDim;
      const bool meta_inv = (inv >= kKeyLenRange && inv <= kQposShape) || inv == kTreeAboveDiag ||
                            inv == kTreeDepth || inv == kTreeBidir || inv == kBidirNegPos;
      if (inv != kNoInv && !structural && !meta_inv && !mutate_params(p)) {
        inv = kWindowNeg;
        p.sliding_window = -1;
      }
    }
    AttentionMetadata meta;
    if (!qp.empty()) meta.query_positions.emplace(qp.data(), B, qp_len);
    if (!kp.empty()) meta.key_positions.emplace(kp.data(), B, KL);
    if (!kls.empty()) meta.key_lengths.emplace(kls.data(), static_cast<Eigen::Index>(kls.size()));
    if (!km.empty()) meta.key_mask.emplace(km.data(), B, static_cast<Eigen::Index>(km.size() / B));
    if (tree_on) meta.tree_mask.emplace(tm.data(), B, QL, QL);
    const ConstTensorView<TQ, 4> qv(q.data(), B, QL, Hq, D);
    const ConstTensorView<TKV, 4> kv(k.data(), Bk, KLv, KVH, Dk);
    const ConstTensorView<TKV, 4> vv(v.data(), Bk, KLv, KVH, DV);
    auto call = [&](const AttentionParams& pp, posenc::AttentionWorkspace* ws, std::vector<TQ>& o,
                    std::vector<L>& l) {
      const TensorView<TQ, 4> ov(o.data(), B, QLo, Hq, DVo);
      if (c.lse) {
        posenc::attention<TQ>(qv, kv, vv, ov, TensorView<L, 3>(l.data(), B, QLl, Hl), pp, meta, ws);
      } else {
        posenc::attention<TQ>(qv, kv, vv, ov, pp, meta, ws);
      }
    };
    if constexpr (std::is_same_v<TQ, TKV>) {
      if (inv != kNoInv) {
        c.inv = inv;
        p.num_threads = inv == kThreads ? p.num_threads : c.threads;
        sentinel();
        expect_throw([&] { call(p, nullptr, out, lse); }, "attention");
        return;
      }
      run_valid(call);
      // Second check: posenc::reference::attention against the same oracle.
      if (!c.inject && !c.nan_padding) {
        std::vector<TQ> ref(out.size());
        posenc::reference::attention<TQ>(qv, kv, vv, TensorView<TQ, 4>(ref.data(), B, QL, H, DV),
                                         c.params, meta);
        check_reference(ref);
      }
    }
  }

  void varlen() {
    const int S = c.nseq;
    std::vector<I64> cq(S + 1, 0), ck(S + 1, 0);
    for (int s = 0; s < S; ++s) {
      cq[s + 1] = cq[s] + c.qlen[s];
      ck[s + 1] = ck[s] + c.klen[s];
    }
    const I64 TQn = cq[S], TKn = ck[S];
    row0.assign(cq.begin(), cq.end() - 1);
    AttentionParams p = c.params;
    int inv = c.inv;
    const int sub = c.inv_sub;
    I64 Hl = H, TQl = TQn, TQo = TQn;
    if (inv == kGqa && KVH >= 2) {
      Hq = H + 1;
      resize_heads(p);
    } else if (inv == kGqa)
      inv = kWindowNeg;
    if (inv == kHeadDim) Dk = D + 1;
    if (inv == kOutDv) {
      if (sub % 2)
        DVo = DV + 1;
      else
        TQo = TQn + 1;
    }
    if (inv == kLseShape) {
      c.lse = true;
      if (sub % 2)
        Hl = Hq + 1;
      else
        TQl = TQn + 1;
    }
    std::vector<TQ> q(static_cast<std::size_t>(TQn * Hq * D));
    std::vector<TKV> k(static_cast<std::size_t>(TKn * KVH * Dk)),
        v(static_cast<std::size_t>(TKn * KVH * DV));
    if (inv != kGqa && inv != kHeadDim) {
      for (int s = 0; s < S; ++s) {
        fill(q, cq[s] * H * D, seq[s].q);
        fill(k, ck[s] * KVH * D, seq[s].k);
        fill(v, ck[s] * KVH * DV, seq[s].v);
      }
    }
    out.assign(static_cast<std::size_t>(TQo * Hq * DVo), TQ(0));
    lse.assign(c.lse ? static_cast<std::size_t>(TQl * Hl) : 0, L(0));
    std::vector<I64> qp, kp;
    std::vector<std::uint8_t> tm;
    for (int s = 0; s < S; ++s) {
      if (c.has_qpos) qp.insert(qp.end(), c.qpos[s].begin(), c.qpos[s].end());
      if (c.has_kpos) kp.insert(kp.end(), c.kpos[s].begin(), c.kpos[s].end());
      if (c.has_tree) tm.insert(tm.end(), c.tree[s].begin(), c.tree[s].end());
    }
    bool tree_on = c.has_tree;
    std::vector<I64> cqa = cq, cka = ck;
    switch (inv) {
      case kCuEnd:
        (sub % 2 ? cqa : cka).back() += 1 + sub % 3;
        break;
      case kCuStart:
        cqa[0] = 1;
        break;
      case kCuDecrease:
        if (S >= 2) {
          cqa[1] = cqa[2] + 1;
        } else {
          inv = kCuCount;
          cka.push_back(cka.back());
        }
        break;
      case kCuCount:
        cka.push_back(cka.back());
        break;
      case kVposLen:
        if (sub % 2) {
          qp.assign(static_cast<std::size_t>(TQn + 1), 0);
        } else {
          kp.assign(static_cast<std::size_t>(TKn + 1), 0);
        }
        break;
      case kQposNeg:
        if (TQn == 0) {
          inv = kCuStart;
          cqa[0] = 1;
          break;
        }
        if (qp.empty())
          for (int s = 0; s < S; ++s)
            for (I64 i = 0; i < c.qlen[s]; ++i)
              qp.push_back(std::max<I64>(0, c.klen[s] - c.qlen[s] + i));
        qp[sub % qp.size()] = -1;
        break;
      case kTreesLen:
        if (!tree_on) {
          for (int s = 0; s < S; ++s)
            for (I64 i = 0; i < c.qlen[s] * c.qlen[s]; ++i) tm.push_back(0);
        }
        tree_on = true;
        tm.push_back(0);
        break;
      case kTreeAboveDiag: {
        int s0 = -1;
        for (int s = 0; s < S; ++s)
          if (c.qlen[s] >= 2 && c.klen[s] >= c.qlen[s]) s0 = s;
        bool all_ok = true;
        for (int s = 0; s < S; ++s) all_ok = all_ok && (c.qlen[s] == 0 || c.klen[s] >= c.qlen[s]);
        if (s0 < 0 || !all_ok) {
          inv = kCuStart;
          cqa[0] = 1;
          break;
        }
        if (!tree_on) {
          tm.clear();
          for (int s = 0; s < S; ++s)
            for (I64 i = 0; i < c.qlen[s]; ++i)
              for (I64 t = 0; t < c.qlen[s]; ++t) tm.push_back(i == t);
        }
        tree_on = true;
        p.mask = MaskMode::kCausal;
        I64 off = 0;
        for (int s = 0; s < s0; ++s) off += c.qlen[s] * c.qlen[s];
        tm[off + 0 * c.qlen[s0] + 1] = 1;
        break;
      }
      case kVarlenTreeShort: {
        int s0 = -1;
        for (int s = 0; s < S; ++s)
          if (c.qlen[s] > c.klen[s]) s0 = s;
        if (s0 < 0) {
          inv = kCuStart;
          cqa[0] = 1;
          break;
        }
        if (!tree_on) {
          tm.clear();
          for (int s = 0; s < S; ++s)
            for (I64 i = 0; i < c.qlen[s]; ++i)
              for (I64 t = 0; t < c.qlen[s]; ++t) tm.push_back(i == t);
        }
        tree_on = true;
        p.mask = MaskMode::kCausal;
        p.sliding_window = 0;
        break;
      }
      case kBidirNegPos: {
        bool found = false;
        for (int s = 0; s < S; ++s) found = found || (c.klen[s] > 0 && c.qlen[s] > c.klen[s]);
        if (!found) {
          inv = kCuStart;
          cqa[0] = 1;
          break;
        }
        p.mask = MaskMode::kBidirectional;
        tree_on = false;
        qp.clear();
        if (sub % 2)
          p.attention_chunk_size = 1 + sub % 7;
        else
          p.query_temperature = posenc::AttentionTemperature{};
        break;
      }
      default:
        if (inv != kNoInv && inv != kGqa && inv != kHeadDim && inv != kOutDv && inv != kLseShape &&
            !mutate_params(p)) {
          inv = kCuStart;
          cqa[0] = 1;
        }
        break;
    }
    posenc::VarlenMetadata meta;
    if (!qp.empty()) meta.query_positions.emplace(qp.data(), static_cast<Eigen::Index>(qp.size()));
    if (!kp.empty()) meta.key_positions.emplace(kp.data(), static_cast<Eigen::Index>(kp.size()));
    if (tree_on) meta.tree_masks.emplace(tm.data(), static_cast<Eigen::Index>(tm.size()));
    const ConstTensorView<TQ, 3> qv(q.data(), TQn, Hq, D);
    const ConstTensorView<TKV, 3> kv(k.data(), TKn, KVH, Dk);
    const ConstTensorView<TKV, 3> vv(v.data(), TKn, KVH, DV);
    const ConstTensorView<I64, 1> cqv(cqa.data(), static_cast<Eigen::Index>(cqa.size()));
    const ConstTensorView<I64, 1> ckv(cka.data(), static_cast<Eigen::Index>(cka.size()));
    const bool use_meta = c.has_qpos || c.has_kpos || tree_on || !qp.empty() || !kp.empty();
    auto call = [&](const AttentionParams& pp, posenc::AttentionWorkspace* ws, std::vector<TQ>& o,
                    std::vector<L>& l) {
      const TensorView<TQ, 3> ov(o.data(), TQo, Hq, DVo);
      std::optional<TensorView<L, 2>> lv;
      if (c.lse) lv.emplace(l.data(), TQl, Hl);
      if (use_meta)
        posenc::attention_varlen<TQ>(qv, kv, vv, ov, cqv, ckv, pp, meta, ws, lv);
      else
        posenc::attention_varlen<TQ>(qv, kv, vv, ov, cqv, ckv, pp, ws, lv);
    };
    if constexpr (std::is_same_v<TQ, TKV>) {
      if (inv != kNoInv) {
        c.inv = inv;
        p.num_threads = inv == kThreads ? p.num_threads : c.threads;
        sentinel();
        expect_throw([&] { call(p, nullptr, out, lse); }, "attention_varlen");
        return;
      }
      run_valid(call);
    }
  }

  void paged(bool packed) {
    const int S = c.nseq;
    const I64 P = c.page_size;
    // Pages: each sequence's own, sequence s >= 1 sharing sequence 0's first pages.
    std::vector<I64> npages(S), nshared(S, 0);
    I64 total = 0, maxp = 0;
    for (int s = 0; s < S; ++s) {
      npages[s] = (c.klen[s] + P - 1) / P;
      if (s > 0 && c.shared_pages > 0)
        nshared[s] = std::min<I64>(std::min(c.klen[0], c.klen[s]) / P, c.shared_pages);
      total += npages[s] - nshared[s];
      maxp = std::max(maxp, npages[s]);
    }
    const I64 num_pages = total + c.extra_pages;
    const I64 max_pages = std::max<I64>(maxp + c.extra_cols, 1);
    std::vector<I64> perm(num_pages);
    for (I64 i = 0; i < num_pages; ++i) perm[i] = i;
    for (I64 i = num_pages - 1; i > 0; --i) std::swap(perm[i], perm[rng.range(0, i)]);
    std::vector<std::int32_t> table(static_cast<std::size_t>(S * max_pages));
    for (auto& t : table)
      t = static_cast<std::int32_t>(rng.range(0, 3) == 0   ? -7
                                    : rng.range(0, 3) == 0 ? 1 << 30
                                                           : rng.range(-1, num_pages + 5));
    I64 next = 0;
    for (int s = 0; s < S; ++s) {
      for (I64 i = 0; i < npages[s]; ++i) {
        table[s * max_pages + i] =
            static_cast<std::int32_t>(i < nshared[s] ? table[0 * max_pages + i] : perm[next++]);
      }
    }
    const bool gqa_ok = KVH >= 2;
    AttentionParams p = c.params;
    int inv = c.inv;
    const int sub = c.inv_sub;
    I64 Hl = H, DVp = DV;
    if (inv == kGqa && gqa_ok) {
      Hq = H + 1;
      resize_heads(p);
    } else if (inv == kGqa)
      inv = kWindowNeg;
    if (inv == kHeadDim) Dk = D + 1;
    if (inv == kVPagesShape) DVp = DV;  // v_pages page_size changes below
    // Pools, unowned rows NaN (or large garbage).
    const ld junk = c.nan_padding ? std::numeric_limits<ld>::quiet_NaN() : 1e3L;
    std::vector<TKV> kp(static_cast<std::size_t>(num_pages * P * KVH * Dk), store<TKV>(junk));
    std::vector<TKV> vp(static_cast<std::size_t>(num_pages * P * KVH * DVp),
                        store<TKV>(c.nan_padding ? kInf : -1e3L));
    if (inv != kHeadDim) {
      for (int s = 0; s < S; ++s) {
        for (I64 j = 0; j < c.klen[s]; ++j) {
          const I64 page = table[s * max_pages + j / P], r = page * P + j % P;
          for (I64 x = 0; x < KVH * D; ++x)
            kp[r * KVH * D + x] = store<TKV>(seq[s].k[j * KVH * D + x]);
          for (I64 x = 0; x < KVH * DV; ++x)
            vp[r * KVH * DV + x] = store<TKV>(seq[s].v[j * KVH * DV + x]);
        }
      }
    }
    std::vector<I64> lens(c.klen.begin(), c.klen.end());
    // Queries.
    std::vector<I64> cq(S + 1, 0);
    for (int s = 0; s < S; ++s) cq[s + 1] = cq[s] + c.qlen[s];
    const I64 QL = c.qlen[0], TQn = cq[S];
    row0.assign(cq.begin(), cq.end() - 1);
    I64 QLo = packed ? TQn : QL, DVo2 = DV, QLl = packed ? TQn : QL;
    if (inv == kOutDv) {
      if (sub % 2)
        DVo2 = DV + 1;
      else
        QLo += 1;
    }
    if (inv == kLseShape) {
      c.lse = true;
      if (sub % 2)
        Hl = Hq + 1;
      else
        QLl += 1;
    }
    DVo = static_cast<int>(DVo2);
    std::vector<TQ> q(static_cast<std::size_t>(TQn * Hq * D));
    if (inv != kGqa)
      for (int s = 0; s < S; ++s) fill(q, cq[s] * H * D, seq[s].q);
    const I64 OB = packed ? 1 : S;
    out.assign(static_cast<std::size_t>(OB * QLo * Hq * DVo), TQ(0));
    lse.assign(c.lse ? static_cast<std::size_t>(OB * QLl * Hl) : 0, L(0));
    std::vector<std::uint8_t> tm;
    bool tree_on = c.has_tree && !packed;
    if (tree_on)
      for (int s = 0; s < S; ++s) tm.insert(tm.end(), c.tree[s].begin(), c.tree[s].end());
    I64 table_rows = S, P_v = P;
    std::vector<I64> cqa = cq;
    switch (inv) {
      case kPageId: {
        int s0 = -1;
        for (int s = 0; s < S; ++s)
          if (npages[s] > 0) s0 = s;
        if (s0 < 0) {
          inv = kSeqLenRange;
          lens[0] = -1;
          break;
        }
        table[s0 * max_pages + sub % npages[s0]] =
            sub % 2 ? -1 : static_cast<std::int32_t>(num_pages + sub % 3);
        break;
      }
      case kSeqLenRange:
        lens[sub % S] = sub % 2 ? max_pages * P + 1 : -1;
        break;
      case kPageTableRows:
        table_rows = S + 1;
        table.resize(static_cast<std::size_t>((S + 1) * max_pages), 0);
        break;
      case kVPagesShape:
        P_v = P + 1;
        vp.resize(static_cast<std::size_t>(num_pages * P_v * KVH * DV));
        break;
      case kPagedTreeAlibi:
      case kPagedTreeShort:
      case kTreeAboveDiag:
      case kTreeDepth:
      case kTreeBidir: {
        if (packed) {
          inv = kPvCuCount;
          cqa.push_back(cqa.back());
          break;
        }
        bool long_enough = QL >= 2;
        for (int s = 0; s < S; ++s) long_enough = long_enough && lens[s] >= QL;
        if (inv == kPagedTreeShort) {
          bool has_short = false;
          for (int s = 0; s < S; ++s) has_short = has_short || lens[s] < QL;
          if (!has_short) {
            inv = kSeqLenRange;
            lens[0] = -1;
            break;
          }
        } else if (!long_enough) {
          inv = kSeqLenRange;
          lens[0] = -1;
          break;
        }
        if (!tree_on) {
          tm.assign(static_cast<std::size_t>(S * QL * QL), 0);
          for (int s = 0; s < S; ++s)
            for (I64 i = 0; i < QL; ++i) tm[(s * QL + i) * QL + i] = 1;
        }
        tree_on = true;
        p.mask = MaskMode::kCausal;
        p.alibi_slopes.clear();
        p.attention_chunk_size = 0;
        p.query_temperature.reset();
        p.relative_bias.reset();
        if (inv == kPagedTreeAlibi) {
          switch (sub % 4) {
            case 0:
              p.alibi_slopes.assign(static_cast<std::size_t>(Hq), 0.5);
              break;
            case 1:
              p.attention_chunk_size = 4;
              break;
            case 2:
              p.query_temperature = posenc::AttentionTemperature{};
              break;
            default: {
              std::vector<float> tab(static_cast<std::size_t>(32 * Hq), 0.1f);
              p.relative_bias =
                  posenc::relative_position_bias(ConstTensorView<float, 2>(tab.data(), 32, Hq));
            }
          }
        } else if (inv == kTreeAboveDiag) {
          tm[(sub % S) * QL * QL + 0 * QL + 1] = 1;
        } else if (inv == kTreeDepth) {
          for (int s = 0; s < S; ++s) {
            tm[(s * QL + 1) * QL + 0] = 1;
            tm[(s * QL + 1) * QL + 1] = 1;
          }
          p.sliding_window = 1;
        } else if (inv == kTreeBidir) {
          p.mask = MaskMode::kBidirectional;
        }
        break;
      }
      case kPvCuCount:
      case kPvCuEnd:
        if (packed) {
          if (inv == kPvCuCount)
            cqa.push_back(cqa.back());
          else
            cqa.back() += 1;
        } else {
          inv = kSeqLenRange;
          lens[0] = -1;
        }
        break;
      default:
        if (inv == kPageId) {
          int s0 = -1;
          for (int s = 0; s < S; ++s)
            if (npages[s] > 0) s0 = s;
          if (s0 >= 0) {
            table[s0 * max_pages] = -1;
            break;
          }
          inv = kSeqLenRange;
          lens[0] = -1;
          break;
        }
        if (inv == kBidirNegPos) {
          // paged_varlen checks each sequence as attention() would; attention_paged: see below
          bool found = false;
          for (int s = 0; s < S; ++s) found = found || (c.qlen[s] > std::max<I64>(lens[s], 1));
          if (!packed || !found) {
            inv = kSeqLenRange;
            lens[0] = -1;
            break;
          }
          p.mask = MaskMode::kBidirectional;
          if (sub % 2)
            p.attention_chunk_size = 1 + sub % 7;
          else
            p.query_temperature = posenc::AttentionTemperature{};
          break;
        }
        if (inv != kNoInv && inv != kGqa && inv != kHeadDim && inv != kOutDv && inv != kLseShape &&
            !mutate_params(p)) {
          inv = kSeqLenRange;
          lens[0] = -1;
        }
        break;
    }
    if (packed && tree_on) tree_on = false;
    const ConstTensorView<TKV, 4> kpv(kp.data(), num_pages, P, KVH, Dk);
    const ConstTensorView<TKV, 4> vpv(vp.data(), num_pages, P_v, KVH, DV);
    const ConstTensorView<std::int32_t, 2> tv(table.data(), table_rows, max_pages);
    const ConstTensorView<I64, 1> lv(lens.data(), S);
    auto call = [&](const AttentionParams& pp, posenc::AttentionWorkspace* ws, std::vector<TQ>& o,
                    std::vector<L>& l) {
      if (packed) {
        const ConstTensorView<TQ, 3> qv(q.data(), TQn, Hq, D);
        const ConstTensorView<I64, 1> cqv(cqa.data(), static_cast<Eigen::Index>(cqa.size()));
        std::optional<TensorView<L, 2>> lo;
        if (c.lse) lo.emplace(l.data(), QLl, Hl);
        posenc::attention_paged_varlen<TQ, TKV>(
            qv, kpv, vpv, tv, lv, cqv, TensorView<TQ, 3>(o.data(), QLo, Hq, DVo), pp, ws, lo);
      } else {
        const ConstTensorView<TQ, 4> qv(q.data(), S, QL, Hq, D);
        std::optional<TensorView<L, 3>> lo;
        if (c.lse) lo.emplace(l.data(), S, QLl, Hl);
        const TensorView<TQ, 4> ov(o.data(), S, QLo, Hq, DVo);
        if (tree_on) {
          posenc::attention_paged<TQ, TKV>(qv, kpv, vpv, tv, lv, ov,
                                           ConstTensorView<std::uint8_t, 3>(tm.data(), S, QL, QL),
                                           pp, ws, lo);
        } else {
          posenc::attention_paged<TQ, TKV>(qv, kpv, vpv, tv, lv, ov, pp, ws, lo);
        }
      }
    };
    if (inv != kNoInv || c.expect_throw) {
      c.inv = inv;
      p.num_threads = inv == kThreads ? p.num_threads : c.threads;
      sentinel();
      expect_throw([&] { call(p, nullptr, out, lse); }, api_name(c.api));
      return;
    }
    run_valid(call);
  }
};

template <typename TQ>
void dispatch_kv(Case& c) {
  switch (c.tkv) {
    case Ty::kF32:
      if constexpr (!std::is_same_v<TQ, float>) {
        Runner<TQ, float>(c).run();
        return;
      }
      break;
    case Ty::kF16:
      if constexpr (std::is_same_v<TQ, float>) {
        Runner<TQ, Eigen::half>(c).run();
        return;
      }
      break;
    case Ty::kBF16:
      if constexpr (std::is_same_v<TQ, float>) {
        Runner<TQ, Eigen::bfloat16>(c).run();
        return;
      }
      break;
    default:
      break;
  }
  Runner<TQ, TQ>(c).run();
}

void run_case(Case& c) {
  if (c.tkv == c.tq) {
    switch (c.tq) {
      case Ty::kF32:
        Runner<float, float>(c).run();
        break;
      case Ty::kF64:
        Runner<double, double>(c).run();
        break;
      case Ty::kF16:
        Runner<Eigen::half, Eigen::half>(c).run();
        break;
      case Ty::kBF16:
        Runner<Eigen::bfloat16, Eigen::bfloat16>(c).run();
        break;
    }
    return;
  }
  switch (c.tq) {
    case Ty::kF32:
      dispatch_kv<float>(c);
      break;
    case Ty::kF64:
      dispatch_kv<double>(c);
      break;
    case Ty::kF16:
      dispatch_kv<Eigen::half>(c);
      break;
    case Ty::kBF16:
      dispatch_kv<Eigen::bfloat16>(c);
      break;
  }
}

}  // namespace fza

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fza::Reader r{data, size};
  fza::Rng rng{0};
  // Values used while decoding (positions, slopes, tables) come from the seed bytes too: take
  // them from the end of the input so the structure bytes stay at the front.
  std::uint64_t seed = 0;
  for (std::size_t i = 0; i < 4 && i < size; ++i) seed = seed << 8 | data[size - 1 - i];
  rng.s = seed ^ 0xD1B54A32D192ED03ull;
  fza::Case c = fza::decode(r, rng);
  c.seed ^= seed;
  if (fza::verbose()) std::fprintf(stderr, "case: %s\n", fza::describe(c).c_str());
  fza::worst_ratio = 0;
  fza::run_case(c);
  if (fza::verbose()) std::fprintf(stderr, "  worst err/tol = %.3g\n", fza::worst_ratio);
  return 0;
}

#ifdef POSENC_FUZZ_MAIN
#include "driver.hpp"
// Without libFuzzer: `./fuzz_attention runs [first_seed]` (driver.hpp).
int main(int argc, char** argv) {
  const long runs = posenc_fuzz::run_random_inputs(
      argc, argv, 256, [](std::uint64_t seed) { fza::g_run_seed = seed; });
  std::fprintf(stderr, "%ld runs, no mismatch\n", runs);
  return 0;
}
#endif
