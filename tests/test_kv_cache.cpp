// KV cache: prefill of n tokens then m single-token decode steps must equal one full causal
// forward over n + m tokens (the materialising double reference), with a left-padded batch, for
// no positional scheme, ALiBi and RoPE, for float / bfloat16 / half storage; attend's lse
// merges with a prefix attended elsewhere (cascade); overflow and bad input leave the cache
// unchanged.

#include <catch2/catch.hpp>

#include <posenc/alibi.hpp>
#include <posenc/attention_merge.hpp>
#include <posenc/kv_cache.hpp>
#include <posenc/reference/attention.hpp>
#include <posenc/rope.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "support/check.hpp"
#include "support/rng.hpp"
#include "support/rope_plans.hpp"

#include <cstring>

using Catch::Matchers::Contains;
using posenc::AttentionMetadata;
using posenc::AttentionParams;
using posenc::MaskMode;

namespace {

enum class Positional { kNone, kAlibi, kRope };

const char* name(Positional p) {
  return p == Positional::kNone ? "none" : p == Positional::kAlibi ? "alibi" : "rope";
}

posenc::RopeFrequencies rope_plan(Eigen::Index d) {
  posenc::RopeParams rp;
  rp.head_dim = d;
  rp.theta = 10000.0;
  return posenc::compute_rope_frequencies(rp);
}

template <typename T>
std::vector<float> rounded(const std::vector<float>& x) {
  std::vector<float> y(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) y[i] = static_cast<float>(T(x[i]));
  return y;
}

/// A batch of 2 sequences over N = n + m slots: sequence 0 is left-padded by `pad` slots.
struct Batch {
  static constexpr Eigen::Index B = 2, heads = 8, kv_heads = 2, d = 32, pad = 3;
  Eigen::Index n, m, N;
  std::vector<float> q, k, v;  // [B, N, heads | kv_heads, d]
  std::vector<std::int64_t> pos;
  std::vector<std::uint8_t> valid;

  Batch(Eigen::Index n_, Eigen::Index m_) : n(n_), m(m_), N(n_ + m_) {
    q = posenc_test::random_vector<float>(static_cast<std::size_t>(B * N * heads * d), 21);
    k = posenc_test::random_vector<float>(static_cast<std::size_t>(B * N * kv_heads * d), 22);
    v = posenc_test::random_vector<float>(static_cast<std::size_t>(B * N * kv_heads * d), 23);
    pos.assign(static_cast<std::size_t>(B * N), 0);
    valid.assign(static_cast<std::size_t>(B * N), 1);
    for (Eigen::Index s = 0; s < N; ++s) {
      const bool is_pad = s < pad;
      pos[static_cast<std::size_t>(s)] = is_pad ? 0 : s - pad;
      valid[static_cast<std::size_t>(s)] = is_pad ? 0 : 1;
      pos[static_cast<std::size_t>(N + s)] = s;
    }
  }
};

/// Copies slots [s0, s0 + len) of a [B, N, H, d] buffer.
std::vector<float> slots(const std::vector<float>& x, Eigen::Index N, Eigen::Index H, Eigen::Index d,
                         Eigen::Index s0, Eigen::Index len) {
  std::vector<float> out;
  for (Eigen::Index b = 0; b < Batch::B; ++b) {
    const auto from = x.begin() + static_cast<std::ptrdiff_t>((b * N + s0) * H * d);
    out.insert(out.end(), from, from + static_cast<std::ptrdiff_t>(len * H * d));
  }
  return out;
}
template <typename X>
std::vector<X> slots_of(const std::vector<X>& x, Eigen::Index N, Eigen::Index s0, Eigen::Index len) {
  std::vector<X> out;
  for (Eigen::Index b = 0; b < Batch::B; ++b) {
    const auto from = x.begin() + static_cast<std::ptrdiff_t>(b * N + s0);
    out.insert(out.end(), from, from + static_cast<std::ptrdiff_t>(len));
  }
  return out;
}

/// Appends slots [s0, s0 + len) of x (keys, values, positions, validity) to cache.
template <typename Cache>
void append_slots(Cache& cache, const Batch& x, Eigen::Index s0, Eigen::Index len) {
  constexpr Eigen::Index B = Batch::B, KH = Batch::kv_heads, d = Batch::d;
  const auto ks = slots(x.k, x.N, KH, d, s0, len), vs = slots(x.v, x.N, KH, d, s0, len);
  const auto ps = slots_of(x.pos, x.N, s0, len);
  const auto ms = slots_of(x.valid, x.N, s0, len);
  cache.append(posenc::ConstTensorView<float, 4>(ks.data(), B, len, KH, d),
               posenc::ConstTensorView<float, 4>(vs.data(), B, len, KH, d),
               posenc::PositionIdsView(ps.data(), B, len),
               posenc::ConstTensorView<std::uint8_t, 2>(ms.data(), B, len));
}

/// How the tokens reach the cache: a first chunk of `first` tokens, then chunks cycling
/// through `then`, until n + m tokens are in. max_len = 0: a cache of n + m + 2 slots that
/// keeps every token; max_len > 0 with window > 0: a rolling cache of max_len slots.
struct Schedule {
  Eigen::Index n = 7, m = 5;
  Eigen::Index max_len = 0;
  std::vector<Eigen::Index> then = {1};
};

template <typename T>
void check_decode_equals_full_forward(Positional positional, std::int64_t window = 0,
                                      const Schedule& schedule = {}, bool sinks = false) {
  const Eigen::Index n = schedule.n, m = schedule.m;
  const Batch x(n, m);
  constexpr Eigen::Index B = Batch::B, H = Batch::heads, KH = Batch::kv_heads, d = Batch::d;
  const Eigen::Index N = x.N;
  AttentionParams params;
  params.mask = MaskMode::kCausal;
  params.sliding_window = window;
  if (positional == Positional::kAlibi) params.alibi_slopes = posenc::alibi_slopes(H);
  for (Eigen::Index h = 0; sinks && h < H; ++h) params.sink_logits.push_back(0.7 * double(h) - 2.0);

  // Full forward (oracle): rotate Q and K in float (RoPE), round K and V to the cache storage
  // as the cache does, then the double reference over all N tokens.
  std::vector<float> q = x.q, k = x.k;
  const auto freqs = rope_plan(d);
  if (positional == Positional::kRope) {
    posenc::PositionIdsView ids(x.pos.data(), B, N);
    posenc::apply_rope_inplace<float>(posenc::TensorView<float, 4>(q.data(), B, N, H, d), ids, freqs,
                                      posenc::RopeLayout::kHalfSplit);
    posenc::apply_rope_inplace<float>(posenc::TensorView<float, 4>(k.data(), B, N, KH, d), ids, freqs,
                                      posenc::RopeLayout::kHalfSplit);
  }
  const std::vector<float> k_stored = rounded<T>(k), v_stored = rounded<T>(x.v);
  std::vector<float> full(static_cast<std::size_t>(B * N * H * d));
  AttentionMetadata meta;
  meta.query_positions = posenc::PositionIdsView(x.pos.data(), B, N);
  meta.key_positions = posenc::PositionIdsView(x.pos.data(), B, N);
  meta.key_mask = posenc::ConstTensorView<std::uint8_t, 2>(x.valid.data(), B, N);
  posenc::reference::attention<float>(posenc::ConstTensorView<float, 4>(q.data(), B, N, H, d),
                                      posenc::ConstTensorView<float, 4>(k_stored.data(), B, N, KH, d),
                                      posenc::ConstTensorView<float, 4>(v_stored.data(), B, N, KH, d),
                                      posenc::TensorView<float, 4>(full.data(), B, N, H, d), params, meta);

  // Through the cache: prefill n tokens, then m decode steps of one token. Q and K go in
  // unrotated; the cache rotates them.
  const bool rolling = schedule.max_len > 0;
  posenc::KvCache<T> cache(B, rolling ? schedule.max_len : N + 2, KH, d, rolling ? window : 0);
  if (positional == Positional::kRope) cache.set_rope(freqs, posenc::RopeLayout::kHalfSplit);
  auto step = [&](Eigen::Index s0, Eigen::Index len) {
    append_slots(cache, x, s0, len);
    const auto qs = slots(x.q, N, H, d, s0, len);
    std::vector<float> out(qs.size(), -5.0f);
    cache.attend(posenc::ConstTensorView<float, 4>(qs.data(), B, len, H, d),
                 posenc::TensorView<float, 4>(out.data(), B, len, H, d), params);
    const auto want = slots(full, N, H, d, s0, len);
    INFO("tokens [" << s0 << ", " << s0 + len << ")");
    POSENC_REQUIRE_CLOSE(posenc_test::compare(
        out.size(), [&](std::size_t i) { return out[i]; }, [&](std::size_t i) { return want[i]; }, 1e-5));
    // Stored slot s holds token evicted() + s, for every sequence.
    REQUIRE(cache.evicted() + cache.size() == s0 + len);
    for (Eigen::Index b = 0; b < B; ++b) {
      CHECK(cache.positions()(b, 0) == x.pos[static_cast<std::size_t>(b * N + cache.evicted())]);
    }
  };
  step(0, n);
  for (std::size_t c = 0, t = static_cast<std::size_t>(n); t < static_cast<std::size_t>(N); ++c) {
    const Eigen::Index len = std::min(schedule.then[c % schedule.then.size()], N - Eigen::Index(t));
    step(Eigen::Index(t), len);
    t += static_cast<std::size_t>(len);
  }
  if (rolling) {
    CHECK(cache.size() <= schedule.max_len);
    CHECK(cache.evicted() > 0);
  } else {
    CHECK(cache.size() == N);
  }
  // The padded sequence's padding queries see no key: exact zeros (checked via the oracle,
  // which writes 0 there); spot-check the oracle itself.
  for (Eigen::Index i = 0; i < Batch::pad * H * d; ++i) CHECK(full[static_cast<std::size_t>(i)] == 0.0f);
  if (window > 0) {
    // The window must have cut something: the same oracle without it differs at the last step.
    AttentionParams wide = params;
    wide.sliding_window = 0;
    std::vector<float> unwindowed(full.size());
    posenc::reference::attention<float>(
        posenc::ConstTensorView<float, 4>(q.data(), B, N, H, d),
        posenc::ConstTensorView<float, 4>(k_stored.data(), B, N, KH, d),
        posenc::ConstTensorView<float, 4>(v_stored.data(), B, N, KH, d),
        posenc::TensorView<float, 4>(unwindowed.data(), B, N, H, d), wide, meta);
    double diff = 0.0;
    for (std::size_t i = 0; i < full.size(); ++i) diff = std::max(diff, double(std::abs(full[i] - unwindowed[i])));
    CHECK(diff > 1e-3);
  }
}

}  // namespace

