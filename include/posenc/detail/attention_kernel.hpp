#pragma once
/// \file posenc/detail/attention_kernel.hpp
/// The fused attention kernel: tiled, online softmax (FlashAttention-2, Dao 2023, Alg. 1), no
/// [q_len, k_len] buffer. One work item = (batch b, kv head g, a tile of query positions); the
/// tile's rows are (query position, query head of group g) pairs, so the heads that share a kv
/// head (GQA / MQA) read each K/V tile once.
///
/// Per K tile of Bc keys, for the R rows of the tile (all in Acc = float, or double for double
/// storage):
///   S^T[j, r] = scale * k_j . q_r (+ ALiBi) (-inf where masked)      [Bc, R]
///   m'_r = max(m_r, max_j S^T[j, r]);  P^T[j, r] = exp(S^T[j, r] - m'_r)
///   l_r  = exp(m_r - m'_r) l_r + sum_j P^T[j, r]
///   O_r  = exp(m_r - m'_r) O_r + sum_j P^T[j, r] v_j
/// and at the end out_r = O_r / l_r (0 when l_r = 0: no visible key).
///
/// Scores are kept transposed (keys x rows) so the softmax statistics vectorise across rows and
/// no transpose happens in the inner loops: Q is packed transposed once per tile ([d, R], scale
/// folded in), S^T = K Q^T broadcasts key elements against row vectors, and O += P V broadcasts
/// P^T[j, r] against V row vectors. Both products are register-blocked 6 x 2 packets (12
/// accumulators + 3 operands = 15 of the 16 AVX2 registers). Subtracting the running max keeps
/// every exponent <= 0, so logits of 1e4 do not overflow.
///
/// Decode (at most kAttnDecodeRows rows per kv head) has its own work item, which reads K / V in
/// place with the same softmax step; see "decode" below.

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <utility>
#include <system_error>
#include <thread>
#include <type_traits>
#include <vector>

#include <Eigen/Core>

#if defined(__AVX2__) || (defined(__F16C__) && defined(__AVX__))
#include <immintrin.h>
#endif

#include "posenc/attention_types.hpp"
#include "posenc/detail/attention_instances.hpp"
#include "posenc/detail/cache_line_vector.hpp"
#include "posenc/detail/numeric.hpp"

namespace posenc::detail {

/// Packet of the accumulation type (Packet8f with AVX, Packet4f with SSE, scalar otherwise).
template <typename Acc>
using attn_packet_t = typename Eigen::internal::packet_traits<Acc>::type;
template <typename Acc>
inline constexpr int kAttnLanes = Eigen::internal::unpacket_traits<attn_packet_t<Acc>>::size;

/// True when a packet of Acc can be loaded straight from storage T, widening in registers:
/// the same type, or float packets of 8 (AVX2 / F16C) or 16 (AVX-512, where Eigen's float
/// packet is 16 wide) from bfloat16 (zero-extend, shift into the high half) or half. Decode
/// then reads a 16-bit K cache in place, moving half the bytes.
template <typename Acc, typename T>
inline constexpr bool attn_loads_widened_v =
    std::is_same_v<T, Acc>
#if defined(__F16C__) && defined(__AVX2__)
    // FP8 bytes become half bits in registers (attn_fp8_as_half), then F16C widens them.
    || (std::is_same_v<Acc, float> && is_float8_code_v<T> && kAttnLanes<float> == 8)
#endif
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
    || (std::is_same_v<Acc, float> && is_float8_code_v<T> && kAttnLanes<float> == 16)
#endif
#if defined(__AVX2__)
    || (std::is_same_v<Acc, float> && std::is_same_v<T, Eigen::bfloat16> && kAttnLanes<float> == 8)
#endif
#if defined(__F16C__) && defined(__AVX__)
    || (std::is_same_v<Acc, float> && std::is_same_v<T, Eigen::half> && kAttnLanes<float> == 8)
#endif
#if defined(__AVX512F__)
    || (std::is_same_v<Acc, float> && kAttnLanes<float> == 16 &&
        (std::is_same_v<T, Eigen::bfloat16> || std::is_same_v<T, Eigen::half>))
#endif
    ;

/// The kernel reads an FP8 element in its own unit: E5M2 as its value (the high byte of a
/// half), E4M3 as value * 2^-8 (its bits moved into a half's, whose exponent bias is 8 more):
/// exact, subnormals and NaN included, and no multiply per element. The 2^8 goes into the
/// scales (attn_kv_unit).
template <typename T>
inline constexpr double attn_kv_unit = []() {
  if constexpr (is_float8_code_v<T>) {
    return std::is_same_v<typename T::format, Float8E4M3Format> ? 256.0 : 1.0;
  } else {
    return 1.0;
  }
}();

/// An element of K or V in the kernel's unit (attn_kv_unit), as Acc.
template <typename Acc, typename T>
EIGEN_STRONG_INLINE Acc attn_kv_value(T x) {
  if constexpr (is_float8_code_v<T>) {
    return static_cast<Acc>(static_cast<float>(x) * static_cast<float>(1.0 / attn_kv_unit<T>));
  } else {
    return static_cast<Acc>(to_compute(x));
  }
}

#if defined(__AVX2__)
/// n FP8 codes (sign-extended to 16 bits) as half bits in the kernel's unit:
/// E5M2 is a half's high byte; E4M3's s eeee mmm moves to s 0eeee mmm0000000 (the sign-extended
/// byte shifted left by 7 puts a copy of s at bit 14, which the mask clears), and its NaN code
/// (magnitude 0x7F, which would read 1.875) becomes a half NaN unless the codes are known to
/// hold none (float8_e4m3_finite: 2 integer operations instead of 6).
template <typename T, typename V>
EIGEN_STRONG_INLINE V attn_fp8_as_half(V w) {
  if constexpr (std::is_same_v<T, float8_e5m2>) {
    if constexpr (sizeof(V) == 32) return _mm256_slli_epi16(w, 8);
    else return _mm_slli_epi16(w, 8);
  } else if constexpr (std::is_same_v<T, float8_e4m3_finite>) {
    if constexpr (sizeof(V) == 32) {
      return _mm256_and_si256(_mm256_slli_epi16(w, 7),
                              _mm256_set1_epi16(static_cast<short>(0xBF80)));
    } else {
      return _mm_and_si128(_mm_slli_epi16(w, 7), _mm_set1_epi16(static_cast<short>(0xBF80)));
    }
  } else if constexpr (sizeof(V) == 32) {
    const __m256i h = _mm256_slli_epi16(w, 7);
    const __m256i nan = _mm256_cmpeq_epi16(_mm256_and_si256(h, _mm256_set1_epi16(0x3F80)),
                                           _mm256_set1_epi16(0x3F80));
    return _mm256_or_si256(_mm256_and_si256(h, _mm256_set1_epi16(static_cast<short>(0xBF80))),
                           _mm256_and_si256(nan, _mm256_set1_epi16(0x7E00)));
  } else {
    const __m128i h = _mm_slli_epi16(w, 7);
    const __m128i nan =
        _mm_cmpeq_epi16(_mm_and_si128(h, _mm_set1_epi16(0x3F80)), _mm_set1_epi16(0x3F80));
    return _mm_or_si128(_mm_and_si128(h, _mm_set1_epi16(static_cast<short>(0xBF80))),
                        _mm_and_si128(nan, _mm_set1_epi16(0x7E00)));
  }
}
#endif

template <typename Acc, typename T>
EIGEN_STRONG_INLINE attn_packet_t<Acc> attn_load_widened(const T* p) {
  static_assert(attn_loads_widened_v<Acc, T>, "attn_load_widened: no in-register widening");
  if constexpr (std::is_same_v<T, Acc>) {
    return Eigen::internal::ploadu<attn_packet_t<Acc>>(p);
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
  } else if constexpr (kAttnLanes<Acc> == 16 && is_float8_code_v<T>) {
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm512_cvtph_ps(attn_fp8_as_half<T>(_mm256_cvtepi8_epi16(b)));
#endif
#if defined(__F16C__) && defined(__AVX2__)
  } else if constexpr (kAttnLanes<Acc> == 8 && is_float8_code_v<T>) {
    const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
    return _mm256_cvtph_ps(attn_fp8_as_half<T>(_mm_cvtepi8_epi16(b)));
#endif
#if defined(__AVX512F__)
  } else if constexpr (kAttnLanes<Acc> == 16 && std::is_same_v<T, Eigen::bfloat16>) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  } else if constexpr (kAttnLanes<Acc> == 16 && std::is_same_v<T, Eigen::half>) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
#endif
#if defined(__AVX2__)
  } else if constexpr (std::is_same_v<T, Eigen::bfloat16>) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
#endif
#if defined(__F16C__) && defined(__AVX__)
  } else if constexpr (std::is_same_v<T, Eigen::half>) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
#endif
  }
}

/// Register block: 6 broadcast operands x 2 packets of accumulators.
inline constexpr int kAttnBlock = 6;
/// Rows (query positions x group heads) a work item aims for, and keys per tile. 48 rows is a
/// multiple of 6 and of 2 packets; with d = 128 the packed Q (24 KiB), O (24 KiB) and scores
/// (12 KiB) stay in L2 while each K/V tile streams once per work item.
inline constexpr Eigen::Index kAttnTargetRows = 48;
inline constexpr Eigen::Index kAttnKeyTile = 64;
/// Packed K and V rows (in Acc) a thread keeps from one work item to the next of the same kv
/// heads, at most: the leading keys of a call, up to this many bytes, are packed once per thread
/// and kv head instead of once per work item. The copy reads rows kv_heads * d apart, which alias
/// in L2 (a 512 KiB 8-way L2 holds only 32 rows 16 KiB apart) and so come from L3 on every item;
/// the packed copy is contiguous and streams back. Keys past the bound are packed tile by tile.
inline constexpr Eigen::Index kAttnResidentPackBytes = Eigen::Index{4} << 20;

template <typename T>
using attn_vector = cache_line_vector<T>;

/// Short calls above the decode size (q_len * group below a tile, e.g. chunks of a few tokens)
/// put several kv heads in one work item so a K/V tile is read as one contiguous block of key
/// rows (all those heads side by side), which the hardware prefetchers stream; the tile then
/// holds about this many elements per K or V.
inline constexpr Eigen::Index kAttnMultiHeadTileElems = 16384;
/// Decode: at most this many rows (query positions x group heads) per kv head go through
/// attention_decode_item, which reads K / V in place; keys per softmax step there. Each step
/// switches from K rows to V rows and back, and the first rows after a switch were not
/// requested ahead: f32 kv 8 decode (4096 keys, Zen 5, A/B, 3 rounds) took 0.87-0.90 ms with
/// 32 keys per step, 0.73-0.79 ms with 128 (with the slice distance below).
inline constexpr Eigen::Index kAttnDecodeRows = 4;
inline constexpr Eigen::Index kAttnDecodeKeyTile = 128;
/// Decode requests the first line of every page of the K / V rows kAttnDecodePageAhead keys
/// ahead of the ones it reads (attn_prefetch_rows). Calls with several rows per kv head
/// that read at least kFromMemoryBytes of K + V (more than half the 32 MiB L3 of the
/// machines we measure on) also request each kv head's slice kAttnDecodeSliceAhead keys ahead
/// for a 4-byte cache, as many bytes ahead for others (attn_slice_ahead).
/// With 8-float packets (AVX2) a key takes about twice as long as with 16 (AVX-512), so the
/// same lead in time is fewer keys.
inline constexpr Eigen::Index kAttnDecodePageAhead = 8;
inline constexpr Eigen::Index kAttnDecodeSliceAhead = kAttnLanes<float> == 8 ? 2 : 3;
/// Keys ahead for TKV rows: a constant distance in bytes. Zen 5, interleaved A/B (3 rounds):
/// 4 keys gave f32 kv 8 0.81-0.91 ms (8 keys: 0.99-1.14), and 8 keys gave bf16 0.49-0.53 ms
/// (4 keys: 0.58-0.60). With 128-key steps, 3 float keys (one block of rows, the next one)
/// beat 4: f32 kv 8 0.73-0.79 vs 0.93-0.96 ms; 6 bf16 keys 0.47-0.48 ms. Zen 3 (AVX2), kv 8
/// from DRAM (a driver's best of 60 after an eviction pass, 3 rounds): 2 float keys 1.97-2.01
/// ms against 2.13-2.17 for 3 (5: 2.15-2.19); bf16 (4 keys against 6) 1.34-1.36 vs 1.42-1.77.
template <typename TKV>
inline constexpr Eigen::Index attn_slice_ahead = std::max<Eigen::Index>(
    1, kAttnDecodeSliceAhead * 4 / static_cast<Eigen::Index>(sizeof(TKV)));
