// Dual chunk attention (An et al. 2024; Qwen2.5-1M's dual_chunk_attention_config as vLLM runs
// it).
//
// Expected values: the whole DCA softmax written out below in long double from the raw
// (unrotated) q and k: inv_freq_j = theta^(-2j / rotary_dim), each pair turned by hand in
// either layout, the key at p_k mod c, the query at the position of the key's part
// (p mod c; min(p mod c + c, S); min(2c - 1, S) — vLLM's DualChunkRotaryEmbedding tables),
// vLLM's length factors on keys (at their write length) and queries, the causal mask by slot
// and padding — none of it through posenc code.

#include <catch2/catch.hpp>

#include <posenc/attention_rope.hpp>
#include <posenc/dual_chunk_attention.hpp>
#include <posenc/kv_cache.hpp>
#include <posenc/paged_kv_cache.hpp>
#include <posenc/rope_frequencies.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <vector>

#include "support/check.hpp"
#include "support/rng.hpp"

using Catch::Matchers::Contains;
using posenc::AttentionMetadata;
using posenc::AttentionParams;
using posenc::ConstTensorView;
using posenc::DualChunkPart;
using posenc::DualChunkPlan;
using posenc::PositionIdsView;
using posenc::RopeLayout;
using posenc::TensorView;
using posenc::detail::to_double;

namespace {

struct Problem {
  Eigen::Index batch = 1, k_len = 37, q_len = 37, heads = 4, kv_heads = 2, d = 32, dv = 32;
  Eigen::Index rotary_dim = 32;
  RopeLayout layout = RopeLayout::kHalfSplit;
  std::int64_t chunk_size = 12, local_size = 4, l0 = 0;  // chunk_len 8: five chunks in 37
  double theta = 10000.0;
  /// The plan's softmax-scale multiplier (DeepSeek YaRN's g(s, mscale_all_dim)^2; 1 otherwise).
  double softmax_multiplier = 1.0;
  /// [batch, q_len] / [batch, k_len]; empty = defaults (k_len - q_len + i, j, all valid).
  std::vector<std::int64_t> q_pos, k_pos;
  std::vector<std::uint8_t> key_valid;
  std::vector<std::int64_t> key_lengths;  ///< [batch] right padding; empty = none
  /// The sequence length each key was written at (vLLM's key factor); empty = k_len.
  std::vector<std::int64_t> key_write_len;