TEMPLATE_TEST_CASE("kv_cache: prefill + decode steps equal one full causal forward, left-padded "
                   "batch", "[kv_cache][decode]", float, Eigen::bfloat16, Eigen::half) {
  const Positional positional = GENERATE(Positional::kNone, Positional::kAlibi, Positional::kRope);
  const bool sinks = GENERATE(false, true);  // GPT-OSS's per-head sink logits
  CAPTURE(name(positional), sinks);
  check_decode_equals_full_forward<TestType>(positional, 0, {}, sinks);
}

TEMPLATE_TEST_CASE("kv_cache: with a sliding window, prefill + decode steps equal one full "
                   "windowed forward", "[kv_cache][decode][window]", float, Eigen::bfloat16) {
  // 12 slots, the first 3 of sequence 0 padding: windows of 1, 4 and 6 slots (padding slots
  // count, as cache indices do in HF) cut both the prefill chunk and every decode step.
  const Positional positional = GENERATE(Positional::kNone, Positional::kAlibi, Positional::kRope);
  const std::int64_t window = GENERATE(1, 4, 6);
  CAPTURE(name(positional), window);
  check_decode_equals_full_forward<TestType>(positional, window);
}

TEMPLATE_TEST_CASE("kv_cache: a rolling cache of a few slots gives the windowed full forward "
                   "over many more tokens", "[kv_cache][decode][window][rolling]", float,
                   Eigen::bfloat16) {
  // 40 tokens through max_len = W - 1 + 5 slots: chunks of 1, 3, 1, 2 and 5 tokens (5 is the
  // largest chunk that fits next to the W - 1 kept slots), so the cache drops its oldest slots
  // every few appends, with the padding slots of sequence 0 among the first dropped. W = 4 runs
  // with GPT-OSS's attention sinks (its sliding layers use both).
  const Positional positional = GENERATE(Positional::kNone, Positional::kAlibi, Positional::kRope);
  const std::int64_t window = GENERATE(1, 4, 6);
  CAPTURE(name(positional), window);
  Schedule schedule;
  schedule.n = 5;
  schedule.m = 35;
  schedule.max_len = window - 1 + 5;
  schedule.then = {1, 3, 1, 2, 5};
  check_decode_equals_full_forward<TestType>(positional, window, schedule, window == 4);
}

namespace {

/// a * R(p) x for one head vector in long double: pairs (o + j, o + j + r/2) (half-split) or
/// (o + 2j, o + 2j + 1) (interleaved) turned by p * inv_freq[j]; other dims unchanged.
std::vector<long double> rotated(const float* x, Eigen::Index d, const posenc::RopeFrequencies& f,
                                 posenc::RopeLayout layout, std::int64_t p) {
  std::vector<long double> y(x, x + d);
  const Eigen::Index half = f.rotary_dim / 2, o = f.rotary_offset;
  for (Eigen::Index j = 0; j < half; ++j) {
    const Eigen::Index i0 = layout == posenc::RopeLayout::kHalfSplit ? o + j : o + 2 * j;
    const Eigen::Index i1 = layout == posenc::RopeLayout::kHalfSplit ? o + j + half : i0 + 1;
    const long double angle = static_cast<long double>(p) * static_cast<long double>(f.inv_freq[static_cast<std::size_t>(j)]);
    const long double a = f.attention_factor, c = std::cos(angle), sn = std::sin(angle);
    y[static_cast<std::size_t>(i0)] = a * (c * x[i0] - sn * x[i1]);
    y[static_cast<std::size_t>(i1)] = a * (sn * x[i0] + c * x[i1]);
  }
  return y;
}

/// The dim each dim is paired with by the plan's rotation, -1 for pass-through dims.
std::vector<Eigen::Index> pair_partners(Eigen::Index d, const posenc::RopeFrequencies& f,
                                        posenc::RopeLayout layout) {
  std::vector<Eigen::Index> partner(static_cast<std::size_t>(d), -1);
  const Eigen::Index half = f.rotary_dim / 2, o = f.rotary_offset;
  for (Eigen::Index j = 0; j < half; ++j) {
    const Eigen::Index i0 = layout == posenc::RopeLayout::kHalfSplit ? o + j : o + 2 * j;
    const Eigen::Index i1 = layout == posenc::RopeLayout::kHalfSplit ? o + j + half : i0 + 1;
    partner[static_cast<std::size_t>(i0)] = i1;
    partner[static_cast<std::size_t>(i1)] = i0;
  }
  return partner;
}

}  // namespace

