#pragma once
/// \file posenc/rope.hpp
/// Rotary position embedding kernels (RoFormer, Su et al. 2021, §3.4): rotate each pair of Q/K
/// coordinates by angle position * inv_freq[j] so that <R(m)q, R(n)k> depends only on n - m.
///
/// Pair layouts (head_dim = 8, rotary_dim = 4; c/s = the two coordinates of a pair):
///
///   RopeLayout::kInterleaved  [cscs0000]  pair j = (2j, 2j+1)       GPT-J, Meta llama, ggml NORMAL
///   RopeLayout::kHalfSplit    [ccss0000]  pair j = (j, j + r/2)     GPT-NeoX, HF rotate_half
///
///   x1' = a (x1 cos(p w_j) - x2 sin(p w_j)),   x2' = a (x2 cos(p w_j) + x1 sin(p w_j))
///
/// with a = attention_factor, w_j = inv_freq[j] (rope_frequencies.hpp). With a rotary_offset o
/// the rotated slice is [o, o + r) ("nope-first" MLA heads); every other dim passes through.
///
/// Tensors are strided "rows of head_dim" (RopeHeads, FlashInfer's stride_n / stride_h), so
/// [batch, seq, heads, head_dim], [batch, heads, seq, head_dim], packed [tokens, heads,
/// head_dim] and a slice of a fused QKV buffer all run the same loop without a copy.
///
/// cos/sin come either from (a) the angle p * w_j formed in double and reduced mod pi/2 in double
/// (exact well past position 2^24; contiguous positions advance by the angle-addition recurrence
/// in double, re-anchored every kRopeReanchor tokens), computed once per token and reused by
/// every head of Q and K; or (b) a cos/sin cache [max_position, rotary_dim] = cat(cos, sin)
/// with attention_factor folded in, the layout vLLM and FlashInfer use: float (FlashInfer
/// requires it; make_rope_cos_sin_cache) or the model's dtype, as vLLM casts its cache
/// (CosSinCacheView).
///
/// Reproducibility: a call's results depend only on its inputs, views and thread count. On the
/// fly, tokens a call visits one after another at consecutive positions take the recurrence,
/// so the last bit of an output can depend on the visiting order: SBHD views are walked
/// seq-major (their consecutive tokens are other sequences'), threads split the tokens, a
/// decode step starts a run of its own. Either way cos / sin are the exact angle's to far
/// below float's rounding (kRopeReanchor), so outputs differ by at most the rounding to T.
/// Read from a cos/sin cache, a position gives the same bits whatever the view, split or call.
///
/// Non-finite input: a NaN or infinite element gives what x cos - y sin, x sin + y cos give
/// (NaN-ness and the sign of an infinity), except in pairs that do not turn: every pair of a
/// token at position 0 and the trailing blocks of 32 pairs with angle 0 (proportional RoPE's
/// still pairs), with attention factor 1, are left as they are, so an infinity stays one and
/// a partner's NaN does not spread (rope_turning_pairs). The sign and payload of a NaN are
/// not specified: in place and out of place may differ (GCC contracts one AArch64 loop to a
/// negating fmsub and not the other).
///
/// The apply functions validate everything before the first write, never allocate (when run
/// single-threaded), and keep no global state. Storage float, double, Eigen::half,
/// Eigen::bfloat16; the 16-bit types and float compute in float, double in double.
///
/// Threads: RopeApplyOptions::set_device(an Eigen::ThreadPoolDevice) splits tokens across the
/// device's threads (the caller defines EIGEN_USE_THREADS to have that type; rope.hpp does not
/// depend on the macro). Single-threaded by default.

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "posenc/detail/numeric.hpp"
#include "posenc/detail/rope_kernels.hpp"
#include "posenc/error.hpp"
#include "posenc/rope_frequencies.hpp"
#include "posenc/rope_params.hpp"
#include "posenc/tensor.hpp"

namespace posenc {

/// \brief A caller's cos/sin cache [max_position, rotary_dim], row p = cat(cos, sin) of position
/// p with the attention factor folded in, as a view of its memory. float is the fast path
/// (rows are read in place); double, Eigen::half and Eigen::bfloat16 rows (vLLM's
/// `cos_sin_cache.to(dtype)`, fill_rope_cos_sin_cache<T>) are widened once per token, so a
/// bfloat16 cache gives exactly its bfloat16-rounded cos / sin, as vLLM's kernels read them.
/// Converts implicitly from a ConstTensorView, TensorView or Tensor of those types.
class CosSinCacheView {
 public:
  enum class Element : std::uint8_t { kFloat, kDouble, kHalf, kBFloat16 };

  template <typename C>
  CosSinCacheView(ConstTensorView<C, 2> cache)  // NOLINT: implicit by design
      : data_(cache.data()), rows_(cache.dimension(0)), cols_(cache.dimension(1)),
        element_(element_of<C>()) {}
  template <typename C>
  CosSinCacheView(TensorView<C, 2> cache)  // NOLINT
      : CosSinCacheView(ConstTensorView<C, 2>(cache.data(), cache.dimension(0),
                                              cache.dimension(1))) {}
  template <typename C>
  CosSinCacheView(const Tensor<C, 2>& cache)  // NOLINT
      : CosSinCacheView(ConstTensorView<C, 2>(cache.data(), cache.dimension(0),
                                              cache.dimension(1))) {}

  const void* data() const noexcept { return data_; }
  Eigen::Index rows() const noexcept { return rows_; }          ///< max_position
  Eigen::Index rotary_dim() const noexcept { return cols_; }
  Element element() const noexcept { return element_; }

 private:
  template <typename C>
  static constexpr Element element_of() {
    static_assert(std::is_same_v<C, float> || std::is_same_v<C, double> ||
                      std::is_same_v<C, Eigen::half> || std::is_same_v<C, Eigen::bfloat16>,
                  "posenc: a cos/sin cache holds float, double, Eigen::half or Eigen::bfloat16");
    if constexpr (std::is_same_v<C, float>) return Element::kFloat;
    if constexpr (std::is_same_v<C, double>) return Element::kDouble;
    if constexpr (std::is_same_v<C, Eigen::half>) return Element::kHalf;
    return Element::kBFloat16;
  }

  const void* data_;
  Eigen::Index rows_, cols_;
  Element element_;
};

/// Which rotation an apply call performs (a = attention_factor, R(p) = the rotation by p w).
enum class RopeDirection : std::uint8_t {
  kForward = 0,    ///< y = a R(p) x
  kInverse = 1,    ///< y = R(-p) x / a: exact inverse of kForward (undo, re-rotate cached keys)
  kTranspose = 2,  ///< y = a R(-p) x: the transpose of kForward (backward pass, dL/dx)
};

constexpr std::string_view to_string(RopeDirection direction) noexcept {
  switch (direction) {
    case RopeDirection::kForward: return "forward";
    case RopeDirection::kInverse: return "inverse";
    case RopeDirection::kTranspose: return "transpose";
  }
  return "unknown";
}

namespace detail {
using RopeRangeFn = void (*)(void* context, Eigen::Index first, Eigen::Index last);
using RopeParallelForFn = void (*)(const void* device, Eigen::Index n, double bytes_per_unit,
                                   RopeRangeFn fn, void* context);

/// Instantiated in the caller's translation unit, where Device is complete (an
/// Eigen::ThreadPoolDevice needs EIGEN_USE_THREADS): rope.hpp itself never names the type, so
/// translation units with and without EIGEN_USE_THREADS see one and the same rope.hpp.
template <typename Device>
void rope_device_parallel_for(const void* device, Eigen::Index n, double bytes_per_unit,
                              RopeRangeFn fn, void* context) {
  const Device& d = *static_cast<const Device*>(device);
  if (d.numThreads() <= 1 || n <= 1) {
    fn(context, 0, n);
    return;
  }
  d.parallelFor(n, Eigen::TensorOpCost(bytes_per_unit, bytes_per_unit, bytes_per_unit),
                [fn, context](Eigen::Index first, Eigen::Index last) { fn(context, first, last); });
}
}  // namespace detail

/// Optional knobs of every apply call.
struct RopeApplyOptions {
  RopeDirection direction = RopeDirection::kForward;

  /// \brief Splits tokens across the threads of a caller's Eigen::ThreadPoolDevice (or any
  /// type with Eigen's `numThreads()` and `parallelFor(n, TensorOpCost, f)`). The device must
  /// outlive the calls. Without one (default) the call runs on the calling thread and never
  /// allocates; Eigen's parallelFor allocates its tasks.
  template <typename Device>
  RopeApplyOptions& set_device(const Device& pool_device) {
    device = &pool_device;
    parallel_for = &detail::rope_device_parallel_for<Device>;
    return *this;
  }