/// Decode with one row per kv head (MHA) over more K + V than the L3 holds (at least
/// kAttnDecodeStreamBytes per item, whose kv heads are whole rows) reads each step's rows in
/// address order, one key row after the other, and requests each kv head's slice
/// kAttnDecodeBytesAhead bytes further on in that order just before reading it. Each K / V
/// element feeds one FMA there, so the item must keep up with DRAM: blocks of 8 key rows side
/// by side (one request per page) left the prefetchers behind, and slices requested
/// attn_slice_ahead keys on sat 48 KiB ahead for float kv 32, the whole L1 (slower than no
/// slices). Zen 5, kv 32, 4096 keys, A/B (3 rounds): float
/// 4.07-4.13 -> 3.28-3.36 ms (0.62 -> 0.90 of the read stream), bf16 2.48-2.63 -> 1.70-1.75 ms.
/// 4, 12 and 16 KiB ahead were slower than 8; from the L3 (8 MiB) the blocked keys stay faster
/// (bf16 54 vs 68-78 us), hence the size rule.
inline constexpr Eigen::Index kAttnDecodeBytesAhead = 8192;
inline constexpr std::int64_t kAttnDecodeStreamBytes = 2 * kFromMemoryBytes;
/// Padding of a multi-head packed row: keeps rows 4 KiB-multiples apart from mapping to the same
/// L1 sets.
inline constexpr Eigen::Index kAttnRowPad = 16;

/// One thread's buffers for a work item of `slots` kv heads with `rows` rows each:
/// O(slots * rows * (d + dv) + key_tile * (rows + slots * (d + dv))), independent of q_len and
/// k_len (d: the Q / K head width, dv: the V / output head width).
template <typename Acc>
struct AttentionTileBuffers {
  Eigen::Index rows = 0;  // row stride per slot (padded to whole packets)
  Eigen::Index d = 0, dv = 0;
  Eigen::Index key_tile = 0;
  Eigen::Index slots = 0;
  attn_vector<Acc> qt;                           // [slots][d][rows]    Q^T, scale folded in
  attn_vector<Acc> qr;                           // [slots][rows][d]    Q rows (decode: [lanes][d])
  attn_vector<Acc> o;                            // [slots][rows][dv]   unnormalised output (idem)
  attn_vector<Acc> st;                           // [key_tile][rows]    scores, then P^T
  attn_vector<Acc> kf;  // [resident_keys + key_tile][slots * d + pad]  packed K (prefill)
  attn_vector<Acc> vf;  // [resident_keys + key_tile][slots * dv + pad] packed V (prefill)
  Eigen::Index resident_keys = 0;  // leading keys kept packed across items (multiple of key_tile)
  Eigen::Index packed_heads = -1;  // b * kv_heads + g0 of the rows packed there; -1: none
  Eigen::Index packed_first = 0;   // keys [packed_first, packed_keys) of those heads are packed
  Eigen::Index packed_keys = 0;
  attn_vector<Acc> m, l, alpha, q_rel, slope, first, limit;  // [slots][rows]
  std::vector<Eigen::Index> row_q, row_h;             // [slots][rows]
  std::vector<std::int64_t> chunk;  // [slots][rows] floor(pos_q / chunk), -1: padding row
  std::vector<std::int64_t> tree;   // [slots][rows] tree-mask row offset of the query, -1: none
  std::vector<std::int64_t> qpos;   // [slots][rows] the row's query position

  /// Grows (never shrinks); allocation happens only when a shape grows. Decode items read K / V
  /// in place and pass packs = false.
  /// `k_len` bounds the resident keys (0: none, every tile packed into one slot); every call
  /// starts with nothing packed (the caller's K/V may have changed since the last one).
  void reserve(Eigen::Index need_rows, Eigen::Index need_d, Eigen::Index need_dv,
               Eigen::Index need_key_tile, Eigen::Index need_slots, Eigen::Index k_len,
               bool packs = true) {
    constexpr Eigen::Index lanes = kAttnLanes<Acc>;
    need_rows = (need_rows + 2 * lanes - 1) / (2 * lanes) * (2 * lanes);
    packed_heads = -1;
    packed_first = 0;
    packed_keys = 0;
    resident_keys = 0;
    if (packs) {
      const Eigen::Index k_row = need_slots * need_d + kAttnRowPad;
      const Eigen::Index v_row = need_slots * need_dv + kAttnRowPad;
      const Eigen::Index row_pair_bytes = (k_row + v_row) * static_cast<Eigen::Index>(sizeof(Acc));
      const Eigen::Index fit =
          kAttnResidentPackBytes / row_pair_bytes / need_key_tile * need_key_tile;
      const Eigen::Index keys = (k_len + need_key_tile - 1) / need_key_tile * need_key_tile;
      resident_keys = std::min(fit, keys);
      const auto packed_rows = static_cast<std::size_t>(resident_keys + need_key_tile);
      if (kf.size() < packed_rows * static_cast<std::size_t>(k_row)) {
        kf.assign(packed_rows * static_cast<std::size_t>(k_row), Acc(0));
      }
      if (vf.size() < packed_rows * static_cast<std::size_t>(v_row)) {
        vf.assign(packed_rows * static_cast<std::size_t>(v_row), Acc(0));
      }
    }
    if (need_rows <= rows && need_d <= d && need_dv <= dv && need_key_tile <= key_tile &&
        need_slots <= slots) {
      return;
    }
    rows = std::max(rows, need_rows);
    d = std::max(d, need_d);
    dv = std::max(dv, need_dv);
    key_tile = std::max(key_tile, need_key_tile);
    slots = std::max(slots, need_slots);
    const auto r = static_cast<std::size_t>(rows), dd = static_cast<std::size_t>(d),
               ddv = static_cast<std::size_t>(dv), kt = static_cast<std::size_t>(key_tile),
               ns = static_cast<std::size_t>(slots);
    qt.assign(ns * dd * r, Acc(0));
    qr.assign(ns * r * dd, Acc(0));
    o.assign(ns * r * ddv, Acc(0));
    st.assign(kt * r, Acc(0));
    for (auto* v : {&m, &l, &alpha, &q_rel, &slope, &first, &limit}) v->assign(ns * r, Acc(0));
    row_q.assign(ns * r, 0);
    row_h.assign(ns * r, 0);
    chunk.assign(ns * r, -1);
    tree.assign(ns * r, -1);
    qpos.assign(ns * r, 0);
  }
};

/// Everything the kernel reads, as raw pointers and strides (validated by the caller).
/// K element (b, j, g, c) sits at k_row(b, j)[g * d + c]: k[b * k_batch_stride +
/// (j * kv_heads + g) * d + c] (the KV cache passes its max_len-based stride, plain attention
/// k_len * kv_heads * d) or in a page of a paged cache; V element (b, j, g, c) at
/// v_row(b, j)[g * v_head_elems + c], rows v_row_elems apart. d is the Q / K head width, dv
/// the V / output one (dv < d: DeepSeek MLA, q.k over 192 dims, values of 128). V rows of
/// their own have v_head_elems = dv, v_row_elems = kv_heads * dv; MLA's absorbed form reads
/// the values as the first dv dims of the key rows (v = k, v_head_elems = d,
/// v_row_elems = kv_heads * d).
template <typename Acc, typename TQ, typename TKV, typename TO>
struct AttentionProblem {
  const TQ* q = nullptr;  // [batch, q_len, heads, d]
  const TKV* k = nullptr;
  const TKV* v = nullptr;
  TO* out = nullptr;  // [batch, q_len, heads, dv]
  Acc* lse = nullptr;  // [batch, q_len, heads] log-sum-exp of each row's logits, or null
  Eigen::Index batch = 0, q_len = 0, k_len = 0, heads = 0, kv_heads = 0, d = 0, dv = 0;
  Eigen::Index k_batch_stride = 0, v_batch_stride = 0;
  Eigen::Index v_row_elems = 0, v_head_elems = 0;
  // K + V bytes the caller reads around this call (one of several parts of a larger cache, as
  // dual chunk attention's); decode sizes its memory requests by max(its own bytes, this).
  std::int64_t stream_bytes = 0;
  Acc scale = Acc(1);  // the softmax scale, times the keys' storage scale (KvScales)
  Acc v_scale = Acc(1);  // multiplies every output row: the values' storage scale (KvScales)
  // Per-kv-head storage scales (KvScales::k_heads / v_heads), or null: kv head g's rows take
  // k_heads[g] into their query scale and v_heads[g] into their output.
  const double* k_heads = nullptr;
  const double* v_heads = nullptr;
  bool causal = true;
  Acc softcap = Acc(0);     // c > 0: scores become c tanh(s / c) (Gemma-2)
  Eigen::Index window = 0;  // sliding window (keys per query), 0 = none; <= k_len + q_len
  // Chunked attention (Llama-4 attention_chunk_size C): a query sees only keys whose absolute
  // position lies in its own chunk floor(pos / C); 0 = none.
  std::int64_t chunk = 0;
  // Llama-4's query temperature (NoPE layers): row i's scale times t(pos_q); null = none.
  const AttentionTemperature* temperature = nullptr;
  bool alibi = false;
  const double* slopes = nullptr;          // [heads] when alibi
  // T5's relative bias: [heads][2 rel_span + 1] by pos_k - pos_q (RelativePositionBias), or null.
  const double* rel_bias = nullptr;
  std::int64_t rel_span = 0;
  const double* sinks = nullptr;           // [heads] sink logits (GPT-OSS), or null
  // A caller's additive bias (AttentionMetadata::attention_bias), or null: query qi, head h,
  // key j of sequence b at bias + b * bias_batch_stride + h * bias_head_stride +
  // qi * bias_row_stride + j (a stride of 0 broadcasts).
  const float* bias = nullptr;
  Eigen::Index bias_batch_stride = 0, bias_head_stride = 0, bias_row_stride = 0;
  const std::int64_t* q_pos = nullptr;     // [batch, q_len] or null: k_len - q_len + i
  const std::int64_t* k_pos = nullptr;     // row b at k_pos + b * meta_batch_stride, or null: j
  const std::int64_t* key_lengths = nullptr;  // [batch] or null
  const std::uint8_t* key_mask = nullptr;  // row b at key_mask + b * meta_batch_stride, or null
  Eigen::Index meta_batch_stride = 0;
  // Tree attention: [batch, q_len, q_len], query i of sequence b sees draft key t (key
  // keys_of(b) - q_len + t) only where tree_mask[(b q_len + i) q_len + t] != 0; null = none.
  const std::uint8_t* tree_mask = nullptr;
  // Per-sequence key counts (paged batches): sequence b has seq_lens[b] <= k_len keys and its
  // queries align bottom-right to them. Null: every sequence has k_len.
  const std::int64_t* seq_lens = nullptr;
  // Paged K/V (vLLM block tables): key j of sequence b is row j % page_size of page
  // page_table[b * page_table_stride + j / page_size]; k / v point at page 0, pages are
  // page_size * kv_heads * d (V: page_size * v_row_elems) elements apart. Null: rows at
  // b * k_batch_stride + j * kv_heads * d (V: b * v_batch_stride + j * v_row_elems).
  const std::int32_t* page_table = nullptr;
  Eigen::Index page_size = 0, page_table_stride = 0;