TEMPLATE_TEST_CASE("kv_cache: a context shift (erase + shift_positions) leaves the keys the cache "
                   "would hold had the kept tokens been appended at their new positions",
                   "[kv_cache][rope][shift]", float, Eigen::bfloat16, Eigen::half) {
  // 20 slots, sequence 0 left-padded by 3; keep 4 slots, drop the next 5, shift the other 11
  // back by 5 (sequence 0's slot 9 holds position 6 and goes to 1). Expected keys: a R(p) k
  // in long double at each token's new position p. Plans: default half-split; interleaved with an
  // attention factor 1.25 (YaRN-like: the factor must not be applied twice); a partial slice
  // (16 of 32 dims from dim 8).
  constexpr Eigen::Index B = Batch::B, KH = Batch::kv_heads, H = Batch::heads, d = Batch::d;
  const Batch x(20, 0);
  const Eigen::Index N = x.N, keep = 4, drop = 5;
  const int plan = GENERATE(0, 1, 2);
  CAPTURE(plan);
  posenc::RopeParams rp;
  rp.head_dim = d;
  if (plan == 2) {
    rp.rotary_dim = 16;
    rp.rotary_offset = 8;
  }
  posenc::RopeFrequencies freqs = posenc::compute_rope_frequencies(rp);
  if (plan == 1) freqs.attention_factor = 1.25;
  const auto layout = plan == 1 ? posenc::RopeLayout::kInterleaved : posenc::RopeLayout::kHalfSplit;

  posenc::KvCache<TestType> cache(B, N, KH, d);
  cache.set_rope(freqs, layout);
  cache.append(posenc::ConstTensorView<float, 4>(x.k.data(), B, N, KH, d),
               posenc::ConstTensorView<float, 4>(x.v.data(), B, N, KH, d),
               posenc::PositionIdsView(x.pos.data(), B, N),
               posenc::ConstTensorView<std::uint8_t, 2>(x.valid.data(), B, N));
  cache.erase(keep, drop);
  cache.shift_positions(keep, cache.size(), -drop);
  REQUIRE(cache.size() == N - drop);

  const Eigen::Index row = KH * d;
  double worst = 0.0;
  for (Eigen::Index b = 0; b < B; ++b) {
    for (Eigen::Index s = 0; s < N - drop; ++s) {
      const Eigen::Index from = s < keep ? s : s + drop;  // the token's original slot
      const std::int64_t p0 = x.pos[static_cast<std::size_t>(b * N + from)];
      const std::int64_t p = s < keep ? p0 : p0 - drop;
      CAPTURE(b, s, p);
      REQUIRE(cache.positions()(b, s) == p);
      REQUIRE(cache.valid()(b, s) == x.valid[static_cast<std::size_t>(b * N + from)]);
      const float* k0 = x.k.data() + (b * N + from) * row;
      const TestType* got = cache.keys().data() + (b * N + s) * row;
      for (Eigen::Index g = 0; g < KH; ++g) {
        const auto want = rotated(k0 + g * d, d, freqs, layout, p);
        const auto partner = pair_partners(d, freqs, layout);
        for (Eigen::Index c = 0; c < d; ++c) {
          const long double w = want[static_cast<std::size_t>(c)];
          // Appending rounds the pair to T at the old position; the shift turns that error
          // (at most half an ulp of the pair's larger component on each) onto this component
          // and rounds once more. Bound: one ulp of T at the pair's norm, plus half an ulp of
          // T at w (float: the float rotations' error). Pass-through dims: the append's
          // rounding of the input only.
          const Eigen::Index o = partner[static_cast<std::size_t>(c)];
          const long double norm =
              o < 0 ? 0.0L : std::hypot(want[static_cast<std::size_t>(c)], want[static_cast<std::size_t>(o)]);
          const double tol = 2.0 * posenc_test::rounded_once_tolerance<TestType>(norm, 4.0L) +
                             posenc_test::rounded_once_tolerance<TestType>(w, 4.0L);
          const double err = std::abs(static_cast<double>(posenc::detail::to_double(got[g * d + c]) - w));
          worst = std::max(worst, err / tol);
          if (err > tol) {
            CAPTURE(g, c, static_cast<double>(w), err, tol);
            FAIL_CHECK("shifted key off");
          }
        }
      }
      // Values are moved, never rotated.
      const TestType* v = cache.values().data() + (b * N + s) * row;
      for (Eigen::Index i = 0; i < row; ++i) {
        REQUIRE(posenc::detail::to_double(v[i]) ==
                static_cast<double>(TestType(x.v[static_cast<std::size_t>((b * N + from) * row + i)])));
      }
    }
  }
  INFO("worst error / tolerance " << worst);
  CHECK(worst <= 1.0);

  if constexpr (std::is_same_v<TestType, float>) {
    // A query through the shifted cache equals one through a cache built at the new positions.
    posenc::KvCache<float> fresh(B, N, KH, d);
    fresh.set_rope(freqs, layout);
    for (Eigen::Index s = 0; s < N - drop; ++s) {
      const Eigen::Index from = s < keep ? s : s + drop;
      std::vector<float> ks, vs;
      std::vector<std::int64_t> ps;
      std::vector<std::uint8_t> ms;
      for (Eigen::Index b = 0; b < B; ++b) {
        const auto at = static_cast<std::ptrdiff_t>((b * N + from) * row);
        ks.insert(ks.end(), x.k.begin() + at, x.k.begin() + at + row);
        vs.insert(vs.end(), x.v.begin() + at, x.v.begin() + at + row);
        ps.push_back(cache.positions()(b, s));
        ms.push_back(x.valid[static_cast<std::size_t>(b * N + from)]);
      }
      fresh.append(posenc::ConstTensorView<float, 4>(ks.data(), B, 1, KH, d),
                   posenc::ConstTensorView<float, 4>(vs.data(), B, 1, KH, d),
                   posenc::PositionIdsView(ps.data(), B, 1),
                   posenc::ConstTensorView<std::uint8_t, 2>(ms.data(), B, 1));
    }
    const auto q = posenc_test::random_vector<float>(static_cast<std::size_t>(B * H * d), 77);
    std::vector<float> out_shifted(q.size()), out_fresh(q.size());
    cache.attend(posenc::ConstTensorView<float, 4>(q.data(), B, 1, H, d),
                 posenc::TensorView<float, 4>(out_shifted.data(), B, 1, H, d));
    fresh.attend(posenc::ConstTensorView<float, 4>(q.data(), B, 1, H, d),
                 posenc::TensorView<float, 4>(out_fresh.data(), B, 1, H, d));
    POSENC_REQUIRE_CLOSE(posenc_test::compare(
        q.size(), [&](std::size_t i) { return out_shifted[i]; }, [&](std::size_t i) { return out_fresh[i]; }, 1e-5));
  }
}