  const void* device = nullptr;                       ///< set by set_device
  detail::RopeParallelForFn parallel_for = nullptr;  ///< set by set_device
};

/// A strided view of head vectors: element (b, s, h, i) lives at
/// data[b * batch_stride + s * seq_stride + h * head_stride + i] (head_dim contiguous).
/// T may be const for read-only sources.
template <typename T>
struct RopeHeads {
  T* data = nullptr;
  Eigen::Index batch = 0, seq = 0, heads = 0, head_dim = 0;
  Eigen::Index batch_stride = 0, seq_stride = 0, head_stride = 0;  ///< in elements
};

/// \brief View of a rank-4 tensor in any head layout.
/// x: [batch, seq, heads, head_dim] (kBSHD), [batch, heads, seq, head_dim] (kBHSD) or
/// [seq, batch, heads, head_dim] (kSBHD); position ids stay [batch, seq].
/// Throws std::invalid_argument for a layout value outside HeadLayout.
template <typename T>
RopeHeads<T> rope_heads(TensorView<T, 4> x, HeadLayout layout = HeadLayout::kBSHD) {
  detail::require(layout == HeadLayout::kBSHD || layout == HeadLayout::kBHSD ||
                      layout == HeadLayout::kSBHD,
                  "rope_heads", "head_layout = ", static_cast<int>(layout),
                  " is not a HeadLayout");
  RopeHeads<T> v;
  v.data = x.data();
  v.head_dim = x.dimension(3);
  v.head_stride = v.head_dim;
  switch (layout) {
    case HeadLayout::kBHSD:
      v.batch = x.dimension(0);
      v.heads = x.dimension(1);
      v.seq = x.dimension(2);
      v.seq_stride = v.head_dim;
      v.head_stride = v.seq * v.head_dim;
      v.batch_stride = v.heads * v.seq * v.head_dim;
      break;
    case HeadLayout::kSBHD:
      v.seq = x.dimension(0);
      v.batch = x.dimension(1);
      v.heads = x.dimension(2);
      v.batch_stride = v.heads * v.head_dim;
      v.seq_stride = v.batch * v.batch_stride;
      break;
    case HeadLayout::kBSHD:
      v.batch = x.dimension(0);
      v.seq = x.dimension(1);
      v.heads = x.dimension(2);
      v.seq_stride = v.heads * v.head_dim;
      v.batch_stride = v.seq * v.seq_stride;
      break;
  }
  return v;
}

/// Read-only overload (source of an out-of-place call).
template <typename T>
RopeHeads<const T> rope_heads(ConstTensorView<T, 4> x, HeadLayout layout = HeadLayout::kBSHD) {
  const auto w = rope_heads(TensorView<T, 4>(const_cast<T*>(x.data()), x.dimension(0),
                                             x.dimension(1), x.dimension(2), x.dimension(3)),
                            layout);
  return RopeHeads<const T>{w.data,         w.batch,        w.seq,       w.heads, w.head_dim,
                            w.batch_stride, w.seq_stride, w.head_stride};
}

/// \brief Packed tokens of a varlen batch (vLLM / FlashInfer "NHD" with flattened tokens).
/// x: [tokens, heads, head_dim]; seen as batch = 1, seq = tokens.
template <typename T>
RopeHeads<T> rope_heads_packed(TensorView<T, 3> x) {
  RopeHeads<T> v;
  v.data = x.data();
  v.batch = 1;
  v.seq = x.dimension(0);
  v.heads = x.dimension(1);
  v.head_dim = x.dimension(2);
  v.head_stride = v.head_dim;
  v.seq_stride = v.heads * v.head_dim;
  v.batch_stride = v.seq * v.seq_stride;
  return v;
}

/// \brief Packed tokens with explicit strides, e.g. the Q or K part of a fused QKV buffer
/// [tokens, (Hq + 2 Hk) * D]: q = rope_heads_strided(qkv, T, Hq, D, (Hq + 2 Hk) * D, D),
/// k = rope_heads_strided(qkv + Hq * D, T, Hk, D, (Hq + 2 Hk) * D, D).
template <typename T>
RopeHeads<T> rope_heads_strided(T* data, Eigen::Index tokens, Eigen::Index heads,
                                Eigen::Index head_dim, Eigen::Index token_stride,
                                Eigen::Index head_stride) {
  RopeHeads<T> v;
  v.data = data;
  v.batch = 1;
  v.seq = tokens;
  v.heads = heads;
  v.head_dim = head_dim;
  v.seq_stride = token_stride;
  v.head_stride = head_stride;
  v.batch_stride = tokens * token_stride;
  return v;
}

/// Where each (b, s) token sits: position(b, s) = id(b, s) + offset + batch_offsets[b], with
/// id(b, s) = ids[b * seq + s] when ids are given and s otherwise (contiguous prefill / decode).
struct RopePositions {
  const std::int64_t* ids = nullptr;            ///< [batch, seq] row-major, or nullptr
  const std::int64_t* batch_offsets = nullptr;  ///< [batch] per-sequence start, or nullptr
  Eigen::Index batch = 0, seq = 0;
  std::int64_t offset = 0;  ///< added to every position (decode: number of cached tokens)

  /// position_ids: [batch, seq] (HF / vLLM int64), plus an optional common offset.
  /// Throws std::invalid_argument for a non-empty view over null data (null ids mean
  /// "contiguous" here, so it would rotate at 0, 1, 2, ... without a word).
  static RopePositions from_ids(PositionIdsView position_ids, std::int64_t offset = 0) {
    detail::require(position_ids.data() != nullptr || position_ids.size() == 0,
                    "RopePositions::from_ids", "position_ids data is null");
    RopePositions p;
    p.ids = position_ids.data();
    p.batch = position_ids.dimension(0);
    p.seq = position_ids.dimension(1);
    p.offset = offset;
    return p;
  }
  /// Per-token positions of a packed batch: [tokens] -> batch = 1, seq = tokens.
  static RopePositions from_token_ids(ConstTensorView<std::int64_t, 1> positions,
                                      std::int64_t offset = 0) {
    detail::require(positions.data() != nullptr || positions.size() == 0,
                    "RopePositions::from_token_ids", "positions data is null");
    RopePositions p;
    p.ids = positions.data();
    p.batch = 1;
    p.seq = positions.dimension(0);
    p.offset = offset;
    return p;
  }
  /// start, start + 1, ..., start + seq - 1 for every sequence (prefill: 0; decode: t).
  static RopePositions contiguous(Eigen::Index batch, Eigen::Index seq, std::int64_t start = 0) {
    RopePositions p;
    p.batch = batch;
    p.seq = seq;
    p.offset = start;
    return p;
  }
  /// starts[b], starts[b] + 1, ...: a batch of sequences with different cache lengths.
  static RopePositions contiguous_from(ConstTensorView<std::int64_t, 1> starts, Eigen::Index seq) {
    detail::require(starts.data() != nullptr || starts.size() == 0,
                    "RopePositions::contiguous_from", "starts data is null");
    RopePositions p;
    p.batch_offsets = starts.data();
    p.batch = starts.dimension(0);
    p.seq = seq;
    return p;
  }