  Eigen::Index keys_of(Eigen::Index b) const {
    return seq_lens ? static_cast<Eigen::Index>(seq_lens[b]) : k_len;
  }
  /// Absolute positions: given, or query qi at keys_of(b) - q_len + qi and key j at j.
  std::int64_t q_position(Eigen::Index b, Eigen::Index qi) const {
    return q_pos ? q_pos[b * q_len + qi] : static_cast<std::int64_t>(keys_of(b) - q_len + qi);
  }
  std::int64_t k_position(Eigen::Index b, Eigen::Index j) const {
    return k_pos ? k_pos[b * meta_batch_stride + j] : static_cast<std::int64_t>(j);
  }
  /// The factor query qi of sequence b, head h is loaded with: the scale, times its
  /// temperature and its kv head's key scale.
  Acc q_scale(Eigen::Index b, Eigen::Index qi, Eigen::Index h) const {
    double s = static_cast<double>(scale);
    if (temperature) s *= temperature_at(q_position(b, qi), *temperature);
    if (k_heads) s *= k_heads[h / (heads / kv_heads)];
    return temperature || k_heads ? static_cast<Acc>(s) : scale;
  }
  /// What row h's O / l is multiplied by: the values' storage scale of its kv head.
  Acc out_scale(Eigen::Index h) const {
    return v_heads ? static_cast<Acc>(static_cast<double>(v_scale) * v_heads[h / (heads / kv_heads)])
                   : v_scale;
  }
  /// Chunks [lo, hi] of queries [qi0, qi0 + nq) of sequence b (chunked attention).
  std::pair<std::int64_t, std::int64_t> query_chunks(Eigen::Index b, Eigen::Index qi0,
                                                     Eigen::Index nq) const {
    std::int64_t lo = std::numeric_limits<std::int64_t>::max(), hi = -1;
    for (Eigen::Index qi = qi0; qi < qi0 + nq; ++qi) {
      const std::int64_t c = q_position(b, qi) / chunk;
      lo = std::min(lo, c);
      hi = std::max(hi, c);
    }
    return {lo, hi};
  }
  /// True when key j's position lies in chunks [lo, hi].
  bool key_in_chunks(Eigen::Index b, Eigen::Index j, std::int64_t lo, std::int64_t hi) const {
    const std::int64_t pos = k_position(b, j);
    return pos >= lo * chunk && pos / chunk <= hi;
  }
  /// Narrows keys [begin, end) to the smallest range holding every key of chunks [lo, hi]
  /// (positions need not grow with the slot: explicit ones are scanned). Empty: begin >= end.
  std::pair<Eigen::Index, Eigen::Index> chunk_keys(Eigen::Index b, std::int64_t lo,
                                                   std::int64_t hi, Eigen::Index begin,
                                                   Eigen::Index end) const {
    // An empty range stays empty: {end, begin} below would turn [60, 0) (a window start past
    // key_lengths) into [0, 60), padding keys included.
    if (begin >= end) return {begin, begin};
    if (!k_pos) {  // key j at position j: chunks [lo, hi] are keys [lo C, (hi + 1) C)
      const std::int64_t first = lo * chunk, last = (hi + 1) * chunk;  // <= 2^53 + chunk
      return {static_cast<Eigen::Index>(std::max<std::int64_t>(begin, first)),
              static_cast<Eigen::Index>(std::min<std::int64_t>(end, last))};
    }
    Eigen::Index first = end, last = begin;
    for (Eigen::Index j = begin; j < end; ++j) {
      if (key_in_chunks(b, j, lo, hi)) {
        first = std::min(first, j);
        last = j + 1;
      }
    }
    return {first, last};
  }
  /// Whether keys [j0, j0 + nk) and queries of chunks [lo, hi] mix chunks, i.e. the tile needs
  /// the chunk mask (false without chunked attention).
  bool chunk_cut(Eigen::Index b, Eigen::Index j0, Eigen::Index nk, std::int64_t lo,
                 std::int64_t hi) const {
    if (chunk == 0) return false;
    if (lo != hi) return true;
    for (Eigen::Index j = j0; j < j0 + nk; ++j) {
      if (!key_in_chunks(b, j, lo, lo)) return true;
    }
    return false;
  }
  /// Tree-mask row of query qi of sequence b (an offset into tree_mask), -1 without one.
  std::int64_t tree_row(Eigen::Index b, Eigen::Index qi) const {
    return tree_mask ? static_cast<std::int64_t>((b * q_len + qi) * q_len) : -1;
  }
  /// Whether keys [j0, j0 + nk) reach the draft tokens of a tree mask.
  bool tree_cut(Eigen::Index b, Eigen::Index j0, Eigen::Index nk) const {
    return tree_mask && j0 + nk > keys_of(b) - q_len;
  }
  /// Row j (kv head 0) of sequence b in K, and in V.
  const TKV* k_row(Eigen::Index b, Eigen::Index j) const {
    return row_in(k, kv_heads * d, k_batch_stride, b, j);
  }
  const TKV* v_row(Eigen::Index b, Eigen::Index j) const {
    return row_in(v, v_row_elems, v_batch_stride, b, j);
  }
  const TKV* row_in(const TKV* base, Eigen::Index row, Eigen::Index batch_stride, Eigen::Index b,
                    Eigen::Index j) const {
    if (!page_table) return base + b * batch_stride + j * row;
    const Eigen::Index page = page_table[b * page_table_stride + j / page_size];
    return base + (page * page_size + j % page_size) * row;
  }
  /// Keys [j, kv_run_end(j)) are consecutive rows (kv_heads * d apart in K, v_row_elems in V).
  Eigen::Index kv_run_end(Eigen::Index j) const {
    return page_table ? (j / page_size + 1) * page_size : std::numeric_limits<Eigen::Index>::max();
  }

  /// Draft tokens query qi of sequence b sees under the tree mask: its depth, counting itself.
  Eigen::Index tree_depth(Eigen::Index b, Eigen::Index qi) const {
    const std::uint8_t* row = tree_mask + tree_row(b, qi);
    return static_cast<Eigen::Index>(
        std::count_if(row, row + qi + 1, [](std::uint8_t m) { return m != 0; }));
  }
  /// Keys [first, last] that query qi of sequence b may see before key padding: the causal
  /// limit (bottom-right, a = qi + k_len - q_len) and the sliding window (a - j < window, and
  /// j - a < window when bidirectional), within [0, k_len). last < first when none. Under a
  /// tree mask the window is that of the query's own sequence, the prefix and its path: it
  /// ends at slot k_len - q_len + depth - 1, the query's slot with its siblings' slots taken
  /// out (validate_tree_mask keeps the whole path inside the window).
  std::pair<Eigen::Index, Eigen::Index> visible_keys(Eigen::Index b, Eigen::Index qi) const {
    const Eigen::Index keys = keys_of(b);
    const Eigen::Index a = keys - q_len + qi;
    Eigen::Index first = 0, last = keys - 1;
    if (causal) last = std::min(last, a);
    if (window > 0) {
      const Eigen::Index end = tree_mask ? keys - q_len + tree_depth(b, qi) - 1 : a;
      first = std::max(first, end - window + 1);
      last = std::min(last, a + window - 1);
    }
    return {first, last};
  }
  /// {lowest, highest} first visible key of queries [qi0, qi0 + nq): the rows' windows start
  /// in query order, except under a tree mask, where they follow the rows' depths.
  std::pair<Eigen::Index, Eigen::Index> window_starts(Eigen::Index b, Eigen::Index qi0,
                                                      Eigen::Index nq) const {
    if (!tree_mask || window == 0) {
      return {visible_keys(b, qi0).first, visible_keys(b, qi0 + nq - 1).first};
    }
    Eigen::Index lo = std::numeric_limits<Eigen::Index>::max(), hi = 0;
    for (Eigen::Index qi = qi0; qi < qi0 + nq; ++qi) {
      const Eigen::Index first = visible_keys(b, qi).first;
      lo = std::min(lo, first);
      hi = std::max(hi, first);
    }
    return {lo, hi};
  }
};

/// One packet of Acc from storage T: widened in registers where attn_loads_widened_v, else
/// converted element by element.
template <typename Acc, typename T>
EIGEN_STRONG_INLINE attn_packet_t<Acc> attn_load_packet(const T* p) {
  if constexpr (attn_loads_widened_v<Acc, T>) {
    return attn_load_widened<Acc>(p);
  } else {
    EIGEN_ALIGN_MAX Acc buf[kAttnLanes<Acc>];
    for (int i = 0; i < kAttnLanes<Acc>; ++i) buf[i] = attn_kv_value<Acc>(p[i]);
    return Eigen::internal::pload<attn_packet_t<Acc>>(buf);
  }
}

// ---- micro-kernels ---------------------------------------------------------------------------

/// st[r * rs + i0 ..] = sum_c k[r][c] * qt[c * rs + i0 ..] for R keys, NP packets of rows.
template <typename Acc, int R, int NP>
inline void attn_qk_block(const Acc* qt, Eigen::Index rs, Eigen::Index i0, const Acc* k,
                          Eigen::Index k_stride, Eigen::Index d, Acc* st) {
  using P = attn_packet_t<Acc>;
  constexpr int L = kAttnLanes<Acc>;
  namespace ei = Eigen::internal;
  P acc[std::size_t{R}][std::size_t{NP}];
  POSENC_UNROLL
  for (int r = 0; r < R; ++r)
    POSENC_UNROLL
    for (int n = 0; n < NP; ++n) acc[r][n] = ei::pset1<P>(Acc(0));
  const Acc* q = qt + i0;
  for (Eigen::Index c = 0; c < d; ++c, q += rs) {
    P a[std::size_t{NP}];
    POSENC_UNROLL
    for (int n = 0; n < NP; ++n) a[n] = ei::ploadu<P>(q + n * L);
    POSENC_UNROLL
    for (int r = 0; r < R; ++r) {
      const P b = ei::pset1<P>(k[r * k_stride + c]);
      POSENC_UNROLL
      for (int n = 0; n < NP; ++n) acc[r][n] = ei::pmadd(b, a[n], acc[r][n]);
    }
  }
  POSENC_UNROLL
  for (int r = 0; r < R; ++r)
    POSENC_UNROLL
    for (int n = 0; n < NP; ++n) ei::pstoreu(st + r * rs + i0 + n * L, acc[r][n]);
}

/// O[i0 + r][c0 ..] = alpha[i0 + r] O[..] + sum_j st[j * rs + i0 + r] v[j][c0 ..], R rows x NP
/// packets of columns.
template <typename Acc, int R, int NP>
inline void attn_pv_block(const Acc* st, Eigen::Index rs, Eigen::Index i0, const Acc* alpha,
                          const Acc* v, Eigen::Index v_stride, Eigen::Index nk, Acc* o,
                          Eigen::Index d, Eigen::Index c0) {
  using P = attn_packet_t<Acc>;
  constexpr int L = kAttnLanes<Acc>;
  namespace ei = Eigen::internal;
  P acc[std::size_t{R}][std::size_t{NP}];
  POSENC_UNROLL
  for (int r = 0; r < R; ++r) {
    const P a = ei::pset1<P>(alpha[i0 + r]);
    POSENC_UNROLL
    for (int n = 0; n < NP; ++n) acc[r][n] = ei::pmul(a, ei::ploadu<P>(o + (i0 + r) * d + c0 + n * L));
  }
  const Acc* p = st + i0;
  const Acc* vj = v + c0;
  for (Eigen::Index j = 0; j < nk; ++j, p += rs, vj += v_stride) {
    P b[std::size_t{NP}];
    POSENC_UNROLL
    for (int n = 0; n < NP; ++n) b[n] = ei::ploadu<P>(vj + n * L);
    POSENC_UNROLL
    for (int r = 0; r < R; ++r) {
      const P pr = ei::pset1<P>(p[r]);
      POSENC_UNROLL
      for (int n = 0; n < NP; ++n) acc[r][n] = ei::pmadd(pr, b[n], acc[r][n]);
    }
  }
  POSENC_UNROLL
  for (int r = 0; r < R; ++r)
    POSENC_UNROLL
    for (int n = 0; n < NP; ++n) ei::pstoreu(o + (i0 + r) * d + c0 + n * L, acc[r][n]);
}

/// Scalar column tail of the PV product (head_dim not a multiple of the packet size).
template <typename Acc>
inline void attn_pv_scalar(const Acc* st, Eigen::Index rs, Eigen::Index nrows, const Acc* alpha,
                           const Acc* v, Eigen::Index v_stride, Eigen::Index nk, Acc* o,
                           Eigen::Index d, Eigen::Index c0) {
  for (Eigen::Index r = 0; r < nrows; ++r) {
    for (Eigen::Index c = c0; c < d; ++c) {
      Acc acc = alpha[r] * o[r * d + c];
      for (Eigen::Index j = 0; j < nk; ++j) acc += st[j * rs + r] * v[j * v_stride + c];
      o[r * d + c] = acc;
    }
  }
}

template <typename Acc, int NP>
inline void attn_qk_rows(const Acc* qt, Eigen::Index rs, Eigen::Index i0, const Acc* k,
                         Eigen::Index k_stride, Eigen::Index d, Eigen::Index nk, Acc* st) {
  Eigen::Index j = 0;
  for (; j + kAttnBlock <= nk; j += kAttnBlock) {
    attn_qk_block<Acc, kAttnBlock, NP>(qt, rs, i0, k + j * k_stride, k_stride, d, st + j * rs);
  }
  const Acc* kj = k + j * k_stride;
  Acc* sj = st + j * rs;
  switch (nk - j) {
    case 5: attn_qk_block<Acc, 5, NP>(qt, rs, i0, kj, k_stride, d, sj); break;
    case 4: attn_qk_block<Acc, 4, NP>(qt, rs, i0, kj, k_stride, d, sj); break;
    case 3: attn_qk_block<Acc, 3, NP>(qt, rs, i0, kj, k_stride, d, sj); break;
    case 2: attn_qk_block<Acc, 2, NP>(qt, rs, i0, kj, k_stride, d, sj); break;
    case 1: attn_qk_block<Acc, 1, NP>(qt, rs, i0, kj, k_stride, d, sj); break;
    default: break;
  }
}

/// Which of a K/V tile's keys a block of rows needs. Rows are in query order, so the block's last
/// row sees the most keys under the causal mask, and its first row the earliest under a sliding
/// window (both ends move one key per query position). Keys outside that range are masked for
/// every row of the block (the softmax sets their scores to -inf whatever the QK product left
/// there, and their P entries are exactly 0), so the micro-kernels skip them instead of
/// computing the triangles.
struct AttnTileKeys {
  Eigen::Index nk;     // keys in the tile
  Eigen::Index first;  // keys row 0 sees (nk or more when no row is cut)
  Eigen::Index group;  // rows per query position
  Eigen::Index nrows;  // real rows (padding rows follow and need nothing)
  Eigen::Index low = 0;  // row 0's window start, unclipped (far below 0 without a window)

  /// Keys visible to some row of [0, end_row) end before this one.
  Eigen::Index upto(Eigen::Index end_row) const {
    const Eigen::Index last = std::min(end_row, nrows) - 1;
    return std::clamp<Eigen::Index>(first + last / group, 0, nk);
  }
  /// ... and start at this one, for rows [start_row, ..).
  Eigen::Index from(Eigen::Index start_row) const {
    return std::clamp<Eigen::Index>(low + std::min(start_row, nrows) / group, 0, nk);
  }
};

