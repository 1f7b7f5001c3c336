// Attention whose value heads differ in width from its query / key heads. DeepSeek's MLA
// without weight absorption attends with q.k over 192 dims (128 "nope" + 64 rotated) and values
// of 128 (HF DeepseekV3Attention: qk_head_dim, v_head_dim); the absorbed form is MQA over a
// 576-wide key (512 latent + 64 rotated) whose value is the 512-wide latent. Shapes here are
// scaled down but keep the structure (and cross the kernels' packet and tile boundaries).
//
// Expected values: softmax(scale Q K^T + ALiBi + causal mask) V written out below loop by loop
// in long double (scale 1/sqrt(head_dim of Q and K), as DeepSeek's softmax_scale), and RoPE
// pairs turned in long double at theta^(-2j/r) — not through any posenc code.

#include <catch2/catch.hpp>

#include <posenc/attention.hpp>
#include <posenc/attention_mla.hpp>
#include <posenc/attention_paged.hpp>
#include <posenc/attention_rope.hpp>
#include <posenc/attention_varlen.hpp>
#include <posenc/diagnostics.hpp>
#include <posenc/kv_cache.hpp>
#include <posenc/paged_kv_cache.hpp>
#include <posenc/reference/attention.hpp>
#include <posenc/rope.hpp>
#include <posenc/rope_frequencies.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <ostream>
#include <string>
#include <vector>

#include "support/check.hpp"
#include "support/rng.hpp"

using Catch::Matchers::Contains;
using posenc::AttentionParams;
using posenc::ConstTensorView;
using posenc::TensorView;