  std::int64_t at(Eigen::Index b, Eigen::Index s) const noexcept {
    return (ids != nullptr ? ids[b * seq + s] : static_cast<std::int64_t>(s)) + offset +
           (batch_offsets != nullptr ? batch_offsets[b] : 0);
  }
};

/// Largest position the kernels accept: double counts integers exactly up to 2^53.
inline constexpr std::int64_t kMaxRopePosition = std::int64_t{1} << 53;

namespace detail {

/// Contiguous positions advance by cos/sin(a + w) = recurrence in double; every kRopeReanchor
/// steps the exact values are recomputed, which keeps the drift below ~1e-15.
inline constexpr std::int64_t kRopeReanchor = 32;

/// One rotated tensor of a call: source and destination views (the same for in-place).
template <typename T>
struct RopeTarget {
  RopeHeads<const T> src;
  RopeHeads<T> dst;
};

template <typename T>
RopeHeads<const T> as_const(const RopeHeads<T>& v) {
  return RopeHeads<const T>{v.data,         v.batch,      v.seq,        v.heads, v.head_dim,
                            v.batch_stride, v.seq_stride, v.head_stride};
}

/// The messages of validate_heads (out of line: reached only when a check fails).
template <typename T>
[[gnu::noinline, gnu::cold]] void report_heads(std::string_view fn, std::string_view name,
                                               const RopeHeads<T>& v, Eigen::Index rotary_dim,
                                               Eigen::Index rotary_offset) {
  require(v.batch >= 0 && v.seq >= 0 && v.heads >= 0 && v.head_dim > 0, fn, name,
          " shape [batch ", v.batch, ", seq ", v.seq, ", heads ", v.heads, ", head_dim ",
          v.head_dim, "] must have head_dim > 0 and no negative extent");
  require(v.batch_stride >= 0 && v.seq_stride >= 0 && v.head_stride >= 0, fn, name,
          " strides (", v.batch_stride, ", ", v.seq_stride, ", ", v.head_stride,
          ") must be >= 0");
  require(v.data != nullptr || v.batch == 0 || v.seq == 0 || v.heads == 0, fn, name,
          " data is null");
  require(rotary_offset <= v.head_dim - rotary_dim, fn, "rotary_offset + rotary_dim = ",
          rotary_offset, " + ", rotary_dim, " must be <= ", name, " head_dim (", v.head_dim, ")");
}

/// The whole check branch-free (an OR of extents and strides is >= 0 only if each is), the
/// messages only on failure. rotary_offset (>= 0, validated with the plan) is compared against
/// head_dim - rotary_dim: the sum overflows for an offset near INT64_MAX (rotary_dim <= 1024).
template <typename T>
inline void validate_heads(std::string_view fn, std::string_view name, const RopeHeads<T>& v,
                           Eigen::Index rotary_dim, Eigen::Index rotary_offset) {
  const bool non_negative =
      (v.batch | v.seq | v.heads | v.batch_stride | v.seq_stride | v.head_stride) >= 0;
  // No product of the extents: 2^32 x 2^32 overflowed. Null data only for an empty view.
  const bool empty = (v.batch == 0) | (v.seq == 0) | (v.heads == 0);
  if (!(non_negative & (v.head_dim > 0) & ((v.data != nullptr) | empty) &
        (rotary_offset <= v.head_dim - rotary_dim))) {
    report_heads(fn, name, v, rotary_dim, rotary_offset);
  }
}

inline void validate_positions(std::string_view fn, const RopePositions& pos, Eigen::Index batch,
                               Eigen::Index seq, std::int64_t limit, bool limit_is_cache) {
  // Fast path as in validate_heads: ids and offsets in [0, 2^53] and every position below
  // limit, compared unsigned (a negative value is then too large); the loop below names the
  // culprit. The sums cannot wrap while ok holds.
  if (pos.batch == batch && pos.seq == seq && pos.offset >= 0 && pos.offset <= kMaxRopePosition) {
    using U = std::uint64_t;
    const U max_value = static_cast<U>(kMaxRopePosition), end = static_cast<U>(limit);
    bool ok = true;
    for (Eigen::Index b = 0; b < batch && seq > 0; ++b) {
      const U bo = pos.batch_offsets != nullptr ? static_cast<U>(pos.batch_offsets[b]) : 0;
      const U base = bo + static_cast<U>(pos.offset);
      ok &= bo <= max_value;
      if (pos.ids == nullptr) {
        ok &= base + static_cast<U>(seq - 1) < end;
      } else {
        const std::int64_t* ids = pos.ids + b * seq;
        for (Eigen::Index s = 0; s < seq; ++s) {
          const U id = static_cast<U>(ids[s]);
          ok &= (id <= max_value) & (base + id < end);
        }
      }
    }
    if (ok) return;
  }
  require(pos.batch == batch && pos.seq == seq, fn, "position_ids shape [", pos.batch, ", ",
          pos.seq, "] must equal the tensors' [batch, seq] = [", batch, ", ", seq, "]");
  require(pos.offset >= 0 && pos.offset <= kMaxRopePosition, fn, "position offset = ",
          pos.offset, " must be in [0, 2^53]");
  for (Eigen::Index b = 0; b < batch; ++b) {
    const std::int64_t bo = pos.batch_offsets != nullptr ? pos.batch_offsets[b] : 0;
    require(bo >= 0 && bo <= kMaxRopePosition, fn, "batch_offsets[", b, "] = ", bo,
            " must be in [0, 2^53]");
    for (Eigen::Index s = 0; s < seq; ++s) {
      const std::int64_t id = pos.ids != nullptr ? pos.ids[b * seq + s] : s;
      require(id >= 0 && id <= kMaxRopePosition, fn, "position_ids[", b, ", ", s, "] = ", id,
              " must be in [0, 2^53]");
      const std::int64_t p = id + pos.offset + bo;  // < 3 * 2^53: no overflow
      if (p >= limit) {
        if (limit_is_cache) {
          throw_out_of_range(fn, "position ", p, " of token [", b, ", ", s,
                             "] is outside the cos/sin cache of max_position = ", limit,
                             " rows");
        }
        throw_invalid_argument(fn, "position ", p, " of token [", b, ", ", s,
                               "] (position_ids + offset) must be <= 2^53");
      }
    }
  }
}

inline void validate_direction(std::string_view fn, RopeDirection d) {
  require(d == RopeDirection::kForward || d == RopeDirection::kInverse ||
              d == RopeDirection::kTranspose,
          fn, "direction = ", static_cast<int>(d), " is not a RopeDirection");
}

inline void validate_layout(std::string_view fn, RopeLayout layout) {
  require(layout == RopeLayout::kInterleaved || layout == RopeLayout::kHalfSplit, fn,
          "layout = ", static_cast<int>(layout), " is not a RopeLayout");
}

/// Runtime layout -> compile-time constant: f(std::integral_constant<RopeLayout, L>{}), so the
/// kernels branch on the layout once per call, not per element (FlashInfer's
/// DISPATCH_INTERLEAVE, without the macro).
///
/// Forced inline, as rope_parallel_for: out of line (GCC's choice in a file that calls several
/// RoPE APIs, such as the benchmark), it copied the caller's closure (7 references, stored one
/// by one) with 32- and 16-byte loads, which cannot be forwarded from those stores and waited
/// for them (63 % of its samples on one load, `perf record`).
/// Zen 5, one-token calls of 32 heads x 128, A/B (4 rounds, 16 calls a timing): float from the
/// cos / sin cache, half-split 1.47-1.57 -> 1.38-1.42 us, interleaved 1.63-1.66 -> 1.50-1.59
/// us; on the fly and bf16 3-10 % faster; 16 tokens and more unchanged.
template <typename F>
EIGEN_ALWAYS_INLINE void with_rope_layout(RopeLayout layout, F&& f) {
  if (layout == RopeLayout::kInterleaved) {
    f(std::integral_constant<RopeLayout, RopeLayout::kInterleaved>{});
  } else {
    f(std::integral_constant<RopeLayout, RopeLayout::kHalfSplit>{});
  }
}

/// Rotary width of a plan; rotary_dim == 0 means 2 * inv_freq.size().
inline Eigen::Index validate_freqs(std::string_view fn, const RopeFrequencies& f) {
  const auto n = static_cast<Eigen::Index>(f.inv_freq.size());
  const Eigen::Index rd = f.rotary_dim == 0 ? 2 * n : f.rotary_dim;
  require(rd > 0 && rd % 2 == 0 && rd <= kMaxRotaryDim, fn, "rotary_dim = ", rd,
          " must be even and in [2, ", kMaxRotaryDim, "]");
  require(n == rd / 2, fn, "inv_freq has ", n, " entries, must have rotary_dim / 2 = ", rd / 2);
  require(f.rotary_offset >= 0, fn, "rotary_offset = ", f.rotary_offset, " must be >= 0");
  // Every call checks the plan: one pass over Eigen's packets (vectorised at -O2 too, see
  // RopeTrigPacket), and the loop that names the entry only on failure. A compare-and-branch
  // per entry cost ~15% of a one-token call; the scalar pass GCC 12 left at -O2 ~13 %.
  // Also at most DBL_MAX / 2^53: position (<= 2^53) times inv_freq must stay finite, or
  // sin / cos of the angle is NaN. 0 <= w <= that bound is false for NaN, true for -0.
  constexpr double kMaxInvFreq = std::numeric_limits<double>::max() / 0x1p53;
  bool valid = true;
  {
    namespace ei = Eigen::internal;
    using P = RopeTrigPacket;
    const double* w = f.inv_freq.data();
    const P zero = ei::pset1<P>(0.0), top = ei::pset1<P>(kMaxInvFreq);
    P bad = zero;
    Eigen::Index j = 0;
    for (; j + kRopeTrigLanes <= n; j += kRopeTrigLanes) {
      const P v = ei::ploadu<P>(w + j);
      bad = ei::por(bad, ei::pandnot(ei::ptrue(v),
                                     ei::pand(ei::pcmp_le(zero, v), ei::pcmp_le(v, top))));
    }
    valid = !ei::predux_any(bad);
    for (; j < n; ++j) valid = valid && w[j] >= 0.0 && w[j] <= kMaxInvFreq;
  }
  for (Eigen::Index j = 0; !valid && j < n; ++j) {
    const double w = f.inv_freq[static_cast<std::size_t>(j)];
    require(std::isfinite(w) && w >= 0.0, fn, "inv_freq[", j, "] = ", w,
            " must be finite and >= 0");
    require(w <= kMaxInvFreq, fn, "inv_freq[", j, "] = ", w, " must be <= DBL_MAX / 2^53 = ",
            kMaxInvFreq, " (its angle at position 2^53 would overflow)");
  }
  require(std::isfinite(f.attention_factor) && f.attention_factor > 0.0, fn,
          "attention_factor = ", f.attention_factor, " must be finite and > 0");
  return rd;
}

/// Writes one token's cos / sin times (cm, sm) in the caller's compute type: c[j], s[j] per
/// pair, the form every layout's kernel reads.
template <typename C, typename Src>
inline void emit_cos_sin(const Src* c, const Src* s, double cm, double sm, Eigen::Index half,
                         C* out_c, C* out_s) {
  Eigen::Index j = 0;
#ifdef POSENC_ROPE_SIMD
  if constexpr (std::is_same_v<Src, double> && std::is_same_v<C, float>) {
    // Written out for the reason given at RopeTrigPacket; vcvtpd2ps rounds to nearest, as the
    // cast below does.
    const __m256d vcm = _mm256_set1_pd(cm), vsm = _mm256_set1_pd(sm);
    for (; j + 4 <= half; j += 4) {
      _mm_storeu_ps(out_c + j, _mm256_cvtpd_ps(_mm256_mul_pd(vcm, _mm256_loadu_pd(c + j))));
      _mm_storeu_ps(out_s + j, _mm256_cvtpd_ps(_mm256_mul_pd(vsm, _mm256_loadu_pd(s + j))));
    }
  }
#endif
  for (; j < half; ++j) {
    out_c[j] = static_cast<C>(cm * static_cast<double>(c[j]));
    out_s[j] = static_cast<C>(sm * static_cast<double>(s[j]));
  }
}

/// cos(p w_j), sin(p w_j) of the current token in double: exact anchors (fast reduced sin/cos),
/// the angle-addition recurrence between contiguous positions. kFullDouble: anchors to full
/// double precision (double storage); otherwise to < 4e-13, for values that feed float math.
template <bool kFullDouble>
class RopeTrig {
 public:
  RopeTrig(const double* inv_freq, Eigen::Index half) : inv_(inv_freq), half_(half) {}