TEST_CASE("kv_cache: erase and shift_positions reject bad ranges and shifts, changing nothing",
          "[kv_cache][shift][errors]") {
  const Batch x(6, 0);
  constexpr Eigen::Index B = Batch::B, KH = Batch::kv_heads, d = Batch::d;
  posenc::KvCache<float> cache(B, 8, KH, d);
  cache.set_rope(rope_plan(d), posenc::RopeLayout::kHalfSplit);
  cache.append(posenc::ConstTensorView<float, 4>(x.k.data(), B, 6, KH, d),
               posenc::ConstTensorView<float, 4>(x.v.data(), B, 6, KH, d),
               posenc::PositionIdsView(x.pos.data(), B, 6));
  const std::vector<float> keys(cache.keys().data(), cache.keys().data() + cache.keys().size());
  const std::vector<std::int64_t> pos(cache.positions().data(), cache.positions().data() + B * 8);
  REQUIRE_THROWS_AS(cache.erase(4, 3), std::invalid_argument);
  REQUIRE_THROWS_WITH(cache.erase(4, 3), Contains("slots [first, first + count) with first = 4, "
                                                  "count = 3 must lie within [0, size = 6]"));
  REQUIRE_THROWS_WITH(cache.erase(-1, 1), Contains("first = -1, count = 1"));
  REQUIRE_THROWS_WITH(cache.shift_positions(2, 7, 1), Contains("slots [first, last) = [2, 7)"));
  // Sequence 0 is left-padded by 3: slot 4 holds position 1, which a shift by -2 makes -1.
  REQUIRE_THROWS_WITH(cache.shift_positions(4, 6, -2),
                      Contains("position 1 of slot 4 (sequence 0) shifted by delta = -2 leaves [0, 2^53]"));
  CHECK(cache.size() == 6);
  CHECK(std::equal(keys.begin(), keys.end(), cache.keys().data()));
  CHECK(std::equal(pos.begin(), pos.end(), cache.positions().data()));
  cache.shift_positions(4, 6, -1);  // fits: positions 1, 2 and 4, 5 become 0, 1 and 3, 4
  CHECK(cache.positions()(0, 4) == 0);
  CHECK(cache.positions()(1, 5) == 4);
}

TEST_CASE("kv_cache: ALiBi at decode uses the cached positions, not the query length",
          "[kv_cache][alibi]") {
  // One head, d = 1, q = 0: all content scores are 0, so the weights are softmax of the bias
  // alone, -m (t - j) for j = 0..t, and with v_j = j the output is their mean position.
  // A bias built from q_len = 1 would be all zeros and give the plain mean t / 2.
  const Eigen::Index t = 6;
  const double slope = 0.5;
  posenc::KvCache<float> cache(1, 16, 1, 1);
  for (Eigen::Index j = 0; j <= t; ++j) {
    const float kj = 0.25f, vj = static_cast<float>(j);
    const std::int64_t pj = j;
    cache.append(posenc::ConstTensorView<float, 4>(&kj, 1, 1, 1, 1),
                 posenc::ConstTensorView<float, 4>(&vj, 1, 1, 1, 1), posenc::PositionIdsView(&pj, 1, 1));
  }
  AttentionParams params;
  params.alibi_slopes = {slope};
  const float q = 0.0f;
  float out = -1.0f;
  cache.attend(posenc::ConstTensorView<float, 4>(&q, 1, 1, 1, 1), posenc::TensorView<float, 4>(&out, 1, 1, 1, 1),
               params);
  double num = 0.0, den = 0.0;
  for (Eigen::Index j = 0; j <= t; ++j) {
    const double w = std::exp(-slope * static_cast<double>(t - j));
    num += w * static_cast<double>(j);
    den += w;
  }
  CHECK_THAT(out, Catch::Matchers::WithinAbs(num / den, 1e-5));
  CHECK(std::abs(out - 3.0f) > 1.0f);
}

TEST_CASE("kv_cache: appending past capacity throws std::out_of_range and changes nothing",
          "[kv_cache][errors]") {
  posenc::KvCache<Eigen::bfloat16> cache(1, 4, 2, 8);
  const auto k = posenc_test::random_vector<float>(3 * 2 * 8, 1);
  const std::vector<std::int64_t> p = {0, 1, 2, 3, 4, 5};
  cache.append(posenc::ConstTensorView<float, 4>(k.data(), 1, 3, 2, 8),
               posenc::ConstTensorView<float, 4>(k.data(), 1, 3, 2, 8), posenc::PositionIdsView(p.data(), 1, 3));
  const auto keys_before = std::vector<Eigen::bfloat16>(cache.keys().data(), cache.keys().data() + 4 * 2 * 8);
  const auto k2 = posenc_test::random_vector<float>(2 * 2 * 8, 2);
  auto append2 = [&] {
    cache.append(posenc::ConstTensorView<float, 4>(k2.data(), 1, 2, 2, 8),
                 posenc::ConstTensorView<float, 4>(k2.data(), 1, 2, 2, 8), posenc::PositionIdsView(p.data() + 3, 1, 2));
  };
  REQUIRE_THROWS_AS(append2(), std::out_of_range);
  REQUIRE_THROWS_WITH(append2(), Contains("posenc::KvCache::append: appending n = 2 tokens to a cache "
                                          "holding 3 of max_len = 4 slots would overflow it"));
  CHECK(cache.size() == 3);
  const auto keys_after = std::vector<Eigen::bfloat16>(cache.keys().data(), cache.keys().data() + 4 * 2 * 8);
  CHECK(std::equal(keys_before.begin(), keys_before.end(), keys_after.begin(),
                   [](Eigen::bfloat16 a, Eigen::bfloat16 b) { return Eigen::numext::bit_cast<std::uint16_t>(a) == Eigen::numext::bit_cast<std::uint16_t>(b); }));
  // One more token still fits.
  cache.append(posenc::ConstTensorView<float, 4>(k2.data(), 1, 1, 2, 8),
               posenc::ConstTensorView<float, 4>(k2.data(), 1, 1, 2, 8), posenc::PositionIdsView(p.data() + 3, 1, 1));
  CHECK(cache.size() == 4);
}