/// S^T [nk, rs] for the first `vec_rows` rows (a whole number of packets); per packet pair only
/// the keys its rows can see.
template <typename Acc>
inline void attn_qk(const Acc* qt, Eigen::Index rs, Eigen::Index vec_rows, const Acc* k,
                    Eigen::Index k_stride, Eigen::Index d, const AttnTileKeys& keys, Acc* st) {
  constexpr Eigen::Index L = kAttnLanes<Acc>;
  auto rows = [&](auto np, Eigen::Index i0) {
    constexpr int NP = decltype(np)::value;
    const Eigen::Index lo = keys.from(i0), hi = keys.upto(i0 + NP * L);
    if (hi > lo) {
      attn_qk_rows<Acc, NP>(qt, rs, i0, k + lo * k_stride, k_stride, d, hi - lo, st + lo * rs);
    }
  };
  Eigen::Index i0 = 0;
  for (; i0 + 2 * L <= vec_rows; i0 += 2 * L) rows(std::integral_constant<int, 2>{}, i0);
  if (i0 < vec_rows) rows(std::integral_constant<int, 1>{}, i0);
}

template <typename Acc, int NP>
inline void attn_pv_cols(const Acc* st, Eigen::Index rs, Eigen::Index nrows, const Acc* alpha,
                         const Acc* v, Eigen::Index v_stride, const AttnTileKeys& keys, Acc* o,
                         Eigen::Index d, Eigen::Index c0) {
  // Keys [lo, lo + n) of rows [r, ..): the block's P rows and V rows start at lo. A block that
  // sees none of the tile's keys is left as it is: its rows' maxima did not move, so alpha = 1
  // (or O = 0 while they have seen nothing).
  Eigen::Index r = 0, lo = 0, n = 0;
  auto span = [&](Eigen::Index end_row) {
    lo = keys.from(r);
    n = std::max<Eigen::Index>(keys.upto(end_row) - lo, 0);
    return st + lo * rs;
  };
  for (; r + kAttnBlock <= nrows; r += kAttnBlock) {
    const Acc* p = span(r + kAttnBlock);
    if (n > 0) {
      attn_pv_block<Acc, kAttnBlock, NP>(p, rs, r, alpha, v + lo * v_stride, v_stride, n, o, d, c0);
    }
  }
  const Acc* p = span(nrows);
  const Acc* vl = v + lo * v_stride;
  switch (n > 0 ? nrows - r : 0) {
    case 5: attn_pv_block<Acc, 5, NP>(p, rs, r, alpha, vl, v_stride, n, o, d, c0); break;
    case 4: attn_pv_block<Acc, 4, NP>(p, rs, r, alpha, vl, v_stride, n, o, d, c0); break;
    case 3: attn_pv_block<Acc, 3, NP>(p, rs, r, alpha, vl, v_stride, n, o, d, c0); break;
    case 2: attn_pv_block<Acc, 2, NP>(p, rs, r, alpha, vl, v_stride, n, o, d, c0); break;
    case 1: attn_pv_block<Acc, 1, NP>(p, rs, r, alpha, vl, v_stride, n, o, d, c0); break;
    default: break;
  }
}

/// O = alpha O + P V over all d columns for the first nrows rows; per row block only the keys
/// its rows can see (the others have P = 0).
template <typename Acc>
inline void attn_pv(const Acc* st, Eigen::Index rs, Eigen::Index nrows, const Acc* alpha,
                    const Acc* v, Eigen::Index v_stride, const AttnTileKeys& keys, Acc* o,
                    Eigen::Index d) {
  constexpr Eigen::Index L = kAttnLanes<Acc>;
  Eigen::Index c0 = 0;
  for (; c0 + 2 * L <= d; c0 += 2 * L) attn_pv_cols<Acc, 2>(st, rs, nrows, alpha, v, v_stride, keys, o, d, c0);
  if (c0 + L <= d) {
    attn_pv_cols<Acc, 1>(st, rs, nrows, alpha, v, v_stride, keys, o, d, c0);
    c0 += L;
  }
  if (c0 < d) attn_pv_scalar<Acc>(st, rs, nrows, alpha, v, v_stride, keys.nk, o, d, c0);
}

// ---- the softmax step shared by both work items ---------------------------------------------

/// Per-lane state of a work item (a lane = one output row: query position x query head),
/// [lanes] each, the padding lanes included.
template <typename Acc>
struct AttnLaneState {
  const Acc* q_rel;  // pos_q - base (ALiBi)
  const Acc* slope;  // ALiBi slope, 0 when off or padding
  const Acc* first;  // first visible key index (sliding window)
  const Acc* limit;  // last visible key index (causal mask, sliding window)
  const std::int64_t* chunk;  // floor(pos_q / chunk) (chunked attention), -1: padding lane
  const std::int64_t* tree;   // tree-mask row of the lane's query (tree attention), -1: none
  const std::int64_t* q_pos;  // the lane's query position (T5's relative bias)
  const Eigen::Index* head;   // the lane's query head (T5's relative bias, attention_bias)
  const Eigen::Index* query;  // the lane's query index (attention_bias)
  Acc* m;            // running max
  Acc* l;            // running sum of exp
  Acc* alpha;        // out: exp(m_old - m_new) of this tile
};

/// Which masks cut one K tile: some key is padding, the tile crosses some lane's first or limit
/// (range), its keys and lanes mix chunks (chunked attention), or it holds draft tokens of a
/// tree mask.
struct AttnTileCuts {
  bool padded = false, range = false, chunk = false, tree = false;
  bool any() const { return padded || range || chunk || tree; }
};

// PacketBlock<__m512, 16> drops the vector type's alignment attribute from the template
// argument; Eigen's own uses are quiet only because its headers are system headers.
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wignored-attributes"
#endif
/// Adds the caller's bias (AttentionProblem::bias) to one K tile's scores S^T[j * rs + lane].
/// Each lane reads its own row (a head's rows lie q_len * k_len floats apart), but S^T holds
/// the lanes of one key side by side: float rows are taken a packet of lanes by a packet of
/// keys and transposed in registers, so both sides move whole packets.
template <typename Acc, typename TQ, typename TKV, typename TO>
inline void attn_add_bias(const AttentionProblem<Acc, TQ, TKV, TO>& p, Eigen::Index b,
                          Eigen::Index j0, Eigen::Index nk, Acc* st, Eigen::Index rs,
                          Eigen::Index lanes, const AttnLaneState<Acc>& ls) {
  namespace ei = Eigen::internal;
  using P = attn_packet_t<Acc>;
  constexpr Eigen::Index L = kAttnLanes<Acc>;
  const float* bias_b = p.bias + b * p.bias_batch_stride + j0;
  const auto row = [&](Eigen::Index i) {
    return bias_b + ls.head[i] * p.bias_head_stride + ls.query[i] * p.bias_row_stride;
  };
  // As many streams as lanes, which the hardware prefetchers do not follow from the L3 or
  // DRAM: the next tile's part of every row is requested now.
  const Eigen::Index ahead = std::min(2 * nk, p.bias_row_stride - j0);
  for (Eigen::Index i0 = 0; i0 < lanes; i0 += L) {
    Eigen::Index j = 0;
    if constexpr (std::is_same_v<Acc, float> && L > 1) {
      std::array<const float*, static_cast<std::size_t>(L)> rows{};
      for (Eigen::Index r = 0; r < L; ++r) rows[static_cast<std::size_t>(r)] = row(i0 + r);
      for (; j + L <= nk; j += L) {
        ei::PacketBlock<P, L> block;
        for (Eigen::Index r = 0; r < L; ++r) {
          block.packet[r] = ei::ploadu<P>(rows[static_cast<std::size_t>(r)] + j);
        }
        ei::ptranspose(block);  // packet c: key j + c of lanes i0 .. i0 + L - 1
        for (Eigen::Index c = 0; c < L; ++c) {
          Acc* s = st + (j + c) * rs + i0;
          ei::pstoreu(s, ei::padd(ei::ploadu<P>(s), block.packet[c]));
        }
      }
    }
    for (Eigen::Index i = i0; i < i0 + L; ++i) {
      const float* brow = row(i);
      for (Eigen::Index jj = j; jj < nk; ++jj) st[jj * rs + i] += static_cast<Acc>(brow[jj]);
      for (Eigen::Index c = nk; c < ahead; c += 16) ei::prefetch(brow + c);
    }
  }
}
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

/// Turns one K tile's scores S^T[j * rs + lane] (j < nk, lanes a whole number of packets) into
/// P^T: the logit soft cap, ALiBi bias from absolute positions, T5's and the caller's biases,
/// key padding, the lanes' visible key ranges and chunks (-inf; only where `cuts` says the
/// tile needs them), then the online softmax update of m and l; alpha receives the factor the
/// caller rescales O by.
template <typename Acc, typename TQ, typename TKV, typename TO>
inline void attn_softmax_tile(const AttentionProblem<Acc, TQ, TKV, TO>& p, Eigen::Index b,
                              std::int64_t base, Eigen::Index j0, Eigen::Index nk,
                              AttnTileCuts cuts, Acc* st, Eigen::Index rs, Eigen::Index lanes,
                              const AttnLaneState<Acc>& ls) {
  namespace ei = Eigen::internal;
  using P = attn_packet_t<Acc>;
  constexpr Eigen::Index L = kAttnLanes<Acc>;
  const P zero = ei::pset1<P>(Acc(0));
  const P neg_inf = ei::pset1<P>(-std::numeric_limits<Acc>::infinity());
  if (p.softcap > Acc(0)) {
    // Entries the micro-kernels skipped hold stale finite values; the mask below replaces them.
    using Row = Eigen::Array<Acc, Eigen::Dynamic, 1>;
    const Acc cap = p.softcap, inv_cap = Acc(1) / p.softcap;
    for (Eigen::Index j = 0; j < nk; ++j) {
      Eigen::Map<Row> row(st + j * rs, lanes);
      row = (row * inv_cap).tanh() * cap;
    }
  }
  const std::uint8_t* kmask = p.key_mask ? p.key_mask + b * p.meta_batch_stride : nullptr;
  const bool masked = cuts.any();
  if (p.alibi) {
    for (Eigen::Index j = 0; j < nk; ++j) {
      const P kr = ei::pset1<P>(static_cast<Acc>(p.k_position(b, j0 + j) - base));
      Acc* srow = st + j * rs;
      for (Eigen::Index i = 0; i < lanes; i += L) {
        const P diff = ei::psub(kr, ei::ploadu<P>(ls.q_rel + i));  // pos_k - pos_q
        const P sl = ei::ploadu<P>(ls.slope + i);
        const P bias = p.causal ? ei::pmul(sl, diff) : ei::pnegate(ei::pmul(sl, ei::pabs(diff)));
        ei::pstoreu(srow + i, ei::padd(ei::ploadu<P>(srow + i), bias));
      }
    }
  }
  if (p.rel_bias) {
    // T5: the learned bias of each lane's head at pos_k - pos_q, clamped to the span beyond
    // which the buckets no longer change.
    const std::int64_t span = p.rel_span, row = 2 * span + 1;
    for (Eigen::Index j = 0; j < nk; ++j) {
      const std::int64_t pk = p.k_position(b, j0 + j);
      Acc* srow = st + j * rs;
      for (Eigen::Index i = 0; i < lanes; ++i) {
        const std::int64_t rel = std::clamp<std::int64_t>(pk - ls.q_pos[i], -span, span);
        srow[i] += static_cast<Acc>(p.rel_bias[ls.head[i] * row + rel + span]);
      }
    }
  }
  if (p.bias) attn_add_bias(p, b, j0, nk, st, rs, lanes, ls);
  if (masked) {
    for (Eigen::Index j = 0; j < nk; ++j) {
      Acc* srow = st + j * rs;
      if (kmask && kmask[j0 + j] == 0) {
        for (Eigen::Index i = 0; i < lanes; i += L) ei::pstoreu(srow + i, neg_inf);
        continue;
      }
      if (cuts.range) {
        const P jj = ei::pset1<P>(static_cast<Acc>(j0 + j));
        for (Eigen::Index i = 0; i < lanes; i += L) {
          const P visible = ei::pand(ei::pcmp_le(jj, ei::ploadu<P>(ls.limit + i)),
                                     ei::pcmp_le(ei::ploadu<P>(ls.first + i), jj));
          ei::pstoreu(srow + i, ei::pselect(visible, ei::ploadu<P>(srow + i), neg_inf));
        }
      }
      if (cuts.chunk) {
        // Chunk indices compared as integers: positions up to 2^53 are not exact in Acc.
        const std::int64_t kc = p.k_position(b, j0 + j) / p.chunk;
        for (Eigen::Index i = 0; i < lanes; ++i) {
          if (ls.chunk[i] >= 0 && ls.chunk[i] != kc) srow[i] = -std::numeric_limits<Acc>::infinity();
        }
      }
      if (cuts.tree) {
        const Eigen::Index t = j0 + j - (p.keys_of(b) - p.q_len);  // draft token t, if >= 0
        if (t >= 0) {
          for (Eigen::Index i = 0; i < lanes; ++i) {
            if (ls.tree[i] >= 0 && p.tree_mask[ls.tree[i] + t] == 0) {
              srow[i] = -std::numeric_limits<Acc>::infinity();
            }
          }
        }
      }
    }
  }
  // Online softmax update, vectorised across lanes.
  for (Eigen::Index i = 0; i < lanes; i += L) {
    const P m_old = ei::ploadu<P>(ls.m + i);
    P m_new = m_old;
    for (Eigen::Index j = 0; j < nk; ++j) m_new = ei::pmax(m_new, ei::ploadu<P>(st + j * rs + i));
    // A row that has seen only masked keys (or -inf logits) keeps m = -inf; exponentiate
    // against 0 instead so no -inf - (-inf) = NaN appears (its P entries are all zeroed below).
    const P unseen = ei::pcmp_eq(m_new, neg_inf);
    const P m_safe = ei::pselect(unseen, zero, m_new);
    const P alpha = ei::pexp(ei::psub(m_old, m_safe));
    // A sink keeps m finite, so a row whose keys all have -inf logits is not `unseen`: with
    // sinks every tile zeroes them, or out would be ~1e-39 v instead of 0. So does a row whose
    // attention_bias masks some keys with -inf beside finite ones.
    const bool zero_neg_inf = masked || p.sinks || p.bias || ei::predux_any(unseen);
    P sum = zero;
    for (Eigen::Index j = 0; j < nk; ++j) {
      Acc* sp = st + j * rs + i;
      const P x = ei::ploadu<P>(sp);
      P e = ei::pexp(ei::psub(x, m_safe));
      // Eigen's pexp clamps its argument at -88.7, so exp(-inf) is ~1e-39, not 0: masked
      // entries are zeroed explicitly (exactly zero weight, as a mask must give), and so are
      // -inf logits (an infinite K or Q element) where they are all a row has seen (or with
      // sinks, where they may be all but the sink).
      if (zero_neg_inf) e = ei::pselect(ei::pcmp_eq(x, neg_inf), zero, e);
      ei::pstoreu(sp, e);
      sum = ei::padd(sum, e);
    }
    ei::pstoreu(ls.l + i, ei::pmadd(alpha, ei::ploadu<P>(ls.l + i), sum));
    ei::pstoreu(ls.m + i, m_new);
    ei::pstoreu(ls.alpha + i, alpha);
  }
}