  std::int64_t qp(Eigen::Index b, Eigen::Index i) const {
    return q_pos.empty() ? k_len - q_len + i : q_pos[static_cast<std::size_t>(b * q_len + i)];
  }
  std::int64_t kp(Eigen::Index b, Eigen::Index j) const {
    return k_pos.empty() ? j : k_pos[static_cast<std::size_t>(b * k_len + j)];
  }
  bool valid(Eigen::Index b, Eigen::Index j) const {
    if (!key_lengths.empty() && j >= key_lengths[static_cast<std::size_t>(b)]) return false;
    return key_valid.empty() || key_valid[static_cast<std::size_t>(b * k_len + j)] != 0;
  }
  DualChunkPlan plan() const {
    posenc::RopeParams rp;
    rp.head_dim = d;
    rp.rotary_dim = rotary_dim;
    rp.theta = theta;
    rp.layout = layout;
    DualChunkPlan p;
    p.freqs = posenc::compute_rope_frequencies(rp);
    p.freqs.softmax_scale_multiplier = softmax_multiplier;
    p.layout = layout;
    p.chunks = {chunk_size, local_size, l0};
    return p;
  }
};

long double length_factor(std::int64_t len, std::int64_t l0) {
  if (l0 == 0) return 1.0L;
  return std::max(1.0L, 0.1L * std::log(static_cast<long double>(len) / l0) + 1.0L);
}

/// x (head_dim values) turned by angle pos * theta^(-2j / rotary_dim) on each pair.
std::vector<long double> rotate(const float* x, const Problem& pb, std::int64_t pos) {
  std::vector<long double> y(x, x + pb.d);
  const Eigen::Index half = pb.rotary_dim / 2;
  for (Eigen::Index j = 0; j < half; ++j) {
    const long double w = std::pow(static_cast<long double>(pb.theta),
                                   -2.0L * static_cast<long double>(j) / pb.rotary_dim);
    const long double a = static_cast<long double>(pos) * w;
    const Eigen::Index i1 = pb.layout == RopeLayout::kHalfSplit ? j : 2 * j;
    const Eigen::Index i2 = pb.layout == RopeLayout::kHalfSplit ? j + half : 2 * j + 1;
    y[static_cast<std::size_t>(i1)] = x[i1] * std::cos(a) - x[i2] * std::sin(a);
    y[static_cast<std::size_t>(i2)] = x[i2] * std::cos(a) + x[i1] * std::sin(a);
  }
  return y;
}

/// The DCA output [batch, q_len, heads, dv] from raw q, k and v.
std::vector<long double> reference(const Problem& pb, const std::vector<float>& q,
                                   const std::vector<float>& k, const std::vector<float>& v) {
  const std::int64_t c = pb.chunk_size - pb.local_size, S = pb.chunk_size;
  const Eigen::Index group = pb.heads / pb.kv_heads;
  std::vector<long double> out(static_cast<std::size_t>(pb.batch * pb.q_len * pb.heads * pb.dv));
  for (Eigen::Index b = 0; b < pb.batch; ++b) {
    std::int64_t last = 0;
    for (Eigen::Index i = 0; i < pb.q_len; ++i) last = std::max(last, pb.qp(b, i));
    const long double q_factor = length_factor(last + 1, pb.l0);
    for (Eigen::Index i = 0; i < pb.q_len; ++i) {
      const std::int64_t p = pb.qp(b, i);
      for (Eigen::Index h = 0; h < pb.heads; ++h) {
        const Eigen::Index g = h / group;
        std::vector<long double> logit(static_cast<std::size_t>(pb.k_len));
        std::vector<bool> seen(static_cast<std::size_t>(pb.k_len), false);
        long double top = -std::numeric_limits<long double>::infinity();
        for (Eigen::Index j = 0; j < pb.k_len; ++j) {
          const std::int64_t pk = pb.kp(b, j);
          if (j > pb.k_len - pb.q_len + i || !pb.valid(b, j) || pk / c > p / c) continue;
          std::int64_t q_at = p % c;                                 // same chunk
          if (pk / c + 1 == p / c) q_at = std::min(p % c + c, S);   // the chunk before
          if (pk / c + 1 < p / c) q_at = std::min(2 * c - 1, S);    // earlier
          const auto qr = rotate(&q[static_cast<std::size_t>(((b * pb.q_len + i) * pb.heads + h) * pb.d)], pb, q_at);
          const auto kr = rotate(&k[static_cast<std::size_t>(((b * pb.k_len + j) * pb.kv_heads + g) * pb.d)], pb, pk % c);
          const std::int64_t written =
              pb.key_write_len.empty() ? pb.k_len : pb.key_write_len[static_cast<std::size_t>(j)];
          long double dot = 0;
          for (Eigen::Index e = 0; e < pb.d; ++e) dot += qr[static_cast<std::size_t>(e)] * kr[static_cast<std::size_t>(e)];
          logit[static_cast<std::size_t>(j)] = dot * q_factor * length_factor(written, pb.l0) *
                                               pb.softmax_multiplier / std::sqrt(static_cast<long double>(pb.d));
          seen[static_cast<std::size_t>(j)] = true;
          top = std::max(top, logit[static_cast<std::size_t>(j)]);
        }
        long double sum = 0;
        for (Eigen::Index j = 0; j < pb.k_len; ++j) {
          if (seen[static_cast<std::size_t>(j)]) sum += std::exp(logit[static_cast<std::size_t>(j)] - top);
        }
        long double* o = &out[static_cast<std::size_t>(((b * pb.q_len + i) * pb.heads + h) * pb.dv)];
        for (Eigen::Index j = 0; j < pb.k_len; ++j) {
          if (!seen[static_cast<std::size_t>(j)]) continue;
          const long double w = std::exp(logit[static_cast<std::size_t>(j)] - top) / sum;
          const float* vr = &v[static_cast<std::size_t>(((b * pb.k_len + j) * pb.kv_heads + g) * pb.dv)];
          for (Eigen::Index e = 0; e < pb.dv; ++e) o[e] += w * vr[e];
        }
      }
    }
  }
  return out;
}

struct Inputs {
  std::vector<float> q, k, v;
};

Inputs random_inputs(const Problem& pb, std::uint64_t seed) {
  return {posenc_test::random_vector<float>(static_cast<std::size_t>(pb.batch * pb.q_len * pb.heads * pb.d), seed),
          posenc_test::random_vector<float>(static_cast<std::size_t>(pb.batch * pb.k_len * pb.kv_heads * pb.d), seed + 1),
          posenc_test::random_vector<float>(static_cast<std::size_t>(pb.batch * pb.k_len * pb.kv_heads * pb.dv), seed + 2)};
}

/// posenc's path on T storage: keys rotated (written at seq_len k_len), then attention.
template <typename T>
std::vector<double> run_posenc(const Problem& pb, const Inputs& in,
                               const AttentionParams& params = {}) {
  const auto cast = [](const std::vector<float>& x) {
    std::vector<T> y(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) y[i] = T(x[i]);
    return y;
  };
  std::vector<T> q = cast(in.q), k = cast(in.k), v = cast(in.v);
  std::vector<T> out(static_cast<std::size_t>(pb.batch * pb.q_len * pb.heads * pb.dv), T(7.0f));
  std::vector<std::int64_t> kpos(static_cast<std::size_t>(pb.batch * pb.k_len));
  for (Eigen::Index b = 0; b < pb.batch; ++b)
    for (Eigen::Index j = 0; j < pb.k_len; ++j) kpos[static_cast<std::size_t>(b * pb.k_len + j)] = pb.kp(b, j);
  const DualChunkPlan plan = pb.plan();
  posenc::dual_chunk_rotate_keys_inplace<T>(TensorView<T, 4>(k.data(), pb.batch, pb.k_len, pb.kv_heads, pb.d),
                                            PositionIdsView(kpos.data(), pb.batch, pb.k_len), plan, pb.k_len);
  AttentionMetadata meta;
  if (!pb.q_pos.empty()) meta.query_positions.emplace(pb.q_pos.data(), pb.batch, pb.q_len);
  if (!pb.k_pos.empty()) meta.key_positions.emplace(pb.k_pos.data(), pb.batch, pb.k_len);
  if (!pb.key_valid.empty()) meta.key_mask.emplace(pb.key_valid.data(), pb.batch, pb.k_len);
  if (!pb.key_lengths.empty()) meta.key_lengths.emplace(pb.key_lengths.data(), pb.batch);
  posenc::dual_chunk_attention<T>(ConstTensorView<T, 4>(q.data(), pb.batch, pb.q_len, pb.heads, pb.d),
                                  ConstTensorView<T, 4>(k.data(), pb.batch, pb.k_len, pb.kv_heads, pb.d),
                                  ConstTensorView<T, 4>(v.data(), pb.batch, pb.k_len, pb.kv_heads, pb.dv),
                                  TensorView<T, 4>(out.data(), pb.batch, pb.q_len, pb.heads, pb.dv), plan,
                                  params, meta);
  std::vector<double> r(out.size());
  for (std::size_t i = 0; i < out.size(); ++i) r[i] = to_double(out[i]);
  return r;
}

void require_matches(const std::vector<double>& got, const std::vector<long double>& want,
                     double abs_tol, double rel_tol = 0.0) {
  REQUIRE(got.size() == want.size());
  POSENC_REQUIRE_CLOSE(posenc_test::compare(
      got.size(), [&](std::size_t i) { return got[i]; },
      [&](std::size_t i) { return static_cast<double>(want[i]); }, abs_tol, rel_tol));
}

}  // namespace

TEST_CASE("dual chunk attention: the position tables for Qwen2.5-1M's chunks", "[dual_chunk]") {
  // chunk_size 262144, local_size 8192: chunk_len c = 253952.
  const posenc::DualChunkParams qwen{262144, 8192, 262144};
  CHECK(posenc::dual_chunk_key_position(300000, qwen) == 300000 - 253952);
  CHECK(posenc::dual_chunk_query_position(300000, DualChunkPart::kIntra, qwen) == 46048);
  // The chunk before: the true distance up to S, capped there.
  CHECK(posenc::dual_chunk_query_position(260000, DualChunkPart::kSuccessive, qwen) == 260000);
  CHECK(posenc::dual_chunk_query_position(300000, DualChunkPart::kSuccessive, qwen) == 262144);
  CHECK(posenc::dual_chunk_query_position(5, DualChunkPart::kInter, qwen) == 262144);
  // 2c - 1 below S: c = 8, S = 20.
  CHECK(posenc::dual_chunk_query_position(3, DualChunkPart::kInter, {20, 12, 0}) == 15);
  CHECK(posenc::dual_chunk_query_position(3, DualChunkPart::kSuccessive, {20, 12, 0}) == 11);
  // s(1M) = 1 + 0.1 ln(1e6 / 262144); no scaling up to L0.
  CHECK(posenc::dual_chunk_scaling_factor(1000000, qwen) ==
        Approx(1.0 + 0.1 * std::log(1000000.0 / 262144.0)).epsilon(1e-15));
  CHECK(posenc::dual_chunk_scaling_factor(1000000, qwen) == Approx(1.1338861).epsilon(1e-7));
  CHECK(posenc::dual_chunk_scaling_factor(262144, qwen) == 1.0);
  CHECK(posenc::dual_chunk_scaling_factor(1000, qwen) == 1.0);
  CHECK(posenc::dual_chunk_scaling_factor(1000000, {262144, 8192, 0}) == 1.0);
}