  /// Moves to position pos; false when it already is there.
  bool at(std::int64_t pos) {
    if (pos == previous_) return false;
    if (pos == previous_ + 1 && since_anchor_ < kRopeReanchor) {
      if (!have_step_) {
        rope_sincos(inv_, step_s_, step_c_, half_);  // full precision: the steps compound
        have_step_ = true;
      }
      step();
      ++since_anchor_;
    } else {
      if (anchor_angles(static_cast<double>(pos))) {
        // The short polynomial's < 4e-13 error is carried, not amplified, by the rotation
        // recurrence that starts from it.
        rope_sincos<kFullDouble>(angle_, s_, c_, half_);
      } else {
        for (Eigen::Index j = 0; j < half_; ++j) {
          s_[j] = std::sin(angle_[j]);
          c_[j] = std::cos(angle_[j]);
        }
      }
      since_anchor_ = 0;
    }
    previous_ = pos;
    return true;
  }
  const double* cos() const noexcept { return c_; }
  const double* sin() const noexcept { return s_; }

 private:
  static constexpr Eigen::Index kHalfMax = kMaxRotaryDim / 2;

  // The loops below are written over Eigen's packets for the reason given at RopeTrigPacket.

  /// (c, s) turned by the step angles: c' = c cos w - s sin w, s' = s cos w + c sin w.
  void step() {
    namespace ei = Eigen::internal;
    using P = RopeTrigPacket;
    Eigen::Index j = 0;
    for (; j + kRopeTrigLanes <= half_; j += kRopeTrigLanes) {
      const P c = ei::pload<P>(c_ + j), s = ei::pload<P>(s_ + j);
      const P sc = ei::pload<P>(step_c_ + j), ss = ei::pload<P>(step_s_ + j);
      ei::pstore(c_ + j, ei::pmadd(c, sc, ei::pnegate(ei::pmul(s, ss))));
      ei::pstore(s_ + j, ei::pmadd(s, sc, ei::pmul(c, ss)));
    }
    for (; j < half_; ++j) {
      const double cn = c_[j] * step_c_[j] - s_[j] * step_s_[j];
      s_[j] = s_[j] * step_c_[j] + c_[j] * step_s_[j];
      c_[j] = cn;
    }
  }

  /// angle_ = p inv_; whether every |angle| is at most kRopeFastTrigLimit (NaN and inf fail).
  bool anchor_angles(double p) {
    namespace ei = Eigen::internal;
    using P = RopeTrigPacket;
    const P pp = ei::pset1<P>(p), limit = ei::pset1<P>(kRopeFastTrigLimit);
    P slow = ei::pzero(pp);
    Eigen::Index j = 0;
    for (; j + kRopeTrigLanes <= half_; j += kRopeTrigLanes) {
      const P a = ei::pmul(pp, ei::ploadu<P>(inv_ + j));
      ei::pstore(angle_ + j, a);
      slow = ei::por(slow, ei::pandnot(ei::ptrue(a), ei::pcmp_le(ei::pabs(a), limit)));
    }
    bool fast = !ei::predux_any(slow);
    for (; j < half_; ++j) {
      angle_[j] = p * inv_[j];
      fast = fast && (double_bits(angle_[j]) & 0x7fffffffffffffffull) <=
                         double_bits(kRopeFastTrigLimit);
    }
    return fast;
  }

  const double* inv_;
  Eigen::Index half_;
  std::int64_t previous_ = -2;
  std::int64_t since_anchor_ = 0;
  bool have_step_ = false;
  alignas(64) double angle_[kHalfMax];
  alignas(64) double c_[kHalfMax];
  alignas(64) double s_[kHalfMax];
  alignas(64) double step_c_[kHalfMax];
  alignas(64) double step_s_[kHalfMax];
};

/// Per-token cos/sin from the plan, times (cm, sm), per pair (emit_cos_sin). Lives on the
/// worker's stack.
template <typename C>
class RopeAnglesOnTheFly {
 public:
  RopeAnglesOnTheFly(const double* inv_freq, Eigen::Index half, double cm, double sm)
      : trig_(inv_freq, half), half_(half), cm_(cm), sm_(sm) {}

  void at(std::int64_t pos) {
    if (trig_.at(pos)) emit_cos_sin(trig_.cos(), trig_.sin(), cm_, sm_, half_, out_c_, out_s_);
  }
  const C* cos() const noexcept { return out_c_; }
  const C* sin() const noexcept { return out_s_; }

 private:
  RopeTrig<std::is_same_v<C, double>> trig_;
  Eigen::Index half_;
  double cm_, sm_;
  alignas(64) C out_c_[kMaxRotaryDim / 2];
  alignas(64) C out_s_[kMaxRotaryDim / 2];
};

/// One token's cos / sin for the kernels from cached rows (attention factor a folded in; float
/// rows, or double ones widened from another cache type): the rows themselves (float, forward),
/// or a copy turned for the direction — transpose negates sin, inverse divides by
/// |row pair|^2 = a^2, so it needs no separate factor.
template <typename C>
struct RopeCachedTurn {
  const C* cos = nullptr;
  const C* sin = nullptr;

  template <typename Src>
  void set(const Src* c_row, const Src* s_row, Eigen::Index half, RopeDirection dir) {
    if constexpr (std::is_same_v<C, Src>) {
      if (dir == RopeDirection::kForward) {
        cos = c_row;
        sin = s_row;
        return;
      }
    }
    if (dir == RopeDirection::kInverse) {
      for (Eigen::Index j = 0; j < half; ++j) {
        const double c = static_cast<double>(c_row[j]), s = static_cast<double>(s_row[j]);
        const double inv_a2 = 1.0 / (c * c + s * s);
        tmp_c_[j] = c * inv_a2;
        tmp_s_[j] = -s * inv_a2;
      }
      emit_cos_sin(tmp_c_, tmp_s_, 1.0, 1.0, half, buf_c_, buf_s_);
    } else {
      emit_cos_sin(c_row, s_row, 1.0, dir == RopeDirection::kForward ? 1.0 : -1.0, half, buf_c_,
                   buf_s_);
    }
    cos = buf_c_;
    sin = buf_s_;
  }