/// log(sum_j exp(s_j)) of a row from its online-softmax state: l = sum_j exp(s_j - m).
/// -inf for a row that saw no key (l = 0); NaN for a row that saw a NaN logit (l = NaN).
template <typename Acc>
inline Acc attn_log_sum_exp(Acc m, Acc l) {
  return l == Acc(0) ? -std::numeric_limits<Acc>::infinity() : m + std::log(l);
}

// ---- one work item ---------------------------------------------------------------------------

/// Copies n key rows of `width` elements (stride `stride` in the caller's [.., kv_heads, d]
/// layout) into a packed [n, dst_stride] tile of Acc. Even for float storage the copy pays: one
/// kv head's rows are kv_heads * d elements apart (16 KiB for 32 x 128), and unpacked they all
/// fall in the same L1 sets and evict each other on every pass of the micro-kernels.
template <typename Acc, typename T>
inline void attn_pack_rows(const T* src, Eigen::Index stride, Eigen::Index n, Eigen::Index width,
                           Acc* dst, Eigen::Index dst_stride) {
  for (Eigen::Index j = 0; j < n; ++j) {
    const T* from = src + j * stride;
    Acc* to = dst + j * dst_stride;
    if constexpr (std::is_same_v<T, Acc>) {
      std::copy(from, from + width, to);
    } else if constexpr (attn_loads_widened_v<Acc, T>) {
      constexpr Eigen::Index L = kAttnLanes<Acc>;
      Eigen::Index c = 0;
      for (; c + L <= width; c += L) Eigen::internal::pstoreu(to + c, attn_load_widened<Acc>(from + c));
      for (; c < width; ++c) to[c] = attn_kv_value<Acc>(from[c]);
    } else if constexpr (std::is_same_v<T, Eigen::bfloat16> && std::is_same_v<Acc, float>) {
      // bfloat16 is the top half of a float: widen the bits 8 at a time (memcpy keeps it free of
      // aliasing questions; the compiler turns the block into a zero-extend + shift).
      Eigen::Index c = 0;
      for (; c + 8 <= width; c += 8) {
        std::uint16_t h[8];
        std::uint32_t w[8];
        std::memcpy(h, from + c, sizeof(h));
        for (int i = 0; i < 8; ++i) w[i] = static_cast<std::uint32_t>(h[i]) << 16;
        std::memcpy(to + c, w, sizeof(w));
      }
      for (; c < width; ++c) to[c] = static_cast<Acc>(from[c]);
    } else if constexpr (is_float8_code_v<T>) {
      for (Eigen::Index c = 0; c < width; ++c) to[c] = attn_kv_value<Acc>(from[c]);
    } else {
      using In = Eigen::Array<T, Eigen::Dynamic, 1>;
      using Out = Eigen::Array<Acc, Eigen::Dynamic, 1>;
      Eigen::Map<Out>(to, width) = Eigen::Map<const In>(from, width).template cast<Acc>();
    }
  }
}

/// How the problem is cut into work items.
struct AttentionSchedule {
  bool decode;             // attention_decode_item (q_len * group <= kAttnDecodeRows)
  Eigen::Index q_tile;     // query positions per item
  Eigen::Index slots;      // kv heads per item
  Eigen::Index key_tile;   // keys per K/V tile
  Eigen::Index q_tiles, head_groups, items;
};

inline AttentionSchedule attention_schedule(Eigen::Index batch, Eigen::Index q_len,
                                            Eigen::Index heads, Eigen::Index kv_heads,
                                            Eigen::Index d, int threads) {
  const Eigen::Index group = heads / kv_heads;
  AttentionSchedule s{};
  s.q_tile = std::max<Eigen::Index>(1, kAttnTargetRows / group);
  s.slots = 1;
  s.key_tile = kAttnKeyTile;
  const Eigen::Index per_thread = (threads + batch - 1) / batch;
  if (q_len * group <= kAttnDecodeRows) {
    // Every kv head of a sequence in one item (split only to give each thread one), so the
    // K/V rows are read whole, in address order.
    s.decode = true;
    s.q_tile = q_len;
    s.slots = std::max<Eigen::Index>(1, (kv_heads + per_thread - 1) / per_thread);
    s.key_tile = kAttnDecodeKeyTile;
  } else if (q_len * group < kAttnTargetRows && kv_heads > 1) {
    // Decode shape: one head's rows cannot fill a tile; take several heads per item instead,
    // keeping at least one item per thread.
    // The key tile follows the slots before the thread cap: tile boundaries set where the
    // online softmax rescales, so they must not move with num_threads (results would differ
    // in the last bits between thread counts).
    s.q_tile = q_len;
    s.slots = std::min(kv_heads, std::max<Eigen::Index>(1, kAttnTargetRows / (q_len * group)));
    s.key_tile = std::clamp<Eigen::Index>(kAttnMultiHeadTileElems / (s.slots * d), 8, kAttnKeyTile);
    s.slots = std::min(s.slots,
                       std::max<Eigen::Index>(1, (kv_heads + per_thread - 1) / per_thread));
  }
  s.q_tiles = (q_len + s.q_tile - 1) / s.q_tile;
  s.head_groups = (kv_heads + s.slots - 1) / s.slots;
  s.items = batch * s.head_groups * s.q_tiles;
  return s;
}