namespace {

/// Sizes of one problem; prints as its aggregate in CAPTURE.
struct MlaShape {
  Eigen::Index batch, q_len, k_len, heads, kv_heads, d, dv;
};
std::ostream& operator<<(std::ostream& os, const MlaShape& s) {
  return os << "MlaShape{" << s.batch << ", " << s.q_len << ", " << s.k_len << ", " << s.heads
            << ", " << s.kv_heads << ", " << s.d << ", " << s.dv << "}";
}

/// Q [batch, q_len, heads, d], K [batch, k_len, kv_heads, d], V [batch, k_len, kv_heads, dv],
/// uniform in [-1, 1) (Q and K times `amplitude`), stored as T.
template <typename T>
struct MlaProblem {
  MlaShape s;
  std::vector<T> q, k, v;
  MlaProblem(const MlaShape& shape, std::uint64_t seed, double amplitude = 1.0) : s(shape) {
    q = draw(s.batch * s.q_len * s.heads * s.d, seed, amplitude);
    k = draw(s.batch * s.k_len * s.kv_heads * s.d, seed + 1, amplitude);
    v = draw(s.batch * s.k_len * s.kv_heads * s.dv, seed + 2, 1.0);
  }
  static std::vector<T> draw(Eigen::Index n, std::uint64_t seed, double a) {
    posenc_test::SplitMix64 rng(seed);
    std::vector<T> x(static_cast<std::size_t>(n));
    for (auto& e : x) e = T(static_cast<float>(a * rng.uniform()));
    return x;
  }
  ConstTensorView<T, 4> qv() const { return {q.data(), s.batch, s.q_len, s.heads, s.d}; }
  ConstTensorView<T, 4> kv() const { return {k.data(), s.batch, s.k_len, s.kv_heads, s.d}; }
  ConstTensorView<T, 4> vv() const { return {v.data(), s.batch, s.k_len, s.kv_heads, s.dv}; }
};

using posenc::detail::to_double;  // exact for every storage type

/// softmax(scale q.k - slope_h (pos_q - pos_k) | causal bottom-right, key_valid) v in long
/// double; q [B, Lq, H, d], k [B, Lk, G, d], v [B, Lk, G, dv]; query i at Lk - Lq + i, key j
/// at j; scale 0: 1 / sqrt(d). Returns [B, Lq, H, dv]; a row with no visible key is 0.
template <typename T>
std::vector<long double> expected_attention(const MlaShape& s, const std::vector<T>& q,
                                            const std::vector<T>& k, const std::vector<T>& v,
                                            const std::vector<double>& slopes = {},
                                            const std::vector<std::uint8_t>& key_valid = {},
                                            long double scale = 0.0L) {
  std::vector<long double> out(static_cast<std::size_t>(s.batch * s.q_len * s.heads * s.dv), 0.0L);
  if (scale == 0.0L) scale = 1.0L / std::sqrt(static_cast<long double>(s.d));
  const Eigen::Index group = s.heads / s.kv_heads;
  std::vector<long double> w(static_cast<std::size_t>(s.k_len));
  for (Eigen::Index b = 0; b < s.batch; ++b) {
    for (Eigen::Index i = 0; i < s.q_len; ++i) {
      const Eigen::Index a = s.k_len - s.q_len + i;
      for (Eigen::Index h = 0; h < s.heads; ++h) {
        const Eigen::Index g = h / group;
        long double mx = -std::numeric_limits<long double>::infinity();
        for (Eigen::Index j = 0; j < s.k_len; ++j) {
          const bool visible =
              j <= a && (key_valid.empty() || key_valid[static_cast<std::size_t>(b * s.k_len + j)]);
          long double dot = 0.0L;
          for (Eigen::Index c = 0; c < s.d; ++c) {
            dot += static_cast<long double>(
                       to_double(q[static_cast<std::size_t>(((b * s.q_len + i) * s.heads + h) * s.d + c)])) *
                   to_double(k[static_cast<std::size_t>(((b * s.k_len + j) * s.kv_heads + g) * s.d + c)]);
          }
          long double logit = scale * dot;
          if (!slopes.empty()) logit -= slopes[static_cast<std::size_t>(h)] * (a - j);
          w[static_cast<std::size_t>(j)] =
              visible ? logit : -std::numeric_limits<long double>::infinity();
          mx = std::max(mx, w[static_cast<std::size_t>(j)]);
        }
        if (mx == -std::numeric_limits<long double>::infinity()) continue;
        long double sum = 0.0L;
        for (auto& x : w) {
          x = std::exp(x - mx);
          sum += x;
        }
        long double* o = &out[static_cast<std::size_t>(((b * s.q_len + i) * s.heads + h) * s.dv)];
        for (Eigen::Index j = 0; j < s.k_len; ++j) {
          const long double p = w[static_cast<std::size_t>(j)] / sum;
          for (Eigen::Index c = 0; c < s.dv; ++c) {
            o[c] += p * to_double(v[static_cast<std::size_t>(((b * s.k_len + j) * s.kv_heads + g) * s.dv + c)]);
          }
        }
      }
    }
  }
  return out;
}

/// Tolerance of a result stored as T against the long-double value: float accumulation, and
/// for 16-bit outputs the final rounding (half an ulp, relative 2^-8 / 2^-11).
template <typename T>
void require_close(const std::vector<T>& got, const std::vector<long double>& want) {
  REQUIRE(got.size() == want.size());
  double abs_tol = 1e-5, rel_tol = 0.0;
  if constexpr (std::is_same_v<T, double>) abs_tol = 1e-12;
  if constexpr (std::is_same_v<T, Eigen::bfloat16>) rel_tol = 1.0 / 128;
  if constexpr (std::is_same_v<T, Eigen::half>) rel_tol = 1.0 / 1024;
  POSENC_REQUIRE_CLOSE(posenc_test::compare(
      got.size(), [&](std::size_t i) { return to_double(got[i]); },
      [&](std::size_t i) { return static_cast<double>(want[i]); }, abs_tol, rel_tol));
}

/// DeepSeek's q / k head: [nope | rope], the rope part's pairs (nope + 2j, nope + 2j + 1)
/// (interleaved, the layout of DeepSeek's checkpoints) turned by position * theta^(-2j/r).
template <typename T>
void rotate_rope_part(std::vector<T>& x, Eigen::Index rows_per_position, Eigen::Index d,
                      Eigen::Index nope, const std::vector<std::int64_t>& row_position,
                      long double theta) {
  const Eigen::Index r = d - nope;
  for (std::size_t row = 0; row < row_position.size(); ++row) {
    const auto pos = static_cast<long double>(row_position[row]);
    for (Eigen::Index h = 0; h < rows_per_position; ++h) {
      T* head = x.data() + (static_cast<Eigen::Index>(row) * rows_per_position + h) * d + nope;
      for (Eigen::Index j = 0; j < r / 2; ++j) {
        const long double angle = pos * std::pow(theta, -2.0L * j / r);
        const long double a = to_double(head[2 * j]), b = to_double(head[2 * j + 1]);
        head[2 * j] = T(static_cast<float>(a * std::cos(angle) - b * std::sin(angle)));
        head[2 * j + 1] = T(static_cast<float>(a * std::sin(angle) + b * std::cos(angle)));
      }
    }
  }
}

/// RoPE on the last d - offset dims of a d-wide head (DeepSeek's [nope | rope] head, or a
/// latent row [c_kv | k_pe]), interleaved pairs as DeepSeek's checkpoints, theta 10^4.
posenc::RopeFrequencies tail_rope(Eigen::Index d, Eigen::Index offset) {
  posenc::RopeParams rp;
  rp.head_dim = d;
  rp.rotary_dim = d - offset;
  rp.rotary_offset = offset;
  rp.theta = 10000.0;
  rp.layout = posenc::RopeLayout::kInterleaved;
  return posenc::compute_rope_frequencies(rp);
}
constexpr long double kTheta = 10000.0L;

/// Rows [from, from + count) of width `width` of x, as T.
template <typename T>
std::vector<T> rows_as(const std::vector<float>& x, Eigen::Index from, Eigen::Index count,
                       Eigen::Index width) {
  std::vector<T> out(static_cast<std::size_t>(count * width));
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = T(x[static_cast<std::size_t>(from * width) + i]);
  return out;
}

/// The first dv of every [.., d] row: the values of a latent cache, as their own tensor.
template <typename T>
std::vector<T> latent_values(const std::vector<T>& kv, Eigen::Index d, Eigen::Index dv) {
  std::vector<T> v;
  for (std::size_t row = 0; row * static_cast<std::size_t>(d) < kv.size(); ++row) {
    const auto first = kv.begin() + static_cast<std::ptrdiff_t>(row) * d;
    v.insert(v.end(), first, first + dv);
  }
  return v;
}

}  // namespace

TEMPLATE_TEST_CASE("attention mla: values narrower or wider than q / k equal the long-double "
                   "softmax(QK^T / sqrt(d)) V, prefill and decode shapes",
                   "[attention][mla]", float, double, Eigen::bfloat16) {
  using T = TestType;
  // d / dv pairs: DeepSeek's 192 / 128 scaled down (48 / 32), values wider than keys, sizes
  // that leave scalar column tails (20 / 12: not a multiple of 8 or 16 floats).
  const MlaShape shapes[] = {
      {2, 37, 37, 4, 4, 48, 32},    // MHA prefill (MLA without absorption)
      {1, 70, 70, 4, 2, 20, 12},    // GQA prefill, odd widths, keys past one tile
      {1, 1, 133, 4, 4, 48, 32},    // decode, one row per kv head
      {2, 1, 70, 8, 2, 40, 24},     // decode, 4 rows per kv head
      {1, 3, 130, 2, 1, 24, 56},    // a few queries, values wider than keys
      {1, 2, 65, 16, 1, 72, 64},    // absorbed MLA: MQA, 16 heads over one latent key
  };
  for (const MlaShape& s : shapes) {
    for (const bool alibi : {false, true}) {
      for (const int threads : {1, 2}) {
        CAPTURE(s, alibi, threads);
        const MlaProblem<T> p(s, 1000 + static_cast<std::uint64_t>(s.d * 7 + s.dv), 2.0);
        AttentionParams params;
        params.num_threads = threads;
        if (alibi) params.alibi_slopes = posenc::alibi_slopes(s.heads);
        std::vector<T> out(static_cast<std::size_t>(s.batch * s.q_len * s.heads * s.dv),
                           T(-7.0f));
        posenc::attention<T>(p.qv(), p.kv(), p.vv(),
                             TensorView<T, 4>(out.data(), s.batch, s.q_len, s.heads, s.dv),
                             params);
        require_close(out, expected_attention(s, p.q, p.k, p.v, params.alibi_slopes));
        // The materialising reference path takes the same shapes.
        std::vector<T> ref(out.size(), T(-7.0f));
        posenc::reference::attention<T>(
            p.qv(), p.kv(), p.vv(), TensorView<T, 4>(ref.data(), s.batch, s.q_len, s.heads, s.dv),
            params);
        require_close(ref, expected_attention(s, p.q, p.k, p.v, params.alibi_slopes));
      }
    }
  }
}