 private:
  alignas(64) double tmp_c_[kMaxRotaryDim / 2];
  alignas(64) double tmp_s_[kMaxRotaryDim / 2];
  alignas(64) C buf_c_[kMaxRotaryDim / 2];
  alignas(64) C buf_s_[kMaxRotaryDim / 2];
};

/// Calls f with the cache's data as a typed pointer (const float*, const double*, ...).
template <typename F>
decltype(auto) with_cache_rows(const CosSinCacheView& cache, F&& f) {
  switch (cache.element()) {
    case CosSinCacheView::Element::kDouble: return f(static_cast<const double*>(cache.data()));
    case CosSinCacheView::Element::kHalf: return f(static_cast<const Eigen::half*>(cache.data()));
    case CosSinCacheView::Element::kBFloat16:
      return f(static_cast<const Eigen::bfloat16*>(cache.data()));
    case CosSinCacheView::Element::kFloat: break;
  }
  return f(static_cast<const float*>(cache.data()));
}

/// Row `pos` of a cos/sin cache widened to double (exact for every cache type).
inline void widen_cache_row(const CosSinCacheView& cache, std::int64_t pos, double* out) {
  with_cache_rows(cache, [&](const auto* base) {
    const auto* row = base + pos * cache.rotary_dim();
    for (Eigen::Index j = 0; j < cache.rotary_dim(); ++j) out[j] = to_double(row[j]);
  });
}

/// Per-token cos/sin from row `position` of a cat(cos, sin) cache: float rows in place, others
/// widened to double first.
template <typename C>
class RopeAnglesFromCache {
 public:
  RopeAnglesFromCache(const CosSinCacheView& cache, RopeDirection dir)
      : cache_(cache), rd_(cache.rotary_dim()), dir_(dir) {}

  EIGEN_ALWAYS_INLINE void at(std::int64_t pos) {
    if (pos == previous_) return;
    previous_ = pos;
    if (EIGEN_PREDICT_TRUE(cache_.element() == CosSinCacheView::Element::kFloat)) {
      const float* row = static_cast<const float*>(cache_.data()) + pos * rd_;
      turn_.set(row, row + rd_ / 2, rd_ / 2, dir_);
    } else {
      widen_and_set(pos);
    }
  }
  const C* cos() const noexcept { return turn_.cos; }
  const C* sin() const noexcept { return turn_.sin; }

 private:
  // Out of line: inlined next to the float path, the widening loops made the token loop's
  // per-token call heavier (f32 cache T = 512: 89 -> 91 us).
  EIGEN_DONT_INLINE void widen_and_set(std::int64_t pos) {
    widen_cache_row(cache_, pos, wide_);
    turn_.set(wide_, wide_ + rd_ / 2, rd_ / 2, dir_);
  }