/// Computes the out rows of query positions [qi0, qi0 + nq) of batch b for every query head of
/// kv heads [g0, g0 + ns).
template <typename Acc, typename TQ, typename TKV, typename TO>
void attention_work_item(const AttentionProblem<Acc, TQ, TKV, TO>& p, Eigen::Index b,
                         Eigen::Index g0, Eigen::Index ns, Eigen::Index qi0, Eigen::Index nq,
                         Eigen::Index key_tile, AttentionTileBuffers<Acc>& ws) {
  constexpr Eigen::Index L = kAttnLanes<Acc>;
  constexpr Acc kNegInf = -std::numeric_limits<Acc>::infinity();
  const Eigen::Index group = p.heads / p.kv_heads, d = p.d, dv = p.dv, rs = ws.rows;
  const Eigen::Index nrows = nq * group;
  const Eigen::Index vec_rows = (nrows + L - 1) / L * L;
  const Eigen::Index k_len = p.keys_of(b);
  const Eigen::Index offset = k_len - p.q_len;  // bottom-right alignment
  const std::uint8_t* kmask = p.key_mask ? p.key_mask + b * p.meta_batch_stride : nullptr;
  auto q_position = [&](Eigen::Index qi) { return p.q_position(b, qi); };
  // ALiBi differences are formed relative to the tile's first query position so they stay
  // exact in Acc (|pos_q - pos_k| < 2^24 for float).
  const std::int64_t base = q_position(qi0);
  auto q_row = [&](Eigen::Index qi, Eigen::Index h) {
    return p.q + ((b * p.q_len + qi) * p.heads + h) * d;
  };

  // The tile's Q rows sit heads * d elements apart (a page each for 32 x 128 floats): ask for
  // all of them before packing so their misses overlap instead of queueing one by one.
  for (Eigen::Index s = 0; s < ns; ++s) {
    for (Eigen::Index r = 0; r < nrows; ++r) {
      const char* row = reinterpret_cast<const char*>(q_row(qi0 + r / group, (g0 + s) * group + r % group));
      for (Eigen::Index byte = 0; byte < d * static_cast<Eigen::Index>(sizeof(TQ)); byte += 64) {
        Eigen::internal::prefetch(row + byte);
      }
    }
  }
  // Per slot: row metadata, packed Q^T (scale folded in), zeroed padding rows and state.
  for (Eigen::Index s = 0; s < ns; ++s) {
    const Eigen::Index g = g0 + s;
    const auto at = [&](Eigen::Index r) { return static_cast<std::size_t>(s * rs + r); };
    Acc* qt = ws.qt.data() + s * d * rs;
    for (Eigen::Index r = 0; r < vec_rows; ++r) {
      const bool real = r < nrows;
      const Eigen::Index qi = real ? qi0 + r / group : qi0;
      const Eigen::Index h = g * group + (real ? r % group : 0);
      ws.row_q[at(r)] = qi;
      ws.row_h[at(r)] = h;
      ws.q_rel[at(r)] = static_cast<Acc>(q_position(qi) - base);
      ws.slope[at(r)] = p.alibi && real ? static_cast<Acc>(p.slopes[h]) : Acc(0);
      // Visible key range; padding rows see everything so they never go all -inf.
      const auto [first, last] = p.visible_keys(b, qi);
      ws.first[at(r)] = real ? static_cast<Acc>(first) : Acc(0);
      ws.limit[at(r)] = real ? static_cast<Acc>(last) : static_cast<Acc>(k_len);
      ws.chunk[at(r)] = real && p.chunk > 0 ? q_position(qi) / p.chunk : -1;
      ws.tree[at(r)] = real ? p.tree_row(b, qi) : -1;
      ws.qpos[at(r)] = q_position(qi);
      // A sink starts the row's online softmax as an entry of logit sink_h and no value.
      const bool sink = real && p.sinks;
      ws.m[at(r)] = sink ? static_cast<Acc>(p.sinks[h]) : kNegInf;
      ws.l[at(r)] = sink ? Acc(1) : Acc(0);
      const TQ* qrow = q_row(qi, h);
      const Acc qs = p.q_scale(b, qi, h);
      for (Eigen::Index c = 0; c < d; ++c) {
        qt[c * rs + r] = real ? static_cast<Acc>(to_compute(qrow[c])) * qs : Acc(0);
      }
      Acc* o = ws.o.data() + (s * rs + r) * dv;
      std::fill(o, o + dv, Acc(0));
    }
  }

  // Keys this tile can see at all: rows are in query order, so the ends of their visible
  // ranges move forward row by row (their starts too, but for a tree mask's).
  // Tiles stay on multiples of key_tile (the resident slots).
  const Eigen::Index first_limit = p.visible_keys(b, qi0).second;  // <= first_limit: every row
  const Eigen::Index last_limit = p.visible_keys(b, qi0 + nq - 1).second;
  const auto [row0_first, last_first] = p.window_starts(b, qi0, nq);  // >= last_first: too
  Eigen::Index j_begin = row0_first / key_tile * key_tile;
  // Row r's window starts at window_low + r / group: unclipped, so that it never overshoots
  // (no skipping under a tree mask, whose rows' windows start by depth).
  const Eigen::Index window_low =
      p.window > 0 && !p.tree_mask ? offset + qi0 - p.window + 1 : -(k_len + nq);
  Eigen::Index j_end = last_limit + 1;
  if (p.key_lengths) j_end = std::min<Eigen::Index>(j_end, p.key_lengths[b]);
  // Chunked attention: only the keys of the rows' chunks (cost grows with the chunk, not k_len).
  std::pair<std::int64_t, std::int64_t> chunks{0, 0};
  if (p.chunk > 0) {
    chunks = p.query_chunks(b, qi0, nq);
    const auto [lo, hi] = p.chunk_keys(b, chunks.first, chunks.second, j_begin, j_end);
    j_begin = std::max(j_begin, lo / key_tile * key_tile);
    j_end = std::min(j_end, hi);
  }

  const Eigen::Index kstride = ns == 1 ? d : ns * d + kAttnRowPad;
  const Eigen::Index vstride = ns == 1 ? dv : ns * dv + kAttnRowPad;
  Acc* st = ws.st.data();
  // Keys [0, resident_keys) sit at their own index and are packed at most once per call for
  // these kv heads; a later tile goes to the slot after them.
  const Eigen::Index heads_id = b * p.kv_heads + g0;
  if (ws.packed_heads != heads_id) {
    ws.packed_heads = heads_id;
    ws.packed_first = 0;
    ws.packed_keys = 0;
  }
  // K and V rows [from, to) packed at row `at` of kf / vf, one run of consecutive rows (a page
  // of a paged cache) at a time.
  auto pack = [&](Eigen::Index from, Eigen::Index to, Eigen::Index at) {
    for (Eigen::Index j = from; j < to;) {
      const Eigen::Index n = std::min(to, p.kv_run_end(j)) - j;
      Acc* kt = ws.kf.data() + (at + j - from) * kstride;
      Acc* vt = ws.vf.data() + (at + j - from) * vstride;
      attn_pack_rows(p.k_row(b, j) + g0 * d, p.kv_heads * d, n, ns * d, kt, kstride);
      if (p.v_head_elems == dv) {
        attn_pack_rows(p.v_row(b, j) + g0 * dv, p.v_row_elems, n, ns * dv, vt, vstride);
      } else {
        // Values inside wider rows (MLA's latent keys): one head's dv elements at a time.
        for (Eigen::Index s = 0; s < ns; ++s) {
          attn_pack_rows(p.v_row(b, j) + (g0 + s) * p.v_head_elems, p.v_row_elems, n, dv,
                         vt + s * dv, vstride);
        }
      }
      // A padding key's weight is exactly 0, but 0 * NaN is not: its value row, which may
      // hold anything (an unwritten cache slot, a pad token's overflow), is read as zeros.
      for (Eigen::Index t = 0; kmask && t < n; ++t) {
        if (kmask[j + t] == 0) std::fill(vt + t * vstride, vt + t * vstride + ns * dv, Acc(0));
      }
      j += n;
    }
  };

  for (Eigen::Index j0 = j_begin; j0 < j_end; j0 += key_tile) {
    const Eigen::Index nk = std::min(key_tile, j_end - j0);
    bool padded = false;
    if (kmask) {
      for (Eigen::Index j = 0; j < nk; ++j) padded |= kmask[j0 + j] == 0;
    }
    const bool upper_cut = j0 + nk - 1 > first_limit;
    const AttnTileCuts cuts{padded, upper_cut || j0 < last_first,
                            p.chunk_cut(b, j0, nk, chunks.first, chunks.second),
                            p.tree_cut(b, j0, nk)};
    // K and V are packed (and converted), one contiguous run of ns * d elements per key row:
    // the micro-kernels pass over the tile once per row / column block, and unpacked rows
    // kv_heads * d apart would all share L1 sets.
    const bool resident = j0 + nk <= ws.resident_keys;
    const Eigen::Index slot = resident ? j0 : ws.resident_keys;
    const Acc* kt = ws.kf.data() + slot * kstride;
    const Acc* vt = ws.vf.data() + slot * vstride;
    const Eigen::Index j1 = j0 + nk;
    if (!resident) {
      pack(j0, j1, slot);
    } else if (j1 < ws.packed_first || j0 > ws.packed_keys || ws.packed_keys == ws.packed_first) {
      // Apart from the packed run (a sliding window moved past it): start a new one.
      pack(j0, j1, j0);
      ws.packed_first = j0;
      ws.packed_keys = j1;
    } else {
      // Extend the run downwards (an earlier query tile's window) and upwards (more keys).
      if (j0 < ws.packed_first) pack(j0, ws.packed_first, j0);
      if (j1 > ws.packed_keys) pack(ws.packed_keys, j1, ws.packed_keys);
      ws.packed_first = std::min(ws.packed_first, j0);
      ws.packed_keys = std::max(ws.packed_keys, j1);
    }
    const AttnTileKeys keys{nk, upper_cut ? first_limit + 1 - j0 : nk, group, nrows,
                            window_low - j0};
    for (Eigen::Index s = 0; s < ns; ++s) {
      attn_qk<Acc>(ws.qt.data() + s * d * rs, rs, vec_rows, kt + s * d, kstride, d, keys, st);
      Acc* alpha = ws.alpha.data() + s * rs;
      attn_softmax_tile(p, b, base, j0, nk, cuts, st, rs, vec_rows,
                        {ws.q_rel.data() + s * rs, ws.slope.data() + s * rs,
                         ws.first.data() + s * rs, ws.limit.data() + s * rs,
                         ws.chunk.data() + s * rs, ws.tree.data() + s * rs,
                         ws.qpos.data() + s * rs, ws.row_h.data() + s * rs,
                         ws.row_q.data() + s * rs, ws.m.data() + s * rs, ws.l.data() + s * rs,
                         alpha});
      attn_pv<Acc>(st, rs, nrows, alpha, vt + s * dv, vstride, keys,
                   ws.o.data() + s * rs * dv, dv);
    }
  }

  // out = O / l; rows with no visible key (l = 0, or l = 1 from a sink alone, O = 0) give 0;
  // a NaN or +inf logit leaves l NaN, and the row NaN, as softmax gives.
  for (Eigen::Index s = 0; s < ns; ++s) {
    for (Eigen::Index r = 0; r < nrows; ++r) {
      const auto at = static_cast<std::size_t>(s * rs + r);
      const Acc l = ws.l[at];
      const Acc inv = l == Acc(0) ? Acc(0) : p.out_scale(ws.row_h[at]) / l;
      const Eigen::Index row = (b * p.q_len + ws.row_q[at]) * p.heads + ws.row_h[at];
      TO* dst = p.out + row * dv;
      const Acc* o = ws.o.data() + (s * rs + r) * dv;
      for (Eigen::Index c = 0; c < dv; ++c) dst[c] = from_value<TO>(o[c] * inv);
      if (p.lse) p.lse[row] = attn_log_sum_exp(ws.m[at], l);
    }
  }
}

// ---- decode: few rows per kv head, K / V read in place -----------------------------------------
// With at most kAttnDecodeRows rows per kv head every K / V element feeds only a few FMAs, so
// decode is bound by reading the cache. The decode item therefore reads each K / V row once,
// whole and in address order (all the item's kv heads side by side), the pattern the hardware
// prefetchers follow (started early on each page, see attn_prefetch_rows), with no copy:
// S^T = K Q^T as dot products (a block of keys x the rows, reduced together), P V as rank-KV
// updates of the O rows, which stay in L1. Reading V rows whole rather than per head and
// column block matters: one head's rows are kv_heads * d apart and share L1 sets.

#if defined(__AVX__)
/// out[jj * out_stride + r] = sum of the lanes of a[jj * R + r], for 8-float vectors, by
/// horizontal-add trees: four rows of one key take 3 adds, a lane swap and one 4-wide store;
/// eight sums 7 adds and 2 lane swaps.
template <int R, std::size_t kN>
EIGEN_STRONG_INLINE void attn_reduce_store8(const __m256 (&acc)[kN], float* out,
                                            Eigen::Index out_stride) {
  constexpr int N = int{kN};
  if constexpr (R == 4) {
    POSENC_UNROLL
    for (int jj = 0; jj < N / 4; ++jj) {
      const __m256* a = acc + 4 * jj;
      // t = [a0..a3 sums of lanes 0-3 | a0..a3 sums of lanes 4-7]
      const __m256 t = _mm256_hadd_ps(_mm256_hadd_ps(a[0], a[1]), _mm256_hadd_ps(a[2], a[3]));
      _mm_storeu_ps(out + jj * out_stride,
                    _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1)));
    }
  } else {
    POSENC_UNROLL
    for (int i0 = 0; i0 < N; i0 += 8) {
      __m256 a[8];
      POSENC_UNROLL
      for (int i = 0; i < 8; ++i) a[i] = i0 + i < N ? acc[i0 + i] : _mm256_setzero_ps();
      const __m256 u0 = _mm256_hadd_ps(_mm256_hadd_ps(a[0], a[1]), _mm256_hadd_ps(a[2], a[3]));
      const __m256 u1 = _mm256_hadd_ps(_mm256_hadd_ps(a[4], a[5]), _mm256_hadd_ps(a[6], a[7]));
      // u0 = [a0..a3 sums of lanes 0-3 | a0..a3 sums of lanes 4-7], u1 likewise for a4..a7.
      const __m256 sums = _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20),
                                        _mm256_permute2f128_ps(u0, u1, 0x31));
      EIGEN_ALIGN_MAX float tmp[8];
      _mm256_store_ps(tmp, sums);
      for (int i = 0; i < 8 && i0 + i < N; ++i) {
        out[(i0 + i) / R * out_stride + (i0 + i) % R] = tmp[i];
      }
    }
  }
}
#endif

/// out[jj * out_stride + r] = sum of the lanes of acc[jj * R + r] for the N = KJ * R sums of
/// the decode dot products. 16-float (AVX-512) sums are first folded to 8 (one add each).
template <typename Acc, int R, std::size_t kN>
EIGEN_STRONG_INLINE void attn_reduce_store(const attn_packet_t<Acc> (&acc)[kN], Acc* out,
                                           Eigen::Index out_stride) {
  constexpr int N = int{kN};
#if defined(__AVX__)
  if constexpr (std::is_same_v<Acc, float> && kAttnLanes<float> == 8) {
    attn_reduce_store8<R>(acc, out, out_stride);
    return;
  }
#endif
#if defined(__AVX512F__)
  if constexpr (std::is_same_v<Acc, float> && kAttnLanes<float> == 16) {
    __m256 folded[kN];
    POSENC_UNROLL
    for (int i = 0; i < N; ++i) {
      const __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc[i]), 1));
      folded[i] = _mm256_add_ps(_mm512_castps512_ps256(acc[i]), hi);
    }
    attn_reduce_store8<R>(folded, out, out_stride);
    return;
  }
#endif
  POSENC_UNROLL
  for (int i = 0; i < N; ++i) out[i / R * out_stride + i % R] = Eigen::internal::predux(acc[i]);
}

/// x[jj] = the packet at row jj (rows `stride` apart) + c, pinned to registers (keep_in_register;
/// 16-float packets too: f32 kv 8 decode 1.07-1.13 ms pinned, 1.33-1.36 ms not), for N rows.
template <typename Acc, std::size_t N, typename T>
EIGEN_STRONG_INLINE void attn_load_rows_pinned(const T* rows, Eigen::Index stride, Eigen::Index c,
                                               attn_packet_t<Acc> (&x)[N]) {
  POSENC_UNROLL
  for (int jj = 0; jj < int{N}; ++jj) {
    attn_packet_t<Acc> t = attn_load_packet<Acc>(rows + jj * stride + c);
    keep_in_register(t);
    x[jj] = t;
  }
}

/// out[jj * out_stride + r] = q_r . k_jj for KJ keys (k_stride apart) x R query rows (d apart).
template <typename Acc, int R, int KJ, typename TK>
EIGEN_STRONG_INLINE void attn_decode_dots(const Acc* q, Eigen::Index d, const TK* k,
                                          Eigen::Index k_stride, Acc* out,
                                          Eigen::Index out_stride) {
  using P = attn_packet_t<Acc>;
  constexpr Eigen::Index L = kAttnLanes<Acc>;
  namespace ei = Eigen::internal;
  P acc[std::size_t{KJ * R}];
  POSENC_UNROLL
  for (auto& a : acc) a = ei::pset1<P>(Acc(0));
  Eigen::Index c = 0;
  for (; c + L <= d; c += L) {
    P x[std::size_t{KJ}];
    attn_load_rows_pinned<Acc>(k, k_stride, c, x);
    POSENC_UNROLL
    for (int r = 0; r < R; ++r) {
      P qv = ei::ploadu<P>(q + r * d + c);
      keep_in_register(qv);
      POSENC_UNROLL
      for (int jj = 0; jj < KJ; ++jj) acc[jj * R + r] = ei::pmadd(qv, x[jj], acc[jj * R + r]);
    }
  }
  attn_reduce_store<Acc, R>(acc, out, out_stride);
  for (; c < d; ++c) {
    POSENC_UNROLL
    for (int jj = 0; jj < KJ; ++jj) {
      const Acc kc = attn_kv_value<Acc>(k[jj * k_stride + c]);
      POSENC_UNROLL
      for (int r = 0; r < R; ++r) out[jj * out_stride + r] += q[r * d + c] * kc;
    }
  }
}