TEST_CASE("dual chunk attention: prefill over five chunks equals the long-double DCA softmax",
          "[dual_chunk]") {
  for (const RopeLayout layout : {RopeLayout::kHalfSplit, RopeLayout::kInterleaved}) {
    for (const Eigen::Index rotary_dim : {32, 16}) {
      for (const Eigen::Index kv_heads : {4, 1}) {
        Problem pb;
        pb.batch = 2;
        pb.layout = layout;
        pb.rotary_dim = rotary_dim;
        pb.kv_heads = kv_heads;
        INFO("layout " << static_cast<int>(layout) << " rotary_dim " << rotary_dim << " kv_heads "
                       << kv_heads);
        const Inputs in = random_inputs(pb, 11 + static_cast<std::uint64_t>(rotary_dim + kv_heads));
        const auto want = reference(pb, in.q, in.k, in.v);
        require_matches(run_posenc<float>(pb, in), want, 2e-6);
        AttentionParams threads;
        threads.num_threads = 2;
        require_matches(run_posenc<float>(pb, in, threads), want, 2e-6);
      }
    }
  }
}

TEST_CASE("dual chunk attention: chunk_len 1, 2c - 1 below S, and local_size 0", "[dual_chunk]") {
  for (const auto& [S, local] : {std::pair<std::int64_t, std::int64_t>{3, 2}, {20, 12}, {8, 0}}) {
    Problem pb;
    pb.k_len = pb.q_len = 29;
    pb.chunk_size = S;
    pb.local_size = local;
    INFO("chunk_size " << S << " local_size " << local);
    const Inputs in = random_inputs(pb, 5);
    require_matches(run_posenc<float>(pb, in), reference(pb, in.q, in.k, in.v), 2e-6);
  }
}

TEST_CASE("dual chunk attention: differs from plain RoPE past one chunk and equals it within one",
          "[dual_chunk]") {
  Problem pb;
  const Inputs in = random_inputs(pb, 21);
  // Plain causal RoPE attention at the true positions, written out with the same reference by
  // making the chunk longer than the sequence.
  Problem one = pb;
  one.chunk_size = 1000;
  one.local_size = 1;
  const auto plain = reference(one, in.q, in.k, in.v);
  const auto dca = run_posenc<float>(pb, in);
  // Rows of the first chunk (positions 0..7) match plain RoPE; later rows do not.
  const Eigen::Index row = pb.heads * pb.dv;
  double first = 0.0, later = 0.0;
  for (Eigen::Index i = 0; i < pb.q_len; ++i) {
    for (Eigen::Index e = 0; e < row; ++e) {
      const double diff = std::abs(dca[static_cast<std::size_t>(i * row + e)] -
                                   static_cast<double>(plain[static_cast<std::size_t>(i * row + e)]));
      (i < 8 ? first : later) = std::max(i < 8 ? first : later, diff);
    }
  }
  CHECK(first < 2e-6);
  CHECK(later > 1e-2);
  require_matches(run_posenc<float>(one, in), plain, 2e-6);
}

TEST_CASE("dual chunk attention: the plan's softmax multiplier scales every logit",
          "[dual_chunk]") {
  // A plan whose recipe multiplies the softmax scale (DeepSeek YaRN): with the length scaling
  // of l0 = 16 as well, both factors must reach the logits.
  Problem pb;
  pb.softmax_multiplier = 1.75;
  pb.l0 = 16;
  const Inputs in = random_inputs(pb, 23);
  require_matches(run_posenc<float>(pb, in), reference(pb, in.q, in.k, in.v), 2e-6);
}

TEST_CASE("dual chunk attention: chunked prefill, q_len < k_len, starting mid-chunk",
          "[dual_chunk]") {
  for (const Eigen::Index q_len : {1, 5, 19}) {
    Problem pb;
    pb.q_len = q_len;
    INFO("q_len " << q_len);
    const Inputs in = random_inputs(pb, 31 + static_cast<std::uint64_t>(q_len));
    require_matches(run_posenc<float>(pb, in), reference(pb, in.q, in.k, in.v), 2e-6);
  }
}

TEST_CASE("dual chunk attention: positions that are not the slots follow the rule per key",
          "[dual_chunk]") {
  // (a) positions that restart (a context shift back); (b) queries a chunk and a half ahead of
  // the keys at their own slots, so that a query's own slot holds a key of an earlier chunk.
  for (const int variant : {0, 1}) {
    Problem pb;
    pb.q_len = 21;
    pb.k_pos.resize(static_cast<std::size_t>(pb.k_len));
    pb.q_pos.resize(static_cast<std::size_t>(pb.q_len));
    for (Eigen::Index j = 0; j < pb.k_len; ++j) {
      pb.k_pos[static_cast<std::size_t>(j)] = variant == 0 && j >= 20 ? j - 15 : j;
    }
    for (Eigen::Index i = 0; i < pb.q_len; ++i) {
      const std::int64_t own = pb.k_pos[static_cast<std::size_t>(pb.k_len - pb.q_len + i)];
      pb.q_pos[static_cast<std::size_t>(i)] = variant == 0 ? own : own + 12;
    }
    INFO("variant " << variant);
    const Inputs in = random_inputs(pb, 91 + static_cast<std::uint64_t>(variant));
    require_matches(run_posenc<float>(pb, in), reference(pb, in.q, in.k, in.v), 2e-6);
  }
}