TEST_CASE("kv_cache: a rolling cache rejects chunks that do not fit next to its W - 1 kept "
          "slots, and windows wider than its own, changing nothing", "[kv_cache][errors][rolling]") {
  REQUIRE_THROWS_AS(posenc::KvCache<float>(1, 4, 2, 8, 5), std::invalid_argument);
  REQUIRE_THROWS_WITH(posenc::KvCache<float>(1, 4, 2, 8, 5),
                      Contains("sliding_window = 5 must be in [0, max_len = 4]"));
  REQUIRE_THROWS_WITH(posenc::KvCache<float>(1, 4, 2, 8, -1), Contains("sliding_window = -1"));

  // max_len 6, W 4: after 5 tokens, 3 are kept and at most 3 more fit in one append.
  posenc::KvCache<float> cache(1, 6, 2, 8, 4);
  const auto x = posenc_test::random_vector<float>(6 * 2 * 8, 4);
  const std::vector<std::int64_t> p = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  auto append = [&](Eigen::Index n, Eigen::Index p0) {
    cache.append(posenc::ConstTensorView<float, 4>(x.data(), 1, n, 2, 8),
                 posenc::ConstTensorView<float, 4>(x.data(), 1, n, 2, 8),
                 posenc::PositionIdsView(p.data() + p0, 1, n));
  };
  append(5, 0);
  const std::vector<float> before(cache.keys().data(), cache.keys().data() + cache.keys().size());
  const std::vector<std::int64_t> pos_before(cache.positions().data(), cache.positions().data() + 6);
  REQUIRE_THROWS_AS(append(4, 5), std::out_of_range);
  REQUIRE_THROWS_WITH(append(4, 5), Contains("posenc::KvCache::append: appending n = 4 tokens to a "
                                             "rolling cache of max_len = 6 slots that must keep the "
                                             "last sliding_window - 1 = 3") &&
                                        Contains("chunks of at most 3 tokens"));
  CHECK(cache.size() == 5);
  CHECK(cache.evicted() == 0);
  CHECK(std::equal(before.begin(), before.end(), cache.keys().data()));
  CHECK(std::equal(pos_before.begin(), pos_before.end(), cache.positions().data()));

  std::vector<float> out(4 * 8, 9.0f);
  const posenc::ConstTensorView<float, 4> q(x.data(), 1, 1, 4, 8);
  const posenc::TensorView<float, 4> o(out.data(), 1, 1, 4, 8);
  AttentionParams params;
  REQUIRE_THROWS_WITH(cache.attend(q, o, params),
                      Contains("params.sliding_window = 0 must be in [1, 4]"));
  params.sliding_window = 5;
  REQUIRE_THROWS_AS(cache.attend(q, o, params), std::invalid_argument);
  CHECK(std::all_of(out.begin(), out.end(), [](float v) { return v == 9.0f; }));
  params.sliding_window = 3;  // narrower than the cache's window: fine
  cache.attend(q, o, params);
  CHECK(out[0] != 9.0f);

  append(3, 5);  // fits exactly: the oldest 2 slots go
  CHECK(cache.size() == 6);
  CHECK(cache.evicted() == 2);
  CHECK(cache.positions()(0, 0) == 2);
  CHECK(cache.positions()(0, 5) == 7);
  cache.clear();
  CHECK(cache.evicted() == 0);
}

TEST_CASE("kv_cache: bad input throws std::invalid_argument before any write", "[kv_cache][errors]") {
  posenc::KvCache<float> cache(1, 8, 2, 8);
  const auto x = posenc_test::random_vector<float>(4 * 4 * 8, 3);
  const std::vector<std::int64_t> p = {0, 1, 2, 3};
  SECTION("head_dim mismatch on append") {
    REQUIRE_THROWS_WITH(cache.append(posenc::ConstTensorView<float, 4>(x.data(), 1, 2, 2, 4),
                                     posenc::ConstTensorView<float, 4>(x.data(), 1, 2, 2, 4),
                                     posenc::PositionIdsView(p.data(), 1, 2)),
                        Contains("must be [batch, n, kv_heads, head_dim] = [1, 2, 2, 8]"));
    CHECK(cache.size() == 0);
  }
  SECTION("negative position") {
    const std::vector<std::int64_t> bad = {0, -1};
    REQUIRE_THROWS_WITH(cache.append(posenc::ConstTensorView<float, 4>(x.data(), 1, 2, 2, 8),
                                     posenc::ConstTensorView<float, 4>(x.data(), 1, 2, 2, 8),
                                     posenc::PositionIdsView(bad.data(), 1, 2)),
                        Contains("positions[0, 1] = -1"));
    CHECK(cache.size() == 0);
  }
  SECTION("attend: q_len beyond the cached tokens, heads not a multiple of kv_heads") {
    cache.append(posenc::ConstTensorView<float, 4>(x.data(), 1, 2, 2, 8),
                 posenc::ConstTensorView<float, 4>(x.data(), 1, 2, 2, 8), posenc::PositionIdsView(p.data(), 1, 2));
    std::vector<float> out(4 * 3 * 8, 9.0f);
    REQUIRE_THROWS_WITH(cache.attend(posenc::ConstTensorView<float, 4>(x.data(), 1, 3, 2, 8),
                                     posenc::TensorView<float, 4>(out.data(), 1, 3, 2, 8)),
                        Contains("q_len = 3 must be in [1, size = 2]"));
    REQUIRE_THROWS_WITH(cache.attend(posenc::ConstTensorView<float, 4>(x.data(), 1, 1, 3, 8),
                                     posenc::TensorView<float, 4>(out.data(), 1, 1, 3, 8)),
                        Contains("heads = 3 must be a multiple of kv_heads = 2"));
    AttentionParams params;
    params.alibi_slopes = {0.5};
    REQUIRE_THROWS_WITH(cache.attend(posenc::ConstTensorView<float, 4>(x.data(), 1, 1, 4, 8),
                                     posenc::TensorView<float, 4>(out.data(), 1, 1, 4, 8), params),
                        Contains("alibi_slopes has 1 entries"));
    CHECK(std::all_of(out.begin(), out.end(), [](float o) { return o == 9.0f; }));
  }
  SECTION("update_rope without a plan, or with one of another slice") {
    cache.append(posenc::ConstTensorView<float, 4>(x.data(), 1, 2, 2, 8),
                 posenc::ConstTensorView<float, 4>(x.data(), 1, 2, 2, 8), posenc::PositionIdsView(p.data(), 1, 2));
    const std::vector<float> before(cache.keys().data(), cache.keys().data() + cache.keys().size());
    const auto unchanged = [&] { return std::equal(before.begin(), before.end(), cache.keys().data()); };
    REQUIRE_THROWS_WITH(cache.update_rope(rope_plan(8)), Contains("no RoPE plan is set"));
    CHECK(unchanged());
    cache.set_rope(rope_plan(8), posenc::RopeLayout::kInterleaved);
    posenc::RopeParams rp;
    rp.head_dim = 8;
    rp.partial_rotary_factor = 0.5;
    REQUIRE_THROWS_WITH(cache.update_rope(posenc::compute_rope_frequencies(rp)),
                        Contains("KvCache::update_rope") && Contains("rotary_dim 4 vs 8"));
    CHECK(unchanged());
  }
  SECTION("a RoPE plan wider than head_dim") {
    posenc::RopeParams rp;
    rp.head_dim = 16;
    REQUIRE_THROWS_WITH(cache.set_rope(posenc::compute_rope_frequencies(rp), posenc::RopeLayout::kHalfSplit),
                        Contains("must be <= head_dim = 8"));
    CHECK_FALSE(cache.has_rope());
    // An offset near INT64_MAX: offset + rotary_dim wrapped negative and passed the check.
    rp.head_dim = 8;
    auto far = posenc::compute_rope_frequencies(rp);
    far.rotary_offset = std::numeric_limits<Eigen::Index>::max() - 2;
    REQUIRE_THROWS_WITH(cache.set_rope(far, posenc::RopeLayout::kHalfSplit),
                        Contains("rotary_offset + rotary_dim = 9223372036854775805 + 8 must be <= head_dim = 8"));
    CHECK_FALSE(cache.has_rope());
  }
}