/// o_r = alpha_r o_r + sum_jj w[jj * w_stride + r] v_jj for R rows of O (d apart) and KV
/// value rows (v_stride apart); without kRescale alpha is not read (alpha = 1).
template <typename Acc, int R, int KV, bool kRescale, typename TV>
EIGEN_STRONG_INLINE void attn_decode_pv(const Acc* w, Eigen::Index w_stride, const Acc* alpha,
                                        const TV* v, Eigen::Index v_stride, Acc* o,
                                        Eigen::Index d) {
  using P = attn_packet_t<Acc>;
  constexpr Eigen::Index L = kAttnLanes<Acc>;
  namespace ei = Eigen::internal;
  P wp[std::size_t{KV}][std::size_t{R}], ap[std::size_t{R}];
  POSENC_UNROLL
  for (int r = 0; r < R; ++r) {
    ap[r] = ei::pset1<P>(kRescale ? alpha[r] : Acc(1));
    POSENC_UNROLL
    for (int jj = 0; jj < KV; ++jj) wp[jj][r] = ei::pset1<P>(w[jj * w_stride + r]);
  }
  Eigen::Index c = 0;
  for (; c + L <= d; c += L) {
    P x[std::size_t{KV}];
    attn_load_rows_pinned<Acc>(v, v_stride, c, x);
    POSENC_UNROLL
    for (int r = 0; r < R; ++r) {
      // Loaded on its own: folded into the first FMA (vfmadd213ps from memory), the O load
      // overwrote the weight register and cost a register copy per row and packet. Zen 5,
      // A/B (3 rounds): every decode cell 1-4 % faster (f32 kv 8 0.75 -> 0.74 ms, windowed
      // 0.76 -> 0.73 ms, half 0.49 -> 0.48 ms).
      P acc = ei::ploadu<P>(o + r * d + c);
      keep_in_register(acc);
      if constexpr (kRescale) acc = ei::pmul(ap[r], acc);
      POSENC_UNROLL
      for (int jj = 0; jj < KV; ++jj) acc = ei::pmadd(wp[jj][r], x[jj], acc);
      ei::pstoreu(o + r * d + c, acc);
    }
  }
  for (; c < d; ++c) {
    POSENC_UNROLL
    for (int r = 0; r < R; ++r) {
      Acc acc = kRescale ? alpha[r] * o[r * d + c] : o[r * d + c];
      POSENC_UNROLL
      for (int jj = 0; jj < KV; ++jj) acc += w[jj * w_stride + r] * attn_kv_value<Acc>(v[jj * v_stride + c]);
      o[r * d + c] = acc;
    }
  }
}

/// The cache level a decode request fills (kL2: prefetcht1 with GCC / Clang; other compilers
/// request every line to L1 through Eigen).
enum class AttnPrefetchTo { kL1, kL2 };

EIGEN_STRONG_INLINE void attn_prefetch_line(const char* p, AttnPrefetchTo to) {
#if defined(__GNUC__)
  if (to == AttnPrefetchTo::kL2) {
    __builtin_prefetch(p, 0, 2);  // prefetcht1 on x86
    return;
  }
#endif
  Eigen::internal::prefetch(p);
}

/// Requests one cache line every `step` bytes of the first `bytes` bytes of each of the rows
/// [first, last) (rows `stride` elements apart).
///
/// The decode item makes two kinds of requests:
/// - page starts (step 4 KiB, whole rows, kAttnDecodePageAhead keys ahead): a decode row is
///   kv_heads * d elements (a page for 8 x 128 floats), read once in address order. The L2
///   stream prefetcher learns each page anew from its first misses; with the FMAs of several
///   rows per kv head between the loads it starts late on every page. One early request per
///   page starts it there, and the rest of the page streams into L2 on its own, at no
///   measurable cost from cache. Measured for 4 rows per kv head, 4096 keys, from DRAM (paired
///   read stream): float kv 8 0.66 without, 0.75-0.82 with (as the slices alone), 0.83-0.87
///   with both. They fill L2 only (AttnPrefetchTo::kL2): into L1 they arrived 32-128 KiB ahead
///   of their use, more than L1 holds. Zen 5, A/B (9 rounds): f32 kv 8 0.72-0.78 -> 0.69-0.76
///   ms; the windowed, bf16 and kv 32 steps within the noise (0-3 % faster).
/// - slices (step 64, one kv head's d elements, attn_slice_ahead keys ahead, GQA calls of
///   at least kFromMemoryBytes): 16-bit caches put twice the widening and FMA work on
///   each byte, and the stream prefetcher alone falls behind (bf16 kv 8 from DRAM: 0.42 with
///   the page starts only, 0.54-0.61 with the slices only, 0.61-0.72 with both). They cost
///   ~10 ns per (key, kv head) from cache, hence only for calls larger than the L3 can hold.
///   A slice request covers the slice's lines shifted by one line (slot s + 1's first line, the
///   row's first comes with the page start): the first load of each slot then does not wait.
///   With cache-line-aligned rows, f32 kv 8 took 0.80-0.86 ms unshifted and 0.76-0.77 ms
///   shifted (A/B, 3 rounds); rows 16 bytes off a line got the same from their split loads.
template <typename T>
EIGEN_STRONG_INLINE void attn_prefetch_rows(const T* rows, Eigen::Index stride, Eigen::Index first,
                                            Eigen::Index last, Eigen::Index bytes,
                                            Eigen::Index step,
                                            AttnPrefetchTo to = AttnPrefetchTo::kL1) {
  for (Eigen::Index i = first; i < last; ++i) {
    const char* row = reinterpret_cast<const char*>(rows + i * stride);
    for (Eigen::Index byte = 0; byte < bytes; byte += step) attn_prefetch_line(row + byte, to);
  }
}