TEST_CASE("dual chunk attention: a left-padded batch equals its sequences unpadded",
          "[dual_chunk]") {
  // Sequence 0: 3 padding slots, then 30 tokens at positions 0..29; sequence 1: 33 tokens.
  Problem pb;
  pb.batch = 2;
  pb.k_len = pb.q_len = 33;
  const Eigen::Index pad = 3;
  pb.q_pos.resize(2 * 33);
  pb.key_valid.assign(2 * 33, 1);
  for (Eigen::Index j = 0; j < 33; ++j) {
    pb.q_pos[static_cast<std::size_t>(j)] = std::max<Eigen::Index>(0, j - pad);
    pb.q_pos[static_cast<std::size_t>(33 + j)] = j;
    if (j < pad) pb.key_valid[static_cast<std::size_t>(j)] = 0;
  }
  pb.k_pos = pb.q_pos;
  const Inputs in = random_inputs(pb, 41);
  const auto got = run_posenc<float>(pb, in);
  require_matches(got, reference(pb, in.q, in.k, in.v), 2e-6);

  // The same 30 tokens alone, unpadded.
  Problem alone;
  alone.k_len = alone.q_len = 30;
  const Eigen::Index qrow = pb.heads * pb.d, krow = pb.kv_heads * pb.d, orow = pb.heads * pb.dv;
  Inputs in0;
  in0.q.assign(in.q.begin() + pad * qrow, in.q.begin() + 33 * qrow);
  in0.k.assign(in.k.begin() + pad * krow, in.k.begin() + 33 * krow);
  in0.v.assign(in.v.begin() + pad * krow, in.v.begin() + 33 * krow);
  const auto unpadded = run_posenc<float>(alone, in0);
  for (std::size_t e = 0; e < unpadded.size(); ++e) {
    REQUIRE(std::abs(got[static_cast<std::size_t>(pad * orow) + e] - unpadded[e]) < 1e-6);
  }
}

TEST_CASE("dual chunk attention: prefill then decode steps through a KvCache equal one forward",
          "[dual_chunk]") {
  for (const std::int64_t l0 : {std::int64_t{0}, std::int64_t{16}}) {
    Problem pb;
    pb.l0 = l0;
    const Eigen::Index prompt = 13, total = pb.k_len;  // 13 + 24 decode steps
    INFO("original_max_position_embeddings " << l0);
    const Inputs in = random_inputs(pb, 51);
    const DualChunkPlan plan = pb.plan();
    posenc::KvCache<float> cache(1, total, pb.kv_heads, pb.d);
    posenc::DualChunkWorkspace ws;
    std::vector<float> out(static_cast<std::size_t>(total * pb.heads * pb.dv), 9.0f);
    const Eigen::Index qrow = pb.heads * pb.d, krow = pb.kv_heads * pb.d, orow = pb.heads * pb.dv;
    // vLLM writes a prompt's keys with s(prompt length), each decode key with s(length after it).
    std::vector<std::int64_t> written(static_cast<std::size_t>(total));
    const auto step = [&](Eigen::Index first, Eigen::Index n) {
      std::vector<float> k(in.k.begin() + first * krow, in.k.begin() + (first + n) * krow);
      std::vector<std::int64_t> pos(static_cast<std::size_t>(n));
      for (Eigen::Index i = 0; i < n; ++i) {
        pos[static_cast<std::size_t>(i)] = first + i;
        written[static_cast<std::size_t>(first + i)] = first + n;
      }
      posenc::dual_chunk_rotate_keys_inplace<float>(TensorView<float, 4>(k.data(), 1, n, pb.kv_heads, pb.d),
                                                    PositionIdsView(pos.data(), 1, n), plan, first + n, &ws);
      cache.append<float>(ConstTensorView<float, 4>(k.data(), 1, n, pb.kv_heads, pb.d),
                          ConstTensorView<float, 4>(in.v.data() + first * krow, 1, n, pb.kv_heads, pb.dv),
                          PositionIdsView(pos.data(), 1, n));
      posenc::dual_chunk_attend<float>(cache, ConstTensorView<float, 4>(in.q.data() + first * qrow, 1, n, pb.heads, pb.d),
                                       TensorView<float, 4>(out.data() + first * orow, 1, n, pb.heads, pb.dv), plan,
                                       {}, &ws);
    };
    step(0, prompt);
    for (Eigen::Index t = prompt; t < total; ++t) step(t, 1);

    // Row t of the reference: queries up to t against keys up to t, each key with its own
    // write length and the query with s(t + 1).
    std::vector<long double> want(out.size());
    for (Eigen::Index t = 0; t < total; ++t) {
      Problem row = pb;
      row.k_len = t + 1;
      row.q_len = 1;
      row.key_write_len.assign(written.begin(), written.begin() + t + 1);
      const std::vector<float> q1(in.q.begin() + t * qrow, in.q.begin() + (t + 1) * qrow);
      const auto r = reference(row, q1, in.k, in.v);
      std::copy(r.begin(), r.end(), want.begin() + t * orow);
    }
    std::vector<double> got(out.begin(), out.end());
    require_matches(got, want, 3e-6);
    if (l0 > 0) {
      // The factors matter here: the same run with keys and queries unscaled is another answer.
      Problem unscaled = pb;
      unscaled.l0 = 0;
      const auto plain = reference(unscaled, in.q, in.k, in.v);
      double diff = 0.0;
      for (std::size_t e = 0; e < got.size(); ++e) diff = std::max(diff, std::abs(got[e] - static_cast<double>(plain[e])));
      CHECK(diff > 1e-3);
    }
  }
}

TEST_CASE("dual chunk attention: length scaling in one prefill", "[dual_chunk]") {
  Problem pb;
  pb.l0 = 10;  // s(37) = 1 + 0.1 ln 3.7 on keys and queries
  const Inputs in = random_inputs(pb, 61);
  require_matches(run_posenc<float>(pb, in), reference(pb, in.q, in.k, in.v), 2e-6);
  AttentionParams explicit_scale;
  explicit_scale.scale = 1.0 / std::sqrt(32.0);
  require_matches(run_posenc<float>(pb, in, explicit_scale), reference(pb, in.q, in.k, in.v), 2e-6);
}

TEST_CASE("dual chunk attention: bfloat16, half and double storage", "[dual_chunk]") {
  Problem pb;
  pb.layout = RopeLayout::kInterleaved;
  // Inputs rounded to bf16 first, so that every type sees the same values.
  Inputs in = random_inputs(pb, 71);
  for (auto* x : {&in.q, &in.k, &in.v})
    for (float& e : *x) e = static_cast<float>(Eigen::bfloat16(e));
  const auto want = reference(pb, in.q, in.k, in.v);
  require_matches(run_posenc<double>(pb, in), want, 1e-12);
  // Keys are rounded to the storage type after rotation, outputs once at the end.
  require_matches(run_posenc<Eigen::half>(pb, in), want, 4e-3, 4e-3);
  require_matches(run_posenc<Eigen::bfloat16>(pb, in), want, 3e-2, 2e-2);
}