  CosSinCacheView cache_;
  Eigen::Index rd_;
  RopeDirection dir_;
  std::int64_t previous_ = -1;
  RopeCachedTurn<C> turn_;
  alignas(64) double wide_[kMaxRotaryDim];  // the widened row of a non-float cache
};

/// How many leading pairs of a token turn: trailing blocks of 32 pairs with cos 1 and sin 0
/// exactly (angle 0 with attention factor 1: the still pairs of proportional RoPE, Gemma-4's
/// 192 of 256 on its global heads, and every pair at position 0) are left untouched, which is
/// the rotation by 0 except that it keeps a zero's sign and does not spread a partner's NaN.
/// Whole blocks, so that the vector kernels keep their widths; one compare when the last pair
/// turns (every other plan).
template <typename C>
inline Eigen::Index rope_turning_pairs(const C* c, const C* s, Eigen::Index half) {
  constexpr Eigen::Index kBlock = 32;
  if (half == 0 || c[half - 1] != C(1) || s[half - 1] != C(0)) return half;
  // On the bits, an OR over the block (vectorised): cos exactly 1, sin +0 or -0. Compares of
  // the values ANDed into a bool were not vectorised: 250 ns a token for Gemma-4's 192 still
  // pairs, here 9-13 ns (Zen 5).
  using U = std::conditional_t<sizeof(C) == 8, std::uint64_t, std::uint32_t>;
  static_assert(sizeof(U) == sizeof(C));
  const C one_value(1);
  U one;
  std::memcpy(&one, &one_value, sizeof one);
  const auto turns = [&](Eigen::Index from, Eigen::Index to) {
    U turned = 0;
    for (Eigen::Index j = from; j < to; ++j) {
      U cb, sb;
      std::memcpy(&cb, c + j, sizeof cb);
      std::memcpy(&sb, s + j, sizeof sb);
      turned |= (cb ^ one) | static_cast<U>(sb << 1);
    }
    return turned != 0;
  };
  Eigen::Index n = half;
  while (n >= kBlock && !turns(n - kBlock, n)) n -= kBlock;
  return n > 0 && n < kBlock && !turns(0, n) ? 0 : n;  // the first, partial block
}

/// Rotates the slice [offset, offset + rd) of `heads` head vectors of one token from src to dst
/// (the same pointers and strides for in-place) and, out of place, copies the pass-through
/// dims. Only pairs [0, pairs) turn (rope_turning_pairs); the rest are copied or left alone.
/// Every per-call decision is taken once here, outside the head loop, which then runs a
/// straight vector loop per head.
template <typename T, RopeLayout L>
inline void rope_rotate_heads(const T* src, T* dst, Eigen::Index heads, Eigen::Index src_hs,
                              Eigen::Index dst_hs, Eigen::Index head_dim, Eigen::Index offset,
                              Eigen::Index rd, Eigen::Index pairs, const compute_t<T>* c,
                              const compute_t<T>* s, compute_t<T>* scratch,
                              [[maybe_unused]] RopeSource source) {
  using C = compute_t<T>;
  const Eigen::Index half = rd / 2;
  const bool in_place = src == dst && src_hs == dst_hs;
  if (!in_place) {
    // Pass-through dims, and the still pairs' dims: [2 pairs, rd) interleaved, [pairs, half)
    // and [half + pairs, rd) half-split.
    const Eigen::Index turned = L == RopeLayout::kInterleaved ? 2 * pairs : half + pairs;
    for (Eigen::Index h = 0; h < heads; ++h) {
      const T* sr = src + h * src_hs;
      T* dr = dst + h * dst_hs;
      std::copy(sr, sr + offset, dr);
      if (L == RopeLayout::kHalfSplit) {
        std::copy(sr + offset + pairs, sr + offset + half, dr + offset + pairs);
      }
      std::copy(sr + offset + turned, sr + head_dim, dr + offset + turned);
    }
  }
  if (pairs == 0) return;
  // Software prefetch requests whole rows ahead; with still pairs left out they would pull the
  // lines nobody touches (f32 Gemma-4 global heads from DRAM: no faster than rotating them).
  if (pairs != half && source == RopeSource::kMemory) source = RopeSource::kL3;
  src += offset;
  dst += offset;
#ifdef POSENC_ROPE_SIMD
  if constexpr (std::is_same_v<C, float>) {
    if constexpr (L == RopeLayout::kHalfSplit) {
      if (pairs % 8 == 0) {
        rope_simd_half_split<T>(src, dst, heads, src_hs, dst_hs, c, s, half, pairs, source);
        return;
      }
    } else {
      if ((2 * pairs) % 8 == 0) {
        rope_simd_interleaved<T>(src, dst, heads, src_hs, dst_hs, c, s, 2 * pairs, source);
        return;
      }
    }
  }
#endif
  for (Eigen::Index h = 0; h < heads; ++h) {
    const T* sr = src + h * src_hs;
    T* dr = dst + h * dst_hs;
    if constexpr (std::is_same_v<T, C>) {
      if (in_place) {
        if constexpr (L == RopeLayout::kHalfSplit) {
          rope_rotate_half_split<C>(dr, c, s, half, pairs);
        } else {
          rope_rotate_interleaved<C>(dr, c, s, 2 * pairs);
        }
      } else {
        if constexpr (L == RopeLayout::kHalfSplit) {
          rope_rotate_half_split<C>(sr, dr, c, s, half, pairs);
        } else {
          rope_rotate_interleaved<C>(sr, dr, c, s, 2 * pairs);
        }
      }
    } else {
      load_row<T>(sr, scratch, rd);
      if constexpr (L == RopeLayout::kHalfSplit) {
        rope_rotate_half_split<C>(scratch, c, s, half, pairs);
      } else {
        rope_rotate_interleaved<C>(scratch, c, s, 2 * pairs);
      }
      store_row<T>(scratch, dr, rd);
    }
  }
}

/// Tokens u in [u0, u1) of the flattened (batch, seq) grid, every head of every target.
/// Positions: anything with `seq` and `at(b, s)`, whose result Angles::at takes (one position
/// for RoPE, three streams for M-RoPE).
template <typename T, RopeLayout L, typename Angles, typename Positions>
void rope_run_tokens(const RopeTarget<T>* targets, int num_targets, const Positions& pos,
                     Eigen::Index u0, Eigen::Index u1, Angles& angles, Eigen::Index rd,
                     Eigen::Index offset) {
  alignas(64) compute_t<T> scratch[std::is_same_v<T, compute_t<T>> ? 1 : kMaxRotaryDim];
  const Eigen::Index seq = pos.seq;
  double token_bytes = 0.0;
  for (int t = 0; t < num_targets; ++t) {
    const bool in_place = targets[t].src.data == targets[t].dst.data;
    token_bytes += (in_place ? 1.0 : 2.0) *
                   static_cast<double>(targets[t].dst.heads * rd * Eigen::Index{sizeof(T)});
  }
  const RopeSource source = rope_source(token_bytes * static_cast<double>(u1 - u0),
                                        token_bytes * static_cast<double>(pos.batch * seq));
  // Views whose tokens sit batch row by batch row (SBHD: seq_stride = batch * batch_stride)
  // are walked seq-major, so that consecutive tokens are adjacent in memory as the kMemory
  // prefetch (4 KiB ahead in address order) expects. Zen 5, 8 x 1024 tokens x 40 heads x 128
  // floats from a cos/sin cache: 9.1 ms batch-major, 4.8-4.9 ms seq-major (BSHD: 4.9 ms).
  const Eigen::Index batch = pos.batch;
  const bool seq_major = batch > 1 && targets[0].dst.seq_stride > targets[0].dst.batch_stride;
  for (Eigen::Index u = u0; u < u1; ++u) {
    const Eigen::Index b = seq_major ? u % batch : u / seq;
    const Eigen::Index s = seq_major ? u / batch : u - b * seq;
    angles.at(pos.at(b, s));
    const Eigen::Index pairs = rope_turning_pairs(angles.cos(), angles.sin(), rd / 2);
    for (int t = 0; t < num_targets; ++t) {
      const RopeTarget<T>& tg = targets[t];
      rope_rotate_heads<T, L>(tg.src.data + b * tg.src.batch_stride + s * tg.src.seq_stride,
                              tg.dst.data + b * tg.dst.batch_stride + s * tg.dst.seq_stride,
                              tg.dst.heads, tg.src.head_stride, tg.dst.head_stride,
                              tg.dst.head_dim, offset, rd, pairs, angles.cos(), angles.sin(),
                              scratch, source);
    }
  }
}

/// Runs worker(u0, u1) over [0, units), on the device's threads when one is given (forced
/// inline: see with_rope_layout).
template <typename Worker>
EIGEN_ALWAYS_INLINE void rope_parallel_for(const RopeApplyOptions& options, Eigen::Index units,
                                           double bytes_per_unit, Worker& worker) {
  if (options.parallel_for != nullptr && units > 1) {
    const RopeRangeFn trampoline = [](void* context, Eigen::Index first, Eigen::Index last) {
      (*static_cast<Worker*>(context))(first, last);
    };
    options.parallel_for(options.device, units, bytes_per_unit, trampoline, &worker);
    return;
  }
  worker(Eigen::Index{0}, units);
}

inline void validate_device(std::string_view fn, const RopeApplyOptions& options) {
  require((options.device == nullptr) == (options.parallel_for == nullptr), fn,
          "options.device and options.parallel_for must be set together (use set_device)");
}

/// Checks every target's views and shapes; returns the number of (batch, seq) tokens and adds
/// the bytes one token moves (read + write of its rotated dims) to *bytes_per_token.
template <typename T>
Eigen::Index validate_targets(std::string_view fn, const RopeTarget<T>* targets, int num_targets,
                              Eigen::Index rd, Eigen::Index rotary_offset,
                              double* bytes_per_token) {
  Eigen::Index units = 0;
  for (int t = 0; t < num_targets; ++t) {
    const char* name = num_targets == 1 ? "x" : (t == 0 ? "q" : "k");
    validate_heads(fn, name, targets[t].src, rd, rotary_offset);
    validate_heads(fn, name, targets[t].dst, rd, rotary_offset);
    require(targets[t].src.batch == targets[t].dst.batch &&
                targets[t].src.seq == targets[t].dst.seq &&
                targets[t].src.heads == targets[t].dst.heads &&
                targets[t].src.head_dim == targets[t].dst.head_dim,
            fn, name, " and out must have the same shape");
    require(t == 0 || (targets[t].dst.batch == targets[0].dst.batch &&
                       targets[t].dst.seq == targets[0].dst.seq),
            fn, "q [batch, seq] = [", targets[0].dst.batch, ", ", targets[0].dst.seq,
            "] must equal k's [", targets[t].dst.batch, ", ", targets[t].dst.seq, "]");
    // A view with zero strides can claim any extents: the token count must still be an Index
    // (extents are >= 0 here, validate_heads checked them).
    // Below 2^31 each (every real call) the product fits: no integer division on the path of
    // a one-token call.
    const Eigen::Index batch = targets[t].dst.batch, seq = targets[t].dst.seq;
    require(((batch | seq) >> 31) == 0 || seq == 0 ||
                batch <= std::numeric_limits<Eigen::Index>::max() / seq,
            fn, name, " has batch * seq = ", batch, " * ", seq,
            " tokens, more than an Index counts");
    units = batch * seq;
    *bytes_per_token += 2.0 * static_cast<double>(targets[t].dst.heads) *
                        static_cast<double>(rd) * static_cast<double>(sizeof(T));
  }
  return units;
}

/// cos / sin multipliers of a direction: forward (a, a), inverse (1/a, -1/a), transpose (a, -a).
/// A plain struct, not std::pair: GCC on AArch64 notes (-Wpsabi) every function passing a
/// std::pair<double, double>, whose C++17 passing changed in GCC 10.1.
struct CosSinMultipliers {
  double cos_factor;
  double sin_factor;
};

inline CosSinMultipliers rope_cos_sin_multipliers(double a, RopeDirection direction) {
  switch (direction) {
    case RopeDirection::kInverse: return {1.0 / a, -1.0 / a};
    case RopeDirection::kTranspose: return {a, -a};
    case RopeDirection::kForward: break;
  }
  return {a, a};
}

/// Rotates every target (validated) by angles p * inv_freq[j] computed on the fly, cos and sin
/// times mult = (cm, sm).
template <typename T>
void rope_run_on_the_fly(const RopeTarget<T>* targets, int num_targets, const RopePositions& pos,
                         const double* inv_freq, Eigen::Index rd, Eigen::Index offset,
                         CosSinMultipliers mult, RopeLayout layout,
                         const RopeApplyOptions& options, Eigen::Index units, double bytes) {
  const auto run = [&](auto layout_constant) {
    constexpr RopeLayout L = decltype(layout_constant)::value;
    auto worker = [&](Eigen::Index u0, Eigen::Index u1) {
      RopeAnglesOnTheFly<compute_t<T>> angles(inv_freq, rd / 2, mult.cos_factor,
                                              mult.sin_factor);
      rope_run_tokens<T, L>(targets, num_targets, pos, u0, u1, angles, rd, offset);
    };
    rope_parallel_for(options, units, bytes, worker);
  };
  with_rope_layout(layout, run);
}

/// Shared front end of the plan-based calls: validates, then rotates every target.
template <typename T>
void rope_apply_plan(std::string_view fn, const RopeTarget<T>* targets, int num_targets,
                     const RopePositions& pos, const RopeFrequencies& freqs, RopeLayout layout,
                     const RopeApplyOptions& options) {
  static_assert(is_storage_type_v<std::remove_const_t<T>>,
                "posenc: storage type must be float, double, Eigen::half or Eigen::bfloat16");
  const Eigen::Index rd = validate_freqs(fn, freqs);
  validate_layout(fn, layout);
  validate_direction(fn, options.direction);
  validate_device(fn, options);
  double bytes = 0.0;
  const Eigen::Index units =
      validate_targets(fn, targets, num_targets, rd, freqs.rotary_offset, &bytes);
  validate_positions(fn, pos, targets[0].dst.batch, targets[0].dst.seq, kMaxRopePosition + 1,
                     false);
  if (units == 0) return;
  const CosSinMultipliers mult =
      rope_cos_sin_multipliers(freqs.attention_factor, options.direction);
  rope_run_on_the_fly<T>(targets, num_targets, pos, freqs.inv_freq.data(), rd,
                         freqs.rotary_offset, mult, layout, options, units, bytes);
}

/// A caller's cos / sin cache [max_position, rotary_dim]; returns rotary_dim.
inline Eigen::Index validate_cos_sin_cache(std::string_view fn, const CosSinCacheView& cache) {
  const Eigen::Index rows = cache.rows(), rd = cache.rotary_dim();
  require(rd > 0 && rd % 2 == 0 && rd <= kMaxRotaryDim, fn, "cos_sin_cache width (rotary_dim) = ",
          rd, " must be even and in [2, ", kMaxRotaryDim, "]");
  require(rows > 0 && cache.data() != nullptr, fn, "cos_sin_cache has ", rows,
          " rows, must have > 0");
  return rd;
}

/// Shared front end of the cache-based calls.
template <typename T>
void rope_apply_cache(std::string_view fn, const RopeTarget<T>* targets, int num_targets,
                      const RopePositions& pos, const CosSinCacheView& cache,
                      RopeLayout layout, Eigen::Index rotary_offset,
                      const RopeApplyOptions& options) {
  static_assert(is_storage_type_v<std::remove_const_t<T>>,
                "posenc: storage type must be float, double, Eigen::half or Eigen::bfloat16");
  const Eigen::Index rows = cache.rows(), rd = validate_cos_sin_cache(fn, cache);
  require(rotary_offset >= 0, fn, "rotary_offset = ", rotary_offset, " must be >= 0");
  validate_layout(fn, layout);
  validate_direction(fn, options.direction);
  validate_device(fn, options);
  double bytes = 0.0;
  const Eigen::Index units = validate_targets(fn, targets, num_targets, rd, rotary_offset, &bytes);
  validate_positions(fn, pos, targets[0].dst.batch, targets[0].dst.seq, rows, true);
  if (units == 0) return;

  const auto run = [&](auto layout_constant) {
    constexpr RopeLayout L = decltype(layout_constant)::value;
    auto worker = [&](Eigen::Index u0, Eigen::Index u1) {
      RopeAnglesFromCache<compute_t<T>> angles(cache, options.direction);
      rope_run_tokens<T, L>(targets, num_targets, pos, u0, u1, angles, rd, rotary_offset);
    };
    rope_parallel_for(options, units, bytes, worker);
  };
  with_rope_layout(layout, run);
}

}  // namespace detail

// ------------------------------------------------------------------------------------------
// Plan-based apply (cos/sin on the fly, angles in double)
// ------------------------------------------------------------------------------------------

/// \brief Rotates x in place: x[b, s, h, o + pair j] by angle position(b, s) * inv_freq[j],
/// scaled by attention_factor (see the file comment for the formula and layouts).
/// x: any RopeHeads view (rope_heads / rope_heads_packed / rope_heads_strided)
/// positions: [batch, seq] as in x
/// Throws std::invalid_argument for a bad plan, layout, shape mismatch, negative or > 2^53
/// positions — all before the first write. Never allocates when options.device is null.
template <typename T>
void apply_rope_inplace(RopeHeads<T> x, const RopePositions& positions,
                        const RopeFrequencies& freqs, RopeLayout layout,
                        const RopeApplyOptions& options = {}) {
  const detail::RopeTarget<T> target{detail::as_const(x), x};
  detail::rope_apply_plan<T>("apply_rope_inplace", &target, 1, positions, freqs, layout, options);
}

/// \brief The contract overload: rank-4 tensor in any head layout, HF position_ids.
/// x: [batch, seq, heads, head_dim] (kBSHD), [batch, heads, seq, head_dim] (kBHSD) or
/// [seq, batch, heads, head_dim] (kSBHD)
/// position_ids: [batch, seq], int64, >= 0 (left padding may repeat positions)
/// Hot path: plan once with compute_rope_frequencies and reuse across layers; no allocation.
template <typename T>
void apply_rope_inplace(TensorView<T, 4> x, PositionIdsView position_ids,
                        const RopeFrequencies& freqs, RopeLayout layout,
                        HeadLayout head_layout = HeadLayout::kBSHD) {
  apply_rope_inplace<T>(rope_heads<T>(x, head_layout), RopePositions::from_ids(position_ids),
                        freqs, layout);
}

/// \brief Convenience: plans from params (allocates the plan) with seq_len = max(position_ids)
/// + 1, which is what HF's dynamic / longrope recipes see, then applies with params.layout.
/// x: [batch, seq, heads, head_dim] (kBSHD), [batch, heads, seq, head_dim] (kBHSD) or
/// [seq, batch, heads, head_dim] (kSBHD)
template <typename T>
void apply_rope_inplace(TensorView<T, 4> x, PositionIdsView position_ids, const RopeParams& params,
                        HeadLayout head_layout = HeadLayout::kBSHD) {
  std::int64_t max_pos = -1;
  for (Eigen::Index i = 0; i < position_ids.size(); ++i) {
    max_pos = std::max(max_pos, position_ids.data()[i]);
  }
  // Clamped so that a bad id cannot overflow here; apply_rope_inplace then rejects it by name.
  const std::int64_t seq_len = std::clamp<std::int64_t>(max_pos, -1, kMaxRopePosition) + 1;
  const RopeFrequencies freqs = compute_rope_frequencies(params, seq_len);
  apply_rope_inplace<T>(x, position_ids, freqs, params.layout, head_layout);
}

/// \brief Out of place: out = rope(x); x is not modified. out may be x itself (then it is the
/// in-place call) but must not otherwise overlap it. Pass-through dims are copied.
/// x, out: views of the same shape
template <typename T>
void apply_rope(RopeHeads<const T> x, RopeHeads<T> out, const RopePositions& positions,
                const RopeFrequencies& freqs, RopeLayout layout,
                const RopeApplyOptions& options = {}) {
  const detail::RopeTarget<T> target{x, out};
  detail::rope_apply_plan<T>("apply_rope", &target, 1, positions, freqs, layout, options);
}

/// \brief Out-of-place rank-4 overload.
/// x, out: [batch, seq, heads, head_dim] (kBSHD), [batch, heads, seq, head_dim] (kBHSD) or
/// [seq, batch, heads, head_dim] (kSBHD)
template <typename T>
void apply_rope(ConstTensorView<T, 4> x, PositionIdsView position_ids,
                const RopeFrequencies& freqs, RopeLayout layout, TensorView<T, 4> out,
                HeadLayout head_layout = HeadLayout::kBSHD) {
  apply_rope<T>(rope_heads<T>(x, head_layout), rope_heads<T>(out, head_layout),
                RopePositions::from_ids(position_ids), freqs, layout);
}

/// \brief Q and K in one pass (one cos/sin computation per token for both), in place; q and k
/// may have different head counts (GQA: 32 query heads, 8 KV heads) and head_dims.
/// q: [batch, seq, q_heads, q_dim], k: [batch, seq, kv_heads, k_dim] (any RopeHeads views)
template <typename T>
void apply_rope_qk_inplace(RopeHeads<T> q, RopeHeads<T> k, const RopePositions& positions,
                           const RopeFrequencies& freqs, RopeLayout layout,
                           const RopeApplyOptions& options = {}) {
  const detail::RopeTarget<T> targets[2] = {{detail::as_const(q), q}, {detail::as_const(k), k}};
  detail::rope_apply_plan<T>("apply_rope_qk_inplace", targets, 2, positions, freqs, layout,
                             options);
}

/// \brief Rank-4 Q+K overload.
/// q: [batch, seq, q_heads, head_dim], k: [batch, seq, kv_heads, head_dim] (or both BHSD, or
/// both SBHD)
template <typename T>
void apply_rope_qk_inplace(TensorView<T, 4> q, TensorView<T, 4> k, PositionIdsView position_ids,
                           const RopeFrequencies& freqs, RopeLayout layout,
                           HeadLayout head_layout = HeadLayout::kBSHD) {
  apply_rope_qk_inplace<T>(rope_heads<T>(q, head_layout), rope_heads<T>(k, head_layout),
                           RopePositions::from_ids(position_ids), freqs, layout);
}

/// \brief Re-rotates cached keys from one plan to another (a dynamic-NTK or LongRoPE plan that
/// changed, RopePlan::update() == true): k <- R_to(p) R_from(p)^-1 k, in place, as one
/// rotation by (a_to / a_from) R(p (w_to - w_from)) per pair: one pass over the keys, rounded
/// to T once. Validates both plans before writing.
template <typename T>
void rerotate_rope_inplace(RopeHeads<T> k, const RopePositions& positions,
                           const RopeFrequencies& from, const RopeFrequencies& to,
                           RopeLayout layout, const RopeApplyOptions& options = {}) {
  constexpr std::string_view fn = "rerotate_rope_inplace";
  const Eigen::Index rd_from = detail::validate_freqs(fn, from);
  const Eigen::Index rd_to = detail::validate_freqs(fn, to);
  detail::require(rd_from == rd_to && from.rotary_offset == to.rotary_offset, fn,
                  "from and to must rotate the same slice: rotary_dim ", rd_from, " vs ", rd_to,
                  ", rotary_offset ", from.rotary_offset, " vs ", to.rotary_offset);
  detail::require(options.direction == RopeDirection::kForward, fn,
                  "options.direction must be kForward (the call undoes from and applies to)");
  const detail::RopeTarget<T> target{detail::as_const(k), k};
  detail::validate_heads(fn, "k", k, rd_to, to.rotary_offset);
  detail::validate_layout(fn, layout);
  detail::validate_device(fn, options);
  detail::validate_positions(fn, positions, k.batch, k.seq, kMaxRopePosition + 1, false);
  const Eigen::Index units = k.batch * k.seq;
  if (units == 0) return;
  const double bytes = 2.0 * static_cast<double>(k.heads * rd_to * Eigen::Index{sizeof(T)});
  // One rotation per pair: a_to R(p w_to) (a_from R(p w_from))^-1 = (a_to / a_from)
  // R(p (w_to - w_from)), on the fly over the frequency differences (which may be negative).
  // Half the memory traffic of inverse-then-forward, and 16-bit keys are rounded once.
  std::array<double, kMaxRotaryDim / 2> diff;
  for (Eigen::Index j = 0; j < rd_to / 2; ++j) {
    const auto at = static_cast<std::size_t>(j);
    diff[at] = to.inv_freq[at] - from.inv_freq[at];
  }
  const double ratio = to.attention_factor / from.attention_factor;
  detail::rope_run_on_the_fly<T>(&target, 1, positions, diff.data(), rd_to, to.rotary_offset,
                                 {ratio, ratio}, layout, options, units, bytes);
}

// ------------------------------------------------------------------------------------------
// cos/sin cache [max_position, rotary_dim] = cat(cos, sin) * attention_factor (vLLM, FlashInfer)
// ------------------------------------------------------------------------------------------

/// \brief Fills cache[r] = a * [cos(p w_0) .. cos(p w_{h-1}), sin(p w_0) .. sin(p w_{h-1})],
/// p = first_position + r, h = rotary_dim / 2, computed in double and rounded once to T (float;
/// or the model's dtype, as vLLM keeps its cache — the cached apply calls read every T).
/// cache: [num_positions, rotary_dim], rotary_dim == freqs.rotary_dim
template <typename T = float>
void fill_rope_cos_sin_cache(const RopeFrequencies& freqs, TensorView<T, 2> cache,
                             std::int64_t first_position = 0) {
  static_assert(detail::is_storage_type_v<T>, "posenc: cache type must be a storage type");
  constexpr std::string_view fn = "fill_rope_cos_sin_cache";
  const Eigen::Index rd = detail::validate_freqs(fn, freqs);
  const Eigen::Index rows = cache.dimension(0);
  detail::require(cache.dimension(1) == rd, fn, "cache width = ", cache.dimension(1),
                  " must equal rotary_dim = ", rd);
  detail::require(rows > 0, fn, "cache rows = ", rows, " must be > 0");
  detail::require(cache.data() != nullptr, fn, "cache data is null");
  detail::require(first_position >= 0 && first_position <= kMaxRopePosition - rows, fn,
                  "first_position = ", first_position, " must be in [0, 2^53 - rows]");
  const Eigen::Index half = rd / 2;
  const double a = freqs.attention_factor;
  const double* inv = freqs.inv_freq.data();
  double inv_max = 0.0;
  for (Eigen::Index j = 0; j < half; ++j) inv_max = std::max(inv_max, inv[j]);
  // Every row is an exact anchor (no recurrence): a cache is built once, precision wins.
  alignas(64) double angle[kMaxRotaryDim / 2];
  alignas(64) double c[kMaxRotaryDim / 2];
  alignas(64) double s[kMaxRotaryDim / 2];
  for (Eigen::Index r = 0; r < rows; ++r) {
    const double p = static_cast<double>(first_position + r);
    for (Eigen::Index j = 0; j < half; ++j) angle[j] = p * inv[j];
    if (p * inv_max <= detail::kRopeFastTrigLimit) {
      detail::rope_sincos(angle, s, c, half);
    } else {
      for (Eigen::Index j = 0; j < half; ++j) {
        s[j] = std::sin(angle[j]);
        c[j] = std::cos(angle[j]);
      }
    }
    T* row = cache.data() + r * rd;
    for (Eigen::Index j = 0; j < half; ++j) {
      row[j] = detail::from_value<T>(a * c[j]);
      row[half + j] = detail::from_value<T>(a * s[j]);
    }
  }
}

/// \brief An owning float cos/sin cache for positions [0, max_position).
/// Returns [max_position, rotary_dim].
inline Tensor<float, 2> make_rope_cos_sin_cache(const RopeFrequencies& freqs,
                                                std::int64_t max_position) {
  constexpr std::string_view fn = "make_rope_cos_sin_cache";
  const Eigen::Index rd = detail::validate_freqs(fn, freqs);
  detail::require(max_position > 0 && max_position <= kMaxRopePosition, fn, "max_position = ",
                  max_position, " must be in [1, 2^53]");
  // Eigen multiplies the dimensions unchecked (2^53 x 1024 wrapped).
  detail::checked_elements(fn, "cache", {static_cast<Eigen::Index>(max_position), rd},
                           sizeof(float));
  Tensor<float, 2> cache(static_cast<Eigen::Index>(max_position), rd);
  fill_rope_cos_sin_cache<float>(freqs, TensorView<float, 2>(cache.data(), cache.dimension(0), rd));
  return cache;
}

/// \brief Rotates x in place with cos/sin read from a caller's cache (vLLM / FlashInfer
/// `cos_sin_cache` layout: row p = cat(cos, sin), attention factor folded in, float).
/// x: any RopeHeads view; cos_sin_cache: [max_position, rotary_dim]
/// Throws std::out_of_range for a position >= max_position; std::invalid_argument otherwise.
template <typename T>
void apply_rope_inplace_cached(RopeHeads<T> x, const RopePositions& positions,
                               const CosSinCacheView& cos_sin_cache, RopeLayout layout,
                               Eigen::Index rotary_offset = 0,
                               const RopeApplyOptions& options = {}) {
  const detail::RopeTarget<T> target{detail::as_const(x), x};
  detail::rope_apply_cache<T>("apply_rope_inplace_cached", &target, 1, positions, cos_sin_cache,
                              layout, rotary_offset, options);
}

/// \brief Q and K in one pass from a cos/sin cache (GQA head counts may differ).
template <typename T>
void apply_rope_qk_inplace_cached(RopeHeads<T> q, RopeHeads<T> k, const RopePositions& positions,
                                  const CosSinCacheView& cos_sin_cache, RopeLayout layout,
                                  Eigen::Index rotary_offset = 0,
                                  const RopeApplyOptions& options = {}) {
  const detail::RopeTarget<T> targets[2] = {{detail::as_const(q), q}, {detail::as_const(k), k}};
  detail::rope_apply_cache<T>("apply_rope_qk_inplace_cached", targets, 2, positions,
                              cos_sin_cache, layout, rotary_offset, options);
}

/// \brief Out of place from a cos/sin cache.
template <typename T>
void apply_rope_cached(RopeHeads<const T> x, RopeHeads<T> out, const RopePositions& positions,
                       const CosSinCacheView& cos_sin_cache, RopeLayout layout,
                       Eigen::Index rotary_offset = 0, const RopeApplyOptions& options = {}) {
  const detail::RopeTarget<T> target{x, out};
  detail::rope_apply_cache<T>("apply_rope_cached", &target, 1, positions, cos_sin_cache, layout,
                              rotary_offset, options);
}

}  // namespace posenc