TEMPLATE_TEST_CASE("kv_cache: update_rope re-rotates the stored keys to the new plan, rounded once",
                   "[kv_cache][rope]", float, Eigen::bfloat16) {
  // A dynamic-NTK plan that changes as the sequence outgrows max_position_embeddings, and a
  // LongRoPE plan switching from short to long factors at L0 (Phi-3; llama.cpp PR #24875 asks
  // for exactly this re-rotation instead of a re-prefill).
  constexpr Eigen::Index B = Batch::B, H = Batch::heads, KH = Batch::kv_heads, d = Batch::d;
  const Batch x(24, 0);
  const Eigen::Index N = x.N;
  const bool longrope = GENERATE(false, true);
  CAPTURE(longrope);
  const auto [old_freqs, new_freqs] = longrope ? posenc_test::longrope_plan_change(d, 8, N)
                                               : posenc_test::dynamic_plan_change(d, 8, 2.0, N);
  const auto layout = posenc::RopeLayout::kInterleaved;
  auto fill = [&](auto& kv, const posenc::RopeFrequencies& freqs) {
    kv.set_rope(freqs, layout);
    kv.append(posenc::ConstTensorView<float, 4>(x.k.data(), B, N, KH, d),
              posenc::ConstTensorView<float, 4>(x.v.data(), B, N, KH, d),
              posenc::PositionIdsView(x.pos.data(), B, N),
              posenc::ConstTensorView<std::uint8_t, 2>(x.valid.data(), B, N));
  };

  posenc::KvCache<TestType> cache(B, N + 3, KH, d);
  fill(cache, old_freqs);
  const std::vector<TestType> stored(cache.keys().data(), cache.keys().data() + cache.keys().size());
  cache.update_rope(new_freqs);

  // Expected: each stored pair turned by p (w_new - w_old) in long double (both plans of a
  // change have the same attention factor, already in the stored keys), then rounded once to
  // the storage type.
  const Eigen::Index row = KH * d;
  for (Eigen::Index b = 0; b < B; ++b) {
    for (Eigen::Index s = 0; s < N; ++s) {
      const long double pos = static_cast<long double>(x.pos[static_cast<std::size_t>(b * N + s)]);
      for (Eigen::Index h = 0; h < KH; ++h) {
        const auto at = static_cast<std::size_t>((b * (N + 3) + s) * row + h * d);
        for (std::size_t j = 0; j < static_cast<std::size_t>(d / 2); ++j) {
          const long double angle = pos * new_freqs.inv_freq[j] - pos * old_freqs.inv_freq[j];
          const long double x1 = posenc::detail::to_double(stored[at + 2 * j]);
          const long double x2 = posenc::detail::to_double(stored[at + 2 * j + 1]);
          const long double e1 = x1 * std::cos(angle) - x2 * std::sin(angle);
          const long double e2 = x2 * std::cos(angle) + x1 * std::sin(angle);
          for (const auto& [i, e] : {std::pair{at + 2 * j, e1}, std::pair{at + 2 * j + 1, e2}}) {
            const double tol = posenc_test::rounded_once_tolerance<TestType>(e, std::fabs(x1) + std::fabs(x2));
            REQUIRE_THAT(posenc::detail::to_double(cache.keys().data()[i]),
                         Catch::Matchers::WithinAbs(static_cast<double>(e), tol));
          }
        }
      }
    }
  }

  // Decode after the update equals a cache filled with the new plan from the start (float; the
  // re-rotated bfloat16 keys carry the first rotation's rounding as well).
  if constexpr (std::is_same_v<TestType, float>) {
    posenc::KvCache<float> fresh(B, N + 3, KH, d);
    fill(fresh, new_freqs);
    const auto q = slots(x.q, N, H, d, N - 1, 1);
    std::vector<float> out(q.size()), want(q.size());
    AttentionParams params;
    cache.attend(posenc::ConstTensorView<float, 4>(q.data(), B, 1, H, d),
                 posenc::TensorView<float, 4>(out.data(), B, 1, H, d), params);
    fresh.attend(posenc::ConstTensorView<float, 4>(q.data(), B, 1, H, d),
                 posenc::TensorView<float, 4>(want.data(), B, 1, H, d), params);
    POSENC_REQUIRE_CLOSE(posenc_test::compare(
        out.size(), [&](std::size_t i) { return out[i]; }, [&](std::size_t i) { return want[i]; }, 1e-5));
  }
}