TEST_CASE("dual chunk attention: bad input throws by name and writes nothing", "[dual_chunk]") {
  Problem pb;
  pb.k_len = pb.q_len = 9;
  const Inputs in = random_inputs(pb, 81);
  std::vector<float> q = in.q, k = in.k, v = in.v;
  std::vector<float> out(static_cast<std::size_t>(10 * pb.heads * pb.dv), 5.0f);
  const ConstTensorView<float, 4> qv(q.data(), 1, 9, 4, 32), kv(k.data(), 1, 9, 2, 32),
      vv(v.data(), 1, 9, 2, 32);
  const TensorView<float, 4> ov(out.data(), 1, 9, 4, 32);
  const auto attend = [&](const DualChunkPlan& plan, const AttentionParams& params,
                          ConstTensorView<float, 4> query) {
    posenc::dual_chunk_attention<float>(query, kv, vv, TensorView<float, 4>(out.data(), 1, query.dimension(1), 4, 32),
                                        plan, params);
  };
  const DualChunkPlan good = pb.plan();
  DualChunkPlan bad_chunks = good;
  bad_chunks.chunks.local_size = 12;
  REQUIRE_THROWS_WITH(attend(bad_chunks, {}, qv), Contains("chunk_size = 12") && Contains("local_size"));
  bad_chunks.chunks = {12, -1, 0};
  REQUIRE_THROWS_WITH(attend(bad_chunks, {}, qv), Contains("local_size = -1"));
  bad_chunks.chunks = {12, 4, -5};
  REQUIRE_THROWS_WITH(attend(bad_chunks, {}, qv), Contains("original_max_position_embeddings = -5"));
  AttentionParams alibi;
  alibi.alibi_slopes.assign(4, 0.5);
  REQUIRE_THROWS_WITH(attend(good, alibi, qv), Contains("alibi_slopes"));
  AttentionParams bidi;
  bidi.mask = posenc::MaskMode::kBidirectional;
  REQUIRE_THROWS_WITH(attend(good, bidi, qv), Contains("must be causal"));
  AttentionParams window;
  window.sliding_window = 4;
  REQUIRE_THROWS_WITH(attend(good, window, qv), Contains("sliding_window = 4"));
  DualChunkPlan wide = good;
  wide.freqs = posenc::compute_rope_frequencies([] {
    posenc::RopeParams rp;
    rp.head_dim = 64;
    return rp;
  }());
  REQUIRE_THROWS_WITH(attend(wide, {}, qv), Contains("head_dim = 32"));
  // More queries than keys.
  std::vector<float> q_long(static_cast<std::size_t>(10 * 4 * 32), 0.5f);
  REQUIRE_THROWS_WITH(attend(good, {}, ConstTensorView<float, 4>(q_long.data(), 1, 10, 4, 32)),
                      Contains("q_len = 10"));
  CHECK(std::all_of(out.begin(), out.end(), [](float x) { return x == 5.0f; }));

  // Keys: a negative position, a missing seq_len with length scaling.
  std::vector<std::int64_t> pos(9);
  for (int j = 0; j < 9; ++j) pos[static_cast<std::size_t>(j)] = j;
  pos[4] = -2;
  const TensorView<float, 4> kw(k.data(), 1, 9, 2, 32);
  REQUIRE_THROWS_WITH(posenc::dual_chunk_rotate_keys_inplace<float>(kw, PositionIdsView(pos.data(), 1, 9), good, 9),
                      Contains("position_ids[0, 4] = -2"));
  pos[4] = 4;
  DualChunkPlan scaled = good;
  scaled.chunks.original_max_position_embeddings = 4;
  REQUIRE_THROWS_WITH(posenc::dual_chunk_rotate_keys_inplace<float>(kw, PositionIdsView(pos.data(), 1, 9), scaled),
                      Contains("seq_len = 0"));
  CHECK(k == in.k);

  // A cache that rotates keys itself, and q_len beyond its size.
  posenc::KvCache<float> cache(1, 16, 2, 32);
  cache.append<float>(kv, vv, PositionIdsView(pos.data(), 1, 9));
  REQUIRE_THROWS_WITH(posenc::dual_chunk_attend<float>(cache, ConstTensorView<float, 4>(q_long.data(), 1, 10, 4, 32),
                                                       TensorView<float, 4>(out.data(), 1, 10, 4, 32), good),
                      Contains("q_len = 10"));
  cache.set_rope(good.freqs, good.layout);
  REQUIRE_THROWS_WITH(posenc::dual_chunk_attend<float>(cache, qv, ov, good), Contains("has_rope = 1"));
  CHECK(std::all_of(out.begin(), out.end(), [](float x) { return x == 5.0f; }));

  REQUIRE_THROWS_WITH(posenc::dual_chunk_query_position(-1, DualChunkPart::kIntra, good.chunks),
                      Contains("position = -1"));
  REQUIRE_THROWS_WITH(posenc::dual_chunk_scaling_factor(0, good.chunks), Contains("seq_len = 0"));
}