TEST_CASE("attention mla: the log-sum-exp output and a bfloat16 key cache with float queries "
          "keep the narrow values", "[attention][mla]") {
  const MlaShape s{1, 1, 96, 8, 1, 40, 32};
  const MlaProblem<float> p(s, 77, 2.0);
  // Paged: one sequence in pages of 16 rows, handed out in reverse, the pool bfloat16.
  const Eigen::Index page = 16, pages = s.k_len / page;
  std::vector<Eigen::bfloat16> kp(static_cast<std::size_t>(s.k_len * s.d)),
      vp(static_cast<std::size_t>(s.k_len * s.dv));
  std::vector<float> k_rounded(p.k.size()), v_rounded(p.v.size());
  std::vector<std::int32_t> table(static_cast<std::size_t>(pages));
  for (Eigen::Index i = 0; i < pages; ++i) table[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(pages - 1 - i);
  for (Eigen::Index j = 0; j < s.k_len; ++j) {
    const Eigen::Index row = table[static_cast<std::size_t>(j / page)] * page + j % page;
    for (Eigen::Index c = 0; c < s.d; ++c) {
      const auto x = Eigen::bfloat16(p.k[static_cast<std::size_t>(j * s.d + c)]);
      kp[static_cast<std::size_t>(row * s.d + c)] = x;
      k_rounded[static_cast<std::size_t>(j * s.d + c)] = static_cast<float>(x);
    }
    for (Eigen::Index c = 0; c < s.dv; ++c) {
      const auto x = Eigen::bfloat16(p.v[static_cast<std::size_t>(j * s.dv + c)]);
      vp[static_cast<std::size_t>(row * s.dv + c)] = x;
      v_rounded[static_cast<std::size_t>(j * s.dv + c)] = static_cast<float>(x);
    }
  }
  const std::vector<std::int64_t> lens{s.k_len};
  std::vector<float> out(static_cast<std::size_t>(s.heads * s.dv), -7.0f),
      lse(static_cast<std::size_t>(s.heads), -7.0f);
  posenc::attention_paged<float, Eigen::bfloat16>(
      p.qv(), ConstTensorView<Eigen::bfloat16, 4>(kp.data(), pages, page, 1, s.d),
      ConstTensorView<Eigen::bfloat16, 4>(vp.data(), pages, page, 1, s.dv),
      ConstTensorView<std::int32_t, 2>(table.data(), 1, pages),
      ConstTensorView<std::int64_t, 1>(lens.data(), 1),
      TensorView<float, 4>(out.data(), 1, 1, s.heads, s.dv), {}, nullptr,
      TensorView<float, 3>(lse.data(), 1, 1, s.heads));
  require_close(out, expected_attention(s, p.q, k_rounded, v_rounded));
  // lse = log sum_j exp(q.k_j / sqrt(d)), over the rounded keys.
  for (Eigen::Index h = 0; h < s.heads; ++h) {
    long double sum = 0.0L;
    for (Eigen::Index j = 0; j < s.k_len; ++j) {
      long double dot = 0.0L;
      for (Eigen::Index c = 0; c < s.d; ++c) {
        dot += static_cast<long double>(p.q[static_cast<std::size_t>(h * s.d + c)]) *
               k_rounded[static_cast<std::size_t>(j * s.d + c)];
      }
      sum += std::exp(dot / std::sqrt(static_cast<long double>(s.d)));
    }
    CHECK(std::abs(lse[static_cast<std::size_t>(h)] - static_cast<double>(std::log(sum))) < 2e-5);
  }
}

TEST_CASE("attention mla: packed variable-length sequences with narrow values", "[attention][mla]") {
  // Three sequences (q, k) = (3, 5), (0, 2), (4, 9), 4 heads over 2 kv heads, d 24, dv 16.
  const std::vector<std::int64_t> cu_q{0, 3, 3, 7}, cu_k{0, 5, 7, 16};
  const Eigen::Index H = 4, G = 2, d = 24, dv = 16;
  const auto q = MlaProblem<float>::draw(7 * H * d, 5, 2.0);
  const auto k = MlaProblem<float>::draw(16 * G * d, 6, 2.0);
  const auto v = MlaProblem<float>::draw(16 * G * dv, 7, 1.0);
  std::vector<float> out(static_cast<std::size_t>(7 * H * dv), -7.0f);
  posenc::attention_varlen<float>(
      ConstTensorView<float, 3>(q.data(), 7, H, d), ConstTensorView<float, 3>(k.data(), 16, G, d),
      ConstTensorView<float, 3>(v.data(), 16, G, dv), TensorView<float, 3>(out.data(), 7, H, dv),
      ConstTensorView<std::int64_t, 1>(cu_q.data(), 4),
      ConstTensorView<std::int64_t, 1>(cu_k.data(), 4));
  for (std::size_t sq = 0; sq < 3; ++sq) {
    const MlaShape s{1, cu_q[sq + 1] - cu_q[sq], cu_k[sq + 1] - cu_k[sq], H, G, d, dv};
    if (s.q_len == 0) continue;
    CAPTURE(sq);
    const auto slice = [](const std::vector<float>& x, std::int64_t from, std::int64_t to,
                          Eigen::Index width) {
      return std::vector<float>(x.begin() + from * width, x.begin() + to * width);
    };
    const auto want = expected_attention(s, slice(q, cu_q[sq], cu_q[sq + 1], H * d),
                                         slice(k, cu_k[sq], cu_k[sq + 1], G * d),
                                         slice(v, cu_k[sq], cu_k[sq + 1], G * dv));
    require_close(slice(out, cu_q[sq], cu_q[sq + 1], H * dv), want);
  }
}

TEMPLATE_TEST_CASE("attention mla: KvCache with v_head_dim — prefill, decode steps and an erase "
                   "equal the long-double attention over DeepSeek-style [nope | rope] heads",
                   "[attention][mla][kv_cache]", float, Eigen::bfloat16, Eigen::half) {
  using T = TestType;
  // 4 heads of q.k width 48 = 32 nope + 16 rope, values 32; positions 0 .. 11.
  const Eigen::Index H = 4, d = 48, nope = 32, dv = 32, n = 8, steps = 4, L = n + steps;
  const MlaShape full{1, L, L, H, H, d, dv};
  // The inputs as the caller holds them in T (rounded once here), kept in float.
  MlaProblem<float> p(full, 31, 2.0);
  for (auto* x : {&p.q, &p.k, &p.v}) {
    for (float& e : *x) e = static_cast<float>(T(e));
  }
  posenc::KvCache<T> cache(1, L, H, d, 0, dv);
  REQUIRE(cache.v_head_dim() == dv);
  REQUIRE(cache.values().dimension(3) == dv);
  cache.set_rope(tail_rope(d, nope), posenc::RopeLayout::kInterleaved);

  // Expected: the keys as the cache stores them (rotated in long double, rounded to T), the
  // queries rotated in long double.
  std::vector<std::int64_t> positions(static_cast<std::size_t>(L));
  for (Eigen::Index i = 0; i < L; ++i) positions[static_cast<std::size_t>(i)] = i;
  std::vector<float> q_rot = p.q, k_rot = p.k;
  rotate_rope_part(q_rot, H, d, nope, positions, kTheta);
  rotate_rope_part(k_rot, H, d, nope, positions, kTheta);
  std::vector<float> k_stored(k_rot.size()), v_stored(p.v.size());
  for (std::size_t i = 0; i < k_rot.size(); ++i) k_stored[i] = static_cast<float>(T(k_rot[i]));
  for (std::size_t i = 0; i < p.v.size(); ++i) v_stored[i] = p.v[i];
  const auto want_all = expected_attention(full, q_rot, k_stored, v_stored);

  // Prefill n tokens, then `steps` single-token decode steps.
  const auto rows = rows_as<T>;
  std::vector<std::int64_t> pos_chunk(positions.begin(), positions.begin() + n);
  {
    const auto k0 = rows(p.k, 0, n, H * d), v0 = rows(p.v, 0, n, H * dv), q0 = rows(p.q, 0, n, H * d);
    cache.append(ConstTensorView<T, 4>(k0.data(), 1, n, H, d),
                 ConstTensorView<T, 4>(v0.data(), 1, n, H, dv),
                 posenc::PositionIdsView(pos_chunk.data(), 1, n));
    std::vector<T> out(static_cast<std::size_t>(n * H * dv), T(-7.0f));
    cache.attend(ConstTensorView<T, 4>(q0.data(), 1, n, H, d),
                 TensorView<T, 4>(out.data(), 1, n, H, dv));
    require_close(out, std::vector<long double>(want_all.begin(), want_all.begin() + n * H * dv));
  }
  for (Eigen::Index t = n; t < L; ++t) {
    CAPTURE(t);
    const auto kt = rows(p.k, t, 1, H * d), vt = rows(p.v, t, 1, H * dv), qt = rows(p.q, t, 1, H * d);
    const std::int64_t pt = t;
    cache.append(ConstTensorView<T, 4>(kt.data(), 1, 1, H, d),
                 ConstTensorView<T, 4>(vt.data(), 1, 1, H, dv), posenc::PositionIdsView(&pt, 1, 1));
    std::vector<T> out(static_cast<std::size_t>(H * dv), T(-7.0f));
    cache.attend(ConstTensorView<T, 4>(qt.data(), 1, 1, H, d),
                 TensorView<T, 4>(out.data(), 1, 1, H, dv));
    require_close(out, std::vector<long double>(want_all.begin() + t * H * dv,
                                                want_all.begin() + (t + 1) * H * dv));
  }

  // Erase slots [2, 5): the later keys and values move down with their own widths. The last
  // query then sees slots {0, 1, 5 .. 11} at their original positions.
  cache.erase(2, 3);
  const Eigen::Index kept = L - 3;
  std::vector<float> k_kept, v_kept;
  for (Eigen::Index j = 0; j < L; ++j) {
    if (j >= 2 && j < 5) continue;
    k_kept.insert(k_kept.end(), k_stored.begin() + j * H * d, k_stored.begin() + (j + 1) * H * d);
    v_kept.insert(v_kept.end(), v_stored.begin() + j * H * dv, v_stored.begin() + (j + 1) * H * dv);
  }
  const std::vector<float> q_last(q_rot.begin() + (L - 1) * H * d, q_rot.end());
  const auto want_last = expected_attention(MlaShape{1, 1, kept, H, H, d, dv}, q_last, k_kept, v_kept);
  const auto ql = rows(p.q, L - 1, 1, H * d);
  std::vector<T> out(static_cast<std::size_t>(H * dv), T(-7.0f));
  cache.attend(ConstTensorView<T, 4>(ql.data(), 1, 1, H, d),
               TensorView<T, 4>(out.data(), 1, 1, H, dv));
  require_close(out, want_last);
}

TEST_CASE("attention mla: PagedKvCache with v_head_dim — a forked sequence's decode equals the "
          "long-double attention", "[attention][mla][paged_kv_cache]") {
  // Pages of 4 rows; the parent holds 6 tokens (a partial page), the fork copies it.
  const Eigen::Index H = 4, G = 2, d = 24, dv = 40, n = 6;
  const MlaShape s{1, 1, n + 1, H, G, d, dv};
  const auto k = MlaProblem<float>::draw((n + 1) * G * d, 11, 2.0);
  const auto v = MlaProblem<float>::draw((n + 1) * G * dv, 12, 1.0);
  const auto q = MlaProblem<float>::draw(H * d, 13, 2.0);
  posenc::PagedKvCache<float> pool(8, 4, G, d, 0, dv);
  REQUIRE(pool.v_head_dim() == dv);
  REQUIRE(pool.value_pages().dimension(3) == dv);
  const auto parent = pool.add_sequence();
  pool.append(parent, ConstTensorView<float, 3>(k.data(), n, G, d),
              ConstTensorView<float, 3>(v.data(), n, G, dv));
  const auto child = pool.fork(parent);
  // The parent's token n is overwritten in a different way: the child must not see it.
  const auto junk_k = MlaProblem<float>::draw(G * d, 14, 2.0);
  const auto junk_v = MlaProblem<float>::draw(G * dv, 15, 1.0);
  pool.append(parent, ConstTensorView<float, 3>(junk_k.data(), 1, G, d),
              ConstTensorView<float, 3>(junk_v.data(), 1, G, dv));
  pool.append(child, ConstTensorView<float, 3>(k.data() + n * G * d, 1, G, d),
              ConstTensorView<float, 3>(v.data() + n * G * dv, 1, G, dv));
  std::vector<float> out(static_cast<std::size_t>(H * dv), -7.0f);
  pool.attend({child}, ConstTensorView<float, 4>(q.data(), 1, 1, H, d),
              TensorView<float, 4>(out.data(), 1, 1, H, dv));
  require_close(out, expected_attention(s, q, k, v));
}

TEST_CASE("attention mla: shape errors name v_head_dim and write nothing", "[attention][mla][errors]") {
  const MlaShape s{1, 2, 5, 2, 1, 8, 4};
  const MlaProblem<float> p(s, 3);
  std::vector<float> out(64, -7.0f);
  const auto untouched = [&] {
    return std::all_of(out.begin(), out.end(), [](float x) { return x == -7.0f; });
  };
  // out as wide as q (8) where the values are 4 wide.
  REQUIRE_THROWS_AS(posenc::attention<float>(p.qv(), p.kv(), p.vv(),
                                             TensorView<float, 4>(out.data(), 1, 2, 2, 8)),
                    std::invalid_argument);
  REQUIRE_THROWS_WITH(posenc::attention<float>(p.qv(), p.kv(), p.vv(),
                                               TensorView<float, 4>(out.data(), 1, 2, 2, 8)),
                      Contains("out shape [1, 2, 2, 8] must be [batch, q_len, heads, v_head_dim] = "
                               "[1, 2, 2, 4]"));
  // v with other kv heads or keys than k.
  REQUIRE_THROWS_WITH(posenc::attention<float>(p.qv(), p.kv(),
                                               ConstTensorView<float, 4>(p.v.data(), 1, 4, 1, 4),
                                               TensorView<float, 4>(out.data(), 1, 2, 2, 4)),
                      Contains("v shape [1, 4, 1, 4] must be [batch, k_len, kv_heads, v_head_dim > 0]"));
  REQUIRE_THROWS_WITH(posenc::reference::attention<float>(
                          p.qv(), p.kv(), p.vv(), TensorView<float, 4>(out.data(), 1, 2, 2, 8)),
                      Contains("v_head_dim] = [1, 2, 2, 4]"));
  CHECK(untouched());

  posenc::KvCache<float> cache(1, 8, 1, 8, 0, 4);
  REQUIRE_THROWS_WITH(posenc::KvCache<float>(1, 8, 1, 8, 0, -1), Contains("v_head_dim = -1 must be >= 0"));
  REQUIRE_THROWS_WITH(posenc::PagedKvCache<float>(4, 4, 1, 8, 0, -2), Contains("v_head_dim = -2 must be >= 0"));
  const std::int64_t pos[5] = {0, 1, 2, 3, 4};
  // Values as wide as the keys: rejected, the cache stays empty.
  REQUIRE_THROWS_WITH(cache.append(p.kv(), ConstTensorView<float, 4>(p.k.data(), 1, 5, 1, 8),
                                   posenc::PositionIdsView(pos, 1, 5)),
                      Contains("[batch, n, kv_heads, v_head_dim] = [1, 5, 1, 4]"));
  CHECK(cache.size() == 0);
  cache.append(p.kv(), p.vv(), posenc::PositionIdsView(pos, 1, 5));
  REQUIRE_THROWS_WITH(cache.attend(ConstTensorView<float, 4>(p.q.data(), 1, 2, 2, 8),
                                   TensorView<float, 4>(out.data(), 1, 2, 2, 8)),
                      Contains("must be [batch, q_len, heads, v_head_dim] = [1, 2, 2, 4]"));
  CHECK(untouched());
}

TEMPLATE_TEST_CASE("attention mla: attention_latent reads the values as the first v_head_dim of "
                   "each kv row and equals the long-double attention",
                   "[attention][mla][latent]", float, Eigen::bfloat16) {
  using T = TestType;
  // (batch, q_len, k_len, heads, kv_heads, d, dv): DeepSeek's 576 / 512 latent over 128 heads,
  // scaled down; decode (4 rows per kv head: the decode item) and more rows (the tiled item),
  // one latent head and two (values strided inside the rows of both).
  const MlaShape shapes[] = {
      {1, 1, 133, 16, 1, 72, 64}, {2, 1, 70, 4, 1, 72, 64}, {1, 1, 90, 8, 2, 40, 32},
      {1, 5, 70, 4, 2, 40, 24},   {1, 2, 65, 16, 1, 20, 12},
  };
  const long double scale = 1.0L / std::sqrt(24.0L);  // 1 / sqrt(qk_nope + qk_rope), scaled down
  for (const MlaShape& s : shapes) {
    for (const int threads : {1, 2}) {
      CAPTURE(s, threads);
      MlaProblem<T> p(MlaShape{s.batch, s.q_len, s.k_len, s.heads, s.kv_heads, s.d, s.d}, 90, 2.0);
      AttentionParams params;
      params.scale = static_cast<double>(scale);
      params.num_threads = threads;
      std::vector<T> out(static_cast<std::size_t>(s.batch * s.q_len * s.heads * s.dv), T(-7.0f));
      posenc::attention_latent<T>(p.qv(), p.kv(),
                                  TensorView<T, 4>(out.data(), s.batch, s.q_len, s.heads, s.dv),
                                  params);
      require_close(out, expected_attention(s, p.q, p.k, latent_values(p.k, s.d, s.dv), {}, {},
                                            scale));
    }
  }
}

TEMPLATE_TEST_CASE("attention mla: a latent KvCache with RoPE on k_pe — prefill, decode steps and "
                   "an erase equal the long-double absorbed attention",
                   "[attention][mla][latent][kv_cache]", float, Eigen::bfloat16) {
  using T = TestType;
  // Latent rows of 40 = c_kv 32 + k_pe 8, 8 heads over one latent head, positions 0 .. 9.
  const Eigen::Index H = 8, d = 40, dv = 32, n = 6, steps = 4, L = n + steps;
  const long double scale = 1.0L / std::sqrt(24.0L);
  const MlaShape full{1, L, L, H, 1, d, dv};
  MlaProblem<float> p(MlaShape{1, L, L, H, 1, d, d}, 51, 2.0);
  for (auto* x : {&p.q, &p.k}) {
    for (float& e : *x) e = static_cast<float>(T(e));
  }
  auto cache = posenc::KvCache<T>::latent(1, L, 1, d, dv);
  REQUIRE(cache.is_latent());
  cache.set_rope(tail_rope(d, dv), posenc::RopeLayout::kInterleaved);
  AttentionParams params;
  params.scale = static_cast<double>(scale);

  std::vector<std::int64_t> positions(static_cast<std::size_t>(L));
  for (Eigen::Index i = 0; i < L; ++i) positions[static_cast<std::size_t>(i)] = i;
  std::vector<float> q_rot = p.q, kv_rot = p.k;
  rotate_rope_part(q_rot, H, d, dv, positions, kTheta);
  rotate_rope_part(kv_rot, 1, d, dv, positions, kTheta);
  std::vector<float> kv_stored(kv_rot.size());
  for (std::size_t i = 0; i < kv_rot.size(); ++i) kv_stored[i] = static_cast<float>(T(kv_rot[i]));
  const auto want_all =
      expected_attention(full, q_rot, kv_stored, latent_values(kv_stored, d, dv), {}, {}, scale);

  const auto rows = rows_as<T>;
  {
    const auto kv0 = rows(p.k, 0, n, d), q0 = rows(p.q, 0, n, H * d);
    cache.append_latent(ConstTensorView<T, 4>(kv0.data(), 1, n, 1, d),
                        posenc::PositionIdsView(positions.data(), 1, n));
    std::vector<T> out(static_cast<std::size_t>(n * H * dv), T(-7.0f));
    cache.attend(ConstTensorView<T, 4>(q0.data(), 1, n, H, d),
                 TensorView<T, 4>(out.data(), 1, n, H, dv), params);
    require_close(out, std::vector<long double>(want_all.begin(), want_all.begin() + n * H * dv));
  }
  for (Eigen::Index t = n; t < L; ++t) {
    CAPTURE(t);
    const auto kvt = rows(p.k, t, 1, d), qt = rows(p.q, t, 1, H * d);
    cache.append_latent(ConstTensorView<T, 4>(kvt.data(), 1, 1, 1, d),
                        posenc::PositionIdsView(positions.data() + t, 1, 1));
    std::vector<T> out(static_cast<std::size_t>(H * dv), T(-7.0f));
    cache.attend(ConstTensorView<T, 4>(qt.data(), 1, 1, H, d),
                 TensorView<T, 4>(out.data(), 1, 1, H, dv), params);
    require_close(out, std::vector<long double>(want_all.begin() + t * H * dv,
                                                want_all.begin() + (t + 1) * H * dv));
  }
  // Erase slots [1, 4): the last query then sees rows {0, 4 .. 9}.
  cache.erase(1, 3);
  std::vector<float> kv_kept;
  for (Eigen::Index j = 0; j < L; ++j) {
    if (j >= 1 && j < 4) continue;
    kv_kept.insert(kv_kept.end(), kv_stored.begin() + j * d, kv_stored.begin() + (j + 1) * d);
  }
  const std::vector<float> q_last(q_rot.begin() + (L - 1) * H * d, q_rot.end());
  const auto want_last = expected_attention(MlaShape{1, 1, L - 3, H, 1, d, dv}, q_last, kv_kept,
                                            latent_values(kv_kept, d, dv), {}, {}, scale);
  const auto ql = rows(p.q, L - 1, 1, H * d);
  std::vector<T> out(static_cast<std::size_t>(H * dv), T(-7.0f));
  cache.attend(ConstTensorView<T, 4>(ql.data(), 1, 1, H, d),
               TensorView<T, 4>(out.data(), 1, 1, H, dv), params);
  require_close(out, want_last);
}

TEST_CASE("attention mla: latent attention without a scale, values wider than the row, and the "
          "wrong append are rejected before any write", "[attention][mla][latent][errors]") {
  const MlaShape s{1, 1, 6, 4, 1, 16, 16};
  const MlaProblem<float> p(s, 8);
  std::vector<float> out(64, -7.0f);
  const auto untouched = [&] {
    return std::all_of(out.begin(), out.end(), [](float x) { return x == -7.0f; });
  };
  AttentionParams no_scale;
  REQUIRE_THROWS_WITH(posenc::attention_latent<float>(p.qv(), p.kv(),
                                                      TensorView<float, 4>(out.data(), 1, 1, 4, 12),
                                                      no_scale),
                      Contains("params.scale must be set for latent (absorbed MLA) attention"));
  AttentionParams scaled;
  scaled.scale = 0.2;
  REQUIRE_THROWS_WITH(posenc::attention_latent<float>(p.qv(), p.kv(),
                                                      TensorView<float, 4>(out.data(), 1, 1, 4, 17),
                                                      scaled),
                      Contains("attention_latent: v_head_dim = 17 must be in [1, head_dim = 16]"));
  CHECK(untouched());

  REQUIRE_THROWS_WITH(posenc::KvCache<float>::latent(1, 8, 1, 16, 20),
                      Contains("KvCache::latent: v_head_dim = 20 must be in [1, head_dim = 16]"));
  auto cache = posenc::KvCache<float>::latent(1, 8, 1, 16, 12);
  const std::int64_t pos[6] = {0, 1, 2, 3, 4, 5};
  REQUIRE_THROWS_WITH(cache.append(p.kv(), p.kv(), posenc::PositionIdsView(pos, 1, 6)),
                      Contains("append its rows with append_latent"));
  REQUIRE_THROWS_WITH(cache.values(), Contains("a latent cache stores no values of their own"));
  CHECK(cache.size() == 0);
  cache.append_latent(p.kv(), posenc::PositionIdsView(pos, 1, 6));
  REQUIRE_THROWS_WITH(cache.attend(p.qv(), TensorView<float, 4>(out.data(), 1, 1, 4, 12), no_scale),
                      Contains("params.scale must be set"));
  CHECK(untouched());
  posenc::KvCache<float> plain(1, 8, 1, 16);
  REQUIRE_THROWS_WITH(plain.append_latent(p.kv(), posenc::PositionIdsView(pos, 1, 6)),
                      Contains("append keys and values with append"));
  CHECK(plain.size() == 0);
}

TEST_CASE("attention mla: attention_paged_latent over scrambled bfloat16 pages of latent rows "
          "equals the long-double attention per sequence", "[attention][mla][latent][paged]") {
  // Two sequences of 11 and 5 latent rows (d 40 = 32 c_kv + 8 k_pe), pages of 4 rows handed
  // out in the order 3, 0, 5 | 1, 4; 8 heads over one latent head; float queries.
  const Eigen::Index H = 8, d = 40, dv = 32, page = 4, num_pages = 6;
  const long double scale = 1.0L / std::sqrt(24.0L);
  const std::vector<std::int64_t> lens{11, 5};
  const std::vector<std::int32_t> table{3, 0, 5, 1, 4, 2};  // [2, 3]; sequence 1's 3rd unused
  std::vector<Eigen::bfloat16> pool(static_cast<std::size_t>(num_pages * page * d),
                                    Eigen::bfloat16(std::numeric_limits<float>::quiet_NaN()));
  std::vector<std::vector<float>> rows(2);
  for (std::size_t sq = 0; sq < 2; ++sq) {
    const auto k = MlaProblem<float>::draw(lens[sq] * d, 60 + sq, 2.0);
    for (Eigen::Index j = 0; j < lens[sq]; ++j) {
      const std::int32_t pg = table[sq * 3 + static_cast<std::size_t>(j / page)];
      for (Eigen::Index c = 0; c < d; ++c) {
        const auto x = Eigen::bfloat16(k[static_cast<std::size_t>(j * d + c)]);
        pool[static_cast<std::size_t>((pg * page + j % page) * d + c)] = x;
        rows[sq].push_back(static_cast<float>(x));
      }
    }
  }
  const auto q = MlaProblem<float>::draw(2 * H * d, 70, 2.0);
  std::vector<float> out(static_cast<std::size_t>(2 * H * dv), -7.0f);
  const auto run = [&](const AttentionParams& params) {
    posenc::attention_paged_latent<float, Eigen::bfloat16>(
        ConstTensorView<float, 4>(q.data(), 2, 1, H, d),
        ConstTensorView<Eigen::bfloat16, 4>(pool.data(), num_pages, page, 1, d),
        ConstTensorView<std::int32_t, 2>(table.data(), 2, 3),
        ConstTensorView<std::int64_t, 1>(lens.data(), 2),
        TensorView<float, 4>(out.data(), 2, 1, H, dv), params);
  };
  AttentionParams params;
  params.scale = static_cast<double>(scale);
  run(params);
  for (std::size_t sq = 0; sq < 2; ++sq) {
    CAPTURE(sq);
    const std::vector<float> qs(q.begin() + static_cast<std::ptrdiff_t>(sq * H * d),
                                q.begin() + static_cast<std::ptrdiff_t>((sq + 1) * H * d));
    const std::vector<float> os(out.begin() + static_cast<std::ptrdiff_t>(sq * H * dv),
                                out.begin() + static_cast<std::ptrdiff_t>((sq + 1) * H * dv));
    require_close(os, expected_attention(MlaShape{1, 1, lens[sq], H, 1, d, dv}, qs, rows[sq],
                                         latent_values(rows[sq], d, dv), {}, {}, scale));
  }
  REQUIRE_THROWS_WITH(run(AttentionParams{}), Contains("params.scale must be set"));
}

TEST_CASE("attention mla: a latent PagedKvCache with RoPE on k_pe — a fork's decode equals the "
          "long-double absorbed attention, errors change nothing", "[attention][mla][latent][paged_kv_cache]") {
  const Eigen::Index H = 4, d = 24, dv = 16, n = 6;
  const long double scale = 1.0L / std::sqrt(20.0L);
  const auto kv = MlaProblem<float>::draw((n + 1) * d, 81, 2.0);
  const auto q = MlaProblem<float>::draw(H * d, 82, 2.0);
  auto pool = posenc::PagedKvCache<float>::latent(8, 4, 1, d, dv);
  REQUIRE(pool.is_latent());
  pool.set_rope(tail_rope(d, dv), posenc::RopeLayout::kInterleaved);
  const auto parent = pool.add_sequence();
  pool.append_latent(parent, ConstTensorView<float, 3>(kv.data(), n, 1, d));
  const auto child = pool.fork(parent);  // copies the partial page (rows 4, 5)
  const auto junk = MlaProblem<float>::draw(d, 83, 2.0);
  pool.append_latent(parent, ConstTensorView<float, 3>(junk.data(), 1, 1, d));
  pool.append_latent(child, ConstTensorView<float, 3>(kv.data() + n * d, 1, 1, d));
  AttentionParams params;
  params.scale = static_cast<double>(scale);
  std::vector<float> out(static_cast<std::size_t>(H * dv), -7.0f);
  pool.attend({child}, ConstTensorView<float, 4>(q.data(), 1, 1, H, d),
              TensorView<float, 4>(out.data(), 1, 1, H, dv), params);
  std::vector<std::int64_t> kpos(static_cast<std::size_t>(n + 1));
  for (Eigen::Index i = 0; i <= n; ++i) kpos[static_cast<std::size_t>(i)] = i;
  std::vector<float> kv_rot = kv, q_rot = q;
  rotate_rope_part(kv_rot, 1, d, dv, kpos, kTheta);
  rotate_rope_part(q_rot, H, d, dv, std::vector<std::int64_t>{n}, kTheta);
  require_close(out, expected_attention(MlaShape{1, 1, n + 1, H, 1, d, dv}, q_rot, kv_rot,
                                        latent_values(kv_rot, d, dv), {}, {}, scale));

  std::fill(out.begin(), out.end(), -7.0f);
  REQUIRE_THROWS_WITH(pool.attend({child}, ConstTensorView<float, 4>(q.data(), 1, 1, H, d),
                                  TensorView<float, 4>(out.data(), 1, 1, H, dv)),
                      Contains("params.scale must be set"));
  CHECK(std::all_of(out.begin(), out.end(), [](float x) { return x == -7.0f; }));
  REQUIRE_THROWS_WITH(pool.append(child, ConstTensorView<float, 3>(kv.data(), 1, 1, d),
                                  ConstTensorView<float, 3>(kv.data(), 1, 1, dv)),
                      Contains("append its rows with append_latent"));
  REQUIRE_THROWS_WITH(pool.value_pages(), Contains("a latent pool stores no values"));
  CHECK(pool.length(child) == n + 1);
  REQUIRE_THROWS_WITH(posenc::PagedKvCache<float>::latent(8, 4, 1, d, d + 1),
                      Contains("PagedKvCache::latent: v_head_dim = 25 must be in [1, head_dim = 24]"));
  posenc::PagedKvCache<float> plain(8, 4, 1, d);
  const auto s = plain.add_sequence();
  REQUIRE_THROWS_WITH(plain.append_latent(s, ConstTensorView<float, 3>(kv.data(), 1, 1, d)),
                      Contains("append keys and values with append"));
  CHECK(plain.length(s) == 0);
}

TEST_CASE("attention mla: check_prefill_vs_decode takes values narrower than the keys "
          "(differences at rounding level)", "[attention][mla][diagnostics]") {
  const MlaShape s{2, 9, 9, 4, 2, 24, 16};
  const MlaProblem<float> p(s, 123, 2.0);
  const auto report = posenc::check_prefill_vs_decode<float>(
      p.qv(), p.kv(), p.vv(), AttentionParams{}, tail_rope(s.d, 16),
      posenc::RopeLayout::kInterleaved);
  REQUIRE(report.max_abs_diff.size() == 9);
  CHECK(report.worst < 1e-5);
}

TEST_CASE("attention mla: attention_with_rope turns the rope part of [nope | rope] heads and "
          "keeps narrow values", "[attention][mla][rope]") {
  // 2 sequences of 9 tokens, 4 heads over 2 kv heads, q.k 24 = 16 nope + 8 rope, values 16.
  const MlaShape s{2, 9, 9, 4, 2, 24, 16};
  const MlaProblem<float> p(s, 140, 2.0);
  std::vector<float> out(static_cast<std::size_t>(s.batch * s.q_len * s.heads * s.dv), -7.0f);
  posenc::attention_with_rope<float>(p.qv(), p.kv(), p.vv(),
                                     TensorView<float, 4>(out.data(), s.batch, s.q_len, s.heads, s.dv),
                                     tail_rope(s.d, 16), posenc::RopeLayout::kInterleaved);
  // Default positions: 0 .. 8 for queries and keys of each sequence.
  std::vector<std::int64_t> pos;
  for (Eigen::Index b = 0; b < s.batch; ++b) {
    for (Eigen::Index i = 0; i < s.q_len; ++i) pos.push_back(i);
  }
  std::vector<float> q_rot = p.q, k_rot = p.k;
  rotate_rope_part(q_rot, s.heads, s.d, 16, pos, kTheta);
  rotate_rope_part(k_rot, s.kv_heads, s.d, 16, pos, kTheta);
  require_close(out, expected_attention(s, q_rot, k_rot, p.v));
}

TEST_CASE("attention mla: attention_latent with v_head_dim = head_dim takes whole rows as values",
          "[attention][mla][latent]") {
  // The bound is inclusive (1 <= v_head_dim <= head_dim): values as wide as the latent rows are
  // the rows themselves, i.e. plain attention with v = kv, here against the long double.
  const MlaShape s{1, 3, 40, 4, 2, 12, 12};
  const MlaProblem<float> p(s, 61, 2.0);
  const long double scale = 1.0L / std::sqrt(12.0L);
  AttentionParams params;
  params.scale = static_cast<double>(scale);
  std::vector<float> out(static_cast<std::size_t>(s.batch * s.q_len * s.heads * s.dv), -7.0f);
  posenc::attention_latent<float>(p.qv(), p.kv(),
                                  TensorView<float, 4>(out.data(), s.batch, s.q_len, s.heads, s.dv),
                                  params);
  require_close(out, expected_attention(s, p.q, p.k, p.k, {}, {}, scale));
}