// attend's lse: each row's log-sum-exp, against long double from its definition over the
// cache's stored keys; and what it is for, cascade attention: a request's own tokens in one
// cache, its (left-padded) prefix attended elsewhere, merged, equal one cache holding both.
TEMPLATE_TEST_CASE("kv_cache: attend's lse is each row's log-sum-exp and merges a request's own "
                   "cache with its prefix attended elsewhere (cascade)",
                   "[kv_cache][lse]", float, Eigen::bfloat16) {
  constexpr Eigen::Index B = Batch::B, H = Batch::heads, KH = Batch::kv_heads, d = Batch::d;
  constexpr Eigen::Index P = 70, n = 6, m = 3;  // the prefix spans two 64-key tiles
  const Batch x(P, n + m);
  const Eigen::Index N = x.N;
  const auto freqs = rope_plan(d);
  const auto layout = posenc::RopeLayout::kHalfSplit;
  const AttentionParams params;  // causal
  const bool rope = GENERATE(true, false);
  CAPTURE(rope);

  posenc::KvCache<TestType> whole(B, N, KH, d), own(B, n + m, KH, d);
  if (rope) {
    whole.set_rope(freqs, layout);
    own.set_rope(freqs, layout);
  }
  append_slots(whole, x, 0, P);
  // The prefix as another store holds it: the cache's rotated, rounded rows, and its padding.
  const auto stored = [&](const auto& view, Eigen::Index len) {
    std::vector<float> rows;
    for (Eigen::Index b = 0; b < B; ++b) {
      for (Eigen::Index i = 0; i < len * KH * d; ++i) {
        rows.push_back(static_cast<float>(view.data()[b * N * KH * d + i]));
      }
    }
    return rows;
  };
  const std::vector<float> prefix_k = stored(whole.keys(), P), prefix_v = stored(whole.values(), P);
  const std::vector<std::uint8_t> prefix_valid = slots_of(x.valid, N, 0, P);
  AttentionMetadata prefix_meta;
  prefix_meta.key_mask = posenc::ConstTensorView<std::uint8_t, 2>(prefix_valid.data(), B, P);
  AttentionParams all_of_prefix;
  all_of_prefix.mask = MaskMode::kBidirectional;

  constexpr float kUnwritten = -7.0f;
  for (const auto& [s0, len] : {std::pair<Eigen::Index, Eigen::Index>{P, n}, {P + n, 1},
                                {P + n + 1, 1}, {P + n + 2, 1}}) {
    CAPTURE(s0, len);
    append_slots(whole, x, s0, len);
    append_slots(own, x, s0, len);
    const auto qs = slots(x.q, N, H, d, s0, len);
    const posenc::ConstTensorView<float, 4> q(qs.data(), B, len, H, d);
    const auto rows = static_cast<std::size_t>(B * len * H);
    std::vector<float> out(qs.size(), kUnwritten), lse(rows, kUnwritten);
    whole.attend(q, posenc::TensorView<float, 4>(out.data(), B, len, H, d), params,
                 posenc::TensorView<float, 3>(lse.data(), B, len, H));

    // lse from its definition: q rotated in long double (half-split pairs (c, c + d/2) at
    // angle p theta^(-2c/d)), dotted with the stored keys of the slots the query sees.
    const long double scale = 1.0L / std::sqrt(static_cast<long double>(d));
    for (Eigen::Index b = 0; b < B; ++b) {
      for (Eigen::Index i = 0; i < len; ++i) {
        const Eigen::Index slot = s0 + i;
        const auto p = static_cast<long double>(x.pos[static_cast<std::size_t>(b * N + slot)]);
        for (Eigen::Index h = 0; h < H; ++h) {
          const float* qr = qs.data() + ((b * len + i) * H + h) * d;
          std::vector<long double> qrot(static_cast<std::size_t>(d));
          for (Eigen::Index c = 0; c < d / 2; ++c) {
            const long double a = rope ? p * std::pow(10000.0L, -2.0L * c / d) : 0.0L;
            qrot[c] = qr[c] * std::cos(a) - qr[c + d / 2] * std::sin(a);
            qrot[c + d / 2] = qr[c + d / 2] * std::cos(a) + qr[c] * std::sin(a);
          }
          long double sum = 0.0L;
          for (Eigen::Index j = 0; j <= slot; ++j) {
            if (x.valid[static_cast<std::size_t>(b * N + j)] == 0) continue;
            const TestType* kr = whole.keys().data() + ((b * N + j) * KH + h / (H / KH)) * d;
            long double dot = 0.0L;
            for (Eigen::Index c = 0; c < d; ++c) dot += qrot[c] * posenc::detail::to_double(kr[c]);
            sum += std::exp(scale * dot);
          }
          CAPTURE(b, i, h);
          CHECK_THAT(lse[static_cast<std::size_t>((b * len + i) * H + h)],
                     Catch::Matchers::WithinAbs(static_cast<double>(std::log(sum)), 2e-5));
        }
      }
    }

    // Cascade: the own cache's state merged with the prefix's, queries rotated as the cache
    // rotates them (in float, by their positions) when it has RoPE.
    std::vector<float> own_out(qs.size(), kUnwritten), own_lse(rows, kUnwritten);
    own.attend(q, posenc::TensorView<float, 4>(own_out.data(), B, len, H, d), params,
               posenc::TensorView<float, 3>(own_lse.data(), B, len, H));
    std::vector<float> q_rot = qs;
    const auto ps = slots_of(x.pos, N, s0, len);
    if (rope) {
      posenc::apply_rope_inplace<float>(posenc::TensorView<float, 4>(q_rot.data(), B, len, H, d),
                                        posenc::PositionIdsView(ps.data(), B, len), freqs, layout);
    }
    std::vector<float> prefix_out(qs.size()), prefix_lse(rows);
    posenc::attention<float>(posenc::ConstTensorView<float, 4>(q_rot.data(), B, len, H, d),
                             posenc::ConstTensorView<float, 4>(prefix_k.data(), B, P, KH, d),
                             posenc::ConstTensorView<float, 4>(prefix_v.data(), B, P, KH, d),
                             posenc::TensorView<float, 4>(prefix_out.data(), B, len, H, d),
                             posenc::TensorView<float, 3>(prefix_lse.data(), B, len, H),
                             all_of_prefix, prefix_meta);
    posenc::merge_attention_state_inplace<float>(
        posenc::TensorView<float, 4>(own_out.data(), B, len, H, d),
        posenc::TensorView<float, 3>(own_lse.data(), B, len, H),
        posenc::ConstTensorView<float, 4>(prefix_out.data(), B, len, H, d),
        posenc::ConstTensorView<float, 3>(prefix_lse.data(), B, len, H));
    POSENC_REQUIRE_CLOSE(posenc_test::compare(
        out.size(), [&](std::size_t e) { return own_out[e]; }, [&](std::size_t e) { return out[e]; },
        1e-5));
    POSENC_REQUIRE_CLOSE(posenc_test::compare(
        rows, [&](std::size_t r) { return own_lse[r]; }, [&](std::size_t r) { return lse[r]; }, 1e-5));
  }

  // An lse of the wrong shape is rejected before anything is written, in the tree overload too.
  const auto qs = slots(x.q, N, H, d, N - 1, 1);
  std::vector<float> out(qs.size(), kUnwritten), lse(B * H, kUnwritten);
  const std::vector<std::uint8_t> tree(B, 1);
  for (const bool with_tree : {false, true}) {
    CAPTURE(with_tree);
    const posenc::TensorView<float, 3> wrong(lse.data(), B, H, 1);
    const posenc::ConstTensorView<float, 4> q(qs.data(), B, 1, H, d);
    const posenc::TensorView<float, 4> o(out.data(), B, 1, H, d);
    const auto call = [&] {
      if (with_tree) {
        whole.attend(q, o, posenc::ConstTensorView<std::uint8_t, 3>(tree.data(), B, 1, 1), params,
                     wrong);
      } else {
        whole.attend(q, o, params, wrong);
      }
    };
    REQUIRE_THROWS_AS(call(), std::invalid_argument);
    REQUIRE_THROWS_WITH(call(), Contains("KvCache::attend") && Contains("lse shape [2, 8, 1]"));
    CHECK(std::all_of(out.begin(), out.end(), [&](float e) { return e == kUnwritten; }));
    CHECK(std::all_of(lse.begin(), lse.end(), [&](float e) { return e == kUnwritten; }));
  }
}

// Rows 16 bytes into a cache line (std::vector's alignment) made every 64-byte load of a KV row
// touch two lines. The storage, and so every row whose width is a multiple of 64 bytes, starts
// on a line, for every element type and several shapes (allocation sizes).
TEMPLATE_TEST_CASE("kv_cache: K and V storage starts on a 64-byte cache line", "[kv_cache]",
                   float, double, Eigen::bfloat16, Eigen::half) {
  for (const auto& [batch, max_len, kv_heads, d] :
       {std::array<Eigen::Index, 4>{1, 1, 1, 2}, {1, 24, 8, 128}, {2, 7, 3, 80}, {3, 96, 1, 64}}) {
    posenc::KvCache<TestType> cache(batch, max_len, kv_heads, d);
    CAPTURE(batch, max_len, kv_heads, d);
    CHECK(reinterpret_cast<std::uintptr_t>(cache.keys().data()) % 64 == 0);
    CHECK(reinterpret_cast<std::uintptr_t>(cache.values().data()) % 64 == 0);
  }
}

// ---- From a mutation audit (twenty-ninth session) ----

namespace {

/// Appends n tokens of one sequence (batch 1, kv_heads 1, head_dim d) at positions p0, p0 + 1, ...
/// with every key and value element equal to its token index t + x0.
void append_tokens(posenc::KvCache<float>& cache, Eigen::Index n, std::int64_t p0,
                   float x0 = 0.0f) {
  const Eigen::Index d = cache.head_dim();
  std::vector<float> k(static_cast<std::size_t>(n * d));
  std::vector<std::int64_t> p(static_cast<std::size_t>(n));
  for (Eigen::Index t = 0; t < n; ++t) {
    p[static_cast<std::size_t>(t)] = p0 + t;
    for (Eigen::Index c = 0; c < d; ++c) k[static_cast<std::size_t>(t * d + c)] = x0 + float(t);
  }
  cache.append(posenc::ConstTensorView<float, 4>(k.data(), 1, n, 1, d),
               posenc::ConstTensorView<float, 4>(k.data(), 1, n, 1, d),
               posenc::PositionIdsView(p.data(), 1, n));
}

}  // namespace