TEST_CASE("dual chunk attention: a seeded sweep of shapes, chunks, padding and scaling",
          "[dual_chunk]") {
  posenc_test::SplitMix64 rng(2026);
  const auto pick = [&](std::int64_t lo, std::int64_t hi) {  // uniform in [lo, hi]
    return lo + static_cast<std::int64_t>((rng.uniform() + 1.0) * 0.5 * static_cast<double>(hi - lo + 1)) % (hi - lo + 1);
  };
  for (int trial = 0; trial < 60; ++trial) {
    Problem pb;
    pb.batch = pick(1, 2);
    pb.k_len = pick(1, 40);
    pb.q_len = pick(1, pb.k_len);
    const std::int64_t shapes[3][2] = {{4, 2}, {2, 1}, {3, 3}};
    const auto& hk = shapes[pick(0, 2)];
    pb.heads = hk[0];
    pb.kv_heads = hk[1];
    pb.d = pb.dv = pick(0, 1) == 0 ? 8 : 16;
    pb.rotary_dim = pick(0, 1) == 0 ? pb.d : pb.d / 2;
    pb.layout = pick(0, 1) == 0 ? RopeLayout::kHalfSplit : RopeLayout::kInterleaved;
    pb.local_size = pick(0, 5);
    pb.chunk_size = pb.local_size + pick(1, 9);
    const std::int64_t l0s[3] = {0, 5, 20};
    pb.l0 = l0s[pick(0, 2)];
    // Left padding (repeated position 0, masked keys) and a few masked keys elsewhere.
    if (pick(0, 1) == 1) {
      pb.k_pos.resize(static_cast<std::size_t>(pb.batch * pb.k_len));
      pb.q_pos.resize(static_cast<std::size_t>(pb.batch * pb.q_len));
      pb.key_valid.assign(static_cast<std::size_t>(pb.batch * pb.k_len), 1);
      for (Eigen::Index b = 0; b < pb.batch; ++b) {
        const Eigen::Index pad = pick(0, pb.k_len - 1);
        for (Eigen::Index j = 0; j < pb.k_len; ++j) {
          pb.k_pos[static_cast<std::size_t>(b * pb.k_len + j)] = std::max<Eigen::Index>(0, j - pad);
          if (j < pad || pick(0, 9) == 0) pb.key_valid[static_cast<std::size_t>(b * pb.k_len + j)] = 0;
        }
        for (Eigen::Index i = 0; i < pb.q_len; ++i) {
          pb.q_pos[static_cast<std::size_t>(b * pb.q_len + i)] =
              pb.k_pos[static_cast<std::size_t>(b * pb.k_len + pb.k_len - pb.q_len + i)];
        }
      }
    }
    if (pick(0, 2) == 0) {  // right padding by key_lengths
      for (Eigen::Index b = 0; b < pb.batch; ++b) pb.key_lengths.push_back(pick(0, pb.k_len));
    }
    INFO("trial " << trial << ": batch " << pb.batch << " k_len " << pb.k_len << " q_len " << pb.q_len
                  << " heads " << pb.heads << "/" << pb.kv_heads << " d " << pb.d << " rotary "
                  << pb.rotary_dim << " chunk " << pb.chunk_size << " local " << pb.local_size
                  << " l0 " << pb.l0 << " padded " << !pb.k_pos.empty()
                  << " key_lengths " << pb.key_lengths.size());
    const Inputs in = random_inputs(pb, 1000 + static_cast<std::uint64_t>(trial));
    require_matches(run_posenc<float>(pb, in), reference(pb, in.q, in.k, in.v), 3e-6);
  }
}

TEST_CASE("dual chunk attention: a page pool (prompt, decode steps, a fork) equals the DCA "
          "softmax", "[dual_chunk][paged]") {
  // Pages of 4 slots, chunk_len 8 (chunk_size 12, local_size 4): every part starts on a page.
  Problem pb;
  const Eigen::Index prompt = 10, total = pb.k_len;
  const Inputs in = random_inputs(pb, 111);
  const DualChunkPlan plan = pb.plan();
  posenc::PagedKvCache<float> pool(40, 4, pb.kv_heads, pb.d);
  posenc::DualChunkWorkspace ws;
  const Eigen::Index qrow = pb.heads * pb.d, krow = pb.kv_heads * pb.d, orow = pb.heads * pb.dv;
  const auto append = [&](std::int64_t s, Eigen::Index first, Eigen::Index n) {
    std::vector<float> k(in.k.begin() + first * krow, in.k.begin() + (first + n) * krow);
    std::vector<std::int64_t> pos(static_cast<std::size_t>(n));
    for (Eigen::Index i = 0; i < n; ++i) pos[static_cast<std::size_t>(i)] = first + i;
    posenc::dual_chunk_rotate_keys_inplace<float>(TensorView<float, 4>(k.data(), 1, n, pb.kv_heads, pb.d),
                                                  PositionIdsView(pos.data(), 1, n), plan, first + n, &ws);
    pool.append<float>(s, ConstTensorView<float, 3>(k.data(), n, pb.kv_heads, pb.d),
                       ConstTensorView<float, 3>(in.v.data() + first * krow, n, pb.kv_heads, pb.dv));
  };
  const auto want_row = [&](Eigen::Index t) {  // the reference for the query at position t
    Problem row = pb;
    row.k_len = t + 1;
    row.q_len = 1;
    const std::vector<float> q1(in.q.begin() + t * qrow, in.q.begin() + (t + 1) * qrow);
    return reference(row, q1, in.k, in.v);
  };
  const auto a = pool.add_sequence();
  append(a, 0, prompt);
  std::vector<float> out(static_cast<std::size_t>(prompt * orow), 3.0f);
  posenc::dual_chunk_attend<float>(pool, {a}, ConstTensorView<float, 4>(in.q.data(), 1, prompt, pb.heads, pb.d),
                                   TensorView<float, 4>(out.data(), 1, prompt, pb.heads, pb.dv), plan, {}, &ws);
  for (Eigen::Index t = 0; t < prompt; ++t) {
    const auto want = want_row(t);
    std::vector<double> got(out.begin() + t * orow, out.begin() + (t + 1) * orow);
    require_matches(got, want, 2e-6);
  }
  // The fork shares a's full pages; both decode the same tokens side by side (batch of 2).
  const auto f = pool.fork(a);
  for (Eigen::Index t = prompt; t < total; ++t) {
    append(a, t, 1);
    append(f, t, 1);
    std::vector<float> q2(in.q.begin() + t * qrow, in.q.begin() + (t + 1) * qrow);
    q2.insert(q2.end(), q2.begin(), q2.end());
    std::vector<float> step(static_cast<std::size_t>(2 * orow), 3.0f);
    posenc::dual_chunk_attend<float>(pool, {a, f}, ConstTensorView<float, 4>(q2.data(), 2, 1, pb.heads, pb.d),
                                     TensorView<float, 4>(step.data(), 2, 1, pb.heads, pb.dv), plan, {}, &ws);
    const auto want = want_row(t);
    INFO("step " << t);
    require_matches(std::vector<double>(step.begin(), step.begin() + orow), want, 2e-6);
    require_matches(std::vector<double>(step.begin() + orow, step.end()), want, 2e-6);
  }

  // chunk_len 8 over pages of 3 slots: a part would start inside a page.
  posenc::PagedKvCache<float> odd(8, 3, pb.kv_heads, pb.d);
  const auto s = odd.add_sequence();
  std::vector<float> k1(in.k.begin(), in.k.begin() + krow);
  odd.append<float>(s, ConstTensorView<float, 3>(k1.data(), 1, pb.kv_heads, pb.d),
                    ConstTensorView<float, 3>(in.v.data(), 1, pb.kv_heads, pb.dv));
  std::vector<float> o1(static_cast<std::size_t>(orow), 3.0f);
  REQUIRE_THROWS_WITH(posenc::dual_chunk_attend<float>(odd, {s}, ConstTensorView<float, 4>(in.q.data(), 1, 1, pb.heads, pb.d),
                                                       TensorView<float, 4>(o1.data(), 1, 1, pb.heads, pb.dv), plan),
                      Contains("chunk_len = chunk_size - local_size = 8") && Contains("page_size = 3"));
  CHECK(std::all_of(o1.begin(), o1.end(), [](float x) { return x == 3.0f; }));
}