/// The decode work item: all q_len query positions (R = q_len * group <= kAttnDecodeRows rows
/// per kv head) of batch b against the keys of kv heads [g0, g0 + ns). Lane s * R + r is row r
/// (query position r / group, head (g0 + s) * group + r % group) of slot s; Q rows and O rows
/// are stored per lane, the scores as S^T[key][lane]. kValuesLikeKeys: V rows have K's shape
/// (dv = d, rows kv_heads * d apart; every model but MLA), known at compile time: the separate
/// V geometry held in registers cost 16-bit kv 8 decode 2-3 % (Zen 5, A/B, 4 rounds: bf16
/// 444-458 vs 455-463 us, half 451-462 vs 468-474 us).
template <int R, bool kValuesLikeKeys, typename Acc, typename TQ, typename TKV, typename TO>
void attention_decode_item(const AttentionProblem<Acc, TQ, TKV, TO>& p, Eigen::Index b,
                           Eigen::Index g0, Eigen::Index ns, Eigen::Index key_tile,
                           AttentionTileBuffers<Acc>& ws) {
  constexpr Eigen::Index L = kAttnLanes<Acc>;
  // Keys per QK block (KJ x R accumulators, one reduction tree) and per PV block (KV x R
  // weights in registers).
  // The same with 16-float packets (AVX-512, 32 registers): 6 + 4 keys for four rows took
  // 1.38-1.57 ms (f32 kv 8) and 0.86-0.88 ms (bf16) against 1.07-1.13 and 0.63 ms for 3 + 3.
  constexpr int KJ = R == 1 ? 8 : R == 2 ? 4 : R == 3 ? 2 : 3;
  constexpr int KV = R <= 2 ? 4 : 3;
  // Key tiles a whole number of both blocks, so no key takes the one-key paths but the last.
  constexpr Eigen::Index kBlocks = std::lcm(KJ, KV);
  if (key_tile >= kBlocks) key_tile = key_tile / kBlocks * kBlocks;
  const Eigen::Index group = p.heads / p.kv_heads, d = p.d, rs = ws.rows;
  const Eigen::Index dv = kValuesLikeKeys ? d : p.dv;
  const Eigen::Index lanes = ns * R, vec_lanes = (lanes + L - 1) / L * L;
  const Eigen::Index k_len = p.keys_of(b);
  const std::uint8_t* kmask = p.key_mask ? p.key_mask + b * p.meta_batch_stride : nullptr;
  auto q_position = [&](Eigen::Index qi) { return p.q_position(b, qi); };
  const std::int64_t base = q_position(0);  // ALiBi differences stay exact relative to it
  Acc* qr = ws.qr.data();  // [lanes][d]
  Acc* o = ws.o.data();    // [lanes][dv]
  for (Eigen::Index lane = 0; lane < vec_lanes; ++lane) {
    const bool real = lane < lanes;
    const Eigen::Index s = lane / R, r = lane % R;
    const Eigen::Index qi = real ? r / group : 0;
    const Eigen::Index h = (g0 + s) * group + r % group;
    const auto at = static_cast<std::size_t>(lane);
    ws.row_q[at] = qi;
    ws.row_h[at] = real ? h : 0;
    ws.q_rel[at] = static_cast<Acc>(q_position(qi) - base);
    ws.slope[at] = p.alibi && real ? static_cast<Acc>(p.slopes[h]) : Acc(0);
    const auto [first, last] = p.visible_keys(b, qi);
    ws.first[at] = real ? static_cast<Acc>(first) : Acc(0);
    ws.limit[at] = real ? static_cast<Acc>(last) : static_cast<Acc>(k_len);
    ws.chunk[at] = real && p.chunk > 0 ? q_position(qi) / p.chunk : -1;
    ws.tree[at] = real ? p.tree_row(b, qi) : -1;
    ws.qpos[at] = q_position(qi);
    const bool sink = real && p.sinks;  // as in the prefill item
    ws.m[at] = sink ? static_cast<Acc>(p.sinks[h]) : -std::numeric_limits<Acc>::infinity();
    ws.l[at] = sink ? Acc(1) : Acc(0);
    if (!real) continue;
    const TQ* qrow = p.q + ((b * p.q_len + qi) * p.heads + h) * d;
    const Acc qs = p.q_scale(b, qi, h);
    for (Eigen::Index c = 0; c < d; ++c) qr[lane * d + c] = static_cast<Acc>(to_compute(qrow[c])) * qs;
    std::fill(o + lane * dv, o + (lane + 1) * dv, Acc(0));
  }
  Acc* st = ws.st.data();
  // Padding lanes are never written by the dot products: zero scores keep their softmax finite.
  for (Eigen::Index j = 0; j < key_tile; ++j) std::fill(st + j * rs + lanes, st + j * rs + vec_lanes, Acc(0));

  // Keys some query can see: from the lowest first to the last query's last.
  const Eigen::Index first_limit = p.visible_keys(b, 0).second;            // keys <= it: all
  const Eigen::Index last_limit = p.visible_keys(b, p.q_len - 1).second;
  const auto [row0_first, last_first] = p.window_starts(b, 0, p.q_len);  // keys >= last_first: all
  Eigen::Index j_begin = row0_first, j_end = last_limit + 1;
  if (p.key_lengths) j_end = std::min<Eigen::Index>(j_end, p.key_lengths[b]);
  std::pair<std::int64_t, std::int64_t> chunks{0, 0};  // as in the prefill item
  if (p.chunk > 0) {
    chunks = p.query_chunks(b, 0, p.q_len);
    std::tie(j_begin, j_end) = p.chunk_keys(b, chunks.first, chunks.second, j_begin, j_end);
  }
  // K rows are kv_heads * d elements, V rows v_row_elems with heads vh apart; the item reads
  // ns slices of each (d / dv elements).
  const Eigen::Index k_row = p.kv_heads * d;
  const Eigen::Index v_row = kValuesLikeKeys ? k_row : p.v_row_elems;
  const Eigen::Index vh = kValuesLikeKeys ? d : p.v_head_elems;
  constexpr auto kElemBytes = static_cast<Eigen::Index>(sizeof(TKV));
  const Eigen::Index k_slice_bytes = d * kElemBytes, v_slice_bytes = dv * kElemBytes;
  const Eigen::Index line = static_cast<Eigen::Index>(kCacheLineBytes / sizeof(TKV));
  const Eigen::Index k_row_bytes = ns * k_slice_bytes;
  const Eigen::Index v_row_bytes = ((ns - 1) * vh + dv) * kElemBytes;
  // Chunks far past the keys (query positions up to 2^53) leave j_begin ~2^53 above j_end:
  // an empty range, whose byte count must not be formed from the difference (it overflows).
  const Eigen::Index keys = std::max<Eigen::Index>(0, j_end - j_begin);
  const std::int64_t call_bytes =
      std::max<std::int64_t>(keys * (k_row_bytes + v_row_bytes), p.stream_bytes);
  // One row per kv head takes slice requests only for 16-bit rows (widening doubles the work
  // per byte): kv 32, Zen 5, A/B (3 rounds): bf16 2.86-3.11 -> 2.47-2.56 ms, float 4.18-4.42
  // -> 4.79-5.43 ms with them. Larger than the L3, an item of whole rows (one thread per
  // sequence) reads them in address order instead; half rows per thread (2 threads, kv 32)
  // measured slower that way (3.34-3.71 vs 2.91-3.08 ms).
  const bool stream_rows = R == 1 && ns == p.kv_heads && call_bytes >= kAttnDecodeStreamBytes;
  // FP8 rows carry a float row's arithmetic in a quarter of its bytes, so their requests pay
  // from a quarter of the size: kv 8, 4096 keys (8 MiB), Zen 5, paired with a float step that
  // evicts them as another layer would: 1.01 -> 0.72 ms.
  const std::int64_t from_memory =
      sizeof(TKV) == 1 ? kFromMemoryBytes / 4 : kFromMemoryBytes;
  const bool prefetch_slices = (R > 1 || sizeof(TKV) < 4) && !stream_rows &&
                               call_bytes >= from_memory;
  // A tile never crosses a page of a paged cache: rows [j0, run_end) follow kbase / vbase at
  // one stride, and prefetches look no further.
  for (Eigen::Index j0 = j_begin, nk = 0; j0 < j_end; j0 += nk) {
    const Eigen::Index run_end = std::min(j_end, p.kv_run_end(j0));
    nk = std::min(key_tile, run_end - j0);
    const TKV* kbase = p.k_row(b, j0) + g0 * d;
    const TKV* vbase = p.v_row(b, j0) + g0 * vh;
    if (j0 + nk == run_end && run_end < j_end) {
      // The next page of a paged cache: the prefetches below stop at this run's end, so its
      // first rows would start cold. One table lookup per page.
      const Eigen::Index next =
          std::min(kAttnDecodePageAhead, std::min(j_end, p.kv_run_end(run_end)) - run_end);
      attn_prefetch_rows(p.k_row(b, run_end) + g0 * d, k_row, 0, next, k_row_bytes, 4096,
                         AttnPrefetchTo::kL2);
      attn_prefetch_rows(p.v_row(b, run_end) + g0 * vh, v_row, 0, next, v_row_bytes, 4096,
                         AttnPrefetchTo::kL2);
    }
    // Rows [j + ahead, j + ahead + n) of this run, counted from j0.
    auto rows_ahead = [&](Eigen::Index j, Eigen::Index ahead, Eigen::Index n) {
      return std::pair{std::min(j + ahead, run_end) - j0, std::min(j + ahead + n, run_end) - j0};
    };
    // stream_rows: kv head s of row j (rows `row` elements, slices `width`),
    // kAttnDecodeBytesAhead bytes on (whole rows, so the run is contiguous); null past this
    // run. The callers request it: with the request loop inside this lambda, GCC 12 kept the
    // requests at one of its two uses only.
    auto slice_ahead = [&](const TKV* rows, Eigen::Index row, Eigen::Index width, Eigen::Index j,
                           Eigen::Index s) -> const TKV* {
      const Eigen::Index at =
          j * row + s * width + kAttnDecodeBytesAhead / static_cast<Eigen::Index>(sizeof(TKV));
      return at < (run_end - j0) * row ? rows + at : nullptr;
    };
    bool padded = false;
    if (kmask) {
      for (Eigen::Index j = 0; j < nk; ++j) padded |= kmask[j0 + j] == 0;
    }
    const AttnTileCuts cuts{padded, j0 + nk - 1 > first_limit || j0 < last_first,
                            p.chunk_cut(b, j0, nk, chunks.first, chunks.second),
                            p.tree_cut(b, j0, nk)};
    // S^T: KJ key rows at a time, each walked once from its first kv head to its last
    // (stream_rows: one at a time).
    Eigen::Index j = 0;
    if (stream_rows) {
      for (; j < nk; ++j) {
        const TKV* k = kbase + j * k_row;
        const auto [first, last] = rows_ahead(j0 + j, kAttnDecodePageAhead, 1);
        attn_prefetch_rows(kbase, k_row, first, last, k_row_bytes, 4096, AttnPrefetchTo::kL2);
        for (Eigen::Index s = 0; s < ns; ++s) {
          if (const TKV* ahead = slice_ahead(kbase, k_row, d, j, s)) {
            attn_prefetch_rows(ahead, 0, 0, 1, k_slice_bytes, 64);
          }
          attn_decode_dots<Acc, R, 1>(qr + s * R * d, d, k + s * d, k_row, st + j * rs + s * R, rs);
        }
      }
    }
    for (; j + KJ <= nk; j += KJ) {
      const TKV* k = kbase + j * k_row;
      const auto [first, last] = rows_ahead(j0 + j, kAttnDecodePageAhead, KJ);
      const auto [slice_first, slice_last] = rows_ahead(j0 + j, attn_slice_ahead<TKV>, KJ);
      attn_prefetch_rows(kbase, k_row, first, last, k_row_bytes, 4096, AttnPrefetchTo::kL2);
      for (Eigen::Index s = 0; s < ns; ++s) {
        if (prefetch_slices) {
          attn_prefetch_rows(kbase + s * d + line, k_row, slice_first, slice_last, k_slice_bytes,
                             64);
        }
        attn_decode_dots<Acc, R, KJ>(qr + s * R * d, d, k + s * d, k_row, st + j * rs + s * R, rs);
      }
    }
    for (; j < nk; ++j) {
      const TKV* k = kbase + j * k_row;
      for (Eigen::Index s = 0; s < ns; ++s) {
        attn_decode_dots<Acc, R, 1>(qr + s * R * d, d, k + s * d, k_row, st + j * rs + s * R, rs);
      }
    }
    const Acc* alpha = ws.alpha.data();
    attn_softmax_tile(p, b, base, j0, nk, cuts, st, rs, vec_lanes,
                      {ws.q_rel.data(), ws.slope.data(), ws.first.data(), ws.limit.data(),
                       ws.chunk.data(), ws.tree.data(), ws.qpos.data(), ws.row_h.data(),
                       ws.row_q.data(), ws.m.data(), ws.l.data(), ws.alpha.data()});
    // O = alpha O + P V: KV value rows at a time, each walked once from its first kv head to
    // its last; the first block applies alpha. A padding key's value row may hold anything
    // (0 * NaN is not 0): a padded tile runs over its runs of other keys [j, keys_end) only.
    for (j = 0; j < nk;) {
      Eigen::Index keys_end = nk;
      if (padded) {
        if (kmask[j0 + j] == 0) {
          // Skipped; the tile's rescale of O, which its first row carries, applied here.
          for (Eigen::Index lane = 0; j == 0 && lane < lanes; ++lane) {
            const Acc a = alpha[lane];
            if (a != Acc(1)) for (Eigen::Index c = 0; c < dv; ++c) o[lane * dv + c] *= a;
          }
          ++j;
          continue;
        }
        keys_end = j + 1;
        while (keys_end < nk && kmask[j0 + keys_end] != 0) ++keys_end;
      }
      for (; j < keys_end;) {
        const TKV* v = vbase + j * v_row;
        const Acc* w = st + j * rs;
        const bool whole = !stream_rows && j + KV <= keys_end;
        const Eigen::Index n_rows = whole ? KV : 1;
        const auto [first, last] = rows_ahead(j0 + j, kAttnDecodePageAhead, n_rows);
        const auto [slice_first, slice_last] =
            rows_ahead(j0 + j, attn_slice_ahead<TKV>, n_rows);
        attn_prefetch_rows(vbase, v_row, first, last, v_row_bytes, 4096, AttnPrefetchTo::kL2);
        for (Eigen::Index s = 0; s < ns; ++s) {
          if (const TKV* ahead = stream_rows ? slice_ahead(vbase, v_row, vh, j, s) : nullptr) {
            attn_prefetch_rows(ahead, 0, 0, 1, v_slice_bytes, 64);
          }
          if (prefetch_slices) {
            attn_prefetch_rows(vbase + s * vh + line, v_row, slice_first, slice_last, v_slice_bytes,
                               64);
          }
          const Acc* a = alpha + s * R;
          Acc* os = o + s * R * dv;
          // Once the running maxima settle alpha is exactly 1 and O stays as it is.
          bool rescale = false;
          if (j == 0) {
            for (int r = 0; r < R; ++r) rescale |= a[r] != Acc(1);
          }
          if (rescale && whole) {
            attn_decode_pv<Acc, R, KV, true>(w + s * R, rs, a, v + s * vh, v_row, os, dv);
          } else if (whole) {
            attn_decode_pv<Acc, R, KV, false>(w + s * R, rs, a, v + s * vh, v_row, os, dv);
          } else if (rescale) {
            attn_decode_pv<Acc, R, 1, true>(w + s * R, rs, a, v + s * vh, v_row, os, dv);
          } else {
            attn_decode_pv<Acc, R, 1, false>(w + s * R, rs, a, v + s * vh, v_row, os, dv);
          }
        }
        j += whole ? KV : 1;
      }
    }
  }

  // out = O / l; rows with no visible key (l = 0, or l = 1 from a sink alone, O = 0) give 0;
  // a NaN or +inf logit leaves l NaN, and the row NaN, as softmax gives.
  for (Eigen::Index lane = 0; lane < lanes; ++lane) {
    const auto at = static_cast<std::size_t>(lane);
    const Acc l = ws.l[at];
    const Acc inv = l == Acc(0) ? Acc(0) : p.out_scale(ws.row_h[at]) / l;
    const Eigen::Index row = (b * p.q_len + ws.row_q[at]) * p.heads + ws.row_h[at];
    TO* dst = p.out + row * dv;
    for (Eigen::Index c = 0; c < dv; ++c) dst[c] = from_value<TO>(o[lane * dv + c] * inv);
    if (p.lse) p.lse[row] = attn_log_sum_exp(ws.m[at], l);
  }
}

/// Runs every work item over `threads` threads (the caller's thread included), handed out one
/// at a time from an atomic counter so uneven causal tiles balance out.
template <typename Acc, typename TQ, typename TKV, typename TO>
void run_attention(const AttentionProblem<Acc, TQ, TKV, TO>& p,
                   std::vector<AttentionTileBuffers<Acc>>& buffers, int threads) {
  const AttentionSchedule sched =
      attention_schedule(p.batch, p.q_len, p.heads, p.kv_heads, p.d, threads);
  const Eigen::Index group = p.heads / p.kv_heads;
  threads = static_cast<int>(std::min<Eigen::Index>(threads, sched.items));
  if (static_cast<int>(buffers.size()) < threads) buffers.resize(static_cast<std::size_t>(threads));
  // Decode items keep one row of state per lane (slot x row) and read K / V in place: their
  // buffers are one "slot" of slots * rows lanes, without the K / V pack buffers.
  for (int t = 0; t < threads; ++t) {
    auto& ws = buffers[static_cast<std::size_t>(t)];
    if (sched.decode) {
      ws.reserve(sched.slots * p.q_len * group, p.d, p.dv, sched.key_tile, 1, p.k_len, false);
    } else {
      // Packed rows are kept only when a kv head has several work items to reuse them; with one
      // they would only be written back from the cache.
      ws.reserve(sched.q_tile * group, p.d, p.dv, sched.key_tile, sched.slots,
                 sched.q_tiles > 1 ? p.k_len : 0);
    }
  }
  const bool values_like_keys =
      p.dv == p.d && p.v_head_elems == p.d && p.v_row_elems == p.kv_heads * p.d;
  std::atomic<Eigen::Index> next{0};
  auto worker = [&](int t) {
    auto& ws = buffers[static_cast<std::size_t>(t)];
    for (Eigen::Index item = next.fetch_add(1); item < sched.items; item = next.fetch_add(1)) {
      // Tiles of one (batch, kv heads) run back to back, so its K/V stay in cache between them;
      // within it the causal tiles with the most keys go first.
      const Eigen::Index bh = item / sched.q_tiles;
      const Eigen::Index tile = sched.q_tiles - 1 - item % sched.q_tiles;
      const Eigen::Index b = bh / sched.head_groups;
      const Eigen::Index g0 = (bh % sched.head_groups) * sched.slots;
      const Eigen::Index qi0 = tile * sched.q_tile;
      const Eigen::Index ns = std::min(sched.slots, p.kv_heads - g0);
      if (sched.decode) {
        const auto decode = [&](auto rows) {
          constexpr int R = decltype(rows)::value;
          if (values_like_keys) {
            attention_decode_item<R, true>(p, b, g0, ns, sched.key_tile, ws);
          } else {
            attention_decode_item<R, false>(p, b, g0, ns, sched.key_tile, ws);
          }
        };
        switch (p.q_len * group) {
          case 1: decode(std::integral_constant<int, 1>{}); break;
          case 2: decode(std::integral_constant<int, 2>{}); break;
          case 3: decode(std::integral_constant<int, 3>{}); break;
          default: decode(std::integral_constant<int, 4>{}); break;
        }
      } else {
        attention_work_item(p, b, g0, ns, qi0, std::min(sched.q_tile, p.q_len - qi0),
                            sched.key_tile, ws);
      }
    }
  };
  if (threads <= 1) {
    worker(0);
    return;
  }
  // A thread the system refuses (std::system_error: limits on threads or memory) is not an
  // error here: the items are handed out from one counter, so the threads that did start and
  // the caller's drain them all, with the same bits (the schedule was fixed above). Unwinding
  // past joinable threads would std::terminate instead.
  std::vector<std::thread> pool;
  pool.reserve(static_cast<std::size_t>(threads - 1));
  for (int t = 1; t < threads; ++t) {
    try {
      pool.emplace_back(worker, t);
    } catch (const std::system_error&) {
      break;
    }
  }
  worker(0);
  for (auto& th : pool) th.join();
}

#ifdef POSENC_EXTERN_KERNELS
// Compiled once, in the unit that includes posenc/kernel_instances.hpp.
POSENC_DETAIL_ATTENTION_INSTANCES(extern template)
#endif

}  // namespace posenc::detail