TEST_CASE("kv_cache: constructor bounds - a window of exactly max_len, no zero max_len or "
          "negative v_head_dim", "[kv_cache][errors][rolling]") {
  // Documented: sliding_window in [0, max_len], every dimension > 0, v_head_dim >= 0.
  REQUIRE_THROWS_AS(posenc::KvCache<float>(1, 0, 1, 2), std::invalid_argument);
  REQUIRE_THROWS_AS(posenc::KvCache<float>(1, 4, 1, 2, 0, -1), std::invalid_argument);
  // Named as such (not only as a storage size that fails to compute).
  REQUIRE_THROWS_WITH(posenc::KvCache<float>(1, 4, 1, 2, 0, -1), Contains("v_head_dim = -1"));
  REQUIRE_NOTHROW(posenc::KvCache<float>(1, 4, 1, 2, 0, 0));
  // W = max_len = 4 is allowed: 4 tokens fill it, a 5th keeps the newest W - 1 = 3.
  posenc::KvCache<float> cache(1, 4, 1, 2, 4);
  append_tokens(cache, 4, 0);
  CHECK(cache.evicted() == 0);
  append_tokens(cache, 1, 4);
  CHECK(cache.size() == 4);
  CHECK(cache.evicted() == 1);
  CHECK(cache.positions()(0, 0) == 1);
}

TEST_CASE("kv_cache: shift_positions reaches both ends of [0, 2^53] exactly",
          "[kv_cache][shift]") {
  constexpr std::int64_t kMax = std::int64_t{1} << 53;
  posenc::KvCache<float> cache(1, 4, 1, 2);
  append_tokens(cache, 1, 0);
  append_tokens(cache, 1, kMax);
  // Slot 0 at position 0 shifted by +2^53 lands on 2^53; slot 1 at 2^53 by -2^53 on 0.
  REQUIRE_NOTHROW(cache.shift_positions(0, 1, kMax));
  CHECK(cache.positions()(0, 0) == kMax);
  REQUIRE_NOTHROW(cache.shift_positions(1, 2, -kMax));
  CHECK(cache.positions()(0, 1) == 0);
  // One past either end throws, changing nothing.
  REQUIRE_THROWS_AS(cache.shift_positions(0, 1, 1), std::invalid_argument);
  REQUIRE_THROWS_AS(cache.shift_positions(1, 2, -1), std::invalid_argument);
  REQUIRE_THROWS_AS(cache.shift_positions(0, 0, -kMax - 1), std::invalid_argument);
  CHECK(cache.positions()(0, 0) == kMax);
  CHECK(cache.positions()(0, 1) == 0);
}

TEST_CASE("kv_cache: any nonzero validity entry is stored as 1", "[kv_cache]") {
  posenc::KvCache<float> cache(1, 4, 1, 2);
  const std::vector<float> k(3 * 2, 0.5f);
  const std::vector<std::int64_t> p = {0, 1, 2};
  const std::vector<std::uint8_t> valid = {0, 2, 255};
  cache.append(posenc::ConstTensorView<float, 4>(k.data(), 1, 3, 1, 2),
               posenc::ConstTensorView<float, 4>(k.data(), 1, 3, 1, 2),
               posenc::PositionIdsView(p.data(), 1, 3),
               posenc::ConstTensorView<std::uint8_t, 2>(valid.data(), 1, 3));
  CHECK(cache.valid()(0, 0) == 0);
  CHECK(cache.valid()(0, 1) == 1);
  CHECK(cache.valid()(0, 2) == 1);
}

TEST_CASE("kv_cache: an empty append or a validity mask of the wrong length throws, changing "
          "nothing", "[kv_cache][errors]") {
  posenc::KvCache<float> cache(1, 4, 1, 2);
  append_tokens(cache, 1, 0);
  const std::vector<float> k(2 * 2, 0.5f);
  const std::vector<std::int64_t> p = {1, 2, 3};
  const std::vector<std::uint8_t> valid = {1, 1, 1};
  REQUIRE_THROWS_AS(cache.append(posenc::ConstTensorView<float, 4>(k.data(), 1, 0, 1, 2),
                                 posenc::ConstTensorView<float, 4>(k.data(), 1, 0, 1, 2),
                                 posenc::PositionIdsView(p.data(), 1, 0)),
                    std::invalid_argument);
  REQUIRE_THROWS_AS(cache.append(posenc::ConstTensorView<float, 4>(k.data(), 1, 2, 1, 2),
                                 posenc::ConstTensorView<float, 4>(k.data(), 1, 2, 1, 2),
                                 posenc::PositionIdsView(p.data(), 1, 2),
                                 posenc::ConstTensorView<std::uint8_t, 2>(valid.data(), 1, 3)),
                    std::invalid_argument);
  CHECK(cache.size() == 1);
}

TEST_CASE("kv_cache: constructor bounds - no zero batch, kv_heads or head_dim",
          "[kv_cache][errors]") {
  // Documented: std::invalid_argument when a dimension is <= 0.
  REQUIRE_THROWS_AS(posenc::KvCache<float>(0, 4, 1, 2), std::invalid_argument);
  REQUIRE_THROWS_AS(posenc::KvCache<float>(1, 4, 0, 2), std::invalid_argument);
  REQUIRE_THROWS_AS(posenc::KvCache<float>(1, 4, 1, 0), std::invalid_argument);
  REQUIRE_THROWS_AS(posenc::KvCache<float>(1, 4, 1, 0, 0, 2), std::invalid_argument);
  REQUIRE_THROWS_AS(posenc::KvCache<float>::latent(0, 4, 1, 4, 2), std::invalid_argument);
}

TEST_CASE("kv_cache: append checks the kv_heads extent of k and changes nothing",
          "[kv_cache][errors]") {
  constexpr Eigen::Index kvh = 2, d = 4;
  posenc::KvCache<float> cache(1, 4, kvh, d);
  std::vector<float> x(static_cast<std::size_t>((kvh + 1) * d), 1.5f);
  std::int64_t pos = 0;
  // k with one kv head too many (v right): documented to throw std::invalid_argument.
  REQUIRE_THROWS_AS(cache.append(posenc::ConstTensorView<float, 4>(x.data(), 1, 1, kvh + 1, d),
                                 posenc::ConstTensorView<float, 4>(x.data(), 1, 1, kvh, d),
                                 posenc::PositionIdsView(&pos, 1, 1)),
                    std::invalid_argument);
  CHECK(cache.size() == 0);
  CHECK(cache.keys().data()[0] == 0.0f);
}


TEST_CASE("kv_cache: erase and shift_positions refuse a negative count or a reversed range",
          "[kv_cache][errors][shift]") {
  // Documented: erase needs 0 <= first <= first + count <= size(), shift_positions
  // 0 <= first <= last <= size(); either throws std::invalid_argument, changing nothing.
  constexpr Eigen::Index d = 2;
  posenc::KvCache<float> cache(1, 4, 1, d);
  std::vector<float> k(static_cast<std::size_t>(3 * d), 1.0f);
  const std::vector<std::int64_t> pos{10, 11, 12};
  cache.append(posenc::ConstTensorView<float, 4>(k.data(), 1, 3, 1, d),
               posenc::ConstTensorView<float, 4>(k.data(), 1, 3, 1, d),
               posenc::PositionIdsView(pos.data(), 1, 3));
  const auto unchanged = [&] {
    return cache.size() == 3 && cache.positions()(0, 0) == 10 && cache.positions()(0, 1) == 11 &&
           cache.positions()(0, 2) == 12;
  };
  REQUIRE_THROWS_AS(cache.erase(0, -1), std::invalid_argument);
  CHECK(unchanged());
  REQUIRE_THROWS_AS(cache.erase(1, -1), std::invalid_argument);
  CHECK(unchanged());
  REQUIRE_THROWS_AS(cache.shift_positions(2, 1, 5), std::invalid_argument);
  CHECK(unchanged());
  REQUIRE_THROWS_AS(cache.shift_positions(-1, 1, 5), std::invalid_argument);
  CHECK(unchanged());
}