TEST_CASE("dual chunk attention: position 0 and 2^53, chunk_size 2^53, and a part out of range",
          "[dual_chunk]") {
  const std::int64_t two53 = std::int64_t{1} << 53;
  const posenc::DualChunkParams c3{4, 1, 0};  // chunk_len 3; 2^53 = 2 (mod 3): 2^odd = 2 (mod 3)
  CHECK(posenc::dual_chunk_key_position(0, c3) == 0);
  CHECK(posenc::dual_chunk_key_position(two53, c3) == 2);
  CHECK(posenc::dual_chunk_query_position(two53, DualChunkPart::kIntra, c3) == 2);
  CHECK(posenc::dual_chunk_key_position(5, {two53, 1, 0}) == 5);
  REQUIRE_THROWS_WITH(posenc::dual_chunk_key_position(5, {two53 + 1, 1, 0}),
                      Contains("chunk_size = 9007199254740993"));
  REQUIRE_THROWS_WITH(posenc::dual_chunk_query_position(3, static_cast<DualChunkPart>(3), c3),
                      Contains("part = 3"));
}

TEST_CASE("dual chunk attention: sinks, attention chunks and query temperatures are rejected",
          "[dual_chunk]") {
  Problem pb;
  pb.k_len = pb.q_len = 9;
  const Inputs in = random_inputs(pb, 83);
  std::vector<float> out(static_cast<std::size_t>(9 * pb.heads * pb.dv), 5.0f);
  const auto attend = [&](const AttentionParams& params) {
    posenc::dual_chunk_attention<float>(ConstTensorView<float, 4>(in.q.data(), 1, 9, 4, 32),
                                        ConstTensorView<float, 4>(in.k.data(), 1, 9, 2, 32),
                                        ConstTensorView<float, 4>(in.v.data(), 1, 9, 2, 32),
                                        TensorView<float, 4>(out.data(), 1, 9, 4, 32), pb.plan(),
                                        params);
  };
  AttentionParams sinks;
  sinks.sink_logits.assign(4, 0.5);
  REQUIRE_THROWS_WITH(attend(sinks), Contains("sink_logits (4)"));
  AttentionParams chunked;
  chunked.attention_chunk_size = 8;
  REQUIRE_THROWS_WITH(attend(chunked), Contains("attention_chunk_size = 8"));
  AttentionParams temperature;
  temperature.query_temperature = posenc::AttentionTemperature{};
  REQUIRE_THROWS_WITH(attend(temperature), Contains("query_temperature must be unset"));
  CHECK(std::all_of(out.begin(), out.end(), [](float x) { return x == 5.0f; }));
}

TEST_CASE("dual chunk attention: v_head_dim narrower than head_dim, batch 2", "[dual_chunk]") {
  Problem pb;
  pb.batch = 2;
  pb.dv = 16;
  const Inputs in = random_inputs(pb, 131);
  require_matches(run_posenc<float>(pb, in), reference(pb, in.q, in.k, in.v), 2e-6);
}

TEST_CASE("dual chunk attention: s(L) takes the largest query position, not the last one",
          "[dual_chunk]") {
  // Positions 0..29, then a shift back to 10..16: L = 30, not 17 (l0 = 5).
  Problem pb;
  pb.l0 = 5;
  pb.k_pos.resize(static_cast<std::size_t>(pb.k_len));
  for (Eigen::Index j = 0; j < pb.k_len; ++j) {
    pb.k_pos[static_cast<std::size_t>(j)] = j < 30 ? j : j - 20;
  }
  pb.q_pos = pb.k_pos;
  const Inputs in = random_inputs(pb, 137);
  require_matches(run_posenc<float>(pb, in), reference(pb, in.q, in.k, in.v), 2e-6);
}

TEST_CASE("dual chunk attention: query positions ahead of keys at their default slots",
          "[dual_chunk]") {
  // Only query positions given (each 12 past its slot): the keys' chunk ranges come from the
  // slots, and the causal mask still stops at each query's own slot.
  Problem pb;
  pb.q_pos.resize(static_cast<std::size_t>(pb.q_len));
  for (Eigen::Index i = 0; i < pb.q_len; ++i) pb.q_pos[static_cast<std::size_t>(i)] = i + 12;
  const Inputs in = random_inputs(pb, 139);
  require_matches(run_posenc<float>(pb, in), reference(pb, in.q, in.k, in.v), 2e-6);
}

TEST_CASE("dual chunk attention: keys rotate without seq_len when there is no length scaling",
          "[dual_chunk]") {
  Problem pb;
  const Inputs in = random_inputs(pb, 149);
  std::vector<float> k = in.k;
  std::vector<std::int64_t> pos(static_cast<std::size_t>(pb.k_len));
  for (Eigen::Index j = 0; j < pb.k_len; ++j) pos[static_cast<std::size_t>(j)] = j;
  const TensorView<float, 4> kw(k.data(), 1, pb.k_len, pb.kv_heads, pb.d);
  posenc::dual_chunk_rotate_keys_inplace<float>(kw, PositionIdsView(pos.data(), 1, pb.k_len),
                                                pb.plan());
  double worst = 0.0;
  for (Eigen::Index r = 0; r < pb.k_len * pb.kv_heads; ++r) {
    const auto want = rotate(&in.k[static_cast<std::size_t>(r * pb.d)], pb, (r / pb.kv_heads) % 8);
    for (Eigen::Index e = 0; e < pb.d; ++e) {
      const double got = k[static_cast<std::size_t>(r * pb.d + e)];
      const auto ref = static_cast<double>(want[static_cast<std::size_t>(e)]);
      worst = std::max(worst, std::abs(got - ref));
    }
  }
  CHECK(worst < 1e-5);
}

TEST_CASE("dual chunk attention: caches with a window, latent rows or no query are rejected",
          "[dual_chunk]") {
  Problem pb;
  pb.k_len = pb.q_len = 9;
  const Inputs in = random_inputs(pb, 151);
  const DualChunkPlan plan = pb.plan();
  std::vector<std::int64_t> pos(9);
  for (int j = 0; j < 9; ++j) pos[static_cast<std::size_t>(j)] = j;
  const ConstTensorView<float, 4> kv(in.k.data(), 1, 9, 2, 32), vv(in.v.data(), 1, 9, 2, 32),
      qv(in.q.data(), 1, 9, 4, 32);
  std::vector<float> out(static_cast<std::size_t>(9 * 4 * 32), 5.0f);
  const TensorView<float, 4> ov(out.data(), 1, 9, 4, 32);
  posenc::KvCache<float> windowed(1, 16, 2, 32, 12);
  windowed.append<float>(kv, vv, PositionIdsView(pos.data(), 1, 9));
  REQUIRE_THROWS_WITH(posenc::dual_chunk_attend<float>(windowed, qv, ov, plan),
                      Contains("no window (12)"));
  auto latent = posenc::KvCache<float>::latent(1, 16, 2, 32, 16);
  latent.append_latent<float>(kv, PositionIdsView(pos.data(), 1, 9));
  REQUIRE_THROWS_WITH(posenc::dual_chunk_attend<float>(latent, qv, ov, plan),
                      Contains("has_rope = 0"));
  posenc::KvCache<float> cache(1, 16, 2, 32);
  cache.append<float>(kv, vv, PositionIdsView(pos.data(), 1, 9));
  const ConstTensorView<float, 4> q0(in.q.data(), 1, 0, 4, 32);
  REQUIRE_THROWS_WITH(posenc::dual_chunk_attend<float>(
                          cache, q0, TensorView<float, 4>(out.data(), 1, 0, 4, 32), plan),
                      Contains("q_len = 0"));
  CHECK(std::all_of(out.begin(), out.end(), [](float x) { return x == 5.0f; }));
}

TEST_CASE("dual chunk attention: a page pool call with no sequence or a too short one throws",
          "[dual_chunk][paged]") {
  Problem pb;
  const Inputs in = random_inputs(pb, 157);
  const DualChunkPlan plan = pb.plan();
  posenc::PagedKvCache<float> pool(8, 4, pb.kv_heads, pb.d);
  const auto a = pool.add_sequence(), b = pool.add_sequence();
  const Eigen::Index krow = pb.kv_heads * pb.d;
  pool.append<float>(a, ConstTensorView<float, 3>(in.k.data(), 2, pb.kv_heads, pb.d),
                     ConstTensorView<float, 3>(in.v.data(), 2, pb.kv_heads, pb.dv));
  pool.append<float>(b, ConstTensorView<float, 3>(in.k.data() + 2 * krow, 5, pb.kv_heads, pb.d),
                     ConstTensorView<float, 3>(in.v.data() + 2 * krow, 5, pb.kv_heads, pb.dv));
  std::vector<float> out(static_cast<std::size_t>(2 * 3 * pb.heads * pb.dv), 3.0f);
  const ConstTensorView<float, 4> q3(in.q.data(), 2, 3, pb.heads, pb.d), qn(in.q.data(), 0, 1,
                                                                             pb.heads, pb.d);
  REQUIRE_THROWS_WITH(posenc::dual_chunk_attend<float>(
                          pool, {a, b}, q3, TensorView<float, 4>(out.data(), 2, 3, pb.heads, pb.dv),
                          plan),
                      Contains("q_len = 3 must be in [1, length = 2]"));
  REQUIRE_THROWS_WITH(posenc::dual_chunk_attend<float>(
                          pool, {}, qn, TensorView<float, 4>(out.data(), 0, 1, pb.heads, pb.dv),
                          plan),
                      Contains("number of sequences listed (0"));
  CHECK(std::all_of(out.begin(), out.end(), [](float x) { return x == 3.0f; }));
}

TEST_CASE("dual chunk attention: a KvCache batch of two, one left-padded, not full",
          "[dual_chunk]") {
  // max_len 40 > size 30: sequence b's slots start at b * max_len. Sequence 0 has 4 padding
  // slots (position 0, masked) before positions 0..25; sequence 1 holds positions 0..29.
  Problem pb;
  pb.batch = 2;
  pb.k_len = pb.q_len = 30;
  pb.k_pos.resize(60);
  pb.key_valid.assign(60, 1);
  for (Eigen::Index j = 0; j < 30; ++j) {
    pb.k_pos[static_cast<std::size_t>(j)] = std::max<Eigen::Index>(0, j - 4);
    pb.k_pos[static_cast<std::size_t>(30 + j)] = j;
    if (j < 4) pb.key_valid[static_cast<std::size_t>(j)] = 0;
  }
  pb.q_pos = pb.k_pos;
  const Inputs in = random_inputs(pb, 163);
  const DualChunkPlan plan = pb.plan();
  std::vector<float> k = in.k;
  posenc::dual_chunk_rotate_keys_inplace<float>(
      TensorView<float, 4>(k.data(), 2, 30, pb.kv_heads, pb.d),
      PositionIdsView(pb.k_pos.data(), 2, 30), plan, 30);
  posenc::KvCache<float> cache(2, 40, pb.kv_heads, pb.d);
  cache.append<float>(ConstTensorView<float, 4>(k.data(), 2, 30, pb.kv_heads, pb.d),
                      ConstTensorView<float, 4>(in.v.data(), 2, 30, pb.kv_heads, pb.dv),
                      PositionIdsView(pb.k_pos.data(), 2, 30),
                      ConstTensorView<std::uint8_t, 2>(pb.key_valid.data(), 2, 30));
  std::vector<float> out(static_cast<std::size_t>(2 * 30 * pb.heads * pb.dv), 9.0f);
  posenc::dual_chunk_attend<float>(cache,
                                   ConstTensorView<float, 4>(in.q.data(), 2, 30, pb.heads, pb.d),
                                   TensorView<float, 4>(out.data(), 2, 30, pb.heads, pb.dv), plan);
  // Padding query rows see no valid key: only the real rows (slot >= 4 of sequence 0) count.
  const auto want = reference(pb, in.q, in.k, in.v);
  const Eigen::Index orow = pb.heads * pb.dv;
  std::vector<double> got;
  std::vector<long double> ref;
  for (Eigen::Index r = 0; r < 60; ++r) {
    if (r < 4) continue;
    for (Eigen::Index e = 0; e < orow; ++e) {
      got.push_back(out[static_cast<std::size_t>(r * orow + e)]);
      ref.push_back(want[static_cast<std::size_t>(r * orow + e)]);
    }
  }
  require_matches(got, ref, 2e-6);
}
